//! Reading the helper's output streams, in the owner's own `select!`: no
//! task per stream and no hop per chunk.
//!
//! The owner keeps one 64 KiB buffer per stream and reads whichever stream
//! is ready first (the other read is dropped: a tokio pipe read is
//! cancel-safe, nothing read is lost). A read of 0 is end-of-file, and so
//! is any read error other than `EINTR`. After the call finished, the owner
//! keeps reading and dropping until end-of-file, so a descendant still
//! holding a pipe never blocks on it.

use std::future;

use tokio::io::{AsyncRead, AsyncReadExt};

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
