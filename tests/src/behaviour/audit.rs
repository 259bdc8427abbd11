//! The audit sinks: the JSON-lines order, the chained log of three calls,
//! and a write that fails at the attempt, with a sink that always fails and
//! with the chained log.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use spillguard_core::audit::{
    Anchor, ExpectedCall, LogEntry, Record, Verdict, VerifyOptions, compare, verify_and_read,
};
use spillguard_core::{AuditEvent, AuditKind, State};
use spillguard_std::{
    AuditSink, ChainedFileAudit, ChainedFileOptions, HelperCommand, HostOptions, JsonLinesAudit,
};

use super::{temp_path, wait};
use crate::engine::{HostUnderTest, request};

/// The JSON-lines sink holds one line per event, in lifecycle order, the
/// last being the record the caller got.
pub fn the_json_lines_audit_holds_the_lifecycle_in_order<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let path = temp_path("audit.jsonl");
    let _ = std::fs::remove_file(&path);
    let host = host(HostOptions {
        audit: Some(Arc::new(JsonLinesAudit::open(&path).unwrap())),
        ..HostOptions::default()
    });
    let outcome = wait(
        host.launch(
            request(HelperCommand::new("true"))
                .call_id("c_audited")
                .into_request(),
        ),
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tags: Vec<String> = lines
        .iter()
        .map(|l| {
            let kind = l["kind"].as_object().unwrap();
            let (tag, body) = kind.iter().next().unwrap();
            match tag.as_str() {
                "transition" => body["to"].as_str().unwrap().to_owned(),
                other => other.to_owned(),
            }
        })
        .collect();
    assert_eq!(
        tags,
        [
            "validated",
            "attempt",
            "authorized",
            "dispatched",
            "completed",
            "final"
        ]
    );
    assert!(lines.iter().all(|l| l["call_id"] == "c_audited"));
    let last = &lines[5]["kind"]["final"];
    assert_eq!(last, &serde_json::to_value(&outcome.record).unwrap());
    assert_eq!(host.audit_failures(), 0);
}

/// Three calls write the chained log: it verifies against the sink's
/// anchor with exactly one record per event plus the opening one, shows
/// each call's lifecycle, and holds, as each call's final record, the
/// record its caller got.
pub fn the_chained_log_of_three_calls_verifies_and_holds_their_records<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let path = temp_path("chained.log");
    let _ = std::fs::remove_file(&path);
    let sink = Arc::new(ChainedFileAudit::open(&path, ChainedFileOptions::default()).unwrap());
    let host = host(HostOptions {
        audit: Some(sink.clone()),
        ..HostOptions::default()
    });
    let handles: Vec<_> = ["c_a", "c_b", "c_c"]
        .into_iter()
        .map(|id| {
            host.launch(
                request(HelperCommand::shell_script("echo x 1>&2"))
                    .call_id(id)
                    .into_request(),
            )
        })
        .collect();
    let outcomes: Vec<_> = handles.into_iter().map(wait).collect();
    assert!(outcomes.iter().all(|o| o.record.state == State::Completed));

    let anchor = sink.anchor();
    let (verdict, records) = read_log(&path, &anchor);
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
                    AuditKind::Final(record) => Some((**record).clone()),
                    _ => None,
                }
            }
            _ => None,
        });
        assert_eq!(logged.as_ref(), Some(&outcome.record));
    }
    let _ = std::fs::remove_file(&path);
}

/// A sink whose disk is always full.
#[derive(Debug)]
struct FullDisk;

impl AuditSink for FullDisk {
    fn write(&self, _event: &AuditEvent) -> std::io::Result<()> {
        Err(std::io::Error::other("no space left on device"))
    }
}

/// An attempt that cannot be audited fails the call closed: nothing is
/// spawned, and every failed write is counted.
pub fn an_attempt_that_cannot_be_audited_spawns_nothing<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let trace = temp_path("audit-fail-trace");
    let _ = std::fs::remove_file(&trace);
    let host = host(HostOptions {
        audit: Some(Arc::new(FullDisk)),
        ..HostOptions::default()
    });
    let script = format!("touch {}", trace.display());
    let outcome = wait(
        host.launch(
            request(HelperCommand::shell_script(script))
                .call_id("c_audit_full")
                .into_request(),
        ),
    );
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(
        record.failure.as_deref(),
        Some("audit log: no space left on device")
    );
    assert!(!trace.exists(), "the helper must not have run");
    // The transition into `validated`, the attempt, and the events after the
    // record: every write failed and was counted by the host, and by the
    // outcome (the log's own copy of the record cannot count itself).
    assert_eq!(host.audit_failures(), 5);
    assert_eq!((record.pid, record.audit_failures), (None, 5));
}

/// A disk that fills up after `left` events: the writes after that fail
/// with ENOSPC before they reach the log.
#[derive(Debug)]
struct DiskFullAfter {
    log: ChainedFileAudit,
    left: std::sync::atomic::AtomicU64,
}

impl AuditSink for DiskFullAfter {
    fn write(&self, event: &AuditEvent) -> std::io::Result<()> {
        use std::sync::atomic::Ordering;
        let took = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        match took {
            Ok(_) => self.log.write(event),
            Err(_) => Err(std::io::Error::from_raw_os_error(28)),
        }
    }
}

/// The chained log's disk fills up at the attempt: the call fails closed,
/// nothing is spawned, and what reached the log still verifies.
pub fn a_full_disk_at_the_attempt_fails_the_call_closed_and_the_log_stays_valid<
    H: HostUnderTest,
>(
    host: fn(HostOptions) -> H,
) {
    let path = temp_path("full.log");
    let trace = temp_path("full-trace");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&trace);
    let sink = Arc::new(DiskFullAfter {
        log: ChainedFileAudit::open(&path, ChainedFileOptions::default()).unwrap(),
        left: 1.into(),
    });
    let host = host(HostOptions {
        audit: Some(sink.clone()),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script(format!("touch '{}'", trace.display()));
    let outcome = wait(host.launch(request(command).call_id("c_full").into_request()));
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(
        record.failure.as_deref(),
        Some("audit log: No space left on device (os error 28)")
    );
    // The `opened` entry and the transition to `validated` reached the
    // log, which verifies; the attempt and the three events after it
    // failed and were counted, in the outcome too.
    assert_eq!((record.pid, record.audit_failures), (None, 4));
    assert!(!trace.exists(), "nothing was spawned");
    let anchor = sink.log.anchor();
    assert_eq!(anchor.records, 2);
    let (verdict, _) = read_log(&path, &anchor);
    assert_eq!(
        verdict,
        Verdict::Ok {
            records: 2,
            head: anchor.head
        }
    );
    assert_eq!(host.audit_failures(), 4);
    let _ = std::fs::remove_file(&path);
}

/// The chained log at `path`, verified against `anchor` without a key.
fn read_log(path: &Path, anchor: &Anchor) -> (Verdict, Vec<Record>) {
    let bytes = std::fs::read(path).unwrap();
    verify_and_read(
        &bytes,
        VerifyOptions {
            anchor: Some(anchor),
            key: None,
        },
    )
}
