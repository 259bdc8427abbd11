//! Where lifecycle events go: the [`AuditSink`] trait and a JSON-lines file.
//!
//! Every [`AuditEvent`] the core emits — the attempt before anything is
//! approved or spawned, each transition, the final record — is written by
//! the call's owner, in order, as it happens. The hash-chained, verifiable
//! log is [`ChainedFileAudit`](crate::ChainedFileAudit); the JSON-lines
//! file is for people and tools that want plain text.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use spillguard_core::AuditEvent;
use spillguard_core::trace::CallTrace;

/// Receives lifecycle events from every call of a host (`Host` in each
/// adapter).
///
/// Called from the calls' owner threads (in the async adapters, from their
/// blocking-thread pools), possibly at the same time; an implementation
/// serialises writes itself. A write error is counted by
/// the host's `audit_failures()` and reported to
/// the call, which fails closed if it has not dispatched yet
/// (`failed_before_dispatch`: nothing runs unaudited) and records the
/// failure in `audit_failures` otherwise.
pub trait AuditSink: Send + Sync {
    /// Appends one event.
    fn write(&self, event: &AuditEvent) -> io::Result<()>;

    /// Appends one event of a call whose span is `span`, when the call is
    /// in a trace (its trace and span ids, for a sink that sends each
    /// event on, as the CLI's OTLP log export does). The owners call this
    /// one; by default it is [`write`](Self::write).
    fn write_in_span(&self, event: &AuditEvent, span: Option<&CallTrace>) -> io::Result<()> {
        let _ = span;
        self.write(event)
    }
}

/// Appends one JSON object per line to a file, one `write` per event.
///
/// # Examples
///
/// ```
/// # use spillguard_host::{AuditSink, JsonLinesAudit};
/// # use spillguard_host::proto::{AuditEvent, AuditKind, CallKind};
///
/// let path = std::env::temp_dir().join(format!("spillguard-doc-{}.jsonl", std::process::id()));
/// let audit = JsonLinesAudit::open(&path)?;
/// audit.write(&AuditEvent {
///     call_id: "c_1".into(),
///     session_id: "s_1".into(),
///     offset_us: 12,
///     kind: AuditKind::Attempt {
///         kind: CallKind::Action,
///         action: "ssh.exec".into(),
///         target: "deploy@web-3".into(),
///     },
/// })?;
/// let text = std::fs::read_to_string(&path)?;
/// assert!(text.starts_with(r#"{"call_id":"c_1","session_id":"s_1","offset_us":12,"kind":{"attempt":"#));
/// assert!(text.ends_with("}\n"));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct JsonLinesAudit {
    file: Mutex<File>,
}

impl JsonLinesAudit {
    /// Opens (or creates) `path` for appending.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }
}

impl AuditSink for JsonLinesAudit {
    fn write(&self, event: &AuditEvent) -> io::Result<()> {
        let mut line = serde_json::to_vec(event).map_err(io::Error::other)?;
        line.push(b'\n');
        // One write of a whole line, so concurrent calls never interleave.
        self.file
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .write_all(&line)
    }
}
