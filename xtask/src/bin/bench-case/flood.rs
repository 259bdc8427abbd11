//! Flood cases: the helper writes `--bytes` of stderr in 64 KiB writes and
//! exits 0; each case drains it one way and measures the wall time from
//! spawn (or `Host::start`) to the reaped exit.

use std::io::{self, Read};
use std::process::Stdio;
use std::time::{Duration, Instant};

use spillguard_std::os::enlarge_pipe;
use spillguard_std::proto::{CallRecord, Config, Confinement, Limits, Signal, State};
use spillguard_std::{HelperCommand, HostOptions};

use crate::{Args, FLOOD_CHUNK, Measured, READ_BUFFER, micros};

/// The helper's command line for the flood.
fn command(args: &Args) -> Result<HelperCommand, String> {
    Ok(HelperCommand::new(args.helper()?.clone())
        .arg("--stderr-bytes")
        .arg(args.bytes.to_string())
        .arg("--chunk")
        .arg(FLOOD_CHUNK))
}

fn config_error(error: impl std::fmt::Display) -> String {
    format!("cannot make the host: {error}")
}

/// spillguard-std with the default config (tail, 16 KiB per call) and
/// options (1 MiB pipes).
pub fn std_spillguard(args: &Args) -> Result<Measured, String> {
    std_flood(args, "flood-std", None)
}

/// spillguard-std as [`std_spillguard`], the helper's tree in a control
/// group of its own with memory and process limits: what a bounded flood
/// costs. The record must also say a control group held it.
pub fn std_confined(args: &Args) -> Result<Measured, String> {
    let bounds = Confinement {
        limits: Limits {
            memory_max: Some(256 << 20),
            pids_max: Some(64),
            ..Limits::default()
        },
        ..Confinement::default()
    };
    std_flood(args, "flood-std-confined", Some(bounds))
}

/// The std adapter's flood of `case`, with `bounds` if given.
fn std_flood(args: &Args, case: &str, bounds: Option<Confinement>) -> Result<Measured, String> {
    let host = spillguard_std::Host::new(Config::default(), HostOptions::default())
        .map_err(config_error)?;
    let command = command(args)?;
    let bounded = bounds.is_some();
    let call = host.call(command).call_id("c_flood").action("bench.flood");
    let call = match bounds {
        Some(bounds) => call.confinement(bounds),
        None => call,
    };
    let start = Instant::now();
    let outcome = call.run();
    let mut measured = from_record(case, args.bytes, start.elapsed(), &outcome.record);
    let enforced = &outcome.record.enforced;
    if bounded {
        measured.check(enforced.iter().any(|m| m.starts_with("cgroup-")), || {
            format!("no control group held the flood: enforced {enforced:?}")
        });
    }
    Ok(measured)
}

/// spillguard-smol, waited for with `smol::block_on`.
pub fn smol_spillguard(args: &Args) -> Result<Measured, String> {
    let host = spillguard_smol::Host::new(Config::default(), HostOptions::default())
        .map_err(config_error)?;
    let command = command(args)?;
    let start = Instant::now();
    let outcome = smol::block_on(
        host.call(command)
            .call_id("c_flood")
            .action("bench.flood")
            .run(),
    );
    Ok(from_record(
        "flood-smol",
        args.bytes,
        start.elapsed(),
        &outcome.record,
    ))
}

/// spillguard-tokio on a multi-threaded runtime.
pub fn tokio_spillguard(args: &Args) -> Result<Measured, String> {
    let runtime = tokio_runtime()?;
    let command = command(args)?;
    let (wall, outcome) = runtime.block_on(async {
        let host = spillguard_tokio::Host::new(Config::default(), HostOptions::default())
            .map_err(config_error)?;
        let start = Instant::now();
        let outcome = host
            .call(command)
            .call_id("c_flood")
            .action("bench.flood")
            .run()
            .await;
        Ok::<_, String>((start.elapsed(), outcome))
    })?;
    Ok(from_record(
        "flood-tokio",
        args.bytes,
        wall,
        &outcome.record,
    ))
}

/// What a spillguard flood measured; the record must say the call
/// completed with exit 0, saw every byte and retained the per-call budget
/// (16 KiB by default; all of a smaller flood).
fn from_record(case: &str, bytes: u64, wall: Duration, record: &CallRecord) -> Measured {
    let budget = Config::default().stderr_retained_per_call_bytes.min(bytes);
    let mut measured = Measured::new(case);
    measured
        .line
        .number("wall_us", micros(wall))
        .number("bytes", bytes)
        .number("seen", record.stderr_bytes_seen)
        .number("retained", record.stderr_bytes_retained)
        .number("pipe_capacity", record.pipe_capacity_bytes.unwrap_or(0))
        .string("state", &format!("{:?}", record.state))
        .string("stream_end", &format!("{:?}", record.stream_end));
    measured.pgid = record.pgid;
    measured.check(record.state == State::Completed, || {
        format!("state {:?}, expected Completed", record.state)
    });
    measured.check(record.exit_status == Some(0), || {
        format!("exit {:?}, expected 0", record.exit_status)
    });
    measured.check(record.stderr_bytes_seen == bytes, || {
        format!(
            "the record saw {} stderr bytes, expected {bytes}",
            record.stderr_bytes_seen
        )
    });
    measured.check(record.stderr_bytes_retained == budget, || {
        format!(
            "the record retained {} stderr bytes, expected {budget}",
            record.stderr_bytes_retained
        )
    });
    measured
}

