//! The after-life of a call: what an escaped descendant still holds once
//! the call has finished is drained by the host for a bounded time, then
//! closed and counted.
//!
//! [`the_drainer_is_one_per_host_and_never_blocks_the_runtime`] measures
//! the whole process (its threads), so it is not in the behaviour suite:
//! `tests/tests/leftover_drainer.rs` runs it alone in its process.
#![allow(clippy::unwrap_used)]

use std::fmt;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};
use spillguard_core::{Outcome, State, StreamEnd};
use spillguard_host::{HelperCommand, HostOptions, LeftoverStats};

use super::{poll_until, temp_path, wait};
use crate::engine::{HostUnderTest, request};
use crate::measure::become_subreaper;

/// A helper's `setsid` descendant keeps stdout and stderr open and writes
/// to stderr every 20 ms. After the call ends (`abandoned_open`), its host
/// drains both pipes (2 draining); at `leftover_drain_max` (here 1 s) it
/// closes them and counts them (2 closed, none ended), and the escapee's
/// next write kills it with SIGPIPE.
pub fn an_escapee_s_pipes_are_drained_then_closed_at_the_leftover_bound<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    become_subreaper();
    let drain_max = Duration::from_secs(1);
    let host = host(HostOptions {
        leftover_drain_max: Some(drain_max),
        ..HostOptions::default()
    });
    assert_eq!(host.leftover_pipes(), LeftoverStats::default());
    let (outcome, escapee) = start_escapee(&host, "orphan.pid");
    let ended = Instant::now();
    assert_eq!(outcome.record.state, State::Completed);
    poll_until(Duration::from_secs(5), "2 pipes draining", || {
        host.leftover_pipes().draining == 2
    });
    assert_orphans(&host, 2, 0, 0);
    // Still alive and writing while drained: nothing blocks it.
    assert!(rustix::process::test_kill_process(escapee).is_ok());
    poll_until(Duration::from_secs(10), "2 pipes closed", || {
        host.leftover_pipes().closed == 2
    });
    let closed_after = ended.elapsed();
    assert_orphans(&host, 0, 2, 0);
    // Handed over just after the outcome, closed 1 s later; generous
    // bounds for a loaded machine.
    assert!(
        closed_after >= Duration::from_millis(900),
        "{closed_after:?}"
    );
    assert!(closed_after < Duration::from_secs(5), "{closed_after:?}");
    // The escapee was reparented to this process (a subreaper): its
    // status says how it ended.
    let mut signal = None;
    poll_until(Duration::from_secs(10), "the escapee's end", || {
        match rustix::process::waitpid(Some(escapee), WaitOptions::NOHANG) {
            Ok(Some((_, status))) => {
                signal = status.terminating_signal();
                true
            }
            Ok(None) => false,
            // Not our child (no subreaper here): gone is what counts.
            Err(_) => rustix::process::test_kill_process(escapee).is_err(),
        }
    });
    if let Some(signal) = signal {
        assert_eq!(signal, 13, "the escapee died of SIGPIPE");
    }
}

/// With room for one leftover pipe and no time bound, the escapee's two
/// pipes cost one: the first handed over (stdout) is closed at once when
/// the second comes, and the other (stderr) is drained as long as the
/// escapee writes, until its end once the escapee is killed.
pub fn the_leftover_pipe_count_is_bounded_and_an_ended_pipe_is_counted<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    become_subreaper();
    let host = host(HostOptions {
        leftover_drain_max: None,
        leftover_pipes_max: 1,
        ..HostOptions::default()
    });
    let (_, escapee) = start_escapee(&host, "orphan-count.pid");
    poll_until(Duration::from_secs(5), "1 pipe closed", || {
        host.leftover_pipes().closed == 1
    });
    assert_orphans(&host, 1, 1, 0);
    // It goes on writing to the drained stderr: 0.5 s later, still so.
    std::thread::sleep(Duration::from_millis(500));
    assert!(rustix::process::test_kill_process(escapee).is_ok());
    assert_eq!(host.leftover_pipes().draining, 1);
    rustix::process::kill_process(escapee, Signal::KILL).unwrap();
    poll_until(Duration::from_secs(10), "the pipe's end", || {
        host.leftover_pipes().ended == 1
    });
    assert_orphans(&host, 0, 1, 1);
    reap(escapee);
}

