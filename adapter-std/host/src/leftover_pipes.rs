//! The after-life of a call: the pipes an escaped descendant still holds
//! once its call has finished, read and dropped by one drainer per host,
//! for a bounded time and up to a bounded count.
//!
//! A call that gave up on its streams (`stream_end: abandoned_open`: a
//! descendant left the group with `setsid` and kept stdout or stderr open)
//! hands what it still holds to its host's [`LeftoverDrainer`]. Nobody
//! listens to those bytes any more, but they must still be read: a writer
//! on a full pipe blocks, and a pipe nobody reads is a leak. The drainer
//! is **one per host: one thread on std, one task on smol and tokio**,
//! that waits on every leftover pipe it holds at once and reads and drops
//! what they carry; it starts with the first leftover pipe and ends when
//! none is left, so a host whose calls leave nothing behind runs no
//! drainer at all.
//!
//! What the drainer decides is written once, here: the bounds
//! ([`LeftoverSet`]), what is admitted, closed and counted, and when the
//! drainer ends. A runtime only says where it runs and how it waits
//! ([`LeftoverRuntime`]):
//!
//! * [`ThreadLeftovers`] (the std adapter): a thread of its own that
//!   `poll(2)`s a doorbell and every pipe in one call;
//! * an [`AsyncLeftovers`] runtime (smol, tokio): a task spawned on the
//!   host's executor or runtime ([`Drain::run`]), each pipe registered with
//!   the runtime's reactor, read without blocking when it is ready, with
//!   the runtime's timer for the time bound; it never blocks an executor
//!   thread, and a runtime shut down under it closes the pipes it held
//!   (counted as closed). A drainer task makes at most 16 reads of a pipe
//!   per turn and 8 rounds per poll before it yields, so it holds no
//!   executor thread. smol hands over a duplicate of each descriptor;
//!   tokio hands over its own, once it has left the owner's reactor
//!   registration.
//!
//! A drainer ends only when it holds nothing and nothing came, checked
//! under the lock a hand-over takes, so no pipe is lost between the check
//! and the end.
//!
//! The bounds ([`LeftoverSet`], sans IO: it is given the instants):
//!
//! * **time**: a pipe is closed once it has been drained for
//!   [`HostOptions::leftover_drain_max`](crate::HostOptions::leftover_drain_max)
//!   (default 60 s);
//! * **count**: at most
//!   [`HostOptions::leftover_pipes_max`](crate::HostOptions::leftover_pipes_max)
//!   pipes are drained at once (default 256); admitting one more closes the
//!   oldest.
//!
//! Closing a pipe means the escapee's next write to it fails: the kernel
//! sends it `SIGPIPE`, which ends a process that kept the default action
//! (a shell, `cat`, most programs), or, if it ignores or handles the
//! signal, the write fails with `EPIPE`. A process that never writes again
//! is not affected. Every pipe that reaches end-of-file is counted as
//! ended, every one closed by a bound as closed ([`LeftoverStats`]).

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;

use crate::read_buffers::CHUNK_BYTES;

/// What a host's drainer holds and has done, as [`LeftoverDrainer::stats`]
/// reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeftoverStats {
    /// Leftover pipes being read and dropped now.
    pub draining: usize,
    /// Leftover pipes closed by a bound (time or count) so far.
    pub closed: u64,
    /// Leftover pipes that reached end-of-file (every writer closed it)
    /// so far.
    pub ended: u64,
}

/// The bounds on what a host drains after its calls: a pure policy, given
/// the instants, with the pipes it holds in order of admission.
#[derive(Debug)]
pub struct LeftoverSet<P> {
    max_age: Option<Duration>,
    max_pipes: usize,
    /// Oldest first, each with the instant it is closed at (`None`: never).
    pipes: VecDeque<(Option<Instant>, P)>,
}

impl<P> LeftoverSet<P> {
    /// A set that keeps each pipe at most `max_age` (`None`: until its
    /// end) and at most `max_pipes` pipes at once (0 closes every pipe at
    /// admission).
    pub fn new(max_age: Option<Duration>, max_pipes: usize) -> Self {
        Self {
            max_age,
            max_pipes,
            pipes: VecDeque::new(),
        }
    }

