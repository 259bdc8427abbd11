//! Shared scenario suite for spillguard adapters and the test helper program.
//!
//! The flood scenarios S1–S9 (listed in `tests/README.md`) are defined once, as data
//! ([`catalog`]), independent of any runtime. A driver per adapter
//! ([`Runtime`]) runs one on real processes — the `spillguard-test-helper`
//! binary of this package — and returns what it [`Measured`]; [`check`]
//! compares that with the scenario's expectations, exactly for counts and
//! states, within generous bounds for durations. Every run also writes a
//! hash-chained audit log, verified offline afterwards against its anchor
//! and the records' lifecycles (S10, [`audit`]).
//!
//! ```no_run
//! use spillguard_tests::{Environment, Runtime, catalog, check};
//!
//! let env = Environment::beside_current_exe()?;
//! for scenario in catalog::all() {
//!     let measured = Runtime::Std.run(&scenario, &env);
//!     let failures = check(&scenario, &measured);
//!     assert!(failures.is_empty(), "{}: {failures:?}", scenario.name);
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The real-process checks every adapter would otherwise repeat (a
//! normal run, approval, a dropped handle, shutdown, stdin, the audit
//! sinks, …) live once in [`behaviour`], with exact assertions, and
//! [`behaviour_suite!`] runs them on each runtime through its driver.
//!
//! The `spillguard-scenarios` binary runs the catalogue on every runtime,
//! prints a table of the measured facts and compares the records across
//! runtimes ([`compare`]); `cargo xtask runtimes` builds and runs it.
//!
//! Every call the suite, the scenarios and the adapters' tests make is
//! described with the builder front door (`CallBuilder`), never a
//! hand-written `CallSpec`; only the core's own tests, below the builder,
//! build `CallSpec`s.
#![deny(missing_docs)]

pub mod audit;
pub mod behaviour;
pub mod catalog;
pub mod compare;
pub mod drivers;
pub mod engine;
pub mod expect;
pub mod measure;
pub mod recall;
pub mod report;
pub mod scenario;
pub mod soak;

pub use drivers::Runtime;
pub use expect::{CallExpect, Failure, check};
pub use measure::{Measured, MeasuredCall};
pub use scenario::{CallPlan, Environment, HostSettings, Invocation, Scenario};

/// Runs `name` on `runtime` with the test helper at `helper` and panics
/// with every failed expectation. Scenarios measure timings, so calls of
/// this function run one at a time in a test process.
pub fn assert_scenario(runtime: Runtime, name: &str, helper: &str) {
    let _turn = behaviour::scenario_turn();
    let Some(scenario) = catalog::by_name(name) else {
        panic!("no scenario named {name}");
    };
    let measured = runtime.run(&scenario, &Environment::with_test_helper(helper));
    let failures = check(&scenario, &measured);
    assert!(
        failures.is_empty(),
        "{} ({}) on {runtime}: {} failed expectation(s):\n  {}",
        scenario.name,
        scenario.id,
        failures.len(),
        failures
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

/// One `#[test]` per scenario of the catalogue on `$runtime`, named after
/// the scenario, plus a test that the catalogue has no other scenario.
///
/// Use it in an integration test of this package, where the test helper's
/// path is known: `spillguard_tests::scenario_suite!(Runtime::Std);`.
#[macro_export]
macro_rules! scenario_suite {
    ($runtime:expr) => {
        $crate::scenario_suite!(
            $runtime;
            a_flood_past_a_short_deadline_is_cancelled_keeping_the_last_16_kib,
            a_noisy_discovery_does_not_delay_the_approval_card,
            stderr_during_the_approval_wait_then_an_exit_right_after_approval,
            a_succeeded_action_cancelled_during_cleanup_keeps_its_result,
            a_grandchild_holding_stderr_is_signalled_after_the_drain_window,
            invalid_bytes_and_a_line_larger_than_the_budget_are_kept_exactly,
            sixty_four_concurrent_floods_never_exceed_the_process_budget,
            a_client_disconnect_under_the_finish_policy_runs_the_call_to_its_end,
            a_client_disconnect_under_the_cancel_policy_stops_the_helper,
            a_helper_that_ignores_sigterm_is_killed_after_the_grace,
        );
    };
    ($runtime:expr; $($name:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::assert_scenario(
                    $runtime,
                    stringify!($name),
                    env!("CARGO_BIN_EXE_spillguard-test-helper"),
                );
            }
        )+

        #[test]
        fn the_suite_covers_every_scenario_of_the_catalogue() {
            let tested = [$(stringify!($name)),+];
            let catalogue: Vec<&str> = $crate::catalog::all().iter().map(|s| s.name).collect();
            assert_eq!(tested.as_slice(), catalogue.as_slice());
        }
    };
}
