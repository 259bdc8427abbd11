//! A streamed call's stdin and stdout for the caller: [`HelperStdin`]
//! (`Write`) and [`HelperStdout`] (`Read`), from
//! [`CallHandle::streams`](crate::CallHandle::streams).
//!
//! Both are the helper's own pipes, blocking: a read or a write is one
//! system call on the caller's thread, counted with one atomic add (the
//! owner reports the counts to the core; no message per read). The owner
//! keeps draining stderr meanwhile and can close stdin under the writer
//! (the core's `CloseStdin`): a write under way finishes, later ones fail
//! with `BrokenPipe`.

use std::io::{self, Read, Write};
#[cfg(target_os = "linux")]
use std::os::fd::BorrowedFd;
use std::process::{ChildStdin, ChildStdout};
use std::sync::{Arc, Condvar};

#[cfg(target_os = "linux")]
use rustix::pipe::SpliceFlags;
use spillguard_core::StdoutLineGuard;
use spillguard_kit::stream::{Handout, SharedStdin, StdinWriter, StdoutReader};

use crate::owner::Reply;

/// The helper's stdin as the caller and the owner share it.
pub(crate) type Stdin = Arc<SharedStdin<Arc<ChildStdin>>>;

/// What the owner hands out at the spawn, for the handle to finish.
pub(crate) type Raw = Handout<Arc<ChildStdin>, ChildStdout>;

/// The helper's stdin, for a streamed call's caller.
///
/// Writes go straight to the helper's pipe (blocking while it is full).
/// [`close`](Self::close) or dropping it ends the caller's input: the
/// helper reads end-of-file and has `stdin_close_grace` to exit before its
/// group gets TERM, the grace, KILL. Once the call closed stdin itself (a
/// stop), a write fails with `BrokenPipe`.
#[derive(Debug)]
pub struct HelperStdin(pub(crate) StdinWriter<Arc<ChildStdin>, Condvar, Reply>);

impl HelperStdin {
    /// Ends the caller's input: closes the helper's stdin and starts the
    /// stdio shutdown (the same as dropping it).
    pub fn close(mut self) {
        self.0.end();
    }

    /// Moves up to `max` bytes from the pipe `from` straight into the
    /// helper's stdin with `splice(2)`, without copying them through this
    /// process, and counts them; `0` at `from`'s end. An error
    /// (`InvalidInput`) if `from` cannot be spliced (not a pipe, or a file
    /// opened for appending): copy with `Write` instead.
    #[cfg(target_os = "linux")]
    pub fn splice_from(&mut self, from: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        self.0.write(|pipe| {
            Ok(rustix::pipe::splice(
                from,
                None,
                &**pipe,
                None,
                max,
                SpliceFlags::MOVE,
            )?)
        })
    }
}

impl Write for HelperStdin {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(|pipe| (&**pipe).write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The helper's stdout, for a streamed call's caller.
///
/// Reads come straight from the helper's pipe; `0` is its end-of-file.
/// The call does not wait for it: the helper's exit and stderr's end
/// finish the call, and the record counts the bytes read before that.
#[derive(Debug)]
pub struct HelperStdout(pub(crate) StdoutReader<ChildStdout, Condvar, Reply>);

impl HelperStdout {
    /// One read of the helper's stdout into `buf`, through `guard` (an MCP
    /// server's stdout kept protocol-only): the JSON object lines go to
    /// `forward`, in order and without a copy; every other byte goes to
    /// the call's stderr capture (counted as `stdout_bytes_diverted` and
    /// `stdout_lines_diverted`). Returns the bytes read, `0` at the end.
    pub fn read_guarded(
        &mut self,
        guard: &mut StdoutLineGuard,
        buf: &mut [u8],
        forward: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<usize> {
        self.0
            .read_guarded(guard, buf, |pipe, buf| pipe.read(buf), forward)
    }

    /// Moves up to `max` bytes of the helper's stdout straight into `to`
    /// with `splice(2)`, without copying them through this process, and
    /// counts them; `0` at the helper's end-of-file. An error
    /// (`InvalidInput`) if `to` cannot be spliced to (a terminal, a file
    /// opened for appending): copy with `Read` instead.
    #[cfg(target_os = "linux")]
    pub fn splice_to(&mut self, to: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        self.0.read(|pipe| {
            Ok(rustix::pipe::splice(
                &*pipe,
                None,
                to,
                None,
                max,
                SpliceFlags::MOVE,
            )?)
        })
    }
}

impl Read for HelperStdout {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(|pipe| pipe.read(buf))
    }
}
