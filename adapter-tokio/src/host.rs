//! The process-wide [`Host`]: configuration, the retention pool, the audit
//! sink, the runtime the calls run on, and the registry of live calls.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use spillguard_core::{
    CallKind, CallRecord, CallSettings, CallSpec, CancelReason, Config, DebugGrant,
    DebugGrantError, Outcome, RetentionPool,
};
use spillguard_kit::host_state::HostState;
use spillguard_kit::owner::{HostCore, HostLink, Prepared};
use spillguard_kit::{
    Approval, CallBuilder, CallRequest, HelperCommand, HostError, HostOptions, Launch, OrphanStats,
    Resolved, ShutdownReport,
};
use tokio::runtime::Handle;
use tokio::sync::{Notify, mpsc};

use crate::handle::{CallHandle, Changed, Published};
use crate::owner::{self, Command, Event, Owner};
use crate::reader::TokioOrphans;

/// What to do when [`Host::new`] finds no runtime.
const NO_RUNTIME: &str = "Host::new was called outside a tokio runtime: call it from within one, \
                          or pass a runtime handle to Host::with_runtime";

/// Runs helper calls for one process on one tokio runtime: holds the
/// validated [`Config`], the process-wide [`RetentionPool`], the audit sink
/// and the live calls.
///
/// Cheap to clone: clones share everything. Each call's owner is a task
/// spawned on the runtime captured when the host was made, detached from
/// whoever started the call, so dropping a caller's future never skips a
/// call's shutdown or its record.
///
/// Audit events are written to [`HostOptions::audit`] by the owner task,
/// in order, as they happen: each write runs on the runtime's blocking pool
/// and the owner awaits it before its next action.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use spillguard_tokio::{Host, HostOptions};
/// use spillguard_tokio::core::{Config, State};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), spillguard_tokio::HostError> {
/// let host = Host::new(Config::default(), HostOptions::default())?;
/// let outcome = host.shell("echo result; echo warning 1>&2").run().await;
/// assert_eq!(outcome.record.state, State::Completed);
/// assert_eq!(outcome.record.stdout_bytes_seen, 7);
/// assert_eq!(outcome.agent_excerpt(), "warning\n");
/// assert_eq!(host.shutdown(Duration::from_secs(1)).await.unfinished, 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Host {
    core: Arc<HostCore<HostShared>>,
}

pub(crate) struct HostShared {
    state: HostState<mpsc::UnboundedSender<Event>>,
    /// Notified after a call left the registry.
    call_ended: Notify,
    runtime: Handle,
}

impl fmt::Debug for HostShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.state.fmt(f)
    }
}

impl HostLink for HostShared {
    type Live = mpsc::UnboundedSender<Event>;

    fn state(&self) -> &HostState<Self::Live> {
        &self.state
    }

    fn call_ended(&self, id: u64) {
        self.state.deregister(id);
        self.call_ended.notify_waiters();
    }

    fn cancel(live: &Self::Live, reason: CancelReason) {
        let _ = live.send(Event::Command(Command::Cancel(reason)));
    }

    fn debug(live: &Self::Live, grant: Option<DebugGrant>) {
        let _ = live.send(Event::Command(Command::Debug(grant)));
    }
}

/// The future [`CallBuilder::run`] returns on tokio: the call's outcome.
pub type Run = Pin<Box<dyn Future<Output = Outcome> + Send>>;

impl Host {
    /// A host for `config` (validated here) run with `options`, whose calls
    /// run on the current tokio runtime.
    ///
    /// Outside a runtime this is [`HostError::NoRuntime`]; use
    /// [`with_runtime`](Self::with_runtime) there. The runtime needs its IO
    /// and time drivers (`enable_all()`, as `#[tokio::main]` does): the
    /// helper's pipes, its exit and the call's timer use them.
    pub fn new(config: Config, options: HostOptions) -> Result<Self, HostError> {
        let runtime =
            Handle::try_current().map_err(|_| HostError::NoRuntime { hint: NO_RUNTIME })?;
        Self::with_runtime(config, options, runtime)
    }

    /// A host whose calls run on `runtime` (IO and time enabled); it may be
    /// made, and calls started, from outside any runtime.
    pub fn with_runtime(
        config: Config,
        options: HostOptions,
        runtime: Handle,
    ) -> Result<Self, HostError> {
        Ok(Self {
            core: Arc::new(HostCore::new(HostShared {
                state: HostState::new(config, options, TokioOrphans(runtime.clone()))?,
                call_ended: Notify::new(),
                runtime,
            })),
        })
    }

