//! An audit log on a full disk: opening it cannot write, so nothing runs,
//! the command exits with the audit-failure status (3) and a message that
//! names the cause, and the log is cut back to its last whole record, so
//! `audit verify` right after says it is intact. Run on a small tmpfs
//! mounted for the test (root only; in CI it must run).
#![allow(clippy::unwrap_used)]
// A test: it mounts and fills a file system.
#![allow(clippy::disallowed_methods)]

mod support;

mod binary;

use binary::spillguard;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::temp_path;

/// A tmpfs of `size` mounted at a fresh folder, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// `None` (with a message) where this user may not mount; in CI that
    /// fails the test instead.
    fn mount(name: &str, size: &str) -> Option<Tmpfs> {
        let path = temp_path(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .status();
        match status {
            Ok(status) if status.success() => Some(Tmpfs(path)),
            other => {
                let message = format!("cannot mount a tmpfs at {}: {other:?}", path.display());
                assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
                eprintln!("skipped: {message} (run as root)");
                None
            }
        }
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Fills the file system with one file until a write fails.
    fn fill(&self) {
        let mut file = std::fs::File::create(self.join("filler")).unwrap();
        let block = [0_u8; 4096];
        while file.write_all(&block).is_ok() {}
        let _ = file.sync_all();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// (exit status, stdout, stderr)
fn run(args: &[&str]) -> (i32, String, String) {
    let output = spillguard(args);
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// `sh -c script` through `run --audit log --anchor-out anchor`.
fn run_audited(log: &Path, anchor: &Path, script: &str) -> (i32, String, String) {
    run(&[
        "run",
        "--audit",
        s(log),
        "--anchor-out",
        s(anchor),
        "--",
        "sh",
        "-c",
        script,
    ])
}

#[test]
fn a_full_disk_at_open_runs_nothing_exits_3_and_leaves_the_log_intact() {
    let Some(fs) = Tmpfs::mount("full-disk-anchored", "256k") else {
        return;
    };
    let (log, anchor) = (fs.join("audit.log"), fs.join("audit.anchor"));
    let marker = fs.join("ran");
    let audited = |script: &str| run_audited(&log, &anchor, script);
    let (status, _, stderr) = audited("true");
    assert_eq!((status, stderr.as_str()), (0, ""));
    let (log_len, anchor_text) = (len(&log), std::fs::read_to_string(&anchor).unwrap());

    fs.fill();
    let (status, stdout, stderr) = audited(&format!("touch {}", s(&marker)));
    assert_eq!(status, 3, "{stderr}");
    assert_eq!(stdout, "");
    // The log's last page had room for the writer's `opened` record; the
    // anchor file's did not: the record is taken back.
    assert_eq!(
        stderr,
        format!(
            "spillguard: cannot open the audit log {}: cannot append to it: cannot write its \
             anchor file {}: No space left on device (os error 28); nothing of this writer was \
             kept (the log ends at its last whole record, {log_len} bytes)\n",
            s(&log),
            s(&anchor)
        )
    );
    assert!(!marker.exists(), "the helper ran");
    assert_eq!(len(&log), log_len);
    assert_eq!(std::fs::read_to_string(&anchor).unwrap(), anchor_text);

    let (status, stdout, stderr) = run(&["audit", "verify", s(&log), "--anchor-file", s(&anchor)]);
    assert_eq!((status, stderr.as_str()), (0, ""), "{stdout}");
    assert!(stdout.starts_with("ok: "), "{stdout}");
}

#[test]
fn a_full_disk_under_a_new_log_leaves_it_empty_and_exits_3() {
    let Some(fs) = Tmpfs::mount("full-disk-new", "64k") else {
        return;
    };
    fs.fill();
    let log = fs.join("new.log");
    let (status, stdout, stderr) = run(&["run", "--audit", s(&log), "--", "true"]);
    assert_eq!(status, 3, "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "spillguard: cannot open the audit log {}: cannot append to it: No space left on \
             device (os error 28); nothing of this writer was kept (the log ends at its last \
             whole record, 0 bytes)\n",
            s(&log)
        )
    );
    assert_eq!(len(&log), 0);
}

/// The disk fills while the call runs (the helper fills it): the call's
/// records still fit the log's last page, its anchor file does not. The
/// report says exactly that, the exit status is 3, and `audit verify` finds
/// every record intact and says which ones the stale anchor does not vouch
/// for (until the next writer anchors them).
#[test]
fn a_disk_that_fills_during_the_call_exits_3_and_says_what_the_log_holds() {
    let Some(fs) = Tmpfs::mount("full-disk-during", "256k") else {
        return;
    };
    let (log, anchor) = (fs.join("audit.log"), fs.join("audit.anchor"));
    let filler = fs.join("filler");
    let (status, stdout, stderr) = run_audited(
        &log,
        &anchor,
        &format!("cat /dev/zero > {} 2>/dev/null; echo done", s(&filler)),
    );
    assert_eq!(status, 3, "{stderr}");
    let record: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(record["state"], "completed");
    assert_eq!(record["audit_failures"], 1);
    assert_eq!(
        stderr,
        format!(
            "spillguard: audit log {}: the record was written, but not its anchor file {}: No \
             space left on device (os error 28)\n",
            s(&log),
            s(&anchor)
        )
    );
    // The records fit the first page of the log, well away from its end.
    assert!(len(&log) < 3072, "{}", len(&log));
    // The log holds the opening record and the call's six, whole; without
    // its anchor file nothing vouches for them.
    let (status, stdout, _) = run(&["audit", "verify", s(&log)]);
    assert_eq!(status, 3);
    assert!(
        stdout.starts_with("unanchored: 7 records intact, 7 of them not vouched for by an anchor"),
        "{stdout}"
    );
    // The anchor still vouches for what it was written after: the opening.
    let (status, stdout, _) = run(&["audit", "verify", s(&log), "--anchor-file", s(&anchor)]);
    assert_eq!(status, 3);
    assert!(
        stdout.starts_with("unanchored: 7 records intact, 6 of them not vouched for by an anchor"),
        "{stdout}"
    );
}
