//! What a restarting guard keeps of the host's MCP session and how a new
//! server takes it: the exact bytes replayed, the answers swallowed, the
//! notifications the host gets, and the refusals (another protocol
//! version, an initialize too long to keep, no answer within the wait).
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use spillguard_core::jsonrpc::{
    MAX_KEPT_BYTES, MAX_KEPT_LINE, MessageInfo, MessageScanner, REPLAY_WAIT, RawValue, ServerLine,
    SessionReplay,
};
/// The tests' time origin, read once; every later instant is an offset.
#[allow(clippy::disallowed_methods)]
fn later(ms: u64) -> Instant {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(Instant::now) + Duration::from_millis(ms)
}

fn info(line: &[u8]) -> MessageInfo {
    let mut scanner = MessageScanner::new();
    scanner.feed(line);
    scanner.finish().unwrap()
}

const INIT: &[u8] = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":"h"}}}"#;
const INIT_OK: &[u8] = br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"resources":{"subscribe":true}}}}"#;

/// A session: initialize answered, initialized, a subscribe that
/// succeeded, a setLevel that failed.
fn session() -> SessionReplay {
    let mut r = SessionReplay::new();
    // Split anywhere: lines are whole when kept.
    let client = [
        INIT,
        b"\n",
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        b"\n",
        br#"{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":"file:///a"}}"#,
        b"\n",
        br#"{"jsonrpc":"2.0","id":7,"method":"logging/setLevel","params":{"level":"debug"}}"#,
        b"\n",
    ]
    .concat();
    for piece in client.chunks(5) {
        r.handle_client(piece);
    }
    assert_eq!(
        r.handle_server(INIT_OK, &info(INIT_OK)),
        ServerLine::Forward
    );
    let ok = br#"{"jsonrpc":"2.0","id":"s","result":{}}"#;
    assert_eq!(r.handle_server(ok, &info(ok)), ServerLine::Forward);
    let failed = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#;
    assert_eq!(r.handle_server(failed, &info(failed)), ServerLine::Forward);
    r
}

#[test]
fn a_new_server_gets_the_session_and_its_answers_are_swallowed() {
    let mut r = session();
    let t0 = later(0);
    assert_eq!(r.begin(t0).unwrap(), [INIT, b"\n"].concat());
    assert!(r.is_replaying());
    assert_eq!(r.poll_timeout(), Some(t0 + REPLAY_WAIT));
    let verdict = r.handle_server(INIT_OK, &info(INIT_OK));
    assert_eq!(
        verdict,
        ServerLine::Ready {
            to_server: [
                &br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#[..],
                b"\n",
                br#"{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":"file:///a"}}"#,
                b"\n",
            ]
            .concat(),
            to_host: [
                &br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#[..],
                b"\n",
                br#"{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}"#,
                b"\n",
            ]
            .concat(),
        }
    );
    assert!(!r.is_replaying());
    let again = br#"{"jsonrpc":"2.0","id":"s","result":{}}"#;
    assert_eq!(r.handle_server(again, &info(again)), ServerLine::Swallow);
    // Only once: the host's own later answer with that id goes through.
    assert_eq!(r.handle_server(again, &info(again)), ServerLine::Forward);
}

#[test]
fn another_protocol_version_refuses_the_replay() {
    let mut r = session();
    r.begin(later(0)).unwrap();
    let other =
        br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2024-11-05","capabilities":{}}}"#;
    assert_eq!(
        r.handle_server(other, &info(other)),
        ServerLine::Refused(
            "the restarted server answered initialize with protocolVersion \"2024-11-05\", not \"2025-06-18\"".into()
        )
    );
}

#[test]
fn an_initialize_longer_than_kept_cannot_be_replayed() {
    let mut r = SessionReplay::new();
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"pad":"{}"}}}}"#,
        "x".repeat(MAX_KEPT_LINE)
    );
    r.handle_client(long.as_bytes());
    r.handle_client(b"\n");
    assert_eq!(
        r.begin(later(0)),
        Err("the host's initialize request is longer than 65536 bytes and was not kept".into())
    );
    // A host that never initialized has nothing to replay.
    assert_eq!(SessionReplay::new().begin(later(0)), Ok(Vec::new()));
}

#[test]
fn a_new_server_that_does_not_answer_initialize_is_refused_at_the_wait() {
    let mut r = session();
    let t0 = later(0);
    r.begin(t0).unwrap();
    assert_eq!(
        r.handle_timeout(t0 + REPLAY_WAIT - Duration::from_millis(1)),
        None
    );
    assert_eq!(
        r.handle_timeout(t0 + REPLAY_WAIT),
        Some("the restarted server did not answer initialize within 10 s".into())
    );
    assert_eq!((r.is_replaying(), r.poll_timeout()), (false, None));
    // A late answer is the host's to judge: nothing swallows it.
    assert_eq!(
        r.handle_server(INIT_OK, &info(INIT_OK)),
        ServerLine::Forward
    );
}

