//! Keeps an MCP stdio server's stdout protocol-only: see [`StdoutLineGuard`].
//!
//! Each line is handed on whole, as a message to forward when the scanner
//! calls it one (and its UTF-8 is valid), or as bytes to divert otherwise;
//! a line longer than its maximum is diverted as it comes. **Memory: the
//! longest line held plus 256 KiB, no allocation once grown; the same
//! split for every chunking, and serde_json's verdict on each line.**

use super::scan::{MessageInfo, MessageScanner, UTF8_BOM};

/// The longest message [`StdoutLineGuard::new`] forwards, newline
/// included: 64 MiB. A message is held whole before it is forwarded, so
/// this bounds the guard's memory; MCP results that carry files (images,
/// audio, resources as base64) reach tens of megabytes, and a line longer
/// than this is far more likely a runaway print than a message.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 << 20;

/// Room the guard makes for reads beyond a held line: 256 KiB (a read is
/// offered at least half of it).
const READ_ROOM: usize = 256 << 10;

/// The capacity the guard's buffer grows to when it must hold `want`
/// bytes: an eighth more (at most 8 MiB more), never past the longest line
/// plus the read room. A vector that doubles would hold up to twice the
/// longest message; this holds it plus at most 8 MiB (a 64 MiB message
/// costs 64 MiB and 256 KiB at the maximum, not 128 MiB).
fn grown_capacity(want: usize, max_message: usize) -> usize {
    let ceiling = max_message.saturating_add(READ_ROOM).max(want);
    want.saturating_add((want / 8).min(8 << 20)).min(ceiling)
}

/// Splits the stdout of an MCP stdio server into the messages the client
/// gets and the bytes it must not.
///
/// Over stdio, MCP messages are JSON-RPC objects, one per line. A server
/// that prints anything else on stdout (a banner, a log line, a stray
/// `print`) breaks its client. The guard holds each line until its `\n`
/// and then hands it on whole, as one segment:
///
/// * [`Segment::Forward`]: a line that is exactly one JSON object with
///   `"jsonrpc": "2.0"`, or a batch of them (a JSON array of one to
///   [`MAX_BATCH`](crate::MAX_BATCH)) (RFC 8259's grammar, valid UTF-8,
///   nothing after the object or array but whitespace), with what it is
///   ([`MessageInfo`]);
/// * [`Segment::Divert`]: any other line, to be kept with the server's
///   diagnostics (hand it to
///   [`Input::StdoutDiverted`](crate::Input::StdoutDiverted),
///   which feeds the stderr capture): `{broken json`, `{DEBUG} x`, two
///   objects on one line, a structured log line without `jsonrpc` (pino,
///   bunyan, structlog), a blank line.
///
/// The rules, the same for every chunking:
///
/// * A line ends at `\n`, which belongs to it; a `\r` before it is JSON
///   whitespace (`\r\n` lines pass as they are). Every line decided is
///   one segment, in order; every byte lands in exactly one segment, but
///   a skipped byte order mark.
/// * A UTF-8 byte order mark as a message line's first three bytes is
///   skipped (RFC 8259 lets a parser ignore it): the message is forwarded
///   without it, since not every client would skip it. Anywhere else
///   (twice, after whitespace) it makes the line not a message.
/// * A line longer than the guard's maximum ([`DEFAULT_MAX_MESSAGE_BYTES`]
///   unless [`with_max_message`](Self::with_max_message) says otherwise)
///   is diverted as it comes, in several segments, and counts as one
///   diverted line: the guard never holds more than the maximum.
/// * At the end of the stream, an unterminated last line is decided as it
///   stands ([`finish`](Self::finish)).
///
/// Two ways to feed it: [`feed`](Self::feed) a chunk read elsewhere (the
/// bytes of a line that spans chunks are copied into the guard), or read
/// straight into [`spare`](Self::spare) and tell [`filled`](Self::filled)
/// how many bytes came: then nothing is copied except the unfinished tail
/// of a read, moved to the front, and a segment borrows the guard's
/// buffer. Memory: the longest line held, plus 256 KiB; no allocation
/// once the buffer has grown to that.
///
/// # Examples
///
/// ```
/// use spillguard_core::{MessageKind, Segment, StdoutLineGuard};
///
/// let mut guard = StdoutLineGuard::new();
/// let mut forwarded = Vec::new();
/// let mut diverted = Vec::new();
/// let chunks: [&[u8]; 3] = [
///     b"server v1.2 starting\n{\"jsonrpc\":",
///     b"\"2.0\",\"id\":1,\"result\":{}}\n{\"level\":30,\"msg\":\"up\"}\n",
///     b"{broken\n",
/// ];
/// for chunk in chunks {
///     guard.feed(chunk, |segment| {
///         match segment {
///             Segment::Forward(line) => {
///                 assert_eq!(line.info.kind, MessageKind::Response);
///                 forwarded.extend_from_slice(line.bytes);
///             }
///             Segment::Divert(d) => diverted.extend_from_slice(d.bytes),
///             Segment::DivertHeld(held) => diverted.extend_from_slice(held.bytes),
///         }
///         Ok::<(), ()>(())
///     })?;
/// }
/// assert_eq!(forwarded, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
/// assert_eq!(diverted, b"server v1.2 starting\n{\"level\":30,\"msg\":\"up\"}\n{broken\n");
/// assert_eq!((guard.lines_forwarded(), guard.lines_diverted()), (1, 3));
/// # Ok::<(), ()>(())
/// ```
#[derive(Debug, Clone)]
pub struct StdoutLineGuard {
    /// The current line's bytes so far (`held` of them, all scanned), then
    /// room for the next read.
    buf: Vec<u8>,
    held: usize,
    scanner: MessageScanner,
    max_message: usize,
    /// The current line went past the maximum: diverted as it comes.
    oversized: bool,
    /// What the last line forwarded was.
    info: MessageInfo,
    lines_forwarded: u64,
    lines_diverted: u64,
}

