//! The front door: the builder's defaults, the one-line `Command` without
//! a host, debug grants, dropping a host with live calls, and an owner
//! that dies mid-call.
#![allow(clippy::unwrap_used)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use std::time::Instant;

use spillguard_core::{
    AuditEvent, AuditKind, CallKind, CallSettings, Config, DebugGrantError, Exit, ResultKind,
    State, StreamEnd,
};
use spillguard_host::{Approval, AuditSink, HelperCommand, HostOptions};

use super::{
    Recorder, assert_group_gone, poll_until, records_of, states, temp_path, timed_check_turn, wait,
    wait_for_state,
};
use crate::engine::{CallUnderTest, DefaultCall, HostUnderTest, request};

/// The builder fills in every field of the call from the command: a fresh
/// id per call, the host's session, the program's file name as action, the
/// program as target, and the shell-quoted command line as the card's
/// summary, so the card shows exactly what runs.
pub fn the_builder_fills_every_field_from_the_command<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions {
        session_id: Some("s_front".into()),
        ..HostOptions::default()
    });
    let echo = HelperCommand::new("/bin/echo").args(["it's", "two words"]);
    let call = host.launch(request(echo).approval(Approval::Required).into_request());
    let card = call.wait_card(Duration::from_secs(10)).unwrap();
    assert_eq!(card.action, "echo");
    assert_eq!(card.target, "/bin/echo");
    assert_eq!(card.summary, r"/bin/echo 'it'\''s' 'two words'");
    call.approve().unwrap();
    let first = wait(call);
    let second = wait(host.launch(request(HelperCommand::new("true")).into_request()));
    let record = &first.record;
    assert_eq!(record.call_id, card.call_id);
    assert!(record.call_id.starts_with("c_"), "{}", record.call_id);
    assert_eq!(record.call_id.len(), 18);
    assert_ne!(record.call_id, second.record.call_id);
    assert_eq!(record.session_id, "s_front");
    assert_eq!(second.record.session_id, "s_front");
    assert_eq!(
        (record.kind, record.action.as_str()),
        (CallKind::Action, "echo")
    );
    assert_eq!(first.stdout.to_vec(), b"it's two words\n");
    assert_eq!(first.exit(), Exit::Code(0));
    assert_eq!(second.record.action, "true");
}

/// A debug grant raises the stderr budget of the calls started under it,
/// within the configured ceiling, and they say `debug: true`; calls after
/// it is revoked keep the normal budget and say `debug: false`.
pub fn a_debug_grant_raises_the_budget_of_calls_started_under_it<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let flood = || HelperCommand::shell_script("head -c 200000 /dev/zero | tr '\\0' x 1>&2");
    assert_eq!(
        host.grant_debug(Duration::from_secs(60), 2 << 20),
        Err(DebugGrantError::AboveCeiling {
            asked: 2 << 20,
            ceiling: 1 << 20
        })
    );
    let normal = wait(host.launch(request(flood()).into_request()));
    host.grant_debug(Duration::from_secs(60), 65_536).unwrap();
    let debugged = wait(host.launch(request(flood()).into_request()));
    host.revoke_debug();
    let after = wait(host.launch(request(flood()).into_request()));
    let facts = |o: &spillguard_core::Outcome| {
        (
            o.record.debug,
            o.record.stderr_bytes_seen,
            o.record.stderr_bytes_retained,
        )
    };
    assert_eq!(facts(&normal), (false, 200_000, 16_384));
    assert_eq!(facts(&debugged), (true, 200_000, 65_536));
    assert_eq!(facts(&after), (false, 200_000, 16_384));
    let marker = "[stderr truncated: kept last 65536 of 200000 bytes]";
    assert_eq!(debugged.stderr.render().lines().next(), Some(marker));
}

