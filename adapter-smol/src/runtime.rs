//! [`SmolRuntime`]: what smol gives the kit's async front
//! ([`spillguard_kit::front`]): an event listener to wake waiters, smol's
//! channels and timer, the global executor for the owner tasks, and the
//! async-process stream types.

use std::future::Future;
use std::time::{Duration, Instant};

use event_listener::Event as Notify;
use futures_lite::future;
use smol::Timer;
use smol::channel::{self, Receiver, Sender};
use spillguard_core::CallError;
use spillguard_kit::HostError;
use spillguard_kit::front::{AsyncRuntime, NewOwner};
use spillguard_kit::orphans::OrphanRuntime;
use spillguard_kit::owner::{Blocking, Unblocked};
use spillguard_kit::published::Wake;
use spillguard_kit::run_loop::Event;
use spillguard_kit::stream::{StdinWriter, StdoutReader};

use crate::owner;
use crate::reader::SmolOrphans;
use crate::stream::{HelperStdin, HelperStdout};

/// smol's global executor, as a host runs its calls on it (there is
/// nothing to keep: every smol host uses the one global executor).
#[derive(Debug, Clone, Copy, Default)]
pub struct SmolRuntime;

/// Wakes the waiters of what an owner publishes, and of a host's call
/// ends: an event listener.
#[derive(Debug, Default)]
pub struct Changed(Notify);

impl Wake for Changed {
    fn wake_all(&self) {
        self.0.notify(usize::MAX);
    }
}

/// The core's answer to an approval or a denial goes back on this channel.
pub(crate) type Reply = Sender<Result<(), CallError>>;

impl Blocking for SmolRuntime {
    /// On smol's blocking thread pool (`smol::unblock`), never on an
    /// executor thread.
    fn unblock<T: Send + 'static, F: FnOnce() -> T + Send + 'static>(job: F) -> Unblocked<T> {
        let task = smol::unblock(job);
        Box::pin(async move { Some(task.await) })
    }
}

impl AsyncRuntime for SmolRuntime {
    type Wake = Changed;
    type Reply = Reply;
    type Answer = std::pin::Pin<Box<dyn Future<Output = Option<Result<(), CallError>>> + Send>>;
    type Sender = Sender<Event<Reply>>;
    type Receiver = Receiver<Event<Reply>>;
    /// The owner task is detached; nothing of it is kept.
    type OwnerTask = ();
    type StdinPipe = crate::process::ChildStdin;
    type StdoutPipe = crate::process::ChildStdout;
    type Stdin = HelperStdin;
    type Stdout = HelperStdout;

    const OWNER_GONE: &'static str = " (it panicked)";

    /// Always there: the global executor starts with its first task.
    fn current() -> Result<Self, HostError> {
        Ok(SmolRuntime)
    }

    fn orphans(&self) -> impl OrphanRuntime {
        SmolOrphans
    }

    fn now() -> Instant {
        Instant::now()
    }

    fn listen(wake: &Changed) -> impl Future<Output = ()> + Send + '_ {
        wake.0.listen()
    }

    async fn timeout<F: Future + Send>(after: Duration, future: F) -> Option<F::Output> {
        let done = async { Some(future.await) };
        future::or(done, async {
            Timer::after(after).await;
            None
        })
        .await
    }

    fn channel() -> (Self::Sender, Self::Receiver) {
        channel::unbounded()
    }

    fn send(to: &Self::Sender, event: Event<Reply>) -> bool {
        to.try_send(event).is_ok()
    }

    fn reply() -> (Reply, Self::Answer) {
        let (reply, answer) = channel::bounded(1);
        (reply, Box::pin(async move { answer.recv().await.ok() }))
    }

    fn answer(reply: Reply, answer: Result<(), CallError>) {
        let _ = reply.try_send(answer);
    }

    /// Unlike a std receiver, a dropped async-channel receiver leaves
    /// queued events alive while a handle still holds a sender: the
    /// channel is emptied too.
    fn close(events: &mut Self::Receiver) {
        events.close();
        while events.try_recv().is_ok() {}
    }

    /// Detached on smol's global executor.
    fn start_owner(&self, new: NewOwner<Self>) {
        smol::spawn(owner::run(new)).detach();
    }

    /// A detached task leaves nothing to learn.
    async fn owner_ended((): ()) {}

    fn stdin(writer: StdinWriter<Self::StdinPipe, Changed, Reply>) -> HelperStdin {
        HelperStdin(writer)
    }

    fn stdout(reader: StdoutReader<Self::StdoutPipe, Changed, Reply>) -> HelperStdout {
        HelperStdout(reader)
    }
}
