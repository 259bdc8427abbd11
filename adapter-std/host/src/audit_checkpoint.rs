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
//! they were written with and vouched for by the tree's checkpoint signed
//! with the same key: when the log is resumed from that same anchor only
//! what follows it is hashed. When the tree file is missing, was written
//! with another anchor, or does not open under the key (torn, changed,
//! from elsewhere), the log is read once from its start, verified against
//! the anchor as it is read, to rebuild it; records that do not verify are
//! never signed.
//!
//! The checkpoint is written to a temporary file and renamed over, not
//! synced: the log itself is synced before it is written, so a
//! checkpoint never vouches for records a power loss could take back.
//! After a power loss the file may hold an older checkpoint (which still
//! verifies against the log's first records) or, on a file system that
//! does not flush a file renamed over another, nothing, until the next
//! final record. The tree file is overwritten in place. Neither is
//! followed through a symbolic link or opened if it is a FIFO or a
//! device.
//!
//! Nothing that is not the checkpoint's own is overwritten: before the
//! log is opened, the checkpoint file, its temporary file and its tree
//! file must each be missing or a regular file, and the checkpoint and
//! tree files, when they hold anything, must begin as such a file does (a
//! note whose origin is the key's name, a tree file's header line). A
//! file that does not (a key, a log, another key's checkpoint) is refused,
//! not replaced.
//!
//! [`ChainedFileAudit`]: crate::ChainedFileAudit

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use spillguard_core::audit::note::{Checkpoint, SignerKey, VerifierKey};
use spillguard_core::audit::tlog::{self, Hash, TreeBuilder};
use spillguard_core::audit::{Anchor, Key, MAX_BODY_BYTES, Verdict, Verifier, VerifyOptions};

use crate::audit_read::{ReadError, read_log};

/// Signing as the log grows: the
/// [`checkpoint`](crate::ChainedFileOptions::checkpoint) of a log's
/// options.
///
/// ```no_run
/// # use spillguard_host::{ChainedFileAudit, ChainedFileOptions, CheckpointOptions};
/// # use spillguard_host::proto::audit::note::SignerKey;
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

/// The line between a tree file's subtree roots and its signed note.
const TREE_NOTE: &str = "--";

/// The most bytes a tree file is read for: its header, an anchor, 64
/// roots and a note fit in well under this.
const TREE_FILE_MAX: u64 = 16 << 10;

