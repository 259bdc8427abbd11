//! What a driver reports to a call (the inputs of the transition table),
//! where a dispatched helper's stop sequence stands, and [`CallError`],
//! the refusal of an input that does not fit the state.

use std::fmt;
use std::io;

use super::{CancelReason, ExitStatus, ResultKind, State, Timer};
use crate::config::DebugGrant;
#[cfg(doc)]
use super::Call;

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
