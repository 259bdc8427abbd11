//! What this program's stdin and stdout are, checked once at the start:
//! every kind a host may hand over works (a pipe, a socket, a file, a
//! terminal, `/dev/null`); a directory is a usage error, said in one line,
//! before anything runs. (A descriptor that is not open at all never gets
//! here: the Rust runtime opens `/dev/null` on it before `main`.) The
//! waits and copies themselves are the host layer's (`spillguard_host::os`).

use std::fs::File;
use std::io;
use std::os::fd::BorrowedFd;

use rustix::fs::FileType;

use crate::args::UsageError;

/// A descriptor's kind, as far as the pumps care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A pipe or FIFO: `splice(2)` may wait on it.
    Pipe,
    /// A regular file: everything it holds is there already, so
    /// `splice(2)` from it never waits on a peer.
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
