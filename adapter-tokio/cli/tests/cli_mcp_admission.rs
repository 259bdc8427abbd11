//! `spillguard mcp` runs at most `--max-running` tool calls at once: the
//! others wait in `queued` after their approval, first come first served,
//! and one that waits past `--queue-timeout-ms` ends `queue_expired`
//! without running. Over raw JSON-RPC, asserted by the records.
#![allow(clippy::unwrap_used)]

mod binary;
mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use binary::McpClient;
use serde_json::{Value, json};
use support::temp_path;

/// A server of `tools_toml` with `extra` flags, initialized with the
/// elicitation capability; its lines read on a thread.
struct Session(McpClient);

impl Session {
    fn start(name: &str, tools_toml: &str, extra: &[&str]) -> Session {
        let tools = temp_path(&format!("admission-{name}.toml"));
        std::fs::write(&tools, tools_toml).unwrap();
        let mut args = vec!["mcp", "--tools", tools.to_str().unwrap()];
        args.extend_from_slice(extra);
        let mut client = McpClient::start(&args, Path::new("."));
        client.initialize("admission", json!({"elicitation": {}}));
        Session(client)
    }

    /// Sends `calls` tool calls of `tool` at once, accepts every card as
    /// it comes, and returns each call's record by its request id.
    fn call_all(&mut self, tool: &str, calls: u64) -> HashMap<u64, Value> {
        for id in 0..calls {
            self.0
                .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": {}}}));
        }
        let mut records = HashMap::new();
        while records.len() < calls as usize {
            let message = self.0.next();
            if message["method"] == "elicitation/create" {
                self.0.send(json!({"jsonrpc": "2.0", "id": message["id"],
                    "result": {"action": "accept", "content": {}}}));
                continue;
            }
            if message["method"].is_string() {
                continue;
            }
            let id = message["id"]
                .as_u64()
                .unwrap_or_else(|| panic!("{message}"));
            records.insert(id, message["result"]["structuredContent"].clone());
        }
        records
    }

    fn end(self) -> Option<i32> {
        self.0.close()
    }
}

/// Milliseconds since the epoch of `received_at` (RFC 3339 UTC with
/// milliseconds, as records write it).
fn epoch_ms(received_at: &str) -> i64 {
    let (date, time) = received_at.trim_end_matches('Z').split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let (hms, millis) = time.split_once('.').unwrap();
    let t: Vec<i64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    // Days from civil (proleptic Gregorian).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + t[0]) * 60 + t[1]) * 60_000 + t[2] * 1000 + millis.parse::<i64>().unwrap()
}

