//! The hash-chained audit log in a file: [`ChainedFileAudit`].
//!
//! The frames, the chain, the sealing and the verification are the core's
//! ([`spillguard_core::audit`]); this module does the IO around them: it
//! opens or recovers the file, draws the log id and the nonces from the
//! operating system, appends each frame with one `write_all`, and syncs the
//! file as its [`FsyncPolicy`] says. Writers in several processes take
//! turns on one file: each holds its lock only while it reads or appends.
//!
//! What keeps the log whole, and a call failing closed when it cannot be:
//!
//! * **Opening** refuses a path that is not a regular file before reading
//!   it, and a log that fails verification or is shorter than its anchor
//!   file says. A torn final frame is cut and recorded as a
//!   [`LogEntry::Recovered`] entry. With an anchor offset only the
//!   anchored record and what follows are verified, falling back to a full
//!   verification when that cannot vouch for the log.
//! * **Taking turns**: a writer waits at most
//!   [`lock_wait`](ChainedFileOptions::lock_wait) (default 10 s,
//!   `--audit-wait-ms` in the CLI) for the lock; past it, opening fails
//!   with [`OpenFailure::InUse`] and an append fails, so the call fails
//!   closed. At each turn it first reads and verifies what others
//!   appended since its last turn (`catch_up`), recovering a dead
//!   writer's torn frame.
//! * **Appending** writes whole frames only; a failed append is cut back
//!   with `set_len`, and a failed sync stops the sink (calls then fail
//!   closed).
//! * **Syncing**: the default [`FsyncPolicy`] syncs on attempts and final
//!   records, so an attempt is durable before dispatch.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use spillguard_core::audit::{
    Anchor, ChainHash, Key, KeyId, LogEntry, LogId, LogWriter, Nonce, ResumeError, TornTail,
    Verdict, VerifyOptions, verify,
};
use spillguard_core::{AuditEvent, AuditKind};
use zeroize::Zeroizing;

use crate::audit::AuditSink;
#[cfg(feature = "audit-checkpoint")]
use crate::audit_checkpoint::{CheckpointOptions, Checkpointer, ResumeFailure};

/// When the log file is synced to stable storage (`fdatasync`).
///
/// Whatever the policy, opening a log syncs it once (its creation or its
/// recovery is durable before any event is appended), and when an
/// [anchor file](ChainedFileOptions::anchor_file) is kept the log is synced
/// before each anchor is written, so that an anchor never vouches for
/// records a power loss could take back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FsyncPolicy {
    /// After every event: nothing acknowledged is ever lost, at the price
    /// of one sync per transition.
    EveryEvent,
    /// After every `n`-th event written since the log was opened (events
    /// `n`, `2n`, …).
    EveryNEvents(NonZeroU64),
    /// After each final record only.
    OnFinal,
    /// After each attempt and each final record (the default). The attempt
    /// is written before anything is approved or spawned, so syncing it
    /// makes "this action was attempted" durable before the action can
    /// happen; the final record closes the call. The
    /// transitions in between ride along with the next sync: a power loss
    /// can take back at most the transitions of a call since its last
    /// attempt or final record, never an attempt whose helper ran.
    #[default]
    OnAttemptAndFinal,
}

impl FsyncPolicy {
    /// Whether the `written`-th event since opening (from 1), of `kind`,
    /// is followed by a sync.
    fn syncs_after(self, written: u64, kind: &AuditKind) -> bool {
        match self {
            FsyncPolicy::EveryEvent => true,
            FsyncPolicy::EveryNEvents(n) => written.is_multiple_of(n.get()),
            FsyncPolicy::OnFinal => matches!(kind, AuditKind::Final(_)),
            FsyncPolicy::OnAttemptAndFinal => {
                matches!(kind, AuditKind::Attempt { .. } | AuditKind::Final(_))
            }
        }
    }
}

/// How [`ChainedFileAudit::open`] opens and writes a log.
///
/// Write it as `ChainedFileOptions { key: Some(..), ..ChainedFileOptions::default() }`
/// so that fields added later take their defaults.
#[derive(Debug, Clone)]
pub struct ChainedFileOptions {
    /// The key that seals every record (XChaCha20-Poly1305) and MACs the
    /// anchors; `None` writes records in clear (still hash-chained). It
    /// comes from the caller, e.g. [`KeySource::load`]; it is never
    /// written anywhere.
    pub key: Option<Key>,
    /// When the file is synced. Default: [`FsyncPolicy::OnAttemptAndFinal`].
    pub fsync: FsyncPolicy,
    /// A file that holds the log's current [`Anchor`] as text, rewritten
    /// (to a temporary file, synced, then renamed over it) at open, unless
    /// opening left it as it was, and after each final record. Keep it
    /// where the log's writer alone
    /// cannot rewrite both. When it exists at open, the log is checked
    /// against it: a log cut short, or whose anchored record was changed,
    /// or with any change after that record, is refused. What comes
    /// before the anchored record is not read then (the anchor vouches
    /// for it); `spillguard audit verify` checks every byte.
    pub anchor_file: Option<PathBuf>,
    /// The name written in a [`LogEntry::Opened`] entry each time the log
    /// is opened (who wrote what follows). Default: `spillguard-std` and
    /// its version; `None` writes no such entry.
    pub writer_name: Option<String>,
    /// How long opening, or one append, waits for the file's lock while
    /// another writer holds it (each writer holds it only to read what
    /// others appended and to append its own frame, a few milliseconds).
    /// Past it, opening fails with [`OpenFailure::InUse`] and an append
    /// with an error (the call then fails closed before dispatch).
    /// Default: [`DEFAULT_LOCK_WAIT`] (10 s).
    pub lock_wait: Duration,
    /// A signed checkpoint of the log kept as it grows, rewritten after
    /// each final record (see [`CheckpointOptions`]); `None` keeps none.
    #[cfg(feature = "audit-checkpoint")]
    pub checkpoint: Option<CheckpointOptions>,
}

