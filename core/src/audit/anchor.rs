//! Anchors: checkpoints of a log that the caller keeps somewhere else.
//!
//! An [`Anchor`] holds the record count, the head hash and the last
//! record's byte offset, MACed when the log is sealed. **Resuming from an
//! anchor reads nothing before its offset**: the anchor vouches for that
//! prefix, and only a full verification checks it.
//!
//! The text form is `sga2.…`, with the last record's offset. The form
//! `sga1.…` has no offset: it is read and verified, but cannot start a
//! partial resume.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::chain::{ChainHash, LogId, parse_hex, write_hex};
use super::seal::{Key, KeyId, KeySchedule};

/// The prefix of an anchor's text form without a record offset (format 1).
const TEXT_PREFIX_V1: &str = "sga1";
/// The prefix of an anchor's text form with a record offset (format 2).
const TEXT_PREFIX_V2: &str = "sga2";

/// A checkpoint of a log: its id, how many records it had, and the chain
/// hash of the last of them. Kept outside the log (a database row, a
/// command-line argument), it lets the verifier detect what no file can
/// show about itself: a clean cut at a record boundary, or a whole chain
/// rewritten and re-hashed.
///
/// When the log is sealed, [`LogWriter::anchor`](super::LogWriter::anchor)
/// also MACs the anchor with the key (keyed BLAKE3 under a subkey), so an
/// anchor cannot be forged by someone who can write where it is kept but
/// does not hold the key.
///
/// An anchor taken by the writer also says where the last record starts
/// in the file ([`offset`](Self::offset)): a writer reopening the log can
/// then check only that record and what follows it
/// ([`LogWriter::resume_from_anchor`](super::LogWriter::resume_from_anchor)),
/// in time that does not grow with the log.
///
/// # Text form
///
/// Format 2, with the offset:
/// `sga2.<log id, 32 hex>.<records, decimal>.<head, 64 hex>.<offset, decimal>`,
/// followed by `.<key id, 16 hex>.<MAC, 64 hex>` when MACed.
///
/// Format 1, without it (read and verified, and written for an anchor
/// whose `offset` is `None`):
/// `sga1.<log id>.<records>.<head>`, then `.<key id>.<MAC>` when MACed.
///
/// Either is short enough for a command line (104 to 226 characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// The log it is a checkpoint of.
    pub log_id: LogId,
    /// How many records the log had.
    pub records: u64,
    /// The chain hash of record `records - 1` (the genesis value when
    /// `records` is 0).
    pub head: ChainHash,
    /// The byte offset in the log where record `records - 1` starts, when
    /// known (`None` for an empty log and in the format-1 text form). Not
    /// trusted on its own: a reader that uses it checks that the frame
    /// found there is record `records - 1` with hash `head`.
    pub offset: Option<u64>,
    /// The MAC over the fields above, if the anchor was MACed.
    pub mac: Option<AnchorMac>,
}

/// The MAC of an [`Anchor`], and the id of the key that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnchorMac {
    /// Which key made the MAC.
    pub key_id: KeyId,
    /// Keyed BLAKE3 of `sga1 ‖ log id ‖ records (u64 LE) ‖ head`, or, when
    /// the anchor has an offset, of
    /// `sga2 ‖ log id ‖ records (u64 LE) ‖ head ‖ offset (u64 LE)`.
    pub tag: [u8; 32],
}

/// What checking an anchor's MAC with a key found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MacCheck {
    /// The anchor carries no MAC.
    Absent,
    /// The MAC was made by this key over these fields.
    Valid,
    /// The MAC names another key.
    OtherKey,
    /// The MAC names this key but does not match the fields.
    Invalid,
}

impl Anchor {
    /// An anchor without a MAC and without an offset.
    pub fn new(log_id: LogId, records: u64, head: ChainHash) -> Anchor {
        Anchor {
            log_id,
            records,
            head,
            offset: None,
            mac: None,
        }
    }

    /// The same anchor, saying that record `records - 1` starts at byte
    /// `offset` (drops a MAC made without it: MAC again afterwards).
    pub fn at_offset(mut self, offset: u64) -> Anchor {
        self.offset = Some(offset);
        self.mac = None;
        self
    }

