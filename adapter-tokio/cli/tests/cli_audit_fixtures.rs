//! Every audit log ever written stays readable: the fixtures of each record
//! format version (`tests/fixtures/audit/vN/`, written by the CLI of the
//! release that introduced it with `cargo xtask audit-fixtures`) are
//! verified against their anchors and read by today's CLI, which must say
//! what was said of them when they were written: the same verdict line,
//! and the same calls, states and counts in `sessions` and `activity` (a
//! field added later may appear beside them, never change them). A log
//! appended to across releases (a record of a newer format than this
//! release's between records of today's) verifies, and its records of
//! today's version are read.
#![allow(clippy::unwrap_used)]

mod support;

mod binary;

use binary::spillguard;

use std::path::{Path, PathBuf};

use serde_json::Value;
use spillguard_std::proto::audit::{
    Anchor, FORMAT_VERSION, Key, LogWriter, OLDEST_FORMAT_VERSION, Verdict, VerifyOptions,
    verify_and_read,
};
use support::temp_path;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/audit")
}

/// Every version's fixture folder, oldest first; one per version ever
/// written, none beyond today's.
fn versions() -> Vec<(u8, PathBuf)> {
    let mut found: Vec<u8> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            name.strip_prefix('v')
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{name}: fixture folders are named vN"))
        })
        .collect();
    found.sort_unstable();
    let expected: Vec<u8> = (OLDEST_FORMAT_VERSION..=FORMAT_VERSION).collect();
    assert_eq!(
        found, expected,
        "one fixture folder per format version ever written (`cargo xtask audit-fixtures`)"
    );
    found
        .into_iter()
        .map(|v| (v, fixtures().join(format!("v{v}"))))
        .collect()
}

/// The logs of a version's folder: `plain`, `sealed`, and from version 2
/// on `mixed` (the previous version's log with this one's calls after).
fn logs(version: u8) -> Vec<&'static str> {
    if version > 1 {
        vec!["plain", "sealed", "mixed"]
    } else {
        vec!["plain", "sealed"]
    }
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `--key-file KEY` for the sealed log.
fn key_args(dir: &Path, name: &str) -> Vec<String> {
    if name == "sealed" {
        vec!["--key-file".into(), s(&dir.join("sealed.key")).into()]
    } else {
        Vec::new()
    }
}

