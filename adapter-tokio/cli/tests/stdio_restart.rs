//! `spillguard stdio --restart` as a black box: a crashed server started
//! again with the next request reaching it, a crash loop given up after
//! exactly `--restart-max` runs, no restart once the host left or the
//! guard was asked to stop, and the flags' usage errors.
#![allow(clippy::unwrap_used)]

mod stdio_common;
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::process::{Pid, Signal, kill_process};
use serde_json::{Value, json};
use spillguard_std::proto::audit::{LogEntry, Verdict, VerifyOptions, verify_and_read};
use spillguard_std::proto::{AuditEvent, AuditKind};
use stdio_common::{last_run_on_stderr, stdio};
use support::temp_path;

/// A Python server: each `initialize` it gets goes to `log` (its params,
/// a line each), each `resources/subscribe` to `log.subs` (answered with
/// an empty result), each `tools/call` to `log.calls`; the third call counted
/// there ends it with status 3, after its time (Unix seconds) is written
/// to `log.died`.
const CRASHES_ON_THIRD_CALL: &str = r#"
import json, os, sys, time
log = sys.argv[1]
for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "initialize":
        with open(log, "a") as f:
            f.write(json.dumps(msg["params"]) + "\n")
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "s", "version": "1"}}}), flush=True)
    elif method == "resources/subscribe":
        with open(log + ".subs", "a") as f:
            f.write(json.dumps(msg["params"]) + "\n")
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}}), flush=True)
    elif method == "tools/call":
        with open(log + ".calls", "a") as f:
            f.write("call\n")
        n = sum(1 for _ in open(log + ".calls"))
        if n == 3:
            print("boom", file=sys.stderr, flush=True)
            with open(log + ".died", "w") as f:
                f.write(repr(time.time()))
            os._exit(3)
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
            "result": {"content": [{"type": "text", "text": "call %d" % n}]}}), flush=True)
"#;

/// `stdio --mcp --restart RESTART -- python3 -c SCRIPT FILE`, started,
/// with its stdin and its stdout read by line.
fn python_guard(
    restart: &str,
    script: &str,
    file: &Path,
) -> (Child, ChildStdin, BufReader<ChildStdout>) {
    let file = file.to_str().unwrap();
    let mut child = stdio(&[
        "--mcp",
        "--restart",
        restart,
        "--",
        "python3",
        "-c",
        script,
        file,
    ])
    .spawn()
    .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    (child, stdin, stdout)
}

/// The next message on the guard's stdout.
fn read_message(stdout: &mut BufReader<ChildStdout>) -> Value {
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

/// Restarts after a failure, a crash loop at the second quick run, waits
/// of 10 to 20 ms.
const TWO_QUICK_RUNS: [&str; 6] = [
    "--restart",
    "on-failure",
    "--restart-max",
    "2",
    "--restart-backoff-ms",
    "10,20",
];

/// `stdio FLAGS -- sh -c SCRIPT`, started.
fn sh_guard(flags: &[&str], script: &str) -> Child {
    stdio(&[flags, &["--", "sh", "-c", script]].concat())
        .spawn()
        .unwrap()
}

/// Waits until `starts` has `n` lines (a server's runs, a line each).
fn await_starts(starts: &Path, n: usize) {
    support::poll_until(Duration::from_secs(10), "the server's starts", || {
        std::fs::read_to_string(starts).is_ok_and(|s| s.lines().count() == n)
    });
}

fn send(stdin: &mut ChildStdin, message: &Value) {
    stdin
        .write_all(format!("{message}\n").as_bytes())
        .and_then(|()| stdin.flush())
        .unwrap();
}

fn call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "t"}})
}

