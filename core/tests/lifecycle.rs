//! The flood and shutdown scenarios (and the lifecycle's edge cases) at the core
//! level, in virtual time: exact states, exit fields, stream ends, retained
//! bytes, markers and instants.
#![allow(clippy::unwrap_used)]

mod sim;

use std::time::Duration;

use sim::{Decision, Grandchild, OnTerm, Script, World, ms, pattern, spec};
use spillguard_core::Input;
use spillguard_core::{
    ApprovalDecision, AuditKind, CallError, CallKind, CallSettings, CancelReason, Config,
    DisconnectPolicy, ResultKind, Signal, SignalMark, State, StreamEnd,
};

fn settings(world: &World) -> CallSettings {
    CallSettings::action(&world.config)
}

fn flood_forever(on_term: OnTerm) -> Script {
    Script {
        flood: Some((65_536, ms(1))),
        exit: None,
        on_term,
        ..Script::default()
    }
}

fn first_line(text: &str) -> &str {
    text.split('\n').next().unwrap()
}

#[test]
fn flood_with_a_short_deadline_keeps_the_tail_and_ends_cancelled() {
    let mut world = World::new(Config::default());
    let mut s = settings(&world);
    s.deadline = Some(ms(100));
    let lane = world.add(
        spec("c_s1", CallKind::Action),
        s,
        flood_forever(OnTerm::Die(ms(2))),
        false,
        Decision::Never,
    );
    world.drive_bounded(10_000);

    let l = &world.lanes[lane];
    let r = l.record();
    // Chunks at 0, 1, …, 102 ms: the deadline fires at 100 ms, TERM ends
    // the helper 2 ms later.
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!(r.cancel_reason, Some(CancelReason::Deadline));
    assert_eq!(r.stderr_bytes_seen, 103 * 65_536);
    assert_eq!(r.stderr_bytes_retained, 16_384);
    assert!(r.stderr_truncated);
    assert_eq!((r.exit_status, r.exit_signal), (None, Some(15)));
    assert_eq!(r.stream_end, StreamEnd::ReaderCompletedAfterCancel);
    assert_eq!(
        r.signals,
        [SignalMark {
            signal: Signal::Term,
            offset_us: 100_000
        }]
    );
    assert_eq!(r.cancel_offset_us, Some(100_000));
    assert_eq!(r.exited_offset_us, Some(102_000));
    assert_eq!(r.offset_of(State::CancelledAfterDispatch), Some(ms(102)));
    assert!(!l.helper.group_alive());
    let excerpt = l.outcome.as_ref().unwrap().stderr.render();
    assert_eq!(
        first_line(&excerpt),
        "[stderr truncated: kept last 16384 of 6750208 bytes]"
    );
    // The window starts inside a line: the margin before it holds the
    // start of that line, so the rules saw the cut word whole and it is
    // shown as it is.
    assert_eq!(excerpt.len(), first_line(&excerpt).len() + 1 + 16_384);
    assert_eq!(
        excerpt,
        l.outcome.as_ref().unwrap().stderr.render_unredacted()
    );
    // Final record written to the audit trail, once, after the transition.
    let finals = l
        .audit
        .iter()
        .filter(|e| matches!(e.kind, AuditKind::Final(_)))
        .count();
    assert_eq!(
        (finals, l.finished_count, l.actions_after_finish),
        (1, 1, 0)
    );
    // The window and the 512-byte margin kept before it.
    assert_eq!(world.pool.in_use(), 16_384 + 512);
    world.lanes.clear();
    assert_eq!(world.pool.in_use(), 0);
}

#[test]
fn approval_deadline_is_not_extended_by_stderr() {
    let mut world = World::new(Config::default());
    let mut s = settings(&world);
    s.approval_timeout = Duration::from_secs(2);
    let lane = world.add(
        spec("c_s2", CallKind::Action),
        s,
        Script::default(),
        true,
        Decision::Never,
    );
    // 64 KiB of stderr every millisecond while the card is up: 125 MiB.
    world.lanes[lane].noise_while_awaiting = Some((65_536, ms(1)));
    world.drive_bounded(10_000);

    let l = &world.lanes[lane];
    let r = l.record();
    assert_eq!(r.state, State::ApprovalExpired);
    assert_eq!(r.approval, ApprovalDecision::Expired);
    assert_eq!(r.offset_of(State::AwaitingApproval), Some(Duration::ZERO));
    assert_eq!(
        r.offset_of(State::ApprovalExpired),
        Some(Duration::from_secs(2))
    );
    assert_eq!(r.stderr_bytes_seen, 2000 * 65_536);
    assert_eq!(l.cards.len(), 1);
    assert_eq!(l.cards[0].0, Duration::ZERO);
    assert_eq!(l.cards[0].1.expires_in, Duration::from_secs(2));
    assert_eq!(l.spawned_at, None);
    assert_eq!((r.pid, r.stream_end), (None, StreamEnd::NotStarted));
}

