//! Reading a log as a stream: a bounded `Verifier` fed in any chunking
//! (driven through its `poll_seek`) and the folds `Activity`, `Sessions`
//! and `Comparison` fed record by record give exactly what the slice
//! functions give; the views agree with the whole-log algorithms they
//! replaced on logs as writers write them; the bounded verifier's
//! verdicts are the unbounded one's on tampered logs.
#![allow(clippy::unwrap_used)]

mod audit_support;

use std::collections::{HashMap, HashSet};
use std::num::NonZeroUsize;

use audit_support::{PATHS, Rng, call_events, call_events_with_card, write_log};
use proptest::collection::vec;
use proptest::prelude::*;
use spillguard_core::audit::{
    Activity, ActivityRow, Comparison, Difference, ExpectedCall, LogEntry, LogId, LogWriter,
    Record, SessionRow, Sessions, StateCount, TamperKind, Verdict, Verifier, VerifyOptions,
    activity, compare, sessions, verify, verify_and_read,
};
use spillguard_core::{AuditEvent, AuditKind, State};

/// Feeds `log` to `verifier` in chunks of the sizes in `cuts` (cycled),
/// following its seeks; returns the records drained and the verdict.
fn stream(log: &[u8], mut verifier: Verifier, cuts: &[usize]) -> (Vec<Record>, Verdict) {
    let mut records = Vec::new();
    let mut at = 0;
    let mut seeks = 0;
    for cut in cuts.iter().cycle() {
        if at >= log.len() {
            break;
        }
        let end = (at + cut.max(&1)).min(log.len());
        verifier.handle_bytes(&log[at..end]);
        records.extend(std::iter::from_fn(|| verifier.poll_record()));
        at = match verifier.poll_seek() {
            Some(offset) => {
                seeks += 1;
                assert!(seeks <= 1, "a verifier recalls at most once");
                usize::try_from(offset).unwrap()
            }
            None => end,
        };
    }
    (records, verifier.finish())
}

