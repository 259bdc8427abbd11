//! The few operating-system calls every adapter makes the same way,
//! whatever its runtime: signalling a process group, enlarging a pipe,
//! reading an exit status. The smol and tokio adapters use them too.

use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;

use rustix::process::{Pid, kill_process_group};
use spillguard_core::{ExitStatus, Signal};

/// Sends `signal` to process group `pgid`. A group that is already gone
/// (`ESRCH`) is what a stop wants, so no error is reported. A pgid of 0 or
/// 1 (our own group, or every process) is never signalled.
///
/// # Examples
///
/// ```
/// use spillguard_kit::core::Signal;
/// // No such group: nothing happens, nothing fails.
/// spillguard_kit::os::signal_group(0x3fff_fff0, Signal::Term);
/// ```
pub fn signal_group(pgid: u32, signal: Signal) {
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .filter(|&raw| raw > 1)
        .and_then(Pid::from_raw)
    else {
        return;
    };
    // The core names each signal by its POSIX number: no signal it adds
    // can be sent as another one.
    let Some(signal) = rustix::process::Signal::from_named_raw(signal.number()) else {
        return;
    };
    let _ = kill_process_group(pid, signal);
}

/// Asks the kernel for a larger pipe (`F_SETPIPE_SZ`): fewer, larger reads
/// on a flood. Returns the capacity granted; failure (an old kernel, a size
/// above `pipe-max-size`, another OS) is `None`, to be recorded and
/// otherwise ignored.
#[cfg(target_os = "linux")]
pub fn enlarge_pipe(pipe: impl AsFd, size: usize) -> Option<u64> {
    rustix::pipe::fcntl_setpipe_size(pipe, size)
        .ok()
        .map(|granted| granted as u64)
}

/// Asks the kernel for a larger pipe: not available here, so `None`.
#[cfg(not(target_os = "linux"))]
pub fn enlarge_pipe(_pipe: impl AsFd, _size: usize) -> Option<u64> {
    None
}

/// Asks for both output pipes to hold `size` bytes (`None`: leave them);
/// returns the stderr pipe's capacity as granted ([`enlarge_pipe`]).
pub fn enlarge_pipes(stdout: impl AsFd, stderr: impl AsFd, size: Option<usize>) -> Option<u64> {
    let size = size?;
    let _ = enlarge_pipe(stdout, size);
    enlarge_pipe(stderr, size)
}

/// A new descriptor (close-on-exec) for the open file `fd` refers to: a
/// pipe a runtime's stream holds can be handed on while the stream itself
/// is dropped (and leaves its reactor).
pub fn duplicate(fd: impl AsFd) -> std::io::Result<std::os::fd::OwnedFd> {
    Ok(rustix::io::fcntl_dupfd_cloexec(fd, 0)?)
}

/// The core's [`ExitStatus`] for an observed std exit status: the code, or
/// the signal that ended the process.
pub fn exit_status(status: std::process::ExitStatus) -> ExitStatus {
    ExitStatus {
        code: status.code(),
        signal: status.signal(),
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn pipes_are_enlarged_to_the_size_asked() {
        let (read, _write) = rustix::pipe::pipe().unwrap();
        assert_eq!(enlarge_pipe(&read, 256 * 1024), Some(256 * 1024));
        assert_eq!(rustix::pipe::fcntl_getpipe_size(&read).unwrap(), 256 * 1024);
    }
}
