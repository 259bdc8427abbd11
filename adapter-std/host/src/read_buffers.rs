//! What every adapter's owner reads with: a buffer of [`CHUNK_BYTES`] per
//! stream, and what a read's result means ([`bytes_read`], for owners that
//! read through `std::io` or an async read trait; the std owner reads its
//! non-blocking pipes with `rustix`).

use std::io;

/// Size of one read: large enough that a flood costs few reads, small
/// enough that a buffer per stream per call stays cheap.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// What an owner makes of a read's result: the length read, 0 at
/// end-of-file or on an error other than `EINTR`; `None` to read again.
///
/// ```
/// use std::io;
/// use spillguard_host::read_buffers::bytes_read;
///
/// assert_eq!(bytes_read(Ok(42)), Some(42));
/// assert_eq!(bytes_read(Err(io::ErrorKind::Interrupted.into())), None);
/// assert_eq!(bytes_read(Err(io::ErrorKind::BrokenPipe.into())), Some(0));
/// ```
pub fn bytes_read(result: io::Result<usize>) -> Option<usize> {
    match result {
        Ok(len) => Some(len),
        Err(error) if error.kind() == io::ErrorKind::Interrupted => None,
        Err(_) => Some(0),
    }
}
