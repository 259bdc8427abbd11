//! The writer's state: the chain's head and the next sequence number. It
//! builds frames; the caller appends them to the file.
//!
//! [`LogWriter::resume`] keeps every intact record and reports a torn tail
//! for the caller to truncate; [`LogWriter::resume_from_anchor`] does the
//! same reading only the anchored record and what follows it. The writer
//! counts the bytes of every frame it built, so [`LogWriter::anchor`]
//! knows the last record's offset.

use std::fmt;

use super::LogEntry;
use super::anchor::Anchor;
use super::chain::{ChainHash, LogId};
use super::frame::{self, BuildError, Bytes, Frame, Header, Payload, VERSION};
use super::seal::{Key, KeySchedule, Nonce};
use super::verdict::Verdict;
use super::verify::{Verifier, VerifyOptions};

/// The end of a log that a crash cut in the middle of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// Where the incomplete frame started: the length to truncate to.
    pub offset: u64,
    /// Bytes of the incomplete frame, dropped by the truncation.
    pub dropped_bytes: u64,
}

/// What [`LogWriter::resume`] found in an existing log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    /// Length of the intact part: truncate the file to this before
    /// appending (it is the file's length when nothing was torn).
    pub valid_len: u64,
    /// Intact records, all kept.
    pub records: u64,
    /// The torn final frame, if a crash cut one. The writer's next frame
    /// must then be the [`LogEntry::Recovered`] entry from
    /// [`LogWriter::append_recovery`].
    pub torn: Option<TornTail>,
}

/// An existing log cannot be continued.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResumeError {
    /// The log holds no complete record, so its id is not known: truncate
    /// it to 0 and [`create`](LogWriter::create) a new one (which may
    /// record the loss with a [`LogEntry::Recovered`] entry).
    NoRecord {
        /// The incomplete first frame, if there are any bytes at all.
        torn: Option<TornTail>,
    },
    /// The log is sealed and no key was given.
    KeyRequired,
    /// A key was given but the log is in clear.
    NotSealed,
    /// The log failed verification (tampered, malformed, or not openable
    /// with the key); it is not continued.
    Rejected(Verdict),
    /// [`resume_from_anchor`](LogWriter::resume_from_anchor) cannot start
    /// from this anchor: it names no record, or no offset, or the log is
    /// sealed and the anchor carries no MAC made with the key (an anchor
    /// that is not vouched for is no reason to skip anything). Resume from
    /// the whole log instead.
    UnusableAnchor,
}

impl fmt::Display for ResumeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResumeError::NoRecord { .. } => f.write_str("the log holds no complete record"),
            ResumeError::KeyRequired => f.write_str("the log is sealed and no key was given"),
            ResumeError::NotSealed => f.write_str("a key was given but the log is in clear"),
            ResumeError::Rejected(verdict) => write!(f, "the log failed verification: {verdict}"),
            ResumeError::UnusableAnchor => {
                f.write_str("the anchor cannot be resumed from (no record offset, or no valid MAC)")
            }
        }
    }
}

impl std::error::Error for ResumeError {}

/// A caller misused the writer. Nothing was written and the writer's state
/// is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AppendError {
    /// The log is sealed: every record needs a fresh nonce.
    NonceRequired,
    /// The log is in clear: a nonce was given (the caller may believe the
    /// log is encrypted when it is not).
    NonceForPlainLog,
    /// The nonce is the one used for the previous record.
    NonceReused,
    /// The entry's frame body would exceed
    /// [`MAX_BODY_BYTES`](super::MAX_BODY_BYTES).
    TooLarge {
        /// The body size it would have.
        body_bytes: usize,
    },
    /// The log was resumed after a torn tail: write the
    /// [`append_recovery`](LogWriter::append_recovery) frame first.
    RecoveryPending,
    /// [`append_recovery`](LogWriter::append_recovery) was called with no
    /// recovery pending.
    NoRecoveryPending,
    /// The entry could not be encoded.
    Encode,
    /// The log is sealed, and this build has no cipher: spillguard-core
    /// was built without its `audit-seal` feature.
    SealingUnavailable,
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppendError::NonceRequired => f.write_str("a sealed log needs a nonce per record"),
            AppendError::NonceForPlainLog => f.write_str("a nonce was given for a log in clear"),
            AppendError::NonceReused => f.write_str("the nonce repeats the previous record's"),
            AppendError::TooLarge { body_bytes } => write!(
                f,
                "the frame body would be {body_bytes} bytes, over {}",
                frame::MAX_BODY_BYTES
            ),
            AppendError::RecoveryPending => {
                f.write_str("the recovery entry must be appended first")
            }
            AppendError::NoRecoveryPending => f.write_str("no recovery is pending"),
            AppendError::Encode => f.write_str("the entry could not be encoded"),
            AppendError::SealingUnavailable => f.write_str(
                "sealing an audit log needs spillguard-core's `audit-seal` feature, which this build left out",
            ),
        }
    }
}

