//! One reader per output stream, on a [worker](crate::workers) thread.
//!
//! A reader reads into one 64 KiB buffer, its worker thread's, and feeds
//! what it read to the core itself, through the [`SharedCall`]: nothing is
//! sent and nothing is allocated per chunk, nor per call once the worker
//! has run a reader. At end-of-file, or on any read error
//! other than `EINTR`, it reports the end of its stream the same way. It
//! wakes the owner ([`Event::CallChanged`]) only when a report left the
//! core with actions to carry out or an earlier timeout.
//!
//! Once the call stops listening (the call finished, or its streams were
//! abandoned), a reader keeps reading and discarding until end-of-file, so a
//! descendant still holding the pipe never blocks on a full pipe.

use std::cell::RefCell;
use std::io::{self, Read};
use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use crate::owner::{Event, Pipe};
pub(crate) use crate::read_buffers::CHUNK_BYTES;
use crate::read_buffers::bytes_read;
use crate::shared_call::SharedCall;

/// Starts the reader of `pipe`.
pub(crate) fn start(
    pipe: Pipe,
    source: impl Read + Send + 'static,
    call: Arc<SharedCall>,
    events: SyncSender<Event>,
) -> io::Result<()> {
    crate::workers::run(move || run(pipe, source, &call, &events))
}

thread_local! {
    /// The read buffer of the reader running on this worker thread, kept for
    /// the next reader it runs: a call allocates and faults in no buffer.
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn run(pipe: Pipe, source: impl Read, call: &SharedCall, events: &SyncSender<Event>) {
    BUFFER.with_borrow_mut(|buf| {
        buf.resize(CHUNK_BYTES, 0);
        read_all(pipe, source, buf, call, events);
    });
}

fn read_all(
    pipe: Pipe,
    mut source: impl Read,
    buf: &mut [u8],
    call: &SharedCall,
    events: &SyncSender<Event>,
) {
    loop {
        let len = read_some(&mut source, buf);
        if len == 0 {
            break;
        }
        if !call.feed(pipe, &buf[..len]).wake(events) {
            return discard(source, buf);
        }
    }
    let ended = call.report(|call, now| match pipe {
        Pipe::Stdout => call.handle_stdout_eof(now),
        Pipe::Stderr => call.handle_stderr_eof(now),
    });
    ended.wake(events);
}

/// Bytes read into `buf`; 0 at end-of-file or on an error other than EINTR.
fn read_some(source: &mut impl Read, buf: &mut [u8]) -> usize {
    loop {
        if let Some(len) = bytes_read(source.read(buf)) {
            return len;
        }
    }
}

/// Reads and drops everything until end-of-file: nobody listens any more,
/// but the writer must not block.
fn discard(mut source: impl Read, buf: &mut [u8]) {
    while read_some(&mut source, buf) > 0 {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared_call::tests::{carry_out, dispatched};

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use spillguard_core::{ExitStatus, Signal, State, StreamEnd};

    /// Yields `left` reads of a full buffer, then end-of-file.
    struct Source {
        left: Arc<AtomicUsize>,
    }

    impl Source {
        fn new(chunks: usize) -> (Self, Arc<AtomicUsize>) {
            let left = Arc::new(AtomicUsize::new(chunks));
            (Self { left: left.clone() }, left)
        }
    }

    impl Read for Source {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.left.load(Ordering::SeqCst) == 0 {
                return Ok(0);
            }
            self.left.fetch_sub(1, Ordering::SeqCst);
            buf.fill(b'x');
            Ok(buf.len())
        }
    }

    /// Every event the reader sends, until it ends.
    fn events_of(rx: &mpsc::Receiver<Event>) -> Vec<String> {
        let mut seen = Vec::new();
        while let Ok(event) = rx.recv_timeout(Duration::from_secs(10)) {
            seen.push(format!("{event:?}"));
        }
        seen
    }

    fn stderr_seen(call: &SharedCall) -> u64 {
        call.lock()
            .call
            .stderr()
            .map_or(0, |capture| capture.bytes_seen())
    }

    #[test]
    fn every_chunk_is_fed_and_the_end_reported() {
        let (tx, rx) = mpsc::sync_channel(32);
        let call = Arc::new(dispatched(None, None));
        let (source, left) = Source::new(100);
        start(Pipe::Stderr, source, call.clone(), tx).unwrap();
        // Nothing for the owner to do: the helper has not exited.
        assert_eq!(events_of(&rx), Vec::<String>::new());
        assert_eq!(left.load(Ordering::SeqCst), 0);
        {
            let call = &mut call.lock().call;
            call.handle_stdout_eof(Instant::now()).unwrap();
            call.handle_exit(Instant::now(), ExitStatus::code(0))
                .unwrap();
        }
        let record = carry_out(&call).1.unwrap().record;
        assert_eq!(record.state, State::Completed);
        assert_eq!(record.stream_end, StreamEnd::Eof);
        assert_eq!(record.stderr_bytes_seen, 100 * CHUNK_BYTES as u64);
    }

    #[test]
    fn the_owner_is_woken_once_when_the_ceiling_is_crossed() {
        let (tx, rx) = mpsc::sync_channel(32);
        let call = Arc::new(dispatched(Some(3 * CHUNK_BYTES as u64), None));
        let (source, _) = Source::new(10);
        start(Pipe::Stderr, source, call.clone(), tx).unwrap();
        assert_eq!(events_of(&rx), ["CallChanged"]);
        let (signals, outcome) = carry_out(&call);
        assert_eq!(signals, [Signal::Term]);
        assert!(outcome.is_none());
        assert_eq!(stderr_seen(&call), 10 * CHUNK_BYTES as u64);
    }

    #[test]
    fn a_reader_nobody_listens_to_drains_to_the_end() {
        let (tx, rx) = mpsc::sync_channel(32);
        let call = Arc::new(dispatched(None, None));
        call.stop_listening();
        let (source, left) = Source::new(1000);
        start(Pipe::Stderr, source, call.clone(), tx).unwrap();
        // The reader drains unheard and reports nothing, not even its end.
        assert_eq!(events_of(&rx), Vec::<String>::new());
        assert_eq!(left.load(Ordering::SeqCst), 0);
        assert_eq!(stderr_seen(&call), 0);
    }
}
