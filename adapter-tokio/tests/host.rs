//! What is particular to the tokio adapter, against real processes: the
//! command after tokio's conversion, a dropped `wait` future, the runtime
//! captured at `Host::new` or given to `Host::with_runtime`, a runtime shut
//! down under a call, and `Send` handles. The behaviour every adapter shares is checked once, on every
//! runtime, by `spillguard-tests` (`behaviour_suite!`).
#![allow(clippy::unwrap_used)]

// tests/support links to the std adapter's test helpers: one source, whose
// files each package carries.
mod support;
mod tokio_support;

use spillguard_tokio::Approval;
use std::time::Duration;

use spillguard_tokio::proto::{CallRecord, Config, DisconnectPolicy, State, StreamEnd};
use spillguard_tokio::{CallHandle, HelperCommand, Host, HostError, HostOptions};
use support::{assert_group_gone, become_subreaper, temp_path};
use support::{check_finished_after_a_drop, check_stopped_by_a_drop};
use tokio_support::{poll_until, wait_for_state};

const MS: Duration = Duration::from_millis(1);

fn host(options: HostOptions) -> Host {
    Host::new(Config::default(), options).unwrap()
}

#[tokio::test]
async fn the_command_keeps_its_own_process_group_pipes_and_stdin() {
    let host = host(HostOptions::default());
    // Field 5 of /proc/PID/stat is the process group; `$$` is the helper
    // itself (the shell given the script).
    let script = "read -r pid comm state ppid pgrp rest < /proc/$$/stat; \
                  echo \"$pid $pgrp\"; wc -c 1>&2";
    let outcome = host
        .call(HelperCommand::shell_script(script))
        .call_id("c_group")
        .start()
        .wait()
        .await;
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed);
    let pid = record.pid.unwrap();
    assert_eq!(
        String::from_utf8(outcome.stdout.to_vec()).unwrap(),
        format!("{pid} {pid}\n"),
        "the helper's pgid is its pid"
    );
    // stdin is /dev/null unless bytes are given: `wc -c` counts 0.
    assert_eq!(outcome.stderr.render().trim(), "0");

    let fed = host
        .call(
            HelperCommand::new("wc")
                .arg("-c")
                .stdin_bytes(vec![b'i'; 1 << 20]),
        )
        .call_id("c_fed")
        .start()
        .wait()
        .await;
    assert_eq!(fed.record.state, State::Completed);
    assert_eq!(
        String::from_utf8_lossy(&fed.stdout.to_vec()).trim(),
        "1048576"
    );
}

/// A host on a runtime of its own with worker threads: its owners run
/// there while the test's thread polls `/proc` and blocks on futures.
fn host_on_workers(options: HostOptions) -> (tokio::runtime::Runtime, Host) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let host = Host::with_runtime(Config::default(), options, runtime.handle().clone());
    (runtime, host.unwrap())
}

/// The record of `call_id` once `host`, on `runtime`, is idle.
fn kept_record(runtime: &tokio::runtime::Runtime, host: &Host, call_id: &str) -> CallRecord {
    runtime.block_on(host.wait_idle());
    let records = host.finished_records();
    records.into_iter().find(|r| r.call_id == call_id).unwrap()
}

#[test]
fn a_wait_future_given_up_is_a_disconnect_and_the_call_still_ends() {
    let (runtime, host) = host_on_workers(HostOptions {
        on_client_disconnect: Some(DisconnectPolicy::Cancel),
        ..HostOptions::default()
    });
    let start = |script| host.shell(script).call_id("c_gave_up").start();
    // The caller's own timeout drops the `wait` future, and the handle in it.
    let give_up = |call: CallHandle| {
        let gave_up = runtime.block_on(async { tokio::time::timeout(50 * MS, call.wait()).await });
        assert!(gave_up.is_err());
    };
    check_stopped_by_a_drop("c_gave_up", start, give_up, || {
        let record = kept_record(&runtime, &host, "c_gave_up");
        assert_eq!(record.stream_end, StreamEnd::ReaderCompletedAfterCancel);
        record
    });
}

