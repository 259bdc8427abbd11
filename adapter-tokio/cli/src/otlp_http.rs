//! OTLP over HTTP/protobuf, configured by the standard variables, bounded
//! and out of the calls' way.
//!
//! * `OTEL_EXPORTER_OTLP_ENDPOINT` (`http://host:port`, the base: traces go
//!   to `/v1/traces`, logs to `/v1/logs`, appended to its path before its
//!   query: `http://h:4318/base?x=1` sends traces to
//!   `http://h:4318/base/v1/traces?x=1`), or
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` and
//!   `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` used as given; either turns export
//!   on. `OTEL_SDK_DISABLED=true` turns it off. Credentials in a URL
//!   (`http://user:pass@host`) are refused: they go in a header.
//! * `OTEL_EXPORTER_OTLP_HEADERS`: `key=value` pairs, comma separated,
//!   percent-encoded values, sent with every request.
//! * `OTEL_EXPORTER_OTLP_TIMEOUT`: milliseconds one request may take
//!   (default 10000), and the longest the program waits at its exit for
//!   what is still queued.
//!
//! A call hands its span and log to a queue of [`QUEUE_REQUESTS`] export
//! requests and goes on; one thread sends them in order, in batches (what
//! comes within 200 ms, one `POST` per endpoint). When the queue
//! is full the request is dropped and counted; a collector that refuses,
//! hangs or answers an error costs the calls nothing, and the program's
//! exit at most one timeout. Only `http://` is spoken: an `https://`
//! endpoint is refused when the program starts (run a Collector on the
//! machine and let it speak TLS).
//!
//! No diagnostic shows a header's value, a URL's userinfo password or a
//! query's values: URLs are shown through [`shown`], headers by their
//! place in the variable.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prost::Message;

/// Export requests the queue holds before it drops.
pub const QUEUE_REQUESTS: usize = 2048;

/// How long the sender gathers requests after the first of a batch.
const LINGER: Duration = Duration::from_millis(200);

/// The most bytes one batch's body holds (a Collector refuses requests over
/// 20 MiB by default).
const BATCH_BYTES: usize = 4 << 20;

/// Bytes written per system call, each under the time left.
const WRITE_PIECE: usize = 64 << 10;

/// How often a lingering sender looks whether the queue was closed.
const POLL: Duration = Duration::from_millis(20);

/// The most requests one batch holds.
const BATCH_REQUESTS: usize = 2048;

/// Headers the exporter writes itself: a second copy would change how the
/// request is framed.
const FRAMING: [&str; 5] = [
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
];

/// The default of `OTEL_EXPORTER_OTLP_TIMEOUT`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The traces endpoint.
    pub traces: Endpoint,
    /// The logs endpoint.
    pub logs: Endpoint,
    /// Sent with every request.
    pub headers: Vec<(String, String)>,
    /// The longest one request, and the exit's wait, may take.
    pub timeout: Duration,
}

/// An `http://host:port/path?query` URL, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host:port`, as connected to and sent in `Host`.
    pub authority: String,
    /// The path, starting with `/`.
    pub path: String,
    /// The query with its `?`, or empty.
    pub query: String,
}

