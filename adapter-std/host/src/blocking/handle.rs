//! The caller's side of a call: [`BlockingCallHandle`] and [`BlockingCanceller`].
//!
//! A handle talks to the call's owner through the owner's event channel and
//! reads what the owner publishes (state, approval card, outcome). It does
//! not own the call: dropping it is a client disconnect, and the
//! owner still finishes the call, writes the record and reaps the helper.

use std::any::Any;
use std::io;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use spillguard_core::{ApprovalCard, CallError, Outcome, State};

use super::{HelperStdin, HelperStdout, Mailbox, Reply};
use crate::handle::{Ask, HandleCore, ToOwner};
use crate::published::{self, Snapshot, Taken};

/// What the owner publishes for the handle.
pub(crate) type Published = published::Published<Condvar>;

/// Where an owner that panicked leaves its panic, for the handle to resume.
pub(crate) type OwnerPanic = Arc<Mutex<Option<Box<dyn Any + Send>>>>;

/// The caller's handle on a running call whose owner is a thread: what
/// std's `CallHandle` wraps, whose docs say what each method and dropping
/// the handle do, and when a wait panics.
#[derive(Debug)]
pub struct BlockingCallHandle {
    core: HandleCore<Reply, Condvar>,
    owner_panic: OwnerPanic,
}

/// Every method that is the same on every runtime is a one-line delegation
/// to the host layer's [`HandleCore`]; this runtime keeps how it waits (on the
/// published state's `Condvar`, on the answer's channel) and the resumed
/// panic of an owner that died.
impl BlockingCallHandle {
    pub(crate) fn new(
        call_id: String,
        commands: Mailbox,
        published: Arc<Published>,
        owner_panic: OwnerPanic,
    ) -> Self {
        let to_owner = ToOwner::new(move |event| commands.send(event).is_ok());
        Self {
            core: HandleCore::new(call_id, published, to_owner),
            owner_panic,
        }
    }

    /// A streamed call's ([`CallBuilder::streamed`]) stdin and stdout:
    /// waits until the helper is spawned (after its approval, if it needs
    /// one), then hands out both, once. An error if the call ended before
    /// its helper ran, is not streamed, or its streams were taken.
    ///
    /// [`CallBuilder::streamed`]: crate::CallBuilder::streamed
    pub fn streams(&self) -> io::Result<(HelperStdin, HelperStdout)> {
        let published = self.core.published();
        let taken = published
            .wait_until(None, Snapshot::streams_settled)
            .take_streams();
        self.core
            .streams(taken, HelperStdin::new, HelperStdout::new)
    }

    /// The call's id.
    pub fn call_id(&self) -> &str {
        self.core.call_id()
    }

    /// The helper's pid (its process group id too) while it runs: `None`
    /// before it is spawned, once the call finished, and for a call that
    /// never spawned one.
    pub fn id(&self) -> Option<u32> {
        self.core.pid()
    }

    /// The call's state as last published by its owner.
    pub fn state(&self) -> State {
        self.core.state()
    }

    /// Whether the call has ended (its outcome is ready or was taken).
    pub fn is_finished(&self) -> bool {
        self.core.is_finished()
    }

    /// The approval card, once shown. It is built once and never changes.
    pub fn card(&self) -> Option<ApprovalCard> {
        self.core.card()
    }

    /// Waits at most `timeout` for the approval card. `None` if the call
    /// ended without asking for approval, or the time ran out.
    pub fn wait_card(&self, timeout: Duration) -> Option<ApprovalCard> {
        let deadline = Instant::now().checked_add(timeout);
        let published = self.core.published();
        published
            .wait_until(deadline, Snapshot::card_settled)
            .card
            .clone()
    }

    /// Grants approval. An error if the call is not awaiting approval
    /// (for instance it already expired or was cancelled).
    pub fn approve(&self) -> Result<(), CallError> {
        self.ask(Ask::Approve)
    }

    /// Denies approval: the call ends `denied` and nothing is spawned. An
    /// error if the call is not awaiting approval.
    pub fn deny(&self) -> Result<(), CallError> {
        self.ask(Ask::Deny)
    }

    fn ask(&self, ask: Ask) -> Result<(), CallError> {
        let answer = self.core.ask(ask, mpsc::sync_channel(1))?;
        self.core.answered(ask, answer.recv().ok())
    }

    /// Tells the call that its approval card reached the approver (the
    /// caller wrote it where the approver reads it: an MCP server, once the
    /// `elicitation/create` request was flushed): the approval deadline
    /// then runs from now, once, so that time spent before delivery (many
    /// calls at once, a slow audit log) is not taken from the approver. A
    /// card never reported delivered expires `approval_timeout` after it
    /// was shown. Returns at once; ignored unless the call awaits approval
    /// and no delivery was reported yet. See
    /// [`Input::CardDelivered`](spillguard_core::Input::CardDelivered).
    pub fn card_delivered(&self) {
        self.core.card_delivered();
    }

    /// Asks the call to stop. Before dispatch it ends
    /// `cancelled_before_dispatch`; after, the helper's group gets SIGTERM,
    /// then SIGKILL after the grace. Returns at once; ignored once finished.
    pub fn cancel(&self) {
        self.core.cancel();
    }

    /// A cancel-only handle that can be sent to another thread (a signal
    /// handler, a UI) while this one waits.
    pub fn canceller(&self) -> BlockingCanceller {
        BlockingCanceller(self.core.to_owner())
    }

    /// Waits for the call to finish and returns its outcome.
    pub fn wait(self) -> Outcome {
        match self.take_outcome(None) {
            Taken::Outcome(outcome) => *outcome,
            Taken::OwnerGone | Taken::NotYet => self.owner_failed(),
        }
    }

    /// Waits at most `timeout`. Gives the handle back if the call has not
    /// finished by then: drop it to give up (a client disconnect; the owner
    /// carries on), or wait again.
    pub fn wait_timeout(self, timeout: Duration) -> Result<Outcome, BlockingCallHandle> {
        let deadline = Instant::now().checked_add(timeout);
        let taken = self.take_outcome(deadline);
        taken.or_handle(self, |handle| handle.owner_failed())
    }

    /// The outcome if the call has finished, else the handle back.
    pub fn try_outcome(self) -> Result<Outcome, BlockingCallHandle> {
        self.wait_timeout(Duration::ZERO)
    }

    fn take_outcome(&self, deadline: Option<Instant>) -> Taken {
        let published = self.core.published();
        published
            .wait_until(deadline, Snapshot::outcome_ready)
            .take_outcome()
    }

    fn owner_failed(self) -> ! {
        let panic = self
            .owner_panic
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(panic) = panic {
            std::panic::resume_unwind(panic);
        }
        self.core.owner_gone("");
    }
}

/// Cancels one call from anywhere; cheap to clone.
#[derive(Debug, Clone)]
pub struct BlockingCanceller(ToOwner<Reply>);

impl BlockingCanceller {
    /// Asks the call to stop; see [`BlockingCallHandle::cancel`].
    pub fn cancel(&self) {
        self.0.cancel();
    }
}
