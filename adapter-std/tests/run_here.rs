//! `run()`, `output()` and `status()` run the call on the caller's own
//! thread: no worker takes the call and hands it back. What reaches a call
//! on a worker reaches this one too: the host's shutdown from another
//! thread cancels it, and its record is the host's like any other.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use spillguard_std::proto::{Config, State};
use spillguard_std::{Host, HostOptions};

#[test]
fn a_call_run_here_is_cancelled_by_the_hosts_shutdown_from_another_thread() {
    let host = Arc::new(Host::new(Config::default(), HostOptions::default()).unwrap());
    let stopper = {
        let host = host.clone();
        std::thread::spawn(move || {
            // Until the call is live: it runs on the test's thread.
            let start = Instant::now();
            while host.live_calls() == 0 {
                assert!(start.elapsed() < Duration::from_secs(10), "never live");
                std::thread::sleep(Duration::from_millis(5));
            }
            host.shutdown()
        })
    };
    let start = Instant::now();
    let outcome = host
        .command("sleep")
        .arg("30")
        .call_id("c_run_here")
        .action("test.sleep")
        .run();
    let took = start.elapsed();
    assert_eq!(
        stopper.join().unwrap(),
        1,
        "one live call was asked to stop"
    );
    assert_eq!(outcome.record.state, State::CancelledAfterDispatch);
    assert_eq!(outcome.record.call_id, "c_run_here");
    // SIGTERM ends `sleep` at once: far below its 30 s and the 5 s grace.
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(host.live_calls(), 0);
    let kept = host.finished_records();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].state, State::CancelledAfterDispatch);
}

#[test]
fn calls_run_here_one_after_another_each_get_their_own_record() {
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    for i in 0..20u8 {
        let output = host
            .command("sh")
            .arg("-c")
            .arg(format!("printf {i}; exit {}", i % 3))
            .call_id(format!("c_{i}"))
            .action("test.sh")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(i32::from(i % 3)));
        assert_eq!(output.stdout, i.to_string().into_bytes());
        assert_eq!(output.record().call_id, format!("c_{i}"));
    }
    assert_eq!(host.finished_records().len(), 20);
    assert_eq!(host.live_calls(), 0);
}

#[test]
fn a_piped_stream_of_a_call_run_to_its_end_is_captured_or_at_its_end() {
    use spillguard_std::Stdio;
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    // `cat` would wait forever on a stdin nobody writes: it is at its end,
    // and what it prints is captured, as `Command::output` does.
    let output = host
        .command("sh")
        .arg("-c")
        .arg("cat; printf done")
        .call_id("c_piped")
        .action("test.cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(output.stdout, b"done");
    assert_eq!(output.status.code(), Some(0));
    let outcome = host
        .command("sh")
        .arg("-c")
        .arg("cat; printf streamed")
        .call_id("c_streamed")
        .action("test.cat")
        .streamed()
        .run();
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.exit_status, Some(0));
}
