//! `--forward-stderr`: the copy of the server's stderr on this program's
//! stderr, redacted as it streams (a [`StreamRedactor`]) and written as
//! far as it goes without blocking.
//!
//! The redactor holds back what a rule could still extend (up to the end
//! of a line, see [`StreamRedactor`]); when the server has written
//! nothing for [`QUIET`], a thread flushes it, so that a prompt or a
//! progress line without newline shows (all but its last word after one
//! quiet interval, the rest after a second). A secret written in two
//! writes more than two quiet intervals apart may so be shown in two
//! parts.

use std::fs::File;
use std::os::fd::AsFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rustix::event::PollFlags;
use spillguard_host::os::poll;
use spillguard_std::proto::{Redactor, StreamRedactor};

use crate::call::TapFn;

/// How long the server's stderr stays quiet before what is held is
/// flushed.
pub const QUIET: Duration = Duration::from_millis(100);

/// Writes up to this many bytes to a pipe that `poll` says is writable
/// never block (POSIX's `PIPE_BUF`).
const PIPE_BUF: usize = 4096;

/// The redacted copy of the server's stderr; see the module docs.
#[derive(Debug)]
pub struct Forward {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    stderr: File,
    stream: StreamRedactor,
    out: Vec<u8>,
    /// When the server last wrote, or the last flush.
    last: Instant,
    /// Bytes of the redacted copy that would have blocked, dropped.
    dropped: u64,
    /// The server's stderr is over: nothing is held any more.
    finished: bool,
}

/// What was forwarded: the bytes dropped and the secrets replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forwarded {
    /// Bytes of the redacted copy dropped because the write would block.
    pub dropped: u64,
    /// Secrets replaced in the copy.
    pub redactions: u64,
}

impl Forward {
    /// The copy to `stderr` with `redactor`'s rules, and its quiet flusher.
    pub fn start(stderr: File, redactor: Redactor) -> Arc<Self> {
        let forward = Arc::new(Self {
            state: Mutex::new(State {
                stderr,
                stream: StreamRedactor::new(redactor),
                out: Vec::new(),
                last: Instant::now(),
                dropped: 0,
                finished: false,
            }),
            changed: Condvar::new(),
        });
        let flusher = forward.clone();
        let _ = std::thread::Builder::new()
            .name("spillguard-forward".into())
            .spawn(move || flusher.flush_when_quiet());
        forward
    }

    /// The tap: each chunk of the server's stderr.
    pub fn tap(self: &Arc<Self>) -> Box<TapFn> {
        let forward = self.clone();
        Box::new(move |chunk: &[u8]| {
            let mut state = forward.lock();
            let state = &mut *state;
            state.stream.feed(chunk, &mut state.out);
            state.last = Instant::now();
            state.write();
            forward.changed.notify_all();
        })
    }

    /// A run of the server ended and another starts (`--restart`):
    /// releases what the last one left held, then writes `line`.
    pub fn mark(&self, line: &str) {
        let mut state = self.lock();
        let state = &mut *state;
        state.stream.finish(&mut state.out);
        state.out.extend_from_slice(line.as_bytes());
        state.write();
    }

    /// The server's stderr ended: releases what is held.
    pub fn finish(&self) -> Forwarded {
        let mut state = self.lock();
        let state = &mut *state;
        state.stream.finish(&mut state.out);
        state.write();
        state.finished = true;
        self.changed.notify_all();
        Forwarded {
            dropped: state.dropped,
            redactions: state.stream.counts().total(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The flusher thread: waits for bytes held, then for [`QUIET`]
    /// without a write, then flushes.
    fn flush_when_quiet(&self) {
        let mut state = self.lock();
        loop {
            if state.finished {
                return;
            }
            if state.stream.held() == 0 {
                state = self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let left = QUIET.saturating_sub(state.last.elapsed());
            if !left.is_zero() {
                state = self
                    .changed
                    .wait_timeout(state, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                continue;
            }
            let state_ref = &mut *state;
            state_ref.stream.flush(&mut state_ref.out);
            state_ref.last = Instant::now();
            state_ref.write();
        }
    }
}

impl State {
    /// Writes what was released as far as it goes without blocking: while
    /// `poll` says the pipe is writable, at most `PIPE_BUF` bytes at a
    /// time (such a write never blocks); the rest is dropped and counted.
    fn write(&mut self) {
        let mut rest = self.out.as_slice();
        while !rest.is_empty() && writable(&self.stderr) {
            let piece = rest.get(..rest.len().min(PIPE_BUF)).unwrap_or(rest);
            match rustix::io::write(&self.stderr, piece) {
                Ok(written) => rest = rest.get(written..).unwrap_or_default(),
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
        }
        self.dropped += rest.len() as u64;
        self.out.clear();
    }
}

/// Whether a write to `file` would not block now.
fn writable(file: &File) -> bool {
    matches!(poll([(file.as_fd(), PollFlags::OUT)], Some(Duration::ZERO)), Ok([r]) if r.writable)
}
