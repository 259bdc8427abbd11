//! The expected-lifecycle comparison and the Sessions and Activity views
//! on a small log of known content.
#![allow(clippy::unwrap_used)]

mod audit_support;

use audit_support::{Rng, call_events, test_key, write_log};
use spillguard_core::audit::{
    ActivityRow, Difference, ExpectedCall, LogEntry, Record, SessionRow, StateCount, Transition,
    VerifyOptions, activity, compare, sessions, verify_and_read,
};
use spillguard_core::{ApprovalDecision, AuditEvent, AuditKind, CallKind, State, StreamEnd};

/// Opened; call 1 (session 0) completed after approval; call 2 (session 0)
/// denied; a recovery; call 3 (session 1) cancelled after dispatch; call 4
/// (session 1) a discovery; call 5 (session 1) cut while awaiting approval.
fn known_entries() -> Vec<LogEntry> {
    let mut entries = vec![LogEntry::Opened {
        writer: "spillguard-test 0.1.0".into(),
    }];
    let calls = |events: Vec<AuditEvent>| events.into_iter().map(LogEntry::Call);
    entries.extend(calls(call_events(1, 0, 0)));
    entries.extend(calls(call_events(2, 0, 1)));
    entries.push(LogEntry::Recovered {
        dropped_bytes: 37,
        at_offset: 4_096,
    });
    entries.extend(calls(call_events(3, 1, 2)));
    entries.extend(calls(call_events(4, 1, 4)));
    entries.extend(calls(call_events(5, 1, 0).into_iter().take(3).collect()));
    entries
}

/// The known log, written sealed, verified and read back.
fn read_known() -> Vec<Record> {
    let key = test_key();
    let log = write_log(&known_entries(), Some(&key), &mut Rng::new(51));
    let options = VerifyOptions {
        anchor: Some(&log.anchor),
        key: Some(&key),
    };
    let (verdict, records) = verify_and_read(&log.bytes, options);
    assert!(verdict.is_ok(), "{verdict:?}");
    records
}

fn finals(records: &[Record]) -> Vec<ExpectedCall> {
    records
        .iter()
        .filter_map(|r| match &r.entry {
            Some(LogEntry::Call(AuditEvent {
                kind: AuditKind::Final(record),
                ..
            })) => Some(ExpectedCall::from_record(record)),
            _ => None,
        })
        .collect()
}

fn t(from: State, to: State) -> Transition {
    Transition { from, to }
}

#[test]
fn the_log_matches_the_lifecycles_its_records_describe() {
    let records = read_known();
    assert_eq!(records.len(), 29);
    let mut expected = finals(&records);
    assert_eq!(expected.len(), 4);
    assert_eq!(
        expected[0].transitions,
        [
            t(State::Received, State::Validated),
            t(State::Validated, State::AwaitingApproval),
            t(State::AwaitingApproval, State::Authorized),
            t(State::Authorized, State::Dispatched),
            t(State::Dispatched, State::Completed),
        ]
    );
    assert!(expected[0].attempt);
    assert!(!expected[3].attempt, "a discovery call has no attempt");
    expected.push(ExpectedCall {
        call_id: "c_00005".into(),
        attempt: true,
        transitions: vec![
            t(State::Received, State::Validated),
            t(State::Validated, State::AwaitingApproval),
        ],
        final_state: State::Completed,
    });
    assert_eq!(
        compare(&records, &expected),
        [Difference::MissingFinal {
            call_id: "c_00005".into()
        }]
    );
}

#[test]
fn every_difference_from_the_expected_lifecycle_is_named() {
    let records = read_known();
    let mut expected = finals(&records);
    expected[0].final_state = State::FailedLocal;
    expected[1]
        .transitions
        .push(t(State::Denied, State::Completed));
    expected[2].attempt = false;
    expected[3].attempt = true;
    expected.push(ExpectedCall {
        call_id: "c_00009".into(),
        attempt: true,
        transitions: Vec::new(),
        final_state: State::Completed,
    });
    assert_eq!(
        compare(&records, &expected),
        [
            Difference::FinalState {
                call_id: "c_00001".into(),
                expected: State::FailedLocal,
                found: State::Completed
            },
            Difference::Transitions {
                call_id: "c_00002".into(),
                position: 3,
                expected: Some(t(State::Denied, State::Completed)),
                found: None
            },
            Difference::UnexpectedAttempt {
                call_id: "c_00003".into(),
                record: 15
            },
            Difference::MissingAttempt {
                call_id: "c_00004".into()
            },
            Difference::MissingCall {
                call_id: "c_00009".into()
            },
            Difference::UnexpectedCall {
                call_id: "c_00005".into(),
                first_record: 26
            },
        ]
    );
}

#[test]
fn a_late_attempt_and_events_after_the_final_record_are_named() {
    // Call 1 with its attempt moved after the dispatch, and a stray
    // transition after its final record.
    let mut events = call_events(1, 0, 0);
    let attempt = events.remove(1);
    assert!(matches!(attempt.kind, AuditKind::Attempt { .. }));
    events.insert(4, attempt);
    let mut stray = events[0].clone();
    stray.kind = AuditKind::Transition {
        from: State::Completed,
        to: State::Dispatched,
    };
    let expected = ExpectedCall::from_record(match &events.last().unwrap().kind {
        AuditKind::Final(record) => record,
        other => panic!("{other:?}"),
    });
    events.push(stray);
    let entries: Vec<LogEntry> = events.into_iter().map(LogEntry::Call).collect();
    let log = write_log(&entries, None, &mut Rng::new(52));
    let (_, records) = verify_and_read(&log.bytes, VerifyOptions::default());
    assert_eq!(
        compare(&records, &[expected]),
        [
            Difference::LateAttempt {
                call_id: "c_00001".into(),
                attempt_record: 4,
                transition: t(State::Validated, State::AwaitingApproval),
                transition_record: 1
            },
            Difference::Transitions {
                call_id: "c_00001".into(),
                position: 5,
                expected: None,
                found: Some(t(State::Completed, State::Dispatched))
            },
            Difference::AfterFinal {
                call_id: "c_00001".into(),
                record: 7
            },
        ]
    );
}

