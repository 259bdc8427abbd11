//! Provider token formats, found without the rules' regex set.
//!
//! A provider's token has a shape its documentation states: a fixed prefix
//! (`ghp_`, `sk-ant-api03-`, `dckr_pat_`), a body of a given alphabet and
//! length, sometimes fixed separators (`PMAK-…-…`) and a checksum (GitHub's
//! and npm's last six characters are the base62 CRC32 of the rest of the
//! body; an Age or Nostr secret key is Bech32). The formats are a table
//! ([`table::FORMATS`]), one row per shape; a row's *anchor* is its
//! literal (the prefix, or a fixed part in the middle when something comes
//! before it, as Terraform's `.atlasv1.`).
//!
//! The scan finds every anchor with one multi-literal search (an
//! Aho-Corasick automaton over the distinct anchors, built once per
//! process on first use; it holds 65,888 bytes, see the test
//! `the_automaton_stays_small`) and checks each candidate by hand:
//!
//! * a boundary before the token: its start, a byte that is not
//!   `[A-Za-z0-9_-]`, or the end of a JSON or C escape (`\n`, `\"`,
//!   `\u0022`) or of an ANSI CSI sequence (`ESC [31m`, also written
//!   `\u001b[31m`) as in the regex rules;
//! * each run of the body: the longest run of its alphabet, which must be
//!   no shorter than the row's least length and, when a boundary follows,
//!   no longer than its greatest (a longer run is some other text); a run
//!   followed by a fixed separator ends where the separator begins;
//! * a boundary after the token (its end, or a byte that is not
//!   `[A-Za-z0-9_-]`);
//! * the checksum, where the format has one: a token whose checksum is
//!   wrong is not that provider's token.
//!
//! Nothing here is a regex, so the formats add no automaton states to the
//! rules' set: a process that never renders redacted text never builds
//! the automaton.

mod checksum;
mod table;
#[cfg(test)]
mod tests;

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::{Label, Span};
use table::FORMATS;

/// Which bytes a run of a token's body may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// `[A-Za-z0-9]` (base62).
    Alnum,
    /// `[0-9a-f]`.
    Hex,
    /// `[0-9a-fA-F]`.
    HexMixed,
    /// `[A-Z0-9]`.
    Upper,
    /// `[a-z0-9]`.
    Lower,
    /// `[0-9]`.
    Digit,
    /// `[A-Za-z0-9_-]` (base64url).
    Url,
    /// `[A-Za-z0-9_.-]`.
    UrlDot,
    /// `[A-Za-z0-9+/=]` (base64 with padding).
    Base64,
    /// `[A-Za-z0-9+/=_-]` (either base64, padded or not).
    AnyBase64,
    /// `[A-Za-z0-9_~.-]` (Azure AD client secrets).
    Tilde,
    /// `[0-9a-f-]` (a UUID, as a run of 36).
    Uuid,
    /// `[a-z0-9-]` (a host name's label).
    Label,
    /// The 32 characters of Bech32's data part, lower case.
    Bech32,
    /// The 32 characters of Bech32's data part, upper case.
    Bech32Upper,
}

/// Bech32's data characters, by value.
pub(crate) const BECH32: &[u8; 32] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";

impl Class {
    /// Whether `b` belongs to the class.
    pub(crate) fn has(self, b: u8) -> bool {
        match self {
            Class::Alnum => b.is_ascii_alphanumeric(),
            Class::Hex => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
            Class::HexMixed => b.is_ascii_hexdigit(),
            Class::Upper => b.is_ascii_uppercase() || b.is_ascii_digit(),
            Class::Lower => b.is_ascii_lowercase() || b.is_ascii_digit(),
            Class::Digit => b.is_ascii_digit(),
            Class::Url => b.is_ascii_alphanumeric() || b == b'_' || b == b'-',
            Class::UrlDot => b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'),
            Class::Base64 => b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='),
            Class::AnyBase64 => {
                b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-')
            }
            Class::Tilde => b.is_ascii_alphanumeric() || matches!(b, b'_' | b'~' | b'.' | b'-'),
            Class::Uuid => b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b'-',
            Class::Label => b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-',
            Class::Bech32 => BECH32.contains(&b),
            Class::Bech32Upper => {
                BECH32.contains(&b.to_ascii_lowercase()) && !b.is_ascii_lowercase()
            }
        }
    }
}

/// One piece of a token after its anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// A run of `min..=max` bytes of a class.
    Run(Class, u16, u16),
    /// A fixed separator.
    Lit(&'static str),
}

