//! Signed notes (C2SP `signed-note`) and transparency-log checkpoints
//! (C2SP `tlog-checkpoint`), with Ed25519 keys in the text forms Go's
//! `golang.org/x/mod/sumdb/note` reads and writes:
//!
//! * a verifier key is `NAME+HASH+BASE64`, a signer key
//!   `PRIVATE+KEY+NAME+HASH+BASE64`: `HASH` the first four bytes of
//!   SHA-256(NAME ‖ `\n` ‖ 0x01 ‖ public key) in eight hex digits, `BASE64`
//!   the algorithm byte 0x01 and the 32-byte public key or seed;
//! * a signed note is its text (ending in a newline), a blank line, and
//!   one line per signature: `— NAME BASE64(HASH ‖ signature)`;
//! * a checkpoint's text is the log's origin (the key's name), its size
//!   in records and its root hash in base64, one per line.
//!
//! The core draws no randomness: a new key is made from a seed the caller
//! draws ([`SignerKey::from_seed`]).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signer as _, Verifier as _};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::tlog::Hash;

/// The algorithm byte of an Ed25519 key.
const ED25519: u8 = 0x01;

/// Why a key, a note or a checkpoint was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteError(String);

impl fmt::Display for NoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoteError {}

fn error(why: impl Into<String>) -> NoteError {
    NoteError(why.into())
}

/// Whether `name` may name a key: not empty, no `+`, no white space (Go's
/// rule), and none of the control characters a note may not hold (below
/// U+0020): the name is the origin line of the checkpoints the key signs.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('+')
        && !name
            .chars()
            .any(|c| c.is_whitespace() || forbidden_in_note(c))
}

/// A character no note may hold: a control character below U+0020 other
/// than the newline.
fn forbidden_in_note(c: char) -> bool {
    c < '\u{20}' && c != '\n'
}

/// Why a name is refused.
const NAME_RULE: &str = "must be non-empty, without `+`, spaces or control characters";

/// The most signature lines a note may have.
const MAX_SIGNATURES: usize = 100;

/// The key hash of the public key `public` under `name`.
fn key_hash(name: &str, public: &[u8; 32]) -> u32 {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update(b"\n");
    hasher.update([ED25519]);
    hasher.update(public);
    let sum: [u8; 32] = hasher.finalize().into();
    u32::from_be_bytes([sum[0], sum[1], sum[2], sum[3]])
}

/// `NAME+HASH+BASE64` split and checked: the name, the hash, the key
/// bytes after the algorithm byte.
fn parse_key_text(text: &str, what: &str) -> Result<(String, u32, [u8; 32]), NoteError> {
    let mut parts = text.trim().splitn(3, '+');
    let (Some(name), Some(hash), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(error(format!("a {what} key is NAME+HASH+BASE64")));
    };
    if !valid_name(name) {
        return Err(error(format!("a {what} key's name {NAME_RULE}: {name:?}")));
    }
    if hash.len() != 8 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(error(format!(
            "a {what} key's hash is 8 hex digits: {hash:?}"
        )));
    }
    let hash = u32::from_str_radix(hash, 16).map_err(|e| error(e.to_string()))?;
    let bytes = BASE64
        .decode(key)
        .map_err(|e| error(format!("a {what} key's base64 does not decode: {e}")))?;
    match bytes.split_first() {
        Some((&ED25519, rest)) if rest.len() == 32 => {
            let mut key = [0u8; 32];
            key.copy_from_slice(rest);
            Ok((name.to_owned(), hash, key))
        }
        Some((&ED25519, _)) => Err(error(format!(
            "a {what} key holds 32 bytes after its algorithm"
        ))),
        _ => Err(error(format!("a {what} key must be Ed25519 (algorithm 1)"))),
    }
}

/// A key that signs notes (Go's `note.Signer`): its name and Ed25519 seed.
/// `Debug` never shows the seed.
#[derive(Clone)]
pub struct SignerKey {
    name: String,
    key: ed25519_dalek::SigningKey,
}