/// How long a writer waits for the log's lock by default: 10 s.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(10);

impl Default for ChainedFileOptions {
    fn default() -> Self {
        Self {
            key: None,
            fsync: FsyncPolicy::default(),
            anchor_file: None,
            writer_name: Some(format!("spillguard-std {}", env!("CARGO_PKG_VERSION"))),
            lock_wait: DEFAULT_LOCK_WAIT,
            #[cfg(feature = "audit-checkpoint")]
            checkpoint: None,
        }
    }
}

/// What [`ChainedFileAudit::open`] found in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenedLog {
    /// The log is new: the file was missing or empty (or held only the
    /// torn start of a first record), and a fresh log id was drawn.
    pub created: bool,
    /// Whole records found in the file, all kept.
    pub records_found: u64,
    /// The torn final frame a crash left, truncated away and recorded as a
    /// [`LogEntry::Recovered`] entry.
    pub recovered: Option<TornTail>,
    /// The log's id.
    pub log_id: LogId,
    /// Where reading and verifying the file started: 0 when all of it was
    /// verified, else the offset of the record the
    /// [anchor file](ChainedFileOptions::anchor_file) vouches for last
    /// (only that record and what follows it were read).
    pub verified_from: u64,
}

/// Why [`ChainedFileAudit::open`] refused a log.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenFailure {
    /// Reading, truncating, writing or syncing the file failed.
    Io(io::Error),
    /// Another writer held the file's lock for all of
    /// [`ChainedFileOptions::lock_wait`]; nothing was read or written.
    InUse {
        /// How long opening waited.
        waited: Duration,
    },
    /// The path is not a regular file (a device, a FIFO, a socket, a
    /// directory); it is refused before anything is read from it.
    NotAFile(&'static str),
    /// The log is sealed and no key was given.
    KeyRequired,
    /// A key was given but the log is in clear.
    NotSealed,
    /// The key given is not the log's.
    WrongKey {
        /// The key id the log names.
        log_key: KeyId,
        /// The id of the key given.
        given_key: KeyId,
    },
    /// The log failed verification (against the anchor file, when there is
    /// one): it is not continued.
    Rejected(Verdict),
    /// The anchor file exists but does not hold an anchor.
    BadAnchorFile(String),
    /// What opening appends (the writer's `opened` record, a recovery) or
    /// the anchor file could not be written, as on a full disk. The log
    /// was cut back to its last whole record, as it was before opening,
    /// which its anchor file still vouches for.
    Write {
        /// Why the write failed (`No space left on device`).
        error: io::Error,
        /// The log's length after it was cut back, or why it could not be.
        kept: io::Result<u64>,
    },
    /// The log was opened and its anchor written, but the tree file kept
    /// beside its checkpoint could not be: the records stay, and the next
    /// opening rebuilds the tree from the log.
    #[cfg(feature = "audit-checkpoint")]
    Checkpoint(io::Error),
    /// A file the checkpoint would write (the checkpoint file, its `.tmp`
    /// or its `.tree`) is not its own: not a regular file, or holding
    /// something else (a key, a log). Nothing was created, read or
    /// written.
    #[cfg(feature = "audit-checkpoint")]
    CheckpointFiles(io::Error),
}

impl AuditOpenError {
    /// Whether opening failed while writing (a full disk, an I/O error),
    /// not because of the log, its path or its key: an audit failure
    /// rather than bad input.
    pub fn is_write_failure(&self) -> bool {
        match self.failure {
            OpenFailure::Write { .. } => true,
            #[cfg(feature = "audit-checkpoint")]
            OpenFailure::Checkpoint(_) => true,
            _ => false,
        }
    }
}

/// A log that [`ChainedFileAudit::open`] could not open or would not
/// continue, and why.
#[derive(Debug)]
pub struct AuditOpenError {
    /// The log file.
    pub path: PathBuf,
    /// What went wrong.
    pub failure: OpenFailure,
}

impl fmt::Display for AuditOpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "audit log {}: ", self.path.display())?;
        match &self.failure {
            OpenFailure::Io(error) => write!(f, "{error}"),
            OpenFailure::InUse { waited } => write!(
                f,
                "in use by another writer: gave up after waiting {} ms for its lock",
                waited.as_millis()
            ),
            OpenFailure::NotAFile(kind) => {
                write!(
                    f,
                    "not a regular file ({kind}): an audit log is a regular file"
                )
            }
            OpenFailure::KeyRequired => f.write_str("the log is sealed and no key was given"),
            OpenFailure::NotSealed => f.write_str("a key was given but the log is in clear"),
            OpenFailure::WrongKey { log_key, given_key } => write!(
                f,
                "wrong key: the log is sealed with key {log_key}, the key given is {given_key}"
            ),
            OpenFailure::Rejected(verdict) => {
                write!(f, "refused, it failed verification: {verdict}")
            }
            OpenFailure::BadAnchorFile(problem) => write!(f, "bad anchor file: {problem}"),
            OpenFailure::Write { error, kept } => match kept {
                Ok(len) => write!(
                    f,
                    "cannot append to it: {error}; nothing of this writer was kept (the log ends at its last whole record, {len} bytes)"
                ),
                Err(cut) => write!(
                    f,
                    "cannot append to it: {error}; and cutting it back to its last whole record failed too: {cut}"
                ),
            },
            #[cfg(feature = "audit-checkpoint")]
            OpenFailure::Checkpoint(error) => write!(
                f,
                "its records and anchor were written, but not its checkpoint: {error}"
            ),
            #[cfg(feature = "audit-checkpoint")]
            OpenFailure::CheckpointFiles(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for AuditOpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.failure {
            OpenFailure::Io(error) | OpenFailure::Write { error, .. } => Some(error),
            #[cfg(feature = "audit-checkpoint")]
            OpenFailure::Checkpoint(error) | OpenFailure::CheckpointFiles(error) => Some(error),
            _ => None,
        }
    }
}

