//! Expected lifecycles (`spillguard audit verify --expect FILE`): the text
//! is read as the command reads it (one JSON array, or JSON lines), each
//! value through `ExpectedCall::from_json_value`, and compared with a log.
//!
//! When the values are call records with distinct ids, the log holds
//! those calls' events (the attempt, each transition of the timeline, the
//! final record), and `compare` must find no difference: it agrees with
//! `ExpectedCall::from_record`.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use spillguard_core::audit::{
    ExpectedCall, LogEntry, LogId, LogWriter, VerifyOptions, compare, verify_and_read,
};
use spillguard_core::{AuditEvent, AuditKind, CallKind, CallRecord, State};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let values: Vec<serde_json::Value> = if text.trim_start().starts_with('[') {
        match serde_json::from_str(text) {
            Ok(values) => values,
            Err(_) => return,
        }
    } else {
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    };
    let records: Vec<Option<CallRecord>> = values
        .iter()
        .map(|v| match v.get("transitions") {
            Some(_) => None,
            None => serde_json::from_value(v.clone()).ok(),
        })
        .collect();
    let expected: Vec<ExpectedCall> = values
        .into_iter()
        .filter_map(|v| ExpectedCall::from_json_value(v).ok())
        .collect();

    let all_records: Option<Vec<CallRecord>> = records.into_iter().collect();
    let log = match &all_records {
        Some(records) if records.len() == expected.len() => log_of(records),
        _ => None,
    };
    let complete = log.is_some();
    let (_, read) = verify_and_read(&log.unwrap_or_default(), VerifyOptions::default());
    let differences = compare(&read, &expected);
    for difference in &differences {
        let _ = serde_json::to_string(difference);
    }
    if let (true, Some(records)) = (complete, &all_records) {
        let ids: HashSet<&str> = records.iter().map(|r| r.call_id.as_str()).collect();
        if ids.len() == records.len() {
            assert_eq!(differences, vec![], "{records:?}");
        }
    }
});

/// A log of these calls, one after the other: the attempt first (before
/// anything could leave `validated`), each transition of the timeline, the
/// final record. `None` if an entry is too large for a frame.
fn log_of(records: &[CallRecord]) -> Option<Vec<u8>> {
    let mut writer = LogWriter::create(LogId([9; 16]), None);
    let mut log = Vec::new();
    for record in records {
        let event = |kind| AuditEvent {
            call_id: record.call_id.clone(),
            session_id: record.session_id.clone(),
            offset_us: 0,
            kind,
        };
        let attempt = || {
            event(AuditKind::Attempt {
                kind: record.kind,
                action: record.action.clone(),
                target: record.target.clone(),
            })
        };
        let validated = record.timeline.iter().any(|m| m.state == State::Validated);
        let mut events = Vec::new();
        if record.kind == CallKind::Action && validated {
            events.push(attempt());
        }
        for pair in record.timeline.windows(2) {
            let (from, to) = (pair[0].state, pair[1].state);
            events.push(event(AuditKind::Transition { from, to }));
        }
        events.push(event(AuditKind::Final(Box::new(record.clone()))));
        for e in events {
            log.extend(writer.append(&LogEntry::Call(e), None).ok()?);
        }
    }
    Some(log)
}
