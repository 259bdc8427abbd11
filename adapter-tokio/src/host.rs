//! The process-wide [`Host`]: configuration, the retention pool, the audit
//! sink, the runtime the calls run on, and the registry of live calls.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use spillguard_core::{
    AuditEvent, Call, CallKind, CallRecord, CallSettings, CallSpec, CancelReason, Config,
    ConfigError, RetentionPool,
};
use spillguard_std::host_state::HostState;
use spillguard_std::{HelperCommand, HostOptions, ShutdownReport};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot, watch};

use crate::handle::CallHandle;
use crate::owner::{self, Command, Event, Owner, Snapshot, Start};

/// Why a [`Host`] could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostError {
    /// The configuration is invalid; the error names the field.
    InvalidConfig(ConfigError),
    /// [`Host::new`] was called outside a tokio runtime, so there is no
    /// runtime to run the calls on.
    NoRuntime,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::InvalidConfig(error) => write!(f, "invalid configuration: {error}"),
            HostError::NoRuntime => write!(
                f,
                "Host::new was called outside a tokio runtime: call it from within one, \
                 or pass a runtime handle to Host::with_runtime"
            ),
        }
    }
}

impl std::error::Error for HostError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HostError::InvalidConfig(error) => Some(error),
            HostError::NoRuntime => None,
        }
    }
}

impl From<ConfigError> for HostError {
    fn from(error: ConfigError) -> Self {
        HostError::InvalidConfig(error)
    }
}

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
/// use spillguard_tokio::{HelperCommand, Host, HostOptions};
/// use spillguard_tokio::core::{CallKind, CallSpec, Config, State};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), spillguard_tokio::HostError> {
/// let host = Host::new(Config::default(), HostOptions::default())?;
/// let spec = CallSpec {
///     call_id: "c_1".into(),
///     session_id: "s_1".into(),
///     kind: CallKind::Action,
///     action: "local.echo".into(),
///     target: "localhost".into(),
///     summary: "echo".into(),
/// };
/// let command = HelperCommand::shell_script("echo result; echo warning 1>&2");
/// let outcome = host.start(spec, command, false).wait().await;
/// assert_eq!(outcome.record.state, State::Completed);
/// assert_eq!(outcome.record.stdout_bytes_seen, 7);
/// assert_eq!(outcome.agent_excerpt(), "warning\n");
/// assert_eq!(host.shutdown(Duration::from_secs(1)).await.unfinished, 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Host {
    shared: Arc<HostShared>,
}

pub(crate) struct HostShared {
    pub(crate) state: HostState<LiveCall>,
    runtime: Handle,
}

/// How the host reaches a live call: its owner's channel, and what the
/// owner publishes.
#[derive(Clone)]
pub(crate) struct LiveCall {
    events: mpsc::UnboundedSender<Event>,
    published: watch::Receiver<Snapshot>,
}

impl fmt::Debug for HostShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.state.fmt(f)
    }
}

impl Host {
    /// A host for `config` (validated here) run with `options`, whose calls
    /// run on the current tokio runtime.
    ///
    /// Outside a runtime this is [`HostError::NoRuntime`]; use
    /// [`with_runtime`](Self::with_runtime) there. The runtime needs its IO
    /// and time drivers (`enable_all()`, as `#[tokio::main]` does): the
    /// helper's pipes, its exit and the call's timer use them.
    pub fn new(config: Config, options: HostOptions) -> Result<Self, HostError> {
        let runtime = Handle::try_current().map_err(|_| HostError::NoRuntime)?;
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
            shared: Arc::new(HostShared {
                state: HostState::new(config, options)?,
                runtime,
            }),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.shared.state.config
    }

    /// The options in force.
    pub fn options(&self) -> &HostOptions {
        &self.shared.state.options
    }

    /// The runtime the calls run on.
    pub fn runtime(&self) -> &Handle {
        &self.shared.runtime
    }

    /// The process-wide pool every call's stderr draws from (R2.2).
    pub fn pool(&self) -> &RetentionPool {
        &self.shared.state.pool
    }

