//! Offline verification: a streaming [`Verifier`] and the typed [`Verdict`].
//! The exact rules are in the [module docs](super#verification-rules).
//!
//! [`Verifier::bounded`] keeps the hash prefixes of the last `window`
//! records and a checkpoint every `window` records; a record that repeats
//! a sequence number older than the window is named by reading the log
//! again from its checkpoint, which [`Verifier::poll_seek`] asks the
//! driver to do. **A bounded verifier's memory does not grow with the
//! log, and its verdicts and records are the unbounded one's, in any
//! chunking.**

use std::collections::VecDeque;
use std::num::NonZeroUsize;

use serde::Serialize;

use super::LogEntry;
use super::anchor::{Anchor, MacCheck};
use super::chain::{ChainHash, LogId};
use super::format::{self, DecodeError, Decoded};
use super::frame::{self, Frame, HEADER_BYTES, Header, Payload, VERSION};
use super::seal::{Key, KeyId, KeySchedule};
use super::verdict::{MalformedReason, Record, TamperKind, Verdict};

/// What to check a log against.
#[derive(Debug, Clone, Copy, Default)]
pub struct VerifyOptions<'a> {
    /// A checkpoint taken earlier and kept elsewhere. Without one, the end
    /// of the log cannot be vouched for: the verdict is at best
    /// [`Verdict::Unanchored`].
    pub anchor: Option<&'a Anchor>,
    /// The log's key. With a key every record must be sealed and must open
    /// with it. Without a key, sealed payloads are checked by the chain
    /// alone, like plain ones, and are not decrypted.
    pub key: Option<&'a Key>,
}

/// A fault whose kind depends on what follows: a sequence number ahead of
/// its place means records were deleted, moved, or that this is a copy.
#[derive(Debug, Clone)]
struct Lookahead {
    record_index: u64,
    offset: u64,
    seq: u64,
    hash: ChainHash,
    saw_skipped: bool,
    saw_again: bool,
}

impl Lookahead {
    fn verdict(&self) -> Verdict {
        let kind = if self.saw_again {
            TamperKind::Duplicated { of: self.seq }
        } else if self.saw_skipped {
            TamperKind::Reordered
        } else {
            TamperKind::Deleted {
                missing: self.seq - self.record_index,
            }
        };
        Verdict::Tampered {
            record_index: self.record_index,
            offset: self.offset,
            kind,
        }
    }
}

/// A record that repeats the sequence number of one too old for the
/// window of hash prefixes: is it a copy of it? The log is read again
/// from the checkpoint before record `seq`, to compare its hash.
#[derive(Debug, Clone)]
struct Recall {
    record_index: u64,
    offset: u64,
    seq: u64,
    hash: u64,
    /// Frames still to pass, from the checkpoint, before record `seq`.
    skip: u64,
}

impl Recall {
    fn verdict(&self, copy: bool) -> Verdict {
        let kind = if copy {
            TamperKind::Duplicated { of: self.seq }
        } else {
            TamperKind::Inserted
        };
        Verdict::Tampered {
            record_index: self.record_index,
            offset: self.offset,
            kind,
        }
    }
}

#[derive(Debug, Clone)]
enum Phase {
    /// Accepting records.
    Reading,
    /// A fault was found; the rest is scanned only to name its kind.
    Classifying(Lookahead),
    /// A record repeats an old sequence number: the log is read again
    /// from a checkpoint to tell a copy from an insertion.
    Recalling(Recall),
    /// The verdict is known; further input is ignored.
    Decided(Verdict),
}

/// The state of a log after verification, for [`LogWriter::resume`](super::LogWriter::resume).
#[derive(Debug)]
pub(crate) struct Summary {
    pub(crate) verdict: Verdict,
    pub(crate) log_id: Option<LogId>,
    pub(crate) records: u64,
    pub(crate) head: ChainHash,
    pub(crate) valid_len: u64,
    /// Where the last accepted record starts.
    pub(crate) last_offset: Option<u64>,
}

