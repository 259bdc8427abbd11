//! Each request of an MCP client as a span, for `stdio --mcp` and
//! `mcp` alike: opened when the request is read, closed when its answer
//! is written to the client (`error.type` the answer's error code, or
//! `tool_error` for a result with `isError`), when the client cancels it
//! (`cancelled`), or, under `stdio --mcp`, when the guard answers it for a
//! server that does not read or is gone (the code of that answer).
//!
//! The span's parent is the trace context the request carries in
//! `params._meta.traceparent`; without one it starts a trace. `stdio
//! --mcp` forwards the client's bytes unchanged, so a server that reads
//! the same context puts its own spans beside the guard's, in the same
//! trace; each span names the server's call (`spillguard.call.id`), whose
//! own span covers the server's whole run. Under `mcp` a `tools/call`'s
//! call span is the request span's child ([`McpSpans::parent_of`]).

use std::collections::HashMap;

use opentelemetry_proto::tonic::trace::v1::Span;
use spillguard_std::proto::trace::{CallTrace, TraceParent};
use spillguard_std::proto::{
    MAX_PENDING, MAX_PENDING_ID_BYTES, MessageInfo, MessageKind, RawValue, SERVER_GONE_CODE,
};

use crate::otel::{McpRequest, mcp_span, name_of, unix_ns_now};

/// Requests whose spans are open at once, at most, as many as the
/// requests the guard tracks, and as many bytes of their ids; one more is
/// not a span (the request is still forwarded and answered).
const MAX_OPEN: usize = MAX_PENDING;

/// The open spans, by request id.
#[derive(Debug)]
pub struct McpSpans {
    open: HashMap<RawValue, McpRequest>,
    /// The bytes of the ids in `open`, at most [`MAX_PENDING_ID_BYTES`].
    id_bytes: usize,
    call_id: Option<String>,
    session_id: String,
    /// The parent of a request's span that names none (the TRACEPARENT
    /// this program was given, with `--propagate-trace`), and its
    /// tracestate.
    default_parent: Option<(TraceParent, Option<String>)>,
}

impl McpSpans {
    /// No span open; `call_id` is the server's call (`stdio --mcp`; none
    /// under `mcp`, whose calls are the spans' children), `session_id`
    /// its session (the MCP session: one client connection).
    pub fn new(call_id: Option<&str>, session_id: &str) -> Self {
        Self {
            open: HashMap::new(),
            id_bytes: 0,
            call_id: call_id.map(str::to_owned),
            session_id: session_id.to_owned(),
            default_parent: None,
        }
    }

    /// The span of a request that names no parent is a child of
    /// `parent` (not the root of a trace).
    pub fn with_default_parent(mut self, parent: Option<(TraceParent, Option<String>)>) -> Self {
        self.default_parent = parent;
        self
    }

    /// The open span of the request `info`, as the server is to be told
    /// it (`params._meta.traceparent`): the span's trace and id, the
    /// parent's sampled flag, and the default parent's tracestate when the
    /// request named no parent of its own (its own tracestate stays in
    /// the request).
    pub fn trace_of(&self, info: &MessageInfo) -> Option<CallTrace> {
        let request = self.open.get(info.id.as_ref()?)?;
        let (parent, own) = self.parent(info);
        Some(CallTrace {
            trace_id: request.trace_id,
            span_id: request.span_id,
            parent_span_id: request.parent_span_id,
            flags: parent.as_ref().map_or(1, |(p, _)| p.flags & 1),
            trace_state: if own {
                None
            } else {
                parent.and_then(|(_, s)| s)
            },
        })
    }

    /// The parent of a request's span: the request's own well-formed
    /// traceparent (`true`), else the default parent.
    fn parent(&self, info: &MessageInfo) -> (Option<(TraceParent, Option<String>)>, bool) {
        match own_parent(info) {
            Some(parent) => (Some((parent, None)), true),
            None => (self.default_parent.clone(), false),
        }
    }

    /// The trace and span of the open request `id` (as the client spelt
    /// it): the parent of what serving it starts.
    pub fn parent_of(&self, id: &RawValue) -> Option<([u8; 16], [u8; 8])> {
        self.open
            .get(id)
            .map(|request| (request.trace_id, request.span_id))
    }

