//! Offline verification: a streaming [`Verifier`] and the typed [`Verdict`].
//! The exact rules are in the [module docs](super#verification-rules).

use std::collections::VecDeque;

use super::LogEntry;
use super::anchor::{Anchor, MacCheck};
use super::chain::{ChainHash, LogId};
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

#[derive(Debug, Clone)]
enum Phase {
    /// Accepting records.
    Reading,
    /// A fault was found; the rest is scanned only to name its kind.
    Classifying(Lookahead),
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
/// chunks. Memory: one incomplete frame, plus 8 bytes per record (to
/// recognise duplicates).
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
    seen: Vec<u64>,
    seen_from: u64,
    /// Started at an anchored record whose predecessor was not read: that
    /// record's previous hash is taken from it (its hash, which covers it,
    /// must be the anchor's head).
    link_from_anchor: bool,
    ready: VecDeque<Record>,
    phase: Phase,
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
            seen: Vec::new(),
            seen_from: 0,
            link_from_anchor: false,
            ready: VecDeque::new(),
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
        verifier.offset = offset;
        verifier.link_from_anchor = true;
        Some(verifier)
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
            if matches!(self.phase, Phase::Decided(_)) {
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
        let expected = match self.log_id {
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

    fn decide(&mut self, verdict: Verdict) {
        self.phase = Phase::Decided(verdict);
    }

    fn handle_damaged_header(&mut self) {
        let verdict = match &self.phase {
            Phase::Reading => self.tampered(TamperKind::Modified),
            Phase::Classifying(lookahead) => lookahead.verdict(),
            Phase::Decided(verdict) => verdict.clone(),
        };
        self.decide(verdict);
    }

    fn handle_frame(&mut self, bytes: &[u8]) {
        match &self.phase {
            Phase::Reading => self.accept(bytes),
            Phase::Classifying(_) => self.scan(bytes),
            Phase::Decided(_) => return,
        }
        self.offset += bytes.len() as u64;
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
        if body.version != VERSION {
            let version = body.version;
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
            (Payload::Plain(bytes), _) => match decode_entry(bytes.0) {
                Some(entry) => Some(entry),
                None => return self.malformed(MalformedReason::UndecodableEntry),
            },
            (Payload::Sealed { .. }, None) => None,
            (
                Payload::Sealed {
                    key_id,
                    nonce,
                    ciphertext,
                },
                Some(keys),
            ) => {
                if KeyId(*key_id) != keys.id() {
                    let verdict = if index == 0 && !self.key_confirmed {
                        Verdict::WrongKey {
                            log_key: KeyId(*key_id),
                            given_key: keys.id(),
                        }
                    } else {
                        self.tampered(TamperKind::BadMac)
                    };
                    return self.decide(verdict);
                }
                let Ok(plain) = keys.open(log_id, body.seq, &prev, nonce, ciphertext.0) else {
                    return self.decide(self.tampered(TamperKind::BadMac));
                };
                match decode_entry(&plain) {
                    Some(entry) => Some(entry),
                    None => return self.malformed(MalformedReason::UndecodableEntry),
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
        self.seen.push(hash.prefix());
        self.last_offset = Some(self.offset);
        self.link_from_anchor = false;
        self.next_index += 1;
        if self.keep_records {
            self.ready.push_back(Record {
                index,
                offset: self.offset,
                hash,
                entry,
            });
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

/// Decodes a postcard [`LogEntry`] that must fill `bytes` exactly.
fn decode_entry(bytes: &[u8]) -> Option<LogEntry> {
    match postcard::take_from_bytes::<LogEntry>(bytes) {
        Ok((entry, [])) => Some(entry),
        _ => None,
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
