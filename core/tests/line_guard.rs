//! The MCP stdout line guard: what it forwards and diverts is the same for
//! every chunking, every byte goes exactly one way, in order, as subslices
//! of the input, and a line of any length passes without being held.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use spillguard_core::{Segment, StdoutLineGuard};

/// Forwarded bytes, diverted bytes, diverted lines counted by the
/// segments, and the input rebuilt from the segments in order.
fn split_all(input: &[u8], cuts: &[usize]) -> (Vec<u8>, Vec<u8>, u64, Vec<u8>) {
    let mut guard = StdoutLineGuard::new();
    let (mut forward, mut divert, mut lines, mut all) = (Vec::new(), Vec::new(), 0, Vec::new());
    let mut at = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    bounds.push(input.len());
    bounds.sort_unstable();
    for end in bounds {
        let chunk = &input[at..end];
        for segment in guard.split(chunk) {
            match segment {
                Segment::Forward(bytes) => {
                    assert!(!bytes.is_empty());
                    forward.extend_from_slice(bytes);
                    all.extend_from_slice(bytes);
                }
                Segment::Divert(d) => {
                    assert!(!d.bytes.is_empty());
                    divert.extend_from_slice(d.bytes);
                    all.extend_from_slice(d.bytes);
                    lines += d.lines;
                }
            }
        }
        at = end;
    }
    assert_eq!(lines, guard.lines_diverted());
    (forward, divert, lines, all)
}

fn split(input: &[u8]) -> (Vec<u8>, Vec<u8>, u64) {
    let (f, d, l, _) = split_all(input, &[]);
    (f, d, l)
}

#[test]
fn the_documented_rules() {
    // JSON object lines are forwarded, `\r\n` and all.
    assert_eq!(
        split(b"{\"id\":1}\r\n{\"id\":2}\n"),
        (b"{\"id\":1}\r\n{\"id\":2}\n".to_vec(), Vec::new(), 0)
    );
    // Anything else is diverted, one line each.
    assert_eq!(
        split(b"starting\n[1,2]\n\"text\"\nnull\n"),
        (Vec::new(), b"starting\n[1,2]\n\"text\"\nnull\n".to_vec(), 4)
    );
    // Leading whitespace is diverted, the JSON line forwarded from `{`.
    assert_eq!(
        split(b"  \t{\"id\":3}\n"),
        (b"{\"id\":3}\n".to_vec(), b"  \t".to_vec(), 0)
    );
    // Empty and blank lines are diverted lines.
    assert_eq!(
        split(b"\n \r\n{}\n"),
        (b"{}\n".to_vec(), b"\n \r\n".to_vec(), 2)
    );
    // Only the deciding byte counts: a `{` later in a line changes nothing.
    assert_eq!(
        split(b"log {\"id\":4}\n"),
        (Vec::new(), b"log {\"id\":4}\n".to_vec(), 1)
    );
    // An unterminated last line keeps its way.
    assert_eq!(
        split(b"{\"id\":5}\nbye"),
        (b"{\"id\":5}\n".to_vec(), b"bye".to_vec(), 1)
    );
}

/// Segments are subslices of the chunk (no copy): a forwarded chunk that
/// is all protocol comes back as the very same slice.
#[test]
fn forwarding_returns_the_input_itself() {
    let chunk: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1}\n{\"jsonrpc\":\"2.0\",\"id\":2}\n";
    let mut guard = StdoutLineGuard::new();
    let segments: Vec<Segment<'_>> = guard.split(chunk).collect();
    assert_eq!(segments.len(), 1);
    let Segment::Forward(bytes) = segments[0] else {
        panic!("{segments:?}")
    };
    assert_eq!(bytes.as_ptr(), chunk.as_ptr());
    assert_eq!(bytes.len(), chunk.len());
}

/// A 64 MiB JSON line passes intact, chunk by chunk, each chunk forwarded
/// whole and as itself; the guard holds nothing of it.
#[test]
fn a_64_mib_json_line_passes_without_being_held() {
    const LINE: usize = 64 << 20;
    let mut line = vec![b'7'; LINE];
    line[..9].copy_from_slice(b"{\"data\":\"");
    line[LINE - 3..].copy_from_slice(b"\"}\n");
    let mut guard = StdoutLineGuard::new();
    let mut forwarded = 0usize;
    for chunk in line.chunks(65_536) {
        let segments: Vec<Segment<'_>> = guard.split(chunk).collect();
        assert_eq!(segments.len(), 1);
        let Segment::Forward(bytes) = segments[0] else {
            panic!("diverted part of the line")
        };
        assert_eq!((bytes.as_ptr(), bytes.len()), (chunk.as_ptr(), chunk.len()));
        forwarded += bytes.len();
    }
    assert_eq!(forwarded, LINE);
    assert_eq!((guard.lines_forwarded(), guard.lines_diverted()), (1, 0));
    // Its state is a few words, whatever the line's length.
    assert!(std::mem::size_of::<StdoutLineGuard>() <= 24);
    // The next line is decided afresh.
    let after: Vec<Segment<'_>> = guard.split(b"done\n").collect();
    assert!(matches!(after[..], [Segment::Divert(d)] if d.lines == 1));
}

fn line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"{\"jsonrpc\":\"2.0\",\"id\":1}\n".to_vec()),
        Just(b"{\"id\":2}\r\n".to_vec()),
        Just(b"  {\"indented\":true}\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b" \t\r\n".to_vec()),
        Just(b"log: {not protocol}\n".to_vec()),
        Just(b"[1,2,3]\n".to_vec()),
        Just("caf\u{e9} \u{2603}\n".as_bytes().to_vec()),
        proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// For every chunking of the same input: the same forwarded bytes, the
    /// same diverted bytes and lines, and the segments in order are the
    /// input.
    #[test]
    fn every_chunking_splits_the_same(
        lines in proptest::collection::vec(line(), 0..30),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let input: Vec<u8> = lines.concat();
        let (f1, d1, l1, all1) = split_all(&input, &[]);
        let (f2, d2, l2, all2) = split_all(&input, &cuts);
        prop_assert_eq!(&f1, &f2);
        prop_assert_eq!(&d1, &d2);
        prop_assert_eq!(l1, l2);
        prop_assert_eq!(&all1, &input);
        prop_assert_eq!(&all2, &input);
        // Byte by byte, too: the finest chunking.
        let every: Vec<usize> = (0..input.len()).collect();
        let (f3, d3, l3, _) = split_all(&input, &every);
        prop_assert_eq!((&f1, &d1, l1), (&f3, &d3, l3));
    }
}
