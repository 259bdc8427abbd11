//! One call's lifecycle as a sans-IO state machine (R3, R4 policy, R5):
//! see [`Call`].

mod exit;
mod record;
mod timer;
mod transitions;

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::capture::{CaptureSettings, Fed, Retained, StreamCapture, StreamName};
use crate::config::{Config, DebugGrant, Retain, Rule};
use crate::jsonrpc::Diverted;
use crate::pool::RetentionPool;
use crate::redact::{Redactor, StreamRedactions};

pub use exit::Exit;
pub use record::{
    ApprovalDecision, CallKind, CallRecord, CancelReason, DisconnectPolicy, ExitStatus, ResultKind,
    Signal, SignalMark, State, StateMark, StreamEnd, rfc3339,
};
pub use timer::Timer;
pub use transitions::TRANSITIONS;

/// The record's name for the kind of OS error that kept a helper from
/// being spawned (`spawn_error_kind`). The mapping is fixed; kinds not
/// listed are `other`:
///
/// | kind | name |
/// |---|---|
/// | `NotFound` | `not_found` |
/// | `PermissionDenied` | `permission_denied` |
/// | `NotADirectory` | `not_a_directory` |
/// | `IsADirectory` | `is_a_directory` |
/// | `InvalidFilename` | `invalid_filename` |
/// | `InvalidInput` | `invalid_input` |
/// | `ArgumentListTooLong` | `argument_list_too_long` |
/// | `ExecutableFileBusy` | `executable_file_busy` |
/// | `ResourceBusy` | `resource_busy` |
/// | `WouldBlock` | `would_block` |
/// | `OutOfMemory` | `out_of_memory` |
/// | `Interrupted` | `interrupted` |
/// | `Unsupported` | `unsupported` |
/// | anything else | `other` |
///
/// ```
/// use std::io::ErrorKind;
/// use spillguard_core::spawn_error_kind;
///
/// assert_eq!(spawn_error_kind(ErrorKind::NotFound), "not_found");
/// assert_eq!(spawn_error_kind(ErrorKind::TimedOut), "other");
/// ```
pub fn spawn_error_kind(kind: io::ErrorKind) -> &'static str {
    use io::ErrorKind as K;
    match kind {
        K::NotFound => "not_found",
        K::PermissionDenied => "permission_denied",
        K::NotADirectory => "not_a_directory",
        K::IsADirectory => "is_a_directory",
        K::InvalidFilename => "invalid_filename",
        K::InvalidInput => "invalid_input",
        K::ArgumentListTooLong => "argument_list_too_long",
        K::ExecutableFileBusy => "executable_file_busy",
        K::ResourceBusy => "resource_busy",
        K::WouldBlock => "would_block",
        K::OutOfMemory => "out_of_memory",
        K::Interrupted => "interrupted",
        K::Unsupported => "unsupported",
        _ => "other",
    }
}

use timer::TimerTable;

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
    /// Whether the call captures the helper's stdout (the default) or the
    /// caller streams the helper's stdin and stdout itself.
    pub stdout_mode: StdoutMode,
    /// A streamed helper's time to exit on its own once its stdin is
    /// closed, before its group gets SIGTERM (the MCP stdio shutdown).
    /// Default 2 s, from `stdin_close_grace_seconds`.
    pub stdin_close_grace: Duration,
    /// Cap of the agent excerpt, marker included.
    pub excerpt_bytes: usize,
    /// Longest the helper may run after dispatch; `None` for no limit.
    pub deadline: Option<Duration>,
    /// How long the approval card stays valid once shown.
    pub approval_timeout: Duration,
    /// The driver reports when each approval card reaches the approver
    /// ([`Call::handle_card_delivered`]): the approval deadline then runs
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
    /// call runs ([`Call::handle_debug_grant`]): when the grant ends and the
    /// stderr budget it falls back to. `None` again once it ended.
    pub debug_until: Option<DebugWindow>,
    /// Where the helper returns its structured result. Default
    /// [`ResultChannel::None`]: the host parses it itself and reports it
    /// with [`Call::handle_result`].
    pub result: ResultChannel,
    /// How a JSON result is classified; `None` (the default) applies the
    /// convention of [`ResultKind::of_json`].
    pub result_classifier: Option<ResultClassifier>,
    /// Whether an authorized call spawns at once ([`Admission::Immediate`],
    /// the default) or waits in `queued` until its driver admits it
    /// ([`Admission::Queued`]), for a driver that runs at most so many
    /// calls at once.
    pub admission: Admission,
}

/// When an authorized call may spawn its helper.
///
/// ```
/// use std::time::{Duration, Instant, SystemTime};
/// use spillguard_core::{
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
/// call.handle_validated(t0, false)?;
/// // Authorized, but nothing to spawn until the driver admits it.
/// while let Some(action) = call.poll_action() {
///     assert!(matches!(action, Action::Audit(_)));
/// }
/// assert_eq!(call.state(), State::Queued);
/// assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(60)));
///
/// // A slot is free at 2 s: the call asks to spawn.
/// call.handle_admitted(t0 + Duration::from_secs(2))?;
/// assert_eq!(call.state(), State::Authorized);
/// assert!(std::iter::from_fn(|| call.poll_action()).any(|a| matches!(a, Action::Spawn)));
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
    /// [`Call::handle_admitted`]; then it enters `authorized` and asks to
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
    /// that went each way ([`Call::handle_stdin_forwarded`],
    /// [`Call::handle_stdout_forwarded`]). After the helper's exit the
    /// call waits, at most `post_exit_drain` as for its own streams, for
    /// the caller's reader to report stdout's end
    /// ([`Call::handle_stdout_eof`]: end-of-file read, or the reader
    /// dropped), so that what the caller forwarded or diverted up to the
    /// end is in the record. Stderr stays bounded and marked as ever. The end of the caller's input
    /// ([`Call::handle_input_ended`]) and every stop run the MCP stdio
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
    /// [`Call::handle_result`].
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
            stdout_mode: StdoutMode::Captured,
            stdin_close_grace: config.stdin_close_grace_seconds,
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

