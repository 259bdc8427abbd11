//! Redaction of well-known secret shapes in every text the library makes.
//! See [`Redactor`].
//!
//! Where each part lives:
//!
//! * `rules.rs` — the built-in rules, one named pattern per shape,
//!   compiled with `redact_extra_patterns` into one multi-pattern regex
//!   that finds every secret in one pass (the built-in set once per
//!   process, a set with extra patterns once per [`Config`](crate::Config)).
//! * `scanners.rs` — what a regex set would make large or cannot say:
//!   provider token formats (`providers/`, one table), `Cookie:` pairs
//!   (`cookies.rs`) and base64 runs that decode to a credential
//!   (`encoded.rs`); their spans are merged with the rules'.
//! * `stream.rs` — [`StreamRedactor`], the same rules on a byte stream as
//!   it flows.
//!
//! The redactor returns spans; `render.rs` replaces them with
//! `[redacted: RULE]`. At a window or clamp edge the rules read the
//! [`CUT_MARGIN`] bytes beyond it and the spans are clipped to what is
//! shown. A word cut by the edge is hidden as `[cut]` only when it covers
//! the whole margin and could hold a secret (`may_hold_secret`: it has an
//! ASCII letter). The word ends at ASCII whitespace or at a quote that
//! closes a value (`word_end`), and the hidden part reaches at most
//! [`MAX_CUT_HIDDEN`] bytes from the margin's outer edge, never past a
//! byte that is not ASCII or into a run of 8 copies of one byte
//! (`cut_limit_forward`, `cut_limit_backward`).
//!
//! **Every rule and scanner finds the same spans for every chunking: they
//! read the whole rendered text.**

mod cookies;
mod encoded;
mod layouts;
mod providers;
mod rules;
mod scanners;
mod stream;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, LazyLock, OnceLock};

use regex_automata::meta::Regex;
use regex_automata::util::primitives::NonMaxUsize;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, PatternID};
use serde::{Deserialize, Serialize};

pub use providers::provider_samples;
pub(crate) use providers::token_prefix_in;
use rules::{BUILTIN_RULES, KEY_END, PRIVATE_KEY, Secret};
pub use stream::{STREAM_BEHIND, STREAM_HOLD, StreamRedactor};

/// Replaces well-known secret shapes with `[redacted: RULE]`, keeping the
/// text around them: `Authorization: Bearer [redacted: bearer-token]`.
///
/// Every view the library renders passes through a redactor: the rendered
/// stderr and stdout ([`Window::render`](crate::Window::render) and
/// [`Window::render_clamped`](crate::Window::render_clamped), hence the
/// agent excerpt), the approval card's target and summary, the record's
/// strings and every text of an audit event. The built-in rules cannot be
/// switched off; [`with_extra_patterns`](Self::with_extra_patterns) adds
/// rules (from `helper_output.redact_extra_patterns`).
///
/// All rules are compiled into one multi-pattern regex that finds every
/// secret in one pass over the text; the built-in set is compiled once per
/// process, a set with extra patterns once per configuration. Cloning is
/// cheap (an [`Arc`]).
///
/// # Rules
///
/// The built-in rules, by name ([`builtin_rule_names`](Self::builtin_rule_names)):
/// `private-key` (PEM and OpenSSH/PGP private-key blocks, also JSON-escaped),
/// `bearer-token`, `authorization-header` (Basic, Token and other schemes),
/// `api-key-header` (`X-Api-Key:` and the like), `aws-access-key-id`,
/// `aws-secret-access-key`, `github-token`, `gitlab-token`, `slack-webhook`,
/// `slack-token`, `stripe-key`, `google-api-key`, `anthropic-key`,
/// `openai-key`, `npm-token`, `pypi-token`, `jwt`, `sendgrid-key`,
/// `digitalocean-token`, `vault-token`, `shopify-token`,
/// `huggingface-token`, `twilio-key`, `telegram-bot-token`,
/// `azure-storage-key`, `url-userinfo` (the password of
/// `scheme://user:password@host`), `signed-url-parameter`,
/// `xml-credential`, `password-argument`, `flag-argument`,
/// `mysql-password`, `user-password-flag`, `sql-password`,
/// `dsn-userinfo`, `config-set-credential`, `xml-key-value`,
/// `protocol-auth`, `password-assignment`, `api-key-assignment`,
/// `secret-assignment`, `credential-assignment` and `token-assignment`
/// (`key=value`, `key: value` and `"key": "value"`); and, found by a scan
/// of `Cookie:` and `Set-Cookie:` headers outside the regex set,
/// `cookie-value`; and, found by a scan of base64 runs outside it, `encoded-private-key`,
/// `encoded-user-password` and `encoded-credentials-json` (a run of at
/// least 16 and at most 65,536 base64 characters that decodes to a
/// private key, to `user:password` or to a JSON object with a credential
/// key; a longer run is not decoded); and, found by a scan of line
/// layouts, `yaml-block-secret`, `toml-multiline-secret` and
/// `pgpass-line`. Extra patterns are named `extra-0`,
/// `extra-1`, … in the order given.
///
/// Provider tokens (226 provider formats of 120 providers: cloud keys,
/// source hosts, package registries, payment, messaging and AI platforms, each
/// with its prefix, alphabet, length and checksum where it has one) are
/// found by a scanner outside the regex set, so they cost the compiled set
/// nothing: their table is `core/src/redact/providers/table.rs`, and their
/// names (`stripe-webhook-secret`, `age-secret-key`, …) follow the regex
/// rules' in [`builtin_rule_names`](Self::builtin_rule_names). Where a
/// regex rule covers a provider too, both use its name.
///
/// Patterns match raw bytes with ASCII classes. A pattern with capture
/// groups redacts only the first group that took part in the match (the
/// rest is context); a pattern without groups redacts its whole match.
///
/// # Examples
///
/// ```
/// use spillguard_core::Redactor;
///
/// let redactor = Redactor::builtin();
/// let out = redactor.redact("curl: Authorization: Bearer abc.def-123 refused\n");
/// assert_eq!(out.text, "curl: Authorization: Bearer [redacted: bearer-token] refused\n");
/// assert_eq!(out.counts.total(), 1);
/// assert_eq!(out.counts.rule("bearer-token"), 1);
///
/// let extra = Redactor::with_extra_patterns(["ticket-[0-9]{6}"])?;
/// assert_eq!(extra.redact("see ticket-123456").text, "see [redacted: extra-0]");
/// # Ok::<(), spillguard_core::PatternError>(())
/// ```
#[derive(Clone)]
pub struct Redactor {
    inner: Arc<Compiled>,
}

