//! `spillguard audit verify|sessions|activity FILE`: the audit log read
//! offline, with the core's verifier, comparison and views.

use std::io::Write;
use std::process::ExitCode;

use serde::Serialize;
use spillguard_std::KeySource;
use spillguard_std::core::audit::{
    ActivityRow, Anchor, Difference, ExpectedCall, Record, SessionRow, Transition, Verdict,
    VerifyOptions, activity, compare, sessions, verify_and_read,
};

use crate::args::{AnchorArg, AuditArgs, AuditView, UsageError};

/// Exit status: the output could not be written.
const OUTPUT_FAILED: u8 = 1;
/// Exit status: bad input.
const USAGE: u8 = 2;
/// Exit status: the log verified but differs from `--expect`.
const DIFFERS: u8 = 9;
/// Exit status: the chain verified, but the log is sealed (or the anchor
/// MACed) and no key was given, so the seals were not checked.
const SEALS_UNCHECKED: u8 = 10;

/// The exit status for a verdict (see the help text).
fn verdict_status(verdict: &Verdict) -> u8 {
    match verdict {
        Verdict::Ok { .. } => 0,
        Verdict::Unanchored { .. } => 3,
        Verdict::TornTail { .. } => 4,
        Verdict::Tampered { .. } => 5,
        Verdict::Malformed { .. } => 6,
        Verdict::WrongKey { .. } => 7,
        Verdict::BadAnchor => 8,
        // A verdict added later is not an ok one.
        _ => 5,
    }
}

/// Runs one `audit` command.
pub fn main(args: &AuditArgs) -> ExitCode {
    match run(args) {
        Ok(status) => ExitCode::from(status),
        Err(Failure::Usage(error)) => {
            eprintln!("spillguard: {error}");
            ExitCode::from(USAGE)
        }
        Err(Failure::Refused(verdict)) => {
            eprintln!(
                "spillguard: {}: not shown, the log failed verification: {verdict}",
                args.file.display()
            );
            ExitCode::from(verdict_status(&verdict))
        }
        Err(Failure::Output(error)) => {
            eprintln!("spillguard: cannot write the output: {error}");
            ExitCode::from(OUTPUT_FAILED)
        }
    }
}

enum Failure {
    Usage(UsageError),
    Refused(Verdict),
    Output(std::io::Error),
}

impl From<UsageError> for Failure {
    fn from(error: UsageError) -> Self {
        Failure::Usage(error)
    }
}

fn usage(message: String) -> Failure {
    Failure::Usage(UsageError(message))
}

fn run(args: &AuditArgs) -> Result<u8, Failure> {
    let key = match &args.key_file {
        Some(path) => Some(
            KeySource::File(path.clone())
                .load()
                .map_err(|e| usage(e.to_string()))?,
        ),
        None => None,
    };
    let anchor = match &args.anchor {
        None => None,
        Some(AnchorArg::Text(text)) => Some(
            text.parse::<Anchor>()
                .map_err(|e| usage(format!("`--anchor`: {e}")))?,
        ),
        Some(AnchorArg::File(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("cannot read anchor file {}: {e}", path.display())))?;
            Some(
                text.parse::<Anchor>()
                    .map_err(|e| usage(format!("anchor file {}: {e}", path.display())))?,
            )
        }
    };
    let expected = match &args.expect {
        Some(path) => Some(read_expectations(path)?),
        None => None,
    };
    let bytes = std::fs::read(&args.file)
        .map_err(|e| usage(format!("cannot read {}: {e}", args.file.display())))?;
    let options = VerifyOptions {
        anchor: anchor.as_ref(),
        key: key.as_ref(),
    };
    let (verdict, records) = verify_and_read(&bytes, options);

    let needs_entries = args.command != AuditView::Verify || expected.is_some();
    if needs_entries && key.is_none() && records.iter().any(|r| r.entry.is_none()) {
        return Err(usage(format!(
            "{} is sealed: give its key with --key-file",
            args.file.display()
        )));
    }
    // Without the key, a sealed record or the anchor's MAC is checked by
    // the chain alone: the verdict must say what was left unchecked.
    let unchecked = key.is_none()
        && (records.iter().any(|r| r.entry.is_none())
            || anchor.as_ref().is_some_and(|a| a.mac.is_some()));
    let mut out = Vec::new();
    let status = match args.command {
        AuditView::Verify => {
            let checked = Checked {
                seals: !unchecked,
                expected: expected.as_deref(),
            };
            print_verdict(&mut out, args, &verdict, &records, checked)
        }
        AuditView::Sessions | AuditView::Activity => {
            if verdict.is_rejected() {
                return Err(Failure::Refused(verdict));
            }
            if args.command == AuditView::Sessions {
                print_sessions(&mut out, &sessions(&records), args.json);
            } else {
                print_activity(&mut out, &activity(&records), args.json);
            }
            0
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&out)
        .and_then(|()| stdout.flush())
        .map_err(Failure::Output)?;
    Ok(status)
}

