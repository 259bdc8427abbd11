//! OpenTelemetry for the command, as OTLP messages: a call's record as a
//! span (the process attributes of the semantic conventions, spillguard's
//! own under `spillguard.*`, one event per state entered and per signal),
//! its approval wait as a span beside it, its redacted stderr excerpt as a
//! log record tied to it, and an MCP request as a span above it.
//! [`OtelFile`] writes them as OTLP JSON for `--otel-file` (one export
//! request per line, the form a Collector's file exporter writes and its
//! file receiver reads); `otlp_http` sends them as protobuf.
//!
//! The resource is named by the standard variables: `OTEL_SERVICE_NAME`
//! (default `spillguard`) and `OTEL_RESOURCE_ATTRIBUTES` (`key=value`
//! pairs, comma separated, percent-encoded values).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::{Event, SpanKind};
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use spillguard_std::proto::trace::{TraceParent, trace_state};
use spillguard_std::proto::{CallRecord, Redactor, State};

/// The instrumentation scope of every span and log record.
const SCOPE: &str = "spillguard";

/// The trace context a traced parent process handed this one in its
/// environment (`TRACEPARENT`, `TRACESTATE`), if it is well formed.
pub fn parent_from_environment() -> Option<(TraceParent, Option<String>)> {
    let parent = TraceParent::parse(&std::env::var("TRACEPARENT").ok()?).ok()?;
    let state = std::env::var("TRACESTATE")
        .ok()
        .and_then(|text| trace_state(&text).ok().flatten());
    Some((parent, state))
}

/// The resource of every export: `service.name` and the pairs of
/// `OTEL_RESOURCE_ATTRIBUTES` (a malformed pair is skipped).
pub fn resource() -> Resource {
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| SCOPE.to_owned());
    let mut attributes = Vec::new();
    let listed = std::env::var("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default();
    for pair in listed.split(',') {
        let Some((key, value)) = pair.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim(), percent_decoded(value.trim()));
        if key.is_empty() || key == "service.name" {
            continue;
        }
        attributes.push(text(key, value));
    }
    attributes.insert(0, text("service.name", service));
    Resource {
        attributes,
        ..Resource::default()
    }
}

