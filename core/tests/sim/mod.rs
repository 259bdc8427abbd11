//! The time machine: drives calls against a fake helper and a fake approver
//! in virtual time. Everything here is itself sans-IO.
//!
//! The clock is read once (`epoch`); from there `step` jumps to the next
//! instant anything is due, `drive_bounded(n)` catches non-termination, and
//! every action is traced as `(offset, lane, action)`.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

use spillguard_core::Input;
use spillguard_core::{
    Action, ApprovalCard, AuditEvent, AuditKind, Call, CallKind, CallRecord, CallSettings,
    CallSpec, CancelReason, Config, ExitStatus, Outcome, ResultKind, RetentionPool, Signal,
};

/// What the fake helper does on SIGTERM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTerm {
    /// Exit this long after TERM, by the signal (status: signal 15).
    Die(Duration),
    /// Catch TERM, exit with this code after this long.
    ExitWith(i32, Duration),
    /// Ignore it.
    Ignore,
}

/// A descendant that inherits the helper's stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grandchild {
    /// It lets stderr go this long after the helper's spawn.
    pub holds_for: Duration,
    /// Whether it dies on TERM.
    pub dies_on_term: bool,
    /// Whether it is in the helper's process group (signals reach it).
    pub in_group: bool,
    /// It writes this many bytes every 50 ms while it holds stderr.
    pub writes: u64,
}

/// The helper's behaviour, relative to its spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// Bytes written to stderr at spawn.
    pub stderr_at_spawn: Vec<u8>,
    /// A flood: `chunk` bytes every `tick` while alive, up to `flood_total`.
    pub flood: Option<(u64, Duration)>,
    /// Stop flooding after this many bytes (None: until exit).
    pub flood_total: Option<u64>,
    /// Stdout written at spawn.
    pub stdout: Vec<u8>,
    /// The structured result the host parses, and when.
    pub result: Option<(Duration, ResultKind)>,
    /// Natural exit time and code (None: runs until signalled).
    pub exit: Option<(Duration, i32)>,
    /// Behaviour on TERM.
    pub on_term: OnTerm,
    /// Exits with this code this long after its stdin is closed (an MCP
    /// server at the end of its input); `None`: stdin's end changes nothing.
    pub on_stdin_close: Option<(Duration, i32)>,
    /// A stderr-holding descendant.
    pub grandchild: Option<Grandchild>,
    /// The process cannot be waited for: its exit is never observed.
    pub unreapable: bool,
    /// Spawning fails with this error kind and message.
    pub spawn_error: Option<(std::io::ErrorKind, String)>,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            stderr_at_spawn: Vec::new(),
            flood: None,
            flood_total: None,
            stdout: Vec::new(),
            result: None,
            exit: Some((Duration::from_millis(10), 0)),
            on_term: OnTerm::Die(Duration::from_millis(1)),
            on_stdin_close: None,
            grandchild: None,
            unreapable: false,
            spawn_error: None,
        }
    }
}

/// What the fake helper tells the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelperEvent {
    Stderr(Vec<u8>),
    Stdout(Vec<u8>),
    StdoutEof,
    StderrEof,
    Exited(ExitStatus),
    Lost,
    Result(ResultKind),
}

const PATTERN: &[u8] = b"helper-diagnostic\n";

/// The fake helper: a small sans-IO machine driven by time and signals.
#[derive(Debug)]
pub struct FakeHelper {
    pub script: Script,
    spawned: Option<Instant>,
    child_alive: bool,
    child_exit_at: Option<(Instant, ExitStatus)>,
    grandchild_alive: bool,
    next_flood: Option<Instant>,
    next_grandchild_write: Option<Instant>,
    result_sent: bool,
    stdout_open: bool,
    stderr_open: bool,
    pub flooded: u64,
    pub signals: Vec<(Instant, Signal)>,
    pub stdin_closed_at: Option<Instant>,
    out: VecDeque<HelperEvent>,
}

impl FakeHelper {
    pub fn new(script: Script) -> Self {
        Self {
            script,
            spawned: None,
            child_alive: false,
            child_exit_at: None,
            grandchild_alive: false,
            next_flood: None,
            next_grandchild_write: None,
            result_sent: false,
            stdout_open: false,
            stderr_open: false,
            flooded: 0,
            signals: Vec::new(),
            stdin_closed_at: None,
            out: VecDeque::new(),
        }
    }