impl fmt::Debug for SignerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SignerKey({})", self.name)
    }
}

impl SignerKey {
    /// The key named `name` made from `seed` (32 random bytes the caller
    /// draws), as Go's `note.GenerateKey` makes one.
    pub fn from_seed(name: &str, seed: [u8; 32]) -> Result<Self, NoteError> {
        if !valid_name(name) {
            return Err(error(format!("a key's name {NAME_RULE}: {name:?}")));
        }
        Ok(Self {
            name: name.to_owned(),
            key: ed25519_dalek::SigningKey::from_bytes(&seed),
        })
    }

    /// Reads `PRIVATE+KEY+NAME+HASH+BASE64`. A verifier key, another
    /// algorithm, a hash that does not match the key, or a corrupted text
    /// is refused with why.
    pub fn parse(text: &str) -> Result<Self, NoteError> {
        let Some(rest) = text.trim().strip_prefix("PRIVATE+KEY+") else {
            return Err(error(match VerifierKey::parse(text) {
                Ok(_) => {
                    "a verifier key where a signer key (PRIVATE+KEY+NAME+HASH+BASE64) is needed: a verifier key cannot sign; give the .key file"
                }
                Err(_) => "not a signer key: a signer key is PRIVATE+KEY+NAME+HASH+BASE64",
            }));
        };
        let (name, hash, seed) = parse_key_text(rest, "signer")?;
        let seed = Zeroizing::new(seed);
        let key = Self::from_seed(&name, *seed)?;
        if key.hash() != hash {
            return Err(error("the signer key's hash does not match its key"));
        }
        Ok(key)
    }

    /// Its text form, `PRIVATE+KEY+NAME+HASH+BASE64`.
    pub fn to_text(&self) -> Zeroizing<String> {
        let mut bytes = Zeroizing::new(vec![ED25519]);
        bytes.extend_from_slice(self.key.as_bytes());
        Zeroizing::new(format!(
            "PRIVATE+KEY+{}+{:08x}+{}",
            self.name,
            self.hash(),
            BASE64.encode(&*bytes)
        ))
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn hash(&self) -> u32 {
        key_hash(&self.name, self.key.verifying_key().as_bytes())
    }

    /// The verifier key that checks its signatures.
    pub fn verifier(&self) -> VerifierKey {
        VerifierKey {
            name: self.name.clone(),
            key: self.key.verifying_key(),
        }
    }

    /// `text` signed: the note, its text then this key's signature line.
    /// The text must end in a newline and hold no blank line's worth of
    /// signature-like content after it (see [`open`]).
    pub fn sign(&self, text: &str) -> Result<String, NoteError> {
        check_text(text)?;
        let signature = self.key.sign(text.as_bytes());
        let mut line = self.hash().to_be_bytes().to_vec();
        line.extend_from_slice(&signature.to_bytes());
        Ok(format!(
            "{text}\n\u{2014} {} {}\n",
            self.name,
            BASE64.encode(line)
        ))
    }
}

/// A key that checks notes (Go's `note.Verifier`): its name and Ed25519
/// public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifierKey {
    name: String,
    key: ed25519_dalek::VerifyingKey,
}

impl VerifierKey {
    /// Reads `NAME+HASH+BASE64`. A signer key, another algorithm, a hash
    /// that does not match the key, or a corrupted text is refused.
    pub fn parse(text: &str) -> Result<Self, NoteError> {
        if text.trim().starts_with("PRIVATE+") {
            return Err(error(
                "a signer key where a verifier key (NAME+HASH+BASE64) is needed: give the .pub file",
            ));
        }
        let (name, hash, public) = parse_key_text(text, "verifier")?;
        let key = ed25519_dalek::VerifyingKey::from_bytes(&public)
            .map_err(|_| error("the verifier key is not an Ed25519 public key"))?;
        if key_hash(&name, &public) != hash {
            return Err(error("the verifier key's hash does not match its key"));
        }
        Ok(Self { name, key })
    }

