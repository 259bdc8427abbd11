//! The structured result channel: a helper's JSON result on stdout, parsed
//! by the call at stdout's end-of-file, in virtual time. Every malformed
//! stdout is an outcome in the record, never an error.
#![allow(clippy::unwrap_used)]

mod sim;

use sim::{Decision, Script, World, ms, spec};
use spillguard_core::Input;
use spillguard_core::{
    CallKind, CallSettings, Config, ResultChannel, ResultClassifier, ResultKind, State, StreamEnd,
};

fn settings(world: &World) -> CallSettings {
    CallSettings {
        result: ResultChannel::StdoutJson,
        ..CallSettings::action(&world.config)
    }
}

/// Runs one call whose helper writes `stdout` at spawn and exits with
/// `code` at 10 ms; returns the world and the lane.
fn run(stdout: &[u8], code: i32, tweak: impl FnOnce(&mut CallSettings, &mut Script)) -> World {
    let mut world = World::new(Config::default());
    let mut s = settings(&world);
    let mut script = Script {
        stdout: stdout.to_vec(),
        exit: Some((ms(10), code)),
        ..Script::default()
    };
    tweak(&mut s, &mut script);
    world.add(
        spec("c_res", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.drive_bounded(10_000);
    world
}

#[test]
fn a_json_result_is_parsed_and_handed_out() {
    let world = run(br#"{"ok":true,"rows":3}"#, 0, |_, _| {});
    let outcome = world.lanes[0].outcome.as_ref().unwrap();
    let r = &outcome.record;
    assert_eq!(r.state, State::Completed);
    assert_eq!(r.result_kind, Some(ResultKind::Success));
    assert_eq!(r.result_error, None);
    assert_eq!(
        outcome.result(),
        Some(&serde_json::json!({"ok": true, "rows": 3}))
    );
    assert_eq!(r.offset_of(State::Completed), Some(ms(10)));
}

/// Clean stderr and exit 0 do not make a success: the result says the
/// remote side failed, so the call ends `failed_remote`.
#[test]
fn clean_stderr_and_exit_0_with_a_remote_failure_end_failed_remote() {
    let world = run(br#"{"ok":false,"error":"quota exceeded"}"#, 0, |_, _| {});
    let outcome = world.lanes[0].outcome.as_ref().unwrap();
    let r = &outcome.record;
    assert_eq!(r.stderr_bytes_seen, 0);
    assert_eq!(r.exit_status, Some(0));
    assert_eq!(r.state, State::FailedRemote);
    assert_eq!(r.result_kind, Some(ResultKind::RemoteFailure));
    assert_eq!(outcome.result().unwrap()["error"], "quota exceeded");

    // Whatever the exit code.
    let world = run(br#"{"error":{"code":403}}"#, 3, |_, _| {});
    let r = world.lanes[0].record();
    assert_eq!((r.state, r.exit_status), (State::FailedRemote, Some(3)));
}

/// Stderr overflowing its budget hides nothing: the result is still
/// parsed and the call still completes.
#[test]
fn a_stderr_flood_never_hides_the_result() {
    let world = run(br#"{"ok":true}"#, 0, |_, script| {
        script.flood = Some((65_536, ms(1)));
    });
    let outcome = world.lanes[0].outcome.as_ref().unwrap();
    let r = &outcome.record;
    // Chunks at 0, 1, …, 10 ms (the helper writes at 10 ms, then exits).
    assert_eq!(r.stderr_bytes_seen, 11 * 65_536);
    assert!(r.stderr_truncated);
    assert_eq!(r.state, State::Completed);
    assert_eq!(r.result_kind, Some(ResultKind::Success));
    assert_eq!(outcome.result(), Some(&serde_json::json!({"ok": true})));
}

#[test]
fn malformed_stdout_is_an_outcome_never_an_error() {
    let cases: [(&[u8], &str); 4] = [
        (b"", "stdout was empty"),
        (b" \n\t\r\n", "stdout was empty"),
        (
            br#"{"a":}"#,
            "invalid JSON at line 1 column 6: expected value",
        ),
        (
            b"{\"a\":1}\n{\"b\":2}\n",
            "invalid JSON at line 2 column 1: trailing characters",
        ),
    ];
    for (stdout, error) in cases {
        let world = run(stdout, 0, |_, _| {});
        let outcome = world.lanes[0].outcome.as_ref().unwrap();
        let r = &outcome.record;
        assert_eq!(r.result_error.as_deref(), Some(error), "{stdout:?}");
        assert_eq!((r.result_kind, outcome.result()), (None, None));
        // No result: the exit decides.
        assert_eq!(r.state, State::Completed);
    }
}

#[test]
fn a_stdout_over_its_budget_is_not_parsed() {
    let world = run(br#"{"ok":true,"padding":"xxxxxxxx"}"#, 0, |s, _| {
        s.stdout.budget = 16;
    });
    let outcome = world.lanes[0].outcome.as_ref().unwrap();
    let r = &outcome.record;
    assert_eq!((r.stdout_bytes_seen, r.stdout_bytes_retained), (32, 16));
    assert!(r.stdout_truncated);
    assert_eq!(
        r.result_error.as_deref(),
        Some("stdout exceeded its 16-byte budget")
    );
    assert_eq!((r.result_kind, outcome.result()), (None, None));
    assert_eq!(r.state, State::Completed);
}

#[test]
fn a_classifier_replaces_the_convention() {
    let done = ResultClassifier::new(|v| {
        if v["status"] == "done" {
            ResultKind::Success
        } else {
            ResultKind::RemoteFailure
        }
    });
    let classify = |s: &mut CallSettings, _: &mut Script| s.result_classifier = Some(done.clone());
    // By the convention this is a success; the classifier says otherwise.
    let world = run(br#"{"status":"pending"}"#, 0, classify);
    assert_eq!(world.lanes[0].record().state, State::FailedRemote);
    // And the reverse: "ok": false is a success for this caller.
    let world = run(br#"{"status":"done","ok":false}"#, 0, classify);
    assert_eq!(world.lanes[0].record().state, State::Completed);
    assert_eq!(
        world.lanes[0].record().result_kind,
        Some(ResultKind::Success)
    );
}

/// Without a result channel nothing is parsed, whatever stdout holds.
#[test]
fn without_a_channel_stdout_is_not_parsed() {
    let world = run(br#"{"ok":false}"#, 0, |s, _| s.result = ResultChannel::None);
    let outcome = world.lanes[0].outcome.as_ref().unwrap();
    let r = &outcome.record;
    assert_eq!(r.state, State::Completed);
    assert_eq!((r.result_kind, r.result_error.as_deref()), (None, None));
    assert_eq!(outcome.result(), None);
    assert_eq!(outcome.stdout.to_vec(), br#"{"ok":false}"#);
}

/// A stdout held open past the end of the call yields no result, and the
/// record says why.
#[test]
fn a_stdout_that_never_ends_yields_no_result() {
    use std::time::SystemTime;

    use spillguard_core::{Action, Call, ExitStatus, RetentionPool};

    let world = World::new(Config::default());
    let mut s = settings(&world);
    s.signal_descendants = false;
    let t0 = world.epoch;
    let pool = RetentionPool::unlimited();
    let mut call = Call::new(
        spec("c_open", CallKind::Action),
        s,
        &pool,
        t0,
        SystemTime::UNIX_EPOCH,
    );
    call.handle(
        t0,
        Input::Validated {
            needs_approval: false,
        },
    )
    .unwrap();
    while call.poll_action().is_some() {}
    call.handle(t0, Input::Spawned { pid: 7 }).unwrap();
    let _ = call.handle(t0, Input::Stdout(br#"{"ok":true}"#));
    call.handle(t0 + ms(5), Input::Exited(ExitStatus::code(0)))
        .unwrap();
    call.handle(t0 + ms(5), Input::StderrEof).unwrap();
    assert_eq!(call.poll_timeout(), Some(t0 + ms(255)));
    let _ = call.handle(t0 + ms(255), Input::Timeout);
    let mut outcome = None;
    while let Some(action) = call.poll_action() {
        if let Action::Finished(o) = action {
            outcome = Some(o);
        }
    }
    let outcome = outcome.unwrap();
    let r = &outcome.record;
    assert_eq!(
        (r.state, r.stream_end),
        (State::Completed, StreamEnd::AbandonedOpen)
    );
    assert_eq!(
        r.result_error.as_deref(),
        Some("stdout did not reach end-of-file")
    );
    assert_eq!((r.result_kind, outcome.result()), (None, None));
}

/// The result shown outside the process is redacted like every other view;
/// the value handed to the caller in-process is the helper's own.
#[test]
fn a_secret_in_the_result_is_redacted_in_the_result_shown() {
    let token = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
    let stdout = format!(r#"{{"rows":3,"note":"pushed with {token}","password":"hunter2x"}}"#);
    let world = run(stdout.as_bytes(), 0, |_, _| {});
    let outcome = world.lanes[0].outcome.as_ref().unwrap();
    let r = &outcome.record;
    assert_eq!(
        (r.state, r.result_kind),
        (State::Completed, Some(ResultKind::Success))
    );
    assert_eq!(r.stdout_redactions, 2);
    assert_eq!(
        outcome.result().unwrap()["note"],
        format!("pushed with {token}")
    );
    assert_eq!(
        outcome.redacted_result(),
        Some(serde_json::json!({
            "rows": 3,
            "note": "pushed with [redacted: github-token]",
            "password": "[redacted: password-assignment]",
        }))
    );
}

#[test]
fn a_result_without_secrets_is_shown_as_parsed() {
    let world = run(
        br#"{"ok":true,"sha":"0123456789abcdef0123456789abcdef01234567"}"#,
        0,
        |_, _| {},
    );
    let outcome = world.lanes[0].outcome.as_ref().unwrap();
    assert_eq!(outcome.record.stdout_redactions, 0);
    assert_eq!(outcome.redacted_result().as_ref(), outcome.result());
    assert!(outcome.redacted_result().is_some());
}

/// An extra pattern that spans the JSON's quotes leaves no JSON behind:
/// the redacted text is shown as one string, never the raw value.
#[test]
fn a_redaction_that_breaks_the_json_shows_the_redacted_text() {
    let world = run(br#"{"pin": "4321"}"#, 0, |s, _| {
        s.stdout.redactor =
            spillguard_core::Redactor::with_extra_patterns([r#""pin": "\d+""#]).unwrap();
    });
    let outcome = world.lanes[0].outcome.as_ref().unwrap();
    assert_eq!(outcome.record.stdout_redactions, 1);
    assert_eq!(outcome.result(), Some(&serde_json::json!({"pin": "4321"})));
    assert_eq!(
        outcome.redacted_result(),
        Some(serde_json::Value::String("{[redacted: extra-0]}".into()))
    );
}

/// A number after a credential key is redacted unquoted, which leaves the
/// text no JSON: the result is then redacted member by member and keeps
/// its shape; a JSON literal after such a key is no secret at all.
#[test]
fn a_result_the_text_redaction_breaks_keeps_its_shape() {
    let token = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
    let stdout = format!(
        r#"{{"items":[1,2],"next_token":null,"refresh_token":123456,"note":"pushed with {token}"}}"#
    );
    let world = run(stdout.as_bytes(), 0, |_, _| {});
    let outcome = world.lanes[0].outcome.as_ref().unwrap();
    assert_eq!(outcome.record.stdout_redactions, 2);
    assert_eq!(outcome.result().unwrap()["refresh_token"], 123456);
    assert_eq!(
        outcome.redacted_result(),
        Some(serde_json::json!({
            "items": [1, 2],
            "next_token": null,
            "refresh_token": "[redacted: token-assignment]",
            "note": "pushed with [redacted: github-token]",
        }))
    );
}

#[test]
fn no_result_shows_none() {
    let world = run(b"not json", 0, |_, _| {});
    let outcome = world.lanes[0].outcome.as_ref().unwrap();
    assert_eq!(outcome.redacted_result(), None);
}
