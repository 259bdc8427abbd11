//! [`Output`]: a finished call as `std::process::Output` would give it
//! (the exit status, stdout, stderr), with its record beside; what every
//! adapter's `output()` and `status()` return.
//!
//! A call that ran is `Ok` whatever its exit, as with
//! `std::process::Command::output`; what is an error instead: a helper
//! that was never spawned (the OS error's kind, from
//! [`SpawnError`](spillguard_core::SpawnError)), a
//! call that ended before its helper exited (cancelled, its approval
//! declined or expired), and a stdout cut at its budget, unless the
//! caller allowed that ([`StdoutTruncated`](spillguard_core::StdoutTruncated)).

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use spillguard_core::{CallRecord, Outcome, OutcomeError};

/// What a call left, in the shape of `std::process::Output`.
///
/// `stdout` is the helper's stdout, raw, whole unless the record says
/// `stdout_truncated` (and the caller allowed a cut). `stderr` is its
/// bounded excerpt: the retained part, redacted, the truncation marker
/// first when bytes were dropped.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Output {
    /// How the helper ended: its exit code, or the signal that ended it
    /// (SIGTERM or SIGKILL when its deadline or a cancel stopped it).
    pub status: ExitStatus,
    /// The helper's stdout, raw.
    pub stdout: Vec<u8>,
    /// The helper's stderr as kept: redacted, bounded, marker first if cut.
    pub stderr: Vec<u8>,
    record: CallRecord,
}

impl Output {
    /// The call's record: every byte counted, the timeline, why it ended.
    pub fn record(&self) -> &CallRecord {
        &self.record
    }

    /// The record, kept, the rest dropped.
    pub fn into_record(self) -> CallRecord {
        self.record
    }

    /// The output of `outcome`, or why there is none (see the module
    /// docs); a cut stdout is an error unless the call allowed it.
    pub fn of(outcome: Outcome) -> io::Result<Self> {
        let outcome = outcome.into_result()?;
        let status = exit_status(&outcome.record)?;
        Ok(Self {
            status,
            stdout: outcome.stdout.to_vec(),
            stderr: outcome.stderr.render().into_bytes(),
            record: outcome.record,
        })
    }
}

/// How the helper of `outcome` ended, or why it never did: the spawn's
/// error ([`SpawnError`](spillguard_core::SpawnError), with the OS
/// error's kind), or the state the call
/// ended in before its helper exited. A cut stdout is no error here.
pub fn status_of(outcome: Outcome) -> io::Result<ExitStatus> {
    let outcome = match outcome.into_result() {
        Ok(outcome) => outcome,
        Err(error @ OutcomeError::NotSpawned(_)) => return Err(error.into()),
        Err(error) => error.into_outcome(),
    };
    exit_status(&outcome.record)
}

/// How the helper of `record` ended: its exit code or its signal.
fn exit_status(record: &CallRecord) -> io::Result<ExitStatus> {
    match (record.exit_status, record.exit_signal) {
        (_, Some(signal)) => Ok(ExitStatus::from_raw(signal & 0x7f)),
        (Some(code), None) => Ok(ExitStatus::from_raw((code & 0xff) << 8)),
        (None, None) => {
            let why = record
                .cancel_reason
                .and_then(|reason| serde_json::to_value(reason).ok())
                .and_then(|name| name.as_str().map(|name| format!(" ({name})")))
                .unwrap_or_default();
            Err(io::Error::other(format!(
                "the call ended {}{why} before its helper exited",
                record.state.as_str()
            )))
        }
    }
}
