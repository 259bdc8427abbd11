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

/// `spillguard run --otel-file FILE -- sh -c HELPER` under a file-size
/// limit of 4,096 bytes, with `SIGXFSZ` ignored (a write past the limit
/// then fails with `EFBIG` after a short write).
fn run_under_file_size_limit(file: &Path, helper: &str) -> Output {
    Command::new("sh")
        .args([
            "-c",
            // SIGXFSZ as its default (terminate): the program handles it
            // itself, so that the write fails and is cut back.
            r#"trap - XFSZ; exec prlimit --fsize=4096 -- "$0" "$@""#,
        ])
        .arg(env!("CARGO_BIN_EXE_spillguard"))
        .args(["run", "--otel-file"])
        .arg(file)
        .args(["--", "sh", "-c", helper])
        .env_remove("TRACEPARENT")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .env("OTEL_SERVICE_NAME", "otel-test")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A write cut short by the file-size limit is cut back to the file's
/// length before it: the file keeps whole lines only, and the next call's
/// span (which fits) is a whole line of its own.
#[test]
fn a_write_past_the_file_size_limit_is_cut_back_and_the_next_span_is_whole() {
    let file = Removed(temp_path("otel-fsize.jsonl"));
    // The span and a 4 KiB excerpt's log: more than 4,096 bytes.
    let big = run_under_file_size_limit(&file.0, "head -c 20000 /dev/zero | tr '\\0' x >&2");
    assert_eq!(big.status.code(), Some(3), "{big:?}");
    let stderr = String::from_utf8_lossy(&big.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "spillguard: otel file {}: File too large (os error 27)",
            file.0.display()
        )
    );
    assert_eq!(std::fs::metadata(&file.0).unwrap().len(), 0);
    // A call without stderr: its span alone, under 2 KiB.
    let small = run_under_file_size_limit(&file.0, "exit 0");
    assert_eq!(small.status.code(), Some(0), "{small:?}");
    assert_eq!(small.stderr, b"");
    let text = std::fs::read_to_string(&file.0).unwrap();
    assert_eq!(text.matches('\n').count(), 1, "{text}");
    assert!(text.ends_with('\n'));
    let lines = lines(&file.0);
    assert_eq!(lines.len(), 1);
    assert_eq!(span(&lines)["name"], "sh");
    assert_eq!(attribute(span(&lines), "spillguard.state"), "completed");
}

/// A FIFO as `--otel-file`, with no reader: refused at once with a message
/// that names it, before anything runs (a blocking open would wait for a
/// reader forever).
#[test]
fn a_fifo_as_otel_file_is_refused_at_once_and_nothing_runs() {
    let fifo = Removed(temp_path("otel.fifo"));
    let _ = std::fs::remove_file(&fifo.0);
    let made = Command::new("mkfifo").arg(&fifo.0).status().unwrap();
    assert!(made.success());
    let marker = temp_path("otel-fifo-never-ran");
    let mut child = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(["run", "--otel-file"])
        .arg(&fifo.0)
        .args(["--", "touch"])
        .arg(&marker)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            panic!("spillguard blocked on a FIFO as --otel-file");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(output.stdout, b"");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        format!(
            "spillguard: cannot open --otel-file {}: it is a FIFO, not a regular file; give \
             a file (or /dev/null)",
            fifo.0.display()
        )
    );
    assert!(!marker.exists());
    // A character device such as /dev/null is written to as a file.
    let output = run(Path::new("/dev/null"), None, None);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
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
    let Some(python) = otel_python() else {
        return;
    };
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