/// Reads `--expect`: JSON lines (or one JSON array), each a call record as
/// `spillguard run` prints it or an [`ExpectedCall`].
fn read_expectations(path: &std::path::Path) -> Result<Vec<ExpectedCall>, Failure> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read --expect file {shown}: {e}")))?;
    let values: Vec<(usize, serde_json::Value)> = if text.trim_start().starts_with('[') {
        let all: Vec<serde_json::Value> = serde_json::from_str(&text)
            .map_err(|e| usage(format!("--expect file {shown}: {e}")))?;
        all.into_iter()
            .enumerate()
            .map(|(i, v)| (i + 1, v))
            .collect()
    } else {
        let mut values = Vec::new();
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value = serde_json::from_str(line)
                .map_err(|e| usage(format!("--expect file {shown}, line {}: {e}", number + 1)))?;
            values.push((number + 1, value));
        }
        values
    };
    values
        .into_iter()
        .map(|(number, value)| {
            ExpectedCall::from_json_value(value).map_err(|e| {
                usage(format!(
                    "--expect file {shown}, entry {number}: neither a call record nor an \
                     expected call: {e}"
                ))
            })
        })
        .collect()
}

/// What `verify` checked besides the chain.
struct Checked<'a> {
    /// Whether the seals (and the anchor's MAC) were opened with the key;
    /// `false` when the log is sealed or the anchor MACed and no key was
    /// given.
    seals: bool,
    /// The lifecycles of `--expect`, when given.
    expected: Option<&'a [ExpectedCall]>,
}

/// The line that says what a verify without the key left unchecked.
const SEALS_NOT_CHECKED: &str = "seals not checked: the log is sealed or the anchor MACed, and \
     no --key-file was given; the chain alone was verified";

fn print_verdict(
    out: &mut Vec<u8>,
    args: &AuditArgs,
    verdict: &Verdict,
    records: &[Record],
    checked: Checked<'_>,
) -> u8 {
    let expected = checked.expected;
    let differences = expected.map(|expected| compare(records, expected));
    if args.json {
        let json = VerifyJson {
            verdict,
            seals_checked: checked.seals,
            differences: differences.as_deref(),
        };
        if let Ok(line) = serde_json::to_string(&json) {
            let _ = writeln!(out, "{line}");
        }
    } else {
        let _ = writeln!(out, "{verdict}");
        if let Verdict::Tampered {
            record_index: 0, ..
        } = verdict
        {
            let _ = writeln!(
                out,
                "(the first record is the file's start: a file that is not an audit log \
                 is refused the same way)"
            );
        }
        if !checked.seals {
            let _ = writeln!(out, "{SEALS_NOT_CHECKED}");
        }
        if let (Some(differences), Some(expected)) = (&differences, expected) {
            if differences.is_empty() {
                let calls = match expected.len() {
                    1 => "1 call".to_owned(),
                    n => format!("{n} calls"),
                };
                let _ = writeln!(out, "expected lifecycle: no difference ({calls})");
            } else {
                let _ = writeln!(
                    out,
                    "expected lifecycle: {} difference(s)",
                    differences.len()
                );
                for difference in differences {
                    let _ = writeln!(out, "  {}", describe(difference));
                }
            }
        }
    }
    match verdict_status(verdict) {
        0 if differences.is_some_and(|d| !d.is_empty()) => DIFFERS,
        0 if !checked.seals => SEALS_UNCHECKED,
        status => status,
    }
}