/// A checksum a format carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// None.
    None,
    /// The body's last 6 characters are the CRC32 of the rest of it,
    /// written in base62 (`0-9A-Za-z`), padded with `0` (GitHub, npm).
    Crc32Base62,
    /// The token is Bech32 (BIP 173): the human-readable part is the
    /// anchor without its final `1`, the body its data and checksum.
    Bech32,
}

/// One provider token format.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Format {
    /// The provider, as it names itself.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) provider: &'static str,
    /// The rule name written in `[redacted: NAME]`.
    pub(crate) name: &'static str,
    /// A run that comes before the anchor (`Run` only).
    pub(crate) lead: Option<Part>,
    /// The literal the search finds.
    pub(crate) anchor: &'static str,
    /// What follows the anchor.
    pub(crate) parts: &'static [Part],
    /// The checksum.
    pub(crate) check: Check,
}

/// The automaton over the distinct anchors, and the formats of each.
struct Searcher {
    automaton: AhoCorasick,
    /// The formats (indices into [`FORMATS`]) per anchor pattern id.
    formats: Vec<Vec<usize>>,
    /// The bytes a token of any format may hold (its lead, anchor,
    /// separators and runs).
    token_bytes: [bool; 256],
    /// The fewest bytes a token of any format has.
    shortest: usize,
}

static SEARCHER: LazyLock<Option<Searcher>> = LazyLock::new(build);

fn build() -> Option<Searcher> {
    let mut anchors: Vec<&'static str> = Vec::new();
    let mut formats: Vec<Vec<usize>> = Vec::new();
    for (i, format) in FORMATS.iter().enumerate() {
        match anchors.iter().position(|a| *a == format.anchor) {
            Some(id) => formats[id].push(i),
            None => {
                anchors.push(format.anchor);
                formats.push(vec![i]);
            }
        }
    }
    // A contiguous NFA: a tenth of a DFA's memory for these anchors.
    let automaton = AhoCorasick::builder()
        .kind(Some(AhoCorasickKind::ContiguousNFA))
        .match_kind(MatchKind::Standard)
        .build(&anchors)
        .ok()?;
    let mut token_bytes = [false; 256];
    let mut shortest = usize::MAX;
    for format in FORMATS {
        let mut len = format.anchor.len();
        let mut mark = |part: &Part| match *part {
            Part::Lit(lit) => {
                lit.bytes().for_each(|b| token_bytes[usize::from(b)] = true);
                lit.len()
            }
            Part::Run(class, min, _) => {
                (0..=u8::MAX)
                    .filter(|&b| class.has(b))
                    .for_each(|b| token_bytes[usize::from(b)] = true);
                usize::from(min)
            }
        };
        len += format.lead.as_ref().map_or(0, &mut mark);
        len += format.parts.iter().map(&mut mark).sum::<usize>();
        format
            .anchor
            .bytes()
            .for_each(|b| token_bytes[usize::from(b)] = true);
        shortest = shortest.min(len);
    }
    Some(Searcher {
        automaton,
        formats,
        token_bytes,
        shortest,
    })
}

/// Bytes of the anchor automaton (0 if it could not be built).
#[cfg(test)]
pub(crate) fn automaton_bytes() -> usize {
    SEARCHER.as_ref().map_or(0, |s| s.automaton.memory_usage())
}

/// Every provider token in `hay`, pushed onto `spans` labelled with its
/// rule name (unsorted; two formats that match at one place both push).
pub(crate) fn scan(hay: &[u8], spans: &mut Vec<Span>) {
    let Some(searcher) = SEARCHER.as_ref() else {
        return;
    };
    // A token is one run of the bytes tokens hold: only runs at least as
    // long as the shortest token are searched (most words of ordinary
    // output are shorter), each with the whole text around it for the
    // boundary checks.
    let token = |b: u8| searcher.token_bytes[usize::from(b)];
    let shortest = searcher.shortest.max(1);
    // Every run that starts at or after `i` and is long enough covers
    // `i + shortest - 1`: where that byte is not a token byte, no such run
    // starts before it, and the search skips `shortest` bytes at once.
    let mut i = 0;
    while let Some(&probe) = hay.get(i + shortest - 1) {
        if !token(probe) {
            i += shortest;
            continue;
        }
        let mut start = i + shortest - 1;
        while start > i && token(hay[start - 1]) {
            start -= 1;
        }
        let mut end = i + shortest;
        while end < hay.len() && token(hay[end]) {
            end += 1;
        }
        if end - start >= shortest {
            scan_run(searcher, hay, start, end, spans);
        }
        i = end;
    }
}

