//! What a guard that restarts its MCP server keeps of the host's session,
//! and how it hands it to the next server without the host seeing it:
//! see [`SessionReplay`].
//!
//! **The host never sees a restart in the protocol.** Kept: the host's
//! `initialize` request and its `notifications/initialized` (their bytes,
//! as sent), and each `resources/subscribe` and `logging/setLevel` request
//! the server answered with a result (an error answer forgets it; a
//! `resources/unsubscribe` answered with a result ends the subscription
//! kept; a later level replaces the last). A new server gets the
//! `initialize` first; its answer is swallowed and must name the
//! `protocolVersion` the first server's did, or the replay is refused with
//! the reason. Then it gets `notifications/initialized` and the kept
//! requests (their answers swallowed too), and the host gets
//! `notifications/tools/list_changed`, plus
//! `notifications/prompts/list_changed` and
//! `notifications/resources/list_changed` when the first server's
//! `initialize` result advertised prompts or resources. A kept line is at
//! most [`MAX_KEPT_LINE`] bytes; a longer `initialize` makes the session
//! one that cannot be replayed (the replay is refused, saying so). A new
//! server that has not answered the `initialize` within [`REPLAY_WAIT`] is
//! refused too.
//!
//! **Retries** ([`SessionReplay::with_retries`], `--retry idempotent`): a
//! `tools/call` in flight when the server died, whose tool the last
//! `tools/list` result marked `annotations.idempotentHint` or
//! `annotations.readOnlyHint`, is sent once more to the next server (after
//! the replay) instead of answered with the crash error. At most
//! [`MAX_RETRY_CALLS`] calls in flight are kept for it.
//!
//! **Bounded.** Everything kept together is at most [`MAX_KEPT_BYTES`]: a
//! setting past it is not kept, and the next restart is refused, saying
//! so; a call past it is not kept for a retry.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use memchr::memmem;
use serde_json::Value;

use super::scan::{MessageInfo, MessageKind, MessageScanner, RawValue};

/// The longest client line kept for a replay (64 KiB: an `initialize`
/// with its capabilities and client info is a few hundred bytes).
pub const MAX_KEPT_LINE: usize = 64 << 10;

/// How long a new server may take to answer the replayed `initialize`
/// (10 s: what a server's own start may take, while the host's requests
/// wait in the queue).
pub const REPLAY_WAIT: Duration = Duration::from_secs(10);

/// The `tools/call` requests in flight kept for a retry, at most.
pub const MAX_RETRY_CALLS: usize = 1024;

/// The bytes of the host's lines kept for a replay and for retries, at
/// most, all together (4 MiB, as the input queue): past it, a setting is
/// not kept and the session cannot be replayed (said at the restart), and
/// a call is not kept for a retry (answered as any other).
pub const MAX_KEPT_BYTES: usize = 4 << 20;

/// What to do with a line the server wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerLine {
    /// Forward it to the host.
    Forward,
    /// Swallow it: the answer to a replayed request.
    Swallow,
    /// Swallow it: the new server took the session. Write `to_server`
    /// to it (the `initialized` notification and the kept requests), then
    /// what the host queued, and `to_host` to the host.
    Ready {
        /// For the new server, before anything the host sent.
        to_server: Vec<u8>,
        /// For the host: the `list_changed` notifications.
        to_host: Vec<u8>,
    },
    /// Swallow it: the new server cannot take the session; no more
    /// restarts.
    Refused(String),
}

/// The host's session as a restarting guard keeps it; see the module
/// docs. Feed it the client's bytes as read and each server line before
/// it is forwarded; call [`begin`](Self::begin) when a new server starts.
#[derive(Debug, Default)]
pub struct SessionReplay {
    /// The client's line being read (up to [`MAX_KEPT_LINE`]).
    line: Vec<u8>,
    /// The line being read is longer than kept.
    overlong: bool,
    /// The host's `initialize`: its id and line.
    initialize: Option<(RawValue, Vec<u8>)>,
    /// The host's `initialize` was too long to keep.
    initialize_lost: bool,
    /// A setting could not be kept ([`MAX_KEPT_BYTES`]).
    settings_lost: bool,
    /// The host's `notifications/initialized`, as sent.
    initialized: Option<Vec<u8>>,
    /// `resources/subscribe`, `resources/unsubscribe` and
    /// `logging/setLevel` requests not answered yet.
    asked: HashMap<RawValue, (Setting, Vec<u8>)>,
    /// The subscriptions and the log level in force (answered with a
    /// result), in order.
    kept: Vec<(Setting, Vec<u8>)>,
    /// The first server's `initialize` result: its protocol version and
    /// whether it has prompts and resources.
    session: Option<(Value, bool, bool)>,
    /// While a new server is taking the session: the answers to swallow,
    /// and the `initialize` id while its answer is awaited.
    swallow: HashSet<RawValue>,
    awaiting: Option<RawValue>,
    /// When the replayed `initialize` went out.
    began: Option<Instant>,
    /// With retries on: what they need.
    retries: Option<Retries>,
}

