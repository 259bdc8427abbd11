//! The verifier's answers: [`Verdict`], [`TamperKind`], [`MalformedReason`],
//! and the [`Record`]s it accepts.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::LogEntry;
use super::chain::ChainHash;
use super::seal::KeyId;

/// The outcome of verifying a log. Only [`Verdict::Ok`] means "this is the
/// whole log, as written".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verdict {
    /// Every record verified, and the log ends exactly where the anchor
    /// says: `records` records, the last with chain hash `head`.
    Ok {
        /// Records in the log.
        records: u64,
        /// Chain hash of the last record.
        head: ChainHash,
    },
    /// Every record verified, but nothing vouches for the end of the log:
    /// a cut at a record boundary after record `vouched - 1` would look the
    /// same. `records - vouched` records are unvouched (all of them when
    /// no anchor was given).
    Unanchored {
        /// Records in the log, all intact.
        records: u64,
        /// Chain hash of the last record; `None` for an empty log whose id
        /// is unknown.
        head: Option<ChainHash>,
        /// How many of them the anchor vouched for (0 without an anchor).
        vouched: u64,
    },
    /// The records before `offset` verified, and the log ends with an
    /// incomplete frame whose bytes are a prefix of the frame the writer
    /// would have written next: a crash cut the last append. Recovery
    /// keeps the first `records_before` records and truncates the file to
    /// `offset`.
    TornTail {
        /// Where the incomplete frame starts (the length of the intact part).
        offset: u64,
        /// Bytes of the incomplete frame.
        torn_bytes: u64,
        /// Intact records before it.
        records_before: u64,
        /// Chain hash of the last intact record; `None` if there is none
        /// and no anchor names the log.
        head: Option<ChainHash>,
        /// How many of them the anchor vouched for (0 without an anchor).
        vouched: u64,
    },
    /// The log was changed after it was written: record `record_index`,
    /// which starts at byte `offset`, is the first that cannot be accepted.
    Tampered {
        /// Position of the record in the file, from 0.
        record_index: u64,
        /// Byte offset where it starts.
        offset: u64,
        /// What is wrong with it.
        kind: TamperKind,
    },
    /// Record `record_index` is intact (its hash and links verify) but its
    /// content cannot be understood: written by another format version, or
    /// forged with a recomputed hash.
    Malformed {
        /// Position of the record in the file, from 0.
        record_index: u64,
        /// Byte offset where it starts.
        offset: u64,
        /// What could not be understood.
        reason: MalformedReason,
    },
    /// The key given is not the log's: the log (or the anchor's MAC) names
    /// another key id. Nothing was decrypted.
    WrongKey {
        /// The key id the log or anchor names.
        log_key: KeyId,
        /// The id of the key given.
        given_key: KeyId,
    },
    /// The anchor's MAC names the key given but does not match its fields:
    /// the anchor was altered.
    BadAnchor,
}

impl Verdict {
    /// Whether the log verified completely against an anchor.
    pub fn is_ok(&self) -> bool {
        matches!(self, Verdict::Ok { .. })
    }

    /// Whether the log was found changed, unreadable, or not openable with
    /// the key: everything but `Ok`, `Unanchored` and `TornTail`.
    pub fn is_rejected(&self) -> bool {
        !matches!(
            self,
            Verdict::Ok { .. } | Verdict::Unanchored { .. } | Verdict::TornTail { .. }
        )
    }
}

/// How a record was found changed. Classified from sequence numbers and
/// previous-hash links; see the [module docs](super#verification-rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TamperKind {
    /// Its bytes do not match its own hash (changed in place, a flipped
    /// bit), or its header's length does not match its complement.
    Modified,
    /// It is intact and has the sequence number of its place, but does not
    /// link to the record before it: that record or this one was replaced
    /// by re-hashed content.
    Replaced,
    /// It has a later sequence number than its place, and a record it
    /// skipped appears further on: records were moved.
    Reordered,
    /// It has a sequence number already used by a different record.
    Inserted,
    /// It is a copy of record `of` (or the record `of` appears again later).
    Duplicated {
        /// The sequence number of the record it copies.
        of: u64,
    },
    /// `missing` records are gone before it (its sequence number jumps
    /// ahead and the skipped ones never appear).
    Deleted {
        /// How many sequence numbers were skipped.
        missing: u64,
    },
    /// It carries another log's id: spliced in from another log.
    WrongLog,
    /// It is sealed but does not authenticate with the log's key under its
    /// log id, sequence number and previous hash (a forged, re-hashed or
    /// spliced record), or names another key than the records before it.
    BadMac,
    /// It is in clear in a sealed log (the key was given, or the first
    /// record is sealed), or sealed in a plain log.
    MixedSealing,
    /// The records up to it form a valid chain, but not the one the anchor
    /// was taken of: they were rewritten and re-hashed.
    Rewritten,
    /// The log ends (cleanly or with a torn frame) before the `anchored`
    /// records the anchor vouches for: records were cut off.
    Truncated {
        /// How many records the anchor vouches for.
        anchored: u64,
    },
}

