//! The `tokio::process` conventions of an outcome: `stdout_bytes` is the
//! helper's stdout as captured, and `into_result` is `Err` exactly when the
//! helper was never spawned (`failed_before_dispatch`), in virtual time.
#![allow(clippy::unwrap_used)]

mod sim;

use std::error::Error;
use std::io;

use sim::{Decision, Script, World, ms, spec};
use spillguard_core::Input;
use spillguard_core::{
    Action, CallKind, CallSettings, CancelReason, Config, Exit, Outcome, SpawnError, State,
};

/// Runs one action call with `script`, no approval; returns its outcome.
fn run(script: Script, tweak: impl FnOnce(&mut CallSettings)) -> Outcome {
    let mut world = World::new(Config::default());
    let mut settings = CallSettings::action(&world.config);
    tweak(&mut settings);
    world.add(
        spec("c_out", CallKind::Action),
        settings,
        script,
        false,
        Decision::Never,
    );
    world.drive_bounded(10_000);
    *world.lanes.remove(0).outcome.unwrap()
}

/// A helper that writes `stdout` at spawn and exits 0 at 10 ms.
fn printing(stdout: &[u8]) -> Script {
    Script {
        stdout: stdout.to_vec(),
        ..Script::default()
    }
}

fn spawn_fails(kind: io::ErrorKind, message: &str) -> Script {
    Script {
        spawn_error: Some((kind, message.to_owned())),
        ..Script::default()
    }
}

#[test]
fn stdout_bytes_are_the_helpers_stdout_byte_for_byte() {
    let written = b"line 1\n\xff\x00 not utf-8\n".to_vec();
    let outcome = run(printing(&written), |_| {});
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.stdout_bytes(), written);
    assert_eq!(outcome.record.stdout_bytes_seen, 20);
}

#[test]
fn stdout_bytes_past_the_budget_are_missing_and_the_record_says_so() {
    let outcome = run(printing(b"0123456789abcdef"), |s| s.stdout.budget = 10);
    // Stdout keeps its head: the first 10 bytes.
    assert_eq!(outcome.stdout_bytes(), b"0123456789");
    assert!(outcome.record.stdout_truncated);
    assert_eq!(outcome.record.stdout_bytes_seen, 16);
}

#[test]
fn stdout_bytes_are_not_redacted() {
    let secret = b"Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789\n";
    let outcome = run(printing(secret), |_| {});
    assert_eq!(outcome.stdout_bytes(), secret);
    assert_eq!(outcome.record.stdout_redactions, 1);
}

#[test]
fn a_non_zero_exit_is_ok() {
    let outcome = run(
        Script {
            exit: Some((ms(10), 3)),
            ..printing(b"partial\n")
        },
        |_| {},
    );
    let outcome = outcome.into_result().unwrap();
    assert_eq!(outcome.record.state, State::FailedLocal);
    assert_eq!(outcome.exit(), Exit::Code(3));
    assert_eq!(outcome.stdout_bytes(), b"partial\n");
}

#[test]
fn a_failed_spawn_is_an_error_with_the_os_kind_and_the_records_reason() {
    let outcome = run(
        spawn_fails(io::ErrorKind::NotFound, "spawn failed: nosuch: NotFound"),
        |_| {},
    );
    let error = not_spawned(outcome.into_result().unwrap_err());
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
    assert_eq!(error.reason(), "spawn failed: nosuch: NotFound");
    assert_eq!(
        error.to_string(),
        "the helper was not spawned: spawn failed: nosuch: NotFound"
    );
    let record = &error.outcome().record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(record.spawn_error_kind.as_deref(), Some("not_found"));
    assert_eq!(error.into_outcome().record.call_id, "c_out");
}

#[test]
fn a_failed_spawn_converts_into_an_io_error_of_its_kind() {
    fn run_it(outcome: Outcome) -> io::Result<Vec<u8>> {
        Ok(outcome.into_result()?.stdout_bytes())
    }
    let outcome = run(
        spawn_fails(
            io::ErrorKind::PermissionDenied,
            "spawn failed: ./tool: denied",
        ),
        |_| {},
    );
    let error = run_it(outcome).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
    assert_eq!(
        error.to_string(),
        "the helper was not spawned: spawn failed: ./tool: denied"
    );
    let inner = error
        .get_ref()
        .unwrap()
        .downcast_ref::<SpawnError>()
        .unwrap();
    assert_eq!(inner.outcome().record.state, State::FailedBeforeDispatch);
}

#[test]
fn a_failed_spawn_goes_into_a_boxed_error() {
    fn run_it(outcome: Outcome) -> Result<State, Box<dyn Error + Send + Sync>> {
        Ok(outcome.into_result()?.record.state)
    }
    let outcome = run(
        spawn_fails(io::ErrorKind::TimedOut, "spawn timed out"),
        |_| {},
    );
    let error = run_it(outcome).unwrap_err();
    let error = not_spawned(*error.downcast::<spillguard_core::OutcomeError>().unwrap());
    // A kind outside the record's table is `other`, and reads back as Other.
    assert_eq!(
        error.outcome().record.spawn_error_kind.as_deref(),
        Some("other")
    );
    assert_eq!(error.kind(), io::ErrorKind::Other);
}

