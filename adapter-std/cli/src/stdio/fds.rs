//! What this program's stdin and stdout are, checked once at the start:
//! every kind a host may hand over works (a pipe, a socket, a file, a
//! terminal, `/dev/null`); a directory or a closed descriptor is a usage
//! error, said in one line, before anything runs.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::event::{PollFd, PollFlags};
use rustix::fs::FileType;

use crate::args::UsageError;

/// A descriptor's kind, as far as the pumps care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A pipe or FIFO: `splice(2)` may wait on it.
    Pipe,
    /// A regular file: everything it holds is there already.
    File,
    /// Anything else that reads and writes (a socket, a terminal,
    /// `/dev/null`).
    Stream,
}

/// This program's descriptor `fd` (`what` is `stdin` or `stdout`), as a
/// file of its own (a duplicate: reads and writes go straight to it,
/// unbuffered), and its kind.
pub fn own(what: &str, fd: BorrowedFd<'_>) -> Result<(File, Kind), UsageError> {
    let refused = |why: String| {
        UsageError(format!(
            "{what} {why}: give `spillguard stdio` a pipe, a socket, a file, a terminal or /dev/null"
        ))
    };
    let stat = rustix::fs::fstat(fd).map_err(|errno| match errno {
        rustix::io::Errno::BADF => refused("is not open".into()),
        errno => refused(format!("cannot be read: {}", io::Error::from(errno))),
    })?;
    let kind = match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => return Err(refused("is a directory".into())),
        FileType::Fifo => Kind::Pipe,
        FileType::RegularFile => Kind::File,
        _ => Kind::Stream,
    };
    let file = fd
        .try_clone_to_owned()
        .map(File::from)
        .map_err(|error| refused(format!("cannot be duplicated: {error}")))?;
    Ok((file, kind))
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
    fn of(flags: PollFlags) -> Self {
        Self {
            readable: flags.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::RDHUP),
            writable: flags.intersects(PollFlags::OUT | PollFlags::ERR),
            hung_up: flags
                .intersects(PollFlags::HUP | PollFlags::RDHUP | PollFlags::ERR | PollFlags::NVAL),
        }
    }
}

/// Waits, at most `timeout` (`None`: for ever), until one of `fds` is
/// ready for what it was asked; returns what each is.
pub fn poll<const N: usize>(
    fds: [(BorrowedFd<'_>, PollFlags); N],
    timeout: Option<std::time::Duration>,
) -> io::Result<[Ready; N]> {
    let mut polled = fds.map(|(fd, events)| PollFd::from_borrowed_fd(fd, events));
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

/// Reads into `buf` from `file`, waiting (by `poll`) if its descriptor is
/// non-blocking (the host may have made it so; its flags are shared, so
/// they are not changed here).
pub fn read_waiting(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match rustix::io::read(file, &mut *buf) {
            Ok(read) => return Ok(read),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                poll([(file.as_fd(), PollFlags::IN)], None)?;
            }
            Err(errno) => return Err(errno.into()),
        }
    }
}

/// Writes all of `bytes` to `file`, waiting (by `poll`) if its descriptor
/// is non-blocking.
pub fn write_all_waiting(file: &File, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::write(file, bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(written) => bytes = bytes.get(written..).unwrap_or_default(),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                poll([(file.as_fd(), PollFlags::OUT)], None)?;
            }
            Err(errno) => return Err(errno.into()),
        }
    }
    Ok(())
}
