//! Stopping a helper: a grace it ignores, a grandchild holding the
//! streams, a client that goes away, and the host's shutdown.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use spillguard_core::{
    AuditKind, CallRecord, CancelReason, DisconnectPolicy, Signal, State, StreamEnd,
};
use spillguard_std::{HelperCommand, HostOptions};

use super::{
    MS, Recorder, assert_group_gone, poll_until, records_of, signals, temp_path, timed_check_turn,
    us, wait, wait_for_state,
};
use crate::engine::{CallUnderTest, HostUnderTest, request};
use crate::measure::become_subreaper;

/// A helper that traps TERM is killed once, after the 300 ms grace.
pub fn a_helper_that_ignores_term_is_killed_once_after_the_grace<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = timed_check_turn();
    become_subreaper();
    let grace = 300 * MS;
    let host = host(HostOptions {
        shutdown_grace: Some(grace),
        ..HostOptions::default()
    });
    let ready = temp_path("trap-ready");
    let _ = std::fs::remove_file(&ready);
    let script = format!("trap '' TERM; touch '{}'; sleep 30", ready.display());
    let call = host.launch(
        request(HelperCommand::shell_script(script))
            .call_id("c_trap")
            .into_request(),
    );
    poll_until(Duration::from_secs(10), "the trap to be set", || {
        ready.exists()
    });
    let cancelled_at = Instant::now();
    call.cancel();
    let outcome = wait(call);
    let record = &outcome.record;
    let _ = std::fs::remove_file(&ready);

    assert_eq!(record.state, State::Killed);
    assert_eq!(record.cancel_reason, Some(CancelReason::Requested));
    assert_eq!(record.exit_status, None);
    assert_eq!(record.exit_signal, Some(9));
    assert_eq!(record.stream_end, StreamEnd::ReaderCompletedAfterCancel);
    assert_eq!(signals(record), [Signal::Term, Signal::Kill]);
    let gap = record.signals[1].offset_us - record.signals[0].offset_us;
    assert!(gap >= us(grace), "KILL {gap} us after TERM");
    assert!(gap <= us(grace + 200 * MS), "KILL {gap} us after TERM");
    assert!(cancelled_at.elapsed() < Duration::from_secs(5));
    assert_group_gone(record.pgid.unwrap());
}

/// `sleep 30 &` keeps the streams open after the shell exits 0: the group
/// gets TERM 250 ms after the exit, and the call completes.
pub fn a_grandchild_holding_the_streams_is_signalled_after_the_drain_window<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = timed_check_turn();
    become_subreaper();
    let host = host(HostOptions::default());
    let started = Instant::now();
    let command = HelperCommand::shell_script("sleep 30 & exit 0");
    let outcome = wait(host.launch(request(command).call_id("c_grandchild").into_request()));
    let elapsed = started.elapsed();
    assert_completed_with_the_group_signalled_after(&outcome.record, 250 * MS);
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
}

/// The helper exited 0, its streams stayed open, and the group got one TERM
/// between `drain` and `drain` + 200 ms after the exit, which ended it.
fn assert_completed_with_the_group_signalled_after(record: &CallRecord, drain: Duration) {
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.exit_status, Some(0));
    assert_eq!(record.cancel_reason, None);
    assert!(record.descendants_signalled);
    assert_eq!(record.stream_end, StreamEnd::ClosedAfterGroupSignalled);
    assert_eq!(signals(record), [Signal::Term]);
    let after_exit = record.signals[0].offset_us - record.exited_offset_us.unwrap();
    assert!(after_exit >= us(drain), "TERM {after_exit} us after exit");
    assert!(
        after_exit <= us(drain + 200 * MS),
        "TERM {after_exit} us after exit"
    );
    assert_group_gone(record.pgid.unwrap());
}

/// `yes >&2 &` floods stderr, and goes on after the shell exits 0: however
/// busy the streams, the exit is seen and the group gets TERM once the
/// 100 ms drain window has passed.
pub fn a_grandchild_flooding_after_the_exit_is_signalled_after_the_drain_window<
    H: HostUnderTest,
