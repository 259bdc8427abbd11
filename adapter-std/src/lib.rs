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

mod owner;
mod process;
mod reader;
mod workers;

pub use owner::StdThreads;
/// The sans-IO protocol core (`spillguard-core`): the call record, its
/// states and outcome, settings and configuration, bounds, redaction and
/// the audit log format. Named `proto`, not `core`, so that a glob
/// import of this crate never shadows the language's `core`.
pub use spillguard_core as proto;
pub use spillguard_host::blocking::{HelperStdin, HelperStdout};
pub use spillguard_host::os;
pub use spillguard_host::{
    AppendFailure, Appended, Approval, AuditOpenError, AuditSink, CallBuilder, ChainedFileAudit,
    ChainedFileOptions, DEFAULT_LOCK_WAIT, FsyncPolicy, HelperCommand, HostError, HostOptions,
    InvalidCommand, JsonLinesAudit, KeyError, KeySource, Launch, LeftoverStats, OpenFailure,
    OpenedLog, Output, OwnRecord, ShutdownReport, StderrTap, StdinMode, Stdio, StdoutTruncated,
    TapFn,
};
#[cfg(feature = "audit-checkpoint")]
pub use spillguard_host::{CheckpointOptions, log_leaves};
pub use spillguard_host::{READ_CHUNK_BYTES, ReadError, read_log};

/// Runs helper calls for one process: holds the validated
/// [`Config`](proto::Config), the process-wide
/// [`RetentionPool`](proto::RetentionPool), the audit sink and the live
/// calls. Each call's owner is a thread of its own, taken from a pool of
/// kept threads.
///
/// Cheap to clone: clones share everything. Each call keeps what it needs
/// of the host, so dropping the last clone ends no call: every live call
/// runs to its end and writes its record.
/// [`shutdown`](spillguard_host::blocking::BlockingHost::shutdown) cancels
/// the live calls (TERM to each group, the grace, KILL),
/// [`shutdown_and_wait`](spillguard_host::blocking::BlockingHost::shutdown_and_wait)
/// waits for their records too.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use spillguard_std::{Host, HostOptions};
/// use spillguard_std::proto::{Config, State};
///
/// let host = Host::new(Config::default(), HostOptions::default())?;
/// let outcome = host.shell("echo result; echo warning 1>&2").run();
/// assert_eq!(outcome.record.state, State::Completed);
/// assert_eq!(outcome.record.stdout_bytes_seen, 7);
/// assert_eq!(outcome.agent_excerpt(), "warning\n");
/// assert_eq!(host.shutdown_and_wait(Duration::from_secs(1)).unfinished, 0);
/// # Ok::<(), spillguard_std::HostError>(())
/// ```
pub type Host = spillguard_host::blocking::BlockingHost<StdThreads>;

/// A call that needs no [`Host`] of its own: it runs on a process-wide
/// host, made at the first such call with the default configuration and
/// kept. Every builder method of `host.command(..)` works on it; it ends
/// with `output()`, `status()` or `spawn()`, as `std::process::Command`
/// does.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use spillguard_std::Command;
///
/// # fn main() -> std::io::Result<()> {
/// let output = Command::new("sh")
///     .args(["-c", "echo out; echo err 1>&2; exit 3"])
///     .deadline(Duration::from_secs(5))
///     .output()?;
/// assert_eq!(output.status.code(), Some(3));
/// assert_eq!(output.stdout, b"out\n");
/// assert_eq!(output.stderr, b"err\n");
/// assert_eq!(output.record().stdout_bytes_seen, 4);
/// # Ok(())
/// # }
/// ```
pub type Command = CallBuilder<'static, spillguard_host::blocking::DefaultHost<StdThreads>>;

/// The caller's handle on a running call, from the builder's
/// [`start`](CallBuilder::start): approve or deny it once its card is
/// shown, cancel it, take a streamed call's streams, wait for its outcome.
/// Dropping it is a client disconnect (see
/// [`kill_on_drop`](CallBuilder::kill_on_drop)).
///
/// # Examples
///
/// A streamed call ([`CallBuilder::streamed`]): its stdin and stdout are
/// the caller's.
///
/// ```
/// use std::io::{Read, Write};
/// use spillguard_std::{Host, HostOptions};
/// use spillguard_std::proto::{Config, State, StdoutMode};
///
/// let host = Host::new(Config::default(), HostOptions::default())?;
/// let call = host.command("cat").streamed().start();
/// let (mut stdin, mut stdout) = call.streams()?;
/// stdin.write_all(b"ping\n")?;
/// let mut reply = [0; 5];
/// stdout.read_exact(&mut reply)?;
/// assert_eq!(&reply, b"ping\n");
/// stdin.close(); // cat reads end-of-file and exits
/// let record = call.wait().record;
/// assert_eq!(record.state, State::Completed);
/// assert_eq!(record.stdout_mode, StdoutMode::Streamed);
/// assert_eq!((record.stdin_bytes_forwarded, record.stdout_bytes_forwarded), (5, 5));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type CallHandle = spillguard_host::blocking::BlockingCallHandle;

/// Cancels one call from anywhere; cheap to clone.
///
/// # Examples
///
/// ```
/// use spillguard_std::{Host, HostOptions};
/// use spillguard_std::proto::{CancelReason, Config, State};
///
/// let host = Host::new(Config::default(), HostOptions::default())?;
/// let call = host.command("sleep").arg("30").start();
/// let canceller = call.canceller();
/// std::thread::spawn(move || canceller.cancel());
/// let outcome = call.wait();
/// assert_eq!(outcome.record.cancel_reason, Some(CancelReason::Requested));
/// assert!(matches!(
///     outcome.record.state,
///     State::CancelledAfterDispatch | State::CancelledBeforeDispatch
/// ));
/// # Ok::<(), spillguard_std::HostError>(())
/// ```
pub type Canceller = spillguard_host::blocking::BlockingCanceller;
