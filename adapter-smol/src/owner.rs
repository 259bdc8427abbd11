//! The owner of one call: the core's run loop, as a detached task.
//!
//! It holds the [`Call`], the helper's output streams (it reads them
//! itself), its exit (through a waiter task), its stdin writer task and the
//! cancellation, and does nothing but this:
//!
//! 1. carry out every action from [`Call::poll_action`] until `None`;
//! 2. wait for the first of, in this order of preference: the core's timer,
//!    an event on one channel (exit, command), a chunk or the end of either
//!    stream (the two taking turns at being looked at first); a timer
//!    already due wins without waiting;
//! 3. read the clock, make exactly one `handle_*` call, and go to 1.
//!
//! Reading in the owner's own wait costs no task hop per chunk. The loop
//! ends at [`Action::Finished`]; the owner then lets go of the call and
//! reads and drops what the helper's group still writes until end-of-file.
//! Every decision (budgets, states, deadlines, signals) is the core's; the
//! owner only reports and obeys.
//! Being detached from the caller, it cannot be cancelled by a caller
//! dropping a future: once started it runs to the record.

use std::sync::Arc;
use std::time::Instant;

use futures_lite::future;
use smol::Timer;
use smol::channel::{Receiver, Sender};
use spillguard_core::{Action, Call, CallError, Outcome, Signal};
use spillguard_std::HelperCommand;
use spillguard_std::run_loop::{self, Leftover};

use crate::handle::Published;
use crate::host::HostShared;
use crate::process::Process;
use crate::reader::{CHUNK_BYTES, read_either};

pub(crate) use spillguard_std::run_loop::{Pipe, Start};

/// The core's answer to an approval or a denial goes back on this channel.
pub(crate) type Reply = Sender<Result<(), CallError>>;

/// Everything the owner waits for, on one channel.
///
/// The channel is unbounded so that a handle can send from `Drop` and from
/// sync methods; what flows in it is the caller's and the host's commands
/// and the waiter's one event.
pub(crate) type Event = run_loop::Event<Reply>;

/// What a [`CallHandle`](crate::CallHandle) or the [`Host`](crate::Host) asks.
pub(crate) type Command = run_loop::Command<Reply>;

/// The owner of one call. See the [module docs](self).
pub(crate) struct Owner {
    pub(crate) id: u64,
    pub(crate) call: Call,
    pub(crate) command: Option<HelperCommand>,
    pub(crate) events: Receiver<Event>,
    /// Handed to the helper's tasks; keeps `events` open.
    pub(crate) sender: Sender<Event>,
    pub(crate) process: Option<Process>,
    pub(crate) published: Arc<Published>,
    pub(crate) host: Arc<HostShared>,
    /// One timer, moved only when [`Call::poll_timeout`] changes.
    pub(crate) timer: Timer,
    /// The instant `timer` is set to.
    pub(crate) armed: Option<Instant>,
    /// `false` once the streams were abandoned: what is read is dropped.
    pub(crate) listening: bool,
    /// One read buffer per stream (stdout, stderr), made at the spawn.
    pub(crate) bufs: [Vec<u8>; 2],
    /// Which stream the next wait looks at first.
    pub(crate) stderr_first: bool,
    /// The call was let go of (deregistered, the owner's end published).
    pub(crate) released: bool,
}

/// Reads in a row after which the owner lets the executor run other tasks
/// (the waiter, the stdin writer, other calls): an async-process read is
/// ready at once while a flood lasts, and smol has no task budget.
const READS_BEFORE_YIELD: usize = 16;

/// What the owner's wait returned.
enum Input {
    /// The core's timer is due.
    Timer,
    /// From the caller, the host or the waiter.
    Event(Event),
    /// A read of a stream: this many bytes, 0 at its end.
    Read(Pipe, usize),
}

impl Owner {
    /// Runs the call to its end.
    pub(crate) async fn run(mut self, start: Start) {
        run_loop::begin(&mut self.call, Instant::now(), start, self.command.as_ref());
        let mut reads_in_a_row = 0;
        while !self.carry_out_actions().await {
            let input = self.next_input().await;
            let now = Instant::now();
            match input {
                Input::Timer => self.call.handle_timeout(now),
                Input::Event(event) => self.handle(now, event),
                Input::Read(pipe, len) => {
                    self.take_read(now, pipe, len);
                    reads_in_a_row += 1;
                    if reads_in_a_row == READS_BEFORE_YIELD {
                        reads_in_a_row = 0;
                        future::yield_now().await;
                    }
                    continue;
                }
            }
            reads_in_a_row = 0;
        }
        self.drain_unheard().await;
    }

