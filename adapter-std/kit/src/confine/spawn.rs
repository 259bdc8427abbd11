//! The spawn of a confined helper, the same for every runtime: the child
//! shares the host's memory until it execs (`CLONE_VM | CLONE_VFORK`, as
//! `posix_spawn` does), takes its confinement steps on a stack of its
//! own, and the host gets a pidfd for it (`CLONE_PIDFD`). With a v2 group
//! to join, the clone puts the child in it (`clone3` with
//! `CLONE_INTO_CGROUP`): a write to `cgroup.procs` would wait for an RCU
//! grace period.
//!
//! A `pre_exec` step would make the standard library fork instead, which
//! copies the host's page tables (about 300 µs per spawn here, more for a
//! bigger host). Everything the child needs is made before the clone:
//! the program's path, `argv` and `envp` as C strings, its standard
//! streams, the confinement's descriptors and numbers. The child then only
//! makes system calls, on its own stack, with every signal blocked until
//! their handlers are reset; the first step that fails has its `errno`
//! reported to the host (in the memory they share) and the child exits:
//! the spawn fails with that error and nothing runs.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use super::ChildSetup;
use crate::command::{HelperCommand, StdinMode};

/// The child's stack while it shares the host's memory.
const CHILD_STACK_BYTES: usize = 128 * 1024;

/// A confined helper, spawned: its pid (its process group id too), a pidfd
/// that waits for it without any risk of reuse, and the host's ends of its
/// pipes.
#[derive(Debug)]
pub struct RawChild {
    /// The helper's pid, which is also its process group id.
    pub pid: u32,
    /// A pidfd for the helper: readable once it has exited; [`try_reap`]
    /// and [`reap`] collect its status.
    pub pidfd: OwnedFd,
    /// The write end of its stdin, when the command's mode makes a pipe.
    pub stdin: Option<ChildStdin>,
    /// The read end of its stdout.
    pub stdout: ChildStdout,
    /// The read end of its stderr.
    pub stderr: ChildStderr,
}

/// The exit of the child `pidfd` names, if it has exited (it is reaped).
pub fn try_reap(pidfd: BorrowedFd<'_>) -> io::Result<Option<ExitStatus>> {
    wait(pidfd, rustix::process::WaitIdOptions::NOHANG)
}

