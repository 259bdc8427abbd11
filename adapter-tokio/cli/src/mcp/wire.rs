//! The JSON-RPC framing of `spillguard mcp`: one message per line each
//! way, every request answered.
//!
//! [`Wire`] is the session's transport. Each line the client writes is
//! checked before the session sees it, and answered here when it cannot
//! be served:
//!
//! | the line | the answer |
//! |---|---|
//! | not JSON | `-32700` (parse error), `"id": null` (no `id` on protocol 2026-07-28 and later) |
//! | JSON, but not one JSON-RPC 2.0 message: an array (a batch), not an object, no or another `"jsonrpc"`, a `method` that is not a string, an `id` that is neither a string nor an integer | `-32600` (invalid request), with the `id` when it could be read |
//! | a request whose `id` is that of a request still in flight (not yet answered, nor cancelled by `notifications/cancelled`) | `-32600` with that `id`; the first request goes on and its answer still comes |
//! | a request of a method MCP defines, whose `params` are not what that method takes (`tools/call` without `params`, with `params` that are not an object, without a string `name`, with `arguments` that are not an object) | `-32602` (invalid params) |
//! | longer than [`MAX_LINE`] | `-32600`, `id` as for a parse error; the line is skipped |
//! | an empty line | nothing |
//!
//! A notification or a response that cannot be read gets no answer (there
//! is nothing to answer), and is said on stderr. A request of a method the
//! server does not know is the session's to answer (`-32601`).
//!
//! A UTF-8 byte order mark at the start of a line is skipped (RFC 8259
//! lets a parser ignore it): the line is read as the rest. Receiving
//! (`Wire::receive`) is cancel-safe: a line read in part is kept across a
//! dropped `receive`.
//!
//! **A response is an answer only to a request of this server's in
//! flight, by id in type and value.** The server's requests (the approval
//! cards, `elicitation/create`) carry integer ids. A client's response
//! (result or error) reaches the session only if its `id` is the id of
//! one of them written and neither answered nor cancelled yet. A JSON
//! string never answers a number (`"7"` is not `7`), and a number answers
//! only written as an integer, as the server wrote it: `7.0` and `7e0`
//! are no JSON-RPC ids (an id number has no fractional part) and answer
//! nothing. Any other response (an unknown, repeated, late or mistyped
//! id, none, or one that does not parse) is not an answer: it is said on
//! stderr in one line, counted ([`Outbox::unmatched_responses`]) and
//! dropped, never answered (JSON-RPC answers no response), so it can
//! never grant a card. The check comes before rmcp's own matching, which
//! would take the string `"7"` and the number `7.0` for the number `7`.
//!
//! Writing, [`Outbox`] writes each message with one `write_all` and a
//! flush, in the order the session hands them over, and says when a given
//! request or response has been written and flushed
//! ([`Outbox::request_written`], [`Outbox::response_written`]): the
//! approval deadline of a card runs from then.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, InitializeRequest,
    JsonRpcError, JsonRpcMessage, ListToolsRequest, PingRequest, ProtocolVersion, RequestId,
    ServerJsonRpcMessage, ServerNotification, ServerResult,
};
use rmcp::transport::Transport;
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;

use crate::call::TelemetryWorker;
use crate::mcp_spans::McpSpans;
use spillguard_std::proto::{MessageScanner, RawValue};

/// Where a request of protocol 2026-07-28 and later names its protocol,
/// in its `params._meta`.
const PROTOCOL_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// The UTF-8 byte order mark, skipped at the start of a line.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The longest line read as one message (64 MiB), newline excluded.
pub const MAX_LINE: usize = 64 << 20;

/// How many written request ids are remembered for a
/// [`Outbox::request_written`] that comes after the write.
const WRITTEN_KEPT: usize = 4096;

/// The methods of MCP whose `params` are checked before the session sees
/// the request: a request of one of them that the session's types do not
/// read is an invalid-params error, not an unknown method.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];

