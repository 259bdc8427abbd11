//! A signed checkpoint kept beside a [`ChainedFileAudit`] as it grows:
//! [`CheckpointOptions`].
//!
//! The log's records, each as stored, are the leaves of an RFC 6962 tree
//! (the core's [`tlog`]). The writer keeps the tree's complete subtrees
//! (one hash per bit of its size), pushes each frame it appends or reads
//! from other writers, and after each final record writes
//! the tree head signed as a C2SP signed note, the form
//! `spillguard audit checkpoint` prints and `audit verify --checkpoint`
//! and Go's `sumdb/note` check.
//!
//! So that opening does not read the whole log again, the subtrees are
//! kept beside the checkpoint in `<checkpoint>.tree`, tied to the anchor
//! they were written with: when the log is resumed from that same anchor
//! only what follows it is hashed. When the tree file is missing, or was
//! written with another anchor (a crash between the two, a file from
//! elsewhere), the log is read once from its start to rebuild it.
//!
//! The checkpoint is written to a temporary file and renamed over, not
//! synced: the log itself is synced before it is written, so a
//! checkpoint never vouches for records a power loss could take back,
//! and after a power loss the checkpoint may be an older one, which still
//! verifies against the log's first records. The tree file is overwritten
//! in place and ends with a check line: one torn or changed is rebuilt.
//!
//! [`ChainedFileAudit`]: crate::ChainedFileAudit

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use spillguard_core::audit::Anchor;
use spillguard_core::audit::note::{Checkpoint, SignerKey};
use spillguard_core::audit::tlog::{self, Hash, TreeBuilder};

/// Signing as the log grows: the
/// [`checkpoint`](crate::ChainedFileOptions::checkpoint) of a log's
/// options.
///
/// ```no_run
/// use spillguard_host::{ChainedFileAudit, ChainedFileOptions, CheckpointOptions};
/// use spillguard_host::proto::audit::note::SignerKey;
///
/// let key = SignerKey::parse(&std::fs::read_to_string("audit.key")?)?;
/// let log = ChainedFileAudit::open(
///     "calls.log",
///     ChainedFileOptions {
///         anchor_file: Some("calls.anchor".into()),
///         checkpoint: Some(CheckpointOptions::new(key, "calls.checkpoint")),
///         ..ChainedFileOptions::default()
///     },
/// )?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct CheckpointOptions {
    /// The signer; its name is the checkpoint's origin line.
    pub key: SignerKey,
    /// The checkpoint file, rewritten after each final record. Its tree
    /// file is this path with `.tree` added.
    pub file: PathBuf,
}

impl CheckpointOptions {
    /// Signs with `key` into `file`.
    pub fn new(key: SignerKey, file: impl Into<PathBuf>) -> Self {
        Self {
            key,
            file: file.into(),
        }
    }
}

/// The first line of a tree file.
const TREE_HEADER: &str = "spillguard-tree-1";

/// The tree of a log being written, and where its checkpoint goes.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    options: CheckpointOptions,
    tree: TreeBuilder,
    /// The checkpoint last written, to skip writing the same again.
    written: Option<(u64, Hash)>,
    /// The tree file, once written.
    tree_file: Option<File>,
}

impl Checkpointer {
    /// The tree of the log's records at open. `read` holds the records
    /// opening read and verified, from the log's byte `read_from`: all of
    /// them when that is 0; else from the record of `anchor` (the anchor
    /// the log was resumed from) on, and what comes before is the tree
    /// file's when it was written with that anchor, else read from `log`.
    pub(crate) fn resume(
        options: CheckpointOptions,
        log: &File,
        anchor: Option<&Anchor>,
        read_from: u64,
        read: &[u8],
    ) -> io::Result<Checkpointer> {
        let mut checkpointer = Checkpointer {
            tree: TreeBuilder::default(),
            options,
            written: None,
            tree_file: None,
        };
        let anchor = match anchor {
            Some(anchor) if read_from > 0 => anchor,
            _ => {
                checkpointer.push_frames(read, 0);
                return Ok(checkpointer);
            }
        };
        // The tree file, written with this anchor, holds the anchored
        // record: what was read starts with it.
        if let Some(kept) = read_tree(&tree_path(&checkpointer.options.file), anchor) {
            checkpointer.tree = kept;
            checkpointer.push_frames(read, 1);
            return Ok(checkpointer);
        }
        checkpointer.tree = leaves_before(log, read_from)?;
        if checkpointer.tree.size() + 1 != anchor.records {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the log holds {} records before its anchored record, and its anchor says {}",
                    checkpointer.tree.size(),
                    anchor.records.saturating_sub(1)
                ),
            ));
        }
        checkpointer.push_frames(read, 0);
        Ok(checkpointer)
    }

    /// Pushes the records in `bytes` (whole frames, from a record's first
    /// byte), skipping the first `skip`.
    pub(crate) fn push_frames(&mut self, bytes: &[u8], skip: usize) {
        for leaf in tlog::record_leaves(bytes).skip(skip) {
            self.tree.push(leaf);
        }
    }

    /// Writes the checkpoint of the tree as it is, signed (unless the same
    /// checkpoint was written last), then the tree file tied to `anchor`
    /// (the log's anchor now, when an anchor file is kept). `records` is
    /// the log's count: a tree that does not hold as many leaves is not
    /// signed.
    pub(crate) fn write(&mut self, records: u64, anchor: Option<&Anchor>) -> io::Result<()> {
        if self.tree.size() != records {
            return Err(io::Error::other(format!(
                "the checkpoint's tree holds {} records and the log {records}: not signed",
                self.tree.size()
            )));
        }
        let head = (self.tree.size(), self.tree.root());
        if self.written == Some(head) {
            return Ok(());
        }
        let checkpoint = Checkpoint {
            origin: self.options.key.name().to_owned(),
            size: head.0,
            root: head.1,
        };
        let note = checkpoint
            .sign(&self.options.key)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error.to_string()))?;
        replace(&self.options.file, note.as_bytes()).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!(
                    "cannot write the checkpoint {}: {error}",
                    self.options.file.display()
                ),
            )
        })?;
        self.written = Some(head);
        match anchor {
            Some(anchor) => self.write_tree(records, anchor),
            None => Ok(()),
        }
    }

    /// Writes the tree file, tied to `anchor` (the log's anchor now, of
    /// `records` records), in place on a descriptor kept open: it is read
    /// only by the next opening, which checks its check line, so a torn
    /// write costs a rebuild, never a wrong tree; and overwriting in place
    /// spares a rename per call (which costs a flush on ext4).
    pub(crate) fn write_tree(&mut self, records: u64, anchor: &Anchor) -> io::Result<()> {
        use std::os::unix::fs::FileExt as _;
        if self.tree.size() != records {
            return Err(io::Error::other(format!(
                "the checkpoint's tree holds {} records and the log {records}",
                self.tree.size()
            )));
        }
        let path = tree_path(&self.options.file);
        let fail = |error: io::Error| {
            io::Error::new(
                error.kind(),
                format!("cannot write the tree file {}: {error}", path.display()),
            )
        };
        let file = match &mut self.tree_file {
            Some(file) => file,
            none => none.insert(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&path)
                    .map_err(fail)?,
            ),
        };
        let text = tree_text(&self.tree, anchor);
        file.write_all_at(text.as_bytes(), 0).map_err(fail)?;
        file.set_len(text.len() as u64).map_err(fail)
    }
}

