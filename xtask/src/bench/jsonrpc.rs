//! The `stdio` section's JSON-RPC rows: what `--mcp` and a Node-style
//! host's socketpairs cost.
//!
//! * **Bulk messages**: 256 JSON-RPC messages of 1 MiB each, one per line,
//!   through `spillguard stdio --mcp -- cat` against `cat` alone. Every
//!   line is held whole, checked as one JSON-RPC message and written in
//!   one piece; goal ≥ 0.9× of `cat`.
//! * **Round trips over socketpairs**: the runner hands the server a
//!   socketpair for stdin and one for stdout, as Node and Bun hosts do,
//!   initializes an MCP session with `mcp-server-time` (from the peers in
//!   `target/peers`) and times `ping` round trips, directly, through a
//!   bare relay (`bare-relay`: two threads copying, the floor any relay
//!   process pays for its two hops) and through `spillguard stdio --mcp`,
//!   the sessions open side by side and timed in turning blocks of 100
//!   (the machine's drift hits all alike); goal ≤ 1.05× of direct. A
//!   fourth session runs the guard supervising the server and carrying
//!   the host's trace into each request (`--restart on-failure
//!   --propagate-trace`, `TRACEPARENT` set): goal ≤ 1.05× of the plain
//!   guard, both sent pings whose `params._meta` carries a traceparent
//!   (which the guard then replaces with its own: the server reads the
//!   same bytes either way, so the row is the guard's own cost). A last
//!   row sends plain pings to the supervising guard: the guard adds
//!   `params._meta` to each, and the server's parsing of it shows.
//!
//! Bulk rounds are interleaved (each runs both cases back to back, the
//! order alternating); a ratio is the median of the per-round (per-block)
//! ratios.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use rustix::net::{AddressFamily, Shutdown, SocketFlags, SocketType};

use super::median;

/// One message of the bulk rows: 1 MiB with its newline.
const MESSAGE_BYTES: usize = 1 << 20;

/// Messages per bulk run.
const MESSAGES: usize = 256;

/// Goal: `--mcp` forwarding at least this share of what `cat` moves.
const BULK_GOAL: f64 = 0.9;

/// Goal: a round trip through the guard costs at most this many times a
/// direct one.
const ROUND_TRIP_GOAL: f64 = 1.05;

/// Round trips per timed block (after a warm-up of 50 per session).
const PINGS_PER_BLOCK: u32 = 100;

/// What the rows measured.
#[derive(Debug, Default)]
pub struct Measured {
    /// (cat, guarded) wall µs of the bulk run, per round.
    bulk: Vec<(u64, u64)>,
    /// (direct, bare relay, guarded) µs per round trip, per block.
    round_trips: Vec<Vec<f64>>,
    /// What failed, one line each.
    pub failures: Vec<String>,
}

/// One message line: a response whose result is a string of `x`s.
fn message(id: usize) -> Vec<u8> {
    let mut line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":\"").into_bytes();
    line.resize(MESSAGE_BYTES - 3, b'x');
    line.extend_from_slice(b"\"}\n");
    line
}