/// The approval card: built once when approval is asked, never redrawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalCard {
    /// The call asking.
    pub call_id: String,
    /// The action's name.
    pub action: String,
    /// The target as shown to the user.
    pub target: String,
    /// One-line parameter summary.
    pub summary: String,
    /// How long the card stays valid from when it is shown.
    pub expires_in: Duration,
    /// The card as it is shown, built once when it is shown and never
    /// changed: one `label: value` line per
    /// [`CallSpec::card_lines`] (by default `action`, `target`,
    /// `summary`), then `approval expires: N ms after it is shown`. Every
    /// value is redacted by the call's rules, as the record is, and made
    /// [`visible`], so no value can add, hide or reorder a line. The audit
    /// log keeps exactly this text ([`AuditKind::CardShown`]).
    pub text: String,
}

/// A lifecycle event for the audit log (R6): written as it happens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEvent {
    /// The call.
    pub call_id: String,
    /// Its session.
    pub session_id: String,
    /// Microseconds since the call was received.
    pub offset_us: u64,
    /// What happened.
    pub kind: AuditKind,
}

/// The kinds of audit events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditKind {
    /// The attempt, written before anything is approved or spawned.
    Attempt {
        /// Action or discovery.
        kind: CallKind,
        /// The action's name.
        action: String,
        /// The target as shown.
        target: String,
    },
    /// A state transition.
    Transition {
        /// State left.
        from: State,
        /// State entered.
        to: State,
    },
    /// The final record, after the terminal transition.
    Final(Box<CallRecord>),
    /// The approval card, as shown, before it is shown: byte for byte
    /// the [`ApprovalCard::text`] the approver sees.
    CardShown {
        /// The card's text.
        text: String,
    },
}

/// What the call asks its driver to do. Carry them out in order.
#[derive(Debug)]
#[non_exhaustive]
pub enum Action {
    /// Append this event to the audit log.
    Audit(AuditEvent),
    /// Show this card to the user (once per call).
    ShowApprovalCard(ApprovalCard),
    /// Spawn the helper in its own process group, then report
    /// [`Call::handle_spawned`] or [`Call::handle_spawn_failed`].
    Spawn,
    /// Close the helper's stdin, if it has one.
    CloseStdin,
    /// Send `signal` to the process group `pgid` (remembered at spawn). A
    /// group that no longer exists is not an error.
    SignalGroup {
        /// The process group id.
        pgid: u32,
        /// The signal.
        signal: Signal,
    },
    /// Stop waiting for the output streams; bytes already fed are kept.
    AbandonStreams,
    /// The call ended; this is the last action. If the helper's exit was
    /// never observed, the driver still reaps it in the background.
    Finished(Box<Outcome>),
}

/// [`Action`] without `#[non_exhaustive]`, for the adapters of this
/// workspace: their `match` on it has no wildcard arm, so an action the
/// core adds is a compile error in each of them until it is carried out.
/// Other code matches on [`Action`]: this enum gains variants in minor
/// releases.
#[doc(hidden)]
#[derive(Debug)]
pub enum EveryAction {
    /// [`Action::Audit`].
    Audit(AuditEvent),
    /// [`Action::ShowApprovalCard`].
    ShowApprovalCard(ApprovalCard),
    /// [`Action::Spawn`].
    Spawn,
    /// [`Action::CloseStdin`].
    CloseStdin,
    /// [`Action::SignalGroup`].
    SignalGroup {
        /// The process group id.
        pgid: u32,
        /// The signal.
        signal: Signal,
    },
    /// [`Action::AbandonStreams`].
    AbandonStreams,
    /// [`Action::Finished`].
    Finished(Box<Outcome>),
}

impl From<Action> for EveryAction {
    fn from(action: Action) -> Self {
        match action {
            Action::Audit(event) => EveryAction::Audit(event),
            Action::ShowApprovalCard(card) => EveryAction::ShowApprovalCard(card),
            Action::Spawn => EveryAction::Spawn,
            Action::CloseStdin => EveryAction::CloseStdin,
            Action::SignalGroup { pgid, signal } => EveryAction::SignalGroup { pgid, signal },
            Action::AbandonStreams => EveryAction::AbandonStreams,
            Action::Finished(outcome) => EveryAction::Finished(outcome),
        }
    }
}

/// A finished call: its record, and its retained output with the pool lease.
#[derive(Debug)]
pub struct Outcome {
    /// The call record (plain data).
    pub record: CallRecord,
    /// Retained stderr; holds its share of the process pool until dropped.
    pub stderr: Retained,
    /// Retained stdout (the structured result channel).
    pub stdout: Retained,
    /// The agent excerpt cap the call was configured with.
    pub excerpt_bytes: usize,
    /// The JSON value parsed from stdout when the call's result channel is
    /// [`ResultChannel::StdoutJson`]; see [`Outcome::result`].
    pub result_value: Option<serde_json::Value>,
    /// The secrets replaced in the rendered stderr and stdout, per rule.
    pub redactions: StreamRedactions,
}

impl Outcome {
    /// The stderr excerpt for a model: marker included, redacted, clamped
    /// to `stderr_agent_excerpt_bytes`.
    pub fn agent_excerpt(&self) -> String {
        self.stderr.render_clamped(self.excerpt_bytes)
    }

    /// The structured result parsed from stdout, if the call's result
    /// channel is [`ResultChannel::StdoutJson`] and stdout held one valid
    /// JSON value within its budget; the record's `result_error` says why
    /// not otherwise.
    pub fn result(&self) -> Option<&serde_json::Value> {
        self.result_value.as_ref()
    }

