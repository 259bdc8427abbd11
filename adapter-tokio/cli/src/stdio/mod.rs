//! `spillguard stdio [OPTIONS] -- PROGRAM [ARGS...]`: a transparent guard
//! between an MCP host and a stdio server.
//!
//! Two pump threads move this program's stdin to the server's stdin
//! (`input.rs`) and the server's stdout to this program's stdout
//! (`output.rs`), each chunk as soon as it arrives, whatever the
//! descriptors are (`fds.rs`): `splice(2)` from a pipe or a file into a pipe,
//! a copy otherwise, and never a wait that could hide the client's end.
//! The pipes a splice fills (without `--mcp`: this program's stdout when it
//! is a pipe, and the server's stdin unless `--restart` is given) are
//! enlarged to 1 MiB (`F_SETPIPE_SZ`; a refusal leaves them as they are):
//! each hand-off then moves up to 1 MiB, and on a loaded machine, where
//! every hand-off between processes waits for a time slice, a stream
//! through the guard takes about as long as one straight through. The
//! library's owner drains the server's stderr meanwhile; with
//! `--forward-stderr` a tap copies each chunk to this program's stderr,
//! redacted as it streams, as far as it goes without blocking
//! (`forward.rs`). The end of stdin, or SIGINT, SIGTERM
//! or SIGHUP, starts the stdio shutdown the core decides.
//!
//! With `--mcp`, stdout carries whole JSON-RPC messages only, and the
//! client's requests are noted as they go in and struck off as they are
//! answered: when the server ends (or never starts) with requests left,
//! each gets a JSON-RPC error carrying the exit status and the stderr
//! excerpt, then stdout ends. A server that ends before the client said
//! anything waits at most 5 s for the client's first request, to answer
//! it too. At the end the record line is written and the exit status
//! follows the server's: its own exit code, 128+N if signal N ended it,
//! 127 when it was never spawned, 1 for any other end without an exit
//! status, and 2 for a usage error.

mod fds;
mod forward;
mod input;
mod output;
mod relay;
mod supervise;

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::event::PollFlags;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use spillguard_host::os::{poll, read_waiting};
use spillguard_std::proto::{
    CallRecord, ClientLines, MessageInfo, PendingRequests, ServerGone, ServerLine, SessionReplay,
};

use crate::args::{StdioArgs, UsageError};
use crate::call::{self, CallHandle, Host, RestartSummary, StdioLine, TelemetryWorker};
use crate::mcp_spans::{McpSpans, own_parent};
use forward::Forward;
use opentelemetry_proto::tonic::trace::v1::Span;
use output::{Mcp, Output};
use relay::Relay;
use spillguard_std::proto::jsonrpc::trace_edit;
use spillguard_std::proto::trace::{CallTrace, TraceParent};
use spillguard_std::proto::{MessageKind, MessageScanner};
use spillguard_std::proto::{RestartMode, RestartTable, StopReason};

/// How long the stdout pump may still take, once the call finished, to
/// reach end-of-file (a descendant that left the group may hold it open).
const STDOUT_END_WAIT: Duration = Duration::from_secs(1);

/// With `--mcp`, how long a guard whose server could not start waits for
/// the client's first request, to answer it with the reason.
const FIRST_REQUEST_WAIT: Duration = Duration::from_secs(5);

