//! Comparison of a log with the lifecycle a test expected.

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

/// The events of one call, with their record indices, in log order.
struct CallEvents<'a> {
    call_id: &'a str,
    events: Vec<(u64, &'a AuditEvent)>,
}

fn group_by_call(records: &[Record]) -> Vec<CallEvents<'_>> {
    let mut calls: Vec<CallEvents<'_>> = Vec::new();
    let mut position = std::collections::HashMap::new();
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
    calls
}

/// Compares the calls in `records` (from a verified log) with `expected`.
/// Differences come per expected call, in the order given, then the
/// unexpected calls in log order. An empty list means the log shows
/// exactly the expected lifecycles.
pub fn compare(records: &[Record], expected: &[ExpectedCall]) -> Vec<Difference> {
    let calls = group_by_call(records);
    let mut differences = Vec::new();
    for want in expected {
        match calls.iter().find(|c| c.call_id == want.call_id) {
            None => differences.push(Difference::MissingCall {
                call_id: want.call_id.clone(),
            }),
            Some(call) => compare_call(call, want, &mut differences),
        }
    }
    for call in &calls {
        if !expected.iter().any(|e| e.call_id == call.call_id) {
            differences.push(Difference::UnexpectedCall {
                call_id: call.call_id.to_owned(),
                first_record: call.events.first().map_or(0, |(index, _)| *index),
            });
        }
    }
    differences
}

fn compare_call(call: &CallEvents<'_>, want: &ExpectedCall, out: &mut Vec<Difference>) {
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
            // The card is not a step of the lifecycle compared.
            AuditKind::CardShown { .. } => {}
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
