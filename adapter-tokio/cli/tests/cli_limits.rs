//! `spillguard run` and `stdio` with limits and a sandbox, on the real
//! kernel (root, cgroups and Landlock, as in CI): the limit each helper
//! hits, the tree killed as one, the fail-closed refusal, and the flags'
//! one-line errors.
#![allow(clippy::unwrap_used)]

mod binary;

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use binary::{spillguard, usage_failure};
use serde_json::Value;

/// Whether this machine can run the checks (root, cgroups); in CI it
/// must.
fn ready() -> bool {
    let root = rustix::process::geteuid().is_root();
    if root && std::path::Path::new("/sys/fs/cgroup").exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "these checks need root and cgroups in CI"
    );
    eprintln!("skipped: these checks need root and cgroups");
    false
}

/// The record line of a run that printed one.
fn record(output: &Output) -> Value {
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "{output:?}");
    serde_json::from_str(text.trim_end()).unwrap()
}

/// The processes whose command line holds `marker`.
fn processes_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| {
            entry.file_name().to_string_lossy().parse::<u32>().is_ok()
                && std::fs::read(entry.path().join("cmdline"))
                    .is_ok_and(|c| c.windows(marker.len()).any(|w| w == marker.as_bytes()))
        })
        .count()
}

/// A copy of the binary that nobody can run, wherever the checkout is,
/// in a directory of its own (`name`, under the temp dir), and a way to
/// run it as nobody: `spillguard ARGS` from `/`, stdin null.
struct AsNobody {
    dir: PathBuf,
    binary: PathBuf,
}

impl AsNobody {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let binary = dir.join("spillguard");
        std::fs::copy(env!("CARGO_BIN_EXE_spillguard"), &binary).unwrap();
        AsNobody { dir, binary }
    }

    fn run(&self, args: &[&std::ffi::OsStr]) -> Output {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&self.binary)
            .args(args)
            .current_dir("/")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

