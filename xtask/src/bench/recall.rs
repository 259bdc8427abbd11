//! The `redact` section's recall and false alarms: spillguard's rules and
//! detect-secrets (PyPI, installed by `.ci/peers.sh`) on the same inputs.
//!
//! * Recall: the generated corpus of `spillguard_tests::recall`, per class.
//!   Spillguard renders each item through a capture (whole, in two writes
//!   or in a tail window cutting the secret) and recalls it when no piece
//!   of the secret of `min(8, ceil(n / 2))` bytes is left and a redaction
//!   was counted. detect-secrets reads each item as a file of its own (the
//!   bytes the window holds, under a `.yaml` or `.ini` name where the text
//!   is YAML or INI, else `.log`) and recalls it when it reports a finding
//!   in that file.
//! * False alarms: the false-alarm corpus (`core/tests/corpus/*.txt`, real
//!   output of real tools): lines spillguard's rendering changed (a
//!   redaction in them), lines detect-secrets reports a finding on, over the
//!   corpus's lines (newline-separated).
//!
//! The files are written under `target/bench-redact-recall/`, where they
//! stay for a look. detect-secrets is found at
//! `$SPILLGUARD_PEERS/venv/bin/detect-secrets` (default `target/peers`);
//! without it its columns say so, and how to install it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use spillguard_std::proto::{CaptureSettings, RetentionPool, StreamCapture, StreamName};
use spillguard_tests::recall::{self, Class, Tally};

/// The least recall per class the rules aim at, in percent.
const GOAL: f64 = 99.0;

/// What was measured.
#[derive(Debug)]
pub struct Measured {
    /// Per class: spillguard's tally, detect-secrets' (when it ran).
    pub classes: Vec<(Class, Tally, Option<Tally>)>,
    /// Lines of the false-alarm corpus.
    pub corpus_lines: usize,
    /// Corpus lines spillguard redacted something on, and its redactions.
    pub spillguard_false: (usize, u64),
    /// Per corpus file: its name, its lines, the lines spillguard changed.
    pub per_file: Vec<(String, usize, usize)>,
    /// Corpus lines detect-secrets flagged (when it ran).
    pub detect_secrets_false: Option<usize>,
    /// Why detect-secrets did not run, if it did not.
    pub skipped: Option<String>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where `.ci/peers.sh` installs detect-secrets.
fn detect_secrets() -> PathBuf {
    let peers = std::env::var_os("SPILLGUARD_PEERS")
        .map_or_else(|| workspace().join("target/peers"), PathBuf::from);
    peers.join("venv/bin/detect-secrets")
}

/// Runs spillguard, and detect-secrets when installed, on the corpora.
pub fn measure() -> Result<Measured, String> {
    eprint!("bench: redaction recall and false alarms, spillguard and detect-secrets ... ");
    let items = recall::corpus(recall::SEED);
    let recalled: Vec<bool> = items.iter().map(|i| i.recalled_by(&i.render())).collect();
    let ours = recall::tally(&items, &recalled);

    let corpus_dir = workspace().join("core/tests/corpus");
    let mut corpus: Vec<(String, Vec<u8>)> = Vec::new();
    let entries = std::fs::read_dir(&corpus_dir)
        .map_err(|error| format!("cannot read {}: {error}", corpus_dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|ext| ext == "txt") {
            let bytes = std::fs::read(&path)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            corpus.push((name, bytes));
        }
    }
    corpus.sort();
    let mut corpus_lines = 0;
    let mut false_lines = 0;
    let mut false_redactions = 0;
    let mut per_file = Vec::with_capacity(corpus.len());
    for (name, bytes) in &corpus {
        let file_lines = bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        corpus_lines += file_lines;
        let settings = CaptureSettings::tail(StreamName::Stderr, bytes.len().max(1));
        let mut capture = StreamCapture::new(settings, &RetentionPool::unlimited());
        let _ = capture.feed(bytes);
        let (text, counts) = capture.window().render_with_redactions();
        // The whole file is kept, so line for line the rendering is the
        // text itself but where something was redacted (a line that
        // quotes a placeholder, as a commit message may, is no alarm).
        let original = String::from_utf8_lossy(bytes);
        let changed = text
            .lines()
            .zip(original.lines())
            .filter(|(shown, line)| shown != line)
            .count();
        false_lines += changed;
        per_file.push((name.clone(), file_lines, changed));
        false_redactions += counts.total();
    }

    let dir = workspace().join("target/bench-redact-recall");
    let _ = std::fs::remove_dir_all(&dir);
    let write = |path: &Path, bytes: &[u8]| {
        std::fs::write(path, bytes)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))
    };
    for sub in ["items", "corpus"] {
        std::fs::create_dir_all(dir.join(sub))
            .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    }
    let mut names = Vec::with_capacity(items.len());
    for (n, item) in items.iter().enumerate() {
        let name = format!(
            "{n:04}-{}-{}-{}.{}",
            item.class.name(),
            item.form,
            item.context,
            item.extension()
        );
        write(
            &dir.join("items").join(&name),
            item.window_bytes().as_bytes(),
        )?;
        names.push(format!("items/{name}"));
    }
    for (name, bytes) in &corpus {
        write(&dir.join("corpus").join(name), bytes)?;
    }

    let program = detect_secrets();
    let (theirs, detect_secrets_false, skipped) = if program.exists() {
        let findings = scan(&program, &dir)?;
        let hits: Vec<bool> = names
            .iter()
            .map(|name| findings.contains_key(name))
            .collect();
        let flagged = findings
            .iter()
            .filter(|(name, _)| name.starts_with("corpus/"))
            .map(|(_, lines)| lines.len())
            .sum();
        (Some(recall::tally(&items, &hits)), Some(flagged), None)
    } else {
        (
            None,
            None,
            Some(format!(
                "detect-secrets is not installed at {}: run .ci/peers.sh",
                program.display()
            )),
        )
    };
    eprintln!("done");
    let classes = ours
        .into_iter()
        .enumerate()
        .map(|(i, (class, tally))| (class, tally, theirs.as_ref().map(|t| t[i].1)))
        .collect();
    Ok(Measured {
        classes,
        corpus_lines,
        spillguard_false: (false_lines, false_redactions),
        per_file,
        detect_secrets_false,
        skipped,
    })
}

