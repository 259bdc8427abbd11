//! The built-in rules: one named pattern per well-known secret shape.
//!
//! Patterns are matched on raw bytes, ASCII only (`\s`, `\w`, `\b` and
//! `(?i)` are their ASCII forms). Where a pattern has capture groups, the
//! first group that took part in the match is the secret and the rest of
//! the match is kept as context (`Authorization: Bearer ` stays, the token
//! goes); a pattern without groups is a secret as a whole.
//!
//! Order matters where two rules could match at the same place: the rule
//! listed first wins (the bearer rule before the generic `Authorization`
//! header rule, Anthropic keys before OpenAI keys).
//!
//! What keeps secrets found and ordinary text visible:
//!
//! * A rule that begins at a word boundary or before a flag (`start!`,
//!   `flag_start!`, as most do) may also begin right after a JSON or C
//!   escape or an ANSI CSI/OSC sequence, which `boundary_len` skips, so a
//!   secret glued to `\n`, `\"` or a colour code is still found.
//! * A bare value after a credential key is taken only if `looks_secret`:
//!   no blank, shell syntax or placeholder, not a word or a path, at least
//!   `MIN_SECRET_BYTES` (6) bytes and `MIN_SECRET_ENTROPY` (2.0) bits per
//!   byte. This is what keeps `password=expired` and `$TOKEN` visible.
//! * A quoted value after a credential key is taken whatever it holds,
//!   blanks and shell syntax included, unless `looks_secret_quoted` finds a
//!   placeholder, a reference, a word, an identifier or prose, or it is
//!   shorter than `MIN_QUOTED_SECRET_BYTES` (4).

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind};

/// One built-in rule.
pub(crate) struct BuiltinRule {
    /// The name written in the replacement, `[redacted: NAME]`.
    pub(crate) name: &'static str,
    /// The pattern.
    pub(crate) pattern: &'static str,
    /// Words of which every match holds at least one: the anchor gate
    /// ([`may_match`]) runs the rules only on a text that holds one. An
    /// anchor is matched in any case unless it has an uppercase letter
    /// (Twilio's `AC` and `SK`, which folded are in most words).
    pub(crate) anchors: &'static [&'static str],
    /// Where the secret lies in a match: the pattern's first group that
    /// took part, found by a scan of the match instead of a second regex
    /// search (the per-rule tests check both agree on every shape).
    pub(crate) secret: Secret,
}

/// Where the secret lies in a match of a built-in rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Secret {
    /// The whole match.
    Whole,
    /// What follows the first `:` or `=` (and `=>`), blanks and an opening
    /// quote; inside the quotes when quoted. An unquoted `null`, `true` or
    /// `false`, or one that opens a JSON object or array, is no secret
    /// (`"next_token": null`, `"has_password": false`); a number is taken
    /// without the brackets that close the JSON after it. A bare value
    /// keeps its `;` (INI, TOML, YAML), except after a shell's `KEY=` with
    /// no blank before the `=`, where the `;` ends it (the pattern's group
    /// runs on over it).
    Value,
    /// The match's last blank-separated word, a header's credential
    /// (`Authorization: Bearer TOKEN`, `authorization=TOKEN`): after a
    /// known scheme (`Bearer`, `Basic`, `token`, …) it is taken if
    /// [`plausible`]; alone or after another word it must look like a
    /// secret ([`looks_secret`]), so `Authorization: required` and
    /// `Bearer authentication required` stay.
    HeaderToken,
    /// The credentials of a URL's userinfo (everything between `://` and
    /// the last `@` before the host): the password after the first `:`
    /// (any character), or a user that is token-shaped.
    UrlCredentials,
    /// The text of an XML element (`<Password>…</Password>`), taken as a
    /// quoted value ([`looks_secret_quoted`]).
    ElementText,
    /// The last word of the match, a program's password argument
    /// (`sshpass -p SECRET`, `.netrc`'s `password SECRET`): inside its
    /// quotes when quoted.
    NextWord,
    /// The path after `https://hooks.slack.com/services/`.
    SlackPath,
    /// The body between a key block's armour lines.
    KeyBody,
    /// A flag's value, at the end of the match (inside its quotes, when
    /// quoted); taken unless it is a placeholder or shell syntax
    /// ([`plausible`], blanks allowed).
    FlagValue,
    /// What follows the last `-p` of the match (`mysql -pSECRET`), if
    /// [`plausible`].
    DashP,
    /// The password of the `user:password` word that ends the match, if
    /// [`plausible`].
    UserPassword,
    /// The value that ends the match, after a key, a keyword or an option
    /// that names a credential: inside its quotes when quoted, and taken
    /// if [`looks_secret_quoted`]; bare, if [`looks_secret`].
    LastValue,
    /// The password of a data source name, before its last `@`: after the
    /// first `:` of `user:password@tcp(…)`, or after the `/` of Oracle's
    /// `user/password@db`; taken unless a placeholder or a reference.
    DsnPassword,
}

