#![doc = include_str!("../README.md")]
//!
//! # Examples
//!
//! A helper that floods stderr past its deadline: the call is cancelled,
//! the group gets SIGTERM, and only the last 16 KiB are retained.
//!
//! ```
//! use std::time::Duration;
//! use spillguard_tokio::{Host, HostOptions};
//! use spillguard_tokio::proto::{CancelReason, Config, State, StreamEnd};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), spillguard_tokio::HostError> {
//! let host = Host::new(Config::default(), HostOptions::default())?;
//! let outcome = host
//!     .shell("yes helper-diagnostic 1>&2")
//!     .deadline(Duration::from_millis(200))
//!     .run()
//!     .await;
//! let record = &outcome.record;
//! assert_eq!(record.state, State::CancelledAfterDispatch);
//! assert_eq!(record.cancel_reason, Some(CancelReason::Deadline));
//! assert_eq!(record.stream_end, StreamEnd::ReaderCompletedAfterCancel);
//! assert_eq!(record.stderr_bytes_retained, 16_384);
//! let marker = format!(
//!     "[stderr truncated: kept last 16384 of {} bytes]",
//!     record.stderr_bytes_seen
//! );
//! assert_eq!(outcome.stderr.render().lines().next(), Some(marker.as_str()));
//! # Ok(())
//! # }
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
//!     if call.poll_timeout() changed { sleep.reset(it) }   // one Sleep, reused
//!     input = if the deadline has passed { timer }          // before anything else
//!             else select! { biased; sleep → timer, channel.recv() → event,
//!                            read(stdout) / read(stderr), in turns → chunk or end }
//!     now = Instant::now()
//!     match input {             // exactly one Call::handle(now, input)
//!         chunk → Input::Stderr / Stdout,  end → Input::*Eof
//!         exit → Input::Exited, wait failed → Input::ProcessLost
//!         approve / deny / cancel / handle dropped → Input::Approval* / Cancel /
//!                                                  ClientDisconnected
//!         timer → Input::Timeout
//!     }
//! }
//! ```
//!
//! The owner reads both streams itself, one 64 KiB buffer each (no task
//! hop per chunk, never a read to the end), and after the call finished
//! reads and drops what is left until end-of-file. Around it, per helper: a
//! waiter task that owns the [`tokio::process::Child`] and reports its exit
//! (and reaps it even after the call stopped waiting), and a stdin writer
//! only when the helper is given bytes. The owner's clock is tokio's, so a paused test
//! clock (`tokio::time::pause`, feature `test-util`) drives calls that spawn nothing.
#![deny(missing_docs)]

#[cfg(not(unix))]
compile_error!(
    "spillguard-tokio runs helpers in process groups and needs a Unix platform (Linux for pidfd)"
);

mod owner;
mod process;
mod reader;
#[cfg(feature = "rmcp")]
pub mod rmcp;
mod runtime;
mod stream;

pub use spillguard_host::adapter_api::*;
/// The sans-IO protocol core (`spillguard-core`): the call record, its
/// states and outcome, settings and configuration, bounds, redaction and
/// the audit log format. Named `proto`, not `core`, so that a glob import
/// of this crate never shadows the language's `core`.
#[doc(no_inline)]
pub use spillguard_host::proto;
#[doc(no_inline)]
pub use spillguard_host::proto::Outcome;
pub use stream::{HelperStdin, HelperStdout};

