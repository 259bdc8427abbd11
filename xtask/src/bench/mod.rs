//! `cargo xtask bench`: the flood, grandchild and spawn benchmarks of
//! spillguard on std, smol and tokio, side by side in one run.
//!
//! Every case runs in a process of its own (`bench-case CASE`, built in
//! release mode with the test helper) that prints one line of JSON ending
//! with its own peak RSS (`VmHWM`), so that no other case, and not this
//! runner's memory, counts toward it. Rounds are interleaved (each round
//! runs every case once) so that a change in the machine's load falls on
//! all cases alike; figures are medians over the rounds, peaks the highest.
//!
//! Goals are printed next to what was measured; a missed goal does not
//! change the exit status (machines differ), a failed case does: wrong byte
//! counts in a record, an unexpected state, a process left behind.

mod jsonrpc;
mod line;
mod message;
mod otel;
mod plot;
mod recall;
mod redact;
mod report;
mod restart;
mod stdio;
mod svg;
mod verify;

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use self::line::Fields;

const USAGE: &str = "\
usage: cargo xtask bench [--gib N] [--quick] [--rounds K] [--only SECTIONS]
       cargo xtask bench --plot [PATH] [--rounds K]

  --gib N          flood size in GiB (default 1)
  --quick          small smoke run: 64 MiB flood, 1 round, `true` x100,
                   grandchild holding stderr 2 s, audit logs of 16 and
                   64 MiB
  --rounds K       rounds of the flood, grandchild, spawn and verify cases
                   (default 5; the output() grandchild case runs once)
  --only SECTIONS  comma-separated: flood, grandchild, spawn, stdio, redact,
                   verify, otel (default all; otel: 1,000 short calls through
                   `spillguard mcp` with OTLP/HTTP export to a local sink and
                   without, side by side, and the flood through `run` with
                   `--otel-file` and without; redact: rendering a 16 KiB window
                   with 0, 1 and 50 secrets, and recall per class on the
                   generated corpus and false alarms on core/tests/corpus,
                   spillguard beside detect-secrets when .ci/peers.sh
                   installed it; verify: the release `spillguard
                   audit verify`, `sessions --json` and `activity --json`
                   on clear logs of 256 MiB and 1 GiB as `run --audit`
                   writes them, kept in target/bench-audit/: wall time,
                   MB/s, peak RSS, the time ratio; stdio: 256 MiB through `spillguard stdio
                   -- cat` vs `cat`, quiet and while one thread per core
                   spins, 256 JSON-RPC messages of 1 MiB
                   through `stdio --mcp -- cat` vs `cat`, and, when the
                   MCP peers of .ci/peers.sh are installed, rmcp round
                   trips, `ping` round trips over socketpairs through
                   `stdio --mcp` vs direct (and with `--restart
                   on-failure --propagate-trace` vs without), the time
                   from a crashed server's exit to its successor's first
                   answer, the guard's peak RSS for one
                   message of 16 and 64 MiB (at the maximum and 1 KiB
                   over), and `spillguard mcp`'s time
                   from tools/call to the approval card: quiet, beside
                   the same flood outside spillguard, and while a helper
                   floods stderr)
  --plot [PATH]    instead of the tables: floods of 16, 64, 256 and 1024 MiB
                   through spillguard on std, smol and tokio and through
                   Command::output() (1 round unless --rounds), their peak
                   RSS printed and drawn as an SVG at PATH (default
                   xtask/assets/flood-peak-memory.svg)
";

/// Where `--plot` writes its chart unless told otherwise.
pub const DEFAULT_PLOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/flood-peak-memory.svg");

/// The flood cases: (case, runtime, what it is).
pub const FLOOD_CASES: [(&str, &str, &str); 8] = [
    ("flood-std", "std", "spillguard-std"),
    ("flood-std-confined", "std", "spillguard-std, cgroup"),
    ("flood-std-raw", "std", "raw read loop"),
    ("flood-std-output", "std", "Command::output()"),
    ("flood-smol", "smol", "spillguard-smol"),
    ("flood-smol-raw", "smol", "raw async-process loop"),
    ("flood-tokio", "tokio", "spillguard-tokio"),
    ("flood-tokio-raw", "tokio", "raw tokio::process loop"),
];

