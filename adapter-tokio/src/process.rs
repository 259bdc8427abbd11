//! The helper process: spawn it, keep its output streams for the owner.
//!
//! [`Process::spawn`] turns the [`HelperCommand`] into the std command the
//! std adapter builds (own process group, so the pgid is the pid, which is
//! remembered here and never looked up again; piped output; stdin null
//! unless bytes are given), wraps it in [`tokio::process::Command`],
//! enlarges the output pipes and hands them to the owner, which reads them
//! itself. Around it run a waiter task that owns the [`Child`] and reports
//! its exit, and a stdin writer when the helper is given bytes. The waiter
//! keeps waiting after the call has finished, so a helper the call stopped
//! waiting for is still reaped.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use spillguard_core::Signal;
use spillguard_kit::HelperCommand;
use spillguard_kit::os::{enlarge_pipes, exit_status, signal_group};
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

use std::any::Any;
use std::sync::Arc;

use spillguard_kit::owner::Helper;
use spillguard_kit::pipes::{AsyncPipes, Spawned};
use spillguard_kit::stream::Forwarded;

use crate::owner::Event;
use crate::reader;

/// A spawned helper, as the owner holds it: the kit's [`AsyncPipes`] of
/// tokio pipes (its pid and pgid, its output streams, its stdin routed by
/// the command's mode).
#[derive(Debug)]
pub(crate) struct Process(
    pub(crate) AsyncPipes<Stream, ChildStdin, ChildStdout, oneshot::Sender<()>>,
);

/// One of the helper's output streams, so both can sit in one array.
#[derive(Debug)]
pub(crate) enum Stream {
    /// The helper's stdout.
    Stdout(ChildStdout),
    /// The helper's stderr.
    Stderr(ChildStderr),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Stdout(stdout) => Pin::new(stdout).poll_read(cx, buf),
            Stream::Stderr(stderr) => Pin::new(stderr).poll_read(cx, buf),
        }
    }
}

impl Stream {
    /// The pipe's descriptor, taken out of tokio's reactor.
    pub(crate) fn into_owned_fd(self) -> io::Result<std::os::fd::OwnedFd> {
        match self {
            Stream::Stdout(stdout) => stdout.into_owned_fd(),
            Stream::Stderr(stderr) => stderr.into_owned_fd(),
        }
    }
}

impl Helper for Process {
    type Events = mpsc::UnboundedSender<Event>;

    fn spawn(
        command: HelperCommand,
        pipe_size: Option<usize>,
        events: &Self::Events,
    ) -> io::Result<Self> {
        let mut child = tokio::process::Command::from(command.to_std()).spawn()?;
        let (Some(pid), Some(stdout), Some(stderr)) =
            (child.id(), child.stdout.take(), child.stderr.take())
        else {
            if let Some(pid) = child.id() {
                signal_group(pid, Signal::Kill);
            }
            reap_in_background(child);
            return Err(io::Error::other(
                "the helper's pid or output pipes are missing",
            ));
        };
        let spawned = Spawned {
            pid,
            pipe_capacity: enlarge_pipes(&stdout, &stderr, pipe_size),
            mode: command.stdin,
            stdin: child.stdin.take(),
            stdout,
            stderr: Stream::Stderr(stderr),
        };
        start_waiter(child, events.clone());
        Ok(Self(AsyncPipes::new(
            spawned,
            Stream::Stdout,
            start_stdin_writer,
        )))
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

/// The waiter owns the child, waits for it and reports its exit — or that
/// it can no longer be waited for. It outlives the call if need be.
fn start_waiter(mut child: Child, events: mpsc::UnboundedSender<Event>) {
    tokio::spawn(async move {
        let event = match child.wait().await {
            Ok(status) => Event::Exited(exit_status(status)),
            Err(_) => Event::ProcessLost,
        };
        let _ = events.send(event);
    });
}

/// Waits for a child nobody will hear about, so that it leaves no zombie.
fn reap_in_background(mut child: Child) {
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
}

/// Writes `bytes` to the helper's stdin in chunks, then closes it; stops
/// at once when the returned sender is dropped (the owner stops feeding, or
/// is gone). A helper that stops reading holds back only this task.
fn start_stdin_writer(mut stdin: ChildStdin, bytes: Vec<u8>) -> oneshot::Sender<()> {
    let (stop, mut stopped) = oneshot::channel();
    tokio::spawn(async move {
        for piece in bytes.chunks(reader::CHUNK_BYTES) {
            tokio::select! {
                biased;
                _ = &mut stopped => break,
                written = stdin.write_all(piece) => {
                    if written.is_err() {
                        break;
                    }
                }
            }
        }
    });
    stop
}
