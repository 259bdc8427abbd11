//! `spillguard run [OPTIONS] -- PROGRAM [ARGS...]`: runs one helper through
//! the std adapter and prints its call record as one line of JSON.
//! `spillguard audit verify|sessions|activity FILE`: reads an audit log
//! offline (see `audit.rs`).

mod args;
mod audit;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use spillguard_std::core::{CallKind, CallRecord, CallSpec, Config};
use spillguard_std::{
    AuditSink, Canceller, ChainedFileAudit, ChainedFileOptions, HelperCommand, Host, HostOptions,
    KeySource,
};

use args::{Request, RunArgs, UsageError};

fn main() -> ExitCode {
    let request = match args::parse(std::env::args_os().skip(1)) {
        Ok(request) => request,
        Err(error) => return usage_error(&error),
    };
    match request {
        Request::Help => {
            print!("{}", args::HELP);
            ExitCode::SUCCESS
        }
        Request::Run(run_args) => match prepare(&run_args) {
            Ok(host) => run(&host, run_args),
            Err(error) => usage_error(&error),
        },
        Request::Audit(audit_args) => audit::main(&audit_args),
    }
}

fn usage_error(error: &UsageError) -> ExitCode {
    eprintln!("spillguard: {error}");
    ExitCode::from(2)
}

/// The host for these flags: the config file (if any), overridden by the
/// flags, validated as a whole.
fn prepare(run: &RunArgs) -> Result<Host, UsageError> {
    let mut config = match &run.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| UsageError(format!("cannot read config {}: {e}", path.display())))?;
            Config::from_toml_str(&text)
                .map_err(|e| UsageError(format!("invalid config {}: {e}", path.display())))?
        }
        None => Config::default(),
    };
    config.retain = run.retain.unwrap_or(config.retain);
    config.stderr_retained_per_call_bytes = run
        .per_call_bytes
        .unwrap_or(config.stderr_retained_per_call_bytes);
    config.stderr_agent_excerpt_bytes = run
        .excerpt_bytes
        .unwrap_or(config.stderr_agent_excerpt_bytes);
    config.shutdown_grace_seconds = run
        .grace_ms
        .map_or(config.shutdown_grace_seconds, Duration::from_millis);
    config
        .validate()
        .map_err(|e| UsageError(format!("invalid configuration: {e}")))?;

    let audit = match &run.audit {
        Some(path) => {
            let key = match &run.audit_key_file {
                Some(file) => Some(
                    KeySource::File(file.clone())
                        .load()
                        .map_err(|e| UsageError(e.to_string()))?,
                ),
                None => None,
            };
            let options = ChainedFileOptions {
                key,
                anchor_file: run.anchor_out.clone(),
                ..ChainedFileOptions::default()
            };
            let log = ChainedFileAudit::open(path, options)
                .map_err(|e| UsageError(format!("cannot open the {e}")))?;
            Some(Arc::new(log) as Arc<dyn AuditSink>)
        }
        None => None,
    };
    let options = HostOptions {
        deadline: run.deadline_ms.map(Duration::from_millis),
        post_exit_drain: run.drain_window_ms.map(Duration::from_millis),
        audit,
        ..HostOptions::default()
    };
    Host::new(config, options).map_err(|e| UsageError(format!("invalid configuration: {e}")))
}

/// The line printed: every record field, then the excerpt and stdout.
#[derive(Serialize)]
struct Line<'a> {
    #[serde(flatten)]
    record: &'a CallRecord,
    stderr_excerpt: String,
    stdout: String,
}

fn run(host: &Host, run: RunArgs) -> ExitCode {
    let command = HelperCommand::new(run.program).args(run.args);
    let spec = CallSpec {
        call_id: format!("c_{}_1", std::process::id()),
        session_id: "cli".into(),
        kind: CallKind::Action,
        action: "run".into(),
        target: command.program.to_string_lossy().into_owned(),
        summary: command.display_line(),
    };
    // Registered before the helper starts, so that no signal is missed.
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).ok();
    let call = host.start(spec, command, false);
    if let Some(signals) = signals {
        cancel_on_signals(signals, call.canceller());
    }
    let outcome = call.wait();
    let line = Line {
        record: &outcome.record,
        stderr_excerpt: outcome.agent_excerpt(),
        stdout: outcome.stdout.render(),
    };
    let written = serde_json::to_string(&line)
        .map_err(std::io::Error::other)
        .and_then(|json| writeln!(std::io::stdout().lock(), "{json}"));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("spillguard: cannot write the record: {error}");
            ExitCode::from(1)
        }
    }
}

/// The helper runs in its own process group, so a Ctrl-C at the terminal
/// reaches only this program: turn it (and TERM, HUP) into a cancel, which
/// stops the helper's group and still prints the record.
fn cancel_on_signals(mut signals: Signals, canceller: Canceller) {
    let _ = std::thread::Builder::new()
        .name("spillguard-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                canceller.cancel();
            }
        });
}