/// The peers' Python, if it has OpenTelemetry's protocol package (in CI it
/// must).
fn otel_python() -> Option<PathBuf> {
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
    if has_proto {
        return Some(python);
    }
    let message = format!(
        "opentelemetry-proto is not installed in {}: run .ci/peers.sh",
        python.display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
    eprintln!("skipped: {message}");
    None
}

/// The receiver of `tests/peers/otlp_receiver.py`, killed when dropped.
struct Receiver {
    child: std::process::Child,
    port: u16,
    out: PathBuf,
}

impl Receiver {
    fn start(python: &Path, name: &str) -> Receiver {
        let port_file = temp_path(&format!("{name}.port"));
        let out = temp_path(&format!("{name}.jsonl"));
        let _ = std::fs::remove_file(&port_file);
        let _ = std::fs::remove_file(&out);
        let child = Command::new(python)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/otlp_receiver.py"))
            .arg(&port_file)
            .arg(&out)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                break text.trim().parse().unwrap();
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "no receiver"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let _ = std::fs::remove_file(&port_file);
        Receiver { child, port, out }
    }

    /// The requests received, once `count` have come.
    fn requests(&self, count: usize) -> Vec<Value> {
        let started = std::time::Instant::now();
        loop {
            let lines: Vec<Value> = std::fs::read_to_string(&self.out)
                .unwrap_or_default()
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect();
            if lines.len() >= count {
                return lines;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "{lines:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.out);
    }
}

/// `spillguard run -- sh -c HELPER` with `vars` set (and the trace
/// variables cleared unless given), timed.
fn run_with(vars: &[(&str, &str)]) -> (Output, std::time::Duration) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_spillguard"));
    command
        .args(["run", "--", "sh", "-c", HELPER])
        .env_remove("TRACEPARENT")
        .env_remove("TRACESTATE")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::null());
    for (key, value) in vars {
        command.env(key, value);
    }
    let started = std::time::Instant::now();
    let output = command.output().unwrap();
    (output, started.elapsed())
}

#[test]
fn otlp_http_delivers_the_span_and_the_log_to_a_collector_as_protobuf() {
    let Some(python) = otel_python() else {
        return;
    };
    let receiver = Receiver::start(&python, "otlp-ok");
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let (output, _) = run_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
        ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cr%2Ft"),
        ("OTEL_SERVICE_NAME", "otlp-test"),
        ("TRACEPARENT", PARENT),
    ]);
    let record = record(&output);
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "",
        "nothing failed"
    );
    let requests = receiver.requests(2);
    assert_eq!(requests.len(), 2, "{requests:?}");
    let traces = requests.iter().find(|r| r["path"] == "/v1/traces").unwrap();
    let logs = requests.iter().find(|r| r["path"] == "/v1/logs").unwrap();
    for request in [traces, logs] {
        assert_eq!(request["content_type"], "application/x-protobuf");
        assert_eq!(request["api_key"], "s3cr/t");
        assert_eq!(request.get("error"), None, "{request}");
    }
    assert_eq!(traces["resource"]["service.name"], "otlp-test");
    let span = &traces["spans"][0];
    assert_eq!(span["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(span["parent_span_id"], "00f067aa0ba902b7");
    assert_eq!(span["span_id"], record["span_id"]);
    assert_eq!(span["name"], "sh");
    assert_eq!(span["attributes"]["process.exit.code"], 3);
    assert_eq!(span["attributes"]["spillguard.state"], "failed_local");
    assert_eq!(
        span["attributes"]["spillguard.stderr.bytes_seen"],
        record["stderr_bytes_seen"]
    );
    assert_eq!(span["status"], 2);
    assert_eq!(logs["logs"][0]["span_id"], record["span_id"]);
    assert_eq!(logs["logs"][0]["body"], record["stderr_excerpt"]);
}

/// A collector that is down, one that never answers and one that answers
/// 500: the record is the same, the exit waits at most the timeout, and
/// what was not sent is said on stderr; the exit status stays 0.
#[test]
fn a_collector_that_is_down_hangs_or_fails_costs_at_most_one_timeout_at_exit() {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    let (plain, plain_took) = run_with(&[]);
    let plain = record(&plain);

    // Down: a port that was bound and released.
    let down = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // Hangs: accepts and never answers.
    let hangs = TcpListener::bind("127.0.0.1:0").unwrap();
    let hangs_at = hangs.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in hangs.incoming().flatten() {
            held.push(stream);
        }
    });
    // Fails: answers 500 to everything.
    let fails = TcpListener::bind("127.0.0.1:0").unwrap();
    let fails_at = fails.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in fails.incoming().flatten() {
            let mut buf = [0; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream
                .write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let timeout_ms = 400;
    for (what, at, said) in [
        ("down", down, "Connection refused"),
        // The exit's wait and the request's own read end at the same
        // timeout: each request is left by the one or failed by the other
        // (its read timing out), whichever comes first; none is sent.
        ("hangs", hangs_at, "0 dropped (queue full)"),
        (
            "fails",
            fails_at,
            "the collector answered HTTP/1.1 500 Internal Server Error",
        ),
    ] {
        let endpoint = format!("http://{at}");
        let (output, took) = run_with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", &timeout_ms.to_string()),
        ]);
        assert_eq!(output.status.code(), Some(0), "{what}: {output:?}");
        let record: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(record["state"], plain["state"], "{what}");
        assert_eq!(record["exit_status"], plain["exit_status"], "{what}");
        assert_eq!(
            record["stderr_bytes_seen"], plain["stderr_bytes_seen"],
            "{what}"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
        assert!(
            stderr.starts_with("spillguard: otlp export: 0 sent, ") && stderr.contains(said),
            "{what}: {stderr}"
        );
        if what == "hangs" {
            // "0 sent, F failed, 0 dropped (queue full), L not sent by the
            // exit's wait": the two requests, F + L = 2.
            let count = |after: &str| -> u64 {
                let at = stderr.find(after).unwrap_or_else(|| panic!("{stderr}"));
                let head = stderr[..at].trim_end();
                head.rsplit([' ', ',']).next().unwrap().parse().unwrap()
            };
            let failed = count(" failed,");
            let left = count(" not sent by the exit's wait");
            assert_eq!(failed + left, 2, "hangs: {stderr}");
        }
        // The exit waited at most the timeout (plus a process's start).
        assert!(
            took < plain_took + std::time::Duration::from_millis(timeout_ms + 1500),
            "{what}: {took:?} against {plain_took:?} without export"
        );
        println!("{what}: {took:?} (without export {plain_took:?}): {stderr}");
    }
}

