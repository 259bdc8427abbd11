//! What every runtime shares for a streamed call (`CallBuilder::streamed`):
//! the caller writes the helper's stdin and reads its stdout itself, while
//! the owner keeps draining stderr and obeys the core.
//!
//! * [`Forwarded`]: the bytes that went each way, counted by the caller's
//!   reads and writes with one atomic add each (no message per read); the
//!   owner reports them to the core before each of its `Call::handle` calls
//!   ([`OwnerCore::call_mut`](crate::owner::OwnerCore::call_mut)).
//! * [`SharedStdin`]: the helper's stdin, written by the caller and closed
//!   by whoever comes first: the caller (closing or dropping its writer,
//!   the end of its input) or the owner (the core's `CloseStdin`, even
//!   while the caller holds the writer). Closing it lets a write under way
//!   finish, wakes an async writer waiting on a full pipe, and makes later
//!   writes fail with `BrokenPipe`.
//! * [`Presence`]: the caller is there while its handle or one of the
//!   call's streams is; when the last goes before the call finished, the
//!   owner hears of a client disconnect.
//! * [`Handout`], [`StdinWriter`], [`StdoutReader`]: what the owner hands
//!   out at the spawn and the caller's two streams made of it, counting
//!   every read and write, ending the input once; a runtime's
//!   `HelperStdin` and `HelperStdout` wrap them with its `Read`/`Write` or
//!   `AsyncRead`/`AsyncWrite`, one line a method. The [`StdoutReader`]
//!   reports stdout's end once (its end-of-file read, or its drop) and
//!   only after every segment it diverted, on the same channel, so nothing
//!   read or diverted before the end is missing from the record.
//! * [`StdoutReader::read_guarded`]: one read of an MCP server's stdout
//!   into a [`StdoutLineGuard`]: whole protocol messages to the caller,
//!   the rest to the stderr capture.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use spillguard_core::{Call, ProtocolLine, Segment, StdoutLineGuard};

use crate::handle::ToOwner;
use crate::published::{Published, Wake};
use crate::run_loop::Command;
use spillguard_core::Input;

/// Bytes forwarded each way by a streamed call's caller, not yet reported
/// to the core.
#[derive(Debug, Default)]
pub struct Forwarded {
    stdin: AtomicU64,
    stdout: AtomicU64,
    undelivered: AtomicU64,
}

