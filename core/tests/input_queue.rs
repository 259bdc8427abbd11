//! The client's bytes on their way to a stdio server, in virtual time: a
//! slow server loses nothing; a server that stops reading is found at the
//! stall rule's instant, loses whole messages only (each request
//! reported), gets them again once it reads; every byte read is taken,
//! queued or counted as undelivered.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use proptest::prelude::*;
use spillguard_core::trace::CallTrace;
use spillguard_core::{InputQueue, QueueEvent, QueueSettings, RawValue};

/// The tests' time origin, read once; every later instant is an offset.
#[allow(clippy::disallowed_methods)]
fn epoch() -> Instant {
    Instant::now()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn request(id: u32, pad: usize) -> Vec<u8> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}\n",
        "y".repeat(pad)
    )
    .into_bytes()
}

/// A driver: what it read, what reached the server, and the ids reported.
struct Drive {
    queue: InputQueue,
    server: Vec<u8>,
    requests: Vec<String>,
    dropped: Vec<String>,
    undelivered: u64,
    /// The span each request is to carry (with `whole_lines`).
    trace: Option<CallTrace>,
}

fn id(info: &spillguard_core::MessageInfo) -> String {
    String::from_utf8(
        info.id
            .as_ref()
            .map(RawValue::as_bytes)
            .unwrap_or_default()
            .to_vec(),
    )
    .unwrap()
}

impl Drive {
    fn new(settings: QueueSettings, t0: Instant) -> Self {
        Self {
            queue: InputQueue::new(settings, t0),
            server: Vec::new(),
            requests: Vec::new(),
            dropped: Vec::new(),
            undelivered: 0,
            trace: None,
        }
    }

    fn read(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let room = self.queue.room();
            let n = room.len().min(rest.len());
            room[..n].copy_from_slice(&rest[..n]);
            let (requests, dropped) = (&mut self.requests, &mut self.dropped);
            let trace = &self.trace;
            self.queue.handle_read(n, |event| match event {
                QueueEvent::Request(info) => {
                    requests.push(id(info));
                    trace.clone()
                }
                QueueEvent::Dropped(info) => {
                    dropped.push(id(info));
                    None
                }
            });
            rest = &rest[n..];
        }
        self.undelivered += self.queue.take_undelivered();
    }

    fn end(&mut self) {
        let dropped = &mut self.dropped;
        self.queue.handle_read(0, |event| {
            if let QueueEvent::Dropped(info) = event {
                dropped.push(id(info));
            }
            None
        });
        self.undelivered += self.queue.take_undelivered();
    }

    /// The server takes up to `n` bytes at `now`.
    fn take(&mut self, now: Instant, n: usize) {
        let bytes = self.queue.to_write();
        let n = n.min(bytes.len());
        self.server.extend_from_slice(&bytes[..n]);
        self.queue.handle_written(now, n);
    }

    fn timeout(&mut self, now: Instant) {
        let dropped = &mut self.dropped;
        self.queue.handle_timeout(now, |event| {
            if let QueueEvent::Dropped(info) = event {
                dropped.push(id(info));
            }
        });
        self.undelivered += self.queue.take_undelivered();
    }
}

fn small(messages: bool) -> QueueSettings {
    QueueSettings {
        max_bytes: 1_000,
        messages,
        ..QueueSettings::default()
    }
}

#[test]
fn a_slow_server_loses_nothing_while_the_queue_has_room() {
    let t0 = epoch();
    let mut d = Drive::new(small(true), t0);
    let all: Vec<u8> = (0..5).flat_map(|i| request(i, 50)).collect();
    d.read(&all);
    assert!(d.queue.wants_input());
    // Not full, client open: the stall rule does not apply.
    assert_eq!(d.queue.poll_timeout(), None);
    d.timeout(t0 + Duration::from_secs(60));
    d.take(t0 + Duration::from_secs(60), usize::MAX);
    assert_eq!(d.server, all);
    assert_eq!((d.undelivered, d.dropped.len()), (0, 0));
    assert_eq!(d.requests, ["0", "1", "2", "3", "4"]);
}