/// A debug grant reaches the calls running when it is given (calls
/// started *or running* under it say `debug: true`): a call that emitted
/// 20,000 bytes before the grant keeps the 16,384 it retained then and
/// grows with the next 30,000 to 46,384; a call that ended before the
/// grant says `debug: false`; a running call whose grant is revoked before
/// its next bytes is back at 16,384 and still says `debug: true`.
pub fn a_debug_grant_reaches_the_calls_running_when_it_is_given<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    use std::sync::atomic::{AtomicU64, Ordering};

    let host = host(HostOptions::default());
    let early = wait(
        host.launch(
            request(HelperCommand::shell_script(
                "head -c 20000 /dev/zero | tr '\\0' x 1>&2",
            ))
            .into_request(),
        ),
    );
    // Each live call floods 20,000 bytes, waits for its file, then writes
    // 15,000 lines of "y\n"; a tap counts what its owner has read.
    let live = |name: &str| {
        let go = temp_path(name);
        let _ = std::fs::remove_file(&go);
        let script = format!(
            "head -c 20000 /dev/zero | tr '\\0' x 1>&2; \
             while [ ! -e '{}' ]; do sleep 0.01; done; \
             yes y | head -n 15000 1>&2",
            go.display()
        );
        let seen = Arc::new(AtomicU64::new(0));
        let tap = seen.clone();
        let call = host.launch(
            request(HelperCommand::shell_script(script))
                .stderr_tap(move |chunk| {
                    tap.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                })
                .into_request(),
        );
        (call, seen, go)
    };
    let (kept, kept_seen, kept_go) = live("kept");
    let (revoked, revoked_seen, revoked_go) = live("revoked");
    for seen in [&kept_seen, &revoked_seen] {
        poll_until(Duration::from_secs(10), "the first 20000 bytes", || {
            seen.load(Ordering::SeqCst) == 20_000
        });
    }
    // The owners have handled those bytes (the tap runs in the same step).
    host.grant_debug(Duration::from_secs(60), 65_536).unwrap();
    // An answer from each owner after the grant: its channel is in order,
    // so the grant was handled before the helper is let go on.
    let fence = |call: &H::Call| {
        assert_eq!(
            call.approve(),
            Err(spillguard_core::CallError::InvalidTransition {
                state: State::Dispatched,
                input: "approval_granted",
            })
        );
    };
    fence(&kept);
    fence(&revoked);
    std::fs::write(&kept_go, b"").unwrap();
    let kept = wait(kept);
    host.revoke_debug();
    fence(&revoked);
    std::fs::write(&revoked_go, b"").unwrap();
    let revoked = wait(revoked);
    let _ = std::fs::remove_file(&kept_go);
    let _ = std::fs::remove_file(&revoked_go);

    let facts = |o: &spillguard_core::Outcome| {
        (
            o.record.state,
            o.record.debug,
            o.record.stderr_bytes_seen,
            o.record.stderr_bytes_retained,
            o.record.stderr_retention_limited,
        )
    };
    assert_eq!(
        facts(&early),
        (State::Completed, false, 20_000, 16_384, false)
    );
    assert_eq!(
        facts(&kept),
        (State::Completed, true, 50_000, 46_384, false)
    );
    assert_eq!(
        facts(&revoked),
        (State::Completed, true, 50_000, 16_384, false)
    );
    // Nothing dropped before the grant came back: the window is the last
    // 16,384 x read before it, then every line after it.
    let text = kept.stderr.render_unredacted();
    assert_eq!(
        text.lines().next(),
        Some("[stderr truncated: kept last 46384 of 50000 bytes]")
    );
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept last 46384 of 50000 bytes]\n{}{}",
            "x".repeat(16_384),
            "y\n".repeat(15_000)
        )
    );
    assert_eq!(
        revoked.stderr.render_unredacted(),
        format!(
            "[stderr truncated: kept last 16384 of 50000 bytes]\n{}",
            "y\n".repeat(8_192)
        )
    );
    // The outcomes hold their reservations: at least what they retain, at
    // most their budgets and the margins of those that dropped bytes
    // (buffers grow by doubling, so where in between depends on how the
    // runtime's reads cut the stream).
    let pool = host.pool();
    let in_use = pool.in_use();
    let margins = 3 * spillguard_core::CUT_MARGIN as u64;
    assert!(
        (16_384 + 46_384 + 16_384..=16_384 + 65_536 + 16_384 + margins).contains(&in_use),
        "{in_use}"
    );
    drop((early, kept, revoked));
    assert_eq!(pool.in_use(), 0);
    assert!(pool.peak() <= pool.capacity());
}

