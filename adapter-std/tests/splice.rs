//! `HelperStdin::splice_from` and `HelperStdout::splice_to` with every kind
//! of descriptor a caller may hand them: a stream socketpair (what Node and
//! Bun give their children), a pipe, a regular file. Each request goes
//! through `cat` and comes back before the next is sent: a splice that
//! held the helper's pipe while it waited for the socket would stall the
//! first one.
#![allow(clippy::unwrap_used)]

mod support;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc;
use std::time::Duration;

use rustix::net::{AddressFamily, SocketFlags, SocketType};
use spillguard_std::proto::{Config, State};
use spillguard_std::{Host, HostOptions};

const WAIT: Duration = Duration::from_secs(10);

fn socketpair() -> (OwnedFd, OwnedFd) {
    rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .unwrap()
}

fn pipe() -> (OwnedFd, OwnedFd) {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap()
}

/// Runs `f` on a thread and gives its result within [`WAIT`], or panics
/// naming `what`.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, got) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(f());
    });
    got.recv_timeout(WAIT)
        .unwrap_or_else(|_| panic!("{what}: no result within {WAIT:?}"))
}

/// A pump thread splices from `ours` into `cat` until its end, as a
/// caller forwarding a client would; the test writes each request to
/// `theirs` and waits for its echo before sending the next.
fn round_trips_from(kind: &str, (ours, theirs): (OwnedFd, OwnedFd)) {
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    let call = host.command("cat").streamed().start();
    let (mut stdin, mut stdout) = call.streams().unwrap();
    let pump = std::thread::spawn(move || {
        let mut moved = 0;
        loop {
            match stdin.splice_from(ours.as_fd(), 1 << 20) {
                Ok(0) => break,
                Ok(n) => moved += n,
                Err(error) => panic!("{error}"),
            }
        }
        stdin.close();
        moved
    });
    let mut theirs = File::from(theirs);
    let mut total = 0;
    for request in [
        &b"{\"id\":1}\n"[..],
        b"{\"id\":2,\"method\":\"tools/list\"}\n",
    ] {
        theirs.write_all(request).unwrap();
        let n = request.len();
        let (echoed, back) = within(&format!("{kind}: the echo"), move || {
            let mut echoed = vec![0; n];
            stdout.read_exact(&mut echoed).unwrap();
            (echoed, stdout)
        });
        stdout = back;
        assert_eq!(echoed, request, "{kind}");
        total += n;
    }
    drop(theirs);
    assert_eq!(within(kind, move || pump.join().unwrap()), total, "{kind}");
    drop(stdout);
    let record = call.wait().record;
    assert_eq!(record.state, State::Completed, "{kind}");
    assert_eq!(record.stdin_bytes_forwarded, total as u64, "{kind}");
    assert_eq!(record.stdout_bytes_forwarded, total as u64, "{kind}");
}

#[test]
fn splice_from_a_socketpair_moves_each_request_at_once() {
    round_trips_from("socketpair", socketpair());
}

#[test]
fn splice_from_a_pipe_moves_each_request_at_once() {
    round_trips_from("pipe", pipe());
}

#[test]
fn splice_from_a_file_copies_it_whole() {
    let path = support::temp_path("splice-from.jsonl");
    std::fs::write(&path, b"{\"id\":1}\n{\"id\":2}\n").unwrap();
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    let call = host.command("cat").streamed().start();
    let (mut stdin, mut stdout) = call.streams().unwrap();
    let file = File::open(&path).unwrap();
    let mut moved = 0;
    loop {
        match stdin.splice_from(file.as_fd(), 4) {
            Ok(0) => break,
            Ok(n) => moved += n,
            Err(error) => panic!("{error}"),
        }
    }
    assert_eq!(moved, 18);
    stdin.close();
    let mut echoed = Vec::new();
    stdout.read_to_end(&mut echoed).unwrap();
    assert_eq!(echoed, b"{\"id\":1}\n{\"id\":2}\n");
    let _ = std::fs::remove_file(&path);
    assert_eq!(call.wait().record.stdin_bytes_forwarded, 18);
}

/// The helper's stdout spliced into a socketpair and into a pipe: the
/// bytes arrive as the helper writes them.
#[test]
fn splice_to_a_socketpair_or_a_pipe_moves_what_the_helper_writes() {
    for (kind, (theirs, ours)) in [("socketpair", socketpair()), ("pipe", pipe())] {
        let host = Host::new(Config::default(), HostOptions::default()).unwrap();
        let call = host.command("cat").streamed().start();
        let (mut stdin, mut stdout) = call.streams().unwrap();
        let mut theirs = File::from(theirs);
        stdin.write_all(b"{\"id\":7}\n").unwrap();
        let to = ours.try_clone().unwrap();
        let (moved, back) = within(&format!("{kind}: splice_to"), move || {
            let moved = stdout.splice_to(to.as_fd(), 1 << 20).unwrap();
            (moved, stdout)
        });
        assert_eq!(moved, 9, "{kind}");
        let mut got = [0; 9];
        theirs.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"{\"id\":7}\n", "{kind}");
        stdin.close();
        let mut stdout = back;
        assert_eq!(
            stdout.splice_to(ours.as_fd(), 1 << 20).unwrap(),
            0,
            "{kind}"
        );
        drop(stdout);
        let record = call.wait().record;
        assert_eq!(record.stdout_bytes_forwarded, 9, "{kind}");
    }
}
