//! No false alarms on ordinary output: the real output of real
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
    // A fixed stretch of this repository's history, not its tip: a later
    // commit message may quote a credential form on purpose (a test's
    // `Authorization: Bearer …`), and this is about ordinary log text.
    const UNTIL: &str = "4f423bc970b44d0e949b06f74ccf4b3c86463af8";
    let root = workspace_root();
    if Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".cargo_vcs_info.json")
        .exists()
    {
        // Unpacked from the published crate: no repository history around
        // it (the corpus's `git-log-stat.txt` holds the same kind of text).
        eprintln!("skipped: a packaged crate has no history of its own");
        return;
    }
    let Some(log) = output_of(&root, "git", &["log", "--stat", "-n", "300", UNTIL]) else {
        return;
    };
    if log.starts_with(b"fatal:") {
        // CI runs on a full clone, where that commit always is.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "commit {UNTIL} is not in this checkout"
        );
        // Elsewhere (no checkout, or a shallow one), the corpus
        // (`git-log-stat.txt`) holds the same kind of text.
        eprintln!("skipped: commit {UNTIL} is not in this checkout (a full clone runs it)");
        return;
    }
    assert!(assert_untouched("git log --stat", &log) > 10_000);
    let hashes = output_of(
        &root,
        "git",
        &["log", "--format=%H %T %P %an %s", "-n", "300", UNTIL],
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

/// The least size of the corpus' recorded files together, in bytes: the
/// corpus may grow, never shrink below this.
const CORPUS_FLOOR_BYTES: usize = 3_700_000;

/// The committed corpus (`core/tests/corpus`, see its README): real
/// output of cargo, npm, pip, git, Python, kubectl, gcloud, docker, aws,
/// curl, ssh, terraform, Go, Java, Node, pytest, apt, openssl, strace,
/// rustc, make and gcc, colours and `\r` progress lines included, and
/// generated identifiers, digests, base64 of ordinary text and sentences
/// that once drew false alarms. Every file is rendered whole, nothing is
/// redacted, every file is listed in the README, and the recorded files
/// hold at least [`CORPUS_FLOOR_BYTES`]; the corpus' size is printed.
#[test]
fn the_false_alarm_corpus_has_no_redactions() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 32, "{files:?}");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    for path in &files {
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            readme.contains(&format!("| `{name}` |")),
            "{name} is not listed in the corpus README"
        );
    }
    // Every file is checked before the test fails, so that one run lists
    // every false alarm of the corpus.
    let (mut bytes, mut lines) = (0, 0);
    let mut alarms = Vec::new();
    for path in &files {
        let text = std::fs::read(path).unwrap();
        lines += text.iter().filter(|&&b| b == b'\n').count();
        bytes += text.len();
        let what = path.display().to_string();
        if std::panic::catch_unwind(|| assert_untouched(&what, &text)).is_err() {
            alarms.push(what);
        }
    }
    assert!(
        bytes >= CORPUS_FLOOR_BYTES,
        "the recorded corpus holds {bytes} bytes, fewer than {CORPUS_FLOOR_BYTES}"
    );
    assert_eq!(alarms, [] as [String; 0], "files with false alarms");
    let files_bytes = bytes;
    let generated = generated_ordinary_text();
    lines += generated.lines().count();
    bytes += assert_untouched("generated identifiers and sentences", generated.as_bytes());
    println!(
        "false-alarm corpus: {} files ({files_bytes} bytes) and generated text, \
         {bytes} bytes, {lines} lines",
        files.len()
    );
}

/// Identifiers in the shapes of UUIDs, SHA-1 and SHA-256 digests (hex of
/// BLAKE3 digests of counters: the same digits, the same lengths), base64
/// of ordinary text, and ordinary sentences.
fn generated_ordinary_text() -> String {
    let mut out = String::new();
    for i in 0_u32..400 {
        let digest = blake3::hash(&i.to_le_bytes()).to_hex();
        let digest = digest.as_str();
        // A v4 UUID's shape, from the digest's hex.
        out.push_str(&format!(
            "request {}-{}-4{}-a{}-{} done\n",
            &digest[..8],
            &digest[8..12],
            &digest[13..16],
            &digest[17..20],
            &digest[20..32]
        ));
        out.push_str(&format!(
            "commit {} (sha1 {})\n",
            &digest[..64],
            &digest[..40]
        ));
        out.push_str(&format!("sha256:{digest}  layer.tar\n"));
    }
    let sentences = [
        "error: invalid token: expired",
        "open /etc/passwd: Permission denied",
        "password: (none)",
        "warning: token: missing, using anonymous access",
        "the secret: keep calm and carry on",
        "Password: ",
        "token expired at 2026-12-01T10:00:00Z, refreshing",
        "api_key: <set API_KEY in your environment>",
        "password=${DB_PASSWORD} user=${DB_USER}",
        "export API_TOKEN=$(vault read -field=token secret/ci)",
        "max_tokens: 4096, temperature: 0.7",
        "Enter passphrase for key '/home/dev/.ssh/id_ed25519':",
        "secret: true",
        "Authorization required: log in with `gh auth login`",
        // Code paths, test names, panics and frames.
        "test auth::tests::x ... ok",
        "thread 'auth::tests::login_fails' panicked at src/auth.rs:12:9:",
        "   7: token::Lexer::next_token",
        "             at token::Lexer::next_token (src/lexer.rs:40:13)",
        "credentials::provider::chain: no provider gave credentials",
        "password::policy::MIN_LEN = 12",
        "    let secret: SecretString = load_secret()?;",
        "    >>> topsecret = config['topsecret.server.com']",
        "/etc/passwd:root:x:0:0:root:/root:/bin/bash",
        "   -----BEGIN RSA PRIVATE KEY-----\n   ... (private key in base64 encoding) ...\n   -----END RSA PRIVATE KEY-----",
        "PASS src/components/Button.test.tsx (5.2 s)",
        "git config --global credential.helper 'cache --timeout=3600'",
    ];
    for sentence in sentences {
        out.push_str(sentence);
        out.push('\n');
    }
    for line in [
        "The quick brown fox jumps over the lazy dog",
        "Connection to the database was closed by the server",
        "Build finished in 42.7 seconds with 3 warnings",
    ] {
        out.push_str(&base64(line.as_bytes()));
        out.push('\n');
    }
    out
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