#[test]
fn the_activity_view_has_one_exact_row_per_call() {
    let rows = activity(&read_known());
    let row = |call: u64, session: u64| ActivityRow {
        call_id: format!("c_{call:05}"),
        session_id: format!("s_{session:03}"),
        kind: Some(CallKind::Action),
        action: Some("ssh.exec".into()),
        target: Some(format!("deploy@web-{call}")),
        card: None,
        state: State::Completed,
        finished: true,
        approval: Some(ApprovalDecision::Granted),
        exit_status: None,
        exit_signal: None,
        stream_end: Some(StreamEnd::NotStarted),
        stderr_bytes_seen: Some(0),
        stderr_bytes_retained: Some(0),
        stderr_truncated: Some(false),
        received_at: None,
        last_offset_us: 0,
        first_record: 0,
        last_record: 0,
    };
    assert_eq!(
        rows,
        [
            ActivityRow {
                exit_status: Some(0),
                stream_end: Some(StreamEnd::Eof),
                stderr_bytes_seen: Some(10_000),
                stderr_bytes_retained: Some(10_000),
                received_at: Some("2026-11-30T00:53:23.000Z".into()),
                last_offset_us: 2_020_000,
                first_record: 1,
                last_record: 7,
                ..row(1, 0)
            },
            ActivityRow {
                state: State::Denied,
                approval: Some(ApprovalDecision::Denied),
                received_at: Some("2026-11-30T00:53:26.000Z".into()),
                last_offset_us: 900_000,
                first_record: 8,
                last_record: 12,
                ..row(2, 0)
            },
            ActivityRow {
                state: State::CancelledAfterDispatch,
                exit_signal: Some(15),
                stream_end: Some(StreamEnd::ReaderCompletedAfterCancel),
                stderr_bytes_seen: Some(30_000),
                stderr_bytes_retained: Some(16_384),
                stderr_truncated: Some(true),
                received_at: Some("2026-11-30T00:53:29.000Z".into()),
                last_offset_us: 2_020_000,
                first_record: 14,
                last_record: 20,
                ..row(3, 1)
            },
            ActivityRow {
                kind: Some(CallKind::Discovery),
                action: Some("dns.lookup".into()),
                approval: Some(ApprovalDecision::NotRequired),
                exit_status: Some(0),
                stream_end: Some(StreamEnd::Eof),
                stderr_bytes_seen: Some(40_000),
                stderr_bytes_retained: Some(4_096),
                stderr_truncated: Some(true),
                received_at: Some("2026-11-30T00:53:32.000Z".into()),
                last_offset_us: 2_020_000,
                first_record: 21,
                last_record: 25,
                ..row(4, 1)
            },
            ActivityRow {
                state: State::AwaitingApproval,
                finished: false,
                approval: None,
                stream_end: None,
                stderr_bytes_seen: None,
                stderr_bytes_retained: None,
                stderr_truncated: None,
                last_offset_us: 1_000,
                first_record: 26,
                last_record: 28,
                ..row(5, 1)
            },
        ]
    );
    assert_eq!(
        serde_json::to_string(&rows[2]).unwrap(),
        concat!(
            r#"{"call_id":"c_00003","session_id":"s_001","kind":"action","action":"ssh.exec","#,
            r#""target":"deploy@web-3","state":"cancelled_after_dispatch","finished":true,"#,
            r#""approval":"granted","exit_status":null,"exit_signal":15,"#,
            r#""stream_end":"reader_completed_after_cancel","stderr_bytes_seen":30000,"#,
            r#""stderr_bytes_retained":16384,"stderr_truncated":true,"#,
            r#""received_at":"2026-11-30T00:53:29.000Z","last_offset_us":2020000,"#,
            r#""first_record":14,"last_record":20}"#
        )
    );
}

#[test]
fn the_sessions_view_has_one_exact_row_per_session() {
    let rows = sessions(&read_known());
    let count = |state, calls| StateCount { state, calls };
    assert_eq!(
        rows,
        [
            SessionRow {
                session_id: "s_000".into(),
                calls: 2,
                unfinished: 0,
                terminal: vec![count(State::Completed, 1), count(State::Denied, 1)],
                first_received_at: Some("2026-11-30T00:53:23.000Z".into()),
                last_received_at: Some("2026-11-30T00:53:26.000Z".into()),
                first_record: 1,
                last_record: 12,
            },
            SessionRow {
                session_id: "s_001".into(),
                calls: 3,
                unfinished: 1,
                terminal: vec![
                    count(State::Completed, 1),
                    count(State::CancelledAfterDispatch, 1)
                ],
                first_received_at: Some("2026-11-30T00:53:29.000Z".into()),
                last_received_at: Some("2026-11-30T00:53:32.000Z".into()),
                first_record: 14,
                last_record: 28,
            },
        ]
    );
    // Without the key, sealed entries cannot be read: no rows.
    let log = write_log(&known_entries(), Some(&test_key()), &mut Rng::new(53));
    let (_, unread) = verify_and_read(&log.bytes, VerifyOptions::default());
    assert_eq!(unread.len(), 29);
    assert_eq!(sessions(&unread), []);
}
