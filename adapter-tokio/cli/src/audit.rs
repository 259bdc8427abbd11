//! `spillguard audit verify|sessions|activity FILE`: the audit log read
//! offline, with the core's verifier, comparison and views.
//!
//! The log is streamed, never held: it is read in chunks of
//! [`READ_CHUNK_BYTES`](spillguard_std::READ_CHUNK_BYTES) through a
//! [bounded](Verifier::bounded) verifier, and its records go one by one
//! into the core's folds ([`Comparison`], [`Sessions`], [`Activity`]), so
//! memory does not grow with the log and time is linear in its size.
//! `verify` and `sessions` read it once; `activity` reads it twice, as
//! nothing may be shown of a log that fails verification and its rows
//! are printed as they come: a first pass verifies (and measures the
//! columns), a second reads the same bytes again and prints. FILE, the
//! anchor file and the `--expect` file must be regular files.

mod checkpoint;
mod input;
mod keygen;

pub use keygen::keygen;

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;
use spillguard_std::KeySource;
use spillguard_std::proto::audit::{
    Activity, ActivityRow, Anchor, Comparison, Difference, ExpectedCall, FORMAT_VERSION, Key,
    NewerRecords, OLDEST_FORMAT_VERSION, Record, SessionRow, Sessions, Transition, Verdict,
    Verifier, VerifyOptions,
};

use self::input::{OpenError, open_regular};
use crate::args::{AnchorArg, AuditArgs, AuditView, CheckpointArgs, ProveArgs, UsageError};
use spillguard_std::proto::audit::note::Checkpoint;
use spillguard_std::{LogLeaves, ReadError, read_log};

/// Exit status: the output could not be written.
const OUTPUT_FAILED: u8 = 1;
/// Exit status: bad input.
const USAGE: u8 = 2;
/// Exit status: a record was modified (here: the log changed between
/// the two readings of `activity`).
const TAMPERED: u8 = 5;
/// Exit status: the log verified but differs from `--expect`.
const DIFFERS: u8 = 9;
/// Exit status: the chain verified, but the log is sealed (or the anchor
/// MACed) and no key was given, so the seals were not checked.
const SEALS_UNCHECKED: u8 = 10;
/// Exit status: `--checkpoint` does not open with `--public-key` (signed
/// by another key, or changed).
const BAD_CHECKPOINT: u8 = 11;

/// The exit status for a verdict (see the help text).
fn verdict_status(verdict: &Verdict) -> u8 {
    match verdict {
        Verdict::Ok { .. } => 0,
        Verdict::Unanchored { .. } => 3,
        Verdict::TornTail { .. } => 4,
        Verdict::Tampered { .. } => TAMPERED,
        Verdict::Malformed { .. } => 6,
        Verdict::WrongKey { .. } => 7,
        Verdict::BadAnchor => 8,
        // A verdict added later is not an ok one.
        _ => TAMPERED,
    }
}

/// Runs one `audit` command.
pub fn main(args: &AuditArgs) -> ExitCode {
    exit(run(args), &args.file)
}

/// `audit checkpoint`: the log's signed checkpoint on stdout.
pub fn checkpoint_main(args: &CheckpointArgs) -> ExitCode {
    let mut out = BufWriter::new(std::io::stdout().lock());
    let printed = checkpoint::checkpoint(
        &args.file,
        &args.key_file,
        args.audit_key_file.as_deref(),
        &mut out,
    )
    .and_then(|status| Ok(out.flush().map(|()| status)?));
    exit(printed, &args.file)
}

