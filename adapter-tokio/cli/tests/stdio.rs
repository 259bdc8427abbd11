//! `spillguard stdio` as a black box: the bytes through each way, the
//! record line, the exit statuses, the stdio shutdown by stdin's end and by
//! a signal, `--mcp` and `--forward-stderr`.
#![allow(clippy::unwrap_used)]

mod stdio_common;
// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;

use std::io::{Read, Write};
use std::process::{Child, ChildStdout, Output};

use rustix::io::Errno;
use rustix::process::{Pid, Signal, kill_process, test_kill_process_group};
use serde_json::Value;
use stdio_common::{record_on_stderr, stdio};
use support::temp_path;

/// The guard is given `input`, closes its stdin, and ends.
fn feed(args: &[&str], input: &[u8]) -> Output {
    let mut child = stdio(args).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn read_exactly(stdout: &mut ChildStdout, n: usize) -> Vec<u8> {
    let mut bytes = vec![0; n];
    stdout.read_exact(&mut bytes).unwrap();
    bytes
}

/// No process of group `pgid` is left.
fn assert_group_gone(record: &Value) {
    let pgid = i32::try_from(record["pgid"].as_u64().unwrap()).unwrap();
    let pgid = Pid::from_raw(pgid).unwrap();
    assert_eq!(test_kill_process_group(pgid), Err(Errno::SRCH));
}

fn signals(record: &Value) -> Vec<String> {
    record["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["signal"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn bytes_go_through_each_way_and_the_record_goes_to_the_record_file() {
    let record_file = temp_path("stdio-record.jsonl");
    let _ = std::fs::remove_file(&record_file);
    let mut child: Child = stdio(&["--record", record_file.to_str().unwrap(), "--", "cat"])
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1}\n")
        .unwrap();
    // Each message comes back as soon as it went in.
    assert_eq!(
        read_exactly(&mut stdout, 25),
        b"{\"jsonrpc\":\"2.0\",\"id\":1}\n"
    );
    stdin.write_all(b"partial, no newline").unwrap();
    assert_eq!(read_exactly(&mut stdout, 19), b"partial, no newline");
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, b"");
    assert_eq!(output.stderr, b"");
    let text = std::fs::read_to_string(&record_file).unwrap();
    let _ = std::fs::remove_file(&record_file);
    assert_eq!(text.lines().count(), 1);
    let record: Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(record["state"], "completed");
    assert_eq!(record["action"], "stdio");
    assert_eq!(record["stdout_mode"], "streamed");
    assert_eq!(record["stdin_bytes_forwarded"], 44);
    assert_eq!(record["stdout_bytes_forwarded"], 44);
    assert_eq!(record["stdout_bytes_seen"], 0);
    assert_eq!(record["exit_status"], 0);
    assert_eq!(record["stderr_excerpt"], "");
    assert_eq!(signals(&record), Vec::<String>::new());
    assert_group_gone(&record);
}

#[test]
fn the_helpers_stderr_is_captured_and_never_written_while_it_runs() {
    let flood = feed(
        &[
            "--per-call-bytes",
            "1024",
            "--excerpt-bytes",
            "512",
            "--",
            "sh",
            "-c",
            "head -c 100000 /dev/zero | tr '\\0' x 1>&2; cat",
        ],
        b"in\n",
    );
    assert_eq!(flood.status.code(), Some(0));
    assert_eq!(flood.stdout, b"in\n");
    let record = record_on_stderr(&flood);
    assert_eq!(record["stderr_bytes_seen"], 100_000);
    assert_eq!(record["stderr_bytes_retained"], 1024);
    assert_eq!(record["stderr_truncated"], true);
    assert_eq!(record["stdin_bytes_forwarded"], 3);
}