    fn state(&self) -> &HostState<mpsc::UnboundedSender<Event>> {
        self.core.state()
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
    pub fn runtime(&self) -> &Handle {
        &self.core.shared().runtime
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
    /// host's options, its debug grant if one is in force), on the owner's
    /// clock (tokio's).
    pub fn settings_for(&self, kind: CallKind) -> CallSettings {
        self.state().call_settings(kind, owner::clock())
    }

    /// A call of `program`, to describe further and then
    /// [`run`](CallBuilder::run) (a future of its outcome) or
    /// [`start`](CallBuilder::start). No shell is involved.
    pub fn command(&self, program: impl Into<OsString>) -> CallBuilder<'_, Host> {
        CallBuilder::new(self, HelperCommand::new(program))
    }

    /// A call of `script` run by `/bin/sh -c`.
    pub fn shell(&self, script: impl Into<OsString>) -> CallBuilder<'_, Host> {
        CallBuilder::new(self, HelperCommand::shell_script(script))
    }

    /// A call of `command`, a description made beforehand.
    pub fn call(&self, command: HelperCommand) -> CallBuilder<'_, Host> {
        CallBuilder::new(self, command)
    }

    /// Starts a call of `command` described by `spec`; the builder
    /// ([`command`](Self::command)) fills `spec` in for you.
    ///
    /// Returns at once; the call runs on its own owner task. An invalid
    /// command ends `failed_before_dispatch`, as does a program that cannot
    /// be spawned. With [`Approval::Required`], the card is shown and
    /// nothing runs until [`CallHandle::approve`].
    pub fn start(&self, spec: CallSpec, command: HelperCommand, approval: Approval) -> CallHandle {
        self.call(command).spec(spec).approval(approval).start()
    }

    /// Grants debug for `duration`, on tokio's clock; see the std adapter's
    /// `Host::grant_debug`.
    pub fn grant_debug(
        &self,
        duration: Duration,
        per_call_bytes: u64,
    ) -> Result<DebugGrant, DebugGrantError> {
        self.core
            .grant_debug(owner::clock(), duration, per_call_bytes)
    }

    /// Ends the debug grant now, for calls started from now on and for
    /// running calls; see the std adapter's `Host::revoke_debug`.
    pub fn revoke_debug(&self) {
        self.core.revoke_debug();
    }

    fn launch_resolved(&self, resolved: Resolved) -> CallHandle {
        let (sender, events) = mpsc::unbounded_channel();
        let published = Arc::new(Published::new(Changed::default()));
        let Prepared {
            call_id,
            start,
            core,
        } = self
            .core
            .prepare(resolved, sender.clone(), published.clone(), owner::clock);
        let owner = Owner::new(core, events, sender.clone());
        let task = self.runtime().spawn(owner.run(start));
        CallHandle::new(call_id, sender, published, task)
    }

    /// Cancels every live call and waits at most `timeout` until each has
    /// finished and its record is written. Calls started afterwards are
    /// cancelled before dispatch.
    ///
    /// # Cancel safety
    ///
    /// The cancels are sent when the future is first polled; dropping it
    /// later only stops the waiting. Each call's owner carries on with its
    /// shutdown and writes its record whatever happens to this future.
    pub async fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        let targets = self.core.cancel_all();
        let ids: HashSet<u64> = targets.iter().map(|&(id, _)| id).collect();
        let pending = || self.state().still_live(&ids);
        let _ = tokio::time::timeout(timeout, self.until_none(pending)).await;
        let unfinished = pending();
        ShutdownReport {
            finished: ids.len() - unfinished,
            unfinished,
        }
    }

    /// Waits until no call is live: every call started has finished and
    /// its record is written. Calls started while it waits are waited for
    /// too.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches.
    pub async fn wait_idle(&self) {
        self.until_none(|| self.live_calls()).await;
    }

    /// Returns once `pending` counts none, checked at each call's end.
    async fn until_none(&self, pending: impl Fn() -> usize) {
        let shared = self.core.shared();
        loop {
            let notified = shared.call_ended.notified();
            tokio::pin!(notified);
            // Registered before the check, so no change is missed.
            notified.as_mut().enable();
            if pending() == 0 {
                return;
            }
            notified.await;
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
    /// many it closed at [`HostOptions::orphan_drain_max`] or
    /// [`HostOptions::orphan_pipes_max`] (the escapee's next write to a
    /// closed pipe gets SIGPIPE or EPIPE) or saw end.
    pub fn orphan_pipes(&self) -> OrphanStats {
        self.state().orphan_pipes()
    }
}

impl Launch for Host {
    type Handle = CallHandle;
    type Run = Run;

    fn launch(&self, request: CallRequest) -> CallHandle {
        self.launch_resolved(self.state().resolve(request, owner::clock()))
    }

    fn wait(handle: CallHandle) -> Run {
        Box::pin(handle.wait())
    }
}
