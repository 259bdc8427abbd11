//! Reading the helper's output pipes. The owner polls our (non-blocking)
//! ends and reads what is there: at most one read of each pipe per round,
//! so no pipe waits for another and a deadline is checked between rounds.

use std::cell::RefCell;
use std::os::fd::BorrowedFd;

use rustix::io::Errno;

pub(crate) use spillguard_host::read_buffers::CHUNK_BYTES;

/// What one read of a non-blocking pipe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    /// This many bytes, at the start of the buffer.
    Bytes(usize),
    /// Nothing for now: poll before reading again.
    Empty,
    /// End-of-file, or an error other than `EINTR` and `EAGAIN`: the stream
    /// is over.
    End,
}

/// One read from `pipe` into `buf`.
pub(crate) fn read_chunk(pipe: BorrowedFd<'_>, buf: &mut [u8]) -> Read {
    loop {
        match rustix::io::read(pipe, &mut *buf) {
            Ok(0) => return Read::End,
            Ok(len) => return Read::Bytes(len),
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => return Read::Empty,
            Err(_) => return Read::End,
        }
    }
}

thread_local! {
    /// The read buffer of the owner running on this worker thread, kept for
    /// the next owner it runs: a call allocates and faults in no buffer.
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `read` with this thread's [`CHUNK_BYTES`] read buffer.
pub(crate) fn with_buffer<T>(read: impl FnOnce(&mut [u8]) -> T) -> T {
    BUFFER.with_borrow_mut(|buf| {
        buf.resize(CHUNK_BYTES, 0);
        read(buf)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::fd::{AsFd, OwnedFd};

    #[test]
    fn a_read_finds_bytes_then_nothing_then_the_end() {
        let (read, write) = std::io::pipe().unwrap();
        let read = OwnedFd::from(read);
        rustix::io::ioctl_fionbio(&read, true).unwrap();
        let mut buf = [0; 8];
        assert_eq!(read_chunk(read.as_fd(), &mut buf), Read::Empty);
        rustix::io::write(&write, b"0123456789").unwrap();
        assert_eq!(read_chunk(read.as_fd(), &mut buf), Read::Bytes(8));
        assert_eq!(&buf, b"01234567");
        assert_eq!(read_chunk(read.as_fd(), &mut buf), Read::Bytes(2));
        assert_eq!(&buf[..2], b"89");
        assert_eq!(read_chunk(read.as_fd(), &mut buf), Read::Empty);
        drop(write);
        assert_eq!(read_chunk(read.as_fd(), &mut buf), Read::End);
    }

    #[test]
    fn each_thread_keeps_one_buffer_of_a_chunk() {
        let first = with_buffer(|buf| (buf.as_ptr() as usize, buf.len()));
        let again = with_buffer(|buf| (buf.as_ptr() as usize, buf.len()));
        assert_eq!(first, again);
        assert_eq!(first.1, CHUNK_BYTES);
    }
}
