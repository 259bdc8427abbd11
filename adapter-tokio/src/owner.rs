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
//! and hands any stream the call stopped listening to (an escaped
//! descendant holds it) to the host's drainer ([`spillguard_kit::orphans`]). Every decision (budgets, states, deadlines, signals) is the
//! core's; the owner only reports and obeys.

use std::pin::Pin;
use std::time::Instant;

use spillguard_core::CallError;
use spillguard_kit::owner::{Blocking, HelperSlot, OwnerCore, Unblocked};
use spillguard_kit::run_loop;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Sleep;

use crate::handle::Changed;
use crate::host::HostShared;
use crate::process::{Process, Stream};
use crate::reader::{CHUNK_BYTES, read_open};

pub(crate) use spillguard_kit::run_loop::{Pipe, Start};

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

/// The owner of one call. See the [module docs](self).
pub(crate) struct Owner {
    core: OwnerCore<HostShared, Changed>,
    events: mpsc::UnboundedReceiver<Event>,
    /// The helper; its tasks report through the owner's channel.
    io: HelperSlot<Process, TokioPool>,
    /// One read buffer per stream (stdout, stderr), made at the spawn.
    bufs: [Vec<u8>; 2],
    /// Which stream the next wait looks at first.
    stderr_first: bool,
}

/// Where the owner runs blocking work: tokio's blocking pool.
pub(crate) struct TokioPool;

impl Blocking for TokioPool {
    /// On tokio's blocking pool (`spawn_blocking`), never on a worker
    /// thread. A job that panicked panics the owner too, as it does on
    /// every runtime (the owner's end is then the one policy of
    /// [`OwnerCore`]'s drop); `None` only if the runtime is shutting down.
    fn unblock<T: Send + 'static, F: FnOnce() -> T + Send + 'static>(job: F) -> Unblocked<T> {
        let task = tokio::task::spawn_blocking(job);
        Box::pin(async move {
            match task.await {
                Ok(done) => Some(done),
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                Err(_) => None,
            }
        })
    }
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
    /// The owner of the call in `core`, reached through `events`.
    pub(crate) fn new(
        core: OwnerCore<HostShared, Changed>,
        events: mpsc::UnboundedReceiver<Event>,
        sender: mpsc::UnboundedSender<Event>,
    ) -> Self {
        Self {
            core,
            events,
            io: HelperSlot::new(sender),
            bufs: [Vec::new(), Vec::new()],
            stderr_first: false,
        }
    }

    /// Runs the call to its end.
    pub(crate) async fn run(mut self, start: Start) {
        self.core.begin(start);
        let timer = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(timer);
        let mut armed = None;
        while !self.carry_out_actions().await {
            let input = self.next_input(timer.as_mut(), &mut armed).await;
            let now = clock();
            match input {
                Input::Timer => self.core.call_mut().handle_timeout(now),
                Input::Event(event) => self.core.handle_event(now, event, |reply, answer| {
                    let _ = reply.send(answer);
                }),
                Input::Read(pipe, len) => self.take_read(now, pipe, len),
            }
        }
        self.drain_unheard();
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
        let due = self.core.call().poll_timeout();
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
        let [stdout, stderr] = match self.io.process_mut() {
            Some(process) => &mut process.0.pipes,
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
        let pipes = self.io.process_mut().map(|process| &mut process.0.pipes);
        self.core.take_read(now, pipes, &self.bufs, (pipe, len));
    }

    /// After the call finished: hands the streams it stopped listening to
    /// (an escaped descendant still holds them) to the host's drainer
    /// ([`spillguard_kit::orphans`]), taken out of the reactor.
    fn drain_unheard(&mut self) {
        if let Some(process) = self.io.process_mut() {
            // A stream that cannot leave the reactor is closed instead.
            let leftovers = process.0.take_leftovers(Stream::into_owned_fd);
            self.core.hand_over_leftovers(leftovers);
        }
    }

    /// Carries out every queued action ([`OwnerCore::carry_out_actions`]);
    /// `true` once the call finished. Then nobody reads the channel any
    /// more: it is closed (later sends fail at once) and emptied (a reply
    /// still queued is dropped, so no approve or deny waits for the drain).
    async fn carry_out_actions(&mut self) -> bool {
        let finished = self.core.carry_out_actions(&mut self.io).await;
        if finished {
            self.events.close();
            while self.events.try_recv().is_ok() {}
        } else if self.io.process().is_some() && self.bufs[0].is_empty() {
            self.bufs = [vec![0; CHUNK_BYTES], vec![0; CHUNK_BYTES]];
        }
        finished
    }
}