/// The tokens whose anchor lies in `hay[from..to]`, one run of token bytes.
fn scan_run(searcher: &Searcher, hay: &[u8], from: usize, to: usize, spans: &mut Vec<Span>) {
    let input = aho_corasick::Input::new(hay).span(from..to);
    let Ok(matches) = searcher.automaton.try_find_overlapping_iter(input) else {
        return;
    };
    for m in matches {
        for &i in &searcher.formats[m.pattern().as_usize()] {
            let format = &FORMATS[i];
            if let Some((start, end)) = format.match_at(hay, m.start()) {
                spans.push(Span {
                    start,
                    end,
                    label: Label::Named(format.name),
                });
            }
        }
    }
}

/// Where the first known token prefix in `word` (a word a window or
/// clamp edge cuts) begins, when what follows it are bytes a token holds
/// up to the word's end: from there on the word may be a token the edge
/// cut, whatever is glued before it (`hhhhsk_live_…`), so the edge hides
/// it. Only prefixes of 4 bytes or more count (`ghp_`, `AKIA`,
/// `sk_live_`; the 2- and 3-byte anchors name too much ordinary text).
pub(crate) fn token_prefix_in(word: &[u8]) -> Option<usize> {
    let searcher = SEARCHER.as_ref()?;
    let token = |b: &u8| searcher.token_bytes[usize::from(*b)];
    let input = aho_corasick::Input::new(word);
    let matches = searcher.automaton.try_find_overlapping_iter(input).ok()?;
    matches
        .filter(|m| m.len() >= 4 && word[m.end()..].iter().all(token))
        .map(|m| m.start())
        .min()
}

/// Whether `b` may be part of a word a token is glued to.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether a token may begin at `hay[at]`: see the module doc.
pub(crate) fn boundary_before(hay: &[u8], at: usize) -> bool {
    let Some(&before) = at.checked_sub(1).and_then(|i| hay.get(i)) else {
        return true;
    };
    if !is_word(before) {
        return true;
    }
    // `\n`, `\t`, `\r`, `\b`, `\f` of a JSON or C string.
    if at >= 2 && hay[at - 2] == b'\\' && matches!(before, b'n' | b't' | b'r' | b'b' | b'f') {
        return true;
    }
    // `\uXXXX`.
    if at >= 6
        && &hay[at - 6..at - 4] == b"\\u"
        && hay[at - 4..at].iter().all(u8::is_ascii_hexdigit)
    {
        return true;
    }
    // The final byte of a CSI sequence: `ESC [ params intermediates final`.
    if (0x40..=0x7e).contains(&before) {
        let floor = at.saturating_sub(64);
        let mut i = at - 1;
        while i > floor && (0x20..=0x2f).contains(&hay[i - 1]) {
            i -= 1;
        }
        while i > floor && (0x30..=0x3f).contains(&hay[i - 1]) {
            i -= 1;
        }
        if i >= 1 && hay[i - 1] == b'[' {
            let open = i - 1;
            if open >= 1 && hay[open - 1] == 0x1b {
                return true;
            }
            if open >= 6 && hay[open - 6..open].eq_ignore_ascii_case(b"\\u001b") {
                return true;
            }
        }
    }
    false
}

/// Whether a token may end at `hay[at]`.
fn boundary_after(hay: &[u8], at: usize) -> bool {
    hay.get(at).is_none_or(|&b| !is_word(b))
}

/// The length of the run of `class` at the start of `bytes`, counted up
/// to `limit`.
fn run_len(bytes: &[u8], class: Class, limit: usize) -> usize {
    bytes
        .iter()
        .take(limit)
        .take_while(|&&b| class.has(b))
        .count()
}

