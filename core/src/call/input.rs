//! What a driver reports to a call (the inputs of the transition table),
//! where a dispatched helper's stop sequence stands, and [`CallError`],
//! the refusal of an input that does not fit the state.

use std::fmt;
use std::io;

#[cfg(doc)]
use super::Call;
use super::{CancelReason, ExitStatus, ResultKind, State, Timer};
use crate::config::DebugGrant;

/// Caller misuse: a input to `Call::handle` that does not fit the call's live
/// state. The call is unchanged: its state, timers, counters, record
/// fields and queued actions are as they were before the input.
///
/// When each variant occurs:
///
/// * [`InvalidTransition`](Self::InvalidTransition): the call is live and
///   the transition table has no row for the input in its state, e.g.
///   [`Input::Spawned`](crate::Input::Spawned) before the driver polled
///   [`Action::Spawn`](crate::Action::Spawn) (or a second time),
///   [`Input::ApprovalGranted`](crate::Input::ApprovalGranted) while not
///   `awaiting_approval`, [`Input::Admitted`](crate::Input::Admitted)
///   outside `queued`, a second [`Input::Exited`](crate::Input::Exited), an
///   end-of-file reported twice for a captured stream, or
///   [`Input::Validated`](crate::Input::Validated) after validation.
/// * [`DiscoveryNeedsApproval`](Self::DiscoveryNeedsApproval):
///   [`Input::Validated`](crate::Input::Validated) with `needs_approval`
///   on a discovery call.
///
/// Never an error:
///
/// * **Any input once the call is terminal.** A terminal state absorbs
///   every later input with `Ok(())` and changes nothing (a failed audit
///   write is still counted in the outcome not yet polled).
/// * What the helper, the approver or the clock did (an exit, a denial, an
///   expired card, a malformed result): those are outcomes in the record.
///
/// ```
/// use std::time::{Instant, SystemTime};
/// use spillguard_core::{Input,
///     Call, CallError, CallKind, CallSettings, CallSpec, CancelReason, Config, ExitStatus,
///     RetentionPool, State,
/// };
///
/// let config = Config::default();
/// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
/// let spec = CallSpec {
///     call_id: "c_1".into(),
///     session_id: "s_1".into(),
///     kind: CallKind::Action,
///     action: "build".into(),
///     target: "ci".into(),
///     summary: "make".into(),
///     card_lines: Vec::new(),
/// };
/// let t0 = Instant::now();
/// let mut call = Call::new(spec, CallSettings::action(&config), &pool, t0, SystemTime::UNIX_EPOCH);
/// call.handle(t0, Input::Validated { needs_approval: true })?;
/// assert_eq!(call.state(), State::AwaitingApproval);
///
/// // Misuse: nothing was handed out to spawn. Refused, nothing changes.
/// let refused = call.handle(t0, Input::Spawned { pid: 4242 }).unwrap_err();
/// assert_eq!(
///     refused,
///     CallError::InvalidTransition { state: State::AwaitingApproval, input: "spawned" }
/// );
/// assert_eq!(call.state(), State::AwaitingApproval);
///
/// // Terminal: every later input is absorbed with `Ok`.
/// call.handle(t0, Input::Cancel(CancelReason::Requested));
/// assert_eq!(call.state(), State::CancelledBeforeDispatch);
/// assert_eq!(call.handle(t0, Input::Spawned { pid: 4242 }), Ok(()));
/// assert_eq!(call.handle(t0, Input::Exited(ExitStatus::code(0))), Ok(()));
/// assert_eq!(call.state(), State::CancelledBeforeDispatch);
/// # Ok::<(), CallError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// The call is live and no transition exists for this input in its
    /// state.
    InvalidTransition {
        /// The state the call is in.
        state: State,
        /// The input that was refused.
        input: &'static str,
    },
    /// A discovery call was validated as needing approval; discovery never
    /// acts, so it never asks. The call stays in `received`.
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

