//! The `verify` section: the release `spillguard audit verify`, `sessions
//! --json` and `activity --json` on clear logs of 256 MiB and 1 GiB (16
//! and 64 MiB with `--quick`), as `spillguard run --audit` writes them.
//! Each log is written once (`bench-case audit-log`) into
//! `target/bench-audit/` and reused while its size and anchor are there.
//! `checkpoint` signs the log's tree head and `verify-checkpoint` checks
//! it (goals: a peak within 1.1x of `verify`'s, and at most 6.3 MiB on
//! the larger log, `verify`'s before checkpoints); the append rows time
//! `spillguard run --audit` (goal: at most 1.1x with
//! `--checkpoint-key-file`) and `ChainedFileAudit` appends, with and
//! without a signed checkpoint kept.
//! Each command runs as the only child of a `bench-case audit-read`,
//! which reads its `ru_maxrss`. Goals: time linear in the log's size (the
//! larger log's time over the smaller's is their size ratio, 4.0) and at
//! most 16 MiB peak for the larger log.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::report::{Spread, spread, verdict, with_spread};
use super::{Binaries, Options, Results, run_case, shown};

/// The commands measured, in the order they run (`checkpoint` keeps the
/// checkpoint that `verify-checkpoint` then checks).
pub const COMMANDS: [&str; 5] = [
    "verify",
    "sessions",
    "activity",
    "checkpoint",
    "verify-checkpoint",
];

/// Goal: the peak RSS of `checkpoint` and `verify-checkpoint` at most
/// this many times `verify`'s, on the larger log.
const CHECKPOINT_PEAK_GOAL: f64 = 1.1;

/// Goal: the peak RSS of `checkpoint` and `verify-checkpoint` on the
/// larger log at most what `verify` peaked at before checkpoints existed.
const CHECKPOINT_PEAK_GOAL_MIB: f64 = 6.3;

/// Goal: appending with a checkpoint kept costs at most this many times
/// appending without.
const APPEND_GOAL: f64 = 1.1;

/// Pairs (without, with a checkpoint) of each append row per round.
const APPEND_PAIRS: u32 = 3;

/// Calls appended per `audit-append` run.
fn append_calls(options: &Options) -> u32 {
    if options.quick { 200 } else { 2000 }
}

/// `spillguard run` processes per `audit-append run-*` run.
fn append_runs(options: &Options) -> u32 {
    if options.quick { 20 } else { 100 }
}

/// Goal: the peak RSS of every command on the larger log, at most.
const PEAK_GOAL_MIB: f64 = 16.0;
/// Goal: the larger log's time over the smaller's at most this much above
/// their size ratio (below it is better than linear: the start of a
/// process weighs more on the smaller log).
const LINEAR_TOLERANCE: f64 = 0.15;

/// The two log sizes.
pub fn sizes(options: &Options) -> [u64; 2] {
    if options.quick {
        [16 << 20, 64 << 20]
    } else {
        [256 << 20, 1 << 30]
    }
}

/// A log written for the bench.
#[derive(Debug, Clone)]
pub struct BenchLog {
    /// Its target size.
    pub size: u64,
    /// Where it is.
    pub path: PathBuf,
    /// Its real length.
    pub bytes: u64,
    /// Calls in it.
    pub calls: u64,
    /// Records in it.
    pub records: u64,
}

/// What the section measured.
#[derive(Debug, Default)]
pub struct Measured {
    /// The logs, smaller first.
    pub logs: Vec<BenchLog>,
    /// Every run.
    pub results: Results,
}

/// Where the logs are kept.
fn directory() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).join("target/bench-audit")
}

fn key(command: &str, size: u64) -> String {
    format!("audit-{command}-{}", size >> 20)
}