    /// [`result`](Self::result) as it may be shown outside the process:
    /// the value parsed again from the redacted stdout, so a secret the
    /// helper printed in its result reads `[redacted: RULE]` there, as in
    /// every other view (it is counted in `stdout_redactions`). Should a
    /// replacement leave the text no longer JSON (a number after a
    /// credential key, an extra pattern that spans a quote), the value is
    /// redacted member by member instead and keeps its shape: each string
    /// on its own, and a member whose `"key": value` pair a rule matches
    /// beyond its key and value alone becomes the string
    /// `"[redacted: RULE]"`. Should that find fewer secrets than the text
    /// did, the value is the redacted text as one JSON string. What a
    /// client is shown is never unredacted.
    ///
    /// ```
    /// # use spillguard_core::Outcome;
    /// fn shown(outcome: &Outcome) -> String {
    ///     match outcome.redacted_result() {
    ///         Some(value) => value.to_string(),
    ///         None => outcome.record.result_error.clone().unwrap_or_default(),
    ///     }
    /// }
    /// ```
    pub fn redacted_result(&self) -> Option<serde_json::Value> {
        let raw = self.result_value.as_ref()?;
        if self.redactions.stdout.total() == 0 {
            return Some(raw.clone());
        }
        let text = self.stdout.render();
        if let Ok(value) = serde_json::from_str(&text) {
            return Some(value);
        }
        // Member by member, unless that finds fewer secrets than the text
        // did (an extra pattern that reads the text's own spacing): then
        // the redacted text itself, as one string.
        let (value, found) = crate::redact::redact_json(self.stdout.redactor(), raw);
        Some(if found >= self.redactions.stdout.total() {
            value
        } else {
            serde_json::Value::String(text)
        })
    }
}

/// A caller misused the call: the input does not fit the state. The state
/// is unchanged. (What the helper, approver or clock did is never an error:
/// it is an outcome in the record.)
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// No transition exists for this input in this state.
    InvalidTransition {
        /// The state the call is in.
        state: State,
        /// The input that was refused.
        input: &'static str,
    },
    /// A discovery call was said to need approval; discovery never acts.
    DiscoveryNeedsApproval,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::InvalidTransition { state, input } => {
                write!(f, "no transition for input `{input}` in state `{state}`")
            }
            CallError::DiscoveryNeedsApproval => {
                write!(f, "a discovery call cannot need approval: it never acts")
            }
        }
    }
}

impl std::error::Error for CallError {}

/// Inputs to the transition table. Bytes are not inputs: they never cause
/// a transition (the opt-in kill ceiling becomes an explicit `Cancel`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    Validated { needs_approval: bool },
    ValidationFailed(String),
    ApprovalGranted,
    ApprovalDenied,
    Spawned { pid: u32 },
    SpawnFailed(io::ErrorKind, String),
    StdoutEof,
    StderrEof,
    Exited(ExitStatus),
    ProcessLost,
    AuditFailed(String),
    Cancel(CancelReason),
    ClientDisconnected,
    Result(ResultKind),
    CallerDone,
    DebugGranted(DebugGrant),
    DebugRevoked,
    CardDelivered,
    Admitted,
    Timeout(Timer),
}

impl Input {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Input::Validated { .. } => "validated",
            Input::ValidationFailed(_) => "validation_failed",
            Input::ApprovalGranted => "approval_granted",
            Input::ApprovalDenied => "approval_denied",
            Input::Spawned { .. } => "spawned",
            Input::SpawnFailed(..) => "spawn_failed",
            Input::StdoutEof => "stdout_eof",
            Input::StderrEof => "stderr_eof",
            Input::Exited(_) => "exited",
            Input::ProcessLost => "process_lost",
            Input::AuditFailed(_) => "audit_failed",
            Input::Cancel(_) => "cancel",
            Input::ClientDisconnected => "client_disconnected",
            Input::Result(_) => "result",
            Input::CallerDone => "input_ended",
            Input::DebugGranted(_) => "debug_granted",
            Input::DebugRevoked => "debug_revoked",
            Input::CardDelivered => "card_delivered",
            Input::Admitted => "admitted",
            Input::Timeout(_) => "timeout",
        }
    }
}

/// Where the stop sequence of a dispatched helper stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// No signal sent, stdin not closed by a stop.
    Running,
    /// A streamed helper's stdin was closed; the stdin close grace runs,
    /// SIGTERM follows it.
    ClosingStdin,
    /// SIGTERM sent; the grace timer runs.
    Terminating,
    /// SIGKILL sent; the kill-wait timer runs.
    Killing,
}

