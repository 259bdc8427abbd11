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
/// # use spillguard_host::proto::Signal;
/// # use spillguard_host::os::signal_group;
/// // No such group: nothing happens, nothing fails.
/// signal_group(0x3fff_fff0, Signal::Term);
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

/// Sends `signal` to the process `pid` (a member of a call's control
/// group). A process already gone is not an error; a pid of 0 or 1 is
/// never signalled, nor this process.
pub(crate) fn signal_pid(pid: i32, signal: Signal) {
    if pid <= 1 || pid == std::process::id() as i32 {
        return;
    }
    let (Some(pid), Some(signal)) = (
        Pid::from_raw(pid),
        rustix::process::Signal::from_named_raw(signal.number()),
    ) else {
        return;
    };
    let _ = rustix::process::kill_process(pid, signal);
}

/// Whether process `pid` is in process group `pgid` (a process gone, or
/// one whose group cannot be read, is not).
pub(crate) fn in_group(pid: i32, pgid: u32) -> bool {
    Pid::from_raw(pid)
        .and_then(|pid| rustix::process::getpgid(Some(pid)).ok())
        .is_some_and(|group| u32::try_from(group.as_raw_nonzero().get()) == Ok(pgid))
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

/// Whether `fd` is a pipe (a FIFO): the only kind `splice(2)` may wait on
/// without holding another descriptor's lock.
pub fn is_pipe(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Fifo
    })
}

/// Whether `splice(2)` may read `fd` without waiting on a peer: a pipe
/// (a FIFO) or a regular file, whose bytes are all there already.
pub fn splices_from(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| {
        matches!(
            rustix::fs::FileType::from_raw_mode(st.st_mode),
            rustix::fs::FileType::Fifo | rustix::fs::FileType::RegularFile
        )
    })
}

/// What `poll(2)` said of one descriptor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ready {
    /// Bytes (or the end) can be read.
    pub readable: bool,
    /// A byte can be written.
    pub writable: bool,
    /// The other end is gone, for reading (`POLLHUP`, `POLLRDHUP`) or for
    /// good (`POLLERR`, `POLLNVAL`).
    pub hung_up: bool,
}

impl Ready {
    fn of(flags: rustix::event::PollFlags) -> Self {
        use rustix::event::PollFlags;
        Self {
            readable: flags.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::RDHUP),
            writable: flags.intersects(PollFlags::OUT | PollFlags::ERR),
            hung_up: flags
                .intersects(PollFlags::HUP | PollFlags::RDHUP | PollFlags::ERR | PollFlags::NVAL),
        }
    }
}

/// Waits, at most `timeout` (`None`: for ever), until one of `fds` is
/// ready for what it was asked; returns what each is. `EINTR` is retried.
pub fn poll<const N: usize>(
    fds: [(std::os::fd::BorrowedFd<'_>, rustix::event::PollFlags); N],
    timeout: Option<std::time::Duration>,
) -> std::io::Result<[Ready; N]> {
    let mut polled = fds.map(|(fd, events)| rustix::event::PollFd::from_borrowed_fd(fd, events));
    let timeout = timeout.map(|t| rustix::event::Timespec {
        tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(t.subsec_nanos()),
    });
    loop {
        match rustix::event::poll(&mut polled, timeout.as_ref()) {
            Ok(_) => return Ok(polled.each_ref().map(|fd| Ready::of(fd.revents()))),
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
}

/// Reads into `buf` from `fd`, waiting (by `poll`) while it is
/// non-blocking and empty: a descriptor shared with another process may
/// have been made non-blocking there, and its flags are not changed here.
pub fn read_waiting(fd: impl AsFd, buf: &mut [u8]) -> std::io::Result<usize> {
    let fd = fd.as_fd();
    loop {
        match rustix::io::read(fd, &mut *buf) {
            Ok(read) => return Ok(read),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                poll([(fd, rustix::event::PollFlags::IN)], None)?;
            }
            Err(errno) => return Err(errno.into()),
        }
    }
}

/// Writes all of `bytes` to `fd`, waiting (by `poll`) while it is
/// non-blocking and full.
pub fn write_all_waiting(fd: impl AsFd, mut bytes: &[u8]) -> std::io::Result<()> {
    let fd = fd.as_fd();
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(written) => bytes = bytes.get(written..).unwrap_or_default(),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                poll([(fd, rustix::event::PollFlags::OUT)], None)?;
            }
            Err(errno) => return Err(errno.into()),
        }
    }
    Ok(())
}

/// What a file that is not a regular one is, in words for an error: `a
/// directory`, `a character device`, `a block device`, `a FIFO`, `a
/// socket`, or `of an unknown kind`.
///
/// ```
/// # use spillguard_host::os::file_kind;
/// let meta = std::fs::metadata("/dev/null")?;
/// assert_eq!(file_kind(meta.file_type()), "a character device");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn file_kind(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "of an unknown kind"
    }
}
