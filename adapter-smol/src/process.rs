//! The helper process: spawn it, keep its output streams for the owner.
//!
//! [`SmolSpawn::spawn`] starts the helper from the std adapter's
//! [`HelperCommand`] in its own process group (the pgid is its pid,
//! remembered here and never looked up again), enlarges its output pipes
//! and hands them to the owner, which reads them itself. Around it run
//! detached tasks: a waiter that owns the [`Child`] and reports its exit,
//! and a stdin writer when the helper is given bytes. The waiter keeps
//! waiting after the call has finished, so a helper the call stopped
//! waiting for is still reaped.
//!
//! async-process converts the std command but resets its stdio, so the
//! pipes are set again after the conversion.

use std::io;
use std::process::Stdio;

use async_process::{Child, ChildStderr, ChildStdin, ChildStdout};
use futures_lite::{AsyncWriteExt, future};
use smol::channel::{self, Sender};
use spillguard_core::Signal;
use spillguard_kit::os::{exit_status, signal_group};
use spillguard_kit::{HelperCommand, StdinMode};

use spillguard_kit::pipes::{AsyncSpawn, SpawnedChild};
use spillguard_kit::run_loop::Event;

use crate::reader::{self, Stream};
use crate::runtime::Reply;

/// How smol spawns a helper: an async-process child, its waiter and
/// stdin writer detached on the global executor.
#[derive(Debug)]
pub(crate) struct SmolSpawn;

impl AsyncSpawn for SmolSpawn {
    type Child = Child;
    type Stream = Stream;
    type Stdin = ChildStdin;
    type Stdout = ChildStdout;
    type Stderr = ChildStderr;
    type Stop = Sender<()>;
    type Events = Sender<Event<Reply>>;

    fn spawn(command: &HelperCommand) -> io::Result<SpawnedChild<Self>> {
        let mut child = async_command(command).spawn()?;
        let pid = child.id();
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            // Not reachable with the stdio set above; dropping the child
            // hands it to async-process's reaper.
            signal_group(pid, Signal::Kill);
            return Err(io::Error::other("the helper's output pipes are missing"));
        };
        let stdin = child.stdin.take();
        Ok(SpawnedChild {
            child,
            pid,
            stdin,
            stdout,
            stderr,
        })
    }

    /// The waiter runs until the child is reaped, even after the call has
    /// finished, and reports its exit — or that it can no longer be
    /// waited for.
    fn start_waiter(mut child: Child, events: &Self::Events) {
        let events = events.clone();
        smol::spawn(async move {
            let event = match child.status().await {
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
