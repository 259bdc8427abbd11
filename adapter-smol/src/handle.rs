//! The caller's side of a call: [`CallHandle`] and [`Canceller`].
//!
//! A handle talks to the call's owner through the owner's event channel and
//! reads what the owner publishes (state, approval card, outcome). It does
//! not own the call: dropping it is a client disconnect, and the
//! owner task still finishes the call, writes the record and reaps the
//! helper.

use std::io;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use event_listener::Event as Notify;
use futures_lite::future;
use smol::Timer;
use smol::channel::{self, Sender};
use spillguard_core::{ApprovalCard, CallError, Outcome, State};
use spillguard_kit::handle::{Ask, HandleCore, ToOwner};
use spillguard_kit::published::{self, Snapshot, Taken, Wake};

use crate::owner::{Event, Reply};
use crate::stream::{HelperStdin, HelperStdout};

/// What the owner publishes for the handle.
pub(crate) type Published = published::Published<Changed>;

/// Wakes the waiters of a [`Published`].
#[derive(Debug, Default)]
pub(crate) struct Changed(Notify);

impl Wake for Changed {
    fn wake_all(&self) {
        self.0.notify(usize::MAX);
    }
}

/// Waits until `ready` holds or the owner ended, at most `timeout`
/// (`None`: no limit), then returns the lock.
async fn wait_until(
    published: &Published,
    timeout: Option<Duration>,
    ready: impl Fn(&Snapshot) -> bool,
) -> MutexGuard<'_, Snapshot> {
    let settled = || {
        let inner = published.lock();
        ready(&inner) || inner.owner_ended
    };
    let until_settled = async {
        while !settled() {
            let listener = published.changed().0.listen();
            // Checked again once listening, so no change is missed.
            if settled() {
                break;
            }
            listener.await;
        }
    };
    match timeout {
        None => until_settled.await,
        Some(timeout) => {
            future::or(until_settled, async {
                Timer::after(timeout).await;
            })
            .await
        }
    }
    published.lock()
}

/// The caller's handle on a running call, from [`Host::start`](crate::Host::start).
///
/// The call runs on its own owner task whatever the handle does. Approve or
/// deny it once its card is shown, cancel it at any time, and collect its
/// [`Outcome`] with [`wait`](Self::wait), [`wait_timeout`](Self::wait_timeout)
/// or [`try_outcome`](Self::try_outcome).
///
/// Dropping the handle before the call finished is a client disconnect: the
/// host's [`DisconnectPolicy`](crate::core::DisconnectPolicy) applies, and
/// the record still reaches the audit sink and
/// [`Host::finished_records`](crate::Host::finished_records).
#[derive(Debug)]
pub struct CallHandle {
    core: HandleCore<Reply, Changed>,
}

/// Every method that is the same on every runtime is a one-line delegation
/// to the kit's [`HandleCore`]; this runtime keeps how it waits (an event
/// listener on the published state, smol's timer, the answer's channel).
impl CallHandle {
    pub(crate) fn new(call_id: String, commands: Sender<Event>, published: Arc<Published>) -> Self {
        let to_owner = ToOwner::new(move |event| commands.try_send(event).is_ok());
        Self {
            core: HandleCore::new(call_id, published, to_owner),
        }
    }

    /// A streamed call's (`CallBuilder::streamed`) stdin and stdout: waits
    /// until the helper is spawned (after its approval, if it needs one),
    /// then hands out both, once. An error if the call ended before its
    /// helper ran, is not streamed, or its streams were taken.
    ///
    /// ```
    /// use futures_lite::{AsyncReadExt, AsyncWriteExt};
    /// use spillguard_smol::{Host, HostOptions};
    /// use spillguard_smol::core::{Config, State, StdoutMode};
    ///
    /// # smol::block_on(async {
    /// let host = Host::new(Config::default(), HostOptions::default())?;
    /// let call = host.command("cat").streamed().start();
    /// let (mut stdin, mut stdout) = call.streams().await?;
    /// stdin.write_all(b"ping\n").await?;
    /// let mut reply = [0; 5];
    /// stdout.read_exact(&mut reply).await?;
    /// assert_eq!(&reply, b"ping\n");
    /// stdin.close().await?; // cat reads end-of-file and exits
    /// let record = call.wait().await.record;
    /// assert_eq!(record.state, State::Completed);
    /// assert_eq!(record.stdout_mode, StdoutMode::Streamed);
    /// assert_eq!((record.stdin_bytes_forwarded, record.stdout_bytes_forwarded), (5, 5));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the streams are taken only when it completes.
    pub async fn streams(&self) -> io::Result<(HelperStdin, HelperStdout)> {
        let taken = wait_until(self.core.published(), None, Snapshot::streams_settled)
            .await
            .take_streams();
        self.core.streams(taken, HelperStdin, HelperStdout)
    }

