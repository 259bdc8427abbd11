//! The caller's side of a call: [`CallHandle`] and [`Canceller`].
//!
//! A handle talks to the call's owner task through the owner's event
//! channel and reads what the owner publishes (state, approval card,
//! outcome). It does not own the call: dropping it is a client
//! disconnect, and the owner still finishes the call, writes the record and
//! reaps the helper.

use std::io;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use spillguard_core::{ApprovalCard, CallError, Outcome, State};
use spillguard_kit::handle::{Ask, HandleCore, ToOwner};
use spillguard_kit::published::{self, Snapshot, Taken, Wake};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::owner::{Event, Reply};
use crate::stream::{HelperStdin, HelperStdout};

/// What the owner publishes for the handle.
pub(crate) type Published = published::Published<Changed>;

/// Wakes the waiters of a [`Published`].
#[derive(Debug, Default)]
pub(crate) struct Changed(Notify);

impl Wake for Changed {
    fn wake_all(&self) {
        self.0.notify_waiters();
    }
}

/// Waits until `ready` holds or the owner ended, then returns the lock.
async fn wait_until(
    published: &Published,
    ready: impl Fn(&Snapshot) -> bool,
) -> MutexGuard<'_, Snapshot> {
    loop {
        let notified = published.changed().0.notified();
        tokio::pin!(notified);
        // Registered before the check, so no change is missed.
        notified.as_mut().enable();
        {
            let inner = published.lock();
            if ready(&inner) || inner.owner_ended {
                return inner;
            }
        }
        notified.await;
    }
}

/// The caller's handle on a running call, from [`Host::start`](crate::Host::start).
///
/// The call runs on its own owner task whatever the handle does. Approve or
/// deny it once its card is shown, cancel it at any time, and collect its
/// [`Outcome`] with [`wait`](Self::wait), [`wait_timeout`](Self::wait_timeout)
/// or [`try_outcome`](Self::try_outcome).
///
/// Dropping the handle before its outcome was taken — including dropping a
/// `wait` future that owns it — is a client disconnect: the host's
/// [`DisconnectPolicy`](crate::core::DisconnectPolicy) applies, and the
/// record still reaches the audit sink and
/// [`Host::finished_records`](crate::Host::finished_records).
#[derive(Debug)]
pub struct CallHandle {
    core: HandleCore<Reply, Changed>,
    owner: Option<JoinHandle<()>>,
}

/// Every method that is the same on every runtime is a one-line delegation
/// to the kit's [`HandleCore`]; this runtime keeps how it waits (a `Notify`
/// on the published state, tokio's timeout, the answer's oneshot) and the
/// owner task's end when it left no outcome.
impl CallHandle {
    pub(crate) fn new(
        call_id: String,
        events: mpsc::UnboundedSender<Event>,
        published: Arc<Published>,
        owner: JoinHandle<()>,
    ) -> Self {
        let to_owner = ToOwner::new(move |event| events.send(event).is_ok());
        Self {
            core: HandleCore::new(call_id, published, to_owner),
            owner: Some(owner),
        }
    }

    /// A streamed call's (`CallBuilder::streamed`) stdin and stdout: waits
    /// until the helper is spawned (after its approval, if it needs one),
    /// then hands out both, once. An error if the call ended before its
    /// helper ran, is not streamed, or its streams were taken.
    ///
    /// ```
    /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
    /// use spillguard_tokio::{Host, HostOptions};
    /// use spillguard_tokio::core::{Config, State, StdoutMode};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let host = Host::new(Config::default(), HostOptions::default())?;
    /// let call = host.command("cat").streamed().start();
    /// let (mut stdin, mut stdout) = call.streams().await?;
    /// stdin.write_all(b"ping\n").await?;
    /// let mut reply = [0; 5];
    /// stdout.read_exact(&mut reply).await?;
    /// assert_eq!(&reply, b"ping\n");
    /// stdin.shutdown().await?; // cat reads end-of-file and exits
    /// let record = call.wait().await.record;
    /// assert_eq!(record.state, State::Completed);
    /// assert_eq!(record.stdout_mode, StdoutMode::Streamed);
    /// assert_eq!((record.stdin_bytes_forwarded, record.stdout_bytes_forwarded), (5, 5));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the streams are taken only when it completes.
    pub async fn streams(&self) -> io::Result<(HelperStdin, HelperStdout)> {
        let taken = wait_until(self.core.published(), Snapshot::streams_settled)
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
        drop(wait_until(self.core.published(), |s| s.finished).await);
    }

    /// Waits at most `timeout` for the approval card. `None` if the call
    /// ended without asking for approval, or the time ran out.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches. Dropping it changes nothing; the card,
    /// once shown, stays available from [`card`](Self::card).
    pub async fn wait_card(&self, timeout: Duration) -> Option<ApprovalCard> {
        let published = self.core.published();
        let shown = async {
            wait_until(published, Snapshot::card_settled)
                .await
                .card
                .clone()
        };
        tokio::time::timeout(timeout, shown).await.ok().flatten()
    }

    /// Grants approval. An error if the call is not awaiting approval
    /// (for instance it already expired or was cancelled).
    ///
    /// # Cancel safety
    ///
    /// The approval is sent when the future is first polled and is then
    /// carried out whatever happens to the future; dropping it afterwards
    /// loses only the answer. Dropped before its first poll, it sends
    /// nothing.
    pub async fn approve(&self) -> Result<(), CallError> {
        self.ask(Ask::Approve).await
    }