/// For code that builds on this adapter rather than calls it: the
/// runtime it plugs into the host layer, and what code written over any
/// host (a test double, a generic driver) describes and starts a call
/// with. A caller needs none of it.
///
/// A call described once and started on any host, the std, smol or tokio
/// adapter's (each host's handle is its own: wait on it where its type
/// is known):
///
/// ```
/// use std::time::Duration;
/// use spillguard_tokio::HelperCommand;
/// use spillguard_tokio::adapter::{Launch, LaunchBuilder};
///
/// fn start_check<H: Launch>(host: &H) -> H::Handle {
///     LaunchBuilder::on(host, HelperCommand::new("make").arg("check"))
///         .deadline(Duration::from_secs(600))
///         .launch()
/// }
/// # let _ = start_check::<spillguard_tokio::Host>;
/// ```
pub mod adapter {
    pub use crate::runtime::{TokioRuntime, Waiters};
    /// A call's builder on any host that implements [`Launch`]: every
    /// builder method of the adapters' own `CallBuilder`, ended with
    /// [`launch`](LaunchBuilder::launch), which returns the host's handle.
    #[doc(inline)]
    pub use spillguard_host::CallBuilder as LaunchBuilder;
    pub use spillguard_host::{CallRequest, Launch};
}
use adapter::TokioRuntime;

spillguard_host::async_front! {
    runtime: TokioRuntime,
    process: "tokio::process",
    stdin: HelperStdin,
    stdout: HelperStdout,

    /// Runs helper calls for one process on one tokio runtime: holds the
    /// validated configuration, the process-wide retention pool, the audit
    /// sink and the live calls. `host.command(..)` makes a [`CallBuilder`]
    /// whose `run()` is a [`Run`] future of the outcome and whose `start()`
    /// is a [`CallHandle`].
    ///
    /// `Host::new` captures the current runtime (outside one it is
    /// [`HostError::NoRuntime`]); [`Host::with_runtime`] takes a
    /// `tokio::runtime::Handle` and may be called anywhere. Each call is
    /// driven by an owner task of its own, spawned on that runtime and
    /// reading its clock (so a paused test clock drives the calls), and
    /// detached from whoever started it: dropping a caller's future never
    /// skips a call's shutdown or its record.
    Host;

    /// The process-wide host runs its calls on a runtime of its own that
    /// lives as long as the process, so any runtime, or several in turn, may
    /// await them.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use spillguard_tokio::Command;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let output = Command::new("sh")
    ///     .args(["-c", "echo out; echo err 1>&2; exit 3"])
    ///     .deadline(Duration::from_secs(5))
    ///     .output()
    ///     .await?;
    /// assert_eq!(output.status.code(), Some(3));
    /// assert_eq!(output.stdout, b"out\n");
    /// assert_eq!(output.stderr, b"err\n");
    /// assert_eq!(output.record().stdout_bytes_seen, 4);
    /// # Ok(())
    /// # }
    /// ```
    Command;

    ///
    /// # Examples
    ///
    /// A streamed call (`CallBuilder::streamed`): the caller writes the
    /// helper's stdin and reads its stdout, and `id()` is the helper's pid
    /// while it runs.
    ///
    /// ```
    /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
    /// use spillguard_tokio::{Host, HostOptions};
    /// use spillguard_tokio::proto::{Config, State, StdoutMode};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let host = Host::new(Config::default(), HostOptions::default())?;
    /// let call = host.command("cat").streamed().start();
    /// let (mut stdin, mut stdout) = call.streams().await?;
    /// let pid = call.id().expect("cat runs until its stdin ends");
    /// assert!(pid > 1);
    /// stdin.write_all(b"ping\n").await?;
    /// let mut reply = [0; 5];
    /// stdout.read_exact(&mut reply).await?;
    /// assert_eq!(&reply, b"ping\n");
    /// stdin.shutdown().await?; // cat reads end-of-file and exits
    /// let record = call.wait().await.record;
    /// assert_eq!((record.state, record.pid), (State::Completed, Some(pid)));
    /// assert_eq!(record.stdout_mode, StdoutMode::Streamed);
    /// assert_eq!((record.stdin_bytes_forwarded, record.stdout_bytes_forwarded), (5, 5));
    /// # Ok(())
    /// # }
    /// ```
    CallHandle;

    /// Cancels one call from anywhere (another task, a signal handler);
    /// cheap to clone; from [`CallHandle::canceller`].
    Canceller;
}
