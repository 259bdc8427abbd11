//! Debug mode: bounded in time and size, recorded on every call it
//! touched, and never a quiet switch.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant, SystemTime};

use spillguard_core::Input;
use spillguard_core::{
    Action, CUT_MARGIN, Call, CallKind, CallSettings, CallSpec, CaptureSettings, Config,
    DebugGrant, DebugGrantError, ExitStatus, RetentionPool,
};

#[allow(clippy::disallowed_methods)]
fn epoch() -> Instant {
    Instant::now()
}

#[test]
fn a_grant_is_refused_above_the_ceiling_or_outside_its_duration_limits() {
    let config = Config::default();
    let now = epoch();
    assert_eq!(
        DebugGrant::new(&config, now, Duration::from_secs(60), 2 << 20),
        Err(DebugGrantError::AboveCeiling {
            asked: 2 << 20,
            ceiling: 1 << 20
        })
    );
    assert_eq!(
        DebugGrant::new(&config, now, Duration::ZERO, 1000),
        Err(DebugGrantError::Duration(Duration::ZERO))
    );
    let too_long = Duration::from_secs(3601);
    assert_eq!(
        DebugGrant::new(&config, now, too_long, 1000)
            .unwrap_err()
            .to_string(),
        "debug grant duration 3601.000 s must be above zero and at most 3600 s"
    );
    let grant = DebugGrant::new(&config, now, Duration::from_secs(60), 1 << 20).unwrap();
    assert_eq!(grant.until(), now + Duration::from_secs(60));
    assert!(grant.is_active(now + Duration::from_secs(59)));
    assert!(!grant.is_active(now + Duration::from_secs(60)));
}

#[test]
fn calls_started_under_a_grant_retain_more_and_say_debug() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let grant = DebugGrant::new(&config, t0, Duration::from_secs(30), 65_536).unwrap();
    let spec = |id: &str| CallSpec {
        call_id: id.into(),
        session_id: "s".into(),
        kind: CallKind::Action,
        action: "a".into(),
        target: "t".into(),
        summary: String::new(),
        card_lines: Vec::new(),
    };
    let during = CallSettings::action(&config).with_debug(
        &config,
        Some(&grant),
        t0 + Duration::from_secs(10),
    );
    let after = CallSettings::action(&config).with_debug(
        &config,
        Some(&grant),
        t0 + Duration::from_secs(30),
    );
    assert_eq!((during.stderr.budget, during.stderr.debug), (65_536, true));
    assert_eq!((after.stderr.budget, after.stderr.debug), (16_384, false));

    for (settings, retained, debug) in [(during, 65_536, true), (after, 16_384, false)] {
        let mut call = Call::new(spec("c"), settings, &pool, t0, SystemTime::UNIX_EPOCH);
        call.handle(
            t0,
            Input::Validated {
                needs_approval: false,
            },
        )
        .unwrap();
        while call.poll_action().is_some() {}
        call.handle(t0, Input::Spawned { pid: 1 }).unwrap();
        let _ = call.handle(t0, Input::Stderr(&vec![b'x'; 200_000]));
        call.handle(t0, Input::Exited(ExitStatus::code(0))).unwrap();
        call.handle(t0, Input::StdoutEof).unwrap();
        call.handle(t0, Input::StderrEof).unwrap();
        let record = std::iter::from_fn(|| call.poll_action())
            .find_map(|a| match a {
                Action::Finished(o) => Some(o.record),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            (record.stderr_bytes_seen, record.stderr_bytes_retained),
            (200_000, retained)
        );
        assert_eq!(record.debug, debug);
    }
}

#[test]
fn a_grant_never_raises_past_the_configured_ceiling() {
    let config = Config {
        debug_ceiling_bytes: 32_768,
        ..Config::default()
    };
    let t0 = epoch();
    assert!(DebugGrant::new(&config, t0, Duration::from_secs(5), 65_536).is_err());
    let grant = DebugGrant::new(&config, t0, Duration::from_secs(5), 32_768).unwrap();
    let settings = CaptureSettings::for_call(&config, Some(&grant), t0);
    assert_eq!((settings.budget, settings.debug), (32_768, true));
}

