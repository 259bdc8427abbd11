//! The client's bytes to the server: [`start`] runs the pump on a thread
//! of its own.
//!
//! The pump waits with `poll(2)` on both ends and never blocks on a
//! write, so it always sees the client's end:
//!
//! * **Between two pipes** the bytes move with a non-blocking `splice(2)`
//!   (no copy through this program). From anything else (the socketpairs
//!   Node and Bun hand their children, a file, a terminal) they are read
//!   and written through a queue. With `--mcp` they are always read, so
//!   that each request is noted ([`PendingRequests`]) before the server can
//!   see it.
//! * **A server that stops reading.** While the server's pipe is full the
//!   client is still read, into a queue of up to [`QUEUE_MAX`] bytes. When
//!   the queue is full, or the client has ended, and the server has taken
//!   nothing for [`STALL`], the server is taken as wedged: what the queue
//!   holds, and every byte the client sends from then on, is dropped and
//!   counted (`stdin_bytes_undelivered`), so the client's end is seen.
//! * **The client's end** (end-of-file, a half-closed socket, a hung-up
//!   terminal), once the queue is delivered or dropped, closes the
//!   server's stdin: the MCP stdio shutdown the core runs (the stdin close
//!   grace, TERM, grace, KILL).

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::event::PollFlags;
use spillguard_std::core::{ClientLines, PendingRequests};

use super::fds::{self, Kind};
use crate::call::HelperStdin;

/// Bytes of the client's the pump holds at most for a server that is slow
/// to read (beyond its pipe's capacity).
pub const QUEUE_MAX: usize = 4 << 20;

/// How long a server may take nothing, once the queue is full or the
/// client has ended, before it is taken as wedged.
pub const STALL: Duration = Duration::from_millis(250);

/// The longest wait that holds the server's pipe open (so that a close the
/// call decides meanwhile takes effect soon).
const HOLD: Duration = Duration::from_millis(100);

/// Bytes per read of the client.
const READ_BYTES: usize = 256 * 1024;

/// Bytes asked for per `splice(2)` between two pipes.
#[cfg(target_os = "linux")]
const SPLICE_BYTES: usize = 1 << 20;

/// Starts the pump from `input` (of `kind`) to the server's `stdin`; with
/// `pending`, every request of the client is noted there.
pub fn start(
    input: File,
    kind: Kind,
    stdin: HelperStdin,
    pending: Option<Arc<Mutex<PendingRequests>>>,
) {
    let pump = Pump {
        splice: cfg!(target_os = "linux") && kind == Kind::Pipe && pending.is_none(),
        input,
        stdin,
        queue: Vec::new(),
        head: 0,
        tail: 0,
        ended: false,
        wedged: false,
        last_progress: Instant::now(),
        client: pending.map(|p| (ClientLines::new(), p)),
    };
    let _ = std::thread::Builder::new()
        .name("spillguard-stdin".into())
        .spawn(move || pump.run());
}

struct Pump {
    input: File,
    stdin: HelperStdin,
    /// Whether to splice while the queue is empty (both ends are pipes).
    splice: bool,
    /// Bytes read and not yet delivered: `queue[head..tail]` (the rest of
    /// the buffer is room for the next read).
    queue: Vec<u8>,
    head: usize,
    tail: usize,
    /// The client's end was read.
    ended: bool,
    /// The server stopped reading: the client's bytes are dropped.
    wedged: bool,
    /// When the server last took a byte (or the pump started).
    last_progress: Instant,
    /// The client's requests are noted here (`--mcp`).
    client: Option<(ClientLines, Arc<Mutex<PendingRequests>>)>,
}

/// What a round decided.
enum Round {
    /// Go on.
    Again,
    /// The client's input is over: close the server's stdin.
    Ended,
}

impl Pump {
    fn run(mut self) {
        if self.stdin.set_nonblocking(true).is_ok() {
            while let Ok(Round::Again) = self.round() {}
        }
        // Whatever was read and not delivered never will be.
        let left = self.pending();
        if left > 0 {
            self.stdin.count_undelivered(left as u64);
        }
        // The end of the client's input (or the server's stdin is gone):
        // the call runs the stdio shutdown.
        self.stdin.close();
    }

    fn pending(&self) -> usize {
        self.tail - self.head
    }

