//! `spillguard stdio` with every kind of descriptor a host may hand it,
//! as a black box: request/response round trips with stdin and stdout
//! each a pipe, a stream socketpair (what Node and Bun hosts give), a
//! regular file, `/dev/null` or a terminal; sockets half-closed either
//! way; a server that stops reading; a server that prints and exits at
//! once; a server that dies with requests pending.
#![allow(clippy::unwrap_used)]

// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustix::net::{AddressFamily, Shutdown, SocketFlags, SocketType};
use serde_json::Value;
use support::temp_path;

/// How long a test waits for a reply before it calls the guard stuck.
const REPLY_WAIT: Duration = Duration::from_secs(10);

/// A descriptor kind, as a pair of ends: the guard's and the host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pipe,
    Socket,
    Terminal,
}

/// (the guard's end, the host's end) for the guard's stdin (`input`) or
/// stdout.
fn ends(kind: Kind, input: bool) -> (OwnedFd, OwnedFd) {
    match kind {
        Kind::Pipe => {
            let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
            if input { (read, write) } else { (write, read) }
        }
        Kind::Socket => rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap(),
        Kind::Terminal => {
            let master = rustix::pty::openpt(
                rustix::pty::OpenptFlags::RDWR | rustix::pty::OpenptFlags::NOCTTY,
            )
            .unwrap();
            rustix::io::fcntl_setfd(&master, rustix::io::FdFlags::CLOEXEC).unwrap();
            rustix::pty::grantpt(&master).unwrap();
            rustix::pty::unlockpt(&master).unwrap();
            let name = rustix::pty::ptsname(&master, Vec::new()).unwrap();
            let slave: OwnedFd = File::options()
                .read(true)
                .write(true)
                .open(name.to_str().unwrap())
                .unwrap()
                .into();
            // Raw: bytes as they are, no echo, no line discipline.
            let mut termios = rustix::termios::tcgetattr(&slave).unwrap();
            termios.make_raw();
            rustix::termios::tcsetattr(&slave, rustix::termios::OptionalActions::Now, &termios)
                .unwrap();
            (slave, master)
        }
    }
}

fn guard(args: &[&str], stdin: Stdio, stdout: Stdio, record: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .arg("stdio")
        .arg("--record")
        .arg(record)
        .args(args)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The guard's exit status within `limit`, or a panic naming what hung.
fn exit_within(child: &mut Child, limit: Duration, what: &str) -> Option<i32> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("{what}: the guard did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn record_in(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let _ = std::fs::remove_file(path);
    assert_eq!(text.lines().count(), 1, "{text}");
    serde_json::from_str(text.trim_end()).unwrap()
}

/// Reads from `from` on a thread of its own, handing each chunk on.
fn reader(from: OwnedFd) -> mpsc::Receiver<Vec<u8>> {
    let (send, chunks) = mpsc::channel();
    std::thread::spawn(move || {
        let mut from = File::from(from);
        let mut buf = vec![0; 65_536];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if send.send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
            }
        }
    });
    chunks
}

/// Exactly `n` bytes from `chunks` within [`REPLY_WAIT`].
fn reply(chunks: &mpsc::Receiver<Vec<u8>>, n: usize, what: &str) -> Vec<u8> {
    let started = Instant::now();
    let mut got = Vec::new();
    while got.len() < n {
        let left = REPLY_WAIT.saturating_sub(started.elapsed());
        match chunks.recv_timeout(left) {
            Ok(chunk) => got.extend_from_slice(&chunk),
            Err(_) => panic!(
                "{what}: {} of {n} bytes came back within {REPLY_WAIT:?}",
                got.len()
            ),
        }
    }
    got
}

/// The host ends its input: a socket is shut down for writing (a
/// half-close), a pipe's or a terminal's end is closed.
fn end_input(kind: Kind, host_end: OwnedFd) -> Option<OwnedFd> {
    if kind == Kind::Socket {
        rustix::net::shutdown(&host_end, Shutdown::Write).unwrap();
        Some(host_end)
    } else {
        drop(host_end);
        None
    }
}

const REQUEST: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
const SECOND: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"method\":\"tools/list\"}\n";

/// What the round trips send through `cat`: a notification and a
/// response (echoed, neither leaves a request pending).
const NOTE: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
const ANSWER: &[u8] =
    "{\"jsonrpc\":\"2.0\",\"id\":\"\u{e9}1\",\"result\":{\"content\":[]}}\r\n".as_bytes();

