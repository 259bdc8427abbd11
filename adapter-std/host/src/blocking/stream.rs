//! A streamed call's stdin and stdout for the caller: [`HelperStdin`]
//! (`Write`) and [`HelperStdout`] (`Read`), from
//! [`BlockingCallHandle::streams`](super::BlockingCallHandle::streams).
//!
//! Both are the helper's own pipes, blocking unless made otherwise: a
//! read or a write is one system call on the caller's thread, counted
//! with one atomic add (the owner reports the counts to the core; no
//! message per read). The owner keeps draining stderr meanwhile and can
//! close stdin under the writer (the core's `CloseStdin`): a write under
//! way finishes, later ones fail with `BrokenPipe`.
//!
//! `splice_from` and `splice_to` move bytes without a copy through this
//! process only between two pipes. Anything else (the socketpairs Node
//! and Bun give their children for stdio, a file, a terminal,
//! `/dev/null`) is copied through a buffer: a `splice(2)` from a socket
//! into a pipe holds the pipe's lock while it waits for the socket, so the
//! helper could not read the request already moved until the next one
//! came, and a request/response protocol would stall on its first message.

use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::process::{ChildStdin, ChildStdout};
use std::sync::{Arc, Condvar};

use super::Reply;
use crate::os::{is_pipe, poll, splices_from, write_all_waiting};
use crate::stream::{Handout, SharedStdin, StdinWriter, StdoutReader};
use rustix::event::PollFlags;
#[cfg(target_os = "linux")]
use rustix::pipe::SpliceFlags;
use spillguard_core::{ProtocolLine, StdoutLineGuard};

/// A streamed helper's stdin as the caller and the owner share it.
pub type SharedPipe = Arc<SharedStdin<Arc<ChildStdin>>>;

/// What an owner hands out at the spawn of a streamed call, for the handle
/// to finish into a [`HelperStdin`] and a [`HelperStdout`].
pub type RawStreams = Handout<Arc<ChildStdin>, ChildStdout>;

/// Bytes per copy of `splice_from` or `splice_to` between descriptors
/// that are not both pipes.
const COPY_BYTES: usize = 64 * 1024;

/// The helper's stdin, for a streamed call's caller.
///
/// Writes go straight to the helper's pipe (blocking while it is full,
/// unless [`set_nonblocking`](Self::set_nonblocking)).
/// [`close`](Self::close) or dropping it ends the caller's input: the
/// helper reads end-of-file and has `stdin_close_grace` to exit before its
/// group gets TERM, the grace, KILL. Once the call closed stdin itself (a
/// stop), a write fails with `BrokenPipe`.
#[derive(Debug)]
pub struct HelperStdin {
    writer: StdinWriter<Arc<ChildStdin>, Condvar, Reply>,
    nonblocking: bool,
    scratch: Vec<u8>,
}

impl HelperStdin {
    pub(crate) fn new(writer: StdinWriter<Arc<ChildStdin>, Condvar, Reply>) -> Self {
        Self {
            writer,
            nonblocking: false,
            scratch: Vec::new(),
        }
    }

    /// Ends the caller's input: closes the helper's stdin and starts the
    /// stdio shutdown (the same as dropping it).
    pub fn close(mut self) {
        self.writer.end();
    }

    /// Makes writes and splices to the helper's stdin fail with
    /// `WouldBlock` instead of waiting while its pipe is full (or, with
    /// `false`, wait again). For a caller that waits on several
    /// descriptors itself: [`with_fd`](Self::with_fd) lends the pipe's
    /// descriptor to `poll(2)` it.
    pub fn set_nonblocking(&mut self, nonblocking: bool) -> io::Result<()> {
        self.writer.write(|pipe| {
            let flags = rustix::fs::fcntl_getfl(&**pipe)?;
            let flags = if nonblocking {
                flags | rustix::fs::OFlags::NONBLOCK
            } else {
                flags - rustix::fs::OFlags::NONBLOCK
            };
            rustix::fs::fcntl_setfl(&**pipe, flags)?;
            Ok(0)
        })?;
        self.nonblocking = nonblocking;
        Ok(())
    }

    /// Counts `n` bytes meant for the helper that it will never get (it
    /// stopped reading and the caller dropped them): the record's
    /// `stdin_bytes_undelivered`.
    pub fn count_undelivered(&self, n: u64) {
        self.writer.undelivered(n);
    }