/// `audit prove`: an inclusion or consistency proof on stdout, as JSON.
pub fn prove_main(args: &ProveArgs) -> ExitCode {
    let proof = match (args.index, args.from) {
        (Some(index), _) => checkpoint::Proof::Inclusion(index),
        (None, Some(old)) => checkpoint::Proof::Consistency(old),
        (None, None) => {
            eprintln!("spillguard: audit prove needs --index N or --from M");
            return ExitCode::from(USAGE);
        }
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    let printed = checkpoint::prove(&args.file, proof, args.audit_key_file.as_deref(), &mut out)
        .and_then(|status| Ok(out.flush().map(|()| status)?));
    exit(printed, &args.file)
}

/// The exit of an `audit` command on `file` that ended with `result`.
fn exit(result: Result<u8, Failure>, file: &Path) -> ExitCode {
    match result {
        Ok(status) => ExitCode::from(status),
        Err(Failure::Usage(error)) => {
            eprintln!("spillguard: {error}");
            ExitCode::from(USAGE)
        }
        Err(Failure::Refused(verdict)) => {
            eprintln!(
                "spillguard: {}: not shown, the log failed verification: {verdict}",
                file.display()
            );
            ExitCode::from(verdict_status(&verdict))
        }
        Err(Failure::Changed(verdict)) => {
            eprintln!(
                "spillguard: {}: changed while it was read, the second reading gave: {verdict}",
                file.display()
            );
            let status = match verdict_status(&verdict) {
                0 | 3 | 4 => TAMPERED,
                status => status,
            };
            ExitCode::from(status)
        }
        Err(Failure::BadCheckpoint(why)) => {
            eprintln!("spillguard: {why}");
            ExitCode::from(BAD_CHECKPOINT)
        }
        Err(Failure::Output(error)) => {
            eprintln!("spillguard: cannot write the output: {error}");
            ExitCode::from(OUTPUT_FAILED)
        }
    }
}

enum Failure {
    Usage(UsageError),
    /// A checkpoint that does not open with the key given: signed by
    /// another key, or changed.
    BadCheckpoint(String),
    Refused(Verdict),
    /// `activity`'s second reading of the log did not give the first's
    /// verdict: the bytes changed in between.
    Changed(Verdict),
    Output(std::io::Error),
}

impl From<UsageError> for Failure {
    fn from(error: UsageError) -> Self {
        Failure::Usage(error)
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Failure::Output(error)
    }
}

fn usage(message: String) -> Failure {
    Failure::Usage(UsageError(message))
}

/// Opens a file `audit` reads; `name` says which in a read error
/// (`anchor file `), `role` in the refusal of a file that is not a
/// regular one (`an anchor file`).
fn open(path: &Path, name: &str, role: &str) -> Result<File, Failure> {
    open_regular(path).map_err(|error| match error {
        OpenError::Io(error) => usage(format!("cannot read {name}{}: {error}", path.display())),
        OpenError::NotRegular(kind) => usage(format!(
            "{name}{} is not a regular file ({kind}): {role} is a regular file",
            path.display()
        )),
    })
}

/// The whole text of a small file (an anchor, the expectations).
fn read_text(path: &Path, name: &str, role: &str) -> Result<String, Failure> {
    let mut text = String::new();
    open(path, name, role)?
        .read_to_string(&mut text)
        .map_err(|e| usage(format!("cannot read {name}{}: {e}", path.display())))?;
    Ok(text)
}

/// What a reading of the whole log found.
struct Reading {
    verdict: Verdict,
    /// A record was accepted without its entry: the log is sealed and no
    /// key was given.
    sealed: bool,
    /// Records of a newer format version than this release reads: their
    /// chain verified, their entries not read.
    newer: NewerRecords,
    /// Bytes read: the log's length when it was read.
    end: u64,
}

/// The log open for reading, and how to verify it.
struct Log<'a> {
    file: File,
    path: &'a Path,
    anchor: Option<&'a Anchor>,
    key: Option<&'a Key>,
}