/// The session's transport: the client's lines in, the [`Outbox`] out.
///
/// Receiving is cancel-safe, as the session requires (it drops a
/// `receive` when another event comes first): a line read in part stays
/// in `line` for the next call, and the wire's own answers are written by
/// a task of their own, never cut by a cancellation.
pub struct Wire<R> {
    input: BufReader<R>,
    out: Arc<Outbox>,
    /// The line read so far.
    line: Vec<u8>,
    /// The line being read is longer than [`MAX_LINE`]: skipped to its end.
    skipping: bool,
}

impl<R: AsyncRead + Unpin + Send> Wire<R> {
    /// A transport reading `input` and writing through `out`.
    pub fn new(input: R, out: Arc<Outbox>) -> Self {
        Self {
            input: BufReader::new(input),
            out,
            line: Vec::new(),
            skipping: false,
        }
    }

    /// The next message the session is to see; `None` once the client's
    /// input has ended (or cannot be read). Every line that is not such a
    /// message is answered (or dropped) on the way.
    async fn next_message(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            match self.read_line().await {
                Ok(Line::Text) => {}
                Ok(Line::TooLong) => {
                    self.answer(invalid_request(
                        None,
                        format!("the message is longer than {MAX_LINE} bytes"),
                    ));
                    continue;
                }
                Ok(Line::End) | Err(_) => return None,
            }
            // From the line read to its use, nothing awaits: no
            // cancellation can lose it.
            let checked = self.out.check(&self.line);
            if let Checked::Message(_) = &checked {
                let line = self.line.strip_prefix(UTF8_BOM).unwrap_or(&self.line);
                self.out.span_line(line, true);
            }
            self.line.clear();
            match checked {
                Checked::Message(message) => return Some(*message),
                Checked::Answer(error) => self.answer(error),
                Checked::Skip => {}
            }
        }
    }

    /// Writes one of the wire's own answers, on a task of its own.
    fn answer(&self, error: JsonRpcError) {
        let out = self.out.clone();
        // The client may be gone; its end is seen by the read.
        tokio::spawn(async move { out.send_error(error).await });
    }

    /// Reads until a line is whole in `self.line` (its newline and a `\r`
    /// before it removed), never keeping more than [`MAX_LINE`] bytes.
    /// Cancel-safe: what was read stays in `self.line`.
    async fn read_line(&mut self) -> io::Result<Line> {
        loop {
            let available = self.input.fill_buf().await?;
            if available.is_empty() {
                if std::mem::take(&mut self.skipping) {
                    return Ok(Line::TooLong);
                }
                // A last line without its newline is a line first.
                return Ok(if self.line.is_empty() {
                    Line::End
                } else {
                    Line::Text
                });
            }
            let (taken, done) = match available.iter().position(|&b| b == b'\n') {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            let content = available.get(..taken).unwrap_or_default();
            let content = content.strip_suffix(b"\n").unwrap_or(content);
            if !self.skipping {
                if self.line.len() + content.len() > MAX_LINE {
                    self.skipping = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(content);
                }
            }
            self.input.consume(taken);
            if done {
                if std::mem::take(&mut self.skipping) {
                    return Ok(Line::TooLong);
                }
                if self.line.last() == Some(&b'\r') {
                    self.line.pop();
                }
                return Ok(Line::Text);
            }
        }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for Wire<R> {
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        async move { out.send(item).await }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.next_message()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let out = self.out.clone();
        async move { out.flush().await }
    }
}

/// What one line was.
enum Line {
    /// A whole line is in the buffer.
    Text,
    /// A line longer than [`MAX_LINE`], skipped to its end.
    TooLong,
    /// The input ended (a last line without a newline is a line first).
    End,
}

/// What a line is for the session.
enum Checked {
    /// A message the session is to see.
    Message(Box<ClientJsonRpcMessage>),
    /// An error to write back; the session never sees the line.
    Answer(JsonRpcError),
    /// Nothing to do (an empty line, an unreadable notification or
    /// response).
    Skip,
}

/// The server's side of the wire: the client's requests still in flight
/// and the written messages someone waits for, and the writer.
#[derive(Debug)]
pub struct Outbox {
    file: tokio::sync::Mutex<tokio::fs::File>,
    table: Mutex<Table>,
    /// The session speaks protocol 2026-07-28 or later, where an error
    /// whose request id could not be read leaves `id` out; before it (and
    /// before a session), such an error says `"id": null`, as JSON-RPC 2.0
    /// has it.
    omits_unknown_id: std::sync::atomic::AtomicBool,
    /// With export on: each request's span, and where it goes.
    spans: Mutex<Option<RequestSpans>>,
}

/// The client's requests as spans (see [`crate::mcp_spans`]).
#[derive(Debug)]
struct RequestSpans {
    spans: McpSpans,
    worker: Arc<TelemetryWorker>,
}

#[derive(Debug, Default)]
struct Table {
    /// The server's requests written (or being written) and neither
    /// answered nor cancelled: the only ids a client's response answers.
    outstanding: HashSet<RequestId>,
    /// Client responses that answered none of them.
    unmatched_responses: u64,
    /// The ids (as JSON text) of the client's requests read and not yet
    /// answered.
    in_flight: HashSet<String>,
    /// The ids of the server's requests written, oldest first, for a wait
    /// that comes after the write.
    written: VecDeque<String>,
    /// Who waits for which message to be written.
    waiters: HashMap<Sent, Vec<oneshot::Sender<()>>>,
}

/// A message the server writes, by kind and id (as JSON text).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Sent {
    Request(String),
    Response(String),
}

