//! Behaviour checks with exact assertions, written once and run on every
//! runtime: a normal run, approval answered or left to expire, a dropped
//! handle, a spawn that fails, an invalid command, shutdown with live
//! calls, stdin, large floods, discovery budgets and the audit sinks.
//!
//! Where a scenario ([`crate::catalog`]) compares a run with expectations
//! and reports every difference, a check here panics at its first wrong
//! fact. Each check takes the driver's constructor for a host with the
//! default config (e.g. [`drivers::std::host`](crate::drivers::std::host))
//! and talks to it through [`HostUnderTest`] and [`CallUnderTest`].
//! [`behaviour_suite!`](crate::behaviour_suite) makes one `#[test]` per
//! check for a runtime.
//!
//! Checks that bound a duration tightly (a deadline, a grace, the drain
//! window, the approval timeout) never run while a scenario does
//! ([`timed_check_turn`], [`scenario_turn`]), so no scenario's floods delay
//! them; they may run alongside each other.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use spillguard_core::{AuditEvent, CallRecord, Signal, State};
use spillguard_std::AuditSink;

mod afterlife;
mod approval;
mod audit;
mod confine;
mod front;
mod run;
mod stop;
mod streamed;

pub use afterlife::*;
pub use approval::*;
pub use audit::*;
pub use confine::*;
pub use front::*;
pub use run::*;
pub use stop::*;
pub use streamed::*;

use crate::engine::{CallUnderTest, HostUnderTest};
use crate::measure::settle_group;

const MS: Duration = Duration::from_millis(1);

/// Runs that measure durations take turns: a scenario runs alone, the
/// checks that bound a duration run together between scenarios.
static TIMED_RUNS: RwLock<()> = RwLock::new(());

/// Every helper gets a control group of its own where one can be made,
/// so a check that counts the process's groups (the confinement checks)
/// runs while no other check has a call in flight: it holds this for
/// writing, every other check for reading.
static GROUPS: RwLock<()> = RwLock::new(());

/// The shared hold of a check that does not count control groups on the
/// lock that a check which counts them holds alone (`None` for one that
/// does: it takes the lock itself). Every helper gets a control group of
/// its own where one can be made, so counting them needs no other call
/// in flight.
pub fn groups_shared(check: &str) -> Option<RwLockReadGuard<'static, ()>> {
    if confine::COUNTS_GROUPS.contains(&check) {
        return None;
    }
    Some(GROUPS.read().unwrap_or_else(PoisonError::into_inner))
}

/// A scenario's turn: no other scenario and no timed check runs until the
/// guard is dropped.
pub fn scenario_turn() -> RwLockWriteGuard<'static, ()> {
    TIMED_RUNS.write().unwrap_or_else(PoisonError::into_inner)
}

/// A timed check's turn: no scenario runs until the guard is dropped.
pub fn timed_check_turn() -> RwLockReadGuard<'static, ()> {
    TIMED_RUNS.read().unwrap_or_else(PoisonError::into_inner)
}