/// Why the checkpoint's tree could not be had at open.
#[derive(Debug)]
pub(crate) enum ResumeFailure {
    /// Reading the log failed.
    Io(io::Error),
    /// The log's records up to its anchored record do not verify against
    /// the anchor: the tree would be signed over records it does not
    /// vouch for.
    Rejected(Verdict),
}

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
    /// The tree of the log's records at open, before opening appends
    /// anything. `read` holds the records opening read and verified, from
    /// the log's byte `read_from`: all of them when that is 0; else from
    /// the record of `anchor` (the anchor the log was resumed from) on.
    /// What comes before it is the tree file's when that was written with
    /// this anchor and its signed note, by this key, names its root; else
    /// it is read from `log` and verified against the anchor (a log of
    /// `key`, sealed or not).
    pub(crate) fn resume(
        options: CheckpointOptions,
        log: &File,
        key: Option<&Key>,
        anchor: Option<&Anchor>,
        read_from: u64,
        read: &[u8],
    ) -> Result<Checkpointer, ResumeFailure> {
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
        // What was read starts with the anchored record: the tree file,
        // written with this anchor, holds it, and so does a reading up to
        // its end.
        let verifier = checkpointer.options.key.verifier();
        if let Some(kept) = read_tree(&tree_path(&checkpointer.options.file), anchor, &verifier) {
            checkpointer.tree = kept;
            checkpointer.push_frames(read, 1);
            return Ok(checkpointer);
        }
        let anchored = if read.is_empty() {
            0
        } else {
            first_frame_len(read)
        };
        let mut tree = TreeBuilder::default();
        let verdict = log_leaves(
            log,
            Some(read_from + anchored),
            VerifyOptions {
                anchor: Some(anchor),
                key,
            },
            |leaf| tree.push(leaf),
        )
        .map_err(ResumeFailure::Io)?;
        match verdict {
            Verdict::Ok { records, .. } if records == anchor.records && tree.size() == records => {}
            verdict => return Err(ResumeFailure::Rejected(verdict)),
        }
        checkpointer.tree = tree;
        checkpointer.push_frames(read, 1);
        Ok(checkpointer)
    }

    /// Pushes the records in `bytes` (whole frames, from a record's first
    /// byte), skipping the first `skip`.
    pub(crate) fn push_frames(&mut self, bytes: &[u8], skip: usize) {
        for leaf in tlog::record_leaves(bytes).skip(skip) {
            self.tree.push(leaf);
        }
    }

    /// The tree's checkpoint, signed.
    fn signed(&self) -> io::Result<String> {
        Checkpoint {
            origin: self.options.key.name().to_owned(),
            size: self.tree.size(),
            root: self.tree.root(),
        }
        .sign(&self.options.key)
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error.to_string()))
    }

    /// Writes the checkpoint of the tree as it is, signed (unless the same
    /// checkpoint was written last), then the tree file tied to `anchor`
    /// (the log's anchor now, when an anchor file is kept). `records` is
    /// the log's count: a tree that does not hold as many leaves is not
    /// signed. The note written, if one was.
    pub(crate) fn write(
        &mut self,
        records: u64,
        anchor: Option<&Anchor>,
    ) -> io::Result<Option<String>> {
        self.check_size(records)?;
        let head = (self.tree.size(), self.tree.root());
        if self.written == Some(head) {
            return Ok(None);
        }
        let note = self.signed()?;
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
        if let Some(anchor) = anchor {
            self.write_tree(records, anchor, Some(&note))?;
        }
        Ok(Some(note))
    }

    fn check_size(&self, records: u64) -> io::Result<()> {
        if self.tree.size() == records {
            return Ok(());
        }
        Err(io::Error::other(format!(
            "the checkpoint's tree holds {} records and the log {records}: not signed",
            self.tree.size()
        )))
    }

    /// Writes the tree file, tied to `anchor` (the log's anchor now, of
    /// `records` records) and vouched for by `note`, the tree's signed
    /// checkpoint (signed here when not given). It is overwritten in
    /// place, on a descriptor kept open: only the next opening reads it,
    /// and one torn or changed does not open under the key and is
    /// rebuilt; and overwriting in place spares a rename per call (which
    /// costs a journal commit on ext4).
    pub(crate) fn write_tree(
        &mut self,
        records: u64,
        anchor: &Anchor,
        note: Option<&str>,
    ) -> io::Result<()> {
        use std::os::unix::fs::FileExt as _;
        self.check_size(records)?;
        let path = tree_path(&self.options.file);
        let fail = |error: io::Error| {
            io::Error::new(
                error.kind(),
                format!("cannot write the tree file {}: {error}", path.display()),
            )
        };
        let signed;
        let note = match note {
            Some(note) => note,
            None => {
                signed = self.signed()?;
                &signed
            }
        };
        let text = tree_text(&self.tree, anchor, note);
        let file = match &mut self.tree_file {
            Some(file) => file,
            none => none.insert(open_regular(&path, false).map_err(fail)?),
        };
        file.write_all_at(text.as_bytes(), 0).map_err(fail)?;
        file.set_len(text.len() as u64).map_err(fail)
    }
}

/// Refuses the files the checkpoint would overwrite that are not its
/// own ([`ChainedFileAudit::open`](crate::audit_log::ChainedFileAudit::open)
/// checks them before it creates or reads anything): the checkpoint
/// file, its temporary file and its tree file must each be missing or
/// a regular file (not a symbolic link, a FIFO, a device or a
/// directory), and the checkpoint and tree files, when they hold
/// anything, must begin as such a file does (a note whose origin is
/// the key's name, a tree file's header): a key, a log or any other
/// file at that path is left as it is.
pub(crate) fn check_files(options: &CheckpointOptions) -> io::Result<()> {
    let mut temp = options.file.file_name().unwrap_or_default().to_os_string();
    temp.push(".tmp");
    let origin = format!("{}\n", options.key.name());
    let tree_head = format!("{TREE_HEADER}\n");
    let files = [
        (options.file.clone(), Some(origin.as_str())),
        (options.file.with_file_name(temp), None),
        (tree_path(&options.file), Some(tree_head.as_str())),
    ];
    for (path, starts) in files {
        let refuse = |what: String| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the checkpoint would overwrite {}: {what}", path.display()),
            )
        };
        // Opened without following a link or waiting on a FIFO, and
        // checked on the descriptor: what is read is what was checked.
        let file = match open_to_read(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return Err(refuse("a symbolic link, not a regular file".into()));
            }
            Err(error) => return Err(error),
        };
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(refuse(format!(
                "{}, not a regular file",
                crate::os::file_kind(meta.file_type())
            )));
        }
        let Some(starts) = starts else { continue };
        let mut head = Vec::with_capacity(starts.len());
        file.take(starts.len() as u64).read_to_end(&mut head)?;
        // A file torn short of its first line is the file's own.
        if !starts.as_bytes().starts_with(&head) {
            return Err(refuse(format!(
                "it holds something other than {}",
                if starts == tree_head {
                    "a checkpoint's tree file".to_owned()
                } else {
                    format!(
                        "a checkpoint signed by {} (a checkpoint of another key is not replaced: remove it to sign with this one)",
                        options.key.name()
                    )
                }
            )));
        }
    }
    Ok(())
}

