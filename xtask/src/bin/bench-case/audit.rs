//! The `verify` section's cases: a clear audit log as `spillguard run
//! --audit` writes it, made once (`audit-log`), and the release
//! `spillguard audit verify|sessions|activity` reading it (`audit-read`),
//! its wall time and its peak resident set (`ru_maxrss` of
//! `getrusage(RUSAGE_CHILDREN)`: this process's only child is the
//! `spillguard` it waits for).

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use nix::sys::resource::{UsageWho, getrusage};
use spillguard_std::proto::AuditKind;
use spillguard_std::proto::audit::note::SignerKey;
use spillguard_std::proto::audit::{LogEntry, LogId, LogWriter, VerifyOptions, verify_and_read};
use spillguard_std::{AuditSink as _, ChainedFileAudit, ChainedFileOptions, CheckpointOptions};

use crate::{Args, Measured, micros};

/// The seed call's helper: a line on stderr and one on stdout, as a
/// short command prints them.
const SEED_SCRIPT: &str = "echo 'building target x86_64-unknown-linux-gnu' 1>&2; echo done";

fn spillguard(args: &Args) -> Result<&PathBuf, String> {
    args.spillguard
        .as_ref()
        .ok_or_else(|| "this case needs --spillguard PATH".to_owned())
}

fn log_path(args: &Args) -> Result<&PathBuf, String> {
    args.log
        .as_ref()
        .ok_or_else(|| "this case needs --log PATH".to_owned())
}

/// The anchor file kept next to a log.
pub fn anchor_path(log: &Path) -> PathBuf {
    log.with_extension("anchor")
}

/// The seven entries of one real call through `spillguard run --audit`
/// (the writer's `opened`, the call's six events), logged next to `log`
/// and read back.
fn seed_entries(spillguard: &Path, log: &Path) -> Result<Vec<LogEntry>, String> {
    let seed = log.with_extension("seed");
    let seed_anchor = log.with_extension("seed-anchor");
    let _ = std::fs::remove_file(&seed);
    let output = Command::new(spillguard)
        .arg("run")
        .arg("--audit")
        .arg(&seed)
        .arg("--anchor-out")
        .arg(&seed_anchor)
        .args(["--", "sh", "-c", SEED_SCRIPT])
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", spillguard.display()))?;
    if !output.status.success() {
        return Err(format!("the seed call ended with {}", output.status));
    }
    let bytes = std::fs::read(&seed).map_err(|error| format!("cannot read the seed: {error}"))?;
    let (verdict, records) = verify_and_read(&bytes, VerifyOptions::default());
    let entries: Vec<LogEntry> = records.into_iter().filter_map(|r| r.entry).collect();
    let _ = std::fs::remove_file(&seed);
    let _ = std::fs::remove_file(&seed_anchor);
    if verdict.is_rejected() || entries.len() != 7 {
        return Err(format!(
            "the seed log: {verdict}, {} entries (7 expected)",
            entries.len()
        ));
    }
    Ok(entries)
}