    /// The call's id.
    pub fn call_id(&self) -> &str {
        self.core.call_id()
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
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches.
    pub async fn wait_finished(&self) {
        drop(wait_until(self.core.published(), None, |s| s.finished).await);
    }

    /// Waits at most `timeout` for the approval card. `None` if the call
    /// ended without asking for approval, or the time ran out.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches. Dropping it changes nothing; the card,
    /// once shown, stays in [`card`](Self::card).
    pub async fn wait_card(&self, timeout: Duration) -> Option<ApprovalCard> {
        let published = self.core.published();
        let shown = wait_until(published, Some(timeout), Snapshot::card_settled).await;
        shown.card.clone()
    }

    /// Grants approval. An error if the call is not awaiting approval
    /// (for instance it already expired or was cancelled).
    ///
    /// # Cancel safety
    ///
    /// The approval is sent on the first poll; dropping the future after
    /// that loses only the answer, not the approval. A future never polled
    /// approves nothing.
    pub async fn approve(&self) -> Result<(), CallError> {
        self.ask(Ask::Approve).await
    }

    /// Denies approval: the call ends `denied` and nothing is spawned. An
    /// error if the call is not awaiting approval.
    ///
    /// # Cancel safety
    ///
    /// As for [`approve`](Self::approve): the denial is sent on the first
    /// poll, and dropping the future afterwards loses only the answer.
    pub async fn deny(&self) -> Result<(), CallError> {
        self.ask(Ask::Deny).await
    }

    async fn ask(&self, ask: Ask) -> Result<(), CallError> {
        let answer = self.core.ask(ask, channel::bounded(1))?;
        self.core.answered(ask, answer.recv().await.ok())
    }

    /// Tells the call that its approval card reached the approver (the
    /// caller wrote it where the approver reads it: an MCP server, once the
    /// `elicitation/create` request was flushed): the approval deadline
    /// then runs from now, once, so that time spent before delivery (many
    /// calls at once, a slow audit log) is not taken from the approver. A
    /// card never reported delivered expires `approval_timeout` after it
    /// was shown. Returns at once; ignored unless the call awaits approval
    /// and no delivery was reported yet. See
    /// [`Call::handle_card_delivered`](spillguard_core::Call::handle_card_delivered).
    pub fn card_delivered(&self) {
        self.core.card_delivered();
    }

    /// Asks the call to stop. Before dispatch it ends
    /// `cancelled_before_dispatch`; after, the helper's group gets SIGTERM,
    /// then SIGKILL after the grace. Returns at once; ignored once finished.
    pub fn cancel(&self) {
        self.core.cancel();
    }

    /// A cancel-only handle that can be moved to another task (a signal
    /// handler, a UI) while this one waits.
    pub fn canceller(&self) -> Canceller {
        Canceller(self.core.to_owner())
    }

    /// Waits for the call to finish and returns its outcome.
    ///
    /// # Cancel safety
    ///
    /// The handle is moved into the future: dropping the future before it
    /// is ready drops the handle, which is a client disconnect. The owner
    /// carries on under the disconnect policy and still writes the record
    /// (the helper's group is signalled if the policy or a deadline says
    /// so). To give up waiting but keep the call, use
    /// [`wait_timeout`](Self::wait_timeout), which gives the handle back.
    ///
    /// # Panics
    ///
    /// Only if the call's owner task panicked (a bug).
    pub async fn wait(self) -> Outcome {
        match self.take_outcome(None).await {
            Taken::Outcome(outcome) => *outcome,
            Taken::OwnerGone | Taken::NotYet => self.owner_failed(),
        }
    }

    /// Waits at most `timeout`. Gives the handle back if the call has not
    /// finished by then: drop it to give up (a client disconnect; the owner
    /// carries on), or wait again.
    ///
    /// # Cancel safety
    ///
    /// As for [`wait`](Self::wait): dropping the future drops the handle
    /// (a client disconnect). Let it time out to get the handle back.
    ///
    /// # Panics
    ///
    /// Only if the call's owner task panicked (a bug).
    pub async fn wait_timeout(self, timeout: Duration) -> Result<Outcome, CallHandle> {
        let taken = self.take_outcome(Some(timeout)).await;
        taken.or_handle(self, |handle| handle.owner_failed())
    }

    /// The outcome if the call has finished, else the handle back.
    ///
    /// # Panics
    ///
    /// Only if the call's owner task panicked (a bug).
    pub fn try_outcome(self) -> Result<Outcome, CallHandle> {
        let taken = self.core.try_take_outcome();
        taken.or_handle(self, |handle| handle.owner_failed())
    }

    async fn take_outcome(&self, timeout: Option<Duration>) -> Taken {
        let published = self.core.published();
        let mut ready = wait_until(published, timeout, Snapshot::outcome_ready).await;
        ready.take_outcome()
    }

    fn owner_failed(&self) -> ! {
        self.core.owner_gone("");
    }
}

/// Cancels one call from anywhere; cheap to clone.
///
/// # Examples
///
/// ```
/// use spillguard_smol::{Host, HostOptions};
/// use spillguard_smol::core::{CancelReason, Config, State};
///
/// smol::block_on(async {
///     let host = Host::new(Config::default(), HostOptions::default())?;
///     let call = host.command("sleep").arg("30").start();
///     let canceller = call.canceller();
///     smol::spawn(async move { canceller.cancel() }).detach();
///     let outcome = call.wait().await;
///     assert_eq!(outcome.record.cancel_reason, Some(CancelReason::Requested));
///     assert!(matches!(
///         outcome.record.state,
///         State::CancelledAfterDispatch | State::CancelledBeforeDispatch
///     ));
///     Ok::<(), spillguard_smol::HostError>(())
/// })?;
/// # Ok::<(), spillguard_smol::HostError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Canceller(ToOwner<Reply>);

impl Canceller {
    /// Asks the call to stop; see [`CallHandle::cancel`].
    pub fn cancel(&self) {
        self.0.cancel();
    }
}