    /// One round: deliver what can go without waiting, apply the stall
    /// rule, then wait for the next thing to do. An error means the
    /// server's stdin is closed or broken.
    fn round(&mut self) -> std::io::Result<Round> {
        if !self.wedged {
            if self.pending() > 0 {
                self.write_queue()?;
            } else if self.splice && !self.ended {
                #[cfg(target_os = "linux")]
                match self.stdin.splice_from(self.input.as_fd(), SPLICE_BYTES) {
                    Ok(0) => self.ended = true,
                    Ok(_) => {
                        self.last_progress = Instant::now();
                        return Ok(Round::Again);
                    }
                    Err(error) if error.kind() == ErrorKind::WouldBlock => {}
                    Err(error) if error.kind() == ErrorKind::Interrupted => {}
                    Err(error) => return Err(error),
                }
            }
        }
        if self.ended && (self.pending() == 0 || self.wedged) {
            return Ok(Round::Ended);
        }
        let stall_applies =
            !self.wedged && self.pending() > 0 && (self.ended || self.pending() >= QUEUE_MAX);
        let stalled = self.last_progress.elapsed();
        if stall_applies && stalled >= STALL {
            self.wedge();
            return Ok(Round::Again);
        }
        let until_stall = stall_applies.then(|| STALL - stalled);
        self.wait(until_stall)?;
        Ok(Round::Again)
    }

    /// Writes as much of the queue as the server's pipe takes now.
    fn write_queue(&mut self) -> std::io::Result<()> {
        while self.pending() > 0 {
            let bytes = self.queue.get(self.head..self.tail).unwrap_or_default();
            match self.stdin.write(bytes) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(written) => {
                    self.head += written;
                    self.last_progress = Instant::now();
                }
                Err(error) if error.kind() == ErrorKind::WouldBlock => break,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        if self.pending() == 0 {
            (self.head, self.tail) = (0, 0);
        }
        Ok(())
    }

    /// The server is wedged: the queue is dropped and counted, and so is
    /// every byte read from now on.
    fn wedge(&mut self) {
        self.wedged = true;
        self.stdin.count_undelivered(self.pending() as u64);
        (self.head, self.tail) = (0, 0);
    }

    /// Waits for the next thing to do: the client's bytes or end, room in
    /// the server's pipe, or the stall rule's moment (`until_stall`).
    fn wait(&mut self, until_stall: Option<Duration>) -> std::io::Result<()> {
        let room = !self.ended && (self.wedged || self.pending() < QUEUE_MAX);
        if self.wedged || (self.pending() == 0 && !self.splice) {
            // Only the client to wait for.
            return if room { self.read_client() } else { Ok(()) };
        }
        let input = self.input.as_fd();
        let input_events = if room {
            PollFlags::IN | PollFlags::RDHUP
        } else {
            PollFlags::empty()
        };
        if self.pending() == 0 {
            // Splicing, and the splice could not move a byte: either the
            // client has sent nothing, or the server's pipe is full.
            let [out] = self
                .stdin
                .with_fd(|pipe| fds::poll([(pipe, PollFlags::OUT)], Some(Duration::ZERO)))??;
            if out.writable {
                fds::poll([(input, PollFlags::IN | PollFlags::RDHUP)], None)?;
                return Ok(());
            }
        }
        let hold = until_stall.map_or(HOLD, |stall| stall.min(HOLD));
        let [client, out] = self.stdin.with_fd(|pipe| {
            fds::poll([(input, input_events), (pipe, PollFlags::OUT)], Some(hold))
        })??;
        if room && client.readable && !out.writable {
            // The server is slow: take the client's bytes into the queue,
            // so that it is not held up and its end can be seen.
            self.read_client()?;
        }
        Ok(())
    }

    /// One read of the client: queued (noted first, with `--mcp`), or
    /// dropped and counted if the server is wedged; `0` is the client's
    /// end (a read error too: nothing more can come).
    fn read_client(&mut self) -> std::io::Result<()> {
        if self.tail + READ_BYTES > self.queue.len() {
            // Room at the end: the pending bytes move to the front, and
            // the buffer grows only if that is not enough.
            self.queue.copy_within(self.head..self.tail, 0);
            (self.head, self.tail) = (0, self.tail - self.head);
            if self.tail + READ_BYTES > self.queue.len() {
                self.queue.resize(self.tail + READ_BYTES, 0);
            }
        }
        let at = self.tail;
        // A read error ends the client's input too: nothing more can come.
        let room = self.queue.get_mut(at..at + READ_BYTES).unwrap_or_default();
        let read = fds::read_waiting(&self.input, room).unwrap_or_default();
        if read == 0 {
            self.ended = true;
            return Ok(());
        }
        self.tail = at + read;
        let bytes = self.queue.get(at..self.tail).unwrap_or_default();
        if let Some((lines, pending)) = &mut self.client {
            let mut pending = pending.lock().unwrap_or_else(PoisonError::into_inner);
            lines.feed(bytes, |info| pending.handle_client(info));
        }
        if self.wedged {
            self.stdin.count_undelivered(read as u64);
            self.tail = at;
        }
        Ok(())
    }
}
