//! The scenario suite (S1–S9) and the behaviour checks on the smol adapter,
//! with real processes: one test per scenario, each failing with every
//! expectation that did not hold, and one test per behaviour check.

spillguard_tests::scenario_suite!(spillguard_tests::Runtime::Smol);
spillguard_tests::behaviour_suite!(spillguard_tests::drivers::smol);
