//! A tool call's arguments checked against the tool's parameters and
//! turned into the call to start: [`Tool::prepare`].
//!
//! # What a value must be
//!
//! Everything the published schema says (type, `enum`, `pattern`,
//! `maxLength`, `minimum`, `maximum`, `required`, no other property), and
//! two rules the schema cannot say, both about what the helper would
//! receive:
//!
//! * **No NUL byte**, ever: an argument cannot carry one to the program.
//! * **No option made by a value.** Every argument word before the
//!   command's first literal `--` word is checked as assembled, from all
//!   its placeholders and literals: when it begins with `-` and that `-`
//!   is not the template's own first character, the program would read a
//!   value as an option (`-rf`, `-oProxyCommand=…`, a negative number,
//!   `{a}{b}` with `a` empty and `b = "-rf"`). The call is refused unless
//!   every parameter that begins the word declares
//!   `allow_leading_dash = true`. No `pattern`, `enum` or `minimum` turns
//!   the rule off: a pattern written to keep paths out admits `-v` as
//!   easily as `web-3`. A word after the `--`, or one the template itself
//!   begins with `-` (`--host={host}`, `-o{opt}`), takes any value. A tools
//!   file whose `enum` or `minimum` admits such a value for a parameter
//!   that does not allow it is refused when it is loaded.
//!
//! A value is substituted as text into its word: a string as it is, an
//! integer in decimal, a number as its JSON text, a boolean as `true` or
//! `false`. No shell reads the words, with one exception: `ssh` joins the
//! words after the destination into a line for the remote shell, so there
//! each value is written as one single-quoted word (`'` as `'\''`), after
//! the rules above have checked the value itself (`code.rs`). A value
//! never splits a word or adds one, and a word naming a left-out optional
//! parameter is dropped whole.
//!
//! # The approval card
//!
//! Its lines are made here from the validated call, and the core builds
//! the card from them once, when it shows it (`ApprovalCard::text`): five
//! lines and the expiry line, each `label: value`, every value redacted by
//! the call's rules (the audit log keeps exactly that text), with every
//! control, invisible or bidirectional formatting character written as an
//! escape (`\n`, `\u{2028}`, `\u{202e}`), so that a value can neither add
//! a line, hide one nor reorder one:
//!
//! ```text
//! tool: remote_uptime
//! description: uptime of a host over ssh
//! target: web-3
//! command: ssh -o BatchMode=yes web-3 uptime
//! deadline: 20000 ms
//! approval expires: 120000 ms after it is shown
//! ```
//!
//! `command` is the shell-quoted command line (exactly what runs, one
//! quoted word per argument, except that a secret parameter's value reads
//! `[redacted: secret-parameter]` there, as in the target: see
//! `secret.rs`); `deadline` is `host default` when the tool
//! sets none; `approval expires` is the tool's `approval_timeout_ms`.

use std::cmp::Ordering;
use std::fmt;
use std::time::Duration;

use serde_json::{Map, Number, Value};
use spillguard_host::{CallBuilder, Launch, command_line};
use spillguard_std::proto::{CallKind, Confinement};
use spillguard_std::{Approval, HelperCommand};

use super::bounds::BASE_ENV;
use super::code::sh_quote;
use super::params::{Param, ParamType};
use super::secret::SECRET_PARAMETER;
use super::template::Piece;
use super::tools::{Tool, ToolResult};

/// A validated call of a tool: what runs and everything the approval card
/// and the call record show, fixed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedCall {
    /// The tool's name; the call's `action`.
    pub tool: String,
    /// What runs: the program and one argument per word, no shell.
    pub command: HelperCommand,
    /// The target shown to the user (the tool's `target` template, or the
    /// command line).
    pub target: String,
    /// The shell-quoted command line; the call's `summary`.
    pub summary: String,
    /// The approval card's lines, `label: value` (see the module docs for
    /// the card's format); the core redacts them, makes them visible and
    /// adds the expiry line when it shows the card.
    pub card_lines: Vec<(String, String)>,
    /// Action or discovery.
    pub kind: CallKind,
    /// Whether the call waits for approval.
    pub approval: Approval,
    /// How the helper returns its result.
    pub result: ToolResult,
    /// Longest the call may run after dispatch; `None`: the host's.
    pub deadline: Option<Duration>,
    /// How long the approval card stays valid once shown.
    pub approval_timeout: Duration,
    /// The tool's limits and sandbox: the card states them.
    pub confinement: Confinement,
}

impl PreparedCall {
    /// The card the core shows for this call before redaction (its lines,
    /// made visible, and the expiry line): what an approver sees when no
    /// rule finds a secret in it.
    #[cfg(test)]
    pub fn card(&self) -> String {
        spillguard_std::proto::card_text(&self.card_lines, self.approval_timeout)
    }

