//! Soak and load: many calls in a row on one host, then the process's
//! descriptors, threads, zombies and the host's live calls must be back
//! where they were before.
//!
//! Four phases, each with exact checks on every call, run by [`soak`] on
//! one host after a warm-up call (which starts what lives as long as the
//! process: a runtime's threads, the helper supervisor):
//!
//! * **flood and cancel**: `cycles` helpers flooding stderr, each
//!   cancelled once dispatched: `cancelled_after_dispatch`, SIGTERM, at
//!   most 16 KiB retained;
//! * **short calls**: `cycles` calls of `true`: `completed`, exit 0;
//! * **process trees**: `trees` helpers that grow a 13-process tree (a
//!   shell, 3 subshells, 9 `sleep 60`), each cancelled once all 13 are
//!   in its group: no process of the group survives;
//! * **concurrent calls**: `concurrent` helpers at once, each writing
//!   64 KiB of stderr, under the default 256 KiB process budget, sampled
//!   every 500 µs: never over budget, every record present;
//! * **leftover pipes**: `trees` helpers at once, each leaving a `setsid`
//!   descendant that holds stdout and stderr for 3 s: every call ends
//!   `abandoned_open`, the host's one drainer takes the pipes, and every
//!   pipe is counted as ended (or closed, beyond the 256-pipe bound) when
//!   its escapee exits; then the drainer (a thread on std, a task on smol
//!   and tokio) has ended and the counts are back.
//!
//! Measuring the whole process, the soak must run alone in its process
//! (`tests/tests/soak.rs` holds one lock for it; `cargo xtask soak` runs
//! `spillguard-soak`).
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::fmt;
use std::time::{Duration, Instant};

use spillguard_core::{CallRecord, Outcome, Signal, State, StreamEnd};
use spillguard_host::{HelperCommand, HostOptions, LeftoverStats};

use crate::engine::{CallUnderTest, HostUnderTest, request};
use crate::measure::{PoolSampler, become_subreaper, group_members, settle_group};

/// What the process holds at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Open file descriptors (`/proc/self/fd`).
    pub fds: usize,
    /// Threads (`/proc/self/task`).
    pub threads: usize,
    /// Children of this process that are zombies.
    pub zombies: usize,
    /// Calls the host counts as live.
    pub live_calls: usize,
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} fds, {} threads, {} zombies, {} live calls",
            self.fds, self.threads, self.zombies, self.live_calls
        )
    }
}

/// What a soak did and measured.
#[derive(Debug, Clone)]
pub struct SoakFigures {
    /// Flood-and-cancel cycles.
    pub flood_cycles: usize,
    /// Stderr bytes the floods wrote before their cancel, in all.
    pub flood_bytes: u64,
    /// Short calls.
    pub short_calls: usize,
    /// Process trees, and how many of their processes survived.
    pub trees: usize,
    /// Processes of the trees left after their calls (0 expected).
    pub tree_survivors: usize,
    /// Concurrent calls.
    pub concurrent: usize,
    /// Calls that left an escapee, and what the host's drainer counted
    /// for their pipes (closed, ended; none left draining).
    pub escapees: usize,
    /// What the drainer counted for the escapees' pipes.
    pub leftovers: LeftoverStats,
    /// The pool's capacity, its peak and the highest sampled use during
    /// the concurrent calls, and how many samples were taken.
    pub pool: (u64, u64, u64, u64),
    /// Before the first phase (after the warm-up call).
    pub before: Counts,
    /// After the last phase, once settled.
    pub after: Counts,
    /// The most file descriptors seen at the end of a phase.
    pub fds_peak: usize,
    /// How long each phase took: flood, short, trees, concurrent,
    /// leftover pipes.
    pub phases: [Duration; 5],
    /// How long the counts took to come back after the last phase.
    pub settled_in: Duration,
}

impl fmt::Display for SoakFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_millis();
        writeln!(
            f,
            "  {} flood-and-cancel cycles in {} ms ({} MiB of stderr), {} short calls in {} ms",
            self.flood_cycles,
            ms(self.phases[0]),
            self.flood_bytes >> 20,
            self.short_calls,
            ms(self.phases[1])
        )?;
        writeln!(
            f,
            "  {} 13-process trees in {} ms, {} survivors",
            self.trees,
            ms(self.phases[2]),
            self.tree_survivors
        )?;
        let (capacity, peak, sampled, samples) = self.pool;
        writeln!(
            f,
            "  {} concurrent calls in {} ms: pool {capacity} B, peak {peak} B, \
             highest of {samples} samples {sampled} B",
            self.concurrent,
            ms(self.phases[3])
        )?;
        writeln!(
            f,
            "  {} escapees' leftover pipes in {} ms: {} ended, {} closed",
            self.escapees,
            ms(self.phases[4]),
            self.leftovers.ended,
            self.leftovers.closed
        )?;
        writeln!(f, "  before: {}", self.before)?;
        write!(
            f,
            "  after:  {} (settled in {} ms; at most {} fds at a phase's end)",
            self.after,
            ms(self.settled_in),
            self.fds_peak
        )
    }
}

