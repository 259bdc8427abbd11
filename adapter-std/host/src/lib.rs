#![doc = include_str!("../README.md")]
//!
//! # What is here
//!
//! * The user-facing types: [`HelperCommand`], [`HostOptions`],
//!   [`ShutdownReport`], [`HostError`], the builder ([`CallBuilder`],
//!   [`Approval`]) and the audit sinks ([`AuditSink`], [`JsonLinesAudit`],
//!   [`ChainedFileAudit`]).
//! * The adapter-author API: [`owner`] (the owner skeleton: the action
//!   dispatch, the spawn, finishing and letting go of a call, the policy
//!   for an owner that dies), [`handle`] (the caller's side of a call:
//!   [`handle::HandleCore`], which every runtime's handle wraps), [`asynchronous`]
//!   (the host, handle and owner parts of smol and tokio, written once over
//!   an [`asynchronous::AsyncRuntime`]; each runtime names them `Host`,
//!   `CallHandle`, `Canceller`), [`blocking`] (the same for owners that are
//!   threads, over a [`blocking::ThreadDriver`]: std's host, handle and
//!   streams), [`host_state`] (config, options, pool,
//!   registry of live calls, debug grant, kept records), [`published`]
//!   (what an owner publishes for its handle), [`run_loop`] (the events and
//!   how each becomes exactly one `Call::handle` call), [`read_buffers`] and
//!   [`os`], and [`stream`] (a streamed call's counters, shared stdin and
//!   the caller's presence); what outlives a call: [`leftover_pipes`] (the host's
//!   drainer of the pipes an escaped descendant still holds) and
//!   [`host_death`] (the supervisor that signals live helpers' groups when
//!   the host process dies). A runtime adapter keeps only what its runtime decides: how the
//!   owner waits, how a waiter is woken, where blocking work runs.
//!
//! The platform is Linux: helpers run in process groups and control
//! groups, are cloned with a pidfd and confined with Landlock and seccomp.
//! Tested on x86_64 with glibc; aarch64 glibc builds (the clone into a
//! control group then writes `cgroup.procs`); musl is untested. Every
//! `unsafe` of the host layer is in one private module, `sys`, each block with
//! its reasons.
#![deny(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!(
    "spillguard-host builds on Linux only: helpers are cloned with a pidfd into control groups and confined with Landlock and seccomp"
);

pub mod asynchronous;
mod audit;
#[cfg(feature = "audit-checkpoint")]
mod audit_checkpoint;
mod audit_log;
mod audit_read;
pub mod blocking;
mod builder;
mod builder_methods;
#[cfg(feature = "tracing")]
pub mod call_span;
mod command;
pub mod confine;
mod error;
pub mod handle;
pub mod host_death;
pub mod host_state;
mod ids;
pub mod leftover_pipes;
pub mod lines;
mod options;
pub mod os;
mod output;
pub mod owner;
pub mod pipes;
pub mod published;
pub mod read_buffers;
pub mod run_loop;
pub mod stream;
// Every `unsafe` of the host layer, each block with its reasons; the rest of the
// crate is free of it.
#[allow(unsafe_code)]
mod sys;

pub use audit::{AuditSink, JsonLinesAudit};
#[cfg(feature = "audit-checkpoint")]
pub use audit_checkpoint::{CheckpointOptions, LogLeaves, log_leaves};
pub use audit_log::{
    AppendFailure, Appended, AuditOpenError, ChainedFileAudit, ChainedFileOptions,
    DEFAULT_LOCK_WAIT, FsyncPolicy, KeyError, KeySource, OpenFailure, OpenedLog, OwnRecord,
};
pub use audit_read::{READ_CHUNK_BYTES, ReadError, read_log};
pub use builder::{
    Approval, CallBuilder, CallRequest, Launch, Resolved, StderrTap, TapFn, command_line,
};
pub use command::{HelperCommand, InvalidCommand, StdinMode, Stdio};
pub use error::HostError;
pub use host_state::REDACTION_BUDGET;
pub use ids::{fresh_id, fresh_span_id, fresh_trace_id};
pub use leftover_pipes::LeftoverStats;
pub use lines::StderrLines;
pub use options::{HostOptions, ShutdownReport};
pub use output::{Output, status_of};
/// The sans-IO protocol core (`spillguard-core`): the call record, its
/// states and outcome, settings and configuration, bounds, redaction and
/// the audit log format. Named `proto`, not `core`, so that a glob
/// import of this crate never shadows the language's `core`.
pub use spillguard_core as proto;
pub use spillguard_core::{OutcomeError, StdoutTruncated};

/// What the adapters' macro-made types name by path; not an API.
#[doc(hidden)]
pub mod __private {
    pub use serde_json;
}

/// What the smol and tokio adapters re-export for their users, beside
/// their own `Host`, `CallBuilder`, `Command`, `CallHandle`, `Canceller`,
/// `Run` and stream types ([`async_front!`]), and the core (`proto`,
/// `Outcome`), which they re-export without inlining its pages: those
/// show examples in the core's terms.
pub mod adapter_api {
    pub use crate::os;
    pub use crate::{
        AppendFailure, Appended, Approval, AuditOpenError, AuditSink, ChainedFileAudit,
        ChainedFileOptions, DEFAULT_LOCK_WAIT, FsyncPolicy, HelperCommand, HostError, HostOptions,
        InvalidCommand, JsonLinesAudit, KeyError, KeySource, LeftoverStats, OpenFailure, OpenedLog,
        Output, OwnRecord, ShutdownReport, StderrLines, StdinMode, Stdio, StdoutTruncated,
    };
    #[cfg(feature = "audit-checkpoint")]
    pub use crate::{CheckpointOptions, LogLeaves, log_leaves};
}