#[test]
fn noisy_discovery_does_not_delay_the_approval_card() {
    let mut world = World::new(Config::default());
    let config = world.config.clone();
    let discovery = world.add(
        spec("c_disc", CallKind::Discovery),
        CallSettings::discovery(&config),
        Script {
            flood: Some((65_536, ms(1))),
            flood_total: Some(10 << 20),
            exit: Some((ms(200), 0)),
            ..Script::default()
        },
        false,
        Decision::Never,
    );
    let action = world.add(
        spec("c_act", CallKind::Action),
        CallSettings::action(&config),
        Script {
            exit: Some((ms(10), 0)),
            ..Script::default()
        },
        true,
        Decision::Grant(ms(300)),
    );
    world.drive_bounded(10_000);

    let d = world.lanes[discovery].record();
    assert_eq!(d.state, State::Completed);
    assert_eq!(d.approval, ApprovalDecision::NotRequired);
    assert_eq!(
        (d.stderr_bytes_seen, d.stderr_bytes_retained),
        (10 << 20, 4096)
    );
    let no_attempt = world.lanes[discovery]
        .audit
        .iter()
        .all(|e| !matches!(e.kind, AuditKind::Attempt { .. }));
    assert!(no_attempt, "a discovery call writes no attempt");

    let a = &world.lanes[action];
    assert_eq!(a.cards.len(), 1);
    assert_eq!(a.cards[0].0, Duration::ZERO);
    assert_eq!(a.spawned_at, Some(ms(300)));
    let r = a.record();
    assert_eq!(
        (r.state, r.approval, r.exit_status),
        (State::Completed, ApprovalDecision::Granted, Some(0))
    );
    assert_eq!(r.offset_of(State::Completed), Some(ms(310)));
}

#[test]
fn stderr_during_approval_then_exit_right_after_approval() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let lane = world.add(
        spec("c_s3", CallKind::Action),
        s,
        Script {
            exit: Some((ms(1), 0)),
            ..Script::default()
        },
        true,
        Decision::Grant(ms(500)),
    );
    world.lanes[lane].noise_while_awaiting = Some((4096, ms(10)));
    world.drive_bounded(10_000);

    let l = &world.lanes[lane];
    let r = l.record();
    assert_eq!(l.cards.len(), 1);
    assert_eq!(l.spawned_at, Some(ms(500)));
    assert_eq!(r.state, State::Completed);
    assert_eq!(r.exit_status, Some(0));
    assert_eq!(r.exited_offset_us, Some(501_000));
    // Noise at 10, 20, …, 490 ms: the grant at 500 ms comes first.
    assert_eq!(r.stderr_bytes_seen, 49 * 4096);
    assert_eq!(r.stderr_bytes_retained, 16_384);
    assert_eq!(r.offset_of(State::Authorized), Some(ms(500)));
}

#[test]
fn success_with_full_stderr_then_cancel_during_cleanup_is_cancelled_after_dispatch() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let script = Script {
        stdout: b"{\"ok\":true}\n".to_vec(),
        result: Some((ms(5), ResultKind::Success)),
        ..flood_forever(OnTerm::ExitWith(0, ms(3)))
    };
    let lane = world.add(
        spec("c_s4", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.lanes[lane].cancel_at = Some(ms(50));
    world.drive_bounded(10_000);

    let l = &world.lanes[lane];
    let r = l.record();
    // It exited 0 after the cancel: still cancelled, never "failed", and its
    // structured result is kept apart from stderr.
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!((r.exit_status, r.exit_signal), (Some(0), None));
    assert_eq!(r.result_kind, Some(ResultKind::Success));
    assert_eq!(r.stdout_bytes_seen, 12);
    assert_eq!(
        l.outcome.as_ref().unwrap().stdout.to_vec(),
        b"{\"ok\":true}\n"
    );
    assert_eq!(r.stderr_bytes_seen, 54 * 65_536);
    assert_eq!(r.stderr_bytes_retained, 16_384);
    assert_eq!(
        r.signals,
        [SignalMark {
            signal: Signal::Term,
            offset_us: 50_000
        }]
    );
    assert_eq!(r.exited_offset_us, Some(53_000));
}

#[test]
fn a_cancel_after_the_exit_was_observed_keeps_the_observed_outcome() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let script = Script {
        exit: Some((ms(20), 0)),
        grandchild: Some(Grandchild {
            holds_for: Duration::from_secs(10),
            dies_on_term: true,
            in_group: true,
            writes: 0,
        }),
        ..Script::default()
    };
    let lane = world.add(
        spec("c_s4b", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.lanes[lane].cancel_at = Some(ms(100));
    world.drive_bounded(10_000);

    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::Completed);
    assert_eq!(r.exit_status, Some(0));
    assert_eq!(r.cancel_reason, Some(CancelReason::Requested));
    assert_eq!(r.stream_end, StreamEnd::ReaderCompletedAfterCancel);
    assert!(r.descendants_signalled);
    assert_eq!(
        r.signals,
        [SignalMark {
            signal: Signal::Term,
            offset_us: 100_000
        }]
    );
    assert_eq!(r.offset_of(State::Completed), Some(ms(100)));
}

fn grandchild_world(grandchild: Grandchild, signal_descendants: bool) -> (World, usize) {
    let mut world = World::new(Config::default());
    let mut s = settings(&world);
    s.signal_descendants = signal_descendants;
    let script = Script {
        exit: Some((ms(10), 0)),
        grandchild: Some(grandchild),
        ..Script::default()
    };
    let lane = world.add(
        spec("c_s5", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.drive_bounded(100_000);
    (world, lane)
}

const HOLDS_20_S: Grandchild = Grandchild {
    holds_for: Duration::from_secs(20),
    dies_on_term: true,
    in_group: true,
    writes: 100,
};

#[test]
fn a_grandchild_holding_stderr_is_signalled_after_the_drain_window() {
    let (world, lane) = grandchild_world(HOLDS_20_S, true);
    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::Completed);
    assert_eq!(r.exit_status, Some(0));
    assert_eq!(r.exited_offset_us, Some(10_000));
    // Drain window 250 ms after the exit, then TERM; the grandchild dies.
    assert_eq!(
        r.signals,
        [SignalMark {
            signal: Signal::Term,
            offset_us: 260_000
        }]
    );
    assert!(r.descendants_signalled);
    assert_eq!(r.stream_end, StreamEnd::ClosedAfterGroupSignalled);
    assert_eq!(r.offset_of(State::Completed), Some(ms(260)));
    // It wrote at 50, 100, …, 250 ms.
    assert_eq!(r.stderr_bytes_seen, 5 * 100);
    assert!(!world.lanes[lane].helper.group_alive());
}

/// The direct child exited at 10 ms: only a descendant is left, so the
/// KILL follows the TERM after the escapee wait (100 ms), not the 5 s
/// shutdown grace meant for a live helper.
#[test]
fn a_grandchild_that_ignores_term_is_killed_after_the_escapee_wait() {
    let (world, lane) = grandchild_world(
        Grandchild {
            dies_on_term: false,
            ..HOLDS_20_S
        },
        true,
    );
    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::Completed);
    assert_eq!(
        r.signals,
        [
            SignalMark {
                signal: Signal::Term,
                offset_us: 260_000
            },
            SignalMark {
                signal: Signal::Kill,
                offset_us: 360_000
            },
        ]
    );
    assert_eq!(r.stream_end, StreamEnd::ClosedAfterGroupSignalled);
    assert_eq!(r.offset_of(State::Completed), Some(ms(360)));
    // It wrote at 50, 100, …, 350 ms.
    assert_eq!(r.stderr_bytes_seen, 7 * 100);
    assert!(!world.lanes[lane].helper.group_alive());
}

/// `setsid sleep 20 & echo ok`: the holder left the group, so no signal
/// reaches it. Exit at 10 ms, drain window to 260 ms, TERM; KILL after the
/// escapee wait (360 ms), and the streams are given up after another
/// (460 ms): `completed` within the drain window plus 200 ms of the exit,
/// not the 7.25 s of grace and kill wait.
#[test]
fn a_grandchild_out_of_reach_is_abandoned_after_the_escapee_waits() {
    let (world, lane) = grandchild_world(
        Grandchild {
            in_group: false,
            ..HOLDS_20_S
        },
        true,
    );
    let r = world.lanes[lane].record();
    assert_eq!((r.state, r.exit_status), (State::Completed, Some(0)));
    assert_eq!(r.stream_end, StreamEnd::AbandonedOpen);
    assert!(r.descendants_signalled);
    assert_eq!(
        r.signals,
        [
            SignalMark {
                signal: Signal::Term,
                offset_us: 260_000
            },
            SignalMark {
                signal: Signal::Kill,
                offset_us: 360_000
            },
        ]
    );
    assert_eq!(r.offset_of(State::Completed), Some(ms(460)));
    let exited = Duration::from_micros(r.exited_offset_us.unwrap());
    assert_eq!(r.offset_of(State::Completed).unwrap() - exited, ms(450));
    // It wrote at 50, 100, …, 450 ms.
    assert_eq!(r.stderr_bytes_seen, 9 * 100);
    assert_eq!(world.count(lane, "AbandonStreams"), 1);
    assert_eq!(world.first(lane, "AbandonStreams"), Some(ms(460)));
}

#[test]
fn without_signalling_descendants_the_streams_are_abandoned_at_the_window() {
    let (world, lane) = grandchild_world(HOLDS_20_S, false);
    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::Completed);
    assert_eq!(r.stream_end, StreamEnd::AbandonedOpen);
    assert!(r.signals.is_empty());
    assert!(!r.descendants_signalled);
    assert_eq!(r.offset_of(State::Completed), Some(ms(260)));
    assert_eq!(r.stderr_bytes_seen, 500);
}

