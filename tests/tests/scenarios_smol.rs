//! The scenario suite (S1–S9) on the smol adapter, with real processes: one
//! test per scenario, each failing with every expectation that did not hold.

spillguard_tests::scenario_suite!(spillguard_tests::Runtime::Smol);
