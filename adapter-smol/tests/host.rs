//! The smol adapter against real processes: states, counts, signals and
//! process groups, asserted exactly (the same facts as the std adapter's
//! tests assert).
#![allow(clippy::unwrap_used)]

// The reaping and audit helpers are the std adapter's, not a copy.
#[path = "../../adapter-std/tests/support/mod.rs"]
mod support;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::future;
use spillguard_smol::core::{
    ApprovalDecision, AuditKind, CallError, CallKind, CallRecord, CancelReason, Config,
    DisconnectPolicy, Signal, State, StreamEnd,
};
use spillguard_smol::{CallHandle, HelperCommand, Host, HostOptions, JsonLinesAudit};
use support::{Recorder, assert_group_gone, become_subreaper, poll_until, spec, temp_path};

const MS: Duration = Duration::from_millis(1);

fn host(options: HostOptions) -> Host {
    Host::new(Config::default(), options).unwrap()
}

fn us(d: Duration) -> u64 {
    d.as_micros() as u64
}

fn states(record: &CallRecord) -> Vec<State> {
    record.timeline.iter().map(|m| m.state).collect()
}

/// Polls `done` every 5 ms without blocking the executor; panics after 10 s.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        smol::Timer::after(5 * MS).await;
    }
}

async fn wait_for_state(call: &CallHandle, state: State) {
    until(state.as_str(), || call.state() == state).await;
}

fn records_of(host: &Host, call_id: &str) -> Vec<CallRecord> {
    host.finished_records()
        .into_iter()
        .filter(|r| r.call_id == call_id)
        .collect()
}