/// Everything a driver tells a call, each at an instant it passes with it
/// ([`Call::handle`]): what happened to the call (validation, approval,
/// the spawn, the helper's streams and exit, a cancel, time passing) and
/// what it counts (the helper's bytes, what the driver forwarded,
/// enforced and measured).
///
/// An input that does not fit the call's live state is refused with a
/// [`CallError`] and changes nothing; once the call is terminal every
/// input is absorbed with `Ok(())`. The inputs that never cause a
/// transition (the bytes and counts) are ignored once the call is
/// terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input<'a> {
    /// The request was validated; `needs_approval`: an action shows its
    /// card and waits (a discovery call never asks).
    Validated {
        /// Whether the action waits for the approver.
        needs_approval: bool,
    },
    /// The request is invalid, for this reason (redacted into the
    /// record); the call ends `failed_before_dispatch`.
    ValidationFailed(String),
    /// The approval card reached the approver: its deadline counts from
    /// now.
    CardDelivered,
    /// The driver admits the queued call: it may spawn now.
    Admitted,
    /// The approver said yes.
    ApprovalGranted,
    /// The approver said no.
    ApprovalDenied,
    /// The approver gave no approval, for this reason (an elicitation
    /// declined, cancelled, or an approver that failed).
    ApprovalDeclined(String),
    /// The helper was spawned (after [`Action::Spawn`](crate::Action::Spawn)).
    Spawned {
        /// Its pid (its process group id too).
        pid: u32,
    },
    /// The spawn failed: the call ends `failed_before_dispatch`.
    SpawnFailed {
        /// The OS error's kind.
        kind: io::ErrorKind,
        /// What failed, redacted into the record.
        message: String,
    },
    /// A streamed call's caller has finished sending (closed the helper's
    /// stdin).
    InputEnded,
    /// The helper's stdout ended (end-of-file), or a streamed call's
    /// caller read it to the end.
    StdoutEof,
    /// The helper's stderr ended.
    StderrEof,
    /// The helper was reaped with this status.
    Exited(ExitStatus),
    /// Waiting for the helper failed: its end cannot be known.
    ProcessLost,
    /// An audit write failed (counted; redacted).
    AuditFailed(String),
    /// The helper's result, as the result channel read it.
    Result(ResultKind),
    /// Stop the call, for this reason.
    Cancel(CancelReason),
    /// The caller went away without the outcome.
    ClientDisconnected,
    /// A debug grant raises the stderr budget.
    DebugGranted(DebugGrant),
    /// The debug grant was revoked.
    DebugRevoked,
    /// Time passed: the timers due by the instant fire (see
    /// [`Call::poll_timeout`]).
    Timeout,
    /// The capacity of the helper's pipes, as the driver set or read it.
    PipeCapacity(Option<u64>),
    /// What the driver enforced of the call's confinement, at spawn.
    Enforcement(crate::Enforcement),
    /// What the driver measured of the helper's tree, at its exit.
    TreeReport(crate::TreeReport),
    /// Bytes the helper wrote to stderr.
    Stderr(&'a [u8]),
    /// Bytes the helper wrote to a captured stdout.
    Stdout(&'a [u8]),
    /// Bytes of a streamed stdout the driver handed to the caller.
    StdoutForwarded(u64),
    /// Bytes the driver wrote to a streamed helper's stdin.
    StdinForwarded(u64),
    /// Bytes for a streamed helper's stdin that never reached it.
    StdinUndelivered(u64),
    /// Bytes of a streamed MCP server's stdout that are not protocol, for
    /// the stderr capture.
    StdoutDiverted(crate::jsonrpc::Diverted<'a>),
}

/// Inputs to the transition table. Bytes are not inputs: they never cause
/// a transition (the opt-in kill ceiling becomes an explicit `Cancel`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
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

impl Event {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Event::Validated { .. } => "validated",
            Event::ValidationFailed(_) => "validation_failed",
            Event::ApprovalGranted => "approval_granted",
            Event::ApprovalDenied => "approval_denied",
            Event::Spawned { .. } => "spawned",
            Event::SpawnFailed(..) => "spawn_failed",
            Event::StdoutEof => "stdout_eof",
            Event::StderrEof => "stderr_eof",
            Event::Exited(_) => "exited",
            Event::ProcessLost => "process_lost",
            Event::AuditFailed(_) => "audit_failed",
            Event::Cancel(_) => "cancel",
            Event::ClientDisconnected => "client_disconnected",
            Event::Result(_) => "result",
            Event::CallerDone => "input_ended",
            Event::DebugGranted(_) => "debug_granted",
            Event::DebugRevoked => "debug_revoked",
            Event::CardDelivered => "card_delivered",
            Event::Admitted => "admitted",
            Event::Timeout(_) => "timeout",
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
