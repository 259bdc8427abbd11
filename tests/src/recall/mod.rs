//! The redaction recall corpus: secrets of every class, in every syntax a
//! tool prints them in, carried the ways output reaches a view, generated
//! from a small deterministic generator. `tests/redaction_recall.rs`
//! measures spillguard on it; `cargo xtask bench --only redact` measures
//! spillguard and detect-secrets side by side.
//!
//! # What an item is
//!
//! An [`Item`] is one secret in one text: its [`Class`], its context (the
//! syntax around it, or how the text is carried), the full text a tool
//! printed (one or more lines, ending with a newline), the secret's bytes as
//! they stand in that text (JSON-escaped inside a JSON string), and how the
//! text is fed to a capture ([`Feed`]).
//!
//! Each class has its forms (the syntax it appears in, e.g. an XML element,
//! a `.netrc` line). Each form is carried six ways: as printed (the context
//! is the form's syntax), inside a JSON string as `serde_json` encodes a log
//! line (`json-escaped`), after an ANSI colour (`ansi`), after a progress
//! line ended by a carriage return (`cr`), fed in two writes split at a
//! random byte inside the secret (`split`), and in a tail window whose
//! edge cuts the secret at a random byte, at least [`leak_len`]` + 1`
//! bytes of it left visible (`window-edge`).
//!
//! # When an item is recalled
//!
//! The text is fed to a [`StreamCapture`] (whole, in two writes, or into a
//! tail window of the item's budget) and its window rendered. With `n` the
//! secret's length and `L = min(8, ceil(n / 2))` ([`leak_len`]), the item
//! is **recalled** when the rendering holds no `L`-byte substring of the
//! secret (so no longer one either) **and** at least one secret was
//! counted as redacted (a `[cut]` alone is not a redaction). A provider
//! token's fixed prefix is part of its secret: a rendering that keeps
//! `ghp_` and hides the rest holds no 8-byte substring.
//!
//! Provider tokens stand after a neutral key (`value`, `Value:`, `?v=`), so
//! their class measures the provider formats, not the key vocabulary.

mod forms;

use spillguard_core::{CaptureSettings, RetentionPool, StreamCapture, StreamName};

use forms::{
    Base, cli_option_forms, config_layout_forms, config_set_forms, dsn_forms, encoded_forms,
    key_syntax_forms, private_key_forms, protocol_trace_forms, provider_forms, quoted_symbol_forms,
    sql_password_forms, url_forms,
};

/// A class of secret, reported on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// A provider's token format (`ghp_…`, `AKIA…`, a JWT).
    ProviderToken,
    /// A quoted value after a credential key, holding shell symbols.
    QuotedSymbolValue,
    /// A credential key in XML, Go maps, cookies, next-word forms,
    /// connection strings and key names with prefixes and suffixes.
    KeySyntax,
    /// A URL's userinfo or signed-URL parameter.
    Url,
    /// A base64-encoded credential (docker `auth`, Kubernetes `data:`,
    /// `Authorization: Basic`).
    Encoded,
    /// A PEM or OpenSSH private-key block.
    PrivateKey,
    /// A SQL password clause (`WITH PASSWORD '…'`, `IDENTIFIED BY '…'`).
    SqlPassword,
    /// A data source name's password (`user:pw@tcp(…)`, Oracle's
    /// `user/pw@db`, URLs with IPv6 and several hosts).
    Dsn,
    /// A CLI's short password option (`-w`, `-P`, `-storepass`, `-U
    /// user%pw`, `pass:`).
    CliOption,
    /// A CLI's `config set KEY VALUE` with a credential key.
    ConfigSet,
    /// A config layout: YAML blocks, XML attribute pairs, TOML multi-line
    /// strings, `.pgpass` lines, INI values with `;` and `#`.
    ConfigLayout,
    /// A protocol trace: SMTP `AUTH`, FTP and POP3 `PASS`, Redis `AUTH`,
    /// a percent-encoded `Bearer`.
    ProtocolTrace,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 12] = [
        Class::ProviderToken,
        Class::QuotedSymbolValue,
        Class::KeySyntax,
        Class::Url,
        Class::Encoded,
        Class::PrivateKey,
        Class::SqlPassword,
        Class::Dsn,
        Class::CliOption,
        Class::ConfigSet,
        Class::ConfigLayout,
        Class::ProtocolTrace,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Class::ProviderToken => "provider-token",
            Class::QuotedSymbolValue => "quoted-symbol-value",
            Class::KeySyntax => "key-syntax",
            Class::Url => "url",
            Class::Encoded => "encoded",
            Class::PrivateKey => "private-key",
            Class::SqlPassword => "sql-password",
            Class::Dsn => "dsn",
            Class::CliOption => "cli-option",
            Class::ConfigSet => "config-set",
            Class::ConfigLayout => "config-layout",
            Class::ProtocolTrace => "protocol-trace",
        }
    }
}