impl Endpoint {
    /// Parses `url`: `http://` only, no credentials in it. An error shows
    /// the URL as [`shown`] does (userinfo and query values masked).
    pub fn parse(url: &str) -> Result<Self, String> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => {
                return Err(format!(
                    "{}: https is not spoken here; export to a Collector over http \
                     (it can speak TLS onwards)",
                    shown(url)
                ));
            }
            _ => return Err(format!("{}: not an http:// URL", shown(url))),
        };
        let (authority, target) = match rest.find(['/', '?']) {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err(format!(
                "{}: credentials in the URL are not sent; give them as a header in \
                 OTEL_EXPORTER_OTLP_HEADERS",
                shown(url)
            ));
        }
        if authority.is_empty() || authority.contains([' ', '\r', '\n']) {
            return Err(format!("{}: no usable host", shown(url)));
        }
        if target.contains(['\r', '\n', ' ']) {
            return Err(format!(
                "{}: the path holds a space or a line break",
                shown(url)
            ));
        }
        if target.contains('#') {
            return Err(format!("{}: a fragment (#) is not sent", shown(url)));
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        let (path, query) = match target.find('?') {
            Some(at) => (&target[..at], &target[at..]),
            None => (target, ""),
        };
        Ok(Self {
            authority,
            path: if path.is_empty() { "/" } else { path }.to_owned(),
            query: query.to_owned(),
        })
    }

    /// The base endpoint with `signal` (`v1/traces`) appended to its path,
    /// before its query, as the specification asks of
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`.
    fn under(base: &str, signal: &str) -> Result<Self, String> {
        let mut endpoint = Self::parse(base)?;
        endpoint.path = format!("{}/{signal}", endpoint.path.trim_end_matches('/'));
        Ok(endpoint)
    }

    /// The request target: the path and the query.
    pub fn target(&self) -> String {
        format!("{}{}", self.path, self.query)
    }

    /// The URL as diagnostics show it: every query value masked.
    pub fn shown(&self) -> String {
        shown(&format!("http://{}{}", self.authority, self.target()))
    }
}

/// `url` as a diagnostic may show it: the userinfo's password masked (all
/// of a userinfo without one, which is then a token), every query value
/// masked (a query item without `=` whole), a fragment masked.
/// `http://otel:PASS@h/x?api_key=K&y` is `http://otel:***@h/x?api_key=***&***`.
pub fn shown(url: &str) -> String {
    const MASK: &str = "***";
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, rest) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:{MASK}@{host}"),
            None => format!("{MASK}@{host}"),
        },
        None => authority.to_owned(),
    };
    let (rest, fragment) = match rest.split_once('#') {
        Some((rest, _)) => (rest, format!("#{MASK}")),
        None => (rest, String::new()),
    };
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => {
            let items: Vec<String> = query
                .split('&')
                .map(|item| match item.split_once('=') {
                    Some((key, _)) => format!("{key}={MASK}"),
                    None if item.is_empty() => String::new(),
                    None => MASK.to_owned(),
                })
                .collect();
            (path, format!("?{}", items.join("&")))
        }
        None => (rest, String::new()),
    };
    format!("{scheme}{authority}{path}{query}{fragment}")
}

impl Settings {
    /// The settings the environment asks for; `Ok(None)` when export is
    /// off (no endpoint, or `OTEL_SDK_DISABLED=true`).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let set = |name: &str| var(name).filter(|value| !value.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        for name in [
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        ] {
            if let Some(protocol) = set(name)
                && protocol.trim() != "http/protobuf"
            {
                return Err(format!(
                    "{name}={protocol}: only http/protobuf is spoken here"
                ));
            }
        }
        let base = set("OTEL_EXPORTER_OTLP_ENDPOINT");
        let traces = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        let logs = set("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT");
        if base.is_none() && traces.is_none() && logs.is_none() {
            return Ok(None);
        }
        let pick = |own: Option<String>, signal: &str| -> Result<Endpoint, String> {
            match (own, &base) {
                (Some(url), _) => Endpoint::parse(url.trim()),
                (None, Some(base)) => Endpoint::under(base.trim(), signal),
                (None, None) => Endpoint::parse(&format!("http://localhost:4318/{signal}")),
            }
        };
        let timeout = match set("OTEL_EXPORTER_OTLP_TIMEOUT") {
            None => DEFAULT_TIMEOUT,
            Some(ms) => ms
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|&ms| ms > 0)
                .map(Duration::from_millis)
                .ok_or_else(|| {
                    format!(
                        "OTEL_EXPORTER_OTLP_TIMEOUT={ms}: not a positive number of milliseconds"
                    )
                })?,
        };
        let mut headers = Vec::new();
        // A header's value is never shown, nor a name that may be part of
        // one (a pair written `Authorization: Bearer …`): the pair is
        // named by its place.
        for (place, pair) in set("OTEL_EXPORTER_OTLP_HEADERS")
            .unwrap_or_default()
            .split(',')
            .enumerate()
        {
            if pair.trim().is_empty() {
                continue;
            }
            let place = place + 1;
            let (key, value) = pair.split_once('=').ok_or_else(|| {
                format!("OTEL_EXPORTER_OTLP_HEADERS: pair {place} has no = (key=value)")
            })?;
            let (key, value) = (key.trim(), crate::otel::percent_decoded(value.trim()));
            let token = |c: u8| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c);
            if key.is_empty() || !key.bytes().all(token) {
                return Err(format!(
                    "OTEL_EXPORTER_OTLP_HEADERS: the name of pair {place} is not a header name"
                ));
            }
            if FRAMING.iter().any(|name| key.eq_ignore_ascii_case(name)) {
                return Err(format!(
                    "OTEL_EXPORTER_OTLP_HEADERS: {key} is set by the exporter itself"
                ));
            }
            if value.bytes().any(|c| c < 0x20 && c != b'\t' || c == 0x7f) {
                return Err(format!(
                    "OTEL_EXPORTER_OTLP_HEADERS: the value of {key} holds a control character"
                ));
            }
            headers.push((key.to_owned(), value));
        }
        Ok(Some(Self {
            traces: pick(traces, "v1/traces")?,
            logs: pick(logs, "v1/logs")?,
            headers,
            timeout,
        }))
    }
}

