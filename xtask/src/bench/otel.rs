//! `--only otel`: what OpenTelemetry export costs the calls.
//!
//! * 1,000 short calls (`true`) through `spillguard mcp` from the MCP
//!   Python SDK client, with OTLP/HTTP export to a sink in this process
//!   and without, side by side in each round; the ratio is the median of
//!   the per-round ratios (goal ≤ 1.05x).
//! * The same through `spillguard stdio --mcp` in front of a server
//!   written with the MCP Python SDK: every request an MCP span.
//! * A flood through `spillguard run` with `--otel-file` and without, side
//!   by side: the export happens once the call is over, so the flood's
//!   time must not move.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

/// Calls per round.
const CALLS: u32 = 1000;

/// What the section measured.
#[derive(Debug, Default)]
pub struct Measured {
    /// Per round: µs per call without export, with export.
    calls: Vec<(f64, f64)>,
    /// The same through `stdio --mcp`.
    stdio_calls: Vec<(f64, f64)>,
    /// Per round: seconds of the flood without export, with.
    flood: Vec<(f64, f64)>,
    /// Spans and log records the sink decoded.
    received: u64,
    /// Bytes per flood.
    flood_bytes: u64,
    /// What went wrong.
    pub failures: Vec<String>,
}

/// A collector that answers 200 to every request and counts them.
fn sink() -> std::io::Result<(u16, Arc<AtomicU64>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let count = Arc::new(AtomicU64::new(0));
    let counted = count.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
            let length = text
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .unwrap_or(0);
            let mut body = vec![0; length];
            if stream.read_exact(&mut body).is_ok() {
                // Spans on /v1/traces, log records on /v1/logs.
                let items = if text.starts_with("post /v1/traces") {
                    ExportTraceServiceRequest::decode(body.as_slice()).map(|request| {
                        request
                            .resource_spans
                            .iter()
                            .flat_map(|r| &r.scope_spans)
                            .map(|s| s.spans.len() as u64)
                            .sum::<u64>()
                    })
                } else {
                    ExportLogsServiceRequest::decode(body.as_slice()).map(|request| {
                        request
                            .resource_logs
                            .iter()
                            .flat_map(|r| &r.scope_logs)
                            .map(|s| s.log_records.len() as u64)
                            .sum::<u64>()
                    })
                };
                counted.fetch_add(items.unwrap_or(0), Ordering::Relaxed);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            }
        }
    });
    Ok((port, count))
}

fn calls(
    python: &Path,
    spillguard: &Path,
    endpoint: Option<&str>,
    stdio: bool,
) -> Result<f64, String> {
    let mut command = Command::new(python);
    command
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../adapter-tokio/cli/tests/peers/otel_bench.py"),
        )
        .arg(spillguard)
        .arg(CALLS.to_string())
        .args(stdio.then_some("--stdio"))
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("TRACEPARENT")
        .stderr(Stdio::inherit());
    if let Some(endpoint) = endpoint {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
    }
    let output = command
        .output()
        .map_err(|e| format!("otel_bench.py: {e}"))?;
    if !output.status.success() {
        return Err(format!("otel_bench.py ended with {}", output.status));
    }
    let line: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("otel_bench.py printed no JSON line: {e}"))?;
    let seconds = line["seconds"]
        .as_f64()
        .ok_or("otel_bench.py: no seconds")?;
    Ok(seconds * 1e6 / f64::from(CALLS))
}

