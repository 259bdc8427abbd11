//! The owner of one call: the core's run loop, on its own (pooled) thread.
//!
//! It holds the [`Call`], the helper's output pipes and its exit (a pidfd,
//! where the kernel has them), and the cancellation, and does nothing but
//! this:
//!
//! 1. carry out every action from [`Call::poll_action`] until `None`;
//! 2. `poll(2)` the doorbell of its [`Inbox`], both pipes and the pidfd,
//!    until one is ready or [`Call::poll_timeout`] (without waiting if an
//!    input is already known to be ready);
//! 3. take the inputs that are ready, one `Call::handle` call each, at the time
//!    read just before: a due timer first (a flood never postpones a
//!    deadline), then in turn an event, the exit, a chunk of stdout, a
//!    chunk of stderr; stop as soon as the core has actions, or after
//!    [`ROUNDS_PER_LOOK`] rounds (a busy pipe never hides the exit), and go
//!    to 1.
//!
//! One thread does it all: no hop between threads per chunk, and a short
//! call wakes its owner once, for the exit and both ends of file. The loop
//! ends at [`Action::Finished`]; the owner then releases the call (its
//! handle and host see it ended), hands any pipe the call stopped
//! listening to (an escaped descendant holds it) to the host's drainer
//! ([`spillguard_host::leftover_pipes`]: read and dropped for a bounded time, so
//! no descendant blocks on a full pipe), and reaps the child if it is not
//! reaped yet, so no zombie is left. Every decision (budgets, states, deadlines,
//! signals) is the core's; the owner only reports and obeys.
//!
//! The exit is reaped only once the mailbox is found empty (or after
//! `EVENTS_BEFORE_EXIT` events taken ahead of it, so a flood cannot hold
//! it back for ever): a command sent while the helper ran, such as bytes
//! a stdout pump diverted, is never overtaken by the exit that ends the
//! call.

use std::any::Any;
use std::future::ready;
use std::io;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures_lite::future;
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use spillguard_core::{CancelReason, Config};
use spillguard_host::host_state::process_default;
use spillguard_host::os::exit_status;
use spillguard_host::owner::{Blocking, Helper, HelperSlot, Unblocked};
use spillguard_host::stream::Forwarded;
use spillguard_host::{HelperCommand, HostOptions};

use crate::process::Process;
use crate::reader::{Read, read_chunk, with_buffer};
use spillguard_core::Input;
use spillguard_host::blocking::{Inbox, Mailbox, ThreadDriver, ThreadOwnerCore};
use spillguard_host::run_loop;

pub(crate) use spillguard_host::run_loop::{Pipe, Start};

/// Inputs taken between two looks at every source: however busy one pipe
/// is, the exit, the doorbell and the other pipe are seen within this many
/// rounds (at most one chunk of each pipe per round).
const ROUNDS_PER_LOOK: usize = 16;

/// Events taken after the exit was seen before it is reaped anyway: the
/// commands queued while the helper ran go first, but a source that keeps
/// sending (a stdout pump diverting an escapee's flood) cannot hold the
/// exit back for ever.
const EVENTS_BEFORE_EXIT: u32 = 1024;

/// The longest single wait in `poll`; a later timeout is waited for in
/// several.
const LONGEST_WAIT: Duration = Duration::from_secs(3600);

/// The pause after a `poll` that failed for another reason than a signal,
/// before trying again.
const POLL_FAILED_PAUSE: Duration = Duration::from_millis(10);

/// The owner of one call. See the [module docs](self).
#[allow(missing_debug_implementations)]
pub struct Owner {
    core: ThreadOwnerCore,
    /// Taken when the call finishes: later sends fail at once.
    inbox: Option<Inbox>,
    /// The helper; its waiter job (where the kernel has no pidfd) reports
    /// through the mailbox.
    io: HelperSlot<Process, Inline>,
    ready: Ready,
}

/// A std owner is a thread of its own: blocking work runs right there.
pub(crate) struct Inline;

impl Blocking for Inline {
    fn unblock<T: Send + 'static, F: FnOnce() -> T + Send + 'static>(job: F) -> Unblocked<T> {
        Box::pin(ready(Some(job())))
    }
}

impl Helper for Process {
    type Events = Mailbox;

    fn spawn(
        command: HelperCommand,
        pipe_size: Option<usize>,
        mailbox: &Mailbox,
    ) -> io::Result<Self> {
        Process::spawn(command, pipe_size, mailbox)
    }

    fn pid(&self) -> u32 {
        self.pid
    }

    fn pipe_capacity(&self) -> Option<u64> {
        self.pipe_capacity
    }

    fn close_stdin(&mut self) {
        Process::close_stdin(self);
    }

    fn take_streams(
        &mut self,
        mailbox: &Mailbox,
        forwarded: Arc<Forwarded>,
    ) -> Option<Box<dyn Any + Send>> {
        let raw = Process::take_streams(self, mailbox, forwarded)?;
        Some(Box::new(raw))
    }
}

/// The sources `poll` found ready and not yet emptied.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Ready {
    inbox: bool,
    exit: bool,
    pipes: [bool; 2],
    /// Events taken since the exit was seen.
    exit_waited: u32,
}

