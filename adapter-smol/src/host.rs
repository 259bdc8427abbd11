//! The process-wide [`Host`]: configuration, the retention pool, the audit
//! sink, and the registry of live calls.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use event_listener::Event as Notify;
use futures_lite::future;
use smol::Timer;
use smol::channel::{self, Sender};
use spillguard_core::{
    AuditEvent, Call, CallKind, CallRecord, CallSettings, CallSpec, CancelReason, Config,
    ConfigError, RetentionPool,
};
use spillguard_std::host_state::HostState;
use spillguard_std::{HelperCommand, HostOptions, ShutdownReport};

use crate::handle::{CallHandle, Changed, Published};
use crate::owner::{Command, Event, Owner, Start};

/// Runs helper calls for one process: holds the validated [`Config`], the
/// process-wide [`RetentionPool`], the audit sink and the live calls. Each
/// call is driven by a task detached on smol's global executor.
///
/// Cheap to clone: clones share everything.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use spillguard_smol::{HelperCommand, Host, HostOptions};
/// use spillguard_smol::core::{CallKind, CallSpec, Config, State};
///
/// smol::block_on(async {
///     let host = Host::new(Config::default(), HostOptions::default())?;
///     let spec = CallSpec {
///         call_id: "c_1".into(),
///         session_id: "s_1".into(),
///         kind: CallKind::Action,
///         action: "local.echo".into(),
///         target: "localhost".into(),
///         summary: "echo".into(),
///     };
///     let command = HelperCommand::shell_script("echo result; echo warning 1>&2");
///     let outcome = host.start(spec, command, false).wait().await;
///     assert_eq!(outcome.record.state, State::Completed);
///     assert_eq!(outcome.record.stdout_bytes_seen, 7);
///     assert_eq!(outcome.agent_excerpt(), "warning\n");
///     assert_eq!(host.shutdown(Duration::from_secs(1)).await.unfinished, 0);
///     Ok::<(), spillguard_smol::core::ConfigError>(())
/// })?;
/// # Ok::<(), spillguard_smol::core::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Host {
    shared: Arc<HostShared>,
}

pub(crate) struct HostShared {
    pub(crate) state: HostState<Sender<Event>>,
    /// Notified after a call left the registry.
    call_ended: Notify,
}

impl fmt::Debug for HostShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.state.fmt(f)
    }
}

impl Host {
    /// A host for `config` (validated here) run with `options`.
    pub fn new(config: Config, options: HostOptions) -> Result<Self, ConfigError> {
        Ok(Self {
            shared: Arc::new(HostShared {
                state: HostState::new(config, options)?,
                call_ended: Notify::new(),
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
    /// Returns at once; the call runs on its own owner task, detached on
    /// smol's global executor. The command is checked first: an invalid one
    /// ends `failed_before_dispatch`, as does a program that cannot be
    /// spawned. With `needs_approval`, the card is shown and nothing runs
    /// until [`CallHandle::approve`].
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
        let (sender, events) = channel::unbounded();
        let published = Arc::new(Published::new(Changed::default()));
        let (id, host_closing) = self.shared.state.register(sender.clone());
        let start = Start {
            needs_approval,
            host_closing,
        };
        let call = Call::new(
            spec,
            settings,
            &self.shared.state.pool,
            Instant::now(),
            SystemTime::now(),
        );
        let owner = Owner {
            id,
            call,
            command: Some(command),
            events,
            sender: sender.clone(),
            process: None,
            published: published.clone(),
            host: self.shared.clone(),
            timer: Timer::never(),
            armed: None,
            listening: true,
            bufs: [Vec::new(), Vec::new()],
            stderr_first: false,
            released: false,
        };
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
        let targets = self.shared.state.close();
        for (_, sender) in &targets {
            let _ = sender.try_send(Event::Command(Command::Cancel(CancelReason::HostShutdown)));
        }
        let ids: HashSet<u64> = targets.iter().map(|&(id, _)| id).collect();
        let pending = || self.shared.state.still_live(&ids);
        let all_finished = async {
            while pending() > 0 {
                let listener = self.shared.call_ended.listen();
                // Checked again once listening, so no change is missed.
                if pending() == 0 {
                    break;
                }
                listener.await;
            }
        };
        future::or(all_finished, async {
            Timer::after(timeout).await;
        })
        .await;
        let unfinished = pending();
        ShutdownReport {
            finished: ids.len() - unfinished,
            unfinished,
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
    /// returned for the owner to tell the core (which fails closed before
    /// dispatch). The sink's write (a file append, perhaps an fsync) runs
    /// on smol's blocking thread pool (`smol::unblock`), never on an
    /// executor thread.
    pub(crate) async fn audit(&self, event: AuditEvent) -> Result<(), String> {
        let Some(sink) = self.state.options.audit.clone() else {
            return Ok(());
        };
        smol::unblock(move || sink.write(&event))
            .await
            .map_err(|error| self.state.audit_failed(error))
    }

    /// The call's owner ended: it is no longer live.
    pub(crate) fn deregister(&self, id: u64) {
        self.state.deregister(id);
        self.call_ended.notify(usize::MAX);
    }
}