    /// Admits `pipe` at `now`; returns the pipes to close at once (the
    /// oldest, while more than `max_pipes` are held).
    pub fn admit(&mut self, now: Instant, pipe: P) -> Vec<P> {
        let until = self.max_age.and_then(|age| now.checked_add(age));
        self.pipes.push_back((until, pipe));
        let mut over = Vec::new();
        while self.pipes.len() > self.max_pipes {
            if let Some((_, oldest)) = self.pipes.pop_front() {
                over.push(oldest);
            }
        }
        over
    }

    /// The pipes whose time is up at `now`, taken out of the set.
    pub fn expire(&mut self, now: Instant) -> Vec<P> {
        let mut expired = Vec::new();
        // Admitted in order with the same age: the due ones are in front.
        while self
            .pipes
            .front()
            .is_some_and(|(until, _)| until.is_some_and(|at| at <= now))
        {
            if let Some((_, pipe)) = self.pipes.pop_front() {
                expired.push(pipe);
            }
        }
        expired
    }

    /// The next instant a pipe's time is up, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.pipes.iter().filter_map(|(until, _)| *until).min()
    }

    /// Takes out the pipes for which `ended` holds (they reached their
    /// end), and returns how many.
    pub fn remove_ended(&mut self, mut ended: impl FnMut(&mut P) -> bool) -> usize {
        let before = self.pipes.len();
        self.pipes.retain_mut(|(_, pipe)| !ended(pipe));
        before - self.pipes.len()
    }

    /// The pipes held, oldest first.
    pub fn pipes(&self) -> impl Iterator<Item = &P> {
        self.pipes.iter().map(|(_, pipe)| pipe)
    }

    /// How many pipes are held.
    pub fn len(&self) -> usize {
        self.pipes.len()
    }

    /// Whether no pipe is held.
    pub fn is_empty(&self) -> bool {
        self.pipes.is_empty()
    }
}

/// Where a host's drainer runs: the runtime's part of the after-life.
///
/// [`LeftoverDrainer::adopt`] calls [`start`](Self::start) with the first
/// leftover pipe, when no drainer runs; the drainer then takes every pipe
/// handed over until it holds none and ends.
pub trait LeftoverRuntime: Send + Sync + fmt::Debug + 'static {
    /// Runs `drain` to its end: [`Drain::run_on_this_thread`] on a thread
    /// of its own, or [`Drain::run`] as a task. If it cannot run (no
    /// thread, a runtime shut down), dropping `drain` closes the pipes it
    /// was to drain and counts them as closed.
    fn start(&self, drain: Drain);
}

/// How a drainer task waits on an async runtime: its clock, its reactor
/// and its timer. [`Drain::run`] does the rest.
pub trait AsyncLeftovers: 'static {
    /// A leftover pipe registered with the runtime's reactor.
    type Pipe: Send + Unpin + 'static;
    /// The runtime's timer (its output is ignored).
    type Timer: Future + Send + Unpin + 'static;

    /// The runtime's clock (the one its timer follows).
    fn now() -> Instant;

    /// Registers `pipe` (already non-blocking) with the reactor; an error
    /// closes it (counted as closed).
    fn register(pipe: OwnedFd) -> io::Result<Self::Pipe>;

    /// One read into `buf` without blocking: the length read (0 at
    /// end-of-file), or `Pending` with `cx`'s waker registered for the
    /// pipe's next readiness. ([`read_now`] is a read that never blocks.)
    fn poll_read(
        pipe: &mut Self::Pipe,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>>;

    /// A timer that fires at `at` (on [`now`](Self::now)'s clock).
    fn timer(at: Instant) -> Self::Timer;
}

/// One read of `pipe` into `buf` that never blocks: the length read (0 at
/// end-of-file), `EINTR` retried, and [`io::ErrorKind::WouldBlock`] when
/// nothing is there yet.
pub fn read_now(pipe: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match rustix::io::read(pipe, &mut *buf) {
            Err(Errno::INTR) => {}
            done => return done.map_err(io::Error::from),
        }
    }
}

/// The std drainer: a thread of its own (`spillguard-leftovers`), which
/// `poll(2)`s its doorbell and every pipe in one call.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadLeftovers;

impl LeftoverRuntime for ThreadLeftovers {
    fn start(&self, drain: Drain) {
        // Refused, the closure is dropped, and `drain` with it.
        let _ = std::thread::Builder::new()
            .name("spillguard-leftovers".into())
            .spawn(move || drain.run_on_this_thread());
    }
}

