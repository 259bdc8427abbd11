//! Every transition of a call, in one place.
//!
//! [`apply`] is one `match (state, input)`: each arm is a row of the table.
//! A pair with no row is a caller error that names both and changes
//! nothing; a terminal state absorbs every input. [`TRANSITIONS`] lists the
//! edges the table can take, so that the diagram in `ARCHITECTURE.md` can be
//! checked against it.

use std::time::Instant;

use super::{
    Action, ApprovalCard, ApprovalDecision, AuditEvent, AuditKind, Call, CallError, CallKind,
    CallRecord, CancelReason, DisconnectPolicy, Input, Outcome, ResultKind, Signal, SignalMark,
    State, StateMark, Stop, StreamEnd, Timer, rfc3339,
};
use crate::redact::StreamRedactions;

/// Every edge of the lifecycle: (from, cause, to). The causes after
/// `dispatched` are the precedence rules (see `ARCHITECTURE.md`).
pub const TRANSITIONS: &[(State, &str, State)] = &[
    (State::Received, "validated", State::Validated),
    (
        State::Received,
        "validation_failed",
        State::FailedBeforeDispatch,
    ),
    (State::Received, "cancel", State::CancelledBeforeDispatch),
    (
        State::Validated,
        "approval required",
        State::AwaitingApproval,
    ),
    (State::Validated, "no approval required", State::Authorized),
    (
        State::AwaitingApproval,
        "approval_granted",
        State::Authorized,
    ),
    (State::AwaitingApproval, "approval_denied", State::Denied),
    (
        State::AwaitingApproval,
        "approval deadline",
        State::ApprovalExpired,
    ),
    (
        State::AwaitingApproval,
        "cancel",
        State::CancelledBeforeDispatch,
    ),
    (State::Authorized, "spawned", State::Dispatched),
    (
        State::Authorized,
        "spawn_failed",
        State::FailedBeforeDispatch,
    ),
    (State::Authorized, "cancel", State::CancelledBeforeDispatch),
    (
        State::AwaitingApproval,
        "audit_failed",
        State::FailedBeforeDispatch,
    ),
    (
        State::Authorized,
        "audit_failed",
        State::FailedBeforeDispatch,
    ),
    (State::Dispatched, "exit 0", State::Completed),
    (State::Dispatched, "remote failure", State::FailedRemote),
    (
        State::Dispatched,
        "exit non-zero or signal",
        State::FailedLocal,
    ),
    (
        State::Dispatched,
        "stopped within grace",
        State::CancelledAfterDispatch,
    ),
    (State::Dispatched, "stopped by KILL", State::Killed),
    (State::Dispatched, "never reaped", State::Unknown),
];