    /// The call on `host`, every field set from this one: the command,
    /// `action` (the tool's name), kind, target, summary, card lines,
    /// approval, result channel and deadline. The caller adds its ids and
    /// starts it.
    pub fn builder<'h, H: Launch>(&self, host: &'h H) -> CallBuilder<'h, H> {
        let builder = self.card_lines.iter().fold(
            CallBuilder::on(host, self.command.clone())
                .kind(self.kind)
                .action(self.tool.clone())
                .target(self.target.clone())
                .summary(self.summary.clone())
                .approval(self.approval)
                .approval_timeout(self.approval_timeout)
                .confinement(self.confinement.clone()),
            |builder, (label, value)| builder.card_line(label.clone(), value.clone()),
        );
        let builder = match self.deadline {
            Some(deadline) => builder.deadline(deadline),
            None => builder,
        };
        match self.result {
            ToolResult::StdoutJson => builder.result_json(),
            ToolResult::StdoutText => builder,
        }
    }
}

/// The arguments of a call broke the tool's rules: one problem per
/// failing parameter, in name order. Nothing ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidParams {
    /// The tool called.
    pub tool: String,
    /// What is wrong, per parameter.
    pub problems: Vec<ParamProblem>,
}

/// What is wrong with one parameter of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamProblem {
    /// The parameter (or the unknown argument's name).
    pub param: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for InvalidParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid arguments for tool {}: ", self.tool)?;
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", problem.param, problem.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for InvalidParams {}

impl Tool {
    /// Checks `arguments` (a `tools/call`'s `arguments`; an empty map when
    /// the call has none) and builds the call: every failing parameter is
    /// named in the error, and nothing is built unless all pass.
    pub fn prepare(&self, arguments: &Map<String, Value>) -> Result<PreparedCall, InvalidParams> {
        let mut problems = Vec::new();
        let mut texts: Vec<(&str, String)> = Vec::with_capacity(self.params.len());
        for (name, _) in arguments {
            if !self.params.iter().any(|p| &p.name == name) {
                let known: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
                problems.push(ParamProblem {
                    param: name.clone(),
                    message: if known.is_empty() {
                        "unknown parameter (the tool takes none)".into()
                    } else {
                        format!("unknown parameter (known: {})", known.join(", "))
                    },
                });
            }
        }
        for param in &self.params {
            match arguments.get(&param.name) {
                None if param.required => problems.push(ParamProblem {
                    param: param.name.clone(),
                    message: "missing (required)".into(),
                }),
                None => {}
                Some(value) => match check(param, value) {
                    Ok(text) => texts.push((&param.name, text)),
                    Err(message) => problems.push(ParamProblem {
                        param: param.name.clone(),
                        message,
                    }),
                },
            }
        }
        if !problems.is_empty() {
            problems.sort_by(|a, b| a.param.cmp(&b.param));
            return Err(InvalidParams {
                tool: self.name.clone(),
                problems,
            });
        }
        let value = |name: &str| {
            texts
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| t.as_str())
        };
        // What the views show: a secret parameter's value replaced.
        let secret = |name: &str| self.params.iter().any(|p| p.name == name && p.is_secret());
        let masked = |name: &str| match secret(name) {
            true => value(name).map(|_| SECRET_PARAMETER),
            false => value(name),
        };
        let mut shown_args: Vec<String> = Vec::with_capacity(self.args.len());
        // A word naming a left-out optional parameter is dropped whole.
        let mut args: Vec<String> = Vec::with_capacity(self.args.len());
        for (at, word) in self.args.iter().enumerate() {
            let Some(text) = word.render(value) else {
                continue;
            };
            let shown_text = word.render(masked).unwrap_or_default();
            if at < self.options_end && text.starts_with('-') && !word.starts_with_dash() {
                // The placeholder whose value gave the `-`; or, when the `-`
                // is a literal's that empty values left in front, all of them.
                let mut leads = word.leading_params(value);
                if let Some(&last) = leads.last()
                    && value(last).is_some_and(|v| !v.is_empty())
                {
                    leads = vec![last];
                }
                let refused: Vec<&str> = leads
                    .iter()
                    .copied()
                    .filter(|name| {
                        self.params
                            .iter()
                            .any(|p| p.name == *name && !p.allow_leading_dash)
                    })
                    .collect();
                if let Some(&param) = refused.last() {
                    let given = match arguments.get(param) {
                        Some(_) if secret(param) => SECRET_PARAMETER.to_owned(),
                        Some(given) => shown(given),
                        None => "\"\"".to_owned(),
                    };
                    let opening = if value(param) == Some(text.as_str()) {
                        format!("{given} begins an argument with \"-\"")
                    } else {
                        format!(
                            "{given} makes the argument {} begin with \"-\"",
                            shown(&Value::String(shown_text.clone()))
                        )
                    };
                    problems.push(ParamProblem {
                        param: param.to_owned(),
                        message: format!(
                            "{opening}, which the command would read as an option (refused: \
                             allow_leading_dash is not set for {})",
                            refused.join(" and ")
                        ),
                    });
                }
            }
            if self.remote_quoted.contains(&at) {
                // `ssh`'s remote command: each value one single-quoted word
                // for the remote shell (`code.rs`).
                let mut quoted = String::new();
                for piece in &word.pieces {
                    match piece {
                        Piece::Text(literal) => quoted.push_str(literal),
                        Piece::Param(name) => quoted.push_str(&sh_quote(value(name).unwrap_or(""))),
                    }
                }
                args.push(quoted);
            } else {
                args.push(text);
            }
            shown_args.push(shown_text);
        }
        if !problems.is_empty() {
            problems.sort_by(|a, b| a.param.cmp(&b.param));
            problems.dedup_by(|a, b| a.param == b.param);
            return Err(InvalidParams {
                tool: self.name.clone(),
                problems,
            });
        }
        // A tool has no business with the user's terminal, if the
        // client that runs this server has one: a session of its own.
        let mut command = HelperCommand::new(&self.program)
            .args(args)
            .new_session(true);
        if let Some(allowed) = &self.bounds.env_allow {
            // A sandboxed tool's environment: the base names and its
            // allow-list, with the host's values; nothing else.
            command = command.env_clear();
            let names = BASE_ENV
                .iter()
                .copied()
                .chain(allowed.iter().map(String::as_str));
            for name in names {
                if let Some(value) = std::env::var_os(name) {
                    command = command.env(name, value);
                }
            }
        }
        let summary = command_line(&HelperCommand::new(&self.program).args(shown_args));
        let target = match &self.target {
            Some(template) => template
                .render(|name| Some(masked(name).unwrap_or("")))
                .unwrap_or_default(),
            None => summary.clone(),
        };
        let deadline = match self.deadline {
            Some(d) => format!("{} ms", d.as_millis()),
            None => "host default".to_owned(),
        };
        let card_lines = [
            ("tool", self.name.clone()),
            ("description", self.description.clone()),
            ("target", target.clone()),
            ("command", summary.clone()),
            ("deadline", deadline),
        ]
        .map(|(label, value)| (label.to_owned(), value))
        .to_vec();
        Ok(PreparedCall {
            tool: self.name.clone(),
            command,
            target,
            summary,
            card_lines,
            kind: self.kind,
            approval: self.approval,
            result: self.result,
            deadline: self.deadline,
            approval_timeout: self.approval_timeout,
            confinement: self.bounds.confinement.clone(),
        })
    }
}

