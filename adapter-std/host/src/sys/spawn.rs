//! The clone of a helper that shares the host's memory until it execs,
//! and the child's steps before `execve`; see the parent module for why
//! this is the host layer's one place for `unsafe`, and `confine::spawn` for
//! what is made before the clone.
//!
//! **The child only makes system calls, on values made before the clone,
//! on its own stack, with every signal blocked until the host's handlers
//! are reset.** The host's thread is suspended (`CLONE_VFORK`) until the
//! child has exec'd or exited, so [`Exec`] and the stack outlive the
//! child's use of them. The stack has a guard page below it: a child that
//! overflows faults instead of writing over the host's memory.

use std::cell::Cell;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::confine::ChildSetup;

/// The child's stack while it shares the host's memory, guard page aside.
const CHILD_STACK_BYTES: usize = 128 * 1024;

/// What the child reads, made by the host before the clone.
pub(crate) struct Exec {
    /// The file to exec: a path (the host resolved a bare name against
    /// the helper's own `PATH`), relative ones from the helper's
    /// directory.
    path: CString,
    /// Owns the strings `argv_ptrs` points into (read through it only).
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    /// Owns the strings `envp_ptrs` points into.
    _envp: Vec<CString>,
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

impl Exec {
    /// The exec of `path` with `argv` and `envp`, from `cwd`, with `stdio`
    /// as its standard streams and `setup`'s steps first.
    pub(crate) fn new(
        path: CString,
        argv: Vec<CString>,
        envp: Vec<CString>,
        cwd: Option<CString>,
        stdio: [OwnedFd; 3],
        setup: ChildSetup,
    ) -> Self {
        let argv_ptrs = pointers(&argv);
        let envp_ptrs = pointers(&envp);
        Self {
            path,
            _argv: argv,
            argv_ptrs,
            _envp: envp,
            envp_ptrs,
            cwd,
            stdio,
            setup,
            error: AtomicI32::new(0),
            in_group: AtomicBool::new(false),
        }
    }

    /// The `errno` of the child's step that failed (the child exited
    /// without exec), if one did.
    pub(crate) fn failed_with(&self) -> Option<i32> {
        match self.error.load(Ordering::Acquire) {
            0 => None,
            errno => Some(errno),
        }
    }
}

/// A null-terminated array of the strings' pointers (valid while they
/// live; a `CString`'s bytes do not move with it).
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

thread_local! {
    /// The stack of this thread's last clone, kept for its next one; it is
    /// unmapped when the thread ends.
    static SPARE_STACK: Cell<Option<ChildStack>> = const { Cell::new(None) };
}

/// The child's stack: an anonymous mapping whose lowest page is a guard
/// (no access), unmapped when dropped.
struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
    guard: usize,
}

