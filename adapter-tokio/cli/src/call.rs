//! Every call the `run` command makes into the library: the host built
//! from the flags, the helper started and waited for, and the printed line
//! made from its outcome. Kept in one place so that a change of the
//! adapter's API touches this file only.
//!
//! With `--debug-on-signal`, SIGUSR1 is a debug grant that reaches the
//! running call, and SIGUSR2 its end.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use spillguard_std::proto::AuditEvent;
use spillguard_std::proto::audit::note::SignerKey;
use spillguard_std::proto::trace::CallTrace;
use spillguard_std::proto::{CallRecord, Config, DebugGrant};
use spillguard_std::{
    AuditSink, ChainedFileAudit, ChainedFileOptions, CheckpointOptions, HelperCommand, HostOptions,
    KeySource, OpenFailure,
};

use crate::args::{AuditFlags, ResultMode, RunArgs, StdioArgs, UsageError};
use crate::audit_export::AuditExport;

pub use spillguard_std::{CallHandle, HelperStdin, HelperStdout, Host, TapFn};

/// The host for these flags: the config file (if any), overridden by the
/// flags, validated as a whole; the audit log opened when asked for.
pub fn prepare(run: &RunArgs) -> Result<(Host, Telemetry), UsageError> {
    prepare_with(run, None)
}

/// [`prepare`] for `stdio`: also the stdin close grace, when given.
pub fn prepare_stdio(stdio: &StdioArgs) -> Result<(Host, Telemetry), UsageError> {
    prepare_with(
        &stdio.run,
        stdio.stdin_close_grace_ms.map(Duration::from_millis),
    )
}

fn prepare_with(
    run: &RunArgs,
    stdin_close_grace: Option<Duration>,
) -> Result<(Host, Telemetry), UsageError> {
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

    let telemetry = Telemetry::open(
        run.otel_file.as_deref(),
        config.redact_extra_patterns.clone(),
    )?;
    let audit = open_audit(&run.audit, telemetry.audit_export())?;
    let telemetry_on = telemetry.is_on();
    let options = HostOptions {
        deadline: run.deadline_ms.map(Duration::from_millis),
        post_exit_drain: run.drain_window_ms.map(Duration::from_millis),
        stdin_close_grace,
        audit,
        // With an OpenTelemetry file, every call is a span, in the trace
        // this program was given or in one of its own.
        start_traces: telemetry_on,
        ..HostOptions::default()
    };
    let host = Host::new(config, options)
        .map_err(|e| UsageError(format!("invalid configuration: {e}")))?;
    if let Some(seconds) = run.debug_for {
        let ceiling = host.config().debug_ceiling_bytes;
        host.grant_debug(Duration::from_secs(seconds), ceiling)
            .map_err(|e| UsageError(format!("--debug-for: {e}")))?;
    }
    if let Some(seconds) = run.debug_on_signal {
        debug_on_signals(&host, Duration::from_secs(seconds))?;
    }
    Ok((host, telemetry))
}

/// The signer key in `file` (`--checkpoint-key-file`): a regular file
/// holding a key in the signed-note form `audit keygen` writes.
fn signer_key(file: &Path) -> Result<SignerKey, UsageError> {
    let fail = |why: String| UsageError(format!("--checkpoint-key-file: {why}"));
    match std::fs::metadata(file) {
        Ok(meta) if !meta.is_file() => {
            return Err(fail(format!("{} is not a regular file", file.display())));
        }
        Ok(_) => {}
        Err(error) => return Err(fail(format!("cannot read {}: {error}", file.display()))),
    }
    let text = std::fs::read_to_string(file)
        .map_err(|error| fail(format!("cannot read {}: {error}", file.display())))?;
    SignerKey::parse(&text).map_err(|error| fail(error.to_string()))
}