/// The record line's account of the restarts.
fn restart_fields(record: &Value) -> Value {
    json!([
        record["restarts"],
        record["restart_reason"],
        record["crash_loop"]
    ])
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn a_server_that_crashes_is_started_again_and_the_next_request_reaches_it() {
    let log = temp_path("restart-initialize.log");
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(log.with_extension("log.calls"));
    let _ = std::fs::remove_file(log.with_extension("log.subs"));
    let (child, mut stdin, mut stdout) = python_guard("on-failure", CRASHES_ON_THIRD_CALL, &log);
    let mut read = || read_message(&mut stdout);
    let params = json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "host", "version": "1"}});
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}),
    );
    assert_eq!(read()["result"]["protocolVersion"], "2025-06-18");
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let subscribe = json!({"uri": "file:///notes"});
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": "sub", "method": "resources/subscribe", "params": subscribe}),
    );
    assert_eq!(read(), json!({"jsonrpc": "2.0", "id": "sub", "result": {}}));
    for id in 1..=2 {
        send(&mut stdin, &call(id));
        assert_eq!(read()["result"]["content"][0]["text"], format!("call {id}"));
    }
    send(&mut stdin, &call(3));
    let crash = read();
    let answered_at = unix_now();
    let died = std::fs::read_to_string(log.with_extension("log.died")).unwrap();
    let died: f64 = died.parse().unwrap();
    assert!(answered_at - died < 1.0, "answered {answered_at} - {died}");
    let call_id = crash["error"]["data"]["call_id"].clone();
    assert_eq!(
        crash,
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32000,
            "message": "MCP server exited with status 3 before answering; restarting (attempt 2 of 5)",
            "data": {"exit_status": 3, "exit_signal": null, "stderr_excerpt": "boom\n",
                "stderr_bytes_seen": 5, "call_id": call_id,
                "restart": "restarting (attempt 2 of 5)", "attempts": 1, "crash_loop": false}}})
    );
    // The next request, sent at once, waits for the new server and its
    // replayed initialize; the host hears that the tools may have changed.
    send(&mut stdin, &call(4));
    assert_eq!(
        read(),
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    );
    let fourth = read();
    let latency = unix_now() - died;
    eprintln!("restart latency (exit to the successor's first answer): {latency:.3} s");
    assert_eq!(
        fourth,
        json!({"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "call 4"}]}})
    );
    drop(stdin);
    // Nothing more: the host saw one initialize answer, the first.
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "");
    // Each server got the host's initialize, as the host sent it.
    let initializes: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(initializes, [params.clone(), params]);
    // And the subscription, its second answer swallowed.
    let subscriptions: Vec<Value> = std::fs::read_to_string(log.with_extension("log.subs"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(subscriptions, [subscribe.clone(), subscribe]);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let record = last_run_on_stderr(&output);
    assert_eq!(restart_fields(&record), json!([1, "exit status 3", false]));
    assert_eq!(
        (&record["exit_status"], &record["state"]),
        (&json!(0), &json!("completed"))
    );
    // The backoff's first wait is 100 to 125 ms; the rest is spawning
    // Python twice.
    assert!(latency < 3.0, "{latency}");
    for end in ["log.calls", "log.died", "log.subs"] {
        let _ = std::fs::remove_file(log.with_extension(end));
    }
    let _ = std::fs::remove_file(&log);
}

#[test]
fn a_server_that_exits_at_start_every_time_is_given_up_after_exactly_max_attempts() {
    let starts = temp_path("restart-starts.log");
    let _ = std::fs::remove_file(&starts);
    let script = format!("echo start >> {}; echo dying >&2; exit 4", starts.display());
    let started = Instant::now();
    let flags = [
        "--mcp",
        "--restart",
        "on-failure",
        "--restart-max",
        "3",
        "--restart-backoff-ms",
        "50,200",
    ];
    let mut child = sh_guard(&flags, &script);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    await_starts(&starts, 3);
    let gave_up = started.elapsed();
    let mut answers = Vec::new();
    for id in 1..=2 {
        let asked = Instant::now();
        send(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}),
        );
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        // Answered at once: no server is waited for.
        assert!(asked.elapsed() < Duration::from_millis(500));
        answers.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    for (id, answer) in (1..).zip(&answers) {
        let message = answer["error"]["message"].as_str().unwrap();
        let prefix = "MCP server exited with status 4 before answering; crash loop: gave up after 3 attempts in ";
        let seconds: f64 = message
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(" s"))
            .unwrap()
            .parse()
            .unwrap();
        // Two waits of 50 to 62.5 and 100 to 125 ms, three short runs.
        assert!((0.1..=1.0).contains(&seconds), "{message}");
        let call_id = answer["error"]["data"]["call_id"].clone();
        let restart = message.strip_prefix("MCP server exited with status 4 before answering; ");
        assert_eq!(
            answer,
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": message,
                "data": {"exit_status": 4, "exit_signal": null, "stderr_excerpt": "dying\n",
                    "stderr_bytes_seen": 6, "call_id": call_id, "restart": restart.unwrap(),
                    "attempts": 3, "crash_loop": true}}})
        );
    }
    assert!(gave_up >= Duration::from_millis(150), "{gave_up:?}");
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(4));
    let record = last_run_on_stderr(&output);
    assert_eq!(restart_fields(&record), json!([2, "exit status 4", true]));
    assert_eq!(record["exit_status"], 4);
    assert_eq!(std::fs::read_to_string(&starts).unwrap().lines().count(), 3);
    let _ = std::fs::remove_file(&starts);
}

