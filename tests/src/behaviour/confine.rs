//! Bounds beyond stderr, on the real kernel: a helper's tree held to its
//! memory, process-count and CPU limits, killed as one when the call
//! ends, and kept to the files and network it is given.
//!
//! These need what the CI machine has (root, cgroups, Landlock ABI ≥ 4);
//! elsewhere each check says what it is missing and returns.
#![allow(clippy::unwrap_used)]

use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLockWriteGuard};
use std::time::{Duration, Instant};

use spillguard_core::{Confinement, LimitHit, Limits, Network, Sandbox, State};
use spillguard_host::{HelperCommand, HostOptions};

use super::{temp_path, wait};
use crate::engine::{HostUnderTest, request};

/// The checks of this module run one at a time in a process (each counts
/// the control groups its process left behind), and as a scenario does:
/// their floods of memory, forks and calls never run beside a check that
/// bounds a duration.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The checks of this module: they count the process's control groups,
/// so no other check runs beside them (see [`super::groups_shared`]).
pub const COUNTS_GROUPS: &[&str] = &[
    "a_helper_past_its_memory_limit_ends_with_limit_hit_memory",
    "a_fork_bomb_is_held_to_its_process_limit_and_leaves_no_survivor",
    "a_busy_loop_past_its_cpu_seconds_ends_with_limit_hit_cpu",
    "a_setsid_escapee_is_gone_when_a_contained_call_ends",
    "a_sandboxed_helper_reaches_only_its_listed_paths",
    "a_sandboxed_helper_connects_only_to_listed_ports",
    "a_thousand_limited_calls_leave_no_group_and_no_survivor",
    "a_sandboxed_helper_cannot_leave_its_control_group",
    "ended_calls_leave_only_the_spare_groups",
    "a_helper_in_a_group_below_its_own_is_killed_with_the_tree",
    "a_process_hidden_in_a_spare_group_never_joins_the_next_call",
    "a_bounded_helper_has_no_way_to_the_terminal_the_host_or_its_sockets",
    "a_sandboxed_root_helper_cannot_undo_its_sandbox",
    "a_limit_a_descendant_hits_is_named_in_the_record",
    "the_cpu_time_of_the_whole_tree_is_held_to_its_limit",
];

type Turn = (
    MutexGuard<'static, ()>,
    RwLockWriteGuard<'static, ()>,
    RwLockWriteGuard<'static, ()>,
);

fn turn() -> Turn {
    let mine = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let groups = super::GROUPS
        .write()
        .unwrap_or_else(PoisonError::into_inner);
    (mine, groups, super::scenario_turn())
}

/// Whether this machine can run the checks: root, with cgroups mounted.
/// Outside CI a machine without them skips with a message; in CI every
/// check must run.
fn machine_ready() -> bool {
    let root = rustix::process::geteuid().is_root();
    let cgroups = Path::new("/sys/fs/cgroup").exists();
    if root && cgroups {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "the confinement checks need root and cgroups in CI"
    );
    eprintln!("skipped: the confinement checks need root and cgroups");
    false
}

/// The processes whose command line holds `marker`.
pub fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let mut cmdline = Vec::new();
        if let Ok(mut file) = std::fs::File::open(entry.path().join("cmdline")) {
            let _ = file.read_to_end(&mut cmdline);
        }
        if pid != std::process::id()
            && cmdline
                .windows(marker.len())
                .any(|w| w == marker.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// The call's control groups left behind (`spillguard.<pid>.*`) in every
/// hierarchy, once the empty groups kept ready for the next calls are
/// removed and those of ended calls have gone (`settle_groups`).
pub fn leftover_groups() -> usize {
    assert!(spillguard_host::confine::settle_groups(
        Duration::from_secs(10)
    ));
    group_paths().len()
}

/// The groups of this process (`spillguard.<pid>.*`) in every hierarchy
/// now, spare ones included.
fn group_paths() -> Vec<PathBuf> {
    let prefix = format!("spillguard.{}.", std::process::id());
    let mut found = Vec::new();
    let mut dirs = vec![PathBuf::from("/sys/fs/cgroup")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                found.push(entry.path());
            } else if dir.components().count() < 8 {
                dirs.push(entry.path());
            }
        }
    }
    found
}

fn limits(f: impl FnOnce(&mut Limits)) -> Limits {
    let mut limits = Limits::default();
    f(&mut limits);
    limits
}