/// One decided piece of a server's stdout.
#[derive(Debug, PartialEq, Eq)]
pub enum Segment<'a> {
    /// One whole JSON-RPC message line, for the client.
    Forward(ProtocolLine<'a>),
    /// Bytes that are not protocol, for the diagnostics.
    Divert(Diverted<'a>),
    /// Bytes that are not protocol, for the diagnostics, in the buffer
    /// that held them: the start of a line longer than the maximum, or such
    /// a line whole. The sink may take the buffer to own the bytes without
    /// a copy; see [`HeldLine`].
    DivertHeld(HeldLine<'a>),
}

/// Diverted bytes the guard held in a buffer of their own: a line longer
/// than the longest message, up to the maximum or whole.
///
/// Taking the buffer (`std::mem::take(held.bytes)`) hands it over: the
/// guard starts a new, small one. A sink that copies such a line instead
/// would hold it twice for a moment, and the line is as long as the
/// longest message the guard forwards.
#[derive(Debug, PartialEq, Eq)]
pub struct HeldLine<'a> {
    /// The bytes, alone in their buffer.
    pub bytes: &'a mut Vec<u8>,
    /// Lines decided as not protocol in these bytes (as for [`Diverted`]).
    pub lines: u64,
}

impl HeldLine<'_> {
    /// The same bytes as a borrowed [`Diverted`].
    pub fn as_diverted(&self) -> Diverted<'_> {
        Diverted {
            bytes: self.bytes,
            lines: self.lines,
        }
    }
}

/// A line that is one JSON-RPC message, `\n` included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolLine<'a> {
    /// The line's bytes.
    pub bytes: &'a [u8],
    /// What the message is.
    pub info: &'a MessageInfo,
}

/// Diverted bytes of an MCP server's stdout, with the number of lines
/// decided as diverted within them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Diverted<'a> {
    /// The bytes.
    pub bytes: &'a [u8],
    /// Lines decided as not protocol in these bytes: 1 for a whole line,
    /// and for the first piece of an oversized one (its later pieces
    /// count 0).
    pub lines: u64,
}