/// One queued request: which endpoint, and its protobuf body.
#[derive(Debug)]
pub struct Request {
    to_logs: bool,
    body: Vec<u8>,
}

/// What the export did, for the exit's report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Requests the collector accepted (2xx).
    pub sent: u64,
    /// Requests that failed: refused, timed out, or answered otherwise.
    pub failed: u64,
    /// Requests dropped because the queue was full.
    pub dropped: u64,
    /// Requests still queued when the exit's wait ended.
    pub abandoned: u64,
}

#[derive(Debug, Default)]
struct Counts {
    sent: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    queued: AtomicU64,
    /// Set when the queue is closed (the exit): the linger ends.
    closed: AtomicBool,
    /// The first failure, said once at the exit.
    first_failure: Mutex<Option<String>>,
}

/// The exporter: a bounded queue and the thread that empties it.
#[derive(Debug)]
pub struct Exporter {
    queue: Queue,
    sender: Option<JoinHandle<()>>,
    timeout: Duration,
}

/// The exporter's queue, shared by whoever exports (the calls' spans, the
/// audit log's records); closed for all of them at the exit.
#[derive(Debug, Clone)]
pub struct Queue {
    sender: Arc<Mutex<Option<SyncSender<Request>>>>,
    counts: Arc<Counts>,
}

