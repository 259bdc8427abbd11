//! Text is made here, at the edge: marker, UTF-8 decoding, clamping. See
//! [`Window`].

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::capture::StreamName;
use crate::config::Retain;

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
            )
        })
    }

    /// The marker (when bytes were dropped) and the retained text, decoded
    /// lossily. See [`Window`] for the marker's form and place.
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

    /// Renders, then clamps to at most `cap` bytes including the marker
    ///: the agent excerpt, or any destination's own cap.
    ///
    /// Nothing is re-read: the clamp selects from the retained bytes. It keeps
    /// the part the mode favours (the end for `tail`, the start for `head`,
    /// a quarter of the room for the start and the rest for the end for
    /// `head_and_tail`), cuts on a character boundary, prefers a line
    /// boundary when one lies in the outer half of the kept text, and writes
    /// a marker that states what the result keeps of the whole stream. A cap
    /// too small for the marker yields the marker cut to `cap` bytes.
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
        let full = self.render();
        if full.len() <= cap {
            return full;
        }
        let seen = self.seen;
        let truncated = self.truncated();
        let (stream, retain) = (self.stream, self.retain);
        let reserve = marker_reserve(stream, retain, seen);
        let Some(room) = cap.checked_sub(reserve) else {
            let mut m = marker(stream, retain, 0, 0, seen);
            m.truncate(cap);
            return m;
        };
        let tail = self.tail_bytes();
        match retain {
            Retain::Tail => {
                let src: Vec<u8> = [self.head, &tail].concat();
                let start = fit_suffix(&src, room, truncated);
                let kept = &src[start..];
                format!(
                    "{}\n{}",
                    marker(stream, retain, 0, kept.len() as u64, seen),
                    decode(kept)
                )
            }
            Retain::Head => {
                let src: Vec<u8> = [self.head, &tail].concat();
                let end = fit_prefix(&src, room, truncated);
                let kept = &src[..end];
                format!(
                    "{}\n{}",
                    marker(stream, retain, kept.len() as u64, 0, seen),
                    decode(kept)
                )
            }
            Retain::HeadAndTail => {
                let joined;
                let (first, last): (&[u8], &[u8]) = if truncated {
                    (self.head, &tail)
                } else {
                    joined = [self.head, &tail].concat();
                    (&joined, &joined)
                };
                // The head gets a quarter of the room, and whatever a short
                // tail leaves unused, so the excerpt fills its cap.
                let head_room = if truncated {
                    (room / 4).max(room.saturating_sub(lossy_len(last)))
                } else {
                    room / 4
                };
                let end = fit_prefix(first, head_room, true);
                let first = &first[..end];
                let last = if truncated { last } else { &last[end..] };
                let start = fit_suffix(last, room - lossy_len(first), true);
                let last = &last[start..];
                let m = marker(stream, retain, first.len() as u64, last.len() as u64, seen);
                join_around_marker(&decode(first), &m, &decode(last))
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
pub(crate) fn marker_reserve(stream: StreamName, retain: Retain, seen: u64) -> usize {
    marker(stream, retain, seen, seen, seen).len()
        + if retain == Retain::HeadAndTail {
            seen.to_string().len() - 1 + 2
        } else {
            1
        }
}

fn marker(stream: StreamName, retain: Retain, first: u64, last: u64, seen: u64) -> String {
    match retain {
        Retain::Tail => format!("[{stream} truncated: kept last {last} of {seen} bytes]"),
        Retain::Head => format!("[{stream} truncated: kept first {first} of {seen} bytes]"),
        Retain::HeadAndTail => format!(
            "[{stream} truncated: kept first {first} and last {last} of {seen} bytes, {} omitted between them]",
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
    String::from_utf8_lossy(bytes).into_owned()
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
    bytes
        .utf8_chunks()
        .map(|c| c.valid().len() + if c.invalid().is_empty() { 0 } else { 3 })
        .sum()
}

/// The start of the longest suffix of `raw` whose decoding fits in `room`
/// bytes and starts on a character (preferably a line) boundary. `cut`
/// says the start of `raw` is itself a cut edge.
fn fit_suffix(raw: &[u8], room: usize, cut: bool) -> usize {
    let mut start = raw.len().saturating_sub(room);
    if start > 0 || cut {
        start = raw.len() - trim_start(&raw[start..]).len();
    }
    let mut excess = lossy_len(&raw[start..]).saturating_sub(room);
    'units: for chunk in raw[start..].utf8_chunks() {
        for ch in chunk.valid().chars() {
            if excess == 0 {
                break 'units;
            }
            start += ch.len_utf8();
            excess = excess.saturating_sub(ch.len_utf8());
        }
        if excess == 0 {
            break;
        }
        if !chunk.invalid().is_empty() {
            start += chunk.invalid().len();
            excess = excess.saturating_sub(3);
        }
    }
    if start > 0 {
        let kept = &raw[start..];
        if let Some(nl) = kept[..kept.len() / 2].iter().position(|&b| b == b'\n') {
            start += nl + 1;
        }
    }
    start
}

/// The end of the longest prefix of `raw` whose decoding fits in `room`
/// bytes and ends on a character (preferably a line) boundary. `cut` says
/// the end of `raw` is itself a cut edge.
fn fit_prefix(raw: &[u8], room: usize, cut: bool) -> usize {
    let mut end = raw.len().min(room);
    if end < raw.len() || cut {
        end = trim_end(&raw[..end]).len();
    }
    let mut used = 0;
    let mut fits = 0;
    'units: for chunk in raw[..end].utf8_chunks() {
        for ch in chunk.valid().chars() {
            if used + ch.len_utf8() > room {
                break 'units;
            }
            used += ch.len_utf8();
            fits += ch.len_utf8();
        }
        if !chunk.invalid().is_empty() {
            if used + 3 > room {
                break;
            }
            used += 3;
            fits += chunk.invalid().len();
        }
    }
    if fits < raw.len() {
        let kept = &raw[..fits];
        if let Some(nl) = kept[kept.len() / 2..].iter().rposition(|&b| b == b'\n') {
            return kept.len() / 2 + nl + 1;
        }
    }
    fits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window<'a>(retain: Retain, seen: u64, head: &'a [u8], tail: &'a [u8]) -> Window<'a> {
        Window {
            stream: StreamName::Stderr,
            retain,
            seen,
            head,
            tail: [tail, &[]],
        }
    }

    #[test]
    fn seed_marker_is_exact() {
        let tail = vec![b'x'; 16384];
        let w = window(Retain::Tail, 184_320, &[], &tail);
        let text = w.render();
        let (first, rest) = text.split_once('\n').unwrap();
        assert_eq!(first, "[stderr truncated: kept last 16384 of 184320 bytes]");
        assert_eq!(rest.len(), 16384);
    }

    #[test]
    fn cut_characters_are_trimmed_not_broken() {
        // "€" is E2 82 AC; the window starts after its first byte.
        let w = window(Retain::Tail, 10, &[], b"\x82\xacok");
        assert_eq!(
            w.render(),
            "[stderr truncated: kept last 4 of 10 bytes]\nok"
        );
        // The window ends after the first two bytes of "€".
        let w = window(Retain::Head, 10, b"ok\xe2\x82", &[]);
        assert_eq!(
            w.render(),
            "[stderr truncated: kept first 4 of 10 bytes]\nok"
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
        let tail = [0xffu8; 50];
        let w = window(Retain::Tail, 50, &[], &tail);
        let reserve = "[stderr truncated: kept last 50 of 50 bytes]\n".len();
        let out = w.render_clamped(reserve + 30);
        // 30 bytes of room hold ten U+FFFD, each from one invalid byte.
        assert_eq!(
            out,
            format!(
                "[stderr truncated: kept last 10 of 50 bytes]\n{}",
                "\u{fffd}".repeat(10)
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