#[test]
fn a_request_in_flight_at_the_crash_loop_verdict_is_answered_without_more_input() {
    let starts = temp_path("restart-in-flight.log");
    let _ = std::fs::remove_file(&starts);
    // Each run reads one request and exits without answering it.
    let script = format!("echo start >> {}; read line; exit 4", starts.display());
    let flags = [
        "--mcp",
        "--restart",
        "on-failure",
        "--restart-max",
        "2",
        "--restart-backoff-ms",
        "50,100",
    ];
    let mut child = sh_guard(&flags, &script);
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (lines, answers) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let answer = || -> Value {
        let line = answers
            .recv_timeout(Duration::from_secs(5))
            .expect("an answer within 5 s");
        serde_json::from_str(&line).unwrap()
    };
    await_starts(&starts, 1);
    send(&mut stdin, &call(1));
    let first = answer();
    assert_eq!(first["id"], 1);
    assert_eq!(
        first["error"]["message"],
        "MCP server exited with status 4 before answering; restarting (attempt 2 of 2)"
    );
    await_starts(&starts, 2);
    // The second run takes request 2 and exits: the crash loop's verdict
    // comes with request 2 in flight, and the host sends nothing more.
    let asked = Instant::now();
    send(&mut stdin, &call(2));
    let second = answer();
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(second["id"], 2);
    assert_eq!(second["error"]["data"]["crash_loop"], true);
    assert_eq!(second["error"]["data"]["attempts"], 2);
    let message = second["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "MCP server exited with status 4 before answering; crash loop: gave up after 2 attempts in "
        ),
        "{message}"
    );
    drop(stdin);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(4));
    assert_eq!(std::fs::read_to_string(&starts).unwrap().lines().count(), 2);
    let _ = std::fs::remove_file(&starts);
}

/// A Python server that answers `initialize` with protocol version
/// `2025-06-18` on its first run and `2024-11-05` after (its runs counted
/// in `starts`), and exits with status 5 at its first `tools/call`.
const CHANGES_ITS_PROTOCOL: &str = r#"
import json, os, sys
starts = sys.argv[1]
with open(starts, "a") as f:
    f.write("start\n")
first = sum(1 for _ in open(starts)) == 1
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        version = "2025-06-18" if first else "2024-11-05"
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": version, "capabilities": {},
            "serverInfo": {"name": "s", "version": "1"}}}), flush=True)
    elif msg.get("method") == "tools/call":
        os._exit(5)
"#;

#[test]
fn a_new_server_with_another_protocol_version_ends_the_restarts_and_says_why() {
    let starts = temp_path("restart-protocol.log");
    let _ = std::fs::remove_file(&starts);
    let (child, mut stdin, mut stdout) = python_guard("always", CHANGES_ITS_PROTOCOL, &starts);
    let mut read = || read_message(&mut stdout);
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}}}),
    );
    assert_eq!(read()["result"]["protocolVersion"], "2025-06-18");
    send(&mut stdin, &call(1));
    assert_eq!(
        read()["error"]["data"]["restart"],
        "restarting (attempt 2 of 5)"
    );
    await_starts(&starts, 2);
    // Queued behind the replay, then answered with the refusal.
    send(&mut stdin, &call(2));
    let refused = read();
    let reason = "restart refused: the restarted server answered initialize with \
        protocolVersion \"2024-11-05\", not \"2025-06-18\"";
    assert_eq!(refused["id"], 2);
    assert_eq!(
        (
            &refused["error"]["data"]["restart"],
            &refused["error"]["data"]["crash_loop"]
        ),
        (&json!(reason), &json!(false))
    );
    send(&mut stdin, &call(3));
    assert_eq!(read()["error"]["data"]["restart"], reason);
    // A stop asked of the guard ends it, the host still connected.
    let mut child = child;
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    kill_process(pid, Signal::TERM).unwrap();
    support::poll_until(Duration::from_secs(5), "the guard's end at TERM", || {
        child.try_wait().unwrap().is_some()
    });
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let record = last_run_on_stderr(&output);
    assert_eq!(restart_fields(&record), json!([1, "exit status 5", false]));
    assert_eq!(std::fs::read_to_string(&starts).unwrap().lines().count(), 2);
    let _ = std::fs::remove_file(&starts);
}

#[test]
fn no_restart_once_the_host_closed_stdin_even_with_always() {
    let mut child = stdio(&["--restart", "always", "--", "cat"])
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"in\n").unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, b"in\n");
    let record = last_run_on_stderr(&output);
    assert_eq!(restart_fields(&record), json!([0, null, false]));
}