fn window(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

/// The rows of both views and the differences, folded record by record
/// as the records come out of the verifier, each view drained only when
/// `drain(i)` says so after record `i`.
fn fold(
    records: &[Record],
    expected: &[ExpectedCall],
    drain: impl Fn(usize) -> bool,
) -> (Vec<ActivityRow>, Vec<SessionRow>, Vec<Difference>) {
    let mut view = Activity::new();
    let mut per_session = Sessions::new();
    let mut comparison = Comparison::new(expected);
    let mut rows = Vec::new();
    for (i, record) in records.iter().enumerate() {
        view.handle_record(record);
        per_session.handle_record(record);
        comparison.handle_record(record);
        if drain(i) {
            rows.extend(std::iter::from_fn(|| view.poll_row()));
        }
    }
    view.handle_end();
    rows.extend(std::iter::from_fn(|| view.poll_row()));
    assert_eq!(view.rows_held(), 0);
    per_session.handle_end();
    let session_rows = std::iter::from_fn(|| per_session.poll_row()).collect();
    (rows, session_rows, comparison.finish())
}

/// How a generated log is put together.
#[derive(Debug, Clone)]
struct Shape {
    /// Writers one after the other: (calls as (path, session), whether it
    /// crashed, cutting its open calls).
    writers: Vec<(Vec<(u64, u64)>, bool)>,
    /// Which open call writes its next event, at each step.
    schedule: Vec<usize>,
    /// Whether the calls show their approval card.
    cards: bool,
}

fn shapes() -> impl Strategy<Value = Shape> {
    (
        vec((vec((0..PATHS, 0..3u64), 1..5), any::<bool>()), 1..4),
        vec(0..8usize, 0..80),
        any::<bool>(),
    )
        .prop_map(|(writers, schedule, cards)| Shape {
            writers,
            schedule,
            cards,
        })
}

/// The entries of `shape` as writers write them: each writer opens the
/// log (after a recovery if the one before crashed), interleaves its
/// calls' events, and a crashed writer leaves some calls without their
/// last events. Call ids are never reused.
fn entries(shape: &Shape) -> Vec<LogEntry> {
    let mut entries = Vec::new();
    let mut call = 0;
    let mut steps = shape.schedule.iter().cycle();
    let mut crashed = false;
    for (calls, crashes) in &shape.writers {
        if crashed {
            entries.push(LogEntry::Recovered {
                dropped_bytes: 12,
                at_offset: 99,
            });
        }
        entries.push(LogEntry::Opened {
            writer: "spillguard-test".into(),
        });
        let mut open: Vec<std::vec::IntoIter<AuditEvent>> = calls
            .iter()
            .map(|&(path, session)| {
                call += 1;
                let events = if shape.cards {
                    call_events_with_card(call, session, path)
                } else {
                    call_events(call, session, path)
                };
                events.into_iter()
            })
            .collect();
        // A crashed writer stops once it has written half its events.
        let total: usize = open.iter().map(ExactSizeIterator::len).sum();
        let mut budget = if *crashes { total / 2 } else { total };
        while budget > 0 && !open.is_empty() {
            let at = steps.next().copied().unwrap_or(0) % open.len();
            match open[at].next() {
                Some(event) => {
                    entries.push(LogEntry::Call(event));
                    budget -= 1;
                }
                None => {
                    open.remove(at);
                }
            }
        }
        crashed = *crashes;
    }
    entries
}

/// The expected lifecycles: one per final record on record, changed a
/// little by `twist`, plus a call that never ran.
fn expectations(entries: &[LogEntry], twist: u64) -> Vec<ExpectedCall> {
    let mut expected: Vec<ExpectedCall> = entries
        .iter()
        .filter_map(|entry| match entry {
            LogEntry::Call(AuditEvent {
                kind: AuditKind::Final(record),
                ..
            }) => Some(ExpectedCall::from_record(record)),
            _ => None,
        })
        .collect();
    let mut rng = Rng::new(twist);
    let mut twice = Vec::new();
    for want in &mut expected {
        match rng.below(6) {
            0 => want.attempt = !want.attempt,
            1 => {
                want.transitions.pop();
            }
            2 => want.final_state = State::Completed,
            // Named twice: both compare with the same events.
            3 => twice.push(want.clone()),
            4 => want.transitions.reverse(),
            _ => {}
        }
    }
    expected.extend(twice);
    if rng.below(2) == 0 {
        expected.truncate(expected.len() / 2);
    }
    expected.push(ExpectedCall {
        call_id: "c_ghost".into(),
        attempt: true,
        transitions: Vec::new(),
        final_state: State::Completed,
    });
    expected
}

/// The log's records, read whole.
fn records_of(log: &[u8]) -> Vec<Record> {
    let (verdict, records) = verify_and_read(log, VerifyOptions::default());
    assert!(!verdict.is_rejected(), "{verdict:?}");
    records
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The file in any chunking through a bounded verifier, and the
    /// records one by one through the folds, give the slice functions'
    /// rows and differences; on logs as writers write them, those are the
    /// rows and differences of the whole-log algorithms of before.
    #[test]
    fn streamed_views_are_the_slice_views(
        shape in shapes(),
        cuts in vec(1..300usize, 1..20),
        small in 1..6usize,
        drains in vec(any::<bool>(), 1..10),
        twist in any::<u64>(),
    ) {
        let entries = entries(&shape);
        let log = write_log(&entries, None, &mut Rng::new(7));
        let whole = records_of(&log.bytes);
        let expected = expectations(&entries, twist);

        let (streamed, verdict) = stream(&log.bytes, Verifier::new(VerifyOptions::default()).bounded(window(small)), &cuts);
        prop_assert_eq!(&verdict, &verify(&log.bytes, VerifyOptions::default()));
        prop_assert_eq!(&streamed, &whole);

        let (rows, session_rows, differences) =
            fold(&streamed, &expected, |i| drains[i % drains.len()]);
        prop_assert_eq!(&rows, &activity(&whole));
        prop_assert_eq!(&session_rows, &sessions(&whole));
        prop_assert_eq!(&differences, &compare(&whole, &expected));

        prop_assert_eq!(&rows, &model::activity(&whole));
        prop_assert_eq!(&session_rows, &model::sessions(&whole));
        prop_assert_eq!(&differences, &model::compare(&whole, &expected));
        prop_assert_eq!(session_rows, model::sessions_of(&rows));
    }

    /// On any sequence of events (ids reused, events after a final
    /// record, writers opening mid-call), the folds fed one record at a
    /// time are the slice functions, the sessions are counted from the
    /// activity's rows, and the comparison is the whole-log one of
    /// before.
    #[test]
    fn folds_agree_on_any_sequence_of_events(
        shape in shapes(),
        replays in vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 0..6),
        twist in any::<u64>(),
    ) {
        let mut entries = entries(&shape);
        // Copies of earlier entries written again later: events after a
        // call's final record, a writer's opening in the middle of calls.
        for (from, to) in &replays {
            let entry = from.get(&entries).clone();
            let at = to.index(entries.len() + 1);
            entries.insert(at, entry);
        }
        let log = write_log(&entries, None, &mut Rng::new(8));
        let whole = records_of(&log.bytes);
        let expected = expectations(&entries, twist);
        let (rows, session_rows, differences) = fold(&whole, &expected, |_| true);
        prop_assert_eq!(&rows, &activity(&whole));
        prop_assert_eq!(&session_rows, &sessions(&whole));
        prop_assert_eq!(&session_rows, &model::sessions_of(&rows));
        prop_assert_eq!(&differences, &compare(&whole, &expected));
        prop_assert_eq!(&differences, &model::compare(&whole, &expected));
        // Every row is one call from its first event to its final record.
        for row in &rows {
            prop_assert!(row.first_record <= row.last_record);
        }
    }

    /// A bounded verifier, in any chunking and with any window, gives the
    /// unbounded verifier's verdict and records on logs with a record
    /// copied, one from another writer of the same log inserted, records
    /// deleted or two swapped.
    #[test]
    fn a_bounded_verifier_gives_the_same_verdicts(
        frames in 8..40usize,
        mutation in 0..4u8,
        a in any::<prop::sample::Index>(),
        b in any::<prop::sample::Index>(),
        small in 1..8usize,
        cuts in vec(1..400usize, 1..10),
    ) {
        let entries: Vec<LogEntry> = (0..frames)
            .map(|n| LogEntry::Opened { writer: format!("writer {n}") })
            .collect();
        let log_id = LogId([3; 16]);
        let write = |entries: &[LogEntry]| {
            let mut writer = LogWriter::create(log_id, None);
            entries
                .iter()
                .map(|entry| writer.append(entry, None).unwrap())
                .collect::<Vec<Vec<u8>>>()
        };
        let mut log = write(&entries);
        let (i, j) = (a.index(frames), b.index(frames));
        let (i, j) = (i.min(j), i.max(j));
        match mutation {
            // Record i again, after record j.
            0 => {
                let copy = log[i].clone();
                log.insert(j + 1, copy);
            }
            // Record i of another log with the same id, after record j.
            1 => {
                let other: Vec<LogEntry> = (0..frames)
                    .map(|n| LogEntry::Opened { writer: format!("forger {n}") })
                    .collect();
                let forged = write(&other)[i].clone();
                log.insert(j + 1, forged);
            }
            2 => {
                log.drain(i..=j);
            }
            _ => log.swap(i, j),
        }
        let bytes = log.concat();
        let (records, verdict) = stream(&bytes, Verifier::new(VerifyOptions::default()).bounded(window(small)), &cuts);
        let (whole_verdict, whole) = verify_and_read(&bytes, VerifyOptions::default());
        prop_assert_eq!(verdict, whole_verdict);
        prop_assert_eq!(records, whole);
    }
}

