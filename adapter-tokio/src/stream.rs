//! A streamed call's stdin and stdout for the caller: [`HelperStdin`]
//! ([`AsyncWrite`]) and [`HelperStdout`] ([`AsyncRead`]), from
//! [`CallHandle::streams`](crate::CallHandle::streams).
//!
//! Both are the helper's own tokio pipes: a read or a write is one poll of
//! the pipe, counted with one atomic add (the owner reports the counts to
//! the core; no message per read). The owner keeps draining stderr and can
//! close stdin under the writer (the core's `CloseStdin`): a writer waiting
//! on a full pipe is woken, and its write fails with `BrokenPipe`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use spillguard_host::stream::{StdinWriter, StdoutReader};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::process::{ChildStdin, ChildStdout};

use crate::runtime::{Reply, Waiters};

/// The helper's stdin, for a streamed call's caller.
///
/// `shutdown()` or dropping it ends the caller's input: the helper reads
/// end-of-file and has `stdin_close_grace` to exit before its group gets
/// TERM, the grace, KILL. Once the call closed stdin itself (a stop), a
/// write fails with `BrokenPipe`.
#[derive(Debug)]
pub struct HelperStdin(pub(crate) StdinWriter<ChildStdin, Waiters, Reply>);

/// One-line delegations to the host layer's [`StdinWriter`], which counts each
/// write and ends the input once.
impl AsyncWrite for HelperStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .0
            .poll_write(cx, |pipe, cx| pipe.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.poll_flush(cx, |pipe, cx| pipe.poll_flush(cx))
    }

    /// Ends the caller's input (see the type's docs); always ready.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().0.poll_close()
    }
}

/// The helper's stdout, for a streamed call's caller; `0` bytes read is
/// its end-of-file. After the helper's exit the call waits, at most the
/// post-exit drain, for this reader to reach end-of-file or be dropped,
/// so the record counts every byte read before it: read it to the end, or
/// drop it.
#[derive(Debug)]
pub struct HelperStdout(pub(crate) StdoutReader<ChildStdout, Waiters, Reply>);

/// The host layer's [`StdoutReader`] counts each read, here the bytes tokio's
/// `ReadBuf` gained.
impl AsyncRead for HelperStdout {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let asked = buf.remaining();
        let read = |pipe: Pin<&mut ChildStdout>, cx: &mut Context<'_>| {
            let polled = pipe.poll_read(cx, buf);
            polled.map_ok(|()| buf.filled().len() - before)
        };
        self.get_mut().0.poll_read(cx, asked, read).map_ok(drop)
    }
}
