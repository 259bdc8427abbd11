//! `cargo xtask fuzz`: runs every fuzz target of `core/fuzz` for a while
//! with the nightly toolchain and libFuzzer, and reports executions and
//! crashes per target.
//!
//! cargo-fuzz is installed first if it is missing (`cargo install
//! cargo-fuzz --locked`, into cargo's usual bin directory). Everything a
//! run writes goes under `target/fuzz/`: the build, the inputs libFuzzer
//! adds (`corpus/TARGET/`, read back by later runs) and any crash
//! (`artifacts/TARGET/`), and each target's log (`logs/TARGET.log`). The
//! committed seeds in `core/fuzz/corpus/TARGET/` are only read.

mod seeds;

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Instant, SystemTime};

/// The fuzz targets, in the order they run, with what each covers.
pub const TARGETS: [(&str, &str); 5] = [
    (
        "audit_verifier",
        "audit frame decoder and Verifier, any chunking; resume",
    ),
    ("audit_anchor", "Anchor text form"),
    ("config", "Config from TOML, and validate"),
    (
        "expected_lifecycle",
        "--expect JSON lines, ExpectedCall, compare",
    ),
    ("capture_render", "capture + render, any chunking"),
];

const USAGE: &str = "\
usage: cargo xtask fuzz [--seconds N] [--target NAME]... [--write-seeds]

  --seconds N     how long each target runs (default 60)
  --target NAME   run only this target (repeatable); targets:
                  audit_verifier, audit_anchor, config, expected_lifecycle,
                  capture_render
  --write-seeds   rewrite the seed corpus in core/fuzz/corpus/ from logs,
                  anchors, configurations and records made now, and stop
";

#[derive(Debug)]
struct Options {
    seconds: u64,
    targets: Vec<String>,
    write_seeds: bool,
}

