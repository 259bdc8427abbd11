//! A spawned helper's pipes as an async runtime's owner holds them, written
//! once for smol and tokio: the output streams the owner reads, and the
//! stdin routed by the command's [`StdinMode`].
//!
//! * **Bytes**: a writer the runtime starts feeds them and closes the
//!   pipe; dropping what it returned (its *stop*) stops it at once, even
//!   mid-write, and closes the pipe. Stdout goes to the owner.
//! * **Streamed**: stdin is shared with the caller's writer
//!   ([`SharedStdin`]).
//! * **Null** (and any mode added later): nothing.
//!
//! Stdout goes to the owner, or, for a call that streams it, waits to be
//! handed to the caller with stdin
//! ([`take_streams`](AsyncPipes::take_streams)); the owner then reads only
//! stderr.
//!
//! The runtime crates keep what differs: how they spawn, which types their
//! pipes have, how a writer and a waiter run.

use std::any::Any;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::command::{HelperCommand, StdinMode};
use crate::read_buffers::bytes_read;
use crate::stream::{Forwarded, Handout, SharedStdin};

/// A helper's pid and pipes: `S` an output stream as the owner reads it,
/// `I` and `O` the raw stdin and stdout pipes, `W` the stop of a stdin
/// writer.
#[derive(Debug)]
pub struct AsyncPipes<S, I, O, W> {
    /// The helper's pid, which is also its process group id.
    pub pid: u32,
    /// Capacity of the stderr pipe after asking to enlarge it; `None` if
    /// not asked or refused.
    pub pipe_capacity: Option<u64>,
    /// Stdout and stderr, each until it reaches end-of-file (stdout is
    /// `None` from the start for a streamed call).
    pub pipes: [Option<S>; 2],
    /// Dropping it stops the stdin writer and closes the pipe.
    feeding: Option<W>,
    /// A streamed call's stdin, shared with the caller's writer.
    streamed_stdin: Option<Arc<SharedStdin<I>>>,
    /// A streamed call's stdout, until handed to the caller.
    streamed_stdout: Option<O>,
}

/// What a spawn gives [`AsyncPipes::new`].
#[derive(Debug)]
pub struct Spawned<S, I, O> {
    /// The helper's pid.
    pub pid: u32,
    /// The stderr pipe's capacity, if it was enlarged.
    pub pipe_capacity: Option<u64>,
    /// How the command's stdin was set up.
    pub mode: StdinMode,
    /// Whether stdout goes to the caller (a streamed call).
    pub stdout_streamed: bool,
    /// The stdin pipe, when the mode made one.
    pub stdin: Option<I>,
    /// The raw stdout pipe.
    pub stdout: O,
    /// Stderr, as the owner reads it.
    pub stderr: S,
}

impl<S, I, O, W> AsyncPipes<S, I, O, W> {
    /// The pipes of `spawned`, stdin routed by its mode: `as_stream` makes
    /// stdout a stream the owner reads, `feed` starts the writer of a
    /// helper given bytes and returns its stop.
    pub fn new(
        spawned: Spawned<S, I, O>,
        as_stream: impl FnOnce(O) -> S,
        feed: impl FnOnce(I, Vec<u8>) -> W,
    ) -> Self {
        let Spawned {
            pid,
            pipe_capacity,
            mode,
            stdout_streamed,
            stdin,
            stdout,
            stderr,
        } = spawned;
        let mut pipes = Self {
            pid,
            pipe_capacity,
            pipes: [None, Some(stderr)],
            feeding: None,
            streamed_stdin: None,
            streamed_stdout: None,
        };
        match stdout_streamed {
            true => pipes.streamed_stdout = Some(stdout),
            false => pipes.pipes[0] = Some(as_stream(stdout)),
        }
        match (mode, stdin) {
            (StdinMode::Streamed, Some(pipe)) => {
                pipes.streamed_stdin = Some(SharedStdin::new(pipe));
            }
            (StdinMode::Bytes(bytes), Some(pipe)) => {
                pipes.feeding = Some(feed(pipe, bytes));
            }
            _ => {}
        }
        pipes
    }

    /// Stops feeding stdin (the writer closes it at once, even mid-write)
    /// and closes a streamed stdin under the caller's writer.
    pub fn close_stdin(&mut self) {
        self.feeding = None;
        if let Some(stdin) = &self.streamed_stdin {
            stdin.close();
        }
    }

    /// After the call finished: stops stdin and takes the output streams
    /// the call stopped listening to (an escaped descendant still holds
    /// them), as descriptors for the host's drainer; `into_fd` gives a
    /// stream's descriptor, and a stream it cannot give one for is closed.
    pub fn take_leftovers(
        &mut self,
        mut into_fd: impl FnMut(S) -> io::Result<OwnedFd>,
    ) -> Vec<OwnedFd> {
        self.close_stdin();
        self.pipes
            .iter_mut()
            .filter_map(Option::take)
            .filter_map(|stream| into_fd(stream).ok())
            .collect()
    }

    /// A streamed call's stdin and stdout for its handle, once.
    pub fn take_streams(&mut self, forwarded: Arc<Forwarded>) -> Option<Box<dyn Any + Send>>
    where
        I: Send + 'static,
        O: Send + 'static,
    {
        Some(Box::new(Handout {
            stdin: self.streamed_stdin.clone(),
            stdout: self.streamed_stdout.take()?,
            forwarded,
        }))
    }
}

