//! The client's bytes to the server: [`start`] runs the pump on a thread
//! of its own, around the core's [`InputQueue`] (which holds the bytes and
//! decides what a server that stops reading loses).
//!
//! The pump waits with `poll(2)` on both ends and never blocks on a
//! write, so it always sees the client's end:
//!
//! * **From a pipe or a file into the server's pipe**, while nothing is
//!   queued, the bytes move with a non-blocking `splice(2)` (no copy
//!   through this program). From anything else (the socketpairs Node and
//!   Bun hand their children, a terminal), and with `--mcp` always (each request is noted
//!   before the server can see it), they are read into the queue and
//!   written as the server's pipe takes them.
//! * **A server that stops reading** ([`InputQueue`]'s rule): with the
//!   queue full (4 MiB) and nothing taken for 1 s, room is made: with
//!   `--mcp`, whole messages the server has not begun are dropped, each
//!   request answered at once with an error (`server_not_reading`);
//!   without, the stream is cut from then on. Once the client has ended,
//!   250 ms without progress drops the rest. Every byte dropped is counted
//!   (`stdin_bytes_undelivered`).
//! * **The client's end** (end-of-file, a half-closed socket, a hung-up
//!   terminal), once the queue is delivered or dropped, closes the
//!   server's stdin: the MCP stdio shutdown the core runs.
//! * **With `--restart`** ([`Relay`]) the pump never waits longer than
//!   100 ms without looking at the relay, and does not splice. When a run
//!   is over, the message it had begun is dropped and the requests it was
//!   given are answered (within 1 s of the exit); the messages it never
//!   began, and what the client sends while the next run starts, are
//!   queued for that run. When no
//!   run follows a crash loop, every request is answered at once until
//!   the client ends.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::event::PollFlags;
use spillguard_host::os::{enlarge_pipe, poll, read_waiting};
use spillguard_std::proto::{InputQueue, QueueEvent, QueueSettings};

use super::Requests;
use super::fds::Kind;
use super::relay::{Next, Relay};
use crate::call::HelperStdin;
use spillguard_std::proto::{ClientLines, ServerGone};

/// The longest wait that holds the server's pipe open (so that a close the
/// call decides meanwhile takes effect soon).
const HOLD: Duration = Duration::from_millis(100);

/// Bytes asked for per `splice(2)` between two pipes.
#[cfg(target_os = "linux")]
const SPLICE_BYTES: usize = 1 << 20;

/// Starts the pump from `input` (of `kind`) to the server's `stdin`; with
/// `requests` (`--mcp`), the client's requests are noted there, and those
/// dropped for a server that does not read are answered; with `relay`
/// (`--restart`), the pump goes on from one run to the next.
pub fn start(
    input: File,
    kind: Kind,
    mut stdin: HelperStdin,
    requests: Option<std::sync::Arc<Requests>>,
    relay: Option<std::sync::Arc<Relay>>,
) {
    let settings = QueueSettings {
        messages: requests.is_some(),
        whole_lines: requests.as_ref().is_some_and(|r| r.propagates()),
        ..QueueSettings::default()
    };
    let splice = cfg!(target_os = "linux")
        && matches!(kind, Kind::Pipe | Kind::File)
        && requests.is_none()
        && relay.is_none();
    if splice {
        // Each hand-off to the server then moves up to `SPLICE_BYTES`.
        let _ = stdin.with_fd(|fd| enlarge_pipe(fd, SPLICE_BYTES));
    }
    let pump = Pump {
        splice,
        file_input: kind == Kind::File,
        input,
        stdin,
        queue: InputQueue::new(settings, Instant::now()),
        requests,
        relay,
        generation: 0,
        answer_all: None,
    };
    let _ = std::thread::Builder::new()
        .name("spillguard-stdin".into())
        .spawn(move || pump.run());
}

