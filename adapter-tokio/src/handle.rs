//! The caller's side of a call: [`CallHandle`] and [`Canceller`].
//!
//! A handle talks to the call's owner task through the owner's event
//! channel and reads what the owner publishes (state, approval card,
//! outcome). It does not own the call: dropping it is a client disconnect
//! (R4.6), and the owner still finishes the call, writes the record and
//! reaps the helper.

use std::time::Duration;

use spillguard_core::{ApprovalCard, CallError, CancelReason, Outcome, State};
use tokio::sync::oneshot::error::TryRecvError;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::owner::{Command, Event, Reply, Snapshot};

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
    call_id: String,
    events: mpsc::UnboundedSender<Event>,
    published: watch::Receiver<Snapshot>,
    outcome: oneshot::Receiver<Outcome>,
    owner: Option<JoinHandle<()>>,
    taken: bool,
}

impl CallHandle {
    pub(crate) fn new(
        call_id: String,
        events: mpsc::UnboundedSender<Event>,
        published: watch::Receiver<Snapshot>,
        outcome: oneshot::Receiver<Outcome>,
        owner: JoinHandle<()>,
    ) -> Self {
        Self {
            call_id,
            events,
            published,
            outcome,
            owner: Some(owner),
            taken: false,
        }
    }

    /// The call's id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The call's state as last published by its owner.
    pub fn state(&self) -> State {
        self.published.borrow().state
    }

    /// Whether the call has ended (its outcome is ready or was taken).
    pub fn is_finished(&self) -> bool {
        self.taken || self.published.borrow().finished
    }

    /// The approval card, once shown. It is built once and never changes.
    pub fn card(&self) -> Option<ApprovalCard> {
        self.published.borrow().card.clone()
    }

    /// Waits at most `timeout` for the approval card. `None` if the call
    /// ended without asking for approval, or the time ran out.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches. Dropping it changes nothing; the card,
    /// once shown, stays available from [`card`](Self::card).
    pub async fn wait_card(&self, timeout: Duration) -> Option<ApprovalCard> {
        let mut published = self.published.clone();
        let shown = published.wait_for(|s| s.card.is_some() || s.finished || s.owner_ended);
        let _ = tokio::time::timeout(timeout, shown).await;
        self.card()
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
        self.ask(Command::Approve, "approval_granted").await
    }

    /// Denies approval: the call ends `denied` and nothing is spawned. An
    /// error if the call is not awaiting approval.
    ///
    /// # Cancel safety
    ///
    /// As for [`approve`](Self::approve): once first polled, the denial is
    /// carried out even if the future is dropped.
    pub async fn deny(&self) -> Result<(), CallError> {
        self.ask(Command::Deny, "approval_denied").await
    }

    async fn ask(
        &self,
        command: fn(Reply) -> Command,
        input: &'static str,
    ) -> Result<(), CallError> {
        let (reply, answer) = oneshot::channel();
        let refused = || CallError::InvalidTransition {
            state: self.state(),
            input,
        };
        if self.events.send(Event::Command(command(reply))).is_err() {
            return Err(refused());
        }
        answer.await.unwrap_or_else(|_| Err(refused()))
    }

    /// Asks the call to stop. Before dispatch it ends
    /// `cancelled_before_dispatch`; after, the helper's group gets SIGTERM,
    /// then SIGKILL after the grace. Returns at once; ignored once finished.
    pub fn cancel(&self) {
        let _ = self
            .events
            .send(Event::Command(Command::Cancel(CancelReason::Requested)));
    }

    /// A cancel-only handle that can be moved to another task or thread (a
    /// signal handler, a UI) while this one waits.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            events: self.events.clone(),
        }
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
        match (&mut self.outcome).await {
            Ok(outcome) => self.took(outcome),
            Err(_) => self.owner_failed().await,
        }
    }

    /// Waits at most `timeout`. Gives the handle back if the call has not
    /// finished by then: drop it to give up (a client disconnect; the owner
    /// carries on), or wait again.
    ///
    /// # Cancel safety
    ///
    /// As for [`wait`](Self::wait): the future owns the handle, so dropping
    /// it is a client disconnect.
    ///
    /// # Panics
    ///
    /// As for [`wait`](Self::wait).
    pub async fn wait_timeout(mut self, timeout: Duration) -> Result<Outcome, CallHandle> {
        match tokio::time::timeout(timeout, &mut self.outcome).await {
            Ok(Ok(outcome)) => Ok(self.took(outcome)),
            Ok(Err(_)) => Ok(self.owner_failed().await),
            Err(_) => Err(self),
        }
    }

    /// The outcome if the call has finished, else the handle back.
    ///
    /// # Panics
    ///
    /// Only if the call's owner task ended without an outcome (it panicked,
    /// or its runtime was shut down).
    pub fn try_outcome(mut self) -> Result<Outcome, CallHandle> {
        match self.outcome.try_recv() {
            Ok(outcome) => Ok(self.took(outcome)),
            Err(TryRecvError::Empty) => Err(self),
            Err(TryRecvError::Closed) => panic!(
                "the owner of call {} ended without an outcome (it panicked or its runtime shut down)",
                self.call_id
            ),
        }
    }

    fn took(&mut self, outcome: Outcome) -> Outcome {
        self.taken = true;
        outcome
    }

    /// The owner ended without handing over an outcome: resume its panic,
    /// or say why there is none.
    async fn owner_failed(&mut self) -> Outcome {
        if let Some(task) = self.owner.take()
            && let Err(error) = task.await
            && error.is_panic()
        {
            std::panic::resume_unwind(error.into_panic());
        }
        panic!(
            "the owner of call {} ended without an outcome (its runtime shut down)",
            self.call_id
        );
    }
}

impl Drop for CallHandle {
    fn drop(&mut self) {
        if !self.is_finished() {
            let _ = self
                .events
                .send(Event::Command(Command::ClientDisconnected));
        }
    }
}

/// Cancels one call from anywhere; cheap to clone.
///
/// # Examples
///
/// ```
/// use spillguard_tokio::{HelperCommand, Host, HostOptions};
/// use spillguard_tokio::core::{CallKind, CallSpec, CancelReason, Config, State};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), spillguard_tokio::HostError> {
/// let host = Host::new(Config::default(), HostOptions::default())?;
/// let spec = CallSpec {
///     call_id: "c_sleep".into(),
///     session_id: "s_1".into(),
///     kind: CallKind::Action,
///     action: "local.sleep".into(),
///     target: "localhost".into(),
///     summary: "sleep 30".into(),
/// };
/// let call = host.start(spec, HelperCommand::new("sleep").arg("30"), false);
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
pub struct Canceller {
    events: mpsc::UnboundedSender<Event>,
}

impl Canceller {
    /// Asks the call to stop; see [`CallHandle::cancel`].
    pub fn cancel(&self) {
        let _ = self
            .events
            .send(Event::Command(Command::Cancel(CancelReason::Requested)));
    }
}