#[test]
fn when_the_grant_ends_mid_call_the_retained_stderr_falls_back_to_the_normal_budget() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let grant = DebugGrant::new(&config, t0, Duration::from_secs(5), 131_072).unwrap();
    let settings = CallSettings::action(&config).with_debug(&config, Some(&grant), t0);
    let spec = CallSpec {
        call_id: "c_dbg".into(),
        session_id: "s".into(),
        kind: CallKind::Action,
        action: "a".into(),
        target: "t".into(),
        summary: String::new(),
        card_lines: Vec::new(),
    };
    let mut call = Call::new(spec, settings, &pool, t0, SystemTime::UNIX_EPOCH);
    call.handle(
        t0,
        Input::Validated {
            needs_approval: false,
        },
    )
    .unwrap();
    while call.poll_action().is_some() {}
    call.handle(t0, Input::Spawned { pid: 1 }).unwrap();
    let _ = call.handle(
        t0 + Duration::from_secs(1),
        Input::Stderr(&vec![b'x'; 200_000]),
    );
    assert_eq!(call.stderr().unwrap().bytes_retained(), 131_072);
    // The pool also holds the 512-byte margin kept beyond the cut edge.
    assert_eq!(pool.in_use(), 131_072 + CUT_MARGIN as u64);
    // The grant's end is the call's next wake-up, exactly.
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    let _ = call.handle(t0 + Duration::from_secs(5), Input::Timeout);
    assert_eq!(call.stderr().unwrap().bytes_retained(), 16_384);
    assert_eq!(pool.in_use(), 16_384 + CUT_MARGIN as u64);
    assert_eq!(call.poll_timeout(), None);
    let t1 = t0 + Duration::from_secs(6);
    let _ = call.handle(t1, Input::Stderr(b"after\n"));
    call.handle(t1, Input::Exited(ExitStatus::code(0))).unwrap();
    call.handle(t1, Input::StdoutEof).unwrap();
    call.handle(t1, Input::StderrEof).unwrap();
    let outcome = std::iter::from_fn(|| call.poll_action())
        .find_map(|a| match a {
            Action::Finished(o) => Some(o),
            _ => None,
        })
        .unwrap();
    let r = &outcome.record;
    assert_eq!(
        (r.stderr_bytes_seen, r.stderr_bytes_retained, r.debug),
        (200_006, 16_384, true)
    );
    assert_eq!(
        outcome.stderr.render_unredacted(),
        format!(
            "[stderr truncated: kept last 16384 of 200006 bytes]\n{}after\n",
            "x".repeat(16_378)
        )
    );
    // Redacted, the same: a run of one byte holds no secret, so the cut
    // hides nothing of the long line.
    assert_eq!(outcome.stderr.render(), outcome.stderr.render_unredacted());
}

// A grant given while a call runs: every call started or running under it
// records `debug: true`.

fn spec(id: &str) -> CallSpec {
    CallSpec {
        call_id: id.into(),
        session_id: "s".into(),
        kind: CallKind::Action,
        action: "a".into(),
        target: "t".into(),
        summary: String::new(),
        card_lines: Vec::new(),
    }
}

/// A call dispatched at `t0` under `settings`.
fn running(id: &str, settings: CallSettings, pool: &RetentionPool, t0: Instant) -> Call {
    let mut call = Call::new(spec(id), settings, pool, t0, SystemTime::UNIX_EPOCH);
    call.handle(
        t0,
        Input::Validated {
            needs_approval: false,
        },
    )
    .unwrap();
    while call.poll_action().is_some() {}
    call.handle(t0, Input::Spawned { pid: 1 }).unwrap();
    while call.poll_action().is_some() {}
    call
}

/// Exit 0 and both ends at `at`; the outcome.
fn end(call: &mut Call, at: Instant) -> Box<spillguard_core::Outcome> {
    call.handle(at, Input::Exited(ExitStatus::code(0))).unwrap();
    call.handle(at, Input::StdoutEof).unwrap();
    call.handle(at, Input::StderrEof).unwrap();
    std::iter::from_fn(|| call.poll_action())
        .find_map(|a| match a {
            Action::Finished(o) => Some(o),
            _ => None,
        })
        .unwrap()
}

