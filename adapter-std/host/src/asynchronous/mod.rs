//! The async front, written once for smol and tokio: [`AsyncHost`] (the
//! host the builder starts calls on), [`AsyncCallHandle`] (the caller's
//! side of one call) and [`AsyncCanceller`], generic over an
//! [`AsyncRuntime`].
//!
//! A runtime crate names these with its runtime
//! (`pub type Host = AsyncHost<SmolRuntime>`) and keeps only what its
//! runtime decides: the owner's loop and where it runs, how a waiter is
//! woken, its channel, clock and timer, its process, reader and stream
//! types. Everything else (the registry of live calls, shutdown, debug
//! grants, approval plumbing, waiting for an outcome) is here, on top of
//! the host layer's [`HostLink`] and
//! [`HandleCore`](crate::handle::HandleCore).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use spillguard_core::{CallError, CancelReason, DebugGrant, Input, Outcome};

use crate::error::HostError;
use crate::host_state::HostState;
use crate::leftover_pipes::LeftoverRuntime;
use crate::owner::{Blocking, HostLink, OwnerCore};
use crate::published::Wake;
use crate::run_loop::{Command, Event, Start};
use crate::stream::{StdinWriter, StdoutReader};

mod front;
mod handle;
mod host;
mod owner;

pub use handle::{AsyncCallHandle, AsyncCanceller};
pub use host::{AsyncHost, DefaultHost};
pub use owner::{AsyncOwner, Sources};

/// The future `CallBuilder::run` returns on an async runtime: the call's
/// outcome. It owns the call's handle: dropping it before it is ready is
/// dropping the handle (see [`AsyncCallHandle`]).
pub type Run = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// What an async runtime provides to the front: how waiters are woken and
/// wait, the owner's channel and clock, a timer, where an owner task runs,
/// and the runtime's stream types.
///
/// A value of it is what the host keeps of its runtime (a tokio
/// `Handle`; nothing for smol's global executor). Its [`Blocking`] is
/// where an owner runs blocking work (the audit sink's writes).
pub trait AsyncRuntime: Blocking + Clone + fmt::Debug + Send + Sync + Sized + 'static {
    /// Wakes every waiter of what an owner publishes, and of a host's
    /// call ends.
    type Wake: Wake + Default + fmt::Debug + Send + Sync + 'static;
    /// Where the owner sends the core's answer to an approval or a denial.
    type Reply: Send + 'static;
    /// The receiving end of a [`Reply`](Self::Reply): the answer, or
    /// `None` if the owner ended without answering.
    type Answer: Future<Output = Option<Result<(), CallError>>> + Send;
    /// The sending side of an owner's event channel (unbounded: a send
    /// never waits, so it can be made from `Drop`).
    type Sender: Clone + Send + Sync + 'static;
    /// The receiving side of an owner's event channel.
    type Receiver: Send + 'static;
    /// What a handle keeps of its owner task, to learn how it ended.
    type OwnerTask: fmt::Debug + Send + Sync + 'static;
    /// The helper's stdin pipe, as the runtime's process hands it out.
    type StdinPipe: Send + 'static;
    /// The helper's stdout pipe, as the runtime's process hands it out.
    type StdoutPipe: Send + 'static;
    /// A streamed call's stdin for the caller (the runtime's async writer).
    type Stdin;
    /// A streamed call's stdout for the caller (the runtime's async reader).
    type Stdout;

    /// What a handle says when its owner ended without an outcome and
    /// without a panic to resume.
    const OWNER_GONE: &'static str;

    /// The runtime a host made now runs its calls on, or why there is
    /// none.
    fn current() -> Result<Self, HostError>;

    /// The process-wide host that runs the calls of
    /// [`CallBuilder<'static, DefaultHost<Self>>`](DefaultHost) (an
    /// adapter's `Command`): made at its first call with the default
    /// configuration and options, on a runtime that lives as long as the
    /// process, and kept; an error only when that runtime cannot start.
    fn default_host() -> std::io::Result<&'static AsyncHost<Self>>;

    /// Makes a call's span with the adapter's crate as its target
    /// ([`call_span!`](crate::call_span)); this crate's by default.
    #[cfg(feature = "tracing")]
    fn call_span(fields: &crate::call_span::SpanFields<'_>) -> tracing::Span {
        crate::call_span::host_span(fields)
    }

    /// Where the host's drainer of leftover pipes runs.
    fn leftovers(&self) -> impl LeftoverRuntime;

    /// The owners' clock (tokio's, so that a paused test clock drives it).
    fn now() -> Instant;

    /// A future that is ready once `wake` wakes its waiters. It listens
    /// from the moment it is made, before its first poll, so a check made
    /// between making it and awaiting it misses no wake-up.
    fn listen(wake: &Self::Wake) -> impl Future<Output = ()> + Send + '_;

    /// `future`'s output, or `None` if `after` passes first.
    fn timeout<F: Future + Send>(
        after: Duration,
        future: F,
    ) -> impl Future<Output = Option<F::Output>> + Send;

    /// A new, unbounded owner channel.
    fn channel() -> (Self::Sender, Self::Receiver);

    /// Queues `event` for the owner without waiting; `false` once the
    /// owner takes no more.
    fn send(to: &Self::Sender, event: Event<Self::Reply>) -> bool;

    /// A reply and its answer, for one approval or denial.
    fn reply() -> (Self::Reply, Self::Answer);

    /// Sends the core's `answer` back on `reply` (nobody may wait any
    /// more).
    fn answer(reply: Self::Reply, answer: Result<(), CallError>);

    /// Closes an owner's channel (later sends fail at once) and drops
    /// what is queued in it (a reply dropped unanswered is a refusal).
    fn close(events: &mut Self::Receiver);

    /// Runs the owner of a prepared call, detached from the caller, to
    /// the record ([`AsyncOwner::begin`] then the runtime's loop).
    fn start_owner(&self, owner: NewOwner<Self>) -> Self::OwnerTask;

    /// Begins the owner of a prepared call now and returns its loop, for
    /// the caller of `run()` to poll itself, with what its handle keeps
    /// of it; `Err` gives the owner back where the loop must run on the
    /// runtime's own tasks (its I/O is bound to one runtime). A loop the
    /// caller drops unfinished goes to [`detach_owner`](Self::detach_owner).
    /// No runtime does this unless it says so.
    // The owner given back is moved once, as `start_owner` takes it: no
    // box to allocate on every call of a runtime that runs none here.
    #[allow(clippy::result_large_err)]
    fn owner_here(&self, owner: NewOwner<Self>) -> Result<OwnerHere<Self>, NewOwner<Self>> {
        Err(owner)
    }

    /// Runs the rest of an owner's loop the caller of `run()` dropped, on
    /// the runtime, detached (see [`owner_here`](Self::owner_here)).
    fn detach_owner(&self, owner: OwnerLoop) {
        drop(owner);
    }

    /// Waits for an owner task that ended without an outcome; resumes its
    /// panic if it panicked.
    fn owner_ended(task: Self::OwnerTask) -> impl Future<Output = ()> + Send;

    /// The caller's stdin of a streamed call.
    fn stdin(writer: StdinWriter<Self::StdinPipe, Self::Wake, Self::Reply>) -> Self::Stdin;

    /// The caller's stdout of a streamed call.
    fn stdout(reader: StdoutReader<Self::StdoutPipe, Self::Wake, Self::Reply>) -> Self::Stdout;
}

