//! [`AsyncHost`]: configuration, the retention pool, the audit sink, the
//! runtime the calls run on, and the registry of live calls.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use spillguard_core::{
    CallKind, CallRecord, CallSettings, CallSpec, Config, DebugGrant, DebugGrantError,
    RetentionPool,
};

use super::{AsyncCallHandle, AsyncRuntime, AsyncShared, NewOwner, OwnerHere, OwnerLoop, Run};
use crate::builder::{Approval, CallBuilder, CallRequest, Launch};
use crate::command::HelperCommand;
use crate::error::HostError;
use crate::host_state::HostState;
use crate::leftover_pipes::LeftoverStats;
use crate::options::{HostOptions, ShutdownReport};
use crate::output::{Output, status_of};
use crate::owner::{HostLink, Prepared};
use crate::published::Published;

/// Runs helper calls for one process on the runtime `R`: holds the
/// validated [`Config`], the process-wide [`RetentionPool`], the audit sink
/// and the live calls. Each call is driven by an owner task of its own,
/// detached from whoever started the call, so dropping a caller's future
/// never skips a call's shutdown or its record.
///
/// Cheap to clone: clones share everything. Each call keeps what it needs
/// of the host, so dropping the last clone ends no call: every live call
/// runs to its end and writes its record. [`shutdown`](Self::shutdown)
/// cancels the live calls (TERM to each group, the grace, KILL);
/// [`shutdown_and_wait`](Self::shutdown_and_wait) also waits for their
/// records.
///
/// Audit events are written to [`HostOptions::audit`] by the owner, in
/// order, as they happen: each write runs on the runtime's blocking pool
/// and the owner awaits it before its next action.
///
/// Each async adapter's `Host` wraps it ([`async_front!`](crate::async_front));
/// the wrapper's docs say each method's cancel safety.
#[derive(Debug)]
pub struct AsyncHost<R: AsyncRuntime> {
    shared: Arc<AsyncShared<R>>,
}

impl<R: AsyncRuntime> Clone for AsyncHost<R> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<R: AsyncRuntime> AsyncHost<R> {
    /// A host for `config` (validated here) run with `options`, whose calls
    /// run on the current runtime ([`HostError::NoRuntime`] where there is
    /// none: then use [`with_runtime`](Self::with_runtime)).
    pub fn new(config: Config, options: HostOptions) -> Result<Self, HostError> {
        Self::with_runtime(config, options, R::current()?)
    }

    /// A host whose calls run on `runtime`; it may be made, and calls
    /// started, from outside any runtime.
    pub fn with_runtime(
        config: Config,
        options: HostOptions,
        runtime: impl Into<R>,
    ) -> Result<Self, HostError> {
        let runtime = runtime.into();
        let state = HostState::new(config, options, runtime.leftovers())?;
        Ok(Self {
            shared: Arc::new(AsyncShared {
                state,
                call_ended: R::Wake::default(),
                runtime,
            }),
        })
    }

    fn state(&self) -> &HostState<R::Sender> {
        self.shared.state()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        self.state().config()
    }

    /// The options in force.
    pub fn options(&self) -> &HostOptions {
        self.state().options()
    }

    /// The runtime the calls run on.
    pub fn runtime(&self) -> &R {
        &self.shared.runtime
    }

    /// The process-wide pool every call's stderr draws from.
    pub fn pool(&self) -> &RetentionPool {
        self.state().pool()
    }

    /// The session calls belong to unless they name their own.
    pub fn session_id(&self) -> &str {
        self.state().session_id()
    }

    /// The settings a call of `kind` started now gets (the config, the
    /// host's options, its debug grant if one is in force), on the owners'
    /// clock.
    pub fn settings_for(&self, kind: CallKind) -> CallSettings {
        self.state().call_settings(kind, R::now())
    }

