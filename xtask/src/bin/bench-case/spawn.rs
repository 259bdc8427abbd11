//! Spawn cases: `true`, `--count` times one after the other, through a
//! runtime's adapter (`Host::start` + `wait`) or through the same runtime's
//! own spawn + wait of the same std command (own process group, stdin null,
//! stdout and stderr piped). [`SPAWN_WARMUP`] calls come first, unclocked.

use std::io;
use std::process::Stdio;
use std::time::{Duration, Instant};

use spillguard_std::proto::{Config, Confinement, Limits, Outcome, Sandbox, State};
use spillguard_std::{HelperCommand, HostOptions};

use crate::flood::tokio_runtime;
use crate::{Args, Measured, SPAWN_WARMUP, micros};

const PROGRAM: &str = "true";

/// The adapter call `i`, or the raw spawn, failed: what to count.
fn check_outcome(outcome: &Outcome) -> Option<String> {
    let record = &outcome.record;
    (record.state != State::Completed || record.exit_status != Some(0)).then(|| {
        format!(
            "state {:?}, exit {:?}, failure {:?}",
            record.state, record.exit_status, record.failure
        )
    })
}

fn check_status(status: io::Result<std::process::ExitStatus>) -> Option<String> {
    match status {
        Ok(status) if status.success() => None,
        Ok(status) => Some(format!("{PROGRAM} ended with {status}")),
        Err(error) => Some(format!("cannot run {PROGRAM}: {error}")),
    }
}

/// Runs `call(i)` for the warmup and then `count` times, each after a
/// pause of `gap`; the clock covers only the counted calls themselves.
fn measure(
    case: &str,
    count: u32,
    gap: Duration,
    mut call: impl FnMut(u32) -> Option<String>,
) -> Measured {
    let mut failures = 0u64;
    let mut first_failure = None;
    let mut tally = |problem: Option<String>| {
        if let Some(problem) = problem {
            failures += 1;
            first_failure.get_or_insert(problem);
        }
    };
    for i in 0..SPAWN_WARMUP {
        tally(call(i));
    }
    let mut wall = Duration::ZERO;
    for i in 0..count {
        std::thread::sleep(gap);
        let start = Instant::now();
        tally(call(SPAWN_WARMUP + i));
        wall += start.elapsed();
    }
    finish(case, count, wall, failures, first_failure)
}

fn finish(
    case: &str,
    count: u32,
    wall: Duration,
    failures: u64,
    first_failure: Option<String>,
) -> Measured {
    let per_call_ns = wall.as_nanos() / u128::from(count.max(1));
    let mut measured = Measured::new(case);
    measured
        .line
        .number("count", u64::from(count))
        .number("warmup", u64::from(SPAWN_WARMUP))
        .number("wall_us", micros(wall))
        .number(
            "per_call_ns",
            u64::try_from(per_call_ns).unwrap_or(u64::MAX),
        )
        .number("failures", failures);
    if let Some(problem) = first_failure {
        measured
            .problems
            .push(format!("{failures} calls failed, the first: {problem}"));
    }
    measured
}

fn host_error(error: impl std::fmt::Display) -> String {
    format!("cannot make the host: {error}")
}

/// spillguard-std: `Host::start` + `CallHandle::wait`.
pub fn std_spillguard(args: &Args) -> Result<Measured, String> {
    std_calls(args, "spawn-std", None)
}

/// The std adapter's calls of `case`, each with `bounds` if given.
fn std_calls(args: &Args, case: &str, bounds: Option<Confinement>) -> Result<Measured, String> {
    let host =
        spillguard_std::Host::new(Config::default(), HostOptions::default()).map_err(host_error)?;
    let gap = Duration::from_millis(args.gap_ms);
    Ok(measure(case, args.count, gap, |i| {
        let call = host
            .command(PROGRAM)
            .call_id(format!("c_{i}"))
            .action("bench.true");
        let call = match &bounds {
            Some(bounds) => call.confinement(bounds.clone()),
            None => call,
        };
        check_outcome(&call.run())
    }))
}

