//! The audit log: append-only, hash-chained, optionally encrypted,
//! verified offline — the sans-IO part.
//!
//! **Invariants:** the chain covers every frame (each hash covers every
//! byte before it, so no frame changes, moves or vanishes without breaking
//! a link); a complete frame with a bad hash is tampering, never a torn
//! tail (a crash leaves only a prefix of the next frame); a sealed log
//! writes no entry byte in clear, and the key never reaches the log; the
//! core generates no randomness (log ids and nonces come from the caller).
//! Without an anchor the best verdict is [`Verdict::Unanchored`].
//!
//! The core builds frames ([`LogWriter`]) and checks byte streams
//! ([`Verifier`], [`verify`]); it reads no file and draws no randomness.
//! The caller appends the frames to a file, supplies the log id (16 random
//! bytes) when creating a log, a fresh nonce (24 random bytes) for each
//! sealed record, and the key. Lifecycle events are written as they
//! happen: the attempt before dispatch, every transition, the final record
//! ([`LogEntry::Call`]).
//!
//! # Frame layout (every format version)
//!
//! A log is a sequence of frames with nothing before, between or after
//! them. Frame `n` (from 0) is:
//!
//! | bytes | field | encoding |
//! |---|---|---|
//! | 4 | `body_len`: bytes after the header | u32 little-endian, 84 ..= 16 MiB |
//! | 4 | `body_len_check` | `!body_len` (bitwise complement), u32 LE |
//! | 1 | version | the entry's format version, [`FORMAT_VERSION`] when written (see [format versions](#format-versions)) |
//! | 1–10 | sequence number | postcard varint u64; equals `n` |
//! | 16 | log id | raw |
//! | 32 | previous hash | raw; frame 0: [`ChainHash::genesis`] of the log id |
//! | 1 | payload kind | postcard varint: `0` plain, `1` sealed |
//! | | *plain:* entry | postcard byte string (varint length, bytes) of the postcard-encoded [`LogEntry`] |
//! | | *sealed:* key id | 8 bytes raw ([`Key::id`]) |
//! | | *sealed:* nonce | 24 bytes raw |
//! | | *sealed:* ciphertext | postcard byte string: XChaCha20-Poly1305 ciphertext of the encoded entry ‖ 16-byte tag |
//! | 32 | hash | BLAKE3 |
//!
//! Everything between the header and the hash is one postcard value
//! (`version, seq, log_id, prev, payload`), and it must fill that space
//! exactly. Postcard writes fields in order and enum variants by index, so
//! the field and variant order of [`LogEntry`] and of the core types it
//! holds ([`AuditEvent`], [`CallRecord`](crate::CallRecord),
//! [`State`](crate::State), …) is the entry's format: it changes only
//! with a new format version.
//!
//! **Chain hash.** The hash is BLAKE3 in `derive_key` mode with context
//! `"spillguard audit chain v1"`, over every byte of the frame before the
//! hash (header included; the previous hash is among them). Each frame
//! names its predecessor's hash, so a record cannot change, move or vanish
//! without breaking a link.
//!
//! **Sealing.** With a key, the entry is encrypted with XChaCha20-Poly1305
//! under a subkey (BLAKE3 `derive_key`, context
//! `"spillguard audit record key v1"`), with associated data
//! `log id ‖ sequence number (u64 LE) ‖ previous hash`: a record swapped,
//! replayed or spliced from another log fails authentication even if its
//! header is rewritten and re-hashed. The header fields are not secret;
//! no entry byte is written in clear. The key id is a one-way derivation
//! that tells a wrong key from a forged record.
//!
//! **Anchors.** An [`Anchor`] (log id, record count, head hash, the byte
//! offset of its last record, and a keyed-BLAKE3 MAC when the log is
//! sealed) is kept outside the log. It is the only way to detect a clean
//! cut at a record boundary, or a whole chain rewritten and re-hashed.
//! Its text form is `sga2.…` (format 1, `sga1.…`, without the offset, is
//! still read); see [`Anchor`].
//!
//! # Format versions
//!
//! Each record names the format version of its entry; the frame around it
//! is the same in every version. A reader decodes every version from
//! [`OLDEST_FORMAT_VERSION`] to [`FORMAT_VERSION`] (a field added later
//! reads as absent in an older record), and a log may hold records of
//! several versions. A record of a newer version than the reader's is
//! verified as a link of the chain like any other and handed on without
//! its entry ([`Record::is_newer_format`]): never reported as tampering,
//! and the rest of the log still verifies.
//!
//! ## Adding a field to a record
//!
//! An audit log written by any release must stay readable by every later
//! one. Postcard writes fields in order without names, so a record's
//! layout is its types' field and variant order. To change it:
//!
//! 1. Freeze the version being left: copy the types whose encoding
//!    changes, and every type that holds one of them up to [`LogEntry`],
//!    into a module `v{N}` beside `format.rs`, as they are; write a `From`
//!    that turns its `LogEntry` into today's, giving each new field its
//!    absent value (`None`, `0`, empty).
//! 2. Add the field at the end of its struct (or the variant at the end of
//!    its enum), raise [`FORMAT_VERSION`] to `N + 1`, and decode version
//!    `N` through the frozen types in `format::decode_entry`.
//! 3. Write the new version's fixtures with `cargo xtask audit-fixtures`
//!    (a plain and a sealed log written by the CLI, their anchors and
//!    key, what `audit verify`, `sessions` and `activity` said of them,
//!    and the new layout's description) and commit them. The fixtures of
//!    every earlier version stay as they are: CI reads them all.
//!
//! A test traces the layout of [`LogEntry`] and fails when it differs from
//! the one recorded for [`FORMAT_VERSION`]: a record type cannot change
//! without a new version and its fixtures.
//!
//! # Verification rules
//!
//! The verifier reads frames in order. For frame `n` at byte `offset`:
//!
//! 1. **Header.** If fewer than 8 bytes remain, or the header is intact
//!    but the body is not all there, the frame is *incomplete* (step 7).
//!    A length that does not match its complement, or is out of bounds,
//!    is [`TamperKind::Modified`].
//! 2. **Hash.** The frame must match its own hash, else `Modified`.
//! 3. **Body.** It must decode and name a version that was written (1 or
//!    later), else [`Verdict::Malformed`]. A version newer than
//!    [`FORMAT_VERSION`] is checked by every rule below except the
//!    entry's decoding.
//! 4. **Log id.** It must be the anchor's (or frame 0's), else
//!    [`TamperKind::WrongLog`].
//! 5. **Sequence and link.** With sequence number `s`:
//!    * `s == n` and the previous hash is the head: linked;
//!    * `s == n`, another previous hash: [`TamperKind::Replaced`];
//!    * `s < n`: [`TamperKind::Duplicated`] if it is a copy of record `s`,
//!      else [`TamperKind::Inserted`];
//!    * `s > n`: the rest of the log is scanned: if record `s` appears
//!      again it is `Duplicated`; else if a skipped number `n..s` appears,
//!      [`TamperKind::Reordered`]; else [`TamperKind::Deleted`].
//! 6. **Payload.** Sealed iff a key is given (or, without a key, as frame
//!    0 is), else [`TamperKind::MixedSealing`]. With a key, a foreign key
//!    id is [`Verdict::WrongKey`] at frame 0 (unless the anchor's MAC
//!    proved the key right) and [`TamperKind::BadMac`] later; a payload
//!    that does not authenticate is `BadMac`; an entry that does not
//!    decode is `Malformed`. If the anchor vouches for `n + 1` records,
//!    this frame's hash must be the anchor's head, else
//!    [`TamperKind::Rewritten`].
//! 7. **End.** An incomplete final frame is a **torn tail** exactly when
//!    its bytes agree with the start of the frame the writer would write
//!    next, as far as they go: the length (once its 4 bytes are there) in
//!    bounds, as much of its complement as is there, then version,
//!    sequence number `n`, the log id and the head. Otherwise it is
//!    `Modified`. (Fewer than 4 bytes cannot disagree, so they are torn.
//!    Zero bytes past the last frame, as some file systems leave after a
//!    power loss, are no frame's start: `Modified` from 4 bytes on.)
//!
//! So **a complete frame is never a torn tail**: a crash leaves a prefix
//! of the last frame (bytes missing at the end); a flipped bit leaves every
//! length intact, so the frame is complete and fails its hash (or its
//! header check) — tampering, even when it is the last frame. Records that
//! verify and come after a bad one do not matter: the first fault decides.
//!
//! Then, with an anchor for `N` records: fewer than `N` intact records
//! (cleanly cut or torn) is [`TamperKind::Truncated`]; exactly `N` and a
//! clean end is [`Verdict::Ok`]. More than `N`, or no anchor, is
//! [`Verdict::Unanchored`] (the end is not vouched for), or
//! [`Verdict::TornTail`] if the last frame is torn.
//!
//! # Recovery
//!
//! [`LogWriter::resume`] verifies an existing log (without an anchor),
//! keeps every intact record, reports a torn tail for the caller to
//! truncate, and makes the next frame a [`LogEntry::Recovered`] entry.
//! A whole record is never dropped: a log that fails verification is not
//! continued.
//!
//! [`LogWriter::resume_from_anchor`] does the same from a trusted anchor
//! in time that does not grow with the log: it reads the anchored record
//! (at the anchor's offset; its hash must be the anchor's head, and for a
//! sealed log the anchor's MAC must be the key's) and what follows it,
//! checked by the rules above ([`Verifier::from_anchor`]). The bytes
//! before the offset are not read: they are the anchor's to vouch for,
//! and only a full verification ([`verify`]) checks them.
//!
//! # Reading the log
//!
//! [`compare`] checks the calls of a verified log against the lifecycle a
//! test expected; [`sessions`] and [`activity`] are the Sessions
//! and Activity views, computed from the log alone. Each is a fold fed one
//! record at a time ([`Comparison`], [`Sessions`], [`Activity`]), so a
//! reader streams a log of any length through a
//! [bounded](Verifier::bounded) [`Verifier`] and these folds in memory
//! that does not grow with the log: the calls still open, one aggregate
//! per session, the expected calls.

