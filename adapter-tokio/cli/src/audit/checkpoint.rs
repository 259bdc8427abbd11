//! The log as a transparency log: its records, each as stored (frame
//! included), are the leaves of an RFC 6962 tree.
//!
//! * `audit checkpoint LOG --key-file PREFIX.key` prints the log's signed
//!   checkpoint (C2SP `tlog-checkpoint` as a C2SP signed note);
//! * `audit prove LOG --index N | --from M --json` prints an inclusion or
//!   consistency proof for the log's current tree, hashes in base64, as
//!   Go's `sumdb/tlog` `CheckRecord` and `CheckTree` take them;
//! * `audit verify LOG --checkpoint FILE --public-key PREFIX.pub` checks a
//!   checkpoint against the log (see [`Tree`]), in the reading that
//!   verifies it.
//!
//! Every reading verifies the log as `verify` does first: a log that fails
//! is refused with its verdict; a torn tail's cut frame is no leaf.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use spillguard_std::log_leaves;
use spillguard_std::proto::audit::note::{Checkpoint, SignerKey, VerifierKey};
use spillguard_std::proto::audit::tlog::{self, Hash, TreeBuilder};
use spillguard_std::proto::audit::{Key, Verdict, VerifyOptions};

use super::{Failure, open, read_text, usage};

/// The log's leaves, read once: each record's bytes as stored, hashed, to
/// `each` in order (see [`log_leaves`]). Returns the verdict of the same
/// reading; a log that cannot be accepted (changed, malformed, the wrong
/// key) is an error.
pub(super) fn leaves(
    path: &Path,
    key: Option<&Key>,
    each: impl FnMut(Hash),
) -> Result<Verdict, Failure> {
    let file: File = open(path, "", "an audit log")?;
    let verdict = log_leaves(&file, None, VerifyOptions { anchor: None, key }, each)
        .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    match verdict {
        Verdict::Ok { .. } | Verdict::Unanchored { .. } | Verdict::TornTail { .. } => Ok(verdict),
        _ => Err(Failure::Refused(verdict)),
    }
}

/// The sealing key of `--audit-key-file`, if given.
fn audit_key(path: Option<&Path>) -> Result<Option<Key>, Failure> {
    path.map(|path| {
        spillguard_std::KeySource::File(path.to_path_buf())
            .load()
            .map_err(|e| usage(format!("--audit-key-file: {e}")))
    })
    .transpose()
}

/// `audit checkpoint`: the log's tree head, signed by the key of
/// `key_file`, on `out`.
pub(super) fn checkpoint(
    log: &Path,
    key_file: &Path,
    audit_key_file: Option<&Path>,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let text = read_text(key_file, "--key-file ", "a key file")?;
    let signer = SignerKey::parse(&text).map_err(|e| usage(format!("--key-file: {e}")))?;
    let key = audit_key(audit_key_file)?;
    let mut tree = TreeBuilder::default();
    leaves(log, key.as_ref(), |leaf| tree.push(leaf))?;
    let checkpoint = Checkpoint {
        origin: signer.name().to_owned(),
        size: tree.size(),
        root: tree.root(),
    };
    let note = checkpoint
        .sign(&signer)
        .map_err(|e| usage(format!("--key-file: {e}")))?;
    out.write_all(note.as_bytes())?;
    Ok(0)
}

/// Which proof `audit prove` prints.
#[derive(Debug, Clone, Copy)]
pub(super) enum Proof {
    /// The inclusion of record `index`.
    Inclusion(u64),
    /// The consistency of the tree's first `old_size` records.
    Consistency(u64),
}