/// A helper that touches 4 GiB under a 256 MiB limit is ended by the
/// kernel's out-of-memory killer: `failed_local`, `SIGKILL`,
/// `limit_hit: memory`, a peak at the limit, and the host untouched.
pub fn a_helper_past_its_memory_limit_ends_with_limit_hit_memory<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let script = "x = bytearray(4 << 30)\nx[::4096] = b'x' * (1 << 20)\nprint('survived')";
    let command = HelperCommand::new("/usr/bin/python3").args(["-c", script]);
    let call = request(command)
        .limits(limits(|l| l.memory_max = Some(256 << 20)))
        .into_request();
    let outcome = wait(host.launch(call));
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedLocal, "{}", record.to_json());
    assert_eq!(record.exit_signal, Some(9));
    assert_eq!(record.limit_hit, Some(LimitHit::Memory));
    assert_eq!(record.limits.as_ref().unwrap().memory_max, Some(256 << 20));
    assert!(
        record.enforced.iter().any(|m| m.starts_with("cgroup-v")),
        "{:?}",
        record.enforced
    );
    assert!(record.not_enforced.is_empty());
    let peak = record.tree_peak_memory_bytes.unwrap();
    assert!(peak <= 256 << 20, "peak {peak}");
    assert!(peak > 200 << 20, "peak {peak}");
    assert!(outcome.stdout.to_vec().is_empty());
    // The next call on the same host runs as usual.
    let next = wait(host.launch(request(HelperCommand::new("true")).into_request()));
    assert_eq!(next.record.state, State::Completed);
    assert_eq!(next.record.limit_hit, None);
    // Contained by default, as every call where a group can be made.
    assert_eq!(next.record.tree_kill.as_deref(), Some("cgroup-v2"));
    assert_eq!(leftover_groups(), 0);
}

/// A fork bomb under a limit of 64 processes is contained: forks are
/// refused (`limit_hit: pids`, a peak of at most 64), its deadline ends
/// it, and no process of it survives the call.
pub fn a_fork_bomb_is_held_to_its_process_limit_and_leaves_no_survivor<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let marker = format!("bomb-{}", std::process::id());
    // Each copy starts two more and waits for them; refused forks make
    // copies end, and the bomb keeps at its ceiling until the deadline.
    let command =
        HelperCommand::shell_script("b() { while :; do b & b & wait; done; }; b 2>/dev/null")
            .arg(&marker);
    let started = Instant::now();
    let call = request(command)
        .deadline(Duration::from_secs(2))
        .limits(limits(|l| l.pids_max = Some(64)))
        .into_request();
    let outcome = wait(host.launch(call));
    let record = &outcome.record;
    assert_eq!(
        record.limit_hit,
        Some(LimitHit::Pids),
        "{}",
        record.to_json()
    );
    assert!(
        record.tree_peak_pids.is_none_or(|p| p <= 64),
        "{:?}",
        record.tree_peak_pids
    );
    assert!(
        // A copy whose own fork is refused ends (the shell gives up), the
        // helper itself included; or the deadline stops the rest.
        matches!(
            record.state,
            State::FailedLocal | State::CancelledAfterDispatch | State::Killed
        ),
        "{:?}",
        record.state
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(processes_with(&marker), Vec::<u32>::new());
    assert_eq!(leftover_groups(), 0);
}

/// A busy loop under one CPU second ends with `SIGXCPU`: `failed_local`,
/// `limit_hit: cpu`.
pub fn a_busy_loop_past_its_cpu_seconds_ends_with_limit_hit_cpu<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let call = request(HelperCommand::shell_script("while :; do :; done"))
        .deadline(Duration::from_secs(30))
        .limits(limits(|l| l.cpu_seconds = Some(1)))
        .into_request();
    let outcome = wait(host.launch(call));
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedLocal, "{}", record.to_json());
    assert_eq!(record.exit_signal, Some(24));
    assert_eq!(record.limit_hit, Some(LimitHit::Cpu));
    assert!(record.enforced.contains(&"rlimit".to_owned()));
}

/// A descendant that left the helper's process group with `setsid`
/// survives a call that opted out of its control group, and is gone when
/// a call ends with no flag at all (contained by default) or with the
/// group required: a `/proc` scan finds 0.
pub fn a_setsid_escapee_is_gone_when_a_contained_call_ends<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let escape = |marker: &str| {
        HelperCommand::shell_script(
            "setsid sh -c 'sleep 30; : \"$1\"' sh \"$1\" </dev/null >/dev/null 2>&1 & sleep 0.1",
        )
        .arg(marker)
    };
    // Opted out, the escapee outlives the call (then this test ends it).
    let loose = format!("loose-{}", std::process::id());
    let call = request(escape(&loose)).contain_tree(false).into_request();
    let outcome = wait(host.launch(call));
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(outcome.record.tree_kill.as_deref(), Some("process-group"));
    let survivors = processes_with(&loose);
    assert_eq!(survivors.len(), 1, "{survivors:?}");
    for pid in survivors {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
    }

    for required in [None, Some(true)] {
        let held = format!("held-{}-{required:?}", std::process::id());
        let mut call = request(escape(&held));
        if let Some(required) = required {
            call = call.contain_tree(required);
        }
        let outcome = wait(host.launch(call.into_request()));
        let record = &outcome.record;
        assert_eq!(record.state, State::Completed);
        assert_eq!(record.tree_kill.as_deref(), Some("cgroup-v2"));
        // Required, the group comes with the bounds' other steps (no core
        // dumps, no new privileges); by default, alone.
        let enforced: &[&str] = match required {
            None => &["cgroup-v2"],
            Some(_) => &["cgroup-v2", "rlimit", "no-new-privs"],
        };
        assert_eq!(record.enforced, enforced, "{required:?}");
        assert_eq!(processes_with(&held), Vec::<u32>::new(), "{required:?}");
    }
    assert_eq!(leftover_groups(), 0);
}