#[test]
fn no_restart_once_the_guard_is_asked_to_stop() {
    let mut child = stdio(&["--restart", "always", "--", "sleep", "30"])
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    kill_process(pid, Signal::TERM).unwrap();
    let output = child.wait_with_output().unwrap();
    drop(stdin);
    let record = last_run_on_stderr(&output);
    assert_eq!(restart_fields(&record), json!([0, null, false]));
    assert_eq!(
        (&record["state"], &record["signals"][0]["signal"]),
        (&json!("cancelled_after_dispatch"), &json!("TERM"))
    );
    assert_eq!(output.status.code(), Some(128 + 15));
}

#[test]
fn restart_never_answers_and_ends_as_without_the_flag() {
    let output = {
        let mut child = stdio(&[
            "--mcp",
            "--restart",
            "never",
            "--",
            "sh",
            "-c",
            "read line; exit 3",
        ])
        .spawn()
        .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        send(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        );
        let output = child.wait_with_output().unwrap();
        drop(stdin);
        output
    };
    assert_eq!(output.status.code(), Some(3));
    let record = last_run_on_stderr(&output);
    assert_eq!(record.get("restarts"), None);
    assert_eq!(record.get("crash_loop"), None);
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        answer["error"]["message"],
        "MCP server exited with status 3 before answering"
    );
    assert_eq!(answer["error"]["data"].get("restart"), None);
}

#[test]
fn bad_restart_flags_are_usage_errors_that_name_the_flag() {
    for (flags, message) in [
        (
            &["--restart", "sometimes"][..],
            "`--restart`: unknown value `sometimes` (expected one of: on-failure, always, never)",
        ),
        (
            &["--restart-max", "0"],
            "`--restart-max`: 0 would give up before the first start",
        ),
        (
            &["--restart-max", "-1"],
            "`--restart-max`: `-1` is not a non-negative integer",
        ),
        (
            &["--restart-window-ms", "0"],
            "`--restart-window-ms`: 0 would count no run toward a crash loop",
        ),
        (
            &["--restart-window-ms", "-5"],
            "`--restart-window-ms`: `-5` is not a non-negative integer",
        ),
        (
            &["--restart-backoff-ms", "500,100"],
            "`--restart-backoff-ms`: MIN 500 is more than MAX 100",
        ),
        (
            &["--retry", "idempotent", "--restart", "always"],
            "`--retry` needs `--mcp` and `--restart on-failure` or `always`",
        ),
        (
            &["--restart-backoff-ms", "5,0"],
            "`--restart-backoff-ms`: a MAX of 0 would restart at once, every time",
        ),
    ] {
        let marker = temp_path("restart-ran");
        let _ = std::fs::remove_file(&marker);
        let touch = format!("touch {}", marker.display());
        let output = stdio(&[flags, &["--", "sh", "-c", &touch]].concat())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{flags:?}");
        assert_eq!(
            String::from_utf8(output.stderr).unwrap(),
            format!("spillguard: {message}\n")
        );
        assert!(!marker.exists(), "nothing runs: {flags:?}");
    }
}

#[test]
fn forward_stderr_marks_each_new_run() {
    let starts = temp_path("restart-forward.log");
    let record = temp_path("restart-forward.jsonl");
    let _ = std::fs::remove_file(&starts);
    let _ = std::fs::remove_file(&record);
    let script = format!(
        "echo start >> {}; echo run >&2; read line; exit 3",
        starts.display()
    );
    let flags = [
        &TWO_QUICK_RUNS[..],
        &["--forward-stderr", "--record", record.to_str().unwrap()],
    ]
    .concat();
    let mut child = sh_guard(&flags, &script);
    let mut stdin = child.stdin.take().unwrap();
    await_starts(&starts, 1);
    stdin.write_all(b"one\n").unwrap();
    await_starts(&starts, 2);
    stdin.write_all(b"two\n").unwrap();
    // Two quick runs: a crash loop; the guard ends once stdin does.
    std::thread::sleep(Duration::from_millis(200));
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "run\nspillguard: server restarted (attempt 2)\nrun\n"
    );
    // The --record file: a line per run.
    let lines: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(restart_fields(&lines[0]), json!([0, null, false]));
    assert_eq!(lines[0]["exit_status"], 3);
    assert_eq!(restart_fields(&lines[1]), json!([1, "exit status 3", true]));
    assert_eq!(std::fs::read_to_string(&starts).unwrap().lines().count(), 2);
    let _ = std::fs::remove_file(&starts);
    let _ = std::fs::remove_file(&record);
}

