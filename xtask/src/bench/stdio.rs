//! The `stdio` section: bulk forwarding through `spillguard stdio -- cat`
//! against `cat` alone, and JSON-RPC round trips through spillguard-tokio's
//! rmcp transport against rmcp's own `TokioChildProcess` (run by the
//! `bench-rmcp` case binary, which needs the MCP peers in `target/peers`).
//!
//! Bulk: the runner writes `bytes` into the program's stdin from one
//! thread and reads its stdout to the end on another, 64 KiB at a time,
//! and checks that every byte came back; throughput is bytes over wall
//! time. Rounds are interleaved (each runs both cases back to back); the
//! ratio is the median of the per-round ratios. The pair runs twice per
//! round: on a quiet machine, and loaded (1 GiB, while one thread per core
//! spins, as on a busy CI machine: there every hand-off between the
//! processes of the chain waits for a time slice, so the guard's share is
//! how many hand-offs it adds, not how much it copies).
//!
//! `spillguard mcp`: the time from a `tools/call` of a tool that requires
//! approval to its `elicitation/create` request, measured by the Python SDK
//! client (`adapter-tokio/cli/tests/peers/mcp_bridge.py --latency`) in blocks of 10 calls:
//! quiet, while the same 1 GiB flood runs outside spillguard (the CPU it
//! takes on this machine, no stderr captured), and while another helper
//! floods stderr through spillguard. The card must not wait for stderr, so
//! the three medians are printed side by side: on a 2-core machine the
//! flood's CPU moves both loaded rows, and only what the third adds over
//! the second is spillguard's.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::median;

/// Bytes per bulk run.
pub const BULK_BYTES: u64 = 256 << 20;

/// Bytes per loaded bulk run: a scheduler's noise over a run of a few
/// tenths of a second is as large as the guard's share.
const LOADED_BYTES: u64 = 1 << 30;

/// Goal: `spillguard stdio -- cat` moves at least this share of what `cat`
/// alone moves.
const BULK_GOAL: f64 = 0.9;

/// Goal: loaded, `spillguard stdio -- cat` moves at least this share of
/// what `cat` alone moves (takes at most twice its time).
const LOADED_GOAL: f64 = 0.5;

/// The bulk pair's conditions, each run every round: what the rows say,
/// the bytes per run, whether one thread per core spins meanwhile, and
/// the goal.
const CONDITIONS: [(&str, u64, bool, f64); 2] = [
    ("256 MiB", BULK_BYTES, false, BULK_GOAL),
    (
        "1 GiB, loaded (one spinning thread per core)",
        LOADED_BYTES,
        true,
        LOADED_GOAL,
    ),
];

/// Goal: a round trip through the spillguard transport costs at most this
/// many times one through `TokioChildProcess`.
const ROUND_TRIP_GOAL: f64 = 1.05;

/// Wall time in µs of one bulk run of `program args`, or why it failed.
fn bulk(program: &Path, args: &[&str], bytes: u64) -> Result<u64, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    let (Some(mut stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("no pipes".into());
    };
    let started = Instant::now();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = usize::try_from(left.min(chunk.len() as u64)).unwrap_or(chunk.len());
            if stdin.write_all(&chunk[..n]).is_err() {
                return;
            }
            left -= n as u64;
        }
    });
    let mut buf = vec![0; 64 * 1024];
    let mut got = 0_u64;
    loop {
        match stdout.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n as u64,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(format!("read failed: {error}")),
        }
    }
    let wall = started.elapsed();
    let _ = writer.join();
    let status = child
        .wait()
        .map_err(|error| format!("cannot wait: {error}"))?;
    if got != bytes || !status.success() {
        return Err(format!("{got} of {bytes} bytes came back, {status}"));
    }
    Ok(u64::try_from(wall.as_micros()).unwrap_or(u64::MAX))
}

/// What the section measured.
#[derive(Debug, Default)]
pub struct Measured {
    /// Per [`CONDITIONS`] entry: wall µs of `cat` alone and of
    /// `spillguard stdio -- cat`, per round.
    bulk: [(Vec<u64>, Vec<u64>); 2],
    /// (rmcp `TokioChildProcess`, spillguard transport) µs per round trip,
    /// per round.
    round_trips: Vec<(f64, f64)>,
    /// How many round trips each run made.
    round_trip_count: u32,
    /// (quiet, with a flood running) ms from `tools/call` to the
    /// elicitation request, one value per call.
    elicitation: Option<Elicitation>,
    /// What failed, one line each.
    pub failures: Vec<String>,
}