impl Log<'_> {
    /// Reads the log (up to byte `limit`) through a bounded verifier,
    /// handing its bytes to `bytes` as they are read (see [`read_log`])
    /// and each record to `each`.
    fn read(
        &mut self,
        limit: Option<u64>,
        bytes: impl FnMut(&[u8]),
        mut each: impl FnMut(&Record) -> Result<(), Failure>,
    ) -> Result<Reading, Failure> {
        let options = VerifyOptions {
            anchor: self.anchor,
            key: self.key,
        };
        let mut verifier = Verifier::new(options).bounded(Verifier::WINDOW);
        let mut sealed = false;
        let end = read_log(&self.file, &mut verifier, limit, bytes, |record| {
            sealed |= record.entry.is_none() && !record.is_newer_format();
            each(&record)
        })
        .map_err(|error| match error {
            ReadError::Input(e) => usage(format!("cannot read {}: {e}", self.path.display())),
            ReadError::Record(failure) => failure,
        })?;
        let newer = verifier.newer_records();
        Ok(Reading {
            verdict: verifier.finish(),
            sealed,
            newer,
            end,
        })
    }

    /// The error of what needs the entries (a view, `--expect`) on a
    /// sealed log read without its key.
    fn entries_readable(&self, reading: &Reading) -> Result<(), Failure> {
        if self.key.is_none() && reading.sealed {
            return Err(usage(format!(
                "{} is sealed: give its key with --key-file",
                self.path.display()
            )));
        }
        Ok(())
    }

    /// A view leaves out the records of a newer format version: it says
    /// so on stderr, so that the rows are not taken for the whole log.
    fn say_unread(&self, reading: &Reading) {
        if let Some(line) = newer_line(reading.newer) {
            eprintln!(
                "spillguard: {}: {line}; the rows leave them out",
                self.path.display()
            );
        }
    }

    /// Without the key, a sealed record or the anchor's MAC is checked by
    /// the chain alone: the verdict must say what was left unchecked.
    fn seals_unchecked(&self, reading: &Reading) -> bool {
        self.key.is_none() && (reading.sealed || self.anchor.is_some_and(|a| a.mac.is_some()))
    }
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
            let text = read_text(path, "anchor file ", "an anchor file")?;
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
    // Opened before the log is read: a bad key or checkpoint is told first.
    let checkpoint = match &args.checkpoint {
        Some((file, public_key)) => Some(checkpoint::load(file, public_key)?),
        None => None,
    };
    let mut log = Log {
        file: open(&args.file, "", "an audit log")?,
        path: &args.file,
        anchor: anchor.as_ref(),
        key: key.as_ref(),
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    let status = match args.command {
        AuditView::Verify => verify(
            &mut log,
            &mut out,
            args,
            expected.as_deref(),
            checkpoint.as_ref(),
        )?,
        AuditView::Sessions => show_sessions(&mut log, &mut out, args.json)?,
        AuditView::Activity => show_activity(&mut log, &mut out, args.json)?,
    };
    out.flush()?;
    Ok(status)
}

/// `verify`: one reading, the comparison with `--expect` fed as it goes.
fn verify(
    log: &mut Log<'_>,
    out: &mut impl Write,
    args: &AuditArgs,
    expected: Option<&[ExpectedCall]>,
    signed: Option<&Checkpoint>,
) -> Result<u8, Failure> {
    let mut comparison = expected.map(Comparison::new);
    // The checkpoint's tree is built from the bytes of the same reading:
    // the log is read once, and nothing is kept of it but the tree's
    // subtree roots.
    let mut tree = signed.map(checkpoint::Tree::new);
    let mut leaves = LogLeaves::default();
    let bytes = |bytes: &[u8]| {
        if let Some(tree) = &mut tree {
            leaves.feed(bytes, &mut |leaf| tree.push(leaf));
        }
    };
    let reading = log.read(None, bytes, |record| {
        if let Some(comparison) = &mut comparison {
            comparison.handle_record(record);
        }
        Ok(())
    })?;
    if expected.is_some() {
        log.entries_readable(&reading)?;
    }
    let differences = comparison.map(Comparison::finish);
    // The checkpoint, once the log itself verified (a log refused has no
    // leaves to compare).
    let checkpoint = tree
        .filter(|_| !reading.verdict.is_rejected())
        .map(checkpoint::Tree::check);
    let checked = Checked {
        seals: !log.seals_unchecked(&reading),
        newer: reading.newer,
        expected: expected.zip(differences.as_deref()),
        checkpoint: checkpoint.as_ref(),
    };
    print_verdict(out, args, &reading.verdict, checked)
}

/// `sessions`: one reading; the rows (one per session) once it is over.
fn show_sessions(log: &mut Log<'_>, out: &mut impl Write, json: bool) -> Result<u8, Failure> {
    let mut view = Sessions::new();
    let reading = log.read(
        None,
        |_| {},
        |record| {
            view.handle_record(record);
            Ok(())
        },
    )?;
    log.entries_readable(&reading)?;
    if reading.verdict.is_rejected() {
        return Err(Failure::Refused(reading.verdict));
    }
    log.say_unread(&reading);
    view.handle_end();
    let rows: Vec<SessionRow> = std::iter::from_fn(|| view.poll_row()).collect();
    print_sessions(out, &rows, json)?;
    Ok(0)
}