/// Two request/response round trips through `stdio [--mcp] -- cat` for
/// every pair of interactive kinds, then the host's end of input: each
/// reply comes back before the next request is sent, the guard exits 0,
/// and the record counts every byte each way.
#[test]
fn request_response_round_trips_work_with_every_interactive_descriptor_kind() {
    let kinds = [Kind::Pipe, Kind::Socket, Kind::Terminal];
    for input in kinds {
        for output in kinds {
            if input == Kind::Terminal && output == Kind::Terminal {
                continue;
            }
            for (mcp, bounded) in [(false, false), (true, false), (false, true), (true, true)] {
                // Bounded: the server cloned into a control group of its
                // own with a process limit (root, as in CI).
                if bounded && !rustix::process::geteuid().is_root() {
                    assert!(
                        std::env::var_os("CI").is_none(),
                        "bounded rows need root in CI"
                    );
                    continue;
                }
                let what =
                    format!("stdin {input:?}, stdout {output:?}, mcp {mcp}, bounded {bounded}");
                let record = temp_path(&format!("rt-{input:?}-{output:?}-{mcp}-{bounded}.jsonl"));
                let (guard_in, host_in) = ends(input, true);
                let (guard_out, host_out) = ends(output, false);
                let mut args: Vec<&str> = Vec::new();
                if mcp {
                    args.push("--mcp");
                }
                if bounded {
                    args.extend(["--pids-max", "16"]);
                }
                args.extend(["--", "cat"]);
                let mut child = guard(&args, guard_in.into(), guard_out.into(), &record);
                let replies = reader(host_out);
                let mut host_in = File::from(host_in);
                host_in.write_all(NOTE).unwrap();
                assert_eq!(reply(&replies, NOTE.len(), &what), NOTE, "{what}");
                host_in.write_all(ANSWER).unwrap();
                assert_eq!(reply(&replies, ANSWER.len(), &what), ANSWER, "{what}");
                let kept = end_input(input, host_in.into());
                let status = exit_within(&mut child, REPLY_WAIT, &what);
                drop(kept);
                assert_eq!(status, Some(0), "{what}");
                let record = record_in(&record);
                let both = (NOTE.len() + ANSWER.len()) as u64;
                assert_eq!(record["state"], "completed", "{what}");
                assert_eq!(record["stdin_bytes_forwarded"], both, "{what}");
                assert_eq!(record["stdout_bytes_forwarded"], both, "{what}");
                assert_eq!(record["stdin_bytes_undelivered"], 0, "{what}");
                assert_eq!(record["stdout_lines_diverted"], 0, "{what}");
                // Bounded or not, the tree is in a control group of its
                // own where one can be made (as root, as in CI).
                let tree_kill = if rustix::process::geteuid().is_root() {
                    "cgroup-v2"
                } else {
                    "process-group"
                };
                assert_eq!(record["tree_kill"], tree_kill, "{what}");
            }
        }
    }
}

/// Without `--mcp`, the pipes the guard splices into hold 1 MiB: the
/// server's stdin (it reads the size after its first line, which came
/// through the enlarged pipe) and the client's stdout pipe (read here);
/// with `--mcp`, which writes whole messages, the client's pipe is left
/// as it was.
#[test]
fn the_pipes_a_splice_fills_are_enlarged_to_one_mebibyte() {
    const F_GETPIPE_SZ: &str = "1032";
    let server = format!(
        "import fcntl, sys; sys.stdin.readline(); \
         print('{{\"jsonrpc\":\"2.0\",\"method\":\"size\",\"params\":%d}}' \
         % fcntl.fcntl(0, {F_GETPIPE_SZ}), flush=True)"
    );
    for mcp in [false, true] {
        let record = temp_path(&format!("pipe-size-{mcp}.jsonl"));
        let (guard_in, host_in) = rustix::pipe::pipe().unwrap();
        let (host_out, guard_out) = rustix::pipe::pipe().unwrap();
        let mut args = vec![];
        if mcp {
            args.push("--mcp");
        }
        args.extend(["--", "python3", "-c", &server]);
        let mut child = guard(&args, guard_in.into(), guard_out.into(), &record);
        let mut host_in = File::from(host_in);
        host_in
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"go\"}\n")
            .unwrap();
        let mut out = String::new();
        File::from(host_out.try_clone().unwrap())
            .read_to_string(&mut out)
            .unwrap();
        drop(host_in);
        assert_eq!(exit_within(&mut child, REPLY_WAIT, "pipe size"), Some(0));
        let sent: Value = serde_json::from_str(out.trim_end()).unwrap();
        let server_stdin = if mcp { 65_536 } else { 1 << 20 };
        assert_eq!(sent["params"], server_stdin, "mcp {mcp}: {out}");
        let client_stdout = rustix::pipe::fcntl_getpipe_size(&host_out).unwrap();
        assert_eq!(
            client_stdout,
            if mcp { 65_536 } else { 1 << 20 },
            "mcp {mcp}"
        );
        assert_eq!(record_in(&record)["state"], "completed", "mcp {mcp}");
    }
}