impl Options {
    fn parse(args: Vec<OsString>) -> Result<Options, String> {
        let mut options = Options {
            seconds: 60,
            targets: Vec::new(),
            write_seeds: false,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let arg = arg.to_string_lossy().into_owned();
            let mut value = |name: &str| {
                args.next()
                    .map(|v| v.to_string_lossy().into_owned())
                    .ok_or_else(|| format!("{name} needs a value"))
            };
            match arg.as_str() {
                "--seconds" => {
                    let text = value("--seconds")?;
                    options.seconds = match text.parse() {
                        Ok(n) if n > 0 => n,
                        _ => return Err(format!("--seconds: `{text}` is not a positive number")),
                    };
                }
                "--target" => {
                    let name = value("--target")?;
                    if !TARGETS.iter().any(|(t, _)| *t == name) {
                        return Err(format!("--target: no fuzz target `{name}`"));
                    }
                    options.targets.push(name);
                }
                "--write-seeds" => options.write_seeds = true,
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        Ok(options)
    }
}

/// What one target's run found.
#[derive(Debug)]
struct Outcome {
    target: &'static str,
    executions: Option<u64>,
    /// libFuzzer's average executions per second.
    rate: Option<u64>,
    /// Wall time of `cargo fuzz run`, its (re)build check included.
    seconds: f64,
    crashes: Vec<PathBuf>,
    new_inputs: usize,
    exit_ok: bool,
}

/// Runs `cargo xtask fuzz ARGS`.
pub fn run(args: Vec<OsString>) -> ExitCode {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let options = match Options::parse(args) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("xtask fuzz: {error}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let root = workspace_root();
    if options.write_seeds {
        return match seeds::write_all(&root.join("core/fuzz/corpus")) {
            Ok(written) => {
                println!("xtask fuzz: wrote {written} seed files under core/fuzz/corpus/");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("xtask fuzz: writing the seeds failed: {error}");
                ExitCode::FAILURE
            }
        };
    }
    match fuzz(&root, &options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("xtask fuzz: {error}");
            ExitCode::from(2)
        }
    }
}

fn workspace_root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}

/// The rustup proxy `cargo` (not `$CARGO`, which is the stable toolchain's
/// own binary and knows no `+nightly`), run from the workspace root.
fn nightly_cargo(root: &Path) -> Command {
    let mut command = Command::new("cargo");
    command.arg("+nightly").current_dir(root);
    // Settings of the stable cargo running this task must not leak into
    // the nightly build.
    for var in [
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "CARGO_MANIFEST_DIR",
        "RUSTFLAGS",
    ] {
        command.env_remove(var);
    }
    command
}

/// Whether `cargo fuzz` runs; if not, installs it.
fn ensure_cargo_fuzz(root: &Path) -> Result<(), String> {
    let probe = Command::new("cargo")
        .args(["fuzz", "--version"])
        .current_dir(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .output();
    if let Ok(output) = &probe
        && output.status.success()
    {
        let version = String::from_utf8_lossy(&output.stdout);
        println!("xtask fuzz: using {}", version.trim());
        return Ok(());
    }
    let bin_dir = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|home| home.join("bin").display().to_string())
        .unwrap_or_else(|| "cargo's bin directory".to_owned());
    println!(
        "xtask fuzz: cargo-fuzz is not installed; installing it with \
         `cargo install cargo-fuzz --locked` (into {bin_dir})"
    );
    let started = Instant::now();
    let status = Command::new("cargo")
        .args(["install", "cargo-fuzz", "--locked"])
        .current_dir(root)
        .status()
        .map_err(|e| format!("cannot run cargo install: {e}"))?;
    if !status.success() {
        return Err(format!("installing cargo-fuzz failed ({status})"));
    }
    println!(
        "xtask fuzz: cargo-fuzz installed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Builds every target, runs the chosen ones, prints the table. `Ok(true)`
/// when no target crashed.
fn fuzz(root: &Path, options: &Options) -> Result<bool, String> {
    ensure_cargo_fuzz(root)?;
    let out = root.join("target/fuzz");
    let started = Instant::now();
    println!("xtask fuzz: building the fuzz targets (nightly, release, address sanitizer)");
    let status = nightly_cargo(root)
        .args(["fuzz", "build", "--fuzz-dir", "core/fuzz", "--target-dir"])
        .arg(&out)
        .status()
        .map_err(|e| format!("cannot run cargo +nightly fuzz build: {e}"))?;
    if !status.success() {
        return Err(format!("building the fuzz targets failed ({status})"));
    }
    let build_seconds = started.elapsed().as_secs_f64();
    println!("xtask fuzz: built in {build_seconds:.0} s");

    let mut outcomes = Vec::new();
    for (target, _) in TARGETS {
        if !options.targets.is_empty() && !options.targets.iter().any(|t| t == target) {
            continue;
        }
        println!("xtask fuzz: {target}: {} s", options.seconds);
        outcomes.push(run_target(root, &out, target, options.seconds)?);
    }

    println!();
    println!(
        "{:<20} {:>12} {:>10} {:>8} {:>11} {:>8}",
        "target", "executions", "exec/s", "wall s", "new inputs", "crashes"
    );
    for o in &outcomes {
        let executions = o.executions.map_or("?".to_owned(), |n| n.to_string());
        let rate = o.rate.map_or("?".to_owned(), |n| n.to_string());
        println!(
            "{:<20} {:>12} {:>10} {:>8.1} {:>11} {:>8}",
            o.target,
            executions,
            rate,
            o.seconds,
            o.new_inputs,
            o.crashes.len()
        );
    }
    let mut clean = true;
    for o in &outcomes {
        for crash in &o.crashes {
            println!("CRASH {}: {}", o.target, shown(root, crash));
        }
        if !o.exit_ok || !o.crashes.is_empty() || o.executions.is_none() {
            clean = false;
            println!(
                "FAILED {}: see {}",
                o.target,
                shown(root, &out.join("logs").join(format!("{}.log", o.target)))
            );
        }
    }
    println!(
        "xtask fuzz: {} target(s), {} crash(es); build {build_seconds:.0} s, total {:.0} s",
        outcomes.len(),
        outcomes.iter().map(|o| o.crashes.len()).sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
    Ok(clean)
}

/// Runs one target for `seconds`: new inputs go to `target/fuzz/corpus`,
/// the committed seeds are read from `core/fuzz/corpus`.
fn run_target(
    root: &Path,
    out: &Path,
    target: &'static str,
    seconds: u64,
) -> Result<Outcome, String> {
    let corpus = out.join("corpus").join(target);
    let artifacts = out.join("artifacts").join(target);
    let logs = out.join("logs");
    let seeds = root.join("core/fuzz/corpus").join(target);
    for dir in [&corpus, &artifacts, &logs, &seeds] {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let before = count_files(&corpus);
    let old_artifacts = files(&artifacts);
    let log_path = logs.join(format!("{target}.log"));
    let log = File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let log_err = log
        .try_clone()
        .map_err(|e| format!("{}: {e}", log_path.display()))?;
    let mut prefix = artifacts.clone().into_os_string();
    prefix.push("/");
    let started = Instant::now();
    let status = nightly_cargo(root)
        .args(["fuzz", "run", "--fuzz-dir", "core/fuzz", "--target-dir"])
        .arg(out)
        .arg(target)
        .arg(&corpus)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg("-print_final_stats=1")
        .arg("-timeout=20")
        .arg({
            let mut flag = OsString::from("-artifact_prefix=");
            flag.push(&prefix);
            flag
        })
        .stdout(log)
        .stderr(log_err)
        .status()
        .map_err(|e| format!("cannot run cargo +nightly fuzz run: {e}"))?;
    let elapsed = started.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    // New files, or files libFuzzer wrote again (a crash input found
    // before has the same name: its hash).
    let crashes = files(&artifacts)
        .into_iter()
        .filter(|file| !old_artifacts.contains(file))
        .map(|(path, _)| path)
        .collect();
    Ok(Outcome {
        target,
        executions: final_stat(&text, "number_of_executed_units").or_else(|| done_runs(&text)),
        rate: final_stat(&text, "average_exec_per_sec"),
        seconds: elapsed,
        crashes,
        new_inputs: count_files(&corpus).saturating_sub(before),
        exit_ok: status.success(),
    })
}

/// A figure of libFuzzer's final statistics (`-print_final_stats=1`):
/// the line `stat::NAME: N`.
fn final_stat(log: &str, name: &str) -> Option<u64> {
    log.lines().find_map(|line| {
        line.strip_prefix("stat::")?
            .strip_prefix(name)?
            .strip_prefix(':')?
            .trim()
            .parse()
            .ok()
    })
}

/// The `N` of libFuzzer's closing `Done N runs in S second(s)`.
fn done_runs(log: &str) -> Option<u64> {
    log.lines().find_map(|line| {
        line.strip_prefix("Done ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

/// The files in `dir` (crash, leak, timeout and out-of-memory inputs, in
/// an artifacts directory), with their modification times.
fn files(dir: &Path) -> Vec<(PathBuf, Option<SystemTime>)> {
    std::fs::read_dir(dir)
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|e| {
                    let meta = e.metadata().ok()?;
                    meta.is_file().then(|| (e.path(), meta.modified().ok()))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.filter_map(Result::ok).count())
}

fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}
