//! Streamed calls (the caller owns the helper's stdin and stdout) in
//! virtual time: the MCP stdio shutdown (close stdin, stdin_close_grace,
//! TERM, grace, KILL) on the input's end and on every stop, with exact
//! instants, states and counters.
#![allow(clippy::unwrap_used)]

mod sim;

use std::time::{Duration, SystemTime};

use sim::{Decision, OnTerm, Script, World, ms, spec};
use spillguard_core::Input;
use spillguard_core::{
    Action, Call, CallKind, CallRecord, CallSettings, CancelReason, Config, DisconnectPolicy,
    Diverted, ExitStatus, RetentionPool, Segment, Signal, SignalMark, State, StdoutLineGuard,
    StdoutMode, StreamEnd,
};

fn streamed(world: &World) -> CallSettings {
    CallSettings {
        stdout_mode: StdoutMode::Streamed,
        ..CallSettings::action(&world.config)
    }
}

/// An MCP server: runs until its stdin closes, then exits `code` after
/// `after`; `None` never exits on stdin's end.
fn server(on_stdin_close: Option<(Duration, i32)>, on_term: OnTerm) -> Script {
    Script {
        exit: None,
        on_stdin_close,
        on_term,
        ..Script::default()
    }
}

fn run(
    settings: impl FnOnce(&mut CallSettings),
    script: Script,
    lane: impl FnOnce(&mut sim::Lane),
) -> World {
    let mut world = World::new(Config::default());
    let mut s = streamed(&world);
    settings(&mut s);
    let i = world.add(
        spec("c_mcp", CallKind::Action),
        s,
        script,
        false,
        Decision::Never,
    );
    lane(&mut world.lanes[i]);
    world.drive_bounded(100_000);
    world
}

fn term_at(us: u64) -> SignalMark {
    SignalMark {
        signal: Signal::Term,
        offset_us: us,
    }
}

fn kill_at(us: u64) -> SignalMark {
    SignalMark {
        signal: Signal::Kill,
        offset_us: us,
    }
}

#[test]
fn the_input_ends_and_the_server_exits_within_the_stdin_close_grace() {
    let world = run(
        |_| {},
        server(Some((ms(100), 0)), OnTerm::Die(ms(1))),
        |l| l.input_end_at = Some(ms(1_000)),
    );
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::Completed);
    assert_eq!(r.stdout_mode, StdoutMode::Streamed);
    assert_eq!(r.exit_status, Some(0));
    assert_eq!(r.exited_offset_us, Some(1_100_000));
    assert_eq!(r.offset_of(State::Completed), Some(ms(1_100)));
    assert_eq!(r.signals, []);
    assert_eq!((r.cancel_reason, r.stream_end), (None, StreamEnd::Eof));
    assert_eq!(world.first(0, "CloseStdin"), Some(ms(1_000)));
    assert_eq!(world.count(0, "CloseStdin"), 1);
}

/// Input end at 1 s, no exit: TERM at 1 s + 2 s; it dies of it 1 ms later.
#[test]
fn no_exit_within_the_stdin_close_grace_brings_term() {
    let world = run(
        |_| {},
        server(None, OnTerm::Die(ms(1))),
        |l| l.input_end_at = Some(ms(1_000)),
    );
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!(r.cancel_reason, Some(CancelReason::StdinCloseGrace));
    assert_eq!(r.cancel_offset_us, Some(3_000_000));
    assert_eq!(r.signals, [term_at(3_000_000)]);
    assert_eq!((r.exit_status, r.exit_signal), (None, Some(15)));
    assert_eq!(r.offset_of(State::CancelledAfterDispatch), Some(ms(3_001)));
    assert_eq!(r.stream_end, StreamEnd::ReaderCompletedAfterCancel);
    assert_eq!(world.count(0, "CloseStdin"), 1);
}

/// Input end at 1 s, the server ignores stdin's end and TERM: TERM at
/// 3 s, KILL at 3 s + the 5 s grace.
#[test]
fn a_server_that_ignores_everything_is_killed_after_both_graces() {
    let world = run(
        |_| {},
        server(None, OnTerm::Ignore),
        |l| l.input_end_at = Some(ms(1_000)),
    );
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::Killed);
    assert_eq!(r.cancel_reason, Some(CancelReason::StdinCloseGrace));
    assert_eq!(r.signals, [term_at(3_000_000), kill_at(8_000_000)]);
    assert_eq!((r.exit_status, r.exit_signal), (None, Some(9)));
    assert_eq!(r.offset_of(State::Killed), Some(ms(8_000)));
    assert!(!world.lanes[0].helper.group_alive());
}

