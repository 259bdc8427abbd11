//! `spillguard mcp` over raw bytes: every request answered (parse errors,
//! invalid requests, invalid params, a duplicate id beside the first
//! call's own answer), a result a model can read, and 200 approvals at
//! once that all run because each card's deadline starts at its delivery.
#![allow(clippy::unwrap_used)]

// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::temp_path;

/// A server of `tools_toml`, initialized (protocol 2025-06-18 unless said,
/// with the elicitation capability), and the lines it writes, read on a
/// thread.
struct Session {
    server: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
}

impl Session {
    fn start(name: &str, tools_toml: &str, extra: &[&str]) -> Session {
        Self::start_paced(name, tools_toml, extra, None)
    }

    /// With `pace`, the server's stdout pipe holds one page (4 KiB) and
    /// each `elicitation/create` is read `pace` after the line before it:
    /// a client that reads slowly, so that later cards wait in the server.
    fn start_paced(
        name: &str,
        tools_toml: &str,
        extra: &[&str],
        pace: Option<Duration>,
    ) -> Session {
        Self::open(name, tools_toml, extra, pace, "2025-06-18")
    }

    fn open(
        name: &str,
        tools_toml: &str,
        extra: &[&str],
        pace: Option<Duration>,
        protocol: &str,
    ) -> Session {
        let tools = temp_path(&format!("wire-{name}.toml"));
        std::fs::write(&tools, tools_toml).unwrap();
        let mut server = Command::new(env!("CARGO_BIN_EXE_spillguard"))
            .args(["mcp", "--tools", tools.to_str().unwrap()])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(temp_path(&format!("wire-{name}.stderr"))).unwrap())
            .spawn()
            .unwrap();
        let stdin = server.stdin.take().unwrap();
        let stdout = server.stdout.take().unwrap();
        if pace.is_some() {
            rustix::pipe::fcntl_setpipe_size(&stdout, 4096).unwrap();
        }
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || read_lines(stdout, &tx, pace));
        let mut session = Session {
            server,
            stdin,
            lines,
        };
        session.send_line(
            &json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
                "protocolVersion": protocol, "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "wire", "version": "1"}}})
            .to_string(),
        );
        assert_eq!(session.next()["id"], "init");
        session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn send_line(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn send(&mut self, message: Value) {
        self.send_line(&message.to_string());
    }

    fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(30))
            .expect("a line from the server within 30 s")
    }

    /// Ends the client's input; the server's exit status.
    fn end(mut self) -> Option<i32> {
        drop(self.stdin);
        self.server.wait().unwrap().code()
    }
}

fn read_lines(stdout: ChildStdout, tx: &mpsc::Sender<Value>, pace: Option<Duration>) {
    // A small buffer, so that a paced reader leaves the rest in the pipe.
    for line in BufReader::with_capacity(512, stdout).lines() {
        let Ok(line) = line else { return };
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON on the server's stdout ({e}): {line}"));
        if let Some(pace) = pace
            && value["method"] == "elicitation/create"
        {
            std::thread::sleep(pace);
        }
        if tx.send(value).is_err() {
            return;
        }
    }
}

const NAP_TOOLS: &str = "[tools.nap]\ndescription = \"sleeps a little\"\n\
    command = [\"sleep\", \"0.3\"]\napproval = \"none\"\n\
    [tools.echo]\ndescription = \"echoes\"\ncommand = [\"echo\", \"{word}\"]\n\
    params.word = { type = \"string\" }\napproval = \"none\"\n\
    [tools.fail]\ndescription = \"fails\"\n\
    command = [\"sh\", \"-c\", \"echo 'connect to web-3: refused' >&2; exit 255\"]\n\
    approval = \"none\"\n";