/// Compares long texts, showing only where they differ.
#[track_caller]
fn assert_text(actual: &str, expected: &str) {
    if actual != expected {
        let at = actual
            .bytes()
            .zip(expected.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(actual.len().min(expected.len()));
        let show = |t: &str| format!("{:?}", &t[at.saturating_sub(40)..(at + 40).min(t.len())]);
        panic!(
            "texts differ at byte {at} (lengths {} and {}): {} vs {}",
            actual.len(),
            expected.len(),
            show(actual),
            show(expected)
        );
    }
}

fn retained(call: &Call) -> u64 {
    call.stderr().unwrap().bytes_retained()
}

#[test]
fn a_grant_given_while_a_call_runs_raises_its_budget_from_then_on() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let mut call = running("c_live", CallSettings::action(&config), &pool, t0);
    let _ = call.handle(t0 + Duration::from_secs(1), Input::Stderr(&[b'x'; 20_000]));
    assert_eq!(
        (retained(&call), pool.in_use()),
        (16_384, 16_384 + CUT_MARGIN as u64)
    );

    let t2 = t0 + Duration::from_secs(2);
    let grant = DebugGrant::new(&config, t2, Duration::from_secs(10), 65_536).unwrap();
    let _ = call.handle(t2, Input::DebugGranted(grant));
    // Nothing comes back: the 3,616 bytes dropped before stay dropped.
    assert_eq!(
        (retained(&call), pool.in_use()),
        (16_384, 16_384 + CUT_MARGIN as u64)
    );
    assert_eq!(call.settings().stderr.budget, 65_536);
    assert!(call.settings().stderr.debug);
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(12)));
    assert!(!call.has_pending_actions(), "a grant is never a transition");

    let t3 = t0 + Duration::from_secs(3);
    let _ = call.handle(t3, Input::Stderr(&b"y\n".repeat(15_000)));
    assert_eq!(
        (retained(&call), pool.in_use()),
        (46_384, 46_384 + CUT_MARGIN as u64)
    );
    let _ = call.handle(t3, Input::Stderr(&b"z\n".repeat(15_000)));
    assert_eq!(
        (retained(&call), pool.in_use()),
        (65_536, 65_536 + CUT_MARGIN as u64)
    );

    let outcome = end(&mut call, t0 + Duration::from_secs(4));
    let r = &outcome.record;
    assert_eq!(
        (
            r.stderr_bytes_seen,
            r.stderr_bytes_retained,
            r.stderr_truncated,
            r.debug
        ),
        (80_000, 65_536, true, true)
    );
    // The window is the last 65,536 bytes of the stream: 5,536 of the x
    // sent before the grant, then every y and z.
    assert_text(
        &outcome.stderr.render_unredacted(),
        &format!(
            "[stderr truncated: kept last 65536 of 80000 bytes]\n{}{}{}",
            "x".repeat(5_536),
            "y\n".repeat(15_000),
            "z\n".repeat(15_000)
        ),
    );
    // The agent excerpt keeps its own cap, 4096 bytes, marker included:
    // whole lines of the newest bytes, under a marker that counts them.
    let excerpt = outcome.agent_excerpt();
    let marker = "[stderr truncated: kept last 4044 of 80000 bytes]\n";
    assert_text(&excerpt, &format!("{marker}{}", "z\n".repeat(2_022)));
    assert_eq!(excerpt.len(), 4_094);
    drop(outcome);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn a_call_that_ended_before_the_grant_keeps_debug_false() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let mut call = running("c_done", CallSettings::action(&config), &pool, t0);
    let _ = call.handle(t0, Input::Stderr(&[b'x'; 20_000]));
    let outcome = end(&mut call, t0 + Duration::from_secs(1));
    let t2 = t0 + Duration::from_secs(2);
    let grant = DebugGrant::new(&config, t2, Duration::from_secs(10), 65_536).unwrap();
    let _ = call.handle(t2, Input::DebugGranted(grant));
    let _ = call.handle(t2, Input::DebugRevoked);
    assert_eq!(call.state(), spillguard_core::State::Completed);
    assert!(call.poll_action().is_none());
    assert_eq!(call.poll_timeout(), None);
    let r = &outcome.record;
    assert_eq!(
        (r.stderr_bytes_seen, r.stderr_bytes_retained, r.debug),
        (20_000, 16_384, false)
    );
    assert_eq!(outcome.stderr.bytes_retained(), 16_384);
}

