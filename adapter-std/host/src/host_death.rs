//! Helpers never outlive the host process: a small supervisor process
//! that ends every live helper's tree once the host process is gone, or
//! once a call is long past its deadline while the host is stopped.
//!
//! Dropping a `Host` cancels its calls, but a host *process* that dies
//! (SIGKILL, a crash, an abort) or exits without dropping its hosts runs no
//! destructor. So the first spawn of a process starts one supervisor: a
//! `/bin/sh` script in its own process group, whose stdin is a pipe from
//! the host process. It is told:
//!
//! * every parent directory under which the host makes control groups
//!   (`+C DIR`), before the first group is made there: the host's groups
//!   are `DIR/spillguard.<host pid>.<n>`, so a group is known to it before
//!   any helper runs in it, spare groups included;
//! * each spawned helper's process group (`+P PGID`), taken back when its
//!   call finishes (`-P PGID`, sent with the next line or at most
//!   [`RELEASE_DELAY`] later, so that a call wakes the supervisor once);
//! * a call's CPU budget for its whole tree (`+U MICROSECONDS DIR`, its
//!   v2 group), checked every second against the group's `cpu.stat`: the
//!   tree is killed once it has used it all;
//! * a call's last moment (its deadline, grace and one second more, from
//!   now): for its control groups (`+G SECONDS DIR`) before the helper
//!   runs, taken back when the call ends (`-G DIR`); for its process
//!   group (`+D PGID SECONDS`) once spawned, taken back with it.
//!
//! When the host process ends, however it ends, the kernel closes the
//! pipe's write end; the script sends SIGTERM to every listed process
//! group, waits up to [`GRACE`] for them to be gone (looking every
//! 100 ms), then kills every process of every one of the host's control
//! groups (`cgroup.kill`, or each process of a v1 group, groups below
//! included), SIGKILLs the process groups left, removes the control
//! groups, and exits. A call still running one second past its deadline
//! and grace (the host stopped with SIGSTOP, or wedged) has its tree
//! killed by the supervisor (its control groups, or its process group),
//! as its owner would have: a helper that stops its host the moment it
//! starts is known by its groups already.
//!
//! Why a supervisor and not `PR_SET_PDEATHSIG`: the death signal fires
//! when the *thread* that forked the child ends, not the process, and our
//! owners run on pooled worker threads (std) or runtime threads and
//! blocking pools (smol, tokio) that come and go; and it reaches only the
//! direct child, not the tree. The supervisor is the same on every
//! runtime, and ends whole trees.
//!
//! Its limits:
//!
//! * A helper without a control group (none could be made, or the call
//!   opted out) spawned in the instant before the host process dies,
//!   before its `+P` line is written, is not listed; nor is a descendant
//!   of such a helper that left its process group (`setsid`). Its pipes
//!   close with the host process, so its next write to them gets SIGPIPE
//!   or EPIPE.
//! * A supervisor killed on purpose (SIGKILL to it) protects nothing; a
//!   later spawn notices the broken pipe and starts a new one, told every
//!   parent, group and deadline still live.
//! * A group id whose leader was reaped while the host died, or less than
//!   [`RELEASE_DELAY`] before, and that the system gave to a new group in
//!   between could be signalled (the kernel reuses an id only once no
//!   process has it as process or group id, and rarely so soon).
//!
//! The pipe's write end is close-on-exec, so no helper inherits it (an
//! inherited end would keep the pipe open after the host died).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long the supervisor waits between SIGTERM and SIGKILL once the
/// host process is gone: the default shutdown grace.
pub const GRACE: Duration = Duration::from_secs(5);