#[test]
fn mcp_forwards_whole_json_rpc_messages_and_diverts_every_other_line() {
    let mut child = stdio(&["--mcp", "--", "sh", "-c", "echo banner; exec cat"])
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let one = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    let two = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n";
    let not: &[&[u8]] = &[
        b"not json\n",
        b"{broken json\n",
        b"{DEBUG} x\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":1}{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":2}\n",
        b"{\"level\":30,\"time\":1764633600000,\"pid\":7,\"msg\":\"listening\"}\n",
        b"{\"event\": \"started\", \"level\": \"info\"}\n",
        b"\n",
        b"[1]\n",
    ];
    stdin.write_all(&not.concat()).unwrap();
    stdin.write_all(one).unwrap();
    stdin.write_all(two).unwrap();
    // Once the last message is through, every diverted line before it has
    // reached the call.
    assert_eq!(
        read_exactly(&mut stdout, one.len() + two.len()),
        [&one[..], &two[..]].concat()
    );
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, b"");
    let record = record_on_stderr(&output);
    let diverted_bytes: usize = 7 + not.iter().map(|l| l.len()).sum::<usize>();
    assert_eq!(record["stdout_bytes_forwarded"], one.len() + two.len());
    assert_eq!(record["stdout_lines_diverted"], 1 + not.len());
    assert_eq!(record["stdout_bytes_diverted"], diverted_bytes);
    assert_eq!(record["stderr_bytes_seen"], diverted_bytes);
    let expected = format!("banner\n{}", String::from_utf8(not.concat()).unwrap());
    assert_eq!(record["stderr_excerpt"], expected.as_str());
}

/// A message of 64 MiB (the default maximum, newline included) passes
/// intact; one byte more goes to the capture, counted as one line.
#[test]
fn a_json_rpc_message_of_64_mib_passes_intact_under_mcp_and_a_longer_line_does_not() {
    let message = |size: usize| {
        let mut line = Vec::with_capacity(size);
        line.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"");
        line.resize(size - 3, b'x');
        line.extend_from_slice(b"\"}\n");
        line
    };
    for (size, forwarded) in [(64 << 20, true), ((64 << 20) + 1, false)] {
        let line = message(size);
        let mut child = stdio(&["--mcp", "--", "cat"]).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let expected = line.clone();
        let writer = std::thread::spawn(move || {
            stdin.write_all(&line).unwrap();
        });
        let mut stdout = child.stdout.take().unwrap();
        let mut echoed = Vec::new();
        stdout.read_to_end(&mut echoed).unwrap();
        writer.join().unwrap();
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0));
        let record = record_on_stderr(&output);
        if forwarded {
            assert_eq!(echoed.len(), expected.len());
            assert!(echoed == expected);
            assert_eq!(record["stdout_bytes_forwarded"], expected.len());
            assert_eq!(record["stdout_lines_diverted"], 0);
        } else {
            assert_eq!(echoed.len(), 0);
            assert_eq!(record["stdout_bytes_forwarded"], 0);
            assert_eq!(record["stdout_lines_diverted"], 1);
            assert_eq!(record["stdout_bytes_diverted"], size);
            assert_eq!(record["stderr_bytes_seen"], size);
        }
    }
}

#[test]
fn exit_statuses_follow_the_helper() {
    let seven = feed(&["--", "sh", "-c", "exit 7"], b"");
    assert_eq!(seven.status.code(), Some(7));
    assert_eq!(record_on_stderr(&seven)["exit_status"], 7);
    let killed = feed(&["--", "sh", "-c", "kill -9 $$"], b"");
    assert_eq!(killed.status.code(), Some(128 + 9));
    assert_eq!(record_on_stderr(&killed)["exit_signal"], 9);
    let missing = feed(&["--", "/nonexistent/server"], b"");
    assert_eq!(missing.status.code(), Some(127));
    let record = record_on_stderr(&missing);
    assert_eq!(record["state"], "failed_before_dispatch");
    assert_eq!(record["spawn_error_kind"], "not_found");
    for (args, message) in [
        (
            &["--mcp"][..],
            "spillguard: missing program (usage: spillguard stdio [OPTIONS] -- PROGRAM [ARGS...])\n",
        ),
        (
            &["--record", "/nonexistent/dir/r.jsonl", "--", "cat"][..],
            "spillguard: cannot open --record /nonexistent/dir/r.jsonl: \
             No such file or directory (os error 2)\n",
        ),
    ] {
        let output = feed(args, b"");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert_eq!(output.stdout, b"");
        assert_eq!(String::from_utf8_lossy(&output.stderr), message);
    }
}

