//! What a run of a scenario measured: the records, the pool's use, the
//! client's timings and what was left of each helper's process group.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::process::{Pid, WaitOptions};
use serde::Serialize;
use spillguard_core::audit::Difference;
use spillguard_core::{CallRecord, RetentionPool};

/// Everything a driver measured while running one scenario on one runtime.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// The runtime's name (`std`, `smol`, `tokio`).
    pub runtime: String,
    /// The scenario's name.
    pub scenario: String,
    /// One entry per call, in the scenario's order.
    pub calls: Vec<MeasuredCall>,
    /// The process-wide pool.
    pub pool: PoolUse,
    /// Wall time of the whole run, in milliseconds.
    pub wall_ms: f64,
    /// Offline verification of the run's audit log against the sink's
    /// anchor and the lifecycle of every record (S10); `None` when the run
    /// wrote no log.
    pub audit_chain: Option<AuditChain>,
}

impl Measured {
    /// The measurement of `call_id`.
    pub fn call(&self, call_id: &str) -> Option<&MeasuredCall> {
        self.calls.iter().find(|c| c.call_id == call_id)
    }
}

/// What one call produced and how long things took.
#[derive(Debug, Clone, Serialize)]
pub struct MeasuredCall {
    /// The call's id.
    pub call_id: String,
    /// Its record: from its outcome, or from the host when the handle was
    /// dropped.
    pub record: Option<CallRecord>,
    /// How many records the host kept for this call id.
    pub records_kept: usize,
    /// The rendered stderr (marker included), when an outcome was received.
    #[serde(skip)]
    pub stderr_text: Option<String>,
    /// The first line of the rendered stderr (the marker when truncated).
    pub stderr_first_line: Option<String>,
    /// The retained stdout, decoded lossily, when an outcome was received.
    pub stdout_text: Option<String>,
    /// Whether the client dropped the handle before the outcome.
    pub handle_dropped: bool,
    /// Wall time from `start` to the card being observed, in microseconds.
    pub time_to_card_us: Option<u64>,
    /// Why the approver's answer was refused, if it was.
    pub approval_refused: Option<String>,
    /// From the record's stop request to its observed exit, in
    /// microseconds (`exited_offset_us - cancel_offset_us`).
    pub cancel_to_exit_us: Option<u64>,
    /// The helper's process group after the record, if one was spawned.
    pub group: Option<GroupAfter>,
    /// What went wrong in the driver itself (no outcome in time, …).
    pub problems: Vec<String>,
}

impl MeasuredCall {
    /// An empty measurement for `call_id`.
    pub fn new(call_id: String) -> Self {
        Self {
            call_id,
            record: None,
            records_kept: 0,
            stderr_text: None,
            stderr_first_line: None,
            stdout_text: None,
            handle_dropped: false,
            time_to_card_us: None,
            approval_refused: None,
            cancel_to_exit_us: None,
            group: None,
            problems: Vec::new(),
        }
    }
}

/// The retention pool over a run.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PoolUse {
    /// `stderr_retained_process_bytes`.
    pub capacity: u64,
    /// `RetentionPool::peak` at the end of the run.
    pub peak: u64,
    /// The highest `in_use` figure a sampling thread saw during the run.
    pub sampled_max: u64,
    /// How many samples it took.
    pub samples: u64,
    /// `in_use` once every outcome of the run was dropped.
    pub in_use_after: u64,
}

/// S10: the run's audit log, verified offline (see [`crate::audit`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditChain {
    /// Whether the log verified `ok` against the sink's anchor.
    pub verified: bool,
    /// Whether the calls on record match, call for call, the lifecycle of
    /// the records the run produced (no [`Difference`]).
    pub matches_expected_lifecycle: bool,
    /// The verdict's line (`ok: 19 records, as anchored (…)`), or why the
    /// log could not be written.
    pub verdict: String,
    /// Records the verifier accepted.
    pub records: u64,
    /// How the log differs from the expected lifecycles.
    pub differences: Vec<Difference>,
    /// The log file, kept when a check failed.
    pub kept_log: Option<std::path::PathBuf>,
}