impl Outbox {
    /// An outbox writing to `file`.
    pub fn new(file: tokio::fs::File) -> Arc<Self> {
        Arc::new(Self {
            file: tokio::sync::Mutex::new(file),
            table: Mutex::new(Table::default()),
            omits_unknown_id: std::sync::atomic::AtomicBool::new(false),
            spans: Mutex::new(None),
        })
    }

    /// From now on every request the session is handed is a span,
    /// exported through `worker` once its answer is written.
    pub fn trace_requests(&self, spans: McpSpans, worker: Arc<TelemetryWorker>) {
        *self.lock_spans() = Some(RequestSpans { spans, worker });
    }

    /// Closes the span of every request still open (the client left, no
    /// answer will be read) and hands them to export.
    pub fn close_open_spans(&self) {
        let mut spans = self.lock_spans();
        let Some(traced) = spans.as_mut() else {
            return;
        };
        for span in traced.spans.close_all(crate::mcp_spans::CLIENT_GONE) {
            traced
                .worker
                .send(Box::new(move |telemetry| telemetry.export_span(span)));
        }
    }

    fn lock_spans(&self) -> MutexGuard<'_, Option<RequestSpans>> {
        self.spans.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The trace and span of the client's request `id` while it is open
    /// (export on): what serving it is a child of.
    pub fn span_of(&self, id: &RequestId) -> Option<([u8; 16], [u8; 8])> {
        let raw = RawValue::new(&serde_json::to_vec(id).ok()?)?;
        self.lock_spans().as_ref()?.spans.parent_of(&raw)
    }