#[test]
fn a_server_that_stops_reading_loses_whole_messages_and_gets_them_again_once_it_reads() {
    let t0 = epoch();
    let mut d = Drive::new(small(true), t0);
    let first = request(1, 100);
    d.read(&first);
    d.take(t0 + ms(5), 20);
    // The queue fills: the client waits.
    let rest: Vec<u8> = (2..9).flat_map(|i| request(i, 100)).collect();
    d.read(&rest);
    assert!(!d.queue.wants_input());
    assert_eq!(
        d.queue.poll_timeout(),
        Some(t0 + ms(5) + Duration::from_secs(1))
    );
    d.timeout(t0 + ms(1_004));
    assert!(d.dropped.is_empty(), "a no-op before the instant");
    d.timeout(t0 + ms(1_005));
    // The request begun is kept whole, the others dropped and reported.
    assert_eq!(d.dropped, ["2", "3", "4", "5", "6", "7", "8"]);
    assert_eq!(d.undelivered, rest.len() as u64);
    assert_eq!(d.queue.to_write(), &first[20..]);
    // The client is read on; what it sends is queued again.
    assert!(d.queue.wants_input());
    d.read(&request(9, 10));
    // The server reads again: it gets its line whole, then the next ones.
    d.take(t0 + ms(2_000), usize::MAX);
    d.read(&request(10, 10));
    d.take(t0 + ms(2_001), usize::MAX);
    assert_eq!(
        d.server,
        [first.clone(), request(9, 10), request(10, 10)].concat()
    );
    assert_eq!(d.requests.len(), 10);
    assert_eq!(d.dropped.len(), 7);
}

#[test]
fn the_clients_end_with_a_stalled_server_drops_the_rest_at_the_shorter_stall() {
    let t0 = epoch();
    let mut d = Drive::new(small(true), t0);
    d.read(&request(1, 10));
    d.read(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"meth");
    d.end();
    assert!(!d.queue.is_finished());
    assert_eq!(d.queue.poll_timeout(), Some(t0 + ms(250)));
    d.timeout(t0 + ms(250));
    assert!(d.queue.is_finished());
    assert_eq!(d.dropped, ["1"]);
    assert_eq!(d.undelivered, (request(1, 10).len() + 29) as u64);
    assert_eq!(d.server, b"");
}

#[test]
fn without_messages_a_stalled_stream_is_dropped_from_then_on() {
    let t0 = epoch();
    let mut d = Drive::new(small(false), t0);
    d.read(&[b'z'; 1_500]);
    d.take(t0, 100);
    assert_eq!(d.queue.poll_timeout(), Some(t0 + Duration::from_secs(1)));
    d.timeout(t0 + Duration::from_secs(1));
    assert!(d.queue.is_empty());
    d.read(&[b'z'; 700]);
    d.take(t0 + ms(1_100), usize::MAX);
    // A stream cut once is not resumed.
    assert!(d.queue.is_wedged());
    assert!(d.queue.wants_input());
    assert_eq!((d.server.len(), d.undelivered), (100, 2_100));
    assert!(d.requests.is_empty() && d.dropped.is_empty());
}

#[test]
fn a_line_that_alone_fills_the_queue_of_a_stalled_server_is_dropped_to_its_end() {
    let t0 = epoch();
    let mut d = Drive::new(small(true), t0);
    let huge = request(1, 3_000);
    d.read(&huge[..1_200]);
    d.timeout(t0 + Duration::from_secs(1));
    assert!(d.queue.is_empty());
    // Its rest is dropped as it comes, up to its end; the next line is kept.
    d.read(&huge[1_200..]);
    d.read(&request(2, 5));
    d.take(t0 + ms(1_500), usize::MAX);
    assert_eq!(d.server, request(2, 5));
    assert_eq!(d.undelivered, huge.len() as u64);
}

