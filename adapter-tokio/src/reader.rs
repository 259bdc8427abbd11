//! Reading the helper's output streams, in the owner's own `select!`: no
//! task per stream and no hop per chunk.
//!
//! The owner keeps one 64 KiB buffer per stream and reads whichever stream
//! is ready first (the other read is dropped: a tokio pipe read is
//! cancel-safe, nothing read is lost). A read of 0 is end-of-file, and so
//! is any read error other than `EINTR`. After the call finished, a pipe
//! a descendant still holds is the host's drainer's: one task on the
//! host's runtime ([`TokioOrphans`], the waiting half of
//! [`spillguard_kit::orphans`]) reads and drops what comes, so the
//! descendant never blocks on it.

use std::future;
use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use spillguard_kit::orphans::{AsyncOrphans, Drain, OrphanRuntime};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::runtime::Handle;
use tokio::time::Sleep;

use crate::process::Stream;

pub(crate) use spillguard_kit::read_buffers::CHUNK_BYTES;
use spillguard_kit::read_buffers::bytes_read;

/// Bytes read into `buf`; 0 at end-of-file or on an error other than EINTR.
pub(crate) async fn read_some(source: &mut (impl AsyncRead + Unpin), buf: &mut [u8]) -> usize {
    loop {
        if let Some(len) = bytes_read(source.read(buf).await) {
            return len;
        }
    }
}

/// [`read_some`] of `stream` if it is still open; never ready otherwise.
pub(crate) async fn read_open(stream: &mut Option<Stream>, buf: &mut [u8]) -> usize {
    match stream {
        Some(stream) => read_some(stream, buf).await,
        None => future::pending().await,
    }
}

/// Where a tokio host's drainer runs and how it waits: one task on the
/// host's runtime, each leftover pipe registered with its reactor (as a
/// tokio child pipe, whichever stream it was), read when it is readable,
/// and a `Sleep` on the runtime's clock for the time bound.
#[derive(Debug, Clone)]
pub(crate) struct TokioOrphans(pub(crate) Handle);

impl OrphanRuntime for TokioOrphans {
    fn start(&self, drain: Drain) {
        // Detached; on a runtime shut down, the task is dropped at once.
        drop(self.0.spawn(drain.run::<Self>()));
    }
}

impl AsyncOrphans for TokioOrphans {
    type Pipe = tokio::process::ChildStdout;
    type Timer = Pin<Box<Sleep>>;

    fn now() -> Instant {
        crate::owner::clock()
    }

    fn register(pipe: OwnedFd) -> io::Result<Self::Pipe> {
        tokio::process::ChildStdout::from_std(std::process::ChildStdout::from(pipe))
    }

    fn poll_read(
        pipe: &mut Self::Pipe,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let mut buf = ReadBuf::new(buf);
        ready!(Pin::new(pipe).poll_read(cx, &mut buf))?;
        Poll::Ready(Ok(buf.filled().len()))
    }

    fn timer(at: Instant) -> Self::Timer {
        Box::pin(tokio::time::sleep_until(at.into()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    use std::io;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::Duration;

    use tokio::io::ReadBuf;

    /// Reads: `Interrupted` once, then `chunks` full buffers, then the end.
    struct Source {
        interrupted: bool,
        chunks: usize,
    }

    impl AsyncRead for Source {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if !self.interrupted {
                self.interrupted = true;
                return Poll::Ready(Err(io::ErrorKind::Interrupted.into()));
            }
            if self.chunks > 0 {
                self.chunks -= 1;
                let unfilled = buf.initialize_unfilled();
                unfilled.fill(b'x');
                let len = unfilled.len();
                buf.advance(len);
            }
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_read_retries_eintr_and_ends_at_zero() {
        let mut source = Source {
            interrupted: false,
            chunks: 2,
        };
        let mut buf = vec![0; CHUNK_BYTES];
        assert_eq!(read_some(&mut source, &mut buf).await, CHUNK_BYTES);
        assert_eq!(read_some(&mut source, &mut buf).await, CHUNK_BYTES);
        assert_eq!(read_some(&mut source, &mut buf).await, 0);
    }

    #[tokio::test]
    async fn a_closed_stream_is_never_ready() {
        let (mut closed, mut buf) = (None, vec![0; 16]);
        let read = read_open(&mut closed, &mut buf);
        assert!(
            tokio::time::timeout(Duration::from_millis(20), read)
                .await
                .is_err()
        );
    }
}