#[test]
fn invalid_bytes_and_a_line_larger_than_the_budget() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let mut stderr = b"bad:\xff\xfe\xc3(\xe2\x82 end\n".to_vec();
    stderr.extend(std::iter::repeat_n(b'x', 1_000_000));
    stderr.extend_from_slice("\nlast line \u{20ac}\n".as_bytes());
    let total = stderr.len() as u64;
    let script = Script {
        stderr_at_spawn: stderr,
        exit: Some((ms(5), 1)),
        ..Script::default()
    };
    let lane = world.add(
        spec("c_s6", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.drive_bounded(1_000);

    let l = &world.lanes[lane];
    let r = l.record();
    assert_eq!(r.state, State::FailedLocal);
    assert_eq!(r.exit_status, Some(1));
    assert_eq!(
        (r.stderr_bytes_seen, r.stderr_bytes_retained),
        (total, 16_384)
    );
    let stderr = &l.outcome.as_ref().unwrap().stderr;
    let tail = "\nlast line \u{20ac}\n";
    let expected = format!(
        "[stderr truncated: kept last 16384 of {total} bytes]\n{}{tail}",
        "x".repeat(16_384 - tail.len())
    );
    assert_eq!(stderr.render_unredacted(), expected);
    // Redacted, the giant line cut by the window shows as it is: a run of
    // one byte holds no secret, so the cut hides nothing of it.
    assert_eq!(stderr.render(), expected);
}

#[test]
fn a_window_starting_inside_a_character_is_trimmed() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let script = Script {
        stderr_at_spawn: "\u{20ac}".repeat(10_000).into_bytes(),
        ..Script::default()
    };
    let lane = world.add(
        spec("c_s6b", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.drive_bounded(1_000);
    let stderr = &world.lanes[lane].outcome.as_ref().unwrap().stderr;
    let text = stderr.render_unredacted();
    // No secret is made of "€": the cut hides nothing.
    assert_eq!(stderr.render(), text);
    // 16384 = 3 × 5461 + 1: the window starts with the last byte of a "€".
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept last 16384 of 30000 bytes]\n{}",
            "\u{20ac}".repeat(5461)
        )
    );
}

