//! A write that the file system refuses half-way (RLIMIT_FSIZE, the same
//! partial write a full disk makes): the sink cuts the torn bytes off, the
//! call fails closed, and once there is room again the log continues and
//! verifies. Alone in its test binary: the limit applies to the whole
//! process.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use signal_hook::consts::SIGXFSZ;
use spillguard_std::proto::audit::{
    ExpectedCall, Verdict, VerifyOptions, compare, verify_and_read,
};
use spillguard_std::proto::{Config, State};
use spillguard_std::{ChainedFileAudit, ChainedFileOptions, Host, HostOptions};
use support::{LocalTest, temp_path};
support::local_test_for!(spillguard_std::CallBuilder<'_>);

#[test]
fn a_write_cut_by_the_file_size_limit_is_undone_and_the_log_continues() {
    // With a handler installed, going over the limit fails the write with
    // EFBIG instead of killing the process.
    let _signals = signal_hook::iterator::Signals::new([SIGXFSZ]).unwrap();
    let unlimited = getrlimit(Resource::Fsize);
    let path = temp_path("file-limit.log");
    let trace = temp_path("file-limit-trace");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&trace);
    let log = Arc::new(ChainedFileAudit::open(&path, ChainedFileOptions::default()).unwrap());
    let host = Host::new(
        Config::default(),
        HostOptions {
            audit: Some(log.clone()),
            ..HostOptions::default()
        },
    )
    .unwrap();
    let first = host.command("true").local_test("c_room").run();
    assert_eq!(first.record.state, State::Completed);
    let before = std::fs::metadata(&path).unwrap().len();
    assert_eq!(log.records(), 7);

    // Room for the next transition (under 200 bytes) but not for the
    // attempt after it: the attempt's frame is written in part, refused,
    // and cut off.
    let limit = Rlimit {
        current: Some(before + 200),
        maximum: unlimited.maximum,
    };
    setrlimit(Resource::Fsize, limit).unwrap();
    let script = format!("touch {}", trace.display());
    let refused = host.shell(script).local_test("c_full").run();
    setrlimit(Resource::Fsize, unlimited).unwrap();

    let record = &refused.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    // The message says what the log holds: every frame that did not fit
    // was cut off, so it ends at its last whole record.
    let kept = std::fs::metadata(&path).unwrap().len();
    assert_eq!(
        record.failure.as_deref(),
        Some(
            format!(
                "audit log: File too large (os error 27); the record was not kept \
                 (the log ends at its last whole record, {kept} bytes)"
            )
            .as_str()
        )
    );
    // The attempt and the three events after it (the end's transitions and
    // the final record) did not fit: the outcome counts every one.
    assert_eq!((record.pid, record.audit_failures), (None, 4));
    assert!(!trace.exists(), "nothing was spawned");
    // The transition to `validated` fitted; every later event of the call
    // did not, and each torn frame was cut off.
    assert_eq!(log.records(), 8);
    let after_refusal = std::fs::metadata(&path).unwrap().len();
    assert!(after_refusal <= before + 200, "{after_refusal}");

    // Room again: the log continues where it was, whole.
    let last = host.command("true").local_test("c_again").run();
    assert_eq!(last.record.state, State::Completed);
    let anchor = log.anchor();
    assert_eq!(anchor.records, 14);
    let bytes = std::fs::read(&path).unwrap();
    let (verdict, records) = verify_and_read(
        &bytes,
        VerifyOptions {
            anchor: Some(&anchor),
            key: None,
        },
    );
    assert_eq!(
        verdict,
        Verdict::Ok {
            records: 14,
            head: anchor.head
        }
    );
    // The refused call shows only what reached the log: its first
    // transition, no attempt, no final record.
    let expected: Vec<ExpectedCall> = [&first.record, &last.record]
        .into_iter()
        .map(ExpectedCall::from_record)
        .collect();
    let differences = compare(&records, &expected);
    assert_eq!(differences.len(), 1, "{differences:?}");
    assert_eq!(
        serde_json::to_value(&differences[0]).unwrap(),
        serde_json::json!({"difference": "unexpected_call", "call_id": "c_full", "first_record": 7})
    );
    drop(host);
    let _ = std::fs::remove_file(&path);
}
