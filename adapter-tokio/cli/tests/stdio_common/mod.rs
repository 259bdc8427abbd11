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
