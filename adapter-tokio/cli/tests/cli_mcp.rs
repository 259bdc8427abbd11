//! `spillguard mcp --tools FILE --check` as a black box: the tools as one
//! JSON line, exit codes and one-line errors.
#![allow(clippy::unwrap_used)]

// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;

mod binary;

use std::path::Path;

use binary::{McpClient, spillguard, usage_failure};

use serde_json::{Value, json};
use support::temp_path;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/tools.toml");

#[test]
fn check_prints_the_tools_of_the_example_as_one_json_line() {
    // Its programs (ssh, tail) where --check looks for them.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(["mcp", "--tools", EXAMPLE, "--check"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(text.lines().count(), 1);
    assert!(text.ends_with('\n'));
    let value: Value = serde_json::from_str(text.trim_end()).unwrap();
    let tools = value["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["list_units", "remote_uptime", "tail_log"]);
    // Every tool declares the shape of its structuredContent.
    for tool in tools {
        let schema = &tool["outputSchema"];
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], true);
        assert_eq!(
            schema["properties"]["state"]["enum"]
                .as_array()
                .unwrap()
                .len(),
            17
        );
    }
    assert_eq!(
        tools[1]["outputSchema"]["properties"]["result"]["type"],
        "string"
    );
    let without_output: Vec<Value> = tools
        .iter()
        .map(|t| {
            let mut t = t.clone();
            t.as_object_mut().unwrap().remove("outputSchema");
            t
        })
        .collect();
    let tools = &without_output;
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
fn check_warns_of_each_program_it_cannot_find_and_still_exits_0() {
    use std::os::unix::fs::PermissionsExt;
    let bin = temp_path("check-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let found = bin.join("found-tool");
    std::fs::write(&found, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&found, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plain = bin.join("not-executable");
    std::fs::write(&plain, "").unwrap();
    let path = temp_path("check-path.toml");
    std::fs::write(
        &path,
        format!(
            "[tools.a]\ndescription = \"d\"\ncommand = [\"found-tool\"]\n\
             [tools.b]\ndescription = \"d\"\ncommand = [\"no-such-program-anywhere\"]\n\
             [tools.c]\ndescription = \"d\"\ncommand = [{:?}]\n\
             [tools.d]\ndescription = \"d\"\ncommand = [{:?}]\n\
             [tools.e]\ndescription = \"d\"\ncommand = [\"not-executable\"]\n",
            found.display().to_string(),
            bin.join("missing").display().to_string(),
        ),
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(["mcp", "--tools", &path.display().to_string(), "--check"])
        .env("PATH", &bin)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let value: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(value["tools"].as_array().unwrap().len(), 5);
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        format!(
            "spillguard: warning: tool b: program \"no-such-program-anywhere\" is not on PATH (a call of it would fail to start)\n\
             spillguard: warning: tool d: program {:?} is not an executable file (a call of it would fail to start)\n\
             spillguard: warning: tool e: program \"not-executable\" is not on PATH (a call of it would fail to start)\n",
            bin.join("missing").display().to_string()
        )
    );
    std::fs::remove_dir_all(&bin).unwrap();
    std::fs::remove_file(&path).unwrap();
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

const PEER_TOOLS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/mcp_tools.toml");

/// `spillguard mcp` with a client that keeps stdin open: SIGTERM, SIGINT
/// and SIGHUP each end it within the grace + 1 s with 128 + N, after the
/// tool call in flight (a helper sleeping 30 s) was stopped and answered
/// with its record; stdout then ends.
#[test]
fn a_signal_ends_the_server_with_stdin_open_after_answering_the_call_in_flight() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use rustix::process::{Pid, Signal, kill_process};

    for (signal, number) in [(Signal::TERM, 15), (Signal::INT, 2), (Signal::HUP, 1)] {
        let pidfile = temp_path(&format!("mcp-signal-{number}.pid"));
        let _ = std::fs::remove_file(&pidfile);
        let mut server = Command::new(env!("CARGO_BIN_EXE_spillguard"))
            .args(["mcp", "--tools", PEER_TOOLS])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = server.stdin.take().unwrap();
        let mut stdout = BufReader::new(server.stdout.take().unwrap());
        let mut send = |message: Value| {
            stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
        };
        send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "signals", "version": "1"}}}),
        );
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap()["id"], 1);
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        send(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "sleep", "arguments": {"pidfile": pidfile.to_str().unwrap(), "seconds": 30}}}),
        );
        support::poll_until(Duration::from_secs(10), "the helper to start", || {
            std::fs::read_to_string(&pidfile).is_ok_and(|pid| pid.ends_with('\n'))
        });
        let signalled = Instant::now();
        kill_process(Pid::from_child(&server), signal).unwrap();
        // The answer to the call in flight, then the end of stdout.
        let mut answers = Vec::new();
        loop {
            let mut line = String::new();
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            answers.push(serde_json::from_str::<Value>(&line).unwrap());
        }
        let status = server.wait().unwrap();
        let elapsed = signalled.elapsed();
        drop(stdin);
        assert_eq!(status.code(), Some(128 + number), "signal {number}");
        // The default grace is 5 s; sleep dies of TERM at once.
        assert!(
            elapsed < Duration::from_secs(5 + 1),
            "signal {number}: {elapsed:?}"
        );
        let answer = answers.iter().find(|a| a["id"] == 2).unwrap_or_else(|| {
            panic!("signal {number}: no answer for the call in flight: {answers:?}")
        });
        let record = &answer["result"]["structuredContent"];
        assert_eq!(
            record["state"], "cancelled_after_dispatch",
            "signal {number}"
        );
        assert_eq!(record["cancel_reason"], "host_shutdown", "signal {number}");
        assert_eq!(record["exit_signal"], 15, "signal {number}");
        let _ = std::fs::remove_file(&pidfile);
    }
}