/// The audit log the flags name, opened (and checked against its anchor
/// when one is kept), or `None` without `--audit`. With `export`, each
/// record appended is sent on as an OTLP log record.
pub fn open_audit(
    flags: &AuditFlags,
    export: Option<AuditExport>,
) -> Result<Option<Arc<dyn AuditSink>>, UsageError> {
    let Some(path) = &flags.audit else {
        return Ok(None);
    };
    let key = match &flags.audit_key_file {
        Some(file) => Some(
            KeySource::File(file.clone())
                .load()
                .map_err(|e| UsageError(e.to_string()))?,
        ),
        None => None,
    };
    let options = ChainedFileOptions {
        key,
        anchor_file: flags.anchor_out.clone(),
        lock_wait: flags
            .audit_wait_ms
            .map_or(spillguard_std::DEFAULT_LOCK_WAIT, Duration::from_millis),
        checkpoint: match (&flags.checkpoint_key_file, flags.checkpoint_path()) {
            (Some(file), Some(out)) => Some(CheckpointOptions::new(signer_key(file)?, out)),
            _ => None,
        },
        ..ChainedFileOptions::default()
    };
    let log = ChainedFileAudit::open(path, options).map_err(|e| {
        if let OpenFailure::CheckpointFiles(why) = &e.failure {
            // Nothing was created: said in the terms of the flag that
            // chose the checkpoint's path.
            return UsageError(match flags.checkpoint_out {
                Some(_) => format!("--checkpoint-out: {why}"),
                None => {
                    format!("--checkpoint-key-file: {why} (another path: --checkpoint-out FILE)")
                }
            });
        }
        let message = format!("cannot open the {e}");
        if e.is_write_failure() {
            // Not bad input: the log could not be written (a full disk).
            // Kept with the audit failures, so the command exits with
            // their status.
            AUDIT_ERRORS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(message.clone());
        }
        UsageError(message)
    })?;
    let export = export.map(|export| export.sealed(flags.audit_key_file.is_some()));
    if let Some(export) = &export {
        for own in log.opening_records() {
            export.own(own);
        }
    }
    Ok(Some(
        Arc::new(Reported { log, export }) as Arc<dyn AuditSink>
    ))
}

/// The audit log, every write that failed said on stderr at once and kept
/// for the end of the command ([`audit_errors`]): the record counts them,
/// and `run` and `stdio` exit non-zero. With `export`, each record
/// appended is sent on as an OTLP log record.
struct Reported {
    log: ChainedFileAudit,
    export: Option<AuditExport>,
}

/// The failed audit writes of this process, in order (one log per
/// process).
static AUDIT_ERRORS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

impl AuditSink for Reported {
    fn write(&self, event: &AuditEvent) -> std::io::Result<()> {
        self.write_in_span(event, None)
    }

    fn write_in_span(&self, event: &AuditEvent, span: Option<&CallTrace>) -> std::io::Result<()> {
        let (written, failed) = match self.log.append(event) {
            Ok(appended) => (Some(appended), None),
            Err(failure) => (failure.written.map(|b| *b), Some(failure.error)),
        };
        // A record written before a later step failed is in the log: it
        // is sent on too.
        if let (Some(export), Some(appended)) = (&self.export, &written) {
            export.event(appended, event, span);
        }
        let Some(error) = failed else {
            return Ok(());
        };
        let text = format!("audit log {}: {error}", self.log.path().display());
        // Said at once (`mcp` serves on), kept for the exit status.
        eprintln!("spillguard: {text}");
        AUDIT_ERRORS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(text);
        Err(error)
    }
}

/// Why each audit write of this process failed so far, in order.
pub fn audit_errors() -> Vec<String> {
    AUDIT_ERRORS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// `--debug-on-signal S`: a thread that turns each SIGUSR1 into a debug
/// grant of `duration` (up to `debug_ceiling_bytes` per call), which
/// reaches the running call, and each SIGUSR2 into its revocation.
/// Registered before the helper starts, so that no signal is missed; the
/// duration is checked here, so a bad one is a usage error, not a signal
/// ignored later.
fn debug_on_signals(host: &Host, duration: Duration) -> Result<(), UsageError> {
    use signal_hook::consts::{SIGUSR1, SIGUSR2};

    let ceiling = host.config().debug_ceiling_bytes;
    DebugGrant::new(host.config(), Instant::now(), duration, ceiling)
        .map_err(|e| UsageError(format!("--debug-on-signal: {e}")))?;
    let mut signals = signal_hook::iterator::Signals::new([SIGUSR1, SIGUSR2])
        .map_err(|e| UsageError(format!("--debug-on-signal: {e}")))?;
    let host = host.clone();
    std::thread::Builder::new()
        .name("spillguard-debug-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if signal == SIGUSR1 {
                    // Checked above: the grant cannot be refused.
                    let _ = host.grant_debug(duration, ceiling);
                } else {
                    host.revoke_debug();
                }
            }
        })
        .map_err(|e| UsageError(format!("--debug-on-signal: {e}")))?;
    Ok(())
}

