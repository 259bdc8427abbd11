//! The server's stdout to the client: [`start`] runs the pump on a thread
//! of its own, and [`Output`] is this program's stdout as the pump and the
//! last answers share it.
//!
//! Without `--mcp` the bytes go on as they arrive: with `splice(2)` into a
//! pipe, through a buffer into anything else. With `--mcp` each line goes
//! through the [`StdoutLineGuard`]: whole JSON-RPC messages are written,
//! each in one piece, and every response is struck off the client's
//! [`PendingRequests`]; every other line goes to the stderr capture.

use std::fs::File;
use std::io::{self, ErrorKind, Read};
#[cfg(target_os = "linux")]
use std::os::fd::AsFd;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use spillguard_std::core::{PendingRequests, StdoutLineGuard};

use super::fds::{self, Kind};
use crate::call::{CallHandle, HelperStdout};

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
        match &*self.lock() {
            Some(file) => fds::write_all_waiting(file, bytes),
            None => Err(ErrorKind::BrokenPipe.into()),
        }
    }

    /// Writes `last` (if any), then closes this program's copy of stdout:
    /// nothing the server still prints goes out after it.
    pub fn close(&self, last: &[u8]) -> io::Result<()> {
        let file = self.lock().take();
        match file {
            Some(file) if !last.is_empty() => fds::write_all_waiting(&file, last),
            _ => Ok(()),
        }
    }
}

/// What the pump forwarded and, with `--mcp`, diverted.
#[derive(Debug, Default, Clone, Copy)]
pub struct Forwarded {
    /// Bytes written to the client.
    pub bytes: u64,
    /// Lines sent to the stderr capture.
    pub lines_diverted: u64,
    /// Their bytes.
    pub bytes_diverted: u64,
}

/// With `--mcp`: the guard's longest message, and the requests to strike
/// off as they are answered.
#[derive(Debug)]
pub struct Mcp {
    /// `--max-message-bytes`.
    pub max_message: usize,
    /// The client's requests.
    pub pending: Arc<Mutex<PendingRequests>>,
}

/// Starts the pump from the server's `stdout` to `output`; the receiver
/// gets what it forwarded once the server's stdout has ended. If this
/// program's stdout is gone (the host went away), the call is cancelled.
pub fn start(
    stdout: HelperStdout,
    output: Arc<Output>,
    mcp: Option<Mcp>,
    call: &CallHandle,
) -> mpsc::Receiver<Forwarded> {
    let (done, ended) = mpsc::channel();
    let canceller = call.canceller();
    let _ = std::thread::Builder::new()
        .name("spillguard-stdout".into())
        .spawn(move || {
            let (forwarded, host_gone) = match mcp {
                Some(mcp) => guarded(stdout, &output, &mcp),
                None => plain(stdout, &output),
            };
            if host_gone {
                // Nobody reads our stdout any more: the host went away.
                canceller.cancel();
            }
            let _ = done.send(forwarded);
        });
    ended
}

/// Copies every byte; returns what it forwarded and whether this
/// program's stdout is gone.
fn plain(mut stdout: HelperStdout, output: &Output) -> (Forwarded, bool) {
    let mut forwarded = Forwarded::default();
    #[cfg(target_os = "linux")]
    if output.kind == Kind::Pipe {
        // No `--mcp` answers to interleave: the pipe is written directly.
        let Some(pipe) = output.lock().as_ref().and_then(|f| f.try_clone().ok()) else {
            return (forwarded, true);
        };
        loop {
            match stdout.splice_to(pipe.as_fd(), SPLICE_BYTES) {
                Ok(0) => return (forwarded, false),
                Ok(moved) => forwarded.bytes += moved as u64,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) if error.kind() == ErrorKind::BrokenPipe => return (forwarded, true),
                Err(_) => return (forwarded, false),
            }
        }
    }
    let mut buf = vec![0; CHUNK];
    loop {
        let read = match stdout.read(&mut buf) {
            Ok(0) => return (forwarded, false),
            Ok(read) => read,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return (forwarded, false),
        };
        if output
            .write_all(buf.get(..read).unwrap_or_default())
            .is_err()
        {
            return (forwarded, true);
        }
        forwarded.bytes += read as u64;
    }
}

/// Forwards whole messages only (see the module docs).
fn guarded(mut stdout: HelperStdout, output: &Output, mcp: &Mcp) -> (Forwarded, bool) {
    let mut guard = StdoutLineGuard::with_max_message(mcp.max_message);
    let (mut forwarded, mut read_in_all) = (0_u64, 0_u64);
    loop {
        let mut failed_write = false;
        let read = stdout.read_guarded(&mut guard, |line| {
            output
                .write_all(line.bytes)
                .inspect_err(|_| failed_write = true)?;
            forwarded += line.bytes.len() as u64;
            mcp.pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .handle_server(line.info);
            Ok(())
        });
        let done = |gone| {
            let forwarded = Forwarded {
                bytes: forwarded,
                lines_diverted: guard.lines_diverted(),
                bytes_diverted: read_in_all.saturating_sub(forwarded),
            };
            (forwarded, gone)
        };
        match read {
            Ok(0) => return done(false),
            Ok(read) => read_in_all += read as u64,
            Err(_) if failed_write => return done(true),
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(_) => return done(false),
        }
    }
}
