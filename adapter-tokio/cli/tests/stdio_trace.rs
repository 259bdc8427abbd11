//! `spillguard stdio --mcp --propagate-trace`: each request reaches the
//! server carrying the guard's span for it in `params._meta.traceparent`,
//! a child of the request's own traceparent or of the guard's
//! `TRACEPARENT`; every other byte as the client wrote it. Off without
//! the flag unless OpenTelemetry export is configured; `--no-propagate-trace`
//! turns it off.
#![allow(clippy::unwrap_used)]

mod stdio_common;
mod support;

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use stdio_common::stdio;
use support::temp_path;

/// The guard's `TRACEPARENT` in these tests.
const HOST: &str = "00-11111111111111111111111111111111-2222222222222222-01";
/// A request's own parent.
const OWN: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";

/// A server that appends each line it reads to the file `$1` and answers
/// each request with an empty result.
const SERVER: &str = r#"
import json, sys
log = open(sys.argv[1], "ab")
for line in sys.stdin.buffer:
    log.write(line); log.flush()
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    for m in msg if isinstance(msg, list) else [msg]:
        if "id" in m and "method" in m:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {}}) + "\n")
    sys.stdout.flush()
"#;

/// What the client writes: requests of every shape (no params, params
/// without `_meta`, `_meta` without a traceparent, its own traceparent
/// and tracestate, spaces, escapes, non-ASCII), a notification, a batch,
/// a request whose params are an array, and a line that is not JSON.
const LINES: [&str; 9] = [
    r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    r#"{ "jsonrpc" : "2.0" , "id" : "a\"b" , "method" : "tools/call" , "params" : { "name" : "wörk\u00e9" , "arguments" : { "q" : "{\"_meta\":1}" } } }"#,
    r#"{"method":"tools/call","params":{"_meta":{"progressToken":7},"name":"x"},"jsonrpc":"2.0","id":3}"#,
    concat!(
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","_meta":{"tracestate":"k=v","traceparent":""#,
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
        r#""}}}"#
    ),
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"[{"jsonrpc":"2.0","id":6,"method":"ping"}]"#,
    r#"{"jsonrpc":"2.0","id":7,"method":"m","params":[1,2]}"#,
    "not json {\"params\":{}}",
    r#"{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}"#,
];