/// The bounds of a confined spawn: a control group with memory and
/// process limits, rlimits, and Landlock file rules.
fn confinement() -> Confinement {
    // `SPILLGUARD_BENCH_CONFINE` picks one mechanism, to see what each
    // costs: `tree` (the tree's group only), `memory` and `pids` (the
    // tree's group and that one limit), `limits` (the groups and rlimits),
    // `landlock` (the file rules only); anything else, all of them.
    let all = Confinement {
        limits: Limits {
            memory_max: Some(256 << 20),
            pids_max: Some(64),
            ..Limits::default()
        },
        sandbox: Sandbox {
            read_only: vec![std::env::temp_dir()],
            ..Sandbox::default()
        },
        ..Confinement::default()
    };
    match std::env::var("SPILLGUARD_BENCH_CONFINE").as_deref() {
        Ok("tree") => Confinement {
            contain_tree: Some(true),
            ..Confinement::default()
        },
        Ok("memory") => Confinement {
            limits: Limits {
                memory_max: all.limits.memory_max,
                ..Limits::default()
            },
            ..Confinement::default()
        },
        Ok("pids") => Confinement {
            limits: Limits {
                pids_max: all.limits.pids_max,
                ..Limits::default()
            },
            ..Confinement::default()
        },
        Ok("limits") => Confinement {
            sandbox: Sandbox::default(),
            ..all
        },
        Ok("landlock") => Confinement {
            limits: Limits::default(),
            ..all
        },
        _ => all,
    }
}

/// A call that opted out of the tree's control group.
fn uncontained() -> Confinement {
    Confinement {
        contain_tree: Some(false),
        ..Confinement::default()
    }
}

/// spillguard-std without the tree's group.
pub fn std_uncontained(args: &Args) -> Result<Measured, String> {
    std_calls(args, "spawn-std-uncontained", Some(uncontained()))
}

/// spillguard-smol without the tree's group.
pub fn smol_uncontained(args: &Args) -> Result<Measured, String> {
    smol_calls(args, "spawn-smol-uncontained", Some(uncontained()))
}

/// spillguard-tokio without the tree's group.
pub fn tokio_uncontained(args: &Args) -> Result<Measured, String> {
    tokio_calls(args, "spawn-tokio-uncontained", Some(uncontained()))
}

/// spillguard-std with [`confinement`].
pub fn std_confined(args: &Args) -> Result<Measured, String> {
    std_calls(args, "spawn-std-confined", Some(confinement()))
}

/// spillguard-tokio with [`confinement`].
pub fn tokio_confined(args: &Args) -> Result<Measured, String> {
    tokio_calls(args, "spawn-tokio-confined", Some(confinement()))
}

/// std: `Command::spawn` + `Child::wait`.
pub fn std_raw(args: &Args) -> Result<Measured, String> {
    let gap = Duration::from_millis(args.gap_ms);
    Ok(measure("spawn-std-raw", args.count, gap, |_| {
        let mut command = HelperCommand::new(PROGRAM).to_std();
        check_status(command.spawn().and_then(|mut child| child.wait()))
    }))
}

/// spillguard-smol under `smol::block_on`.
pub fn smol_spillguard(args: &Args) -> Result<Measured, String> {
    smol_calls(args, "spawn-smol", None)
}

/// spillguard-smol with [`confinement`].
pub fn smol_confined(args: &Args) -> Result<Measured, String> {
    smol_calls(args, "spawn-smol-confined", Some(confinement()))
}