    /// A call of `program`, to describe further and then
    /// [`run`](CallBuilder::run) (a future of its outcome) or
    /// [`start`](CallBuilder::start) (its handle). No shell is involved.
    pub fn command(&self, program: impl Into<OsString>) -> CallBuilder<'_, Self> {
        CallBuilder::on(self, HelperCommand::new(program))
    }

    /// A call of `script` run by `/bin/sh -c`.
    pub fn shell(&self, script: impl Into<OsString>) -> CallBuilder<'_, Self> {
        CallBuilder::on(self, HelperCommand::shell_script(script))
    }

    /// A call of `command`, a description made beforehand.
    pub fn call(&self, command: HelperCommand) -> CallBuilder<'_, Self> {
        CallBuilder::on(self, command)
    }

    /// Starts a call of `command` described by `spec`; the builder
    /// ([`command`](Self::command)) fills `spec` in for you.
    ///
    /// Returns at once; the call runs on its own owner task. An invalid
    /// command ends `failed_before_dispatch`, as does a program that cannot
    /// be spawned. With [`Approval::Required`], the card is shown and
    /// nothing runs until [`AsyncCallHandle::approve`].
    pub fn start(
        &self,
        spec: CallSpec,
        command: HelperCommand,
        approval: Approval,
    ) -> AsyncCallHandle<R> {
        self.call(command).spec(spec).approval(approval).start()
    }

    /// Grants debug for `duration` from now (on the owners' clock), up to
    /// `per_call_bytes` of stderr per call, to calls started under it and
    /// to every live call; see the std adapter's `Host::grant_debug`.
    pub fn grant_debug(
        &self,
        duration: Duration,
        per_call_bytes: u64,
    ) -> Result<DebugGrant, DebugGrantError> {
        self.shared.grant_debug(R::now(), duration, per_call_bytes)
    }

    /// Ends the debug grant now, for calls started from now on and for
    /// running calls; see the std adapter's `Host::revoke_debug`.
    pub fn revoke_debug(&self) {
        self.shared.revoke_debug();
    }

    /// Cancels every live call and returns how many were asked to stop,
    /// without waiting: each owner carries on with the stop (SIGTERM to
    /// its group, the grace, SIGKILL) and writes its record. Calls started
    /// afterwards are cancelled before dispatch.
    /// [`shutdown_and_wait`](Self::shutdown_and_wait) also waits for them.
    pub fn shutdown(&self) -> usize {
        self.shared.cancel_all().len()
    }

    /// Cancels every live call and waits at most `timeout` until each has
    /// finished and its record is written. Calls started afterwards are
    /// cancelled before dispatch.
    pub async fn shutdown_and_wait(&self, timeout: Duration) -> ShutdownReport {
        let targets = self.shared.cancel_all();
        let ids: HashSet<u64> = targets.iter().map(|&(id, _)| id).collect();
        let pending = || self.state().still_live(&ids);
        R::timeout(timeout, self.until_none(pending)).await;
        let unfinished = pending();
        ShutdownReport {
            finished: ids.len() - unfinished,
            unfinished,
        }
    }

    /// Waits until no call is live: every call started has finished and
    /// its record is written. Calls started while it waits are waited for
    /// too.
    pub async fn wait_idle(&self) {
        self.until_none(|| self.live_calls()).await;
    }

    /// Returns once `pending` counts none, checked at each call's end.
    async fn until_none(&self, pending: impl Fn() -> usize + Send) {
        let shared = &self.shared;
        loop {
            // Listening before the check, so no call's end is missed.
            let ended = R::listen(&shared.call_ended);
            if pending() == 0 {
                return;
            }
            ended.await;
        }
    }

    /// How many calls are running (their record not yet written).
    pub fn live_calls(&self) -> usize {
        self.state().live_calls()
    }

    /// The records of finished calls, oldest first (at most
    /// [`HostOptions::finished_records_kept`]). A call whose handle was
    /// dropped early is here too.
    pub fn finished_records(&self) -> Vec<CallRecord> {
        self.state().finished_records()
    }

    /// How many audit events the sink failed to write.
    pub fn audit_failures(&self) -> u64 {
        self.state().audit_failures()
    }

    /// The after-life of finished calls: how many pipes escaped
    /// descendants still hold that the host reads and drops now, and how
    /// many it closed at [`HostOptions::leftover_drain_max`] or
    /// [`HostOptions::leftover_pipes_max`] (the escapee's next write to a
    /// closed pipe gets SIGPIPE or EPIPE) or saw end.
    pub fn leftover_pipes(&self) -> LeftoverStats {
        self.state().leftover_pipes()
    }
}

/// Starts the call; `start()` and `run()` are the builder's own.
impl<R: AsyncRuntime> Launch for AsyncHost<R> {
    type Handle = AsyncCallHandle<R>;