#[test]
fn a_grant_given_before_dispatch_reaches_the_call_too() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let mut call = Call::new(
        spec("c_card"),
        CallSettings::action(&config),
        &pool,
        t0,
        SystemTime::UNIX_EPOCH,
    );
    call.handle(
        t0,
        Input::Validated {
            needs_approval: true,
        },
    )
    .unwrap();
    while call.poll_action().is_some() {}
    let grant = DebugGrant::new(&config, t0, Duration::from_secs(600), 32_768).unwrap();
    let _ = call.handle(t0, Input::DebugGranted(grant));
    assert_eq!(call.state(), spillguard_core::State::AwaitingApproval);
    // The approval deadline (120 s) comes first, the grant's end after it.
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(120)));
    call.handle(t0, Input::ApprovalGranted).unwrap();
    while call.poll_action().is_some() {}
    call.handle(t0, Input::Spawned { pid: 1 }).unwrap();
    let _ = call.handle(t0, Input::Stderr(&[b'x'; 50_000]));
    let r = end(&mut call, t0).record;
    assert_eq!(
        (r.stderr_bytes_seen, r.stderr_bytes_retained, r.debug),
        (50_000, 32_768, true)
    );
}

#[test]
fn when_a_grant_given_mid_call_ends_the_window_shrinks_back_and_debug_stays_true() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let mut call = running("c_end", CallSettings::action(&config), &pool, t0);
    let _ = call.handle(t0, Input::Stderr(&[b'x'; 20_000]));
    let t1 = t0 + Duration::from_secs(1);
    let grant = DebugGrant::new(&config, t1, Duration::from_secs(5), 131_072).unwrap();
    let _ = call.handle(t1, Input::DebugGranted(grant));
    let _ = call.handle(t1, Input::Stderr(&b"y\n".repeat(50_000)));
    assert_eq!(
        (retained(&call), pool.in_use()),
        (116_384, 116_384 + CUT_MARGIN as u64)
    );
    // The grant's end is the call's next wake-up, exactly.
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(6)));
    let _ = call.handle(t0 + Duration::from_secs(6), Input::Timeout);
    assert_eq!(
        (retained(&call), pool.in_use()),
        (16_384, 16_384 + CUT_MARGIN as u64)
    );
    assert_eq!(call.settings().stderr.budget, 16_384);
    assert_eq!(call.settings().debug_until, None);
    assert_eq!(call.poll_timeout(), None);
    // New bytes are retained under the normal budget again.
    let t7 = t0 + Duration::from_secs(7);
    let _ = call.handle(t7, Input::Stderr(b"after\n"));
    assert_eq!(
        (retained(&call), pool.in_use()),
        (16_384, 16_384 + CUT_MARGIN as u64)
    );
    let outcome = end(&mut call, t7);
    let r = &outcome.record;
    assert_eq!(
        (r.stderr_bytes_seen, r.stderr_bytes_retained, r.debug),
        (120_006, 16_384, true)
    );
    assert_text(
        &outcome.stderr.render(),
        &format!(
            // The margin before the window holds whole `y` lines: the
            // rules saw the window's first word whole.
            "[stderr truncated: kept last 16384 of 120006 bytes]\n{}after\n",
            "y\n".repeat(8_189)
        ),
    );
}