/// A base endpoint with a query: the signal path goes before the query,
/// the collector is asked at exactly that target, and the failure said at
/// the exit shows neither the query's values nor a header's.
#[test]
fn a_base_endpoint_s_query_is_sent_after_the_signal_path_and_never_shown() {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    let fails = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = fails.local_addr().unwrap();
    let (asked, targets) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in fails.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = asked.send(line.trim_end().to_owned());
            let _ = (&stream)
                .write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let endpoint = format!("http://{at}/base?api_key=K1SECRET&tenant=t1");
    let (output, _) = run_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "Authorization=Bearer%20K2SECRET",
        ),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let mut seen: Vec<String> = targets.try_iter().collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "POST /base/v1/logs?api_key=K1SECRET&tenant=t1 HTTP/1.1",
            "POST /base/v1/traces?api_key=K1SECRET&tenant=t1 HTTP/1.1",
        ]
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        format!(
            "spillguard: otlp export: 0 sent, 2 failed, 0 dropped (queue full), 0 not sent by \
             the exit's wait; first failure: http://{at}/base/v1/traces?api_key=***&tenant=***: \
             the collector answered HTTP/1.1 500 Internal Server Error"
        )
    );
}

/// `spillguard BEFORE --otel-file FILE AFTER` with its three streams
/// piped and no trace context in its environment.
fn piped(before: &[&str], file: &Path, after: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(before)
        .arg("--otel-file")
        .arg(file)
        .args(after)
        .env_remove("TRACEPARENT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Every span out of the file, in the file's order.
fn all_spans(lines: &[Value]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|line| line["resourceSpans"].as_array())
        .flatten()
        .flat_map(|r| r["scopeSpans"].as_array().unwrap())
        .flat_map(|s| s["spans"].as_array().unwrap())
        .cloned()
        .collect()
}

/// A span's name and its string attributes, as (key, value) pairs in order.
fn named_strings(span: &Value) -> (String, Vec<(String, String)>) {
    let strings = span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|kv| {
            let text = kv["value"]["stringValue"].as_str()?;
            Some((kv["key"].as_str()?.to_owned(), text.to_owned()))
        })
        .collect();
    (span["name"].as_str().unwrap().to_owned(), strings)
}