/// `activity`: a first reading for the verdict (and the columns'
/// widths), then, if the log may be shown, a second of the same bytes
/// that prints each row as it is finished.
fn show_activity(log: &mut Log<'_>, out: &mut impl Write, json: bool) -> Result<u8, Failure> {
    let mut widths = (!json).then(|| ACTIVITY_HEADER.map(|h| h.chars().count()));
    let mut view = Activity::new();
    let first = log.read(
        None,
        |_| {},
        |record| {
            if let Some(widths) = &mut widths {
                view.handle_record(record);
                measure(&mut view, widths);
            }
            Ok(())
        },
    )?;
    if let Some(widths) = &mut widths {
        view.handle_end();
        measure(&mut view, widths);
    }
    log.entries_readable(&first)?;
    if first.verdict.is_rejected() {
        return Err(Failure::Refused(first.verdict));
    }
    log.say_unread(&first);
    if let Some(widths) = &widths {
        line(out, &ACTIVITY_HEADER, widths)?;
    }
    let mut view = Activity::new();
    let widths = widths.as_ref();
    let second = log.read(
        Some(first.end),
        |_| {},
        |record| {
            view.handle_record(record);
            print_activity(out, &mut view, widths)
        },
    )?;
    view.handle_end();
    print_activity(out, &mut view, widths)?;
    if second.verdict != first.verdict {
        out.flush()?;
        return Err(Failure::Changed(second.verdict));
    }
    Ok(0)
}

/// Reads `--expect`: JSON lines (or one JSON array), each a call record as
/// `spillguard run` prints it or an [`ExpectedCall`].
fn read_expectations(path: &std::path::Path) -> Result<Vec<ExpectedCall>, Failure> {
    let shown = path.display();
    let text = read_text(path, "--expect file ", "an --expect file")?;
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
    /// The records of a newer format version, left unread.
    newer: NewerRecords,
    /// The lifecycles of `--expect`, when given, and how the log differs
    /// from them.
    expected: Option<(&'a [ExpectedCall], &'a [Difference])>,
    /// What `--checkpoint` found, when given and the log verified.
    checkpoint: Option<&'a checkpoint::CheckpointCheck>,
}

/// The line that says what a verify without the key left unchecked.
const SEALS_NOT_CHECKED: &str = "seals not checked: the log is sealed or the anchor MACed, and \
     no --key-file was given; the chain alone was verified";

fn print_verdict(
    out: &mut impl Write,
    args: &AuditArgs,
    verdict: &Verdict,
    checked: Checked<'_>,
) -> Result<u8, Failure> {
    let differences = checked.expected.map(|(_, differences)| differences);
    if args.json {
        let json = VerifyJson {
            verdict,
            seals_checked: checked.seals,
            newer_records: (checked.newer.records > 0).then_some(checked.newer),
            differences,
            checkpoint: checked.checkpoint,
        };
        json_line(out, &json)?;
    } else {
        writeln!(out, "{verdict}")?;
        if let Verdict::Tampered {
            record_index: 0, ..
        } = verdict
        {
            writeln!(
                out,
                "(the first record is the file's start: a file that is not an audit log \
                 is refused the same way)"
            )?;
        }
        if !checked.seals {
            writeln!(out, "{SEALS_NOT_CHECKED}")?;
        }
        if let Some(line) = newer_line(checked.newer) {
            writeln!(out, "{line}")?;
        }
        if let Some(checkpoint) = checked.checkpoint {
            writeln!(out, "{}", checkpoint.line())?;
        }
        if let Some((expected, differences)) = checked.expected {
            if differences.is_empty() {
                let calls = match expected.len() {
                    1 => "1 call".to_owned(),
                    n => format!("{n} calls"),
                };
                writeln!(out, "expected lifecycle: no difference ({calls})")?;
            } else {
                writeln!(
                    out,
                    "expected lifecycle: {} difference(s)",
                    differences.len()
                )?;
                for difference in differences {
                    writeln!(out, "  {}", describe(difference))?;
                }
            }
        }
    }
    // A checkpoint the log does not match is tampering; one that vouches
    // for every record vouches for the end, as an anchor does.
    let status = match (checked.checkpoint, verdict) {
        (Some(c), _) if !c.matches => TAMPERED,
        (Some(c), Verdict::Unanchored { .. }) if c.size == c.records => 0,
        _ => verdict_status(verdict),
    };
    Ok(match status {
        0 if differences.is_some_and(|d| !d.is_empty()) => DIFFERS,
        0 if !checked.seals => SEALS_UNCHECKED,
        status => status,
    })
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
    /// Records of a newer format version than this release reads, when
    /// there are any: `{"records": N, "newest": V}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    newer_records: Option<NewerRecords>,
    #[serde(skip_serializing_if = "Option::is_none")]
    differences: Option<&'a [Difference]>,
    /// `--checkpoint`'s finding: `{"origin", "size", "records", "matches"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    checkpoint: Option<&'a checkpoint::CheckpointCheck>,
}