/// Files: the read-only path reads, the read-write path writes, and
/// everything else is refused with `EACCES` inside the helper.
pub fn a_sandboxed_helper_reaches_only_its_listed_paths<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let base = temp_path("sandbox");
    let (ro, rw, other) = (base.join("ro"), base.join("rw"), base.join("other"));
    for dir in [&ro, &rw, &other] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(ro.join("in"), "visible\n").unwrap();
    std::fs::write(other.join("secret"), "hidden\n").unwrap();
    let script = "cat \"$1/in\"; echo \"read-ro=$?\"; \
                  cat \"$3/secret\" 2>/dev/null; echo \"read-other=$?\"; \
                  (echo w > \"$2/out\") 2>/dev/null; echo \"write-rw=$?\"; \
                  (echo w > \"$1/new\") 2>/dev/null; echo \"write-ro=$?\"; \
                  (echo w > \"$3/new\") 2>/dev/null; echo \"write-other=$?\"; \
                  cat /etc/hostname >/dev/null 2>&1; echo \"read-etc=$?\"";
    let command = HelperCommand::shell_script(script).args([&ro, &rw, &other]);
    let call = request(command)
        .sandbox(Sandbox {
            read_only: vec![ro.clone()],
            read_write: vec![rw.clone()],
            ..Sandbox::default()
        })
        .into_request();
    let outcome = wait(host.launch(call));
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed, "{}", record.to_json());
    assert_eq!(
        String::from_utf8(outcome.stdout.to_vec()).unwrap(),
        "visible\nread-ro=0\nread-other=1\nwrite-rw=0\nwrite-ro=2\nwrite-other=2\nread-etc=1\n"
    );
    assert_eq!(std::fs::read_to_string(rw.join("out")).unwrap(), "w\n");
    assert!(!ro.join("new").exists() && !other.join("new").exists());
    assert!(
        record
            .enforced
            .iter()
            .any(|m| m.starts_with("landlock-abi-")),
        "{:?}",
        record.enforced
    );
    assert!(record.enforced.contains(&"no-new-privs".to_owned()));
    let _ = std::fs::remove_dir_all(&base);
}

/// TCP: a loopback port listed connects, one not listed is refused with
/// `EACCES`; with no network at all, only loopback exists and the host's
/// listener is out of reach.
pub fn a_sandboxed_helper_connects_only_to_listed_ports<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let listed = TcpListener::bind("127.0.0.1:0").unwrap();
    let unlisted = TcpListener::bind("127.0.0.1:0").unwrap();
    let (a, b) = (
        listed.local_addr().unwrap().port(),
        unlisted.local_addr().unwrap().port(),
    );
    let probe = "import socket, sys\n\
                 for port in sys.argv[1:]:\n\
                 \x20   try:\n\
                 \x20       socket.create_connection(('127.0.0.1', int(port)), timeout=2).close()\n\
                 \x20       print('ok')\n\
                 \x20   except OSError as e:\n\
                 \x20       print(e.errno)\n";
    let command = |ports: [u16; 2]| {
        HelperCommand::new("/usr/bin/python3")
            .args(["-c", probe])
            .args(ports.map(|p| p.to_string()))
    };
    let call = request(command([a, b]))
        .sandbox(Sandbox {
            connect_ports: vec![a],
            ..Sandbox::default()
        })
        .into_request();
    let outcome = wait(host.launch(call));
    assert_eq!(
        outcome.record.state,
        State::Completed,
        "{}",
        outcome.record.to_json()
    );
    assert_eq!(
        String::from_utf8(outcome.stdout.to_vec()).unwrap(),
        "ok\n13\n"
    );

    let none = Confinement {
        sandbox: Sandbox {
            network: Network::None,
            ..Sandbox::default()
        },
        ..Confinement::default()
    };
    let interfaces = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '";
    let call = request(HelperCommand::shell_script(interfaces))
        .confinement(none.clone())
        .into_request();
    let outcome = wait(host.launch(call));
    assert_eq!(String::from_utf8(outcome.stdout.to_vec()).unwrap(), "lo\n");
    assert!(outcome.record.enforced.contains(&"netns".to_owned()));
    // The host's listener is in another namespace: refused (111).
    let call = request(command([a, a])).confinement(none).into_request();
    let outcome = wait(host.launch(call));
    assert_eq!(
        String::from_utf8(outcome.stdout.to_vec()).unwrap(),
        "111\n111\n"
    );
    drop((listed, unlisted));
}