#[test]
fn fifty_concurrent_calls_at_their_limit_hold_the_process_budget() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let lanes: Vec<usize> = (0..50)
        .map(|i| {
            let script = Script {
                flood: Some((65_536, ms(1))),
                exit: Some((ms(100), 0)),
                ..Script::default()
            };
            world.add(
                spec(&format!("c_s7_{i}"), CallKind::Action),
                s.clone(),
                script,
                false,
                Decision::Never,
            )
        })
        .collect();
    world.drive_bounded(100_000);

    assert_eq!(world.pool.peak(), 262_144);
    assert!(world.peak_in_use <= 262_144);
    let mut retained = 0;
    for (i, &lane) in lanes.iter().enumerate() {
        let l = &world.lanes[lane];
        let r = l.record();
        assert_eq!(l.finished_count, 1);
        assert_eq!(r.state, State::Completed);
        assert_eq!(r.stderr_bytes_seen, 101 * 65_536);
        // Fifty budgets do not fit: every call keeps its fair share of the
        // pool (262,144 / 50), whoever came first, and its marker says
        // that the shared pool held it back.
        assert_eq!(r.stderr_bytes_retained, 5_242, "call {i}");
        assert!(r.stderr_retention_limited, "call {i}");
        let excerpt = l.outcome.as_ref().unwrap().stderr.render_unredacted();
        assert_eq!(
            excerpt.lines().next(),
            Some(
                "[stderr truncated: kept last 5242 of 6619136 bytes; the pool shared by all calls held it back]"
            ),
            "call {i}"
        );
        retained += r.stderr_bytes_retained;
    }
    assert_eq!(retained, 50 * 5_242);
    world.lanes.clear();
    assert_eq!(world.pool.in_use(), 0);
}

#[test]
fn client_disconnect_with_finish_policy_runs_to_the_end() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let script = Script {
        exit: Some((ms(200), 0)),
        ..Script::default()
    };
    let lane = world.add(
        spec("c_s8", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.lanes[lane].disconnect_at = Some(ms(50));
    world.drive_bounded(1_000);
    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::Completed);
    assert!(r.client_disconnected);
    assert_eq!(r.on_client_disconnect, Some(DisconnectPolicy::Finish));
    assert!(r.signals.is_empty());
    assert_eq!(r.offset_of(State::Completed), Some(ms(200)));
}

#[test]
fn client_disconnect_with_cancel_policy_stops_the_helper() {
    let mut world = World::new(Config::default());
    let mut s = settings(&world);
    s.on_client_disconnect = DisconnectPolicy::Cancel;
    let lane = world.add(
        spec("c_s8c", CallKind::Action),
        s,
        flood_forever(OnTerm::Die(ms(1))),
        false,
        Decision::Never,
    );
    world.lanes[lane].disconnect_at = Some(ms(50));
    world.drive_bounded(10_000);
    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!(r.cancel_reason, Some(CancelReason::ClientDisconnected));
    assert_eq!(r.on_client_disconnect, Some(DisconnectPolicy::Cancel));
    assert_eq!(r.exit_signal, Some(15));
    assert_eq!(r.exited_offset_us, Some(51_000));
}

#[test]
fn a_disconnect_while_the_card_is_shown_cancels_before_dispatch_under_either_policy() {
    for policy in [DisconnectPolicy::Finish, DisconnectPolicy::Cancel] {
        let mut world = World::new(Config::default());
        let mut s = settings(&world);
        s.on_client_disconnect = policy;
        let lane = world.add(
            spec("c_s8a", CallKind::Action),
            s,
            Script::default(),
            true,
            Decision::Never,
        );
        world.lanes[lane].disconnect_at = Some(ms(50));
        world.drive_bounded(1_000);
        let r = world.lanes[lane].record();
        // Nobody is left to answer the card: waiting for it to expire
        // (two minutes) would only hold the call open.
        assert_eq!(r.state, State::CancelledBeforeDispatch, "{policy:?}");
        assert_eq!(r.cancel_reason, Some(CancelReason::ClientDisconnected));
        assert!(r.client_disconnected);
        assert_eq!(r.approval, ApprovalDecision::Undecided);
        assert_eq!((r.pid, r.stream_end), (None, StreamEnd::NotStarted));
        assert_eq!(world.count(lane, "Spawn"), 0);
        assert_eq!(r.offset_of(State::CancelledBeforeDispatch), Some(ms(50)));
    }
}

#[test]
fn a_helper_that_ignores_term_is_killed_exactly_after_the_grace() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let lane = world.add(
        spec("c_s9", CallKind::Action),
        s,
        flood_forever(OnTerm::Ignore),
        false,
        Decision::Never,
    );
    world.lanes[lane].cancel_at = Some(ms(100));
    world.drive_bounded(100_000);
    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::Killed);
    assert_eq!((r.exit_status, r.exit_signal), (None, Some(9)));
    assert_eq!(
        r.signals,
        [
            SignalMark {
                signal: Signal::Term,
                offset_us: 100_000
            },
            SignalMark {
                signal: Signal::Kill,
                offset_us: 5_100_000
            },
        ]
    );
    assert_eq!(r.exited_offset_us, Some(5_100_000));
    assert_eq!(r.stream_end, StreamEnd::ReaderCompletedAfterCancel);
    assert_eq!(r.stderr_bytes_retained, 16_384);
}

