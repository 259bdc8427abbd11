//! The `spillguard` binary as the CLI tests run it.
#![allow(dead_code, clippy::unwrap_used)]

use std::process::{Command, Output, Stdio};

/// Runs `spillguard ARGS` with stdin closed and collects its output.
pub fn spillguard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The one-line message of a usage error: exit status 2, nothing on
/// stdout, exactly one line on stderr.
pub fn usage_failure(args: &[&str]) -> String {
    let output = spillguard(args);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
    assert_eq!(output.stdout, b"", "{args:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr.trim_end().to_owned()
}

/// A client of `spillguard mcp ...` over the server's own stdin and
/// stdout: one JSON-RPC message per line each way, the server's lines
/// read on a thread so that a server that goes quiet fails the test
/// instead of hanging it.
pub struct McpClient {
    server: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
}

impl McpClient {
    /// Starts `spillguard ARGS` in `dir`, its stderr dropped.
    pub fn start(args: &[&str], dir: &std::path::Path) -> Self {
        use std::io::BufRead;
        let mut server = Command::new(env!("CARGO_BIN_EXE_spillguard"))
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = server.stdin.take();
        let stdout = server.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let message =
                    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
                if tx.send(message).is_err() {
                    return;
                }
            }
        });
        Self {
            server,
            stdin,
            lines,
        }
    }

    /// Sends one message.
    pub fn send(&mut self, message: serde_json::Value) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// The next message the server writes, within 30 s.
    pub fn next(&self) -> serde_json::Value {
        self.lines
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("a line from the server within 30 s")
    }

    /// `initialize` (protocol 2025-06-18, as client `name`, with
    /// `capabilities`) and its answer, then `notifications/initialized`.
    pub fn initialize(&mut self, name: &str, capabilities: serde_json::Value) {
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": capabilities,
            "clientInfo": {"name": name, "version": "1"}}}),
        );
        let answer = self.next();
        assert_eq!(answer["id"], "init", "{answer}");
        self.send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    /// Closes the server's stdin and returns its exit status.
    pub fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        self.server.wait().unwrap().code()
    }
}
