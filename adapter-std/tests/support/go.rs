//! The repository's Go checker (`tests/go/src/tlogcheck`), which loads
//! keys, opens a signed checkpoint and checks proofs with Go's own
//! `golang.org/x/mod/sumdb/note` and `sumdb/tlog` (Debian's `golang-go`
//! and `golang-golang-x-mod-dev`, which `.ci/peers.sh` installs). Only
//! the standard library here, so the workspace's `tests` crate includes
//! this file too.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Go and the checker's sources, found.
pub struct GoChecker {
    go: PathBuf,
    /// The repository's `tests/go`: the checker's GOPATH entry.
    gopath: PathBuf,
    /// Go's build cache, under the repository's `target`.
    cache: PathBuf,
}

impl GoChecker {
    /// The checker of the repository at `repo`, or `None` with a line on
    /// stderr saying why it is skipped. An unpacked package has no
    /// `tests/go` beside it (the repository's own run checks with Go);
    /// a missing Go skips outside CI and fails in CI.
    pub fn find_or_skip(repo: &Path) -> Option<GoChecker> {
        let gopath = repo.join("tests/go");
        if !gopath.join("src/tlogcheck").exists() {
            eprintln!("skipped the Go checks: no tests/go here (an unpacked package)");
            return None;
        }
        let go = PathBuf::from("/usr/bin/go");
        if !go.exists() || !Path::new("/usr/share/gocode/src/golang.org/x/mod/sumdb").exists() {
            assert!(
                std::env::var_os("CI").is_none(),
                "Go and golang.org/x/mod are missing: .ci/peers.sh installs them"
            );
            eprintln!(
                "skipped the Go checks: run .ci/peers.sh as root (it installs golang-go and \
                 golang-golang-x-mod-dev)"
            );
            return None;
        }
        Some(GoChecker {
            go,
            gopath,
            cache: repo.join("target/go-cache"),
        })
    }

    /// `go` with `gopath` before Debian's packages on its GOPATH, without
    /// modules, its build cache under the repository's `target`.
    fn go_in(&self, gopath: &Path) -> Command {
        let mut go = Command::new(&self.go);
        go.env("GO111MODULE", "off")
            .env("GOPATH", format!("{}:/usr/share/gocode", gopath.display()))
            .env("GOCACHE", &self.cache)
            .env_remove("GOFLAGS");
        go
    }

    /// Runs the Go program `source` (package main, importing only the
    /// standard library and golang.org/x/mod) with `args`; its output,
    /// whatever its exit status. A program that does not build fails the
    /// test.
    pub fn run_program(&self, name: &str, source: &str, args: &[&Path]) -> std::process::Output {
        let gopath = self.cache.with_file_name("go-programs");
        let dir = gopath.join("src").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.go"), source).unwrap();
        let built = gopath.join(name);
        let build = self
            .go_in(&gopath)
            .args(["build", "-o"])
            .arg(&built)
            .arg(name)
            .output()
            .unwrap();
        assert!(
            build.status.success(),
            "go build {name}: {}",
            String::from_utf8_lossy(&build.stderr)
        );
        Command::new(&built).args(args).output().unwrap()
    }

    /// Runs the checker on a signer key, a verifier key, a signed
    /// checkpoint and a file of proofs (one per line, empty for none);
    /// its summary line. A checker that cannot run fails the test.
    pub fn check(
        &self,
        signer: &Path,
        verifier: &Path,
        checkpoint: &Path,
        proofs: &Path,
    ) -> String {
        let out = self
            .go_in(&self.gopath)
            .args(["run", "tlogcheck"])
            .args([signer, verifier, checkpoint, proofs])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "go run tlogcheck: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }
}