#[test]
fn the_end_of_stdin_gives_the_helper_its_grace_then_term() {
    let output = feed(&["--stdin-close-grace-ms", "200", "--", "sleep", "30"], b"");
    assert_eq!(output.status.code(), Some(128 + 15));
    let record = record_on_stderr(&output);
    assert_eq!(record["state"], "cancelled_after_dispatch");
    assert_eq!(record["cancel_reason"], "stdin_close_grace");
    assert_eq!(signals(&record), ["TERM"]);
    assert_group_gone(&record);
}

#[test]
fn sigterm_to_the_guard_stops_a_helper_that_ignores_term_and_keeps_stdin_open() {
    let mut child = stdio(&[
        "--stdin-close-grace-ms",
        "200",
        "--grace-ms",
        "300",
        "--",
        "sh",
        "-c",
        "trap '' TERM; echo up; exec sleep 30 <&-",
    ])
    .spawn()
    .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    assert_eq!(read_exactly(&mut stdout, 3), b"up\n");
    kill_process(Pid::from_child(&child), Signal::TERM).unwrap();
    let output = child.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(output.status.code(), Some(128 + 9));
    let record = record_on_stderr(&output);
    assert_eq!(record["state"], "killed");
    assert_eq!(record["cancel_reason"], "requested");
    assert_eq!(signals(&record), ["TERM", "KILL"]);
    assert_group_gone(&record);
}

#[test]
fn forward_stderr_copies_without_blocking_and_counts_what_it_dropped() {
    let output = feed(
        &["--forward-stderr", "--", "sh", "-c", "echo diag 1>&2"],
        b"",
    );
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stderr).unwrap();
    let (copied, line) = text.split_once('\n').unwrap();
    assert_eq!(copied, "diag");
    let record: Value = serde_json::from_str(line.trim_end()).unwrap();
    assert_eq!(record["stderr_forward_dropped"], 0);
    assert_eq!(record["stderr_excerpt"], "diag\n");

    // Nobody reads the guard's stderr while the helper floods 1 MiB: the
    // copy stops at a full pipe, the call is not held up.
    let record_file = temp_path("stdio-forward.jsonl");
    let _ = std::fs::remove_file(&record_file);
    let mut child = stdio(&[
        "--forward-stderr",
        "--record",
        record_file.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "head -c 1048576 /dev/zero | tr '\\0' x 1>&2",
    ])
    .spawn()
    .unwrap();
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let mut copied = Vec::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut copied)
        .unwrap();
    let text = std::fs::read_to_string(&record_file).unwrap();
    let _ = std::fs::remove_file(&record_file);
    let record: Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(record["stderr_bytes_seen"], 1_048_576);
    let dropped = record["stderr_forward_dropped"].as_u64().unwrap();
    assert!(dropped > 0);
    assert_eq!(copied.len() as u64 + dropped, 1_048_576);
    assert!(copied.iter().all(|&b| b == b'x'));
}

#[test]
fn audit_writes_the_streamed_calls_lifecycle_to_the_log() {
    use spillguard_std::proto::audit::{VerifyOptions, verify_and_read};
    let log = temp_path("stdio-audit.log");
    let _ = std::fs::remove_file(&log);
    let output = feed(&["--audit", log.to_str().unwrap(), "--", "cat"], b"{}\n");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, b"{}\n");
    let record = record_on_stderr(&output);
    let bytes = std::fs::read(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let (verdict, entries) = verify_and_read(&bytes, VerifyOptions::default());
    assert_eq!(
        verdict.to_string(),
        "unanchored: 7 records intact, 7 of them not vouched for by an anchor"
    );
    let kinds: Vec<Value> = entries
        .iter()
        .map(|r| serde_json::to_value(r.entry.as_ref().unwrap()).unwrap())
        .collect();
    let last = kinds.last().unwrap();
    let final_record = &last["call"]["kind"]["final"];
    assert_eq!(final_record["call_id"], record["call_id"]);
    assert_eq!(final_record["state"], "completed");
    assert_eq!(final_record["stdout_mode"], "streamed");
    assert_eq!(final_record["stdin_bytes_forwarded"], 3);
}

