//! Comparison of a log with the lifecycle a test expected.
//!
//! A fold fed one record at a time ([`Comparison`]); [`compare`] folds a
//! slice. Its memory is a few figures per expected call, whatever the
//! log's length.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::LogEntry;
use super::verdict::Record;
use crate::call::{AuditEvent, AuditKind, CallKind, CallRecord, State};

/// One transition of a call, `from` → `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// State left.
    pub from: State,
    /// State entered.
    pub to: State,
}

/// The lifecycle a test expects of one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedCall {
    /// The call.
    pub call_id: String,
    /// Whether an attempt must be on record, before the call leaves
    /// `validated` (actions: yes; discovery calls have none).
    pub attempt: bool,
    /// Every transition, in order.
    pub transitions: Vec<Transition>,
    /// The state of the final record.
    pub final_state: State,
}

impl ExpectedCall {
    /// The lifecycle a call record describes: its timeline as transitions,
    /// an attempt iff it is an action that was validated.
    pub fn from_record(record: &CallRecord) -> ExpectedCall {
        let transitions = record
            .timeline
            .windows(2)
            .map(|pair| Transition {
                from: pair[0].state,
                to: pair[1].state,
            })
            .collect();
        let validated = record.timeline.iter().any(|m| m.state == State::Validated);
        ExpectedCall {
            call_id: record.call_id.clone(),
            attempt: record.kind == CallKind::Action && validated,
            transitions,
            final_state: record.state,
        }
    }

    /// Reads one expectation written as JSON: an `ExpectedCall` when the
    /// object has a `transitions` field, else a call record (as
    /// `spillguard run` prints it, extra fields ignored) turned into its
    /// lifecycle with [`from_record`](Self::from_record).
    ///
    /// # Examples
    ///
    /// ```
    /// use spillguard_core::State;
    /// use spillguard_core::audit::ExpectedCall;
    ///
    /// let value = serde_json::json!({
    ///     "call_id": "c_1",
    ///     "attempt": false,
    ///     "transitions": [{ "from": "received", "to": "validated" }],
    ///     "final_state": "failed_before_dispatch",
    /// });
    /// let expected = ExpectedCall::from_json_value(value)?;
    /// assert_eq!(expected.final_state, State::FailedBeforeDispatch);
    /// assert_eq!(expected.transitions.len(), 1);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn from_json_value(value: serde_json::Value) -> Result<ExpectedCall, serde_json::Error> {
        if value.get("transitions").is_some() {
            serde_json::from_value(value)
        } else {
            serde_json::from_value::<CallRecord>(value).map(|record| Self::from_record(&record))
        }
    }
}

/// One way the log differs from the expected lifecycles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "difference", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Difference {
    /// An expected call has no event in the log.
    MissingCall {
        /// The call.
        call_id: String,
    },
    /// The log has events of a call that was not expected.
    UnexpectedCall {
        /// The call.
        call_id: String,
        /// Its first record.
        first_record: u64,
    },
    /// An attempt was expected and none is on record.
    MissingAttempt {
        /// The call.
        call_id: String,
    },
    /// An attempt is on record where none was expected, or a second one.
    UnexpectedAttempt {
        /// The call.
        call_id: String,
        /// The record of the attempt.
        record: u64,
    },
    /// The attempt was written only after the call left `validated` for
    /// approval, authorisation or dispatch.
    LateAttempt {
        /// The call.
        call_id: String,
        /// The record of the attempt.
        attempt_record: u64,
        /// The transition that came first.
        transition: Transition,
        /// Its record.
        transition_record: u64,
    },
    /// The transitions differ from the expected ones, first at `position`.
    Transitions {
        /// The call.
        call_id: String,
        /// Index of the first differing transition.
        position: usize,
        /// The transition expected there (`None`: fewer were expected).
        expected: Option<Transition>,
        /// The transition found there (`None`: fewer are on record).
        found: Option<Transition>,
    },
    /// No final record.
    MissingFinal {
        /// The call.
        call_id: String,
    },
    /// The final record's state is not the expected one.
    FinalState {
        /// The call.
        call_id: String,
        /// The state expected.
        expected: State,
        /// The state on record.
        found: State,
    },
    /// An event of the call was written after its final record.
    AfterFinal {
        /// The call.
        call_id: String,
        /// The record of that event.
        record: u64,
    },
}

