//! The call record: plain data, built once from a terminal call, and the
//! enums it names ([`State`], [`StreamEnd`], [`ExitStatus`],
//! [`ResultKind`], …).
//!
//! **Field names are the JSON names, never renamed. The order of
//! [`State`]'s variants is part of the audit log's format. `exit_status`
//! and `exit_signal` are what was observed: both are null exactly when the
//! helper was never reaped.**

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::StdoutMode;
use crate::config::Retain;
use crate::confine::{LimitHit, Limits, Sandbox};
use crate::render::Fingerprint;

/// The lifecycle states of a call. `received`, `validated`,
/// `awaiting_approval`, `queued`, `authorized` and `dispatched` are live;
/// every other is terminal, and a call reaches exactly one of them.
///
/// The order of the variants is part of the audit log's format (postcard
/// writes a variant's index): new states are added at the end; [`State::ALL`]
/// gives them in lifecycle order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum State {
    /// The request arrived; nothing checked yet.
    Received,
    /// Target and parameters were checked; the attempt is on record.
    Validated,
    /// The approval card is shown; its deadline runs.
    AwaitingApproval,
    /// Approved (or no approval needed) and, under admission, admitted:
    /// the helper is about to be spawned.
    Authorized,
    /// The helper runs; from here the remote side may act.
    Dispatched,
    /// The helper exited 0 and reported no remote failure.
    Completed,
    /// The helper's structured result says the remote side failed.
    FailedRemote,
    /// The helper exited non-zero or by a signal, without a cancel.
    FailedLocal,
    /// Validation failed or the helper could not be spawned.
    FailedBeforeDispatch,
    /// The approver said no.
    Denied,
    /// The approval card expired.
    ApprovalExpired,
    /// Cancelled before anything was spawned.
    CancelledBeforeDispatch,
    /// Cancelled (or its deadline passed) after dispatch; the helper ended
    /// within the shutdown grace. The remote side may have acted.
    CancelledAfterDispatch,
    /// Stopped after dispatch and SIGKILL was needed to end the helper.
    Killed,
    /// The process boundary was lost: the helper was never reaped.
    Unknown,
    /// Authorized (approved, or no approval needed), and waiting for the
    /// driver to admit it: the driver runs at most so many calls at once
    /// ([`CallSettings::admission`](crate::CallSettings::admission)).
    /// Nothing is spawned yet; the queue timeout runs.
    Queued,
    /// Authorized, but never admitted to run before its queue timeout:
    /// the helper was never spawned, so nothing ran and the remote side
    /// cannot have acted (unlike every state after `dispatched`).
    QueueExpired,
}

impl State {
    /// Every state, live ones first.
    pub const ALL: [State; 17] = [
        State::Received,
        State::Validated,
        State::AwaitingApproval,
        State::Queued,
        State::Authorized,
        State::Dispatched,
        State::Completed,
        State::FailedRemote,
        State::FailedLocal,
        State::FailedBeforeDispatch,
        State::Denied,
        State::ApprovalExpired,
        State::QueueExpired,
        State::CancelledBeforeDispatch,
        State::CancelledAfterDispatch,
        State::Killed,
        State::Unknown,
    ];

    /// Whether the call has ended.
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            State::Received
                | State::Validated
                | State::AwaitingApproval
                | State::Queued
                | State::Authorized
                | State::Dispatched
        )
    }

    /// The name used in records and logs, e.g. `cancelled_after_dispatch`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Received => "received",
            State::Validated => "validated",
            State::AwaitingApproval => "awaiting_approval",
            State::Authorized => "authorized",
            State::Dispatched => "dispatched",
            State::Completed => "completed",
            State::FailedRemote => "failed_remote",
            State::FailedLocal => "failed_local",
            State::FailedBeforeDispatch => "failed_before_dispatch",
            State::Denied => "denied",
            State::ApprovalExpired => "approval_expired",
            State::CancelledBeforeDispatch => "cancelled_before_dispatch",
            State::CancelledAfterDispatch => "cancelled_after_dispatch",
            State::Killed => "killed",
            State::Unknown => "unknown",
            State::Queued => "queued",
            State::QueueExpired => "queue_expired",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a call acts or only looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallKind {
    /// May change something; may need approval; its attempt is audited first.
    Action,
    /// Looks something up; never needs approval and can never become an
    /// action.
    Discovery,
}

/// What happened to the approval of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalDecision {
    /// The call ended before approval was decided or asked for.
    Undecided,
    /// No approval was needed.
    NotRequired,
    /// The approver said yes.
    Granted,
    /// The approver said no.
    Denied,
    /// The card's deadline passed with no answer.
    Expired,
}

