//! The size of a read, [`CHUNK_BYTES`], for every adapter; what an async
//! or blocking read's result means (smol, tokio); and, for readers that
//! send their chunks to the owner (smol), the read budget: at most
//! [`BUFFERS_PER_STREAM`] buffers per stream, recycled between the reader
//! and the owner. (The std and tokio owners read their pipes themselves,
//! one buffer per stream.)

use std::io;

/// Size of one read: large enough that a flood costs few reads, small
/// enough that four in flight per stream stay cheap.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Most buffers one reader makes; a slow owner holds its reader back by at
/// most this many chunks.
pub const BUFFERS_PER_STREAM: usize = 4;

/// Counts the buffers one reader has made.
#[derive(Debug, Default)]
pub struct ReadBuffers {
    made: usize,
}

impl ReadBuffers {
    /// A new buffer while fewer than [`BUFFERS_PER_STREAM`] were made;
    /// `None`: wait for one to come back.
    pub fn make(&mut self) -> Option<Vec<u8>> {
        if self.made == BUFFERS_PER_STREAM {
            return None;
        }
        self.made += 1;
        Some(vec![0; CHUNK_BYTES])
    }
}

/// What a reader makes of a read's result: the length read, 0 at
/// end-of-file or on an error other than `EINTR`; `None` to read again.
pub fn bytes_read(result: io::Result<usize>) -> Option<usize> {
    match result {
        Ok(len) => Some(len),
        Err(error) if error.kind() == io::ErrorKind::Interrupted => None,
        Err(_) => Some(0),
    }
}

/// The buffer to read and drop the rest of a stream with once nobody
/// listens: `buf`, or a new one if `buf` is empty.
pub fn drain_buffer(mut buf: Vec<u8>) -> Vec<u8> {
    if buf.is_empty() {
        buf.resize(CHUNK_BYTES, 0);
    }
    buf
}
