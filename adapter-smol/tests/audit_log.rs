//! The smol adapter with the hash-chained audit log: every write runs on
//! smol's blocking pool, none on an executor thread. That the log verifies
//! and holds each call's record is checked on every runtime by
//! `spillguard-tests` (`the_chained_log_of_three_calls_verifies_and_holds_their_records`).
#![allow(clippy::unwrap_used)]

// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;

use std::sync::{Arc, Mutex};

use spillguard_smol::proto::{Config, State};
use spillguard_smol::{ChainedFileAudit, ChainedFileOptions};
use spillguard_smol::{HelperCommand, Host, HostOptions};
use support::{LocalTest, ThreadNoting, temp_path};
support::local_test_for!(spillguard_smol::CallBuilder<'_>);

fn fresh(name: &str) -> std::path::PathBuf {
    let path = temp_path(name);
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn the_chained_log_is_written_off_the_executor() {
    let path = fresh("smol-chained.log");
    let sink = Arc::new(ThreadNoting {
        log: ChainedFileAudit::open(&path, ChainedFileOptions::default()).unwrap(),
        threads: Mutex::new(Vec::new()),
    });
    let host = Host::new(
        Config::default(),
        HostOptions {
            audit: Some(sink.clone()),
            ..HostOptions::default()
        },
    )
    .unwrap();
    let calls = ["c_a", "c_b", "c_c"];
    let outcomes = smol::block_on(async {
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

    // Every write ran on smol's blocking pool, none on an executor thread.
    let threads = sink.threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 3 * 6);
    for (_, name) in &threads {
        assert!(
            name.as_deref().is_some_and(|n| n.starts_with("blocking")),
            "{name:?}"
        );
    }

    let _ = std::fs::remove_file(&path);
}
