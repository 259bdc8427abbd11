//! The Sessions and Activity views, computed from the log alone —
//! never from helper transcripts. Plain data, serialisable for `--json`.
//!
//! Both are folds over the records, fed one at a time ([`Activity`],
//! [`Sessions`]), so a log of any length is read in one pass, keeping
//! only the calls still open (and, for the activity, the finished rows
//! waiting for an earlier call to finish); [`activity`] and [`sessions`]
//! fold a slice.
//!
//! **A row is one call from its first event to its final record.** An
//! event of the same call id after its final record starts another row.
//! Several writers may append to one log in turns, so a writer opening
//! the log ([`LogEntry::Opened`], [`LogEntry::Recovered`]) ends nothing:
//! the calls of the others go on. A call left open by a writer that died
//! (no final record ever comes) holds the activity's later rows back only
//! until [`Activity::HELD_MAX`] rows wait behind it: it is then shown as
//! it stands, unfinished, and an event of it after that starts a new row.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::LogEntry;
use super::verdict::Record;
use crate::call::{ApprovalDecision, AuditEvent, AuditKind, CallKind, State, StreamEnd};

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

/// The Activity view, fed one record at a time: one row per call, in
/// order of first appearance.
///
/// Call [`handle_record`](Self::handle_record) for each record in log
/// order and drain [`poll_row`](Self::poll_row) until `None` after each;
/// at the end of the log call [`handle_end`](Self::handle_end) and drain
/// it again. A row comes out once its call is over (its final record, or
/// a writer's opening after it) and every call that appeared before it
/// is over too, so the rows come out in order of first appearance. The
/// rows are those of [`activity`] on the same records, however the log
/// was cut into records' batches.
///
/// Memory: one row per call still open, plus the finished rows that wait
/// for an older call to finish ([`rows_held`](Self::rows_held)): at most
/// the calls that overlap in time, as a writer's concurrency bounds them.
/// Records without an entry (sealed, read without the key) are skipped.
///
/// # Examples
///
/// ```
/// use spillguard_core::audit::{Activity, LogEntry, LogId, LogWriter, Verifier, VerifyOptions};
/// use spillguard_core::{AuditEvent, AuditKind, State};
///
/// let mut writer = LogWriter::create(LogId([1; 16]), None);
/// let mut log = Vec::new();
/// for (call_id, to) in [("c_1", State::Validated), ("c_2", State::Validated), ("c_1", State::Dispatched)] {
///     let event = AuditEvent {
///         call_id: call_id.into(),
///         session_id: "s".into(),
///         offset_us: 0,
///         kind: AuditKind::Transition { from: State::Received, to },
///     };
///     log.extend(writer.append(&LogEntry::Call(event), None)?);
/// }
///
/// let mut verifier = Verifier::new(VerifyOptions::default());
/// let mut view = Activity::new();
/// let mut rows = Vec::new();
/// verifier.handle_bytes(&log);
/// while let Some(record) = verifier.poll_record() {
///     view.handle_record(&record);
///     rows.extend(std::iter::from_fn(|| view.poll_row()));
/// }
/// assert!(rows.is_empty(), "no call has finished");
/// view.handle_end();
/// rows.extend(std::iter::from_fn(|| view.poll_row()));
/// let states: Vec<_> = rows.iter().map(|r| (r.call_id.as_str(), r.state, r.finished)).collect();
/// assert_eq!(states, [("c_1", State::Dispatched, false), ("c_2", State::Validated, false)]);
/// # Ok::<(), spillguard_core::audit::AppendError>(())
/// ```
#[derive(Debug, Default)]
pub struct Activity {
    /// Rows in order of first appearance, each with whether its call is
    /// over; row number `front` first.
    rows: VecDeque<(bool, ActivityRow)>,
    front: u64,
    /// The calls still open: call id → row number.
    open: HashMap<String, u64>,
    ended: bool,
}

impl Activity {
    /// The most rows held waiting behind a call still open: past it, the
    /// oldest open call's row is shown as it stands (16,384 rows, a few
    /// MiB).
    pub const HELD_MAX: usize = 16_384;

    /// An empty view, before the first record.
    pub fn new() -> Activity {
        Activity::default()
    }

