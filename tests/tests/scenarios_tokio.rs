//! The scenario suite (S1–S9) and the behaviour checks on the tokio adapter,
//! with real processes: one test per scenario, each failing with every
//! expectation that did not hold, and one test per behaviour check.

spillguard_tests::scenario_suite!(spillguard_tests::Runtime::Tokio);
spillguard_tests::behaviour_suite!(spillguard_tests::drivers::tokio);