    /// Its text form, `NAME+HASH+BASE64`.
    pub fn to_text(&self) -> String {
        let mut bytes = vec![ED25519];
        bytes.extend_from_slice(self.key.as_bytes());
        format!(
            "{}+{:08x}+{}",
            self.name,
            key_hash(&self.name, self.key.as_bytes()),
            BASE64.encode(bytes)
        )
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A note's text: not empty, ending in a newline, every line valid.
fn check_text(text: &str) -> Result<(), NoteError> {
    if !text.ends_with('\n') {
        return Err(error("a note's text ends in a newline"));
    }
    if text.chars().any(forbidden_in_note) {
        return Err(error(
            "a note's text holds no control character but newlines",
        ));
    }
    Ok(())
}

/// The text of `note` if `verifier` signed it: the note is split at its
/// last blank line, and one of the signature lines after it is this
/// key's (its name and key hash) and verifies. Signatures by other keys
/// are passed over, as Go's `note.Open` does with unknown keys.
pub fn open<'a>(note: &'a str, verifier: &VerifierKey) -> Result<&'a str, NoteError> {
    if note.chars().any(forbidden_in_note) {
        return Err(error(
            "not a signed note: it holds a control character other than newlines",
        ));
    }
    let split = note
        .rfind("\n\n")
        .ok_or_else(|| error("not a signed note: no blank line before its signatures"))?;
    let (text, signatures) = (&note[..=split], &note[split + 2..]);
    let Some(signatures) = signatures.strip_suffix('\n') else {
        return Err(error("not a signed note: no signature line"));
    };
    // Every signature line is read before any is checked, as Go's
    // `note.Open` does: one malformed line, or more than 100, refuses the
    // note.
    let mut lines = Vec::new();
    for line in signatures.split('\n') {
        let malformed = || error(format!("not a signature line: {line:?}"));
        let rest = line.strip_prefix("\u{2014} ").ok_or_else(malformed)?;
        let (name, encoded) = rest.split_once(' ').ok_or_else(malformed)?;
        let bytes = BASE64
            .decode(encoded)
            .map_err(|_| error(format!("a signature does not decode: {line:?}")))?;
        if !valid_name(name) || bytes.len() < 5 {
            return Err(malformed());
        }
        lines.push((name, bytes));
        if lines.len() > MAX_SIGNATURES {
            return Err(error(format!(
                "not a signed note: more than {MAX_SIGNATURES} signatures"
            )));
        }
    }
    // The key's first signature decides (later ones by it are passed
    // over, as are other keys').
    let hash = key_hash(&verifier.name, verifier.key.as_bytes());
    let Some((_, bytes)) = (lines.into_iter())
        .find(|(name, bytes)| *name == verifier.name && bytes[..4] == hash.to_be_bytes())
    else {
        return Err(error(format!(
            "the note is not signed by {}",
            verifier.name
        )));
    };
    let verified = ed25519_dalek::Signature::from_slice(&bytes[4..])
        .is_ok_and(|signature| verifier.key.verify(text.as_bytes(), &signature).is_ok());
    if !verified {
        return Err(error(format!(
            "the signature by {} does not verify: the note was changed",
            verifier.name
        )));
    }
    // The text ends in a newline (the blank line's first) and the whole
    // note was checked for control characters above.
    Ok(text)
}

/// A transparency-log checkpoint: the log's origin, its size in records
/// and the root hash of the tree over them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's origin: here, the signing key's name.
    pub origin: String,
    /// How many records (leaves) the tree holds.
    pub size: u64,
    /// The tree's root hash.
    pub root: Hash,
}