struct Compiled {
    /// The rules' regex set, compiled when a text first passes the anchor
    /// gate (at once when there are extra patterns, to check them).
    regex: OnceLock<Regex>,
    /// Rule name per pattern id (the key-end pattern comes last).
    names: Vec<String>,
    /// Where each pattern's secret lies in its match.
    secrets: Vec<SecretIn>,
    extra: Vec<String>,
    private_key: usize,
    key_end: usize,
    /// The `mysql-password` and `user-password-flag` rules.
    flag_rules: (usize, usize),
    /// The `authorization-header` and `bearer-token` rules.
    header_rules: (usize, usize),
    /// Every rule name this redactor writes in a placeholder, sorted.
    placeholder_names: Vec<String>,
    /// The longest of them, in bytes.
    longest_name: usize,
}

/// How a pattern's secret is found in its match.
enum SecretIn {
    /// By the built-in rule's scan.
    Builtin(Secret),
    /// As the first group of this single-pattern regex that took part.
    FirstGroup(Regex),
}

static BUILTIN: LazyLock<Redactor> = LazyLock::new(|| {
    // The built-in patterns are constants, compiled by every test run.
    #[allow(clippy::expect_used)]
    Redactor::compile(Vec::new()).expect("the built-in rules compile")
});

/// The regex set's patterns: the built-in rules, the extra patterns, and
/// the key-end line last.
fn set_patterns(extra: &[String]) -> Vec<&str> {
    let mut patterns: Vec<&str> = BUILTIN_RULES.iter().map(|r| r.pattern).collect();
    patterns.extend(extra.iter().map(String::as_str));
    patterns.push(KEY_END);
    patterns
}

impl Compiled {
    /// The rules' regex set, compiled on first use.
    fn regex(&self) -> &Regex {
        self.regex.get_or_init(|| {
            // Only the built-in set is compiled here (a set with extra
            // patterns was compiled when made), and its patterns are
            // constants, compiled by every test run.
            #[allow(clippy::expect_used)]
            build_set(&set_patterns(&self.extra)).expect("the built-in rules compile")
        })
    }
}

/// An extra redaction pattern that does not compile, or that matches the
/// empty string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    /// Its position in the list given.
    pub index: usize,
    /// The pattern.
    pub pattern: String,
    /// Why it was refused.
    pub message: String,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pattern {} {:?} is not valid: {}",
            self.index, self.pattern, self.message
        )
    }
}

impl std::error::Error for PatternError {}

fn syntax_config() -> syntax::Config {
    syntax::Config::new().unicode(false).utf8(false)
}

fn build(patterns: &[&str]) -> Result<Regex, String> {
    Regex::builder()
        .syntax(syntax_config())
        .configure(Regex::config().utf8_empty(false))
        .build_many(patterns)
        .map_err(|e| why(&e))
}

/// What is wrong with a pattern, in one line: the syntax error's own words
/// (`unclosed group`) where there is one.
fn why(error: &regex_automata::meta::BuildError) -> String {
    match error.syntax_error() {
        Some(regex_syntax::Error::Parse(e)) => e.kind().to_string(),
        Some(regex_syntax::Error::Translate(e)) => e.kind().to_string(),
        _ => error.to_string(),
    }
}

/// The set of all rules: only where each match is, so no capture groups
/// (fewer states for the DFA).
fn build_set(patterns: &[&str]) -> Result<Regex, String> {
    Regex::builder()
        .syntax(syntax_config())
        .configure(
            Regex::config()
                .utf8_empty(false)
                .which_captures(regex_automata::nfa::thompson::WhichCaptures::Implicit)
                // No literal prefilter: few rules begin with a literal, and
                // extracting the case variants of the key words cost
                // 200 KiB of peak memory at compile for no speed.
                .auto_prefilter(false),
        )
        .build_many(patterns)
        .map_err(|e| e.to_string())
}

impl Redactor {
    /// The built-in rules only (shared; the regex set is compiled once per
    /// process, when a text first holds one of the rules' anchors).
    pub fn builtin() -> Self {
        BUILTIN.clone()
    }

