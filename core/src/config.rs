//! The `helper_output` configuration: budgets, retention mode, grace; and
//! [`DebugGrant`], a host's bounded raise of the stderr budget.
//!
//! A [`Config`] is an explicit structure with public fields named like the
//! file's keys. Load it with [`Config::from_toml_str`] (the adapter reads the
//! file; the core only parses text), or build it in code and call
//! [`Config::validate`]. Every error names the field and the rule it broke.
//! **An excerpt cap is at least the longest marker of its retention mode**
//! (`CallSettings::validate` checks the same for settings built by hand),
//! so an excerpt never cuts its marker.
//!
//! ```
//! use spillguard_core::{Config, Retain};
//!
//! let config = Config::from_toml_str(
//!     r#"
//!     [helper_output]
//!     stderr_retained_per_call_bytes = 16384
//!     stderr_retained_process_bytes = 262144
//!     stderr_agent_excerpt_bytes = 4096
//!     shutdown_grace_seconds = 5
//!     retain = "tail"
//!     "#,
//! )?;
//! assert_eq!(config, Config::default());
//!
//! let err = Config::from_toml_str("[helper_output]\nstderr_agent_excerpt_bytes = 20000\n")
//!     .unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "helper_output.stderr_agent_excerpt_bytes: 20000 is larger than \
//!      stderr_retained_per_call_bytes (16384)"
//! );
//! # Ok::<(), spillguard_core::ConfigError>(())
//! ```
//!
//! # Why the defaults are what they are
//!
//! * `stderr_retained_per_call_bytes = 16384`: a few hundred lines of
//!   diagnostics, enough for the last error and its context, and more than a
//!   person reads during a failure; small enough that fifty calls at their
//!   limit cost under a megabyte.
//! * `stderr_retained_process_bytes = 262144`: sixteen calls at their full
//!   per-call budget at once. An agent host rarely has more helpers talking at
//!   the same moment; past that, calls keep less and say so.
//! * `stderr_agent_excerpt_bytes = 4096`: about a thousand tokens. A model
//!   deciding whether to retry needs the error, the status and a tail, not a
//!   transcript that crowds out the rest of its context.
//! * `shutdown_grace_seconds = 5`: long enough for a well-behaved helper to
//!   flush and close a remote session after SIGTERM, short enough that a
//!   cancel still feels immediate to the person who asked for it.
//! * `stdin_close_grace_seconds = 2`: how long a streamed helper (an MCP
//!   server) gets to exit on its own once its stdin is closed, before
//!   SIGTERM; the wait the MCP SDKs use for the same step of the stdio
//!   shutdown.
//! * `retain = "tail"`: errors come last, after pages of progress output.
//! * `stderr_head_bytes` (prefix of `head_and_tail`): a quarter of the
//!   per-call budget, enough for a command line or version banner.
//! * `debug_ceiling_bytes = 1048576`: a debug grant may raise the per-call
//!   budget to 1 MiB, no further, so debugging cannot reopen unbounded logs.
//!   The process budget still applies: a debug call that would take more
//!   than the pool has keeps less and says so.

use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::redact::Redactor;

/// Which bytes of a stream are kept once it outgrows its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Retain {
    /// Keep the most recent bytes (a ring). The default: errors come last.
    #[default]
    Tail,
    /// Keep the first bytes, drop what follows.
    Head,
    /// Keep a short prefix and a tail, with a marker between them.
    HeadAndTail,
}

impl Retain {
    /// The name used in files, records and markers.
    pub fn as_str(self) -> &'static str {
        match self {
            Retain::Tail => "tail",
            Retain::Head => "head",
            Retain::HeadAndTail => "head_and_tail",
        }
    }

    /// Parses `tail`, `head` or `head_and_tail` (also spelt
    /// `head-and-tail`, as on the command line).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "tail" => Some(Retain::Tail),
            "head" => Some(Retain::Head),
            // The command line's spelling is accepted too.
            "head_and_tail" | "head-and-tail" => Some(Retain::HeadAndTail),
            _ => None,
        }
    }
}

