//! The MCP stdout line guard: only whole JSON-RPC messages are forwarded,
//! what it forwards and diverts is the same for every chunking and for
//! both ways of feeding it, every byte goes exactly one way in order, and
//! its verdict on each line is serde_json's (on lines without lone
//! surrogate escapes or nesting deeper than 128, where the grammar and
//! serde_json differ).
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use spillguard_core::{MessageKind, Segment, StdoutLineGuard};

/// What a guard made of a stream.
#[derive(Debug, Default, PartialEq, Eq)]
struct Split {
    /// Each forwarded line, whole.
    forwarded: Vec<Vec<u8>>,
    /// Every diverted byte, in order.
    diverted: Vec<u8>,
    /// Diverted lines counted by the segments.
    lines: u64,
    /// The input rebuilt from the segments in order.
    all: Vec<u8>,
}

/// The guard fed `input` cut at `cuts`, by `feed` or by reading into
/// `spare`, then finished.
fn split_with(guard: &mut StdoutLineGuard, input: &[u8], cuts: &[usize], spare: bool) -> Split {
    let mut split = Split::default();
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    bounds.push(input.len());
    bounds.sort_unstable();
    let mut sink = |segment: Segment<'_>| {
        match segment {
            Segment::Forward(line) => {
                assert!(!line.bytes.is_empty());
                split.forwarded.push(line.bytes.to_vec());
                split.all.extend_from_slice(line.bytes);
            }
            Segment::Divert(d) => {
                assert!(!d.bytes.is_empty());
                split.diverted.extend_from_slice(d.bytes);
                split.all.extend_from_slice(d.bytes);
                split.lines += d.lines;
            }
            Segment::DivertHeld(held) => {
                // Taken: the guard goes on with a buffer of its own.
                let bytes = std::mem::take(held.bytes);
                assert!(!bytes.is_empty());
                split.diverted.extend_from_slice(&bytes);
                split.all.extend_from_slice(&bytes);
                split.lines += held.lines;
            }
        }
        Ok::<(), ()>(())
    };
    let mut at = 0;
    for end in bounds {
        let mut chunk = &input[at..end];
        if spare {
            while !chunk.is_empty() {
                let room = guard.spare();
                let n = room.len().min(chunk.len());
                room[..n].copy_from_slice(&chunk[..n]);
                guard.filled(n, &mut sink).unwrap();
                chunk = &chunk[n..];
            }
        } else {
            guard.feed(chunk, &mut sink).unwrap();
        }
        at = end;
    }
    guard.finish(&mut sink).unwrap();
    split
}

fn split(input: &[u8]) -> Split {
    split_with(&mut StdoutLineGuard::new(), input, &[], false)
}

/// serde_json's verdict: one object with `"jsonrpc": "2.0"`.
fn is_message(line: &[u8]) -> bool {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let message = |v: &serde_json::Value| {
        v.as_object()
            .is_some_and(|o| o.get("jsonrpc") == Some(&serde_json::json!("2.0")))
    };
    // One message, or a batch of one or more (at most MAX_BATCH).
    serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|v| match v.as_array() {
        Some(batch) => {
            !batch.is_empty()
                && batch.len() <= spillguard_core::MAX_BATCH
                && batch.iter().all(message)
        }
        None => message(&v),
    })
}

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The reference: each line (the last one unterminated) forwarded iff
/// serde_json calls it a message (after a leading byte order mark, which
/// the forwarded line goes without) and it fits `max`; and the input as
/// the segments give it back (without the marks skipped).
fn model(input: &[u8], max: usize) -> (Vec<Vec<u8>>, Vec<u8>, u64, Vec<u8>) {
    let (mut forwarded, mut diverted, mut lines) = (Vec::new(), Vec::new(), 0);
    let mut all = Vec::new();
    for line in input.split_inclusive(|&b| b == b'\n') {
        // An unterminated last line would be one byte longer with its `\n`.
        let len = line.len() + usize::from(!line.ends_with(b"\n"));
        let body = line.strip_prefix(BOM).unwrap_or(line);
        if len <= max && is_message(body) {
            forwarded.push(body.to_vec());
            all.extend_from_slice(body);
        } else {
            diverted.extend_from_slice(line);
            all.extend_from_slice(line);
            lines += 1;
        }
    }
    (forwarded, diverted, lines, all)
}

