//! Approval answered, denied or left to expire, and the discovery call
//! that never needs it.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use spillguard_core::{ApprovalDecision, CallError, CallKind, State, StreamEnd};
use spillguard_std::{Approval, HelperCommand, HostOptions};

use super::{MS, Recorder, states, temp_path, timed_check_turn, us, wait};
use crate::engine::{CallUnderTest, HostUnderTest, request};

/// A denied call shows its card once, refuses a second answer, spawns
/// nothing, and audits its lifecycle in order.
pub fn a_denied_call_shows_its_card_once_and_spawns_nothing<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let trace = temp_path("denied-ran");
    let _ = std::fs::remove_file(&trace);
    let command = HelperCommand::shell_script(format!("touch '{}'", trace.display()));
    let call = host.launch(
        request(command)
            .call_id("c_denied")
            .action("local.test")
            .target("localhost")
            .summary("test helper")
            .approval(Approval::Required)
            .into_request(),
    );

    let card = call.wait_card(Duration::from_secs(10)).unwrap();
    assert_eq!(card.call_id, "c_denied");
    assert_eq!(card.action, "local.test");
    assert_eq!(card.target, "localhost");
    assert_eq!(card.summary, "test helper");
    assert_eq!(card.expires_in, Duration::from_secs(120));
    assert_eq!(call.state(), State::AwaitingApproval);
    assert_eq!(
        card.text,
        "action: local.test\ntarget: localhost\nsummary: test helper\n\
         approval expires: 120000 ms after it is shown"
    );
    let shown = card.text.clone();
    assert_eq!(call.card(), Some(card));

    assert_eq!(call.deny(), Ok(()));
    assert_eq!(
        call.deny(),
        Err(CallError::InvalidTransition {
            state: State::Denied,
            input: "approval_denied"
        })
    );
    let outcome = wait(call);
    let record = &outcome.record;
    assert_eq!(record.state, State::Denied);
    assert_eq!(record.approval, ApprovalDecision::Denied);
    assert_eq!((record.pid, record.pgid), (None, None));
    assert_eq!(record.stream_end, StreamEnd::NotStarted);
    assert_eq!(
        states(record),
        [
            State::Received,
            State::Validated,
            State::AwaitingApproval,
            State::Denied
        ]
    );
    assert!(!trace.exists());
    assert_eq!(
        recorder.kinds("c_denied"),
        [
            "transition:received->validated",
            "attempt",
            "transition:validated->awaiting_approval",
            "card_shown",
            "transition:awaiting_approval->denied",
            "final"
        ]
    );
    // The log keeps the card as the approver got it, byte for byte.
    assert_eq!(recorder.card("c_denied"), Some(shown));
}

/// An approved call runs its helper to completion.
pub fn an_approved_call_runs_its_helper<H: HostUnderTest>(host: fn(HostOptions) -> H) {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("echo approved");
    let call = host.launch(
        request(command)
            .call_id("c_approved")
            .approval(Approval::Required)
            .into_request(),
    );
    assert!(call.wait_card(Duration::from_secs(10)).is_some());
    assert_eq!(call.approve(), Ok(()));
    let outcome = wait(call);
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.approval, ApprovalDecision::Granted);
    assert_eq!(record.exit_status, Some(0));
    assert_eq!(outcome.stdout.to_vec(), b"approved\n");
    assert_eq!(
        states(record),
        [
            State::Received,
            State::Validated,
            State::AwaitingApproval,
            State::Authorized,
            State::Dispatched,
            State::Completed
        ]
    );
}

/// A card nobody answers expires 100 ms after it was shown.
pub fn an_unanswered_card_expires<H: HostUnderTest>(host: fn(HostOptions) -> H) {
    let _turn = timed_check_turn();
    let host = host(HostOptions {
        approval_timeout: Some(100 * MS),
        ..HostOptions::default()
    });
    let call = host.launch(
        request(HelperCommand::new("true"))
            .call_id("c_expired")
            .approval(Approval::Required)
            .into_request(),
    );
    let outcome = wait(call);
    assert_eq!(outcome.record.state, State::ApprovalExpired);
    assert_eq!(outcome.record.approval, ApprovalDecision::Expired);
    assert_eq!(outcome.record.pid, None);
    let shown = us(outcome.record.offset_of(State::AwaitingApproval).unwrap());
    let expired = us(outcome.record.offset_of(State::ApprovalExpired).unwrap());
    assert!(expired - shown >= us(100 * MS), "{}", expired - shown);
    assert!(expired - shown <= us(300 * MS), "{}", expired - shown);
}

/// A discovery keeps 4 KiB of stderr, audits no attempt, and can never
/// need approval.
pub fn a_discovery_call_has_its_own_budget_and_no_attempt<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script("head -c 100000 /dev/zero 1>&2; echo web-3");
    let outcome = wait(
        host.launch(
            request(command)
                .call_id("c_discovery")
                .discovery()
                .into_request(),
        ),
    );
    assert_eq!(outcome.record.kind, CallKind::Discovery);
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.stderr_bytes_seen, 100_000);
    assert_eq!(outcome.record.stderr_bytes_retained, 4096);
    assert_eq!(outcome.stdout.to_vec(), b"web-3\n");
    assert!(
        !recorder
            .kinds("c_discovery")
            .contains(&"attempt".to_owned())
    );

    // A discovery never acts, so it can never need approval.
    let asked = wait(
        host.launch(
            request(HelperCommand::new("true"))
                .call_id("c_discovery_approval")
                .discovery()
                .approval(Approval::Required)
                .into_request(),
        ),
    );
    assert_eq!(asked.record.kind, CallKind::Discovery);
    assert_eq!(asked.record.state, State::FailedBeforeDispatch);
    assert_eq!(
        asked.record.failure.as_deref(),
        Some("a discovery call cannot need approval: it never acts")
    );
}
