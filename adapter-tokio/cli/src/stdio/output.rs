//! The server's stdout to the client: [`start`] runs the pump on a thread
//! of its own, and [`Output`] is this program's stdout as the pump and the
//! last answers share it.
//!
//! Without `--mcp` the bytes go on as they arrive: with `splice(2)` into a
//! pipe, through a buffer into anything else. With `--mcp` each line goes
//! through the [`StdoutLineGuard`]: whole JSON-RPC messages are written,
//! each in one piece (a last one without a newline gets one), and every
//! response is struck off the client's pending requests before anything
//! else is written; every other line goes to the stderr capture.

use std::fs::File;
use std::io::{self, ErrorKind, Read};
#[cfg(target_os = "linux")]
use std::os::fd::AsFd;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rustix::event::PollFlags;
use spillguard_host::os::{enlarge_pipe, poll, write_all_waiting};
use spillguard_std::proto::StdoutLineGuard;

use super::Requests;
use super::fds::Kind;
use super::relay::Relay;
use crate::call::{CallHandle, HelperStdout};
use spillguard_std::proto::{ServerLine, StopReason};

/// Bytes asked for per `splice(2)` into a pipe.
#[cfg(target_os = "linux")]
const SPLICE_BYTES: usize = 1 << 20;

/// Bytes per read without `--mcp` where splicing is not possible.
const CHUNK: usize = 128 * 1024;

/// This program's stdout, shared by the pump and the last answers: each
/// write is whole, and once [`close`](Self::close)d nothing more goes out.
#[derive(Debug)]
pub struct Output {
    inner: Mutex<Option<File>>,
    kind: Kind,
}

impl Output {
    /// `file`, of `kind`.
    pub fn new(file: File, kind: Kind) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Some(file)),
            kind,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Option<File>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `bytes` whole; `BrokenPipe` once closed.
    pub fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
        self.forward(bytes, || {})
    }

    /// Writes `bytes` whole, then runs `then`, both before any other write
    /// or the close (a response is struck off the pending requests before
    /// the last answers are made); `BrokenPipe` once closed.
    pub fn forward(&self, bytes: &[u8], then: impl FnOnce()) -> io::Result<()> {
        match &*self.lock() {
            Some(file) => {
                write_all_waiting(file, bytes)?;
                then();
                Ok(())
            }
            None => Err(ErrorKind::BrokenPipe.into()),
        }
    }

    /// Writes what `last` makes (made after every earlier write), then
    /// closes this program's copy of stdout: nothing the server still
    /// prints goes out after it.
    pub fn close(&self, last: impl FnOnce() -> Vec<u8>) -> io::Result<()> {
        let mut file = self.lock();
        let last = last();
        let result = match &*file {
            Some(out) if !last.is_empty() => write_all_waiting(out, &last),
            _ => Ok(()),
        };
        file.take();
        result
    }
}

/// With `--mcp`: the guard's longest message, and the requests to strike
/// off as they are answered.
#[derive(Debug)]
pub struct Mcp {
    /// `--max-message-bytes`.
    pub max_message: usize,
    /// The client's requests.
    pub requests: Arc<Requests>,
}

/// How long an MCP server may live on once its stdout has ended (the
/// moment between closing it and exiting) before it is stopped.
pub const STDOUT_CLOSED_WAIT: Duration = Duration::from_millis(250);

