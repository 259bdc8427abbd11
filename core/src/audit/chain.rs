//! The hash chain: log ids, chain hashes, the genesis value and the frame
//! hash, plus the hex text form they share.

use std::fmt;

/// Context of the frame hash (BLAKE3 `derive_key` mode).
const CHAIN_CONTEXT: &str = "spillguard audit chain v1";
/// Context of the genesis value, the previous hash of frame 0.
const GENESIS_CONTEXT: &str = "spillguard audit genesis v1";

/// The identity of one log: 16 random bytes chosen by whoever creates it
/// (the core generates no randomness). Every frame carries it, so records
/// spliced in from another log are recognised. Written as 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogId(pub [u8; 16]);

/// A link of the chain: the BLAKE3 hash of one frame (or the genesis value
/// of an empty log). Written as 64 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChainHash(pub [u8; 32]);

impl ChainHash {
    /// The previous hash of frame 0 of the log `log_id`: a fixed value
    /// derived from the log id, so the first frame is bound to its log.
    pub fn genesis(log_id: LogId) -> ChainHash {
        let mut hasher = blake3::Hasher::new_derive_key(GENESIS_CONTEXT);
        hasher.update(&log_id.0);
        ChainHash(*hasher.finalize().as_bytes())
    }

    /// The first 8 bytes, as a number: enough to tell records apart when
    /// classifying a duplicate.
    pub(crate) fn prefix(&self) -> u64 {
        let mut first = [0u8; 8];
        first.copy_from_slice(&self.0[..8]);
        u64::from_le_bytes(first)
    }
}

/// The chain hash of a frame, given every byte of it but the hash itself
/// (the previous hash is one of those bytes).
pub(crate) fn frame_hash(frame_without_hash: &[u8]) -> ChainHash {
    let mut hasher = blake3::Hasher::new_derive_key(CHAIN_CONTEXT);
    hasher.update(frame_without_hash);
    ChainHash(*hasher.finalize().as_bytes())
}

/// Text that should have been a fixed number of hex digits was not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HexParseError {
    /// How many hex digits were expected.
    pub expected_digits: usize,
}

impl fmt::Display for HexParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected {} hex digits", self.expected_digits)
    }
}

impl std::error::Error for HexParseError {}

pub(crate) fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    for b in bytes {
        write!(f, "{b:02x}")?;
    }
    Ok(())
}

/// Parses exactly `2 * N` hex digits (either case).
pub(crate) fn parse_hex<const N: usize>(text: &str) -> Result<[u8; N], HexParseError> {
    let error = HexParseError {
        expected_digits: 2 * N,
    };
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return Err(error);
    }
    let mut out = [0u8; N];
    for (slot, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let hi = (pair[0] as char).to_digit(16).ok_or(error)?;
        let lo = (pair[1] as char).to_digit(16).ok_or(error)?;
        *slot = (hi * 16 + lo) as u8;
    }
    Ok(out)
}

/// `Display`, `FromStr` and serde (as a hex string) for a byte-array newtype.
macro_rules! hex_newtype {
    ($name:ident, $len:literal) => {
        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                $crate::audit::chain::write_hex(f, &self.0)
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::audit::chain::HexParseError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                $crate::audit::chain::parse_hex::<$len>(text).map($name)
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<Self, D::Error> {
                let text = <::std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                text.parse().map_err(::serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use hex_newtype;

hex_newtype!(LogId, 16);
hex_newtype!(ChainHash, 32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_bad_text() {
        let id = LogId([0xab; 16]);
        assert_eq!(id.to_string(), "ab".repeat(16));
        assert_eq!("AB".repeat(16).parse::<LogId>(), Ok(id));
        assert_eq!(
            "ab".repeat(15).parse::<LogId>(),
            Err(HexParseError {
                expected_digits: 32
            })
        );
        assert!(format!("{}zz", "ab".repeat(15)).parse::<LogId>().is_err());
    }

    #[test]
    fn genesis_depends_on_the_log_id() {
        let a = ChainHash::genesis(LogId([1; 16]));
        let b = ChainHash::genesis(LogId([2; 16]));
        assert_ne!(a, b);
        assert_eq!(a, ChainHash::genesis(LogId([1; 16])));
    }
}