#[test]
fn every_request_is_answered_even_when_it_cannot_be_served() {
    let mut session = Session::start("corners", NAP_TOOLS, &[]);
    let error = |code: i64, message: &str| json!({"code": code, "message": message});
    let cases: Vec<(&str, Value)> = vec![
        (
            "{broken",
            json!({"jsonrpc": "2.0", "id": null, "error": error(-32700,
                "Parse error: key must be a string at line 1 column 2")}),
        ),
        (
            "[1, 2]",
            json!({"jsonrpc": "2.0", "id": null, "error": error(-32600,
                "Invalid Request: a batch (a JSON array) is not supported: send one message per line")}),
        ),
        (
            "\"ping\"",
            json!({"jsonrpc": "2.0", "id": null, "error": error(-32600,
                "Invalid Request: a message is a JSON object")}),
        ),
        (
            r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#,
            json!({"jsonrpc": "2.0", "id": 3, "error": error(-32600,
                "Invalid Request: \"jsonrpc\" must be \"2.0\"")}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            json!({"jsonrpc": "2.0", "id": null, "error": error(-32600,
                "Invalid Request: \"id\" must be a string or an integer")}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":7}"#,
            json!({"jsonrpc": "2.0", "id": 4, "error": error(-32600,
                "Invalid Request: \"method\" must be a string")}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call"}"#,
            json!({"jsonrpc": "2.0", "id": 5, "error": error(-32602,
                "Invalid params: tools/call needs params: an object with the tool's name and its arguments")}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"nap"}"#,
            json!({"jsonrpc": "2.0", "id": 6, "error": error(-32602,
                "Invalid params: tools/call: params must be an object")}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{}}}"#,
            json!({"jsonrpc": "2.0", "id": 7, "error": error(-32602,
                "Invalid params: tools/call needs params.name, the tool's name")}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"nap","arguments":[1]}}"#,
            json!({"jsonrpc": "2.0", "id": 8, "error": error(-32602,
                "Invalid params: tools/call: params.arguments must be an object")}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/list","params":[]}"#,
            json!({"jsonrpc": "2.0", "id": 9, "error": error(-32602,
                "Invalid params: tools/list: params must be an object")}),
        ),
    ];
    for (line, expected) in &cases {
        session.send_line(line);
        assert_eq!(&session.next(), expected, "{line}");
    }
    // An empty line is no message, and gets nothing; an unknown method is
    // the session's own error. The next answer is the ping's.
    session.send_line("");
    session.send(json!({"jsonrpc": "2.0", "id": 10, "method": "no/such"}));
    let unknown = session.next();
    assert_eq!(
        (unknown["id"].clone(), unknown["error"]["code"].clone()),
        (json!(10), json!(-32601))
    );
    session.send(json!({"jsonrpc": "2.0", "id": 11, "method": "ping"}));
    assert_eq!(
        session.next(),
        json!({"jsonrpc": "2.0", "id": 11, "result": {}})
    );
    assert_eq!(session.end(), Some(0));

    // On protocol 2026-07-28 an error whose request id is unknown leaves
    // `id` out (before it, JSON-RPC 2.0's `"id": null`).
    let mut modern = Session::start("corners-modern", NAP_TOOLS, &[]);
    modern.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
    );
    assert_eq!(modern.next()["id"], 1);
    modern.send_line("{broken");
    assert_eq!(
        modern.next(),
        json!({"jsonrpc": "2.0", "error": error(-32700,
            "Parse error: key must be a string at line 1 column 2")})
    );
    assert_eq!(modern.end(), Some(0));
}

#[test]
fn a_duplicate_id_gets_its_own_error_and_the_first_calls_answer_still_arrives() {
    let mut session = Session::start("duplicate", NAP_TOOLS, &[]);
    session.send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "nap", "arguments": {}}}));
    session.send(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    let first = session.next();
    assert_eq!(
        first,
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message":
            "Invalid Request: a request with id 7 is still in flight (an id is unique among the \
             requests not yet answered); the first one goes on"}})
    );
    let second = session.next();
    assert_eq!(second["id"], 7);
    assert_eq!(second["result"]["structuredContent"]["state"], "completed");
    // Answered, the id is free again.
    session.send(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    assert_eq!(
        session.next(),
        json!({"jsonrpc": "2.0", "id": 7, "result": {}})
    );
    assert_eq!(session.end(), Some(0));
}