/// Where the caller keeps the key of a sealed log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeySource {
    /// A file holding 64 hex digits (surrounding whitespace ignored).
    File(PathBuf),
    /// An environment variable holding 64 hex digits.
    Env(String),
}

/// A key could not be loaded. The message never shows the key's text.
#[derive(Debug)]
#[non_exhaustive]
pub enum KeyError {
    /// The key file could not be read.
    Read {
        /// The key file.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// The environment variable is not set (or not Unicode).
    EnvNotSet(String),
    /// The text is not 64 hex digits.
    NotHex {
        /// The file or variable, for the message.
        source: String,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Read { path, error } => {
                write!(f, "cannot read key file {}: {error}", path.display())
            }
            KeyError::EnvNotSet(name) => {
                write!(f, "environment variable {name} is not set")
            }
            KeyError::NotHex { source } => {
                write!(f, "{source}: a key is 64 hex digits (32 bytes)")
            }
        }
    }
}

impl std::error::Error for KeyError {}

/// The most of a key file that is read: a key is 64 hex digits, with room
/// for blanks and a newline around them. A longer file (`/dev/zero`, a
/// log given by mistake) is refused as not a key, without reading on.
const KEY_FILE_MAX_BYTES: u64 = 4096;

impl KeySource {
    /// Reads the key. Its text is wiped from memory once parsed. A key
    /// file may be a pipe (a shell's `<(…)`); it is read up to 4 KiB, and
    /// one longer than that is not a key ([`KeyError::NotHex`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use spillguard_host::KeySource;
    /// # use spillguard_host::proto::audit::Key;
    ///
    /// let path = std::env::temp_dir().join(format!("spillguard-doc-key-{}", std::process::id()));
    /// std::fs::write(&path, format!("{}\n", "2a".repeat(32)))?;
    /// let key = KeySource::File(path.clone()).load()?;
    /// assert_eq!(key.id(), Key::from_bytes([0x2a; 32]).id());
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load(&self) -> Result<Key, KeyError> {
        let (text, source) = match self {
            KeySource::File(path) => {
                // Reserved at once, so that no copy of the key is left
                // behind by a reallocation.
                let mut text =
                    Zeroizing::new(String::with_capacity(KEY_FILE_MAX_BYTES as usize + 1));
                File::open(path)
                    .and_then(|file| file.take(KEY_FILE_MAX_BYTES + 1).read_to_string(&mut text))
                    .map_err(|error| KeyError::Read {
                        path: path.clone(),
                        error,
                    })?;
                let source = format!("key file {}", path.display());
                if text.len() as u64 > KEY_FILE_MAX_BYTES {
                    return Err(KeyError::NotHex { source });
                }
                (text, source)
            }
            KeySource::Env(name) => {
                let text = std::env::var(name).map_err(|_| KeyError::EnvNotSet(name.clone()))?;
                (Zeroizing::new(text), format!("environment variable {name}"))
            }
        };
        text.parse().map_err(|_| KeyError::NotHex { source })
    }
}

/// An [`AuditSink`] that appends the core's hash-chained frames to a file:
/// append-only, optionally sealed, recovered after a crash, verifiable
/// offline (`spillguard audit verify`).
///
/// * **Opening** ([`open`](Self::open)) creates a new log (a fresh random
///   [`LogId`] from the operating system) or continues an existing one. A
///   final frame torn by a crash is truncated away (`set_len` to the last
///   whole frame) and recorded as a [`LogEntry::Recovered`] entry; every
///   whole record is kept. A log that fails verification is refused. With
///   an anchor file, only what follows the anchored record is verified
///   (in time that does not grow with the log). A path that is not a
///   regular file (a device, a FIFO) is refused before it is read.
/// * **Several writers** (processes, or several handles in one) take
///   turns: each takes the file's exclusive advisory lock (`flock`) to
///   open it and for each append, waiting at most
///   [`lock_wait`](ChainedFileOptions::lock_wait), and first reads and
///   verifies what the others appended since its last turn (from its own
///   last record on, never the whole file), so the chain stays one chain.
///   A torn frame a crashed writer left is recovered by the next one.
/// * **Writing**: each event is one frame, appended with one `write_all`
///   under a mutex, so concurrent calls never interleave. A sealed log
///   draws a fresh 24-byte nonce from the operating system for each
///   record. If an append fails, the file is cut back to its last whole
///   frame and the chain state reloaded from it, so the log stays
///   continuable; if that fails too, or a sync fails (the data's
///   durability is then unknown), every later write fails until the log
///   is reopened — the calls then fail closed before dispatch.
/// * **Syncing** follows [`FsyncPolicy`]; [`fsyncs`](Self::fsyncs) counts
///   the syncs of the log file.
///
/// # Examples
///
/// ```
/// # use spillguard_host::{AuditSink, ChainedFileAudit, ChainedFileOptions};
/// # use spillguard_host::proto::audit::{Verdict, VerifyOptions, verify};
/// # use spillguard_host::proto::{AuditEvent, AuditKind, CallKind, State};
///
/// let path = std::env::temp_dir().join(format!("spillguard-doc-{}.log", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// // A host is given the log as `HostOptions::audit`; its calls' owners
/// // write each event as here.
/// let log = ChainedFileAudit::open(&path, ChainedFileOptions::default())?;
/// let event = |offset_us, kind| AuditEvent {
///     call_id: "c_1".into(),
///     session_id: "s_1".into(),
///     offset_us,
///     kind,
/// };
/// log.write(&event(10, AuditKind::Transition { from: State::Received, to: State::Validated }))?;
/// log.write(&event(12, AuditKind::Attempt {
///     kind: CallKind::Action,
///     action: "true".into(),
///     target: "true".into(),
/// }))?;
///
/// let anchor = log.anchor();
/// let bytes = std::fs::read(&path)?;
/// let verdict = verify(&bytes, VerifyOptions { anchor: Some(&anchor), key: None });
/// // The `Opened` entry, then the two events.
/// assert_eq!(verdict, Verdict::Ok { records: 3, head: anchor.head });
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ChainedFileAudit {
    path: PathBuf,
    fsync: FsyncPolicy,
    anchor_file: Option<PathBuf>,
    lock_wait: Duration,
    opened: OpenedLog,
    /// What opening appended.
    opening: Vec<OwnRecord>,
    fsyncs: AtomicU64,
    state: Mutex<WriterState>,
}

