//! The tools file, the published schema and the preparation of a call,
//! with exact values and messages.

use std::time::Duration;

use serde_json::{Map, Value, json};
use spillguard_host::{CallRequest, Launch};
use spillguard_std::proto::{CallKind, CallSettings, Config, ResultChannel};
use spillguard_std::{Approval, HelperCommand};

use super::*;

/// A tools file with every section, as a user writes one.
const EXAMPLE: &str = r#"
[helper_output]                 # the budgets, as everywhere
stderr_agent_excerpt_bytes = 4096

[tools.remote_uptime]
description = "uptime of a host over ssh"
command = ["ssh", "-o", "BatchMode=yes", "{host}", "uptime"]
params.host = { type = "string", pattern = "^[a-z0-9.-]+$" }
approval = "required"           # or "none"
kind = "action"                 # or "discovery" (no approval, own budget, no action)
result = "stdout_json"          # or "stdout_text"
deadline_ms = 20000
"#;

/// A tool of every parameter type and rule.
const EVERY_TYPE: &str = r#"
[tools.t]
description = "d"
command = ["prog", "--name={name}", "--count={count}", "--ratio={ratio}", "--force={force}", "--level={level}", "--since={since}"]
params.name = { type = "string", pattern = "^[a-z]+$", max_length = 8 }
params.count = { type = "integer", minimum = 1, maximum = 10 }
params.ratio = { type = "number", minimum = 0, maximum = 1.5 }
params.force = { type = "boolean" }
params.level = { type = "string", enum = ["info", "debug"] }
params.since = { type = "string", required = false, description = "ISO date" }
"#;

fn load(text: &str) -> ToolsFile {
    ToolsFile::from_toml_str(text).unwrap()
}

fn only_tool(text: &str) -> Tool {
    let mut file = load(text);
    assert_eq!(file.tools.len(), 1);
    file.tools.remove(0)
}

fn err(text: &str) -> String {
    ToolsFile::from_toml_str(text).unwrap_err().to_string()
}

/// The error of a tool `t` with a description and these lines.
fn tool_err(body: &str) -> String {
    err(&format!("[tools.t]\ndescription = \"d\"\n{body}\n"))
}

/// A tool `t` running `prog {x}` with `x` declared as `decl`.
fn tool_with(decl: &str) -> Tool {
    only_tool(&format!(
        "[tools.t]\ndescription = \"d\"\ncommand = [\"prog\", \"{{x}}\"]\nparams.x = {decl}\n"
    ))
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("{other}"),
    }
}