/// A copy of a record far older than the window is told from an insertion
/// by reading the log again from its checkpoint: at most `window` records
/// before it.
#[test]
fn a_duplicate_older_than_the_window_is_named_by_one_recall() {
    let mut writer = LogWriter::create(LogId([9; 16]), None);
    let frames: Vec<Vec<u8>> = (0..1_000)
        .map(|n| {
            let entry = LogEntry::Opened {
                writer: format!("writer {n}"),
            };
            writer.append(&entry, None).unwrap()
        })
        .collect();
    let mut bytes = frames.concat();
    let tampered_at = bytes.len() as u64;
    bytes.extend(&frames[123]);
    let bounded = || Verifier::new(VerifyOptions::default()).bounded(window(100));

    let mut verifier = bounded();
    verifier.handle_bytes(&bytes);
    while verifier.poll_record().is_some() {}
    // Record 123 is in the checkpoint of record 100, at its offset.
    let checkpoint: usize = frames[..100].iter().map(Vec::len).sum();
    assert_eq!(verifier.poll_seek(), Some(checkpoint as u64));
    assert_eq!(verifier.poll_seek(), None);
    verifier.handle_bytes(&bytes[checkpoint..]);
    assert_eq!(
        verifier.finish(),
        Verdict::Tampered {
            record_index: 1_000,
            offset: tampered_at,
            kind: TamperKind::Duplicated { of: 123 },
        }
    );
    // A driver that never reads again: the record is called inserted.
    let mut verifier = bounded();
    verifier.handle_bytes(&bytes);
    while verifier.poll_record().is_some() {}
    let _ = verifier.poll_seek();
    assert_eq!(
        verifier.finish(),
        Verdict::Tampered {
            record_index: 1_000,
            offset: tampered_at,
            kind: TamperKind::Inserted,
        }
    );
    // Unbounded, it is named without reading again.
    assert_eq!(
        verify(&bytes, VerifyOptions::default()),
        Verdict::Tampered {
            record_index: 1_000,
            offset: tampered_at,
            kind: TamperKind::Duplicated { of: 123 },
        }
    );
}

