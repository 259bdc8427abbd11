//! What the `spillguard stdio` black-box tests share: the command and the
//! record line.
#![allow(dead_code, clippy::unwrap_used)]

use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// `spillguard stdio ARGS`, its three streams piped.
pub fn stdio(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_spillguard"));
    command
        .arg("stdio")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// The record line on the guard's stderr (its only line there).
pub fn record_on_stderr(output: &Output) -> Value {
    let text = String::from_utf8(output.stderr.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    serde_json::from_str(text.trim_end()).unwrap()
}

/// The record lines on the guard's stderr with `--restart`: one per run,
/// in order, each counting the restarts before it (the last one all of
/// them), each with the reason of the restart before it; the last run's.
pub fn last_run_on_stderr(output: &Output) -> Value {
    let text = String::from_utf8(output.stderr.clone()).unwrap();
    let runs: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(!runs.is_empty(), "no record: {text}");
    if let [only] = runs.as_slice()
        && only["restarts"].is_null()
    {
        // Without restarts: the one record, as without the flag.
        return only.clone();
    }
    for (n, run) in runs.iter().enumerate() {
        assert_eq!(run["restarts"], n, "run {n}: {text}");
        if n > 0 {
            assert!(run["restart_reason"].is_string(), "run {n}: {text}");
        }
        if n + 1 < runs.len() {
            assert_eq!(run["crash_loop"], false, "run {n}: {text}");
            assert_ne!(run["call_id"], runs[n + 1]["call_id"], "a call per run");
        }
    }
    runs.last().cloned().unwrap()
}