/// The supervisor's script (`$1`: the grace in seconds, `$2`: the host's
/// pid). A ticker adds a `T` line every second to what the host writes,
/// and an `E` line marks the host's end. `p` holds the listed process
/// groups, `d` the deadlines (`PGID:TICK`), both space-separated with a
/// space at each end; `c` the parents of the host's control groups, one
/// per line. Terminal signals are ignored (it runs in its own group, but a
/// whole session may be signalled). A group whose members are gone but
/// not yet reaped still counts as alive: it gets the SIGKILL, which
/// changes nothing.
const SCRIPT: &str = r#"trap '' INT HUP QUIT
grace=$1
host=$2
nl='
'
kill_tree() {
  if [ -e "$1/cgroup.kill" ]; then echo 1 > "$1/cgroup.kill" 2>/dev/null; fi
  for s in "$1"/*/; do [ -d "$s" ] && (kill_tree "${s%/}"); done
  if [ ! -e "$1/cgroup.kill" ]; then
    for q in $(cat "$1/cgroup.procs" 2>/dev/null); do kill -s KILL "$q" 2>/dev/null; done
  fi
}
remove_tree() {
  for s in "$1"/*/; do [ -d "$s" ] && (remove_tree "${s%/}"); done
  rmdir "$1" 2>/dev/null
}
left_tree() { left=1; }
each_group() {
  IFS=$nl
  for parent in $c; do
    IFS=' '
    for g in "$parent"/spillguard."$host".*; do [ -d "$g" ] && "$1" "$g"; done
    IFS=$nl
  done
  IFS=' '
}
(
  while sleep 1; do echo T || exit 0; done &
  cat
  echo E
  kill $! 2>/dev/null
) | {
p=' '
d=' '
c=''
t=''
u=''
n=0
while read -r op a b; do
  case $op in
    +C) c="$c$a$nl" ;;
    +P) p="$p$a " ;;
    -P) case $p in *" $a "*) p="${p%% $a *} ${p#* $a }" ;; esac
        for e in $d; do case $e in "$a:"*) d="${d%% $e *} ${d#* $e }" ;; esac; done ;;
    +D) d="$d$a:$((n + b)) " ;;
    +G) t="$t$((n + a)) $b$nl" ;;
    +U) u="$u$a $b$nl" ;;
    -G) g="$a${b:+ $b}"; keep=''
        IFS=$nl
        for e in $t; do [ "${e#* }" = "$g" ] || keep="$keep$e$nl"; done
        t=$keep; keep=''
        for e in $u; do [ "${e#* }" = "$g" ] || keep="$keep$e$nl"; done
        IFS=' '
        u=$keep ;;
    T) n=$((n + 1))
       for e in $d; do
         [ "${e#*:}" -le "$n" ] || continue
         kill -s KILL -- "-${e%%:*}" 2>/dev/null
         d="${d%% $e *} ${d#* $e }"
       done
       keep=''
       IFS=$nl
       for e in $t; do
         if [ "${e%% *}" -le "$n" ]; then kill_tree "${e#* }"; else keep="$keep$e$nl"; fi
       done
       t=$keep; keep=''
       for e in $u; do
         used=0
         while IFS=' ' read -r k v; do [ "$k" = usage_usec ] && used=$v; done < "${e#* }/cpu.stat"
         if [ "$used" -ge "${e%% *}" ]; then kill_tree "${e#* }"; else keep="$keep$e$nl"; fi
       done
       IFS=' '
       u=$keep ;;
    E) break ;;
  esac
done
for x in $p; do kill -s TERM -- "-$x" 2>/dev/null; done
i=0
while [ "$i" -lt "$((grace * 10))" ]; do
  alive=''
  for x in $p; do kill -s 0 -- "-$x" 2>/dev/null && alive=1; done
  [ -n "$alive" ] || break
  if sleep 0.1 2>/dev/null; then i=$((i + 1)); else sleep 1; i=$((i + 10)); fi
done
each_group kill_tree
for x in $p; do kill -s KILL -- "-$x" 2>/dev/null; done
for attempt in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  each_group kill_tree
  each_group remove_tree
  left=''
  each_group left_tree
  [ -n "$left" ] || break
  sleep 0.1 2>/dev/null || sleep 1
done
exit 0
}
"#;

/// The process's supervisor, once started, and what it is told: the
/// listed process groups with their last moment, if any, and the parents
/// of the host's control groups.
struct Supervisor {
    link: Option<(Child, ChildStdin)>,
    groups: BTreeMap<u32, Option<Instant>>,
    /// Groups released and not yet told (`-P`): sent with the next line,
    /// or by the flusher at most [`RELEASE_DELAY`] after the first.
    released: Vec<u32>,
    /// The flusher thread runs.
    flusher: bool,
    /// The flusher waits out a delay: a release needs not wake it.
    flusher_armed: bool,
    parents: Vec<PathBuf>,
    trees: BTreeMap<PathBuf, Instant>,
    cpu: BTreeMap<PathBuf, u64>,
}

static SUPERVISOR: Mutex<Supervisor> = Mutex::new(Supervisor {
    link: None,
    groups: BTreeMap::new(),
    released: Vec::new(),
    flusher: false,
    flusher_armed: false,
    parents: Vec::new(),
    trees: BTreeMap::new(),
    cpu: BTreeMap::new(),
});

fn supervisor() -> MutexGuard<'static, Supervisor> {
    SUPERVISOR.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Names `parent`, a directory under which this process makes its