    /// A line of the client's that the session is handed (a request opens
    /// its span, a cancellation closes one), or one of the session's
    /// written to the client (an answer closes its request's span).
    fn span_line(&self, line: &[u8], from_client: bool) {
        let mut spans = self.lock_spans();
        let Some(traced) = spans.as_mut() else {
            return;
        };
        let mut scanner = MessageScanner::new();
        scanner.feed(line.strip_suffix(b"\n").unwrap_or(line));
        let Some(info) = scanner.finish() else {
            return;
        };
        let closed = match from_client {
            true => traced.spans.client(&info),
            false => traced.spans.server(&info),
        };
        for span in closed {
            traced
                .worker
                .send(Box::new(move |telemetry| telemetry.export_span(span)));
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until the server's request `id` has been written and flushed
    /// (at once if it already has); `false` if it never will be (the
    /// server is closing).
    pub async fn request_written(&self, id: &RequestId) -> bool {
        let key = id_text(id);
        let waiter = {
            let mut table = self.table();
            if let Some(at) = table.written.iter().position(|w| *w == key) {
                table.written.remove(at);
                return true;
            }
            let (tx, rx) = oneshot::channel();
            table
                .waiters
                .entry(Sent::Request(key))
                .or_default()
                .push(tx);
            rx
        };
        waiter.await.is_ok()
    }

    /// Resolves once the response (result or error) to the client's
    /// request `id` has been written and flushed; ask before the response
    /// can be written. Fails if it never is.
    pub fn response_written(&self, id: &RequestId) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.table()
            .waiters
            .entry(Sent::Response(id_text(id)))
            .or_default()
            .push(tx);
        rx
    }

    /// Client responses dropped because their id named no request of the
    /// server's in flight, in type and value (see the module docs).
    pub fn unmatched_responses(&self) -> u64 {
        self.table().unmatched_responses
    }

    /// Writes one message of the session's.
    async fn send(&self, item: ServerJsonRpcMessage) -> io::Result<()> {
        match &item {
            // Noted before the write: the answer may come at once.
            JsonRpcMessage::Request(request) => {
                self.table().outstanding.insert(request.id.clone());
            }
            // A request the server withdrew takes no answer any more.
            JsonRpcMessage::Notification(notification) => {
                if let ServerNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    self.table().outstanding.remove(id);
                }
            }
            _ => {}
        }
        let sent = match &item {
            JsonRpcMessage::Request(request) => Some(Sent::Request(id_text(&request.id))),
            JsonRpcMessage::Response(response) => Some(Sent::Response(id_text(&response.id))),
            JsonRpcMessage::Error(error) => error.id.as_ref().map(|id| Sent::Response(id_text(id))),
            JsonRpcMessage::Notification(_) => None,
        };
        if let Some(Sent::Response(id)) = &sent {
            // Struck off before it is written: once the client has the
            // answer, it may use the id again.
            self.table().in_flight.remove(id);
        }
        if let JsonRpcMessage::Response(response) = &item
            && let ServerResult::InitializeResult(result) = &response.result
        {
            let modern = result.protocol_version >= ProtocolVersion::V_2026_07_28;
            self.omits_unknown_id
                .store(modern, std::sync::atomic::Ordering::Relaxed);
        }
        let mut line = serde_json::to_vec(&item).map_err(io::Error::other)?;
        line.push(b'\n');
        self.write_line(&line).await?;
        self.span_line(&line, false);
        if let Some(sent) = sent {
            let mut table = self.table();
            let waiters = table.waiters.remove(&sent);
            match (waiters, sent) {
                (Some(waiters), _) => {
                    for waiter in waiters {
                        let _ = waiter.send(());
                    }
                }
                (None, Sent::Request(id)) => {
                    if table.written.len() == WRITTEN_KEPT {
                        table.written.pop_front();
                    }
                    table.written.push_back(id);
                }
                (None, Sent::Response(_)) => {}
            }
        }
        Ok(())
    }

