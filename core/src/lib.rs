#![doc = include_str!("../README.md")]
//!
//! # Capturing a stream
//!
//! ```
//! use spillguard_core::{CaptureSettings, Config, RetentionPool, StreamCapture};
//!
//! let config = Config::default();
//! // One pool per process, shared by every call.
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
//! // The retained bytes keep their share of the pool until dropped, with
//! // the 512-byte margin kept, never shown, before the window's first byte.
//! let retained = stderr.finish();
//! assert_eq!(pool.in_use(), 16_384 + 512);
//! let excerpt = retained.render_clamped(config.stderr_agent_excerpt_bytes as usize);
//! assert!(excerpt.starts_with("[stderr truncated: kept last 40"));
//! assert!(excerpt.len() <= 4096);
//! drop(retained);
//! assert_eq!(pool.in_use(), 0);
//! ```
//!
//! # Driving a call
//!
//! A [`Call`] is one helper run from `received` to exactly one terminal
//! state. Its driver (an adapter's owner thread or task, or a test harness)
//! runs one loop: wait for the first of (chunk, EOF, exit, command, timer),
//! make one `Call::handle(now, input)` call with the instant it observed, drain
//! [`Call::poll_action`] until `None` carrying out each action in order, and
//! re-arm its timer from [`Call::poll_timeout`]. The loop ends at
//! [`Action::Finished`], the last action, emitted exactly once.
//!
//! Here the "process" is simulated: it writes a flood and ignores nothing;
//! the driver cancels it at 100 ms.
//!
//! ```
//! use std::time::{Duration, Instant, SystemTime};
//! use spillguard_core::{Input,
//!     Action, Call, CallKind, CallSettings, CallSpec, CancelReason, Config, ExitStatus,
//!     RetentionPool, Signal, State, StreamEnd,
//! };
//!
//! let config = Config::default();
//! let pool = RetentionPool::new(config.stderr_retained_process_bytes);
//! let spec = CallSpec {
//!     call_id: "c_7f2a".into(),
//!     session_id: "s_1".into(),
//!     kind: CallKind::Action,
//!     action: "http.get".into(),
//!     target: "https://api.example".into(),
//!     summary: "GET /status".into(),
//!     card_lines: Vec::new(),
//! };
//! let start = Instant::now();
//! let mut now = start;
//! let mut call = Call::new(spec, CallSettings::action(&config), &pool, now, SystemTime::now());
//! call.handle(now, Input::Validated { needs_approval: false })?;
//!
//! let mut running = false;
//! let mut outcome = None;
//! while outcome.is_none() {
//!     // 1. Carry out every action, in order.
//!     while let Some(action) = call.poll_action() {
//!         match action {
//!             Action::Spawn(_) => {
//!                 running = true;
//!                 call.handle(now, Input::Spawned { pid: 4242 })?;
//!             }
//!             Action::SignalGroup { signal: Signal::Term, .. } if running => {
//!                 // The helper dies of the signal; its pipes close.
//!                 running = false;
//!                 call.handle(now, Input::StdoutEof)?;
//!                 call.handle(now, Input::StderrEof)?;
//!                 call.handle(now, Input::Exited(ExitStatus::signal(15)))?;
//!             }
//!             Action::Finished(o) => outcome = Some(o),
//!             _ => {} // audit events, card, close stdin, ...
//!         }
//!     }
//!     if outcome.is_some() {
//!         break;
//!     }
//!     // 2. Wait for the first of: a chunk, the exit, a command, the timer.
//!     now += Duration::from_millis(10);
//!     if let Some(at) = call.poll_timeout().filter(|&at| at <= now) {
//!         call.handle(at, Input::Timeout);
//!     } else if now - start >= Duration::from_millis(100) {
//!         call.handle(now, Input::Cancel(CancelReason::Requested));
//!     } else if running {
//!         call.handle(now, Input::Stderr(&[b'x'; 65_536]));
//!     }
//! }
//!
//! let record = &outcome.expect("finished").record;
//! assert_eq!(record.state, State::CancelledAfterDispatch);
//! assert_eq!(record.exit_signal, Some(15));
//! assert_eq!(record.stream_end, StreamEnd::ReaderCompletedAfterCancel);
//! assert_eq!((record.stderr_bytes_seen, record.stderr_bytes_retained), (9 * 65_536, 16_384));
//! # Ok::<(), spillguard_core::CallError>(())
//! ```
//!
//! # Invariants
//!
//! * **No clock, no IO, no threads, no runtime.** Instants and wall-clock
//!   stamps come in as arguments. Enforced by `core/clippy.toml`
//!   (`disallowed-methods`, `disallowed-types`) and `tests/sans_io.rs`.
//! * **Feeding bytes never fails and never stops accepting**; retained
//!   bytes stay within the budget, and the [`RetentionPool`]'s in-use
//!   figure never exceeds its capacity, not even for a moment.
//! * **No unredacted text leaves through a view**: every rendering, the
//!   approval card, the record's strings and every audit event pass
//!   through the call's [`Redactor`]. Raw text and bytes only through the
//!   named [`Retained::render_unredacted`], [`Retained::to_vec`] and
//!   [`Outcome::stdout_bytes`], which no record, excerpt or log uses.
//! * **A call ends in exactly one terminal state and emits exactly one
//!   [`Action::Finished`], its last action.** An input that does not fit
//!   the state is a [`CallError`] and changes nothing; a terminal state
//!   absorbs every later input with `Ok`.
//! * **Bytes never cause a transition**; only the opt-in kill ceiling,
//!   once crossed, becomes an explicit cancel.
//! * **After the direct child's exit, no wait is longer than
//!   [`CallSettings::escapee_wait`].**
//! * **What the helper, the approver or the clock did is an outcome in
//!   the record, never a [`CallError`] or a panic.** A caller who wants a
//!   helper that never started as an `Err` asks for it:
//!   [`Outcome::into_result`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod audit;
mod call;
mod capture;
mod config;
mod confine;
pub mod jsonrpc;
mod pool;
mod redact;
mod render;
pub mod restart;
pub mod trace;

