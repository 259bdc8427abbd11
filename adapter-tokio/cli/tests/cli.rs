//! The `spillguard` binary as a black box: one JSON line, exact numbers,
//! exit codes and one-line errors.
#![allow(clippy::unwrap_used)]

// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;

mod binary;

use binary::{spillguard, usage_failure};

use std::collections::BTreeSet;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use spillguard_std::proto::Config;
use spillguard_std::proto::audit::{VerifyOptions, verify_and_read};
use spillguard_std::{Host, HostOptions};
use support::{poll_until, temp_path};

/// The one line of JSON the run printed; the CLI's own stderr is empty.
fn record_line(output: &Output) -> (String, Value) {
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    assert!(text.ends_with('\n'));
    assert_eq!(text.lines().count(), 1, "{text}");
    let value = serde_json::from_str(text.trim_end()).unwrap();
    (text, value)
}

/// Every field name of a call record, taken from a record made in-process.
fn record_field_names() -> BTreeSet<String> {
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    let outcome = host.command("true").call_id("c_names").run();
    let value = serde_json::to_value(&outcome.record).unwrap();
    value.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn a_bounded_flood_prints_one_record_line_with_exact_counts() {
    let output = spillguard(&[
        "run",
        "--",
        "sh",
        "-c",
        r#"head -c 1000000 /dev/zero | tr "\0" x 1>&2"#,
    ]);
    let (text, line) = record_line(&output);
    assert!(text.starts_with(r#"{"call_id":"c_"#), "{text}");

    let keys: BTreeSet<String> = line.as_object().unwrap().keys().cloned().collect();
    let mut expected = record_field_names();
    expected.insert("stderr_excerpt".into());
    expected.insert("stdout".into());
    assert_eq!(keys, expected);

    assert_eq!(line["state"], "completed");
    assert_eq!(line["exit_status"], 0);
    assert_eq!(line["exit_signal"], Value::Null);
    assert_eq!(line["stream_end"], "eof");
    assert_eq!(line["stderr_bytes_seen"], 1_000_000);
    assert_eq!(line["stderr_bytes_retained"], 16_384);
    assert_eq!(line["stderr_truncated"], true);
    assert_eq!(line["stderr_retain"], "tail");
    assert_eq!(line["stdout_bytes_seen"], 0);
    assert_eq!(line["stdout"], "");
    let random = |id: &Value, prefix: &str| {
        let id = id.as_str().unwrap();
        id.len() == prefix.len() + 16
            && id.starts_with(prefix)
            && id[prefix.len()..].bytes().all(|b| b.is_ascii_hexdigit())
    };
    assert!(random(&line["call_id"], "c_"), "{}", line["call_id"]);
    assert!(random(&line["session_id"], "s_"), "{}", line["session_id"]);
    assert_eq!(line["action"], "run");
    assert_eq!(line["target"], "sh");
    assert_eq!(line["approval"], "not_required");

    // One line of x with no blank: a run of one byte holds no secret, so
    // the excerpt (4 KiB) shows its end as it is, marker first.
    let excerpt = line["stderr_excerpt"].as_str().unwrap();
    let (marker, kept) = excerpt.split_once('\n').unwrap();
    assert_eq!(
        marker,
        format!(
            "[stderr truncated: kept last {} of 1000000 bytes]",
            kept.len()
        )
    );
    assert!(kept.bytes().all(|b| b == b'x'));
    assert!(
        excerpt.len() <= 4096 && excerpt.len() > 4000,
        "{}",
        excerpt.len()
    );
}

#[test]
fn the_helpers_streams_never_reach_the_cli_streams() {
    let output = spillguard(&[
        "run",
        "--",
        "sh",
        "-c",
        "echo to-stdout; echo to-stderr 1>&2; exit 4",
    ]);
    let (_, line) = record_line(&output);
    assert_eq!(line["state"], "failed_local");
    assert_eq!(line["exit_status"], 4);
    assert_eq!(line["stdout"], "to-stdout\n");
    assert_eq!(line["stderr_excerpt"], "to-stderr\n");
    assert_eq!(line["stdout_bytes_seen"], 10);
    assert_eq!(line["stderr_bytes_seen"], 10);
}

#[test]
fn the_main_job_stops_a_flood_at_its_deadline_and_audits_it() {
    let audit = temp_path("cli-audit.log");
    let _ = std::fs::remove_file(&audit);
    let output = spillguard(&[
        "run",
        "--deadline-ms",
        "500",
        "--audit",
        audit.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        // `exec`: the flood is the helper itself, so its end is its exit
        // (a `yes` forked by the shell could, on a loaded machine, still
        // hold stderr when the shell's exit is seen).
        "exec yes helper-diagnostic 1>&2",
    ]);
    let (_, line) = record_line(&output);
    assert_eq!(line["state"], "cancelled_after_dispatch");
    assert_eq!(line["cancel_reason"], "deadline");
    assert_eq!(line["exit_status"], Value::Null);
    assert_eq!(line["exit_signal"], 15);
    assert_eq!(line["stream_end"], "reader_completed_after_cancel");
    assert_eq!(line["stderr_bytes_retained"], 16_384);
    let seen = line["stderr_bytes_seen"].as_u64().unwrap();
    assert!(seen > 16_384);
    let excerpt = line["stderr_excerpt"].as_str().unwrap();
    let (marker, body) = excerpt.split_once('\n').unwrap();
    assert_eq!(
        marker,
        format!(
            "[stderr truncated: kept last {} of {seen} bytes]",
            body.len()
        )
    );
    // Whole lines, bar the last, which TERM may have cut mid-write.
    let lines: Vec<&str> = body.lines().collect();
    let (last, whole) = lines.split_last().unwrap();
    assert!(whole.iter().all(|l| *l == "helper-diagnostic"));
    assert!("helper-diagnostic".starts_with(last), "{last}");

    let (verdict, events) = read_log(&audit);
    let _ = std::fs::remove_file(&audit);
    // The writer's `opened` entry, then the call's six events.
    assert_eq!(
        verdict,
        "unanchored: 7 records intact, 7 of them not vouched for by an anchor"
    );
    assert_eq!(events.len(), 7);
    assert_eq!(
        events[0]["opened"]["writer"],
        format!("spillguard-std {}", env!("CARGO_PKG_VERSION"))
    );
    assert!(events[2]["call"]["kind"]["attempt"].is_object());
    let last = &events[6]["call"]["kind"]["final"];
    assert_eq!(last["state"], "cancelled_after_dispatch");
    assert_eq!(last["stderr_bytes_seen"], seen);
}

/// The verdict on an audit log (no anchor, no key) and its entries as JSON.
fn read_log(path: &std::path::Path) -> (String, Vec<Value>) {
    let bytes = std::fs::read(path).unwrap_or_default();
    let (verdict, records) = verify_and_read(&bytes, VerifyOptions::default());
    let entries = records
        .iter()
        .map(|r| serde_json::to_value(r.entry.as_ref().unwrap()).unwrap())
        .collect();
    (verdict.to_string(), entries)
}

#[test]
fn a_program_that_cannot_be_spawned_still_gets_a_record() {
    let output = spillguard(&["run", "--", "/nonexistent/prog", "arg"]);
    let (_, line) = record_line(&output);
    assert_eq!(line["state"], "failed_before_dispatch");
    assert_eq!(
        line["failure"],
        "spawn failed: /nonexistent/prog: NotFound: No such file or directory (os error 2)"
    );
    assert_eq!(line["pid"], Value::Null);
    assert_eq!(line["stream_end"], "not_started");
    assert_eq!(line["stderr_excerpt"], "");
}

#[test]
fn bad_input_exits_2_with_one_line_naming_the_problem() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[],
            "spillguard: missing command `run`, `stdio`, `audit` or `mcp` (see `spillguard --help`)",
        ),
        (
            &["start", "--", "true"],
            "spillguard: unknown command `start` (expected `run`, `stdio`, `audit` or `mcp`; see \
             `spillguard --help`)",
        ),
        (
            &["run", "--quiet", "--", "true"],
            "spillguard: unknown flag `--quiet` (see `spillguard --help`)",
        ),
        (
            &["run", "--per-call-bytes", "16k", "--", "true"],
            "spillguard: `--per-call-bytes`: `16k` is not a non-negative integer",
        ),
        (
            &["run", "--deadline-ms", "500"],
            "spillguard: missing program (usage: spillguard run [OPTIONS] -- PROGRAM [ARGS...])",
        ),
        (
            &["run", "--excerpt-bytes", "64", "--", "true"],
            "spillguard: invalid configuration: helper_output.stderr_agent_excerpt_bytes: \
             64 is below the minimum of 128",
        ),
        (
            &["run", "--per-call-bytes", "0", "--", "true"],
            "spillguard: invalid configuration: helper_output.stderr_retained_per_call_bytes: \
             must be greater than zero",
        ),
    ];
    for (args, message) in cases {
        assert_eq!(usage_failure(args), *message, "{args:?}");
    }
}

