//! What a scenario must produce, and [`check`]: the comparison of a run's
//! [`Measured`] facts with it.
//!
//! Counts and states are compared exactly. Byte counts that depend on
//! timing (a flood cut by a deadline, a grandchild's periodic lines) are
//! bounds, and say so ([`Bytes::Between`]); the cross-runtime comparison
//! leaves exactly those out. Durations are bounds that are generous on the
//! slow side: they prove an order (the KILL comes after the grace, the card
//! does not wait for the flood), not a speed.

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use spillguard_core::{
    ApprovalDecision, CallRecord, CancelReason, DisconnectPolicy, Retain, Signal, State, StreamEnd,
};

use crate::measure::{Measured, MeasuredCall};
use crate::scenario::{Approver, CallPlan, Scenario};

/// An expected byte count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Bytes {
    /// Exactly this many.
    Exact(u64),
    /// Between these, inclusive: the count depends on timing.
    Between(u64, u64),
    /// As many as the stream's bytes seen (everything was kept).
    AllSeen,
}

impl Bytes {
    fn holds(self, got: u64, seen: u64) -> bool {
        match self {
            Bytes::Exact(n) => got == n,
            Bytes::Between(lo, hi) => (lo..=hi).contains(&got),
            Bytes::AllSeen => got == seen,
        }
    }

    /// Whether the count may differ between two correct runs.
    pub fn depends_on_timing(self) -> bool {
        matches!(self, Bytes::Between(..))
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bytes::Exact(n) => write!(f, "{n}"),
            Bytes::Between(lo, hi) => write!(f, "{lo}..={hi}"),
            Bytes::AllSeen => write!(f, "all bytes seen"),
        }
    }
}

/// An inclusive range of durations, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Shortest accepted.
    pub min_us: u64,
    /// Longest accepted.
    pub max_us: u64,
}

impl Bounds {
    /// From `min` to `max` milliseconds.
    pub const fn ms(min: u64, max: u64) -> Self {
        Self {
            min_us: min * 1000,
            max_us: max * 1000,
        }
    }

    /// Exactly zero: both marks were taken in the same step.
    pub const ZERO: Bounds = Bounds {
        min_us: 0,
        max_us: 0,
    };

    /// From `nominal` to `nominal + slack`.
    pub fn at_least(nominal: Duration, slack: Duration) -> Self {
        Self {
            min_us: micros(nominal),
            max_us: micros(nominal + slack),
        }
    }

    /// A span the helper times itself (its own sleep), seen from the
    /// dispatch mark: the helper's clock starts when it is spawned, a little
    /// before the host marks the call dispatched, so the span may look up to
    /// `lag` shorter than `nominal`.
    pub fn timed_by_the_helper(nominal: Duration, lag: Duration, slack: Duration) -> Self {
        Self {
            min_us: micros(nominal.saturating_sub(lag)),
            max_us: micros(nominal + slack),
        }
    }

    fn holds(self, us: u64) -> bool {
        (self.min_us..=self.max_us).contains(&us)
    }
}

impl fmt::Display for Bounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.1}..={:.1} ms",
            self.min_us as f64 / 1000.0,
            self.max_us as f64 / 1000.0
        )
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// An instant in a call's record (an offset from `received`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mark {
    /// When the call entered this state.
    State(State),
    /// The first stop request (`cancel_offset_us`).
    Cancel,
    /// The helper's observed exit (`exited_offset_us`).
    Exit,
    /// The n-th signal sent to the group.
    Signal(usize),
}

impl Mark {
    fn offset_us(self, record: &CallRecord) -> Option<u64> {
        match self {
            Mark::State(state) => record
                .timeline
                .iter()
                .find(|m| m.state == state)
                .map(|m| m.offset_us),
            Mark::Cancel => record.cancel_offset_us,
            Mark::Exit => record.exited_offset_us,
            Mark::Signal(n) => record.signals.get(n).map(|s| s.offset_us),
        }
    }
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mark::State(state) => write!(f, "{state}"),
            Mark::Cancel => f.write_str("cancel"),
            Mark::Exit => f.write_str("exit"),
            Mark::Signal(n) => write!(f, "signal #{n}"),
        }
    }
}

