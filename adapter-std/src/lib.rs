#![doc = include_str!("../README.md")]
//!
//! # Examples
//!
//! A helper that floods stderr past its deadline: the call is cancelled,
//! the group gets SIGTERM, and only the last 16 KiB are retained.
//!
//! ```
//! use std::time::Duration;
//! use spillguard_std::{Host, HostOptions};
//! use spillguard_std::proto::{CancelReason, Config, State, StreamEnd};
//!
//! let host = Host::new(Config::default(), HostOptions::default())?;
//! let outcome = host
//!     .shell("yes helper-diagnostic 1>&2")
//!     .deadline(Duration::from_millis(200))
//!     .run();
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
//! # Ok::<(), spillguard_std::HostError>(())
//! ```
//!
//! A call that needs approval: the card is built once, nothing runs until
//! it is approved.
//!
//! ```
//! use std::time::Duration;
//! use spillguard_std::{Approval, Host, HostOptions};
//! use spillguard_std::proto::{Config, State};
//!
//! let host = Host::new(Config::default(), HostOptions::default())?;
//! let call = host
//!     .command("echo")
//!     .arg("restarted")
//!     .target("web-3")
//!     .approval(Approval::Required)
//!     .start();
//! let card = call.wait_card(Duration::from_secs(5)).expect("a card");
//! assert_eq!((card.target.as_str(), card.summary.as_str()), ("web-3", "echo restarted"));
//! call.approve()?;
//! assert_eq!(call.wait().record.state, State::Completed);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The run loop
//!
//! Each owner is this loop (see `owner.rs`), and nothing else:
//!
//! ```text
//! loop {
//!     while let Some(action) = call.poll_action() {
//!         carry out action      // Audit → sink, ShowApprovalCard → handle,
//!                               // Spawn → spawn + Input::Spawned / SpawnFailed,
//!                               // CloseStdin, SignalGroup → kill(-pgid),
//!                               // AbandonStreams → stop listening,
//!         if Finished { publish the outcome; stop }
//!     }
//!     poll(doorbell, stdout, stderr, pidfd; until call.poll_timeout())
//!     for each ready input, until the core has actions:
//!         now = Instant::now()   // exactly one Call::handle per input
//!         timer due → Input::Timeout
//!         approve / deny / cancel / handle dropped → Input::Approval* /
//!             Cancel / ClientDisconnected
//!         pidfd → reap → Input::Exited (or ProcessLost)
//!         chunk → Input::Stdout / Stderr;  end of file → Input::*Eof
//! }
//! ```
//!
//! One thread per call, taken from a pool of kept threads: no hop between
//! threads per chunk. After the call finished, the owner reads and drops
//! what the helper's group still writes until end-of-file and reaps the
//! child, so nothing blocks on a full pipe and no zombie is left. A stdin
//! writer job runs only when the helper is given bytes; where the kernel
//! has no pidfd, a waiter job reports the exit.
#![deny(missing_docs)]

#[cfg(not(unix))]
compile_error!(
    "spillguard-std runs helpers in process groups and needs a Unix platform (Linux for pidfd)"
);

mod front;
mod owner;
mod process;
mod reader;
mod workers;

pub use front::{CallBuilder, CallHandle, Canceller, Command, Host};

/// For code that builds on this adapter rather than calls it: the
/// thread driver it plugs into the host layer, and what code written over any
/// host (a test double, a generic driver) describes and starts a call
/// with. A caller needs none of it.
///
/// A call described once and started on any host, the std, smol or tokio
/// adapter's (each host's handle is its own: wait on it where its type
/// is known):
///
/// ```
/// use std::time::Duration;
/// use spillguard_std::HelperCommand;
/// use spillguard_std::adapter::{Launch, LaunchBuilder};
///
/// fn start_check<H: Launch>(host: &H) -> H::Handle {
///     LaunchBuilder::on(host, HelperCommand::new("make").arg("check"))
///         .deadline(Duration::from_secs(600))
///         .launch()
/// }
/// # let _ = start_check::<spillguard_std::Host>;
/// ```
pub mod adapter {
    pub use crate::owner::StdThreads;
    /// A call's builder on any host that implements [`Launch`]: every
    /// builder method of the adapters' own `CallBuilder`, ended with
    /// [`launch`](LaunchBuilder::launch), which returns the host's handle.
    #[doc(inline)]
    pub use spillguard_host::CallBuilder as LaunchBuilder;
    pub use spillguard_host::{CallRequest, Launch};
}
/// The sans-IO protocol core (`spillguard-core`): the call record, its
/// states and outcome, settings and configuration, bounds, redaction and
/// the audit log format. Named `proto`, not `core`, so that a glob
/// import of this crate never shadows the language's `core`.
#[doc(no_inline)]
pub use spillguard_core as proto;
#[doc(no_inline)]
pub use spillguard_core::Outcome;
pub use spillguard_host::blocking::{HelperStdin, HelperStdout};
pub use spillguard_host::os;
pub use spillguard_host::{
    AppendFailure, Appended, Approval, AuditOpenError, AuditSink, ChainedFileAudit,
    ChainedFileOptions, DEFAULT_LOCK_WAIT, FsyncPolicy, HelperCommand, HostError, HostOptions,
    InvalidCommand, JsonLinesAudit, KeyError, KeySource, LeftoverStats, OpenFailure, OpenedLog,
    Output, OwnRecord, ShutdownReport, StderrTap, StdinMode, Stdio, StdoutTruncated, TapFn,
};
#[cfg(feature = "audit-checkpoint")]
pub use spillguard_host::{CheckpointOptions, LogLeaves, log_leaves};
pub use spillguard_host::{READ_CHUNK_BYTES, ReadError, read_log};
