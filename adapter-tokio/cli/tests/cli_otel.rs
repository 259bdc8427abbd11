//! `--otel-file`: a call's span and excerpt as OTLP JSON, in the trace the
//! program was given (`TRACEPARENT`) or in one of its own, and the helper
//! told the call's span. The file is read back here and by OpenTelemetry's
//! own protocol package (`opentelemetry-proto`, installed into
//! `target/peers` by `.ci/peers.sh`; in CI a missing peer fails).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use support::temp_path;

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Prints the TRACEPARENT and TRACESTATE it got on stdout, a secret and a
/// line on stderr, and exits 3.
const HELPER: &str = r#"printf '%s|%s' "$TRACEPARENT" "${TRACESTATE-unset}"; echo "password=hunter2 rejected" >&2; exit 3"#;

/// `spillguard run --otel-file FILE -- sh -c HELPER`, with `traceparent`
/// (and `tracestate`) in its environment if given.
fn run(file: &Path, traceparent: Option<&str>, tracestate: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_spillguard"));
    command
        .args(["run", "--otel-file"])
        .arg(file)
        .args(["--", "sh", "-c", HELPER])
        .env("OTEL_SERVICE_NAME", "otel-test")
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=ci%20one,bad-pair",
        )
        .env_remove("TRACEPARENT")
        .env_remove("TRACESTATE")
        .stdin(Stdio::null());
    if let Some(traceparent) = traceparent {
        command.env("TRACEPARENT", traceparent);
    }
    if let Some(tracestate) = tracestate {
        command.env("TRACESTATE", tracestate);
    }
    command.output().unwrap()
}

fn record(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The file's lines, each parsed.
fn lines(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn span(lines: &[Value]) -> &Value {
    &lines[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
}

fn attribute<'v>(item: &'v Value, key: &str) -> &'v Value {
    let found = item["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|kv| kv["key"] == key)
        .unwrap_or_else(|| panic!("no attribute {key}"));
    let value = found["value"].as_object().unwrap();
    value.values().next().unwrap()
}

struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_call_under_a_given_parent_is_its_child_and_the_helper_is_told_its_span() {
    let file = Removed(temp_path("otel-child.jsonl"));
    let output = run(&file.0, Some(PARENT), Some("congo=t61rcWkgMzE"));
    let record = record(&output);
    let lines = lines(&file.0);
    assert_eq!(lines.len(), 2, "a span line and a log line");
    let span = span(&lines);

    assert_eq!(record["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(record["parent_span_id"], "00f067aa0ba902b7");
    let span_id = record["span_id"].as_str().unwrap();
    assert_eq!(span_id.len(), 16);
    assert_ne!(span_id, "00f067aa0ba902b7");
    assert_eq!(span["traceId"], record["trace_id"]);
    assert_eq!(span["spanId"], record["span_id"]);
    assert_eq!(span["parentSpanId"], "00f067aa0ba902b7");
    // The helper's parent is the call's span; the state is passed on.
    assert_eq!(
        record["stdout"],
        format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{span_id}-01|congo=t61rcWkgMzE")
    );

    assert_eq!(span["name"], "sh");
    assert_eq!(attribute(span, "process.exit.code"), "3");
    assert_eq!(attribute(span, "error.type"), "3");
    assert_eq!(attribute(span, "spillguard.state"), "failed_local");
    assert_eq!(
        attribute(span, "spillguard.stderr.bytes_seen").as_str(),
        Some(record["stderr_bytes_seen"].to_string().as_str())
    );
    assert_eq!(attribute(span, "spillguard.redactions"), "1");
    assert_eq!(span["status"]["code"], 2);

    let log = &lines[1]["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0];
    assert_eq!(log["spanId"], record["span_id"]);
    assert_eq!(log["body"]["stringValue"], record["stderr_excerpt"]);
    let text = std::fs::read_to_string(&file.0).unwrap();
    assert!(!text.contains("hunter2"), "{text}");

    python_reads(&file.0, &output, Some(PARENT));
}

#[test]
fn without_a_parent_or_with_a_malformed_one_the_call_starts_a_trace() {
    for given in [
        None,
        Some("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
    ] {
        let file = Removed(temp_path("otel-root.jsonl"));
        // A tracestate without a parent is not passed on.
        let output = run(&file.0, given, Some("a=1"));
        let record = record(&output);
        let trace_id = record["trace_id"].as_str().unwrap();
        assert_eq!(trace_id.len(), 32);
        assert_ne!(trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(trace_id, "0".repeat(32));
        assert_eq!(record["parent_span_id"], Value::Null);
        let lines = lines(&file.0);
        assert_eq!(span(&lines)["parentSpanId"], "");
        assert_eq!(
            record["stdout"],
            format!(
                "00-{trace_id}-{}-01|unset",
                record["span_id"].as_str().unwrap()
            )
        );
        python_reads(&file.0, &output, None);
    }
}

#[test]
fn without_the_flag_a_call_has_no_trace_and_the_environment_is_untouched() {
    let output = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(["run", "--", "sh", "-c", HELPER])
        .env("TRACEPARENT", PARENT)
        .env_remove("TRACESTATE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let record = record(&output);
    assert_eq!(record["trace_id"], Value::Null);
    assert_eq!(record["span_id"], Value::Null);
    assert_eq!(record["stdout"], format!("{PARENT}|unset"));
}

#[test]
fn a_full_otel_file_is_reported_and_the_record_still_printed() {
    let output = run(Path::new("/dev/full"), None, None);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let record: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(record["state"], "failed_local");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim_end(),
        "spillguard: otel file /dev/full: No space left on device (os error 28)"
    );
}

#[test]
fn an_otel_file_that_cannot_be_opened_is_a_usage_error_and_nothing_runs() {
    let marker = temp_path("otel-never-ran");
    let output = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args([
            "run",
            "--otel-file",
            "/nonexistent/dir/otel.jsonl",
            "--",
            "touch",
        ])
        .arg(&marker)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(output.stdout, b"");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        "spillguard: cannot open --otel-file /nonexistent/dir/otel.jsonl: No such file or directory (os error 2)"
    );
    assert!(!marker.exists());
}

/// The file read by `tests/peers/otel_file.py` with OpenTelemetry's own
/// protocol package.
fn python_reads(file: &Path, output: &Output, parent: Option<&str>) {
    let peers = std::env::var_os("SPILLGUARD_PEERS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/peers"),
        PathBuf::from,
    );
    let python = peers.join("venv/bin/python");
    let has_proto = python.exists()
        && Command::new(&python)
            .args(["-c", "import opentelemetry.proto"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !has_proto {
        let message = format!(
            "opentelemetry-proto is not installed in {}: run .ci/peers.sh",
            python.display()
        );
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
        eprintln!("skipped: {message}");
        return;
    }
    let record_file = Removed(temp_path(&format!(
        "otel-record-{}.json",
        file.file_name().unwrap().to_string_lossy()
    )));
    std::fs::write(&record_file.0, &output.stdout).unwrap();
    let mut command = Command::new(&python);
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/otel_file.py"))
        .arg(file)
        .arg(&record_file.0);
    if let Some(parent) = parent {
        command.arg(parent);
    }
    let checked = command.output().unwrap();
    assert!(
        checked.status.success(),
        "otel_file.py: {}\n{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    println!("{}", String::from_utf8_lossy(&checked.stdout));
}