    /// The built-in rules followed by `patterns` (named `extra-0`, …),
    /// compiled together. A pattern that does not compile, or that matches
    /// the empty string, is refused with its index and text.
    pub fn with_extra_patterns<I, S>(patterns: I) -> Result<Self, PatternError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let extra: Vec<String> = patterns.into_iter().map(Into::into).collect();
        if extra.is_empty() {
            return Ok(Self::builtin());
        }
        for (index, pattern) in extra.iter().enumerate() {
            let refuse = |message: String| PatternError {
                index,
                pattern: pattern.clone(),
                message,
            };
            let single = build(&[pattern.as_str()]).map_err(refuse)?;
            if single.is_match(Input::new(b"")) {
                return Err(refuse("it matches the empty string".to_owned()));
            }
        }
        Self::compile(extra).map_err(|message| PatternError {
            index: 0,
            pattern: String::new(),
            message,
        })
    }

    fn compile(extra: Vec<String>) -> Result<Self, String> {
        Self::compile_with(extra, false)
    }

    /// `by_groups`: find every secret by the pattern's groups, as the
    /// reference the built-in scans are checked against.
    fn compile_with(extra: Vec<String>, by_groups: bool) -> Result<Self, String> {
        let patterns = set_patterns(&extra);
        let regex = OnceLock::new();
        if !extra.is_empty() {
            // Extra patterns are compiled now, so that a set that does not
            // build is refused when the configuration is loaded.
            let _ = regex.set(build_set(&patterns)?);
        }
        let mut names: Vec<String> = BUILTIN_RULES.iter().map(|r| r.name.to_owned()).collect();
        names.extend((0..extra.len()).map(|i| format!("extra-{i}")));
        names.push(String::new());
        let mut secrets: Vec<SecretIn> = BUILTIN_RULES
            .iter()
            .map(|r| SecretIn::Builtin(r.secret))
            .collect();
        if by_groups {
            secrets.clear();
            for rule in BUILTIN_RULES {
                let single = build(&[rule.pattern])?;
                let has_groups = single.group_info().group_len(PatternID::ZERO) > 1;
                secrets.push(match has_groups {
                    true => SecretIn::FirstGroup(single),
                    false => SecretIn::Builtin(Secret::Whole),
                });
            }
        }
        for pattern in &extra {
            // An extra pattern with groups: the first group that took part,
            // found by running the pattern alone, anchored, on the match.
            let single = build(&[pattern.as_str()])?;
            let has_groups = single.group_info().group_len(PatternID::ZERO) > 1;
            secrets.push(match has_groups {
                true => SecretIn::FirstGroup(single),
                false => SecretIn::Builtin(Secret::Whole),
            });
        }
        secrets.push(SecretIn::Builtin(Secret::Whole));
        let private_key = BUILTIN_RULES
            .iter()
            .position(|r| r.name == PRIVATE_KEY)
            .unwrap_or(0);
        let key_end = patterns.len() - 1;
        let rule = |name: &str| {
            BUILTIN_RULES
                .iter()
                .position(|r| r.name == name)
                .unwrap_or(0)
        };
        let flag_rules = (rule("mysql-password"), rule("user-password-flag"));
        let header_rules = (rule("authorization-header"), rule("bearer-token"));
        let mut placeholder_names: Vec<String> = Self::builtin_rule_names()
            .map(str::to_owned)
            .chain((0..extra.len()).map(|i| format!("extra-{i}")))
            .collect();
        placeholder_names.sort_unstable();
        placeholder_names.dedup();
        let longest_name = placeholder_names.iter().map(String::len).max().unwrap_or(0);
        Ok(Self {
            inner: Arc::new(Compiled {
                regex,
                names,
                secrets,
                extra,
                private_key,
                key_end,
                flag_rules,
                header_rules,
                placeholder_names,
                longest_name,
            }),
        })
    }

    /// The names of the built-in rules: the regex rules in priority
    /// order, then the provider formats' names that no regex rule has, in
    /// the provider table's order.
    pub fn builtin_rule_names() -> impl Iterator<Item = &'static str> {
        let regex = || BUILTIN_RULES.iter().map(|r| r.name);
        regex()
            .chain([cookies::RULE])
            .chain(encoded::RULE_NAMES)
            .chain(layouts::RULE_NAMES)
            .chain(providers::rule_names().filter(move |name| !regex().any(|r| r == *name)))
    }

    /// The extra patterns, as given.
    pub fn extra_patterns(&self) -> &[String] {
        &self.inner.extra
    }

    /// Every rule name of this redactor: the built-in ones, then `extra-N`.
    pub fn rule_names(&self) -> impl Iterator<Item = &str> {
        fn widen<'a>(name: &'static str) -> &'a str {
            name
        }
        let names = &self.inner.names;
        let extra = &names[BUILTIN_RULES.len()..names.len() - 1];
        Self::builtin_rule_names()
            .map(widen)
            .chain(extra.iter().map(String::as_str))
    }

    /// Redacts `text`: every secret replaced by `[redacted: RULE]`, the
    /// rest unchanged, with the count per rule.
    pub fn redact(&self, text: &str) -> Redacted {
        let bytes = text.as_bytes();
        let spans = self.spans(bytes, Edges::NONE);
        let mut out = String::with_capacity(text.len());
        self.write(bytes, &spans, &mut out);
        Redacted {
            text: out,
            counts: self.count(&spans),
        }
    }

    /// `text` redacted, without the counts.
    pub(crate) fn redact_text(&self, text: &str) -> String {
        let bytes = text.as_bytes();
        let spans = self.spans(bytes, Edges::NONE);
        if spans.is_empty() {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        self.write(bytes, &spans, &mut out);
        out
    }

    /// The spans to replace in `hay`, sorted and disjoint. `edges` says
    /// which ends of `hay` are cut edges (bytes were dropped beyond them).
    pub(crate) fn spans(&self, hay: &[u8], edges: Edges) -> Vec<Span> {
        let c = &*self.inner;
        let mut spans = Vec::new();
        let mut first_key_end: Option<usize> = None;
        let mut first_key_begin: Option<usize> = None;
        let mut slots: Vec<Option<NonMaxUsize>> = Vec::new();
        // Only the extra patterns, which have no anchors, run on every text.
        let run_rules = !c.extra.is_empty() || rules::may_match(hay);
        let matches = run_rules.then(|| c.regex().find_iter(Input::new(hay)));
        for m in matches.into_iter().flatten() {
            let pid = m.pattern().as_usize();
            if pid == c.key_end {
                first_key_end.get_or_insert(m.start());
                continue;
            }
            if pid == c.private_key {
                first_key_begin.get_or_insert(m.start());
            }
            let (mut start, mut end) = (m.start(), m.end());
            if pid < BUILTIN_RULES.len() {
                // A key right after `/` is a file's name, not a key:
                // `/etc/passwd:root:x:0:0:…` as `grep` prints it.
                if start > 0 && hay[start - 1] == b'/' && BUILTIN_RULES[pid].secret == Secret::Value
                {
                    continue;
                }
                // The escape or terminal sequence before the secret stays.
                start += rules::boundary_len(&hay[start..end]);
            }
            match &c.secrets[pid] {
                SecretIn::Builtin(secret) => {
                    let (from, to) = secret.find(&hay[start..end]);
                    (start, end) = (start + from, start + to);
                }
                SecretIn::FirstGroup(single) => {
                    slots.clear();
                    slots.resize(single.group_info().slot_len(), None);
                    let input = Input::new(hay).range(m.range()).anchored(Anchored::Yes);
                    if single.search_slots(&input, &mut slots).is_some() {
                        // Slots 0 and 1 are the whole match; then two per group.
                        let group = slots[2..]
                            .chunks_exact(2)
                            .find_map(|pair| Some((pair[0]?.get(), pair[1]?.get())));
                        if let Some(group) = group {
                            (start, end) = group;
                        }
                    }
                }
            }
            if start < end {
                spans.push(Span {
                    start: snap_start(hay, start),
                    end: snap_end(hay, end),
                    label: Label::Rule(pid),
                });
            }
        }
        scanners::scan(hay, &mut spans);
        self.keep_placeholders(hay, &mut spans);
        if edges.start {
            // A key block whose BEGIN line was cut away: its body runs from
            // the cut to the first END line (or is a run of base64 lines).
            let body_end = match first_key_end {
                Some(end) if first_key_begin.is_none_or(|begin| end < begin) => Some(end),
                _ => key_body_run(hay),
            };
            if let Some(end) = body_end.filter(|&end| end > 0) {
                spans.push(Span {
                    start: 0,
                    end,
                    label: Label::Rule(c.private_key),
                });
            }
            spans.extend(cut_context_flags(hay, !edges.start_trimmed, c.flag_rules));
            let (word, after_keyword) = cut_word_end(hay);
            let word = word.min(cut_limit_forward(hay, 0));
            if word > 0 && (after_keyword || may_hold_secret(&hay[..word])) {
                spans.push(Span {
                    start: 0,
                    end: word,
                    label: Label::Cut,
                });
            }
        }
        if edges.end {
            let word = word_start(hay, 0, hay.len()).max(cut_limit_backward(hay, hay.len()));
            if word < hay.len() && may_hold_secret(&hay[word..]) {
                spans.push(Span {
                    start: word,
                    end: hay.len(),
                    label: Label::Cut,
                });
            }
        }
        merge(spans)
    }

    /// Leaves this redactor's own placeholders as they are: a span that
    /// lies within `[redacted: RULE]`, where RULE is one of this
    /// redactor's rule names, is dropped, and so is an `Authorization`
    /// value that is only its scheme before one (see
    /// [`scheme_before_placeholder`]), so that text redacted before (a
    /// stored record sent on, a line seen twice) comes out the same when
    /// redacted again, not as `password=[[redacted: …]]`. Only the names of
    /// its rules count: `[redacted: hunter2]` is not one, and a secret
    /// written in that form is still found. Linear in the text: one search
    /// for the placeholders' opening, a bounded look for each name.
    fn keep_placeholders(&self, hay: &[u8], spans: &mut Vec<Span>) {
        const OPEN: &[u8] = b"[redacted: ";
        if spans.is_empty() {
            return;
        }
        let c = &*self.inner;
        let mut placeholders = Vec::new();
        for at in memchr::memmem::find_iter(hay, OPEN) {
            let name_at = at + OPEN.len();
            let window = &hay[name_at..hay.len().min(name_at + c.longest_name + 1)];
            let Some(len) = memchr::memchr(b']', window) else {
                continue;
            };
            let name = &window[..len];
            let known = c
                .placeholder_names
                .binary_search_by(|n| n.as_bytes().cmp(name))
                .is_ok();
            if known {
                placeholders.push((at, name_at + len + 1));
            }
        }
        if placeholders.is_empty() {
            return;
        }
        spans.retain(|span| {
            // The last placeholder that starts at or before the span.
            let before = placeholders.partition_point(|&(start, _)| start <= span.start);
            let inside = before > 0 && span.end <= placeholders[before - 1].1;
            !inside && !self.scheme_before_placeholder(hay, span, &placeholders)
        });
    }

    /// Whether `span`, found by the `authorization-header` or
    /// `bearer-token` rule, is only an authorization scheme (`"Bearer`,
    /// `authorization=Bearer`: nothing before the scheme but the header's
    /// key) right before one of `placeholders` (after blanks or `%20`):
    /// the header's credential was redacted before, and its scheme is the
    /// placeholder's context, not a secret. A value of any other rule
    /// that ends in a scheme word (`password=Xk9v:Bearer [redacted: jwt]`)
    /// is a value like any other.
    fn scheme_before_placeholder(
        &self,
        hay: &[u8],
        span: &Span,
        placeholders: &[(usize, usize)],
    ) -> bool {
        let (header, bearer) = self.inner.header_rules;
        if !matches!(span.label, Label::Rule(pid) if pid == header || pid == bearer) {
            return false;
        }
        let text = hay[span.start..span.end].trim_ascii();
        let word = (text.rsplit(|&b| matches!(b, b'=' | b':' | b'"' | b'\'' | b' ' | b'\t')))
            .next()
            .unwrap_or_default();
        let before = &text[..text.len() - word.len()];
        if !rules::is_known_scheme(word) || !is_authorization_key(before) {
            return false;
        }
        let mut next = span.end;
        loop {
            match hay.get(next..) {
                Some([b' ' | b'\t', ..]) => next += 1,
                Some([b'%', b'2', b'0', ..]) => next += 3,
                _ => break,
            }
        }
        placeholders
            .binary_search_by_key(&next, |&(start, _)| start)
            .is_ok()
    }

    /// Bytes of the replacement for `label`.
    pub(crate) fn placeholder_len(&self, label: Label) -> usize {
        match label {
            Label::Cut => CUT.len(),
            Label::Rule(pid) => "[redacted: ]".len() + self.inner.names[pid].len(),
            Label::Named(name) => "[redacted: ]".len() + name.len(),
        }
    }

    fn write_placeholder(&self, label: Label, out: &mut String) {
        match label {
            Label::Cut => out.push_str(CUT),
            Label::Rule(pid) => {
                out.push_str("[redacted: ");
                out.push_str(&self.inner.names[pid]);
                out.push(']');
            }
            Label::Named(name) => {
                out.push_str("[redacted: ");
                out.push_str(name);
                out.push(']');
            }
        }
    }

    /// Writes `hay[from..to]` decoded lossily, each span replaced. `from`
    /// and `to` never fall strictly inside a span.
    pub(crate) fn write_range(
        &self,
        hay: &[u8],
        spans: &[Span],
        from: usize,
        to: usize,
        out: &mut String,
    ) {
        let mut pos = from;
        for span in spans.iter().filter(|s| s.end > from && s.start < to) {
            push_lossy(&hay[pos..span.start.max(pos)], out);
            self.write_placeholder(span.label, out);
            pos = span.end;
        }
        if pos < to {
            push_lossy(&hay[pos..to], out);
        }
    }

    /// Writes all of `hay`, each span replaced.
    pub(crate) fn write(&self, hay: &[u8], spans: &[Span], out: &mut String) {
        self.write_range(hay, spans, 0, hay.len(), out);
    }

    /// The counts of `spans`.
    pub(crate) fn count(&self, spans: &[Span]) -> RedactionCounts {
        let mut counts = RedactionCounts::default();
        for span in spans {
            match span.label {
                Label::Cut => counts.cut_words += 1,
                Label::Rule(pid) => {
                    *counts
                        .rules
                        .entry(self.inner.names[pid].clone())
                        .or_insert(0) += 1
                }
                Label::Named(name) => *counts.rules.entry(name.to_owned()).or_insert(0) += 1,
            }
        }
        counts
    }
}

