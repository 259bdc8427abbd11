//! What a call is given before it starts: [`CallSpec`] (who, what,
//! where) and [`CallSettings`] (budgets and timings, derived from a
//! [`Config`]), with the choices they name.
//!
//! Every default is a named constant on [`CallSettings`] or a [`Config`]
//! key, documented with why. **Settings a [`Config`] could not express are
//! refused by [`CallSettings::validate`] with the field and the rule**, so
//! a host can check settings it built by hand before anything runs.
//!
//! Under [`Admission::Queued`] a call not admitted within its queue
//! timeout ends `queue_expired`: the helper never ran (no pid,
//! `stream_end: not_started`). A cancel, a client disconnect under either
//! policy, or a failed audit write (when the audit fails closed) ends a
//! queued call before dispatch. The record has `queued_offset_us` and
//! `admitted_offset_us`.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::{Call, Outcome, visible};
use super::{CallKind, DisconnectPolicy, ResultKind};
use crate::capture::{CaptureSettings, StreamName};
use crate::config::{Config, DebugGrant, Retain, Rule};
use crate::confine::Confinement;
use crate::trace::CallTrace;

/// What the host knows about a call before it starts: who, what, where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSpec {
    /// The call's id.
    pub call_id: String,
    /// The agent session it belongs to.
    pub session_id: String,
    /// Action or discovery.
    pub kind: CallKind,
    /// The action's name, e.g. `ssh.exec`.
    pub action: String,
    /// The target as shown to the user, e.g. `deploy@web-3`.
    pub target: String,
    /// A one-line summary of the parameters, shown on the approval card.
    pub summary: String,
    /// The lines of the approval card, `label: value` in order, before its
    /// expiry line; empty (the default), `action`, `target` and `summary`.
    /// Redacted and made [`visible`] like every text of the card.
    #[serde(default)]
    pub card_lines: Vec<(String, String)>,
}

