//! [`AsyncOwner`]: what the owner of one call holds on an async runtime,
//! and all it does between two waits. The runtime's owner keeps only its
//! wait (a `future::or` chain, a biased `select!`) and its timer.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Instant;

use super::{AsyncRuntime, AsyncShared, NewOwner};
use crate::owner::{HelperSlot, OwnerCore};
use crate::pipes::{AsyncProcess, AsyncSpawn};
use crate::read_buffers::CHUNK_BYTES;
use crate::run_loop::{Event, Pipe};

/// The owner of one call on the runtime `R`, whose helper `T` spawns:
/// the host layer's [`OwnerCore`], the owner's channel, the helper and one read
/// buffer per output stream.
pub struct AsyncOwner<R: AsyncRuntime, T: AsyncSpawn<Events = R::Sender>> {
    /// The call and everything between two waits.
    pub core: OwnerCore<AsyncShared<R>, R::Wake>,
    /// Commands from the handle and the host, and the waiter's exit.
    pub events: R::Receiver,
    /// The helper; its tasks report through the owner's channel.
    pub io: HelperSlot<AsyncProcess<T>, R>,
    /// One read buffer per stream (stdout, stderr), made at the spawn.
    pub bufs: [Vec<u8>; 2],
    /// Which stream the next wait looks at first.
    stderr_first: bool,
    /// The output streams before the spawn: none.
    unspawned: [Option<T::Stream>; 2],
}

impl<R: AsyncRuntime, T: AsyncSpawn<Events = R::Sender>> std::fmt::Debug for AsyncOwner<R, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncOwner")
            .field("core", &self.core)
            .finish_non_exhaustive()
    }
}

impl<R: AsyncRuntime, T: AsyncSpawn<Events = R::Sender>> AsyncOwner<R, T> {
    /// The owner of a prepared call, its first inputs handled
    /// ([`OwnerCore::begin`]): call it in the owner's task.
    pub fn begin(new: NewOwner<R>) -> Self {
        let NewOwner {
            mut core,
            start,
            events,
            sender,
        } = new;
        core.begin(start);
        Self {
            core,
            events,
            io: HelperSlot::new(sender),
            bufs: [Vec::new(), Vec::new()],
            stderr_first: false,
            unspawned: [None, None],
        }
    }

    /// What the wait about to start looks at: which stream first (they
    /// take turns), the channel, the output streams (none before the
    /// spawn) and their buffers.
    pub fn sources(&mut self) -> Sources<'_, R, T> {
        self.stderr_first = !self.stderr_first;
        let pipes = match self.io.process_mut() {
            Some(process) => &mut process.0.pipes,
            None => &mut self.unspawned,
        };
        Sources {
            stderr_first: self.stderr_first,
            events: &mut self.events,
            pipes,
            bufs: &mut self.bufs,
        }
    }

    /// Exactly one `Call::handle` call for a read of `pipe`: its bytes, or its
    /// end (0). Nothing once the streams were abandoned.
    pub fn take_read(&mut self, now: Instant, pipe: Pipe, len: usize) {
        let pipes = self.io.process_mut().map(|process| &mut process.0.pipes);
        self.core.take_read(now, pipes, &self.bufs, (pipe, len));
    }

    /// Exactly one `Call::handle` call for `event`.
    pub fn take_event(&mut self, now: Instant, event: Event<R::Reply>) {
        self.core.handle_event(now, event, R::answer);
    }

    /// After the call finished: hands the streams it stopped listening to
    /// (an escaped descendant still holds them) to the host's drainer
    /// ([`crate::leftover_pipes`]); `into_fd` gives a stream's descriptor (a
    /// stream it gives none for is closed).
    pub fn drain_unheard(&mut self, into_fd: impl FnMut(T::Stream) -> io::Result<OwnedFd>) {
        if let Some(process) = self.io.process_mut() {
            let leftovers = process.0.take_leftovers(into_fd);
            self.core.hand_over_leftovers(leftovers);
        }
    }

    /// Carries out every queued action ([`OwnerCore::carry_out_actions`]);
    /// `true` once the call finished. Then nobody reads the channel any
    /// more: it is closed (later sends fail at once) and emptied (a reply
    /// still queued is dropped, so no approve or deny waits for the
    /// drain). The read buffers are made once the helper runs.
    pub async fn carry_out_actions(&mut self) -> bool {
        let finished = self.core.carry_out_actions(&mut self.io).await;
        if finished {
            R::close(&mut self.events);
        } else if self.io.process().is_some() && self.bufs[0].is_empty() {
            self.bufs = [vec![0; CHUNK_BYTES], vec![0; CHUNK_BYTES]];
        }
        finished
    }
}

/// What one wait of an [`AsyncOwner`] looks at.
#[allow(missing_debug_implementations)]
pub struct Sources<'a, R: AsyncRuntime, T: AsyncSpawn> {
    /// Stderr is looked at before stdout.
    pub stderr_first: bool,
    /// The owner's channel.
    pub events: &'a mut R::Receiver,
    /// Stdout and stderr while open.
    pub pipes: &'a mut [Option<T::Stream>; 2],
    /// Their read buffers.
    pub bufs: &'a mut [Vec<u8>; 2],
}

impl<R: AsyncRuntime, T: AsyncSpawn<Events = R::Sender>> Drop for AsyncOwner<R, T> {
    /// Also when the owner panicked or its runtime dropped it: the channel
    /// is closed and emptied, so an approval still waiting for its answer
    /// gets an error at once. (The helper's group and the call's waiters
    /// are seen to by [`OwnerCore`]'s own drop.)
    fn drop(&mut self) {
        R::close(&mut self.events);
    }
}
