//! No false alarms on ordinary output (issue 12): the real output of real
//! tools, generated here (Python's import trace and a traceback, git's log
//! with hashes and paths, a verbose cargo build and a compiler error,
//! UUIDs and SHA-256 digests, URLs without credentials), renders unchanged
//! with 0 redactions. A tool that is missing is skipped with a message.
#![allow(clippy::unwrap_used)]
// A test, not the core: it runs the tools whose output it checks.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::Command;

use spillguard_core::{CaptureSettings, RetentionPool, StreamCapture, StreamName};

/// Both output streams of `program args` run in `dir`, or `None` (with a
/// message) if it cannot be run.
fn output_of(dir: &Path, program: &str, args: &[&str]) -> Option<Vec<u8>> {
    match Command::new(program).args(args).current_dir(dir).output() {
        Ok(out) => Some([out.stdout, out.stderr].concat()),
        Err(e) => {
            let message = format!("{program} {args:?} could not run: {e}");
            // Every tool is on CI's machines: there the check must run.
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
            eprintln!("skipped: {message}");
            None
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "spillguard-false-alarms-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Feeds `bytes` whole into an untruncated capture and checks that the
/// rendering is the lossy text, unchanged, with no redaction.
fn assert_untouched(what: &str, bytes: &[u8]) -> usize {
    let settings = CaptureSettings::tail(StreamName::Stderr, bytes.len().max(1));
    let mut capture = StreamCapture::new(settings, &RetentionPool::unlimited());
    for chunk in bytes.chunks(4096) {
        let _ = capture.feed(chunk);
    }
    let (text, counts) = capture.window().render_with_redactions();
    let found: Vec<(&str, u64)> = counts.iter().collect();
    if !found.is_empty() {
        for line in text.lines().filter(|l| l.contains("[redacted: ")) {
            eprintln!("{what}: {line}");
        }
    }
    assert_eq!(found, [] as [(&str, u64); 0], "{what}");
    assert_eq!(text, String::from_utf8_lossy(bytes), "{what}");
    bytes.len()
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn python_import_trace_and_traceback_have_no_false_alarms() {
    let dir = scratch("python");
    let Some(trace) = output_of(
        &dir,
        "python3",
        &[
            "-v",
            "-c",
            "import json, email.message, http.client, urllib.request",
        ],
    ) else {
        return;
    };
    assert!(assert_untouched("python3 -v", &trace) > 20_000);
    let script = "import json\n\
                  def parse(text):\n    return json.loads(text)\n\
                  def main():\n    parse('{\"broken\": ')\n\
                  main()\n";
    std::fs::write(dir.join("fail.py"), script).unwrap();
    let traceback = output_of(&dir, "python3", &["fail.py"]).unwrap();
    let text = String::from_utf8_lossy(&traceback);
    assert!(
        text.contains("Traceback (most recent call last):"),
        "{text}"
    );
    assert_untouched("python3 traceback", &traceback);
    let ids = output_of(
        &dir,
        "python3",
        &[
            "-c",
            "import uuid, hashlib\n\
             for i in range(500):\n    \
             print(uuid.uuid4(), hashlib.sha256(str(i).encode()).hexdigest(), \
             'https://example.com/api/v1/items/%d?page=2&sort=asc' % i)",
        ],
    )
    .unwrap();
    assert!(assert_untouched("uuids and digests", &ids) > 60_000);
}

#[test]
fn git_log_with_hashes_and_paths_has_no_false_alarms() {
    let root = workspace_root();
    let Some(log) = output_of(&root, "git", &["log", "--stat", "-n", "300"]) else {
        return;
    };
    if log.starts_with(b"fatal:") {
        // CI runs on a clone: there the log is always there.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "not a git checkout"
        );
        eprintln!("skipped: not a git checkout");
        return;
    }
    assert!(assert_untouched("git log --stat", &log) > 10_000);
    let hashes = output_of(
        &root,
        "git",
        &["log", "--format=%H %T %P %an %s", "-n", "300"],
    )
    .unwrap();
    assert_untouched("git log hashes", &hashes);
}

#[test]
fn a_verbose_cargo_build_and_a_compiler_error_have_no_false_alarms() {
    let dir = scratch("cargo");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"alarm-probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "fn main() {\n    let token_count: u32 = \"many\";\n    println!(\"{token_count}\");\n}\n",
    )
    .unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let target = dir.join("target");
    let Some(build) = output_of(
        &dir,
        &cargo,
        &[
            "build",
            "-v",
            "--offline",
            "--target-dir",
            target.to_str().unwrap(),
        ],
    ) else {
        return;
    };
    let text = String::from_utf8_lossy(&build);
    assert!(text.contains("error[E0308]: mismatched types"), "{text}");
    assert!(text.contains("Running `"), "{text}");
    assert_untouched("cargo build -v", &build);
    let version = output_of(&dir, "rustc", &["-vV"]).unwrap();
    assert_untouched("rustc -vV", &version);
    let _ = std::fs::remove_dir_all(&dir);
}