/// The time between two marks of the record must lie within bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// The earlier mark.
    pub from: Mark,
    /// The later mark.
    pub to: Mark,
    /// Accepted durations from `from` to `to`.
    pub within: Bounds,
}

/// What the rendered stderr (marker included) must be.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StderrText {
    /// Not compared (the handle was dropped, so no text reached a caller).
    NotChecked,
    /// Empty: nothing was written.
    Empty,
    /// Exactly this text.
    Exact(String),
    /// The exact marker (when truncated), then the last retained bytes of
    /// `unit` repeated over `stream_len` bytes (`None`: the bytes seen),
    /// i.e. a stream made only of whole repetitions of `unit`.
    Repeated {
        /// The repeated text, e.g. `diagnostic-line\n`.
        unit: &'static str,
        /// Length of the repeated run ending the stream; `None` when the
        /// whole stream is the run.
        stream_len: Option<u64>,
    },
}

/// Whether the pool may have limited a call's retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetentionLimited {
    /// Never: the call kept its whole budget.
    No,
    /// Exactly when it kept fewer than this many bytes (its own budget).
    WhenRetainedBelow(u64),
}

/// What one call's record, text and measurements must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallExpect {
    /// The terminal state.
    pub state: State,
    /// Every state of the timeline, in order.
    pub states: Vec<State>,
    /// The approval decision.
    pub approval: ApprovalDecision,
    /// Why a stop was requested.
    pub cancel_reason: Option<CancelReason>,
    /// The observed exit code.
    pub exit_status: Option<i32>,
    /// The observed terminating signal.
    pub exit_signal: Option<i32>,
    /// How the streams ended.
    pub stream_end: StreamEnd,
    /// The signals sent to the group, in order.
    pub signals: Vec<Signal>,
    /// Whether the group was signalled for a descendant.
    pub descendants_signalled: bool,
    /// Whether the record says the client disconnected.
    pub client_disconnected: bool,
    /// The disconnect policy recorded.
    pub on_client_disconnect: Option<DisconnectPolicy>,
    /// `stderr_bytes_seen`.
    pub stderr_seen: Bytes,
    /// `stderr_bytes_retained`.
    pub stderr_retained: Bytes,
    /// `stderr_truncated`.
    pub stderr_truncated: bool,
    /// `stderr_retention_limited`.
    pub retention_limited: RetentionLimited,
    /// The rendered stderr.
    pub stderr_text: StderrText,
    /// Exactly the helper's stdout (its structured result).
    pub stdout: &'static str,
    /// Why the call failed before dispatch, if it did (`failure`).
    pub failure: Option<&'static str>,
    /// Wall time from `start` to the card being observed.
    pub time_to_card: Option<Bounds>,
    /// From the record's stop request to its observed exit.
    pub cancel_to_exit: Option<Bounds>,
    /// Further timings between marks of the record.
    pub intervals: Vec<Interval>,
    /// Descendants of the helper left for this process to reap as
    /// subreaper once they died (a grandchild the helper did not wait for).
    pub orphans_reaped: u32,
}

impl Default for CallExpect {
    /// A helper that ran without approval, wrote nothing and exited 0.
    fn default() -> Self {
        Self {
            state: State::Completed,
            states: vec![
                State::Received,
                State::Validated,
                State::Authorized,
                State::Dispatched,
                State::Completed,
            ],
            approval: ApprovalDecision::NotRequired,
            cancel_reason: None,
            exit_status: Some(0),
            exit_signal: None,
            stream_end: StreamEnd::Eof,
            signals: Vec::new(),
            descendants_signalled: false,
            client_disconnected: false,
            on_client_disconnect: None,
            stderr_seen: Bytes::Exact(0),
            stderr_retained: Bytes::Exact(0),
            stderr_truncated: false,
            retention_limited: RetentionLimited::No,
            stderr_text: StderrText::Empty,
            stdout: "",
            failure: None,
            time_to_card: None,
            cancel_to_exit: None,
            intervals: Vec::new(),
            orphans_reaped: 0,
        }
    }
}

impl CallExpect {
    /// Whether the retained stderr bytes (and so the fingerprint) may
    /// differ between two correct runs.
    pub fn retained_bytes_depend_on_timing(&self) -> bool {
        match self.stderr_retained {
            Bytes::AllSeen => self.stderr_seen.depends_on_timing(),
            other => other.depends_on_timing(),
        }
    }
}