mod anchor;
mod chain;
mod expect;
mod format;
mod frame;
#[cfg(feature = "audit-checkpoint")]
pub mod note;
mod seal;
#[cfg(feature = "audit-checkpoint")]
pub mod tlog;
mod verdict;
mod verify;
mod views;
mod writer;

use serde::{Deserialize, Serialize};

use crate::call::AuditEvent;

pub use anchor::{Anchor, AnchorMac, AnchorParseError};
pub use chain::{ChainHash, HexParseError, LogId};
pub use expect::{Comparison, Difference, ExpectedCall, Transition, compare};
pub use format::{FORMAT_VERSION, OLDEST_FORMAT_VERSION};
pub use frame::MAX_BODY_BYTES;
pub use seal::{Key, KeyId, Nonce};
pub use verdict::{MalformedReason, Record, TamperKind, Verdict};
pub use verify::{NewerRecords, Verifier, VerifyOptions, verify, verify_and_read};
pub use views::{Activity, ActivityRow, SessionRow, Sessions, StateCount, activity, sessions};
pub use writer::{AppendError, LogWriter, Resume, ResumeError, TornTail};

/// One record's content. Variant order is part of the format (postcard
/// writes the variant's index): new kinds are added at the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LogEntry {
    /// A lifecycle event of a call: the attempt, a transition, or the
    /// final record.
    Call(AuditEvent),
    /// A writer opened a log whose final frame was torn by a crash and
    /// truncated it before appending.
    Recovered {
        /// Bytes of the torn frame that were dropped.
        dropped_bytes: u64,
        /// Where they started (the log's length after truncation).
        at_offset: u64,
    },
    /// A writer opened the log (optional; who it was, for the reader).
    Opened {
        /// The writer's name and version, e.g. `spillguard-std 0.1.0`.
        writer: String,
    },
}