/// Why a running call was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CancelReason {
    /// The caller asked.
    Requested,
    /// The call's deadline passed.
    Deadline,
    /// The client went away and the policy is to cancel.
    ClientDisconnected,
    /// The helper wrote past the opt-in stderr kill ceiling.
    StderrCeiling,
    /// The host is shutting down and cancels every live call.
    HostShutdown,
    /// A streamed helper did not exit within `stdin_close_grace` after its
    /// input ended and its stdin was closed.
    StdinCloseGrace,
}

/// What the host does with a call whose client disconnected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DisconnectPolicy {
    /// Let the call run to its end and write its record (the default: the
    /// helper may already be acting, and its outcome should be known). A
    /// call still awaiting approval is cancelled before dispatch whatever
    /// the policy: nobody is left to answer its card.
    #[default]
    Finish,
    /// Cancel the call as if the caller had asked.
    Cancel,
}

/// How the helper's output streams ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamEnd {
    /// No helper was started, so there were no streams.
    NotStarted,
    /// Both streams reached end-of-file with no signal sent.
    Eof,
    /// Both streams reached end-of-file after a stop was requested and the
    /// process group was signalled.
    ReaderCompletedAfterCancel,
    /// The direct child had exited but a descendant held a stream open past
    /// the drain window; the group was signalled and the streams then closed.
    ClosedAfterGroupSignalled,
    /// The call stopped waiting with a stream still open; bytes read until
    /// then are kept.
    AbandonedOpen,
}

/// The exit of the helper as observed when it was reaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExitStatus {
    /// The exit code, if it exited normally.
    pub code: Option<i32>,
    /// The signal that ended it, if a signal did.
    pub signal: Option<i32>,
}

impl ExitStatus {
    /// A normal exit with `code`.
    pub fn code(code: i32) -> Self {
        Self {
            code: Some(code),
            signal: None,
        }
    }

    /// An exit by `signal`.
    pub fn signal(signal: i32) -> Self {
        Self {
            code: None,
            signal: Some(signal),
        }
    }

    /// Whether it exited normally with code 0.
    pub fn success(self) -> bool {
        self.code == Some(0)
    }
}

/// What the helper's structured result said. It arrives on the
/// helper's intended channel, parsed by the host; stderr is never parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResultKind {
    /// The action succeeded.
    Success,
    /// The remote side reported a failure.
    RemoteFailure,
}

impl ResultKind {
    /// The one convention for a JSON result, used unless the call's
    /// settings give their own classifier: a top-level object whose `ok`
    /// member is `false`, or whose `error` member is present and not
    /// `null`, is a [`RemoteFailure`](Self::RemoteFailure); any other
    /// value is a [`Success`](Self::Success).
    ///
    /// ```
    /// use serde_json::json;
    /// use spillguard_core::ResultKind;
    ///
    /// assert_eq!(ResultKind::of_json(&json!({"ok": false})), ResultKind::RemoteFailure);
    /// assert_eq!(ResultKind::of_json(&json!({"error": "quota"})), ResultKind::RemoteFailure);
    /// assert_eq!(ResultKind::of_json(&json!({"error": null, "ok": true})), ResultKind::Success);
    /// assert_eq!(ResultKind::of_json(&json!([false])), ResultKind::Success);
    /// ```
    pub fn of_json(value: &serde_json::Value) -> Self {
        let failed = value.as_object().is_some_and(|object| {
            object.get("ok") == Some(&serde_json::Value::Bool(false))
                || object.get("error").is_some_and(|e| !e.is_null())
        });
        if failed {
            ResultKind::RemoteFailure
        } else {
            ResultKind::Success
        }
    }
}

/// A signal the call asked to send to the helper's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Signal {
    /// SIGTERM: please stop.
    #[serde(rename = "TERM")]
    Term,
    /// SIGKILL: stop now.
    #[serde(rename = "KILL")]
    Kill,
}

impl Signal {
    /// The signal's number (POSIX: TERM is 15, KILL is 9).
    pub fn number(self) -> i32 {
        match self {
            Signal::Term => 15,
            Signal::Kill => 9,
        }
    }
}

/// When the call entered a state, as an offset from `received`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateMark {
    /// The state entered.
    pub state: State,
    /// Microseconds since the call was received.
    pub offset_us: u64,
}

/// When the call signalled the helper's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalMark {
    /// The signal sent.
    pub signal: Signal,
    /// Microseconds since the call was received.
    pub offset_us: u64,
}