fn words(call: &PreparedCall) -> Vec<String> {
    call.command
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

fn invalid(tool: &Tool, arguments: Value) -> String {
    tool.prepare(&args(arguments)).unwrap_err().to_string()
}

#[test]
fn the_example_loads() {
    let file = load(EXAMPLE);
    assert_eq!(file.config, Config::default());
    let tool = file.tool("remote_uptime").unwrap();
    assert_eq!(file.tools.len(), 1);
    assert_eq!(tool.name, "remote_uptime");
    assert_eq!(tool.description, "uptime of a host over ssh");
    assert_eq!(tool.kind, CallKind::Action);
    assert_eq!(tool.approval, Approval::Required);
    assert_eq!(tool.result, ToolResult::StdoutJson);
    assert_eq!(tool.deadline, Some(Duration::from_millis(20_000)));
    assert_eq!(tool.params.len(), 1);
    let host = &tool.params[0];
    assert_eq!(
        (host.name.as_str(), host.kind, host.required),
        ("host", ParamType::String, true)
    );
    assert_eq!(host.pattern.as_ref().unwrap().source, "^[a-z0-9.-]+$");
    assert!(!host.allow_leading_dash);
}

#[test]
fn the_helper_output_table_is_the_cores() {
    let file = load(
        "[helper_output]\nstderr_retained_per_call_bytes = 8192\nretain = \"head\"\n\
         [tools.t]\ndescription = \"d\"\ncommand = [\"true\"]\n",
    );
    assert_eq!(file.config.stderr_retained_per_call_bytes, 8192);
    assert_eq!(file.config.stderr_agent_excerpt_bytes, 4096);
    assert_eq!(file.config.retain, spillguard_std::proto::Retain::Head);
    // Left out: the defaults.
    let file = load("[tools.t]\ndescription = \"d\"\ncommand = [\"true\"]\n");
    assert_eq!(file.config, Config::default());
}

#[test]
fn the_schema_of_the_example_is_exact() {
    let file = load(EXAMPLE);
    let expected = json!({
        "type": "object",
        "properties": {
            "host": { "type": "string", "pattern": "^[a-z0-9.-]+$" }
        },
        "required": ["host"],
        "additionalProperties": false
    });
    assert_eq!(file.tools[0].input_schema(), expected);
    assert_eq!(
        file.list_json(),
        json!({ "tools": [{
            "name": "remote_uptime",
            "description": "uptime of a host over ssh",
            "inputSchema": expected,
            "outputSchema": super::answer::output_schema(ToolResult::StdoutJson),
        }]})
    );
}

#[test]
fn the_schema_carries_every_rule() {
    assert_eq!(
        only_tool(EVERY_TYPE).input_schema(),
        json!({
            "type": "object",
            "properties": {
                "count": { "type": "integer", "minimum": 1, "maximum": 10 },
                "force": { "type": "boolean" },
                "level": { "type": "string", "enum": ["info", "debug"] },
                "name": { "type": "string", "pattern": "^[a-z]+$", "maxLength": 8 },
                "ratio": { "type": "number", "minimum": 0, "maximum": 1.5 },
                "since": { "type": "string", "description": "ISO date" }
            },
            "required": ["count", "force", "level", "name", "ratio"],
            "additionalProperties": false
        })
    );
    let none = only_tool("[tools.t]\ndescription = \"d\"\ncommand = [\"true\"]\n");
    assert_eq!(
        none.input_schema(),
        json!({ "type": "object", "properties": {}, "additionalProperties": false })
    );
}

#[test]
fn defaults_of_an_action_and_of_a_discovery() {
    let action = only_tool("[tools.t]\ndescription = \"d\"\ncommand = [\"true\"]\n");
    assert_eq!(
        (action.kind, action.approval, action.result, action.deadline),
        (
            CallKind::Action,
            Approval::Required,
            ToolResult::StdoutText,
            None
        )
    );
    let discovery =
        only_tool("[tools.t]\ndescription = \"d\"\ncommand = [\"true\"]\nkind = \"discovery\"\n");
    assert_eq!(
        (discovery.kind, discovery.approval),
        (CallKind::Discovery, Approval::NotRequired)
    );
    let unapproved =
        only_tool("[tools.t]\ndescription = \"d\"\ncommand = [\"true\"]\napproval = \"none\"\n");
    assert_eq!(unapproved.approval, Approval::NotRequired);
}

#[test]
fn tools_are_listed_in_name_order() {
    let file = load(
        "[tools.b]\ndescription = \"d\"\ncommand = [\"true\"]\n\
         [tools.a-1]\ndescription = \"d\"\ncommand = [\"true\"]\n",
    );
    let names: Vec<&str> = file.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a-1", "b"]);
    assert!(file.tool("c").is_none());
    assert!(is_tool_name(&"x".repeat(64)));
    assert!(!is_tool_name(&"x".repeat(65)));
    assert!(!is_tool_name(""));
    assert!(!is_tool_name("a.b"));
}

#[test]
fn file_errors_name_their_field() {
    assert_eq!(
        err("[tools\n"),
        "not valid TOML: line 1: unclosed table, expected `]`"
    );
    assert_eq!(
        err("[tool.x]\ndescription = \"d\"\n"),
        "tool: unknown key (known keys: helper_output, tools, bridge, defaults)"
    );
    assert_eq!(
        err(
            "[helper_output]\nstderr_agent_excerpt_bytes = 64\n[tools.t]\ndescription = \"d\"\ncommand = [\"true\"]\n"
        ),
        "helper_output.stderr_agent_excerpt_bytes: 64 is below the minimum of 128"
    );
    assert_eq!(
        err(
            "[helper_output]\nquiet = true\n[tools.t]\ndescription = \"d\"\ncommand = [\"true\"]\n"
        )
        .split(" (")
        .next()
        .unwrap(),
        "helper_output.quiet: unknown key"
    );
    assert_eq!(
        err("[helper_output]\n"),
        "tools: no tool is defined (add a [tools.NAME] table)"
    );
    assert_eq!(
        err("[tools]\n"),
        "tools: no tool is defined (add a [tools.NAME] table)"
    );
    assert_eq!(err("tools = 1\n"), "tools: must be a table");
    assert_eq!(
        err("[tools.\"a b\"]\ndescription = \"d\"\ncommand = [\"true\"]\n"),
        "tools.a b: a tool name is 1 to 64 ASCII letters, digits, _ or -"
    );
    assert_eq!(err("[tools]\nt = 1\n"), "tools.t: must be a table");
}

#[test]
fn tool_errors_name_their_field() {
    let cases = [
        (
            "command = [\"true\"]\naproval = \"none\"",
            "tools.t.aproval: unknown key (known keys: description, command, params, approval, kind, result, deadline_ms, approval_timeout_ms, target, limits, sandbox, allow_degraded, contain_tree)",
        ),
        ("", "tools.t.command: is required"),
        ("command = []", "tools.t.command: must not be empty"),
        (
            "command = \"ls -l\"",
            "tools.t.command: must be an array of strings",
        ),
        (
            "command = [\"ls\", 1]",
            "tools.t.command[1]: must be a string",
        ),
        (
            "command = [\"\"]",
            "tools.t.command[0]: the program must not be empty",
        ),
        (
            "command = [\"{x}\"]\nparams.x = { type = \"string\" }",
            "tools.t.command[0]: the program is literal: a parameter may not choose what runs",
        ),
        (
            "command = [\"ssh\", \"{hots}\"]\nparams.host = { type = \"string\" }",
            "tools.t.command[1]: placeholder {hots} names no parameter of tool t",
        ),
        (
            "command = [\"ssh\", \"{host}\"]\nparams.host = { type = \"string\" }\ntarget = \"{user}@{host}\"",
            "tools.t.target: placeholder {user} names no parameter of tool t",
        ),
        (
            "command = [\"ssh\", \"web-3\"]\nparams.host = { type = \"string\" }",
            "tools.t.params.host: is never used by the command (add {host} to a word of command, or remove the parameter)",
        ),
        (
            "command = [\"ssh\", \"{host}\"]\nparams.host = { type = \"string\" }\nparams.port = { type = \"integer\" }\ntarget = \"{host}:{port}\"",
            "tools.t.params.port: is never used by the command (add {port} to a word of command, or remove the parameter)",
        ),
        (
            "command = [\"awk\", \"{print $1}\"]",
            r#"tools.t.command[1]: "{print $1}" in "{print $1}" is not a placeholder: a parameter name is letters, digits and _ (write {{ and }} for literal braces)"#,
        ),
        (
            "command = [\"true\"]\nkind = \"discovery\"\napproval = \"required\"",
            "tools.t.approval: a discovery never waits for approval (remove approval, or make the tool kind = \"action\")",
        ),
        (
            "command = [\"true\"]\nkind = \"query\"",
            "tools.t.kind: unknown kind \"query\" (expected \"action\" or \"discovery\")",
        ),
        (
            "command = [\"true\"]\napproval = \"maybe\"",
            "tools.t.approval: unknown approval \"maybe\" (expected \"required\" or \"none\")",
        ),
        (
            "command = [\"true\"]\nresult = \"json\"",
            "tools.t.result: unknown result \"json\" (expected \"stdout_text\" or \"stdout_json\")",
        ),
        (
            "command = [\"true\"]\ndeadline_ms = 0",
            "tools.t.deadline_ms: must be a positive integer (milliseconds)",
        ),
        (
            "command = [\"true\"]\ndeadline_ms = \"20s\"",
            "tools.t.deadline_ms: must be a positive integer (milliseconds)",
        ),
        (
            "command = [\"true\"]\napproval_timeout_ms = 0",
            "tools.t.approval_timeout_ms: must be a positive integer (milliseconds)",
        ),
        (
            "command = [\"true\"]\napproval = \"none\"\napproval_timeout_ms = 500",
            "tools.t.approval_timeout_ms: the tool never waits for approval (remove approval_timeout_ms, or set approval = \"required\")",
        ),
        (
            "command = [\"true\"]\ntarget = 3",
            "tools.t.target: must be a string",
        ),
        (
            "command = [\"true\"]\nparams = 3",
            "tools.t.params: must be a table",
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(tool_err(body), expected, "{body}");
    }
    assert_eq!(
        err("[tools.t]\ncommand = [\"true\"]\n"),
        "tools.t.description: is required"
    );
}

#[test]
fn param_errors_name_their_field() {
    let param_err = |decl: &str| {
        tool_err(&format!(
            "command = [\"prog\", \"{{x}}\"]\nparams.x = {decl}"
        ))
    };
    let cases = [
        (
            "{ type = \"string\", patern = \"^a$\" }",
            "tools.t.params.x.patern: unknown key (known keys: type, description, required, enum, pattern, max_length, minimum, maximum, allow_leading_dash, secret)",
        ),
        ("{ required = true }", "tools.t.params.x.type: is required"),
        (
            "{ type = \"text\" }",
            "tools.t.params.x.type: unknown type \"text\" (expected \"string\", \"integer\", \"number\" or \"boolean\")",
        ),
        ("\"string\"", "tools.t.params.x: must be a table"),
        (
            "{ type = \"string\", pattern = \"^[a-z\" }",
            "tools.t.params.x.pattern: invalid regex \"^[a-z\": found unclosed character class",
        ),
        (
            "{ type = \"string\", pattern = \"[a-z]+\" }",
            "tools.t.params.x.pattern: \"[a-z]+\" must be anchored at both ends, every alternative included (e.g. \"^(?:a|b)$\"): a pattern matches anywhere in the value",
        ),
        (
            "{ type = \"string\", pattern = \"^a|b$\" }",
            "tools.t.params.x.pattern: \"^a|b$\" must be anchored at both ends, every alternative included (e.g. \"^(?:a|b)$\"): a pattern matches anywhere in the value",
        ),
        (
            "{ type = \"string\", pattern = \"(?m)^a$\" }",
            "tools.t.params.x.pattern: \"(?m)^a$\" must be anchored at both ends, every alternative included (e.g. \"^(?:a|b)$\"): a pattern matches anywhere in the value",
        ),
        (
            "{ type = \"integer\", pattern = \"^1$\" }",
            "tools.t.params.x.pattern: only a string parameter takes pattern (this one is an integer)",
        ),
        (
            "{ type = \"boolean\", max_length = 3 }",
            "tools.t.params.x.max_length: only a string parameter takes max_length (this one is a boolean)",
        ),
        (
            "{ type = \"string\", max_length = -1 }",
            "tools.t.params.x.max_length: must be a non-negative integer (characters)",
        ),
        (
            "{ type = \"string\", minimum = 1 }",
            "tools.t.params.x.minimum: only an integer or a number parameter takes minimum (this one is a string)",
        ),
        (
            "{ type = \"integer\", minimum = 0.5 }",
            "tools.t.params.x.minimum: must be an integer",
        ),
        (
            "{ type = \"number\", maximum = \"1\" }",
            "tools.t.params.x.maximum: must be a number",
        ),
        (
            "{ type = \"integer\", minimum = 5, maximum = 4 }",
            "tools.t.params.x.maximum: 4 is below the minimum 5",
        ),
        (
            "{ type = \"number\", minimum = 0.5, maximum = 0.25 }",
            "tools.t.params.x.maximum: 0.25 is below the minimum 0.5",
        ),
        (
            "{ type = \"string\", enum = [\"a\", 1] }",
            "tools.t.params.x.enum[1]: must be a string value",
        ),
        (
            "{ type = \"string\", enum = [] }",
            "tools.t.params.x.enum: must be a non-empty array of string values",
        ),
        (
            "{ type = \"string\", required = \"yes\" }",
            "tools.t.params.x.required: must be true or false",
        ),
        (
            "{ type = \"string\", description = 1 }",
            "tools.t.params.x.description: must be a string",
        ),
    ];
    for (decl, expected) in cases {
        assert_eq!(param_err(decl), expected, "{decl}");
    }
    assert_eq!(
        tool_err("command = [\"prog\"]\nparams.1x = { type = \"string\" }"),
        "tools.t.params.1x: a parameter name is ASCII letters, digits and _, not starting with a digit, at most 64 bytes"
    );
    // Anchored alternatives load.
    assert_eq!(
        tool_with("{ type = \"string\", pattern = \"^(?:a|b)$\" }").params[0]
            .pattern
            .as_ref()
            .unwrap()
            .source,
        "^(?:a|b)$"
    );
}

#[test]
fn the_example_prepares_its_call_and_card() {
    let file = load(EXAMPLE);
    let call = file.tools[0]
        .prepare(&args(json!({"host": "web-3"})))
        .unwrap();
    assert_eq!(
        call,
        PreparedCall {
            tool: "remote_uptime".into(),
            // Every tool runs in a session of its own.
            command: HelperCommand::new("ssh")
                .args(["-o", "BatchMode=yes", "web-3", "uptime"])
                .new_session(true),
            target: "ssh -o BatchMode=yes web-3 uptime".into(),
            summary: "ssh -o BatchMode=yes web-3 uptime".into(),
            card_lines: [
                ("tool", "remote_uptime"),
                ("description", "uptime of a host over ssh"),
                ("target", "ssh -o BatchMode=yes web-3 uptime"),
                ("command", "ssh -o BatchMode=yes web-3 uptime"),
                ("deadline", "20000 ms"),
            ]
            .map(|(l, v)| (l.to_owned(), v.to_owned()))
            .to_vec(),
            kind: CallKind::Action,
            approval: Approval::Required,
            result: ToolResult::StdoutJson,
            deadline: Some(Duration::from_millis(20_000)),
            approval_timeout: Duration::from_secs(120),
            confinement: Default::default(),
        }
    );
    assert_eq!(
        invalid(&file.tools[0], json!({"host": "web 3"})),
        "invalid arguments for tool remote_uptime: host: \"web 3\" does not match ^[a-z0-9.-]+$"
    );
}

#[test]
fn every_type_is_substituted_as_its_text() {
    let tool = only_tool(EVERY_TYPE);
    let call = tool
        .prepare(&args(json!({
            "name": "abc", "count": 3, "ratio": 0.5, "force": true, "level": "debug"
        })))
        .unwrap();
    // `since` was left out: its word is dropped whole.
    assert_eq!(
        words(&call),
        [
            "--name=abc",
            "--count=3",
            "--ratio=0.5",
            "--force=true",
            "--level=debug"
        ]
    );
    assert_eq!(call.command.program, "prog");
    let call = tool
        .prepare(&args(json!({
            "name": "abcdefgh", "count": 10, "ratio": 1, "force": false, "level": "info",
            "since": "2026-01-01"
        })))
        .unwrap();
    assert_eq!(
        words(&call),
        [
            "--name=abcdefgh",
            "--count=10",
            "--ratio=1",
            "--force=false",
            "--level=info",
            "--since=2026-01-01"
        ]
    );
    assert_eq!(call.approval, Approval::Required);
    assert_eq!(call.deadline, None);
    assert!(
        call.card()
            .ends_with("\ndeadline: host default\napproval expires: 120000 ms after it is shown")
    );
}

#[test]
fn every_failing_parameter_is_named_at_once() {
    let tool = only_tool(EVERY_TYPE);
    assert_eq!(
        invalid(
            &tool,
            json!({
                "name": "ABC", "count": 0, "ratio": 2, "force": "yes", "level": "warn", "extra": 1
            })
        ),
        "invalid arguments for tool t: \
         count: 0 is below the minimum 1; \
         extra: unknown parameter (known: count, force, level, name, ratio, since); \
         force: must be a boolean, not a string; \
         level: \"warn\" is not one of \"info\", \"debug\"; \
         name: \"ABC\" does not match ^[a-z]+$; \
         ratio: 2 is above the maximum 1.5"
    );
    assert_eq!(
        invalid(&tool, json!({})),
        "invalid arguments for tool t: count: missing (required); force: missing (required); \
         level: missing (required); name: missing (required); ratio: missing (required)"
    );
    let base = json!({"name": "abc", "count": 3, "ratio": 0.5, "force": true, "level": "info"});
    let with = |key: &str, value: Value| {
        let mut arguments = args(base.clone());
        arguments.insert(key.into(), value);
        tool.prepare(&arguments).unwrap_err().to_string()
    };
    assert_eq!(
        with("count", json!(2.5)),
        "invalid arguments for tool t: count: must be an integer, not a number"
    );
    assert_eq!(
        with("count", json!(11)),
        "invalid arguments for tool t: count: 11 is above the maximum 10"
    );
    assert_eq!(
        with("count", Value::Null),
        "invalid arguments for tool t: count: must be an integer, not null"
    );
    assert_eq!(
        with("ratio", json!(-0.5)),
        "invalid arguments for tool t: ratio: -0.5 is below the minimum 0"
    );
    assert_eq!(
        with("name", json!("abcdefghi")),
        "invalid arguments for tool t: name: is 9 characters long, more than max_length 8"
    );
    assert_eq!(
        with("name", json!("a\u{0}b")),
        "invalid arguments for tool t: name: contains a NUL byte, which no argument can carry"
    );
    assert_eq!(
        with("since", json!(["2026"])),
        "invalid arguments for tool t: since: must be a string, not an array"
    );
    assert_eq!(
        with("name", json!("x".repeat(100))),
        format!(
            "invalid arguments for tool t: name: is 100 characters long, more than max_length 8"
        )
    );
    assert_eq!(
        with("level", json!("y".repeat(100))),
        format!(
            "invalid arguments for tool t: level: \"{}… is not one of \"info\", \"debug\"",
            "y".repeat(63)
        )
    );
    let none = only_tool("[tools.n]\ndescription = \"d\"\ncommand = [\"true\"]\n");
    assert_eq!(
        invalid(&none, json!({"x": 1})),
        "invalid arguments for tool n: x: unknown parameter (the tool takes none)"
    );
}

#[test]
fn a_value_is_one_argument_and_no_shell_reads_it() {
    let tool = only_tool(
        "[tools.t]\ndescription = \"d\"\ncommand = [\"ssh\", \"{host}\", \"uptime\"]\n\
         params.host = { type = \"string\" }\n",
    );
    let call = tool.prepare(&args(json!({"host": "; rm -rf /"}))).unwrap();
    assert_eq!(words(&call), ["; rm -rf /", "uptime"]);
    assert!(!call.command.shell);
    assert_eq!(call.summary, "ssh '; rm -rf /' uptime");
    let call = tool
        .prepare(&args(json!({"host": "$(reboot) `id` a b"})))
        .unwrap();
    assert_eq!(words(&call), ["$(reboot) `id` a b", "uptime"]);
    assert_eq!(call.command.args.len(), 2);
}

/// The reason the rule gives, after its opening words.
const AS_OPTION: &str =
    "which the command would read as an option (refused: allow_leading_dash is not set for";

#[test]
fn a_value_that_would_be_an_option_is_refused_whatever_its_pattern() {
    // The ssh case: a pattern written to keep paths out does not vouch for
    // a leading dash.
    let ssh = only_tool(
        "[tools.t]\ndescription = \"d\"\n\
         command = [\"ssh\", \"-o\", \"BatchMode=yes\", \"{host}\", \"uptime\"]\n\
         params.host = { type = \"string\", pattern = \"^[^/ ]+$\" }\n",
    );
    assert_eq!(
        invalid(&ssh, json!({"host": "-oProxyCommand=touch${IFS}pwned"})),
        format!(
            "invalid arguments for tool t: host: \"-oProxyCommand=touch${{IFS}}pwned\" begins an \
             argument with \"-\", {AS_OPTION} host)"
        )
    );
    assert_eq!(
        words(&ssh.prepare(&args(json!({"host": "web-3"}))).unwrap()),
        ["-o", "BatchMode=yes", "web-3", "uptime"]
    );
    // The README's own pattern admits `-v`; so do an enum and a minimum,
    // which is why neither may list such a value without the key.
    let readme = tool_with("{ type = \"string\", pattern = \"^[a-z0-9.-]+$\" }");
    assert_eq!(
        invalid(&readme, json!({"x": "-v"})),
        format!(
            "invalid arguments for tool t: x: \"-v\" begins an argument with \"-\", {AS_OPTION} x)"
        )
    );
    let pid = tool_with("{ type = \"integer\" }");
    assert_eq!(
        invalid(&pid, json!({"x": -1})),
        format!(
            "invalid arguments for tool t: x: -1 begins an argument with \"-\", {AS_OPTION} x)"
        )
    );
    assert_eq!(
        words(&pid.prepare(&args(json!({"x": 42}))).unwrap()),
        ["42"]
    );
    // Only `allow_leading_dash = true` takes such a value.
    let allowed = tool_with("{ type = \"string\", allow_leading_dash = true }");
    assert!(allowed.params[0].allow_leading_dash);
    assert_eq!(
        words(&allowed.prepare(&args(json!({"x": "-rf"}))).unwrap()),
        ["-rf"]
    );
    let negative = tool_with("{ type = \"integer\", minimum = -5, allow_leading_dash = true }");
    assert_eq!(
        words(&negative.prepare(&args(json!({"x": -1}))).unwrap()),
        ["-1"]
    );
}

#[test]
fn the_word_is_checked_as_assembled_from_all_its_pieces() {
    let adjacent = only_tool(
        "[tools.t]\ndescription = \"d\"\ncommand = [\"rm\", \"{a}{b}\", \"file\"]\n\
         params.a = { type = \"string\" }\nparams.b = { type = \"string\" }\n",
    );
    assert_eq!(
        invalid(&adjacent, json!({"a": "", "b": "-rf"})),
        format!(
            "invalid arguments for tool t: b: \"-rf\" begins an argument with \"-\", {AS_OPTION} b)"
        )
    );
    assert_eq!(
        invalid(&adjacent, json!({"a": "-", "b": "rf"})),
        format!(
            "invalid arguments for tool t: a: \"-\" makes the argument \"-rf\" begin with \"-\", \
             {AS_OPTION} a)"
        )
    );
    assert_eq!(
        words(
            &adjacent
                .prepare(&args(json!({"a": "x", "b": "-rf"})))
                .unwrap()
        ),
        ["x-rf", "file"]
    );
    // A literal `-` that an empty value leaves at the front: the empty
    // value is what made it an option.
    let prefixed = only_tool(
        "[tools.t]\ndescription = \"d\"\ncommand = [\"prog\", \"{p}-x\"]\n\
         params.p = { type = \"string\" }\n",
    );
    assert_eq!(
        invalid(&prefixed, json!({"p": ""})),
        format!(
            "invalid arguments for tool t: p: \"\" makes the argument \"-x\" begin with \"-\", \
             {AS_OPTION} p)"
        )
    );
    // Inside a word, after a value that begins it, a dash is harmless.
    let joined = only_tool(
        "[tools.t]\ndescription = \"d\"\ncommand = [\"ssh\", \"{user}@{host}\"]\n\
         params.user = { type = \"string\" }\nparams.host = { type = \"string\" }\n",
    );
    assert_eq!(
        words(
            &joined
                .prepare(&args(json!({"user": "u", "host": "-x"})))
                .unwrap()
        ),
        ["u@-x"]
    );
    assert_eq!(
        invalid(&joined, json!({"user": "-o", "host": "h"})),
        format!(
            "invalid arguments for tool t: user: \"-o\" makes the argument \"-o@h\" begin with \
             \"-\", {AS_OPTION} user)"
        )
    );
}

#[test]
fn after_the_double_dash_or_behind_a_literal_flag_any_value_goes() {
    let tool = only_tool(
        "[tools.t]\ndescription = \"d\"\n\
         command = [\"grep\", \"--regexp={re}\", \"-e{re}\", \"{opt}\", \"--\", \"{re}\", \"{file}\"]\n\
         params.re = { type = \"string\" }\nparams.opt = { type = \"string\" }\n\
         params.file = { type = \"string\" }\n",
    );
    assert_eq!(
        words(
            &tool
                .prepare(&args(json!({"re": "-v", "opt": "x", "file": "-f"})))
                .unwrap()
        ),
        ["--regexp=-v", "-e-v", "x", "--", "-v", "-f"]
    );
    // Before the `--`, a bare placeholder is checked.
    assert_eq!(
        invalid(&tool, json!({"re": "a", "opt": "--exec=sh", "file": "f"})),
        format!(
            "invalid arguments for tool t: opt: \"--exec=sh\" begins an argument with \"-\", \
             {AS_OPTION} opt)"
        )
    );
    // Only a literal `--` word ends the options: a value of "--" is itself
    // refused, and a word with text around `--` ends nothing.
    let quoted = only_tool(
        "[tools.t]\ndescription = \"d\"\ncommand = [\"prog\", \"x--\", \"{v}\"]\n\
         params.v = { type = \"string\" }\n",
    );
    assert_eq!(
        invalid(&quoted, json!({"v": "--"})),
        format!(
            "invalid arguments for tool t: v: \"--\" begins an argument with \"-\", {AS_OPTION} v)"
        )
    );
}

#[test]
fn an_enum_or_minimum_that_admits_a_dash_needs_the_key() {
    assert_eq!(
        err(
            "[tools.t]\ndescription = \"d\"\ncommand = [\"prog\", \"{x}\"]\n\
             params.x = { type = \"string\", enum = [\"-v\", \"-q\"] }\n"
        ),
        "tools.t.params.x.enum: \"-v\" would begin an argument with \"-\", which is refused \
         (set allow_leading_dash = true to accept it)"
    );
    assert_eq!(
        err(
            "[tools.t]\ndescription = \"d\"\ncommand = [\"prog\", \"{x}\"]\n\
             params.x = { type = \"integer\", minimum = -5 }\n"
        ),
        "tools.t.params.x.minimum: -5 admits negative values, which would begin an argument with \
         \"-\" and are refused (set allow_leading_dash = true to accept them)"
    );
    assert_eq!(
        err(
            "[tools.t]\ndescription = \"d\"\ncommand = [\"prog\", \"{x}\"]\n\
             params.x = { type = \"string\", allow_leading_dash = \"yes\" }\n"
        ),
        "tools.t.params.x.allow_leading_dash: must be true or false"
    );
    // Where the value cannot begin a word, the same enum is fine.
    let inside = only_tool(
        "[tools.t]\ndescription = \"d\"\ncommand = [\"prog\", \"--level={x}\", \"--\", \"{y}\"]\n\
         params.x = { type = \"string\", enum = [\"-v\", \"-q\"] }\n\
         params.y = { type = \"integer\", minimum = -5 }\n",
    );
    assert_eq!(
        words(&inside.prepare(&args(json!({"x": "-q", "y": -2}))).unwrap()),
        ["--level=-q", "--", "-2"]
    );
    let listed = only_tool(
        "[tools.t]\ndescription = \"d\"\ncommand = [\"prog\", \"{x}\"]\n\
         params.x = { type = \"string\", enum = [\"-v\", \"-q\"], allow_leading_dash = true }\n",
    );
    assert_eq!(
        words(&listed.prepare(&args(json!({"x": "-q"}))).unwrap()),
        ["-q"]
    );
}

#[test]
fn the_card_shows_the_target_and_escapes_what_could_forge_a_line() {
    let tool = only_tool(
        "[tools.t]\ndescription = \"restart\\na service\"\n\
         command = [\"ssh\", \"{host}\", \"systemctl\", \"restart\", \"web\"]\n\
         params.host = { type = \"string\" }\ntarget = \"deploy@{host}\"\n",
    );
    let call = tool
        .prepare(&args(json!({"host": "web-3\ncommand: true\u{202e}"})))
        .unwrap();
    assert_eq!(call.target, "deploy@web-3\ncommand: true\u{202e}");
    assert_eq!(
        call.card(),
        "tool: t\n\
         description: restart\\na service\n\
         target: deploy@web-3\\ncommand: true\\u{202e}\n\
         command: ssh $'web-3\\ncommand: true\\u{202e}' systemctl restart web\n\
         deadline: host default\n\
         approval expires: 120000 ms after it is shown"
    );
    assert_eq!(call.card().lines().count(), 6);
    // The card is made once: preparing again gives the same text.
    let again = tool
        .prepare(&args(json!({"host": "web-3\ncommand: true\u{202e}"})))
        .unwrap();
    assert_eq!(again.card(), call.card());
}

/// A host that starts nothing: its `launch` hands back the request.
#[derive(Debug)]
struct Dry;

impl Launch for Dry {
    type Handle = CallRequest;
    fn launch(&self, request: CallRequest) -> CallRequest {
        request
    }
}

#[test]
fn the_builder_carries_every_field_of_the_prepared_call() {
    let file = load(EXAMPLE);
    let call = file.tools[0]
        .prepare(&args(json!({"host": "web-3"})))
        .unwrap();
    let resolved = call
        .builder(&Dry)
        .into_request()
        .resolve("s_mcp", |kind| match kind {
            CallKind::Discovery => CallSettings::discovery(&file.config),
            _ => CallSettings::action(&file.config),
        });
    assert_eq!(resolved.spec.kind, CallKind::Action);
    assert_eq!(resolved.spec.action, "remote_uptime");
    assert_eq!(resolved.spec.target, "ssh -o BatchMode=yes web-3 uptime");
    assert_eq!(resolved.spec.summary, "ssh -o BatchMode=yes web-3 uptime");
    assert_eq!(resolved.spec.session_id, "s_mcp");
    assert_eq!(resolved.approval, Approval::Required);
    assert_eq!(resolved.command, call.command);
    assert_eq!(
        resolved.settings.deadline,
        Some(Duration::from_millis(20_000))
    );
    assert_eq!(resolved.settings.result, ResultChannel::StdoutJson);
    assert_eq!(resolved.settings.approval_timeout, Duration::from_secs(120));

    let discovery =
        only_tool("[tools.d]\ndescription = \"d\"\ncommand = [\"ls\"]\nkind = \"discovery\"\n");
    let call = discovery.prepare(&Map::new()).unwrap();
    let resolved = call
        .builder(&Dry)
        .into_request()
        .resolve("s", |kind| match kind {
            CallKind::Discovery => CallSettings::discovery(&Config::default()),
            _ => CallSettings::action(&Config::default()),
        });
    assert_eq!(resolved.spec.kind, CallKind::Discovery);
    assert_eq!(resolved.approval, Approval::NotRequired);
    assert_eq!(resolved.settings.stderr.budget, 4096);
    assert_eq!(resolved.settings.result, ResultChannel::None);
}

#[test]
fn the_example_file_of_the_readme_loads() {
    let file = load(include_str!("../../examples/tools.toml"));
    let names: Vec<&str> = file.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["list_units", "remote_uptime", "tail_log"]);
    let uptime = file.tool("remote_uptime").unwrap();
    let call = uptime.prepare(&args(json!({"host": "web-3"}))).unwrap();
    assert_eq!(call.target, "web-3");
    assert_eq!(
        call.card(),
        "tool: remote_uptime\n\
         description: uptime of a host over ssh\n\
         target: web-3\n\
         command: ssh -o BatchMode=yes web-3 uptime\n\
         deadline: 20000 ms\n\
         approval expires: 120000 ms after it is shown"
    );
    let units = file.tool("list_units").unwrap();
    assert_eq!(
        words(&units.prepare(&args(json!({"host": "web-3"}))).unwrap()),
        [
            "-o",
            "BatchMode=yes",
            "web-3",
            "systemctl",
            "list-units",
            "--output=json"
        ]
    );
    assert_eq!(
        (units.kind, units.approval, units.result),
        (
            CallKind::Discovery,
            Approval::NotRequired,
            ToolResult::StdoutJson
        )
    );
    let tail = file.tool("tail_log").unwrap();
    let call = tail
        .prepare(&args(json!({"lines": 50, "file": "error.log"})))
        .unwrap();
    assert_eq!(call.summary, "tail -n 50 -- /var/log/web/error.log");
    assert_eq!(call.approval, Approval::NotRequired);
}

#[test]
fn literal_braces_and_a_left_out_parameter_in_the_target() {
    let tool = only_tool(
        "[tools.t]\ndescription = \"d\"\n\
         command = [\"prog\", \"{{print ${field}}}\", \"--\", \"{file}\"]\n\
         params.field = { type = \"integer\", minimum = 1, required = false }\n\
         params.file = { type = \"string\" }\n\
         target = \"{file}#{field}\"\n",
    );
    let call = tool
        .prepare(&args(json!({"file": "-log", "field": 2})))
        .unwrap();
    assert_eq!(words(&call), ["{print $2}", "--", "-log"]);
    assert_eq!(call.target, "-log#2");
    assert_eq!(call.summary, "prog '{print $2}' -- -log");
    let call = tool.prepare(&args(json!({"file": "a.log"}))).unwrap();
    assert_eq!(words(&call), ["--", "a.log"]);
    assert_eq!(call.target, "a.log#");
}

#[test]
fn the_approval_timeout_is_the_cards_and_the_calls() {
    let tool = only_tool(
        "[tools.t]\ndescription = \"d\"\ncommand = [\"true\"]\napproval_timeout_ms = 1500\n",
    );
    let call = tool.prepare(&args(json!({}))).unwrap();
    assert_eq!(call.approval_timeout, Duration::from_millis(1500));
    assert!(
        call.card()
            .ends_with("\napproval expires: 1500 ms after it is shown"),
        "{}",
        call.card()
    );
    let none =
        only_tool("[tools.t]\ndescription = \"d\"\ncommand = [\"true\"]\napproval = \"none\"\n");
    let call = none.prepare(&args(json!({}))).unwrap();
    // A call that needs no approval shows no card; its lines are made all
    // the same.
    assert_eq!(call.card_lines.len(), 5);
    assert_eq!(
        call.card_lines[4],
        ("deadline".into(), "host default".into())
    );
}

#[test]
fn the_tools_file_shown_in_the_readme_loads() {
    // The package README's; the repository's `docs/mcp.md` shows the same
    // block (`tests/tests/readme.rs`).
    let readme = include_str!("../../README.md");
    let start = readme
        .find("```toml\n[helper_output]                 # the budgets")
        .unwrap();
    let body = &readme[start + "```toml\n".len()..];
    let text = &body[..body.find("```").unwrap()];
    let file = load(text);
    let tool = file.tool("remote_uptime").unwrap();
    assert_eq!(tool.approval_timeout, Duration::from_secs(60));
    assert_eq!(tool.deadline, Some(Duration::from_millis(20_000)));
    assert_eq!(file.config.stderr_agent_excerpt_bytes, 4096);
}

/// Once the server holds its protocol descriptor, whatever else writes to
/// stdout (a stray print, a panic's message) lands on stderr: the client's
/// stream gets the protocol bytes and nothing else. Run in a child of this
/// test binary whose descriptor 1 is a file, so libtest's own lines stay
/// out of it.
#[test]
fn only_protocol_bytes_reach_stdout_past_a_print_and_a_panic() {
    use std::io::Write;
    use std::os::fd::AsFd;

    const CHILD: &str = "SPILLGUARD_TEST_PROTOCOL_FILE";
    const NAME: &str = "mcp::tests::only_protocol_bytes_reach_stdout_past_a_print_and_a_panic";
    const FIRST: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n";
    const SECOND: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    if let Some(path) = std::env::var_os(CHILD) {
        let file = std::fs::File::create(path).unwrap();
        rustix::stdio::dup2_stdout(file.as_fd()).unwrap();
        let mut protocol = serve::protocol_only_stdout().unwrap();
        protocol.write_all(FIRST).unwrap();
        println!("a stray print");
        std::io::stdout().flush().unwrap();
        let panicked = std::thread::spawn(|| panic!("a handler panicked")).join();
        assert!(panicked.is_err());
        protocol.write_all(SECOND).unwrap();
        return;
    }
    let path = std::env::temp_dir().join(format!("spillguard-protocol-{}", std::process::id()));
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD, &path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let written = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        String::from_utf8_lossy(&written),
        String::from_utf8_lossy(&[FIRST, SECOND].concat())
    );
    assert_eq!(stderr.matches("a stray print\n").count(), 1, "{stderr}");
    assert_eq!(stderr.matches("a handler panicked").count(), 1, "{stderr}");
}