/// Cancels a running call (stops the helper's group, the record is still
/// made).
pub type Cancel = Box<dyn Fn() + Send + 'static>;

/// The line printed: every record field, then the excerpt and stdout,
/// and with `--result json` the parsed result as `result` (null when
/// there was none; the record's `result_kind` says what it reported).
#[derive(Debug, Serialize)]
pub struct Line {
    #[serde(flatten)]
    pub record: CallRecord,
    pub stderr_excerpt: String,
    stdout: String,
    /// The value: with `--result json`, what the helper printed.
    #[serde(rename = "result", skip_serializing_if = "Option::is_none")]
    result_value: Option<serde_json::Value>,
}

/// Runs the helper of `run` (its program and arguments, no shell) as one
/// action call with a random call id (`c_` and 16 hex digits) in a
/// session of its own (`s_…`, as random); `started` is handed a function that
/// cancels the call as soon as the call exists. Returns the line to print.
pub fn run_helper(host: &Host, run: RunArgs, started: impl FnOnce(Cancel)) -> Line {
    let mut words = run.command.into_iter();
    let program = words.next().unwrap_or_default();
    let command = HelperCommand::new(program).args(words);
    let json = run.result == Some(ResultMode::Json);
    let builder = host
        .call(command)
        .action("run")
        .confinement(run.confine.confinement());
    let builder = match &run.session_id {
        Some(id) => builder.session_id(id.clone()),
        None => builder,
    };
    let builder = traced(builder, host.options().start_traces);
    let call = if json { builder.result_json() } else { builder }.start();
    let canceller = call.canceller();
    started(Box::new(move || canceller.cancel()));
    let outcome = call.wait();
    let result_value = json.then(|| outcome.result().cloned().unwrap_or(serde_json::Value::Null));
    Line {
        stderr_excerpt: outcome.agent_excerpt(),
        stdout: outcome.stdout.render(),
        result_value,
        record: outcome.record,
    }
}

/// With export on, the call's span is a child of the span this program
/// was given in `TRACEPARENT`, if any (without one the host starts a trace).
fn traced<'h>(
    builder: spillguard_std::CallBuilder<'h>,
    telemetry_on: bool,
) -> spillguard_std::CallBuilder<'h> {
    match telemetry_on
        .then(crate::otel::parent_from_environment)
        .flatten()
    {
        Some((parent, state)) => builder.trace_parent(parent, state),
        None => builder,
    }
}

/// Where the calls' telemetry goes: `--otel-file` and OTLP/HTTP (the
/// standard variables), each if asked for.
#[derive(Debug, Default)]
pub struct Telemetry {
    file: Option<crate::otel::OtelFile>,
    http: Option<crate::otlp_http::Exporter>,
    /// Every export passes through it (see [`crate::otel::redact`]).
    redactor: spillguard_std::proto::Redactor,
}

impl Telemetry {
    /// Opens `--otel-file` and reads the OTLP variables: a path that cannot
    /// be opened is a usage error; variables that cannot be used turn the
    /// OTLP export off, said in one line on stderr. Every export is
    /// redacted by `redactor` (the configuration's).
    pub fn open(
        otel_file: Option<&std::path::Path>,
        redactor: spillguard_std::proto::Redactor,
    ) -> Result<Self, UsageError> {
        let file = otel_file
            .map(|path| {
                crate::otel::OtelFile::open(path).map_err(|error| {
                    UsageError(format!(
                        "cannot open --otel-file {}: {error}",
                        path.display()
                    ))
                })
            })
            .transpose()?;
        // The OTLP variables are often set for a whole environment: one
        // this exporter cannot use turns export off with a warning, and the
        // command runs.
        let http = match crate::otlp_http::Settings::from_env(|name| std::env::var(name).ok()) {
            Ok(settings) => settings.and_then(|settings| {
                crate::otlp_http::Exporter::start(settings)
                    .inspect_err(|e| eprintln!("spillguard: OTLP export is off: {e}"))
                    .ok()
            }),
            Err(reason) => {
                eprintln!("spillguard: OTLP export is off: {reason}");
                None
            }
        };
        Ok(Self {
            file,
            http,
            redactor,
        })
    }