/// Waits for the child `pidfd` names to exit and reaps it.
pub fn reap(pidfd: BorrowedFd<'_>) -> io::Result<ExitStatus> {
    loop {
        match wait(pidfd, rustix::process::WaitIdOptions::empty()) {
            Ok(Some(status)) => return Ok(status),
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn wait(
    pidfd: BorrowedFd<'_>,
    options: rustix::process::WaitIdOptions,
) -> io::Result<Option<ExitStatus>> {
    use rustix::process::{WaitId, WaitIdOptions, waitid};
    let Some(status) = waitid(WaitId::PidFd(pidfd), WaitIdOptions::EXITED | options)? else {
        return Ok(None);
    };
    // As `wait` encodes it: the code in the second byte, or the signal
    // (with 0x80 if it dumped core).
    let raw = match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => (code & 0xff) << 8,
        (None, Some(signal)) => signal | if status.dumped() { 0x80 } else { 0 },
        (None, None) => return Ok(None),
    };
    Ok(Some(ExitStatus::from_raw(raw)))
}

/// What the child reads, made by the host before the clone.
struct Exec {
    /// The file to exec (or, without a `/`, the name `execvp` looks up).
    path: CString,
    argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    envp: Vec<CString>,
    envp_ptrs: Vec<*const libc::c_char>,
    cwd: Option<CString>,
    /// The child's ends of stdin, stdout and stderr (each 3 or more, so
    /// that no `dup2` overwrites another's source).
    stdio: [OwnedFd; 3],
    setup: ChildSetup,
    /// The `errno` of the step that failed; 0 until one does.
    error: AtomicI32,
    /// The clone put the child in the call's v2 group.
    in_group: AtomicBool,
}

/// Spawns `command` with `setup`'s steps; see the module docs.
pub(crate) fn spawn(command: &HelperCommand, setup: ChildSetup) -> io::Result<RawChild> {
    let (path, argv) = program_and_argv(command, setup.program.as_deref().map(|p| p.as_os_str()))?;
    let envp = environment(command)?;
    let cwd = command
        .cwd
        .as_deref()
        .map(|d| c_string(d.as_os_str()))
        .transpose()?;
    let (stdin_child, stdin) = match command.stdin {
        StdinMode::Bytes(_) | StdinMode::Streamed => {
            let (read, write) = pipe()?;
            (read, Some(write))
        }
        _ => (
            rustix::fs::open(
                "/dev/null",
                rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )?,
            None,
        ),
    };
    let (stdout, stdout_child) = pipe()?;
    let (stderr, stderr_child) = pipe()?;
    let mut exec = Exec {
        path,
        argv_ptrs: Vec::new(),
        argv,
        envp_ptrs: Vec::new(),
        envp,
        cwd,
        stdio: [
            above_stdio(stdin_child)?,
            above_stdio(stdout_child)?,
            above_stdio(stderr_child)?,
        ],
        setup,
        error: AtomicI32::new(0),
        in_group: AtomicBool::new(false),
    };
    exec.argv_ptrs = pointers(&exec.argv);
    exec.envp_ptrs = pointers(&exec.envp);
    let (pid, pidfd) = clone_child(&exec)?;
    match exec.error.load(Ordering::Acquire) {
        0 => Ok(RawChild {
            pid,
            pidfd,
            stdin: stdin.map(ChildStdin::from),
            stdout: ChildStdout::from(stdout),
            stderr: ChildStderr::from(stderr),
        }),
        errno => {
            // The child exited without exec: reap it.
            let _ = reap(pidfd.as_fd());
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

/// The file to exec and `argv`: `/bin/sh -c SCRIPT sh ARGS` for a shell
/// command, else the program (the file the host resolved it to, if
/// given) with the name it was called by as `argv[0]`.
fn program_and_argv(
    command: &HelperCommand,
    resolved: Option<&OsStr>,
) -> io::Result<(CString, Vec<CString>)> {
    let mut argv = Vec::with_capacity(command.args.len() + 4);
    let path = if command.shell {
        argv.push(c_string(OsStr::new("/bin/sh"))?);
        argv.push(c_string(OsStr::new("-c"))?);
        argv.push(c_string(&command.program)?);
        argv.push(c_string(OsStr::new("sh"))?);
        c_string(OsStr::new("/bin/sh"))?
    } else {
        argv.push(c_string(&command.program)?);
        c_string(resolved.unwrap_or(&command.program))?
    };
    for arg in &command.args {
        argv.push(c_string(arg)?);
    }
    Ok((path, argv))
}

/// The helper's environment: this process's (unless cleared), less the
/// names removed, with the command's own set, as `KEY=VALUE`.
fn environment(command: &HelperCommand) -> io::Result<Vec<CString>> {
    let mut env: std::collections::BTreeMap<OsString, OsString> = if command.env_clear {
        std::collections::BTreeMap::new()
    } else {
        std::env::vars_os().collect()
    };
    for key in &command.env_remove {
        env.remove(key);
    }
    for (key, value) in &command.env {
        env.insert(key.clone(), value.clone());
    }
    env.into_iter()
        .map(|(key, value)| {
            let mut pair = key;
            pair.push("=");
            pair.push(value);
            c_string(&pair)
        })
        .collect()
}

fn c_string(text: &OsStr) -> io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a NUL byte in the helper's command",
        )
    })
}

/// A null-terminated array of the strings' pointers (valid while they
/// live).
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

/// `fd` as a descriptor of 3 or more (a host whose own standard streams
/// are closed gets 0, 1 or 2 from `pipe`).
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 3)?)
}