impl Default for StdoutLineGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl StdoutLineGuard {
    /// A guard at the start of a stream, forwarding messages of up to
    /// [`DEFAULT_MAX_MESSAGE_BYTES`].
    pub fn new() -> Self {
        Self::with_max_message(DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// A guard that forwards messages of up to `max` bytes, newline
    /// included (at least 1).
    pub fn with_max_message(max: usize) -> Self {
        Self {
            buf: Vec::new(),
            held: 0,
            scanner: MessageScanner::new(),
            max_message: max.max(1),
            oversized: false,
            info: MessageInfo::NONE,
            lines_forwarded: 0,
            lines_diverted: 0,
        }
    }

    /// The longest message forwarded, newline included.
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// Message lines forwarded so far.
    pub fn lines_forwarded(&self) -> u64 {
        self.lines_forwarded
    }

    /// Lines decided as not protocol so far.
    pub fn lines_diverted(&self) -> u64 {
        self.lines_diverted
    }

    /// Bytes of an unfinished line the guard holds.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Bytes the guard's buffer has reserved: at most the longest line
    /// held plus an eighth of it (no more than 8 MiB) and 256 KiB of read
    /// room, and never more than the maximum plus that room.
    pub fn bytes_reserved(&self) -> usize {
        self.buf.capacity()
    }

    /// Room to read the next bytes into (at least 128 KiB); then call
    /// [`filled`](Self::filled) with how many came.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.buf.len() < self.held + READ_ROOM / 2 {
            let want = self.held + READ_ROOM;
            if want > self.buf.capacity() {
                self.buf
                    .reserve_exact(grown_capacity(want, self.max_message) - self.buf.len());
            }
            self.buf.resize(want, 0);
        }
        self.buf.get_mut(self.held..).unwrap_or_default()
    }