#[test]
fn the_seed_record_example_serialises_with_exactly_its_names_and_values() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let script = Script {
        flood: Some((18_432, ms(1))),
        flood_total: Some(184_320),
        exit: None,
        unreapable: true,
        ..Script::default()
    };
    let lane = world.add(
        spec("c_7f2a", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.lanes[lane].cancel_at = Some(ms(50));
    world.drive_bounded(10_000);
    let json: serde_json::Value =
        serde_json::from_str(&world.lanes[lane].record().to_json()).unwrap();
    let seed: serde_json::Value = serde_json::from_str(
        r#"{"call_id":"c_7f2a","state":"cancelled_after_dispatch",
            "stderr_bytes_seen":184320,"stderr_bytes_retained":16384,
            "stderr_truncated":true,"exit_status":null,
            "stream_end":"reader_completed_after_cancel"}"#,
    )
    .unwrap();
    for (key, value) in seed.as_object().unwrap() {
        assert_eq!(&json[key], value, "{key}");
    }
    let names: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for required in [
        "call_id",
        "session_id",
        "kind",
        "action",
        "target",
        "approval",
        "state",
        "cancel_reason",
        "exit_status",
        "exit_signal",
        "stream_end",
        "stderr_bytes_seen",
        "stderr_bytes_retained",
        "stderr_truncated",
        "stderr_retain",
        "stderr_fingerprint",
        "stdout_bytes_seen",
        "debug",
        "descendants_signalled",
        "received_at",
        "timeline",
    ] {
        assert!(names.contains(&required), "missing {required}");
    }
    assert_eq!(json["exit_signal"], serde_json::Value::Null);
    assert_eq!(json["stderr_retain"], "tail");
    assert_eq!(json["received_at"], "1970-01-01T00:00:00.000Z");
}

#[test]
fn cancel_before_dispatch_spawns_nothing() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let lane = world.add(
        spec("c_cb", CallKind::Action),
        s,
        Script::default(),
        true,
        Decision::Never,
    );
    world.lanes[lane].cancel_at = Some(ms(30));
    world.drive_bounded(1_000);
    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::CancelledBeforeDispatch);
    assert_eq!(r.approval, ApprovalDecision::Undecided);
    assert_eq!((r.pid, r.stream_end), (None, StreamEnd::NotStarted));
    assert_eq!(world.count(lane, "Spawn"), 0);
    assert_eq!(r.offset_of(State::CancelledBeforeDispatch), Some(ms(30)));
}

#[test]
fn a_denied_call_spawns_nothing() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let lane = world.add(
        spec("c_d", CallKind::Action),
        s,
        Script::default(),
        true,
        Decision::Deny(ms(40)),
    );
    world.drive_bounded(1_000);
    let r = world.lanes[lane].record();
    assert_eq!(
        (r.state, r.approval),
        (State::Denied, ApprovalDecision::Denied)
    );
    assert_eq!(world.count(lane, "Spawn"), 0);
    assert_eq!(r.offset_of(State::Denied), Some(ms(40)));
}

#[test]
fn the_attempt_is_audited_before_the_card_and_the_spawn() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let lane = world.add(
        spec("c_a", CallKind::Action),
        s,
        Script::default(),
        true,
        Decision::Grant(ms(5)),
    );
    world.drive_bounded(1_000);
    let names: Vec<&str> = world.trace.iter().map(|(_, _, n)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Audit(received->validated)",
            "Audit(attempt)",
            "Audit(validated->awaiting_approval)",
            "Audit(card)",
            "ShowApprovalCard",
            "Audit(awaiting_approval->authorized)",
            "Spawn",
            "Audit(authorized->dispatched)",
            "Audit(dispatched->completed)",
            "Audit(final completed)",
            "Finished(completed)",
        ]
    );
    assert_eq!(
        world.lanes[lane].record().offset_of(State::Completed),
        Some(ms(15))
    );
}

#[test]
fn spawn_failure_is_failed_before_dispatch_with_the_error() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let script = Script {
        spawn_error: Some((
            std::io::ErrorKind::NotFound,
            "No such file or directory (os error 2)".into(),
        )),
        ..Script::default()
    };
    let lane = world.add(
        spec("c_sf", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.drive_bounded(1_000);
    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::FailedBeforeDispatch);
    assert_eq!(
        r.failure.as_deref(),
        Some("No such file or directory (os error 2)")
    );
    assert_eq!(r.spawn_error_kind.as_deref(), Some("not_found"));
    assert_eq!(
        (r.pid, r.exit_status, r.stream_end),
        (None, None, StreamEnd::NotStarted)
    );
}

#[test]
fn exit_codes_and_results_decide_the_state_without_a_cancel() {
    let cases = [
        (0, None, State::Completed),
        (3, None, State::FailedLocal),
        (1, Some(ResultKind::RemoteFailure), State::FailedRemote),
        (0, Some(ResultKind::RemoteFailure), State::FailedRemote),
        (0, Some(ResultKind::Success), State::Completed),
    ];
    for (code, result, expected) in cases {
        let mut world = World::new(Config::default());
        let s = settings(&world);
        let script = Script {
            exit: Some((ms(20), code)),
            result: result.map(|k| (ms(5), k)),
            ..Script::default()
        };
        let lane = world.add(
            spec("c_x", CallKind::Action),
            s,
            script,
            false,
            Decision::Never,
        );
        world.drive_bounded(1_000);
        let r = world.lanes[lane].record();
        assert_eq!(
            (r.state, r.exit_status, r.result_kind),
            (expected, Some(code), result)
        );
    }
}

#[test]
fn a_helper_never_reaped_without_cancel_is_unknown() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let script = Script {
        unreapable: true,
        ..Script::default()
    };
    let lane = world.add(
        spec("c_u", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.drive_bounded(1_000);
    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::Unknown);
    assert_eq!((r.exit_status, r.exit_signal), (None, None));
}

