//! `cargo xtask audit-fixtures`: the audit logs of one record format
//! version, written by the CLI as a user's calls would write them, kept in
//! the repository so that every later release is tested against them.
//!
//! For format version N it writes `adapter-tokio/cli/tests/fixtures/audit/vN/`:
//! a plain log and a sealed one (`plain.log`, `sealed.log`) with their
//! anchors (`*.anchor`) and the sealed log's key (`sealed.key`), each
//! holding calls of `run` (completed, a failing exit, truncated stderr, a
//! deadline, a program not found, a JSON result that reports a failure),
//! of `stdio` (and, from version 2 on, a `stdio --restart` session whose
//! server fails three times) and of `mcp` (a call without approval, one approved, one
//! declined, a discovery); and what `audit verify`, `audit sessions` and
//! `audit activity` said of each when they were written (`*.verify.txt`,
//! `*.sessions.jsonl`, `*.activity.jsonl`). From version 2 on, `mixed.log`
//! is the previous version's plain log with calls appended by this one.
//! Then it records the version's layout (`core/tests/audit_formats/vN.json`)
//! through the core's layout test.
//!
//! A version's fixtures are written once: the task refuses a folder that
//! exists. `cli_audit_fixtures.rs` reads every version's.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use serde_json::{Value, json};
use spillguard_std::proto::audit::FORMAT_VERSION;

const HELP: &str = "\
usage: cargo xtask audit-fixtures [--exe PATH]