/// One call of one helper: its lifecycle as a sans-IO state machine (R3,
/// R4 policy, R5).
///
/// A call owns every decision about a helper run: when to show the
/// approval card, when to spawn, when to signal the process group, when to
/// stop waiting, and which terminal state the call ends in. The adapter that
/// drives it only reports what happened (`handle_*`) and carries out what it
/// is asked (`poll_action`). All transitions live in one table in
/// `transitions.rs`; see [`State`] for the states and `ARCHITECTURE.md` for the
/// diagram and the precedence rules.
///
/// # Driving a call
///
/// After every `handle_*` call, the driver drains [`Call::poll_action`] until
/// it returns `None`, carrying out each action in order, then re-arms its
/// timer from [`Call::poll_timeout`]. When the timer fires it calls
/// [`Call::handle_timeout`] (calling it early is harmless). The loop ends at
/// [`Action::Finished`], which is emitted exactly once and is the last action.
///
/// # Examples
///
/// The whole life of a call that needs approval, driven by hand in
/// simulated time:
///
/// ```
/// use std::time::{Duration, Instant, SystemTime};
/// use spillguard_core::{
///     Action, Call, CallKind, CallSettings, CallSpec, Config, ExitStatus, RetentionPool, State,
/// };
///
/// let config = Config::default();
/// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
/// let spec = CallSpec {
///     call_id: "c_1".into(),
///     session_id: "s_1".into(),
///     kind: CallKind::Action,
///     action: "ssh.exec".into(),
///     target: "deploy@web-3".into(),
///     summary: "systemctl restart web".into(),
///     card_lines: Vec::new(),
/// };
/// let t0 = Instant::now();
/// let mut call = Call::new(spec, CallSettings::action(&config), &pool, t0, SystemTime::UNIX_EPOCH);
///
/// call.handle_validated(t0, true)?;
/// let mut shown = Vec::new();
/// while let Some(action) = call.poll_action() {
///     shown.push(format!("{action:?}").split([' ', '(']).next().unwrap_or("").to_owned());
/// }
/// assert_eq!(shown, ["Audit", "Audit", "Audit", "Audit", "ShowApprovalCard"]);
/// assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(120)));
///
/// let t1 = t0 + Duration::from_secs(3);
/// call.handle_approval_granted(t1)?;
/// while let Some(action) = call.poll_action() {
///     if let Action::Spawn = action {
///         // The driver spawns the helper here.
///     }
/// }
/// call.handle_spawned(t1, 4242)?;
/// call.handle_stderr(t1, b"warning: slow link\n");
/// call.handle_exit(t1 + Duration::from_millis(40), ExitStatus::code(0))?;
/// call.handle_stdout_eof(t1 + Duration::from_millis(41))?;
/// call.handle_stderr_eof(t1 + Duration::from_millis(41))?;
///
/// let mut outcome = None;
/// while let Some(action) = call.poll_action() {
///     if let Action::Finished(o) = action {
///         outcome = Some(o);
///     }
/// }
/// let outcome = outcome.expect("finished");
/// assert_eq!(outcome.record.state, State::Completed);
/// assert_eq!(outcome.record.exit_status, Some(0));
/// assert_eq!(outcome.record.stderr_bytes_seen, 19);
/// assert_eq!(outcome.agent_excerpt(), "warning: slow link\n");
/// # Ok::<(), spillguard_core::CallError>(())
/// ```
#[derive(Debug)]
pub struct Call {
    pub(crate) spec: CallSpec,
    pub(crate) settings: CallSettings,
    pub(crate) state: State,
    pub(crate) received: Instant,
    pub(crate) received_at: SystemTime,
    pub(crate) last_now: Instant,
    pub(crate) timers: TimerTable,
    pub(crate) actions: VecDeque<Action>,
    pub(crate) stderr: Option<StreamCapture>,
    pub(crate) stdout: Option<StreamCapture>,
    pub(crate) approval: ApprovalDecision,
    pub(crate) spawn_in_flight: bool,
    pub(crate) pending_cancel: Option<CancelReason>,
    pub(crate) pid: Option<u32>,
    pub(crate) pgid: Option<u32>,
    pub(crate) pipe_capacity: Option<u64>,
    pub(crate) exit: Option<ExitStatus>,
    pub(crate) process_lost: bool,
    pub(crate) stdout_open: bool,
    pub(crate) stderr_open: bool,
    pub(crate) input_ended: bool,
    pub(crate) stdin_closed: bool,
    pub(crate) stdout_bytes_forwarded: u64,
    pub(crate) stdin_bytes_forwarded: u64,
    pub(crate) stdin_bytes_undelivered: u64,
    pub(crate) stdout_lines_diverted: u64,
    pub(crate) stdout_bytes_diverted: u64,
    pub(crate) stop: Stop,
    pub(crate) cancel_reason: Option<CancelReason>,
    pub(crate) cancel_offset_us: Option<u64>,
    pub(crate) card_delivered_offset_us: Option<u64>,
    pub(crate) exited_offset_us: Option<u64>,
    pub(crate) queued_offset_us: Option<u64>,
    pub(crate) admitted_offset_us: Option<u64>,
    pub(crate) stop_before_exit: bool,
    pub(crate) kill_needed: bool,
    pub(crate) descendants_signalled: bool,
    pub(crate) streams_closed_as: Option<StreamEnd>,
    pub(crate) abandoned: bool,
    pub(crate) client_disconnected: bool,
    pub(crate) result: Option<ResultKind>,
    pub(crate) result_value: Option<serde_json::Value>,
    pub(crate) result_error: Option<String>,
    pub(crate) audit_failures: u64,
    pub(crate) failure: Option<String>,
    pub(crate) spawn_error_kind: Option<&'static str>,
    pub(crate) timeline: Vec<StateMark>,
    pub(crate) signals: Vec<SignalMark>,
}