#[test]
fn a_host_cannot_be_made_outside_a_runtime() {
    let made = Host::new(Config::default(), HostOptions::default());
    let error = made.unwrap_err();
    assert!(matches!(error, HostError::NoRuntime { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "no runtime to run the calls on: Host::new was called outside a tokio runtime: \
         call it from within one, or pass a runtime handle to Host::with_runtime"
    );
}

#[test]
fn a_host_made_with_a_runtime_handle_runs_calls_started_from_outside_it() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let host = Host::with_runtime(
        Config::default(),
        HostOptions::default(),
        runtime.handle().clone(),
    )
    .unwrap();
    // Started from a plain thread; the owner runs on the runtime's worker.
    let call = host
        .call(HelperCommand::new("true"))
        .call_id("c_outside")
        .start();
    let outcome = runtime.block_on(call.wait());
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.exit_status, Some(0));
}

#[test]
fn an_invalid_config_names_its_field() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = Config {
        stderr_agent_excerpt_bytes: 1 << 20,
        ..Config::default()
    };
    let made = Host::with_runtime(config, HostOptions::default(), runtime.handle().clone());
    let error = made.unwrap_err();
    let HostError::InvalidConfig(invalid) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(invalid.field, "stderr_agent_excerpt_bytes");
    assert!(
        error
            .to_string()
            .starts_with("invalid configuration: helper_output.stderr_agent_excerpt_bytes: "),
        "{error}"
    );
}

#[test]
fn a_runtime_shut_down_under_a_call_leaves_no_helper_running() {
    become_subreaper();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pid_file = temp_path("tokio-runtime-gone-pid");
    let _ = std::fs::remove_file(&pid_file);
    let script = format!("echo $$ > '{}'; exec sleep 30", pid_file.display());
    let (host, call) = runtime.block_on(async {
        let host = host(HostOptions::default());
        let call = host
            .call(HelperCommand::shell_script(script))
            .call_id("c_runtime_gone")
            .start();
        wait_for_state(&call, State::Dispatched).await;
        poll_until(Duration::from_secs(10), "the pid file", || {
            std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
        })
        .await;
        (host, call)
    });
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = std::fs::remove_file(&pid_file);
    // The owner task is dropped with its runtime: it kills the group, and
    // the call is no longer counted as live.
    drop(runtime);
    assert_group_gone(pid);
    assert_eq!(host.live_calls(), 0);
    assert!(!call.is_finished());
    assert!(host.finished_records().is_empty());
}

#[test]
fn handles_and_their_futures_can_move_across_tasks() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let host = host(HostOptions::default());
    send_sync(&host);
    let call = host
        .call(HelperCommand::new("true"))
        .call_id("c_send")
        .approval(Approval::Required)
        .start();
    send_sync(&call);
    send_sync(&call.canceller());
    send(&call.wait_card(Duration::ZERO));
    send(&call.approve());
    send(&host.shutdown_and_wait(Duration::ZERO));
    send(&call.wait());
}

#[test]
fn dropping_the_handle_with_kill_on_drop_stops_the_helper_and_its_grandchild() {
    let (runtime, host) = host_on_workers(HostOptions::default());
    let start = |s| support::shell_call!(host, s, "c_tokio_drop", true).start();
    let record = || kept_record(&runtime, &host, "c_tokio_drop");
    check_stopped_by_a_drop("c_tokio_drop", start, drop, record);
}

/// `tokio::time::timeout` gives up on the `run()` future and drops it, and
/// the call's handle with it.
#[test]
fn a_run_future_dropped_by_a_timeout_with_kill_on_drop_stops_the_group() {
    let (runtime, host) = host_on_workers(HostOptions::default());
    let run = |s| support::shell_call!(host, s, "c_tokio_run", true).run();
    let time_out = |run| {
        let timed_out = runtime.block_on(async { tokio::time::timeout(50 * MS, run).await });
        assert!(timed_out.is_err());
    };
    check_stopped_by_a_drop("c_tokio_run", run, time_out, || {
        kept_record(&runtime, &host, "c_tokio_run")
    });
}

#[test]
fn without_kill_on_drop_the_finish_policy_lets_the_helper_end() {
    let (runtime, host) = host_on_workers(HostOptions::default());
    let start = |s| support::shell_call!(host, s, "c_tokio_finish", false).start();
    let record = || kept_record(&runtime, &host, "c_tokio_finish");
    check_finished_after_a_drop("c_tokio_finish", start, record);
}