impl std::error::Error for AppendError {}

/// Builds the frames of one log, sans IO: it holds the chain's head and
/// the next sequence number, and returns the bytes the caller appends to
/// the file, in order. Randomness comes from the caller: the log id at
/// creation and, for a sealed log, a fresh nonce for every record.
///
/// Open an existing file with [`resume`](Self::resume): truncate it to
/// [`Resume::valid_len`], and if a torn tail was found append
/// [`append_recovery`](Self::append_recovery)'s frame before anything else.
///
/// # Examples
///
/// ```
/// use spillguard_core::audit::{Key, LogEntry, LogId, LogWriter, Verdict, VerifyOptions, verify};
///
/// let key = Key::from_bytes([42; 32]);
/// let mut writer = LogWriter::create(LogId([1; 16]), Some(&key));
/// let mut file = Vec::new();
/// let entry = LogEntry::Opened { writer: "spillguard-std".into() };
/// file.extend(writer.append(&entry, Some([1; 24]))?); // nonces come from a CSPRNG
///
/// // A crash cuts the second append.
/// let frame = writer.append(&entry, Some([2; 24]))?;
/// file.extend(&frame[..20]);
///
/// let (mut writer, resume) = LogWriter::resume(&file, Some(&key)).expect("intact prefix");
/// assert_eq!(resume.records, 1);
/// file.truncate(resume.valid_len as usize);
/// file.extend(writer.append_recovery(Some([3; 24]))?);
/// file.extend(writer.append(&entry, Some([4; 24]))?);
///
/// let anchor = writer.anchor();
/// let verdict = verify(&file, VerifyOptions { anchor: Some(&anchor), key: Some(&key) });
/// assert_eq!(verdict, Verdict::Ok { records: 3, head: anchor.head });
/// # Ok::<(), spillguard_core::audit::AppendError>(())
/// ```
#[derive(Debug)]
pub struct LogWriter {
    log_id: LogId,
    keys: Option<KeySchedule>,
    next_seq: u64,
    head: ChainHash,
    /// Bytes of the log so far: those found on resume plus every frame
    /// built since (the caller appends each one).
    len: u64,
    /// Where the last record starts, if there is one.
    last_offset: Option<u64>,
    last_nonce: Option<Nonce>,
    recovery: Option<TornTail>,
    scratch: Vec<u8>,
}

impl LogWriter {
    /// A writer for a new, empty log. With a key, every record is sealed.
    pub fn create(log_id: LogId, key: Option<&Key>) -> LogWriter {
        LogWriter {
            log_id,
            keys: key.map(KeySchedule::new),
            next_seq: 0,
            head: ChainHash::genesis(log_id),
            len: 0,
            last_offset: None,
            last_nonce: None,
            recovery: None,
            scratch: Vec::new(),
        }
    }

    /// A writer that continues the log in `bytes` (the whole file). Every
    /// intact record is kept; a torn final frame (see
    /// [`Verdict::TornTail`]) is reported for the caller to truncate, and
    /// the writer's next frame must record the recovery. A log that fails
    /// verification is not continued.
    pub fn resume(bytes: &[u8], key: Option<&Key>) -> Result<(LogWriter, Resume), ResumeError> {
        check_sealing(bytes, key)?;
        let mut verifier = Verifier::discarding(VerifyOptions { anchor: None, key });
        verifier.handle_bytes(bytes);
        Self::resumed(verifier, key)
    }