    /// Spawns; `Err` if the script says spawning fails.
    pub fn spawn(&mut self, now: Instant) -> Result<(), (std::io::ErrorKind, String)> {
        if let Some(error) = &self.script.spawn_error {
            return Err(error.clone());
        }
        self.spawned = Some(now);
        self.child_alive = true;
        self.stdout_open = true;
        self.stderr_open = true;
        self.grandchild_alive = self.script.grandchild.is_some();
        if !self.script.stderr_at_spawn.is_empty() {
            self.out
                .push_back(HelperEvent::Stderr(self.script.stderr_at_spawn.clone()));
        }
        if !self.script.stdout.is_empty() {
            self.out
                .push_back(HelperEvent::Stdout(self.script.stdout.clone()));
        }
        if self.script.flood.is_some() {
            self.next_flood = Some(now);
        }
        if self.grandchild_alive {
            self.next_grandchild_write = Some(now + Duration::from_millis(50));
        }
        if let Some((after, code)) = self.script.exit {
            self.child_exit_at = Some((now + after, ExitStatus::code(code)));
        }
        Ok(())
    }

    pub fn poll_event(&mut self) -> Option<HelperEvent> {
        self.out.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let spawned = self.spawned?;
        let result = self
            .script
            .result
            .filter(|_| !self.result_sent && self.child_alive)
            .map(|(after, _)| spawned + after);
        let grandchild_release = self
            .script
            .grandchild
            .filter(|_| self.grandchild_alive)
            .map(|g| spawned + g.holds_for);
        [
            self.next_flood.filter(|_| self.child_alive),
            self.child_exit_at
                .filter(|_| self.child_alive)
                .map(|(at, _)| at),
            self.next_grandchild_write.filter(|_| self.grandchild_alive),
            grandchild_release,
            result,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(spawned) = self.spawned else { return };
        if let Some((after, kind)) = self.script.result
            && !self.result_sent
            && self.child_alive
            && spawned + after <= now
        {
            self.result_sent = true;
            self.out.push_back(HelperEvent::Result(kind));
        }
        while let Some(at) = self.next_flood.filter(|&at| at <= now && self.child_alive) {
            let (chunk, tick) = self.script.flood.unwrap();
            let limit = self.script.flood_total.unwrap_or(u64::MAX);
            let n = chunk.min(limit - self.flooded);
            if n == 0 {
                self.next_flood = None;
                break;
            }
            self.out
                .push_back(HelperEvent::Stderr(pattern(self.flooded, n)));
            self.flooded += n;
            self.next_flood = Some(at + tick);
        }
        if let Some(g) = self.script.grandchild {
            while let Some(at) = self
                .next_grandchild_write
                .filter(|&at| at <= now && self.grandchild_alive && at < spawned + g.holds_for)
            {
                if g.writes > 0 {
                    self.out
                        .push_back(HelperEvent::Stderr(pattern(0, g.writes)));
                }
                self.next_grandchild_write = Some(at + Duration::from_millis(50));
            }
            if self.grandchild_alive && spawned + g.holds_for <= now {
                self.grandchild_alive = false;
                self.close_streams_if_free();
            }
        }
        if let Some((at, status)) = self.child_exit_at
            && self.child_alive
            && at <= now
        {
            self.child_dies(status);
        }
    }

    pub fn handle_stdin_closed(&mut self, now: Instant) {
        self.stdin_closed_at.get_or_insert(now);
        if let Some((after, code)) = self.script.on_stdin_close
            && self.child_alive
        {
            let at = now + after;
            if self.child_exit_at.is_none_or(|(t, _)| at < t) {
                self.child_exit_at = Some((at, ExitStatus::code(code)));
            }
        }
    }

    pub fn handle_signal(&mut self, now: Instant, signal: Signal) {
        self.signals.push((now, signal));
        let g = self.script.grandchild;
        match signal {
            Signal::Term => {
                if self.child_alive {
                    match self.script.on_term {
                        OnTerm::Die(after) => {
                            self.child_exit_at = Some((now + after, ExitStatus::signal(15)));
                        }
                        OnTerm::ExitWith(code, after) => {
                            self.child_exit_at = Some((now + after, ExitStatus::code(code)));
                        }
                        OnTerm::Ignore => {}
                    }
                }
                if let Some(g) = g
                    && g.in_group
                    && g.dies_on_term
                    && self.grandchild_alive
                {
                    self.grandchild_alive = false;
                    self.close_streams_if_free();
                }
            }
            Signal::Kill => {
                if let Some(g) = g
                    && g.in_group
                {
                    self.grandchild_alive = false;
                }
                if self.child_alive {
                    self.child_dies(ExitStatus::signal(9));
                } else {
                    self.close_streams_if_free();
                }
            }
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }

    fn child_dies(&mut self, status: ExitStatus) {
        self.child_alive = false;
        self.close_streams_if_free();
        if self.script.unreapable {
            self.out.push_back(HelperEvent::Lost);
        } else {
            self.out.push_back(HelperEvent::Exited(status));
        }
    }

    fn close_streams_if_free(&mut self) {
        if self.child_alive {
            return;
        }
        if self.stdout_open {
            self.stdout_open = false;
            self.out.push_back(HelperEvent::StdoutEof);
        }
        if self.stderr_open && !self.grandchild_alive {
            self.stderr_open = false;
            self.out.push_back(HelperEvent::StderrEof);
        }
    }

    pub fn group_alive(&self) -> bool {
        self.child_alive || self.grandchild_alive
    }
}

/// `n` bytes of the repeating diagnostic line, starting at stream offset
/// `from`, so that the flood reads the same whatever its chunking.
pub fn pattern(from: u64, n: u64) -> Vec<u8> {
    let start = (from % PATTERN.len() as u64) as usize;
    PATTERN
        .iter()
        .cycle()
        .skip(start)
        .take(n as usize)
        .copied()
        .collect()
}

/// The approver's answer, relative to when the card is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Grant(Duration),
    Deny(Duration),
    Never,
}

/// The fake approver: answers a card after a delay.
#[derive(Debug)]
pub struct FakeApprover {
    pub decision: Decision,
    due: Option<Instant>,
}

impl FakeApprover {
    pub fn new(decision: Decision) -> Self {
        Self {
            decision,
            due: None,
        }
    }