/// A streaming verifier: feed it the log's bytes in chunks of any size,
/// drain the records it accepts, then ask for the verdict.
///
/// Call [`handle_bytes`](Self::handle_bytes) for each chunk, drain
/// [`poll_record`](Self::poll_record) until `None` after each (records are
/// queued until drained), and call [`finish`](Self::finish) at the end of
/// the input. The verdict does not depend on how the input was cut into
/// chunks. Memory: one incomplete frame, the records not yet drained, plus
/// 8 bytes per record (to recognise duplicates), or, once
/// [`bounded`](Self::bounded), 8 bytes for each of the last `window`
/// records and 16 per `window` records before them: memory then does not
/// grow with the log, and the driver also drains
/// [`poll_seek`](Self::poll_seek).
///
/// # Examples
///
/// ```
/// use spillguard_core::audit::{LogEntry, LogId, LogWriter, Verdict, Verifier, VerifyOptions};
///
/// let mut writer = LogWriter::create(LogId([7; 16]), None);
/// let mut log = Vec::new();
/// for n in 0..3 {
///     let entry = LogEntry::Opened { writer: format!("host {n}") };
///     log.extend(writer.append(&entry, None)?);
/// }
/// let anchor = writer.anchor();
///
/// let mut verifier = Verifier::new(VerifyOptions { anchor: Some(&anchor), key: None });
/// let mut entries = Vec::new();
/// for chunk in log.chunks(10) {
///     verifier.handle_bytes(chunk);
///     while let Some(record) = verifier.poll_record() {
///         entries.push(record.entry);
///     }
/// }
/// assert_eq!(entries.len(), 3);
/// assert_eq!(verifier.finish(), Verdict::Ok { records: 3, head: anchor.head });
/// # Ok::<(), spillguard_core::audit::AppendError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Verifier {
    keys: Option<KeySchedule>,
    anchor: Option<Anchor>,
    keep_records: bool,
    key_confirmed: bool,
    log_id: Option<LogId>,
    sealed: Option<bool>,
    next_index: u64,
    head: ChainHash,
    offset: u64,
    last_offset: Option<u64>,
    pending: Vec<u8>,
    /// Hash prefixes of the records accepted, from record `seen_from` on.
    seen: VecDeque<u64>,
    seen_from: u64,
    /// The first record this verifier reads (0, or the anchored one).
    first_index: u64,
    /// At most this many hash prefixes are kept, when bounded.
    window: Option<NonZeroUsize>,
    /// `(index, offset)` of every `window`-th record from `first_index`,
    /// when bounded: where a recall starts reading again.
    checkpoints: Vec<(u64, u64)>,
    /// Where the driver must feed the log from, until it asks.
    seek: Option<u64>,
    /// Started at an anchored record whose predecessor was not read: that
    /// record's previous hash is taken from it (its hash, which covers it,
    /// must be the anchor's head).
    link_from_anchor: bool,
    ready: VecDeque<Record>,
    /// Records accepted whose format is newer than this reader's.
    newer: NewerRecords,
    phase: Phase,
}

/// Records of a newer format version than this reader's
/// ([`FORMAT_VERSION`](super::FORMAT_VERSION)): verified as links of the
/// chain, their entries not read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NewerRecords {
    /// How many were accepted.
    pub records: u64,
    /// The newest version among them (0 when there is none).
    pub newest: u8,
}

impl Verifier {
    /// A verifier for a log to be checked against `options`.
    pub fn new(options: VerifyOptions<'_>) -> Verifier {
        let keys = options.key.map(KeySchedule::new);
        let anchor = options.anchor.cloned();
        let log_id = anchor.as_ref().map(|a| a.log_id);
        let mut verifier = Verifier {
            keys,
            anchor,
            keep_records: true,
            key_confirmed: false,
            log_id,
            sealed: None,
            next_index: 0,
            head: log_id.map(ChainHash::genesis).unwrap_or(ChainHash([0; 32])),
            offset: 0,
            last_offset: None,
            pending: Vec::new(),
            seen: VecDeque::new(),
            seen_from: 0,
            first_index: 0,
            window: None,
            checkpoints: Vec::new(),
            seek: None,
            link_from_anchor: false,
            ready: VecDeque::new(),
            newer: NewerRecords::default(),
            phase: Phase::Reading,
        };
        if let (Some(keys), Some(anchor)) = (&verifier.keys, &verifier.anchor) {
            match anchor.check_mac(keys) {
                MacCheck::Absent => {}
                MacCheck::Valid => verifier.key_confirmed = true,
                MacCheck::OtherKey => {
                    let log_key = anchor.mac.map(|m| m.key_id).unwrap_or(keys.id());
                    verifier.phase = Phase::Decided(Verdict::WrongKey {
                        log_key,
                        given_key: keys.id(),
                    });
                }
                MacCheck::Invalid => verifier.phase = Phase::Decided(Verdict::BadAnchor),
            }
        }
        verifier
    }