/// One approved call of `spillguard mcp --tools TOOLS --audit LOG`, over
/// the server's own stdin and stdout with elicitation: the card the client
/// was shown, the call's answer, the audit log's bytes and the card its
/// activity view keeps.
struct ApprovedCall {
    shown: String,
    answer: Value,
    log: Vec<u8>,
    logged_card: String,
}

fn approve_one_call(name: &str, tools_toml: &str, arguments: Value) -> ApprovedCall {
    let tools = temp_path(&format!("card-tools-{name}.toml"));
    std::fs::write(&tools, tools_toml).unwrap();
    let log = temp_path(&format!("card-audit-{name}.log"));
    let _ = std::fs::remove_file(&log);
    let args = [
        "mcp",
        "--tools",
        tools.to_str().unwrap(),
        "--audit",
        log.to_str().unwrap(),
    ];
    let mut client = McpClient::start(&args, Path::new("."));
    client.initialize("card", json!({"elicitation": {}}));
    client.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": name, "arguments": arguments}}),
    );
    let ask = client.next();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    let shown = ask["params"]["message"].as_str().unwrap().to_owned();
    client.send(
        json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {}}}),
    );
    let answer = client.next();
    assert_eq!(answer["id"], 2);
    assert_eq!(client.close(), Some(0));

    let activity = spillguard(&["audit", "activity", log.to_str().unwrap(), "--json"]);
    let text = String::from_utf8(activity.stdout).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let row = rows
        .iter()
        .find(|r| r["card"].is_string())
        .unwrap_or_else(|| panic!("no card in {text}"));
    assert_eq!(row["state"], "completed");
    let logged_card = row["card"].as_str().unwrap().to_owned();
    let log_bytes = std::fs::read(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&tools);
    ApprovedCall {
        shown,
        answer,
        log: log_bytes,
        logged_card,
    }
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The approval card a client is shown is, byte for byte, the card the
/// audit log keeps: redacted (a password given as a flag's argument), with
/// line and paragraph separators, zero-width and bidi characters escaped;
/// the password is nowhere in the log, the card or the result.
#[test]
fn the_card_the_client_sees_is_the_audit_logs_own() {
    let password = "Q7x9hunter2P8z3";
    let user = "ops\u{2028}approved by admin\u{200b}\u{202e}";
    let call = approve_one_call(
        "login",
        "[tools.login]\ndescription = \"log in as USER\"\n\
         command = [\"sh\", \"-c\", \"exit 0\", \"login\", \"--user\", \"{user}\", \"--password\", \"{pw}\"]\n\
         params.user = { type = \"string\" }\nparams.pw = { type = \"string\" }\n\
         approval = \"required\"\ntarget = \"{user}\"\n",
        json!({"user": user, "pw": password}),
    );
    assert_eq!(
        call.shown,
        "tool: login\n\
         description: log in as USER\n\
         target: ops\\u{2028}approved by admin\\u{200b}\\u{202e}\n\
         command: sh -c 'exit 0' login --user 'ops\\u{2028}approved by admin\\u{200b}\\u{202e}' \
         --password [redacted: flag-argument]\n\
         deadline: host default\n\
         approval expires: 120000 ms after it is shown"
    );
    assert_eq!(call.shown.lines().count(), 6);
    // The log's card is the same text, byte for byte.
    assert_eq!(call.logged_card.as_bytes(), call.shown.as_bytes());
    // The password is nowhere.
    assert!(!holds(&call.log, password));
    assert!(!call.answer.to_string().contains(password));
}

