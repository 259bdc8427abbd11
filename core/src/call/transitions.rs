//! Every transition of a call, in one place.
//!
//! [`apply`] is one `match (state, input)`: each arm is a row of the table.
//! A pair with no row is a caller error that names both and changes
//! nothing; a terminal state absorbs every input with `Ok` (a failed audit write is
//! still counted, in the outcome not yet taken too). [`TRANSITIONS`] lists the
//! edges the table can take; the lifecycle diagram in `ARCHITECTURE.md` is
//! checked against it (`tests/tests/diagram.rs`).
//!
//! # What the table decides
//!
//! **Before dispatch.** A discovery call never needs approval (asking is
//! [`CallError::DiscoveryNeedsApproval`]) and its kind never changes. A
//! client disconnect while the card is shown (or the call is queued) ends
//! the call `cancelled_before_dispatch`, reason `client_disconnected`,
//! under either disconnect policy: whoever could answer the card went
//! away, and nothing runs yet. A cancel while the spawn is in flight waits
//! for the spawn report, then stops the helper.
//!
//! **The input's end.** A streamed call's input end that comes before
//! dispatch is kept and closes stdin at dispatch; for a streamed helper
//! still running it starts the stdin close grace before TERM, and a stop
//! during that grace keeps it. A captured call's input end only closes
//! stdin.
//!
//! **The result.** With [`ResultChannel::StdoutJson`], the JSON result is
//! parsed at stdout's end-of-file from the stdout retained head-first
//! within its own budget (default 1 MiB). An overflowed, empty, blank,
//! invalid or never-ended stdout yields no result and a `result_error`,
//! and the exit decides. Stderr is never parsed: a clean stderr never
//! implies success, and a stderr overflow never hides a result.
//!
//! **After the exit.** When the child has exited but a stream stays open,
//! the group gets TERM after `post_exit_drain` (250 ms) while the streams
//! are still read (`closed_after_group_signalled` if they then close),
//! KILL one `escapee_wait` later, and the streams are given up one more
//! `escapee_wait` later; with `signal_descendants: false` the streams are
//! abandoned at the end of the drain window instead. `descendants_signalled`
//! says whether a signal went out after the exit. An exit observed during
//! a stop's grace or kill wait pulls that timer in to exit +
//! `escapee_wait`: the grace and the kill wait are for a live helper that
//! may be cleaning up. A streamed call's stdout end is the caller's
//! report, awaited after the exit like a stream a descendant holds (at
//! most the drain window, then as above); a second report changes nothing,
//! and a client disconnect ends that wait at once.

use std::time::Instant;

use super::exit::parse_result;
use super::input::{Event, Stop};
use super::{
    Action, Admission, ApprovalCard, ApprovalDecision, AuditEvent, AuditKind, Call, CallError,
    CallKind, CallRecord, CancelReason, DebugWindow, DisconnectPolicy, Outcome, ResultChannel,
    ResultKind, Signal, SignalMark, State, StateMark, StdoutMode, StreamEnd, Timer, rfc3339,
    unix_us,
};
use crate::capture::to_usize;
use crate::config::DebugGrant;
use crate::confine::LimitHit;
use crate::redact::StreamRedactions;
use crate::trace::hex;

/// Every edge of the lifecycle: (from, cause, to). The causes after
/// `dispatched` are decided by precedence when events race (see
/// [`Call`](crate::Call): a stop before the exit, then a lost process, then
/// the result, then the exit status). The edges through `queued` are taken
/// only under
/// [`Admission::Queued`](super::Admission::Queued).
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
    (
        State::Validated,
        "no approval required, admission on",
        State::Queued,
    ),
    (
        State::AwaitingApproval,
        "approval_granted, admission on",
        State::Queued,
    ),
    (State::Queued, "admitted", State::Authorized),
    (State::Queued, "queue deadline", State::QueueExpired),
    (State::Queued, "cancel", State::CancelledBeforeDispatch),
    (State::Queued, "audit_failed", State::FailedBeforeDispatch),
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
    (
        State::Dispatched,
        "no exit within stdin_close_grace",
        State::CancelledAfterDispatch,
    ),
    (State::Dispatched, "stopped by KILL", State::Killed),
    (State::Dispatched, "never reaped", State::Unknown),
];