/// One `#[test]` per behaviour check, on the runtime whose driver module
/// is given: `spillguard_tests::behaviour_suite!(spillguard_tests::drivers::std);`.
#[macro_export]
macro_rules! behaviour_suite {
    ($driver:path) => {
        $crate::behaviour_suite!(
            $driver;
            a_flood_past_its_deadline_is_cancelled_and_keeps_the_last_16_kib,
            a_normal_run_reports_its_exit_code_and_exact_counts,
            a_helper_that_ignores_term_is_killed_once_after_the_grace,
            a_grandchild_holding_the_streams_is_signalled_after_the_drain_window,
            a_grandchild_flooding_after_the_exit_is_signalled_after_the_drain_window,
            answers_come_at_once_after_the_end_while_an_escaped_process_holds_the_streams,
            a_denied_call_shows_its_card_once_and_spawns_nothing,
            an_approved_call_runs_its_helper,
            an_unanswered_card_expires,
            dropping_the_handle_mid_run_still_finishes_and_records_the_call,
            dropping_the_handle_under_the_cancel_policy_stops_the_helper,
            a_program_that_cannot_be_spawned_fails_before_dispatch,
            a_helper_s_own_path_finds_its_program_as_std_does,
            an_invalid_command_fails_before_its_attempt_is_recorded,
            shutdown_cancels_every_live_call_and_waits_for_their_records,
            shutdown_without_waiting_cancels_every_live_call,
            wait_timeout_gives_the_handle_back_until_the_call_ends,
            polling_try_outcome_always_gets_the_outcome,
            stdin_bytes_reach_the_helper_and_stdin_is_null_otherwise,
            the_helpers_environment_is_what_the_builder_says,
            the_handle_names_the_running_helper_and_its_directory,
            every_byte_of_a_large_flood_is_counted,
            a_discovery_call_has_its_own_budget_and_no_attempt,
            the_json_lines_audit_holds_the_lifecycle_in_order,
            the_chained_log_of_three_calls_verifies_and_holds_their_records,
            an_attempt_that_cannot_be_audited_spawns_nothing,
            a_full_disk_at_the_attempt_fails_the_call_closed_and_the_log_stays_valid,
            the_builder_fills_every_field_from_the_command,
            a_debug_grant_raises_the_budget_of_calls_started_under_it,
            a_debug_grant_reaches_the_calls_running_when_it_is_given,
            calls_outlive_the_host_value_that_started_them,
            a_command_needs_no_host_and_answers_as_std_output,
            an_owner_that_dies_mid_call_kills_its_helper_and_lets_go,
            a_result_that_reports_a_remote_failure_ends_failed_remote,
            stderr_overflow_never_hides_the_result,
            a_spawn_failure_keeps_its_error_kind,
            settings_made_by_hand_are_validated_before_anything_runs,
            a_call_its_caller_refuses_is_recorded_and_never_runs,
            a_successful_call_with_an_escaped_descendant_ends_soon_after_the_drain_window,
            an_escapee_s_pipes_are_drained_then_closed_at_the_leftover_bound,
            the_leftover_pipe_count_is_bounded_and_an_ended_pipe_is_counted,
            a_streamed_call_forwards_each_way_and_counts_the_bytes,
            stdin_and_stdout_are_set_each_on_its_own,
            a_streamed_call_counts_stdout_read_after_the_helpers_exit,
            a_streamed_helper_that_outlives_its_input_is_termed_then_killed,
            a_cancel_closes_stdin_under_the_callers_writer,
            dropping_the_handle_and_both_streams_is_a_client_disconnect,
            a_helper_past_its_memory_limit_ends_with_limit_hit_memory,
            a_fork_bomb_is_held_to_its_process_limit_and_leaves_no_survivor,
            a_busy_loop_past_its_cpu_seconds_ends_with_limit_hit_cpu,
            a_setsid_escapee_is_gone_when_a_contained_call_ends,
            a_sandboxed_helper_reaches_only_its_listed_paths,
            a_sandboxed_helper_connects_only_to_listed_ports,
            a_sandbox_path_that_does_not_exist_refuses_the_call,
            a_thousand_limited_calls_leave_no_group_and_no_survivor,
            a_sandboxed_helper_cannot_leave_its_control_group,
            ended_calls_leave_only_the_spare_groups,
            a_helper_in_a_group_below_its_own_is_killed_with_the_tree,
            a_process_hidden_in_a_spare_group_never_joins_the_next_call,
            a_bounded_helper_has_no_way_to_the_terminal_the_host_or_its_sockets,
            an_inherited_descriptor_never_reaches_a_helper,
            a_sandboxed_root_helper_cannot_undo_its_sandbox,
            a_limit_a_descendant_hits_is_named_in_the_record,
            the_cpu_time_of_the_whole_tree_is_held_to_its_limit,
        );
    };
    ($driver:path; $($name:ident),+ $(,)?) => {
        mod behaviour {
            use $driver as driver;
            $(
                #[test]
                fn $name() {
                    let _groups = $crate::behaviour::groups_shared(stringify!($name));
                    $crate::behaviour::$name(driver::host);
                }
            )+
        }
    };
}
/// Waits for the outcome; panics after 30 s.
fn wait<C: CallUnderTest>(call: C) -> spillguard_core::Outcome {
    match call.wait_timeout(Duration::from_secs(30)) {
        Ok(outcome) => outcome,
        Err(_) => panic!("no outcome within 30 s"),
    }
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn states(record: &CallRecord) -> Vec<State> {
    record.timeline.iter().map(|m| m.state).collect()
}

fn signals(record: &CallRecord) -> Vec<Signal> {
    record.signals.iter().map(|s| s.signal).collect()
}

/// A path in the temp dir unique to this process, its thread and `name`
/// (the checks of the three runtimes may share a process).
fn temp_path(name: &str) -> PathBuf {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("main").replace("::", "-");
    std::env::temp_dir().join(format!(
        "spillguard-behaviour-{}-{test}-{name}",
        std::process::id()
    ))
}

/// Polls `done` every 5 ms until it holds; panics after `limit`.
fn poll_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_for_state(call: &impl CallUnderTest, state: State) {
    poll_until(Duration::from_secs(10), state.as_str(), || {
        call.state() == state
    });
}

fn records_of(host: &impl HostUnderTest, call_id: &str) -> usize {
    host.finished_records()
        .iter()
        .filter(|r| r.call_id == call_id)
        .count()
}

/// Asserts that no process of group `pgid` is left once its orphans are
/// reaped (see [`settle_group`]).
fn assert_group_gone(pgid: u32) {
    let after = settle_group(pgid, None);
    assert!(
        !after.alive,
        "group {pgid} still there: {:?}",
        after.members_left
    );
}

/// An audit sink that keeps every event in memory.
#[derive(Debug, Default)]
struct Recorder {
    events: Mutex<Vec<AuditEvent>>,
}

impl AuditSink for Recorder {
    fn write(&self, event: &AuditEvent) -> std::io::Result<()> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
        Ok(())
    }
}

impl Recorder {
    /// The events of `call_id`, as their JSON kind tags (`attempt`,
    /// `transition:received->validated`, `final`).
    fn kinds(&self, call_id: &str) -> Vec<String> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|e| e.call_id == call_id)
            .map(|e| {
                let kind = serde_json::to_value(&e.kind).unwrap();
                let (tag, body) = kind.as_object().unwrap().iter().next().unwrap();
                match tag.as_str() {
                    "transition" => format!(
                        "transition:{}->{}",
                        body["from"].as_str().unwrap(),
                        body["to"].as_str().unwrap()
                    ),
                    other => other.to_owned(),
                }
            })
            .collect()
    }

    /// The card `call_id`'s log keeps, if it showed one.
    fn card(&self, call_id: &str) -> Option<String> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|e| e.call_id == call_id)
            .find_map(|e| match &e.kind {
                spillguard_core::AuditKind::CardShown { text } => Some(text.clone()),
                _ => None,
            })
    }
}
