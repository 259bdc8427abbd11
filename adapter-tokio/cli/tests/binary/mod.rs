//! The `spillguard` binary as the CLI tests run it.
#![allow(dead_code, clippy::unwrap_used)]

use std::process::{Command, Output, Stdio};

/// Runs `spillguard ARGS` with stdin closed and collects its output.
pub fn spillguard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The one-line message of a usage error: exit status 2, nothing on
/// stdout, exactly one line on stderr.
pub fn usage_failure(args: &[&str]) -> String {
    let output = spillguard(args);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
    assert_eq!(output.stdout, b"", "{args:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr.trim_end().to_owned()
}
