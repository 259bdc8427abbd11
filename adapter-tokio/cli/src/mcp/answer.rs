//! A finished call as the `tools/call` result the client receives.
//!
//! **`content[0].text`** is what a model reads:
//!
//! * for a call that completed with its result, the result itself: the
//!   helper's stdout for a `stdout_text` tool, the JSON text of the value
//!   it printed for a `stdout_json` tool (both redacted);
//! * for any other call, one paragraph that says how it ended, then the
//!   stderr excerpt: `tool remote_uptime did not complete: state
//!   failed_local, exit status 255. stderr (312 bytes seen):` and on the
//!   next lines the excerpt, the truncation marker first, within the
//!   excerpt budget, redacted (`No stderr.` when there is none). The
//!   failure (`failure`, `result_error`) is named in the paragraph when
//!   there is one; a `stdout_json` call that completed without a readable
//!   result says `completed but gave no result`.
//!
//! **`structuredContent`** is the whole call record under its own field
//! names (`call_id`, `state`, `exit_status`, `result_kind`,
//! `stderr_bytes_seen`, …), plus:
//!
//! * `result`, the helper's result, redacted like every other view (a
//!   secret in it reads `[redacted: RULE]`, counted in
//!   `stdout_redactions`): the JSON value it printed on stdout for a
//!   `stdout_json` tool (`null` when it printed none or invalid JSON;
//!   `result_error` then says why), its stdout as text for a `stdout_text`
//!   tool (bounded by the stdout budget, a truncation marker first when it
//!   was cut, as `stdout_truncated` says);
//! * `stderr_excerpt`, the retained stderr as the agent sees it.
//!
//! `result_kind` is the classification (what the helper's result says of
//! the call: `success`, `remote_failure`, or `null`), `result` the value:
//! the same two names as in `spillguard run`'s line. Each tool declares
//! the shape as its `outputSchema` ([`output_schema`]).
//!
//! A value given to a secret parameter (see `secret.rs`) reads
//! `[redacted: secret-parameter]` wherever it occurs in the result: the
//! text, the structured content's strings and the result value.
//!
//! `isError` is true for every state but `completed`: a helper that
//! failed, was refused, denied, expired or cancelled is an error the model
//! must see as one. It is true, too, for a `completed` call of a
//! `stdout_json` tool whose result could not be read (`result_error` says
//! why): the tool promised a result and gave none.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};
use spillguard_std::proto::{Outcome, State};

use super::secret::SecretValues;
use super::tools::ToolResult;

/// The `tools/call` result for `outcome`, a call of `tool` whose helper
/// returns its result as `result`; every occurrence of a value in
/// `secrets` (its secret parameters' values) replaced, in the text and in
/// every string of the structured content.
pub fn tool_result(
    outcome: &Outcome,
    tool: &str,
    result: ToolResult,
    secrets: &SecretValues,
) -> CallToolResult {
    let content = secrets.mask_json(&structured_content(outcome, result));
    let unread = result == ToolResult::StdoutJson && outcome.record.result_error.is_some();
    let ok = outcome.record.state == State::Completed && !unread;
    let text = if ok {
        match content.get("result") {
            Some(Value::String(text)) => text.clone(),
            Some(value) => value.to_string(),
            None => String::new(),
        }
    } else {
        secrets.mask(&error_text(outcome, tool))
    };
    let mut answer = if ok {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    answer.structured_content = Some(content);
    answer
}

/// The paragraph a model reads for a call that did not complete with its
/// result (see the module docs).
pub fn error_text(outcome: &Outcome, tool: &str) -> String {
    let record = &outcome.record;
    let mut text = if record.state == State::Completed {
        format!("tool {tool} completed but gave no result: state completed")
    } else {
        format!(
            "tool {tool} did not complete: state {}",
            record.state.as_str()
        )
    };
    match (record.exit_status, record.exit_signal) {
        (Some(code), _) => text.push_str(&format!(", exit status {code}")),
        (None, Some(signal)) => text.push_str(&format!(", ended by signal {signal}")),
        (None, None) => text.push_str(", no exit status"),
    }
    if let Some(failure) = &record.failure {
        text.push_str(&format!("; {failure}"));
    }
    if let Some(error) = &record.result_error {
        text.push_str(&format!("; {error}"));
    }
    let excerpt = outcome.agent_excerpt();
    if excerpt.is_empty() {
        text.push_str(". No stderr.");
    } else {
        text.push_str(&format!(
            ". stderr ({} bytes seen{}):\n{excerpt}",
            record.stderr_bytes_seen,
            if record.stderr_truncated { ", cut" } else { "" }
        ));
    }
    text
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
    let value = match result {
        ToolResult::StdoutJson => outcome.redacted_result().unwrap_or(Value::Null),
        ToolResult::StdoutText => Value::String(outcome.stdout.render()),
    };
    fields.insert("result".into(), value);
    fields.insert("stderr_excerpt".into(), outcome.agent_excerpt().into());
    Value::Object(fields)
}

/// The `outputSchema` of a tool whose helper returns its result as
/// `result`: the shape of [`structured_content`]. The fields a client
/// relies on are typed and required; the record's other counters are
/// allowed (`additionalProperties`), so that a record with a field added
/// later still conforms.
pub fn output_schema(result: ToolResult) -> Value {
    let nullable = |kind: &str| json!({ "type": [kind, "null"] });
    let result_schema = match result {
        ToolResult::StdoutText => json!({
            "type": "string",
            "description": "the helper's stdout, redacted, within the stdout budget"
        }),
        ToolResult::StdoutJson => json!({
            "description": "the JSON value the helper printed on stdout, redacted; null when there is none (result_error says why)"
        }),
    };
    json!({
        "type": "object",
        "properties": {
            "call_id": { "type": "string" },
            "session_id": { "type": "string" },
            "action": { "type": "string" },
            "target": { "type": "string" },
            "state": {
                "type": "string",
                "enum": State::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            },
            "approval": { "type": "string" },
            "exit_status": nullable("integer"),
            "exit_signal": nullable("integer"),
            "result_kind": {
                "type": ["string", "null"],
                "description": "what the helper's result says of the call (success, remote_failure), or null"
            },
            "result": result_schema,
            "result_error": nullable("string"),
            "failure": nullable("string"),
            "stderr_excerpt": {
                "type": "string",
                "description": "the retained stderr, truncation marker first, within the excerpt budget, redacted"
            },
            "stderr_bytes_seen": { "type": "integer", "minimum": 0 },
            "stderr_bytes_retained": { "type": "integer", "minimum": 0 },
            "stderr_truncated": { "type": "boolean" },
            "stdout_bytes_seen": { "type": "integer", "minimum": 0 },
            "stdout_truncated": { "type": "boolean" },
            "stdout_redactions": { "type": "integer", "minimum": 0 },
            "stderr_redactions": { "type": "integer", "minimum": 0 },
            "audit_failures": { "type": "integer", "minimum": 0 },
            "timeline": { "type": "array" },
        },
        "required": [
            "call_id", "state", "exit_status", "exit_signal", "result_kind", "result",
            "stderr_excerpt", "stderr_bytes_seen", "stderr_truncated",
        ],
        "additionalProperties": true,
    })
}