#[derive(Debug)]
struct WriterState {
    file: File,
    key: Option<Key>,
    writer: LogWriter,
    /// Length of the file: whole frames only.
    len: u64,
    /// Events written through [`AuditSink::write`] since opening.
    written: u64,
    /// Frames appended since the last sync.
    unsynced: u64,
    /// Why the log cannot be written any more, if it cannot.
    broken: Option<String>,
    frame: Vec<u8>,
    /// The tree whose signed checkpoint is kept, if one is.
    #[cfg(feature = "audit-checkpoint")]
    checkpoint: Option<Checkpointer>,
}

impl ChainedFileAudit {
    /// Opens the log at `path`, creating it if it is missing or empty, and
    /// recovering it if a crash tore its final frame. See the
    /// [type docs](Self) for what is checked. With an
    /// [anchor file](ChainedFileOptions::anchor_file) that holds an anchor
    /// with an offset (and, for a sealed log, the key's MAC), only the
    /// record it vouches for last and what follows it are read, so opening
    /// takes the same time however long the log is; otherwise the whole
    /// file is read and verified ([`OpenedLog::verified_from`] says which).
    pub fn open(
        path: impl AsRef<Path>,
        options: ChainedFileOptions,
    ) -> Result<ChainedFileAudit, AuditOpenError> {
        let path = path.as_ref().to_path_buf();
        let fail = |failure| AuditOpenError {
            path: path.clone(),
            failure,
        };
        let io_fail = |error| fail(OpenFailure::Io(error));
        // Files the checkpoint would overwrite that are not its own are
        // refused before anything is created or read.
        #[cfg(feature = "audit-checkpoint")]
        if let Some(checkpoint) = &options.checkpoint {
            crate::audit_checkpoint::check_files(checkpoint)
                .map_err(|error| fail(OpenFailure::CheckpointFiles(error)))?;
        }
        // A FIFO would block the open and a device never ends: neither is
        // opened for reading, and what was opened is checked again.
        match std::fs::metadata(&path) {
            Ok(meta) if !meta.is_file() => {
                return Err(fail(OpenFailure::NotAFile(crate::os::file_kind(
                    meta.file_type(),
                ))));
            }
            _ => {}
        }
        let mut file = {
            use std::os::unix::fs::OpenOptionsExt;
            OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
                .open(&path)
                .map_err(io_fail)?
        };
        let meta = file.metadata().map_err(io_fail)?;
        if !meta.is_file() {
            return Err(fail(OpenFailure::NotAFile(crate::os::file_kind(
                meta.file_type(),
            ))));
        }
        let turn = match take_turn(&file, options.lock_wait).map_err(io_fail)? {
            Some(turn) => turn,
            None => {
                return Err(fail(OpenFailure::InUse {
                    waited: options.lock_wait,
                }));
            }
        };
        let key = options.key;
        let anchor = match &options.anchor_file {
            Some(anchor_path) => read_anchor_file(anchor_path).map_err(fail)?,
            None => None,
        };
        let found = match &anchor {
            Some(anchor) => {
                resume_after_anchor(&mut file, anchor, key.as_ref()).map_err(io_fail)?
            }
            None => None,
        };
        let found = match found {
            Some(found) => found,
            None => resume_whole(&mut file, anchor.as_ref(), key.as_ref()).map_err(fail)?,
        };
        let Found {
            mut writer,
            valid_len,
            file_len,
            records_found,
            torn,
            created,
            verified_from,
            read,
        } = found;
        // The checkpoint's tree of what the log holds, before anything is
        // appended: a log whose records do not verify is refused with
        // nothing written.
        #[cfg(feature = "audit-checkpoint")]
        let checkpointer = match options.checkpoint {
            Some(checkpoint) => Some(
                Checkpointer::resume(
                    checkpoint,
                    &file,
                    key.as_ref(),
                    anchor.as_ref(),
                    verified_from,
                    &read,
                )
                .map_err(|failure| {
                    fail(match failure {
                        ResumeFailure::Io(error) => OpenFailure::Io(error),
                        ResumeFailure::Rejected(verdict) => OpenFailure::Rejected(verdict),
                    })
                })?,
            ),
            None => None,
        };
        drop(read);

        if valid_len < file_len {
            file.set_len(valid_len).map_err(io_fail)?;
        }

        let mut frame = Vec::new();
        let mut opening = Vec::new();
        let note = |writer: &LogWriter, entry: LogEntry, opening: &mut Vec<OwnRecord>| {
            opening.push(OwnRecord {
                index: writer.records().saturating_sub(1),
                hash: writer.head(),
                entry,
            });
        };
        let sealed = key.is_some();
        if let Some(torn) = torn {
            let nonce = fresh_nonce(sealed).map_err(io_fail)?;
            if created {
                // A log whose first frame was torn: a new log, whose first
                // entry says what was dropped.
                let entry = LogEntry::Recovered {
                    dropped_bytes: torn.dropped_bytes,
                    at_offset: 0,
                };
                writer.append_to(&entry, nonce, &mut frame)
            } else {
                writer
                    .append_recovery(nonce)
                    .map(|recovery| frame.extend(recovery))
            }
            .map_err(|error| io_fail(io::Error::new(io::ErrorKind::InvalidInput, error)))?;
            let entry = LogEntry::Recovered {
                dropped_bytes: torn.dropped_bytes,
                at_offset: if created { 0 } else { torn.offset },
            };
            note(&writer, entry, &mut opening);
        }
        if let Some(name) = options.writer_name {
            let nonce = fresh_nonce(sealed).map_err(io_fail)?;
            let entry = LogEntry::Opened { writer: name };
            writer
                .append_to(&entry, nonce, &mut frame)
                .map_err(|error| io_fail(io::Error::new(io::ErrorKind::InvalidInput, error)))?;
            note(&writer, entry, &mut opening);
        }
        // What opening appends (a recovery, the writer's name) is taken
        // back if it cannot all be kept: the file ends at its last whole
        // record again, which the anchor file still vouches for.
        let cut_back = |file: &File, error: io::Error| {
            let kept = file.set_len(valid_len).map(|()| valid_len);
            fail(OpenFailure::Write { error, kept })
        };
        let appended = file
            .write_all(&frame)
            .and_then(|()| file.sync_data())
            .and_then(|()| {
                if created {
                    sync_parent_dir(&path)
                } else {
                    Ok(())
                }
            });
        if let Err(error) = appended {
            return Err(cut_back(&file, error));
        }
        let opened = OpenedLog {
            created,
            records_found,
            recovered: torn,
            log_id: writer.log_id(),
            verified_from,
        };
        let audit = ChainedFileAudit {
            path: path.clone(),
            fsync: options.fsync,
            anchor_file: options.anchor_file,
            lock_wait: options.lock_wait,
            opened,
            opening,
            fsyncs: AtomicU64::new(1),
            state: Mutex::new(WriterState {
                file,
                key,
                writer,
                len: valid_len + frame.len() as u64,
                written: 0,
                unsynced: 0,
                broken: None,
                frame,
                #[cfg(feature = "audit-checkpoint")]
                checkpoint: None,
            }),
        };
        if let Some(anchor_path) = &audit.anchor_file {
            let current = audit.lock().writer.anchor();
            // Rewritten (and synced) only if opening changed it.
            if anchor.as_ref() != Some(&current)
                && let Err(error) = write_anchor_file(anchor_path, &current)
            {
                let state = audit.lock();
                let error = io::Error::new(
                    error.kind(),
                    format!(
                        "cannot write its anchor file {}: {error}",
                        anchor_path.display()
                    ),
                );
                return Err(cut_back(&state.file, error));
            }
        }
        #[cfg(feature = "audit-checkpoint")]
        if let Some(mut checkpointer) = checkpointer {
            let mut state = audit.lock();
            checkpointer.push_frames(&state.frame, 0);
            // The checkpoint itself waits for the first final record; the
            // tree file follows the anchor now. The log and its anchor
            // agree: when this fails the records stay, and only the tree
            // file is an older one (rebuilt at the next open).
            if audit.anchor_file.is_some() {
                let records = state.writer.records();
                let anchor = state.writer.anchor();
                if let Err(error) = checkpointer.write_tree(records, &anchor, None) {
                    return Err(fail(OpenFailure::Checkpoint(error)));
                }
            }
            state.checkpoint = Some(checkpointer);
        }
        drop(turn);
        Ok(audit)
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What opening found.
    pub fn opened(&self) -> OpenedLog {
        self.opened
    }

    /// The log's current checkpoint: its id, its record count and the hash
    /// of its last record (MACed when the log is sealed). Verify the file
    /// against it to detect a later cut or rewrite.
    pub fn anchor(&self) -> Anchor {
        self.lock().writer.anchor()
    }

    /// Records in the log: those found at open plus those written since.
    pub fn records(&self) -> u64 {
        self.lock().writer.records()
    }

    /// How many times the log file was synced, the one sync of
    /// [`open`](Self::open) included.
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// Syncs the frames appended since the last sync, if any.
    pub fn sync(&self) -> io::Result<()> {
        let mut state = self.lock();
        state.usable()?;
        self.sync_locked(&mut state)
    }

    fn lock(&self) -> MutexGuard<'_, WriterState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sync_locked(&self, state: &mut WriterState) -> io::Result<()> {
        if state.unsynced == 0 {
            return Ok(());
        }
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        match state.file.sync_data() {
            Ok(()) => {
                state.unsynced = 0;
                Ok(())
            }
            Err(error) => {
                // The kernel may have dropped the dirty pages with the
                // error: what is on disk is unknown. Stop here.
                state.broken = Some(format!(
                    "a sync failed ({error}); reopen the log to continue it"
                ));
                Err(error)
            }
        }
    }

