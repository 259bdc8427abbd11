//! Base64 runs that decode to a credential: a docker `config.json` `auth`
//! (`user:password`), a Kubernetes Secret's `data:` values (a PEM private
//! key, a `.dockerconfigjson`), a service-account key file. Found by a scan
//! of the text, not by the rules' regex set: a pattern per shape would add
//! automaton states to every process's compiled set, while this scan holds
//! nothing and decodes only the runs it finds.
//!
//! # Runs
//!
//! A run is a maximal sequence of base64 characters, of the standard
//! (`+ /`) or the URL-safe (`- _`) alphabet, with up to two `=` of padding
//! at its end (padding may be missing). A JSON or C escape (`\n`,
//! `\u00e9`), an ANSI colour and the end of an OSC sequence right before a
//! run are not part of it ([`boundary_len`]). A wrapped body is one run: a
//! line of exactly 64 or 76 characters ([`WRAP_WIDTHS`], PEM's and
//! `base64`'s widths) without padding, ended by a newline, a CRLF or a
//! JSON `\n` or `\r\n` escape, goes on with the next line (after up to
//! [`MAX_INDENT`] blanks) when that line holds only base64, up to a line
//! break, a quote, a blank or the end, and is no longer; a shorter line or
//! padding ends the run.
//!
//! A run of at least [`MIN_RUN`] characters is decoded, unless it holds
//! more than [`MAX_ENCODED_LEN`] characters (64 KiB): a longer run is not
//! decoded and is left to the other rules, so the work per run is
//! bounded. A wrapped run that holds no credential is tried again as its
//! first line alone (a word on the next line may have been taken for the
//! body's last line).
//!
//! # Secrets
//!
//! The whole run is redacted when its decoding
//!
//! * is `user:password` ([`ENCODED_USER_PASSWORD`]), the shape of docker's
//!   `auth` and of HTTP Basic credentials: see [`is_user_password`];
//! * is a JSON object with a credential key holding a string
//!   ([`ENCODED_CREDENTIALS_JSON`]): a `.dockerconfigjson`
//!   (`{"auths":{"REGISTRY":{"auth":"…"}}}`), a cloud service-account key
//!   (`"private_key"`), see [`is_credentials_json`];
//! * holds a PEM, OpenSSH or PGP private-key block, or is the DER of a
//!   private key or an OpenSSH key body ([`ENCODED_PRIVATE_KEY`]);
//! * is text that holds, one or two levels down ([`MAX_NESTING`]), a run
//!   that decodes to one of these (base64 of base64), with that run's
//!   rule.
//!
//! # False alarms
//!
//! Base64 of ordinary text, of binary data (digests, `sha512-…`
//! integrity hashes, random bytes), of JSON without credential keys, of a
//! certificate or a public key, is no credential by these tests. Runs of
//! ordinary text (words, paths, identifiers, hex, UUIDs) decode to bytes
//! that pass none of them.

use memchr::{memchr, memmem};

use super::rules::boundary_len;
use super::{Label, Span};

/// A run that decodes to a private key.
pub(crate) const ENCODED_PRIVATE_KEY: &str = "encoded-private-key";
/// A run that decodes to `user:password`.
pub(crate) const ENCODED_USER_PASSWORD: &str = "encoded-user-password";
/// A run that decodes to a JSON object with a credential key.
pub(crate) const ENCODED_CREDENTIALS_JSON: &str = "encoded-credentials-json";

/// This scanner's rule names.
pub(crate) const RULE_NAMES: [&str; 3] = [
    ENCODED_PRIVATE_KEY,
    ENCODED_USER_PASSWORD,
    ENCODED_CREDENTIALS_JSON,
];

/// The fewest base64 characters a run must have to be decoded: 12 bytes
/// decoded. Shorter runs are words and identifiers.
pub(crate) const MIN_RUN: usize = 16;

/// The most base64 characters a run may have to be decoded: 64 KiB
/// (48 KiB decoded, more than a PEM bundle with a 4096-bit key). A longer
/// run is left undecoded, to the other rules.
pub(crate) const MAX_ENCODED_LEN: usize = 64 * 1024;