pub use audit::{Anchor, LogEntry, LogWriter, Verdict, Verifier};
pub use call::{
    Action, Admission, ApprovalCard, ApprovalDecision, AuditEvent, AuditKind, Call, CallError,
    CallKind, CallRecord, CallSettings, CallSpec, CancelReason, DebugWindow, DisconnectPolicy,
    Exit, ExitStatus, Input, Outcome, OutcomeError, ResultChannel, ResultClassifier, ResultKind,
    SettingsError, Signal, SignalMark, SpawnError, SpawnOrder, State, StateMark, StdoutMode,
    StdoutTruncated, StreamEnd, TRANSITIONS, Timer, card_text, rfc3339, spawn_error_kind, visible,
};
pub use capture::{CaptureSettings, Fed, Retained, StreamCapture, StreamName};
pub use config::{Config, ConfigError, DebugGrant, DebugGrantError, Retain, Rule};
pub use confine::{
    ConfineError, Confinement, Enforcement, LIMIT_KEYS, LIMIT_KINDS, LimitHit, LimitKind,
    LimitMechanism, LimitUnit, Limits, Network, RlimitResource, SANDBOX_KEYS, Sandbox, TreeReport,
    parse_size,
};
pub use jsonrpc::{
    ClientLines, Diverted, HeldLine, InputQueue, MAX_BATCH, MAX_PENDING, MAX_PENDING_ID_BYTES,
    MessageInfo, MessageKind, MessageScanner, PendingRequests, ProtocolLine, QueueEvent,
    QueueSettings, RawValue, RestartNote, SERVER_GONE_CODE, Segment, ServerGone, ServerLine,
    SessionReplay, StdoutLineGuard,
};
pub use pool::{PoolLease, RetentionPool};
pub use redact::{
    CUT_MARGIN, MAX_CUT_HIDDEN, PatternError, Redacted, RedactionCounts, Redactor, STREAM_BEHIND,
    STREAM_HOLD, StreamRedactions, StreamRedactor, provider_samples,
};
pub use render::{Fingerprint, FingerprintParseError, Margins, Window};
pub use restart::{
    CrashLoop, RestartAction, RestartError, RestartMode, RestartSettings, RestartState,
    RestartTable, RestartTableError, Restarts, ServerEnd, StopReason,
};
