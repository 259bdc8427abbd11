//! Admission control in virtual time: a call whose settings ask for
//! [`Admission::Queued`] waits in `queued` after it is authorized until its
//! driver admits it, and a fake driver that runs at most so many calls at
//! once admits them first in, first out. Exact states, offsets and audit
//! events.
#![allow(clippy::unwrap_used)]

mod sim;

use std::time::{Duration, SystemTime};

use sim::{Decision, Script, World, ms, spec};
use spillguard_core::Input;
use spillguard_core::{
    Admission, ApprovalDecision, AuditKind, Call, CallError, CallKind, CallSettings, CancelReason,
    Config, DisconnectPolicy, State, StreamEnd, Timer,
};

fn queued(world: &World, timeout: Duration) -> CallSettings {
    CallSettings {
        admission: Admission::Queued { timeout },
        ..CallSettings::action(&world.config)
    }
}

fn runs_for(after: Duration) -> Script {
    Script {
        exit: Some((after, 0)),
        ..Script::default()
    }
}

/// (state, offset in ms) of every mark of the timeline.
fn timeline(world: &World, lane: usize) -> Vec<(State, u64)> {
    world.lanes[lane]
        .record()
        .timeline
        .iter()
        .map(|m| (m.state, m.offset_us / 1000))
        .collect()
}

#[test]
fn approved_calls_beyond_the_running_limit_wait_queued_and_are_admitted_in_order() {
    let mut world = World::new(Config::default());
    world.max_running = Some(2);
    let mut lanes = Vec::new();
    for n in 0..4 {
        let s = queued(&world, Duration::from_secs(60));
        lanes.push(world.add(
            spec(&format!("c_{n}"), CallKind::Action),
            s,
            runs_for(ms(1000)),
            true,
            Decision::Grant(ms(100 + n)),
        ));
    }
    world.drive_bounded(10_000);

    // Cards are shown at once, whatever the queue: every card at 0.
    for &lane in &lanes {
        assert_eq!(world.lanes[lane].cards.len(), 1);
        assert_eq!(world.lanes[lane].cards[0].0, ms(0));
    }
    // The first two run as soon as they are approved; the third and the
    // fourth wait until the first and the second end (1000 ms after).
    let admitted: Vec<_> = lanes.iter().map(|&l| world.lanes[l].admitted_at).collect();
    assert_eq!(
        admitted,
        [Some(ms(100)), Some(ms(101)), Some(ms(1100)), Some(ms(1101))]
    );
    assert_eq!(world.peak_running, 2);
    assert_eq!(
        timeline(&world, lanes[2]),
        [
            (State::Received, 0),
            (State::Validated, 0),
            (State::AwaitingApproval, 0),
            (State::Queued, 102),
            (State::Authorized, 1100),
            (State::Dispatched, 1100),
            (State::Completed, 2100),
        ]
    );
    for (n, &lane) in lanes.iter().enumerate() {
        let r = world.lanes[lane].record();
        assert_eq!(r.state, State::Completed);
        assert_eq!(r.approval, ApprovalDecision::Granted);
        let queued_us = 100_000 + n as u64 * 1000;
        let admitted_us = [100_000, 101_000, 1_100_000, 1_101_000][n];
        assert_eq!(r.queued_offset_us, Some(queued_us));
        assert_eq!(r.admitted_offset_us, Some(admitted_us));
        // Admitted, it is dispatched at once.
        assert_eq!(
            r.offset_of(State::Dispatched),
            Some(Duration::from_micros(admitted_us))
        );
        assert_eq!(r.exited_offset_us, Some(admitted_us + 1_000_000));
        assert_eq!(
            world.lanes[lane].spawned_at,
            Some(Duration::from_micros(admitted_us))
        );
    }
    // Time in the queue: 0 for the first two, 998 ms and 998 ms after.
    let waited: Vec<u64> = lanes
        .iter()
        .map(|&l| {
            let r = world.lanes[l].record();
            r.admitted_offset_us.unwrap() - r.queued_offset_us.unwrap()
        })
        .collect();
    assert_eq!(waited, [0, 0, 998_000, 998_000]);

    // The audit log has both transitions, at their offsets.
    let transitions: Vec<(u64, State, State)> = world.lanes[lanes[3]]
        .audit
        .iter()
        .filter_map(|e| match e.kind {
            AuditKind::Transition { from, to } => Some((e.offset_us, from, to)),
            _ => None,
        })
        .collect();
    assert_eq!(
        transitions,
        [
            (0, State::Received, State::Validated),
            (0, State::Validated, State::AwaitingApproval),
            (103_000, State::AwaitingApproval, State::Queued),
            (1_101_000, State::Queued, State::Authorized),
            (1_101_000, State::Authorized, State::Dispatched),
            (2_101_000, State::Dispatched, State::Completed),
        ]
    );
}