/// The most the pool held at once, as expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolPeak {
    /// Exactly this many bytes.
    Exact(u64),
    /// At most this many (small streams reserve in steps).
    AtMost(u64),
}

/// Expectations about a scenario as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioExpect {
    /// `RetentionPool::peak` after the run.
    pub pool_peak: PoolPeak,
    /// The calls' `stderr_bytes_retained` added up, when it is exact.
    pub retained_sum: Option<u64>,
}

/// One expectation that did not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The call it is about; `None` for the scenario as a whole.
    pub call_id: Option<String>,
    /// What was compared.
    pub what: String,
    /// What was expected.
    pub expected: String,
    /// What was measured.
    pub got: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(call_id) = &self.call_id {
            write!(f, "{call_id}: ")?;
        }
        write!(
            f,
            "{}: expected {}, got {}",
            self.what, self.expected, self.got
        )
    }
}

/// Collects failures for one call (or the scenario).
struct Checker<'a> {
    call_id: Option<&'a str>,
    failures: &'a mut Vec<Failure>,
}

impl Checker<'_> {
    fn fail(&mut self, what: &str, expected: impl fmt::Display, got: impl fmt::Display) {
        self.failures.push(Failure {
            call_id: self.call_id.map(str::to_owned),
            what: what.to_owned(),
            expected: expected.to_string(),
            got: got.to_string(),
        });
    }

    fn eq<T: PartialEq + fmt::Debug>(&mut self, what: &str, expected: T, got: T) {
        if expected != got {
            self.fail(what, format!("{expected:?}"), format!("{got:?}"));
        }
    }

    fn within(&mut self, what: &str, bounds: Bounds, got_us: Option<u64>) {
        match got_us {
            Some(us) if bounds.holds(us) => {}
            Some(us) => self.fail(what, bounds, format!("{:.1} ms", us as f64 / 1000.0)),
            None => self.fail(what, bounds, "nothing measured"),
        }
    }
}

/// Compares a run with its scenario; an empty list means every expectation
/// held.
pub fn check(scenario: &Scenario, measured: &Measured) -> Vec<Failure> {
    let mut failures = Vec::new();
    for plan in &scenario.calls {
        for copy in 0..plan.copies {
            let call_id = plan.call_id(copy);
            let mut checker = Checker {
                call_id: Some(&call_id),
                failures: &mut failures,
            };
            match measured.calls.iter().find(|c| c.call_id == call_id) {
                Some(call) => check_call(&mut checker, plan, call),
                None => checker.fail("run", "the call to be measured", "no measurement"),
            }
        }
    }
    check_scenario(scenario, measured, &mut failures);
    failures
}