/// What a kept request sets on the server.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Setting {
    /// A subscription to this URI.
    Subscribe(String),
    /// The end of the subscription to this URI (never kept itself).
    Unsubscribe(String),
    /// The log level.
    Level,
}

/// The `tools/call` requests a restarted server may be sent again.
#[derive(Debug, Default)]
struct Retries {
    /// `tools/list` requests not answered yet.
    listing: HashSet<RawValue>,
    /// The tools the last `tools/list` result marked idempotent or
    /// read-only.
    safe: HashSet<String>,
    /// `tools/call` requests in flight: id, tool, line.
    calls: Vec<(RawValue, String, Vec<u8>)>,
    /// Calls already sent again once.
    retried: HashSet<RawValue>,
    /// Calls to send the next server after the replay.
    resend: Vec<u8>,
}

impl SessionReplay {
    /// Nothing kept yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Nothing kept yet; idempotent and read-only tool calls in flight at
    /// a crash are sent again once (see the module docs).
    pub fn with_retries() -> Self {
        Self {
            retries: Some(Retries::default()),
            ..Self::default()
        }
    }

    /// Bytes read from the client, in any chunking.
    pub fn handle_client(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let (part, rest, ends) = match memchr::memchr(b'\n', chunk) {
                Some(at) => (&chunk[..at], &chunk[at + 1..], true),
                None => (chunk, &[][..], false),
            };
            if self.line.len() + part.len() > MAX_KEPT_LINE {
                self.overlong = true;
                self.line.clear();
            } else if !self.overlong {
                self.line.extend_from_slice(part);
            }
            if ends {
                let line = std::mem::take(&mut self.line);
                if std::mem::take(&mut self.overlong) {
                    self.initialize_lost |= self.initialize.is_none();
                } else {
                    self.client_line(line);
                }
            }
            chunk = rest;
        }
    }

    fn client_line(&mut self, mut line: Vec<u8>) {
        let wanted = [
            "initialize",
            "resources/subscribe",
            "resources/unsubscribe",
            "logging/setLevel",
        ];
        let tools = self.retries.is_some()
            && (memmem::find(&line, b"tools/").is_some()
                || memmem::find(&line, b"notifications/cancelled").is_some());
        if !tools
            && !wanted
                .iter()
                .any(|m| memmem::find(&line, m.as_bytes()).is_some())
        {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            return;
        };
        let method = message.get("method").and_then(Value::as_str);
        let id = message
            .get("id")
            .and_then(|id| RawValue::new(id.to_string().as_bytes()));
        line.push(b'\n');
        match (method, id) {
            (Some("notifications/initialized"), None) => self.initialized = Some(line),
            // Until a server answered it, the host's latest (it asks again
            // after the crash answer).
            (Some("initialize"), Some(id)) if self.session.is_none() => {
                self.initialize = Some((id, line));
            }
            (
                Some("resources/subscribe" | "resources/unsubscribe" | "logging/setLevel"),
                Some(_),
            ) if self.kept_bytes() + line.len() > MAX_KEPT_BYTES => {
                self.settings_lost = true;
            }
            (Some(method @ ("resources/subscribe" | "resources/unsubscribe")), Some(id)) => {
                let uri = message.pointer("/params/uri").and_then(Value::as_str);
                let uri = uri.unwrap_or_default().to_owned();
                let setting = match method {
                    "resources/subscribe" => Setting::Subscribe(uri),
                    _ => Setting::Unsubscribe(uri),
                };
                self.asked.insert(id, (setting, line));
            }
            (Some("logging/setLevel"), Some(id)) => {
                self.asked.insert(id, (Setting::Level, line));
            }
            (Some("notifications/cancelled"), None) => {
                let cancelled = message.pointer("/params/requestId");
                if let Some(id) = cancelled.and_then(|id| RawValue::new(id.to_string().as_bytes()))
                {
                    self.forget_call(&id);
                }
            }
            (Some("tools/list"), Some(id)) => {
                if let Some(retries) = &mut self.retries {
                    retries.listing.insert(id);
                }
            }
            (Some("tools/call"), Some(id)) => {
                let name = message.pointer("/params/name").and_then(Value::as_str);
                let room = self.kept_bytes() + line.len() <= MAX_KEPT_BYTES;
                if let (Some(retries), Some(name), true) = (&mut self.retries, name, room)
                    && retries.calls.len() < MAX_RETRY_CALLS
                {
                    retries.calls.push((id, name.to_owned(), line));
                }
            }
            _ => {}
        }
    }

    /// The server is gone and another follows: the requests that will be
    /// sent to it again after the replay (they stay pending; the others
    /// in flight are answered with the crash error), oldest first.
    /// `queued` are the ids of the host's requests still waiting whole to
    /// be written: the next server gets them from the queue, once, and
    /// they stay retriable. Calls chosen at an earlier end and not sent
    /// yet (that server died during its replay) are chosen again.
    pub fn handle_server_gone<'a>(
        &mut self,
        queued: impl IntoIterator<Item = &'a RawValue>,
    ) -> Vec<MessageInfo> {
        let Some(retries) = &mut self.retries else {
            return Vec::new();
        };
        let queued: HashSet<&RawValue> = queued.into_iter().collect();
        let read = |line: &[u8]| {
            let mut scanner = MessageScanner::new();
            scanner.feed(line.strip_suffix(b"\n").unwrap_or(line));
            scanner.finish()
        };
        // Still to be sent from an earlier end: they stay pending.
        let mut again: Vec<MessageInfo> = retries
            .resend
            .split_inclusive(|&b| b == b'\n')
            .filter_map(read)
            .collect();
        let mut kept = Vec::new();
        for (id, name, line) in retries.calls.drain(..) {
            if queued.contains(&id) {
                kept.push((id, name, line));
            } else if retries.safe.contains(&name) && retries.retried.insert(id) {
                again.extend(read(&line));
                retries.resend.extend_from_slice(&line);
            }
        }
        retries.calls = kept;
        retries.listing.clear();
        again
    }

    /// The guard answered the host's request `id` itself (dropped, or
    /// cancelled by the host): it is no call to send again.
    pub fn forget_call(&mut self, id: &RawValue) {
        if let Some(retries) = &mut self.retries {
            retries.calls.retain(|(call, _, _)| call != id);
        }
    }

    /// A line the server wrote (`info` from the stdout guard): forwarded,
    /// swallowed, or the end of a replay.
    pub fn handle_server(&mut self, line: &[u8], info: &MessageInfo) -> ServerLine {
        if info.kind != MessageKind::Response {
            return ServerLine::Forward;
        }
        let Some(id) = &info.id else {
            return ServerLine::Forward;
        };
        if self.awaiting.as_ref() == Some(id) {
            self.awaiting = None;
            return self.new_session(line);
        }
        if self.swallow.remove(id) {
            return ServerLine::Swallow;
        }
        if let Some((setting, line)) = self.asked.remove(id)
            && info.error_code.is_none()
        {
            // The latest of each setting is kept; an unsubscribe ends one.
            let replaces = match &setting {
                Setting::Subscribe(uri) | Setting::Unsubscribe(uri) => {
                    Setting::Subscribe(uri.clone())
                }
                Setting::Level => Setting::Level,
            };
            self.kept.retain(|(kept, _)| *kept != replaces);
            if !matches!(setting, Setting::Unsubscribe(_)) {
                self.kept.push((setting, line));
            }
        }
        if let Some(retries) = &mut self.retries {
            retries.calls.retain(|(call, ..)| call != id);
            retries.retried.remove(id);
            if retries.listing.remove(id) {
                retries.safe = safe_tools(line);
            }
        }
        // Only a result is a session: after an error answer the host asks
        // again, and its next initialize is the one kept.
        if self.session.is_none() && self.initialize.as_ref().is_some_and(|(init, _)| init == id) {
            self.session = session_of(line);
        }
        ServerLine::Forward
    }

    /// A new server started: the bytes to write to it first (the host's
    /// `initialize`), or why the session cannot be replayed.
    ///
    /// # Errors
    ///
    /// The reason, when the host's `initialize` could not be kept.
    pub fn begin(&mut self, now: Instant) -> Result<Vec<u8>, String> {
        self.asked.clear();
        self.swallow.clear();
        match (&self.initialize, &self.session) {
            _ if self.initialize_lost => Err(format!(
                "the host's initialize request is longer than {MAX_KEPT_LINE} bytes and was not kept"
            )),
            (_, Some(_)) if self.settings_lost => Err(format!(
                "the host's subscriptions and log level passed {MAX_KEPT_BYTES} bytes and were not all kept"
            )),
            (Some((id, line)), Some(_)) => {
                self.awaiting = Some(id.clone());
                self.began = Some(now);
                Ok(line.clone())
            }
            // No server answered the host's initialize (it got the crash
            // answer and asks again itself): nothing to replay, only the
            // calls to send again.
            _ => Ok(self.take_resend()),
        }
    }

    /// Whether a replay is waiting for the new server's `initialize`
    /// answer.
    pub fn is_replaying(&self) -> bool {
        self.awaiting.is_some()
    }

    /// When the new server's `initialize` answer is overdue.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.awaiting
            .as_ref()
            .and(self.began)
            .and_then(|began| began.checked_add(REPLAY_WAIT))
    }

    /// The reason to refuse the new server, once its answer is overdue
    /// at `now` (nothing before).
    pub fn handle_timeout(&mut self, now: Instant) -> Option<String> {
        if self.poll_timeout().is_none_or(|due| now < due) {
            return None;
        }
        self.awaiting = None;
        Some(format!(
            "the restarted server did not answer initialize within {} s",
            REPLAY_WAIT.as_secs()
        ))
    }

    /// The new server answered the host's `initialize`.
    fn new_session(&mut self, line: &[u8]) -> ServerLine {
        let Some((first, had_prompts, had_resources)) = self.session.clone() else {
            // Not a replay (`begin` replays an answered session only).
            return ServerLine::Forward;
        };
        // An error answer (or no version) is no session: refused as a
        // version that differs.
        let (version, prompts, resources) = session_of(line).unwrap_or((Value::Null, false, false));
        if version != first {
            return ServerLine::Refused(format!(
                "the restarted server answered initialize with protocolVersion {version}, not {first}"
            ));
        }
        let mut to_server = Vec::new();
        if let Some(initialized) = &self.initialized {
            to_server.extend_from_slice(initialized);
        }
        for (_, line) in &self.kept {
            to_server.extend_from_slice(line);
            if let Some(id) = serde_json::from_slice::<Value>(line)
                .ok()
                .and_then(|m| m.get("id").map(Value::to_string))
                .and_then(|id| RawValue::new(id.as_bytes()))
            {
                self.swallow.insert(id);
            }
        }
        let resend = self.take_resend();
        to_server.extend_from_slice(&resend);
        let mut to_host = Vec::new();
        for (kind, on) in [
            ("tools", true),
            ("prompts", had_prompts && prompts),
            ("resources", had_resources && resources),
        ] {
            if on {
                to_host.extend_from_slice(
                    format!(
                        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/{kind}/list_changed\"}}\n"
                    )
                    .as_bytes(),
                );
            }
        }
        ServerLine::Ready { to_server, to_host }
    }
}

