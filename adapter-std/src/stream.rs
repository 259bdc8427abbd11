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
use spillguard_kit::stream::{self, Forwarded, Presence, SharedStdin, stdin_closed};

use crate::mailbox::Mailbox;
use crate::owner::{Command, Event};

/// The caller's presence in a call (handle and streams).
pub(crate) type Present = Arc<Presence<Condvar>>;

/// The helper's stdin as the caller and the owner share it.
pub(crate) type Stdin = Arc<SharedStdin<Arc<ChildStdin>>>;

/// What the owner hands out at the spawn, for the handle to finish.
pub(crate) struct Raw {
    pub(crate) stdin: Stdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) forwarded: Arc<Forwarded>,
    pub(crate) events: Mailbox,
}

impl Raw {
    /// The caller's two streams, each keeping `present`.
    pub(crate) fn finish(self, present: &Present) -> (HelperStdin, HelperStdout) {
        let stdin = HelperStdin {
            stdin: self.stdin,
            forwarded: self.forwarded.clone(),
            events: self.events.clone(),
            ended: false,
            _present: present.clone(),
        };
        let stdout = HelperStdout {
            stdout: self.stdout,
            forwarded: self.forwarded,
            events: self.events,
            _present: present.clone(),
        };
        (stdin, stdout)
    }
}

/// The helper's stdin, for a streamed call's caller.
///
/// Writes go straight to the helper's pipe (blocking while it is full).
/// [`close`](Self::close) or dropping it ends the caller's input: the
/// helper reads end-of-file and has `stdin_close_grace` to exit before its
/// group gets TERM, the grace, KILL. Once the call closed stdin itself (a
/// stop), a write fails with `BrokenPipe`.
#[derive(Debug)]
pub struct HelperStdin {
    stdin: Stdin,
    forwarded: Arc<Forwarded>,
    events: Mailbox,
    ended: bool,
    _present: Present,
}

impl HelperStdin {
    /// Ends the caller's input: closes the helper's stdin and starts the
    /// stdio shutdown (the same as dropping it).
    pub fn close(mut self) {
        self.end();
    }

    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.stdin.close();
            let _ = self.events.send(Event::Command(Command::InputEnded));
        }
    }
}

impl HelperStdin {
    /// Moves up to `max` bytes from the pipe `from` straight into the
    /// helper's stdin with `splice(2)`, without copying them through this
    /// process, and counts them; `0` at `from`'s end. An error
    /// (`InvalidInput`) if `from` cannot be spliced (not a pipe, or a file
    /// opened for appending): copy with `Write` instead.
    #[cfg(target_os = "linux")]
    pub fn splice_from(&mut self, from: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        let Some(pipe) = self.stdin.get() else {
            return Err(stdin_closed());
        };
        let moved = rustix::pipe::splice(from, None, &*pipe, None, max, SpliceFlags::MOVE)?;
        self.forwarded.add_stdin(moved);
        Ok(moved)
    }
}

impl Write for HelperStdin {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(pipe) = self.stdin.get() else {
            return Err(stdin_closed());
        };
        let written = (&*pipe).write(buf)?;
        self.forwarded.add_stdin(written);
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for HelperStdin {
    fn drop(&mut self) {
        self.end();
    }
}

/// The helper's stdout, for a streamed call's caller.
///
/// Reads come straight from the helper's pipe; `0` is its end-of-file.
/// The call does not wait for it: the helper's exit and stderr's end
/// finish the call, and the record counts the bytes read before that.
#[derive(Debug)]
pub struct HelperStdout {
    stdout: ChildStdout,
    forwarded: Arc<Forwarded>,
    events: Mailbox,
    _present: Present,
}

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
        let read = self.stdout.read(buf)?;
        let chunk = buf.get(..read).unwrap_or_default();
        let events = &self.events;
        stream::split_guarded(guard, chunk, &self.forwarded, forward, |bytes, lines| {
            let _ = events.send(Event::Command(Command::StdoutDiverted {
                bytes: bytes.to_vec(),
                lines,
            }));
        })?;
        Ok(read)
    }
}

impl HelperStdout {
    /// Moves up to `max` bytes of the helper's stdout straight into `to`
    /// with `splice(2)`, without copying them through this process, and
    /// counts them; `0` at the helper's end-of-file. An error
    /// (`InvalidInput`) if `to` cannot be spliced to (a terminal, a file
    /// opened for appending): copy with `Read` instead.
    #[cfg(target_os = "linux")]
    pub fn splice_to(&mut self, to: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        let moved = rustix::pipe::splice(&self.stdout, None, to, None, max, SpliceFlags::MOVE)?;
        self.forwarded.add_stdout(moved);
        Ok(moved)
    }
}

impl Read for HelperStdout {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.stdout.read(buf)?;
        self.forwarded.add_stdout(read);
        Ok(read)
    }
}
