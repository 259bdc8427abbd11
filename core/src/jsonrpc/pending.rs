//! The client's requests a server has not answered yet, and the answers a
//! guard gives for them when the server is gone: see [`PendingRequests`].
//!
//! [`ClientLines`] scans the client's stream as it is forwarded, holding
//! nothing. A request, alone or in a batch, is noted before the server
//! sees it and struck off by its response (alone or in a batch) or a
//! `notifications/cancelled`. The table is bounded twice: at most
//! [`MAX_PENDING`] requests, and at most [`MAX_PENDING_ID_BYTES`] bytes of
//! their ids (an id may be as long as a message); a request past either
//! is counted as untracked. When the server is gone, each request left
//! gets one JSON-RPC error (code [`SERVER_GONE_CODE`]), oldest first; the
//! requests of one batch are answered in one batch (an array), as
//! JSON-RPC 2.0 answers a batch.

use std::collections::HashMap;

use serde::Serialize;

use super::scan::{MessageInfo, MessageKind, MessageScanner, RawValue};

/// The JSON-RPC error code of an answer for a server that is gone: the
/// implementation-defined range's first code, which the MCP SDKs already
/// read as "connection closed".
pub const SERVER_GONE_CODE: i64 = -32000;

/// Requests tracked at most: a client that never sees answers cannot grow
/// the table beyond this (later ones are counted in
/// [`PendingRequests::untracked`], not answered).
pub const MAX_PENDING: usize = 65_536;

/// Bytes of ids the table keeps at most (64 MiB, the default message
/// limit): with ids of any length up to a message's, the table still holds
/// a bounded amount; a request whose id would pass it is untracked.
pub const MAX_PENDING_ID_BYTES: usize = 64 << 20;

/// Reads the client's side of an MCP stdio session as it is forwarded
/// (nothing is held: the bytes go on to the server as they are), and
/// hands each whole line that is a JSON-RPC message to `sink`.
///
/// ```
/// use spillguard_core::{ClientLines, MessageKind};
///
/// let mut client = ClientLines::new();
/// let mut seen = Vec::new();
/// client.feed(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"meth", |m| seen.push(m.kind));
/// client.feed(b"od\":\"initialize\"}\nnot json\n", |m| seen.push(m.kind));
/// assert_eq!(seen, [MessageKind::Request]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClientLines {
    scanner: MessageScanner,
}

impl ClientLines {
    /// At the start of the client's stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Scans `chunk`; each message line it ends goes to `sink`.
    pub fn feed(&mut self, chunk: &[u8], mut sink: impl FnMut(&MessageInfo)) {
        let mut rest = chunk;
        while let Some(newline) = memchr::memchr(b'\n', rest) {
            let (line, after) = rest.split_at(newline);
            self.scanner.feed(line);
            if let Some(info) = self.scanner.finish() {
                sink(&info);
            }
            self.scanner.reset();
            rest = after.get(1..).unwrap_or_default();
        }
        self.scanner.feed(rest);
    }
}

/// The requests a client sent that its server has not answered, in the
/// order they were sent.
///
/// The guard tells it every message each way: the client's
/// ([`handle_client`](Self::handle_client): a request is added, a
/// `notifications/cancelled` removes the request it names) before they
/// reach the server, the server's ([`handle_server`](Self::handle_server):
/// a response removes its id). When the server has ended,
/// [`answers`](Self::answers) gives one JSON-RPC error per request left,
/// which the guard writes to the client instead of letting it wait for a
/// timeout.
///
/// ```
/// use spillguard_core::{MessageScanner, PendingRequests, ServerGone};
///
/// let info = |line: &[u8]| {
///     let mut scanner = MessageScanner::new();
///     scanner.feed(line);
///     scanner.finish().expect("a message")
/// };
/// let mut pending = PendingRequests::new();
/// pending.handle_client(&info(br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#));
/// pending.handle_client(&info(br#"{"jsonrpc":"2.0","id":"b","method":"tools/list"}"#));
/// pending.handle_server(&info(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
/// assert_eq!(pending.len(), 1);
///
/// let gone = ServerGone {
///     call_id: "c_1".into(),
///     exit_status: Some(1),
///     exit_signal: None,
///     stderr_excerpt: "ValueError: bad config\n".into(),
///     stderr_bytes_seen: 23,
///     failure: None,
///     restart: None,
/// };
/// let answers = String::from_utf8(pending.answers(&gone)).unwrap();
/// assert_eq!(
///     answers,
///     concat!(
///         r#"{"jsonrpc":"2.0","id":"b","error":{"code":-32000,"#,
///         r#""message":"MCP server exited with status 1 before answering","#,
///         r#""data":{"exit_status":1,"exit_signal":null,"#,
///         r#""stderr_excerpt":"ValueError: bad config\n","stderr_bytes_seen":23,"#,
///         r#""call_id":"c_1"}}}"#,
///         "\n",
///     )
/// );
/// ```
#[derive(Debug, Clone, Default)]
pub struct PendingRequests {
    /// Each pending id, with the order it came in and the batch it came
    /// in, if one did.
    ids: HashMap<RawValue, Pending>,
    next: u64,
    /// The number of the next batch.
    next_batch: u64,
    /// The bytes of the ids in `ids`.
    id_bytes: usize,
    untracked: u64,
}

