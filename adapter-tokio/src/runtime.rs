//! [`TokioRuntime`]: what tokio gives the host layer's async front
//! ([`spillguard_host::asynchronous`]): a `Notify` to wake waiters, unbounded and
//! oneshot channels, its clock and timeout, the runtime the owner tasks are
//! spawned on, and the tokio stream types.
//!
//! The host captures the runtime's handle when it is made (outside a
//! runtime that is a `HostError::NoRuntime`), and owners read tokio's
//! clock, so tests with paused time drive real calls.

use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use spillguard_core::{CallError, Config};
use spillguard_host::asynchronous::{AsyncRuntime, NewOwner};
use spillguard_host::host_state::process_default;
use spillguard_host::leftover_pipes::LeftoverRuntime;
use spillguard_host::owner::{Blocking, Unblocked};
use spillguard_host::published::Wake;
use spillguard_host::run_loop::Event;
use spillguard_host::stream::{StdinWriter, StdoutReader};
use spillguard_host::{HostError, HostOptions};
use tokio::runtime::Handle;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::owner;
use crate::reader::TokioLeftovers;
use crate::stream::{HelperStdin, HelperStdout};

/// What to do when `Host::new` finds no runtime.
const NO_RUNTIME: &str = "Host::new was called outside a tokio runtime: call it from within one, \
                          or pass a runtime handle to Host::with_runtime";

/// The tokio runtime a host runs its calls on (its `Handle`, captured by
/// `Host::new` or given to `Host::with_runtime`). The runtime needs its IO
/// and time drivers (`enable_all()`, as `#[tokio::main]` does): the
/// helper's pipes, its exit and the call's timer use them.
#[derive(Debug, Clone)]
pub struct TokioRuntime(Handle);

impl TokioRuntime {
    /// The runtime's handle.
    pub fn handle(&self) -> &Handle {
        &self.0
    }
}

/// `host.runtime()` is used as the runtime's `Handle` (`spawn`,
/// `block_on`).
impl std::ops::Deref for TokioRuntime {
    type Target = Handle;

    fn deref(&self) -> &Handle {
        &self.0
    }
}

impl From<Handle> for TokioRuntime {
    fn from(handle: Handle) -> Self {
        Self(handle)
    }
}

/// Those waiting on what an owner publishes, or on a host's call ends,
/// woken together: a `Notify`.
#[derive(Debug, Default)]
pub struct Waiters(Notify);

impl Wake for Waiters {
    fn wake_all(&self) {
        self.0.notify_waiters();
    }
}

/// The owner's clock: tokio's, so that a paused test clock drives the call.
pub(crate) fn clock() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The core's answer to an approval or a denial.
pub(crate) type Reply = oneshot::Sender<Result<(), CallError>>;

impl Blocking for TokioRuntime {
    /// On tokio's blocking pool (`spawn_blocking`), never on a worker
    /// thread. A job that panicked panics the owner too, as it does on
    /// every runtime (the owner's end is then the one policy of
    /// [`OwnerCore`](spillguard_host::owner::OwnerCore)'s drop); `None`
    /// only if the runtime is shutting down.
    fn unblock<T: Send + 'static, F: FnOnce() -> T + Send + 'static>(job: F) -> Unblocked<T> {
        let task = tokio::task::spawn_blocking(job);
        Box::pin(async move {
            match task.await {
                Ok(done) => Some(done),
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                Err(_) => None,
            }
        })
    }
}

impl AsyncRuntime for TokioRuntime {
    type Wake = Waiters;
    type Reply = Reply;
    type Answer = std::pin::Pin<Box<dyn Future<Output = Option<Result<(), CallError>>> + Send>>;
    type Sender = mpsc::UnboundedSender<Event<Reply>>;
    type Receiver = mpsc::UnboundedReceiver<Event<Reply>>;
    type OwnerTask = JoinHandle<()>;
    type StdinPipe = tokio::process::ChildStdin;
    type StdoutPipe = tokio::process::ChildStdout;
    type Stdin = HelperStdin;
    type Stdout = HelperStdout;

    const OWNER_GONE: &'static str = " (it panicked or its runtime shut down)";

    /// The current runtime; outside one, [`HostError::NoRuntime`].
    fn current() -> Result<Self, HostError> {
        let handle =
            Handle::try_current().map_err(|_| HostError::NoRuntime { hint: NO_RUNTIME })?;
        Ok(Self(handle))
    }

    /// On a runtime of its own, driven by a thread of its own
    /// (`spillguard-default`) for the life of the process, so that the
    /// calls of a `Command` do not depend on the runtime that awaits them
    /// (a test's runtime may end before another starts).
    fn default_host() -> std::io::Result<&'static spillguard_host::asynchronous::AsyncHost<Self>> {
        static DEFAULT: OnceLock<spillguard_host::asynchronous::AsyncHost<TokioRuntime>> =
            OnceLock::new();
        process_default(&DEFAULT, || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let handle = runtime.handle().clone();
            std::thread::Builder::new()
                .name("spillguard-default".into())
                .spawn(move || runtime.block_on(std::future::pending::<()>()))?;
            spillguard_host::asynchronous::AsyncHost::with_runtime(
                Config::default(),
                HostOptions::default(),
                handle,
            )
            .map_err(std::io::Error::other)
        })
    }

    /// The call's span, with this crate as its target.
    #[cfg(feature = "tracing")]
    fn call_span(
        fields: &spillguard_host::call_span::SpanFields<'_>,
    ) -> spillguard_host::call_span::__tracing::Span {
        spillguard_host::call_span!("spillguard_tokio", fields)
    }

    fn leftovers(&self) -> impl LeftoverRuntime {
        TokioLeftovers(self.0.clone())
    }

    fn now() -> Instant {
        clock()
    }

    /// A `Notified` made now: it receives every `notify_waiters` from now
    /// on, polled or not.
    fn listen(wake: &Waiters) -> impl Future<Output = ()> + Send + '_ {
        wake.0.notified()
    }

    async fn timeout<F: Future + Send>(after: Duration, future: F) -> Option<F::Output> {
        tokio::time::timeout(after, future).await.ok()
    }

    fn channel() -> (Self::Sender, Self::Receiver) {
        mpsc::unbounded_channel()
    }

    fn send(to: &Self::Sender, event: Event<Reply>) -> bool {
        to.send(event).is_ok()
    }

    fn reply() -> (Reply, Self::Answer) {
        let (reply, answer) = oneshot::channel();
        (reply, Box::pin(async move { answer.await.ok() }))
    }

    fn answer(reply: Reply, answer: Result<(), CallError>) {
        let _ = reply.send(answer);
    }

    fn close(events: &mut Self::Receiver) {
        events.close();
        while events.try_recv().is_ok() {}
    }

    /// A task spawned on the host's runtime.
    fn start_owner(&self, new: NewOwner<Self>) -> JoinHandle<()> {
        self.0.spawn(owner::run(new))
    }

    /// Awaits the task; resumes its panic if it panicked.
    async fn owner_ended(task: JoinHandle<()>) {
        if let Err(error) = task.await
            && error.is_panic()
        {
            std::panic::resume_unwind(error.into_panic());
        }
    }

    fn stdin(writer: StdinWriter<Self::StdinPipe, Waiters, Reply>) -> HelperStdin {
        HelperStdin(writer)
    }

    fn stdout(reader: StdoutReader<Self::StdoutPipe, Waiters, Reply>) -> HelperStdout {
        HelperStdout(reader)
    }
}