impl Ready {
    fn any(self) -> bool {
        self.inbox || self.exit || self.pipes[0] || self.pipes[1]
    }
}

impl Owner {
    /// The owner of the call in `core`, reached through `inbox`.
    pub(crate) fn new(core: ThreadOwnerCore, inbox: Option<Inbox>, mailbox: Mailbox) -> Self {
        Self {
            core,
            inbox,
            io: HelperSlot::new(mailbox),
            ready: Ready::default(),
        }
    }

    /// Runs the call to its end, then drains what the call stopped
    /// listening to.
    pub(crate) fn run(&mut self, start: Start) {
        self.core.begin(start);
        with_buffer(|buf| {
            while !self.carry_out_actions() {
                self.step(buf);
            }
            self.drain_unheard(buf);
        });
    }

    /// Ends a call whose owner thread could not be started, in the caller's
    /// thread: `cancelled_before_dispatch` if the host is closing, else
    /// `failed_before_dispatch` for `reason`. Nothing is spawned; the
    /// call's audit events are written here.
    pub(crate) fn fail_without_thread(mut self, start: Start, reason: String) {
        let now = Instant::now();
        let call = self.core.call_mut();
        if start.host_closing {
            let _ = call.handle(now, Input::Cancel(CancelReason::HostShutdown));
        }
        // Absorbed by the terminal state if the cancel ended the call.
        let _ = call.handle(now, Input::ValidationFailed(reason));
        self.carry_out_actions();
    }

    /// Looks at every source (waiting if none is known to be ready), then
    /// takes inputs, one `Call::handle` call each, until the core has actions,
    /// a timer is due, nothing is ready, or [`ROUNDS_PER_LOOK`] rounds.
    fn step(&mut self, buf: &mut [u8]) {
        self.look(!self.ready.any());
        for _ in 0..ROUNDS_PER_LOOK {
            let now = Instant::now();
            let call = self.core.call_mut();
            if call.poll_timeout().is_some_and(|at| at <= now) {
                let _ = call.handle(now, Input::Timeout);
                return;
            }
            if !self.ready.any() {
                return;
            }
            self.take_one_of_each(now, buf);
            if self.core.call().has_pending_actions() {
                return;
            }
        }
    }

    /// Takes one input from each source in turn: an event (the mailbox is
    /// always looked at: it costs nothing when empty), the exit once the
    /// mailbox is empty, a chunk of each pipe. A source found empty is no
    /// longer ready.
    fn take_one_of_each(&mut self, now: Instant, buf: &mut [u8]) {
        match self.inbox.as_ref().and_then(Inbox::try_next) {
            Some(event) => {
                self.ready.inbox = true;
                self.core.handle_event(now, event, |reply, answer| {
                    let _ = reply.send(answer);
                });
            }
            None => self.ready.inbox = false,
        }
        // The exit waits until the events queued before it are taken (at
        // most EVENTS_BEFORE_EXIT): a command sent while the helper ran
        // (the bytes a stdout pump diverted to the capture) reaches the
        // call before its exit can end it.
        if self.ready.exit && !self.core.call().has_pending_actions() {
            if self.ready.inbox && self.ready.exit_waited < EVENTS_BEFORE_EXIT {
                self.ready.exit_waited += 1;
            } else {
                self.ready.exit = false;
                self.reap(now);
            }
        }
        for pipe in [Pipe::Stdout, Pipe::Stderr] {
            if self.ready.pipes[pipe as usize] && !self.core.call().has_pending_actions() {
                self.read(now, pipe, buf);
            }
        }
    }

