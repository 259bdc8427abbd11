//! The owner of one call: the core's run loop, on its own thread.
//!
//! It holds the [`Call`], the helper (through its reader, waiter and stdin
//! threads) and the cancellation, and does nothing but this:
//!
//! 1. carry out every action from [`Call::poll_action`] until `None`;
//! 2. wait for the first of (chunk, end-of-file, exit, command, deadline)
//!    on one channel, until [`Call::poll_timeout`];
//! 3. read the clock, make exactly one `handle_*` call, and go to 1.
//!
//! The loop ends at [`Action::Finished`]. Every decision (budgets, states,
//! deadlines, signals) is the core's; the owner only reports and obeys.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Instant;

use spillguard_core::{Action, Call, CallError, CancelReason, ExitStatus, Outcome};

use crate::command::HelperCommand;
use crate::handle::Published;
use crate::host::HostShared;
use crate::process::Process;

/// How many events may wait for the owner. Readers hold at most
/// [`BUFFERS_PER_STREAM`](crate::reader::BUFFERS_PER_STREAM) chunks each,
/// so they never fill it; a caller sending commands may wait briefly.
pub(crate) const EVENT_QUEUE: usize = 32;

/// One of the helper's output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pipe {
    Stdout = 0,
    Stderr = 1,
}

impl Pipe {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Pipe::Stdout => "stdout",
            Pipe::Stderr => "stderr",
        }
    }
}

/// Everything the owner waits for, on one channel.
#[derive(Debug)]
pub(crate) enum Event {
    /// `buf[..len]` was read from `pipe`; `buf` goes back to its reader.
    Chunk {
        pipe: Pipe,
        buf: Vec<u8>,
        len: usize,
    },
    /// `pipe` reached end-of-file (or failed).
    Eof(Pipe),
    /// The helper was reaped.
    Exited(ExitStatus),
    /// Waiting for the helper failed.
    ProcessLost,
    /// From the caller or the host.
    Command(Command),
}

impl Event {
    /// The read buffer an undelivered chunk carried (empty otherwise).
    pub(crate) fn into_buffer(self) -> Vec<u8> {
        match self {
            Event::Chunk { buf, .. } => buf,
            _ => Vec::new(),
        }
    }
}

/// What a [`CallHandle`](crate::CallHandle) or the [`Host`](crate::Host) asks.
#[derive(Debug)]
pub(crate) enum Command {
    /// The approver said yes; the core's answer goes back on the channel.
    Approve(SyncSender<Result<(), CallError>>),
    /// The approver said no; the core's answer goes back on the channel.
    Deny(SyncSender<Result<(), CallError>>),
    /// Stop the call.
    Cancel(CancelReason),
    /// The handle was dropped without its outcome.
    ClientDisconnected,
}

/// How the owner starts: the checks made before the first input.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start {
    /// From the host's policy.
    pub(crate) needs_approval: bool,
    /// The host is shutting down: the call is cancelled before anything.
    pub(crate) host_closing: bool,
}

/// The owner of one call. See the [module docs](self).
pub(crate) struct Owner {
    pub(crate) id: u64,
    pub(crate) call: Call,
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
    pub(crate) fn run(mut self, start: Start) {
        let now = Instant::now();
        if start.host_closing {
            self.call.handle_cancel(now, CancelReason::HostShutdown);
        }
        let checked = self.command.as_ref().map(HelperCommand::validate);
        let accepted = match checked {
            Some(Ok(())) => self.call.handle_validated(now, start.needs_approval),
            Some(Err(invalid)) => self.call.handle_validation_failed(now, invalid.to_string()),
            None => self.call.handle_validation_failed(now, "no command to run"),
        };
        if let Err(misuse) = accepted {
            // Only a discovery call said to need approval gets here.
            let _ = self.call.handle_validation_failed(now, misuse.to_string());
        }
        while !self.carry_out_actions() {
            let event = self.next_event();
            let now = Instant::now();
            match event {
                Some(event) => self.handle(now, event),
                None => self.call.handle_timeout(now),
            }
        }
    }

    /// Ends a call whose owner thread could not be started, in the caller's
    /// thread: nothing is spawned, so this never blocks.
    pub(crate) fn fail_without_thread(mut self, reason: String) {
        let _ = self.call.handle_validation_failed(Instant::now(), reason);
        self.command = None;
        self.carry_out_actions();
    }

    /// The next event, or `None` when the core's timer is due. A due timer
    /// comes before queued events, so a flood cannot postpone a deadline.
    fn next_event(&self) -> Option<Event> {
        let now = Instant::now();
        match self.call.poll_timeout() {
            Some(at) if at <= now => None,
            Some(at) => self.events.recv_timeout(at - now).ok(),
            // `self.sender` keeps the channel open: this waits for an event.
            None => self.events.recv().ok(),
        }
    }

    /// Exactly one `handle_*` call for one event.
    fn handle(&mut self, now: Instant, event: Event) {
        let reported = match event {
            Event::Chunk { pipe, buf, len } => {
                let bytes = &buf[..len];
                match pipe {
                    Pipe::Stderr => self.call.handle_stderr(now, bytes),
                    Pipe::Stdout => self.call.handle_stdout(now, bytes),
                }
                if let Some(process) = &self.process {
                    process.give_back(pipe, buf);
                }
                Ok(())
            }
            Event::Eof(Pipe::Stdout) => self.call.handle_stdout_eof(now),
            Event::Eof(Pipe::Stderr) => self.call.handle_stderr_eof(now),
            Event::Exited(status) => self.call.handle_exit(now, status),
            Event::ProcessLost => self.call.handle_process_lost(now),
            Event::Command(Command::Approve(reply)) => {
                let _ = reply.send(self.call.handle_approval_granted(now));
                Ok(())
            }
            Event::Command(Command::Deny(reply)) => {
                let _ = reply.send(self.call.handle_approval_denied(now));
                Ok(())
            }
            Event::Command(Command::Cancel(reason)) => {
                self.call.handle_cancel(now, reason);
                Ok(())
            }
            Event::Command(Command::ClientDisconnected) => {
                self.call.handle_client_disconnected(now);
                Ok(())
            }
        };
        // The helper's threads report each fact once, after the spawn was
        // reported: the core accepts every one of them.
        debug_assert!(reported.is_ok(), "{reported:?}");
    }

    /// Carries out every queued action; `true` once the call finished.
    fn carry_out_actions(&mut self) -> bool {
        // The state is published before each action (a caller who sees the
        // card also sees `awaiting_approval`) and after the last one.
        while let Some(action) = self.call.poll_action() {
            self.published.set_state(self.call.state());
            match action {
                Action::Audit(event) => {
                    if let Err(error) = self.host.state.audit(&event) {
                        self.call.handle_audit_failed(Instant::now(), error);
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
        let Some(command) = self.command.take() else {
            let _ = self
                .call
                .handle_spawn_failed(Instant::now(), "the helper was already spawned");
            return;
        };
        let program = command.program.to_string_lossy().into_owned();
        let spawned = Process::spawn(command, self.host.state.options.pipe_size, &self.sender);
        let now = Instant::now();
        let reported = match spawned {
            Ok(process) => {
                let (pid, capacity) = (process.pid, process.pipe_capacity);
                self.process = Some(process);
                self.call.handle_pipe_capacity(capacity);
                self.call.handle_spawned(now, pid, pid)
            }
            Err(error) => self.call.handle_spawn_failed(
                now,
                format!("spawn failed: {program}: {:?}: {error}", error.kind()),
            ),
        };
        debug_assert!(reported.is_ok(), "{reported:?}");
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