/// A path that does not exist refuses the call before anything runs:
/// `failed_before_dispatch`, the flag and the OS error in the failure.
pub fn a_sandbox_path_that_does_not_exist_refuses_the_call<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let marker = temp_path("never-written");
    let call = request(HelperCommand::shell_script("touch \"$1\"").arg(&marker))
        .sandbox(Sandbox {
            read_only: vec!["/nonexistent/spillguard".into()],
            ..Sandbox::default()
        })
        .into_request();
    let outcome = wait(host.launch(call));
    let record = &outcome.record;
    assert_eq!(record.state, State::FailedBeforeDispatch);
    assert_eq!(
        record.failure.as_deref(),
        Some("read-only /nonexistent/spillguard: No such file or directory (os error 2)")
    );
    assert_eq!(record.pid, None);
    assert!(!marker.exists());
}

/// A thousand calls with limits, each leaving a background process
/// behind: no control group and no process of theirs is left.
pub fn a_thousand_limited_calls_leave_no_group_and_no_survivor<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let marker = format!("thousand-{}", std::process::id());
    let started = Instant::now();
    let calls: Vec<_> = (0..1000)
        .map(|_| {
            let command =
                HelperCommand::shell_script("sleep 30 </dev/null >/dev/null 2>&1 & : \"$1\"")
                    .arg(&marker);
            host.launch(
                request(command)
                    .limits(limits(|l| {
                        l.pids_max = Some(16);
                        l.memory_max = Some(64 << 20);
                    }))
                    .into_request(),
            )
        })
        .collect();
    let mut completed = 0;
    for call in calls {
        let outcome = wait(call);
        assert_eq!(outcome.record.limit_hit, None);
        completed += usize::from(outcome.record.state == State::Completed);
    }
    assert_eq!(completed, 1000);
    assert_eq!(processes_with(&marker), Vec::<u32>::new());
    assert_eq!(leftover_groups(), 0);
    eprintln!("1000 limited calls in {:?}", started.elapsed());
}

/// The way out a root helper has: writing its pid to another control
/// group's `cgroup.procs`. With the file sandbox `/sys` is out of reach
/// (the write fails, the helper stays in its group and is killed with
/// it); with limits alone it succeeds, as `docs/limits-and-sandbox.md` says.
pub fn a_sandboxed_helper_cannot_leave_its_control_group<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let procs = [
        "/sys/fs/cgroup/unified/cgroup.procs",
        "/sys/fs/cgroup/cgroup.procs",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .unwrap();
    let escape = || {
        HelperCommand::shell_script("(echo $$ > \"$1\") 2>/dev/null; echo \"escape=$?\"").arg(procs)
    };
    let pids = limits(|l| l.pids_max = Some(16));
    let sandbox = Sandbox {
        read_only: vec![std::env::temp_dir()],
        ..Sandbox::default()
    };
    let call = request(escape())
        .limits(pids.clone())
        .sandbox(sandbox)
        .into_request();
    let outcome = wait(host.launch(call));
    assert_eq!(
        String::from_utf8(outcome.stdout.to_vec()).unwrap(),
        "escape=2\n"
    );
    assert_eq!(outcome.record.state, State::Completed);

    let call = request(escape()).limits(pids).into_request();
    let outcome = wait(host.launch(call));
    assert_eq!(
        String::from_utf8(outcome.stdout.to_vec()).unwrap(),
        "escape=0\n"
    );
    assert_eq!(leftover_groups(), 0);
}

/// The groups of ended calls are removed without being asked, moments
/// after: what stays is the few empty groups kept ready for the next
/// calls (the configured number under each parent a call used), until
/// `settle_groups` or the process's exit removes them.
pub fn ended_calls_leave_only_the_spare_groups<H: HostUnderTest>(host: fn(HostOptions) -> H) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    assert!(spillguard_host::confine::settle_groups(
        Duration::from_secs(10)
    ));
    let host = host(HostOptions::default());
    let mut enforced = Vec::new();
    for _ in 0..20 {
        let call = request(HelperCommand::new("true"))
            .limits(limits(|l| {
                l.pids_max = Some(16);
                l.memory_max = Some(64 << 20);
            }))
            .into_request();
        let outcome = wait(host.launch(call));
        assert_eq!(outcome.record.state, State::Completed);
        enforced = outcome.record.enforced;
    }
    // What stays, once the ended calls' groups are removed: the spare
    // groups, as many under each parent the calls used (the tree's v2
    // group, and v1 groups where v2 does not delegate a controller).
    let used = usize::from(enforced.iter().any(|e| e == "cgroup-v2"))
        + usize::from(enforced.iter().any(|e| e == "cgroup-v1"));
    assert!(used > 0, "{enforced:?}");
    let spare = spillguard_host::confine::SPARE_GROUPS;
    let settled = |groups: &[PathBuf]| {
        let mut parents: Vec<_> = groups.iter().filter_map(|g| g.parent()).collect();
        parents.sort();
        parents.dedup();
        parents.len() >= used
            && parents
                .iter()
                .all(|p| groups.iter().filter(|g| g.parent() == Some(p)).count() == spare)
    };
    let until = Instant::now() + Duration::from_secs(5);
    while !settled(&group_paths()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let groups = group_paths();
    assert!(settled(&groups), "{groups:?}");
    assert!(spillguard_host::confine::settle_groups(
        Duration::from_secs(10)
    ));
    assert_eq!(group_paths(), Vec::<PathBuf>::new());
}