    /// The same anchor, MACed with `key`.
    pub fn with_mac(self, key: &Key) -> Anchor {
        self.with_mac_from(&KeySchedule::new(key))
    }

    pub(crate) fn with_mac_from(mut self, keys: &KeySchedule) -> Anchor {
        self.mac = Some(AnchorMac {
            key_id: keys.id(),
            tag: keys.mac(&self.mac_message()),
        });
        self
    }

    /// Whether the MAC was made with `key` over these fields; `None` when
    /// the anchor carries no MAC.
    pub fn mac_matches(&self, key: &Key) -> Option<bool> {
        match self.check_mac(&KeySchedule::new(key)) {
            MacCheck::Absent => None,
            MacCheck::Valid => Some(true),
            MacCheck::OtherKey | MacCheck::Invalid => Some(false),
        }
    }

    pub(crate) fn check_mac(&self, keys: &KeySchedule) -> MacCheck {
        let Some(mac) = &self.mac else {
            return MacCheck::Absent;
        };
        if mac.key_id != keys.id() {
            return MacCheck::OtherKey;
        }
        // `blake3::Hash` compares in constant time.
        let expected = blake3::Hash::from(keys.mac(&self.mac_message()));
        if expected == blake3::Hash::from(mac.tag) {
            MacCheck::Valid
        } else {
            MacCheck::Invalid
        }
    }

    /// What the MAC covers: format 1's 60 bytes, or format 2's 68 (the
    /// offset appended).
    fn mac_message(&self) -> Vec<u8> {
        let mut message = Vec::with_capacity(4 + 16 + 8 + 32 + 8);
        message.extend_from_slice(self.text_prefix().as_bytes());
        message.extend_from_slice(&self.log_id.0);
        message.extend_from_slice(&self.records.to_le_bytes());
        message.extend_from_slice(&self.head.0);
        if let Some(offset) = self.offset {
            message.extend_from_slice(&offset.to_le_bytes());
        }
        message
    }

    fn text_prefix(&self) -> &'static str {
        match self.offset {
            Some(_) => TEXT_PREFIX_V2,
            None => TEXT_PREFIX_V1,
        }
    }
}

impl fmt::Display for Anchor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{}.{}",
            self.text_prefix(),
            self.log_id,
            self.records,
            self.head
        )?;
        if let Some(offset) = self.offset {
            write!(f, ".{offset}")?;
        }
        if let Some(mac) = &self.mac {
            write!(f, ".{}.", mac.key_id)?;
            write_hex(f, &mac.tag)?;
        }
        Ok(())
    }
}

/// An anchor's text was not of the form `sga2.<log id>.<records>.<head>.<offset>`
/// or `sga1.<log id>.<records>.<head>`, with an optional `.<key id>.<MAC>`;
/// names the first field that is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnchorParseError {
    /// It starts with neither `sga1.` nor `sga2.`.
    Prefix,
    /// It has neither 4 nor 6 dot-separated fields (`sga1`), or neither 5
    /// nor 7 (`sga2`).
    FieldCount(usize),
    /// The log id is not 32 hex digits.
    LogId,
    /// The record count is not a decimal `u64`.
    Records,
    /// The head is not 64 hex digits.
    Head,
    /// The key id is not 16 hex digits.
    KeyId,
    /// The MAC is not 64 hex digits.
    Mac,
    /// The offset is not a decimal `u64`.
    Offset,
}

impl fmt::Display for AnchorParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnchorParseError::Prefix => write!(
                f,
                "an anchor starts with `{TEXT_PREFIX_V2}.` or `{TEXT_PREFIX_V1}.`"
            ),
            AnchorParseError::FieldCount(n) => write!(
                f,
                "an anchor has 5 or 7 dot-separated fields (`{TEXT_PREFIX_V2}`), \
                 or 4 or 6 (`{TEXT_PREFIX_V1}`), not {n}"
            ),
            AnchorParseError::LogId => f.write_str("the anchor's log id is not 32 hex digits"),
            AnchorParseError::Records => f.write_str("the anchor's record count is not a number"),
            AnchorParseError::Head => f.write_str("the anchor's head is not 64 hex digits"),
            AnchorParseError::KeyId => f.write_str("the anchor's key id is not 16 hex digits"),
            AnchorParseError::Mac => f.write_str("the anchor's MAC is not 64 hex digits"),
            AnchorParseError::Offset => f.write_str("the anchor's offset is not a number"),
        }
    }
}