#[test]
fn the_stdin_close_grace_is_configurable() {
    let world = run(
        |s| {
            s.stdin_close_grace = ms(300);
            s.shutdown_grace = ms(700);
        },
        server(None, OnTerm::Ignore),
        |l| l.input_end_at = Some(ms(1_000)),
    );
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::Killed);
    assert_eq!(r.signals, [term_at(1_300_000), kill_at(2_000_000)]);
}

/// A cancel runs the same sequence first: stdin closed at once, and a
/// server that exits 0 within the grace still ends cancelled (the stop came
/// before the exit).
#[test]
fn a_cancel_closes_stdin_first_and_an_exit_within_the_grace_is_cancelled() {
    let world = run(
        |_| {},
        server(Some((ms(200), 0)), OnTerm::Die(ms(1))),
        |l| l.cancel_at = Some(ms(1_000)),
    );
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!(r.cancel_reason, Some(CancelReason::Requested));
    assert_eq!(r.exit_status, Some(0));
    assert_eq!(r.signals, []);
    assert_eq!(world.first(0, "CloseStdin"), Some(ms(1_000)));
    assert_eq!(r.offset_of(State::CancelledAfterDispatch), Some(ms(1_200)));
}

#[test]
fn a_cancel_of_a_server_that_stays_gets_term_after_the_stdin_close_grace() {
    let world = run(
        |_| {},
        server(None, OnTerm::Die(ms(5))),
        |l| l.cancel_at = Some(ms(1_000)),
    );
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!(r.cancel_reason, Some(CancelReason::Requested));
    assert_eq!(r.cancel_offset_us, Some(1_000_000));
    assert_eq!(r.signals, [term_at(3_000_000)]);
    assert_eq!(r.offset_of(State::CancelledAfterDispatch), Some(ms(3_005)));
}

/// The deadline at 500 ms: CloseStdin, TERM at 2.5 s, KILL at 7.5 s.
#[test]
fn a_deadline_runs_the_mcp_shutdown() {
    let world = run(
        |s| s.deadline = Some(ms(500)),
        server(None, OnTerm::Ignore),
        |_| {},
    );
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::Killed);
    assert_eq!(r.cancel_reason, Some(CancelReason::Deadline));
    assert_eq!(world.first(0, "CloseStdin"), Some(ms(500)));
    assert_eq!(r.signals, [term_at(2_500_000), kill_at(7_500_000)]);
    assert_eq!(r.offset_of(State::Killed), Some(ms(7_500)));
}

/// Host shutdown (or a signal to the guard) is a stop like any other.
#[test]
fn a_host_shutdown_runs_the_mcp_shutdown() {
    let mut world = World::new(Config::default());
    let s = streamed(&world);
    world.add(
        spec("c_shut", CallKind::Action),
        s,
        server(Some((ms(50), 0)), OnTerm::Die(ms(1))),
        false,
        Decision::Never,
    );
    world.step();
    let now = world.now;
    let _ = world.lanes[0]
        .call
        .handle(now, Input::Cancel(CancelReason::HostShutdown));
    world.drive_bounded(10_000);
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!(r.cancel_reason, Some(CancelReason::HostShutdown));
    assert_eq!(r.exit_status, Some(0));
    assert_eq!(r.signals, []);
    assert_eq!(
        r.offset_of(State::CancelledAfterDispatch).unwrap() - world.first(0, "CloseStdin").unwrap(),
        ms(50)
    );
}

/// A dropped stream is a client disconnect. Under `finish` the call runs to
/// its end, which for a server is the end of its input: the MCP close,
/// decided by the exit.
#[test]
fn a_disconnect_under_finish_ends_the_input() {
    let world = run(
        |_| {},
        server(Some((ms(100), 0)), OnTerm::Die(ms(1))),
        |l| l.disconnect_at = Some(ms(1_000)),
    );
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::Completed);
    assert!(r.client_disconnected);
    assert_eq!(r.on_client_disconnect, Some(DisconnectPolicy::Finish));
    assert_eq!(r.cancel_reason, None);
    assert_eq!(world.first(0, "CloseStdin"), Some(ms(1_000)));
    assert_eq!(r.offset_of(State::Completed), Some(ms(1_100)));
}