/// A helper running as root that makes a group below its own and moves
/// there, leaving a descendant behind: the call still ends with nothing
/// of the tree left and no group (its own included) behind.
pub fn a_helper_in_a_group_below_its_own_is_killed_with_the_tree<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    // The v2 mount the tree's group is in.
    let Some(mount) = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .find(|m| Path::new(m).join("cgroup.controllers").exists())
    else {
        panic!("no cgroup v2 mount");
    };
    let marker = format!("nested-{}", std::process::id());
    let script = "d=\"$1$(sed -n 's/^0:://p' /proc/self/cgroup)/below\"; \
                  mkdir \"$d\" && echo $$ > \"$d/cgroup.procs\" && \
                  (setsid sh -c 'sleep 30; : \"$1\"' sh \"$2\" </dev/null >/dev/null 2>&1 &) && \
                  sed -n 's/^0:://p' /proc/$$/cgroup";
    let command = HelperCommand::shell_script(script).args([mount, &marker]);
    let call = request(command).contain_tree(true).into_request();
    let outcome = wait(host.launch(call));
    let record = &outcome.record;
    assert_eq!(record.state, State::Completed, "{}", record.to_json());
    assert_eq!(record.tree_kill.as_deref(), Some("cgroup-v2"));
    // The helper (and so its escapee) was in the group below.
    let stdout = String::from_utf8(outcome.stdout.to_vec()).unwrap();
    assert!(stdout.ends_with("/below\n"), "{stdout:?}");
    assert_eq!(processes_with(&marker), Vec::<u32>::new());
    assert_eq!(leftover_groups(), 0);
}

/// A helper running as root without the file sandbox moves sleepers into
/// the spare groups kept for the next calls: the next call gets an empty
/// group all the same (the sleepers are not in its tree or its record),
/// and the sleepers are killed with the groups they hid in.
pub fn a_process_hidden_in_a_spare_group_never_joins_the_next_call<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    assert!(spillguard_host::confine::settle_groups(
        Duration::from_secs(10)
    ));
    let host = host(HostOptions::default());
    let Some(mount) = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .find(|m| Path::new(m).join("cgroup.controllers").exists())
    else {
        panic!("no cgroup v2 mount");
    };
    let contained = |command: HelperCommand| {
        let outcome = wait(host.launch(request(command).contain_tree(true).into_request()));
        assert_eq!(
            outcome.record.state,
            State::Completed,
            "{}",
            outcome.record.to_json()
        );
        String::from_utf8(outcome.stdout.to_vec()).unwrap()
    };
    // Two calls, and the spares are made.
    contained(HelperCommand::new("true"));
    contained(HelperCommand::new("true"));
    let spare = spillguard_host::confine::SPARE_GROUPS;
    let until = Instant::now() + Duration::from_secs(5);
    while group_paths().len() != spare && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(group_paths().len(), spare);
    let marker = format!("hidden-{}", std::process::id());
    // It waits for the pool to make up for its own group and to remove
    // the last call's, then hides a sleeper in each spare.
    let hide = "sleep 0.3; own=$(sed -n 's/^0:://p' /proc/self/cgroup); \
                parent=\"$1${own%/*}\"; n=0; \
                for d in \"$parent\"/spillguard.$3.*; do \
                  [ \"$d\" = \"$1$own\" ] && continue; \
                  [ -s \"$d/cgroup.procs\" ] && continue; \
                  setsid sh -c 'echo $$ > \"$2/cgroup.procs\" && sleep 30; : \"$1\"' \
                    sh \"$2\" \"$d\" </dev/null >/dev/null 2>&1 & \
                  n=$((n+1)); \
                done; echo $n; sleep 0.3";
    let host_pid = std::process::id().to_string();
    let hidden = contained(HelperCommand::shell_script(hide).args([mount, &marker, &host_pid]));
    assert_eq!(hidden, format!("{spare}\n"));
    assert_eq!(processes_with(&marker).len(), spare);
    // The next call lists the command lines of its group's processes.
    let list = "g=\"$1$(sed -n 's/^0:://p' /proc/self/cgroup)\"; \
                for p in $(cat \"$g/cgroup.procs\"); do \
                  tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null; echo; \
                done";
    let listed = contained(HelperCommand::shell_script(list).arg(mount));
    assert!(!listed.contains(&marker), "{listed}");
    assert!(!listed.is_empty());
    assert_eq!(leftover_groups(), 0);
    let until = Instant::now() + Duration::from_secs(5);
    while !processes_with(&marker).is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(processes_with(&marker), Vec::<u32>::new());
}