Writes the audit log fixtures of the record format version this release
writes (adapter-tokio/cli/tests/fixtures/audit/vN/) with the CLI at PATH
(default: the workspace's, built first), and records that version's layout
(core/tests/audit_formats/vN.json). Refuses a version whose fixtures exist.
";

/// A fixed key for the sealed fixture (64 hex digits): the fixture is a
/// test's, its key is in the repository beside it.
const KEY_HEX: &str = "5e11ed5e11ed5e11000102030405060708090a0b0c0d0e0f1011121314151617";

pub fn run(args: Vec<OsString>) -> ExitCode {
    let mut exe = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--exe") => exe = args.next().map(PathBuf::from),
            Some("--help" | "-h") => {
                print!("{HELP}");
                return ExitCode::SUCCESS;
            }
            _ => {
                eprintln!("xtask audit-fixtures: unknown argument {arg:?}\n{HELP}");
                return ExitCode::from(2);
            }
        }
    }
    match write_all(exe) {
        Ok(dir) => {
            println!("wrote {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("xtask audit-fixtures: {error}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The folder of a version's fixtures.
pub fn fixture_dir(version: u8) -> PathBuf {
    root().join(format!("adapter-tokio/cli/tests/fixtures/audit/v{version}"))
}

fn write_all(exe: Option<PathBuf>) -> Result<PathBuf, String> {
    let dir = fixture_dir(FORMAT_VERSION);
    if dir.exists() {
        return Err(format!(
            "{} exists: a format version's fixtures are written once (raise FORMAT_VERSION \
             for a new layout)",
            dir.display()
        ));
    }
    let exe = match exe {
        Some(exe) => exe,
        None => build_cli()?,
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let key = dir.join("sealed.key");
    std::fs::write(&key, format!("{KEY_HEX}\n")).map_err(|e| e.to_string())?;
    let sg = Cli {
        exe: &exe,
        dir: &dir,
    };
    for (name, key) in [("plain", None), ("sealed", Some(key.as_path()))] {
        let log = Log::new(&dir, name, key);
        sg.calls(&log)?;
        sg.views(&log)?;
    }
    if FORMAT_VERSION > 1 {
        let previous = fixture_dir(FORMAT_VERSION - 1);
        let log = Log::new(&dir, "mixed", None);
        for (from, to) in [("plain.log", &log.log), ("plain.anchor", &log.anchor)] {
            std::fs::copy(previous.join(from), to).map_err(|e| format!("{from}: {e}"))?;
        }
        sg.calls(&log)?;
        sg.views(&log)?;
    }
    let writer = first_line(Command::new(&exe).arg("--version"));
    let commit = first_line(
        Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .current_dir(root()),
    );
    std::fs::write(dir.join("README.md"), readme(&writer, &commit))
        .map_err(|e| format!("README.md: {e}"))?;
    bless_layout()?;
    Ok(dir)
}

/// The first line a command prints (empty when it cannot run).
fn first_line(command: &mut Command) -> String {
    command
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .unwrap_or_default()
}

/// What the folder holds and where it came from.
fn readme(writer: &str, commit: &str) -> String {
    let mixed = if FORMAT_VERSION > 1 {
        format!(
            "- `mixed.log`, `mixed.anchor`: version {}'s `plain.log` with this \
             version's calls appended (a log written across an upgrade).\n",
            FORMAT_VERSION - 1
        )
    } else {
        String::new()
    };
    format!(
        "# Audit log fixtures: record format version {FORMAT_VERSION}\n\n\
         Written by `{writer}` (commit {commit}) with `cargo xtask audit-fixtures`. \
         Never edited or rewritten: every later release must read them as they are \
         (`tests/cli_audit_fixtures.rs`).\n\n\
         - `plain.log`, `plain.anchor`: a log in clear and its anchor.\n\
         - `sealed.log`, `sealed.anchor`, `sealed.key`: a sealed log, its MACed anchor \
         and its key.\n\
         {mixed}\
         - `NAME.verify.txt`: what `audit verify NAME.log --anchor-file NAME.anchor` \
         printed; `NAME.sessions.jsonl`, `NAME.activity.jsonl`: `audit sessions|activity \
         --json`.\n\n\
         Each log holds the calls of `run` (completed, exit 3, stderr truncated to 1 KiB, \
         stopped at a 300 ms deadline, a program not found, a JSON result reporting a \
         failure), one of `stdio`, and an `mcp` session (a call needing no approval, one \
         approved, one declined, a discovery).\n"
    )
}

/// Builds the CLI (debug) and returns its path.
fn build_cli() -> Result<PathBuf, String> {
    let status = crate::cargo()
        .args([
            "build",
            "--package",
            "spillguard-cli",
            "--bin",
            "spillguard",
        ])
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the CLI failed ({status})"));
    }
    Ok(root().join("target/debug/spillguard"))
}

/// Runs the core's layout test with `SPILLGUARD_BLESS`, which writes the
/// layout file of a version that has none.
fn bless_layout() -> Result<(), String> {
    let status = crate::cargo()
        .args([
            "test",
            "--package",
            "spillguard-core",
            "--test",
            "audit_format_layout",
            "--",
            "the_record_layout_is_the_one_recorded_for_its_format_version",
        ])
        .env("SPILLGUARD_BLESS", "1")
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("recording the layout failed ({status})"))
    }
}

/// One fixture log: its files.
struct Log<'a> {
    name: &'a str,
    log: PathBuf,
    anchor: PathBuf,
    key: Option<&'a Path>,
}

impl<'a> Log<'a> {
    fn new(dir: &Path, name: &'a str, key: Option<&'a Path>) -> Log<'a> {
        Log {
            name,
            log: dir.join(format!("{name}.log")),
            anchor: dir.join(format!("{name}.anchor")),
            key,
        }
    }

    /// `--audit LOG --anchor-out ANCHOR [--audit-key-file KEY]`.
    fn flags(&self) -> Vec<OsString> {
        let mut flags: Vec<OsString> = vec![
            "--audit".into(),
            self.log.clone().into(),
            "--anchor-out".into(),
            self.anchor.clone().into(),
        ];
        if let Some(key) = self.key {
            flags.extend(["--audit-key-file".into(), key.as_os_str().to_owned()]);
        }
        flags
    }
}

struct Cli<'a> {
    exe: &'a Path,
    dir: &'a Path,
}