impl ChildStack {
    fn new(size: usize) -> io::Result<Self> {
        let guard = rustix::param::page_size();
        let len = size + guard;
        // SAFETY: a new private anonymous mapping: no existing memory is
        // touched; the result is checked before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Self { base, len, guard };
        // SAFETY: the first page of the mapping just made, which nothing
        // else uses.
        if unsafe { libc::mprotect(base, guard, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The lowest usable byte, and the usable size.
    fn usable(&self) -> (usize, usize) {
        (self.base as usize + self.guard, self.len - self.guard)
    }

    /// The top of the stack (it grows down), 16-byte aligned.
    fn top(&self) -> usize {
        (self.base as usize + self.len) & !15
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made, unmapped once: the child that ran
        // on it has exec'd or exited (CLONE_VFORK).
        unsafe {
            libc::munmap(self.base, self.len);
        }
    }
}

/// The clone itself: `exec`'s child on a stack of its own, the host
/// suspended until the child execs or exits. Returns the pid and pidfd.
/// With a v2 group to join, the child is cloned into it (`clone3` with
/// `CLONE_INTO_CGROUP`) where the kernel and the architecture allow, else
/// cloned as usual to write to the group's `cgroup.procs` itself.
pub(crate) fn clone_child(exec: &Exec) -> io::Result<(u32, OwnedFd)> {
    // The thread's stack from its last clone, else a new one: mapping,
    // guarding, faulting in and unmapping a stack at each spawn costs a
    // noticeable part of a short helper's spawn. A stack is free again
    // once the clone returns (the child has exec'd or exited), and a
    // thread makes one clone at a time (it is suspended during it).
    let stack = match SPARE_STACK.take() {
        Some(stack) => stack,
        None => ChildStack::new(CHILD_STACK_BYTES)?,
    };
    let (base, size) = stack.usable();
    let top = stack.top();
    let mut pidfd: libc::c_int = -1;
    let arg = std::ptr::from_ref(exec).cast_mut().cast::<libc::c_void>();
    // SAFETY: every signal is blocked around the clone, so no handler of
    // the host runs on the child's stack or in its shared memory; the mask
    // is restored below, in the host, whatever the clone did. `exec` and
    // `stack` outlive the child's use of them: CLONE_VFORK suspends this
    // thread until the child has exec'd or exited. The child
    // (`child_main`) only makes system calls on values made before the
    // clone.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut pid = -1;
        if let Some(group) = &exec.setup.cgroup {
            exec.in_group.store(true, Ordering::Release);
            pid = clone_into_group(group.as_raw_fd(), base, size, &mut pidfd, arg);
            if pid < 0 {
                exec.in_group.store(false, Ordering::Release);
            }
        }
        if pid < 0 {
            let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
            pid = libc::clone(
                clone_entry,
                top as *mut libc::c_void,
                flags,
                arg,
                &mut pidfd,
            );
        }
        let error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(error);
        }
        pid
    };
    SPARE_STACK.set(Some(stack));
    // SAFETY: CLONE_PIDFD stored a new descriptor this process owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok((u32::try_from(pid).unwrap_or_default(), pidfd))
}

/// `CLONE_INTO_CGROUP` (Linux 5.7).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Whether `clone3` into a group failed once for a reason that will not
/// change (no `clone3`, or no `CLONE_INTO_CGROUP`): then it is not tried.
static NO_CLONE_INTO_GROUP: AtomicBool = AtomicBool::new(false);

/// Turns the clone into a group off, or back on (tests of the fallback).
#[cfg(test)]
pub(crate) fn set_clone_into_group(on: bool) {
    NO_CLONE_INTO_GROUP.store(!on, Ordering::Relaxed);
}

/// `clone3(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP)`:
/// `child_main(arg)` runs in the group `group` on the stack `[base, base +
/// size)`. Returns the pid, or -1 when the clone could not be made (the
/// caller clones as usual then).
///
/// # Safety
///
/// As for `libc::clone`: the stack and `arg` (an [`Exec`]) stay valid
/// until the child has exec'd or exited, and the caller has blocked every
/// signal.
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
    // SAFETY: `clone_args` is plain integers: all zero is its empty value.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags =
        (libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD) as u64 | CLONE_INTO_CGROUP;
    args.pidfd = std::ptr::from_mut(pidfd) as u64;
    args.exit_signal = libc::SIGCHLD as u64;
    args.stack = base as u64;
    args.stack_size = size as u64;
    args.cgroup = group as u64;
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
///
/// # Safety
///
/// `args` names a stack that is valid (and used by nothing else) until
/// the child has exec'd or exited; `child` may be called with `arg` on
/// that stack in a process that shares this one's memory (see
/// [`child_main`]); every signal is blocked.
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
unsafe fn clone3_vm(
    args: &mut libc::clone_args,
    child: unsafe extern "C" fn(*mut libc::c_void) -> libc::c_int,
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
            in("rsi") std::mem::size_of::<libc::clone_args>(),
            in("r12") child,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// Where the host layer has no `clone3` of its own: the usual clone is used.
///
/// # Safety
///
/// None needed: it makes no call.
#[cfg(not(all(target_arch = "x86_64", target_pointer_width = "64")))]
unsafe fn clone3_vm(
    _args: &mut libc::clone_args,
    _child: unsafe extern "C" fn(*mut libc::c_void) -> libc::c_int,
    _arg: *mut libc::c_void,
) -> isize {
    -(libc::ENOSYS as isize)
}

/// The entry `libc::clone` is given (its parameter's type is a safe
/// function): [`child_main`]. Only [`clone_child`] names it, as the entry
/// of a child it clones with `arg` an [`Exec`] that outlives the child's
/// use, every signal blocked: the contract of `child_main`.
extern "C" fn clone_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: see above; nothing else can reach this function.
    unsafe { child_main(arg) }
}

/// The child, until exec: see the module docs. Never returns on success;
/// on failure the step's `errno` is stored in the [`Exec`] and the child
/// exits 127.
///
/// # Safety
///
/// `arg` points to an [`Exec`] that stays valid until this function has
/// exec'd or exited; the caller is a child cloned with `CLONE_VM |
/// CLONE_VFORK` on a stack of its own (the host's thread suspended), with
/// every signal blocked.
unsafe extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: the contract: `arg` is the `Exec` the host made, alive while
    // it is suspended.
    let exec = unsafe { &*arg.cast_const().cast::<Exec>() };
    let failed = |error: io::Error| -> libc::c_int {
        exec.error.store(
            error.raw_os_error().unwrap_or(libc::EINVAL),
            Ordering::Release,
        );
        // SAFETY: ends the child without running anything of the host's
        // (no exit handler, no flush).
        unsafe { libc::_exit(127) }
    };
    let [stdin, stdout, stderr] = &exec.stdio;
    let standard = rustix::stdio::dup2_stdin(stdin)
        .and_then(|()| rustix::stdio::dup2_stdout(stdout))
        .and_then(|()| rustix::stdio::dup2_stderr(stderr));
    if let Err(error) = standard {
        return failed(error.into());
    }
    if let Some(cwd) = &exec.cwd
        && let Err(error) = rustix::process::chdir(cwd.as_c_str())
    {
        return failed(error.into());
    }
    // A session of its own leads a process group of its own too.
    let led = if exec.setup.new_session {
        rustix::process::setsid().map(drop)
    } else {
        rustix::process::setpgid(None, None)
    };
    if let Err(error) = led {
        return failed(error.into());
    }
    if let Err(error) = exec.setup.run(exec.in_group.load(Ordering::Acquire)) {
        return failed(error);
    }
    // SAFETY: plain system calls on values made before the clone and on
    // this stack; nothing allocates, locks or unwinds.
    unsafe {
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
    }
    // The helper gets the descriptors the call gives it and no other:
    // whatever the host left open without close-on-exec (its own, or a
    // caller's leak) is closed at exec. The host layer's own (the confinement's,
    // the pipes' sources) are close-on-exec already.
    if let Err(error) = close_others_on_exec() {
        return failed(error);
    }
    // SAFETY: as above; `execve` reads the strings and the two
    // null-terminated arrays made before the clone.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(
            exec.path.as_ptr(),
            exec.argv_ptrs.as_ptr(),
            exec.envp_ptrs.as_ptr(),
        );
    }
    failed(io::Error::last_os_error())
}

/// Marks every descriptor from 3 on close-on-exec: `close_range(3, ~0,
/// CLOSE_RANGE_CLOEXEC)` (Linux 5.11), else one `fcntl` per descriptor
/// up to the soft `RLIMIT_NOFILE` (at most 1 << 20). System calls only.
fn close_others_on_exec() -> io::Result<()> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: a plain system call with no pointer.
    let ranged =
        unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) };
    if ranged == 0 {
        return Ok(());
    }
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let last = limit.current.unwrap_or(1 << 20).min(1 << 20) as RawFd;
    for fd in 3..last {
        // SAFETY: `fcntl` on a number that may or may not be an open
        // descriptor: on one that is not, it fails with EBADF, and nothing
        // is read or written but its flags.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
    Ok(())
}
