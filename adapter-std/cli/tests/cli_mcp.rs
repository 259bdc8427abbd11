//! `spillguard mcp --tools FILE --check` as a black box: the tools as one
//! JSON line, exit codes and one-line errors.
#![allow(clippy::unwrap_used)]

// The std adapter's test helpers, shared rather than copied.
#[path = "../../tests/support/mod.rs"]
mod support;

mod binary;

use binary::{spillguard, usage_failure};

use serde_json::{Value, json};
use support::temp_path;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/tools.toml");

#[test]
fn check_prints_the_tools_of_the_example_as_one_json_line() {
    let output = spillguard(&["mcp", "--tools", EXAMPLE, "--check"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(text.lines().count(), 1);
    assert!(text.ends_with('\n'));
    let value: Value = serde_json::from_str(text.trim_end()).unwrap();
    let tools = value["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["list_units", "remote_uptime", "tail_log"]);
    assert_eq!(
        tools[1],
        json!({
            "name": "remote_uptime",
            "description": "uptime of a host over ssh",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "host": {
                        "type": "string",
                        "pattern": "^[a-z0-9.-]+$",
                        "description": "host name"
                    }
                },
                "required": ["host"],
                "additionalProperties": false
            }
        })
    );
    assert_eq!(
        tools[2]["inputSchema"],
        json!({
            "type": "object",
            "properties": {
                "file": { "type": "string", "enum": ["access.log", "error.log"] },
                "lines": { "type": "integer", "minimum": 1, "maximum": 1000 }
            },
            "required": ["file", "lines"],
            "additionalProperties": false
        })
    );
}

#[test]
fn a_bad_tools_file_exits_2_with_one_line_naming_the_field() {
    let path = temp_path("bad-tools.toml");
    std::fs::write(
        &path,
        "[tools.t]\ndescription = \"d\"\ncommand = [\"ssh\", \"{host}\"]\n\
         params.host = { type = \"string\", pattern = \"^[a-z\" }\n",
    )
    .unwrap();
    let shown = path.display().to_string();
    assert_eq!(
        usage_failure(&["mcp", "--tools", &shown, "--check"]),
        format!(
            "spillguard: invalid tools file {shown}: tools.t.params.host.pattern: \
             invalid regex \"^[a-z\": found unclosed character class"
        )
    );
    // An error that quotes the file quotes it redacted.
    std::fs::write(
        &path,
        "[tools.t]\ndescription = \"d\"\ncommand = [\"x\", \"{tok}\"]\n\
         params.tok = { type = \"string\", pattern = \"^Bearer Q7x9abc123def456[\" }\n",
    )
    .unwrap();
    assert_eq!(
        usage_failure(&["mcp", "--tools", &shown, "--check"]),
        format!(
            "spillguard: invalid tools file {shown}: tools.t.params.tok.pattern: \
             invalid regex \"^Bearer [redacted: bearer-token][\": found unclosed character class"
        )
    );
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        usage_failure(&["mcp", "--tools", &shown, "--check"]),
        format!(
            "spillguard: cannot read tools file {shown}: No such file or directory (os error 2)"
        )
    );
    assert_eq!(
        usage_failure(&["mcp", "--check"]),
        "spillguard: `mcp` needs `--tools FILE`"
    );
    assert_eq!(
        usage_failure(&["mcp", "--tools", EXAMPLE, "--anchor-out", "a"]),
        "spillguard: `--anchor-out` needs `--audit FILE`"
    );
    assert_eq!(
        usage_failure(&["mcp", "--tools", EXAMPLE, "--on-disconnect", "wait"]),
        "spillguard: `--on-disconnect`: unknown value `wait` (expected one of: finish, cancel)"
    );
}

#[test]
fn a_client_that_leaves_before_initialize_ends_the_server_quietly() {
    let output = spillguard(&["mcp", "--tools", EXAMPLE]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(output.stdout, b"");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}
