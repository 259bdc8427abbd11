//! The scenario suite (S1–S9) and the behaviour checks on the tokio adapter,
//! with real processes: one test per scenario, each failing with every
//! expectation that did not hold, and one test per behaviour check.

spillguard_tests::scenario_suite!(spillguard_tests::Runtime::Tokio);
spillguard_tests::behaviour_suite!(spillguard_tests::drivers::tokio);

/// The flood check on a current-thread runtime, where every owner (with its
/// reads), waiter and timer shares one thread.
#[test]
fn a_flood_on_a_current_thread_runtime_is_cut_at_its_deadline() {
    spillguard_tests::behaviour::a_flood_past_its_deadline_is_cancelled_and_keeps_the_last_16_kib(
        spillguard_tests::drivers::tokio::current_thread_host,
    );
}