    /// At the start of a turn: reads and verifies what other writers
    /// appended since this one's last turn, from its own last record on
    /// (recovering a torn frame a crashed writer left), so that the next
    /// frame continues the file's chain, not this writer's memory of it.
    /// The recovery it appended, if it did.
    fn catch_up(state: &mut WriterState) -> Result<Option<OwnRecord>, String> {
        let len = state
            .file
            .metadata()
            .map_err(|e| format!("cannot read the log's length: {e}"))?
            .len();
        if len == state.len {
            return Ok(None);
        }
        if len < state.len {
            return Err(format!(
                "the log was cut from {} to {len} bytes by someone else",
                state.len
            ));
        }
        let anchor = state.writer.anchor();
        let found = resume_after_anchor(&mut state.file, &anchor, state.key.as_ref())
            .map_err(|e| format!("cannot read what other writers appended: {e}"))?
            .ok_or_else(|| "what another writer appended does not continue the chain".to_owned())?;
        if found.valid_len < found.file_len {
            state
                .file
                .set_len(found.valid_len)
                .map_err(|e| format!("cannot cut back a torn frame: {e}"))?;
        }
        state.writer = found.writer;
        state.len = found.valid_len;
        // What was read starts with this writer's own last record.
        #[cfg(feature = "audit-checkpoint")]
        if let Some(checkpoint) = &mut state.checkpoint {
            checkpoint.push_frames(&found.read, 1);
        }
        let Some(torn) = found.torn else {
            return Ok(None);
        };
        {
            let nonce = fresh_nonce(state.key.is_some())
                .map_err(|e| format!("cannot draw a nonce: {e}"))?;
            let frame = state
                .writer
                .append_recovery(nonce)
                .map_err(|e| format!("cannot record a recovery: {e}"))?;
            state
                .file
                .write_all(&frame)
                .map_err(|e| format!("cannot record a recovery: {e}"))?;
            #[cfg(feature = "audit-checkpoint")]
            if let Some(checkpoint) = &mut state.checkpoint {
                checkpoint.push_frames(&frame, 0);
            }
            state.len += frame.len() as u64;
            state.unsynced += 1;
        }
        Ok(Some(OwnRecord {
            index: state.writer.records().saturating_sub(1),
            hash: state.writer.head(),
            entry: LogEntry::Recovered {
                dropped_bytes: torn.dropped_bytes,
                at_offset: torn.offset,
            },
        }))
    }

