//! The helper process: spawn it, and hand its pipes and its exit to the
//! owner.
//!
//! [`Process::spawn`] starts the helper in its own process group (the pgid
//! is its pid, remembered here and never looked up again), enlarges its
//! output pipes and makes our ends non-blocking, so the owner can `poll`
//! them. On Linux the owner also polls a pidfd for the exit and reaps the
//! [`Child`] itself; elsewhere (or if the kernel has no pidfd) a waiter job
//! on a [worker](crate::workers) thread holds the child and sends its exit
//! through the [`Mailbox`]. A helper given stdin bytes gets a writer job.
//! A confined helper is spawned by the host layer (its steps run before exec,
//! without a fork) and comes with its pidfd; the owner reaps it through
//! that pidfd.

use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::process::Pid;
use spillguard_core::Signal;

use crate::owner::Pipe;
use spillguard_host::blocking::{Event, Mailbox, RawStreams as Raw, SharedPipe as Stdin};
use spillguard_host::os::{enlarge_pipes, exit_status, signal_group};
use spillguard_host::read_buffers::CHUNK_BYTES;
use spillguard_host::stream::{Forwarded, SharedStdin};
use spillguard_host::{HelperCommand, StdinMode};

/// A spawned helper, as the owner holds it.
#[derive(Debug)]
pub(crate) struct Process {
    /// The helper's pid, which is also its process group id.
    pub(crate) pid: u32,
    /// Capacity of the stderr pipe after asking to enlarge it; `None` if not
    /// asked or refused.
    pub(crate) pipe_capacity: Option<u64>,
    /// Our ends of the helper's stdout and stderr, non-blocking, until each
    /// reaches end-of-file.
    pub(crate) pipes: [Option<OwnedFd>; 2],
    /// The child and its pidfd, until it is reaped; `None` from the start
    /// when a waiter job holds the child.
    pub(crate) exit: Option<ExitWatch>,
    stdin_closed: Option<Arc<AtomicBool>>,
    /// A streamed call's stdin, shared with the caller's writer.
    streamed_stdin: Option<Stdin>,
    /// A streamed call's stdout, until handed to the caller.
    streamed_stdout: Option<ChildStdout>,
}

/// The child, reaped by the owner once its pidfd is readable.
#[derive(Debug)]
pub(crate) struct ExitWatch {
    pidfd: OwnedFd,
    /// `None` for a child the host layer spawned: the pidfd alone reaps it.
    child: Option<Child>,
}

impl ExitWatch {
    /// The pidfd, for the owner's `poll`.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    /// The exit, once the pidfd said the child has exited: `Some(Ok)` with
    /// the status (the child is reaped), `Some(Err)` if it can no longer be
    /// waited for, `None` if it is still running (a spurious wake-up).
    pub(crate) fn reap(&mut self) -> Option<io::Result<std::process::ExitStatus>> {
        match &mut self.child {
            Some(child) => child.try_wait().transpose(),
            None => spillguard_host::confine::try_reap(self.pidfd.as_fd()).transpose(),
        }
    }

    /// Waits for the child's exit, reaping it.
    fn wait(mut self) {
        match &mut self.child {
            Some(child) => {
                let _ = child.wait();
            }
            None => {
                let _ = spillguard_host::confine::reap(self.pidfd.as_fd());
            }
        }
    }
}

impl Process {
    /// Spawns `command`. On error nothing is left running: a helper whose
    /// jobs could not be started is killed and reaped before the error is
    /// returned.
    pub(crate) fn spawn(
        command: HelperCommand,
        pipe_size: Option<usize>,
        mailbox: &Mailbox,
    ) -> io::Result<Self> {
        if let Some(spawned) = command.spawn_confined() {
            return Self::confined(spawned?, command.stdin, command.stdout_streamed, pipe_size);
        }
        let mut child = command.to_std().spawn()?;
        let pid = child.id();
        let prepared = match (child.stdout.take(), child.stderr.take()) {
            (Some(stdout), Some(stderr)) => {
                let streamed = command.stdout_streamed;
                prepare(
                    child.stdin.take(),
                    (stdout, streamed),
                    stderr,
                    command.stdin,
                    pipe_size,
                )
            }
            _ => Err(io::Error::other("the helper's output pipes are missing")),
        };
        let Prepared {
            pipes,
            pipe_capacity,
            stdin_closed,
            streamed_stdin,
            streamed_stdout,
        } = match prepared {
            Ok(prepared) => prepared,
            Err(error) => {
                signal_group(pid, Signal::Kill);
                let _ = child.wait();
                return Err(error);
            }
        };
        let exit = match pidfd(pid) {
            Some(pidfd) => Some(ExitWatch {
                pidfd,
                child: Some(child),
            }),
            None => {
                if let Err(error) = start_waiter(child, mailbox.clone()) {
                    // The child went down with the job that was to own it.
                    signal_group(pid, Signal::Kill);
                    reap(pid);
                    return Err(error);
                }
                None
            }
        };
        Ok(Self {
            pid,
            pipe_capacity,
            pipes,
            exit,
            stdin_closed,
            streamed_stdin,
            streamed_stdout,
        })
    }

