//! Optional encryption of record payloads: XChaCha20-Poly1305 per record,
//! with the log id, the sequence number and the previous hash as associated
//! data. The key comes from the caller; three subkeys are derived from it
//! with BLAKE3 so that no key is used for two purposes.

use std::fmt;
use std::str::FromStr;

#[cfg(feature = "audit-seal")]
use chacha20poly1305::aead::AeadInOut;
#[cfg(feature = "audit-seal")]
use chacha20poly1305::{KeyInit, Tag, XChaCha20Poly1305, XNonce};
use zeroize::{Zeroize, Zeroizing};

#[cfg(feature = "audit-seal")]
use super::chain::{ChainHash, LogId};
use super::chain::{HexParseError, hex_newtype, parse_hex};

/// Context of the subkey that encrypts record payloads.
#[cfg(feature = "audit-seal")]
const RECORD_KEY_CONTEXT: &str = "spillguard audit record key v1";
/// Context of the subkey that MACs anchors.
const ANCHOR_KEY_CONTEXT: &str = "spillguard audit anchor mac v1";
/// Context of the key id written beside each sealed payload.
const KEY_ID_CONTEXT: &str = "spillguard audit key id v1";

/// Bytes of the Poly1305 tag appended to each ciphertext.
#[cfg(feature = "audit-seal")]
pub(crate) const TAG_BYTES: usize = 16;

/// A 24-byte XChaCha20 nonce. It must never repeat under one key; the
/// caller draws it from a CSPRNG for every record (the core generates no
/// randomness).
pub type Nonce = [u8; 24];

/// The 32-byte secret that seals a log's payloads and MACs its anchors.
/// It comes from the caller (a key file, an environment variable); it is
/// never written to the log.
///
/// Its text form (for key files) is 64 hex digits; surrounding whitespace
/// is ignored when parsing. `Debug` never shows it, and it is wiped from
/// memory when dropped.
#[derive(Clone)]
pub struct Key([u8; 32]);

impl Key {
    /// A key from its 32 bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Key {
        Key(bytes)
    }

    /// The key's public id: a one-way derivation, written beside every
    /// sealed payload so that a wrong key is told apart from a forged
    /// record.
    pub fn id(&self) -> KeyId {
        let derived = Zeroizing::new(blake3::derive_key(KEY_ID_CONTEXT, &self.0));
        let mut id = [0u8; 8];
        id.copy_from_slice(&derived[..8]);
        KeyId(id)
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key(id {})", self.id())
    }
}

impl FromStr for Key {
    type Err = HexParseError;

    /// Parses 64 hex digits, ignoring surrounding whitespace.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bytes = Zeroizing::new(parse_hex::<32>(text.trim())?);
        Ok(Key(*bytes))
    }
}

/// The public id of a [`Key`]: 8 bytes, written as 16 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId(pub [u8; 8]);

hex_newtype!(KeyId, 8);

/// The subkeys derived from a [`Key`]: the payload cipher (with the
/// `audit-seal` feature), the anchor MAC key and the key id.
#[derive(Clone)]
pub(crate) struct KeySchedule {
    #[cfg(feature = "audit-seal")]
    cipher: XChaCha20Poly1305,
    mac_key: Zeroizing<[u8; 32]>,
    id: KeyId,
}

impl fmt::Debug for KeySchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeySchedule(id {})", self.id)
    }
}

/// Associated data of a sealed payload: log id ‖ sequence number (u64
/// little-endian) ‖ previous hash. 56 bytes.
#[cfg(feature = "audit-seal")]
fn associated_data(log_id: LogId, seq: u64, prev: &ChainHash) -> [u8; 56] {
    let mut ad = [0u8; 56];
    ad[..16].copy_from_slice(&log_id.0);
    ad[16..24].copy_from_slice(&seq.to_le_bytes());
    ad[24..].copy_from_slice(&prev.0);
    ad
}

impl KeySchedule {
    pub(crate) fn new(key: &Key) -> KeySchedule {
        KeySchedule {
            #[cfg(feature = "audit-seal")]
            cipher: {
                let record_key = Zeroizing::new(blake3::derive_key(RECORD_KEY_CONTEXT, &key.0));
                let record_key: &[u8; 32] = &record_key;
                XChaCha20Poly1305::new(record_key.into())
            },
            mac_key: Zeroizing::new(blake3::derive_key(ANCHOR_KEY_CONTEXT, &key.0)),
            id: key.id(),
        }
    }

