//! Random schedules of inputs and time jumps, including misuse: whatever a
//! driver does, a call reaches exactly one terminal state, emits exactly one
//! `Finished` as its last action, never asks to wake up in the past, only
//! takes edges of the transition table, and builds a consistent record.
#![allow(clippy::unwrap_used)]

mod sim;

use std::time::{Duration, Instant, SystemTime};

use proptest::prelude::*;
use spillguard_core::Input;
use spillguard_core::{
    Action, Admission, AuditKind, Call, CallKind, CallRecord, CallSettings, CancelReason, Config,
    DisconnectPolicy, Diverted, ExitStatus, ResultKind, RetentionPool, State, StdoutMode,
    TRANSITIONS,
};

static NOISE: [u8; 70_000] = [b'e'; 70_000];

#[derive(Debug, Clone)]
enum Op {
    Validated(bool),
    ValidationFailed,
    Grant,
    Deny,
    Spawned,
    SpawnFailed,
    Stderr(usize),
    Stdout(usize),
    StdoutEof,
    StderrEof,
    Exit(i32),
    ExitBySignal(i32),
    Lost,
    AuditFailed,
    Cancel(u8),
    Disconnect,
    Result(bool),
    InputEnded,
    Forwarded(u64),
    Diverted(usize),
    Admitted,
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => any::<bool>().prop_map(Op::Validated),
        1 => Just(Op::ValidationFailed),
        1 => Just(Op::Grant),
        1 => Just(Op::Deny),
        3 => Just(Op::Spawned),
        1 => Just(Op::SpawnFailed),
        3 => (0usize..70_000).prop_map(Op::Stderr),
        1 => (0usize..5_000).prop_map(Op::Stdout),
        2 => Just(Op::StdoutEof),
        2 => Just(Op::StderrEof),
        1 => (0i32..4).prop_map(Op::Exit),
        1 => prop_oneof![Just(9), Just(15)].prop_map(Op::ExitBySignal),
        1 => Just(Op::Lost),
        1 => Just(Op::AuditFailed),
        1 => (0u8..5).prop_map(Op::Cancel),
        1 => Just(Op::Disconnect),
        1 => any::<bool>().prop_map(Op::Result),
        1 => Just(Op::InputEnded),
        1 => (0u64..100_000).prop_map(Op::Forwarded),
        1 => (0usize..5_000).prop_map(Op::Diverted),
        1 => Just(Op::Admitted),
        4 => (0u64..8_000).prop_map(Op::Advance),
    ]
}

struct Driver {
    call: Call,
    now: Instant,
    spawn_polled: bool,
    finished: Vec<CallRecord>,
    actions_after_finish: usize,
    edges: Vec<(State, State)>,
    audit_finals: usize,
}

impl Driver {
    fn drain(&mut self) {
        while let Some(action) = self.call.poll_action() {
            if !self.finished.is_empty() {
                self.actions_after_finish += 1;
            }
            match action {
                Action::Spawn(_) => self.spawn_polled = true,
                Action::Audit(event) => match event.kind {
                    AuditKind::Transition { from, to } => self.edges.push((from, to)),
                    AuditKind::Final(_) => self.audit_finals += 1,
                    _ => {}
                },
                Action::Finished(outcome) => self.finished.push(outcome.record.clone()),
                _ => {}
            }
        }
    }