fn check_call(c: &mut Checker<'_>, plan: &CallPlan, call: &MeasuredCall) {
    let e = &plan.expect;
    for problem in &call.problems {
        c.fail("run", "no problem", problem);
    }
    c.eq("records kept by the host", 1, call.records_kept);
    let Some(r) = &call.record else {
        c.fail("record", "a record", "none");
        return;
    };
    c.eq("state", e.state, r.state);
    let states: Vec<State> = r.timeline.iter().map(|m| m.state).collect();
    c.eq("timeline", &e.states, &states);
    c.eq("approval", e.approval, r.approval);
    c.eq("cancel_reason", e.cancel_reason, r.cancel_reason);
    c.eq("exit_status", e.exit_status, r.exit_status);
    c.eq("exit_signal", e.exit_signal, r.exit_signal);
    c.eq("stream_end", e.stream_end, r.stream_end);
    c.eq("failure", e.failure, r.failure.as_deref());
    let signals: Vec<Signal> = r.signals.iter().map(|s| s.signal).collect();
    c.eq("signals", &e.signals, &signals);
    c.eq(
        "descendants_signalled",
        e.descendants_signalled,
        r.descendants_signalled,
    );
    c.eq(
        "client_disconnected",
        e.client_disconnected,
        r.client_disconnected,
    );
    c.eq(
        "on_client_disconnect",
        e.on_client_disconnect,
        r.on_client_disconnect,
    );
    let seen = r.stderr_bytes_seen;
    if !e.stderr_seen.holds(seen, seen) {
        c.fail("stderr_bytes_seen", e.stderr_seen, seen);
    }
    if !e.stderr_retained.holds(r.stderr_bytes_retained, seen) {
        c.fail(
            "stderr_bytes_retained",
            e.stderr_retained,
            r.stderr_bytes_retained,
        );
    }
    c.eq("stderr_truncated", e.stderr_truncated, r.stderr_truncated);
    let limited = match e.retention_limited {
        RetentionLimited::No => false,
        RetentionLimited::WhenRetainedBelow(budget) => r.stderr_bytes_retained < budget,
    };
    c.eq(
        "stderr_retention_limited",
        limited,
        r.stderr_retention_limited,
    );
    c.eq(
        "stdout_bytes_seen",
        e.stdout.len() as u64,
        r.stdout_bytes_seen,
    );
    if let Some(stdout) = &call.stdout_text {
        c.eq("stdout", e.stdout, stdout.as_str());
    }
    if let Some(text) = &call.stderr_text {
        check_text(c, e, r, text);
    } else if !call.handle_dropped {
        c.fail("stderr text", "the rendered text", "none");
    }
    if let Some(bounds) = e.time_to_card {
        c.within("time to card", bounds, call.time_to_card_us);
    }
    if let Some(bounds) = e.cancel_to_exit {
        c.within("cancel to exit", bounds, call.cancel_to_exit_us);
    }
    for interval in &e.intervals {
        let span = match (interval.from.offset_us(r), interval.to.offset_us(r)) {
            (Some(from), Some(to)) => to.checked_sub(from),
            _ => None,
        };
        c.within(
            &format!("{} to {}", interval.from, interval.to),
            interval.within,
            span,
        );
    }
    if matches!(
        plan.approver,
        Approver::Approve { .. } | Approver::Deny { .. }
    ) {
        c.eq(
            "the approver's answer was refused",
            None,
            call.approval_refused.as_deref(),
        );
    }
    match (r.pgid, &call.group) {
        (None, _) => {}
        (Some(_), None) => c.fail("helper's group", "checked", "not checked"),
        (Some(_), Some(group)) => {
            c.eq("group alive afterwards", false, group.alive);
            c.eq("orphans reaped", e.orphans_reaped, group.orphans_reaped);
            c.eq(
                "helper left unreaped by the adapter",
                false,
                group.helper_unreaped,
            );
            c.eq(
                "group members left (zombies included)",
                &Vec::<String>::new(),
                &group.members_left,
            );
        }
    }
}

