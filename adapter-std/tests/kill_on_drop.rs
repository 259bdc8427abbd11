//! `kill_on_drop` on std: `run()` blocks until the outcome, so what a
//! caller drops is the handle from `start()`. With `kill_on_drop(true)` the
//! drop stops the helper's whole group and the record is still written;
//! without it the host's `Finish` policy lets the helper run to its end.
#![allow(clippy::unwrap_used)]

// tests/support holds the test helpers the adapters share.
mod support;

use std::time::Duration;

use spillguard_std::proto::{CallRecord, Config};
use spillguard_std::{Host, HostOptions};
use support::{check_finished_after_a_drop, check_stopped_by_a_drop, poll_until};

/// Waits until the host has no live call, then the record of `call_id`.
fn record_of(host: &Host, call_id: &str) -> CallRecord {
    poll_until(Duration::from_secs(10), "the record", || {
        host.live_calls() == 0
    });
    let records = host.finished_records();
    records.into_iter().find(|r| r.call_id == call_id).unwrap()
}

#[test]
fn dropping_the_handle_with_kill_on_drop_stops_the_helper_and_its_grandchild() {
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    let start = |s| support::shell_call!(host, s, "c_std_drop", true).start();
    check_stopped_by_a_drop("c_std_drop", start, drop, || record_of(&host, "c_std_drop"));
}

#[test]
fn without_kill_on_drop_the_finish_policy_lets_the_helper_end() {
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    let start = |s| support::shell_call!(host, s, "c_std_finish", false).start();
    check_finished_after_a_drop("c_std_finish", start, || record_of(&host, "c_std_finish"));
}