/// A Python server with a read-only tool `read`: the first call of it
/// (counted in `calls`) ends the server with status 3 unanswered; later
/// calls are answered with the call's number.
const CRASHES_ON_FIRST_READ: &str = r#"
import json, os, sys
calls = sys.argv[1]
for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "s", "version": "1"}}}), flush=True)
    elif method == "tools/list":
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": [
            {"name": "read", "inputSchema": {"type": "object"},
             "annotations": {"readOnlyHint": True}}]}}), flush=True)
    elif method == "tools/call":
        with open(calls, "a") as f:
            f.write("call\n")
        n = sum(1 for _ in open(calls))
        if n == 1:
            os._exit(3)
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
            "result": {"content": [{"type": "text", "text": "read %d" % n}]}}), flush=True)
"#;

#[test]
fn retry_idempotent_sends_a_read_only_call_in_flight_to_the_next_server() {
    let calls = temp_path("restart-retry.log");
    let _ = std::fs::remove_file(&calls);
    let file = calls.to_str().unwrap();
    let flags = ["--mcp", "--restart", "on-failure", "--retry", "idempotent"];
    let script = ["--", "python3", "-c", CRASHES_ON_FIRST_READ, file];
    let mut child = stdio(&[&flags[..], &script[..]].concat()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}}}),
    );
    assert_eq!(read_message(&mut stdout)["id"], 0);
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    assert_eq!(
        read_message(&mut stdout)["result"]["tools"][0]["name"],
        "read"
    );
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read"}}),
    );
    // No crash error: the call is answered by the next server.
    assert_eq!(
        read_message(&mut stdout),
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    );
    assert_eq!(
        read_message(&mut stdout),
        json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "read 2"}]}})
    );
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let record = last_run_on_stderr(&output);
    assert_eq!(restart_fields(&record), json!([1, "exit status 3", false]));
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 2);
    let _ = std::fs::remove_file(&calls);
}

#[test]
fn a_program_that_cannot_start_is_a_crash_loop_answered_with_why() {
    let program = ["--mcp", "--", "/nonexistent/spillguard-test-server"];
    let mut child = stdio(&[&TWO_QUICK_RUNS[..], &program].concat())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Sent once the restarts are over (two runs and a wait of 10 to
    // 12.5 ms): the guard reads it while it waits for the first request.
    std::thread::sleep(Duration::from_millis(300));
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(127));
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    let data = &answer["error"]["data"];
    let failure = "spawn failed: /nonexistent/spillguard-test-server: NotFound: \
        No such file or directory (os error 2)";
    assert_eq!(
        (&data["failure"], &data["attempts"], &data["crash_loop"]),
        (&json!(failure), &json!(2), &json!(true))
    );
    let restart = data["restart"].as_str().unwrap();
    assert_eq!(
        answer["error"]["message"],
        format!("MCP server could not be started: {failure}; {restart}")
    );
    assert!(
        restart.starts_with("crash loop: gave up after 2 attempts in 0."),
        "{restart}"
    );
    let record = last_run_on_stderr(&output);
    assert_eq!(restart_fields(&record), json!([1, "no exit status", true]));
}

/// A Python server that appends its pid to the file `$1` as it starts and
/// answers each request with its pid; a request named `close` makes it
/// close its stdout and live on; `TERM` is ignored with `$2` = `hard`.
const PID_SERVER: &str = r#"
import json, os, signal, sys, time
with open(sys.argv[1], "a") as f:
    f.write("%d\n" % os.getpid())
if sys.argv[2:] == ["hard"]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("params", {}).get("name") == "close":
        sys.stdout.close()
        os.close(1)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"pid": os.getpid()}}), flush=True)
while sys.argv[2:] == ["hard"]:
    time.sleep(1)
"#;

/// `stdio --mcp --record FILE FLAGS -- python3 -c PID_SERVER STARTS EXTRA`.
fn pid_guard(
    flags: &[&str],
    starts: &Path,
    extra: &str,
) -> (Child, ChildStdin, BufReader<ChildStdout>) {
    let args = [
        &["--mcp"][..],
        flags,
        &[
            "--",
            "python3",
            "-c",
            PID_SERVER,
            starts.to_str().unwrap(),
            extra,
        ],
    ]
    .concat();
    let mut child = stdio(&args).spawn().unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    (child, stdin, stdout)
}

/// The pids in `starts`, one per run.
fn pids(starts: &Path) -> Vec<i32> {
    std::fs::read_to_string(starts)
        .unwrap_or_default()
        .lines()
        .map(|line| line.parse().unwrap())
        .collect()
}