/// Why an intact record could not be understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum MalformedReason {
    /// The frame names a format version no release ever wrote (0).
    UnsupportedVersion {
        /// The version it names.
        version: u8,
    },
    /// The frame body is not a valid postcard body.
    UndecodableBody,
    /// The payload (after decryption) is not a [`LogEntry`].
    UndecodableEntry,
}

/// One record the verifier accepted, with its decoded entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Position in the log, from 0 (equal to its sequence number).
    pub index: u64,
    /// Byte offset where its frame starts.
    pub offset: u64,
    /// Its chain hash.
    pub hash: ChainHash,
    /// The format version its entry was written in.
    pub format_version: u8,
    /// The entry; `None` when it is sealed and no key was given, or when
    /// its format is newer than this reader's
    /// ([`is_newer_format`](Self::is_newer_format)).
    pub entry: Option<LogEntry>,
}

impl Record {
    /// Whether the record was written in a format version newer than this
    /// reader's ([`FORMAT_VERSION`](super::FORMAT_VERSION)): its link in
    /// the chain verified, but its entry was not read.
    pub fn is_newer_format(&self) -> bool {
        self.format_version > super::FORMAT_VERSION
    }
}

impl fmt::Display for Verdict {
    /// One line for a person, e.g. `tampered: record 17 (byte 2345):
    /// deleted (2 records missing before it)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Ok { records, head } => {
                write!(f, "ok: {records} records, as anchored (head {head})")
            }
            Verdict::Unanchored {
                records, vouched, ..
            } => write!(
                f,
                "unanchored: {records} records intact, {} of them not vouched for by an anchor",
                records - vouched.min(records)
            ),
            Verdict::TornTail {
                offset,
                torn_bytes,
                records_before,
                ..
            } => write!(
                f,
                "torn tail: {records_before} records intact, then an incomplete final frame \
                 of {torn_bytes} bytes at byte {offset}"
            ),
            Verdict::Tampered {
                record_index,
                offset,
                kind,
            } => write!(f, "tampered: record {record_index} (byte {offset}): {kind}"),
            Verdict::Malformed {
                record_index,
                offset,
                reason,
            } => write!(
                f,
                "malformed: record {record_index} (byte {offset}): {reason}"
            ),
            Verdict::WrongKey { log_key, given_key } => write!(
                f,
                "wrong key: the log names key {log_key}, the key given is {given_key}"
            ),
            Verdict::BadAnchor => {
                f.write_str("bad anchor: its MAC does not match its fields under the key")
            }
        }
    }
}

impl fmt::Display for TamperKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TamperKind::Modified => f.write_str("modified (its bytes do not match its hash)"),
            TamperKind::Replaced => {
                f.write_str("replaced (it does not link to the record before it)")
            }
            TamperKind::Reordered => f.write_str("reordered (records were moved)"),
            TamperKind::Inserted => f.write_str("inserted (its sequence number is taken)"),
            TamperKind::Duplicated { of } => write!(f, "duplicated (a copy of record {of})"),
            TamperKind::Deleted { missing } => {
                write!(f, "deleted ({missing} records missing before it)")
            }
            TamperKind::WrongLog => f.write_str("from another log"),
            TamperKind::BadMac => f.write_str("does not authenticate with the key"),
            TamperKind::MixedSealing => f.write_str("sealed differently from the log"),
            TamperKind::Rewritten => f.write_str("rewritten (the chain is not the anchored one)"),
            TamperKind::Truncated { anchored } => {
                write!(f, "missing (the anchor vouches for {anchored} records)")
            }
        }
    }
}

impl fmt::Display for MalformedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MalformedReason::UnsupportedVersion { version } => {
                write!(f, "format version {version} was never written")
            }
            MalformedReason::UndecodableBody => f.write_str("the frame body does not decode"),
            MalformedReason::UndecodableEntry => f.write_str("the entry does not decode"),
        }
    }
}