/// How far down a decoding is searched for runs: a run in the decoding of
/// a run (depth 1), and one in that one's decoding (depth 2).
pub(crate) const MAX_NESTING: u8 = 2;

/// The longest `user:password` decoding taken for one.
pub(crate) const MAX_USER_PASSWORD: usize = 512;

/// The line widths of wrapped base64: PEM and `openssl` write 64
/// characters a line, `base64` and MIME 76.
pub(crate) const WRAP_WIDTHS: [usize; 2] = [64, 76];

/// The most blanks of indentation before a wrapped run's next line.
pub(crate) const MAX_INDENT: usize = 32;

/// Each byte's base64 value plus one, both alphabets; 0 for other bytes.
static SEXTET: [u8; 256] = sextets();

const fn sextets() -> [u8; 256] {
    let mut table = [0_u8; 256];
    let mut i = 0;
    while i < 26 {
        table[b'A' as usize + i] = i as u8 + 1;
        table[b'a' as usize + i] = i as u8 + 27;
        i += 1;
    }
    let mut d = 0;
    while d < 10 {
        table[b'0' as usize + d] = d as u8 + 53;
        d += 1;
    }
    table[b'+' as usize] = 63;
    table[b'-' as usize] = 63;
    table[b'/' as usize] = 64;
    table[b'_' as usize] = 64;
    table
}

fn is_base64(b: u8) -> bool {
    SEXTET[usize::from(b)] != 0
}

/// Pushes a span for every base64 run in `hay` that decodes to a
/// credential (see the module docs).
pub(crate) fn scan(hay: &[u8], spans: &mut Vec<Span>) {
    find(hay, 0, spans, false);
}

/// The runs of `hay` that are credentials, pushed on `out` (only the first
/// when `first_only`). `depth` is how many decodings down `hay` is.
fn find(hay: &[u8], depth: u8, out: &mut Vec<Span>, first_only: bool) {
    // The shortest word the walk below looks at.
    const SHORTEST: usize = if MIN_RUN < WRAP_WIDTHS[0] {
        MIN_RUN
    } else {
        WRAP_WIDTHS[0]
    };
    let next_escape = |from: usize| {
        hay.get(from..)
            .and_then(|rest| memchr::memchr2(b'\\', 0x1b, rest))
            .map_or(hay.len(), |at| from + at)
    };
    let mut lines: Vec<(usize, usize)> = Vec::new();
    let mut escape = next_escape(0);
    let mut i = 0;
    while i < hay.len() {
        if escape < i {
            escape = next_escape(i);
        }
        // With no escape before it, a byte `SHORTEST - 1` ahead that is not
        // base64 ends every word that starts here short of `SHORTEST`: the
        // walk would step over them all and land just past that byte.
        let probe = i + SHORTEST - 1;
        if probe < escape && hay.get(probe).is_some_and(|&b| !is_base64(b)) {
            i = probe + 1;
            continue;
        }
        let b = hay[i];
        if b == b'\\' || b == 0x1b {
            // An escape or a terminal sequence: the run starts after it.
            i += boundary_len(&hay[i..]).max(1);
            continue;
        }
        if !is_base64(b) {
            i += 1;
            continue;
        }
        let word = hay[i..].iter().take_while(|&&b| is_base64(b)).count();
        if word < SHORTEST {
            // Too short to decode, and no full line of a wrapped run.
            i += word;
            continue;
        }
        lines.clear();
        let (end, total) = extent(hay, i, &mut lines);
        if total > MAX_ENCODED_LEN {
            // Too long to decode: left to the other rules.
            i = end;
            continue;
        }
        let found = match judge(hay, &lines, depth) {
            Some(rule) => Some((rule, end)),
            None if lines.len() > 1 => judge(hay, &lines[..1], depth).map(|r| (r, lines[0].1)),
            None => None,
        };
        if let Some((rule, end)) = found {
            out.push(Span {
                start: i,
                end,
                label: Label::Named(rule),
            });
            if first_only {
                return;
            }
        }
        i = end;
    }
}

