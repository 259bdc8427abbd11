//! One reader task per output stream.
//!
//! A reader reads into a 64 KiB buffer and sends it, with the length read,
//! to the owner; the owner feeds the bytes to the core and sends the buffer
//! back for reuse. Each reader makes at most
//! [`BUFFERS_PER_STREAM`](spillguard_std::read_buffers::BUFFERS_PER_STREAM)
//! buffers, so in steady state nothing is allocated per chunk and a slow
//! owner holds the reader back by at most that many chunks (the pipe keeps
//! draining as soon as a buffer returns). End-of-file, and any read error other than
//! `EINTR`, is sent as [`Event::Eof`]. Nothing here reads to the end into
//! memory: a flood costs at most four buffers.
//!
//! Once the owner stops listening (the call finished, or its streams were
//! abandoned), a reader keeps reading and discarding until end-of-file, so a
//! descendant still holding the pipe never blocks on a full pipe.

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc::error::{SendError, TryRecvError};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use crate::owner::{Event, Pipe};

pub(crate) use spillguard_std::read_buffers::CHUNK_BYTES;
use spillguard_std::read_buffers::{ReadBuffers, bytes_read, drain_buffer};

/// Starts the reader of `pipe` on the current runtime; returns where to
/// send its buffers back.
pub(crate) fn start(
    pipe: Pipe,
    source: impl AsyncRead + Unpin + Send + 'static,
    events: UnboundedSender<Event>,
) -> UnboundedSender<Vec<u8>> {
    let (give_back, free) = mpsc::unbounded_channel();
    tokio::spawn(run(pipe, source, events, free));
    give_back
}

async fn run(
    pipe: Pipe,
    mut source: impl AsyncRead + Unpin,
    events: UnboundedSender<Event>,
    mut free: UnboundedReceiver<Vec<u8>>,
) {
    let mut buffers = ReadBuffers::default();
    loop {
        let Some(mut buf) = next_buffer(&mut free, &mut buffers).await else {
            return discard(source, Vec::new()).await;
        };
        let len = read_some(&mut source, &mut buf).await;
        if len == 0 {
            break;
        }
        if let Err(SendError(event)) = events.send(Event::Chunk { pipe, buf, len }) {
            return discard(source, event.into_buffer()).await;
        }
    }
    let _ = events.send(Event::Eof(pipe));
}

/// A returned buffer, a new one while fewer than the limit exist, or `None`
/// once the owner has stopped listening.
async fn next_buffer(
    free: &mut UnboundedReceiver<Vec<u8>>,
    buffers: &mut ReadBuffers,
) -> Option<Vec<u8>> {
    match free.try_recv() {
        Ok(buf) => Some(buf),
        Err(TryRecvError::Disconnected) => None,
        Err(TryRecvError::Empty) if let Some(buf) = buffers.make() => Some(buf),
        Err(TryRecvError::Empty) => free.recv().await,
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
    #![allow(clippy::unwrap_used)]

    use super::*;
    use spillguard_std::read_buffers::BUFFERS_PER_STREAM;

    use std::collections::HashSet;
    use std::io;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};
    use std::time::Duration;

    use tokio::io::ReadBuf;

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
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if self.left.load(Ordering::SeqCst) > 0 {
                self.left.fetch_sub(1, Ordering::SeqCst);
                let unfilled = buf.initialize_unfilled();
                unfilled.fill(b'x');
                let len = unfilled.len();
                buf.advance(len);
            }
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn buffers_are_reused_and_eof_follows_the_last_chunk() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (source, _) = Source::new(100);
        let give_back = start(Pipe::Stderr, source, tx);
        let mut seen = 0;
        let mut distinct = HashSet::new();
        loop {
            match rx.recv().await.unwrap() {
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

    #[tokio::test]
    async fn a_reader_nobody_listens_to_drains_to_the_end() {
        let (tx, rx) = mpsc::unbounded_channel();
        let (source, left) = Source::new(1000);
        let give_back = start(Pipe::Stdout, source, tx);
        drop(rx);
        drop(give_back);
        tokio::time::timeout(Duration::from_secs(10), async {
            while left.load(Ordering::SeqCst) > 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        assert_eq!(left.load(Ordering::SeqCst), 0);
    }
}
