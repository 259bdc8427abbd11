//! The owner of one call: the core's run loop, on its own (pooled) thread.
//!
//! It holds the [`Call`](spillguard_core::Call) (shared with its readers, see
//! [`shared_call`](crate::shared_call)), the helper (through its reader,
//! waiter and stdin threads) and the cancellation, and does nothing but
//! this:
//!
//! 1. carry out every action from
//!    [`Call::poll_action`](spillguard_core::Call::poll_action) until `None`;
//! 2. wait for the first of (end-of-file, exit, command, a reader's
//!    wake-up, deadline) on one channel, until
//!    [`Call::poll_timeout`](spillguard_core::Call::poll_timeout);
//! 3. read the clock, make exactly one `handle_*` call, and go to 1.
//!
//! Chunks do not pass through the owner: each reader feeds the call itself
//! and wakes the owner only when the core then has actions. The loop ends at
//! [`Action::Finished`]. Every decision (budgets, states, deadlines,
//! signals) is the core's; the owner only reports and obeys.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Instant;

use spillguard_core::{Action, CallError, Outcome, State};

use crate::command::HelperCommand;
use crate::handle::Published;
use crate::host::HostShared;
use crate::process::Process;
use crate::run_loop::{self, Leftover};
use crate::shared_call::SharedCall;

pub(crate) use crate::run_loop::{Pipe, Start};

/// How many events may wait for the owner. Readers send a wake-up only when
/// the core has new actions and one end-of-file each, so they rarely fill
/// it; a caller sending commands may wait briefly.
pub(crate) const EVENT_QUEUE: usize = 32;

/// The core's answer to an approval or a denial goes back on this channel.
pub(crate) type Reply = SyncSender<Result<(), CallError>>;

/// Everything the owner waits for, on one channel.
pub(crate) type Event = run_loop::Event<Reply>;

/// What a [`CallHandle`](crate::CallHandle) or the [`Host`](crate::Host) asks.
pub(crate) type Command = run_loop::Command<Reply>;

/// The owner of one call. See the [module docs](self).
pub(crate) struct Owner {
    pub(crate) id: u64,
    pub(crate) call: Arc<SharedCall>,
    pub(crate) command: Option<HelperCommand>,
    pub(crate) events: Receiver<Event>,
    /// Handed to the helper's threads; keeps `events` connected.
    pub(crate) sender: SyncSender<Event>,
    pub(crate) process: Option<Process>,
    pub(crate) published: Arc<Published>,
    pub(crate) host: Arc<HostShared>,
}

impl Owner {
    /// Runs the call to its end.
    pub(crate) fn run(&mut self, start: Start) {
        run_loop::begin(
            &mut self.call.lock().call,
            Instant::now(),
            start,
            self.command.as_ref(),
        );
        while !self.carry_out_actions() {
            let event = self.next_event();
            let now = Instant::now();
            match event {
                Some(event) => self.handle(now, event),
                None => self.call.lock().call.handle_timeout(now),
            }
        }
    }

    /// Ends a call whose owner thread could not be started, in the caller's
    /// thread: nothing is spawned, so this never blocks.
    pub(crate) fn fail_without_thread(mut self, reason: String) {
        let _ = self
            .call
            .lock()
            .call
            .handle_validation_failed(Instant::now(), reason);
        self.command = None;
        self.carry_out_actions();
    }

    /// The next event, or `None` when the core's timer is due. A due timer
    /// comes before queued events, so a flood cannot postpone a deadline.
    fn next_event(&self) -> Option<Event> {
        let now = Instant::now();
        let timeout = self.call.lock().call.poll_timeout();
        match timeout {
            Some(at) if at <= now => None,
            Some(at) => self.events.recv_timeout(at - now).ok(),
            // `self.sender` keeps the channel open: this waits for an event.
            None => self.events.recv().ok(),
        }
    }

    /// Exactly one `handle_*` call for one event.
    fn handle(&mut self, now: Instant, event: Event) {
        let leftover = run_loop::handle_event(&mut self.call.lock().call, now, event);
        match leftover {
            // Std readers keep their buffer: no chunk comes this way.
            Leftover::Nothing | Leftover::Buffer(..) => {}
            Leftover::Answer(reply, answer) => {
                let _ = reply.send(answer);
            }
        }
    }

    /// Carries out every queued action; `true` once the call finished.
    fn carry_out_actions(&mut self) -> bool {
        // The state is published before each action (a caller who sees the
        // card also sees `awaiting_approval`) and after the last one.
        // The lock is not held while an action is carried out: readers keep
        // feeding the call meanwhile.
        while let Some((action, state)) = self.next_action() {
            self.published.set_state(state);
            match action {
                Action::Audit(event) => {
                    if let Err(error) = self.host.state.audit(&event) {
                        let mut call = self.call.lock();
                        call.call.handle_audit_failed(Instant::now(), error);
                    }
                }
                Action::ShowApprovalCard(card) => self.published.show_card(card),
                Action::Spawn => self.spawn(),
                Action::CloseStdin => {
                    if let Some(process) = &self.process {
                        process.close_stdin();
                    }
                }
                Action::SignalGroup { pgid, signal } => crate::os::signal_group(pgid, signal),
                Action::AbandonStreams => self.call.stop_listening(),
                Action::Finished(outcome) => {
                    self.call.stop_listening();
                    self.finish(*outcome);
                    return true;
                }
                // An action this adapter does not know has nothing to carry out.
                _ => {}
            }
        }
        self.published.set_state(self.call.lock().call.state());
        false
    }

    /// The next action and the state the call is in, taken under one lock.
    fn next_action(&self) -> Option<(Action, State)> {
        let mut shared = self.call.lock();
        let action = shared.call.poll_action()?;
        Some((action, shared.call.state()))
    }

    /// Spawns under the lock: the new readers feed the call only once the
    /// core knows the helper was spawned.
    fn spawn(&mut self) {
        let (pipe_size, events) = (self.host.state.options.pipe_size, &self.sender);
        let process = &mut self.process;
        let shared = &self.call;
        run_loop::spawn(
            &mut shared.lock().call,
            self.command.take(),
            Instant::now,
            |command| {
                let spawned = Process::spawn(command, pipe_size, shared, events)?;
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
    /// the host stops counting the call as live.
    fn drop(&mut self) {
        self.published.owner_ended();
        self.host.deregister(self.id);
    }
}