/// Runs a helper whose `setsid` descendant (named in the file `pid_file`
/// while it starts) keeps stdout and stderr open and writes to stderr
/// every 20 ms; returns the call's outcome (`abandoned_open`, stdout
/// `ok`) and the escapee's pid.
fn start_escapee<H: HostUnderTest>(host: &H, pid_file: &str) -> (Outcome, Pid) {
    let pid_file = temp_path(pid_file);
    let _ = std::fs::remove_file(&pid_file);
    let script = format!(
        "setsid sh -c 'echo $$ > \"{}\"; while :; do echo noise >&2; sleep 0.02; done' & echo ok",
        pid_file.display()
    );
    // Opted out of its control group, which would end the escapee with
    // the call.
    let call = request(HelperCommand::shell_script(script)).contain_tree(false);
    let outcome = wait(host.launch(call.into_request()));
    assert_eq!(outcome.record.stream_end, StreamEnd::AbandonedOpen);
    assert_eq!(outcome.stdout.to_vec(), b"ok\n");
    let mut escapee = None;
    poll_until(Duration::from_secs(10), "the escapee's pid", || {
        escapee = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
            .and_then(Pid::from_raw);
        escapee.is_some()
    });
    let _ = std::fs::remove_file(&pid_file);
    (outcome, escapee.unwrap())
}

/// Waits until `escapee` (reparented to this subreaper) is reaped, or gone.
fn reap(escapee: Pid) {
    poll_until(
        Duration::from_secs(10),
        "the escapee reaped",
        || match rustix::process::waitpid(Some(escapee), WaitOptions::NOHANG) {
            Ok(Some(_)) => true,
            Ok(None) => false,
            Err(_) => rustix::process::test_kill_process(escapee).is_err(),
        },
    );
}

/// How a runtime runs its host's drainer of leftover pipes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drainer {
    /// A thread of its own, named `spillguard-leftovers` (std).
    Thread,
    /// A task on the host's runtime: no thread of its own (smol, tokio).
    Task,
}

/// The name of the std drainer's thread.
pub const DRAINER_THREAD: &str = "spillguard-leftovers";

/// The names of the process's threads, for a failure to show.
pub fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .map(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .unwrap_or_default()
                .trim_end()
                .to_owned()
        })
        .collect()
}

/// The process-wide threads that start once, whatever the calls' drainer
/// is, as the kernel keeps their names: the one that makes and removes
/// control groups (`spillguard-cgroups`, when a group is first retired)
/// and the one that tells the helper supervisor of released groups
/// (`spillguard-supervisor-flush`, when a call's group is first
/// released, which may come just after its outcome).
const PROCESS_WIDE_THREADS: [&str; 2] = ["spillguard-cgro", "spillguard-supe"];

/// The process's threads (`/proc/self/task`) but the process-wide
/// ones (`PROCESS_WIDE_THREADS`) and smol's blocking pool: how many, and how many are named
/// [`DRAINER_THREAD`].
pub fn process_threads() -> (usize, usize) {
    let mut all = 0;
    let mut drainers = 0;
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        // Also smol's blocking pool (`blocking-N`): its threads start for a
        // spawn's blocking steps and end after half a second idle, so a
        // count taken just after a call may or may not hold one.
        if PROCESS_WIDE_THREADS.contains(&name.trim_end()) || name.starts_with("blocking-") {
            continue;
        }
        all += 1;
        // The kernel keeps the first 15 bytes of a thread's name.
        if name.trim_end() == &DRAINER_THREAD[..DRAINER_THREAD.len().min(15)] {
            drainers += 1;
        }
    }
    (all, drainers)
}

/// What [`the_drainer_is_one_per_host_and_never_blocks_the_runtime`]
/// measured.
#[derive(Debug, Clone, Copy)]
pub struct DrainerFigures {
    /// Threads after a warm-up call, before any leftover pipe.
    pub baseline_threads: usize,
    /// Threads while the first call's two pipes were drained.
    pub threads_one_call: usize,
    /// Threads while the two calls' pipes were drained.
    pub threads_two_calls: usize,
    /// Drainer threads (by name) while the two calls' pipes were drained.
    pub drainer_threads: usize,
    /// How long the call made while the drainer waited took.
    pub other_call: Duration,
    /// Threads once every pipe had ended (and the std drainer's thread
    /// was gone).
    pub threads_after: usize,
}

impl fmt::Display for DrainerFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "threads: {} at baseline, {} draining one call's pipes, {} draining two calls' \
             ({} named {DRAINER_THREAD}), {} after; a call made meanwhile took {:?}",
            self.baseline_threads,
            self.threads_one_call,
            self.threads_two_calls,
            self.drainer_threads,
            self.threads_after,
            self.other_call,
        )
    }
}

