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
//! 3. read the clock, make exactly one `Call::handle` call, and go to 1.
//!
//! Reading in the owner's own wait costs no task hop per chunk. The loop
//! ends at [`Action::Finished`]; the owner then lets go of the call and
//! hands any stream the call stopped listening to (an escaped descendant
//! holds it) to the host's drainer ([`spillguard_host::leftover_pipes`]).
//! Every decision (budgets, states, deadlines, signals) is the core's; the
//! owner only reports and obeys.
//! Being detached from the caller, it cannot be cancelled by a caller
//! dropping a future: once started it runs to the record.

use std::time::Instant;

use futures_lite::future;
use smol::Timer;
use spillguard_host::asynchronous::{AsyncOwner, NewOwner, Sources};
use spillguard_host::run_loop::{Event, Pipe};

use crate::process::SmolSpawn;
use crate::reader::read_either;
use crate::runtime::{Reply, SmolRuntime};
use spillguard_core::Input;

/// The owner of one call. See the [module docs](self).
pub(crate) struct Owner {
    /// The call, the channel, the helper and the read buffers.
    parts: AsyncOwner<SmolRuntime, SmolSpawn>,
    /// One timer, moved only when [`Call::poll_timeout`](spillguard_core::Call::poll_timeout) changes.
    timer: Timer,
    /// The instant `timer` is set to.
    armed: Option<Instant>,
}

/// Reads in a row after which the owner lets the executor run other tasks
/// (the waiter, the stdin writer, other calls): an async-process read is
/// ready at once while a flood lasts, and smol has no task budget.
const READS_BEFORE_YIELD: usize = 16;

/// What the owner's wait returned.
enum Woken {
    /// The core's timer is due.
    Timer,
    /// From the caller, the host or the waiter.
    Event(Event<Reply>),
    /// A read of a stream: this many bytes, 0 at its end.
    Read(Pipe, usize),
}

/// Runs the call of `new` to its end.
pub(crate) async fn run(new: NewOwner<SmolRuntime>) {
    begin(new).await;
}

/// Begins the call of `new` now (its first inputs, the spawn) and returns
/// the rest of its owner's loop, to its end.
pub(crate) fn begin(new: NewOwner<SmolRuntime>) -> impl std::future::Future<Output = ()> + Send {
    let owner = Owner {
        parts: AsyncOwner::begin(new),
        timer: Timer::never(),
        armed: None,
    };
    owner.run()
}

impl Owner {
    async fn run(mut self) {
        let mut reads_in_a_row = 0;
        while !self.parts.carry_out_actions().await {
            let input = self.next_input().await;
            let now = Instant::now();
            match input {
                Woken::Timer => {
                    let _ = self.parts.core.call_mut().handle(now, Input::Timeout);
                }
                Woken::Event(event) => self.parts.take_event(now, event),
                Woken::Read(pipe, len) => {
                    self.parts.take_read(now, pipe, len);
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
        // The streams go to the drainer as duplicated descriptors (the
        // stream itself leaves the reactor when dropped here); one with no
        // descriptor left to duplicate is closed.
        self.parts
            .drain_unheard(|stream| spillguard_host::os::duplicate(&stream));
    }

    /// The next input. A due timer comes before events and reads, so a
    /// flood cannot postpone a deadline; the streams take turns, so neither
    /// starves the other.
    async fn next_input(&mut self) -> Woken {
        let at = self.parts.core.call().poll_timeout();
        if at.is_some_and(|at| at <= Instant::now()) {
            return Woken::Timer;
        }
        if at != self.armed {
            self.armed = at;
            match at {
                Some(at) => self.timer.set_at(at),
                None => self.timer = Timer::never(),
            }
        }
        let Sources {
            stderr_first,
            events,
            pipes,
            bufs,
        } = self.parts.sources();
        let timer = &mut self.timer;
        let fired = async move {
            timer.await;
            Woken::Timer
        };
        // The owner's own sender keeps the channel open: an error never
        // comes (and would leave this branch waiting, not spinning).
        let received = async move {
            match events.recv().await {
                Ok(event) => Woken::Event(event),
                Err(_) => future::pending().await,
            }
        };
        let read = async move {
            let (pipe, len) = read_either(pipes, bufs, stderr_first).await;
            Woken::Read(pipe, len)
        };
        let input = future::or(fired, future::or(received, read)).await;
        if matches!(input, Woken::Timer) {
            // A fired timer must be set again, even to the same instant.
            self.armed = None;
        }
        input
    }
}
