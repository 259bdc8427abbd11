//! The audit log's transparency-log pieces against Go's own
//! implementation (`golang.org/x/mod/sumdb/note` and `sumdb/tlog`, from
//! Debian's `golang-go` and `golang-golang-x-mod-dev`, which
//! `.ci/peers.sh` installs): keys in the signed-note format load in
//! `note.NewSigner` and `note.NewVerifier`, a signed checkpoint of a
//! 1,000-leaf tree opens with `note.Open` and its root is `tlog.TreeHash`'s,
//! every inclusion proof passes `CheckRecord` and consistency proofs
//! between sizes pass `CheckTree`; a flipped byte fails, and a checkpoint
//! signed by another key does not open.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

#[path = "../../adapter-std/tests/support/go.rs"]
mod go_support;
use go_support::GoChecker;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use spillguard_core::audit::note::{Checkpoint, SignerKey};
use spillguard_core::audit::tlog::{self, Hash};

/// Leaf `i`'s data, as the Go checker makes it: `i` in 4 big-endian bytes.
fn leaf(i: u32) -> Hash {
    tlog::leaf_hash(&i.to_be_bytes())
}

/// Runs the Go checker on the files in `dir`; its summary line.
fn check(go: &GoChecker, dir: &Path, checkpoint: &str) -> String {
    go.check(
        &dir.join("signer.key"),
        &dir.join("verifier.pub"),
        &dir.join(checkpoint),
        &dir.join("proofs"),
    )
}

#[test]
fn keys_checkpoints_and_proofs_are_what_gos_sumdb_checks() {
    let Some(go) = GoChecker::find_or_skip(&Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
    else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("spillguard-tlog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let leaves: Vec<Hash> = (0..1000).map(leaf).collect();
    let key = SignerKey::from_seed("audit.example/log", [0x5a; 32]).unwrap();
    std::fs::write(dir.join("signer.key"), key.to_text().as_bytes()).unwrap();
    std::fs::write(dir.join("verifier.pub"), key.verifier().to_text()).unwrap();
    let checkpoint = Checkpoint {
        origin: key.name().to_owned(),
        size: 1000,
        root: tlog::root(&leaves),
    };
    let note = checkpoint.sign(&key).unwrap();
    std::fs::write(dir.join("checkpoint"), &note).unwrap();

    // Every leaf's inclusion proof in the 1,000-leaf tree, and the
    // consistency proofs to it from a spread of sizes.
    let b64 = |h: &Hash| BASE64.encode(h);
    let joined = |p: Vec<Hash>| p.iter().map(b64).collect::<Vec<_>>().join(",");
    let top = b64(&checkpoint.root);
    let mut lines = Vec::new();
    for i in 0..leaves.len() {
        let proof = tlog::inclusion_proof(&leaves, i).unwrap();
        lines.push(format!("incl 1000 {i} {top} {}", joined(proof)));
    }
    let sizes: Vec<usize> = (1..=64).chain((65..1000).step_by(37)).collect();
    for &m in &sizes {
        let proof = tlog::consistency_proof(&leaves, m).unwrap();
        let old = b64(&tlog::root(&leaves[..m]));
        lines.push(format!("cons {m} 1000 {old} {top} {}", joined(proof)));
    }
    let count = lines.len();
    std::fs::write(dir.join("proofs"), lines.join("\n")).unwrap();
    assert_eq!(
        check(&go, &dir, "checkpoint"),
        format!("checked {count}, failed 0, checkpoint 1000 ok")
    );

    // One byte changed in one proof hash, and in the checkpoint's size.
    let mut bad = lines.clone();
    bad[500] = bad[500].replacen(" 1000 500 ", " 1000 501 ", 1);
    std::fs::write(dir.join("proofs"), bad.join("\n")).unwrap();
    std::fs::write(
        dir.join("changed"),
        note.replacen("\n1000\n", "\n1001\n", 1),
    )
    .unwrap();
    let summary = check(&go, &dir, "changed");
    assert!(
        summary.starts_with(&format!("checked {count}, failed 1, checkpoint -1 open: ")),
        "{summary}"
    );

    // Signed by another key of the same name: it does not open.
    let other = SignerKey::from_seed("audit.example/log", [0x5b; 32]).unwrap();
    std::fs::write(dir.join("other"), checkpoint.sign(&other).unwrap()).unwrap();
    let summary = check(&go, &dir, "other");
    assert!(summary.contains("checkpoint -1 open: "), "{summary}");
    std::fs::remove_dir_all(&dir).unwrap();
}