/// The `[helper_restart]` table of `--config`'s file (none without one).
fn restart_table(args: &StdioArgs) -> Result<RestartTable, UsageError> {
    let Some(path) = &args.run.config else {
        return Ok(RestartTable::default());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read config {}: {e}", path.display())))?;
    RestartTable::from_toml_str(&text)
        .map_err(|e| UsageError(format!("invalid config {}: {e}", path.display())))
}

/// Exit status when the helper could not be spawned.
const NOT_SPAWNED: u8 = 127;

/// Runs the guard; see the module docs.
pub fn main(host: &Host, telemetry: call::Telemetry, args: &StdioArgs) -> ExitCode {
    let restart = restart_table(args).and_then(|table| args.restart_settings(&table));
    let (restart, retry) = match restart {
        Ok(both) => both,
        Err(error) => return usage(&error),
    };
    let descriptors = fds::own("stdin", io::stdin().as_fd())
        .and_then(|input| fds::own("stdout", io::stdout().as_fd()).map(|output| (input, output)));
    let ((input, input_kind), (output, output_kind)) = match descriptors {
        Ok(both) => both,
        Err(error) => return usage(&error),
    };
    let mut record_file = match &args.record {
        Some(path) => match OpenOptions::new().create(true).append(true).open(path) {
            Ok(file) => Some(file),
            Err(error) => {
                return usage(&UsageError(format!(
                    "cannot open --record {}: {error}",
                    path.display()
                )));
            }
        },
        None => None,
    };
    // Registered before the helper starts, so that no signal is missed.
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).ok();
    let forward = args
        .forward_stderr
        .then(own_stderr)
        .flatten()
        .map(|stderr| Forward::start(stderr, host.config().redact_extra_patterns.clone()));
    let relay = (restart.mode != RestartMode::Never).then(Relay::new);
    let started = Instant::now();
    let call = call::start_stdio(host, args, forward.as_ref().map(Forward::tap), None);
    if let Some(relay) = &relay {
        relay.running(call.canceller());
    }
    if let Some(signals) = signals {
        cancel_on_signals(signals, &call, relay.clone());
    }
    let output = Output::new(output, output_kind);
    // Exports run on a thread of their own, in order, never in a pump's way.
    let telemetry = telemetry
        .is_on()
        .then(|| TelemetryWorker::start(telemetry))
        .flatten()
        .map(Arc::new);
    let requests = args.mcp.then(|| {
        // The MCP session is the client's connection: the call's session.
        let session = args.run.session_id.as_deref();
        let session = session.unwrap_or_else(|| host.session_id());
        let replay = match (&relay, retry) {
            (None, _) => None,
            (Some(_), false) => Some(SessionReplay::new()),
            (Some(_), true) => Some(SessionReplay::with_retries()),
        };
        Requests::new(
            output.clone(),
            call.call_id(),
            session,
            telemetry.clone(),
            replay,
            args.propagates_trace(telemetry.is_some()),
        )
    });
    let (stdout_done, unused_input) = match call.streams() {
        Ok((stdin, stdout)) => {
            input::start(input, input_kind, stdin, requests.clone(), relay.clone());
            let mcp = requests.clone().map(|requests| Mcp {
                max_message: args.max_message_bytes,
                requests,
            });
            (
                Some(output::start(
                    stdout,
                    output.clone(),
                    mcp,
                    &call,
                    relay.clone(),
                )),
                None,
            )
        }
        Err(_) => (None, Some(input)),
    };
    let outcome = call.wait();
    let mut ends = supervise::Ends {
        unused_input,
        input_kind,
        stdout_done,
    };
    let (outcome, restarts, note) = match &relay {
        Some(relay) => {
            let runs = supervise::Runs {
                host,
                args,
                forward: forward.as_ref(),
                output: &output,
                requests: requests.as_ref(),
                relay,
                settings: restart,
            };
            // Each run that another follows has a record line of its own,
            // and its span, as it ends.
            let mut run_ended = |ended: &spillguard_std::proto::Outcome,
                                 restarts: RestartSummary| {
                let line = StdioLine {
                    stderr_excerpt: ended.agent_excerpt(),
                    stderr_forward_dropped: None,
                    stderr_forward_redactions: None,
                    record: ended.record.clone(),
                    restarts: Some(restarts),
                };
                if let Err(error) = write_line(&mut record_file, &line) {
                    eprintln!("spillguard: cannot write the record: {error}");
                }
                if let Some(telemetry) = &telemetry {
                    let (record, excerpt) = (line.record, line.stderr_excerpt);
                    let restarted = line
                        .restarts
                        .and_then(|r| Some((r.restarts, r.restart_reason?)));
                    telemetry.send(Box::new(move |t| {
                        let restarted = restarted.as_ref().map(|(n, why)| (*n, why.as_str()));
                        t.export_run(&record, &excerpt, restarted);
                    }));
                }
            };
            let (outcome, summary, note) =
                supervise::run(&runs, outcome, started, &mut ends, &mut run_ended);
            (outcome, Some(summary), note)
        }
        None => (outcome, None, None),
    };
    let supervise::Ends {
        unused_input,
        stdout_done,
        ..
    } = ends;
    // The server's stderr is over (the call waited for its end).
    let forwarded = forward.map(|forward| forward.finish());
    let record = outcome.record.clone();
    let stderr_excerpt = outcome.agent_excerpt();
    if let Some(requests) = &requests {
        match &unused_input {
            // The server could not start: the client's first requests are
            // answered with why.
            Some(input) if record.spawn_error_kind.is_some() => {
                read_first_request(input, requests);
            }
            Some(_) => {}
            // The server ended before the client said anything: its first
            // request is waited for, to be answered too.
            None => requests.await_first_request(FIRST_REQUEST_WAIT),
        }
        let gone = ServerGone {
            restart: note,
            ..ServerGone::from_record(&record, stderr_excerpt.clone())
        };
        // Stdout ends here, after every message the server wrote and the
        // answers for the requests it left.
        let _ = output.close(|| requests.answers(&gone));
    }
    if let Some(done) = stdout_done {
        // The pump has seen the server's stdout end (the call waited for
        // it), or a descendant holds it: either way it writes no more.
        let _ = done.recv_timeout(STDOUT_END_WAIT);
    }
    let line = StdioLine {
        stderr_excerpt,
        stderr_forward_dropped: args
            .forward_stderr
            .then(|| forwarded.map_or(0, |f| f.dropped)),
        stderr_forward_redactions: args
            .forward_stderr
            .then(|| forwarded.map_or(0, |f| f.redactions)),
        record,
        restarts,
    };
    let status = exit_status(&line.record);
    if let Err(error) = write_line(&mut record_file, &line) {
        eprintln!("spillguard: cannot write the record: {error}");
        return ExitCode::from(1);
    }
    if let Some(telemetry) = telemetry {
        let (record, excerpt) = (line.record.clone(), line.stderr_excerpt.clone());
        let restarted = (line.restarts.clone()).and_then(|r| Some((r.restarts, r.restart_reason?)));
        telemetry.send(Box::new(move |t| {
            let restarted = restarted.as_ref().map(|(n, why)| (*n, why.as_str()));
            t.export_run(&record, &excerpt, restarted);
        }));
        telemetry.finish();
    }
    // An audit write that failed was said as it failed; the status is then
    // 1 (the record has PROGRAM's own and counts the failures).
    if call::audit_errors().is_empty() {
        ExitCode::from(status)
    } else {
        ExitCode::from(1)
    }
}