/// The clone itself: `exec`'s child on a stack of its own, the host
/// suspended until the child execs or exits. Returns the pid and pidfd.
/// With a v2 group to join, the child is cloned into it (`clone3` with
/// `CLONE_INTO_CGROUP`) where the kernel and the architecture allow, else
/// cloned as usual to write to the group's `cgroup.procs` itself.
#[allow(unsafe_code)]
fn clone_child(exec: &Exec) -> io::Result<(u32, OwnedFd)> {
    let mut stack = vec![0_u8; CHILD_STACK_BYTES];
    // The stack grows down: its top, 16-byte aligned.
    let top = stack.as_mut_ptr_range().end as usize & !15;
    let base = stack.as_ptr() as usize;
    let mut pidfd: libc::c_int = -1;
    let arg = std::ptr::from_ref(exec).cast_mut().cast::<libc::c_void>();
    // SAFETY: every signal is blocked around the clone, so no handler of
    // the host runs on the child's stack or in its shared memory; the mask
    // is restored below, in the host, whatever the clone did. `exec` and
    // `stack` outlive the child's use of them: CLONE_VFORK suspends this
    // thread until the child has exec'd or exited. The child (`child_main`)
    // only makes system calls on values made before the clone.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut pid = -1;
        if let Some(group) = &exec.setup.cgroup {
            exec.in_group.store(true, Ordering::Release);
            pid = clone_into_group(group.as_raw_fd(), base, top - base, &mut pidfd, arg);
            if pid < 0 {
                exec.in_group.store(false, Ordering::Release);
            }
        }
        if pid < 0 {
            let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
            pid = libc::clone(child_main, top as *mut libc::c_void, flags, arg, &mut pidfd);
        }
        let error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(error);
        }
        pid
    };
    drop(stack);
    // SAFETY: CLONE_PIDFD stored a new descriptor this process owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok((u32::try_from(pid).unwrap_or_default(), pidfd))
}

/// `clone3`'s arguments (`struct clone_args`, as of Linux 5.7).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP` (Linux 5.7).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Whether `clone3` into a group failed once for a reason that will not
/// change (no `clone3`, or no `CLONE_INTO_CGROUP`): then it is not tried.
static NO_CLONE_INTO_GROUP: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// `clone3(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP)`:
/// `child_main(arg)` runs in the group `group` on the stack `[base, base +
/// size)`. Returns the pid, or -1 when the clone could not be made (the
/// caller clones as usual then).
///
/// # Safety
///
/// As for `libc::clone`: the stack and `arg` stay valid until the child
/// has exec'd or exited, and the caller has blocked every signal.
#[allow(unsafe_code)]
unsafe fn clone_into_group(
    group: RawFd,
    base: usize,
    size: usize,
    pidfd: &mut libc::c_int,
    arg: *mut libc::c_void,
) -> libc::c_int {
    if NO_CLONE_INTO_GROUP.load(Ordering::Relaxed) {
        return -1;
    }
    let mut args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD) as u64 | CLONE_INTO_CGROUP,
        pidfd: std::ptr::from_mut(pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: base as u64,
        stack_size: size as u64,
        cgroup: group as u64,
        ..CloneArgs::default()
    };
    // SAFETY: the caller's promises, and `args` lives across the call.
    let pid = unsafe { clone3_vm(&mut args, child_main, arg) };
    if pid >= 0 {
        return libc::c_int::try_from(pid).unwrap_or(-1);
    }
    let errno = libc::c_int::try_from(-pid).unwrap_or(libc::EINVAL);
    if matches!(errno, libc::ENOSYS | libc::E2BIG | libc::EINVAL) {
        NO_CLONE_INTO_GROUP.store(true, Ordering::Relaxed);
    }
    -1
}