#[test]
fn the_text_a_model_reads_is_the_result_or_one_paragraph_of_error() {
    let mut session = Session::start("text", NAP_TOOLS, &[]);
    session.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"word": "web-3"}}}));
    let ok = session.next();
    assert_eq!(ok["result"]["isError"], false);
    assert_eq!(
        ok["result"]["content"],
        json!([{"type": "text", "text": "web-3\n"}])
    );
    let record = &ok["result"]["structuredContent"];
    assert_eq!(
        (
            record["state"].clone(),
            record["result"].clone(),
            record["result_kind"].clone()
        ),
        (json!("completed"), json!("web-3\n"), Value::Null)
    );

    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fail", "arguments": {}}}));
    let failed = session.next();
    assert_eq!(failed["result"]["isError"], true);
    assert_eq!(
        failed["result"]["content"],
        json!([{"type": "text", "text":
            "tool fail did not complete: state failed_local, exit status 255. \
             stderr (26 bytes seen):\nconnect to web-3: refused\n"}])
    );
    let record = &failed["result"]["structuredContent"];
    assert_eq!(record["exit_status"], 255);
    assert_eq!(record["stderr_excerpt"], "connect to web-3: refused\n");
    assert!(record["pid"].is_u64(), "the whole record stays structured");

    // Invalid arguments: the paragraph names the parameter.
    session.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"word": "-rf"}}}));
    let refused = session.next();
    assert_eq!(
        refused["result"]["content"][0]["text"],
        "tool echo did not complete: state failed_before_dispatch, no exit status; invalid \
         arguments for tool echo: word: \"-rf\" begins an argument with \"-\", which the command \
         would read as an option (refused: allow_leading_dash is not set for word). No stderr."
    );

    // Each tool declares the shape of its structuredContent.
    session.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}));
    let list = session.next();
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3);
    for tool in tools {
        let schema = &tool["outputSchema"];
        assert_eq!(schema["type"], "object", "{tool}");
        assert_eq!(schema["properties"]["result"]["type"], "string", "{tool}");
        assert_eq!(
            schema["properties"]["result_kind"]["type"],
            json!(["string", "null"])
        );
        for field in [
            "call_id",
            "state",
            "result",
            "result_kind",
            "stderr_excerpt",
        ] {
            assert!(
                schema["required"]
                    .as_array()
                    .unwrap()
                    .contains(&json!(field)),
                "{field}"
            );
        }
    }
    assert_eq!(session.end(), Some(0));
}

/// 200 calls that need approval, at once, with a 5 s approval timeout,
/// and a client that reads slowly (one card every 30 ms, through a 4 KiB
/// pipe: the last cards reach it 6 s after they were shown) but answers
/// each card as soon as it reads it. Every call runs: each card's deadline
/// starts once its `elicitation/create` was written, not when the call
/// began to wait.
#[test]
fn two_hundred_concurrent_approvals_answered_at_once_all_complete() {
    const CALLS: u64 = 200;
    let log = temp_path("wire-approvals.log");
    let _ = std::fs::remove_file(&log);
    let mut session = Session::start_paced(
        "approvals",
        "[tools.deploy]\ndescription = \"deploys\"\ncommand = [\"true\"]\n\
         approval = \"required\"\napproval_timeout_ms = 5000\n",
        &["--audit", log.to_str().unwrap()],
        Some(Duration::from_millis(30)),
    );
    let started = Instant::now();
    for id in 0..CALLS {
        session.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "deploy", "arguments": {}}}));
    }
    let mut records: HashMap<u64, Value> = HashMap::new();
    let mut cards = 0;
    while records.len() < CALLS as usize {
        let message = session.next();
        if message["method"] == "elicitation/create" {
            cards += 1;
            session.send(json!({"jsonrpc": "2.0", "id": message["id"],
                "result": {"action": "accept", "content": {}}}));
            continue;
        }
        if message["method"] == "notifications/cancelled" {
            // A card withdrawn: its call's state says why.
            continue;
        }
        let id = message["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("{message}"));
        records.insert(id, message["result"]["structuredContent"].clone());
    }
    let elapsed = started.elapsed();
    assert_eq!(cards, CALLS);
    // The last cards were delivered long after the calls began to wait.
    assert!(elapsed > Duration::from_secs(5), "{elapsed:?}");
    let late = records
        .values()
        .filter(|r| r["card_delivered_offset_us"].as_u64().unwrap_or(0) > 5_000_000)
        .count();
    assert!(late > 0, "no card was delivered after 5 s");
    let states: HashMap<&str, usize> = records.values().fold(HashMap::new(), |mut n, r| {
        *n.entry(r["state"].as_str().unwrap()).or_default() += 1;
        n
    });
    assert_eq!(
        states,
        HashMap::from([("completed", CALLS as usize)]),
        "after {elapsed:?}"
    );
    assert_eq!(session.end(), Some(0));
    let _ = std::fs::remove_file(&log);
}

/// A password with every shell symbol in it.
const SYMBOLS: &str = "Xy$7&k(9)|<z>;";