impl Forwarded {
    /// `n` more bytes were written to the helper's stdin.
    pub fn add_stdin(&self, n: usize) {
        self.stdin.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// `n` more bytes of the helper's stdout went to the caller.
    pub fn add_stdout(&self, n: usize) {
        self.stdout.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// `n` bytes the caller sent were dropped: the helper never took them.
    pub fn add_undelivered(&self, n: u64) {
        self.undelivered.fetch_add(n, Ordering::Relaxed);
    }

    /// Reports what was counted since the last report to `call`, at `now`
    /// ([`Input::StdinForwarded`], [`Input::StdoutForwarded`],
    /// [`Input::StdinUndelivered`]).
    pub fn report(&self, call: &mut Call, now: Instant) {
        let undelivered = self.undelivered.swap(0, Ordering::Relaxed);
        if undelivered > 0 {
            let _ = call.handle(now, Input::StdinUndelivered(undelivered));
        }
        let stdin = self.stdin.swap(0, Ordering::Relaxed);
        if stdin > 0 {
            let _ = call.handle(now, Input::StdinForwarded(stdin));
        }
        let stdout = self.stdout.swap(0, Ordering::Relaxed);
        if stdout > 0 {
            let _ = call.handle(now, Input::StdoutForwarded(stdout));
        }
    }
}

/// The helper's stdin pipe `T`, shared by the caller's writer and the
/// owner; closed (dropped) once, by whichever comes first.
#[derive(Debug)]
pub struct SharedStdin<T> {
    inner: Mutex<StdinState<T>>,
}

#[derive(Debug)]
struct StdinState<T> {
    pipe: Option<T>,
    /// The task of an async writer that found the pipe full, woken when
    /// the pipe is closed under it.
    waiting: Option<Waker>,
}

/// The error a write to a closed stdin gives.
pub fn stdin_closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the helper's stdin is closed")
}

impl<T> SharedStdin<T> {
    /// No pipe: closed from the start (a helper whose stdin is not the
    /// caller's); every write fails with `BrokenPipe`.
    pub fn closed() -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(StdinState {
                pipe: None,
                waiting: None,
            }),
        })
    }

    /// `pipe`, open.
    pub fn new(pipe: T) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(StdinState {
                pipe: Some(pipe),
                waiting: None,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, StdinState<T>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the pipe (the helper reads end-of-file once no write is under
    /// way) and wakes a writer waiting on it. Later writes fail with
    /// `BrokenPipe`.
    pub fn close(&self) {
        let (pipe, waiting) = {
            let mut state = self.lock();
            (state.pipe.take(), state.waiting.take())
        };
        drop(pipe);
        if let Some(waker) = waiting {
            waker.wake();
        }
    }

    /// Whether the pipe is still open.
    pub fn is_open(&self) -> bool {
        self.lock().pipe.is_some()
    }

    /// A clone of the pipe, for a blocking write made without the lock (an
    /// `Arc` of the std pipe: the pipe closes when the owner has closed it
    /// and the last write under way is done). `None` once closed.
    pub fn get(&self) -> Option<T>
    where
        T: Clone,
    {
        self.lock().pipe.clone()
    }

    /// For an async writer: `poll` on the open pipe, under the lock (a
    /// poll never blocks). A closed pipe is `BrokenPipe`; a pending poll
    /// leaves the task to be woken by [`close`](Self::close) too.
    pub fn poll_with<R>(
        &self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut T>, &mut Context<'_>) -> Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>>
    where
        T: Unpin,
    {
        let mut state = self.lock();
        let StdinState { pipe, waiting } = &mut *state;
        let Some(pipe) = pipe.as_mut() else {
            return Poll::Ready(Err(stdin_closed()));
        };
        let polled = poll(Pin::new(pipe), cx);
        if polled.is_pending() {
            match waiting {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                _ => *waiting = Some(cx.waker().clone()),
            }
        }
        polled
    }
}

/// The caller's presence in a call: held by the handle and each stream;
/// dropping the last before the call finished runs `gone` (which sends the
/// owner a client disconnect).
pub struct Presence<W: Wake> {
    published: Arc<Published<W>>,
    gone: Box<dyn Fn() + Send + Sync>,
}

impl<W: Wake> std::fmt::Debug for Presence<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presence").finish_non_exhaustive()
    }
}

impl<W: Wake> Presence<W> {
    /// The presence of the caller of the call publishing to `published`.
    pub fn new(published: Arc<Published<W>>, gone: impl Fn() + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Self {
            published,
            gone: Box::new(gone),
        })
    }
}

impl<W: Wake> Drop for Presence<W> {
    fn drop(&mut self) {
        // An outcome the caller never took will never be taken: its
        // retained text and pool share go now.
        self.published.discard_outcome();
        if !self.published.is_finished() {
            (self.gone)();
        }
    }
}

/// What an owner hands out at a streamed call's spawn (boxed, through
/// [`Effects::take_streams`](crate::owner::Effects::take_streams)), for the
/// handle to finish ([`HandleCore::streams`](crate::handle::HandleCore::streams)):
/// the runtime's stdin pipe `I` (shared with the owner) and stdout pipe
/// `O`, and the counters both count into.
#[derive(Debug)]
pub struct Handout<I, O> {
    /// The helper's stdin, shared with the owner; `None` when it is not
    /// piped to the caller (`/dev/null`, or bytes the call writes): the
    /// caller's writer is then closed from the start and its drop ends
    /// nothing.
    pub stdin: Option<Arc<SharedStdin<I>>>,
    /// The helper's stdout.
    pub stdout: O,
    /// What the caller's reads and writes count into.
    pub forwarded: Arc<Forwarded>,
}

