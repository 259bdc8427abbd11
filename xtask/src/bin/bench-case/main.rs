//! `bench-case`: runs one case of `cargo xtask bench` and prints one line of
//! JSON with its measurements.
//!
//! Each case runs in a process of its own and ends by reading its own peak
//! resident set (`VmHWM` in `/proc/self/status`), so that no other case, and
//! not the task runner's memory before `exec`, counts toward it. The `idle`
//! case does nothing else: its peak is the baseline the others are compared
//! against.
//!
//! Before the line is printed, every descendant the case left is reaped (the
//! case is a child subreaper, so a helper's orphaned grandchild comes back
//! to it) and the helper's process group is checked to be gone. A case whose
//! checks failed prints `"ok":false` with the reasons and exits with 1.

mod audit;
mod flood;
mod grandchild;
mod line;
mod message;
mod spawn;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::process::{Pid, WaitOptions};
use spillguard_std::proto::Signal;

use crate::line::Line;

const USAGE: &str = "\
usage: bench-case CASE [--helper PATH] [--bytes N] [--hold-ms MS] [--drain-ms MS] [--count N] [--gap-ms MS]
                      [--spillguard PATH] [--log PATH] [--command C] [--calls N] [--records N]
                      [--max-message N]

cases:
  idle                   nothing; the peak RSS baseline
  flood-std              spillguard-std on a stderr flood of --bytes
  flood-std-raw          std read-and-discard loop (1 MiB pipe, 64 KiB buffer)
  flood-std-confined     flood-std with the tree in a control group of its
                         own (256 MiB memory, 64 processes)
  flood-std-output       std Command::output()
  flood-smol             spillguard-smol
  flood-smol-raw         async-process read-and-discard loop
  flood-tokio            spillguard-tokio (multi-threaded runtime)
  flood-tokio-raw        tokio::process read-and-discard loop
  grandchild-std         spillguard-std; the helper exits at once, its
                         grandchild holds stderr for --hold-ms
                         (--drain-ms sets HostOptions::post_exit_drain)
  grandchild-std-output  the same helper through std Command::output()
  spawn-std, spawn-smol, spawn-tokio
                         `true` --count times through the runtime's adapter
  spawn-std-raw, spawn-smol-raw, spawn-tokio-raw
                         `true` --count times: the runtime's spawn + wait
  spawn-std-confined, spawn-smol-confined, spawn-tokio-confined
                         `true` --count times through the adapter, bounded
                         (SPILLGUARD_BENCH_CONFINE picks one mechanism);
                         std's with --gap-ms, a pause before each call
                         that the clock leaves out
  spawn-std-uncontained, spawn-smol-uncontained, spawn-tokio-uncontained
                         the same without bounds, opted out of the tree's
                         control group
  audit-log              writes a clear audit log of --bytes at --log (and
                         its anchor): one real call of `--spillguard run
                         --audit`, its records written again per call id
  audit-read             `--spillguard audit --command --log` (verify,
                         sessions --json, activity --json, checkpoint or
                         verify --checkpoint): wall time and
                         the child's peak RSS (getrusage RUSAGE_CHILDREN),
                         checked against --calls and --records
  audit-append           --count calls' events appended to a new log at --log
                         with its anchor file, --command plain or checkpoint
                         (a signed checkpoint kept as it grows): the appends'
                         wall time
  mcp-message            one JSON-RPC message of --bytes through
                         `--spillguard stdio --mcp` with --max-message N:
                         the guard's peak RSS (getrusage RUSAGE_CHILDREN)

--helper is the spillguard-test-helper binary (flood and grandchild cases).
";

/// The flood helper writes this many bytes per write call.
pub const FLOOD_CHUNK: &str = "64K";
/// Read buffer of the raw loops, as the adapters' readers use.
pub const READ_BUFFER: usize = 64 * 1024;
/// Calls made before a spawn case starts its clock.
pub const SPAWN_WARMUP: u32 = 10;
/// How long the cleanup waits for a case's descendants to end.
const REAP_WITHIN: Duration = Duration::from_secs(5);

