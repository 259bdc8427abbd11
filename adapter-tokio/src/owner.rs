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
//! 3. read the clock, make exactly one `Call::handle` call, and go to 1.
//!
//! Reading in the owner's own `select!` costs no task hop per chunk. The
//! loop ends at [`Action::Finished`]; the owner then lets go of the call
//! and hands any stream the call stopped listening to (an escaped
//! descendant holds it) to the host's drainer ([`spillguard_host::leftover_pipes`]). Every decision (budgets, states, deadlines, signals) is the
//! core's; the owner only reports and obeys.

use std::pin::Pin;
use std::time::Instant;

use spillguard_host::asynchronous::{AsyncOwner, NewOwner, Sources};
use spillguard_host::run_loop::{Event, Pipe};
use tokio::time::Sleep;

use crate::process::{Stream, TokioSpawn};
use crate::reader::poll_chunk;
use crate::runtime::{Reply, TokioRuntime, clock};
use spillguard_core::Input;
use spillguard_host::pipes::read_open_with;

/// The owner of one call. See the [module docs](self).
pub(crate) struct Owner {
    /// The call, the channel, the helper and the read buffers.
    parts: AsyncOwner<TokioRuntime, TokioSpawn>,
}

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
pub(crate) async fn run(new: NewOwner<TokioRuntime>) {
    let parts = AsyncOwner::begin(new);
    Owner { parts }.run().await;
}

impl Owner {
    async fn run(mut self) {
        let timer = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(timer);
        let mut armed = None;
        while !self.parts.carry_out_actions().await {
            let input = self.next_input(timer.as_mut(), &mut armed).await;
            let now = clock();
            match input {
                Woken::Timer => {
                    let _ = self.parts.core.call_mut().handle(now, Input::Timeout);
                }
                Woken::Event(event) => self.parts.take_event(now, event),
                Woken::Read(pipe, len) => self.parts.take_read(now, pipe, len),
            }
        }
        // A stream that cannot leave the reactor is closed instead.
        self.parts.drain_unheard(Stream::into_owned_fd);
    }

    /// The next input. The one `timer` is reset only when the core's
    /// deadline changed (`armed` is the deadline it is set to). A due timer
    /// comes before events and reads, so a flood cannot postpone a
    /// deadline; the streams take turns, so neither starves the other.
    async fn next_input(
        &mut self,
        mut timer: Pin<&mut Sleep>,
        armed: &mut Option<Instant>,
    ) -> Woken {
        let due = self.parts.core.call().poll_timeout();
        if due != *armed {
            if let Some(at) = due {
                timer.as_mut().reset(at.into());
            }
            *armed = due;
        }
        if due.is_some_and(|at| at <= clock()) {
            return Woken::Timer;
        }
        let Sources {
            stderr_first,
            events,
            pipes: [stdout, stderr],
            bufs: [stdout_buf, stderr_buf],
        } = self.parts.sources();
        let out = (stdout, stdout_buf, Pipe::Stdout);
        let err = (stderr, stderr_buf, Pipe::Stderr);
        let (first, second) = if stderr_first { (err, out) } else { (out, err) };
        tokio::select! {
            biased;
            () = timer, if due.is_some() => Woken::Timer,
            // The owner's own sender keeps the channel open: `None` never
            // comes (and would only disable this branch).
            Some(event) = events.recv() => Woken::Event(event),
            len = read_open_with(first.0, first.1, poll_chunk) => Woken::Read(first.2, len),
            len = read_open_with(second.0, second.1, poll_chunk) => Woken::Read(second.2, len),
        }
    }
}