impl Call {
    /// A call received at `now` (monotonic) and `received_at` (wall clock,
    /// for the record). Its stderr draws from `pool`; stdout has its own
    /// budget outside the pool. The spec's action, target and summary are
    /// redacted here, by the stderr settings' redactor: the card, the record
    /// and the audit events never hold a secret given as an argument.
    pub fn new(
        spec: CallSpec,
        settings: CallSettings,
        pool: &RetentionPool,
        now: Instant,
        received_at: SystemTime,
    ) -> Self {
        let spec = redacted_spec(spec, &settings.stderr.redactor);
        let stderr = StreamCapture::new(settings.stderr.clone(), pool);
        let stdout = StreamCapture::new(settings.stdout.clone(), &RetentionPool::unlimited());
        let mut timers = TimerTable::default();
        if let Some(window) = settings.debug_until {
            timers.set(Timer::DebugGrantEnd, window.until);
        }
        Self {
            spec,
            settings,
            state: State::Received,
            received: now,
            received_at,
            last_now: now,
            timers,
            actions: VecDeque::new(),
            stderr: Some(stderr),
            stdout: Some(stdout),
            approval: ApprovalDecision::Undecided,
            spawn_in_flight: false,
            pending_cancel: None,
            pid: None,
            pgid: None,
            pipe_capacity: None,
            exit: None,
            process_lost: false,
            stdout_open: false,
            stderr_open: false,
            input_ended: false,
            stdin_closed: false,
            stdout_bytes_forwarded: 0,
            stdin_bytes_forwarded: 0,
            stdin_bytes_undelivered: 0,
            stdout_lines_diverted: 0,
            stdout_bytes_diverted: 0,
            stop: Stop::Running,
            cancel_reason: None,
            cancel_offset_us: None,
            card_delivered_offset_us: None,
            exited_offset_us: None,
            queued_offset_us: None,
            admitted_offset_us: None,
            stop_before_exit: false,
            kill_needed: false,
            descendants_signalled: false,
            streams_closed_as: None,
            abandoned: false,
            client_disconnected: false,
            result: None,
            result_value: None,
            result_error: None,
            audit_failures: 0,
            failure: None,
            spawn_error_kind: None,
            timeline: vec![StateMark {
                state: State::Received,
                offset_us: 0,
            }],
            signals: Vec::new(),
        }
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// What the call was created with, redacted.
    pub fn spec(&self) -> &CallSpec {
        &self.spec
    }

    /// The settings in force.
    pub fn settings(&self) -> &CallSettings {
        &self.settings
    }

    /// The live stderr capture, until the call finishes.
    pub fn stderr(&self) -> Option<&StreamCapture> {
        self.stderr.as_ref()
    }

    /// Whether [`Action::Finished`] has been queued.
    pub fn is_finished(&self) -> bool {
        self.state.is_terminal()
    }

    /// The helper's process group while the call still answers for it:
    /// spawned, and either its leader not known to be reaped (neither its
    /// exit nor its loss reported, so the pgid is still its own) or, after
    /// the leader's exit, a stream still open with descendants to be
    /// signalled (the same rule as the stop sequence after an exit). `None`
    /// otherwise.
    ///
    /// A driver that ends before the call finished (a panic, its runtime
    /// shutting down) kills this group, so that no helper runs unsupervised.
    pub fn live_group(&self) -> Option<u32> {
        let pgid = self.pgid?;
        let leader_alive = self.exit.is_none() && !self.process_lost;
        let holders = self.settings.signal_descendants && (self.stdout_open || self.stderr_open);
        (leader_alive || holders).then_some(pgid)
    }

    /// Validation passed. `needs_approval` comes from the host's policy;
    /// a discovery call may not need it.
    pub fn handle_validated(
        &mut self,
        now: Instant,
        needs_approval: bool,
    ) -> Result<(), CallError> {
        self.handle(now, Input::Validated { needs_approval })
    }

    /// Validation failed: the call ends `failed_before_dispatch`.
    pub fn handle_validation_failed(
        &mut self,
        now: Instant,
        reason: impl Into<String>,
    ) -> Result<(), CallError> {
        let reason = self.redacted(reason.into());
        self.handle(now, Input::ValidationFailed(reason))
    }

    /// The approval card is on its way to the approver: the driver wrote
    /// it where the approver reads it (for an MCP server, the
    /// `elicitation/create` request or the `input_required` result written
    /// and flushed). With [`CallSettings::deadline_from_delivery`], the
    /// approval deadline is fixed from here, once: the card expires
    /// `approval_timeout` after its delivery, so that a busy driver (many
    /// calls, a slow audit log, a client slow to read) does not eat the
    /// approver's time; until then it has none. Without it, the deadline
    /// ran from the show and is not moved. Valid in every state; ignored
    /// unless the call awaits approval and no delivery was reported yet.
    /// The record says when (`card_delivered_offset_us`).
    pub fn handle_card_delivered(&mut self, now: Instant) {
        self.handle_infallible(now, Input::CardDelivered);
    }

    /// The driver admits the queued call (a running slot is free): it
    /// leaves `queued` for `authorized` and asks to spawn
    /// ([`Action::Spawn`]). Only for a call whose settings ask for
    /// [`Admission::Queued`], once it is in `queued`; in any other live
    /// state this is a caller error that changes nothing. Ignored once the
    /// call has ended (its queue timeout or a cancel may come first). The
    /// record says when (`admitted_offset_us`).
    pub fn handle_admitted(&mut self, now: Instant) -> Result<(), CallError> {
        self.handle(now, Input::Admitted)
    }

    /// The approver said yes.
    pub fn handle_approval_granted(&mut self, now: Instant) -> Result<(), CallError> {
        self.handle(now, Input::ApprovalGranted)
    }

    /// The approver said no.
    pub fn handle_approval_denied(&mut self, now: Instant) -> Result<(), CallError> {
        self.handle(now, Input::ApprovalDenied)
    }

    /// The approver's answer was no approval, for `reason` (an answer
    /// that was not a valid yes: `accept without the requested content`):
    /// the call ends `denied` as for
    /// [`handle_approval_denied`](Self::handle_approval_denied), and the
    /// record's `failure` says why. Refused, and nothing recorded, unless
    /// the call awaits approval.
    pub fn handle_approval_declined(
        &mut self,
        now: Instant,
        reason: impl Into<String>,
    ) -> Result<(), CallError> {
        let before = self.failure.replace(reason.into());
        let handled = self.handle(now, Input::ApprovalDenied);
        if handled.is_err() {
            self.failure = before;
        }
        handled
    }

    /// The helper was spawned with this pid. Adapters spawn every helper as
    /// the leader of its own process group, so its process group id is
    /// `pid` too: that is the group every [`Action::SignalGroup`] names.
    pub fn handle_spawned(&mut self, now: Instant, pid: u32) -> Result<(), CallError> {
        self.handle(now, Input::Spawned { pid })
    }

    /// The capacity the helper's output pipes got after the adapter asked
    /// to enlarge them (`None`: the request failed). Recorded as
    /// `pipe_capacity_bytes`; never a transition, never an error.
    pub fn handle_pipe_capacity(&mut self, capacity: Option<u64>) {
        if !self.state.is_terminal() {
            self.pipe_capacity = capacity;
        }
    }

    /// The helper could not be spawned: `kind` is the OS error's kind,
    /// recorded as `spawn_error_kind` (see [`spawn_error_kind`] for the
    /// fixed names), and `message` its text, recorded as `failure`.
    pub fn handle_spawn_failed(
        &mut self,
        now: Instant,
        kind: io::ErrorKind,
        message: impl Into<String>,
    ) -> Result<(), CallError> {
        let message = self.redacted(message.into());
        self.handle(now, Input::SpawnFailed(kind, message))
    }

    /// Bytes read from the helper's stderr. Never fails, never causes a
    /// transition by itself; only the opt-in kill ceiling, once crossed,
    /// becomes a cancel with reason [`CancelReason::StderrCeiling`].
    pub fn handle_stderr(&mut self, now: Instant, bytes: &[u8]) {
        if self.state.is_terminal() {
            return;
        }
        let fed = match self.stderr.as_mut() {
            Some(capture) => capture.feed(bytes),
            None => return,
        };
        if fed == Fed::CeilingCrossed && self.state == State::Dispatched {
            self.handle_infallible(now, Input::Cancel(CancelReason::StderrCeiling));
        }
    }

    /// Bytes read from the helper's stdout. Never fails.
    pub fn handle_stdout(&mut self, _now: Instant, bytes: &[u8]) {
        if self.state.is_terminal() {
            return;
        }
        if let Some(capture) = self.stdout.as_mut() {
            let _ = capture.feed(bytes);
        }
    }

    /// A streamed call's adapter sent `n` more bytes of the helper's stdout
    /// to the caller. A counter (`stdout_bytes_forwarded`): never fails,
    /// never a transition; ignored once the call has ended.
    pub fn handle_stdout_forwarded(&mut self, n: u64) {
        if !self.state.is_terminal() {
            self.stdout_bytes_forwarded = self.stdout_bytes_forwarded.saturating_add(n);
        }
    }

    /// A streamed call's adapter wrote `n` more bytes from the caller to the
    /// helper's stdin. A counter (`stdin_bytes_forwarded`): never fails,
    /// never a transition; ignored once the call has ended.
    pub fn handle_stdin_forwarded(&mut self, n: u64) {
        if !self.state.is_terminal() {
            self.stdin_bytes_forwarded = self.stdin_bytes_forwarded.saturating_add(n);
        }
    }

    /// A streamed call's adapter dropped `n` bytes the caller sent, which
    /// the helper never took (it stopped reading its stdin). A counter
    /// (`stdin_bytes_undelivered`): never fails, never a transition;
    /// ignored once the call has ended.
    pub fn handle_stdin_undelivered(&mut self, n: u64) {
        if !self.state.is_terminal() {
            self.stdin_bytes_undelivered = self.stdin_bytes_undelivered.saturating_add(n);
        }
    }

    /// Bytes of a streamed MCP server's stdout that are not protocol (see
    /// [`StdoutLineGuard`](crate::StdoutLineGuard)): fed to the stderr
    /// capture, exactly like [`handle_stderr`](Self::handle_stderr) (the
    /// kill ceiling included), and counted as `stdout_bytes_diverted` and
    /// `stdout_lines_diverted`.
    pub fn handle_stdout_diverted(&mut self, now: Instant, diverted: Diverted<'_>) {
        if self.state.is_terminal() {
            return;
        }
        self.stdout_bytes_diverted = self
            .stdout_bytes_diverted
            .saturating_add(diverted.bytes.len() as u64);
        self.stdout_lines_diverted = self.stdout_lines_diverted.saturating_add(diverted.lines);
        self.handle_stderr(now, diverted.bytes);
    }

    /// The caller has finished sending: the guard's own stdin reached
    /// end-of-file, or the transport was closed. Valid in every state;
    /// remembered until dispatch; ignored once terminal.
    ///
    /// The call asks for [`Action::CloseStdin`]. A streamed helper that is
    /// still running then has `stdin_close_grace` to exit on its own (its
    /// exit decides the state, exit 0 is `completed`); after that its
    /// group gets SIGTERM, the grace, SIGKILL, and the call ends
    /// `cancelled_after_dispatch` (reason `stdin_close_grace`) or `killed`.
    /// A captured helper only has its stdin closed.
    ///
    /// ```
    /// use std::time::{Duration, Instant, SystemTime};
    /// use spillguard_core::{
    ///     Action, Call, CallKind, CallSettings, CallSpec, Config, RetentionPool, Signal, StdoutMode,
    /// };
    ///
    /// let config = Config::default();
    /// let settings = CallSettings {
    ///     stdout_mode: StdoutMode::Streamed,
    ///     ..CallSettings::action(&config)
    /// };
    /// let spec = CallSpec {
    ///     call_id: "c_mcp".into(),
    ///     session_id: "s_1".into(),
    ///     kind: CallKind::Action,
    ///     action: "mcp.server".into(),
    ///     target: "files".into(),
    ///     summary: "serve the files tools".into(),
    ///     card_lines: Vec::new(),
    /// };
    /// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    /// let t0 = Instant::now();
    /// let mut call = Call::new(spec, settings, &pool, t0, SystemTime::UNIX_EPOCH);
    /// call.handle_validated(t0, false)?;
    /// while call.poll_action().is_some() {}
    /// call.handle_spawned(t0, 4242)?;
    /// while call.poll_action().is_some() {}
    ///
    /// // The client closed its end at 10 s: stdin is closed, 2 s to exit.
    /// let t1 = t0 + Duration::from_secs(10);
    /// call.handle_input_ended(t1);
    /// assert!(matches!(call.poll_action(), Some(Action::CloseStdin)));
    /// assert_eq!(call.poll_timeout(), Some(t1 + Duration::from_secs(2)));
    ///
    /// // It did not exit: TERM to its group, then 5 s of grace before KILL.
    /// call.handle_timeout(t1 + Duration::from_secs(2));
    /// assert!(matches!(
    ///     call.poll_action(),
    ///     Some(Action::SignalGroup { pgid: 4242, signal: Signal::Term })
    /// ));
    /// assert_eq!(call.poll_timeout(), Some(t1 + Duration::from_secs(7)));
    /// # Ok::<(), spillguard_core::CallError>(())
    /// ```
    pub fn handle_input_ended(&mut self, now: Instant) {
        self.handle_infallible(now, Input::CallerDone);
    }

    /// The stdout reader reached end-of-file. For a streamed call, the
    /// caller's reader reached it or was dropped; a second report is
    /// accepted and changes nothing.
    pub fn handle_stdout_eof(&mut self, now: Instant) -> Result<(), CallError> {
        self.handle(now, Input::StdoutEof)
    }

    /// The stderr reader reached end-of-file.
    pub fn handle_stderr_eof(&mut self, now: Instant) -> Result<(), CallError> {
        self.handle(now, Input::StderrEof)
    }

    /// The helper was reaped with this status.
    pub fn handle_exit(&mut self, now: Instant, status: ExitStatus) -> Result<(), CallError> {
        self.handle(now, Input::Exited(status))
    }

    /// The helper can no longer be waited for (the process boundary was
    /// lost, e.g. waiting failed).
    pub fn handle_process_lost(&mut self, now: Instant) -> Result<(), CallError> {
        self.handle(now, Input::ProcessLost)
    }

    /// Writing an [`Action::Audit`] event failed (`error` says why). Before
    /// dispatch, with [`CallSettings::audit_fail_closed`] (the default), the
    /// call ends `failed_before_dispatch` and nothing is spawned: an action
    /// whose attempt is not on record does not run. Otherwise the
    /// failure is counted in the record's `audit_failures`.
    pub fn handle_audit_failed(&mut self, now: Instant, error: impl Into<String>) {
        let error = self.redacted(error.into());
        self.handle_infallible(now, Input::AuditFailed(error));
    }

    /// The helper's structured result arrived (parsed by the host from its
    /// intended channel, never from stderr). With
    /// [`ResultChannel::StdoutJson`] the call parses stdout itself; a result
    /// reported here too replaces the classification.
    pub fn handle_result(&mut self, now: Instant, result: ResultKind) -> Result<(), CallError> {
        self.handle(now, Input::Result(result))
    }

    /// A stop is requested. Valid in every state; ignored once terminal.
    pub fn handle_cancel(&mut self, now: Instant, reason: CancelReason) {
        self.handle_infallible(now, Input::Cancel(reason));
    }

    /// The client went away; the configured [`DisconnectPolicy`] applies.
    pub fn handle_client_disconnected(&mut self, now: Instant) {
        self.handle_infallible(now, Input::ClientDisconnected);
    }

    /// The host's debug grant, given (or replacing another) while the call
    /// is live. Valid in every state; ignored once terminal. Never a
    /// transition.
    ///
    /// If `grant` is active at `now`, the stderr budget becomes the larger
    /// of the call's normal budget and the grant's
    /// [`per_call_bytes`](DebugGrant::per_call_bytes) (a grant is never
    /// above the configured `debug_ceiling_bytes`: [`DebugGrant::new`]
    /// refuses it), until [`DebugGrant::until`]; the record says
    /// `debug: true` from now on, whatever happens next. What the raised
    /// budget keeps is exact (see [`StreamCapture::raise_budget`]): bytes
    /// already dropped stay dropped and counted, the retained window grows
    /// with the next bytes, the marker counts what was kept. The buffers
    /// grow from the process-wide pool as bytes come, so the pool never
    /// goes over its capacity (a full pool limits retention, as ever). The
    /// agent excerpt keeps its own cap (`excerpt_bytes`): it is clamped
    /// from the larger window, marker included.
    ///
    /// A grant that replaces the one the call is under sets the budget and
    /// the end anew (a smaller budget shrinks the window as the end of a
    /// grant does). A grant that has already ended at `now` is the end of
    /// the call's grant, if it is under one
    /// ([`handle_debug_revoked`](Self::handle_debug_revoked)), and
    /// otherwise changes nothing (the call was not touched).
    ///
    /// When the grant ends ([`Timer::DebugGrantEnd`]) or is revoked while
    /// the call runs, the retained stderr shrinks back to the normal budget
    /// at once, keeping the bytes the mode keeps (the newest for `tail`),
    /// and the difference goes back to the pool; new bytes are retained
    /// under the normal budget; the record still says `debug: true`.
    ///
    /// ```
    /// use std::time::{Duration, Instant, SystemTime};
    /// use spillguard_core::{
    ///     Call, CallKind, CallSettings, CallSpec, Config, DebugGrant, RetentionPool,
    /// };
    ///
    /// let config = Config::default();
    /// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    /// let spec = CallSpec {
    ///     call_id: "c_long".into(),
    ///     session_id: "s_1".into(),
    ///     kind: CallKind::Action,
    ///     action: "build".into(),
    ///     target: "ci".into(),
    ///     summary: "make".into(),
    ///     card_lines: Vec::new(),
    /// };
    /// let t0 = Instant::now();
    /// let mut call = Call::new(spec, CallSettings::action(&config), &pool, t0, SystemTime::UNIX_EPOCH);
    /// call.handle_validated(t0, false)?;
    /// while call.poll_action().is_some() {}
    /// call.handle_spawned(t0, 4242)?;
    /// call.handle_stderr(t0, &[b'x'; 20_000]);
    /// assert_eq!(call.stderr().map(|c| c.bytes_retained()), Some(16_384));
    ///
    /// // Debug is granted at 1 s for 60 s, 65536 bytes per call.
    /// let t1 = t0 + Duration::from_secs(1);
    /// let grant = DebugGrant::new(&config, t1, Duration::from_secs(60), 65_536)?;
    /// call.handle_debug_grant(t1, &grant);
    /// call.handle_stderr(t1, &[b'y'; 30_000]);
    /// assert_eq!(call.stderr().map(|c| c.bytes_retained()), Some(46_384));
    /// assert_eq!(call.poll_timeout(), Some(t1 + Duration::from_secs(60)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`StreamCapture::raise_budget`]: crate::StreamCapture::raise_budget
    pub fn handle_debug_grant(&mut self, now: Instant, grant: &DebugGrant) {
        self.handle_infallible(now, Input::DebugGranted(*grant));
    }

    /// The host revoked its debug grant while the call is live: if the
    /// call is under a grant, it ends now, exactly as at its end (the
    /// retained stderr shrinks back to the normal budget, the difference
    /// goes back to the pool, the record still says `debug: true`).
    /// Otherwise nothing changes. Valid in every state; ignored once
    /// terminal. Never a transition.
    pub fn handle_debug_revoked(&mut self, now: Instant) {
        self.handle_infallible(now, Input::DebugRevoked);
    }

    /// The next action to carry out, until `None`.
    #[must_use = "every action must be carried out"]
    pub fn poll_action(&mut self) -> Option<Action> {
        let action = self.actions.pop_front()?;
        if let Action::Spawn = action {
            self.spawn_in_flight = true;
        }
        Some(action)
    }

    /// Whether [`poll_action`](Self::poll_action) has something to give.
    ///
    /// For a driver that feeds chunks from another thread than the one
    /// carrying out actions: after a `handle_*` call, `true` where it was
    /// `false` before means the actor must be woken.
    ///
    /// ```
    /// # use std::time::{Instant, SystemTime};
    /// # use spillguard_core::{Call, CallKind, CallSettings, CallSpec, Config, RetentionPool};
    /// let config = Config::default();
    /// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    /// let spec = CallSpec {
    ///     call_id: "c_1".into(),
    ///     session_id: "s_1".into(),
    ///     kind: CallKind::Action,
    ///     action: "lint".into(),
    ///     target: "src/".into(),
    ///     summary: "cargo clippy".into(),
    ///     card_lines: Vec::new(),
    /// };
    /// let t0 = Instant::now();
    /// let mut call = Call::new(spec, CallSettings::action(&config), &pool, t0, SystemTime::UNIX_EPOCH);
    /// assert!(!call.has_pending_actions());
    /// call.handle_validated(t0, false)?;
    /// assert!(call.has_pending_actions());
    /// while call.poll_action().is_some() {}
    /// call.handle_spawned(t0, 4242)?;
    /// while call.poll_action().is_some() {}
    /// // Bytes below the kill ceiling ask for nothing: no need to wake anyone.
    /// call.handle_stderr(t0, b"warning: slow link\n");
    /// assert!(!call.has_pending_actions());
    /// # Ok::<(), spillguard_core::CallError>(())
    /// ```
    pub fn has_pending_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    #[must_use = "the driver must wake up at this instant"]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Fires every timer due at `now`. A no-op when called early.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.advance(now);
        while let Some(timer) = self.timers.take_due(now) {
            self.handle_infallible(now, Input::Timeout(timer));
        }
    }

