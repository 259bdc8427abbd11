//! The `stdio` section's restart row: how long a host waits for a
//! crashed server's successor. A Python server (plain `python3`, no
//! packages: it starts in about the time of an MCP server's interpreter)
//! runs under `spillguard stdio --mcp --restart on-failure`; each round the
//! client initializes it, asks it to crash (it notes the instant, then
//! exits 3), reads the crash error, and sends `ping` at once: the figure
//! is the time from the exit to the `ping`'s answer from the next run
//! (the backoff's first wait of 100 to 125 ms, the start, the replayed
//! `initialize`). Beside it, the same server's own start: from spawning
//! `python3` to its first answer.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The server: answers `initialize` and `ping`; `crash` writes the time
/// (Unix seconds) to the file `$1` and exits 3.
const SERVER: &str = r#"
import json, os, sys, time
for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "crash":
        with open(sys.argv[1], "w") as f:
            f.write(repr(time.time()))
        os._exit(3)
    if "id" in msg:
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {},
                  "serverInfo": {"name": "b", "version": "1"}} if method == "initialize" else {}
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result},
                         separators=(",", ":")), flush=True)
"#;

const INITIALIZE: &str = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}\n";

/// What the row measured: ms from the exit to the successor's answer, and
/// ms from spawning the server to its first answer, one per round.
#[derive(Debug, Default)]
pub struct Measured {
    latency_ms: Vec<f64>,
    start_ms: Vec<f64>,
    /// What failed, one line each.
    pub failures: Vec<String>,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

/// Reads lines until one holds `"id":ID`.
fn answer(reader: &mut impl BufRead, id: &str) -> Result<String, String> {
    let want = format!("\"id\":{id}");
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => return Err(format!("no answer to {id}")),
            Ok(_) if line.contains(&want) => return Ok(line),
            Ok(_) => {}
            Err(error) => return Err(format!("read: {error}")),
        }
    }
}

/// One restart: ms from the server's exit to its successor's answer.
fn one_restart(spillguard: &Path, died: &Path) -> Result<f64, String> {
    let died_arg = died.to_string_lossy();
    let mut child = Command::new(spillguard)
        .args([
            "stdio",
            "--mcp",
            "--restart",
            "on-failure",
            "--",
            "python3",
            "-c",
        ])
        .args([SERVER, &died_arg])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", spillguard.display()))?;
    let result = (|| {
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let mut reader = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let write = |stdin: &mut std::process::ChildStdin, text: &str| {
            stdin
                .write_all(text.as_bytes())
                .map_err(|error| format!("write: {error}"))
        };
        write(&mut stdin, INITIALIZE)?;
        answer(&mut reader, "0")?;
        write(
            &mut stdin,
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
        )?;
        write(
            &mut stdin,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"crash\"}\n",
        )?;
        let crash = answer(&mut reader, "1")?;
        if !crash.contains("restarting") {
            return Err(format!("not a crash answer: {crash}"));
        }
        write(
            &mut stdin,
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n",
        )?;
        answer(&mut reader, "2")?;
        let answered = unix_now();
        let died: f64 = std::fs::read_to_string(died)
            .map_err(|error| format!("the exit's time: {error}"))?
            .parse()
            .map_err(|error| format!("the exit's time: {error}"))?;
        drop(stdin);
        Ok((answered - died) * 1e3)
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// The server alone: ms from spawning it to its answer to `initialize`.
fn one_start(died: &Path) -> Result<f64, String> {
    let started = Instant::now();
    let mut child = Command::new("python3")
        .args(["-c", SERVER, &died.to_string_lossy()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run python3: {error}"))?;
    let result = (|| {
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let mut reader = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        stdin
            .write_all(INITIALIZE.as_bytes())
            .map_err(|error| format!("write: {error}"))?;
        answer(&mut reader, "0")?;
        Ok(started.elapsed().as_secs_f64() * 1e3)
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// `rounds` restarts and as many plain starts, interleaved.
pub fn measure(spillguard: &Path, rounds: u32) -> Measured {
    let mut measured = Measured::default();
    let died = std::env::temp_dir().join(format!("spillguard-bench-died-{}", std::process::id()));
    for round in 1..=rounds {
        eprint!("bench round {round}/{rounds}: restart latency, python3 server ... ");
        match one_start(&died).and_then(|start| one_restart(spillguard, &died).map(|l| (start, l)))
        {
            Ok((start, latency)) => {
                eprintln!("start {start:.1} ms, exit to successor's answer {latency:.1} ms");
                measured.start_ms.push(start);
                measured.latency_ms.push(latency);
            }
            Err(error) => {
                eprintln!("FAILED");
                measured.failures.push(format!("restart latency: {error}"));
            }
        }
    }
    let _ = std::fs::remove_file(&died);
    measured
}

/// Prints the row.
pub fn print(measured: &Measured) {
    let median = |values: &[f64]| {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let max = |values: &[f64]| values.iter().copied().fold(f64::NAN, f64::max);
    if !measured.latency_ms.is_empty() {
        println!(
            "  restart, `stdio --mcp --restart on-failure` (median and max of {} rounds):",
            measured.latency_ms.len()
        );
        println!(
            "    python3 server's own start to its first answer   {:7.1} ms   (max {:.1})",
            median(&measured.start_ms),
            max(&measured.start_ms)
        );
        println!(
            "    server's exit to its successor's first answer    {:7.1} ms   (max {:.1}; the backoff's first wait is 100-125 ms)",
            median(&measured.latency_ms),
            max(&measured.latency_ms)
        );
    }
    for failure in &measured.failures {
        println!("  FAILED: {failure}");
    }
}