/// Whether `pid` names no process (none left, not even a zombie).
fn gone(pid: i32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

const QUICK_RESTARTS: [&str; 4] = ["--restart", "on-failure", "--restart-backoff-ms", "10,20"];

#[test]
fn a_server_killed_from_outside_is_started_again_and_none_outlive_the_host() {
    let starts = temp_path("restart-sigkill.pids");
    let _ = std::fs::remove_file(&starts);
    let (child, mut stdin, mut stdout) = pid_guard(&QUICK_RESTARTS, &starts, "");
    send(&mut stdin, &call(1));
    let first = read_message(&mut stdout)["result"]["pid"].as_i64().unwrap() as i32;
    assert_eq!(pids(&starts), [first]);
    // As the OOM killer would: KILL, from outside the guard.
    kill_process(Pid::from_raw(first).unwrap(), Signal::KILL).unwrap();
    await_starts(&starts, 2);
    send(&mut stdin, &call(2));
    let second = read_message(&mut stdout)["result"]["pid"].as_i64().unwrap() as i32;
    assert_eq!(pids(&starts), [first, second]);
    assert_ne!(first, second);
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let record = last_run_on_stderr(&output);
    assert_eq!(restart_fields(&record), json!([1, "signal 9", false]));
    assert_eq!(record["state"], "completed");
    assert!(gone(first) && gone(second), "no run outlives the host");
    let _ = std::fs::remove_file(&starts);
}

#[test]
fn a_server_that_closes_its_stdout_and_lives_on_is_stopped_and_started_again() {
    let starts = temp_path("restart-stdout-closed.pids");
    let _ = std::fs::remove_file(&starts);
    let flags = [
        &QUICK_RESTARTS[..],
        &["--stdin-close-grace-ms", "500", "--grace-ms", "300"],
    ]
    .concat();
    let (child, mut stdin, mut stdout) = pid_guard(&flags, &starts, "hard");
    send(&mut stdin, &call(1));
    let first = read_message(&mut stdout)["result"]["pid"].as_i64().unwrap() as i32;
    let close =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "close"}});
    let sent = Instant::now();
    send(&mut stdin, &close);
    // The guard waits 250 ms for an exit, then runs the shutdown: stdin
    // closed, TERM 500 ms later (ignored), KILL 300 ms after it.
    let answer = read_message(&mut stdout);
    let waited = sent.elapsed();
    assert_eq!(answer["id"], 2);
    assert_eq!(
        answer["error"]["message"],
        "MCP server was ended by signal 9 before answering; restarting (attempt 2 of 5)"
    );
    assert!(waited >= Duration::from_millis(1_050), "{waited:?}");
    assert!(waited < Duration::from_secs(4), "{waited:?}");
    await_starts(&starts, 2);
    send(&mut stdin, &call(3));
    let second = read_message(&mut stdout)["result"]["pid"].as_i64().unwrap() as i32;
    assert_ne!(first, second);
    assert!(gone(first), "the first run was stopped");
    // The host leaves: the second run ignores TERM too, and is killed.
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let record = last_run_on_stderr(&output);
    assert_eq!(restart_fields(&record), json!([1, "stdout closed", false]));
    let signals: Vec<&str> = record["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["signal"].as_str().unwrap())
        .collect();
    assert_eq!(signals, ["TERM", "KILL"], "{record}");
    assert_eq!(output.status.code(), Some(137), "{output:?}");
    assert!(gone(second), "no run outlives the host");
    assert_eq!(pids(&starts).len(), 2, "no start after the host left");
    let _ = std::fs::remove_file(&starts);
}

#[test]
fn a_server_that_ignores_term_is_killed_when_the_host_leaves_and_not_restarted() {
    let starts = temp_path("restart-hard.pids");
    let _ = std::fs::remove_file(&starts);
    let flags = [
        "--restart",
        "always",
        "--stdin-close-grace-ms",
        "200",
        "--grace-ms",
        "300",
    ];
    let (child, mut stdin, mut stdout) = pid_guard(&flags, &starts, "hard");
    send(&mut stdin, &call(1));
    let pid = read_message(&mut stdout)["result"]["pid"].as_i64().unwrap() as i32;
    let left = Instant::now();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let took = left.elapsed();
    // stdin closed, 200 ms, TERM (ignored), 300 ms, KILL.
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    let record = last_run_on_stderr(&output);
    assert_eq!(restart_fields(&record), json!([0, null, false]));
    assert_eq!(record["exit_signal"], 9, "{record}");
    assert_eq!(output.status.code(), Some(137));
    assert!(gone(pid));
    assert_eq!(pids(&starts), [pid], "no restart once the host left");
    let _ = std::fs::remove_file(&starts);
}

