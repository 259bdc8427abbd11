//! The after-life of a call: the pipes an escaped descendant still holds
//! once its call has finished, read and dropped by one drainer per host,
//! for a bounded time and up to a bounded count.
//!
//! A call that gave up on its streams (`stream_end: abandoned_open`: a
//! descendant left the group with `setsid` and kept stdout or stderr open)
//! hands what it still holds to its host's [`OrphanDrainer`]. Nobody
//! listens to those bytes any more, but they must still be read: a writer
//! on a full pipe blocks, and a pipe nobody reads is a leak. The drainer
//! is **one thread per host, whatever the runtime**, that `poll(2)`s every
//! leftover pipe in one call and reads and drops what they carry; it
//! starts with the first leftover pipe and ends when none is left, so a
//! host whose calls leave nothing behind runs no drainer at all.
//!
//! The bounds ([`OrphanSet`], sans IO: it is given the instants):
//!
//! * **time**: a pipe is closed once it has been drained for
//!   [`HostOptions::orphan_drain_max`](crate::HostOptions::orphan_drain_max)
//!   (default 60 s);
//! * **count**: at most
//!   [`HostOptions::orphan_pipes_max`](crate::HostOptions::orphan_pipes_max)
//!   pipes are drained at once (default 256); admitting one more closes the
//!   oldest.
//!
//! Closing a pipe means the escapee's next write to it fails: the kernel
//! sends it `SIGPIPE`, which ends a process that kept the default action
//! (a shell, `cat`, most programs), or, if it ignores or handles the
//! signal, the write fails with `EPIPE`. A process that never writes again
//! is not affected. Every pipe that reaches end-of-file is counted as
//! ended, every one closed by a bound as closed ([`OrphanStats`]).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;

use crate::read_buffers::CHUNK_BYTES;

/// What a host's drainer holds and has done, as [`OrphanDrainer::stats`]
/// reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrphanStats {
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
pub struct OrphanSet<P> {
    max_age: Option<Duration>,
    max_pipes: usize,
    /// Oldest first, each with the instant it is closed at (`None`: never).
    pipes: VecDeque<(Option<Instant>, P)>,
}

