//! Redaction of a byte stream as it flows: see [`StreamRedactor`].
//!
//! The redactor holds back what a rule could still extend, up to a line
//! end no match crosses, and at most [`STREAM_HOLD`] (8 KiB) before it
//! releases up to the start of the last word. It keeps [`STREAM_BEHIND`]
//! (1 KiB) of released text as context for the rules, releases a partial
//! line when the driver's quiet timer calls
//! [`flush`](StreamRedactor::flush), and passes bytes through undecoded.

use memchr::memmem;

use super::{Edges, Label, MAX_CUT_HIDDEN, RedactionCounts, Redactor, Span, cut_limit_backward};

/// The most bytes a [`StreamRedactor`] holds back while it waits for a
/// point where no rule can still extend a match: 8 KiB, more than a
/// 4096-bit RSA private key in PEM (about 3.3 KiB) and far more than any
/// one-line secret. Past it, a line that has not ended is released up to
/// the start of its last word (see [`StreamRedactor`]).
pub const STREAM_HOLD: usize = 8 * 1024;

/// How many released bytes a [`StreamRedactor`] keeps as look-behind
/// context, so that a rule whose match began on an earlier line (`mysql
/// …` then `-pSECRET`) still sees it. Never released again.
pub const STREAM_BEHIND: usize = 1024;

/// The start of a private key block's end line, looked for while the
/// body of a block too long to hold is dropped.
const KEY_END_START: &[u8] = b"-----END ";

/// Redacts a byte stream chunk by chunk: the bytes it emits are exactly
/// the bytes fed, except that each secret is replaced by `[redacted:
/// RULE]`, as [`Redactor::redact`] replaces it in the whole text. A secret
/// split across chunks is found; bytes that are not UTF-8 pass through as
/// they are (nothing is decoded).
///
/// It holds back what a rule could still extend and releases text only
/// up to a point where no match can cross:
///
/// - **[`feed`](Self::feed)** releases up to the end of the last complete
///   line that no match crosses (a private key block without its `END`
///   line crosses every line after its `BEGIN`). When more than
///   [`STREAM_HOLD`] bytes are held without such a point (a long line
///   without newline), it releases up to the start of the line's last word
///   (which may still grow into a secret; at most [`MAX_CUT_HIDDEN`] bytes
///   are kept for it, the bound a window's cut uses) and never inside a
///   match. A private key block longer than the hold is replaced by one
///   `[redacted: private-key]` and its body dropped up to its `END` line;
///   another match still open past the hold (a value of more than 8 KiB
///   without a blank) is replaced and the rest of its word dropped.
/// - **[`flush`](Self::flush)** is for a stream gone quiet (the driver
///   calls it after a quiet interval, 100 ms for the CLI): a partial line
///   is released through the rules as if the stream ended there, except
///   its last word, which could be the first part of a secret; a second
///   `flush` with nothing fed in between releases that word too, unless
///   it begins with a known token prefix (`ghp_`, `sk_live_`, `AKIA`, …):
///   such a word is held until its line ends, the hold is full or the
///   stream ends. So only a secret with no known prefix, written in two
///   writes separated by more than two quiet intervals, may be released
///   in two parts, neither recognised.
/// - **[`finish`](Self::finish)**, at the end of the stream, releases the
///   rest.
///
/// It keeps the last [`STREAM_BEHIND`] released bytes as context for the
/// rules (a match that begins there and runs into new bytes hides the new
/// part). Memory: at most about `STREAM_HOLD + STREAM_BEHIND` bytes plus a
/// chunk.
///
/// Without flushes, the output of any chunking of a text whose lines are
/// shorter than [`STREAM_HOLD`] is the output of [`Redactor::redact`] on
/// the whole text.
///
/// # Examples
///
/// ```
/// use spillguard_core::{Redactor, StreamRedactor};
///
/// let mut stream = StreamRedactor::new(Redactor::builtin());
/// let mut out = Vec::new();
/// stream.feed(b"token ghp_0123456789abcdef", &mut out);
/// assert_eq!(out, b"");
/// stream.feed(b"0123456789abcdefABCD\nnext", &mut out);
/// assert_eq!(out, b"token [redacted: github-token]\n");
/// stream.finish(&mut out);
/// assert_eq!(out, b"token [redacted: github-token]\nnext");
/// assert_eq!(stream.counts().rule("github-token"), 1);
/// ```
#[derive(Debug, Clone)]
pub struct StreamRedactor {
    redactor: Redactor,
    /// Look-behind context (`buf[..released]`, already emitted), then
    /// the bytes held.
    buf: Vec<u8>,
    released: usize,
    /// The rest of a match released hidden before it ended is dropped.
    dropping: Option<Dropping>,
    /// The last call was a `flush` (nothing fed since).
    flushed: bool,
    counts: RedactionCounts,
}

