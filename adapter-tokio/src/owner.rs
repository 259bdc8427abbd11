//! The owner of one call: the core's run loop, as one detached task.
//!
//! It holds the [`Call`], the helper's output streams (it reads them
//! itself), its exit (through a waiter task), its stdin writer task and the
//! cancellation, and does nothing but this:
//!
//! 1. carry out every action from [`Call::poll_action`] until `None`;
//! 2. wait for the first of (due timer, command or exit, a chunk or the end
//!    of either stream): one `select!`, biased towards the one [`Sleep`],
//!    which is reset only when [`Call::poll_timeout`] changes, then the
//!    channel, then the two streams in turns (each wait starts with the
//!    other one); a timer already due is taken before anything is looked
//!    at;
//! 3. read the clock, make exactly one `handle_*` call, and go to 1.
//!
//! Reading in the owner's own `select!` costs no task hop per chunk. The
//! loop ends at [`Action::Finished`]; the owner then lets go of the call
//! and reads and drops what the helper's group still writes until
//! end-of-file. Every decision (budgets, states, deadlines, signals) is the
//! core's; the owner only reports and obeys.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use spillguard_core::{Action, ApprovalCard, Call, CallError, Outcome, Signal, State};
use spillguard_std::HelperCommand;
use spillguard_std::run_loop::{self, Leftover};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Sleep;

use crate::host::HostShared;
use crate::process::{Process, Stream};
use crate::reader::{CHUNK_BYTES, read_open};

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
/// caller's `cancel` never waits; what flows in it is the caller's and the
/// host's commands and the waiter's one event.
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
    /// The owner let go of the call (it finished, or the task panicked or
    /// its runtime shut down): nothing changes any more.
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
    /// `false` once the streams were abandoned: what is read is dropped.
    pub(crate) listening: bool,
    /// One read buffer per stream (stdout, stderr), made at the spawn.
    pub(crate) bufs: [Vec<u8>; 2],
    /// Which stream the next wait looks at first.
    pub(crate) stderr_first: bool,
    /// The call was let go of (deregistered, `owner_ended` published).
    pub(crate) released: bool,
}

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
    /// Read buffers for a spawned helper's streams.
    fn buffers() -> [Vec<u8>; 2] {
        [vec![0; CHUNK_BYTES], vec![0; CHUNK_BYTES]]
    }
}

impl Owner {
    /// Runs the call to its end.
    pub(crate) async fn run(mut self, start: Start) {
        run_loop::begin(&mut self.call, clock(), start, self.command.as_ref());
        let timer = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(timer);
        let mut armed = None;
        while !self.carry_out_actions().await {
            let input = self.next_input(timer.as_mut(), &mut armed).await;
            let now = clock();
            match input {
                Input::Timer => self.call.handle_timeout(now),
                Input::Event(event) => self.handle(now, event),
                Input::Read(pipe, len) => self.take_read(now, pipe, len),
            }
        }
        self.drain_unheard().await;
    }

    /// The next input. The one `timer` is reset only when the core's
    /// deadline changed (`armed` is the deadline it is set to). A due timer
    /// comes before events and reads, so a flood cannot postpone a
    /// deadline; the streams take turns, so neither starves the other.
    async fn next_input(
        &mut self,
        mut timer: Pin<&mut Sleep>,
        armed: &mut Option<Instant>,
    ) -> Input {
        let due = self.call.poll_timeout();
        if due != *armed {
            if let Some(at) = due {
                timer.as_mut().reset(at.into());
            }
            *armed = due;
        }
        if due.is_some_and(|at| at <= clock()) {
            return Input::Timer;
        }
        self.stderr_first = !self.stderr_first;
        let mut none: [Option<Stream>; 2] = [None, None];
        let [stdout, stderr] = match &mut self.process {
            Some(process) => &mut process.pipes,
            None => &mut none,
        };
        let [stdout_buf, stderr_buf] = &mut self.bufs;
        let out = (stdout, stdout_buf, Pipe::Stdout);
        let err = (stderr, stderr_buf, Pipe::Stderr);
        let (first, second) = if self.stderr_first {
            (err, out)
        } else {
            (out, err)
        };
        tokio::select! {
            biased;
            () = timer, if due.is_some() => Input::Timer,
            // `self.sender` keeps the channel open: `None` never comes (and
            // would only disable this branch).
            Some(event) = self.events.recv() => Input::Event(event),
            len = read_open(first.0, first.1) => Input::Read(first.2, len),
            len = read_open(second.0, second.1) => Input::Read(second.2, len),
        }
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
        let [stdout, stderr] = &mut process.pipes;
        let [stdout_buf, stderr_buf] = &mut self.bufs;
        while stdout.is_some() || stderr.is_some() {
            tokio::select! {
                len = read_open(stdout, stdout_buf) => if len == 0 { *stdout = None },
                len = read_open(stderr, stderr_buf) => if len == 0 { *stderr = None },
            }
        }
    }

    /// Exactly one `handle_*` call for one event.
    fn handle(&mut self, now: Instant, event: Event) {
        match run_loop::handle_event(&mut self.call, now, event) {
            Leftover::Nothing => {}
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
                Action::AbandonStreams => self.listening = false,
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
        if self.process.is_some() {
            self.bufs = Owner::buffers();
        }
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
        // Nobody reads the channel any more: later sends fail at once, and
        // a reply still queued is dropped, so no approve or deny waits for
        // the drain.
        self.events.close();
        while self.events.try_recv().is_ok() {}
        self.release();
    }

    /// Lets go of the call (once): the host stops counting it as live,
    /// then waiters see that nothing changes any more.
    fn release(&mut self) {
        if !self.released {
            self.released = true;
            self.host.state.deregister(self.id);
            self.published.send_modify(|s| s.owner_ended = true);
        }
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
        self.release();
    }
}