/// The end of the run that starts at `start` and its length in base64
/// characters (padding included, line breaks and indentation not). Its
/// lines are pushed on `lines` while they hold no more than
/// [`MAX_ENCODED_LEN`] characters in all.
fn extent(hay: &[u8], start: usize, lines: &mut Vec<(usize, usize)>) -> (usize, usize) {
    let base64_len = |from: usize| hay[from..].iter().take_while(|&&b| is_base64(b)).count();
    let padding_len = |from: usize| {
        hay[from..]
            .iter()
            .take(2)
            .take_while(|&&b| b == b'=')
            .count()
    };
    let (mut from, mut width, mut total) = (start, None, 0);
    loop {
        let chars = base64_len(from);
        let pad = padding_len(from + chars);
        let end = from + chars + pad;
        total += chars + pad;
        if total <= MAX_ENCODED_LEN {
            lines.push((from, end));
        }
        let full = pad == 0
            && match width {
                None => WRAP_WIDTHS.contains(&chars),
                Some(width) => chars == width,
            };
        if !full {
            return (end, total);
        }
        width = Some(chars);
        let Some(next) = next_line(hay, end) else {
            return (end, total);
        };
        let next_chars = base64_len(next);
        let after = next + next_chars + padding_len(next + next_chars);
        if next_chars == 0 || next_chars > chars || !ends_line(hay, after) {
            return (end, total);
        }
        from = next;
    }
}

/// Where the line after a line break at `at` starts its text (after its
/// indentation), if a line break is at `at`: a newline, a CRLF, or a JSON
/// `\n` or `\r\n` escape.
fn next_line(hay: &[u8], at: usize) -> Option<usize> {
    let rest = &hay[at..];
    let line_break = [&b"\r\n"[..], b"\\r\\n", b"\\n", b"\n"]
        .into_iter()
        .find(|lb| rest.starts_with(lb))?;
    let text = at + line_break.len();
    let indent = hay[text..]
        .iter()
        .take(MAX_INDENT)
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    Some(text + indent)
}

/// Whether a wrapped run's line may end at `at`: at the end, a line break
/// (or an escape), a quote or a blank.
fn ends_line(hay: &[u8], at: usize) -> bool {
    hay.get(at)
        .is_none_or(|b| matches!(b, b'\n' | b'\r' | b'\\' | b'"' | b'\'' | b' ' | b'\t'))
}

/// The rule of the credential that the run made of `lines` decodes to.
fn judge(hay: &[u8], lines: &[(usize, usize)], depth: u8) -> Option<&'static str> {
    let total: usize = lines.iter().map(|(from, to)| to - from).sum();
    if !(MIN_RUN..=MAX_ENCODED_LEN).contains(&total) {
        return None;
    }
    let mut text = Vec::with_capacity(total);
    for &(from, to) in lines {
        text.extend_from_slice(&hay[from..to]);
    }
    let decoded = decode(&text)?;
    classify(&decoded, depth)
}

/// `text` decoded from base64 (either alphabet, padding optional), or
/// `None` if it is not base64.
fn decode(text: &[u8]) -> Option<Vec<u8>> {
    let pad = text
        .iter()
        .rev()
        .take(2)
        .take_while(|&&b| b == b'=')
        .count();
    let body = &text[..text.len() - pad];
    if body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() / 4 * 3 + 2);
    let (mut acc, mut bits) = (0_u32, 0_u32);
    for &b in body {
        let value = SEXTET[usize::from(b)].checked_sub(1)?;
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// The rule of the credential `decoded` is or holds, if any.
fn classify(decoded: &[u8], depth: u8) -> Option<&'static str> {
    if is_user_password(decoded) {
        return Some(ENCODED_USER_PASSWORD);
    }
    if is_credentials_json(decoded) {
        return Some(ENCODED_CREDENTIALS_JSON);
    }
    if holds_private_key(decoded) || is_private_key_der(decoded) {
        return Some(ENCODED_PRIVATE_KEY);
    }
    if depth < MAX_NESTING && std::str::from_utf8(decoded).is_ok() {
        let mut inner = Vec::new();
        find(decoded, depth + 1, &mut inner, true);
        if let Some(Span {
            label: Label::Named(rule),
            ..
        }) = inner.first()
        {
            return Some(rule);
        }
    }
    None
}

