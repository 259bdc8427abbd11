//! `kill_on_drop` on std: `run()` blocks until the outcome, so what a
//! caller drops is the handle from `start()`. With `kill_on_drop(true)` the
//! drop stops the helper's whole group and the record is still written;
//! without it the host's `Finish` policy lets the helper run to its end.
#![allow(clippy::unwrap_used)]

// tests/support holds the test helpers the adapters share.
mod support;

use std::time::{Duration, Instant};

use spillguard_std::core::{CallKind, CallRecord, Config};
use spillguard_std::{Host, HostOptions};
use support::{
    assert_finished_after_the_drop, assert_stopped_by_the_drop, become_subreaper, gone_after,
    helper_and_grandchild, poll_until, wait_for_members,
};

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
    become_subreaper();
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    let grace = host.settings_for(CallKind::Action).shutdown_grace;
    let call = host
        .shell(helper_and_grandchild("c_std_drop"))
        .call_id("c_std_drop")
        .kill_on_drop(true)
        .start();
    poll_until(Duration::from_secs(10), "the pid", || call.id().is_some());
    let pid = call.id().unwrap();
    wait_for_members(pid, 2);
    let dropped = Instant::now();
    drop(call);
    let gone = gone_after(pid, dropped);
    eprintln!("std: group of {pid} gone {gone:?} after the handle was dropped");
    assert_stopped_by_the_drop(&record_of(&host, "c_std_drop"), pid, gone, grace);
}

#[test]
fn without_kill_on_drop_the_finish_policy_lets_the_helper_end() {
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    let call = host
        .command("sleep")
        .arg("0.3")
        .call_id("c_std_finish")
        .start();
    poll_until(Duration::from_secs(10), "the pid", || call.id().is_some());
    drop(call);
    assert_finished_after_the_drop(&record_of(&host, "c_std_finish"));
}