#[test]
fn forward_stderr_is_redacted_as_it_streams_and_keeps_every_other_byte() {
    // A token and a quoted password each split across two writes 50 ms
    // apart, a colour, `\r` progress and bytes that are not UTF-8.
    let script = r#"printf 'token ghp_0123456789abcdef' >&2; sleep 0.05
printf '0123456789abcdefABCD used\n' >&2
printf 'db password="p$ss w' >&2; sleep 0.05; printf '&rd" ok\n' >&2
printf '\033[31mred\033[0m \r 10%%\r100%%\n' >&2
printf 'raw \377\376 bytes\n' >&2"#;
    let record_file = temp_path("stdio-forward-redacted.jsonl");
    let _ = std::fs::remove_file(&record_file);
    let output = feed(
        &[
            "--forward-stderr",
            "--record",
            record_file.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            script,
        ],
        b"",
    );
    assert_eq!(output.status.code(), Some(0));
    let password_line = "db password=\"p$ss w&rd\" ok\n";
    let redacted_password = spillguard_std::proto::Redactor::builtin()
        .redact(password_line)
        .text;
    let mut expected = b"token [redacted: github-token] used\n".to_vec();
    expected.extend_from_slice(redacted_password.as_bytes());
    expected.extend_from_slice(b"\x1b[31mred\x1b[0m \r 10%\r100%\n");
    expected.extend_from_slice(b"raw \xff\xfe bytes\n");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&expected)
    );
    assert_eq!(output.stderr, expected);
    let text = std::fs::read_to_string(&record_file).unwrap();
    let _ = std::fs::remove_file(&record_file);
    let record: Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(record["stderr_forward_dropped"], 0);
    let secrets = if redacted_password == password_line {
        1
    } else {
        2
    };
    assert_eq!(record["stderr_forward_redactions"], secrets);
    assert_eq!(record["stderr_redactions"], secrets);
}

#[test]
fn forward_stderr_holds_a_token_head_across_a_long_pause_until_its_line_ends() {
    // The first 20 characters of a token, a pause of 400 ms (four quiet
    // intervals), then the rest: the head is never shown on its own.
    let script = "printf 'login ghp_0123456789abcdef' >&2; sleep 0.4; \
                  printf '0123456789abcdefABCD ok\\n' >&2";
    let output = feed(&["--forward-stderr", "--", "sh", "-c", script], b"");
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stderr).unwrap();
    let (copied, line) = text.split_once('\n').unwrap();
    assert_eq!(copied, "login [redacted: github-token] ok");
    let record: Value = serde_json::from_str(line.trim_end()).unwrap();
    assert_eq!(record["stderr_forward_redactions"], 1);
    assert_eq!(record["stderr_forward_dropped"], 0);
}

#[test]
fn forward_stderr_shows_a_partial_line_once_the_server_goes_quiet() {
    let mut child = stdio(&[
        "--forward-stderr",
        "--",
        "sh",
        "-c",
        "printf 'loading 45%%' >&2; sleep 2; printf ' done\\n' >&2",
    ])
    .spawn()
    .unwrap();
    let started = std::time::Instant::now();
    let mut stderr = child.stderr.take().unwrap();
    let mut shown = vec![0; "loading 45%".len()];
    stderr.read_exact(&mut shown).unwrap();
    // Two quiet intervals of 100 ms, not the server's 2 s.
    assert!(started.elapsed() < std::time::Duration::from_millis(1500));
    assert_eq!(shown, b"loading 45%");
    drop(child.stdin.take());
    let mut rest = Vec::new();
    stderr.read_to_end(&mut rest).unwrap();
    assert!(
        rest.starts_with(b" done\n"),
        "{:?}",
        String::from_utf8_lossy(&rest)
    );
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// A server that begins each message with a UTF-8 byte order mark: the
/// guard skips the mark (RFC 8259 lets a parser ignore it) and forwards
/// the message without it, so its request is answered while the server
/// lives. The client's bytes reach the server as they are, mark included.
#[test]
fn mcp_forwards_a_message_that_begins_with_a_byte_order_mark_without_it() {
    let server = r#"
import json, sys
for raw in sys.stdin.buffer:
    bom = raw.startswith(b"\xef\xbb\xbf")
    message = json.loads(raw[3:] if bom else raw)
    answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"bom": bom}}
    sys.stdout.buffer.write(b"\xef\xbb\xbf" + json.dumps(answer, separators=(",", ":")).encode() + b"\n")
    sys.stdout.flush()
