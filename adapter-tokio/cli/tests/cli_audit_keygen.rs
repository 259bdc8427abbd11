//! `spillguard audit keygen NAME --out PREFIX`: the two files, their
//! modes and forms, every refusal with nothing written, and keys that
//! Go's `sumdb/note` loads and whose signed checkpoint it opens (with
//! Debian's `golang-go` and `golang-golang-x-mod-dev`, which
//! `.ci/peers.sh` installs; outside CI a missing Go skips that part).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "support/go.rs"]
mod go_support;
use go_support::GoChecker;

use spillguard_std::proto::audit::note::{Checkpoint, SignerKey, VerifierKey};
use spillguard_std::proto::audit::tlog;

fn keygen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(["audit", "keygen"])
        .args(args)
        .output()
        .unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spillguard-keygen-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn keygen_writes_a_signer_and_a_verifier_key_and_refuses_without_writing() {
    let dir = scratch("pair");
    let prefix = dir.join("host-7");
    let made = keygen(&[
        "audit.example.com/host-7",
        "--out",
        prefix.to_str().unwrap(),
    ]);
    assert_eq!(made.status.code(), Some(0), "{made:?}");
    let (secret, public) = (dir.join("host-7.key"), dir.join("host-7.pub"));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&secret), mode(&public)), (0o600, 0o644));
    let secret_text = std::fs::read_to_string(&secret).unwrap();
    let public_text = std::fs::read_to_string(&public).unwrap();
    assert!(secret_text.starts_with("PRIVATE+KEY+audit.example.com/host-7+"));
    assert!(public_text.starts_with("audit.example.com/host-7+"));
    assert_eq!(public_text.trim().split('+').nth(1).unwrap().len(), 8);
    let signer = SignerKey::parse(&secret_text).unwrap();
    assert_eq!(signer.verifier(), VerifierKey::parse(&public_text).unwrap());
    // The verifier key is printed too; the secret never is.
    let stdout = String::from_utf8(made.stdout).unwrap();
    assert!(stdout.contains(public_text.trim()));
    assert!(!stdout.contains("PRIVATE"));

    // Two runs never make the same key.
    let other = dir.join("other");
    assert_eq!(
        keygen(&["audit.example.com/host-7", "--out", other.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );
    assert_ne!(
        std::fs::read_to_string(dir.join("other.pub")).unwrap(),
        public_text
    );

    // Refusals: the files exist, a bad name, a directory that is not
    // there. Nothing is written or changed.
    let before = files(&dir);
    let again = keygen(&[
        "audit.example.com/host-7",
        "--out",
        prefix.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--out:"));
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), secret_text);
    for name in [
        "bad name",
        "a+b",
        "",
        "ctl\u{1}name",
        "tab\tname",
        "nbsp\u{a0}x",
    ] {
        let refused = keygen(&[name, "--out", dir.join("z").to_str().unwrap()]);
        assert_eq!(refused.status.code(), Some(2), "{name:?}");
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("NAME:"),
            "{name:?}"
        );
    }
    let nowhere = keygen(&["n", "--out", dir.join("no/such/dir/k").to_str().unwrap()]);
    assert_eq!(nowhere.status.code(), Some(1));
    // A directory as PREFIX (which would write `.key` and `.pub` in it),
    // and a dangling symbolic link where a key would go.
    let as_dir = format!("{}/", dir.display());
    for out in [as_dir.as_str(), dir.to_str().unwrap()] {
        let refused = keygen(&["n", "--out", out]);
        assert_eq!(refused.status.code(), Some(2), "{out}");
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("--out: "),
            "{out}: {refused:?}"
        );
    }
    assert_eq!(files(&dir), before);
    std::os::unix::fs::symlink(dir.join("gone"), dir.join("dangling.pub")).unwrap();
    let before = files(&dir);
    let refused = keygen(&["n", "--out", dir.join("dangling").to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("exists; nothing was written"));
    assert_eq!(files(&dir), before);

    // Go's sumdb/note loads both keys and opens a checkpoint they sign
    // (in the repository: an unpacked package has no tests/go beside it).
    let Some(go) = GoChecker::find_or_skip(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
    else {
        return;
    };
    let leaves: Vec<tlog::Hash> = (0u32..5)
        .map(|i| tlog::leaf_hash(&i.to_be_bytes()))
        .collect();
    let checkpoint = Checkpoint {
        origin: signer.name().to_owned(),
        size: 5,
        root: tlog::root(&leaves),
    };
    std::fs::write(dir.join("checkpoint"), checkpoint.sign(&signer).unwrap()).unwrap();
    std::fs::write(dir.join("proofs"), "").unwrap();
    assert_eq!(
        go.check(
            &secret,
            &public,
            &dir.join("checkpoint"),
            &dir.join("proofs")
        ),
        "checked 0, failed 0, checkpoint 5 ok"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