/// Applies one input. See the module docs.
pub(crate) fn apply(call: &mut Call, now: Instant, input: Input) -> Result<(), CallError> {
    use State::*;
    match (call.state, input) {
        (state, _) if state.is_terminal() => {}

        (Received, Input::Validated { needs_approval }) => {
            if needs_approval && call.spec.kind == CallKind::Discovery {
                return Err(CallError::DiscoveryNeedsApproval);
            }
            enter(call, now, Validated);
            if call.spec.kind == CallKind::Action {
                audit(
                    call,
                    now,
                    AuditKind::Attempt {
                        kind: call.spec.kind,
                        action: call.spec.action.clone(),
                        target: call.spec.target.clone(),
                    },
                );
            }
            if needs_approval {
                show_card(call, now);
            } else {
                call.approval = ApprovalDecision::NotRequired;
                authorize(call, now);
            }
        }
        (Received, Input::ValidationFailed(reason)) => {
            call.failure = Some(reason);
            end(call, now, FailedBeforeDispatch);
        }
        (AwaitingApproval | Authorized, Input::AuditFailed(error))
            if call.settings.audit_fail_closed && !call.spawn_in_flight =>
        {
            call.audit_failures += 1;
            call.failure = Some(format!("audit log: {error}"));
            end(call, now, FailedBeforeDispatch);
        }
        (_, Input::AuditFailed(_)) => call.audit_failures += 1,
        (Received | Validated | AwaitingApproval, Input::Cancel(reason)) => {
            call.cancel_reason = Some(reason);
            call.cancel_offset_us = Some(call.offset_us(now));
            end(call, now, CancelledBeforeDispatch);
        }

        (AwaitingApproval, Input::ApprovalGranted) => {
            call.timers.stop(Timer::ApprovalDeadline);
            call.approval = ApprovalDecision::Granted;
            authorize(call, now);
        }
        (AwaitingApproval, Input::ApprovalDenied) => {
            call.approval = ApprovalDecision::Denied;
            end(call, now, Denied);
        }
        (AwaitingApproval, Input::Timeout(Timer::ApprovalDeadline)) => {
            call.approval = ApprovalDecision::Expired;
            end(call, now, ApprovalExpired);
        }

        (Authorized, Input::Cancel(reason)) => {
            call.cancel_reason.get_or_insert(reason);
            call.cancel_offset_us.get_or_insert(call.offset_us(now));
            let queued = call.actions.iter().position(|a| matches!(a, Action::Spawn));
            if let Some(index) = queued {
                // The spawn was never handed out: nothing will run.
                call.actions.remove(index);
                end(call, now, CancelledBeforeDispatch);
            } else {
                // The driver is spawning right now; stop it once it reports.
                call.pending_cancel = Some(reason);
            }
        }
        (Authorized, Input::Spawned { pid, pgid }) if call.spawn_in_flight => {
            call.pid = Some(pid);
            call.pgid = Some(pgid);
            call.stdout_open = true;
            call.stderr_open = true;
            enter(call, now, Dispatched);
            if let Some(deadline) = call.settings.deadline {
                call.timers.set_after(Timer::CallDeadline, now, deadline);
            }
            if let Some(reason) = call.pending_cancel.take() {
                request_stop(call, now, reason);
            }
        }
        (Authorized, Input::SpawnFailed(error)) if call.spawn_in_flight => {
            call.failure = Some(error);
            let state = if call.pending_cancel.is_some() {
                CancelledBeforeDispatch
            } else {
                FailedBeforeDispatch
            };
            end(call, now, state);
        }

        (Dispatched, Input::StdoutEof) if call.stdout_open => {
            call.stdout_open = false;
            stream_closed(call, now);
        }
        (Dispatched, Input::StderrEof) if call.stderr_open => {
            call.stderr_open = false;
            stream_closed(call, now);
        }
        (Dispatched, Input::Exited(status)) if call.exit.is_none() => {
            call.exit = Some(status);
            call.exited_offset_us = Some(call.offset_us(now));
            call.timers.stop(Timer::CallDeadline);
            if call.stdout_open || call.stderr_open {
                if call.stop == Stop::Running {
                    call.timers
                        .set_after(Timer::PostExitDrain, now, call.settings.post_exit_drain);
                }
            } else {
                finish(call, now);
            }
        }
        (Dispatched, Input::ProcessLost) if call.exit.is_none() => {
            call.process_lost = true;
            finish(call, now);
        }
        (Dispatched, Input::Result(result)) => {
            call.result = Some(result);
        }
        (Dispatched, Input::Cancel(reason)) => request_stop(call, now, reason),
        (Dispatched, Input::Timeout(Timer::CallDeadline)) => {
            request_stop(call, now, CancelReason::Deadline)
        }
        (Dispatched, Input::Timeout(Timer::PostExitDrain)) => {
            if !call.settings.signal_descendants {
                finish(call, now);
            } else if call.stop == Stop::Running {
                terminate(call, now);
            }
        }
        (Dispatched, Input::Timeout(Timer::ShutdownGrace)) => {
            // KILL was needed for the helper itself, not only descendants.
            call.kill_needed = call.exit.is_none();
            signal(call, now, Signal::Kill);
            call.stop = Stop::Killing;
            call.timers
                .set_after(Timer::KillWait, now, call.settings.kill_wait);
        }
        (Dispatched, Input::Timeout(Timer::KillWait)) => finish(call, now),

        (_, Input::Timeout(Timer::DebugGrantEnd)) => {
            let window = call.settings.debug_until;
            if let (Some(capture), Some(window)) = (call.stderr.as_mut(), window) {
                capture.shrink_budget(window.normal_budget);
            }
        }
        (_, Input::ClientDisconnected) => {
            call.client_disconnected = true;
            if call.settings.on_client_disconnect == DisconnectPolicy::Cancel {
                return apply(call, now, Input::Cancel(CancelReason::ClientDisconnected));
            }
        }
        // A timer disarmed by the transition that made it moot.
        (_, Input::Timeout(_)) => {}

        (state, input) => {
            return Err(CallError::InvalidTransition {
                state,
                input: input.name(),
            });
        }
    }
    Ok(())
}

