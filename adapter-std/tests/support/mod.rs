//! Shared helpers for the real-process tests of the std adapter, the smol
//! and tokio adapters and the CLI. Their `tests/support` is a symbolic link
//! to this folder, so a packaged crate carries these files itself.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, WaitId, WaitIdOptions};
use spillguard_kit::core::AuditEvent;
use spillguard_kit::{AuditSink, CallBuilder, ChainedFileAudit, Launch};

/// The description these tests give a call whose audit events they look
/// into (their sizes, their clear text): an action named `local.test` on
/// `localhost`, in session `s_test`, summary `test helper`.
pub trait LocalTest {
    /// Describes the call, with the id `call_id`.
    fn local_test(self, call_id: &str) -> Self;
}

impl<H: Launch> LocalTest for CallBuilder<'_, H> {
    fn local_test(self, call_id: &str) -> Self {
        self.call_id(call_id)
            .session_id("s_test")
            .action("local.test")
            .target("localhost")
            .summary("test helper")
    }
}

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