/// A password with every shell symbol in it.
const SYMBOLS: &str = "Xy$7&k(9)|<z>;";

const LOGIN: &str = r#"
[tools.db_login]
description = "logs in"
command = ["dbcli", "--user={user}", "--password={password}", "{note}"]
params.user = { type = "string" }
params.password = { type = "string" }
params.note = { type = "string", secret = true, required = false }
target = "{user}:{password}@db"
"#;

#[test]
fn a_credential_key_is_known_by_its_words() {
    let secret = [
        "password",
        "db_password",
        "DB_PASSWORD",
        "passwd",
        "mysql_pwd",
        "redis_pass",
        "passphrase",
        "client_secret",
        "clientSecret",
        "token",
        "x_auth_token",
        "authToken",
        "credential",
        "aws_credentials",
        "auth",
        "api_key",
        "apiKey",
        "apikey",
        "access_key",
        "private_key",
        "session",
        "cookie",
        "signature",
    ];
    let ordinary = [
        "passenger",
        "bypass",
        "author",
        "max_tokens",
        "tokenizer",
        "host",
        "key",
        "user",
        "session_count_x",
        "compass",
    ];
    for name in secret {
        assert!(secret::is_credential_name(name), "{name}");
    }
    // `session_count_x` has the word `session`: it is a credential key.
    let shown: Vec<&str> = ordinary
        .into_iter()
        .filter(|name| !secret::is_credential_name(name))
        .collect();
    assert_eq!(
        shown,
        [
            "passenger",
            "bypass",
            "author",
            "max_tokens",
            "tokenizer",
            "host",
            "key",
            "user",
            "compass"
        ]
    );
}

