//! The caller's side of a call, written once: [`HandleCore`] is what every
//! runtime's `CallHandle` holds and delegates to, one line a method;
//! [`ToOwner`] is how the handle, its canceller and its streams reach the
//! call's owner.
//!
//! A runtime's handle keeps only how it waits: for the approval card, the
//! core's answer to an approval and the outcome (a `Condvar` on a thread,
//! an event listener, a tokio `Notify`), and what it does when the owner
//! ended without an outcome (std resumes the owner's panic, tokio awaits
//! the owner task's end).
//!
//! The handle does not own the call: dropping it (and, for a streamed call,
//! both its streams: the last [`Presence`]) is a client disconnect, and the
//! owner still finishes the call, writes the record and reaps the helper.
//! An approval answer lost because the owner is gone comes back from
//! [`HandleCore::answered`] as the core's `InvalidTransition` refusal, the
//! error a call past its card gives.

use std::any::Any;
use std::io;
use std::sync::Arc;

use spillguard_core::{ApprovalCard, CallError, CancelReason, Input, State};

use crate::published::{Published, Taken, Wake};
use crate::run_loop::{Command, Event};
use crate::stream::{Handout, Presence, StdinWriter, StdoutReader};

/// How the caller's side reaches a call's owner: a function that queues one
/// event on the owner's channel (`false` once the owner takes no more);
/// cheap to clone. `R` carries the core's answer to an approval or a
/// denial back.
pub struct ToOwner<R> {
    send: Arc<dyn Fn(Event<R>) -> bool + Send + Sync>,
}

impl<R> Clone for ToOwner<R> {
    fn clone(&self) -> Self {
        Self {
            send: self.send.clone(),
        }
    }
}

impl<R> std::fmt::Debug for ToOwner<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToOwner").finish_non_exhaustive()
    }
}

impl<R> ToOwner<R> {
    /// The way to the owner that `send` gives: it queues the event without
    /// waiting (the channel is unbounded, or rings a doorbell) and says
    /// whether the owner still takes events.
    pub fn new(send: impl Fn(Event<R>) -> bool + Send + Sync + 'static) -> Self {
        Self {
            send: Arc::new(send),
        }
    }

    /// Queues `command` for the owner; `false` if the owner takes no more
    /// events (the call finished).
    pub fn command(&self, command: Command<R>) -> bool {
        (self.send)(Event::Command(command))
    }

    /// Asks the call to stop (reason `requested`); ignored once finished.
    pub fn cancel(&self) {
        self.command(Command::Input(Input::Cancel(CancelReason::Requested)));
    }

    /// Tells the call its card reached the approver.
    pub fn card_delivered(&self) {
        self.command(Command::Input(Input::CardDelivered));
    }

    /// Admits the queued call: it may spawn now.
    pub fn admit(&self) {
        self.command(Command::Input(Input::Admitted));
    }
}

/// An approver's answer, as the handle sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// `approve()`.
    Approve,
    /// `deny()`.
    Deny,
}

impl Ask {
    /// The core's input it becomes, as a refusal names it.
    pub fn input(self) -> &'static str {
        match self {
            Ask::Approve => "approval_granted",
            Ask::Deny => "approval_denied",
        }
    }

    fn command<R>(self, reply: R) -> Command<R> {
        match self {
            Ask::Approve => Command::Approve(reply),
            Ask::Deny => Command::Deny(reply),
        }
    }
}

/// What every runtime's call handle holds: the call's id, what its owner
/// publishes, the way to the owner and the caller's presence. Each method
/// is one a handle offers as it is, or the runtime-free half of one.
pub struct HandleCore<R, W: Wake> {
    call_id: String,
    published: Arc<Published<W>>,
    to_owner: ToOwner<R>,
    present: Arc<Presence<W>>,
}

impl<R, W: Wake> std::fmt::Debug for HandleCore<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandleCore")
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

