//! The restart policy of a stdio server in virtual time: when it is
//! started again, the exact waits (jitter bounds included), the reset after
//! a long run and the crash-loop verdict.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use spillguard_core::{
    CrashLoop, RestartAction, RestartError, RestartMode, RestartNote, RestartSettings,
    RestartState, Restarts, ServerEnd, StopReason,
};

/// The tests' time origin, read once; every later instant is an offset.
#[allow(clippy::disallowed_methods)]
fn epoch() -> Instant {
    Instant::now()
}

const MS: Duration = Duration::from_millis(1);

fn settings(mode: RestartMode) -> RestartSettings {
    RestartSettings {
        mode,
        ..RestartSettings::default()
    }
}

/// A machine for `on-failure` with `max_attempts`, its first run
/// started at the epoch.
fn on_failure_with_max(max_attempts: u32) -> (Instant, Restarts) {
    let t0 = epoch();
    let settings = RestartSettings {
        max_attempts,
        ..settings(RestartMode::OnFailure)
    };
    (t0, Restarts::new(settings, t0))
}

/// Ends the run at `at` and returns the wait chosen (from the end).
fn end_at(r: &mut Restarts, at: Instant, end: ServerEnd, jitter: u16) -> Option<Duration> {
    r.handle_ended(at, end, jitter).unwrap();
    r.poll_timeout().map(|until| until - at)
}

/// Sleeps to the deadline, takes the start, starts.
fn restart(r: &mut Restarts) -> (Instant, u32) {
    let until = r.poll_timeout().unwrap();
    r.handle_timeout(until - MS);
    assert_eq!(r.poll_action(), None, "early timeout is a no-op");
    r.handle_timeout(until);
    let Some(RestartAction::Start { attempt }) = r.poll_action() else {
        panic!("no start at the deadline");
    };
    assert_eq!(r.poll_action(), None);
    r.handle_started(until).unwrap();
    (until, attempt)
}

#[test]
fn never_stops_after_any_end() {
    let t0 = epoch();
    let mut r = Restarts::new(settings(RestartMode::Never), t0);
    assert_eq!(end_at(&mut r, t0 + MS, ServerEnd::Exited(3), 0), None);
    assert_eq!(r.state(), RestartState::Stopped(StopReason::Policy));
    assert_eq!(r.poll_action(), None);
}

#[test]
fn on_failure_restarts_after_a_failure_only() {
    let t0 = epoch();
    for (end, again) in [
        (ServerEnd::Exited(0), false),
        (ServerEnd::Exited(3), true),
        (
            ServerEnd::Signalled {
                signal: 9,
                by_guard: false,
            },
            true,
        ),
        (
            ServerEnd::Signalled {
                signal: 15,
                by_guard: true,
            },
            false,
        ),
        (ServerEnd::NoStatus, true),
        (ServerEnd::StdoutClosed, true),
    ] {
        let mut r = Restarts::new(settings(RestartMode::OnFailure), t0);
        let wait = end_at(&mut r, t0 + MS, end, 0);
        assert_eq!(wait, again.then_some(100 * MS), "{end}");
    }
}

#[test]
fn always_restarts_after_a_clean_exit_and_never_once_the_host_left() {
    let t0 = epoch();
    let mut r = Restarts::new(settings(RestartMode::Always), t0);
    assert_eq!(end_at(&mut r, t0, ServerEnd::Exited(0), 0), Some(100 * MS));
    let (at, attempt) = restart(&mut r);
    assert_eq!((at - t0, attempt, r.restarts()), (100 * MS, 2, 1));
    r.handle_stop(StopReason::HostLeft);
    assert_eq!(r.state(), RestartState::Stopped(StopReason::HostLeft));
    // Terminal: the end that follows changes nothing.
    r.handle_ended(at + MS, ServerEnd::Exited(1), 0).unwrap();
    assert_eq!(r.state(), RestartState::Stopped(StopReason::HostLeft));
    assert_eq!(r.poll_action(), None);
}

#[test]
fn a_stop_while_waiting_cancels_the_start() {
    let t0 = epoch();
    let mut r = Restarts::new(settings(RestartMode::Always), t0);
    end_at(&mut r, t0, ServerEnd::Exited(1), 0);
    r.handle_stop(StopReason::StopAsked);
    r.handle_timeout(t0 + Duration::from_secs(1));
    assert_eq!(r.poll_action(), None);
    assert_eq!(r.state(), RestartState::Stopped(StopReason::StopAsked));
}

#[test]
fn a_stop_after_the_wait_ended_takes_back_the_start_not_yet_polled() {
    let t0 = epoch();
    let mut r = Restarts::new(settings(RestartMode::Always), t0);
    let wait = end_at(&mut r, t0, ServerEnd::Exited(1), 0).unwrap();
    // The wait is over: a start is asked for, and not polled yet.
    r.handle_timeout(t0 + wait);
    r.handle_stop(StopReason::HostLeft);
    assert_eq!(r.poll_action(), None);
    assert_eq!(r.state(), RestartState::Stopped(StopReason::HostLeft));
}

