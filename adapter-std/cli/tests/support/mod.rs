//! Shared helpers for the CLI's tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use spillguard_std::core::{CallKind, CallSpec};

/// A call spec for an action named `local.test` with this id.
pub fn spec(call_id: &str) -> CallSpec {
    CallSpec {
        call_id: call_id.into(),
        session_id: "s_test".into(),
        kind: CallKind::Action,
        action: "local.test".into(),
        target: "localhost".into(),
        summary: "test helper".into(),
    }
}

/// A path in the temp dir unique to this test process and `name`.
pub fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("spillguard-cli-{}-{name}", std::process::id()))
}

/// Polls `done` every 5 ms until it holds; panics after `limit`.
pub fn poll_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