    fn card_shown(&mut self, now: Instant) {
        self.due = match self.decision {
            Decision::Grant(after) | Decision::Deny(after) => Some(now + after),
            Decision::Never => None,
        };
    }
}

/// One call with its fake helper, approver and scripted outside events.
#[derive(Debug)]
pub struct Lane {
    pub call: Call,
    pub helper: FakeHelper,
    pub approver: FakeApprover,
    pub needs_approval: bool,
    /// Offsets (from the epoch) of outside events.
    pub validate_at: Duration,
    pub cancel_at: Option<Duration>,
    pub disconnect_at: Option<Duration>,
    /// When the caller's input ends (a streamed call's client closes).
    pub input_end_at: Option<Duration>,
    /// Stderr bytes fed to the call while it awaits approval, per step.
    pub noise_while_awaiting: Option<(u64, Duration)>,
    /// Audit writes fail from this many written events on.
    pub audit_fails_after: Option<usize>,
    pub audit_failures: usize,
    next_noise: Option<Instant>,
    validated: bool,
    cancelled: bool,
    disconnected: bool,
    input_ended: bool,
    pub outcome: Option<Box<Outcome>>,
    pub cards: Vec<(Duration, ApprovalCard)>,
    pub audit: Vec<AuditEvent>,
    pub finished_count: usize,
    pub actions_after_finish: usize,
    pub spawned_at: Option<Duration>,
    /// When the fake driver admitted the call.
    pub admitted_at: Option<Duration>,
}

impl Lane {
    pub fn record(&self) -> &CallRecord {
        &self.outcome.as_ref().expect("call finished").record
    }
}

/// Builds a lane for an action call with default settings and `script`.
pub fn spec(call_id: &str, kind: CallKind) -> CallSpec {
    CallSpec {
        call_id: call_id.to_owned(),
        session_id: "s_test".to_owned(),
        kind,
        action: "helper.run".to_owned(),
        target: "web-3".to_owned(),
        summary: "run the helper".to_owned(),
        card_lines: Vec::new(),
    }
}

/// All lanes, one virtual clock.
#[derive(Debug)]
pub struct World {
    pub epoch: Instant,
    pub now: Instant,
    pub config: Config,
    pub pool: RetentionPool,
    pub lanes: Vec<Lane>,
    pub trace: Vec<(Duration, usize, String)>,
    pub peak_in_use: u64,
    pub steps: usize,
    /// The fake driver's admission: at most this many admitted calls
    /// unfinished at once; queued calls are admitted in the order they
    /// entered `queued`. `None`: the world never admits (a test admits by
    /// hand, or no call uses admission).
    pub max_running: Option<usize>,
    /// Lanes in the order they entered `queued`, not yet admitted.
    pub queue: VecDeque<usize>,
    /// Most admitted calls unfinished at once.
    pub peak_running: usize,
}

impl World {
    pub fn new(config: Config) -> Self {
        #[allow(clippy::disallowed_methods)]
        let epoch = Instant::now();
        let pool = RetentionPool::new(config.stderr_retained_process_bytes);
        Self {
            epoch,
            now: epoch,
            config,
            pool,
            lanes: Vec::new(),
            trace: Vec::new(),
            peak_in_use: 0,
            steps: 0,
            max_running: None,
            queue: VecDeque::new(),
            peak_running: 0,
        }
    }