#[test]
fn a_disconnect_under_cancel_is_a_stop() {
    let world = run(
        |s| s.on_client_disconnect = DisconnectPolicy::Cancel,
        server(None, OnTerm::Die(ms(1))),
        |l| l.disconnect_at = Some(ms(1_000)),
    );
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!(r.cancel_reason, Some(CancelReason::ClientDisconnected));
    assert_eq!(r.signals, [term_at(3_000_000)]);
    assert_eq!(world.count(0, "CloseStdin"), 1);
}

/// An input that ends before dispatch (here while the card is up) is kept:
/// stdin is closed as soon as the helper runs.
#[test]
fn an_input_end_before_dispatch_closes_stdin_at_the_spawn() {
    let mut world = World::new(Config::default());
    let s = streamed(&world);
    world.add(
        spec("c_early", CallKind::Action),
        s,
        server(Some((ms(30), 0)), OnTerm::Die(ms(1))),
        true,
        Decision::Grant(ms(1_000)),
    );
    world.lanes[0].input_end_at = Some(ms(500));
    world.drive_bounded(10_000);
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::Completed);
    assert_eq!(world.lanes[0].spawned_at, Some(ms(1_000)));
    assert_eq!(world.first(0, "CloseStdin"), Some(ms(1_000)));
    assert_eq!(r.offset_of(State::Completed), Some(ms(1_030)));
}

/// A cancel during the stdin close grace that the input's end started
/// makes it a stop: the exit that follows within the grace is cancelled.
#[test]
fn a_cancel_during_the_stdin_close_grace_is_a_stop() {
    let world = run(
        |_| {},
        server(Some((ms(1_500), 0)), OnTerm::Die(ms(1))),
        |l| {
            l.input_end_at = Some(ms(1_000));
            l.cancel_at = Some(ms(2_000));
        },
    );
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!(r.cancel_reason, Some(CancelReason::Requested));
    assert_eq!(r.cancel_offset_us, Some(2_000_000));
    assert_eq!(r.signals, []);
    assert_eq!(r.offset_of(State::CancelledAfterDispatch), Some(ms(2_500)));
}

/// A dispatched streamed call, its actions carried out.
fn dispatched(settings: CallSettings, pool: &RetentionPool) -> (Call, std::time::Instant) {
    let world = World::new(Config::default());
    let t0 = world.epoch;
    let mut call = Call::new(
        spec("c_direct", CallKind::Action),
        settings,
        pool,
        t0,
        SystemTime::UNIX_EPOCH,
    );
    call.handle(
        t0,
        Input::Validated {
            needs_approval: false,
        },
    )
    .unwrap();
    while call.poll_action().is_some() {}
    call.handle(t0, Input::Spawned { pid: 4242 }).unwrap();
    while call.poll_action().is_some() {}
    (call, t0)
}

fn finished(call: &mut Call) -> Option<CallRecord> {
    let mut record = None;
    while let Some(action) = call.poll_action() {
        if let Action::Finished(outcome) = action {
            record = Some(outcome.record);
        }
    }
    record
}

/// The caller's stdout reader reports its end; the counters reach the
/// record under their JSON names.
#[test]
fn a_streamed_call_awaits_the_readers_end_and_counts_both_ways() {
    let pool = RetentionPool::unlimited();
    let settings = streamed(&World::new(Config::default()));
    let (mut call, t0) = dispatched(settings, &pool);
    let _ = call.handle(t0, Input::StdinForwarded(42));
    let _ = call.handle(t0, Input::StdoutForwarded(1_000));
    let _ = call.handle(t0, Input::StdinForwarded(8));
    let _ = call.handle(t0, Input::StdoutForwarded(24));
    let mut guard = StdoutLineGuard::new();
    guard
        .feed(
            b"{\"jsonrpc\":\"2.0\",\"id\":1}\nstarting up\n  \n",
            |segment| {
                let _ = match segment {
                    Segment::Forward(line) => {
                        call.handle(t0, Input::StdoutForwarded(line.bytes.len() as u64))
                    }
                    Segment::Divert(d) => call.handle(t0, Input::StdoutDiverted(d)),
                    Segment::DivertHeld(held) => {
                        call.handle(t0, Input::StdoutDiverted(held.as_diverted()))
                    }
                };
                Ok::<(), ()>(())
            },
        )
        .unwrap();
    let _ = call.handle(t0, Input::Stderr(b"warning\n"));
    call.handle(t0 + ms(5), Input::Exited(ExitStatus::code(0)))
        .unwrap();
    call.handle(t0 + ms(5), Input::StderrEof).unwrap();
    // The reader has not reported stdout's end: the call waits for it.
    assert_eq!(call.state(), State::Dispatched);
    call.handle(t0 + ms(6), Input::StdoutEof).unwrap();
    let r = finished(&mut call).unwrap();
    assert_eq!(r.state, State::Completed);
    assert_eq!(r.stream_end, StreamEnd::Eof);
    assert_eq!(r.offset_of(State::Completed), Some(ms(6)));
    assert_eq!(
        (r.stdin_bytes_forwarded, r.stdout_bytes_forwarded),
        (50, 1_049)
    );
    assert_eq!((r.stdout_lines_diverted, r.stdout_bytes_diverted), (2, 15));
    // Diverted bytes are stderr now: counted and retained with it.
    assert_eq!(r.stderr_bytes_seen, 15 + 8);
    assert_eq!((r.stdout_bytes_seen, r.stdout_truncated), (0, false));
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["stdout_mode"], "streamed");
    assert_eq!(json["stdout_bytes_forwarded"], 1_049);
    assert_eq!(json["stdin_bytes_forwarded"], 50);
    assert_eq!(json["stdout_lines_diverted"], 2);
    assert_eq!(json["stdout_bytes_diverted"], 15);
    // Counters after the end change nothing.
    let _ = call.handle(t0, Input::StdoutForwarded(5));
    let _ = call.handle(
        t0 + ms(7),
        Input::StdoutDiverted(Diverted {
            bytes: b"late\n",
            lines: 1,
        }),
    );
    assert_eq!(finished(&mut call), None);
}

