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
//! waiting for is still reaped. A confined helper is spawned by the host layer
//! (its steps run before exec, without a fork); its waiter waits on the
//! pidfd the host layer hands over.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use spillguard_core::Signal;
use spillguard_host::HelperCommand;
use spillguard_host::os::{exit_status, signal_group};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWriteExt, Interest, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

use spillguard_host::pipes::{AsyncSpawn, SpawnedChild};
use spillguard_host::run_loop::Event;

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

/// A helper as its waiter owns it: tokio's child, or the pidfd of one the
/// host layer spawned.
#[derive(Debug)]
pub(crate) enum Helper {
    /// Spawned by tokio.
    Tokio(Child),
    /// Spawned by the host layer (a confined call).
    Pidfd(OwnedFd),
}

/// How tokio spawns a helper: a tokio child, its waiter and stdin writer
/// spawned on the current runtime (the owner's).
#[derive(Debug)]
pub(crate) struct TokioSpawn;

impl AsyncSpawn for TokioSpawn {
    type Child = Helper;
    type Stream = Stream;
    type Stdin = ChildStdin;
    type Stdout = ChildStdout;
    type Stderr = ChildStderr;
    type Stop = oneshot::Sender<()>;
    type Events = mpsc::UnboundedSender<Event<Reply>>;

    fn spawn(command: &HelperCommand) -> io::Result<SpawnedChild<Self>> {
        if let Some(spawned) = command.spawn_confined() {
            return confined(spawned?);
        }
        let mut child = tokio::process::Command::from(command.to_std()).spawn()?;
        match (child.id(), child.stdout.take(), child.stderr.take()) {
            (Some(pid), Some(stdout), Some(stderr)) => Ok(SpawnedChild {
                pid,
                stdin: child.stdin.take(),
                stdout,
                stderr,
                child: Helper::Tokio(child),
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
    fn start_waiter(child: Helper, events: &Self::Events) {
        let events = events.clone();
        tokio::spawn(async move {
            let status = match child {
                Helper::Tokio(mut child) => child.wait().await,
                Helper::Pidfd(pidfd) => wait_pidfd(pidfd).await,
            };
            let event = match status {
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

/// A confined helper the host layer spawned, its pipes in tokio's reactor; on
/// error it is killed and reaped.
fn confined(spawned: spillguard_host::confine::RawChild) -> io::Result<SpawnedChild<TokioSpawn>> {
    let spillguard_host::confine::RawChild {
        pid,
        pidfd,
        stdin,
        stdout,
        stderr,
    } = spawned;
    let pipes = (|| {
        Ok::<_, io::Error>((
            stdin.map(ChildStdin::from_std).transpose()?,
            ChildStdout::from_std(stdout)?,
            ChildStderr::from_std(stderr)?,
        ))
    })();
    match pipes {
        Ok((stdin, stdout, stderr)) => Ok(SpawnedChild {
            pid,
            stdin,
            stdout,
            stderr,
            child: Helper::Pidfd(pidfd),
        }),
        Err(error) => {
            signal_group(pid, Signal::Kill);
            tokio::spawn(async move {
                let _ = wait_pidfd(pidfd).await;
            });
            Err(error)
        }
    }
}

/// Waits, in the reactor, until the child `pidfd` names has exited, and
/// reaps it.
#[allow(unsafe_code)]
async fn wait_pidfd(pidfd: OwnedFd) -> io::Result<std::process::ExitStatus> {
    // SAFETY: the `OwnedFd` keeps its descriptor open, and the same, for as
    // long as the `AsyncFd` owns it.
    let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }
        .map_err(io::Error::from)?;
    loop {
        let mut ready = pidfd.readable().await?;
        if let Some(status) = spillguard_host::confine::try_reap(pidfd.get_ref().as_fd())? {
            return Ok(status);
        }
        ready.clear_ready();
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