/// What shows a word cut by the edge of a window or a clamp.
pub(crate) const CUT: &str = "[cut]";

/// The most a cut hides: 2048 bytes, more than any secret shape the rules
/// know has in one word (a GitHub token is at most 259 bytes, a cloud key
/// far less, a JWT seldom over 1,500), counted from the outer edge of the
/// [`CUT_MARGIN`] (so at most 1,536 visible bytes). A word cut by an edge
/// that is longer shows its far part: the 10 MiB line a helper printed
/// shows its end.
pub const MAX_CUT_HIDDEN: usize = 2048;

/// Bytes kept, never shown, beyond each cut edge of a retained window:
/// 512. The rules read them with the window, so a secret that straddles
/// the edge is found whole and its visible part is redacted by its rule,
/// and a word the edge cuts is shown when the rules saw where it starts.
///
/// 512 bytes hold every one-word secret shape the rules know with its key
/// before it (a GitHub token is at most 259 bytes, a `github_pat_` 266,
/// cloud and API keys under 200, PEM lines 64; `password=` or
/// `Authorization: Bearer ` add a few dozen). Only a word that covers the
/// whole margin (longer than it: a long JWT, a base64 blob) and could hold
/// a secret (ASCII with a letter, not a run of one byte) is still hidden
/// as `[cut]`. A
/// capture reserves each margin from the retention pool, on top of its
/// budget, when it first drops a byte: at most 512 bytes in `tail` and
/// `head` mode, 1,024 in `head_and_tail` (one per inner edge).
/// [`MAX_CUT_HIDDEN`] counts from the margin's outer edge.
pub const CUT_MARGIN: usize = 512;