    /// A confined helper the host layer spawned, with its pidfd.
    fn confined(
        spawned: spillguard_host::confine::RawChild,
        stdin: StdinMode,
        stdout_streamed: bool,
        pipe_size: Option<usize>,
    ) -> io::Result<Self> {
        let spillguard_host::confine::RawChild {
            pid,
            pidfd,
            stdin: stdin_pipe,
            stdout,
            stderr,
        } = spawned;
        let exit = ExitWatch { pidfd, child: None };
        let prepared = prepare(
            stdin_pipe,
            (stdout, stdout_streamed),
            stderr,
            stdin,
            pipe_size,
        );
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(error) => {
                signal_group(pid, Signal::Kill);
                exit.wait();
                return Err(error);
            }
        };
        Ok(Self {
            pid,
            pipe_capacity: prepared.pipe_capacity,
            pipes: prepared.pipes,
            exit: Some(exit),
            stdin_closed: prepared.stdin_closed,
            streamed_stdin: prepared.streamed_stdin,
            streamed_stdout: prepared.streamed_stdout,
        })
    }

    /// Stops feeding stdin; the writer closes it after its current write.
    /// A streamed call's stdin is closed under the caller's writer.
    pub(crate) fn close_stdin(&self) {
        if let Some(closed) = &self.stdin_closed {
            closed.store(true, Ordering::Release);
        }
        if let Some(stdin) = &self.streamed_stdin {
            stdin.close();
        }
    }

    /// A streamed call's stdin and stdout for the caller, once (the
    /// handle reaches the owner its own way, not through `_events`).
    pub(crate) fn take_streams(
        &mut self,
        _events: &Mailbox,
        forwarded: Arc<Forwarded>,
    ) -> Option<Raw> {
        Some(Raw {
            stdin: self.streamed_stdin.clone(),
            stdout: self.streamed_stdout.take()?,
            forwarded,
        })
    }

    /// Our end of `pipe`, while it is open.
    pub(crate) fn pipe(&self, pipe: Pipe) -> Option<BorrowedFd<'_>> {
        self.pipes[pipe as usize].as_ref().map(AsFd::as_fd)
    }

    /// Whether the owner still has something to wait for: an open pipe or
    /// an unreaped child.
    pub(crate) fn is_open(&self) -> bool {
        self.pipes.iter().any(Option::is_some) || self.exit.is_some()
    }
}

impl Drop for Process {
    /// Only an owner that panicked drops a helper it has not reaped. Nobody
    /// supervises it any more, so its group is killed (the unreaped leader
    /// keeps the pgid from being reused) and a job reaps it: no descendant
    /// and no zombie is left. Where a waiter job holds the child (no
    /// pidfd), that job reaps it, and nothing is signalled: the helper may
    /// already be reaped and its pgid another group's.
    fn drop(&mut self) {
        if let Some(exit) = self.exit.take() {
            signal_group(self.pid, Signal::Kill);
            let reaper = crate::workers::run(move || exit.wait());
            if reaper.is_err() {
                // The child went down with the job: reap it here.
                reap(self.pid);
            }
        }
    }
}

struct Prepared {
    pipes: [Option<OwnedFd>; 2],
    pipe_capacity: Option<u64>,
    stdin_closed: Option<Arc<AtomicBool>>,
    streamed_stdin: Option<Stdin>,
    streamed_stdout: Option<ChildStdout>,
}