fn flood(spillguard: &Path, bytes: u64, otel_file: Option<&Path>) -> Result<f64, String> {
    let mut command = Command::new(spillguard);
    command.arg("run");
    if let Some(file) = otel_file {
        command.arg("--otel-file").arg(file);
    }
    command
        .args(["--", "sh", "-c", &format!("head -c {bytes} /dev/zero 1>&2")])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let started = Instant::now();
    let status = command
        .status()
        .map_err(|e| format!("spillguard run: {e}"))?;
    if !status.success() {
        return Err(format!("spillguard run ended with {status}"));
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Runs the section: `rounds` rounds, each side by side.
pub fn measure(spillguard: &Path, python: Option<&Path>, rounds: u32, bytes: u64) -> Measured {
    let mut measured = Measured {
        flood_bytes: bytes,
        ..Measured::default()
    };
    let file = std::env::temp_dir().join(format!(
        "spillguard-bench-otel-{}.jsonl",
        std::process::id()
    ));
    match python.map(|python| (python, sink())) {
        Some((python, Ok((port, count)))) => {
            let endpoint = format!("http://127.0.0.1:{port}");
            for round in 0..rounds {
                eprintln!("bench round {}/{rounds}: otel calls ...", round + 1);
                match (
                    calls(python, spillguard, None, false),
                    calls(python, spillguard, Some(&endpoint), false),
                ) {
                    (Ok(off), Ok(on)) => measured.calls.push((off, on)),
                    (Err(e), _) | (_, Err(e)) => measured.failures.push(e),
                }
            }
            measured.received = count.load(Ordering::Relaxed);
            // Two requests (span, log) for each call that wrote stderr;
            // `true` writes none: one per call and one per MCP request.
            let expected = u64::from(rounds) * u64::from(CALLS + 10) * 2;
            if measured.failures.is_empty() && measured.received != expected {
                measured.failures.push(format!(
                    "the sink got {} requests, not {expected}",
                    measured.received
                ));
            }
            for round in 0..rounds {
                eprintln!(
                    "bench round {}/{rounds}: otel stdio --mcp calls ...",
                    round + 1
                );
                match (
                    calls(python, spillguard, None, true),
                    calls(python, spillguard, Some(&endpoint), true),
                ) {
                    (Ok(off), Ok(on)) => measured.stdio_calls.push((off, on)),
                    (Err(e), _) | (_, Err(e)) => measured.failures.push(e),
                }
            }
            // At least a span per request (and the server's call span).
            let stdio_spans = count.load(Ordering::Relaxed) - measured.received;
            let least = u64::from(rounds) * u64::from(CALLS + 10);
            if measured.failures.is_empty() && stdio_spans < least {
                measured.failures.push(format!(
                    "the sink got {stdio_spans} spans through stdio --mcp, fewer than {least}"
                ));
            }
            measured.received += stdio_spans;
        }
        Some((_, Err(e))) => measured.failures.push(format!("no sink: {e}")),
        None => measured
            .failures
            .push("no MCP Python SDK: run .ci/peers.sh to install the peers".into()),
    }
    for round in 0..rounds {
        eprintln!("bench round {}/{rounds}: otel flood ...", round + 1);
        match (
            flood(spillguard, bytes, None),
            flood(spillguard, bytes, Some(&file)),
        ) {
            (Ok(off), Ok(on)) => measured.flood.push((off, on)),
            (Err(e), _) | (_, Err(e)) => measured.failures.push(e),
        }
    }
    let _ = std::fs::remove_file(&file);
    measured
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Prints the section's table.
pub fn print(measured: &Measured) {
    println!("\n== otel: what export costs");
    for (calls, what) in [
        (&measured.calls, "calls of `true` through `spillguard mcp`"),
        (
            &measured.stdio_calls,
            "calls of an MCP Python SDK server's tool through `spillguard stdio --mcp`",
        ),
    ] {
        if calls.is_empty() {
            continue;
        }
        let ratios: Vec<f64> = calls.iter().map(|(off, on)| on / off).collect();
        let ratio = median(ratios.clone());
        println!("   {CALLS} {what} (MCP Python SDK client), OTLP/HTTP to a local sink");
        println!(
            "   without export {:.0} µs/call, with {:.0} µs/call (medians); ratio {ratio:.2}x  goal <= 1.05x  {}  per round: {}",
            median(calls.iter().map(|c| c.0).collect()),
            median(calls.iter().map(|c| c.1).collect()),
            if ratio <= 1.05 { "met" } else { "MISSED" },
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    if measured.received > 0 {
        println!("   requests the sink decoded: {}", measured.received);
    }
    if !measured.flood.is_empty() {
        let ratios: Vec<f64> = measured.flood.iter().map(|(off, on)| on / off).collect();
        println!(
            "   {} MiB flood through `spillguard run`: without {:.2} s, with --otel-file {:.2} s (medians); ratio {:.2}x  per round: {}",
            measured.flood_bytes >> 20,
            median(measured.flood.iter().map(|f| f.0).collect()),
            median(measured.flood.iter().map(|f| f.1).collect()),
            median(ratios.clone()),
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    for failure in &measured.failures {
        println!("   FAILED: {failure}");
    }
}