#[test]
fn a_revoked_grant_ends_at_once_for_a_running_call() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let grant = DebugGrant::new(&config, t0, Duration::from_secs(60), 65_536).unwrap();
    // One call started under the grant, one given it while running.
    let started = CallSettings::action(&config).with_debug(&config, Some(&grant), t0);
    let mut under = running("c_under", started, &pool, t0);
    let mut given = running("c_given", CallSettings::action(&config), &pool, t0);
    let _ = given.handle(t0, Input::DebugGranted(grant));
    for call in [&mut under, &mut given] {
        let _ = call.handle(t0, Input::Stderr(&[b'x'; 100_000]));
        assert_eq!(retained(call), 65_536);
    }
    assert_eq!(pool.in_use(), 131_072 + 2 * CUT_MARGIN as u64);
    let t1 = t0 + Duration::from_secs(1);
    for call in [&mut under, &mut given] {
        let _ = call.handle(t1, Input::DebugRevoked);
        assert_eq!(retained(call), 16_384);
        assert_eq!(call.poll_timeout(), None);
        let _ = call.handle(t1, Input::Stderr(&[b'y'; 20_000]));
        assert_eq!(retained(call), 16_384);
    }
    assert_eq!(pool.in_use(), 32_768 + 2 * CUT_MARGIN as u64);
    for mut call in [under, given] {
        let r = end(&mut call, t1).record;
        assert_eq!(
            (r.stderr_bytes_seen, r.stderr_bytes_retained, r.debug),
            (120_000, 16_384, true)
        );
    }
}

#[test]
fn a_grant_that_replaces_another_sets_the_budget_and_the_end_anew() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let mut call = running("c_replaced", CallSettings::action(&config), &pool, t0);
    let big = DebugGrant::new(&config, t0, Duration::from_secs(60), 100_000).unwrap();
    let _ = call.handle(t0, Input::DebugGranted(big));
    let _ = call.handle(t0, Input::Stderr(&[b'x'; 150_000]));
    assert_eq!(
        (retained(&call), pool.in_use()),
        (100_000, 100_000 + CUT_MARGIN as u64)
    );
    let t1 = t0 + Duration::from_secs(1);
    let small = DebugGrant::new(&config, t1, Duration::from_secs(5), 40_000).unwrap();
    let _ = call.handle(t1, Input::DebugGranted(small));
    assert_eq!(
        (retained(&call), pool.in_use()),
        (40_000, 40_000 + CUT_MARGIN as u64)
    );
    assert_eq!(call.poll_timeout(), Some(t1 + Duration::from_secs(5)));
    // Below the normal budget, a grant raises nothing but still marks.
    let tiny = DebugGrant::new(&config, t1, Duration::from_secs(5), 1_000).unwrap();
    let _ = call.handle(t1, Input::DebugGranted(tiny));
    assert_eq!(
        (retained(&call), pool.in_use()),
        (16_384, 16_384 + CUT_MARGIN as u64)
    );
    // A grant already over when the call handles it ends the call's grant.
    let _ = call.handle(t1, Input::DebugGranted(big));
    let _ = call.handle(t1, Input::Stderr(&[b'y'; 100_000]));
    assert_eq!(retained(&call), 100_000);
    let _ = call.handle(t0 + Duration::from_secs(61), Input::DebugGranted(big));
    assert_eq!(
        (retained(&call), pool.in_use()),
        (16_384, 16_384 + CUT_MARGIN as u64)
    );
    assert_eq!(call.poll_timeout(), None);
    let r = end(&mut call, t0 + Duration::from_secs(62)).record;
    assert_eq!((r.stderr_bytes_seen, r.debug), (250_000, true));
}

#[test]
fn a_grant_already_over_does_not_touch_a_call_under_no_grant() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let grant = DebugGrant::new(&config, t0, Duration::from_secs(1), 65_536).unwrap();
    let t1 = t0 + Duration::from_secs(1);
    let mut call = running("c_late", CallSettings::action(&config), &pool, t1);
    let _ = call.handle(t1, Input::DebugGranted(grant));
    let _ = call.handle(t1, Input::Stderr(&[b'x'; 20_000]));
    let r = end(&mut call, t1).record;
    assert_eq!(
        (r.stderr_bytes_seen, r.stderr_bytes_retained, r.debug),
        (20_000, 16_384, false)
    );
}

