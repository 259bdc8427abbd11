//! A run's outcome: its exit, its counts, its stdin, and the failures
//! before dispatch.
#![allow(clippy::unwrap_used)]

use std::os::unix::ffi::OsStringExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spillguard_core::{ApprovalDecision, CancelReason, Signal, State, StreamEnd};
use spillguard_host::CallBuilder;
use spillguard_std::{Approval, HelperCommand, HostOptions};

use super::{
    MS, Recorder, assert_group_gone, scenario_turn, signals, states, timed_check_turn, us, wait,
};
use crate::engine::{CallUnderTest, HostUnderTest, Requests, request};
use crate::measure::become_subreaper;

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
    let outcome = wait(host.launch(request(command).call_id("c_flood").into_request()));
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
    // The window and the margin kept before it.
    assert_eq!(
        host.pool().in_use(),
        16_384 + spillguard_core::CUT_MARGIN as u64
    );
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
    let outcome = wait(host.launch(request(command).call_id("c_normal").into_request()));
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

/// A program that does not exist fails before dispatch, naming the error.
pub fn a_program_that_cannot_be_spawned_fails_before_dispatch<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let outcome = wait(
        host.launch(
            request(HelperCommand::new("/nonexistent/prog"))
                .call_id("c_missing")
                .into_request(),
        ),
    );
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(
        record.failure.as_deref(),
        Some("spawn failed: /nonexistent/prog: NotFound: No such file or directory (os error 2)")
    );
    assert_eq!(record.spawn_error_kind.as_deref(), Some("not_found"));
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

/// The program is looked up in the helper's own `PATH` (and a relative
/// entry in its own directory), never the host's: a program only there
/// runs, one only in the host's `PATH` is not found, exactly as
/// `std::process::Command` does for the same command.
pub fn a_helper_s_own_path_finds_its_program_as_std_does<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    use std::os::unix::fs::PermissionsExt;
    let host = host(HostOptions::default());
    let dir = std::env::temp_dir().join(format!(
        "sg-own-path-{}-{}",
        std::process::id(),
        std::any::type_name::<H>().len()
    ));
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let tool = dir.join("bin/only-here");
    std::fs::write(&tool, "#!/bin/sh\necho found\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.join("bin");
    // (the helper's PATH, its directory, the program): found / not found
    // as std finds it.
    let cases: [(&std::ffi::OsStr, Option<&std::path::Path>, &str); 4] = [
        (bin.as_os_str(), None, "only-here"),
        // `sh` is in the host's PATH, not in the helper's.
        (bin.as_os_str(), None, "sh"),
        // A relative entry, read from the helper's directory.
        (std::ffi::OsStr::new("bin"), Some(&dir), "only-here"),
        (std::ffi::OsStr::new("bin"), None, "only-here"),
    ];
    for (path, cwd, program) in cases {
        let mut std_command = std::process::Command::new(program);
        std_command.env("PATH", path);
        let mut command = HelperCommand::new(program).env("PATH", path);
        if let Some(cwd) = cwd {
            std_command.current_dir(cwd);
            command = command.current_dir(cwd);
        }
        let by_std = std_command.output();
        let outcome = wait(host.launch(request(command).into_request()));
        let record = &outcome.record;
        match by_std {
            Ok(output) => {
                assert_eq!(record.state, State::Completed, "{program} in {path:?}");
                assert_eq!(
                    outcome.stdout.to_vec(),
                    output.stdout,
                    "{program} in {path:?}"
                );
                assert_eq!(outcome.stdout.to_vec(), b"found\n");
            }
            Err(error) => {
                assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "{program}");
                assert_eq!(
                    record.state,
                    State::FailedBeforeDispatch,
                    "{program} in {path:?}"
                );
                assert_eq!(record.spawn_error_kind.as_deref(), Some("not_found"));
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
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
    let outcome = wait(
        host.launch(
            request(command)
                .call_id("c_invalid")
                .approval(Approval::Required)
                .into_request(),
        ),
    );
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

/// `wait_timeout` and `try_outcome` give the handle back while the call
/// runs; waiting is not a disconnect.
pub fn wait_timeout_gives_the_handle_back_until_the_call_ends<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let call = host.launch(
        request(HelperCommand::new("sleep").arg("0.3"))
            .call_id("c_slow")
            .into_request(),
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

/// A caller that polls `try_outcome` while the owner publishes the outcome
/// and ends gets the outcome every time, never a "no outcome" panic: 1000
/// calls of `true`, each polled until it finishes.
pub fn polling_try_outcome_always_gets_the_outcome<H: HostUnderTest>(host: fn(HostOptions) -> H) {
    // The busy poll takes a core for about a second: no timed check or
    // scenario runs meanwhile.
    let _alone = scenario_turn();
    let host = host(HostOptions::default());
    for i in 0..1000 {
        let mut call = host.launch(
            request(HelperCommand::new("true"))
                .call_id(format!("c_poll_{i}"))
                .into_request(),
        );
        let started = std::time::Instant::now();
        let outcome = loop {
            match call.try_outcome() {
                Ok(outcome) => break outcome,
                Err(again) => call = again,
            }
            // A busy poll, as a caller on its own core would.
            assert!(started.elapsed() < Duration::from_secs(10), "call {i}");
        };
        assert_eq!(outcome.record.state, State::Completed, "call {i}");
        assert_eq!(outcome.record.exit_status, Some(0), "call {i}");
    }
    // Each record is kept before its outcome is published.
    assert_eq!(host.finished_records().len(), 1000);
}

/// 1 MiB of stdin reaches `wc -c`; without bytes stdin is null.
pub fn stdin_bytes_reach_the_helper_and_stdin_is_null_otherwise<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let input = vec![b'i'; 1 << 20];
    let counted = wait(
        host.launch(
            request(HelperCommand::new("wc").arg("-c").stdin_bytes(input))
                .call_id("c_stdin")
                .into_request(),
        ),
    );
    assert_eq!(counted.record.state, State::Completed);
    assert_eq!(
        String::from_utf8_lossy(&counted.stdout.to_vec()).trim(),
        "1048576"
    );

    let null = wait(
        host.launch(
            request(HelperCommand::new("wc").arg("-c"))
                .call_id("c_null")
                .into_request(),
        ),
    );
    assert_eq!(String::from_utf8_lossy(&null.stdout.to_vec()).trim(), "0");
}

/// The helper's environment is what the builder says: `envs` sets each
/// pair, the last `env` or `env_remove` of a name wins (after `env_clear`
/// too), and `env_remove` keeps an inherited variable from the helper.
pub fn the_helpers_environment_is_what_the_builder_says<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let printed = |call: CallBuilder<'static, Requests>| {
        let outcome = wait(host.launch(call.into_request()));
        assert_eq!(outcome.record.state, State::Completed);
        outcome.stdout.to_vec()
    };
    // Two names no host sets; `-` prints `unset` for a variable not set.
    let both = || {
        request(HelperCommand::shell_script(
            r#"printf %s "${SG_ENV_A-unset}|${SG_ENV_B-unset}""#,
        ))
    };
    assert_eq!(printed(both()), b"unset|unset");
    assert_eq!(
        printed(both().envs([("SG_ENV_A", "1"), ("SG_ENV_B", "two words")])),
        b"1|two words"
    );
    assert_eq!(
        printed(
            both()
                .env("SG_ENV_A", "1")
                .env_remove("SG_ENV_A")
                .env("SG_ENV_B", "2")
        ),
        b"unset|2"
    );
    assert_eq!(
        printed(both().env_remove("SG_ENV_A").env("SG_ENV_A", "3")),
        b"3|unset"
    );
    assert_eq!(
        printed(
            both()
                .env_clear()
                .env("SG_ENV_A", "1")
                .env_remove("SG_ENV_A")
        ),
        b"unset|unset"
    );

    // `env -0` prints exactly the environment it got, NUL-separated (a
    // shell would give `PATH` a default): `NAME=value` entries, sorted.
    let listed = |call: CallBuilder<'static, Requests>| {
        let mut entries: Vec<String> = printed(call)
            .split(|&b| b == 0)
            .filter(|entry| !entry.is_empty())
            .map(|entry| String::from_utf8_lossy(entry).into_owned())
            .collect();
        entries.sort();
        entries
    };
    let env = || request(HelperCommand::new("/usr/bin/env").arg("-0"));
    let inherited = |except: &str| {
        let mut entries: Vec<String> = std::env::vars_os()
            .filter(|(key, _)| key != except)
            .map(|(key, value)| {
                let mut entry = key.into_vec();
                entry.push(b'=');
                entry.extend(value.into_vec());
                String::from_utf8_lossy(&entry).into_owned()
            })
            .collect();
        entries.sort();
        entries
    };
    assert!(std::env::var_os("PATH").is_some());
    assert_eq!(listed(env()), inherited(""));
    assert_eq!(listed(env().env_remove("PATH")), inherited("PATH"));
    assert_eq!(
        listed(env().env_clear().envs([("A", "1"), ("B", "")])),
        ["A=1", "B="]
    );
}

