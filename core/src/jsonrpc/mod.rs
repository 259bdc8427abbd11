//! JSON-RPC over stdio, as an MCP guard sees it, sans IO.
//!
//! * [`MessageScanner`] (`scan.rs`): whether one line is exactly one
//!   JSON-RPC message, and its `id`, `method` and kind, read incrementally
//!   in any chunking without keeping the line.
//! * [`StdoutLineGuard`] (`line_guard.rs`): the server's stdout held line
//!   by line, whole messages forwarded, every other line diverted to the
//!   diagnostics.
//! * [`ClientLines`] and [`PendingRequests`] (`pending.rs`): the client's
//!   requests not answered yet, and the errors that answer them when the
//!   server is gone ([`ServerGone`]).
//! * [`InputQueue`] (`queue.rs`): the client's bytes on their way to the
//!   server, and the rule for a server that stops reading.
//! * [`trace_edit`] (`meta.rs`): a request made to carry a span in
//!   `params._meta.traceparent`, its other bytes as they were.
//! * [`SessionReplay`] (`replay.rs`): the host's session kept for a
//!   restarted server, and the answers of its replay swallowed.

mod line_guard;
mod meta;
mod pending;
mod queue;
mod replay;
mod scan;

pub use line_guard::{
    DEFAULT_MAX_MESSAGE_BYTES, Diverted, HeldLine, ProtocolLine, Segment, StdoutLineGuard,
};
pub use meta::trace_edit;
pub use pending::{
    ClientLines, MAX_PENDING, MAX_PENDING_ID_BYTES, PendingRequests, RestartNote, SERVER_GONE_CODE,
    ServerGone,
};
pub use queue::{InputQueue, QueueEvent, QueueSettings};
pub use replay::{MAX_KEPT_BYTES, MAX_KEPT_LINE, REPLAY_WAIT, ServerLine, SessionReplay};
pub use scan::{MAX_BATCH, MAX_DEPTH, MessageInfo, MessageKind, MessageScanner, RawValue};