/// `--config FILE` with `[helper_output]` and `[helper_restart]` = `table`.
fn config_file(name: &str, table: &str) -> std::path::PathBuf {
    let path = temp_path(name);
    std::fs::write(
        &path,
        format!("[helper_output]\nretain = \"tail\"\n\n[helper_restart]\n{table}"),
    )
    .unwrap();
    path
}

#[test]
fn the_configuration_file_s_restart_table_applies_and_flags_go_over_it() {
    let file = config_file(
        "restart-config.toml",
        "mode = \"on-failure\"\nmax_attempts = 2\nwindow_ms = 5000\nbackoff_ms = [10, 20]\n",
    );
    let starts = temp_path("restart-config-starts.log");
    for (flags, runs, status, fields) in [
        // The file's: 2 quick runs, a crash loop.
        (&[][..], 2, 4, json!([1, "exit status 4", true])),
        // A flag over it: one run more.
        (
            &["--restart-max", "3"][..],
            3,
            4,
            json!([2, "exit status 4", true]),
        ),
        // `--restart never` over the file's mode: no restart.
        (&["--restart", "never"][..], 1, 4, json!([null, null, null])),
    ] {
        let _ = std::fs::remove_file(&starts);
        let script = format!("echo start >> {}; exit 4", starts.display());
        let args = [&["--mcp", "--config", file.to_str().unwrap()][..], flags].concat();
        let mut child = sh_guard(&args, &script);
        await_starts(&starts, runs);
        std::thread::sleep(Duration::from_millis(200));
        drop(child.stdin.take());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(status), "{flags:?}");
        let record = last_run_on_stderr(&output);
        assert_eq!(restart_fields(&record), fields, "{flags:?}");
        assert_eq!(pids_lines(&starts), runs, "{flags:?}: no run more");
    }
    let _ = std::fs::remove_file(&starts);
    let _ = std::fs::remove_file(&file);
}

fn pids_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn a_bad_restart_table_is_a_usage_error_naming_the_key_and_nothing_runs() {
    for (table, message) in [
        (
            "mode = \"sometimes\"\n",
            "helper_restart.mode: \"sometimes\" is not \"on-failure\", \"always\" or \"never\"",
        ),
        (
            "max_attempts = 0\n",
            "helper_restart.max_attempts: 0 is not at least 1",
        ),
        (
            "window_ms = -3\n",
            "helper_restart.window_ms: -3 is not at least 1",
        ),
        (
            "backoff_ms = [500, 100]\n",
            "helper_restart.backoff_ms: MIN 500 is more than MAX 100",
        ),
        (
            "backoff_ms = [5, 0]\n",
            "helper_restart.backoff_ms: 0 is not at least 1",
        ),
        (
            "backoff_ms = 40000\n",
            "helper_restart.backoff_ms: MIN 40000 is more than MAX 30000",
        ),
        (
            "retries = 2\n",
            "helper_restart.retries: unknown key (known: mode, max_attempts, window_ms, backoff_ms, retry)",
        ),
        (
            "mode = \"always\"\nretry = \"idempotent\"\n",
            "`--retry` needs `--mcp` and `--restart on-failure` or `always`",
        ),
    ] {
        let file = config_file("restart-bad.toml", table);
        let marker = temp_path("restart-bad-ran");
        let _ = std::fs::remove_file(&marker);
        let touch = format!("touch {}", marker.display());
        let output = stdio(&["--config", file.to_str().unwrap(), "--", "sh", "-c", &touch])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{table}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        let want = if message.starts_with('`') {
            format!("spillguard: {message}\n")
        } else {
            format!("spillguard: invalid config {}: {message}\n", file.display())
        };
        assert_eq!(stderr, want, "{table}");
        assert!(!marker.exists(), "nothing runs: {table}");
        let _ = std::fs::remove_file(&file);
    }
}