/// The spawn cases: (runtime, spillguard case, raw case).
pub const SPAWN_CASES: [(&str, &str, &str); 3] = [
    ("std", "spawn-std", "spawn-std-raw"),
    ("smol", "spawn-smol", "spawn-smol-raw"),
    ("tokio", "spawn-tokio", "spawn-tokio-raw"),
];

/// The spawn cases of calls that opted out of the tree's control group
/// (`contain_tree(false)`): (runtime, spillguard case, raw case).
pub const UNCONTAINED_SPAWN_CASES: [(&str, &str, &str); 3] = [
    ("std", "spawn-std-uncontained", "spawn-std-raw"),
    ("smol", "spawn-smol-uncontained", "spawn-smol-raw"),
    ("tokio", "spawn-tokio-uncontained", "spawn-tokio-raw"),
];

/// The confined spawn cases: (runtime, confined spillguard case, raw
/// case). Confined: a control group of its own with memory and process
/// limits, rlimits, and Landlock file rules.
pub const CONFINED_SPAWN_CASES: [(&str, &str, &str); 3] = [
    ("std", "spawn-std-confined", "spawn-std-raw"),
    ("smol", "spawn-smol-confined", "spawn-smol-raw"),
    ("tokio", "spawn-tokio-confined", "spawn-tokio-raw"),
];

/// The spawn cases of calls that come apart (std only): (runtime,
/// spillguard case key, raw case key); each runs its case with
/// `--gap-ms` [`APART_GAP_MS`] and at most [`APART_COUNT`] calls.
pub const APART_SPAWN_CASES: [(&str, &str, &str); 1] =
    [("std", "spawn-std-apart", "spawn-std-raw-apart")];

/// As [`APART_SPAWN_CASES`], without the tree's control group.
pub const APART_UNCONTAINED_SPAWN_CASES: [(&str, &str, &str); 1] =
    [("std", "spawn-std-uncontained-apart", "spawn-std-raw-apart")];

/// As [`APART_SPAWN_CASES`], bounded as `spawn-std-confined` is.
pub const APART_CONFINED_SPAWN_CASES: [(&str, &str, &str); 1] =
    [("std", "spawn-std-confined-apart", "spawn-std-raw-apart")];

/// The pause before each call of the cases that come apart.
pub const APART_GAP_MS: u64 = 20;

/// Calls per case that comes apart (fewer with a smaller `--count`).
pub const APART_COUNT: u32 = 200;

/// The drain window of the second spillguard grandchild run.
pub const SHORT_DRAIN_MS: u64 = 200;

/// What the command line asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// Flood size in bytes.
    pub bytes: u64,
    /// Rounds of every repeated case.
    pub rounds: u32,
    /// `true` calls per spawn case.
    pub spawn_count: u32,
    /// How long the grandchild holds stderr.
    pub hold_ms: u64,
    /// Run the flood cases.
    pub flood: bool,
    /// Run the grandchild cases.
    pub grandchild: bool,
    /// Run the spawn cases.
    pub spawn: bool,
    /// Run the stdio section.
    pub stdio: bool,
    /// Run the redaction section.
    pub redact: bool,
    /// Run the audit reading section.
    pub verify: bool,
    /// Run the OpenTelemetry export section.
    pub otel: bool,
    /// The small smoke run.
    pub quick: bool,
    /// Draw the peak-memory chart at this path instead of the tables.
    pub plot: Option<PathBuf>,
}

