//! The helper process: spawn it, keep its output streams for the owner.
//!
//! [`SmolSpawn::spawn`] starts the helper from the std adapter's
//! [`HelperCommand`] in its own process group (the pgid is its pid,
//! remembered here and never looked up again), enlarges its output pipes
//! and hands them to the owner, which reads them itself. Around it run
//! detached tasks: a waiter that owns the [`Child`] and reports its exit,
//! and a stdin writer when the helper is given bytes. The waiter keeps
//! waiting after the call has finished, so a helper the call stopped
//! waiting for is still reaped. A confined helper is spawned by the host layer
//! (its steps run before exec, without a fork); its waiter waits on the
//! pidfd the host layer hands over. Either way the pipes are the standard
//! library's, in smol's reactor.
//!
//! async-process converts the std command but resets its stdio, so the
//! pipes are set again after the conversion.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::process::Stdio;

use async_process::Child;
use futures_lite::{AsyncWriteExt, future};
use smol::Async;
use smol::channel::{self, Sender};
use spillguard_core::Signal;
use spillguard_host::os::{exit_status, signal_group};
use spillguard_host::{HelperCommand, StdinMode};

use spillguard_host::pipes::{AsyncSpawn, SpawnedChild};
use spillguard_host::run_loop::Event;

use crate::reader::{self, Stream};
use crate::runtime::Reply;

/// The helper's stdin pipe, in smol's reactor.
pub(crate) type ChildStdin = Async<std::process::ChildStdin>;
/// The helper's stdout pipe, in smol's reactor.
pub(crate) type ChildStdout = Async<std::process::ChildStdout>;
/// The helper's stderr pipe, in smol's reactor.
pub(crate) type ChildStderr = Async<std::process::ChildStderr>;

/// A helper as its waiter owns it: async-process's child, or the pidfd of
/// one the host layer spawned.
#[derive(Debug)]
pub(crate) enum Helper {
    /// Spawned by async-process.
    Process(Child),
    /// Spawned by the host layer (a confined call).
    Pidfd(OwnedFd),
}

/// How smol spawns a helper: an async-process child, its waiter and
/// stdin writer detached on the global executor.
#[derive(Debug)]
pub(crate) struct SmolSpawn;

impl AsyncSpawn for SmolSpawn {
    type Child = Helper;
    type Stream = Stream;
    type Stdin = ChildStdin;
    type Stdout = ChildStdout;
    type Stderr = ChildStderr;
    type Stop = Sender<()>;
    type Events = Sender<Event<Reply>>;