/// What was left of a helper's process group once its record was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupAfter {
    /// The group id, from the record.
    pub pgid: u32,
    /// Whether `kill(-pgid, 0)` still found a process after reaping the
    /// group's orphans for up to [`GROUP_SETTLE`].
    pub alive: bool,
    /// Descendants (not the helper) this process reaped as subreaper.
    pub orphans_reaped: u32,
    /// Whether this process had to reap the helper itself, i.e. the adapter
    /// wrote the record without reaping its child.
    pub helper_unreaped: bool,
    /// Processes still in the group at the end, as `pid:state` from
    /// `/proc` (a zombie shows as `Z`).
    pub members_left: Vec<String>,
}

/// How long a group may take to disappear after its record.
pub const GROUP_SETTLE: Duration = Duration::from_secs(2);

/// Makes this process the reaper of orphaned descendants of the helpers it
/// starts. The machine's init may not reap orphans, so a helper's
/// grandchild that outlived its parent would otherwise stay a zombie member
/// of the helper's group forever. Idempotent.
pub fn become_subreaper() {
    // Refused only without prctl (not Linux): the group check then waits on
    // `kill(-pgid, 0)` alone.
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
}

/// Reaps the dead members of group `pgid` that are children of this
/// process and waits until `kill(-pgid, 0)` fails with ESRCH, for at most
/// [`GROUP_SETTLE`]. Call it only after the helper's record: before, it
/// could reap the helper under its adapter's feet.
pub fn settle_group(pgid: u32, helper_pid: Option<u32>) -> GroupAfter {
    let mut after = GroupAfter {
        pgid,
        alive: true,
        orphans_reaped: 0,
        helper_unreaped: false,
        members_left: Vec::new(),
    };
    let Some(group) = i32::try_from(pgid)
        .ok()
        .filter(|&raw| raw > 1)
        .and_then(Pid::from_raw)
    else {
        return after;
    };
    let started = Instant::now();
    loop {
        while let Ok(Some((pid, _))) = rustix::process::waitpgid(group, WaitOptions::NOHANG) {
            if Some(pid.as_raw_nonzero().get().unsigned_abs()) == helper_pid {
                after.helper_unreaped = true;
            } else {
                after.orphans_reaped += 1;
            }
        }
        if rustix::process::test_kill_process_group(group) == Err(rustix::io::Errno::SRCH) {
            after.alive = false;
            break;
        }
        if started.elapsed() >= GROUP_SETTLE {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    after.members_left = group_members(pgid);
    after
}

/// Processes whose process group is `pgid`, as `pid:state`, from `/proc`.
pub fn group_members(pgid: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut members = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold spaces and parens.
        let Some(rest) = stat.rfind(')').map(|at| &stat[at + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|p| p.parse::<u32>().ok()) == Some(pgid) {
            members.push(format!("{pid}:{}", fields.first().unwrap_or(&"?")));
        }
    }
    members
}

/// A thread that samples a pool's `in_use` figure until stopped.
#[derive(Debug)]
pub struct PoolSampler {
    stop: Arc<AtomicBool>,
    max: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl PoolSampler {
    /// How often the pool is sampled.
    pub const PERIOD: Duration = Duration::from_micros(500);

    /// Starts sampling `pool`.
    pub fn start(pool: RetentionPool) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicU64::new(0));
        let samples = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, max, samples) = (stop.clone(), max.clone(), samples.clone());
            std::thread::Builder::new()
                .name("pool-sampler".into())
                .spawn(move || {
                    loop {
                        max.fetch_max(pool.in_use(), Ordering::Relaxed);
                        samples.fetch_add(1, Ordering::Relaxed);
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        std::thread::sleep(Self::PERIOD);
                    }
                })
                .ok()
        };
        Self {
            stop,
            max,
            samples,
            thread,
        }
    }

    /// Stops sampling; returns the highest figure seen and the number of
    /// samples.
    pub fn finish(mut self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        (
            self.max.load(Ordering::Relaxed),
            self.samples.load(Ordering::Relaxed),
        )
    }
}
