//! [`SmolRuntime`]: what smol gives the host layer's async front
//! ([`spillguard_host::asynchronous`]): an event listener to wake waiters, smol's
//! channels and timer, the global executor for the owner tasks, and the
//! async-process stream types.

use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use event_listener::Event as Notify;
use futures_lite::future;
use smol::Timer;
use smol::channel::{self, Receiver, Sender};
use spillguard_core::{CallError, Config};
use spillguard_host::asynchronous::{AsyncRuntime, NewOwner, OwnerHere, OwnerLoop};
use spillguard_host::host_state::process_default;
use spillguard_host::leftover_pipes::LeftoverRuntime;
use spillguard_host::owner::{Blocking, Unblocked};
use spillguard_host::published::Wake;
use spillguard_host::run_loop::Event;
use spillguard_host::stream::{StdinWriter, StdoutReader};
use spillguard_host::{HostError, HostOptions};

use crate::owner;
use crate::reader::SmolLeftovers;
use crate::stream::{HelperStdin, HelperStdout};

/// smol's global executor, as a host runs its calls on it (there is
/// nothing to keep: every smol host uses the one global executor).
#[derive(Debug, Clone, Copy, Default)]
pub struct SmolRuntime;

/// Those waiting on what an owner publishes, or on a host's call ends,
/// woken together: an event listener.
#[derive(Debug, Default)]
pub struct Waiters(Notify);

impl Wake for Waiters {
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
    type Wake = Waiters;
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

    /// On smol's global executor, as every smol host.
    fn default_host() -> std::io::Result<&'static spillguard_host::asynchronous::AsyncHost<Self>> {
        static DEFAULT: OnceLock<spillguard_host::asynchronous::AsyncHost<SmolRuntime>> =
            OnceLock::new();
        process_default(&DEFAULT, || {
            spillguard_host::asynchronous::AsyncHost::new(Config::default(), HostOptions::default())
                .map_err(std::io::Error::other)
        })
    }

    /// The call's span, with this crate as its target.
    #[cfg(feature = "tracing")]
    fn call_span(
        fields: &spillguard_host::call_span::SpanFields<'_>,
    ) -> spillguard_host::call_span::__tracing::Span {
        spillguard_host::call_span!("spillguard_smol", fields)
    }

    fn leftovers(&self) -> impl LeftoverRuntime {
        SmolLeftovers
    }

    fn now() -> Instant {
        Instant::now()
    }

    fn listen(wake: &Waiters) -> impl Future<Output = ()> + Send + '_ {
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

    /// Begun now; its loop runs wherever the caller polls it: smol's
    /// reactor is the process's, whatever thread or executor polls.
    #[allow(clippy::result_large_err)]
    fn owner_here(&self, new: NewOwner<Self>) -> Result<OwnerHere<Self>, NewOwner<Self>> {
        Ok(OwnerHere {
            owner: Box::pin(owner::begin(new)),
            task: (),
        })
    }

    /// Detached on smol's global executor.
    fn detach_owner(&self, owner: OwnerLoop) {
        smol::spawn(owner).detach();
    }

    /// A detached task leaves nothing to learn.
    async fn owner_ended((): ()) {}

    fn stdin(writer: StdinWriter<Self::StdinPipe, Waiters, Reply>) -> HelperStdin {
        HelperStdin(writer)
    }

    fn stdout(reader: StdoutReader<Self::StdoutPipe, Waiters, Reply>) -> HelperStdout {
        HelperStdout(reader)
    }
}