impl Secret {
    /// The secret's range within `m`, a whole match of the rule.
    pub(crate) fn find(self, m: &[u8]) -> (usize, usize) {
        let len = m.len();
        let blank = |b: &u8| *b == b' ' || *b == b'\t';
        match self {
            Secret::Whole => (0, len),
            Secret::Value => {
                let Some(sep) = m.iter().position(|&b| b == b':' || b == b'=') else {
                    return (0, len);
                };
                let mut start = sep + 1;
                if m.get(start) == Some(&b'>') {
                    start += 1;
                }
                while m.get(start).is_some_and(blank) {
                    start += 1;
                }
                let quoted_key = sep > 0 && matches!(m[sep - 1], b'"' | b'\'');
                // `;` and `#` are a value's own characters in INI, TOML and
                // YAML (`password = nXP;yV3l#OnHb`, `key: a;b`); only a
                // shell's `KEY=value;cmd`, `=` with no blank before it,
                // ends the value there.
                let shell = m[sep] == b'=' && sep > 0 && !matches!(m[sep - 1], b' ' | b'\t');
                let (from, to, quoted) = match m.get(start) {
                    Some(&q @ (b'"' | b'\'')) if len > start + 1 && m[len - 1] == q => {
                        (start + 1, len - 1, true)
                    }
                    Some(b'\\')
                        if m[start..].starts_with(b"\\\"")
                            && len >= start + 4
                            && m.ends_with(b"\\\"") =>
                    {
                        (start + 2, len - 2, true)
                    }
                    // A Go map's value: `Password:[p$ss]`.
                    Some(b'[') if !quoted_key && start == sep + 1 && m[len - 1] == b']' => {
                        (start + 1, len - 1, true)
                    }
                    Some(b'{' | b'[') => (start, start, false),
                    _ if is_literal(&m[start..]) => (start, start, false),
                    _ => {
                        let to = number_len(&m[start..]).map_or(len, |n| start + n);
                        let to = match shell {
                            true => m[start..to]
                                .iter()
                                .position(|&b| b == b';')
                                .map_or(to, |i| start + i),
                            false => to,
                        };
                        (start, to, false)
                    }
                };
                // A bracket that closes around a bare value is not part of
                // it: `[--token=abc123]`.
                let to = match quoted {
                    true => to,
                    false => from + without_unopened_closers(&m[from..to]).len(),
                };
                let secret = match quoted {
                    true => looks_secret_quoted(&m[from..to]),
                    false if shell => looks_secret(&m[from..to]),
                    false => looks_secret_allowing(&m[from..to], b";"),
                };
                if secret { (from, to) } else { (from, from) }
            }
            Secret::FlagValue => {
                let (from, to) = match m.last() {
                    Some(&q @ (b'"' | b'\'')) => quoted_at_end(m, q),
                    _ => {
                        // After the flag's name and its `=` or blanks.
                        let name = find(m, b"--").unwrap_or(0);
                        let mut from = m[name..]
                            .iter()
                            .position(|&b| b == b'=' || b == b' ' || b == b'\t')
                            .map_or(len, |i| name + i + 1);
                        while m.get(from).is_some_and(|&b| b == b' ' || b == b'\t') {
                            from += 1;
                        }
                        (from.min(len), len)
                    }
                };
                // A flag's position says it is the credential: inside its
                // quotes any character is part of it; a bare one must be
                // plausible.
                let quoted = matches!(m.last(), Some(b'"' | b'\''));
                // A bare value that begins with `-` is the next flag
                // (`--no-password --verbose`); a word, an identifier or a
                // `key=value` spec is what help texts and resource names
                // put there (`--password string`, `--secret=my-secret`,
                // `--secret id=npmrc,src=.npmrc`).
                let secret = match quoted {
                    true => takes(&m[from..to], true),
                    false => {
                        let value = &m[from..to];
                        m.get(from) != Some(&b'-')
                            && takes(value, false)
                            && !is_word(value)
                            && !is_identifier(value)
                            && !is_spec(value)
                    }
                };
                if secret { (from, to) } else { (from, from) }
            }
            Secret::DashP => {
                let from = m
                    .windows(2)
                    .rposition(|w| w == b"-p")
                    .map_or(len, |i| i + 2);
                let to = if m.last() == Some(&b'\'') {
                    len - 1
                } else {
                    len
                };
                let from = from.min(to);
                if takes(&m[from..to], to < len) {
                    (from, to)
                } else {
                    (from, from)
                }
            }
            Secret::UserPassword => {
                let (word, to) = if m.last() == Some(&b'\'') {
                    let open = m[..len - 1].iter().rposition(|&b| b == b'\'');
                    (open.map_or(len, |i| i + 1), len - 1)
                } else {
                    let word = m
                        .iter()
                        .rposition(|&b| matches!(b, b'=' | b'"') || b.is_ascii_whitespace())
                        .map_or(0, |i| i + 1);
                    (word, len)
                };
                let from = m[word.min(to)..to]
                    .iter()
                    .position(|&b| b == b':')
                    .map_or(to, |i| word + i + 1);
                if takes(&m[from..to], to < len) {
                    (from, to)
                } else {
                    (from, from)
                }
            }
            Secret::LastValue => {
                let (from, to, quoted) = match m.last() {
                    // A SQL literal doubles a quote inside it: `'a''b'`.
                    Some(b'\'') => {
                        let close = len - 1;
                        let mut open = close;
                        while let Some(i) = m[..open].iter().rposition(|&b| b == b'\'') {
                            match i > 0 && m[i - 1] == b'\'' {
                                true => open = i - 1,
                                false => {
                                    open = i;
                                    break;
                                }
                            }
                        }
                        (open + 1, close.max(open + 1), true)
                    }
                    Some(&q @ b'"') => {
                        let (from, to) = quoted_at_end(m, q);
                        (from, to, true)
                    }
                    _ => (
                        m.iter()
                            .rposition(|&b| b.is_ascii_whitespace() || b == b'%')
                            .map_or(0, |i| i + 1),
                        len,
                        false,
                    ),
                };
                let secret = match quoted {
                    true => looks_secret_quoted(&m[from..to]),
                    false => looks_secret(&m[from..to]),
                };
                if secret { (from, to) } else { (from, from) }
            }
            Secret::DsnPassword => {
                let at = m.iter().rposition(|&b| b == b'@').unwrap_or(len);
                let oracle =
                    m[..at].iter().any(|b| b.is_ascii_whitespace()) || m.starts_with(b"jdbc:");
                // After a scheme's `://`, if any (`mysql://app:pw@tcp(…)`).
                let user = find(&m[..at], b"://").map_or(0, |i| i + 3);
                let sep = match oracle {
                    true => m[..at].iter().rposition(|&b| b == b'/'),
                    false => m[user..at]
                        .iter()
                        .position(|&b| b == b':')
                        .map(|i| user + i),
                };
                let from = sep.map_or(at, |i| i + 1).min(at);
                if takes(&m[from..at], true) {
                    (from, at)
                } else {
                    (from, from)
                }
            }
            Secret::HeaderToken => {
                // After the last blank, or a blank written `%20` in a URL.
                let from = m.iter().rposition(blank).map_or(0, |i| i + 1);
                let from = m
                    .windows(3)
                    .rposition(|w| w == b"%20")
                    .map_or(from, |i| from.max(i + 3));
                let token = &m[from..];
                let before = m[..from].trim_ascii_end();
                let scheme = &before[before
                    .iter()
                    .rposition(|&b| !is_scheme_byte(b))
                    .map_or(0, |i| i + 1)..];
                // After a header's name and a known scheme; a bare
                // `Bearer X` has no header name before it.
                let keyed = before.len() > scheme.len();
                let known = keyed && is_known_scheme(scheme);
                let secret = match known {
                    true => plausible(token, false),
                    false => looks_secret(token),
                };
                if secret { (from, len) } else { (from, from) }
            }
            Secret::UrlCredentials => {
                let after_scheme = find(m, b"://").map_or(0, |i| i + 3);
                let at = m.iter().rposition(|&b| b == b'@').unwrap_or(len);
                let userinfo = &m[after_scheme..at.max(after_scheme)];
                match userinfo.iter().position(|&b| b == b':') {
                    Some(colon) => {
                        let from = after_scheme + colon + 1;
                        let password = &m[from..at];
                        // `host:8443/path@x`: a port and a path, no password.
                        let port_path =
                            password
                                .iter()
                                .position(|&b| b == b'/')
                                .is_some_and(|slash| {
                                    slash > 0 && password[..slash].iter().all(u8::is_ascii_digit)
                                });
                        let secret = !port_path
                            && !password.is_empty()
                            && !is_placeholder(password)
                            && !is_reference(password);
                        if secret { (from, at) } else { (from, from) }
                    }
                    None if is_token_user(userinfo) => (after_scheme, at),
                    None => (after_scheme, after_scheme),
                }
            }
            Secret::ElementText => {
                let from = m.iter().position(|&b| b == b'>').map_or(len, |i| i + 1);
                let to = len.saturating_sub(2).max(from);
                if looks_secret_quoted(&m[from..to]) {
                    (from, to)
                } else {
                    (from, from)
                }
            }
            Secret::NextWord => {
                let (from, to, quoted) = match m.last() {
                    Some(&q @ (b'"' | b'\'')) => {
                        let (from, to) = quoted_at_end(m, q);
                        (from, to, true)
                    }
                    _ => {
                        let word = m
                            .iter()
                            .rposition(|b| b.is_ascii_whitespace())
                            .map_or(0, |i| i + 1);
                        // Samba's `-U user%PASSWORD`, openssl's `pass:PASSWORD`:
                        // the password follows the first `%` or the `pass:`.
                        let before = m[..word].trim_ascii_end();
                        let samba = before.ends_with(b"-U")
                            || m[word..].starts_with(b"--user")
                            || m[word..].starts_with(b"-U");
                        let from = match m[word..].iter().position(|&b| b == b'%') {
                            Some(i) if samba => word + i + 1,
                            _ if m[word..].starts_with(b"pass:") => word + 5,
                            _ => word,
                        };
                        (from, len, false)
                    }
                };
                if takes(&m[from..to], quoted) {
                    (from, to)
                } else {
                    (from, from)
                }
            }
            Secret::SlackPath => {
                let start = m
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'/')
                    .nth(3)
                    .map_or(0, |(i, _)| i + 1);
                (start, len)
            }
            Secret::KeyBody => {
                let start = find(&m[5..], b"-----").map_or(len, |i| i + 10);
                let end = find(&m[start.min(len)..], b"-----END ").map_or(len, |i| start + i);
                let start = start.min(end);
                // A body with no run of base64 is a placeholder, as docs
                // print one: `... (private key in base64 encoding) ...`.
                let base64 = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
                let run = m[start..end]
                    .split(|b| !base64(b))
                    .any(|run| run.len() >= MIN_KEY_BODY_RUN);
                if run || end == len {
                    (start, end)
                } else {
                    (start, start)
                }
            }
        }
    }
}

