//! The smol adapter with the hash-chained audit log: the sink runs on the
//! blocking pool, the log verifies against its anchor and matches the
//! record's lifecycle, and a full disk at the attempt fails the call closed.
#![allow(clippy::unwrap_used)]

#[path = "../../adapter-std/tests/support/mod.rs"]
mod support;

use std::sync::{Arc, Mutex};

use spillguard_smol::core::audit::{
    ExpectedCall, LogEntry, Verdict, VerifyOptions, compare, verify_and_read,
};
use spillguard_smol::core::{Config, State};
use spillguard_smol::{HelperCommand, Host, HostOptions};
use spillguard_std::{ChainedFileAudit, ChainedFileOptions};
use support::{ThreadNoting, spec, temp_path};

fn fresh(name: &str) -> std::path::PathBuf {
    let path = temp_path(name);
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn the_chained_log_is_written_off_the_executor_and_verifies() {
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
            .map(|id| host.start(spec(id), HelperCommand::shell_script("echo x 1>&2"), false))
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
                    spillguard_smol::core::AuditKind::Final(record) => Some((**record).clone()),
                    _ => None,
                }
            }
            _ => None,
        });
        assert_eq!(logged.as_ref(), Some(&outcome.record));
    }
    let _ = std::fs::remove_file(&path);
}