/// How many of each the soak runs.
#[derive(Debug, Clone, Copy)]
pub struct SoakSize {
    /// Flood-and-cancel cycles, and as many short calls.
    pub cycles: usize,
    /// Process trees.
    pub trees: usize,
    /// Concurrent calls.
    pub concurrent: usize,
}

impl SoakSize {
    /// The size run in CI: 200 cycles and 200 short calls, 20 trees, 256
    /// concurrent calls.
    pub const CI: Self = Self {
        cycles: 200,
        trees: 20,
        concurrent: 256,
    };
}

/// How long the counts may take to come back: idle std workers and
/// tokio's blocking threads end after 10 s.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// The process's counts now, with `host`'s live calls.
pub fn counts(host: &impl HostUnderTest) -> Counts {
    Counts {
        fds: entries("/proc/self/fd"),
        threads: entries("/proc/self/task"),
        zombies: zombie_children(),
        live_calls: host.live_calls(),
    }
}

fn entries(dir: &str) -> usize {
    std::fs::read_dir(dir).map_or(0, Iterator::count)
}

/// Children of this process in state `Z`.
pub fn zombie_children() -> usize {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter(|stat| {
            let fields: Vec<&str> = stat
                .rfind(')')
                .map(|at| stat[at + 1..].split_whitespace().collect())
                .unwrap_or_default();
            fields.first() == Some(&"Z") && fields.get(1) == Some(&me.as_str())
        })
        .count()
}

/// Runs the soak on a host made by `host` with the default config; panics
/// at the first fact that does not hold.
pub fn soak<H: HostUnderTest>(host: fn(HostOptions) -> H, size: SoakSize) -> SoakFigures {
    become_subreaper();
    let host = host(HostOptions::default());
    let warm = wait(host.launch(request(HelperCommand::new("true")).into_request()));
    assert_eq!(warm.record.state, State::Completed);
    drop(warm);
    let before = steady(&host);
    let mut fds_peak = before.fds;
    let mut phases = [Duration::ZERO; 5];

    let started = Instant::now();
    let flood_bytes = flood_and_cancel(&host, size.cycles);
    phases[0] = started.elapsed();
    fds_peak = fds_peak.max(phase_end(&host, &before));

    let started = Instant::now();
    short_calls(&host, size.cycles);
    phases[1] = started.elapsed();
    fds_peak = fds_peak.max(phase_end(&host, &before));

    let started = Instant::now();
    let tree_survivors = process_trees(&host, size.trees);
    phases[2] = started.elapsed();
    fds_peak = fds_peak.max(phase_end(&host, &before));

    let started = Instant::now();
    let pool = concurrent_calls(&host, size.concurrent);
    phases[3] = started.elapsed();
    fds_peak = fds_peak.max(phase_end(&host, &before));

    let started = Instant::now();
    let leftovers = leftover_pipes(&host, size.trees);
    phases[4] = started.elapsed();
    fds_peak = fds_peak.max(phase_end(&host, &before));

    let (after, settled_in) = settle(&host, Some(SETTLE_LIMIT), |now| {
        now.fds == before.fds
            && now.threads <= before.threads
            && now.zombies == 0
            && now.live_calls == 0
    });
    assert_eq!(after.fds, before.fds, "descriptors: {after} vs {before}");
    assert!(
        after.threads <= before.threads,
        "threads: {after} vs {before}"
    );
    assert_eq!(after.zombies, 0, "{after}");
    assert_eq!(after.live_calls, 0, "{after}");
    SoakFigures {
        flood_cycles: size.cycles,
        flood_bytes,
        short_calls: size.cycles,
        trees: size.trees,
        tree_survivors,
        concurrent: size.concurrent,
        escapees: size.trees,
        leftovers,
        pool,
        before,
        after,
        fds_peak,
        phases,
        settled_in,
    }
}

/// At a phase's end: descriptors, zombies and live calls are back (within
/// 10 s); returns the descriptors held at the phase's end.
fn phase_end(host: &impl HostUnderTest, before: &Counts) -> usize {
    let at_end = counts(host).fds;
    let (now, _) = settle(host, Some(Duration::from_secs(10)), |now| {
        now.fds == before.fds && now.zombies == 0 && now.live_calls == 0
    });
    assert_eq!(now.fds, before.fds, "descriptors: {now} vs {before}");
    assert_eq!((now.zombies, now.live_calls), (0, 0), "{now}");
    at_end
}