impl SessionReplay {
    /// The bytes of the host's lines kept now.
    fn kept_bytes(&self) -> usize {
        let lines = self.initialize.as_ref().map_or(0, |(_, line)| line.len())
            + self.initialized.as_ref().map_or(0, Vec::len)
            + self
                .asked
                .values()
                .map(|(_, line)| line.len())
                .sum::<usize>()
            + self.kept.iter().map(|(_, line)| line.len()).sum::<usize>();
        let retries = self.retries.as_ref().map_or(0, |retries| {
            retries.resend.len()
                + retries
                    .calls
                    .iter()
                    .map(|(_, _, line)| line.len())
                    .sum::<usize>()
        });
        lines + retries
    }

    /// The calls to send again, taken.
    fn take_resend(&mut self) -> Vec<u8> {
        self.retries
            .as_mut()
            .map(|retries| std::mem::take(&mut retries.resend))
            .unwrap_or_default()
    }
}

/// The tools a `tools/list` result marks idempotent or read-only.
fn safe_tools(line: &[u8]) -> HashSet<String> {
    let message = serde_json::from_slice::<Value>(line).unwrap_or(Value::Null);
    let tools = message.pointer("/result/tools").and_then(Value::as_array);
    let hinted = |tool: &Value, hint: &str| {
        tool.pointer(&format!("/annotations/{hint}")) == Some(&Value::Bool(true))
    };
    tools
        .into_iter()
        .flatten()
        .filter(|tool| hinted(tool, "idempotentHint") || hinted(tool, "readOnlyHint"))
        .filter_map(|tool| tool.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// An `initialize` result's `protocolVersion` and whether its
/// capabilities name prompts and resources.
fn session_of(line: &[u8]) -> Option<(Value, bool, bool)> {
    let message = serde_json::from_slice::<Value>(line).ok()?;
    let result = message.get("result")?;
    let version = result.get("protocolVersion").filter(|v| v.is_string())?;
    let capabilities = result.get("capabilities").unwrap_or(&Value::Null);
    Some((
        version.clone(),
        capabilities.get("prompts").is_some(),
        capabilities.get("resources").is_some(),
    ))
}