/// The adapter's `Command` needs no `Host`: `output()` answers as
/// `std::process::Output` would (exit code or signal, stdout whole, stderr
/// as kept), with the record beside; a helper that cannot be spawned is
/// the OS error's kind; a stdout cut at its budget is an error naming both
/// counts unless the cut is allowed, and a larger budget returns it whole.
pub fn a_command_needs_no_host_and_answers_as_std_output<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let sh = |script: &str| HelperCommand::new("sh").arg("-c").arg(script);

    let output = host
        .default_output(&DefaultCall::of(sh("printf out; printf err 1>&2; exit 3")))
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(output.stdout, b"out");
    assert_eq!(output.stderr, b"err");
    let record = output.record();
    assert_eq!((record.exit_status, record.exit_signal), (Some(3), None));
    assert_eq!((record.stdout_bytes_seen, record.stderr_bytes_seen), (3, 3));

    // Stopped at its deadline: the signal that ended it, not an error.
    let started = Instant::now();
    let output = host
        .default_output(&DefaultCall {
            deadline: Some(Duration::from_millis(200)),
            ..DefaultCall::of(HelperCommand::new("sleep").arg("30"))
        })
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        (output.status.code(), output.status.signal()),
        (None, Some(15))
    );
    assert_eq!(output.record().state, State::CancelledAfterDispatch);
    assert!(started.elapsed() < Duration::from_secs(10));

    let missing = host
        .default_output(&DefaultCall::of(HelperCommand::new("/no/such/program")))
        .unwrap_err();
    assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);

    // 3,000,000 bytes against the 1 MiB default budget.
    let big = || sh("head -c 3000000 /dev/zero");
    let cut = host.default_output(&DefaultCall::of(big())).unwrap_err();
    let truncated = cut
        .get_ref()
        .and_then(|e| e.downcast_ref::<spillguard_host::StdoutTruncated>())
        .copied();
    assert_eq!(
        truncated,
        Some(spillguard_host::StdoutTruncated {
            seen: 3_000_000,
            kept: 1 << 20
        })
    );
    assert!(cut.to_string().contains("stdout_budget(bytes)"), "{cut}");
    let allowed = host
        .default_output(&DefaultCall {
            allow_cut: true,
            ..DefaultCall::of(big())
        })
        .unwrap();
    assert_eq!(allowed.stdout.len(), 1 << 20);
    assert!(allowed.record().stdout_truncated);
    assert_eq!(allowed.status.code(), Some(0));
    let whole = host
        .default_output(&DefaultCall {
            stdout_budget: Some(8 << 20),
            ..DefaultCall::of(big())
        })
        .unwrap();
    assert_eq!(whole.stdout, vec![0; 3_000_000]);
    assert!(!whole.record().stdout_truncated);

    // The same on a host's call: `into_result()` fails on the cut unless
    // it was allowed, and keeps the outcome either way.
    let outcome_of = |builder: spillguard_host::CallBuilder<'static, _>| {
        host.launch(builder.into_request())
            .wait_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the call did not end"))
    };
    match outcome_of(request(big())).into_result() {
        Err(spillguard_core::OutcomeError::StdoutTruncated { truncated, outcome }) => {
            assert_eq!((truncated.seen, truncated.kept), (3_000_000, 1 << 20));
            assert_eq!(outcome.stdout_bytes().len(), 1 << 20);
            assert_eq!(outcome.record.state, State::Completed);
        }
        other => panic!("not a truncation error: {other:?}"),
    }
    let allowed = outcome_of(request(big()).allow_stdout_truncation())
        .into_result()
        .unwrap();
    assert!(allowed.record.stdout_truncated);
    assert_eq!(allowed.stdout_bytes().len(), 1 << 20);
    let whole = outcome_of(request(big()).stdout_budget(8 << 20))
        .into_result()
        .unwrap();
    assert_eq!(whole.stdout_bytes().len(), 3_000_000);
}