/// control groups (`spillguard.<pid>.<n>`): if this process dies, every
/// such group there has its processes killed and is removed. Told before
/// a helper runs in a group there, so no helper of a group is ever
/// unknown to the supervisor. Starts the supervisor at the first call.
pub fn watch_parent(parent: &Path) {
    let mut supervisor = supervisor();
    if supervisor.parents.iter().any(|p| p == parent) {
        return;
    }
    supervisor.parents.push(parent.to_path_buf());
    let line = parent_line(parent);
    supervisor.send(&line);
}

/// Names a call's control groups `dirs` with its last moment, `last` from
/// now (its deadline, grace and a second), before its helper runs: if the
/// call is still listed then (the host stopped or wedged), the supervisor
/// kills every process of them. [`release_tree`] takes them back.
pub fn watch_tree(dirs: &[PathBuf], last: Duration) {
    let mut supervisor = supervisor();
    let at = Instant::now() + last;
    let mut lines = String::new();
    for dir in dirs {
        supervisor.trees.insert(dir.clone(), at);
        lines.push_str(&tree_line(dir, at));
    }
    supervisor.send(&lines);
}

/// Holds the CPU time of a call's whole tree, its v2 group `dir`, to
/// `seconds`: the supervisor reads the group's `cpu.stat` every second
/// and kills every process of it once `usage_usec` is a quarter second
/// past the budget (the call's record then says `limit_hit: "cpu"`). [`release_tree`]
/// takes it back.
pub fn watch_cpu(dir: &Path, seconds: u64) {
    let mut supervisor = supervisor();
    // A quarter second past the budget: a lone process reaches its own
    // `RLIMIT_CPU` (SIGXCPU, at the budget) first, and is named by it.
    let usec = seconds.saturating_mul(1_000_000).saturating_add(250_000);
    supervisor.cpu.insert(dir.to_path_buf(), usec);
    let line = cpu_line(dir, usec);
    supervisor.send(&line);
}

/// Takes a call's control groups off the list: the call ended.
pub fn release_tree(dirs: &[PathBuf]) {
    let mut supervisor = supervisor();
    let mut lines = String::new();
    for dir in dirs {
        let listed = supervisor.trees.remove(dir).is_some();
        let held = supervisor.cpu.remove(dir).is_some();
        if (listed || held)
            && let Some(text) = dir.to_str().filter(|t| !t.contains('\n'))
        {
            lines.push_str(&format!("-G {text}\n"));
        }
    }
    if !lines.is_empty() {
        supervisor.send(&lines);
    }
}

/// Lists `pgid`, a helper's group just spawned: if this process dies
/// before [`release`], the group gets SIGTERM, then SIGKILL after
/// [`GRACE`]. With `last`, the moment the call must have ended by (its
/// deadline and grace, plus a second): if it is still listed then (the
/// host stopped or wedged), the supervisor kills the group. Starts the
/// supervisor at the first call. If no supervisor can be started, the
/// group is still listed and the next call tries again.
pub fn watch(pgid: u32, last: Option<Duration>) {
    let mut supervisor = supervisor();
    let at = last.map(|after| Instant::now() + after);
    supervisor.groups.insert(pgid, at);
    let line = group_lines(pgid, at);
    supervisor.send(&line);
}

/// Takes `pgid` off the list: its call finished, nothing of it is to be
/// signalled any more.
pub fn release(pgid: u32) {
    let mut supervisor = supervisor();
    if supervisor.groups.remove(&pgid).is_some() {
        supervisor.released.push(pgid);
        if !supervisor.flusher {
            supervisor.flusher = std::thread::Builder::new()
                .name("spillguard-supervisor-flush".into())
                .spawn(flush_releases)
                .is_ok();
            if !supervisor.flusher {
                // No thread: told at once, as every line.
                supervisor.send("");
                return;
            }
        }
        // A flusher waiting out its delay is not woken: it looks at the
        // releases when the delay is over, so calls that come often wake
        // it once per delay, not once each.
        if !supervisor.flusher_armed {
            supervisor.flusher_armed = true;
            RELEASED.notify_one();
        }
    }
}

/// How long a released group may wait to be told to the supervisor: it
/// goes with the next line sent (a spawn's `+P`, most often), so that a
/// call costs the supervisor one wake-up, not two; a release with no line
/// after it is sent alone this much later.
pub const RELEASE_DELAY: Duration = Duration::from_millis(50);

/// Wakes the flusher when a group is released.
static RELEASED: Condvar = Condvar::new();