impl fmt::Display for Retain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `helper_output` settings. Field names are the file's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Most stderr bytes one call retains. Default 16384; at least
    /// [`stderr_agent_excerpt_bytes`](Self::stderr_agent_excerpt_bytes)
    /// (4096 by default): below that, lower the excerpt with it.
    pub stderr_retained_per_call_bytes: u64,
    /// Most stderr bytes all concurrent calls retain together.
    /// Default 262144.
    pub stderr_retained_process_bytes: u64,
    /// Most bytes of stderr excerpt handed to a model, marker included.
    /// Default 4096; at least [`Config::MIN_EXCERPT_BYTES`], at least the
    /// longest marker of the retention mode (124 bytes for `tail`, 125 for
    /// `head`, 199 for `head_and_tail`), and at most
    /// [`stderr_retained_per_call_bytes`](Self::stderr_retained_per_call_bytes).
    pub stderr_agent_excerpt_bytes: u64,
    /// How long a helper may take to exit after SIGTERM before SIGKILL.
    /// Written in seconds (integer or decimal). Default 5 s.
    pub shutdown_grace_seconds: Duration,
    /// Retention mode. Default [`Retain::Tail`].
    pub retain: Retain,
    /// Prefix size for [`Retain::HeadAndTail`]; `None` means a quarter of
    /// the per-call budget.
    pub stderr_head_bytes: Option<u64>,
    /// Opt-in kill-on-overflow: stop the helper once it wrote more
    /// than this many stderr bytes. `None` (the default) never kills.
    pub stderr_kill_after_bytes: Option<u64>,
    /// Hard ceiling for a debug grant's per-call budget. Default 1 MiB.
    pub debug_ceiling_bytes: u64,
    /// How long a streamed helper (an MCP server) may take to exit once its
    /// stdin is closed, before its group gets SIGTERM. Written in seconds
    /// (integer or decimal), at most [`Config::MAX_SHUTDOWN_GRACE`].
    /// Default 2 s.
    pub stdin_close_grace_seconds: Duration,
    /// The redaction rules for every text rendered under this
    /// configuration: the built-in rules (always on; nothing switches them
    /// off, not a debug grant either) plus the file's
    /// `redact_extra_patterns = ["…"]`, compiled once when loaded. Build one
    /// in code with [`Redactor::with_extra_patterns`]. Default: the
    /// built-in rules only.
    pub redact_extra_patterns: Redactor,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            stderr_retained_per_call_bytes: 16_384,
            stderr_retained_process_bytes: 262_144,
            stderr_agent_excerpt_bytes: 4_096,
            shutdown_grace_seconds: Duration::from_secs(5),
            retain: Retain::Tail,
            stderr_head_bytes: None,
            stderr_kill_after_bytes: None,
            debug_ceiling_bytes: 1 << 20,
            stdin_close_grace_seconds: Duration::from_secs(2),
            redact_extra_patterns: Redactor::builtin(),
        }
    }
}

/// The keys of the `helper_output` table, in file order.
const KEYS: [&str; 10] = [
    "stderr_retained_per_call_bytes",
    "stderr_retained_process_bytes",
    "stderr_agent_excerpt_bytes",
    "shutdown_grace_seconds",
    "retain",
    "stderr_head_bytes",
    "stderr_kill_after_bytes",
    "debug_ceiling_bytes",
    "stdin_close_grace_seconds",
    "redact_extra_patterns",
];

impl Config {
    /// Smallest allowed excerpt: room for the truncation marker and a line.
    pub const MIN_EXCERPT_BYTES: u64 = 128;
    /// Longest allowed shutdown grace or stdin close grace.
    pub const MAX_SHUTDOWN_GRACE: Duration = Duration::from_secs(600);

