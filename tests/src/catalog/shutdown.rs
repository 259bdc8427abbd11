//! Shutdown: a cancel during cleanup, a grandchild holding stderr, a client
//! that goes away, and a helper that ignores SIGTERM.

use std::time::Duration;

use spillguard_core::{CancelReason, DisconnectPolicy, Signal, State, StreamEnd};

use super::*;
use crate::expect::{
    Bounds, Bytes, CallExpect, Interval, Mark, PoolPeak, ScenarioExpect, StderrText,
};
use crate::scenario::{CallPlan, HostSettings, Invocation, Scenario};

pub(super) fn s4_success_then_cancel_during_cleanup() -> Scenario {
    let cleanup_ms = 1_000;
    let cancel_at = ms(250);
    let after_term = 64 * 1024;
    let invocation = Invocation::test_helper(&[
        "--line",
        LINE,
        "--stderr-bytes",
        "2M",
        "--stdout-json",
        RESULT,
        "--ignore-sigterm",
        "--write-after-sigterm",
        "64K",
        "--sleep-ms",
        &cleanup_ms.to_string(),
        "--exit",
        "0",
    ]);
    Scenario {
        name: "a_succeeded_action_cancelled_during_cleanup_keeps_its_result",
        id: "S4",
        summary: "result on stdout, 2 MiB of stderr, cancel while it cleans up, clean exit 0",
        host: HostSettings {
            shutdown_grace: Some(ms(3_000)),
            ..HostSettings::default()
        },
        calls: vec![CallPlan {
            cancel_after_dispatch: Some(cancel_at),
            ..CallPlan::action(
                "c_s4",
                invocation,
                CallExpect {
                    // Exit 0 after the stop request: still cancelled, never
                    // completed or failed, and the result is kept.
                    state: State::CancelledAfterDispatch,
                    states: stopped(State::CancelledAfterDispatch),
                    cancel_reason: Some(CancelReason::Requested),
                    exit_status: Some(0),
                    stream_end: StreamEnd::ReaderCompletedAfterCancel,
                    signals: vec![Signal::Term],
                    stderr_seen: Bytes::Exact(2 * MIB + after_term),
                    stderr_retained: Bytes::Exact(PER_CALL),
                    stderr_truncated: true,
                    stderr_text: StderrText::Repeated {
                        unit: AFTER_SIGTERM_UNIT,
                        stream_len: Some(after_term),
                    },
                    stdout: RESULT_LINE,
                    // It ends its cleanup on its own, within the grace.
                    cancel_to_exit: Some(Bounds::ms(100, 2_900)),
                    ..CallExpect::default()
                },
            )
        }],
        expect: ScenarioExpect {
            pool_peak: PoolPeak::Exact(PER_CALL + MARGIN),
            retained_sum: Some(PER_CALL),
        },
    }
}

pub(super) fn s5_grandchild_holds_stderr() -> Scenario {
    let drain = ms(200);
    Scenario {
        name: "a_grandchild_holding_stderr_is_signalled_after_the_drain_window",
        id: "S5",
        summary: "the helper exits 0; its grandchild holds stderr for 20 s",
        host: HostSettings {
            post_exit_drain: Some(drain),
            shutdown_grace: Some(ms(300)),
            ..HostSettings::default()
        },
        calls: vec![CallPlan::action(
            "c_s5",
            Invocation::test_helper(&["--grandchild-hold-ms", "20000", "--exit", "0"]),
            CallExpect {
                descendants_signalled: true,
                // The grandchild, dead of the TERM, was an orphan.
                orphans_reaped: 1,
                stream_end: StreamEnd::ClosedAfterGroupSignalled,
                signals: vec![Signal::Term],
                // One grandchild line per 50 ms until the TERM.
                stderr_seen: Bytes::Between(0, 40 * GRANDCHILD_UNIT.len() as u64),
                stderr_retained: Bytes::AllSeen,
                stderr_text: StderrText::Repeated {
                    unit: GRANDCHILD_UNIT,
                    stream_len: None,
                },
                intervals: vec![
                    Interval {
                        from: Mark::Exit,
                        to: Mark::Signal(0),
                        within: Bounds::at_least(drain, SLACK),
                    },
                    // The record is written within the window plus slack,
                    // not when the grandchild lets go 20 s later.
                    Interval {
                        from: Mark::Exit,
                        to: Mark::State(State::Completed),
                        within: Bounds::at_least(drain, SLACK),
                    },
                ],
                ..CallExpect::default()
            },
        )],
        expect: ScenarioExpect {
            pool_peak: PoolPeak::AtMost(PER_CALL),
            retained_sum: None,
        },
    }
}