impl<I, O> Handout<I, O> {
    /// The caller's two streams, each keeping `present`, ending the input
    /// and diverting stdout through `to_owner`.
    pub fn finish<W: Wake, R>(
        self,
        to_owner: &ToOwner<R>,
        present: &Arc<Presence<W>>,
    ) -> (StdinWriter<I, W, R>, StdoutReader<O, W, R>) {
        let ended = self.stdin.is_none();
        let stdin = StdinWriter {
            stdin: self.stdin.unwrap_or_else(SharedStdin::closed),
            forwarded: self.forwarded.clone(),
            to_owner: to_owner.clone(),
            ended,
            _present: present.clone(),
        };
        let stdout = StdoutReader {
            stdout: self.stdout,
            forwarded: self.forwarded,
            to_owner: to_owner.clone(),
            ended: false,
            _present: present.clone(),
        };
        (stdin, stdout)
    }
}

/// The caller's writer of a streamed call's stdin, on any runtime: each
/// write goes to the helper's pipe `I` and is counted; closing it (or
/// dropping it) ends the caller's input, once: the pipe is closed and the
/// owner told (`Command::Input(Input::InputEnded)`), so the helper has
/// `stdin_close_grace` to exit. Once the owner closed stdin (a stop), a
/// write fails with `BrokenPipe`. A runtime's `HelperStdin` wraps it with
/// its `Write` or `AsyncWrite`.
#[derive(Debug)]
pub struct StdinWriter<I, W: Wake, R> {
    stdin: Arc<SharedStdin<I>>,
    forwarded: Arc<Forwarded>,
    to_owner: ToOwner<R>,
    ended: bool,
    _present: Arc<Presence<W>>,
}

impl<I, W: Wake, R> StdinWriter<I, W, R> {
    /// Ends the caller's input (the first time only): closes the pipe and
    /// tells the owner.
    pub fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.stdin.close();
            self.to_owner.command(Command::Input(Input::InputEnded));
        }
    }

    /// The caller dropped `n` bytes it had for the helper, which stopped
    /// taking them: counted as `stdin_bytes_undelivered`.
    pub fn undelivered(&self, n: u64) {
        self.forwarded.add_undelivered(n);
    }

    /// A blocking write (or splice) with `write` on a clone of the open
    /// pipe, made without the lock; counts what it wrote. `BrokenPipe`
    /// once the pipe is closed.
    pub fn write(&mut self, write: impl FnOnce(&I) -> io::Result<usize>) -> io::Result<usize>
    where
        I: Clone,
    {
        let Some(pipe) = self.stdin.get() else {
            return Err(stdin_closed());
        };
        let written = write(&pipe)?;
        self.forwarded.add_stdin(written);
        Ok(written)
    }

    /// An async write: `poll` on the open pipe ([`SharedStdin::poll_with`]),
    /// counting what it wrote.
    pub fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut I>, &mut Context<'_>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>>
    where
        I: Unpin,
    {
        let polled = self.stdin.poll_with(cx, poll);
        if let Poll::Ready(Ok(written)) = polled {
            self.forwarded.add_stdin(written);
        }
        polled
    }

    /// An async flush: `poll` on the open pipe. Nothing is buffered here,
    /// so a closed pipe has nothing to flush: `Ok`.
    pub fn poll_flush(
        &self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut I>, &mut Context<'_>) -> Poll<io::Result<()>>,
    ) -> Poll<io::Result<()>>
    where
        I: Unpin,
    {
        match self.stdin.poll_with(cx, poll) {
            Poll::Ready(Err(error)) if error.kind() == io::ErrorKind::BrokenPipe => {
                Poll::Ready(Ok(()))
            }
            polled => polled,
        }
    }

    /// An async close: ends the caller's input ([`end`](Self::end));
    /// always ready.
    pub fn poll_close(&mut self) -> Poll<io::Result<()>> {
        self.end();
        Poll::Ready(Ok(()))
    }
}

impl<I, W: Wake, R> Drop for StdinWriter<I, W, R> {
    fn drop(&mut self) {
        self.end();
    }
}

/// The caller's reader of a streamed call's stdout, on any runtime: each
/// read comes from the helper's pipe `O` and is counted; `0` bytes read is
/// its end-of-file. The call waits for that end (or the reader's drop),
/// at most the post-exit drain after the helper's exit, so the record
/// counts every byte read and diverted up to it. A runtime's
/// `HelperStdout` wraps it with its `Read` or `AsyncRead`.
#[derive(Debug)]
pub struct StdoutReader<O, W: Wake, R> {
    stdout: O,
    forwarded: Arc<Forwarded>,
    to_owner: ToOwner<R>,
    ended: bool,
    _present: Arc<Presence<W>>,
}