/// A call keeps what it needs of its host: dropping the host (its last
/// clone) with live calls cancels none of them; each runs to its end,
/// keeps its stdout and writes its record. Only an explicit shutdown
/// cancels live calls.
pub fn calls_outlive_the_host_value_that_started_them<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let calls: Vec<_> = (0..3)
        .map(|i| {
            let script = format!("sleep 0.3; echo done-{i}");
            host.launch(
                request(HelperCommand::new("sh").arg("-c").arg(script))
                    .call_id(format!("c_outlives_{i}"))
                    .into_request(),
            )
        })
        .collect();
    for call in &calls {
        wait_for_state(call, State::Dispatched);
    }
    let runtime = host.drop_host();
    for (i, call) in calls.into_iter().enumerate() {
        let outcome = wait(call);
        let record = &outcome.record;
        assert_eq!(record.call_id, format!("c_outlives_{i}"));
        assert_eq!(record.state, State::Completed);
        assert_eq!(record.cancel_reason, None);
        assert_eq!(outcome.exit(), Exit::Code(0));
        assert_eq!(outcome.stdout.to_vec(), format!("done-{i}\n").into_bytes());
        assert_group_gone(record.pgid.unwrap());
        let kinds = recorder.kinds(&record.call_id);
        assert_eq!(kinds.last().map(String::as_str), Some("final"));
    }
    drop(runtime);
}

/// Panics when the helper is dispatched, once it wrote its pid to the file
/// named: a bug in a sink, standing for any bug that ends an owner
/// mid-call.
#[derive(Debug)]
struct PanicsAtDispatch(std::path::PathBuf);

impl AuditSink for PanicsAtDispatch {
    fn write(&self, event: &AuditEvent) -> std::io::Result<()> {
        if matches!(
            event.kind,
            AuditKind::Transition {
                to: State::Dispatched,
                ..
            }
        ) {
            // The owner dies with its helper running: once the helper
            // has written its pid (it is killed at once otherwise, which
            // proves nothing and leaves no pid to look for).
            poll_until(Duration::from_secs(10), "the helper's start", || {
                std::fs::metadata(&self.0).is_ok_and(|m| m.len() > 0)
            });
            panic!("audit sink bug at dispatch");
        }
        Ok(())
    }
}

/// An owner that ends while its helper runs (here it panics) kills the
/// helper's group and lets go of the call: the same policy on every
/// runtime. Waiting reports the owner's end, the host no longer counts the
/// call, and no helper is left running unsupervised.
pub fn an_owner_that_dies_mid_call_kills_its_helper_and_lets_go<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let pid_file = temp_path("owner-dies.pid");
    let _ = std::fs::remove_file(&pid_file);
    let host = host(HostOptions {
        audit: Some(Arc::new(PanicsAtDispatch(pid_file.clone()))),
        ..HostOptions::default()
    });
    let script = format!("echo $$ > '{}'; exec sleep 30", pid_file.display());
    let call = host.launch(
        request(HelperCommand::shell_script(script))
            .call_id("c_owner_dies")
            .into_request(),
    );
    let waited = catch_unwind(AssertUnwindSafe(|| {
        call.wait_timeout(Duration::from_secs(30)).is_ok()
    }));
    assert!(waited.is_err(), "waiting must report the owner's end");
    poll_until(Duration::from_secs(10), "the call to be let go of", || {
        host.live_calls() == 0
    });
    assert_eq!(records_of(&host, "c_owner_dies"), 0);
    let mut pid = None;
    poll_until(Duration::from_secs(10), "the helper's pid", || {
        pid = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok());
        pid.is_some()
    });
    let _ = std::fs::remove_file(&pid_file);
    assert_group_gone(pid.unwrap());
}