#[test]
fn the_backoff_doubles_to_its_cap_with_jitter_of_at_most_a_quarter() {
    let (t0, mut r) = on_failure_with_max(100);
    // Each run lasts 20 s (not quick), so no crash loop; the backoff
    // is never reset (below 60 s).
    let mut start = t0;
    let mut waits = Vec::new();
    for _ in 0..11 {
        let end = start + Duration::from_secs(20);
        waits.push(end_at(&mut r, end, ServerEnd::Exited(1), 0).unwrap());
        start = restart(&mut r).0;
    }
    let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
    assert_eq!(
        ms,
        [
            100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000
        ]
    );
    // The largest jitter: a quarter more, but never past the cap.
    let widest = |backoff_min: Duration| {
        let settings = RestartSettings {
            backoff_min,
            ..settings(RestartMode::OnFailure)
        };
        let mut r = Restarts::new(settings, t0);
        end_at(&mut r, t0 + 20_000 * MS, ServerEnd::Exited(1), u16::MAX)
    };
    assert_eq!(widest(100 * MS), Some(Duration::from_nanos(124_999_618)));
    assert_eq!(widest(28_000 * MS), Some(30_000 * MS));
}

#[test]
fn a_run_of_a_minute_resets_the_backoff() {
    let t0 = epoch();
    let mut r = Restarts::new(settings(RestartMode::OnFailure), t0);
    assert_eq!(end_at(&mut r, t0, ServerEnd::Exited(1), 0), Some(100 * MS));
    assert_eq!(
        r.note(),
        Some(RestartNote {
            restart: "restarting (attempt 2 of 5)".into(),
            attempts: 1,
            crash_loop: false,
        })
    );
    let (start, _) = restart(&mut r);
    assert_eq!(
        end_at(&mut r, start, ServerEnd::Exited(1), 0),
        Some(200 * MS)
    );
    let (start, _) = restart(&mut r);
    let end = start + Duration::from_secs(60);
    assert_eq!(end_at(&mut r, end, ServerEnd::Exited(1), 0), Some(100 * MS));
    // A run past the window ends the streak: the next is attempt 1.
    assert_eq!(
        r.state(),
        RestartState::Waiting {
            until: end + 100 * MS,
            attempt: 1
        }
    );
}

#[test]
fn five_quick_ends_in_a_row_are_a_crash_loop() {
    let t0 = epoch();
    let mut r = Restarts::new(settings(RestartMode::OnFailure), t0);
    let mut start = t0;
    let mut attempts = Vec::new();
    for _ in 0..4 {
        end_at(&mut r, start + 50 * MS, ServerEnd::Exited(3), 0);
        let (at, attempt) = restart(&mut r);
        attempts.push(attempt);
        start = at;
    }
    assert_eq!(attempts, [2, 3, 4, 5]);
    assert_eq!(r.note(), None, "running");
    // Waits 100 + 200 + 400 + 800 and five runs of 50 ms.
    let last = start + 50 * MS;
    r.handle_ended(last, ServerEnd::Exited(3), 0).unwrap();
    let verdict = CrashLoop {
        attempts: 5,
        elapsed: 1750 * MS,
        last_end: ServerEnd::Exited(3),
    };
    assert_eq!(last - t0, 1750 * MS);
    assert_eq!(r.poll_action(), Some(RestartAction::GiveUp(verdict)));
    assert_eq!(
        r.note(),
        Some(RestartNote {
            restart: "crash loop: gave up after 5 attempts in 1.8 s".into(),
            attempts: 5,
            crash_loop: true,
        })
    );
    assert_eq!(r.poll_action(), None);
    assert_eq!(r.state(), RestartState::CrashLoop(verdict));
    assert_eq!(r.restarts(), 4);
    assert_eq!(
        verdict.to_string(),
        "crash loop: gave up after 5 attempts in 1.8 s"
    );
    // Terminal: a stop changes nothing.
    r.handle_stop(StopReason::HostLeft);
    assert_eq!(r.state(), RestartState::CrashLoop(verdict));
}

#[test]
fn a_run_past_the_window_breaks_the_streak() {
    let (t0, mut r) = on_failure_with_max(2);
    end_at(&mut r, t0 + MS, ServerEnd::Exited(1), 0);
    let (start, attempt) = restart(&mut r);
    assert_eq!(attempt, 2);
    // This run lasts the whole window: not quick.
    end_at(&mut r, start + 10_000 * MS, ServerEnd::Exited(1), 0);
    let (start, attempt) = restart(&mut r);
    assert_eq!(attempt, 1);
    end_at(&mut r, start + MS, ServerEnd::Exited(1), 0);
    let (start, attempt) = restart(&mut r);
    assert_eq!(attempt, 2);
    // Two quick runs in a row now (this one and the one before).
    r.handle_ended(start + MS, ServerEnd::Exited(1), 0).unwrap();
    assert!(matches!(
        r.poll_action(),
        Some(RestartAction::GiveUp(CrashLoop { attempts: 2, .. }))
    ));
}

#[test]
fn misuse_is_an_error_and_changes_nothing() {
    let t0 = epoch();
    let mut r = Restarts::new(settings(RestartMode::Always), t0);
    assert_eq!(r.handle_started(t0), Err(RestartError::NotWaiting));
    end_at(&mut r, t0, ServerEnd::Exited(0), 0);
    let before = r.state();
    assert_eq!(
        r.handle_ended(t0, ServerEnd::Exited(0), 0),
        Err(RestartError::NotRunning)
    );
    assert_eq!(r.state(), before);
}
