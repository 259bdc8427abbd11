//! `spillguard mcp` driven by the official MCP SDK clients, which nobody
//! here wrote: the scripts in `tests/peers/` (each exits non-zero at the
//! first wrong fact and prints what it measured). The clients are
//! installed into `target/peers` by `.ci/peers.sh`; in CI (`CI=true`) a
//! missing one fails the test, elsewhere it is skipped with the command
//! that installs it.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

const SPILLGUARD: &str = env!("CARGO_BIN_EXE_spillguard");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The installed peers, or `None` (outside CI) when `needs` is missing.
fn peers(needs: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("SPILLGUARD_PEERS")
        .map_or_else(|| repo().join("target/peers"), PathBuf::from);
    if dir.join(needs).exists() {
        return Some(dir);
    }
    let message = format!(
        "{needs} is not installed under {}: run .ci/peers.sh",
        dir.display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
    eprintln!("skipped: {message}");
    None
}

/// Runs `program script SPILLGUARD TOOLS` and asserts it passed, showing
/// its output either way.
fn run_client(program: &Path, script: &str) {
    let tools = repo().join("tests/peers/mcp_tools.toml");
    let output = Command::new(program)
        .arg(repo().join(script))
        .arg(SPILLGUARD)
        .arg(&tools)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "{script} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("every check passed"),
        "{script} ended without its last check:\n{stdout}\n{stderr}"
    );
}

#[test]
fn python_sdk_client_drives_spillguard_mcp() {
    let Some(peers) = peers("venv/bin/python") else {
        return;
    };
    run_client(&peers.join("venv/bin/python"), "tests/peers/mcp_bridge.py");
}
