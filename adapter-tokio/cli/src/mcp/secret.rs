//! Secret parameters: a tool parameter whose value is a credential, by its
//! name or by `secret = true`, and the views that must not show it.
//!
//! A parameter is secret when the tools file says `secret = true`, or when
//! it is a string parameter whose name is a credential key and the file
//! does not say `secret = false`. The name is split into words at `_`,
//! `-` and lower-to-upper case changes (`db_password`, `x_auth_token`,
//! `apiKey`); it is a credential key when one word is `password`,
//! `passwd`, `pwd`, `pass`, `passphrase`, `secret`, `token`, `credential`,
//! `credentials`, `auth`, `session`, `cookie`, `signature`, `apikey`,
//! `accesskey`, `privatekey` or `clientsecret`, or two words in a row are
//! `api key`, `access key`, `private key` or `client secret`.
//! `passenger`, `author` and `max_tokens` are not.
//!
//! A secret parameter's value still reaches the helper as its argument.
//! Everywhere else it reads `[redacted: secret-parameter]`: in the target,
//! the summary (the shell-quoted command line) and so the approval card,
//! the audit log's events and the record, which are made from them with
//! the value replaced before any quoting; in an invalid call's error; and
//! wherever the value occurs in the `tools/call` result (the structured
//! content's strings, the result and the text a model reads), when it is
//! at least [`MIN_MASKED`] bytes long.

use serde_json::{Map, Value};

/// What replaces a secret parameter's value.
pub const SECRET_PARAMETER: &str = "[redacted: secret-parameter]";

/// The shortest value replaced wherever it occurs in a result: shorter
/// ones would turn ordinary text into placeholders (they are still
/// replaced in the views made from the arguments).
pub const MIN_MASKED: usize = 3;

/// Single words that make a parameter name a credential key.
const WORDS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "pass",
    "passphrase",
    "secret",
    "token",
    "credential",
    "credentials",
    "auth",
    "session",
    "cookie",
    "signature",
    "apikey",
    "accesskey",
    "privatekey",
    "clientsecret",
];

/// Two words in a row that make a parameter name a credential key.
const PAIRS: &[(&str, &str)] = &[
    ("api", "key"),
    ("access", "key"),
    ("private", "key"),
    ("client", "secret"),
];

/// Whether `name` is a credential key (see the module docs).
pub fn is_credential_name(name: &str) -> bool {
    let words = words(name);
    words.iter().any(|w| WORDS.contains(&w.as_str()))
        || words
            .windows(2)
            .any(|pair| PAIRS.contains(&(pair[0].as_str(), pair[1].as_str())))
}

/// `name`'s words, lower case: split at `_`, `-`, `.` and where a lower
/// case letter or a digit is followed by an upper case one.
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous: Option<char> = None;
    for c in name.chars() {
        let boundary = matches!(c, '_' | '-' | '.')
            || (c.is_ascii_uppercase()
                && previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit()));
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if !matches!(c, '_' | '-' | '.') {
            word.push(c.to_ascii_lowercase());
        }
        previous = Some(c);
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The values of a call's secret parameters, to be replaced in what the
/// call shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretValues {
    /// Longest first, so that a value inside another is not replaced
    /// first.
    values: Vec<String>,
}

impl SecretValues {
    /// The values given to the secret parameters `secret` names, as the
    /// helper receives them (a string as it is, any other value as its
    /// JSON text).
    pub fn of(arguments: &Map<String, Value>, secret: impl Fn(&str) -> bool) -> Self {
        let mut values: Vec<String> = arguments
            .iter()
            .filter(|(name, _)| secret(name))
            .filter_map(|(_, value)| match value {
                Value::String(s) => Some(s.clone()),
                Value::Null | Value::Array(_) | Value::Object(_) => None,
                other => Some(other.to_string()),
            })
            .filter(|value| value.len() >= MIN_MASKED)
            .collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Self { values }
    }

    /// Whether there is nothing to replace.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `text` with every occurrence of a value replaced.
    pub fn mask(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for value in &self.values {
            if text.contains(value.as_str()) {
                text = text.replace(value.as_str(), SECRET_PARAMETER);
            }
        }
        text
    }

    /// `value` with every occurrence of a value replaced in its strings
    /// (object keys included).
    pub fn mask_json(&self, value: &Value) -> Value {
        if self.is_empty() {
            return value.clone();
        }
        match value {
            Value::String(s) => Value::String(self.mask(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.mask_json(v)).collect()),
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| (self.mask(k), self.mask_json(v)))
                    .collect(),
            ),
            Value::Number(n) if self.values.contains(&n.to_string()) => {
                Value::String(SECRET_PARAMETER.to_owned())
            }
            other => other.clone(),
        }
    }
}