/// The counts once the warm-up call's owner is gone: no live call, no
/// zombie, and the same descriptors for 100 ms (at most 10 s).
fn steady(host: &impl HostUnderTest) -> Counts {
    let started = Instant::now();
    let mut last = counts(host);
    let mut same = 0;
    while same < 10 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
        let now = counts(host);
        let quiet = now.live_calls == 0 && now.zombies == 0 && now.fds == last.fds;
        same = if quiet { same + 1 } else { 0 };
        last = now;
    }
    last
}

/// Polls the counts every 10 ms until `done` holds or `limit` passed
/// (`None`: 10 s); the counts then, and how long it took.
fn settle(
    host: &impl HostUnderTest,
    limit: Option<Duration>,
    done: impl Fn(&Counts) -> bool,
) -> (Counts, Duration) {
    let limit = limit.unwrap_or(Duration::from_secs(10));
    let started = Instant::now();
    loop {
        let now = counts(host);
        if done(&now) || started.elapsed() >= limit {
            return (now, started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait<C: CallUnderTest>(call: C) -> Outcome {
    match call.wait_timeout(Duration::from_secs(30)) {
        Ok(outcome) => outcome,
        Err(_) => panic!("no outcome within 30 s"),
    }
}

fn until_dispatched(call: &impl CallUnderTest) {
    let until = Instant::now() + Duration::from_secs(10);
    while call.state() != State::Dispatched {
        assert!(!call.state().is_terminal(), "{:?}", call.state());
        assert!(Instant::now() < until, "not dispatched in 10 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn signals(record: &CallRecord) -> Vec<Signal> {
    record.signals.iter().map(|s| s.signal).collect()
}

/// `cycles` helpers flooding stderr, each cancelled 2 ms after it was
/// seen dispatched; returns the stderr bytes they wrote in all.
fn flood_and_cancel(host: &impl HostUnderTest, cycles: usize) -> u64 {
    let mut bytes = 0;
    for cycle in 0..cycles {
        let flood = HelperCommand::shell_script("exec cat /dev/zero 1>&2");
        let call = host.launch(
            request(flood)
                .call_id(format!("c_flood_{cycle}"))
                .into_request(),
        );
        until_dispatched(&call);
        std::thread::sleep(Duration::from_millis(2));
        call.cancel();
        let outcome = wait(call);
        let record = &outcome.record;
        bytes += record.stderr_bytes_seen;
        assert_eq!(record.state, State::CancelledAfterDispatch, "cycle {cycle}");
        assert_eq!(signals(record), [Signal::Term], "cycle {cycle}");
        assert_eq!(record.exit_signal, Some(15), "cycle {cycle}");
        assert!(record.stderr_bytes_retained <= 16_384, "cycle {cycle}");
        assert_eq!(
            record.stderr_bytes_retained,
            record.stderr_bytes_seen.min(16_384),
            "cycle {cycle}"
        );
    }
    bytes
}

/// `count` calls of `true`, one after another.
fn short_calls(host: &impl HostUnderTest, count: usize) {
    for call in 0..count {
        let outcome = wait(host.launch(request(HelperCommand::new("true")).into_request()));
        assert_eq!(outcome.record.state, State::Completed, "call {call}");
        assert_eq!(outcome.record.exit_status, Some(0), "call {call}");
        assert_eq!(outcome.record.stderr_bytes_seen, 0, "call {call}");
    }
}

/// `count` helpers that each grow a 13-process tree in their group and
/// are cancelled once it is whole; returns how many processes of all the
/// groups are left (0 expected, and asserted).
fn process_trees(host: &impl HostUnderTest, count: usize) -> usize {
    let dir = std::env::temp_dir().join(format!("spillguard-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut survivors = 0;
    for tree in 0..count {
        let pid_file = dir.join(format!("tree-{tree}.pid"));
        let script = format!(
            "echo $$ > '{}'; for i in 1 2 3; do (for j in 1 2 3; do sleep 60 & done; wait) & done; wait",
            pid_file.display()
        );
        let call = host.launch(
            request(HelperCommand::shell_script(script))
                .call_id(format!("c_tree_{tree}"))
                .into_request(),
        );
        let until = Instant::now() + Duration::from_secs(10);
        let pgid = loop {
            let pgid = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|text| text.trim().parse::<u32>().ok());
            if let Some(pgid) = pgid
                && group_members(pgid).len() == 13
            {
                break pgid;
            }
            assert!(Instant::now() < until, "tree {tree}: not 13 processes");
            std::thread::sleep(Duration::from_millis(2));
        };
        call.cancel();
        let outcome = wait(call);
        assert_eq!(outcome.record.state, State::CancelledAfterDispatch);
        assert_eq!(outcome.record.pgid, Some(pgid));
        let after = settle_group(pgid, outcome.record.pid);
        survivors += after.members_left.len();
        assert!(!after.alive, "tree {tree}: {:?}", after.members_left);
        assert!(!after.helper_unreaped, "tree {tree}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    survivors
}

/// `count` helpers at once, each writing 64 KiB of stderr, under the
/// default 256 KiB process budget; returns the pool's capacity, peak,
/// highest sample and sample count.
fn concurrent_calls(host: &impl HostUnderTest, count: usize) -> (u64, u64, u64, u64) {
    let pool = host.pool();
    let sampler = PoolSampler::start(pool.clone());
    let calls: Vec<_> = (0..count)
        .map(|i| {
            let write = HelperCommand::shell_script("exec head -c 65536 /dev/zero 1>&2");
            host.launch(request(write).call_id(format!("c_load_{i}")).into_request())
        })
        .collect();
    let outcomes: Vec<Outcome> = calls.into_iter().map(wait).collect();
    let (sampled_max, samples) = sampler.finish();
    let capacity = pool.capacity();
    assert_eq!(capacity, 262_144);
    assert!(sampled_max <= capacity, "{sampled_max} > {capacity}");
    assert!(pool.peak() <= capacity, "{} > {capacity}", pool.peak());
    let mut retained = 0;
    let mut ids = HashSet::new();
    for outcome in &outcomes {
        let record = &outcome.record;
        assert_eq!(record.state, State::Completed, "{}", record.call_id);
        assert_eq!(record.stderr_bytes_seen, 65_536, "{}", record.call_id);
        assert!(record.stderr_bytes_retained <= 16_384);
        retained += record.stderr_bytes_retained;
        ids.insert(record.call_id.clone());
    }
    // Every outcome still holds its lease: together within the budget.
    assert!(retained <= capacity, "{retained} > {capacity}");
    assert_eq!(ids.len(), count);
    let kept: HashSet<String> = host
        .finished_records()
        .into_iter()
        .map(|r| r.call_id)
        .filter(|id| id.starts_with("c_load_"))
        .collect();
    assert_eq!(kept, ids, "every record present");
    drop(outcomes);
    (capacity, pool.peak(), sampled_max, samples)
}

/// `count` helpers at once, each leaving a `setsid` descendant that holds
/// stdout and stderr for 3 s and writes nothing: every call ends
/// `abandoned_open` and hands its two pipes to the host's drainer; each
/// pipe ends when its escapee exits, except those over the default
/// 256-pipe bound (the oldest, closed at once). Returns what the drainer
/// counted for them; none is left draining.
fn leftover_pipes(host: &impl HostUnderTest, count: usize) -> LeftoverStats {
    let before = host.leftover_pipes();
    assert_eq!(before.draining, 0);
    let dir = std::env::temp_dir().join(format!("spillguard-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pid_files: Vec<_> = (0..count)
        .map(|i| dir.join(format!("escapee-{i}.pid")))
        .collect();
    let calls: Vec<_> = pid_files
        .iter()
        .enumerate()
        .map(|(i, pid_file)| {
            let script = format!(
                "setsid sh -c 'echo $$ > \"{}\"; exec sleep 3' & echo ok",
                pid_file.display()
            );
            let escape = HelperCommand::shell_script(script);
            // Opted out of its control group, which would end the
            // escapee with the call: this phase measures the leftover
            // pipes of helpers that have none.
            host.launch(
                request(escape)
                    .call_id(format!("c_escape_{i}"))
                    .contain_tree(false)
                    .into_request(),
            )
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        let outcome = wait(call);
        assert_eq!(outcome.record.state, State::Completed, "escapee {i}");
        assert_eq!(
            outcome.record.stream_end,
            StreamEnd::AbandonedOpen,
            "escapee {i}"
        );
    }
    let pipes = 2 * count;
    let over = pipes.saturating_sub(HostOptions::DEFAULT_ORPHAN_PIPES_MAX) as u64;
    let until = Instant::now() + Duration::from_secs(30);
    while host.leftover_pipes().draining > 0 {
        assert!(Instant::now() < until, "{:?}", host.leftover_pipes());
        std::thread::sleep(Duration::from_millis(10));
    }
    let after = host.leftover_pipes();
    let counted = LeftoverStats {
        draining: 0,
        closed: after.closed - before.closed,
        ended: after.ended - before.ended,
    };
    assert_eq!(
        counted,
        LeftoverStats {
            draining: 0,
            closed: over,
            ended: pipes as u64 - over,
        }
    );
    // The escapees were reparented to this process (a subreaper).
    for pid_file in &pid_files {
        let pid = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    counted
}
