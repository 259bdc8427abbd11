//! The helper process: spawn it, keep its output streams for the owner.
//!
//! [`Process::spawn`] starts the helper from the std adapter's
//! [`HelperCommand`] in its own process group (the pgid is its pid,
//! remembered here and never looked up again), enlarges its output pipes
//! and hands them to the owner, which reads them itself. Around it run
//! detached tasks: a waiter that owns the [`Child`] and reports its exit,
//! and a stdin writer when the helper is given bytes. The waiter keeps
//! waiting after the call has finished, so a helper the call stopped
//! waiting for is still reaped.

use std::io;
use std::process::Stdio;

use std::any::Any;
use std::sync::Arc;

use async_process::{Child, ChildStdin, ChildStdout};
use futures_lite::{AsyncWriteExt, future};
use smol::channel::{self, Sender};
use spillguard_core::Signal;
use spillguard_kit::os::{enlarge_pipes, exit_status, signal_group};
use spillguard_kit::{HelperCommand, StdinMode};

use spillguard_kit::owner::Helper;
use spillguard_kit::pipes::{AsyncPipes, Spawned};
use spillguard_kit::stream::Forwarded;

use crate::owner::Event;
use crate::reader::{self, Stream};

/// A spawned helper, as the owner holds it: the kit's [`AsyncPipes`] of
/// async-process pipes (its pid and pgid, its output streams, its stdin
/// routed by the command's mode).
#[derive(Debug)]
pub(crate) struct Process(pub(crate) AsyncPipes<Stream, ChildStdin, ChildStdout, Sender<()>>);

impl Helper for Process {
    type Events = Sender<Event>;

    fn spawn(
        command: HelperCommand,
        pipe_size: Option<usize>,
        events: &Self::Events,
    ) -> io::Result<Self> {
        let mut child = async_command(&command).spawn()?;
        let pid = child.id();
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            // Not reachable with the stdio set above; dropping the child
            // hands it to async-process's reaper.
            signal_group(pid, Signal::Kill);
            return Err(io::Error::other("the helper's output pipes are missing"));
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

/// The waiter owns the child, waits for it and reports its exit — or that
/// it can no longer be waited for. It runs until the child is reaped, even
/// after the call has finished.
fn start_waiter(mut child: Child, events: Sender<Event>) {
    smol::spawn(async move {
        let event = match child.status().await {
            Ok(status) => Event::Exited(exit_status(status)),
            Err(_) => Event::ProcessLost,
        };
        let _ = events.try_send(event);
    })
    .detach();
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