#[test]
fn each_run_is_a_record_line_and_a_span_of_its_own() {
    let starts = temp_path("restart-spans.log");
    let spans = temp_path("restart-spans.jsonl");
    let log = temp_path("restart-audit.log");
    let _ = std::fs::remove_file(&starts);
    let _ = std::fs::remove_file(&spans);
    let _ = std::fs::remove_file(&log);
    let script = format!("echo start >> {}; exit 5", starts.display());
    let flags = [
        "--restart",
        "on-failure",
        "--restart-max",
        "3",
        "--restart-backoff-ms",
        "10,20",
        "--otel-file",
        spans.to_str().unwrap(),
        "--audit",
        log.to_str().unwrap(),
    ];
    let mut child = sh_guard(&flags, &script);
    await_starts(&starts, 3);
    std::thread::sleep(Duration::from_millis(200));
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(5));
    let text = String::from_utf8(output.stderr.clone()).unwrap();
    let runs: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(runs.len(), 3, "{text}");
    let last = last_run_on_stderr(&output);
    assert_eq!(restart_fields(&last), json!([2, "exit status 5", true]));
    // One call span per run, each naming its run's call; a restarted
    // run's opens with a `restart` event (its attempt, why the run before
    // it ended).
    let exported = std::fs::read_to_string(&spans).unwrap();
    let attribute = |span: &Value, key: &str| -> Value {
        span["attributes"]
            .as_array()
            .and_then(|kvs| kvs.iter().find(|kv| kv["key"] == key))
            .map_or(Value::Null, |kv| {
                kv["value"]
                    .as_object()
                    .and_then(|v| v.values().next().cloned())
                    .unwrap_or(Value::Null)
            })
    };
    let call_spans: Vec<Value> = exported
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|l| l["resourceSpans"].as_array().cloned())
        .flatten()
        .flat_map(|r| r["scopeSpans"].as_array().cloned().unwrap_or_default())
        .flat_map(|s| s["spans"].as_array().cloned().unwrap_or_default())
        .filter(|span| attribute(span, "spillguard.call.id").is_string())
        .collect();
    assert_eq!(call_spans.len(), 3);
    for (n, run) in runs.iter().enumerate() {
        let span = call_spans
            .iter()
            .find(|span| attribute(span, "spillguard.call.id") == run["call_id"])
            .unwrap_or_else(|| panic!("no span for run {n}"));
        let first = &span["events"][0];
        if n == 0 {
            assert_ne!(first["name"], "restart");
            assert_eq!(attribute(span, "spillguard.restarts"), Value::Null);
        } else {
            assert_eq!(first["name"], "restart", "run {n}");
            assert_eq!(
                attribute(first, "spillguard.restart.attempt"),
                json!((n + 1).to_string())
            );
            assert_eq!(
                attribute(first, "spillguard.restart.reason"),
                "exit status 5"
            );
            assert_eq!(attribute(span, "spillguard.restarts"), json!(n.to_string()));
        }
    }
    // The audit log: each restarted run's events open with its restart
    // (the run's attempt, why the run before it ended, that run's call),
    // before its attempt; the log verifies.
    let bytes = std::fs::read(&log).unwrap();
    let (verdict, records) = verify_and_read(&bytes, VerifyOptions::default());
    assert!(matches!(verdict, Verdict::Unanchored { .. }), "{verdict:?}");
    let events: Vec<AuditEvent> = records
        .into_iter()
        .filter_map(|r| match r.entry {
            Some(LogEntry::Call(event)) => Some(event),
            _ => None,
        })
        .collect();
    for (n, run) in runs.iter().enumerate() {
        let call_id = run["call_id"].as_str().unwrap();
        let own: Vec<&AuditEvent> = events.iter().filter(|e| e.call_id == call_id).collect();
        let restart = match &own[0].kind {
            AuditKind::Restart {
                attempt,
                reason,
                previous_call_id,
            } => Some((*attempt, reason.as_str(), previous_call_id.as_str())),
            _ => None,
        };
        let attempt_at = own
            .iter()
            .position(|e| matches!(e.kind, AuditKind::Attempt { .. }))
            .unwrap();
        if n == 0 {
            assert_eq!(restart, None);
            assert!(
                !own.iter()
                    .any(|e| matches!(e.kind, AuditKind::Restart { .. }))
            );
        } else {
            let previous = runs[n - 1]["call_id"].as_str().unwrap();
            assert_eq!(restart, Some((n as u32 + 1, "exit status 5", previous)));
            assert!(attempt_at > 0, "the restart comes first: {own:?}");
        }
        assert!(matches!(own.last().unwrap().kind, AuditKind::Final(_)));
    }
    let restarts = events
        .iter()
        .filter(|e| matches!(e.kind, AuditKind::Restart { .. }))
        .count();
    assert_eq!(restarts, 2);
    let _ = std::fs::remove_file(&starts);
    let _ = std::fs::remove_file(&spans);
    for path in [log.clone(), log.with_extension("log.anchor")] {
        let _ = std::fs::remove_file(path);
    }
}