    /// Takes the next record of the log, in log order. After
    /// [`handle_end`](Self::handle_end) records are ignored.
    pub fn handle_record(&mut self, record: &Record) {
        if self.ended {
            return;
        }
        match &record.entry {
            Some(LogEntry::Call(event)) => {
                let number = match self.open.get(event.call_id.as_str()) {
                    Some(number) => *number,
                    None => {
                        let number = self.front + self.rows.len() as u64;
                        self.rows.push_back((false, new_row(event, record.index)));
                        self.open.insert(event.call_id.clone(), number);
                        number
                    }
                };
                let Some((over, row)) = usize::try_from(number - self.front)
                    .ok()
                    .and_then(|at| self.rows.get_mut(at))
                else {
                    return;
                };
                apply(row, record.index, event);
                if row.finished {
                    *over = true;
                    self.open.remove(event.call_id.as_str());
                }
                if self.rows.len() > Self::HELD_MAX {
                    self.release_front();
                }
            }
            Some(LogEntry::Opened { .. } | LogEntry::Recovered { .. }) | None => {}
        }
    }

    /// Shows the oldest row as it stands: its call is no longer open here.
    fn release_front(&mut self) {
        if let Some((over, row)) = self.rows.front_mut()
            && !*over
        {
            *over = true;
            self.open.remove(row.call_id.as_str());
        }
    }

    /// The end of the log: every call still open is over, without a final
    /// record. Drain [`poll_row`](Self::poll_row) for their rows.
    pub fn handle_end(&mut self) {
        self.close_open();
        self.ended = true;
    }

    /// The next row whose call and every earlier call are over, until
    /// `None`.
    #[must_use = "finished rows are held until drained"]
    pub fn poll_row(&mut self) -> Option<ActivityRow> {
        if !self.rows.front().is_some_and(|(over, _)| *over) {
            return None;
        }
        self.front += 1;
        self.rows.pop_front().map(|(_, row)| row)
    }

    /// Rows held: the calls still open and the finished rows waiting for
    /// an earlier call (what the view's memory grows with).
    pub fn rows_held(&self) -> usize {
        self.rows.len()
    }

    fn close_open(&mut self) {
        for (_, number) in self.open.drain() {
            let at = usize::try_from(number - self.front).ok();
            if let Some((over, _)) = at.and_then(|at| self.rows.get_mut(at)) {
                *over = true;
            }
        }
    }
}

/// A call's row at its first event.
fn new_row(event: &AuditEvent, index: u64) -> ActivityRow {
    ActivityRow {
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
        first_record: index,
        last_record: index,
    }
}

