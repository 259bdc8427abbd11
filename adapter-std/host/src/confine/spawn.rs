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
//! the spawn fails with that error and nothing runs. The clone and the
//! child's code are in `sys::spawn`, the host layer's one room for `unsafe`;
//! this module makes what they read.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};

use super::ChildSetup;
use crate::command::{HelperCommand, StdinMode};
use crate::sys::spawn::{Exec, clone_child};

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

/// Spawns `command` with `setup`'s steps; see the module docs.
pub(crate) fn spawn(command: &HelperCommand, setup: ChildSetup) -> io::Result<RawChild> {
    let (path, argv) = program_and_argv(command)?;
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
    let stdio = [
        above_stdio(stdin_child)?,
        above_stdio(stdout_child)?,
        above_stdio(stderr_child)?,
    ];
    let exec = Exec::new(path, argv, envp, cwd, stdio, setup);
    let (pid, pidfd) = clone_child(&exec)?;
    match exec.failed_with() {
        None => Ok(RawChild {
            pid,
            pidfd,
            stdin: stdin.map(ChildStdin::from),
            stdout: ChildStdout::from(stdout),
            stderr: ChildStderr::from(stderr),
        }),
        Some(errno) => {
            // The child exited without exec: reap it.
            let _ = reap(pidfd.as_fd());
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

/// The file to exec and `argv`: `/bin/sh -c SCRIPT sh ARGS` for a shell
/// command, else the file the program resolves to (see
/// [`resolve_program`](super::resolve_program): a bare name is looked up
/// in the helper's own `PATH`, here in the host) with the name it was
/// called by as `argv[0]`.
fn program_and_argv(command: &HelperCommand) -> io::Result<(CString, Vec<CString>)> {
    let mut argv = Vec::with_capacity(command.args.len() + 4);
    let path = if command.shell {
        argv.push(c_string(OsStr::new("/bin/sh"))?);
        argv.push(c_string(OsStr::new("-c"))?);
        argv.push(c_string(&command.program)?);
        argv.push(c_string(OsStr::new("sh"))?);
        c_string(OsStr::new("/bin/sh"))?
    } else {
        argv.push(c_string(&command.program)?);
        let search = command.search_path();
        let file =
            super::resolve_program(&command.program, search.as_deref(), command.cwd.as_deref())?;
        c_string(file.as_os_str())?
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
        crate::sys::spawn::set_clone_into_group(false);
        let ran = run(script, setup);
        crate::sys::spawn::set_clone_into_group(true);
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

    /// The host finds the program as `execvp` in the helper would, in the
    /// helper's own `PATH` and directory.
    #[test]
    fn the_host_resolves_a_name_as_execvp_in_the_helper_would() {
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
        file(first.join("locked"), 0o600);
        let search = std::env::join_paths([&first, &second]).unwrap();
        let resolve = |name: &str, search: Option<&OsStr>, cwd: Option<&Path>| {
            super::super::resolve_program(OsStr::new(name), search, cwd)
        };
        // A file that is not executable is passed over, as execvp does.
        assert_eq!(resolve("tool", Some(&search), None).unwrap(), runnable);
        let missing = resolve("missing", Some(&search), None).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        // Only a file that cannot be executed: permission denied.
        let locked = resolve("locked", Some(&search), None).unwrap_err();
        assert_eq!(locked.raw_os_error(), Some(libc::EACCES));
        // A path names its own file; an empty name is no file.
        assert_eq!(
            resolve("./tool", Some(&search), None).unwrap(),
            Path::new("./tool")
        );
        assert_eq!(
            resolve("", Some(&search), None).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // A relative entry, and an empty one, are read from the helper's
        // directory, not the host's.
        assert_eq!(
            resolve("tool", Some(OsStr::new("nothing:b")), Some(&dir)).unwrap(),
            Path::new("b/tool")
        );
        assert_eq!(
            resolve("tool", Some(OsStr::new(":/usr/bin")), Some(&second)).unwrap(),
            Path::new("./tool")
        );
        assert_eq!(
            resolve("tool", Some(OsStr::new("b")), None)
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
        // No `PATH`: the C library's default.
        assert_eq!(resolve("sh", None, None).unwrap(), Path::new("/bin/sh"));
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
