//! Behaviour checks with exact assertions, written once and run on every
//! runtime: a normal run, approval answered or left to expire, a dropped
//! handle, a spawn that fails, an invalid command, shutdown with live
//! calls, stdin, large floods, discovery budgets and the audit sinks.
//!
//! Where a scenario ([`crate::catalog`]) compares a run with expectations
//! and reports every difference, a check here panics at its first wrong
//! fact. Each check takes the driver's constructor for a host with the
//! default config (e.g. [`drivers::std::host`](crate::drivers::std::host))
//! and talks to it through [`HostUnderTest`] and [`CallUnderTest`].
//! [`behaviour_suite!`](crate::behaviour_suite) makes one `#[test]` per
//! check for a runtime.
//!
//! Checks that bound a duration tightly (a deadline, a grace, the drain
//! window, the approval timeout) never run while a scenario does
//! ([`timed_check_turn`], [`scenario_turn`]), so no scenario's floods delay
//! them; they may run alongside each other.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use rustix::process::{Pid, WaitId, WaitIdOptions};
use spillguard_core::audit::{Verdict, VerifyOptions, verify_and_read};
use spillguard_core::{
    ApprovalDecision, AuditEvent, AuditKind, CallError, CallKind, CallRecord, CallSpec,
    CancelReason, DisconnectPolicy, Signal, State, StreamEnd,
};
use spillguard_std::{
    AuditSink, ChainedFileAudit, ChainedFileOptions, HelperCommand, HostOptions, JsonLinesAudit,
};

use crate::engine::{CallUnderTest, HostUnderTest};
use crate::measure::become_subreaper;

const MS: Duration = Duration::from_millis(1);

/// Runs that measure durations take turns: a scenario runs alone, the
/// checks that bound a duration run together between scenarios.
static TIMED_RUNS: RwLock<()> = RwLock::new(());

/// A scenario's turn: no other scenario and no timed check runs until the
/// guard is dropped.
pub fn scenario_turn() -> RwLockWriteGuard<'static, ()> {
    TIMED_RUNS.write().unwrap_or_else(PoisonError::into_inner)
}

/// A timed check's turn: no scenario runs until the guard is dropped.
pub fn timed_check_turn() -> RwLockReadGuard<'static, ()> {
    TIMED_RUNS.read().unwrap_or_else(PoisonError::into_inner)
}