/// Runs the bulk cases (and the round trips, through `bench_rmcp` when
/// given) for `rounds` rounds, interleaved.
pub fn measure(spillguard: &Path, bench_rmcp: Option<&Path>, rounds: u32, count: u32) -> Measured {
    let mut measured = Measured {
        round_trip_count: count,
        ..Measured::default()
    };
    let cat = Path::new("cat");
    for round in 1..=rounds {
        for ((label, bytes, loaded, _), walls) in CONDITIONS.iter().zip(&mut measured.bulk) {
            let _spinning = loaded.then(Spinners::start);
            for (name, program, args, guarded) in [
                ("cat", cat, &[][..], false),
                (
                    "spillguard stdio -- cat",
                    spillguard,
                    &["stdio", "--", "cat"][..],
                    true,
                ),
            ] {
                eprint!("bench round {round}/{rounds}: {name} ({label}) ... ");
                match bulk(program, args, *bytes) {
                    Ok(wall) => {
                        eprintln!("{:.3} s", wall as f64 / 1e6);
                        if guarded { &mut walls.1 } else { &mut walls.0 }.push(wall);
                    }
                    Err(error) => {
                        eprintln!("FAILED");
                        measured.failures.push(format!("{name} ({label}): {error}"));
                    }
                }
            }
        }
        if let Some(binary) = bench_rmcp {
            eprint!("bench round {round}/{rounds}: rmcp round trips x{count} ... ");
            match round_trips(binary, count, round % 2 == 0) {
                Ok(pair) => {
                    eprintln!("{:.1} / {:.1} us", pair.0, pair.1);
                    measured.round_trips.push(pair);
                }
                Err(error) => {
                    eprintln!("FAILED");
                    measured.failures.push(format!("rmcp round trips: {error}"));
                }
            }
        }
    }
    measured
}

