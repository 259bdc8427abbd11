//! OpenTelemetry for the command: a call's record as an OTLP span (the
//! process attributes of the semantic conventions, spillguard's own under
//! `spillguard.*`, one event per state entered and per signal) and its
//! redacted stderr excerpt as a log record tied to that span, written to
//! `--otel-file` as OTLP JSON: one export request per line, traces and
//! logs on lines of their own, the form a Collector's file exporter writes
//! and its file receiver reads.
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
use spillguard_std::core::trace::{TraceParent, trace_state};
use spillguard_std::core::{CallRecord, State};

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
fn percent_decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let escaped = (bytes[at] == b'%')
            .then(|| bytes.get(at + 1..at + 3))
            .flatten()
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

fn text(key: &str, value: impl Into<String>) -> KeyValue {
    attribute(key, Value::StringValue(value.into()))
}

fn int(key: &str, value: i64) -> KeyValue {
    attribute(key, Value::IntValue(value))
}

fn attribute(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

/// The record's name for `value` (a state, a reason): its JSON string.
fn name_of(value: &impl serde::Serialize) -> String {
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

/// `--otel-file`: export requests appended as lines of OTLP JSON.
#[derive(Debug)]
pub struct OtelFile {
    path: PathBuf,
    file: File,
}

impl OtelFile {
    /// Opens (creates) `path` for appending.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    /// Where the lines go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends the call's span and, if it has one, its excerpt's log
    /// record: each request one line, written whole with one `write`.
    pub fn export_call(&mut self, record: &CallRecord, excerpt: &str) -> io::Result<()> {
        let resource = resource();
        let mut lines = serde_json::to_string(&traces(resource.clone(), vec![call_span(record)]))
            .map_err(io::Error::other)?;
        lines.push('\n');
        if let Some(log) = excerpt_log(record, excerpt) {
            let json =
                serde_json::to_string(&logs(resource, vec![log])).map_err(io::Error::other)?;
            lines.push_str(&json);
            lines.push('\n');
        }
        self.file.write_all(lines.as_bytes())?;
        self.file.flush()
    }
}
