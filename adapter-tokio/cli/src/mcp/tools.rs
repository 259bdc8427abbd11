//! The tools file: `[helper_output]` (the budgets, read by the core's
//! [`Config`]) and one `[tools.NAME]` table per tool, checked as a whole
//! when the file is loaded. Every error names the field's path
//! (`tools.remote_uptime.params.host.pattern: …`); an unknown key is an
//! error, so a typo cannot pass silently.
//!
//! # The rules a file is held to
//!
//! * Top-level keys: `helper_output` (optional; the core's defaults when it
//!   is left out), `tools` (at least one tool) and `bridge` (optional: the
//!   admission limits `max_running` and `queue_timeout_ms`, see
//!   `admission.rs`).
//! * A tool's name is a valid MCP tool name: 1 to 64 ASCII letters, digits,
//!   `_` or `-`.
//! * `command` is a non-empty array of strings. Its first word, the
//!   program, is literal: a parameter never chooses what runs. Every other
//!   word is a template: a `{param}` placeholder is replaced inside its
//!   word, so a value is always part of exactly one argument; a value never
//!   splits a word and never adds one, and no shell reads it. A word that
//!   names an optional parameter the call leaves out is dropped whole
//!   (`"--since={since}"` disappears rather than becoming `--since=`).
//!   `{{` and `}}` are literal braces; any other brace is an error.
//! * Every placeholder names a declared parameter, and every parameter is
//!   named by the command (one that is not would be asked of the model for
//!   nothing).
//! * `target` (optional, the approval card's "where") is a template of the
//!   same kind; a left-out optional parameter renders as nothing there. By
//!   default the target is the command line.
//! * `kind` is `action` (the default) or `discovery`; `approval` is
//!   `required` (the default for an action) or `none` (the only value for a
//!   discovery, which never waits for approval).
//! * `result` is `stdout_text` (the default) or `stdout_json`.
//! * `deadline_ms`, if given, is a positive integer.
//! * `approval_timeout_ms` (only for a tool that requires approval) is how
//!   long the approval card stays valid once shown, a positive integer;
//!   default 120000 (two minutes). Once it has passed, the call ends
//!   `approval_expired`.
//!
//! * No placeholder inside code: a placeholder in a word that an
//!   interpreter runs as code (`sh -c`, `python -c`, `node -e`, `awk`'s
//!   program, `ssh`'s `ProxyCommand`…), or in a word that chooses what runs
//!   (a script, a wrapper's program), is refused; `ssh`'s remote command
//!   takes each value quoted for the remote shell. `code.rs` states the
//!   rule and every program it recognises. Every tool is checked, and each
//!   refused word is reported.
//!
//! See [`Param`] for the parameters' keys (`params.rs`); a parameter that
//! is `secret` (by `secret = true`, or a credential key for a name) is
//! published with `"writeOnly": true`, and its value is shown nowhere but
//! in the helper's argument (`secret.rs`).

use std::fmt;
use std::time::Duration;

use serde_json::Value;
use spillguard_std::Approval;
use spillguard_std::proto::{CallKind, Config};

use super::bounds::Bounds;
use super::params::Param;
use super::secret::SecretValues;
use super::template::Template;

/// A loaded, validated tools file.
#[derive(Debug, Clone)]
pub struct ToolsFile {
    /// The `[helper_output]` budgets (the defaults when the table is left
    /// out).
    pub config: Config,
    /// The tools, in name order.
    pub tools: Vec<Tool>,
    /// The `[bridge]` table: the admission limits (see `admission.rs`).
    pub bridge: super::admission::BridgeTable,
}