>(
    host: fn(HostOptions) -> H,
) {
    let _turn = timed_check_turn();
    become_subreaper();
    let drain = 100 * MS;
    let host = host(HostOptions {
        post_exit_drain: Some(drain),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script("yes flooding-grandchild >&2 & sleep 0.3; exit 0");
    let started = Instant::now();
    let outcome = wait(
        host.launch(
            request(command)
                .call_id("c_flooding_grandchild")
                .into_request(),
        ),
    );
    let elapsed = started.elapsed();
    let record = &outcome.record;
    assert_completed_with_the_group_signalled_after(record, drain);
    // The exit was seen when it happened, not when the flood let up.
    let dispatched = record
        .timeline
        .iter()
        .find(|mark| mark.state == State::Dispatched)
        .unwrap()
        .offset_us;
    let exit_seen = record.exited_offset_us.unwrap() - dispatched;
    // The shell's `sleep 0.3` starts at the fork, a little before the
    // owner marks the dispatch once the spawn returned (299,952 us was
    // seen): the lower bound allows for that, not for an early exit.
    assert!(
        exit_seen >= us(250 * MS),
        "exit seen {exit_seen} us after dispatch"
    );
    assert!(
        exit_seen <= us(1000 * MS),
        "exit seen {exit_seen} us after dispatch"
    );
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    // The flood was read all along: far more seen than the tail kept.
    assert!(record.stderr_truncated);
    assert!(record.stderr_bytes_seen > 4 * record.stderr_bytes_retained);
}

/// `setsid sleep 2 &` leaves the helper's group and holds its streams. The
/// call ends once TERM, the grace and KILL are spent (streams abandoned);
/// its owner then drains them unheard, yet approving or denying answers at
/// once and the outcome is there.
pub fn answers_come_at_once_after_the_end_while_an_escaped_process_holds_the_streams<
    H: HostUnderTest,
>(
    host: fn(HostOptions) -> H,
) {
    let _turn = timed_check_turn();
    become_subreaper();
    let host = host(HostOptions {
        post_exit_drain: Some(100 * MS),
        shutdown_grace: Some(100 * MS),
        kill_wait: Some(100 * MS),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script("setsid sleep 2 & exit 0");
    // Opted out of its control group, which would end the escapee.
    let call = host.launch(
        request(command)
            .call_id("c_escaped")
            .contain_tree(false)
            .into_request(),
    );
    poll_until(Duration::from_secs(10), "the call to end", || {
        call.state().is_terminal()
    });
    let asked = Instant::now();
    assert!(call.deny().is_err());
    assert!(call.approve().is_err());
    let Ok(outcome) = call.wait_timeout(Duration::ZERO) else {
        panic!("no outcome once the state is terminal");
    };
    let answered = asked.elapsed();
    assert!(answered < Duration::from_millis(500), "{answered:?}");
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.exit_status, Some(0));
    assert_eq!(record.stream_end, StreamEnd::AbandonedOpen);
    assert!(record.descendants_signalled);
    assert_eq!(signals(record), [Signal::Term, Signal::Kill]);
}

/// Dropping the handle under the default (finish) policy: the call runs
/// to its end, the host keeps its record, and the audit sink gets the
/// same final record exactly once.
pub fn dropping_the_handle_mid_run_still_finishes_and_records_the_call<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script("sleep 0.3; echo done");
    let call = host.launch(request(command).call_id("c_dropped").into_request());
    wait_for_state(&call, State::Dispatched);
    drop(call);
    poll_until(Duration::from_secs(10), "the record", || {
        records_of(&host, "c_dropped") == 1
    });
    let record = host.finished_records().pop().unwrap();
    assert_eq!(record.state, State::Completed);
    assert!(record.client_disconnected);
    assert_eq!(record.on_client_disconnect, Some(DisconnectPolicy::Finish));
    assert_eq!(record.exit_status, Some(0));
    assert_eq!(record.stdout_bytes_seen, 5);
    assert_eq!(record.stream_end, StreamEnd::Eof);
    poll_until(Duration::from_secs(5), "the call to leave", || {
        host.live_calls() == 0
    });
    let finals: Vec<CallRecord> = recorder
        .events
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(|e| match &e.kind {
            AuditKind::Final(r) => Some((**r).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(finals, [record]);
}

/// Dropping the handle under the cancel policy stops the helper with TERM
/// and leaves no process of its group.
pub fn dropping_the_handle_under_the_cancel_policy_stops_the_helper<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    become_subreaper();
    let host = host(HostOptions {
        on_client_disconnect: Some(DisconnectPolicy::Cancel),
        ..HostOptions::default()
    });
    let call = host.launch(
        request(HelperCommand::new("sleep").arg("30"))
            .call_id("c_drop_cancel")
            .into_request(),
    );
    wait_for_state(&call, State::Dispatched);
    drop(call);
    poll_until(Duration::from_secs(10), "the record", || {
        records_of(&host, "c_drop_cancel") == 1
    });
    let record = host.finished_records().pop().unwrap();
    assert_eq!(record.state, State::CancelledAfterDispatch);
    assert_eq!(record.cancel_reason, Some(CancelReason::ClientDisconnected));
    assert_eq!(record.on_client_disconnect, Some(DisconnectPolicy::Cancel));
    assert!(record.client_disconnected);
    assert_eq!(record.exit_signal, Some(15));
    assert_eq!(record.stream_end, StreamEnd::ReaderCompletedAfterCancel);
    assert_group_gone(record.pgid.unwrap());
}

/// Shutdown cancels three live calls with TERM and waits for their
/// records; a call started afterwards is cancelled before dispatch.
pub fn shutdown_cancels_every_live_call_and_waits_for_their_records<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    become_subreaper();
    let host = host(HostOptions::default());
    let calls: Vec<_> = (0..3)
        .map(|i| {
            host.launch(
                request(HelperCommand::new("sleep").arg("30"))
                    .call_id(format!("c_live_{i}"))
                    .into_request(),
            )
        })
        .collect();
    for call in &calls {
        wait_for_state(call, State::Dispatched);
    }
    assert_eq!(host.live_calls(), 3);
    let report = host.shutdown(Duration::from_secs(10));
    assert_eq!((report.finished, report.unfinished), (3, 0));
    assert_eq!(host.live_calls(), 0);
    assert_eq!(host.finished_records().len(), 3);
    for call in calls {
        let Ok(outcome) = call.try_outcome() else {
            panic!("no outcome after shutdown");
        };
        assert_eq!(outcome.record.state, State::CancelledAfterDispatch);
        assert_eq!(
            outcome.record.cancel_reason,
            Some(CancelReason::HostShutdown)
        );
        assert_eq!(outcome.record.exit_signal, Some(15));
        assert_eq!(outcome.record.pipe_capacity_bytes, Some(1 << 20));
        assert_group_gone(outcome.record.pgid.unwrap());
    }
    // After shutdown, a new call is cancelled before anything runs.
    let late = wait(
        host.launch(
            request(HelperCommand::new("true"))
                .call_id("c_late")
                .into_request(),
        ),
    );
    assert_eq!(late.record.state, State::CancelledBeforeDispatch);
    assert_eq!(late.record.cancel_reason, Some(CancelReason::HostShutdown));
    assert_eq!(late.record.pid, None);
}

/// `shutdown()` cancels every live call and returns at once, saying how
/// many it asked to stop; each still ends with its record
/// (`cancelled_after_dispatch`, `host_shutdown`, SIGTERM), and a call
/// started afterwards is cancelled before anything runs.
pub fn shutdown_without_waiting_cancels_every_live_call<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let calls: Vec<_> = (0..2)
        .map(|i| {
            host.launch(
                request(HelperCommand::new("sleep").arg("30"))
                    .call_id(format!("c_now_{i}"))
                    .into_request(),
            )
        })
        .collect();
    for call in &calls {
        wait_for_state(call, State::Dispatched);
    }
    assert_eq!(host.shutdown_now(), 2);
    for call in calls {
        let outcome = wait(call);
        assert_eq!(outcome.record.state, State::CancelledAfterDispatch);
        assert_eq!(
            outcome.record.cancel_reason,
            Some(CancelReason::HostShutdown)
        );
        assert_eq!(outcome.record.exit_signal, Some(15));
        assert_group_gone(outcome.record.pgid.unwrap());
    }
    assert_eq!(host.live_calls(), 0);
    let late = wait(
        host.launch(
            request(HelperCommand::new("true"))
                .call_id("c_after_now")
                .into_request(),
        ),
    );
    assert_eq!(late.record.state, State::CancelledBeforeDispatch);
    assert_eq!(host.shutdown_now(), 0);
}
