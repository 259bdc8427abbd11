#![doc = include_str!("../README.md")]
//!
//! # Examples
//!
//! A helper that floods stderr past its deadline: the call is cancelled,
//! the group gets SIGTERM, and only the last 16 KiB are retained.
//!
//! ```
//! use std::time::Duration;
//! use spillguard_smol::{Host, HostOptions};
//! use spillguard_smol::proto::{CancelReason, Config, State, StreamEnd};
//!
//! let host = Host::new(Config::default(), HostOptions::default())?;
//! let flood = host.shell("yes helper-diagnostic 1>&2").deadline(Duration::from_millis(200));
//! let outcome = smol::block_on(flood.run());
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
//! # Ok::<(), spillguard_smol::HostError>(())
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
//!     input = if call.poll_timeout() <= now { timed out }
//!             else { future::or(timer (set to poll_timeout),
//!                               or(channel.recv(), read of stdout or stderr, in turns)).await }
//!     now = Instant::now()
//!     match input {             // exactly one Call::handle(now, input)
//!         chunk → Input::Stderr / Stdout,  end → Input::*Eof
//!         exit → Input::Exited, wait failed → Input::ProcessLost
//!         approve / deny / cancel / handle dropped → Input::Approval* / Cancel /
//!                                                  ClientDisconnected
//!         timed out → Input::Timeout
//!     }
//! }
//! ```
//!
//! The owner reads both streams itself, one 64 KiB buffer each (no task
//! hop per chunk), and after the call finished reads and drops what is
//! left until end-of-file. Around it, per helper, detached tasks: a waiter
//! that owns the [`async_process::Child`] and reports its exit (and reaps
//! it even after the call stopped waiting), and a stdin writer only when
//! the helper is given bytes.
#![deny(missing_docs)]

#[cfg(not(unix))]
compile_error!(
    "spillguard-smol runs helpers in process groups and needs a Unix platform (Linux for pidfd)"
);

mod owner;
mod process;
mod reader;
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
/// use spillguard_smol::HelperCommand;
/// use spillguard_smol::adapter::{Launch, LaunchBuilder};
///
/// fn start_check<H: Launch>(host: &H) -> H::Handle {
///     LaunchBuilder::on(host, HelperCommand::new("make").arg("check"))
///         .deadline(Duration::from_secs(600))
///         .launch()
/// }
/// # let _ = start_check::<spillguard_smol::Host>;
/// ```
pub mod adapter {
    pub use crate::runtime::{SmolRuntime, Waiters};
    /// A call's builder on any host that implements [`Launch`]: every
    /// builder method of the adapters' own `CallBuilder`, ended with
    /// [`launch`](LaunchBuilder::launch), which returns the host's handle.
    #[doc(inline)]
    pub use spillguard_host::CallBuilder as LaunchBuilder;
    pub use spillguard_host::{CallRequest, Launch};
}
use adapter::SmolRuntime;

spillguard_host::async_front! {
    runtime: SmolRuntime,
    process: "async_process",
    stdin: HelperStdin,
    stdout: HelperStdout,

    /// Runs helper calls for one process, each on an owner task detached
    /// on smol's global executor (so `Host::new` never lacks a runtime):
    /// holds the validated configuration, the process-wide retention pool,
    /// the audit sink and the live calls. `host.command(..)` makes a
    /// [`CallBuilder`]: `run()` is a [`Run`] future of the outcome,
    /// `start()` a [`CallHandle`].
    Host;

    /// The process-wide host runs its calls on smol's global executor.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use spillguard_smol::Command;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// smol::block_on(async {
    ///     let output = Command::new("sh")
    ///         .args(["-c", "echo out; echo err 1>&2; exit 3"])
    ///         .deadline(Duration::from_secs(5))
    ///         .output()
    ///         .await?;
    ///     assert_eq!(output.status.code(), Some(3));
    ///     assert_eq!(output.stdout, b"out\n");
    ///     assert_eq!(output.stderr, b"err\n");
    ///     assert_eq!(output.record().stdout_bytes_seen, 4);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    Command;

    /// The crate docs show `kill_on_drop` with a timer, and a streamed call.
    CallHandle;

    /// Cancels one call from anywhere; cheap to clone.
    ///
    /// # Examples
    ///
    /// ```
    /// use spillguard_smol::{Host, HostOptions};
    /// use spillguard_smol::proto::{CancelReason, Config, State};
    ///
    /// smol::block_on(async {
    ///     let host = Host::new(Config::default(), HostOptions::default())?;
    ///     let call = host.command("sleep").arg("30").start();
    ///     let canceller = call.canceller();
    ///     smol::spawn(async move { canceller.cancel() }).detach();
    ///     let outcome = call.wait().await;
    ///     assert_eq!(outcome.record.cancel_reason, Some(CancelReason::Requested));
    ///     assert!(matches!(
    ///         outcome.record.state,
    ///         State::CancelledAfterDispatch | State::CancelledBeforeDispatch
    ///     ));
    ///     Ok::<(), spillguard_smol::HostError>(())
    /// })?;
    /// # Ok::<(), spillguard_smol::HostError>(())
    /// ```
    Canceller;
}