/// Writes `line` as one line of JSON to `--record`'s file, else stderr.
fn write_line(record_file: &mut Option<File>, line: &StdioLine) -> io::Result<()> {
    let json = serde_json::to_string(line).map_err(io::Error::other)?;
    match record_file {
        Some(file) => writeln!(file, "{json}"),
        None => writeln!(io::stderr().lock(), "{json}"),
    }
}

fn usage(error: &UsageError) -> ExitCode {
    eprintln!("spillguard: {error}");
    ExitCode::from(2)
}

/// Reads the client (the server never ran, or is gone: nothing else does) until it
/// has sent a request, or ended, or [`FIRST_REQUEST_WAIT`] passed, noting
/// each request.
pub(super) fn read_first_request(input: &File, requests: &Requests) {
    let started = Instant::now();
    let mut lines = ClientLines::new();
    let mut buf = vec![0; 64 * 1024];
    loop {
        let left = FIRST_REQUEST_WAIT.saturating_sub(started.elapsed());
        let ready = poll(
            [(input.as_fd(), PollFlags::IN | PollFlags::RDHUP)],
            Some(left),
        );
        if left.is_zero() || !matches!(ready, Ok([r]) if r.readable) {
            return;
        }
        let read = read_waiting(input, &mut buf).unwrap_or(0);
        if read == 0 {
            return;
        }
        lines.feed(buf.get(..read).unwrap_or_default(), |info| {
            let _ = requests.note(info);
        });
        if requests.any_pending() {
            return;
        }
    }
}