#[test]
fn a_captured_call_says_so_and_its_input_end_only_closes_stdin() {
    let pool = RetentionPool::unlimited();
    let settings = CallSettings::action(&Config::default());
    let (mut call, t0) = dispatched(settings, &pool);
    let _ = call.handle(t0 + ms(1), Input::InputEnded);
    let mut closes = 0;
    while let Some(action) = call.poll_action() {
        assert!(matches!(action, Action::CloseStdin), "{action:?}");
        closes += 1;
    }
    assert_eq!(closes, 1);
    assert_eq!(call.poll_timeout(), None, "no stdin close grace");
    call.handle(t0 + ms(9), Input::Exited(ExitStatus::code(0)))
        .unwrap();
    call.handle(t0 + ms(9), Input::StdoutEof).unwrap();
    call.handle(t0 + ms(9), Input::StderrEof).unwrap();
    let r = finished(&mut call).unwrap();
    assert_eq!(
        (r.state, r.stdout_mode),
        (State::Completed, StdoutMode::Captured)
    );
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["stdout_mode"], "captured");
    assert_eq!(json["stdout_bytes_forwarded"], 0);
}

/// The stderr kill ceiling counts diverted stdout too: an MCP server
/// flooding stdout with logs is stopped like one flooding stderr.
#[test]
fn diverted_stdout_reaches_the_kill_ceiling() {
    let pool = RetentionPool::unlimited();
    let mut settings = streamed(&World::new(Config::default()));
    settings.stderr.kill_after_bytes = Some(100);
    let (mut call, t0) = dispatched(settings, &pool);
    let line = [b'x'; 101];
    let _ = call.handle(
        t0 + ms(3),
        Input::StdoutDiverted(Diverted {
            bytes: &line,
            lines: 1,
        }),
    );
    let actions: Vec<String> = std::iter::from_fn(|| call.poll_action())
        .map(|a| format!("{a:?}"))
        .collect();
    assert_eq!(actions, ["CloseStdin"]);
    assert_eq!(call.poll_timeout(), Some(t0 + ms(2_003)));
}

#[test]
fn the_stdin_close_grace_comes_from_the_config_and_is_validated_like_the_shutdown_grace() {
    assert_eq!(
        CallSettings::action(&Config::default()).stdin_close_grace,
        Duration::from_secs(2)
    );
    let config =
        Config::from_toml_str("[helper_output]\nstdin_close_grace_seconds = 0.5\n").unwrap();
    assert_eq!(config.stdin_close_grace_seconds, ms(500));
    assert_eq!(CallSettings::action(&config).stdin_close_grace, ms(500));
    for (value, error) in [
        (
            "601",
            "helper_output.stdin_close_grace_seconds: 601.000 s is longer than the maximum of 600 s",
        ),
        (
            "-1",
            "helper_output.stdin_close_grace_seconds: must not be negative",
        ),
        (
            "\"2s\"",
            "helper_output.stdin_close_grace_seconds: must be a number of seconds",
        ),
    ] {
        let text = format!("[helper_output]\nstdin_close_grace_seconds = {value}\n");
        assert_eq!(Config::from_toml_str(&text).unwrap_err().to_string(), error);
    }
}

