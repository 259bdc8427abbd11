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

/// Go, the x/mod sources and the repository's checker, or `None`: an
/// unpacked package has no `tests/go` beside it (the repository's own run
/// checks with Go), and outside CI Go may be missing.
fn go() -> Option<PathBuf> {
    let checker = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/go/src/tlogcheck");
    if !checker.exists() {
        eprintln!("skipped the Go checks: no tests/go here (an unpacked package)");
        return None;
    }
    let go = PathBuf::from("/usr/bin/go");
    if go.exists() && Path::new("/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog").exists() {
        return Some(go);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "Go and golang.org/x/mod are missing: .ci/peers.sh installs them"
    );
    eprintln!(
        "skipped the Go checks: run .ci/peers.sh as root (it installs golang-go and golang-golang-x-mod-dev)"
    );
    None
}

/// The Go checker's summary line for the files in `dir`.
fn go_check(go: &Path, dir: &Path, checkpoint: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(go)
        .args(["run", "tlogcheck"])
        .args([
            dir.join("k.key"),
            dir.join("k.pub"),
            dir.join(checkpoint),
            dir.join("proofs"),
        ])
        .env("GO111MODULE", "off")
        .env(
            "GOPATH",
            format!("{}:/usr/share/gocode", root.join("tests/go").display()),
        )
        .env("GOCACHE", root.join("target/go-cache"))
        .env_remove("GOFLAGS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
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

    let verified = spillguard(
        &[
            "audit",
            "verify",
            "calls.log",
            "--checkpoint",
            "checkpoint",
            "--public-key",
            "k.pub",
            "--json",
        ],
        &dir,
    );
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
        std::fs::write(dir.join("theirs"), theirs.stdout).unwrap();
        assert!(go_check(&go, &dir, "theirs").contains("open: "));
    }

    // Appended to since: still matches its first records, exit 3.
    spillguard(&["run", "--audit", "calls.log", "--", "true"], &dir);
    let later = spillguard(
        &[
            "audit",
            "verify",
            "calls.log",
            "--checkpoint",
            "checkpoint",
            "--public-key",
            "k.pub",
        ],
        &dir,
    );
    assert_eq!(later.status.code(), Some(3), "{later:?}");
    assert!(
        String::from_utf8_lossy(&later.stdout)
            .contains(&format!("the first {records} records match"))
    );

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
    for (file, key) in [("changed", "k.pub"), ("checkpoint", "stranger.pub")] {
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

    // Bad input names its flag.
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
    ] {
        let out = spillguard(args, &dir);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
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
    let tampered = spillguard(
        &[
            "audit",
            "verify",
            "calls.log",
            "--checkpoint",
            "checkpoint",
            "--public-key",
            "k.pub",
        ],
        &dir,
    );
    assert_eq!(tampered.status.code(), Some(5), "{tampered:?}");
    let refused = spillguard(
        &["audit", "checkpoint", "calls.log", "--key-file", "k.key"],
        &dir,
    );
    assert_eq!(refused.status.code(), Some(5));
    assert!(refused.stdout.is_empty());

    std::fs::remove_dir_all(&dir).unwrap();
}