#[test]
fn the_documented_rules() {
    let ok = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    // Messages are forwarded whole, `\r\n` and leading blanks and all.
    let both = b"{\"jsonrpc\":\"2.0\",\"id\":1}\r\n  {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n";
    let s = split(both);
    assert_eq!(s.forwarded.len(), 2);
    assert_eq!(s.forwarded.concat(), both);
    assert_eq!(s.lines, 0);
    // So is a batch answer: an array of messages.
    let batch = b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}},{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}]\n";
    let s = split(batch);
    assert_eq!(s.forwarded, [batch.to_vec()]);
    assert_eq!(s.lines, 0);
    // What is not one message is diverted, one line each: broken JSON, a
    // brace that starts a log line, two objects on one line, structured
    // logs without `jsonrpc`, a wrong version, a blank line.
    let not: &[&[u8]] = &[
        b"{broken json\n",
        b"{DEBUG} x\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n",
        b"{\"level\":30,\"time\":1700000000000,\"pid\":7,\"msg\":\"listening\"}\n",
        b"{\"name\":\"srv\",\"hostname\":\"h\",\"pid\":7,\"level\":30,\"msg\":\"up\",\"v\":0}\n",
        b"{\"event\": \"started\", \"level\": \"info\", \"timestamp\": \"2026-12-01T00:00:00Z\"}\n",
        b"{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}\n",
        b"\n",
        b" \t\r\n",
        b"[]\n",
        b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}},1]\n",
        b"\xff{\"jsonrpc\":\"2.0\",\"id\":1}\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xc3\x28\"}\n",
    ];
    for line in not {
        let s = split(line);
        assert_eq!(
            s.forwarded,
            Vec::<Vec<u8>>::new(),
            "{}",
            String::from_utf8_lossy(line)
        );
        assert_eq!((s.diverted.as_slice(), s.lines), (*line, 1));
    }
    // An unterminated last line is decided as it stands.
    let s = split(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":1}");
    assert_eq!(s.forwarded.len(), 1);
    let s = split(b"bye");
    assert_eq!((s.diverted.as_slice(), s.lines), (&b"bye"[..], 1));
    // What a forwarded message is.
    let mut guard = StdoutLineGuard::new();
    let mut kinds = Vec::new();
    guard
        .feed(ok, |segment| {
            if let Segment::Forward(line) = segment {
                kinds.push((
                    line.info.kind,
                    line.info.id.as_ref().unwrap().as_bytes().to_vec(),
                ));
            }
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!(kinds, [(MessageKind::Response, b"1".to_vec())]);
}

/// A message read into the guard's own buffer is handed on as a slice of
/// it: nothing copied.
#[test]
fn reading_into_spare_copies_nothing() {
    let mut guard = StdoutLineGuard::new();
    let room = guard.spare();
    let line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    room[..line.len()].copy_from_slice(line);
    let at = room.as_ptr();
    let mut seen = None;
    guard
        .filled(line.len(), |segment| {
            if let Segment::Forward(l) = segment {
                seen = Some(l.bytes.as_ptr());
            }
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!(seen, Some(at));
}

/// A 64 MiB message passes intact and whole; one byte more than the
/// maximum is diverted as it comes, as one line, and the guard never holds
/// more than the maximum.
#[test]
fn a_64_mib_message_passes_and_a_longer_line_is_diverted() {
    const LINE: usize = 64 << 20;
    let message = |len: usize| {
        let mut line = vec![b'7'; len];
        let head = b"{\"jsonrpc\":\"2.0\",\"result\":\"";
        line[..head.len()].copy_from_slice(head);
        line[len - 3..].copy_from_slice(b"\"}\n");
        line
    };
    let exact = message(LINE);
    let mut guard = StdoutLineGuard::new();
    let (mut forwarded, mut held_at_most) = (Vec::new(), 0);
    for chunk in exact.chunks(65_536) {
        guard
            .feed(chunk, |segment| {
                match segment {
                    Segment::Forward(line) => forwarded.push(line.bytes.len()),
                    Segment::Divert(_) | Segment::DivertHeld(_) => {
                        panic!("diverted part of the message")
                    }
                }
                Ok::<(), ()>(())
            })
            .unwrap();
        held_at_most = held_at_most.max(guard.held());
    }
    assert_eq!(forwarded, [LINE]);
    assert_eq!(held_at_most, LINE - 65_536);

    let over = message(LINE + 1);
    let (mut diverted, mut lines, mut held_at_most) = (0, 0, 0);
    for chunk in over.chunks(65_536) {
        guard
            .feed(chunk, |segment| {
                match segment {
                    Segment::Forward(_) => panic!("forwarded an oversized line"),
                    Segment::Divert(d) => {
                        diverted += d.bytes.len();
                        lines += d.lines;
                    }
                    Segment::DivertHeld(held) => {
                        diverted += held.bytes.len();
                        lines += held.lines;
                    }
                }
                Ok::<(), ()>(())
            })
            .unwrap();
        held_at_most = held_at_most.max(guard.held());
    }
    assert_eq!((diverted, lines), (LINE + 1, 1));
    assert!(held_at_most < LINE);
    assert_eq!((guard.lines_forwarded(), guard.lines_diverted()), (1, 1));
    // The next line is decided afresh.
    let s = split_with(
        &mut guard,
        b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":0}\n",
        &[],
        false,
    );
    assert_eq!(s.forwarded.len(), 1);
}

/// A held message costs about its own size: the buffer reserves at most
/// an eighth more (8 MiB at most) plus the 256 KiB read room, and never
/// more than the maximum plus that room, at the maximum and just over it.
#[test]
fn a_held_message_reserves_about_its_own_size() {
    const ROOM: usize = 256 << 10;
    for (max, len) in [
        (16 << 20, 16 << 20),
        (16 << 20, (16 << 20) + 1024),
        (64 << 20, 40 << 20),
        (64 << 20, 64 << 20),
        (64 << 20, (64 << 20) + 1024),
    ] {
        let mut guard = StdoutLineGuard::with_max_message(max);
        let mut bytes = vec![b'7'; len];
        bytes[len - 1] = b'\n';
        let mut reserved_at_most = 0;
        for chunk in bytes.chunks(ROOM / 2) {
            let room = guard.spare();
            room[..chunk.len()].copy_from_slice(chunk);
            guard.filled(chunk.len(), |_| Ok::<(), ()>(())).unwrap();
            reserved_at_most = reserved_at_most.max(guard.bytes_reserved());
        }
        let held = len.min(max);
        let bound = (held + (held / 8).min(8 << 20) + ROOM).min(max + ROOM);
        assert!(
            reserved_at_most <= bound,
            "max {max}, line {len}: reserved {reserved_at_most} > {bound}"
        );
        assert!(reserved_at_most as f64 <= 1.1 * held as f64 + (8 << 20) as f64);
    }
}

fn line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":[1,2,{\"b\":null}]}}\n".to_vec()),
        Just(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"caf\\u00e9 \\\"q\\\"\"}}\r\n".to_vec()),
        Just("  {\"jsonrpc\":\"2.0\",\"id\":\"\u{e9}\u{2603}\",\"result\":-1.5e-3}\n".as_bytes().to_vec()),
        Just(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}{\"jsonrpc\":\"2.0\"}\n".to_vec()),
        Just(b"{\"level\":30,\"msg\":\"listening\"}\n".to_vec()),
        Just(b"{broken json\n".to_vec()),
        Just(b"{DEBUG} x\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b" \t\r\n".to_vec()),
        Just(b"[1,2,3]\n".to_vec()),
        Just(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xc3\"}\n".to_vec()),
        // A byte order mark first: skipped; anywhere else: not a message.
        Just(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n".to_vec()),
        Just(b"\xEF\xBB\xBF\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n".to_vec()),
        Just(b" \xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n".to_vec()),
        Just(b"\xEF\xBB{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n".to_vec()),
        Just(b"\xEF\xBB\xBF\n".to_vec()),
        // A message cut short, and one with a byte changed.
        Just(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[1,2\n".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..40),
        proptest::collection::vec(
            prop::sample::select(&b"{}[]\":,0123456789.eE+-\\ntrufalsejsonrpc2 \r\n"[..]),
            0..60
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// For every chunking and both ways of feeding: the lines serde_json
    /// calls messages forwarded whole, the rest diverted with one line
    /// each, the segments in order the input.
    #[test]
    fn every_chunking_splits_as_serde_json_decides(
        lines in proptest::collection::vec(line(), 0..30),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        max in prop_oneof![Just(usize::MAX), 1_usize..120],
    ) {
        let input: Vec<u8> = lines.concat();
        let (forwarded, diverted, diverted_lines, all) = model(&input, max);
        for (cuts, spare) in [(&[][..], false), (&cuts[..], false), (&cuts[..], true)] {
            let mut guard = StdoutLineGuard::with_max_message(max);
            let s = split_with(&mut guard, &input, cuts, spare);
            prop_assert_eq!(&s.forwarded, &forwarded);
            prop_assert_eq!(&s.diverted, &diverted);
            prop_assert_eq!(s.lines, diverted_lines);
            prop_assert_eq!(guard.lines_diverted(), diverted_lines);
            prop_assert_eq!(guard.lines_forwarded(), forwarded.len() as u64);
            prop_assert_eq!(&s.all, &all);
        }
        // Byte by byte, too: the finest chunking.
        let every: Vec<usize> = (0..input.len()).collect();
        let s = split_with(&mut StdoutLineGuard::with_max_message(max), &input, &every, false);
        prop_assert_eq!((&s.forwarded, &s.diverted, s.lines), (&forwarded, &diverted, diverted_lines));
    }
}

/// A line just over the maximum is handed over in the buffer that held it,
/// whether it crosses the maximum before its newline comes or ends within
/// the read that crosses it: a sink that takes the buffer owns the bytes
/// without a copy, the guard goes on with a buffer of read size, and the
/// message after the line still passes.
#[test]
fn a_line_over_the_maximum_is_handed_over_not_copied() {
    const MAX: usize = 1 << 20;
    let long = |len: usize| {
        let mut line = vec![b'x'; len];
        line[len - 1] = b'\n';
        line
    };
    let message = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n";
    for (len, read) in [
        (MAX + 1024, 64 << 10),
        (MAX + 1024, 100_000),
        (3 * MAX, 128 << 10),
    ] {
        let mut guard = StdoutLineGuard::with_max_message(MAX);
        let mut input = long(len);
        input.extend_from_slice(message);
        let (mut taken, mut copied, mut lines, mut forwarded) = (Vec::new(), 0, 0, Vec::new());
        let mut at = 0;
        while at < input.len() {
            let room = guard.spare();
            let n = room.len().min(read).min(input.len() - at);
            room[..n].copy_from_slice(&input[at..at + n]);
            at += n;
            guard
                .filled(n, |segment| {
                    match segment {
                        Segment::Forward(line) => forwarded.push(line.bytes.to_vec()),
                        Segment::Divert(d) => {
                            copied += d.bytes.len();
                            lines += d.lines;
                        }
                        Segment::DivertHeld(held) => {
                            lines += held.lines;
                            taken.push(std::mem::take(held.bytes));
                        }
                    }
                    Ok::<(), ()>(())
                })
                .unwrap();
            // Once handed over, the guard holds no more than a read's room.
            if !taken.is_empty() {
                assert!(
                    guard.bytes_reserved() <= 512 << 10,
                    "{}",
                    guard.bytes_reserved()
                );
            }
        }
        guard.finish(|_| Ok::<(), ()>(())).unwrap();
        let first = taken.first().map_or(0, Vec::len);
        // The held part is handed over whole; only what came after it in
        // later reads is diverted as it comes.
        assert!(first >= MAX, "len {len}, read {read}: handed over {first}");
        let handed: usize = taken.iter().map(Vec::len).sum();
        assert_eq!((handed + copied, lines), (len, 1), "len {len}, read {read}");
        assert_eq!(forwarded, [message.to_vec()], "len {len}, read {read}");
        assert_eq!((guard.lines_diverted(), guard.lines_forwarded()), (1, 1));
    }
}