#[test]
fn a_flood_past_its_deadline_is_cancelled_and_keeps_the_last_16_kib() {
    become_subreaper();
    let deadline = 300 * MS;
    let host = host(HostOptions {
        deadline: Some(deadline),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script("yes helper-diagnostic 1>&2");
    let outcome = smol::block_on(host.start(spec("c_flood"), command, false).wait());
    let record = &outcome.record;

    assert_eq!(record.state, State::CancelledAfterDispatch);
    assert_eq!(record.cancel_reason, Some(CancelReason::Deadline));
    assert_eq!(record.exit_status, None);
    assert_eq!(record.exit_signal, Some(15));
    assert_eq!(record.stream_end, StreamEnd::ReaderCompletedAfterCancel);
    assert_eq!(record.stderr_bytes_retained, 16_384);
    assert!(record.stderr_truncated);
    assert!(
        record.stderr_bytes_seen > 1_000_000,
        "{}",
        record.stderr_bytes_seen
    );
    assert_eq!(record.stdout_bytes_seen, 0);
    assert!(!record.descendants_signalled);
    let signals: Vec<Signal> = record.signals.iter().map(|s| s.signal).collect();
    assert_eq!(signals, [Signal::Term]);
    // The deadline runs from dispatch, and the flood does not postpone it.
    let dispatched = us(record.offset_of(State::Dispatched).unwrap());
    let cancelled = record.cancel_offset_us.unwrap();
    assert!(
        cancelled - dispatched >= us(deadline),
        "{cancelled} - {dispatched}"
    );
    assert!(
        cancelled - dispatched <= us(deadline + 200 * MS),
        "{cancelled} - {dispatched}"
    );
    assert_eq!(record.signals[0].offset_us, cancelled);

    let rendered = outcome.stderr.render();
    let marker = format!(
        "[stderr truncated: kept last 16384 of {} bytes]",
        record.stderr_bytes_seen
    );
    assert_eq!(rendered.lines().next(), Some(marker.as_str()));
    let body: Vec<&str> = rendered.lines().skip(2).collect();
    assert!(body.len() > 800, "{}", body.len());
    let (last, whole) = body.split_last().unwrap();
    assert!(whole.iter().all(|l| *l == "helper-diagnostic"));
    assert!("helper-diagnostic".starts_with(last), "{last}");

    assert_eq!(host.pool().in_use(), 16_384);
    assert_group_gone(record.pgid.unwrap());
    drop(outcome);
    assert_eq!(host.pool().in_use(), 0);
}

#[test]
fn a_normal_run_reports_its_exit_code_and_exact_counts() {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("echo out; echo err 1>&2; exit 3");
    let outcome = smol::block_on(host.start(spec("c_normal"), command, false).wait());
    let record = &outcome.record;

    assert_eq!(record.state, State::FailedLocal);
    assert_eq!(record.exit_status, Some(3));
    assert_eq!(record.exit_signal, None);
    assert_eq!(record.stdout_bytes_seen, 4);
    assert_eq!(record.stderr_bytes_seen, 4);
    assert_eq!(record.stderr_bytes_retained, 4);
    assert!(!record.stderr_truncated);
    assert_eq!(record.stream_end, StreamEnd::Eof);
    assert_eq!(record.approval, ApprovalDecision::NotRequired);
    assert_eq!(record.cancel_reason, None);
    assert!(record.signals.is_empty());
    assert_eq!(record.pid, record.pgid);
    assert_eq!(record.pipe_capacity_bytes, Some(1 << 20));
    assert_eq!(
        states(record),
        [
            State::Received,
            State::Validated,
            State::Authorized,
            State::Dispatched,
            State::FailedLocal
        ]
    );
    assert_eq!(outcome.stdout.to_vec(), b"out\n");
    assert_eq!(outcome.agent_excerpt(), "err\n");
}

#[test]
fn the_helper_leads_its_own_group_with_null_stdin_and_piped_output() {
    // async-process's conversion from a std command resets the stdio to
    // "inherit"; the adapter sets it again. The helper reports what it got.
    let host = host(HostOptions::default());
    let script = "cut -d' ' -f5 /proc/$$/stat; for fd in 0 1 2; do readlink /proc/$$/fd/$fd; done";
    let outcome = smol::block_on(
        host.start(spec("c_group"), HelperCommand::shell_script(script), false)
            .wait(),
    );
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed);
    let stdout = String::from_utf8(outcome.stdout.to_vec()).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(lines[0].parse::<u32>().ok(), record.pid);
    assert_eq!(record.pgid, record.pid);
    assert_ne!(
        record.pgid,
        Some(rustix::process::getpgrp().as_raw_pid() as u32)
    );
    assert_eq!(lines[1], "/dev/null");
    assert!(lines[2].starts_with("pipe:["), "{}", lines[2]);
    assert!(lines[3].starts_with("pipe:["), "{}", lines[3]);
    assert_ne!(lines[2], lines[3]);
}

#[test]
fn a_helper_that_ignores_term_is_killed_once_after_the_grace() {
    become_subreaper();
    let grace = 300 * MS;
    let host = host(HostOptions {
        shutdown_grace: Some(grace),
        ..HostOptions::default()
    });
    let ready = temp_path("smol-trap-ready");
    let _ = std::fs::remove_file(&ready);
    let script = format!("trap '' TERM; touch '{}'; sleep 30", ready.display());
    let call = host.start(spec("c_trap"), HelperCommand::shell_script(script), false);
    poll_until(Duration::from_secs(10), "the trap to be set", || {
        ready.exists()
    });
    let cancelled_at = Instant::now();
    call.cancel();
    let outcome = smol::block_on(call.wait());
    let record = &outcome.record;
    let _ = std::fs::remove_file(&ready);

    assert_eq!(record.state, State::Killed);
    assert_eq!(record.cancel_reason, Some(CancelReason::Requested));
    assert_eq!(record.exit_status, None);
    assert_eq!(record.exit_signal, Some(9));
    assert_eq!(record.stream_end, StreamEnd::ReaderCompletedAfterCancel);
    let signals: Vec<Signal> = record.signals.iter().map(|s| s.signal).collect();
    assert_eq!(signals, [Signal::Term, Signal::Kill]);
    let gap = record.signals[1].offset_us - record.signals[0].offset_us;
    assert!(gap >= us(grace), "KILL {gap} us after TERM");
    assert!(gap <= us(grace + 200 * MS), "KILL {gap} us after TERM");
    assert!(cancelled_at.elapsed() < Duration::from_secs(5));
    assert_group_gone(record.pgid.unwrap());
}

#[test]
fn a_grandchild_holding_the_streams_is_signalled_after_the_drain_window() {
    become_subreaper();
    let host = host(HostOptions::default());
    let started = Instant::now();
    let command = HelperCommand::shell_script("sleep 30 & exit 0");
    let outcome = smol::block_on(host.start(spec("c_grandchild"), command, false).wait());
    let elapsed = started.elapsed();
    let record = &outcome.record;

    assert_eq!(record.state, State::Completed);
    assert_eq!(record.exit_status, Some(0));
    assert_eq!(record.cancel_reason, None);
    assert!(record.descendants_signalled);
    assert_eq!(record.stream_end, StreamEnd::ClosedAfterGroupSignalled);
    let signals: Vec<Signal> = record.signals.iter().map(|s| s.signal).collect();
    assert_eq!(signals, [Signal::Term]);
    let drain = us(250 * MS);
    let after_exit = record.signals[0].offset_us - record.exited_offset_us.unwrap();
    assert!(after_exit >= drain, "TERM {after_exit} us after exit");
    assert!(
        after_exit <= drain + us(200 * MS),
        "TERM {after_exit} us after exit"
    );
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert_group_gone(record.pgid.unwrap());
}

#[test]
fn a_denied_call_shows_its_card_once_and_spawns_nothing() {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let trace = temp_path("smol-denied-ran");
    let _ = std::fs::remove_file(&trace);
    let command = HelperCommand::shell_script(format!("touch '{}'", trace.display()));
    let call = host.start(spec("c_denied"), command, true);

    let outcome = smol::block_on(async {
        let card = call.wait_card(Duration::from_secs(10)).await.unwrap();
        assert_eq!(card.call_id, "c_denied");
        assert_eq!(card.action, "local.test");
        assert_eq!(card.target, "localhost");
        assert_eq!(card.summary, "test helper");
        assert_eq!(card.expires_in, Duration::from_secs(120));
        assert_eq!(call.state(), State::AwaitingApproval);
        assert_eq!(call.card(), Some(card));

        assert_eq!(call.deny().await, Ok(()));
        assert_eq!(
            call.deny().await,
            Err(CallError::InvalidTransition {
                state: State::Denied,
                input: "approval_denied"
            })
        );
        call.wait().await
    });
    let record = &outcome.record;
    assert_eq!(record.state, State::Denied);
    assert_eq!(record.approval, ApprovalDecision::Denied);
    assert_eq!((record.pid, record.pgid), (None, None));
    assert_eq!(record.stream_end, StreamEnd::NotStarted);
    assert_eq!(
        states(record),
        [
            State::Received,
            State::Validated,
            State::AwaitingApproval,
            State::Denied
        ]
    );
    assert!(!trace.exists());
    assert_eq!(
        recorder.kinds("c_denied"),
        [
            "transition:received->validated",
            "attempt",
            "transition:validated->awaiting_approval",
            "transition:awaiting_approval->denied",
            "final"
        ]
    );
}

#[test]
fn an_approved_call_runs_its_helper() {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("echo approved");
    let call = host.start(spec("c_approved"), command, true);
    let outcome = smol::block_on(async {
        assert!(call.wait_card(Duration::from_secs(10)).await.is_some());
        assert_eq!(call.approve().await, Ok(()));
        call.wait().await
    });
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.approval, ApprovalDecision::Granted);
    assert_eq!(record.exit_status, Some(0));
    assert_eq!(outcome.stdout.to_vec(), b"approved\n");
    assert_eq!(
        states(record),
        [
            State::Received,
            State::Validated,
            State::AwaitingApproval,
            State::Authorized,
            State::Dispatched,
            State::Completed
        ]
    );
}

