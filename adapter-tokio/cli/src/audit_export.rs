//! Every record of the audit log as an OTLP log record, sent through the
//! OTLP/HTTP exporter's queue (`otlp_http`) as it is appended: the same
//! bounded queue and failure rules as the spans, so a collector that
//! hangs or fails never holds a call or the log back.
//!
//! Each log record carries `spillguard.audit.seq` (the record's place in
//! the log, from 0), `spillguard.audit.event` (its kind: `attempt`,
//! `transition`, `final`, `card_shown`, `limit_hit`, `restart`, and
//! `opened` or `recovered` for a writer's own entries),
//! `spillguard.audit.record_hash` (its chain hash, hex) and, for a call's
//! event, `spillguard.call.id` and the call's trace and span ids; its body
//! is the record as JSON, redacted. A signed checkpoint written after a
//! final record follows as a log record of its own
//! (`spillguard.audit.checkpoint`), its body the note. A sealed log's
//! records go without body or call id: what the log keeps encrypted is
//! not sent in clear.

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};

use crate::otel::text;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, SeverityNumber};
use spillguard_std::proto::audit::{ChainHash, LogEntry};
use spillguard_std::proto::trace::CallTrace;
use spillguard_std::proto::{AuditEvent, AuditKind, Redactor};
use spillguard_std::{Appended, OwnRecord};

use crate::otlp_http::Queue;

/// Where the audit log's records go: the exporter's queue, through the
/// configuration's redactor.
#[derive(Debug, Clone)]
pub struct AuditExport {
    queue: Queue,
    redactor: Redactor,
    /// The log is sealed: its records' content is not sent, only where
    /// they are and what they are.
    sealed: bool,
}

impl AuditExport {
    /// Sends through `queue`, redacting with `redactor`.
    pub fn new(queue: Queue, redactor: Redactor) -> Self {
        Self {
            queue,
            redactor,
            sealed: false,
        }
    }

    /// The same, for a sealed log: a record's body is left empty (and so
    /// is a call's id), so that what the log keeps encrypted is not sent
    /// in clear.
    pub fn sealed(self, sealed: bool) -> Self {
        Self { sealed, ..self }
    }

    /// Sends the record `appended` of `event`, a call's, in `span` if the
    /// call is in a trace: the recovery appended just before it first, and
    /// the checkpoint written after it last.
    pub fn event(&self, appended: &Appended, event: &AuditEvent, span: Option<&CallTrace>) {
        let mut records = Vec::new();
        if let Some(recovery) = &appended.recovery {
            records.push(self.own_record(recovery));
        }
        let body = serde_json::to_string(event).unwrap_or_default();
        let mut record = self.record(appended.index, &appended.hash, kind_of(&event.kind), &body);
        if !self.sealed {
            record.attributes.push(text(
                "spillguard.call.id",
                self.redactor.redact(&event.call_id).text,
            ));
        }
        if let Some(span) = span {
            record.trace_id = span.trace_id.to_vec();
            record.span_id = span.span_id.to_vec();
        }
        records.push(record);
        if let Some(note) = &appended.checkpoint {
            records.push(checkpoint(appended, note));
        }
        self.send(records);
    }

    /// Sends a record the writer appended of its own (its `opened` entry,
    /// a recovery).
    pub fn own(&self, own: &OwnRecord) {
        let record = self.own_record(own);
        self.send(vec![record]);
    }

    fn own_record(&self, own: &OwnRecord) -> LogRecord {
        let body = serde_json::to_string(&own.entry).unwrap_or_default();
        let kind = match own.entry {
            LogEntry::Opened { .. } => "opened",
            LogEntry::Recovered { .. } => "recovered",
            _ => "entry",
        };
        self.record(own.index, &own.hash, kind, &body)
    }

    fn record(&self, index: u64, hash: &ChainHash, kind: &str, body: &str) -> LogRecord {
        let now = crate::otel::unix_ns_now();
        let body = if self.sealed {
            String::new()
        } else {
            self.redactor.redact(body).text
        };
        LogRecord {
            time_unix_nano: now,
            observed_time_unix_nano: now,
            severity_number: SeverityNumber::Info as i32,
            body: Some(AnyValue {
                value: Some(Value::StringValue(body)),
            }),
            attributes: vec![
                int("spillguard.audit.seq", index),
                text("spillguard.audit.event", kind),
                text("spillguard.audit.record_hash", hash.to_string()),
            ],
            event_name: "spillguard.audit.record".into(),
            ..LogRecord::default()
        }
    }

    fn send(&self, records: Vec<LogRecord>) {
        let request = crate::otel::logs(crate::otel::resource(), records);
        self.queue.export(&request, true);
    }
}

/// The signed checkpoint written after `appended`, as a log record.
fn checkpoint(appended: &Appended, note: &str) -> LogRecord {
    let now = crate::otel::unix_ns_now();
    LogRecord {
        time_unix_nano: now,
        observed_time_unix_nano: now,
        severity_number: SeverityNumber::Info as i32,
        body: Some(AnyValue {
            value: Some(Value::StringValue(note.to_owned())),
        }),
        attributes: vec![int("spillguard.audit.checkpoint.size", appended.index + 1)],
        event_name: "spillguard.audit.checkpoint".into(),
        ..LogRecord::default()
    }
}

/// The name of an event's kind, as the log's JSON names it.
fn kind_of(kind: &AuditKind) -> &'static str {
    match kind {
        AuditKind::Attempt { .. } => "attempt",
        AuditKind::Transition { .. } => "transition",
        AuditKind::Final(_) => "final",
        AuditKind::CardShown { .. } => "card_shown",
        AuditKind::LimitHit { .. } => "limit_hit",
        AuditKind::Restart { .. } => "restart",
        _ => "event",
    }
}

fn int(key: &str, value: u64) -> KeyValue {
    crate::otel::int(key, i64::try_from(value).unwrap_or(i64::MAX))
}