    /// Where the audit log's records go as OTLP log records: the OTLP
    /// exporter's queue, when OTLP export is on.
    pub fn audit_export(&self) -> Option<AuditExport> {
        let http = self.http.as_ref()?;
        Some(AuditExport::new(http.queue(), self.redactor.clone()))
    }

    /// Whether calls are exported at all (then each is a span).
    pub fn is_on(&self) -> bool {
        self.file.is_some() || self.http.is_some()
    }

    /// Exports the call `record` describes: appended to the file (a failed
    /// write is said now and kept with the audit failures: the command
    /// exits with their status), queued for OTLP/HTTP (never waited for).
    pub fn export(&mut self, record: &CallRecord, excerpt: &str) {
        self.export_run(record, excerpt, None);
    }

    /// [`export`](Self::export) for a server's run under `stdio
    /// --restart`: with `restarted`, the restarts before it and why the
    /// run before it ended, said on its span.
    pub fn export_run(
        &mut self,
        record: &CallRecord,
        excerpt: &str,
        restarted: Option<(u32, &str)>,
    ) {
        // A call outside any trace has no span to export.
        if !self.is_on() || record.trace_id.is_none() {
            return;
        }
        let mut requests = crate::otel::call_requests(record, excerpt);
        if let Some((restarts, reason)) = restarted {
            crate::otel::mark_restart(&mut requests, restarts, reason);
        }
        // Loss so far is said on the next span out, where the collector
        // sees it (and at the exit, on stderr).
        let dropped = self
            .http
            .as_ref()
            .map_or(0, crate::otlp_http::Exporter::dropped);
        if dropped > 0 {
            crate::otel::mark_dropped(&mut requests, dropped);
        }
        self.write(requests);
    }

    /// Exports one span of this program's own (an MCP request's).
    pub fn export_span(&mut self, span: opentelemetry_proto::tonic::trace::v1::Span) {
        if !self.is_on() {
            return;
        }
        let requests = crate::otel::CallRequests {
            traces: crate::otel::traces(crate::otel::resource(), vec![span]),
            logs: None,
        };
        self.write(requests);
    }

    /// Redacts `requests` and writes them to each way out.
    fn write(&mut self, mut requests: crate::otel::CallRequests) {
        crate::otel::redact(&mut requests, &self.redactor);
        let requests = &requests;
        if let Some(file) = &mut self.file
            && let Err(error) = file.export(requests)
        {
            let text = format!("otel file {}: {error}", file.path().display());
            eprintln!("spillguard: {text}");
            AUDIT_ERRORS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(text);
        }
        if let Some(http) = &self.http {
            http.export(&requests.traces, false);
            if let Some(logs) = &requests.logs {
                http.export(logs, true);
            }
        }
    }

    /// At the exit: waits at most `OTEL_EXPORTER_OTLP_TIMEOUT` for what is
    /// queued, and says on stderr what was not sent (an unreachable
    /// collector never changes the exit status).
    pub fn finish(self) {
        let Some(http) = self.http else {
            return;
        };
        let (tally, first_failure) = http.finish();
        if tally.failed + tally.dropped + tally.abandoned > 0 {
            eprintln!(
                "spillguard: otlp export: {} sent, {} failed, {} dropped (queue full), {} not \
                 sent by the exit's wait{}",
                tally.sent,
                tally.failed,
                tally.dropped,
                tally.abandoned,
                first_failure.map_or_else(String::new, |f| format!("; first failure: {f}"))
            );
        }
    }
}

/// One export for the telemetry's thread.
pub type TelemetryJob = Box<dyn FnOnce(&mut Telemetry) + Send>;

