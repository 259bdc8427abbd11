//! Why a helper was not spawned: the record's fixed name for the OS
//! error's kind ([`spawn_error_kind`]) and [`SpawnError`], the `Err` of
//! [`Outcome::into_result`].

use std::fmt;
use std::io;

use super::{Outcome, State};

/// The record's name for the kind of OS error that kept a helper from
/// being spawned (`spawn_error_kind`). The mapping is fixed; kinds not
/// listed are `other`:
///
/// | kind | name |
/// |---|---|
/// | `NotFound` | `not_found` |
/// | `PermissionDenied` | `permission_denied` |
/// | `NotADirectory` | `not_a_directory` |
/// | `IsADirectory` | `is_a_directory` |
/// | `InvalidFilename` | `invalid_filename` |
/// | `InvalidInput` | `invalid_input` |
/// | `ArgumentListTooLong` | `argument_list_too_long` |
/// | `ExecutableFileBusy` | `executable_file_busy` |
/// | `ResourceBusy` | `resource_busy` |
/// | `WouldBlock` | `would_block` |
/// | `OutOfMemory` | `out_of_memory` |
/// | `Interrupted` | `interrupted` |
/// | `Unsupported` | `unsupported` |
/// | anything else | `other` |
///
/// ```
/// use std::io::ErrorKind;
/// use spillguard_core::spawn_error_kind;
///
/// assert_eq!(spawn_error_kind(ErrorKind::NotFound), "not_found");
/// assert_eq!(spawn_error_kind(ErrorKind::TimedOut), "other");
/// ```
pub fn spawn_error_kind(kind: io::ErrorKind) -> &'static str {
    SPAWN_ERROR_KINDS
        .iter()
        .find(|(listed, _)| *listed == kind)
        .map_or("other", |(_, name)| name)
}

/// The table of [`spawn_error_kind`], read both ways: a record's name back
/// to its kind for [`SpawnError::kind`].
const SPAWN_ERROR_KINDS: [(io::ErrorKind, &str); 13] = {
    use io::ErrorKind as K;
    [
        (K::NotFound, "not_found"),
        (K::PermissionDenied, "permission_denied"),
        (K::NotADirectory, "not_a_directory"),
        (K::IsADirectory, "is_a_directory"),
        (K::InvalidFilename, "invalid_filename"),
        (K::InvalidInput, "invalid_input"),
        (K::ArgumentListTooLong, "argument_list_too_long"),
        (K::ExecutableFileBusy, "executable_file_busy"),
        (K::ResourceBusy, "resource_busy"),
        (K::WouldBlock, "would_block"),
        (K::OutOfMemory, "out_of_memory"),
        (K::Interrupted, "interrupted"),
        (K::Unsupported, "unsupported"),
    ]
};