/// Applies one input. See the module docs.
pub(crate) fn apply(call: &mut Call, now: Instant, input: Event) -> Result<(), CallError> {
    use State::*;
    match (call.state, input) {
        (state, Event::AuditFailed(_)) if state.is_terminal() => {
            // The final record's own write failed: the outcome not yet
            // taken counts it (the log's copy cannot).
            call.audit_failures += 1;
            for action in &mut call.actions {
                if let Action::Finished(outcome) = action {
                    outcome.record.audit_failures = call.audit_failures;
                }
            }
        }
        (state, _) if state.is_terminal() => {}

        (Received, Event::Validated { needs_approval }) => {
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
        (Received, Event::ValidationFailed(reason)) => {
            call.failure = Some(reason);
            end(call, now, FailedBeforeDispatch);
        }
        (AwaitingApproval | Queued | Authorized, Event::AuditFailed(error))
            if call.settings.audit_fail_closed && !call.spawn_in_flight =>
        {
            call.audit_failures += 1;
            call.failure = Some(format!("audit log: {error}"));
            end(call, now, FailedBeforeDispatch);
        }
        (_, Event::AuditFailed(_)) => call.audit_failures += 1,
        (Received | Validated | AwaitingApproval | Queued, Event::Cancel(reason)) => {
            call.cancel_reason = Some(reason);
            call.cancel_offset_us = Some(call.offset_us(now));
            end(call, now, CancelledBeforeDispatch);
        }

        (AwaitingApproval, Event::ApprovalGranted) => {
            call.timers.stop(Timer::ApprovalDeadline);
            call.approval = ApprovalDecision::Granted;
            authorize(call, now);
        }
        (AwaitingApproval, Event::ApprovalDenied) => {
            call.approval = ApprovalDecision::Denied;
            end(call, now, Denied);
        }
        (AwaitingApproval, Event::CardDelivered) if call.card_delivered_offset_us.is_none() => {
            call.card_delivered_offset_us = Some(call.offset_us(now));
            if call.settings.deadline_from_delivery {
                // Fixed here, once: nothing moves it later, stderr least of
                // all.
                call.timers
                    .set_after(Timer::ApprovalDeadline, now, call.settings.approval_timeout);
            }
        }
        (_, Event::CardDelivered) => {}
        (AwaitingApproval, Event::Timeout(Timer::ApprovalDeadline)) => {
            call.approval = ApprovalDecision::Expired;
            end(call, now, ApprovalExpired);
        }

        (Queued, Event::Admitted) => {
            call.timers.stop(Timer::QueueDeadline);
            call.admitted_offset_us = Some(call.offset_us(now));
            enter(call, now, Authorized);
            call.actions.push_back(Action::Spawn(call.spawn_order()));
        }
        (Queued, Event::Timeout(Timer::QueueDeadline)) => end(call, now, QueueExpired),

        (Authorized, Event::Cancel(reason)) => {
            call.cancel_reason.get_or_insert(reason);
            call.cancel_offset_us.get_or_insert(call.offset_us(now));
            let queued = call
                .actions
                .iter()
                .position(|a| matches!(a, Action::Spawn(_)));
            if let Some(index) = queued {
                // The spawn was never handed out: nothing will run.
                call.actions.remove(index);
                end(call, now, CancelledBeforeDispatch);
            } else {
                // The driver is spawning right now; stop it once it reports.
                call.pending_cancel = Some(reason);
            }
        }
        (Authorized, Event::Spawned { pid }) if call.spawn_in_flight => {
            // The helper leads its own process group.
            call.pid = Some(pid);
            call.pgid = Some(pid);
            // A streamed stdout is read by the caller, whose reader
            // reports its end: awaited like a captured one, so that what
            // the caller diverts or forwards before the end is counted.
            call.stdout_open = true;
            call.stderr_open = true;
            enter(call, now, Dispatched);
            if let Some(deadline) = call.settings.deadline {
                call.timers.set_after(Timer::CallDeadline, now, deadline);
            }
            if call.input_ended {
                close_stdin(call, now);
            }
            if let Some(reason) = call.pending_cancel.take() {
                request_stop(call, now, reason);
            }
        }
        (Authorized, Event::SpawnFailed(kind, error)) if call.spawn_in_flight => {
            call.failure = Some(error);
            call.spawn_error_kind = Some(super::spawn_error_kind(kind));
            let state = if call.pending_cancel.is_some() {
                CancelledBeforeDispatch
            } else {
                FailedBeforeDispatch
            };
            end(call, now, state);
        }

        (Dispatched, Event::StdoutEof) if call.stdout_open => {
            call.stdout_open = false;
            if call.settings.result == ResultChannel::StdoutJson {
                parse_result(call);
            }
            stream_closed(call, now);
        }
        // A caller's reader may report its end more than once (its end of
        // file, then its drop).
        (Dispatched, Event::StdoutEof) if call.settings.stdout_mode == StdoutMode::Streamed => {}
        (Dispatched, Event::StderrEof) if call.stderr_open => {
            call.stderr_open = false;
            stream_closed(call, now);
        }
        (Dispatched, Event::Exited(status)) if call.exit.is_none() => {
            call.exit = Some(status);
            call.exited_offset_us = Some(call.offset_us(now));
            call.timers.stop(Timer::CallDeadline);
            if call.stop == Stop::ClosingStdin {
                // It exited on its own once its stdin was closed.
                call.timers.stop(Timer::StdinCloseGrace);
                call.stop = Stop::Running;
            }
            if call.stdout_open || call.stderr_open {
                match call.stop {
                    Stop::Running | Stop::ClosingStdin => call.timers.set_after(
                        Timer::PostExitDrain,
                        now,
                        call.settings.post_exit_drain,
                    ),
                    // Only descendants are left: no wait beyond escapee_wait.
                    Stop::Terminating => pull_in(call, now, Timer::ShutdownGrace),
                    Stop::Killing => pull_in(call, now, Timer::KillWait),
                }
            } else {
                finish(call, now);
            }
        }
        (Dispatched, Event::ProcessLost) if call.exit.is_none() => {
            call.process_lost = true;
            finish(call, now);
        }
        (Dispatched, Event::Result(result)) => {
            call.result = Some(result);
        }
        (Dispatched, Event::Cancel(reason)) => request_stop(call, now, reason),
        (Dispatched, Event::Timeout(Timer::CallDeadline)) => {
            request_stop(call, now, CancelReason::Deadline)
        }
        (Dispatched, Event::Timeout(Timer::PostExitDrain)) => {
            if !call.settings.signal_descendants {
                finish(call, now);
            } else if call.stop == Stop::Running {
                terminate(call, now);
            }
        }
        (Dispatched, Event::Timeout(Timer::ShutdownGrace)) => {
            // KILL was needed for the helper itself, not only descendants.
            call.kill_needed = call.exit.is_none();
            signal(call, now, Signal::Kill);
            call.stop = Stop::Killing;
            let wait = if call.exit.is_some() {
                call.settings.escapee_wait
            } else {
                call.settings.kill_wait
            };
            call.timers.set_after(Timer::KillWait, now, wait);
        }
        (Dispatched, Event::Timeout(Timer::KillWait)) => finish(call, now),
        (Dispatched, Event::Timeout(Timer::StdinCloseGrace)) => {
            // No exit within the grace after stdin closed: a stop, by the
            // reason already given, or by this one.
            note_stop(call, now, CancelReason::StdinCloseGrace);
            terminate(call, now);
        }
        (Received | Validated | AwaitingApproval | Queued | Authorized, Event::CallerDone) => {
            call.input_ended = true;
        }
        (Dispatched, Event::CallerDone) => {
            if !call.input_ended {
                call.input_ended = true;
                close_stdin(call, now);
            }
        }

        // A debug grant is never a transition: it changes the stderr
        // budget of a live call, in every state.
        (_, Event::DebugGranted(grant)) => debug_granted(call, now, &grant),
        (_, Event::DebugRevoked | Event::Timeout(Timer::DebugGrantEnd)) => debug_ended(call),
        (state, Event::ClientDisconnected) => {
            call.client_disconnected = true;
            // A card on screen can no longer be answered: whoever could
            // approve held what went away. A queued call has not started,
            // and nobody is left to read what it would give. Nothing runs
            // yet, nothing is lost.
            let unanswerable = matches!(state, AwaitingApproval | Queued);
            if unanswerable || call.settings.on_client_disconnect == DisconnectPolicy::Cancel {
                apply(call, now, Event::Cancel(CancelReason::ClientDisconnected))?;
            }
            if call.settings.stdout_mode == StdoutMode::Streamed {
                // Nobody is left to read stdout or send anything: its end
                // is not awaited, and the input has ended.
                if state == Dispatched && call.stdout_open {
                    call.stdout_open = false;
                    stream_closed(call, now);
                }
                return apply(call, now, Event::CallerDone);
            }
        }
        // A timer disarmed by the transition that made it moot.
        (_, Event::Timeout(_)) => {}

        (state, input) => {
            return Err(CallError::InvalidTransition {
                state,
                input: input.name(),
            });
        }
    }
    Ok(())
}

/// The host's grant in force is `grant`: an active one raises (or, if it
/// replaces a larger one, lowers) the stderr budget until its end and
/// marks the record `debug: true`; one already over ends the call's grant.
fn debug_granted(call: &mut Call, now: Instant, grant: &DebugGrant) {
    if !grant.is_active(now) {
        return debug_ended(call);
    }
    let normal = call
        .settings
        .debug_until
        .map_or(call.settings.stderr.budget, |w| w.normal_budget);
    let budget = normal.max(to_usize(grant.per_call_bytes()));
    call.settings.debug_until = Some(DebugWindow {
        until: grant.until(),
        normal_budget: normal,
    });
    call.settings.stderr.budget = budget;
    call.settings.stderr.debug = true;
    call.timers.set(Timer::DebugGrantEnd, grant.until());
    if let Some(capture) = call.stderr.as_mut() {
        capture.mark_debug();
        capture.raise_budget(budget);
        capture.shrink_budget(budget);
    }
}

/// The call's debug grant ended (its end came, or it was revoked): the
/// retained stderr shrinks back to the normal budget and the pool gets the
/// difference back; the record keeps `debug: true`.
fn debug_ended(call: &mut Call) {
    call.timers.stop(Timer::DebugGrantEnd);
    if let Some(window) = call.settings.debug_until.take() {
        call.settings.stderr.budget = window.normal_budget;
        if let Some(capture) = call.stderr.as_mut() {
            capture.shrink_budget(window.normal_budget);
        }
    }
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

pub(super) fn audit(call: &mut Call, now: Instant, kind: AuditKind) {
    let event = AuditEvent {
        call_id: call.spec.call_id.clone(),
        session_id: call.spec.session_id.clone(),
        offset_us: call.offset_us(now),
        kind,
    };
    call.actions.push_back(Action::Audit(event));
}

fn show_card(call: &mut Call, now: Instant) {
    // Fixed once: here, or when the driver reports the card delivered
    // (`deadline_from_delivery`); nothing moves it later: stderr
    // never extends the approver's time.
    if !call.settings.deadline_from_delivery {
        call.timers
            .set_after(Timer::ApprovalDeadline, now, call.settings.approval_timeout);
    }
    enter(call, now, State::AwaitingApproval);
    let bounds: Vec<(String, String)> = call
        .settings
        .confinement
        .card_lines()
        .into_iter()
        .map(|(label, value)| (label, call.settings.stderr.redactor.redact_text(&value)))
        .collect();
    let text = super::card::spec_card_text(&call.spec, &bounds, call.settings.approval_timeout);
    audit(call, now, AuditKind::CardShown { text: text.clone() });
    let card = ApprovalCard {
        call_id: call.spec.call_id.clone(),
        action: call.spec.action.clone(),
        target: call.spec.target.clone(),
        summary: call.spec.summary.clone(),
        expires_in: call.settings.approval_timeout,
        text,
    };
    call.actions.push_back(Action::ShowApprovalCard(card));
}

/// Authorized: the spawn is asked for at once, or, under
/// [`Admission::Queued`], the call waits in `queued` for the driver's
/// admission, its queue timeout armed.
fn authorize(call: &mut Call, now: Instant) {
    match call.settings.admission {
        Admission::Immediate => {
            enter(call, now, State::Authorized);
            call.actions.push_back(Action::Spawn(call.spawn_order()));
        }
        Admission::Queued { timeout } => {
            call.queued_offset_us = Some(call.offset_us(now));
            call.timers.set_after(Timer::QueueDeadline, now, timeout);
            enter(call, now, State::Queued);
        }
    }
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

/// Asks for the helper's stdin to be closed, once per call.
fn close_stdin_once(call: &mut Call) {
    if !call.stdin_closed {
        call.stdin_closed = true;
        call.actions.push_back(Action::CloseStdin);
    }
}

/// The caller's input ended (or a stop began): stdin closed, and a
/// streamed helper still running gets the stdin close grace before TERM.
fn close_stdin(call: &mut Call, now: Instant) {
    close_stdin_once(call);
    if call.settings.stdout_mode == StdoutMode::Streamed
        && call.settings.mcp_shutdown
        && call.exit.is_none()
        && call.stop == Stop::Running
    {
        call.stop = Stop::ClosingStdin;
        call.timers
            .set_after(Timer::StdinCloseGrace, now, call.settings.stdin_close_grace);
    }
}

/// SIGTERM to the group, grace timer armed: the shutdown grace while the
/// direct child lives, the escapee wait once it exited.
fn terminate(call: &mut Call, now: Instant) {
    close_stdin_once(call);
    signal(call, now, Signal::Term);
    call.stop = Stop::Terminating;
    call.timers.stop(Timer::PostExitDrain);
    call.timers.stop(Timer::StdinCloseGrace);
    let grace = if call.exit.is_some() {
        call.settings.escapee_wait
    } else {
        call.settings.shutdown_grace
    };
    call.timers.set_after(Timer::ShutdownGrace, now, grace);
}

/// The direct child exited during the stop sequence with a stream still
/// open: `timer` (the grace or the kill wait) fires no later than
/// `escapee_wait` from now.
fn pull_in(call: &mut Call, now: Instant, timer: Timer) {
    if let Some(soon) = now.checked_add(call.settings.escapee_wait)
        && call.timers.get(timer).is_none_or(|at| soon < at)
    {
        call.timers.set(timer, soon);
    }
}

/// Records a stop: its first reason and instant, and whether it came
/// before the exit.
fn note_stop(call: &mut Call, now: Instant, reason: CancelReason) {
    if call.cancel_reason.is_none() {
        call.cancel_reason = Some(reason);
        call.cancel_offset_us = Some(call.offset_us(now));
    }
    if call.exit.is_none() {
        call.stop_before_exit = true;
    }
}

/// A stop (cancel, deadline, kill ceiling, disconnect) after dispatch. A
/// streamed helper under the MCP stdio shutdown, still running, first has
/// its stdin closed and gets the stdin close grace; any other, or one
/// whose stdin close grace already runs, gets TERM now or at the grace's
/// end.
fn request_stop(call: &mut Call, now: Instant, reason: CancelReason) {
    note_stop(call, now, reason);
    call.timers.stop(Timer::CallDeadline);
    if call.stop == Stop::Running {
        if call.settings.stdout_mode == StdoutMode::Streamed
            && call.settings.mcp_shutdown
            && call.exit.is_none()
        {
            close_stdin(call, now);
        } else {
            terminate(call, now);
        }
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
    if call.settings.result == ResultChannel::StdoutJson
        && call.stdout_open
        && call.result_value.is_none()
    {
        call.result_error = Some("stdout did not reach end-of-file".to_owned());
    }
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
        .retain(|a| !matches!(a, Action::Spawn(_) | Action::ShowApprovalCard(_)));
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
    let (confinement, trace) = (&call.settings.confinement, call.settings.trace.as_ref());
    let enforcement = call.enforcement.clone().unwrap_or_default();
    let tree_kill = call.pid.map(|_| {
        if enforcement.tree_kill.is_empty() {
            "process-group".to_owned()
        } else {
            enforcement.tree_kill.clone()
        }
    });
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
        stdout_truncated: stdout.truncated(),
        stdout_mode: call.settings.stdout_mode,
        stdout_bytes_forwarded: call.stdout_bytes_forwarded,
        stdin_bytes_forwarded: call.stdin_bytes_forwarded,
        stdin_bytes_undelivered: call.stdin_bytes_undelivered,
        stdout_lines_diverted: call.stdout_lines_diverted,
        stdout_bytes_diverted: call.stdout_bytes_diverted,
        stderr_redactions: redactions.stderr.total(),
        stdout_redactions: redactions.stdout.total(),
        debug: stderr.debug(),
        descendants_signalled: call.descendants_signalled,
        client_disconnected: call.client_disconnected,
        on_client_disconnect: call
            .client_disconnected
            .then_some(call.settings.on_client_disconnect),
        result_kind: call.result,
        result_error: call.result_error.clone(),
        failure: call.failure.clone(),
        spawn_error_kind: call.spawn_error_kind.map(str::to_owned),
        audit_failures: call.audit_failures,
        pid: call.pid,
        pgid: call.pgid,
        pipe_capacity_bytes: call.pipe_capacity,
        received_at: rfc3339(call.received_at),
        timeline: call.timeline.clone(),
        signals: call.signals.clone(),
        cancel_offset_us: call.cancel_offset_us,
        card_delivered_offset_us: call.card_delivered_offset_us,
        exited_offset_us: call.exited_offset_us,
        queued_offset_us: call.queued_offset_us,
        admitted_offset_us: call.admitted_offset_us,
        limits: (!confinement.limits.is_empty()).then(|| confinement.limits.clone()),
        sandbox: (!confinement.sandbox.is_empty()).then(|| confinement.sandbox.clone()),
        enforced: enforcement.enforced,
        not_enforced: enforcement.not_enforced,
        tree_kill,
        limit_hit: call
            .tree
            .as_ref()
            .and_then(|tree| LimitHit::of(&confinement.limits, tree, call.exit)),
        tree_peak_memory_bytes: call.tree.and_then(|tree| tree.peak_memory_bytes),
        tree_peak_pids: call.tree.and_then(|tree| tree.peak_pids),
        received_at_unix_us: unix_us(call.received_at),
        trace_id: trace.map(|t| hex(&t.trace_id)),
        span_id: trace.map(|t| hex(&t.span_id)),
        parent_span_id: trace.and_then(|t| t.parent_span_id).map(|id| hex(&id)),
    };
    if let Some(limit) = record.limit_hit {
        audit(call, now, AuditKind::LimitHit { limit });
    }
    audit(call, now, AuditKind::Final(Box::new(record.clone())));
    call.actions.push_back(Action::Finished(Box::new(Outcome {
        record,
        stderr,
        stdout,
        excerpt_bytes: call.settings.excerpt_bytes,
        result_value: call.result_value.take(),
        redactions,
        stdout_truncation_allowed: call.settings.stdout_truncation_allowed,
    })));
}
