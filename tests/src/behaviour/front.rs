//! The front door: the builder's defaults, debug grants, dropping a host
//! with live calls, and an owner that dies mid-call.
#![allow(clippy::unwrap_used)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use spillguard_core::{
    AuditEvent, AuditKind, CallKind, CancelReason, DebugGrantError, Exit, State,
};
use spillguard_kit::{Approval, AuditSink, HelperCommand, HostOptions};

use super::{Recorder, assert_group_gone, poll_until, records_of, temp_path, wait, wait_for_state};
use crate::engine::{CallUnderTest, HostUnderTest, request};

/// The builder fills in every field of the call from the command: a fresh
/// id per call, the host's session, the program's file name as action, the
/// program as target, and the shell-quoted command line as the card's
/// summary, so the card shows exactly what runs.
pub fn the_builder_fills_every_field_from_the_command<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions {
        session_id: Some("s_front".into()),
        ..HostOptions::default()
    });
    let echo = HelperCommand::new("/bin/echo").args(["it's", "two words"]);
    let call = host.launch(request(echo).approval(Approval::Required).start());
    let card = call.wait_card(Duration::from_secs(10)).unwrap();
    assert_eq!(card.action, "echo");
    assert_eq!(card.target, "/bin/echo");
    assert_eq!(card.summary, r"/bin/echo 'it'\''s' 'two words'");
    call.approve().unwrap();
    let first = wait(call);
    let second = wait(host.launch(request(HelperCommand::new("true")).start()));
    let record = &first.record;
    assert_eq!(record.call_id, card.call_id);
    assert!(record.call_id.starts_with("c_"), "{}", record.call_id);
    assert_eq!(record.call_id.len(), 18);
    assert_ne!(record.call_id, second.record.call_id);
    assert_eq!(record.session_id, "s_front");
    assert_eq!(second.record.session_id, "s_front");
    assert_eq!(
        (record.kind, record.action.as_str()),
        (CallKind::Action, "echo")
    );
    assert_eq!(first.stdout.to_vec(), b"it's two words\n");
    assert_eq!(first.exit(), Exit::Code(0));
    assert_eq!(second.record.action, "true");
}

/// A debug grant raises the stderr budget of the calls started under it,
/// within the configured ceiling, and they say `debug: true`; calls after
/// it is revoked keep the normal budget and say `debug: false`.
pub fn a_debug_grant_raises_the_budget_of_calls_started_under_it<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let flood = || HelperCommand::shell_script("head -c 200000 /dev/zero | tr '\\0' x 1>&2");
    assert_eq!(
        host.grant_debug(Duration::from_secs(60), 2 << 20),
        Err(DebugGrantError::AboveCeiling {
            asked: 2 << 20,
            ceiling: 1 << 20
        })
    );
    let normal = wait(host.launch(request(flood()).start()));
    host.grant_debug(Duration::from_secs(60), 65_536).unwrap();
    let debugged = wait(host.launch(request(flood()).start()));
    host.revoke_debug();
    let after = wait(host.launch(request(flood()).start()));
    let facts = |o: &spillguard_core::Outcome| {
        (
            o.record.debug,
            o.record.stderr_bytes_seen,
            o.record.stderr_bytes_retained,
        )
    };
    assert_eq!(facts(&normal), (false, 200_000, 16_384));
    assert_eq!(facts(&debugged), (true, 200_000, 65_536));
    assert_eq!(facts(&after), (false, 200_000, 16_384));
    let marker = "[stderr truncated: kept last 65536 of 200000 bytes]";
    assert_eq!(debugged.stderr.render().lines().next(), Some(marker));
}

/// Dropping the host (its last clone) with live calls cancels each: TERM
/// to its group, and every owner still finishes its call and writes its
/// record; no helper is left.
pub fn dropping_the_host_stops_its_helpers_and_writes_their_records<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let recorder = Arc::new(Recorder::default());
    let host = host(HostOptions {
        audit: Some(recorder.clone()),
        ..HostOptions::default()
    });
    let calls: Vec<_> = (0..3)
        .map(|i| {
            let sleep = HelperCommand::new("sleep").arg("30");
            host.launch(request(sleep).call_id(format!("c_dropped_{i}")).start())
        })
        .collect();
    for call in &calls {
        wait_for_state(call, State::Dispatched);
    }
    let runtime = host.drop_host();
    for (i, call) in calls.into_iter().enumerate() {
        let outcome = wait(call);
        let record = &outcome.record;
        assert_eq!(record.call_id, format!("c_dropped_{i}"));
        assert_eq!(record.state, State::CancelledAfterDispatch);
        assert_eq!(record.cancel_reason, Some(CancelReason::HostShutdown));
        assert_eq!(outcome.exit(), Exit::Signal(15));
        assert_group_gone(record.pgid.unwrap());
        let kinds = recorder.kinds(&record.call_id);
        assert_eq!(kinds.last().map(String::as_str), Some("final"));
    }
    drop(runtime);
}

/// Panics when the helper is dispatched: a bug in a sink, standing for any
/// bug that ends an owner mid-call.
#[derive(Debug)]
struct PanicsAtDispatch;

impl AuditSink for PanicsAtDispatch {
    fn write(&self, event: &AuditEvent) -> std::io::Result<()> {
        if matches!(
            event.kind,
            AuditKind::Transition {
                to: State::Dispatched,
                ..
            }
        ) {
            panic!("audit sink bug at dispatch");
        }
        Ok(())
    }
}

/// An owner that ends while its helper runs (here it panics) kills the
/// helper's group and lets go of the call: the same policy on every
/// runtime. Waiting reports the owner's end, the host no longer counts the
/// call, and no helper is left running unsupervised.
pub fn an_owner_that_dies_mid_call_kills_its_helper_and_lets_go<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions {
        audit: Some(Arc::new(PanicsAtDispatch)),
        ..HostOptions::default()
    });
    let pid_file = temp_path("owner-dies.pid");
    let _ = std::fs::remove_file(&pid_file);
    let script = format!("echo $$ > '{}'; exec sleep 30", pid_file.display());
    let call = host.launch(
        request(HelperCommand::shell_script(script))
            .call_id("c_owner_dies")
            .start(),
    );
    let waited = catch_unwind(AssertUnwindSafe(|| {
        call.wait_timeout(Duration::from_secs(30)).is_ok()
    }));
    assert!(waited.is_err(), "waiting must report the owner's end");
    poll_until(Duration::from_secs(10), "the call to be let go of", || {
        host.live_calls() == 0
    });
    assert_eq!(records_of(&host, "c_owner_dies"), 0);
    let mut pid = None;
    poll_until(Duration::from_secs(10), "the helper's pid", || {
        pid = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok());
        pid.is_some()
    });
    let _ = std::fs::remove_file(&pid_file);
    assert_group_gone(pid.unwrap());
}
