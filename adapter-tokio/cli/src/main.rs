//! `spillguard run [OPTIONS] -- PROGRAM [ARGS...]`: runs one helper through
//! the std adapter and prints its call record as one line of JSON.
//! `spillguard stdio [OPTIONS] -- PROGRAM [ARGS...]`: guards an MCP stdio
//! server (see `stdio/mod.rs`).
//! `spillguard audit verify|sessions|activity FILE`: reads an audit log
//! offline (see `audit.rs`).
//! `spillguard mcp --tools FILE`: serves the tools of the file as an MCP
//! stdio server; with `--check`, loads and checks the file and prints its
//! tools (see `mcp/`).

mod args;
mod audit;
mod audit_export;
mod call;
mod mcp;
mod mcp_spans;
mod otel;
mod otlp_http;
mod stdio;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use args::{Cli, Command, McpArgs, RunArgs, UsageError};

/// Exit status: bad input on the command line (or a file it names).
const USAGE: u8 = 2;
/// `run`'s status when an audit write failed (the record was printed),
/// and every command's when the audit log could not be written as it was
/// opened (a full disk: nothing ran).
const AUDIT_FAILED: u8 = 3;
/// A limit or sandbox rule this machine could not enforce: nothing ran
/// (the record says which, in `failure`).
const NOT_ENFORCED: u8 = 4;

fn main() -> ExitCode {
    // A write past the file-size limit (RLIMIT_FSIZE) fails with EFBIG
    // instead of ending this program, so that the otel file and the audit
    // log are cut back to their last whole line. A handler, not an
    // ignored signal: a helper starts with the default again.
    let _ = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let args: Vec<OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => return parse_failed(&error, args.get(1..).unwrap_or_default()),
    };
    match cli.command {
        Command::Run(run_args) => match run_args.check().and_then(|()| call::prepare(&run_args)) {
            Ok((host, telemetry)) => run(&host, telemetry, run_args),
            Err(error) => usage_error(&error),
        },
        Command::Stdio(stdio_args) => {
            match stdio_args
                .check()
                .and_then(|()| call::prepare_stdio(&stdio_args))
            {
                Ok((host, telemetry)) => stdio::main(&host, telemetry, &stdio_args),
                Err(error) => usage_error(&error),
            }
        }
        Command::Audit(audit_command) => match audit_command.into_task() {
            args::AuditTask::Read(audit_args) => audit::main(&audit_args),
            args::AuditTask::Keygen(keygen) => audit::keygen(&keygen),
            args::AuditTask::Checkpoint(checkpoint) => audit::checkpoint_main(&checkpoint),
            args::AuditTask::Prove(prove) => audit::prove_main(&prove),
        },
        Command::Mcp(mcp_args) if mcp_args.check => check_tools(&mcp_args),
        Command::Mcp(mcp_args) => mcp::serve::main(&mcp_args),
    }
}

/// `--help` and `--version` print and succeed; anything else is a usage
/// error, one line on stderr.
fn parse_failed(error: &clap::Error, args: &[OsString]) -> ExitCode {
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => match error.print() {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::from(1),
        },
        _ => usage_error(&UsageError(args::usage_message(error, args))),
    }
}

/// One line on stderr; the usage status, or the audit-failure status
/// when the error is that the audit log could not be written.
fn usage_error(error: &UsageError) -> ExitCode {
    eprintln!("spillguard: {error}");
    audit_status(ExitCode::from(USAGE))
}

/// `mcp --check`: the tools as one line of JSON, or a usage error.
fn check_tools(args: &McpArgs) -> ExitCode {
    if let Err(error) = args.check() {
        return usage_error(&error);
    }
    match mcp::check(&args.tools, args.max_running, args.queue_timeout_ms) {
        Ok((json, warnings)) => match warnings
            .iter()
            .try_for_each(|warning| {
                writeln!(std::io::stderr().lock(), "spillguard: warning: {warning}")
            })
            .and_then(|()| writeln!(std::io::stdout().lock(), "{json}"))
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("spillguard: cannot write the tools: {error}");
                ExitCode::from(1)
            }
        },
        Err(error) => usage_error(&error),
    }
}

fn run(host: &call::Host, mut telemetry: call::Telemetry, run: RunArgs) -> ExitCode {
    // Registered before the helper starts, so that no signal is missed.
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).ok();
    let line = call::run_helper(host, run, |cancel| {
        if let Some(signals) = signals {
            cancel_on_signals(signals, cancel);
        }
    });
    let written = serde_json::to_string(&line)
        .map_err(std::io::Error::other)
        .and_then(|json| writeln!(std::io::stdout().lock(), "{json}"));
    if let Err(error) = written {
        eprintln!("spillguard: cannot write the record: {error}");
        return ExitCode::from(1);
    }
    telemetry.export(&line.record, &line.stderr_excerpt);
    telemetry.finish();
    if let Some(refusal) = call::refused_bounds(&line.record) {
        eprintln!("spillguard: nothing ran: {refusal}");
        return audit_status(ExitCode::from(NOT_ENFORCED));
    }
    audit_status(ExitCode::SUCCESS)
}

/// [`AUDIT_FAILED`] if an audit write failed (each was said on stderr as
/// it failed; the record counts them in `audit_failures`), else `status`.
fn audit_status(status: ExitCode) -> ExitCode {
    if call::audit_errors().is_empty() {
        status
    } else {
        ExitCode::from(AUDIT_FAILED)
    }
}

/// The helper runs in its own process group, so a Ctrl-C at the terminal
/// reaches only this program: turn it (and TERM, HUP) into a cancel, which
/// stops the helper's group and still prints the record.
fn cancel_on_signals(mut signals: Signals, cancel: call::Cancel) {
    let _ = std::thread::Builder::new()
        .name("spillguard-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                cancel();
            }
        });
}