/// How an item's text reaches the capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// In one write, into a window that keeps all of it.
    Whole,
    /// In two writes, the first of this many bytes.
    Split(usize),
    /// In one write, into a tail window of this many bytes, whose edge
    /// cuts the secret.
    Tail(usize),
}

/// One secret in one text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Its class.
    pub class: Class,
    /// The form: the provider (`github`) or the syntax (`xml-element`).
    pub form: &'static str,
    /// The context: the form's syntax (`json`, `netrc`, …) when printed as
    /// is, else how it is carried (`json-escaped`, `ansi`, `cr`, `split`,
    /// `window-edge`).
    pub context: &'static str,
    /// The form's own syntax (`json`, `yaml`, `netrc`, …), whatever the
    /// carrier.
    pub syntax: &'static str,
    /// The full text, ending with a newline.
    pub text: String,
    /// The secret's bytes as they stand in `text`.
    pub secret: String,
    /// How `text` is fed.
    pub feed: Feed,
}

/// The carriers every form goes through, after its own syntax.
pub const CARRIERS: [&str; 5] = ["json-escaped", "ansi", "cr", "split", "window-edge"];

/// The length of the shortest substring of a secret of `n` bytes whose
/// presence in a rendering counts as a leak: `min(8, ceil(n / 2))`.
pub fn leak_len(n: usize) -> usize {
    n.div_ceil(2).clamp(1, 8)
}

/// The first substring of `secret`, [`leak_len`] bytes long, that
/// `rendering` holds, if any.
pub fn leak<'a>(rendering: &str, secret: &'a str) -> Option<&'a str> {
    // The placeholders are the library's words, not the helper's: a rule
    // named after its provider (`[redacted: rubygems-api-key]`) shows no
    // part of a `rubygems_…` token.
    let rendering = without_placeholders(rendering);
    let rendering = rendering.as_str();
    let bytes = secret.as_bytes();
    let len = leak_len(bytes.len());
    (0..=bytes.len().saturating_sub(len))
        .filter_map(|i| secret.get(i..i + len))
        .find(|part| rendering.contains(part))
}

/// Whether `rendering` holds a part of `secret` ([`leak_len`] bytes) that
/// `elsewhere` (the rest of the item's text) does not.
fn leaks_beyond(rendering: &str, secret: &str, elsewhere: &str) -> bool {
    let rendering = without_placeholders(rendering);
    let len = leak_len(secret.len());
    (0..=secret.len().saturating_sub(len))
        .filter_map(|i| secret.get(i..i + len))
        .any(|part| rendering.contains(part) && !elsewhere.contains(part))
}

