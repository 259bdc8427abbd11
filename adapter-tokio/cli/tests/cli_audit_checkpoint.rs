//! `audit checkpoint`, `audit prove` and `audit verify --checkpoint` on a
//! real log of at least 1,000 records, checked by Go's `sumdb/note` and
//! `sumdb/tlog` (Debian's `golang-go` and `golang-golang-x-mod-dev`, which
//! `.ci/peers.sh` installs; outside CI a missing Go skips that part): the
//! checkpoint opens with `note.Open` and its root is `tlog.TreeHash` over
//! the leaves `prove` gives, every record's inclusion proof passes
//! `CheckRecord`, consistency proofs pass `CheckTree`. A changed byte of
//! the log, a changed checkpoint and another key's checkpoint all fail,
//! with their exit statuses; bad input names its flag.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod binary;
#[path = "support/go.rs"]
mod go_support;
use binary::McpClient;
use go_support::GoChecker;

fn spillguard(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn json(output: &Output) -> serde_json::Value {
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The Go checker, or `None` where it is skipped.
fn go() -> Option<GoChecker> {
    GoChecker::find_or_skip(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The Go checker's summary line for the files in `dir`.
fn go_check(go: &GoChecker, dir: &Path, checkpoint: &str) -> String {
    go.check(
        &dir.join("k.key"),
        &dir.join("k.pub"),
        &dir.join(checkpoint),
        &dir.join("proofs"),
    )
}

#[test]
fn checkpoints_and_proofs_of_a_real_log_are_what_gos_sumdb_checks() {
    let dir = std::env::temp_dir().join(format!("spillguard-checkpoint-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Calls until the log holds at least 1,000 records (checked every 20).
    let mut records = 0;
    let mut calls = 0;
    while records < 1000 {
        for _ in 0..20 {
            calls += 1;
            let script = format!("echo call {calls} 1>&2");
            spillguard(
                &["run", "--audit", "calls.log", "--", "sh", "-c", &script],
                &dir,
            );
        }
        let verified = spillguard(&["audit", "verify", "calls.log", "--json"], &dir);
        assert_eq!(verified.status.code(), Some(3), "unanchored: {verified:?}");
        let verdict: serde_json::Value = serde_json::from_slice(&verified.stdout).unwrap();
        records = verdict["records"].as_u64().unwrap();
        assert!(calls < 1000, "the log does not grow");
    }
    let made = spillguard(&["audit", "keygen", "audit.example/ci", "--out", "k"], &dir);
    assert_eq!(made.status.code(), Some(0));
    let signed = spillguard(
        &["audit", "checkpoint", "calls.log", "--key-file", "k.key"],
        &dir,
    );
    assert_eq!(signed.status.code(), Some(0), "{signed:?}");
    let note = String::from_utf8(signed.stdout).unwrap();
    assert!(
        note.starts_with(&format!("audit.example/ci\n{records}\n")),
        "{note}"
    );
    std::fs::write(dir.join("checkpoint"), &note).unwrap();

    let verified = verify_checkpoint(&dir, "calls.log", "checkpoint");
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    let found = json(&verified);
    assert_eq!(found["checkpoint"]["size"], records);
    assert_eq!(found["checkpoint"]["matches"], true);

    // Every record's inclusion proof, and consistency proofs from sizes
    // spread over the log.
    let mut leaves = Vec::new();
    let mut checks = Vec::new();
    for index in 0..records {
        let proof = json(&spillguard(
            &[
                "audit",
                "prove",
                "calls.log",
                "--index",
                &index.to_string(),
                "--json",
            ],
            &dir,
        ));
        assert_eq!(proof["tree_size"], records);
        assert_eq!(proof["leaf_index"], index);
        leaves.push(format!("leaf {}", proof["leaf_hash"].as_str().unwrap()));
        let path: Vec<&str> = proof["proof"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap())
            .collect();
        checks.push(format!(
            "incl {records} {index} {} {}",
            proof["root_hash"].as_str().unwrap(),
            path.join(",")
        ));
    }
    for old in (1..records).step_by(97).chain([records]) {
        let proof = json(&spillguard(
            &[
                "audit",
                "prove",
                "calls.log",
                "--from",
                &old.to_string(),
                "--json",
            ],
            &dir,
        ));
        let path: Vec<&str> = proof["proof"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap())
            .collect();
        checks.push(format!(
            "cons {old} {records} {} {} {}",
            proof["old_root"].as_str().unwrap(),
            proof["root_hash"].as_str().unwrap(),
            path.join(",")
        ));
    }
    let count = checks.len();
    std::fs::write(dir.join("proofs"), [leaves, checks].concat().join("\n")).unwrap();
    if let Some(go) = go() {
        assert_eq!(
            go_check(&go, &dir, "checkpoint"),
            format!("checked {count}, failed 0, checkpoint {records} ok")
        );
        // A checkpoint signed by another key of the same name does not open.
        let other = spillguard(
            &["audit", "keygen", "audit.example/ci", "--out", "other"],
            &dir,
        );
        assert_eq!(other.status.code(), Some(0));
        let theirs = spillguard(
            &[
                "audit",
                "checkpoint",
                "calls.log",
                "--key-file",
                "other.key",
            ],
            &dir,
        );
        assert_eq!(theirs.status.code(), Some(0), "{theirs:?}");
        std::fs::write(dir.join("theirs"), theirs.stdout).unwrap();
        assert!(go_check(&go, &dir, "theirs").contains("open: "));
    }

    // Appended to since: still matches its first records, exit 3.
    std::fs::copy(dir.join("calls.log"), dir.join("before.log")).unwrap();
    spillguard(&["run", "--audit", "calls.log", "--", "true"], &dir);
    let later = verify_checkpoint_as(&dir, "calls.log", "checkpoint", &[]);
    assert_eq!(later.status.code(), Some(3), "{later:?}");
    let now = verify_checkpoint(&dir, "calls.log", "checkpoint");
    assert_eq!(now.status.code(), Some(3), "{now:?}");
    let now: serde_json::Value = serde_json::from_slice(&now.stdout).unwrap();
    let grown = now["checkpoint"]["records"].as_u64().unwrap();
    assert!(grown > records, "{now}");
    assert_eq!(now["checkpoint"]["matches"], true);
    assert!(
        String::from_utf8_lossy(&later.stdout).contains(&format!(
            "the first {records} records match the tree head audit.example/ci signed; {} appended since",
            grown - records
        )),
        "{later:?}"
    );

    // A checkpoint of more records than the log holds (the log as it was
    // before the last call, against the grown log's checkpoint), and one
    // of another log whose records differ from this one's first: the
    // signature holds, the root does not, exit 5.
    let grown_note = printed_checkpoint(&dir, &[]);
    std::fs::write(dir.join("grown"), &grown_note).unwrap();
    for _ in 0..3 {
        spillguard(&["run", "--audit", "other.log", "--", "true"], &dir);
    }
    let other_note = String::from_utf8(
        spillguard(
            &["audit", "checkpoint", "other.log", "--key-file", "k.key"],
            &dir,
        )
        .stdout,
    )
    .unwrap();
    std::fs::write(dir.join("other-log"), &other_note).unwrap();
    let other_size: u64 = other_note.lines().nth(1).unwrap().parse().unwrap();
    assert!(other_size > 0 && other_size < records);
    for (log, checkpoint, line, size) in [
        (
            "before.log",
            "grown",
            format!(
                "checkpoint: audit.example/ci signed a tree of {grown} records; the log holds {records}: records were removed"
            ),
            grown,
        ),
        (
            "calls.log",
            "other-log",
            format!(
                "checkpoint: the log's first {other_size} records do not give the tree head audit.example/ci signed: records were changed"
            ),
            other_size,
        ),
    ] {
        let refused = verify_checkpoint(&dir, log, checkpoint);
        assert_eq!(refused.status.code(), Some(5), "{log}: {refused:?}");
        let found: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
        assert_eq!(found["checkpoint"]["matches"], false, "{found}");
        assert_eq!(found["checkpoint"]["size"], size, "{found}");
        let text = verify_checkpoint_as(&dir, log, checkpoint, &[]);
        assert_eq!(text.status.code(), Some(5));
        assert!(
            String::from_utf8_lossy(&text.stdout)
                .lines()
                .any(|l| l == line),
            "{log}: {text:?}"
        );
    }

    // The checkpoint changed, or signed by another key: exit 11.
    std::fs::write(
        dir.join("changed"),
        note.replacen(
            &format!("\n{records}\n"),
            &format!("\n{}\n", records - 1),
            1,
        ),
    )
    .unwrap();
    let other = spillguard(
        &["audit", "keygen", "audit.example/ci", "--out", "stranger"],
        &dir,
    );
    assert_eq!(other.status.code(), Some(0));
    // A byte changed in the origin, the root or the signature line.
    let lines: Vec<&str> = note.lines().collect();
    assert_eq!(lines.len(), 5, "{note}");
    let mut changed_files = vec![("changed", "k.pub"), ("checkpoint", "stranger.pub")];
    for (at, name) in [
        (0, "changed-origin"),
        (2, "changed-root"),
        (4, "changed-signature"),
    ] {
        let mut changed: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        // A character in the line's middle (not base64's padding),
        // changed to another of its kind.
        let line = &mut changed[at];
        let middle = line.len() / 2;
        let was = line.as_bytes()[middle];
        let now = if was == b'A' { "B" } else { "A" };
        line.replace_range(middle..=middle, now);
        std::fs::write(dir.join(name), changed.join("\n") + "\n").unwrap();
        changed_files.push((name, "k.pub"));
    }
    for (file, key) in changed_files {
        let refused = spillguard(
            &[
                "audit",
                "verify",
                "calls.log",
                "--checkpoint",
                file,
                "--public-key",
                key,
            ],
            &dir,
        );
        assert_eq!(refused.status.code(), Some(11), "{file} {key}: {refused:?}");
    }

    // Bad input names its flag, and prints nothing.
    let corrupt = |file: &str| {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let (head, _) = text.trim_end().rsplit_once('+').unwrap();
        format!("{head}+AAAA!AAAA\n")
    };
    std::fs::write(dir.join("bad.key"), corrupt("k.key")).unwrap();
    std::fs::write(dir.join("bad.pub"), corrupt("k.pub")).unwrap();
    for (args, flag) in [
        (
            &["audit", "checkpoint", "calls.log", "--key-file", "k.pub"][..],
            "--key-file",
        ),
        (
            &[
                "audit",
                "verify",
                "calls.log",
                "--checkpoint",
                "checkpoint",
                "--public-key",
                "k.key",
            ][..],
            "--public-key",
        ),
        (
            &["audit", "prove", "calls.log", "--index", "99999"][..],
            "--index 99999 is past the tree",
        ),
        (
            &["audit", "prove", "calls.log", "--from", "99999"][..],
            "--from 99999 is larger than the tree",
        ),
        (
            &["audit", "prove", "calls.log", "--from", "0"][..],
            "--from 0: a consistency proof starts from a tree of at least 1 record",
        ),
        (
            &["audit", "checkpoint", "calls.log", "--key-file", "bad.key"][..],
            "--key-file: a signer key's base64 does not decode",
        ),
        (
            &[
                "audit",
                "verify",
                "calls.log",
                "--checkpoint",
                "checkpoint",
                "--public-key",
                "bad.pub",
            ][..],
            "--public-key: a verifier key's base64 does not decode",
        ),
    ] {
        let out = spillguard(args, &dir);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(flag),
            "{args:?}: {out:?}"
        );
    }

    // A byte of the log changed: verify and checkpoint refuse it (5).
    let mut bytes = std::fs::read(dir.join("calls.log")).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(dir.join("calls.log"), &bytes).unwrap();
    let tampered = verify_checkpoint_as(&dir, "calls.log", "checkpoint", &[]);
    assert_eq!(tampered.status.code(), Some(5), "{tampered:?}");
    let refused = spillguard(
        &["audit", "checkpoint", "calls.log", "--key-file", "k.key"],
        &dir,
    );
    assert_eq!(refused.status.code(), Some(5));
    assert!(refused.stdout.is_empty());

    std::fs::remove_dir_all(&dir).unwrap();
}

/// The audit page's Go program, as written there, checks a checkpoint
/// kept as a log grows and the proofs `prove` prints for it; another
/// key's checkpoint, a changed proof and proofs of another tree fail it.
#[test]
fn the_audit_pages_go_program_checks_a_real_log() {
    let Some(go) = go() else {
        return;
    };
    // Read where the Go checker is (the repository, not a package).
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/audit-log.md"),
    )
    .unwrap();
    let start = page.find("```go\n").unwrap() + "```go\n".len();
    let source = &page[start..start + page[start..].find("```").unwrap()];
    assert!(source.contains("package main"), "{source}");
    let dir = scratch("go-page");
    let mut keeping = vec!["run"];
    keeping.extend(CHECKPOINTED);
    keeping.extend(["--", "true"]);
    for _ in 0..5 {
        let run = spillguard(&keeping, &dir);
        assert_eq!(run.status.code(), Some(0), "{run:?}");
    }
    std::fs::copy(dir.join("calls.anchor.checkpoint"), dir.join("signed")).unwrap();
    let signed_size: u64 = std::fs::read_to_string(dir.join("signed"))
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    // The log grows past the checkpoint.
    for _ in 0..3 {
        spillguard(&["run", "--audit", "calls.log", "--", "true"], &dir);
    }
    let prove = |args: &[&str], file: &str| {
        let mut all = vec!["audit", "prove", "calls.log", "--json"];
        all.extend_from_slice(args);
        let out = spillguard(&all, &dir);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        std::fs::write(dir.join(file), &out.stdout).unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let size = signed_size.to_string();
    let consistency = prove(&["--from", &size], "consistency.json");
    let tree_size = consistency["tree_size"].as_u64().unwrap();
    assert!(tree_size > signed_size);
    let check = |signed: &str, inclusion: &str, key: &str| {
        go.run_program(
            "verifydoc",
            source,
            &[
                &dir.join(key),
                &dir.join(signed),
                &dir.join(inclusion),
                &dir.join("consistency.json"),
            ],
        )
    };
    for index in [0, signed_size - 1, tree_size - 1] {
        prove(&["--index", &index.to_string()], "inclusion.json");
        let out = check("signed", "inclusion.json", "k.pub");
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!(
                "record {index} is in audit.example/grow's log: {tree_size} records, the first {signed_size} signed\n"
            )
        );
    }
    // Another key's checkpoint of the same name; a proof hash changed; an
    // inclusion proof of another tree (the log grown again).
    let other = spillguard(
        &["audit", "keygen", "audit.example/grow", "--out", "other"],
        &dir,
    );
    assert_eq!(other.status.code(), Some(0));
    let mut proof = prove(&["--index", "1"], "inclusion.json");
    let hash = proof["proof"][0].as_str().unwrap().to_owned();
    let changed = format!(
        "{}{}",
        if hash.starts_with('A') { "B" } else { "A" },
        &hash[1..]
    );
    proof["proof"][0] = changed.into();
    std::fs::write(dir.join("changed.json"), proof.to_string()).unwrap();
    spillguard(&["run", "--audit", "calls.log", "--", "true"], &dir);
    prove(&["--index", "1"], "later.json");
    for (signed, inclusion, key) in [
        ("signed", "inclusion.json", "other.pub"),
        ("signed", "changed.json", "k.pub"),
        ("signed", "later.json", "k.pub"),
    ] {
        let out = check(signed, inclusion, key);
        assert_eq!(out.status.code(), Some(1), "{inclusion} {key}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("FAILED: "),
            "{out:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `audit verify LOG --checkpoint CHECKPOINT --public-key k.pub --json`
/// in `dir`.
fn verify_checkpoint(dir: &Path, log: &str, checkpoint: &str) -> Output {
    verify_checkpoint_as(dir, log, checkpoint, &["--json"])
}

/// `audit verify LOG --checkpoint CHECKPOINT --public-key k.pub` in `dir`,
/// with `extra` flags.
fn verify_checkpoint_as(dir: &Path, log: &str, checkpoint: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "audit",
        "verify",
        log,
        "--checkpoint",
        checkpoint,
        "--public-key",
        "k.pub",
    ];
    args.extend_from_slice(extra);
    spillguard(&args, dir)
}

/// The checkpoint `audit checkpoint` prints for the log in `dir` now,
/// with `extra` flags (a sealed log's key).
fn printed_checkpoint(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["audit", "checkpoint", "calls.log", "--key-file", "k.key"];
    args.extend_from_slice(extra);
    let printed = spillguard(&args, dir);
    assert_eq!(printed.status.code(), Some(0), "{printed:?}");
    String::from_utf8(printed.stdout).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spillguard-grow-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    assert_eq!(
        spillguard(
            &["audit", "keygen", "audit.example/grow", "--out", "k"],
            &dir
        )
        .status
        .code(),
        Some(0)
    );
    dir
}

/// `audit verify --json` of the log in `dir` against its anchor file and
/// the checkpoint kept beside it, checked with `k.pub`.
fn verified_against_the_kept_checkpoint(dir: &Path) -> serde_json::Value {
    let verified = spillguard(
        &[
            "audit",
            "verify",
            "calls.log",
            "--anchor-file",
            "calls.anchor",
            "--checkpoint",
            "calls.anchor.checkpoint",
            "--public-key",
            "k.pub",
            "--json",
        ],
        dir,
    );
    json(&verified)
}

/// The flags of a call that keeps the log's anchor and signed checkpoint.
const CHECKPOINTED: [&str; 6] = [
    "--audit",
    "calls.log",
    "--anchor-out",
    "calls.anchor",
    "--checkpoint-key-file",
    "k.key",
];

#[test]
fn writers_keep_the_signed_checkpoint_as_the_log_grows() {
    let dir = scratch("anchored");
    let run = |script: &str| {
        let args = [&["run"][..], &CHECKPOINTED, &["--", "sh", "-c", script]].concat();
        let ran = spillguard(&args, &dir);
        assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    };
    let kept = || std::fs::read_to_string(dir.join("calls.anchor.checkpoint")).unwrap();
    // After each call the file holds exactly the checkpoint that reading
    // the whole log gives (Ed25519 signs deterministically).
    for i in 0..12 {
        run(&format!("echo call {i} 1>&2"));
        assert_eq!(kept(), printed_checkpoint(&dir, &[]), "after call {i}");
    }
    let size: u64 = kept().lines().nth(1).unwrap().parse().unwrap();
    let found = verified_against_the_kept_checkpoint(&dir);
    assert_eq!(found["records"], size);
    assert_eq!(found["checkpoint"]["size"], size);
    assert_eq!(found["checkpoint"]["matches"], true);

    // The tree file beside it is what lets opening skip the log's start;
    // without it, or with a hash changed in it, the log is read again and
    // the checkpoint is still right.
    let tree = dir.join("calls.anchor.checkpoint.tree");
    std::fs::remove_file(&tree).unwrap();
    run("true");
    assert_eq!(kept(), printed_checkpoint(&dir, &[]));
    let text = std::fs::read_to_string(&tree).unwrap();
    // The last subtree root, the line before the signed note.
    let last = text
        .lines()
        .take_while(|line| *line != "--")
        .last()
        .unwrap()
        .to_owned();
    assert_eq!(last.len(), 64, "{text}");
    let flipped = format!(
        "{}{}",
        if last.starts_with('0') { "1" } else { "0" },
        &last[1..]
    );
    std::fs::write(&tree, text.replace(&last, &flipped)).unwrap();
    run("true");
    assert_eq!(kept(), printed_checkpoint(&dir, &[]));

    // `stdio` keeps it the same way.
    let args = [&["stdio"][..], &CHECKPOINTED, &["--", "cat"]].concat();
    let relayed = spillguard(&args, &dir);
    assert_eq!(relayed.status.code(), Some(0), "{relayed:?}");
    let after: u64 = kept().lines().nth(1).unwrap().parse().unwrap();
    assert!(after > size, "{after} <= {size}");
    assert_eq!(kept(), printed_checkpoint(&dir, &[]));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_checkpoint_is_kept_without_an_anchor_for_a_sealed_log_and_under_concurrent_writers() {
    let dir = scratch("sealed");
    std::fs::write(dir.join("seal.key"), format!("{}\n", "ab".repeat(32))).unwrap();
    let flags = [
        "--audit",
        "calls.log",
        "--audit-key-file",
        "seal.key",
        "--checkpoint-key-file",
        "k.key",
    ];
    // Two writers at once, each making 8 calls: every frame the other
    // appended is a leaf of each one's tree.
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                for i in 0..8 {
                    let script = format!("echo writer {w} call {i} 1>&2");
                    let mut args = vec!["run"];
                    args.extend_from_slice(&flags);
                    args.extend_from_slice(&["--", "sh", "-c", &script]);
                    assert_eq!(spillguard(&args, &dir).status.code(), Some(0));
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    // Without --anchor-out the checkpoint is beside the log, and no tree
    // file is kept (opening reads the whole log).
    let kept = std::fs::read_to_string(dir.join("calls.log.checkpoint")).unwrap();
    assert_eq!(
        kept,
        printed_checkpoint(&dir, &["--audit-key-file", "seal.key"])
    );
    assert!(!dir.join("calls.log.checkpoint.tree").exists());
    let size: u64 = kept.lines().nth(1).unwrap().parse().unwrap();
    // 2 writers x 8 calls, each run its `opened` entry and the call's 6
    // events (validated, attempt, 3 transitions, final).
    assert_eq!(size, 2 * 8 * 7, "{kept}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_checkpoint_flags_are_refused_naming_the_flag_with_nothing_written() {
    let dir = scratch("refused");
    let refused = |args: &[&str], flag: &str| {
        let mut all = vec!["run", "--audit", "calls.log"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "true"]);
        let out = spillguard(&all, &dir);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(!dir.join("calls.log").exists(), "{args:?} wrote the log");
    };
    std::fs::write(dir.join("bad.key"), "PRIVATE+KEY+x+00000000+AAAA!\n").unwrap();
    std::fs::create_dir(dir.join("a-dir")).unwrap();
    refused(
        &["--checkpoint-key-file", "k.pub"],
        "--checkpoint-key-file:",
    );
    refused(
        &["--checkpoint-key-file", "bad.key"],
        "--checkpoint-key-file:",
    );
    refused(
        &["--checkpoint-key-file", "a-dir"],
        "--checkpoint-key-file:",
    );
    refused(
        &["--checkpoint-key-file", "missing.key"],
        "--checkpoint-key-file:",
    );
    refused(&["--checkpoint-out", "c"], "--checkpoint-out");
    // What the checkpoint writes (the file, its `.tmp`, its `.tree`)
    // never lands on the log, its anchor or a key, however it is named.
    for out in ["calls.log", "./calls.log", "k.key"] {
        refused(
            &["--checkpoint-key-file", "k.key", "--checkpoint-out", out],
            "--checkpoint-out",
        );
    }
    std::fs::copy(dir.join("k.key"), dir.join("c.tree")).unwrap();
    refused(
        &["--checkpoint-key-file", "c.tree", "--checkpoint-out", "c"],
        "--checkpoint-out",
    );
    std::fs::remove_file(dir.join("c.tree")).unwrap();
    // A file the checkpoint would overwrite that is not its own: a key
    // (not one this command reads), a log, a FIFO where the tree file or
    // the temporary file goes, a symbolic link. Each is left as it is.
    std::fs::copy(dir.join("k.pub"), dir.join("kept.pub")).unwrap();
    std::fs::write(dir.join("c2.tree"), "not a tree\n").unwrap();
    for fifo in ["c3.tree", "c4.tmp"] {
        let made = Command::new("mkfifo").arg(dir.join(fifo)).status().unwrap();
        assert!(made.success());
    }
    std::os::unix::fs::symlink("kept.pub", dir.join("c5")).unwrap();
    for (out, why) in [
        (
            "kept.pub",
            "it holds something other than a checkpoint signed by audit.example/grow",
        ),
        (
            "c2",
            "it holds something other than a checkpoint's tree file",
        ),
        ("c3", "a FIFO, not a regular file"),
        ("c4", "a FIFO, not a regular file"),
        ("c5", "a symbolic link, not a regular file"),
    ] {
        refused(
            &["--checkpoint-key-file", "k.key", "--checkpoint-out", out],
            "--checkpoint-out: the checkpoint would overwrite ",
        );
        let again = spillguard(
            &[
                "run",
                "--audit",
                "calls.log",
                "--checkpoint-key-file",
                "k.key",
                "--checkpoint-out",
                out,
                "--",
                "true",
            ],
            &dir,
        );
        assert!(
            String::from_utf8_lossy(&again.stderr).contains(why),
            "{out}: {again:?}"
        );
    }
    assert_eq!(
        std::fs::read(dir.join("kept.pub")).unwrap(),
        std::fs::read(dir.join("k.pub")).unwrap()
    );
    for name in ["kept.pub", "c2.tree", "c3.tree", "c4.tmp", "c5"] {
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    let alone = spillguard(
        &["run", "--checkpoint-key-file", "k.key", "--", "true"],
        &dir,
    );
    assert_eq!(alone.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&alone.stderr).contains("--checkpoint-key-file"));
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a-dir", "bad.key", "k.key", "k.pub"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `mcp` keeps the checkpoint as `run` and `stdio` do: after each tool
/// call's answer reaches the client, the file is exactly the checkpoint
/// of the log as it is then, and `verify --checkpoint` accepts it.
#[test]
fn an_mcp_server_keeps_the_checkpoint_after_each_tool_call() {
    use serde_json::json;

    let dir = scratch("mcp");
    std::fs::write(
        dir.join("tools.toml"),
        "[tools.say]\ndescription = \"says a word on stderr and stdout\"\n\
         command = [\"sh\", \"-c\", \"echo said 1>&2; echo done\"]\napproval = \"none\"\n",
    )
    .unwrap();
    let mut args = vec!["mcp", "--tools", "tools.toml"];
    args.extend_from_slice(&CHECKPOINTED);
    let mut client = McpClient::start(&args, &dir);
    client.initialize("checkpoint", json!({}));
    let kept = || std::fs::read_to_string(dir.join("calls.anchor.checkpoint")).unwrap();
    let size = |note: &str| -> u64 { note.lines().nth(1).unwrap().parse().unwrap() };
    let mut sizes = Vec::new();
    for id in 2..5 {
        client.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "say", "arguments": {}}}));
        let answer = client.next();
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        // The final record, and the checkpoint after it, are written
        // before the answer is sent.
        assert_eq!(kept(), printed_checkpoint(&dir, &[]), "after call {id}");
        sizes.push(size(&kept()));
    }
    assert_eq!(client.close(), Some(0));
    // The server's `opened`, then each call's 7 records (`audit activity`
    // shows records 1 to 7 for the first).
    assert_eq!(sizes, [8, 15, 22], "{sizes:?}");
    assert_eq!(kept(), printed_checkpoint(&dir, &[]));
    let found = verified_against_the_kept_checkpoint(&dir);
    assert_eq!(found["checkpoint"]["matches"], true, "{found}");
    assert_eq!(found["checkpoint"]["size"], size(&kept()));
    std::fs::remove_dir_all(&dir).unwrap();
}
