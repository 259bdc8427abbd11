//! The Sessions and Activity views, computed from the log alone —
//! never from helper transcripts. Plain data, serialisable for `--json`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::LogEntry;
use super::verdict::Record;
use crate::call::{ApprovalDecision, AuditKind, CallKind, State, StreamEnd};

/// One call, as the log tells it (the Activity view).
///
/// Fields that only the final record carries are `None` while the call
/// has none on record (it was still running when the log ends).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityRow {
    /// The call.
    pub call_id: String,
    /// Its session.
    pub session_id: String,
    /// Action or discovery, from the attempt or the final record.
    pub kind: Option<CallKind>,
    /// The action's name.
    pub action: Option<String>,
    /// The target as shown to the user.
    pub target: Option<String>,
    /// The approval card exactly as it was shown, when the call showed one
    /// (left out of the JSON otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<String>,
    /// The last state on record: the final record's, else the last
    /// transition's (`received` if neither is on record).
    pub state: State,
    /// Whether the final record is on record.
    pub finished: bool,
    /// What happened to the approval.
    pub approval: Option<ApprovalDecision>,
    /// The exit code observed.
    pub exit_status: Option<i32>,
    /// The signal that ended the helper.
    pub exit_signal: Option<i32>,
    /// How the output streams ended.
    pub stream_end: Option<StreamEnd>,
    /// Stderr bytes read.
    pub stderr_bytes_seen: Option<u64>,
    /// Stderr bytes kept.
    pub stderr_bytes_retained: Option<u64>,
    /// Whether stderr bytes were dropped.
    pub stderr_truncated: Option<bool>,
    /// Wall-clock time the call was received (RFC 3339), from the final
    /// record.
    pub received_at: Option<String>,
    /// The latest event offset on record, in microseconds since the call
    /// was received.
    pub last_offset_us: u64,
    /// The call's first record in the log.
    pub first_record: u64,
    /// The call's last record in the log.
    pub last_record: u64,
}

/// How many calls of a session ended in one state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCount {
    /// The terminal state.
    pub state: State,
    /// Calls that ended in it.
    pub calls: u64,
}

/// One agent session, as the log tells it (the Sessions view).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRow {
    /// The session.
    pub session_id: String,
    /// Calls on record.
    pub calls: u64,
    /// Calls with no final record.
    pub unfinished: u64,
    /// Finished calls per terminal state, in [`State::ALL`] order; states
    /// no call ended in are left out.
    pub terminal: Vec<StateCount>,
    /// Earliest `received_at` among its final records.
    pub first_received_at: Option<String>,
    /// Latest `received_at` among its final records.
    pub last_received_at: Option<String>,
    /// The session's first record in the log.
    pub first_record: u64,
    /// The session's last record in the log.
    pub last_record: u64,
}

/// The Activity view: one row per call, in order of first appearance.
/// Records without an entry (sealed, read without the key) are skipped.
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
            AuditKind::Transition { to, .. } => {
                if !row.finished {
                    row.state = *to;
                }
            }
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
        }
    }
    rows
}

/// The Sessions view: one row per session, in order of first appearance.
pub fn sessions(records: &[Record]) -> Vec<SessionRow> {
    let mut rows: Vec<SessionRow> = Vec::new();
    let mut per_state: Vec<[u64; State::ALL.len()]> = Vec::new();
    let mut position: HashMap<String, usize> = HashMap::new();
    for call in activity(records) {
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
        if let Some(at_time) = call.received_at {
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
