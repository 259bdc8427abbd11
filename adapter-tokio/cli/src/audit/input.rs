//! What `audit` reads: regular files only, opened without blocking, and
//! the log fed to the core in fixed chunks, never held whole.

use std::fs::{File, Metadata};
use std::io;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

/// Why a file was not opened.
#[derive(Debug)]
pub enum OpenError {
    /// It could not be looked at or opened.
    Io(io::Error),
    /// It is not a regular file: what it is (`a directory`, …).
    NotRegular(&'static str),
}

/// Opens `path` for reading if it is a regular file (a symbolic link is
/// followed). Its kind is checked before it is opened and again, with
/// `fstat`, on what was opened; it is opened with `O_NONBLOCK`, so that a
/// FIFO put there in between cannot block the open. A device, a FIFO or
/// a socket is never read: `/dev/zero` never ends, a FIFO waits for a
/// writer.
pub fn open_regular(path: &Path) -> Result<File, OpenError> {
    let not_regular = |metadata: &Metadata| match metadata.is_file() {
        true => Ok(()),
        false => Err(OpenError::NotRegular(spillguard_std::os::file_kind(
            metadata.file_type(),
        ))),
    };
    not_regular(&std::fs::metadata(path).map_err(OpenError::Io)?)?;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty())
        .map_err(|errno| OpenError::Io(errno.into()))?;
    let file = File::from(fd);
    not_regular(&file.metadata().map_err(OpenError::Io)?)?;
    Ok(file)
}