    /// `poll`s the doorbell, both pipes and the pidfd, and notes which are
    /// ready. With `block`, waits until one is, or until the core's
    /// timeout; without, only looks.
    fn look(&mut self, block: bool) {
        let timeout = if block {
            // A far timeout is cut to LONGEST_WAIT (some systems refuse
            // more); waking early only means looking again.
            let left = self.core.call().poll_timeout().map_or(LONGEST_WAIT, |at| {
                at.saturating_duration_since(Instant::now())
            });
            left.min(LONGEST_WAIT)
        } else {
            Duration::ZERO
        };
        let timeout = Timespec::try_from(timeout).ok();
        let process = self.io.process();
        // Slots: the doorbell, stdout, stderr, the pidfd; a closed one is
        // left out and its slot stays `None`.
        let sources = [
            self.inbox.as_ref().map(Inbox::bell),
            process.and_then(|p| p.pipe(Pipe::Stdout)),
            process.and_then(|p| p.pipe(Pipe::Stderr)),
            process.and_then(|p| p.exit.as_ref().map(|watch| watch.fd())),
        ];
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(4);
        let mut slots = [None; 4];
        for (slot, fd) in sources.iter().enumerate() {
            if let Some(fd) = fd {
                slots[slot] = Some(fds.len());
                fds.push(PollFd::from_borrowed_fd(*fd, PollFlags::IN));
            }
        }
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) => {}
            // A signal: what was ready still is; look again.
            Err(Errno::INTR) => return,
            // Out of memory for the poll set, or refused: never spin on it.
            Err(_) => {
                drop(fds);
                std::thread::sleep(POLL_FAILED_PAUSE);
                return;
            }
        }
        let fired = |slot: usize| slots[slot].is_some_and(|at| !fds[at].revents().is_empty());
        let ready = [fired(0), fired(1), fired(2), fired(3)];
        drop(fds);
        if ready[0] {
            if let Some(inbox) = &self.inbox {
                inbox.silence();
            }
            self.ready.inbox = true;
        }
        self.ready.pipes = [ready[1], ready[2]];
        self.ready.exit = ready[3];
    }

    /// The pidfd is readable: reap the child and report its exit.
    fn reap(&mut self, now: Instant) {
        let Some(watch) = self.io.process_mut().and_then(|p| p.exit.as_mut()) else {
            return;
        };
        let Some(reaped) = watch.reap() else {
            return;
        };
        self.core.report_tree();
        let call = self.core.call_mut();
        let reported = match reaped {
            Ok(status) => call.handle(now, Input::Exited(exit_status(status))),
            Err(_) => call.handle(now, Input::ProcessLost),
        };
        if let Some(process) = self.io.process_mut() {
            process.exit = None;
        }
        debug_assert!(reported.is_ok(), "{reported:?}");
    }

    /// One read of `pipe`: a chunk for the core, its end, or nothing yet.
    fn read(&mut self, now: Instant, pipe: Pipe, buf: &mut [u8]) {
        let Some(fd) = self.io.process().and_then(|p| p.pipe(pipe)) else {
            self.ready.pipes[pipe as usize] = false;
            return;
        };
        match read_chunk(fd, buf) {
            Read::Bytes(len) => {
                // A short read emptied the pipe: the next read would find
                // nothing, so the next look at it is a poll.
                if len < buf.len() {
                    self.ready.pipes[pipe as usize] = false;
                }
                let bytes = buf.get(..len).unwrap_or_default();
                self.core
                    .handle_read(now, pipe, run_loop::Read::Bytes(bytes));
            }
            Read::Empty => self.ready.pipes[pipe as usize] = false,
            Read::End => {
                self.ready.pipes[pipe as usize] = false;
                if let Some(process) = self.io.process_mut() {
                    process.pipes[pipe as usize] = None;
                }
                self.core.handle_read(now, pipe, run_loop::Read::End);
            }
        }
    }

    /// After the call finished: hands the pipes it stopped listening to
    /// (an escaped descendant still holds them) to the host's drainer, and
    /// reaps the child if it is not reaped yet, then lets go.
    fn drain_unheard(&mut self, buf: &mut [u8]) {
        if let Some(process) = self.io.process_mut() {
            process.close_stdin();
            let leftovers: Vec<_> = process.pipes.iter_mut().filter_map(Option::take).collect();
            self.ready.pipes = [false; 2];
            self.core.hand_over_leftovers(leftovers);
        }
        while self.io.process().is_some_and(Process::is_open) {
            self.look(!self.ready.any());
            let now = Instant::now();
            self.take_one_of_each(now, buf);
        }
    }

    /// Carries out every queued action ([`OwnerCore::carry_out_actions`]:
    /// nothing here ever waits, so polling it once completes it); `true`
    /// once the call finished. Then the inbox goes: sends fail at once.
    fn carry_out_actions(&mut self) -> bool {
        let finished = future::block_on(self.core.carry_out_actions(&mut self.io));
        if finished {
            self.inbox = None;
            self.ready.inbox = false;
        }
        finished
    }
}

/// The std adapter's owners: each call's owner (its run loop) runs on a thread taken
/// from a pool of kept threads (a new one when none is idle).
#[derive(Debug, Clone, Copy, Default)]
pub struct StdThreads;

impl ThreadDriver for StdThreads {
    type Owner = Owner;

    fn owner(core: ThreadOwnerCore, inbox: Option<Inbox>, mailbox: Mailbox) -> Owner {
        Owner::new(core, inbox, mailbox)
    }

    fn run(owner: &mut Owner, start: Start) {
        owner.run(start);
    }

    fn fail(owner: Owner, start: Start, reason: String) {
        owner.fail_without_thread(start, reason);
    }

    fn spawn(job: Box<dyn FnOnce() + Send>) -> io::Result<()> {
        crate::workers::run(job)
    }

    /// The call's span, with this crate as its target.
    #[cfg(feature = "tracing")]
    fn call_span(
        fields: &spillguard_host::call_span::SpanFields<'_>,
    ) -> spillguard_host::call_span::__tracing::Span {
        spillguard_host::call_span!("spillguard_std", fields)
    }

    fn default_host() -> io::Result<&'static spillguard_host::blocking::BlockingHost<StdThreads>> {
        static DEFAULT: OnceLock<spillguard_host::blocking::BlockingHost<StdThreads>> =
            OnceLock::new();
        process_default(&DEFAULT, || {
            spillguard_host::blocking::BlockingHost::new(Config::default(), HostOptions::default())
                .map_err(io::Error::other)
        })
    }
}
