//! A tool's parameters: `params.NAME = { type = …, … }`, loaded and
//! checked with the tools file (see [`Param`] for the keys).
//!
//! A `pattern` is compiled when the file is loaded and must be anchored at
//! both ends, every alternative included (checked on regex-syntax's HIR):
//! JSON Schema patterns match anywhere in a value, so an unanchored one
//! would check only a part of it.

use regex_syntax::hir::Look;
use serde_json::{Number, Value};

use super::template::is_param_name;
use super::tools::{ToolsError, as_str, as_table, check_keys, one_line};

/// A parameter's JSON type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamType {
    /// A JSON string, substituted as it is.
    String,
    /// A JSON integer (no fraction, no exponent), substituted in decimal.
    Integer,
    /// A JSON number, substituted as its JSON text.
    Number,
    /// `true` or `false`, substituted as that word.
    Boolean,
}

impl ParamType {
    /// The name in the file and in the JSON Schema.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
        }
    }
}

/// A declared parameter: `params.NAME = { type = …, … }`.
///
/// Keys: `type` (required: `string`, `integer`, `number` or `boolean`),
/// `description`, `required` (default `true`), `enum` (a non-empty array
/// of values of the type), for strings `pattern` (a regular expression
/// anchored at both ends, `^…$`: JSON Schema patterns match anywhere in the
/// value, so an unanchored one would check only a part of it) and
/// `max_length` (in characters, as JSON Schema counts them), for numbers
/// `minimum` and `maximum` (inclusive; integers for an integer), and
/// `allow_leading_dash` (default `false`): whether a value may make an
/// argument word before the command's `--` begin with `-`, where the
/// program would read it as an option. No `pattern`, `enum` or `minimum`
/// stands in for it (see `prepare.rs`). `secret` (`true` or `false`):
/// whether the value is a credential, shown nowhere but in the helper's
/// argument; by default a string parameter whose name is a credential key
/// (`password`, `db_password`, `apiKey`, …) is one (see `secret.rs`).
#[derive(Debug, Clone)]
pub struct Param {
    /// Its name: letters, digits and `_`, not starting with a digit.
    pub name: String,
    /// Its JSON type.
    pub kind: ParamType,
    /// What the model is told about it.
    pub description: Option<String>,
    /// Whether a call must give it.
    pub required: bool,
    /// The only values allowed.
    pub allowed: Option<Vec<Value>>,
    /// The pattern a string must match.
    pub pattern: Option<Pattern>,
    /// Most characters of a string.
    pub max_length: Option<u64>,
    /// Smallest number allowed.
    pub minimum: Option<Number>,
    /// Largest number allowed.
    pub maximum: Option<Number>,
    /// Whether a value may begin an argument word before the command's
    /// `--` with `-` (`allow_leading_dash`; by default it may not).
    pub allow_leading_dash: bool,
    /// `secret` as the file sets it; `None`: by the name.
    pub secret: Option<bool>,
}

impl Param {
    /// Whether the value is a credential (see `secret.rs`): `secret`, or
    /// else a string parameter with a credential key for a name.
    pub fn is_secret(&self) -> bool {
        self.secret.unwrap_or_else(|| {
            self.kind == ParamType::String && super::secret::is_credential_name(&self.name)
        })
    }
}

/// A compiled `pattern`, with its text as written.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// The pattern as written (and as published in the schema).
    pub source: String,
    pub(crate) regex: regex_lite::Regex,
}

const PARAM_KEYS: &[&str] = &[
    "type",
    "description",
    "required",
    "enum",
    "pattern",
    "max_length",
    "minimum",
    "maximum",
    "allow_leading_dash",
    "secret",
];