#[test]
fn the_opt_in_kill_ceiling_stops_an_abusive_helper() {
    let config = Config {
        stderr_kill_after_bytes: Some(1 << 20),
        ..Config::default()
    };
    let mut world = World::new(config);
    let s = settings(&world);
    let lane = world.add(
        spec("c_k", CallKind::Action),
        s,
        flood_forever(OnTerm::Die(ms(1))),
        false,
        Decision::Never,
    );
    world.drive_bounded(10_000);
    let r = world.lanes[lane].record();
    // The 17th chunk (at 16 ms) crosses 1 MiB.
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!(r.cancel_reason, Some(CancelReason::StderrCeiling));
    assert_eq!(
        r.signals,
        [SignalMark {
            signal: Signal::Term,
            offset_us: 16_000
        }]
    );
    assert_eq!(r.stderr_bytes_seen, 18 * 65_536);
}

#[test]
fn without_a_ceiling_a_flood_never_stops_the_helper() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let script = Script {
        flood: Some((65_536, ms(1))),
        exit: Some((ms(500), 0)),
        ..Script::default()
    };
    let lane = world.add(
        spec("c_nk", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.drive_bounded(10_000);
    let r = world.lanes[lane].record();
    assert_eq!((r.state, r.cancel_reason), (State::Completed, None));
    assert!(r.signals.is_empty());
    assert_eq!(r.stderr_bytes_seen, 501 * 65_536);
}

#[test]
fn misuse_is_a_typed_error_and_changes_nothing() {
    let world = World::new(Config::default());
    let pool = world.pool.clone();
    let mut call = spillguard_core::Call::new(
        spec("c_m", CallKind::Discovery),
        settings(&world),
        &pool,
        world.epoch,
        std::time::SystemTime::UNIX_EPOCH,
    );
    let err = call
        .handle(world.epoch, Input::Spawned { pid: 1 })
        .unwrap_err();
    assert_eq!(
        err,
        CallError::InvalidTransition {
            state: State::Received,
            input: "spawned"
        }
    );
    assert_eq!(
        err.to_string(),
        "no transition for input `spawned` in state `received`"
    );
    assert_eq!(
        call.handle(
            world.epoch,
            Input::Validated {
                needs_approval: true
            }
        ),
        Err(CallError::DiscoveryNeedsApproval)
    );
    assert_eq!(call.state(), State::Received);
    assert!(call.poll_action().is_none());
    // Spawned before the spawn was handed out is refused too.
    call.handle(
        world.epoch,
        Input::Validated {
            needs_approval: false,
        },
    )
    .unwrap();
    assert_eq!(call.state(), State::Authorized);
    while let Some(a) = call.poll_action() {
        if matches!(a, spillguard_core::Action::Spawn(_)) {
            break;
        }
    }
    call.handle(world.epoch, Input::Spawned { pid: 7 }).unwrap();
    assert_eq!(
        call.handle(world.epoch, Input::ApprovalGranted),
        Err(CallError::InvalidTransition {
            state: State::Dispatched,
            input: "approval_granted"
        })
    );
}

#[test]
fn terminal_states_absorb_everything() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let lane = world.add(
        spec("c_t", CallKind::Action),
        s,
        Script::default(),
        false,
        Decision::Never,
    );
    world.drive_bounded(1_000);
    let now = world.now + ms(1);
    let call = &mut world.lanes[lane].call;
    assert_eq!(call.state(), State::Completed);
    let _ = call.handle(now, Input::Cancel(CancelReason::Requested));
    let _ = call.handle(now, Input::Stderr(&pattern(0, 100)));
    call.handle(now, Input::Exited(spillguard_core::ExitStatus::code(1)))
        .unwrap();
    call.handle(now, Input::ApprovalDenied).unwrap();
    assert_eq!(call.state(), State::Completed);
    assert!(call.poll_action().is_none());
    assert_eq!(call.poll_timeout(), None);
}

#[test]
fn a_cancel_while_the_spawn_is_in_flight_stops_the_helper_once_spawned() {
    let world = World::new(Config::default());
    let pool = world.pool.clone();
    let t0 = world.epoch;
    let mut call = spillguard_core::Call::new(
        spec("c_r", CallKind::Action),
        settings(&world),
        &pool,
        t0,
        std::time::SystemTime::UNIX_EPOCH,
    );
    call.handle(
        t0,
        Input::Validated {
            needs_approval: false,
        },
    )
    .unwrap();
    let spawn = std::iter::from_fn(|| call.poll_action())
        .any(|a| matches!(a, spillguard_core::Action::Spawn(_)));
    assert!(spawn);
    let _ = call.handle(t0 + ms(1), Input::Cancel(CancelReason::Requested));
    assert_eq!(call.state(), State::Authorized);
    call.handle(t0 + ms(2), Input::Spawned { pid: 9 }).unwrap();
    let actions: Vec<String> = std::iter::from_fn(|| call.poll_action())
        .map(|a| format!("{a:?}"))
        .collect();
    assert!(
        actions
            .iter()
            .any(|a| a == "SignalGroup { pgid: 9, signal: Term }"),
        "{actions:?}"
    );
    assert_eq!(
        call.poll_timeout(),
        Some(t0 + ms(2) + Duration::from_secs(5))
    );
    // A cancel whose spawn was still queued removes it instead.
    let mut queued = spillguard_core::Call::new(
        spec("c_q", CallKind::Action),
        settings(&world),
        &pool,
        t0,
        std::time::SystemTime::UNIX_EPOCH,
    );
    queued
        .handle(
            t0,
            Input::Validated {
                needs_approval: false,
            },
        )
        .unwrap();
    let _ = queued.handle(t0, Input::Cancel(CancelReason::Requested));
    assert_eq!(queued.state(), State::CancelledBeforeDispatch);
    let spawned = std::iter::from_fn(|| queued.poll_action())
        .any(|a| matches!(a, spillguard_core::Action::Spawn(_)));
    assert!(!spawned);
}