/// Why a call's helper was never spawned: the `Err` of
/// [`Outcome::into_result`], for a caller who treats "the helper did not
/// start" as an error, as `tokio::process::Command::output` does, and
/// everything that happened after a start as an outcome.
///
/// It is made from a call that ended `failed_before_dispatch`, and holds
/// that call's [`Outcome`] ([`outcome`](Self::outcome),
/// [`into_outcome`](Self::into_outcome)). What it says comes from the
/// record:
///
/// * [`kind`](Self::kind): the OS error's kind when the spawn itself
///   failed (the record's `spawn_error_kind`, read back through the table
///   of [`spawn_error_kind`]; `other` is [`io::ErrorKind::Other`]);
///   [`io::ErrorKind::InvalidInput`] when the call was refused before it
///   was validated (a command or settings that break a rule);
///   [`io::ErrorKind::Other`] when the audit log could not record the
///   attempt (the call fails closed).
/// * [`reason`](Self::reason) and its `Display`: the record's `failure`,
///   redacted like every string of the record.
///
/// It converts into [`io::Error`] (keeping [`kind`](Self::kind)), so `?`
/// takes it into `io::Result` or `Box<dyn Error + Send + Sync>`.
///
/// # Examples
///
/// ```
/// use std::io;
/// use std::time::{Instant, SystemTime};
/// use spillguard_core::{Input, Action, Call, CallKind, CallSettings, CallSpec, Config, RetentionPool};
///
/// fn run(call: &mut Call, t0: Instant) -> io::Result<Vec<u8>> {
///     call.handle(t0, Input::Validated { needs_approval: false }).map_err(io::Error::other)?;
///     let mut outcome = None;
///     while let Some(action) = call.poll_action() {
///         match action {
///             // The driver tries to spawn `nosuch` and the OS says no.
///             Action::Spawn(_) => call
///                 .handle(t0, Input::SpawnFailed { kind: io::ErrorKind::NotFound, message: "spawn failed: nosuch: not found".into() })
///                 .map_err(io::Error::other)?,
///             Action::Finished(o) => outcome = Some(o),
///             _ => {}
///         }
///     }
///     let outcome = outcome.ok_or_else(|| io::Error::other("not finished"))?;
///     Ok(outcome.into_result()?.stdout_bytes())
/// }
///
/// let config = Config::default();
/// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
/// let spec = CallSpec {
///     call_id: "c_1".into(),
///     session_id: "s_1".into(),
///     kind: CallKind::Action,
///     action: "build".into(),
///     target: "ci".into(),
///     summary: "nosuch --all".into(),
///     card_lines: Vec::new(),
/// };
/// let t0 = Instant::now();
/// let mut call = Call::new(spec, CallSettings::action(&config), &pool, t0, SystemTime::UNIX_EPOCH);
/// let error = run(&mut call, t0).unwrap_err();
/// assert_eq!(error.kind(), io::ErrorKind::NotFound);
/// assert_eq!(error.to_string(), "the helper was not spawned: spawn failed: nosuch: not found");
/// // Its `Debug` is one line, inside the `io::Error` too.
/// assert_eq!(
///     format!("{error:?}"),
///     r#"Custom { kind: NotFound, error: SpawnError { kind: NotFound, call_id: "c_1", reason: "spawn failed: nosuch: not found" } }"#
/// );
/// ```
pub struct SpawnError {
    outcome: Box<Outcome>,
}

/// One line: the kind, the call and why (the outcome behind it is in
/// [`outcome`](SpawnError::outcome)).
impl fmt::Debug for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SpawnError {{ kind: {:?}, call_id: {:?}, reason: {:?} }}",
            self.kind(),
            self.outcome.record.call_id,
            self.reason()
        )
    }
}

impl SpawnError {
    /// The error for `outcome`, if its call ended `failed_before_dispatch`.
    pub(crate) fn of(outcome: Outcome) -> Result<Outcome, Self> {
        if outcome.record.state == State::FailedBeforeDispatch {
            Err(Self {
                outcome: Box::new(outcome),
            })
        } else {
            Ok(outcome)
        }
    }

    /// The kind of the failure: the OS error's kind for a failed spawn,
    /// [`io::ErrorKind::InvalidInput`] for a call refused before it was
    /// validated, [`io::ErrorKind::Other`] for an attempt the audit log
    /// could not record.
    pub fn kind(&self) -> io::ErrorKind {
        let record = &self.outcome.record;
        if let Some(name) = record.spawn_error_kind.as_deref() {
            return SPAWN_ERROR_KINDS
                .iter()
                .find(|(_, listed)| *listed == name)
                .map_or(io::ErrorKind::Other, |(kind, _)| *kind);
        }
        let validated = record.timeline.iter().any(|m| m.state == State::Validated);
        if validated {
            io::ErrorKind::Other
        } else {
            io::ErrorKind::InvalidInput
        }
    }

    /// Why, as the record's `failure` says it (redacted).
    pub fn reason(&self) -> &str {
        self.outcome
            .record
            .failure
            .as_deref()
            .unwrap_or("failed before dispatch")
    }

    /// The call's outcome: its record, and the (empty) captures.
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// The call's outcome, for a caller who wants the record after all.
    pub fn into_outcome(self) -> Outcome {
        *self.outcome
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the helper was not spawned: {}", self.reason())
    }
}

impl std::error::Error for SpawnError {}

impl From<SpawnError> for io::Error {
    fn from(error: SpawnError) -> Self {
        io::Error::new(error.kind(), error)
    }
}