/// A helper whose JSON result reports a remote failure ends
/// `failed_remote` although it exited 0 with a clean stderr; its result is
/// in the outcome. A classifier can decide otherwise, and a result that is
/// not JSON is recorded, never an error: the exit code decides.
pub fn a_result_that_reports_a_remote_failure_ends_failed_remote<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let refused = r#"echo '{"ok": false, "error": "quota exceeded"}'"#;
    let said_no = wait(
        host.launch(
            request(HelperCommand::shell_script(refused))
                .result_json()
                .into_request(),
        ),
    );
    assert_eq!(said_no.record.state, State::FailedRemote);
    assert_eq!(said_no.record.result_kind, Some(ResultKind::RemoteFailure));
    assert_eq!(said_no.exit(), Exit::Code(0));
    assert_eq!(said_no.record.stderr_bytes_seen, 0);
    assert_eq!(said_no.result().unwrap()["error"], "quota exceeded");

    let denied = wait(
        host.launch(
            request(HelperCommand::shell_script(
                r#"echo '{"status": "denied"}'"#,
            ))
            .classify_result(|value| {
                if value["status"] == "denied" {
                    ResultKind::RemoteFailure
                } else {
                    ResultKind::Success
                }
            })
            .into_request(),
        ),
    );
    assert_eq!(denied.record.state, State::FailedRemote);

    let prose = wait(
        host.launch(
            request(HelperCommand::shell_script("echo 'all good'"))
                .result_json()
                .into_request(),
        ),
    );
    assert_eq!(prose.record.state, State::Completed);
    assert_eq!(prose.record.result_kind, None);
    assert!(prose.result().is_none());
    let error = prose.record.result_error.as_deref().unwrap();
    assert!(
        error.starts_with("invalid JSON at line 1 column 1"),
        "{error}"
    );
    assert_eq!(prose.stdout.to_vec(), b"all good\n");
}

/// Stderr overflow never hides a result: a helper that floods 1 MiB of
/// stderr, then prints its result, ends `completed` with the result whole
/// and its stderr counted, cut to the budget and marked.
pub fn stderr_overflow_never_hides_the_result<H: HostUnderTest>(host: fn(HostOptions) -> H) {
    let host = host(HostOptions::default());
    let script = r#"yes eeee | head -c 1048576 1>&2; echo '{"ok": true, "n": 42}'"#;
    let outcome = wait(
        host.launch(
            request(HelperCommand::shell_script(script))
                .result_json()
                .into_request(),
        ),
    );
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.result_kind, Some(ResultKind::Success));
    assert_eq!(outcome.result().unwrap()["n"], 42);
    assert_eq!(
        (
            record.stderr_bytes_seen,
            record.stderr_bytes_retained,
            record.stderr_truncated
        ),
        (1_048_576, 16_384, true)
    );
    let marker = "[stderr truncated: kept last 16384 of 1048576 bytes]";
    assert_eq!(outcome.stderr.render().lines().next(), Some(marker));
    let excerpt = outcome.agent_excerpt();
    let first = excerpt.lines().next().unwrap();
    assert!(
        first.starts_with("[stderr truncated: kept last 40"),
        "{first}"
    );
    assert!(first.ends_with(" of 1048576 bytes]"), "{first}");
    assert!((4080..=4096).contains(&excerpt.len()), "{}", excerpt.len());
    let body: Vec<&str> = excerpt.lines().skip(2).collect();
    assert!(body.len() > 800, "{}", body.len());
    assert!(body[..body.len() - 1].iter().all(|line| *line == "eeee"));
}

/// A spawn failure keeps its error kind: a missing program is
/// `not_found`, a file that is not executable `permission_denied`.
pub fn a_spawn_failure_keeps_its_error_kind<H: HostUnderTest>(host: fn(HostOptions) -> H) {
    use std::os::unix::fs::PermissionsExt;

    let host = host(HostOptions::default());
    let plain = temp_path("not-executable");
    std::fs::write(&plain, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let missing = wait(host.launch(request(HelperCommand::new("/no/such/program")).into_request()));
    let refused = wait(host.launch(request(HelperCommand::new(&plain)).into_request()));
    let _ = std::fs::remove_file(&plain);
    for (outcome, kind) in [(&missing, "not_found"), (&refused, "permission_denied")] {
        let record = &outcome.record;
        assert_eq!(record.state, State::FailedBeforeDispatch);
        assert_eq!(record.spawn_error_kind.as_deref(), Some(kind));
        assert_eq!(outcome.exit(), Exit::Unobserved);
        assert_eq!(record.stream_end, StreamEnd::NotStarted);
    }
}

/// Settings made by hand are checked as a config is: an excerpt too small
/// to hold the marker fails the call before dispatch, naming the field,
/// and nothing runs.
pub fn settings_made_by_hand_are_validated_before_anything_runs<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let mut settings = CallSettings::action(&Config::default());
    settings.excerpt_bytes = 1;
    let outcome = wait(
        host.launch(
            request(HelperCommand::new("true"))
                .settings(settings)
                .into_request(),
        ),
    );
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(
        record.failure.as_deref(),
        Some("call settings: excerpt_bytes: 1 is below the minimum of 124")
    );
    assert_eq!(record.pid, None);
    assert_eq!(
        states(record),
        [State::Received, State::FailedBeforeDispatch]
    );
}