/// Where a pending request came.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// Its place among the requests.
    at: u64,
    /// The batch it was part of.
    batch: Option<u64>,
}

/// Why a server can no longer answer, for [`PendingRequests::answers`]:
/// what its call record and excerpt say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerGone {
    /// The exit code, if it exited.
    pub exit_status: Option<i32>,
    /// The signal that ended it, if one did.
    pub exit_signal: Option<i32>,
    /// Its stderr excerpt, redacted, marker first, within the excerpt
    /// budget.
    pub stderr_excerpt: String,
    /// Every stderr byte it wrote.
    pub stderr_bytes_seen: u64,
    /// The guard's call id (the record's `call_id`).
    pub call_id: String,
    /// Why it could not run, when it never started (the record's
    /// `failure`); left out of the answer otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Where the guard's restarts stand, when it restarts its server;
    /// its fields are written in `data` (left out otherwise).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartNote>,
}

/// Where a guard's restarts stand when a run of its server ended, for
/// [`ServerGone`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestartNote {
    /// `restarting (attempt 2 of 5)`, or the crash-loop verdict
    /// (`crash loop: gave up after 5 attempts in 9.8 s`).
    pub restart: String,
    /// The runs in a row that ended quickly, this one included.
    pub attempts: u32,
    /// Whether the restarts have ended in a crash loop.
    pub crash_loop: bool,
}

impl ServerGone {
    /// What a finished call's record and agent excerpt say of its server:
    /// its exit, its stderr, and, when it could not be spawned, why.
    pub fn from_record(record: &crate::CallRecord, stderr_excerpt: String) -> Self {
        Self {
            exit_status: record.exit_status,
            exit_signal: record.exit_signal,
            stderr_excerpt,
            stderr_bytes_seen: record.stderr_bytes_seen,
            call_id: record.call_id.clone(),
            failure: record
                .spawn_error_kind
                .is_some()
                .then(|| record.failure.clone())
                .flatten(),
            restart: None,
        }
    }

    /// The answer's `message`: how the server ended, then where the
    /// restarts stand (`; restarting (attempt 2 of 5)`), if they do.
    pub fn message(&self) -> String {
        let ended = self.ended();
        match &self.restart {
            Some(note) => format!("{ended}; {}", note.restart),
            None => ended,
        }
    }

    fn ended(&self) -> String {
        match (self.exit_status, self.exit_signal, &self.failure) {
            (Some(code), _, _) => format!("MCP server exited with status {code} before answering"),
            (None, Some(signal), _) => {
                format!("MCP server was ended by signal {signal} before answering")
            }
            (None, None, Some(failure)) => format!("MCP server could not be started: {failure}"),
            (None, None, None) => "MCP server ended before answering".to_owned(),
        }
    }
}

/// One error answer, as written.
#[derive(Serialize)]
struct ErrorBody<'a> {
    code: i64,
    message: String,
    data: &'a ServerGone,
}

impl PendingRequests {
    /// No request pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests pending.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no request is pending.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Requests that came when the table was full: not tracked, so not
    /// answered for.
    pub fn untracked(&self) -> u64 {
        self.untracked
    }

