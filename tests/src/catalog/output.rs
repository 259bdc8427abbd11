//! What is kept: budgets, the marker and the text, under a deadline, with
//! invalid bytes and a giant line, and with many calls sharing the pool.

use std::time::Duration;

use spillguard_core::{CancelReason, Config, Signal, State, StreamEnd};

use super::*;
use crate::expect::{
    Bounds, Bytes, CallExpect, Interval, Mark, PoolPeak, RetentionLimited, ScenarioExpect,
    StderrText, tail_marker,
};
use crate::scenario::{CallPlan, HostSettings, Invocation, Scenario};

pub(super) fn s1_flood_past_a_short_deadline() -> Scenario {
    let deadline = ms(300);
    let grace = ms(300);
    Scenario {
        name: "a_flood_past_a_short_deadline_is_cancelled_keeping_the_last_16_kib",
        id: "S1",
        summary: "8 MiB of stderr then a line per ms; the 300 ms deadline stops it",
        host: HostSettings {
            deadline: Some(deadline),
            shutdown_grace: Some(grace),
            ..HostSettings::default()
        },
        calls: vec![CallPlan::action(
            "c_s1",
            helper(flood_then_tick(8 * MIB, 30_000)),
            CallExpect {
                state: State::CancelledAfterDispatch,
                states: stopped(State::CancelledAfterDispatch),
                cancel_reason: Some(CancelReason::Deadline),
                exit_status: None,
                exit_signal: Some(15),
                stream_end: StreamEnd::ReaderCompletedAfterCancel,
                signals: vec![Signal::Term],
                // The ticker writes 16 B/ms until the TERM: timing decides.
                stderr_seen: Bytes::Between(8 * MIB, 9 * MIB),
                stderr_retained: Bytes::Exact(PER_CALL),
                stderr_truncated: true,
                stderr_text: StderrText::Repeated {
                    unit: UNIT,
                    stream_len: None,
                },
                cancel_to_exit: Some(Bounds::at_least(Duration::ZERO, SLACK)),
                intervals: vec![
                    // The deadline runs from dispatch, whatever the flood.
                    Interval {
                        from: Mark::State(State::Dispatched),
                        to: Mark::Cancel,
                        within: Bounds::at_least(deadline, SLACK),
                    },
                    // TERM goes out in the step that stops the call.
                    Interval {
                        from: Mark::Cancel,
                        to: Mark::Signal(0),
                        within: Bounds::ZERO,
                    },
                ],
                ..CallExpect::default()
            },
        )],
        expect: ScenarioExpect {
            pool_peak: PoolPeak::Exact(PER_CALL + MARGIN),
            retained_sum: Some(PER_CALL),
        },
    }
}

pub(super) fn s6_invalid_bytes_and_a_giant_line() -> Scenario {
    let giant = 1_000_000u64;
    let seen = giant + 1 + INVALID_UTF8.len() as u64;
    let kept_x = PER_CALL as usize - 1 - INVALID_UTF8.len();
    let text = format!(
        "{}\n{}\n{}",
        tail_marker(PER_CALL, seen, false),
        "x".repeat(kept_x),
        String::from_utf8_lossy(INVALID_UTF8)
    );
    Scenario {
        name: "invalid_bytes_and_a_line_larger_than_the_budget_are_kept_exactly",
        id: "S6",
        summary: "one 1,000,000-byte line then invalid UTF-8; exit 1",
        host: HostSettings::default(),
        calls: vec![CallPlan::action(
            "c_s6",
            Invocation::test_helper(&["--giant-line", "1000000", "--invalid-utf8", "--exit", "1"]),
            CallExpect {
                state: State::FailedLocal,
                states: stopped(State::FailedLocal),
                exit_status: Some(1),
                stderr_seen: Bytes::Exact(seen),
                stderr_retained: Bytes::Exact(PER_CALL),
                stderr_truncated: true,
                stderr_text: StderrText::Exact(text),
                ..CallExpect::default()
            },
        )],
        expect: ScenarioExpect {
            pool_peak: PoolPeak::Exact(PER_CALL + MARGIN),
            retained_sum: Some(PER_CALL),
        },
    }
}

pub(super) fn s7_many_concurrent_floods() -> Scenario {
    let calls = 64;
    Scenario {
        name: "sixty_four_concurrent_floods_never_exceed_the_process_budget",
        id: "S7",
        summary: "64 calls each write 1 MiB of stderr on one host with a 256 KiB pool",
        host: HostSettings {
            config: Config::default(),
            ..HostSettings::default()
        },
        calls: vec![CallPlan {
            copies: calls,
            ..CallPlan::action(
                "c_s7",
                Invocation::test_helper(&["--line", LINE, "--stderr-bytes", "1M"]),
                CallExpect {
                    stderr_seen: Bytes::Exact(MIB),
                    // Once all 64 are live each is entitled to 4,096 bytes
                    // (262144 / 64); a call that finishes before the last
                    // ones start is under a larger share, so the figures
                    // depend on the schedule.
                    stderr_retained: Bytes::Between(0, PER_CALL),
                    stderr_truncated: true,
                    retention_limited: RetentionLimited::WhenRetainedBelow(PER_CALL),
                    stderr_text: StderrText::Repeated {
                        unit: UNIT,
                        stream_len: None,
                    },
                    ..CallExpect::default()
                },
            )
        }],
        expect: ScenarioExpect {
            pool_peak: PoolPeak::Exact(PROCESS),
            // The pool is used to the last byte, but the calls that drop
            // bytes first hold a 512-byte margin each: which ones is a
            // race, so the retained sum is not exact.
            retained_sum: None,
        },
    }
}