/// The client's requests with `--mcp`, shared by the two pumps and the
/// end: noted as they are read, struck off as they are answered, answered
/// here when dropped for a server that does not read, and at the end for
/// a server that is gone.
#[derive(Debug)]
pub struct Requests {
    table: Mutex<Table>,
    changed: Condvar,
    output: Arc<Output>,
    call_id: String,
    /// Where the requests' spans go, with export on.
    telemetry: Option<Arc<TelemetryWorker>>,
    /// With `--propagate-trace`: the parent of a request that names none
    /// (the TRACEPARENT this program was given, if any).
    propagate: Option<Option<(TraceParent, Option<String>)>>,
}

#[derive(Debug, Default)]
struct Table {
    pending: PendingRequests,
    /// The requests' spans, with export on.
    spans: Option<McpSpans>,
    /// The client has sent something (or ended).
    heard: bool,
    /// With `--restart`: the host's session, for the next server.
    replay: Option<SessionReplay>,
}

impl Requests {
    fn new(
        output: Arc<Output>,
        call_id: &str,
        session_id: &str,
        telemetry: Option<Arc<TelemetryWorker>>,
        replay: Option<SessionReplay>,
        propagate: bool,
    ) -> Arc<Self> {
        let propagate = propagate.then(crate::otel::parent_from_environment);
        let default_parent = propagate.clone().flatten();
        Arc::new(Self {
            table: Mutex::new(Table {
                spans: telemetry.as_ref().map(|_| {
                    McpSpans::new(Some(call_id), session_id).with_default_parent(default_parent)
                }),
                replay,
                ..Table::default()
            }),
            changed: Condvar::new(),
            output,
            call_id: call_id.to_owned(),
            telemetry,
            propagate,
        })
    }

    /// Whether requests carry a span to the server (`--propagate-trace`).
    pub fn propagates(&self) -> bool {
        self.propagate.is_some()
    }

    /// The span the request `info` is to carry to the server, with
    /// `--propagate-trace`: the guard's span for it; without export (no
    /// span of the guard's), the TRACEPARENT this program was given, for
    /// a request that names no parent of its own. A batch carries none.
    fn trace_for(&self, table: &Table, info: &MessageInfo) -> Option<CallTrace> {
        let default_parent = self.propagate.as_ref()?;
        if info.kind != MessageKind::Request {
            return None;
        }
        match &table.spans {
            Some(spans) => spans.trace_of(info),
            None if own_parent(info).is_some() => None,
            None => default_parent.clone().map(|(parent, state)| CallTrace {
                trace_id: parent.trace_id,
                span_id: parent.parent_id,
                parent_span_id: None,
                flags: parent.flags & 1,
                trace_state: state,
            }),
        }
    }