    fn apply(&mut self, op: &Op) {
        let before = self.call.state();
        let now = self.now;
        let refused = match op {
            Op::Validated(approval) => self
                .call
                .handle(
                    now,
                    Input::Validated {
                        needs_approval: *approval,
                    },
                )
                .is_err(),
            Op::ValidationFailed => self
                .call
                .handle(now, Input::ValidationFailed("bad target".into()))
                .is_err(),
            Op::Grant => self.call.handle(now, Input::ApprovalGranted).is_err(),
            Op::Admitted => self.call.handle(now, Input::Admitted).is_err(),
            Op::Deny => self.call.handle(now, Input::ApprovalDenied).is_err(),
            Op::Spawned => self.call.handle(now, Input::Spawned { pid: 77 }).is_err(),
            Op::SpawnFailed => self
                .call
                .handle(
                    now,
                    Input::SpawnFailed {
                        kind: std::io::ErrorKind::NotFound,
                        message: "ENOENT".into(),
                    },
                )
                .is_err(),
            Op::Stderr(n) => {
                let _ = self.call.handle(now, Input::Stderr(&NOISE[..*n]));
                false
            }
            Op::Stdout(n) => {
                let _ = self.call.handle(now, Input::Stdout(&NOISE[..*n]));
                false
            }
            Op::StdoutEof => self.call.handle(now, Input::StdoutEof).is_err(),
            Op::StderrEof => self.call.handle(now, Input::StderrEof).is_err(),
            Op::Exit(code) => self
                .call
                .handle(now, Input::Exited(ExitStatus::code(*code)))
                .is_err(),
            Op::ExitBySignal(sig) => self
                .call
                .handle(now, Input::Exited(ExitStatus::signal(*sig)))
                .is_err(),
            Op::Lost => self.call.handle(now, Input::ProcessLost).is_err(),
            Op::AuditFailed => {
                let _ = self
                    .call
                    .handle(now, Input::AuditFailed("disk full".into()));
                false
            }
            Op::Cancel(r) => {
                let reason = [
                    CancelReason::Requested,
                    CancelReason::Deadline,
                    CancelReason::ClientDisconnected,
                    CancelReason::StderrCeiling,
                    CancelReason::HostShutdown,
                ][*r as usize];
                let _ = self.call.handle(now, Input::Cancel(reason));
                false
            }
            Op::Disconnect => {
                let _ = self.call.handle(now, Input::ClientDisconnected);
                false
            }
            Op::Result(ok) => {
                let kind = if *ok {
                    ResultKind::Success
                } else {
                    ResultKind::RemoteFailure
                };
                self.call.handle(now, Input::Result(kind)).is_err()
            }
            Op::InputEnded => {
                let _ = self.call.handle(now, Input::InputEnded);
                false
            }
            Op::Forwarded(n) => {
                let _ = self.call.handle(now, Input::StdoutForwarded(*n));
                let _ = self.call.handle(now, Input::StdinForwarded(*n / 2));
                false
            }
            Op::Diverted(n) => {
                let _ = self.call.handle(
                    now,
                    Input::StdoutDiverted(Diverted {
                        bytes: &NOISE[..*n],
                        lines: 1,
                    }),
                );
                false
            }
            Op::Advance(ms) => {
                self.now += Duration::from_millis(*ms);
                let _ = self.call.handle(self.now, Input::Timeout);
                if let Some(next) = self.call.poll_timeout() {
                    assert!(
                        next > self.now,
                        "poll_timeout in the past after handle_timeout"
                    );
                }
                false
            }
        };
        if refused {
            assert_eq!(
                self.call.state(),
                before,
                "a refused input changed the state"
            );
        }
        if before.is_terminal() {
            assert_eq!(self.call.state(), before, "a terminal state changed");
        }
        self.drain();
    }

    /// Ends the call the way a correct driver would: cancel, answer the
    /// spawn, let time pass.
    fn close(&mut self) {
        let _ = self
            .call
            .handle(self.now, Input::Cancel(CancelReason::Requested));
        self.drain();
        for _ in 0..20 {
            if self.call.state().is_terminal() {
                break;
            }
            if self.call.state() == State::Authorized && self.spawn_polled {
                self.call
                    .handle(self.now, Input::Spawned { pid: 78 })
                    .unwrap();
                self.drain();
                continue;
            }
            let next = self
                .call
                .poll_timeout()
                .expect("a live call always waits for something");
            self.now = next;
            let _ = self.call.handle(next, Input::Timeout);
            self.drain();
        }
    }
}

