//! `spillguard stdio [OPTIONS] -- PROGRAM [ARGS...]`: a transparent guard
//! between an MCP host and a stdio server.
//!
//! Two pump threads copy this program's stdin to the server's stdin and the
//! server's stdout to this program's stdout, each chunk as soon as it
//! arrives: with `splice(2)` where both ends are pipes (Linux; no copy
//! through this program), else one read and one write per chunk (always
//! with `--mcp`, through the stdout line guard). The library's owner drains the server's stderr meanwhile; with
//! `--forward-stderr` a tap copies each chunk to this program's stderr as
//! far as it goes without blocking. The end of stdin, or SIGINT, SIGTERM or
//! SIGHUP, starts the stdio shutdown the core decides. At the end the
//! record line is written and the exit status follows the server's.

use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use spillguard_std::core::{CallRecord, StdoutLineGuard};

use crate::args::{StdioArgs, UsageError};
use crate::call::{self, CallHandle, HelperStdin, HelperStdout, Host, StdioLine, TapFn};

/// Bytes per read of either stream.
const CHUNK: usize = 64 * 1024;

/// Bytes asked for per `splice(2)` between two pipes (moved without a copy
/// through this program where both ends allow it).
#[cfg(target_os = "linux")]
const SPLICE_BYTES: usize = 1 << 20;

/// How long the stdout pump may still take, once the call finished, to
/// reach end-of-file (a descendant that left the group may hold it open).
const STDOUT_END_WAIT: Duration = Duration::from_secs(1);

/// Writes up to this many bytes to a pipe that `poll` says is writable
/// never block (POSIX's `PIPE_BUF`).
const PIPE_BUF: usize = 4096;

/// Exit status when the helper could not be spawned.
const NOT_SPAWNED: u8 = 127;

/// Runs the guard; see the module docs.
pub fn main(host: &Host, args: &StdioArgs) -> ExitCode {
    let mut record_file = match &args.record {
        Some(path) => match OpenOptions::new().create(true).append(true).open(path) {
            Ok(file) => Some(file),
            Err(error) => {
                eprintln!(
                    "spillguard: {}",
                    UsageError(format!("cannot open --record {}: {error}", path.display()))
                );
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    // Registered before the helper starts, so that no signal is missed.
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).ok();
    let dropped = Arc::new(AtomicU64::new(0));
    let tap = args
        .forward_stderr
        .then(own_stderr)
        .flatten()
        .map(|stderr| stderr_tap(stderr, dropped.clone()));
    let call = call::start_stdio(host, args, tap);
    if let Some(signals) = signals {
        cancel_on_signals(signals, &call);
    }
    let pumps = call
        .streams()
        .ok()
        .map(|(stdin, stdout)| Pumps::start(stdin, stdout, args.mcp, &call));
    let outcome = call.wait();
    let mut record = outcome.record.clone();
    if let Some(pumps) = pumps {
        pumps.settle(&mut record);
    }
    let line = StdioLine {
        stderr_excerpt: outcome.agent_excerpt(),
        stderr_forward_dropped: args.forward_stderr.then(|| dropped.load(Ordering::Relaxed)),
        record,
    };
    let status = exit_status(&line.record);
    let written = serde_json::to_string(&line)
        .map_err(io::Error::other)
        .and_then(|json| match &mut record_file {
            Some(file) => writeln!(file, "{json}"),
            None => writeln!(io::stderr().lock(), "{json}"),
        });
    match written {
        Ok(()) => ExitCode::from(status),
        Err(error) => {
            eprintln!("spillguard: cannot write the record: {error}");
            ExitCode::from(1)
        }
    }
}

/// The helper's exit code; 128+N if signal N ended it; 127 if it could not
/// be spawned; 1 for any other end without an exit status.
fn exit_status(record: &CallRecord) -> u8 {
    match (record.exit_status, record.exit_signal) {
        (Some(code), _) => (code & 0xff) as u8,
        (None, Some(signal)) => 128_u8.saturating_add((signal & 0x7f) as u8),
        (None, None) if record.spawn_error_kind.is_some() => NOT_SPAWNED,
        (None, None) => 1,
    }
}

/// Turns SIGINT, SIGTERM and SIGHUP into a cancel: the stdio shutdown
/// (close stdin, the stdin close grace, TERM, grace, KILL).
fn cancel_on_signals(mut signals: Signals, call: &CallHandle) {
    let canceller = call.canceller();
    let _ = std::thread::Builder::new()
        .name("spillguard-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                canceller.cancel();
            }
        });
}

