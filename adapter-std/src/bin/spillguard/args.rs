//! The command line, parsed by hand: two commands (`run`, `audit …`), a few
//! flags.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use spillguard_std::core::Retain;

/// The help text, printed by `--help`.
pub const HELP: &str = "\
spillguard - run a helper process with bounded, counted stderr

Usage:
  spillguard run [OPTIONS] -- PROGRAM [ARGS...]
  spillguard audit verify FILE [--anchor ANCHOR | --anchor-file F] [--key-file F]
                               [--expect FILE] [--json]
  spillguard audit sessions FILE [--key-file F] [--json]
  spillguard audit activity FILE [--key-file F] [--json]
  spillguard --help

`run` runs PROGRAM (no shell) in its own process group, drains its stdout
and stderr continuously, and prints the call record as one line of JSON on
stdout, with `stderr_excerpt` (the retained stderr, truncation marker first,
clamped to the excerpt budget) and `stdout` (the helper's stdout, bounded).
The helper's own output never reaches this program's stdout or stderr.

Options of `run`:
  --retain tail|head|head-and-tail  which stderr bytes to keep (default: tail)
  --per-call-bytes N       stderr bytes retained (default: 16384)
  --excerpt-bytes N        stderr excerpt cap, marker included (default: 4096)
  --deadline-ms N          stop the helper N ms after it started (default: none)
  --grace-ms N             SIGTERM to SIGKILL, in ms (default: 5000)
  --drain-window-ms N      how long the streams may stay open after the helper
                           exited, in ms (default: 250)
  --config FILE            TOML file with a [helper_output] table; flags
                           override it
  --audit FILE             append the lifecycle events to the hash-chained
                           audit log FILE (created if missing; a final record
                           torn by a crash is recovered; a log that fails
                           verification is refused). The attempt and the final
                           record are synced to disk as they are written.
  --audit-key-file F       seal the log's records with the key in F (64 hex
                           digits); needs --audit
  --anchor-out FILE        keep the log's anchor (checkpoint) in FILE, rewritten
                           after the final record; when FILE exists the log is
                           checked against it first; needs --audit
  -h, --help               print this help

Exit status of `run`: 0 when a record was printed, whatever the helper did
(see `state`, `exit_status` and `exit_signal`); 2 on bad input (including an
audit log that cannot be opened); 1 if the record could not be written.
SIGINT, SIGTERM and SIGHUP cancel the helper (TERM, grace, KILL) and the
record is still printed.

`audit verify` checks a log offline and prints the verdict as one line
(`--json`: one JSON object). Only an anchor (as `run --anchor-out` keeps
it) can vouch for the end of the log: without one the best verdict is
`unanchored`. With --expect FILE (JSON lines: call
records as `spillguard run` prints them, or expected lifecycles
{call_id, attempt, transitions, final_state}), the calls on record are
compared with those lifecycles and every difference is printed.
`audit sessions` (one line per session) and `audit activity` (one line per
call) print views computed from the log alone; --json prints one JSON object
per line. A sealed log needs its key (--key-file F).

Exit status of `audit`:
  0  ok: the log verified against the anchor (and matches --expect)
  1  the output could not be written
  2  bad input: usage, or a file, key or anchor that cannot be read
  3  unanchored: every record intact, but no anchor vouches for the end
  4  torn tail: the last record was cut by a crash
  5  tampered: a record was modified, moved, inserted, deleted or cut off
  6  malformed: an intact record that cannot be understood
  7  wrong key: the key given is not the log's
  8  bad anchor: the anchor's MAC does not match it
  9  the log verified, but differs from the lifecycles in --expect
`sessions` and `activity` exit 0 for a log that is ok, unanchored or torn at
the tail, and with the verdict's status otherwise (nothing is shown).
";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Print the help.
    Help,
    /// Run a helper.
    Run(RunArgs),
    /// Read an audit log.
    Audit(AuditArgs),
}

/// Which view of an audit log to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditCommand {
    /// The verdict (and the comparison with `--expect`).
    Verify,
    /// One line per session.
    Sessions,
    /// One line per call.
    Activity,
}

/// Where the anchor to verify against comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorArg {
    /// Its text, on the command line.
    Text(String),
    /// A file holding its text.
    File(PathBuf),
}

/// The flags of `spillguard audit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditArgs {
    pub command: AuditCommand,
    pub file: PathBuf,
    pub anchor: Option<AnchorArg>,
    pub key_file: Option<PathBuf>,
    pub expect: Option<PathBuf>,
    pub json: bool,
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
    pub audit_key_file: Option<PathBuf>,
    pub anchor_out: Option<PathBuf>,
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
        return Err(usage(
            "missing command `run` or `audit` (see `spillguard --help`)",
        ));
    };
    match command.to_str() {
        Some("run") => parse_run(args),
        Some("audit") => parse_audit(args),
        Some("-h" | "--help" | "help") => Ok(Request::Help),
        _ => Err(usage(format!(
            "unknown command `{}` (expected `run` or `audit`; see `spillguard --help`)",
            command.to_string_lossy()
        ))),
    }
}