    fn spawn(command: &HelperCommand) -> io::Result<SpawnedChild<Self>> {
        if let Some(spawned) = command.spawn_confined() {
            let spillguard_host::confine::RawChild {
                pid,
                pidfd,
                stdin,
                stdout,
                stderr,
            } = spawned?;
            let child = Helper::Pidfd(pidfd);
            let pipes = in_reactor(stdin, stdout, stderr);
            return finish_spawn(child, pid, pipes);
        }
        let mut child = async_command(command).spawn()?;
        let pid = child.id();
        let pipes = match (child.stdout.take(), child.stderr.take()) {
            (Some(stdout), Some(stderr)) => {
                let stdin = child.stdin.take().map(OwnedFd::try_from).transpose();
                match (stdin, OwnedFd::try_from(stdout), OwnedFd::try_from(stderr)) {
                    (Ok(stdin), Ok(stdout), Ok(stderr)) => in_reactor(
                        stdin.map(std::process::ChildStdin::from),
                        std::process::ChildStdout::from(stdout),
                        std::process::ChildStderr::from(stderr),
                    ),
                    (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => Err(e),
                }
            }
            // Not reachable with the stdio set above.
            _ => Err(io::Error::other("the helper's output pipes are missing")),
        };
        finish_spawn(Helper::Process(child), pid, pipes)
    }

    /// The waiter runs until the child is reaped, even after the call has
    /// finished, and reports its exit — or that it can no longer be
    /// waited for.
    fn start_waiter(child: Helper, events: &Self::Events) {
        let events = events.clone();
        smol::spawn(async move {
            let status = match child {
                Helper::Process(mut child) => child.status().await,
                Helper::Pidfd(pidfd) => wait_pidfd(pidfd).await,
            };
            let event = match status {
                Ok(status) => Event::Exited(exit_status(status)),
                Err(_) => Event::ProcessLost,
            };
            let _ = events.try_send(event);
        })
        .detach();
    }

    fn stdout(pipe: ChildStdout) -> Stream {
        Stream::Stdout(pipe)
    }

    fn stderr(pipe: ChildStderr) -> Stream {
        Stream::Stderr(pipe)
    }

    fn feed(stdin: ChildStdin, bytes: Vec<u8>) -> Sender<()> {
        start_stdin_writer(stdin, bytes)
    }
}

/// The pipes as the standard library's types, in smol's reactor.
fn in_reactor(
    stdin: Option<std::process::ChildStdin>,
    stdout: std::process::ChildStdout,
    stderr: std::process::ChildStderr,
) -> io::Result<(Option<ChildStdin>, ChildStdout, ChildStderr)> {
    Ok((
        stdin.map(Async::new).transpose()?,
        Async::new(stdout)?,
        Async::new(stderr)?,
    ))
}

/// The spawned child with its pipes; if they could not be set up, the
/// child is killed and its waiter reaps it.
fn finish_spawn(
    child: Helper,
    pid: u32,
    pipes: io::Result<(Option<ChildStdin>, ChildStdout, ChildStderr)>,
) -> io::Result<SpawnedChild<SmolSpawn>> {
    match pipes {
        Ok((stdin, stdout, stderr)) => Ok(SpawnedChild {
            child,
            pid,
            stdin,
            stdout,
            stderr,
        }),
        Err(error) => {
            signal_group(pid, Signal::Kill);
            smol::spawn(async move {
                let _ = match child {
                    Helper::Process(mut child) => child.status().await,
                    Helper::Pidfd(pidfd) => wait_pidfd(pidfd).await,
                };
            })
            .detach();
            Err(error)
        }
    }
}

/// Waits, in smol's reactor, until the child `pidfd` names has exited,
/// and reaps it.
async fn wait_pidfd(pidfd: OwnedFd) -> io::Result<std::process::ExitStatus> {
    let pidfd = Async::new(pidfd)?;
    loop {
        if let Some(status) = spillguard_host::confine::try_reap(pidfd.get_ref().as_fd())? {
            return Ok(status);
        }
        pidfd.readable().await?;
    }
}

/// The async-process command for `command`. The conversion from the std
/// command keeps the program, arguments, environment, working directory
/// and process group, but not the stdio: async-process marks them unset
/// and would make them inherited, so they are set again here.
fn async_command(command: &HelperCommand) -> async_process::Command {
    let stdin = match command.stdin {
        StdinMode::Bytes(_) | StdinMode::Streamed => Stdio::piped(),
        // `Null`, and any mode added later: nothing to read.
        _ => Stdio::null(),
    };
    let mut converted = async_process::Command::from(command.to_std());
    converted
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    converted
}

/// Writes `bytes` to the helper's stdin in chunks, then closes it. Stops,
/// closing the pipe, as soon as the returned sender is dropped, even while
/// a write waits for a helper that stopped reading.
fn start_stdin_writer(mut stdin: ChildStdin, bytes: Vec<u8>) -> Sender<()> {
    let (open, closed) = channel::bounded::<()>(1);
    smol::spawn(async move {
        let write = async {
            for piece in bytes.chunks(reader::CHUNK_BYTES) {
                if stdin.write_all(piece).await.is_err() {
                    break;
                }
            }
        };
        // `recv` ends only when `open` is dropped: nothing is ever sent.
        future::or(write, async {
            let _ = closed.recv().await;
        })
        .await;
        drop(stdin);
    })
    .detach();
    open
}