impl Param {
    pub(crate) fn load(path: &str, name: &str, value: &toml::Value) -> Result<Self, ToolsError> {
        if !is_param_name(name) {
            return Err(ToolsError::new(
                path,
                "a parameter name is ASCII letters, digits and _, not starting with a digit, at most 64 bytes",
            ));
        }
        let table = as_table(path, value)?;
        check_keys(path, table, PARAM_KEYS)?;
        let field = |key: &str| format!("{path}.{key}");
        let kind = match table.get("type") {
            Some(value) => match as_str(&field("type"), value)? {
                "string" => ParamType::String,
                "integer" => ParamType::Integer,
                "number" => ParamType::Number,
                "boolean" => ParamType::Boolean,
                other => {
                    return Err(ToolsError::new(
                        field("type"),
                        format!(
                            "unknown type {other:?} (expected \"string\", \"integer\", \"number\" or \"boolean\")"
                        ),
                    ));
                }
            },
            None => return Err(ToolsError::new(field("type"), "is required")),
        };
        let only = |key: &str, types: &str| {
            ToolsError::new(
                field(key),
                format!(
                    "only {types} parameter takes {key} (this one is {} {})",
                    super::prepare::article(kind.as_str()),
                    kind.as_str()
                ),
            )
        };
        let description = match table.get("description") {
            Some(value) => Some(as_str(&field("description"), value)?.to_owned()),
            None => None,
        };
        let required = match table.get("required") {
            Some(toml::Value::Boolean(b)) => *b,
            Some(_) => return Err(ToolsError::new(field("required"), "must be true or false")),
            None => true,
        };
        let allowed = match table.get("enum") {
            Some(toml::Value::Array(values)) if !values.is_empty() => {
                let mut allowed = Vec::with_capacity(values.len());
                for (i, value) in values.iter().enumerate() {
                    let at = format!("{path}.enum[{i}]");
                    allowed.push(json_of(&at, kind, value)?);
                }
                Some(allowed)
            }
            Some(_) => {
                return Err(ToolsError::new(
                    field("enum"),
                    format!("must be a non-empty array of {} values", kind.as_str()),
                ));
            }
            None => None,
        };
        let pattern = match table.get("pattern") {
            Some(_) if kind != ParamType::String => return Err(only("pattern", "a string")),
            Some(value) => Some(compile(
                &field("pattern"),
                as_str(&field("pattern"), value)?,
            )?),
            None => None,
        };
        let max_length = match table.get("max_length") {
            Some(_) if kind != ParamType::String => return Err(only("max_length", "a string")),
            Some(toml::Value::Integer(n)) if *n >= 0 => Some(*n as u64),
            Some(_) => {
                return Err(ToolsError::new(
                    field("max_length"),
                    "must be a non-negative integer (characters)",
                ));
            }
            None => None,
        };
        let bound = |key: &str| -> Result<Option<Number>, ToolsError> {
            let Some(value) = table.get(key) else {
                return Ok(None);
            };
            match (kind, value) {
                (ParamType::Integer | ParamType::Number, toml::Value::Integer(n)) => {
                    Ok(Some(Number::from(*n)))
                }
                (ParamType::Number, toml::Value::Float(x)) => Number::from_f64(*x)
                    .map(Some)
                    .ok_or_else(|| ToolsError::new(field(key), "must be a finite number")),
                (ParamType::Integer, _) => Err(ToolsError::new(field(key), "must be an integer")),
                (ParamType::Number, _) => Err(ToolsError::new(field(key), "must be a number")),
                _ => Err(only(key, "an integer or a number")),
            }
        };
        let allow_leading_dash = match table.get("allow_leading_dash") {
            Some(toml::Value::Boolean(b)) => *b,
            Some(_) => {
                return Err(ToolsError::new(
                    field("allow_leading_dash"),
                    "must be true or false",
                ));
            }
            None => false,
        };
        let secret = match table.get("secret") {
            Some(toml::Value::Boolean(b)) => Some(*b),
            Some(_) => return Err(ToolsError::new(field("secret"), "must be true or false")),
            None => None,
        };
        let minimum = bound("minimum")?;
        let maximum = bound("maximum")?;
        if let (Some(min), Some(max)) = (&minimum, &maximum)
            && super::prepare::compare(max, min).is_lt()
        {
            return Err(ToolsError::new(
                field("maximum"),
                format!("{max} is below the minimum {min}"),
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            kind,
            description,
            required,
            allowed,
            pattern,
            max_length,
            minimum,
            maximum,
            allow_leading_dash,
            secret,
        })
    }
}

/// Compiles a pattern, which must be anchored at both ends.
fn compile(path: &str, source: &str) -> Result<Pattern, ToolsError> {
    let invalid = |why: String| {
        ToolsError::new(
            path,
            format!("invalid regex {source:?}: {}", one_line(&why)),
        )
    };
    let regex = regex_lite::Regex::new(source).map_err(|e| invalid(e.to_string()))?;
    let hir = regex_syntax::parse(source).map_err(|e| invalid(e.to_string()))?;
    let props = hir.properties();
    if !props.look_set_prefix().contains(Look::Start)
        || !props.look_set_suffix().contains(Look::End)
    {
        return Err(ToolsError::new(
            path,
            format!(
                "{source:?} must be anchored at both ends, every alternative included \
                 (e.g. \"^(?:a|b)$\"): a pattern matches anywhere in the value"
            ),
        ));
    }
    Ok(Pattern {
        source: source.to_owned(),
        regex,
    })
}

/// A TOML value of an `enum` as JSON, checked against the type.
fn json_of(path: &str, kind: ParamType, value: &toml::Value) -> Result<Value, ToolsError> {
    let wrong = || ToolsError::new(path, format!("must be a {} value", kind.as_str()));
    match (kind, value) {
        (ParamType::String, toml::Value::String(s)) => Ok(Value::from(s.clone())),
        (ParamType::Integer | ParamType::Number, toml::Value::Integer(n)) => Ok(Value::from(*n)),
        (ParamType::Number, toml::Value::Float(x)) => {
            Number::from_f64(*x).map(Value::Number).ok_or_else(wrong)
        }
        (ParamType::Boolean, toml::Value::Boolean(b)) => Ok(Value::from(*b)),
        _ => Err(wrong()),
    }
}