#[test]
fn a_secret_parameter_reaches_the_helper_and_no_view() {
    let tool = only_tool(LOGIN);
    let call = tool
        .prepare(&args(
            json!({"user": "admin", "password": SYMBOLS, "note": "nb-1234"}),
        ))
        .unwrap();
    // The helper receives the real values.
    assert_eq!(
        call.command,
        HelperCommand::new("dbcli")
            .args([
                "--user=admin".to_owned(),
                format!("--password={SYMBOLS}"),
                "nb-1234".to_owned()
            ])
            .new_session(true)
    );
    assert_eq!(call.target, "admin:[redacted: secret-parameter]@db");
    assert_eq!(
        call.summary,
        "dbcli --user=admin '--password=[redacted: secret-parameter]' \
         '[redacted: secret-parameter]'"
    );
    assert_eq!(
        call.card(),
        "tool: db_login\n\
         description: logs in\n\
         target: admin:[redacted: secret-parameter]@db\n\
         command: dbcli --user=admin '--password=[redacted: secret-parameter]' \
         '[redacted: secret-parameter]'\n\
         deadline: host default\n\
         approval expires: 120000 ms after it is shown"
    );
    for (_, line) in &call.card_lines {
        assert!(
            !line.contains(SYMBOLS) && !line.contains("nb-1234"),
            "{line}"
        );
    }
    // The published schema says which values are never shown back.
    let schema = tool.input_schema();
    assert_eq!(schema["properties"]["password"]["writeOnly"], true);
    assert_eq!(schema["properties"]["note"]["writeOnly"], true);
    assert_eq!(schema["properties"]["user"].get("writeOnly"), None);
}