/// A regular file and `/dev/null` on either side: everything in the file
/// reaches the server, everything the server writes reaches the file.
#[test]
fn files_and_dev_null_work_on_either_side() {
    let requests = temp_path("requests.jsonl");
    std::fs::write(&requests, [NOTE, ANSWER].concat()).unwrap();
    let both = (NOTE.len() + ANSWER.len()) as u64;
    for mcp in [false, true] {
        let flags: &[&str] = if mcp {
            &["--mcp", "--", "cat"]
        } else {
            &["--", "cat"]
        };
        // A file in, a file out.
        let replies = temp_path(&format!("replies-{mcp}.jsonl"));
        let record = temp_path(&format!("files-{mcp}.jsonl"));
        let mut child = guard(
            flags,
            File::open(&requests).unwrap().into(),
            File::create(&replies).unwrap().into(),
            &record,
        );
        assert_eq!(exit_within(&mut child, REPLY_WAIT, "files"), Some(0));
        assert_eq!(std::fs::read(&replies).unwrap(), [NOTE, ANSWER].concat());
        let _ = std::fs::remove_file(&replies);
        let r = record_in(&record);
        assert_eq!(
            (
                r["stdin_bytes_forwarded"].as_u64(),
                r["stdout_bytes_forwarded"].as_u64()
            ),
            (Some(both), Some(both))
        );
        // /dev/null in: the server's input ends at once.
        let mut child = guard(flags, Stdio::null(), Stdio::piped(), &record);
        assert_eq!(exit_within(&mut child, REPLY_WAIT, "/dev/null in"), Some(0));
        let r = record_in(&record);
        assert_eq!(r["stdin_bytes_forwarded"], 0);
        assert_eq!(r["state"], "completed");
        // /dev/null out: what the server writes goes nowhere, counted.
        let mut child = guard(
            flags,
            File::open(&requests).unwrap().into(),
            Stdio::null(),
            &record,
        );
        assert_eq!(
            exit_within(&mut child, REPLY_WAIT, "/dev/null out"),
            Some(0)
        );
        let r = record_in(&record);
        assert_eq!(r["stdout_bytes_forwarded"], both);
    }
    let _ = std::fs::remove_file(&requests);

    // A file many times the server's pipe, in: moved without a copy, it
    // still arrives whole and in order while the pipe fills and empties.
    let big = temp_path("big.bin");
    let body: Vec<u8> = (0..9 * 1024 * 1024 + 7)
        .map(|i| (i * 31 % 251) as u8)
        .collect();
    std::fs::write(&big, &body).unwrap();
    let copied = temp_path("big-copied.bin");
    let record = temp_path("big.jsonl");
    let mut child = guard(
        &["--", "cat"],
        File::open(&big).unwrap().into(),
        File::create(&copied).unwrap().into(),
        &record,
    );
    assert_eq!(exit_within(&mut child, REPLY_WAIT, "a big file"), Some(0));
    assert!(std::fs::read(&copied).unwrap() == body, "the copy differs");
    let r = record_in(&record);
    assert_eq!(r["stdin_bytes_forwarded"], body.len() as u64);
    assert_eq!(r["stdout_bytes_forwarded"], body.len() as u64);
    assert_eq!(r["stdin_bytes_undelivered"], 0);
    for path in [big, copied] {
        let _ = std::fs::remove_file(path);
    }
}

