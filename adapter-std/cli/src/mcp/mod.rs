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

mod answer;
mod bridge;
mod params;
mod prepare;
pub mod serve;
mod template;
mod tools;

#[cfg(test)]
mod tests;

#[cfg(test)]
use params::ParamType;
#[cfg(test)]
use prepare::PreparedCall;
#[cfg(test)]
use tools::{Tool, ToolResult, ToolsFile, is_tool_name};

/// `spillguard mcp --tools FILE --check`: the file loaded and checked, and
/// its tools as one line of JSON (a `tools/list` result, no newline).
pub fn check(path: &Path) -> Result<String, UsageError> {
    let file = serve::load(path)?;
    serde_json::to_string(&file.list_json())
        .map_err(|e| UsageError(format!("cannot encode the tools: {e}")))
}
