//! The caller's side of a call on an async runtime: [`AsyncCallHandle`]
//! and [`AsyncCanceller`].
//!
//! A handle talks to the call's owner task through the owner's event
//! channel and reads what the owner publishes (state, approval card, pid,
//! outcome). It does not own the call: dropping it is a client disconnect
//! (see [`AsyncCallHandle`]), and the owner still finishes the call,
//! writes the record and reaps the helper.

use std::io;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use spillguard_core::{ApprovalCard, CallError, Outcome, State};

use super::AsyncRuntime;
use crate::handle::{Ask, HandleCore, ToOwner};
use crate::lines::StderrLines;
use crate::published::{Published, Snapshot, Taken};

/// Waits until `ready` holds or the owner ended, then returns the lock.
async fn wait_until<R: AsyncRuntime>(
    published: &Published<R::Wake>,
    ready: impl Fn(&Snapshot) -> bool,
) -> MutexGuard<'_, Snapshot> {
    loop {
        // Listening before the check, so no change is missed.
        let changed = R::listen(published.changed());
        {
            let inner = published.lock();
            if ready(&inner) || inner.owner_ended {
                return inner;
            }
        }
        changed.await;
    }
}

/// The caller's handle on a running call on an async runtime: what each
/// async adapter's `CallHandle` wraps (`async_front!`), whose docs say what
/// each method and dropping the handle do, each method's cancel safety and
/// when it panics.
pub struct AsyncCallHandle<R: AsyncRuntime> {
    core: HandleCore<R::Reply, R::Wake>,
    owner: Option<R::OwnerTask>,
}

impl<R: AsyncRuntime> std::fmt::Debug for AsyncCallHandle<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallHandle")
            .field("core", &self.core)
            .field("owner", &self.owner)
            .finish()
    }
}

impl<R: AsyncRuntime> AsyncCallHandle<R> {
    /// The handle of call `call_id`, whose owner reads `events`, publishes
    /// to `published` and runs as `owner`.
    pub(crate) fn new(
        call_id: String,
        events: R::Sender,
        published: Arc<Published<R::Wake>>,
        owner: R::OwnerTask,
    ) -> Self {
        let to_owner = ToOwner::new(move |event| R::send(&events, event));
        Self {
            core: HandleCore::new(call_id, published, to_owner),
            owner: Some(owner),
        }
    }