    /// Denies approval: the call ends `denied` and nothing is spawned. An
    /// error if the call is not awaiting approval.
    ///
    /// # Cancel safety
    ///
    /// As for [`approve`](Self::approve): once first polled, the denial is
    /// carried out even if the future is dropped.
    pub async fn deny(&self) -> Result<(), CallError> {
        self.ask(Ask::Deny).await
    }

    /// Denies approval for `reason`, an answer that was no approval (an
    /// MCP elicitation accepted without the content its card asked for):
    /// the call ends `denied` and its record's `failure` says why.
    /// An error if the call is not awaiting approval.
    ///
    /// # Cancel safety
    ///
    /// As for [`deny`](Self::deny).
    pub async fn decline(&self, reason: impl Into<String>) -> Result<(), CallError> {
        let answer = self.core.decline(reason.into(), oneshot::channel())?;
        self.core.answered(Ask::Deny, answer.await.ok())
    }

    async fn ask(&self, ask: Ask) -> Result<(), CallError> {
        let answer = self.core.ask(ask, oneshot::channel())?;
        self.core.answered(ask, answer.await.ok())
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

    /// Admits the call, queued since it was authorized because its
    /// settings ask for [`Admission::Queued`](spillguard_core::Admission::Queued)
    /// (a driver that runs at most so many calls at once): it spawns its
    /// helper now. Returns at once. Ignored if the call has ended (its
    /// queue timeout or a cancel came first) or is not queued (its
    /// settings admit it at once). See
    /// [`Call::handle_admitted`](spillguard_core::Call::handle_admitted).
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
    pub fn canceller(&self) -> Canceller {
        Canceller(self.core.to_owner())
    }

    /// Waits for the call to finish and returns its outcome.
    ///
    /// A caller that cannot wait forever uses [`wait_timeout`](Self::wait_timeout).
    ///
    /// # Cancel safety
    ///
    /// The future owns the handle: dropping it before it completes drops the
    /// handle, which is a client disconnect. The owner then finishes the
    /// call under the disconnect policy and writes the record; the outcome
    /// (the retained text) is dropped with its pool share.
    ///
    /// # Panics
    ///
    /// Only if the call's owner task panicked (a bug; its panic is resumed
    /// here), or its runtime was shut down before the call finished.
    pub async fn wait(mut self) -> Outcome {
        let taken = wait_until(self.core.published(), Snapshot::outcome_ready)
            .await
            .take_outcome();
        match taken {
            Taken::Outcome(outcome) => *outcome,
            Taken::OwnerGone | Taken::NotYet => self.owner_failed().await,
        }
    }

    /// Waits at most `timeout`. Gives the handle back if the call has not
    /// finished by then: drop it to give up (a client disconnect; the owner
    /// carries on), or wait again.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future drops the handle it owns: a client disconnect.
    ///
    /// # Panics
    ///
    /// Only if the call's owner task panicked (its panic is resumed here) or
    /// its runtime shut down before the call finished.
    pub async fn wait_timeout(mut self, timeout: Duration) -> Result<Outcome, CallHandle> {
        let published = self.core.published();
        let settled = async {
            wait_until(published, Snapshot::outcome_ready)
                .await
                .take_outcome()
        };
        let taken = tokio::time::timeout(timeout, settled)
            .await
            .unwrap_or(Taken::NotYet);
        match taken {
            Taken::Outcome(outcome) => Ok(*outcome),
            Taken::OwnerGone => Ok(self.owner_failed().await),
            Taken::NotYet => Err(self),
        }
    }

    /// The outcome if the call has finished, else the handle back.
    ///
    /// # Panics
    ///
    /// If the call's owner ended without an outcome (it panicked or its
    /// runtime shut down).
    pub fn try_outcome(self) -> Result<Outcome, CallHandle> {
        let taken = self.core.try_take_outcome();
        taken.or_handle(self, |handle| {
            handle
                .core
                .owner_gone(" (it panicked or its runtime shut down)")
        })
    }

    async fn owner_failed(&mut self) -> Outcome {
        if let Some(task) = self.owner.take()
            && let Err(error) = task.await
            && error.is_panic()
        {
            std::panic::resume_unwind(error.into_panic());
        }
        self.core.owner_gone(" (its runtime shut down)");
    }
}

/// Cancels one call from anywhere; cheap to clone.
///
/// # Examples
///
/// ```
/// use spillguard_tokio::{Host, HostOptions};
/// use spillguard_tokio::core::{CancelReason, Config, State};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), spillguard_tokio::HostError> {
/// let host = Host::new(Config::default(), HostOptions::default())?;
/// let call = host.command("sleep").arg("30").start();
/// let canceller = call.canceller();
/// tokio::spawn(async move { canceller.cancel() });
/// let outcome = call.wait().await;
/// assert_eq!(outcome.record.cancel_reason, Some(CancelReason::Requested));
/// assert!(matches!(
///     outcome.record.state,
///     State::CancelledAfterDispatch | State::CancelledBeforeDispatch
/// ));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Canceller(ToOwner<Reply>);

impl Canceller {
    /// Asks the call to stop; see [`CallHandle::cancel`].
    pub fn cancel(&self) {
        self.0.cancel();
    }
}