/// This program's stdin, stdout or stderr as a file of its own (a
/// duplicate descriptor: reads and writes go straight to it, unbuffered).
fn own(fd: std::os::fd::BorrowedFd<'_>) -> Option<File> {
    fd.try_clone_to_owned().ok().map(File::from)
}

fn own_stderr() -> Option<File> {
    own(io::stderr().as_fd())
}

/// The tap that copies the helper's stderr to this program's stderr as far
/// as it goes without blocking: while `poll` says the pipe is writable, at
/// most `PIPE_BUF` bytes at a time (such a write never blocks); the rest
/// of the chunk is dropped and counted in `dropped`.
fn stderr_tap(stderr: File, dropped: Arc<AtomicU64>) -> Box<TapFn> {
    Box::new(move |chunk: &[u8]| {
        let mut rest = chunk;
        while !rest.is_empty() && writable(&stderr) {
            let piece = rest.get(..rest.len().min(PIPE_BUF)).unwrap_or(rest);
            match rustix::io::write(&stderr, piece) {
                Ok(written) => rest = rest.get(written..).unwrap_or_default(),
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
        }
        dropped.fetch_add(rest.len() as u64, Ordering::Relaxed);
    })
}

/// Whether a write to `file` would not block now.
fn writable(file: &File) -> bool {
    let mut fds = [PollFd::new(file, PollFlags::OUT)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut fds, Some(&now)), Ok(1))
        && fds[0].revents().contains(PollFlags::OUT)
}

/// The two pump threads and what they counted.
struct Pumps {
    stdin_written: Arc<AtomicU64>,
    stdout_done: mpsc::Receiver<Forwarded>,
}

/// What the stdout pump forwarded and, with `--mcp`, diverted.
#[derive(Debug, Default, Clone, Copy)]
struct Forwarded {
    bytes: u64,
    lines_diverted: u64,
    bytes_diverted: u64,
}

impl Pumps {
    fn start(stdin: HelperStdin, stdout: HelperStdout, mcp: bool, call: &CallHandle) -> Self {
        let stdin_written = Arc::new(AtomicU64::new(0));
        let written = stdin_written.clone();
        let _ = std::thread::Builder::new()
            .name("spillguard-stdin".into())
            .spawn(move || pump_stdin(stdin, &written));
        let (done, stdout_done) = mpsc::channel();
        let canceller = call.canceller();
        let _ = std::thread::Builder::new()
            .name("spillguard-stdout".into())
            .spawn(move || {
                let (forwarded, host_gone) = pump_stdout(stdout, mcp);
                if host_gone {
                    // Nobody reads our stdout any more: the host went away.
                    canceller.cancel();
                }
                let _ = done.send(forwarded);
            });
        Self {
            stdin_written,
            stdout_done,
        }
    }