#[test]
fn a_call_not_admitted_within_its_queue_timeout_ends_queue_expired_and_never_ran() {
    let mut world = World::new(Config::default());
    world.max_running = Some(1);
    let long = queued(&world, Duration::from_secs(60));
    let busy = world.add(
        spec("c_busy", CallKind::Action),
        long,
        runs_for(ms(10_000)),
        false,
        Decision::Never,
    );
    let short = queued(&world, ms(3000));
    let waiting = world.add(
        spec("c_waiting", CallKind::Action),
        short,
        runs_for(ms(10)),
        false,
        Decision::Never,
    );
    world.drive_bounded(10_000);

    assert_eq!(world.lanes[busy].record().state, State::Completed);
    let l = &world.lanes[waiting];
    let r = l.record();
    assert_eq!(r.state, State::QueueExpired);
    assert_eq!(r.state.as_str(), "queue_expired");
    assert_eq!(r.approval, ApprovalDecision::NotRequired);
    // Nothing was spawned: no pid, no streams, no exit.
    assert_eq!(l.spawned_at, None);
    assert_eq!(l.admitted_at, None);
    assert_eq!(l.helper.flooded, 0);
    assert_eq!(r.pid, None);
    assert_eq!(r.stream_end, StreamEnd::NotStarted);
    assert_eq!(r.exit_status, None);
    assert_eq!(r.exited_offset_us, None);
    assert_eq!(r.offset_of(State::Dispatched), None);
    assert_eq!(r.queued_offset_us, Some(0));
    assert_eq!(r.admitted_offset_us, None);
    assert_eq!(
        timeline(&world, waiting),
        [
            (State::Received, 0),
            (State::Validated, 0),
            (State::Queued, 0),
            (State::QueueExpired, 3000),
        ]
    );
    assert_eq!(world.count(waiting, "Spawn"), 0);
    assert_eq!(
        world.first(waiting, "Finished(queue_expired)"),
        Some(ms(3000))
    );
}

#[test]
fn a_cancel_while_queued_ends_the_call_before_dispatch() {
    let mut world = World::new(Config::default());
    world.max_running = Some(1);
    let s = queued(&world, Duration::from_secs(60));
    let busy = world.add(
        spec("c_busy", CallKind::Action),
        s,
        runs_for(ms(2000)),
        false,
        Decision::Never,
    );
    let s = queued(&world, Duration::from_secs(60));
    let waiting = world.add(
        spec("c_waiting", CallKind::Action),
        s,
        runs_for(ms(10)),
        true,
        Decision::Grant(ms(200)),
    );
    world.lanes[waiting].cancel_at = Some(ms(700));
    world.drive_bounded(10_000);

    assert_eq!(world.lanes[busy].record().state, State::Completed);
    let l = &world.lanes[waiting];
    let r = l.record();
    assert_eq!(r.state, State::CancelledBeforeDispatch);
    assert_eq!(r.cancel_reason, Some(CancelReason::Requested));
    assert_eq!(r.cancel_offset_us, Some(700_000));
    assert_eq!(r.approval, ApprovalDecision::Granted);
    assert_eq!(r.queued_offset_us, Some(200_000));
    assert_eq!(r.admitted_offset_us, None);
    assert_eq!(r.pid, None);
    assert_eq!(l.spawned_at, None);
    assert_eq!(
        timeline(&world, waiting),
        [
            (State::Received, 0),
            (State::Validated, 0),
            (State::AwaitingApproval, 0),
            (State::Queued, 200),
            (State::CancelledBeforeDispatch, 700),
        ]
    );
    // The slot the busy call frees at 2000 ms finds nobody to admit.
    assert_eq!(world.count(waiting, "Spawn"), 0);
}

#[test]
fn a_client_disconnect_while_queued_cancels_under_either_policy() {
    for policy in [DisconnectPolicy::Finish, DisconnectPolicy::Cancel] {
        let mut world = World::new(Config::default());
        world.max_running = Some(1);
        let mut s = queued(&world, Duration::from_secs(60));
        s.on_client_disconnect = policy;
        let busy = world.add(
            spec("c_busy", CallKind::Action),
            s.clone(),
            runs_for(ms(2000)),
            false,
            Decision::Never,
        );
        let waiting = world.add(
            spec("c_waiting", CallKind::Action),
            s,
            runs_for(ms(10)),
            false,
            Decision::Never,
        );
        world.lanes[waiting].disconnect_at = Some(ms(400));
        world.drive_bounded(10_000);

        assert_eq!(world.lanes[busy].record().state, State::Completed);
        let r = world.lanes[waiting].record();
        assert_eq!(r.state, State::CancelledBeforeDispatch, "{policy:?}");
        assert_eq!(r.cancel_reason, Some(CancelReason::ClientDisconnected));
        assert_eq!(r.cancel_offset_us, Some(400_000));
        assert!(r.client_disconnected);
        assert_eq!(r.pid, None);
    }
}