impl Cli<'_> {
    fn command(&self) -> Command {
        let mut command = Command::new(self.exe);
        command.current_dir(self.dir);
        command
    }

    /// The calls every fixture log holds.
    fn calls(&self, log: &Log<'_>) -> Result<(), String> {
        let session = format!("fx-{}-run", log.name);
        let runs: [(&[&str], &[&str]); 6] = [
            (&[], &["sh", "-c", "echo out; echo diagnostic >&2"]),
            (&[], &["sh", "-c", "echo failing >&2; exit 3"]),
            (
                &[
                    "--per-call-bytes",
                    "1024",
                    "--excerpt-bytes",
                    "512",
                    "--retain",
                    "head-and-tail",
                ],
                &[
                    "sh",
                    "-c",
                    "i=0; while [ $i -lt 200 ]; do echo \"line $i of a noisy helper\" >&2; \
                     i=$((i+1)); done",
                ],
            ),
            (
                &["--deadline-ms", "300", "--grace-ms", "200"],
                &["sleep", "10"],
            ),
            (&[], &["/nonexistent/spillguard-fixture-program"]),
            (
                &["--result", "json"],
                &[
                    "sh",
                    "-c",
                    "echo '{\"ok\": false, \"error\": \"remote said no\"}'",
                ],
            ),
        ];
        for (flags, program) in runs {
            let output = self
                .command()
                .arg("run")
                .args(["--session-id", &session])
                .args(log.flags())
                .args(flags)
                .arg("--")
                .args(program)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("run: {e}"))?;
            if output.status.code().is_none_or(|code| code > 1) {
                return Err(format!(
                    "run {program:?}: {}: {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
        }
        self.stdio_call(log)?;
        self.restarted_stdio(log)?;
        self.mcp_calls(log)
    }

    /// A `stdio --restart` session whose server fails twice in a row: two
    /// restart events (from format version 2 on), then a crash loop.
    fn restarted_stdio(&self, log: &Log<'_>) -> Result<(), String> {
        let output = self
            .command()
            .arg("stdio")
            .args(["--session-id", &format!("fx-{}-restart", log.name)])
            .args(["--restart", "on-failure", "--restart-max", "3"])
            .args(["--restart-backoff-ms", "10,20"])
            .args(log.flags())
            .args(["--", "sh", "-c", "echo failing >&2; exit 4"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                // The host stays until the crash loop is given up.
                std::thread::sleep(std::time::Duration::from_millis(800));
                drop(child.stdin.take());
                child.wait_with_output()
            })
            .map_err(|e| format!("stdio --restart: {e}"))?;
        if output.status.code() != Some(4) {
            return Err(format!(
                "stdio --restart: {}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(())
    }

    fn stdio_call(&self, log: &Log<'_>) -> Result<(), String> {
        let record = self.dir.join(format!("{}.stdio-record.tmp", log.name));
        let mut child = self
            .command()
            .arg("stdio")
            .args(["--session-id", &format!("fx-{}-stdio", log.name)])
            .arg("--record")
            .arg(&record)
            .args(log.flags())
            .args(["--", "sh", "-c", "cat; echo done >&2"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("stdio: {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(b"hello through stdio\n")
                .map_err(|e| format!("stdio: {e}"))?;
        }
        let output = child.wait_with_output().map_err(|e| e.to_string())?;
        let _ = std::fs::remove_file(&record);
        if output.stdout != b"hello through stdio\n" {
            return Err(format!("stdio: got {:?}", output.stdout));
        }
        Ok(())
    }

    /// An MCP session: a call needing no approval, one approved, one
    /// declined, and a discovery whose helper prints JSON.
    fn mcp_calls(&self, log: &Log<'_>) -> Result<(), String> {
        let tools = self.dir.join("tools.toml.tmp");
        std::fs::write(
            &tools,
            r#"
[tools.greet]
description = "says hello"
command = ["sh", "-c", "echo \"hello $1\"; echo greeted >&2", "_", "{name}"]
params.name = { type = "string", pattern = "^[a-z]+$" }
approval = "none"
kind = "action"

[tools.restart]
description = "restarts a unit"
command = ["sh", "-c", "echo \"restarting $1\" >&2; echo restarted", "_", "{unit}"]
params.unit = { type = "string", pattern = "^[a-z.]+$" }
approval = "required"
kind = "action"

[tools.units]
description = "the units, as JSON"
command = ["sh", "-c", "echo '[{{\"unit\": \"web.service\", \"state\": \"running\"}}]'"]
kind = "discovery"
result = "stdout_json"
"#,
        )
        .map_err(|e| e.to_string())?;
        let mut server = self
            .command()
            .args(["mcp", "--tools"])
            .arg(&tools)
            .args(log.flags())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("mcp: {e}"))?;
        let result = (|| {
            let mut stdin = server.stdin.take().ok_or("mcp: no stdin")?;
            let mut stdout = BufReader::new(server.stdout.take().ok_or("mcp: no stdout")?);
            let mut send = |message: Value| {
                stdin
                    .write_all(format!("{message}\n").as_bytes())
                    .map_err(|e| format!("mcp: {e}"))
            };
            let mut next = || -> Result<Value, String> {
                let mut line = String::new();
                stdout
                    .read_line(&mut line)
                    .map_err(|e| format!("mcp: {e}"))?;
                serde_json::from_str(&line).map_err(|e| format!("mcp: {e}: {line:?}"))
            };
            send(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "fixture", "version": "1"}}}),
            )?;
            next()?;
            send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
            let calls = [
                ("greet", json!({"name": "ada"}), None),
                ("restart", json!({"unit": "web.service"}), Some("accept")),
                ("restart", json!({"unit": "db.service"}), Some("decline")),
                ("units", json!({}), None),
            ];
            for (id, (tool, arguments, answer)) in (2..).zip(calls) {
                send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}}))?;
                if let Some(action) = answer {
                    let ask = next()?;
                    if ask["method"] != "elicitation/create" {
                        return Err(format!("mcp: expected a card, got {ask}"));
                    }
                    let result = match action {
                        "accept" => json!({"action": "accept", "content": {}}),
                        _ => json!({"action": action}),
                    };
                    send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": result}))?;
                }
                let answer = next()?;
                if answer["id"] != id {
                    return Err(format!("mcp: expected the answer to {id}, got {answer}"));
                }
            }
            Ok(())
        })();
        let status = server.wait().map_err(|e| e.to_string());
        let _ = std::fs::remove_file(&tools);
        result?;
        match status? {
            status if status.success() => Ok(()),
            status => Err(format!("mcp exited {status}")),
        }
    }

    /// What `audit verify`, `sessions` and `activity` say of the log now.
    fn views(&self, log: &Log<'_>) -> Result<(), String> {
        let mut key_flags: Vec<OsString> = Vec::new();
        if let Some(key) = log.key {
            key_flags.extend(["--key-file".into(), key.as_os_str().to_owned()]);
        }
        let verify = self
            .command()
            .args(["audit", "verify"])
            .arg(&log.log)
            .arg("--anchor-file")
            .arg(&log.anchor)
            .args(&key_flags)
            .output()
            .map_err(|e| e.to_string())?;
        if !verify.status.success() {
            return Err(format!(
                "{}: audit verify: {}: {}",
                log.name,
                verify.status,
                String::from_utf8_lossy(&verify.stdout)
            ));
        }
        self.save(&format!("{}.verify.txt", log.name), &verify.stdout)?;
        for view in ["sessions", "activity"] {
            let output = self
                .command()
                .args(["audit", view])
                .arg(&log.log)
                .args(&key_flags)
                .arg("--json")
                .output()
                .map_err(|e| e.to_string())?;
            if !output.status.success() {
                return Err(format!("{}: audit {view}: {}", log.name, output.status));
            }
            self.save(&format!("{}.{view}.jsonl", log.name), &output.stdout)?;
        }
        Ok(())
    }

    fn save(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        std::fs::write(self.dir.join(name), bytes).map_err(|e| format!("{name}: {e}"))
    }
}