    fn advance(&mut self, now: Instant) -> Instant {
        // A driver's clock never runs backwards here.
        self.last_now = self.last_now.max(now);
        self.last_now
    }

    fn handle(&mut self, now: Instant, input: Input) -> Result<(), CallError> {
        let now = self.advance(now);
        transitions::apply(self, now, input)
    }

    fn handle_infallible(&mut self, now: Instant, input: Input) {
        let now = self.advance(now);
        // Cancels, disconnects and timeouts are valid in every state.
        let outcome = transitions::apply(self, now, input);
        debug_assert!(outcome.is_ok(), "{outcome:?}");
    }

    /// `text` redacted by this call's rules: every string the call keeps
    /// for its record and audit events passes through here.
    fn redacted(&self, text: String) -> String {
        self.settings.stderr.redactor.redact_text(&text)
    }

    pub(crate) fn offset_us(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.received).as_micros()).unwrap_or(u64::MAX)
    }
}

/// The spec with its text redacted (action, target, summary): the card,
/// the record and the audit events are built from it. The ids are the
/// host's keys and stay as given.
fn redacted_spec(spec: CallSpec, redactor: &Redactor) -> CallSpec {
    CallSpec {
        action: redactor.redact_text(&spec.action),
        target: redactor.redact_text(&spec.target),
        summary: redactor.redact_text(&spec.summary),
        card_lines: spec
            .card_lines
            .iter()
            .map(|(label, value)| (redactor.redact_text(label), redactor.redact_text(value)))
            .collect(),
        ..spec
    }
}