#[test]
fn an_audit_failure_while_queued_fails_closed_before_dispatch() {
    let mut world = World::new(Config::default());
    world.max_running = Some(1);
    let s = queued(&world, Duration::from_secs(60));
    let busy = world.add(
        spec("c_busy", CallKind::Action),
        s.clone(),
        runs_for(ms(2000)),
        false,
        Decision::Never,
    );
    let waiting = world.add(
        spec("c_waiting", CallKind::Action),
        s,
        runs_for(ms(10)),
        false,
        Decision::Never,
    );
    // Its validation and attempt are written; its entry into `queued` is
    // not: an action whose way to dispatch is not on record does not run.
    world.lanes[waiting].audit_fails_after = Some(2);
    world.drive_bounded(10_000);

    assert_eq!(world.lanes[busy].record().state, State::Completed);
    let r = world.lanes[waiting].record();
    assert_eq!(r.state, State::FailedBeforeDispatch);
    assert_eq!(r.failure.as_deref(), Some("audit log: disk full"));
    assert_eq!(r.pid, None);
    assert_eq!(world.lanes[waiting].spawned_at, None);
    assert_eq!(world.lanes[waiting].admitted_at, None);
    assert_eq!(
        timeline(&world, waiting),
        [
            (State::Received, 0),
            (State::Validated, 0),
            (State::Queued, 0),
            (State::FailedBeforeDispatch, 0),
        ]
    );
}

fn bare_call(settings: CallSettings) -> (Call, std::time::Instant) {
    let config = Config::default();
    let pool = spillguard_core::RetentionPool::new(config.stderr_retained_process_bytes);
    #[allow(clippy::disallowed_methods)]
    let t0 = std::time::Instant::now();
    let call = Call::new(
        spec("c_bare", CallKind::Action),
        settings,
        &pool,
        t0,
        SystemTime::UNIX_EPOCH,
    );
    (call, t0)
}

#[test]
fn admission_is_a_caller_error_unless_the_call_is_queued_and_ignored_once_it_ended() {
    // Without admission an authorized call never waits: admitting it is a
    // misuse that changes nothing.
    let (mut call, t0) = bare_call(CallSettings::action(&Config::default()));
    call.handle(
        t0,
        Input::Validated {
            needs_approval: false,
        },
    )
    .unwrap();
    while call.poll_action().is_some() {}
    assert_eq!(call.state(), State::Authorized);
    assert_eq!(
        call.handle(t0, Input::Admitted),
        Err(CallError::InvalidTransition {
            state: State::Authorized,
            input: "admitted",
        })
    );
    assert_eq!(call.state(), State::Authorized);

    // Before approval, too early.
    let settings = CallSettings {
        admission: Admission::Queued { timeout: ms(500) },
        ..CallSettings::action(&Config::default())
    };
    let (mut call, t0) = bare_call(settings);
    call.handle(
        t0,
        Input::Validated {
            needs_approval: true,
        },
    )
    .unwrap();
    while call.poll_action().is_some() {}
    assert_eq!(
        call.handle(t0, Input::Admitted),
        Err(CallError::InvalidTransition {
            state: State::AwaitingApproval,
            input: "admitted",
        })
    );
    // Approved: queued, with the queue deadline armed 500 ms from then.
    call.handle(t0 + ms(20), Input::ApprovalGranted).unwrap();
    while call.poll_action().is_some() {}
    assert_eq!(call.state(), State::Queued);
    assert_eq!(call.poll_timeout(), Some(t0 + ms(520)));
    // Called early, the timeout changes nothing.
    let _ = call.handle(t0 + ms(519), Input::Timeout);
    assert_eq!(call.state(), State::Queued);
    let _ = call.handle(t0 + ms(520), Input::Timeout);
    assert_eq!(call.state(), State::QueueExpired);
    // A late admission finds it ended: absorbed.
    assert_eq!(call.handle(t0 + ms(600), Input::Admitted), Ok(()));
    assert_eq!(call.state(), State::QueueExpired);
    let spawned = std::iter::from_fn(|| call.poll_action())
        .any(|a| matches!(a, spillguard_core::Action::Spawn(_)));
    assert!(!spawned);
    assert_eq!(Timer::ALL[1], Timer::QueueDeadline);
}