    /// Parses a TOML document with a `[helper_output]` table and validates
    /// it. Keys left out take their defaults; other top-level tables are
    /// ignored (the file may hold the host's other settings); unknown keys
    /// inside `helper_output` are errors.
    #[cfg(feature = "toml")]
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            ConfigError::new("helper_output", Rule::Syntax(e.message().to_owned()))
        })?;
        let table = match doc.get("helper_output") {
            Some(toml::Value::Table(t)) => t,
            Some(_) => return Err(ConfigError::new("helper_output", Rule::NotATable)),
            None => {
                let found = doc
                    .iter()
                    .filter(|(_, value)| value.is_table())
                    .map(|(name, _)| name.clone())
                    .collect();
                return Err(ConfigError::new("helper_output", Rule::Missing { found }));
            }
        };
        let mut config = Config::default();
        for (key, value) in table {
            match key.as_str() {
                "stderr_retained_per_call_bytes" => {
                    config.stderr_retained_per_call_bytes = bytes(key, value)?
                }
                "stderr_retained_process_bytes" => {
                    config.stderr_retained_process_bytes = bytes(key, value)?
                }
                "stderr_agent_excerpt_bytes" => {
                    config.stderr_agent_excerpt_bytes = bytes(key, value)?
                }
                "shutdown_grace_seconds" => config.shutdown_grace_seconds = seconds(key, value)?,
                "retain" => {
                    let name = value
                        .as_str()
                        .ok_or_else(|| ConfigError::new(key, Rule::WrongType("a string")))?;
                    config.retain = Retain::from_name(name).ok_or_else(|| {
                        ConfigError::new(key, Rule::UnknownRetain(name.to_owned()))
                    })?;
                }
                "stderr_head_bytes" => config.stderr_head_bytes = Some(bytes(key, value)?),
                "stderr_kill_after_bytes" => {
                    config.stderr_kill_after_bytes = Some(bytes(key, value)?)
                }
                "debug_ceiling_bytes" => config.debug_ceiling_bytes = bytes(key, value)?,
                "stdin_close_grace_seconds" => {
                    config.stdin_close_grace_seconds = seconds(key, value)?
                }
                "redact_extra_patterns" => {
                    config.redact_extra_patterns = extra_patterns(key, value)?
                }
                _ => return Err(ConfigError::new(key, Rule::UnknownKey)),
            }
        }
        config.validate()?;
        Ok(config)
    }

    /// Checks every rule; the first broken one is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let per_call = self.stderr_retained_per_call_bytes;
        let process = self.stderr_retained_process_bytes;
        let excerpt = self.stderr_agent_excerpt_bytes;
        for (field, value) in [
            (KEYS[0], per_call),
            (KEYS[1], process),
            (KEYS[2], excerpt),
            (KEYS[7], self.debug_ceiling_bytes),
        ] {
            if value == 0 {
                return Err(ConfigError::new(field, Rule::Zero));
            }
        }
        let min_excerpt = Self::MIN_EXCERPT_BYTES.max(longest_marker(self.retain));
        if excerpt < min_excerpt {
            return Err(ConfigError::new(
                KEYS[2],
                Rule::BelowMinimum {
                    value: excerpt,
                    min: min_excerpt,
                },
            ));
        }
        if excerpt > per_call {
            return Err(ConfigError::new(
                KEYS[2],
                Rule::Exceeds {
                    value: excerpt,
                    other: KEYS[0],
                    limit: per_call,
                },
            ));
        }
        if per_call > process {
            return Err(ConfigError::new(
                KEYS[0],
                Rule::Exceeds {
                    value: per_call,
                    other: KEYS[1],
                    limit: process,
                },
            ));
        }
        if let Some(head) = self.stderr_head_bytes
            && head > per_call
        {
            return Err(ConfigError::new(
                KEYS[5],
                Rule::Exceeds {
                    value: head,
                    other: KEYS[0],
                    limit: per_call,
                },
            ));
        }
        if self.stderr_kill_after_bytes == Some(0) {
            return Err(ConfigError::new(KEYS[6], Rule::Zero));
        }
        if self.debug_ceiling_bytes < per_call {
            return Err(ConfigError::new(
                KEYS[7],
                Rule::Below {
                    value: self.debug_ceiling_bytes,
                    other: KEYS[0],
                    limit: per_call,
                },
            ));
        }
        for (field, grace) in [
            (KEYS[3], self.shutdown_grace_seconds),
            (KEYS[8], self.stdin_close_grace_seconds),
        ] {
            if grace > Self::MAX_SHUTDOWN_GRACE {
                return Err(ConfigError::new(field, Rule::GraceTooLong(grace)));
            }
        }
        Ok(())
    }

    /// The prefix kept by [`Retain::HeadAndTail`].
    pub fn head_bytes(&self) -> u64 {
        self.stderr_head_bytes
            .unwrap_or(self.stderr_retained_per_call_bytes / 4)
            .min(self.stderr_retained_per_call_bytes)
    }
}