/// Under `stdio --mcp --otel-file`, what the client wrote reaches a span
/// only redacted: a token as a tool's name, a password in a method and in
/// a request id.
#[test]
fn an_mcp_span_s_name_and_attributes_are_redacted() {
    let file = Removed(temp_path("otel-redacted.jsonl"));
    let mut child = piped(
        &["stdio", "--mcp"],
        &file.0,
        &["--", "sh", "-c", "while read -r l; do :; done"],
    );
    let input = concat!(
        r#"{"jsonrpc":"2.0","id":"password=hunter2","method":"tools/call","#,
        r#""params":{"name":"ghp_abcdefghijklmnopqrstuvwxyz0123456789"}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"debug password=hunter2"}"#,
        "\n",
    );
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let record: Value =
        serde_json::from_str(String::from_utf8_lossy(&output.stderr).trim_end()).unwrap();
    let (call, session) = (
        record["call_id"].as_str().unwrap().to_owned(),
        record["session_id"].as_str().unwrap().to_owned(),
    );
    let spans: Vec<_> = all_spans(&lines(&file.0))
        .iter()
        .map(named_strings)
        .collect();
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    assert_eq!(spans.len(), 3, "{spans:?}");
    assert_eq!(
        spans[0],
        (
            "tools/call [redacted: github-token]".to_owned(),
            pairs(&[
                ("mcp.method.name", "tools/call"),
                ("gen_ai.tool.name", "[redacted: github-token]"),
                ("gen_ai.operation.name", "execute_tool"),
                (
                    "jsonrpc.request.id",
                    "password=[redacted: password-assignment]"
                ),
                ("network.transport", "pipe"),
                ("mcp.session.id", &session),
                ("spillguard.call.id", &call),
                ("error.type", "-32000"),
            ])
        )
    );
    assert_eq!(
        spans[1],
        (
            "debug password=[redacted: password-assignment]".to_owned(),
            pairs(&[
                (
                    "mcp.method.name",
                    "debug password=[redacted: password-assignment]"
                ),
                ("jsonrpc.request.id", "2"),
                ("network.transport", "pipe"),
                ("mcp.session.id", &session),
                ("spillguard.call.id", &call),
                ("error.type", "-32000"),
            ])
        )
    );
    assert_eq!(spans[2].0, "sh");
    let text = std::fs::read_to_string(&file.0).unwrap();
    assert_eq!(text.matches("hunter2").count(), 0);
    assert_eq!(text.matches("ghp_").count(), 0);
}

