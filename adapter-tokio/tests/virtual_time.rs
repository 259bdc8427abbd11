//! Calls that never spawn a process, driven by tokio's paused clock: the
//! owner reads tokio's clock, so approval deadlines, cancels and waits are
//! checked to the microsecond of virtual time.
#![allow(clippy::unwrap_used)]

// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;

use spillguard_tokio::Approval;
use std::time::Duration;

use spillguard_tokio::proto::{ApprovalDecision, CallError, CancelReason, Config, State};
use spillguard_tokio::{HelperCommand, Host, HostOptions};

use tokio::time::Instant;

const SECOND: Duration = Duration::from_secs(1);

fn host() -> Host {
    Host::new(Config::default(), HostOptions::default()).unwrap()
}

fn command() -> HelperCommand {
    HelperCommand::new("true")
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_card_expires_after_exactly_its_timeout() {
    let host = host();
    let t0 = Instant::now();
    let call = host
        .call(command())
        .call_id("c_expiry")
        .approval(Approval::Required)
        .start();
    let card = call.wait_card(10 * SECOND).await.unwrap();
    assert_eq!(t0.elapsed(), Duration::ZERO, "the card is shown at once");
    assert_eq!(card.expires_in, 120 * SECOND);

    let outcome = call.wait().await;
    assert_eq!(t0.elapsed(), 120 * SECOND);
    let record = &outcome.record;
    assert_eq!(record.state, State::ApprovalExpired);
    assert_eq!(record.approval, ApprovalDecision::Expired);
    assert_eq!(
        record.offset_of(State::AwaitingApproval),
        Some(Duration::ZERO)
    );
    assert_eq!(record.offset_of(State::ApprovalExpired), Some(120 * SECOND));
    assert_eq!((record.pid, record.exit_status), (None, None));
}

#[tokio::test(start_paused = true)]
async fn an_answer_after_expiry_is_refused_with_the_state_it_met() {
    let host = host();
    let call = host
        .call(command())
        .call_id("c_late_answer")
        .approval(Approval::Required)
        .start();
    tokio::time::sleep(121 * SECOND).await;
    assert_eq!(call.state(), State::ApprovalExpired);
    assert_eq!(
        call.approve().await,
        Err(CallError::InvalidTransition {
            state: State::ApprovalExpired,
            input: "approval_granted"
        })
    );
    assert_eq!(call.wait().await.record.state, State::ApprovalExpired);
}

#[tokio::test(start_paused = true)]
async fn a_cancel_while_awaiting_approval_ends_the_call_at_that_instant() {
    let host = host();
    let t0 = Instant::now();
    let call = host
        .call(command())
        .call_id("c_cancel_card")
        .approval(Approval::Required)
        .start();
    tokio::time::sleep(45 * SECOND).await;
    call.cancel();
    let outcome = call.wait().await;
    assert_eq!(t0.elapsed(), 45 * SECOND);
    let record = &outcome.record;
    assert_eq!(record.state, State::CancelledBeforeDispatch);
    assert_eq!(record.cancel_reason, Some(CancelReason::Requested));
    assert_eq!(record.cancel_offset_us, Some(45_000_000));
    assert_eq!(
        record.offset_of(State::CancelledBeforeDispatch),
        Some(45 * SECOND)
    );
}

#[tokio::test(start_paused = true)]
async fn a_denial_is_recorded_at_the_instant_it_was_given() {
    let host = host();
    let call = host
        .call(command())
        .call_id("c_deny_late")
        .approval(Approval::Required)
        .start();
    tokio::time::sleep(119 * SECOND).await;
    assert_eq!(call.deny().await, Ok(()));
    let record = call.wait().await.record;
    assert_eq!(record.state, State::Denied);
    assert_eq!(record.offset_of(State::Denied), Some(119 * SECOND));
}

#[tokio::test(start_paused = true)]
async fn wait_timeout_gives_the_handle_back_after_exactly_its_timeout() {
    let host = host();
    let t0 = Instant::now();
    let call = host
        .call(command())
        .call_id("c_wait_timeout")
        .approval(Approval::Required)
        .start();
    let call = call.wait_timeout(30 * SECOND).await.unwrap_err();
    assert_eq!(t0.elapsed(), 30 * SECOND);
    assert_eq!(call.state(), State::AwaitingApproval);
    assert!(!call.is_finished());
    let outcome = call.wait_timeout(300 * SECOND).await.unwrap();
    assert_eq!(t0.elapsed(), 120 * SECOND);
    assert_eq!(outcome.record.state, State::ApprovalExpired);
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_a_call_awaiting_approval_without_waiting() {
    let host = host();
    let t0 = Instant::now();
    let call = host
        .call(command())
        .call_id("c_shutdown_card")
        .approval(Approval::Required)
        .start();
    assert!(call.wait_card(SECOND).await.is_some());
    let report = host.shutdown_and_wait(10 * SECOND).await;
    assert_eq!((report.finished, report.unfinished), (1, 0));
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert_eq!(host.live_calls(), 0);
    let record = call.try_outcome().unwrap().record;
    assert_eq!(record.state, State::CancelledBeforeDispatch);
    assert_eq!(record.cancel_reason, Some(CancelReason::HostShutdown));
    assert_eq!(host.finished_records(), [record]);
}

#[tokio::test(start_paused = true)]
async fn a_handle_dropped_while_its_card_is_shown_cancels_the_call_at_once() {
    let host = host();
    let t0 = Instant::now();
    let call = host
        .call(command())
        .call_id("c_drop_card")
        .approval(Approval::Required)
        .start();
    assert!(call.wait_card(SECOND).await.is_some());
    drop(call);
    // Nobody is left to answer the card, under the finish policy too: the
    // call does not wait two minutes for it to expire.
    while host.live_calls() > 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(
        t0.elapsed() <= Duration::from_millis(5),
        "{:?}",
        t0.elapsed()
    );
    let records = host.finished_records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].state, State::CancelledBeforeDispatch);
    assert_eq!(
        records[0].cancel_reason,
        Some(CancelReason::ClientDisconnected)
    );
    assert!(records[0].client_disconnected);
    assert_eq!(records[0].pid, None);
}

/// `wait_finished` returns when the call ends and leaves the outcome in
/// the handle; `wait_idle` returns when the last live call has ended.
#[tokio::test(start_paused = true)]
async fn wait_finished_and_wait_idle_return_at_each_end() {
    let host = host();
    let t0 = Instant::now();
    let card = |id: &str, timeout: Duration| {
        host.call(command())
            .call_id(id)
            .approval(Approval::Required)
            .approval_timeout(timeout)
            .start()
    };
    let short = card("c_short", SECOND);
    let long = card("c_long", 3 * SECOND);
    assert_eq!(host.live_calls(), 2);
    short.wait_finished().await;
    assert_eq!(t0.elapsed(), SECOND);
    assert!(short.is_finished());
    assert_eq!(host.live_calls(), 1);
    // Waiting again returns at once.
    short.wait_finished().await;
    assert_eq!(t0.elapsed(), SECOND);
    let outcome = short.try_outcome().unwrap();
    assert_eq!(outcome.record.state, State::ApprovalExpired);

    host.wait_idle().await;
    assert_eq!(t0.elapsed(), 3 * SECOND);
    assert_eq!(host.live_calls(), 0);
    assert_eq!(
        long.try_outcome().unwrap().record.state,
        State::ApprovalExpired
    );
    // Idle already: at once.
    host.wait_idle().await;
    assert_eq!(t0.elapsed(), 3 * SECOND);
}