/// The length of the frame at the start of `bytes`, which holds one.
fn first_frame_len(bytes: &[u8]) -> u64 {
    let len = bytes
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_le_bytes);
    8 + u64::from(len)
}

/// The path of the tree file kept beside the checkpoint `file`.
pub(crate) fn tree_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(".tree");
    PathBuf::from(name)
}

/// `path` opened for writing (truncated when `truncate`), created if
/// missing, refused unless it is a regular file: it does not follow a
/// symbolic link at its end, nor wait on a FIFO.
fn open_regular(path: &Path, truncate: bool) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(truncate)
        .custom_flags(flags.bits() as i32)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// The leaves of the log in `log`, read from its start (through
/// descriptor offsets: appends always go to the end) up to byte `end` or
/// its end, and verified as they are read: each record's bytes as
/// stored, hashed as they come (nothing is kept but the read buffer), to
/// `each` in order, memory that does not grow with the log (a
/// [bounded](Verifier::bounded) verifier). Returns the verdict of that
/// reading, against `options`: when it is not `Ok`, `Unanchored` or
/// `TornTail`, the leaves given are not the log's (stop at the fault);
/// a torn tail's cut frame is no leaf.
pub fn log_leaves(
    log: &File,
    end: Option<u64>,
    options: VerifyOptions<'_>,
    mut each: impl FnMut(Hash),
) -> io::Result<Verdict> {
    // The leaves are the bytes: the records, decoded to be checked, are
    // not queued (their entries would be held a chunk at a time for
    // nothing).
    let mut verifier = Verifier::new(options)
        .bounded(Verifier::WINDOW)
        .without_records();
    let mut leaves = LogLeaves::default();
    let hash = |bytes: &[u8]| leaves.feed(bytes, &mut each);
    match read_log(log, &mut verifier, end, hash, |_| Ok::<(), ()>(())) {
        Ok(_) | Err(ReadError::Record(())) => {}
        Err(ReadError::Input(error)) => return Err(error),
    }
    Ok(verifier.finish())
}

/// A log's leaves, from its bytes as they are read from its start: each
/// record's bytes as stored, hashed as they come, nothing kept. For a
/// reading that verifies the log and also wants its leaves (as
/// [`read_log`]'s hook for the bytes read): what [`log_leaves`] does with
/// a reading of its own. A header that cannot be a frame's stops the
/// leaves (the verifier reading the same bytes names the fault).
#[derive(Debug, Default)]
pub struct LogLeaves {
    frames: FrameLeaves,
    damaged: bool,
}

impl LogLeaves {
    /// Takes `bytes`, the next of the log, giving each leaf they complete
    /// to `each`.
    pub fn feed(&mut self, bytes: &[u8], each: &mut impl FnMut(Hash)) {
        if !self.damaged {
            self.damaged = self.frames.feed(bytes, each).is_err();
        }
    }
}

/// Splits a log's bytes into frames as they come, hashing each as a leaf.
#[derive(Debug, Default)]
struct FrameLeaves {
    /// The frame header read so far.
    header: [u8; 8],
    header_len: usize,
    /// Bytes of the frame left after its header, once it is read.
    left: u64,
    hasher: tlog::LeafHasher,
}