/// `spillguard mcp --otel-file`: every request of the client is a span
/// (initialize, tools/list, ping, tools/call), of the same shape as under
/// `stdio --mcp`; a tools/call's call span is its child.
#[test]
fn under_mcp_every_request_is_a_span_and_a_call_is_the_child_of_its_request() {
    use std::io::{BufRead, BufReader, Write};

    let file = Removed(temp_path("otel-mcp-requests.jsonl"));
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/mcp_tools.toml");
    let mut server = piped(&["mcp", "--tools", tools], &file.0, &[]);
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let mut ask = |message: Value| -> Value {
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
        if message.get("id").is_none() {
            return Value::Null;
        }
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let answer = ask(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "spans", "version": "1"}}}),
    );
    assert_eq!(answer["id"], 1);
    ask(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let answer = ask(
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
        "params": {"_meta": {"traceparent": PARENT}}}),
    );
    assert_eq!(answer["id"], 2);
    let answer = ask(serde_json::json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}));
    assert_eq!(
        answer,
        serde_json::json!({"jsonrpc": "2.0", "id": "p", "result": {}})
    );
    let answer = ask(
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "flood", "arguments": {"bytes": 0}}}),
    );
    assert_eq!(answer["id"], 3);
    drop(stdin);
    let status = server.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let spans = all_spans(&lines(&file.0));
    // The call's span is kind client (3); the requests' kind server (2).
    let (calls, requests): (Vec<&Value>, Vec<&Value>) = spans.iter().partition(|s| s["kind"] == 3);
    assert_eq!(calls.len(), 1);
    let call = calls[0];
    let mut names: Vec<&str> = requests
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["initialize", "ping", "tools/call flood", "tools/list"]
    );
    let by_name = |name: &str| spans.iter().find(|s| s["name"] == name).unwrap();
    let session = attribute(call, "spillguard.session.id").as_str().unwrap();
    let list = by_name("tools/list");
    assert_eq!(
        named_strings(list).1,
        [
            ("mcp.method.name", "tools/list"),
            ("jsonrpc.request.id", "2"),
            ("network.transport", "pipe"),
            ("mcp.session.id", session),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
    assert_eq!(list["kind"], 2, "server");
    assert_eq!(list["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(list["parentSpanId"], "00f067aa0ba902b7");
    assert_eq!(
        list["status"],
        serde_json::json!({"code": 0, "message": ""})
    );
    let ping = by_name("ping");
    assert_eq!(attribute(ping, "jsonrpc.request.id"), "p");
    assert_eq!(ping["parentSpanId"], "");
    let request = by_name("tools/call flood");
    assert_eq!(attribute(request, "gen_ai.tool.name"), "flood");
    assert_eq!(attribute(request, "jsonrpc.request.id"), "3");
    assert_eq!(call["parentSpanId"], request["spanId"]);
    assert_eq!(call["traceId"], request["traceId"]);
}

/// `spillguard mcp --otel-file`: a request still open when the client
/// leaves (a call waiting for its approval) is exported too, its
/// `error.type` saying the client left.
#[test]
fn under_mcp_a_request_open_when_the_client_leaves_is_a_span_too() {
    use std::io::{BufRead, BufReader, Write};

    let file = Removed(temp_path("otel-mcp-left-open.jsonl"));
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/mcp_tools.toml");
    let mut server = piped(&["mcp", "--tools", tools], &file.0, &[]);
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let mut send = |message: Value| {
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
    };
    let mut line = String::new();
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "spans", "version": "1"}}}),
    );
    stdout.read_line(&mut line).unwrap();
    send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "touch", "arguments": {"path": "/tmp/spillguard-never-made"}}}),
    );
    // The approval card: an elicitation request of the server's.
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let card: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(card["method"], "elicitation/create");
    drop(stdin);
    drop(stdout);
    let status = server.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let spans = all_spans(&lines(&file.0));
    let requests: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "tools/call touch")
        .collect();
    assert_eq!(requests.len(), 1, "{spans:?}");
    let request = requests[0];
    assert_eq!(attribute(request, "jsonrpc.request.id"), "7");
    // Closed by the session's own answer to the cancelled call (-32603)
    // when it is written before the session ends, else at the end, as a
    // request whose client left.
    let error = attribute(request, "error.type");
    assert!(
        error == "-32603" || error == "client_disconnected",
        "{error}"
    );
    assert_eq!(request["status"]["code"], 2, "error");
}