/// Runs the guard with `flags` in front of [`SERVER`], the client writing
/// [`LINES`] (the second one in two writes 300 ms apart); returns the
/// lines the server read, the guard's output and the spans exported (with
/// `--otel-file`).
fn run(flags: &[&str], otel: bool) -> (Vec<String>, std::process::Output, Vec<Value>) {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let log = temp_path(&format!("trace-server-{run}.log"));
    let spans = temp_path(&format!("trace-spans-{run}.jsonl"));
    let mut args: Vec<String> = flags.iter().map(|s| (*s).to_owned()).collect();
    if otel {
        args.push("--otel-file".into());
        args.push(spans.display().to_string());
    }
    args.extend(["--".into(), "python3".into(), "-c".into(), SERVER.into()]);
    args.push(log.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = stdio(&args)
        .env("TRACEPARENT", HOST)
        .env("TRACESTATE", "host=1")
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for (n, line) in LINES.iter().enumerate() {
        if n == 1 {
            let (a, b) = line.split_at(20);
            stdin.write_all(a.as_bytes()).unwrap();
            stdin.flush().unwrap();
            std::thread::sleep(Duration::from_millis(300));
            stdin.write_all(b.as_bytes()).unwrap();
            stdin.write_all(b"\n").unwrap();
        } else {
            writeln!(stdin, "{line}").unwrap();
        }
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let read = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let exported = std::fs::read_to_string(&spans)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line["resourceSpans"].as_array().cloned())
        .flatten()
        .flat_map(|r| r["scopeSpans"].as_array().cloned().unwrap_or_default())
        .flat_map(|s| s["spans"].as_array().cloned().unwrap_or_default())
        .collect();
    let _ = std::fs::remove_file(&spans);
    (read.lines().map(str::to_owned).collect(), output, exported)
}

/// The traceparent a line carries in `params._meta`.
fn traceparent_of(line: &str) -> Option<String> {
    let value: Value = serde_json::from_str(line).ok()?;
    Some(value["params"]["_meta"]["traceparent"].as_str()?.to_owned())
}

/// `line` with `traceparent`'s member (and `extra`) taken out of the
/// bytes: what the client wrote, if only `_meta` changed.
fn without(line: &str, text: &str) -> String {
    assert_eq!(line.matches(text).count(), 1, "{text} once in {line}");
    line.replacen(text, "", 1)
}

fn span_id_of(span: &Value) -> String {
    span["spanId"].as_str().unwrap().to_owned()
}

#[test]
fn each_request_carries_the_guard_s_span_and_every_other_byte_is_the_client_s() {
    let (read, output, spans) = run(&["--mcp", "--propagate-trace"], true);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(read.len(), LINES.len(), "{read:#?}");
    // The MCP spans by request id.
    let mcp: Vec<&Value> = spans
        .iter()
        .filter(|s| {
            s["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|kv| kv["key"] == "jsonrpc.request.id")
        })
        .collect();
    let span_of =
        |id: &str| -> &Value {
            mcp.iter()
                .find(|s| {
                    s["attributes"].as_array().unwrap().iter().any(|kv| {
                        kv["key"] == "jsonrpc.request.id" && kv["value"]["stringValue"] == id
                    })
                })
                .unwrap_or_else(|| panic!("no span for request {id}: {mcp:#?}"))
        };
    // Each request: the traceparent names its span; its parent is the
    // host's (or the request's own); the bytes are the client's but for
    // what was added.
    for (n, id, parent) in [
        (0, "1", HOST),
        (1, "a\"b", HOST),
        (2, "3", HOST),
        (3, "4", OWN),
        (8, "9", HOST),
    ] {
        let span = span_of(id);
        let carried = traceparent_of(&read[n]).unwrap();
        let (trace, parent_span, flags) = (&parent[3..35], &parent[36..52], &parent[53..]);
        assert_eq!(
            carried,
            format!("00-{trace}-{}-{flags}", span_id_of(span)),
            "request {id}"
        );
        assert_eq!(span["traceId"], trace, "request {id}");
        assert_eq!(span["parentSpanId"], parent_span, "request {id}");
        let added_state = if parent == HOST {
            r#","tracestate":"host=1""#
        } else {
            ""
        };
        let client_bytes = match n {
            0 => without(
                &read[n],
                &format!(r#""params":{{"_meta":{{"traceparent":"{carried}"{added_state}}}}},"#),
            ),
            1 | 8 => without(
                &read[n],
                &format!(r#""_meta":{{"traceparent":"{carried}"{added_state}}}"#),
            )
            .replacen(r#"{,"#, "{", 1)
            .replacen(r#"{ , "#, "{ ", 1),
            2 => without(
                &read[n],
                &format!(r#""traceparent":"{carried}"{added_state},"#),
            ),
            _ => read[n].replacen(&carried, OWN, 1),
        };
        let want = if n == 8 {
            LINES[8].to_owned()
        } else {
            LINES[n].to_owned()
        };
        assert_eq!(client_bytes, want, "request {id}: only _meta changed");
    }
    // The rest as written: a notification, a batch, array params, not JSON.
    for n in [4, 5, 6, 7] {
        assert_eq!(read[n], LINES[n], "line {n} unchanged");
    }
}

#[test]
fn without_export_a_request_with_no_parent_carries_the_guard_s_traceparent() {
    let (read, output, _) = run(&["--mcp", "--propagate-trace"], false);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        read[0],
        format!(
            r#"{{"params":{{"_meta":{{"traceparent":"{HOST}","tracestate":"host=1"}}}},"jsonrpc":"2.0","id":1,"method":"ping"}}"#
        )
    );
    // A request with a parent of its own goes as written.
    assert_eq!(read[3], LINES[3]);
    assert_eq!(traceparent_of(&read[2]).as_deref(), Some(HOST));
}

#[test]
fn off_without_export_or_when_refused_every_byte_is_the_client_s() {
    for (flags, otel) in [
        (&["--mcp"][..], false),
        (&["--mcp", "--no-propagate-trace"][..], true),
    ] {
        let (read, output, _) = run(flags, otel);
        assert_eq!(output.status.code(), Some(0), "{flags:?}: {output:?}");
        assert_eq!(read, LINES.map(str::to_owned), "{flags:?}");
    }
    // On by default with export.
    let (read, _, _) = run(&["--mcp"], true);
    assert_ne!(traceparent_of(&read[0]), None);
}

#[test]
fn propagate_trace_without_mcp_or_beside_its_refusal_runs_nothing() {
    let marker = temp_path("trace-ran");
    let script = format!("touch {}", marker.display());
    for (flags, message) in [
        (
            &["--propagate-trace"][..],
            "`--propagate-trace` needs `--mcp`",
        ),
        (
            &["--mcp", "--propagate-trace", "--no-propagate-trace"][..],
            "--no-propagate-trace",
        ),
    ] {
        let mut args = flags.to_vec();
        args.extend(["--", "sh", "-c", &script]);
        let output = stdio(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{flags:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{flags:?}: {stderr}");
        assert!(!Path::new(&marker).exists(), "{flags:?}: nothing ran");
    }
}