/// `text` with every character that could hide, add or reorder what a
/// reader sees written as an escape: control characters (`\n`, `\t`,
/// `\u{1b}`), the line and paragraph separators (`\u{2028}`,
/// `\u{2029}`), zero-width and byte-order marks (`\u{200b}`–`\u{200d}`,
/// `\u{2060}`, `\u{feff}`, `\u{00ad}`) and the bidirectional formatting
/// characters (`\u{061c}`, `\u{200e}`, `\u{200f}`, `\u{202a}`–`\u{202e}`,
/// `\u{2066}`–`\u{2069}`). Everything else is kept as it is.
///
/// ```
/// assert_eq!(
///     spillguard_core::visible("web-3\u{2028}target: prod\u{202e}"),
///     "web-3\\u{2028}target: prod\\u{202e}"
/// );
/// ```
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let invisible = matches!(
            c,
            '\u{00ad}'
                | '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        );
        if invisible {
            out.extend(c.escape_unicode());
        } else if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The text of an approval card with these `label: value` lines (each
/// made [`visible`]) and its expiry line, as [`ApprovalCard::text`] is
/// built from the call's redacted [`CallSpec::card_lines`].
///
/// ```
/// use std::time::Duration;
/// let lines = [("tool".to_owned(), "restart".to_owned()), ("target".to_owned(), "web-3\nprod".to_owned())];
/// assert_eq!(
///     spillguard_core::card_text(&lines, Duration::from_secs(60)),
///     "tool: restart\ntarget: web-3\\nprod\napproval expires: 60000 ms after it is shown"
/// );
/// ```
pub fn card_text(lines: &[(String, String)], expires_in: Duration) -> String {
    let mut text = String::new();
    for (label, value) in lines {
        text.push_str(&visible(label));
        text.push_str(": ");
        text.push_str(&visible(value));
        text.push('\n');
    }
    text.push_str(&format!(
        "approval expires: {} ms after it is shown",
        expires_in.as_millis()
    ));
    text
}

/// The approval card's text for the call's (redacted) spec.
pub(crate) fn spec_card_text(spec: &CallSpec, expires_in: Duration) -> String {
    if spec.card_lines.is_empty() {
        let defaults = [
            ("action".to_owned(), spec.action.clone()),
            ("target".to_owned(), spec.target.clone()),
            ("summary".to_owned(), spec.summary.clone()),
        ];
        card_text(&defaults, expires_in)
    } else {
        card_text(&spec.card_lines, expires_in)
    }
}