/// One spinning thread per core while it lives: the load of the loaded
/// bulk rows.
struct Spinners {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Spinners {
    fn start() -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One run of `bench-rmcp --count N` (the guarded transport first in even
/// rounds): its last line is
/// `child_process_us_per_call guarded_us_per_call`.
fn round_trips(binary: &Path, count: u32, guarded_first: bool) -> Result<(f64, f64), String> {
    let mut command = Command::new(binary);
    if guarded_first {
        command.arg("--guarded-first");
    }
    let output = command
        .args(["--count", &count.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", binary.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().last().unwrap_or_default();
    let mut words = line.split_whitespace().map(str::parse::<f64>);
    match (words.next(), words.next(), output.status.success()) {
        (Some(Ok(child)), Some(Ok(guarded)), true) => Ok((child, guarded)),
        _ => Err(format!("{}: {line}", output.status)),
    }
}

/// Times from `tools/call` to `elicitation/create`, in ms, one per call.
#[derive(Debug, Default)]
pub struct Elicitation {
    /// Nothing else running.
    quiet: Vec<f64>,
    /// The same flood running outside spillguard.
    busy: Vec<f64>,
    /// A helper flooding stderr through spillguard.
    noisy: Vec<f64>,
}

/// Measures `spillguard mcp`'s time to the approval card with the Python
/// SDK client `python`, `blocks` blocks of 10 calls in each of its three
/// conditions.
pub fn measure_elicitation(measured: &mut Measured, spillguard: &Path, python: &Path, blocks: u32) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    eprint!(
        "bench: spillguard mcp, tools/call -> elicitation x{} in each of 3 conditions ... ",
        blocks * 10
    );
    let output = Command::new(python)
        .arg(repo.join("adapter-tokio/cli/tests/peers/mcp_bridge.py"))
        .arg("--latency")
        .arg(spillguard)
        .arg(repo.join("adapter-tokio/cli/tests/peers/mcp_tools.toml"))
        .arg(blocks.to_string())
        .stderr(Stdio::inherit())
        .output();
    let parsed = output
        .map_err(|error| format!("cannot run {}: {error}", python.display()))
        .and_then(|output| {
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            let value: serde_json::Value = serde_json::from_str(text.trim())
                .map_err(|error| format!("{}: {error}: {text}", output.status))?;
            let times = |key: &str| -> Vec<f64> {
                value[key]
                    .as_array()
                    .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
                    .unwrap_or_default()
            };
            Ok(Elicitation {
                quiet: times("quiet_ms"),
                busy: times("busy_ms"),
                noisy: times("noisy_ms"),
            })
        });
    match parsed {
        Ok(times)
            if ![&times.quiet, &times.busy, &times.noisy]
                .iter()
                .any(|t| t.is_empty()) =>
        {
            eprintln!("done");
            measured.elicitation = Some(times);
        }
        Ok(_) => {
            eprintln!("FAILED");
            measured
                .failures
                .push("spillguard mcp latency: no times".into());
        }
        Err(error) => {
            eprintln!("FAILED");
            measured
                .failures
                .push(format!("spillguard mcp latency: {error}"));
        }
    }
}

/// The value at `share` (0 to 1) of the sorted `values`.
fn quantile(values: &[f64], share: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = ((sorted.len() as f64 - 1.0) * share).round() as usize;
    sorted.get(at).copied().unwrap_or(f64::NAN)
}

/// Prints the section.
pub fn print(measured: &Measured) {
    println!("\n== stdio: MCP stdio forwarding");
    for ((title, bytes, _, goal), (cats, guardeds)) in CONDITIONS.iter().zip(&measured.bulk) {
        let mib_s = |wall: u64| (*bytes as f64 / (1 << 20) as f64) / (wall as f64 / 1e6);
        let ratios: Vec<u64> = cats
            .iter()
            .zip(guardeds)
            .map(|(&cat, &guarded)| (cat as f64 / guarded as f64 * 1000.0) as u64)
            .collect();
        let (Some(cat), Some(guarded), Some(ratio)) = (
            median(cats.clone()),
            median(guardeds.clone()),
            median(ratios),
        ) else {
            continue;
        };
        let ratio = ratio as f64 / 1000.0;
        println!(
            "  bulk, {title}, in and out (median of {} rounds):",
            cats.len()
        );
        println!("    cat alone                  {:8.1} MiB/s", mib_s(cat));
        println!(
            "    spillguard stdio -- cat    {:8.1} MiB/s   {ratio:.3}x of cat (goal >= {goal:.2}: {})",
            mib_s(guarded),
            if ratio >= *goal { "met" } else { "missed" }
        );
    }
    if !measured.round_trips.is_empty() {
        let per_round: Vec<u64> = measured
            .round_trips
            .iter()
            .map(|(child, guarded)| (guarded / child * 1000.0) as u64)
            .collect();
        let child = median(
            measured
                .round_trips
                .iter()
                .map(|(c, _)| (c * 1000.0) as u64)
                .collect(),
        )
        .unwrap_or(0) as f64
            / 1000.0;
        let guarded = median(
            measured
                .round_trips
                .iter()
                .map(|(_, g)| (g * 1000.0) as u64)
                .collect(),
        )
        .unwrap_or(0) as f64
            / 1000.0;
        let ratio = median(per_round).unwrap_or(0) as f64 / 1000.0;
        println!(
            "  JSON-RPC round trips, {} `ping`s per run (median of {} rounds):",
            measured.round_trip_count,
            measured.round_trips.len()
        );
        println!("    rmcp TokioChildProcess     {child:8.1} us per round trip");
        println!(
            "    spillguard GuardedProcess  {guarded:8.1} us per round trip   {ratio:.3}x (goal <= {ROUND_TRIP_GOAL:.2}: {})",
            if ratio <= ROUND_TRIP_GOAL {
                "met"
            } else {
                "missed"
            }
        );
    }
    if let Some(Elicitation { quiet, busy, noisy }) = &measured.elicitation {
        let q50 = quantile(quiet, 0.5);
        println!(
            "  spillguard mcp, tools/call -> elicitation/create ({} calls per row, Python SDK client):",
            quiet.len()
        );
        for (label, times) in [
            ("quiet", quiet),
            ("flood outside spillguard", busy),
            ("a helper flooding stderr", noisy),
        ] {
            let median = quantile(times, 0.5);
            println!(
                "    {label:<26} {median:8.2} ms median   {:8.2} ms p90   {:.2}x of quiet",
                quantile(times, 0.9),
                median / q50
            );
        }
        let (b50, n50) = (quantile(busy, 0.5), quantile(noisy, 0.5));
        println!(
            "    spillguard's share of the flood's delay: {:+.2} ms ({:.2}x of the flood outside)",
            n50 - b50,
            n50 / b50
        );
    }
    for failure in &measured.failures {
        println!("  FAILED: {failure}");
    }
}
