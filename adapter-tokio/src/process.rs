//! The helper process: spawn it, keep its output streams for the owner.
//!
//! [`TokioSpawn::spawn`] turns the [`HelperCommand`] into the std command the
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
use spillguard_kit::os::{exit_status, signal_group};
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

use spillguard_kit::pipes::{AsyncSpawn, SpawnedChild};
use spillguard_kit::run_loop::Event;

use crate::reader;
use crate::runtime::Reply;

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

/// How tokio spawns a helper: a tokio child, its waiter and stdin writer
/// spawned on the current runtime (the owner's).
#[derive(Debug)]
pub(crate) struct TokioSpawn;

impl AsyncSpawn for TokioSpawn {
    type Child = Child;
    type Stream = Stream;
    type Stdin = ChildStdin;
    type Stdout = ChildStdout;
    type Stderr = ChildStderr;
    type Stop = oneshot::Sender<()>;
    type Events = mpsc::UnboundedSender<Event<Reply>>;

    fn spawn(command: &HelperCommand) -> io::Result<SpawnedChild<Self>> {
        let mut child = tokio::process::Command::from(command.to_std()).spawn()?;
        match (child.id(), child.stdout.take(), child.stderr.take()) {
            (Some(pid), Some(stdout), Some(stderr)) => Ok(SpawnedChild {
                pid,
                stdin: child.stdin.take(),
                stdout,
                stderr,
                child,
            }),
            (pid, ..) => {
                if let Some(pid) = pid {
                    signal_group(pid, Signal::Kill);
                }
                reap_in_background(child);
                Err(io::Error::other(
                    "the helper's pid or output pipes are missing",
                ))
            }
        }
    }

    /// The waiter outlives the call if need be; it reports the exit, or
    /// that the child can no longer be waited for.
    fn start_waiter(mut child: Child, events: &Self::Events) {
        let events = events.clone();
        tokio::spawn(async move {
            let event = match child.wait().await {
                Ok(status) => Event::Exited(exit_status(status)),
                Err(_) => Event::ProcessLost,
            };
            let _ = events.send(event);
        });
    }

    fn stdout(pipe: ChildStdout) -> Stream {
        Stream::Stdout(pipe)
    }

    fn stderr(pipe: ChildStderr) -> Stream {
        Stream::Stderr(pipe)
    }

    fn feed(stdin: ChildStdin, bytes: Vec<u8>) -> oneshot::Sender<()> {
        start_stdin_writer(stdin, bytes)
    }
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
