//! The adapters' lean build (`default-features = false`): without the
//! audit log's cipher and signatures, the TOML readers and Landlock, each adapter pulls
//! none of their crates, and the count of crates it pulls is the one the
//! library page gives. `cargo tree` resolves each adapter alone, as a
//! dependent crate would get it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The crates `package` pulls (normal and build dependencies, itself
/// included), with `args` (`--no-default-features` for the lean build).
fn crates(package: &str, args: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(cargo)
        .current_dir(&root)
        .args(["tree", "--locked", "-p", package, "-e", "normal,build"])
        .args(["--prefix", "none", "--format", "{p}"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo tree -p {package} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// What the lean build leaves out, by the crate that brings it.
const LEFT_OUT: [&str; 4] = ["chacha20poly1305", "toml", "landlock", "ed25519-dalek"];

#[test]
fn the_lean_build_of_each_adapter_pulls_none_of_the_optional_crates() {
    for package in ["spillguard-tokio", "spillguard-smol", "spillguard-std"] {
        let full = crates(package, &[]);
        let lean = crates(package, &["--no-default-features"]);
        for left_out in LEFT_OUT {
            assert!(
                full.contains(left_out),
                "{package} default lacks {left_out}"
            );
            assert!(!lean.contains(left_out), "{package} lean pulls {left_out}");
        }
        assert!(
            lean.len() + 15 <= full.len(),
            "{package}: {} crates lean, {} by default",
            lean.len(),
            full.len()
        );
    }
}

#[test]
fn the_library_page_gives_the_lean_and_default_counts_of_the_tokio_adapter() {
    // What a dependent crate adds: the adapter and its dependencies.
    let full = crates("spillguard-tokio", &[]).len();
    let lean = crates("spillguard-tokio", &["--no-default-features"]).len();
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/library.md"))
            .unwrap();
    let default_line = format!("default features: {full} crates");
    let lean_line = format!("`default-features = false`: {lean} crates");
    assert!(
        page.contains(&default_line),
        "docs/library.md lacks \"{default_line}\""
    );
    assert!(
        page.contains(&lean_line),
        "docs/library.md lacks \"{lean_line}\""
    );
}
