//! Reading a log from a file through a streaming verifier, in fixed
//! chunks, never held whole: [`read_log`].

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use spillguard_core::audit::{Record, Verifier};

/// Bytes read from the log at a time.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Bytes of a chunk handed to the verifier at a time, its records drained
/// before the next: the verifier queues the records of what it was handed
/// until they are drained, and 8 KiB holds a few dozen records where a
/// whole chunk holds a few hundred.
const FEED_BYTES: usize = 8 * 1024;

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
        if !read_back {
            bytes(&buffer[..read]);
        }
        at += read as u64;
        for slice in buffer[..read].chunks(FEED_BYTES) {
            verifier.handle_bytes(slice);
            while let Some(record) = verifier.poll_record() {
                each(record).map_err(ReadError::Record)?;
            }
            if let Some(offset) = verifier.poll_seek() {
                // The rest of the chunk is not what the verifier asks for.
                read_back = true;
                at = file
                    .seek(SeekFrom::Start(offset))
                    .map_err(ReadError::Input)?;
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use spillguard_core::audit::{
        LogEntry, LogId, LogWriter, TamperKind, Verdict, VerifyOptions, verify,
    };

    use super::*;

    /// A log of `records` records with a copy of record `copied` written
    /// after the first `at`: the bytes, and where the copy starts and ends.
    fn log_with_a_copy(records: usize, copied: usize, at: usize) -> (Vec<u8>, u64, usize) {
        let mut writer = LogWriter::create(LogId([7; 16]), None);
        let frames: Vec<Vec<u8>> = (0..records)
            .map(|n| {
                let entry = LogEntry::Opened {
                    writer: format!("writer {n}"),
                };
                writer.append(&entry, None).expect("an entry encodes")
            })
            .collect();
        let mut bytes = frames[..at].concat();
        let copy_at = bytes.len() as u64;
        bytes.extend(&frames[copied]);
        let copy_end = bytes.len();
        bytes.extend(frames[at..].concat());
        (bytes, copy_at, copy_end)
    }

    /// A copy of a record older than the window, found chunks after it
    /// and followed by more: the reader goes back to the verifier's
    /// checkpoint (mid-chunk), and feeds nothing of the chunk it was in
    /// after the copy; the verdict is the unbounded verifier's, every
    /// record before the copy reaches `each` once, and `bytes` sees the
    /// log once, in order, up to the end of the chunk that holds the copy.
    #[test]
    fn a_recall_reads_from_the_checkpoint_and_names_the_copy() {
        let (log, copy_at, copy_end) = log_with_a_copy(4_000, 123, 3_000);
        assert!(log.len() > 2 * READ_CHUNK_BYTES, "{} bytes", log.len());
        let path = std::env::temp_dir().join(format!(
            "spillguard-read-log-{}-{:?}.log",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, &log).expect("the log is written");
        let file = File::open(&path).expect("the log opens");
        let window = NonZeroUsize::new(100).expect("not zero");
        let mut verifier = Verifier::new(VerifyOptions::default()).bounded(window);
        let mut seen = Vec::new();
        let mut records = 0;
        let end = read_log(
            &file,
            &mut verifier,
            None,
            |bytes| seen.extend_from_slice(bytes),
            |_| {
                records += 1;
                Ok::<(), ()>(())
            },
        )
        .expect("the log reads");
        let _ = std::fs::remove_file(&path);

        assert_eq!(end, log.len() as u64);
        let chunks_read = copy_end.div_ceil(READ_CHUNK_BYTES);
        assert!(chunks_read < log.len() / READ_CHUNK_BYTES, "{chunks_read}");
        assert_eq!(seen.len(), chunks_read * READ_CHUNK_BYTES);
        assert!(log.starts_with(&seen), "the bytes seen are the log's first");
        assert_eq!(records, 3_000);
        let named = Verdict::Tampered {
            record_index: 3_000,
            offset: copy_at,
            kind: TamperKind::Duplicated { of: 123 },
        };
        assert_eq!(verifier.finish(), named);
        assert_eq!(verify(&log, VerifyOptions::default()), named);
    }
}