/// Our ends of the output pipes, enlarged and non-blocking, and the stdin
/// writer if the helper is given bytes. A streamed stdout (`stdout.1`)
/// stays blocking and goes to the caller, with stdin when the caller
/// writes it.
fn prepare(
    stdin_pipe: Option<ChildStdin>,
    (stdout, stdout_streamed): (ChildStdout, bool),
    stderr: ChildStderr,
    stdin: StdinMode,
    pipe_size: Option<usize>,
) -> io::Result<Prepared> {
    let pipe_capacity = enlarge_pipes(&stdout, &stderr, pipe_size);
    let stderr = Some(non_blocking(stderr)?);
    let mut prepared = Prepared {
        pipes: [None, stderr],
        pipe_capacity,
        stdin_closed: None,
        streamed_stdin: None,
        streamed_stdout: None,
    };
    match (stdin, stdin_pipe) {
        (StdinMode::Streamed, Some(pipe)) => {
            prepared.streamed_stdin = Some(SharedStdin::new(Arc::new(pipe)));
        }
        (StdinMode::Streamed, None) => {
            return Err(io::Error::other("the helper's stdin pipe is missing"));
        }
        (StdinMode::Bytes(bytes), Some(pipe)) => {
            prepared.stdin_closed = Some(start_stdin_writer(pipe, bytes)?);
        }
        _ => {}
    }
    match stdout_streamed {
        true => prepared.streamed_stdout = Some(stdout),
        false => prepared.pipes[0] = Some(non_blocking(stdout)?),
    }
    Ok(prepared)
}

/// Our end of an output pipe, made non-blocking (the helper's end is a
/// separate open file and stays blocking).
fn non_blocking(pipe: impl Into<OwnedFd>) -> io::Result<OwnedFd> {
    let fd: OwnedFd = pipe.into();
    rustix::io::ioctl_fionbio(&fd, true)?;
    Ok(fd)
}

/// A pidfd for the (unreaped, so never reused) `pid`, where the kernel has
/// them.
#[cfg(target_os = "linux")]
fn pidfd(pid: u32) -> Option<OwnedFd> {
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// No pidfd here: a waiter job holds the child.
#[cfg(not(target_os = "linux"))]
fn pidfd(_pid: u32) -> Option<OwnedFd> {
    None
}

/// The waiter owns the child, waits for it and sends its exit — or that it
/// can no longer be waited for — to the owner. It reaps the child even
/// once nobody listens.
pub(crate) fn start_waiter(mut child: Child, mailbox: Mailbox) -> io::Result<()> {
    crate::workers::run(move || {
        let event = match child.wait() {
            Ok(status) => Event::Exited(exit_status(status)),
            Err(_) => Event::ProcessLost,
        };
        let _ = mailbox.send(event);
    })
}

/// Writes `bytes` to the helper's stdin in chunks, then closes it; stops
/// early when asked. A helper that stops reading blocks only this job,
/// until it exits.
fn start_stdin_writer(mut stdin: ChildStdin, bytes: Vec<u8>) -> io::Result<Arc<AtomicBool>> {
    let closed = Arc::new(AtomicBool::new(false));
    let stop = closed.clone();
    crate::workers::run(move || {
        for piece in bytes.chunks(CHUNK_BYTES) {
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

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::{Duration, Instant};

    fn gone_within(pid: u32, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            // A zombie still has its /proc entry; a reaped process has none.
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn the_waiter_sends_the_exit_through_the_mailbox() {
        let (mailbox, inbox) = Mailbox::open().unwrap();
        let child = HelperCommand::shell_script("exit 7")
            .to_std()
            .spawn()
            .unwrap();
        start_waiter(child, mailbox).unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        let event = loop {
            if let Some(event) = inbox.try_next() {
                break event;
            }
            assert!(Instant::now() < until, "no exit within 10 s");
            std::thread::sleep(Duration::from_millis(5));
        };
        match event {
            Event::Exited(status) => assert_eq!(status.code, Some(7)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_helper_dropped_unreaped_is_killed_and_reaped() {
        let (mailbox, _inbox) = Mailbox::open().unwrap();
        let command = HelperCommand::new("sleep").arg("30");
        let process = Process::spawn(command, None, &mailbox).unwrap();
        assert!(process.exit.is_some(), "Linux has pidfds");
        let pid = process.pid;
        let dropped = Instant::now();
        drop(process);
        assert!(
            gone_within(pid, Duration::from_secs(10)),
            "{pid} not reaped"
        );
        // Killed, not waited for to the end of its 30 s.
        assert!(dropped.elapsed() < Duration::from_secs(10));
    }
}
