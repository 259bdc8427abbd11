//! The helper process: spawn it with its threads, signal its group.
//!
//! [`Process::spawn`] starts the helper in its own process group (the pgid
//! is its pid, remembered here and never looked up again), enlarges its
//! output pipes, and starts the jobs around it, each on a
//! [worker](crate::workers) thread: one reader per stream, a waiter that
//! owns the [`Child`] (both report to the call itself), and a stdin writer
//! when the helper is given bytes. The waiter keeps waiting after the call
//! has finished, so a helper the call stopped waiting for is still reaped.

use std::io::{self, Write};
use std::process::{Child, ChildStdin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;

use rustix::process::Pid;
use spillguard_core::Signal;

use crate::command::{HelperCommand, StdinMode};
use crate::os::{enlarge_pipes, exit_status, signal_group};
use crate::owner::{Event, Pipe};
use crate::reader;
use crate::shared_call::SharedCall;

/// A spawned helper, as the owner holds it: its pid (and pgid), its pipe
/// capacity, and how to stop feeding its stdin.
#[derive(Debug)]
pub(crate) struct Process {
    /// The helper's pid, which is also its process group id.
    pub(crate) pid: u32,
    /// Capacity of the stderr pipe after asking to enlarge it; `None` if not
    /// asked or refused.
    pub(crate) pipe_capacity: Option<u64>,
    stdin_closed: Option<Arc<AtomicBool>>,
}

impl Process {
    /// Spawns `command`; its readers feed `call`, every other event about it
    /// goes to `events`. On error
    /// nothing is left running: a helper whose threads could not be started
    /// is killed and reaped before the error is returned.
    pub(crate) fn spawn(
        command: HelperCommand,
        pipe_size: Option<usize>,
        call: &Arc<SharedCall>,
        events: &SyncSender<Event>,
    ) -> io::Result<Self> {
        let mut child = command.to_std().spawn()?;
        let pid = child.id();
        match start_threads(&mut child, command.stdin, pipe_size, call, events) {
            Ok((stdin_closed, pipe_capacity)) => {
                match start_waiter(child, call.clone(), events.clone()) {
                    Ok(()) => Ok(Self {
                        pid,
                        pipe_capacity,
                        stdin_closed,
                    }),
                    Err(error) => {
                        // The child went down with the thread that was to own it.
                        signal_group(pid, Signal::Kill);
                        reap(pid);
                        Err(error)
                    }
                }
            }
            Err(error) => {
                signal_group(pid, Signal::Kill);
                let _ = child.wait();
                Err(error)
            }
        }
    }

    /// Stops feeding stdin; the writer closes it after its current write.
    pub(crate) fn close_stdin(&self) {
        if let Some(closed) = &self.stdin_closed {
            closed.store(true, Ordering::Release);
        }
    }
}

type Threads = (Option<Arc<AtomicBool>>, Option<u64>);

fn start_threads(
    child: &mut Child,
    stdin: StdinMode,
    pipe_size: Option<usize>,
    call: &Arc<SharedCall>,
    events: &SyncSender<Event>,
) -> io::Result<Threads> {
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(io::Error::other("the helper's output pipes are missing"));
    };
    let pipe_capacity = enlarge_pipes(&stdout, &stderr, pipe_size);
    reader::start(Pipe::Stdout, stdout, call.clone(), events.clone())?;
    reader::start(Pipe::Stderr, stderr, call.clone(), events.clone())?;
    let stdin_closed = match (stdin, child.stdin.take()) {
        (StdinMode::Bytes(bytes), Some(pipe)) => Some(start_stdin_writer(pipe, bytes)?),
        _ => None,
    };
    Ok((stdin_closed, pipe_capacity))
}

/// The waiter owns the child, waits for it and reports its exit — or that
/// it can no longer be waited for — to the call itself, waking the owner if
/// the core then has actions. It reaps the child even once the call has
/// stopped listening.
fn start_waiter(
    mut child: Child,
    call: Arc<SharedCall>,
    events: SyncSender<Event>,
) -> io::Result<()> {
    crate::workers::run(move || {
        let waited = child.wait();
        let reported = call.report(|call, now| match waited {
            Ok(status) => call.handle_exit(now, exit_status(status)),
            Err(_) => call.handle_process_lost(now),
        });
        reported.wake(&events);
    })
}

/// Writes `bytes` to the helper's stdin in chunks, then closes it; stops
/// early when asked. A helper that stops reading blocks only this thread,
/// until it exits.
fn start_stdin_writer(mut stdin: ChildStdin, bytes: Vec<u8>) -> io::Result<Arc<AtomicBool>> {
    let closed = Arc::new(AtomicBool::new(false));
    let stop = closed.clone();
    crate::workers::run(move || {
        for piece in bytes.chunks(reader::CHUNK_BYTES) {
            if stop.load(Ordering::Acquire) || stdin.write_all(piece).is_err() {
                break;
            }
        }
    })?;
    Ok(closed)
}

/// Reaps `pid` when its `Child` is lost.
fn reap(pid: u32) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
    }
}
