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
                match m.get(start) {
                    Some(&q @ (b'"' | b'\'')) if len > start + 1 && m[len - 1] == q => {
                        (start + 1, len - 1)
                    }
                    Some(b'{' | b'[') => (start, start),
                    _ if is_literal(&m[start..]) => (start, start),
                    _ => (
                        start,
                        start + number_len(&m[start..]).unwrap_or(len - start),
                    ),
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

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Characters of a token value in a header or after a scheme.
macro_rules! token {
    () => {
        r#"[A-Za-z0-9\-._~+/]"#
    };
}

/// A value after `=` or `:`: double-quoted (to the closing quote),
/// single-quoted, or bare (to whitespace, a quote, `,`, `;` or `&`).
macro_rules! value {
    () => {
        r#"(?:"((?:[^"\\\r\n]|\\.)*)"|'([^'\r\n]*)'|([^\s"'\\,;&<>]+))"#
    };
}

/// An optional quote after a key and the separator, as in `key=`,
/// `key: `, `"key": ` and `'key' => `.
macro_rules! assign {
    () => {
        r#"["']?[ \t]*(?:[:=]|=>)[ \t]*"#
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
            r#"(?i:\b(?:proxy-)?authorization)"#,
            assign!(),
            r#"["']?(?i:bearer)[ \t]+("#,
            token!(),
            r#"+=*)|\b[Bb]earer[ \t]+("#,
            token!(),
            r#"{8,}=*)"#
        ),
        secret: Secret::LastWord,
    },
    BuiltinRule {
        name: "authorization-header",
        pattern: concat!(
            r#"(?i:\b(?:proxy-)?authorization)"#,
            assign!(),
            r#"["']?(?:[A-Za-z][A-Za-z0-9\-]*[ \t]+)?("#,
            token!(),
            r#"+=*)"#
        ),
        secret: Secret::LastWord,
    },
    BuiltinRule {
        name: "api-key-header",
        pattern: concat!(
            r#"(?i:\b(?:x-[a-z0-9\-]*(?:api-?key|token|secret|auth)[a-z0-9\-]*|api-key|private-token))"#,
            r#"["']?[ \t]*:[ \t]*"#,
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "aws-access-key-id",
        pattern: r#"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA)[A-Z0-9]{16}\b"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "aws-secret-access-key",
        pattern: concat!(
            r#"(?i:\b[a-z0-9_]*(?:secret_?access_?key|session_?token))"#,
            assign!(),
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "github-token",
        pattern: r#"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "gitlab-token",
        pattern: r#"\bgl(?:pat|dt|rt|ptt|soat|cbt)-[A-Za-z0-9_\-]{20,}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "slack-webhook",
        pattern: r#"\bhttps://hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9/_+\-]{8,})"#,
        secret: Secret::SlackPath,
    },
    BuiltinRule {
        name: "slack-token",
        pattern: r#"\bxox[abposre]-[A-Za-z0-9\-]{10,}|\bxapp-[0-9]-[A-Za-z0-9\-]{10,}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "stripe-key",
        pattern: r#"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "google-api-key",
        pattern: r#"\bAIza[0-9A-Za-z_\-]{35}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "anthropic-key",
        pattern: r#"\bsk-ant-[A-Za-z0-9_\-]{20,}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "openai-key",
        pattern: r#"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "npm-token",
        pattern: r#"\bnpm_[A-Za-z0-9]{36}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "pypi-token",
        pattern: r#"\bpypi-[A-Za-z0-9_\-]{50,}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "jwt",
        pattern: r#"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "sendgrid-key",
        pattern: r#"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "digitalocean-token",
        pattern: r#"\bdo[por]_v1_[a-f0-9]{64}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "vault-token",
        pattern: r#"\bhv[sbr]\.[A-Za-z0-9_\-]{20,}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "shopify-token",
        pattern: r#"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "huggingface-token",
        pattern: r#"\b(?:hf|api_org)_[A-Za-z0-9]{30,}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "twilio-key",
        pattern: r#"\b(?:AC|SK)[0-9a-f]{32}\b"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "telegram-bot-token",
        pattern: r#"[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}"#,
        secret: Secret::Whole,
    },
    BuiltinRule {
        name: "azure-storage-key",
        pattern: r#"(?i:\b(?:AccountKey|SharedAccessKey))=([A-Za-z0-9+/]+=*)"#,
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "url-userinfo",
        // scheme://user:PASSWORD@host: the password goes, user and host stay.
        pattern: r#"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@"'<>\[\]]*:([^\s/?#"'<>]+)@"#,
        secret: Secret::UrlPassword,
    },
    BuiltinRule {
        name: "password-assignment",
        pattern: concat!(
            r#"(?i:\b[a-z0-9_.\-]*(?:password|passwd|passphrase))"#,
            assign!(),
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "api-key-assignment",
        pattern: concat!(
            r#"(?i:\b[a-z0-9_.\-]*(?:api[_\-]?key|access_?key|access_?key_?id))"#,
            assign!(),
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "secret-assignment",
        pattern: concat!(
            r#"(?i:\b[a-z0-9_.\-]*secret(?:_?key)?)"#,
            assign!(),
            value!()
        ),
        secret: Secret::Value,
    },
    BuiltinRule {
        name: "token-assignment",
        pattern: concat!(r#"(?i:\b[a-z0-9_.\-]*token)"#, assign!(), value!()),
        secret: Secret::Value,
    },
];
