//! One reader task per output stream.
//!
//! A reader reads into a 64 KiB buffer and sends it, with the length read,
//! to the owner; the owner feeds the bytes to the core and sends the buffer
//! back for reuse. Each reader makes at most
//! [`BUFFERS_PER_STREAM`](spillguard_std::read_buffers::BUFFERS_PER_STREAM)
//! buffers, so in steady state nothing is allocated per chunk and a slow
//! owner holds the reader back by at most that many chunks (the pipe keeps
//! draining as soon as a buffer returns). End-of-file, and any read error other than
//! `EINTR`, is sent as [`Event::Eof`].
//!
//! Once the owner stops listening (the call finished, or its streams were
//! abandoned), a reader keeps reading and discarding until end-of-file, so a
//! descendant still holding the pipe never blocks on a full pipe.

use futures_lite::{AsyncRead, AsyncReadExt};
use smol::channel::{self, Receiver, Sender, TryRecvError};

use crate::owner::{Event, Pipe};

pub(crate) use spillguard_std::read_buffers::CHUNK_BYTES;
use spillguard_std::read_buffers::{ReadBuffers, bytes_read, drain_buffer};

/// Starts the reader of `pipe` as a detached task; returns where to send
/// its buffers back.
pub(crate) fn start(
    pipe: Pipe,
    source: impl AsyncRead + Unpin + Send + 'static,
    events: Sender<Event>,
) -> Sender<Vec<u8>> {
    let (give_back, free) = channel::unbounded();
    smol::spawn(run(pipe, source, events, free)).detach();
    give_back
}

async fn run(
    pipe: Pipe,
    mut source: impl AsyncRead + Unpin,
    events: Sender<Event>,
    free: Receiver<Vec<u8>>,
) {
    let mut buffers = ReadBuffers::default();
    loop {
        let Some(mut buf) = next_buffer(&free, &mut buffers).await else {
            return discard(source, Vec::new()).await;
        };
        let len = read_some(&mut source, &mut buf).await;
        if len == 0 {
            break;
        }
        if let Err(refused) = events.try_send(Event::Chunk { pipe, buf, len }) {
            let buf = match refused.into_inner() {
                Event::Chunk { buf, .. } => buf,
                _ => Vec::new(),
            };
            return discard(source, buf).await;
        }
    }
    let _ = events.try_send(Event::Eof(pipe));
}

/// A returned buffer, a new one while fewer than the limit exist, or `None`
/// once the owner has stopped listening.
async fn next_buffer(free: &Receiver<Vec<u8>>, buffers: &mut ReadBuffers) -> Option<Vec<u8>> {
    match free.try_recv() {
        Ok(buf) => Some(buf),
        Err(TryRecvError::Closed) => None,
        Err(TryRecvError::Empty) if let Some(buf) = buffers.make() => Some(buf),
        Err(TryRecvError::Empty) => free.recv().await.ok(),
    }
}

/// Bytes read into `buf`; 0 at end-of-file or on an error other than EINTR.
async fn read_some(source: &mut (impl AsyncRead + Unpin), buf: &mut [u8]) -> usize {
    loop {
        if let Some(len) = bytes_read(source.read(buf).await) {
            return len;
        }
    }
}

/// Reads and drops everything until end-of-file: nobody listens any more,
/// but the writer must not block.
async fn discard(mut source: impl AsyncRead + Unpin, buf: Vec<u8>) {
    let mut buf = drain_buffer(buf);
    while read_some(&mut source, &mut buf).await > 0 {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillguard_std::read_buffers::BUFFERS_PER_STREAM;

    use std::collections::HashSet;
    use std::io;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};
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

    impl AsyncRead for Source {
        fn poll_read(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            if self.left.load(Ordering::SeqCst) == 0 {
                return Poll::Ready(Ok(0));
            }
            self.left.fetch_sub(1, Ordering::SeqCst);
            buf.fill(b'x');
            Poll::Ready(Ok(buf.len()))
        }
    }

    #[test]
    fn buffers_are_reused_and_eof_follows_the_last_chunk() {
        smol::block_on(async {
            let (tx, rx) = channel::unbounded();
            let (source, _) = Source::new(100);
            let give_back = start(Pipe::Stderr, source, tx);
            let mut seen = 0;
            let mut distinct = HashSet::new();
            let mut queued = 0;
            loop {
                queued = queued.max(rx.len());
                match rx.recv().await.unwrap() {
                    Event::Chunk { pipe, buf, len } => {
                        assert_eq!(pipe, Pipe::Stderr);
                        seen += len;
                        distinct.insert(buf.as_ptr() as usize);
                        // Refused once the reader has ended.
                        let _ = give_back.try_send(buf);
                    }
                    Event::Eof(Pipe::Stderr) => break,
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert_eq!(seen, 100 * CHUNK_BYTES);
            assert!(distinct.len() <= BUFFERS_PER_STREAM, "{}", distinct.len());
            // The reader never runs ahead by more than its buffers (+ EOF).
            assert!(queued <= BUFFERS_PER_STREAM + 1, "{queued}");
        });
    }

    #[test]
    fn a_reader_nobody_listens_to_drains_to_the_end() {
        smol::block_on(async {
            let (tx, rx) = channel::unbounded();
            let (source, left) = Source::new(1000);
            let give_back = start(Pipe::Stdout, source, tx);
            drop(rx);
            drop(give_back);
            let until = Instant::now() + Duration::from_secs(10);
            while left.load(Ordering::SeqCst) > 0 && Instant::now() < until {
                smol::Timer::after(Duration::from_millis(5)).await;
            }
            assert_eq!(left.load(Ordering::SeqCst), 0);
        });
    }
}