    /// A message from the client (a batch: each of its messages): a
    /// request opens its span; a cancellation closes the span of the
    /// request it names. Returns the spans closed.
    pub fn client(&mut self, info: &MessageInfo) -> Vec<Span> {
        let mut closed_now = Vec::new();
        for message in info.messages() {
            match message.kind {
                MessageKind::Request => {
                    let Some(id) = &message.id else {
                        continue;
                    };
                    let full = self.open.len() >= MAX_OPEN
                        || self.id_bytes + id.as_bytes().len() > MAX_PENDING_ID_BYTES;
                    if full && !self.open.contains_key(id) {
                        continue;
                    }
                    let request = self.opened(message, id);
                    // A second request with the id of an open one: the
                    // first is over, as far as this guard can tell.
                    match self.open.insert(id.clone(), request) {
                        Some(earlier) => {
                            closed_now.push(closed(earlier, Some("duplicate_id".into())));
                        }
                        None => self.id_bytes += id.as_bytes().len(),
                    }
                }
                MessageKind::Notification if message.is_method("notifications/cancelled") => {
                    if let Some(span) = message.request_id.as_ref().and_then(|id| self.take(id)) {
                        closed_now.push(closed(span, Some("cancelled".into())));
                    }
                }
                _ => {}
            }
        }
        closed_now
    }

    /// A message from the server (a batch: each of its messages), as it
    /// is written to the client: an answer closes its request's span.
    pub fn server(&mut self, info: &MessageInfo) -> Vec<Span> {
        let mut closed_now = Vec::new();
        for message in info.messages() {
            if message.kind != MessageKind::Response {
                continue;
            }
            let Some(span) = message.id.as_ref().and_then(|id| self.take(id)) else {
                continue;
            };
            let error = match &message.error_code {
                Some(code) => Some(text_of(code)),
                None if message.is_error => Some("tool_error".into()),
                None => None,
            };
            closed_now.push(closed(span, error));
        }
        closed_now
    }

    /// The requests of `info` were answered by the guard, with
    /// [`SERVER_GONE_CODE`].
    pub fn answered_for_the_server(&mut self, info: &MessageInfo) -> Vec<Span> {
        let ids: Vec<&RawValue> = info.messages().filter_map(|m| m.id.as_ref()).collect();
        ids.into_iter()
            .filter_map(|id| self.take(id))
            .map(|span| closed(span, Some(SERVER_GONE_CODE.to_string())))
            .collect()
    }

    /// Every span still open, closed with `error` as its `error.type`,
    /// oldest first: [`SERVER_GONE_CODE`] where the guard answers them
    /// (the server is gone), [`CLIENT_GONE`] where nobody will read an
    /// answer (the client left).
    pub fn close_all(&mut self, error: &str) -> Vec<Span> {
        self.id_bytes = 0;
        let mut left: Vec<McpRequest> = self.open.drain().map(|(_, span)| span).collect();
        left.sort_by_key(|span| span.start_ns);
        left.into_iter()
            .map(|span| closed(span, Some(error.to_owned())))
            .collect()
    }

    /// The open span of `id`, taken out.
    fn take(&mut self, id: &RawValue) -> Option<McpRequest> {
        let span = self.open.remove(id)?;
        self.id_bytes -= id.as_bytes().len();
        Some(span)
    }

    fn opened(&self, info: &MessageInfo, id: &RawValue) -> McpRequest {
        let parent = self.parent(info).0.map(|(parent, _)| parent);
        McpRequest {
            trace_id: parent
                .as_ref()
                .map_or_else(spillguard_host::fresh_trace_id, |p| p.trace_id),
            span_id: spillguard_host::fresh_span_id(),
            parent_span_id: parent.map(|p| p.parent_id),
            method: info.method.as_ref().map(string_of).unwrap_or_default(),
            tool: info.name.as_ref().map(string_of).unwrap_or_default(),
            call_id: self.call_id.clone(),
            session_id: self.session_id.clone(),
            request_id: text_of(id),
            start_ns: unix_ns_now(),
            end_ns: 0,
            error: None,
        }
    }
}

/// The well-formed `params._meta.traceparent` a request names, if any.
pub fn own_parent(info: &MessageInfo) -> Option<TraceParent> {
    info.trace_parent
        .as_ref()
        .and_then(|raw| serde_json::from_slice::<String>(raw.as_bytes()).ok())
        .and_then(|text| TraceParent::parse(&text).ok())
}

/// The `error.type` of a request's span left open when the client went
/// away: no answer will be read.
pub const CLIENT_GONE: &str = "client_disconnected";

fn closed(mut span: McpRequest, error: Option<String>) -> Span {
    span.end_ns = unix_ns_now();
    span.error = error;
    mcp_span(&span)
}

/// A raw JSON value as text: a string unquoted (its escapes read), a
/// number as written.
fn text_of(raw: &RawValue) -> String {
    serde_json::from_slice::<serde_json::Value>(raw.as_bytes())
        .map(|value| name_of(&value))
        .unwrap_or_else(|_| String::from_utf8_lossy(raw.as_bytes()).into_owned())
}