fn parse_audit(mut args: impl Iterator<Item = OsString>) -> Result<Request, UsageError> {
    let command = match args.next().as_ref().and_then(|c| c.to_str()) {
        Some("verify") => AuditCommand::Verify,
        Some("sessions") => AuditCommand::Sessions,
        Some("activity") => AuditCommand::Activity,
        Some("-h" | "--help") => return Ok(Request::Help),
        Some(other) => {
            return Err(usage(format!(
                "unknown audit command `{other}` (expected verify, sessions or activity)"
            )));
        }
        None => {
            return Err(usage(
                "missing audit command (expected verify, sessions or activity)",
            ));
        }
    };
    let mut file: Option<PathBuf> = None;
    let (mut anchor, mut key_file, mut expect, mut json) = (None, None, None, false);
    while let Some(arg) = args.next() {
        let text = arg.to_str().unwrap_or_default();
        if !text.starts_with('-') || text == "-" {
            if file.is_some() {
                return Err(usage(format!(
                    "unexpected argument `{}` (one log file only)",
                    arg.to_string_lossy()
                )));
            }
            file = Some(arg.into());
            continue;
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
        let verify_only = |name: &str| {
            if command == AuditCommand::Verify {
                Ok(())
            } else {
                Err(usage(format!("`{name}` is a flag of `audit verify` only")))
            }
        };
        match flag {
            "--json" if inline.is_none() => json = true,
            "-h" | "--help" => return Ok(Request::Help),
            "--key-file" => key_file = Some(value()?.into()),
            "--anchor" | "--anchor-file" => {
                verify_only(flag)?;
                if anchor.is_some() {
                    return Err(usage("give one of `--anchor` and `--anchor-file`, once"));
                }
                let given = value()?;
                anchor = Some(if flag == "--anchor" {
                    AnchorArg::Text(given.to_string_lossy().into_owned())
                } else {
                    AnchorArg::File(given.into())
                });
            }
            "--expect" => {
                verify_only(flag)?;
                expect = Some(value()?.into());
            }
            _ => {
                return Err(usage(format!(
                    "unknown flag `{flag}` (see `spillguard --help`)"
                )));
            }
        }
    }
    let Some(file) = file else {
        return Err(usage(
            "missing the audit log file (see `spillguard --help`)",
        ));
    };
    Ok(Request::Audit(AuditArgs {
        command,
        file,
        anchor,
        key_file,
        expect,
        json,
    }))
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
            "--audit-key-file" => run.audit_key_file = Some(value()?.into()),
            "--anchor-out" => run.anchor_out = Some(value()?.into()),
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
    if run.audit.is_none() {
        for (given, flag) in [
            (run.audit_key_file.is_some(), "--audit-key-file"),
            (run.anchor_out.is_some(), "--anchor-out"),
        ] {
            if given {
                return Err(usage(format!("`{flag}` needs `--audit FILE`")));
            }
        }
    }
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
                audit_key_file: None,
                anchor_out: None,
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
        assert_eq!(
            err(&[]),
            "missing command `run` or `audit` (see `spillguard --help`)"
        );
        assert_eq!(
            err(&["go"]),
            "unknown command `go` (expected `run` or `audit`; see `spillguard --help`)"
        );
        assert_eq!(
            err(&["run", "--anchor-out", "a", "--", "ls"]),
            "`--anchor-out` needs `--audit FILE`"
        );
        assert_eq!(
            err(&["run", "--audit-key-file", "k", "--", "ls"]),
            "`--audit-key-file` needs `--audit FILE`"
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

    fn audit(args: &[&str]) -> AuditArgs {
        match parse_str(args) {
            Ok(Request::Audit(audit)) => audit,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn audit_commands_take_a_file_and_their_flags() {
        assert_eq!(
            audit(&[
                "audit",
                "verify",
                "log",
                "--anchor-file=a",
                "--key-file",
                "k",
                "--expect",
                "e.jsonl",
                "--json",
            ]),
            AuditArgs {
                command: AuditCommand::Verify,
                file: "log".into(),
                anchor: Some(AnchorArg::File("a".into())),
                key_file: Some("k".into()),
                expect: Some("e.jsonl".into()),
                json: true,
            }
        );
        let sessions = audit(&["audit", "sessions", "--json", "log"]);
        assert_eq!(
            (sessions.command, sessions.file, sessions.json),
            (AuditCommand::Sessions, "log".into(), true)
        );
        let verify = audit(&["audit", "verify", "log", "--anchor", "sga1.x"]);
        assert_eq!(verify.anchor, Some(AnchorArg::Text("sga1.x".into())));
    }

    #[test]
    fn bad_audit_input_names_the_problem() {
        let err = |args: &[&str]| parse_str(args).unwrap_err().0;
        assert_eq!(
            err(&["audit"]),
            "missing audit command (expected verify, sessions or activity)"
        );
        assert_eq!(
            err(&["audit", "check", "log"]),
            "unknown audit command `check` (expected verify, sessions or activity)"
        );
        assert_eq!(
            err(&["audit", "verify"]),
            "missing the audit log file (see `spillguard --help`)"
        );
        assert_eq!(
            err(&["audit", "verify", "a", "b"]),
            "unexpected argument `b` (one log file only)"
        );
        assert_eq!(
            err(&[
                "audit",
                "verify",
                "a",
                "--anchor",
                "x",
                "--anchor-file",
                "y"
            ]),
            "give one of `--anchor` and `--anchor-file`, once"
        );
        assert_eq!(
            err(&["audit", "activity", "a", "--expect", "e"]),
            "`--expect` is a flag of `audit verify` only"
        );
        assert_eq!(
            err(&["audit", "verify", "a", "--key-file"]),
            "`--key-file` needs a value"
        );
        assert_eq!(
            err(&["audit", "sessions", "a", "--jsn"]),
            "unknown flag `--jsn` (see `spillguard --help`)"
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
