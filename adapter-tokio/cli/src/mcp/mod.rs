//! The tools of `spillguard mcp`: a TOML file declaring, per tool, the
//! command it runs, its parameters and how a call of it is handled, and
//! what turns a `tools/call` into a call to start.
//!
//! * [`ToolsFile::from_toml_str`](tools::ToolsFile::from_toml_str) loads and checks the file
//!   (`tools.rs` states every rule);
//! * [`Tool::input_schema`](tools::Tool::input_schema) is the schema MCP publishes for a tool, and
//!   [`ToolsFile::list_json`](tools::ToolsFile::list_json) the `tools/list` result;
//! * [`Tool::prepare`](tools::Tool::prepare) checks a call's arguments and builds the
//!   [`PreparedCall`](prepare::PreparedCall): the command (one argument per word, no shell), the
//!   target, the summary, and the approval card's text, fixed once
//!   (`prepare.rs` states the rules a value is held to and the card's
//!   format). Invalid arguments are an [`InvalidParams`](prepare::InvalidParams) naming each
//!   failing parameter; nothing has run.
//! * [`serve::main`] runs the MCP server (`bridge.rs` states how a
//!   `tools/call` becomes a call, `answer.rs` what its result holds).

use std::path::Path;

use crate::args::UsageError;

pub(crate) mod admission;
mod answer;
mod bounds;
mod bridge;
mod code;
mod params;
mod prepare;
mod secret;
pub mod serve;
mod template;
mod tools;
mod wire;

#[cfg(test)]
mod tests;

#[cfg(test)]
use params::ParamType;
#[cfg(test)]
use prepare::PreparedCall;
#[cfg(test)]
use tools::{Tool, ToolResult, ToolsFile, is_tool_name};

/// `spillguard mcp --tools FILE --check`: the file loaded and checked, and
/// its tools as one line of JSON (a `tools/list` result, no newline), with
/// a warning for each tool whose program cannot be found (on `PATH`, or at
/// its path when it names one): the file is valid, but a call of that tool
/// would fail to start here. The admission limits in force (the flags
/// `max_running` and `queue_timeout_ms`, else the file's `[bridge]`, else
/// the defaults) are under `bridge`.
pub fn check(
    path: &Path,
    max_running: Option<usize>,
    queue_timeout_ms: Option<u64>,
) -> Result<(String, Vec<String>), UsageError> {
    let file = serve::load(path)?;
    let limits = file.bridge.limits(max_running, queue_timeout_ms);
    let search = std::env::var_os("PATH").unwrap_or_default();
    let warnings = file
        .tools
        .iter()
        .filter(|tool| !program_found(&tool.program, &search))
        .map(|tool| {
            if tool.program.contains('/') {
                format!(
                    "tool {}: program {:?} is not an executable file (a call of it would fail to start)",
                    tool.name, tool.program
                )
            } else {
                format!(
                    "tool {}: program {:?} is not on PATH (a call of it would fail to start)",
                    tool.name, tool.program
                )
            }
        })
        .collect();
    let mut listed = file.list_json();
    listed["bridge"] = serde_json::json!({
        "max_running": limits.max_running,
        "queue_timeout_ms": u64::try_from(limits.queue_timeout.as_millis()).unwrap_or(u64::MAX),
    });
    let json = serde_json::to_string(&listed)
        .map_err(|e| UsageError(format!("cannot encode the tools: {e}")))?;
    Ok((json, warnings))
}

/// Whether `program` names an executable file: itself when it holds a
/// `/`, else in one of the directories of `search` (a `PATH` value; an
/// empty entry is the current directory, as for `execvp`).
fn program_found(program: &str, search: &std::ffi::OsStr) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    std::env::split_paths(search).any(|dir| {
        let dir = if dir.as_os_str().is_empty() {
            std::path::PathBuf::from(".")
        } else {
            dir
        };
        executable(&dir.join(program))
    })
}