/// `yes` floods stderr past a 300 ms deadline: cancelled with one TERM
/// when the deadline fires, the last 16 KiB kept behind the exact marker,
/// the pool share held until the outcome is dropped, the group gone.
pub fn a_flood_past_its_deadline_is_cancelled_and_keeps_the_last_16_kib<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = timed_check_turn();
    become_subreaper();
    let deadline = 300 * MS;
    let host = host(HostOptions {
        deadline: Some(deadline),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script("yes helper-diagnostic 1>&2");
    let outcome = wait(host.start(spec("c_flood"), command, false));
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
    // The deadline runs from dispatch, and the TERM is sent when it fires.
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

/// A helper that writes a line to each stream and exits 3: `failed_local`
/// with the exact counts, the timeline, its own process group and the
/// enlarged pipes.
pub fn a_normal_run_reports_its_exit_code_and_exact_counts<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("echo out; echo err 1>&2; exit 3");
    let outcome = wait(host.start(spec("c_normal"), command, false));
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
    let call = host.start(spec("c_trap"), HelperCommand::shell_script(script), false);
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
    let outcome = wait(host.start(spec("c_grandchild"), command, false));
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

/// A denied call shows its card once, refuses a second answer, spawns
/// nothing, and audits its lifecycle in order.
pub fn a_denied_call_shows_its_card_once_and_spawns_nothing<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let trace = temp_path("denied-ran");
    let _ = std::fs::remove_file(&trace);
    let command = HelperCommand::shell_script(format!("touch '{}'", trace.display()));
    let call = host.start(spec("c_denied"), command, true);

    let card = call.wait_card(Duration::from_secs(10)).unwrap();
    assert_eq!(card.call_id, "c_denied");
    assert_eq!(card.action, "local.test");
    assert_eq!(card.target, "localhost");
    assert_eq!(card.summary, "test helper");
    assert_eq!(card.expires_in, Duration::from_secs(120));
    assert_eq!(call.state(), State::AwaitingApproval);
    assert_eq!(call.card(), Some(card));

    assert_eq!(call.deny(), Ok(()));
    assert_eq!(
        call.deny(),
        Err(CallError::InvalidTransition {
            state: State::Denied,
            input: "approval_denied"
        })
    );
    let outcome = wait(call);
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

/// An approved call runs its helper to completion.
pub fn an_approved_call_runs_its_helper<H: HostUnderTest>(host: fn(HostOptions) -> H) {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("echo approved");
    let call = host.start(spec("c_approved"), command, true);
    assert!(call.wait_card(Duration::from_secs(10)).is_some());
    assert_eq!(call.approve(), Ok(()));
    let outcome = wait(call);
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

/// A card nobody answers expires 100 ms after it was shown.
pub fn an_unanswered_card_expires<H: HostUnderTest>(host: fn(HostOptions) -> H) {
    let _turn = timed_check_turn();
    let host = host(HostOptions {
        approval_timeout: Some(100 * MS),
        ..HostOptions::default()
    });
    let call = host.start(spec("c_expired"), HelperCommand::new("true"), true);
    let outcome = wait(call);
    assert_eq!(outcome.record.state, State::ApprovalExpired);
    assert_eq!(outcome.record.approval, ApprovalDecision::Expired);
    assert_eq!(outcome.record.pid, None);
    let shown = us(outcome.record.offset_of(State::AwaitingApproval).unwrap());
    let expired = us(outcome.record.offset_of(State::ApprovalExpired).unwrap());
    assert!(expired - shown >= us(100 * MS), "{}", expired - shown);
    assert!(expired - shown <= us(300 * MS), "{}", expired - shown);
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
    let call = host.start(spec("c_dropped"), command, false);
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
    let call = host.start(
        spec("c_drop_cancel"),
        HelperCommand::new("sleep").arg("30"),
        false,
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

/// A program that does not exist fails before dispatch, naming the error.
pub fn a_program_that_cannot_be_spawned_fails_before_dispatch<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let outcome = wait(host.start(
        spec("c_missing"),
        HelperCommand::new("/nonexistent/prog"),
        false,
    ));
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

/// A command with a NUL byte fails before its attempt is audited.
pub fn an_invalid_command_fails_before_its_attempt_is_recorded<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let command = HelperCommand::new("echo").arg("a\0b");
    let outcome = wait(host.start(spec("c_invalid"), command, true));
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

/// Shutdown cancels three live calls with TERM and waits for their
/// records; a call started afterwards is cancelled before dispatch.
pub fn shutdown_cancels_every_live_call_and_waits_for_their_records<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
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
    let late = wait(host.start(spec("c_late"), HelperCommand::new("true"), false));
    assert_eq!(late.record.state, State::CancelledBeforeDispatch);
    assert_eq!(late.record.cancel_reason, Some(CancelReason::HostShutdown));
    assert_eq!(late.record.pid, None);
}

/// `wait_timeout` and `try_outcome` give the handle back while the call
/// runs; waiting is not a disconnect.
pub fn wait_timeout_gives_the_handle_back_until_the_call_ends<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let call = host.start(
        spec("c_slow"),
        HelperCommand::new("sleep").arg("0.3"),
        false,
    );
    let Err(call) = call.wait_timeout(10 * MS) else {
        panic!("an outcome after 10 ms of a 300 ms sleep");
    };
    assert!(!call.state().is_terminal());
    let Err(call) = call.try_outcome() else {
        panic!("an outcome before the sleep ended");
    };
    let Ok(outcome) = call.wait_timeout(Duration::from_secs(10)) else {
        panic!("no outcome within 10 s");
    };
    assert_eq!(outcome.record.state, State::Completed);
    assert!(!outcome.record.client_disconnected);
}

/// 1 MiB of stdin reaches `wc -c`; without bytes stdin is null.
pub fn stdin_bytes_reach_the_helper_and_stdin_is_null_otherwise<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let input = vec![b'i'; 1 << 20];
    let counted = wait(host.start(
        spec("c_stdin"),
        HelperCommand::new("wc").arg("-c").stdin_bytes(input),
        false,
    ));
    assert_eq!(counted.record.state, State::Completed);
    assert_eq!(
        String::from_utf8_lossy(&counted.stdout.to_vec()).trim(),
        "1048576"
    );

    let null = wait(host.start(spec("c_null"), HelperCommand::new("wc").arg("-c"), false));
    assert_eq!(String::from_utf8_lossy(&null.stdout.to_vec()).trim(), "0");
}

/// Every byte of 20 MB on stderr is counted; 16 KiB are kept.
pub fn every_byte_of_a_large_flood_is_counted<H: HostUnderTest>(host: fn(HostOptions) -> H) {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("head -c 20000000 /dev/zero 1>&2");
    let outcome = wait(host.start(spec("c_20mb"), command, false));
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.stderr_bytes_seen, 20_000_000);
    assert_eq!(outcome.record.stderr_bytes_retained, 16_384);
    assert_eq!(outcome.record.stream_end, StreamEnd::Eof);
}

/// A discovery keeps 4 KiB of stderr, audits no attempt, and can never
/// need approval.
pub fn a_discovery_call_has_its_own_budget_and_no_attempt<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let discovery = CallSpec {
        kind: CallKind::Discovery,
        ..spec("c_discovery")
    };
    let command = HelperCommand::shell_script("head -c 100000 /dev/zero 1>&2; echo web-3");
    let outcome = wait(host.start(discovery.clone(), command, false));
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.stderr_bytes_seen, 100_000);
    assert_eq!(outcome.record.stderr_bytes_retained, 4096);
    assert_eq!(outcome.stdout.to_vec(), b"web-3\n");
    assert!(
        !recorder
            .kinds("c_discovery")
            .contains(&"attempt".to_owned())
    );

    // A discovery never acts, so it can never need approval.
    let asked = wait(host.start(
        CallSpec {
            call_id: "c_discovery_approval".into(),
            ..discovery
        },
        HelperCommand::new("true"),
        true,
    ));
    assert_eq!(asked.record.state, State::FailedBeforeDispatch);
    assert_eq!(
        asked.record.failure.as_deref(),
        Some("a discovery call cannot need approval: it never acts")
    );
}