/// A call its caller refuses (`CallBuilder::refuse`: a tool call whose
/// arguments break the tool's schema) ends `failed_before_dispatch` with
/// the caller's reason, asks no approval although it requires one, runs
/// nothing, and is recorded and audited like any call.
pub fn a_call_its_caller_refuses_is_recorded_and_never_runs<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let sink = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(sink.clone()),
        ..HostOptions::default()
    });
    let marker = temp_path("refused-ran");
    let touch = HelperCommand::new("touch").arg(&marker);
    let call = host.launch(
        request(touch)
            .approval(Approval::Required)
            .refuse("host: \"-x\" does not match ^[a-z]+$")
            .into_request(),
    );
    assert_eq!(call.wait_card(Duration::from_millis(200)), None);
    let outcome = wait(call);
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(
        record.failure.as_deref(),
        Some("host: \"-x\" does not match ^[a-z]+$")
    );
    assert_eq!(record.pid, None);
    assert_eq!(record.stream_end, StreamEnd::NotStarted);
    assert_eq!(
        states(record),
        [State::Received, State::FailedBeforeDispatch]
    );
    assert!(!marker.exists(), "the refused helper ran");
    assert_eq!(records_of(&host, &record.call_id), 1);
    let kinds = sink.kinds(&record.call_id);
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("transition:received->failed_before_dispatch")
    );
    assert_eq!(kinds.last().map(String::as_str), Some("final"));
}

/// A successful helper whose descendant left the group and holds the
/// streams (`setsid sleep 20 &`) ends `completed` soon after the drain
/// window: it does not pay the grace and kill wait meant for a helper that
/// is still alive (7.25 s with the defaults before).
pub fn a_successful_call_with_an_escaped_descendant_ends_soon_after_the_drain_window<
    H: HostUnderTest,
>(
    host: fn(HostOptions) -> H,
) {
    let _turn = timed_check_turn();
    let host = host(HostOptions::default());
    let pid_file = temp_path("escapee.pid");
    let _ = std::fs::remove_file(&pid_file);
    let script = format!(
        "setsid sh -c 'echo $$ > \"{}\"; exec sleep 20' & echo ok",
        pid_file.display()
    );
    let started = Instant::now();
    // Opted out of its control group, which would end the escapee with
    // the call.
    let call = request(HelperCommand::shell_script(script)).contain_tree(false);
    let outcome = wait(host.launch(call.into_request()));
    let elapsed = started.elapsed();
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed);
    assert_eq!(outcome.stdout.to_vec(), b"ok\n");
    assert_eq!(record.stream_end, StreamEnd::AbandonedOpen);
    assert!(record.descendants_signalled);
    let exited = record.exited_offset_us.unwrap();
    let done = record.offset_of(State::Completed).unwrap();
    let after_exit = done.saturating_sub(Duration::from_micros(exited));
    // Drain window 250 ms, then at most 100 ms to KILL and 100 ms to give
    // up: 450 ms; generous for a loaded machine, far below 7.25 s.
    assert!(after_exit >= Duration::from_millis(440), "{after_exit:?}");
    assert!(after_exit < Duration::from_millis(1_500), "{after_exit:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    let mut pid = None;
    poll_until(Duration::from_secs(10), "the escapee's pid", || {
        pid = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok());
        pid.is_some()
    });
    let _ = std::fs::remove_file(&pid_file);
    if let Some(pid) = pid.and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}