/// What is said of the records a newer release wrote, when there are any.
fn newer_line(newer: NewerRecords) -> Option<String> {
    let records = match newer.records {
        0 => return None,
        1 => "1 record".to_owned(),
        n => format!("{n} records"),
    };
    let readable = if OLDEST_FORMAT_VERSION == FORMAT_VERSION {
        format!("{FORMAT_VERSION}")
    } else {
        format!("{OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}")
    };
    Some(format!(
        "{records} of a newer format version (up to {}) than this release reads ({readable}): \
         their chain verified, their contents were not read; a later release reads them",
        newer.newest
    ))
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

/// One value as one line of JSON.
fn json_line(out: &mut impl Write, value: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)
}

fn print_sessions(out: &mut impl Write, rows: &[SessionRow], json: bool) -> Result<(), Failure> {
    if json {
        for row in rows {
            json_line(out, row)?;
        }
        return Ok(());
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
    let body: Vec<[String; 7]> = rows
        .iter()
        .map(|row| {
            let ended: Vec<String> = row
                .terminal
                .iter()
                .map(|c| format!("{} {}", c.state.as_str(), c.calls))
                .collect();
            [
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
    let mut widths = header.map(|h| h.chars().count());
    for row in &body {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    line(out, &header, &widths)?;
    for row in &body {
        line(out, row, &widths)?;
    }
    Ok(())
}

/// The columns of `activity`.
const ACTIVITY_HEADER: [&str; 9] = [
    "call", "session", "state", "action", "target", "exit", "stderr", "kept", "received",
];

/// Widens `widths` to the rows `view` has finished.
fn measure(view: &mut Activity, widths: &mut [usize; 9]) {
    while let Some(row) = view.poll_row() {
        for (width, cell) in widths.iter_mut().zip(activity_cells(&row)) {
            *width = (*width).max(cell.chars().count());
        }
    }
}

/// Prints the rows `view` has finished: columns of `widths`, or JSON lines.
fn print_activity(
    out: &mut impl Write,
    view: &mut Activity,
    widths: Option<&[usize; 9]>,
) -> Result<(), Failure> {
    while let Some(row) = view.poll_row() {
        match widths {
            Some(widths) => line(out, &activity_cells(&row), widths)?,
            None => json_line(out, &row)?,
        }
    }
    Ok(())
}

/// One row of `activity`'s columns.
fn activity_cells(row: &ActivityRow) -> [String; 9] {
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
    [
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
}

fn or_dash(value: Option<String>) -> String {
    value.unwrap_or_else(|| "-".to_owned())
}

/// One line of left-aligned columns of `widths` characters, separated by
/// two spaces, trailing spaces trimmed.
fn line<S: AsRef<str>>(out: &mut impl Write, cells: &[S], widths: &[usize]) -> std::io::Result<()> {
    let text: Vec<String> = cells
        .iter()
        .zip(widths)
        .map(|(cell, width)| format!("{:<width$}", cell.as_ref()))
        .collect();
    writeln!(out, "{}", text.join("  ").trim_end())
}