#[derive(Debug, Default)]
struct Counters {
    draining: AtomicUsize,
    closed: AtomicU64,
    ended: AtomicU64,
}

impl Counters {
    fn closed(&self, pipes: usize) {
        if pipes > 0 {
            self.closed.fetch_add(pipes as u64, Ordering::SeqCst);
            self.draining.fetch_sub(pipes, Ordering::SeqCst);
        }
    }

    fn ended(&self, pipes: usize) {
        if pipes > 0 {
            self.ended.fetch_add(pipes as u64, Ordering::SeqCst);
            self.draining.fetch_sub(pipes, Ordering::SeqCst);
        }
    }
}

/// What the owners hand over and the drainer takes, under one lock.
#[derive(Debug, Default)]
struct Inbox {
    /// Whether a drainer runs (or is being started).
    running: bool,
    /// Handed over, not yet taken by the drainer.
    pipes: Vec<OwnedFd>,
    /// Wakes the running drainer when a pipe comes.
    waker: Option<Waker>,
}

/// What a host's drainer handle and its running drainer share.
#[derive(Debug)]
struct Shared {
    max_age: Option<Duration>,
    max_pipes: usize,
    counters: Counters,
    inbox: Mutex<Inbox>,
}

impl Shared {
    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A host's drainer of leftover pipes. See the [module docs](self).
#[derive(Debug)]
pub struct LeftoverDrainer {
    shared: Arc<Shared>,
    runtime: Box<dyn LeftoverRuntime>,
}

impl LeftoverDrainer {
    /// A drainer that keeps each pipe at most `max_age` and at most
    /// `max_pipes` pipes at once ([`LeftoverSet::new`]), run by `runtime`;
    /// nothing runs until the first pipe comes.
    pub fn new(max_age: Option<Duration>, max_pipes: usize, runtime: impl LeftoverRuntime) -> Self {
        Self {
            shared: Arc::new(Shared {
                max_age,
                max_pipes,
                counters: Counters::default(),
                inbox: Mutex::default(),
            }),
            runtime: Box::new(runtime),
        }
    }

    /// What the drainer holds and has done.
    pub fn stats(&self) -> LeftoverStats {
        let counters = &self.shared.counters;
        LeftoverStats {
            draining: counters.draining.load(Ordering::SeqCst),
            closed: counters.closed.load(Ordering::SeqCst),
            ended: counters.ended.load(Ordering::SeqCst),
        }
    }

    /// Whether a drainer runs now (a thread or a task): from the first
    /// pipe handed over until none is left.
    pub fn is_running(&self) -> bool {
        self.shared.inbox().running
    }

    /// Hands over `pipe`, the read end of a finished call's leftover
    /// stream, to be read and dropped until its end or a bound; starts the
    /// drainer if none runs. If it cannot run, the pipe is closed at once
    /// and counted as closed.
    pub fn adopt(&self, pipe: OwnedFd) {
        let _ = rustix::io::ioctl_fionbio(&pipe, true);
        self.shared.counters.draining.fetch_add(1, Ordering::SeqCst);
        let mut inbox = self.shared.inbox();
        inbox.pipes.push(pipe);
        if inbox.running {
            if let Some(waker) = &inbox.waker {
                waker.wake_by_ref();
            }
            return;
        }
        inbox.running = true;
        drop(inbox);
        self.runtime.start(Drain {
            shared: self.shared.clone(),
            stopped: false,
        });
    }
}

/// A host's running drainer, handed to [`LeftoverRuntime::start`]: run it
/// with [`run_on_this_thread`](Self::run_on_this_thread) or
/// [`run`](Self::run). Dropped before its end (a runtime that never ran
/// it or dropped its task), it closes what it held and counts it as
/// closed, and the next pipe handed over starts a new one.
#[derive(Debug)]
pub struct Drain {
    shared: Arc<Shared>,
    /// Ended by [`Held::stop_if_idle`]: another drainer may run now.
    stopped: bool,
}

impl Drop for Drain {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        let mut inbox = self.shared.inbox();
        inbox.running = false;
        inbox.waker = None;
        let left = std::mem::take(&mut inbox.pipes);
        drop(inbox);
        self.shared.counters.closed(left.len());
    }
}