fn enter(call: &mut Call, now: Instant, to: State) {
    let from = call.state;
    call.state = to;
    let offset_us = call.offset_us(now);
    call.timeline.push(StateMark {
        state: to,
        offset_us,
    });
    audit(call, now, AuditKind::Transition { from, to });
}

fn audit(call: &mut Call, now: Instant, kind: AuditKind) {
    let event = AuditEvent {
        call_id: call.spec.call_id.clone(),
        session_id: call.spec.session_id.clone(),
        offset_us: call.offset_us(now),
        kind,
    };
    call.actions.push_back(Action::Audit(event));
}

fn show_card(call: &mut Call, now: Instant) {
    // Fixed once, here; nothing else ever moves it (R3.4).
    call.timers
        .set_after(Timer::ApprovalDeadline, now, call.settings.approval_timeout);
    enter(call, now, State::AwaitingApproval);
    let card = ApprovalCard {
        call_id: call.spec.call_id.clone(),
        action: call.spec.action.clone(),
        target: call.spec.target.clone(),
        summary: call.spec.summary.clone(),
        expires_in: call.settings.approval_timeout,
    };
    call.actions.push_back(Action::ShowApprovalCard(card));
}

fn authorize(call: &mut Call, now: Instant) {
    enter(call, now, State::Authorized);
    call.actions.push_back(Action::Spawn);
}

fn signal(call: &mut Call, now: Instant, signal: Signal) {
    // After the direct child's exit, only descendants can receive it.
    if call.exit.is_some() {
        call.descendants_signalled = true;
    }
    if let Some(pgid) = call.pgid {
        call.actions.push_back(Action::SignalGroup { pgid, signal });
        let offset_us = call.offset_us(now);
        call.signals.push(SignalMark { signal, offset_us });
    }
}

/// SIGTERM to the group, grace timer armed.
fn terminate(call: &mut Call, now: Instant) {
    call.actions.push_back(Action::CloseStdin);
    signal(call, now, Signal::Term);
    call.stop = Stop::Terminating;
    call.timers.stop(Timer::PostExitDrain);
    call.timers
        .set_after(Timer::ShutdownGrace, now, call.settings.shutdown_grace);
}

/// A stop (cancel, deadline, kill ceiling, disconnect) after dispatch.
fn request_stop(call: &mut Call, now: Instant, reason: CancelReason) {
    if call.cancel_reason.is_none() {
        call.cancel_reason = Some(reason);
        call.cancel_offset_us = Some(call.offset_us(now));
    }
    if call.exit.is_none() {
        call.stop_before_exit = true;
    }
    call.timers.stop(Timer::CallDeadline);
    if call.stop == Stop::Running {
        terminate(call, now);
    }
}

fn stream_closed(call: &mut Call, now: Instant) {
    if call.stdout_open || call.stderr_open {
        return;
    }
    call.streams_closed_as = Some(if call.signals.is_empty() {
        StreamEnd::Eof
    } else if call.cancel_reason.is_some() {
        StreamEnd::ReaderCompletedAfterCancel
    } else {
        StreamEnd::ClosedAfterGroupSignalled
    });
    if call.exit.is_some() {
        finish(call, now);
    }
}