/// One tool: what the model sees (name, description, input schema) and
/// what a call of it runs.
#[derive(Debug, Clone)]
pub struct Tool {
    /// The tool's name, as MCP lists it; also the call's `action`.
    pub name: String,
    /// What the tool does, as MCP lists it and the approval card shows it.
    pub description: String,
    /// Its parameters, in name order.
    pub params: Vec<Param>,
    /// Action or discovery.
    pub kind: CallKind,
    /// Whether a call waits for approval.
    pub approval: Approval,
    /// How the helper returns its result.
    pub result: ToolResult,
    /// Longest a call may run after dispatch; `None`: the host's.
    pub deadline: Option<Duration>,
    /// How long the approval card stays valid once shown.
    pub approval_timeout: Duration,
    /// The program, literal.
    pub(crate) program: String,
    /// The arguments, each one word.
    pub(crate) args: Vec<Template>,
    /// How many of `args` come before the first literal `--` word (all of
    /// them when there is none): where a leading `-` makes an option.
    pub(crate) options_end: usize,
    /// The target shown on the card; `None`: the command line.
    pub(crate) target: Option<Template>,
    /// The indices in `args` whose values are quoted for a remote POSIX
    /// shell (`ssh`'s remote command; see `code.rs`).
    pub(crate) remote_quoted: Vec<usize>,
    /// Its limits and sandbox (over `[defaults]`).
    pub(crate) bounds: Bounds,
}

impl Tool {
    /// The values `arguments` gives the tool's secret parameters (see
    /// `secret.rs`), to be replaced in what the call shows.
    pub fn secret_values(&self, arguments: &serde_json::Map<String, Value>) -> SecretValues {
        SecretValues::of(arguments, |name| {
            self.params.iter().any(|p| p.name == name && p.is_secret())
        })
    }
}

/// How a tool's helper returns its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ToolResult {
    /// Stdout is the result, as text (the default).
    #[default]
    StdoutText,
    /// Stdout is a JSON value, parsed at the end of the call.
    StdoutJson,
}

/// A tools file that cannot be used: the field's path and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolsError {
    /// The path of the offending field, e.g. `tools.ls.params.dir.pattern`;
    /// empty for a document that is not TOML.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
    /// Further errors of the same file, reported with this one (every
    /// tool's command is checked for placeholders inside code, so that one
    /// run names each refused word).
    pub more: Vec<ToolsError>,
}

impl ToolsError {
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
            more: Vec::new(),
        }
    }

    /// This error and the further ones, in order.
    pub fn all(&self) -> impl Iterator<Item = &ToolsError> {
        std::iter::once(self).chain(self.more.iter())
    }
}

impl fmt::Display for ToolsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ToolsError {}

/// How long an approval card stays valid once shown, unless the tool says.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);

const TOP_KEYS: &[&str] = &["helper_output", "tools", "bridge", "defaults"];
const TOOL_KEYS: &[&str] = &[
    "description",
    "command",
    "params",
    "approval",
    "kind",
    "result",
    "deadline_ms",
    "approval_timeout_ms",
    "target",
    "limits",
    "sandbox",
    "allow_degraded",
    "contain_tree",
];
impl ToolsFile {
    /// Parses and validates a tools file; the first broken rule is
    /// returned, naming its field.
    pub fn from_toml_str(text: &str) -> Result<Self, ToolsError> {
        let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            let message = one_line(e.message());
            ToolsError::new(
                "",
                match line {
                    Some(line) => format!("not valid TOML: line {line}: {message}"),
                    None => format!("not valid TOML: {message}"),
                },
            )
        })?;
        check_keys("", &doc, TOP_KEYS)?;
        let config = if doc.contains_key("helper_output") {
            // The core ignores the other tables; its errors name
            // `helper_output.KEY` already.
            Config::from_toml_str(text).map_err(|e| {
                let path = if e.field == "helper_output" {
                    "helper_output".to_owned()
                } else {
                    format!("helper_output.{}", e.field)
                };
                ToolsError::new(path, e.rule.to_string())
            })?
        } else {
            Config::default()
        };
        let tools = match doc.get("tools") {
            Some(toml::Value::Table(tools)) if !tools.is_empty() => tools,
            Some(toml::Value::Table(_)) | None => {
                return Err(ToolsError::new(
                    "tools",
                    "no tool is defined (add a [tools.NAME] table)",
                ));
            }
            Some(_) => return Err(ToolsError::new("tools", "must be a table")),
        };
        let defaults = match doc.get("defaults") {
            Some(value) => Bounds::load_defaults(value)?,
            None => Bounds::default(),
        };
        let mut loaded = Vec::with_capacity(tools.len());
        let mut refused: Vec<ToolsError> = Vec::new();
        for (name, value) in tools {
            let mut tool = Tool::load(name, value, &defaults)?;
            let analysis = tool.code_analysis();
            refused.extend(analysis.refusals.into_iter().map(|refusal| {
                ToolsError::new(
                    format!("tools.{name}.command[{}]", refusal.word),
                    refusal.message,
                )
            }));
            tool.remote_quoted = analysis.remote.iter().map(|word| word - 1).collect();
            loaded.push(tool);
        }
        if !refused.is_empty() {
            let mut first = refused.remove(0);
            first.more = refused;
            return Err(first);
        }
        loaded.sort_by(|a, b| a.name.cmp(&b.name));
        let bridge = match doc.get("bridge") {
            Some(value) => super::admission::BridgeTable::load(value)?,
            None => super::admission::BridgeTable::default(),
        };
        Ok(Self {
            config,
            tools: loaded,
            bridge,
        })
    }

    /// The tool of this name.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    /// The tools as an MCP `tools/list` result: `{"tools": [{name,
    /// description, inputSchema}, …]}`, in name order.
    pub fn list_json(&self) -> Value {
        let tools = self
            .tools
            .iter()
            .map(|tool| {
                serde_json::json!({
                    "name": tool.name,
                    "description": tool.description,
                    "inputSchema": tool.input_schema(),
                    "outputSchema": super::answer::output_schema(tool.result),
                })
            })
            .collect();
        serde_json::json!({ "tools": Value::Array(tools) })
    }
}

