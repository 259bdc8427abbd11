//! The command line, parsed by hand: one command (`run`), a few flags.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use spillguard_std::core::Retain;

/// The help text, printed by `--help`.
pub const HELP: &str = "\
spillguard - run a helper process with bounded, counted stderr

Usage:
  spillguard run [OPTIONS] -- PROGRAM [ARGS...]
  spillguard --help

Runs PROGRAM (no shell) in its own process group, drains its stdout and
stderr continuously, and prints the call record as one line of JSON on
stdout, with `stderr_excerpt` (the retained stderr, truncation marker first,
clamped to the excerpt budget) and `stdout` (the helper's stdout, bounded).
The helper's own output never reaches this program's stdout or stderr.

Options:
  --retain tail|head|head-and-tail  which stderr bytes to keep (default: tail)
  --per-call-bytes N       stderr bytes retained (default: 16384)
  --excerpt-bytes N        stderr excerpt cap, marker included (default: 4096)
  --deadline-ms N          stop the helper N ms after it started (default: none)
  --grace-ms N             SIGTERM to SIGKILL, in ms (default: 5000)
  --drain-window-ms N      how long the streams may stay open after the helper
                           exited, in ms (default: 250)
  --config FILE            TOML file with a [helper_output] table; flags
                           override it
  --audit FILE             append lifecycle events to FILE as JSON lines
  -h, --help               print this help

Exit status: 0 when a record was printed, whatever the helper did (see
`state`, `exit_status` and `exit_signal`); 2 on bad input; 1 if the record
could not be written. SIGINT, SIGTERM and SIGHUP cancel the helper (TERM,
grace, KILL) and the record is still printed.
";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Print the help.
    Help,
    /// Run a helper.
    Run(RunArgs),
}

/// The flags and the program of `spillguard run`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunArgs {
    pub retain: Option<Retain>,
    pub per_call_bytes: Option<u64>,
    pub excerpt_bytes: Option<u64>,
    pub deadline_ms: Option<u64>,
    pub grace_ms: Option<u64>,
    pub drain_window_ms: Option<u64>,
    pub config: Option<PathBuf>,
    pub audit: Option<PathBuf>,
    pub program: OsString,
    pub args: Vec<OsString>,
}

/// Bad input on the command line; the message names the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn usage(message: impl Into<String>) -> UsageError {
    UsageError(message.into())
}

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Request, UsageError> {
    let mut args = args.into_iter();
    let Some(command) = args.next() else {
        return Err(usage("missing command `run` (see `spillguard --help`)"));
    };
    match command.to_str() {
        Some("run") => parse_run(args),
        Some("-h" | "--help" | "help") => Ok(Request::Help),
        _ => Err(usage(format!(
            "unknown command `{}` (expected `run`; see `spillguard --help`)",
            command.to_string_lossy()
        ))),
    }
}

fn parse_run(mut args: impl Iterator<Item = OsString>) -> Result<Request, UsageError> {
    let mut run = RunArgs::default();
    let mut program = None;
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str() else {
            program = Some(arg);
            break;
        };
        if text == "--" {
            program = args.next();
            break;
        }
        if text == "-h" || text == "--help" {
            return Ok(Request::Help);
        }
        if !text.starts_with('-') {
            program = Some(arg);
            break;
        }
        let (flag, inline) = match text.split_once('=') {
            Some((flag, value)) => (flag, Some(OsString::from(value))),
            None => (text, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| usage(format!("`{flag}` needs a value")))
        };
        match flag {
            "--retain" => run.retain = Some(retain(&value()?)?),
            "--per-call-bytes" => run.per_call_bytes = Some(number(flag, &value()?)?),
            "--excerpt-bytes" => run.excerpt_bytes = Some(number(flag, &value()?)?),
            "--deadline-ms" => run.deadline_ms = Some(number(flag, &value()?)?),
            "--grace-ms" => run.grace_ms = Some(number(flag, &value()?)?),
            "--drain-window-ms" => run.drain_window_ms = Some(number(flag, &value()?)?),
            "--config" => run.config = Some(value()?.into()),
            "--audit" => run.audit = Some(value()?.into()),
            _ => {
                return Err(usage(format!(
                    "unknown flag `{flag}` (see `spillguard --help`)"
                )));
            }
        }
    }
    let Some(program) = program.filter(|p| !p.is_empty()) else {
        return Err(usage(
            "missing program (usage: spillguard run [OPTIONS] -- PROGRAM [ARGS...])",
        ));
    };
    run.program = program;
    run.args = args.collect();
    Ok(Request::Run(run))
}

