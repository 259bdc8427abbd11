//! One reader thread per output stream.
//!
//! A reader reads into a 64 KiB buffer and sends it, with the length read,
//! to the owner; the owner feeds the bytes to the core and sends the buffer
//! back for reuse. Each reader makes at most
//! [`BUFFERS_PER_STREAM`](crate::read_buffers::BUFFERS_PER_STREAM)
//! buffers, so in steady state nothing is allocated per chunk and a slow
//! owner holds the reader back by at most that many chunks (the pipe keeps
//! draining as soon as a buffer returns). End-of-file, and any read error other than
//! `EINTR`, is sent as [`Event::Eof`].
//!
//! Once the owner stops listening (the call finished, or its streams were
//! abandoned), a reader keeps reading and discarding until end-of-file, so a
//! descendant still holding the pipe never blocks on a full pipe.

use std::io::{self, Read};
use std::sync::mpsc::{self, Receiver, SendError, Sender, SyncSender, TryRecvError};

use crate::owner::{Event, Pipe};

pub(crate) use crate::read_buffers::CHUNK_BYTES;
use crate::read_buffers::{ReadBuffers, bytes_read, drain_buffer};

/// Starts the reader of `pipe`; returns where to send its buffers back.
pub(crate) fn start(
    pipe: Pipe,
    source: impl Read + Send + 'static,
    events: SyncSender<Event>,
) -> io::Result<Sender<Vec<u8>>> {
    let (give_back, free) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("spillguard-{}", pipe.as_str()))
        .spawn(move || run(pipe, source, &events, &free))?;
    Ok(give_back)
}

fn run(pipe: Pipe, mut source: impl Read, events: &SyncSender<Event>, free: &Receiver<Vec<u8>>) {
    let mut buffers = ReadBuffers::default();
    loop {
        let Some(mut buf) = next_buffer(free, &mut buffers) else {
            return discard(source, Vec::new());
        };
        let len = read_some(&mut source, &mut buf);
        if len == 0 {
            break;
        }
        if let Err(SendError(event)) = events.send(Event::Chunk { pipe, buf, len }) {
            return discard(source, event.into_buffer());
        }
    }
    let _ = events.send(Event::Eof(pipe));
}

/// A returned buffer, a new one while fewer than the limit exist, or `None`
/// once the owner has stopped listening.
fn next_buffer(free: &Receiver<Vec<u8>>, buffers: &mut ReadBuffers) -> Option<Vec<u8>> {
    match free.try_recv() {
        Ok(buf) => Some(buf),
        Err(TryRecvError::Disconnected) => None,
        Err(TryRecvError::Empty) if let Some(buf) = buffers.make() => Some(buf),
        Err(TryRecvError::Empty) => free.recv().ok(),
    }
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
fn discard(mut source: impl Read, buf: Vec<u8>) {
    let mut buf = drain_buffer(buf);
    while read_some(&mut source, &mut buf) > 0 {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_buffers::BUFFERS_PER_STREAM;

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

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

    #[test]
    fn buffers_are_reused_and_eof_follows_the_last_chunk() {
        let (tx, rx) = mpsc::sync_channel(32);
        let (source, _) = Source::new(100);
        let give_back = start(Pipe::Stderr, source, tx).unwrap();
        let mut seen = 0;
        let mut distinct = std::collections::HashSet::new();
        loop {
            match rx.recv().unwrap() {
                Event::Chunk { pipe, buf, len } => {
                    assert_eq!(pipe, Pipe::Stderr);
                    seen += len;
                    distinct.insert(buf.as_ptr() as usize);
                    let _ = give_back.send(buf);
                }
                Event::Eof(Pipe::Stderr) => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(seen, 100 * CHUNK_BYTES);
        assert!(distinct.len() <= BUFFERS_PER_STREAM, "{}", distinct.len());
    }

    #[test]
    fn a_reader_nobody_listens_to_drains_to_the_end() {
        let (tx, rx) = mpsc::sync_channel(32);
        let (source, left) = Source::new(1000);
        let give_back = start(Pipe::Stdout, source, tx).unwrap();
        drop(rx);
        drop(give_back);
        let until = Instant::now() + Duration::from_secs(10);
        while left.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(left.load(Ordering::SeqCst), 0);
    }
}
