//! Reading the helper's output streams, in the owner's own `select!`: no
//! task per stream and no hop per chunk.
//!
//! The owner keeps one 64 KiB buffer per stream and reads whichever stream
//! is ready first (the other read is dropped: a tokio pipe read is
//! cancel-safe, nothing read is lost). A read of 0 is end-of-file, and so
//! is any read error other than `EINTR`. After the call finished, a pipe
//! a descendant still holds is the host's drainer's: one task on the
//! host's runtime ([`TokioLeftovers`], the waiting half of
//! [`spillguard_host::leftover_pipes`]) reads and drops what comes, so the
//! descendant never blocks on it.

use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use spillguard_host::leftover_pipes::{AsyncLeftovers, Drain, LeftoverRuntime};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::runtime::Handle;
use tokio::time::Sleep;

pub(crate) use spillguard_host::read_buffers::CHUNK_BYTES;

/// One poll of a read of `source` into `buf`, as a count of bytes.
pub(crate) fn poll_chunk(
    source: &mut (impl AsyncRead + Unpin),
    cx: &mut Context<'_>,
    buf: &mut [u8],
) -> Poll<io::Result<usize>> {
    let mut filled = ReadBuf::new(buf);
    ready!(Pin::new(source).poll_read(cx, &mut filled))?;
    Poll::Ready(Ok(filled.filled().len()))
}

/// Where a tokio host's drainer runs and how it waits: one task on the
/// host's runtime, each leftover pipe registered with its reactor (as a
/// tokio child pipe, whichever stream it was), read when it is readable,
/// and a `Sleep` on the runtime's clock for the time bound.
#[derive(Debug, Clone)]
pub(crate) struct TokioLeftovers(pub(crate) Handle);

impl LeftoverRuntime for TokioLeftovers {
    fn start(&self, drain: Drain) {
        // Detached; on a runtime shut down, the task is dropped at once.
        drop(self.0.spawn(drain.run::<Self>()));
    }
}

impl AsyncLeftovers for TokioLeftovers {
    type Pipe = tokio::process::ChildStdout;
    type Timer = Pin<Box<Sleep>>;

    fn now() -> Instant {
        crate::runtime::clock()
    }

    fn register(pipe: OwnedFd) -> io::Result<Self::Pipe> {
        tokio::process::ChildStdout::from_std(std::process::ChildStdout::from(pipe))
    }

    fn poll_read(
        pipe: &mut Self::Pipe,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        poll_chunk(pipe, cx, buf)
    }

    fn timer(at: Instant) -> Self::Timer {
        Box::pin(tokio::time::sleep_until(at.into()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use spillguard_host::pipes::{read_open_with, read_some_with};

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
        let mut read =
            async || read_some_with(&mut buf, |cx, b| poll_chunk(&mut source, cx, b)).await;
        assert_eq!(
            [read().await, read().await, read().await],
            [CHUNK_BYTES, CHUNK_BYTES, 0]
        );
    }

    #[tokio::test]
    async fn a_closed_stream_is_never_ready() {
        let (mut closed, mut buf) = (None::<crate::process::Stream>, vec![0; 16]);
        let read = read_open_with(&mut closed, &mut buf, poll_chunk);
        assert!(
            tokio::time::timeout(Duration::from_millis(20), read)
                .await
                .is_err()
        );
    }

    fn stats(draining: usize, closed: u64) -> spillguard_host::LeftoverStats {
        spillguard_host::LeftoverStats {
            draining,
            closed,
            ended: 0,
        }
    }

    /// The time bound runs on the runtime's clock: paused, 60 virtual
    /// seconds close the pipe at once.
    #[tokio::test(start_paused = true)]
    async fn the_drainer_task_s_time_bound_follows_the_runtime_s_clock() {
        let drainer = spillguard_host::leftover_pipes::LeftoverDrainer::new(
            Some(Duration::from_secs(60)),
            8,
            TokioLeftovers(Handle::current()),
        );
        let (read, write) = rustix::pipe::pipe().unwrap();
        drainer.adopt(read);
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert_eq!(drainer.stats(), stats(1, 0));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(drainer.stats(), stats(0, 1));
        assert!(!drainer.is_running());
        assert_eq!(
            rustix::io::write(&write, b"x"),
            Err(rustix::io::Errno::PIPE)
        );
    }

    /// A runtime shut down under its drainer task closes what the task
    /// held, counted as closed; the next pipe starts a new task.
    #[test]
    fn a_runtime_shut_down_under_the_drainer_closes_its_pipes() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let drainer = spillguard_host::leftover_pipes::LeftoverDrainer::new(
            None,
            8,
            TokioLeftovers(runtime.handle().clone()),
        );
        let (read, write) = rustix::pipe::pipe().unwrap();
        drainer.adopt(read);
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(20)).await });
        assert_eq!(drainer.stats(), stats(1, 0));
        drop(runtime);
        assert_eq!(drainer.stats(), stats(0, 1));
        assert!(!drainer.is_running());
        assert_eq!(
            rustix::io::write(&write, b"x"),
            Err(rustix::io::Errno::PIPE)
        );
    }
}