fn number(flag: &str, value: &OsString) -> Result<u64, UsageError> {
    value.to_str().and_then(|v| v.parse().ok()).ok_or_else(|| {
        usage(format!(
            "`{flag}`: `{}` is not a non-negative integer",
            value.to_string_lossy()
        ))
    })
}

fn retain(value: &OsString) -> Result<Retain, UsageError> {
    match value.to_str() {
        Some("tail") => Ok(Retain::Tail),
        Some("head") => Ok(Retain::Head),
        Some("head-and-tail" | "head_and_tail") => Ok(Retain::HeadAndTail),
        _ => Err(usage(format!(
            "`--retain`: unknown mode `{}` (expected tail, head or head-and-tail)",
            value.to_string_lossy()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Request, UsageError> {
        parse(args.iter().map(OsString::from))
    }

    fn run(args: &[&str]) -> RunArgs {
        match parse_str(args) {
            Ok(Request::Run(run)) => run,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_take_separate_or_inline_values() {
        let parsed = run(&[
            "run",
            "--retain",
            "head-and-tail",
            "--per-call-bytes=8192",
            "--excerpt-bytes",
            "1024",
            "--deadline-ms",
            "500",
            "--grace-ms=100",
            "--drain-window-ms",
            "50",
            "--config",
            "a.toml",
            "--audit=log.jsonl",
            "--",
            "sh",
            "-c",
            "exit 0",
        ]);
        assert_eq!(
            parsed,
            RunArgs {
                retain: Some(Retain::HeadAndTail),
                per_call_bytes: Some(8192),
                excerpt_bytes: Some(1024),
                deadline_ms: Some(500),
                grace_ms: Some(100),
                drain_window_ms: Some(50),
                config: Some("a.toml".into()),
                audit: Some("log.jsonl".into()),
                program: "sh".into(),
                args: vec!["-c".into(), "exit 0".into()],
            }
        );
    }

    #[test]
    fn the_program_may_follow_the_flags_without_a_separator() {
        let parsed = run(&["run", "--deadline-ms", "5", "ls", "--all"]);
        assert_eq!(parsed.program, "ls");
        assert_eq!(parsed.args, vec![OsString::from("--all")]);
    }

    #[test]
    fn bad_input_names_the_problem() {
        let err = |args: &[&str]| parse_str(args).unwrap_err().0;
        assert_eq!(err(&[]), "missing command `run` (see `spillguard --help`)");
        assert_eq!(
            err(&["go"]),
            "unknown command `go` (expected `run`; see `spillguard --help`)"
        );
        assert_eq!(
            err(&["run", "--verbose", "--", "ls"]),
            "unknown flag `--verbose` (see `spillguard --help`)"
        );
        assert_eq!(
            err(&["run", "--deadline-ms", "soon", "--", "ls"]),
            "`--deadline-ms`: `soon` is not a non-negative integer"
        );
        assert_eq!(
            err(&["run", "--grace-ms=-1", "--", "ls"]),
            "`--grace-ms`: `-1` is not a non-negative integer"
        );
        assert_eq!(err(&["run", "--audit"]), "`--audit` needs a value");
        assert_eq!(
            err(&["run", "--retain", "middle", "--", "ls"]),
            "`--retain`: unknown mode `middle` (expected tail, head or head-and-tail)"
        );
        assert_eq!(
            err(&["run", "--deadline-ms", "5"]),
            "missing program (usage: spillguard run [OPTIONS] -- PROGRAM [ARGS...])"
        );
        assert_eq!(
            err(&["run", "--"]),
            "missing program (usage: spillguard run [OPTIONS] -- PROGRAM [ARGS...])"
        );
    }

    #[test]
    fn help_is_recognised_anywhere_before_the_program() {
        assert_eq!(parse_str(&["--help"]), Ok(Request::Help));
        assert_eq!(parse_str(&["run", "-h"]), Ok(Request::Help));
        assert_eq!(
            run(&["run", "--", "prog", "--help"]).args,
            vec![OsString::from("--help")]
        );
    }
}