/// An owner's loop, begun: polled by the caller of `run()`, or by the
/// runtime once detached.
pub type OwnerLoop = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An owner begun for the caller of `run()` to poll ([`AsyncRuntime::owner_here`]).
pub struct OwnerHere<R: AsyncRuntime> {
    /// Its loop, to the record.
    pub owner: OwnerLoop,
    /// What the call's handle keeps of it.
    pub task: R::OwnerTask,
}

impl<R: AsyncRuntime> fmt::Debug for OwnerHere<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnerHere")
            .field("task", &self.task)
            .finish_non_exhaustive()
    }
}

/// A prepared call's owner, for [`AsyncRuntime::start_owner`] to run.
pub struct NewOwner<R: AsyncRuntime> {
    /// The call and everything between two waits.
    pub core: OwnerCore<AsyncShared<R>, R::Wake>,
    /// The call's first inputs.
    pub start: Start,
    /// The owner's channel.
    pub events: R::Receiver,
    /// Keeps the channel open; how the helper's tasks report.
    pub sender: R::Sender,
}

impl<R: AsyncRuntime> fmt::Debug for NewOwner<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt(f)
    }
}

/// What the clones of an [`AsyncHost`] and the owners of its calls share:
/// the runtime-free state, the wake-up of a call's end, the runtime.
pub struct AsyncShared<R: AsyncRuntime> {
    state: HostState<R::Sender>,
    /// Woken after a call left the registry.
    call_ended: R::Wake,
    runtime: R,
}

impl<R: AsyncRuntime> fmt::Debug for AsyncShared<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.state.fmt(f)
    }
}

impl<R: AsyncRuntime> HostLink for AsyncShared<R> {
    type Live = R::Sender;

    fn state(&self) -> &HostState<R::Sender> {
        &self.state
    }

    fn call_ended(&self, id: u64) {
        self.state.deregister(id);
        self.call_ended.wake_all();
    }

    fn cancel(live: &R::Sender, reason: CancelReason) {
        R::send(live, Event::Command(Command::Input(Input::Cancel(reason))));
    }

    #[cfg(feature = "tracing")]
    fn call_span(&self) -> crate::call_span::SpanMaker {
        R::call_span
    }

    fn debug(live: &R::Sender, grant: Option<DebugGrant>) {
        R::send(
            live,
            Event::Command(Command::Input(
                grant.map_or(Input::DebugRevoked, Input::DebugGranted),
            )),
        );
    }
}