/// Budgets and timings for one call, derived from a [`Config`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSettings {
    /// How stderr is retained.
    pub stderr: CaptureSettings,
    /// How stdout is retained (its own budget, outside the stderr pool),
    /// when it is captured. The stderr settings' redactor also redacts the
    /// spec, failures and audit texts.
    pub stdout: CaptureSettings,
    /// Whether a stdout cut at its budget is accepted: `false` (the
    /// default) makes [`Outcome::into_result`](crate::Outcome::into_result)
    /// an error when the record says `stdout_truncated`.
    pub stdout_truncation_allowed: bool,
    /// Whether the call captures the helper's stdout (the default) or the
    /// caller streams the helper's stdin and stdout itself.
    pub stdout_mode: StdoutMode,
    /// A streamed helper's time to exit on its own once its stdin is
    /// closed, before its group gets SIGTERM (the MCP stdio shutdown).
    /// Default 2 s, from `stdin_close_grace_seconds`.
    pub stdin_close_grace: Duration,
    /// Whether a streamed helper ends as an MCP stdio server does: the end
    /// of the caller's input, and every stop, close its stdin and give it
    /// [`stdin_close_grace`](Self::stdin_close_grace) before SIGTERM.
    /// Default `true` (`CallBuilder::streamed`); `false` for a call that
    /// only streams its stdout (`.stdout(Stdio::piped())`): the end of its
    /// input closes its stdin and nothing more, and a stop is SIGTERM at
    /// once.
    pub mcp_shutdown: bool,
    /// Cap of the agent excerpt, marker included; at most
    /// `stderr.budget` (a smaller stderr budget needs a smaller excerpt
    /// too, see [`validate`](Self::validate)).
    pub excerpt_bytes: usize,
    /// Longest the helper may run after dispatch; `None` for no limit.
    pub deadline: Option<Duration>,
    /// How long the approval card stays valid once shown.
    pub approval_timeout: Duration,
    /// The driver reports when each approval card reaches the approver
    /// ([`Input::CardDelivered`](crate::Input::CardDelivered)): the approval deadline then runs
    /// from that report, and not before it (a card still on its way, behind
    /// many others or a client slow to read, cannot expire unseen). When
    /// `false` (the default), it runs from the moment the card is shown.
    pub deadline_from_delivery: bool,
    /// SIGTERM to SIGKILL while the direct child lives (after its exit,
    /// [`escapee_wait`](Self::escapee_wait) applies).
    pub shutdown_grace: Duration,
    /// How long streams may stay open after the direct child exited.
    pub post_exit_drain: Duration,
    /// How long to wait for exit and streams after SIGKILL while the
    /// direct child lives (after its exit, `escapee_wait` applies).
    pub kill_wait: Duration,
    /// Once the direct child's exit was observed, only descendants can hold
    /// the streams: each wait of the stop sequence (TERM to KILL, KILL to
    /// giving up the streams) is at most this long instead of
    /// `shutdown_grace` and `kill_wait`, which are meant for a helper that
    /// is still alive. Default [`DEFAULT_ESCAPEE_WAIT`](Self::DEFAULT_ESCAPEE_WAIT).
    pub escapee_wait: Duration,
    /// Whether a descendant that holds a stream open after the direct child
    /// exited gets TERM, grace, KILL of the whole group (default) or is
    /// merely abandoned.
    pub signal_descendants: bool,
    /// What a client disconnect does.
    pub on_client_disconnect: DisconnectPolicy,
    /// Whether a failed audit write before dispatch stops the call
    /// (`failed_before_dispatch`). Default `true`: fail closed.
    pub audit_fail_closed: bool,
    /// Set by [`with_debug`](Self::with_debug) or a grant given while the
    /// call runs ([`Input::DebugGranted`](crate::Input::DebugGranted)): when the grant ends and the
    /// stderr budget it falls back to. `None` again once it ended.
    pub debug_until: Option<DebugWindow>,
    /// Where the helper returns its structured result. Default
    /// [`ResultChannel::None`]: the host parses it itself and reports it
    /// with [`Input::Result`](crate::Input::Result).
    pub result: ResultChannel,
    /// How a JSON result is classified; `None` (the default) applies the
    /// convention of [`ResultKind::of_json`].
    pub result_classifier: Option<ResultClassifier>,
    /// Whether an authorized call spawns at once ([`Admission::Immediate`],
    /// the default) or waits in `queued` until its driver admits it
    /// ([`Admission::Queued`]), for a driver that runs at most so many
    /// calls at once.
    pub admission: Admission,
    /// Bounds on the helper's whole tree beyond stderr: memory, process
    /// count, CPU time, files and network (see [`Confinement`]). Empty by
    /// default: the helper runs in its own process group, as without it.
    pub confinement: Confinement,
    /// The call's span in a distributed trace, if it has one: its record
    /// says `trace_id`, `span_id` and `parent_span_id`. The driver gives
    /// the helper `TRACEPARENT` (the call's span as its parent) and
    /// `TRACESTATE`. `None` by default.
    pub trace: Option<CallTrace>,
}