/// When the state was entered, in microseconds since the call was received.
fn entered(record: &Value, state: &str) -> Option<i64> {
    record["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["state"] == state)
        .map(|m| m["offset_us"].as_i64().unwrap())
}

const SLOW: &str = "[tools.slow]\ndescription = \"sleeps\"\n\
    command = [\"sleep\", \"0.4\"]\napproval = \"required\"\napproval_timeout_ms = 20000\n";

#[test]
fn at_most_max_running_helpers_run_at_once_and_the_rest_wait_queued() {
    let mut session = Session::start("two", SLOW, &["--max-running", "2"]);
    let records = session.call_all("slow", 6);
    assert_eq!(session.end(), Some(0));

    let states: Vec<&str> = (0..6)
        .map(|id| records[&id]["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["completed"; 6]);
    // Each helper's life, from its dispatch to its observed exit, on one
    // clock: `received_at` (whole milliseconds) plus the record's offsets.
    let mut lives: Vec<(i64, i64)> = records
        .values()
        .map(|r| {
            let base = epoch_ms(r["received_at"].as_str().unwrap()) * 1000;
            let dispatched = entered(r, "dispatched").unwrap();
            let exited = r["exited_offset_us"].as_i64().unwrap();
            (base + dispatched, base + exited)
        })
        .collect();
    lives.sort_unstable();
    // At no instant do more than two lives overlap. A life ends when its
    // exit is seen; the next is admitted only once that call's record is
    // made, so lives touch at most within the 1 ms precision of
    // `received_at` on each side: an overlap counts from 2 ms on.
    let most = lives
        .iter()
        .map(|&(start, _)| {
            lives
                .iter()
                .filter(|&&(s, e)| s <= start && start + 2000 < e)
                .count()
        })
        .max()
        .unwrap();
    assert_eq!(most, 2, "{lives:?}");
    // Two ran at once, four waited for a slot.
    let waited: Vec<i64> = records
        .values()
        .map(|r| {
            let queued = r["queued_offset_us"].as_i64().unwrap();
            let admitted = r["admitted_offset_us"].as_i64().unwrap();
            assert_eq!(entered(r, "queued"), Some(queued));
            assert_eq!(entered(r, "authorized"), Some(admitted));
            assert!(entered(r, "dispatched").unwrap() >= admitted);
            admitted - queued
        })
        .collect();
    let queued_for_long = waited.iter().filter(|&&w| w > 300_000).count();
    assert_eq!(queued_for_long, 4, "{waited:?}");
}

#[test]
fn a_call_that_waits_past_the_queue_timeout_never_runs() {
    let tools = "[tools.hold]\ndescription = \"holds\"\ncommand = [\"sleep\", \"3\"]\n\
        approval = \"none\"\n";
    let (log, anchor) = (
        temp_path("admission-expiry.log"),
        temp_path("admission-expiry.anchor"),
    );
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&anchor);
    let mut session = Session::start(
        "expiry",
        tools,
        &[
            "--max-running",
            "1",
            "--queue-timeout-ms",
            "500",
            "--audit",
            log.to_str().unwrap(),
            "--anchor-out",
            anchor.to_str().unwrap(),
        ],
    );
    let records = session.call_all("hold", 2);
    assert_eq!(session.end(), Some(0));
    let mut by_state: Vec<(&str, &Value)> = records
        .values()
        .map(|r| (r["state"].as_str().unwrap(), r))
        .collect();
    by_state.sort_by_key(|(state, _)| *state);
    assert_eq!(
        by_state.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        ["completed", "queue_expired"]
    );
    let expired = by_state[1].1;
    assert_eq!(expired["pid"], Value::Null);
    assert_eq!(expired["exit_status"], Value::Null);
    assert_eq!(expired["stream_end"], "not_started");
    assert_eq!(expired["admitted_offset_us"], Value::Null);
    assert_eq!(entered(expired, "dispatched"), None);
    let queued = expired["queued_offset_us"].as_i64().unwrap();
    // The queue timeout runs from the entry into `queued`: 500 ms, and
    // what the host's timer adds (the core's own tests prove the exact
    // instant in virtual time).
    let waited = entered(expired, "queue_expired").unwrap() - queued;
    assert!((500_000..1_500_000).contains(&waited), "{waited} us");

    // The audit log has the same lifecycles, `queued` included: each call
    // as its record says, checked by `audit verify --expect`.
    let states = |r: &Value| -> Vec<String> {
        r["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["state"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        states(expired),
        ["received", "validated", "queued", "queue_expired"]
    );
    let completed = by_state[0].1;
    assert!(states(completed).contains(&"queued".to_owned()));
    let expect = temp_path("admission-expiry.expect");
    let lines: String = [completed, expired]
        .iter()
        .map(|r| format!("{r}\n"))
        .collect();
    std::fs::write(&expect, lines).unwrap();
    let verdict = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(["audit", "verify", "--expect"])
        .arg(&expect)
        .arg("--anchor-file")
        .args([&anchor, &log])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&verdict.stdout);
    assert_eq!(verdict.status.code(), Some(0), "{stdout}");
    assert!(stdout.starts_with("ok: "), "{stdout}");
    assert!(
        stdout.contains("expected lifecycle: no difference (2 calls)"),
        "{stdout}"
    );
}

#[test]
fn check_prints_the_admission_limits_in_force() {
    let tools = temp_path("admission-check.toml");
    std::fs::write(
        &tools,
        format!("{SLOW}[bridge]\nmax_running = 3\nqueue_timeout_ms = 2500\n"),
    )
    .unwrap();
    let check = |extra: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_spillguard"))
            .args(["mcp", "--tools", tools.to_str().unwrap(), "--check"])
            .args(extra)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    };
    let (status, stdout, _) = check(&[]);
    assert_eq!(status, Some(0));
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        listed["bridge"],
        json!({"max_running": 3, "queue_timeout_ms": 2500})
    );
    let (_, stdout, _) = check(&["--max-running", "7", "--queue-timeout-ms", "100"]);
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        listed["bridge"],
        json!({"max_running": 7, "queue_timeout_ms": 100})
    );

    std::fs::write(&tools, format!("{SLOW}[bridge]\nmax_running = 0\n")).unwrap();
    let (status, stdout, stderr) = check(&[]);
    assert_eq!((status, stdout.as_str()), (Some(2), ""));
    assert_eq!(
        stderr,
        format!(
            "spillguard: invalid tools file {}: bridge.max_running: 0 would run no tool call\n",
            tools.display()
        )
    );
    std::fs::write(&tools, SLOW).unwrap();
    let (status, _, stderr) = check(&["--max-running", "-3"]);
    assert_eq!(status, Some(2));
    assert_eq!(
        stderr,
        "spillguard: `--max-running`: `-3` is not a non-negative integer\n"
    );
    let (_, stdout, _) = check(&[]);
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(
        listed["bridge"],
        json!({"max_running": 2 * cpus, "queue_timeout_ms": 60000})
    );
    let _ = std::fs::remove_file(&tools);
}