/// Two calls each leave an escapee holding stdout and stderr, under room
/// for 3 leftover pipes and no time bound: the host drains them with one
/// drainer (the 4th pipe closes the oldest: 3 draining, 1 closed), a
/// thread on std, a task on smol and tokio (the process has exactly as
/// many threads as before the first leftover pipe, none named
/// `spillguard-leftovers`); a call made while it waits completes (on a
/// runtime with one thread, a drainer that blocked would hold it); once
/// both escapees are killed, the 3 pipes end (3 ended, 1 closed) and the
/// std drainer's thread ends.
///
/// It measures the process's threads: run it alone in its process.
pub fn the_drainer_is_one_per_host_and_never_blocks_the_runtime<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
    drainer: Drainer,
) -> DrainerFigures {
    become_subreaper();
    let host = host(HostOptions {
        leftover_drain_max: None,
        leftover_pipes_max: 3,
        ..HostOptions::default()
    });
    // A warm-up call starts what lives as long as the process or the
    // host (a runtime's threads, a pooled worker, the helper supervisor).
    let warm = wait(host.launch(request(HelperCommand::new("true")).into_request()));
    assert_eq!(warm.record.state, State::Completed);
    // The warm-up's end starts the supervisor's flusher, which is named
    // only once it runs (before, it has its spawner's name): counted from
    // then on, it is not counted twice.
    poll_until(Duration::from_secs(5), "the supervisor's flusher", || {
        thread_names().iter().any(|n| n == "spillguard-supe")
    });
    let (baseline_threads, none) = process_threads();
    let baseline_names = thread_names();
    assert_eq!(none, 0, "no drainer thread before a leftover pipe");
    let own_thread = usize::from(drainer == Drainer::Thread);

    let (_, first) = start_escapee(&host, "drainer-1.pid");
    poll_until(Duration::from_secs(5), "2 pipes draining", || {
        host.leftover_pipes().draining == 2
    });
    if drainer == Drainer::Thread {
        // Counted when handed over, the pipes may come before the thread.
        poll_until(Duration::from_secs(5), "the drainer thread", || {
            process_threads().1 == 1
        });
    }
    let (threads_one_call, drainers) = process_threads();
    assert_eq!(drainers, own_thread, "drainer threads, one call");
    if drainer == Drainer::Task {
        assert_eq!(
            threads_one_call,
            baseline_threads,
            "no thread for the drainer task: {:?} (after the warm-up: {baseline_names:?})",
            thread_names()
        );
    }

    let (_, second) = start_escapee(&host, "drainer-2.pid");
    poll_until(Duration::from_secs(5), "the count bound", || {
        host.leftover_pipes().closed == 1
    });
    assert_orphans(&host, 3, 1, 0);
    let (threads_two_calls, drainer_threads) = process_threads();
    assert_eq!(
        drainer_threads, own_thread,
        "one drainer per host, not per call"
    );
    if drainer == Drainer::Task {
        assert_eq!(
            threads_two_calls, baseline_threads,
            "no thread for the drainer task"
        );
    }

    // The drainer waits on 3 pipes; another call runs to its end meanwhile.
    let started = Instant::now();
    let other =
        wait(host.launch(request(HelperCommand::shell_script("printf done")).into_request()));
    let other_call = started.elapsed();
    assert_eq!(other.record.state, State::Completed);
    assert_eq!(other.record.exit_status, Some(0));
    assert_eq!(other.record.stream_end, StreamEnd::Eof);
    assert_eq!(other.stdout.to_vec(), b"done");
    // Both escapees still write to drained pipes: nothing blocks them.
    assert!(rustix::process::test_kill_process(first).is_ok());
    assert!(rustix::process::test_kill_process(second).is_ok());
    assert_orphans(&host, 3, 1, 0);

    for escapee in [first, second] {
        rustix::process::kill_process(escapee, Signal::KILL).unwrap();
    }
    poll_until(Duration::from_secs(10), "3 pipes ended", || {
        host.leftover_pipes().ended == 3
    });
    assert_orphans(&host, 0, 1, 3);
    reap(first);
    reap(second);
    poll_until(Duration::from_secs(10), "the drainer thread's end", || {
        process_threads().1 == 0
    });
    let (threads_after, _) = process_threads();
    if drainer == Drainer::Task {
        assert_eq!(threads_after, baseline_threads);
    }
    DrainerFigures {
        baseline_threads,
        threads_one_call,
        threads_two_calls,
        drainer_threads,
        other_call,
        threads_after,
    }
}

/// Asserts what `host`'s drainer holds and counted: exactly `draining`
/// pipes now, `closed` and `ended` so far.
fn assert_orphans<H: HostUnderTest>(host: &H, draining: usize, closed: u64, ended: u64) {
    assert_eq!(
        host.leftover_pipes(),
        LeftoverStats {
            draining,
            closed,
            ended
        }
    );
}