/// The smol adapter's calls of `case`, each with `bounds` if given.
fn smol_calls(args: &Args, case: &str, bounds: Option<Confinement>) -> Result<Measured, String> {
    let host = spillguard_smol::Host::new(Config::default(), HostOptions::default())
        .map_err(host_error)?;
    Ok(smol::block_on(async {
        let mut failures = 0u64;
        let mut first_failure = None;
        let mut start = Instant::now();
        for i in 0..SPAWN_WARMUP + args.count {
            if i == SPAWN_WARMUP {
                start = Instant::now();
            }
            let call = host
                .command(PROGRAM)
                .call_id(format!("c_{i}"))
                .action("bench.true");
            let call = match &bounds {
                Some(bounds) => call.confinement(bounds.clone()),
                None => call,
            };
            let outcome = call.run().await;
            if let Some(problem) = check_outcome(&outcome) {
                failures += 1;
                first_failure.get_or_insert(problem);
            }
        }
        finish(case, args.count, start.elapsed(), failures, first_failure)
    }))
}

/// async-process under `smol::block_on`: `spawn` + `status`.
pub fn smol_raw(args: &Args) -> Result<Measured, String> {
    Ok(smol::block_on(async {
        let mut failures = 0u64;
        let mut first_failure = None;
        let mut start = Instant::now();
        for i in 0..SPAWN_WARMUP + args.count {
            if i == SPAWN_WARMUP {
                start = Instant::now();
            }
            let mut command = async_process::Command::from(HelperCommand::new(PROGRAM).to_std());
            command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let status = match command.spawn() {
                Ok(mut child) => child.status().await,
                Err(error) => Err(error),
            };
            if let Some(problem) = check_status(status) {
                failures += 1;
                first_failure.get_or_insert(problem);
            }
        }
        finish(
            "spawn-smol-raw",
            args.count,
            start.elapsed(),
            failures,
            first_failure,
        )
    }))
}

/// spillguard-tokio on a multi-threaded runtime.
pub fn tokio_spillguard(args: &Args) -> Result<Measured, String> {
    tokio_calls(args, "spawn-tokio", None)
}

/// The tokio adapter's calls of `case`, each with `bounds` if given.
fn tokio_calls(args: &Args, case: &str, bounds: Option<Confinement>) -> Result<Measured, String> {
    let runtime = tokio_runtime()?;
    runtime.block_on(async {
        let host = spillguard_tokio::Host::new(Config::default(), HostOptions::default())
            .map_err(host_error)?;
        let mut failures = 0u64;
        let mut first_failure = None;
        let mut start = Instant::now();
        for i in 0..SPAWN_WARMUP + args.count {
            if i == SPAWN_WARMUP {
                start = Instant::now();
            }
            let call = host
                .command(PROGRAM)
                .call_id(format!("c_{i}"))
                .action("bench.true");
            let call = match &bounds {
                Some(bounds) => call.confinement(bounds.clone()),
                None => call,
            };
            if let Some(problem) = check_outcome(&call.run().await) {
                failures += 1;
                first_failure.get_or_insert(problem);
            }
        }
        Ok(finish(
            case,
            args.count,
            start.elapsed(),
            failures,
            first_failure,
        ))
    })
}

/// tokio::process on the same runtime: `spawn` + `wait`.
pub fn tokio_raw(args: &Args) -> Result<Measured, String> {
    let runtime = tokio_runtime()?;
    Ok(runtime.block_on(async {
        let mut failures = 0u64;
        let mut first_failure = None;
        let mut start = Instant::now();
        for i in 0..SPAWN_WARMUP + args.count {
            if i == SPAWN_WARMUP {
                start = Instant::now();
            }
            let mut command = tokio::process::Command::from(HelperCommand::new(PROGRAM).to_std());
            let status = match command.spawn() {
                Ok(mut child) => child.wait().await,
                Err(error) => Err(error),
            };
            if let Some(problem) = check_status(status) {
                failures += 1;
                first_failure.get_or_insert(problem);
            }
        }
        finish(
            "spawn-tokio-raw",
            args.count,
            start.elapsed(),
            failures,
            first_failure,
        )
    }))
}