/// Bytes read into `buf` by `poll` (one poll of a pipe's read), retried on
/// `EINTR`; 0 at end-of-file or on any other error.
pub async fn read_some_with(
    buf: &mut [u8],
    mut poll: impl FnMut(&mut Context<'_>, &mut [u8]) -> Poll<io::Result<usize>>,
) -> usize {
    loop {
        let read = std::future::poll_fn(|cx| poll(cx, buf)).await;
        if let Some(len) = bytes_read(read) {
            return len;
        }
    }
}

/// [`read_some_with`] of `stream` while it is open; never ready once it
/// is `None` (it reached its end or was handed over).
pub async fn read_open_with<S>(
    stream: &mut Option<S>,
    buf: &mut [u8],
    mut poll: impl FnMut(&mut S, &mut Context<'_>, &mut [u8]) -> Poll<io::Result<usize>>,
) -> usize {
    match stream {
        Some(stream) => read_some_with(buf, |cx, buf| poll(stream, cx, buf)).await,
        None => std::future::pending().await,
    }
}

/// How an async runtime spawns its helper, for [`AsyncProcess`]: the
/// spawn itself, the waiter that reports the exit to `Events`, the output
/// pipes as streams, and the writer of a helper given bytes.
pub trait AsyncSpawn {
    /// The child, as its waiter owns it.
    type Child;
    /// An output stream as the owner reads it.
    type Stream;
    /// The raw stdin pipe.
    type Stdin: Send + 'static;
    /// The raw stdout pipe.
    type Stdout: AsFd + Send + 'static;
    /// The raw stderr pipe.
    type Stderr: AsFd;
    /// Dropping it stops the stdin writer.
    type Stop;
    /// Where the waiter reports the exit (the owner's channel).
    type Events;

    /// Spawns `command` in its own process group with piped output; on
    /// error nothing is left running.
    fn spawn(command: &HelperCommand) -> io::Result<SpawnedChild<Self>>;

    /// Starts the waiter: it owns `child`, reports its exit to `events`,
    /// and reaps it even after the call stopped waiting.
    fn start_waiter(child: Self::Child, events: &Self::Events);

    /// Stdout as an output stream the owner reads.
    fn stdout(pipe: Self::Stdout) -> Self::Stream;

    /// Stderr as an output stream the owner reads.
    fn stderr(pipe: Self::Stderr) -> Self::Stream;

    /// Starts writing `bytes` to `stdin`, then closing it; returns its stop.
    fn feed(stdin: Self::Stdin, bytes: Vec<u8>) -> Self::Stop;
}

/// What [`AsyncSpawn::spawn`] gives: the child, its pid and its pipes.
#[allow(missing_debug_implementations)]
pub struct SpawnedChild<T: AsyncSpawn + ?Sized> {
    /// The child, for its waiter.
    pub child: T::Child,
    /// Its pid, which is also its process group id.
    pub pid: u32,
    /// Its stdin pipe, when the command's mode made one.
    pub stdin: Option<T::Stdin>,
    /// Its stdout pipe.
    pub stdout: T::Stdout,
    /// Its stderr pipe.
    pub stderr: T::Stderr,
}

/// A helper spawned by an async runtime `T`: its [`AsyncPipes`].
pub struct AsyncProcess<T: AsyncSpawn>(pub AsyncPipes<T::Stream, T::Stdin, T::Stdout, T::Stop>);

impl<T: AsyncSpawn> std::fmt::Debug for AsyncProcess<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncProcess")
            .field("pid", &self.0.pid)
            .finish_non_exhaustive()
    }
}

impl<T: AsyncSpawn> crate::owner::Helper for AsyncProcess<T> {
    type Events = T::Events;

    /// The pipes are enlarged to `pipe_size` before the waiter starts.
    fn spawn(
        command: HelperCommand,
        pipe_size: Option<usize>,
        events: &Self::Events,
    ) -> io::Result<Self> {
        let SpawnedChild {
            child,
            pid,
            stdin,
            stdout,
            stderr,
        } = T::spawn(&command)?;
        let pipe_capacity = crate::os::enlarge_pipes(&stdout, &stderr, pipe_size);
        T::start_waiter(child, events);
        let spawned = Spawned {
            pid,
            pipe_capacity,
            stdout_streamed: command.stdout_streamed,
            mode: command.stdin,
            stdin,
            stdout,
            stderr: T::stderr(stderr),
        };
        Ok(Self(AsyncPipes::new(spawned, T::stdout, T::feed)))
    }

    fn pid(&self) -> u32 {
        self.0.pid
    }

    fn pipe_capacity(&self) -> Option<u64> {
        self.0.pipe_capacity
    }

    fn close_stdin(&mut self) {
        self.0.close_stdin();
    }

    /// The handle reaches the owner its own way, not through `_events`.
    fn take_streams(
        &mut self,
        _events: &Self::Events,
        forwarded: Arc<Forwarded>,
    ) -> Option<Box<dyn Any + Send>> {
        self.0.take_streams(forwarded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read interrupted once, then two full buffers, then the end.
    #[test]
    fn a_read_retries_eintr_and_ends_at_zero() {
        let mut reads = vec![Ok(0), Ok(4), Ok(4), Err(io::ErrorKind::Interrupted.into())];
        let mut buf = [0; 4];
        let mut read = || {
            let poll = |_: &mut Context<'_>, buf: &mut [u8]| {
                buf.fill(b'x');
                Poll::Ready(reads.pop().unwrap_or(Ok(0)))
            };
            let mut future = std::pin::pin!(read_some_with(&mut buf, poll));
            let mut cx = Context::from_waker(std::task::Waker::noop());
            future.as_mut().poll(&mut cx)
        };
        assert_eq!(read(), Poll::Ready(4));
        assert_eq!(read(), Poll::Ready(4));
        assert_eq!(read(), Poll::Ready(0));
        assert_eq!(buf, [b'x'; 4]);
    }
}