#[test]
fn config_file_errors_name_the_field() {
    let path = temp_path("bad.toml");
    std::fs::write(
        &path,
        "[helper_output]\nstderr_agent_excerpt_bytes = 20000\n",
    )
    .unwrap();
    let shown = path.display().to_string();
    assert_eq!(
        usage_failure(&["run", "--config", &shown, "--", "true"]),
        format!(
            "spillguard: invalid config {shown}: helper_output.stderr_agent_excerpt_bytes: \
             20000 is larger than stderr_retained_per_call_bytes (16384)"
        )
    );
    std::fs::write(&path, "[helper_output]\nretain = \"middle\"\n").unwrap();
    assert_eq!(
        usage_failure(&["run", "--config", &shown, "--", "true"]),
        format!(
            "spillguard: invalid config {shown}: helper_output.retain: unknown mode \"middle\" \
             (expected \"tail\", \"head\" or \"head_and_tail\")"
        )
    );
    let _ = std::fs::remove_file(&path);
    let missing = temp_path("missing.toml").display().to_string();
    assert_eq!(
        usage_failure(&["run", "--config", &missing, "--", "true"]),
        format!("spillguard: cannot read config {missing}: No such file or directory (os error 2)")
    );
}

#[test]
fn flags_override_the_config_file() {
    let path = temp_path("head.toml");
    std::fs::write(
        &path,
        "[helper_output]\nretain = \"head\"\nstderr_retained_per_call_bytes = 1000\n\
         stderr_agent_excerpt_bytes = 500\n",
    )
    .unwrap();
    let output = spillguard(&[
        "run",
        "--config",
        path.to_str().unwrap(),
        "--per-call-bytes",
        "2000",
        "--",
        "sh",
        "-c",
        "head -c 50000 /dev/zero | tr '\\0' y 1>&2",
    ]);
    let _ = std::fs::remove_file(&path);
    let (_, line) = record_line(&output);
    assert_eq!(line["stderr_retain"], "head");
    assert_eq!(line["stderr_bytes_seen"], 50_000);
    assert_eq!(line["stderr_bytes_retained"], 2000);
    // One line of y, shown as it is (no secret is a run of one byte),
    // within the excerpt budget the config file sets.
    let excerpt = line["stderr_excerpt"].as_str().unwrap();
    let (marker, kept) = excerpt.split_once('\n').unwrap();
    assert_eq!(
        marker,
        format!(
            "[stderr truncated: kept first {} of 50000 bytes]",
            kept.len()
        )
    );
    assert!(kept.bytes().all(|b| b == b'y'));
    assert!(excerpt.len() <= 500 && excerpt.len() > 450, "{excerpt}");
}