    /// The helper's stderr as lines, from now on, at most `capacity` of
    /// them waiting to be read: the owner queues each whole line as it
    /// drains stderr and never waits on this reader; a line that finds
    /// the queue full is dropped and counted
    /// ([`StderrLines::dropped`]). The capture, the excerpt and the
    /// record are the same with or without it. The lines are the
    /// helper's bytes, not redacted. An error if the lines were already
    /// asked for.
    pub fn stderr_lines(&self, capacity: usize) -> io::Result<StderrLines> {
        self.core
            .published()
            .ask_lines(capacity)
            .map(StderrLines::new)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "the call's stderr lines were already asked for",
                )
            })
    }

    /// A streamed call's (`CallBuilder::streamed`) stdin and stdout: waits
    /// until the helper is spawned (after its approval, if it needs one),
    /// then hands out both, once. An error if the call ended before its
    /// helper ran, is not streamed, or its streams were taken.
    pub async fn streams(&self) -> io::Result<(R::Stdin, R::Stdout)> {
        let taken = wait_until::<R>(self.core.published(), Snapshot::streams_settled)
            .await
            .take_streams();
        self.core.streams(taken, R::stdin, R::stdout)
    }

    /// The call's id.
    pub fn call_id(&self) -> &str {
        self.core.call_id()
    }

    /// The helper's pid (its process group id too) while it runs: `None`
    /// before it is spawned, once its exit was observed, and for a call
    /// that never spawned one.
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

    /// Waits until the call has ended, leaving its outcome in the handle
    /// for [`wait`](Self::wait) or [`try_outcome`](Self::try_outcome).
    pub async fn wait_finished(&self) {
        drop(wait_until::<R>(self.core.published(), |s| s.finished).await);
    }

    /// Waits at most `timeout` for the approval card. `None` if the call
    /// ended without asking for approval, or the time ran out.
    pub async fn wait_card(&self, timeout: Duration) -> Option<ApprovalCard> {
        let published = self.core.published();
        let shown = async {
            wait_until::<R>(published, Snapshot::card_settled)
                .await
                .card
                .clone()
        };
        R::timeout(timeout, shown).await.flatten()
    }

    /// Grants approval. An error if the call is not awaiting approval
    /// (for instance it already expired or was cancelled).
    pub async fn approve(&self) -> Result<(), CallError> {
        self.ask(Ask::Approve).await
    }

    /// Denies approval: the call ends `denied` and nothing is spawned. An
    /// error if the call is not awaiting approval.
    pub async fn deny(&self) -> Result<(), CallError> {
        self.ask(Ask::Deny).await
    }

    /// Denies approval for `reason`, an answer that was no approval (an
    /// MCP elicitation accepted without the content its card asked for):
    /// the call ends `denied` and its record's `failure` says why.
    /// An error if the call is not awaiting approval.
    pub async fn decline(&self, reason: impl Into<String>) -> Result<(), CallError> {
        let answer = self.core.decline(reason.into(), R::reply())?;
        self.core.answered(Ask::Deny, answer.await)
    }

    async fn ask(&self, ask: Ask) -> Result<(), CallError> {
        let answer = self.core.ask(ask, R::reply())?;
        self.core.answered(ask, answer.await)
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

    /// Admits the call, queued since it was authorized because its
    /// settings ask for [`Admission::Queued`](spillguard_core::Admission::Queued)
    /// (a driver that runs at most so many calls at once): it spawns its
    /// helper now. Returns at once. Ignored if the call has ended (its
    /// queue timeout or a cancel came first) or is not queued (its
    /// settings admit it at once). See
    /// [`Input::Admitted`](spillguard_core::Input::Admitted).
    pub fn admit(&self) {
        self.core.admit();
    }

    /// Asks the call to stop. Before dispatch it ends
    /// `cancelled_before_dispatch`; after, the helper's group gets SIGTERM,
    /// then SIGKILL after the grace. Returns at once; ignored once finished.
    pub fn cancel(&self) {
        self.core.cancel();
    }

    /// A cancel-only handle that can be moved to another task or thread (a
    /// signal handler, a UI) while this one waits.
    pub fn canceller(&self) -> AsyncCanceller<R> {
        AsyncCanceller(self.core.to_owner())
    }

    /// Waits for the call to finish and returns its outcome.
    pub async fn wait(mut self) -> Outcome {
        let taken = wait_until::<R>(self.core.published(), Snapshot::outcome_ready)
            .await
            .take_outcome();
        match taken {
            Taken::Outcome(outcome) => *outcome,
            Taken::OwnerGone | Taken::NotYet => self.owner_failed().await,
        }
    }

    /// Waits at most `timeout`. Gives the handle back if the call has not
    /// finished by then: drop it to give up (a client disconnect), or wait
    /// again.
    pub async fn wait_timeout(mut self, timeout: Duration) -> Result<Outcome, Self> {
        let published = self.core.published();
        let settled = async {
            wait_until::<R>(published, Snapshot::outcome_ready)
                .await
                .take_outcome()
        };
        match R::timeout(timeout, settled).await.unwrap_or(Taken::NotYet) {
            Taken::Outcome(outcome) => Ok(*outcome),
            Taken::OwnerGone => Ok(self.owner_failed().await),
            Taken::NotYet => Err(self),
        }
    }

    /// The outcome if the call has finished, else the handle back.
    pub fn try_outcome(self) -> Result<Outcome, Self> {
        let taken = self.core.try_take_outcome();
        taken.or_handle(self, |handle| handle.core.owner_gone(R::OWNER_GONE))
    }

    async fn owner_failed(&mut self) -> Outcome {
        if let Some(task) = self.owner.take() {
            R::owner_ended(task).await;
        }
        self.core.owner_gone(R::OWNER_GONE);
    }
}

/// Cancels one call from anywhere; cheap to clone.
pub struct AsyncCanceller<R: AsyncRuntime>(ToOwner<R::Reply>);

impl<R: AsyncRuntime> Clone for AsyncCanceller<R> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<R: AsyncRuntime> std::fmt::Debug for AsyncCanceller<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Canceller").field(&self.0).finish()
    }
}

impl<R: AsyncRuntime> AsyncCanceller<R> {
    /// Asks the call to stop; see [`AsyncCallHandle::cancel`].
    pub fn cancel(&self) {
        self.0.cancel();
    }
}
