//! Text is made here, at the edge: marker, UTF-8 decoding, redaction,
//! clamping and the fingerprint (of the raw bytes). See [`Window`].
//!
//! **Every rendering but the named `render_unredacted` is redacted, and
//! the same for every chunking of the input.** A character cut in half by
//! a window or clamp edge is trimmed from the text, never shown as a
//! replacement character. No cut or clamp shows 8 bytes of a secret the
//! rules know, nor a private-key body whose `BEGIN` line was dropped
//! (`core/tests/chunking.rs`, `core/tests/redaction.rs`).

use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::capture::StreamName;
use crate::config::Retain;
use crate::redact::{
    CUT, CUT_MARGIN, Edges, Label, RedactionCounts, Redactor, Span, cut_limit_backward,
    cut_limit_forward, ends_word_at, may_hold_secret, word_end, word_start,
};

/// A borrowed view of retained bytes, and the text made of them. Made by
/// [`StreamCapture::window`](crate::StreamCapture::window) or
/// [`Retained::window`](crate::Retained::window).
///
/// A window holds the first `head.len()` and the last `tail.len()` bytes of
/// a stream that carried `seen` bytes.
/// Rendering decodes lossily (invalid sequences become U+FFFD) and only the
/// retained part; since the window depends only on the bytes fed, never on
/// how they were chunked, the text is the same for every chunking.
///
/// Where bytes were dropped, the edge of the window may fall inside a
/// character. That edge is trimmed to the character boundary (at most three
/// bytes), so the text never shows a broken character that the helper did
/// not write. Bytes of a stream that ended without overflow are rendered
/// exactly.
///
/// # Markers
///
/// The marker is written by the library, never by the helper:
///
/// | mode            | marker                                                                   | place              |
/// |-----------------|--------------------------------------------------------------------------|--------------------|
/// | `tail`          | `[stderr truncated: kept last 16384 of 184320 bytes]`                    | first line         |
/// | `head`          | `[stderr truncated: kept first 16384 of 184320 bytes]`                   | first line         |
/// | `head_and_tail` | `[stderr truncated: kept first 4096 and last 12288 of 184320 bytes, 167936 omitted between them]` | between the parts |
///
/// The counts are raw bytes of the stream (the trimmed partial character at a
/// cut edge is counted as kept: it was retained, just not shown broken).
///
/// # Redaction
///
/// Every rendering is redacted by the window's [`Redactor`]: a secret is
/// replaced by `[redacted: RULE]` and the text around it is kept. The raw
/// bytes are never changed (the fingerprint covers them); only
/// [`render_unredacted`](Self::render_unredacted) shows them as text.
/// Where bytes were dropped, a cut edge may fall inside a secret. The rules
/// read, with the retained bytes, the invisible [`margins`](Self::margins)
/// beyond each cut edge (up to [`CUT_MARGIN`] bytes, never shown, never
/// counted as retained, not in the fingerprint), and what they find is
/// clipped to the window:
///
/// * a secret that straddles the edge is found whole and its visible part
///   is replaced by `[redacted: RULE]` (a token half in the margin, a
///   `password=` value whose key is in the margin, a private-key body
///   whose `BEGIN` line is in the margin);
/// * a word cut by the edge whose start the rules saw is shown as it is
///   (the rest of a line of prose, of a JSON value, of a number);
/// * a word that covers the whole margin (longer than it, so its start is
///   gone) and could hold a secret (it has an ASCII letter) is hidden as
///   `[cut]`, from the margin's outer edge up to the first ASCII
///   whitespace or quote that closes a value (or back to one that opens
///   it), at most [`MAX_CUT_HIDDEN`](crate::MAX_CUT_HIDDEN) bytes and never
///   past a byte no secret has (not ASCII, a run of 8 copies of one byte);
///   a credential keyword cut at the margin's outer edge hides the value
///   after it too;
/// * a private-key body whose `BEGIN` line was dropped beyond the margin is
///   redacted from the cut to its `END` line (or, with no `END` line, over
///   the run of base64 lines that follows the cut), and a `BEGIN` line
///   whose `END` line was dropped is redacted to the cut.
///
/// A window without margins (built by hand with [`Margins::NONE`], or whose
/// capture the pool refused them) treats its own edges as the margins'
/// outer edges. The edge a clamp cuts inside a word follows the same rule,
/// the retained bytes beyond the clamp edge being its margin: ordinary text
/// never shows `[cut]`.
///
/// Secrets are found in the whole retained text before a clamp selects from
/// it, so a clamp keeps a replaced secret whole or leaves it out. Hidden cut
/// words are counted apart from secrets
/// ([`RedactionCounts::cut_words`]).
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    /// The stream the bytes came from.
    pub stream: StreamName,
    /// The retention mode that chose these bytes.
    pub retain: Retain,
    /// Every byte the stream carried so far.
    pub seen: u64,
    /// The stream's first bytes (empty in `tail` mode).
    pub head: &'a [u8],
    /// The stream's last bytes, in order, as two slices (empty in `head`
    /// mode).
    pub tail: [&'a [u8]; 2],
    /// The rules that redact the rendered text.
    pub redactor: &'a Redactor,
    /// Whether the pool shared with other calls held the window below its
    /// budget; the marker then says so.
    pub held_back: bool,
    /// The dropped bytes just beyond the cut edges, read by the rules and
    /// never shown.
    pub margins: Margins<'a>,
}