/// OTLP variables are often set for a whole environment: one this
/// exporter cannot use turns export off with one line on stderr, and the
/// call runs (with no trace, as without export).
#[test]
fn unusable_otlp_variables_turn_export_off_with_one_warning_and_the_call_runs() {
    for (vars, said) in [
        (
            vec![(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://otel:PASS@collector:4318/?api_key=K1",
            )],
            "spillguard: OTLP export is off: http://otel:***@collector:4318/?api_key=***: \
             credentials in the URL are not sent; give them as a header in \
             OTEL_EXPORTER_OTLP_HEADERS",
        ),
        (
            vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization: Bearer K2=x"),
            ],
            "spillguard: OTLP export is off: OTEL_EXPORTER_OTLP_HEADERS: the name of pair 1 \
             is not a header name",
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318")],
            "spillguard: OTLP export is off: https://collector:4318: https is not spoken here; \
             export to a Collector over http (it can speak TLS onwards)",
        ),
        (
            vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "k=v%0d%0aInjected: 1"),
            ],
            "spillguard: OTLP export is off: OTEL_EXPORTER_OTLP_HEADERS: the value of k holds a \
             control character",
        ),
        (
            vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ],
            "spillguard: OTLP export is off: OTEL_EXPORTER_OTLP_PROTOCOL=grpc: only \
             http/protobuf is spoken here",
        ),
    ] {
        let (output, _) = run_with(&vars);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let record: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(record["state"], "failed_local");
        assert_eq!(record["trace_id"], Value::Null);
        assert_eq!(String::from_utf8_lossy(&output.stderr).trim_end(), said);
    }
    // Disabled: no export, no warning and no trace.
    let (output, _) = run_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318"),
        ("OTEL_SDK_DISABLED", "true"),
    ]);
    assert_eq!(record(&output)["trace_id"], Value::Null);
}

/// One connected trace with real parts (`tests/peers/otel_trace.py`): a
/// client using the OpenTelemetry SDK and the MCP Python SDK, `spillguard
/// mcp` exporting OTLP/HTTP to a receiver that decodes with
/// OpenTelemetry's protocol package, and a helper using the OpenTelemetry
/// SDK: client span -> MCP span -> call span -> the helper's span.
#[test]
fn a_client_span_the_mcp_span_the_call_span_and_the_helper_s_span_are_one_trace() {
    trace_script(&[]);
}

/// The same with `spillguard stdio --mcp` in front of a server written
/// with the MCP Python SDK, whose own OpenTelemetry spans are on
/// (`tests/peers/otel_trace.py --stdio`), the guard started with a host's
/// `TRACEPARENT`: each request the guard forwards is an MCP span under
/// the client's span (or the host's, for a request without one), and the
/// server's span for it (same name, tool and request id) is that span's
/// child; `tool_error` on both for a tool that failed; the server's call
/// span at the exit.
#[test]
fn through_stdio_mcp_each_request_is_a_span_beside_the_server_s_own() {
    trace_script(&["--stdio"]);
}

/// Runs `tests/peers/otel_trace.py` with `args`; it exits non-zero at
/// the first wrong fact.
fn trace_script(args: &[&str]) {
    let Some(python) = otel_python() else {
        return;
    };
    let has_sdk = Command::new(&python)
        .args(["-c", "import mcp, opentelemetry.sdk"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        has_sdk,
        "{} lacks mcp or opentelemetry-sdk: run .ci/peers.sh",
        python.display()
    );
    let output = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/otel_trace.py"))
        .arg(env!("CARGO_BIN_EXE_spillguard"))
        .args(args)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("TRACEPARENT")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "otel_trace.py {args:?}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{}", String::from_utf8_lossy(&output.stdout));
}

/// The audit log's records as the receiver got them, in the order sent:
/// (the log record, its attributes).
fn audit_logs(requests: &[Value], event_name: &str) -> Vec<Value> {
    requests
        .iter()
        .filter(|r| r["path"] == "/v1/logs")
        .flat_map(|r| r["logs"].as_array().cloned().unwrap_or_default())
        .filter(|log| log["event_name"] == event_name)
        .collect()
}