impl Drop for AsNobody {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `words` as command-line arguments.
fn os(words: &[&str]) -> Vec<std::ffi::OsString> {
    words.iter().map(std::ffi::OsString::from).collect()
}

#[test]
fn memory_max_ends_a_helper_that_allocates_4_gib_with_limit_hit_memory() {
    if !ready() {
        return;
    }
    let output = spillguard(&[
        "run",
        "--memory-max",
        "256M",
        "--",
        "/usr/bin/python3",
        "-c",
        "x = bytearray(4 << 30); x[::4096] = b'x' * (1 << 20)",
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let line = record(&output);
    assert_eq!(line["state"], "failed_local");
    assert_eq!(line["exit_signal"], 9);
    assert_eq!(line["limit_hit"], "memory");
    assert_eq!(line["limits"]["memory_max"], 268_435_456);
    assert!(line["tree_peak_memory_bytes"].as_u64().unwrap() <= 268_435_456);
    assert_eq!(line["not_enforced"], serde_json::json!([]));
}

#[test]
fn pids_max_contains_a_fork_bomb_and_nothing_of_it_survives() {
    if !ready() {
        return;
    }
    let marker = format!("cli-bomb-{}", std::process::id());
    let output = spillguard(&[
        "run",
        "--pids-max",
        "64",
        "--deadline-ms",
        "2000",
        "--",
        "sh",
        "-c",
        "b() { while :; do b & b & wait; done; }; b 2>/dev/null",
        &marker,
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let line = record(&output);
    assert_eq!(line["limit_hit"], "pids", "{line}");
    assert!(
        line["tree_peak_pids"].as_u64().is_none_or(|p| p <= 64),
        "{line}"
    );
    assert_eq!(processes_with(&marker), 0);
}

#[test]
fn cpu_seconds_ends_a_busy_loop_with_limit_hit_cpu() {
    if !ready() {
        return;
    }
    let output = spillguard(&[
        "run",
        "--cpu-seconds",
        "1",
        "--",
        "sh",
        "-c",
        "while :; do :; done",
    ]);
    let line = record(&output);
    assert_eq!(line["state"], "failed_local");
    assert_eq!(line["exit_signal"], 24);
    assert_eq!(line["limit_hit"], "cpu");
}

#[test]
fn network_none_leaves_only_loopback() {
    if !ready() {
        return;
    }
    let output = spillguard(&[
        "run",
        "--network",
        "none",
        "--",
        "sh",
        "-c",
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
    ]);
    let line = record(&output);
    assert_eq!(line["stdout"], "lo\n");
    assert!(
        line["enforced"]
            .as_array()
            .unwrap()
            .contains(&"netns".into())
    );
    assert_eq!(line["sandbox"]["network"], "none");
}

#[test]
fn a_setsid_escapee_of_a_stdio_server_is_gone_when_the_call_ends() {
    if !ready() {
        return;
    }
    let marker = format!("cli-escapee-{}", std::process::id());
    let mut child = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(["stdio", "--contain-tree", "--", "sh", "-c"])
        .arg("setsid sh -c 'sleep 30; : \"$1\"' sh \"$1\" </dev/null >/dev/null 2>&1 & cat >/dev/null")
        .arg(&marker)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    // The server (its `$1`) and its escapee.
    assert_eq!(processes_with(&marker), 2);
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    let text = String::from_utf8(output.stderr).unwrap();
    let line: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(line["state"], "completed", "{line}");
    assert_eq!(line["tree_kill"], "cgroup-v2");
    assert_eq!(processes_with(&marker), 0);
}

/// As a user who may make no control group (nobody), a memory limit
/// cannot be enforced: nothing runs, one line says why, exit status 4;
/// with `--allow-degraded` the helper runs and the record lists it.
#[test]
fn a_limit_the_host_cannot_enforce_refuses_the_call_unless_degraded_is_allowed() {
    if !ready() {
        return;
    }
    let nobody = AsNobody::new("spillguard-nobody");
    let marker = nobody.dir.join("ran");
    let as_nobody = |extra: &[&str]| {
        let args = [
            os(&["run", "--memory-max", "256M"]),
            os(extra),
            os(&["--", "sh", "-c", "echo ran"]),
        ]
        .concat();
        nobody.run(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>())
    };
    let refused = as_nobody(&[]);
    assert_eq!(refused.status.code(), Some(4), "{refused:?}");
    let stderr = String::from_utf8(refused.stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("spillguard: nothing ran: memory-max: cannot be enforced: "),
        "{stderr}"
    );
    assert!(
        stderr
            .trim_end()
            .ends_with("Permission denied (os error 13)"),
        "{stderr}"
    );
    let line = record(&refused);
    assert_eq!(line["state"], "failed_before_dispatch");
    assert_eq!(line["pid"], Value::Null);
    assert_eq!(line["stdout"], "");

    let degraded = as_nobody(&["--allow-degraded"]);
    assert_eq!(degraded.status.code(), Some(0), "{degraded:?}");
    let line = record(&degraded);
    assert_eq!(line["state"], "completed");
    assert_eq!(line["stdout"], "ran\n");
    let not_enforced = line["not_enforced"].as_array().unwrap();
    assert_eq!(not_enforced.len(), 1);
    assert!(
        not_enforced[0]
            .as_str()
            .unwrap()
            .starts_with("memory-max: cannot be enforced: ")
    );
    assert_eq!(line["tree_kill"], "process-group");
    assert!(!marker.exists());
}

#[test]
fn bad_limits_and_sandbox_flags_are_one_line_errors_and_nothing_runs() {
    let cases: [(&[&str], &str); 8] = [
        (
            &["--memory-max", "1.5G"],
            "`--memory-max`: \"1.5G\" is not a size (a whole number with K, M, G or T: 256M, 2G)",
        ),
        (
            &["--memory-max", "0"],
            "`--memory-max`: 0 would leave the helper nothing (leave the option out for no limit)",
        ),
        (
            &["--pids-max", "-3"],
            "`--pids-max`: `-3` is not a non-negative integer",
        ),
        (
            &["--cpu-seconds", "0"],
            "`--cpu-seconds`: 0 would leave the helper nothing (leave the option out for no limit)",
        ),
        (
            &["--read-only", "/nonexistent/spillguard"],
            "`--read-only`: `/nonexistent/spillguard`: No such file or directory (os error 2)",
        ),
        (
            &["--connect-port", "65536"],
            "`--connect-port`: `65536` is not a TCP port (1 to 65535)",
        ),
        (
            &["--connect-port", "0"],
            "`--connect-port`: `0` is not a TCP port (1 to 65535)",
        ),
        (
            &["--network", "off"],
            "`--network`: `off` is not a network mode (only `none`)",
        ),
    ];
    let marker = std::env::temp_dir().join(format!("spillguard-badflag-{}", std::process::id()));
    for (flags, message) in cases {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        let touch = format!("touch {}", marker.display());
        args.extend_from_slice(&["--", "sh", "-c", &touch]);
        let error = usage_failure(&args);
        assert!(error.ends_with(message), "{flags:?}: {error}");
        assert!(!marker.exists());
    }
    let _ = std::io::stderr().flush();
}

/// A bounded run leaves no control group once the command has exited:
/// its call's groups and the empty ones kept ready for a next call are
/// removed at the process's exit.
#[test]
fn a_bounded_run_leaves_no_control_group_after_its_exit() {
    if !ready() {
        return;
    }
    let child = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args([
            "run",
            "--memory-max",
            "64M",
            "--pids-max",
            "16",
            "--",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let prefix = format!("spillguard.{}.", child.id());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let line = record(&output);
    assert_eq!(line["state"], "completed");
    let mut left = Vec::new();
    let mut dirs = vec![PathBuf::from("/sys/fs/cgroup")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                left.push(entry.path());
            } else if dir.components().count() < 8 {
                dirs.push(entry.path());
            }
        }
    }
    assert_eq!(left, Vec::<PathBuf>::new());
}

/// As an unprivileged user (nobody), a sandboxed helper is held the same
/// way as root's: its own session, no unix socket outside the sandbox
/// (the socket file is open to everyone, so only the sandbox refuses it),
/// no signal to its host, no descriptor the host leaked; the record names
/// the mechanisms (no capability to drop). The same helper without a
/// sandbox connects: the check can fail.
#[test]
fn as_nobody_a_sandboxed_helper_reaches_no_unix_socket_and_no_host() {
    use std::os::unix::net::UnixListener;
    if !ready() {
        return;
    }
    let nobody = AsNobody::new("sg-nobody-doors");
    let socket = nobody.dir.join("host.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    let probe = "import errno, os, socket, sys\n\
                 def attempt(f):\n\
                 \x20   try:\n\
                 \x20       f()\n\
                 \x20       return 'ok'\n\
                 \x20   except OSError as e:\n\
                 \x20       return errno.errorcode.get(e.errno, str(e.errno))\n\
                 print('unix', attempt(lambda: socket.socket(socket.AF_UNIX).connect(sys.argv[1])))\n\
                 print('signal-host', attempt(lambda: os.kill(os.getppid(), 0)))\n\
                 print('own-session', os.getsid(0) == os.getpid())\n\
                 print('descriptors', sorted(int(n) for n in os.listdir('/proc/self/fd'))[:4])\n";
    let as_nobody = |sandbox: &[&str]| {
        let args = [
            os(&["run"]),
            os(sandbox),
            os(&["--", "/usr/bin/python3", "-c", probe]),
            vec![socket.clone().into_os_string()],
        ]
        .concat();
        nobody.run(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>())
    };
    let held = as_nobody(&["--read-only", "/usr", "--read-only", "/proc"]);
    assert_eq!(held.status.code(), Some(0), "{held:?}");
    let line = record(&held);
    assert_eq!(
        line["stdout"],
        "unix EACCES\nsignal-host EPERM\nown-session True\ndescriptors [0, 1, 2, 3]\n"
    );
    let enforced: Vec<&str> = line["enforced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(
        enforced,
        ["rlimit", "seccomp", "landlock-abi-6", "no-new-privs"],
        "{line}"
    );
    let open = as_nobody(&[]);
    let line = record(&open);
    assert_eq!(
        line["stdout"],
        "unix ok\nsignal-host ok\nown-session False\ndescriptors [0, 1, 2, 3]\n"
    );
}

/// The control groups named `spillguard.<pid>.*` of process `pid`, in
/// every hierarchy (two levels of v1 groups included).
fn groups_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("spillguard.{pid}.");
    let mut found = Vec::new();
    let mut dirs = vec![PathBuf::from("/sys/fs/cgroup")];
    let mut depth = 0;
    while !dirs.is_empty() && depth < 8 {
        let mut next = Vec::new();
        for dir in dirs {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                if entry.file_name().to_string_lossy().starts_with(&prefix) {
                    found.push(path);
                } else {
                    next.push(path);
                }
            }
        }
        dirs = next;
        depth += 1;
    }
    found
}

/// A helper that kills its host at once, as a hostile tool would to
/// escape: with no flag (the tree contained by default), its `setsid`
/// grandchild is killed and the host's groups removed by the supervisor,
/// 100 times over: 0 survivors and 0 groups 5 s later.
#[test]
fn a_helper_that_kills_its_host_leaves_no_survivor_and_no_group() {
    if !ready() {
        return;
    }
    let marker = format!("host-killed-{}", std::process::id());
    let mut hosts = Vec::new();
    for _ in 0..100 {
        let script = format!(
            "setsid sh -c 'sleep 44; : {marker}' </dev/null >/dev/null 2>&1 & kill -9 $PPID"
        );
        let host = Command::new(env!("CARGO_BIN_EXE_spillguard"))
            .args(["run", "--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        hosts.push(host);
    }
    let mut pids = Vec::new();
    for mut host in hosts {
        pids.push(host.id());
        let status = host.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let (mut survivors, mut groups) = (usize::MAX, usize::MAX);
    while std::time::Instant::now() < until {
        survivors = processes_with(&marker);
        groups = pids.iter().map(|&pid| groups_of(pid).len()).sum();
        if survivors == 0 && groups == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        (survivors, groups),
        (0, 0),
        "survivors and groups left 5 s after"
    );
}

/// A helper that stops its host (SIGSTOP) to outlive its deadline is
/// killed by the supervisor within deadline + grace + 1 s (and its tick),
/// though the host never wakes to do it.
#[test]
fn a_helper_that_stops_its_host_is_killed_past_its_deadline() {
    if !ready() {
        return;
    }
    // The sleeper's command line (`sleep 30.PID`) is put together by the
    // shell, so that the host's own does not hold it.
    let marker = format!("30.{}", std::process::id());
    let script = format!(
        "kill -STOP $PPID; a=3; exec sleep \"$a\"0.{}",
        std::process::id()
    );
    let started = std::time::Instant::now();
    let host = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(["run", "--deadline-ms", "1000", "--grace-ms", "500", "--"])
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = started + std::time::Duration::from_secs(10);
    while processes_with(&marker) == 0 && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(processes_with(&marker), 1, "the helper runs");
    while processes_with(&marker) > 0 && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let ended = started.elapsed();
    assert_eq!(processes_with(&marker), 0);
    // deadline 1 s + grace 0.5 s + 1 s, plus at most a tick of 1 s.
    assert!(ended < std::time::Duration::from_millis(3_800), "{ended:?}");
    assert!(
        ended >= std::time::Duration::from_millis(2_400),
        "{ended:?}"
    );
    let pid = rustix::process::Pid::from_raw(host.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).unwrap();
    let output = host.wait_with_output().unwrap();
    let line = record(&output);
    assert_eq!(line["exit_signal"], 9, "{line}");
}

/// `--contain-tree` requires the group: as nobody (no group can be made
/// here) the call is refused with one line, exit 4; with
/// `--allow-degraded` it runs and lists the line. With no flag the call
/// runs as before, `tree_kill: process-group`, nothing listed.
/// `--no-contain-tree` beside a memory limit is a usage error.
#[test]
fn contain_tree_is_required_when_asked_and_best_effort_otherwise() {
    if !ready() {
        return;
    }
    let nobody = AsNobody::new("sg-contain");
    let as_nobody = |flags: &[&str]| {
        let args = [os(&["run"]), os(flags), os(&["--", "sh", "-c", "echo ran"])].concat();
        nobody.run(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>())
    };
    let refused = as_nobody(&["--contain-tree"]);
    assert_eq!(refused.status.code(), Some(4), "{refused:?}");
    let stderr = String::from_utf8(refused.stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(
            "spillguard: nothing ran: contain-tree: cannot be enforced: no control group can be made: "
        ),
        "{stderr}"
    );
    assert_eq!(record(&refused)["state"], "failed_before_dispatch");

    let degraded = as_nobody(&["--contain-tree", "--allow-degraded"]);
    let line = record(&degraded);
    assert_eq!(
        (line["state"].as_str(), line["stdout"].as_str()),
        (Some("completed"), Some("ran\n"))
    );
    let not_enforced = line["not_enforced"].as_array().unwrap();
    assert_eq!(not_enforced.len(), 1, "{line}");
    assert!(
        not_enforced[0]
            .as_str()
            .unwrap()
            .starts_with("contain-tree: cannot be enforced: ")
    );
    assert_eq!(line["tree_kill"], "process-group");

    let default = as_nobody(&[]);
    let line = record(&default);
    assert_eq!(line["state"], "completed");
    assert_eq!(line["tree_kill"], "process-group");
    assert_eq!(line["not_enforced"], serde_json::json!([]));
    assert_eq!(line["enforced"], serde_json::json!([]));

    // As root: contained with no flag; not with --no-contain-tree.
    let contained = spillguard(&["run", "--", "true"]);
    assert_eq!(record(&contained)["tree_kill"], "cgroup-v2");
    let opted_out = spillguard(&["run", "--no-contain-tree", "--", "true"]);
    assert_eq!(record(&opted_out)["tree_kill"], "process-group");
}

/// A stop's SIGTERM reaches each process of a contained tree once: the
/// helper through its process group, an escapee that left the group
/// (`setsid`) and a child in a group of its own (`setpgid`) through the
/// tree. A second SIGTERM is "quit now, skip the cleanup" to many
/// programs. Twenty runs, four at a time, each stopped (SIGINT to
/// `spillguard run`) once the three processes handle SIGTERM: a
/// second signal reached the helper only when it handled the first
/// before the second came.
#[test]
fn a_stop_signals_each_process_of_the_tree_once() {
    if !ready() {
        return;
    }
    const SCRIPT: &str = "import os, signal, sys, time
out = sys.argv[1]
role = 'helper'
if os.fork() == 0:
    os.setsid()
    role = 'escapee'
elif os.fork() == 0:
    os.setpgid(0, 0)
    role = 'own-group'
stop = []
def note(line):
    with open(out, 'a') as lines:
        lines.write(line + '\\n')
def on_term(number, frame):
    note('term ' + role)
    if not stop:
        stop.append(time.monotonic() + 0.1)
signal.signal(signal.SIGTERM, on_term)
note('ready ' + role)
while not stop or time.monotonic() < stop[0]:
    time.sleep(0.001)
";
    let dir = std::env::temp_dir().join(format!("sg-term-once-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stopped_once_ready = |file: PathBuf| {
        let child = Command::new(env!("CARGO_BIN_EXE_spillguard"))
            .args(["run", "--contain-tree", "--grace-ms", "5000", "--"])
            .args(["python3", "-c", SCRIPT])
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let lines = || std::fs::read_to_string(&file).unwrap_or_default();
        while lines().lines().filter(|l| l.starts_with("ready ")).count() < 3 {
            assert!(started.elapsed().as_secs() < 30, "not ready: {:?}", lines());
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let pid = rustix::process::Pid::from_child(&child);
        rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
        let output = child.wait_with_output().unwrap();
        let terms: Vec<String> = lines()
            .lines()
            .filter_map(|l| l.strip_prefix("term ").map(str::to_owned))
            .collect();
        (record(&output), terms)
    };
    let runs: Vec<(Value, Vec<String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|worker| {
                let (dir, stopped_once_ready) = (&dir, &stopped_once_ready);
                scope.spawn(move || {
                    (0..5)
                        .map(|run| stopped_once_ready(dir.join(format!("{worker}-{run}"))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(runs.len(), 20);
    for (line, mut terms) in runs {
        assert_eq!(
            (&line["state"], &line["cancel_reason"]),
            (&"cancelled_after_dispatch".into(), &"requested".into()),
            "{line}"
        );
        terms.sort_unstable();
        assert_eq!(terms, ["escapee", "helper", "own-group"], "{line}");
    }
}
