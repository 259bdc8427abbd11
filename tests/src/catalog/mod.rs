//! The scenarios S1–S9 (listed in `tests/README.md`), each named for its
//! behaviour.
//!
//! Volumes stay in the tens of MiB and graces in hundreds of milliseconds,
//! so the whole catalogue runs in seconds. Floods repeat one 16-byte line
//! (`diagnostic-line\n`) and are sized in whole lines, so a tail window
//! always starts on a line boundary and the retained text is known exactly,
//! however much a timed flood wrote.

mod approval;
mod output;
mod shutdown;

use std::time::Duration;

use spillguard_core::State;

use crate::scenario::{Invocation, Scenario};

/// The flood line, without its newline (`--line`).
pub const LINE: &str = "diagnostic-line";
/// One flood line with its newline: 16 bytes.
pub const UNIT: &str = "diagnostic-line\n";
/// What the test helper writes after SIGTERM with `--write-after-sigterm`.
pub const AFTER_SIGTERM_UNIT: &str = "after-sigterm\n";
/// What the test helper's grandchild writes every 50 ms.
pub const GRANDCHILD_UNIT: &str = "grandchild-diagnostic\n";
/// What `--invalid-utf8` writes.
pub const INVALID_UTF8: &[u8] = b"bad:\xff\xfe\xc3(\xe2\x82 end\n";
/// The structured result the action helpers print.
pub const RESULT: &str = "{\"ok\":true}";
/// [`RESULT`] as the helper writes it, with its newline.
pub const RESULT_LINE: &str = "{\"ok\":true}\n";

const MIB: u64 = 1 << 20;
/// Default `stderr_retained_per_call_bytes`.
const PER_CALL: u64 = 16_384;
/// A discovery call's stderr budget.
const DISCOVERY: u64 = 4_096;
/// Default `stderr_retained_process_bytes`.
const PROCESS: u64 = 262_144;
/// The context margin a capture that dropped bytes keeps before its
/// window, reserved from the pool on top of its budget.
const MARGIN: u64 = spillguard_core::CUT_MARGIN as u64;

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Slack added to every nominal duration: wide enough for a loaded 2-core
/// machine, narrow enough to tell a grace from no grace.
const SLACK: Duration = ms(1000);

/// How much earlier than the dispatch mark a helper's own clock may start:
/// the helper runs from its spawn, and the host marks the call dispatched
/// once the spawn has returned (599.1 ms was seen for a 600 ms sleep).
const SPAWN_LAG: Duration = ms(100);

/// Every scenario, S1 to S9, in order.
pub fn all() -> Vec<Scenario> {
    vec![
        output::s1_flood_past_a_short_deadline(),
        approval::s2_noisy_discovery_before_a_card(),
        approval::s3_stderr_during_approval_then_exit(),
        shutdown::s4_success_then_cancel_during_cleanup(),
        shutdown::s5_grandchild_holds_stderr(),
        output::s6_invalid_bytes_and_a_giant_line(),
        output::s7_many_concurrent_floods(),
        shutdown::s8_disconnect_under_finish(),
        shutdown::s8_disconnect_under_cancel(),
        shutdown::s9_helper_ignores_sigterm(),
    ]
}

/// The scenario called `name`.
pub fn by_name(name: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.name == name)
}

fn states(list: &[State]) -> Vec<State> {
    list.to_vec()
}

/// The timeline of a call stopped after dispatch, ending in `end`.
fn stopped(end: State) -> Vec<State> {
    states(&[
        State::Received,
        State::Validated,
        State::Authorized,
        State::Dispatched,
        end,
    ])
}

/// The timeline of an approved call that ended in `end`.
fn approved(end: State) -> Vec<State> {
    states(&[
        State::Received,
        State::Validated,
        State::AwaitingApproval,
        State::Authorized,
        State::Dispatched,
        end,
    ])
}

/// A flood of `bytes` then one line per millisecond for `sleep_ms`.
fn flood_then_tick(bytes: u64, sleep_ms: u64) -> Vec<String> {
    [
        "--line",
        LINE,
        "--stderr-bytes",
        &bytes.to_string(),
        "--stderr-during-sleep-ms",
        "1",
        "--sleep-ms",
        &sleep_ms.to_string(),
    ]
    .map(str::to_owned)
    .to_vec()
}

fn helper(args: Vec<String>) -> Invocation {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Invocation::test_helper(&args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_call_ids_are_unique() {
        let scenarios = all();
        let mut names: Vec<&str> = scenarios.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), scenarios.len());
        let mut ids: Vec<String> = scenarios.iter().flat_map(Scenario::call_ids).collect();
        let count = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), count);
        assert_eq!(count, 1 + 2 + 2 + 1 + 1 + 1 + 64 + 1 + 1 + 1);
    }

    #[test]
    fn floods_are_whole_lines() {
        assert_eq!(UNIT.len(), 16);
        assert_eq!(MIB % UNIT.len() as u64, 0);
        assert_eq!(PER_CALL % UNIT.len() as u64, 0);
    }
}
