//! Streamed calls (an MCP stdio server's shape): the caller writes the
//! helper's stdin and reads its stdout; stderr stays captured; the input's
//! end, a stop and a disconnect run the stdio shutdown.
#![allow(clippy::unwrap_used)]

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use spillguard_core::{CancelReason, Exit, Signal, State, StdoutMode};
use spillguard_host::{HelperCommand, HostOptions};

use super::{assert_group_gone, poll_until, records_of, signals, timed_check_turn, wait};
use crate::engine::{CallUnderTest, HostUnderTest, request};

/// Bytes each way go straight through, are counted exactly, and stderr is
/// captured as for any call; dropping the writer ends the input and `cat`
/// exits 0 on its own: `completed`, no signal.
pub fn a_streamed_call_forwards_each_way_and_counts_the_bytes<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("echo diag 1>&2; exec cat");
    let call = host.launch(request(command).streamed().into_request());
    let (mut stdin, mut stdout) = call.streams().unwrap();
    stdin.write_all(b"{\"id\":1}\n").unwrap();
    let mut echoed = [0; 9];
    stdout.read_exact(&mut echoed).unwrap();
    assert_eq!(&echoed, b"{\"id\":1}\n");
    drop(stdin);
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, b"");
    let outcome = wait(call);
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed);
    assert_eq!(outcome.exit(), Exit::Code(0));
    assert_eq!(record.stdout_mode, StdoutMode::Streamed);
    assert_eq!(record.stdin_bytes_forwarded, 9);
    assert_eq!(record.stdout_bytes_forwarded, 9);
    assert_eq!(record.stdout_bytes_seen, 0);
    assert_eq!(record.stderr_bytes_seen, 5);
    assert_eq!(outcome.agent_excerpt(), "diag\n");
    assert_eq!(signals(record), []);
    assert!(call_streams_are_given_once(&host));
    assert_group_gone(record.pgid.unwrap());
}

/// The call waits for the caller's reader to reach stdout's end: what a
/// helper wrote just before it exited, read by the caller after the exit,
/// is in the record, and the call ends when the reader does.
pub fn a_streamed_call_counts_stdout_read_after_the_helpers_exit<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let command = HelperCommand::shell_script("printf 'last words\\n'; echo diag 1>&2");
    let call = host.launch(request(command).streamed().into_request());
    let (stdin, mut stdout) = call.streams().unwrap();
    drop(stdin);
    // The helper has exited (and its stderr ended) well before this read.
    std::thread::sleep(Duration::from_millis(100));
    let mut read = Vec::new();
    stdout.read_to_end(&mut read).unwrap();
    assert_eq!(read, b"last words\n");
    drop(stdout);
    let outcome = wait(call);
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.stdout_bytes_forwarded, 11);
    assert_eq!(record.stream_end, spillguard_core::StreamEnd::Eof);
    assert_eq!(outcome.agent_excerpt(), "diag\n");
}

/// A second `streams()` on the same call is refused, and a captured call
/// has none.
fn call_streams_are_given_once<H: HostUnderTest>(host: &H) -> bool {
    let call = host.launch(request(HelperCommand::new("cat")).streamed().into_request());
    let first = call.streams().unwrap();
    let again = call.streams().err().map(|e| e.kind());
    drop(first);
    let captured = host.launch(request(HelperCommand::new("true")).into_request());
    let none = captured.streams().err().map(|e| e.kind());
    let ended = wait(call).record.state;
    let _ = wait(captured);
    again == Some(ErrorKind::AlreadyExists)
        && none == Some(ErrorKind::Unsupported)
        && ended == State::Completed
}

/// A helper that keeps running after its input ended gets TERM once
/// `stdin_close_grace` is over, then KILL after the grace if it ignores
/// TERM: `killed`, reason `stdin_close_grace`, signals TERM then KILL.
pub fn a_streamed_helper_that_outlives_its_input_is_termed_then_killed<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = timed_check_turn();
    let host = host(HostOptions {
        stdin_close_grace: Some(Duration::from_millis(200)),
        shutdown_grace: Some(Duration::from_millis(300)),
        ..HostOptions::default()
    });
    let command = HelperCommand::shell_script("trap '' TERM; sleep 30");
    let call = host.launch(request(command).streamed().into_request());
    let (stdin, stdout) = call.streams().unwrap();
    let ended = Instant::now();
    drop(stdin);
    let outcome = wait(call);
    let took = ended.elapsed();
    let record = &outcome.record;
    assert_eq!(record.state, State::Killed);
    assert_eq!(record.cancel_reason, Some(CancelReason::StdinCloseGrace));
    assert_eq!(signals(record), [Signal::Term, Signal::Kill]);
    assert_eq!(outcome.exit(), Exit::Signal(9));
    // 200 ms to TERM, 300 ms more to KILL.
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(stdout);
    assert_group_gone(record.pgid.unwrap());
}

/// A cancel closes the helper's stdin under the caller's writer (a later
/// write fails with `BrokenPipe`); `cat` reads end-of-file and exits 0
/// within the stdin close grace, so no signal is needed, and the stop
/// came first: `cancelled_after_dispatch`.
pub fn a_cancel_closes_stdin_under_the_callers_writer<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let call = host.launch(request(HelperCommand::new("cat")).streamed().into_request());
    let (mut stdin, mut stdout) = call.streams().unwrap();
    stdin.write_all(b"one\n").unwrap();
    let mut echoed = [0; 4];
    stdout.read_exact(&mut echoed).unwrap();
    call.cancel();
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, b"");
    let refused = stdin.write(b"two\n").unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::BrokenPipe);
    let outcome = wait(call);
    let record = &outcome.record;
    assert_eq!(record.state, State::CancelledAfterDispatch);
    assert_eq!(record.cancel_reason, Some(CancelReason::Requested));
    assert_eq!(outcome.exit(), Exit::Code(0));
    assert_eq!(signals(record), []);
    assert_eq!(
        (record.stdin_bytes_forwarded, record.stdout_bytes_forwarded),
        (4, 4)
    );
}