    /// Adds a call; returns its lane index.
    pub fn add(
        &mut self,
        spec: CallSpec,
        settings: CallSettings,
        script: Script,
        needs_approval: bool,
        decision: Decision,
    ) -> usize {
        let call = Call::new(spec, settings, &self.pool, self.now, SystemTime::UNIX_EPOCH);
        self.lanes.push(Lane {
            call,
            helper: FakeHelper::new(script),
            approver: FakeApprover::new(decision),
            needs_approval,
            validate_at: self.offset(),
            cancel_at: None,
            disconnect_at: None,
            input_end_at: None,
            noise_while_awaiting: None,
            audit_fails_after: None,
            audit_failures: 0,
            next_noise: None,
            validated: false,
            cancelled: false,
            disconnected: false,
            input_ended: false,
            outcome: None,
            cards: Vec::new(),
            audit: Vec::new(),
            finished_count: 0,
            actions_after_finish: 0,
            spawned_at: None,
            admitted_at: None,
        });
        self.lanes.len() - 1
    }

    pub fn offset(&self) -> Duration {
        self.now - self.epoch
    }

    pub fn at(&self, offset: Duration) -> Instant {
        self.epoch + offset
    }

    /// Processes everything due now, then jumps to the next wake-up.
    /// Returns false when nothing is left to wake up for.
    pub fn step(&mut self) -> bool {
        self.steps += 1;
        let now = self.now;
        for i in 0..self.lanes.len() {
            self.fire_outside(i, now);
            self.settle(i);
        }
        self.admit_queued();
        self.peak_in_use = self.peak_in_use.max(self.pool.in_use());
        let Some(next) = self.next_wake() else {
            return false;
        };
        self.now = self.now.max(next);
        true
    }

    /// Steps until every call finished; panics after `max` steps.
    pub fn drive_bounded(&mut self, max: usize) {
        for _ in 0..max {
            let live = self.lanes.iter().any(|l| l.outcome.is_none());
            if !live {
                // Let trailing events (late EOFs, exits) reach the calls.
                for _ in 0..max {
                    if !self.step() {
                        return;
                    }
                }
                panic!("trailing events did not stop after {max} steps");
            }
            if !self.step() {
                let stuck: Vec<_> = self
                    .lanes
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.outcome.is_none())
                    .map(|(i, l)| (i, l.call.state()))
                    .collect();
                assert!(
                    stuck.is_empty(),
                    "nothing left to wake up for, calls not finished: {stuck:?}"
                );
                return;
            }
        }
        panic!("calls not finished after {max} steps");
    }