#[test]
fn a_secret_parameter_is_on_no_card_in_no_log_and_in_no_result() {
    let log = temp_path("wire-secret.log");
    let _ = std::fs::remove_file(&log);
    let tools = "[tools.login]\ndescription = \"logs in\"\n\
        command = [\"printf\", \"{{\\\"user\\\":\\\"%s\\\",\\\"echo\\\":\\\"%s\\\"}}\", \"{user}\", \"{password}\"]\n\
        params.user = { type = \"string\" }\nparams.password = { type = \"string\" }\n\
        result = \"stdout_json\"\ntarget = \"{user}:{password}@db\"\n\
        [tools.say]\ndescription = \"says\"\ncommand = [\"echo\", \"said\", \"{db_pass}\"]\n\
        params.db_pass = { type = \"string\" }\napproval = \"none\"\n";
    let mut session = Session::start("secret", tools, &["--audit", log.to_str().unwrap()]);
    session.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "login", "arguments": {"user": "admin", "password": SYMBOLS}}}));
    let card = session.next();
    assert_eq!(card["method"], "elicitation/create");
    assert_eq!(
        card["params"]["message"],
        "tool: login\n\
         description: logs in\n\
         target: admin:[redacted: secret-parameter]@db\n\
         command: printf '{\"user\":\"%s\",\"echo\":\"%s\"}' admin '[redacted: secret-parameter]'\n\
         deadline: host default\n\
         approval expires: 120000 ms after it is shown"
    );
    session.send(
        json!({"jsonrpc": "2.0", "id": card["id"], "result": {"action": "accept", "content": {}}}),
    );
    let done = session.next();
    assert_eq!(done["id"], 1);
    let result = &done["result"];
    assert_eq!(result["isError"], false, "{result}");
    // The helper received the real value: it printed it back, and the
    // result shows it replaced.
    assert_eq!(
        result["structuredContent"]["result"],
        json!({"user": "admin", "echo": "[redacted: secret-parameter]"})
    );
    assert_eq!(
        result["content"],
        json!([{"type": "text",
            "text": "{\"echo\":\"[redacted: secret-parameter]\",\"user\":\"admin\"}"}])
    );
    assert_eq!(
        result["structuredContent"]["target"],
        "admin:[redacted: secret-parameter]@db"
    );

    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "say", "arguments": {"db_pass": SYMBOLS}}}));
    let said = session.next();
    assert_eq!(
        said["result"]["content"],
        json!([{"type": "text", "text": "said [redacted: secret-parameter]\n"}])
    );
    assert_eq!(
        said["result"]["structuredContent"]["result"],
        "said [redacted: secret-parameter]\n"
    );
    let whole = format!("{done}{said}");
    assert!(!whole.contains(SYMBOLS), "{whole}");
    assert_eq!(session.end(), Some(0));

    let bytes = std::fs::read(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains(SYMBOLS), "{text}");
    assert!(!text.contains("Xy$7"), "{text}");
    // The log is readable text that holds the placeholder where the value
    // was (the card, the target and the summary of both calls).
    assert!(
        text.contains("admin:[redacted: secret-parameter]@db"),
        "{text}"
    );
    assert!(
        text.contains("echo said '[redacted: secret-parameter]'"),
        "{text}"
    );
}

/// The server's stderr, once it has ended.
fn stderr_of(name: &str) -> String {
    std::fs::read_to_string(temp_path(&format!("wire-{name}.stderr"))).unwrap()
}

const DEPLOY_TOOLS: &str = "[tools.deploy]\ndescription = \"deploys\"\ncommand = [\"true\"]\n\
    approval = \"required\"\napproval_timeout_ms = 20000\n\
    [tools.brief]\ndescription = \"deploys, asked briefly\"\ncommand = [\"true\"]\n\
    approval = \"required\"\napproval_timeout_ms = 700\n";

/// Calls `tool` (request id `call`) and returns its card's request.
fn card_of(session: &mut Session, tool: &str, call: u64) -> Value {
    session.send(json!({"jsonrpc": "2.0", "id": call, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}}));
    let card = session.next();
    assert_eq!(card["method"], "elicitation/create", "{card}");
    assert!(card["id"].is_i64(), "{card}");
    card
}

/// The `tools/call` answer `call`: its record.
fn record_of(session: &Session, call: u64) -> Value {
    loop {
        let message = session.next();
        if message["method"] == "notifications/cancelled" {
            continue;
        }
        assert_eq!(message["id"], call, "{message}");
        return message["result"]["structuredContent"].clone();
    }
}