impl std::error::Error for AnchorParseError {}

impl FromStr for Anchor {
    type Err = AnchorParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fields: Vec<&str> = text.trim().split('.').collect();
        let (log_id, records, head, offset, mac) = match fields.as_slice() {
            [TEXT_PREFIX_V1, log_id, records, head] => (log_id, records, head, None, None),
            [TEXT_PREFIX_V1, log_id, records, head, key_id, tag] => {
                (log_id, records, head, None, Some((key_id, tag)))
            }
            [TEXT_PREFIX_V2, log_id, records, head, offset] => {
                (log_id, records, head, Some(offset), None)
            }
            [TEXT_PREFIX_V2, log_id, records, head, offset, key_id, tag] => {
                (log_id, records, head, Some(offset), Some((key_id, tag)))
            }
            [TEXT_PREFIX_V1 | TEXT_PREFIX_V2, ..] => {
                return Err(AnchorParseError::FieldCount(fields.len()));
            }
            _ => return Err(AnchorParseError::Prefix),
        };
        let mac = match mac {
            None => None,
            Some((key_id, tag)) => Some(AnchorMac {
                key_id: key_id.parse().map_err(|_| AnchorParseError::KeyId)?,
                tag: parse_hex::<32>(tag).map_err(|_| AnchorParseError::Mac)?,
            }),
        };
        let log_id = log_id.parse().map_err(|_| AnchorParseError::LogId)?;
        let records = records.parse().map_err(|_| AnchorParseError::Records)?;
        let head = head.parse().map_err(|_| AnchorParseError::Head)?;
        let offset = match offset {
            Some(offset) => Some(offset.parse().map_err(|_| AnchorParseError::Offset)?),
            None => None,
        };
        Ok(Anchor {
            log_id,
            records,
            head,
            offset,
            mac,
        })
    }
}

impl Serialize for Anchor {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Anchor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_with_and_without_mac() {
        let anchor = Anchor::new(LogId([0x11; 16]), 1234, ChainHash([0x22; 32]));
        let text = anchor.to_string();
        assert_eq!(
            text,
            format!("sga1.{}.1234.{}", "11".repeat(16), "22".repeat(32))
        );
        assert_eq!(text.len(), 4 + 1 + 32 + 1 + 4 + 1 + 64);
        assert_eq!(text.parse::<Anchor>(), Ok(anchor.clone()));

        let key = Key::from_bytes([3; 32]);
        let maced = anchor.clone().with_mac(&key);
        let text = maced.to_string();
        assert_eq!(text.len(), 107 + 1 + 16 + 1 + 64);
        let parsed: Anchor = text.parse().unwrap();
        assert_eq!(parsed, maced);
        assert_eq!(parsed.mac_matches(&key), Some(true));
        assert_eq!(parsed.mac_matches(&Key::from_bytes([4; 32])), Some(false));
        assert_eq!(anchor.mac_matches(&key), None);

        let forged = Anchor {
            records: 1235,
            ..maced
        };
        assert_eq!(forged.mac_matches(&key), Some(false));
    }

    #[test]
    fn bad_text_names_the_field() {
        let good = Anchor::new(LogId([1; 16]), 7, ChainHash([2; 32])).to_string();
        assert_eq!("x".parse::<Anchor>(), Err(AnchorParseError::Prefix));
        assert_eq!(
            "sga1.a.b".parse::<Anchor>(),
            Err(AnchorParseError::FieldCount(3))
        );
        let bad_records = good.replace(".7.", ".seven.");
        assert_eq!(
            bad_records.parse::<Anchor>(),
            Err(AnchorParseError::Records)
        );
        let bad_head = format!("{}0", good);
        assert_eq!(bad_head.parse::<Anchor>(), Err(AnchorParseError::Head));
    }
}