/// One event of an open call, at record `index`, applied to its row.
fn apply(row: &mut ActivityRow, index: u64, event: &AuditEvent) {
    row.last_record = index;
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
        AuditKind::Transition { to, .. } => row.state = *to,
        AuditKind::CardShown { text } => row.card = Some(text.clone()),
        // The final record says which limit was hit.
        AuditKind::LimitHit { .. } => {}
        // The run's own events say what it did; a restart comes first.
        AuditKind::Restart { .. } => {}
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

/// The Activity view of a slice of records: one row per call, in order
/// of first appearance (an [`Activity`] fed every record).
/// Records without an entry (sealed, read without the key) are skipped.
pub fn activity(records: &[Record]) -> Vec<ActivityRow> {
    let mut view = Activity::new();
    let mut rows = Vec::new();
    for record in records {
        view.handle_record(record);
        rows.extend(std::iter::from_fn(|| view.poll_row()));
    }
    view.handle_end();
    rows.extend(std::iter::from_fn(|| view.poll_row()));
    rows
}

/// The Sessions view, fed one record at a time: one row per session, in
/// order of first appearance, counting the calls as [`Activity`] rows
/// them.
///
/// Call [`handle_record`](Self::handle_record) for each record in log
/// order, then [`handle_end`](Self::handle_end), then drain
/// [`poll_row`](Self::poll_row) until `None` (a session's figures are
/// known only at the end of the log). Memory: one aggregate per session
/// and one row per call still open; a call is counted into its session
/// as soon as it is over.
#[derive(Debug, Default)]
pub struct Sessions {
    rows: Vec<SessionRow>,
    /// Finished calls per terminal state, per session, in
    /// [`State::ALL`] order.
    per_state: Vec<[u64; State::ALL.len()]>,
    /// Session id → its row.
    position: HashMap<String, usize>,
    /// The calls still open: call id → (its session's row, its row).
    open: HashMap<String, (usize, ActivityRow)>,
    ended: bool,
    /// Rows handed out so far, after the end.
    taken: usize,
}

impl Sessions {
    /// An empty view, before the first record.
    pub fn new() -> Sessions {
        Sessions::default()
    }

    /// Takes the next record of the log, in log order. After
    /// [`handle_end`](Self::handle_end) records are ignored.
    pub fn handle_record(&mut self, record: &Record) {
        if self.ended {
            return;
        }
        match &record.entry {
            Some(LogEntry::Call(event)) => {
                if !self.open.contains_key(event.call_id.as_str()) {
                    let session = self.session(&event.session_id, record.index);
                    let row = new_row(event, record.index);
                    self.open.insert(event.call_id.clone(), (session, row));
                }
                let Some((_, row)) = self.open.get_mut(event.call_id.as_str()) else {
                    return;
                };
                apply(row, record.index, event);
                if row.finished
                    && let Some((session, row)) = self.open.remove(event.call_id.as_str())
                {
                    self.count(session, &row);
                }
            }
            Some(LogEntry::Opened { .. } | LogEntry::Recovered { .. }) | None => {}
        }
    }

    /// The end of the log: the calls still open are counted as
    /// unfinished, and the rows are ready.
    pub fn handle_end(&mut self) {
        if self.ended {
            return;
        }
        self.close_open();
        for (row, counts) in self.rows.iter_mut().zip(&self.per_state) {
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
        self.ended = true;
    }

    /// The next session's row, in order of first appearance, once
    /// [`handle_end`](Self::handle_end) was called; until `None`.
    #[must_use = "the rows are held until drained"]
    pub fn poll_row(&mut self) -> Option<SessionRow> {
        if !self.ended {
            return None;
        }
        let row = self.rows.get_mut(self.taken)?;
        self.taken += 1;
        // Leave a husk: the row is the caller's now.
        Some(std::mem::replace(row, empty_session()))
    }

    /// The row of `session_id`, made at its first call's first record.
    fn session(&mut self, session_id: &str, index: u64) -> usize {
        if let Some(at) = self.position.get(session_id) {
            return *at;
        }
        self.rows.push(SessionRow {
            session_id: session_id.to_owned(),
            first_record: index,
            last_record: index,
            ..empty_session()
        });
        self.per_state.push([0; State::ALL.len()]);
        let at = self.rows.len() - 1;
        self.position.insert(session_id.to_owned(), at);
        at
    }

    /// Counts a call that is over into its session.
    fn count(&mut self, session: usize, call: &ActivityRow) {
        let (Some(row), Some(counts)) =
            (self.rows.get_mut(session), self.per_state.get_mut(session))
        else {
            return;
        };
        row.calls += 1;
        row.first_record = row.first_record.min(call.first_record);
        row.last_record = row.last_record.max(call.last_record);
        if !call.finished {
            row.unfinished += 1;
        } else if let Some(slot) = State::ALL.iter().position(|s| *s == call.state) {
            counts[slot] += 1;
        }
        if let Some(at_time) = &call.received_at {
            if row.first_received_at.as_ref().is_none_or(|t| at_time < t) {
                row.first_received_at = Some(at_time.clone());
            }
            if row.last_received_at.as_ref().is_none_or(|t| at_time > t) {
                row.last_received_at = Some(at_time.clone());
            }
        }
    }

    fn close_open(&mut self) {
        let open = std::mem::take(&mut self.open);
        for (session, row) in open.into_values() {
            self.count(session, &row);
        }
    }
}

fn empty_session() -> SessionRow {
    SessionRow {
        session_id: String::new(),
        calls: 0,
        unfinished: 0,
        terminal: Vec::new(),
        first_received_at: None,
        last_received_at: None,
        first_record: 0,
        last_record: 0,
    }
}

/// The Sessions view of a slice of records: one row per session, in order
/// of first appearance (a [`Sessions`] fed every record).
pub fn sessions(records: &[Record]) -> Vec<SessionRow> {
    let mut view = Sessions::new();
    for record in records {
        view.handle_record(record);
    }
    view.handle_end();
    std::iter::from_fn(|| view.poll_row()).collect()
}
