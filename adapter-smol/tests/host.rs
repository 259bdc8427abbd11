//! What is particular to the smol adapter, against real processes: the
//! command after async-process's conversion, dropped futures, stdin closed
//! mid-write, a late approval racing the end, and `Send` futures. The
//! behaviour every adapter shares is checked once, on every runtime, by
//! `spillguard-tests` (`behaviour_suite!`).
#![allow(clippy::unwrap_used)]

// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;

use std::future::Future;
use std::time::{Duration, Instant};

use futures_lite::future;
use spillguard_smol::proto::{
    CallError, CallRecord, CancelReason, Config, DisconnectPolicy, Signal, State,
};
use spillguard_smol::{Approval, CallHandle, HelperCommand, Host, HostOptions};
use support::{
    assert_group_gone, become_subreaper, check_finished_after_a_drop, check_stopped_by_a_drop,
};

const MS: Duration = Duration::from_millis(1);

fn host(options: HostOptions) -> Host {
    Host::new(Config::default(), options).unwrap()
}

/// Polls `done` every 5 ms without blocking the executor; panics after 10 s.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        smol::Timer::after(5 * MS).await;
    }
}

async fn wait_for_state(call: &CallHandle, state: State) {
    until(state.as_str(), || call.state() == state).await;
}

fn records_of(host: &Host, call_id: &str) -> Vec<CallRecord> {
    host.finished_records()
        .into_iter()
        .filter(|r| r.call_id == call_id)
        .collect()
}

#[test]
fn the_helper_leads_its_own_group_with_null_stdin_and_piped_output() {
    // async-process's conversion from a std command resets the stdio to
    // "inherit"; the adapter sets it again. The helper reports what it got.
    let host = host(HostOptions::default());
    let script = "cut -d' ' -f5 /proc/$$/stat; for fd in 0 1 2; do readlink /proc/$$/fd/$fd; done";
    let outcome = smol::block_on(
        host.call(HelperCommand::shell_script(script))
            .call_id("c_group")
            .start()
            .wait(),
    );
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed);
    let stdout = String::from_utf8(outcome.stdout.to_vec()).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(lines[0].parse::<u32>().ok(), record.pid);
    assert_eq!(record.pgid, record.pid);
    assert_ne!(
        record.pgid,
        Some(rustix::process::getpgrp().as_raw_pid() as u32)
    );
    assert_eq!(lines[1], "/dev/null");
    assert!(lines[2].starts_with("pipe:["), "{}", lines[2]);
    assert!(lines[3].starts_with("pipe:["), "{}", lines[3]);
    assert_ne!(lines[2], lines[3]);
}

/// The record of `call_id`, once the host is idle.
fn record_of(host: &Host, call_id: &str) -> CallRecord {
    smol::block_on(host.wait_idle());
    records_of(host, call_id).remove(0)
}

/// Gives up on `run` (a `run()` or `wait()` future): it loses
/// `future::or` against a 50 ms timer and is dropped, with the handle in
/// it.
fn time_out(run: impl Future<Output = spillguard_smol::proto::Outcome>) {
    let timer = async {
        smol::Timer::after(50 * MS).await;
        None
    };
    assert!(smol::block_on(future::or(async { Some(run.await) }, timer)).is_none());
}

#[test]
fn dropping_the_wait_future_under_the_cancel_policy_stops_the_helper() {
    let host = host(HostOptions {
        on_client_disconnect: Some(DisconnectPolicy::Cancel),
        ..HostOptions::default()
    });
    let start = |script| host.shell(script).call_id("c_smol_cancel").start();
    let give_up = |call: CallHandle| time_out(call.wait());
    check_stopped_by_a_drop("c_smol_cancel", start, give_up, || {
        record_of(&host, "c_smol_cancel")
    });
}

#[test]
fn a_shutdown_future_dropped_after_its_first_poll_still_stops_every_call() {
    become_subreaper();
    let host = host(HostOptions::default());
    let call = host
        .call(HelperCommand::new("sleep").arg("30"))
        .call_id("c_shutdown_dropped")
        .start();
    let outcome = smol::block_on(async {
        wait_for_state(&call, State::Dispatched).await;
        let mut shutdown = Box::pin(host.shutdown_and_wait(Duration::from_secs(10)));
        // The first poll sends the cancels. On a busy machine the owner may
        // finish the call before that poll returns, so either answer is
        // fine: what matters is what happens once the future is dropped.
        let _ = future::poll_once(&mut shutdown).await;
        drop(shutdown);
        call.wait().await
    });
    assert_eq!(outcome.record.state, State::CancelledAfterDispatch);
    assert_eq!(
        outcome.record.cancel_reason,
        Some(CancelReason::HostShutdown)
    );
    assert_eq!(outcome.record.exit_signal, Some(15));
    assert_eq!(records_of(&host, "c_shutdown_dropped").len(), 1);
    assert_group_gone(outcome.record.pgid.unwrap());
}