/// What is dropped after a match released hidden before it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dropping {
    /// A private key block's body, up to its end line.
    KeyBody,
    /// A value's word, up to a blank or a quote.
    Word,
}

/// How far a release goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// To the last safe line end (or, past the hold, the last word).
    Feed,
    /// To the start of the last word.
    Quiet,
    /// Everything.
    All,
}

impl StreamRedactor {
    /// A stream redactor applying `redactor`'s rules.
    pub fn new(redactor: Redactor) -> Self {
        Self {
            redactor,
            buf: Vec::new(),
            released: 0,
            dropping: None,
            flushed: false,
            counts: RedactionCounts::default(),
        }
    }

    /// Takes the next chunk of the stream; appends to `out` what can be
    /// released (redacted).
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        self.flushed = false;
        self.buf.extend_from_slice(chunk);
        // Without a new line end and within the hold, nothing can be
        // released: no scan (a server writing a byte at a time costs a
        // copy per byte, not a scan of all that is held).
        if memchr::memchr(b'\n', chunk).is_none() && self.held() <= STREAM_HOLD {
            return;
        }
        self.release(Release::Feed, out);
    }

    /// The stream went quiet: releases what is held, through the rules, as
    /// if the stream ended here, except a last word that could still grow
    /// into a secret; called again with nothing fed since, releases that
    /// word too. See the type's docs.
    pub fn flush(&mut self, out: &mut Vec<u8>) {
        // A last word that begins with a known token prefix (`ghp_…`,
        // `sk_live_…`) is the head of a token still being written: it is
        // held until its line ends, the hold is full or the stream ends.
        let word = &self.buf[self.last_word_start(self.released, false)..];
        let token_head = super::token_prefix_in(word).is_some();
        let mode = match self.flushed && !token_head {
            true => Release::All,
            false => Release::Quiet,
        };
        self.flushed = true;
        self.release(mode, out);
    }

    /// The stream ended: releases everything held.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.release(Release::All, out);
        self.buf.clear();
        self.released = 0;
        self.dropping = None;
    }

    /// Bytes held back, not yet released.
    pub fn held(&self) -> usize {
        self.buf.len() - self.released
    }

    /// How many secrets each rule replaced so far.
    pub fn counts(&self) -> &RedactionCounts {
        &self.counts
    }

    fn release(&mut self, mode: Release, out: &mut Vec<u8>) {
        if self.dropping.is_some() && !self.drop_rest() {
            return;
        }
        let len = self.buf.len();
        let start = self.released;
        if start == len {
            return;
        }
        let spans: Vec<Span> = self
            .redactor
            .spans(&self.buf, Edges::NONE)
            .into_iter()
            .filter(|s| s.end > start)
            .map(|s| Span {
                start: s.start.max(start),
                ..s
            })
            .collect();
        // A match that reaches the end of what is held may still grow: it
        // is crossed by every point after its start, until the end.
        let open = |s: &Span| s.end == len && mode != Release::All;
        let crossed = |at: usize| {
            spans
                .iter()
                .find(|s| s.start < at && (at < s.end || open(s)))
                .copied()
        };
        let mut to = match mode {
            Release::All => len,
            Release::Feed => self.safe_line_end(start, &spans),
            Release::Quiet => self.last_word_start(start, false),
        };
        let forced = mode == Release::Feed && to == start && len - start > STREAM_HOLD;
        if forced {
            to = self.last_word_start(start, true);
            if let Some(long) = crossed(to).filter(open) {
                // A match still open that began before the last word (so
                // longer than a cut keeps): released hidden whole. A key
                // block's body is then dropped up to its end line.
                self.emit(&spans, len, out);
                self.dropping = Some(
                    match long.label == Label::Rule(self.redactor.inner.private_key) {
                        true => Dropping::KeyBody,
                        false => Dropping::Word,
                    },
                );
                return;
            }
        }
        // Never inside a match: back to its start (or, when that would
        // release nothing, past its end).
        while let Some(span) = crossed(to) {
            to = match span.start > start || open(&span) {
                true => span.start,
                false => span.end,
            };
        }
        self.emit(&spans, to, out);
    }

    /// Writes `buf[released..to]` with `spans` replaced, then keeps the
    /// look-behind context and the held rest.
    fn emit(&mut self, spans: &[Span], to: usize, out: &mut Vec<u8>) {
        let mut pos = self.released;
        let mut placeholder = String::new();
        for span in spans.iter().filter(|s| s.start < to) {
            out.extend_from_slice(&self.buf[pos..span.start.max(pos)]);
            placeholder.clear();
            self.redactor
                .write_placeholder(span.label, &mut placeholder);
            out.extend_from_slice(placeholder.as_bytes());
            self.counts
                .add(&self.redactor.count(std::slice::from_ref(span)));
            pos = span.end;
        }
        if pos < to {
            out.extend_from_slice(&self.buf[pos..to]);
        }
        let to = to.max(pos);
        // The context starts at a word, never inside one.
        let mut keep = to.saturating_sub(STREAM_BEHIND);
        if keep > 0 {
            keep = (keep..to)
                .find(|&i| self.buf[i].is_ascii_whitespace())
                .map_or(to, |i| i + 1);
        }
        self.buf.drain(..keep);
        self.released = to - keep;
    }

    /// Drops the rest of a match released hidden: a key block's body up
    /// to its end line, a word up to a blank or a quote. Whether the end
    /// was found (then the stream goes on from it).
    fn drop_rest(&mut self) -> bool {
        let held = &self.buf[self.released..];
        let end = match self.dropping {
            Some(Dropping::KeyBody) => memmem::find(held, KEY_END_START),
            _ => held
                .iter()
                .position(|&b| b.is_ascii_whitespace() || b == b'"' || b == b'\''),
        };
        let from = match end {
            Some(at) => {
                self.dropping = None;
                self.released + at
            }
            // Keep what could be the start of the key's end line.
            None if self.dropping == Some(Dropping::KeyBody) => {
                self.buf.len() - held.len().min(KEY_END_START.len() - 1)
            }
            None => self.buf.len(),
        };
        self.buf.drain(..from);
        self.released = 0;
        self.dropping.is_none()
    }

    /// The end of the last complete held line that no match crosses, or
    /// `start` when there is none.
    fn safe_line_end(&self, start: usize, spans: &[Span]) -> usize {
        let mut to = self.buf.len();
        loop {
            let Some(newline) = memchr::memrchr(b'\n', &self.buf[start..to]) else {
                return start;
            };
            let at = start + newline + 1;
            let len = self.buf.len();
            match spans
                .iter()
                .find(|s| s.start < at && (at < s.end || s.end == len))
            {
                Some(span) => to = span.start.max(start),
                None => return at,
            }
        }
    }

    /// The start of the last word held (after the last ASCII blank), no
    /// earlier than `start`; when `bounded`, the word keeps at most
    /// [`MAX_CUT_HIDDEN`] bytes, as a window's cut.
    fn last_word_start(&self, start: usize, bounded: bool) -> usize {
        let len = self.buf.len();
        let word = self.buf[start..]
            .iter()
            .rposition(u8::is_ascii_whitespace)
            .map_or(start, |i| start + i + 1);
        match bounded {
            true => word
                .max(cut_limit_backward(&self.buf, len))
                .max(len.saturating_sub(MAX_CUT_HIDDEN)),
            false => word,
        }
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
