//! The client's bytes on their way to a stdio server, and what happens to
//! them when the server stops reading: see [`InputQueue`].
//!
//! **Nothing is lost while the server takes bytes. With the queue full and
//! nothing taken for the stall time, room is made: whole messages the
//! server has not begun (each request reported dropped), or, without
//! messages, the stream from then on. Every byte read is taken, queued or
//! counted as undelivered.** The defaults ([`QueueSettings`]): 4 MiB
//! full, 1 s without progress, 250 ms once the client has ended.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::meta::trace_edit;
use super::scan::{MessageInfo, MessageKind, MessageScanner};
use crate::trace::CallTrace;

/// How an [`InputQueue`] holds and gives up the client's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSettings {
    /// Bytes held at most for a server that is slow to read (beyond its
    /// pipe). Default 4 MiB: a burst of requests, or one large upload,
    /// waits; a client cannot make the guard hold more.
    pub max_bytes: usize,
    /// How long a server may take nothing, with the queue full and the
    /// client still sending, before it is taken as not reading. Default
    /// 1 s: a server busy with one request for longer, with 4 MiB more
    /// behind it, is overloaded.
    pub stall_open: Duration,
    /// How long a server may take nothing once the client has ended with
    /// bytes still queued. Default 250 ms: the client has gone, and the
    /// shutdown must not wait on what it left.
    pub stall_ended: Duration,
    /// The bytes are JSON-RPC messages, one per line (`--mcp`): requests
    /// are reported as they are read, and a server that is not reading
    /// loses whole messages only, each request reported as dropped.
    pub messages: bool,
    /// With `messages`: a line goes to the server only once it is whole,
    /// so that the driver can have a request carry a span
    /// ([`InputQueue::handle_read`]). A line that fills the queue before
    /// its end goes as it comes (and as the client wrote it): the queue's
    /// bound is the bound on what is held.
    pub whole_lines: bool,
}

impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            max_bytes: 4 << 20,
            stall_open: Duration::from_secs(1),
            stall_ended: Duration::from_millis(250),
            messages: false,
            whole_lines: false,
        }
    }
}