#[test]
fn a_refused_validation_is_an_invalid_input_error() {
    let mut world = World::new(Config::default());
    let mut call = spillguard_core::Call::new(
        spec("c_bad", CallKind::Action),
        CallSettings::action(&world.config),
        &world.pool,
        world.now,
        std::time::SystemTime::UNIX_EPOCH,
    );
    call.handle(
        world.now,
        Input::ValidationFailed("argument `-rf` starts with a dash".into()),
    )
    .unwrap();
    let outcome = finished(&mut call);
    let error = not_spawned(outcome.into_result().unwrap_err());
    assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(error.reason(), "argument `-rf` starts with a dash");
    world.lanes.clear();
}

#[test]
fn an_attempt_the_audit_log_could_not_record_is_an_other_error() {
    let mut world = World::new(Config::default());
    let lane = world.add(
        spec("c_audit", CallKind::Action),
        CallSettings::action(&world.config),
        Script::default(),
        true,
        Decision::Grant(ms(5)),
    );
    // The attempt and the first transitions are written; the next fails.
    world.lanes[lane].audit_fails_after = Some(2);
    world.drive_bounded(10_000);
    let outcome = *world.lanes.remove(lane).outcome.unwrap();
    assert_eq!(outcome.record.spawn_error_kind, None);
    let error = not_spawned(outcome.into_result().unwrap_err());
    assert_eq!(error.kind(), io::ErrorKind::Other);
    assert_eq!(error.reason(), "audit log: disk full");
}

#[test]
fn every_other_end_is_ok() {
    let denied = {
        let mut world = World::new(Config::default());
        world.add(
            spec("c_no", CallKind::Action),
            CallSettings::action(&world.config),
            Script::default(),
            true,
            Decision::Deny(ms(5)),
        );
        world.drive_bounded(10_000);
        *world.lanes.remove(0).outcome.unwrap()
    };
    assert_eq!(denied.into_result().unwrap().record.state, State::Denied);

    let killed = run(
        Script {
            exit: None,
            on_term: sim::OnTerm::Ignore,
            ..Script::default()
        },
        |s| s.deadline = Some(ms(20)),
    );
    assert_eq!(killed.into_result().unwrap().record.state, State::Killed);
}

#[test]
fn a_spawn_that_fails_as_a_cancel_comes_is_a_cancel_and_ok() {
    let world = World::new(Config::default());
    let now = world.now;
    let mut call = spillguard_core::Call::new(
        spec("c_race", CallKind::Action),
        CallSettings::action(&world.config),
        &world.pool,
        now,
        std::time::SystemTime::UNIX_EPOCH,
    );
    call.handle(
        now,
        Input::Validated {
            needs_approval: false,
        },
    )
    .unwrap();
    // The spawn is handed out; the cancel comes while it runs.
    assert!(std::iter::from_fn(|| call.poll_action()).any(|a| matches!(a, Action::Spawn(_))));
    let _ = call.handle(now, Input::Cancel(CancelReason::Requested));
    call.handle(
        now,
        Input::SpawnFailed {
            kind: io::ErrorKind::NotFound,
            message: "spawn failed: gone".into(),
        },
    )
    .unwrap();
    let outcome = finished(&mut call).into_result().unwrap();
    assert_eq!(outcome.record.state, State::CancelledBeforeDispatch);
    assert_eq!(
        outcome.record.spawn_error_kind.as_deref(),
        Some("not_found")
    );
}

#[test]
fn a_spawn_error_crosses_threads() {
    fn send_sync_static<T: Send + Sync + 'static>() {}
    send_sync_static::<SpawnError>();
}

/// Drains `call` to its [`Action::Finished`].
fn finished(call: &mut spillguard_core::Call) -> Outcome {
    std::iter::from_fn(|| call.poll_action())
        .find_map(|a| match a {
            Action::Finished(o) => Some(*o),
            _ => None,
        })
        .unwrap()
}

#[test]
fn every_kind_the_record_names_reads_back_as_itself() {
    use io::ErrorKind as K;
    let listed = [
        K::NotFound,
        K::PermissionDenied,
        K::NotADirectory,
        K::IsADirectory,
        K::InvalidFilename,
        K::InvalidInput,
        K::ArgumentListTooLong,
        K::ExecutableFileBusy,
        K::ResourceBusy,
        K::WouldBlock,
        K::OutOfMemory,
        K::Interrupted,
        K::Unsupported,
    ];
    for kind in listed {
        let error = run(spawn_fails(kind, "spawn failed"), |_| {})
            .into_result()
            .unwrap_err();
        assert_ne!(
            error.outcome().record.spawn_error_kind.as_deref(),
            Some("other")
        );
        assert_eq!(error.kind(), kind);
    }
}

/// The spawn error inside `error`, which must be one.
fn not_spawned(error: spillguard_core::OutcomeError) -> spillguard_core::SpawnError {
    match error {
        spillguard_core::OutcomeError::NotSpawned(error) => error,
        other => panic!("not a spawn error: {other:?}"),
    }
}