    /// Writes an error of the wire's own (the session never saw its
    /// request).
    async fn send_error(&self, error: JsonRpcError) -> io::Result<()> {
        /// An error as written: `id` null, left out, or the request's.
        #[derive(serde::Serialize)]
        struct ErrorLine<'e> {
            jsonrpc: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            id: Option<Value>,
            error: &'e ErrorData,
        }
        let omits = self
            .omits_unknown_id
            .load(std::sync::atomic::Ordering::Relaxed);
        let id = match &error.id {
            Some(id) => Some(serde_json::to_value(id).map_err(io::Error::other)?),
            None if omits => None,
            None => Some(Value::Null),
        };
        let line = ErrorLine {
            jsonrpc: "2.0",
            id,
            error: &error.error,
        };
        let mut line = serde_json::to_vec(&line).map_err(io::Error::other)?;
        line.push(b'\n');
        self.write_line(&line).await
    }

    async fn write_line(&self, line: &[u8]) -> io::Result<()> {
        let mut file = self.file.lock().await;
        file.write_all(line).await?;
        file.flush().await
    }

    async fn flush(&self) -> io::Result<()> {
        self.file.lock().await.flush().await
    }

    /// What `line` is (see the module docs); a request the session is to
    /// see is noted as in flight.
    fn check(&self, line: &[u8]) -> Checked {
        let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Checked::Skip;
        }
        let value: Value = match serde_json::from_slice(line) {
            Ok(value) => value,
            Err(error) => {
                return Checked::Answer(JsonRpcError::new(
                    None,
                    ErrorData::new(
                        ErrorCode::PARSE_ERROR,
                        format!("Parse error: {error}"),
                        None,
                    ),
                ));
            }
        };
        let object = match value {
            Value::Object(object) => object,
            Value::Array(_) => {
                return Checked::Answer(invalid_request(
                    None,
                    "a batch (a JSON array) is not supported: send one message per line",
                ));
            }
            _ => return Checked::Answer(invalid_request(None, "a message is a JSON object")),
        };
        let id = match object.get("id") {
            None => None,
            Some(Value::String(s)) => Some(RequestId::String(s.as_str().into())),
            Some(Value::Number(n)) if n.is_i64() => n.as_i64().map(RequestId::Number),
            // A response is never answered, whatever its id.
            Some(other) if !object.contains_key("method") => {
                return self.unmatched(format!(
                    "a response with id {}, which is not a JSON-RPC id (a string or an integer)",
                    shortened(other.to_string())
                ));
            }
            Some(_) => {
                return Checked::Answer(invalid_request(
                    None,
                    "\"id\" must be a string or an integer",
                ));
            }
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Checked::Answer(invalid_request(id, "\"jsonrpc\" must be \"2.0\""));
        }
        let method = match object.get("method") {
            None => None,
            Some(Value::String(method)) => Some(method.clone()),
            Some(_) => return Checked::Answer(invalid_request(id, "\"method\" must be a string")),
        };
        match (method, id) {
            (Some(method), Some(id)) => self.check_request(object, &method, id),
            (Some(method), None) => match serde_json::from_value(Value::Object(object.clone())) {
                Ok(message) => {
                    // A cancelled request gets no answer: its id is free.
                    if method == "notifications/cancelled"
                        && let Some(id) = object.get("params").and_then(|p| p.get("requestId"))
                    {
                        self.table().in_flight.remove(&id.to_string());
                    }
                    Checked::Message(Box::new(message))
                }
                Err(error) => {
                    eprintln!(
                        "spillguard: ignored a notification {method:?} that does not parse: {error}"
                    );
                    Checked::Skip
                }
            },
            (None, _) => match serde_json::from_value(Value::Object(object)) {
                Ok(message) => self.check_response(message),
                Err(error) => self.unmatched(format!("a response that does not parse ({error})")),
            },
        }
    }

    /// A client's response: for the session if it answers a request of
    /// the server's in flight (its id, in type and value), else said,
    /// counted and dropped (see the module docs).
    fn check_response(&self, message: ClientJsonRpcMessage) -> Checked {
        let id = match &message {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => return Checked::Message(Box::new(message)),
        };
        if let Some(id) = id
            && self.table().outstanding.remove(id)
        {
            return Checked::Message(Box::new(message));
        }
        let shown = match id {
            Some(id) => shortened(id_text(id)),
            None => "null".to_owned(),
        };
        self.unmatched(format!(
            "a response with id {shown}, which answers no request of this server's in flight \
             (ids match in type and value)"
        ))
    }

    /// A client's response that is not an answer: said on stderr in one
    /// line, counted, dropped.
    fn unmatched(&self, what: String) -> Checked {
        let count = {
            let mut table = self.table();
            table.unmatched_responses += 1;
            table.unmatched_responses
        };
        eprintln!("spillguard: ignored {what}; {count} response(s) ignored so far");
        Checked::Skip
    }

    fn check_request(&self, object: Map<String, Value>, method: &str, id: RequestId) -> Checked {
        let key = id_text(&id);
        if self.table().in_flight.contains(&key) {
            return Checked::Answer(invalid_request(
                Some(id),
                format!(
                    "a request with id {key} is still in flight (an id is unique among the \
                     requests not yet answered); the first one goes on"
                ),
            ));
        }
        if let Some(problem) = params_problem(method, object.get("params")) {
            return Checked::Answer(invalid_params(id, problem));
        }
        // From 2026-07-28 on, each request names its protocol in `_meta`.
        let named = object
            .get("params")
            .and_then(|params| params.get("_meta"))
            .and_then(|meta| meta.get(PROTOCOL_META_KEY))
            .and_then(Value::as_str);
        if let Some(version) = named {
            let modern = version >= ProtocolVersion::V_2026_07_28.as_str();
            self.omits_unknown_id
                .store(modern, std::sync::atomic::Ordering::Relaxed);
        }
        let message: ClientJsonRpcMessage =
            match serde_json::from_value(Value::Object(object.clone())) {
                Ok(message) => message,
                Err(error) => {
                    return Checked::Answer(invalid_params(id, format!("{method}: {error}")));
                }
            };
        // A method MCP defines whose params its type did not read came out
        // as a custom request: that is a params error, not an unknown method.
        if let JsonRpcMessage::Request(request) = &message
            && matches!(request.request, ClientRequest::CustomRequest(_))
            && KNOWN_METHODS.contains(&method)
        {
            return Checked::Answer(invalid_params(id, typed_error(method, &object)));
        }
        self.table().in_flight.insert(key);
        Checked::Message(Box::new(message))
    }
}