/// What the queue tells its driver about the client's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueEvent<'a> {
    /// A request (or a batch holding one) was read; it reaches the server
    /// after this (note it as pending before writing it). With
    /// [`whole_lines`](QueueSettings::whole_lines), the span the driver
    /// answers with goes into the request's `params._meta` (see
    /// [`trace_edit`](super::trace_edit); a batch is left as written).
    Request(&'a MessageInfo),
    /// A request (or a batch holding one) the server will never get: it
    /// stopped reading, and the line was dropped (answer it now).
    Dropped(&'a MessageInfo),
}

/// A complete line still in the queue.
#[derive(Debug, Clone)]
struct Line {
    /// Where it ends (its `\n` included), in bytes of the kept stream.
    end: u64,
    /// What it is, if a request or a batch holding one.
    request: Option<MessageInfo>,
    /// The span written into it: where those bytes are in the kept
    /// stream, and how many bytes of the client's they replaced (not the
    /// client's: a drop does not count them as undelivered).
    written: Option<Written>,
}

/// Bytes the queue wrote into a line.
#[derive(Debug, Clone, Copy)]
struct Written {
    at: u64,
    len: u64,
    replaced: u64,
}

/// The client's bytes between the reads of the client and the writes to
/// the server, with the rule for a server that stops reading. Sans IO: the
/// driver reads into [`room`](Self::room) and reports
/// ([`handle_read`](Self::handle_read)), writes
/// [`to_write`](Self::to_write) when the server's pipe takes bytes and
/// reports ([`handle_written`](Self::handle_written)), and calls
/// [`handle_timeout`](Self::handle_timeout) at
/// [`poll_timeout`](Self::poll_timeout).
///
/// # The rule
///
/// While the server takes bytes, nothing is lost: the client is read as
/// long as the queue has room ([`wants_input`](Self::wants_input)), then
/// waits. When the queue is full and the server has taken nothing for
/// [`stall_open`](QueueSettings::stall_open), it is not reading, and room
/// is made so that the client never waits on it for long and its end is
/// always seen:
///
/// * with [`messages`](QueueSettings::messages), whole lines are dropped,
///   each request reported ([`QueueEvent::Dropped`]): every complete line
///   the server has not begun (a line it began is kept, so that it gets it
///   whole, unless that line alone fills the queue: then it is dropped up
///   to its end). Lines read after that are queued as ever: a server that
///   reads again gets them, one that does not loses them the same way the
///   next time the queue is full;
/// * without, every byte queued and every byte read from then on is
///   dropped (a stream cut once cannot be resumed);
/// * once the client has ended with bytes queued and the server has taken
///   nothing for [`stall_ended`](QueueSettings::stall_ended), everything
///   left is dropped, and the queue is [finished](Self::is_finished).
///
/// Every byte dropped is counted ([`take_undelivered`](Self::take_undelivered)).
///
/// ```
/// use std::time::{Duration, Instant};
/// use spillguard_core::{InputQueue, QueueEvent, QueueSettings};
///
/// let t0 = Instant::now();
/// let settings = QueueSettings { max_bytes: 64, messages: true, ..QueueSettings::default() };
/// let mut queue = InputQueue::new(settings, t0);
/// let mut requests = Vec::new();
/// let mut dropped = Vec::new();
/// let mut read = |queue: &mut InputQueue, bytes: &[u8]| {
///     queue.room()[..bytes.len()].copy_from_slice(bytes);
///     queue.handle_read(bytes.len(), |event| match event {
///         QueueEvent::Request(info) => { requests.push(info.id.clone().unwrap()); None }
///         QueueEvent::Dropped(info) => { dropped.push(info.id.clone().unwrap()); None }
///     });
/// };
/// let line = |id: u32| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"m\"}}\n");
/// read(&mut queue, line(1).as_bytes());
/// // The server takes 10 bytes of the first request, then nothing more.
/// queue.handle_written(t0, 10);
/// read(&mut queue, line(2).as_bytes());
/// assert!(!queue.wants_input()); // full: the client waits
/// let stall = queue.poll_timeout().unwrap();
/// assert_eq!(stall, t0 + Duration::from_secs(1));
/// queue.handle_timeout(stall, |event| {
///     if let QueueEvent::Dropped(info) = event {
///         dropped.push(info.id.clone().unwrap());
///     }
/// });
/// // The request begun is kept whole; the next one is dropped, counted.
/// assert_eq!(dropped.len(), 1);
/// assert_eq!(queue.to_write(), &line(1).as_bytes()[10..]);
/// assert_eq!(queue.take_undelivered(), line(2).len() as u64);
/// # assert_eq!(requests.len(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct InputQueue {
    settings: QueueSettings,
    /// Queued bytes: `buf[head..tail]`.
    buf: Vec<u8>,
    head: usize,
    tail: usize,
    /// Bytes kept so far, and taken by the server, in the kept stream.
    kept: u64,
    taken: u64,
    /// Where the line the server is in began, in the kept stream.
    line_start: u64,
    /// Complete lines not yet all taken (with `messages`).
    lines: VecDeque<Line>,
    scanner: MessageScanner,
    /// Where the line being scanned begins, in the kept stream.
    scan_start: u64,
    /// Part of the line being scanned was dropped: it is not edited.
    scan_broken: bool,
    /// The rest of a line dropped mid-way is dropped up to its end.
    skipping: bool,
    ended: bool,
    wedged: bool,
    last_taken: Instant,
    undelivered: u64,
}

/// Bytes offered for one read.
const READ_ROOM: usize = 256 << 10;

impl InputQueue {
    /// An empty queue; the server's last progress counts from `now`.
    pub fn new(settings: QueueSettings, now: Instant) -> Self {
        Self {
            settings,
            buf: Vec::new(),
            head: 0,
            tail: 0,
            kept: 0,
            taken: 0,
            line_start: 0,
            lines: VecDeque::new(),
            scanner: MessageScanner::new(),
            scan_start: 0,
            scan_broken: false,
            skipping: false,
            ended: false,
            wedged: false,
            last_taken: now,
            undelivered: 0,
        }
    }

    /// Bytes the queue's buffer takes: what is queued, the room for the
    /// next read, and what was taken before them and not yet reused (at
    /// most about twice the bound plus a read, see [`room`](Self::room)).
    pub fn bytes_reserved(&self) -> usize {
        self.buf.len()
    }

