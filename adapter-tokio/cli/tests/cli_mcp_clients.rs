//! `spillguard mcp` and `spillguard stdio` driven by real MCP clients and
//! hosts (the official SDK clients, Claude Code, the Inspector), each from a
//! script in `tests/peers` that checks every fact itself and exits non-zero
//! at the first wrong one. The SDKs are installed into `target/peers` by
//! `.ci/peers.sh` (or wherever `SPILLGUARD_PEERS` points); in CI
//! (`CI=true`) a missing peer fails the test, elsewhere it is skipped with
//! the command that installs it.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root, where `.ci/peers.sh` installs the peers.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file of this package's `tests/peers`.
fn peer_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(name)
}

/// The installed peers, or `None` (outside CI) when `needs` is missing.
fn peers(needs: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("SPILLGUARD_PEERS")
        .map_or_else(|| root().join("target/peers"), PathBuf::from);
    if dir.join(needs).exists() {
        return Some(dir);
    }
    skip_or_fail(&format!(
        "{needs} is not installed under {}: run .ci/peers.sh",
        dir.display()
    ));
    None
}

fn skip_or_fail(message: &str) {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
    eprintln!("skipped: {message}");
}

/// Runs a peer script and fails with its whole output unless it exits 0.
fn run_script(mut command: Command, peers: &Path) {
    let shown = format!("{command:?}");
    let output = command
        .env("SPILLGUARD_PEERS", peers)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{shown} ended with {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    // The script's figures (latency, times), shown with --nocapture.
    println!("{stdout}");
}

#[test]
fn typescript_sdk_client_drives_spillguard_mcp() {
    let Some(peers) = peers("npm/node_modules/@modelcontextprotocol/sdk/package.json") else {
        return;
    };
    if Command::new("node").arg("--version").output().is_err() {
        skip_or_fail("node is not on PATH: install Node 20 or later, then run .ci/peers.sh");
        return;
    }
    let mut node = Command::new("node");
    node.arg(peer_file("mcp_bridge.mjs"))
        .arg(env!("CARGO_BIN_EXE_spillguard"))
        .arg(peer_file("mcp_tools.toml"));
    run_script(node, &peers);
}

#[test]
fn python_sdk_client_drives_spillguard_mcp() {
    let Some(peers) = peers("venv/bin/python") else {
        return;
    };
    let mut python = Command::new(peers.join("venv/bin/python"));
    python
        .arg(peer_file("mcp_bridge.py"))
        .arg(env!("CARGO_BIN_EXE_spillguard"))
        .arg(peer_file("mcp_tools.toml"));
    run_script(python, &peers);
}

/// Tools with limits and a sandbox, through the Python SDK client: each
/// card states the tool's bounds, and each call is held to them (root,
/// cgroups and Landlock, as in CI).
#[test]
fn python_sdk_client_calls_tools_held_to_their_limits_and_sandbox() {
    let Some(peers) = peers("venv/bin/python") else {
        return;
    };
    if !rustix::process::geteuid().is_root() {
        skip_or_fail("the limits need root (cgroups)");
        return;
    }
    let mut python = Command::new(peers.join("venv/bin/python"));
    python
        .arg(peer_file("mcp_limits.py"))
        .arg(env!("CARGO_BIN_EXE_spillguard"));
    run_script(python, &peers);
}

/// `spillguard stdio` (and `spillguard mcp`) under the Node-based hosts:
/// a plain `child_process` with socketpairs, the TypeScript SDK client to
/// two real servers and to one that crashes, Claude Code's `mcp list`
/// health check, and the MCP Inspector's CLI; each beside its control.
#[test]
fn node_based_hosts_drive_spillguard_stdio_beside_their_controls() {
    let Some(peers) = peers("npm/node_modules/.bin/claude") else {
        return;
    };
    for needs in [
        "npm/node_modules/.bin/mcp-inspector",
        "npm/node_modules/@modelcontextprotocol/sdk/package.json",
        "venv/bin/mcp-server-time",
    ] {
        assert!(
            peers.join(needs).exists(),
            "{needs} is missing under {}: run .ci/peers.sh",
            peers.display()
        );
    }
    let mut node = Command::new("node");
    node.arg(peer_file("stdio_hosts.mjs"))
        .arg(env!("CARGO_BIN_EXE_spillguard"))
        .arg(peer_file("mcp_tools.toml"));
    run_script(node, &peers);
}

/// `spillguard stdio --mcp --restart on-failure` in front of a server that
/// crashes on its third `tools/call`, under the official MCP Python SDK
/// client: the third call gets the crash error within 1 s, the fourth is
/// answered by a new server that was given the client's `initialize`, the
/// client got `tools/list_changed`, the record counts one restart.
#[test]
fn python_sdk_client_keeps_its_session_across_a_server_crash() {
    let Some(peers) = peers("venv/bin/python") else {
        return;
    };
    let mut python = Command::new(peers.join("venv/bin/python"));
    python
        .arg(peer_file("restart_python.py"))
        .arg(env!("CARGO_BIN_EXE_spillguard"));
    run_script(python, &peers);
}

/// The same under the TypeScript SDK client (socketpairs from Node);
/// Claude Code's `claude mcp list` of a server whose first start fails:
/// back and Connected through the guard, which restarted it once; and a
/// scripted Claude Code session (`claude -p`, its model a stand-in for
/// the Messages API on 127.0.0.1) whose third tool call crashes the
/// server: that call gets the crash error, the fourth the new server's
/// answer, in the same session.
#[test]
fn node_hosts_keep_their_session_across_a_server_crash() {
    let Some(peers) = peers("npm/node_modules/.bin/claude") else {
        return;
    };
    for needs in [
        "npm/node_modules/@modelcontextprotocol/sdk/package.json",
        "venv/bin/python",
    ] {
        assert!(
            peers.join(needs).exists(),
            "{needs} is missing under {}: run .ci/peers.sh",
            peers.display()
        );
    }
    let mut node = Command::new("node");
    node.arg(peer_file("restart_hosts.mjs"))
        .arg(env!("CARGO_BIN_EXE_spillguard"));
    run_script(node, &peers);
}