impl Format {
    /// The token of this format whose anchor is at `hay[at]`, as a range.
    pub(crate) fn match_at(&self, hay: &[u8], at: usize) -> Option<(usize, usize)> {
        let start = match self.lead {
            // The lead's run, at most its greatest length: where an escape
            // or a colour ends inside the run (the `n` of `\n`, the `m` of
            // `ESC [31m` are letters), the lead begins after it; else the
            // longest run with a boundary before it.
            Some(Part::Run(class, min, max)) => {
                let n = hay[..at]
                    .iter()
                    .rev()
                    .take(usize::from(max) + 1)
                    .take_while(|&&b| class.has(b))
                    .count();
                let longest = n.min(usize::from(max));
                let starts = (usize::from(min)..=longest).rev().map(|k| at - k);
                starts
                    .clone()
                    .find(|&s| s > 0 && is_word(hay[s - 1]) && boundary_before(hay, s))
                    .or_else(|| starts.clone().find(|&s| boundary_before(hay, s)))?
            }
            _ => at,
        };
        if !boundary_before(hay, start) {
            return None;
        }
        let body = at + self.anchor.len();
        let mut pos = body;
        for (k, part) in self.parts.iter().enumerate() {
            match *part {
                Part::Lit(lit) => {
                    if !hay[pos..].starts_with(lit.as_bytes()) {
                        return None;
                    }
                    pos += lit.len();
                }
                Part::Run(class, min, max) => {
                    let (min, max) = (usize::from(min), usize::from(max));
                    let n = run_len(&hay[pos..], class, max + 1);
                    let separator_next = matches!(self.parts.get(k + 1), Some(Part::Lit(_)));
                    if n < min || (n > max && !separator_next) {
                        return None;
                    }
                    pos += n.min(max);
                }
            }
        }
        if !boundary_after(hay, pos) {
            return None;
        }
        let valid = match self.check {
            Check::None => true,
            Check::Crc32Base62 => checksum::crc32_base62_holds(&hay[body..pos]),
            Check::Bech32 => checksum::bech32_holds(&hay[start..pos]),
        };
        valid.then_some((start, pos))
    }

    /// A token of this format with characters drawn from `random`, each
    /// run's length as `pick` says, and a valid checksum.
    pub(crate) fn sample(&self, random: &mut Random, pick: Pick) -> String {
        let mut out = String::new();
        if let Some(part) = self.lead {
            push_part(part, random, pick, &mut out);
        }
        out.push_str(self.anchor);
        let body = out.len();
        for &part in self.parts {
            push_part(part, random, pick, &mut out);
        }
        match self.check {
            Check::None => {}
            Check::Crc32Base62 => {
                out.truncate(out.len() - 6);
                let sum = checksum::crc32_base62(&out.as_bytes()[body..]);
                out.push_str(&sum);
            }
            Check::Bech32 => {
                out.truncate(out.len() - 6);
                let sum = checksum::bech32_checksum(out.as_bytes());
                out.push_str(&sum);
            }
        }
        out
    }
}

/// The bytes of a class, in ASCII order.
pub(crate) fn alphabet(class: Class) -> Vec<u8> {
    (0x21..0x7f_u8).filter(|&b| class.has(b)).collect()
}

/// How a sample's runs are as long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pick {
    /// Any length the format allows.
    Random,
    /// The least (for tests).
    #[cfg_attr(not(test), allow(dead_code))]
    Least,
    /// The greatest (for tests).
    #[cfg_attr(not(test), allow(dead_code))]
    Most,
}

fn push_part(part: Part, random: &mut Random, pick: Pick, out: &mut String) {
    match part {
        Part::Lit(lit) => out.push_str(lit),
        Part::Run(class, min, max) => {
            let len = match pick {
                Pick::Random => {
                    let span = u64::from(max - min) + 1;
                    usize::from(min) + (random.next() % span) as usize
                }
                Pick::Least => usize::from(min),
                Pick::Most => usize::from(max),
            };
            let chars = alphabet(class);
            for _ in 0..len {
                let i = (random.next() % chars.len() as u64) as usize;
                out.push(char::from(chars[i]));
            }
        }
    }
}

/// A small deterministic generator (SplitMix64).
pub(crate) struct Random(pub(crate) u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// For every provider token format, one token of that shape (a random
/// body from a generator seeded by `seed`, its checksum valid where the
/// format has one), paired with the rule name that redacts it. For the
/// recall corpus and tests: every format of the table is covered.
#[doc(hidden)]
pub fn provider_samples(seed: u64) -> Vec<(&'static str, String)> {
    let mut random = Random(seed);
    FORMATS
        .iter()
        .map(|format| (format.name, format.sample(&mut random, Pick::Random)))
        .collect()
}

/// The provider rule names, in table order, each once.
pub(crate) fn rule_names() -> impl Iterator<Item = &'static str> {
    FORMATS
        .iter()
        .enumerate()
        .filter(|(i, f)| !FORMATS[..*i].iter().any(|g| g.name == f.name))
        .map(|(_, f)| f.name)
}