/// `verify --json`: the verdict's own JSON form, with the differences
/// from `--expect` added when it was given.
#[derive(Serialize)]
struct VerifyJson<'a> {
    #[serde(flatten)]
    verdict: &'a Verdict,
    /// `false` when the log is sealed (or the anchor MACed) and no key was
    /// given: the chain alone was verified.
    seals_checked: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    differences: Option<&'a [Difference]>,
}

fn transition(t: Option<&Transition>) -> String {
    t.map_or("none".to_owned(), |t| {
        format!("{} -> {}", t.from.as_str(), t.to.as_str())
    })
}

/// One line for a difference.
fn describe(difference: &Difference) -> String {
    match difference {
        Difference::MissingCall { call_id } => format!("{call_id}: no event on record"),
        Difference::UnexpectedCall {
            call_id,
            first_record,
        } => format!("{call_id}: not expected (first on record at record {first_record})"),
        Difference::MissingAttempt { call_id } => format!("{call_id}: no attempt on record"),
        Difference::UnexpectedAttempt { call_id, record } => {
            format!("{call_id}: unexpected attempt at record {record}")
        }
        Difference::LateAttempt {
            call_id,
            attempt_record,
            transition: t,
            transition_record,
        } => format!(
            "{call_id}: the attempt (record {attempt_record}) comes after {} (record \
             {transition_record})",
            transition(Some(t))
        ),
        Difference::Transitions {
            call_id,
            position,
            expected,
            found,
        } => format!(
            "{call_id}: transition {position}: expected {}, found {}",
            transition(expected.as_ref()),
            transition(found.as_ref())
        ),
        Difference::MissingFinal { call_id } => format!("{call_id}: no final record"),
        Difference::FinalState {
            call_id,
            expected,
            found,
        } => format!(
            "{call_id}: final state: expected {}, found {}",
            expected.as_str(),
            found.as_str()
        ),
        Difference::AfterFinal { call_id, record } => {
            format!("{call_id}: an event at record {record} after the final record")
        }
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

fn print_json_lines<T: Serialize>(out: &mut Vec<u8>, rows: &[T]) {
    for row in rows {
        if let Ok(line) = serde_json::to_string(row) {
            let _ = writeln!(out, "{line}");
        }
    }
}

fn print_sessions(out: &mut Vec<u8>, rows: &[SessionRow], json: bool) {
    if json {
        return print_json_lines(out, rows);
    }
    let header = [
        "session",
        "calls",
        "unfinished",
        "ended",
        "first",
        "last",
        "records",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let ended: Vec<String> = row
                .terminal
                .iter()
                .map(|c| format!("{} {}", c.state.as_str(), c.calls))
                .collect();
            vec![
                row.session_id.clone(),
                row.calls.to_string(),
                row.unfinished.to_string(),
                or_dash(Some(ended.join(", ")).filter(|e| !e.is_empty())),
                or_dash(row.first_received_at.clone()),
                or_dash(row.last_received_at.clone()),
                format!("{}-{}", row.first_record, row.last_record),
            ]
        })
        .collect();
    columns(out, &header, &body);
}

fn print_activity(out: &mut Vec<u8>, rows: &[ActivityRow], json: bool) {
    if json {
        return print_json_lines(out, rows);
    }
    let header = [
        "call", "session", "state", "action", "target", "exit", "stderr", "kept", "received",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let exit = match (row.exit_status, row.exit_signal) {
                (Some(code), _) => code.to_string(),
                (None, Some(signal)) => format!("sig {signal}"),
                (None, None) => "-".to_owned(),
            };
            let state = if row.finished {
                row.state.as_str().to_owned()
            } else {
                format!("{} (no final record)", row.state.as_str())
            };
            vec![
                row.call_id.clone(),
                row.session_id.clone(),
                state,
                or_dash(row.action.clone()),
                or_dash(row.target.clone()),
                exit,
                or_dash(row.stderr_bytes_seen.map(|n| n.to_string())),
                or_dash(row.stderr_bytes_retained.map(|n| n.to_string())),
                or_dash(row.received_at.clone()),
            ]
        })
        .collect();
    columns(out, &header, &body);
}

fn or_dash(value: Option<String>) -> String {
    value.unwrap_or_else(|| "-".to_owned())
}

/// Left-aligned columns separated by two spaces, trailing spaces trimmed.
fn columns(out: &mut Vec<u8>, header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut line = |cells: Vec<&str>| {
        let text: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(out, "{}", text.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}