    /// Waits (bounded) for the stdout pump's end, then counts in `record`
    /// what the pumps forwarded and diverted in all: the bytes the server
    /// wrote after the call's last look at the counters included (the
    /// capture keeps only the diverted bytes that reached it before the
    /// call finished).
    fn settle(self, record: &mut CallRecord) {
        if let Ok(forwarded) = self.stdout_done.recv_timeout(STDOUT_END_WAIT) {
            record.stdout_bytes_forwarded = record.stdout_bytes_forwarded.max(forwarded.bytes);
            record.stdout_lines_diverted =
                record.stdout_lines_diverted.max(forwarded.lines_diverted);
            record.stdout_bytes_diverted =
                record.stdout_bytes_diverted.max(forwarded.bytes_diverted);
        }
        let written = self.stdin_written.load(Ordering::Relaxed);
        record.stdin_bytes_forwarded = record.stdin_bytes_forwarded.max(written);
    }
}

/// Copies this program's stdin to the helper's until either ends, then
/// drops the writer: the end of the caller's input.
fn pump_stdin(mut stdin: HelperStdin, written: &AtomicU64) {
    let Some(mut input) = own(io::stdin().as_fd()) else {
        return;
    };
    #[cfg(target_os = "linux")]
    loop {
        match stdin.splice_from(input.as_fd(), SPLICE_BYTES) {
            Ok(0) => return,
            Ok(moved) => {
                written.fetch_add(moved as u64, Ordering::Relaxed);
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            // Not a pipe here: copy instead.
            Err(error) if error.kind() == ErrorKind::InvalidInput => break,
            Err(_) => return,
        }
    }
    let mut buf = vec![0; CHUNK];
    loop {
        let read = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let chunk = buf.get(..read).unwrap_or_default();
        if stdin.write_all(chunk).is_err() {
            break;
        }
        written.fetch_add(read as u64, Ordering::Relaxed);
    }
}

/// Copies the helper's stdout to this program's until its end (with
/// `mcp`, only its JSON object lines); returns what it forwarded and
/// diverted, and whether it stopped because this program's stdout is gone.
fn pump_stdout(stdout: HelperStdout, mcp: bool) -> (Forwarded, bool) {
    let mut read_in_all = 0_u64;
    let mut guard = StdoutLineGuard::new();
    let (bytes, gone) = copy_stdout(stdout, mcp, &mut guard, &mut read_in_all);
    let forwarded = Forwarded {
        bytes,
        lines_diverted: guard.lines_diverted(),
        bytes_diverted: if mcp { read_in_all - bytes } else { 0 },
    };
    (forwarded, gone)
}

fn copy_stdout(
    mut stdout: HelperStdout,
    mcp: bool,
    guard: &mut StdoutLineGuard,
    read_in_all: &mut u64,
) -> (u64, bool) {
    let Some(mut output) = own(io::stdout().as_fd()) else {
        return (0, true);
    };
    let mut forwarded = 0_u64;
    #[cfg(target_os = "linux")]
    if !mcp {
        loop {
            match stdout.splice_to(output.as_fd(), SPLICE_BYTES) {
                Ok(0) => return (forwarded, false),
                Ok(moved) => forwarded += moved as u64,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                // Not spliceable (a terminal): copy instead.
                Err(error) if error.kind() == ErrorKind::InvalidInput => break,
                Err(error) if error.kind() == ErrorKind::BrokenPipe => return (forwarded, true),
                Err(_) => return (forwarded, false),
            }
        }
    }
    let mut buf = vec![0; CHUNK];
    loop {
        let mut failed_write = false;
        let read = if mcp {
            stdout.read_guarded(guard, &mut buf, |bytes| {
                output
                    .write_all(bytes)
                    .inspect_err(|_| failed_write = true)?;
                forwarded += bytes.len() as u64;
                Ok(())
            })
        } else {
            stdout.read(&mut buf).and_then(|read| {
                let chunk = buf.get(..read).unwrap_or_default();
                output
                    .write_all(chunk)
                    .inspect_err(|_| failed_write = true)?;
                forwarded += read as u64;
                Ok(read)
            })
        };
        match read {
            Ok(0) => return (forwarded, false),
            Ok(read) => *read_in_all += read as u64,
            Err(_) if failed_write => return (forwarded, true),
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(_) => return (forwarded, false),
        }
    }
}