#[test]
fn a_grant_given_mid_call_keeps_a_final_prefix_and_grows_the_ring() {
    let config = Config {
        retain: spillguard_core::Retain::HeadAndTail,
        ..Config::default()
    };
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let mut call = running("c_ht", CallSettings::action(&config), &pool, t0);
    let mut stream = Vec::new();
    stream.extend_from_slice(&b"a\n".repeat(10_000));
    let _ = call.handle(t0, Input::Stderr(&stream));
    // 4096 first bytes and 12288 last: 3616 dropped between them.
    assert_eq!(retained(&call), 16_384);
    let grant = DebugGrant::new(&config, t0, Duration::from_secs(60), 65_536).unwrap();
    let _ = call.handle(t0, Input::DebugGranted(grant));
    let more = b"b\n".repeat(30_000);
    let _ = call.handle(t0, Input::Stderr(&more));
    stream.extend_from_slice(&more);
    // The prefix was final: still 4096; the ring took the rest, 61440.
    let outcome = end(&mut call, t0);
    let r = &outcome.record;
    assert_eq!(
        (r.stderr_bytes_seen, r.stderr_bytes_retained, r.debug),
        (80_000, 65_536, true)
    );
    let expected = format!(
        "{}[stderr truncated: kept first 4096 and last 61440 of 80000 bytes, 14464 omitted between them]\n{}",
        String::from_utf8_lossy(&stream[..4_096]),
        String::from_utf8_lossy(&stream[80_000 - 61_440..]),
    );
    assert_text(&outcome.stderr.render_unredacted(), &expected);
}

#[test]
fn a_grant_given_mid_call_in_head_mode_grows_an_open_prefix_only() {
    let config = Config {
        retain: spillguard_core::Retain::Head,
        ..Config::default()
    };
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let grant = DebugGrant::new(&config, t0, Duration::from_secs(60), 65_536).unwrap();
    // Nothing dropped yet: the prefix takes the next bytes up to 65536.
    let mut open = running("c_open", CallSettings::action(&config), &pool, t0);
    let _ = open.handle(t0, Input::Stderr(&[b'x'; 10_000]));
    let _ = open.handle(t0, Input::DebugGranted(grant));
    let _ = open.handle(t0, Input::Stderr(&[b'y'; 70_000]));
    let r = end(&mut open, t0).record;
    assert_eq!((r.stderr_bytes_retained, r.debug), (65_536, true));
    // A byte went past the prefix: it is final, nothing more is kept.
    let mut closed = running("c_closed", CallSettings::action(&config), &pool, t0);
    let _ = closed.handle(t0, Input::Stderr(&[b'x'; 20_000]));
    let _ = closed.handle(t0, Input::DebugGranted(grant));
    let _ = closed.handle(t0, Input::Stderr(&[b'y'; 70_000]));
    let outcome = end(&mut closed, t0);
    assert_eq!(
        (outcome.record.stderr_bytes_retained, outcome.record.debug),
        (16_384, true)
    );
    assert_text(
        &outcome.stderr.render_unredacted(),
        &format!(
            "[stderr truncated: kept first 16384 of 90000 bytes]\n{}",
            "x".repeat(16_384)
        ),
    );
}

#[test]
fn grants_given_to_live_calls_never_take_the_pool_past_its_capacity() {
    let config = Config {
        stderr_retained_process_bytes: 40_000,
        ..Config::default()
    };
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let grant = DebugGrant::new(&config, t0, Duration::from_secs(60), 65_536).unwrap();
    let mut calls: Vec<Call> = (0..2)
        .map(|i| running(&format!("c_{i}"), CallSettings::action(&config), &pool, t0))
        .collect();
    for call in &mut calls {
        let _ = call.handle(t0, Input::Stderr(&[b'x'; 20_000]));
        let _ = call.handle(t0, Input::DebugGranted(grant));
    }
    assert_eq!(pool.in_use(), 32_768 + 2 * CUT_MARGIN as u64);
    for _ in 0..20 {
        for call in &mut calls {
            let _ = call.handle(t0, Input::Stderr(&[b'y'; 5_000]));
            assert!(pool.in_use() <= 40_000);
        }
    }
    assert_eq!(pool.peak(), 40_000);
    let first = end(&mut calls[0], t0).record;
    let second = end(&mut calls[1], t0).record;
    // Neither raised budget fits: the two calls share the pool evenly, the
    // margins given back first.
    assert_eq!(
        (
            first.stderr_bytes_retained,
            second.stderr_bytes_retained,
            first.stderr_retention_limited,
            second.stderr_retention_limited,
            first.debug && second.debug,
        ),
        (20_000, 20_000, true, true, true)
    );
}