    /// Requests the guard sends again (a retry after a restart), each
    /// made to carry its span as when it was first sent.
    fn traced(&self, bytes: Vec<u8>) -> Vec<u8> {
        if self.propagate.is_none() || bytes.is_empty() {
            return bytes;
        }
        let table = self.lock();
        let mut out = Vec::with_capacity(bytes.len());
        let mut scanner = MessageScanner::new();
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            scanner.reset();
            scanner.feed(body);
            let edit = scanner
                .finish()
                .and_then(|info| self.trace_for(&table, &info))
                .and_then(|trace| trace_edit(body, &trace));
            match edit {
                Some((range, with)) => {
                    let mut body = body.to_vec();
                    body.splice(range, with);
                    out.extend_from_slice(&body);
                    out.extend_from_slice(line.get(body.len()..).unwrap_or_default());
                }
                None => out.extend_from_slice(line),
            }
        }
        out
    }

    /// Hands finished spans to the export thread.
    fn export(&self, spans: impl IntoIterator<Item = Span>) {
        if let Some(telemetry) = &self.telemetry {
            for span in spans {
                telemetry.send(Box::new(move |t| t.export_span(span)));
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes read from the client, as read (kept for a replay, with
    /// `--restart`).
    pub fn client_bytes(&self, bytes: &[u8]) {
        if let Some(replay) = &mut self.lock().replay {
            replay.handle_client(bytes);
        }
    }

    /// A line the server wrote, before it is forwarded: what to do with
    /// it while a new server takes the host's session.
    pub fn server_line(&self, line: &[u8], info: &MessageInfo) -> ServerLine {
        let next = match &mut self.lock().replay {
            Some(replay) => replay.handle_server(line, info),
            None => ServerLine::Forward,
        };
        match next {
            ServerLine::Ready { to_server, to_host } => ServerLine::Ready {
                to_server: self.traced(to_server),
                to_host,
            },
            other => other,
        }
    }

    /// A new server started: what it gets first (the host's
    /// `initialize`), or why the session cannot be replayed.
    pub fn begin_replay(&self, now: Instant) -> Result<Vec<u8>, String> {
        let first = match &mut self.lock().replay {
            Some(replay) => replay.begin(now),
            None => Ok(Vec::new()),
        };
        first.map(|bytes| self.traced(bytes))
    }

    /// The server is gone and another follows: the requests in flight
    /// that go to it again (`--retry`), not to be answered now.
    pub fn retries_on_gone<'a>(
        &self,
        queued: impl IntoIterator<Item = &'a spillguard_std::proto::RawValue>,
    ) -> Vec<MessageInfo> {
        self.lock()
            .replay
            .as_mut()
            .map(|replay| replay.handle_server_gone(queued))
            .unwrap_or_default()
    }

    /// Whether a new server is taking the host's session (what the host
    /// sent waits).
    pub fn replaying(&self) -> bool {
        self.lock()
            .replay
            .as_ref()
            .is_some_and(SessionReplay::is_replaying)
    }

    /// Why the new server is refused, once its `initialize` answer is
    /// overdue at `now`.
    pub fn replay_overdue(&self, now: Instant) -> Option<String> {
        self.lock()
            .replay
            .as_mut()
            .and_then(|replay| replay.handle_timeout(now))
    }

    /// A request read from the client, before the server can see it:
    /// the span it is to carry there, with `--propagate-trace`.
    pub fn note(&self, info: &MessageInfo) -> Option<CallTrace> {
        let mut table = self.lock();
        table.pending.handle_client(info);
        let spans = table.spans.as_mut().map(|spans| spans.client(info));
        let trace = self.trace_for(&table, info);
        drop(table);
        self.export(spans.into_iter().flatten());
        trace
    }

    /// The client sent bytes (or its end) for the first time.
    pub fn input_read(&self) {
        let mut table = self.lock();
        if !table.heard {
            table.heard = true;
            self.changed.notify_all();
        }
    }

    /// Whether the client sent bytes (or its end) yet.
    pub fn heard(&self) -> bool {
        self.lock().heard
    }

    /// The client's input is over (its end, or the server's stdin gone).
    pub fn input_over(&self) {
        self.input_read();
    }

    /// A response from the server, as it is written to the client.
    pub fn answered(&self, info: &MessageInfo) {
        let mut table = self.lock();
        table.pending.handle_server(info);
        let spans = table.spans.as_mut().map(|spans| spans.server(info));
        drop(table);
        self.export(spans.into_iter().flatten());
    }

    /// A request dropped because the server does not read: answered now.
    pub fn answer_dropped(&self, info: &MessageInfo) {
        let mut table = self.lock();
        if let (Some(replay), Some(id)) = (table.replay.as_mut(), info.id.as_ref()) {
            replay.forget_call(id);
        }
        let line = table.pending.dropped(info, &self.call_id);
        let spans = line
            .as_ref()
            .and(table.spans.as_mut())
            .map(|spans| spans.answered_for_the_server(info));
        drop(table);
        if let Some(line) = line {
            let _ = self.output.write_all(&line);
        }
        self.export(spans.into_iter().flatten());
    }

    fn any_pending(&self) -> bool {
        !self.lock().pending.is_empty()
    }

    /// Waits, at most `limit`, until the client has sent something.
    fn await_first_request(&self, limit: Duration) {
        let table = self.lock();
        let _ = self
            .changed
            .wait_timeout_while(table, limit, |table| !table.heard);
    }

    /// Answers every request still pending with `gone` now: a run is
    /// over and the guard goes on.
    pub fn answer_left(&self, gone: &ServerGone) {
        let answers = self.answers(gone);
        if !answers.is_empty() {
            let _ = self.output.write_all(&answers);
        }
    }

    /// Answers every request still pending with `gone` now, except
    /// `queued` (still queued whole for the next run: they stay pending).
    /// The spans of the requests answered here are closed at the guard's
    /// end.
    pub fn answer_left_except<'a>(
        &self,
        gone: &ServerGone,
        queued: impl Iterator<Item = &'a MessageInfo>,
    ) {
        let mut table = self.lock();
        let queued: Vec<&MessageInfo> = queued.collect();
        for info in &queued {
            // Set aside (the answer made for it is not used).
            let _ = table.pending.dropped(info, &self.call_id);
        }
        let answers = table.pending.answers(gone);
        for info in queued {
            table.pending.handle_client(info);
        }
        drop(table);
        if !answers.is_empty() {
            let _ = self.output.write_all(&answers);
        }
    }

    /// The answers for every request still pending (see
    /// `PendingRequests::answers`).
    fn answers(&self, gone: &ServerGone) -> Vec<u8> {
        let mut table = self.lock();
        let answers = table.pending.answers(gone);
        let gone = spillguard_std::proto::SERVER_GONE_CODE.to_string();
        let spans = table.spans.as_mut().map(|spans| spans.close_all(&gone));
        drop(table);
        self.export(spans.into_iter().flatten());
        answers
    }
}

/// The helper's exit code; 128+N if signal N ended it; 127 if it could not
/// be spawned; 1 for any other end without an exit status.
fn exit_status(record: &CallRecord) -> u8 {
    match (record.exit_status, record.exit_signal) {
        (Some(code), _) => (code & 0xff) as u8,
        (None, Some(signal)) => 128_u8.saturating_add((signal & 0x7f) as u8),
        (None, None) if record.spawn_error_kind.is_some() => NOT_SPAWNED,
        (None, None) => 1,
    }
}

/// Turns SIGINT, SIGTERM and SIGHUP into a cancel: the stdio shutdown
/// (close stdin, the stdin close grace, TERM, grace, KILL); with `relay`
/// (`--restart`), of the run on, and no run follows.
fn cancel_on_signals(mut signals: Signals, call: &CallHandle, relay: Option<Arc<Relay>>) {
    let canceller = call.canceller();
    let _ = std::thread::Builder::new()
        .name("spillguard-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                match &relay {
                    Some(relay) => relay.stop(StopReason::StopAsked),
                    None => canceller.cancel(),
                }
            }
        });
}

/// This program's stderr as a file of its own (a duplicate descriptor:
/// writes go straight to it, unbuffered).
fn own_stderr() -> Option<File> {
    io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .map(File::from)
}