/// How many reads of one pipe a drainer task makes per turn before it
/// lets the runtime run something else (a pipe that is always ready never
/// holds the others, nor the executor).
const READS_PER_TURN: usize = 16;

/// How many times a drainer task goes round (pipes handed over, a timer
/// that fired) in one poll before it yields.
const ROUNDS_PER_POLL: usize = 8;

impl Drain {
    /// The drainer as a task of an async runtime: every pipe registered
    /// with its reactor and read when it is ready, the time bound on its
    /// timer; never a blocking call. Ends when it holds no pipe.
    pub fn run<R: AsyncLeftovers>(self) -> impl Future<Output = ()> + Send + 'static {
        let mut held = Held::<R::Pipe>::new(self);
        let mut timer: Option<(Instant, R::Timer)> = None;
        let mut buf = vec![0_u8; CHUNK_BYTES];
        std::future::poll_fn(move |cx| held.poll_turn::<R>(cx, &mut timer, &mut buf))
    }

    /// The drainer on the calling thread: `poll(2)` on a doorbell (rung
    /// when a pipe is handed over) and every pipe, until it holds none.
    pub fn run_on_this_thread(self) {
        let Ok(bell) = Bell::new() else {
            // No pipe for a doorbell: dropping `self` closes and counts.
            return;
        };
        let bell = Arc::new(bell);
        let waker = Waker::from(bell.clone());
        let mut held = Held::<OwnedFd>::new(self);
        let mut buf = vec![0_u8; CHUNK_BYTES];
        loop {
            bell.quiet();
            held.admit(Instant::now(), &waker, Ok);
            if held.stop_if_idle() {
                return;
            }
            let ready = bell.look(&held.set);
            let mut at = 0;
            held.remove_ended(|pipe| {
                let is_ready = ready.get(at).copied().unwrap_or(false);
                at += 1;
                is_ready && at_end(pipe.as_fd(), &mut buf)
            });
        }
    }
}

/// A running drainer and the pipes it holds.
struct Held<P> {
    drain: Drain,
    set: LeftoverSet<P>,
}

impl<P> Drop for Held<P> {
    /// Pipes held when the drainer goes (a task dropped) are closed.
    fn drop(&mut self) {
        self.drain.shared.counters.closed(self.set.len());
    }
}

impl<P> Held<P> {
    fn new(drain: Drain) -> Self {
        let set = LeftoverSet::new(drain.shared.max_age, drain.shared.max_pipes);
        Self { drain, set }
    }