"#;
    let mut child = stdio(&["--mcp", "--", "python3", "-c", server])
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let answers: [&[u8]; 2] = [
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"bom\":false}}\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"result\":{\"bom\":true}}\n",
    ];
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    // Answered while the server lives, without the mark.
    assert_eq!(read_exactly(&mut stdout, answers[0].len()), answers[0]);
    stdin
        .write_all(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"ping\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    assert_eq!(read_exactly(&mut stdout, answers[1].len()), answers[1]);
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, b"");
    let record = record_on_stderr(&output);
    assert_eq!(record["stdout_bytes_forwarded"], answers.concat().len());
    assert_eq!(record["stdout_lines_diverted"], 0);
    assert_eq!(record["stdout_bytes_diverted"], 0);
    assert_eq!(record["stderr_bytes_seen"], 0);
}

/// The one error answer line of a `--mcp` guard whose server exits with
/// `status` before answering (the record's call id and stderr in `data`).
fn crash_error(record: &Value, status: i32) -> String {
    format!(
        "{{\"code\":-32000,\"message\":\"MCP server exited with status {status} before \
         answering\",\"data\":{{\"exit_status\":{status},\"exit_signal\":null,\
         \"stderr_excerpt\":{},\"stderr_bytes_seen\":{},\"call_id\":{}}}}}",
        record["stderr_excerpt"], record["stderr_bytes_seen"], record["call_id"]
    )
}

/// A host's batch (three requests, one notification) reaches the server
/// intact; when the server exits, the three requests are answered in one
/// batch, an array, in their order; the notification is not answered.
#[test]
fn mcp_answers_every_request_of_a_batch_in_one_array_when_the_server_exits() {
    let batch = concat!(
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"},"#,
        r#"{"jsonrpc":"2.0","id":"two","method":"ping"},"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}]"#,
    );
    // The server says what it read on stderr, then exits 3.
    let server = r#"read -r line; printf '%s\n' "$line" >&2; exit 3"#;
    let output = feed(
        &["--mcp", "--", "sh", "-c", server],
        format!("{batch}\n").as_bytes(),
    );
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let record = record_on_stderr(&output);
    assert_eq!(record["stderr_excerpt"], format!("{batch}\n"));
    let error = crash_error(&record, 3);
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        format!(
            "[{{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{error}}},\
             {{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"error\":{error}}},\
             {{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{error}}}]\n"
        )
    );
}

/// A server's batch answer reaches the host as it was written, and
/// answers the requests it names: none is answered again at the end.
#[test]
fn mcp_forwards_a_server_s_batch_answer_and_it_clears_the_requests() {
    let answer = r#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":"b","result":{"tools":[]}}]"#;
    let server = format!("read -r line; printf '%s\\n' '{answer}'; read -r rest; exit 0");
    let output = feed(
        &["--mcp", "--", "sh", "-c", &server],
        concat!(
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#,
            "\n"
        )
        .as_bytes(),
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        String::from_utf8(output.stdout.clone()).unwrap(),
        format!("{answer}\n")
    );
    let record = record_on_stderr(&output);
    assert_eq!(record["stdout_lines_diverted"], 0);
    assert_eq!(record["stdout_bytes_forwarded"], answer.len() + 1);
}

/// A request whose id is a 4,000-byte string is tracked like any other:
/// the server's exit answers it, with that id.
#[test]
fn mcp_answers_a_request_with_a_4000_byte_id_when_the_server_exits() {
    let id = "i".repeat(4000);
    let request = format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"tools/list"}}"#);
    let output = feed(
        &["--mcp", "--", "sh", "-c", "read -r line; exit 5"],
        format!("{request}\n").as_bytes(),
    );
    assert_eq!(output.status.code(), Some(5), "{output:?}");
    let record = record_on_stderr(&output);
    let error = crash_error(&record, 5);
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"error\":{error}}}\n")
    );
}