/// A host whose end of the guard's stdin socket is non-blocking, and whose
/// share of the guard's descriptors is non-blocking too (the flag is the
/// open file's): the guard waits instead of taking `EAGAIN` for an end.
#[test]
fn non_blocking_descriptors_are_waited_on_not_taken_for_an_end() {
    let record = temp_path("nonblocking.jsonl");
    let (guard_in, host_in) = ends(Kind::Socket, true);
    let (guard_out, host_out) = ends(Kind::Socket, false);
    for fd in [&guard_in, &guard_out] {
        let flags = rustix::fs::fcntl_getfl(fd).unwrap();
        rustix::fs::fcntl_setfl(fd, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
    }
    let mut child = guard(
        &["--mcp", "--", "sh", "-c", "sleep 0.3; exec cat"],
        guard_in.into(),
        guard_out.into(),
        &record,
    );
    let replies = reader(host_out);
    let mut host_in = File::from(host_in);
    std::thread::sleep(Duration::from_millis(100));
    host_in.write_all(NOTE).unwrap();
    assert_eq!(reply(&replies, NOTE.len(), "non-blocking"), NOTE);
    drop(host_in);
    assert_eq!(exit_within(&mut child, REPLY_WAIT, "non-blocking"), Some(0));
    let r = record_in(&record);
    assert_eq!(r["stdin_bytes_forwarded"], NOTE.len());
}

/// A host that shuts its socket down for writing only (a half-close) gets
/// the MCP shutdown: the server that ignores its input's end is TERMed
/// after the stdin close grace. A host that shuts down its reading side
/// of the guard's stdout is gone: the guard stops the server.
#[test]
fn a_half_closed_socket_gets_the_mcp_shutdown_not_a_hang() {
    let record = temp_path("half-close.jsonl");
    let (guard_in, host_in) = ends(Kind::Socket, true);
    let (guard_out, host_out) = ends(Kind::Socket, false);
    let mut child = guard(
        &[
            "--mcp",
            "--stdin-close-grace-ms",
            "200",
            "--",
            "sleep",
            "30",
        ],
        guard_in.into(),
        guard_out.into(),
        &record,
    );
    let started = Instant::now();
    rustix::net::shutdown(&host_in, Shutdown::Write).unwrap();
    let status = exit_within(&mut child, Duration::from_secs(5), "write half-close");
    assert_eq!(status, Some(128 + 15));
    assert!(started.elapsed() < Duration::from_millis(200 + 1_500));
    let r = record_in(&record);
    assert_eq!(r["state"], "cancelled_after_dispatch");
    assert_eq!(r["cancel_reason"], "stdin_close_grace");
    drop((host_in, host_out));

    let (guard_in, host_in) = ends(Kind::Socket, true);
    let (guard_out, host_out) = ends(Kind::Socket, false);
    let mut child = guard(
        &[
            "--",
            "sh",
            "-c",
            "while :; do echo '{\"jsonrpc\":\"2.0\",\"method\":\"tick\"}'; sleep 0.02; done",
        ],
        guard_in.into(),
        guard_out.into(),
        &record,
    );
    let ticks = reader(host_out.try_clone().unwrap());
    let _ = reply(&ticks, 10, "ticks");
    rustix::net::shutdown(&host_out, Shutdown::Read).unwrap();
    let status = exit_within(&mut child, Duration::from_secs(10), "read half-close");
    // The server dies of the stop, or of writing to a stdout nobody reads
    // any more (SIGPIPE), whichever comes first.
    assert!(matches!(status, Some(141 | 143)), "{status:?}");
    let r = record_in(&record);
    assert_eq!(r["state"], "cancelled_after_dispatch");
    assert_eq!(r["cancel_reason"], "requested");
    drop((host_in, host_out));
}

/// A directory is refused at the start, in one line, with status 2, and
/// nothing runs. A descriptor that is not open at all reaches the guard as
/// `/dev/null` (the Rust runtime opens it so before `main`): the server
/// runs and its input ends at once.
#[test]
fn a_directory_is_refused_at_the_start_and_a_closed_descriptor_is_dev_null() {
    let why = ": give `spillguard stdio` a pipe, a socket, a file, a terminal or /dev/null\n";
    for (what, redirect, refused) in [
        ("stdin a directory", "0</", Some("stdin is a directory")),
        ("stdout a directory", "1</", Some("stdout is a directory")),
        ("stdin closed", "0<&-", None),
        ("stdout closed", "1>&-", None),
    ] {
        let marker = temp_path(&format!("marker-{}", redirect.len()));
        let _ = std::fs::remove_file(&marker);
        // The shell sets the descriptor up and execs the guard.
        let output = Command::new("sh")
            .arg("-c")
            .arg(format!("exec \"$0\" stdio -- touch \"$1\" {redirect}"))
            .arg(env!("CARGO_BIN_EXE_spillguard"))
            .arg(&marker)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        match refused {
            Some(message) => {
                assert_eq!(output.status.code(), Some(2), "{what}");
                assert_eq!(stderr, format!("spillguard: {message}{why}"), "{what}");
                assert!(!marker.exists(), "{what}: the server ran");
            }
            None => {
                assert_eq!(output.status.code(), Some(0), "{what}: {stderr}");
                assert!(marker.exists(), "{what}: the server did not run");
                let record: Value = serde_json::from_str(stderr.trim_end()).unwrap();
                assert_eq!(record["state"], "completed", "{what}");
            }
        }
        let _ = std::fs::remove_file(&marker);
    }
}

/// A server that never reads its stdin, fed 10 MB: the guard still sees
/// the client's end, runs the MCP shutdown, and exits within the stdin
/// close grace + the grace + 0.5 s of it (+ the stall rule's 1 s); every
/// byte is either forwarded into the server's pipe or counted as
/// undelivered. With a server that ignores TERM too, KILL ends it.
#[test]
fn a_server_that_stops_reading_is_still_shut_down_at_the_clients_end() {
    for (server, state, signals) in [
        ("exec sleep 30", "cancelled_after_dispatch", &["TERM"][..]),
        (
            "trap '' TERM; exec sleep 30",
            "killed",
            &["TERM", "KILL"][..],
        ),
    ] {
        let record = temp_path("wedged.jsonl");
        let (grace_in, grace) = (300_u64, 300_u64);
        let started = Instant::now();
        let output = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "head -c 10000000 /dev/zero | \"$0\" stdio --mcp --record \"$1\" \
                 --stdin-close-grace-ms {grace_in} --grace-ms {grace} -- sh -c \"$2\""
            ))
            .arg(env!("CARGO_BIN_EXE_spillguard"))
            .arg(&record)
            .arg(server)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let elapsed = started.elapsed();
        // The client (blocked on a full pipe) reaches its end once the
        // stall rule (1 s with the queue full) makes room; the shutdown
        // starts there.
        let limit = Duration::from_millis(1_000 + grace_in + grace + 500);
        assert!(elapsed < limit, "{server}: {elapsed:?} ≥ {limit:?}");
        let r = record_in(&record);
        assert_eq!(r["state"], state, "{server}");
        let sent: Vec<&str> = r["signals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["signal"].as_str().unwrap())
            .collect();
        assert_eq!(sent, signals);
        let forwarded = r["stdin_bytes_forwarded"].as_u64().unwrap();
        let undelivered = r["stdin_bytes_undelivered"].as_u64().unwrap();
        assert_eq!(forwarded + undelivered, 10_000_000, "{server}");
        assert!(
            undelivered >= 10_000_000 - (1 << 20),
            "{server}: {undelivered}"
        );
        assert!(output.status.code().is_some());
    }
}