fn run(args: &[String]) -> (i32, String, String) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = spillguard(&args);
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Every member of `then` is in `now` with the same value (recursively):
/// `now` may have members added since.
fn holds(then: &Value, now: &Value, at: &str) {
    match (then, now) {
        (Value::Object(then), Value::Object(now)) => {
            for (key, value) in then {
                let found = now
                    .get(key)
                    .unwrap_or_else(|| panic!("{at}.{key}: gone (was {value})"));
                holds(value, found, &format!("{at}.{key}"));
            }
        }
        (Value::Array(then), Value::Array(now)) => {
            assert_eq!(then.len(), now.len(), "{at}: {then:?} now {now:?}");
            for (i, (a, b)) in then.iter().zip(now).enumerate() {
                holds(a, b, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(then, now, "{at}"),
    }
}

#[test]
fn every_versions_logs_verify_against_their_anchors_as_when_written() {
    for (version, dir) in versions() {
        for name in logs(version) {
            let log = dir.join(format!("{name}.log"));
            let mut args = vec![
                "audit".into(),
                "verify".into(),
                s(&log).into(),
                "--anchor-file".into(),
                s(&dir.join(format!("{name}.anchor"))).into(),
            ];
            args.extend(key_args(&dir, name));
            let (status, stdout, stderr) = run(&args);
            let then = std::fs::read_to_string(dir.join(format!("{name}.verify.txt"))).unwrap();
            assert_eq!(
                (status, stdout.as_str(), stderr.as_str()),
                (0, then.as_str(), ""),
                "v{version} {name}"
            );
            assert!(then.starts_with("ok: "), "v{version} {name}: {then}");

            // The library reads it too, every record's entry decoded.
            let anchor: Anchor = std::fs::read_to_string(dir.join(format!("{name}.anchor")))
                .unwrap()
                .parse()
                .unwrap();
            let key = (name == "sealed").then(|| {
                spillguard_std::KeySource::File(dir.join("sealed.key"))
                    .load()
                    .unwrap()
            });
            let bytes = std::fs::read(&log).unwrap();
            let (verdict, records) = verify_and_read(
                &bytes,
                VerifyOptions {
                    anchor: Some(&anchor),
                    key: key.as_ref(),
                },
            );
            assert!(verdict.is_ok(), "v{version} {name}: {verdict:?}");
            assert_eq!(records.len() as u64, anchor.records);
            assert!(records.iter().all(|r| r.entry.is_some()));
            assert!(records.iter().all(|r| r.format_version <= version));
            if name != "mixed" {
                assert!(records.iter().all(|r| r.format_version == version));
            } else {
                let versions: std::collections::BTreeSet<u8> =
                    records.iter().map(|r| r.format_version).collect();
                assert_eq!(versions.len(), 2, "v{version} mixed: {versions:?}");
            }
        }
    }
}

#[test]
fn every_versions_sessions_and_activity_are_the_same_calls_states_and_counts() {
    for (version, dir) in versions() {
        for name in logs(version) {
            for view in ["sessions", "activity"] {
                let mut args = vec![
                    "audit".into(),
                    view.into(),
                    s(&dir.join(format!("{name}.log"))).into(),
                    "--json".into(),
                ];
                args.extend(key_args(&dir, name));
                let (status, stdout, stderr) = run(&args);
                assert_eq!(
                    (status, stderr.as_str()),
                    (0, ""),
                    "v{version} {name} {view}"
                );
                let then =
                    std::fs::read_to_string(dir.join(format!("{name}.{view}.jsonl"))).unwrap();
                let (then, now) = (json_lines(&then), json_lines(&stdout));
                assert_eq!(then.len(), now.len(), "v{version} {name} {view}: rows");
                assert!(!then.is_empty());
                for (i, (a, b)) in then.iter().zip(&now).enumerate() {
                    holds(a, b, &format!("v{version} {name} {view} row {i}"));
                }
            }
        }
    }
}

/// The calls of version 1's plain log, as its activity view showed them.
#[test]
fn the_first_versions_fixture_holds_every_kind_of_call() {
    let dir = fixtures().join("v1");
    let rows = json_lines(&std::fs::read_to_string(dir.join("plain.activity.jsonl")).unwrap());
    let states: Vec<&str> = rows.iter().map(|r| r["state"].as_str().unwrap()).collect();
    assert_eq!(
        states,
        [
            "completed",
            "failed_local",
            "completed",
            "cancelled_after_dispatch",
            "failed_before_dispatch",
            "failed_remote",
            "completed",
            "completed",
            "completed",
            "denied",
            "completed"
        ]
    );
    let truncated = &rows[2];
    assert_eq!(truncated["stderr_truncated"], true);
    assert_eq!(truncated["stderr_bytes_retained"], 1024);
    assert!(truncated["stderr_bytes_seen"].as_u64().unwrap() > 5_000);
    assert_eq!(rows[1]["exit_status"], 3);
    let approvals: Vec<&str> = rows[7..]
        .iter()
        .map(|r| r["approval"].as_str().unwrap())
        .collect();
    assert_eq!(
        approvals,
        ["not_required", "granted", "denied", "not_required"]
    );
}

/// A copy of a fixture log, appended to by a newer release (records of a
/// format this release does not read) and then by this release again, as
/// when a log outlives a downgrade: the chain verifies against the last
/// anchor, the newer records are named and left out of the views, and the
/// rest reads as before.
#[test]
fn a_log_with_records_of_two_versions_verifies_and_reads_what_it_can() {
    let (version, dir) = versions().into_iter().next_back().unwrap();
    let work = temp_path("audit-fixture-two-versions");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    for name in ["plain", "sealed"] {
        let log = work.join(format!("{name}.log"));
        let anchor = work.join(format!("{name}.anchor"));
        std::fs::copy(dir.join(format!("{name}.log")), &log).unwrap();
        let key: Option<Key> = (name == "sealed").then(|| {
            spillguard_std::KeySource::File(dir.join("sealed.key"))
                .load()
                .unwrap()
        });
        // A newer release appends two records of its own format.
        let bytes = std::fs::read(&log).unwrap();
        let (mut writer, _) = LogWriter::resume(&bytes, key.as_ref()).unwrap();
        let mut appended = bytes.clone();
        for n in 0..2u8 {
            let nonce = key.as_ref().map(|_| [n + 1; 24]);
            let frame = writer
                .append_encoded_as(FORMAT_VERSION + 1, b"fields of a later release", nonce)
                .unwrap();
            appended.extend(frame);
        }
        std::fs::write(&log, &appended).unwrap();
        std::fs::write(&anchor, writer.anchor().to_string()).unwrap();

        // This release appends a call after them.
        let mut args: Vec<String> = ["run", "--session-id", "after-upgrade", "--audit"]
            .map(String::from)
            .to_vec();
        args.extend([s(&log).into(), "--anchor-out".into(), s(&anchor).into()]);
        if name == "sealed" {
            args.extend(["--audit-key-file".into(), s(&dir.join("sealed.key")).into()]);
        }
        args.extend(["--", "sh", "-c", "echo after >&2"].map(String::from));
        let (status, _, stderr) = run(&args);
        assert_eq!((status, stderr.as_str()), (0, ""), "{name}");

        let keys = key_args(&dir, name);
        let mut verify: Vec<String> = ["audit", "verify"].map(String::from).to_vec();
        verify.extend([s(&log).into(), "--anchor-file".into(), s(&anchor).into()]);
        verify.extend(keys.clone());
        let (status, stdout, _) = run(&verify);
        let then = std::fs::read_to_string(dir.join(format!("{name}.verify.txt"))).unwrap();
        let records_then: u64 = then
            .strip_prefix("ok: ")
            .and_then(|t| t.split(' ').next())
            .unwrap()
            .parse()
            .unwrap();
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(status, 0, "{name}: {stdout}");
        // Two newer records, then the call's attempt, transitions and
        // final record (and the Opened entry of this writer, if any).
        let records_now: u64 = lines[0]
            .strip_prefix("ok: ")
            .and_then(|t| t.split(' ').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(records_now > records_then + 2, "{name}: {stdout}");
        assert_eq!(
            lines[1..],
            [format!(
                "2 records of a newer format version (up to {}) than this release reads \
                 ({OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}): their chain verified, their \
                 contents were not read; a later release reads them",
                FORMAT_VERSION + 1
            )],
            "{name}"
        );
        let mut json = verify.clone();
        json.push("--json".into());
        let (status, stdout, _) = run(&json);
        assert_eq!(status, 0);
        let value: Value = serde_json::from_str(stdout.trim_end()).unwrap();
        assert_eq!(value["verdict"], "ok");
        assert_eq!(
            value["newer_records"],
            serde_json::json!({"records": 2, "newest": FORMAT_VERSION + 1})
        );

        // The views: the fixture's rows, then the new call; the newer
        // records are named on stderr.
        let mut activity: Vec<String> = ["audit", "activity"].map(String::from).to_vec();
        activity.extend([s(&log).into(), "--json".into()]);
        activity.extend(keys.clone());
        let (status, stdout, stderr) = run(&activity);
        assert_eq!(status, 0);
        assert!(
            stderr.contains("2 records of a newer format version") && stderr.lines().count() == 1,
            "{stderr}"
        );
        let then = json_lines(
            &std::fs::read_to_string(dir.join(format!("{name}.activity.jsonl"))).unwrap(),
        );
        let now = json_lines(&stdout);
        assert_eq!(now.len(), then.len() + 1, "{name}");
        for (i, (a, b)) in then.iter().zip(&now).enumerate() {
            holds(a, b, &format!("{name} row {i}"));
        }
        let last = now.last().unwrap();
        assert_eq!(last["session_id"], "after-upgrade");
        assert_eq!(last["state"], "completed");
        assert_eq!(last["stderr_bytes_seen"], 6);

        // The library sees the versions record by record.
        let bytes = std::fs::read(&log).unwrap();
        let anchor: Anchor = std::fs::read_to_string(&anchor).unwrap().parse().unwrap();
        let (verdict, records) = verify_and_read(
            &bytes,
            VerifyOptions {
                anchor: Some(&anchor),
                key: key.as_ref(),
            },
        );
        assert!(matches!(verdict, Verdict::Ok { .. }), "{verdict:?}");
        let newer: Vec<u64> = records
            .iter()
            .filter(|r| r.is_newer_format())
            .map(|r| r.index)
            .collect();
        assert_eq!(newer, [records_then, records_then + 1]);
        assert!(
            records
                .iter()
                .filter(|r| !r.is_newer_format())
                .all(|r| r.entry.is_some() && r.format_version <= version)
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// A fixture is evidence: a flipped byte in it is still caught.
#[test]
fn a_flipped_byte_in_a_fixture_is_tampering() {
    let (_, dir) = versions().into_iter().next().unwrap();
    let bytes = std::fs::read(dir.join("plain.log")).unwrap();
    let anchor: Anchor = std::fs::read_to_string(dir.join("plain.anchor"))
        .unwrap()
        .parse()
        .unwrap();
    for at in [0, 100, bytes.len() / 2, bytes.len() - 1] {
        let mut damaged = bytes.clone();
        damaged[at] ^= 1;
        let (verdict, _) = verify_and_read(
            &damaged,
            VerifyOptions {
                anchor: Some(&anchor),
                key: None,
            },
        );
        assert!(verdict.is_rejected(), "byte {at}: {verdict:?}");
    }
}

/// From format version 2 on, a fixture log holds the restart events of a
/// `stdio --restart` session whose server failed three times: attempts 2
/// and 3, each naming the call of the run before it, each before its own
/// run's attempt; a version 1 log holds none.
#[test]
fn restart_events_are_read_from_every_version_that_writes_them() {
    use spillguard_std::proto::AuditKind;
    use spillguard_std::proto::audit::LogEntry;
    for (version, dir) in versions() {
        let bytes = std::fs::read(dir.join("plain.log")).unwrap();
        let (verdict, records) = verify_and_read(&bytes, VerifyOptions::default());
        assert!(
            matches!(verdict, Verdict::Unanchored { .. }),
            "v{version}: {verdict:?}"
        );
        let events: Vec<_> = records
            .into_iter()
            .filter_map(|r| match r.entry {
                Some(LogEntry::Call(event)) => Some(event),
                _ => None,
            })
            .collect();
        let restarts: Vec<(u32, String, String)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                AuditKind::Restart {
                    attempt,
                    previous_call_id,
                    ..
                } => Some((*attempt, e.call_id.clone(), previous_call_id.clone())),
                _ => None,
            })
            .collect();
        if version < 2 {
            assert!(restarts.is_empty(), "v{version}");
            continue;
        }
        assert_eq!(
            restarts.iter().map(|r| r.0).collect::<Vec<_>>(),
            [2, 3],
            "v{version}"
        );
        assert_eq!(
            restarts[1].2, restarts[0].1,
            "v{version}: the chain of runs"
        );
        for (_, call_id, previous) in &restarts {
            let own: Vec<_> = events.iter().filter(|e| &e.call_id == call_id).collect();
            assert!(
                matches!(own[0].kind, AuditKind::Restart { .. }),
                "v{version}"
            );
            assert!(
                events
                    .iter()
                    .any(|e| &e.call_id == previous && matches!(e.kind, AuditKind::Final(_)))
            );
        }
    }
}