/// Whether `decoded` is `user:password`: at most [`MAX_USER_PASSWORD`]
/// bytes of printable ASCII without blanks, with exactly one `:`, between
///
/// * a user: not empty, with a letter, made of letters, digits and
///   `. _ @ + - $ \` (a name, an email, `DOMAIN\name`, `robot$ci`,
///   `_json_key`);
///   `04:User1` (a GraphQL node id) has no letter in its user;
/// * and a password that is no plain value: with `/ . - _` left out, it
///   is not empty, not digits only (`arrayconnection:10`, a port, a time,
///   a version) and not a word (letters only, with no change of case
///   after the first: `nginx:latest`, `Content-Type:application/json`),
///   and it does not start with `//` (a URL).
///
/// Text with blanks (`note: see file`) never passes, and neither does a
/// weak password that is a word or a number: base64 of `word:word` is
/// left to the rules that read its context (`"auth":`, `Basic`).
pub(crate) fn is_user_password(decoded: &[u8]) -> bool {
    if decoded.len() > MAX_USER_PASSWORD || !decoded.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return false;
    }
    let Some(colon) = memchr(b':', decoded) else {
        return false;
    };
    let (user, password) = (&decoded[..colon], &decoded[colon + 1..]);
    if memchr(b':', password).is_some() {
        return false;
    }
    let user_ok = user.iter().any(u8::is_ascii_alphabetic)
        && user
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"._@+-$\\".contains(&b));
    let core: Vec<u8> = password
        .iter()
        .copied()
        .filter(|b| !b"/.-_".contains(b))
        .collect();
    let word = core.iter().all(u8::is_ascii_alphabetic)
        && (core.iter().skip(1).all(u8::is_ascii_lowercase)
            || core.iter().all(u8::is_ascii_uppercase));
    user_ok
        && !core.is_empty()
        && !core.iter().all(u8::is_ascii_digit)
        && !word
        && !password.starts_with(b"//")
}

/// Whether `decoded` is a JSON object (its first byte after blanks is `{`)
/// with a credential key ([`is_credential_key`]) whose value is a string
/// that is no placeholder ([`is_credential_value`]). The object is read
/// as text, key by key, so a truncated or invalid JSON with a credential
/// in it is one too.
pub(crate) fn is_credentials_json(decoded: &[u8]) -> bool {
    if decoded.trim_ascii_start().first() != Some(&b'{') {
        return false;
    }
    let mut at = 0;
    while let Some(open) = memchr(b'"', &decoded[at..]).map(|i| at + i + 1) {
        let Some(close) = memchr(b'"', &decoded[open..]).map(|i| open + i) else {
            return false;
        };
        let rest = decoded[close + 1..].trim_ascii_start();
        if let Some(value) = rest.strip_prefix(b":")
            && is_credential_key(&decoded[open..close])
            && is_credential_value(value.trim_ascii_start())
        {
            return true;
        }
        at = close + 1;
    }
    false
}