/// Writes the logs that are missing, then runs every command on each,
/// rounds interleaved.
pub fn measure(binaries: &Binaries, options: &Options) -> Measured {
    let mut measured = Measured::default();
    let spillguard = binaries.spillguard.display().to_string();
    for size in sizes(options) {
        match ensure_log(binaries, size) {
            Ok(log) => measured.logs.push(log),
            Err(error) => measured
                .results
                .failures
                .push(format!("audit log of {} MiB: {error}", size >> 20)),
        }
    }
    for round in 1..=options.rounds {
        // Appending is short and its figures noisy (a process per call,
        // syncs): several pairs per round, each pair back to back.
        let pairs = (0..APPEND_PAIRS).flat_map(|pair| {
            ["plain", "checkpoint", "run-plain", "run-checkpoint"].map(|mode| (pair, mode))
        });
        for (pair, mode) in pairs {
            let key = format!("audit-append-{mode}");
            let count = if mode.starts_with("run-") {
                append_runs(options)
            } else {
                append_calls(options)
            };
            let sample_round = (round - 1) * APPEND_PAIRS + pair + 1;
            eprint!(
                "bench round {round}/{}: {key} (pair {}/{APPEND_PAIRS}) ... ",
                options.rounds,
                pair + 1
            );
            let log = directory().join("append.log");
            let extra = [
                "--spillguard".to_owned(),
                spillguard.clone(),
                "--log".into(),
                log.display().to_string(),
                "--command".into(),
                mode.into(),
                "--count".into(),
                count.to_string(),
            ];
            let sample = run_case(binaries, "audit-append", &extra, Duration::from_secs(300));
            measured.results.record(&key, sample_round, sample);
        }
        for log in &measured.logs {
            for command in COMMANDS {
                let key = key(command, log.size);
                eprint!("bench round {round}/{}: {key} ... ", options.rounds);
                let extra = [
                    "--spillguard".to_owned(),
                    spillguard.clone(),
                    "--log".into(),
                    log.path.display().to_string(),
                    "--command".into(),
                    command.into(),
                    "--calls".into(),
                    log.calls.to_string(),
                    "--records".into(),
                    log.records.to_string(),
                ];
                let timeout = Duration::from_secs(60 + 240 * log.bytes.div_ceil(1 << 30));
                let sample = run_case(binaries, "audit-read", &extra, timeout);
                measured.results.record(&key, round, sample);
            }
        }
    }
    measured
}

/// The log of `size` in `target/bench-audit/`, written unless it is there
/// already (with its anchor, and the figures of its writing).
fn ensure_log(binaries: &Binaries, size: u64) -> Result<BenchLog, String> {
    let dir = directory();
    std::fs::create_dir_all(&dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    let path = dir.join(format!("clear-{}MiB.log", size >> 20));
    let figures = path.with_extension("json");
    let anchor = path.with_extension("anchor");
    let read = |written: &LogFigures| -> Option<BenchLog> {
        let bytes = std::fs::metadata(&path).ok()?.len();
        (anchor.exists() && written.log_bytes == bytes).then(|| BenchLog {
            size,
            path: path.clone(),
            bytes,
            calls: written.calls,
            records: written.records,
        })
    };
    if let Some(log) = std::fs::read_to_string(&figures)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .and_then(|written| read(&written))
    {
        eprintln!(
            "bench: reusing {} ({} calls, {} records)",
            shown(&log.path),
            log.calls,
            log.records
        );
        return Ok(log);
    }
    eprint!("bench: writing {} ... ", shown(&path));
    let extra = [
        "--spillguard".to_owned(),
        binaries.spillguard.display().to_string(),
        "--log".into(),
        path.display().to_string(),
        "--bytes".into(),
        size.to_string(),
    ];
    let fields = run_case(binaries, "audit-log", &extra, Duration::from_secs(900))?;
    if fields.boolean("ok") != Some(true) {
        eprintln!("FAILED");
        return Err(fields.text("error").unwrap_or("no reason given").to_owned());
    }
    eprintln!(
        "{:.1} s",
        fields.number("wall_us").unwrap_or(0) as f64 / 1e6
    );
    let written = LogFigures {
        log_bytes: fields.number("log_bytes").unwrap_or(0),
        calls: fields.number("calls").unwrap_or(0),
        records: fields.number("records").unwrap_or(0),
    };
    std::fs::write(&figures, written.to_line())
        .map_err(|error| format!("cannot write {}: {error}", figures.display()))?;
    read(&written).ok_or_else(|| "the log written is not the size reported".to_owned())
}

/// The figures of a log's writing, kept beside it (`clear-NMiB.json`, one
/// line: `{"log_bytes":N,"calls":N,"records":N}`) so that a later run can
/// reuse the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct LogFigures {
    /// The log's length when written.
    log_bytes: u64,
    /// Calls in it.
    calls: u64,
    /// Records in it.
    records: u64,
}

