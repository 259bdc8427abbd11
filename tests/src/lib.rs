//! Shared scenario suite for spillguard adapters and the test helper program.
#![deny(missing_docs)]