/// A stdout cut at its budget, in a call that did not allow it: the bytes
/// the helper wrote and those kept. Raise the budget with the builder's
/// `stdout_budget(bytes)`, or accept a cut with `allow_stdout_truncation()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdoutTruncated {
    /// Bytes the helper wrote to stdout.
    pub seen: u64,
    /// Bytes kept, within the budget.
    pub kept: u64,
}

impl fmt::Display for StdoutTruncated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stdout was truncated: {} bytes written, {} kept; raise the budget with `stdout_budget(bytes)` or accept the cut with `allow_stdout_truncation()`",
            self.seen, self.kept
        )
    }
}

impl std::error::Error for StdoutTruncated {}

/// Why [`Outcome::into_result`] is not `Ok`: the helper was never
/// spawned, or its stdout was cut at its budget in a call that did not
/// allow that. Either way the outcome is kept
/// ([`outcome`](Self::outcome)). As an `io::Error` (through `?`), a spawn
/// failure has the OS error's kind and a cut stdout
/// [`io::ErrorKind::Other`], with the [`SpawnError`] or the
/// [`StdoutTruncated`] inside.
#[non_exhaustive]
pub enum OutcomeError {
    /// The helper was never spawned (`failed_before_dispatch`).
    NotSpawned(SpawnError),
    /// The helper's stdout was cut at its budget.
    StdoutTruncated {
        /// The bytes written and kept.
        truncated: StdoutTruncated,
        /// The call's outcome, stdout as kept.
        outcome: Box<Outcome>,
    },
}

/// One line, as [`SpawnError`]'s.
impl fmt::Debug for OutcomeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotSpawned(error) => write!(f, "NotSpawned({error:?})"),
            Self::StdoutTruncated { truncated, outcome } => write!(
                f,
                "StdoutTruncated {{ call_id: {:?}, seen: {}, kept: {} }}",
                outcome.record.call_id, truncated.seen, truncated.kept
            ),
        }
    }
}

impl OutcomeError {
    /// The error for `outcome`, if any (see [`Outcome::into_result`]).
    pub(crate) fn of(outcome: Outcome) -> Result<Outcome, Self> {
        let outcome = SpawnError::of(outcome).map_err(Self::NotSpawned)?;
        let record = &outcome.record;
        if record.stdout_truncated && !outcome.stdout_truncation_allowed {
            let truncated = StdoutTruncated {
                seen: record.stdout_bytes_seen,
                kept: record.stdout_bytes_retained,
            };
            return Err(Self::StdoutTruncated {
                truncated,
                outcome: Box::new(outcome),
            });
        }
        Ok(outcome)
    }

    /// The kind: the spawn's (see [`SpawnError::kind`]), or
    /// [`io::ErrorKind::Other`] for a cut stdout.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            Self::NotSpawned(error) => error.kind(),
            Self::StdoutTruncated { .. } => io::ErrorKind::Other,
        }
    }

    /// The call's outcome: its record, and what was captured.
    pub fn outcome(&self) -> &Outcome {
        match self {
            Self::NotSpawned(error) => error.outcome(),
            Self::StdoutTruncated { outcome, .. } => outcome,
        }
    }

    /// The call's outcome, for a caller who wants it after all.
    pub fn into_outcome(self) -> Outcome {
        match self {
            Self::NotSpawned(error) => error.into_outcome(),
            Self::StdoutTruncated { outcome, .. } => *outcome,
        }
    }
}

impl fmt::Display for OutcomeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotSpawned(error) => error.fmt(f),
            Self::StdoutTruncated { truncated, .. } => truncated.fmt(f),
        }
    }
}

impl std::error::Error for OutcomeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::NotSpawned(error) => Some(error),
            Self::StdoutTruncated { truncated, .. } => Some(truncated),
        }
    }
}

impl From<OutcomeError> for io::Error {
    fn from(error: OutcomeError) -> Self {
        match error {
            OutcomeError::NotSpawned(error) => error.into(),
            OutcomeError::StdoutTruncated { truncated, .. } => io::Error::other(truncated),
        }
    }
}