    /// A message from the client, before it reaches the server (a batch:
    /// each of its messages).
    pub fn handle_client(&mut self, info: &MessageInfo) {
        let batch = (info.kind == MessageKind::Batch).then(|| {
            self.next_batch += 1;
            self.next_batch
        });
        for message in info.messages() {
            self.client_message(message, batch);
        }
    }

    fn client_message(&mut self, info: &MessageInfo, batch: Option<u64>) {
        match info.kind {
            MessageKind::Request => {
                let Some(id) = &info.id else {
                    return;
                };
                let at = Pending {
                    at: self.next,
                    batch,
                };
                self.next += 1;
                if let Some(pending) = self.ids.get_mut(id) {
                    *pending = at;
                } else if self.ids.len() < MAX_PENDING
                    && self.id_bytes + id.as_bytes().len() <= MAX_PENDING_ID_BYTES
                {
                    self.id_bytes += id.as_bytes().len();
                    self.ids.insert(id.clone(), at);
                } else {
                    self.untracked += 1;
                }
            }
            MessageKind::Notification if info.is_method("notifications/cancelled") => {
                // The server should not answer a request cancelled.
                if let Some(id) = &info.request_id {
                    self.remove(id);
                }
            }
            _ => {}
        }
    }

    /// Strikes `id` off; whether it was pending.
    fn remove(&mut self, id: &RawValue) -> Option<Pending> {
        let pending = self.ids.remove(id)?;
        self.id_bytes -= id.as_bytes().len();
        Some(pending)
    }

    /// A message from the server, as it is forwarded to the client (a
    /// batch: each of its responses).
    pub fn handle_server(&mut self, info: &MessageInfo) {
        for message in info.messages() {
            if message.kind == MessageKind::Response
                && let Some(id) = &message.id
            {
                self.remove(id);
            }
        }
    }

    /// The error line for a request the guard dropped because the server
    /// stopped reading its input (see [`InputQueue`](crate::InputQueue)),
    /// if it is pending: it is no longer. Code [`SERVER_GONE_CODE`],
    /// message `MCP server is not reading its input: the request was
    /// dropped`, `data` the guard's `call_id` and `"reason":
    /// "server_not_reading"`.
    pub fn dropped(&mut self, info: &MessageInfo, call_id: &str) -> Option<Vec<u8>> {
        let error = serde_json::json!({
            "code": SERVER_GONE_CODE,
            "message": "MCP server is not reading its input: the request was dropped",
            "data": { "call_id": call_id, "reason": "server_not_reading" },
        })
        .to_string();
        let ids: Vec<RawValue> = info
            .messages()
            .filter(|message| message.kind == MessageKind::Request)
            .filter_map(|message| message.id.clone())
            .filter(|id| self.remove(id).is_some())
            .collect();
        if ids.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        write_answers(&mut out, &ids, &error, info.kind == MessageKind::Batch);
        Some(out)
    }

    /// One JSON-RPC error per pending request, oldest first (code
    /// [`SERVER_GONE_CODE`], the message of [`ServerGone::message`],
    /// `gone` as `data`): a line each, and one line holding an array for
    /// the requests of one batch (where its oldest request stands); the
    /// table is empty afterwards.
    pub fn answers(&mut self, gone: &ServerGone) -> Vec<u8> {
        let mut ids: Vec<(Pending, RawValue)> = self.ids.drain().map(|(id, at)| (at, id)).collect();
        self.id_bytes = 0;
        ids.sort_unstable_by_key(|(pending, _)| pending.at);
        let body = ErrorBody {
            code: SERVER_GONE_CODE,
            message: gone.message(),
            data: gone,
        };
        let Ok(error) = serde_json::to_string(&body) else {
            return Vec::new();
        };
        // A batch's requests, oldest first; answered where its oldest is.
        let mut batches: HashMap<u64, Vec<RawValue>> = HashMap::new();
        for (pending, id) in &ids {
            if let Some(batch) = pending.batch {
                batches.entry(batch).or_default().push(id.clone());
            }
        }
        let mut out = Vec::new();
        for (pending, id) in &ids {
            match pending.batch {
                None => write_answers(&mut out, std::slice::from_ref(id), &error, false),
                Some(batch) => {
                    if let Some(members) = batches.remove(&batch) {
                        write_answers(&mut out, &members, &error, true);
                    }
                }
            }
        }
        out
    }
}

