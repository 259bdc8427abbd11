//! The process-wide [`Host`]: configuration, the retention pool, the audit
//! sink, and the registry of live calls.

use std::collections::HashSet;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use spillguard_core::{
    Call, CallKind, CallRecord, CallSettings, CallSpec, CancelReason, Config, ConfigError,
    DisconnectPolicy, RetentionPool,
};

use crate::audit::AuditSink;
use crate::command::HelperCommand;
use crate::handle::{CallHandle, OwnerPanic, Published};
use crate::host_state::HostState;
use crate::mailbox::{self, Inbox, Mailbox};
use crate::owner::{Command, Event, Owner, Ready, Start};

/// How a [`Host`] runs its calls. Every `Option` left `None` keeps the value
/// from the [`Config`] or the core's default in [`CallSettings`].
///
/// Write it as `HostOptions { deadline: Some(..), ..HostOptions::default() }`
/// so that fields added later take their defaults.
#[derive(Clone)]
pub struct HostOptions {
    /// Size asked for each output pipe (`F_SETPIPE_SZ`, Linux only; failure
    /// is ignored). Default 1 MiB: on a flood it makes reads fewer and
    /// larger. `None` leaves the system's size.
    pub pipe_size: Option<usize>,
    /// Longest a helper may run after dispatch. Default: no deadline.
    pub deadline: Option<Duration>,
    /// SIGTERM to SIGKILL; default `shutdown_grace_seconds` of the config.
    pub shutdown_grace: Option<Duration>,
    /// How long streams may stay open after the direct child exited.
    pub post_exit_drain: Option<Duration>,
    /// How long to wait for exit and streams after SIGKILL.
    pub kill_wait: Option<Duration>,
    /// How long an approval card stays valid.
    pub approval_timeout: Option<Duration>,
    /// What dropping a [`CallHandle`] early does.
    pub on_client_disconnect: Option<DisconnectPolicy>,
    /// How many finished records [`Host::finished_records`] keeps (oldest
    /// dropped first). Default 1024.
    pub finished_records_kept: usize,
    /// Where lifecycle events are written, if anywhere.
    pub audit: Option<Arc<dyn AuditSink>>,
}

impl HostOptions {
    /// The default pipe size: 1 MiB.
    pub const DEFAULT_PIPE_SIZE: usize = 1 << 20;

    /// The settings a call of `kind` gets: [`CallSettings::action`] or
    /// [`CallSettings::discovery`] under `config`, with these options'
    /// overrides applied.
    pub fn call_settings(&self, config: &Config, kind: CallKind) -> CallSettings {
        let mut settings = match kind {
            CallKind::Discovery => CallSettings::discovery(config),
            _ => CallSettings::action(config),
        };
        settings.deadline = self.deadline.or(settings.deadline);
        settings.shutdown_grace = self.shutdown_grace.unwrap_or(settings.shutdown_grace);
        settings.post_exit_drain = self.post_exit_drain.unwrap_or(settings.post_exit_drain);
        settings.kill_wait = self.kill_wait.unwrap_or(settings.kill_wait);
        settings.approval_timeout = self.approval_timeout.unwrap_or(settings.approval_timeout);
        settings.on_client_disconnect = self
            .on_client_disconnect
            .unwrap_or(settings.on_client_disconnect);
        settings
    }
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            pipe_size: Some(Self::DEFAULT_PIPE_SIZE),
            deadline: None,
            shutdown_grace: None,
            post_exit_drain: None,
            kill_wait: None,
            approval_timeout: None,
            on_client_disconnect: None,
            finished_records_kept: 1024,
            audit: None,
        }
    }
}

impl fmt::Debug for HostOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostOptions")
            .field("pipe_size", &self.pipe_size)
            .field("deadline", &self.deadline)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("post_exit_drain", &self.post_exit_drain)
            .field("kill_wait", &self.kill_wait)
            .field("approval_timeout", &self.approval_timeout)
            .field("on_client_disconnect", &self.on_client_disconnect)
            .field("finished_records_kept", &self.finished_records_kept)
            .field("audit", &self.audit.as_ref().map(|_| "AuditSink"))
            .finish()
    }
}

/// What [`Host::shutdown`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Calls that were live and finished (record written) in time.
    pub finished: usize,
    /// Calls that were live and had not finished when the time ran out.
    pub unfinished: usize,
}