    /// Bytes queued for the server.
    pub fn len(&self) -> usize {
        self.tail - self.head
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// Without `messages`: whether the stream was cut (the server was
    /// taken as not reading, and everything from then on is dropped).
    pub fn is_wedged(&self) -> bool {
        self.wedged
    }

    /// Whether the client's end was read.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Whether the client is to be read now: it has not ended, and the
    /// queue has room (or the stream was cut, and what comes is dropped).
    pub fn wants_input(&self) -> bool {
        !self.ended && (self.wedged || self.len() < self.settings.max_bytes)
    }

    /// The client has ended and nothing is left for the server: close its
    /// stdin.
    pub fn is_finished(&self) -> bool {
        self.ended && self.is_empty()
    }

    /// Room for the next read of the client (256 KiB).
    ///
    /// The queued bytes move down to the buffer's start only when at
    /// least as many bytes before them were taken (otherwise the buffer
    /// grows), so each byte read is moved at most once on average: a full
    /// queue behind a slow server is not moved whole on every read. The
    /// buffer so stays within twice the queue's bound, plus a read.
    pub fn room(&mut self) -> &mut [u8] {
        if self.tail + READ_ROOM > self.buf.len() {
            if self.head >= self.len() {
                self.buf.copy_within(self.head..self.tail, 0);
                (self.head, self.tail) = (0, self.tail - self.head);
            }
            if self.tail + READ_ROOM > self.buf.len() {
                self.buf.resize(self.tail + READ_ROOM, 0);
            }
        }
        let tail = self.tail;
        self.buf.get_mut(tail..tail + READ_ROOM).unwrap_or_default()
    }

    /// `n` bytes were read into [`room`](Self::room) (`0`: the client
    /// ended). With `messages`, each request among them goes to `sink`
    /// before anything of it can be written; while the server is not
    /// reading, what the rule drops goes too. With
    /// [`whole_lines`](QueueSettings::whole_lines), the span `sink`
    /// answers a request with is written into it; otherwise the answer is
    /// not looked at (answer `None`).
    pub fn handle_read(
        &mut self,
        n: usize,
        mut sink: impl FnMut(QueueEvent<'_>) -> Option<CallTrace>,
    ) {
        if n == 0 {
            self.ended = true;
            if self.wedged {
                self.drop_all(&mut |event| {
                    sink(event);
                });
            }
            return;
        }
        let from = self.tail;
        let n = n.min(self.buf.len() - from);
        self.tail += n;
        self.kept += n as u64;
        if self.settings.messages {
            self.scan(from, &mut sink);
            if self.skipping {
                self.skip();
            }
        }
        if self.wedged {
            self.drop_all(&mut |event| {
                sink(event);
            });
        }
    }

    /// What to write to the server next (empty while the only bytes
    /// queued are a line being held until it is whole).
    pub fn to_write(&self) -> &[u8] {
        let held = self.settings.whole_lines
            && self.settings.messages
            && !self.ended
            && self.len() < self.settings.max_bytes
            && self.scan_start >= self.taken;
        let end = if held {
            let whole = usize::try_from(self.scan_start - self.taken).unwrap_or(usize::MAX);
            self.head.saturating_add(whole).min(self.tail)
        } else {
            self.tail
        };
        self.buf.get(self.head..end).unwrap_or_default()
    }

    /// The server took `n` bytes of [`to_write`](Self::to_write) at `now`.
    pub fn handle_written(&mut self, now: Instant, n: usize) {
        let n = n.min(self.len());
        if n == 0 {
            return;
        }
        self.head += n;
        self.taken += n as u64;
        self.last_taken = now;
        while let Some(line) = self.lines.front().filter(|l| l.end <= self.taken) {
            self.line_start = line.end;
            self.lines.pop_front();
        }
        if self.head == self.tail {
            (self.head, self.tail) = (0, 0);
        }
    }

    /// When the stall rule next applies, if it can.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let full = self.len() >= self.settings.max_bytes;
        if self.wedged || self.is_empty() || !(full || self.ended) {
            return None;
        }
        let stall = if self.ended {
            self.settings.stall_ended
        } else {
            self.settings.stall_open
        };
        self.last_taken.checked_add(stall)
    }

    /// Applies the stall rule at `now` (a no-op before
    /// [`poll_timeout`](Self::poll_timeout)).
    pub fn handle_timeout(&mut self, now: Instant, mut sink: impl FnMut(QueueEvent<'_>)) {
        if self.poll_timeout().is_none_or(|at| now < at) {
            return;
        }
        if self.ended || !self.settings.messages {
            self.wedged = !self.settings.messages;
            self.drop_all(&mut sink);
        } else {
            self.drop_lines(&mut sink);
        }
    }

    /// Bytes dropped since the last call (the record's
    /// `stdin_bytes_undelivered`).
    pub fn take_undelivered(&mut self) -> u64 {
        std::mem::take(&mut self.undelivered)
    }

    /// Everything still queued will never be delivered (the server's stdin
    /// is gone): counted. Its requests are not reported: they stay pending,
    /// for the answers given when the server has ended.
    pub fn abandon(&mut self) {
        self.drop_all(&mut |_| {});
    }

    /// The server the queue was writing to is gone and another follows
    /// (a restart): with `messages`, the line it had begun is dropped
    /// (counted; its request stays pending, for the answers given for the
    /// run that ended), and the whole lines it had not begun stay queued
    /// for the next server; without, the bytes stay as they are.
    pub fn handle_server_gone(&mut self) {
        if self.settings.messages && self.taken > self.line_start {
            self.skipping = true;
            self.skip();
        }
    }

    /// The requests queued whole and not begun (with `messages`), oldest
    /// first: what a server that is gone never saw.
    pub fn queued_requests(&self) -> impl Iterator<Item = &MessageInfo> {
        let begun = self.taken > self.line_start;
        self.lines
            .iter()
            .skip(usize::from(begun))
            .filter_map(|line| line.request.as_ref())
    }

    /// The server took bytes at `now` without the queue (a splice while it
    /// was empty): the stall rule counts from here.
    pub fn handle_progress(&mut self, now: Instant) {
        self.last_taken = now;
    }

    /// Scans the bytes read at `buf[from..tail]` line by line.
    fn scan(&mut self, from: usize, sink: &mut impl FnMut(QueueEvent<'_>) -> Option<CallTrace>) {
        let mut at = from;
        while let Some(newline) = self
            .buf
            .get(at..self.tail)
            .and_then(|rest| memchr::memchr(b'\n', rest))
        {
            let mut end = at + newline;
            if let Some(piece) = self.buf.get(at..end) {
                self.scanner.feed(piece);
            }
            let info = self.scanner.finish();
            self.scanner.reset();
            let request = info.filter(|i| i.messages().any(|m| m.kind == MessageKind::Request));
            let mut written = None;
            if let Some(info) = &request {
                let trace = sink(QueueEvent::Request(info));
                if let Some(trace) = trace.filter(|_| self.settings.whole_lines) {
                    (end, written) = self.edit_line(end, &trace);
                }
            }
            at = end + 1;
            let line_end = self.kept - (self.tail - at) as u64;
            self.lines.push_back(Line {
                end: line_end,
                request,
                written,
            });
            self.scan_start = line_end;
            self.scan_broken = false;
        }
        if let Some(rest) = self.buf.get(at..self.tail) {
            self.scanner.feed(rest);
        }
    }

    /// Writes `trace` into the line being scanned, which ends (before its
    /// `\n`) at `buf[end]`, if none of it was written or dropped: where
    /// the line now ends, and what was written.
    fn edit_line(&mut self, end: usize, trace: &CallTrace) -> (usize, Option<Written>) {
        if self.scan_broken || self.scan_start < self.taken {
            return (end, None);
        }
        let Ok(offset) = usize::try_from(self.scan_start - self.taken) else {
            return (end, None);
        };
        let start = self.head + offset;
        let Some((range, with)) = self.buf.get(start..end).and_then(|l| trace_edit(l, trace))
        else {
            return (end, None);
        };
        let (from, to) = (start + range.start, start + range.end);
        let grown = with.len().saturating_sub(to - from);
        if self.tail + grown > self.buf.len() {
            self.buf.resize(self.tail + grown, 0);
        }
        let new_to = from + with.len();
        self.buf.copy_within(to..self.tail, new_to);
        if let Some(place) = self.buf.get_mut(from..new_to) {
            place.copy_from_slice(&with);
        }
        let tail = self.tail + new_to - to;
        self.kept = self.kept + tail as u64 - self.tail as u64;
        self.tail = tail;
        let written = Written {
            at: self.taken + (from - self.head) as u64,
            len: with.len() as u64,
            replaced: (to - from) as u64,
        };
        (end + new_to - to, Some(written))
    }

    /// Of the kept bytes `from..to` about to be dropped, how many are the
    /// client's (not written by the queue).
    fn clients_within(&self, from: u64, to: u64) -> u64 {
        let mut bytes = to - from;
        for written in self.lines.iter().filter_map(|line| line.written) {
            let end = written.at + written.len;
            let overlap = end.min(to).saturating_sub(written.at.max(from));
            bytes -= overlap;
            if overlap == written.len {
                bytes += written.replaced;
            }
        }
        bytes
    }

    /// The rest of a line dropped mid-way, up to its end, is dropped as it
    /// comes.
    fn skip(&mut self) {
        match self.lines.pop_front() {
            Some(line) => {
                let end = self.head + (line.end - self.taken) as usize;
                self.forget(self.head, end);
                self.line_start = self.taken;
                self.skipping = false;
            }
            None => self.forget(self.head, self.tail),
        }
    }

    /// The server is not reading (with `messages`): every complete line it
    /// has not begun is dropped; what is left (the line it began, the one
    /// being read) is dropped too once it fills the queue.
    fn drop_lines(&mut self, sink: &mut impl FnMut(QueueEvent<'_>)) {
        let begun = self.taken > self.line_start;
        let keep = usize::from(begun).min(self.lines.len());
        if let Some(last) = self.lines.back().map(|l| l.end) {
            let drop_from = match self.lines.front() {
                Some(first) if keep == 1 => first.end,
                _ => self.taken,
            };
            if last > drop_from {
                for line in self.lines.iter().skip(keep) {
                    if let Some(info) = &line.request {
                        sink(QueueEvent::Dropped(info));
                    }
                }
                let from = self.head + (drop_from - self.taken) as usize;
                let to = self.head + (last - self.taken) as usize;
                self.forget(from, to);
                self.lines.truncate(keep);
            }
        }
        if self.len() >= self.settings.max_bytes {
            // An unfinished line goes on being dropped up to its end.
            let unfinished = self.lines.back().is_none_or(|l| l.end < self.kept);
            self.drop_all(sink);
            self.skipping = unfinished;
        }
    }

    /// Drops everything queued; what the client sends next is dropped too
    /// (while the server is not reading).
    fn drop_all(&mut self, sink: &mut impl FnMut(QueueEvent<'_>)) {
        self.undelivered += self.clients_within(self.taken, self.kept);
        for line in self.lines.drain(..) {
            if let Some(info) = &line.request {
                sink(QueueEvent::Dropped(info));
            }
        }
        if self.scan_start < self.kept {
            self.scan_broken = true;
        }
        self.scan_start = self.scan_start.min(self.taken);
        self.kept = self.taken;
        self.line_start = self.taken;
        (self.head, self.tail) = (0, 0);
    }

    /// Drops the queued bytes `buf[from..to]` (counted), the rest closing
    /// up; line ends after them move down.
    fn forget(&mut self, from: usize, to: usize) {
        let (from, to) = (
            from.clamp(self.head, self.tail),
            to.clamp(self.head, self.tail),
        );
        if from >= to {
            return;
        }
        let gone = (to - from) as u64;
        let at = self.taken + (from - self.head) as u64;
        self.undelivered += self.clients_within(at, at + gone);
        self.buf.copy_within(to..self.tail, from);
        self.tail -= to - from;
        self.kept -= gone;
        for line in &mut self.lines {
            if line.end > at {
                line.end = at.max(line.end - gone.min(line.end));
            }
            line.written = match line.written {
                Some(w) if w.at >= at + gone => Some(Written {
                    at: w.at - gone,
                    ..w
                }),
                Some(w) if w.at + w.len <= at => Some(w),
                _ => None,
            };
        }
        if self.scan_start >= at + gone {
            self.scan_start -= gone;
        } else {
            // Part of the line being scanned is gone.
            self.scan_broken = true;
            self.scan_start = at;
        }
    }
}