#[test]
fn a_json_result_needs_a_captured_stdout() {
    use spillguard_core::{ResultChannel, Rule};

    let mut s = streamed(&World::new(Config::default()));
    s.stdout.budget = 0; // Unused when streamed.
    assert_eq!(s.validate(), Ok(()));
    s.result = ResultChannel::StdoutJson;
    let err = s.validate().unwrap_err();
    assert_eq!(err.field, "result");
    assert!(matches!(err.rule, Rule::Incompatible(_)));
    assert_eq!(
        err.to_string(),
        "call settings: result: stdout_json needs a captured stdout, not a streamed one"
    );
}

/// A caller that keeps stdout without reading it to its end holds the call
/// up no longer than the post-exit drain, and the record says the stream
/// was left open (as for a stream a descendant holds); a caller that went
/// away is not waited for at all.
#[test]
fn the_readers_end_is_awaited_no_longer_than_the_post_exit_drain() {
    let pool = RetentionPool::unlimited();
    let mut settings = streamed(&World::new(Config::default()));
    // (With `signal_descendants`, the default, the group then gets the
    // escapee's TERM: a descendant may be what holds stdout open.)
    settings.signal_descendants = false;
    let drain = settings.post_exit_drain;
    let (mut call, t0) = dispatched(settings, &pool);
    call.handle(t0 + ms(5), Input::Exited(ExitStatus::code(0)))
        .unwrap();
    call.handle(t0 + ms(5), Input::StderrEof).unwrap();
    assert_eq!(call.poll_timeout(), Some(t0 + ms(5) + drain));
    let _ = call.handle(t0 + ms(5) + drain, Input::Timeout);
    let r = finished(&mut call).unwrap();
    assert_eq!(r.state, State::Completed);
    assert_eq!(r.stream_end, StreamEnd::AbandonedOpen);
    assert_eq!(r.offset_of(State::Completed), Some(ms(5) + drain));

    let settings = streamed(&World::new(Config::default()));
    let (mut call, t0) = dispatched(settings, &pool);
    call.handle(t0 + ms(1), Input::StderrEof).unwrap();
    let _ = call.handle(t0 + ms(2), Input::ClientDisconnected);
    while call.poll_action().is_some() {}
    call.handle(t0 + ms(3), Input::Exited(ExitStatus::code(0)))
        .unwrap();
    let r = finished(&mut call).unwrap();
    assert_eq!(r.offset_of(State::Completed), Some(ms(3)));
    assert_eq!(r.stream_end, StreamEnd::Eof);
    assert!(r.client_disconnected);
}

/// Without the MCP shutdown (a call that only streams its stdout): the end
/// of the caller's input closes stdin and nothing more, so a helper that
/// runs on after it is neither timed nor signalled; its own exit ends the
/// call `completed`.
#[test]
fn without_the_mcp_shutdown_the_input_s_end_only_closes_stdin() {
    let world = run(
        |s| s.mcp_shutdown = false,
        Script {
            exit: Some((ms(5_000), 0)),
            ..server(None, OnTerm::Die(ms(1)))
        },
        |l| l.input_end_at = Some(ms(100)),
    );
    let r = world.lanes[0].record();
    assert_eq!(world.first(0, "CloseStdin"), Some(ms(100)));
    assert_eq!(r.signals, []);
    assert_eq!((r.state, r.exit_status), (State::Completed, Some(0)));
    assert_eq!(r.cancel_reason, None);
    assert_eq!(r.offset_of(State::Completed), Some(ms(5_000)));
}

/// Without the MCP shutdown a stop is SIGTERM at once, not after the
/// stdin close grace.
#[test]
fn without_the_mcp_shutdown_a_cancel_is_term_at_once() {
    let world = run(
        |s| s.mcp_shutdown = false,
        server(None, OnTerm::Die(ms(5))),
        |l| l.cancel_at = Some(ms(1_000)),
    );
    let r = world.lanes[0].record();
    assert_eq!(r.state, State::CancelledAfterDispatch);
    assert_eq!(r.cancel_reason, Some(CancelReason::Requested));
    assert_eq!(r.signals, [term_at(1_000_000)]);
    assert_eq!(r.offset_of(State::CancelledAfterDispatch), Some(ms(1_005)));
}