/// The raw `clone3` for a child that shares the host's memory: the child
/// starts on the stack `args` names with no frame to return to, so this
/// calls `child(arg)` there and exits with its value. Returns the pid or
/// `-errno`.
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
#[allow(unsafe_code)]
unsafe fn clone3_vm(
    args: &mut CloneArgs,
    child: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> isize {
    let ret: isize;
    // SAFETY: the system call's registers as the kernel reads them; the
    // child (rax 0) never leaves the block: it calls `child` on its own
    // stack (16-byte aligned, so aligned at the call as the ABI wants) and
    // exits. `r12` and `r13` keep `child` and `arg` across the syscall in
    // both processes; the syscall clobbers `rcx` and `r11`.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "mov edi, eax",
            "mov eax, 60",
            "syscall",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") std::ptr::from_mut(args),
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") child,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// Where the kit has no `clone3` of its own: the usual clone is used.
#[cfg(not(all(target_arch = "x86_64", target_pointer_width = "64")))]
#[allow(unsafe_code)]
unsafe fn clone3_vm(
    _args: &mut CloneArgs,
    _child: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    _arg: *mut libc::c_void,
) -> isize {
    -(libc::ENOSYS as isize)
}

/// The child, until exec: see the module docs. Never returns on success.
#[allow(unsafe_code)]
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Exec` the host made, alive while it is
    // suspended (CLONE_VFORK).
    let exec = unsafe { &*arg.cast_const().cast::<Exec>() };
    let failed = |error: io::Error| -> libc::c_int {
        exec.error.store(
            error.raw_os_error().unwrap_or(libc::EINVAL),
            Ordering::Release,
        );
        // SAFETY: ends the child without running anything of the host's.
        unsafe { libc::_exit(127) }
    };
    // SAFETY: plain system calls on descriptors and strings made before
    // the clone; nothing allocates, locks or unwinds.
    unsafe {
        for (fd, target) in exec.stdio.iter().zip(0..) {
            if libc::dup2(fd.as_raw_fd(), target as RawFd) < 0 {
                return failed(io::Error::last_os_error());
            }
        }
        if let Some(cwd) = &exec.cwd
            && libc::chdir(cwd.as_ptr()) != 0
        {
            return failed(io::Error::last_os_error());
        }
        // A session of its own leads a process group of its own too.
        let led = if exec.setup.new_session {
            libc::setsid()
        } else {
            libc::setpgid(0, 0)
        };
        if led < 0 {
            return failed(io::Error::last_os_error());
        }
        if let Err(error) = exec.setup.run(exec.in_group.load(Ordering::Acquire)) {
            return failed(error);
        }
        // Handlers are the host's code: back to the default for each one
        // set (an ignored signal stays ignored, as across exec), and
        // SIGPIPE to the default, as the standard library's spawn does.
        for signal in 1..=libc::SIGRTMAX() {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let handled = old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN;
            if handled || signal == libc::SIGPIPE {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
        // The helper gets the descriptors the call gives it and no other:
        // whatever the host left open without close-on-exec (its own, or
        // a caller's leak) is closed at exec. The kit's own (the
        // confinement's, the pipes' sources) are close-on-exec already.
        if let Err(error) = close_others_on_exec() {
            return failed(error);
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        if exec.path.as_bytes().contains(&b'/') {
            libc::execve(
                exec.path.as_ptr(),
                exec.argv_ptrs.as_ptr(),
                exec.envp_ptrs.as_ptr(),
            );
        } else {
            libc::execvpe(
                exec.path.as_ptr(),
                exec.argv_ptrs.as_ptr(),
                exec.envp_ptrs.as_ptr(),
            );
        }
        failed(io::Error::last_os_error())
    }
}

/// Marks every descriptor from 3 on close-on-exec: `close_range(3, ~0,
/// CLOSE_RANGE_CLOEXEC)` (Linux 5.11), else one `fcntl` per descriptor
/// up to the soft `RLIMIT_NOFILE` (at most 1 << 20). System calls only.
#[allow(unsafe_code)]
fn close_others_on_exec() -> io::Result<()> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: plain system calls with no pointer but the rlimit's, on this
    // stack.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) == 0 {
            return Ok(());
        }
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(io::Error::last_os_error());
        }
        let last = limit.rlim_cur.min(1 << 20) as libc::c_int;
        for fd in 3..last {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The checks that depend on how the clone joins a group, one at a
    /// time (one of them turns the clone into a group off for a while).
    static CLONE_INTO: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// `command` spawned as a confined call with `setup`: its exit and
    /// what it wrote to stdout.
    fn run(mut command: HelperCommand, setup: ChildSetup) -> io::Result<(ExitStatus, String)> {
        command.confine(setup);
        let child = command.spawn_confined().expect("a confined command")?;
        let mut out = String::new();
        let mut stdout = child.stdout;
        stdout.read_to_string(&mut out)?;
        let status = reap(child.pidfd.as_fd())?;
        Ok((status, out))
    }

    /// The cgroup v2 mount, when this process is root (as in CI, where
    /// both must be there); `None`, said on stderr, elsewhere.
    fn v2_mount_as_root() -> Option<&'static std::path::Path> {
        let mount = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
            .into_iter()
            .map(std::path::Path::new)
            .find(|m| m.join("cgroup.controllers").exists());
        if mount.is_none() || !rustix::process::geteuid().is_root() {
            assert!(
                std::env::var_os("CI").is_none(),
                "this check needs root and cgroup v2 in CI"
            );
            eprintln!("skipped: this check needs root and cgroup v2");
            return None;
        }
        mount
    }

    /// Removes a test's group once its reaped helper has left it.
    fn remove_once_empty(group: &std::path::Path) {
        for _ in 0..500 {
            if std::fs::remove_dir(group).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// The child joins its v2 group at birth (`CLONE_INTO_CGROUP`): its
    /// `cgroup.procs` here is `/dev/full`, whose write would fail the
    /// spawn, and the helper finds itself in the group. Needs root and a
    /// cgroup v2 mount (as in CI).
    #[test]
    fn the_child_is_cloned_into_its_v2_group_without_writing_cgroup_procs() {
        let _turn = CLONE_INTO
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(mount) = v2_mount_as_root() else {
            return;
        };
        let name = format!("spillguard-clone-into-{}", std::process::id());
        let group = mount.join(&name);
        match std::fs::create_dir(&group) {
            // Left by an earlier run that had this pid.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            made => made.unwrap(),
        }
        let dir = rustix::fs::open(
            &group,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let setup = ChildSetup {
            cgroup: Some(dir),
            cgroup_procs: Some(OwnedFd::from(full)),
            ..ChildSetup::default()
        };
        let script = HelperCommand::shell_script("sed -n 's/^0:://p' /proc/self/cgroup");
        let ran = run(script, setup);
        remove_once_empty(&group);
        let (status, out) = ran.unwrap();
        assert!(status.success());
        assert_eq!(
            out.trim_end().rsplit('/').next(),
            Some(name.as_str()),
            "{out}"
        );
    }

    /// Where the clone cannot name a group, the child writes `0` to the
    /// v2 group's `cgroup.procs`; it joins a v1 group through `tasks`.
    /// Needs root and a cgroup v2 mount (as in CI); the v1 part runs where
    /// a v1 `pids` hierarchy is mounted.
    #[test]
    fn without_the_clone_into_a_group_the_child_writes_itself_in() {
        let _turn = CLONE_INTO
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(mount) = v2_mount_as_root() else {
            return;
        };
        let name = format!("spillguard-write-in-{}", std::process::id());
        let v1 = std::path::Path::new("/sys/fs/cgroup/pids");
        let v1 = v1.join("tasks").exists().then(|| v1.join(&name));
        let groups: Vec<_> = [Some(mount.join(&name)), v1.clone()]
            .into_iter()
            .flatten()
            .collect();
        for group in &groups {
            match std::fs::create_dir(group) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                made => made.unwrap(),
            }
        }
        let open = |path: std::path::PathBuf| {
            OwnedFd::from(std::fs::OpenOptions::new().write(true).open(path).unwrap())
        };
        let setup = ChildSetup {
            cgroup: Some(
                rustix::fs::open(
                    &groups[0],
                    rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
                    rustix::fs::Mode::empty(),
                )
                .unwrap(),
            ),
            cgroup_procs: Some(open(groups[0].join("cgroup.procs"))),
            tasks: v1.iter().map(|g| open(g.join("tasks"))).collect(),
            ..ChildSetup::default()
        };
        let script = HelperCommand::shell_script("cat /proc/self/cgroup");
        NO_CLONE_INTO_GROUP.store(true, Ordering::Relaxed);
        let ran = run(script, setup);
        NO_CLONE_INTO_GROUP.store(false, Ordering::Relaxed);
        groups.iter().for_each(|group| remove_once_empty(group));
        let (status, out) = ran.unwrap();
        assert!(status.success());
        assert!(
            out.lines()
                .any(|l| l.starts_with("0::") && l.ends_with(&format!("/{name}"))),
            "{out}"
        );
        if v1.is_some() {
            assert!(
                out.lines()
                    .any(|l| l.contains(":pids:") && l.ends_with(&format!("/{name}"))),
                "{out}"
            );
        }
    }

    #[test]
    fn the_program_is_found_in_path_and_keeps_the_name_it_was_called_by() {
        let setup = ChildSetup {
            program: super::super::resolve(
                std::path::Path::new("cat"),
                std::env::var_os("PATH").as_deref(),
            ),
            ..ChildSetup::default()
        };
        assert!(setup.program.as_ref().is_some_and(|p| p.is_absolute()));
        let (status, out) =
            run(HelperCommand::new("cat").arg("/proc/self/cmdline"), setup).unwrap();
        assert_eq!(status.code(), Some(0));
        assert_eq!(out, "cat\0/proc/self/cmdline\0");
        // Not resolved by the host: the child searches `PATH` itself.
        let (status, out) = run(
            HelperCommand::new("cat").arg("/proc/self/cmdline"),
            ChildSetup::default(),
        )
        .unwrap();
        assert_eq!(
            (status.code(), out.as_str()),
            (Some(0), "cat\0/proc/self/cmdline\0")
        );
    }

    /// The host finds the program as `execvp` would in the helper's own
    /// `PATH`, or leaves the search to the child.
    #[test]
    fn the_host_resolves_a_name_only_where_the_child_would_find_the_same_file() {
        use std::os::unix::fs::PermissionsExt;
        use std::path::{Path, PathBuf};
        let dir = std::env::temp_dir().join(format!("sg-resolve-{}", std::process::id()));
        let (first, second) = (dir.join("a"), dir.join("b"));
        for d in [&first, &second] {
            std::fs::create_dir_all(d).unwrap();
        }
        let file = |path: PathBuf, mode: u32| {
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            path
        };
        file(first.join("tool"), 0o644);
        let runnable = file(second.join("tool"), 0o755);
        let search = std::env::join_paths([&first, &second]).unwrap();
        let resolve =
            |name: &str, search: &OsStr| super::super::resolve(Path::new(name), Some(search));
        // A file that is not executable is passed over, as execvp does.
        assert_eq!(resolve("tool", &search), Some(runnable));
        assert_eq!(resolve("missing", &search), None);
        // A path names its own file; a relative entry leaves it to the child.
        assert_eq!(resolve("./tool", &search), None);
        assert_eq!(resolve("tool", OsStr::new("relative:/usr/bin")), None);
        // The helper's own `PATH` is the one searched.
        let command = HelperCommand::new("tool").env("PATH", &search);
        assert_eq!(command.search_path().as_deref(), Some(search.as_os_str()));
        assert_eq!(HelperCommand::new("x").env_clear().search_path(), None);
        assert_eq!(
            HelperCommand::new("x").env_remove("PATH").search_path(),
            None
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn environment_directory_and_shell_are_the_command_s() {
        let command =
            HelperCommand::shell_script(r#"printf '%s|%s|%s|%s' "$A" "${HOME-unset}" "$PWD" "$0""#)
                .env_clear()
                .env("A", "one")
                .env("A", "two")
                .current_dir("/tmp");
        let (status, out) = run(command, ChildSetup::default()).unwrap();
        assert_eq!(status.code(), Some(0));
        assert_eq!(out, "two|unset|/tmp|sh");
        // SAFETY-free: the test reads, never sets, the host's environment.
        let inherited = std::env::vars_os().next().map(|(k, _)| k);
        if let Some(key) = inherited {
            let script = format!(
                "test -n \"${{{}+set}}\" && echo kept",
                key.to_string_lossy()
            );
            let kept = run(
                HelperCommand::shell_script(script.clone()),
                ChildSetup::default(),
            );
            assert_eq!(kept.unwrap().1, "kept\n");
            let removed = HelperCommand::shell_script(script).env_remove(key);
            assert_eq!(run(removed, ChildSetup::default()).unwrap().1, "");
        }
    }

    #[test]
    fn a_step_that_fails_fails_the_spawn_with_its_error_and_nothing_runs() {
        // A "control group" whose `cgroup.procs` refuses the write.
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let marker = std::env::temp_dir().join(format!("sg-spawn-{}", std::process::id()));
        let setup = ChildSetup {
            tasks: vec![OwnedFd::from(full)],
            ..ChildSetup::default()
        };
        let mut command = HelperCommand::new("touch").arg(&marker);
        command.confine(setup);
        let error = command.spawn_confined().unwrap().unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENOSPC), "{error}");
        assert!(!marker.exists(), "the program ran");
        let missing = run(
            HelperCommand::new("/nonexistent/program"),
            ChildSetup::default(),
        );
        assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
        let not_found = run(
            HelperCommand::new("no-such-program-sg"),
            ChildSetup::default(),
        );
        assert_eq!(not_found.unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    /// The host ignores SIGPIPE (as every Rust program does) and blocks
    /// every signal around the clone: the helper starts with SIGPIPE at
    /// its default, nothing blocked, nothing caught; and none of the
    /// descriptors the host opened close-on-exec (its own pipes, the other
    /// helpers' pipes spawned at the same time) reaches it.
    #[test]
    fn the_helper_starts_with_default_signals_and_none_of_the_host_s_descriptors() {
        let open_elsewhere: Vec<(OwnedFd, OwnedFd)> = (0..8).map(|_| pipe().unwrap()).collect();
        let inode = |fd: &OwnedFd| rustix::fs::fstat(fd).map(|st| st.st_ino).unwrap();
        let host_pipes: Vec<String> = open_elsewhere
            .iter()
            .map(|(read, _)| format!("pipe:[{}]", inode(read)))
            .collect();
        // `cat` sets no handler of its own: what it shows is what it got.
        let script = "cat /proc/self/status; ls -l /proc/self/fd";
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(move || {
                    run(HelperCommand::shell_script(script), ChildSetup::default()).unwrap()
                })
            })
            .collect();
        let outs: Vec<String> = threads
            .into_iter()
            .map(|thread| {
                let (status, out) = thread.join().unwrap();
                assert_eq!(status.code(), Some(0));
                out
            })
            .collect();
        for out in &outs {
            let field = |key: &str| {
                let line = out.lines().find(|l| l.starts_with(key)).unwrap();
                u64::from_str_radix(line.trim_start_matches(key).trim(), 16).unwrap()
            };
            assert_eq!(field("SigBlk:"), 0, "{out}");
            assert_eq!(field("SigIgn:") & (1 << (libc::SIGPIPE - 1)), 0, "{out}");
            assert_eq!(field("SigCgt:"), 0, "{out}");
            for other in host_pipes.iter().chain(
                outs.iter()
                    .filter(|o| *o != out)
                    .flat_map(|o| {
                        // Another helper's stdout and stderr.
                        o.lines()
                            .filter(|l| l.contains(" 1 -> pipe:") || l.contains(" 2 -> pipe:"))
                            .filter_map(|l| l.split("-> ").nth(1))
                    })
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
                    .iter(),
            ) {
                assert!(
                    !out.contains(other.as_str()),
                    "{other} reached a helper:\n{out}"
                );
            }
            assert!(
                out.contains(" 1 -> pipe:[") && out.contains(" 2 -> pipe:["),
                "{out}"
            );
        }
    }

    #[test]
    fn stdin_bytes_reach_the_helper_and_signals_are_reported() {
        let mut command = HelperCommand::new("cat").stdin_bytes(b"fed".to_vec());
        command.confine(ChildSetup::default());
        let mut child = command.spawn_confined().unwrap().unwrap();
        let mut stdin = child.stdin.take().expect("a stdin pipe");
        std::io::Write::write_all(&mut stdin, b"fed").unwrap();
        drop(stdin);
        let mut out = String::new();
        child.stdout.read_to_string(&mut out).unwrap();
        assert_eq!(out, "fed");
        assert_eq!(reap(child.pidfd.as_fd()).unwrap().code(), Some(0));
        let mut killed = HelperCommand::shell_script("kill -9 $$");
        killed.confine(ChildSetup::default());
        let child = killed.spawn_confined().unwrap().unwrap();
        let status = reap(child.pidfd.as_fd()).unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }
}
