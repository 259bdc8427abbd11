//! With `deadline_from_delivery`, the approval deadline runs from the
//! card's delivery (`Input::CardDelivered`), fixed once; without
//! it, from the show. Virtual time: every instant is `t0` plus an offset.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant, SystemTime};

use spillguard_core::Input;
use spillguard_core::{
    Action, ApprovalDecision, Call, CallKind, CallSettings, CallSpec, Config, Outcome,
    RetentionPool, State,
};

/// The tests' time origin; every later instant is an offset from it.
#[allow(clippy::disallowed_methods)]
fn epoch() -> Instant {
    Instant::now()
}

fn spec() -> CallSpec {
    CallSpec {
        call_id: "c_card".into(),
        session_id: "s_card".into(),
        kind: CallKind::Action,
        action: "deploy".into(),
        target: "web-3".into(),
        summary: "deploy web-3".into(),
        card_lines: Vec::new(),
    }
}

/// A call awaiting approval since `t0`, with a 5 s approval timeout,
/// whose driver reports deliveries (`from_delivery`) or not.
fn awaiting(t0: Instant, pool: &RetentionPool, from_delivery: bool) -> Call {
    let config = Config::default();
    let mut settings = CallSettings::action(&config);
    settings.approval_timeout = Duration::from_secs(5);
    settings.deadline_from_delivery = from_delivery;
    let mut call = Call::new(spec(), settings, pool, t0, SystemTime::UNIX_EPOCH);
    call.handle(
        t0,
        Input::Validated {
            needs_approval: true,
        },
    )
    .unwrap();
    while call.poll_action().is_some() {}
    assert_eq!(call.state(), State::AwaitingApproval);
    call
}

fn outcome(call: &mut Call) -> Option<Box<Outcome>> {
    let mut finished = None;
    while let Some(action) = call.poll_action() {
        if let Action::Finished(outcome) = action {
            finished = Some(outcome);
        }
    }
    finished
}

#[test]
fn a_card_delivered_late_gets_the_whole_timeout_from_its_delivery() {
    let t0 = epoch();
    let pool = RetentionPool::unlimited();
    let mut call = awaiting(t0, &pool, true);
    // On its way, the card has no deadline yet.
    assert_eq!(call.poll_timeout(), None);
    // Written to the approver 3 s after it was shown (a busy server).
    let _ = call.handle(t0 + Duration::from_secs(3), Input::CardDelivered);
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(8)));
    // A second report moves nothing.
    let _ = call.handle(t0 + Duration::from_secs(4), Input::CardDelivered);
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(8)));
    // 5 s after the show, the card is still up.
    let _ = call.handle(t0 + Duration::from_secs(5), Input::Timeout);
    assert_eq!(call.state(), State::AwaitingApproval);
    // Approved 4.9 s after its delivery: it runs.
    call.handle(t0 + Duration::from_millis(7_900), Input::ApprovalGranted)
        .unwrap();
    assert_eq!(call.state(), State::Authorized);
    let _ = call.handle(
        t0 + Duration::from_secs(8),
        Input::Cancel(spillguard_core::CancelReason::Requested),
    );
    let record = outcome(&mut call).unwrap().record;
    assert_eq!(record.card_delivered_offset_us, Some(3_000_000));
    assert_eq!(record.approval, ApprovalDecision::Granted);
}

#[test]
fn a_card_delivered_late_and_left_unanswered_expires_its_timeout_after_delivery() {
    let t0 = epoch();
    let pool = RetentionPool::unlimited();
    let mut call = awaiting(t0, &pool, true);
    let _ = call.handle(t0 + Duration::from_secs(2), Input::CardDelivered);
    let _ = call.handle(t0 + Duration::from_millis(6_999), Input::Timeout);
    assert_eq!(call.state(), State::AwaitingApproval);
    let _ = call.handle(t0 + Duration::from_secs(7), Input::Timeout);
    let record = outcome(&mut call).unwrap().record;
    assert_eq!(record.state, State::ApprovalExpired);
    assert_eq!(
        record.offset_of(State::ApprovalExpired),
        Some(Duration::from_secs(7))
    );
    assert_eq!(record.card_delivered_offset_us, Some(2_000_000));
}

#[test]
fn without_delivery_reports_the_deadline_runs_from_the_show_and_stays() {
    let t0 = epoch();
    let pool = RetentionPool::unlimited();
    let mut call = awaiting(t0, &pool, false);
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    // A report is noted, and moves nothing.
    let _ = call.handle(t0 + Duration::from_secs(3), Input::CardDelivered);
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    let _ = call.handle(t0 + Duration::from_secs(5), Input::Timeout);
    let record = outcome(&mut call).unwrap().record;
    assert_eq!(record.state, State::ApprovalExpired);
    assert_eq!(
        record.offset_of(State::ApprovalExpired),
        Some(Duration::from_secs(5))
    );
    assert_eq!(record.card_delivered_offset_us, Some(3_000_000));
}

#[test]
fn a_card_never_delivered_never_expires_unseen() {
    let t0 = epoch();
    let pool = RetentionPool::unlimited();
    let mut call = awaiting(t0, &pool, true);
    let _ = call.handle(t0 + Duration::from_secs(3600), Input::Timeout);
    assert_eq!(call.state(), State::AwaitingApproval);
    assert_eq!(call.poll_timeout(), None);
    // The approver's side going away ends it.
    let _ = call.handle(t0 + Duration::from_secs(3601), Input::ClientDisconnected);
    let record = outcome(&mut call).unwrap().record;
    assert_eq!(record.state, State::CancelledBeforeDispatch);
    assert_eq!(record.card_delivered_offset_us, None);
}

#[test]
fn a_delivery_reported_outside_the_approval_wait_changes_nothing() {
    let t0 = epoch();
    let pool = RetentionPool::unlimited();
    // Before the card: a call that needs no approval.
    let config = Config::default();
    let mut call = Call::new(
        spec(),
        CallSettings::action(&config),
        &pool,
        t0,
        SystemTime::UNIX_EPOCH,
    );
    let _ = call.handle(t0, Input::CardDelivered);
    call.handle(
        t0,
        Input::Validated {
            needs_approval: false,
        },
    )
    .unwrap();
    let _ = call.handle(t0 + Duration::from_secs(1), Input::CardDelivered);
    assert_eq!(call.state(), State::Authorized);
    let _ = call.handle(
        t0 + Duration::from_secs(1),
        Input::Cancel(spillguard_core::CancelReason::Requested),
    );
    let record = outcome(&mut call).unwrap().record;
    assert_eq!(record.card_delivered_offset_us, None);
    assert_eq!(record.state, State::CancelledBeforeDispatch);
}
