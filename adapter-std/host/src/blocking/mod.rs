//! The blocking front, for an adapter whose owners are threads:
//! [`BlockingHost`] (the host the builder starts calls on; `run()` blocks
//! until the outcome), [`BlockingCallHandle`] (the caller's side of one
//! call), [`BlockingCanceller`], a streamed call's [`HelperStdin`] and
//! [`HelperStdout`], and the [`Mailbox`] through which handles and the
//! host reach an owner that waits in `poll(2)`.
//!
//! The adapter names the host with its [`ThreadDriver`]
//! (`pub type Host = BlockingHost<StdThreads>`) and keeps only what its
//! threads decide: the owner's loop, the process, the reader, and where an
//! owner thread comes from. Everything else (the registry of live calls,
//! shutdown, debug grants, approval plumbing, waiting for an outcome) is
//! here, on top of the host layer's [`HostLink`](crate::owner::HostLink) and
//! [`HandleCore`](crate::handle::HandleCore).

use std::io;
use std::sync::Condvar;
use std::sync::mpsc::SyncSender;

use spillguard_core::CallError;

use crate::owner::OwnerCore;
use crate::run_loop::{self, Start};

mod handle;
mod host;
mod mailbox;
mod stream;

pub use handle::{BlockingCallHandle, BlockingCanceller};
pub use host::{BlockingHost, BlockingShared, DefaultHost};
pub use mailbox::{Inbox, Mailbox};
pub use stream::{HelperStdin, HelperStdout, RawStreams, SharedPipe};

/// The core's answer to an approval or a denial goes back on this channel.
pub type Reply = SyncSender<Result<(), CallError>>;

/// What reaches an owner through its [`Mailbox`].
pub type Event = run_loop::Event<Reply>;

/// What a [`BlockingCallHandle`] or the [`BlockingHost`] asks an owner.
pub type Command = run_loop::Command<Reply>;

/// The call an owner thread drives, and everything it needs between two
/// waits.
pub type ThreadOwnerCore = OwnerCore<BlockingShared, Condvar>;

/// What an adapter whose owners are threads provides to the blocking
/// front: its owner of one call, how that owner runs to the record, how it
/// ends a call it has no thread for, and where an owner thread comes from.
pub trait ThreadDriver: Send + Sync + 'static {
    /// The owner of one call.
    type Owner: Send + 'static;

    /// The owner of the call in `core`, reached through `inbox` (`None`
    /// when no inbox could be made: then it is only ever
    /// [`fail`](Self::fail)ed) and sending its own inputs on `mailbox`.
    fn owner(core: ThreadOwnerCore, inbox: Option<Inbox>, mailbox: Mailbox) -> Self::Owner;

    /// Runs the call to its record on the current thread, then lets go of
    /// what it still holds.
    fn run(owner: &mut Self::Owner, start: Start);

    /// Ends a call whose owner could not run, on the caller's thread:
    /// `cancelled_before_dispatch` if the host is closing, else
    /// `failed_before_dispatch` for `reason`. Nothing is spawned.
    fn fail(owner: Self::Owner, start: Start, reason: String);

    /// Runs `job` on a thread of the adapter's (a kept one or a new one),
    /// or says why none could run it.
    fn spawn(job: Box<dyn FnOnce() + Send>) -> io::Result<()>;

    /// The process-wide host that runs the calls of
    /// [`CallBuilder<'static, DefaultHost<Self>>`](DefaultHost) (an
    /// adapter's `Command`): made at its first call with the default
    /// configuration and options, and kept for the life of the process.
    fn default_host() -> io::Result<&'static BlockingHost<Self>>
    where
        Self: Sized;

    /// Makes a call's span with the adapter's crate as its target
    /// ([`call_span!`](crate::call_span)); this crate's by default.
    #[cfg(feature = "tracing")]
    fn call_span(fields: &crate::call_span::SpanFields<'_>) -> tracing::Span
    where
        Self: Sized,
    {
        crate::call_span::host_span(fields)
    }
}