/// Whether a run of bytes cut by an edge could be part of a secret: it
/// holds an ASCII letter. Every secret shape the rules know has letters
/// in any stretch of a few dozen bytes, and a run cut by an edge is at
/// least the margin long when it reaches the visible text; a run of
/// digits (a counter, a number printed whole) is no secret. The bytes no
/// secret has (not ASCII, a run of one byte) already end the run
/// ([`cut_limit_forward`]).
pub(crate) fn may_hold_secret(run: &[u8]) -> bool {
    run.iter().any(u8::is_ascii_alphabetic)
}

/// A run of this many copies of one byte holds no secret.
const NO_SECRET_RUN: usize = 8;

/// How far a cut that hides `hay[from..]` may go: no more than
/// [`MAX_CUT_HIDDEN`] bytes, and not into bytes no secret has (a byte that
/// is not ASCII, or a run of [`NO_SECRET_RUN`] copies of one byte): the
/// first such byte, where its run begins.
pub(crate) fn cut_limit_forward(hay: &[u8], from: usize) -> usize {
    let end = hay.len().min(from.saturating_add(MAX_CUT_HIDDEN));
    let (mut run_start, mut run_byte) = (from, None);
    for (i, &b) in hay.iter().enumerate().take(end).skip(from) {
        if b >= 0x80 {
            return i;
        }
        if Some(b) != run_byte {
            (run_start, run_byte) = (i, Some(b));
        } else if i + 1 - run_start >= NO_SECRET_RUN {
            return run_start;
        }
    }
    // A run that goes on past the bound still ends the cut where it began.
    let mut i = end;
    while i < hay.len() && run_byte == Some(hay[i]) {
        if i + 1 - run_start >= NO_SECRET_RUN {
            return run_start;
        }
        i += 1;
    }
    end
}

