//! The runtime-agnostic part of every driver: one client thread per call
//! that starts it, answers its card, cancels or drops it on schedule and
//! collects its outcome; a thread sampling the pool; then the records, the
//! host's kept records and the helpers' process groups.
//!
//! An adapter takes part through two small traits, [`HostUnderTest`] and
//! [`CallUnderTest`], with blocking methods: an async adapter's driver
//! implements them with its runtime's `block_on`.
//!
//! PID 1 may not reap orphans, so the engine makes the test process a
//! child subreaper ([`become_subreaper`]) and, after each record, reaps a
//! helper group's zombies before it checks that the group is gone
//! (`kill(-pgid, 0)` fails with `ESRCH`: [`settle_group`]).

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use spillguard_core::{ApprovalCard, CallError, CallRecord, Outcome, RetentionPool, State};
use spillguard_core::{DebugGrant, DebugGrantError};
use spillguard_host::{CallBuilder, CallRequest, HelperCommand, Launch, ShutdownReport};

use crate::measure::{
    Measured, MeasuredCall, PoolSampler, PoolUse, become_subreaper, settle_group,
};
use crate::scenario::{Approver, CallPlan, Environment, Milestone, Scenario, StartAt};

/// Builds a [`CallRequest`] the way a host's builder does, without a host:
/// `request(command).target("web-3").into_request()` is the request.
#[derive(Debug, Clone, Copy)]
pub struct Requests;

impl Launch for Requests {
    type Handle = CallRequest;

    fn launch(&self, request: CallRequest) -> CallRequest {
        request
    }
}

/// A builder whose `into_request()` is the request, for [`HostUnderTest::launch`].
pub fn request(command: HelperCommand) -> CallBuilder<'static, Requests> {
    CallBuilder::on(&Requests, command)
}

/// One adapter's host, as the scenario driver uses it.
pub trait HostUnderTest: Send + Sync + 'static {
    /// The adapter's call handle.
    type Call: CallUnderTest;

    /// Starts the call `request` describes; returns at once.
    fn launch(&self, request: CallRequest) -> Self::Call;

    /// Grants debug for `duration` with `per_call_bytes` of stderr per call.
    fn grant_debug(
        &self,
        duration: Duration,
        per_call_bytes: u64,
    ) -> Result<DebugGrant, DebugGrantError>;

    /// Ends the debug grant.
    fn revoke_debug(&self);

    /// Drops the host (its last clone); returns what its calls still run
    /// on (a runtime), to keep until the check ends.
    fn drop_host(self) -> Box<dyn Send>;

    /// The host's process-wide retention pool (a shared handle).
    fn pool(&self) -> RetentionPool;

    /// The records of finished calls the host kept.
    fn finished_records(&self) -> Vec<CallRecord>;

    /// How many calls have not written their record yet.
    fn live_calls(&self) -> usize;

    /// Cancels every live call and waits at most `timeout` for their
    /// records; later calls are cancelled before dispatch.
    fn shutdown(&self, timeout: Duration) -> ShutdownReport;

    /// Cancels every live call without waiting; how many were asked.
    fn shutdown_now(&self) -> usize;

    /// How many audit writes failed.
    fn audit_failures(&self) -> u64;

    /// The leftover pipes of finished calls the host drains, closed and
    /// saw end.
    fn leftover_pipes(&self) -> spillguard_host::LeftoverStats;

    /// Runs `call` as the adapter's `Command` (on its process-wide host,
    /// not this one) and returns what its `output()` answered; an async
    /// adapter's future is awaited on a runtime made for this call alone.
    fn default_output(&self, call: &DefaultCall) -> std::io::Result<spillguard_host::Output>;
}

/// A call for an adapter's `Command`, the same on every runtime.
#[derive(Debug, Clone)]
pub struct DefaultCall {
    /// What runs.
    pub command: spillguard_host::HelperCommand,
    /// Its deadline, if any.
    pub deadline: Option<Duration>,
    /// Its stdout budget, if not the default.
    pub stdout_budget: Option<usize>,
    /// Whether `output()` accepts a cut stdout.
    pub allow_cut: bool,
}