    /// `n` bytes were read into [`spare`](Self::spare): each line they
    /// finish goes to `sink` as one segment, in order (see the type's
    /// docs). The first error of `sink` ends the call and is returned;
    /// the segments not handed on are lost (the reader of a sink that
    /// failed has gone).
    pub fn filled<E>(
        &mut self,
        n: usize,
        mut sink: impl FnMut(Segment<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut end = (self.held + n).min(self.buf.len());
        let mut line_start = 0;
        let mut scan_from = self.held;
        self.held = 0;
        while let Some(newline) = self
            .buf
            .get(scan_from..end)
            .and_then(|new| memchr::memchr(b'\n', new))
        {
            let line_end = scan_from + newline + 1;
            let long = !self.oversized && line_end - line_start > self.max_message;
            let segment = self.decide(line_start, scan_from, line_end);
            if long {
                // A line longer than a message, whole in this read: handed
                // over in its own buffer; what follows it is read on from
                // a new one.
                let after = self.buf.get(line_end..end).unwrap_or_default().to_vec();
                self.hand_over(line_start, line_end, 1, &mut sink)?;
                end = after.len();
                self.buf = after;
                line_start = 0;
                scan_from = 0;
                continue;
            }
            let bytes = self.buf.get(line_start..line_end).unwrap_or_default();
            sink(match segment {
                Decided::Forward => Segment::Forward(ProtocolLine {
                    bytes: without_bom(bytes),
                    info: &self.info,
                }),
                Decided::Divert(lines) => Segment::Divert(Diverted { bytes, lines }),
            })?;
            line_start = line_end;
            scan_from = line_end;
        }
        // The unfinished rest of the read.
        let rest = end - line_start;
        if self.oversized {
            if rest > 0 {
                let bytes = self.buf.get(line_start..end).unwrap_or_default();
                sink(Segment::Divert(Diverted { bytes, lines: 0 }))?;
            }
            return Ok(());
        }
        if let Some(new) = self.buf.get(scan_from..end) {
            self.scanner.feed(new);
        }
        if rest >= self.max_message {
            // Too long to hold: diverted from here as it comes.
            self.oversized = true;
            self.lines_diverted += 1;
            self.scanner.reset();
            return self.hand_over(line_start, end, 1, &mut sink);
        }
        if line_start > 0 {
            self.buf.copy_within(line_start..end, 0);
        }
        self.held = rest;
        Ok(())
    }

    /// Feeds `chunk`, read elsewhere: the same as reading it into
    /// [`spare`](Self::spare) (piece by piece) and calling
    /// [`filled`](Self::filled).
    pub fn feed<E>(
        &mut self,
        mut chunk: &[u8],
        mut sink: impl FnMut(Segment<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        while !chunk.is_empty() {
            let room = self.spare();
            let n = room.len().min(chunk.len());
            let (now, later) = chunk.split_at(n);
            if let Some(room) = room.get_mut(..n) {
                room.copy_from_slice(now);
            }
            chunk = later;
            self.filled(n, &mut sink)?;
        }
        Ok(())
    }

    /// The end of the stream: an unterminated last line the guard holds is
    /// decided as it stands (forwarded if it is one message, without a
    /// newline; diverted otherwise) and handed to `sink`. The guard is then
    /// at the start of a new stream.
    pub fn finish<E>(
        &mut self,
        mut sink: impl FnMut(Segment<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let held = std::mem::take(&mut self.held);
        if std::mem::take(&mut self.oversized) || held == 0 {
            self.scanner.reset();
            return Ok(());
        }
        let segment = self.decide(0, held, held);
        let bytes = self.buf.get(..held).unwrap_or_default();
        sink(match segment {
            Decided::Forward => Segment::Forward(ProtocolLine {
                bytes: without_bom(bytes),
                info: &self.info,
            }),
            Decided::Divert(lines) => Segment::Divert(Diverted { bytes, lines }),
        })
    }

    /// Hands `buf[start..end]` to `sink` in a buffer of its own: the
    /// guard's buffer, cut to those bytes. A sink that leaves it gives the
    /// allocation back to the guard, emptied.
    fn hand_over<E>(
        &mut self,
        start: usize,
        end: usize,
        lines: u64,
        sink: &mut impl FnMut(Segment<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut held = std::mem::take(&mut self.buf);
        held.truncate(end);
        held.drain(..start.min(end));
        let result = sink(Segment::DivertHeld(HeldLine {
            bytes: &mut held,
            lines,
        }));
        if held.capacity() > self.buf.capacity() {
            held.clear();
            self.buf = held;
        }
        result
    }

    /// Decides the line `buf[start..end]` (its `\n` included, if any),
    /// whose bytes before `scan_from` were scanned already; the scanner is
    /// then reset for the next line.
    fn decide(&mut self, start: usize, scan_from: usize, end: usize) -> Decided {
        if std::mem::take(&mut self.oversized) {
            // The end of a line diverted as it came: counted already.
            self.scanner.reset();
            return Decided::Divert(0);
        }
        if end - start > self.max_message {
            // Finished within one read, but longer than a message may be.
            self.scanner.reset();
            self.lines_diverted += 1;
            return Decided::Divert(1);
        }
        let body_end = if self.buf.get(end.wrapping_sub(1)) == Some(&b'\n') && end > start {
            end - 1
        } else {
            end
        };
        if let Some(new) = self.buf.get(scan_from.min(body_end)..body_end) {
            self.scanner.feed(new);
        }
        let utf8_ok = !self.scanner.saw_non_ascii()
            || self
                .buf
                .get(start..body_end)
                .is_some_and(|line| std::str::from_utf8(line).is_ok());
        let info = self.scanner.finish().filter(|_| utf8_ok);
        self.scanner.reset();
        match info {
            Some(info) => {
                self.lines_forwarded += 1;
                self.info = info;
                Decided::Forward
            }
            None => {
                self.lines_diverted += 1;
                Decided::Divert(1)
            }
        }
    }
}

/// A message line without the byte order mark it may begin with (the
/// scanner skipped it): clients read the message, and not all of them
/// would skip it.
fn without_bom(line: &[u8]) -> &[u8] {
    line.strip_prefix(&UTF8_BOM).unwrap_or(line)
}

/// How a line was decided.
enum Decided {
    /// Forwarded; what it is, in `info`.
    Forward,
    /// Diverted, counting this many lines.
    Divert(u64),
}