#[test]
fn a_stop_closes_stdin_even_while_a_write_waits_on_a_full_pipe() {
    become_subreaper();
    let host = host(HostOptions {
        deadline: Some(200 * MS),
        shutdown_grace: Some(Duration::from_secs(3)),
        ..HostOptions::default()
    });
    // 8 MiB for a helper that ignores TERM and reads only after the stop:
    // the writer waits on a full pipe. Closed at the stop, `wc` sees the
    // end of its input and exits 0 within the grace; left open, it would
    // wait for more and need KILL.
    let command = HelperCommand::shell_script("trap '' TERM; sleep 0.5; wc -c")
        .stdin_bytes(vec![b'i'; 8 << 20]);
    let outcome = smol::block_on(host.call(command).call_id("c_stdin_stop").start().wait());
    let record = &outcome.record;
    assert_eq!(record.state, State::CancelledAfterDispatch);
    assert_eq!(record.cancel_reason, Some(CancelReason::Deadline));
    assert_eq!((record.exit_status, record.exit_signal), (Some(0), None));
    let signals: Vec<Signal> = record.signals.iter().map(|s| s.signal).collect();
    assert_eq!(signals, [Signal::Term]);
    let read: u64 = String::from_utf8_lossy(&outcome.stdout.to_vec())
        .trim()
        .parse()
        .unwrap();
    assert!(read > 0 && read < 8 << 20, "{read}");
    assert_group_gone(record.pgid.unwrap());
}

#[test]
fn an_approval_racing_the_end_of_a_call_is_refused_not_left_waiting() {
    let host = host(HostOptions::default());
    smol::block_on(async {
        for i in 0..50 {
            let call = host
                .call(HelperCommand::new("true"))
                .call_id(format!("c_race_{i}"))
                .start();
            loop {
                let finished = call.is_finished();
                let answer = future::or(async { Some(call.approve().await) }, async {
                    smol::Timer::after(Duration::from_secs(5)).await;
                    None
                })
                .await;
                match answer {
                    Some(Err(CallError::InvalidTransition { input, .. })) => {
                        assert_eq!(input, "approval_granted");
                    }
                    other => panic!("call {i}: {other:?}"),
                }
                if finished {
                    break;
                }
            }
            assert_eq!(call.wait().await.record.state, State::Completed);
        }
    });
}

#[test]
fn the_public_futures_can_be_spawned_on_a_multi_threaded_executor() {
    fn send<F: Future + Send>(f: F) -> F {
        f
    }
    let host = host(HostOptions::default());
    let call = host
        .call(HelperCommand::new("true"))
        .call_id("c_send")
        .start();
    let outcome = smol::block_on(async {
        let _ = send(call.wait_card(MS)).await;
        let _ = send(call.approve()).await;
        let _ = send(call.deny()).await;
        smol::spawn(send(call.wait())).await
    });
    assert_eq!(outcome.record.state, State::Completed);
    let report = smol::block_on(smol::spawn(send(async move {
        host.shutdown_and_wait(Duration::from_secs(1)).await
    })));
    assert_eq!((report.finished, report.unfinished), (0, 0));
}

/// `wait_finished` returns when the call ends and leaves the outcome in
/// the handle; `wait_idle` returns when the last live call has ended.
#[test]
fn wait_finished_and_wait_idle_return_at_each_end() {
    let host = host(HostOptions::default());
    let card = |id: &str, timeout: Duration| {
        host.call(HelperCommand::new("true"))
            .call_id(id)
            .approval(Approval::Required)
            .approval_timeout(timeout)
            .start()
    };
    smol::block_on(async {
        let started = Instant::now();
        let short = card("c_short", 200 * MS);
        let long = card("c_long", 2000 * MS);
        short.wait_finished().await;
        let first = started.elapsed();
        assert!(short.is_finished());
        assert!(!long.is_finished(), "{first:?}");
        assert_eq!(host.live_calls(), 1);
        short.wait_finished().await;
        let outcome = short.try_outcome().unwrap();
        assert_eq!(outcome.record.state, State::ApprovalExpired);
        assert!(first >= 200 * MS && first < 2000 * MS, "{first:?}");

        host.wait_idle().await;
        let last = started.elapsed();
        assert_eq!(host.live_calls(), 0);
        assert_eq!(
            long.try_outcome().unwrap().record.state,
            State::ApprovalExpired
        );
        assert!(last >= 2000 * MS && last < 5000 * MS, "{last:?}");
        host.wait_idle().await;
    });
}

/// With `kill_on_drop(true)`, dropping the handle, or a `run()` future
/// that loses `future::or` against a timer, stops the helper and its
/// grandchild.
#[test]
fn kill_on_drop_stops_the_group_when_the_handle_or_the_run_future_is_dropped() {
    let host = host(HostOptions::default());
    let start = |s| support::shell_call!(host, s, "c_drop", true).start();
    check_stopped_by_a_drop("c_drop", start, drop, || record_of(&host, "c_drop"));
    let run = |s| support::shell_call!(host, s, "c_run", true).run();
    check_stopped_by_a_drop("c_run", run, time_out, || record_of(&host, "c_run"));
}

#[test]
fn without_kill_on_drop_the_finish_policy_lets_the_helper_end() {
    let host = host(HostOptions::default());
    let run = |s| support::shell_call!(host, s, "c_smol_finish", false).run();
    check_finished_after_a_drop("c_smol_finish", run, || record_of(&host, "c_smol_finish"));
}
