//! Sans-IO core of spillguard: everything about a helper's output bytes and
//! the life of a call, with no IO, no threads and no clock.
//!
//! Adapters (for std threads, smol and tokio) own the helper process and its
//! pipes; they feed this crate the bytes they read and the instants they
//! observe, and carry out what it asks. Everything that decides — budgets,
//! truncation, markers, states, deadlines — lives here, where it can be tested
//! in simulated time.
//!
//! # Capturing a stream
//!
//! ```
//! use spillguard_core::{CaptureSettings, Config, RetentionPool, StreamCapture};
//!
//! let config = Config::default();
//! // One pool per process, shared by every call (R2.2).
//! let pool = RetentionPool::new(config.stderr_retained_process_bytes);
//! let mut stderr = StreamCapture::new(CaptureSettings::stderr(&config), &pool);
//!
//! // The adapter feeds every chunk it reads; feeding never fails.
//! for _ in 0..10_000 {
//!     let _ = stderr.feed(b"connection retry failed: remote side closed the channel\n");
//! }
//! assert_eq!(stderr.bytes_seen(), 560_000);
//! assert_eq!(stderr.bytes_retained(), 16_384);
//!
//! // The retained bytes keep their share of the pool until dropped.
//! let retained = stderr.finish();
//! assert_eq!(pool.in_use(), 16_384);
//! let excerpt = retained.render_clamped(config.stderr_agent_excerpt_bytes as usize);
//! assert!(excerpt.starts_with("[stderr truncated: kept last 40"));
//! assert!(excerpt.len() <= 4096);
//! drop(retained);
//! assert_eq!(pool.in_use(), 0);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod call;
mod capture;
mod config;
mod pool;
mod render;

pub use call::{
    Action, ApprovalCard, ApprovalDecision, AuditEvent, AuditKind, Call, CallError, CallKind,
    CallRecord, CallSettings, CallSpec, CancelReason, DisconnectPolicy, ExitStatus, Outcome,
    ResultKind, Signal, SignalMark, State, StateMark, StreamEnd, TRANSITIONS, Timer, rfc3339,
};
pub use capture::{CaptureSettings, Fed, Retained, StreamCapture, StreamName};
pub use config::{Config, ConfigError, DebugGrant, DebugGrantError, Retain, Rule};
pub use pool::{PoolLease, RetentionPool};
pub use render::{Fingerprint, FingerprintParseError, Window};