/// How far back a cut that hides `hay[..to]` may go: the lowest start, by
/// the same bounds as [`cut_limit_forward`] read backwards.
pub(crate) fn cut_limit_backward(hay: &[u8], to: usize) -> usize {
    let to = to.min(hay.len());
    let floor = to.saturating_sub(MAX_CUT_HIDDEN);
    let (mut run_end, mut run_byte) = (to, None);
    for i in (floor..to).rev() {
        let b = hay[i];
        if b >= 0x80 {
            return i + 1;
        }
        if Some(b) != run_byte {
            (run_end, run_byte) = (i + 1, Some(b));
        } else if run_end - i >= NO_SECRET_RUN {
            return run_end;
        }
    }
    let mut i = floor;
    while i > 0 && run_byte == Some(hay[i - 1]) {
        if run_end - (i - 1) >= NO_SECRET_RUN {
            return run_end;
        }
        i -= 1;
    }
    floor
}

impl Default for Redactor {
    /// The built-in rules only.
    fn default() -> Self {
        Self::builtin()
    }
}

impl PartialEq for Redactor {
    fn eq(&self, other: &Self) -> bool {
        self.inner.extra == other.inner.extra
    }
}

impl Eq for Redactor {}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("builtin_rules", &BUILTIN_RULES.len())
            .field("extra_patterns", &self.inner.extra)
            .finish()
    }
}

/// A text with its secrets replaced, and what was replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    /// The redacted text.
    pub text: String,
    /// How many secrets each rule replaced.
    pub counts: RedactionCounts,
}

/// How many secrets each rule replaced in one view, and how many words cut
/// by a window or clamp edge were hidden.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedactionCounts {
    rules: BTreeMap<String, u64>,
    cut_words: u64,
}

impl RedactionCounts {
    /// Secrets replaced by any rule (hidden cut words are not secrets found
    /// and are not counted here; see [`cut_words`](Self::cut_words)).
    pub fn total(&self) -> u64 {
        self.rules.values().sum()
    }

    /// Secrets replaced by the rule named `name`.
    pub fn rule(&self, name: &str) -> u64 {
        self.rules.get(name).copied().unwrap_or(0)
    }

    /// Every rule that replaced something, with its count, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.rules.iter().map(|(name, &n)| (name.as_str(), n))
    }

    /// Words cut by the edge of a window or a clamp, shown as `[cut]`.
    pub fn cut_words(&self) -> u64 {
        self.cut_words
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &RedactionCounts) {
        for (name, n) in &other.rules {
            *self.rules.entry(name.clone()).or_insert(0) += n;
        }
        self.cut_words += other.cut_words;
    }
}

/// The secrets replaced in a finished call's rendered output, per stream
/// and rule (the record holds the totals, `stderr_redactions` and
/// `stdout_redactions`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamRedactions {
    /// In the rendered stderr.
    pub stderr: RedactionCounts,
    /// In the rendered stdout.
    pub stdout: RedactionCounts,
}

/// Which ends of a text are cut edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Edges {
    /// Bytes were dropped before the text.
    pub(crate) start: bool,
    /// With `start`: the text does not begin at the cut, but after the rest
    /// of a character the cut split (continuation bytes, trimmed from the
    /// view). Its first byte then follows a retained byte that is no blank,
    /// so it starts no argument.
    pub(crate) start_trimmed: bool,
    /// Bytes were dropped after the text.
    pub(crate) end: bool,
}

impl Edges {
    pub(crate) const NONE: Edges = Edges {
        start: false,
        start_trimmed: false,
        end: false,
    };
}

/// What replaces a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Label {
    /// A secret found by the rule with this pattern id.
    Rule(usize),
    /// A word cut by an edge.
    Cut,
    /// A secret found by one of the scanners that work outside the rules'
    /// regex set (see `scanners`), with its rule name.
    Named(&'static str),
}

/// Whether `before` is nothing, a quote, or an authorization header's key
/// with its separator (`authorization=`, `"Proxy-Authorization": "`).
fn is_authorization_key(before: &[u8]) -> bool {
    let separators = |b: &u8| matches!(b, b'"' | b'\'' | b':' | b'=' | b' ' | b'\t');
    let key = before.trim_ascii();
    let key = key
        .strip_prefix(b"\"")
        .or_else(|| key.strip_prefix(b"'"))
        .unwrap_or(key);
    if key.iter().all(separators) {
        return true;
    }
    let key = strip_prefix_ignoring_case(key, b"proxy-").unwrap_or(key);
    strip_prefix_ignoring_case(key, b"authorization")
        .is_some_and(|rest| rest.iter().all(separators))
}

/// `bytes` without `prefix`, compared without case, if it starts so.
fn strip_prefix_ignoring_case<'a>(bytes: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let (head, rest) = bytes.split_at_checked(prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then_some(rest)
}

/// Bytes `start..end` of a text are replaced by the placeholder of `label`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) label: Label,
}

/// Sorts and joins overlapping spans; a rule's label wins over a cut.
fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for span in spans {
        match out.last_mut() {
            Some(last) if span.start < last.end => {
                last.end = last.end.max(span.end);
                if last.label == Label::Cut {
                    last.label = span.label;
                }
            }
            _ => out.push(span),
        }
    }
    out
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Moves a span's start back to the start of the character it cuts.
fn snap_start(hay: &[u8], mut start: usize) -> usize {
    let floor = start.saturating_sub(3);
    while start > floor && start < hay.len() && is_continuation(hay[start]) {
        start -= 1;
    }
    start
}

