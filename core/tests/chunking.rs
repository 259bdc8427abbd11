//! Capture and rendering are functions of the bytes fed, never of how they
//! were chunked: what is retained, its marker, its rendering and its
//! redaction. Every property compares the capture with a
//! model computed here from the input alone.
#![allow(clippy::unwrap_used)]

use std::ops::Range;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::TestCaseError;
use spillguard_core::{
    CUT_MARGIN, CaptureSettings, Config, MAX_CUT_HIDDEN, Margins, Redactor, Retain, RetentionPool,
    StreamCapture, StreamName, Window,
};

/// The retention modes, as a local enum so the test can match exhaustively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Tail,
    Head,
    HeadAndTail,
}

impl Mode {
    fn retain(self) -> Retain {
        match self {
            Mode::Tail => Retain::Tail,
            Mode::Head => Retain::Head,
            Mode::HeadAndTail => Retain::HeadAndTail,
        }
    }

    /// Prefix and ring capacities for `budget`.
    fn split(self, budget: usize, head_bytes: usize) -> (usize, usize) {
        match self {
            Mode::Tail => (0, budget),
            Mode::Head => (budget, 0),
            Mode::HeadAndTail => {
                let h = head_bytes.min(budget);
                (h, budget - h)
            }
        }
    }
}

fn settings(mode: Mode, budget: usize, head_bytes: usize) -> CaptureSettings {
    CaptureSettings {
        stream: StreamName::Stderr,
        retain: mode.retain(),
        budget,
        head_bytes,
        kill_after_bytes: None,
        debug: false,
        redactor: Redactor::builtin(),
    }
}

fn feed_all<'a>(
    settings: &CaptureSettings,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> StreamCapture {
    let mut capture = StreamCapture::new(settings.clone(), &RetentionPool::unlimited());
    for chunk in chunks {
        let _ = capture.feed(chunk);
    }
    capture
}

/// What an unlimited capture must retain: the first `h` and last `t` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Model {
    seen: usize,
    h: usize,
    t: usize,
}

impl Model {
    fn new(len: usize, mode: Mode, budget: usize, head_bytes: usize) -> Self {
        let (head_cap, tail_cap) = mode.split(budget, head_bytes);
        let h = len.min(head_cap);
        let t = (len - h).min(tail_cap);
        Model { seen: len, h, t }
    }

    fn truncated(&self) -> bool {
        self.seen > self.h + self.t
    }

    /// The margins a capture keeps, as ranges of the input: the first
    /// dropped bytes after a non-empty head (`head`, `head_and_tail`) and
    /// the last dropped bytes before the tail (`tail`, `head_and_tail`),
    /// at most [`CUT_MARGIN`] each.
    fn margins(&self, mode: Mode) -> (Range<usize>, Range<usize>) {
        let gap = self.seen - self.h - self.t;
        let after = match mode != Mode::Tail && self.h > 0 {
            true => self.h..self.h + gap.min(CUT_MARGIN),
            false => self.h..self.h,
        };
        let tail_at = self.seen - self.t;
        let before = match mode != Mode::Head {
            true => tail_at - gap.min(CUT_MARGIN)..tail_at,
            false => tail_at..tail_at,
        };
        (after, before)
    }

    /// Whether one margin holds every dropped byte: the rules read the
    /// whole stream, with no cut edge.
    fn contiguous(&self, mode: Mode) -> bool {
        let gap = self.seen - self.h - self.t;
        let (after, before) = self.margins(mode);
        gap > 0 && (after.len() == gap || before.len() == gap)
    }

    /// Where the bytes the rules read for the tail start (the margin
    /// before it, a character cut at its outer edge trimmed), in `input`.
    fn tail_hay_start(&self, mode: Mode, input: &[u8]) -> usize {
        if self.contiguous(mode) {
            return 0;
        }
        let (_, before) = self.margins(mode);
        before.start + shown_tail_start(&input[before.start..])
    }

    /// Where the bytes the rules read for the head end (the margin after
    /// it, a character cut at its outer edge trimmed), in `input`.
    fn head_hay_end(&self, mode: Mode, input: &[u8]) -> usize {
        if self.contiguous(mode) {
            return input.len();
        }
        let (after, _) = self.margins(mode);
        shown_head_end(&input[..after.end])
    }

    fn marker(&self, mode: Mode) -> String {
        let Model { seen, h, t } = *self;
        match mode {
            Mode::Tail => format!("[stderr truncated: kept last {t} of {seen} bytes]"),
            Mode::Head => format!("[stderr truncated: kept first {h} of {seen} bytes]"),
            Mode::HeadAndTail => format!(
                "[stderr truncated: kept first {h} and last {t} of {seen} bytes, {} omitted between them]",
                seen - h - t
            ),
        }
    }
}

fn is_continuation(b: u8) -> bool {
    (0x80..=0xBF).contains(&b)
}

/// Bytes a well-formed character starting with `lead` has, if it is a lead.
fn char_width(lead: u8) -> Option<usize> {
    match lead {
        0xC2..=0xDF => Some(2),
        0xE0..=0xEF => Some(3),
        0xF0..=0xF4 => Some(4),
        _ => None,
    }
}

/// Start of the shown part of a tail window: leading continuation bytes
/// (the rest of a character cut by the window's start) are not shown, at
/// most three of them.
fn shown_tail_start(tail: &[u8]) -> usize {
    tail.iter()
        .take(3)
        .take_while(|&&b| is_continuation(b))
        .count()
}