/// A std loop: the adapters' command, the stderr pipe enlarged to the same
/// 1 MiB, read into one 64 KiB buffer and discarded, then wait.
pub fn std_raw(args: &Args) -> Result<Measured, String> {
    let mut command = command(args)?.to_std();
    let start = Instant::now();
    let mut child = command.spawn().map_err(spawn_error)?;
    let pgid = child.id();
    let Some(mut stderr) = child.stderr.take() else {
        return Err(stop(pgid, "the helper has no stderr pipe".into()));
    };
    let capacity = enlarge_pipe(&stderr, HostOptions::DEFAULT_PIPE_SIZE);
    let mut buf = vec![0u8; READ_BUFFER];
    let mut seen = 0u64;
    loop {
        match stderr.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => seen += n as u64,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(stop(pgid, format!("reading stderr failed: {error}"))),
        }
    }
    let status = child
        .wait()
        .map_err(|error| format!("waiting for the helper failed: {error}"))?;
    Ok(from_raw(
        "flood-std-raw",
        args.bytes,
        start.elapsed(),
        seen,
        status.code(),
        capacity,
        Some(pgid),
    ))
}

/// std `Command::output()`: every byte kept in memory.
pub fn std_output(args: &Args) -> Result<Measured, String> {
    let mut command = command(args)?.to_std();
    let start = Instant::now();
    let output = command.output().map_err(spawn_error)?;
    Ok(from_raw(
        "flood-std-output",
        args.bytes,
        start.elapsed(),
        output.stderr.len() as u64,
        output.status.code(),
        None,
        None,
    ))
}

/// An async-process loop under `smol::block_on`, as the std loop.
pub fn smol_raw(args: &Args) -> Result<Measured, String> {
    use futures_lite::AsyncReadExt;

    let mut command = async_process::Command::from(command(args)?.to_std());
    // The conversion leaves the stdio unset (inherited): set it as the
    // smol adapter does.
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    smol::block_on(async {
        let start = Instant::now();
        let mut child = command.spawn().map_err(spawn_error)?;
        let pgid = child.id();
        let Some(mut stderr) = child.stderr.take() else {
            return Err(stop(pgid, "the helper has no stderr pipe".into()));
        };
        let capacity = enlarge_pipe(&stderr, HostOptions::DEFAULT_PIPE_SIZE);
        let mut buf = vec![0u8; READ_BUFFER];
        let mut seen = 0u64;
        loop {
            match stderr.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => seen += n as u64,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(stop(pgid, format!("reading stderr failed: {error}"))),
            }
        }
        let status = child
            .status()
            .await
            .map_err(|error| format!("waiting for the helper failed: {error}"))?;
        Ok(from_raw(
            "flood-smol-raw",
            args.bytes,
            start.elapsed(),
            seen,
            status.code(),
            capacity,
            Some(pgid),
        ))
    })
}

/// A tokio::process loop, as the std loop, in a task on the same
/// multi-threaded runtime as the tokio adapter's case.
pub fn tokio_raw(args: &Args) -> Result<Measured, String> {
    use tokio::io::AsyncReadExt;

    let runtime = tokio_runtime()?;
    let mut command = tokio::process::Command::from(command(args)?.to_std());
    let bytes = args.bytes;
    let task = runtime.spawn(async move {
        let start = Instant::now();
        let mut child = command.spawn().map_err(spawn_error)?;
        let pgid = child.id().unwrap_or(0);
        let Some(mut stderr) = child.stderr.take() else {
            return Err(stop(pgid, "the helper has no stderr pipe".into()));
        };
        let capacity = enlarge_pipe(&stderr, HostOptions::DEFAULT_PIPE_SIZE);
        let mut buf = vec![0u8; READ_BUFFER];
        let mut seen = 0u64;
        loop {
            match stderr.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => seen += n as u64,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(stop(pgid, format!("reading stderr failed: {error}"))),
            }
        }
        let status = child
            .wait()
            .await
            .map_err(|error| format!("waiting for the helper failed: {error}"))?;
        Ok(from_raw(
            "flood-tokio-raw",
            bytes,
            start.elapsed(),
            seen,
            status.code(),
            capacity,
            Some(pgid),
        ))
    });
    runtime
        .block_on(task)
        .map_err(|error| format!("the raw tokio task failed: {error}"))?
}

/// A multi-threaded tokio runtime with IO and time, as `#[tokio::main]`
/// makes.
pub fn tokio_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start a tokio runtime: {error}"))
}

/// What a raw flood measured; it must have read every byte, and the helper
/// must have exited 0.
fn from_raw(
    case: &str,
    bytes: u64,
    wall: Duration,
    seen: u64,
    code: Option<i32>,
    capacity: Option<u64>,
    pgid: Option<u32>,
) -> Measured {
    let mut measured = Measured::new(case);
    measured
        .line
        .number("wall_us", micros(wall))
        .number("bytes", bytes)
        .number("seen", seen)
        .number("pipe_capacity", capacity.unwrap_or(0));
    measured.pgid = pgid;
    measured.check(code == Some(0), || format!("exit {code:?}, expected 0"));
    measured.check(seen == bytes, || {
        format!("read {seen} stderr bytes, expected {bytes}")
    });
    measured
}

fn spawn_error(error: io::Error) -> String {
    format!("cannot spawn the helper: {error}")
}

/// Kills the helper's group after a failure (the cleanup reaps it) and
/// passes the error on.
fn stop(pgid: u32, error: String) -> String {
    spillguard_std::os::signal_group(pgid, Signal::Kill);
    error
}