/// Appends the error answers for `ids` (the ids as the client spelt
/// them: valid JSON, scanned), `error` the answer's `error` member: a
/// line each, or one line holding them as an array if `batch`.
fn write_answers(out: &mut Vec<u8>, ids: &[RawValue], error: &str, batch: bool) {
    if batch {
        out.push(b'[');
    }
    for (n, id) in ids.iter().enumerate() {
        if batch && n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(b",\"error\":");
        out.extend_from_slice(error.as_bytes());
        out.push(b'}');
        if !batch {
            out.push(b'\n');
        }
    }
    if batch {
        out.extend_from_slice(b"]\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(line: &str) -> MessageInfo {
        let mut scanner = MessageScanner::new();
        scanner.feed(line.as_bytes());
        scanner.finish().unwrap()
    }

    fn gone() -> ServerGone {
        ServerGone {
            exit_status: None,
            exit_signal: Some(9),
            stderr_excerpt: String::new(),
            stderr_bytes_seen: 0,
            call_id: "c".into(),
            failure: None,
            restart: None,
        }
    }

    #[test]
    fn answered_cancelled_and_notified_requests_are_not_pending() {
        let mut pending = PendingRequests::new();
        pending.handle_client(&info(r#"{"jsonrpc":"2.0","id":1,"method":"a"}"#));
        pending.handle_client(&info(r#"{"jsonrpc":"2.0","id":2,"method":"b"}"#));
        pending.handle_client(&info(r#"{"jsonrpc":"2.0","id":"3","method":"c"}"#));
        pending.handle_client(&info(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ));
        pending.handle_client(&info(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#,
        ));
        // A response from the server to a request of its own is not one of
        // the client's; a server's answer with another id type neither.
        pending.handle_client(&info(r#"{"jsonrpc":"2.0","id":9,"result":{}}"#));
        pending.handle_server(&info(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#));
        pending.handle_server(&info(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}"#,
        ));
        assert_eq!(pending.len(), 1);
        let answers = String::from_utf8(pending.answers(&gone())).unwrap();
        assert_eq!(
            answers,
            "{\"jsonrpc\":\"2.0\",\"id\":\"3\",\"error\":{\"code\":-32000,\
             \"message\":\"MCP server was ended by signal 9 before answering\",\
             \"data\":{\"exit_status\":null,\"exit_signal\":9,\"stderr_excerpt\":\"\",\
             \"stderr_bytes_seen\":0,\"call_id\":\"c\"}}}\n"
        );
        assert!(pending.is_empty());
    }

    #[test]
    fn answers_come_oldest_first_and_parse() {
        let mut pending = PendingRequests::new();
        for id in [5, 3, 9, 1] {
            pending.handle_client(&info(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#
            )));
        }
        let answers = pending.answers(&ServerGone {
            failure: Some("spawn failed: nope: NotFound".into()),
            exit_signal: None,
            ..gone()
        });
        let ids: Vec<i64> = answers
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|line| {
                let value: serde_json::Value = serde_json::from_slice(line).unwrap();
                assert_eq!(
                    value["error"]["message"],
                    "MCP server could not be started: spawn failed: nope: NotFound"
                );
                assert_eq!(
                    value["error"]["data"]["failure"],
                    "spawn failed: nope: NotFound"
                );
                value["id"].as_i64().unwrap()
            })
            .collect();
        assert_eq!(ids, [5, 3, 9, 1]);
    }

    #[test]
    fn the_table_is_bounded() {
        let mut pending = PendingRequests::new();
        for id in 0..MAX_PENDING + 10 {
            pending.handle_client(&info(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#
            )));
        }
        assert_eq!(pending.len(), MAX_PENDING);
        assert_eq!(pending.untracked(), 10);
    }

    #[test]
    fn a_batch_s_requests_are_tracked_and_answered_in_one_array() {
        let mut pending = PendingRequests::new();
        pending.handle_client(&info(r#"{"jsonrpc":"2.0","id":0,"method":"a"}"#));
        pending.handle_client(&info(concat!(
            r#"[{"jsonrpc":"2.0","id":1,"method":"a"},"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"},"#,
            r#"{"jsonrpc":"2.0","id":"two","method":"b"},"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"c"},"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"d"}]"#
        )));
        pending.handle_client(&info(r#"{"jsonrpc":"2.0","id":5,"method":"e"}"#));
        assert_eq!(pending.len(), 6);
        // A server's batch answer strikes off each id it answers.
        pending.handle_server(&info(
            r#"[{"jsonrpc":"2.0","id":4,"result":{}},{"jsonrpc":"2.0","id":0,"result":{}}]"#,
        ));
        assert_eq!(pending.len(), 4);
        let error = "{\"code\":-32000,\"message\":\"MCP server was ended by signal 9 before \
                     answering\",\"data\":{\"exit_status\":null,\"exit_signal\":9,\
                     \"stderr_excerpt\":\"\",\"stderr_bytes_seen\":0,\"call_id\":\"c\"}}";
        let answers = String::from_utf8(pending.answers(&gone())).unwrap();
        assert_eq!(
            answers,
            format!(
                "[{{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{error}}},\
                 {{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"error\":{error}}},\
                 {{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{error}}}]\n\
                 {{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{error}}}\n"
            )
        );
        assert!(pending.is_empty());
    }

    #[test]
    fn a_dropped_batch_is_answered_in_one_array() {
        let mut pending = PendingRequests::new();
        let batch = info(concat!(
            r#"[{"jsonrpc":"2.0","id":1,"method":"a"},"#,
            r#"{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":2,"method":"b"}]"#
        ));
        pending.handle_client(&batch);
        let line = String::from_utf8(pending.dropped(&batch, "c_1").unwrap()).unwrap();
        let error = r#"{"code":-32000,"data":{"call_id":"c_1","reason":"server_not_reading"},"message":"MCP server is not reading its input: the request was dropped"}"#;
        assert_eq!(
            line,
            format!(
                "[{{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{error}}},\
                 {{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{error}}}]\n"
            )
        );
        assert!(pending.is_empty());
        assert_eq!(pending.dropped(&batch, "c_1"), None);
    }

    #[test]
    fn ids_of_any_length_are_tracked_within_the_byte_bound() {
        let mut pending = PendingRequests::new();
        let id = format!("\"{}\"", "i".repeat(3998));
        pending.handle_client(&info(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#
        )));
        assert_eq!(pending.len(), 1);
        let answers = pending.answers(&gone());
        let answer: serde_json::Value = serde_json::from_slice(&answers).unwrap();
        assert_eq!(answer["id"].as_str().unwrap().len(), 3998);
        assert_eq!(answers.iter().filter(|&&b| b == b'\n').count(), 1);
        // Ids of 1 MiB: 64 fit the byte bound, the 65th is untracked.
        let big = "b".repeat((1 << 20) - 4);
        for n in 0..65 {
            pending.handle_client(&info(&format!(
                r#"{{"jsonrpc":"2.0","id":"{n:02}{big}","method":"m"}}"#
            )));
        }
        assert_eq!(pending.len(), 64);
        assert_eq!(pending.untracked(), 1);
        assert_eq!(pending.id_bytes, MAX_PENDING_ID_BYTES);
        // Answered ones free their bytes.
        pending.handle_server(&info(&format!(
            r#"{{"jsonrpc":"2.0","id":"00{big}","result":{{}}}}"#
        )));
        assert_eq!(pending.id_bytes, MAX_PENDING_ID_BYTES - (1 << 20));
    }

    #[test]
    fn client_lines_are_the_same_for_every_chunking() {
        let stream = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\nlog\n\
                       {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"b\"}\r\n{\"jsonrpc\":\"2.0\",\"id\":3";
        let whole = {
            let mut ids = Vec::new();
            ClientLines::new().feed(stream, |m| ids.push(m.id.clone()));
            ids
        };
        assert_eq!(whole.len(), 2);
        for cut in 0..stream.len() {
            let mut ids = Vec::new();
            let mut client = ClientLines::new();
            let (a, b) = stream.split_at(cut);
            client.feed(a, |m| ids.push(m.id.clone()));
            client.feed(b, |m| ids.push(m.id.clone()));
            assert_eq!(ids, whole, "cut at {cut}");
        }
    }
}
