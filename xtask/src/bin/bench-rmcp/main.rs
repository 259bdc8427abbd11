//! `bench-rmcp [--count N]`: JSON-RPC round trips (`ping`) from an rmcp
//! client to `mcp-server-time` (from `target/peers`, installed by
//! `.ci/peers.sh`), once through rmcp's own `TokioChildProcess` and once
//! through spillguard-tokio's `GuardedProcess`, back to back (the guarded
//! one first with `--guarded-first`). Prints one line: the µs per round
//! trip of each, `TokioChildProcess` first.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use rmcp::ServiceExt;
use rmcp::model::{ClientRequest, PingRequest};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use spillguard_tokio::proto::Config;
use spillguard_tokio::rmcp::GuardedProcess;
use spillguard_tokio::{Host, HostOptions};

const SERVER_ARGS: [&str; 4] = ["-m", "mcp_server_time", "--local-timezone", "UTC"];

fn python() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/peers/venv/bin/python")
}

/// µs per round trip over `count` pings (after 50 to warm up).
async fn pings(client: &RunningService<RoleClient, ()>, count: u32) -> Result<f64, String> {
    let ping = || {
        ClientRequest::PingRequest(PingRequest {
            method: Default::default(),
            extensions: Default::default(),
        })
    };
    for _ in 0..50 {
        client
            .send_request(ping())
            .await
            .map_err(|e| e.to_string())?;
    }
    let started = Instant::now();
    for _ in 0..count {
        client
            .send_request(ping())
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / f64::from(count))
}

/// µs per round trip through rmcp's own `TokioChildProcess`.
async fn direct(count: u32) -> Result<f64, String> {
    let mut command = tokio::process::Command::new(python());
    command.args(SERVER_ARGS);
    let child = TokioChildProcess::new(command).map_err(|e| e.to_string())?;
    let client = ().serve(child).await.map_err(|e| e.to_string())?;
    let per_call = pings(&client, count).await?;
    client.cancel().await.map_err(|e| e.to_string())?;
    Ok(per_call)
}

/// µs per round trip through spillguard-tokio's `GuardedProcess`.
async fn guarded(count: u32) -> Result<f64, String> {
    let host = Host::new(Config::default(), HostOptions::default()).map_err(|e| e.to_string())?;
    let transport = GuardedProcess::new(host.command(python()).args(SERVER_ARGS))
        .await
        .map_err(|e| e.to_string())?;
    let client = ().serve(transport).await.map_err(|e| e.to_string())?;
    let per_call = pings(&client, count).await?;
    client.cancel().await.map_err(|e| e.to_string())?;
    Ok(per_call)
}

/// Both, the guarded one first when asked (rounds alternate the order, so
/// that neither always runs on a warmer machine).
async fn run(count: u32, guarded_first: bool) -> Result<(f64, f64), String> {
    if guarded_first {
        let g = guarded(count).await?;
        Ok((direct(count).await?, g))
    } else {
        let d = direct(count).await?;
        Ok((d, guarded(count).await?))
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut count = 2000;
    let mut guarded_first = false;
    while let Some(flag) = args.next() {
        if flag == "--guarded-first" {
            guarded_first = true;
            continue;
        }
        match (flag.as_str(), args.next().and_then(|v| v.parse().ok())) {
            ("--count", Some(n)) if n > 0 => count = n,
            _ => {
                eprintln!("usage: bench-rmcp [--count N] [--guarded-first]");
                return ExitCode::from(2);
            }
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("bench-rmcp: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(count, guarded_first)) {
        Ok((direct, guarded)) => {
            println!("{direct:.3} {guarded:.3}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("bench-rmcp: {error}");
            ExitCode::FAILURE
        }
    }
}
