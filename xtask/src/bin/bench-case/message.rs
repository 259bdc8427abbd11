//! `mcp-message`: one JSON-RPC message of `--bytes` (its newline included)
//! through `--spillguard stdio --mcp --max-message-bytes --max-message`,
//! from a server that streams it (`printf`, `head -c … /dev/zero | tr`,
//! `printf`: none of them holds it), read and counted here as it comes;
//! then the guard's peak resident set (`ru_maxrss` of
//! getrusage(RUSAGE_CHILDREN): the largest child this process reaped, the
//! guard; the server's small processes are reaped by the guard). Checks:
//! exit status 0, and the message forwarded whole when it fits the
//! maximum, none of it when it does not (it is diverted).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Instant;

use nix::sys::resource::{UsageWho, getrusage};

use crate::{Args, Measured, micros};

/// The head of the message; a string of `a`s and `"}` and a newline follow.
const HEAD: &str = r#"{"jsonrpc":"2.0","id":1,"result":""#;

/// Runs the case.
pub fn run(args: &Args) -> Result<Measured, String> {
    let spillguard = args
        .spillguard
        .as_ref()
        .ok_or_else(|| "this case needs --spillguard PATH".to_owned())?;
    let max = args
        .max_message
        .ok_or_else(|| "this case needs --max-message N".to_owned())?;
    let len = args.bytes;
    let fill = len
        .checked_sub((HEAD.len() + 3) as u64)
        .ok_or_else(|| format!("--bytes {len} is shorter than a message"))?;
    let script =
        format!("printf '%s' '{HEAD}'; head -c {fill} /dev/zero | tr '\\0' a; printf '\"}}\\n'");
    let started = Instant::now();
    let mut child = Command::new(spillguard)
        .args([
            "stdio",
            "--mcp",
            "--max-message-bytes",
            &max.to_string(),
            "--",
        ])
        .args(["sh", "-c", &script])
        // The client's end stays open until the message has come: an
        // early end of stdin would start the server's shutdown.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", spillguard.display()))?;
    let mut forwarded = 0u64;
    if let Some(mut stdout) = child.stdout.take() {
        let mut buffer = vec![0; 1 << 16];
        loop {
            match stdout.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => forwarded += n as u64,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(format!("cannot read the output: {error}")),
            }
        }
    }
    drop(child.stdin.take());
    let status = child
        .wait()
        .map_err(|error| format!("cannot wait for spillguard: {error}"))?;
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN)
        .map_err(|error| format!("getrusage(RUSAGE_CHILDREN): {error}"))?;
    let mut measured = Measured::new("mcp-message");
    measured
        .line
        .number("wall_us", micros(started.elapsed()))
        .number(
            "child_maxrss_kib",
            u64::try_from(usage.max_rss()).unwrap_or(0),
        )
        .number("message_bytes", len)
        .number("max_message_bytes", max)
        .number("forwarded_bytes", forwarded);
    measured.check(status.success(), || {
        format!("spillguard ended with {status}")
    });
    let expected = if len <= max { len } else { 0 };
    measured.check(forwarded == expected, || {
        format!("{forwarded} bytes forwarded, {expected} expected")
    });
    Ok(measured)
}