/// What the case is asked to do.
#[derive(Debug)]
pub struct Args {
    /// The spillguard-test-helper binary.
    pub helper: Option<PathBuf>,
    /// Flood size in bytes.
    pub bytes: u64,
    /// How long the grandchild holds stderr.
    pub hold_ms: u64,
    /// `HostOptions::post_exit_drain` for the grandchild case, if set.
    pub drain_ms: Option<u64>,
    /// Spawns per spawn case.
    pub count: u32,
    /// The pause before each counted call of a std spawn case, not
    /// clocked: calls that come apart, as a host's do.
    pub gap_ms: u64,
    /// The release `spillguard` binary (audit cases).
    pub spillguard: Option<PathBuf>,
    /// The audit log (audit cases).
    pub log: Option<PathBuf>,
    /// `verify`, `sessions`, `activity`, `checkpoint` or
    /// `verify-checkpoint` (`audit-read`); `plain` or `checkpoint`
    /// (`audit-append`).
    pub command: Option<String>,
    /// Calls in the log (`audit-read` checks the rows).
    pub calls: u64,
    /// Records in the log (`audit-read` checks the verdict).
    pub records: u64,
    /// `--max-message-bytes` of the guard (`mcp-message`).
    pub max_message: Option<u64>,
}

impl Args {
    /// The helper binary, which flood and grandchild cases need.
    pub fn helper(&self) -> Result<&PathBuf, String> {
        self.helper
            .as_ref()
            .ok_or_else(|| "this case needs --helper PATH".to_owned())
    }
}

/// What a case measured.
#[derive(Debug)]
pub struct Measured {
    /// The fields measured so far.
    pub line: Line,
    /// The helper's process group, checked to be gone at the end.
    pub pgid: Option<u32>,
    /// Checks that failed (a wrong byte count, an unexpected state, ...).
    pub problems: Vec<String>,
}

impl Measured {
    /// Nothing measured yet for `case`.
    pub fn new(case: &str) -> Self {
        Self {
            line: Line::new(case),
            pgid: None,
            problems: Vec::new(),
        }
    }

    /// Records a failed check unless `holds`.
    pub fn check(&mut self, holds: bool, problem: impl FnOnce() -> String) {
        if !holds {
            self.problems.push(problem());
        }
    }
}