    /// The next input. A due timer comes before events and reads, so a
    /// flood cannot postpone a deadline; the streams take turns, so neither
    /// starves the other.
    async fn next_input(&mut self) -> Input {
        let at = self.call.poll_timeout();
        if at.is_some_and(|at| at <= Instant::now()) {
            return Input::Timer;
        }
        if at != self.armed {
            self.armed = at;
            match at {
                Some(at) => self.timer.set_at(at),
                None => self.timer = Timer::never(),
            }
        }
        self.stderr_first = !self.stderr_first;
        let mut none = [None, None];
        let pipes = match &mut self.process {
            Some(process) => &mut process.pipes,
            None => &mut none,
        };
        let (timer, events) = (&mut self.timer, &self.events);
        let fired = async move {
            timer.await;
            Input::Timer
        };
        // `self.sender` keeps the channel open: an error never comes (and
        // would leave this branch waiting, not spinning).
        let received = async move {
            match events.recv().await {
                Ok(event) => Input::Event(event),
                Err(_) => future::pending().await,
            }
        };
        let (bufs, stderr_first) = (&mut self.bufs, self.stderr_first);
        let read = async move {
            let (pipe, len) = read_either(pipes, bufs, stderr_first).await;
            Input::Read(pipe, len)
        };
        let input = future::or(fired, future::or(received, read)).await;
        if matches!(input, Input::Timer) {
            // A fired timer must be set again, even to the same instant.
            self.armed = None;
        }
        input
    }

    /// Exactly one `handle_*` call for a read of `pipe`: its bytes, or its
    /// end. Nothing once the streams were abandoned.
    fn take_read(&mut self, now: Instant, pipe: Pipe, len: usize) {
        if let Some(process) = &mut self.process {
            let pipes = &mut process.pipes;
            run_loop::take_read(
                &mut self.call,
                now,
                self.listening,
                pipes,
                &self.bufs,
                (pipe, len),
            );
        }
    }

    /// After the call finished: reads and drops what the helper's group
    /// still writes, until end-of-file on both streams.
    async fn drain_unheard(&mut self) {
        self.listening = false;
        let Some(process) = &mut self.process else {
            return;
        };
        process.close_stdin();
        let mut reads = 0_usize;
        while process.pipes.iter().any(Option::is_some) {
            self.stderr_first = !self.stderr_first;
            let (pipe, len) =
                read_either(&mut process.pipes, &mut self.bufs, self.stderr_first).await;
            if len == 0 {
                process.pipes[pipe as usize] = None;
            }
            reads += 1;
            if reads.is_multiple_of(READS_BEFORE_YIELD) {
                future::yield_now().await;
            }
        }
    }

    /// Exactly one `handle_*` call for one event.
    fn handle(&mut self, now: Instant, event: Event) {
        match run_loop::handle_event(&mut self.call, now, event) {
            Leftover::Nothing => {}
            Leftover::Answer(reply, answer) => {
                let _ = reply.try_send(answer);
            }
        }
    }

    /// Carries out every queued action; `true` once the call finished.
    /// Only an audit write awaits (it runs on smol's blocking pool, and is
    /// done before the next action, so events stay in order); every other
    /// action is a quick system call or a hand-over to a task.
    async fn carry_out_actions(&mut self) -> bool {
        // The state is published before each action (a caller who sees the
        // card also sees `awaiting_approval`) and after the last one.
        while let Some(action) = self.call.poll_action() {
            self.published.set_state(self.call.state());
            match action {
                Action::Audit(event) => {
                    if let Err(error) = self.host.audit(event).await {
                        self.call.handle_audit_failed(Instant::now(), error);
                    }
                }
                Action::ShowApprovalCard(card) => self.published.show_card(card),
                Action::Spawn => self.spawn(),
                Action::CloseStdin => {
                    if let Some(process) = &mut self.process {
                        process.close_stdin();
                    }
                }
                Action::SignalGroup { pgid, signal } => {
                    spillguard_std::os::signal_group(pgid, signal);
                }
                Action::AbandonStreams => self.listening = false,
                Action::Finished(outcome) => {
                    self.finish(*outcome);
                    return true;
                }
                // An action this adapter does not know has nothing to carry out.
                _ => {}
            }
        }
        self.published.set_state(self.call.state());
        false
    }

    fn spawn(&mut self) {
        let (pipe_size, events) = (self.host.state.options.pipe_size, &self.sender);
        let process = &mut self.process;
        run_loop::spawn(
            &mut self.call,
            self.command.take(),
            Instant::now,
            |command| {
                let spawned = Process::spawn(command, pipe_size, events)?;
                let reported = (spawned.pid, spawned.pipe_capacity);
                *process = Some(spawned);
                Ok(reported)
            },
        );
        if self.process.is_some() {
            self.bufs = [vec![0; CHUNK_BYTES], vec![0; CHUNK_BYTES]];
        }
    }

    fn finish(&mut self, outcome: Outcome) {
        self.host.state.record_finished(outcome.record.clone());
        self.published.finish(outcome);
        self.release();
    }

    /// Lets go of the call (once), before draining what is left: waiters
    /// wake up and the host stops counting the call as live. The channel is
    /// closed and emptied: an approval still queued is dropped with its
    /// reply sender, so its caller gets an error instead of waiting (unlike
    /// a std receiver, a dropped async-channel receiver leaves queued events
    /// alive while a handle still holds a sender).
    fn release(&mut self) {
        if !self.released {
            self.released = true;
            self.events.close();
            while self.events.try_recv().is_ok() {}
            self.published.owner_ended();
            self.host.deregister(self.id);
        }
    }
}

impl Drop for Owner {
    /// Runs when the owner ends, and also if it panicked: the call is let
    /// go of if it was not yet, and a helper whose call could not finish is
    /// killed, so that nothing runs unsupervised.
    fn drop(&mut self) {
        if !self.released
            && let Some(process) = &self.process
        {
            spillguard_std::os::signal_group(process.pid, Signal::Kill);
        }
        self.release();
    }
}