/// `rendering` with every `[redacted: RULE]` placeholder taken out.
fn without_placeholders(rendering: &str) -> String {
    let mut out = String::with_capacity(rendering.len());
    let mut rest = rendering;
    while let Some(at) = rest.find("[redacted: ") {
        out.push_str(&rest[..at]);
        match rest[at..].find(']') {
            Some(end) => rest = &rest[at + end + 1..],
            None => {
                rest = &rest[at..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// An item rendered through a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendering {
    /// The window's rendering.
    pub text: String,
    /// Secrets counted as redacted in it.
    pub redactions: u64,
    /// Words cut by the window's edge and hidden as `[cut]` (a secret
    /// longer than the context margin that the edge cut).
    pub cut_words: u64,
}

impl Item {
    /// The raw bytes the capture's window holds once fed: the whole text,
    /// or its last `budget` bytes for [`Feed::Tail`]. This is what another
    /// scanner is given to read.
    pub fn window_bytes(&self) -> &str {
        match self.feed {
            Feed::Tail(budget) => &self.text[self.text.len() - budget..],
            _ => &self.text,
        }
    }

    /// Feeds the text to a stderr capture with the built-in rules, as its
    /// [`Feed`] says, and renders the window.
    pub fn render(&self) -> Rendering {
        let bytes = self.text.as_bytes();
        let budget = match self.feed {
            Feed::Tail(budget) => budget,
            _ => bytes.len(),
        };
        let pool = RetentionPool::unlimited();
        let mut capture =
            StreamCapture::new(CaptureSettings::tail(StreamName::Stderr, budget), &pool);
        match self.feed {
            Feed::Split(at) => {
                let _ = capture.feed(&bytes[..at]);
                let _ = capture.feed(&bytes[at..]);
            }
            _ => {
                let _ = capture.feed(bytes);
            }
        }
        let (text, counts) = capture.window().render_with_redactions();
        Rendering {
            text,
            redactions: counts.total(),
            cut_words: counts.cut_words(),
        }
    }

    /// Whether `rendering` recalls this item: no leak of the secret, and at
    /// least one redaction counted (or, at a window's edge, a cut word
    /// hidden).
    pub fn recalled_by(&self, rendering: &Rendering) -> bool {
        let hidden = match self.feed {
            // A secret longer than the context margin, cut by the edge, is
            // hidden whole as `[cut]`: no rule can see it, and none of it
            // shows.
            Feed::Tail(_) => rendering.redactions + rendering.cut_words,
            _ => rendering.redactions,
        };
        // A part of the secret that the text shows elsewhere too (the
        // `https://` of a webhook URL in a URL's query) is no leak.
        let elsewhere = self.text.replacen(&self.secret, "\n", 1);
        let leaked = leak(&rendering.text, &self.secret)
            .is_some_and(|_| leaks_beyond(&rendering.text, &self.secret, &elsewhere));
        hidden > 0 && !leaked
    }

    /// The file name extension a file scanner is given this item under:
    /// `yaml` or `ini` where the text as printed is YAML or INI (scanners
    /// read those without quotes around values), else `log`.
    pub fn extension(&self) -> &'static str {
        if matches!(self.context, "json-escaped" | "ansi" | "cr") {
            return "log";
        }
        match self.syntax {
            "yaml"
            | "yaml-double"
            | "yaml-single"
            | "kubernetes-pem"
            | "kubernetes-password"
            | "kubernetes-dockerconfigjson"
            | "ansible-become-pass"
            | "private-key-name" => "yaml",
            "ini" => "ini",
            _ => "log",
        }
    }

    /// Where the secret starts in the text.
    fn secret_at(&self) -> usize {
        self.text.find(&self.secret).unwrap_or(0)
    }
}

/// A small deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const DIGITS: &[u8] = b"0123456789";
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const HEX: &[u8] = b"0123456789abcdef";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
/// The symbols a shell would read as syntax.
const SHELL_SYMBOLS: &[u8] = b"$&();|<>{}`";
/// Other symbols passwords hold.
const OTHER_SYMBOLS: &[u8] = b"!@#%^*-_=+.,:?~";

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `low..=high`.
    pub fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next_u64() % (high - low + 1) as u64) as usize
    }

    fn pick(&mut self, alphabet: &[u8]) -> u8 {
        alphabet[self.range(0, alphabet.len() - 1)]
    }

    /// `n` characters of `alphabet`.
    pub fn draw(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n).map(|_| char::from(self.pick(alphabet))).collect()
    }

    /// `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// A password of 14 to 24 characters with both cases, digits and at
    /// least two shell symbols (no quote or backslash).
    pub fn symbol_password(&mut self) -> String {
        let n = self.range(14, 24);
        let mut chars: Vec<u8> = Vec::with_capacity(n);
        chars.extend([
            self.pick(UPPER),
            self.pick(LOWER),
            self.pick(DIGITS),
            self.pick(DIGITS),
            self.pick(SHELL_SYMBOLS),
            self.pick(SHELL_SYMBOLS),
        ]);
        let all = [ALNUM, ALNUM, SHELL_SYMBOLS, OTHER_SYMBOLS].concat();
        while chars.len() < n {
            chars.push(self.pick(&all));
        }
        // Shuffle, so the symbols stand anywhere.
        for i in (1..chars.len()).rev() {
            let j = self.range(0, i);
            chars.swap(i, j);
        }
        chars.into_iter().map(char::from).collect()
    }

    /// An alphanumeric password of 12 to 32 characters with both cases and
    /// a digit.
    pub fn password(&mut self) -> String {
        let n = self.range(12, 32);
        format!(
            "{}{}{}{}",
            self.draw(UPPER, 1),
            self.draw(LOWER, 1),
            self.draw(ALNUM, n - 3),
            self.draw(DIGITS, 1)
        )
    }
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(B64[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `text` with every byte outside `A-Za-z0-9-._~` percent-escaped.
pub fn percent_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `base` as printed, and through each of the [`CARRIERS`].
fn carried(class: Class, base: Base, rng: &mut Rng, out: &mut Vec<Item>) {
    let (form, syntax, text, secret) = base;
    let plain = Item {
        class,
        form,
        context: syntax,
        syntax,
        text,
        secret,
        feed: Feed::Whole,
    };
    let line = plain.text.strip_suffix('\n').unwrap_or(&plain.text);
    let escaped = |s: &str| {
        let json = serde_json::Value::String(s.to_owned()).to_string();
        json[1..json.len() - 1].to_owned()
    };
    let with = |context, text: String, secret: String, feed| Item {
        class,
        form,
        context,
        syntax,
        text,
        secret,
        feed,
    };
    out.push(with(
        "json-escaped",
        format!(
            "{{\"level\":\"info\",\"ts\":1767225600.5,\"msg\":\"{}\"}}\n",
            escaped(line)
        ),
        escaped(&plain.secret),
        Feed::Whole,
    ));
    out.push(with(
        "ansi",
        format!("\u{1b}[32m{line}\u{1b}[0m\n"),
        plain.secret.clone(),
        Feed::Whole,
    ));
    out.push(with(
        "cr",
        format!("Downloading 45% ########\r{line}\n"),
        plain.secret.clone(),
        Feed::Whole,
    ));
    let at = plain.secret_at();
    let n = plain.secret.len();
    let split = at + rng.range(1, n - 1);
    out.push(with(
        "split",
        plain.text.clone(),
        plain.secret.clone(),
        Feed::Split(split),
    ));
    let cut = at + rng.range(1, n - leak_len(n) - 1);
    out.push(with(
        "window-edge",
        plain.text.clone(),
        plain.secret.clone(),
        Feed::Tail(plain.text.len() - cut),
    ));
    out.push(plain);
}

/// The corpus drawn from `seed`: every class's forms, each as printed and
/// through every carrier (2,000 items or more, at least 100 per class).
pub fn corpus(seed: u64) -> Vec<Item> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let classes: [(Class, Vec<Base>); 12] = [
        (Class::ProviderToken, provider_forms(seed)),
        (Class::QuotedSymbolValue, quoted_symbol_forms(&mut rng)),
        (Class::KeySyntax, key_syntax_forms(&mut rng)),
        (Class::Url, url_forms(&mut rng)),
        (Class::Encoded, encoded_forms(&mut rng)),
        (Class::PrivateKey, private_key_forms(&mut rng)),
        (Class::SqlPassword, sql_password_forms(&mut rng)),
        (Class::Dsn, dsn_forms(&mut rng)),
        (Class::CliOption, cli_option_forms(&mut rng)),
        (Class::ConfigSet, config_set_forms(&mut rng)),
        (Class::ConfigLayout, config_layout_forms(&mut rng)),
        (Class::ProtocolTrace, protocol_trace_forms(&mut rng)),
    ];
    for (class, bases) in classes {
        for base in bases {
            carried(class, base, &mut rng, &mut out);
        }
    }
    out
}

/// The seed of the corpus the test and the bench measure.
pub const SEED: u64 = 0x5EC2_E7C0_2B05;

/// Recall of one class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Items of the class.
    pub items: usize,
    /// Items recalled.
    pub recalled: usize,
}

impl Tally {
    /// Recalled items over items, in percent.
    pub fn percent(&self) -> f64 {
        if self.items == 0 {
            return 0.0;
        }
        100.0 * self.recalled as f64 / self.items as f64
    }
}

/// The tally per class (in [`Class::ALL`] order) of `recalled`, one flag
/// per item of `items`.
pub fn tally(items: &[Item], recalled: &[bool]) -> Vec<(Class, Tally)> {
    Class::ALL
        .iter()
        .map(|&class| {
            let mut tally = Tally::default();
            for (item, &hit) in items.iter().zip(recalled) {
                if item.class == class {
                    tally.items += 1;
                    tally.recalled += usize::from(hit);
                }
            }
            (class, tally)
        })
        .collect()
}