    /// Takes what was handed over (`register`ed; a pipe it refuses is
    /// closed), then closes what a bound closes at `now`; `waker` is woken
    /// when the next pipe comes.
    fn admit(
        &mut self,
        now: Instant,
        waker: &Waker,
        mut register: impl FnMut(OwnedFd) -> io::Result<P>,
    ) {
        let incoming = {
            let mut inbox = self.drain.shared.inbox();
            if !inbox.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                inbox.waker = Some(waker.clone());
            }
            std::mem::take(&mut inbox.pipes)
        };
        let mut closed = 0;
        for pipe in incoming {
            match register(pipe) {
                Ok(pipe) => closed += self.set.admit(now, pipe).len(),
                Err(_) => closed += 1,
            }
        }
        closed += self.set.expire(now).len();
        self.drain.shared.counters.closed(closed);
    }

    /// Ends the drainer if it holds nothing and nothing came meanwhile
    /// (checked under the lock [`LeftoverDrainer::adopt`] hands over under).
    fn stop_if_idle(&mut self) -> bool {
        if !self.set.is_empty() {
            return false;
        }
        let mut inbox = self.drain.shared.inbox();
        if !inbox.pipes.is_empty() {
            return false;
        }
        inbox.running = false;
        inbox.waker = None;
        self.drain.stopped = true;
        true
    }

    /// Takes out the pipes `at_end` says reached their end (or failed),
    /// counted as ended.
    fn remove_ended(&mut self, at_end: impl FnMut(&mut P) -> bool) {
        let ended = self.set.remove_ended(at_end);
        self.drain.shared.counters.ended(ended);
    }

    /// One poll of a drainer task: what came in, the bounds, a few reads
    /// of every ready pipe, the timer of the next time bound.
    fn poll_turn<R: AsyncLeftovers<Pipe = P>>(
        &mut self,
        cx: &mut Context<'_>,
        timer: &mut Option<(Instant, R::Timer)>,
        buf: &mut [u8],
    ) -> Poll<()> {
        for _ in 0..ROUNDS_PER_POLL {
            self.admit(R::now(), cx.waker(), R::register);
            if self.stop_if_idle() {
                return Poll::Ready(());
            }
            let mut busy = false;
            self.remove_ended(|pipe| {
                for _ in 0..READS_PER_TURN {
                    match R::poll_read(pipe, cx, buf) {
                        Poll::Ready(Ok(0)) => return true,
                        Poll::Ready(Err(error)) => {
                            if error.kind() != io::ErrorKind::Interrupted {
                                return true;
                            }
                        }
                        Poll::Ready(Ok(_)) => {}
                        Poll::Pending => return false,
                    }
                }
                busy = true;
                false
            });
            if self.set.is_empty() {
                continue;
            }
            match self.set.poll_timeout() {
                None => *timer = None,
                Some(at) => {
                    if timer.as_ref().is_none_or(|(armed, _)| *armed != at) {
                        *timer = Some((at, R::timer(at)));
                    }
                    if let Some((_, due)) = timer
                        && Pin::new(due).poll(cx).is_ready()
                    {
                        // Due: the next round closes what it bounds.
                        *timer = None;
                        continue;
                    }
                }
            }
            if busy {
                cx.waker().wake_by_ref();
            }
            return Poll::Pending;
        }
        // Still going round: let the runtime run something else first.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// The std drainer's doorbell: a non-blocking pipe that a handed-over
/// pipe rings (as a [`Waker`]), so `poll(2)` returns.
#[derive(Debug)]
struct Bell {
    read: OwnedFd,
    write: OwnedFd,
}

impl Wake for Bell {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // A full doorbell already wakes the drainer.
        let _ = rustix::io::write(&self.write, &[1]);
    }
}

/// The longest single wait in `poll`.
const LONGEST_WAIT: Duration = Duration::from_secs(3600);

impl Bell {
    fn new() -> io::Result<Self> {
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        rustix::io::ioctl_fionbio(&read, true)?;
        rustix::io::ioctl_fionbio(&write, true)?;
        Ok(Self { read, write })
    }

    /// Empties the doorbell (before the pipes handed over are taken).
    fn quiet(&self) {
        let mut rings = [0_u8; 64];
        while rustix::io::read(&self.read, &mut rings).is_ok_and(|len| len > 0) {}
    }

    /// `poll`s the doorbell and every pipe of `set` until one is ready or
    /// the next pipe's time is up; which pipes (by index) are ready.
    fn look(&self, set: &LeftoverSet<OwnedFd>) -> Vec<bool> {
        let left = set.poll_timeout().map_or(LONGEST_WAIT, |at| {
            at.saturating_duration_since(Instant::now())
        });
        let timeout = Timespec::try_from(left.min(LONGEST_WAIT)).ok();
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(set.len() + 1);
        fds.push(PollFd::new(&self.read, PollFlags::IN));
        fds.extend(set.pipes().map(|pipe| PollFd::new(pipe, PollFlags::IN)));
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) => fds
                .iter()
                .skip(1)
                .map(|fd| !fd.revents().is_empty())
                .collect(),
            Err(Errno::INTR) => vec![false; set.len()],
            Err(_) => {
                drop(fds);
                std::thread::sleep(Duration::from_millis(10));
                vec![false; set.len()]
            }
        }
    }
}