/// Runs helper calls for one process: holds the validated [`Config`], the
/// process-wide [`RetentionPool`], the audit sink and the live calls.
///
/// Cheap to clone: clones share everything.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use spillguard_std::{HelperCommand, Host, HostOptions};
/// use spillguard_std::core::{CallKind, CallSpec, Config, State};
///
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
/// let outcome = host.start(spec, command, false).wait();
/// assert_eq!(outcome.record.state, State::Completed);
/// assert_eq!(outcome.record.stdout_bytes_seen, 7);
/// assert_eq!(outcome.agent_excerpt(), "warning\n");
/// assert_eq!(host.shutdown(Duration::from_secs(1)).unfinished, 0);
/// # Ok::<(), spillguard_std::core::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Host {
    shared: Arc<HostShared>,
}

pub(crate) struct HostShared {
    pub(crate) state: HostState<Mailbox>,
    /// Taken between a call leaving the registry and `call_ended`, so that
    /// [`Host::shutdown`] cannot miss the notification.
    ended: Mutex<()>,
    call_ended: Condvar,
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
                ended: Mutex::new(()),
                call_ended: Condvar::new(),
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
    /// Returns at once; the call runs on its own owner thread. The command
    /// is checked first: an invalid one ends `failed_before_dispatch`, as
    /// does a program that cannot be spawned. With `needs_approval`, the
    /// card is shown and nothing runs until [`CallHandle::approve`].
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
        let published = Arc::new(Published::new(Condvar::new()));
        let (mailbox, inbox) = match mailbox::open() {
            Ok((mailbox, inbox)) => (mailbox, Ok(inbox)),
            Err(error) => (Mailbox::closed(), Err(error)),
        };
        let (id, host_closing) = self.shared.state.register(mailbox.clone());
        let start = Start {
            needs_approval,
            host_closing,
        };
        let inbox = match inbox {
            Ok(inbox) => inbox,
            Err(error) => {
                self.owner(id, spec, settings, None, &mailbox, &published)
                    .fail_without_thread(start, format!("cannot make the call's mailbox: {error}"));
                return CallHandle::new(call_id, mailbox, published, OwnerPanic::default());
            }
        };
        let mut owner = self.owner(id, spec, settings, Some(inbox), &mailbox, &published);
        owner.command = Some(command);
        // The job takes the owner from here; if no thread can run the job,
        // the owner is still here to end the call.
        let slot = Arc::new(Mutex::new(Some(owner)));
        let owner_panic = OwnerPanic::default();
        let (job_slot, panic_slot) = (slot.clone(), owner_panic.clone());
        let started = crate::workers::run(move || {
            let Some(mut owner) = take(&job_slot) else {
                return;
            };
            // The panic is kept before the owner is dropped: a handle woken
            // by the owner's end finds it.
            let ran = panic::catch_unwind(AssertUnwindSafe(|| owner.run(start)));
            if let Err(panic) = ran {
                *panic_slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(panic);
            }
        });
        if let Err(error) = started
            && let Some(owner) = take(&slot)
        {
            owner.fail_without_thread(
                start,
                format!("cannot start the call's owner thread: {error}"),
            );
        }
        CallHandle::new(call_id, mailbox, published, owner_panic)
    }

    /// Cancels every live call and waits at most `timeout` until each has
    /// finished and its record is written. Calls started afterwards are
    /// cancelled before dispatch.
    pub fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        let deadline = Instant::now().checked_add(timeout);
        let targets = self.shared.state.close();
        for (_, mailbox) in &targets {
            let _ = mailbox.send(Event::Command(Command::Cancel(CancelReason::HostShutdown)));
        }
        let ids: HashSet<u64> = targets.iter().map(|&(id, _)| id).collect();
        let mut ended = self.shared.lock_ended();
        while self.shared.state.still_live(&ids) > 0 {
            let left = deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                break;
            }
            ended = self
                .shared
                .call_ended
                .wait_timeout(ended, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let unfinished = self.shared.state.still_live(&ids);
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

    /// The owner of a new call, without its command.
    fn owner(
        &self,
        id: u64,
        spec: CallSpec,
        settings: CallSettings,
        inbox: Option<Inbox>,
        mailbox: &Mailbox,
        published: &Arc<Published>,
    ) -> Owner {
        let call = Call::new(
            spec,
            settings,
            &self.shared.state.pool,
            Instant::now(),
            SystemTime::now(),
        );
        Owner {
            id,
            call,
            command: None,
            inbox,
            mailbox: mailbox.clone(),
            process: None,
            listening: true,
            ready: Ready::default(),
            released: false,
            published: published.clone(),
            host: self.shared.clone(),
        }
    }
}

/// What a shared slot holds, taken out of it.
fn take<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

impl HostShared {
    fn lock_ended(&self) -> MutexGuard<'_, ()> {
        self.ended.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The call's owner ended: it is no longer live.
    pub(crate) fn deregister(&self, id: u64) {
        self.state.deregister(id);
        drop(self.lock_ended());
        self.call_ended.notify_all();
    }
}