    /// A verifier for the end of a log, from the record `anchor` vouches
    /// for last: feed it the log's bytes from byte
    /// [`anchor.offset`](Anchor::offset) on. That record must be there
    /// with the anchor's head as its hash (else the verdict is
    /// [`TamperKind::Rewritten`], [`TamperKind::Modified`] or
    /// [`TamperKind::Truncated`] at it); what follows is checked like any
    /// log. Record indices, offsets and counts are the whole log's.
    ///
    /// Nothing before the offset is read, so nothing there is checked:
    /// the anchor vouches for it. `None` when the anchor cannot start
    /// there: it names no record or no offset, or a key is given and the
    /// anchor carries no MAC (a MAC by another key, or one that does not
    /// match, gives the verdicts [`Verdict::WrongKey`] and
    /// [`Verdict::BadAnchor`] as with [`new`](Self::new)).
    pub fn from_anchor(anchor: &Anchor, key: Option<&Key>) -> Option<Verifier> {
        let offset = anchor.offset?;
        let last = anchor.records.checked_sub(1)?;
        if key.is_some() && anchor.mac.is_none() {
            return None;
        }
        let mut verifier = Verifier::new(VerifyOptions {
            anchor: Some(anchor),
            key,
        });
        verifier.next_index = last;
        verifier.seen_from = last;
        verifier.first_index = last;
        verifier.offset = offset;
        verifier.link_from_anchor = true;
        Some(verifier)
    }

    /// The window of [`bounded`](Self::bounded) that keeps a verifier's
    /// memory well under 1 MiB: 16,384 records (128 KiB of hash prefixes).
    /// Only a tampered log is ever read again: a recall reads at most
    /// 16,384 records, once per log.
    pub const WINDOW: NonZeroUsize = NonZeroUsize::new(16_384).expect("not zero");

    /// Keeps the hash prefixes of the last `window` records only, so that
    /// memory does not grow with the log (see [`WINDOW`](Self::WINDOW)).
    /// The verdict stays the same: a record that repeats the sequence
    /// number of an older record is told apart (a copy of it,
    /// [`TamperKind::Duplicated`], or not, [`TamperKind::Inserted`]) by
    /// reading the log again from a checkpoint at most `window` records
    /// before that one. [`poll_seek`](Self::poll_seek) then says from which
    /// byte the driver must feed the log, so a driver of a bounded verifier
    /// drains it after each [`handle_bytes`](Self::handle_bytes) and must
    /// be able to read the log again (a file, not a pipe).
    ///
    /// It bounds what follows: on a verifier that has already accepted a
    /// record it changes nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use spillguard_core::audit::{LogEntry, LogId, LogWriter, TamperKind, Verdict, Verifier};
    ///
    /// let mut writer = LogWriter::create(LogId([7; 16]), None);
    /// let mut log = Vec::new();
    /// let mut frames = Vec::new();
    /// for n in 0..6 {
    ///     let frame = writer.append(&LogEntry::Opened { writer: format!("host {n}") }, None)?;
    ///     frames.push(frame.clone());
    ///     log.extend(frame);
    /// }
    /// // Record 1, copied to the end: too old for a window of 2 records.
    /// log.extend(&frames[1]);
    ///
    /// let window = NonZeroUsize::new(2).expect("not zero");
    /// let mut verifier = Verifier::new(Default::default()).bounded(window);
    /// let mut at = 0;
    /// while at < log.len() {
    ///     let end = (at + 16).min(log.len());
    ///     verifier.handle_bytes(&log[at..end]);
    ///     while let Some(_record) = verifier.poll_record() {}
    ///     at = match verifier.poll_seek() {
    ///         Some(offset) => offset as usize,
    ///         None => end,
    ///     };
    /// }
    /// let duplicated = TamperKind::Duplicated { of: 1 };
    /// assert!(matches!(verifier.finish(), Verdict::Tampered { record_index: 6, kind, .. } if kind == duplicated));
    /// # Ok::<(), spillguard_core::audit::AppendError>(())
    /// ```
    pub fn bounded(mut self, window: NonZeroUsize) -> Verifier {
        if self.next_index == self.first_index {
            self.window = Some(window);
        }
        self
    }