/// When an authorized call may spawn its helper.
///
/// ```
/// use std::time::{Duration, Instant, SystemTime};
/// use spillguard_core::{Input,
///     Action, Admission, Call, CallKind, CallSettings, CallSpec, Config, RetentionPool, State,
/// };
///
/// let config = Config::default();
/// let settings = CallSettings {
///     admission: Admission::Queued { timeout: Duration::from_secs(60) },
///     ..CallSettings::action(&config)
/// };
/// let spec = CallSpec {
///     call_id: "c_1".into(),
///     session_id: "s_1".into(),
///     kind: CallKind::Action,
///     action: "build".into(),
///     target: "ci".into(),
///     summary: "make".into(),
///     card_lines: Vec::new(),
/// };
/// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
/// let t0 = Instant::now();
/// let mut call = Call::new(spec, settings, &pool, t0, SystemTime::UNIX_EPOCH);
/// call.handle(t0, Input::Validated { needs_approval: false })?;
/// // Authorized, but nothing to spawn until the driver admits it.
/// while let Some(action) = call.poll_action() {
///     assert!(matches!(action, Action::Audit(_)));
/// }
/// assert_eq!(call.state(), State::Queued);
/// assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(60)));
///
/// // A slot is free at 2 s: the call asks to spawn.
/// call.handle(t0 + Duration::from_secs(2), Input::Admitted)?;
/// assert_eq!(call.state(), State::Authorized);
/// assert!(std::iter::from_fn(|| call.poll_action()).any(|a| matches!(a, Action::Spawn(_))));
/// # Ok::<(), spillguard_core::CallError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Admission {
    /// Once authorized, the call asks to spawn at once (the default: a
    /// library call and `spillguard run` never wait in `queued`).
    #[default]
    Immediate,
    /// Once authorized (approved, or no approval needed), the call enters
    /// `queued` and asks for nothing until the driver reports
    /// [`Input::Admitted`](crate::Input::Admitted); then it enters `authorized` and asks to
    /// spawn. Not admitted within `timeout` of entering `queued`, it ends
    /// `queue_expired`: nothing was spawned. A cancel while queued ends it
    /// `cancelled_before_dispatch`, and so does a client disconnect, under
    /// either policy (nothing runs yet, and nobody is left to read what it
    /// would give).
    Queued {
        /// How long the call may wait in `queued`.
        timeout: Duration,
    },
}

/// Who owns a helper's stdin and stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StdoutMode {
    /// The call captures stdout within its budget and waits for its
    /// end-of-file; stdin is null unless bytes are given.
    #[default]
    Captured,
    /// The caller's protocol layer (e.g. an MCP client) owns the helper's
    /// stdin and stdout; the adapter forwards them and reports the bytes
    /// that went each way ([`Input::StdinForwarded`](crate::Input::StdinForwarded),
    /// [`Input::StdoutForwarded`](crate::Input::StdoutForwarded)). After the helper's exit the
    /// call waits, at most `post_exit_drain` as for its own streams, for
    /// the caller's reader to report stdout's end
    /// ([`Input::StdoutEof`](crate::Input::StdoutEof): end-of-file read, or the reader
    /// dropped), so that what the caller forwarded or diverted up to the
    /// end is in the record. Stderr stays bounded and marked as ever. The end of the caller's input
    /// ([`Input::InputEnded`](crate::Input::InputEnded)) and every stop run the MCP stdio
    /// shutdown: close stdin, wait `stdin_close_grace`, then SIGTERM to
    /// the group, the grace, SIGKILL.
    Streamed,
}

impl StdoutMode {
    /// The name used in records: `captured` or `streamed`.
    pub fn as_str(self) -> &'static str {
        match self {
            StdoutMode::Captured => "captured",
            StdoutMode::Streamed => "streamed",
        }
    }
}

/// Where a helper returns its structured result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResultChannel {
    /// The call parses nothing; the host may report a result with
    /// [`Input::Result`](crate::Input::Result).
    #[default]
    None,
    /// The helper writes one JSON value on stdout. When stdout reaches
    /// end-of-file the call parses what it retained: the value is handed
    /// out in [`Outcome::result`], and classified as success or remote
    /// failure (a remote failure ends the call `failed_remote`, whatever
    /// the exit code). A stdout that outgrew its budget, is empty (or only
    /// whitespace), is not one valid JSON value, or never reached
    /// end-of-file yields no result and says why in the record's
    /// `result_error`; the exit then decides the state, as without a
    /// result. Stderr is never parsed.
    StdoutJson,
}

/// A caller's own classification of a JSON result, replacing the
/// convention of [`ResultKind::of_json`].
///
/// Two classifiers are equal when they are the same function object
/// (clones of one classifier).
///
/// ```
/// use spillguard_core::{ResultClassifier, ResultKind};
///
/// let done = ResultClassifier::new(|v| {
///     if v["status"] == "done" { ResultKind::Success } else { ResultKind::RemoteFailure }
/// });
/// assert_eq!(done.classify(&serde_json::json!({"status": "done"})), ResultKind::Success);
/// assert_eq!(done, done.clone());
/// ```
#[derive(Clone)]
pub struct ResultClassifier(Arc<dyn Fn(&serde_json::Value) -> ResultKind + Send + Sync>);