impl DefaultCall {
    /// A call of `command`, every other choice at its default.
    pub fn of(command: spillguard_host::HelperCommand) -> Self {
        Self {
            command,
            deadline: None,
            stdout_budget: None,
            allow_cut: false,
        }
    }

    /// The adapter's `Command` made by `on_default`, described as asked.
    pub fn describe<C: DescribedCall>(&self, on_default: impl FnOnce(HelperCommand) -> C) -> C {
        let mut builder = on_default(self.command.clone());
        if let Some(deadline) = self.deadline {
            builder = builder.deadline(deadline);
        }
        if let Some(bytes) = self.stdout_budget {
            builder = builder.stdout_budget(bytes);
        }
        if self.allow_cut {
            builder = builder.allow_stdout_truncation();
        }
        builder
    }
}

/// The builder methods [`DefaultCall::describe`] uses, on each adapter's
/// `Command`.
pub trait DescribedCall: Sized {
    /// `.deadline(d)`.
    fn deadline(self, deadline: Duration) -> Self;
    /// `.stdout_budget(bytes)`.
    fn stdout_budget(self, bytes: usize) -> Self;
    /// `.allow_stdout_truncation()`.
    fn allow_stdout_truncation(self) -> Self;
}

macro_rules! described_call {
    ($($command:ty),*) => {$(
        impl DescribedCall for $command {
            fn deadline(self, deadline: Duration) -> Self {
                <$command>::deadline(self, deadline)
            }
            fn stdout_budget(self, bytes: usize) -> Self {
                <$command>::stdout_budget(self, bytes)
            }
            fn allow_stdout_truncation(self) -> Self {
                <$command>::allow_stdout_truncation(self)
            }
        }
    )*};
}

described_call!(
    spillguard_std::Command,
    spillguard_smol::Command,
    spillguard_tokio::Command
);

/// One adapter's call handle, as the scenario driver uses it. Dropping it
/// is a client disconnect.
pub trait CallUnderTest: Send + Sized + 'static {
    /// The state last published by the call's owner.
    fn state(&self) -> State;

    /// Waits at most `timeout` for the approval card.
    fn wait_card(&self, timeout: Duration) -> Option<ApprovalCard>;

    /// The approval card, if one was shown.
    fn card(&self) -> Option<ApprovalCard>;

    /// Grants approval.
    fn approve(&self) -> Result<(), CallError>;

    /// Denies approval.
    fn deny(&self) -> Result<(), CallError>;

    /// Asks the call to stop.
    fn cancel(&self);

    /// The helper's pid while it runs (`CallHandle::id`).
    fn id(&self) -> Option<u32>;

    /// Waits at most `timeout` for the outcome; the handle back if none.
    fn wait_timeout(self, timeout: Duration) -> Result<Outcome, Self>;

    /// The outcome if the call has ended, without waiting; the handle back
    /// otherwise.
    fn try_outcome(self) -> Result<Outcome, Self>;

    /// A streamed call's stdin and stdout, as blocking streams (an async
    /// adapter's driven by its runtime); dropping the writer ends the input.
    fn streams(&self) -> std::io::Result<Streams>;
}

/// A streamed call's stdin writer and stdout reader, as a driver gives them.
pub type Streams = (
    Box<dyn std::io::Write + Send>,
    Box<dyn std::io::Read + Send>,
);

/// Longest a client waits for anything (a card, a milestone, an outcome).
pub const CLIENT_LIMIT: Duration = Duration::from_secs(30);