    /// The byte offset from which the driver must feed the log next, once:
    /// a [`bounded`](Self::bounded) verifier found a record that repeats an
    /// old sequence number and reads the log again from a checkpoint to
    /// name the fault. Bytes fed after the record that asked and before
    /// this is drained are ignored; the bytes fed after it are taken as
    /// the log's from that offset on. A verifier that is not bounded never
    /// asks. If the log ends before the recalled record, the verdict calls
    /// the record [`TamperKind::Inserted`].
    #[must_use = "a bounded verifier must be fed again from this offset"]
    pub fn poll_seek(&mut self) -> Option<u64> {
        self.seek.take()
    }

    /// Checks every record but queues none: [`poll_record`](Self::poll_record)
    /// gives nothing, and no record's entry outlives its checking. For a
    /// driver that needs the verdict (and the log's bytes, which it has)
    /// but not the records.
    #[must_use]
    pub fn without_records(mut self) -> Verifier {
        self.keep_records = false;
        self
    }

    /// From now on, records are checked but not queued.
    pub(crate) fn discard_records(&mut self) {
        self.keep_records = false;
    }

    /// A verifier that checks every record but queues none (for
    /// [`verify`]).
    pub(crate) fn discarding(options: VerifyOptions<'_>) -> Verifier {
        Verifier {
            keep_records: false,
            ..Verifier::new(options)
        }
    }

    /// Feeds the next bytes of the log. Never fails: what is wrong with
    /// the log is the verdict's business.
    pub fn handle_bytes(&mut self, mut chunk: &[u8]) {
        loop {
            if matches!(self.phase, Phase::Decided(_)) || self.seek.is_some() {
                return;
            }
            if self.pending.is_empty() {
                match frame::read_header(chunk) {
                    Header::Frame { total } if chunk.len() >= total => {
                        let (bytes, rest) = chunk.split_at(total);
                        self.handle_frame(bytes);
                        chunk = rest;
                    }
                    Header::Damaged => return self.handle_damaged_header(),
                    _ => return self.pending.extend_from_slice(chunk),
                }
            } else {
                let target = match frame::read_header(&self.pending) {
                    Header::Frame { total } => total,
                    Header::Incomplete => HEADER_BYTES,
                    Header::Damaged => return self.handle_damaged_header(),
                };
                let take = target.saturating_sub(self.pending.len()).min(chunk.len());
                let (head, rest) = chunk.split_at(take);
                self.pending.extend_from_slice(head);
                chunk = rest;
                if self.pending.len() < target {
                    return;
                }
                // A header alone is never a frame (bodies are not empty):
                // once it is complete, go round again for the body.
                if target > HEADER_BYTES {
                    let mut bytes = std::mem::take(&mut self.pending);
                    self.handle_frame(&bytes);
                    bytes.clear();
                    self.pending = bytes;
                }
            }
        }
    }

    /// The next record accepted, in log order, until `None`.
    #[must_use = "accepted records are queued until drained"]
    pub fn poll_record(&mut self) -> Option<Record> {
        self.ready.pop_front()
    }

    /// How many records have been accepted so far.
    pub fn records(&self) -> u64 {
        self.next_index
    }

    /// The log's id, once known (from the anchor or the first record).
    pub fn log_id(&self) -> Option<LogId> {
        self.log_id
    }

    /// The records accepted so far whose format version is newer than
    /// this reader's: their chain verified, their entries were not read.
    pub fn newer_records(&self) -> NewerRecords {
        self.newer
    }

    /// Whether the log's records are sealed, once the first is read.
    pub fn sealed(&self) -> Option<bool> {
        self.sealed
    }

    /// The end of the input: the verdict on everything fed.
    pub fn finish(self) -> Verdict {
        self.finish_summary().verdict
    }

    pub(crate) fn finish_summary(self) -> Summary {
        let verdict = self.final_verdict();
        Summary {
            verdict,
            log_id: self.log_id,
            records: self.next_index,
            head: self.head,
            valid_len: self.offset,
            last_offset: self.last_offset,
        }
    }

