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

/// One built-in rule.
pub(crate) struct BuiltinRule {
    /// The name written in the replacement, `[redacted: NAME]`.
    pub(crate) name: &'static str,
    /// The pattern.
    pub(crate) pattern: &'static str,
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
    /// The match's last blank-separated word (`Bearer TOKEN`).
    LastWord,
    /// What follows the first `:` or `=` (and `=>`), blanks and an opening
    /// quote; inside the quotes when quoted. An unquoted `null`, `true` or
    /// `false`, or one that opens a JSON object or array, is no secret
    /// (`"next_token": null`, `"has_password": false`); a number is taken
    /// without the brackets that close the JSON after it.
    Value,
    /// The password of `scheme://user:password@`.
    UrlPassword,
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
}

impl Secret {
    /// The secret's range within `m`, a whole match of the rule.
    pub(crate) fn find(self, m: &[u8]) -> (usize, usize) {
        let len = m.len();
        let blank = |b: &u8| *b == b' ' || *b == b'\t';
        match self {
            Secret::Whole => (0, len),
            Secret::LastWord => (m.iter().rposition(blank).map_or(0, |i| i + 1), len),
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
                let (from, to) = match m.get(start) {
                    Some(&q @ (b'"' | b'\'')) if len > start + 1 && m[len - 1] == q => {
                        (start + 1, len - 1)
                    }
                    Some(b'\\')
                        if m[start..].starts_with(b"\\\"")
                            && len >= start + 4
                            && m.ends_with(b"\\\"") =>
                    {
                        (start + 2, len - 2)
                    }
                    Some(b'{' | b'[') => (start, start),
                    _ if is_literal(&m[start..]) => (start, start),
                    _ => (
                        start,
                        start + number_len(&m[start..]).unwrap_or(len - start),
                    ),
                };
                if looks_secret(&m[from..to]) {
                    (from, to)
                } else {
                    (from, from)
                }
            }
            Secret::FlagValue => {
                let (from, to) = match m.last() {
                    Some(&q @ (b'"' | b'\'')) => {
                        let open = m[..len - 1].iter().rposition(|&b| b == q);
                        open.map_or((len, len), |open| (open + 1, len - 1))
                    }
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
                // A flag's position says it is the credential: a blank
                // inside its quotes is part of it.
                if plausible(&m[from..to], true) {
                    (from, to)
                } else {
                    (from, from)
                }
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
                if plausible(&m[from..to], true) {
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
                if plausible(&m[from..to], true) {
                    (from, to)
                } else {
                    (from, from)
                }
            }
            Secret::UrlPassword => {
                let after_scheme = find(m, b"://").map_or(0, |i| i + 3);
                let colon = m[after_scheme..]
                    .iter()
                    .position(|&b| b == b':')
                    .map_or(after_scheme, |i| after_scheme + i + 1);
                (colon, len.saturating_sub(1).max(colon))
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
                (start.min(end), end)
            }
        }
    }
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

/// The shortest value an assignment rule takes as a secret.
pub(crate) const MIN_SECRET_BYTES: usize = 6;

/// The least Shannon entropy, in bits per byte over the value's own byte
/// frequencies, of a value an assignment rule takes as a secret: `hunter2`
/// has 2.81, `abc123` 2.58, `aaaa1111` 1.0.
pub(crate) const MIN_SECRET_ENTROPY: f64 = 2.0;

/// Whether a value after a credential key (`password=`, `"token": `,
/// `X-Api-Key:`) looks like a secret, so that ordinary words and shell
/// syntax are never hidden:
///
/// * it is [`plausible`] (no blank, no shell or expansion syntax, not a
///   placeholder);
/// * it is not a word: letters only with no change of case after the first
///   (`expired`, `Permission`, `INVALID`; `hUnTeR` is no word);
/// * it has at least [`MIN_SECRET_BYTES`] bytes and at least
///   [`MIN_SECRET_ENTROPY`] bits of entropy per byte.
pub(crate) fn looks_secret(value: &[u8]) -> bool {
    if !plausible(value, false) {
        return false;
    }
    let letters = value.iter().all(u8::is_ascii_alphabetic);
    let word = letters
        && (value[1..].iter().all(u8::is_ascii_lowercase)
            || value.iter().all(u8::is_ascii_uppercase));
    !word && value.len() >= MIN_SECRET_BYTES && entropy(value) >= MIN_SECRET_ENTROPY
}

/// Whether a value could be a secret at all: not empty, no whitespace
/// (unless `blanks`), no shell or expansion syntax (`$ ( ) \` ; | < > & { }`: a command, a
/// variable or a template, shown as it is so that a redaction never hides
/// what runs), and not a placeholder (`null`, `none`, `nil`, `true`,
/// `false`, `undefined`, `empty`, `unset`, `redacted`, `hidden`, `n/a`,
/// one character repeated as in `****`, `[...]`, `%s`, fewer than two
/// letters or digits as in `X`).
pub(crate) fn plausible(value: &[u8], blanks: bool) -> bool {
    const SHELL: &[u8] = b"$()`;|<>&{}";
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
        return false;
    };
    let syntax = value
        .iter()
        .any(|b| (!blanks && b.is_ascii_whitespace()) || SHELL.contains(b));
    let placeholder = PLACEHOLDERS.iter().any(|p| value.eq_ignore_ascii_case(p))
        // `X`, `…,`: a letter standing for a value, as prose writes it.
        || value.iter().filter(|b| b.is_ascii_alphanumeric()).count() < 2
        || value.iter().all(|&b| b == first)
        || (first == b'[' && value.last() == Some(&b']'))
        || first == b'%';
    !(syntax || placeholder)
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
/// An OSC's body is not matched: what matters is where it ends, and a
/// bounded body (`[^BEL ESC]{0,512}`) cost 512 automaton states in each of
/// the 31 rules that begin this way: the compiled set held 2,711,688
/// bytes instead of 276,288, and compiling it raised the process's peak
/// memory by 8.8 MiB instead of 2.4.
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
/// single-quoted, or bare (to whitespace, a quote, a backslash, `,`, `;`,
/// `&`, `<`, `>`, BEL or ESC: a colour or the end of a title follows a
/// value, it is not part of it).
macro_rules! value {
    () => {
        r#"(?:"((?:[^"\\\r\n]|\\.)*)"|\\"((?:[^"\\\r\n]|\\[^"\r\n])*)\\"|'([^'\r\n]*)'|([^\s"'\\,;&<>\x07\x1b]+))"#
    };
}

/// What may stand right before a flag: the start, a blank, a quote, `=`,
/// or an escape or terminal sequence as in `start!`.
macro_rules! flag_start {
    () => {
        concat!(r#"(?:^|[\s'"=]|"#, sequence!(), ")")
    };
}

/// A flag's value: single-quoted, double-quoted, or bare (to whitespace, a
/// quote, a backslash, shell syntax, BEL or ESC).
macro_rules! flag_value {
    () => {
        r#"(?:'([^'\r\n]*)'|"((?:[^"\\\r\n]|\\.)*)"|([^\s"'\\;&|<>\x07\x1b]+))"#
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
        pattern: concat!(
            start!(),
            r#"(?i:(?:proxy-)?authorization)"#,
            assign!(),
            r#"(?:\\?["'])?(?i:bearer)[ \t]+("#,
            token!(),
            r#"+=*)|"#,
            start!(),
            r#"[Bb]earer[ \t]+("#,
            token!(),
            r#"{8,}=*)"#
        ),
        secret: Secret::LastWord,
    },
    BuiltinRule {
        name: "authorization-header",
        pattern: concat!(
            start!(),
            r#"(?i:(?:proxy-)?authorization)"#,
            assign!(),
            r#"(?:\\?["'])?(?:[A-Za-z][A-Za-z0-9\-]*[ \t]+)?("#,
            token!(),
            r#"+=*)"#
        ),
        secret: Secret::LastWord,
    },
    BuiltinRule {
        name: "api-key-header",
        pattern: concat!(
            start!(),
            r#"(?i:(?:x-[a-z0-9\-]*(?:api-?key|token|secret|auth)[a-z0-9\-]*|api-key|private-token))"#,
            r#"["']?[ \t]*:[ \t]*"#,
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "aws-access-key-id",
        pattern: concat!(
            start!(),
            r#"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA)[A-Z0-9]{16}\b"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "aws-secret-access-key",
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
        pattern: concat!(
            start!(),
            r#"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "gitlab-token",
        pattern: concat!(
            start!(),
            r#"gl(?:pat|dt|rt|ptt|soat|cbt)-[A-Za-z0-9_\-]{20,}"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "slack-webhook",
        pattern: concat!(
            start!(),
            r#"https://hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9/_+\-]{8,})"#
        ),
        secret: Secret::SlackPath,
    },
    BuiltinRule {
        name: "slack-token",
        pattern: concat!(
            start!(),
            r#"(?:xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-[0-9]-[A-Za-z0-9\-]{10,})"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "stripe-key",
        pattern: concat!(start!(), r#"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "google-api-key",
        pattern: concat!(start!(), r#"AIza[0-9A-Za-z_\-]{35}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "anthropic-key",
        pattern: concat!(start!(), r#"sk-ant-[A-Za-z0-9_\-]{20,}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "openai-key",
        pattern: concat!(
            start!(),
            r#"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "npm-token",
        pattern: concat!(start!(), r#"npm_[A-Za-z0-9]{36}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "pypi-token",
        pattern: concat!(start!(), r#"pypi-[A-Za-z0-9_\-]{50,}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "jwt",
        pattern: concat!(
            start!(),
            r#"eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"#
        ),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "sendgrid-key",
        pattern: concat!(start!(), r#"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "digitalocean-token",
        pattern: concat!(start!(), r#"do[por]_v1_[a-f0-9]{64}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "vault-token",
        pattern: concat!(start!(), r#"hv[sbr]\.[A-Za-z0-9_\-]{20,}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "shopify-token",
        pattern: concat!(start!(), r#"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "huggingface-token",
        pattern: concat!(start!(), r#"(?:hf|api_org)_[A-Za-z0-9]{30,}"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "twilio-key",
        pattern: concat!(start!(), r#"(?:AC|SK)[0-9a-f]{32}\b"#),
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "telegram-bot-token",
        pattern: r#"[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "azure-storage-key",
        pattern: concat!(
            start!(),
            r#"(?i:(?:AccountKey|SharedAccessKey))=([A-Za-z0-9+/]+=*)"#
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "url-userinfo",
        // scheme://user:PASSWORD@host: the password goes, user and host stay.
        pattern: concat!(
            start!(),
            r#"[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@"'<>\[\]]*:([^\s/?#"'<>]+)@"#
        ),
        secret: Secret::UrlPassword,
    },
    BuiltinRule {
        name: "flag-argument",
        // `--password X`, `--token=X`, `--api-key 'X'`, …: the value of a
        // flag that takes a credential.
        pattern: concat!(
            flag_start!(),
            r#"(?i:--(?:password|passwd|pass|passphrase|token|auth-token|access-token|api-key|apikey|secret|client-secret))"#,
            r#"(?:=|[ \t]+)"#,
            flag_value!()
        ),
        secret: Secret::FlagValue,
    },
    BuiltinRule {
        name: "mysql-password",
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
        name: "password-assignment",
        pattern: concat!(
            start!(),
            r#"(?i:[a-z0-9_.\-]*(?:password|passwd|passphrase))"#,
            assign!(),
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "api-key-assignment",
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
        pattern: concat!(
            start!(),
            r#"(?i:[a-z0-9_.\-]*secret(?:_?key)?)"#,
            assign!(),
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "token-assignment",
        pattern: concat!(start!(), r#"(?i:[a-z0-9_.\-]*token)"#, assign!(), value!()),
        secret: Secret::Value,
    },
];