/// What a helper finds when it tries the doors a hostile tool would: the
/// probe prints one line per attempt, `ok` or the errno's number.
const DOORS_PROBE: &str = "import errno, fcntl, os, socket, sys, termios\n\
def attempt(f):\n\
\x20   try:\n\
\x20       f()\n\
\x20       return 'ok'\n\
\x20   except OSError as e:\n\
\x20       return errno.errorcode.get(e.errno, str(e.errno))\n\
def inject():\n\
\x20   fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY)\n\
\x20   fcntl.ioctl(fd, termios.TIOCSTI, b'x')\n\
print('tiocsti', attempt(inject))\n\
print('dev-tty', attempt(lambda: os.open('/dev/tty', os.O_RDWR)))\n\
print('unix', attempt(lambda: socket.socket(socket.AF_UNIX).connect(sys.argv[2])))\n\
print('abstract', attempt(lambda: socket.socket(socket.AF_UNIX).connect('\\0' + sys.argv[3])))\n\
print('socketpair', attempt(socket.socketpair))\n\
print('signal-host', attempt(lambda: os.kill(os.getppid(), 0)))\n\
print('own-session', os.getsid(0) == os.getpid())\n";

/// The lines [`DOORS_PROBE`] prints for a helper confined by
/// `confinement`, with a pty's other end, a unix socket listening outside
/// any sandbox (by path and abstract), and whatever input the probe
/// pushed into the pty (read from its other end once the call is over).
fn try_doors<H: HostUnderTest>(host: &H, confinement: Confinement) -> (String, Vec<u8>) {
    use std::os::unix::net::UnixListener;
    // A unix socket's path is at most 107 bytes: a short one.
    let base = std::env::temp_dir().join(format!("sg-doors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let socket = base.join("host.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    let abstract_name = format!("spillguard-doors-{}", std::process::id());
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt as _;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
        UnixListener::bind_addr(&addr).unwrap()
    };
    let master =
        rustix::pty::openpt(rustix::pty::OpenptFlags::RDWR | rustix::pty::OpenptFlags::NOCTTY)
            .unwrap();
    rustix::pty::grantpt(&master).unwrap();
    rustix::pty::unlockpt(&master).unwrap();
    let slave_name = rustix::pty::ptsname(&master, Vec::new()).unwrap();
    let slave_path = PathBuf::from(slave_name.to_str().unwrap());
    let command = HelperCommand::new("/usr/bin/python3")
        .args(["-c", DOORS_PROBE])
        .arg(&slave_path)
        .arg(&socket)
        .arg(&abstract_name);
    let outcome = wait(host.launch(request(command).confinement(confinement).into_request()));
    assert_eq!(
        outcome.record.state,
        State::Completed,
        "{}",
        outcome.record.to_json()
    );
    // What the probe's TIOCSTI queued is read from the pty's input side.
    let slave = rustix::fs::open(
        &slave_path,
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::NONBLOCK,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let termios = rustix::termios::tcgetattr(&slave).unwrap();
    let mut raw = termios.clone();
    raw.make_raw();
    rustix::termios::tcsetattr(&slave, rustix::termios::OptionalActions::Now, &raw).unwrap();
    let mut queued = vec![0u8; 64];
    let n = rustix::io::read(&slave, &mut queued).unwrap_or(0);
    queued.truncate(n);
    drop((abstract_listener, master));
    let _ = std::fs::remove_dir_all(&base);
    (String::from_utf8(outcome.stdout.to_vec()).unwrap(), queued)
}

/// A helper with a limit or a sandbox has no way to the user's terminal
/// (its own session, no `/dev/tty`, `TIOCSTI` refused on any descriptor:
/// nothing is queued in the terminal's input), cannot signal its host, and
/// with a sandbox reaches no unix socket (by path or abstract) while a
/// socketpair still works. The same probe without bounds, as root, shows
/// each door open: the checks can fail.
pub fn a_bounded_helper_has_no_way_to_the_terminal_the_host_or_its_sockets<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let (open, queued) = try_doors(&host, Confinement::default());
    assert_eq!(
        open,
        "tiocsti ok\ndev-tty ENXIO\nunix ok\nabstract ok\nsocketpair ok\nsignal-host ok\n\
         own-session False\n"
    );
    assert_eq!(
        queued, b"x",
        "the unbounded probe's input reached the terminal"
    );

    let limited = Confinement {
        limits: limits(|l| l.pids_max = Some(64)),
        ..Confinement::default()
    };
    let (shut, queued) = try_doors(&host, limited);
    assert_eq!(
        shut,
        "tiocsti EPERM\ndev-tty ENXIO\nunix ok\nabstract EPERM\nsocketpair ok\n\
         signal-host EPERM\nown-session True\n"
    );
    assert_eq!(queued, b"");

    // A file sandbox that lets the helper open the pty (so that its
    // ioctl is tried) but not `/dev/tty`; and no network at all.
    let files = Sandbox {
        read_only: vec![PathBuf::from("/usr")],
        read_write: vec![PathBuf::from("/dev/pts")],
        ..Sandbox::default()
    };
    let no_network = Sandbox {
        network: Network::None,
        ..Sandbox::default()
    };
    for (sandbox, dev_tty) in [(files, "EACCES"), (no_network, "ENXIO")] {
        let confinement = Confinement {
            sandbox,
            ..Confinement::default()
        };
        let (shut, queued) = try_doors(&host, confinement);
        assert_eq!(
            shut,
            format!(
                "tiocsti EPERM\ndev-tty {dev_tty}\nunix EACCES\nabstract EACCES\n\
                 socketpair ok\nsignal-host EPERM\nown-session True\n"
            )
        );
        assert_eq!(queued, b"");
    }
}

/// A descriptor the host left open without close-on-exec (a caller's
/// leak) never reaches a helper, bounded or not: it gets its standard
/// streams only.
pub fn an_inherited_descriptor_never_reaches_a_helper<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let host = host(HostOptions::default());
    let file = std::fs::File::open("/etc/hostname")
        .or_else(|_| std::fs::File::open("/etc/passwd"))
        .unwrap();
    // `dup` makes a copy without close-on-exec, as a careless caller's
    // open would.
    let leaked = rustix::io::dup(&file).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&leaked);
    let script = "for fd in /proc/self/fd/*; do n=${fd##*/}; [ \"$n\" -gt 2 ] && \
                  [ \"$(readlink \"$fd\")\" = \"$1\" ] && echo \"inherited $n\"; done; \
                  ls /proc/self/fd | wc -l";
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
    let command = HelperCommand::shell_script(script).arg(&target);
    let outcome = wait(host.launch(request(command).into_request()));
    assert_eq!(outcome.record.state, State::Completed);
    // 0, 1, 2 and the one `ls` opens to read the directory.
    assert_eq!(
        String::from_utf8(outcome.stdout.to_vec()).unwrap().trim(),
        "4"
    );
    drop(leaked);
}

