//! Secrets whose place a line layout gives, which a regex cannot follow:
//!
//! * a YAML block scalar or folded value under a credential key
//!   (`password: |` then indented lines): the block runs while its lines
//!   keep the first line's indentation (`yaml-block-secret`);
//! * a TOML multi-line string after a credential key (`password = """…"""`,
//!   `'''…'''`), on one line or several (`toml-multiline-secret`);
//! * a `.pgpass` line, `host:port:database:user:password` with a port or
//!   `*` (`pgpass-line`).
//!
//! Lines end at `\n` or, inside a JSON string, at a `\n` escape, so a
//! config file printed into a JSON log line is read the same way. A value
//! is taken when it looks like a secret ([`looks_secret_quoted`] for a
//! block or a string, [`looks_secret`] for a `.pgpass` field).

use memchr::memchr_iter;

use super::rules::{looks_secret, looks_secret_quoted};
use super::{Label, Span};

/// The rule name of a YAML block scalar under a credential key.
pub(crate) const YAML_BLOCK: &str = "yaml-block-secret";
/// The rule name of a TOML multi-line string after a credential key.
pub(crate) const TOML_MULTILINE: &str = "toml-multiline-secret";
/// The rule name of a `.pgpass` line's password.
pub(crate) const PGPASS: &str = "pgpass-line";
/// Every rule name of this scanner.
pub(crate) const RULE_NAMES: [&str; 3] = [YAML_BLOCK, TOML_MULTILINE, PGPASS];

/// The longest key or `.pgpass` field read, in bytes: a longer run is no
/// key, and the scan stays linear in the text.
const MAX_FIELD: usize = 256;

/// Words a key holds when its value is a credential.
const CREDENTIAL_WORDS: &[&[u8]] = &[
    b"password",
    b"passwd",
    b"passphrase",
    b"secret",
    b"token",
    b"apikey",
    b"api_key",
    b"api-key",
    b"private_key",
    b"private-key",
    b"privatekey",
    b"credential",
];

/// Pushes a span for every secret of the three layouts in `hay`.
pub(crate) fn scan(hay: &[u8], spans: &mut Vec<Span>) {
    for at in memchr::memchr2_iter(b'|', b'>', hay) {
        yaml_block(hay, at, spans);
    }
    for delimiter in [&b"\"\"\""[..], b"'''", b"\\\"\\\"\\\""] {
        for at in memchr::memmem::find_iter(hay, delimiter) {
            toml_string(hay, at, delimiter, spans);
        }
    }
    for at in memchr_iter(b':', hay) {
        pgpass(hay, at, spans);
    }
}

/// Whether `key` names a credential.
fn is_credential_key(key: &[u8]) -> bool {
    CREDENTIAL_WORDS
        .iter()
        .any(|w| key.windows(w.len()).any(|k| k.eq_ignore_ascii_case(w)))
}