/// Moves a span's end on past the rest of the character it cuts.
fn snap_end(hay: &[u8], mut end: usize) -> usize {
    let ceiling = (end + 3).min(hay.len());
    while end < ceiling && is_continuation(hay[end]) {
        end += 1;
    }
    end
}

/// Words after which the next word is a credential: `Authorization:`,
/// a scheme, `password:` and the like.
const CREDENTIAL_KEYWORDS: &[&[u8]] = &[
    b"authorization:",
    b"bearer",
    b"basic",
    b"token",
    b"digest",
    b"password:",
    b"passwd:",
    b"secret:",
    b"token:",
    b"key:",
    // Flags that take a credential as the next argument (`--password X`).
    b"password",
    b"passwd",
    b"secret",
    b"api-key",
    b"apikey",
    // `curl -u user:SECRET`, `--user user:SECRET`.
    b"-u",
    b"--user",
];

/// `value` redacted member by member (see `Outcome::redacted_result`),
/// with the number of secrets replaced: every string on its own, object
/// keys included; a scalar member whose `"key": value` pair has more
/// secrets than its key and its value alone (a rule that reads across the
/// JSON's syntax, as the assignment rules do) becomes the string
/// `"[redacted: RULE]"`.
pub(crate) fn redact_json(
    redactor: &Redactor,
    value: &serde_json::Value,
) -> (serde_json::Value, u64) {
    use serde_json::Value;
    let text = |text: &str| {
        let Redacted { text, counts } = redactor.redact(text);
        (text, counts.total())
    };
    match value {
        Value::String(s) => {
            let (shown, found) = text(s);
            (Value::String(shown), found)
        }
        Value::Array(items) => {
            let mut found = 0;
            let items = items
                .iter()
                .map(|item| {
                    let (shown, n) = redact_json(redactor, item);
                    found += n;
                    shown
                })
                .collect();
            (Value::Array(items), found)
        }
        Value::Object(fields) => {
            let mut found = 0;
            let mut shown = serde_json::Map::new();
            for (key, member) in fields {
                let (key_shown, in_key) = text(key);
                let (member_shown, in_member) = redact_json(redactor, member);
                let mut pair = serde_json::Map::new();
                pair.insert(key.clone(), member.clone());
                let across = match member {
                    Value::Array(_) | Value::Object(_) => None,
                    _ => {
                        let pair = redactor.redact(&Value::Object(pair).to_string());
                        let rule = pair.counts.iter().next().map(|(rule, _)| rule.to_owned());
                        rule.filter(|_| pair.counts.total() > in_key + in_member)
                    }
                };
                let member_shown = match across {
                    Some(rule) => {
                        found += 1;
                        Value::String(format!("[redacted: {rule}]"))
                    }
                    None => member_shown,
                };
                found += in_key + in_member;
                shown.insert(key_shown, member_shown);
            }
            (Value::Object(shown), found)
        }
        other => (other.clone(), 0),
    }
}

/// Whether `word` may be the end of a credential keyword (`…arer` of
/// `Bearer`, `…ation:` of `Authorization:`, `d":` of `"password":`) or
/// ends with one (`_key":` of `"api_key":`). Quotes and blanks are
/// ignored and `=` counts as `:`.
fn may_end_keyword(word: &[u8]) -> bool {
    let word: Vec<u8> = word
        .iter()
        .filter(|&&b| b != b'"' && b != b'\'' && !b.is_ascii_whitespace())
        .map(|&b| {
            if b == b'=' {
                b':'
            } else {
                b.to_ascii_lowercase()
            }
        })
        .collect();
    !word.is_empty()
        && CREDENTIAL_KEYWORDS
            .iter()
            .any(|k| k.ends_with(&word) || word.ends_with(k))
}

/// Whether a cut word running on from an edge ends at `hay[i]`: ASCII
/// whitespace, or a quote that closes a value. A closing quote is not
/// escaped (no backslash before it, and not the first byte, whose escape
/// may have been cut away) and is followed by the end or by what follows a
/// value (a blank, `,`, `}`, `]`, `)`, `:` or `;`). So a cut in one value of
/// a long line of JSON hides that value, not the whole line, while a quote
/// inside a secret (`Xy7'k9`, `hun\"ter`, SQL's `''`) ends nothing.
pub(crate) fn ends_word_at(hay: &[u8], i: usize) -> bool {
    let Some(&b) = hay.get(i) else {
        return true;
    };
    b.is_ascii_whitespace()
        || (matches!(b, b'"' | b'\'')
            && i > 0
            && hay[i - 1] != b'\\'
            && hay.get(i + 1).is_none_or(|&next| {
                next.is_ascii_whitespace()
                    || matches!(next, b',' | b'}' | b']' | b')' | b':' | b';')
            }))
}

/// Whether a cut word running back from an edge starts just after
/// `hay[i]`: ASCII whitespace, or a quote that opens a value (at the start,
/// or after a blank, `,`, `{`, `[`, `(`, `:` or `=`).
pub(crate) fn starts_word_after(hay: &[u8], i: usize) -> bool {
    let b = hay[i];
    b.is_ascii_whitespace()
        || (matches!(b, b'"' | b'\'')
            && (i == 0 || {
                let before = hay[i - 1];
                before.is_ascii_whitespace()
                    || matches!(before, b',' | b'{' | b'[' | b'(' | b':' | b'=')
            }))
}

/// The end of the word that starts at `from`: the first `i` at which
/// [`ends_word_at`] holds, or the end of `hay`.
pub(crate) fn word_end(hay: &[u8], from: usize) -> usize {
    (from..hay.len())
        .find(|&i| ends_word_at(hay, i))
        .unwrap_or(hay.len())
}

