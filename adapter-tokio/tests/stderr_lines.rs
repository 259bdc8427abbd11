//! `CallHandle::stderr_lines`: the helper's stderr as lines, as they
//! come, bounded: a full queue drops and counts, never slowing the drain
//! (every byte is still counted in the record).
#![allow(clippy::unwrap_used)]

use spillguard_tokio::proto::{Config, State};
use spillguard_tokio::{Host, HostOptions};

const FLOOD_LINES: u64 = 500_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_come_whole_then_end_and_a_flood_drops_and_counts() {
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    let call = host
        .command("sh")
        .args([
            "-c",
            "sleep 0.2; echo one >&2; printf 'tw' >&2; echo o >&2; printf three >&2",
        ])
        .start();
    let mut lines = call.stderr_lines(16).unwrap();
    assert!(call.stderr_lines(16).is_err(), "asked for once");
    let mut got = Vec::new();
    while let Some(line) = lines.next_line().await {
        got.push(line);
    }
    assert_eq!(got, ["one", "two", "three"]);
    assert_eq!(lines.dropped(), 0);
    let outcome = call.wait().await;
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.stderr_bytes_seen, 13);

    // 500,000 lines of 100 bytes, none read until the end: 100 kept, the
    // rest dropped and counted, every byte in the record.
    let script = format!(
        "sleep 0.2; python3 -c \"import sys; sys.stderr.write(('x'*99+'\\n')*{FLOOD_LINES})\""
    );
    let call = host.command("sh").args(["-c", &script]).start();
    let mut lines = call.stderr_lines(100).unwrap();
    let outcome = call.wait().await;
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.stderr_bytes_seen, FLOOD_LINES * 100);
    let mut kept = 0;
    while let Some(line) = lines.next_line().await {
        assert_eq!(line.len(), 99);
        kept += 1;
    }
    assert_eq!((kept, lines.dropped()), (100, FLOOD_LINES - 100));
}
