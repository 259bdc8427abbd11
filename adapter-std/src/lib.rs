//! spillguard adapter for std.
//!
//! This crate will own helper processes (child handle, both readers and the
//! cancellation) and drive the sans-IO [`spillguard_core`] state machine.
//! It holds no policy of its own: every decision about budgets, states and
//! deadlines is the core's.
#![deny(missing_docs)]

pub use spillguard_core as core;