/// A card sent with a numeric id is answered only by a response with that
/// number: the string of its digits, the number in float form, another
/// number or none are ignored (said on stderr, counted), the card stays
/// pending, and expires if nothing else comes; the right id then grants.
#[test]
fn a_response_answers_its_request_only_by_id_in_type_and_value() {
    let name = "idmatch";
    let mut session = Session::start(name, DEPLOY_TOOLS, &[]);
    let accept = json!({"action": "accept", "content": {}});

    // A card left with only wrong answers expires.
    let card = card_of(&mut session, "brief", 1);
    let n = card["id"].as_i64().unwrap();
    session.send(json!({"jsonrpc": "2.0", "id": n.to_string(), "result": accept}));
    let record = record_of(&session, 1);
    assert_eq!(
        (&record["state"], &record["approval"], &record["failure"]),
        (&json!("approval_expired"), &json!("expired"), &Value::Null),
    );

    // Wrong ids first, then the right one.
    let card = card_of(&mut session, "deploy", 2);
    let m = card["id"].as_i64().unwrap();
    let accepted = accept.to_string();
    session.send(json!({"jsonrpc": "2.0", "id": m.to_string(), "result": accept}));
    session.send_line(&format!(
        r#"{{"jsonrpc":"2.0","id":{m}.0,"result":{accepted}}}"#
    ));
    session.send_line(&format!(
        r#"{{"jsonrpc":"2.0","id":{m}e0,"result":{accepted}}}"#
    ));
    session.send(json!({"jsonrpc": "2.0", "id": m + 1000, "result": accept}));
    session.send(json!({"jsonrpc": "2.0", "id": null, "result": accept}));
    session.send(json!({"jsonrpc": "2.0", "result": accept}));
    // A ping answered in between: the wrong answers were read before it.
    session.send(json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}));
    assert_eq!(
        session.next(),
        json!({"jsonrpc": "2.0", "id": "p", "result": {}})
    );
    session.send(json!({"jsonrpc": "2.0", "id": m, "result": accept}));
    let record = record_of(&session, 2);
    assert_eq!(
        (&record["state"], &record["approval"], &record["failure"]),
        (&json!("completed"), &json!("granted"), &Value::Null),
    );
    // The same answer again answers nothing: the card is answered.
    session.send(json!({"jsonrpc": "2.0", "id": m, "result": accept}));
    assert_eq!(session.end(), Some(0));

    let not_answering = |id: &str| {
        format!(
            "spillguard: ignored a response with id {id}, which answers no request of this \
             server's in flight (ids match in type and value)"
        )
    };
    let not_an_id = |id: &str| {
        format!(
            "spillguard: ignored a response with id {id}, which is not a JSON-RPC id \
             (a string or an integer)"
        )
    };
    let expected = [
        not_answering(&format!("\"{n}\"")),
        not_answering(&format!("\"{m}\"")),
        not_an_id(&format!("{m}.0")),
        not_an_id(&format!("{m}.0")),
        not_answering(&format!("{}", m + 1000)),
        not_an_id("null"),
        "spillguard: ignored a response that does not parse (unrecognized JSON-RPC message)"
            .to_owned(),
        not_answering(&m.to_string()),
    ];
    let stderr = stderr_of(name);
    let lines: Vec<&str> = stderr.lines().collect();
    let mut want: Vec<String> = expected
        .iter()
        .enumerate()
        .map(|(at, line)| format!("{line}; {} response(s) ignored so far", at + 1))
        .collect();
    want.push(
        "spillguard: 8 response(s) of the client answered no request in flight and were ignored"
            .to_owned(),
    );
    assert_eq!(lines, want);
}