/// A full queue (4 MiB) behind a server that takes 64 KiB for each
/// 64 KiB the client sends: every byte arrives in order, the queued bytes
/// are moved (down to the buffer's start, or to a larger buffer) at most
/// about once per byte read (moving the whole queue whenever the room ran
/// out moved 47 per byte here), and the buffer stays within twice the
/// bound plus two reads.
#[test]
fn a_full_queue_behind_a_slow_server_is_moved_about_once_per_byte() {
    const READ: usize = 64 << 10;
    let now = epoch();
    let mut queue = InputQueue::new(QueueSettings::default(), now);
    let bound = QueueSettings::default().max_bytes;
    let (mut sent, mut got, mut moved) = (0_u64, Vec::new(), 0_u64);
    let byte = |at: u64| (at % 251) as u8;
    while sent < 16 << 20 {
        while queue.wants_input() {
            let (before, len) = (queue.to_write().as_ptr(), queue.len());
            let room = queue.room();
            for (at, slot) in (sent..).zip(room.iter_mut().take(READ)) {
                *slot = byte(at);
            }
            if len > 0 && queue.to_write().as_ptr() != before {
                moved += len as u64;
            }
            queue.handle_read(READ, |_| None);
            sent += READ as u64;
        }
        assert!(
            queue.len() >= bound,
            "the queue fills before the server reads"
        );
        let n = queue.to_write().len().min(READ);
        got.extend_from_slice(&queue.to_write()[..n]);
        queue.handle_written(now, n);
        let reserved = queue.bytes_reserved();
        assert!(reserved <= 2 * bound + 2 * (256 << 10), "{reserved}");
    }
    got.extend_from_slice(queue.to_write());
    assert_eq!(got.len() as u64, sent);
    assert!(got.iter().zip(0..).all(|(&b, at)| b == byte(at)));
    assert!(moved <= 2 * sent, "{moved} bytes moved for {sent} read");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Whatever the schedule: every byte read is delivered, queued or
    /// counted; with messages, what reaches the server is whole client
    /// lines in order (the one being delivered excepted), and every
    /// request is reported read before it can be delivered and is either
    /// delivered, dropped (reported) or still queued.
    #[test]
    fn every_byte_is_taken_queued_or_counted(
        steps in proptest::collection::vec((0..4_u8, 1..400_usize), 1..60),
        messages in any::<bool>(),
    ) {
        let t0 = epoch();
        let mut d = Drive::new(small(messages), t0);
        let mut now = t0;
        let mut sent = Vec::new();
        let mut next = 0;
        for (what, size) in steps {
            match what {
                0 if d.queue.wants_input() => {
                    let line = request(next, size % 120);
                    next += 1;
                    sent.extend_from_slice(&line);
                    d.read(&line);
                }
                1 => d.take(now, size),
                2 => {
                    now += ms(size as u64 * 10);
                    d.timeout(now);
                }
                _ => now += ms(size as u64),
            }
            let total = d.server.len() as u64 + d.queue.len() as u64 + d.undelivered;
            prop_assert_eq!(total, sent.len() as u64);
        }
        if messages {
            // Whole lines in order, a subsequence of what was sent.
            let sent_lines: Vec<&[u8]> = sent.split_inclusive(|&b| b == b'\n').collect();
            let mut at = 0;
            for line in d.server.split_inclusive(|&b| b == b'\n') {
                if !line.ends_with(b"\n") {
                    break;
                }
                let found = sent_lines[at..].iter().position(|l| *l == line);
                prop_assert!(found.is_some(), "{:?}", String::from_utf8_lossy(line));
                at += found.unwrap() + 1;
            }
            prop_assert_eq!(d.requests.len(), next as usize);
        }
    }
}

#[test]
fn a_restarted_server_gets_the_whole_lines_the_last_one_never_began() {
    let t0 = epoch();
    let mut d = Drive::new(small(true), t0);
    let (one, two, three) = (request(1, 10), request(2, 10), request(3, 10));
    d.read(&[one.clone(), two.clone(), three[..20].to_vec()].concat());
    // The server took 30 bytes of the first line, then died.
    d.take(t0, 30);
    let ids = |d: &Drive| -> Vec<String> { d.queue.queued_requests().map(id).collect() };
    assert_eq!(ids(&d), ["2"]);
    d.queue.handle_server_gone();
    d.undelivered += d.queue.take_undelivered();
    // The rest of line 1 is dropped; line 2 and line 3 (as it comes) wait.
    assert_eq!(d.undelivered, one.len() as u64 - 30);
    assert_eq!(ids(&d), ["2"]);
    d.read(&three[20..]);
    assert_eq!(ids(&d), ["2", "3"]);
    d.server.clear();
    d.take(t0 + ms(100), usize::MAX);
    assert_eq!(d.server, [two, three].concat());
    assert_eq!(d.requests, ["1", "2", "3"]);
    assert_eq!(d.dropped.len(), 0);
}

#[test]
fn a_restart_drops_the_rest_of_a_line_not_yet_read_whole() {
    let t0 = epoch();
    let mut d = Drive::new(small(true), t0);
    let (one, two) = (request(1, 10), request(2, 10));
    d.read(&one[..40]);
    d.take(t0, 25);
    d.queue.handle_server_gone();
    d.read(&[&one[40..], &two[..]].concat());
    d.undelivered += d.queue.take_undelivered();
    assert_eq!(d.undelivered, one.len() as u64 - 25);
    d.server.clear();
    d.take(t0 + ms(100), usize::MAX);
    assert_eq!(d.server, two);
}

fn whole_lines() -> QueueSettings {
    QueueSettings {
        whole_lines: true,
        ..small(true)
    }
}

/// What the queue writes into each request of [`request`].
fn span_text(trace: &CallTrace) -> String {
    format!("\"_meta\":{{\"traceparent\":\"{}\"}},", trace.traceparent())
}