/// Dropping the handle alone changes nothing while the streams are held
/// (the caller is still there); dropping both streams as well is the
/// client disconnect: under the default `finish` policy the input ends,
/// `cat` exits 0 and the call is recorded `completed`, once.
pub fn dropping_the_handle_and_both_streams_is_a_client_disconnect<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let call = host.launch(
        request(HelperCommand::new("cat"))
            .call_id("c_stream_drop")
            .streamed()
            .into_request(),
    );
    let (mut stdin, mut stdout) = call.streams().unwrap();
    drop(call);
    std::thread::sleep(Duration::from_millis(100));
    stdin.write_all(b"still\n").unwrap();
    let mut echoed = [0; 6];
    stdout.read_exact(&mut echoed).unwrap();
    assert_eq!(&echoed, b"still\n");
    assert_eq!(records_of(&host, "c_stream_drop"), 0);
    drop((stdin, stdout));
    poll_until(Duration::from_secs(10), "the record", || {
        records_of(&host, "c_stream_drop") == 1
    });
    let record = host
        .finished_records()
        .into_iter()
        .find(|r| r.call_id == "c_stream_drop")
        .unwrap();
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.exit_status, Some(0));
    assert_eq!(record.stdin_bytes_forwarded, 6);
    assert_eq!(record.stdout_bytes_forwarded, 6);
    assert_group_gone(record.pgid.unwrap());
}

/// Each stream set on its own: a piped stdout while the caller writes
/// stdin and then closes it ends as any helper does, not as an MCP
/// server: the helper runs on past the 2 s stdin close grace and exits 0
/// by itself, no signal; with stdin null or bytes, the caller's writer
/// is closed from the start and its drop ends nothing; a stream that
/// cannot be what was asked is refused before anything runs.
pub fn stdin_and_stdout_are_set_each_on_its_own<H: HostUnderTest>(host: fn(HostOptions) -> H) {
    use spillguard_host::Stdio;
    let host = host(HostOptions::default());

    // stdout piped, stdin piped and closed at once: no stop follows.
    let script = "cat >/dev/null; sleep 2.3; echo done";
    let started = Instant::now();
    let call = host.launch(
        request(HelperCommand::shell_script(script))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .into_request(),
    );
    let (stdin, mut stdout) = call.streams().unwrap();
    drop(stdin);
    let mut out = Vec::new();
    stdout.read_to_end(&mut out).unwrap();
    assert_eq!(out, b"done\n");
    let outcome = wait(call);
    assert!(started.elapsed() >= Duration::from_millis(2_300));
    let record = &outcome.record;
    assert_eq!(
        (record.state, outcome.exit()),
        (State::Completed, Exit::Code(0))
    );
    assert_eq!((record.cancel_reason, signals(record)), (None, vec![]));
    assert_eq!(record.stdout_mode, StdoutMode::Streamed);
    assert_eq!(record.stdout_bytes_forwarded, 5);

    // stdout piped, stdin bytes: the helper reads them; the caller's
    // writer is closed from the start.
    let call = host.launch(
        request(HelperCommand::new("cat"))
            .stdin(Stdio::bytes(b"given\n".to_vec()))
            .stdout(Stdio::piped())
            .into_request(),
    );
    let (mut stdin, mut stdout) = call.streams().unwrap();
    assert_eq!(
        stdin.write_all(b"more").unwrap_err().kind(),
        ErrorKind::BrokenPipe
    );
    drop(stdin);
    let mut out = Vec::new();
    stdout.read_to_end(&mut out).unwrap();
    assert_eq!(out, b"given\n");
    let outcome = wait(call);
    assert_eq!(
        (outcome.record.state, outcome.exit()),
        (State::Completed, Exit::Code(0))
    );
    assert_eq!(outcome.record.stdout_bytes_forwarded, 6);

    // stdout piped, stdin null (the default): end-of-file at once.
    let call = host.launch(
        request(HelperCommand::shell_script("cat; echo after"))
            .stdout(Stdio::piped())
            .into_request(),
    );
    let (_stdin, mut stdout) = call.streams().unwrap();
    let mut out = Vec::new();
    stdout.read_to_end(&mut out).unwrap();
    assert_eq!(out, b"after\n");
    assert_eq!(wait(call).record.state, State::Completed);

    // What a stream cannot be: refused, nothing runs.
    for (builder, why) in [
        (
            request(HelperCommand::new("cat")).stdin(Stdio::piped()),
            "stdin(Stdio::piped()) needs stdout(Stdio::piped())",
        ),
        (
            request(HelperCommand::new("cat")).stdout(Stdio::null()),
            "stdout is captured or piped",
        ),
        (
            request(HelperCommand::new("cat")).stdin(Stdio::captured()),
            "stdin cannot be captured",
        ),
    ] {
        let outcome = wait(host.launch(builder.into_request()));
        assert_eq!(outcome.record.state, State::FailedBeforeDispatch);
        assert_eq!(outcome.record.pid, None);
        let failure = outcome.record.failure.clone().unwrap_or_default();
        assert!(failure.contains(why), "{failure}");
    }
}