impl Options {
    fn parse(args: Vec<OsString>) -> Result<Self, String> {
        let mut options = Options {
            bytes: 1 << 30,
            rounds: 5,
            spawn_count: 1000,
            hold_ms: 20_000,
            flood: true,
            grandchild: true,
            spawn: true,
            stdio: true,
            redact: true,
            verify: true,
            otel: true,
            quick: false,
            plot: None,
        };
        let mut gib = None;
        let mut rounds = None;
        let mut quick = false;
        let mut args = args.into_iter().peekable();
        while let Some(flag) = args.next() {
            let flag = flag.to_string_lossy().into_owned();
            let mut value = || {
                args.next()
                    .map(|v| v.to_string_lossy().into_owned())
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            let positive = |text: String| match text.parse::<u32>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{flag}: expected a positive integer, got {text:?}")),
            };
            match flag.as_str() {
                "--gib" => gib = Some(positive(value()?)?),
                "--rounds" => rounds = Some(positive(value()?)?),
                "--quick" => quick = true,
                "--plot" => {
                    let path = args.next_if(|next| !next.to_string_lossy().starts_with("--"));
                    options.plot =
                        Some(path.map_or_else(|| PathBuf::from(DEFAULT_PLOT), PathBuf::from));
                }
                "--only" => {
                    let sections = value()?;
                    (
                        options.flood,
                        options.grandchild,
                        options.spawn,
                        options.stdio,
                        options.redact,
                        options.verify,
                        options.otel,
                    ) = (false, false, false, false, false, false, false);
                    for section in sections.split(',') {
                        match section.trim() {
                            "flood" => options.flood = true,
                            "grandchild" => options.grandchild = true,
                            "spawn" => options.spawn = true,
                            "stdio" => options.stdio = true,
                            "redact" => options.redact = true,
                            "verify" => options.verify = true,
                            "otel" => options.otel = true,
                            other => return Err(format!("--only: unknown section {other:?}")),
                        }
                    }
                }
                "--help" | "-h" => return Err(String::new()),
                _ => return Err(format!("unknown flag {flag}")),
            }
        }
        if quick {
            if gib.is_some() {
                return Err("--quick and --gib do not go together".into());
            }
            options.bytes = 64 << 20;
            options.rounds = 1;
            options.spawn_count = 100;
            options.hold_ms = 2_000;
            options.quick = true;
        }
        if let Some(gib) = gib {
            options.bytes = u64::from(gib) << 30;
        }
        if options.plot.is_some() {
            if quick || gib.is_some() {
                return Err("--plot sets its own flood sizes: no --quick or --gib".into());
            }
            options.rounds = 1;
        }
        if let Some(rounds) = rounds {
            options.rounds = rounds;
        }
        Ok(options)
    }
}

/// The two binaries the bench runs.
struct Binaries {
    case: PathBuf,
    helper: PathBuf,
    spillguard: PathBuf,
    bench_rmcp: Option<PathBuf>,
    /// The floor of a relay process, for the socketpair round trips.
    bare_relay: Option<PathBuf>,
    /// What redaction costs a view.
    bench_redact: Option<PathBuf>,
}

/// Every sample of every case, and what went wrong.
#[derive(Debug, Default)]
pub struct Results {
    /// (case key, round, fields)
    samples: Vec<(String, u32, Fields)>,
    /// One line per failed case run.
    pub failures: Vec<String>,
}

impl Results {
    /// The successful samples of `key`.
    pub fn of(&self, key: &str) -> Vec<&Fields> {
        self.samples
            .iter()
            .filter(|(k, _, fields)| k == key && fields.boolean("ok") == Some(true))
            .map(|(_, _, fields)| fields)
            .collect()
    }

    /// `figure` of `a` over `figure` of `b`, per round in which both ran
    /// successfully: the two ran back to back, so a change in the
    /// machine's load between rounds does not skew the ratio.
    pub fn paired_ratios(&self, a: &str, b: &str, figure: &str) -> Vec<f64> {
        let value = |key: &str, round: u32| {
            self.samples
                .iter()
                .find(|(k, r, fields)| {
                    k == key && *r == round && fields.boolean("ok") == Some(true)
                })
                .and_then(|(_, _, fields)| fields.number(figure))
        };
        let mut rounds: Vec<u32> = self.samples.iter().map(|(_, round, _)| *round).collect();
        rounds.sort_unstable();
        rounds.dedup();
        rounds
            .into_iter()
            .filter_map(|round| match (value(a, round)?, value(b, round)?) {
                (_, 0) => None,
                (a, b) => Some(a as f64 / b as f64),
            })
            .collect()
    }

    /// Every sample, in the order they were taken.
    pub fn all(&self) -> impl Iterator<Item = &Fields> {
        self.samples.iter().map(|(_, _, fields)| fields)
    }

    /// The samples of `key` that failed their checks.
    pub fn failed(&self, key: &str) -> usize {
        self.samples
            .iter()
            .filter(|(k, _, fields)| k == key && fields.boolean("ok") != Some(true))
            .count()
    }
}