/// A root helper with a sandbox loses the capabilities that undo it:
/// making a device node in its writable directory, entering or making a
/// network namespace and mounting all fail; without a sandbox the same
/// root helper makes the node (the check can fail).
pub fn a_sandboxed_root_helper_cannot_undo_its_sandbox<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let base = temp_path("undo");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let script = "mknod \"$1/kmsg\" c 1 11 2>/dev/null; echo \"mknod=$?\"; \
                  unshare -n true 2>/dev/null; echo \"unshare=$?\"; \
                  nsenter --net=/proc/1/ns/net true 2>/dev/null; echo \"nsenter=$?\"; \
                  mount -t tmpfs none \"$1\" 2>/dev/null; echo \"mount=$?\"";
    let command = || HelperCommand::shell_script(script).arg(&base);
    let sandbox = Sandbox {
        read_only: vec![PathBuf::from("/proc")],
        read_write: vec![base.clone()],
        ..Sandbox::default()
    };
    let call = request(command()).sandbox(sandbox).into_request();
    let outcome = wait(host.launch(call));
    assert_eq!(outcome.record.state, State::Completed);
    assert_eq!(
        String::from_utf8(outcome.stdout.to_vec()).unwrap(),
        "mknod=1\nunshare=1\nnsenter=1\nmount=32\n"
    );
    assert!(
        outcome
            .record
            .enforced
            .contains(&"capabilities-dropped".to_owned()),
        "{:?}",
        outcome.record.enforced
    );
    assert!(!base.join("kmsg").exists());
    let outcome = wait(host.launch(request(command()).into_request()));
    assert!(
        String::from_utf8(outcome.stdout.to_vec())
            .unwrap()
            .starts_with("mknod=0\n")
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// A limit hit by a descendant is named in the record like one hit by the
/// helper itself: a grandchild's busy loop past its CPU seconds (the
/// shell reports 152, the tree's accounting shows the time spent), a
/// grandchild's write past the file-size limit (the shell reports 153),
/// and an out-of-memory kill in a v1 memory group the helper made below
/// its own.
pub fn a_limit_a_descendant_hits_is_named_in_the_record<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let run = |script: &str, args: &[&str], limits: Limits| {
        let command = HelperCommand::shell_script(script).args(args);
        let outcome = wait(host.launch(request(command).limits(limits).into_request()));
        outcome.record
    };
    // The shell does not exec its last command (the `s=$?` after it), so
    // the busy loop is a grandchild of the call.
    let busy = "python3 -c 'while True: pass'; s=$?; exit $s";
    let record = run(busy, &[], limits(|l| l.cpu_seconds = Some(1)));
    assert_eq!(
        (record.state, record.exit_status, record.limit_hit),
        (State::FailedLocal, Some(152), Some(LimitHit::Cpu)),
        "{}",
        record.to_json()
    );
    assert!(record.tree_peak_pids.is_none() || record.tree_peak_pids >= Some(2));

    let base = temp_path("file-size");
    std::fs::create_dir_all(&base).unwrap();
    let write = "head -c 2000000 /dev/zero > \"$1/big\"; s=$?; exit $s";
    let dir = base.to_str().unwrap();
    let record = run(write, &[dir], limits(|l| l.file_size_max = Some(1 << 20)));
    assert_eq!(
        (record.state, record.exit_status, record.limit_hit),
        (State::FailedLocal, Some(153), Some(LimitHit::FileSize)),
        "{}",
        record.to_json()
    );
    assert_eq!(std::fs::metadata(base.join("big")).unwrap().len(), 1 << 20);
    let _ = std::fs::remove_dir_all(&base);

    // Its own v1 memory group, a group below it, and a grandchild there
    // that touches 1 GiB under a 128 MiB limit.
    let nested = "g=$(sed -n 's/^[0-9]*:memory:\\(.*\\)$/\\1/p' /proc/self/cgroup); \
                  [ -n \"$g\" ] || { echo 'no v1 memory group'; exit 3; }; \
                  sub=\"/sys/fs/cgroup/memory$g/below\"; mkdir \"$sub\" || exit 4; \
                  sh -c 'echo $$ > \"$1/cgroup.procs\"; \
                  exec python3 -c \"b = bytearray(1 << 30); b[::4096] = b\\\"x\\\" * (len(b) // 4096)\"' \
                  sh \"$sub\"; s=$?; exit $s";
    let record = run(nested, &[], limits(|l| l.memory_max = Some(128 << 20)));
    assert_eq!(
        (record.state, record.limit_hit),
        (State::FailedLocal, Some(LimitHit::Memory)),
        "{}",
        record.to_json()
    );
    assert!(
        record.enforced.contains(&"cgroup-v1".to_owned()),
        "{:?}",
        record.enforced
    );
    assert_eq!(leftover_groups(), 0);
}