/// Bytes of the longest truncation marker a stderr excerpt kept in mode
/// `retain` can need (its counts at their widest), with its newlines: an
/// excerpt cap below it would cut the marker.
pub(crate) fn longest_marker(retain: Retain) -> u64 {
    crate::render::marker_reserve(crate::capture::StreamName::Stderr, retain, u64::MAX, true) as u64
}

#[cfg(feature = "toml")]
fn bytes(key: &str, value: &toml::Value) -> Result<u64, ConfigError> {
    match value {
        toml::Value::Integer(n) => {
            u64::try_from(*n).map_err(|_| ConfigError::new(key, Rule::Negative))
        }
        _ => Err(ConfigError::new(
            key,
            Rule::WrongType("a non-negative integer (bytes)"),
        )),
    }
}

#[cfg(feature = "toml")]
fn extra_patterns(key: &str, value: &toml::Value) -> Result<Redactor, ConfigError> {
    let wrong = || ConfigError::new(key, Rule::WrongType("an array of strings (patterns)"));
    let items = value.as_array().ok_or_else(wrong)?;
    let patterns = items
        .iter()
        .map(|item| item.as_str().map(str::to_owned).ok_or_else(wrong))
        .collect::<Result<Vec<_>, _>>()?;
    Redactor::with_extra_patterns(patterns).map_err(|e| {
        ConfigError::new(
            key,
            Rule::BadPattern {
                pattern: e.pattern,
                message: e.message,
            },
        )
    })
}

#[cfg(feature = "toml")]
fn seconds(key: &str, value: &toml::Value) -> Result<Duration, ConfigError> {
    let secs = match value {
        toml::Value::Integer(n) => *n as f64,
        toml::Value::Float(f) => *f,
        _ => {
            return Err(ConfigError::new(
                key,
                Rule::WrongType("a number of seconds"),
            ));
        }
    };
    if secs.is_nan() || secs < 0.0 {
        return Err(ConfigError::new(key, Rule::Negative));
    }
    Duration::try_from_secs_f64(secs)
        .map_err(|_| ConfigError::new(key, Rule::GraceTooLong(Config::MAX_SHUTDOWN_GRACE)))
}

/// A configuration value that breaks a rule; names the field and the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The offending key of `helper_output` (or `helper_output` itself).
    pub field: String,
    /// The rule it broke.
    pub rule: Rule,
}

impl ConfigError {
    fn new(field: &str, rule: Rule) -> Self {
        Self {
            field: field.to_owned(),
            rule,
        }
    }
}

