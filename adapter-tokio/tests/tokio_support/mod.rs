//! Async helpers for the tokio adapter's tests; the runtime-free ones
//! (subreaper, group checks, audit recorder, specs) are the std adapter's.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::Duration;

use spillguard_tokio::proto::State;
use spillguard_tokio::{CallHandle, Host};

/// Polls `done` every 5 ms of the runtime's clock until it holds; panics
/// after `limit`.
pub async fn poll_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(limit, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "timed out after {limit:?} waiting for {what}"
    );
}

/// Waits until the call reaches `state`.
pub async fn wait_for_state(handle: &CallHandle, state: State) {
    poll_until(Duration::from_secs(10), state.as_str(), || {
        handle.state() == state
    })
    .await;
}

/// Every record the host kept for `call_id`.
pub fn records_of(host: &Host, call_id: &str) -> usize {
    host.finished_records()
        .iter()
        .filter(|r| r.call_id == call_id)
        .count()
}