impl FrameLeaves {
    /// Hashes `bytes`, the next of the log, giving each frame completed
    /// to `each`; an error at a header that cannot be a frame's.
    fn feed(&mut self, mut bytes: &[u8], each: &mut impl FnMut(Hash)) -> Result<(), ()> {
        while !bytes.is_empty() {
            if self.header_len < self.header.len() {
                let take = (self.header.len() - self.header_len).min(bytes.len());
                let (head, rest) = bytes.split_at(take);
                self.header[self.header_len..self.header_len + take].copy_from_slice(head);
                self.hasher.update(head);
                self.header_len += take;
                bytes = rest;
                if self.header_len == self.header.len() {
                    let [a, b, c, d, e, f, g, h] = self.header;
                    let len = u32::from_le_bytes([a, b, c, d]);
                    if u32::from_le_bytes([e, f, g, h]) != !len || len == 0 || len > MAX_BODY_BYTES
                    {
                        return Err(());
                    }
                    self.left = u64::from(len);
                }
                continue;
            }
            let take = usize::try_from(self.left)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            let (body, rest) = bytes.split_at(take);
            self.hasher.update(body);
            self.left -= take as u64;
            bytes = rest;
            if self.left == 0 {
                each(self.hasher.finish());
                self.header_len = 0;
            }
        }
        Ok(())
    }
}

/// The tree file's text: its header, the anchor it was written with,
/// one subtree root per line in hex, a `--` line, then the tree's
/// checkpoint as a signed note.
fn tree_text(tree: &TreeBuilder, anchor: &Anchor, note: &str) -> String {
    let mut text = format!("{TREE_HEADER}\n{anchor}\n");
    for root in tree.subtree_roots() {
        for byte in root {
            let _ = write!(text, "{byte:02x}");
        }
        text.push('\n');
    }
    text.push_str(TREE_NOTE);
    text.push('\n');
    text.push_str(note);
    text
}

/// The tree the tree file at `path` keeps, if it was written with
/// `anchor` and its note opens with `verifier` naming the tree's size and
/// root. A file that is not a regular one (a FIFO, a link) is not read.
fn read_tree(path: &Path, anchor: &Anchor, verifier: &VerifierKey) -> Option<TreeBuilder> {
    let file = open_to_read(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(TREE_FILE_MAX).read_to_string(&mut text).ok()?;
    let (body, note) = text.split_once(&format!("\n{TREE_NOTE}\n"))?;
    let mut lines = body.lines();
    if lines.next()? != TREE_HEADER {
        return None;
    }
    let written_with: Anchor = lines.next()?.parse().ok()?;
    if written_with != *anchor {
        return None;
    }
    let roots: Option<Vec<Hash>> = lines.map(parse_hash).collect();
    let tree = TreeBuilder::from_subtree_roots(anchor.records, &roots?)?;
    let signed = Checkpoint::open(note, verifier).ok()?;
    (signed.size == tree.size() && signed.root == tree.root()).then_some(tree)
}

/// `path` opened for reading, without following a symbolic link at its
/// end or waiting on a FIFO.
fn open_to_read(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)
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
    let mut file = open_regular(&temp, true)?;
    file.write_all(bytes)?;
    drop(file);
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillguard_core::audit::{LogEntry, LogId, LogWriter};

    /// Frames split anywhere (a byte at a time, across headers) give the
    /// leaves the whole bytes give; a damaged header stops them.
    #[test]
    fn frames_hashed_as_they_come_are_the_whole_bytes_leaves() {
        let mut writer = LogWriter::create(LogId([9; 16]), None);
        let mut log = Vec::new();
        for i in 0..20 {
            let entry = LogEntry::Opened {
                writer: "w".repeat(i * 37),
            };
            writer.append_to(&entry, None, &mut log).unwrap_or_default();
        }
        let whole: Vec<Hash> = tlog::record_leaves(&log).collect();
        assert_eq!(whole.len(), 20);
        for piece in [1, 3, 7, 8, 64, 1000, log.len()] {
            let mut frames = FrameLeaves::default();
            let mut got = Vec::new();
            for chunk in log.chunks(piece) {
                assert_eq!(frames.feed(chunk, &mut |leaf| got.push(leaf)), Ok(()));
            }
            assert_eq!(got, whole, "pieces of {piece}");
        }
        let mut damaged = log.clone();
        damaged[4] ^= 1;
        let mut frames = FrameLeaves::default();
        let mut got = Vec::new();
        assert_eq!(frames.feed(&damaged, &mut |leaf| got.push(leaf)), Err(()));
        assert!(got.is_empty());
    }
}
