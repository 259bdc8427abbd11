//! What every runtime shares for a streamed call (`CallBuilder::streamed`):
//! the caller writes the helper's stdin and reads its stdout itself, while
//! the owner keeps draining stderr and obeys the core.
//!
//! * [`Forwarded`]: the bytes that went each way, counted by the caller's
//!   reads and writes with one atomic add each (no message per read); the
//!   owner reports them to the core before each of its `handle_*` calls
//!   ([`OwnerCore::call_mut`](crate::owner::OwnerCore::call_mut)).
//! * [`SharedStdin`]: the helper's stdin, written by the caller and closed
//!   by whoever comes first: the caller (closing or dropping its writer,
//!   the end of its input) or the owner (the core's `CloseStdin`, even
//!   while the caller holds the writer).
//! * [`Presence`]: the caller is there while its handle or one of the
//!   call's streams is; when the last goes before the call finished, the
//!   owner hears of a client disconnect.
//! * [`split_guarded`]: one chunk of an MCP server's stdout through a
//!   [`StdoutLineGuard`]: protocol lines to the caller, the rest to the
//!   stderr capture.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use spillguard_core::{Call, Segment, StdoutLineGuard};

use crate::published::{Published, Wake};

/// Bytes forwarded each way by a streamed call's caller, not yet reported
/// to the core.
#[derive(Debug, Default)]
pub struct Forwarded {
    stdin: AtomicU64,
    stdout: AtomicU64,
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

    /// Reports what was counted since the last report to `call`
    /// (`handle_stdin_forwarded`, `handle_stdout_forwarded`).
    pub fn report(&self, call: &mut Call) {
        let stdin = self.stdin.swap(0, Ordering::Relaxed);
        if stdin > 0 {
            call.handle_stdin_forwarded(stdin);
        }
        let stdout = self.stdout.swap(0, Ordering::Relaxed);
        if stdout > 0 {
            call.handle_stdout_forwarded(stdout);
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

/// One chunk of an MCP server's stdout, read into `chunk`, through `guard`:
/// each protocol segment goes to `forward` (and is counted in `forwarded`),
/// each other segment to `divert` (bytes and the lines decided in them),
/// in order. Nothing is copied here; the first error of `forward` ends it.
pub fn split_guarded(
    guard: &mut StdoutLineGuard,
    chunk: &[u8],
    forwarded: &Forwarded,
    mut forward: impl FnMut(&[u8]) -> io::Result<()>,
    mut divert: impl FnMut(&[u8], u64),
) -> io::Result<()> {
    for segment in guard.split(chunk) {
        match segment {
            Segment::Forward(bytes) => {
                forward(bytes)?;
                forwarded.add_stdout(bytes.len());
            }
            Segment::Divert(diverted) => divert(diverted.bytes, diverted.lines),
        }
    }
    Ok(())
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

    #[test]
    fn guarded_chunks_forward_protocol_and_divert_the_rest() {
        let mut guard = StdoutLineGuard::new();
        let forwarded = Forwarded::default();
        let (mut out, mut diverted, mut lines) = (Vec::new(), Vec::new(), 0);
        split_guarded(
            &mut guard,
            b"banner\n{\"id\":1}\n",
            &forwarded,
            |bytes| {
                out.extend_from_slice(bytes);
                Ok(())
            },
            |bytes, n| {
                diverted.extend_from_slice(bytes);
                lines += n;
            },
        )
        .unwrap();
        assert_eq!(out, b"{\"id\":1}\n");
        assert_eq!(diverted, b"banner\n");
        assert_eq!(lines, 1);
        assert_eq!(forwarded.stdout.load(Ordering::Relaxed), 9);
    }
}