/// A raw JSON string's text; empty for any other value.
fn string_of(raw: &RawValue) -> String {
    serde_json::from_slice::<String>(raw.as_bytes()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillguard_std::proto::MessageScanner;

    fn info(line: &str) -> MessageInfo {
        let mut scanner = MessageScanner::new();
        scanner.feed(line.as_bytes());
        scanner.finish().expect("a message")
    }

    fn attribute(span: &Span, key: &str) -> Option<String> {
        use opentelemetry_proto::tonic::common::v1::any_value::Value;
        span.attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                Value::StringValue(text) => Some(text.clone()),
                _ => None,
            })
    }

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_call_s_span_is_the_child_of_its_meta_and_ends_with_its_answer() {
        let mut spans = McpSpans::new(Some("c_1"), "s_1");
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":"r\u0031","method":"tools/call","params":{{"name":"se\"arch","_meta":{{"traceparent":"{PARENT}"}}}}}}"#
        );
        assert!(spans.client(&info(&request)).is_empty());
        let span = spans
            .server(&info(
                r#"{"jsonrpc":"2.0","id":"r\u0031","result":{"isError":true}}"#,
            ))
            .pop()
            .expect("closed by its answer");
        assert_eq!(span.name, "tools/call se\"arch");
        assert_eq!(hex(&span.trace_id), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(hex(&span.parent_span_id), "b7ad6b7169203331");
        assert_eq!(span.span_id.len(), 8);
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
        for (key, want) in [
            ("mcp.method.name", "tools/call"),
            ("gen_ai.tool.name", "se\"arch"),
            ("jsonrpc.request.id", "r1"),
            ("network.transport", "pipe"),
            ("spillguard.call.id", "c_1"),
            ("mcp.session.id", "s_1"),
            ("error.type", "tool_error"),
        ] {
            assert_eq!(attribute(&span, key).as_deref(), Some(want), "{key}");
        }
        assert!(spans.open.is_empty());
    }

    #[test]
    fn every_request_ends_once_however_it_ends() {
        let mut spans = McpSpans::new(Some("c_1"), "s_1");
        for id in 1..=5 {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            assert!(spans.client(&info(&line)).is_empty());
        }
        // No `_meta`: a trace of its own, no parent.
        let error = spans
            .server(&info(
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
            ))
            .pop()
            .unwrap();
        assert_eq!(error.name, "ping");
        assert!(error.parent_span_id.is_empty());
        assert_eq!(error.trace_id.len(), 16);
        assert_eq!(attribute(&error, "error.type").as_deref(), Some("-32601"));
        assert_eq!(attribute(&error, "gen_ai.tool.name"), None);
        let ok = spans
            .server(&info(r#"{"jsonrpc":"2.0","id":2,"result":{}}"#))
            .pop()
            .unwrap();
        assert_eq!(attribute(&ok, "error.type"), None);
        // An answer for no open request, and a second answer, close nothing.
        assert!(
            spans
                .server(&info(r#"{"jsonrpc":"2.0","id":2,"result":{}}"#))
                .is_empty()
        );
        let cancelled = spans
            .client(&info(
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#,
            ))
            .pop()
            .unwrap();
        assert_eq!(
            attribute(&cancelled, "error.type").as_deref(),
            Some("cancelled")
        );
        let dropped = spans
            .answered_for_the_server(&info(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#))
            .pop()
            .unwrap();
        assert_eq!(attribute(&dropped, "error.type").as_deref(), Some("-32000"));
        let left = spans.close_all(&SERVER_GONE_CODE.to_string());
        assert_eq!(left.len(), 1);
        assert_eq!(
            attribute(&left[0], "jsonrpc.request.id").as_deref(),
            Some("5")
        );
        assert_eq!(attribute(&left[0], "error.type").as_deref(), Some("-32000"));
        assert!(spans.close_all(CLIENT_GONE).is_empty());
    }

    #[test]
    fn a_malformed_traceparent_starts_a_trace_and_the_table_is_bounded() {
        let mut spans = McpSpans::new(Some("c_1"), "s_1");
        let bad = r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"00-00000000000000000000000000000000-b7ad6b7169203331-01"}}}"#;
        let _ = spans.client(&info(bad));
        let span = spans.close_all(CLIENT_GONE).remove(0);
        assert!(span.parent_span_id.is_empty());
        assert_ne!(span.trace_id, vec![0; 16]);
        for id in 0..MAX_OPEN + 3 {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
            let _ = spans.client(&info(&line));
        }
        assert_eq!(spans.open.len(), MAX_OPEN);
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}