fn check_text(c: &mut Checker<'_>, e: &CallExpect, r: &CallRecord, text: &str) {
    // The marker line is exact whatever the expected body.
    let first = text.split('\n').next().unwrap_or_default();
    // A window the shared pool held under its budget says so.
    let held_back = match e.retention_limited {
        RetentionLimited::WhenRetainedBelow(budget) => {
            r.stderr_retention_limited && r.stderr_bytes_retained < budget
        }
        RetentionLimited::No => false,
    };
    let marker = tail_marker(r.stderr_bytes_retained, r.stderr_bytes_seen, held_back);
    if r.stderr_truncated && r.stderr_retain == Retain::Tail {
        c.eq("marker", marker.as_str(), first);
    } else if !r.stderr_truncated && first.starts_with("[stderr truncated") {
        c.fail("marker", "no marker (nothing dropped)", first);
    }
    let expected = match &e.stderr_text {
        StderrText::NotChecked => return,
        StderrText::Empty => String::new(),
        StderrText::Exact(text) => text.clone(),
        StderrText::Repeated { unit, stream_len } => {
            let len = stream_len.unwrap_or(r.stderr_bytes_seen);
            let body = repeated_tail(unit.as_bytes(), len, r.stderr_bytes_retained);
            let body = String::from_utf8_lossy(&body).into_owned();
            if r.stderr_truncated {
                format!("{marker}\n{body}")
            } else {
                body
            }
        }
    };
    if expected != text {
        let at = expected
            .bytes()
            .zip(text.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        c.fail(
            &format!("rendered stderr (first difference at byte {at})"),
            summarise(&expected),
            summarise(text),
        );
    }
}

/// The tail marker for `retained` of `seen` stderr bytes, for a window the
/// shared pool held under its budget or not.
pub fn tail_marker(retained: u64, seen: u64, held_back: bool) -> String {
    let why = match held_back {
        true => "; the pool shared by all calls held it back",
        false => "",
    };
    format!("[stderr truncated: kept last {retained} of {seen} bytes{why}]")
}

/// The last `keep` bytes of `unit` repeated over `len` bytes.
pub fn repeated_tail(unit: &[u8], len: u64, keep: u64) -> Vec<u8> {
    let unit_len = unit.len() as u64;
    if unit_len == 0 {
        return Vec::new();
    }
    (len.saturating_sub(keep)..len)
        .map(|i| unit[usize::try_from(i % unit_len).unwrap_or(0)])
        .collect()
}

/// A long text as its length, its first line and its last 40 characters.
fn summarise(text: &str) -> String {
    let first: String = text
        .split('\n')
        .next()
        .unwrap_or_default()
        .chars()
        .take(80)
        .collect();
    let chars: Vec<char> = text.chars().collect();
    let last: String = chars[chars.len().saturating_sub(40)..].iter().collect();
    format!(
        "{} bytes, first line {first:?}, ending {last:?}",
        text.len()
    )
}

fn check_scenario(scenario: &Scenario, measured: &Measured, failures: &mut Vec<Failure>) {
    let mut c = Checker {
        call_id: None,
        failures,
    };
    let pool = &measured.pool;
    if pool.sampled_max > pool.capacity {
        c.fail(
            "pool in use, sampled",
            format!("at most {}", pool.capacity),
            pool.sampled_max,
        );
    }
    if pool.samples == 0 {
        c.fail("pool samples", "at least one", 0);
    }
    match scenario.expect.pool_peak {
        PoolPeak::Exact(n) => c.eq("pool peak", n, pool.peak),
        PoolPeak::AtMost(n) if pool.peak > n => {
            c.fail("pool peak", format!("at most {n}"), pool.peak);
        }
        PoolPeak::AtMost(_) => {}
    }
    c.eq(
        "pool in use once every outcome was dropped",
        0,
        pool.in_use_after,
    );
    // S10: the run's audit log verifies against its anchor and shows, call
    // for call, the lifecycle of the records.
    match &measured.audit_chain {
        None => c.fail("audit log (S10)", "verified", "not checked"),
        Some(chain) => {
            let kept = chain
                .kept_log
                .as_ref()
                .map(|p| format!(" (log kept: {})", p.display()))
                .unwrap_or_default();
            if !chain.verified {
                c.fail(
                    "audit log (S10)",
                    "ok against the sink's anchor",
                    format!("{}{kept}", chain.verdict),
                );
            }
            if !chain.matches_expected_lifecycle {
                let differences: Vec<String> = chain
                    .differences
                    .iter()
                    .map(|d| serde_json::to_string(d).unwrap_or_default())
                    .collect();
                c.fail(
                    "audit log vs the records' lifecycles (S10)",
                    "no difference",
                    format!("{}{kept}", differences.join("; ")),
                );
            }
        }
    }
    if let Some(sum) = scenario.expect.retained_sum {
        let got: u64 = measured
            .calls
            .iter()
            .filter_map(|call| call.record.as_ref())
            .map(|r| r.stderr_bytes_retained)
            .sum();
        c.eq("stderr_bytes_retained of all calls", sum, got);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_tail_is_aligned_on_the_end_of_the_run() {
        assert_eq!(repeated_tail(b"ab\n", 6, 4), b"\nab\n");
        assert_eq!(repeated_tail(b"ab\n", 7, 4), b"ab\na");
        assert_eq!(repeated_tail(b"ab\n", 8, 4), b"b\nab");
        assert_eq!(repeated_tail(b"ab\n", 2, 4), b"ab");
        assert_eq!(repeated_tail(b"ab\n", 8, 0), b"");
    }

    #[test]
    fn bytes_and_bounds_are_inclusive() {
        assert!(Bytes::Between(2, 4).holds(4, 0));
        assert!(!Bytes::Between(2, 4).holds(5, 0));
        assert!(Bytes::AllSeen.holds(7, 7));
        assert!(Bounds::ms(1, 2).holds(2000));
        assert!(!Bounds::ms(1, 2).holds(999));
        assert!(Bounds::ZERO.holds(0));
    }
}