#[test]
fn a_host_whose_initialize_was_never_answered_asks_again_itself() {
    let mut r = SessionReplay::new();
    r.handle_client(INIT);
    r.handle_client(b"\n");
    // The server died before answering: nothing to replay.
    assert_eq!(r.begin(later(0)), Ok(Vec::new()));
    assert!(!r.is_replaying());
    // The host asks again (another id); the new server's answer is its.
    let again = br#"{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}"#;
    r.handle_client(again);
    r.handle_client(b"\n");
    let answer =
        br#"{"jsonrpc":"2.0","id":9,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}"#;
    assert_eq!(r.handle_server(answer, &info(answer)), ServerLine::Forward);
    // A later restart replays the initialize that was answered.
    assert_eq!(r.begin(later(1)), Ok([&again[..], b"\n"].concat()));
}

/// A session with `read` listed read-only and the calls `ids` of it
/// sent (none answered).
fn with_read_calls(ids: &[u32]) -> SessionReplay {
    let mut r = SessionReplay::with_retries();
    r.handle_client(INIT);
    r.handle_client(b"\n");
    let _ = r.handle_server(INIT_OK, &info(INIT_OK));
    r.handle_client(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n");
    let list = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read","annotations":{"readOnlyHint":true}}]}}"#;
    let _ = r.handle_server(list, &info(list));
    for id in ids {
        r.handle_client(
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read"}}}}"#
            )
            .as_bytes(),
        );
        r.handle_client(b"\n");
    }
    r
}

fn ids(infos: &[MessageInfo]) -> Vec<String> {
    infos
        .iter()
        .map(|i| String::from_utf8(i.id.as_ref().unwrap().as_bytes().to_vec()).unwrap())
        .collect()
}

#[test]
fn an_initialize_answered_with_an_error_is_no_session_and_the_next_one_is_kept() {
    let mut r = SessionReplay::new();
    r.handle_client(INIT);
    r.handle_client(b"\n");
    let refused = br#"{"jsonrpc":"2.0","id":0,"error":{"code":-32602,"message":"unsupported"}}"#;
    assert_eq!(
        r.handle_server(refused, &info(refused)),
        ServerLine::Forward
    );
    let again = br#"{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#;
    r.handle_client(again);
    r.handle_client(b"\n");
    let answer =
        br#"{"jsonrpc":"2.0","id":9,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}"#;
    assert_eq!(r.handle_server(answer, &info(answer)), ServerLine::Forward);
    // The initialize replayed is the one that was answered with a result.
    assert_eq!(r.begin(later(0)), Ok([&again[..], b"\n"].concat()));
}

#[test]
fn a_call_still_queued_at_a_crash_is_not_sent_again_but_stays_retriable() {
    let mut r = with_read_calls(&[2, 3]);
    // Call 3 was still queued whole: the next server gets it from the
    // queue, not a second time from the retries.
    let queued = RawValue::new(b"3").unwrap();
    assert_eq!(ids(&r.handle_server_gone([&queued])), ["2"]);
    r.begin(later(0)).unwrap();
    let ServerLine::Ready { to_server, .. } = r.handle_server(INIT_OK, &info(INIT_OK)) else {
        panic!("no replay");
    };
    assert_eq!(to_server.iter().filter(|&&b| b == b'\n').count(), 1);
    // Delivered then in flight at the next crash: sent again once.
    assert_eq!(ids(&r.handle_server_gone([])), ["3"]);
}

#[test]
fn a_call_chosen_at_a_crash_and_not_sent_before_the_next_crash_stays_pending_once() {
    let mut r = with_read_calls(&[2]);
    assert_eq!(ids(&r.handle_server_gone([])), ["2"]);
    // The next server dies before it answered initialize: call 2 was
    // never sent, it stays pending (not answered with the crash error),
    // and the server after it gets it once.
    r.begin(later(0)).unwrap();
    assert_eq!(ids(&r.handle_server_gone([])), ["2"]);
    r.begin(later(1)).unwrap();
    let ServerLine::Ready { to_server, .. } = r.handle_server(INIT_OK, &info(INIT_OK)) else {
        panic!("no replay");
    };
    assert_eq!(to_server.iter().filter(|&&b| b == b'\n').count(), 1);
}

#[test]
fn a_call_the_guard_answered_or_the_host_cancelled_is_not_sent_again() {
    let mut r = with_read_calls(&[2, 3]);
    r.forget_call(&RawValue::new(b"2").unwrap());
    r.handle_client(
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#,
    );
    r.handle_client(b"\n");
    assert_eq!(r.handle_server_gone([]).len(), 0);
}