/// `CallHandle::id` is the helper's pid while it runs, as the record
/// says, and `None` before its approval and once its exit was seen; the
/// helper runs in the builder's `current_dir`.
pub fn the_handle_names_the_running_helper_and_its_directory<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let dir = std::env::temp_dir().join(format!("sg-current-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    // The helper prints where it runs, then waits for its stdin to close.
    let call = host.launch(
        request(HelperCommand::shell_script("pwd; echo $$; exec cat"))
            .current_dir(&dir)
            .stdin_bytes(Vec::new())
            .approval(Approval::Required)
            .into_request(),
    );
    assert!(call.wait_card(Duration::from_secs(10)).is_some());
    assert_eq!(call.id(), None, "not spawned before its approval");
    call.approve().unwrap();
    let outcome = wait(call);
    assert_eq!(outcome.record.state, State::Completed);
    let printed = String::from_utf8_lossy(&outcome.stdout.to_vec()).into_owned();
    let mut lines = printed.lines();
    assert_eq!(lines.next(), Some(dir.to_str().unwrap()));
    let pid: u32 = lines.next().unwrap().parse().unwrap();
    assert_eq!(outcome.record.pid, Some(pid));

    // While it runs (held by a stdin that never closes: a streamed call),
    // `id()` is its pid; once its exit was seen, `None`.
    let call = host.launch(
        request(HelperCommand::shell_script("exec sleep 30"))
            .streamed()
            .into_request(),
    );
    let started = Instant::now();
    while call.id().is_none() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let running = call.id().expect("the helper's pid while it runs");
    call.cancel();
    while !call.state().is_terminal() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(call.id(), None, "the exit was seen");
    let outcome = wait(call);
    assert_eq!(outcome.record.pid, Some(running));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every byte of 20 MB on stderr is counted; 16 KiB are kept.
pub fn every_byte_of_a_large_flood_is_counted<H: HostUnderTest>(host: fn(HostOptions) -> H) {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("head -c 20000000 /dev/zero 1>&2");
    let outcome = wait(host.launch(request(command).call_id("c_20mb").into_request()));
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.stderr_bytes_seen, 20_000_000);
    assert_eq!(outcome.record.stderr_bytes_retained, 16_384);
    assert_eq!(outcome.record.stream_end, StreamEnd::Eof);
}
