//! Workspace tasks, run as `cargo xtask <task>`.

mod audit_fixtures;
mod bench;
mod fuzz;
mod release;

use std::ffi::OsString;
use std::process::{Command, ExitCode};

const HELP: &str = "\
usage: cargo xtask <task> [ARGS...]

tasks:
  runtimes [ARGS...]  build the scenario suite in release mode and run every
                      scenario (S1-S9) on every runtime with a driver; prints
                      a table (one row per scenario, one column per runtime)
                      and compares the call records across runtimes. ARGS go
                      to spillguard-scenarios: --runtime NAME, --scenario
                      NAME, --json, --list, --help. Exit status 0 when every
                      expectation held and the records agree, 1 otherwise.
  bench [ARGS...]     build the benchmark (bench-case, spillguard-test-helper)
                      in release mode and run each case in its own process:
                      a stderr flood (--gib N, default 1) through spillguard
                      on std, smol and tokio vs each runtime's raw read loop
                      (and std output()), a grandchild holding stderr after
                      the helper's exit, spawn overhead (`true` x1000), and
                      `spillguard audit verify|sessions|activity` on audit
                      logs of 256 MiB and 1 GiB (time, MB/s, peak RSS).
                      Prints tables and ratios against the goals. ARGS:
                      --gib N, --quick (64 MiB smoke run), --rounds K,
                      --only flood,grandchild,spawn,stdio,redact,verify,
                      --plot [PATH] (peak memory of 16 MiB-1 GiB floods
                      drawn as an SVG), --help.
                      Exit status 1 when a case failed (wrong counts in a
                      record, a process left behind), 0 otherwise, goals met
                      or not.
  fuzz [ARGS...]      run every fuzz target of core/fuzz (cargo-fuzz,
                      nightly toolchain; cargo-fuzz is installed with
                      `cargo install cargo-fuzz --locked` when missing) for
                      --seconds N each (default 60), seeded from
                      core/fuzz/corpus/; prints executions and crashes per
                      target. ARGS: --seconds N, --target NAME,
                      --write-seeds, --help. Exit status 1 on any crash.
  soak [ARGS...]      build the soak in release mode and run it on every
                      runtime: 1000 flood-and-cancel cycles, 1000 short
                      calls, 100 trees of 13 processes and 256 concurrent
                      calls under a 256 KiB budget, checking every record;
                      afterwards descriptors, threads, zombies and live
                      calls must be back to the baseline. Prints the
                      figures. ARGS go to spillguard-soak: --cycles N,
                      --trees N, --concurrent N, --runtime NAME, --help.
                      Exit status 0 when every check held.
  release X.Y.Z       bump the version in every manifest (the workspace's
                      Cargo.toml and its spillguard-* dependencies, both
                      npm package.json files, the package README's tarball
                      names) and date the changelog's Unreleased entry;
                      then `cargo update --workspace`, commit, and push
                      the tag vX.Y.Z (.github/workflows/release.yml
                      publishes it). `release --check`: every manifest
                      agrees; `release --check-tag vX.Y.Z`: and says the
                      tag's version. Exit status 1 on a disagreement.
  audit-fixtures [--exe PATH]
                      write the audit log fixtures of the record format
                      version this release writes (a plain and a sealed
                      log of run, stdio and mcp calls, their anchors and
                      key, what audit verify, sessions and activity said)
                      in adapter-tokio/cli/tests/fixtures/audit/vN/, and
                      that version's layout in core/tests/audit_formats/;
                      run once per format version (it refuses one whose
                      fixtures exist), after raising FORMAT_VERSION.
  help                this text
";

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let task = args.next();
    match task.as_ref().and_then(|t| t.to_str()) {
        Some("help" | "--help" | "-h") | None => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Some("runtimes") => run_tests_bin("spillguard-scenarios", args.collect()),
        Some("soak") => run_tests_bin("spillguard-soak", args.collect()),
        Some("bench") => bench::run(args.collect()),
        Some("fuzz") => fuzz::run(args.collect()),
        Some("release") => release::run(args.collect()),
        Some("audit-fixtures") => audit_fixtures::run(args.collect()),
        Some(other) => {
            eprintln!("xtask: unknown task `{other}` (try `cargo xtask help`)");
            ExitCode::from(2)
        }
    }
}

/// Builds the tests package's binaries in release mode (the scenario
/// runner, the soak and the test helper they spawn, side by side) and runs
/// `BIN ARGS`.
fn run_tests_bin(bin: &str, args: Vec<OsString>) -> ExitCode {
    let build = cargo()
        .args([
            "build",
            "--release",
            "--package",
            "spillguard-tests",
            "--bins",
        ])
        .status();
    match build {
        Ok(status) if status.success() => {}
        Ok(status) => {
            eprintln!("xtask: building the tests package failed ({status})");
            return exit_code(status.code());
        }
        Err(error) => {
            eprintln!("xtask: cannot run cargo: {error}");
            return ExitCode::from(2);
        }
    }
    let run = cargo()
        .args([
            "run",
            "--quiet",
            "--release",
            "--package",
            "spillguard-tests",
            "--bin",
            bin,
            "--",
        ])
        .args(args)
        .status();
    match run {
        Ok(status) => exit_code(status.code()),
        Err(error) => {
            eprintln!("xtask: cannot run cargo: {error}");
            ExitCode::from(2)
        }
    }
}

/// The cargo that runs this task (`$CARGO`), or `cargo` from `PATH`.
fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// The child's exit code; 1 when it was killed by a signal.
fn exit_code(code: Option<i32>) -> ExitCode {
    match code.map(u8::try_from) {
        Some(Ok(code)) => ExitCode::from(code),
        _ => ExitCode::FAILURE,
    }
}