fn check_record(r: &CallRecord) {
    assert!(r.state.is_terminal());
    assert!(r.stderr_bytes_retained <= r.stderr_bytes_seen);
    assert_eq!(
        r.stderr_truncated,
        r.stderr_bytes_seen > r.stderr_bytes_retained
    );
    assert!(r.stdout_bytes_retained <= r.stdout_bytes_seen);
    let reaped = r.exited_offset_us.is_some();
    assert_eq!(
        reaped,
        r.exit_status.is_some() || r.exit_signal.is_some(),
        "exit fields null iff never reaped"
    );
    assert!(r.exit_status.is_none() || r.exit_signal.is_none());
    let terminals: Vec<State> = r
        .timeline
        .iter()
        .map(|m| m.state)
        .filter(|s| s.is_terminal())
        .collect();
    assert_eq!(terminals, [r.state], "exactly one terminal state");
    assert_eq!(r.timeline.last().map(|m| m.state), Some(r.state));
    assert!(
        r.timeline
            .windows(2)
            .all(|w| w[0].offset_us <= w[1].offset_us)
    );
    assert!(
        r.signals
            .windows(2)
            .all(|w| w[0].offset_us <= w[1].offset_us)
    );
    if r.pid.is_none() {
        assert!(!reaped && r.signals.is_empty());
    }
    // Admitted only after queued, and never queued without admission.
    if let Some(admitted) = r.admitted_offset_us {
        assert!(r.queued_offset_us.is_some_and(|queued| queued <= admitted));
    }
    match r.state {
        State::Unknown => assert!(!reaped),
        State::Completed => assert_eq!(r.exit_status, Some(0)),
        State::FailedLocal => assert!(r.exit_status != Some(0) && reaped),
        State::Killed => assert!(
            r.signals
                .iter()
                .any(|s| format!("{:?}", s.signal) == "Kill")
        ),
        State::CancelledAfterDispatch | State::CancelledBeforeDispatch => {
            assert!(r.cancel_reason.is_some())
        }
        State::QueueExpired => {
            assert!(r.pid.is_none() && r.queued_offset_us.is_some());
            assert_eq!(r.admitted_offset_us, None);
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
struct Schedule {
    ops: Vec<Op>,
    discovery: bool,
    cancel_on_disconnect: bool,
    deadline_ms: Option<u64>,
    streamed: bool,
    /// Under admission, the queue timeout.
    queue_timeout_ms: Option<u64>,
}

fn schedule() -> impl Strategy<Value = Schedule> {
    (
        proptest::collection::vec(op(), 0..40),
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(1u64..3_000),
        any::<bool>(),
        proptest::option::of(1u64..3_000),
    )
        .prop_map(
            |(ops, discovery, cancel_on_disconnect, deadline_ms, streamed, queue_timeout_ms)| {
                Schedule {
                    ops,
                    discovery,
                    cancel_on_disconnect,
                    deadline_ms,
                    streamed,
                    queue_timeout_ms,
                }
            },
        )
}

/// Runs one schedule, checks every invariant, returns the terminal state.
fn run(s: &Schedule) -> State {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let mut settings = if s.discovery {
        CallSettings::discovery(&config)
    } else {
        CallSettings::action(&config)
    };
    settings.deadline = s.deadline_ms.map(Duration::from_millis);
    settings.approval_timeout = Duration::from_secs(2);
    settings.shutdown_grace = Duration::from_millis(500);
    if s.streamed {
        settings.stdout_mode = StdoutMode::Streamed;
        settings.stdin_close_grace = Duration::from_millis(700);
    }
    if s.cancel_on_disconnect {
        settings.on_client_disconnect = DisconnectPolicy::Cancel;
    }
    if let Some(ms) = s.queue_timeout_ms {
        settings.admission = Admission::Queued {
            timeout: Duration::from_millis(ms),
        };
    }
    let kind = if s.discovery {
        CallKind::Discovery
    } else {
        CallKind::Action
    };
    let spec = sim::spec("c_p", kind);
    #[allow(clippy::disallowed_methods)]
    let t0 = Instant::now();
    let mut d = Driver {
        call: Call::new(spec, settings, &pool, t0, SystemTime::UNIX_EPOCH),
        now: t0,
        spawn_polled: false,
        finished: Vec::new(),
        actions_after_finish: 0,
        edges: Vec::new(),
        audit_finals: 0,
    };
    for op in &s.ops {
        d.apply(op);
    }
    d.close();

    let state = d.call.state();
    assert!(state.is_terminal());
    assert_eq!(d.finished.len(), 1, "exactly one Finished");
    assert_eq!(d.audit_finals, 1, "exactly one final audit event");
    assert_eq!(d.actions_after_finish, 0, "no action after Finished");
    assert_eq!(d.call.poll_timeout(), None);
    for (from, to) in &d.edges {
        assert!(
            TRANSITIONS.iter().any(|(f, _, t)| f == from && t == to),
            "edge {from} -> {to} is not in the table"
        );
    }
    check_record(&d.finished[0]);
    assert_eq!(d.finished[0].state, state);
    drop(d);
    assert_eq!(
        pool.in_use(),
        0,
        "every retained byte went back to the pool"
    );
    state
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn any_schedule_ends_in_exactly_one_terminal_state_with_one_record(s in schedule()) {
        run(&s);
    }
}

/// The generator is not vacuous: over a fixed sample, schedules reach every
/// terminal state.
#[test]
fn random_schedules_reach_every_terminal_state() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};

    let mut runner = TestRunner::new_with_rng(
        RunnerConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let mut reached = std::collections::BTreeMap::new();
    for _ in 0..3_000 {
        let s = schedule().new_tree(&mut runner).unwrap().current();
        *reached.entry(run(&s).as_str()).or_insert(0u32) += 1;
    }
    let terminal: Vec<&str> = State::ALL
        .iter()
        .filter(|s| s.is_terminal())
        .map(|s| s.as_str())
        .collect();
    for state in terminal {
        assert!(
            reached.contains_key(state),
            "{state} never reached: {reached:?}"
        );
    }
}