/// The activity holds a finished row only while a call that appeared
/// before it is open; a writer's opening ends no call (writers take turns
/// on one log), the end of the log does.
#[test]
fn the_activity_holds_only_rows_behind_an_open_call() {
    let first = call_events(1, 0, 0);
    let second = call_events(2, 0, 3);
    let third = call_events(3, 0, 0);
    // The first call's attempt, then all of the second, then the rest of
    // the first, then a crash (the third cut short) and a new writer.
    let mut entries: Vec<LogEntry> = Vec::new();
    entries.extend(first[..2].iter().cloned().map(LogEntry::Call));
    entries.extend(second.iter().cloned().map(LogEntry::Call));
    entries.extend(first[2..].iter().cloned().map(LogEntry::Call));
    entries.extend(third[..3].iter().cloned().map(LogEntry::Call));
    entries.push(LogEntry::Recovered {
        dropped_bytes: 5,
        at_offset: 1,
    });
    entries.push(LogEntry::Opened { writer: "w".into() });
    let log = write_log(&entries, None, &mut Rng::new(3));
    let records = records_of(&log.bytes);
    let mut view = Activity::new();
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut held = Vec::new();
    for (i, record) in records.iter().enumerate() {
        view.handle_record(record);
        while let Some(row) = view.poll_row() {
            out.push((i, row.call_id));
        }
        held.push(view.rows_held());
    }
    let (a, b) = (first.len(), second.len());
    // Both rows come out at the first call's final record, in order.
    let first_final = b + a - 1;
    let third_cut = b + a + 2;
    assert_eq!(
        out,
        [
            (first_final, "c_00001".to_owned()),
            (first_final, "c_00002".to_owned()),
        ]
    );
    // Held: 1 row, then 2 while the second call runs and after it ended
    // (behind the first), 0 after the first's final record, 1 while the
    // third is open, through the recovery and the next writer's opening.
    let mut want = vec![1, 1];
    want.extend(vec![2; b]);
    want.extend(vec![2; a - 3]);
    want.extend([0, 1, 1, 1, 1, 1]);
    assert_eq!(held, want);
    let _ = third_cut;
    view.handle_end();
    assert_eq!(
        view.poll_row().map(|r| r.call_id),
        Some("c_00003".to_owned())
    );
    assert_eq!(view.poll_row(), None);
    let rows = activity(&records);
    assert_eq!(
        rows.iter()
            .map(|r| (r.call_id.as_str(), r.state, r.finished))
            .collect::<Vec<_>>(),
        [
            ("c_00001", State::Completed, true),
            ("c_00002", State::FailedLocal, true),
            ("c_00003", State::AwaitingApproval, false),
        ]
    );
}

/// A call a dead writer left open holds back at most `HELD_MAX` rows: then
/// it is shown as it stands, and the rows behind it come out.
#[test]
fn a_call_left_open_holds_back_at_most_held_max_rows() {
    let mut entries: Vec<LogEntry> = Vec::new();
    let orphan = call_events(1, 0, 0);
    entries.extend(orphan[..2].iter().cloned().map(LogEntry::Call));
    let later = Activity::HELD_MAX + 10;
    for n in 0..later {
        entries.extend(
            call_events(2 + n as u64, 0, 0)
                .into_iter()
                .map(LogEntry::Call),
        );
    }
    let log = write_log(&entries, None, &mut Rng::new(4));
    let mut view = Activity::new();
    let mut out = Vec::new();
    let mut most = 0;
    for record in records_of(&log.bytes) {
        view.handle_record(&record);
        most = most.max(view.rows_held());
        while let Some(row) = view.poll_row() {
            out.push(row);
        }
    }
    view.handle_end();
    while let Some(row) = view.poll_row() {
        out.push(row);
    }
    assert_eq!(most, Activity::HELD_MAX + 1);
    assert_eq!(out.len(), later + 1);
    assert_eq!(
        (out[0].call_id.as_str(), out[0].finished),
        ("c_00001", false)
    );
    assert!(out[1..].iter().all(|row| row.finished));
}