#[test]
fn an_idempotent_call_in_flight_is_sent_once_more_after_the_replay() {
    let mut r = SessionReplay::with_retries();
    r.handle_client(INIT);
    r.handle_client(b"\n");
    assert_eq!(
        r.handle_server(INIT_OK, &info(INIT_OK)),
        ServerLine::Forward
    );
    r.handle_client(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n");
    let list = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read","annotations":{"readOnlyHint":true}},{"name":"same","annotations":{"idempotentHint":true}},{"name":"write","annotations":{"idempotentHint":false}}]}}"#;
    assert_eq!(r.handle_server(list, &info(list)), ServerLine::Forward);
    let call = |id: u32, name: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}"}}}}"#
        )
    };
    let (read, same, write, done) = (
        call(2, "read"),
        call(3, "same"),
        call(4, "write"),
        call(5, "read"),
    );
    for line in [&read, &same, &write, &done] {
        r.handle_client(format!("{line}\n").as_bytes());
    }
    let answer = br#"{"jsonrpc":"2.0","id":5,"result":{}}"#;
    assert_eq!(r.handle_server(answer, &info(answer)), ServerLine::Forward);
    // The crash: calls 2 and 3 go again; 4 is answered with the error, 5
    // was answered.
    let again: Vec<String> = r
        .handle_server_gone([])
        .iter()
        .map(|i| String::from_utf8(i.id.as_ref().unwrap().as_bytes().to_vec()).unwrap())
        .collect();
    assert_eq!(again, ["2", "3"]);
    r.begin(later(0)).unwrap();
    let ServerLine::Ready { to_server, .. } = r.handle_server(INIT_OK, &info(INIT_OK)) else {
        panic!("no replay");
    };
    assert_eq!(
        String::from_utf8(to_server).unwrap(),
        format!("{read}\n{same}\n")
    );
    // Once only: in flight at a second crash, they are not sent again.
    assert_eq!(r.handle_server_gone([]).len(), 0);
    // Without retries, nothing is sent again.
    let mut plain = SessionReplay::new();
    plain.handle_client(format!("{read}\n").as_bytes());
    assert_eq!(plain.handle_server_gone([]).len(), 0);
}

#[test]
fn an_unsubscribe_ends_a_kept_subscription_and_the_last_level_is_kept() {
    let mut r = SessionReplay::new();
    r.handle_client(INIT);
    r.handle_client(b"\n");
    assert_eq!(
        r.handle_server(INIT_OK, &info(INIT_OK)),
        ServerLine::Forward
    );
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///a"}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"file:///b"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"debug"}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"file:///a"}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"error"}}"#,
    ];
    for (id, line) in (1..).zip(lines) {
        r.handle_client(format!("{line}\n").as_bytes());
        let ok = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        assert_eq!(
            r.handle_server(ok.as_bytes(), &info(ok.as_bytes())),
            ServerLine::Forward
        );
    }
    r.begin(later(0)).unwrap();
    let ServerLine::Ready { to_server, .. } = r.handle_server(INIT_OK, &info(INIT_OK)) else {
        panic!("no replay");
    };
    assert_eq!(
        String::from_utf8(to_server).unwrap(),
        format!("{}\n{}\n", lines[1], lines[4])
    );
}

#[test]
fn what_is_kept_is_bounded_in_total_and_past_the_bound_the_replay_says_so() {
    // Calls kept for a retry: up to the bound, then not kept (answered
    // with the crash error as any other call).
    let pad = "x".repeat(60_000);
    let mut r = with_read_calls(&[]);
    let calls = MAX_KEPT_BYTES / 60_000 + 10;
    for id in 0..calls {
        r.handle_client(
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read","arguments":{{"p":"{pad}"}}}}}}"#
            )
            .as_bytes(),
        );
        r.handle_client(b"\n");
    }
    let again = r.handle_server_gone([]);
    let line = 60_000 + 80;
    assert!(again.len() < calls, "{} of {calls}", again.len());
    assert!(again.len() >= MAX_KEPT_BYTES / line - 2, "{}", again.len());
    // Subscriptions: past the bound, the session cannot be replayed whole,
    // and the restart is refused, saying why.
    let mut r = SessionReplay::new();
    r.handle_client(INIT);
    r.handle_client(b"\n");
    let _ = r.handle_server(INIT_OK, &info(INIT_OK));
    for id in 0..(MAX_KEPT_BYTES / 60_000 + 2) {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"resources/subscribe","params":{{"uri":"file:///{id}/{pad}"}}}}"#
        );
        r.handle_client(format!("{line}\n").as_bytes());
        let ok = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        let _ = r.handle_server(ok.as_bytes(), &info(ok.as_bytes()));
    }
    assert_eq!(
        r.begin(later(0)),
        Err(format!(
            "the host's subscriptions and log level passed {MAX_KEPT_BYTES} bytes and were not all kept"
        ))
    );
}
