//! Shared helpers for the real-process tests of the std adapter, the smol
//! and tokio adapters and the CLI. Their `tests/support` is a symbolic link
//! to this folder, so a packaged crate carries these files itself.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, WaitId, WaitIdOptions};
use spillguard_host::proto::AuditEvent;
use spillguard_host::{AuditSink, ChainedFileAudit};

/// The description these tests give a call whose audit events they look
/// into (their sizes, their clear text): an action named `local.test` on
/// `localhost`, in session `s_test`, summary `test helper`.
pub trait LocalTest {
    /// Describes the call, with the id `call_id`.
    fn local_test(self, call_id: &str) -> Self;
}

/// Implements [`LocalTest`] for the adapter's builder type.
#[allow(unused_macros)]
macro_rules! local_test_for {
    ($builder:ty) => {
        impl support::LocalTest for $builder {
            fn local_test(self, call_id: &str) -> Self {
                self.call_id(call_id)
                    .session_id("s_test")
                    .action("local.test")
                    .target("localhost")
                    .summary("test helper")
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use local_test_for;

/// A path in the temp dir unique to this test package, its process and
/// `name`.
pub fn temp_path(name: &str) -> PathBuf {
    let package = env!("CARGO_PKG_NAME");
    std::env::temp_dir().join(format!("{package}-{}-{name}", std::process::id()))
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

/// Makes this test process the reaper of orphaned descendants of the
/// helpers it starts. The machine's init does not reap orphans, so a
/// helper's grandchild that outlived its parent would otherwise stay a
/// zombie member of the helper's group forever.
pub fn become_subreaper() {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .expect("PR_SET_CHILD_SUBREAPER");
}

/// Asserts that no process of group `pgid` is left: reaps the group's dead
/// orphans (the helper itself was reaped by the adapter before its record),
/// then expects `kill(-pgid, 0)` to fail with ESRCH within 2 s.
pub fn assert_group_gone(pgid: u32) {
    let pid = Pid::from_raw(pgid as i32).expect("a valid pgid");
    poll_until(
        Duration::from_secs(2),
        "the helper's group to be gone",
        || {
            while let Ok(Some(_)) = rustix::process::waitid(
                WaitId::Pgid(Some(pid)),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            ) {}
            rustix::process::test_kill_process_group(pid) == Err(rustix::io::Errno::SRCH)
        },
    );
}

/// A helper with a grandchild in its process group: a shell that starts a
/// `sleep 30` in the background and waits on another; `marker` is in its
/// command line, for [`pid_of`].
pub fn helper_and_grandchild(marker: &str) -> String {
    format!("sleep 30 & sleep 30; : {marker}")
}

/// The pid of the process group leader whose command line holds `marker`,
/// once there is one (10 s at most).
pub fn pid_of(marker: &str) -> u32 {
    let mut found = None;
    poll_until(Duration::from_secs(10), marker, || {
        found = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                String::from_utf8_lossy(&cmdline).contains(&format!(": {marker}\0"))
                    && live_members(*pid).contains(pid)
            });
        found.is_some()
    });
    found.unwrap()
}

/// The pids of group `pgid` that are alive (in any state but zombie), read
/// from `/proc/<pid>/stat`. Reaps nothing: the helper is its adapter's.
pub fn live_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // After the command name in parentheses: state, ppid, pgrp.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            let fields: Vec<&str> = after.split_whitespace().collect();
            fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
        })
        .collect()
}

/// Polls every millisecond until group `pgid` has at least `count` live
/// members (10 s at most).
pub fn wait_for_members(pgid: u32, count: usize) {
    poll_until(
        Duration::from_secs(10),
        "the helper and its grandchild",
        || live_members(pgid).len() >= count,
    );
}