/// What is wrong with a request's `params` that no type says as clearly.
fn params_problem(method: &str, params: Option<&Value>) -> Option<String> {
    match (method, params) {
        (_, Some(Value::Object(_)) | None) if method != "tools/call" => None,
        (_, Some(_)) if method != "tools/call" => {
            Some(format!("{method}: params must be an object"))
        }
        (_, None) => {
            Some("tools/call needs params: an object with the tool's name and its arguments".into())
        }
        (_, Some(Value::Object(params))) => match (params.get("name"), params.get("arguments")) {
            (None, _) => Some("tools/call needs params.name, the tool's name".into()),
            (Some(name), _) if !name.is_string() => {
                Some("tools/call: params.name must be a string".into())
            }
            (_, Some(arguments)) if !arguments.is_object() => {
                Some("tools/call: params.arguments must be an object".into())
            }
            _ => None,
        },
        (_, Some(_)) => Some("tools/call: params must be an object".into()),
    }
}

/// Why the request of a known `method` does not read as its type, in the
/// type's own words where the method is one this server serves.
fn typed_error(method: &str, object: &Map<String, Value>) -> String {
    let request = Value::Object(
        object
            .iter()
            .filter(|(key, _)| key.as_str() == "method" || key.as_str() == "params")
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    );
    let error = match method {
        "initialize" => serde_json::from_value::<InitializeRequest>(request).err(),
        "ping" => serde_json::from_value::<PingRequest>(request).err(),
        "tools/list" => serde_json::from_value::<ListToolsRequest>(request).err(),
        "tools/call" => serde_json::from_value::<CallToolRequest>(request).err(),
        _ => None,
    };
    match error {
        Some(error) => format!("{method}: {error}"),
        None => format!("{method}: its params are not what the method takes"),
    }
}

fn invalid_request(id: Option<RequestId>, why: impl Into<String>) -> JsonRpcError {
    JsonRpcError::new(
        id,
        ErrorData::new(
            ErrorCode::INVALID_REQUEST,
            format!("Invalid Request: {}", why.into()),
            None,
        ),
    )
}

fn invalid_params(id: RequestId, why: impl Into<String>) -> JsonRpcError {
    JsonRpcError::new(
        Some(id),
        ErrorData::new(
            ErrorCode::INVALID_PARAMS,
            format!("Invalid params: {}", why.into()),
            None,
        ),
    )
}