impl<P> OrphanSet<P> {
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
    pub fn remove_ended(&mut self, mut ended: impl FnMut(&P) -> bool) -> usize {
        let before = self.pipes.len();
        self.pipes.retain(|(_, pipe)| !ended(pipe));
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

#[derive(Debug, Default)]
struct Counters {
    draining: AtomicUsize,
    closed: AtomicU64,
    ended: AtomicU64,
}

/// How to reach the running drainer thread.
#[derive(Debug)]
struct Running {
    pipes: Sender<OwnedFd>,
    bell: OwnedFd,
}

/// A host's drainer of leftover pipes. See the [module docs](self).
#[derive(Debug)]
pub struct OrphanDrainer {
    max_age: Option<Duration>,
    max_pipes: usize,
    counters: Arc<Counters>,
    running: Arc<Mutex<Option<Running>>>,
}

impl OrphanDrainer {
    /// A drainer that keeps each pipe at most `max_age` and at most
    /// `max_pipes` pipes at once ([`OrphanSet::new`]); no thread runs
    /// until the first pipe comes.
    pub fn new(max_age: Option<Duration>, max_pipes: usize) -> Self {
        Self {
            max_age,
            max_pipes,
            counters: Arc::default(),
            running: Arc::default(),
        }
    }

    /// What the drainer holds and has done.
    pub fn stats(&self) -> OrphanStats {
        OrphanStats {
            draining: self.counters.draining.load(Ordering::SeqCst),
            closed: self.counters.closed.load(Ordering::SeqCst),
            ended: self.counters.ended.load(Ordering::SeqCst),
        }
    }

    /// Hands over `pipe`, the read end of a finished call's leftover
    /// stream, to be read and dropped until its end or a bound. If no
    /// drainer thread can run (the system refuses a thread or a pipe),
    /// the pipe is closed at once and counted as closed.
    pub fn adopt(&self, pipe: OwnedFd) {
        let _ = rustix::io::ioctl_fionbio(&pipe, true);
        self.counters.draining.fetch_add(1, Ordering::SeqCst);
        let mut running = lock(&self.running);
        let pipe = match running.as_ref() {
            Some(thread) => match thread.pipes.send(pipe) {
                Ok(()) => {
                    ring(&thread.bell);
                    return;
                }
                Err(refused) => refused.0,
            },
            None => pipe,
        };
        match self.start(pipe) {
            Ok(thread) => *running = Some(thread),
            Err(_) => self.counters.closed_one(),
        }
    }

    /// Starts the drainer thread with `first` as its first pipe.
    fn start(&self, first: OwnedFd) -> io::Result<Running> {
        let (bell_in, bell) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        rustix::io::ioctl_fionbio(&bell_in, true)?;
        rustix::io::ioctl_fionbio(&bell, true)?;
        let (pipes, incoming) = mpsc::channel();
        let _ = pipes.send(first);
        let thread = Thread {
            set: OrphanSet::new(self.max_age, self.max_pipes),
            incoming,
            bell: bell_in,
            counters: self.counters.clone(),
            running: self.running.clone(),
        };
        std::thread::Builder::new()
            .name("spillguard-orphans".into())
            .spawn(move || thread.run())?;
        Ok(Running { pipes, bell })
    }
}

impl Counters {
    fn closed_one(&self) {
        self.closed.fetch_add(1, Ordering::SeqCst);
        self.draining.fetch_sub(1, Ordering::SeqCst);
    }

    fn ended_one(&self) {
        self.ended.fetch_add(1, Ordering::SeqCst);
        self.draining.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Wakes the drainer's `poll`; a full doorbell already wakes it.
fn ring(bell: &OwnedFd) {
    let _ = rustix::io::write(bell, &[1]);
}

/// The longest single wait in `poll`.
const LONGEST_WAIT: Duration = Duration::from_secs(3600);

/// The drainer thread's own state.
struct Thread {
    set: OrphanSet<OwnedFd>,
    incoming: Receiver<OwnedFd>,
    bell: OwnedFd,
    counters: Arc<Counters>,
    running: Arc<Mutex<Option<Running>>>,
}

impl Thread {
    fn run(mut self) {
        let mut buf = vec![0_u8; CHUNK_BYTES];
        loop {
            let now = Instant::now();
            self.take_incoming(now);
            for _ in self.set.expire(now) {
                self.counters.closed_one();
            }
            if self.set.is_empty() && self.stop() {
                return;
            }
            let ready = self.look();
            let ended = self.read_ready(&ready, &mut buf);
            for _ in 0..ended {
                self.counters.ended_one();
            }
        }
    }

    /// Admits what the owners handed over; the pipes over the count are
    /// closed at once.
    fn take_incoming(&mut self, now: Instant) {
        let mut quiet = [0_u8; 64];
        while rustix::io::read(&self.bell, &mut quiet).is_ok_and(|len| len > 0) {}
        while let Ok(pipe) = self.incoming.try_recv() {
            for _ in self.set.admit(now, pipe) {
                self.counters.closed_one();
            }
        }
    }

    /// Ends the thread if nothing came in meanwhile (checked under the
    /// lock [`OrphanDrainer::adopt`] sends under); `false` to go on.
    fn stop(&mut self) -> bool {
        let mut running = lock(&self.running);
        match self.incoming.try_recv() {
            Ok(pipe) => {
                drop(running);
                for _ in self.set.admit(Instant::now(), pipe) {
                    self.counters.closed_one();
                }
                false
            }
            Err(_) => {
                *running = None;
                true
            }
        }
    }

    /// `poll`s the doorbell and every pipe until one is ready or the next
    /// pipe's time is up; which pipes (by index) are ready.
    fn look(&self) -> Vec<bool> {
        let left = self.set.poll_timeout().map_or(LONGEST_WAIT, |at| {
            at.saturating_duration_since(Instant::now())
        });
        let timeout = Timespec::try_from(left.min(LONGEST_WAIT)).ok();
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(self.set.len() + 1);
        fds.push(PollFd::new(&self.bell, PollFlags::IN));
        fds.extend(
            self.set
                .pipes()
                .map(|pipe| PollFd::new(pipe, PollFlags::IN)),
        );
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) => fds
                .iter()
                .skip(1)
                .map(|fd| !fd.revents().is_empty())
                .collect(),
            Err(Errno::INTR) => vec![false; self.set.len()],
            Err(_) => {
                drop(fds);
                std::thread::sleep(Duration::from_millis(10));
                vec![false; self.set.len()]
            }
        }
    }

    /// One read of each ready pipe; takes out those at their end (or
    /// failing); returns how many.
    fn read_ready(&mut self, ready: &[bool], buf: &mut [u8]) -> usize {
        let mut at = 0;
        self.set.remove_ended(|pipe| {
            let is_ready = ready.get(at).copied().unwrap_or(false);
            at += 1;
            is_ready && at_end(pipe.as_fd(), buf)
        })
    }
}

/// Reads and drops what `pipe` holds now; whether it reached its end.
fn at_end(pipe: std::os::fd::BorrowedFd<'_>, buf: &mut [u8]) -> bool {
    loop {
        match rustix::io::read(pipe, &mut *buf) {
            Ok(0) => return true,
            Ok(_) => return false,
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => return false,
            Err(_) => return true,
        }
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
        let mut set = OrphanSet::new(Some(60 * S), 8);
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
        let mut set = OrphanSet::new(None, 2);
        assert!(set.admit(t0, 1).is_empty());
        assert!(set.admit(t0, 2).is_empty());
        assert_eq!(set.admit(t0, 3), [1]);
        assert_eq!(set.pipes().copied().collect::<Vec<_>>(), [2, 3]);
        assert_eq!(set.poll_timeout(), None);
        assert!(set.expire(t0 + 3600 * S).is_empty());
        assert_eq!(OrphanSet::new(None, 0).admit(t0, 9), [9]);
    }

    #[test]
    fn ended_pipes_leave_the_set() {
        let t0 = Instant::now();
        let mut set = OrphanSet::new(Some(S), 8);
        for pipe in 0..5 {
            let _ = set.admit(t0, pipe);
        }
        assert_eq!(set.remove_ended(|&p| p % 2 == 0), 3);
        assert_eq!(set.pipes().copied().collect::<Vec<_>>(), [1, 3]);
    }

    fn wait_for(drainer: &OrphanDrainer, want: OrphanStats) {
        let until = Instant::now() + 10 * S;
        while drainer.stats() != want {
            assert!(Instant::now() < until, "{:?} != {want:?}", drainer.stats());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_drainer_reads_until_the_end_then_its_thread_ends() {
        let drainer = OrphanDrainer::new(Some(60 * S), 8);
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
            OrphanStats {
                draining: 0,
                closed: 0,
                ended: 1,
            },
        );
        let until = Instant::now() + 10 * S;
        while lock(&drainer.running).is_some() {
            assert!(Instant::now() < until, "the drainer thread did not end");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_drainer_closes_at_its_bounds_and_the_writer_gets_epipe() {
        let drainer = OrphanDrainer::new(Some(Duration::from_millis(200)), 2);
        let pipes: Vec<_> = (0..3).map(|_| rustix::pipe::pipe().unwrap()).collect();
        let mut writers = Vec::new();
        for (read, write) in pipes {
            drainer.adopt(read);
            writers.push(write);
        }
        // The third closed the first at once; time closes the other two.
        wait_for(
            &drainer,
            OrphanStats {
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
