//! The test helper program does exactly what its flags say: byte counts,
//! byte contents, exit statuses, signal behaviour and timing of the stderr
//! pipe, as the scenario suite relies on them.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

const HELPER: &str = env!("CARGO_BIN_EXE_spillguard-test-helper");
const DIAGNOSTIC: &[u8] = b"helper-diagnostic\n";

fn helper(args: &[&str]) -> Command {
    let mut command = Command::new(HELPER);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn run(args: &[&str]) -> Output {
    helper(args).output().unwrap()
}

fn run_with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = helper(args).stdin(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// `unit` repeated and cut at exactly `total` bytes.
fn repeated(unit: &[u8], total: usize) -> Vec<u8> {
    unit.iter().copied().cycle().take(total).collect()
}

/// Spawns the helper with a `ready` line written after its signal handling
/// is set up, and returns once that line has been read.
fn spawn_ready(args: &[&str]) -> Child {
    let mut all = vec!["--line", "ready", "--stderr-bytes", "6"];
    all.extend_from_slice(args);
    let mut child = helper(&all).stdout(Stdio::null()).spawn().unwrap();
    let mut ready = [0u8; 6];
    child
        .stderr
        .as_mut()
        .unwrap()
        .read_exact(&mut ready)
        .unwrap();
    assert_eq!(&ready, b"ready\n");
    child
}

fn send_sigterm(child: &Child) {
    kill_process(Pid::from_child(child), Signal::TERM).unwrap();
}

fn rest_of_stderr(child: &mut Child) -> Vec<u8> {
    let mut rest = Vec::new();
    child.stderr.take().unwrap().read_to_end(&mut rest).unwrap();
    rest
}

/// Asserts a usage error: exit 2, nothing on stdout, one stderr line
/// naming `flag`.
fn assert_usage_error(args: &[&str], flag: &str) {
    let output = run(args);
    assert_eq!(output.status.code(), Some(2), "args {args:?}");
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.matches('\n').count(), 1, "one line: {stderr:?}");
    assert!(stderr.ends_with('\n'));
    assert!(stderr.contains(flag), "{stderr:?} names {flag}");
}

#[test]
fn flood_writes_exactly_the_requested_bytes_of_repeated_lines() {
    let output = run(&["--stderr-bytes", "1000000", "--chunk", "4096"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stdout.is_empty());
    assert_eq!(output.stderr.len(), 1_000_000);
    assert_eq!(output.stderr, repeated(DIAGNOSTIC, 1_000_000));
    // 1_000_000 = 55_555 * 18 + 10: the last line is cut after 10 bytes.
    assert_eq!(
        output.stderr.iter().filter(|&&b| b == b'\n').count(),
        55_555
    );
    assert_eq!(&output.stderr[999_990..], b"helper-dia");
}

#[test]
fn flood_stays_continuous_when_chunks_cut_lines_and_sizes_take_suffixes() {
    let output = run(&[
        "--stderr-bytes",
        "1M",
        "--chunk",
        "1000",
        "--line",
        "abcdefg",
    ]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stderr.len(), 1 << 20);
    assert_eq!(output.stderr, repeated(b"abcdefg\n", 1 << 20));

    let output = run(&["--stderr-bytes", "64k", "--chunk", "7"]);
    assert_eq!(output.stderr, repeated(DIAGNOSTIC, 65_536));
}

#[test]
fn exit_code_is_the_one_asked_for() {
    let output = run(&["--exit", "7"]);
    assert_eq!(output.status.code(), Some(7));
    assert!(output.stdout.is_empty());
    assert!(output.stderr.is_empty());
}

#[test]
fn stdout_json_is_exactly_one_line() {
    let output = run(&["--stdout-json", r#"{"ok":true}"#, "--stderr-bytes", "100K"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, b"{\"ok\":true}\n");
    assert_eq!(output.stderr.len(), 102_400);
}

#[test]
fn stdout_bytes_counts_the_final_newline() {
    let output = run(&["--stdout-bytes", "1000", "--stdout-json", "{}"]);
    assert_eq!(output.stdout.len(), 1000 + 3);
    assert_eq!(&output.stdout[..999], repeated(b"o", 999).as_slice());
    assert_eq!(&output.stdout[999..], b"\n{}\n");
    assert!(output.stderr.is_empty());
}

#[test]
fn giant_line_is_one_line_of_exactly_n_bytes_before_the_flood() {
    let output = run(&["--giant-line", "300000"]);
    assert_eq!(output.stderr.len(), 300_001);
    assert!(output.stderr[..300_000].iter().all(|&b| b == b'x'));
    assert_eq!(output.stderr[300_000], b'\n');

    let output = run(&[
        "--giant-line",
        "300000",
        "--stderr-bytes",
        "1000",
        "--chunk",
        "4K",
    ]);
    let mut expected = repeated(b"x", 300_000);
    expected.push(b'\n');
    expected.extend(repeated(DIAGNOSTIC, 1000));
    assert_eq!(output.stderr, expected);
}

#[test]
fn invalid_utf8_bytes_are_exact() {
    let output = run(&["--invalid-utf8"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stderr, b"bad:\xff\xfe\xc3(\xe2\x82 end\n");
}

#[test]
fn split_char_bytes_are_exact_and_the_halves_are_20_ms_apart() {
    let start = Instant::now();
    let output = run(&["--split-char"]);
    assert!(start.elapsed() >= Duration::from_millis(20));
    assert_eq!(output.stderr, b"split:\xe2\x82\xac done\n");
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "split:\u{20ac} done\n"
    );
}

#[test]
fn actions_run_in_the_documented_order() {
    let output = run(&[
        "--stderr-bytes",
        "20",
        "--split-char",
        "--stdout-json",
        "{}",
        "--invalid-utf8",
        "--giant-line",
        "3",
        "--exit",
        "1",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(output.stdout, b"{}\n");
    let mut expected = b"xxx\nbad:\xff\xfe\xc3(\xe2\x82 end\nsplit:\xe2\x82\xac done\n".to_vec();
    expected.extend(repeated(DIAGNOSTIC, 20));
    assert_eq!(output.stderr, expected);
}

#[test]
fn stdin_approval_exits_with_the_chosen_code_and_anything_else_with_3() {
    let approved = run_with_stdin(&["--wait-stdin-line", "--exit", "5"], b"approved\n");
    assert_eq!(approved.status.code(), Some(5));
    let denied = run_with_stdin(&["--wait-stdin-line", "--exit", "5"], b"nope\n");
    assert_eq!(denied.status.code(), Some(3));
    let closed = run(&["--wait-stdin-line", "--exit", "5"]);
    assert_eq!(closed.status.code(), Some(3));
}

#[test]
fn stderr_stays_busy_while_waiting_for_approval_and_exit_follows_it() {
    let mut child = helper(&[
        "--wait-stdin-line",
        "--stderr-during-sleep-ms",
        "10",
        "--line",
        "waiting",
        "--exit",
        "4",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    let mut three_lines = [0u8; 24];
    child
        .stderr
        .as_mut()
        .unwrap()
        .read_exact(&mut three_lines)
        .unwrap();
    assert_eq!(three_lines.as_slice(), b"waiting\n".repeat(3));
    let approved_at = Instant::now();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"approved\n")
        .unwrap();
    let rest = rest_of_stderr(&mut child);
    let status = child.wait().unwrap();
    assert!(approved_at.elapsed() < Duration::from_millis(500));
    assert_eq!(status.code(), Some(4));
    assert_eq!(rest.len() % 8, 0);
    assert_eq!(rest, b"waiting\n".repeat(rest.len() / 8));
}

#[test]
fn stderr_during_sleep_writes_one_line_per_period() {
    let start = Instant::now();
    let output = run(&[
        "--sleep-ms",
        "200",
        "--stderr-during-sleep-ms",
        "50",
        "--line",
        "tick",
    ]);
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert_eq!(output.status.code(), Some(0));
    // Lines at 0, 50, 100 and 150 ms of the 200 ms sleep.
    assert_eq!(output.stderr, b"tick\n".repeat(4));
}

#[test]
fn ignored_sigterm_does_not_end_the_sleep_early() {
    let start = Instant::now();
    let mut child = spawn_ready(&["--ignore-sigterm", "--sleep-ms", "500", "--exit", "4"]);
    send_sigterm(&child);
    let rest = rest_of_stderr(&mut child);
    let status = child.wait().unwrap();
    assert!(start.elapsed() >= Duration::from_millis(500));
    assert_eq!(status.code(), Some(4));
    assert_eq!(status.signal(), None);
    assert!(rest.is_empty());
}

#[test]
fn sigterm_kills_by_default() {
    let start = Instant::now();
    let mut child = spawn_ready(&["--sleep-ms", "5000"]);
    send_sigterm(&child);
    let status = child.wait().unwrap();
    assert!(start.elapsed() < Duration::from_secs(3));
    assert_eq!(status.signal(), Some(15));
    assert_eq!(status.code(), None);
    assert!(rest_of_stderr(&mut child).is_empty());
}

#[test]
fn write_after_sigterm_writes_exact_bytes_then_exits_143() {
    let start = Instant::now();
    let mut child = spawn_ready(&["--write-after-sigterm", "100", "--sleep-ms", "5000"]);
    send_sigterm(&child);
    let rest = rest_of_stderr(&mut child);
    let status = child.wait().unwrap();
    assert!(start.elapsed() < Duration::from_secs(3));
    assert_eq!(status.code(), Some(143));
    assert_eq!(rest, repeated(b"after-sigterm\n", 100));
}

#[test]
fn write_after_sigterm_with_ignore_keeps_sleeping() {
    let start = Instant::now();
    let mut child = spawn_ready(&[
        "--write-after-sigterm",
        "100",
        "--ignore-sigterm",
        "--sleep-ms",
        "500",
        "--exit",
        "9",
    ]);
    send_sigterm(&child);
    let rest = rest_of_stderr(&mut child);
    let status = child.wait().unwrap();
    assert!(start.elapsed() >= Duration::from_millis(500));
    assert_eq!(status.code(), Some(9));
    assert_eq!(rest, repeated(b"after-sigterm\n", 100));
}

#[test]
fn grandchild_holds_stderr_open_after_the_direct_child_exits() {
    let start = Instant::now();
    let mut child = helper(&["--grandchild-hold-ms", "1500", "--exit", "6"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = thread::spawn(move || {
        let mut bytes = Vec::new();
        stderr.read_to_end(&mut bytes).unwrap();
        (bytes, start.elapsed())
    });
    let status = child.wait().unwrap();
    let exited_after = start.elapsed();
    let (bytes, eof_after) = reader.join().unwrap();
    assert_eq!(status.code(), Some(6));
    assert!(
        exited_after < Duration::from_millis(500),
        "{exited_after:?}"
    );
    assert!(eof_after >= Duration::from_millis(1500), "{eof_after:?}");
    // One line at 0, 50, ..., 1450 ms of the 1500 ms hold.
    assert_eq!(bytes, b"grandchild-diagnostic\n".repeat(30));
}

#[test]
fn forever_floods_until_the_reader_goes_away_then_exits_with_the_chosen_code() {
    let mut child = helper(&["--forever", "--exit", "6"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let mut first = vec![0u8; 4 << 20];
    stderr.read_exact(&mut first).unwrap();
    assert_eq!(first, repeated(DIAGNOSTIC, 4 << 20));
    drop(stderr);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(6));
}

#[test]
fn closed_pipes_do_not_change_the_exit_code() {
    let mut child = helper(&[
        "--stderr-bytes",
        "10M",
        "--stdout-bytes",
        "10M",
        "--exit",
        "4",
    ])
    .spawn()
    .unwrap();
    drop(child.stderr.take());
    drop(child.stdout.take());
    assert_eq!(child.wait().unwrap().code(), Some(4));
}

#[test]
fn bad_command_lines_exit_2_with_one_line_naming_the_flag() {
    assert_usage_error(&["--bogus"], "--bogus");
    assert_usage_error(&["--stderr-bytes", "12Q"], "--stderr-bytes");
    assert_usage_error(&["--chunk", "0"], "--chunk");
    assert_usage_error(&["--exit", "256"], "--exit");
    assert_usage_error(&["--exit", "-1"], "--exit");
    assert_usage_error(&["--sleep-ms", "1.5"], "--sleep-ms");
    assert_usage_error(&["--stderr-bytes", "99999999999G"], "--stderr-bytes");
    assert_usage_error(
        &["--exit", "1", "--grandchild-hold-ms"],
        "--grandchild-hold-ms",
    );
}

#[test]
fn help_lists_every_flag_on_stdout() {
    let output = run(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stderr.is_empty());
    let usage = String::from_utf8(output.stdout).unwrap();
    assert!(usage.starts_with("usage: spillguard-test-helper"));
    for flag in [
        "--stderr-bytes",
        "--line",
        "--chunk",
        "--giant-line",
        "--invalid-utf8",
        "--split-char",
        "--forever",
        "--stdout-bytes",
        "--stdout-json",
        "--sleep-ms",
        "--stderr-during-sleep-ms",
        "--wait-stdin-line",
        "--grandchild-hold-ms",
        "--ignore-sigterm",
        "--write-after-sigterm",
        "--exit",
    ] {
        assert!(usage.contains(flag), "help names {flag}");
    }
}
