//! Reading the helper's output streams, in the owner's own wait: no task
//! per stream and no hop per chunk.
//!
//! The owner keeps one 64 KiB buffer per stream and reads whichever stream
//! is ready first, the two taking turns at being looked at first (the
//! other read is dropped unfinished: a pipe read in smol's reactor holds no
//! bytes while it waits, so nothing is lost). A read of 0 is end-of-file,
//! and so is any read error other than `EINTR`. After the call finished,
//! a pipe a descendant still holds is the host's drainer's: one task on
//! smol's executor ([`SmolLeftovers`], the waiting half of
//! [`spillguard_host::leftover_pipes`]) reads and drops what comes, so the
//! descendant never blocks on it.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use crate::process::{ChildStderr, ChildStdout};
use futures_lite::AsyncRead;
use smol::{Async, Timer};
use spillguard_host::leftover_pipes::{AsyncLeftovers, Drain, LeftoverRuntime, read_now};
use spillguard_host::pipes::read_open_with;

use spillguard_host::run_loop::Pipe;

pub(crate) use spillguard_host::read_buffers::CHUNK_BYTES;

/// One of the helper's output streams, so both can sit in one array.
#[derive(Debug)]
pub(crate) enum Stream {
    /// The helper's stdout.
    Stdout(ChildStdout),
    /// The helper's stderr.
    Stderr(ChildStderr),
}

impl std::os::fd::AsFd for Stream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Stream::Stdout(stdout) => stdout.as_fd(),
            Stream::Stderr(stderr) => stderr.as_fd(),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Stdout(stdout) => Pin::new(stdout).poll_read(cx, buf),
            Stream::Stderr(stderr) => Pin::new(stderr).poll_read(cx, buf),
        }
    }
}

/// One poll of a read of `source` into `buf`.
fn poll_chunk(
    source: &mut (impl AsyncRead + Unpin),
    cx: &mut Context<'_>,
    buf: &mut [u8],
) -> Poll<io::Result<usize>> {
    Pin::new(source).poll_read(cx, buf)
}

/// A read of whichever of `pipes` (stdout, stderr) is ready first, into its
/// buffer in `bufs`, stderr looked at first if `stderr_first`; never ready
/// once both are closed.
pub(crate) async fn read_either(
    pipes: &mut [Option<Stream>; 2],
    bufs: &mut [Vec<u8>; 2],
    stderr_first: bool,
) -> (Pipe, usize) {
    let [stdout, stderr] = pipes;
    let [stdout_buf, stderr_buf] = bufs;
    // Each read is never ready once its stream is closed.
    let out = async {
        (
            Pipe::Stdout,
            read_open_with(stdout, stdout_buf, poll_chunk).await,
        )
    };
    let err = async {
        (
            Pipe::Stderr,
            read_open_with(stderr, stderr_buf, poll_chunk).await,
        )
    };
    if stderr_first {
        futures_lite::future::or(err, out).await
    } else {
        futures_lite::future::or(out, err).await
    }
}

/// Where a smol host's drainer runs and how it waits: one task on smol's
/// global executor (where the owners run), each leftover pipe registered
/// with the reactor (`Async`), read when it is readable, and a `Timer`
/// for the time bound.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SmolLeftovers;

impl LeftoverRuntime for SmolLeftovers {
    fn start(&self, drain: Drain) {
        smol::spawn(drain.run::<Self>()).detach();
    }
}

impl AsyncLeftovers for SmolLeftovers {
    type Pipe = Async<OwnedFd>;
    type Timer = Timer;

    fn now() -> Instant {
        Instant::now()
    }

    fn register(pipe: OwnedFd) -> io::Result<Async<OwnedFd>> {
        Async::new(pipe)
    }

    fn poll_read(
        pipe: &mut Async<OwnedFd>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            match read_now(pipe.get_ref().as_fd(), buf) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    ready!(pipe.poll_readable(cx))?;
                }
                done => return Poll::Ready(done),
            }
        }
    }

    fn timer(at: Instant) -> Timer {
        Timer::at(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    /// More than a pipe holds goes through only if the drainer task reads
    /// it; at the end the task ends.
    #[test]
    fn the_drainer_task_reads_a_leftover_pipe_to_its_end_then_ends() {
        use spillguard_host::LeftoverStats;
        use spillguard_host::leftover_pipes::LeftoverDrainer;

        let drainer = LeftoverDrainer::new(Some(Duration::from_secs(60)), 8, SmolLeftovers);
        let (read, write) = rustix::pipe::pipe().unwrap();
        drainer.adopt(read);
        assert!(drainer.is_running());
        let chunk = [b'x'; 4096];
        let mut written = 0;
        while written < 4 << 20 {
            written += rustix::io::write(&write, &chunk).unwrap();
        }
        assert_eq!(drainer.stats().draining, 1);
        drop(write);
        let ended = LeftoverStats {
            draining: 0,
            closed: 0,
            ended: 1,
        };
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while drainer.stats() != ended || drainer.is_running() {
            assert!(std::time::Instant::now() < until, "{:?}", drainer.stats());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn closed_streams_are_never_ready() {
        smol::block_on(async {
            let (mut pipes, mut bufs) = ([None, None], [vec![0; 16], vec![0; 16]]);
            let read = read_either(&mut pipes, &mut bufs, false);
            let timeout = async {
                smol::Timer::after(Duration::from_millis(20)).await;
                None
            };
            let first = futures_lite::future::or(async { Some(read.await) }, timeout);
            assert_eq!(first.await, None);
        });
    }
}
