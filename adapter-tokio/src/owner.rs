//! The owner of one call: the core's run loop, as one detached task.
//!
//! It holds the [`Call`], the helper (through its reader, waiter and stdin
//! tasks) and the cancellation, and does nothing but this:
//!
//! 1. carry out every action from [`Call::poll_action`] until `None`;
//! 2. wait for the first of (due timer, chunk, end-of-file, exit, command):
//!    one `select!`, biased towards the one [`Sleep`], which is reset only
//!    when [`Call::poll_timeout`] changes; a timer already due is taken
//!    before the channel is even looked at;
//! 3. read the clock, make exactly one `handle_*` call, and go to 1.
//!
//! The loop ends at [`Action::Finished`]. Every decision (budgets, states,
//! deadlines, signals) is the core's; the owner only reports and obeys.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use spillguard_core::{Action, ApprovalCard, Call, CallError, Outcome, Signal, State};
use spillguard_std::HelperCommand;
use spillguard_std::run_loop::{self, Leftover};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Sleep;

use crate::host::HostShared;
use crate::process::Process;

pub(crate) use spillguard_std::run_loop::{Pipe, Start};

/// The owner's clock: tokio's, so that a paused test clock drives the call.
pub(crate) fn clock() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The core's answer to an approval or a denial.
pub(crate) type Reply = oneshot::Sender<Result<(), CallError>>;

/// Everything the owner waits for, on one channel.
///
/// The channel is unbounded so that a handle can send from `Drop` and a
/// caller's `cancel` never waits, but what flows in it is bounded: each
/// reader has at most [`BUFFERS_PER_STREAM`](spillguard_std::read_buffers::BUFFERS_PER_STREAM)
/// chunks in flight, and the waiter sends one event.
pub(crate) type Event = run_loop::Event<Reply>;

/// What a [`CallHandle`](crate::CallHandle) or the [`Host`](crate::Host) asks.
pub(crate) type Command = run_loop::Command<Reply>;

/// What the owner publishes for the handle and the host.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) state: State,
    pub(crate) card: Option<ApprovalCard>,
    /// The outcome was handed over and the record kept.
    pub(crate) finished: bool,
    /// The owner task is gone (finished, panicked or its runtime shut down).
    pub(crate) owner_ended: bool,
}

impl Snapshot {
    pub(crate) fn new() -> Self {
        Self {
            state: State::Received,
            card: None,
            finished: false,
            owner_ended: false,
        }
    }
}

/// The owner of one call. See the [module docs](self).
pub(crate) struct Owner {
    pub(crate) id: u64,
    pub(crate) call: Call,
    pub(crate) command: Option<HelperCommand>,
    pub(crate) events: mpsc::UnboundedReceiver<Event>,
    /// Handed to the helper's tasks; keeps `events` open.
    pub(crate) sender: mpsc::UnboundedSender<Event>,
    pub(crate) process: Option<Process>,
    pub(crate) published: watch::Sender<Snapshot>,
    pub(crate) outcome: Option<oneshot::Sender<Outcome>>,
    pub(crate) host: Arc<HostShared>,
    /// The loop reached `Finished`.
    pub(crate) finished: bool,
}

impl Owner {
    /// Runs the call to its end.
    pub(crate) async fn run(mut self, start: Start) {
        run_loop::begin(&mut self.call, clock(), start, self.command.as_ref());
        let timer = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(timer);
        let mut armed = None;
        while !self.carry_out_actions().await {
            let event = self.next_event(timer.as_mut(), &mut armed).await;
            let now = clock();
            match event {
                Some(event) => self.handle(now, event),
                None => self.call.handle_timeout(now),
            }
        }
    }

    /// The next event, or `None` when the core's timer is due. The one
    /// `timer` is reset only when the core's deadline changed (`armed` is
    /// the deadline it is set to). A due timer comes before queued events,
    /// so a flood cannot postpone a deadline.
    async fn next_event(
        &mut self,
        mut timer: Pin<&mut Sleep>,
        armed: &mut Option<Instant>,
    ) -> Option<Event> {
        let due = self.call.poll_timeout();
        if due != *armed {
            if let Some(at) = due {
                timer.as_mut().reset(at.into());
            }
            *armed = due;
        }
        if due.is_some_and(|at| at <= clock()) {
            return None;
        }
        tokio::select! {
            biased;
            () = timer, if due.is_some() => None,
            // `self.sender` keeps the channel open: this waits for an event.
            event = self.events.recv() => event,
        }
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
                let _ = reply.send(answer);
            }
        }
    }

    /// Carries out every queued action; `true` once the call finished.
    /// Only an audit write awaits (on tokio's blocking pool); it is done
    /// before the next action, so events stay in order.
    async fn carry_out_actions(&mut self) -> bool {
        // The state is published before each action (a caller who sees the
        // card also sees `awaiting_approval`) and after the last one.
        while let Some(action) = self.call.poll_action() {
            self.publish_state();
            match action {
                Action::Audit(event) => {
                    if let Err(error) = self.host.audit(event).await {
                        self.call.handle_audit_failed(clock(), error);
                    }
                }
                Action::ShowApprovalCard(card) => {
                    self.published.send_modify(|s| s.card = Some(card));
                }
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
        self.publish_state();
        false
    }

    fn publish_state(&self) {
        let state = self.call.state();
        self.published.send_if_modified(|s| {
            let changed = s.state != state;
            s.state = state;
            changed
        });
    }

    fn spawn(&mut self) {
        let (pipe_size, events) = (self.host.state.options.pipe_size, &self.sender);
        let process = &mut self.process;
        run_loop::spawn(&mut self.call, self.command.take(), clock, |command| {
            let spawned = Process::spawn(command, pipe_size, events)?;
            let reported = (spawned.pid, spawned.pipe_capacity);
            *process = Some(spawned);
            Ok(reported)
        });
    }

    fn finish(&mut self, outcome: Outcome) {
        self.finished = true;
        let state = outcome.record.state;
        self.host.state.record_finished(outcome.record.clone());
        // The outcome is handed over before `finished` is published, so a
        // handle that sees `finished` finds it. Nobody listening: dropped,
        // and its pool share with it.
        if let Some(handle) = self.outcome.take() {
            let _ = handle.send(outcome);
        }
        self.published.send_modify(|s| {
            s.state = state;
            s.finished = true;
        });
    }
}

impl Drop for Owner {
    /// Runs when the loop ends, and also if the task was dropped before
    /// (its runtime shut down) or panicked: the host stops counting the
    /// call as live, then waiters wake up. A helper whose call could not
    /// finish is killed, so that it does not outlive its runtime.
    fn drop(&mut self) {
        if !self.finished
            && let Some(process) = &self.process
        {
            spillguard_std::os::signal_group(process.pid, Signal::Kill);
        }
        self.host.state.deregister(self.id);
        self.published.send_modify(|s| s.owner_ended = true);
    }
}
