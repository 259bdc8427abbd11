//! spillguard adapter for std threads: runs helper processes so that their
//! stderr can neither stall, bloat nor mislead the run.
//!
//! A [`Host`] starts calls; each call gets one owner thread that holds the
//! child, its output pipes and the cancellation (R4.1) and drives the
//! sans-IO [`spillguard_core::Call`]. The owner holds no policy: budgets,
//! states, deadlines and signals are the core's decisions; it only reports
//! what happened and carries out what it is asked.
//!
//! # The run loop
//!
//! Each owner is this loop (see `owner.rs`), and nothing else:
//!
//! ```text
//! loop {
//!     while let Some(action) = call.poll_action() {
//!         carry out action      // Audit → sink, ShowApprovalCard → handle,
//!                               // Spawn → spawn + handle_spawned/_failed,
//!                               // CloseStdin, SignalGroup → kill(-pgid),
//!                               // AbandonStreams → stop listening,
//!         if Finished { publish the outcome; stop }
//!     }
//!     poll(doorbell, stdout, stderr, pidfd; until call.poll_timeout())
//!     for each ready input, until the core has actions:
//!         now = Instant::now()   // exactly one handle_* call per input
//!         timer due → handle_timeout(now)
//!         approve / deny / cancel / handle dropped → handle_approval_* /
//!             handle_cancel / handle_client_disconnected
//!         pidfd → reap → handle_exit (or handle_process_lost)
//!         chunk → handle_stdout / handle_stderr;  end of file → handle_*_eof
//! }
//! ```
//!
//! One thread per call, taken from a pool of kept threads: no hop between
//! threads per chunk. After the call finished, the owner reads and drops
//! what the helper's group still writes until end-of-file and reaps the
//! child, so nothing blocks on a full pipe and no zombie is left. A stdin
//! writer job runs only when the helper is given bytes; where the kernel
//! has no pidfd, a waiter job reports the exit.
//!
//! # Examples
//!
//! A helper that floods stderr past its deadline: the call is cancelled,
//! the group gets SIGTERM, and only the last 16 KiB are retained.
//!
//! ```
//! use std::time::Duration;
//! use spillguard_std::{HelperCommand, Host, HostOptions};
//! use spillguard_std::core::{CallKind, CallSpec, CancelReason, Config, State, StreamEnd};
//!
//! let host = Host::new(
//!     Config::default(),
//!     HostOptions { deadline: Some(Duration::from_millis(200)), ..HostOptions::default() },
//! )?;
//! let spec = CallSpec {
//!     call_id: "c_flood".into(),
//!     session_id: "s_1".into(),
//!     kind: CallKind::Action,
//!     action: "local.flood".into(),
//!     target: "localhost".into(),
//!     summary: "yes helper-diagnostic".into(),
//! };
//! let command = HelperCommand::shell_script("yes helper-diagnostic 1>&2");
//! let outcome = host.start(spec, command, false).wait();
//! let record = &outcome.record;
//! assert_eq!(record.state, State::CancelledAfterDispatch);
//! assert_eq!(record.cancel_reason, Some(CancelReason::Deadline));
//! assert_eq!(record.stream_end, StreamEnd::ReaderCompletedAfterCancel);
//! assert_eq!(record.stderr_bytes_retained, 16_384);
//! assert!(record.stderr_bytes_seen > 16_384);
//! let marker = format!(
//!     "[stderr truncated: kept last 16384 of {} bytes]",
//!     record.stderr_bytes_seen
//! );
//! assert_eq!(outcome.stderr.render().lines().next(), Some(marker.as_str()));
//! # Ok::<(), spillguard_std::core::ConfigError>(())
//! ```
#![deny(missing_docs)]

#[cfg(not(unix))]
compile_error!(
    "spillguard-std runs helpers in process groups and needs a Unix platform (Linux for pidfd)"
);

mod audit;
mod audit_log;
mod command;
mod handle;
mod host;
pub mod host_state;
mod mailbox;
pub mod os;
mod owner;
mod process;
pub mod published;
pub mod read_buffers;
mod reader;
pub mod run_loop;
mod workers;

pub use audit::{AuditSink, JsonLinesAudit};
pub use audit_log::{
    AuditOpenError, ChainedFileAudit, ChainedFileOptions, FsyncPolicy, KeyError, KeySource,
    OpenFailure, OpenedLog,
};
pub use command::{HelperCommand, InvalidCommand, StdinMode};
pub use handle::{CallHandle, Canceller};
pub use host::{Host, HostOptions, ShutdownReport};
pub use spillguard_core as core;