#[test]
fn an_attempt_that_cannot_be_audited_is_never_dispatched() {
    for needs_approval in [false, true] {
        let mut world = World::new(Config::default());
        let s = settings(&world);
        let lane = world.add(
            spec("c_af", CallKind::Action),
            s,
            Script::default(),
            needs_approval,
            Decision::Grant(ms(5)),
        );
        // The transition into `validated` is written; the attempt is not.
        world.lanes[lane].audit_fails_after = Some(1);
        world.drive_bounded(1_000);
        let l = &world.lanes[lane];
        let r = l.record();
        assert_eq!(r.state, State::FailedBeforeDispatch);
        assert_eq!(r.failure.as_deref(), Some("audit log: disk full"));
        // The attempt and every event after it failed: the outcome counts
        // them all, those after the end included.
        assert_eq!(r.pid, None);
        assert_eq!(r.audit_failures, l.audit_failures as u64);
        assert!(r.audit_failures >= 3, "{}", r.audit_failures);
        assert_eq!(world.count(lane, "Spawn"), 0);
        assert_eq!(world.count(lane, "ShowApprovalCard"), 0);
        assert_eq!(l.cards.len(), 0);
    }
}

#[test]
fn with_fail_open_audit_failures_are_counted_and_the_call_runs() {
    let mut world = World::new(Config::default());
    let mut s = settings(&world);
    s.audit_fail_closed = false;
    let lane = world.add(
        spec("c_ao", CallKind::Action),
        s,
        Script::default(),
        false,
        Decision::Never,
    );
    world.lanes[lane].audit_fails_after = Some(1);
    world.drive_bounded(1_000);
    let l = &world.lanes[lane];
    let r = l.record();
    assert_eq!((r.state, r.exit_status), (State::Completed, Some(0)));
    // Attempt, two transitions, the final transition and the final record:
    // the last two failed after the record was built, and the outcome
    // still counts them (the log's copy of the record cannot).
    assert_eq!(r.audit_failures, 5);
    assert_eq!(l.audit_failures, 5);
    let logged = l
        .audit
        .iter()
        .filter(|e| matches!(e.kind, AuditKind::Final(_)))
        .count();
    assert_eq!(logged, 0);
}

/// A dispatched call (pid 4242) whose every delay is `long`, except those
/// `tweak` changes, with its actions so far carried out.
fn dispatched_with(
    world: &World,
    long: Duration,
    tweak: impl FnOnce(&mut CallSettings),
) -> spillguard_core::Call {
    use std::time::SystemTime;

    let mut settings = settings(world);
    settings.deadline = Some(long);
    settings.approval_timeout = long;
    settings.shutdown_grace = long;
    settings.post_exit_drain = long;
    settings.kill_wait = long;
    tweak(&mut settings);
    let t0 = world.epoch;
    let spec = spec("c_long", CallKind::Action);
    let mut call =
        spillguard_core::Call::new(spec, settings, &world.pool, t0, SystemTime::UNIX_EPOCH);
    call.handle(
        t0,
        Input::Validated {
            needs_approval: true,
        },
    )
    .unwrap();
    carry_out(&mut call);
    assert_eq!(call.state(), State::AwaitingApproval);
    assert_eq!(call.poll_timeout(), None, "approval deadline");
    call.handle(t0, Input::ApprovalGranted).unwrap();
    carry_out(&mut call);
    call.handle(t0, Input::Spawned { pid: 4242 }).unwrap();
    carry_out(&mut call);
    call
}

/// The signals the call asked for, and its record if it finished.
fn carry_out(
    call: &mut spillguard_core::Call,
) -> (Vec<Signal>, Option<spillguard_core::CallRecord>) {
    use spillguard_core::Action;

    let (mut signals, mut record) = (Vec::new(), None);
    while let Some(action) = call.poll_action() {
        match action {
            Action::SignalGroup { signal, .. } => signals.push(signal),
            Action::Finished(outcome) => record = Some(outcome.record),
            _ => {}
        }
    }
    (signals, record)
}

/// Delays too long for the clock (`Duration::MAX` from a host's options)
/// arm no timer instead of overflowing: the call waits for its inputs and
/// ends by them. Each delay is armed once here: the approval deadline, the
/// call deadline, the post-exit drain, the grace, and the kill wait.
#[test]
fn delays_too_long_for_the_clock_never_come_and_never_overflow() {
    use spillguard_core::ExitStatus;

    let world = World::new(Config::default());
    let t0 = world.epoch;

    // Approval deadline, call deadline, then the drain window: the helper
    // exits with its streams open.
    let mut call = dispatched_with(&world, Duration::MAX, |_| {});
    assert_eq!(call.poll_timeout(), None, "call deadline");
    call.handle(t0 + ms(5), Input::Exited(ExitStatus::code(0)))
        .unwrap();
    assert_eq!(call.poll_timeout(), None, "post-exit drain");
    call.handle(t0 + ms(6), Input::StdoutEof).unwrap();
    call.handle(t0 + ms(6), Input::StderrEof).unwrap();
    let (signals, record) = carry_out(&mut call);
    let record = record.unwrap();
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.stream_end, StreamEnd::Eof);
    assert_eq!(signals, []);

    // The grace: a cancel sends TERM, and no KILL ever follows.
    let mut call = dispatched_with(&world, Duration::MAX, |_| {});
    let _ = call.handle(t0 + ms(1), Input::Cancel(CancelReason::Requested));
    assert_eq!(carry_out(&mut call).0, [Signal::Term]);
    assert_eq!(call.poll_timeout(), None, "shutdown grace");

    // The kill wait: a 1 s grace ends in KILL, then nothing is due.
    let mut call = dispatched_with(&world, Duration::MAX, |settings| {
        settings.shutdown_grace = Duration::from_secs(1);
    });
    let _ = call.handle(t0 + ms(1), Input::Cancel(CancelReason::Requested));
    assert_eq!(carry_out(&mut call).0, [Signal::Term]);
    let grace_end = call.poll_timeout().unwrap();
    assert_eq!(grace_end, t0 + ms(1001));
    let _ = call.handle(grace_end, Input::Timeout);
    assert_eq!(carry_out(&mut call).0, [Signal::Kill]);
    assert_eq!(call.poll_timeout(), None, "kill wait");
    call.handle(grace_end + ms(1), Input::Exited(ExitStatus::signal(9)))
        .unwrap();
    call.handle(grace_end + ms(1), Input::StdoutEof).unwrap();
    call.handle(grace_end + ms(1), Input::StderrEof).unwrap();
    let record = carry_out(&mut call).1.unwrap();
    assert_eq!(record.state, State::Killed);
    assert_eq!(record.exit_signal, Some(9));
}