/// Runs `scenario` on `host` and measures it. `runtime` names the runtime
/// in the result. Makes this process a child subreaper (see
/// [`become_subreaper`]).
pub fn run<H: HostUnderTest>(
    runtime: &str,
    host: H,
    scenario: &Scenario,
    env: &Environment,
) -> Measured {
    become_subreaper();
    let began = Instant::now();
    let host = Arc::new(host);
    let pool = host.pool();
    let sampler = PoolSampler::start(pool.clone());
    let milestones = Arc::new(Milestones::default());

    let mut clients = Vec::new();
    for (index, plan) in scenario.calls.iter().enumerate() {
        let watch_dispatch = plan.cancel_after_dispatch.is_some()
            || plan.drop_after_dispatch.is_some()
            || scenario.calls.iter().any(|other| {
                matches!(other.start, StartAt::After { call, milestone: Milestone::Dispatched, .. } if call == index)
            });
        for copy in 0..plan.copies {
            let client = Client {
                index,
                copy,
                plan: plan.clone(),
                command: plan.invocation.command(env),
                watch_dispatch,
                milestones: milestones.clone(),
            };
            let host = host.clone();
            let call_id = plan.call_id(copy);
            let spawned = std::thread::Builder::new()
                .name(format!("client-{call_id}"))
                .spawn(move || client.run(&*host));
            clients.push((call_id, spawned));
        }
    }

    let mut calls = Vec::new();
    let mut outcomes = Vec::new();
    for (call_id, spawned) in clients {
        let joined = match spawned {
            Ok(thread) => thread.join().map_err(|_| "its client thread panicked"),
            Err(_) => Err("its client thread could not be started"),
        };
        match joined {
            Ok((mut call, outcome)) => {
                if let Some(outcome) = outcome {
                    // The scenarios check what was retained, byte for byte:
                    // they read the text unredacted (redaction, at a
                    // window's edges too, is proven in the core's tests).
                    let text = outcome.stderr.render_unredacted();
                    call.stderr_first_line = text.split('\n').next().map(str::to_owned);
                    call.stderr_text = Some(text);
                    call.stdout_text =
                        Some(String::from_utf8_lossy(&outcome.stdout.to_vec()).into_owned());
                    call.record = Some(outcome.record.clone());
                    outcomes.push(outcome);
                }
                calls.push(call);
            }
            Err(problem) => {
                let mut call = MeasuredCall::new(call_id);
                call.problems.push(problem.to_owned());
                calls.push(call);
            }
        }
    }

    collect_host_records(&*host, &mut calls);
    for call in &mut calls {
        let Some(record) = &call.record else { continue };
        if let (Some(cancel), Some(exit)) = (record.cancel_offset_us, record.exited_offset_us) {
            call.cancel_to_exit_us = exit.checked_sub(cancel);
        }
        if let Some(pgid) = record.pgid {
            call.group = Some(settle_group(pgid, record.pid));
        }
    }

    let (sampled_max, samples) = sampler.finish();
    let peak = pool.peak();
    drop(outcomes);
    let in_use_after = wait_for(Duration::from_secs(2), || pool.in_use() == 0);
    Measured {
        runtime: runtime.to_owned(),
        scenario: scenario.name.to_owned(),
        calls,
        pool: PoolUse {
            capacity: pool.capacity(),
            peak,
            sampled_max,
            samples,
            in_use_after: if in_use_after { 0 } else { pool.in_use() },
        },
        wall_ms: began.elapsed().as_secs_f64() * 1000.0,
        audit_chain: None,
    }
}

/// A run that could not start: the host refused its settings. Every call
/// of the scenario carries `reason` as a problem.
pub fn refused(runtime: &str, scenario: &Scenario, reason: &str) -> Measured {
    Measured {
        runtime: runtime.to_owned(),
        scenario: scenario.name.to_owned(),
        calls: scenario
            .call_ids()
            .into_iter()
            .map(|id| {
                let mut call = MeasuredCall::new(id);
                call.problems
                    .push(format!("the host was not created: {reason}"));
                call
            })
            .collect(),
        pool: PoolUse::default(),
        wall_ms: 0.0,
        audit_chain: None,
    }
}