    pub(crate) fn id(&self) -> KeyId {
        self.id
    }

    /// The keyed BLAKE3 MAC of `message` under the anchor subkey.
    pub(crate) fn mac(&self, message: &[u8]) -> [u8; 32] {
        *blake3::keyed_hash(&self.mac_key, message).as_bytes()
    }

    /// Encrypts `buffer` in place and appends the tag.
    #[cfg(feature = "audit-seal")]
    pub(crate) fn seal(
        &self,
        log_id: LogId,
        seq: u64,
        prev: &ChainHash,
        nonce: &Nonce,
        buffer: &mut Vec<u8>,
    ) -> Result<(), SealError> {
        let ad = associated_data(log_id, seq, prev);
        let tag = self
            .cipher
            .encrypt_inout_detached(<&XNonce>::from(nonce), &ad, buffer.as_mut_slice().into())
            .map_err(|_| SealError)?;
        buffer.extend_from_slice(tag.as_slice());
        Ok(())
    }

    /// Decrypts `sealed` (ciphertext ‖ tag) into a new buffer, or fails if
    /// it does not authenticate under this key and associated data.
    #[cfg(feature = "audit-seal")]
    pub(crate) fn open(
        &self,
        log_id: LogId,
        seq: u64,
        prev: &ChainHash,
        nonce: &Nonce,
        sealed: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        let split = sealed.len().checked_sub(TAG_BYTES).ok_or(SealError)?;
        let (ciphertext, tag) = sealed.split_at(split);
        let tag = Tag::try_from(tag).map_err(|_| SealError)?;
        let mut plain = ciphertext.to_vec();
        let ad = associated_data(log_id, seq, prev);
        let opened = self.cipher.decrypt_inout_detached(
            <&XNonce>::from(nonce),
            &ad,
            plain.as_mut_slice().into(),
            &tag,
        );
        match opened {
            Ok(()) => Ok(plain),
            Err(_) => {
                plain.zeroize();
                Err(SealError)
            }
        }
    }
}

/// A payload did not authenticate (or could not be sealed).
#[cfg(feature = "audit-seal")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SealError;

#[cfg(all(test, feature = "audit-seal"))]
mod tests {
    use super::*;

    #[test]
    fn sealed_payloads_open_only_with_the_same_associated_data() {
        let keys = KeySchedule::new(&Key::from_bytes([7; 32]));
        let prev = ChainHash([3; 32]);
        let nonce = [9u8; 24];
        let mut buffer = b"deploy@web-3".to_vec();
        keys.seal(LogId([1; 16]), 4, &prev, &nonce, &mut buffer)
            .unwrap();
        assert_eq!(buffer.len(), 12 + TAG_BYTES);
        let opened = keys
            .open(LogId([1; 16]), 4, &prev, &nonce, &buffer)
            .unwrap();
        assert_eq!(opened, b"deploy@web-3");
        assert!(
            keys.open(LogId([2; 16]), 4, &prev, &nonce, &buffer)
                .is_err()
        );
        assert!(
            keys.open(LogId([1; 16]), 5, &prev, &nonce, &buffer)
                .is_err()
        );
        assert!(
            keys.open(LogId([1; 16]), 4, &ChainHash([0; 32]), &nonce, &buffer)
                .is_err()
        );
        let other = KeySchedule::new(&Key::from_bytes([8; 32]));
        assert!(
            other
                .open(LogId([1; 16]), 4, &prev, &nonce, &buffer)
                .is_err()
        );
        assert!(
            keys.open(LogId([1; 16]), 4, &prev, &nonce, &buffer[..15])
                .is_err()
        );
    }

    #[test]
    fn key_text_is_hex_and_debug_hides_it() {
        let key: Key = format!("  {}\n", "0f".repeat(32)).parse().unwrap();
        assert_eq!(key.0, [0x0f; 32]);
        let shown = format!("{key:?}");
        assert!(shown.starts_with("Key(id "), "{shown}");
        assert!(!shown.contains(&"0f".repeat(4)), "{shown}");
        assert_eq!(key.id(), Key::from_bytes([0x0f; 32]).id());
        assert_ne!(key.id(), Key::from_bytes([0x10; 32]).id());
    }
}
