//! Cookie values in `Cookie:` and `Set-Cookie:` headers, as `curl -v`,
//! HTTP client logs and Go's header dumps print them: every `name=value`
//! pair of a `Cookie` header, and the first pair of a `Set-Cookie` header
//! (the rest are its attributes: `Path`, `Expires`, `HttpOnly`, …). A value
//! is taken when it looks like a secret (see [`looks_secret`]), so
//! `theme=dark` and `lang=en` stay.

use super::rules::looks_secret;
use super::{Label, Span};

/// The rule name of a cookie's value.
pub(crate) const RULE: &str = "cookie-value";

/// Pushes a span for every secret cookie value in `hay`.
pub(crate) fn scan(hay: &[u8], spans: &mut Vec<Span>) {
    let mut from = 0;
    while let Some(i) = find_ci(&hay[from..], b"cookie") {
        let at = from + i;
        from = at + b"cookie".len();
        let set = at >= 4 && hay[at - 4..at].eq_ignore_ascii_case(b"set-");
        let name_start = if set { at - 4 } else { at };
        // The header's name stands alone (not `my_cookie`), or right after
        // an escape or a colour (`\nCookie:` in a JSON log line).
        if !super::providers::boundary_before(hay, name_start) {
            continue;
        }
        let Some(values) = header_value(hay, from) else {
            continue;
        };
        pairs(hay, values, set, spans);
    }
}

/// Where the header's value begins, after its name ends at `at`: a
/// closing quote (a JSON key), blanks, `:` and blanks, then maybe an
/// opening quote or a Go map's `[`.
fn header_value(hay: &[u8], mut at: usize) -> Option<usize> {
    if matches!(hay.get(at), Some(b'"' | b'\'')) {
        at += 1;
    }
    while matches!(hay.get(at), Some(b' ' | b'\t')) {
        at += 1;
    }
    if hay.get(at) != Some(&b':') {
        return None;
    }
    at += 1;
    while matches!(hay.get(at), Some(b' ' | b'\t' | b'"' | b'\'' | b'[')) {
        at += 1;
    }
    Some(at)
}

/// The `name=value` pairs from `at` to the end of the header (a line end,
/// a quote, a backslash or a `]`): spans for the secret values, of the
/// first pair only when `first_only`.
fn pairs(hay: &[u8], mut at: usize, first_only: bool, spans: &mut Vec<Span>) {
    let ends_header =
        |b: u8| matches!(b, b'\r' | b'\n' | b'"' | b'\'' | b'\\' | b']' | 0x07 | 0x1b);
    loop {
        while matches!(hay.get(at), Some(b' ' | b'\t')) {
            at += 1;
        }
        let name_start = at;
        while hay
            .get(at)
            .is_some_and(|&b| b != b'=' && b != b';' && !ends_header(b))
        {
            at += 1;
        }
        if hay.get(at) != Some(&b'=') || at == name_start {
            return;
        }
        at += 1;
        let value_start = at;
        while hay
            .get(at)
            .is_some_and(|&b| b != b';' && b != b' ' && !ends_header(b))
        {
            at += 1;
        }
        let value = &hay[value_start..at];
        if looks_secret(value) {
            spans.push(Span {
                start: value_start,
                end: at,
                label: Label::Named(RULE),
            });
        }
        if first_only {
            return;
        }
        // To the next pair, past `;` and blanks; anything else ends it.
        while hay.get(at).is_some_and(|&b| b != b';' && !ends_header(b)) {
            at += 1;
        }
        if hay.get(at) != Some(&b';') {
            return;
        }
        at += 1;
    }
}

/// The first place `needle` (lowercase ASCII) stands in `hay`, ignoring
/// ASCII case.
fn find_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = needle[0];
    let mut from = 0;
    while let Some(i) = memchr::memchr2(first, first.to_ascii_uppercase(), &hay[from..]) {
        let at = from + i;
        if hay.len() - at >= needle.len() && hay[at..at + needle.len()].eq_ignore_ascii_case(needle)
        {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::Redactor;

    fn redact(text: &str) -> (String, u64) {
        let out = Redactor::builtin().redact(text);
        (out.text, out.counts.rule(super::RULE))
    }

    #[test]
    fn every_pair_of_a_cookie_header_and_the_first_of_a_set_cookie() {
        assert_eq!(
            redact("> Cookie: sid=9f8e7d6c5b4a3210aa; theme=dark; csrftoken=Xk2pQ9zLmN4v\r\n"),
            (
                "> Cookie: sid=[redacted: cookie-value]; theme=dark; csrftoken=[redacted: token-assignment]\r\n"
                    .to_owned(),
                1
            )
        );
        assert_eq!(
            redact("< Set-Cookie: __Host-sid=s%3Ah7Gf3Zk9xQw.q2Lm; Path=/; HttpOnly; Expires=Wed, 21 Oct 2026 07:28:00 GMT\n"),
            (
                "< Set-Cookie: __Host-sid=[redacted: cookie-value]; Path=/; HttpOnly; Expires=Wed, 21 Oct 2026 07:28:00 GMT\n"
                    .to_owned(),
                1
            )
        );
        // Go's header dump and a JSON log.
        assert_eq!(
            redact("map[Cookie:[sid=a8F3kL0pQ2wE9x] User-Agent:[curl/8.5.0]]"),
            (
                "map[Cookie:[sid=[redacted: cookie-value]] User-Agent:[curl/8.5.0]]".to_owned(),
                1
            )
        );
        assert_eq!(
            redact(r#"{"headers":{"cookie":"JSESSIONID=A1B2C3D4E5F6A7B8; lang=en"}}"#),
            (
                r#"{"headers":{"cookie":"JSESSIONID=[redacted: credential-assignment]; lang=en"}}"#
                    .to_owned(),
                0
            )
        );
    }

    #[test]
    fn words_and_other_names_are_no_cookie() {
        for plain in [
            "Cookie: theme=dark; lang=en-US\n",
            "cookies: 3 stored\n",
            "my_cookie: sid=9f8e7d6c5b4a3210aa\n",
            "the cookie jar is empty\n",
            "Set-Cookie: \n",
        ] {
            assert_eq!(redact(plain), (plain.to_owned(), 0), "{plain:?}");
        }
    }
}