    fn launch(&self, request: CallRequest) -> AsyncCallHandle<R> {
        match self.launch_with(request, false) {
            Launched::Task(handle) => handle,
            // Not asked for: an owner is only begun here when asked.
            Launched::Here(mut run) => match run.handle.take() {
                Some(handle) => handle,
                None => unreachable!("a call launched here has its handle"),
            },
        }
    }
}

/// A call launched: its owner on a task of the runtime, or begun for the
/// caller to poll.
enum Launched<R: AsyncRuntime> {
    Task(AsyncCallHandle<R>),
    Here(RunHere<R>),
}

impl<R: AsyncRuntime> AsyncHost<R> {
    /// Prepares the call and begins its owner: on the caller's poll when
    /// `here` and the runtime allows it ([`AsyncRuntime::owner_here`]),
    /// else on a task of its own.
    fn launch_with(&self, request: CallRequest, here: bool) -> Launched<R> {
        let resolved = self.state().resolve(request, R::now());
        let (sender, events) = R::channel();
        let published = Arc::new(Published::new(R::Wake::default()));
        let Prepared {
            call_id,
            start,
            core,
        } = Prepared::prepare(
            &self.shared,
            resolved,
            sender.clone(),
            published.clone(),
            R::now,
        );
        let new = NewOwner {
            core,
            start,
            events,
            sender: sender.clone(),
        };
        let new = match here {
            true => match self.runtime().owner_here(new) {
                Ok(OwnerHere { mut owner, task }) => {
                    // Its first steps now, the spawn among them, as on a
                    // task of its own: the call starts now, not at the
                    // first poll. Each later poll registers its waker.
                    let mut now = Context::from_waker(std::task::Waker::noop());
                    let done = owner.as_mut().poll(&mut now).is_ready();
                    return Launched::Here(RunHere {
                        owner: (!done).then_some(owner),
                        handle: Some(AsyncCallHandle::new(call_id, sender, published, task)),
                        shared: self.shared.clone(),
                        waiting: None,
                    });
                }
                Err(new) => new,
            },
            false => new,
        };
        let task = self.runtime().start_owner(new);
        Launched::Task(AsyncCallHandle::new(call_id, sender, published, task))
    }

    /// The future of a call run to its end: its owner polled by the
    /// caller where the runtime allows it (no task to wake and be woken
    /// by, a noticeable part of a short helper's spawn), else on a task.
    fn run_request(&self, request: CallRequest) -> Run {
        match self.launch_with(request, true) {
            Launched::Here(run) => Box::pin(run),
            Launched::Task(handle) => Box::pin(handle.wait()),
        }
    }
}

/// A call run to its end whose owner the caller polls: the owner's loop
/// first, then the handle's wait, which is ready once the loop published
/// the outcome. Dropped unfinished, the loop goes on, detached on the
/// runtime, and the handle is dropped as any (its `kill_on_drop`).
struct RunHere<R: AsyncRuntime> {
    owner: Option<OwnerLoop>,
    /// Until the loop ended; then in `waiting`.
    handle: Option<AsyncCallHandle<R>>,
    shared: Arc<AsyncShared<R>>,
    waiting: Option<Run>,
}

// Nothing of it is pinned in place: the futures it polls are boxed, and
// the handle is moved out before it is waited on.
impl<R: AsyncRuntime> Unpin for RunHere<R> {}

impl<R: AsyncRuntime> Future for RunHere<R> {
    type Output = spillguard_core::Outcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<spillguard_core::Outcome> {
        let this = &mut *self;
        if let Some(owner) = &mut this.owner
            && owner.as_mut().poll(cx).is_ready()
        {
            this.owner = None;
        }
        if this.owner.is_some() {
            return Poll::Pending;
        }
        // The loop ended: the outcome is published (or the owner is gone).
        if this.waiting.is_none()
            && let Some(handle) = this.handle.take()
        {
            this.waiting = Some(Box::pin(handle.wait()));
        }
        match &mut this.waiting {
            Some(waiting) => waiting.as_mut().poll(cx),
            None => Poll::Pending,
        }
    }
}

impl<R: AsyncRuntime> Drop for RunHere<R> {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            self.shared.runtime.detach_owner(owner);
        }
    }
}

