//! An owner that panics (a bug, here in an audit sink) hands its panic to
//! the handle that waits, and the host goes on serving calls.
#![allow(clippy::unwrap_used)]

use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use spillguard_std::proto::{AuditEvent, Config, State};
use spillguard_std::{AuditSink, Host, HostOptions};

/// Panics on its first write, then counts the writes.
#[derive(Default)]
struct BuggySink {
    writes: AtomicU64,
}

impl AuditSink for BuggySink {
    fn write(&self, _event: &AuditEvent) -> io::Result<()> {
        if self.writes.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("audit sink bug");
        }
        Ok(())
    }
}

#[test]
fn the_owners_panic_is_resumed_by_wait_and_the_next_call_runs() {
    let sink = Arc::new(BuggySink::default());
    let host = Host::new(
        Config::default(),
        HostOptions {
            audit: Some(sink.clone()),
            ..HostOptions::default()
        },
    )
    .unwrap();
    let handle = host.command("true").call_id("c_panics").start();
    let panic = catch_unwind(AssertUnwindSafe(|| handle.wait())).unwrap_err();
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"audit sink bug"));
    // The attempt's write panicked: nothing was spawned, nothing more written.
    assert_eq!(sink.writes.load(Ordering::SeqCst), 1);
    assert_eq!(host.finished_records().len(), 0);

    // Ten calls in a row: the owner's panic was caught on its worker, and
    // the pool serves every later call.
    for i in 0..10 {
        let outcome = host.command("true").call_id(format!("c_{i}")).run();
        assert_eq!(outcome.record.state, State::Completed);
        assert_eq!(outcome.record.exit_status, Some(0));
    }
    assert_eq!(host.finished_records().len(), 10);
}