/// The whole-log algorithms the folds replaced, kept as the model.
mod model {
    use super::*;

    pub fn activity(records: &[Record]) -> Vec<ActivityRow> {
        let mut rows: Vec<ActivityRow> = Vec::new();
        let mut position: HashMap<&str, usize> = HashMap::new();
        for record in records {
            let Some(LogEntry::Call(event)) = &record.entry else {
                continue;
            };
            let at = *position.entry(event.call_id.as_str()).or_insert_with(|| {
                rows.push(ActivityRow {
                    call_id: event.call_id.clone(),
                    session_id: event.session_id.clone(),
                    kind: None,
                    action: None,
                    target: None,
                    card: None,
                    state: State::Received,
                    finished: false,
                    approval: None,
                    exit_status: None,
                    exit_signal: None,
                    stream_end: None,
                    stderr_bytes_seen: None,
                    stderr_bytes_retained: None,
                    stderr_truncated: None,
                    received_at: None,
                    last_offset_us: 0,
                    first_record: record.index,
                    last_record: record.index,
                });
                rows.len() - 1
            });
            let row = &mut rows[at];
            row.last_record = record.index;
            row.last_offset_us = row.last_offset_us.max(event.offset_us);
            match &event.kind {
                AuditKind::Attempt {
                    kind,
                    action,
                    target,
                } => {
                    row.kind.get_or_insert(*kind);
                    row.action.get_or_insert_with(|| action.clone());
                    row.target.get_or_insert_with(|| target.clone());
                }
                AuditKind::Transition { to, .. } if !row.finished => row.state = *to,
                AuditKind::CardShown { text } => row.card = Some(text.clone()),
                AuditKind::Final(final_record) => {
                    let r = final_record.as_ref();
                    row.kind.get_or_insert(r.kind);
                    row.action.get_or_insert_with(|| r.action.clone());
                    row.target.get_or_insert_with(|| r.target.clone());
                    row.state = r.state;
                    row.finished = true;
                    row.approval = Some(r.approval);
                    row.exit_status = r.exit_status;
                    row.exit_signal = r.exit_signal;
                    row.stream_end = Some(r.stream_end);
                    row.stderr_bytes_seen = Some(r.stderr_bytes_seen);
                    row.stderr_bytes_retained = Some(r.stderr_bytes_retained);
                    row.stderr_truncated = Some(r.stderr_truncated);
                    row.received_at = Some(r.received_at.clone());
                }
                _ => {}
            }
        }
        rows
    }

    pub fn sessions(records: &[Record]) -> Vec<SessionRow> {
        sessions_of(&activity(records))
    }

    /// The sessions counted from activity rows.
    pub fn sessions_of(calls: &[ActivityRow]) -> Vec<SessionRow> {
        let mut rows: Vec<SessionRow> = Vec::new();
        let mut per_state: Vec<[u64; State::ALL.len()]> = Vec::new();
        let mut position: HashMap<String, usize> = HashMap::new();
        for call in calls {
            let at = *position.entry(call.session_id.clone()).or_insert_with(|| {
                rows.push(SessionRow {
                    session_id: call.session_id.clone(),
                    calls: 0,
                    unfinished: 0,
                    terminal: Vec::new(),
                    first_received_at: None,
                    last_received_at: None,
                    first_record: call.first_record,
                    last_record: call.last_record,
                });
                per_state.push([0; State::ALL.len()]);
                rows.len() - 1
            });
            let row = &mut rows[at];
            row.calls += 1;
            row.first_record = row.first_record.min(call.first_record);
            row.last_record = row.last_record.max(call.last_record);
            if !call.finished {
                row.unfinished += 1;
            } else if let Some(slot) = State::ALL.iter().position(|s| *s == call.state) {
                per_state[at][slot] += 1;
            }
            if let Some(at_time) = call.received_at.clone() {
                if row.first_received_at.as_ref().is_none_or(|t| at_time < *t) {
                    row.first_received_at = Some(at_time.clone());
                }
                if row.last_received_at.as_ref().is_none_or(|t| at_time > *t) {
                    row.last_received_at = Some(at_time);
                }
            }
        }
        for (row, counts) in rows.iter_mut().zip(&per_state) {
            row.terminal = State::ALL
                .iter()
                .zip(counts)
                .filter(|(_, calls)| **calls > 0)
                .map(|(state, calls)| StateCount {
                    state: *state,
                    calls: *calls,
                })
                .collect();
        }
        rows
    }