/// End of the shown part of a head window: a lead byte followed by fewer
/// continuation bytes than it needs (a character cut by the window's end)
/// is not shown.
fn shown_head_end(head: &[u8]) -> usize {
    for n in 1..=3.min(head.len()) {
        let cut = &head[head.len() - n..];
        let is_cut_char = char_width(cut[0]).is_some_and(|w| w > n)
            && cut[1..].iter().all(|&b| is_continuation(b));
        if is_cut_char {
            return head.len() - n;
        }
    }
    head.len()
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn join_around_marker(first: &str, marker: &str, last: &str) -> String {
    let newline = if first.is_empty() || first.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!("{first}{newline}{marker}\n{last}")
}

/// What shows a word cut by a window or clamp edge.
const CUT: &str = "[cut]";

/// Words after which, at a window's cut start, the next word is a
/// credential and is hidden too.
const CREDENTIAL_KEYWORDS: &[&str] = &[
    "authorization:",
    "bearer",
    "basic",
    "token",
    "digest",
    "password:",
    "passwd:",
    "secret:",
    "token:",
    "key:",
    "password",
    "passwd",
    "secret",
    "api-key",
    "apikey",
    "-u",
    "--user",
];

fn is_ws(b: &u8) -> bool {
    b.is_ascii_whitespace()
}

fn is_quote(b: u8) -> bool {
    b == b'"' || b == b'\''
}

/// Whether a cut word running forwards ends at `bytes[i]`: a blank, or a
/// quote that closes a value (not first, no backslash before it, then the
/// end, a blank, `,`, `}`, `]`, `)`, `:` or `;`).
fn ends_at(bytes: &[u8], i: usize) -> bool {
    let b = bytes[i];
    if is_ws(&b) {
        return true;
    }
    if !is_quote(b) || i == 0 || bytes[i - 1] == b'\\' {
        return false;
    }
    match bytes.get(i + 1) {
        None => true,
        Some(next) => is_ws(next) || b",}]):;".contains(next),
    }
}

/// Whether a cut word running backwards starts after `bytes[i]`: a blank,
/// or a quote that opens a value (first, or after a blank, `,`, `{`, `[`,
/// `(`, `:` or `=`).
fn starts_after(bytes: &[u8], i: usize) -> bool {
    let b = bytes[i];
    is_ws(&b)
        || (is_quote(b) && (i == 0 || is_ws(&bytes[i - 1]) || b",{[(:=".contains(&bytes[i - 1])))
}

/// The first `i >= from` where a word ends, or the length.
fn end_of_word(bytes: &[u8], from: usize) -> usize {
    (from..bytes.len())
        .find(|&i| ends_at(bytes, i))
        .unwrap_or(bytes.len())
}

/// The model of how far a cut may hide from `from` on: at most
/// [`MAX_CUT_HIDDEN`] bytes, and up to the first byte that is not ASCII or
/// the start of the first run of 8 copies of one byte.
fn hide_limit_forward(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < bytes.len() && i < from + MAX_CUT_HIDDEN {
        if bytes[i] >= 0x80 {
            return i;
        }
        if bytes.len() >= i + 8 && bytes[i..i + 8].iter().all(|&b| b == bytes[i]) {
            return i;
        }
        i += 1;
    }
    i
}

/// The model of how far back a cut may hide from `to`: the same bounds,
/// read backwards.
fn hide_limit_backward(bytes: &[u8], to: usize) -> usize {
    let mut i = to;
    while i > 0 && to - i < MAX_CUT_HIDDEN {
        if bytes[i - 1] >= 0x80 {
            return i;
        }
        if i >= 8 && bytes[i - 8..i].iter().all(|&b| b == bytes[i - 1]) {
            return i;
        }
        i -= 1;
    }
    i
}

/// End of the word a window's start cuts, and up to two words more after a
/// possible keyword end (the word read with what separates it from the
/// next: blanks, quotes, `:` and `=`).
fn cut_word_end(bytes: &[u8]) -> (usize, bool) {
    let gap = |b: &u8| is_ws(b) || is_quote(*b) || matches!(b, b':' | b'=');
    let (mut start, mut end) = (0, end_of_word(bytes, 0));
    // A cut on the blank before a word: that word may be a value.
    let mut blank = end == 0 && matches!(bytes.first(), Some(b' ' | b'\t'));
    let mut extended = false;
    for _ in 0..2 {
        let next = bytes[end..].iter().position(|b| !gap(b)).map(|i| end + i);
        let word: Vec<u8> = bytes[start..next.unwrap_or(bytes.len())]
            .iter()
            .filter(|&&b| !is_ws(&b) && !is_quote(b))
            .map(|&b| {
                if b == b'=' {
                    b':'
                } else {
                    b.to_ascii_lowercase()
                }
            })
            .collect();
        let keyword_end = blank
            || (!word.is_empty()
                && CREDENTIAL_KEYWORDS
                    .iter()
                    .any(|k| k.as_bytes().ends_with(&word) || word.ends_with(k.as_bytes())));
        blank = false;
        match next {
            Some(next) if keyword_end => {
                start = next;
                end = end_of_word(bytes, start);
                extended = true;
            }
            _ => break,
        }
    }
    (end, extended)
}

/// Whether a run cut by an edge could hold a secret: it has a letter.
fn has_letter(run: &[u8]) -> bool {
    run.iter().any(u8::is_ascii_alphabetic)
}

/// The start of the word that ends at `to`, no earlier than `floor`.
fn start_of_word(bytes: &[u8], floor: usize, to: usize) -> usize {
    (floor..to)
        .rev()
        .find(|&i| starts_after(bytes, i))
        .map_or(floor, |i| i + 1)
}

/// The tail shown after a window's cut start, and where the `[cut]` it
/// shows ends (in `hay`): `hay` is what the rules read (the margin and the
/// tail, a character cut at its start trimmed), shown from `shown`. The
/// word cut at the hay's start (with a credential after a keyword) is
/// hidden over its visible part when it reaches past the margin and could
/// hold a secret.
fn after_window_cut(hay: &[u8], shown: usize) -> (String, Option<usize>) {
    let (word, extended) = cut_word_end(hay);
    let n = word.min(hide_limit_forward(hay, 0));
    if n > shown && (extended || has_letter(&hay[..n])) {
        (format!("{CUT}{}", lossy(&hay[n..])), Some(n))
    } else {
        (lossy(&hay[shown..]), None)
    }
}

/// `raw[start..]` shown after a clamp's cut start: the word it cuts is
/// hidden when it covers the whole margin before the edge and could hold
/// a secret. `floor`: where the word search stops (the end of a span).
fn after_clamp_cut(raw: &[u8], start: usize, floor: usize) -> String {
    let word = start_of_word(raw, floor, start);
    let outer = start.saturating_sub(CUT_MARGIN);
    let cut_end = end_of_word(raw, start).min(hide_limit_forward(raw, outer));
    if start - word >= CUT_MARGIN && cut_end > start && has_letter(&raw[outer..cut_end]) {
        format!("{CUT}{}", lossy(&raw[cut_end..]))
    } else {
        lossy(&raw[start..])
    }
}

/// The head shown before a window's cut end: `hay` is what the rules read
/// (the head and the margin after it), shown up to `shown`. The word cut
/// at the hay's end is hidden over its visible part when it could hold a
/// secret.
fn before_window_cut(hay: &[u8], shown: usize) -> String {
    let start = start_of_word(hay, 0, hay.len()).max(hide_limit_backward(hay, hay.len()));
    if start < shown && has_letter(&hay[start..]) {
        format!("{}{CUT}", lossy(&hay[..start]))
    } else {
        lossy(&hay[..shown])
    }
}

/// `raw[..end]` shown before a clamp's cut end: the word it cuts is hidden
/// when it covers the whole margin after the edge and could hold a secret.
fn before_clamp_cut(raw: &[u8], end: usize) -> String {
    let outer = (end + CUT_MARGIN).min(raw.len());
    let start = start_of_word(raw, 0, end).max(hide_limit_backward(raw, outer));
    if end_of_word(raw, end) - end >= CUT_MARGIN && start < end && has_letter(&raw[start..outer]) {
        format!("{}{CUT}", lossy(&raw[..start]))
    } else {
        lossy(&raw[..end])
    }
}

/// The window's head and tail texts from the model, and where the tail's
/// `[cut]` ends in the input (no secret shapes occur in these inputs).
fn window_texts(input: &[u8], mode: Mode, model: Model) -> (String, String, Option<usize>) {
    let head = &input[..model.h];
    let tail_at = input.len() - model.t;
    let head_end = shown_head_end(head);
    let tail_start = tail_at + shown_tail_start(&input[tail_at..]);
    if model.contiguous(mode) {
        return (lossy(&head[..head_end]), lossy(&input[tail_start..]), None);
    }
    let hay_end = model.head_hay_end(mode, input);
    let head_text = before_window_cut(&input[..hay_end], head_end);
    let hay_start = model.tail_hay_start(mode, input);
    let (tail_text, cut_end) = after_window_cut(&input[hay_start..], tail_start - hay_start);
    (head_text, tail_text, cut_end.map(|n| hay_start + n))
}

/// The rendering expected from the model: cut characters trimmed, the
/// words cut by the window's edges hidden (no secret shapes occur in these
/// inputs).
fn expected_render(input: &[u8], mode: Mode, model: Model) -> String {
    if !model.truncated() {
        return lossy(input);
    }
    let (head_text, tail_text, _) = window_texts(input, mode, model);
    let marker = model.marker(mode);
    match mode {
        Mode::Tail => format!("{marker}\n{tail_text}"),
        Mode::Head => format!("{marker}\n{head_text}"),
        Mode::HeadAndTail => join_around_marker(&head_text, &marker, &tail_text),
    }
}

/// The rendering without redaction expected from the model, with cut
/// characters trimmed.
fn expected_unredacted(input: &[u8], mode: Mode, model: Model) -> String {
    if !model.truncated() {
        return lossy(input);
    }
    let head = &input[..model.h];
    let tail = &input[input.len() - model.t..];
    let head_text = lossy(&head[..shown_head_end(head)]);
    let tail_text = lossy(&tail[shown_tail_start(tail)..]);
    let marker = model.marker(mode);
    match mode {
        Mode::Tail => format!("{marker}\n{tail_text}"),
        Mode::Head => format!("{marker}\n{head_text}"),
        Mode::HeadAndTail => join_around_marker(&head_text, &marker, &tail_text),
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The same rendering for valid UTF-8, from `str` char boundaries only.
fn expected_render_of_text(s: &str, mode: Mode, model: Model) -> String {
    if !model.truncated() {
        return s.to_owned();
    }
    let head_text = &s[..floor_boundary(s, model.h)];
    let tail_text = &s[ceil_boundary(s, s.len() - model.t)..];
    let marker = model.marker(mode);
    match mode {
        Mode::Tail => format!("{marker}\n{tail_text}"),
        Mode::Head => format!("{marker}\n{head_text}"),
        Mode::HeadAndTail => join_around_marker(head_text, &marker, tail_text),
    }
}

/// `w` without its margins: the rules stop at the window's edges, as in
/// a window built by hand or one whose margins the pool refused.
fn bare(w: Window<'_>) -> Window<'_> {
    Window {
        margins: Margins::NONE,
        ..w
    }
}

fn window_parts(w: &Window<'_>) -> (Vec<u8>, Vec<u8>) {
    (w.head.to_vec(), [w.tail[0], w.tail[1]].concat())
}

// ---------------------------------------------------------------- inputs

const TEXT_CHARS: &[char] = &[
    'a', 'q', 'Z', '0', ' ', ':', '\n', '\n', 'é', 'ж', '€', '中', '✓', '😀', '𝄞', '"', '\'', ',',
    '}', '\\', '=',
];

/// Valid UTF-8 with 1- to 4-byte characters and newlines.
fn text(max_chars: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(select(TEXT_CHARS), 0..max_chars)
        .prop_map(|chars| chars.into_iter().collect::<String>().into_bytes())
}

/// Arbitrary bytes, mostly not UTF-8, but no `-`: a `-p…` or `-u …` at
/// the start of a window that cut the blank before it is a credential
/// flag (the redaction's cut rule, whose own tests are in
/// `redaction_contexts.rs`), a secret shape this file's model does not
/// hold.
fn raw(max_len: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(
        any::<u8>().prop_map(|b| if b == b'-' { b'.' } else { b }),
        0..max_len,
    )
}

const MAX_INPUT: usize = 3000;

fn input() -> impl Strategy<Value = Vec<u8>> {
    let mixed = vec(prop_oneof![text(120), raw(200)], 0..10).prop_map(|parts| {
        let mut all = parts.concat();
        all.truncate(MAX_INPUT);
        all
    });
    prop_oneof![
        3 => text(MAX_INPUT / 4),
        2 => raw(MAX_INPUT),
        3 => mixed,
        1 => raw(48),
    ]
    .prop_map(at_most_three_colons_a_line)
}

/// `bytes` with every `:` after a line's third made a `;`: a line of five
/// fields split by colons (`a:0:é:a:a😀aa`) is a `.pgpass` line, whose
/// last field is a password, a secret shape this file's model does not
/// hold.
fn at_most_three_colons_a_line(mut bytes: Vec<u8>) -> Vec<u8> {
    let mut colons = 0;
    for byte in &mut bytes {
        match *byte {
            b'\n' => colons = 0,
            b':' if colons == 3 => *byte = b';',
            b':' => colons += 1,
            _ => {}
        }
    }
    bytes
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![Just(Mode::Tail), Just(Mode::Head), Just(Mode::HeadAndTail)]
}

#[derive(Debug, Clone)]
struct Case {
    input: Vec<u8>,
    mode: Mode,
    budget: usize,
    head_bytes: usize,
    cuts: Vec<Index>,
}

impl Case {
    fn settings(&self) -> CaptureSettings {
        settings(self.mode, self.budget, self.head_bytes)
    }

    fn model(&self) -> Model {
        Model::new(self.input.len(), self.mode, self.budget, self.head_bytes)
    }

    /// The input split at the random cut points (empty chunks included).
    fn chunks(&self) -> Vec<&[u8]> {
        let mut points: Vec<usize> = self
            .cuts
            .iter()
            .map(|i| i.index(self.input.len() + 1))
            .collect();
        points.sort_unstable();
        let mut chunks = Vec::with_capacity(points.len() + 1);
        let mut start = 0;
        for p in points {
            chunks.push(&self.input[start..p]);
            start = p;
        }
        chunks.push(&self.input[start..]);
        chunks
    }
}

fn case() -> impl Strategy<Value = Case> {
    (
        input(),
        mode(),
        1usize..=400,
        0usize..=450,
        vec(any::<Index>(), 0..24),
    )
        .prop_map(|(input, mode, budget, head_bytes, cuts)| Case {
            input,
            mode,
            budget,
            head_bytes,
            cuts,
        })
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn rendering_is_identical_for_every_chunking(case in case()) {
        let settings = case.settings();
        let model = case.model();
        let input = &case.input;
        let whole = feed_all(&settings, [input.as_slice()]);
        let random = feed_all(&settings, case.chunks());
        let bytewise = feed_all(&settings, input.chunks(1));

        let rendered = whole.render();
        prop_assert_eq!(&random.render(), &rendered);
        prop_assert_eq!(&bytewise.render(), &rendered);
        prop_assert_eq!(&rendered, &expected_render(input, case.mode, model));
        prop_assert_eq!(whole.window().redactions().total(), 0);
        // The checks below are about the raw text: they read it unredacted.
        let rendered = whole.window().render_unredacted();
        prop_assert_eq!(&random.window().render_unredacted(), &rendered);

        let len = input.len();
        let expected_head = &input[..model.h];
        let expected_tail = &input[len - model.t..];
        for capture in [&whole, &random, &bytewise] {
            prop_assert_eq!(capture.bytes_seen(), len as u64);
            prop_assert_eq!(capture.bytes_retained(), len.min(case.budget) as u64);
            prop_assert_eq!(capture.truncated(), len > case.budget);
            prop_assert!(!capture.retention_limited());
            let (head, tail) = window_parts(&capture.window());
            prop_assert_eq!(head.as_slice(), expected_head);
            prop_assert_eq!(tail.as_slice(), expected_tail);
            prop_assert_eq!(
                capture.window().marker(),
                model.truncated().then(|| model.marker(case.mode))
            );
        }

        prop_assert_eq!(&rendered, &expected_unredacted(input, case.mode, model));
        if !model.truncated() {
            // Nothing dropped: the text is the input, byte for byte.
            prop_assert_eq!(&rendered, &String::from_utf8_lossy(input));
        }
        match case.mode {
            Mode::Tail | Mode::Head if model.truncated() => {
                let marker = model.marker(case.mode);
                prop_assert_eq!(rendered.lines().next(), Some(marker.as_str()));
            }
            _ => {}
        }

        if let Ok(text) = std::str::from_utf8(input) {
            prop_assert_eq!(&rendered, &expected_render_of_text(text, case.mode, model));
            prop_assert!(!rendered.contains(char::REPLACEMENT_CHARACTER), "U+FFFD in {rendered:?}");
            if case.mode == Mode::Tail && model.truncated() {
                let marker_line = format!("{}\n", model.marker(Mode::Tail));
                let shown = rendered.strip_prefix(&marker_line).unwrap();
                prop_assert!(text.ends_with(shown));
                prop_assert!(model.t - shown.len() <= 3);
            }
        }

        // Finishing keeps the same window and rendering.
        let retained = whole.finish();
        prop_assert_eq!(retained.bytes_seen(), len as u64);
        prop_assert_eq!(retained.bytes_retained(), (model.h + model.t) as u64);
        prop_assert_eq!(retained.render_unredacted(), rendered);
        prop_assert_eq!(retained.render(), expected_render(input, case.mode, model));
    }
}

/// The kept counts a clamped rendering states in its marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stated {
    first: u64,
    last: u64,
    omitted: u64,
    seen: u64,
}

fn number(s: &str) -> Option<u64> {
    s.parse().ok()
}

fn parse_marker(line: &str, mode: Mode) -> Option<Stated> {
    let body = line
        .strip_prefix("[stderr truncated: kept ")?
        .strip_suffix("]")?;
    match mode {
        Mode::Tail => {
            let (last, rest) = body.strip_prefix("last ")?.split_once(" of ")?;
            let (last, seen) = (number(last)?, number(rest.strip_suffix(" bytes")?)?);
            Some(Stated {
                first: 0,
                last,
                omitted: seen.checked_sub(last)?,
                seen,
            })
        }
        Mode::Head => {
            let (first, rest) = body.strip_prefix("first ")?.split_once(" of ")?;
            let (first, seen) = (number(first)?, number(rest.strip_suffix(" bytes")?)?);
            Some(Stated {
                first,
                last: 0,
                omitted: seen.checked_sub(first)?,
                seen,
            })
        }
        Mode::HeadAndTail => {
            let (first, rest) = body.strip_prefix("first ")?.split_once(" and last ")?;
            let (last, rest) = rest.split_once(" of ")?;
            let (seen, rest) = rest.split_once(" bytes, ")?;
            let omitted = rest.strip_suffix(" omitted between them")?;
            Some(Stated {
                first: number(first)?,
                last: number(last)?,
                omitted: number(omitted)?,
                seen: number(seen)?,
            })
        }
    }
}

/// The widest marker any clamp of a `seen`-byte stream could write, plus
/// its newlines: with less room than this, only a cut marker fits.
fn widest_marker_with_newlines(mode: Mode, seen: u64) -> usize {
    let digits = seen.to_string().len();
    match mode {
        Mode::Tail => "[stderr truncated: kept last  of  bytes]".len() + 2 * digits + 1,
        Mode::Head => "[stderr truncated: kept first  of  bytes]".len() + 2 * digits + 1,
        Mode::HeadAndTail => {
            "[stderr truncated: kept first  and last  of  bytes,  omitted between them]".len()
                + 4 * digits
                + 2
        }
    }
}

#[derive(Debug, Clone)]
struct ClampCase {
    input: Vec<u8>,
    mode: Mode,
    budget: usize,
    head_bytes: usize,
    cap: usize,
}

fn clamp_case() -> impl Strategy<Value = ClampCase> {
    (input(), mode(), 1usize..=400, 0usize..=450, 0usize..2000).prop_map(
        |(input, mode, budget, head_bytes, cap)| ClampCase {
            input,
            mode,
            budget,
            head_bytes,
            cap,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn clamped_rendering_fits_the_cap_and_states_what_it_kept(case in clamp_case()) {
        let settings = settings(case.mode, case.budget, case.head_bytes);
        let capture = feed_all(&settings, [case.input.as_slice()]);
        let model = Model::new(case.input.len(), case.mode, case.budget, case.head_bytes);
        let seen = case.input.len() as u64;
        let cap = case.cap;
        let full = capture.render();
        let out = capture.window().render_clamped(cap);

        prop_assert!(out.len() <= cap, "{} bytes for a cap of {cap}", out.len());
        prop_assert_eq!(&capture.finish().render_clamped(cap), &out);
        if full.len() <= cap {
            prop_assert_eq!(&out, &full);
            return Ok(());
        }

        // Too little room for a marker and its newline: the marker stating
        // nothing kept, cut to `cap`.
        let zero = Model { seen: case.input.len(), h: 0, t: 0 }.marker(case.mode);
        if cap < widest_marker_with_newlines(case.mode, seen) {
            prop_assert_eq!(out.as_str(), &zero[..cap.min(zero.len())]);
            return Ok(());
        }

        let marker_line = match case.mode {
            Mode::Tail | Mode::Head => out.lines().next(),
            Mode::HeadAndTail => out
                .lines()
                .find(|l| l.starts_with("[stderr truncated: kept first ")),
        };
        let stated = marker_line.and_then(|l| parse_marker(l, case.mode));
        prop_assert!(stated.is_some(), "no marker in {out:?}");
        let stated = stated.unwrap();
        prop_assert_eq!(stated.seen, seen);
        prop_assert_eq!(stated.first + stated.last + stated.omitted, seen);
        prop_assert!(stated.first + stated.last <= (model.h + model.t) as u64);
        let marker = marker_line.unwrap();

        if let Ok(text) = std::str::from_utf8(&case.input) {
            let (first, last) = (stated.first as usize, stated.last as usize);
            let bytes = text.as_bytes();
            let len = bytes.len();
            let truncated = model.truncated();
            let tail_floor = len - model.t + shown_tail_start(&bytes[len - model.t..]);
            let head_ceil = shown_head_end(&bytes[..model.h]);
            // What the kept end shows: the window's own rendering at the
            // window's edge, the clamp's rule at a clamp edge (the bytes
            // the rules read beyond it being its margin), else all of it.
            // The bytes each side of the clamp reads: the window's parts
            // with their margins, or the whole text when nothing was
            // dropped (the tail of head_and_tail from the head's end).
            let (head_text, tail_text, tail_cut) = window_texts(bytes, case.mode, model);
            let head_raw = if truncated { model.head_hay_end(case.mode, bytes) } else { len };
            let shown_end = |start: usize, source_start: usize| {
                let kept = &bytes[start..];
                let tail_raw = match (truncated, case.mode) {
                    (true, _) => model.tail_hay_start(case.mode, bytes),
                    (false, Mode::HeadAndTail) => source_start,
                    (false, _) => 0,
                };
                let raw = &bytes[tail_raw..];
                if kept.is_empty() {
                    String::new()
                } else if truncated && start == tail_floor {
                    tail_text.clone()
                } else if start > source_start && !ends_at(raw, start - 1 - tail_raw) {
                    let floor = tail_cut.filter(|&n| n <= start).unwrap_or(tail_raw);
                    after_clamp_cut(raw, start - tail_raw, floor.saturating_sub(tail_raw))
                } else {
                    lossy(kept)
                }
            };
            let shown_start = |end: usize, bound: usize| {
                let raw = &bytes[..head_raw];
                if truncated && end == head_ceil {
                    head_text.clone()
                } else if end < bound && !ends_at(raw, end) {
                    before_clamp_cut(raw, end)
                } else {
                    lossy(&bytes[..end])
                }
            };
            let expected = match case.mode {
                Mode::Tail => {
                    let floor = if truncated { tail_floor } else { 0 };
                    format!("{marker}\n{}", shown_end(len - last, floor))
                }
                Mode::Head => {
                    let bound = if truncated { head_ceil } else { len };
                    format!("{marker}\n{}", shown_start(first, bound))
                }
                Mode::HeadAndTail => {
                    let (bound, floor) = if truncated { (head_ceil, tail_floor) } else { (len, first) };
                    join_around_marker(&shown_start(first, bound), marker, &shown_end(len - last, floor))
                }
            };
            prop_assert_eq!(&out, &expected);
            // The clamp keeps at least about half the room it had.
            let room = cap.saturating_sub(widest_marker_with_newlines(case.mode, seen));
            match case.mode {
                Mode::Tail => prop_assert!(last == model.t || 2 * last + 8 >= room),
                Mode::Head => prop_assert!(first == model.h || 2 * first + 8 >= room),
                Mode::HeadAndTail => {}
            }
        }
    }
}

// ---------------------------------------------------------------- examples

#[test]
fn seed_flood_keeps_the_last_16384_of_184320_bytes() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let mut capture = StreamCapture::new(CaptureSettings::stderr(&config), &pool);
    let input = "helper-diagnostic\n".repeat(10_240);
    assert_eq!(input.len(), 184_320);
    for chunk in input.as_bytes().chunks(4096) {
        let _ = capture.feed(chunk);
    }
    assert_eq!(capture.bytes_seen(), 184_320);
    assert_eq!(capture.bytes_retained(), 16_384);
    assert!(capture.truncated());
    let rendered = capture.render();
    let (first, rest) = rendered.split_once('\n').unwrap();
    assert_eq!(first, "[stderr truncated: kept last 16384 of 184320 bytes]");
    // The window starts 14 bytes into a line: the margin holds the
    // line's start, so "tic" is shown as the end of a word the rules saw.
    assert_eq!(rest, format!("tic\n{}", "helper-diagnostic\n".repeat(910)));
    let raw = capture.window().render_unredacted();
    assert_eq!(raw.split_once('\n').unwrap().1, &input[184_320 - 16_384..]);
    assert_eq!(pool.in_use(), 16_384 + CUT_MARGIN as u64);
}

#[test]
fn agent_excerpt_of_the_seed_flood_keeps_whole_lines() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let mut capture = StreamCapture::new(CaptureSettings::stderr(&config), &pool);
    let input = "helper-diagnostic\n".repeat(10_240);
    let _ = capture.feed(input.as_bytes());
    let excerpt = capture.finish().render_clamped(4096);
    // 4096 minus the widest marker (52 bytes) and its newline leaves 4043
    // bytes: 224 whole lines of 18 bytes.
    let (first, rest) = excerpt.split_once('\n').unwrap();
    assert_eq!(first, "[stderr truncated: kept last 4032 of 184320 bytes]");
    assert_eq!(rest, "helper-diagnostic\n".repeat(224));
    assert_eq!(excerpt.len(), 50 + 1 + 4032);
}

#[test]
fn head_and_tail_marker_states_both_counts_and_the_gap() {
    let settings = settings(Mode::HeadAndTail, 16_384, 4096);
    let input = "helper-diagnostic\n".repeat(10_240);
    let capture = feed_all(&settings, input.as_bytes().chunks(1000));
    let rendered = capture.render();
    let marker = "[stderr truncated: kept first 4096 and last 12288 of 184320 bytes, \
                  167936 omitted between them]";
    // 4096 = 227 lines and 10 bytes: the cut line ends without a newline,
    // so the marker gets its own line.
    let head = &input[..4096];
    let tail = &input[184_320 - 12_288..];
    assert_eq!(
        capture.window().render_unredacted(),
        format!("{head}\n{marker}\n{tail}")
    );
    // Both inner edges cut a word, "helper-dia" and "-diagnostic", whose
    // whole the rules read in the margins: they are shown.
    assert_eq!(rendered, format!("{head}\n{marker}\n{tail}"));
    // Without the margins, both are hidden.
    assert_eq!(
        bare(capture.window()).render(),
        format!("{}[cut]\n{marker}\n[cut]{}", &input[..4086], &tail[11..])
    );
}

#[test]
fn a_character_split_across_chunks_decodes_whole() {
    let text = "retry é € 😀 done\n";
    let bytes = text.as_bytes();
    for settings in [
        settings(Mode::Tail, 64, 0),
        settings(Mode::Head, 64, 0),
        settings(Mode::HeadAndTail, 64, 8),
    ] {
        // Every split point, including inside each multi-byte character.
        for at in 0..=bytes.len() {
            let capture = feed_all(&settings, [&bytes[..at], &bytes[at..]]);
            assert_eq!(capture.render(), text, "split at {at}");
        }
        // The four bytes of 😀 in four chunks.
        let emoji = text.find('😀').unwrap();
        let chunks: Vec<&[u8]> = vec![
            &bytes[..emoji + 1],
            &bytes[emoji + 1..emoji + 2],
            &bytes[emoji + 2..emoji + 3],
            &bytes[emoji + 3..],
        ];
        assert_eq!(feed_all(&settings, chunks).render(), text);
    }
}

#[test]
fn a_window_edge_inside_a_character_is_trimmed_not_broken() {
    // "ab€cd" is 61 62 E2 82 AC 63 64. The last 4 bytes start inside "€",
    // the first 4 end inside it: either way "€" is not shown at all.
    let capture = feed_all(&settings(Mode::Tail, 4, 0), ["ab€cd".as_bytes()]);
    assert_eq!(capture.bytes_retained(), 4);
    assert_eq!(
        capture.window().render_unredacted(),
        "[stderr truncated: kept last 4 of 7 bytes]\ncd"
    );
    // The margin holds the dropped "ab" and the start of "€": redacted,
    // the same. Without the margin, "cd" is the end of a cut word.
    assert_eq!(capture.render(), capture.window().render_unredacted());
    assert_eq!(
        bare(capture.window()).render(),
        "[stderr truncated: kept last 4 of 7 bytes]\n[cut]"
    );
    let capture = feed_all(&settings(Mode::Head, 4, 0), ["ab€cd".as_bytes()]);
    assert_eq!(
        capture.window().render_unredacted(),
        "[stderr truncated: kept first 4 of 7 bytes]\nab"
    );
    assert_eq!(capture.render(), capture.window().render_unredacted());
    assert_eq!(
        bare(capture.window()).render(),
        "[stderr truncated: kept first 4 of 7 bytes]\n[cut]"
    );
}

#[test]
fn a_one_mebibyte_line_keeps_exactly_the_budget() {
    let line: Vec<u8> = (0..1usize << 20).map(|i| b'a' + (i % 26) as u8).collect();
    let pool = RetentionPool::unlimited();
    let mut capture = StreamCapture::new(CaptureSettings::tail(StreamName::Stderr, 16_384), &pool);
    let _ = capture.feed(&line);
    assert_eq!(capture.bytes_seen(), 1 << 20);
    assert_eq!(capture.bytes_retained(), 16_384);
    // The budget and the margin kept before the window.
    assert_eq!(capture.bytes_reserved(), 16_384 + CUT_MARGIN as u64);
    assert_eq!(pool.in_use(), 16_384 + CUT_MARGIN as u64);
    let (head, tail) = window_parts(&capture.window());
    assert!(head.is_empty());
    assert_eq!(tail.as_slice(), &line[line.len() - 16_384..]);
    let rendered = capture.window().render_unredacted();
    let (first, rest) = rendered.split_once('\n').unwrap();
    assert_eq!(
        first,
        "[stderr truncated: kept last 16384 of 1048576 bytes]"
    );
    assert_eq!(rest.as_bytes(), &line[line.len() - 16_384..]);
    // Redacted, the cut hides the first 2048 bytes of the line from the
    // margin's outer edge (no secret is longer), 1,536 of the window, and
    // shows the rest: the end of a long line stays.
    let hidden = MAX_CUT_HIDDEN - CUT_MARGIN;
    let shown = String::from_utf8(line[line.len() - 16_384 + hidden..].to_vec()).unwrap();
    assert_eq!(capture.render(), format!("{first}\n[cut]{shown}"));
}

#[test]
fn clamped_head_and_tail_fits_every_cap_when_all_four_counts_are_wide() {
    // 300 bytes rendering as 420 (60 invalid bytes become three each). A
    // clamp such as "kept first 33 and last 100 of 300 bytes, 167 omitted"
    // writes more digits than "kept first 300 and last 300 of 300 bytes,
    // 0 omitted": room for the marker must count the omitted figure too.
    let mut input = vec![b'x'; 120];
    input.extend([0xFF; 60]);
    input.extend([b'y'; 120]);
    for (budget, head_bytes) in [(400, 100), (250, 120), (300, 0)] {
        let capture = feed_all(
            &settings(Mode::HeadAndTail, budget, head_bytes),
            [&input[..]],
        );
        for cap in 0..=600 {
            let out = capture.window().render_clamped(cap);
            assert!(
                out.len() <= cap,
                "budget {budget}, head {head_bytes}: {} bytes for a cap of {cap}: {out:?}",
                out.len()
            );
        }
    }
}

// ---------------------------------------------------------------- secrets

/// The sensitive part of every secret below cycles through this alphabet,
/// so any 8 bytes of it in an output is a leak.
const SECRET_CYCLE: &str = "Q7x9K2m4P8z3W6v1";

fn sensitive(n: usize) -> String {
    SECRET_CYCLE.chars().cycle().take(n).collect()
}

/// Secrets as helpers print them, one rule each.
fn secret_texts() -> Vec<String> {
    vec![
        format!("ghp_{}", sensitive(36)),
        format!("password={}", sensitive(20)),
        format!("Authorization: Bearer {}", sensitive(30)),
        format!("https://deploy:{}@git.example.com/x", sensitive(16)),
        format!("{{\"api_key\": \"{}\"}}", sensitive(24)),
        // Quotes inside the value: they close nothing.
        format!("{{\"password\": \"{}'{}\"}}", sensitive(14), sensitive(14)),
        format!(
            "{{\"password\":\"{}\\\"{}\"}}",
            sensitive(14),
            sensitive(14)
        ),
        format!("PGPASSWORD='{}\"{}' psql", sensitive(14), sensitive(14)),
        format!("deploy --token {} --force", sensitive(24)),
        format!("login --password {} now", sensitive(24)),
        format!("mysql -u root -p{} app", sensitive(20)),
        format!("curl -u admin:{} https://api.example", sensitive(20)),
        // After an escape or a colour code, as JSON logs and terminals
        // print them.
        format!("{{\"msg\":\"push failed\\nghp_{}\"}}", sensitive(36)),
        format!("warning: \x1b[1;33mghp_{}\x1b[0m", sensitive(36)),
        format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{}\n{}\n-----END RSA PRIVATE KEY-----",
            sensitive(64),
            sensitive(64)
        ),
        format!(
            "\"-----BEGIN OPENSSH PRIVATE KEY-----\\n{}\\n{}\\n-----END OPENSSH PRIVATE KEY-----\\n\"",
            sensitive(70),
            sensitive(70)
        ),
        // Longer than the margin: a window edge inside them finds their
        // start neither in the window nor in the margin.
        format!(
            "jwt eyJ{}.{}.{} ok",
            sensitive(300),
            sensitive(300),
            sensitive(100)
        ),
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----",
            (0..12)
                .map(|_| sensitive(64))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    ]
}

fn leaks(out: &str) -> Option<String> {
    let cycle = SECRET_CYCLE.repeat(2);
    (0..SECRET_CYCLE.len())
        .map(|i| &cycle[i..i + 8])
        .find(|part| out.contains(part))
        .map(|part| format!("{part:?} leaked in {out:?}"))
}

const SEPARATORS: &[&[u8]] = &[b" ", b"\n", b"\n\n"];

#[derive(Debug, Clone)]
struct SecretCase {
    input: Vec<u8>,
    secrets: usize,
    mode: Mode,
    budget: usize,
    head_bytes: usize,
    cuts: Vec<Index>,
    caps: Vec<usize>,
}

fn secret_case() -> impl Strategy<Value = SecretCase> {
    let piece = prop_oneof![
        2 => text(40).prop_map(|t| (t, false)),
        1 => (0..secret_texts().len()).prop_map(|i| (secret_texts()[i].clone().into_bytes(), true)),
    ];
    (
        vec((piece, select(SEPARATORS)), 1..12),
        mode(),
        1usize..=700,
        0usize..=300,
        vec(any::<Index>(), 0..24),
        vec(0usize..900, 4),
    )
        .prop_map(|(pieces, mode, budget, head_bytes, cuts, caps)| {
            let secrets = pieces.iter().filter(|((_, s), _)| *s).count();
            let mut input = Vec::new();
            for ((bytes, _), sep) in pieces {
                input.extend_from_slice(&bytes);
                input.extend_from_slice(sep);
            }
            SecretCase {
                input,
                secrets,
                mode,
                budget,
                head_bytes,
                cuts,
                caps,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5_000))]

    /// Redaction is a function of the retained bytes: the same for every
    /// chunking, and no window, cut or clamp shows a sensitive part.
    #[test]
    fn redaction_is_identical_for_every_chunking_and_never_leaks(case in secret_case()) {
        let settings = settings(case.mode, case.budget, case.head_bytes);
        let input = &case.input;
        let whole = feed_all(&settings, [input.as_slice()]);
        let chunked = Case {
            input: input.clone(),
            mode: case.mode,
            budget: case.budget,
            head_bytes: case.head_bytes,
            cuts: case.cuts.clone(),
        };
        let random = feed_all(&settings, chunked.chunks());
        let bytewise = feed_all(&settings, input.chunks(1));

        let (rendered, counts) = whole.window().render_with_redactions();
        for capture in [&random, &bytewise] {
            let (text, n) = capture.window().render_with_redactions();
            prop_assert_eq!(&text, &rendered);
            prop_assert_eq!(&n, &counts);
        }
        if let Some(leak) = leaks(&rendered) {
            return Err(TestCaseError::fail(leak));
        }
        for &cap in &case.caps {
            let out = whole.window().render_clamped(cap);
            prop_assert!(out.len() <= cap);
            prop_assert_eq!(&random.window().render_clamped(cap), &out);
            if let Some(leak) = leaks(&out) {
                return Err(TestCaseError::fail(leak));
            }
        }
        if !whole.truncated() {
            // Every secret is found, once, and nothing else is.
            prop_assert_eq!(counts.total(), case.secrets as u64);
            prop_assert_eq!(counts.cut_words(), 0);
        }
    }
}

#[test]
fn a_secret_split_across_chunks_is_redacted_whole() {
    let line = format!("push: Authorization: Bearer {} denied\n", sensitive(30));
    let bytes = line.as_bytes();
    let settings = settings(Mode::Tail, 4096, 0);
    for at in 0..=bytes.len() {
        let capture = feed_all(&settings, [&bytes[..at], &bytes[at..]]);
        let (text, counts) = capture.window().render_with_redactions();
        assert_eq!(
            text, "push: Authorization: Bearer [redacted: bearer-token] denied\n",
            "split at {at}"
        );
        assert_eq!((counts.total(), counts.rule("bearer-token")), (1, 1));
    }
}

#[test]
fn every_cut_edge_hides_what_it_cuts() {
    let token = format!("ghp_{}", sensitive(36));
    let line = format!("ok {token} end\n");
    // Tail: the window starts inside the token.
    let capture = feed_all(&settings(Mode::Tail, line.len() - 8, 0), [line.as_bytes()]);
    assert_eq!(
        bare(capture.window()).render(),
        format!(
            "[stderr truncated: kept last {} of {} bytes]\n[cut] end\n",
            line.len() - 8,
            line.len()
        )
    );
    // Head: the window ends inside the token.
    let capture = feed_all(&settings(Mode::Head, 10, 0), [line.as_bytes()]);
    assert_eq!(
        bare(capture.window()).render(),
        format!(
            "[stderr truncated: kept first 10 of {} bytes]\nok [cut]",
            line.len()
        )
    );
    // Head and tail: both inner edges inside tokens.
    let two = format!("{token} middle words {token}\n");
    let capture = feed_all(&settings(Mode::HeadAndTail, 20, 10), [two.as_bytes()]);
    let (text, counts) = bare(capture.window()).render_with_redactions();
    assert_eq!(
        text,
        format!(
            "[cut]\n[stderr truncated: kept first 10 and last 10 of {} bytes, {} omitted between them]\n[cut]\n",
            two.len(),
            two.len() - 20
        )
    );
    assert_eq!((counts.total(), counts.cut_words()), (0, 2));
    // A key block whose BEGIN line was dropped: redacted from the cut to END.
    let block = format!(
        "-----BEGIN EC PRIVATE KEY-----\n{}\n{}\n-----END EC PRIVATE KEY-----\nbye\n",
        sensitive(64),
        sensitive(20)
    );
    let capture = feed_all(
        &settings(Mode::Tail, block.len() - 40, 0),
        [block.as_bytes()],
    );
    let (text, counts) = bare(capture.window()).render_with_redactions();
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept last {} of {} bytes]\n[redacted: private-key]-----END EC PRIVATE KEY-----\nbye\n",
            block.len() - 40,
            block.len()
        )
    );
    assert_eq!((counts.rule("private-key"), counts.cut_words()), (1, 0));
    // A BEGIN line whose END was dropped: redacted to the cut.
    let capture = feed_all(&settings(Mode::Head, 80, 0), [block.as_bytes()]);
    let (text, counts) = bare(capture.window()).render_with_redactions();
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept first 80 of {} bytes]\n-----BEGIN EC PRIVATE KEY-----[redacted: private-key]",
            block.len()
        )
    );
    assert_eq!(counts.rule("private-key"), 1);
    // The clamp edge: the excerpt keeps the redacted token whole or not at all.
    let mut long = String::new();
    for i in 0..40 {
        long.push_str(&format!("line {i:02} password={}\n", sensitive(20)));
    }
    let capture = feed_all(&settings(Mode::Tail, 4096, 0), [long.as_bytes()]);
    let out = capture.window().render_clamped(120);
    assert_eq!(
        out,
        "[stderr truncated: kept last 38 of 1520 bytes]\nline 39 password=[redacted: password-assignment]\n"
    );
    assert_eq!(
        capture.window().redactions().rule("password-assignment"),
        40
    );
}