/// Starts the pump from the server's `stdout` to `output` (the call
/// counts what it forwards and diverts); the receiver hears once the
/// server's stdout has ended. If this program's stdout is gone (the host
/// went away), the call is cancelled (and, with `relay`, no run follows).
/// With `mcp`, a server whose stdout ended and that still runs
/// [`STDOUT_CLOSED_WAIT`] later is stopped (with `relay`, that end is a
/// failure the restart policy reads as `stdout closed`).
pub fn start(
    stdout: HelperStdout,
    output: Arc<Output>,
    mcp: Option<Mcp>,
    call: &CallHandle,
    relay: Option<Arc<Relay>>,
) -> mpsc::Receiver<()> {
    let (done, ended) = mpsc::channel();
    let canceller = call.canceller();
    let _ = std::thread::Builder::new()
        .name("spillguard-stdout".into())
        .spawn(move || {
            let messages = mcp.is_some();
            let host_gone = match mcp {
                Some(mcp) => guarded(stdout, &output, &mcp, relay.as_deref()),
                None => plain(stdout, &output),
            };
            if host_gone {
                // Nobody reads our stdout any more: the host went away.
                if let Some(relay) = &relay {
                    relay.stop(StopReason::HostLeft);
                }
                canceller.cancel();
            }
            let generation = relay.as_ref().map(|relay| relay.generation());
            let _ = done.send(());
            if messages && !host_gone {
                // An MCP server whose stdout ended can answer nothing
                // more: unless it exits meanwhile (a stop then does
                // nothing), it is stopped, and its end is read as that.
                std::thread::sleep(STDOUT_CLOSED_WAIT);
                if let (Some(relay), Some(generation)) = (&relay, generation) {
                    relay.stdout_closed(generation);
                }
                canceller.cancel();
            }
        });
    ended
}

/// Copies every byte; returns whether this program's stdout is gone.
fn plain(mut stdout: HelperStdout, output: &Output) -> bool {
    #[cfg(target_os = "linux")]
    if output.kind == Kind::Pipe {
        // No `--mcp` answers to interleave: the pipe is written directly.
        let Some(pipe) = output.lock().as_ref().and_then(|f| f.try_clone().ok()) else {
            return true;
        };
        // Each hand-off to the client then moves up to `SPLICE_BYTES`.
        let _ = enlarge_pipe(pipe.as_fd(), SPLICE_BYTES);
        loop {
            match stdout.splice_to(pipe.as_fd(), SPLICE_BYTES) {
                Ok(0) => return false,
                Ok(_) => {}
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                // The host made its end non-blocking: wait for room.
                Err(error) if error.kind() == ErrorKind::WouldBlock => {
                    if poll([(pipe.as_fd(), PollFlags::OUT)], None).is_err() {
                        return true;
                    }
                }
                Err(error) if error.kind() == ErrorKind::BrokenPipe => return true,
                Err(_) => return false,
            }
        }
    }
    let mut buf = vec![0; CHUNK];
    loop {
        let read = match stdout.read(&mut buf) {
            Ok(0) => return false,
            Ok(read) => read,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        };
        if output
            .write_all(buf.get(..read).unwrap_or_default())
            .is_err()
        {
            return true;
        }
    }
}

/// Forwards whole messages only (see the module docs); with `relay`
/// (`--restart`), the answers of a replayed session are swallowed and its
/// end handed on. Returns whether this program's stdout is gone.
fn guarded(mut stdout: HelperStdout, output: &Output, mcp: &Mcp, relay: Option<&Relay>) -> bool {
    let mut guard = StdoutLineGuard::with_max_message(mcp.max_message);
    loop {
        let mut failed_write = false;
        let read = stdout.read_guarded(&mut guard, |line| {
            if let Some(relay) = relay {
                match mcp.requests.server_line(line.bytes, line.info) {
                    ServerLine::Swallow => return Ok(()),
                    ServerLine::Ready { to_server, to_host } => {
                        relay.replayed(to_server);
                        return output
                            .write_all(&to_host)
                            .inspect_err(|_| failed_write = true);
                    }
                    ServerLine::Refused(reason) => {
                        relay.refuse(reason);
                        return Ok(());
                    }
                    _ => {}
                }
            }
            // A last message without its newline gets one: clients read
            // by line.
            let bytes = line.bytes;
            let strike_off = || mcp.requests.answered(line.info);
            let written = if bytes.last() == Some(&b'\n') {
                output.forward(bytes, strike_off)
            } else {
                output.forward(&[bytes, b"\n"].concat(), strike_off)
            };
            written.inspect_err(|_| failed_write = true)
        });
        match read {
            Ok(0) => return false,
            Ok(_) => {}
            Err(_) if failed_write => return true,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}