impl<O, W: Wake, R> StdoutReader<O, W, R> {
    /// A blocking read (or splice) with `read` on the pipe, of at most
    /// `asked` bytes; counts what it read. `0` of a non-zero `asked` is
    /// the end, reported to the owner.
    pub fn read(
        &mut self,
        asked: usize,
        read: impl FnOnce(&mut O) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let read = read(&mut self.stdout)?;
        self.counted(asked, read);
        Ok(read)
    }

    /// An async read of at most `asked` bytes: `poll` on the pipe,
    /// counting the bytes it gives (`0` of a non-zero `asked` is the end).
    pub fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        asked: usize,
        poll: impl FnOnce(Pin<&mut O>, &mut Context<'_>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>>
    where
        O: Unpin,
    {
        let polled = poll(Pin::new(&mut self.stdout), cx);
        if let Poll::Ready(Ok(read)) = polled {
            self.counted(asked, read);
        }
        polled
    }

    /// One read with `read` into `guard`'s buffer (an MCP server's stdout
    /// kept protocol-only): each whole JSON-RPC message line goes to
    /// `forward`, in order and without a copy (and is counted); every
    /// other byte goes to the call's stderr capture
    /// (`Command::StdoutDiverted`), before the end is reported. At the end
    /// an unterminated last line is decided too. Returns the bytes read,
    /// `0` at the end.
    pub fn read_guarded(
        &mut self,
        guard: &mut StdoutLineGuard,
        read: impl FnOnce(&mut O, &mut [u8]) -> io::Result<usize>,
        mut forward: impl FnMut(&ProtocolLine<'_>) -> io::Result<()>,
    ) -> io::Result<usize> {
        let read = read(&mut self.stdout, guard.spare())?;
        let (forwarded, to_owner) = (&self.forwarded, &self.to_owner);
        let mut sink = |segment: Segment<'_>| match segment {
            Segment::Forward(line) => {
                forward(&line)?;
                forwarded.add_stdout(line.bytes.len());
                Ok(())
            }
            Segment::Divert(diverted) => {
                to_owner.command(Command::StdoutDiverted {
                    bytes: diverted.bytes.to_vec(),
                    lines: diverted.lines,
                });
                Ok::<(), io::Error>(())
            }
            // A line longer than a message: its buffer is handed over, not
            // copied, so the line is never held twice.
            Segment::DivertHeld(held) => {
                to_owner.command(Command::StdoutDiverted {
                    bytes: std::mem::take(held.bytes),
                    lines: held.lines,
                });
                Ok(())
            }
        };
        if read == 0 {
            guard.finish(&mut sink)?;
            self.end();
        } else {
            guard.filled(read, &mut sink)?;
        }
        Ok(read)
    }

    fn counted(&mut self, asked: usize, read: usize) {
        self.forwarded.add_stdout(read);
        if read == 0 && asked > 0 {
            self.end();
        }
    }

    /// Tells the owner, once, that the caller is done with stdout.
    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.to_owner.command(Command::Input(Input::StdoutEof));
        }
    }
}

impl<O, W: Wake, R> Drop for StdoutReader<O, W, R> {
    fn drop(&mut self) {
        self.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Condvar;

    #[test]
    fn a_closed_stdin_refuses_writes_and_drops_its_pipe() {
        let pipe = Arc::new(5_u8);
        let shared = SharedStdin::new(pipe.clone());
        assert_eq!(shared.get().as_deref(), Some(&5));
        assert_eq!(Arc::strong_count(&pipe), 2);
        shared.close();
        assert!(!shared.is_open());
        assert_eq!(shared.get(), None);
        assert_eq!(Arc::strong_count(&pipe), 1);
    }

    #[test]
    fn the_last_presence_dropped_before_the_end_is_a_disconnect() {
        let published = Arc::new(Published::new(Condvar::new()));
        let gone = Arc::new(AtomicU64::new(0));
        let counter = gone.clone();
        let handle = Presence::new(published, move || {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        let stream = handle.clone();
        drop(handle);
        assert_eq!(gone.load(Ordering::Relaxed), 0);
        drop(stream);
        assert_eq!(gone.load(Ordering::Relaxed), 1);
    }
}
