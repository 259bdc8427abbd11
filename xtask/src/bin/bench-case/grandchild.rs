//! Grandchild cases: the helper exits at once, leaving a grandchild in its
//! process group that holds stderr open for `--hold-ms` (writing a line
//! every 50 ms). spillguard signals the group once its post-exit drain
//! window has passed; `Command::output()` waits for the grandchild.

use std::time::Instant;

use spillguard_std::proto::{CallKind, Config, Signal};
use spillguard_std::{HelperCommand, Host, HostOptions};

use crate::{Args, Measured, micros};

fn command(args: &Args) -> Result<HelperCommand, String> {
    Ok(HelperCommand::new(args.helper()?.clone())
        .arg("--grandchild-hold-ms")
        .arg(args.hold_ms.to_string()))
}

/// spillguard-std, with the default drain window or `--drain-ms`. Reports
/// when the child's exit was observed, when the group got SIGTERM and when
/// the call reached its terminal state (offsets from `received`), and the
/// wall time from `Host::start` to the outcome.
pub fn std_spillguard(args: &Args) -> Result<Measured, String> {
    let options = HostOptions {
        post_exit_drain: args.drain_ms.map(std::time::Duration::from_millis),
        ..HostOptions::default()
    };
    let host = Host::new(Config::default(), options)
        .map_err(|error| format!("cannot make the host: {error}"))?;
    let drain = host.settings_for(CallKind::Action).post_exit_drain;
    let command = command(args)?;
    let start = Instant::now();
    let outcome = host
        .call(command)
        .call_id("c_grandchild")
        .action("bench.grandchild")
        .run();
    let wall = start.elapsed();
    let record = &outcome.record;
    let terminal = record.timeline.last().map(|mark| mark.offset_us);
    let term = record
        .signals
        .iter()
        .find(|mark| mark.signal == Signal::Term)
        .map(|mark| mark.offset_us);
    let mut measured = Measured::new("grandchild-std");
    measured
        .line
        .number("wall_us", micros(wall))
        .number("hold_ms", args.hold_ms)
        .number("drain_ms", micros(drain) / 1000)
        .number("exited_offset_us", record.exited_offset_us.unwrap_or(0))
        .number("term_offset_us", term.unwrap_or(0))
        .number("terminal_offset_us", terminal.unwrap_or(0))
        .string("state", &format!("{:?}", record.state))
        .string("stream_end", &format!("{:?}", record.stream_end))
        .boolean("descendants_signalled", record.descendants_signalled)
        .number("stderr_seen", record.stderr_bytes_seen);
    measured.pgid = record.pgid;
    measured.check(record.exit_status == Some(0), || {
        format!("exit {:?}, expected 0", record.exit_status)
    });
    measured.check(record.exited_offset_us.is_some(), || {
        "the record has no exited_offset_us".into()
    });
    measured.check(term.is_some(), || "the group was never sent SIGTERM".into());
    measured.check(record.descendants_signalled, || {
        "the record does not say descendants were signalled".into()
    });
    Ok(measured)
}

/// std `Command::output()` on the same helper: returns when the grandchild
/// closes stderr, i.e. when it exits on its own.
pub fn std_output(args: &Args) -> Result<Measured, String> {
    let mut command = command(args)?.to_std();
    let start = Instant::now();
    let output = command
        .output()
        .map_err(|error| format!("cannot spawn the helper: {error}"))?;
    let wall = start.elapsed();
    let mut measured = Measured::new("grandchild-std-output");
    measured
        .line
        .number("wall_us", micros(wall))
        .number("hold_ms", args.hold_ms)
        .number("stderr_seen", output.stderr.len() as u64);
    let code = output.status.code();
    measured.check(code == Some(0), || format!("exit {code:?}, expected 0"));
    Ok(measured)
}