/// Wall µs of pushing [`MESSAGES`] messages through `program args`.
fn bulk(program: &Path, args: &[&str]) -> Result<u64, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    let (Some(mut stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("no pipes".into());
    };
    let lines: Vec<Vec<u8>> = (0..MESSAGES).map(message).collect();
    let expected = (MESSAGES * MESSAGE_BYTES) as u64;
    let started = Instant::now();
    let writer = std::thread::spawn(move || {
        for line in &lines {
            if stdin.write_all(line).is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0; 128 * 1024];
    let mut got = 0_u64;
    loop {
        match stdout.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n as u64,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(format!("read failed: {error}")),
        }
    }
    let wall = started.elapsed();
    let _ = writer.join();
    let status = child
        .wait()
        .map_err(|error| format!("cannot wait: {error}"))?;
    if got != expected || !status.success() {
        return Err(format!("{got} of {expected} bytes came back, {status}"));
    }
    Ok(u64::try_from(wall.as_micros()).unwrap_or(u64::MAX))
}

/// An MCP session with `program args` as the server, its stdin and stdout
/// socketpairs, initialized.
struct Session {
    child: std::process::Child,
    writer: File,
    reader: BufReader<File>,
    next_id: u32,
    line: String,
    /// The `params` each ping carries (`,"params":…`), or none.
    ping_params: &'static str,
}

/// A ping's params that name the host's trace.
const TRACED_PING: &str = ",\"params\":{\"_meta\":{\"traceparent\":\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}}";

impl Session {
    fn start(program: &Path, args: &[&str]) -> Result<Self, String> {
        Self::start_with(program, args, &[])
    }

    /// [`start`](Self::start) with `env` added to the server's environment.
    fn start_with(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Self, String> {
        let pair = || {
            rustix::net::socketpair(
                AddressFamily::UNIX,
                SocketType::STREAM,
                SocketFlags::CLOEXEC,
                None,
            )
            .map_err(|error| format!("socketpair: {error}"))
        };
        let (to_server, server_in) = pair()?;
        let (from_server, server_out) = pair()?;
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::from(server_in))
            .stdout(Stdio::from(server_out))
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
        let mut session = Self {
            child,
            writer: File::from(to_server),
            reader: BufReader::new(File::from(from_server)),
            next_id: 0,
            line: String::new(),
            ping_params: "",
        };
        session.ask(
            "initialize",
            ",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\
             \"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}",
        )?;
        session.pings(50)?;
        Ok(session)
    }

    /// One request and its answer.
    fn ask(&mut self, method: &str, params: &str) -> Result<(), String> {
        let id = self.next_id;
        self.next_id += 1;
        let request =
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\"{params}}}\n");
        self.writer
            .write_all(request.as_bytes())
            .map_err(|error| format!("write: {error}"))?;
        let want = format!("\"id\":{id}");
        loop {
            self.line.clear();
            match self.reader.read_line(&mut self.line) {
                Ok(0) => return Err(format!("the server ended before answering {method}")),
                Ok(_) if self.line.contains(&want) => return Ok(()),
                Ok(_) => {}
                Err(error) => return Err(format!("read: {error}")),
            }
        }
    }

    /// µs per round trip of `n` pings.
    fn pings(&mut self, n: u32) -> Result<f64, String> {
        let started = Instant::now();
        for _ in 0..n {
            self.ask("ping", self.ping_params)?;
        }
        Ok(started.elapsed().as_secs_f64() * 1e6 / f64::from(n))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = rustix::net::shutdown(&self.writer, Shutdown::Write);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sessions open side by side, `blocks` blocks of [`PINGS_PER_BLOCK`]
/// pings on each, the order turning: µs per round trip of each session in
/// each block.
fn round_trips(sessions: &mut [Session], blocks: u32) -> Result<Vec<Vec<f64>>, String> {
    let mut rows = Vec::new();
    for block in 0..blocks {
        let mut row = vec![0.0; sessions.len()];
        for turn in 0..sessions.len() {
            let at = (turn + block as usize) % sessions.len();
            if let (Some(session), Some(slot)) = (sessions.get_mut(at), row.get_mut(at)) {
                *slot = session.pings(PINGS_PER_BLOCK)?;
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Runs both rows for `rounds` rounds; the round trips only if `server`
/// (mcp-server-time from the peers) is there, beside `relay` (the
/// `bare-relay` binary).
pub fn measure(
    spillguard: &Path,
    relay: Option<&Path>,
    server: Option<&Path>,
    rounds: u32,
) -> Measured {
    let mut measured = Measured::default();
    let cat = Path::new("cat");
    for round in 1..=rounds {
        eprint!(
            "bench round {round}/{rounds}: 256 JSON-RPC messages of 1 MiB, cat / stdio --mcp ... "
        );
        let pair = if round % 2 == 0 {
            bulk(spillguard, &["stdio", "--mcp", "--", "cat"])
                .and_then(|g| bulk(cat, &[]).map(|c| (c, g)))
        } else {
            bulk(cat, &[])
                .and_then(|c| bulk(spillguard, &["stdio", "--mcp", "--", "cat"]).map(|g| (c, g)))
        };
        match pair {
            Ok((c, g)) => {
                eprintln!("{:.3} / {:.3} s", c as f64 / 1e6, g as f64 / 1e6);
                measured.bulk.push((c, g));
            }
            Err(error) => {
                eprintln!("FAILED");
                measured.failures.push(format!("bulk messages: {error}"));
            }
        }
    }
    if let (Some(server), Some(relay)) = (server, relay) {
        let shown = server.to_string_lossy().into_owned();
        let blocks = rounds * 8;
        eprint!(
            "bench: ping over socketpairs, {blocks} blocks of {PINGS_PER_BLOCK}: direct, bare relay, guarded, supervised side by side ... "
        );
        let guarded = [
            "stdio",
            "--mcp",
            "--",
            shown.as_str(),
            "--local-timezone",
            "UTC",
        ];
        let supervised = [
            "stdio",
            "--mcp",
            "--restart",
            "on-failure",
            "--propagate-trace",
            "--",
            shown.as_str(),
            "--local-timezone",
            "UTC",
        ];
        let host = &[(
            "TRACEPARENT",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )];
        let traced = |session: Result<Session, String>| {
            session.map(|mut session| {
                session.ping_params = TRACED_PING;
                session
            })
        };
        let sessions = [
            Session::start(server, &["--local-timezone", "UTC"]),
            Session::start(relay, &[shown.as_str(), "--local-timezone", "UTC"]),
            Session::start(spillguard, &guarded),
            traced(Session::start(spillguard, &guarded)),
            traced(Session::start_with(spillguard, &supervised, host)),
            Session::start_with(spillguard, &supervised, host),
        ]
        .into_iter()
        .collect::<Result<Vec<_>, _>>();
        match sessions.and_then(|mut sessions| round_trips(&mut sessions, blocks)) {
            Ok(rows) => {
                eprintln!("done");
                measured.round_trips = rows;
            }
            Err(error) => {
                eprintln!("FAILED");
                measured
                    .failures
                    .push(format!("socketpair round trips: {error}"));
            }
        }
    }
    measured
}

/// The median of per-round ratios `f(a, b)`, with 3 decimals.
fn median_ratio<T: Copy>(pairs: &[(T, T)], f: impl Fn(T, T) -> f64) -> f64 {
    median(
        pairs
            .iter()
            .map(|&(a, b)| (f(a, b) * 1000.0) as u64)
            .collect(),
    )
    .unwrap_or(0) as f64
        / 1000.0
}

/// Prints the rows.
pub fn print(measured: &Measured) {
    let verdict = |met: bool| if met { "met" } else { "missed" };
    if !measured.bulk.is_empty() {
        let mib_s = |wall: u64| (MESSAGES as f64) / (wall as f64 / 1e6);
        let cat = median(measured.bulk.iter().map(|p| p.0).collect()).unwrap_or(1);
        let guarded = median(measured.bulk.iter().map(|p| p.1).collect()).unwrap_or(1);
        let ratio = median_ratio(&measured.bulk, |c, g| c as f64 / g as f64);
        println!(
            "  bulk, 256 JSON-RPC messages of 1 MiB in and out (median of {} rounds):",
            measured.bulk.len()
        );
        println!(
            "    cat alone                        {:8.1} MiB/s",
            mib_s(cat)
        );
        println!(
            "    spillguard stdio --mcp -- cat    {:8.1} MiB/s   {ratio:.3}x of cat (goal >= {BULK_GOAL:.2}: {})",
            mib_s(guarded),
            verdict(ratio >= BULK_GOAL)
        );
    }
    if !measured.round_trips.is_empty() {
        let column = |at: usize| -> Vec<f64> {
            measured
                .round_trips
                .iter()
                .map(|row| row.get(at).copied().unwrap_or(f64::NAN))
                .collect()
        };
        let us = |values: &[f64]| {
            median(values.iter().map(|v| (v * 1000.0) as u64).collect()).unwrap_or(0) as f64
                / 1000.0
        };
        let (direct, relay, guarded) = (column(0), column(1), column(2));
        let (guarded_traced, supervised_traced, supervised) = (column(3), column(4), column(5));
        let pairs = |a: &[f64], b: &[f64]| -> Vec<(f64, f64)> {
            a.iter().copied().zip(b.iter().copied()).collect()
        };
        let ratio = median_ratio(&pairs(&direct, &guarded), |d, g| g / d);
        let relay_ratio = median_ratio(&pairs(&direct, &relay), |d, r| r / d);
        let over_relay = median_ratio(&pairs(&relay, &guarded), |r, g| g / r);
        println!(
            "  JSON-RPC `ping` round trips over socketpairs to mcp-server-time (median of {} blocks of {PINGS_PER_BLOCK}, side by side):",
            measured.round_trips.len()
        );
        println!(
            "    direct                           {:8.1} us per round trip",
            us(&direct)
        );
        println!(
            "    bare relay (2 copy threads)      {:8.1} us per round trip   {relay_ratio:.3}x: the floor of any relay process here",
            us(&relay)
        );
        println!(
            "    spillguard stdio --mcp           {:8.1} us per round trip   {ratio:.3}x (goal <= {ROUND_TRIP_GOAL:.2}: {}); {over_relay:.3}x of the bare relay",
            us(&guarded),
            verdict(ratio <= ROUND_TRIP_GOAL)
        );
        let own = median_ratio(&pairs(&guarded_traced, &supervised_traced), |g, s| s / g);
        let added = median_ratio(&pairs(&guarded, &supervised), |g, s| s / g);
        println!("    pings whose _meta names the host's trace:");
        println!(
            "      spillguard stdio --mcp                        {:8.1} us per round trip",
            us(&guarded_traced)
        );
        println!(
            "      ... --restart on-failure --propagate-trace    {:8.1} us per round trip   {own:.3}x (goal <= {ROUND_TRIP_GOAL:.2}: {})",
            us(&supervised_traced),
            verdict(own <= ROUND_TRIP_GOAL)
        );
        println!(
            "    plain pings, to which --propagate-trace adds _meta: {:8.1} us per round trip   {added:.3}x of stdio --mcp (the server parses the added member)",
            us(&supervised)
        );
    }
    for failure in &measured.failures {
        println!("  FAILED: {failure}");
    }
}