    /// Runs `f` with the descriptor of the helper's stdin pipe, which stays
    /// open while `f` runs (even if the call closes stdin meanwhile: it
    /// closes when `f` returns). `BrokenPipe` once stdin is closed.
    pub fn with_fd<T>(&mut self, f: impl FnOnce(BorrowedFd<'_>) -> T) -> io::Result<T> {
        let mut out = None;
        self.writer.write(|pipe| {
            out = Some(f(pipe.as_fd()));
            Ok(0)
        })?;
        out.ok_or_else(|| io::Error::other("the pipe was not lent"))
    }

    /// Moves up to `max` bytes from `from` into the helper's stdin and
    /// counts them; `0` at `from`'s end. From a pipe or a regular file
    /// (Linux) the bytes move with `splice(2)`, without a copy through this
    /// process; from anything else (a socket, a terminal) they are read and
    /// written through a buffer, so that nothing waits on `from` while
    /// holding the helper's pipe. Made non-blocking
    /// ([`set_nonblocking`](Self::set_nonblocking)), a splice gives
    /// `WouldBlock` when either pipe cannot move a byte now; a copy never
    /// loses what it read (it waits for the pipe to take it; what a
    /// failed write leaves is counted as `stdin_bytes_undelivered`).
    pub fn splice_from(&mut self, from: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        if max == 0 {
            return Ok(0);
        }
        #[cfg(target_os = "linux")]
        if splices_from(from) {
            let flags = if self.nonblocking {
                SpliceFlags::MOVE | SpliceFlags::NONBLOCK
            } else {
                SpliceFlags::MOVE
            };
            return self
                .writer
                .write(|pipe| Ok(rustix::pipe::splice(from, None, &**pipe, None, max, flags)?));
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.resize(max.min(COPY_BYTES), 0);
        let copied = match rustix::io::read(from, &mut scratch) {
            Ok(read) => self.write_all(scratch.get(..read).unwrap_or_default()),
            Err(errno) => Err(errno.into()),
        };
        self.scratch = scratch;
        copied
    }

    /// Writes all of `bytes` (waiting for room even when non-blocking);
    /// what a failure leaves unwritten is counted as undelivered.
    fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<usize> {
        let total = bytes.len();
        while !bytes.is_empty() {
            match self.write(bytes) {
                Ok(0) => {
                    self.count_undelivered(bytes.len() as u64);
                    return Err(ErrorKind::WriteZero.into());
                }
                Ok(n) => bytes = bytes.get(n..).unwrap_or_default(),
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) if error.kind() == ErrorKind::WouldBlock => {
                    if let Err(error) = self
                        .with_fd(|fd| poll([(fd, PollFlags::OUT)], None))
                        .and_then(|polled| polled)
                    {
                        self.count_undelivered(bytes.len() as u64);
                        return Err(error);
                    }
                }
                Err(error) => {
                    self.count_undelivered(bytes.len() as u64);
                    return Err(error);
                }
            }
        }
        Ok(total)
    }
}

impl Write for HelperStdin {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(|pipe| (&**pipe).write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The helper's stdout, for a streamed call's caller.
///
/// Reads come straight from the helper's pipe; `0` is its end-of-file.
/// After the helper's exit the call waits, at most the post-exit drain,
/// for this reader to reach end-of-file or be dropped, so the record
/// counts every byte read before it: read it to the end, or drop it.
#[derive(Debug)]
pub struct HelperStdout {
    reader: StdoutReader<ChildStdout, Condvar, Reply>,
    scratch: Vec<u8>,
}

impl HelperStdout {
    pub(crate) fn new(reader: StdoutReader<ChildStdout, Condvar, Reply>) -> Self {
        Self {
            reader,
            scratch: Vec::new(),
        }
    }

    /// One read of the helper's stdout into `guard`'s buffer (an MCP
    /// server's stdout kept protocol-only): each whole JSON-RPC message
    /// line goes to `forward`, in order and without a copy; every other
    /// byte goes to the call's stderr capture (counted as
    /// `stdout_bytes_diverted` and `stdout_lines_diverted`). Returns the
    /// bytes read, `0` at the end (where an unterminated last line is
    /// decided too).
    pub fn read_guarded(
        &mut self,
        guard: &mut StdoutLineGuard,
        forward: impl FnMut(&ProtocolLine<'_>) -> io::Result<()>,
    ) -> io::Result<usize> {
        self.reader
            .read_guarded(guard, |pipe, buf| pipe.read(buf), forward)
    }

    /// Moves up to `max` bytes of the helper's stdout into `to` and counts
    /// them; `0` at the helper's end-of-file. Into a pipe (Linux) the bytes
    /// move with `splice(2)`, without a copy through this process; into
    /// anything else (a socket, a file, a terminal) they are read and
    /// written through a buffer.
    pub fn splice_to(&mut self, to: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        if max == 0 {
            return Ok(0);
        }
        #[cfg(target_os = "linux")]
        if is_pipe(to) {
            return self.reader.read(max, |pipe| {
                Ok(rustix::pipe::splice(
                    &*pipe,
                    None,
                    to,
                    None,
                    max,
                    SpliceFlags::MOVE,
                )?)
            });
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.resize(max.min(COPY_BYTES), 0);
        let copied = self.read(&mut scratch).and_then(|read| {
            write_all_waiting(to, scratch.get(..read).unwrap_or_default())?;
            Ok(read)
        });
        self.scratch = scratch;
        copied
    }
}

impl Read for HelperStdout {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf.len(), |pipe| pipe.read(buf))
    }
}