/// The inside of the quoted value that ends `m` with the quote `q`
/// (`'…'`, `"…"`, or `\"…\"` inside a JSON string), or an empty range at
/// the end when there is no opening quote.
fn quoted_at_end(m: &[u8], q: u8) -> (usize, usize) {
    let len = m.len();
    let escaped = q == b'"' && len >= 2 && m[len - 2] == b'\\';
    let close = if escaped { len - 2 } else { len - 1 };
    let open = m[..close].iter().rposition(|&b| b == q);
    open.map_or((len, len), |open| (open + 1, close))
}

/// Whether an argument in a credential's place is taken as the secret:
/// when `quoted`, any text but a placeholder or a reference (`'p$ss'` is
/// a password, `"$PASS"` a variable); bare, it must be [`plausible`].
fn takes(value: &[u8], quoted: bool) -> bool {
    match quoted {
        true => !is_placeholder(value) && !is_reference(value),
        false => plausible(value, false),
    }
}

/// A byte of an authorization scheme's name.
fn is_scheme_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// The authorization schemes whose next word is the credential.
pub(crate) fn is_known_scheme(scheme: &[u8]) -> bool {
    const SCHEMES: &[&[u8]] = &[
        b"bearer",
        b"basic",
        b"token",
        b"digest",
        b"negotiate",
        b"ntlm",
        b"apikey",
        b"api-key",
        b"key",
        b"sso-key",
        b"ssws",
        b"splunk",
        b"oauth",
        b"mac",
        b"hawk",
        b"aws4-hmac-sha256",
        b"dpop",
        b"klaviyo-api-key",
        b"gitlab-ci-token",
    ];
    SCHEMES.iter().any(|s| scheme.eq_ignore_ascii_case(s))
}

/// A URL's user that is a token, not a name: 16 or more characters of
/// `[A-Za-z0-9_-]` with letters and digits, that looks like a secret.
fn is_token_user(user: &[u8]) -> bool {
    user.len() >= 16
        && user
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && user.iter().any(u8::is_ascii_digit)
        && user.iter().any(u8::is_ascii_alphabetic)
        && looks_secret(user)
}

/// An unquoted value without the brackets that close the JSON after it
/// (`123}]` is `123`), and how many there were.
fn without_closers(value: &[u8]) -> (&[u8], usize) {
    let closers = value
        .iter()
        .rev()
        .take_while(|b| matches!(b, b'}' | b']'))
        .count();
    (&value[..value.len() - closers], closers)
}