/// The value's text for the command, or why it is refused (a secret
/// parameter's value is not shown in the reason).
fn check(param: &Param, value: &Value) -> Result<String, String> {
    let shown = |value: &Value| match param.is_secret() {
        true => SECRET_PARAMETER.to_owned(),
        false => shown(value),
    };
    let text = match (param.kind, value) {
        (ParamType::String, Value::String(s)) => s.clone(),
        (ParamType::Integer, Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
        (ParamType::Number, Value::Number(n)) => n.to_string(),
        (ParamType::Boolean, Value::Bool(b)) => b.to_string(),
        (kind, other) => {
            return Err(format!(
                "must be {} {}, not {}",
                article(kind.as_str()),
                kind.as_str(),
                json_type(other)
            ));
        }
    };
    if let Some(allowed) = &param.allowed
        && !allowed.iter().any(|a| same(a, value))
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(format!(
            "{} is not one of {}",
            shown(value),
            list.join(", ")
        ));
    }
    if let Value::String(s) = value {
        if s.contains('\0') {
            return Err("contains a NUL byte, which no argument can carry".into());
        }
        if let Some(max) = param.max_length {
            let length = s.chars().count() as u64;
            if length > max {
                return Err(format!(
                    "is {length} characters long, more than max_length {max}"
                ));
            }
        }
        if let Some(pattern) = &param.pattern
            && !pattern.regex.is_match(s)
        {
            return Err(format!(
                "{} does not match {}",
                shown(value),
                pattern.source
            ));
        }
    }
    if let Value::Number(n) = value {
        if let Some(min) = &param.minimum
            && compare(n, min).is_lt()
        {
            return Err(format!("{n} is below the minimum {min}"));
        }
        if let Some(max) = &param.maximum
            && compare(n, max).is_gt()
        {
            return Err(format!("{n} is above the maximum {max}"));
        }
    }
    Ok(text)
}

/// Orders two JSON numbers by value: exactly when both are integers.
pub(crate) fn compare(a: &Number, b: &Number) -> Ordering {
    let int = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (int(a), int(b)) {
        (Some(a), Some(b)) => a.cmp(&b),
        _ => {
            let (a, b) = (
                a.as_f64().unwrap_or(f64::NAN),
                b.as_f64().unwrap_or(f64::NAN),
            );
            a.partial_cmp(&b).unwrap_or(Ordering::Equal)
        }
    }
}

/// Equal JSON values, numbers compared by value (`2` is `2.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => compare(a, b).is_eq(),
        _ => a == b,
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// A value in a message: its JSON text, cut after 64 characters.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(64) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}