/// Only `accept` with the content the card asked for grants: its schema
/// declares no field, so `{}`, `null` and no `content` at all; content
/// that is not an object or names a field the schema lacks is denied with
/// its reason in the record, as is every other answer, and `cancel`
/// cancels before dispatch.
#[test]
fn an_elicitation_grants_only_with_accept_and_the_requested_content() {
    let name = "content";
    let mut session = Session::start(name, DEPLOY_TOOLS, &[]);
    let cases: Vec<(Value, &str, &str, Value)> = vec![
        (
            json!({"result": {"action": "accept", "content": {}}}),
            "completed",
            "granted",
            Value::Null,
        ),
        (
            json!({"result": {"action": "accept", "content": 5}}),
            "denied",
            "denied",
            json!("accept with content that is not an object"),
        ),
        // The card asks for no field: an accept that leaves `content` out
        // (as the MCP Python SDK's `ElicitResult(action="accept")` does)
        // or sends null gives everything asked for.
        (
            json!({"result": {"action": "accept"}}),
            "completed",
            "granted",
            Value::Null,
        ),
        (
            json!({"result": {"action": "accept", "content": null}}),
            "completed",
            "granted",
            Value::Null,
        ),
        (
            json!({"result": {"action": "accept", "content": {"approve": true}}}),
            "denied",
            "denied",
            json!("accept with content that does not match the requested schema"),
        ),
        (
            json!({"result": {"action": "accept", "content": "yes"}}),
            "denied",
            "denied",
            json!("accept with content that is not an object"),
        ),
        (
            json!({"result": {"action": "decline"}}),
            "denied",
            "denied",
            json!("the approver declined"),
        ),
        (
            json!({"result": {"action": "yes"}}),
            "denied",
            "denied",
            json!("the answer is not an elicitation result (action accept, decline or cancel)"),
        ),
        (
            json!({"error": {"code": -32601, "message": "no"}}),
            "denied",
            "denied",
            json!("the client answered the card with error -32601"),
        ),
        (
            json!({"result": {"action": "cancel"}}),
            "cancelled_before_dispatch",
            "undecided",
            Value::Null,
        ),
    ];
    for (call, (answer, state, approval, reason)) in cases.iter().enumerate() {
        let call = call as u64 + 1;
        let card = card_of(&mut session, "deploy", call);
        let mut response = answer.clone();
        response["jsonrpc"] = json!("2.0");
        response["id"] = card["id"].clone();
        session.send(response);
        let record = record_of(&session, call);
        assert_eq!(
            (&record["state"], &record["approval"], &record["failure"]),
            (&json!(state), &json!(approval), reason),
            "{answer}"
        );
        assert_eq!(
            record["exit_status"],
            if *state == "completed" {
                json!(0)
            } else {
                Value::Null
            }
        );
    }
    assert_eq!(session.end(), Some(0));
    assert_eq!(stderr_of(name), "");
}

/// A request that begins with a UTF-8 byte order mark is read as the rest
/// (RFC 8259 lets a parser ignore the mark) and answered.
#[test]
fn a_request_that_begins_with_a_byte_order_mark_is_answered() {
    let mut session = Session::start("bom", NAP_TOOLS, &[]);
    session.send_line("\u{feff}{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}");
    assert_eq!(
        session.next(),
        json!({"jsonrpc": "2.0", "id": 9, "result": {}})
    );
    assert_eq!(session.end(), Some(0));
}

/// A request's `params._meta.traceparent` makes the call's span its child:
/// the record (the result's structured content) names the trace, the
/// call's span and the parent, and the helper is given the call's span as
/// its parent in `TRACEPARENT` (with `TRACESTATE` passed on). A malformed
/// one is ignored: no trace, and the helper gets none.
#[test]
fn trace_context_in_meta_reaches_the_record_and_the_helper() {
    const TRACE_TOOLS: &str = "[tools.trace]\ndescription = \"prints its trace context\"\n\
        command = [\"sh\", \"-c\", \"printf '%s|%s' \\\"$TRACEPARENT\\\" \\\"$TRACESTATE\\\"\"]\napproval = \"none\"\n";
    let mut session = Session::start("trace", TRACE_TOOLS, &[]);
    session.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "trace", "arguments": {}, "_meta": {
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "tracestate": "congo=t61rcWkgMzE"}}}));
    let answer = session.next();
    let record = &answer["result"]["structuredContent"];
    assert_eq!(record["state"], "completed", "{answer}");
    assert_eq!(record["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(record["parent_span_id"], "00f067aa0ba902b7");
    let span = record["span_id"].as_str().unwrap();
    assert_eq!(span.len(), 16);
    assert_eq!(
        answer["result"]["content"][0]["text"],
        format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{span}-01|congo=t61rcWkgMzE")
    );

    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "trace", "arguments": {}, "_meta": {
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nX: y"}}}));
    let answer = session.next();
    let record = &answer["result"]["structuredContent"];
    assert_eq!(record["trace_id"], Value::Null, "{answer}");
    assert_eq!(record["span_id"], Value::Null);
    assert_eq!(answer["result"]["content"][0]["text"], "|");
    assert_eq!(session.end(), Some(0));
}
