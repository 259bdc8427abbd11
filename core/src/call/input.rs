//! What a driver reports to a call (the inputs of the transition table),
//! where a dispatched helper's stop sequence stands, and [`CallError`],
//! the refusal of an input that does not fit the state.

use std::fmt;
use std::io;

#[cfg(doc)]
use super::Call;
use super::{CancelReason, ExitStatus, ResultKind, State, Timer};
use crate::config::DebugGrant;

/// Caller misuse: a `handle_*` input that does not fit the call's live
/// state. The call is unchanged: its state, timers, counters, record
/// fields and queued actions are as they were before the input.
///
/// When each variant occurs:
///
/// * [`InvalidTransition`](Self::InvalidTransition): the call is live and
///   the transition table has no row for the input in its state, e.g.
///   [`handle_spawned`](Call::handle_spawned) before the driver polled
///   [`Action::Spawn`](crate::Action::Spawn) (or a second time),
///   [`handle_approval_granted`](Call::handle_approval_granted) while not
///   `awaiting_approval`, [`handle_admitted`](Call::handle_admitted)
///   outside `queued`, a second [`handle_exit`](Call::handle_exit), an
///   end-of-file reported twice for a captured stream, or
///   [`handle_validated`](Call::handle_validated) after validation.
/// * [`DiscoveryNeedsApproval`](Self::DiscoveryNeedsApproval):
///   [`handle_validated`](Call::handle_validated) with `needs_approval`
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
/// use spillguard_core::{
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
/// call.handle_validated(t0, true)?;
/// assert_eq!(call.state(), State::AwaitingApproval);
///
/// // Misuse: nothing was handed out to spawn. Refused, nothing changes.
/// let refused = call.handle_spawned(t0, 4242).unwrap_err();
/// assert_eq!(
///     refused,
///     CallError::InvalidTransition { state: State::AwaitingApproval, input: "spawned" }
/// );
/// assert_eq!(call.state(), State::AwaitingApproval);
///
/// // Terminal: every later input is absorbed with `Ok`.
/// call.handle_cancel(t0, CancelReason::Requested);
/// assert_eq!(call.state(), State::CancelledBeforeDispatch);
/// assert_eq!(call.handle_spawned(t0, 4242), Ok(()));
/// assert_eq!(call.handle_exit(t0, ExitStatus::code(0)), Ok(()));
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