    /// The fake driver: admits queued calls, first in first out, while
    /// fewer than `max_running` admitted calls are unfinished.
    fn admit_queued(&mut self) {
        let Some(max) = self.max_running else {
            return;
        };
        loop {
            let running = self
                .lanes
                .iter()
                .filter(|l| l.admitted_at.is_some() && l.outcome.is_none())
                .count();
            self.peak_running = self.peak_running.max(running);
            if running >= max {
                return;
            }
            let Some(i) = self.queue.pop_front() else {
                return;
            };
            if self.lanes[i].call.state() != spillguard_core::State::Queued {
                continue;
            }
            let now = self.now;
            self.lanes[i].admitted_at = Some(self.offset());
            self.lanes[i].call.handle(now, Input::Admitted).unwrap();
            self.settle(i);
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        self.lanes
            .iter()
            .flat_map(|l| {
                let outside = [
                    (!l.validated).then(|| self.at(l.validate_at)),
                    l.cancel_at.filter(|_| !l.cancelled).map(|o| self.at(o)),
                    l.disconnect_at
                        .filter(|_| !l.disconnected)
                        .map(|o| self.at(o)),
                    l.input_end_at
                        .filter(|_| !l.input_ended)
                        .map(|o| self.at(o)),
                    l.approver.due,
                    l.next_noise,
                ];
                let live = l.outcome.is_none();
                outside
                    .into_iter()
                    .flatten()
                    .filter(move |_| live)
                    .chain(l.call.poll_timeout())
                    .chain(l.helper.poll_timeout())
            })
            .min()
    }

    fn fire_outside(&mut self, i: usize, now: Instant) {
        let epoch = self.epoch;
        let lane = &mut self.lanes[i];
        if !lane.validated && epoch + lane.validate_at <= now {
            lane.validated = true;
            if let Err(e) = lane.call.handle(
                now,
                Input::Validated {
                    needs_approval: lane.needs_approval,
                },
            ) {
                panic!("validated refused: {e}");
            }
        }
        if let Some(due) = lane.approver.due.filter(|&d| d <= now) {
            let _ = due;
            lane.approver.due = None;
            let result = match lane.approver.decision {
                Decision::Grant(_) => lane.call.handle(now, Input::ApprovalGranted),
                Decision::Deny(_) => lane.call.handle(now, Input::ApprovalDenied),
                Decision::Never => Ok(()),
            };
            result.unwrap();
        }
        if let Some(at) = lane.next_noise.filter(|&at| at <= now) {
            if lane.call.state() == spillguard_core::State::AwaitingApproval {
                let (n, every) = lane.noise_while_awaiting.unwrap();
                let _ = lane.call.handle(now, Input::Stderr(&pattern(0, n)));
                lane.next_noise = Some(at + every);
            } else {
                lane.next_noise = None;
            }
        }
        if !lane.cancelled && lane.cancel_at.is_some_and(|o| epoch + o <= now) {
            lane.cancelled = true;
            let _ = lane
                .call
                .handle(now, Input::Cancel(CancelReason::Requested));
        }
        if !lane.disconnected && lane.disconnect_at.is_some_and(|o| epoch + o <= now) {
            lane.disconnected = true;
            let _ = lane.call.handle(now, Input::ClientDisconnected);
        }
        if !lane.input_ended && lane.input_end_at.is_some_and(|o| epoch + o <= now) {
            lane.input_ended = true;
            let _ = lane.call.handle(now, Input::InputEnded);
        }
        lane.helper.handle_timeout(now);
        let _ = lane.call.handle(now, Input::Timeout);
    }

    /// Carries out actions and delivers helper events until both are quiet.
    fn settle(&mut self, i: usize) {
        let now = self.now;
        let offset = self.offset();
        loop {
            let mut busy = false;
            while let Some(action) = self.lanes[i].call.poll_action() {
                busy = true;
                self.carry_out(i, now, offset, action);
            }
            while let Some(event) = self.lanes[i].helper.poll_event() {
                busy = true;
                let call = &mut self.lanes[i].call;
                let outcome = match event {
                    HelperEvent::Stderr(bytes) => {
                        let _ = call.handle(now, Input::Stderr(&bytes));
                        Ok(())
                    }
                    HelperEvent::Stdout(bytes) => {
                        let _ = call.handle(now, Input::Stdout(&bytes));
                        Ok(())
                    }
                    HelperEvent::StdoutEof => call.handle(now, Input::StdoutEof),
                    HelperEvent::StderrEof => call.handle(now, Input::StderrEof),
                    HelperEvent::Exited(status) => call.handle(now, Input::Exited(status)),
                    HelperEvent::Lost => call.handle(now, Input::ProcessLost),
                    HelperEvent::Result(kind) => call.handle(now, Input::Result(kind)),
                };
                outcome.unwrap();
                self.peak_in_use = self.peak_in_use.max(self.pool.in_use());
            }
            if !busy {
                return;
            }
        }
    }

    fn carry_out(&mut self, i: usize, now: Instant, offset: Duration, action: Action) {
        let lane = &mut self.lanes[i];
        if lane.finished_count > 0 {
            lane.actions_after_finish += 1;
        }
        let name = match &action {
            Action::Audit(e) => match &e.kind {
                AuditKind::Attempt { .. } => "Audit(attempt)".to_owned(),
                AuditKind::Transition { from, to } => format!("Audit({from}->{to})"),
                AuditKind::Final(r) => format!("Audit(final {})", r.state),
                AuditKind::CardShown { .. } => "Audit(card)".to_owned(),
                _ => "Audit(?)".to_owned(),
            },
            Action::ShowApprovalCard(_) => "ShowApprovalCard".to_owned(),
            Action::Spawn(_) => "Spawn".to_owned(),
            Action::CloseStdin => "CloseStdin".to_owned(),
            Action::SignalGroup { signal, .. } => format!("SignalGroup({signal:?})"),
            Action::AbandonStreams => "AbandonStreams".to_owned(),
            Action::Finished(o) => format!("Finished({})", o.record.state),
            _ => "?".to_owned(),
        };
        self.trace.push((offset, i, name));
        if let Action::Audit(AuditEvent {
            kind:
                AuditKind::Transition {
                    to: spillguard_core::State::Queued,
                    ..
                },
            ..
        }) = &action
        {
            self.queue.push_back(i);
        }
        let lane = &mut self.lanes[i];
        match action {
            Action::Audit(event) => {
                if lane
                    .audit_fails_after
                    .is_some_and(|n| lane.audit.len() >= n)
                {
                    lane.audit_failures += 1;
                    let _ = lane
                        .call
                        .handle(now, Input::AuditFailed("disk full".into()));
                } else {
                    lane.audit.push(event);
                }
            }
            Action::ShowApprovalCard(card) => {
                lane.cards.push((offset, card));
                lane.approver.card_shown(now);
                if let Some((_, every)) = lane.noise_while_awaiting {
                    lane.next_noise = Some(now + every);
                }
            }
            Action::Spawn(_) => match lane.helper.spawn(now) {
                Ok(()) => {
                    lane.spawned_at = Some(offset);
                    lane.call
                        .handle(
                            now,
                            Input::Spawned {
                                pid: 4000 + i as u32,
                            },
                        )
                        .unwrap();
                }
                Err((kind, error)) => lane
                    .call
                    .handle(
                        now,
                        Input::SpawnFailed {
                            kind,
                            message: error,
                        },
                    )
                    .unwrap(),
            },
            Action::CloseStdin => lane.helper.handle_stdin_closed(now),
            Action::AbandonStreams => {}
            Action::SignalGroup { signal, .. } => lane.helper.handle_signal(now, signal),
            Action::Finished(outcome) => {
                lane.finished_count += 1;
                lane.outcome = Some(outcome);
            }
            _ => {}
        }
    }

    /// Offset of the first traced action of `lane` whose name is `name`.
    pub fn first(&self, lane: usize, name: &str) -> Option<Duration> {
        self.trace
            .iter()
            .find(|(_, l, n)| *l == lane && n == name)
            .map(|(o, _, _)| *o)
    }

    /// How many traced actions of `lane` are named `name`.
    pub fn count(&self, lane: usize, name: &str) -> usize {
        self.trace
            .iter()
            .filter(|(_, l, n)| *l == lane && n == name)
            .count()
    }
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