/// CPU time is held for the whole tree, not only per process: twenty
/// workers run one after another, each busy for half a CPU second (under
/// its own one-second limit), ten CPU seconds between them. Under
/// `cpu_seconds = 1` the tree is killed once its accounting is a quarter
/// second past the budget, at the supervisor's next look (once a second):
/// `SIGKILL` to the helper, `limit_hit: cpu`, and a handful of workers
/// done, not twenty. The count is of CPU time, which a loaded machine
/// only spreads over more wall time: at most 8 workers (four CPU seconds)
/// leaves the supervisor's look 2.75 s late.
pub fn the_cpu_time_of_the_whole_tree_is_held_to_its_limit<H: HostUnderTest>(
    host: fn(HostOptions) -> H,
) {
    let _turn = turn();
    if !machine_ready() {
        return;
    }
    let host = host(HostOptions::default());
    let base = temp_path("tree-cpu");
    std::fs::create_dir_all(&base).unwrap();
    let worker = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass";
    let workers = format!(
        "i=0; while [ $i -lt 20 ]; do python3 -c '{worker}' || exit 5; \
         echo done >> \"$1/done\"; i=$((i + 1)); done"
    );
    let command = HelperCommand::shell_script(&workers).arg(base.to_str().unwrap());
    let limited = request(command)
        .limits(limits(|l| l.cpu_seconds = Some(1)))
        .into_request();
    let outcome = wait(host.launch(limited));
    let record = &outcome.record;
    assert_eq!(
        (record.state, record.exit_signal, record.limit_hit),
        (State::FailedLocal, Some(9), Some(LimitHit::Cpu)),
        "{}",
        record.to_json()
    );
    let done = std::fs::read_to_string(base.join("done"))
        .unwrap_or_default()
        .lines()
        .count();
    let _ = std::fs::remove_dir_all(&base);
    assert!((1..=8).contains(&done), "{done} workers of 20 done");
    assert_eq!(leftover_groups(), 0);
}
