//! The frame format: an 8-byte header (the body length and its complement),
//! a postcard body, and the chain hash. See the [module docs](super) for
//! the byte layout.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::chain::{ChainHash, LogId, frame_hash};
use super::seal::Nonce;

/// The format version a writer puts in every frame it writes.
pub(crate) use super::format::FORMAT_VERSION as VERSION;
/// Bytes of the frame header: body length and its complement.
pub(crate) const HEADER_BYTES: usize = 8;
/// Bytes of the chain hash that ends every frame.
pub(crate) const HASH_BYTES: usize = 32;
/// The smallest body a writer can produce: version, a one-byte sequence
/// number, log id, previous hash, payload tag, an empty payload's length,
/// hash.
pub(crate) const MIN_BODY_BYTES: u32 = 1 + 1 + 16 + 32 + 1 + 1 + HASH_BYTES as u32;
/// The largest frame body accepted (16 MiB). An entry whose frame would be
/// larger is refused by the writer, and a header declaring more is damage.
pub const MAX_BODY_BYTES: u32 = 16 << 20;

/// A byte slice that postcard writes as varint length + bytes in one go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bytes<'a>(pub(crate) &'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Bytes<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <&'a [u8]>::deserialize(deserializer).map(Bytes)
    }
}

/// A frame's body, between the header and the hash, in postcard order.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Body<'a> {
    pub(crate) version: u8,
    pub(crate) seq: u64,
    pub(crate) log_id: [u8; 16],
    pub(crate) prev: [u8; 32],
    #[serde(borrow)]
    pub(crate) payload: Payload<'a>,
}

/// A record's payload: a postcard-encoded [`LogEntry`](super::LogEntry) in
/// clear, or the same sealed. Variant order is part of the format.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Payload<'a> {
    /// The entry in clear.
    Plain(#[serde(borrow)] Bytes<'a>),
    /// The entry encrypted with XChaCha20-Poly1305 (ciphertext ‖ tag).
    Sealed {
        key_id: [u8; 8],
        nonce: Nonce,
        #[serde(borrow)]
        ciphertext: Bytes<'a>,
    },
}

impl Payload<'_> {
    pub(crate) fn is_sealed(&self) -> bool {
        matches!(self, Payload::Sealed { .. })
    }
}

/// What the first bytes of a frame say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Header {
    /// Fewer than [`HEADER_BYTES`] bytes.
    Incomplete,
    /// The length does not match its complement, or is out of bounds.
    Damaged,
    /// A well-formed header: the whole frame is `total` bytes.
    Frame { total: usize },
}

/// Reads the header at the start of `bytes`.
pub(crate) fn read_header(bytes: &[u8]) -> Header {
    let (Some(len), Some(check)) = (le_u32(bytes, 0), le_u32(bytes, 4)) else {
        return Header::Incomplete;
    };
    if check != !len || !(MIN_BODY_BYTES..=MAX_BODY_BYTES).contains(&len) {
        return Header::Damaged;
    }
    Header::Frame {
        total: HEADER_BYTES + len as usize,
    }
}

/// Whether the first bytes of a header (fewer than [`HEADER_BYTES`] are
/// allowed) can still be those of a well-formed one: once the length is
/// there it must be in bounds, and each byte of the check that is there
/// must be the complement of the length's.
pub(crate) fn header_prefix_is_valid(bytes: &[u8]) -> bool {
    let Some(len) = le_u32(bytes, 0) else {
        return true;
    };
    let check = (!len).to_le_bytes();
    let present = bytes.get(4..HEADER_BYTES.min(bytes.len())).unwrap_or(&[]);
    (MIN_BODY_BYTES..=MAX_BODY_BYTES).contains(&len) && check.starts_with(present)
}

fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let word: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(word))
}

/// A complete frame whose header was read: `bytes` is exactly the frame.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame<'a> {
    bytes: &'a [u8],
}

