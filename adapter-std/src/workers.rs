//! Threads kept between calls, for the calls' owners and their helpers'
//! stdin writers and (without pidfds) waiters.
//!
//! Starting a thread costs tens of microseconds (its stack and signal stack
//! are mapped, guarded and later unmapped): a noticeable part of a short
//! helper's own spawn and wait. So these threads
//! come from one process-wide pool: a job goes to an idle worker if there
//! is one, else to a new thread, and a worker idle for [`IDLE_EXIT`] ends.
//! There is no cap: an owner must never wait for a free thread while its
//! helper's pipes fill, so the pool holds as many threads as jobs run at
//! once.
//!
//! An owner that panics on its worker does not take the worker down: the
//! panic is caught there and kept for the call's handle, which resumes it.
//! A helper the owner left unreaped is killed by group and reaped by a
//! job (the drop of [`Process`](crate::process::Process)), except where a
//! waiter job holds the child: that job reaps it and nothing is signalled,
//! since the helper may already be reaped and its pgid another group's.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SendError, Sender};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long a worker waits for another job before it ends.
pub(crate) const IDLE_EXIT: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send + 'static>;

/// An idle worker: where to send it a job.
struct Idle {
    id: u64,
    jobs: Sender<Job>,
}

static IDLE: Mutex<Vec<Idle>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The idle workers. A job that panicked ended its own thread only; the
/// list itself is always whole, so a poisoned lock is still used.
fn idle() -> MutexGuard<'static, Vec<Idle>> {
    IDLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `job` on an idle worker, or on a new thread if none is idle. Fails
/// only if a new thread was needed and could not be started; `job` is then
/// dropped without running.
pub(crate) fn run(job: impl FnOnce() + Send + 'static) -> io::Result<()> {
    let mut job: Job = Box::new(job);
    // The most recently idle worker first: its stack is warm.
    while let Some(worker) = idle().pop() {
        match worker.jobs.send(job) {
            Ok(()) => return Ok(()),
            // Only a worker that is gone refuses; try the next one.
            Err(SendError(refused)) => job = refused,
        }
    }
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let (jobs, next) = mpsc::channel();
    std::thread::Builder::new()
        .name("spillguard-worker".into())
        .spawn(move || work(id, &jobs, &next, job))?;
    Ok(())
}

/// A worker: runs `first`, then each job it is given, until it has been
/// idle for [`IDLE_EXIT`].
fn work(id: u64, jobs: &Sender<Job>, next: &Receiver<Job>, first: Job) {
    let mut job = first;
    loop {
        job();
        idle().push(Idle {
            id,
            jobs: jobs.clone(),
        });
        job = match next.recv_timeout(IDLE_EXIT) {
            Ok(job) => job,
            Err(RecvTimeoutError::Timeout) => {
                let mut idle = idle();
                if let Some(at) = idle.iter().position(|worker| worker.id == id) {
                    idle.swap_remove(at);
                    return;
                }
                drop(idle);
                // Taken off the idle list as it gave up: a job is on its way.
                match next.recv() {
                    Ok(job) => job,
                    Err(_) => return,
                }
            }
            // `jobs` keeps the channel open; nothing else ends it.
            Err(RecvTimeoutError::Disconnected) => return,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::HashSet;
    use std::sync::mpsc::sync_channel;
    use std::thread::ThreadId;

    /// Runs `count` jobs one after another, each reporting its thread.
    fn threads_of(count: usize) -> HashSet<ThreadId> {
        let mut seen = HashSet::new();
        for _ in 0..count {
            let (done, ran) = sync_channel(1);
            run(move || {
                let _ = done.send(std::thread::current().id());
            })
            .unwrap();
            seen.insert(ran.recv_timeout(Duration::from_secs(10)).unwrap());
            // Let the worker put itself back on the idle list.
            std::thread::sleep(Duration::from_millis(2));
        }
        seen
    }

    #[test]
    fn jobs_run_one_after_another_reuse_threads() {
        // Other tests may hold workers at the same time, so only an upper
        // bound is certain: far fewer threads than jobs.
        let seen = threads_of(50);
        assert!(seen.len() < 10, "{} threads for 50 jobs", seen.len());
    }

    #[test]
    fn jobs_that_run_at_once_each_get_a_thread() {
        let (started, all_started) = sync_channel(8);
        let (release_tx, release) = mpsc::channel::<()>();
        let release = std::sync::Arc::new(Mutex::new(release));
        for _ in 0..8 {
            let started = started.clone();
            let release = release.clone();
            run(move || {
                let _ = started.send(std::thread::current().id());
                // Every job blocks until all eight have started.
                let _ = release
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .recv_timeout(Duration::from_secs(10));
            })
            .unwrap();
        }
        let mut threads = HashSet::new();
        for _ in 0..8 {
            threads.insert(all_started.recv_timeout(Duration::from_secs(10)).unwrap());
        }
        assert_eq!(threads.len(), 8);
        drop(release_tx);
    }

    #[test]
    fn a_panicking_job_leaves_the_pool_usable() {
        run(|| panic!("a job's bug")).unwrap();
        // Every later job runs, although a worker died mid-job.
        let (done, ran) = sync_channel(8);
        for job in 0..8 {
            let done = done.clone();
            run(move || {
                let _ = done.send(job);
            })
            .unwrap();
        }
        let mut finished: Vec<i32> = (0..8)
            .map(|_| ran.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        finished.sort_unstable();
        assert_eq!(finished, (0..8).collect::<Vec<_>>());
    }
}