    /// After a failed append: cuts the file back to its last whole frame
    /// and reloads the chain state from it.
    fn roll_back(state: &mut WriterState) -> Result<(), String> {
        state
            .file
            .set_len(state.len)
            .map_err(|e| format!("cannot cut back a failed append: {e}"))?;
        let mut bytes = Vec::new();
        let mut file = &state.file;
        // Reads follow the offset; appends always go to the end.
        file.seek(io::SeekFrom::Start(0))
            .and_then(|_| file.take(state.len).read_to_end(&mut bytes))
            .map_err(|e| format!("cannot reread the log: {e}"))?;
        match LogWriter::resume(&bytes, state.key.as_ref()) {
            Ok((writer, resume)) if resume.torn.is_none() && resume.valid_len == state.len => {
                state.writer = writer;
                Ok(())
            }
            Ok(_) => Err("the log changed under its writer".to_owned()),
            Err(error) => Err(format!("cannot reload the log: {error}")),
        }
    }
}

impl WriterState {
    fn usable(&self) -> io::Result<()> {
        match &self.broken {
            Some(why) => Err(io::Error::other(format!("audit log unusable: {why}"))),
            None => Ok(()),
        }
    }
}

/// A record a [`ChainedFileAudit`] appended: where it is in the log and
/// what it hashes to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Appended {
    /// Its place in the log, from 0 (its sequence number): records other
    /// writers appended count too.
    pub index: u64,
    /// Its chain hash: the log's head once it was appended.
    pub hash: ChainHash,
    /// The signed checkpoint written after it, when one was (a final
    /// record, with [`ChainedFileOptions::checkpoint`]): the note's text.
    pub checkpoint: Option<String>,
    /// The record this writer appended just before it, of its own: the
    /// recovery of a frame another writer's crash tore.
    pub recovery: Option<OwnRecord>,
}

/// A record a writer appends of its own, not a call's event: its
/// `opened` entry, the recovery of a torn frame.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OwnRecord {
    /// Its place in the log, from 0.
    pub index: u64,
    /// Its chain hash.
    pub hash: ChainHash,
    /// What it holds.
    pub entry: LogEntry,
}

/// Why [`ChainedFileAudit::append`] failed, and whether the record was
/// written before it did (the sync, the anchor file or the checkpoint
/// that follows failed).
#[derive(Debug)]
#[non_exhaustive]
pub struct AppendFailure {
    /// What failed.
    pub error: io::Error,
    /// The record, when it was written before the failure.
    pub written: Option<Box<Appended>>,
}

impl fmt::Display for AppendFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for AppendFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl ChainedFileAudit {
    /// The records opening appended, in order: the recovery of a torn
    /// frame and the writer's `opened` entry.
    pub fn opening_records(&self) -> &[OwnRecord] {
        &self.opening
    }