/// Every flag form of a credential a tool's command may give its value
/// in: each is replaced in place on the card (and so in the log), and the
/// value is nowhere in the log or the answer.
#[test]
fn credentials_in_flag_forms_reach_neither_the_card_nor_the_log() {
    let password = "Q7x9hunter2P8z3";
    let call = approve_one_call(
        "db",
        "[tools.db]\ndescription = \"d\"\n\
         command = [\"sh\", \"-c\", \"exit 0\", \"mysql\", \"-p{pw}\", \"--token={pw}\", \
         \"curl\", \"-u\", \"admin:{pw}\", \"--user\", \"ops:{pw}\", \"--api-key\", \"{pw}\", \
         \"-H\", \"Authorization: Bearer {pw}\"]\n\
         params.pw = { type = \"string\" }\napproval = \"required\"\n",
        json!({"pw": password}),
    );
    let command = "sh -c 'exit 0' mysql -p[redacted: mysql-password] \
                   --token=[redacted: flag-argument] curl -u admin:[redacted: user-password-flag] \
                   --user ops:[redacted: user-password-flag] --api-key [redacted: flag-argument] \
                   -H 'Authorization: Bearer [redacted: bearer-token]'";
    let lines: Vec<&str> = call.shown.lines().collect();
    // With no `target` of its own, the tool's target is its command line.
    assert_eq!(lines[2], format!("target: {command}"));
    assert_eq!(lines[3], format!("command: {command}"));
    assert_eq!(call.logged_card.as_bytes(), call.shown.as_bytes());
    assert!(!holds(&call.log, password));
    assert!(!holds(&call.log, "Q7x9"));
    assert!(!call.answer.to_string().contains("Q7x9"));
}

#[test]
fn check_names_each_placeholder_inside_code_and_exits_2() {
    let path = temp_path("code-tools.toml");
    std::fs::write(
        &path,
        r#"[tools.hello]
description = "greets"
command = ["sh", "-c", "echo hello {name}"]
params.name = { type = "string" }

[tools.fine]
description = "greets safely"
command = ["sh", "-c", "echo hello \"$1\"", "_", "{name}"]
params.name = { type = "string" }

[tools.py]
description = "prints"
command = ["/usr/bin/env", "python3", "-c", "print('{x}')"]
params.x = { type = "string" }

[tools.remote]
description = "runs remotely"
command = ["ssh", "-o", "ProxyCommand=nc {host} 22", "{host}", "sh", "-c", "{cmd}"]
params.host = { type = "string" }
params.cmd = { type = "string" }
"#,
    )
    .unwrap();
    let shown = path.display().to_string();
    let output = spillguard(&["mcp", "--tools", &shown, "--check"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(output.stdout, b"");
    let prefix = format!("spillguard: invalid tools file {shown}: ");
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        [
            r#"tools.hello.command[2]: "echo hello {name}" is code that sh runs (-c): a value placed there can run commands; pass it as a positional parameter: ["sh", "-c", "echo hello \"$1\"", "_", "{name}"]"#,
            r#"tools.py.command[3]: "print('{x}')" is code that python runs (-c): a value placed there can run commands; pass it as an argument: ["/usr/bin/env", "python3", "-c", "import sys; print(sys.argv[1])", "{x}"]"#,
            r#"tools.remote.command[2]: "ProxyCommand=nc {host} 22" is code that ssh runs (-o ProxyCommand): a value placed there can run commands; a value is not allowed there"#,
            r#"tools.remote.command[6]: "{cmd}" is code that sh runs (-c): a value placed there can run commands; a value is not allowed there"#,
        ]
        .iter()
        .map(|line| format!("{prefix}{line}\n"))
        .collect::<String>()
    );
    // The safe forms load.
    std::fs::write(
        &path,
        r#"[tools.hello]
description = "greets"
command = ["sh", "-c", "echo hello \"$1\"", "_", "{name}"]
params.name = { type = "string" }

[tools.py]
description = "prints"
command = ["/usr/bin/env", "python3", "-c", "import sys; print(sys.argv[1])", "{x}"]
params.x = { type = "string" }
"#,
    )
    .unwrap();
    let output = spillguard(&["mcp", "--tools", &shown, "--check"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn the_tools_of_the_peer_tests_load() {
    let peers = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/mcp_tools.toml");
    let output = spillguard(&["mcp", "--tools", peers, "--check"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

/// A tool has no business with the user's terminal: its helper runs in a
/// session of its own (the session id is its own pid), with no limit or
/// sandbox asked.
#[test]
fn a_tool_runs_in_a_session_of_its_own() {
    let call = approve_one_call(
        "session",
        "[tools.session]\ndescription = \"which session it runs in\"\n\
         command = [\"sh\", \"-c\", \"[ \\\"$(cut -d' ' -f6 /proc/$$/stat)\\\" = $$ ] && echo own || echo host\"]\n\
         approval = \"required\"\n",
        json!({}),
    );
    let text = call.answer["result"]["structuredContent"]["result"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(text, "own\n", "{}", call.answer);
}