/// How long after `dropped` group `pgid` had no live member, polled every
/// millisecond (10 s at most).
pub fn gone_after(pgid: u32, dropped: Instant) -> Duration {
    while !live_members(pgid).is_empty() {
        assert!(
            dropped.elapsed() < Duration::from_secs(10),
            "group {pgid} outlived 10 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    dropped.elapsed()
}

/// A call of `script` run by `/bin/sh -c` on `host`, with the id `id`,
/// dropped (handle or `run()` future) under `kill_on_drop(kill)`.
#[allow(unused_macros)]
macro_rules! shell_call {
    ($host:expr, $script:expr, $id:expr, $kill:expr) => {
        $host.shell($script).call_id($id).kill_on_drop($kill)
    };
}
#[allow(unused_imports)]
pub(crate) use shell_call;

/// The check of a drop that stops a helper and its grandchild: `start`
/// starts the call of the script it is given (marked `marker`, see
/// [`helper_and_grandchild`]), `give_up` drops what `start` returned (the
/// handle, or the `run()` future) once both processes run, and `record`
/// waits for the call's final record. The group must be gone within the
/// default `shutdown_grace` + 100 ms of the drop, stopped by SIGTERM, and
/// the record must say the client disconnected under the `Cancel`
/// policy. Returns how long after the drop the group was gone.
pub fn check_stopped_by_a_drop<T>(
    marker: &str,
    start: impl FnOnce(String) -> T,
    give_up: impl FnOnce(T),
    record: impl FnOnce() -> spillguard_host::proto::CallRecord,
) -> Duration {
    use spillguard_host::proto::{CallSettings, CancelReason, Config, DisconnectPolicy, State};
    become_subreaper();
    let started = start(helper_and_grandchild(marker));
    let pid = pid_of(marker);
    wait_for_members(pid, 2);
    // `give_up` drops the handle as the last thing it does.
    give_up(started);
    let gone = gone_after(pid, Instant::now());
    eprintln!("{marker}: the group of {pid} was gone {gone:?} after the drop");
    let grace = CallSettings::action(&Config::default()).shutdown_grace;
    assert!(
        gone <= grace + Duration::from_millis(100),
        "gone after {gone:?}"
    );
    let record = record();
    assert_eq!(record.pid, Some(pid));
    assert_eq!(record.state, State::CancelledAfterDispatch);
    assert_eq!(record.cancel_reason, Some(CancelReason::ClientDisconnected));
    assert!(record.client_disconnected);
    assert_eq!(record.on_client_disconnect, Some(DisconnectPolicy::Cancel));
    assert_eq!(record.exit_signal, Some(15));
    assert_group_gone(pid);
    gone
}

/// The check of a drop without `kill_on_drop`, under the host's default
/// `Finish` policy: `start` starts the call of the script it is given (a
/// `sleep 0.3` marked `marker`), whose handle (or `run()` future) is
/// dropped as soon as the helper runs, and `record` waits for the final
/// record: the helper ran to its end, no signal was sent.
pub fn check_finished_after_a_drop<T>(
    marker: &str,
    start: impl FnOnce(String) -> T,
    record: impl FnOnce() -> spillguard_host::proto::CallRecord,
) {
    use spillguard_host::proto::{DisconnectPolicy, State};
    let started = start(format!("sleep 0.3; : {marker}"));
    let pid = pid_of(marker);
    drop(started);
    let record = record();
    assert_eq!((record.pid, record.state), (Some(pid), State::Completed));
    assert_eq!((record.exit_status, record.exit_signal), (Some(0), None));
    assert_eq!(record.cancel_reason, None);
    assert!(record.client_disconnected);
    assert_eq!(record.on_client_disconnect, Some(DisconnectPolicy::Finish));
    assert!(record.signals.is_empty());
    let exited = record.exited_offset_us.unwrap();
    assert!(
        exited >= 300_000,
        "exited {exited} µs after it was received"
    );
}

/// An audit sink that keeps every event in memory.
#[derive(Debug, Default)]
pub struct Recorder {
    pub events: Mutex<Vec<AuditEvent>>,
}

impl AuditSink for Recorder {
    fn write(&self, event: &AuditEvent) -> std::io::Result<()> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
        Ok(())
    }
}

/// Records the name of the thread each event was written on, then hands
/// the event to `log`.
#[derive(Debug)]
pub struct ThreadNoting {
    pub log: ChainedFileAudit,
    pub threads: Mutex<Vec<(std::thread::ThreadId, Option<String>)>>,
}

impl AuditSink for ThreadNoting {
    fn write(&self, event: &AuditEvent) -> std::io::Result<()> {
        let current = std::thread::current();
        self.threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((current.id(), current.name().map(str::to_owned)));
        self.log.write(event)
    }
}

/// Lines a flood writes in `stderr_lines_come_whole_and_a_flood_drops!`,
/// 100 bytes each.
pub const FLOOD_LINES: u64 = 500_000;

/// `CallHandle::stderr_lines` on an async runtime's `host`: lines split
/// across writes come whole, the last without its newline at the end,
/// then the end; asked for once. A flood of [`FLOOD_LINES`] lines read
/// only after the call ended keeps the queue's 100 and counts the rest as
/// dropped, every byte still in the record.
#[allow(unused_macros)]
macro_rules! stderr_lines_come_whole_and_a_flood_drops {
    ($host:expr) => {
        async {
            use spillguard_host::proto::State;
            let script = "sleep 0.2; echo one >&2; printf 'tw' >&2; echo o >&2; printf three >&2";
            let call = $host.command("sh").args(["-c", script]).start();
            let mut lines = call.stderr_lines(16).unwrap();
            assert!(call.stderr_lines(16).is_err(), "asked for once");
            let mut got = Vec::new();
            while let Some(line) = lines.next_line().await {
                got.push(line);
            }
            assert_eq!(got, ["one", "two", "three"]);
            assert_eq!(lines.dropped(), 0);
            let outcome = call.wait().await;
            assert_eq!(outcome.record.state, State::Completed);
            assert_eq!(outcome.record.stderr_bytes_seen, 13);

            let flood = format!(
                "sleep 0.2; python3 -c \"import sys; sys.stderr.write(('x'*99+'\\n')*{})\"",
                support::FLOOD_LINES
            );
            let call = $host.command("sh").args(["-c", &flood]).start();
            let mut lines = call.stderr_lines(100).unwrap();
            let outcome = call.wait().await;
            assert_eq!(outcome.record.state, State::Completed);
            assert_eq!(outcome.record.stderr_bytes_seen, support::FLOOD_LINES * 100);
            let mut kept = 0;
            while let Some(line) = lines.next_line().await {
                assert_eq!(line.len(), 99);
                kept += 1;
            }
            assert_eq!((kept, lines.dropped()), (100, support::FLOOD_LINES - 100));
        }
    };
}
#[allow(unused_imports)]
pub(crate) use stderr_lines_come_whole_and_a_flood_drops;