    fn final_verdict(&self) -> Verdict {
        match &self.phase {
            Phase::Decided(verdict) => return verdict.clone(),
            Phase::Classifying(lookahead) => return lookahead.verdict(),
            Phase::Recalling(recall) => return recall.verdict(false),
            Phase::Reading => {}
        }
        let torn = !self.pending.is_empty();
        if torn && !self.is_prefix_of_next_frame(&self.pending) {
            return self.tampered(TamperKind::Modified);
        }
        let records = self.next_index;
        let vouched = self.anchor.as_ref().map_or(0, |a| a.records);
        if records < vouched {
            return self.tampered(TamperKind::Truncated { anchored: vouched });
        }
        let head = self.log_id.map(|_| self.head);
        match (torn, head) {
            (true, _) => Verdict::TornTail {
                offset: self.offset,
                torn_bytes: self.pending.len() as u64,
                records_before: records,
                head,
                vouched,
            },
            (false, Some(head)) if self.anchor.is_some() && records == vouched => {
                Verdict::Ok { records, head }
            }
            (false, _) => Verdict::Unanchored {
                records,
                head,
                vouched,
            },
        }
    }

    /// Whether `partial` (an incomplete frame at the end of the input) agrees
    /// with what the writer puts first in the next frame, as far as its
    /// bytes go: a length in bounds and its complement, then version,
    /// sequence number, log id and previous hash.
    fn is_prefix_of_next_frame(&self, partial: &[u8]) -> bool {
        if !frame::header_prefix_is_valid(partial) {
            return false;
        }
        let Some(present) = partial.get(HEADER_BYTES..) else {
            return true;
        };
        let mut expected = match self.log_id {
            Some(log_id) => frame::fixed_prefix(self.next_index, log_id, &self.head),
            // Frame 0 of a log whose id is not known yet: the id is in the
            // frame, and the previous hash must be its genesis value.
            None => match present
                .get(2..18)
                .and_then(|id| <[u8; 16]>::try_from(id).ok())
            {
                Some(id) => {
                    let log_id = LogId(id);
                    frame::fixed_prefix(0, log_id, &ChainHash::genesis(log_id))
                }
                None => vec![VERSION, 0],
            },
        };
        // The writer may be of another release than this reader: its
        // frame may name any format version that was ever written.
        if let (Some(&version), Some(first)) = (present.first(), expected.first_mut())
            && format::is_written_version(version)
        {
            *first = version;
        }
        // The anchored record's previous hash is not known before it is
        // read: only what precedes it in the frame can be compared.
        let known = if self.link_from_anchor {
            expected.len().saturating_sub(frame::HASH_BYTES)
        } else {
            expected.len()
        };
        let n = present.len().min(known);
        present.get(..n) == expected.get(..n)
    }

    fn tampered(&self, kind: TamperKind) -> Verdict {
        Verdict::Tampered {
            record_index: self.next_index,
            offset: self.offset,
            kind,
        }
    }

    /// What a sealed record under key `log_key` means when the verifier
    /// holds `given_key`: nothing when they are the same; the wrong key
    /// when it is the log's first record and no record has confirmed the
    /// key yet; a forged record otherwise.
    fn other_key(&self, index: u64, log_key: KeyId, given_key: KeyId) -> Option<Verdict> {
        if log_key == given_key {
            None
        } else if index == 0 && !self.key_confirmed {
            Some(Verdict::WrongKey { log_key, given_key })
        } else {
            Some(self.tampered(TamperKind::BadMac))
        }
    }
    fn decide(&mut self, verdict: Verdict) {
        self.phase = Phase::Decided(verdict);
    }

    fn handle_damaged_header(&mut self) {
        let verdict = match &self.phase {
            Phase::Reading => self.tampered(TamperKind::Modified),
            Phase::Classifying(lookahead) => lookahead.verdict(),
            Phase::Recalling(recall) => recall.verdict(false),
            Phase::Decided(verdict) => verdict.clone(),
        };
        self.decide(verdict);
    }

    fn handle_frame(&mut self, bytes: &[u8]) {
        match &self.phase {
            Phase::Reading => self.accept(bytes),
            Phase::Classifying(_) => self.scan(bytes),
            // The offset stays the fault's: these bytes are read again.
            Phase::Recalling(_) => return self.recall(bytes),
            Phase::Decided(_) => return,
        }
        self.offset += bytes.len() as u64;
    }