/// `text` cut to its first 64 characters (`…` after), for a log line.
fn shortened(text: String) -> String {
    match text.char_indices().nth(64) {
        Some((at, _)) => format!("{}…", text.get(..at).unwrap_or_default()),
        None => text,
    }
}

/// A request id as the JSON text it has on the wire (`7`, `"a"`).
fn id_text(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn outbox(name: &str) -> (Arc<Outbox>, std::path::PathBuf) {
        let path =
            std::env::temp_dir().join(format!("spillguard-wire-{}-{name}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        (Outbox::new(tokio::fs::File::from_std(file)), path)
    }

    /// A `receive` dropped halfway through a line (the session does that
    /// when another event comes first) loses nothing of it.
    #[test]
    fn a_receive_cancelled_mid_line_loses_nothing() {
        runtime().block_on(async {
            let (mut client, server) = tokio::io::duplex(64);
            let (out, path) = outbox("cancel");
            let mut wire = Wire::new(server, out);
            let line = br#"{"jsonrpc":"2.0","id":41,"method":"ping"}"#;
            client.write_all(&line[..20]).await.unwrap();
            let first = tokio::time::timeout(Duration::from_millis(50), wire.next_message()).await;
            assert!(first.is_err(), "no whole line yet");
            client.write_all(&line[20..]).await.unwrap();
            client.write_all(b"\n").await.unwrap();
            let message = wire.next_message().await.unwrap();
            match message {
                JsonRpcMessage::Request(request) => {
                    assert_eq!(request.id, RequestId::Number(41));
                    assert!(matches!(request.request, ClientRequest::PingRequest(_)));
                }
                other => panic!("{other:?}"),
            }
            // A last line without its newline is still a line; then the end.
            client
                .write_all(br#"{"jsonrpc":"2.0","id":42,"method":"ping"}"#)
                .await
                .unwrap();
            drop(client);
            assert!(matches!(
                wire.next_message().await,
                Some(JsonRpcMessage::Request(_))
            ));
            assert!(wire.next_message().await.is_none());
            let _ = std::fs::remove_file(path);
        });
    }

    #[test]
    fn a_request_written_is_seen_whether_the_wait_comes_before_or_after() {
        runtime().block_on(async {
            let (out, path) = outbox("written");
            let request = |id: i64| -> ServerJsonRpcMessage {
                serde_json::from_value(serde_json::json!(
                    {"jsonrpc": "2.0", "id": id, "method": "ping"}
                ))
                .unwrap()
            };
            out.send(request(1)).await.unwrap();
            assert!(out.request_written(&RequestId::Number(1)).await);
            let waiting = {
                let out = out.clone();
                tokio::spawn(async move { out.request_written(&RequestId::Number(2)).await })
            };
            tokio::task::yield_now().await;
            out.send(request(2)).await.unwrap();
            assert!(waiting.await.unwrap());
            let written = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                written,
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n"
            );
            let _ = std::fs::remove_file(path);
        });
    }

    #[test]
    fn lines_longer_than_the_limit_are_skipped_whole() {
        runtime().block_on(async {
            let (mut client, server) = tokio::io::duplex(1 << 16);
            let (out, path) = outbox("long");
            let mut wire = Wire::new(server, out);
            let writer = tokio::spawn(async move {
                let chunk = vec![b'x'; 1 << 20];
                for _ in 0..=(MAX_LINE >> 20) {
                    client.write_all(&chunk).await.unwrap();
                }
                client
                    .write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n")
                    .await
                    .unwrap();
            });
            let message = wire.next_message().await.unwrap();
            assert!(matches!(message, JsonRpcMessage::Request(r) if r.id == RequestId::Number(5)));
            assert!(wire.line.capacity() <= MAX_LINE + (1 << 20));
            writer.await.unwrap();
            // The skipped line was answered -32600, on a task of its own.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let written = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                written,
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{{\"code\":-32600,\"message\":\"Invalid Request: the message is longer than {MAX_LINE} bytes\"}}}}\n"
                )
            );
            let _ = std::fs::remove_file(path);
        });
    }
}
