//! Helpers never outlive the host process: a small supervisor process
//! that signals every live helper's group once the host process is gone.
//!
//! Dropping a `Host` cancels its calls, but a host *process* that dies
//! (SIGKILL, a crash, an abort) or exits without dropping its hosts runs no
//! destructor. So the first spawn of a process starts one supervisor: a
//! `/bin/sh` script in its own process group, whose stdin is a pipe from
//! the host process. Each spawned helper's group id is written to it
//! (`+pgid`) and taken back when its call finishes (`-pgid`). When the
//! host process ends, however it ends, the kernel closes the pipe's write
//! end; the script reads end-of-file, sends SIGTERM to every group still
//! listed, waits up to [`GRACE`] for them to be gone (looking every
//! 100 ms), sends SIGKILL to those left, and exits.
//!
//! Why a supervisor and not `PR_SET_PDEATHSIG`: the death signal fires
//! when the *thread* that forked the child ends, not the process, and our
//! owners run on pooled worker threads (std) or runtime threads and
//! blocking pools (smol, tokio) that come and go; it would need a
//! long-lived spawning thread and code in the child between fork and exec
//! (`pre_exec`, which is `unsafe`); and it reaches only the direct child,
//! not the group. The supervisor needs none of that, is the same on every
//! runtime and on every Unix with a POSIX `sh`, and signals whole groups.
//!
//! Its limits:
//!
//! * A helper spawned in the instant before the host process dies, before
//!   its `+pgid` line is written, is not listed.
//! * Only the helper's group is signalled: a descendant that left it
//!   (`setsid`) is not. Its pipes close with the host process, so its next
//!   write to them gets SIGPIPE or EPIPE.
//! * A supervisor killed on purpose (SIGKILL to it) protects nothing; a
//!   later spawn notices the broken pipe and starts a new one with the
//!   groups still live.
//! * The group ids come from the host's own spawns and are taken back when
//!   a call finishes; a group whose leader was reaped while the host died
//!   and whose id the system gave to a new group in between could be
//!   signalled (the kernel reuses an id only once no process has it as
//!   process or group id, and rarely so soon).
//! * A host process stopped (SIGSTOP) is not dead: nothing happens.
//!
//! The pipe's write end is close-on-exec, so no helper inherits it (an
//! inherited end would keep the pipe open after the host died).

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long the supervisor waits between SIGTERM and SIGKILL once the
/// host process is gone: the default shutdown grace.
pub const GRACE: Duration = Duration::from_secs(5);

/// The supervisor's script (`$1`: the grace in seconds). `g` holds the
/// listed groups, space-separated with a space at each end; terminal
/// signals are ignored (it runs in its own group, but a whole session may
/// be signalled). A group whose members are gone but not yet reaped still
/// counts as alive: it gets the SIGKILL, which changes nothing.
const SCRIPT: &str = r#"trap '' INT HUP QUIT
g=' '
while read -r op; do
  case $op in
    +*) g="$g${op#+} " ;;
    -*) p=${op#-}
        case $g in *" $p "*) g="${g%% $p *} ${g#* $p }" ;; esac ;;
  esac
done
[ "$g" = ' ' ] && exit 0
for p in $g; do kill -s TERM -- "-$p" 2>/dev/null; done
i=0
while [ "$i" -lt "$(($1 * 10))" ]; do
  alive=''
  for p in $g; do kill -s 0 -- "-$p" 2>/dev/null && alive=1; done
  [ -n "$alive" ] || exit 0
  if sleep 0.1 2>/dev/null; then i=$((i + 1)); else sleep 1; i=$((i + 10)); fi
done
for p in $g; do kill -s KILL -- "-$p" 2>/dev/null; done
exit 0
"#;

/// The process's supervisor, once started, and the groups it lists.
struct Supervisor {
    link: Option<(Child, ChildStdin)>,
    groups: BTreeSet<u32>,
}

static SUPERVISOR: Mutex<Supervisor> = Mutex::new(Supervisor {
    link: None,
    groups: BTreeSet::new(),
});

fn supervisor() -> MutexGuard<'static, Supervisor> {
    SUPERVISOR.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Lists `pgid`, a helper's group just spawned: if this process dies
/// before [`release`], the group gets SIGTERM, then SIGKILL after
/// [`GRACE`]. Starts the supervisor at the first call. If no supervisor
/// can be started, the group is still listed and the next call tries
/// again.
pub fn watch(pgid: u32) {
    let mut supervisor = supervisor();
    supervisor.groups.insert(pgid);
    supervisor.send(&format!("+{pgid}\n"));
}

/// Takes `pgid` off the list: its call finished, nothing of it is to be
/// signalled any more.
pub fn release(pgid: u32) {
    let mut supervisor = supervisor();
    if supervisor.groups.remove(&pgid) {
        supervisor.send(&format!("-{pgid}\n"));
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

impl Supervisor {
    /// Writes `line`; a supervisor that is gone is replaced by a new one,
    /// told every listed group.
    fn send(&mut self, line: &str) {
        if let Some((_, stdin)) = &mut self.link
            && stdin.write_all(line.as_bytes()).is_ok()
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
        let listed: String = self.groups.iter().map(|g| format!("+{g}\n")).collect();
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
