//! `Action::name` gives every action its entry in `Action::NAMES`: a call
//! driven through a stop that needs SIGKILL and abandons a stream held by a
//! descendant asks for every kind of action, and each names itself.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use spillguard_core::Input;
use spillguard_core::{
    Action, Call, CallKind, CallSettings, CallSpec, CancelReason, Config, ExitStatus,
    RetentionPool, State,
};

#[test]
fn every_action_names_itself_from_names() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let spec = CallSpec {
        call_id: "c_names".into(),
        session_id: "s_1".into(),
        kind: CallKind::Action,
        action: "build".into(),
        target: "ci".into(),
        summary: "make".into(),
        card_lines: Vec::new(),
    };
    #[allow(clippy::disallowed_methods)]
    let t0 = Instant::now();
    let mut call = Call::new(
        spec,
        CallSettings::action(&config),
        &pool,
        t0,
        SystemTime::UNIX_EPOCH,
    );
    let mut names = Vec::new();
    let mut drain = |call: &mut Call| {
        while let Some(action) = call.poll_action() {
            names.push(action.name());
        }
    };

    call.handle(
        t0,
        Input::Validated {
            needs_approval: true,
        },
    )
    .unwrap();
    drain(&mut call);
    call.handle(t0, Input::ApprovalGranted).unwrap();
    drain(&mut call);
    call.handle(t0, Input::Spawned { pid: 4242 }).unwrap();
    // A stop: stdin closed, TERM to the group.
    let _ = call.handle(t0, Input::Cancel(CancelReason::Requested));
    drain(&mut call);
    // The helper ignores TERM: KILL at the grace, then a descendant still
    // holds both streams past the kill wait, and they are abandoned.
    let later = t0 + Duration::from_secs(60);
    let _ = call.handle(later, Input::Timeout);
    drain(&mut call);
    call.handle(later, Input::Exited(ExitStatus::signal(9)))
        .unwrap();
    let _ = call.handle(later + Duration::from_secs(60), Input::Timeout);
    drain(&mut call);
    assert_eq!(call.state(), State::Killed);

    let seen: BTreeSet<&str> = names.iter().copied().collect();
    let all: BTreeSet<&str> = Action::NAMES.into_iter().collect();
    assert_eq!(seen, all);
    assert_eq!(all.len(), Action::NAMES.len());
    assert_eq!(names.last(), Some(&"finished"));
}