#[test]
fn with_whole_lines_a_request_waits_for_its_end_then_carries_the_span() {
    let t0 = epoch();
    let mut d = Drive::new(whole_lines(), t0);
    let trace = CallTrace::root([7; 16], [9; 8]);
    d.trace = Some(trace.clone());
    let line = request(1, 30);
    d.read(&line[..40]);
    assert_eq!(d.queue.to_write(), b"", "half a line is held");
    assert_eq!(d.queue.len(), 40);
    d.read(&line[40..]);
    let want = String::from_utf8(line.clone()).unwrap().replacen(
        "\"params\":{",
        &format!("\"params\":{{{}", span_text(&trace)),
        1,
    );
    assert_eq!(d.queue.to_write(), want.as_bytes());
    // A notification (not a request) and a line that is not a message go
    // as they are; the next request carries the span too.
    let note = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":{}}\n";
    d.read(note);
    d.read(b"not json\n");
    d.read(&request(2, 0));
    d.take(t0, usize::MAX);
    let server = String::from_utf8(d.server.clone()).unwrap();
    let lines: Vec<&str> = server.lines().collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[1].as_bytes(), &note[..note.len() - 1]);
    assert_eq!(lines[2], "not json");
    assert!(lines[3].contains(&span_text(&trace)), "{}", lines[3]);
    assert_eq!(d.requests, ["1", "2"]);
}

#[test]
fn with_whole_lines_a_line_that_fills_the_queue_goes_as_it_comes_unchanged() {
    let t0 = epoch();
    let mut d = Drive::new(whole_lines(), t0);
    d.trace = Some(CallTrace::root([7; 16], [9; 8]));
    let long = request(1, 1_500);
    d.read(&long[..1_000]);
    assert_eq!(
        d.queue.to_write().len(),
        1_000,
        "the full queue is released"
    );
    d.take(t0, 600);
    d.read(&long[1_000..]);
    d.take(t0, usize::MAX);
    assert_eq!(d.server, long, "as the client wrote it");
    // The client's end releases a last line without its newline.
    let short = request(2, 5);
    d.read(&short[..short.len() - 1]);
    assert_eq!(d.queue.to_write(), b"");
    d.end();
    assert_eq!(d.queue.to_write(), &short[..short.len() - 1]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// With whole lines and a span for each request, whatever the
    /// schedule: apart from the bytes the queue wrote, every byte read is
    /// delivered, queued or counted (undelivered counts the client's
    /// bytes only); each line delivered whole is a line sent, with the
    /// span.
    #[test]
    fn with_whole_lines_every_client_byte_is_accounted_for(
        steps in proptest::collection::vec((0..4_u8, 1..400_usize), 1..60),
    ) {
        let t0 = epoch();
        let mut d = Drive::new(whole_lines(), t0);
        let trace = CallTrace::root([3; 16], [4; 8]);
        d.trace = Some(trace.clone());
        let span = span_text(&trace);
        let mut now = t0;
        let mut sent = Vec::new();
        let mut next = 0;
        for (what, size) in steps {
            match what {
                0 if d.queue.wants_input() => {
                    let line = request(next, size % 120);
                    next += 1;
                    sent.extend_from_slice(&line);
                    // In two pieces, the cut anywhere.
                    let cut = size % line.len();
                    d.read(&line[..cut]);
                    d.read(&line[cut..]);
                }
                1 => d.take(now, size),
                2 => {
                    now += ms(size as u64 * 10);
                    d.timeout(now);
                }
                _ => now += ms(size as u64),
            }
            let server = String::from_utf8_lossy(&d.server).replace(&span, "");
            let queued = String::from_utf8_lossy(d.queue.to_write()).replace(&span, "");
            let held = d.queue.len() - d.queue.to_write().len();
            let total = (server.len() + queued.len() + held) as u64 + d.undelivered;
            // A span cut in two by a partial take is not found whole:
            // at most one such in the server's bytes and one in the queue.
            let slack = 2 * span.len() as u64;
            prop_assert!(total >= sent.len() as u64 && total <= sent.len() as u64 + slack,
                "{} vs {}", total, sent.len());
        }
        let sent_lines: Vec<String> = sent
            .split_inclusive(|&b| b == b'\n')
            .map(|l| String::from_utf8_lossy(l).replacen("\"params\":{", &format!("\"params\":{{{span}"), 1))
            .collect();
        let mut at = 0;
        for line in String::from_utf8_lossy(&d.server).split_inclusive('\n') {
            if !line.ends_with('\n') {
                break;
            }
            let found = sent_lines[at..].iter().position(|l| l == line);
            prop_assert!(found.is_some(), "{:?}", line);
            at += found.unwrap() + 1;
        }
        prop_assert_eq!(d.requests.len(), next as usize);
    }
}