/// The start of the word that ends at `to` (no earlier than `floor`).
pub(crate) fn word_start(hay: &[u8], floor: usize, to: usize) -> usize {
    (floor..to)
        .rev()
        .find(|&i| starts_word_after(hay, i))
        .map_or(floor, |i| i + 1)
}

/// On the first line of a text whose start was cut away, the arguments
/// that rules take only after their program's name (`-pSECRET` after
/// `mysql`, `-u user:SECRET` after `curl`): the cut may have taken the
/// name, so they are taken without it. An argument starts after a blank or
/// a quote, as in the rules, or at the text's first byte when `at_cut`:
/// the byte before it was dropped and may have been a blank. When the
/// text begins after the trimmed rest of a character the cut split, that
/// character stands before the first byte, which so starts no argument
/// (`mysql é-pX` is no password either). `rules` are the pattern ids of
/// the `mysql-password` and `user-password-flag` rules.
fn cut_context_flags(hay: &[u8], at_cut: bool, rules: (usize, usize)) -> Vec<Span> {
    let line = &hay[..memchr::memchr(b'\n', hay).unwrap_or(hay.len())];
    let mut spans = Vec::new();
    let blank = |b: u8| b == b' ' || b == b'\t' || b == b'\'' || b == b'"';
    let mut at = 0;
    while at + 2 < line.len() {
        let starts_arg = if at == 0 { at_cut } else { blank(line[at - 1]) };
        let arg_end = |from: usize| {
            line[from..]
                .iter()
                .position(|&b| b.is_ascii_whitespace() || b == b'\'' || b == b'"')
                .map_or(line.len(), |i| from + i)
        };
        if starts_arg && line[at..].starts_with(b"-p") {
            let end = arg_end(at + 2);
            if end > at + 2 && rules::plausible(&line[at + 2..end], true) {
                spans.push(Span {
                    start: at + 2,
                    end,
                    label: Label::Rule(rules.0),
                });
            }
        } else if starts_arg
            && line[at..].starts_with(b"-u")
            && line.get(at + 2).is_some_and(|&b| b == b' ' || b == b'\t')
        {
            let mut user = at + 2;
            while line.get(user).is_some_and(|&b| blank(b)) {
                user += 1;
            }
            let end = arg_end(user);
            if let Some(colon) = line[user..end].iter().position(|&b| b == b':') {
                let from = user + colon + 1;
                if from < end && rules::plausible(&line[from..end], true) {
                    spans.push(Span {
                        start: from,
                        end,
                        label: Label::Rule(rules.1),
                    });
                }
            }
        }
        at += 1;
    }
    spans
}

/// Whether `b` may stand between a credential keyword and its value.
fn between_key_and_value(b: &u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b':' | b'=')
}

/// The end of the word cut by the start of `hay` (up to the first ASCII
/// whitespace or closing quote). When that word, with what follows it up
/// to the next word, may be the end of a credential keyword, or the cut
/// fell on the blank before a word, the credential that follows is hidden
/// with it: up to two more words (then the second value is `true`: what
/// follows a keyword is hidden whatever it holds).
fn cut_word_end(hay: &[u8]) -> (usize, bool) {
    let next_word = |from: usize| {
        hay[from..]
            .iter()
            .position(|b| !between_key_and_value(b))
            .map(|i| from + i)
    };
    let (mut start, mut end) = (0, word_end(hay, 0));
    let mut blank_start = end == 0 && matches!(hay.first(), Some(b' ' | b'\t'));
    let mut after_keyword = false;
    for _ in 0..2 {
        let next = next_word(end);
        let keyword_end = blank_start || may_end_keyword(&hay[start..next.unwrap_or(hay.len())]);
        blank_start = false;
        match next {
            Some(word) if keyword_end => {
                start = word;
                end = word_end(hay, word);
                after_keyword = true;
            }
            _ => break,
        }
    }
    (end, after_keyword)
}

fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

/// The end of a run of key-body lines at the start of `hay` (a block whose
/// BEGIN line was cut away and whose END line is not in the text): the cut
/// line, then at least one full line of base64 (40 or more characters with
/// both cases, as PEM writes 64 per line), then maybe a shorter last line.
/// Lines end with a newline or a JSON `\n` escape.
fn key_body_run(hay: &[u8]) -> Option<usize> {
    let mut pos = 0;
    let mut full_lines = 0;
    let mut run_end = None;
    let mut first = true;
    loop {
        let line_end = pos
            + hay[pos..]
                .iter()
                .position(|&b| !is_base64(b))
                .unwrap_or(hay.len() - pos);
        let line = &hay[pos..line_end];
        let rest = &hay[line_end..];
        let separator = if rest.is_empty() {
            Some(0)
        } else if rest.starts_with(b"\r\n") || rest.starts_with(b"\\n") {
            Some(2)
        } else if rest[0] == b'\n' {
            Some(1)
        } else {
            None
        };
        let Some(separator) = separator else {
            // A line with other characters is not part of a key body.
            return run_end;
        };
        let full = line.len() >= 40
            && line.iter().any(u8::is_ascii_uppercase)
            && line.iter().any(u8::is_ascii_lowercase);
        if first {
            first = false;
        } else if full {
            full_lines += 1;
            run_end = Some(line_end);
        } else {
            // A shorter line after full ones is the block's last line.
            if full_lines > 0 && !line.is_empty() {
                run_end = Some(line_end);
            }
            return run_end;
        }
        if separator == 0 {
            return run_end;
        }
        pos = line_end + separator;
    }
}

/// Appends `bytes` decoded lossily: valid UTF-8 (nearly all output) is
/// checked by the standard library's fast path and copied as it is.
fn push_lossy(bytes: &[u8], out: &mut String) {
    match std::str::from_utf8(bytes) {
        Ok(text) => out.push_str(text),
        Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod anchor_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ops;
#[cfg(test)]
mod tests_syntax;