/// The length of an unquoted value that is a number followed only by the
/// brackets that close the JSON around it (`123}]`): the number alone.
fn number_len(value: &[u8]) -> Option<usize> {
    let (number, closers) = without_closers(value);
    (closers > 0
        && number.first().is_some_and(u8::is_ascii_digit)
        && number
            .iter()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E')))
    .then_some(number.len())
}

/// Whether an unquoted value is a JSON (or YAML) literal, never a secret
/// (with the brackets that close the JSON after it).
fn is_literal(value: &[u8]) -> bool {
    let (value, _) = without_closers(value);
    [&b"null"[..], b"true", b"false"]
        .iter()
        .any(|literal| value.eq_ignore_ascii_case(literal))
}

/// The shortest run of base64 a private key block's body must hold to be
/// a key (a line of a real body holds 64).
const MIN_KEY_BODY_RUN: usize = 16;

/// The shortest value an assignment rule takes as a secret.
pub(crate) const MIN_SECRET_BYTES: usize = 6;

/// The shortest quoted value an assignment rule takes as a secret: the
/// quotes say where it begins and ends, so a short one is taken too.
pub(crate) const MIN_QUOTED_SECRET_BYTES: usize = 4;

/// The least Shannon entropy, in bits per byte over the value's own byte
/// frequencies, of a value an assignment rule takes as a secret: `hunter2`
/// has 2.81, `abc123` 2.58, `aaaa1111` 1.0.
pub(crate) const MIN_SECRET_ENTROPY: f64 = 2.0;

/// Whether a bare value after a credential key (`password=`, `token: `,
/// `X-Api-Key:`) looks like a secret, so that ordinary words and shell
/// syntax are never hidden:
///
/// * it is [`plausible`] (no blank, no shell or expansion syntax, not a
///   placeholder);
/// * it is not a word: letters only with no change of case after the first
///   (`expired`, `Permission`, `INVALID`; `hUnTeR` is no word);
/// * it is not a path (`/home/user`, `./certs/key.pem`: where a secret is
///   kept, not the secret), and opens no bracket it does not close (code:
///   `config['server']`, cut at its quote);
/// * it has at least [`MIN_SECRET_BYTES`] bytes and at least
///   [`MIN_SECRET_ENTROPY`] bits of entropy per byte.
pub(crate) fn looks_secret(value: &[u8]) -> bool {
    looks_secret_allowing(value, b"")
}

/// [`looks_secret`], where the bytes of `allowed` are no shell syntax
/// (`;` inside an INI or YAML value).
pub(crate) fn looks_secret_allowing(value: &[u8], allowed: &[u8]) -> bool {
    let syntax_free: Vec<u8>;
    let checked = match value.iter().any(|b| allowed.contains(b)) {
        true => {
            syntax_free = value
                .iter()
                .map(|&b| if allowed.contains(&b) { b'.' } else { b })
                .collect();
            &syntax_free[..]
        }
        false => value,
    };
    let unclosed_bracket =
        value.iter().filter(|&&b| b == b'[').count() > value.iter().filter(|&&b| b == b']').count();
    if !plausible(checked, false)
        || unclosed_bracket
        || is_word(value)
        || is_camel_case(value)
        || is_identifier(value)
        || is_path(value)
    {
        return false;
    }
    value.len() >= MIN_SECRET_BYTES && entropy(value) >= MIN_SECRET_ENTROPY
}

/// A type's name in CamelCase: letters only, an uppercase first, and every
/// uppercase letter followed by a lowercase one (`SecretString`,
/// `PasswordHash`, `Option`), as a compiler prints after a field's name.
fn is_camel_case(value: &[u8]) -> bool {
    value.first().is_some_and(u8::is_ascii_uppercase)
        && value.iter().all(u8::is_ascii_alphabetic)
        && value.iter().enumerate().all(|(i, b)| {
            !b.is_ascii_uppercase() || value.get(i + 1).is_some_and(u8::is_ascii_lowercase)
        })
}

/// Whether a quoted value after a credential key (`"password": "…"`,
/// `PASSWORD='…'`, `<Password>…</Password>`) is a secret. The quotes say
/// where it begins and ends, so any character may be in it, shell
/// metacharacters and blanks included (`"Xy$7&k(9)|<z>;"` is a password,
/// not a command). It is no secret when it is:
///
/// * a placeholder (see [`plausible`]): `null`, `****`, `[hidden]`, `%s`,
///   `<password>`;
/// * wholly a reference to where the value comes from: `$NAME`,
///   `${NAME:-x}`, `$(cat file)`, `` `cmd` ``, `{{ .Values.x }}`,
///   `${{ secrets.X }}`, `%NAME%`;
/// * a word (letters only, one case after the first: `required`,
///   `Invalid`), or prose (three or more blank-separated words of
///   letters: `must not be empty`);
/// * shorter than [`MIN_QUOTED_SECRET_BYTES`].
pub(crate) fn looks_secret_quoted(value: &[u8]) -> bool {
    value.len() >= MIN_QUOTED_SECRET_BYTES
        && !is_placeholder(value)
        && !is_reference(value)
        && !is_word(value)
        && !is_identifier(value)
        && !is_prose(value)
}

/// Two or more lowercase words joined by `_`, `-` or `.` (a word may end
/// in digits): a name, as help texts and examples put after a key
/// (`bearer_token`, `my-secret`, `test-session`, `basic_password`,
/// `api.v2`), not a secret.
fn is_identifier(value: &[u8]) -> bool {
    let mut parts = 0;
    for part in value.split(|&b| matches!(b, b'_' | b'-' | b'.')) {
        let letters = part.iter().take_while(|b| b.is_ascii_lowercase()).count();
        if letters == 0 || !part[letters..].iter().all(u8::is_ascii_digit) {
            return false;
        }
        parts += 1;
    }
    parts >= 2
}

/// A `key=value` list, as `--secret id=npmrc,src=.npmrc` takes: a
/// lowercase word, then `=`.
fn is_spec(value: &[u8]) -> bool {
    value
        .iter()
        .position(|&b| b == b'=')
        .is_some_and(|eq| eq > 0 && value[..eq].iter().all(u8::is_ascii_lowercase))
}

/// `value` without the `]` and `)` at its end that close a bracket it
/// does not open.
fn without_unopened_closers(value: &[u8]) -> &[u8] {
    let mut value = value;
    while let Some((&last, rest)) = value.split_last() {
        let opener = if last == b']' {
            b'['
        } else if last == b')' {
            b'('
        } else {
            break;
        };
        if rest.contains(&opener) {
            break;
        }
        value = rest;
    }
    value
}

/// Letters only, with no change of case after the first.
fn is_word(value: &[u8]) -> bool {
    !value.is_empty()
        && value.iter().all(u8::is_ascii_alphabetic)
        && (value[1..].iter().all(u8::is_ascii_lowercase)
            || value.iter().all(u8::is_ascii_uppercase))
}

/// Three or more blank-separated words, each letters only (a trailing
/// `.`, `,`, `:` or `!` allowed): a message, not a passphrase of symbols.
fn is_prose(value: &[u8]) -> bool {
    let mut words = 0;
    for word in value.split(|&b| b == b' ') {
        let word = match word.last() {
            Some(b'.' | b',' | b':' | b'!') => &word[..word.len() - 1],
            _ => word,
        };
        if word.is_empty() || !word.iter().all(u8::is_ascii_alphabetic) {
            return false;
        }
        words += 1;
    }
    words >= 3
}

/// A file path: `/`, `./`, `../` or `~/` followed by path characters
/// only, or two or more segments of lowercase names joined by `/`
/// (`path/to/id_rsa`; base64, with both cases, is no path).
fn is_path(value: &[u8]) -> bool {
    let rest = [&b"/"[..], b"./", b"../", b"~/"]
        .iter()
        .find_map(|p| value.strip_prefix(*p));
    let anchored = rest.is_some_and(|rest| {
        rest.iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-'))
    });
    let relative = value.contains(&b'/')
        && value.split(|&b| b == b'/').all(|segment| {
            !segment.is_empty()
                && segment.iter().any(u8::is_ascii_lowercase)
                && segment.iter().all(|&b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
        });
    anchored || relative || is_file_path(value)
}

/// A relative path to a file: segments of path characters joined by `/`,
/// the last with an extension of 1 to 5 lowercase letters or digits
/// (`src/components/Button.test.tsx`, as a test runner prints it).
fn is_file_path(value: &[u8]) -> bool {
    let Some(slash) = value.iter().rposition(|&b| b == b'/') else {
        return false;
    };
    let name = &value[slash + 1..];
    let ext = name
        .iter()
        .rposition(|&b| b == b'.')
        .map(|dot| &name[dot + 1..]);
    ext.is_some_and(|ext| {
        (1..=5).contains(&ext.len())
            && ext
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && ext.iter().any(u8::is_ascii_lowercase)
    }) && value.split(|&b| b == b'/').all(|seg| {
        !seg.is_empty()
            && seg
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    })
}

/// Wholly a reference to where a value comes from: a shell variable or
/// command substitution, a template or a Windows variable.
fn is_reference(value: &[u8]) -> bool {
    let name = |v: &[u8]| {
        !v.is_empty()
            && v.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
            && !v[0].is_ascii_digit()
    };
    let wrapped = |open: &[u8], close: &[u8]| {
        value.len() > open.len() + close.len()
            && value.starts_with(open)
            && value.ends_with(close)
            && !value[open.len()..value.len() - close.len()]
                .windows(close.len())
                .any(|w| w == close)
    };
    (value.first() == Some(&b'$') && name(&value[1..]))
        || wrapped(b"${", b"}")
        || wrapped(b"$(", b")")
        || wrapped(b"`", b"`")
        || wrapped(b"{{", b"}}")
        || wrapped(b"${{", b"}}")
        || wrapped(b"%", b"%") && name(&value[1..value.len() - 1])
}

/// Whether a value is a placeholder, never a secret: `null`, `none`,
/// `nil`, `true`, `false`, `undefined`, `empty`, `unset`, `redacted`,
/// `hidden`, `n/a`, one character repeated as in `****`, `[...]`, `<...>`,
/// a format directive (`%s`), fewer than two letters or digits (`X`).
fn is_placeholder(value: &[u8]) -> bool {
    const PLACEHOLDERS: &[&[u8]] = &[
        b"null",
        b"none",
        b"nil",
        b"true",
        b"false",
        b"undefined",
        b"empty",
        b"unset",
        b"redacted",
        b"hidden",
        b"n/a",
    ];
    let Some(&first) = value.first() else {
        return true;
    };
    PLACEHOLDERS.iter().any(|p| value.eq_ignore_ascii_case(p))
        // `X`, `…,`: a letter standing for a value, as prose writes it.
        || value.iter().filter(|b| b.is_ascii_alphanumeric()).count() < 2
        || value.iter().all(|&b| b == first)
        || (first == b'[' && value.last() == Some(&b']'))
        || (first == b'<' && value.last() == Some(&b'>') && !value[1..value.len() - 1].contains(&b'<'))
        || (first == b'%' && value.len() <= 3)
        || value.starts_with(b"%(")
}

/// Whether a bare value could be a secret at all: not a placeholder (see
/// [`is_placeholder`]), no whitespace (unless `blanks`), and no shell or
/// expansion syntax: none of `( ) \` ; | < > & { }`, and no `$` that
/// begins it or begins a `${…}` or `$(…)` (a command, a variable or a
/// template is shown as it is, so that a redaction never hides what runs;
/// a `$` inside a value, as in `ab$cd`, is a character of the secret).
pub(crate) fn plausible(value: &[u8], blanks: bool) -> bool {
    const SHELL: &[u8] = b"()`;|<>&{}";
    if is_placeholder(value) {
        return false;
    }
    let expansion = value.first() == Some(&b'$')
        || value
            .windows(2)
            .any(|w| w[0] == b'$' && matches!(w[1], b'{' | b'('));
    let syntax = value
        .iter()
        .any(|b| (!blanks && b.is_ascii_whitespace()) || SHELL.contains(b));
    !(syntax || expansion)
}

/// The Shannon entropy of `value`'s bytes, in bits per byte.
fn entropy(value: &[u8]) -> f64 {
    let mut counts = [0_u32; 256];
    for &b in value {
        counts[usize::from(b)] += 1;
    }
    let n = value.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Where a secret may begin: a word boundary, or right after what real
/// output puts before a word without a blank: a JSON or C escape (`\n`,
/// `\t`, `\r`, `\b`, `\f`, `\"`, `\\`, `\/`, `\uXXXX`), an ANSI CSI
/// sequence (`ESC [ … final byte`: colours, cursor moves; also written
/// into a JSON string as `\u001b[…`) or the end of an OSC sequence
/// (`ESC ] … BEL` or `ESC ] … ESC \\`: titles, hyperlinks), its BEL or
/// `ESC \\`. The escape or sequence is matched, and skipped before the
/// secret is looked for ([`boundary_len`]). A carriage return is a
/// boundary already.
///
/// An OSC's body is not matched: what matters is where it ends. A bounded
/// body (`[^BEL ESC]{0,512}`) would put 512 automaton states in each of
/// the 31 rules that begin this way, about ten times the size of the
/// compiled set, which `the_compiled_builtin_set_stays_small` keeps under
/// 512 KiB.
macro_rules! start {
    () => {
        concat!("(?:", sequence!(), r#"|\b)"#)
    };
}

/// The escapes and terminal sequences of `start!`, without the boundary.
macro_rules! sequence {
    () => {
        r#"\\u001[bB]\[[0-?]*[ -/]*[@-~]|\\(?:[nrtbf"\\/]|u[0-9A-Fa-f]{4})|\x1b\[[0-?]*[ -/]*[@-~]|\x07|\x1b\\"#
    };
}

/// The bytes of the escape or terminal sequence a match of a rule begins
/// with (see `start!`), or 0.
pub(crate) fn boundary_len(m: &[u8]) -> usize {
    if m.len() > 7 && m[..7].eq_ignore_ascii_case(b"\\u001b[") {
        // A colour written into a JSON string: `\u001b[31m`.
        return m[7..]
            .iter()
            .position(|b| (0x40..=0x7e).contains(b))
            .map_or(m.len(), |i| i + 8);
    }
    match m {
        [b'\\', b'u', ..] => 6.min(m.len()),
        [b'\\', _, ..] => 2,
        [0x1b, b'[', rest @ ..] => rest
            .iter()
            .position(|b| (0x40..=0x7e).contains(b))
            .map_or(m.len(), |i| i + 3),
        // The end of an OSC sequence.
        [0x07, ..] => 1,
        [0x1b, b'\\', ..] => 2,
        _ => 0,
    }
}

/// Characters of a token value in a header or after a scheme.
macro_rules! token {
    () => {
        r#"[A-Za-z0-9\-._~+/]"#
    };
}

/// A value after `=` or `:`: double-quoted (to the closing quote), quoted
/// with JSON-escaped quotes (`\"value\"`, inside a JSON string),
/// single-quoted, or bare (to whitespace, a quote, a backslash, `,`, `&`,
/// `<`, `>`, BEL or ESC: a colour or the end of a title follows a value,
/// it is not part of it; a `;` only when nothing but a separator follows
/// it). A bare value never begins with `:`: `auth::tests` is a path of
/// code, not a key and its value.
macro_rules! value {
    () => {
        r#"(?:"((?:[^"\\\r\n]|\\.)*)"|\\"((?:[^"\\\r\n]|\\[^"\r\n])*)\\"|'([^'\r\n]*)'|\[([^\[\]\r\n]*)\]|([^\s"'\\,;&<>\x07\x1b:][^\s"'\\,;&<>\x07\x1b]*(?:;[^\s"'\\,;&<>\x07\x1b]+)*))"#
    };
}

/// A quoted SQL literal: `'…'` (`''` inside it a quote, with an `E` or
/// `N` prefix), or `"…"`, maybe with JSON-escaped quotes.
macro_rules! sql_literal {
    () => {
        r#"(?:[EeNn]?'((?:[^'\\\r\n]|''|\\[^\r\n])*)'|\\?"((?:[^"\\\r\n]|\\[^"\r\n])*)\\?")"#
    };
}

/// What may stand right before a flag: the start, a blank, a quote, `=`,
/// or an escape or terminal sequence as in `start!`.
macro_rules! flag_start {
    () => {
        concat!(r#"(?:^|[\s'"=]|"#, sequence!(), ")")
    };
}

/// A flag's value: single-quoted, double-quoted, quoted with JSON-escaped
/// quotes (`\"value\"`, inside a JSON string), or bare (to whitespace, a
/// quote, a backslash, shell syntax, BEL or ESC).
macro_rules! flag_value {
    () => {
        r#"(?:'([^'\r\n]*)'|"((?:[^"\\\r\n]|\\.)*)"|\\"((?:[^"\\\r\n]|\\[^"\r\n])*)\\"|([^\s"'\\;&|<>\x07\x1b]+))"#
    };
}

/// An optional quote after a key and the separator, as in `key=`,
/// `key: `, `"key": `, `'key' => ` and, inside a JSON string, `\"key\": `.
macro_rules! assign {
    () => {
        r#"(?:\\?["'])?[ \t]*(?:[:=]|=>)[ \t]*"#
    };
}

/// The rule that recognises private-key blocks.
pub(crate) const PRIVATE_KEY: &str = "private-key";

/// A private-key block's armour line, without the dashes.
macro_rules! key_label {
    () => {
        r#"(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?"#
    };
}

/// The line that ends a private-key block; found in the same pass as the
/// rules, used only to redact a block body whose `BEGIN` line was cut off.
pub(crate) const KEY_END: &str = concat!("-----END ", key_label!(), "-----");

/// Every built-in rule, in priority order.
pub(crate) const BUILTIN_RULES: &[BuiltinRule] = &[
    BuiltinRule {
        name: PRIVATE_KEY,
        anchors: &["private key"],
        // The body between the armour lines, or from BEGIN to the end of the
        // text when the END line is missing (also with JSON `\n` escapes).
        pattern: concat!(
            "-----BEGIN ",
            key_label!(),
            "-----(?s:(.*?))(?:-----END ",
            key_label!(),
            "-----|\\z)"
        ),
        secret: Secret::KeyBody,
    },
    BuiltinRule {
        name: "bearer-token",
        anchors: &["authorization", "earer"],
        pattern: concat!(
            start!(),
            r#"(?i:(?:proxy-)?authorization)"#,
            assign!(),
            r#"\[?(?:\\?["'])?(?i:bearer)(?:[ \t]+|%20)("#,
            token!(),
            r#"+=*)|"#,
            start!(),
            r#"[Bb]earer(?:[ \t]+|%20)("#,
            token!(),
            r#"{8,}=*)"#
        ),
        secret: Secret::HeaderToken,
    },
    BuiltinRule {
        name: "authorization-header",
        anchors: &["authorization"],
        pattern: concat!(
            start!(),
            r#"(?i:(?:proxy-)?authorization)"#,
            assign!(),
            r#"\[?(?:\\?["'])?(?:[A-Za-z][A-Za-z0-9\-]*[ \t]+)?("#,
            token!(),
            r#"+=*)"#
        ),
        secret: Secret::HeaderToken,
    },
    BuiltinRule {
        name: "api-key-header",
        anchors: &[
            "key",
            "token",
            "secret",
            "auth",
            "pass",
            "credential",
            "sig",
            "sess",
        ],
        pattern: concat!(
            start!(),
            r#"(?i:(?:x-(?:[a-z0-9]+-)*(?:api-?key|key|token|secret|auth|password|credentials?|signature|session)|api-key|private-token))"#,
            r#"["']?[ \t]*:[ \t]*"#,
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "aws-access-key-id",
        anchors: &[
            "akia", "asia", "abia", "acca", "agpa", "aida", "aipa", "anpa", "anva", "aroa", "apka",
            "asca",
        ],
        pattern: concat!(
            start!(),
            r#"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA)[A-Z0-9]{16}\b"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "aws-secret-access-key",
        anchors: &["secret", "session"],
        pattern: concat!(
            start!(),
            r#"(?i:[a-z0-9_]*(?:secret_?access_?key|session_?token))"#,
            assign!(),
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "github-token",
        anchors: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        pattern: concat!(
            start!(),
            r#"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "gitlab-token",
        anchors: &["glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "glcbt-"],
        pattern: concat!(
            start!(),
            r#"gl(?:pat|dt|rt|ptt|soat|cbt)-[A-Za-z0-9_\-]{20,}"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "slack-webhook",
        anchors: &["hooks.slack.com"],
        pattern: concat!(
            start!(),
            r#"https://hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9/_+\-]{8,})"#
        ),
        secret: Secret::SlackPath,
    },
    BuiltinRule {
        name: "slack-token",
        anchors: &["xox", "xapp-"],
        pattern: concat!(
            start!(),
            r#"(?:xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-[0-9]-[A-Za-z0-9\-]{10,})"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "stripe-key",
        anchors: &["_live_", "_test_"],
        pattern: concat!(start!(), r#"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "google-api-key",
        anchors: &["aiza"],
        pattern: concat!(start!(), r#"AIza[0-9A-Za-z_\-]{35}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "anthropic-key",
        anchors: &["sk-ant-"],
        pattern: concat!(start!(), r#"sk-ant-[A-Za-z0-9_\-]{20,}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "openai-key",
        anchors: &["sk-"],
        pattern: concat!(
            start!(),
            // Project, service-account and admin keys carry a long body
            // with `-` and `_`; the older keys are 48 alphanumerics (with
            // `T3BlbkFJ` inside). `sk-proxy-7d9f8b6c5-x2k4l`, a pod name,
            // is neither.
            r#"(?:sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,}|sk-[A-Za-z0-9]{48}\b|sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}\b)"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "npm-token",
        anchors: &["npm_"],
        pattern: concat!(start!(), r#"npm_[A-Za-z0-9]{36}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "pypi-token",
        anchors: &["pypi-"],
        pattern: concat!(start!(), r#"pypi-[A-Za-z0-9_\-]{50,}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "jwt",
        anchors: &["eyj"],
        pattern: concat!(
            start!(),
            r#"eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "sendgrid-key",
        anchors: &["sg."],
        pattern: concat!(start!(), r#"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "digitalocean-token",
        anchors: &["_v1_"],
        pattern: concat!(start!(), r#"do[por]_v1_[a-f0-9]{64}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "vault-token",
        anchors: &["hvs.", "hvb.", "hvr."],
        pattern: concat!(start!(), r#"hv[sbr]\.[A-Za-z0-9_\-]{20,}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "shopify-token",
        anchors: &["shpat_", "shpca_", "shppa_", "shpss_"],
        pattern: concat!(start!(), r#"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "huggingface-token",
        anchors: &["hf_", "api_org_"],
        pattern: concat!(start!(), r#"(?:hf|api_org)_[A-Za-z0-9]{30,}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "twilio-key",
        anchors: &["AC", "SK"],
        pattern: concat!(start!(), r#"(?:AC|SK)[0-9a-f]{32}\b"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "telegram-bot-token",
        anchors: &[":aa"],
        pattern: r#"[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "azure-storage-key",
        anchors: &["accountkey", "sharedaccesskey"],
        pattern: concat!(
            start!(),
            r#"(?i:(?:AccountKey|SharedAccessKey))=([A-Za-z0-9+/]+=*)"#
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "url-userinfo",
        anchors: &["://"],
        // scheme://user:PASSWORD@host (the password may hold any character
        // but blanks and quotes, `@`, `/` and `#` included: the userinfo
        // runs to the last `@` before a host), or scheme://TOKEN@host.
        pattern: concat!(
            start!(),
            r#"[A-Za-z][A-Za-z0-9+.\-]*://(?:[^\s:/?#@"'<>\[\]]*:([^\s"'<>\\]+)|([A-Za-z0-9_\-]{16,}))@(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~%]+)(?::[0-9]*)?(?:[/?#\s"'<>\\)\],]|\z)"#
        ),
        secret: Secret::UrlCredentials,
    },
    BuiltinRule {
        name: "signed-url-parameter",
        anchors: &["sig", "credential", "code"],
        // The signature of a signed URL (`?sig=…` of an Azure SAS,
        // `&X-Amz-Signature=…`) and the code of an OAuth redirect
        // (`?code=…`); its tokens (`access_token=`, `X-Amz-Security-Token=`)
        // are the token rule's.
        pattern: r#"(?:\b(?i:sig|signature|x-amz-signature|x-goog-signature|x-goog-credential)|[?&](?i:code))=([^\s&#"'<>\\\x07\x1b]+)"#,
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "xml-credential",
        anchors: &["pass", "pwd", "secret", "token", "credential", "key"],
        // `<SecretAccessKey>…</SecretAccessKey>`, `<ns:Password>…</`.
        pattern: r#"<(?:[A-Za-z0-9_\-]+:)?(?i:[A-Za-z0-9_\-]*(?:password|passwd|pwd|passphrase|secret|secretkey|secretaccesskey|sessiontoken|token|credential|credentials|privatekey|private_key|clientsecret|client_secret|apikey|api_key))>([^<\r\n]+)</"#,
        secret: Secret::ElementText,
    },
    BuiltinRule {
        name: "password-argument",
        anchors: &[
            "pass",
            "login",
            "redis-cli",
            "mongo",
            "ldap",
            "sqlcmd",
            "bcp",
            "isql",
            "osql",
            "ipmitool",
            "zip",
            "mosquitto",
            "sqlpackage",
            "-U",
            "--user",
        ],
        // Programs that take a password as the next argument of an
        // option of theirs: `-p` or `-a` (`sshpass -p X`, `docker login -u
        // u -p X`, `az login -p X`, `redis-cli -a X`), LDAP clients' `-w`,
        // `-P` of `sqlcmd`, `ipmitool`, `zip`, `mosquitto_pub`, …,
        // `keytool -storepass X -keypass Y`, `openssl … -passin pass:X`,
        // the `%` of Samba's `-U user%X`; and `.netrc`'s `machine HOST login
        // USER password X`.
        pattern: concat!(
            r#"(?:"#,
            start!(),
            r#"(?:sshpass|(?:docker|podman|nerdctl|buildah|skopeo|helm(?:[ \t]+registry)?|oras|az|azure)[ \t]+login|redis-cli|mongosh|mongo|mongodump|mongorestore|mongoexport|mongoimport)\b[^\r\n;|&]*?[ \t]-[pa][ \t]+|"#,
            start!(),
            r#"ldap(?:search|add|modify|delete|whoami|passwd|compare|modrdn|exop|url)\b[^\r\n;|&]*?[ \t]-[wy][ \t]+|"#,
            start!(),
            r#"(?:sqlcmd|bcp|isql|osql|ipmitool|zip|unzip|mosquitto_pub|mosquitto_sub|mosquitto_rr|sqlpackage)\b[^\r\n;|&]*?[ \t]-P[ \t]+|"#,
            flag_start!(),
            r#"-(?:src|dest|new)?(?:storepass|keypass)[ \t]+|"#,
            flag_start!(),
            r#"-(?:pass(?:in|out)?|kdfpass)[ \t]+pass:|"#,
            start!(),
            r#"(?:smbclient|rpcclient|smbmap|smbget|smbcacls|smbcquotas|smbtree|net|mount\.cifs|crackmapexec|nxc|netexec|winexe)\b[^\r\n;|&]*?[ \t](?:-U[ \t]*|--user(?:name)?=)[^\s%'"]*%|"#,
            start!(),
            r#"(?:machine[ \t\r\n]+[^\s]+|default)(?:[ \t\r\n]+(?:login|account|port)[ \t\r\n]+[^\s]+)*[ \t\r\n]+password[ \t]+)"#,
            flag_value!()
        ),
        secret: Secret::NextWord,
    },
    BuiltinRule {
        name: "flag-argument",
        anchors: &["pass", "token", "key", "secret", "cookie", "credential"],
        // `--password X`, `--token=X`, `--api-key 'X'`, …: the value of a
        // flag that takes a credential.
        pattern: concat!(
            flag_start!(),
            r#"(?i:--(?:[a-z0-9]+-)*(?:password|passwd|pass|passphrase|token|api-key|apikey|secret|cookie|credentials?|private-key))"#,
            r#"(?:=|[ \t]+)"#,
            flag_value!()
        ),
        secret: Secret::FlagValue,
    },
    BuiltinRule {
        name: "mysql-password",
        anchors: &["mysql", "mariadb"],
        // `mysql -pSECRET`: the MySQL and MariaDB clients take a password
        // glued to `-p` (later arguments of the same command line).
        pattern: concat!(
            start!(),
            r#"(?:mysql|mariadb|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb-dump)\b[^\r\n;|&]*?(?:[\s"]-p([^\s'"]+)|'-p([^'\r\n]+)')"#
        ),
        secret: Secret::DashP,
    },
    BuiltinRule {
        name: "user-password-flag",
        anchors: &["curl", "--user"],
        // `curl -u user:SECRET`, `--user user:SECRET`, `--user=user:SECRET`.
        pattern: concat!(
            r#"(?:"#,
            start!(),
            r#"curl\b[^\r\n;|&]*?[\s'"]-u|"#,
            flag_start!(),
            r#"--user)(?:=|[ \t]+)(?:'[^'\s:]*:([^'\r\n]+)'|"?[^\s:'"]*:([^\s'"]+))"#
        ),
        secret: Secret::UserPassword,
    },
    BuiltinRule {
        name: "sql-password",
        anchors: &["password", "identified"],
        // SQL's password clauses: `CREATE USER … WITH PASSWORD '…'`,
        // `ALTER ROLE … [ENCRYPTED] PASSWORD '…'`, `IDENTIFIED BY '…'`, `SET PASSWORD FOR u = '…'` (also
        // `IDENTIFIED WITH plugin BY '…'` and Oracle's bare `IDENTIFIED BY
        // word`): a quoted literal, `''` inside it a quote.
        pattern: concat!(
            r#"\b(?:(?i:(?:(?:un)?encrypted[ \t]+)?password)(?:[ \t]+(?i:for)[ \t]+[^\s=;]+[ \t]*=[ \t]*|[ \t]+)"#,
            sql_literal!(),
            r#"|(?i:identified(?:[ \t]+(?:with|via)[ \t]+[A-Za-z0-9_]+)?[ \t]+(?:by|as|using)(?:[ \t]+password)?)[ \t]+(?:"#,
            sql_literal!(),
            r#"|([^\s'";,()\\=][^\s'";,()\\]*)))"#
        ),
        secret: Secret::LastValue,
    },
    BuiltinRule {
        name: "dsn-userinfo",
        anchors: &[
            "@tcp",
            "@unix",
            "@udp",
            "@pipe",
            "@memory",
            "jdbc:oracle",
            "sqlplus",
            "sqlldr",
            "rman",
            "expdp",
            "impdp",
            "dgmgrl",
        ],
        // A data source name's `user:password@` before a Go driver's
        // network (`app:pw@tcp(db:3306)/prod`, `root:pw@unix(/run/x)/app`),
        // and Oracle's `user/password@` (`sqlplus scott/pw@orcl`,
        // `jdbc:oracle:thin:scott/pw@db:1521/svc`).
        pattern: concat!(
            r#"(?:"#,
            start!(),
            r#"(?:[A-Za-z][A-Za-z0-9+.\-]*://)?[A-Za-z0-9_.\-]*:([^\s"'<>\\]+)@(?:tcp[46]?|udp[46]?|unix(?:gram|packet)?|pipe|memory)\(|"#,
            start!(),
            r#"(?:jdbc:oracle:(?:thin|oci8?):|(?i:sqlplus|sqlldr|rman|expdp|impdp|dgmgrl)(?:[ \t]+-[A-Za-z]+)*[ \t]+)[A-Za-z0-9_$#.\-]+/([^\s@/"']+)@)"#
        ),
        secret: Secret::DsnPassword,
    },
    BuiltinRule {
        name: "config-set-credential",
        anchors: &["config"],
        // A CLI's `config set KEY VALUE` where the key names a credential:
        // `aws configure set aws_secret_access_key X`, `git config --global
        // user.password X`, `poetry config pypi-token.pypi X`, `yarn config
        // set npmAuthToken X`, `dotnet user-secrets set "Db:Password" X`.
        pattern: concat!(
            start!(),
            r#"(?i:configure|config|user-secrets)(?:[ \t]+(?:set|--set|--add|--replace-all|--global|--local|--system|--user|--worktree|-g|--profile[ \t]+[^\s]+|--location[ \t]+[a-z]+))*[ \t]+"#,
            r#"\\?["']?[^\s='"\\]*(?i:password|passwd|passphrase|secret|token|api[_\-]?key|access[_\-]?key)[^\s='"\\]*\\?["']?[ \t]+"#,
            flag_value!()
        ),
        secret: Secret::LastValue,
    },
    BuiltinRule {
        name: "xml-key-value",
        anchors: &["value"],
        // .NET and Java settings as attribute pairs: `<add key="DbPassword"
        // value="…"/>`, `<entry name="api.token" value='…'/>`.
        pattern: concat!(
            r#"<[A-Za-z][A-Za-z0-9_:\-]*[ \t][^<>\r\n]*?\b(?i:key|name)[ \t]*=[ \t]*\\?["'][^"'<>\\]*(?i:password|passwd|pwd|passphrase|secret|token|api[_\-]?key|apikey|credential)[^"'<>\\]*\\?["'][ \t]+(?i:value)[ \t]*=[ \t]*"#,
            r#"(?:"([^"\\\r\n]*)"|'([^'\r\n]*)'|\\"((?:[^"\\\r\n]|\\[^"\r\n])*)\\")"#
        ),
        secret: Secret::LastValue,
    },
    BuiltinRule {
        name: "protocol-auth",
        anchors: &["auth", "PASS"],
        // Credentials in protocol traces: SMTP's `AUTH PLAIN|LOGIN
        // <base64>`, FTP's and POP3's `PASS …` (a command at a line's start
        // or after a trace's `> `, `C: `, `*cmd* '` or `send: '`), Redis's
        // `"AUTH" ["user"] "password"` (as `MONITOR` prints it).
        pattern: concat!(
            r#"(?:\b(?i:auth)[ \t]+(?i:plain|login|xoauth2|oauthbearer|cram-md5)[ \t]+([A-Za-z0-9+/]{4,}={0,2})|"#,
            r#"(?:^|[\r\n]|\\[nr]|[>'"][ \t]?|\*cmd\*[ \t]'|"#,
            sequence!(),
            r#"|:[ \t])PASS[ \t]"#,
            flag_value!(),
            r#"|\\?"(?i:auth)\\?"(?:[ \t]+\\?"(?:[^"\\\r\n]|\\[^"\r\n])*\\?")?[ \t]+\\?"((?:[^"\\\r\n]|\\[^"\r\n])*)\\?")"#
        ),
        secret: Secret::LastValue,
    },
    BuiltinRule {
        name: "password-assignment",
        anchors: &["pass", "pwd"],
        pattern: concat!(
            start!(),
            // `*password`, `*passwd`, `*passphrase`; `pwd` and `pass` alone
            // (ODBC's `Pwd=`) or after a separator (`MYSQL_PWD`,
            // `REDIS_PASS`, `ansible_become_pass`), never inside a word
            // (`OLDPWD`, `bypass`).
            r#"(?i:[a-z0-9_.\-]*(?:password|passwd|passphrase)|(?:[a-z0-9_.\-]*[_.\-])?(?:pwd|pass))"#,
            assign!(),
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "api-key-assignment",
        anchors: &["key"],
        pattern: concat!(
            start!(),
            r#"(?i:[a-z0-9_.\-]*(?:api[_\-]?key|access_?key|access_?key_?id))"#,
            assign!(),
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "secret-assignment",
        anchors: &["secret"],
        pattern: concat!(
            start!(),
            r#"(?i:[a-z0-9_.\-]*secret(?:_?key)?)"#,
            assign!(),
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "credential-assignment",
        anchors: &["credential", "private", "auth", "sess"],
        // `credentials=`, `private_key:`, docker's `"auth":`, npm's
        // `_auth=`, a session's key (`session=`, `sessionid=`,
        // `session_token:`), never an `author=` or a `session_id=` that
        // names a session.
        pattern: concat!(
            start!(),
            r#"(?i:[a-z0-9_.\-]*(?:credentials?|private[_\-]?key|auth)|(?:[a-z0-9_.\-]*[_.\-])?(?:session|sessionid|session[_\-]?key|session[_\-]?secret|phpsessid|jsessionid))"#,
            assign!(),
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "token-assignment",
        anchors: &["token"],
        pattern: concat!(start!(), r#"(?i:[a-z0-9_.\-]*token)"#, assign!(), value!()),
        secret: Secret::Value,
    },
];

/// The anchors of [`KEY_END`], found with the rules.
const KEY_END_ANCHORS: &[&str] = &["private key"];

/// The rules' anchors in two automata: those matched in any case, and
/// those matched as written.
struct Gate {
    folded: AhoCorasick,
    exact: AhoCorasick,
}

/// Built on the first text to redact: about 150 KiB, where the rules'
/// regex set costs megabytes to compile.
static GATE: LazyLock<Option<Gate>> = LazyLock::new(|| {
    let anchors = || {
        BUILTIN_RULES
            .iter()
            .flat_map(|rule| rule.anchors)
            .chain(KEY_END_ANCHORS)
    };
    let exact = |a: &&&str| a.bytes().any(|b| b.is_ascii_uppercase());
    let build = |folded: bool| {
        AhoCorasick::builder()
            // The folded anchors have no prefilter to speak of: a DFA
            // scans fastest (about 150 KiB). The exact ones are few and
            // rare, found by the default's vectorised prefilter.
            .kind(folded.then_some(AhoCorasickKind::DFA))
            .ascii_case_insensitive(folded)
            .build(anchors().filter(|a| exact(a) != folded))
            .ok()
    };
    Some(Gate {
        folded: build(true)?,
        exact: build(false)?,
    })
});

/// Whether a built-in rule (or the key-end line) may match somewhere in
/// `hay`: false only when `hay` holds none of their anchors, so that the
/// rules' regex set is neither compiled nor run on a text that cannot hold
/// what they look for (a flood of ordinary lines). True when the gate
/// could not be built.
pub(crate) fn may_match(hay: &[u8]) -> bool {
    match &*GATE {
        Some(gate) => gate.folded.is_match(hay) || gate.exact.is_match(hay),
        None => true,
    }
}
