//! The tokio adapter against real processes: states, counts, signals and
//! process groups, asserted exactly (the same facts as the std adapter's).
#![allow(clippy::unwrap_used)]

#[path = "../../adapter-std/tests/support/mod.rs"]
mod support;
mod tokio_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use spillguard_tokio::core::{
    ApprovalDecision, AuditKind, CallError, CallRecord, CancelReason, Config, DisconnectPolicy,
    Signal, State, StreamEnd,
};
use spillguard_tokio::{HelperCommand, Host, HostError, HostOptions};
use support::{Recorder, assert_group_gone, become_subreaper, spec, temp_path};
use tokio_support::{poll_until, records_of, wait_for_state};

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

fn signals(record: &CallRecord) -> Vec<Signal> {
    record.signals.iter().map(|s| s.signal).collect()
}

#[tokio::test]
async fn a_flood_past_its_deadline_is_cancelled_and_keeps_the_last_16_kib() {
    assert_a_flood_is_cut_at_its_deadline("c_flood").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_on_a_multi_thread_runtime_is_cut_at_its_deadline_too() {
    assert_a_flood_is_cut_at_its_deadline("c_flood_mt").await;
}

/// `yes` floods stderr with a 300 ms deadline: every fact of the record,
/// the retained text and the pool share, exactly.
async fn assert_a_flood_is_cut_at_its_deadline(call_id: &str) {
    become_subreaper();
    let deadline = 300 * MS;
    let host = host(HostOptions {
        deadline: Some(deadline),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script("yes helper-diagnostic 1>&2");
    let outcome = host.start(spec(call_id), command, false).wait().await;
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
    assert_eq!(signals(record), [Signal::Term]);
    // The deadline runs from dispatch, and the TERM is sent when it fires:
    // the flood queued behind it does not postpone it.
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
    // After the marker: whole diagnostic lines, bar the one the window cut
    // and the last, which TERM may have cut in the middle of a write.
    let body: Vec<&str> = rendered.lines().skip(2).collect();
    assert!(body.len() > 800, "{}", body.len());
    let (last, whole) = body.split_last().unwrap();
    assert!(whole.iter().all(|l| *l == "helper-diagnostic"));
    assert!("helper-diagnostic".starts_with(last), "{last}");

    // The retained text holds its pool share until the outcome is dropped.
    assert_eq!(host.pool().in_use(), 16_384);
    assert_group_gone(record.pgid.unwrap());
    drop(outcome);
    assert_eq!(host.pool().in_use(), 0);
}

#[tokio::test]
async fn a_normal_run_reports_its_exit_code_and_exact_counts() {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("echo out; echo err 1>&2; exit 3");
    let outcome = host.start(spec("c_normal"), command, false).wait().await;
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

#[tokio::test]
async fn the_command_keeps_its_own_process_group_pipes_and_stdin() {
    let host = host(HostOptions::default());
    // Field 5 of /proc/PID/stat is the process group; `$$` is the helper
    // itself (the shell given the script).
    let script = "read -r pid comm state ppid pgrp rest < /proc/$$/stat; \
                  echo \"$pid $pgrp\"; wc -c 1>&2";
    let outcome = host
        .start(spec("c_group"), HelperCommand::shell_script(script), false)
        .wait()
        .await;
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed);
    let pid = record.pid.unwrap();
    assert_eq!(
        String::from_utf8(outcome.stdout.to_vec()).unwrap(),
        format!("{pid} {pid}\n"),
        "the helper's pgid is its pid"
    );
    // stdin is /dev/null unless bytes are given: `wc -c` counts 0.
    assert_eq!(outcome.stderr.render().trim(), "0");

    let fed = host
        .start(
            spec("c_fed"),
            HelperCommand::new("wc")
                .arg("-c")
                .stdin_bytes(vec![b'i'; 1 << 20]),
            false,
        )
        .wait()
        .await;
    assert_eq!(fed.record.state, State::Completed);
    assert_eq!(
        String::from_utf8_lossy(&fed.stdout.to_vec()).trim(),
        "1048576"
    );
}

#[tokio::test]
async fn a_helper_that_ignores_term_is_killed_once_after_the_grace() {
    become_subreaper();
    let grace = 300 * MS;
    let host = host(HostOptions {
        shutdown_grace: Some(grace),
        ..HostOptions::default()
    });
    let ready = temp_path("tokio-trap-ready");
    let _ = std::fs::remove_file(&ready);
    let script = format!("trap '' TERM; touch '{}'; sleep 30", ready.display());
    let call = host.start(spec("c_trap"), HelperCommand::shell_script(script), false);
    poll_until(Duration::from_secs(10), "the trap to be set", || {
        ready.exists()
    })
    .await;
    let cancelled_at = Instant::now();
    call.cancel();
    let outcome = call.wait().await;
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

#[tokio::test]
async fn a_grandchild_holding_the_streams_is_signalled_after_the_drain_window() {
    become_subreaper();
    let host = host(HostOptions::default());
    let started = Instant::now();
    let command = HelperCommand::shell_script("sleep 30 & exit 0");
    let outcome = host
        .start(spec("c_grandchild"), command, false)
        .wait()
        .await;
    let elapsed = started.elapsed();
    let record = &outcome.record;

    assert_eq!(record.state, State::Completed);
    assert_eq!(record.exit_status, Some(0));
    assert_eq!(record.cancel_reason, None);
    assert!(record.descendants_signalled);
    assert_eq!(record.stream_end, StreamEnd::ClosedAfterGroupSignalled);
    assert_eq!(signals(record), [Signal::Term]);
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

#[tokio::test]
async fn a_denied_call_shows_its_card_once_and_spawns_nothing() {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let trace = temp_path("tokio-denied-ran");
    let _ = std::fs::remove_file(&trace);
    let command = HelperCommand::shell_script(format!("touch '{}'", trace.display()));
    let call = host.start(spec("c_denied"), command, true);

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
    let outcome = call.wait().await;
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

#[tokio::test]
async fn an_approved_call_runs_its_helper() {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("echo approved");
    let call = host.start(spec("c_approved"), command, true);
    assert!(call.wait_card(Duration::from_secs(10)).await.is_some());
    assert_eq!(call.approve().await, Ok(()));
    let outcome = call.wait().await;
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

#[tokio::test]
async fn an_unanswered_card_expires() {
    let host = host(HostOptions {
        approval_timeout: Some(100 * MS),
        ..HostOptions::default()
    });
    let call = host.start(spec("c_expired"), HelperCommand::new("true"), true);
    let outcome = call.wait().await;
    assert_eq!(outcome.record.state, State::ApprovalExpired);
    assert_eq!(outcome.record.approval, ApprovalDecision::Expired);
    assert_eq!(outcome.record.pid, None);
    let shown = us(outcome.record.offset_of(State::AwaitingApproval).unwrap());
    let expired = us(outcome.record.offset_of(State::ApprovalExpired).unwrap());
    assert!(expired - shown >= us(100 * MS));
    assert!(expired - shown <= us(300 * MS));
}

#[tokio::test]
async fn dropping_the_handle_mid_run_still_finishes_and_records_the_call() {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script("sleep 0.3; echo done");
    let call = host.start(spec("c_dropped"), command, false);
    wait_for_state(&call, State::Dispatched).await;
    drop(call);
    poll_until(Duration::from_secs(10), "the record", || {
        records_of(&host, "c_dropped") == 1
    })
    .await;
    let record = host.finished_records().pop().unwrap();
    assert_eq!(record.state, State::Completed);
    assert!(record.client_disconnected);
    assert_eq!(record.on_client_disconnect, Some(DisconnectPolicy::Finish));
    assert_eq!(record.exit_status, Some(0));
    assert_eq!(record.stdout_bytes_seen, 5);
    assert_eq!(record.stream_end, StreamEnd::Eof);
    poll_until(Duration::from_secs(5), "the call to leave", || {
        host.live_calls() == 0
    })
    .await;
    // The final record reached the audit sink too, exactly once.
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

#[tokio::test]
async fn a_wait_future_given_up_is_a_disconnect_and_the_call_still_ends() {
    become_subreaper();
    let host = host(HostOptions {
        on_client_disconnect: Some(DisconnectPolicy::Cancel),
        ..HostOptions::default()
    });
    let call = host.start(
        spec("c_gave_up"),
        HelperCommand::new("sleep").arg("30"),
        false,
    );
    wait_for_state(&call, State::Dispatched).await;
    // The caller's own timeout drops the `wait` future, and the handle in it.
    let gave_up = tokio::time::timeout(50 * MS, call.wait()).await;
    assert!(gave_up.is_err());
    poll_until(Duration::from_secs(10), "the record", || {
        records_of(&host, "c_gave_up") == 1
    })
    .await;
    let record = host.finished_records().pop().unwrap();
    assert_eq!(record.state, State::CancelledAfterDispatch);
    assert_eq!(record.cancel_reason, Some(CancelReason::ClientDisconnected));
    assert_eq!(record.on_client_disconnect, Some(DisconnectPolicy::Cancel));
    assert_eq!(record.exit_signal, Some(15));
    assert_eq!(record.stream_end, StreamEnd::ReaderCompletedAfterCancel);
    assert_group_gone(record.pgid.unwrap());
}

#[tokio::test]
async fn a_program_that_cannot_be_spawned_fails_before_dispatch() {
    let host = host(HostOptions::default());
    let outcome = host
        .start(
            spec("c_missing"),
            HelperCommand::new("/nonexistent/prog"),
            false,
        )
        .wait()
        .await;
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

#[tokio::test]
async fn an_invalid_command_fails_before_its_attempt_is_recorded() {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let command = HelperCommand::new("echo").arg("a\0b");
    let outcome = host.start(spec("c_invalid"), command, true).wait().await;
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

#[tokio::test]
async fn shutdown_cancels_every_live_call_and_waits_for_their_records() {
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
    for call in &calls {
        wait_for_state(call, State::Dispatched).await;
    }
    assert_eq!(host.live_calls(), 3);
    let report = host.shutdown(Duration::from_secs(10)).await;
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
    let late = host
        .start(spec("c_late"), HelperCommand::new("true"), false)
        .wait()
        .await;
    assert_eq!(late.record.state, State::CancelledBeforeDispatch);
    assert_eq!(late.record.cancel_reason, Some(CancelReason::HostShutdown));
    assert_eq!(late.record.pid, None);
}

#[tokio::test]
async fn wait_timeout_gives_the_handle_back_until_the_call_ends() {
    let host = host(HostOptions::default());
    let call = host.start(
        spec("c_slow"),
        HelperCommand::new("sleep").arg("0.3"),
        false,
    );
    let call = call.wait_timeout(10 * MS).await.unwrap_err();
    assert!(!call.is_finished());
    let call = call.try_outcome().unwrap_err();
    let outcome = call.wait_timeout(Duration::from_secs(10)).await.unwrap();
    assert_eq!(outcome.record.state, State::Completed);
    assert!(!outcome.record.client_disconnected);
}

#[tokio::test]
async fn every_byte_of_a_large_flood_is_counted() {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("head -c 20000000 /dev/zero 1>&2");
    let outcome = host.start(spec("c_20mb"), command, false).wait().await;
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.stderr_bytes_seen, 20_000_000);
    assert_eq!(outcome.record.stderr_bytes_retained, 16_384);
    assert_eq!(outcome.record.stream_end, StreamEnd::Eof);
}

#[test]
fn a_host_cannot_be_made_outside_a_runtime() {
    let made = Host::new(Config::default(), HostOptions::default());
    assert_eq!(made.unwrap_err(), HostError::NoRuntime);
    assert_eq!(
        HostError::NoRuntime.to_string(),
        "Host::new was called outside a tokio runtime: call it from within one, \
         or pass a runtime handle to Host::with_runtime"
    );
}

#[test]
fn a_host_made_with_a_runtime_handle_runs_calls_started_from_outside_it() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let host = Host::with_runtime(
        Config::default(),
        HostOptions::default(),
        runtime.handle().clone(),
    )
    .unwrap();
    // Started from a plain thread; the owner runs on the runtime's worker.
    let call = host.start(spec("c_outside"), HelperCommand::new("true"), false);
    let outcome = runtime.block_on(call.wait());
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.exit_status, Some(0));
}

#[test]
fn an_invalid_config_names_its_field() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = Config {
        stderr_agent_excerpt_bytes: 1 << 20,
        ..Config::default()
    };
    let made = Host::with_runtime(config, HostOptions::default(), runtime.handle().clone());
    let error = made.unwrap_err();
    let HostError::InvalidConfig(invalid) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(invalid.field, "stderr_agent_excerpt_bytes");
    assert!(
        error
            .to_string()
            .starts_with("invalid configuration: helper_output.stderr_agent_excerpt_bytes: "),
        "{error}"
    );
}

#[test]
fn a_runtime_shut_down_under_a_call_leaves_no_helper_running() {
    become_subreaper();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pid_file = temp_path("tokio-runtime-gone-pid");
    let _ = std::fs::remove_file(&pid_file);
    let script = format!("echo $$ > '{}'; exec sleep 30", pid_file.display());
    let (host, call) = runtime.block_on(async {
        let host = host(HostOptions::default());
        let call = host.start(
            spec("c_runtime_gone"),
            HelperCommand::shell_script(script),
            false,
        );
        wait_for_state(&call, State::Dispatched).await;
        poll_until(Duration::from_secs(10), "the pid file", || {
            std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
        })
        .await;
        (host, call)
    });
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = std::fs::remove_file(&pid_file);
    // The owner task is dropped with its runtime: it kills the group, and
    // the call is no longer counted as live.
    drop(runtime);
    assert_group_gone(pid);
    assert_eq!(host.live_calls(), 0);
    assert!(!call.is_finished());
    assert!(host.finished_records().is_empty());
}

#[test]
fn handles_and_their_futures_can_move_across_tasks() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let host = host(HostOptions::default());
    send_sync(&host);
    let call = host.start(spec("c_send"), HelperCommand::new("true"), true);
    send_sync(&call);
    send_sync(&call.canceller());
    send(&call.wait_card(Duration::ZERO));
    send(&call.approve());
    send(&host.shutdown(Duration::ZERO));
    send(&call.wait());
}