/// A window whose start falls inside a character glued to `-p`: the rest
/// of the character is trimmed, and `-p…` is the word the window cut, not
/// a password flag (in the whole line a flag needs a blank before it, and
/// the character stands there). A window that starts at `-p` itself may
/// have cut the blank and `mysql` before it: that one takes the password.
#[test]
fn a_flag_glued_to_a_cut_character_is_a_cut_word() {
    // The case the rendering property found (the regression file's last
    // line): NULs, then two continuation bytes right before `-p`.
    let mut input = vec![0u8; 271];
    // `-p`, then its value up to the blank (in three literals, so that
    // the NUL before `0` reads as two bytes).
    input.extend_from_slice(b"\x80\x80-p");
    input.extend_from_slice(b"\0\x0e\0\0\0*\0??*\0\x0e\x0e\x0e\x0e\0\0\0\0\0\x0e*\0");
    input.extend_from_slice(b"0??0\0\0\0\0 ");
    input.extend_from_slice(&[0; 27]);
    assert_eq!(input.len(), 334);
    let found = settings(Mode::HeadAndTail, 331, 268);
    for chunks in [vec![&input[..]], input.chunks(1).collect()] {
        let capture = feed_all(&found, chunks);
        let (text, counts) = bare(capture.window()).render_with_redactions();
        assert_eq!(
            text,
            format!(
                "{}\n[stderr truncated: kept first 268 and last 63 of 334 bytes, 3 omitted between them]\n[cut] {}",
                "\0".repeat(268),
                "\0".repeat(27)
            )
        );
        assert_eq!((counts.total(), counts.cut_words()), (0, 1));
    }

    // The same in text: "é" is C3 A9; the window keeps its A9.
    let line = "mysql -u root \u{e9}-phunter2 -h db app\n".as_bytes();
    assert_eq!(line.len(), 36);
    let capture = feed_all(&settings(Mode::Tail, 21, 0), [line]);
    let (text, counts) = bare(capture.window()).render_with_redactions();
    assert_eq!(
        text,
        "[stderr truncated: kept last 21 of 36 bytes]\n[cut] -h db app\n"
    );
    assert_eq!((counts.total(), counts.cut_words()), (0, 1));
    // The window starts at `-p`: the byte before it, dropped, may have
    // been the blank after `mysql`.
    let capture = feed_all(&settings(Mode::Tail, 20, 0), [line]);
    let (text, counts) = bare(capture.window()).render_with_redactions();
    assert_eq!(
        text,
        "[stderr truncated: kept last 20 of 36 bytes]\n[redacted: mysql-password] -h db app\n"
    );
    assert_eq!((counts.rule("mysql-password"), counts.cut_words()), (1, 0));
}
