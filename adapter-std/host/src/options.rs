//! How a host runs its calls ([`HostOptions`]) and what its shutdown
//! achieved ([`ShutdownReport`]): the same on every runtime.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use spillguard_core::{CallKind, CallSettings, Config, DisconnectPolicy};

use crate::audit::AuditSink;

/// How a host runs its calls. Every `Option` left `None` keeps the value
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
    /// What dropping a call's handle early does.
    pub on_client_disconnect: Option<DisconnectPolicy>,
    /// How many finished records a host keeps (`finished_records`, oldest
    /// dropped first). Default 1024.
    pub finished_records_kept: usize,
    /// Where lifecycle events are written, if anywhere.
    pub audit: Option<Arc<dyn AuditSink>>,
    /// After the helper's own exit, the longest each further wait of the
    /// stop sequence lasts when a descendant keeps the streams open (TERM
    /// to KILL, KILL to giving up). Default
    /// [`CallSettings::DEFAULT_ESCAPEE_WAIT`].
    pub escapee_wait: Option<Duration>,
    /// How long a streamed helper may take to exit once its stdin is
    /// closed, before TERM; default `stdin_close_grace_seconds` of the
    /// config.
    pub stdin_close_grace: Option<Duration>,
    /// The agent session every call of the host belongs to unless a call
    /// names its own. `None`: a fresh id (`s_` and 16 hex digits) is drawn
    /// when the host is made.
    pub session_id: Option<String>,
    /// After a call finished, the longest its host keeps reading and
    /// dropping a pipe an escaped descendant still holds; then the pipe is
    /// closed (the escapee's next write to it gets SIGPIPE or EPIPE) and
    /// counted. Default [`Self::DEFAULT_ORPHAN_DRAIN_MAX`] (60 s); `None`
    /// drains until the pipe's end.
    pub leftover_drain_max: Option<Duration>,
    /// The most leftover pipes a host drains at once; one more closes the
    /// oldest. Default [`Self::DEFAULT_ORPHAN_PIPES_MAX`] (256).
    pub leftover_pipes_max: usize,
    /// Whether the helpers' groups are listed with the process's
    /// supervisor, which sends them SIGTERM, then SIGKILL, if this process
    /// dies or exits with calls live (see `spillguard_host::host_death`).
    /// Default `true`.
    pub kill_helpers_on_host_death: bool,
    /// Whether this host keeps a retention pool of its own instead of
    /// drawing on the process-wide one. Default `false`: every host of
    /// the process whose configuration names the same
    /// `stderr_retained_process_bytes` shares one pool, fairly (see
    /// [`RetentionPool`](spillguard_core::RetentionPool)), so two crates
    /// that each make a host still hold one budget between them.
    pub own_retention_pool: bool,
    /// Whether a call whose request names no parent span
    /// (`CallBuilder::trace_parent`) starts a trace of its own: its record
    /// then has a `trace_id` and a `span_id`, and the helper gets them in
    /// `TRACEPARENT`. Default `false`: such a call has no trace.
    pub start_traces: bool,
}

impl HostOptions {
    /// The default pipe size: 1 MiB.
    pub const DEFAULT_PIPE_SIZE: usize = 1 << 20;

    /// The default [`leftover_drain_max`](Self::leftover_drain_max): 60 s, far
    /// longer than a helper's descendant takes to finish what it was
    /// writing, short enough that a forgotten one costs a minute.
    pub const DEFAULT_ORPHAN_DRAIN_MAX: Duration = Duration::from_secs(60);

    /// The default [`leftover_pipes_max`](Self::leftover_pipes_max): 256 pipes
    /// (with 1 MiB pipes, at most 256 MiB of kernel buffers).
    pub const DEFAULT_ORPHAN_PIPES_MAX: usize = 256;

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
        settings.escapee_wait = self.escapee_wait.unwrap_or(settings.escapee_wait);
        settings.stdin_close_grace = self.stdin_close_grace.unwrap_or(settings.stdin_close_grace);
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
            escapee_wait: None,
            stdin_close_grace: None,
            session_id: None,
            leftover_drain_max: Some(Self::DEFAULT_ORPHAN_DRAIN_MAX),
            leftover_pipes_max: Self::DEFAULT_ORPHAN_PIPES_MAX,
            kill_helpers_on_host_death: true,
            own_retention_pool: false,
            start_traces: false,
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
            .field("escapee_wait", &self.escapee_wait)
            .field("stdin_close_grace", &self.stdin_close_grace)
            .field("session_id", &self.session_id)
            .field("leftover_drain_max", &self.leftover_drain_max)
            .field("leftover_pipes_max", &self.leftover_pipes_max)
            .field(
                "kill_helpers_on_host_death",
                &self.kill_helpers_on_host_death,
            )
            .field("own_retention_pool", &self.own_retention_pool)
            .field("start_traces", &self.start_traces)
            .finish()
    }
}

/// What a host's `shutdown` achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Calls that were live and finished (record written) in time.
    pub finished: usize,
    /// Calls that were live and had not finished when the time ran out.
    pub unfinished: usize,
}
