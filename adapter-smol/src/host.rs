//! The process-wide [`Host`]: configuration, the retention pool, the audit
//! sink, and the registry of live calls.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use event_listener::Event as Notify;
use futures_lite::future;
use smol::Timer;
use smol::channel::{self, Sender};
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

use crate::handle::{CallHandle, Changed, Published};
use crate::owner::{Command, Event, Owner};
use crate::reader::SmolOrphans;

/// Runs helper calls for one process: holds the validated [`Config`], the
/// process-wide [`RetentionPool`], the audit sink and the live calls. Each
/// call is driven by a task detached on smol's global executor.
///
/// Cheap to clone: clones share everything. Dropping the last clone
/// cancels every live call (TERM to its group, the grace, KILL); each
/// call's owner task still writes its record. Use
/// [`shutdown`](Self::shutdown) to wait for that.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use spillguard_smol::{Host, HostOptions};
/// use spillguard_smol::core::{Config, State};
///
/// smol::block_on(async {
///     let host = Host::new(Config::default(), HostOptions::default())?;
///     let outcome = host.shell("echo result; echo warning 1>&2").run().await;
///     assert_eq!(outcome.record.state, State::Completed);
///     assert_eq!(outcome.record.stdout_bytes_seen, 7);
///     assert_eq!(outcome.agent_excerpt(), "warning\n");
///     assert_eq!(host.shutdown(Duration::from_secs(1)).await.unfinished, 0);
///     Ok::<(), spillguard_smol::HostError>(())
/// })?;
/// # Ok::<(), spillguard_smol::HostError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Host {
    core: Arc<HostCore<HostShared>>,
}

pub(crate) struct HostShared {
    state: HostState<Sender<Event>>,
    /// Notified after a call left the registry.
    call_ended: Notify,
}

impl fmt::Debug for HostShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.state.fmt(f)
    }
}

impl HostLink for HostShared {
    type Live = Sender<Event>;

    fn state(&self) -> &HostState<Sender<Event>> {
        &self.state
    }

    fn call_ended(&self, id: u64) {
        self.state.deregister(id);
        self.call_ended.notify(usize::MAX);
    }

    fn cancel(live: &Sender<Event>, reason: CancelReason) {
        let _ = live.try_send(Event::Command(Command::Cancel(reason)));
    }

    fn debug(live: &Sender<Event>, grant: Option<DebugGrant>) {
        let _ = live.try_send(Event::Command(Command::Debug(grant)));
    }
}

/// The future [`CallBuilder::run`] returns on smol: the call's outcome.
pub type Run = Pin<Box<dyn Future<Output = Outcome> + Send>>;

impl Host {
    /// A host for `config` (validated here) run with `options`.
    pub fn new(config: Config, options: HostOptions) -> Result<Self, HostError> {
        Ok(Self {
            core: Arc::new(HostCore::new(HostShared {
                state: HostState::new(config, options, SmolOrphans)?,
                call_ended: Notify::new(),
            })),
        })
    }

    fn state(&self) -> &HostState<Sender<Event>> {
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

    /// The process-wide pool every call's stderr draws from.
    pub fn pool(&self) -> &RetentionPool {
        self.state().pool()
    }

    /// The session calls belong to unless they name their own.
    pub fn session_id(&self) -> &str {
        self.state().session_id()
    }

    /// The settings a call of `kind` started now gets (the config, the
    /// host's options, its debug grant if one is in force).
    pub fn settings_for(&self, kind: CallKind) -> CallSettings {
        self.state().call_settings(kind, Instant::now())
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
    /// Returns at once; the call runs on its own owner task, detached on
    /// smol's global executor. An invalid command ends
    /// `failed_before_dispatch`, as does a program that cannot be spawned.
    /// With [`Approval::Required`], the card is shown and nothing runs
    /// until [`CallHandle::approve`].
    pub fn start(&self, spec: CallSpec, command: HelperCommand, approval: Approval) -> CallHandle {
        self.call(command).spec(spec).approval(approval).start()
    }

    /// Grants debug for `duration`; see the std adapter's
    /// `Host::grant_debug`.
    pub fn grant_debug(
        &self,
        duration: Duration,
        per_call_bytes: u64,
    ) -> Result<DebugGrant, DebugGrantError> {
        self.core
            .grant_debug(Instant::now(), duration, per_call_bytes)
    }

    /// Ends the debug grant now, for calls started from now on and for
    /// running calls; see the std adapter's `Host::revoke_debug`.
    pub fn revoke_debug(&self) {
        self.core.revoke_debug();
    }

    fn launch_resolved(&self, resolved: Resolved) -> CallHandle {
        let (sender, events) = channel::unbounded();
        let published = Arc::new(Published::new(Changed::default()));
        let Prepared {
            call_id,
            start,
            core,
        } = self
            .core
            .prepare(resolved, sender.clone(), published.clone(), Instant::now);
        let owner = Owner::new(core, events, sender.clone());
        smol::spawn(owner.run(start)).detach();
        CallHandle::new(call_id, sender, published)
    }

    /// Cancels every live call and waits at most `timeout` until each has
    /// finished and its record is written. Calls started afterwards are
    /// cancelled before dispatch.
    ///
    /// # Cancel safety
    ///
    /// Every live call is cancelled on the first poll. Dropping the future
    /// after that only stops the waiting: each owner is a detached task and
    /// carries on with the stop (SIGTERM, then SIGKILL after the grace) and
    /// the record. A future never polled cancels nothing.
    pub async fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        let targets = self.core.cancel_all();
        let ids: HashSet<u64> = targets.iter().map(|&(id, _)| id).collect();
        let pending = || self.state().still_live(&ids);
        future::or(self.until_none(pending), async {
            Timer::after(timeout).await;
        })
        .await;
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
        while pending() > 0 {
            let listener = shared.call_ended.listen();
            // Checked again once listening, so no change is missed.
            if pending() == 0 {
                break;
            }
            listener.await;
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
        self.launch_resolved(self.state().resolve(request, Instant::now()))
    }

    fn wait(handle: CallHandle) -> Run {
        Box::pin(handle.wait())
    }
}