struct Pump {
    input: File,
    stdin: HelperStdin,
    /// Whether to splice while the queue is empty (the client's end is a
    /// pipe or a file, the server's a pipe).
    splice: bool,
    /// The client's end is a regular file: always readable, its end
    /// always there to read, so nothing is read ahead of the server.
    file_input: bool,
    queue: InputQueue,
    requests: Option<std::sync::Arc<Requests>>,
    /// With `--restart`: the runs that follow.
    relay: Option<std::sync::Arc<Relay>>,
    /// The runs over, as far as the pump has dealt with them.
    generation: u64,
    /// No run follows a crash loop: every request gets this.
    answer_all: Option<ServerGone>,
}

impl Pump {
    fn run(mut self) {
        let mut server_gone = true;
        // A server already gone (with `--restart`: the next run's stdin is
        // waited for).
        let usable = self.stdin.set_nonblocking(true).is_ok() || self.next_server();
        if usable {
            server_gone = loop {
                let run_over = (self.relay.as_ref())
                    .is_some_and(|relay| relay.generation() != self.generation);
                let round = if run_over {
                    Err(ErrorKind::BrokenPipe.into())
                } else {
                    self.round()
                };
                match round {
                    Ok(false) => {}
                    Ok(true) => break false,
                    Err(_) if self.next_server() => {}
                    Err(_) => break true,
                }
            };
        }
        // Whatever was read and not delivered never will be (it stays
        // pending, for the answers given at the server's end).
        self.queue.abandon();
        self.report();
        if let Some(relay) = self.relay.clone() {
            if let Some(gone) = self.answer_all.take() {
                self.answer_until_end(&gone);
            }
            // The client ended, or no run follows: said before the
            // server's stdin closes, so that its end is not taken for a
            // crash.
            relay.client_ended();
        }
        // The end of the client's input (or the server's stdin is gone):
        // the call runs the stdio shutdown.
        self.stdin.close();
        if let Some(requests) = &self.requests {
            if server_gone && !requests.heard() {
                // The server went before the client said anything: its
                // first request, still to come, is read and noted, to be
                // answered with how the server ended.
                super::read_first_request(&self.input, requests);
            }
            requests.input_over();
        }
    }

    /// With `--restart`, once a run is over (or its stdin broke): answers
    /// what it left, then waits for the next run's stdin, reading the
    /// client meanwhile. `false` when no run follows or the client ended.
    fn next_server(&mut self) -> bool {
        let Some(relay) = self.relay.clone() else {
            return false;
        };
        loop {
            let overdue = (self.requests.as_ref())
                .and_then(|requests| requests.replay_overdue(Instant::now()));
            if let Some(reason) = overdue {
                relay.refuse(reason);
            }
            match relay.next(self.generation) {
                Next::Gone(generation, gone) => {
                    self.generation = generation;
                    self.queue.handle_server_gone();
                    self.report();
                    if let Some(requests) = &self.requests {
                        // What the last server never saw waits for the
                        // next, and so do the calls sent again.
                        let queued: Vec<_> = (self.queue.queued_requests())
                            .filter_map(|info| info.id.clone())
                            .collect();
                        let again = requests.retries_on_gone(&queued);
                        let waiting = self.queue.queued_requests().chain(&again);
                        requests.answer_left_except(&gone, waiting);
                    }
                }
                Next::Attach(mut stdin) => {
                    let _ = stdin.set_nonblocking(true);
                    self.stdin = stdin;
                    self.queue.handle_progress(Instant::now());
                    let first = match &self.requests {
                        Some(requests) => requests.begin_replay(Instant::now()),
                        None => Ok(Vec::new()),
                    };
                    match first {
                        // Nothing to replay: the queue goes at once.
                        Ok(first) if first.is_empty() => return true,
                        // The queue waits for the new server's answer, if
                        // it is a replay: asked before `first` is written,
                        // as a server that answers at once may have ended
                        // the replay by a later look, and what follows its
                        // answer (`initialized`) is then still to send.
                        Ok(first) => {
                            let replay = self.requests.as_ref().is_some_and(|r| r.replaying());
                            let _ = self.write_now(&first);
                            if !replay {
                                return true;
                            }
                        }
                        Err(reason) => relay.refuse(reason),
                    }
                }
                Next::Replayed(then) => {
                    let _ = self.write_now(&then);
                    self.queue.handle_progress(Instant::now());
                    return true;
                }
                Next::Over(last) => {
                    self.answer_all = last;
                    return false;
                }
                Next::Wait if self.queue.is_ended() => return false,
                Next::Wait if self.queue.wants_input() => {
                    if self.read_client_within(HOLD).is_err() {
                        self.queue.handle_read(0, |_| None);
                    }
                }
                Next::Wait => std::thread::sleep(HOLD),
            }
        }
    }