/// Runs the task; see [`USAGE`].
pub fn run(args: Vec<OsString>) -> ExitCode {
    let options = match Options::parse(args) {
        Ok(options) => options,
        Err(message) if message.is_empty() => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprint!("xtask bench: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let binaries = match build() {
        Ok(binaries) => binaries,
        Err(message) => {
            eprintln!("xtask bench: {message}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(path) = &options.plot {
        return run_plot(&binaries, &options, path);
    }
    let load_before = load_average();
    let results = measure(&binaries, &options);
    println!(
        "machine: {} CPUs; load average (1, 5, 15 min) {load_before} before the cases, {} after",
        std::thread::available_parallelism().map_or(0, usize::from),
        load_average()
    );
    report::print(&results, &options, &shown(&binaries.helper));
    let mut failed = results.failures.len();
    if options.stdio {
        let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/peers/venv/bin/python");
        let rmcp = binaries.bench_rmcp.as_deref().filter(|_| peers.exists());
        if rmcp.is_none() {
            eprintln!("bench: no rmcp round trips: run .ci/peers.sh to install the MCP peers");
        }
        let mut measured = stdio::measure(&binaries.spillguard, rmcp, options.rounds, 2000);
        if peers.exists() {
            stdio::measure_elicitation(
                &mut measured,
                &binaries.spillguard,
                &peers,
                options.rounds * 4,
            );
        }
        stdio::print(&measured);
        failed += measured.failures.len();
        let time_server =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/peers/venv/bin/mcp-server-time");
        let server = time_server.exists().then_some(time_server.as_path());
        if server.is_none() {
            eprintln!(
                "bench: no socketpair round trips: run .ci/peers.sh to install the MCP peers"
            );
        }
        let rows = jsonrpc::measure(
            &binaries.spillguard,
            binaries.bare_relay.as_deref(),
            server,
            options.rounds,
        );
        jsonrpc::print(&rows);
        failed += rows.failures.len();
        let restarts = restart::measure(&binaries.spillguard, options.rounds);
        restart::print(&restarts);
        failed += restarts.failures.len();
        let memory = message::measure(&binaries, options.rounds.min(3));
        message::print(&memory);
        failed += memory.failures.len();
    }
    if options.redact {
        match binaries.bench_redact.as_deref().map(redact::measure) {
            Some(Ok(rows)) => redact::print(&rows),
            Some(Err(error)) => {
                println!("\n== redact\n  FAILED: {error}");
                failed += 1;
            }
            None => {
                println!("\n== redact\n  FAILED: cargo did not report bench-redact");
                failed += 1;
            }
        }
        match recall::measure() {
            Ok(measured) => {
                recall::print(&measured);
                // In CI the peer is installed: a missing one is a failure.
                if measured.skipped.is_some() && std::env::var("CI").as_deref() == Ok("true") {
                    failed += 1;
                }
            }
            Err(error) => {
                println!("\n== redact: recall\n  FAILED: {error}");
                failed += 1;
            }
        }
    }
    if options.otel {
        let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/peers/venv/bin/python");
        let python = peers.exists().then_some(peers.as_path());
        let measured = otel::measure(&binaries.spillguard, python, options.rounds, options.bytes);
        otel::print(&measured);
        failed += measured.failures.len();
    }
    if options.verify {
        let measured = verify::measure(&binaries, &options);
        verify::print(&measured, &options);
        failed += measured.results.failures.len();
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!("xtask bench: {failed} case run(s) failed");
        ExitCode::FAILURE
    }
}

/// `--plot`: the flood sweep, its figures, the SVG.
fn run_plot(binaries: &Binaries, options: &Options, path: &Path) -> ExitCode {
    let load_before = load_average();
    let results = plot::measure(binaries, options);
    println!(
        "machine: {} CPUs; load average (1, 5, 15 min) {load_before} before the cases, {} after",
        std::thread::available_parallelism().map_or(0, usize::from),
        load_average()
    );
    plot::print(&results, options);
    if let Err(message) = plot::write(&results, path) {
        eprintln!("xtask bench: {message}");
        return ExitCode::FAILURE;
    }
    println!("\nchart written to {}", shown(path));
    if results.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        for failure in &results.failures {
            eprintln!("  {failure}");
        }
        eprintln!("xtask bench: {} case run(s) failed", results.failures.len());
        ExitCode::FAILURE
    }
}

/// Builds `bench-case` and `spillguard-test-helper` in release mode and
/// returns where cargo put them.
fn build() -> Result<Binaries, String> {
    let mut build = crate::cargo()
        .args([
            "build",
            "--release",
            "--message-format=json-render-diagnostics",
            "--package",
            "xtask",
            "--bin",
            "bench-case",
            "--bin",
            "bench-rmcp",
            "--bin",
            "bare-relay",
            "--bin",
            "bench-redact",
            "--package",
            "spillguard-tests",
            "--bin",
            "spillguard-test-helper",
            "--package",
            "spillguard-cli",
            "--bin",
            "spillguard",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    let mut case = None;
    let mut helper = None;
    let mut spillguard = None;
    let mut bench_rmcp = None;
    let mut bare_relay = None;
    let mut bench_redact = None;
    if let Some(stdout) = build.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Some(path) = executable(&line) else {
                continue;
            };
            match path.file_name().and_then(|name| name.to_str()) {
                Some("bench-case") => case = Some(path),
                Some("spillguard-test-helper") => helper = Some(path),
                Some("spillguard") => spillguard = Some(path),
                Some("bench-rmcp") => bench_rmcp = Some(path),
                Some("bare-relay") => bare_relay = Some(path),
                Some("bench-redact") => bench_redact = Some(path),
                _ => {}
            }
        }
    }
    let status = build
        .wait()
        .map_err(|error| format!("cannot wait for cargo: {error}"))?;
    if !status.success() {
        return Err(format!("building the benchmark failed ({status})"));
    }
    match (case, helper, spillguard) {
        (Some(case), Some(helper), Some(spillguard)) => Ok(Binaries {
            case,
            helper,
            spillguard,
            bench_rmcp,
            bare_relay,
            bench_redact,
        }),
        _ => Err(
            "cargo did not report the bench-case, spillguard-test-helper and spillguard binaries"
                .into(),
        ),
    }
}

/// The one field read from cargo's JSON messages: a `compiler-artifact`
/// of a binary has an `executable`; every other message has none or null.
#[derive(Debug, Deserialize)]
struct Message {
    executable: Option<PathBuf>,
}

/// The `"executable"` path of one of cargo's JSON messages, if any.
fn executable(message: &str) -> Option<PathBuf> {
    serde_json::from_str::<Message>(message).ok()?.executable
}

/// Runs every selected case, rounds interleaved, printing progress on
/// stderr.
fn measure(binaries: &Binaries, options: &Options) -> Results {
    let mut results = Results::default();
    let bytes = ["--bytes".to_owned(), options.bytes.to_string()];
    let hold = ["--hold-ms".to_owned(), options.hold_ms.to_string()];
    let count = ["--count".to_owned(), options.spawn_count.to_string()];
    let gib = options.bytes.div_ceil(1 << 30);
    let flood_timeout = Duration::from_secs(60 + 60 * gib);
    let hold_timeout = Duration::from_millis(options.hold_ms) + Duration::from_secs(30);
    let spawn_timeout = Duration::from_secs(60) + Duration::from_millis(20) * options.spawn_count;
    for round in 1..=options.rounds {
        let mut run = |key: &str, case: &str, extra: &[String], timeout: Duration| {
            eprint!("bench round {round}/{}: {key} ... ", options.rounds);
            let sample = run_case(binaries, case, extra, timeout);
            results.record(key, round, sample);
        };
        if options.flood {
            run("idle", "idle", &[], Duration::from_secs(30));
            for (case, _, _) in FLOOD_CASES {
                run(case, case, &bytes, flood_timeout);
            }
        }
        if options.grandchild {
            run("grandchild-std", "grandchild-std", &hold, hold_timeout);
            let short = [
                &hold[..],
                &["--drain-ms".into(), SHORT_DRAIN_MS.to_string()],
            ]
            .concat();
            run(
                "grandchild-std-short",
                "grandchild-std",
                &short,
                hold_timeout,
            );
            if round == 1 {
                let case = "grandchild-std-output";
                run(case, case, &hold, hold_timeout);
            }
        }
        if options.spawn {
            for (_, spillguard, raw) in SPAWN_CASES {
                run(spillguard, spillguard, &count, spawn_timeout);
                run(raw, raw, &count, spawn_timeout);
            }
            for (_, case, _) in UNCONTAINED_SPAWN_CASES.iter().chain(&CONFINED_SPAWN_CASES) {
                run(case, case, &count, spawn_timeout);
            }
            let apart = [
                "--count".to_owned(),
                options.spawn_count.min(APART_COUNT).to_string(),
                "--gap-ms".to_owned(),
                APART_GAP_MS.to_string(),
            ];
            for (key, case) in [
                ("spawn-std-apart", "spawn-std"),
                ("spawn-std-raw-apart", "spawn-std-raw"),
                ("spawn-std-uncontained-apart", "spawn-std-uncontained"),
                ("spawn-std-confined-apart", "spawn-std-confined"),
            ] {
                run(key, case, &apart, spawn_timeout);
            }
        }
    }
    results
}

impl Results {
    /// Keeps a sample, or the reason there is none; says which on stderr.
    fn record(&mut self, key: &str, round: u32, sample: Result<Fields, String>) {
        match sample {
            Ok(fields) => {
                match fields.boolean("ok") {
                    Some(true) => match fields.number("wall_us") {
                        Some(wall) => eprintln!("{:.3} s", wall as f64 / 1e6),
                        None => eprintln!(
                            "peak RSS {:.1} MiB",
                            fields.number("vmhwm_kib").unwrap_or(0) as f64 / 1024.0
                        ),
                    },
                    _ => {
                        let error = fields.text("error").unwrap_or("no reason given");
                        eprintln!("FAILED");
                        self.failures.push(format!("{key}: {error}"));
                    }
                }
                self.samples.push((key.to_owned(), round, fields));
            }
            Err(error) => {
                eprintln!("FAILED");
                self.failures.push(format!("{key}: {error}"));
            }
        }
    }
}

/// Runs `bench-case CASE --helper HELPER EXTRA...` and reads its line. A
/// case that did not finish within `timeout` is killed.
fn run_case(
    binaries: &Binaries,
    case: &str,
    extra: &[String],
    timeout: Duration,
) -> Result<Fields, String> {
    let mut child = Command::new(&binaries.case)
        .arg(case)
        .arg("--helper")
        .arg(&binaries.helper)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", binaries.case.display()))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < timeout => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "no result within {} s; the case was killed (its helper may be left behind)",
                    timeout.as_secs()
                ));
            }
            Err(error) => return Err(format!("cannot wait for the case: {error}")),
        }
    };
    let mut output = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout
            .read_to_string(&mut output)
            .map_err(|error| format!("cannot read the case's output: {error}"))?;
    }
    let Some(last) = output.lines().rev().find(|line| !line.trim().is_empty()) else {
        return Err(format!("the case ended ({status}) without a result line"));
    };
    line::parse(last).map_err(|error| format!("bad result line ({error}): {last}"))
}

/// The first three fields of `/proc/loadavg`, or `unknown`: figures taken
/// on a busy machine are read with that in mind.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Median of `values` (the mean of the middle two for an even count).
pub fn median(mut values: Vec<u64>) -> Option<u64> {
    values.sort_unstable();
    let n = values.len();
    match n {
        0 => None,
        _ => Some((values[(n - 1) / 2] + values[n / 2]) / 2),
    }
}

/// The path shown for a binary: relative to the workspace when inside it.
pub fn shown(path: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|dir| path.strip_prefix(dir).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_binarys_artifact_message_names_an_executable() {
        let binary = r#"{"reason":"compiler-artifact","target":{"kind":["bin"]},"executable":"/t/release/a \"b\"\\c"}"#;
        assert_eq!(
            executable(binary),
            Some(PathBuf::from("/t/release/a \"b\"\\c"))
        );
        let library =
            r#"{"reason":"compiler-artifact","target":{"kind":["lib"]},"executable":null}"#;
        assert_eq!(executable(library), None);
        assert_eq!(
            executable(r#"{"reason":"build-finished","success":true}"#),
            None
        );
        assert_eq!(executable("warning: not JSON"), None);
    }
}
