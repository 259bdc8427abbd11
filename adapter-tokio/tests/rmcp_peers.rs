//! Real peers through the `rmcp` feature: rmcp's client drives
//! `mcp-server-time` (PyPI) and `@modelcontextprotocol/server-everything`
//! (npm) through [`GuardedProcess`]. The peers are installed into
//! `target/peers` by `.ci/peers.sh`; in CI (`CI=true`) a missing peer fails
//! the test, elsewhere it is skipped with the command that installs it.
#![cfg(feature = "rmcp")]
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rustix::io::Errno;
use rustix::process::{Pid, test_kill_process_group};
use serde_json::{Value, json};
use spillguard_tokio::proto::{CallRecord, Config, StdoutMode};
use spillguard_tokio::rmcp::GuardedProcess;
use spillguard_tokio::{Host, HostOptions};

/// The installed peers, or `None` (outside CI) when they are missing.
fn peers(needs: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("SPILLGUARD_PEERS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/peers"),
        PathBuf::from,
    );
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

fn assert_group_gone(record: &CallRecord) {
    let pgid = Pid::from_raw(i32::try_from(record.pgid.unwrap()).unwrap()).unwrap();
    assert_eq!(test_kill_process_group(pgid), Err(Errno::SRCH));
}

fn arguments(value: Value) -> rmcp::model::JsonObject {
    value.as_object().cloned().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_drives_mcp_server_time_with_its_stderr_bounded() {
    let Some(peers) = peers("venv/bin/python") else {
        return;
    };
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    let server = host
        .command(peers.join("venv/bin/python"))
        .args(["-m", "mcp_server_time", "--local-timezone", "UTC"])
        .env("PYTHONVERBOSE", "1");
    let mut transport = GuardedProcess::new(server).await.unwrap();
    let outcome = transport.outcome();
    let client = ().serve(transport).await.unwrap();
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "mcp-time");
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["convert_time", "get_current_time"]);
    let now = client
        .call_tool(
            CallToolRequestParams::new("get_current_time")
                .with_arguments(arguments(json!({"timezone": "UTC"}))),
        )
        .await
        .unwrap();
    let now = serde_json::to_value(&now).unwrap();
    let text = now["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap()["timezone"],
        "UTC"
    );
    client.cancel().await.unwrap();
    let record = outcome.await.unwrap().record;
    assert_eq!(record.stdout_mode, StdoutMode::Streamed);
    assert!(
        record.stderr_bytes_seen > 10 * 16384,
        "{}",
        record.stderr_bytes_seen
    );
    assert_eq!(record.stderr_bytes_retained, 16384);
    assert!(record.stderr_truncated);
    assert!(record.stdin_bytes_forwarded > 0 && record.stdout_bytes_forwarded > 0);
    assert_group_gone(&record);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_drives_server_everything_and_its_echo() {
    let Some(peers) =
        peers("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    else {
        return;
    };
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    let server = host
        .command("node")
        .arg(peers.join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"));
    let mut transport = GuardedProcess::new(server.arg("stdio")).await.unwrap();
    let outcome = transport.outcome();
    let client = ().serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "echo"), "{tools:?}");
    let echoed = client
        .call_tool(
            CallToolRequestParams::new("echo").with_arguments(arguments(json!({"message": "hi"}))),
        )
        .await
        .unwrap();
    let echoed = serde_json::to_value(&echoed).unwrap();
    assert_eq!(echoed["content"][0]["text"], "Echo: hi");
    client.cancel().await.unwrap();
    let record = outcome.await.unwrap().record;
    assert_eq!(record.stdout_mode, StdoutMode::Streamed);
    assert!(record.pid.is_some());
    assert_group_gone(&record);
}