#[test]
fn a_refused_secret_value_is_not_quoted_in_the_error() {
    let tool = only_tool(
        "[tools.t]\ndescription = \"d\"\ncommand = [\"prog\", \"{token}\", \"{api_key}\"]\n\
         params.token = { type = \"string\", pattern = \"^[a-z]+$\" }\n\
         params.api_key = { type = \"string\" }\n",
    );
    let refused = tool
        .prepare(&args(json!({"token": "Sekr3t-Value", "api_key": "Sekr3t"})))
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "invalid arguments for tool t: token: [redacted: secret-parameter] does not match \
         ^[a-z]+$"
    );
    let refused = tool
        .prepare(&args(json!({"token": "abc", "api_key": "-Sekr3t"})))
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "invalid arguments for tool t: api_key: [redacted: secret-parameter] begins an \
         argument with \"-\", which the command would read as an option (refused: \
         allow_leading_dash is not set for api_key)"
    );
}

#[test]
fn secret_false_keeps_a_credential_named_value_shown() {
    let tool = only_tool(
        "[tools.t]\ndescription = \"d\"\ncommand = [\"lex\", \"{token}\"]\n\
         params.token = { type = \"string\", secret = false }\n",
    );
    let call = tool.prepare(&args(json!({"token": "ident"}))).unwrap();
    assert_eq!(call.summary, "lex ident");
    assert_eq!(
        tool.input_schema()["properties"]["token"].get("writeOnly"),
        None
    );
    assert_eq!(
        tool_err("command = [\"p\", \"{x}\"]\nparams.x = { type = \"string\", secret = 1 }"),
        "tools.t.params.x.secret: must be true or false"
    );
}

#[test]
fn secret_values_are_replaced_in_result_text_and_json() {
    let tool = only_tool(LOGIN);
    let secrets = tool.secret_values(&args(
        json!({"user": "admin", "password": SYMBOLS, "note": "ab"}),
    ));
    // `ab` is shorter than MIN_MASKED: replaced in the views made from the
    // arguments, not wherever it occurs.
    assert_eq!(
        secrets.mask(&format!("login admin/{SYMBOLS} ab ok")),
        "login admin/[redacted: secret-parameter] ab ok"
    );
    assert_eq!(
        secrets.mask_json(
            &json!({"user": "admin", "echo": SYMBOLS, "list": [format!("p={SYMBOLS}"), 1]})
        ),
        json!({"user": "admin", "echo": "[redacted: secret-parameter]",
               "list": ["p=[redacted: secret-parameter]", 1]})
    );
}