/// Whether a JSON key names a credential. The key is compared lower-case
/// without `_`, `-` and `.` (`client_secret`, `SecretAccessKey`,
/// `x-auth-token`): `auth`, `authorization`, `pwd`, `pass`, `credential`,
/// `credentials`, or one that ends with `password`, `passwd`, `secret`,
/// `passphrase`, `token` (but not a paging token: `next_token`,
/// `page_token`, `continuation_token`, `sync_token`), `privatekey`,
/// `secretkey`, `secretaccesskey` or `apikey`. `private_key_id`,
/// `token_uri` and `auth_uri` are not credentials.
pub(crate) fn is_credential_key(key: &[u8]) -> bool {
    const EXACT: &[&[u8]] = &[
        b"auth",
        b"authorization",
        b"pwd",
        b"pass",
        b"credential",
        b"credentials",
    ];
    const ENDINGS: &[&[u8]] = &[
        b"password",
        b"passwd",
        b"secret",
        b"passphrase",
        b"token",
        b"privatekey",
        b"secretkey",
        b"secretaccesskey",
        b"apikey",
    ];
    const PAGING: &[&[u8]] = &[
        b"nexttoken",
        b"pagetoken",
        b"nextpagetoken",
        b"continuationtoken",
        b"synctoken",
    ];
    if key.len() > 64 {
        return false;
    }
    let key: Vec<u8> = key
        .iter()
        .filter(|b| !b"_-.".contains(b))
        .map(u8::to_ascii_lowercase)
        .collect();
    EXACT.contains(&key.as_slice())
        || (ENDINGS.iter().any(|e| key.ends_with(e)) && !PAGING.contains(&key.as_slice()))
}

/// Whether a JSON value (the text after the key's `:`) is a string that
/// may be a credential: at least 4 characters, not one character repeated
/// (`****`), not a template or placeholder (`<token>`, `${TOKEN}`,
/// `{{ .token }}`, `%s`, `null`, `none`, `redacted`…).
fn is_credential_value(value: &[u8]) -> bool {
    const PLACEHOLDERS: &[&[u8]] = &[
        b"null",
        b"none",
        b"undefined",
        b"empty",
        b"unset",
        b"redacted",
        b"hidden",
    ];
    let Some(body) = value.strip_prefix(b"\"") else {
        return false;
    };
    let end = memchr(b'"', body).unwrap_or(body.len());
    let body = &body[..end];
    body.len() >= 4
        && !body.iter().all(|&b| b == body[0])
        && !matches!(body[0], b'<' | b'$' | b'{' | b'%')
        && !PLACEHOLDERS.iter().any(|p| body.eq_ignore_ascii_case(p))
}

/// Whether `decoded` holds a private-key block's BEGIN line: `-----BEGIN `,
/// upper-case words ending with `PRIVATE KEY` (or `PRIVATE KEY BLOCK`,
/// PGP's), `-----`. Certificates and public keys have other labels.
pub(crate) fn holds_private_key(decoded: &[u8]) -> bool {
    const BEGIN: &[u8] = b"-----BEGIN ";
    let mut at = 0;
    while let Some(i) = memmem::find(&decoded[at..], BEGIN) {
        let label_start = at + i + BEGIN.len();
        let rest = &decoded[label_start..];
        let label = memmem::find(&rest[..rest.len().min(80)], b"-----").map(|end| &rest[..end]);
        if let Some(label) = label
            && label
                .iter()
                .all(|&b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' ')
            && (label.ends_with(b"PRIVATE KEY") || label.ends_with(b"PRIVATE KEY BLOCK"))
        {
            return true;
        }
        at = label_start;
    }
    false
}

/// Whether `decoded` is a private key's binary form: an OpenSSH key body
/// (`openssh-key-v1`), or a DER SEQUENCE whose length is exactly the rest
/// of `decoded` and that opens with version 0 followed by a SEQUENCE
/// (PKCS#8) or an INTEGER (PKCS#1 RSA, DSA), or with version 1 followed by
/// an OCTET STRING (SEC1 EC). A certificate or a public key opens with a
/// SEQUENCE, not a version.
pub(crate) fn is_private_key_der(decoded: &[u8]) -> bool {
    if decoded.starts_with(b"openssh-key-v1\0") {
        return true;
    }
    let (len, header) = match *decoded {
        [0x30, 0x82, high, low, ..] => (usize::from(high) << 8 | usize::from(low), 4),
        [0x30, 0x81, len, ..] => (usize::from(len), 3),
        [0x30, len, ..] if len < 0x80 => (usize::from(len), 2),
        _ => return false,
    };
    header + len == decoded.len()
        && matches!(
            decoded[header..],
            [0x02, 0x01, 0x00, 0x30 | 0x02, ..] | [0x02, 0x01, 0x01, 0x04, ..]
        )
}

#[cfg(test)]
mod tests;
