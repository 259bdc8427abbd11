//! Reading a log from a file through a streaming verifier, in fixed
//! chunks, never held whole: [`read_log`].

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use spillguard_core::audit::{Record, Verifier};

/// Bytes read from the log at a time. The verifier queues the records of
/// one chunk until they are drained, so the chunk also bounds that queue:
/// 64 KiB holds a few hundred records.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Why reading the log stopped.
#[derive(Debug)]
pub enum ReadError<E> {
    /// The log could not be read.
    Input(io::Error),
    /// What was done with a record failed.
    Record(E),
}

/// Feeds the log in `file`, from its start, to `verifier` in chunks of
/// [`READ_CHUNK_BYTES`], up to byte `limit` if given, else to its end:
/// each chunk to `bytes` as it is read, and each record the verifier
/// accepts to `each` as it comes. Follows the verifier's
/// [`poll_seek`](Verifier::poll_seek) (a bounded verifier reads part of
/// the log again to name a fault); from then on `bytes` is not called,
/// as what is read again only names the fault. Returns where reading
/// stopped: the log's length, or `limit`.
pub fn read_log<E>(
    mut file: &File,
    verifier: &mut Verifier,
    limit: Option<u64>,
    mut bytes: impl FnMut(&[u8]),
    mut each: impl FnMut(Record) -> Result<(), E>,
) -> Result<u64, ReadError<E>> {
    let mut buffer = vec![0; READ_CHUNK_BYTES];
    file.seek(SeekFrom::Start(0)).map_err(ReadError::Input)?;
    let mut at: u64 = 0;
    let mut read_back = false;
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
        if !read_back {
            bytes(&buffer[..read]);
        }
        at += read as u64;
        while let Some(record) = verifier.poll_record() {
            each(record).map_err(ReadError::Record)?;
        }
        if let Some(offset) = verifier.poll_seek() {
            read_back = true;
            at = file
                .seek(SeekFrom::Start(offset))
                .map_err(ReadError::Input)?;
        }
    }
}