    /// Appends `event` as [`AuditSink::write`] does, and says where it
    /// went; a failure says whether the record was written before it.
    pub fn append(&self, event: &AuditEvent) -> Result<Appended, AppendFailure> {
        let unwritten = |error: io::Error| AppendFailure {
            error,
            written: None,
        };
        let mut guard = self.lock();
        let state = &mut *guard;
        state.usable().map_err(unwritten)?;
        let Some(_turn) = take_turn(&state.file, self.lock_wait).map_err(unwritten)? else {
            return Err(unwritten(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "audit log {}: gave up after waiting {} ms for its lock (another writer holds it)",
                    self.path.display(),
                    self.lock_wait.as_millis()
                ),
            )));
        };
        let recovery = match Self::catch_up(state) {
            Ok(recovery) => recovery,
            Err(why) => {
                state.broken = Some(why.clone());
                return Err(unwritten(io::Error::other(format!(
                    "audit log unusable: {why}"
                ))));
            }
        };
        let nonce = fresh_nonce(state.key.is_some()).map_err(unwritten)?;
        let entry = LogEntry::Call(event.clone());
        state.frame.clear();
        state
            .writer
            .append_to(&entry, nonce, &mut state.frame)
            .map_err(|error| unwritten(io::Error::new(io::ErrorKind::InvalidInput, error)))?;
        if let Err(error) = state.file.write_all(&state.frame) {
            let message = match Self::roll_back(state) {
                Ok(()) => format!(
                    "{error}; the record was not kept (the log ends at its last whole record, {} bytes)",
                    state.len
                ),
                Err(why) => {
                    let message = format!("{error}; and then {why}");
                    state.broken = Some(why);
                    message
                }
            };
            return Err(unwritten(io::Error::new(error.kind(), message)));
        }
        state.len += state.frame.len() as u64;
        state.written += 1;
        state.unsynced += 1;
        #[cfg_attr(not(feature = "audit-checkpoint"), allow(unused_mut))]
        let mut appended = Appended {
            index: state.writer.records().saturating_sub(1),
            hash: state.writer.head(),
            checkpoint: None,
            recovery,
        };
        #[cfg(feature = "audit-checkpoint")]
        if let Some(checkpoint) = &mut state.checkpoint {
            checkpoint.push_frames(&state.frame, 0);
        }
        let is_final = matches!(event.kind, AuditKind::Final(_));
        let anchor_now = is_final && self.anchor_file.is_some();
        #[cfg(feature = "audit-checkpoint")]
        let checkpoint_now = is_final && state.checkpoint.is_some();
        #[cfg(not(feature = "audit-checkpoint"))]
        let checkpoint_now = false;
        // From here on the record is written: a failure says so.
        if (anchor_now || checkpoint_now || self.fsync.syncs_after(state.written, &event.kind))
            && let Err(error) = self.sync_locked(state)
        {
            return Err(AppendFailure {
                error,
                written: Some(Box::new(appended)),
            });
        }
        if let (true, Some(anchor_path)) = (anchor_now, &self.anchor_file)
            && let Err(error) = write_anchor_file(anchor_path, &state.writer.anchor())
        {
            let error = io::Error::new(
                error.kind(),
                format!(
                    "the record was written, but not its anchor file {}: {error}",
                    anchor_path.display()
                ),
            );
            return Err(AppendFailure {
                error,
                written: Some(Box::new(appended)),
            });
        }
        #[cfg(feature = "audit-checkpoint")]
        if checkpoint_now && let Some(checkpoint) = &mut state.checkpoint {
            let anchor = self.anchor_file.as_ref().map(|_| state.writer.anchor());
            match checkpoint.write(state.writer.records(), anchor.as_ref()) {
                Ok(note) => appended.checkpoint = note,
                Err(error) => {
                    let error = io::Error::new(
                        error.kind(),
                        format!("the record was written, but {error}"),
                    );
                    return Err(AppendFailure {
                        error,
                        written: Some(Box::new(appended)),
                    });
                }
            }
        }
        Ok(appended)
    }
}

impl AuditSink for ChainedFileAudit {
    fn write(&self, event: &AuditEvent) -> io::Result<()> {
        self.append(event)
            .map(drop)
            .map_err(|failure| failure.error)
    }
}

impl Drop for ChainedFileAudit {
    /// Syncs what the policy left unsynced (best effort).
    fn drop(&mut self) {
        let state = self.lock();
        if state.unsynced > 0 && state.broken.is_none() {
            let _ = state.file.sync_data();
        }
    }
}

/// What opening found in an existing file (or that it must start a log).
#[derive(Debug)]
struct Found {
    writer: LogWriter,
    /// Length of the intact part, to truncate to.
    valid_len: u64,
    /// Length of the file as found.
    file_len: u64,
    records_found: u64,
    torn: Option<TornTail>,
    created: bool,
    verified_from: u64,
    /// The intact bytes read, from `verified_from` to `valid_len`.
    read: Vec<u8>,
}

/// The anchor kept in `anchor_path`, if that file exists.
fn read_anchor_file(anchor_path: &Path) -> Result<Option<Anchor>, OpenFailure> {
    if let Ok(meta) = std::fs::metadata(anchor_path)
        && !meta.is_file()
    {
        return Err(OpenFailure::BadAnchorFile(format!(
            "{} is {}, not a regular file",
            anchor_path.display(),
            crate::os::file_kind(meta.file_type())
        )));
    }
    let text = match std::fs::read_to_string(anchor_path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(OpenFailure::Io(error)),
    };
    text.parse()
        .map(Some)
        .map_err(|error| OpenFailure::BadAnchorFile(format!("{}: {error}", anchor_path.display())))
}