/// The dropped bytes a capture keeps just beyond the cut edges of its
/// window, at most [`CUT_MARGIN`] of each: context for the rules, never
/// shown, never counted as retained, not in the fingerprint.
///
/// A margin longer than the bytes dropped at its edge is read only as far
/// as those bytes go.
#[derive(Debug, Clone, Copy, Default)]
pub struct Margins<'a> {
    /// The first bytes dropped after the head (`head`, `head_and_tail`).
    pub after_head: &'a [u8],
    /// The last bytes dropped before the tail, in order, as two slices
    /// (`tail`, `head_and_tail`).
    pub before_tail: [&'a [u8]; 2],
}

impl Margins<'_> {
    /// No margins: the window's edges are where the rules stop reading.
    pub const NONE: Margins<'static> = Margins {
        after_head: &[],
        before_tail: [&[], &[]],
    };
}

impl Window<'_> {
    /// Bytes in the window.
    pub fn retained(&self) -> u64 {
        (self.head.len() + self.tail[0].len() + self.tail[1].len()) as u64
    }

    /// Whether bytes were dropped between or around the retained parts.
    pub fn truncated(&self) -> bool {
        self.seen > self.retained()
    }

    fn tail_bytes(&self) -> Vec<u8> {
        [self.tail[0], self.tail[1]].concat()
    }

    /// The marker line (without newline) for a window that keeps `first`
    /// and `last` bytes of this stream, or `None` if nothing was dropped.
    pub fn marker(&self) -> Option<String> {
        self.truncated().then(|| {
            marker(
                self.stream,
                self.retain,
                self.head.len() as u64,
                (self.tail[0].len() + self.tail[1].len()) as u64,
                self.seen,
                self.held_back,
            )
        })
    }

    /// The shown parts of the window with the spans to redact in each: the
    /// whole stream when nothing was dropped; else the head (its end cut,
    /// a character cut by it trimmed) and the tail (its start cut), each
    /// read by the rules with its margin and the spans clipped to it.
    fn parts(&self) -> Parts {
        let r = self.redactor;
        if !self.truncated() {
            let all = [self.head, self.tail[0], self.tail[1]].concat();
            let spans = r.spans(&all, Edges::NONE);
            return Parts {
                head: Part {
                    shown: 0..all.len(),
                    bytes: all,
                    spans,
                },
                tail: None,
            };
        }
        let gap = self.seen - self.retained();
        let known = |len: usize| to_usize(gap).min(len);
        let after = &self.margins.after_head[..known(self.margins.after_head.len())];
        let before = [self.margins.before_tail[0], self.margins.before_tail[1]].concat();
        let before = &before[before.len() - known(before.len())..];
        let kept = self.tail_bytes();
        let head_end = trim_end(self.head).len();
        let tail_skip = kept.len() - trim_start(&kept).len();
        let contiguous = [after, before]
            .into_iter()
            .find(|margin| margin.len() as u64 == gap);
        if let Some(margin) = contiguous {
            // One margin holds every dropped byte: the stream is known.
            let all = [self.head, margin, &kept].concat();
            let spans = r.spans(&all, Edges::NONE);
            let tail_start = self.head.len() + margin.len() + tail_skip;
            let head = Part::clipped(all.clone(), 0..head_end, &spans);
            let tail = Part::clipped(all, tail_start..tail_start + kept.len() - tail_skip, &spans);
            return Parts {
                head,
                tail: Some(tail),
            };
        }
        // Bytes beyond the margins were dropped: the hays' far ends are
        // cut (a character they split trimmed, as at the window's edges).
        let head_hay = [self.head, after].concat();
        let head_hay = trim_end(&head_hay).to_vec();
        let head_spans = r.spans(
            &head_hay,
            Edges {
                start: false,
                start_trimmed: false,
                end: true,
            },
        );
        let head = Part::clipped(head_hay, 0..head_end, &head_spans);
        let tail_hay = [before, &kept].concat();
        let trimmed = tail_hay.len() - trim_start(&tail_hay).len();
        let tail_hay = tail_hay[trimmed..].to_vec();
        let tail_spans = r.spans(
            &tail_hay,
            Edges {
                start: true,
                // The rest of a character cut at the hay's start was
                // dropped from the view: the text starts after it.
                start_trimmed: trimmed > 0,
                end: false,
            },
        );
        let tail_start = (before.len() + tail_skip).saturating_sub(trimmed);
        let shown = tail_start..tail_hay.len();
        let tail = Part::clipped(tail_hay, shown, &tail_spans);
        Parts {
            head,
            tail: Some(tail),
        }
    }

    /// The marker (when bytes were dropped) and the retained text, decoded
    /// lossily and redacted. See [`Window`] for the marker's form and place
    /// and for what redaction shows at a cut edge.
    ///
    /// # Examples
    ///
    /// ```
    /// use spillguard_core::{CaptureSettings, RetentionPool, Retain, StreamCapture, StreamName};
    ///
    /// let settings = CaptureSettings {
    ///     retain: Retain::HeadAndTail,
    ///     head_bytes: 6,
    ///     ..CaptureSettings::tail(StreamName::Stderr, 12)
    /// };
    /// let mut capture = StreamCapture::new(settings, &RetentionPool::unlimited());
    /// let _ = capture.feed(b"start\nnoise noise noise\nend\n");
    /// assert_eq!(
    ///     capture.render(),
    ///     "start\n[stderr truncated: kept first 6 and last 6 of 28 bytes, 16 omitted between them]\ne\nend\n"
    /// );
    /// ```
    pub fn render(&self) -> String {
        self.write_parts(&self.parts())
    }

    /// [`render`](Self::render), with how many secrets each rule replaced
    /// in it.
    pub fn render_with_redactions(&self) -> (String, RedactionCounts) {
        let parts = self.parts();
        let mut counts = self.redactor.count(&parts.head.spans);
        if let Some(tail) = &parts.tail {
            counts.add(&self.redactor.count(&tail.spans));
        }
        (self.write_parts(&parts), counts)
    }

    /// The rendering of `parts`: marker and redacted text.
    fn write_parts(&self, parts: &Parts) -> String {
        let r = self.redactor;
        let text = |part: &Part| {
            let mut out = String::with_capacity(part.shown.len());
            r.write_range(
                &part.bytes,
                &part.spans,
                part.shown.start,
                part.shown.end,
                &mut out,
            );
            out
        };
        let Some(tail) = &parts.tail else {
            return text(&parts.head);
        };
        let marker = self.marker().unwrap_or_default();
        match self.retain {
            Retain::Tail => format!("{marker}\n{}", text(tail)),
            Retain::Head => format!("{marker}\n{}", text(&parts.head)),
            Retain::HeadAndTail => join_around_marker(&text(&parts.head), &marker, &text(tail)),
        }
    }

    /// How many secrets each rule replaces in [`render`](Self::render).
    pub fn redactions(&self) -> RedactionCounts {
        let parts = self.parts();
        let mut counts = self.redactor.count(&parts.head.spans);
        if let Some(tail) = &parts.tail {
            counts.add(&self.redactor.count(&tail.spans));
        }
        counts
    }

    /// The marker and the retained text **without redaction**: secrets the
    /// helper printed are shown as printed. No record, excerpt, audit event
    /// or command-line output of this library uses it; it exists for a
    /// person who holds the raw bytes anyway and asks for them by name.
    pub fn render_unredacted(&self) -> String {
        if !self.truncated() {
            let all = [self.head, self.tail[0], self.tail[1]].concat();
            return decode(&all);
        }
        let tail = self.tail_bytes();
        let (head, tail) = (trim_end(self.head), trim_start(&tail));
        let marker = self.marker().unwrap_or_default();
        match self.retain {
            Retain::Tail => format!("{marker}\n{}", decode(tail)),
            Retain::Head => format!("{marker}\n{}", decode(head)),
            Retain::HeadAndTail => join_around_marker(&decode(head), &marker, &decode(tail)),
        }
    }

    /// Renders, then clamps to at most `cap` bytes including the marker:
    /// the agent excerpt, or any destination's own cap.
    ///
    /// Nothing is re-read: the clamp selects from the retained bytes. It keeps
    /// the part the mode favours (the end for `tail`, the start for `head`,
    /// a quarter of the room for the start and the rest for the end for
    /// `head_and_tail`), cuts on a character boundary, prefers a line
    /// boundary when one lies in the outer half of the kept text, and writes
    /// a marker that states what the result keeps of the whole stream. A cap
    /// too small for the marker yields the marker cut to `cap` bytes.
    ///
    /// Secrets are found in the whole retained text first, so a clamp never
    /// shows part of one: a replaced secret is kept whole or left out. A
    /// word the clamp cuts is shown as `[cut]`, like a word cut by the
    /// window (see [`Window`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use spillguard_core::{CaptureSettings, RetentionPool, StreamCapture, StreamName};
    ///
    /// let mut capture = StreamCapture::new(
    ///     CaptureSettings::tail(StreamName::Stderr, 1024),
    ///     &RetentionPool::unlimited(),
    /// );
    /// for i in 0..100 {
    ///     let _ = capture.feed(format!("retry {i:02} failed\n").as_bytes());
    /// }
    /// let excerpt = capture.window().render_clamped(100);
    /// assert!(excerpt.len() <= 100);
    /// assert_eq!(
    ///     excerpt,
    ///     "[stderr truncated: kept last 48 of 1600 bytes]\nretry 97 failed\nretry 98 failed\nretry 99 failed\n"
    /// );
    /// ```
    pub fn render_clamped(&self, cap: usize) -> String {
        // Secrets are found once, in the parts the full rendering shows;
        // the clamp selects from the same parts and spans.
        let parts = self.parts();
        let full = self.write_parts(&parts);
        if full.len() <= cap {
            return full;
        }
        let r = self.redactor;
        let seen = self.seen;
        let (stream, retain) = (self.stream, self.retain);
        let held_back = self.held_back;
        let reserve = marker_reserve(stream, retain, seen, held_back);
        let Some(room) = cap.checked_sub(reserve) else {
            let mut m = marker(stream, retain, 0, 0, seen, held_back);
            m.truncate(cap);
            return m;
        };
        let Parts {
            head,
            tail: tail_part,
        } = parts;
        match (retain, tail_part) {
            (Retain::Tail, None) => {
                // Nothing dropped: the whole stream, no cut edge.
                let Part {
                    bytes, mut spans, ..
                } = head;
                let start = fit_suffix(r, &bytes, 0, &mut spans, room);
                let mut out = marker(
                    stream,
                    retain,
                    0,
                    (bytes.len() - start) as u64,
                    seen,
                    held_back,
                );
                out.push('\n');
                r.write_range(&bytes, &spans, start, bytes.len(), &mut out);
                out
            }
            (Retain::Head, None) => {
                let Part {
                    bytes, mut spans, ..
                } = head;
                let end = fit_prefix(r, &bytes, bytes.len(), &mut spans, room);
                let mut out = marker(stream, retain, end as u64, 0, seen, held_back);
                out.push('\n');
                r.write_range(&bytes, &spans, 0, end, &mut out);
                out
            }
            (Retain::Tail, Some(part)) => {
                let Part {
                    bytes,
                    shown,
                    mut spans,
                } = part;
                let start = fit_suffix(r, &bytes[..shown.end], shown.start, &mut spans, room);
                let mut out = marker(
                    stream,
                    retain,
                    0,
                    (shown.end - start) as u64,
                    seen,
                    held_back,
                );
                out.push('\n');
                r.write_range(&bytes, &spans, start, shown.end, &mut out);
                out
            }
            (Retain::Head, Some(_)) => {
                let Part {
                    bytes,
                    shown,
                    mut spans,
                } = head;
                let end = fit_prefix(r, &bytes, shown.end, &mut spans, room);
                let mut out = marker(stream, retain, end as u64, 0, seen, held_back);
                out.push('\n');
                r.write_range(&bytes, &spans, 0, end, &mut out);
                out
            }
            (_, tail_part) => {
                let truncated = tail_part.is_some();
                let (first, ceil, mut first_spans) = (head.bytes, head.shown.end, head.spans);
                let all_spans = if truncated {
                    Vec::new()
                } else {
                    first_spans.clone()
                };
                // Where bytes were dropped between the parts, the tail is
                // known before the head is cut: the head gets a quarter of
                // the room and whatever a short tail leaves unused, so the
                // excerpt fills its cap.
                let known_tail = tail_part.map(|part| {
                    let tail_out = out_len(
                        r,
                        &part.bytes,
                        &part.spans,
                        part.shown.start,
                        part.shown.end,
                    );
                    (part, tail_out)
                });
                let head_room = match &known_tail {
                    Some((_, tail_out)) => (room / 4).max(room.saturating_sub(*tail_out)),
                    None => room / 4,
                };
                let end = fit_prefix(r, &first, ceil, &mut first_spans, head_room);
                let used = out_len(r, &first, &first_spans, 0, end);
                let (last, floor, stop, mut last_spans) = match known_tail {
                    Some((part, _)) => (part.bytes, part.shown.start, part.shown.end, part.spans),
                    None => {
                        let spans = all_spans
                            .iter()
                            .filter(|s| s.start >= end)
                            .map(|s| Span {
                                start: s.start - end,
                                end: s.end - end,
                                label: s.label,
                            })
                            .collect();
                        let rest = first[end..].to_vec();
                        let stop = rest.len();
                        (rest, 0, stop, spans)
                    }
                };
                let start = fit_suffix(r, &last[..stop], floor, &mut last_spans, room - used);
                let m = marker(
                    stream,
                    retain,
                    end as u64,
                    (stop - start) as u64,
                    seen,
                    held_back,
                );
                let mut head_text = String::new();
                r.write_range(&first, &first_spans, 0, end, &mut head_text);
                let mut tail_text = String::new();
                r.write_range(&last, &last_spans, start, stop, &mut tail_text);
                join_around_marker(&head_text, &m, &tail_text)
            }
        }
    }

    /// A fingerprint of the retained bytes, so that a destination can store
    /// "same trace as call X" instead of repeating it. `None` when
    /// nothing is retained.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        if self.retained() == 0 {
            return None;
        }
        let mut hasher = blake3::Hasher::new_derive_key("spillguard retained stream v1");
        hasher.update(&(self.head.len() as u64).to_le_bytes());
        hasher.update(self.head);
        hasher.update(self.tail[0]);
        hasher.update(self.tail[1]);
        let digest = hasher.finalize();
        let mut short = [0u8; 16];
        short.copy_from_slice(&digest.as_bytes()[..16]);
        Some(Fingerprint(short))
    }
}