/// The path of the tree file kept beside the checkpoint `file`.
pub(crate) fn tree_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(".tree");
    PathBuf::from(name)
}

/// The tree of the log's records in its first `end` bytes, read from the
/// start in chunks (memory that does not grow with the log).
fn leaves_before(log: &File, end: u64) -> io::Result<TreeBuilder> {
    let mut reader = BufReader::with_capacity(1 << 20, positioned(log)?.take(end));
    let mut tree = TreeBuilder::default();
    let mut frame = Vec::new();
    loop {
        let mut header = [0u8; 8];
        match reader.read_exact(&mut header) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(tree),
            Err(error) => return Err(error),
        }
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let check = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        if check != !len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a frame header before the anchor is damaged",
            ));
        }
        frame.clear();
        frame.extend_from_slice(&header);
        frame.resize(8 + len as usize, 0);
        reader.read_exact(&mut frame[8..])?;
        tree.push(tlog::leaf_hash(&frame));
    }
}

/// `log` read from its first byte. Reads follow the descriptor's
/// offset; appends always go to the end.
fn positioned(log: &File) -> io::Result<&File> {
    use std::io::Seek as _;
    let mut file = log;
    file.seek(io::SeekFrom::Start(0))?;
    Ok(file)
}

/// The tree file's text: its header, the anchor it was written with,
/// one subtree root per line in hex, then a check line: `check` and the
/// hex of an RFC 6962 leaf hash over all that precedes it.
fn tree_text(tree: &TreeBuilder, anchor: &Anchor) -> String {
    let mut text = format!("{TREE_HEADER}\n{anchor}\n");
    for root in tree.subtree_roots() {
        push_hex(&mut text, root);
        text.push('\n');
    }
    let check = tlog::leaf_hash(text.as_bytes());
    text.push_str("check ");
    push_hex(&mut text, &check);
    text.push('\n');
    text
}

fn push_hex(text: &mut String, hash: &Hash) {
    for byte in hash {
        let _ = write!(text, "{byte:02x}");
    }
}

/// The tree the tree file at `path` keeps, if it is whole (its check line
/// matches) and was written with `anchor`.
fn read_tree(path: &Path, anchor: &Anchor) -> Option<TreeBuilder> {
    let text = std::fs::read_to_string(path).ok()?;
    let body_end = text.rfind("check ")?;
    let (body, check) = text.split_at(body_end);
    let check = parse_hash(check.strip_prefix("check ")?.trim_end())?;
    if check != tlog::leaf_hash(body.as_bytes()) {
        return None;
    }
    let mut lines = body.lines();
    if lines.next()? != TREE_HEADER {
        return None;
    }
    let written_with: Anchor = lines.next()?.parse().ok()?;
    if written_with != *anchor {
        return None;
    }
    let roots: Option<Vec<Hash>> = lines.map(parse_hash).collect();
    TreeBuilder::from_subtree_roots(anchor.records, &roots?)
}

fn parse_hash(line: &str) -> Option<Hash> {
    let bytes = line.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut hash = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        hash[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(hash)
}

/// Writes `bytes` to `path` through a temporary file beside it, renamed
/// over it.
fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let temp = path.with_file_name(name);
    let mut file = File::create(&temp)?;
    file.write_all(bytes)?;
    drop(file);
    std::fs::rename(&temp, path)
}