/// Resumes the log from its anchor, reading only the anchored record and
/// what follows it ([`LogWriter::resume_from_anchor`]): time and memory do
/// not grow with what the anchor vouches for. `None` when that cannot
/// vouch for the file: an anchor without an offset (format 1), a sealed
/// log's anchor without the key's MAC, or a suffix that does not verify
/// (the file shorter than its anchor, the anchored record not found at its
/// offset, a change after it). The whole file is then verified, which
/// refuses it with the precise verdict, or accepts it if only the anchor's
/// offset was wrong.
fn resume_after_anchor(
    file: &mut File,
    anchor: &Anchor,
    key: Option<&Key>,
) -> io::Result<Option<Found>> {
    let Some(offset) = anchor.offset else {
        return Ok(None);
    };
    let file_len = file.metadata()?.len();
    if offset >= file_len {
        return Ok(None);
    }
    // Reads follow the offset; appends always go to the end.
    file.seek(io::SeekFrom::Start(offset))?;
    let mut suffix = Vec::new();
    file.take(file_len - offset).read_to_end(&mut suffix)?;
    let file_len = offset + suffix.len() as u64;
    match LogWriter::resume_from_anchor(anchor, &suffix, key) {
        Ok((writer, resume)) => Ok(Some(Found {
            writer,
            valid_len: resume.valid_len,
            file_len,
            records_found: resume.records,
            torn: resume.torn,
            created: false,
            verified_from: offset,
            read: {
                suffix.truncate(usize::try_from(resume.valid_len - offset).unwrap_or(usize::MAX));
                suffix
            },
        })),
        Err(_) => Ok(None),
    }
}

/// Reads and verifies the whole file: against `anchor` if there is one (a
/// log that holds at least the anchored records, unchanged, passes: more
/// records, or a torn tail after them, is what a crash after the anchor
/// leaves), then to resume it. An empty file, or one holding only the torn
/// start of a first record, starts a new log.
fn resume_whole(
    file: &mut File,
    anchor: Option<&Anchor>,
    key: Option<&Key>,
) -> Result<Found, OpenFailure> {
    let mut bytes = Vec::new();
    file.seek(io::SeekFrom::Start(0))
        .and_then(|_| file.read_to_end(&mut bytes))
        .map_err(OpenFailure::Io)?;
    if let Some(anchor) = anchor {
        let options = VerifyOptions {
            anchor: Some(anchor),
            key,
        };
        match verify(&bytes, options) {
            Verdict::Ok { .. } | Verdict::Unanchored { .. } | Verdict::TornTail { .. } => {}
            Verdict::WrongKey { log_key, given_key } => {
                return Err(OpenFailure::WrongKey { log_key, given_key });
            }
            verdict => return Err(OpenFailure::Rejected(verdict)),
        }
    }
    let file_len = bytes.len() as u64;
    let resumed = LogWriter::resume(&bytes, key);
    let mut found = |writer, valid_len: u64, records_found, torn, created| Found {
        writer,
        valid_len,
        file_len,
        records_found,
        torn,
        created,
        verified_from: 0,
        read: {
            bytes.truncate(usize::try_from(valid_len).unwrap_or(usize::MAX));
            std::mem::take(&mut bytes)
        },
    };
    match resumed {
        Ok((writer, resume)) => Ok(found(
            writer,
            resume.valid_len,
            resume.records,
            resume.torn,
            false,
        )),
        Err(ResumeError::NoRecord { torn }) => {
            let writer = LogWriter::create(random_log_id().map_err(OpenFailure::Io)?, key);
            Ok(found(writer, 0, 0, torn, true))
        }
        Err(ResumeError::KeyRequired) => Err(OpenFailure::KeyRequired),
        Err(ResumeError::NotSealed) => Err(OpenFailure::NotSealed),
        Err(ResumeError::Rejected(Verdict::WrongKey { log_key, given_key })) => {
            Err(OpenFailure::WrongKey { log_key, given_key })
        }
        Err(ResumeError::Rejected(verdict)) => Err(OpenFailure::Rejected(verdict)),
        Err(other) => Err(OpenFailure::Io(io::Error::new(
            io::ErrorKind::InvalidData,
            other,
        ))),
    }
}

/// Writes `anchor`'s text to `path` atomically: a temporary file beside
/// it, synced, renamed over it.
fn write_anchor_file(path: &Path, anchor: &Anchor) -> io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let temp = path.with_file_name(name);
    let mut file = File::create(&temp)?;
    file.write_all(format!("{anchor}\n").as_bytes())?;
    file.sync_data()?;
    std::fs::rename(&temp, path)
}

/// Makes a new file's directory entry durable.
fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()
}

/// The file's lock, held for one turn (opening, or one append); released
/// when dropped. It holds a duplicate of the descriptor, which shares the
/// lock of the open file.
struct Turn(File);

impl Drop for Turn {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

/// Takes the file's exclusive lock, trying again (every 1 ms at first,
/// then every 20 ms at most) while another writer holds it; `None` once
/// `wait` has passed without it.
fn take_turn(file: &File, wait: Duration) -> io::Result<Option<Turn>> {
    let turn = Turn(file.try_clone()?);
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match rustix::fs::flock(
            &turn.0,
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        ) {
            Ok(()) => return Ok(Some(turn)),
            Err(rustix::io::Errno::WOULDBLOCK) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(error) => return Err(error.into()),
        }
        let left = wait.saturating_sub(started.elapsed());
        if left.is_zero() {
            // Never locked: dropping `turn` unlocks nothing.
            return Ok(None);
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// A new log's id: 16 bytes from the operating system's CSPRNG.
fn random_log_id() -> io::Result<LogId> {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).map_err(io::Error::other)?;
    Ok(LogId(id))
}

/// A fresh nonce for a sealed record, from the operating system's CSPRNG;
/// `None` for a log in clear.
fn fresh_nonce(sealed: bool) -> io::Result<Option<Nonce>> {
    if !sealed {
        return Ok(None);
    }
    let mut nonce = [0u8; 24];
    getrandom::fill(&mut nonce).map_err(io::Error::other)?;
    Ok(Some(nonce))
}