/// A server that prints two lines that are not protocol and exits at once
/// has both in the stderr capture, every time (the call waits for the
/// stdout pump's end, which comes after what it diverted).
#[test]
fn no_diverted_line_is_lost_when_the_server_exits_at_once() {
    for run in 0..100 {
        let output = Command::new(env!("CARGO_BIN_EXE_spillguard"))
            .args([
                "stdio",
                "--mcp",
                "--",
                "sh",
                "-c",
                "echo starting; echo 'ready on stdio'",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "run {run}");
        assert_eq!(output.stdout, b"", "run {run}");
        let r: Value = serde_json::from_slice(output.stderr.trim_ascii_end()).unwrap();
        assert_eq!(
            (
                r["stdout_lines_diverted"].as_u64(),
                r["stdout_bytes_diverted"].as_u64()
            ),
            (Some(2), Some(24)),
            "run {run}"
        );
        assert_eq!(
            r["stderr_excerpt"], "starting\nready on stdio\n",
            "run {run}"
        );
        assert_eq!(r["stderr_bytes_seen"], 24, "run {run}");
    }
}

/// The server dies with requests pending: each gets a JSON-RPC error with
/// the exit status and the stderr excerpt (the traceback's last line in
/// it), answered requests get nothing more, and stdout ends after them;
/// within a second of the exit.
#[test]
fn requests_pending_when_the_server_dies_are_answered_with_its_stderr() {
    let record = temp_path("crash.jsonl");
    let (guard_in, host_in) = ends(Kind::Socket, true);
    let (guard_out, host_out) = ends(Kind::Socket, false);
    let server = "import sys\n\
                  sys.stdin.readline()\n\
                  print('{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}', flush=True)\n\
                  sys.stdin.readline(); sys.stdin.readline()\n\
                  sys.stderr.write('Traceback (most recent call last):\\n  File \"server.py\", line 9\\nKeyError: \\'DATABASE_URL\\'\\n')\n\
                  sys.exit(3)\n";
    let mut child = guard(
        &["--mcp", "--", "python3", "-c", server],
        guard_in.into(),
        guard_out.into(),
        &record,
    );
    let replies = reader(host_out);
    let mut host_in = File::from(host_in);
    host_in.write_all(REQUEST).unwrap();
    let first = reply(&replies, 37, "first answer");
    assert_eq!(first, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
    host_in.write_all(SECOND).unwrap();
    host_in
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}\n")
        .unwrap();
    host_in
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .unwrap();
    let mut answers = Vec::new();
    let started = Instant::now();
    while let Ok(chunk) = replies.recv_timeout(REPLY_WAIT) {
        answers.extend_from_slice(&chunk);
    }
    // The stream ended: the reader saw end-of-file.
    assert!(started.elapsed() < REPLY_WAIT);
    assert_eq!(exit_within(&mut child, REPLY_WAIT, "crash"), Some(3));
    let r = record_in(&record);
    let lines: Vec<Value> = answers
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{}", String::from_utf8_lossy(&answers));
    assert_eq!(lines[0]["id"], "two");
    assert_eq!(lines[1]["id"], 3);
    for line in &lines {
        let error = &line["error"];
        assert_eq!(error["code"], -32000);
        assert_eq!(
            error["message"],
            "MCP server exited with status 3 before answering"
        );
        assert_eq!(error["data"]["exit_status"], 3);
        assert_eq!(error["data"]["exit_signal"], Value::Null);
        assert_eq!(error["data"]["call_id"], r["call_id"]);
        assert_eq!(error["data"]["stderr_bytes_seen"], r["stderr_bytes_seen"]);
        assert_eq!(error["data"]["stderr_excerpt"], r["stderr_excerpt"]);
        let excerpt = error["data"]["stderr_excerpt"].as_str().unwrap();
        assert!(excerpt.ends_with("KeyError: 'DATABASE_URL'\n"), "{excerpt}");
        assert!(
            excerpt.starts_with("Traceback (most recent call last):\n"),
            "{excerpt}"
        );
    }
    // Within a second of the exit (the record's clock).
    let exited = r["exited_offset_us"].as_u64().unwrap();
    let done = r["timeline"].as_array().unwrap().last().unwrap()["offset_us"]
        .as_u64()
        .unwrap();
    assert!(done - exited < 1_000_000, "{done} - {exited}");
}

/// A server that cannot start: the client's first request is answered
/// with why, and the guard exits 127.
#[test]
fn a_server_that_cannot_start_answers_the_first_request_with_why() {
    let record = temp_path("not-started.jsonl");
    let (guard_in, host_in) = ends(Kind::Socket, true);
    let (guard_out, host_out) = ends(Kind::Socket, false);
    let mut host_in = File::from(host_in);
    host_in.write_all(REQUEST).unwrap();
    let mut child = guard(
        &["--mcp", "--", "/nonexistent/server"],
        guard_in.into(),
        guard_out.into(),
        &record,
    );
    let replies = reader(host_out);
    let mut answers = Vec::new();
    while let Ok(chunk) = replies.recv_timeout(REPLY_WAIT) {
        answers.extend_from_slice(&chunk);
    }
    assert_eq!(
        exit_within(&mut child, REPLY_WAIT, "not started"),
        Some(127)
    );
    let r = record_in(&record);
    let line: Value = serde_json::from_slice(answers.trim_ascii_end()).unwrap();
    assert_eq!(line["id"], 1);
    let failure = r["failure"].as_str().unwrap();
    assert_eq!(
        line["error"]["message"],
        format!("MCP server could not be started: {failure}")
    );
    assert_eq!(line["error"]["data"]["failure"], failure);
    assert_eq!(line["error"]["data"]["exit_status"], Value::Null);
    drop(host_in);
}

/// A busy server in a live session (it reads nothing for 1.5 s): the
/// requests beyond the queue's 4 MiB are answered at once as dropped, the
/// rest reach it whole once it reads, every request gets exactly one
/// answer, and the bytes dropped are the dropped requests' bytes.
#[test]
fn a_busy_server_loses_whole_requests_beyond_the_queue_each_answered_and_recovers() {
    let record = temp_path("busy.jsonl");
    let (guard_in, host_in) = ends(Kind::Socket, true);
    let (guard_out, host_out) = ends(Kind::Socket, false);
    let mut child = guard(
        &["--mcp", "--", "sh", "-c", "sleep 1.5; exec cat"],
        guard_in.into(),
        guard_out.into(),
        &record,
    );
    let replies = reader(host_out);
    let request = |id: usize| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"blob\":\"{}\"}}}}\n",
            "z".repeat(200_000)
        )
    };
    let mut host_in = File::from(host_in);
    let writer = std::thread::spawn(move || {
        for id in 1..=40 {
            host_in.write_all(request(id).as_bytes()).unwrap();
        }
        host_in
    });
    let mut answered = std::collections::BTreeMap::new();
    let mut buf = Vec::new();
    let started = Instant::now();
    while answered.len() < 40 && started.elapsed() < Duration::from_secs(30) {
        let Ok(chunk) = replies.recv_timeout(Duration::from_secs(30)) else {
            break;
        };
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let value: Value = serde_json::from_slice(&line).unwrap();
            let id = value["id"].as_u64().unwrap();
            let dropped = value["error"]["data"]["reason"] == "server_not_reading";
            assert!(
                answered.insert(id, dropped).is_none(),
                "id {id} answered twice"
            );
        }
    }
    let host_in = writer.join().unwrap();
    drop(host_in);
    assert_eq!(exit_within(&mut child, REPLY_WAIT, "busy"), Some(0));
    assert_eq!(answered.len(), 40, "{answered:?}");
    let dropped = answered.values().filter(|d| **d).count() as u64;
    assert!(dropped > 0 && dropped < 40, "{dropped} of 40 dropped");
    let bytes = |want: bool| -> u64 {
        answered
            .iter()
            .filter(|(_, dropped)| **dropped == want)
            .map(|(id, _)| request(*id as usize).len() as u64)
            .sum()
    };
    let r = record_in(&record);
    assert_eq!(r["stdin_bytes_undelivered"].as_u64(), Some(bytes(true)));
    assert_eq!(r["stdin_bytes_forwarded"].as_u64(), Some(bytes(false)));
}

