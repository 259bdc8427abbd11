//! A spawned helper's pipes as an async runtime's owner holds them, written
//! once for smol and tokio: the output streams the owner reads, and the
//! stdin routed by the command's [`StdinMode`].
//!
//! * **Bytes**: a writer the runtime starts feeds them and closes the
//!   pipe; dropping what it returned (its *stop*) stops it at once, even
//!   mid-write, and closes the pipe. Stdout goes to the owner.
//! * **Streamed**: stdin is shared with the caller's writer
//!   ([`SharedStdin`]) and stdout waits to be handed to the caller
//!   ([`take_streams`](AsyncPipes::take_streams)); the owner reads only
//!   stderr.
//! * **Null** (and any mode added later): stdout goes to the owner.
//!
//! The runtime crates keep what differs: how they spawn, which types their
//! pipes have, how a writer and a waiter run.

use std::any::Any;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::command::StdinMode;
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
        match (mode, stdin) {
            (StdinMode::Streamed, Some(pipe)) => {
                pipes.streamed_stdin = Some(SharedStdin::new(pipe));
                pipes.streamed_stdout = Some(stdout);
            }
            (StdinMode::Bytes(bytes), Some(pipe)) => {
                pipes.feeding = Some(feed(pipe, bytes));
                pipes.pipes[0] = Some(as_stream(stdout));
            }
            _ => pipes.pipes[0] = Some(as_stream(stdout)),
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
            stdin: self.streamed_stdin.clone()?,
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