impl Checkpoint {
    /// Its text: origin, size and base64 root, one per line.
    pub fn to_text(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            BASE64.encode(self.root)
        )
    }

    /// Reads a checkpoint's text (extension lines after the third are
    /// allowed and ignored).
    pub fn parse(text: &str) -> Result<Self, NoteError> {
        let mut lines = text.lines();
        let (Some(origin), Some(size), Some(root)) = (lines.next(), lines.next(), lines.next())
        else {
            return Err(error("a checkpoint has an origin, a size and a root hash"));
        };
        if origin.is_empty() {
            return Err(error("a checkpoint's origin is empty"));
        }
        // Written as Go's `tlog.ParseTree` reads it: digits only, no
        // leading zero.
        let canonical =
            size.bytes().all(|b| b.is_ascii_digit()) && (size == "0" || !size.starts_with('0'));
        let size = (size.parse::<u64>().ok())
            .filter(|&n| canonical && i64::try_from(n).is_ok())
            .ok_or_else(|| {
                error(format!(
                    "a checkpoint's size is a number in decimal digits: {size:?}"
                ))
            })?;
        let bytes = BASE64.decode(root).map_err(|_| {
            error(format!(
                "a checkpoint's root hash does not decode: {root:?}"
            ))
        })?;
        let root: Hash = bytes
            .try_into()
            .map_err(|_| error("a checkpoint's root hash is 32 bytes"))?;
        Ok(Self {
            origin: origin.to_owned(),
            size,
            root,
        })
    }

    /// The checkpoint signed by `key` (its origin must be the key's name).
    pub fn sign(&self, key: &SignerKey) -> Result<String, NoteError> {
        key.sign(&self.to_text())
    }

    /// The checkpoint of signed note `note` if `verifier` signed it and its
    /// origin is the key's name.
    pub fn open(note: &str, verifier: &VerifierKey) -> Result<Self, NoteError> {
        let checkpoint = Self::parse(open(note, verifier)?)?;
        if checkpoint.origin != verifier.name {
            return Err(error(format!(
                "the checkpoint's origin {:?} is not the key's name {:?}",
                checkpoint.origin, verifier.name
            )));
        }
        Ok(checkpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, byte: u8) -> SignerKey {
        SignerKey::from_seed(name, [byte; 32]).unwrap()
    }

    #[test]
    fn keys_read_back_as_written_and_refuse_the_other_kind() {
        let signer = key("audit.example", 7);
        let text = signer.to_text();
        assert!(text.starts_with("PRIVATE+KEY+audit.example+"));
        let back = SignerKey::parse(&text).unwrap();
        assert_eq!(back.verifier(), signer.verifier());
        let public = signer.verifier().to_text();
        assert_eq!(VerifierKey::parse(&public).unwrap(), signer.verifier());
        assert!(
            SignerKey::parse(&public)
                .unwrap_err()
                .0
                .contains("verifier key cannot sign")
        );
        assert!(
            VerifierKey::parse(&text)
                .unwrap_err()
                .0
                .contains("give the .pub file")
        );
        // A hash that does not match, a corrupted base64, a bad name.
        let (head, tail) = public.rsplit_once('+').unwrap();
        let wrong_hash = format!("audit.example+00000000+{tail}");
        assert!(
            VerifierKey::parse(&wrong_hash)
                .unwrap_err()
                .0
                .contains("hash")
        );
        assert!(
            VerifierKey::parse(&format!("{head}+!!!"))
                .unwrap_err()
                .0
                .contains("base64")
        );
        assert!(SignerKey::from_seed("a b", [1; 32]).is_err());
        assert!(SignerKey::from_seed("a+b", [1; 32]).is_err());
        assert!(SignerKey::from_seed("", [1; 32]).is_err());
        // Control characters would make an origin line no note may hold.
        for name in ["ctl\u{1}name", "tab\tname", "nbsp\u{a0}"] {
            assert!(SignerKey::from_seed(name, [1; 32]).is_err(), "{name:?}");
        }
        // Go's names may hold DEL and C1 characters, and notes may too.
        let del = key("del\u{7f}c1\u{80}", 3);
        let note = del.sign("del\u{7f}\n").unwrap();
        assert_eq!(open(&note, &del.verifier()).unwrap(), "del\u{7f}\n");
        // A file that is neither kind of key.
        assert!(
            SignerKey::parse("")
                .unwrap_err()
                .0
                .starts_with("not a signer key")
        );
    }

    #[test]
    fn a_note_with_any_malformed_signature_line_or_size_is_refused() {
        let signer = key("audit.example", 9);
        let checkpoint = Checkpoint {
            origin: "audit.example".into(),
            size: 42,
            root: [0xab; 32],
        };
        let note = checkpoint.sign(&signer).unwrap();
        let verifier = signer.verifier();
        // Another key's well-formed signature after ours is passed over.
        let cosigned = format!(
            "{note}{}",
            checkpoint
                .sign(&key("audit.example", 10))
                .unwrap()
                .rsplit_once("\n\n")
                .unwrap()
                .1
        );
        assert_eq!(Checkpoint::open(&cosigned, &verifier).unwrap(), checkpoint);
        for bad in [
            "\u{2014} junk notbase64!!\n",
            "\u{2014} junk AAAA\n",
            "- audit.example AAAAAAAA\n",
            "\u{2014} bad+name AAAAAAAA\n",
        ] {
            let refused = Checkpoint::open(&format!("{note}{bad}"), &verifier).unwrap_err();
            assert!(refused.0.contains("signature"), "{bad:?}: {refused}");
        }
        // A CR before a signature line's end, more than 100 signatures, and
        // the key's first signature changed before a good one.
        let crlf = format!("{}\r\n", note.trim_end());
        assert!(Checkpoint::open(&crlf, &verifier).is_err());
        let (text, ours) = note.split_once("\n\n").unwrap();
        let others: String = (0..100)
            .map(|i| {
                let other = key("audit.example", i);
                checkpoint
                    .sign(&other)
                    .unwrap()
                    .rsplit_once("\n\n")
                    .unwrap()
                    .1
                    .to_owned()
            })
            .collect();
        let crowded = format!("{text}\n\n{others}{ours}");
        assert!(
            Checkpoint::open(&crowded, &verifier)
                .unwrap_err()
                .0
                .contains("more than 100 signatures")
        );
        let encoded = ours.trim_end().rsplit_once(' ').unwrap().1;
        let mut bytes = BASE64.decode(encoded).unwrap();
        bytes[10] ^= 1;
        let bad = format!("\u{2014} audit.example {}\n", BASE64.encode(bytes));
        let first_bad = format!("{text}\n\n{bad}{ours}");
        assert!(
            Checkpoint::open(&first_bad, &verifier)
                .unwrap_err()
                .0
                .contains("does not verify")
        );
        for size in ["042", "+42", " 42", "42 ", "", "9223372036854775808"] {
            let text = format!("audit.example\n{size}\n{}\n", BASE64.encode([0xab; 32]));
            let note = signer.sign(&text).unwrap();
            assert!(
                Checkpoint::open(&note, &verifier)
                    .unwrap_err()
                    .0
                    .contains("decimal digits"),
                "{size:?}"
            );
        }
    }

    #[test]
    fn a_signed_checkpoint_opens_with_its_key_only_and_unchanged() {
        let signer = key("audit.example", 9);
        let checkpoint = Checkpoint {
            origin: "audit.example".into(),
            size: 1000,
            root: [0xab; 32],
        };
        let note = checkpoint.sign(&signer).unwrap();
        assert!(note.starts_with("audit.example\n1000\nq6ur"));
        assert!(note.contains("\n\n\u{2014} audit.example "));
        assert_eq!(
            Checkpoint::open(&note, &signer.verifier()).unwrap(),
            checkpoint
        );
        let other = key("audit.example", 10).verifier();
        assert!(
            Checkpoint::open(&note, &other)
                .unwrap_err()
                .0
                .contains("not signed by")
        );
        let changed = note.replacen("1000", "1001", 1);
        assert!(
            Checkpoint::open(&changed, &signer.verifier())
                .unwrap_err()
                .0
                .contains("does not verify")
        );
    }
}