/// A server that exits before the client said anything: the client's
/// first request, sent later, is still answered with the exit status,
/// whether the guard's ends are socketpairs (a Node host) or pipes (the
/// guard's input pump sees the server's stdin gone and must still read
/// that request).
#[test]
fn a_server_that_exits_before_the_first_request_answers_it_with_its_status() {
    for kind in [Kind::Socket, Kind::Pipe] {
        server_exits_before_the_first_request(kind);
    }
}

fn server_exits_before_the_first_request(kind: Kind) {
    let record = temp_path(&format!("early-exit-{kind:?}.jsonl"));
    let (guard_in, host_in) = ends(kind, true);
    let (guard_out, host_out) = ends(kind, false);
    let mut child = guard(
        &[
            "--mcp",
            "--",
            "sh",
            "-c",
            "echo 'config missing' >&2; exit 4",
        ],
        guard_in.into(),
        guard_out.into(),
        &record,
    );
    let replies = reader(host_out);
    std::thread::sleep(Duration::from_millis(300));
    let mut host_in = File::from(host_in);
    host_in.write_all(REQUEST).unwrap();
    let mut answers = Vec::new();
    while let Ok(chunk) = replies.recv_timeout(REPLY_WAIT) {
        answers.extend_from_slice(&chunk);
    }
    assert_eq!(exit_within(&mut child, REPLY_WAIT, "early exit"), Some(4));
    let line: Value = serde_json::from_slice(answers.trim_ascii_end()).unwrap();
    assert_eq!(line["id"], 1);
    assert_eq!(
        line["error"]["message"],
        "MCP server exited with status 4 before answering"
    );
    assert_eq!(line["error"]["data"]["stderr_excerpt"], "config missing\n");
    let _ = record_in(&record);
}

