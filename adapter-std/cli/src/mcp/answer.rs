//! A finished call as the `tools/call` result the client receives.
//!
//! `structuredContent` is the call record under its own field names
//! (`call_id`, `state`, `exit_status`, `stderr_bytes_seen`, …), with three
//! changes:
//!
//! * `result` is the helper's result, redacted like every other view (a
//!   secret in it reads `[redacted: RULE]`, counted in
//!   `stdout_redactions`): the JSON value it printed on stdout for a
//!   `stdout_json` tool (`null` when it printed none or invalid JSON;
//!   `result_error` then says why), its stdout as text for a `stdout_text`
//!   tool (bounded by the stdout budget, a truncation marker first when it
//!   was cut, as `stdout_truncated` says);
//! * `result_kind` is what the record calls `result`: what the helper
//!   reported (`ok`, `remote_failure`, …), or `null`;
//! * `stderr_excerpt` is the retained stderr as the agent sees it: the
//!   truncation marker first, within the excerpt budget, redacted.
//!
//! The same object, as JSON text, is the result's one text content block,
//! for clients that read only `content`. `isError` is true for every state
//! but `completed`: a helper that failed, was refused, denied, expired or
//! cancelled is an error the model must see as one. It is true, too, for a
//! `completed` call of a `stdout_json` tool whose result could not be read
//! (`result_error` says why): the tool promised a result and gave none.

use rmcp::model::CallToolResult;
use serde_json::{Map, Value};
use spillguard_std::core::{Outcome, State};

use super::tools::ToolResult;

/// The `tools/call` result for `outcome`, a call of a tool whose helper
/// returns its result as `result`.
pub fn tool_result(outcome: &Outcome, result: ToolResult) -> CallToolResult {
    let content = structured_content(outcome, result);
    let unread = result == ToolResult::StdoutJson && outcome.record.result_error.is_some();
    if outcome.record.state == State::Completed && !unread {
        CallToolResult::structured(content)
    } else {
        CallToolResult::structured_error(content)
    }
}

/// The `structuredContent` of the result (see the module docs).
pub fn structured_content(outcome: &Outcome, result: ToolResult) -> Value {
    let mut fields = match serde_json::to_value(&outcome.record) {
        Ok(Value::Object(fields)) => fields,
        // A record is a struct of plain fields: it always serializes to
        // an object. Should it not, the state still reaches the client.
        _ => {
            let mut fields = Map::new();
            fields.insert("state".into(), outcome.record.state.as_str().into());
            fields
        }
    };
    let kind = fields.remove("result").unwrap_or(Value::Null);
    fields.insert("result_kind".into(), kind);
    let value = match result {
        ToolResult::StdoutJson => outcome.redacted_result().unwrap_or(Value::Null),
        ToolResult::StdoutText => Value::String(outcome.stdout.render()),
    };
    fields.insert("result".into(), value);
    fields.insert("stderr_excerpt".into(), outcome.agent_excerpt().into());
    Value::Object(fields)
}