/// Microseconds in `duration`, saturating.
pub fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let Some(case) = argv.next() else {
        eprint!("bench-case: no case given\n{USAGE}");
        return ExitCode::from(2);
    };
    if case == "--help" || case == "-h" {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match parse(argv) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("bench-case: {message}");
            return ExitCode::from(2);
        }
    };
    // Orphaned descendants (a helper's grandchild) come back to this
    // process, to be reaped here rather than left as zombies.
    let subreaper = if case == "idle" {
        Ok(())
    } else {
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
            .map_err(|error| format!("cannot become a child subreaper: {error}"))
    };
    let result = match case.as_str() {
        "idle" => Ok(Measured::new("idle")),
        "flood-std" => flood::std_spillguard(&args),
        "flood-std-raw" => flood::std_raw(&args),
        "flood-std-confined" => flood::std_confined(&args),
        "flood-std-output" => flood::std_output(&args),
        "flood-smol" => flood::smol_spillguard(&args),
        "flood-smol-raw" => flood::smol_raw(&args),
        "flood-tokio" => flood::tokio_spillguard(&args),
        "flood-tokio-raw" => flood::tokio_raw(&args),
        "grandchild-std" => grandchild::std_spillguard(&args),
        "grandchild-std-output" => grandchild::std_output(&args),
        "spawn-std" => spawn::std_spillguard(&args),
        "spawn-std-raw" => spawn::std_raw(&args),
        "spawn-smol" => spawn::smol_spillguard(&args),
        "spawn-smol-raw" => spawn::smol_raw(&args),
        "spawn-tokio" => spawn::tokio_spillguard(&args),
        "spawn-tokio-raw" => spawn::tokio_raw(&args),
        "spawn-std-confined" => spawn::std_confined(&args),
        "spawn-std-uncontained" => spawn::std_uncontained(&args),
        "spawn-smol-uncontained" => spawn::smol_uncontained(&args),
        "spawn-tokio-uncontained" => spawn::tokio_uncontained(&args),
        "spawn-smol-confined" => spawn::smol_confined(&args),
        "spawn-tokio-confined" => spawn::tokio_confined(&args),
        "audit-log" => audit::write_log(&args),
        "audit-read" => audit::read_log(&args),
        "audit-append" => audit::append_log(&args),
        "mcp-message" => message::run(&args),
        other => {
            eprint!("bench-case: unknown case `{other}`\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut measured = result.unwrap_or_else(|error| {
        let mut failed = Measured::new(&case);
        failed.problems.push(error);
        failed
    });
    if let Err(error) = subreaper {
        measured.problems.push(error);
    }
    if case != "idle" {
        clean_up(&mut measured);
    }
    match vm_hwm_kib() {
        Ok(kib) => {
            measured.line.number("vmhwm_kib", kib);
        }
        Err(error) => measured.problems.push(error),
    }
    let ok = measured.problems.is_empty();
    measured.line.boolean("ok", ok);
    if !ok {
        measured.line.string("error", &measured.problems.join("; "));
    }
    println!("{}", measured.line.finish());
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        helper: None,
        bytes: 1 << 30,
        hold_ms: 20_000,
        drain_ms: None,
        count: 1000,
        gap_ms: 0,
        spillguard: None,
        log: None,
        command: None,
        calls: 0,
        records: 0,
        max_message: None,
    };
    while let Some(flag) = argv.next() {
        let mut value = || argv.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |text: String| {
            text.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {text:?}"))
        };
        match flag.as_str() {
            "--helper" => args.helper = Some(PathBuf::from(value()?)),
            "--bytes" => args.bytes = number(value()?)?,
            "--hold-ms" => args.hold_ms = number(value()?)?,
            "--drain-ms" => args.drain_ms = Some(number(value()?)?),
            "--spillguard" => args.spillguard = Some(PathBuf::from(value()?)),
            "--log" => args.log = Some(PathBuf::from(value()?)),
            "--command" => args.command = Some(value()?),
            "--calls" => args.calls = number(value()?)?,
            "--records" => args.records = number(value()?)?,
            "--max-message" => args.max_message = Some(number(value()?)?),
            "--gap-ms" => args.gap_ms = number(value()?)?,
            "--count" => {
                args.count =
                    u32::try_from(number(value()?)?).map_err(|_| format!("{flag}: too large"))?;
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

/// Reaps every descendant the case left and checks the helper's group is
/// gone; anything still running after [`REAP_WITHIN`] is a failed case (and
/// is killed, so the bench leaves nothing behind either way).
fn clean_up(measured: &mut Measured) {
    match reap_descendants(REAP_WITHIN) {
        Ok(reaped) => {
            measured.line.number("descendants_reaped", reaped);
        }
        Err(running) => {
            measured.problems.push(format!(
                "descendants still running {} s after the case ended",
                REAP_WITHIN.as_secs()
            ));
            measured.line.number("descendants_reaped", running);
            if let Some(pgid) = measured.pgid {
                spillguard_std::os::signal_group(pgid, Signal::Kill);
            }
            let _ = reap_descendants(Duration::from_secs(2));
        }
    }
    if let Some(pgid) = measured.pgid {
        let gone = i32::try_from(pgid)
            .ok()
            .and_then(Pid::from_raw)
            .is_none_or(|pid| rustix::process::test_kill_process_group(pid) == Err(Errno::SRCH));
        measured.line.boolean("group_gone", gone);
        if !gone {
            measured
                .problems
                .push(format!("process group {pgid} still has processes"));
            spillguard_std::os::signal_group(pgid, Signal::Kill);
            let _ = reap_descendants(Duration::from_secs(2));
        }
    }
}

/// Reaps children (this process is a subreaper, so every orphaned
/// descendant is one) until none is left: `Ok(reaped)`. `Err(reaped)` when
/// some still run after `within`.
fn reap_descendants(within: Duration) -> Result<u64, u64> {
    let deadline = Instant::now() + within;
    let mut reaped = 0;
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some(_)) => reaped += 1,
            // Only the process's helper supervisor is left: it lives as
            // long as this process, by design, and ends with it.
            Ok(None) if !children_but_the_supervisor() => return Ok(reaped),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(None) => return Err(reaped),
            Err(Errno::INTR) => {}
            // ECHILD: no child left, running or not.
            Err(_) => return Ok(reaped),
        }
    }
}

/// Whether this process has a child other than the helper supervisor the
/// adapters start (`spillguard-supervisor`, which kills the helpers' groups
/// if this process dies, and exits when it does).
fn children_but_the_supervisor() -> bool {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        let dir = entry.path();
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid …`: the comm may hold spaces and parens.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if ppid != Some(me.as_str()) {
            return false;
        }
        let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        !cmdline
            .split(|&b| b == 0)
            .any(|arg| arg == b"spillguard-supervisor")
    })
}

/// This process's peak resident set size in KiB (`VmHWM`).
fn vm_hwm_kib() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|error| format!("cannot read /proc/self/status: {error}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse().ok())
        .ok_or_else(|| "no VmHWM line in /proc/self/status".to_owned())
}
