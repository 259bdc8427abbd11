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
//! hands any stream the call stopped listening to (an escaped descendant
//! holds it) to the host's drainer ([`spillguard_kit::orphans`]).
//! Every decision (budgets, states, deadlines, signals) is the core's; the
//! owner only reports and obeys.
//! Being detached from the caller, it cannot be cancelled by a caller
//! dropping a future: once started it runs to the record.

use std::time::Instant;

use futures_lite::future;
use smol::Timer;
use smol::channel::{Receiver, Sender};
use spillguard_core::CallError;
use spillguard_kit::owner::{Blocking, HelperSlot, OwnerCore, Unblocked};
use spillguard_kit::run_loop;

use crate::handle::Changed;
use crate::host::HostShared;
use crate::process::Process;
use crate::reader::{CHUNK_BYTES, read_either};

pub(crate) use spillguard_kit::run_loop::{Pipe, Start};

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
    core: OwnerCore<HostShared, Changed>,
    events: Receiver<Event>,
    /// The helper; its tasks report through the owner's channel.
    io: HelperSlot<Process, SmolPool>,
    /// One timer, moved only when [`Call::poll_timeout`](spillguard_core::Call::poll_timeout) changes.
    timer: Timer,
    /// The instant `timer` is set to.
    armed: Option<Instant>,
    /// One read buffer per stream (stdout, stderr), made at the spawn.
    bufs: [Vec<u8>; 2],
    /// Which stream the next wait looks at first.
    stderr_first: bool,
}

/// Where the owner runs blocking work: smol's blocking thread pool.
pub(crate) struct SmolPool;

impl Blocking for SmolPool {
    /// On smol's blocking thread pool (`smol::unblock`), never on an
    /// executor thread.
    fn unblock<T: Send + 'static, F: FnOnce() -> T + Send + 'static>(job: F) -> Unblocked<T> {
        let task = smol::unblock(job);
        Box::pin(async move { Some(task.await) })
    }
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
    /// The owner of the call in `core`, reached through `events`.
    pub(crate) fn new(
        core: OwnerCore<HostShared, Changed>,
        events: Receiver<Event>,
        sender: Sender<Event>,
    ) -> Self {
        Self {
            core,
            events,
            io: HelperSlot::new(sender),
            timer: Timer::never(),
            armed: None,
            bufs: [Vec::new(), Vec::new()],
            stderr_first: false,
        }
    }

    /// Runs the call to its end.
    pub(crate) async fn run(mut self, start: Start) {
        self.core.begin(start);
        let mut reads_in_a_row = 0;
        while !self.carry_out_actions().await {
            let input = self.next_input().await;
            let now = Instant::now();
            match input {
                Input::Timer => self.core.call_mut().handle_timeout(now),
                Input::Event(event) => self.core.handle_event(now, event, |reply, answer| {
                    let _ = reply.try_send(answer);
                }),
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
        self.drain_unheard();
    }

    /// The next input. A due timer comes before events and reads, so a
    /// flood cannot postpone a deadline; the streams take turns, so neither
    /// starves the other.
    async fn next_input(&mut self) -> Input {
        let at = self.core.call().poll_timeout();
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
        let pipes = match self.io.process_mut() {
            Some(process) => &mut process.0.pipes,
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
    /// end (0). Nothing once the streams were abandoned.
    fn take_read(&mut self, now: Instant, pipe: Pipe, len: usize) {
        let pipes = self.io.process_mut().map(|process| &mut process.0.pipes);
        self.core.take_read(now, pipes, &self.bufs, (pipe, len));
    }

    /// After the call finished: hands the streams it stopped listening to
    /// (an escaped descendant still holds them) to the host's drainer
    /// ([`spillguard_kit::orphans`]), as duplicated descriptors (the
    /// stream itself leaves the reactor when dropped here).
    fn drain_unheard(&mut self) {
        if let Some(process) = self.io.process_mut() {
            // A stream with no descriptor left to duplicate is closed.
            let leftovers = process
                .0
                .take_leftovers(|stream| spillguard_kit::os::duplicate(&stream));
            self.core.hand_over_leftovers(leftovers);
        }
    }

    /// Carries out every queued action ([`OwnerCore::carry_out_actions`]);
    /// `true` once the call finished. Then the channel is closed and
    /// emptied: an approval still queued is dropped with its reply sender,
    /// so its caller gets an error instead of waiting (unlike a std
    /// receiver, a dropped async-channel receiver leaves queued events
    /// alive while a handle still holds a sender).
    async fn carry_out_actions(&mut self) -> bool {
        let finished = self.core.carry_out_actions(&mut self.io).await;
        if finished {
            self.events.close();
            while self.events.try_recv().is_ok() {}
        }
        if finished || self.io.process().is_none() {
            return finished;
        }
        if self.bufs[0].is_empty() {
            self.bufs = [vec![0; CHUNK_BYTES], vec![0; CHUNK_BYTES]];
        }
        false
    }
}

impl Drop for Owner {
    /// Also when the task panicked: the channel is closed and emptied, so
    /// an approval still waiting for its answer gets an error at once. (The
    /// helper's group and the call's waiters are seen to by
    /// [`OwnerCore`]'s own drop.)
    fn drop(&mut self) {
        self.events.close();
        while self.events.try_recv().is_ok() {}
    }
}