#[test]
fn help_prints_the_usage_and_exits_0() {
    let output = spillguard(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("spillguard run [OPTIONS] -- PROGRAM [ARGS...]"));
    for flag in [
        "--retain",
        "--per-call-bytes",
        "--excerpt-bytes",
        "--deadline-ms",
        "--grace-ms",
        "--drain-window-ms",
        "--config",
        "--audit",
        "--audit-key-file",
        "--anchor-out",
        "audit verify FILE",
        "audit sessions FILE",
        "audit activity FILE",
        "--expect FILE",
    ] {
        assert!(text.contains(flag), "{flag}");
    }
}

#[test]
fn version_prints_the_package_version_and_exits_0() {
    let output = spillguard(&["--version"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stderr, b"");
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        format!("spillguard {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn help_starts_with_the_summary_and_the_usage_lines() {
    for args in [&["--help"][..], &["-h"]] {
        let output = spillguard(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert_eq!(output.stderr, b"", "{args:?}");
        let text = String::from_utf8(output.stdout).unwrap();
        let lines: Vec<&str> = text.lines().take(5).collect();
        assert_eq!(
            lines,
            [
                "spillguard - run a helper process with bounded, counted stderr",
                "",
                "Usage: spillguard run [OPTIONS] -- PROGRAM [ARGS...]",
                "       spillguard stdio [OPTIONS] -- PROGRAM [ARGS...]",
                "       spillguard audit verify FILE [--anchor ANCHOR | --anchor-file F] \
                 [--key-file F]",
            ],
            "{args:?}"
        );
        // The exit statuses of both commands and the examples are there.
        for line in [
            "Exit status of `run`: 0 when a record was printed, whatever the helper did",
            "  9  the log verified, but differs from the lifecycles in --expect",
            "  spillguard run --deadline-ms 500 -- sh -c 'yes helper-diagnostic 1>&2'",
            "  spillguard audit activity calls.log --json",
        ] {
            assert_eq!(text.lines().filter(|l| *l == line).count(), 1, "{line}");
        }
    }
    let run = String::from_utf8(spillguard(&["run", "--help"]).stdout).unwrap();
    assert_eq!(
        run.lines().nth(2),
        Some("Usage: spillguard run [OPTIONS] -- PROGRAM [ARGS...]")
    );
}

#[test]
fn a_usage_error_is_one_line_and_status_2() {
    let output = spillguard(&["run", "--deadline", "5", "--", "true"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(output.stdout, b"");
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "spillguard: unknown flag `--deadline` (see `spillguard --help`)\n"
    );
    let output = spillguard(&[
        "audit",
        "verify",
        "log",
        "--anchor",
        "a",
        "--anchor-file",
        "b",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "spillguard: give one of `--anchor` and `--anchor-file`, once\n"
    );
}

#[test]
fn sigint_cancels_the_helper_and_still_prints_the_record() {
    let audit = temp_path("cli-sigint.log");
    let _ = std::fs::remove_file(&audit);
    let child = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args([
            "run",
            "--grace-ms",
            "2000",
            "--audit",
            audit.to_str().unwrap(),
        ])
        .args(["--", "sleep", "30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    poll_until(
        Duration::from_secs(10),
        "the helper to be dispatched",
        || {
            read_log(&audit)
                .1
                .iter()
                .any(|e| e["call"]["kind"]["transition"]["to"] == "dispatched")
        },
    );
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let output = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&audit);
    let (_, line) = record_line(&output);
    assert_eq!(line["state"], "cancelled_after_dispatch");
    assert_eq!(line["cancel_reason"], "requested");
    assert_eq!(line["exit_signal"], 15);
    assert_eq!(line["signals"].as_array().unwrap().len(), 1);
}

#[test]
fn result_json_reports_a_remote_failure_and_keeps_the_result() {
    let output = spillguard(&[
        "run",
        "--result",
        "json",
        "--",
        "sh",
        "-c",
        r#"head -c 100000 /dev/zero | tr "\0" e 1>&2; echo '{"ok": false, "error": "quota exceeded"}'"#,
    ]);
    let (_, line) = record_line(&output);
    assert_eq!(line["state"], "failed_remote");
    // The classification and the value, each under its own name.
    assert_eq!(line["result_kind"], "remote_failure");
    assert_eq!(line["result"]["error"], "quota exceeded");
    assert_eq!(line["result"]["ok"], false);
    assert_eq!(line["exit_status"], 0);
    assert_eq!(line["stderr_bytes_seen"], 100_000);
    assert_eq!(line["stderr_truncated"], true);
    assert_eq!(line["result_error"], Value::Null);

    let text = spillguard(&["run", "--result", "json", "--", "echo", "plain text"]);
    let (_, line) = record_line(&text);
    assert_eq!(line["state"], "completed");
    assert_eq!(line["result_kind"], Value::Null);
    assert_eq!(line["result"], Value::Null);
    let error = line["result_error"].as_str().unwrap();
    assert!(
        error.starts_with("invalid JSON at line 1 column"),
        "{error}"
    );

    let without = spillguard(&["run", "--", "echo", "{}"]);
    let (_, line) = record_line(&without);
    assert!(line.get("result").is_none(), "{line}");
    assert_eq!(line["result_kind"], Value::Null);

    assert_eq!(
        usage_failure(&["run", "--result", "xml", "--", "true"]),
        "spillguard: `--result`: unknown result `xml` (expected json)"
    );
}

#[test]
fn debug_for_raises_the_budget_and_is_recorded() {
    let flood = r#"head -c 200000 /dev/zero | tr "\0" d 1>&2"#;
    let debugged = spillguard(&["run", "--debug-for", "60", "--", "sh", "-c", flood]);
    let (_, line) = record_line(&debugged);
    assert_eq!(line["debug"], true);
    assert_eq!(line["stderr_bytes_seen"], 200_000);
    assert_eq!(line["stderr_bytes_retained"], 200_000);
    assert_eq!(line["stderr_truncated"], false);

    let normal = spillguard(&["run", "--", "sh", "-c", flood]);
    let (_, line) = record_line(&normal);
    assert_eq!(line["debug"], false);
    assert_eq!(line["stderr_bytes_retained"], 16_384);

    let refused = usage_failure(&["run", "--debug-for", "7200", "--", "true"]);
    assert_eq!(
        refused,
        "spillguard: --debug-for: debug grant duration 7200.000 s must be above zero and at most 3600 s"
    );
}

#[test]
fn debug_on_signal_reaches_the_running_call() {
    // The helper asks its parent (spillguard) for debug after 20,000
    // bytes, a second after they were written, then writes 30,000 more a
    // second later: the call keeps the 16,384 it retained and grows.
    let script = r#"head -c 20000 /dev/zero | tr "\0" x 1>&2; sleep 1;
                    kill -USR1 $PPID; sleep 1; yes y | head -n 15000 1>&2"#;
    let asked = spillguard(&["run", "--debug-on-signal", "60", "--", "sh", "-c", script]);
    let (_, line) = record_line(&asked);
    assert_eq!(line["debug"], true);
    assert_eq!(line["stderr_bytes_seen"], 50_000);
    assert_eq!(line["stderr_bytes_retained"], 46_384);
    assert_eq!(
        line["stderr_excerpt"].as_str().unwrap().lines().next(),
        Some("[stderr truncated: kept last 4044 of 50000 bytes]")
    );

    // SIGUSR2 ends it: back to the per-call budget, still debug: true.
    let script = r#"kill -USR1 $PPID; sleep 1; head -c 20000 /dev/zero | tr "\0" x 1>&2;
                    sleep 1; kill -USR2 $PPID; sleep 1; yes y | head -n 15000 1>&2"#;
    let ended = spillguard(&["run", "--debug-on-signal", "60", "--", "sh", "-c", script]);
    let (_, line) = record_line(&ended);
    assert_eq!(line["debug"], true);
    assert_eq!(line["stderr_bytes_seen"], 50_000);
    assert_eq!(line["stderr_bytes_retained"], 16_384);

    // Without a signal nothing changes.
    let quiet = spillguard(&[
        "run",
        "--debug-on-signal",
        "60",
        "--",
        "sh",
        "-c",
        "head -c 20000 /dev/zero 1>&2",
    ]);
    let (_, line) = record_line(&quiet);
    assert_eq!(line["debug"], false);
    assert_eq!(line["stderr_bytes_retained"], 16_384);

    assert_eq!(
        usage_failure(&["run", "--debug-on-signal", "0", "--", "true"]),
        "spillguard: --debug-on-signal: debug grant duration 0.000 s must be above zero and at most 3600 s"
    );
}

#[test]
fn secrets_in_the_helpers_output_and_arguments_never_reach_the_json_line() {
    let script = "echo 'curl: > Authorization: Bearer Q7x9K2m4bearerP8z3' 1>&2; \
                  echo '{\"password\": \"Q7x9hunter2P8z3\"}'";
    let output = spillguard(&["run", "--", "sh", "-c", script, "token=Q7x9argP8z3"]);
    let (text, line) = record_line(&output);
    assert!(!text.contains("Q7x9"), "{text}");
    assert_eq!(
        line["stderr_excerpt"],
        "curl: > Authorization: Bearer [redacted: bearer-token]\n"
    );
    assert_eq!(
        line["stdout"],
        "{\"password\": \"[redacted: password-assignment]\"}\n"
    );
    assert_eq!(line["stderr_redactions"], 1);
    assert_eq!(line["stdout_redactions"], 1);
}

/// The flag forms of a credential, in the arguments of `run` and `stdio`:
/// none of them reaches the record line or the audit log (which name the
/// program, never its arguments), and the call itself is untouched.
#[test]
fn credentials_given_as_flags_reach_neither_the_record_nor_the_audit_log() {
    // `true` takes and ignores any argument: what is checked is what the
    // guard writes about the call, not what the helper does with them.
    let args = [
        "mysql",
        "-pQ7x9flag0my",
        "--password",
        "Q7x9flagA1pw",
        "--token=Q7x9flagB2tk",
        "--api-key",
        "Q7x9flagC3ak",
        "-u",
        "admin:Q7x9flagD4up",
        "--user=ops:Q7x9flagE5up",
        "-H",
        "Authorization: Bearer Q7x9flagF6bearer",
    ];
    for mode in ["run", "stdio"] {
        let audit = temp_path(&format!("cli-flag-secrets-{mode}.log"));
        let record = temp_path(&format!("cli-flag-secrets-{mode}.jsonl"));
        let _ = std::fs::remove_file(&audit);
        let _ = std::fs::remove_file(&record);
        let mut argv = vec![mode, "--audit", audit.to_str().unwrap()];
        if mode == "stdio" {
            argv.extend(["--record", record.to_str().unwrap()]);
        }
        argv.extend(["--", "true"]);
        argv.extend(args);
        let output = spillguard(&argv);
        let line = if mode == "run" {
            record_line(&output).0
        } else {
            assert_eq!(output.status.code(), Some(0), "{output:?}");
            std::fs::read_to_string(&record).unwrap()
        };
        let (verdict, events) = read_log(&audit);
        let log = std::fs::read(&audit).unwrap();
        let _ = std::fs::remove_file(&audit);
        let _ = std::fs::remove_file(&record);
        let value: Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(value["state"], "completed", "{mode}: {line}");
        assert_eq!(value["target"], "true", "{mode}: {line}");
        assert_eq!(events.len(), 7, "{mode}: {verdict}");
        assert!(!line.contains("Q7x9"), "{mode}: {line}");
        assert!(
            !log.windows(4).any(|w| w == b"Q7x9"),
            "{mode}: a credential in the audit log"
        );
    }
}