/// The comparison of a log with expected lifecycles, fed one record at a
/// time: [`compare`] without holding the records.
///
/// Call [`handle_record`](Self::handle_record) for each record of a
/// verified log, in log order, then [`finish`](Self::finish) for the
/// differences. Memory: the expectations and a few figures per expected
/// call (its transitions are compared as they come), plus the id and
/// first record of each call that was not expected (each one a
/// difference reported): nothing grows with the expected calls' events.
///
/// # Examples
///
/// ```
/// use spillguard_core::audit::{Comparison, Difference, ExpectedCall, Record, compare};
///
/// let expected = [ExpectedCall {
///     call_id: "c_1".into(),
///     attempt: true,
///     transitions: Vec::new(),
///     final_state: spillguard_core::State::Completed,
/// }];
/// let records: Vec<Record> = Vec::new();
/// let mut comparison = Comparison::new(&expected);
/// for record in &records {
///     comparison.handle_record(record);
/// }
/// let differences = comparison.finish();
/// assert_eq!(differences, [Difference::MissingCall { call_id: "c_1".into() }]);
/// assert_eq!(differences, compare(&records, &expected));
/// ```
#[derive(Debug, Clone)]
pub struct Comparison {
    expected: Vec<ExpectedCall>,
    /// What was seen of each expected call, in the order given.
    seen: Vec<SeenCall>,
    /// Call id → the expectations that name it.
    named: HashMap<String, Vec<usize>>,
    /// The calls not expected, in order of first appearance, with their
    /// first record.
    unexpected: Vec<(String, u64)>,
    unexpected_ids: HashSet<String>,
}

/// What the log showed of one expected call, so far.
#[derive(Debug, Clone, Default)]
struct SeenCall {
    /// Any event of it.
    events: bool,
    /// The records of its first two attempts.
    attempts: [Option<u64>; 2],
    /// The first transition to approval, authorisation or dispatch before
    /// any attempt.
    early: Option<(u64, Transition)>,
    /// Transitions on record.
    transitions: usize,
    /// The first transition that differs from the expected one at its
    /// position: (position, the transition found).
    mismatch: Option<(usize, Transition)>,
    /// The first final record: its record and state.
    final_record: Option<(u64, State)>,
    /// The first event after it.
    after_final: Option<u64>,
}

/// The states a call reaches only after its attempt is on record.
const ONWARD: [State; 4] = [
    State::AwaitingApproval,
    State::Queued,
    State::Authorized,
    State::Dispatched,
];

impl Comparison {
    /// A comparison with `expected`, before the first record.
    pub fn new(expected: &[ExpectedCall]) -> Comparison {
        let mut named: HashMap<String, Vec<usize>> = HashMap::new();
        for (at, want) in expected.iter().enumerate() {
            named.entry(want.call_id.clone()).or_default().push(at);
        }
        Comparison {
            expected: expected.to_vec(),
            seen: vec![SeenCall::default(); expected.len()],
            named,
            unexpected: Vec::new(),
            unexpected_ids: HashSet::new(),
        }
    }

    /// Takes the next record of the log, in log order. Records that are
    /// not a call's event (or sealed and read without the key) are skipped.
    pub fn handle_record(&mut self, record: &Record) {
        let Some(LogEntry::Call(event)) = &record.entry else {
            return;
        };
        let Some(wants) = self.named.get(event.call_id.as_str()) else {
            if !self.unexpected_ids.contains(event.call_id.as_str()) {
                self.unexpected_ids.insert(event.call_id.clone());
                self.unexpected.push((event.call_id.clone(), record.index));
            }
            return;
        };
        for &at in wants {
            if let (Some(seen), Some(want)) = (self.seen.get_mut(at), self.expected.get(at)) {
                seen.handle(record.index, event, want);
            }
        }
    }