impl<'a> Frame<'a> {
    /// `bytes` must be exactly as long as its header says, and that header
    /// must be well-formed (so it holds at least `MIN_BODY_BYTES`).
    pub(crate) fn new(bytes: &'a [u8]) -> Option<Frame<'a>> {
        match read_header(bytes) {
            Header::Frame { total } if total == bytes.len() => Some(Frame { bytes }),
            _ => None,
        }
    }

    fn split(&self) -> (&'a [u8], &'a [u8]) {
        // `new` checked the length covers header, body and hash.
        self.bytes.split_at(self.bytes.len() - HASH_BYTES)
    }

    /// The hash written at the end of the frame.
    pub(crate) fn stored_hash(&self) -> ChainHash {
        let mut hash = [0u8; 32];
        hash.copy_from_slice(self.split().1);
        ChainHash(hash)
    }

    /// The hash the frame's other bytes call for.
    pub(crate) fn computed_hash(&self) -> ChainHash {
        frame_hash(self.split().0)
    }

    /// Decodes the body; it must fill the space between header and hash.
    pub(crate) fn body(&self) -> Option<Body<'a>> {
        let body = self.split().0.get(HEADER_BYTES..)?;
        match postcard::take_from_bytes::<Body<'a>>(body) {
            Ok((decoded, [])) => Some(decoded),
            _ => None,
        }
    }
}

/// Postcard's `to_extend` takes its writer by value; this lends it a
/// `Vec` so that an error cannot drop the caller's bytes.
struct Sink<'a>(&'a mut Vec<u8>);

impl Extend<u8> for Sink<'_> {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

/// Why a frame could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BuildError {
    /// The body would exceed [`MAX_BODY_BYTES`].
    TooLarge { body_bytes: usize },
    /// Postcard refused the body.
    Encode,
}

/// Appends one frame to `out` and returns its chain hash. On error `out`
/// is left as it was.
pub(crate) fn write_frame(
    out: &mut Vec<u8>,
    version: u8,
    seq: u64,
    log_id: LogId,
    prev: &ChainHash,
    payload: Payload<'_>,
) -> Result<ChainHash, BuildError> {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER_BYTES]);
    let body = Body {
        version,
        seq,
        log_id: log_id.0,
        prev: prev.0,
        payload,
    };
    if postcard::to_extend(&body, Sink(out)).is_err() {
        out.truncate(start);
        return Err(BuildError::Encode);
    }
    let body_bytes = out.len() - start - HEADER_BYTES + HASH_BYTES;
    let len = match u32::try_from(body_bytes) {
        Ok(len) if len <= MAX_BODY_BYTES => len,
        _ => {
            out.truncate(start);
            return Err(BuildError::TooLarge { body_bytes });
        }
    };
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&(!len).to_le_bytes());
    let hash = frame_hash(&out[start..]);
    out.extend_from_slice(&hash.0);
    Ok(hash)
}

/// The bytes a writer puts first in the body of frame `seq`: version,
/// sequence number, log id, previous hash (postcard). Used to tell a
/// crash-cut frame from a damaged one.
pub(crate) fn fixed_prefix(seq: u64, log_id: LogId, prev: &ChainHash) -> Vec<u8> {
    postcard::to_allocvec(&(VERSION, seq, log_id.0, prev.0)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_round_trips_and_its_header_guards_the_length() {
        let mut out = b"xy".to_vec();
        let prev = ChainHash([5; 32]);
        let hash = write_frame(
            &mut out,
            VERSION,
            300,
            LogId([1; 16]),
            &prev,
            Payload::Plain(Bytes(b"entry")),
        )
        .unwrap();
        let frame = &out[2..];
        // 8 header + 1 version + 2 seq + 16 + 32 + 1 tag + 1 len + 5 + 32 hash.
        assert_eq!(frame.len(), 98);
        assert_eq!(read_header(frame), Header::Frame { total: 98 });
        let view = Frame::new(frame).unwrap();
        assert_eq!(view.stored_hash(), hash);
        assert_eq!(view.computed_hash(), hash);
        let body = view.body().unwrap();
        assert_eq!((body.version, body.seq), (VERSION, 300));
        assert!(matches!(body.payload, Payload::Plain(Bytes(b"entry"))));
        assert_eq!(
            &frame[8..11],
            &fixed_prefix(300, LogId([1; 16]), &prev)[..3]
        );

        for bit in 0..64 {
            let mut damaged = frame.to_vec();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(read_header(&damaged), Header::Damaged, "bit {bit}");
        }
        assert_eq!(read_header(&frame[..7]), Header::Incomplete);
        for cut in 0..=8 {
            assert!(header_prefix_is_valid(&frame[..cut]), "cut {cut}");
        }
        let mut bad_check = frame[..6].to_vec();
        bad_check[5] ^= 1;
        assert!(!header_prefix_is_valid(&bad_check));
        assert!(
            !header_prefix_is_valid(&[0, 0, 0, 0]),
            "zeros are no length"
        );
    }
}