    /// Writes `bytes` to the server's stdin whole, waiting for room
    /// (a server that is gone breaks the pipe).
    fn write_now(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            match self.stdin.write(bytes) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(written) => bytes = bytes.get(written..).unwrap_or_default(),
                Err(error) if error.kind() == ErrorKind::WouldBlock => {
                    self.stdin
                        .with_fd(|pipe| poll([(pipe, PollFlags::OUT)], Some(HOLD)))??;
                }
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// After a crash loop: every request the client still sends is
    /// answered with `gone` at once (with `--mcp`), until the client ends.
    fn answer_until_end(&mut self, gone: &ServerGone) {
        let requests = self.requests.clone();
        if let Some(requests) = &requests {
            requests.answer_left(gone);
        }
        let mut lines = ClientLines::new();
        let mut buf = vec![0; 64 * 1024];
        while !self.queue.is_ended() {
            let read = read_waiting(&self.input, &mut buf).unwrap_or(0);
            if read == 0 {
                self.queue.handle_read(0, |_| None);
                break;
            }
            if let Some(requests) = &requests {
                lines.feed(buf.get(..read).unwrap_or_default(), |info| {
                    let _ = requests.note(info);
                });
                requests.answer_left(gone);
            }
        }
    }

    /// Counts what the queue dropped since the last look.
    fn report(&mut self) {
        let dropped = self.queue.take_undelivered();
        if dropped > 0 {
            self.stdin.count_undelivered(dropped);
        }
    }

    /// One round: deliver what can go without waiting, apply the stall
    /// rule, then wait for the next thing to do. `true` once the client's
    /// input is over; an error means the server's stdin is closed or
    /// broken.
    fn round(&mut self) -> std::io::Result<bool> {
        if !self.queue.to_write().is_empty() {
            self.write_queue()?;
        } else if self.splice && !self.queue.is_ended() && !self.queue.is_wedged() {
            #[cfg(target_os = "linux")]
            match self.stdin.splice_from(self.input.as_fd(), SPLICE_BYTES) {
                Ok(0) => self.queue.handle_read(0, |_| None),
                Ok(_) => {
                    self.queue.handle_progress(Instant::now());
                    return Ok(false);
                }
                Err(error) if error.kind() == ErrorKind::WouldBlock => {}
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        if self.queue.is_finished() {
            return Ok(true);
        }
        let stall = self.queue.poll_timeout();
        if stall.is_some_and(|at| at <= Instant::now()) {
            let now = Instant::now();
            let requests = self.requests.clone();
            self.queue
                .handle_timeout(now, |event| answer_dropped(requests.as_deref(), event));
            self.report();
            return Ok(false);
        }
        let until_stall = stall.map(|at| at.saturating_duration_since(Instant::now()));
        self.wait(until_stall)?;
        Ok(false)
    }

    /// Writes as much of the queue as the server's pipe takes now.
    fn write_queue(&mut self) -> std::io::Result<()> {
        while !self.queue.to_write().is_empty() {
            match self.stdin.write(self.queue.to_write()) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(written) => self.queue.handle_written(Instant::now(), written),
                Err(error) if error.kind() == ErrorKind::WouldBlock => break,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Waits for the next thing to do: the client's bytes or end (when the
    /// queue takes them), room in the server's pipe (when bytes wait for
    /// it), or the stall rule's moment (`until_stall`).
    fn wait(&mut self, until_stall: Option<Duration>) -> std::io::Result<()> {
        let take_input = self.queue.wants_input();
        let give_output =
            !self.queue.to_write().is_empty() || (self.splice && !self.queue.is_wedged());
        if !give_output {
            return if take_input && self.relay.is_some() {
                self.read_client_within(until_stall.unwrap_or(HOLD).min(HOLD))
            } else if take_input {
                self.read_client()
            } else {
                // Nothing to read or write: only the stall rule is left.
                std::thread::sleep(until_stall.unwrap_or(HOLD).min(HOLD));
                Ok(())
            };
        }
        let input = self.input.as_fd();
        if self.queue.is_empty() {
            // Splicing, and the splice could not move a byte: either the
            // client has sent nothing, or the server's pipe is full.
            let [out] = self
                .stdin
                .with_fd(|pipe| poll([(pipe, PollFlags::OUT)], Some(Duration::ZERO)))??;
            if out.writable {
                poll([(input, PollFlags::IN | PollFlags::RDHUP)], None)?;
                return Ok(());
            }
            if self.splice && self.file_input {
                // A file needs no reading ahead to see its end: wait for
                // room in the server's pipe, then splice again.
                let hold = until_stall.map_or(HOLD, |stall| stall.min(HOLD));
                self.stdin
                    .with_fd(|pipe| poll([(pipe, PollFlags::OUT)], Some(hold)))??;
                return Ok(());
            }
        }
        let hold = until_stall.map_or(HOLD, |stall| stall.min(HOLD));
        if !take_input {
            // The queue is full or the client has ended: only the server.
            self.stdin
                .with_fd(|pipe| poll([(pipe, PollFlags::OUT)], Some(hold)))??;
            return Ok(());
        }
        let [client, out] = self.stdin.with_fd(|pipe| {
            poll(
                [
                    (input, PollFlags::IN | PollFlags::RDHUP),
                    (pipe, PollFlags::OUT),
                ],
                Some(hold),
            )
        })??;
        if client.readable && !out.writable {
            // The server is slow: take the client's bytes into the queue,
            // so that it is not held up and its end can be seen.
            self.read_client()?;
        }
        Ok(())
    }

    /// Waits at most `limit` for the client, then reads it if it is ready.
    fn read_client_within(&mut self, limit: Duration) -> std::io::Result<()> {
        let [client] = poll(
            [(self.input.as_fd(), PollFlags::IN | PollFlags::RDHUP)],
            Some(limit),
        )?;
        if client.readable {
            self.read_client()?;
        }
        Ok(())
    }

    /// One read of the client into the queue (each request noted first,
    /// with `--mcp`); `0`, or a read error, is the client's end.
    fn read_client(&mut self) -> std::io::Result<()> {
        let read = read_waiting(&self.input, self.queue.room()).unwrap_or_default();
        if let (Some(requests), Some(_)) = (&self.requests, &self.relay) {
            // The same room again: the bytes just read, kept for a replay.
            requests.client_bytes(self.queue.room().get(..read).unwrap_or_default());
        }
        let requests = self.requests.clone();
        self.queue.handle_read(read, |event| match event {
            QueueEvent::Request(info) => requests.as_ref().and_then(|r| r.note(info)),
            dropped @ QueueEvent::Dropped(_) => {
                answer_dropped(requests.as_deref(), dropped);
                None
            }
        });
        if let Some(requests) = &self.requests {
            requests.input_read();
        }
        self.report();
        Ok(())
    }
}

/// A request the queue dropped for a server that does not read is
/// answered at once.
fn answer_dropped(requests: Option<&Requests>, event: QueueEvent<'_>) {
    if let (Some(requests), QueueEvent::Dropped(info)) = (requests, event) {
        requests.answer_dropped(info);
    }
}