    /// The settings a call of `kind` gets: [`CallSettings::action`] or
    /// [`CallSettings::discovery`] under the config, with the host's options.
    pub fn settings_for(&self, kind: CallKind) -> CallSettings {
        self.shared.state.call_settings(kind)
    }

    /// Starts a call of `command` with the settings of
    /// [`settings_for`](Self::settings_for)`(spec.kind)`.
    ///
    /// Returns at once; the call runs on its own owner task. The command is
    /// checked first: an invalid one ends `failed_before_dispatch`, as does
    /// a program that cannot be spawned. With `needs_approval`, the card is
    /// shown and nothing runs until [`CallHandle::approve`].
    pub fn start(
        &self,
        spec: CallSpec,
        command: HelperCommand,
        needs_approval: bool,
    ) -> CallHandle {
        let settings = self.settings_for(spec.kind);
        self.start_with_settings(spec, command, needs_approval, settings)
    }

    /// Like [`start`](Self::start), with explicit settings.
    pub fn start_with_settings(
        &self,
        spec: CallSpec,
        command: HelperCommand,
        needs_approval: bool,
        settings: CallSettings,
    ) -> CallHandle {
        let call_id = spec.call_id.clone();
        let (sender, events) = mpsc::unbounded_channel();
        let (published, watched) = watch::channel(Snapshot::new());
        let (outcome, outcome_ready) = oneshot::channel();
        let (id, host_closing) = self.shared.state.register(LiveCall {
            events: sender.clone(),
            published: watched.clone(),
        });
        let pool = &self.shared.state.pool;
        let owner = Owner {
            id,
            call: Call::new(spec, settings, pool, owner::clock(), SystemTime::now()),
            command: Some(command),
            events,
            sender: sender.clone(),
            process: None,
            published,
            outcome: Some(outcome),
            host: self.shared.clone(),
            finished: false,
            listening: true,
            bufs: [Vec::new(), Vec::new()],
            stderr_first: false,
            released: false,
        };
        let start = Start {
            needs_approval,
            host_closing,
        };
        let task = self.shared.runtime.spawn(owner.run(start));
        CallHandle::new(call_id, sender, watched, outcome_ready, task)
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
        let targets = self.shared.state.close();
        let mut watched = Vec::with_capacity(targets.len());
        for (_, target) in targets {
            let cancel = Command::Cancel(CancelReason::HostShutdown);
            let _ = target.events.send(Event::Command(cancel));
            watched.push(target.published);
        }
        let every_owner_ended = async {
            for published in &mut watched {
                // An error means the owner is gone: it has ended too.
                let _ = published.wait_for(|s| s.owner_ended).await;
            }
        };
        let _ = tokio::time::timeout(timeout, every_owner_ended).await;
        let finished = watched.iter().filter(|p| p.borrow().finished).count();
        ShutdownReport {
            finished,
            unfinished: watched.len() - finished,
        }
    }

    /// How many calls are running (their record not yet written).
    pub fn live_calls(&self) -> usize {
        self.shared.state.live_calls()
    }

    /// The records of finished calls, oldest first (at most
    /// [`HostOptions::finished_records_kept`]). A call whose handle was
    /// dropped early is here too.
    pub fn finished_records(&self) -> Vec<CallRecord> {
        self.shared.state.finished_records()
    }

    /// How many audit events the sink failed to write.
    pub fn audit_failures(&self) -> u64 {
        self.shared.state.audit_failures()
    }
}

impl HostShared {
    /// Writes `event` to the audit sink, if any; a failure is counted and
    /// returned so the owner can tell the core (which fails closed before
    /// dispatch). The sink's write (a file append, perhaps an fsync) runs
    /// on the runtime's blocking pool (`spawn_blocking`), never on a worker
    /// thread; a sink that panicked counts as a failed write.
    pub(crate) async fn audit(&self, event: AuditEvent) -> Result<(), String> {
        let Some(sink) = self.state.options.audit.clone() else {
            return Ok(());
        };
        match tokio::task::spawn_blocking(move || sink.write(&event)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(self.state.audit_failed(error)),
            Err(join) => Err(self
                .state
                .audit_failed(format!("the audit sink failed: {join}"))),
        }
    }
}