pub(super) fn s8_disconnect_under_finish() -> Scenario {
    let run_ms = 600;
    let invocation = Invocation::test_helper(&[
        "--line",
        LINE,
        "--stderr-bytes",
        "1M",
        "--stdout-json",
        RESULT,
        "--sleep-ms",
        &run_ms.to_string(),
    ]);
    Scenario {
        name: "a_client_disconnect_under_the_finish_policy_runs_the_call_to_its_end",
        id: "S8a",
        summary: "the handle is dropped 200 ms into a 600 ms run; policy finish",
        host: HostSettings {
            on_client_disconnect: Some(DisconnectPolicy::Finish),
            ..HostSettings::default()
        },
        calls: vec![CallPlan {
            drop_after_dispatch: Some(ms(200)),
            ..CallPlan::action(
                "c_s8_finish",
                invocation,
                CallExpect {
                    client_disconnected: true,
                    on_client_disconnect: Some(DisconnectPolicy::Finish),
                    stderr_seen: Bytes::Exact(MIB),
                    stderr_retained: Bytes::Exact(PER_CALL),
                    stderr_truncated: true,
                    stderr_text: StderrText::NotChecked,
                    stdout: RESULT_LINE,
                    intervals: vec![Interval {
                        from: Mark::State(State::Dispatched),
                        to: Mark::Exit,
                        within: Bounds::timed_by_the_helper(ms(run_ms), SPAWN_LAG, SLACK),
                    }],
                    ..CallExpect::default()
                },
            )
        }],
        expect: ScenarioExpect {
            pool_peak: PoolPeak::Exact(PER_CALL + MARGIN),
            retained_sum: Some(PER_CALL),
        },
    }
}

pub(super) fn s8_disconnect_under_cancel() -> Scenario {
    let dropped_at = ms(200);
    Scenario {
        name: "a_client_disconnect_under_the_cancel_policy_stops_the_helper",
        id: "S8b",
        summary: "the handle is dropped 200 ms into a long flood; policy cancel",
        host: HostSettings {
            on_client_disconnect: Some(DisconnectPolicy::Cancel),
            shutdown_grace: Some(ms(300)),
            ..HostSettings::default()
        },
        calls: vec![CallPlan {
            drop_after_dispatch: Some(dropped_at),
            ..CallPlan::action(
                "c_s8_cancel",
                helper(flood_then_tick(MIB, 30_000)),
                CallExpect {
                    state: State::CancelledAfterDispatch,
                    states: stopped(State::CancelledAfterDispatch),
                    cancel_reason: Some(CancelReason::ClientDisconnected),
                    exit_status: None,
                    exit_signal: Some(15),
                    stream_end: StreamEnd::ReaderCompletedAfterCancel,
                    signals: vec![Signal::Term],
                    client_disconnected: true,
                    on_client_disconnect: Some(DisconnectPolicy::Cancel),
                    stderr_seen: Bytes::Between(MIB, 2 * MIB),
                    stderr_retained: Bytes::Exact(PER_CALL),
                    stderr_truncated: true,
                    stderr_text: StderrText::NotChecked,
                    cancel_to_exit: Some(Bounds::at_least(Duration::ZERO, SLACK)),
                    intervals: vec![Interval {
                        from: Mark::State(State::Dispatched),
                        to: Mark::Cancel,
                        within: Bounds::at_least(dropped_at, SLACK),
                    }],
                    ..CallExpect::default()
                },
            )
        }],
        expect: ScenarioExpect {
            pool_peak: PoolPeak::Exact(PER_CALL + MARGIN),
            retained_sum: Some(PER_CALL),
        },
    }
}

pub(super) fn s9_helper_ignores_sigterm() -> Scenario {
    let grace = ms(300);
    let invocation = Invocation::test_helper(&[
        "--line",
        LINE,
        "--stderr-bytes",
        "1M",
        "--ignore-sigterm",
        "--sleep-ms",
        "30000",
    ]);
    Scenario {
        name: "a_helper_that_ignores_sigterm_is_killed_after_the_grace",
        id: "S9",
        summary: "SIGTERM is ignored; SIGKILL follows after the 300 ms grace",
        host: HostSettings {
            shutdown_grace: Some(grace),
            ..HostSettings::default()
        },
        calls: vec![CallPlan {
            cancel_after_dispatch: Some(ms(300)),
            ..CallPlan::action(
                "c_s9",
                invocation,
                CallExpect {
                    state: State::Killed,
                    states: stopped(State::Killed),
                    cancel_reason: Some(CancelReason::Requested),
                    exit_status: None,
                    exit_signal: Some(9),
                    stream_end: StreamEnd::ReaderCompletedAfterCancel,
                    signals: vec![Signal::Term, Signal::Kill],
                    stderr_seen: Bytes::Exact(MIB),
                    stderr_retained: Bytes::Exact(PER_CALL),
                    stderr_truncated: true,
                    stderr_text: StderrText::Repeated {
                        unit: UNIT,
                        stream_len: None,
                    },
                    cancel_to_exit: Some(Bounds::at_least(grace, SLACK)),
                    intervals: vec![
                        Interval {
                            from: Mark::Signal(0),
                            to: Mark::Signal(1),
                            within: Bounds::at_least(grace, SLACK),
                        },
                        Interval {
                            from: Mark::Signal(1),
                            to: Mark::Exit,
                            within: Bounds::at_least(Duration::ZERO, SLACK),
                        },
                    ],
                    ..CallExpect::default()
                },
            )
        }],
        expect: ScenarioExpect {
            pool_peak: PoolPeak::Exact(PER_CALL + MARGIN),
            retained_sum: Some(PER_CALL),
        },
    }
}