/// A 128-bit fingerprint (truncated BLAKE3, keyed by a context string) of
/// retained bytes; written as 32 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 16]);

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Fingerprint {
    type Err = FingerprintParseError;

    /// Parses 32 hex digits.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bytes = text.as_bytes();
        if bytes.len() != 32 {
            return Err(FingerprintParseError);
        }
        let mut out = [0u8; 16];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            let hi = (pair[0] as char)
                .to_digit(16)
                .ok_or(FingerprintParseError)?;
            let lo = (pair[1] as char)
                .to_digit(16)
                .ok_or(FingerprintParseError)?;
            out[i] = (hi * 16 + lo) as u8;
        }
        Ok(Fingerprint(out))
    }
}

/// A fingerprint's text was not 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FingerprintParseError;

impl fmt::Display for FingerprintParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a fingerprint is 32 hex digits")
    }
}

impl std::error::Error for FingerprintParseError {}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Room for the marker of a clamped excerpt with the widest numbers it could
/// hold for a stream of `seen` bytes, plus its newline (and one before it
/// between two parts). Each count is at most `seen`; with head+tail the
/// omitted count can be as wide as the others, but
/// `marker(.., seen, seen, seen)` writes it as "0". With `seen` at
/// `u64::MAX`, the longest marker any stream can need.
pub(crate) fn marker_reserve(
    stream: StreamName,
    retain: Retain,
    seen: u64,
    held_back: bool,
) -> usize {
    marker(stream, retain, seen, seen, seen, held_back).len()
        + if retain == Retain::HeadAndTail {
            seen.to_string().len() - 1 + 2
        } else {
            1
        }
}