impl<R: 'static, W: Wake> HandleCore<R, W> {
    /// The handle of the call `call_id`, whose owner publishes to
    /// `published` and is reached through `to_owner`. The caller is
    /// present from now on: when the handle and every stream it handed out
    /// are gone before the call finished, the owner hears of a client
    /// disconnect.
    pub fn new(call_id: String, published: Arc<Published<W>>, to_owner: ToOwner<R>) -> Self {
        let gone = to_owner.clone();
        let present = Presence::new(published.clone(), move || {
            gone.command(Command::Input(Input::ClientDisconnected));
        });
        Self {
            call_id,
            published,
            to_owner,
            present,
        }
    }

    /// The call's id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The call's state as last published by its owner.
    pub fn state(&self) -> State {
        self.published.lock().state
    }

    /// The helper's pid while it runs, as published by its owner.
    pub fn pid(&self) -> Option<u32> {
        self.published.lock().pid
    }

    /// Whether the call has ended (its outcome is ready or was taken).
    pub fn is_finished(&self) -> bool {
        self.published.is_finished()
    }

    /// The approval card, once shown.
    pub fn card(&self) -> Option<ApprovalCard> {
        self.published.lock().card.clone()
    }

    /// What the owner publishes, for the runtime's waits.
    pub fn published(&self) -> &Published<W> {
        &self.published
    }

    /// Asks the call to stop; returns at once, ignored once finished.
    pub fn cancel(&self) {
        self.to_owner.cancel();
    }

    /// The call's card reached the approver; returns at once.
    pub fn card_delivered(&self) {
        self.to_owner.card_delivered();
    }

    /// Admits the queued call (see
    /// [`Input::Admitted`]);
    /// returns at once.
    pub fn admit(&self) {
        self.to_owner.admit();
    }

    /// The way to the owner, for a canceller that outlives the handle.
    pub fn to_owner(&self) -> ToOwner<R> {
        self.to_owner.clone()
    }

    /// Sends `ask` with `reply`, where the core's answer will come back,
    /// and gives back `answer`, the runtime's receiving end, to wait on.
    /// Refused at once (the core's `InvalidTransition` for the state the
    /// call is in) if the owner takes no more events.
    pub fn ask<A>(&self, ask: Ask, (reply, answer): (R, A)) -> Result<A, CallError> {
        if self.to_owner.command(ask.command(reply)) {
            Ok(answer)
        } else {
            Err(self.refused(ask))
        }
    }

    /// Sends a denial for `reason` ([`Command::Decline`]) with `reply`, as
    /// [`ask`](Self::ask) does a plain one (refused as [`Ask::Deny`]).
    pub fn decline<A>(&self, reason: String, (reply, answer): (R, A)) -> Result<A, CallError> {
        if self.to_owner.command(Command::Decline(reply, reason)) {
            Ok(answer)
        } else {
            Err(self.refused(Ask::Deny))
        }
    }

    /// The core's answer to `ask` as it came back (`None`: the owner ended
    /// without answering, which is a refusal).
    pub fn answered(
        &self,
        ask: Ask,
        answer: Option<Result<(), CallError>>,
    ) -> Result<(), CallError> {
        answer.unwrap_or_else(|| Err(self.refused(ask)))
    }

    fn refused(&self, ask: Ask) -> CallError {
        CallError::InvalidTransition {
            state: self.state(),
            input: ask.input(),
        }
    }

    /// The outcome if it is there, without waiting.
    pub fn try_take_outcome(&self) -> Taken {
        self.published.lock().take_outcome()
    }

    /// A streamed call's stdin and stdout from what the owner handed out
    /// (`taken`, from [`Snapshot::take_streams`] once
    /// [`Snapshot::streams_settled`] holds): the runtime's pipes `I` and
    /// `O`, each stream keeping the caller present, made into the
    /// runtime's stream types by `stdin` and `stdout`.
    ///
    /// [`Snapshot::take_streams`]: crate::published::Snapshot::take_streams
    /// [`Snapshot::streams_settled`]: crate::published::Snapshot::streams_settled
    pub fn streams<I: Send + 'static, O: Send + 'static, A, B>(
        &self,
        taken: io::Result<Box<dyn Any + Send>>,
        stdin: impl FnOnce(StdinWriter<I, W, R>) -> A,
        stdout: impl FnOnce(StdoutReader<O, W, R>) -> B,
    ) -> io::Result<(A, B)> {
        let handout = taken?
            .downcast::<Handout<I, O>>()
            .map_err(|_| io::Error::other("the call's streams are of another runtime"))?;
        let (writer, reader) = handout.finish(&self.to_owner, &self.present);
        Ok((stdin(writer), stdout(reader)))
    }

    /// Panics: the owner ended without an outcome (`why`, e.g. its runtime
    /// shut down), which only a bug or a runtime's end can cause.
    pub fn owner_gone(&self, why: &str) -> ! {
        panic!(
            "the owner of call {} ended without an outcome{why}",
            self.call_id
        );
    }
}