/// The key that ends right before `end` (its quotes and blanks skipped):
/// `[A-Za-z0-9_.-]` bytes, at a word's start.
fn key_before(hay: &[u8], mut end: usize) -> Option<&[u8]> {
    let floor = end.saturating_sub(MAX_FIELD);
    while end > 0 && matches!(hay[end - 1], b' ' | b'\t') {
        end -= 1;
    }
    if end > 0 && matches!(hay[end - 1], b'"' | b'\'') {
        end -= 1;
        if end > 0 && hay[end - 1] == b'\\' {
            end -= 1;
        }
    }
    let start = hay[floor.min(end)..end]
        .iter()
        .rposition(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')))
        .map_or(floor, |i| floor + i + 1);
    (start < end && (start > floor || floor == 0)).then(|| &hay[start..end])
}

/// The length of the line break at `at`: `\n`, `\r\n`, or a JSON `\n`
/// escape (`\r\n` escaped too); 0 if there is none.
fn line_break(hay: &[u8], at: usize) -> usize {
    match &hay[at.min(hay.len())..] {
        [b'\n', ..] => 1,
        [b'\r', b'\n', ..] => 2,
        [b'\\', b'r', b'\\', b'n', ..] => 4,
        [b'\\', b'n', ..] => 2,
        _ => 0,
    }
}

/// Where the line that holds `at` ends: before its line break, a quote
/// that closes a JSON string, or the end of `hay`.
fn line_end(hay: &[u8], at: usize) -> usize {
    let mut i = at;
    while i < hay.len() {
        if line_break(hay, i) > 0 || (hay[i] == b'"' && i > 0 && hay[i - 1] != b'\\') {
            return i;
        }
        i += 1;
    }
    hay.len()
}

/// A block scalar indicator at `at` (`|` or `>`, then `+`, `-` or a digit)
/// after `KEY:`, alone on its line: the block's lines follow.
fn yaml_block(hay: &[u8], at: usize, spans: &mut Vec<Span>) {
    // `KEY: |` — a colon, blanks, the indicator.
    let mut before = at;
    while before > 0 && matches!(hay[before - 1], b' ' | b'\t') {
        before -= 1;
    }
    if before == at || before == 0 || hay[before - 1] != b':' {
        return;
    }
    let Some(key) = key_before(hay, before - 1) else {
        return;
    };
    if !is_credential_key(key) {
        return;
    }
    let mut i = at + 1;
    while i < hay.len() && matches!(hay[i], b'+' | b'-' | b'1'..=b'9') {
        i += 1;
    }
    while i < hay.len() && matches!(hay[i], b' ' | b'\t') {
        i += 1;
    }
    let brk = line_break(hay, i);
    if brk == 0 {
        return;
    }
    // The block: lines indented at least as its first line.
    let mut line = i + brk;
    let mut indent = None;
    let (mut start, mut end) = (None, line);
    while line < hay.len() {
        let blanks = hay[line..]
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        let content = line + blanks;
        let stop = line_end(hay, content);
        if stop == content {
            // An empty line belongs to the block; the text's end ends it.
            let brk = line_break(hay, stop);
            if brk == 0 {
                break;
            }
            line = stop + brk;
            continue;
        }
        match indent {
            None if blanks == 0 => return,
            None => indent = Some(blanks),
            Some(n) if blanks < n => break,
            Some(_) => {}
        }
        start.get_or_insert(content);
        end = stop;
        let brk = line_break(hay, stop);
        if brk == 0 {
            break;
        }
        line = stop + brk;
    }
    let Some(start) = start else { return };
    // A colour that ends the line is not part of the value.
    let end = hay[start..end]
        .iter()
        .position(|&b| b == 0x1b)
        .map_or(end, |i| start + i);
    if looks_secret_quoted(&hay[start..end]) {
        spans.push(Span {
            start,
            end,
            label: Label::Named(YAML_BLOCK),
        });
    }
}

/// A multi-line string's opening delimiter at `at` (`"""` or `'''`, maybe
/// with JSON-escaped quotes) after `KEY =`: its body, to the closing one.
fn toml_string(hay: &[u8], at: usize, delimiter: &[u8], spans: &mut Vec<Span>) {
    let mut before = at;
    while before > 0 && matches!(hay[before - 1], b' ' | b'\t') {
        before -= 1;
    }
    if before == 0 || hay[before - 1] != b'=' {
        return;
    }
    let Some(key) = key_before(hay, before - 1) else {
        return;
    };
    if !is_credential_key(key) {
        return;
    }
    let mut start = at + delimiter.len();
    start += line_break(hay, start);
    let Some(close) = memchr::memmem::find(&hay[start..], delimiter) else {
        return;
    };
    let mut end = start + close;
    // A final line break before the delimiter is not part of the value.
    loop {
        if end > start && matches!(hay[end - 1], b'\n' | b'\r') {
            end -= 1;
        } else if end >= start + 2 && matches!(&hay[end - 2..end], b"\\n" | b"\\r") {
            end -= 2;
        } else {
            break;
        }
    }
    if looks_secret_quoted(&hay[start..end]) {
        spans.push(Span {
            start,
            end,
            label: Label::Named(TOML_MULTILINE),
        });
    }
}

/// A `.pgpass` line whose first `:` is at `at`: `host:port:db:user:pw`,
/// the port digits or `*`, then a line's end, a blank, a quote or a
/// colour.
fn pgpass(hay: &[u8], at: usize, spans: &mut Vec<Span>) {
    // Most colons are no `.pgpass` line's: the port (digits or `*`) must
    // follow at once, checked before anything else.
    if !hay
        .get(at + 1)
        .is_some_and(|&b| b.is_ascii_digit() || b == b'*')
    {
        return;
    }
    let field = |b: u8| {
        !(b.is_ascii_whitespace() || matches!(b, b':' | b'"' | b'\'' | b'\\' | 0x07 | 0x1b))
    };
    let mut fields = [(0, 0); 4];
    let mut i = at + 1;
    for (n, slot) in fields.iter_mut().enumerate() {
        let start = i;
        while i < hay.len() && field(hay[i]) && i - start < MAX_FIELD {
            i += 1;
        }
        *slot = (start, i);
        if i == start || i - start == MAX_FIELD {
            return;
        }
        if n < 3 {
            if hay.get(i) != Some(&b':') {
                return;
            }
            i += 1;
        }
    }
    if hay.get(i) == Some(&b':') {
        return;
    }
    let port = &hay[fields[0].0..fields[0].1];
    if !(port == b"*" || (port.len() <= 5 && port.iter().all(u8::is_ascii_digit))) {
        return;
    }
    // The host is a name, an address or `*`, standing alone: not the end
    // of a path (`/etc/passwd:root:x:…`, except after a JSON `\/`), nor
    // of a longer field; or right after an escape or a colour.
    let host_byte =
        |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'*' | b'[' | b']');
    let floor = at.saturating_sub(MAX_FIELD);
    let run = hay[floor..at]
        .iter()
        .rposition(|&b| !host_byte(b))
        .map_or(floor, |i| floor + i + 1);
    if run == at || (run == floor && floor > 0) {
        return;
    }
    let alone = match run.checked_sub(1).map(|i| hay[i]) {
        None => true,
        Some(b'/') => run >= 2 && hay[run - 2] == b'\\',
        Some(b) => !field(b),
    };
    let after_sequence = || (run + 1..at).any(|p| super::providers::boundary_before(hay, p));
    if !alone && !after_sequence() {
        return;
    }
    let (start, end) = fields[3];
    if looks_secret(&hay[start..end]) {
        spans.push(Span {
            start,
            end,
            label: Label::Named(PGPASS),
        });
    }
}