    struct CallEvents<'a> {
        call_id: &'a str,
        events: Vec<(u64, &'a AuditEvent)>,
    }

    pub fn compare(records: &[Record], expected: &[ExpectedCall]) -> Vec<Difference> {
        let mut calls: Vec<CallEvents<'_>> = Vec::new();
        let mut position = HashMap::new();
        for record in records {
            let Some(LogEntry::Call(event)) = &record.entry else {
                continue;
            };
            let at = *position.entry(event.call_id.as_str()).or_insert_with(|| {
                calls.push(CallEvents {
                    call_id: &event.call_id,
                    events: Vec::new(),
                });
                calls.len() - 1
            });
            calls[at].events.push((record.index, event));
        }
        let mut differences = Vec::new();
        for want in expected {
            match calls.iter().find(|c| c.call_id == want.call_id) {
                None => differences.push(Difference::MissingCall {
                    call_id: want.call_id.clone(),
                }),
                Some(call) => compare_call(call, want, &mut differences),
            }
        }
        let names: HashSet<&str> = expected.iter().map(|e| e.call_id.as_str()).collect();
        for call in &calls {
            if !names.contains(call.call_id) {
                differences.push(Difference::UnexpectedCall {
                    call_id: call.call_id.to_owned(),
                    first_record: call.events.first().map_or(0, |(index, _)| *index),
                });
            }
        }
        differences
    }

    fn compare_call(call: &CallEvents<'_>, want: &ExpectedCall, out: &mut Vec<Difference>) {
        use spillguard_core::audit::Transition;
        let call_id = || call.call_id.to_owned();
        let mut attempts = Vec::new();
        let mut transitions = Vec::new();
        let mut finals = Vec::new();
        for &(index, event) in &call.events {
            match &event.kind {
                AuditKind::Attempt { .. } => attempts.push(index),
                AuditKind::Transition { from, to } => transitions.push((
                    index,
                    Transition {
                        from: *from,
                        to: *to,
                    },
                )),
                AuditKind::Final(record) => finals.push((index, record.state)),
                _ => {}
            }
        }
        match (want.attempt, attempts.as_slice()) {
            (true, []) => out.push(Difference::MissingAttempt { call_id: call_id() }),
            (true, [_, extra, ..]) | (false, [extra, ..]) => {
                out.push(Difference::UnexpectedAttempt {
                    call_id: call_id(),
                    record: *extra,
                });
            }
            _ => {}
        }
        if let (true, Some(&attempt)) = (want.attempt, attempts.first()) {
            let onward = [
                State::AwaitingApproval,
                State::Authorized,
                State::Dispatched,
            ];
            let early = transitions
                .iter()
                .find(|(index, t)| *index < attempt && onward.contains(&t.to));
            if let Some(&(transition_record, transition)) = early {
                out.push(Difference::LateAttempt {
                    call_id: call_id(),
                    attempt_record: attempt,
                    transition,
                    transition_record,
                });
            }
        }
        let found: Vec<Transition> = transitions.iter().map(|(_, t)| *t).collect();
        if found != want.transitions {
            let position = found
                .iter()
                .zip(&want.transitions)
                .take_while(|(a, b)| a == b)
                .count();
            out.push(Difference::Transitions {
                call_id: call_id(),
                position,
                expected: want.transitions.get(position).copied(),
                found: found.get(position).copied(),
            });
        }
        match finals.first() {
            None => out.push(Difference::MissingFinal { call_id: call_id() }),
            Some(&(final_record, state)) => {
                if state != want.final_state {
                    out.push(Difference::FinalState {
                        call_id: call_id(),
                        expected: want.final_state,
                        found: state,
                    });
                }
                let after = call.events.iter().find(|(index, _)| *index > final_record);
                if let Some(&(record, _)) = after {
                    out.push(Difference::AfterFinal {
                        call_id: call_id(),
                        record,
                    });
                }
            }
        }
    }
}