    /// A writer that continues a log from its anchor, reading only the
    /// anchored record and what follows it: `bytes` is the log from byte
    /// [`anchor.offset`](Anchor::offset) to its end. The anchored record
    /// must be there, unchanged (its hash is the anchor's head), and
    /// everything after it must verify; a torn final frame is reported as
    /// by [`resume`](Self::resume), and offsets in [`Resume`] count from
    /// the start of the log.
    ///
    /// What comes before the offset is not read, so it is not checked:
    /// this trusts the anchor (and, for a sealed log, its MAC, which must
    /// be the key's) to vouch for it. Full verification
    /// ([`verify`](super::verify)) still checks every byte.
    ///
    /// A log cut before the anchored record ends, or whose anchored record
    /// is not the anchor's, is [`ResumeError::Rejected`] (truncated,
    /// rewritten, modified): verify the whole log to name the fault.
    ///
    /// # Examples
    ///
    /// ```
    /// use spillguard_core::audit::{LogEntry, LogId, LogWriter};
    ///
    /// let mut writer = LogWriter::create(LogId([3; 16]), None);
    /// let mut file = Vec::new();
    /// let mut last = Vec::new();
    /// for n in 0..1000 {
    ///     let entry = LogEntry::Opened { writer: format!("host {n}") };
    ///     last = writer.append(&entry, None)?;
    ///     file.extend(&last);
    /// }
    /// let anchor = writer.anchor();
    /// let offset = anchor.offset.expect("the writer knows where its last record starts");
    ///
    /// // One record is read, not a thousand.
    /// let suffix = &file[offset as usize..];
    /// assert_eq!(suffix, &last[..]);
    /// let (writer, resume) = LogWriter::resume_from_anchor(&anchor, suffix, None).expect("intact");
    /// assert_eq!((resume.records, resume.valid_len), (1000, file.len() as u64));
    /// assert_eq!(writer.anchor(), anchor);
    /// # Ok::<(), spillguard_core::audit::AppendError>(())
    /// ```
    pub fn resume_from_anchor(
        anchor: &Anchor,
        bytes: &[u8],
        key: Option<&Key>,
    ) -> Result<(LogWriter, Resume), ResumeError> {
        let mut verifier = Verifier::from_anchor(anchor, key).ok_or(ResumeError::UnusableAnchor)?;
        verifier.discard_records();
        check_sealing(bytes, key)?;
        verifier.handle_bytes(bytes);
        Self::resumed(verifier, key)
    }

    fn resumed(verifier: Verifier, key: Option<&Key>) -> Result<(LogWriter, Resume), ResumeError> {
        let summary = verifier.finish_summary();
        let torn = match summary.verdict {
            Verdict::Ok { .. } | Verdict::Unanchored { .. } => None,
            Verdict::TornTail {
                offset, torn_bytes, ..
            } => Some(TornTail {
                offset,
                dropped_bytes: torn_bytes,
            }),
            other => return Err(ResumeError::Rejected(other)),
        };
        let log_id = match summary.log_id {
            Some(log_id) if summary.records > 0 => log_id,
            _ => return Err(ResumeError::NoRecord { torn }),
        };
        let writer = LogWriter {
            log_id,
            keys: key.map(KeySchedule::new),
            next_seq: summary.records,
            head: summary.head,
            len: summary.valid_len,
            last_offset: summary.last_offset,
            last_nonce: None,
            recovery: torn,
            scratch: Vec::new(),
        };
        let resume = Resume {
            valid_len: summary.valid_len,
            records: summary.records,
            torn,
        };
        Ok((writer, resume))
    }

    /// The frame to append for `entry`. `nonce` is required for a sealed
    /// log (fresh from a CSPRNG for every record) and refused for a plain
    /// one.
    pub fn append(
        &mut self,
        entry: &LogEntry,
        nonce: Option<Nonce>,
    ) -> Result<Vec<u8>, AppendError> {
        let mut out = Vec::new();
        self.append_to(entry, nonce, &mut out)?;
        Ok(out)
    }

    /// Like [`append`](Self::append), but appends the frame to `out`
    /// (left as it was on error).
    pub fn append_to(
        &mut self,
        entry: &LogEntry,
        nonce: Option<Nonce>,
        out: &mut Vec<u8>,
    ) -> Result<(), AppendError> {
        if self.recovery.is_some() {
            return Err(AppendError::RecoveryPending);
        }
        self.write(entry, nonce, out)
    }

    /// After [`resume`](Self::resume) found a torn tail: the frame of the
    /// [`LogEntry::Recovered`] entry that records it. It must be the first
    /// frame appended after the truncation.
    pub fn append_recovery(&mut self, nonce: Option<Nonce>) -> Result<Vec<u8>, AppendError> {
        let Some(torn) = self.recovery else {
            return Err(AppendError::NoRecoveryPending);
        };
        let entry = LogEntry::Recovered {
            dropped_bytes: torn.dropped_bytes,
            at_offset: torn.offset,
        };
        let mut out = Vec::new();
        self.write(&entry, nonce, &mut out)?;
        self.recovery = None;
        Ok(out)
    }

    fn write(
        &mut self,
        entry: &LogEntry,
        nonce: Option<Nonce>,
        out: &mut Vec<u8>,
    ) -> Result<(), AppendError> {
        self.check_nonce(nonce)?;
        let mut payload = std::mem::take(&mut self.scratch);
        payload.clear();
        let payload = postcard::to_extend(entry, payload).map_err(|_| AppendError::Encode)?;
        self.write_encoded(VERSION, payload, nonce, out)
    }

    /// A nonce is given exactly when the log is sealed, and never twice
    /// in a row.
    fn check_nonce(&self, nonce: Option<Nonce>) -> Result<(), AppendError> {
        match (&self.keys, nonce) {
            (Some(_), None) => Err(AppendError::NonceRequired),
            (None, Some(_)) => Err(AppendError::NonceForPlainLog),
            (Some(_), Some(nonce)) if self.last_nonce == Some(nonce) => {
                Err(AppendError::NonceReused)
            }
            _ => Ok(()),
        }
    }

