//! The core never does IO, never reads a clock and owns no thread or
//! process (the core is sans IO: callers bring it bytes and instants, the
//! adapters own the processes, the pipes and the waiting). Clippy's
//! `disallowed-methods` catches calls; this test also catches imports,
//! paths and dependencies.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

/// Text that must not appear on any non-comment line of `core/src`.
const FORBIDDEN: &[&str] = &[
    "Instant::now",
    "SystemTime::now",
    "thread::sleep",
    "thread::spawn",
    "std::fs",
    "std::net",
    "std::process",
    "std::env::var",
    "tokio",
    "smol",
    "async_process",
];

/// Packages the core must not depend on: runtimes and OS interfaces.
const FORBIDDEN_DEPENDENCIES: &[&str] = &[
    "tokio",
    "smol",
    "async-process",
    "async-io",
    "futures-lite",
    "mio",
    "libc",
    "rustix",
    "nix",
];

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// `file:line: text` for every non-comment line holding a forbidden name.
fn violations(file: &Path, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for name in FORBIDDEN {
            if line.contains(name) {
                found.push(format!(
                    "{}:{}: `{name}` in: {}",
                    file.display(),
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    found
}

#[test]
fn core_sources_do_no_io_and_read_no_clock() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.iter().any(|f| f.ends_with("lib.rs")), "{files:?}");
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| violations(f, &std::fs::read_to_string(f).unwrap()))
        .collect();
    assert!(
        found.is_empty(),
        "the core must stay sans-IO:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_flags_calls_but_not_comments_or_scoped_threads() {
    let sample = "\
//! Adapters for tokio and smol call `Instant::now()`.
/// let now = Instant::now();
fn f(scope: &Scope) { scope.spawn(|| ()); }
let now = std::time::Instant::now();
    // std::thread::spawn in a comment
use std::fs::File;
";
    let found = violations(Path::new("sample.rs"), sample);
    assert_eq!(
        found,
        [
            "sample.rs:4: `Instant::now` in: let now = std::time::Instant::now();",
            "sample.rs:6: `std::fs` in: use std::fs::File;",
        ]
    );
}

#[test]
fn core_depends_on_no_runtime_and_no_os_interface() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let manifest: toml::Table = std::fs::read_to_string(manifest).unwrap().parse().unwrap();
    let mut tables: Vec<(String, &toml::Table)> = Vec::new();
    if let Some(deps) = manifest.get("dependencies").and_then(toml::Value::as_table) {
        tables.push(("dependencies".to_owned(), deps));
    }
    // Platform-specific dependencies count too.
    if let Some(targets) = manifest.get("target").and_then(toml::Value::as_table) {
        for (target, table) in targets {
            if let Some(deps) = table.get("dependencies").and_then(toml::Value::as_table) {
                tables.push((format!("target.{target}.dependencies"), deps));
            }
        }
    }
    assert!(!tables.is_empty(), "core/Cargo.toml has no [dependencies]");
    let mut found = Vec::new();
    for (name, deps) in &tables {
        for (key, value) in deps.iter() {
            // A renamed dependency names its package in `package = "..."`.
            let package = value
                .get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(key);
            if FORBIDDEN_DEPENDENCIES.contains(&package) {
                found.push(format!("[{name}] {key}"));
            }
        }
    }
    assert!(found.is_empty(), "runtime or OS dependencies: {found:?}");
}
