//! The tokio adapter with the hash-chained audit log: every write runs on
//! the blocking pool, not on the one thread of a current-thread runtime.
//! That the log verifies and holds each call's record is checked on every
//! runtime by `spillguard-tests`
//! (`the_chained_log_of_three_calls_verifies_and_holds_their_records`).
#![allow(clippy::unwrap_used)]

// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;

use std::sync::{Arc, Mutex};

use spillguard_tokio::proto::{Config, State};
use spillguard_tokio::{ChainedFileAudit, ChainedFileOptions};
use spillguard_tokio::{HelperCommand, Host, HostOptions};
use support::{LocalTest, ThreadNoting, temp_path};
support::local_test_for!(spillguard_tokio::CallBuilder<'_>);

fn fresh(name: &str) -> std::path::PathBuf {
    let path = temp_path(name);
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn the_chained_log_is_written_off_the_executor() {
    let path = fresh("tokio-chained.log");
    let sink = Arc::new(ThreadNoting {
        log: ChainedFileAudit::open(&path, ChainedFileOptions::default()).unwrap(),
        threads: Mutex::new(Vec::new()),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let executor = std::thread::current().id();
    let calls = ["c_a", "c_b", "c_c"];
    let outcomes = runtime.block_on(async {
        let host = Host::new(
            Config::default(),
            HostOptions {
                audit: Some(sink.clone()),
                ..HostOptions::default()
            },
        )
        .unwrap();
        let handles: Vec<_> = calls
            .iter()
            .map(|id| {
                host.call(HelperCommand::shell_script("echo x 1>&2"))
                    .local_test(id)
                    .start()
            })
            .collect();
        let mut outcomes = Vec::new();
        for handle in handles {
            outcomes.push(handle.wait().await);
        }
        outcomes
    });
    assert!(outcomes.iter().all(|o| o.record.state == State::Completed));

    // Every write ran on the blocking pool, none on the runtime's thread.
    let threads = sink.threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 3 * 6);
    assert!(threads.iter().all(|(id, _)| *id != executor));

    let _ = std::fs::remove_file(&path);
}