/// A server's last message without a newline reaches the client with
/// one, and answers its request: no error follows for it.
#[test]
fn a_last_message_without_its_newline_gets_one() {
    let record = temp_path("unterminated.jsonl");
    let (guard_in, host_in) = ends(Kind::Socket, true);
    let (guard_out, host_out) = ends(Kind::Socket, false);
    let mut child = guard(
        &[
            "--mcp",
            "--",
            "sh",
            "-c",
            "read line; printf '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}'",
        ],
        guard_in.into(),
        guard_out.into(),
        &record,
    );
    let replies = reader(host_out);
    let mut host_in = File::from(host_in);
    host_in.write_all(REQUEST).unwrap();
    let mut answers = Vec::new();
    while let Ok(chunk) = replies.recv_timeout(REPLY_WAIT) {
        answers.extend_from_slice(&chunk);
    }
    assert_eq!(exit_within(&mut child, REPLY_WAIT, "unterminated"), Some(0));
    assert_eq!(answers, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
    let r = record_in(&record);
    assert_eq!(r["stdout_lines_diverted"], 0);
    drop(host_in);
}

/// Without `--mcp`, a stdout pipe the host made non-blocking is waited on
/// (a splice that would block is retried), not taken for an end.
#[test]
fn a_non_blocking_stdout_pipe_is_waited_on_without_mcp() {
    let record = temp_path("nonblocking-pipe.jsonl");
    let (guard_out, host_out) = ends(Kind::Pipe, false);
    let flags = rustix::fs::fcntl_getfl(&guard_out).unwrap();
    rustix::fs::fcntl_setfl(&guard_out, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
    let mut child = guard(
        &["--", "head", "-c", "3000000", "/dev/zero"],
        Stdio::null(),
        guard_out.into(),
        &record,
    );
    // Read slowly at first, so that the pipe is full when the guard writes.
    std::thread::sleep(Duration::from_millis(300));
    let mut got = Vec::new();
    File::from(host_out).read_to_end(&mut got).unwrap();
    assert_eq!(
        exit_within(&mut child, REPLY_WAIT, "non-blocking pipe"),
        Some(0)
    );
    assert_eq!(got.len(), 3_000_000);
    assert_eq!(record_in(&record)["stdout_bytes_forwarded"], 3_000_000);
}

/// A server line 1 KiB over `--max-message-bytes`, then a message, with
/// the host's stdout a pipe and a socketpair (what Node and Bun hand their
/// children): the long line never reaches the host and is counted whole
/// as one diverted line in the stderr capture; the message after it, and
/// the round trip after that, pass byte for byte.
#[test]
fn a_line_over_the_maximum_is_diverted_whole_and_the_next_message_passes() {
    const MAX: usize = 65_536;
    const LONG: usize = MAX + 1024;
    let script = format!(
        "head -c {} /dev/zero | tr '\\0' x; echo; exec cat",
        LONG - 1
    );
    for output in [Kind::Pipe, Kind::Socket] {
        let what = format!("stdout {output:?}");
        let record = temp_path(&format!("over-max-{output:?}.jsonl"));
        let (guard_in, host_in) = ends(Kind::Pipe, true);
        let (guard_out, host_out) = ends(output, false);
        let max = MAX.to_string();
        let args = [
            "--mcp",
            "--max-message-bytes",
            &max,
            "--",
            "sh",
            "-c",
            &script,
        ];
        let mut child = guard(&args, guard_in.into(), guard_out.into(), &record);
        let replies = reader(host_out);
        let mut host_in = File::from(host_in);
        host_in.write_all(NOTE).unwrap();
        assert_eq!(reply(&replies, NOTE.len(), &what), NOTE, "{what}");
        host_in.write_all(ANSWER).unwrap();
        assert_eq!(reply(&replies, ANSWER.len(), &what), ANSWER, "{what}");
        drop(host_in);
        assert_eq!(
            exit_within(&mut child, REPLY_WAIT, &what),
            Some(0),
            "{what}"
        );
        let r = record_in(&record);
        let both = (NOTE.len() + ANSWER.len()) as u64;
        assert_eq!(r["state"], "completed", "{what}");
        assert_eq!(r["stdout_bytes_forwarded"], both, "{what}");
        assert_eq!(
            (&r["stdout_lines_diverted"], &r["stdout_bytes_diverted"]),
            (&Value::from(1), &Value::from(LONG)),
            "{what}"
        );
        assert_eq!(r["stderr_bytes_seen"], LONG as u64, "{what}");
        assert_eq!(r["stderr_bytes_retained"], 16_384, "{what}");
    }
}

/// With `--mcp --otel-file`, over pipes and over socketpairs (what Node
/// and Bun hosts give) on either side: a `tools/call` the server answers
/// with `isError` and a request it leaves when it ends are each one MCP
/// span, the first under the client's `traceparent`, each with the
/// error its end gave; the server's call span follows, and the replies
/// the host reads are the server's answer and the guard's.
#[test]
fn each_request_is_a_span_over_pipes_and_socketpairs() {
    const CALL: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"lookup\",\"_meta\":{\"traceparent\":\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}}}\n";
    const FAILED: &[u8] =
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[],\"isError\":true}}\n";
    const LEFT: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":\"left\",\"method\":\"ping\"}\n";
    // Answers the first request it reads with FAILED, reads the second,
    // then ends without answering it.
    let server = format!(
        "read -r first; printf '%s\\n' '{}'; read -r second; exit 3",
        std::str::from_utf8(FAILED).unwrap().trim_end()
    );
    for (input, output) in [
        (Kind::Pipe, Kind::Pipe),
        (Kind::Socket, Kind::Socket),
        (Kind::Pipe, Kind::Socket),
        (Kind::Socket, Kind::Pipe),
    ] {
        let what = format!("stdin {input:?}, stdout {output:?}");
        let record = temp_path(&format!("spans-{input:?}-{output:?}.jsonl"));
        let otel = temp_path(&format!("spans-{input:?}-{output:?}.otlp.jsonl"));
        let (guard_in, host_in) = ends(input, true);
        let (guard_out, host_out) = ends(output, false);
        let otel_arg = otel.to_str().unwrap();
        let mut child = guard(
            &["--mcp", "--otel-file", otel_arg, "--", "sh", "-c", &server],
            guard_in.into(),
            guard_out.into(),
            &record,
        );
        let replies = reader(host_out);
        let mut host_in = File::from(host_in);
        host_in.write_all(CALL).unwrap();
        assert_eq!(reply(&replies, FAILED.len(), &what), FAILED, "{what}");
        host_in.write_all(LEFT).unwrap();
        // The guard answers the request the server left.
        let mut gone = reply(&replies, 1, &what);
        while !gone.contains(&b'\n') {
            gone.extend(reply(&replies, 1, &what));
        }
        let answer: Value = serde_json::from_slice(gone.split(|&b| b == b'\n').next().unwrap())
            .unwrap_or_else(|e| panic!("{what}: {e}: {}", String::from_utf8_lossy(&gone)));
        assert_eq!(answer["id"], "left", "{what}");
        assert_eq!(answer["error"]["code"], -32000, "{what}");
        let kept = end_input(input, host_in.into());
        assert_eq!(
            exit_within(&mut child, REPLY_WAIT, &what),
            Some(3),
            "{what}"
        );
        drop(kept);
        let record = record_in(&record);
        assert_eq!(record["exit_status"], 3, "{what}");

        let text = std::fs::read_to_string(&otel).unwrap();
        let _ = std::fs::remove_file(&otel);
        let spans: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .flat_map(|request| {
                request["resourceSpans"][0]["scopeSpans"][0]["spans"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        let attribute = |span: &Value, key: &str| -> Value {
            span["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|kv| kv["key"] == key)
                .map_or(Value::Null, |kv| kv["value"]["stringValue"].clone())
        };
        let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
        // The two request spans as they ended, then the call's.
        assert_eq!(names, ["tools/call lookup", "ping", "sh"], "{what}");
        let (call, left, server) = (&spans[0], &spans[1], &spans[2]);
        assert_eq!(
            call["traceId"], "0af7651916cd43dd8448eb211c80319c",
            "{what}"
        );
        assert_eq!(call["parentSpanId"], "b7ad6b7169203331", "{what}");
        assert_eq!(attribute(call, "error.type"), "tool_error", "{what}");
        assert_eq!(attribute(call, "gen_ai.tool.name"), "lookup", "{what}");
        assert_eq!(attribute(call, "jsonrpc.request.id"), "7", "{what}");
        assert_eq!(left["parentSpanId"], "", "{what}");
        assert_eq!(attribute(left, "error.type"), "-32000", "{what}");
        assert_eq!(attribute(left, "jsonrpc.request.id"), "left", "{what}");
        for span in [call, left] {
            assert_eq!(
                attribute(span, "spillguard.call.id"),
                record["call_id"],
                "{what}"
            );
            assert_eq!(
                attribute(span, "mcp.session.id"),
                record["session_id"],
                "{what}"
            );
        }
        assert_eq!(server["spanId"], record["span_id"], "{what}");
        assert_eq!(attribute(server, "error.type"), "3", "{what}");
    }
}