/// The JSON-lines sink holds one line per event, in lifecycle order, the
/// last being the record the caller got.
pub fn the_json_lines_audit_holds_the_lifecycle_in_order<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let path = temp_path("audit.jsonl");
    let _ = std::fs::remove_file(&path);
    let host = host(HostOptions {
        audit: Some(Arc::new(JsonLinesAudit::open(&path).unwrap())),
        ..HostOptions::default()
    });
    let outcome = wait(host.start(spec("c_audited"), HelperCommand::new("true"), false));
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
    assert!(lines.iter().all(|l| l["call_id"] == "c_audited"));
    let last = &lines[5]["kind"]["final"];
    assert_eq!(last, &serde_json::to_value(&outcome.record).unwrap());
    assert_eq!(host.audit_failures(), 0);
}

/// A sink whose disk is always full.
#[derive(Debug)]
struct FullDisk;

impl AuditSink for FullDisk {
    fn write(&self, _event: &AuditEvent) -> std::io::Result<()> {
        Err(std::io::Error::other("no space left on device"))
    }
}

/// An attempt that cannot be audited fails the call closed: nothing is
/// spawned, and every failed write is counted.
pub fn an_attempt_that_cannot_be_audited_spawns_nothing<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let trace = temp_path("audit-fail-trace");
    let _ = std::fs::remove_file(&trace);
    let host = host(HostOptions {
        audit: Some(Arc::new(FullDisk)),
        ..HostOptions::default()
    });
    let script = format!("touch {}", trace.display());
    let outcome = wait(host.start(
        spec("c_audit_full"),
        HelperCommand::shell_script(script),
        false,
    ));
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(
        record.failure.as_deref(),
        Some("audit log: no space left on device")
    );
    assert_eq!((record.pid, record.audit_failures), (None, 1));
    assert!(!trace.exists(), "the helper must not have run");
    // The transition into `validated`, the attempt, and the events after the
    // record: every write failed and was counted by the host.
    assert_eq!(host.audit_failures(), 5);
}