    /// A frame read again after a seek: the recalled record, or one before
    /// it.
    fn recall(&mut self, bytes: &[u8]) {
        let Phase::Recalling(recall) = &mut self.phase else {
            return;
        };
        if recall.skip > 0 {
            recall.skip -= 1;
            return;
        }
        let copy =
            Frame::new(bytes).is_some_and(|frame| frame.stored_hash().prefix() == recall.hash);
        let verdict = recall.verdict(copy);
        self.decide(verdict);
    }

    /// Whether record `seq` (before the window) must be recalled to tell
    /// whether `hash` is a copy of it, and from where.
    fn start_recall(&mut self, seq: u64, hash: &ChainHash) -> bool {
        let Some(window) = self.window else {
            return false;
        };
        if seq < self.first_index || seq >= self.seen_from {
            return false;
        }
        let slot = (seq - self.first_index) / window.get() as u64;
        let Some(&(from, offset)) = usize::try_from(slot)
            .ok()
            .and_then(|slot| self.checkpoints.get(slot))
        else {
            return false;
        };
        self.phase = Phase::Recalling(Recall {
            record_index: self.next_index,
            offset: self.offset,
            seq,
            hash: hash.prefix(),
            skip: seq - from,
        });
        self.pending.clear();
        self.seek = Some(offset);
        true
    }

    /// After a fault: notes whether the sequence numbers the fault skipped,
    /// or a second copy of the faulty record, appear further on.
    fn scan(&mut self, bytes: &[u8]) {
        let log_id = self.log_id;
        let Phase::Classifying(lookahead) = &mut self.phase else {
            return;
        };
        let Some(frame) = Frame::new(bytes) else {
            return;
        };
        let hash = frame.stored_hash();
        if frame.computed_hash() != hash {
            return;
        }
        let Some(body) = frame.body() else {
            return;
        };
        if Some(LogId(body.log_id)) != log_id {
            return;
        }
        if (lookahead.record_index..lookahead.seq).contains(&body.seq) {
            lookahead.saw_skipped = true;
        }
        if body.seq == lookahead.seq && hash == lookahead.hash {
            lookahead.saw_again = true;
        }
    }

    fn accept(&mut self, bytes: &[u8]) {
        let index = self.next_index;
        let Some(frame) = Frame::new(bytes) else {
            return self.decide(self.tampered(TamperKind::Modified));
        };
        let hash = frame.stored_hash();
        if frame.computed_hash() != hash {
            return self.decide(self.tampered(TamperKind::Modified));
        }
        let Some(body) = frame.body() else {
            return self.malformed(MalformedReason::UndecodableBody);
        };
        let version = body.version;
        if !format::is_written_version(version) {
            return self.malformed(MalformedReason::UnsupportedVersion { version });
        }
        let log_id = LogId(body.log_id);
        match self.log_id {
            Some(expected) if expected != log_id => {
                return self.decide(self.tampered(TamperKind::WrongLog));
            }
            Some(_) => {}
            None => {
                self.log_id = Some(log_id);
                self.head = ChainHash::genesis(log_id);
            }
        }

        let prev = ChainHash(body.prev);
        if body.seq > index {
            let lookahead = Lookahead {
                record_index: index,
                offset: self.offset,
                seq: body.seq,
                hash,
                saw_skipped: false,
                saw_again: false,
            };
            self.phase = Phase::Classifying(lookahead);
            return;
        }
        if body.seq < index {
            if self.start_recall(body.seq, &hash) {
                return;
            }
            let copy = body
                .seq
                .checked_sub(self.seen_from)
                .and_then(|at| usize::try_from(at).ok())
                .and_then(|at| self.seen.get(at))
                .is_some_and(|seen| *seen == hash.prefix());
            let kind = if copy {
                TamperKind::Duplicated { of: body.seq }
            } else {
                TamperKind::Inserted
            };
            return self.decide(self.tampered(kind));
        }
        if self.link_from_anchor {
            // The anchored record: its hash, checked against the anchor's
            // head below, vouches for its link.
            self.head = prev;
        }
        if prev != self.head {
            return self.decide(self.tampered(TamperKind::Replaced));
        }

        let sealed = body.payload.is_sealed();
        let expect_sealed = if self.keys.is_some() {
            Some(true)
        } else {
            self.sealed
        };
        if expect_sealed.is_some_and(|expected| expected != sealed) {
            return self.decide(self.tampered(TamperKind::MixedSealing));
        }
        self.sealed = Some(sealed);

        let entry = match (&body.payload, &self.keys) {
            (Payload::Plain(bytes), _) => match self.decode(version, bytes.0) {
                Ok(entry) => entry,
                Err(reason) => return self.malformed(reason),
            },
            (Payload::Sealed { .. }, None) => None,
            // Without a cipher in this build, a sealed record's chain is
            // verified and its content left unread, as with no key.
            #[cfg(not(feature = "audit-seal"))]
            (Payload::Sealed { key_id, .. }, Some(keys)) => {
                if let Some(verdict) = self.other_key(index, KeyId(*key_id), keys.id()) {
                    return self.decide(verdict);
                }
                None
            }
            #[cfg(feature = "audit-seal")]
            (
                Payload::Sealed {
                    key_id,
                    nonce,
                    ciphertext,
                },
                Some(keys),
            ) => {
                if let Some(verdict) = self.other_key(index, KeyId(*key_id), keys.id()) {
                    return self.decide(verdict);
                }
                let Ok(plain) = keys.open(log_id, body.seq, &prev, nonce, ciphertext.0) else {
                    return self.decide(self.tampered(TamperKind::BadMac));
                };
                match self.decode(version, &plain) {
                    Ok(entry) => entry,
                    Err(reason) => return self.malformed(reason),
                }
            }
        };

        if let Some(anchor) = &self.anchor
            && anchor.records == index + 1
            && anchor.head != hash
        {
            return self.decide(self.tampered(TamperKind::Rewritten));
        }
        self.head = hash;
        self.remember(index, hash);
        if version > VERSION {
            self.newer.records += 1;
            self.newer.newest = self.newer.newest.max(version);
        }
        self.last_offset = Some(self.offset);
        self.link_from_anchor = false;
        self.next_index += 1;
        if self.keep_records {
            self.ready.push_back(Record {
                index,
                offset: self.offset,
                hash,
                format_version: version,
                entry,
            });
        }
    }

