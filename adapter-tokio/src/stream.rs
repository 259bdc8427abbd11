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
use std::sync::Arc;
use std::task::{Context, Poll};

use spillguard_kit::stream::{Forwarded, Presence, SharedStdin};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;

use crate::handle::Changed;
use crate::owner::{Command, Event};

/// The caller's presence in a call (handle and streams).
pub(crate) type Present = Arc<Presence<Changed>>;

/// The helper's stdin as the caller and the owner share it.
pub(crate) type Stdin = Arc<SharedStdin<ChildStdin>>;

/// What the owner hands out at the spawn, for the handle to finish.
pub(crate) struct Raw {
    pub(crate) stdin: Stdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) forwarded: Arc<Forwarded>,
    pub(crate) events: mpsc::UnboundedSender<Event>,
}

impl Raw {
    /// The caller's two streams, each keeping `present`.
    pub(crate) fn finish(self, present: &Present) -> (HelperStdin, HelperStdout) {
        let stdin = HelperStdin {
            stdin: self.stdin,
            forwarded: self.forwarded.clone(),
            events: self.events,
            ended: false,
            _present: present.clone(),
        };
        let stdout = HelperStdout {
            stdout: self.stdout,
            forwarded: self.forwarded,
            _present: present.clone(),
        };
        (stdin, stdout)
    }
}

/// The helper's stdin, for a streamed call's caller.
///
/// `shutdown()` or dropping it ends the caller's input: the helper reads
/// end-of-file and has `stdin_close_grace` to exit before its group gets
/// TERM, the grace, KILL. Once the call closed stdin itself (a stop), a
/// write fails with `BrokenPipe`.
#[derive(Debug)]
pub struct HelperStdin {
    stdin: Stdin,
    forwarded: Arc<Forwarded>,
    events: mpsc::UnboundedSender<Event>,
    ended: bool,
    _present: Present,
}

impl HelperStdin {
    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.stdin.close();
            let _ = self.events.send(Event::Command(Command::InputEnded));
        }
    }
}

impl AsyncWrite for HelperStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = this
            .stdin
            .poll_with(cx, |pipe, cx| pipe.poll_write(cx, buf));
        if let Poll::Ready(Ok(written)) = polled {
            this.forwarded.add_stdin(written);
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.stdin.poll_with(cx, |pipe, cx| pipe.poll_flush(cx)) {
            // Nothing is buffered here: a closed pipe has nothing to flush.
            Poll::Ready(Err(error)) if error.kind() == io::ErrorKind::BrokenPipe => {
                Poll::Ready(Ok(()))
            }
            polled => polled,
        }
    }

    /// Ends the caller's input (see the type's docs); always ready.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().end();
        Poll::Ready(Ok(()))
    }
}

impl Drop for HelperStdin {
    fn drop(&mut self) {
        self.end();
    }
}

/// The helper's stdout, for a streamed call's caller; `0` bytes read is
/// its end-of-file. The call does not wait for it: the helper's exit and
/// stderr's end finish the call, and the record counts the bytes read
/// before that.
#[derive(Debug)]
pub struct HelperStdout {
    stdout: ChildStdout,
    forwarded: Arc<Forwarded>,
    _present: Present,
}

impl AsyncRead for HelperStdout {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stdout).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.forwarded.add_stdout(buf.filled().len() - before);
        }
        polled
    }
}