impl<'h, R: AsyncRuntime> CallBuilder<'h, AsyncHost<R>> {
    /// Starts the call and returns a future of its
    /// [`Outcome`](spillguard_core::Outcome): the exit
    /// status, the record and the bounded stderr.
    ///
    /// The call starts now, not at the first poll; the future owns its
    /// handle, so dropping it before it is ready is dropping the handle
    /// (see [`AsyncCallHandle`] and [`kill_on_drop`](CallBuilder::kill_on_drop)).
    ///
    /// No handle reaches this call's streams: a piped stdout is
    /// captured within its budget and a piped stdin is at end-of-file, as
    /// `std::process::Command::output` makes them.
    pub fn run(self) -> Run {
        let (host, request) = self.run_to_end().into_parts();
        host.run_request(request)
    }

    /// Runs the call to its end and returns its [`Output`]: the exit
    /// status, stdout whole, the bounded stderr and the record; the
    /// `tokio::process::Command::output` of spillguard. A helper that
    /// could not be spawned, a call that ended before its helper exited,
    /// and a stdout cut at its budget (unless
    /// [`allow_stdout_truncation`](CallBuilder::allow_stdout_truncation))
    /// are errors. The call starts at the first poll.
    pub async fn output(self) -> io::Result<Output> {
        Output::of(self.run().await)
    }

    /// Runs the call to its end and returns how its helper ended; the
    /// `tokio::process::Command::status` of spillguard. Errors as
    /// [`output`](Self::output), but a cut stdout is none.
    pub async fn status(self) -> io::Result<ExitStatus> {
        status_of(self.run().await)
    }

    /// Starts the call and returns its handle at once, to approve, deny,
    /// cancel or wait on: the `tokio::process::Command::spawn` of
    /// spillguard.
    #[doc(alias = "spawn")]
    pub fn start(self) -> AsyncCallHandle<R> {
        let (host, request) = self.into_parts();
        host.launch(request)
    }
}

/// The process-wide host of `R`, as the host of a [`CallBuilder`]: an
/// adapter's `Command` is `CallBuilder<'static, DefaultHost<R>>`, a call
/// that needs no `Host` of its own. Its calls run on
/// [`AsyncRuntime::default_host`], whatever runtime awaits them.
pub struct DefaultHost<R>(PhantomData<fn() -> R>);

impl<R> fmt::Debug for DefaultHost<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DefaultHost")
    }
}

impl<R: AsyncRuntime> CallBuilder<'static, DefaultHost<R>> {
    /// A call of `program` on the process-wide host, to describe further
    /// with every builder method (`.arg`, `.env`, `.deadline`, ...) and
    /// run with [`output`](Self::output), [`status`](Self::status) or
    /// [`spawn`](Self::spawn). No shell is involved.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self::on_default(HelperCommand::new(program))
    }

    /// A call of `command` on the process-wide host.
    pub fn on_default(command: HelperCommand) -> Self {
        // A value of no size: leaking it allocates nothing.
        CallBuilder::on(Box::leak(Box::new(DefaultHost(PhantomData))), command)
    }

    /// Starts the call on the process-wide host and returns its handle;
    /// the `tokio::process::Command::spawn` of spillguard. An error only
    /// when that host cannot be made (its runtime could not start).
    pub fn spawn(self) -> io::Result<AsyncCallHandle<R>> {
        let host = R::default_host()?;
        Ok(host.launch(self.into_request()))
    }

    /// Runs the call on the process-wide host to its end and returns its
    /// [`Output`]: the exit status, stdout whole, the bounded stderr and
    /// the record. A helper that could not be spawned, a call that ended
    /// before its helper exited, and a stdout cut at its budget (unless
    /// [`allow_stdout_truncation`](CallBuilder::allow_stdout_truncation))
    /// are errors.
    pub async fn output(self) -> io::Result<Output> {
        Output::of(self.run_here()?.await)
    }

    /// Runs the call on the process-wide host and returns how its helper
    /// ended.
    pub async fn status(self) -> io::Result<ExitStatus> {
        status_of(self.run_here()?.await)
    }

    /// The call run to its end on the process-wide host (see
    /// [`AsyncRuntime::owner_here`]).
    fn run_here(self) -> io::Result<Run> {
        let host = R::default_host()?;
        Ok(host.run_request(self.run_to_end().into_request()))
    }
}
