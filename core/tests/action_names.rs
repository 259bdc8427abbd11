//! `Action::name` gives every action its entry in `Action::NAMES`: a call
//! driven through a stop that needs SIGKILL and abandons a stream held by a
//! descendant asks for every kind of action, and each names itself.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

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

    call.handle_validated(t0, true).unwrap();
    drain(&mut call);
    call.handle_approval_granted(t0).unwrap();
    drain(&mut call);
    call.handle_spawned(t0, 4242).unwrap();
    // A stop: stdin closed, TERM to the group.
    call.handle_cancel(t0, CancelReason::Requested);
    drain(&mut call);
    // The helper ignores TERM: KILL at the grace, then a descendant still
    // holds both streams past the kill wait, and they are abandoned.
    let later = t0 + Duration::from_secs(60);
    call.handle_timeout(later);
    drain(&mut call);
    call.handle_exit(later, ExitStatus::signal(9)).unwrap();
    call.handle_timeout(later + Duration::from_secs(60));
    drain(&mut call);
    assert_eq!(call.state(), State::Killed);

    let seen: BTreeSet<&str> = names.iter().copied().collect();
    let all: BTreeSet<&str> = Action::NAMES.into_iter().collect();
    assert_eq!(seen, all);
    assert_eq!(all.len(), Action::NAMES.len());
    assert_eq!(names.last(), Some(&"finished"));
}