impl LogFigures {
    /// The figures as one line of JSON, newline included.
    fn to_line(self) -> String {
        let mut line = serde_json::to_string(&self).expect("three numbers always serialize");
        line.push('\n');
        line
    }
}

fn size(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

/// Prints the section.
pub fn print(measured: &Measured, options: &Options) {
    let [small, large] = sizes(options);
    println!(
        "\n== verify: `spillguard audit` (release) on clear logs as `spillguard run --audit` writes \
         them, {} round(s), rounds interleaved",
        options.rounds
    );
    for log in &measured.logs {
        println!(
            "   {}: {} bytes, {} calls of 7 records ({} records), {}",
            size(log.size),
            log.bytes,
            log.calls,
            log.records,
            shown(&log.path)
        );
    }
    println!(
        "   commands: verify --anchor-file A, sessions --json, activity --json (which reads the \
         log twice)"
    );
    println!(
        "   wall: median (min-max) of the rounds, spawn to reaped exit; MB/s (10^6 bytes) from \
         the median;"
    );
    println!("   peak: the highest ru_maxrss of the spillguard process over the rounds");
    println!();
    println!(
        "{:<18}{:>8}{:>24}{:>9}{:>10}{:>10}",
        "command", "log", "wall s", "MB/s", "peak MiB", "lines"
    );
    let results = &measured.results;
    let mut walls: Vec<(&str, u64, Spread)> = Vec::new();
    for command in COMMANDS {
        for log in &measured.logs {
            let key = key(command, log.size);
            let samples = results.of(&key);
            let failed = results.failed(&key);
            let Some(wall) = spread(&samples, |f| f.number("wall_us")) else {
                println!(
                    "{command:<18}{:>8}  no successful run ({failed} failed)",
                    size(log.size)
                );
                continue;
            };
            let mbs = log.bytes as f64 / 1e6 / (wall.median as f64 / 1e6);
            let peak = samples
                .iter()
                .filter_map(|f| f.number("child_maxrss_kib"))
                .max()
                .unwrap_or(0);
            let lines = samples
                .iter()
                .filter_map(|f| f.number("lines"))
                .max()
                .unwrap_or(0);
            let note = if failed > 0 {
                format!("  ({failed} run(s) FAILED)")
            } else {
                String::new()
            };
            println!(
                "{command:<18}{:>8}{:>24}{mbs:>9.1}{:>10.1}{lines:>10}{note}",
                size(log.size),
                with_spread(&wall, 1e-6, 3),
                peak as f64 / 1024.0,
            );
            walls.push((command, log.size, wall));
        }
    }
    println!(
        "\n== verify goals: {} over {} time (linear: {:.2}), peak for {}",
        size(large),
        size(small),
        large as f64 / small as f64,
        size(large)
    );
    let linear = large as f64 / small as f64;
    for command in COMMANDS {
        let wall = |size: u64| {
            walls
                .iter()
                .find(|(c, s, _)| *c == command && *s == size)
                .map(|(_, _, wall)| wall.median as f64)
        };
        let peak = highest_peak(results, command, large);
        if let (Some(small_wall), Some(large_wall)) = (wall(small), wall(large)) {
            let ratio = large_wall / small_wall;
            let bound = linear * (1.0 + LINEAR_TOLERANCE);
            println!(
                "{command:<18}time {} / {}           {:>8}   goal <= {bound:.1} (linear {linear:.1})   {}",
                size(large),
                size(small),
                format!("{ratio:.2}"),
                verdict(ratio <= bound),
            );
        }
        if let Some(peak) = peak {
            print_peak(command, large, peak, PEAK_GOAL_MIB, "");
        }
    }
    let verify_peak = highest_peak(results, "verify", large);
    for command in ["checkpoint", "verify-checkpoint"] {
        let peak = highest_peak(results, command, large);
        if let Some(peak) = peak {
            let goal = CHECKPOINT_PEAK_GOAL_MIB;
            print_peak(command, large, peak, goal, " (verify's before checkpoints)");
        }
        if let (Some(peak), Some(verify_peak)) = (peak, verify_peak) {
            let ratio = peak as f64 / verify_peak as f64;
            println!(
                "{command:<18}peak over verify's for {}   {:>8}   goal <= {CHECKPOINT_PEAK_GOAL:.1}x   {}",
                size(large),
                format!("{ratio:.2}x"),
                verdict(ratio <= CHECKPOINT_PEAK_GOAL),
            );
        }
    }
    print_append(results, options);
    if !results.failures.is_empty() {
        println!("\n== failed verify runs");
        for failure in &results.failures {
            println!("  {failure}");
        }
    }
}

/// The highest peak RSS (KiB) of `command`'s rounds on the log of `size`.
fn highest_peak(results: &Results, command: &str, size: u64) -> Option<u64> {
    results
        .of(&key(command, size))
        .iter()
        .filter_map(|f| f.number("child_maxrss_kib"))
        .max()
}

/// Prints `command`'s goal line for its peak RSS of `peak_kib` on the log
/// of `size`: at most `goal_mib`, said with `why`.
fn print_peak(command: &str, size: u64, peak_kib: u64, goal_mib: f64, why: &str) {
    let mib = peak_kib as f64 / 1024.0;
    println!(
        "{command:<18}peak RSS for {}              {:>8}   goal <= {goal_mib:.1} MiB{why}   {}",
        self::size(size),
        format!("{mib:.1} MiB"),
        verdict(mib <= goal_mib),
    );
}

/// Prints the append rows: µs per call without and with a checkpoint
/// kept, and their ratio (the median of the per-round ratios).
fn print_append(results: &Results, options: &Options) {
    println!(
        "\n== appending with a signed checkpoint kept (--checkpoint-key-file) and without, \
         an anchor file in both, default syncs; a new log per run; ratio: median of the \
         rounds' ratios"
    );
    // The goal is the flag's, on `spillguard run` (a process per call);
    // a long-lived writer (`mcp`, a library host) pays the same extra
    // per call (a signature, a checkpoint file renamed into place) over
    // less: its row has no goal.
    for (what, prefix, count, goal) in [
        (
            "`spillguard run --audit -- true`, a process per call",
            "audit-append-run-",
            append_runs(options),
            true,
        ),
        (
            "ChainedFileAudit, one open, 6 events per call",
            "audit-append-",
            append_calls(options),
            false,
        ),
    ] {
        let (plain, signed) = (format!("{prefix}plain"), format!("{prefix}checkpoint"));
        let per_call = |key: &str| {
            let walls = results
                .of(key)
                .iter()
                .filter_map(|f| f.number("wall_us"))
                .collect();
            super::median(walls).map(|wall| wall as f64 / f64::from(count))
        };
        let mut ratios = results.paired_ratios(&signed, &plain, "wall_us");
        ratios.sort_by(f64::total_cmp);
        let ratio = ratios.get(ratios.len() / 2).copied();
        match (per_call(&plain), per_call(&signed), ratio) {
            (Some(plain), Some(signed), Some(ratio)) if goal => println!(
                "   {what} ({count} calls): {plain:.1} / {signed:.1} us per call   {ratio:.3}x \
                 (goal <= {APPEND_GOAL:.1}: {})",
                verdict(ratio <= APPEND_GOAL)
            ),
            (Some(plain), Some(signed), Some(ratio)) => println!(
                "   {what} ({count} calls): {plain:.1} / {signed:.1} us per call   {ratio:.3}x \
                 (+{:.0} us per call: the checkpoint's signature and its rename into place)",
                signed - plain
            ),
            _ => println!("   {what}: no successful pair of runs"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logs_figures_file_reads_back_as_written() {
        let written = LogFigures {
            log_bytes: 268_435_712,
            calls: 52_429,
            records: 157_287,
        };
        let line = written.to_line();
        assert_eq!(
            line,
            "{\"log_bytes\":268435712,\"calls\":52429,\"records\":157287}\n"
        );
        let file = std::env::temp_dir().join(format!("xtask-figures-{}.json", std::process::id()));
        std::fs::write(&file, &line).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::remove_file(&file).unwrap();
        let read: LogFigures = serde_json::from_str(&text).unwrap();
        assert_eq!(read, written);
    }

    #[test]
    fn a_figures_file_missing_a_field_is_not_reused() {
        let read = serde_json::from_str::<LogFigures>("{\"log_bytes\":1,\"calls\":2}\n");
        assert!(read.is_err());
    }
}