/// With OTLP export on, every record appended to the audit log is also a
/// log record: seq contiguous over the whole log (the writer's `opened`
/// entries too), its kind, its chain hash (the last one is the anchor's
/// head), the call's id and span on a call's events, the record as
/// redacted JSON for body; and each checkpoint signed as a log record of
/// its own. A collector that hangs leaves the log whole and the call as
/// fast as without it (only the exit waits, at most the timeout).
#[test]
fn otlp_http_sends_every_audit_record_and_checkpoint_as_a_log_record() {
    let Some(python) = otel_python() else {
        return;
    };
    let dir = temp_path("otlp-audit");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let keygen = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(["audit", "keygen", "otel.example/audit", "--out"])
        .arg(dir.join("k"))
        .output()
        .unwrap();
    assert_eq!(keygen.status.code(), Some(0));
    let receiver = Receiver::start(&python, "otlp-audit");
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    // The helper's program has a secret in its name: the records hold it
    // as their target, and every body sent must have it redacted.
    // (found through PATH, so that the target is the name as given).
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink("/bin/sh", bin.join("password=hunter2")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let audited = |endpoint: &str, timeout_ms: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_spillguard"));
        command
            .arg("run")
            .arg("--audit")
            .arg(dir.join("calls.log"))
            .arg("--anchor-out")
            .arg(dir.join("calls.anchor"))
            .arg("--checkpoint-key-file")
            .arg(dir.join("k.key"))
            .args(["--", "password=hunter2", "-c", HELPER])
            .env("PATH", &path)
            .env_remove("TRACESTATE")
            .env("TRACEPARENT", PARENT)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
            .env("OTEL_EXPORTER_OTLP_TIMEOUT", timeout_ms)
            .stdin(Stdio::null());
        let started = std::time::Instant::now();
        let output = command.output().unwrap();
        (output, started.elapsed())
    };
    let mut records = Vec::new();
    let mut answered_took = std::time::Duration::ZERO;
    for _ in 0..2 {
        let (output, took) = audited(&endpoint, "10000");
        answered_took = answered_took.max(took);
        records.push(record(&output));
        assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    }
    let verified = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(["audit", "verify"])
        .arg(dir.join("calls.log"))
        .arg("--json")
        .output()
        .unwrap();
    let verdict: Value = serde_json::from_slice(&verified.stdout).unwrap();
    let in_log = verdict["records"].as_u64().unwrap();

    // Each process's exit waited for its queue: everything has come.
    let requests = receiver.requests(2);
    let logs = audit_logs(&requests, "spillguard.audit.record");
    assert_eq!(logs.len() as u64, in_log, "{logs:?}");
    // The secret in each call's target is redacted in every body sent
    // (as in the log), the rule that caught it named.
    let stored = std::fs::read(dir.join("calls.log")).unwrap();
    assert!(!stored.windows(7).any(|w| w == b"hunter2"));
    let with_target = logs
        .iter()
        .filter(|log| {
            let body = log["body"].as_str().unwrap();
            assert!(!body.contains("hunter2"), "{body}");
            body.contains("\"target\":\"password=[redacted: password-assignment]\"")
        })
        .count();
    // Each run's `attempt` and `final` records.
    assert_eq!(with_target, 4, "{logs:?}");
    let seqs: Vec<u64> = logs
        .iter()
        .map(|log| log["attributes"]["spillguard.audit.seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (0..in_log).collect::<Vec<_>>());
    let kinds: Vec<&str> = logs
        .iter()
        .map(|log| {
            log["attributes"]["spillguard.audit.event"]
                .as_str()
                .unwrap()
        })
        .collect();
    let one_run = [
        "opened",
        "transition",
        "attempt",
        "transition",
        "transition",
        "transition",
        "final",
    ];
    assert_eq!(kinds, [one_run, one_run].concat(), "{kinds:?}");
    // The last record's hash is the anchor's head.
    let anchor = std::fs::read_to_string(dir.join("calls.anchor")).unwrap();
    let head = anchor.trim().split('.').nth(3).unwrap();
    assert_eq!(
        logs.last().unwrap()["attributes"]["spillguard.audit.record_hash"],
        head
    );
    for (run, record) in records.iter().enumerate() {
        for log in &logs[run * 7 + 1..run * 7 + 7] {
            assert_eq!(
                log["attributes"]["spillguard.call.id"], record["call_id"],
                "{log}"
            );
            assert_eq!(log["trace_id"], record["trace_id"]);
            assert_eq!(log["span_id"], record["span_id"]);
            let body: Value = serde_json::from_str(log["body"].as_str().unwrap()).unwrap();
            assert_eq!(body["call_id"], record["call_id"]);
        }
        let opened = &logs[run * 7];
        assert_eq!(opened["trace_id"], "");
        assert!(opened["body"].as_str().unwrap().contains("\"opened\""));
        let last = logs[run * 7 + 6]["body"].as_str().unwrap();
        assert!(!last.contains("hunter2"), "{last}");
        assert!(last.contains("stderr_bytes_seen"), "{last}");
    }
    // One checkpoint per final record; the last is the file's, byte for
    // byte.
    let checkpoints = audit_logs(&requests, "spillguard.audit.checkpoint");
    assert_eq!(checkpoints.len(), 2, "{checkpoints:?}");
    let kept = std::fs::read_to_string(dir.join("calls.anchor.checkpoint")).unwrap();
    assert_eq!(checkpoints[1]["body"], kept);
    assert_eq!(
        checkpoints[1]["attributes"]["spillguard.audit.checkpoint.size"],
        in_log
    );

    // A collector that accepts and never answers: the call's record and
    // the log are what they are without it; the exit waits at most the
    // timeout.
    let hangs = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hangs_at = hangs.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in hangs.incoming().flatten() {
            held.push(stream);
        }
    });
    let (output, took) = audited(&format!("http://{hangs_at}"), "400");
    let hung = record(&output);
    assert_eq!(hung["state"], records[0]["state"]);
    assert_eq!(hung["audit_failures"], records[0]["audit_failures"]);
    // The call itself (received to its final state) takes what it takes
    // with a collector that answers; the process waits at most the
    // timeout more, at its exit.
    let call_us = |record: &Value| {
        record["timeline"]
            .as_array()
            .and_then(|states| states.last())
            .and_then(|last| last["offset_us"].as_u64())
            .unwrap()
    };
    let answered_us = records.iter().map(call_us).max().unwrap();
    // (If each of the call's six records waited for the collector's
    // 400 ms, the call would take 2.4 s longer.)
    assert!(
        call_us(&hung) < answered_us + 1_000_000,
        "the call took {} us against {answered_us} us",
        call_us(&hung)
    );
    assert!(
        took < answered_took + std::time::Duration::from_millis(400 + 1500),
        "{took:?} against {answered_took:?}"
    );
    let verified = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(["audit", "verify"])
        .arg(dir.join("calls.log"))
        .arg("--anchor-file")
        .arg(dir.join("calls.anchor"))
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    let verdict: Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(verdict["records"].as_u64().unwrap(), in_log + 7);

    // A sealed log's records go without their content: no body, no call
    // id; where they are, their kind and hash, and the call's span.
    std::fs::write(dir.join("seal.key"), format!("{}\n", "cd".repeat(32))).unwrap();
    let sealed_receiver = Receiver::start(&python, "otlp-audit-sealed");
    let sealed = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .arg("run")
        .arg("--audit")
        .arg(dir.join("sealed.log"))
        .arg("--audit-key-file")
        .arg(dir.join("seal.key"))
        .args(["--", "sh", "-c", HELPER])
        .env_remove("TRACESTATE")
        .env("TRACEPARENT", PARENT)
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{}", sealed_receiver.port),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let sealed_record = record(&sealed);
    let requests = sealed_receiver.requests(2);
    let logs = audit_logs(&requests, "spillguard.audit.record");
    assert_eq!(logs.len(), 7, "{logs:?}");
    for log in &logs {
        assert_eq!(log["body"], "", "{log}");
        assert_eq!(log["attributes"].get("spillguard.call.id"), None, "{log}");
        assert!(log["attributes"]["spillguard.audit.record_hash"].is_string());
    }
    assert_eq!(logs[6]["span_id"], sealed_record["span_id"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