    /// The differences, as [`compare`] lists them.
    pub fn finish(self) -> Vec<Difference> {
        let mut differences = Vec::new();
        for (want, seen) in self.expected.iter().zip(&self.seen) {
            seen.differences(want, &mut differences);
        }
        for (call_id, first_record) in self.unexpected {
            differences.push(Difference::UnexpectedCall {
                call_id,
                first_record,
            });
        }
        differences
    }
}

impl SeenCall {
    fn handle(&mut self, index: u64, event: &AuditEvent, want: &ExpectedCall) {
        self.events = true;
        if self.final_record.is_some() {
            self.after_final.get_or_insert(index);
        }
        match &event.kind {
            AuditKind::Attempt { .. } => {
                if let Some(slot) = self.attempts.iter_mut().find(|slot| slot.is_none()) {
                    *slot = Some(index);
                }
            }
            AuditKind::Transition { from, to } => {
                let found = Transition {
                    from: *from,
                    to: *to,
                };
                if self.attempts[0].is_none() && self.early.is_none() && ONWARD.contains(to) {
                    self.early = Some((index, found));
                }
                let position = self.transitions;
                if self.mismatch.is_none() && want.transitions.get(position) != Some(&found) {
                    self.mismatch = Some((position, found));
                }
                self.transitions += 1;
            }
            AuditKind::Final(record) => {
                self.final_record.get_or_insert((index, record.state));
            }
            // None is a step of the lifecycle compared.
            AuditKind::CardShown { .. }
            | AuditKind::LimitHit { .. }
            | AuditKind::Restart { .. } => {}
        }
    }

    fn differences(&self, want: &ExpectedCall, out: &mut Vec<Difference>) {
        let call_id = || want.call_id.clone();
        if !self.events {
            out.push(Difference::MissingCall { call_id: call_id() });
            return;
        }
        match (want.attempt, self.attempts) {
            (true, [None, _]) => out.push(Difference::MissingAttempt { call_id: call_id() }),
            (true, [_, Some(extra)]) | (false, [Some(extra), _]) => {
                out.push(Difference::UnexpectedAttempt {
                    call_id: call_id(),
                    record: extra,
                });
            }
            _ => {}
        }
        if let (true, Some(attempt), Some((transition_record, transition))) =
            (want.attempt, self.attempts[0], self.early)
        {
            out.push(Difference::LateAttempt {
                call_id: call_id(),
                attempt_record: attempt,
                transition,
                transition_record,
            });
        }

        let mismatch = match self.mismatch {
            Some((position, found)) => Some((position, Some(found))),
            None if self.transitions < want.transitions.len() => Some((self.transitions, None)),
            None => None,
        };
        if let Some((position, found)) = mismatch {
            out.push(Difference::Transitions {
                call_id: call_id(),
                position,
                expected: want.transitions.get(position).copied(),
                found,
            });
        }

        match self.final_record {
            None => out.push(Difference::MissingFinal { call_id: call_id() }),
            Some((_, state)) => {
                if state != want.final_state {
                    out.push(Difference::FinalState {
                        call_id: call_id(),
                        expected: want.final_state,
                        found: state,
                    });
                }
                if let Some(record) = self.after_final {
                    out.push(Difference::AfterFinal {
                        call_id: call_id(),
                        record,
                    });
                }
            }
        }
    }
}

/// Compares the calls in `records` (from a verified log) with `expected`.
/// Differences come per expected call, in the order given, then the
/// unexpected calls in log order. An empty list means the log shows
/// exactly the expected lifecycles. (A [`Comparison`] fed every record.)
pub fn compare(records: &[Record], expected: &[ExpectedCall]) -> Vec<Difference> {
    let mut comparison = Comparison::new(expected);
    for record in records {
        comparison.handle_record(record);
    }
    comparison.finish()
}
