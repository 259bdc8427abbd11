//! `spillguard audit …` on logs written by `spillguard run --audit`: exact
//! verdict lines, exit statuses, differences and view rows.
#![allow(clippy::unwrap_used)]

// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;

mod binary;

use binary::spillguard;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use spillguard_std::proto::audit::{Anchor, VerifyOptions, verify_and_read};
use support::temp_path;

/// A directory of its own for one test.
fn dir(name: &str) -> PathBuf {
    let dir = temp_path(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `spillguard run --audit LOG --anchor-out ANCHOR [extra] -- sh -c SCRIPT`;
/// returns the printed record line (with its newline) as text and JSON.
fn run_audited(log: &Path, anchor: &Path, extra: &[&str], script: &str) -> (String, Value) {
    let mut args = vec!["run", "--audit", s(log), "--anchor-out", s(anchor)];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let output = spillguard(&args);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    let text = String::from_utf8(output.stdout).unwrap();
    let value = serde_json::from_str(text.trim_end()).unwrap();
    (text, value)
}

/// Exit status and stdout; stderr must be empty.
fn quiet(args: &[&str]) -> (i32, String) {
    let output = spillguard(args);
    assert_eq!(String::from_utf8_lossy(&output.stderr), "", "{args:?}");
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

/// Exit status and the one line of JSON on stdout; stderr must be empty.
fn quiet_json(args: &[&str]) -> (i32, Value) {
    let (status, text) = quiet(args);
    assert_eq!(text.lines().count(), 1, "{text}");
    (status, serde_json::from_str(text.trim_end()).unwrap())
}

/// Exit status and the one line on stderr; stdout must be empty.
fn failing(args: &[&str]) -> (i32, String) {
    let output = spillguard(args);
    assert_eq!(output.stdout, b"", "{args:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    (output.status.code().unwrap(), stderr.trim_end().to_owned())
}

/// The line `verify` adds when the first record is refused.
const FIRST_RECORD_HINT: &str = "(the first record is the file's start: a file that is not an \
                                 audit log is refused the same way)\n";

fn anchor_of(path: &Path) -> Anchor {
    std::fs::read_to_string(path).unwrap().parse().unwrap()
}

fn ok_line(anchor: &Anchor) -> String {
    format!(
        "ok: {} records, as anchored (head {})\n",
        anchor.records, anchor.head
    )
}

#[test]
fn verify_is_ok_with_the_anchor_and_unanchored_without() {
    let dir = dir("cli-verify");
    let (log, anchor_file) = (dir.join("audit.log"), dir.join("audit.anchor"));
    run_audited(&log, &anchor_file, &[], "echo done");
    let anchor = anchor_of(&anchor_file);
    // `opened`, received→validated, attempt, three transitions, final.
    assert_eq!(anchor.records, 7);

    let with_file = ["audit", "verify", s(&log), "--anchor-file", s(&anchor_file)];
    assert_eq!(quiet(&with_file), (0, ok_line(&anchor)));
    let text = anchor.to_string();
    assert_eq!(
        quiet(&["audit", "verify", s(&log), "--anchor", &text]),
        (0, ok_line(&anchor))
    );
    let mut json = with_file.to_vec();
    json.push("--json");
    // The verdict's pinned JSON form, fields in order.
    assert_eq!(
        quiet(&json),
        (
            0,
            format!(
                "{{\"verdict\":\"ok\",\"records\":7,\"head\":\"{}\",\"seals_checked\":true}}\n",
                anchor.head
            )
        )
    );

    assert_eq!(
        quiet(&["audit", "verify", s(&log)]),
        (
            3,
            "unanchored: 7 records intact, 7 of them not vouched for by an anchor\n".into()
        )
    );
    assert_eq!(
        quiet_json(&["audit", "verify", s(&log), "--json"]),
        (
            3,
            json!({"verdict": "unanchored", "records": 7,
                   "head": anchor.head.to_string(), "vouched": 0, "seals_checked": true})
        )
    );

    // A second run appends to the same chain; the anchor file follows.
    run_audited(&log, &anchor_file, &[], "true");
    let second = anchor_of(&anchor_file);
    assert_eq!((second.log_id, second.records), (anchor.log_id, 14));
    assert_eq!(quiet(&with_file), (0, ok_line(&second)));
    // The first anchor still vouches for its 7 records, not for the rest.
    assert_eq!(
        quiet(&["audit", "verify", s(&log), "--anchor", &text]),
        (
            3,
            "unanchored: 14 records intact, 7 of them not vouched for by an anchor\n".into()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_that_is_not_a_log_is_refused_at_its_first_record() {
    let path = dir("cli-not-a-log").join("tools.toml");
    std::fs::write(
        &path,
        "[tools.t]\ndescription = \"d\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let (status, text) = quiet(&["audit", "verify", s(&path)]);
    assert_eq!(status, 5);
    let (verdict, hint) = text.split_once('\n').unwrap();
    assert!(
        verdict.starts_with("tampered: record 0 (byte 0): "),
        "{verdict}"
    );
    assert_eq!(hint, FIRST_RECORD_HINT);
}

#[test]
fn every_flipped_byte_is_reported_as_tampering_of_its_record() {
    let dir = dir("cli-flip");
    let (log, anchor_file) = (dir.join("audit.log"), dir.join("audit.anchor"));
    run_audited(&log, &anchor_file, &[], "exit 0");
    let full = std::fs::read(&log).unwrap();
    let (_, records) = verify_and_read(&full, VerifyOptions::default());
    let starts: Vec<u64> = records.iter().map(|r| r.offset).collect();
    let flipped = dir.join("flipped.log");
    let positions: Vec<usize> = (0..full.len()).collect();
    for &at in &positions {
        let mut bytes = full.clone();
        bytes[at] ^= 0x01;
        std::fs::write(&flipped, &bytes).unwrap();
        let record = starts
            .iter()
            .rposition(|&start| start as usize <= at)
            .unwrap();
        let mut expected = format!(
            "tampered: record {record} (byte {}): modified (its bytes do not match its hash)\n",
            starts[record]
        );
        if record == 0 {
            expected.push_str(FIRST_RECORD_HINT);
        }
        let args = [
            "audit",
            "verify",
            s(&flipped),
            "--anchor-file",
            s(&anchor_file),
        ];
        assert_eq!(quiet(&args), (5, expected.clone()), "byte {at}");
        // Without the anchor too: a whole frame with a bad hash is never a
        // torn tail.
        assert_eq!(quiet(&args[..3]), (5, expected), "byte {at}");
    }
    println!(
        "{} flipped bytes of a {}-byte log: all tampered, at their own record",
        positions.len(),
        full.len()
    );

    // Torn by a crash: status 4 without the anchor, 5 (cut off) with it.
    let torn = dir.join("torn.log");
    std::fs::write(&torn, &full[..full.len() - 3]).unwrap();
    let last = starts[6];
    assert_eq!(
        quiet(&["audit", "verify", s(&torn)]),
        (
            4,
            format!(
                "torn tail: 6 records intact, then an incomplete final frame of {} bytes at \
                 byte {last}\n",
                full.len() as u64 - 3 - last
            )
        )
    );
    assert_eq!(
        quiet(&[
            "audit",
            "verify",
            s(&torn),
            "--anchor-file",
            s(&anchor_file)
        ]),
        (
            5,
            format!(
                "tampered: record 6 (byte {last}): missing (the anchor vouches for 7 records)\n"
            )
        )
    );

    // `run` refuses to append to a tampered log and leaves it as it is.
    let mut bytes = full.clone();
    bytes[starts[2] as usize + 20] ^= 0x80;
    std::fs::write(&flipped, &bytes).unwrap();
    let (status, line) = failing(&["run", "--audit", s(&flipped), "--", "true"]);
    assert_eq!(status, 2);
    assert_eq!(
        line,
        format!(
            "spillguard: cannot open the audit log {}: refused, it failed verification: \
             tampered: record 2 (byte {}): modified (its bytes do not match its hash)",
            flipped.display(),
            starts[2]
        )
    );
    assert_eq!(std::fs::read(&flipped).unwrap(), bytes);
    // And the views show nothing of it.
    let (status, line) = failing(&["audit", "activity", s(&flipped)]);
    assert_eq!(status, 5);
    assert_eq!(
        line,
        format!(
            "spillguard: {}: not shown, the log failed verification: tampered: record 2 (byte \
             {}): modified (its bytes do not match its hash)",
            flipped.display(),
            starts[2]
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn expect_compares_the_log_with_the_runs_own_record() {
    let dir = dir("cli-expect");
    let (log, anchor_file) = (dir.join("audit.log"), dir.join("audit.anchor"));
    let (line, record) = run_audited(&log, &anchor_file, &[], "echo result");
    let call_id = record["call_id"].as_str().unwrap().to_owned();
    let anchor = anchor_of(&anchor_file);
    let expect = dir.join("expect.jsonl");
    let args = |expect: &Path, json: bool| {
        let mut args = vec![
            "audit".to_owned(),
            "verify".into(),
            s(&log).into(),
            "--anchor-file".into(),
            s(&anchor_file).into(),
            "--expect".into(),
            s(expect).into(),
        ];
        if json {
            args.push("--json".into());
        }
        args
    };
    let verify = |expect: &Path, json: bool| {
        let args = args(expect, json);
        quiet(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let verify_json = |expect: &Path| {
        let args = args(expect, true);
        quiet_json(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };

    std::fs::write(&expect, &line).unwrap();
    assert_eq!(
        verify(&expect, false),
        (
            0,
            format!(
                "{}expected lifecycle: no difference (1 call)\n",
                ok_line(&anchor)
            )
        )
    );

    // The final state changed: exactly one difference.
    let mut changed = record.clone();
    changed["state"] = json!("failed_local");
    std::fs::write(&expect, format!("{changed}\n")).unwrap();
    assert_eq!(
        verify(&expect, false),
        (
            9,
            format!(
                "{}expected lifecycle: 1 difference(s)\n  {call_id}: final state: expected \
                 failed_local, found completed\n",
                ok_line(&anchor)
            )
        )
    );
    assert_eq!(
        verify_json(&expect),
        (
            9,
            json!({"verdict": "ok", "records": 7, "head": anchor.head.to_string(), "seals_checked": true,
                   "differences": [{"difference": "final_state", "call_id": call_id,
                                    "expected": "failed_local", "found": "completed"}]})
        )
    );

    // One transition fewer expected, and a call that never ran.
    let mut shorter = record.clone();
    shorter["timeline"].as_array_mut().unwrap().pop();
    let mut ghost = record.clone();
    ghost["call_id"] = json!("c_ghost");
    std::fs::write(&expect, format!("{shorter}\n\n{ghost}\n")).unwrap();
    assert_eq!(
        verify(&expect, false),
        (
            9,
            format!(
                "{}expected lifecycle: 2 difference(s)\n  {call_id}: transition 3: expected \
                 none, found dispatched -> completed\n  c_ghost: no event on record\n",
                ok_line(&anchor)
            )
        )
    );

    // Expected lifecycles may be written out directly, as a JSON array.
    let direct = json!([{
        "call_id": call_id, "attempt": true, "final_state": "completed",
        "transitions": [
            {"from": "received", "to": "validated"},
            {"from": "validated", "to": "authorized"},
            {"from": "authorized", "to": "dispatched"},
            {"from": "dispatched", "to": "completed"}
        ]
    }]);
    std::fs::write(&expect, direct.to_string()).unwrap();
    assert_eq!(verify(&expect, false).0, 0);

    std::fs::write(&expect, "{\"call_id\": 3}\n").unwrap();
    let (status, message) = failing(&["audit", "verify", s(&log), "--expect", s(&expect)]);
    assert_eq!(status, 2);
    assert!(
        message.starts_with(&format!(
            "spillguard: --expect file {}, entry 1: neither a call record nor an expected call: ",
            expect.display()
        )),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn activity_and_sessions_rows_come_from_the_log_alone() {
    let dir = dir("cli-views");
    let (log, anchor_file) = (dir.join("audit.log"), dir.join("audit.anchor"));
    // Two runs that name one session (by default each run is a session).
    let (_, failed) = run_audited(
        &log,
        &anchor_file,
        &["--session-id", "cli"],
        "echo warn 1>&2; exit 3",
    );
    let (_, done) = run_audited(
        &log,
        &anchor_file,
        &[
            "--session-id",
            "cli",
            "--per-call-bytes",
            "1000",
            "--excerpt-bytes",
            "500",
        ],
        "head -c 3000 /dev/zero 1>&2",
    );
    let last_offset = |record: &Value| {
        record["timeline"].as_array().unwrap().last().unwrap()["offset_us"].clone()
    };
    let row = |record: &Value, target: &str, records: (u64, u64)| {
        json!({
            "call_id": record["call_id"], "session_id": "cli", "kind": "action",
            "action": "run", "target": target, "state": record["state"], "finished": true,
            "approval": "not_required", "exit_status": record["exit_status"],
            "exit_signal": null, "stream_end": "eof",
            "stderr_bytes_seen": record["stderr_bytes_seen"],
            "stderr_bytes_retained": record["stderr_bytes_retained"],
            "stderr_truncated": record["stderr_truncated"],
            "received_at": record["received_at"], "last_offset_us": last_offset(record),
            "first_record": records.0, "last_record": records.1,
        })
    };
    let (status, text) = quiet(&["audit", "activity", s(&log), "--json"]);
    assert_eq!(status, 0);
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        rows,
        [row(&failed, "sh", (1, 6)), row(&done, "sh", (8, 13))]
    );
    assert_eq!(rows[0]["state"], "failed_local");
    assert_eq!(
        (
            rows[0]["exit_status"].clone(),
            rows[0]["stderr_bytes_seen"].clone()
        ),
        (json!(3), json!(5))
    );
    assert_eq!(rows[1]["stderr_bytes_seen"], 3000);
    assert_eq!(rows[1]["stderr_bytes_retained"], 1000);
    assert_eq!(rows[1]["stderr_truncated"], true);

    let (first, second) = (&failed["received_at"], &done["received_at"]);
    let (status, text) = quiet(&["audit", "sessions", s(&log), "--json"]);
    assert_eq!(status, 0);
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        rows,
        [json!({
            "session_id": "cli", "calls": 2, "unfinished": 0,
            "terminal": [{"state": "completed", "calls": 1}, {"state": "failed_local", "calls": 1}],
            "first_received_at": first, "last_received_at": second,
            "first_record": 1, "last_record": 13,
        })]
    );

    let (status, text) = quiet(&["audit", "sessions", s(&log)]);
    assert_eq!(status, 0);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    let words: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        words,
        [
            "session",
            "calls",
            "unfinished",
            "ended",
            "first",
            "last",
            "records"
        ]
    );
    let words: Vec<&str> = lines[1].split_whitespace().collect();
    let (first, second) = (first.as_str().unwrap(), second.as_str().unwrap());
    assert_eq!(
        words,
        [
            "cli",
            "2",
            "0",
            "completed",
            "1,",
            "failed_local",
            "1",
            first,
            second,
            "1-13"
        ]
    );
    let (status, text) = quiet(&["audit", "activity", s(&log)]);
    assert_eq!(status, 0);
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let (a, b) = (
        failed["call_id"].as_str().unwrap(),
        done["call_id"].as_str().unwrap(),
    );
    assert_eq!(
        lines,
        [
            vec![
                "call", "session", "state", "action", "target", "exit", "stderr", "kept",
                "received"
            ],
            vec![a, "cli", "failed_local", "run", "sh", "3", "5", "5", first],
            vec![
                b,
                "cli",
                "completed",
                "run",
                "sh",
                "0",
                "3000",
                "1000",
                second
            ],
        ]
    );

    // A crash cut the second call's final record: its row says the state
    // it last reached and that no final record follows.
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..bytes.len() - 10]).unwrap();
    let (status, text) = quiet(&["audit", "activity", s(&log)]);
    assert_eq!(status, 0);
    let last: Vec<&str> = text.lines().last().unwrap().split_whitespace().collect();
    assert_eq!(
        last,
        [
            b,
            "cli",
            "completed",
            "(no",
            "final",
            "record)",
            "run",
            "sh",
            "-",
            "-",
            "-",
            "-"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sealed_log_is_read_only_with_its_key() {
    let dir = dir("cli-sealed");
    let (log, anchor_file) = (dir.join("audit.log"), dir.join("audit.anchor"));
    let key = dir.join("audit.key");
    std::fs::write(&key, format!("{}\n", "c3".repeat(32))).unwrap();
    let (_, record) = run_audited(&log, &anchor_file, &["--audit-key-file", s(&key)], "echo x");
    let bytes = std::fs::read(&log).unwrap();
    let call_id = record["call_id"].as_str().unwrap();
    for clear in [call_id, "not_required", "spillguard-std", "cli"] {
        assert!(
            !bytes.windows(clear.len()).any(|w| w == clear.as_bytes()),
            "{clear} in clear"
        );
    }
    let anchor = anchor_of(&anchor_file);
    assert!(anchor.mac.is_some(), "a sealed log's anchor is MACed");
    assert_eq!(
        quiet(&[
            "audit",
            "verify",
            s(&log),
            "--anchor-file",
            s(&anchor_file),
            "--key-file",
            s(&key)
        ]),
        (0, ok_line(&anchor))
    );
    let (status, text) = quiet(&[
        "audit",
        "activity",
        s(&log),
        "--key-file",
        s(&key),
        "--json",
    ]);
    assert_eq!(status, 0);
    let row: Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(
        (row["call_id"].as_str(), row["state"].as_str()),
        (Some(call_id), Some("completed"))
    );

    // Without the key: verify checks the chain alone and says so, with
    // its own status, even for an anchor whose MAC was forged (only the
    // key can tell).
    let unchecked = format!(
        "{}seals not checked: the log is sealed or the anchor MACed, and no --key-file was \
         given; the chain alone was verified\n",
        ok_line(&anchor)
    );
    let text = std::fs::read_to_string(&anchor_file).unwrap();
    let text = text.trim_end();
    let last = if text.ends_with('0') { '1' } else { '0' };
    let forged = format!("{}{last}", &text[..text.len() - 1]);
    for given in [
        &["--anchor-file", s(&anchor_file)][..],
        &["--anchor", &forged],
    ] {
        let args = [&["audit", "verify", s(&log)][..], given].concat();
        assert_eq!(quiet(&args), (10, unchecked.clone()), "{given:?}");
    }
    let (status, json) = quiet_json(&[
        "audit",
        "verify",
        s(&log),
        "--anchor-file",
        s(&anchor_file),
        "--json",
    ]);
    assert_eq!(
        (status, &json["verdict"], &json["seals_checked"]),
        (10, &json!("ok"), &json!(false))
    );
    assert_eq!(
        quiet(&[
            "audit",
            "verify",
            s(&log),
            "--anchor",
            &forged,
            "--key-file",
            s(&key)
        ]),
        (
            8,
            "bad anchor: its MAC does not match its fields under the key\n".to_owned()
        )
    );
    // The views cannot be computed.
    assert_eq!(
        failing(&["audit", "activity", s(&log)]),
        (
            2,
            format!(
                "spillguard: {} is sealed: give its key with --key-file",
                log.display()
            )
        )
    );
    // With another key: a clear error, for the reader and for the writer.
    let other = dir.join("other.key");
    std::fs::write(&other, "d4".repeat(32)).unwrap();
    let log_key = spillguard_std::KeySource::File(key.clone())
        .load()
        .unwrap()
        .id();
    let other_key = spillguard_std::KeySource::File(other.clone())
        .load()
        .unwrap()
        .id();
    assert_eq!(
        quiet(&["audit", "verify", s(&log), "--key-file", s(&other)]),
        (
            7,
            format!("wrong key: the log names key {log_key}, the key given is {other_key}\n")
        )
    );
    assert_eq!(
        quiet(&[
            "audit",
            "verify",
            s(&log),
            "--anchor-file",
            s(&anchor_file),
            "--key-file",
            s(&other)
        ]),
        (
            7,
            format!("wrong key: the log names key {log_key}, the key given is {other_key}\n")
        )
    );
    assert_eq!(
        failing(&[
            "run",
            "--audit",
            s(&log),
            "--audit-key-file",
            s(&other),
            "--",
            "true"
        ]),
        (
            2,
            format!(
                "spillguard: cannot open the audit log {}: wrong key: the log is sealed with key \
                 {log_key}, the key given is {other_key}",
                log.display()
            )
        )
    );
    assert_eq!(
        failing(&["run", "--audit", s(&log), "--", "true"]),
        (
            2,
            format!(
                "spillguard: cannot open the audit log {}: the log is sealed and no key was given",
                log.display()
            )
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_audit_input_is_one_line_and_status_2() {
    let dir = dir("cli-audit-usage");
    let missing = dir.join("missing.log");
    let log = dir.join("audit.log");
    std::fs::write(&log, b"").unwrap();
    let bad_key = dir.join("bad.key");
    std::fs::write(&bad_key, "secret-but-not-hex").unwrap();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["audit", "verify", s(&missing)],
            format!(
                "spillguard: cannot read {}: No such file or directory (os error 2)",
                missing.display()
            ),
        ),
        (
            vec!["audit", "verify", s(&log), "--anchor", "sga3.x"],
            "spillguard: `--anchor`: an anchor starts with `sga2.` or `sga1.`".into(),
        ),
        (
            vec!["audit", "verify", s(&log), "--anchor", "sga2.x"],
            "spillguard: `--anchor`: an anchor has 5 or 7 dot-separated fields (`sga2`), \
             or 4 or 6 (`sga1`), not 2"
                .into(),
        ),
        (
            vec!["audit", "verify", s(&log), "--anchor-file", s(&missing)],
            format!(
                "spillguard: cannot read anchor file {}: No such file or directory (os error 2)",
                missing.display()
            ),
        ),
        (
            vec!["audit", "sessions", s(&log), "--key-file", s(&bad_key)],
            format!(
                "spillguard: key file {}: a key is 64 hex digits (32 bytes)",
                bad_key.display()
            ),
        ),
        (
            vec!["audit", "list", s(&log)],
            "spillguard: unknown audit command `list` (expected verify, sessions, activity, keygen, checkpoint or prove)"
                .into(),
        ),
    ];
    for (args, message) in cases {
        assert_eq!(failing(&args), (2, message), "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_key_file_is_read_up_to_4_kib_and_may_be_a_pipe() {
    let dir = dir("cli-audit-key-file");
    let (log, anchor_file) = (dir.join("audit.log"), dir.join("audit.anchor"));
    let key = "2a".repeat(32);
    let key_file = dir.join("audit.key");
    std::fs::write(&key_file, format!("{key}\n")).unwrap();
    run_audited(
        &log,
        &anchor_file,
        &["--audit-key-file", s(&key_file)],
        "true",
    );
    let not_a_key = |path: &Path| {
        format!(
            "spillguard: key file {}: a key is 64 hex digits (32 bytes)\n",
            path.display()
        )
    };
    // An endless device ends at once, refused as what it is not.
    let zero = Path::new("/dev/zero");
    for command in ["verify", "sessions", "activity"] {
        let args = ["audit", command, s(&log), "--key-file", s(zero)];
        assert_eq!(
            within_time(&args),
            (2, String::new(), not_a_key(zero)),
            "{args:?}"
        );
    }
    let args = [
        "run",
        "--audit",
        s(&log),
        "--audit-key-file",
        s(zero),
        "--",
        "true",
    ];
    assert_eq!(within_time(&args), (2, String::new(), not_a_key(zero)));
    // A key padded past 4 KiB is refused too; 4 KiB exactly is read.
    let long = dir.join("long.key");
    std::fs::write(&long, format!("{key}{}", "\n".repeat(4096 - 64 + 1))).unwrap();
    let args = ["audit", "sessions", s(&log), "--key-file", s(&long)];
    assert_eq!(within_time(&args), (2, String::new(), not_a_key(&long)));
    let exact = dir.join("exact.key");
    std::fs::write(&exact, format!("{key}{}", "\n".repeat(4096 - 64))).unwrap();
    let plain = within_time(&["audit", "sessions", s(&log), "--key-file", s(&key_file)]);
    assert_eq!((plain.0, plain.2.as_str()), (0, ""));
    // A header and one row: one `run`, one session.
    assert_eq!(plain.1.lines().count(), 2, "{plain:?}");
    let args = ["audit", "sessions", s(&log), "--key-file", s(&exact)];
    assert_eq!(within_time(&args), plain, "{args:?}");
    // A pipe (what `<(…)` gives): read to its end.
    let fifo = dir.join("key.fifo");
    make_fifo(&fifo);
    let writer = {
        let (fifo, key) = (fifo.clone(), key.clone());
        std::thread::spawn(move || std::fs::write(fifo, format!("{key}\n")).unwrap())
    };
    let args = ["audit", "sessions", s(&log), "--key-file", s(&fifo)];
    assert_eq!(within_time(&args), plain, "{args:?}");
    writer.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Makes a FIFO at `path`.
fn make_fifo(path: &Path) {
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        path,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
}

/// `spillguard ARGS`, which must end within 20 s (else it is killed and
/// the test fails): exit status, stdout, stderr.
fn within_time(args: &[&str]) -> (i32, String, String) {
    use std::io::Read;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let mut child = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} did not end within 20 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.code().unwrap(), stdout, stderr)
}

#[test]
fn a_path_that_is_not_a_regular_file_is_refused_at_open() {
    let dir = dir("cli-audit-not-regular");
    let (log, anchor_file) = (dir.join("audit.log"), dir.join("audit.anchor"));
    run_audited(&log, &anchor_file, &[], "true");
    let fifo = dir.join("fifo");
    make_fifo(&fifo);
    let zero = Path::new("/dev/zero");
    let kinds = [
        (zero, "a character device"),
        (fifo.as_path(), "a FIFO"),
        (dir.as_path(), "a directory"),
    ];
    let mut cases = 0;
    for (path, kind) in kinds {
        // What is refused, named as the flag's files are.
        let refused = |name: &str, role: &str| {
            format!(
                "spillguard: {name}{} is not a regular file ({kind}): {role} is a regular file\n",
                path.display()
            )
        };
        for command in ["verify", "sessions", "activity"] {
            let args = ["audit", command, s(path)];
            assert_eq!(
                within_time(&args),
                (2, String::new(), refused("", "an audit log")),
                "{args:?}"
            );
            let args = ["audit", command, s(path), "--json"];
            assert_eq!(
                within_time(&args),
                (2, String::new(), refused("", "an audit log")),
                "{args:?}"
            );
            cases += 2;
        }
        let args = ["audit", "verify", s(&log), "--anchor-file", s(path)];
        assert_eq!(
            within_time(&args),
            (2, String::new(), refused("anchor file ", "an anchor file")),
            "{args:?}"
        );
        let args = ["audit", "verify", s(&log), "--expect", s(path)];
        assert_eq!(
            within_time(&args),
            (
                2,
                String::new(),
                refused("--expect file ", "an --expect file")
            ),
            "{args:?}"
        );
        cases += 2;
    }
    assert_eq!(cases, 24);
    // A symbolic link to the log is the log.
    let link = dir.join("link.log");
    std::os::unix::fs::symlink(&log, &link).unwrap();
    let anchor = anchor_of(&anchor_file);
    assert_eq!(
        quiet(&[
            "audit",
            "verify",
            s(&link),
            "--anchor-file",
            s(&anchor_file)
        ]),
        (0, ok_line(&anchor))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A log of `calls` calls as `spillguard run --audit` writes them (an
/// `opened` record, then the call's six events), made by writing the
/// events of one real run again with other call ids; and its anchor.
fn many_calls(dir: &Path, calls: usize) -> (PathBuf, Anchor, Vec<String>) {
    use spillguard_std::proto::audit::{LogEntry, LogId, LogWriter};
    let (seed, seed_anchor) = (dir.join("seed.log"), dir.join("seed.anchor"));
    run_audited(
        &seed,
        &seed_anchor,
        &["--session-id", "cli"],
        "echo warn 1>&2",
    );
    let (_, records) = verify_and_read(&std::fs::read(&seed).unwrap(), VerifyOptions::default());
    let entries: Vec<LogEntry> = records.into_iter().map(|r| r.entry.unwrap()).collect();
    assert_eq!(entries.len(), 7);
    let mut writer = LogWriter::create(LogId([5; 16]), None);
    let mut bytes = Vec::new();
    let mut ids = Vec::new();
    for n in 0..calls {
        let call_id = format!("c_bulk{n:06}");
        for entry in &entries {
            let mut entry = entry.clone();
            if let LogEntry::Call(event) = &mut entry {
                event.call_id = call_id.clone();
                if let spillguard_std::proto::AuditKind::Final(record) = &mut event.kind {
                    record.call_id = call_id.clone();
                }
            }
            writer.append_to(&entry, None, &mut bytes).unwrap();
        }
        ids.push(call_id);
    }
    let log = dir.join("many.log");
    std::fs::write(&log, &bytes).unwrap();
    (log, writer.anchor(), ids)
}

#[test]
fn a_log_of_many_chunks_is_read_as_a_stream_with_the_same_rows() {
    let dir = dir("cli-audit-stream");
    let (log, anchor, ids) = many_calls(&dir, 300);
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size > 4 * 64 * 1024, "{size} bytes: several chunks");
    let text = anchor.to_string();
    assert_eq!(
        quiet(&["audit", "verify", s(&log), "--anchor", &text]),
        (0, ok_line(&anchor))
    );
    assert_eq!(anchor.records, 2_100);

    let (status, text) = quiet(&["audit", "activity", s(&log), "--json"]);
    assert_eq!(status, 0);
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let found: Vec<(&str, u64, u64, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["call_id"].as_str().unwrap(),
                r["first_record"].as_u64().unwrap(),
                r["last_record"].as_u64().unwrap(),
                r["state"].as_str().unwrap(),
            )
        })
        .collect();
    let want: Vec<(&str, u64, u64, &str)> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| (id.as_str(), 7 * n as u64 + 1, 7 * n as u64 + 6, "completed"))
        .collect();
    assert_eq!(found, want);

    // The columns: as wide as the widest cell of all rows, measured by
    // the first reading and printed by the second.
    let (status, text) = quiet(&["audit", "activity", s(&log)]);
    assert_eq!(status, 0);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 301);
    let state_column = lines[0].find("state").unwrap();
    assert_eq!(state_column, "c_bulk000000  session  ".len());
    for (line, id) in lines[1..].iter().zip(&ids) {
        assert_eq!(&line[..state_column], format!("{id}  cli      "), "{line}");
        assert_eq!(&line[state_column..state_column + 9], "completed");
    }

    let (status, text) = quiet(&["audit", "sessions", s(&log), "--json"]);
    assert_eq!(status, 0);
    let session: Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(
        (
            &session["calls"],
            &session["unfinished"],
            &session["terminal"],
            &session["first_record"],
            &session["last_record"]
        ),
        (
            &json!(300),
            &json!(0),
            &json!([{"state": "completed", "calls": 300}]),
            &json!(1),
            &json!(2_099)
        )
    );

    // Every call's lifecycle as expected, through the streamed comparison.
    let expect = dir.join("expect.jsonl");
    let lifecycle = |id: &str| {
        json!({"call_id": id, "attempt": true, "final_state": "completed", "transitions": [
            {"from": "received", "to": "validated"},
            {"from": "validated", "to": "authorized"},
            {"from": "authorized", "to": "dispatched"},
            {"from": "dispatched", "to": "completed"}]})
        .to_string()
    };
    let lines: Vec<String> = ids.iter().take(299).map(|id| lifecycle(id)).collect();
    std::fs::write(&expect, lines.join("\n")).unwrap();
    let args = [
        "audit",
        "verify",
        s(&log),
        "--anchor",
        &anchor.to_string(),
        "--expect",
        s(&expect),
    ];
    assert_eq!(
        quiet(&args),
        (
            9,
            format!(
                "{}expected lifecycle: 1 difference(s)\n  c_bulk000299: not expected (first on \
                 record at record 2094)\n",
                ok_line(&anchor)
            )
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_copy_of_a_record_older_than_the_verifiers_window_is_named() {
    use spillguard_std::proto::audit::{LogEntry, LogId, LogWriter, Verifier};
    let dir = dir("cli-audit-recall");
    let records = Verifier::WINDOW.get() as u64 + 5_000;
    let mut writer = LogWriter::create(LogId([6; 16]), None);
    let mut bytes = Vec::new();
    let mut copied = Vec::new();
    for n in 0..records {
        let at = bytes.len();
        let entry = LogEntry::Opened {
            writer: format!("w{n}"),
        };
        writer.append_to(&entry, None, &mut bytes).unwrap();
        if n == 17 {
            copied = bytes[at..].to_vec();
        }
    }
    let tampered_at = bytes.len();
    bytes.extend(&copied);
    let log = dir.join("copied.log");
    std::fs::write(&log, &bytes).unwrap();
    assert_eq!(
        quiet(&["audit", "verify", s(&log)]),
        (
            5,
            format!(
                "tampered: record {records} (byte {tampered_at}): duplicated (a copy of record \
                 17)\n"
            )
        )
    );
    assert_eq!(
        failing(&["audit", "sessions", s(&log)]),
        (
            5,
            format!(
                "spillguard: {}: not shown, the log failed verification: tampered: record \
                 {records} (byte {tampered_at}): duplicated (a copy of record 17)",
                log.display()
            )
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}