/// The record of one call: lifecycle facts first, then diagnostics
/// metadata. Field names are the JSON names; never renamed.
///
/// The record carries counts, never retained text: the text (with its pool
/// lease) travels separately in [`Outcome`](crate::Outcome).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The call's id, given by the host.
    pub call_id: String,
    /// The agent session the call belongs to.
    pub session_id: String,
    /// Action or discovery.
    pub kind: CallKind,
    /// The action's name, e.g. `ssh.exec`.
    pub action: String,
    /// The target exactly as shown to the user.
    pub target: String,
    /// What happened to the approval.
    pub approval: ApprovalDecision,
    /// The terminal state.
    pub state: State,
    /// Why a stop was requested, if one was.
    pub cancel_reason: Option<CancelReason>,
    /// The exit code observed, or null.
    pub exit_status: Option<i32>,
    /// The signal that ended the helper, or null.
    pub exit_signal: Option<i32>,
    /// How the output streams ended.
    pub stream_end: StreamEnd,
    /// Every stderr byte read.
    pub stderr_bytes_seen: u64,
    /// Stderr bytes kept.
    pub stderr_bytes_retained: u64,
    /// Whether stderr bytes were dropped.
    pub stderr_truncated: bool,
    /// Retention mode of stderr.
    pub stderr_retain: Retain,
    /// Fingerprint of the retained stderr bytes, null if none.
    pub stderr_fingerprint: Option<Fingerprint>,
    /// Whether the process-wide pool made stderr keep less than its budget.
    pub stderr_retention_limited: bool,
    /// Every stdout byte read.
    pub stdout_bytes_seen: u64,
    /// Stdout bytes kept.
    pub stdout_bytes_retained: u64,
    /// Whether stdout bytes were dropped: stdout is retained head-first, so
    /// its first `stdout_bytes_retained` bytes are kept.
    #[serde(default)]
    pub stdout_truncated: bool,
    /// Who owned stdout: `captured` (the call) or `streamed` (the caller).
    #[serde(default)]
    pub stdout_mode: StdoutMode,
    /// Bytes of a streamed helper's stdout the adapter sent to the caller.
    #[serde(default)]
    pub stdout_bytes_forwarded: u64,
    /// Bytes from the caller the adapter wrote to a streamed helper's stdin.
    #[serde(default)]
    pub stdin_bytes_forwarded: u64,
    /// Bytes the caller sent that never reached a streamed helper's stdin:
    /// it had stopped reading, and they were dropped so that the caller's
    /// end could still be seen (see `spillguard stdio`).
    #[serde(default)]
    pub stdin_bytes_undelivered: u64,
    /// Lines of a streamed MCP server's stdout that were not protocol and
    /// went to the stderr capture instead of the caller.
    #[serde(default)]
    pub stdout_lines_diverted: u64,
    /// Bytes of those lines.
    #[serde(default)]
    pub stdout_bytes_diverted: u64,
    /// Secrets replaced in the rendered stderr (its whole retained text).
    #[serde(default)]
    pub stderr_redactions: u64,
    /// Secrets replaced in the rendered stdout.
    #[serde(default)]
    pub stdout_redactions: u64,
    /// Whether a debug grant raised this call's budgets.
    pub debug: bool,
    /// Whether the helper's process group was signalled because a
    /// descendant outlived the direct child holding a stream.
    pub descendants_signalled: bool,
    /// Whether the client disconnected during the call.
    pub client_disconnected: bool,
    /// The disconnect policy applied, when the client disconnected.
    pub on_client_disconnect: Option<DisconnectPolicy>,
    /// What the helper's result says of the call (`ok`, `remote_failure`,
    /// …), if the host reported one or the call parsed it from stdout: the
    /// classification, never the value (which is the outcome's, and
    /// `result` wherever a view shows it).
    pub result_kind: Option<ResultKind>,
    /// Why a call whose result comes on stdout as JSON has none: stdout
    /// exceeded its budget, was empty, was not valid JSON (`invalid JSON at
    /// line 1 column 5: expected value`), or never reached end-of-file.
    /// Null when there is a result or no such channel. The text never
    /// quotes the helper's output.
    #[serde(default)]
    pub result_error: Option<String>,
    /// Why the call failed before dispatch (validation, audit or spawn
    /// error).
    pub failure: Option<String>,
    /// The kind of OS error that kept the helper from being spawned, as a
    /// fixed snake_case name (`not_found`, `permission_denied`, …, `other`;
    /// see [`spawn_error_kind`](crate::spawn_error_kind)); null otherwise.
    #[serde(default)]
    pub spawn_error_kind: Option<String>,
    /// Audit events that could not be written.
    pub audit_failures: u64,
    /// The helper's process id, if spawned.
    pub pid: Option<u32>,
    /// The helper's process group id: its pid, as it leads its own group.
    pub pgid: Option<u32>,
    /// Capacity of the helper's output pipes after the adapter asked to
    /// enlarge them; null if it did not ask or the request failed.
    pub pipe_capacity_bytes: Option<u64>,
    /// Wall-clock time the call was received, RFC 3339 UTC.
    pub received_at: String,
    /// Every state entered, with its offset from `received`.
    pub timeline: Vec<StateMark>,
    /// Every signal sent to the group.
    pub signals: Vec<SignalMark>,
    /// Offset of the first stop request (cancel, deadline, ceiling).
    pub cancel_offset_us: Option<u64>,
    /// Offset at which the driver reported the approval card delivered to
    /// the approver ([`Input::CardDelivered`](crate::Input::CardDelivered)):
    /// the approval deadline ran from then. `None` when it never did (no
    /// card, or a driver that shows cards synchronously: the deadline ran
    /// from `awaiting_approval`).
    #[serde(default)]
    pub card_delivered_offset_us: Option<u64>,
    /// Offset at which the helper's exit was observed.
    pub exited_offset_us: Option<u64>,
    /// Offset at which the call entered `queued`: authorized, waiting for
    /// the driver's admission. `None` for a call that never waited there
    /// (no admission, or it ended before it was authorized).
    #[serde(default)]
    pub queued_offset_us: Option<u64>,
    /// Offset at which the driver admitted the queued call (it entered
    /// `authorized` and was handed to the spawn): its time in the queue is
    /// `admitted_offset_us - queued_offset_us`. `None` when it was never
    /// admitted (no admission, or it left the queue by its timeout or a
    /// cancel).
    #[serde(default)]
    pub admitted_offset_us: Option<u64>,
    /// The resource limits the call asked for (sizes in bytes); null when
    /// none.
    #[serde(default)]
    pub limits: Option<Limits>,
    /// The files and network the call restricted the helper to; null when
    /// nothing.
    #[serde(default)]
    pub sandbox: Option<Sandbox>,
    /// The mechanisms that enforced them: `cgroup-v2`, `cgroup-v1`,
    /// `rlimit`, `landlock-abi-N`, `netns`, `no-new-privs`.
    #[serde(default)]
    pub enforced: Vec<String>,
    /// One line per restriction asked and not enforced, with why (only
    /// when the caller allowed degraded mode).
    #[serde(default)]
    pub not_enforced: Vec<String>,
    /// What ended the helper's whole tree: `cgroup-v2`, `cgroup-v1` or
    /// `process-group` (a descendant that left the group not reached);
    /// null when the helper never ran.
    #[serde(default)]
    pub tree_kill: Option<String>,
    /// Which limit stopped or held back the tree: `memory` (an
    /// out-of-memory kill), `pids` (a fork refused), `cpu`, `file_size`;
    /// null otherwise.
    #[serde(default)]
    pub limit_hit: Option<LimitHit>,
    /// Most memory the tree held at once, when a control group measured
    /// it.
    #[serde(default)]
    pub tree_peak_memory_bytes: Option<u64>,
    /// Most processes the tree held at once, when a control group
    /// measured it.
    #[serde(default)]
    pub tree_peak_pids: Option<u64>,
    /// `received_at` in microseconds since the Unix epoch, for what needs
    /// more than its milliseconds (a span's start).
    #[serde(default)]
    pub received_at_unix_us: u64,
    /// The trace the call's span belongs to (32 hex digits), when the call
    /// has one: a request named a `traceparent`, or the host starts a
    /// trace per call.
    #[serde(default)]
    pub trace_id: Option<String>,
    /// The call's span (16 hex digits), the parent the helper is given in
    /// `TRACEPARENT`.
    #[serde(default)]
    pub span_id: Option<String>,
    /// The span the call's is a child of, when a request named one.
    #[serde(default)]
    pub parent_span_id: Option<String>,
}

impl CallRecord {
    /// The record as one line of JSON.
    pub fn to_json(&self) -> String {
        // Plain data with string keys and no maps: serialisation cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// When the call entered `state`, if it did.
    pub fn offset_of(&self, state: State) -> Option<Duration> {
        self.timeline
            .iter()
            .find(|m| m.state == state)
            .map(|m| Duration::from_micros(m.offset_us))
    }
}

/// Formats a wall-clock instant as RFC 3339 UTC with milliseconds, e.g.
/// `2026-11-30T04:06:33.123Z`. Instants before 1970 are written as the epoch.
pub fn rfc3339(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// `at` in microseconds since the Unix epoch (0 before it).
pub(crate) fn unix_us(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
    })
}

/// Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_011_593_123);
        assert_eq!(rfc3339(t), "2026-11-30T04:06:33.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }
}
