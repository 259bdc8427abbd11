//! Debug mode (R2.7): bounded in time and size, recorded on every call it
//! touched, and never a quiet switch.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant, SystemTime};

use spillguard_core::{
    Action, Call, CallKind, CallSettings, CallSpec, CaptureSettings, Config, DebugGrant,
    DebugGrantError, ExitStatus, RetentionPool,
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
        call.handle_validated(t0, false).unwrap();
        while call.poll_action().is_some() {}
        call.handle_spawned(t0, 1).unwrap();
        call.handle_stderr(t0, &vec![b'x'; 200_000]);
        call.handle_exit(t0, ExitStatus::code(0)).unwrap();
        call.handle_stdout_eof(t0).unwrap();
        call.handle_stderr_eof(t0).unwrap();
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
    };
    let mut call = Call::new(spec, settings, &pool, t0, SystemTime::UNIX_EPOCH);
    call.handle_validated(t0, false).unwrap();
    while call.poll_action().is_some() {}
    call.handle_spawned(t0, 1).unwrap();
    call.handle_stderr(t0 + Duration::from_secs(1), &vec![b'x'; 200_000]);
    assert_eq!(call.stderr().unwrap().bytes_retained(), 131_072);
    assert_eq!(pool.in_use(), 131_072);
    // The grant's end is the call's next wake-up, exactly.
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    call.handle_timeout(t0 + Duration::from_secs(5));
    assert_eq!(call.stderr().unwrap().bytes_retained(), 16_384);
    assert_eq!(pool.in_use(), 16_384);
    assert_eq!(call.poll_timeout(), None);
    let t1 = t0 + Duration::from_secs(6);
    call.handle_stderr(t1, b"after\n");
    call.handle_exit(t1, ExitStatus::code(0)).unwrap();
    call.handle_stdout_eof(t1).unwrap();
    call.handle_stderr_eof(t1).unwrap();
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
    // Redacted, the kept part of the one long line is a cut word.
    assert_eq!(
        outcome.stderr.render(),
        "[stderr truncated: kept last 16384 of 200006 bytes]\n[cut]\n"
    );
}