/// A cancel sent TERM while the helper lived; it died at once, but a
/// descendant that ignores TERM holds stderr. From the exit on, the rest of
/// the grace is cut to the escapee wait: KILL 100 ms after the exit, not at
/// the end of the 5 s grace. The state stays `cancelled_after_dispatch`:
/// the helper ended within the grace, KILL only reached the descendant.
#[test]
fn an_exit_during_the_grace_cuts_the_wait_for_descendants_to_the_escapee_wait() {
    let mut world = World::new(Config::default());
    let s = settings(&world);
    let script = Script {
        exit: None,
        on_term: OnTerm::Die(ms(20)),
        grandchild: Some(Grandchild {
            dies_on_term: false,
            ..HOLDS_20_S
        }),
        ..Script::default()
    };
    let lane = world.add(
        spec("c_cut", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.lanes[lane].cancel_at = Some(ms(1_000));
    world.drive_bounded(100_000);
    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!((r.exit_status, r.exit_signal), (None, Some(15)));
    assert_eq!(r.exited_offset_us, Some(1_020_000));
    assert_eq!(
        r.signals,
        [
            SignalMark {
                signal: Signal::Term,
                offset_us: 1_000_000
            },
            SignalMark {
                signal: Signal::Kill,
                offset_us: 1_120_000
            },
        ]
    );
    assert!(r.descendants_signalled);
    assert_eq!(r.stream_end, StreamEnd::ReaderCompletedAfterCancel);
    assert_eq!(r.offset_of(State::CancelledAfterDispatch), Some(ms(1_120)));
    assert!(!world.lanes[lane].helper.group_alive());
}

/// The same with a holder out of reach: after the exit, KILL and giving up
/// the streams each come one escapee wait later.
#[test]
fn an_exit_during_the_grace_with_an_escapee_gives_up_two_escapee_waits_later() {
    let mut world = World::new(Config::default());
    let mut s = settings(&world);
    s.escapee_wait = ms(40);
    let script = Script {
        exit: None,
        on_term: OnTerm::Die(ms(20)),
        grandchild: Some(Grandchild {
            in_group: false,
            ..HOLDS_20_S
        }),
        ..Script::default()
    };
    let lane = world.add(
        spec("c_cut2", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    world.lanes[lane].cancel_at = Some(ms(1_000));
    world.drive_bounded(100_000);
    let r = world.lanes[lane].record();
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!(r.exited_offset_us, Some(1_020_000));
    assert_eq!(
        r.signals,
        [
            SignalMark {
                signal: Signal::Term,
                offset_us: 1_000_000
            },
            SignalMark {
                signal: Signal::Kill,
                offset_us: 1_060_000
            },
        ]
    );
    assert_eq!(r.stream_end, StreamEnd::AbandonedOpen);
    assert_eq!(r.offset_of(State::CancelledAfterDispatch), Some(ms(1_100)));
}

/// The spawn order carries the call's bounds and its longest life: the
/// deadline, the shutdown grace and one second more; none without a
/// deadline, or with one too long for the clock.
#[test]
fn the_spawn_order_carries_the_bounds_and_the_longest_life() {
    use spillguard_core::{Action, Limits};
    let world = World::new(Config::default());
    for (deadline, want) in [
        (
            Some(Duration::from_secs(3)),
            Some(Duration::from_secs(3 + 5 + 1)),
        ),
        (None, None),
        (Some(Duration::MAX), None),
    ] {
        let config = Config::default();
        let mut settings = CallSettings::action(&config);
        settings.deadline = deadline;
        settings.confinement.limits = Limits {
            pids_max: Some(7),
            ..Limits::default()
        };
        let pool = spillguard_core::RetentionPool::unlimited();
        let mut call = spillguard_core::Call::new(
            spec("c_order", CallKind::Action),
            settings,
            &pool,
            world.epoch,
            std::time::SystemTime::UNIX_EPOCH,
        );
        call.handle(
            world.epoch,
            Input::Validated {
                needs_approval: false,
            },
        )
        .unwrap();
        let order = std::iter::from_fn(|| call.poll_action())
            .find_map(|action| match action {
                Action::Spawn(order) => Some(order),
                _ => None,
            })
            .expect("a spawn");
        assert_eq!(order.ends_within, want, "{deadline:?}");
        assert_eq!(order.confinement.limits.pids_max, Some(7));
    }
}