/// `%XX` escapes decoded; a malformed escape is kept as written.
pub fn percent_decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let escaped = (bytes[at] == b'%')
            .then(|| bytes.get(at + 1..at + 3))
            .flatten()
            .filter(|pair| pair.iter().all(u8::is_ascii_hexdigit))
            .and_then(|pair| std::str::from_utf8(pair).ok())
            .and_then(|pair| u8::from_str_radix(pair, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                at += 3;
            }
            None => {
                out.push(bytes[at]);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn text(key: &str, value: impl Into<String>) -> KeyValue {
    attribute(key, Value::StringValue(value.into()))
}

pub fn int(key: &str, value: i64) -> KeyValue {
    attribute(key, Value::IntValue(value))
}

fn attribute(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

/// The record's name for `value` (a state, a reason, a request id): its
/// JSON string, unquoted.
pub fn name_of(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

fn decoded_hex(text: Option<&str>) -> Vec<u8> {
    let Some(text) = text else {
        return Vec::new();
    };
    (0..text.len() / 2)
        .filter_map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// When the call was received, in nanoseconds since the Unix epoch.
fn start_ns(record: &CallRecord) -> u64 {
    record.received_at_unix_us.saturating_mul(1000)
}

fn at_offset(record: &CallRecord, offset_us: u64) -> u64 {
    start_ns(record).saturating_add(offset_us.saturating_mul(1000))
}

/// The program's file name, as `process.executable.name` names it.
fn executable_name(record: &CallRecord) -> String {
    Path::new(&record.target).file_name().map_or_else(
        || record.target.clone(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// What went wrong, as `error.type` says it: the exit code, the signal
/// that ended the helper, or the state of a call that ended otherwise.
fn error_type(record: &CallRecord) -> Option<String> {
    if let Some(signal) = record.exit_signal {
        return Some(signal_name(signal));
    }
    match record.exit_status {
        Some(0) if record.state == State::Completed => None,
        Some(code) if code != 0 => Some(code.to_string()),
        _ if record.state == State::Completed => None,
        _ => Some(name_of(&record.state)),
    }
}

/// A signal's name as `kill -l` prints it, with `SIG`.
fn signal_name(number: i32) -> String {
    let name = match number {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => return format!("SIG{number}"),
    };
    name.to_owned()
}

/// The call's span, from its record.
pub fn call_span(record: &CallRecord) -> Span {
    let executable = executable_name(record);
    let mut attributes = vec![
        text("process.executable.name", executable.clone()),
        text("spillguard.call.id", record.call_id.clone()),
        text("spillguard.session.id", record.session_id.clone()),
        text("spillguard.action", record.action.clone()),
        text("spillguard.state", name_of(&record.state)),
        int(
            "spillguard.stderr.bytes_seen",
            i64::try_from(record.stderr_bytes_seen).unwrap_or(i64::MAX),
        ),
        int(
            "spillguard.stderr.bytes_retained",
            i64::try_from(record.stderr_bytes_retained).unwrap_or(i64::MAX),
        ),
        attribute(
            "spillguard.stderr.truncated",
            Value::BoolValue(record.stderr_truncated),
        ),
        int(
            "spillguard.redactions",
            i64::try_from(
                record
                    .stderr_redactions
                    .saturating_add(record.stdout_redactions),
            )
            .unwrap_or(i64::MAX),
        ),
    ];
    if let Some(pid) = record.pid {
        attributes.push(int("process.pid", i64::from(pid)));
    }
    if let Some(code) = record.exit_status {
        attributes.push(int("process.exit.code", i64::from(code)));
    }
    if let Some(reason) = &record.cancel_reason {
        attributes.push(text("spillguard.cancel_reason", name_of(reason)));
    }
    if let Some(limit) = &record.limit_hit {
        attributes.push(text("spillguard.limit_hit", name_of(limit)));
    }
    let error = error_type(record);
    if let Some(error) = &error {
        attributes.push(text("error.type", error.clone()));
    }
    let mut events: Vec<Event> = record
        .timeline
        .iter()
        .map(|mark| Event {
            time_unix_nano: at_offset(record, mark.offset_us),
            name: name_of(&mark.state),
            ..Event::default()
        })
        .collect();
    events.extend(record.signals.iter().map(|mark| Event {
        time_unix_nano: at_offset(record, mark.offset_us),
        name: "signal".into(),
        attributes: vec![text("signal", name_of(&mark.signal))],
        ..Event::default()
    }));
    if let Some(offset) = record.card_delivered_offset_us {
        events.push(Event {
            time_unix_nano: at_offset(record, offset),
            name: "card_delivered".into(),
            ..Event::default()
        });
    }
    if let Some(offset) = record.exited_offset_us {
        events.push(Event {
            time_unix_nano: at_offset(record, offset),
            name: "exit".into(),
            ..Event::default()
        });
    }
    events.sort_by_key(|event| event.time_unix_nano);
    let end = record.timeline.last().map_or(0, |mark| mark.offset_us);
    Span {
        trace_id: decoded_hex(record.trace_id.as_deref()),
        span_id: decoded_hex(record.span_id.as_deref()),
        parent_span_id: decoded_hex(record.parent_span_id.as_deref()),
        name: executable,
        kind: SpanKind::Client as i32,
        start_time_unix_nano: start_ns(record),
        end_time_unix_nano: at_offset(record, end),
        attributes,
        events,
        status: Some(match error {
            Some(error) => Status {
                code: StatusCode::Error as i32,
                message: error,
            },
            None => Status {
                code: StatusCode::Unset as i32,
                ..Status::default()
            },
        }),
        ..Span::default()
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: SCOPE.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..InstrumentationScope::default()
    }
}

/// One export request holding `spans`.
pub fn traces(resource: Resource, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(scope()),
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

/// The call's redacted stderr excerpt as a log record tied to its span;
/// `None` when the helper wrote nothing to stderr.
pub fn excerpt_log(record: &CallRecord, excerpt: &str) -> Option<LogRecord> {
    if excerpt.is_empty() {
        return None;
    }
    let at = at_offset(
        record,
        record.timeline.last().map_or(0, |mark| mark.offset_us),
    );
    Some(LogRecord {
        time_unix_nano: at,
        observed_time_unix_nano: at,
        severity_number: SeverityNumber::Info as i32,
        body: Some(AnyValue {
            value: Some(Value::StringValue(excerpt.to_owned())),
        }),
        attributes: vec![
            text("spillguard.call.id", record.call_id.clone()),
            text("log.iostream", "stderr"),
        ],
        trace_id: decoded_hex(record.trace_id.as_deref()),
        span_id: decoded_hex(record.span_id.as_deref()),
        event_name: "spillguard.stderr.excerpt".into(),
        ..LogRecord::default()
    })
}

/// One export request holding `logs`.
pub fn logs(resource: Resource, logs: Vec<LogRecord>) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource),
            scope_logs: vec![ScopeLogs {
                scope: Some(scope()),
                log_records: logs,
                ..ScopeLogs::default()
            }],
            ..ResourceLogs::default()
        }],
    }
}

/// An MCP request's span, as the semantic conventions for MCP name it.
#[derive(Debug, Clone)]
pub struct McpRequest {
    /// The trace.
    pub trace_id: [u8; 16],
    /// The request's span.
    pub span_id: [u8; 8],
    /// The client's span, if the request named one in `params._meta`.
    pub parent_span_id: Option<[u8; 8]>,
    /// `mcp.method.name`.
    pub method: String,
    /// What the request names (`params.name`): the tool of a `tools/call`
    /// (`gen_ai.tool.name`), the prompt of a `prompts/get`
    /// (`gen_ai.prompt.name`); empty for none.
    pub tool: String,
    /// `spillguard.call.id`: the call that serves it, when that call is
    /// not the span's child (the server of `stdio --mcp`).
    pub call_id: Option<String>,
    /// `mcp.session.id`: the session of the connection (the session its
    /// calls are recorded under).
    pub session_id: String,
    /// `jsonrpc.request.id`.
    pub request_id: String,
    /// When the request was taken, in nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// When it was answered.
    pub end_ns: u64,
    /// `error.type`: `tool_error` for a result with `isError`, the
    /// JSON-RPC error code for an error answer.
    pub error: Option<String>,
}

/// The span of an MCP request (`tools/call NAME`, `prompts/get NAME`, or
/// the method alone; kind server).
pub fn mcp_span(request: &McpRequest) -> Span {
    let mut attributes = vec![text("mcp.method.name", request.method.clone())];
    match (request.method.as_str(), request.tool.is_empty()) {
        ("tools/call", false) => {
            attributes.push(text("gen_ai.tool.name", request.tool.clone()));
            attributes.push(text("gen_ai.operation.name", "execute_tool"));
        }
        ("prompts/get", false) => {
            attributes.push(text("gen_ai.prompt.name", request.tool.clone()));
        }
        _ => {}
    }
    attributes.push(text("jsonrpc.request.id", request.request_id.clone()));
    attributes.push(text("network.transport", "pipe"));
    attributes.push(text("mcp.session.id", request.session_id.clone()));
    if let Some(call_id) = &request.call_id {
        attributes.push(text("spillguard.call.id", call_id.clone()));
    }
    if let Some(error) = &request.error {
        attributes.push(text("error.type", error.clone()));
    }
    Span {
        trace_id: request.trace_id.to_vec(),
        span_id: request.span_id.to_vec(),
        parent_span_id: request
            .parent_span_id
            .map_or_else(Vec::new, |id| id.to_vec()),
        name: if request.tool.is_empty() {
            request.method.clone()
        } else {
            format!("{} {}", request.method, request.tool)
        },
        kind: SpanKind::Server as i32,
        start_time_unix_nano: request.start_ns,
        end_time_unix_nano: request.end_ns.max(request.start_ns),
        attributes,
        status: Some(Status {
            code: if request.error.is_some() {
                StatusCode::Error as i32
            } else {
                StatusCode::Unset as i32
            },
            message: request.error.clone().unwrap_or_default(),
        }),
        ..Span::default()
    }
}

/// Now, in nanoseconds since the Unix epoch.
pub fn unix_ns_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
        })
}

/// The wait for a person's approval, as a span beside the call's (a child
/// of the call's parent, the MCP request): from the card's showing to
/// the next state; `None` for a call that never waited.
pub fn approval_span(record: &CallRecord, span_id: [u8; 8]) -> Option<Span> {
    let at = record
        .timeline
        .iter()
        .position(|mark| mark.state == State::AwaitingApproval)?;
    let shown = record.timeline[at].offset_us;
    let decided = record.timeline.get(at + 1)?;
    Some(Span {
        trace_id: decoded_hex(record.trace_id.as_deref()),
        span_id: span_id.to_vec(),
        parent_span_id: decoded_hex(record.parent_span_id.as_deref()),
        name: "approval".into(),
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: at_offset(record, shown),
        end_time_unix_nano: at_offset(record, decided.offset_us),
        attributes: vec![
            text("spillguard.call.id", record.call_id.clone()),
            text("spillguard.approval", name_of(&record.approval)),
            text("spillguard.state", name_of(&decided.state)),
        ],
        ..Span::default()
    })
}

/// A call's export requests: its span, and its excerpt's log record if
/// the helper wrote to stderr.
#[derive(Debug, Clone)]
pub struct CallRequests {
    /// The span.
    pub traces: ExportTraceServiceRequest,
    /// The excerpt.
    pub logs: Option<ExportLogsServiceRequest>,
}

/// The export requests of the call `record` describes.
pub fn call_requests(record: &CallRecord, excerpt: &str) -> CallRequests {
    let resource = resource();
    let mut spans = vec![call_span(record)];
    if record.trace_id.is_some()
        && let Some(approval) = approval_span(record, spillguard_host::fresh_span_id())
    {
        spans.push(approval);
    }
    CallRequests {
        traces: traces(resource.clone(), spans),
        logs: excerpt_log(record, excerpt).map(|log| logs(resource, vec![log])),
    }
}

/// The spans of `requests`, in order.
fn spans_of(requests: &mut CallRequests) -> impl Iterator<Item = &mut Span> {
    requests
        .traces
        .resource_spans
        .iter_mut()
        .flat_map(|r| r.scope_spans.iter_mut())
        .flat_map(|s| s.spans.iter_mut())
}

/// Passes every text of `requests` through `redactor`: span names, event
/// names, status messages and the string values of every attribute (of
/// the spans, their events and the log records). What a client, a server
/// or a helper wrote (a tool's name, a method, a request id, a program's
/// path, an error) reaches an export only so; a log's body is the
/// redacted excerpt already.
pub fn redact(requests: &mut CallRequests, redactor: &Redactor) {
    let clean = |text: &mut String| {
        if !text.is_empty() {
            *text = redactor.redact(text).text;
        }
    };
    let clean_all = |attributes: &mut Vec<KeyValue>| {
        for value in attributes
            .iter_mut()
            .filter_map(|kv| kv.value.as_mut()?.value.as_mut())
        {
            if let Value::StringValue(text) = value {
                clean(text);
            }
        }
    };
    let spans = spans_of(requests);
    for span in spans {
        clean(&mut span.name);
        clean_all(&mut span.attributes);
        for event in &mut span.events {
            clean(&mut event.name);
            clean_all(&mut event.attributes);
        }
        if let Some(status) = &mut span.status {
            clean(&mut status.message);
        }
    }
    let records = requests
        .logs
        .iter_mut()
        .flat_map(|l| l.resource_logs.iter_mut())
        .flat_map(|r| r.scope_logs.iter_mut())
        .flat_map(|s| s.log_records.iter_mut());
    for record in records {
        clean_all(&mut record.attributes);
    }
}

/// Says on the call's span (`spillguard.telemetry.dropped`) how many
/// export requests the queue has dropped so far.
pub fn mark_dropped(requests: &mut CallRequests, dropped: u64) {
    let spans = spans_of(requests);
    for span in spans.take(1) {
        span.attributes.push(int(
            "spillguard.telemetry.dropped",
            i64::try_from(dropped).unwrap_or(i64::MAX),
        ));
    }
}

/// The call span of `requests` is a server's run that a restart started
/// (`stdio --restart`): the span says how many restarts came before it
/// (`spillguard.restarts`) and opens with a `restart` event naming why
/// the run before it ended (`spillguard.restart.reason`).
pub fn mark_restart(requests: &mut CallRequests, restarts: u32, reason: &str) {
    for span in spans_of(requests).take(1) {
        span.attributes
            .push(int("spillguard.restarts", i64::from(restarts)));
        span.events.insert(
            0,
            Event {
                time_unix_nano: span.start_time_unix_nano,
                name: "restart".into(),
                attributes: vec![
                    int("spillguard.restart.attempt", i64::from(restarts) + 1),
                    text("spillguard.restart.reason", reason),
                ],
                ..Event::default()
            },
        );
    }
}

/// `--otel-file`: export requests appended as lines of OTLP JSON.
///
/// The file is a regular file or a character device such as `/dev/null`;
/// a FIFO, a socket or a directory is refused when it is opened (a FIFO
/// without a reader would hold the command before its helper runs, and
/// one whose reader stalls would hold every export). A write that fails
/// part way (a full disk, the file-size limit, a short write) is cut back
/// to the file's length before it, so the file holds whole lines only and
/// the next export starts a line of its own. The cut assumes this program
/// is the file's only writer while it runs.
#[derive(Debug)]
pub struct OtelFile {
    path: PathBuf,
    file: File,
    /// A regular file: a failed write is cut back.
    regular: bool,
}

impl OtelFile {
    /// Opens (creates) `path` for appending. Its kind is checked before it
    /// is opened and again, with `fstat`, on what was opened; it is opened
    /// with `O_NONBLOCK` (then cleared), so that a FIFO put there in
    /// between cannot block the open.
    pub fn open(path: &Path) -> io::Result<Self> {
        use std::os::unix::fs::FileTypeExt;
        use std::os::unix::fs::OpenOptionsExt;

        let refused = |kind: std::fs::FileType| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "it is {}, not a regular file; give a file (or /dev/null)",
                    spillguard_std::os::file_kind(kind)
                ),
            )
        };
        let usable = |kind: std::fs::FileType| kind.is_file() || kind.is_char_device();
        match std::fs::metadata(path) {
            Ok(meta) if !usable(meta.file_type()) => return Err(refused(meta.file_type())),
            _ => {}
        }
        let nonblocking = rustix::fs::OFlags::NONBLOCK;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(i32::try_from(nonblocking.bits()).unwrap_or(0))
            .open(path)?;
        let kind = file.metadata()?.file_type();
        if !usable(kind) {
            return Err(refused(kind));
        }
        let flags = rustix::fs::fcntl_getfl(&file)?;
        rustix::fs::fcntl_setfl(&file, flags - nonblocking)?;
        Ok(Self {
            path: path.to_owned(),
            file,
            regular: kind.is_file(),
        })
    }

    /// Where the lines go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `requests` (a call's, see [`call_requests`]): each request
    /// one line, all written with one `write`. A write that fails leaves
    /// the file as it was before it (see [`OtelFile`]).
    pub fn export(&mut self, requests: &CallRequests) -> io::Result<()> {
        let mut lines = serde_json::to_string(&requests.traces).map_err(io::Error::other)?;
        lines.push('\n');
        if let Some(logs) = &requests.logs {
            lines.push_str(&serde_json::to_string(logs).map_err(io::Error::other)?);
            lines.push('\n');
        }
        let before = match self.regular {
            true => Some(self.file.metadata()?.len()),
            false => None,
        };
        let written = self.file.write_all(lines.as_bytes());
        if let (Err(error), Some(before)) = (&written, before)
            && let Err(cut) = self.file.set_len(before)
        {
            return Err(io::Error::new(
                error.kind(),
                format!("{error}; the part written could not be cut back: {cut}"),
            ));
        }
        written
    }
}
