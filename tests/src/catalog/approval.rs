//! Approval: a card that no flood delays, and an exit right after approval
//! while another call floods.

use std::time::Duration;

use spillguard_core::{ApprovalDecision, CallKind, State};

use super::*;
use crate::expect::{
    Bounds, Bytes, CallExpect, Interval, Mark, PoolPeak, ScenarioExpect, StderrText,
};
use crate::scenario::{Approver, CallPlan, HostSettings, Invocation, Milestone, Scenario, StartAt};

/// A discovery call: 4 KiB stderr budget, no approval, completes.
fn noisy_discovery(label: &'static str, start: StartAt, flood: u64, sleep_ms: u64) -> CallPlan {
    CallPlan {
        kind: CallKind::Discovery,
        start,
        ..CallPlan::action(
            label,
            helper(flood_then_tick(flood, sleep_ms)),
            CallExpect {
                // The ticker writes exactly one line per started millisecond.
                stderr_seen: Bytes::Exact(flood + sleep_ms * UNIT.len() as u64),
                stderr_retained: Bytes::Exact(DISCOVERY),
                stderr_truncated: true,
                stderr_text: StderrText::Repeated {
                    unit: UNIT,
                    stream_len: None,
                },
                ..CallExpect::default()
            },
        )
    }
}

pub(super) fn s2_noisy_discovery_before_a_card() -> Scenario {
    let answer = ms(50);
    let action = CallPlan {
        start: StartAt::After {
            call: 0,
            milestone: Milestone::Dispatched,
            delay: Duration::ZERO,
        },
        approver: Approver::Approve { after: answer },
        ..CallPlan::action(
            "c_s2_action",
            Invocation::test_helper(&["--stdout-json", RESULT]),
            CallExpect {
                states: approved(State::Completed),
                approval: ApprovalDecision::Granted,
                stdout: RESULT_LINE,
                time_to_card: Some(Bounds::ms(0, 100)),
                intervals: vec![
                    Interval {
                        from: Mark::State(State::Received),
                        to: Mark::State(State::AwaitingApproval),
                        within: Bounds::ms(0, 100),
                    },
                    Interval {
                        from: Mark::State(State::AwaitingApproval),
                        to: Mark::State(State::Authorized),
                        within: Bounds::at_least(answer, SLACK),
                    },
                ],
                ..CallExpect::default()
            },
        )
    };
    Scenario {
        name: "a_noisy_discovery_does_not_delay_the_approval_card",
        id: "S2",
        summary: "a discovery floods 8 MiB; an action's card still shows within 100 ms",
        host: HostSettings::default(),
        calls: vec![
            noisy_discovery("c_s2_discovery", StartAt::Immediately, 8 * MIB, 500),
            action,
        ],
        expect: ScenarioExpect {
            pool_peak: PoolPeak::Exact(DISCOVERY + MARGIN),
            retained_sum: Some(DISCOVERY),
        },
    }
}

pub(super) fn s3_stderr_during_approval_then_exit() -> Scenario {
    let answer = ms(300);
    let action = CallPlan {
        approver: Approver::Approve { after: answer },
        ..CallPlan::action(
            "c_s3_action",
            Invocation::test_helper(&["--wait-stdin-line", "--exit", "0"])
                .with_stdin(b"approved\n"),
            CallExpect {
                states: approved(State::Completed),
                approval: ApprovalDecision::Granted,
                time_to_card: Some(Bounds::ms(0, 100)),
                intervals: vec![
                    // The flood during the wait neither hurries nor delays
                    // the answer...
                    Interval {
                        from: Mark::State(State::AwaitingApproval),
                        to: Mark::State(State::Authorized),
                        within: Bounds::at_least(answer, SLACK),
                    },
                    // ...and the helper, approved, exits at once.
                    Interval {
                        from: Mark::State(State::Dispatched),
                        to: Mark::Exit,
                        within: Bounds::at_least(Duration::ZERO, SLACK),
                    },
                    Interval {
                        from: Mark::Exit,
                        to: Mark::State(State::Completed),
                        within: Bounds::at_least(Duration::ZERO, SLACK),
                    },
                ],
                ..CallExpect::default()
            },
        )
    };
    let during_the_wait = StartAt::After {
        call: 0,
        milestone: Milestone::CardShown,
        delay: Duration::ZERO,
    };
    Scenario {
        name: "stderr_during_the_approval_wait_then_an_exit_right_after_approval",
        id: "S3",
        summary: "a discovery floods while a card waits 300 ms; the approved helper exits at once",
        host: HostSettings::default(),
        calls: vec![
            action,
            noisy_discovery("c_s3_discovery", during_the_wait, 4 * MIB, 600),
        ],
        expect: ScenarioExpect {
            pool_peak: PoolPeak::Exact(DISCOVERY + MARGIN),
            retained_sum: Some(DISCOVERY),
        },
    }
}