/// The lines detect-secrets reports a finding on, per file (relative to
/// `dir`, `/`-separated).
fn scan(program: &Path, dir: &Path) -> Result<BTreeMap<String, BTreeSet<u64>>, String> {
    let output = Command::new(program)
        .args(["scan", "--all-files", "."])
        .current_dir(dir)
        .output()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    if !output.status.success() {
        return Err(format!(
            "detect-secrets failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let value: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|error| format!("detect-secrets printed no JSON: {error}"))?;
    let mut findings: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    if let Some(results) = value["results"].as_object() {
        for (file, list) in results {
            let lines = findings
                .entry(file.trim_start_matches("./").to_owned())
                .or_default();
            for finding in list.as_array().into_iter().flatten() {
                if let Some(line) = finding["line_number"].as_u64() {
                    lines.insert(line);
                }
            }
        }
    }
    Ok(findings)
}

/// Prints the table.
pub fn print(measured: &Measured) {
    println!(
        "\n== redact: recall on the generated corpus (goal >= {GOAL:.0}% per class) and false alarms"
    );
    println!(
        "  {:<20} {:>6}  {:>18}  {:>18}",
        "class", "items", "spillguard", "detect-secrets"
    );
    let cell = |tally: &Tally| format!("{:>5} {:>6.1}%", tally.recalled, tally.percent());
    let (mut all, mut all_theirs) = (Tally::default(), Tally::default());
    for (class, ours, theirs) in &measured.classes {
        all.items += ours.items;
        all.recalled += ours.recalled;
        if let Some(theirs) = theirs {
            all_theirs.items += theirs.items;
            all_theirs.recalled += theirs.recalled;
        }
        println!(
            "  {:<20} {:>6}  {:>18}  {:>18}{}",
            class.name(),
            ours.items,
            cell(ours),
            theirs.as_ref().map_or_else(|| "-".to_owned(), cell),
            if ours.percent() >= GOAL {
                ""
            } else {
                "   (goal missed)"
            }
        );
    }
    let have_theirs = measured.skipped.is_none();
    println!(
        "  {:<20} {:>6}  {:>18}  {:>18}",
        "all",
        all.items,
        cell(&all),
        if have_theirs {
            cell(&all_theirs)
        } else {
            "-".to_owned()
        }
    );
    let lines = measured.corpus_lines.max(1) as f64;
    let (ours, redactions) = measured.spillguard_false;
    println!(
        "  false alarms on {} lines of real tool output (core/tests/corpus):",
        measured.corpus_lines
    );
    println!(
        "    spillguard      {ours:>5} lines ({:.2}%), {redactions} redactions",
        100.0 * ours as f64 / lines
    );
    println!("    per file (lines changed / lines):");
    for (name, lines, changed) in &measured.per_file {
        println!("      {name:<28} {changed:>5} / {lines:>6}");
    }
    match measured.detect_secrets_false {
        Some(theirs) => println!(
            "    detect-secrets  {theirs:>5} lines ({:.2}%)",
            100.0 * theirs as f64 / lines
        ),
        None => println!("    detect-secrets  -"),
    }
    if let Some(why) = &measured.skipped {
        println!("  detect-secrets skipped: {why}");
    }
}
