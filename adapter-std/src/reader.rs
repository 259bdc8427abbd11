//! One reader thread per output stream.
//!
//! A reader reads into one 64 KiB buffer and feeds what it read to the core
//! itself, through the [`SharedCall`]: nothing is sent per chunk and nothing
//! is allocated after the buffer. It wakes the owner only when a chunk left
//! the core with actions to carry out ([`Event::Fed`]), and sends
//! [`Event::Eof`] after its last chunk, at end-of-file or on any read error
//! other than `EINTR`.
//!
//! Once the call stops listening (the call finished, or its streams were
//! abandoned), a reader keeps reading and discarding until end-of-file, so a
//! descendant still holding the pipe never blocks on a full pipe.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use crate::owner::{Event, Pipe};
pub(crate) use crate::read_buffers::CHUNK_BYTES;
use crate::read_buffers::bytes_read;
use crate::shared_call::{Fed, SharedCall};

/// Starts the reader of `pipe`.
pub(crate) fn start(
    pipe: Pipe,
    source: impl Read + Send + 'static,
    call: Arc<SharedCall>,
    events: SyncSender<Event>,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name(format!("spillguard-{}", pipe.as_str()))
        .spawn(move || run(pipe, source, &call, &events))?;
    Ok(())
}

fn run(pipe: Pipe, mut source: impl Read, call: &SharedCall, events: &SyncSender<Event>) {
    let mut buf = vec![0; CHUNK_BYTES];
    loop {
        let len = read_some(&mut source, &mut buf);
        if len == 0 {
            break;
        }
        match call.feed(pipe, &buf[..len]) {
            Fed::Kept => {}
            Fed::WakeOwner => {
                if events.send(Event::Fed(pipe)).is_err() {
                    return discard(source, buf);
                }
            }
            Fed::NotListening => return discard(source, buf),
        }
    }
    let _ = events.send(Event::Eof(pipe));
}

/// Bytes read into `buf`; 0 at end-of-file or on an error other than EINTR.
fn read_some(source: &mut impl Read, buf: &mut [u8]) -> usize {
    loop {
        if let Some(len) = bytes_read(source.read(buf)) {
            return len;
        }
    }
}

/// Reads and drops everything until end-of-file: nobody listens any more,
/// but the writer must not block.
fn discard(mut source: impl Read, mut buf: Vec<u8>) {
    while read_some(&mut source, &mut buf) > 0 {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared_call::tests::dispatched;

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    /// Yields `left` reads of a full buffer, then end-of-file.
    struct Source {
        left: Arc<AtomicUsize>,
    }

    impl Source {
        fn new(chunks: usize) -> (Self, Arc<AtomicUsize>) {
            let left = Arc::new(AtomicUsize::new(chunks));
            (Self { left: left.clone() }, left)
        }
    }

    impl Read for Source {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.left.load(Ordering::SeqCst) == 0 {
                return Ok(0);
            }
            self.left.fetch_sub(1, Ordering::SeqCst);
            buf.fill(b'x');
            Ok(buf.len())
        }
    }

    /// Every event the reader sends, until it ends.
    fn events_of(rx: &mpsc::Receiver<Event>) -> Vec<String> {
        let mut seen = Vec::new();
        while let Ok(event) = rx.recv_timeout(Duration::from_secs(10)) {
            seen.push(format!("{event:?}"));
        }
        seen
    }

    fn stderr_seen(call: &SharedCall) -> u64 {
        call.lock()
            .call
            .stderr()
            .map_or(0, |capture| capture.bytes_seen())
    }

    #[test]
    fn every_chunk_is_fed_and_eof_follows_the_last() {
        let (tx, rx) = mpsc::sync_channel(32);
        let call = Arc::new(dispatched(None, None));
        let (source, left) = Source::new(100);
        start(Pipe::Stderr, source, call.clone(), tx).unwrap();
        assert_eq!(events_of(&rx), ["Eof(Stderr)"]);
        assert_eq!(left.load(Ordering::SeqCst), 0);
        assert_eq!(stderr_seen(&call), 100 * CHUNK_BYTES as u64);
    }

    #[test]
    fn the_owner_is_woken_once_when_the_ceiling_is_crossed() {
        let (tx, rx) = mpsc::sync_channel(32);
        let call = Arc::new(dispatched(Some(3 * CHUNK_BYTES as u64), None));
        let (source, _) = Source::new(10);
        start(Pipe::Stderr, source, call.clone(), tx).unwrap();
        assert_eq!(events_of(&rx), ["Fed(Stderr)", "Eof(Stderr)"]);
        assert_eq!(stderr_seen(&call), 10 * CHUNK_BYTES as u64);
    }

    #[test]
    fn a_reader_nobody_listens_to_drains_to_the_end() {
        let (tx, rx) = mpsc::sync_channel(32);
        let call = Arc::new(dispatched(None, None));
        call.stop_listening();
        let (source, left) = Source::new(1000);
        start(Pipe::Stderr, source, call.clone(), tx).unwrap();
        // The reader drains unheard and sends nothing, not even its end.
        assert_eq!(events_of(&rx), Vec::<String>::new());
        assert_eq!(left.load(Ordering::SeqCst), 0);
        assert_eq!(stderr_seen(&call), 0);
    }
}