/// `audit prove`: the proof, as one JSON object, for the log's current
/// tree. Holds one hash per record (32 bytes each).
pub(super) fn prove(
    log: &Path,
    proof: Proof,
    audit_key_file: Option<&Path>,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    if let Proof::Consistency(0) = proof {
        // A tree of no records has nothing to be consistent with: Go's
        // `tlog.CheckTree` refuses such a proof.
        return Err(usage(
            "--from 0: a consistency proof starts from a tree of at least 1 record".into(),
        ));
    }
    let key = audit_key(audit_key_file)?;
    let mut all = Vec::new();
    leaves(log, key.as_ref(), |leaf| all.push(leaf))?;
    let b64 = |h: &Hash| BASE64.encode(h);
    let size = all.len();
    let root = tlog::root(&all);
    let json = match proof {
        Proof::Inclusion(index) => {
            let at = usize::try_from(index).unwrap_or(usize::MAX);
            let path = tlog::inclusion_proof(&all, at).ok_or_else(|| {
                usage(match size {
                    0 => format!("--index {index} is past the tree: the log holds no records"),
                    _ => format!(
                        "--index {index} is past the tree: the log holds {size} records (0 to {})",
                        size - 1
                    ),
                })
            })?;
            serde_json::json!({
                "tree_size": size,
                "root_hash": b64(&root),
                "leaf_index": index,
                "leaf_hash": b64(&all[at]),
                "proof": path.iter().map(b64).collect::<Vec<_>>(),
            })
        }
        Proof::Consistency(old) => {
            let at = usize::try_from(old).unwrap_or(usize::MAX);
            let path = tlog::consistency_proof(&all, at).ok_or_else(|| {
                usage(format!(
                    "--from {old} is larger than the tree: the log holds {size} records"
                ))
            })?;
            serde_json::json!({
                "old_size": old,
                "old_root": b64(&tlog::root(&all[..at])),
                "tree_size": size,
                "root_hash": b64(&root),
                "proof": path.iter().map(b64).collect::<Vec<_>>(),
            })
        }
    };
    writeln!(out, "{json}")?;
    Ok(0)
}

/// What `verify --checkpoint` found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(super) struct CheckpointCheck {
    /// The key's name (the checkpoint's origin).
    pub origin: String,
    /// Records the checkpoint vouches for.
    pub size: u64,
    /// Records in the log now.
    pub records: u64,
    /// Whether the log's first `size` records give the checkpoint's root.
    pub matches: bool,
}

impl CheckpointCheck {
    /// One line for a person.
    pub fn line(&self) -> String {
        match self.matches {
            true => format!(
                "checkpoint: the first {} records match the tree head {} signed; {} appended since",
                self.size,
                self.origin,
                self.records - self.size
            ),
            false if self.records < self.size => format!(
                "checkpoint: {} signed a tree of {} records; the log holds {}: records were removed",
                self.origin, self.size, self.records
            ),
            false => format!(
                "checkpoint: the log's first {} records do not give the tree head {} signed: records were changed",
                self.size, self.origin
            ),
        }
    }
}

/// The checkpoint in `file`, opened with the verifier key in
/// `public_key`: a bad key file is bad input, a checkpoint that does not
/// open (another key, a changed note) a [`Failure::BadCheckpoint`].
pub(super) fn load(file: &Path, public_key: &Path) -> Result<Checkpoint, Failure> {
    let text = read_text(public_key, "--public-key ", "a key file")?;
    let verifier = VerifierKey::parse(&text).map_err(|e| usage(format!("--public-key: {e}")))?;
    let note = read_text(file, "--checkpoint ", "a checkpoint file")?;
    Checkpoint::open(&note, &verifier)
        .map_err(|e| Failure::BadCheckpoint(format!("--checkpoint {}: {e}", file.display())))
}

/// The log's tree as its leaves come, against a signed checkpoint: whether
/// the log's first records give the checkpoint's tree head.
pub(super) struct Tree<'a> {
    checkpoint: &'a Checkpoint,
    tree: TreeBuilder,
    /// The root once the tree holds the checkpoint's records.
    at_size: Option<Hash>,
}

impl<'a> Tree<'a> {
    pub(super) fn new(checkpoint: &'a Checkpoint) -> Self {
        let tree = TreeBuilder::default();
        let at_size = (checkpoint.size == 0).then(|| tree.root());
        Tree {
            checkpoint,
            tree,
            at_size,
        }
    }

    /// Adds the log's next leaf.
    pub(super) fn push(&mut self, leaf: Hash) {
        self.tree.push(leaf);
        if self.tree.size() == self.checkpoint.size {
            self.at_size = Some(self.tree.root());
        }
    }

    /// What the leaves pushed say of the checkpoint (all of the log's:
    /// read to its end, and verified).
    pub(super) fn check(self) -> CheckpointCheck {
        CheckpointCheck {
            origin: self.checkpoint.origin.clone(),
            size: self.checkpoint.size,
            records: self.tree.size(),
            matches: self.at_size == Some(self.checkpoint.root),
        }
    }
}