/// The terminal state of a dispatched call, by precedence: a stop requested
/// before the exit was observed wins (KILL needed → killed, else cancelled);
/// then a lost process; then the structured result; then the exit status.
fn ended_state(call: &Call) -> State {
    if call.stop_before_exit {
        if call.kill_needed {
            State::Killed
        } else {
            State::CancelledAfterDispatch
        }
    } else {
        match call.exit {
            None => State::Unknown,
            Some(_) if call.result == Some(ResultKind::RemoteFailure) => State::FailedRemote,
            Some(status) if status.success() => State::Completed,
            Some(_) => State::FailedLocal,
        }
    }
}

/// Ends a dispatched call: abandons open streams, enters the terminal state,
/// emits the final record and the outcome.
fn finish(call: &mut Call, now: Instant) {
    call.timers.stop_all();
    if call.stdout_open || call.stderr_open {
        call.abandoned = true;
        call.actions.push_back(Action::AbandonStreams);
    }
    let state = ended_state(call);
    end(call, now, state);
}

/// Enters a terminal state and emits the record: the last actions.
fn end(call: &mut Call, now: Instant, state: State) {
    call.timers.stop_all();
    // A call that ends before dispatch shows no card and spawns nothing.
    call.actions
        .retain(|a| !matches!(a, Action::Spawn | Action::ShowApprovalCard(_)));
    enter(call, now, state);
    let (Some(stderr), Some(stdout)) = (call.stderr.take(), call.stdout.take()) else {
        return;
    };
    let (stderr, stdout) = (stderr.finish(), stdout.finish());
    let stream_end = if call.pid.is_none() {
        StreamEnd::NotStarted
    } else if call.abandoned {
        StreamEnd::AbandonedOpen
    } else {
        call.streams_closed_as.unwrap_or(StreamEnd::AbandonedOpen)
    };
    let redactions = StreamRedactions {
        stderr: stderr.redactions(),
        stdout: stdout.redactions(),
    };
    let record = CallRecord {
        call_id: call.spec.call_id.clone(),
        session_id: call.spec.session_id.clone(),
        kind: call.spec.kind,
        action: call.spec.action.clone(),
        target: call.spec.target.clone(),
        approval: call.approval,
        state,
        cancel_reason: call.cancel_reason,
        exit_status: call.exit.and_then(|e| e.code),
        exit_signal: call.exit.and_then(|e| e.signal),
        stream_end,
        stderr_bytes_seen: stderr.bytes_seen(),
        stderr_bytes_retained: stderr.bytes_retained(),
        stderr_truncated: stderr.truncated(),
        stderr_retain: stderr.retain(),
        stderr_fingerprint: stderr.fingerprint(),
        stderr_retention_limited: stderr.retention_limited(),
        stdout_bytes_seen: stdout.bytes_seen(),
        stdout_bytes_retained: stdout.bytes_retained(),
        stderr_redactions: redactions.stderr.total(),
        stdout_redactions: redactions.stdout.total(),
        debug: stderr.debug(),
        descendants_signalled: call.descendants_signalled,
        client_disconnected: call.client_disconnected,
        on_client_disconnect: call
            .client_disconnected
            .then_some(call.settings.on_client_disconnect),
        result: call.result,
        failure: call.failure.clone(),
        audit_failures: call.audit_failures,
        pid: call.pid,
        pgid: call.pgid,
        pipe_capacity_bytes: call.pipe_capacity,
        received_at: rfc3339(call.received_at),
        timeline: call.timeline.clone(),
        signals: call.signals.clone(),
        cancel_offset_us: call.cancel_offset_us,
        exited_offset_us: call.exited_offset_us,
    };
    audit(call, now, AuditKind::Final(Box::new(record.clone())));
    call.actions.push_back(Action::Finished(Box::new(Outcome {
        record,
        stderr,
        stdout,
        excerpt_bytes: call.settings.excerpt_bytes,
        redactions,
    })));
}