    /// Frames the encoded entry `payload` (sealing it with `nonce` when
    /// the log is sealed) as a record of format `version`.
    fn write_encoded(
        &mut self,
        version: u8,
        #[cfg_attr(not(feature = "audit-seal"), allow(unused_mut))] mut payload: Vec<u8>,
        nonce: Option<Nonce>,
        out: &mut Vec<u8>,
    ) -> Result<(), AppendError> {
        let start = out.len();
        let built = match (&self.keys, &nonce) {
            #[cfg(not(feature = "audit-seal"))]
            (Some(_), Some(_)) => return Err(AppendError::SealingUnavailable),
            #[cfg(feature = "audit-seal")]
            (Some(keys), Some(nonce)) => {
                let sealed = keys.seal(self.log_id, self.next_seq, &self.head, nonce, &mut payload);
                match sealed {
                    Ok(()) => frame::write_frame(
                        out,
                        version,
                        self.next_seq,
                        self.log_id,
                        &self.head,
                        Payload::Sealed {
                            key_id: keys.id().0,
                            nonce: *nonce,
                            ciphertext: Bytes(&payload),
                        },
                    ),
                    Err(_) => Err(BuildError::Encode),
                }
            }
            _ => frame::write_frame(
                out,
                version,
                self.next_seq,
                self.log_id,
                &self.head,
                Payload::Plain(Bytes(&payload)),
            ),
        };
        self.scratch = payload;
        let hash = built.map_err(|error| match error {
            BuildError::TooLarge { body_bytes } => AppendError::TooLarge { body_bytes },
            BuildError::Encode => AppendError::Encode,
        })?;
        self.last_offset = Some(self.len);
        self.len += (out.len() - start) as u64;
        self.head = hash;
        self.next_seq += 1;
        if nonce.is_some() {
            self.last_nonce = nonce;
        }
        Ok(())
    }

    /// What a writer of another release would append: a record of format
    /// `version` whose encoded entry is `entry_bytes`. For tests of
    /// readers against logs written across releases.
    #[doc(hidden)]
    pub fn append_encoded_as(
        &mut self,
        version: u8,
        entry_bytes: &[u8],
        nonce: Option<Nonce>,
    ) -> Result<Vec<u8>, AppendError> {
        self.check_nonce(nonce)?;
        let mut out = Vec::new();
        self.write_encoded(version, entry_bytes.to_vec(), nonce, &mut out)?;
        Ok(out)
    }

    /// A checkpoint of the log as written so far, with the offset of its
    /// last record (the log's bytes being those found on resume, then
    /// every frame this writer built, in order), MACed when the log is
    /// sealed. Keep it somewhere the log's writer cannot rewrite.
    pub fn anchor(&self) -> Anchor {
        let mut anchor = Anchor::new(self.log_id, self.next_seq, self.head);
        if let Some(offset) = self.last_offset {
            anchor = anchor.at_offset(offset);
        }
        match &self.keys {
            Some(keys) => anchor.with_mac_from(keys),
            None => anchor,
        }
    }

    /// The log's id.
    pub fn log_id(&self) -> LogId {
        self.log_id
    }

    /// Records written (or found on resume) so far.
    pub fn records(&self) -> u64 {
        self.next_seq
    }

    /// Chain hash of the last record (the genesis value when empty).
    pub fn head(&self) -> ChainHash {
        self.head
    }

    /// Length of the log in bytes: what was found on resume (after the
    /// truncation of a torn tail) plus every frame built since.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the log holds no byte yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether records are sealed.
    pub fn is_sealed(&self) -> bool {
        self.keys.is_some()
    }

    /// The torn tail whose recovery entry is still to be appended.
    pub fn recovery_pending(&self) -> Option<TornTail> {
        self.recovery
    }
}

/// Refuses to resume a sealed log without a key, or a plain one with a
/// key, judging by the first frame of `bytes`.
fn check_sealing(bytes: &[u8], key: Option<&Key>) -> Result<(), ResumeError> {
    match (key.is_some(), first_frame_sealed(bytes)) {
        (false, Some(true)) => Err(ResumeError::KeyRequired),
        (true, Some(false)) => Err(ResumeError::NotSealed),
        _ => Ok(()),
    }
}

/// Whether the first frame of `bytes` is sealed, if it is complete and
/// decodes (not verified: verification comes next).
fn first_frame_sealed(bytes: &[u8]) -> Option<bool> {
    let Header::Frame { total } = frame::read_header(bytes) else {
        return None;
    };
    let frame = Frame::new(bytes.get(..total)?)?;
    Some(frame.body()?.payload.is_sealed())
}
