//! What `audit` reads: regular files only, opened without blocking, and
//! the log fed to the core in fixed chunks, never held whole.

use std::fs::{File, Metadata};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use spillguard_std::proto::audit::{Record, Verifier};

/// Bytes read from the log at a time. The verifier queues the records of
/// one chunk until they are drained, so the chunk also bounds that queue:
/// 64 KiB holds a few hundred records.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Why a file was not opened.
#[derive(Debug)]
pub enum OpenError {
    /// It could not be looked at or opened.
    Io(io::Error),
    /// It is not a regular file: what it is (`a directory`, …).
    NotRegular(&'static str),
}

/// Opens `path` for reading if it is a regular file (a symbolic link is
/// followed). Its kind is checked before it is opened and again, with
/// `fstat`, on what was opened; it is opened with `O_NONBLOCK`, so that a
/// FIFO put there in between cannot block the open. A device, a FIFO or
/// a socket is never read: `/dev/zero` never ends, a FIFO waits for a
/// writer.
pub fn open_regular(path: &Path) -> Result<File, OpenError> {
    let not_regular = |metadata: &Metadata| match metadata.is_file() {
        true => Ok(()),
        false => Err(OpenError::NotRegular(spillguard_std::os::file_kind(
            metadata.file_type(),
        ))),
    };
    not_regular(&std::fs::metadata(path).map_err(OpenError::Io)?)?;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty())
        .map_err(|errno| OpenError::Io(errno.into()))?;
    let file = File::from(fd);
    not_regular(&file.metadata().map_err(OpenError::Io)?)?;
    Ok(file)
}

/// Why reading the log stopped.
#[derive(Debug)]
pub enum ReadError<E> {
    /// The log could not be read.
    Input(io::Error),
    /// What was done with a record failed.
    Record(E),
}

/// Feeds the log in `file`, from its start, to `verifier` in chunks of
/// [`CHUNK_BYTES`], up to byte `limit` if given, else to its end, and
/// hands each record it accepts to `each` as it comes. Follows the
/// verifier's [`poll_seek`](Verifier::poll_seek) (a bounded verifier
/// reads part of the log again to name a fault). Returns where reading
/// stopped: the log's length, or `limit`.
pub fn read_log<E>(
    file: &mut File,
    verifier: &mut Verifier,
    limit: Option<u64>,
    mut each: impl FnMut(Record) -> Result<(), E>,
) -> Result<u64, ReadError<E>> {
    let mut buffer = vec![0; CHUNK_BYTES];
    file.seek(SeekFrom::Start(0)).map_err(ReadError::Input)?;
    let mut at: u64 = 0;
    loop {
        let room = match limit {
            Some(limit) => usize::try_from(limit.saturating_sub(at))
                .unwrap_or(usize::MAX)
                .min(buffer.len()),
            None => buffer.len(),
        };
        if room == 0 {
            return Ok(at);
        }
        let read = match file.read(&mut buffer[..room]) {
            Ok(0) => return Ok(at),
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(ReadError::Input(error)),
        };
        verifier.handle_bytes(&buffer[..read]);
        at += read as u64;
        while let Some(record) = verifier.poll_record() {
            each(record).map_err(ReadError::Record)?;
        }
        if let Some(offset) = verifier.poll_seek() {
            at = file
                .seek(SeekFrom::Start(offset))
                .map_err(ReadError::Input)?;
        }
    }
}