/// Reads and drops what `pipe` holds now; whether it reached its end.
fn at_end(pipe: BorrowedFd<'_>, buf: &mut [u8]) -> bool {
    match read_now(pipe, buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => error.kind() != io::ErrorKind::WouldBlock,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_pipe_is_closed_when_its_time_is_up() {
        let t0 = Instant::now();
        let mut set = LeftoverSet::new(Some(60 * S), 8);
        assert!(set.admit(t0, 'a').is_empty());
        assert!(set.admit(t0 + 10 * S, 'b').is_empty());
        assert_eq!(set.poll_timeout(), Some(t0 + 60 * S));
        assert!(set.expire(t0 + 59 * S).is_empty());
        assert_eq!(set.expire(t0 + 60 * S), ['a']);
        assert_eq!(set.poll_timeout(), Some(t0 + 70 * S));
        assert_eq!(set.expire(t0 + 70 * S), ['b']);
        assert!(set.is_empty());
        assert_eq!(set.poll_timeout(), None);
    }

    #[test]
    fn admitting_past_the_count_closes_the_oldest() {
        let t0 = Instant::now();
        let mut set = LeftoverSet::new(None, 2);
        assert!(set.admit(t0, 1).is_empty());
        assert!(set.admit(t0, 2).is_empty());
        assert_eq!(set.admit(t0, 3), [1]);
        assert_eq!(set.pipes().copied().collect::<Vec<_>>(), [2, 3]);
        assert_eq!(set.poll_timeout(), None);
        assert!(set.expire(t0 + 3600 * S).is_empty());
        assert_eq!(LeftoverSet::new(None, 0).admit(t0, 9), [9]);
    }

    #[test]
    fn ended_pipes_leave_the_set() {
        let t0 = Instant::now();
        let mut set = LeftoverSet::new(Some(S), 8);
        for pipe in 0..5 {
            let _ = set.admit(t0, pipe);
        }
        assert_eq!(set.remove_ended(|p| *p % 2 == 0), 3);
        assert_eq!(set.pipes().copied().collect::<Vec<_>>(), [1, 3]);
    }

    fn wait_for(drainer: &LeftoverDrainer, want: LeftoverStats) {
        let until = Instant::now() + 10 * S;
        while drainer.stats() != want {
            assert!(Instant::now() < until, "{:?} != {want:?}", drainer.stats());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_drainer_reads_until_the_end_then_its_thread_ends() {
        let drainer = LeftoverDrainer::new(Some(60 * S), 8, ThreadLeftovers);
        let (read, write) = rustix::pipe::pipe().unwrap();
        drainer.adopt(read);
        // More than a pipe holds: the writer goes on only if it is read.
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..64 {
            let mut left = &chunk[..];
            while !left.is_empty() {
                let written = rustix::io::write(&write, left).unwrap();
                left = &left[written..];
            }
        }
        assert_eq!(drainer.stats().draining, 1);
        drop(write);
        wait_for(
            &drainer,
            LeftoverStats {
                draining: 0,
                closed: 0,
                ended: 1,
            },
        );
        let until = Instant::now() + 10 * S;
        while drainer.is_running() {
            assert!(Instant::now() < until, "the drainer thread did not end");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A runtime that cannot run a drainer: it drops it.
    #[derive(Debug)]
    struct Refuses;

    impl LeftoverRuntime for Refuses {
        fn start(&self, drain: Drain) {
            drop(drain);
        }
    }

    #[test]
    fn a_drainer_that_cannot_run_closes_and_counts_every_pipe() {
        let drainer = LeftoverDrainer::new(None, 8, Refuses);
        let (read, write) = rustix::pipe::pipe().unwrap();
        drainer.adopt(read);
        let closed = LeftoverStats {
            draining: 0,
            closed: 1,
            ended: 0,
        };
        assert_eq!(drainer.stats(), closed);
        assert!(!drainer.is_running());
        assert_eq!(rustix::io::write(&write, b"x"), Err(Errno::PIPE));
        // Each pipe tries again.
        drainer.adopt(rustix::pipe::pipe().unwrap().0);
        assert_eq!(drainer.stats().closed, 2);
        assert!(!drainer.is_running());
    }

    #[test]
    fn the_drainer_closes_at_its_bounds_and_the_writer_gets_epipe() {
        let drainer = LeftoverDrainer::new(Some(Duration::from_millis(200)), 2, ThreadLeftovers);
        let pipes: Vec<_> = (0..3).map(|_| rustix::pipe::pipe().unwrap()).collect();
        let mut writers = Vec::new();
        for (read, write) in pipes {
            drainer.adopt(read);
            writers.push(write);
        }
        // The third closed the first at once; time closes the other two.
        wait_for(
            &drainer,
            LeftoverStats {
                draining: 0,
                closed: 3,
                ended: 0,
            },
        );
        for write in &writers {
            // Rust programs ignore SIGPIPE: the write fails with EPIPE.
            assert_eq!(rustix::io::write(write, b"x"), Err(Errno::PIPE));
        }
    }
}
