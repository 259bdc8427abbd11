//! The tokio adapter with the hash-chained audit log: the sink runs on the
//! blocking pool (not on the one thread of a current-thread runtime), the log verifies against its anchor and matches the
//! record's lifecycle, and a full disk at the attempt fails the call closed.
#![allow(clippy::unwrap_used)]

#[path = "../../adapter-std/tests/support/mod.rs"]
mod support;

use std::sync::{Arc, Mutex};

use spillguard_std::{ChainedFileAudit, ChainedFileOptions};
use spillguard_tokio::core::audit::{
    ExpectedCall, LogEntry, Verdict, VerifyOptions, compare, verify_and_read,
};
use spillguard_tokio::core::{Config, State};
use spillguard_tokio::{HelperCommand, Host, HostOptions};
use support::{ThreadNoting, spec, temp_path};

fn fresh(name: &str) -> std::path::PathBuf {
    let path = temp_path(name);
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn the_chained_log_is_written_off_the_executor_and_verifies() {
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
            .map(|id| host.start(spec(id), HelperCommand::shell_script("echo x 1>&2"), false))
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

    let anchor = sink.log.anchor();
    let bytes = std::fs::read(&path).unwrap();
    let (verdict, records) = verify_and_read(
        &bytes,
        VerifyOptions {
            anchor: Some(&anchor),
            key: None,
        },
    );
    assert_eq!(
        verdict,
        Verdict::Ok {
            records: 1 + 3 * 6,
            head: anchor.head
        }
    );
    let expected: Vec<ExpectedCall> = outcomes
        .iter()
        .map(|o| ExpectedCall::from_record(&o.record))
        .collect();
    assert_eq!(compare(&records, &expected), []);
    // Each call's final record is the record its caller got.
    for outcome in &outcomes {
        let logged = records.iter().find_map(|r| match &r.entry {
            Some(LogEntry::Call(event)) if event.call_id == outcome.record.call_id => {
                match &event.kind {
                    spillguard_tokio::core::AuditKind::Final(record) => Some((**record).clone()),
                    _ => None,
                }
            }
            _ => None,
        });
        assert_eq!(logged.as_ref(), Some(&outcome.record));
    }
    let _ = std::fs::remove_file(&path);
}
