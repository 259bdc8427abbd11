//! The owner of one call: the core's run loop, as a detached task.
//!
//! It holds the [`Call`], the helper (through its reader, waiter and stdin
//! tasks) and the cancellation, and does nothing but this:
//!
//! 1. carry out every action from [`Call::poll_action`] until `None`;
//! 2. wait for the first of (the core's timer, an event on one channel:
//!    chunk, end-of-file, exit, command); a timer already due wins without
//!    waiting;
//! 3. read the clock, make exactly one `handle_*` call, and go to 1.
//!
//! The loop ends at [`Action::Finished`]. Every decision (budgets, states,
//! deadlines, signals) is the core's; the owner only reports and obeys.
//! Being detached from the caller, it cannot be cancelled by a caller
//! dropping a future: once started it runs to the record.

use std::sync::Arc;
use std::time::Instant;

use futures_lite::future;
use smol::Timer;
use smol::channel::{Receiver, Sender};
use spillguard_core::{Action, Call, CallError, Outcome};
use spillguard_std::HelperCommand;
use spillguard_std::run_loop::{self, Leftover};

use crate::handle::Published;
use crate::host::HostShared;
use crate::process::Process;

pub(crate) use spillguard_std::run_loop::{Pipe, Start};

/// The core's answer to an approval or a denial goes back on this channel.
pub(crate) type Reply = Sender<Result<(), CallError>>;

/// Everything the owner waits for, on one channel.
///
/// The channel is unbounded so that a handle can send from `Drop` and from
/// sync methods; what the helper's tasks put on it is bounded all the same,
/// each reader holding at most
/// [`BUFFERS_PER_STREAM`](spillguard_std::read_buffers::BUFFERS_PER_STREAM) chunks.
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
}

impl Owner {
    /// Runs the call to its end.
    pub(crate) async fn run(mut self, start: Start) {
        run_loop::begin(&mut self.call, Instant::now(), start, self.command.as_ref());
        while !self.carry_out_actions().await {
            let event = self.next_event().await;
            let now = Instant::now();
            match event {
                Some(event) => self.handle(now, event),
                None => self.call.handle_timeout(now),
            }
        }
    }

    /// The next event, or `None` when the core's timer is due. A due timer
    /// comes before queued events, so a flood cannot postpone a deadline.
    async fn next_event(&mut self) -> Option<Event> {
        let at = self.call.poll_timeout();
        if at.is_some_and(|at| at <= Instant::now()) {
            return None;
        }
        if at != self.armed {
            self.armed = at;
            match at {
                Some(at) => self.timer.set_at(at),
                None => self.timer = Timer::never(),
            }
        }
        let (timer, events) = (&mut self.timer, &self.events);
        let fired = async move {
            timer.await;
            None
        };
        // `self.sender` keeps the channel open: this waits for an event.
        let received = async move { events.recv().await.ok() };
        let event = future::or(fired, received).await;
        if event.is_none() {
            // A fired timer must be set again, even to the same instant.
            self.armed = None;
        }
        event
    }

    /// Exactly one `handle_*` call for one event.
    fn handle(&mut self, now: Instant, event: Event) {
        match run_loop::handle_event(&mut self.call, now, event) {
            Leftover::Nothing => {}
            Leftover::Buffer(pipe, buf) => {
                if let Some(process) = &self.process {
                    process.give_back(pipe, buf);
                }
            }
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
                Action::AbandonStreams => {
                    if let Some(process) = &mut self.process {
                        process.abandon_streams();
                    }
                }
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
    }

    fn finish(&mut self, outcome: Outcome) {
        self.host.state.record_finished(outcome.record.clone());
        self.published.finish(outcome);
    }
}

impl Drop for Owner {
    /// Runs when the loop ends, and also if it panicked: waiters wake up and
    /// the host stops counting the call as live. The channel is closed and
    /// emptied: an approval still queued is dropped with its reply sender,
    /// so its caller gets an error instead of waiting forever (unlike a std
    /// receiver, a dropped async-channel receiver leaves queued events alive
    /// while a handle still holds a sender).
    fn drop(&mut self) {
        self.events.close();
        while self.events.try_recv().is_ok() {}
        self.published.owner_ended();
        self.host.deregister(self.id);
    }
}