/// Fills in the records of dropped handles from the host, waits until the
/// host has no live call, and counts the records it kept per call id.
fn collect_host_records(host: &impl HostUnderTest, calls: &mut [MeasuredCall]) {
    let missing: Vec<String> = calls
        .iter()
        .filter(|c| c.record.is_none())
        .map(|c| c.call_id.clone())
        .collect();
    let all_there = wait_for(CLIENT_LIMIT, || {
        let kept = host.finished_records();
        missing
            .iter()
            .all(|id| kept.iter().any(|r| &r.call_id == id))
    });
    let idle = wait_for(CLIENT_LIMIT, || host.live_calls() == 0);
    let kept = host.finished_records();
    for call in calls.iter_mut() {
        let mine: Vec<&CallRecord> = kept.iter().filter(|r| r.call_id == call.call_id).collect();
        call.records_kept = mine.len();
        if call.record.is_none() {
            call.record = mine.first().map(|&r| r.clone());
        }
        if !all_there && call.record.is_none() {
            call.problems
                .push(format!("no record within {CLIENT_LIMIT:?}"));
        }
    }
    if !idle && let Some(call) = calls.first_mut() {
        call.problems.push(format!(
            "the host still had live calls after {CLIENT_LIMIT:?}"
        ));
    }
}

/// Polls `done` every millisecond until it holds (`true`) or `limit` passed.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    loop {
        if done() {
            return true;
        }
        if started.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Milestones the clients reached, for calls whose start waits on another.
#[derive(Debug, Default)]
struct Milestones {
    reached: Mutex<HashSet<(usize, Milestone)>>,
    changed: Condvar,
}

impl Milestones {
    fn reach(&self, plan: usize, milestone: Milestone) {
        self.reached
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((plan, milestone));
        self.changed.notify_all();
    }

    fn wait(&self, plan: usize, milestone: Milestone, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut reached = self.reached.lock().unwrap_or_else(PoisonError::into_inner);
        while !reached.contains(&(plan, milestone)) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            reached = self
                .changed
                .wait_timeout(reached, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

/// One call's client: what a host's caller would do, on its own thread.
struct Client {
    index: usize,
    copy: usize,
    plan: CallPlan,
    command: HelperCommand,
    watch_dispatch: bool,
    milestones: Arc<Milestones>,
}

impl Client {
    fn run<H: HostUnderTest>(self, host: &H) -> (MeasuredCall, Option<Outcome>) {
        let plan = &self.plan;
        let mut m = MeasuredCall::new(plan.call_id(self.copy));
        if let StartAt::After {
            call,
            milestone,
            delay,
        } = plan.start
        {
            if !self.milestones.wait(call, milestone, CLIENT_LIMIT) {
                m.problems
                    .push(format!("call plan {call} never reached {milestone:?}"));
            }
            std::thread::sleep(delay);
        }
        let started = Instant::now();
        let handle = host.launch(plan.request(self.copy, self.command.clone()));
        if plan.approver.needs_approval() {
            if handle.wait_card(CLIENT_LIMIT).is_some() {
                m.time_to_card_us = Some(micros(started.elapsed()));
            } else {
                m.problems.push("no approval card was shown".into());
            }
            self.milestones.reach(self.index, Milestone::CardShown);
            let answer = match plan.approver {
                Approver::Approve { after } => {
                    std::thread::sleep(after);
                    Some(handle.approve())
                }
                Approver::Deny { after } => {
                    std::thread::sleep(after);
                    Some(handle.deny())
                }
                _ => None,
            };
            if let Some(Err(refused)) = answer {
                m.approval_refused = Some(refused.to_string());
            }
        }
        if self.watch_dispatch {
            let dispatched = wait_for(CLIENT_LIMIT, || {
                let state = handle.state();
                state == State::Dispatched || state.is_terminal()
            });
            let dispatched_at = Instant::now();
            if !dispatched {
                m.problems.push("the call never reached dispatched".into());
            }
            self.milestones.reach(self.index, Milestone::Dispatched);
            if let Some(after) = plan.cancel_after_dispatch {
                sleep_until(dispatched_at + after);
                handle.cancel();
            }
            if let Some(after) = plan.drop_after_dispatch {
                sleep_until(dispatched_at + after);
                drop(handle);
                m.handle_dropped = true;
                return (m, None);
            }
        }
        match handle.wait_timeout(CLIENT_LIMIT) {
            Ok(outcome) => (m, Some(outcome)),
            Err(handle) => {
                m.problems
                    .push(format!("no outcome within {CLIENT_LIMIT:?}"));
                handle.cancel();
                (m, None)
            }
        }
    }
}

fn sleep_until(at: Instant) {
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}
