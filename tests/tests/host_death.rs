//! Helpers never outlive the host process: a host process killed with
//! SIGKILL while its calls run (`spillguard-host-victim`) leaves no helper
//! behind, on every runtime. Its supervisor sends SIGTERM to every live
//! group, then SIGKILL to what is left after its grace (5 s).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, WaitOptions};
use spillguard_tests::measure::{become_subreaper, group_members};

/// What the victim printed before it was killed.
struct Victim {
    groups: Vec<u32>,
    supervisor: u32,
}

fn start_victim(runtime: &str, calls: usize, stubborn: bool) -> (std::process::Child, Victim) {
    let dir = std::env::temp_dir().join(format!(
        "spillguard-host-death-{}-{runtime}-{stubborn}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_spillguard-host-victim"));
    command.arg(runtime).arg(calls.to_string());
    if stubborn {
        command.arg("--stubborn");
    }
    let mut child = command.arg(&dir).stdout(Stdio::piped()).spawn().unwrap();
    let mut victim = Victim {
        groups: Vec::new(),
        supervisor: 0,
    };
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines {
        let line = line.unwrap();
        if let Some(pgid) = line.strip_prefix("pgid ") {
            victim.groups.push(pgid.parse().unwrap());
        } else if let Some(pid) = line.strip_prefix("supervisor ") {
            victim.supervisor = pid.parse().unwrap();
        } else if line == "ready" {
            break;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    (child, victim)
}

fn pid(raw: u32) -> Pid {
    Pid::from_raw(i32::try_from(raw).unwrap()).unwrap()
}

/// Reaps what this process (a subreaper) inherited of `group` and tells
/// whether the group is gone.
fn gone(group: u32) -> bool {
    while let Ok(Some(_)) = rustix::process::waitpgid(pid(group), WaitOptions::NOHANG) {}
    rustix::process::test_kill_process_group(pid(group)) == Err(rustix::io::Errno::SRCH)
}

/// Kills the victim with SIGKILL; returns when each group was gone after
/// the kill (`None`: still there after `limit`).
fn kill_and_watch(runtime: &str, calls: usize, stubborn: bool) -> (Victim, Vec<Option<Duration>>) {
    become_subreaper();
    let (mut child, victim) = start_victim(runtime, calls, stubborn);
    assert_eq!(victim.groups.len(), calls + usize::from(stubborn));
    for &group in &victim.groups {
        assert!(!gone(group), "group {group} gone before the kill");
    }
    let killed = Instant::now();
    child.kill().unwrap();
    child.wait().unwrap();
    let limit = Duration::from_secs(20);
    let mut gone_at = vec![None; victim.groups.len()];
    while gone_at.iter().any(Option::is_none) && killed.elapsed() < limit {
        for (at, &group) in gone_at.iter_mut().zip(&victim.groups) {
            if at.is_none() && gone(group) {
                *at = Some(killed.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for (at, &group) in gone_at.iter().zip(&victim.groups) {
        assert!(
            at.is_some(),
            "group {group} survived its host: {:?}",
            group_members(group)
        );
    }
    // The supervisor ends once every group is gone.
    let supervisor = pid(victim.supervisor);
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match rustix::process::waitpid(Some(supervisor), WaitOptions::NOHANG) {
            Ok(Some((_, status))) => {
                assert_eq!(status.exit_status(), Some(0), "{status:?}");
                break;
            }
            Ok(None) => {}
            Err(_) => break,
        }
        assert!(Instant::now() < until, "the supervisor did not end");
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!("{runtime}: groups gone after {gone_at:?}");
    (victim, gone_at)
}

/// Four `sleep 60` helpers die of the supervisor's SIGTERM at once; one
/// that ignores SIGTERM dies of its SIGKILL after the 5 s grace.
fn killing_the_host_process_leaves_no_helper(runtime: &str) {
    let (_, gone_at) = kill_and_watch(runtime, 4, true);
    let (stubborn, quick) = gone_at.split_last().unwrap();
    for at in quick {
        // Generous for a loaded machine; the grace is 5 s.
        assert!(at.unwrap() < Duration::from_secs(3), "{at:?}");
    }
    let stubborn = stubborn.unwrap();
    assert!(stubborn >= Duration::from_millis(4_500), "{stubborn:?}");
    assert!(stubborn < Duration::from_secs(15), "{stubborn:?}");
}

#[test]
fn killing_a_std_host_process_leaves_no_helper() {
    killing_the_host_process_leaves_no_helper("std");
}

#[test]
fn killing_a_smol_host_process_leaves_no_helper() {
    killing_the_host_process_leaves_no_helper("smol");
}

#[test]
fn killing_a_tokio_host_process_leaves_no_helper() {
    killing_the_host_process_leaves_no_helper("tokio");
}
