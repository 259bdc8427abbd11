//! The after-life of a call: what an escaped descendant still holds once
//! the call has finished is drained by the host for a bounded time, then
//! closed and counted.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use rustix::process::{Pid, WaitOptions};
use spillguard_core::{State, StreamEnd};
use spillguard_kit::{HelperCommand, HostOptions, OrphanStats};

use super::{poll_until, temp_path, wait};
use crate::engine::{HostUnderTest, request};
use crate::measure::become_subreaper;

/// A helper's `setsid` descendant keeps stdout and stderr open and writes
/// to stderr every 20 ms. After the call ends (`abandoned_open`), its host
/// drains both pipes (2 draining); at `orphan_drain_max` (here 1 s) it
/// closes them and counts them (2 closed, none ended), and the escapee's
/// next write kills it with SIGPIPE.
pub fn an_escapee_s_pipes_are_drained_then_closed_at_the_orphan_bound<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    become_subreaper();
    let drain_max = Duration::from_secs(1);
    let host = host(HostOptions {
        orphan_drain_max: Some(drain_max),
        ..HostOptions::default()
    });
    assert_eq!(host.orphan_pipes(), OrphanStats::default());
    let pid_file = temp_path("orphan.pid");
    let _ = std::fs::remove_file(&pid_file);
    let script = format!(
        "setsid sh -c 'echo $$ > \"{}\"; while :; do echo noise >&2; sleep 0.02; done' & echo ok",
        pid_file.display()
    );
    let outcome = wait(host.launch(request(HelperCommand::shell_script(script)).start()));
    let ended = Instant::now();
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.stream_end, StreamEnd::AbandonedOpen);
    assert_eq!(outcome.stdout.to_vec(), b"ok\n");
    let mut escapee = None;
    poll_until(Duration::from_secs(10), "the escapee's pid", || {
        escapee = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
            .and_then(Pid::from_raw);
        escapee.is_some()
    });
    let _ = std::fs::remove_file(&pid_file);
    let escapee = escapee.unwrap();
    poll_until(Duration::from_secs(5), "2 pipes draining", || {
        host.orphan_pipes().draining == 2
    });
    assert_eq!(
        host.orphan_pipes(),
        OrphanStats {
            draining: 2,
            closed: 0,
            ended: 0
        }
    );
    // Still alive and writing while drained: nothing blocks it.
    assert!(rustix::process::test_kill_process(escapee).is_ok());
    poll_until(Duration::from_secs(10), "2 pipes closed", || {
        host.orphan_pipes().closed == 2
    });
    let closed_after = ended.elapsed();
    assert_eq!(
        host.orphan_pipes(),
        OrphanStats {
            draining: 0,
            closed: 2,
            ended: 0
        }
    );
    // Handed over just after the outcome, closed 1 s later; generous
    // bounds for a loaded machine.
    assert!(
        closed_after >= Duration::from_millis(900),
        "{closed_after:?}"
    );
    assert!(closed_after < Duration::from_secs(5), "{closed_after:?}");
    // The escapee was reparented to this process (a subreaper): its
    // status says how it ended.
    let mut signal = None;
    poll_until(Duration::from_secs(10), "the escapee's end", || {
        match rustix::process::waitpid(Some(escapee), WaitOptions::NOHANG) {
            Ok(Some((_, status))) => {
                signal = status.terminating_signal();
                true
            }
            Ok(None) => false,
            // Not our child (no subreaper here): gone is what counts.
            Err(_) => rustix::process::test_kill_process(escapee).is_err(),
        }
    });
    if let Some(signal) = signal {
        assert_eq!(signal, 13, "the escapee died of SIGPIPE");
    }
}

/// With room for one leftover pipe and no time bound, the escapee's two
/// pipes cost one: the first handed over (stdout) is closed at once when
/// the second comes, and the other (stderr) is drained as long as the
/// escapee writes, until its end once the escapee is killed.
pub fn the_orphan_pipe_count_is_bounded_and_an_ended_pipe_is_counted<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    become_subreaper();
    let host = host(HostOptions {
        orphan_drain_max: None,
        orphan_pipes_max: 1,
        ..HostOptions::default()
    });
    let pid_file = temp_path("orphan-count.pid");
    let _ = std::fs::remove_file(&pid_file);
    let script = format!(
        "setsid sh -c 'echo $$ > \"{}\"; while :; do echo noise >&2; sleep 0.02; done' & echo ok",
        pid_file.display()
    );
    let outcome = wait(host.launch(request(HelperCommand::shell_script(script)).start()));
    assert_eq!(outcome.record.stream_end, StreamEnd::AbandonedOpen);
    let mut escapee = None;
    poll_until(Duration::from_secs(10), "the escapee's pid", || {
        escapee = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
            .and_then(Pid::from_raw);
        escapee.is_some()
    });
    let _ = std::fs::remove_file(&pid_file);
    let escapee = escapee.unwrap();
    poll_until(Duration::from_secs(5), "1 pipe closed", || {
        host.orphan_pipes().closed == 1
    });
    assert_eq!(
        host.orphan_pipes(),
        OrphanStats {
            draining: 1,
            closed: 1,
            ended: 0
        }
    );
    // It goes on writing to the drained stderr: 0.5 s later, still so.
    std::thread::sleep(Duration::from_millis(500));
    assert!(rustix::process::test_kill_process(escapee).is_ok());
    assert_eq!(host.orphan_pipes().draining, 1);
    rustix::process::kill_process(escapee, rustix::process::Signal::KILL).unwrap();
    poll_until(Duration::from_secs(10), "the pipe's end", || {
        host.orphan_pipes().ended == 1
    });
    assert_eq!(
        host.orphan_pipes(),
        OrphanStats {
            draining: 0,
            closed: 1,
            ended: 1
        }
    );
    poll_until(Duration::from_secs(10), "the escapee reaped", || {
        !matches!(
            rustix::process::waitpid(Some(escapee), WaitOptions::NOHANG),
            Ok(None)
        )
    });
}