impl Queue {
    /// Queues one export request (`logs` for the logs endpoint) without
    /// waiting; dropped and counted when the queue is full, and dropped
    /// once it is closed.
    pub fn export(&self, request: &impl Message, logs: bool) {
        let request = Request {
            to_logs: logs,
            body: request.encode_to_vec(),
        };
        let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(queue) = sender.as_ref() else {
            // Closed: not sent, and counted as such.
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        self.counts.queued.fetch_add(1, Ordering::Relaxed);
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = queue.try_send(request)
        {
            self.counts.queued.fetch_sub(1, Ordering::Relaxed);
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Export requests dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.counts.dropped.load(Ordering::Relaxed)
    }

    /// Closes the queue for every holder of it: the sender ends once it
    /// has sent what is in it, and what is exported later is dropped.
    fn close(&self) {
        drop(
            self.sender
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        self.counts.closed.store(true, Ordering::Relaxed);
    }
}

impl Exporter {
    /// Starts the sending thread.
    pub fn start(settings: Settings) -> io::Result<Self> {
        Self::with_queue(settings, QUEUE_REQUESTS)
    }

    fn with_queue(settings: Settings, capacity: usize) -> io::Result<Self> {
        let (queue, requests) = mpsc::sync_channel(capacity);
        let counts = Arc::new(Counts::default());
        let timeout = settings.timeout;
        let thread_counts = counts.clone();
        let sender = std::thread::Builder::new()
            .name("spillguard-otlp".into())
            .spawn(move || send_all(&settings, &requests, &thread_counts))?;
        Ok(Self {
            queue: Queue {
                sender: Arc::new(Mutex::new(Some(queue))),
                counts,
            },
            sender: Some(sender),
            timeout,
        })
    }

    /// The queue, for another exporting part of the program.
    pub fn queue(&self) -> Queue {
        self.queue.clone()
    }

    /// Queues one export request (see [`Queue::export`]).
    pub fn export(&self, request: &impl Message, logs: bool) {
        self.queue.export(request, logs);
    }

    /// Export requests dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.queue.dropped()
    }

    /// Closes the queue (for every holder of it) and waits at most the
    /// timeout for what is in it to be sent; what is left then is
    /// abandoned (the thread is let go).
    pub fn finish(mut self) -> (Tally, Option<String>) {
        self.queue.close();
        let until = Instant::now() + self.timeout;
        if let Some(sender) = self.sender.take() {
            while !sender.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            if sender.is_finished() {
                let _ = sender.join();
            }
        }
        let counts = &self.queue.counts;
        let tally = Tally {
            sent: counts.sent.load(Ordering::Relaxed),
            failed: counts.failed.load(Ordering::Relaxed),
            dropped: counts.dropped.load(Ordering::Relaxed),
            abandoned: counts.queued.load(Ordering::Relaxed),
        };
        let first = counts
            .first_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        (tally, first)
    }
}

impl Drop for Exporter {
    /// Closes the queue for every holder of it (an exporter dropped
    /// without [`finish`](Self::finish) sends nothing more).
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// Sends the queued requests in batches: what comes within [`LINGER`] of
/// the first (at most [`BATCH_REQUESTS`]) goes in one `POST` per endpoint,
/// the encoded requests concatenated (protobuf merges concatenated
/// messages: their repeated fields add up). The queue's end sends what is
/// left at once.
fn send_all(settings: &Settings, requests: &Receiver<Request>, counts: &Counts) {
    let closed = &counts.closed;
    while let Ok(first) = requests.recv() {
        // Per endpoint (traces, logs): the bodies and how many requests.
        let mut batches = [(Vec::new(), 0_u64), (Vec::new(), 0_u64)];
        let mut add = |request: Request| {
            let batch = &mut batches[usize::from(request.to_logs)];
            batch.0.extend_from_slice(&request.body);
            batch.1 += 1;
        };
        let first_len = first.body.len();
        add(first);
        // One wake-up per batch, not one per request: the thread sleeps
        // the linger out (the queue holds what comes meanwhile), then takes
        // what is there. The queue's end cuts the linger short.
        let until = Instant::now() + LINGER;
        while Instant::now() < until && !closed.load(Ordering::Relaxed) {
            std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
        }
        let mut taken = 1;
        let mut bytes = first_len;
        while taken < BATCH_REQUESTS && bytes < BATCH_BYTES {
            match requests.try_recv() {
                Ok(request) => {
                    bytes += request.body.len();
                    add(request);
                    taken += 1;
                }
                Err(_) => break,
            }
        }
        for (to_logs, (body, count)) in batches.into_iter().enumerate() {
            if count == 0 {
                continue;
            }
            let endpoint = if to_logs == 1 {
                &settings.logs
            } else {
                &settings.traces
            };
            let sent = post(endpoint, &settings.headers, &body, settings.timeout);
            counts.queued.fetch_sub(count, Ordering::Relaxed);
            match sent {
                Ok(()) => counts.sent.fetch_add(count, Ordering::Relaxed),
                Err(error) => {
                    let mut first = counts
                        .first_failure
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    first.get_or_insert_with(|| format!("{}: {error}", endpoint.shown()));
                    counts.failed.fetch_add(count, Ordering::Relaxed)
                }
            };
        }
    }
}

/// One `POST`: the whole request within `timeout`, a 2xx status or an
/// error that says what came back.
fn post(
    endpoint: &Endpoint,
    headers: &[(String, String)],
    body: &[u8],
    timeout: Duration,
) -> io::Result<()> {
    let until = Instant::now() + timeout;
    let left = || {
        until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "timed out"))
    };
    // Every address the name has, in turn (`localhost` is often `::1`
    // first, and a collector may listen on 127.0.0.1 only).
    let mut last = io::Error::other("the host has no address");
    let mut connected = None;
    for address in endpoint.authority.to_socket_addrs()? {
        match TcpStream::connect_timeout(&address, left()?) {
            Ok(stream) => {
                connected = Some(stream);
                break;
            }
            Err(error) => last = error,
        }
    }
    let mut stream = connected.ok_or(last)?;
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\n\
         Content-Length: {}\r\nConnection: close\r\nUser-Agent: spillguard/{}\r\n",
        endpoint.target(),
        endpoint.authority,
        body.len(),
        env!("CARGO_PKG_VERSION")
    );
    for (key, value) in headers {
        head.push_str(&format!("{key}: {value}\r\n"));
    }
    head.push_str("\r\n");
    // In pieces, each within what is left: a collector that reads slowly
    // cannot stretch one request past the timeout.
    for piece in head
        .as_bytes()
        .chunks(WRITE_PIECE)
        .chain(body.chunks(WRITE_PIECE))
    {
        stream.set_write_timeout(Some(left()?))?;
        stream.write_all(piece)?;
    }
    // The status line is all that is read (at most 1 KiB of the answer).
    let mut answer = Vec::with_capacity(256);
    let mut chunk = [0; 256];
    while !answer.contains(&b'\n') && answer.len() < 1024 {
        stream.set_read_timeout(Some(left()?))?;
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&answer);
    let line = line.lines().next().unwrap_or("").trim();
    let status = line
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(1..5))
        .and_then(|rest| rest.strip_prefix(' '))
        .filter(|code| code.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| io::Error::other(format!("not an HTTP answer: {line:?}")))?;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(io::Error::other(format!("the collector answered {line}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn the_standard_variables_make_the_settings() {
        assert_eq!(Settings::from_env(env(&[])), Ok(None));
        let base = Settings::from_env(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x-tenant=t1"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            base.traces,
            Endpoint {
                authority: "collector:4318".into(),
                path: "/v1/traces".into(),
                query: String::new(),
            }
        );
        assert_eq!(base.logs.path, "/v1/logs");
        assert_eq!(
            base.headers,
            [
                ("api-key".to_owned(), "a b".to_owned()),
                ("x-tenant".to_owned(), "t1".to_owned())
            ]
        );
        assert_eq!(base.timeout, Duration::from_millis(250));
        let own = Settings::from_env(env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1/custom/traces",
        )]))
        .unwrap()
        .unwrap();
        assert_eq!(own.traces.authority, "127.0.0.1:80");
        assert_eq!(own.traces.path, "/custom/traces");
        assert_eq!(own.logs.authority, "localhost:4318");
        assert_eq!(own.timeout, DEFAULT_TIMEOUT);
        let off = Settings::from_env(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ]));
        assert_eq!(off, Ok(None));
    }

    #[test]
    fn a_base_endpoint_s_query_stays_after_the_signal_path() {
        let base = Settings::from_env(env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://h:4318/base?x=1&tenant=t",
        )]))
        .unwrap()
        .unwrap();
        assert_eq!(base.traces.target(), "/base/v1/traces?x=1&tenant=t");
        assert_eq!(base.logs.target(), "/base/v1/logs?x=1&tenant=t");
        assert_eq!(base.traces.authority, "h:4318");
        let bare = Settings::from_env(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318?x=1")]))
            .unwrap()
            .unwrap();
        assert_eq!(bare.traces.target(), "/v1/traces?x=1");
        let own = Settings::from_env(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318/base?x=1"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/mine?k=v"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(own.traces.authority, "t:9");
        assert_eq!(own.traces.target(), "/mine?k=v");
        assert_eq!(own.logs.target(), "/base/v1/logs?x=1");
        assert_eq!(own.traces.shown(), "http://t:9/mine?k=***");
    }

    #[test]
    fn diagnostics_mask_userinfo_query_values_and_header_values() {
        for (url, want) in [
            (
                "http://otel:PASS@h:4318/x?api_key=K1&y=2",
                "http://otel:***@h:4318/x?api_key=***&y=***",
            ),
            ("http://ghp_TOKEN@h/x", "http://***@h/x"),
            ("http://h?secret&a=", "http://h?***&a=***"),
            ("http://h/p#frag", "http://h/p#***"),
            ("otel:PASS@h:4318", "otel:***@h:4318"),
            ("http://h:1/x", "http://h:1/x"),
        ] {
            assert_eq!(shown(url), want, "{url}");
        }
        for (pairs, said) in [
            (
                vec![(
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    "http://otel:PASS@otel:4318/?api_key=K1",
                )],
                "http://otel:***@otel:4318/?api_key=***: credentials in the URL are not \
                 sent; give them as a header in OTEL_EXPORTER_OTLP_HEADERS",
            ),
            (
                vec![(
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "https://h/v1/traces?api_key=K1",
                )],
                "https://h/v1/traces?api_key=***: https is not spoken here; export to a \
                 Collector over http (it can speak TLS onwards)",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "x=1,Authorization Bearer K1"),
                ],
                "OTEL_EXPORTER_OTLP_HEADERS: pair 2 has no = (key=value)",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization: Bearer K1=x"),
                ],
                "OTEL_EXPORTER_OTLP_HEADERS: the name of pair 1 is not a header name",
            ),
        ] {
            assert_eq!(Settings::from_env(env(&pairs)), Err(said.to_owned()));
        }
    }

    /// A full queue drops and counts; the exit waits at most the timeout
    /// for a collector that never answers, and counts what it left.
    #[test]
    fn a_full_queue_drops_and_the_exit_waits_one_timeout() {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

        let hangs = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = hangs.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in hangs.incoming().flatten() {
                held.push(stream);
            }
        });
        let settings = Settings {
            traces: Endpoint::parse(&format!("http://{at}/v1/traces")).unwrap(),
            logs: Endpoint::parse(&format!("http://{at}/v1/logs")).unwrap(),
            headers: Vec::new(),
            timeout: Duration::from_millis(300),
        };
        let exporter = Exporter::with_queue(settings, 4).unwrap();
        let request = ExportTraceServiceRequest::default();
        exporter.export(&request, false);
        // The sender has gathered the first for its batch (LINGER) and now
        // waits on the collector.
        std::thread::sleep(LINGER + Duration::from_millis(150));
        let started = Instant::now();
        for _ in 0..9 {
            exporter.export(&request, false);
        }
        assert!(
            started.elapsed() < Duration::from_millis(50),
            "exporting never waits"
        );
        let started = Instant::now();
        let (tally, _) = exporter.finish();
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(290) && waited < Duration::from_millis(600),
            "{waited:?}"
        );
        assert_eq!(tally.dropped, 5);
        assert_eq!(tally.sent, 0);
        assert_eq!(tally.failed + tally.abandoned, 5, "{tally:?}");
    }

    #[test]
    fn bad_settings_are_refused_with_their_reason() {
        for (pairs, said) in [
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318")],
                "https is not spoken here",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")],
                "not an http:// URL",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "http://")],
                "no usable host",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1/x\r\nInjected: 1")],
                "line break",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "k=v%0d%0aInjected: 1"),
                ],
                "control character",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "bad key=v"),
                ],
                "not a header name",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
                    ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
                ],
                "not a positive number",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "Content-Length=0"),
                ],
                "set by the exporter itself",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4317"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ],
                "only http/protobuf is spoken here",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1/x#frag")],
                "fragment",
            ),
        ] {
            let error = Settings::from_env(env(&pairs)).unwrap_err();
            assert!(error.contains(said), "{pairs:?}: {error}");
        }
    }
}