/// The thread that owns the telemetry and runs its exports in order; when
/// its queue closes it finishes the export (the exit's wait).
#[derive(Debug)]
pub struct TelemetryWorker {
    jobs: Mutex<Option<std::sync::mpsc::Sender<TelemetryJob>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl TelemetryWorker {
    /// Starts the thread; `None` (said on stderr) if it cannot start.
    pub fn start(mut telemetry: Telemetry) -> Option<Self> {
        let (jobs, queue) = std::sync::mpsc::channel::<TelemetryJob>();
        let thread = std::thread::Builder::new()
            .name("spillguard-telemetry".into())
            .spawn(move || {
                for job in queue {
                    job(&mut telemetry);
                }
                telemetry.finish();
            })
            .inspect_err(|e| eprintln!("spillguard: OpenTelemetry export is off: {e}"))
            .ok()?;
        Some(Self {
            jobs: Mutex::new(Some(jobs)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues `job` (dropped once the queue is closed).
    pub fn send(&self, job: TelemetryJob) {
        if let Some(jobs) = self
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            let _ = jobs.send(job);
        }
    }

    /// Closes the queue; the thread to wait for, once.
    pub fn close(&self) -> Option<std::thread::JoinHandle<()>> {
        drop(
            self.jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        self.thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl TelemetryWorker {
    /// Closes the queue and waits for the thread: every export queued has
    /// run, and the exit's wait for the collector is over.
    pub fn finish(&self) {
        if let Some(thread) = self.close() {
            let _ = thread.join();
        }
    }
}

/// Why the call was refused before anything ran, when the reason is a
/// limit or sandbox rule this machine cannot enforce (fail closed).
pub fn refused_bounds(record: &CallRecord) -> Option<&str> {
    let refused = record.state == spillguard_std::proto::State::FailedBeforeDispatch
        && record.spawn_error_kind.as_deref() == Some("unsupported");
    // A bounded call's refusal, or one that names a bound it could not
    // enforce (`contain-tree: cannot be enforced: …`, asked alone).
    let failure = record.failure.as_deref()?;
    let bounded = record.limits.is_some()
        || record.sandbox.is_some()
        || failure.contains(": cannot be enforced: ");
    (refused && bounded).then_some(failure)
}

/// The line `stdio` writes at the end: every record field, the excerpt,
/// and with `--forward-stderr` the bytes of the (redacted) stderr copy
/// that could not be written without blocking and the secrets replaced in
/// it.
#[derive(Debug, Serialize)]
pub struct StdioLine {
    #[serde(flatten)]
    pub record: CallRecord,
    pub stderr_excerpt: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_forward_dropped: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_forward_redactions: Option<u64>,
    /// With `--restart`: how often, why, and whether a crash loop ended
    /// the restarts (the record is the last run's).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<RestartSummary>,
}

/// With `--restart`, the record line's account of the restarts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestartSummary {
    /// How many times the server was started again.
    pub restarts: u32,
    /// How the run before the last restart ended (`exit status 3`,
    /// `signal 9`, `no exit status`); `null` without a restart.
    pub restart_reason: Option<String>,
    /// Whether the restarts ended in a crash loop.
    pub crash_loop: bool,
}

/// Starts the streamed call of `stdio` (its program and arguments, no
/// shell) as one action call with a random call id (`c_` and 16 hex digits) in a
/// session of its own (`s_…`, as random); `tap` sees each chunk
/// of its stderr.
pub fn start_stdio(
    host: &Host,
    stdio: &StdioArgs,
    tap: Option<Box<TapFn>>,
    call_id: Option<String>,
) -> CallHandle {
    let mut words = stdio.run.command.iter().cloned();
    let program = words.next().unwrap_or_default();
    let command = HelperCommand::new(program).args(words);
    let builder = host
        .call(command)
        .action("stdio")
        .streamed()
        .confinement(stdio.run.confine.confinement());
    let builder = match &stdio.run.session_id {
        Some(id) => builder.session_id(id.clone()),
        None => builder,
    };
    let builder = match call_id {
        Some(id) => builder.call_id(id),
        None => builder,
    };
    let builder = traced(builder, host.options().start_traces);
    match tap {
        Some(tap) => builder.stderr_tap(tap),
        None => builder,
    }
    .start()
}