/// Whether `name` is a valid MCP tool name: 1 to 64 ASCII letters, digits,
/// `_` or `-`.
pub fn is_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Tool {
    fn load(name: &str, value: &toml::Value, defaults: &Bounds) -> Result<Self, ToolsError> {
        let path = format!("tools.{name}");
        if !is_tool_name(name) {
            return Err(ToolsError::new(
                &path,
                "a tool name is 1 to 64 ASCII letters, digits, _ or -",
            ));
        }
        let table = as_table(&path, value)?;
        check_keys(&path, table, TOOL_KEYS)?;
        let field = |key: &str| format!("{path}.{key}");

        let description = match table.get("description") {
            Some(value) => as_str(&field("description"), value)?.to_owned(),
            None => return Err(ToolsError::new(field("description"), "is required")),
        };

        let words = match table.get("command") {
            Some(toml::Value::Array(words)) if !words.is_empty() => words,
            Some(toml::Value::Array(_)) => {
                return Err(ToolsError::new(field("command"), "must not be empty"));
            }
            Some(_) => {
                return Err(ToolsError::new(
                    field("command"),
                    "must be an array of strings",
                ));
            }
            None => return Err(ToolsError::new(field("command"), "is required")),
        };
        let mut texts = Vec::with_capacity(words.len());
        for (i, word) in words.iter().enumerate() {
            let at = format!("{path}.command[{i}]");
            texts.push((at.clone(), as_str(&at, word)?));
        }
        let (program_at, program) = &texts[0];
        if program.is_empty() {
            return Err(ToolsError::new(program_at, "the program must not be empty"));
        }
        let program_template =
            Template::parse(program).map_err(|e| ToolsError::new(program_at, e))?;
        if program_template.params().next().is_some() || program.contains(['{', '}']) {
            return Err(ToolsError::new(
                program_at,
                "the program is literal: a parameter may not choose what runs",
            ));
        }
        let mut args = Vec::with_capacity(texts.len() - 1);
        for (at, text) in &texts[1..] {
            args.push(Template::parse(text).map_err(|e| ToolsError::new(at, e))?);
        }

        let target = match table.get("target") {
            Some(value) => {
                let at = field("target");
                Some(Template::parse(as_str(&at, value)?).map_err(|e| ToolsError::new(&at, e))?)
            }
            None => None,
        };

        let mut params = match table.get("params") {
            Some(value) => {
                let at = field("params");
                let declared = as_table(&at, value)?;
                let mut params = Vec::with_capacity(declared.len());
                for (name, value) in declared {
                    params.push(Param::load(&format!("{at}.{name}"), name, value)?);
                }
                params
            }
            None => Vec::new(),
        };
        params.sort_by(|a, b| a.name.cmp(&b.name));

        // Every placeholder names a parameter; every parameter is used.
        let unknown = |at: &str, param: &str| {
            ToolsError::new(
                at,
                format!("placeholder {{{param}}} names no parameter of tool {name}"),
            )
        };
        let mut used: Vec<&str> = Vec::new();
        for ((at, _), template) in texts[1..].iter().zip(&args) {
            for param in template.params() {
                if !params.iter().any(|p| p.name == param) {
                    return Err(unknown(at, param));
                }
                used.push(param);
            }
        }
        if let Some(param) = target
            .iter()
            .flat_map(Template::params)
            .find(|param| !params.iter().any(|p| p.name == *param))
        {
            return Err(unknown(&field("target"), param));
        }
        if let Some(unused) = params.iter().find(|p| !used.contains(&p.name.as_str())) {
            return Err(ToolsError::new(
                format!("{path}.params.{}", unused.name),
                format!(
                    "is never used by the command (add {{{}}} to a word of command, or remove the parameter)",
                    unused.name
                ),
            ));
        }
        // The words before a literal `--`, where a value that begins a word
        // with `-` would be read as an option: a parameter that may begin one
        // and does not allow a leading dash must not list such a value.
        let options_end = args
            .iter()
            .position(|t| t.pieces == [super::template::Piece::Text("--".into())])
            .unwrap_or(args.len());
        for template in &args[..options_end] {
            if template.starts_with_dash() {
                continue;
            }
            for lead in template.possible_leading_params() {
                let Some(param) = params.iter().find(|p| p.name == lead) else {
                    continue;
                };
                if param.allow_leading_dash {
                    continue;
                }
                let at = format!("{path}.params.{lead}");
                let dashed = param.allowed.iter().flatten().find(|value| match value {
                    Value::String(s) => s.starts_with('-'),
                    Value::Number(n) => n.to_string().starts_with('-'),
                    _ => false,
                });
                if let Some(value) = dashed {
                    return Err(ToolsError::new(
                        format!("{at}.enum"),
                        format!(
                            "{value} would begin an argument with \"-\", which is refused \
                             (set allow_leading_dash = true to accept it)"
                        ),
                    ));
                }
                if let Some(min) = &param.minimum
                    && min.to_string().starts_with('-')
                {
                    return Err(ToolsError::new(
                        format!("{at}.minimum"),
                        format!(
                            "{min} admits negative values, which would begin an argument with \"-\" \
                             and are refused (set allow_leading_dash = true to accept them)"
                        ),
                    ));
                }
            }
        }

        let kind = match table.get("kind") {
            Some(value) => match as_str(&field("kind"), value)? {
                "action" => CallKind::Action,
                "discovery" => CallKind::Discovery,
                other => {
                    return Err(ToolsError::new(
                        field("kind"),
                        format!("unknown kind {other:?} (expected \"action\" or \"discovery\")"),
                    ));
                }
            },
            None => CallKind::Action,
        };
        let discovery = kind == CallKind::Discovery;
        let approval = match table.get("approval") {
            Some(value) => match as_str(&field("approval"), value)? {
                "required" if discovery => {
                    return Err(ToolsError::new(
                        field("approval"),
                        "a discovery never waits for approval (remove approval, or make the tool kind = \"action\")",
                    ));
                }
                "required" => Approval::Required,
                "none" => Approval::NotRequired,
                other => {
                    return Err(ToolsError::new(
                        field("approval"),
                        format!("unknown approval {other:?} (expected \"required\" or \"none\")"),
                    ));
                }
            },
            None if discovery => Approval::NotRequired,
            None => Approval::Required,
        };
        let result = match table.get("result") {
            Some(value) => match as_str(&field("result"), value)? {
                "stdout_text" => ToolResult::StdoutText,
                "stdout_json" => ToolResult::StdoutJson,
                other => {
                    return Err(ToolsError::new(
                        field("result"),
                        format!(
                            "unknown result {other:?} (expected \"stdout_text\" or \"stdout_json\")"
                        ),
                    ));
                }
            },
            None => ToolResult::StdoutText,
        };
        let deadline = match table.get("deadline_ms") {
            Some(toml::Value::Integer(ms)) if *ms > 0 => Some(Duration::from_millis(*ms as u64)),
            Some(_) => {
                return Err(ToolsError::new(
                    field("deadline_ms"),
                    "must be a positive integer (milliseconds)",
                ));
            }
            None => None,
        };
        let approval_timeout = match table.get("approval_timeout_ms") {
            Some(_) if !approval.is_required() => {
                return Err(ToolsError::new(
                    field("approval_timeout_ms"),
                    "the tool never waits for approval (remove approval_timeout_ms, or set approval = \"required\")",
                ));
            }
            Some(toml::Value::Integer(ms)) if *ms > 0 => Duration::from_millis(*ms as u64),
            Some(_) => {
                return Err(ToolsError::new(
                    field("approval_timeout_ms"),
                    "must be a positive integer (milliseconds)",
                ));
            }
            None => DEFAULT_APPROVAL_TIMEOUT,
        };

        Ok(Self {
            name: name.to_owned(),
            description,
            params,
            kind,
            approval,
            result,
            deadline,
            approval_timeout,
            program: program.to_string(),
            args,
            options_end,
            target,
            remote_quoted: Vec::new(),
            bounds: defaults.over(table, &path)?,
        })
    }

    /// The command checked for placeholders inside code (`code.rs`).
    fn code_analysis(&self) -> super::code::Analysis {
        let program = Template {
            pieces: vec![super::template::Piece::Text(self.program.clone())],
        };
        let words: Vec<&Template> = std::iter::once(&program).chain(&self.args).collect();
        let dash: Vec<bool> = std::iter::once(false)
            .chain(self.args.iter().enumerate().map(|(i, word)| {
                let leads = word.possible_leading_params();
                !word.starts_with_dash()
                    && !leads.is_empty()
                    && (i >= self.options_end
                        || leads.iter().any(|lead| {
                            self.params
                                .iter()
                                .any(|p| p.name == *lead && p.allow_leading_dash)
                        }))
            }))
            .collect();
        super::code::analyse(&words, &dash)
    }

    /// The JSON Schema of the tool's arguments, as MCP publishes it in
    /// `inputSchema`: an object with one property per parameter (its `type`,
    /// `description`, `enum`, `pattern`, `maxLength`, `minimum`,
    /// `maximum`), the `required` list (left out when empty) and
    /// `additionalProperties: false`.
    pub fn input_schema(&self) -> Value {
        let mut properties = serde_json::Map::new();
        let mut required = Vec::new();
        for param in &self.params {
            let mut schema = serde_json::Map::new();
            schema.insert("type".into(), param.kind.as_str().into());
            if let Some(text) = &param.description {
                schema.insert("description".into(), text.clone().into());
            }
            if let Some(values) = &param.allowed {
                schema.insert("enum".into(), Value::Array(values.clone()));
            }
            if let Some(pattern) = &param.pattern {
                schema.insert("pattern".into(), pattern.source.clone().into());
            }
            if let Some(n) = param.max_length {
                schema.insert("maxLength".into(), n.into());
            }
            if let Some(n) = &param.minimum {
                schema.insert("minimum".into(), Value::Number(n.clone()));
            }
            if let Some(n) = &param.maximum {
                schema.insert("maximum".into(), Value::Number(n.clone()));
            }
            if param.is_secret() {
                // JSON Schema's word for a value sent but never shown back.
                schema.insert("writeOnly".into(), true.into());
            }
            properties.insert(param.name.clone(), Value::Object(schema));
            if param.required {
                required.push(Value::from(param.name.clone()));
            }
        }
        let mut schema = serde_json::Map::new();
        schema.insert("type".into(), "object".into());
        schema.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            schema.insert("required".into(), Value::Array(required));
        }
        schema.insert("additionalProperties".into(), false.into());
        Value::Object(schema)
    }
}

pub(crate) fn check_keys(
    path: &str,
    table: &toml::Table,
    known: &[&str],
) -> Result<(), ToolsError> {
    match table.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => Err(ToolsError::new(
            if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            },
            format!("unknown key (known keys: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

pub(crate) fn as_table<'v>(
    path: &str,
    value: &'v toml::Value,
) -> Result<&'v toml::Table, ToolsError> {
    value
        .as_table()
        .ok_or_else(|| ToolsError::new(path, "must be a table"))
}

pub(crate) fn as_str<'v>(path: &str, value: &'v toml::Value) -> Result<&'v str, ToolsError> {
    value
        .as_str()
        .ok_or_else(|| ToolsError::new(path, "must be a string"))
}

/// A parser's multi-line report as one line.
pub(crate) fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