#[test]
fn an_unanswered_card_expires() {
    let host = host(HostOptions {
        approval_timeout: Some(100 * MS),
        ..HostOptions::default()
    });
    let call = host.start(spec("c_expired"), HelperCommand::new("true"), true);
    let outcome = smol::block_on(call.wait());
    assert_eq!(outcome.record.state, State::ApprovalExpired);
    assert_eq!(outcome.record.approval, ApprovalDecision::Expired);
    assert_eq!(outcome.record.pid, None);
    let shown = us(outcome.record.offset_of(State::AwaitingApproval).unwrap());
    let expired = us(outcome.record.offset_of(State::ApprovalExpired).unwrap());
    assert!(expired - shown >= us(100 * MS));
    assert!(expired - shown <= us(300 * MS), "{}", expired - shown);
}

#[test]
fn dropping_the_handle_mid_run_still_finishes_and_records_the_call() {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script("sleep 0.3; echo done");
    let call = host.start(spec("c_dropped"), command, false);
    let record = smol::block_on(async {
        wait_for_state(&call, State::Dispatched).await;
        drop(call);
        until("the record", || records_of(&host, "c_dropped").len() == 1).await;
        until("the call to leave", || host.live_calls() == 0).await;
        records_of(&host, "c_dropped").remove(0)
    });
    assert_eq!(record.state, State::Completed);
    assert!(record.client_disconnected);
    assert_eq!(record.on_client_disconnect, Some(DisconnectPolicy::Finish));
    assert_eq!(record.exit_status, Some(0));
    assert_eq!(record.stdout_bytes_seen, 5);
    assert_eq!(record.stream_end, StreamEnd::Eof);
    let finals: Vec<_> = recorder
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match &e.kind {
            AuditKind::Final(r) => Some((**r).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(finals, [record]);
}

#[test]
fn dropping_the_wait_future_under_the_cancel_policy_stops_the_helper() {
    become_subreaper();
    let host = host(HostOptions {
        on_client_disconnect: Some(DisconnectPolicy::Cancel),
        ..HostOptions::default()
    });
    let call = host.start(
        spec("c_drop_cancel"),
        HelperCommand::new("sleep").arg("30"),
        false,
    );
    let record = smol::block_on(async {
        wait_for_state(&call, State::Dispatched).await;
        // The caller gives up waiting: the future, and the handle in it,
        // are dropped before the outcome.
        let waiting = call.wait();
        let gave_up = future::or(async { Some(waiting.await) }, async {
            smol::Timer::after(50 * MS).await;
            None
        })
        .await;
        assert!(gave_up.is_none());
        until("the record", || {
            records_of(&host, "c_drop_cancel").len() == 1
        })
        .await;
        records_of(&host, "c_drop_cancel").remove(0)
    });
    assert_eq!(record.state, State::CancelledAfterDispatch);
    assert_eq!(record.cancel_reason, Some(CancelReason::ClientDisconnected));
    assert_eq!(record.on_client_disconnect, Some(DisconnectPolicy::Cancel));
    assert!(record.client_disconnected);
    assert_eq!(record.exit_signal, Some(15));
    assert_group_gone(record.pgid.unwrap());
}

#[test]
fn a_program_that_cannot_be_spawned_fails_before_dispatch() {
    let host = host(HostOptions::default());
    let call = host.start(
        spec("c_missing"),
        HelperCommand::new("/nonexistent/prog"),
        false,
    );
    let outcome = smol::block_on(call.wait());
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(
        record.failure.as_deref(),
        Some("spawn failed: /nonexistent/prog: NotFound: No such file or directory (os error 2)")
    );
    assert_eq!((record.pid, record.exit_status), (None, None));
    assert_eq!(record.stream_end, StreamEnd::NotStarted);
    assert_eq!(
        states(record),
        [
            State::Received,
            State::Validated,
            State::Authorized,
            State::FailedBeforeDispatch
        ]
    );
}

#[test]
fn an_invalid_command_fails_before_its_attempt_is_recorded() {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let command = HelperCommand::new("echo").arg("a\0b");
    let outcome = smol::block_on(host.start(spec("c_invalid"), command, true).wait());
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(
        record.failure.as_deref(),
        Some("an argument contains a NUL byte")
    );
    assert_eq!(
        states(record),
        [State::Received, State::FailedBeforeDispatch]
    );
    assert_eq!(
        recorder.kinds("c_invalid"),
        ["transition:received->failed_before_dispatch", "final"]
    );
}

#[test]
fn shutdown_cancels_every_live_call_and_waits_for_their_records() {
    become_subreaper();
    let host = host(HostOptions::default());
    let calls: Vec<_> = (0..3)
        .map(|i| {
            host.start(
                spec(&format!("c_live_{i}")),
                HelperCommand::new("sleep").arg("30"),
                false,
            )
        })
        .collect();
    let report = smol::block_on(async {
        for call in &calls {
            wait_for_state(call, State::Dispatched).await;
        }
        assert_eq!(host.live_calls(), 3);
        host.shutdown(Duration::from_secs(10)).await
    });
    assert_eq!((report.finished, report.unfinished), (3, 0));
    assert_eq!(host.live_calls(), 0);
    assert_eq!(host.finished_records().len(), 3);
    for call in calls {
        let outcome = call.try_outcome().unwrap();
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
    let late = smol::block_on(
        host.start(spec("c_late"), HelperCommand::new("true"), false)
            .wait(),
    );
    assert_eq!(late.record.state, State::CancelledBeforeDispatch);
    assert_eq!(late.record.cancel_reason, Some(CancelReason::HostShutdown));
    assert_eq!(late.record.pid, None);
}

#[test]
fn a_shutdown_future_dropped_after_its_first_poll_still_stops_every_call() {
    become_subreaper();
    let host = host(HostOptions::default());
    let call = host.start(
        spec("c_shutdown_dropped"),
        HelperCommand::new("sleep").arg("30"),
        false,
    );
    let outcome = smol::block_on(async {
        wait_for_state(&call, State::Dispatched).await;
        let mut shutdown = Box::pin(host.shutdown(Duration::from_secs(10)));
        // The first poll sends the cancels. On a busy machine the owner may
        // finish the call before that poll returns, so either answer is
        // fine: what matters is what happens once the future is dropped.
        let _ = future::poll_once(&mut shutdown).await;
        drop(shutdown);
        call.wait().await
    });
    assert_eq!(outcome.record.state, State::CancelledAfterDispatch);
    assert_eq!(
        outcome.record.cancel_reason,
        Some(CancelReason::HostShutdown)
    );
    assert_eq!(outcome.record.exit_signal, Some(15));
    assert_eq!(records_of(&host, "c_shutdown_dropped").len(), 1);
    assert_group_gone(outcome.record.pgid.unwrap());
}

#[test]
fn wait_timeout_gives_the_handle_back_until_the_call_ends() {
    let host = host(HostOptions::default());
    let call = host.start(
        spec("c_slow"),
        HelperCommand::new("sleep").arg("0.3"),
        false,
    );
    let outcome = smol::block_on(async {
        let call = call.wait_timeout(10 * MS).await.unwrap_err();
        assert!(!call.is_finished());
        let call = call.try_outcome().unwrap_err();
        call.wait_timeout(Duration::from_secs(10)).await.unwrap()
    });
    assert_eq!(outcome.record.state, State::Completed);
    assert!(!outcome.record.client_disconnected);
}

#[test]
fn stdin_bytes_reach_the_helper_and_stdin_is_null_otherwise() {
    let host = host(HostOptions::default());
    let input = vec![b'i'; 1 << 20];
    let (counted, null) = smol::block_on(async {
        let counted = host
            .start(
                spec("c_stdin"),
                HelperCommand::new("wc").arg("-c").stdin_bytes(input),
                false,
            )
            .wait()
            .await;
        let null = host
            .start(spec("c_null"), HelperCommand::new("wc").arg("-c"), false)
            .wait()
            .await;
        (counted, null)
    });
    assert_eq!(counted.record.state, State::Completed);
    assert_eq!(
        String::from_utf8_lossy(&counted.stdout.to_vec()).trim(),
        "1048576"
    );
    assert_eq!(String::from_utf8_lossy(&null.stdout.to_vec()).trim(), "0");
}

#[test]
fn a_stop_closes_stdin_even_while_a_write_waits_on_a_full_pipe() {
    become_subreaper();
    let host = host(HostOptions {
        deadline: Some(200 * MS),
        shutdown_grace: Some(Duration::from_secs(3)),
        ..HostOptions::default()
    });
    // 8 MiB for a helper that ignores TERM and reads only after the stop:
    // the writer waits on a full pipe. Closed at the stop, `wc` sees the
    // end of its input and exits 0 within the grace; left open, it would
    // wait for more and need KILL.
    let command = HelperCommand::shell_script("trap '' TERM; sleep 0.5; wc -c")
        .stdin_bytes(vec![b'i'; 8 << 20]);
    let outcome = smol::block_on(host.start(spec("c_stdin_stop"), command, false).wait());
    let record = &outcome.record;
    assert_eq!(record.state, State::CancelledAfterDispatch);
    assert_eq!(record.cancel_reason, Some(CancelReason::Deadline));
    assert_eq!((record.exit_status, record.exit_signal), (Some(0), None));
    let signals: Vec<Signal> = record.signals.iter().map(|s| s.signal).collect();
    assert_eq!(signals, [Signal::Term]);
    let read: u64 = String::from_utf8_lossy(&outcome.stdout.to_vec())
        .trim()
        .parse()
        .unwrap();
    assert!(read > 0 && read < 8 << 20, "{read}");
    assert_group_gone(record.pgid.unwrap());
}

#[test]
fn every_byte_of_a_large_flood_is_counted() {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("head -c 20000000 /dev/zero 1>&2");
    let outcome = smol::block_on(host.start(spec("c_20mb"), command, false).wait());
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.stderr_bytes_seen, 20_000_000);
    assert_eq!(outcome.record.stderr_bytes_retained, 16_384);
    assert_eq!(outcome.record.stream_end, StreamEnd::Eof);
}

#[test]
fn a_discovery_call_has_its_own_budget_and_no_attempt() {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let discovery = spillguard_smol::core::CallSpec {
        kind: CallKind::Discovery,
        ..spec("c_discovery")
    };
    let command = HelperCommand::shell_script("head -c 100000 /dev/zero 1>&2; echo web-3");
    let asked_spec = spillguard_smol::core::CallSpec {
        call_id: "c_discovery_approval".into(),
        ..discovery.clone()
    };
    let (outcome, asked) = smol::block_on(async {
        let outcome = host.start(discovery, command, false).wait().await;
        // A discovery never acts, so it can never need approval.
        let asked = host
            .start(asked_spec, HelperCommand::new("true"), true)
            .wait()
            .await;
        (outcome, asked)
    });
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.stderr_bytes_seen, 100_000);
    assert_eq!(outcome.record.stderr_bytes_retained, 4096);
    assert_eq!(outcome.stdout.to_vec(), b"web-3\n");
    assert!(
        !recorder
            .kinds("c_discovery")
            .contains(&"attempt".to_owned())
    );
    assert_eq!(asked.record.state, State::FailedBeforeDispatch);
    assert_eq!(
        asked.record.failure.as_deref(),
        Some("a discovery call cannot need approval: it never acts")
    );
}

#[test]
fn the_json_lines_audit_holds_the_lifecycle_in_order() {
    let path = temp_path("smol-audit.jsonl");
    let _ = std::fs::remove_file(&path);
    let host = host(HostOptions {
        audit: Some(Arc::new(JsonLinesAudit::open(&path).unwrap())),
        ..HostOptions::default()
    });
    let outcome = smol::block_on(
        host.start(spec("c_audited"), HelperCommand::new("true"), false)
            .wait(),
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tags: Vec<String> = lines
        .iter()
        .map(|l| {
            let kind = l["kind"].as_object().unwrap();
            let (tag, body) = kind.iter().next().unwrap();
            match tag.as_str() {
                "transition" => body["to"].as_str().unwrap().to_owned(),
                other => other.to_owned(),
            }
        })
        .collect();
    assert_eq!(
        tags,
        [
            "validated",
            "attempt",
            "authorized",
            "dispatched",
            "completed",
            "final"
        ]
    );
    let last = &lines[5]["kind"]["final"];
    assert_eq!(last, &serde_json::to_value(&outcome.record).unwrap());
    assert_eq!(host.audit_failures(), 0);
}

/// A sink whose disk is always full.
struct FullDisk;

impl spillguard_smol::AuditSink for FullDisk {
    fn write(&self, _event: &spillguard_smol::core::AuditEvent) -> std::io::Result<()> {
        Err(std::io::Error::other("no space left on device"))
    }
}

#[test]
fn an_attempt_that_cannot_be_audited_spawns_nothing() {
    let trace = temp_path("smol-audit-fail-trace");
    let _ = std::fs::remove_file(&trace);
    let host = host(HostOptions {
        audit: Some(Arc::new(FullDisk)),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script(format!("touch '{}'", trace.display()));
    let outcome = smol::block_on(host.start(spec("c_audit_full"), command, false).wait());
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(
        record.failure.as_deref(),
        Some("audit log: no space left on device")
    );
    assert_eq!((record.pid, record.audit_failures), (None, 1));
    assert!(!trace.exists(), "the helper must not have run");
    // The transition into `validated`, the attempt, and the events after
    // the record: every write failed and was counted by the host.
    assert_eq!(host.audit_failures(), 5);
}

#[test]
fn an_approval_racing_the_end_of_a_call_is_refused_not_left_waiting() {
    let host = host(HostOptions::default());
    smol::block_on(async {
        for i in 0..50 {
            let call = host.start(
                spec(&format!("c_race_{i}")),
                HelperCommand::new("true"),
                false,
            );
            loop {
                let finished = call.is_finished();
                let answer = future::or(async { Some(call.approve().await) }, async {
                    smol::Timer::after(Duration::from_secs(5)).await;
                    None
                })
                .await;
                match answer {
                    Some(Err(CallError::InvalidTransition { input, .. })) => {
                        assert_eq!(input, "approval_granted");
                    }
                    other => panic!("call {i}: {other:?}"),
                }
                if finished {
                    break;
                }
            }
            assert_eq!(call.wait().await.record.state, State::Completed);
        }
    });
}

#[test]
fn the_public_futures_can_be_spawned_on_a_multi_threaded_executor() {
    fn send<F: Future + Send>(f: F) -> F {
        f
    }
    let host = host(HostOptions::default());
    let call = host.start(spec("c_send"), HelperCommand::new("true"), false);
    let outcome = smol::block_on(async {
        let _ = send(call.wait_card(MS)).await;
        let _ = send(call.approve()).await;
        let _ = send(call.deny()).await;
        smol::spawn(send(call.wait())).await
    });
    assert_eq!(outcome.record.state, State::Completed);
    let report = smol::block_on(smol::spawn(send(async move {
        host.shutdown(Duration::from_secs(1)).await
    })));
    assert_eq!((report.finished, report.unfinished), (0, 0));
}