/// The rule a configuration value broke.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rule {
    /// The document is not valid TOML.
    Syntax(String),
    /// There is no `[helper_output]` table; the tables the file has
    /// instead (a misspelt name would be among them).
    Missing {
        /// The names of the file's top-level tables.
        found: Vec<String>,
    },
    /// `helper_output` is not a table.
    NotATable,
    /// The key is not one of the known keys.
    UnknownKey,
    /// The value has the wrong type; the string says what was expected.
    WrongType(&'static str),
    /// A count or duration is negative.
    Negative,
    /// A budget is zero.
    Zero,
    /// `retain` is not `tail`, `head` or `head_and_tail`.
    UnknownRetain(String),
    /// The value is below a fixed minimum.
    BelowMinimum {
        /// The value given.
        value: u64,
        /// The minimum.
        min: u64,
    },
    /// The value is larger than another field allows.
    Exceeds {
        /// The value given.
        value: u64,
        /// The field that bounds it.
        other: &'static str,
        /// That field's value.
        limit: u64,
    },
    /// The value is smaller than another field requires.
    Below {
        /// The value given.
        value: u64,
        /// The field that bounds it.
        other: &'static str,
        /// That field's value.
        limit: u64,
    },
    /// A grace is longer than [`Config::MAX_SHUTDOWN_GRACE`].
    GraceTooLong(Duration),
    /// The value cannot be used with another setting; the text says why.
    Incompatible(&'static str),
    /// The value breaks a rule of its own; the text says which.
    Invalid(String),
    /// The extra redaction patterns take longer than their budget to
    /// redact a 16 KiB test window (checked by the host when it starts, on
    /// its clock: see `spillguard_host::REDACTION_BUDGET`).
    TooSlow {
        /// What they took, in microseconds.
        micros: u64,
        /// The budget, in microseconds.
        budget_micros: u64,
    },
    /// An extra redaction pattern does not compile or matches the empty
    /// string.
    BadPattern {
        /// The pattern.
        pattern: String,
        /// Why it was refused.
        message: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field == "helper_output" {
            write!(f, "helper_output: ")?;
        } else {
            write!(f, "helper_output.{}: ", self.field)?;
        }
        self.rule.fmt(f)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Syntax(msg) => write!(f, "not valid TOML: {msg}"),
            Rule::Missing { found } if found.is_empty() => write!(
                f,
                "the [helper_output] table is missing (the file has no table; \
                 every key in it is optional, the table is not)"
            ),
            Rule::Missing { found } => write!(
                f,
                "the [helper_output] table is missing (the file's tables: {})",
                found.join(", ")
            ),
            Rule::NotATable => write!(f, "must be a table"),
            Rule::UnknownKey => write!(f, "unknown key (known keys: {})", KEYS.join(", ")),
            Rule::WrongType(expected) => write!(f, "must be {expected}"),
            Rule::Negative => write!(f, "must not be negative"),
            Rule::Zero => write!(f, "must be greater than zero"),
            Rule::UnknownRetain(name) => {
                write!(
                    f,
                    "unknown mode {name:?} (expected \"tail\", \"head\" or \"head_and_tail\")"
                )
            }
            Rule::BelowMinimum { value, min } => write!(f, "{value} is below the minimum of {min}"),
            Rule::Exceeds {
                value,
                other,
                limit,
            } => write!(f, "{value} is larger than {other} ({limit})"),
            Rule::Below {
                value,
                other,
                limit,
            } => write!(f, "{value} is smaller than {other} ({limit})"),
            Rule::TooSlow {
                micros,
                budget_micros,
            } => write!(
                f,
                "the patterns took {micros} us to redact a 16 KiB test window, over the \
                 budget of {budget_micros} us (the built-in rules take about 50): bound \
                 their repetitions or anchor them on a literal"
            ),
            Rule::GraceTooLong(d) => write!(
                f,
                "{:.3} s is longer than the maximum of {} s",
                d.as_secs_f64(),
                Config::MAX_SHUTDOWN_GRACE.as_secs()
            ),
            Rule::Incompatible(why) => f.write_str(why),
            Rule::Invalid(why) => f.write_str(why),
            Rule::BadPattern { pattern, message } => {
                write!(f, "pattern {pattern:?} is not valid: {message}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// A bounded-time debug mode: raises the per-call budget, up to the
/// configured ceiling, for calls started before `until`
/// ([`CallSettings::with_debug`](crate::CallSettings::with_debug)) and for
/// calls live when it is given, until `until`
/// ([`Input::DebugGranted`](crate::Input::DebugGranted)). Every
/// call it touched is marked `debug: true`. There is no global quiet switch.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use spillguard_core::{CaptureSettings, Config, DebugGrant};
///
/// let config = Config::default();
/// let now = Instant::now();
/// let grant = DebugGrant::new(&config, now, Duration::from_secs(60), 262_144)?;
/// let during = CaptureSettings::for_call(&config, Some(&grant), now);
/// assert_eq!((during.budget, during.debug), (262_144, true));
/// let after = CaptureSettings::for_call(&config, Some(&grant), now + Duration::from_secs(60));
/// assert_eq!((after.budget, after.debug), (16_384, false));
/// # Ok::<(), spillguard_core::DebugGrantError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DebugGrant {
    until: Instant,
    per_call_bytes: u64,
}

impl DebugGrant {
    /// Longest grant.
    pub const MAX_DURATION: Duration = Duration::from_secs(3600);

    /// Grants `per_call_bytes` per call from `now` for `duration`.
    pub fn new(
        config: &Config,
        now: Instant,
        duration: Duration,
        per_call_bytes: u64,
    ) -> Result<Self, DebugGrantError> {
        if duration.is_zero() || duration > Self::MAX_DURATION {
            return Err(DebugGrantError::Duration(duration));
        }
        if per_call_bytes > config.debug_ceiling_bytes {
            return Err(DebugGrantError::AboveCeiling {
                asked: per_call_bytes,
                ceiling: config.debug_ceiling_bytes,
            });
        }
        Ok(Self {
            until: now + duration,
            per_call_bytes,
        })
    }

    /// Whether the grant covers a call started at `now`.
    pub fn is_active(&self, now: Instant) -> bool {
        now < self.until
    }

    /// When the grant ends.
    pub fn until(&self) -> Instant {
        self.until
    }

    /// The per-call budget it grants.
    pub fn per_call_bytes(&self) -> u64 {
        self.per_call_bytes
    }
}

/// Why a debug grant was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DebugGrantError {
    /// The duration is zero or longer than [`DebugGrant::MAX_DURATION`].
    Duration(Duration),
    /// The budget asked for is above `debug_ceiling_bytes`.
    AboveCeiling {
        /// Bytes asked for.
        asked: u64,
        /// The configured ceiling.
        ceiling: u64,
    },
}

impl fmt::Display for DebugGrantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DebugGrantError::Duration(d) => write!(
                f,
                "debug grant duration {:.3} s must be above zero and at most {} s",
                d.as_secs_f64(),
                DebugGrant::MAX_DURATION.as_secs()
            ),
            DebugGrantError::AboveCeiling { asked, ceiling } => write!(
                f,
                "debug grant of {asked} bytes per call is above debug_ceiling_bytes ({ceiling})"
            ),
        }
    }
}

