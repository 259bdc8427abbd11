//! [`StderrLines`]: a call's stderr as lines, for a caller that reads them
//! as they come, bounded on every side so that it never slows the drain.
//!
//! The owner hands each stderr chunk it reads to the call's [`LineQueue`]
//! (when a caller asked for one) before the capture sees it, without
//! waiting: whole lines join the queue while it holds fewer than its
//! capacity, and every line beyond is dropped and counted
//! ([`StderrLines::dropped`]). A line longer than [`MAX_LINE_BYTES`] comes
//! in pieces of that size. At stderr's end (or the call's), a last line
//! without its newline is queued and the queue ends.
//!
//! The lines are the helper's bytes, **not redacted**, for the caller's
//! own use; what may be shown elsewhere is the outcome's excerpt.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// The longest line queued whole; a longer one comes in pieces.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// The lines of one call's stderr between its owner and its caller.
#[derive(Debug)]
pub struct LineQueue {
    state: Mutex<LineState>,
}

#[derive(Debug)]
struct LineState {
    lines: VecDeque<Vec<u8>>,
    partial: Vec<u8>,
    capacity: usize,
    dropped: u64,
    ended: bool,
    waiting: Option<Waker>,
}

impl LineQueue {
    /// A queue of at most `capacity` lines (at least one).
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(LineState {
                lines: VecDeque::new(),
                partial: Vec::new(),
                capacity: capacity.max(1),
                dropped: 0,
                ended: false,
                waiting: None,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, LineState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a chunk of stderr: its whole lines are queued (or dropped
    /// and counted when the queue is full); never waits.
    pub fn feed(&self, mut bytes: &[u8]) {
        let waker = {
            let mut state = self.lock();
            if state.ended {
                return;
            }
            while !bytes.is_empty() {
                let room = MAX_LINE_BYTES - state.partial.len();
                let newline = bytes.iter().take(room).position(|&b| b == b'\n');
                let (piece, whole) = match newline {
                    Some(at) => (&bytes[..at], true),
                    None => (&bytes[..bytes.len().min(room)], piece_fills(room, bytes)),
                };
                state.partial.extend_from_slice(piece);
                bytes = &bytes[piece.len() + usize::from(newline.is_some())..];
                if whole {
                    let line = std::mem::take(&mut state.partial);
                    state.push(line);
                }
            }
            state.waiting.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Stderr (or the call) ended: a last line without its newline is
    /// queued, and a reader finds the end once the queue is empty.
    pub fn end(&self) {
        let waker = {
            let mut state = self.lock();
            if state.ended {
                return;
            }
            if !state.partial.is_empty() {
                let line = std::mem::take(&mut state.partial);
                state.push(line);
            }
            state.ended = true;
            state.waiting.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// Whether a piece of `room` bytes taken from `bytes` (no newline in it)
/// fills a line to its maximum.
fn piece_fills(room: usize, bytes: &[u8]) -> bool {
    bytes.len() >= room
}

impl LineState {
    fn push(&mut self, line: Vec<u8>) {
        if self.lines.len() < self.capacity {
            self.lines.push_back(line);
        } else {
            self.dropped += 1;
        }
    }
}

/// A call's stderr as lines, from the moment it was asked for: see the
/// module docs. Read with [`next_line`](Self::next_line) (any runtime) or
/// [`poll_next_line`](Self::poll_next_line).
#[derive(Debug)]
pub struct StderrLines {
    queue: Arc<LineQueue>,
}

impl StderrLines {
    /// The reading end of `queue`.
    pub fn new(queue: Arc<LineQueue>) -> Self {
        Self { queue }
    }

    /// The next line, without its newline (invalid UTF-8 replaced); `None`
    /// once stderr has ended and every queued line was read.
    pub async fn next_line(&mut self) -> Option<String> {
        poll_fn(|cx| self.poll_next_line(cx)).await
    }

    /// The next line's bytes, or `Pending` (the task woken when one comes
    /// or stderr ends); `Ready(None)` at the end.
    pub fn poll_next_line(&mut self, cx: &mut Context<'_>) -> Poll<Option<String>> {
        let mut state = self.queue.lock();
        if let Some(line) = state.lines.pop_front() {
            return Poll::Ready(Some(String::from_utf8_lossy(&line).into_owned()));
        }
        if state.ended {
            return Poll::Ready(None);
        }
        state.waiting = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Lines dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.queue.lock().dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(lines: &mut StderrLines) -> Vec<String> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut out = Vec::new();
        while let Poll::Ready(Some(line)) = lines.poll_next_line(&mut cx) {
            out.push(line);
        }
        out
    }

    #[test]
    fn lines_split_across_chunks_come_whole_and_the_last_at_the_end() {
        let queue = LineQueue::new(10);
        let mut lines = StderrLines::new(queue.clone());
        queue.feed(b"one\ntw");
        queue.feed(b"o\nthree");
        assert_eq!(drain(&mut lines), ["one", "two"]);
        queue.end();
        assert_eq!(drain(&mut lines), ["three"]);
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(lines.poll_next_line(&mut cx), Poll::Ready(None));
        assert_eq!(lines.dropped(), 0);
    }

    #[test]
    fn a_full_queue_drops_and_counts_and_never_grows() {
        let queue = LineQueue::new(3);
        let mut lines = StderrLines::new(queue.clone());
        queue.feed(&b"x\n".repeat(1000));
        assert_eq!(lines.dropped(), 997);
        assert_eq!(drain(&mut lines), ["x", "x", "x"]);
        queue.feed(b"y\n");
        assert_eq!(drain(&mut lines), ["y"]);
        assert_eq!(lines.dropped(), 997);
    }

    #[test]
    fn a_line_longer_than_the_maximum_comes_in_pieces() {
        let queue = LineQueue::new(10);
        let mut lines = StderrLines::new(queue.clone());
        let long = vec![b'a'; MAX_LINE_BYTES * 2 + 5];
        queue.feed(&long[..1000]);
        queue.feed(&long[1000..]);
        queue.feed(b"\nnext\n");
        let got = drain(&mut lines);
        let sizes: Vec<usize> = got.iter().map(String::len).collect();
        assert_eq!(sizes, [MAX_LINE_BYTES, MAX_LINE_BYTES, 5, 4]);
        assert_eq!(got[3], "next");
    }
}