/// What a held-back window's marker adds before its closing bracket.
pub(crate) const HELD_BACK: &str = "; the pool shared by all calls held it back";

fn marker(
    stream: StreamName,
    retain: Retain,
    first: u64,
    last: u64,
    seen: u64,
    held_back: bool,
) -> String {
    let why = if held_back { HELD_BACK } else { "" };
    match retain {
        Retain::Tail => format!("[{stream} truncated: kept last {last} of {seen} bytes{why}]"),
        Retain::Head => format!("[{stream} truncated: kept first {first} of {seen} bytes{why}]"),
        Retain::HeadAndTail => format!(
            "[{stream} truncated: kept first {first} and last {last} of {seen} bytes, {} omitted between them{why}]",
            seen.saturating_sub(first.saturating_add(last))
        ),
    }
}

fn join_around_marker(first: &str, marker: &str, last: &str) -> String {
    let newline = if first.is_empty() || first.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!("{first}{newline}{marker}\n{last}")
}

fn decode(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Drops the continuation bytes (at most three) of a character cut by the
/// start of the window.
fn trim_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|&&b| is_continuation(b))
        .count();
    &bytes[skip..]
}

/// Drops a character whose last bytes were cut by the end of the window.
fn trim_end(bytes: &[u8]) -> &[u8] {
    let len = bytes.len();
    let back = len.min(4);
    for i in (len - back..len).rev() {
        let b = bytes[i];
        if is_continuation(b) {
            continue;
        }
        let needed = match b {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return bytes,
        };
        return if len - i < needed { &bytes[..i] } else { bytes };
    }
    bytes
}