/// The flusher thread: sends the releases still waiting
/// [`RELEASE_DELAY`] after the first of them.
fn flush_releases() {
    let mut supervisor = supervisor();
    loop {
        while !supervisor.flusher_armed {
            supervisor = RELEASED
                .wait(supervisor)
                .unwrap_or_else(PoisonError::into_inner);
        }
        // The whole delay, whatever wakes the thread: the releases go
        // with the next line sent, or at its end.
        let due = Instant::now() + RELEASE_DELAY;
        loop {
            let left = due.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            supervisor = RELEASED
                .wait_timeout(supervisor, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        if !supervisor.released.is_empty() {
            supervisor.send("");
        }
        supervisor.flusher_armed = false;
    }
}

/// The supervisor's pid, once one runs (for tests that reap it after
/// killing the host process).
pub fn supervisor_pid() -> Option<u32> {
    supervisor().link.as_ref().map(|(child, _)| child.id())
}

/// How many groups the supervisor lists now.
pub fn watched_groups() -> usize {
    supervisor().groups.len()
}

/// `+C DIR`; a directory with a line break in its name cannot be told
/// (the groups under it are still removed by the host's own exit).
fn parent_line(parent: &Path) -> String {
    match parent.to_str() {
        Some(text) if !text.contains('\n') => format!("+C {text}\n"),
        _ => String::new(),
    }
}

/// `+U MICROSECONDS DIR`; nothing for a directory with a line break in
/// its name.
fn cpu_line(dir: &Path, usec: u64) -> String {
    match dir.to_str() {
        Some(text) if !text.contains('\n') => format!("+U {usec} {text}\n"),
        _ => String::new(),
    }
}

/// `+G SECONDS DIR` (whole seconds from now, at least one); nothing for
/// a directory with a line break in its name.
fn tree_line(dir: &Path, at: Instant) -> String {
    let left = at.saturating_duration_since(Instant::now());
    let seconds = (left.as_secs() + u64::from(left.subsec_nanos() > 0)).max(1);
    match dir.to_str() {
        Some(text) if !text.contains('\n') => format!("+G {seconds} {text}\n"),
        _ => String::new(),
    }
}

/// `+P PGID`, and `+D PGID SECONDS` when the call has a last moment
/// (whole seconds from now, at least one).
fn group_lines(pgid: u32, last: Option<Instant>) -> String {
    let mut lines = format!("+P {pgid}\n");
    if let Some(at) = last {
        let left = at.saturating_duration_since(Instant::now());
        let seconds = left.as_secs() + u64::from(left.subsec_nanos() > 0);
        lines.push_str(&format!("+D {pgid} {}\n", seconds.max(1)));
    }
    lines
}

impl Supervisor {
    /// Writes `line`; a supervisor that is gone is replaced by a new one,
    /// told every parent and listed group.
    fn send(&mut self, line: &str) {
        // The releases waiting to be told go first.
        let released: String = self
            .released
            .drain(..)
            .map(|pgid| format!("-P {pgid}\n"))
            .collect();
        let lines = match released.is_empty() {
            true => std::borrow::Cow::Borrowed(line),
            false => std::borrow::Cow::Owned(released + line),
        };
        if let Some((_, stdin)) = &mut self.link
            && stdin.write_all(lines.as_bytes()).is_ok()
        {
            return;
        }
        if let Some((mut child, stdin)) = self.link.take() {
            drop(stdin);
            let _ = child.kill();
            let _ = child.wait();
        }
        let Ok((child, mut stdin)) = start() else {
            return;
        };
        let mut listed: String = self.parents.iter().map(|p| parent_line(p)).collect();
        for (dir, &at) in &self.trees {
            listed.push_str(&tree_line(dir, at));
        }
        for (dir, &usec) in &self.cpu {
            listed.push_str(&cpu_line(dir, usec));
        }
        for (&pgid, &last) in &self.groups {
            listed.push_str(&group_lines(pgid, last));
        }
        if stdin.write_all(listed.as_bytes()).is_ok() {
            self.link = Some((child, stdin));
        }
    }
}

/// Starts a supervisor in its own process group, stdin a pipe from here,
/// nothing else inherited.
fn start() -> io::Result<(Child, ChildStdin)> {
    use std::os::unix::process::CommandExt;

    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("spillguard-supervisor")
        .arg(GRACE.as_secs().to_string())
        .arg(std::process::id().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    match child.stdin.take() {
        Some(stdin) => Ok((child, stdin)),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(io::Error::other("the supervisor's stdin is missing"))
        }
    }
}