    /// Keeps the accepted record's hash prefix (and, when bounded, drops
    /// the oldest beyond the window, and notes a checkpoint every window).
    fn remember(&mut self, index: u64, hash: ChainHash) {
        if let Some(window) = self.window {
            let window = window.get();
            if (index - self.first_index).is_multiple_of(window as u64) {
                self.checkpoints.push((index, self.offset));
            }
            // The oldest goes before the newest comes: a full deque that
            // took one more would double its buffer (1 MiB for 512 KiB of
            // prefixes).
            if self.seen.len() >= window {
                self.seen.pop_front();
                self.seen_from += 1;
            }
        }
        self.seen.push_back(hash.prefix());
    }

    /// Reads a record's entry by its format version; a newer version than
    /// this reader's is left unread.
    fn decode(&self, version: u8, bytes: &[u8]) -> Result<Option<LogEntry>, MalformedReason> {
        match format::decode_entry(version, bytes) {
            Ok(Decoded::Entry(entry)) => Ok(Some(entry)),
            Ok(Decoded::Newer) => Ok(None),
            Err(DecodeError::UnknownVersion) => {
                Err(MalformedReason::UnsupportedVersion { version })
            }
            Err(DecodeError::Undecodable) => Err(MalformedReason::UndecodableEntry),
        }
    }

    fn malformed(&mut self, reason: MalformedReason) {
        self.decide(Verdict::Malformed {
            record_index: self.next_index,
            offset: self.offset,
            reason,
        });
    }
}

/// Verifies a whole log held in memory. Same as feeding it to a
/// [`Verifier`] in one chunk, without keeping the records.
pub fn verify(bytes: &[u8], options: VerifyOptions<'_>) -> Verdict {
    let mut verifier = Verifier::discarding(options);
    verifier.handle_bytes(bytes);
    verifier.finish()
}

/// Verifies a whole log held in memory and returns the records accepted
/// (those before the first fault, if any) with the verdict.
pub fn verify_and_read(bytes: &[u8], options: VerifyOptions<'_>) -> (Verdict, Vec<Record>) {
    let mut verifier = Verifier::new(options);
    verifier.handle_bytes(bytes);
    let records = verifier.ready.drain(..).collect();
    (verifier.finish(), records)
}