impl std::error::Error for DebugGrantError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        Config::from_toml_str(&format!("[helper_output]\n{body}\n"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn every_rule_names_its_field() {
        assert_eq!(
            err("stderr_retained_per_call_bytes = 0"),
            "helper_output.stderr_retained_per_call_bytes: must be greater than zero"
        );
        assert_eq!(
            err("stderr_retained_process_bytes = 0"),
            "helper_output.stderr_retained_process_bytes: must be greater than zero"
        );
        assert_eq!(
            err("stderr_agent_excerpt_bytes = 0"),
            "helper_output.stderr_agent_excerpt_bytes: must be greater than zero"
        );
        assert_eq!(
            err("stderr_agent_excerpt_bytes = 64"),
            "helper_output.stderr_agent_excerpt_bytes: 64 is below the minimum of 128"
        );
        assert_eq!(
            err("stderr_retained_per_call_bytes = 300000"),
            "helper_output.stderr_retained_per_call_bytes: 300000 is larger than stderr_retained_process_bytes (262144)"
        );
        assert_eq!(
            err("retain = \"middle\""),
            "helper_output.retain: unknown mode \"middle\" (expected \"tail\", \"head\" or \"head_and_tail\")"
        );
        for spelling in ["head_and_tail", "head-and-tail"] {
            let text = format!("[helper_output]\nretain = \"{spelling}\"\n");
            let config = Config::from_toml_str(&text).unwrap();
            assert_eq!(config.retain, Retain::HeadAndTail, "{spelling}");
        }
        assert!(err("quiet = true").starts_with(
            "helper_output.quiet: unknown key (known keys: stderr_retained_per_call_bytes, "
        ));
        assert_eq!(
            err("stderr_retained_per_call_bytes = -1"),
            "helper_output.stderr_retained_per_call_bytes: must not be negative"
        );
        assert_eq!(
            err("stderr_retained_per_call_bytes = \"16k\""),
            "helper_output.stderr_retained_per_call_bytes: must be a non-negative integer (bytes)"
        );
        assert_eq!(
            err("shutdown_grace_seconds = -0.5"),
            "helper_output.shutdown_grace_seconds: must not be negative"
        );
        assert_eq!(
            err("shutdown_grace_seconds = 601"),
            "helper_output.shutdown_grace_seconds: 601.000 s is longer than the maximum of 600 s"
        );
        assert_eq!(
            err("stderr_head_bytes = 20000"),
            "helper_output.stderr_head_bytes: 20000 is larger than stderr_retained_per_call_bytes (16384)"
        );
        assert_eq!(
            err("stderr_kill_after_bytes = 0"),
            "helper_output.stderr_kill_after_bytes: must be greater than zero"
        );
        assert_eq!(
            err("debug_ceiling_bytes = 1000"),
            "helper_output.debug_ceiling_bytes: 1000 is smaller than stderr_retained_per_call_bytes (16384)"
        );
        assert_eq!(
            err("redact_extra_patterns = [\"ok-[0-9]+\", \"(bad\"]"),
            "helper_output.redact_extra_patterns: pattern \"(bad\" is not valid: unclosed group"
        );
        assert_eq!(
            err("redact_extra_patterns = [\"a?\"]"),
            "helper_output.redact_extra_patterns: pattern \"a?\" is not valid: \
             it matches the empty string"
        );
        assert_eq!(
            err("redact_extra_patterns = \"x\""),
            "helper_output.redact_extra_patterns: must be an array of strings (patterns)"
        );
        assert_eq!(
            Config::from_toml_str("[other]\nx = 1\n")
                .unwrap_err()
                .to_string(),
            "helper_output: the [helper_output] table is missing (the file's tables: other)"
        );
        assert_eq!(
            Config::from_toml_str("[helper_outptu]\nretain = \"head\"\n[host]\n")
                .unwrap_err()
                .to_string(),
            "helper_output: the [helper_output] table is missing (the file's tables: \
             helper_outptu, host)"
        );
        assert_eq!(
            Config::from_toml_str("").unwrap_err().to_string(),
            "helper_output: the [helper_output] table is missing (the file has no table; \
             every key in it is optional, the table is not)"
        );
        assert!(
            Config::from_toml_str("[helper_output\n")
                .unwrap_err()
                .to_string()
                .starts_with("helper_output: not valid TOML: ")
        );
    }

    #[test]
    fn values_are_read_and_defaults_fill_the_rest() {
        let c = Config::from_toml_str(
            "[helper_output]\nretain = \"head_and_tail\"\nshutdown_grace_seconds = 0.25\nstderr_head_bytes = 1000\n[other]\nignored = 1\n",
        )
        .unwrap();
        assert_eq!(c.retain, Retain::HeadAndTail);
        assert_eq!(c.shutdown_grace_seconds, Duration::from_millis(250));
        assert_eq!(c.head_bytes(), 1000);
        assert_eq!(c.stderr_retained_per_call_bytes, 16_384);
        assert_eq!(Config::default().head_bytes(), 4096);
        assert_eq!(Config::default().validate(), Ok(()));
    }

    #[test]
    fn extra_patterns_are_compiled_once_at_load() {
        let c =
            Config::from_toml_str("[helper_output]\nredact_extra_patterns = [\"corp-[0-9]{4}\"]\n")
                .unwrap();
        assert_eq!(c.redact_extra_patterns.extra_patterns(), ["corp-[0-9]{4}"]);
        let out = c
            .redact_extra_patterns
            .redact("id corp-1234 password=x7Kp2q");
        assert_eq!(
            out.text,
            "id [redacted: extra-0] password=[redacted: password-assignment]"
        );
        assert_eq!(
            Config::default().redact_extra_patterns.extra_patterns(),
            [] as [String; 0]
        );
    }
}