/// `audit-append --command run-plain|run-checkpoint`: `--count` calls of
/// `spillguard run --audit LOG --anchor-out ANCHOR -- true`, each a
/// process that opens the log, makes its call and appends its records,
/// with `--checkpoint-key-file` in `run-checkpoint`. The wall time of all.
fn append_by_runs(
    args: &Args,
    spillguard: &Path,
    log: &Path,
    mode: &str,
) -> Result<Measured, String> {
    let key_file = match mode {
        "plain" => None,
        "checkpoint" => Some(bench_keys(spillguard, log)?.0),
        other => return Err(format!("unknown append mode run-{other}")),
    };
    let started = Instant::now();
    for _ in 0..args.count {
        let mut run = Command::new(spillguard);
        run.arg("run")
            .arg("--audit")
            .arg(log)
            .arg("--anchor-out")
            .arg(log.with_extension("anchor"));
        if let Some(key_file) = &key_file {
            run.arg("--checkpoint-key-file")
                .arg(key_file)
                .arg("--checkpoint-out")
                .arg(log.with_extension("checkpoint"));
        }
        let status = run
            .args(["--", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|error| format!("cannot run {}: {error}", spillguard.display()))?;
        if !status.success() {
            return Err(format!("spillguard run ended with {status}"));
        }
    }
    let wall = started.elapsed();
    let mut measured = Measured::new(&format!("audit-append-run-{mode}"));
    measured
        .line
        .number("wall_us", micros(wall))
        .number("calls", u64::from(args.count));
    Ok(measured)
}

/// `entry` with the call id `call_id` (its final record's too).
fn with_call_id(entry: &LogEntry, call_id: &str) -> LogEntry {
    let mut entry = entry.clone();
    if let LogEntry::Call(event) = &mut entry {
        event.call_id = call_id.to_owned();
        if let AuditKind::Final(record) = &mut event.kind {
            record.call_id = call_id.to_owned();
        }
    }
    entry
}

/// `audit-append`: `--count` calls' six events appended through
/// `ChainedFileAudit` to a new log at `--log` with its anchor file, as
/// `spillguard run --audit --anchor-out` appends them (default syncs),
/// and with `--command checkpoint` a signed checkpoint kept as it grows
/// (`--checkpoint-key-file`); `--command plain` keeps none. The wall
/// time of the appends, open excluded.
pub fn append_log(args: &Args) -> Result<Measured, String> {
    let spillguard = spillguard(args)?;
    let log = log_path(args)?;
    let command = args.command.as_deref().unwrap_or("plain");
    let anchor = log.with_extension("anchor");
    let checkpoint = log.with_extension("checkpoint");
    let mut tree = checkpoint.clone().into_os_string();
    tree.push(".tree");
    for path in [log, &anchor, &checkpoint, Path::new(&tree)] {
        let _ = std::fs::remove_file(path);
    }
    if let Some(mode) = command.strip_prefix("run-") {
        return append_by_runs(args, spillguard, log, mode);
    }
    let entries = seed_entries(spillguard, log)?;
    let signing = match command {
        "plain" => None,
        "checkpoint" => {
            let (signer, _) = bench_keys(spillguard, log)?;
            let text = std::fs::read_to_string(&signer)
                .map_err(|error| format!("cannot read {}: {error}", signer.display()))?;
            let key = SignerKey::parse(&text).map_err(|error| error.to_string())?;
            Some(CheckpointOptions::new(key, &checkpoint))
        }
        other => {
            return Err(format!(
                "unknown append mode {other:?} (plain or checkpoint)"
            ));
        }
    };
    let audit = ChainedFileAudit::open(
        log,
        ChainedFileOptions {
            anchor_file: Some(anchor),
            checkpoint: signing,
            ..ChainedFileOptions::default()
        },
    )
    .map_err(|error| error.to_string())?;
    let started = Instant::now();
    for call in 0..u64::from(args.count) {
        let call_id = format!("c_{call:016x}");
        for entry in &entries {
            if let LogEntry::Call(event) = with_call_id(entry, &call_id) {
                audit
                    .write(&event)
                    .map_err(|error| format!("cannot append: {error}"))?;
            }
        }
    }
    let wall = started.elapsed();
    let records = audit.records();
    let fsyncs = audit.fsyncs();
    drop(audit);
    let mut measured = Measured::new(&format!("audit-append-{command}"));
    measured
        .line
        .number("wall_us", micros(wall))
        .number("calls", u64::from(args.count))
        .number("records", records)
        .number("fsyncs", fsyncs);
    if command == "checkpoint" {
        let kept = std::fs::read_to_string(&checkpoint).unwrap_or_default();
        let size = kept.lines().nth(1).map(str::to_owned);
        measured.check(size == Some(records.to_string()), || {
            format!("the checkpoint kept names size {size:?}, the log holds {records}")
        });
    }
    Ok(measured)
}

/// `audit-log`: runs one real call through `spillguard run --audit` and
/// writes its seven records (the writer's `opened`, the call's six
/// events) again and again, each time with a call id of its own, until
/// the log holds `--bytes`; then its anchor. The frames are built by the
/// core's `LogWriter`, as `ChainedFileAudit` builds them (without its
/// fsyncs).
pub fn write_log(args: &Args) -> Result<Measured, String> {
    let log = log_path(args)?;
    let entries = seed_entries(spillguard(args)?, log)?;

    let partial = log.with_extension("partial");
    let file = File::create(&partial)
        .map_err(|error| format!("cannot create {}: {error}", partial.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut writer = LogWriter::create(LogId(*b"spillguard bench"), None);
    let mut frame = Vec::new();
    let (mut written, mut calls, mut records) = (0u64, 0u64, 0u64);
    let started = Instant::now();
    while written < args.bytes {
        let call_id = format!("c_{calls:016x}");
        for entry in &entries {
            let entry = with_call_id(entry, &call_id);
            frame.clear();
            writer
                .append_to(&entry, None, &mut frame)
                .map_err(|error| format!("cannot append: {error}"))?;
            out.write_all(&frame)
                .map_err(|error| format!("cannot write {}: {error}", partial.display()))?;
            written += frame.len() as u64;
            records += 1;
        }
        calls += 1;
    }
    out.flush()
        .map_err(|error| format!("cannot write {}: {error}", partial.display()))?;
    drop(out);
    std::fs::write(anchor_path(log), format!("{}\n", writer.anchor()))
        .map_err(|error| format!("cannot write the anchor: {error}"))?;
    std::fs::rename(&partial, log)
        .map_err(|error| format!("cannot rename {}: {error}", partial.display()))?;
    let mut measured = Measured::new("audit-log");
    measured
        .line
        .number("wall_us", micros(started.elapsed()))
        .number("log_bytes", written)
        .number("calls", calls)
        .number("records", records);
    Ok(measured)
}

/// `audit-read`: `spillguard audit --command LOG` (`verify` with the
/// log's anchor file; `sessions` and `activity` with `--json`), its
/// output read and counted as it comes, then its wall time and peak RSS.
/// Checks: exit status 0, the verdict `ok` for `--records`, one session
/// of `--calls` calls, one activity row per call.
pub fn read_log(args: &Args) -> Result<Measured, String> {
    let spillguard = spillguard(args)?;
    let log = log_path(args)?;
    let command = args
        .command
        .as_deref()
        .ok_or_else(|| "this case needs --command verify|sessions|activity".to_owned())?;
    let mut child = Command::new(spillguard);
    child.arg("audit");
    match command {
        "verify" => child
            .args(["verify".as_ref(), log.as_os_str(), "--anchor-file".as_ref()])
            .arg(anchor_path(log)),
        "sessions" | "activity" => child.arg(command).arg(log).arg("--json"),
        "checkpoint" => {
            let (signer, _) = bench_keys(spillguard, log)?;
            child
                .args([
                    "checkpoint".as_ref(),
                    log.as_os_str(),
                    "--key-file".as_ref(),
                ])
                .arg(signer)
        }
        "verify-checkpoint" => {
            let (_, verifier) = bench_keys(spillguard, log)?;
            child
                .args(["verify".as_ref(), log.as_os_str(), "--anchor-file".as_ref()])
                .arg(anchor_path(log))
                .arg("--checkpoint")
                .arg(checkpoint_path(log))
                .arg("--public-key")
                .arg(verifier)
        }
        other => return Err(format!("unknown audit command {other:?}")),
    };
    let started = Instant::now();
    let mut child = child
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", spillguard.display()))?;
    let (mut output_bytes, mut lines) = (0u64, 0u64);
    let mut first_line = Vec::new();
    // What `checkpoint` prints is kept: `verify-checkpoint` reads it.
    let mut printed = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        let mut buffer = vec![0; 1 << 16];
        loop {
            match stdout.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    let chunk = &buffer[..n];
                    if lines == 0 {
                        let end = chunk.iter().position(|&b| b == b'\n').unwrap_or(n);
                        first_line.extend_from_slice(&chunk[..end]);
                    }
                    if command == "checkpoint" && printed.len() < 4096 {
                        printed.extend_from_slice(chunk);
                    }
                    output_bytes += n as u64;
                    lines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(format!("cannot read the output: {error}")),
            }
        }
    }
    let status = child
        .wait()
        .map_err(|error| format!("cannot wait for spillguard: {error}"))?;
    let wall = started.elapsed();
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN)
        .map_err(|error| format!("getrusage(RUSAGE_CHILDREN): {error}"))?;
    let log_bytes = std::fs::metadata(log)
        .map_err(|error| format!("cannot stat {}: {error}", log.display()))?
        .len();

    let mut measured = Measured::new(&format!("audit-{command}"));
    measured
        .line
        .number("wall_us", micros(wall))
        .number(
            "child_maxrss_kib",
            u64::try_from(usage.max_rss()).unwrap_or(0),
        )
        .number("log_bytes", log_bytes)
        .number("output_bytes", output_bytes)
        .number("lines", lines);
    let first = String::from_utf8_lossy(&first_line);
    measured.check(status.success(), || {
        format!("{command} ended with {status}")
    });
    match command {
        "checkpoint" => {
            let size = String::from_utf8_lossy(&printed)
                .lines()
                .nth(1)
                .map(str::to_owned);
            measured.check(
                status.success() && size == Some(args.records.to_string()),
                || {
                    format!(
                        "checkpoint printed size {size:?}, {} expected",
                        args.records
                    )
                },
            );
            std::fs::write(checkpoint_path(log), &printed)
                .map_err(|error| format!("cannot keep the checkpoint: {error}"))?;
        }
        "verify-checkpoint" => {
            let ok = format!("ok: {} records, as anchored", args.records);
            measured.check(lines == 2 && first.starts_with(&ok), || {
                format!("verify --checkpoint printed {lines} line(s), first {first:?}")
            });
        }
        "verify" => {
            let ok = format!("ok: {} records, as anchored", args.records);
            measured.check(lines == 1 && first.starts_with(&ok), || {
                format!("verify printed {lines} line(s), first {first:?}")
            });
        }
        "sessions" => {
            let row = first_row(&first);
            measured.check(
                lines == 1
                    && row["calls"].as_u64() == Some(args.calls)
                    && row["unfinished"].as_u64() == Some(0),
                || format!("sessions printed {lines} line(s), first {first:?}"),
            );
        }
        _ => {
            measured.check(lines == args.calls, || {
                format!(
                    "activity printed {lines} rows, {} calls expected",
                    args.calls
                )
            });
            measured.check(first_row(&first)["state"] == "completed", || {
                format!("activity's first row: {first:?}")
            });
        }
    }
    Ok(measured)
}

/// The checkpoint `checkpoint` keeps next to a log, for
/// `verify-checkpoint`.
fn checkpoint_path(log: &Path) -> PathBuf {
    log.with_extension("checkpoint")
}

/// The bench's signer and verifier key files next to `log`, made with
/// `spillguard audit keygen` when missing.
fn bench_keys(spillguard: &Path, log: &Path) -> Result<(PathBuf, PathBuf), String> {
    let prefix = log.with_file_name("bench-signer");
    let (signer, verifier) = (prefix.with_extension("key"), prefix.with_extension("pub"));
    if signer.exists() && verifier.exists() {
        return Ok((signer, verifier));
    }
    let _ = std::fs::remove_file(&signer);
    let _ = std::fs::remove_file(&verifier);
    let status = Command::new(spillguard)
        .args(["audit", "keygen", "bench.example/audit", "--out"])
        .arg(&prefix)
        .stdout(Stdio::null())
        .status()
        .map_err(|error| format!("cannot run {}: {error}", spillguard.display()))?;
    if !status.success() {
        return Err(format!("audit keygen ended with {status}"));
    }
    Ok((signer, verifier))
}

/// The first line of a `--json` view as JSON (`null` when it is not).
fn first_row(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_default()
}