/// A disk that fills up after `left` events: the writes after that fail
/// with ENOSPC before they reach the log.
#[derive(Debug)]
struct DiskFullAfter {
    log: ChainedFileAudit,
    left: std::sync::atomic::AtomicU64,
}

impl AuditSink for DiskFullAfter {
    fn write(&self, event: &AuditEvent) -> std::io::Result<()> {
        use std::sync::atomic::Ordering;
        let took = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        match took {
            Ok(_) => self.log.write(event),
            Err(_) => Err(std::io::Error::from_raw_os_error(28)),
        }
    }
}

/// The chained log's disk fills up at the attempt: the call fails closed,
/// nothing is spawned, and what reached the log still verifies.
pub fn a_full_disk_at_the_attempt_fails_the_call_closed_and_the_log_stays_valid<
    H: HostUnderTest,
>(
    host: fn(HostOptions) -> H,
) {
    let path = temp_path("full.log");
    let trace = temp_path("full-trace");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&trace);
    let sink = Arc::new(DiskFullAfter {
        log: ChainedFileAudit::open(&path, ChainedFileOptions::default()).unwrap(),
        left: 1.into(),
    });
    let host = host(HostOptions {
        audit: Some(sink.clone()),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script(format!("touch '{}'", trace.display()));
    let outcome = wait(host.start(spec("c_full"), command, false));
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(
        record.failure.as_deref(),
        Some("audit log: No space left on device (os error 28)")
    );
    assert_eq!((record.pid, record.audit_failures), (None, 1));
    assert!(!trace.exists(), "nothing was spawned");
    // The `opened` entry and the transition to `validated` reached the
    // log, which verifies; the attempt and the three events after it
    // failed and were counted.
    let anchor = sink.log.anchor();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(anchor.records, 2);
    let (verdict, _) = verify_and_read(
        &bytes,
        VerifyOptions {
            anchor: Some(&anchor),
            key: None,
        },
    );
    assert_eq!(
        verdict,
        Verdict::Ok {
            records: 2,
            head: anchor.head
        }
    );
    assert_eq!(host.audit_failures(), 4);
    let _ = std::fs::remove_file(&path);
}

/// One `#[test]` per behaviour check, on the runtime whose driver module
/// is given: `spillguard_tests::behaviour_suite!(spillguard_tests::drivers::std);`.
#[macro_export]
macro_rules! behaviour_suite {
    ($driver:path) => {
        $crate::behaviour_suite!(
            $driver;
            a_flood_past_its_deadline_is_cancelled_and_keeps_the_last_16_kib,
            a_normal_run_reports_its_exit_code_and_exact_counts,
            a_helper_that_ignores_term_is_killed_once_after_the_grace,
            a_grandchild_holding_the_streams_is_signalled_after_the_drain_window,
            a_denied_call_shows_its_card_once_and_spawns_nothing,
            an_approved_call_runs_its_helper,
            an_unanswered_card_expires,
            dropping_the_handle_mid_run_still_finishes_and_records_the_call,
            dropping_the_handle_under_the_cancel_policy_stops_the_helper,
            a_program_that_cannot_be_spawned_fails_before_dispatch,
            an_invalid_command_fails_before_its_attempt_is_recorded,
            shutdown_cancels_every_live_call_and_waits_for_their_records,
            wait_timeout_gives_the_handle_back_until_the_call_ends,
            stdin_bytes_reach_the_helper_and_stdin_is_null_otherwise,
            every_byte_of_a_large_flood_is_counted,
            a_discovery_call_has_its_own_budget_and_no_attempt,
            the_json_lines_audit_holds_the_lifecycle_in_order,
            an_attempt_that_cannot_be_audited_spawns_nothing,
            a_full_disk_at_the_attempt_fails_the_call_closed_and_the_log_stays_valid,
        );
    };
    ($driver:path; $($name:ident),+ $(,)?) => {
        mod behaviour {
            use $driver as driver;
            $(
                #[test]
                fn $name() {
                    $crate::behaviour::$name(driver::host);
                }
            )+
        }
    };
}

/// Waits for the outcome; panics after 30 s.
fn wait<C: CallUnderTest>(call: C) -> spillguard_core::Outcome {
    match call.wait_timeout(Duration::from_secs(30)) {
        Ok(outcome) => outcome,
        Err(_) => panic!("no outcome within 30 s"),
    }
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn states(record: &CallRecord) -> Vec<State> {
    record.timeline.iter().map(|m| m.state).collect()
}

fn signals(record: &CallRecord) -> Vec<Signal> {
    record.signals.iter().map(|s| s.signal).collect()
}

/// A call spec for an action named `local.test` with this id.
fn spec(call_id: &str) -> CallSpec {
    CallSpec {
        call_id: call_id.into(),
        session_id: "s_test".into(),
        kind: CallKind::Action,
        action: "local.test".into(),
        target: "localhost".into(),
        summary: "test helper".into(),
    }
}

/// A path in the temp dir unique to this process, its thread and `name`
/// (the checks of the three runtimes may share a process).
fn temp_path(name: &str) -> PathBuf {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("main").replace("::", "-");
    std::env::temp_dir().join(format!(
        "spillguard-behaviour-{}-{test}-{name}",
        std::process::id()
    ))
}

/// Polls `done` every 5 ms until it holds; panics after `limit`.
fn poll_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_for_state(call: &impl CallUnderTest, state: State) {
    poll_until(Duration::from_secs(10), state.as_str(), || {
        call.state() == state
    });
}

fn records_of(host: &impl HostUnderTest, call_id: &str) -> usize {
    host.finished_records()
        .iter()
        .filter(|r| r.call_id == call_id)
        .count()
}

/// Asserts that no process of group `pgid` is left: reaps the group's dead
/// orphans (the helper itself was reaped by the adapter before its record),
/// then expects `kill(-pgid, 0)` to fail with ESRCH within 2 s.
fn assert_group_gone(pgid: u32) {
    let pid = Pid::from_raw(pgid as i32).expect("a valid pgid");
    poll_until(
        Duration::from_secs(2),
        "the helper's group to be gone",
        || {
            while let Ok(Some(_)) = rustix::process::waitid(
                WaitId::Pgid(Some(pid)),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            ) {}
            rustix::process::test_kill_process_group(pid) == Err(rustix::io::Errno::SRCH)
        },
    );
}

/// An audit sink that keeps every event in memory.
#[derive(Debug, Default)]
struct Recorder {
    events: Mutex<Vec<AuditEvent>>,
}

impl AuditSink for Recorder {
    fn write(&self, event: &AuditEvent) -> std::io::Result<()> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
        Ok(())
    }
}

impl Recorder {
    /// The events of `call_id`, as their JSON kind tags (`attempt`,
    /// `transition:received->validated`, `final`).
    fn kinds(&self, call_id: &str) -> Vec<String> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|e| e.call_id == call_id)
            .map(|e| {
                let kind = serde_json::to_value(&e.kind).unwrap();
                let (tag, body) = kind.as_object().unwrap().iter().next().unwrap();
                match tag.as_str() {
                    "transition" => format!(
                        "transition:{}->{}",
                        body["from"].as_str().unwrap(),
                        body["to"].as_str().unwrap()
                    ),
                    other => other.to_owned(),
                }
            })
            .collect()
    }
}
