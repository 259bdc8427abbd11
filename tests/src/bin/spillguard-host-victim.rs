//! A host process to be killed: starts calls of `sleep 60` (and, with
//! `--stubborn`, one helper that ignores SIGTERM) on the runtime named,
//! prints one line per helper, `pgid N`, then `supervisor P` and `ready`,
//! and waits for its end. The host-death check kills it with SIGKILL and
//! expects no helper to survive.
//!
//! `spillguard-host-victim RUNTIME CALLS [--stubborn] DIR` (`DIR` is where
//! the helpers write their pids).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use spillguard_core::State;
use spillguard_host::{HelperCommand, HostOptions};
use spillguard_tests::drivers;
use spillguard_tests::engine::{CallUnderTest, HostUnderTest, request};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = args.first().expect("RUNTIME").clone();
    let calls: usize = args.get(1).and_then(|n| n.parse().ok()).expect("CALLS");
    let stubborn = args.iter().any(|a| a == "--stubborn");
    let dir = PathBuf::from(args.last().expect("DIR"));
    match runtime.as_str() {
        "std" => serve(
            drivers::std::host(HostOptions::default()),
            calls,
            stubborn,
            &dir,
        ),
        "smol" => serve(
            drivers::smol::host(HostOptions::default()),
            calls,
            stubborn,
            &dir,
        ),
        "tokio" => serve(
            drivers::tokio::host(HostOptions::default()),
            calls,
            stubborn,
            &dir,
        ),
        other => panic!("unknown runtime {other}"),
    }
}

fn serve<H: HostUnderTest>(host: H, calls: usize, stubborn: bool, dir: &Path) {
    let mut scripts: Vec<String> = (0..calls).map(|_| "exec sleep 60".to_owned()).collect();
    if stubborn {
        scripts.push("trap '' TERM; sleep 60; sleep 60".to_owned());
    }
    let mut handles = Vec::new();
    for (i, script) in scripts.iter().enumerate() {
        let file = dir.join(format!("helper-{i}.pid"));
        let script = format!("echo $$ > '{}'; {script}", file.display());
        let call = host.launch(request(HelperCommand::shell_script(script)).into_request());
        handles.push((call, file));
    }
    for (call, file) in &handles {
        let until = Instant::now() + Duration::from_secs(30);
        let pid = loop {
            let pid = std::fs::read_to_string(file)
                .ok()
                .and_then(|text| text.trim().parse::<u32>().ok());
            if let Some(pid) = pid
                && call.state() == State::Dispatched
            {
                break pid;
            }
            assert!(Instant::now() < until, "no helper in 30 s");
            std::thread::sleep(Duration::from_millis(5));
        };
        println!("pgid {pid}");
    }
    let supervisor = spillguard_host::host_death::supervisor_pid().expect("a supervisor runs");
    println!("supervisor {supervisor}");
    println!("ready");
    // Killed here; the handles (and the host) are never dropped.
    std::thread::sleep(Duration::from_secs(600));
    drop((host, handles));
}
