//! Many `spillguard run --audit` on one log at once, and every way
//! writing it can fail: writers take turns (all their calls in one intact
//! chain, none refused), a writer that cannot get its turn says so and
//! runs nothing, an anchor that cannot be written is an error counted in
//! the record, and a path that is not a regular file is refused at open.
#![allow(clippy::unwrap_used)]

// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use spillguard_std::proto::audit::{Anchor, LogEntry, Verdict, VerifyOptions, verify_and_read};
use support::temp_path;

/// A directory of its own for one test.
fn dir(name: &str) -> PathBuf {
    let dir = temp_path(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn spillguard(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_spillguard"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn record_of(output: &Output) -> Value {
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "{output:?}");
    serde_json::from_str(text.trim_end()).unwrap()
}

fn ids(rows: &[Value], key: &str) -> BTreeSet<String> {
    rows.iter()
        .map(|row| row[key].as_str().unwrap().to_owned())
        .collect()
}

fn json_lines(output: &Output) -> Vec<Value> {
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn two_rounds_of_40_parallel_runs_leave_80_calls_in_one_intact_chain() {
    let dir = dir("cli-writers-turns");
    let (log, anchor_file) = (dir.join("calls.log"), dir.join("calls.anchor"));
    let mut records = Vec::new();
    for _ in 0..2 {
        let children: Vec<_> = (0..40)
            .map(|_| {
                spillguard(&[
                    "run",
                    "--audit",
                    s(&log),
                    "--anchor-out",
                    s(&anchor_file),
                    "--",
                    "true",
                ])
                .spawn()
                .unwrap()
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert_eq!(output.status.code(), Some(0), "{output:?}");
            assert_eq!(String::from_utf8_lossy(&output.stderr), "");
            records.push(record_of(&output));
        }
    }
    // 0 refused: every run completed, its events all written.
    assert_eq!(records.len(), 80);
    for record in &records {
        assert_eq!(record["state"], "completed");
        assert_eq!(record["audit_failures"], 0);
    }
    // Ids never collide: 80 calls, 80 sessions.
    assert_eq!(ids(&records, "call_id").len(), 80);
    assert_eq!(ids(&records, "session_id").len(), 80);

    // One chain, which the anchor the last writer left vouches for to its
    // end: an `Opened` entry per run and the six events of each call.
    let anchor: Anchor = std::fs::read_to_string(&anchor_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let bytes = std::fs::read(&log).unwrap();
    let (verdict, read) = verify_and_read(
        &bytes,
        VerifyOptions {
            anchor: Some(&anchor),
            key: None,
        },
    );
    assert_eq!(
        verdict,
        Verdict::Ok {
            records: 80 * 7,
            head: anchor.head
        }
    );
    let opened = read
        .iter()
        .filter(|r| matches!(r.entry, Some(LogEntry::Opened { .. })))
        .count();
    assert_eq!(opened, 80);

    // The views show every call apart.
    let rows = json_lines(
        &spillguard(&["audit", "activity", s(&log), "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(rows.len(), 80);
    assert_eq!(ids(&rows, "call_id"), ids(&records, "call_id"));
    assert!(rows.iter().all(|row| row["state"] == "completed"));
    let sessions = json_lines(
        &spillguard(&["audit", "sessions", s(&log), "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(sessions.len(), 80);
    assert!(sessions.iter().all(|row| row["calls"] == 1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn runs_that_name_one_session_are_one_session_of_distinct_calls() {
    let dir = dir("cli-writers-session");
    let log = dir.join("calls.log");
    for _ in 0..3 {
        let output = spillguard(&[
            "run",
            "--audit",
            s(&log),
            "--session-id",
            "deploy-42",
            "--",
            "true",
        ])
        .output()
        .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        assert_eq!(record_of(&output)["session_id"], "deploy-42");
    }
    let sessions = json_lines(
        &spillguard(&["audit", "sessions", s(&log), "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        (
            sessions[0]["session_id"].clone(),
            sessions[0]["calls"].clone()
        ),
        (Value::from("deploy-42"), Value::from(3))
    );
    let output = spillguard(&["run", "--session-id", "a b", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "spillguard: `--session-id`: a session id is 1 to 64 of A-Z a-z 0-9 _ . : -\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_writer_that_cannot_get_its_turn_says_so_and_runs_nothing() {
    use rustix::fs::{FlockOperation, flock};
    let dir = dir("cli-writers-held");
    let (log, marker) = (dir.join("calls.log"), dir.join("ran"));
    let first = spillguard(&["run", "--audit", s(&log), "--", "true"])
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    // Another writer holds the lock and does not let go.
    let holder = std::fs::File::open(&log).unwrap();
    flock(&holder, FlockOperation::LockExclusive).unwrap();
    let started = std::time::Instant::now();
    let output = spillguard(&[
        "run",
        "--audit",
        s(&log),
        "--audit-wait-ms",
        "300",
        "--",
        "touch",
        s(&marker),
    ])
    .output()
    .unwrap();
    assert!(started.elapsed().as_millis() >= 300);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(output.stdout, b"");
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        format!(
            "spillguard: cannot open the audit log {}: in use by another writer: gave up after \
             waiting 300 ms for its lock\n",
            log.display()
        )
    );
    assert!(!marker.exists(), "the helper ran");
    // Once it lets go, the next writer goes on.
    flock(&holder, FlockOperation::Unlock).unwrap();
    let output = spillguard(&["run", "--audit", s(&log), "--", "touch", s(&marker)])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(marker.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_anchor_that_cannot_be_written_is_an_error_counted_in_the_record() {
    let dir = dir("cli-writers-anchor");
    let (log, anchor_file) = (dir.join("calls.log"), dir.join("calls.anchor"));
    // The helper puts a directory where the anchor's new text is written
    // (as a full disk would, the final anchor cannot be written).
    let blocker = dir.join("calls.anchor.tmp");
    let output = spillguard(&[
        "run",
        "--audit",
        s(&log),
        "--anchor-out",
        s(&anchor_file),
        "--",
        "mkdir",
        s(&blocker),
    ])
    .output()
    .unwrap();
    let stale = std::fs::read_to_string(&anchor_file).unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert_eq!(
        String::from_utf8(output.stderr.clone()).unwrap(),
        format!(
            "spillguard: audit log {}: the record was written, but not its anchor file {}: Is a \
             directory (os error 21)\n",
            log.display(),
            anchor_file.display()
        )
    );
    let record = record_of(&output);
    assert_eq!(record["state"], "completed");
    assert_eq!(record["audit_failures"], 1);
    // The anchor left is the one opening wrote: it vouches for less than
    // the log holds, and verify says so.
    let anchor: Anchor = stale.trim().parse().unwrap();
    assert_eq!(anchor.records, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_audit_path_that_is_not_a_regular_file_is_refused_at_open() {
    let dir = dir("cli-writers-special");
    let fifo = dir.join("calls.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let marker = dir.join("ran");
    for (path, kind) in [
        (Path::new("/dev/zero"), "a character device"),
        (fifo.as_path(), "a FIFO"),
        (dir.as_path(), "a directory"),
    ] {
        let output = spillguard(&["run", "--audit", s(path), "--", "touch", s(&marker)])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        assert_eq!(
            String::from_utf8(output.stderr).unwrap(),
            format!(
                "spillguard: cannot open the audit log {}: not a regular file ({kind}): an \
                 audit log is a regular file\n",
                path.display()
            )
        );
        assert!(!marker.exists(), "the helper ran");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