impl ResultClassifier {
    /// A classifier calling `classify`.
    pub fn new(
        classify: impl Fn(&serde_json::Value) -> ResultKind + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(classify))
    }

    /// Classifies `value`.
    pub fn classify(&self, value: &serde_json::Value) -> ResultKind {
        (self.0)(value)
    }
}

impl fmt::Debug for ResultClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResultClassifier(..)")
    }
}

impl PartialEq for ResultClassifier {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ResultClassifier {}

/// The end of a debug grant for one call, and the budget that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DebugWindow {
    /// When the grant ends.
    pub until: Instant,
    /// The stderr budget after it ends.
    pub normal_budget: usize,
}

impl CallSettings {
    /// Default window for streams to close after the direct child exits.
    pub const DEFAULT_POST_EXIT_DRAIN: Duration = Duration::from_millis(250);
    /// Default wait for exit and streams after SIGKILL.
    pub const DEFAULT_KILL_WAIT: Duration = Duration::from_secs(2);
    /// Default wait for descendants after the direct child exited, at each
    /// of TERM to KILL and KILL to giving up: 100 ms. A process that left
    /// the group (`setsid`) and holds a stream then costs a successful call
    /// the drain window plus 200 ms, not the 7 s of grace and kill wait. A
    /// descendant still in the group dies of the KILL at once; 100 ms is
    /// ample for the kernel to close its pipes.
    pub const DEFAULT_ESCAPEE_WAIT: Duration = Duration::from_millis(100);
    /// Default life of an approval card.
    pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);
    /// Default stdout budget: the structured result channel.
    pub const DEFAULT_STDOUT_BYTES: usize = 1 << 20;
    /// Stderr budget of a discovery call: it has its own, smaller budget.
    pub const DISCOVERY_STDERR_BYTES: u64 = 4096;

    /// Settings for an action call under `config`.
    pub fn action(config: &Config) -> Self {
        Self {
            stderr: CaptureSettings::stderr(config),
            stdout: CaptureSettings {
                retain: Retain::Head,
                redactor: config.redact_extra_patterns.clone(),
                ..CaptureSettings::tail(StreamName::Stdout, Self::DEFAULT_STDOUT_BYTES)
            },
            stdout_truncation_allowed: false,
            stdout_mode: StdoutMode::Captured,
            stdin_close_grace: config.stdin_close_grace_seconds,
            mcp_shutdown: true,
            excerpt_bytes: crate::capture::to_usize(config.stderr_agent_excerpt_bytes),
            deadline: None,
            approval_timeout: Self::DEFAULT_APPROVAL_TIMEOUT,
            deadline_from_delivery: false,
            shutdown_grace: config.shutdown_grace_seconds,
            post_exit_drain: Self::DEFAULT_POST_EXIT_DRAIN,
            kill_wait: Self::DEFAULT_KILL_WAIT,
            escapee_wait: Self::DEFAULT_ESCAPEE_WAIT,
            signal_descendants: true,
            on_client_disconnect: DisconnectPolicy::Finish,
            audit_fail_closed: true,
            debug_until: None,
            result: ResultChannel::None,
            result_classifier: None,
            admission: Admission::Immediate,
            confinement: Confinement::default(),
            trace: None,
        }
    }

    /// Settings for a discovery call: its own stderr budget
    /// ([`DISCOVERY_STDERR_BYTES`](Self::DISCOVERY_STDERR_BYTES) at most).
    pub fn discovery(config: &Config) -> Self {
        let mut settings = Self::action(config);
        let budget = config
            .stderr_retained_per_call_bytes
            .min(Self::DISCOVERY_STDERR_BYTES);
        settings.stderr.budget = crate::capture::to_usize(budget);
        settings.stderr.head_bytes = settings.stderr.head_bytes.min(settings.stderr.budget / 4);
        settings.excerpt_bytes = settings.excerpt_bytes.min(settings.stderr.budget);
        settings
    }

    /// Checks the rules a [`Config`] enforces, for settings built or changed
    /// by hand, so that a host can refuse them before anything runs. The
    /// first broken rule is returned, naming the field:
    ///
    /// * `stderr.budget`, `stdout.budget` (when stdout is captured),
    ///   `excerpt_bytes`: not zero;
    /// * `stderr.kill_after_bytes`: not zero when set;
    /// * `excerpt_bytes`: at least the longest truncation marker of the
    ///   stderr retention mode (124 bytes for `tail`, 125 for `head`, 199 for
    ///   `head_and_tail`), so an excerpt never cuts its marker, and at most
    ///   `stderr.budget`;
    /// * `debug_until.normal_budget`: not zero;
    /// * `result`: [`ResultChannel::StdoutJson`] only with a captured stdout.
    ///
    /// ```
    /// use spillguard_core::{CallSettings, Config, Rule};
    ///
    /// let mut settings = CallSettings::action(&Config::default());
    /// assert_eq!(settings.validate(), Ok(()));
    /// settings.excerpt_bytes = 1;
    /// let err = settings.validate().unwrap_err();
    /// assert_eq!((err.field, &err.rule), ("excerpt_bytes", &Rule::BelowMinimum { value: 1, min: 124 }));
    /// assert_eq!(err.to_string(), "call settings: excerpt_bytes: 1 is below the minimum of 124");
    /// ```
    pub fn validate(&self) -> Result<(), SettingsError> {
        let fail = |field, rule| Err(SettingsError { field, rule });
        let excerpt = self.excerpt_bytes as u64;
        if self.stderr.budget == 0 {
            return fail("stderr.budget", Rule::Zero);
        }
        if let Err(error) = self.confinement.validate() {
            return fail("confinement", Rule::Invalid(error.to_string()));
        }
        if self.stdout.budget == 0 && self.stdout_mode == StdoutMode::Captured {
            return fail("stdout.budget", Rule::Zero);
        }
        if excerpt == 0 {
            return fail("excerpt_bytes", Rule::Zero);
        }
        if self.stderr.kill_after_bytes == Some(0) {
            return fail("stderr.kill_after_bytes", Rule::Zero);
        }
        let min = crate::config::longest_marker(self.stderr.retain);
        if excerpt < min {
            return fail(
                "excerpt_bytes",
                Rule::BelowMinimum {
                    value: excerpt,
                    min,
                },
            );
        }
        if self.excerpt_bytes > self.stderr.budget {
            return fail(
                "excerpt_bytes",
                Rule::Exceeds {
                    value: excerpt,
                    other: "stderr.budget",
                    limit: self.stderr.budget as u64,
                },
            );
        }
        if self.debug_until.is_some_and(|w| w.normal_budget == 0) {
            return fail("debug_until.normal_budget", Rule::Zero);
        }
        if self.result == ResultChannel::StdoutJson && self.stdout_mode == StdoutMode::Streamed {
            return fail(
                "result",
                Rule::Incompatible("stdout_json needs a captured stdout, not a streamed one"),
            );
        }
        Ok(())
    }

    /// Applies a debug grant active at `now` to the stderr budget.
    /// The raised budget lasts until the grant ends; then the call's
    /// retained stderr shrinks back to its normal budget. The record says
    /// `debug: true` either way.
    pub fn with_debug(mut self, config: &Config, grant: Option<&DebugGrant>, now: Instant) -> Self {
        let raised = CaptureSettings::for_call(config, grant, now);
        if let (true, Some(grant)) = (raised.debug, grant) {
            self.debug_until = Some(DebugWindow {
                until: grant.until(),
                normal_budget: self.stderr.budget,
            });
            self.stderr.budget = self.stderr.budget.max(raised.budget);
            self.stderr.debug = true;
        }
        self
    }
}

/// A [`CallSettings`] value that breaks a rule; names the field and the
/// rule. See [`CallSettings::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// The offending field, e.g. `excerpt_bytes` or `stderr.budget`.
    pub field: &'static str,
    /// The rule it broke.
    pub rule: Rule,
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "call settings: {}: {}", self.field, self.rule)
    }
}

impl std::error::Error for SettingsError {}