/// Bytes of the lossy decoding of `bytes`, without building it.
fn lossy_len(bytes: &[u8]) -> usize {
    if std::str::from_utf8(bytes).is_ok() {
        return bytes.len();
    }
    bytes
        .utf8_chunks()
        .map(|c| c.valid().len() + if c.invalid().is_empty() { 0 } else { 3 })
        .sum()
}

/// One part of a window: the bytes the rules read (the shown bytes with
/// their margins), the range shown, and the spans to redact in it.
struct Part {
    bytes: Vec<u8>,
    shown: Range<usize>,
    spans: Vec<Span>,
}

impl Part {
    /// `bytes` showing `shown`, with `spans` clipped to it: a secret that
    /// straddles an edge is replaced over its visible part.
    /// A token glued to the word before it, which no rule finds, is
    /// hidden as `[cut]` over its visible part where an edge cuts it.
    fn clipped(bytes: Vec<u8>, shown: Range<usize>, spans: &[Span]) -> Part {
        let mut clipped: Vec<Span> = spans
            .iter()
            .filter(|s| s.end > shown.start && s.start < shown.end)
            .map(|s| Span {
                start: s.start.max(shown.start),
                end: s.end.min(shown.end),
                label: s.label,
            })
            .collect();
        let (start, end) = (shown.start, shown.end);
        if end > start
            && end < bytes.len()
            && !ends_word_at(&bytes, end)
            && let Some(from) = cut_token(&bytes, spans, end).filter(|&from| from < end)
            && !clipped.iter().any(|s| s.end > from.max(start))
        {
            let span = Span {
                start: from.max(start),
                end,
                label: Label::Cut,
            };
            insert_span(&mut clipped, span);
        }
        if start > 0
            && start < end
            && !ends_word_at(&bytes, start - 1)
            && let Some(from) = cut_token(&bytes, spans, start)
        {
            let to = word_end(&bytes, start).min(next_span_start(&clipped, start, end));
            let from = from.max(start);
            if from < to && !inside_span(&clipped, from) {
                let span = Span {
                    start: from,
                    end: to,
                    label: Label::Cut,
                };
                insert_span(&mut clipped, span);
            }
        }
        let spans = clipped;
        Part {
            bytes,
            shown,
            spans,
        }
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The whole stream in `head` when nothing was dropped; else the head and
/// the tail.
struct Parts {
    head: Part,
    tail: Option<Part>,
}

/// Bytes of `raw[from..to]` rendered: decoded lossily, spans replaced.
fn out_len(r: &Redactor, raw: &[u8], spans: &[Span], from: usize, to: usize) -> usize {
    let mut n = 0;
    let mut pos = from;
    for span in spans.iter().filter(|s| s.end > from && s.start < to) {
        n += lossy_len(&raw[pos..span.start.max(pos)]) + r.placeholder_len(span.label);
        pos = span.end;
    }
    if pos < to {
        n += lossy_len(&raw[pos..to]);
    }
    n
}

/// The first unit of `bytes` (a character, or an invalid sequence shown as
/// one U+FFFD): its raw and its rendered length.
fn next_unit(bytes: &[u8]) -> (usize, usize) {
    match bytes.utf8_chunks().next() {
        Some(chunk) => match chunk.valid().chars().next() {
            Some(ch) => (ch.len_utf8(), ch.len_utf8()),
            None => (chunk.invalid().len().max(1), 3),
        },
        None => (bytes.len().max(1), 0),
    }
}

fn span_at(spans: &[Span], pos: usize) -> Option<&Span> {
    spans.iter().find(|s| s.start == pos)
}

fn next_span_start(spans: &[Span], pos: usize, limit: usize) -> usize {
    spans
        .iter()
        .map(|s| s.start)
        .find(|&start| start > pos)
        .map_or(limit, |start| start.min(limit))
}

fn inside_span(spans: &[Span], pos: usize) -> bool {
    spans.iter().any(|s| s.start <= pos && pos < s.end)
}

fn insert_span(spans: &mut Vec<Span>, span: Span) {
    let at = spans.partition_point(|s| s.start < span.start);
    spans.insert(at, span);
}

/// The start of the longest suffix of `raw` whose rendering fits in `room`
/// bytes and starts on a character (preferably a line) boundary, never
/// inside a span. Nothing before `floor` is shown. A word the new start
/// cuts that covers the whole margin before it ([`CUT_MARGIN`] bytes) and
/// could hold a secret gets a `[cut]` span (or is left out when that does
/// not fit); a shorter word, whose start the rules saw, is shown.
fn fit_suffix(r: &Redactor, raw: &[u8], floor: usize, spans: &mut Vec<Span>, room: usize) -> usize {
    let len = raw.len();
    let mut start = len.saturating_sub(room).max(floor);
    if start > floor {
        start = len - trim_start(&raw[start..]).len();
    }
    if let Some(span) = spans.iter().find(|s| s.start < start && start < s.end) {
        start = span.start;
    }
    let mut excess = out_len(r, raw, spans, start, len).saturating_sub(room);
    while excess > 0 && start < len {
        if let Some(span) = span_at(spans, start) {
            excess = excess.saturating_sub(r.placeholder_len(span.label));
            start = span.end;
            continue;
        }
        let limit = next_span_start(spans, start, len);
        let (raw_len, shown) = next_unit(&raw[start..limit]);
        start += raw_len;
        excess = excess.saturating_sub(shown);
    }
    if start > 0 {
        let half = start + (len - start) / 2;
        if let Some(nl) = (start..half).find(|&i| raw[i] == b'\n' && !inside_span(spans, i)) {
            start = nl + 1;
        }
    }
    // The edge (of the room, or of the window: bytes before it were read
    // as the margin) cuts a word.
    if start > 0
        && start < len
        && !ends_word_at(raw, start - 1)
        && span_at(spans, start).is_none()
        && let Some(from) = cut_token(raw, spans, start)
    {
        let hidden = from.max(start)..word_end(raw, start).min(next_span_start(spans, start, len));
        if hidden.start < hidden.end {
            let shown = out_len(r, raw, spans, start, len) - lossy_len(&raw[hidden.clone()]);
            if shown + CUT.len() <= room {
                insert_span(
                    spans,
                    Span {
                        start: hidden.start,
                        end: hidden.end,
                        label: Label::Cut,
                    },
                );
            } else {
                start = hidden.end;
            }
        }
        return start;
    }
    if start > floor
        && start < len
        && !ends_word_at(raw, start - 1)
        && span_at(spans, start).is_none()
    {
        let limit = next_span_start(spans, start, len);
        let after_span = spans
            .iter()
            .map(|s| s.end)
            .filter(|&e| e <= start)
            .max()
            .unwrap_or(0);
        let word = word_start(raw, after_span, start);
        // The margin's outer edge, reached by a word that covers it.
        let outer = start.saturating_sub(CUT_MARGIN);
        let cut_end = word_end(raw, start)
            .min(limit)
            .min(cut_limit_forward(raw, outer));
        if start - word >= CUT_MARGIN && cut_end > start && may_hold_secret(&raw[outer..cut_end]) {
            let shown = out_len(r, raw, spans, start, len) - lossy_len(&raw[start..cut_end]);
            if shown + CUT.len() <= room {
                insert_span(
                    spans,
                    Span {
                        start,
                        end: cut_end,
                        label: Label::Cut,
                    },
                );
            } else {
                start = cut_end;
            }
        }
    }
    start
}

/// Where a token the edge at `at` cuts begins: the word `at` falls in
/// (between the spans around it) holds a known token prefix with only
/// token bytes after it, up to the word's end. The rules find a token
/// only with a boundary before it, so one glued to the word before it
/// (`hhhhsk_live_…`) is found here when an edge cuts it: the edge then
/// hides it from its prefix on, whatever its length.
fn cut_token(raw: &[u8], spans: &[Span], at: usize) -> Option<usize> {
    let floor = spans
        .iter()
        .map(|s| s.end)
        .filter(|&e| e <= at)
        .max()
        .unwrap_or(0);
    let ceil = next_span_start(spans, at, raw.len());
    let (start, end) = (word_start(raw, floor, at), word_end(raw, at).min(ceil));
    let from = start + crate::redact::token_prefix_in(&raw[start..end])?;
    (from < end).then_some(from)
}

/// The end of the longest prefix of `raw` whose rendering fits in `room`
/// bytes and ends on a character (preferably a line) boundary, never
/// inside a span. Nothing from `ceil` on is shown. A word the new end cuts
/// that covers the whole margin after it ([`CUT_MARGIN`] bytes) and could
/// hold a secret gets a `[cut]` span (or is left out when that does not
/// fit); a shorter word, whose end the rules saw, is shown.
fn fit_prefix(r: &Redactor, raw: &[u8], ceil: usize, spans: &mut Vec<Span>, room: usize) -> usize {
    let mut used = 0;
    let mut end = 0;
    while end < ceil {
        if let Some(span) = span_at(spans, end) {
            let shown = r.placeholder_len(span.label);
            if used + shown > room {
                break;
            }
            used += shown;
            end = span.end;
            continue;
        }
        let limit = next_span_start(spans, end, ceil);
        let (raw_len, shown) = next_unit(&raw[end..limit]);
        if used + shown > room {
            break;
        }
        used += shown;
        end += raw_len;
    }
    if end < raw.len() {
        let half = end / 2;
        if let Some(nl) = (half..end)
            .rev()
            .find(|&i| raw[i] == b'\n' && !inside_span(spans, i))
        {
            end = nl + 1;
        }
    }
    // The edge (of the room, or of the window: bytes after it were read
    // as the margin) cuts a word.
    let cut = |at: usize| at > 0 && at < raw.len() && !ends_word_at(raw, at);
    if cut(end)
        && !spans.iter().any(|s| s.end == end)
        && let Some(from) = cut_token(raw, spans, end).filter(|&from| from < end)
    {
        let shown = out_len(r, raw, spans, 0, end) - lossy_len(&raw[from..end]);
        if shown + CUT.len() <= room {
            insert_span(
                spans,
                Span {
                    start: from,
                    end,
                    label: Label::Cut,
                },
            );
        } else {
            end = from;
        }
        return end;
    }
    if end > 0 && end < ceil && !ends_word_at(raw, end) && !spans.iter().any(|s| s.end == end) {
        let floor = spans
            .iter()
            .map(|s| s.end)
            .filter(|&e| e <= end)
            .max()
            .unwrap_or(0);
        let outer = end.saturating_add(CUT_MARGIN).min(raw.len());
        let cut_start = word_start(raw, floor, end).max(cut_limit_backward(raw, outer));
        if word_end(raw, end) - end >= CUT_MARGIN
            && cut_start < end
            && may_hold_secret(&raw[cut_start..outer])
        {
            let shown = out_len(r, raw, spans, 0, end) - lossy_len(&raw[cut_start..end]);
            if shown + CUT.len() <= room {
                insert_span(
                    spans,
                    Span {
                        start: cut_start,
                        end,
                        label: Label::Cut,
                    },
                );
            } else {
                end = cut_start;
            }
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> &'static Redactor {
        static BUILTIN: std::sync::LazyLock<Redactor> = std::sync::LazyLock::new(Redactor::builtin);
        &BUILTIN
    }

    fn window<'a>(retain: Retain, seen: u64, head: &'a [u8], tail: &'a [u8]) -> Window<'a> {
        Window {
            stream: StreamName::Stderr,
            retain,
            seen,
            head,
            tail: [tail, &[]],
            redactor: builtin(),
            held_back: false,
            margins: Margins::NONE,
        }
    }

    #[test]
    fn seed_marker_is_exact() {
        let tail = b"x\n".repeat(8192);
        let w = window(Retain::Tail, 184_320, &[], &tail);
        let text = w.render();
        let (first, rest) = text.split_once('\n').unwrap();
        assert_eq!(first, "[stderr truncated: kept last 16384 of 184320 bytes]");
        // The first word may be the end of a longer one: it is not shown.
        assert_eq!(rest, format!("[cut]\n{}", "x\n".repeat(8191)));
    }

    #[test]
    fn cut_characters_are_trimmed_not_broken() {
        // "€" is E2 82 AC; the window starts after its first byte.
        let w = window(Retain::Tail, 10, &[], b"\x82\xac\nok");
        assert_eq!(
            w.render(),
            "[stderr truncated: kept last 5 of 10 bytes]\n\nok"
        );
        // The window ends after the first two bytes of "€".
        let w = window(Retain::Head, 10, b"ok \xe2\x82", &[]);
        assert_eq!(
            w.render(),
            "[stderr truncated: kept first 5 of 10 bytes]\nok "
        );
        // An untruncated stream ending in a broken character shows U+FFFD.
        let w = window(Retain::Tail, 4, &[], b"ok\xe2\x82");
        assert_eq!(w.render(), "ok\u{fffd}");
    }

    #[test]
    fn clamp_prefers_a_line_boundary_and_counts_kept_bytes() {
        let tail = b"line one\nline two\nline three\n";
        let w = window(Retain::Tail, 1000, &[], tail);
        let m = "[stderr truncated: kept last 1000 of 1000 bytes]\n".len();
        let out = w.render_clamped(m + 15);
        assert_eq!(
            out,
            "[stderr truncated: kept last 11 of 1000 bytes]\nline three\n"
        );
    }

    #[test]
    fn clamp_never_exceeds_a_tiny_cap() {
        let w = window(Retain::Tail, 1000, &[], b"abc");
        assert_eq!(w.render_clamped(8), "[stderr ");
        assert_eq!(w.render_clamped(0), "");
    }

    #[test]
    fn clamp_counts_invalid_bytes_as_replacement_characters() {
        let tail = [0xffu8, b' '].repeat(25);
        let w = window(Retain::Tail, 50, &[], &tail);
        let reserve = "[stderr truncated: kept last 50 of 50 bytes]\n".len();
        let out = w.render_clamped(reserve + 30);
        // 30 bytes of room hold seven U+FFFD (each from one invalid byte)
        // and eight spaces: 29 bytes from 15 raw ones.
        assert_eq!(
            out,
            format!(
                "[stderr truncated: kept last 15 of 50 bytes]\n{} ",
                " \u{fffd}".repeat(7)
            )
        );
    }

    #[test]
    fn fingerprint_depends_on_bytes_and_split() {
        let a = window(Retain::HeadAndTail, 10, b"ab", b"cd").fingerprint();
        let b = window(Retain::HeadAndTail, 10, b"abc", b"d").fingerprint();
        let c = window(Retain::HeadAndTail, 99, b"ab", b"cd").fingerprint();
        assert_ne!(a, b);
        assert_eq!(a, c);
        assert_eq!(a.map(|f| f.to_string().len()), Some(32));
        assert_eq!(window(Retain::Tail, 5, &[], &[]).fingerprint(), None);
    }
}
