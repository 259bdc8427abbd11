//! Feed throughput of a warm capture (speed goals live in benchmarks,
//! not in timed tests). Goal: at least 20 GB/s for 64 KiB chunks into a
//! 16 KiB tail; a chunk larger than the budget costs one copy of the budget.
//!
//! Each iteration feeds 256 chunks taken in turn from a prebuilt 256 KiB buffer
//! (like an adapter's reused read buffer, it stays in cache) into a capture
//! whose buffers are already at their budget. Throughput counts every byte
//! fed, retained or not.
//!
//! Run: `cargo bench -p spillguard-core --bench capture`.

use divan::counter::BytesCount;
use divan::{Bencher, black_box};
use spillguard_core::{CaptureSettings, Retain, RetentionPool, StreamCapture, StreamName};

fn main() {
    divan::main();
}

const FEEDS_PER_ITERATION: usize = 256;
const BUDGET: usize = 16 * 1024;
const SOURCE: usize = 256 * 1024;

fn source() -> Vec<u8> {
    b"helper-diagnostic: connection retry failed, remote side closed the channel\n"
        .iter()
        .copied()
        .cycle()
        .take(SOURCE)
        .collect()
}

fn warm_capture(retain: Retain, pool: &RetentionPool) -> StreamCapture {
    let settings = CaptureSettings {
        retain,
        head_bytes: BUDGET / 4,
        ..CaptureSettings::tail(StreamName::Stderr, BUDGET)
    };
    let mut capture = StreamCapture::new(settings, pool);
    for _ in 0..4 {
        let _ = capture.feed(&[b'w'; BUDGET]);
    }
    assert_eq!(capture.bytes_retained(), BUDGET as u64);
    capture
}

fn feed(bencher: Bencher<'_, '_>, retain: Retain, chunk: usize) {
    let source = source();
    let chunks: Vec<&[u8]> = source.chunks(chunk).collect();
    let pool = RetentionPool::new(262_144);
    let mut capture = warm_capture(retain, &pool);
    bencher
        .counter(BytesCount::new(FEEDS_PER_ITERATION * chunk))
        .bench_local(|| {
            for i in 0..FEEDS_PER_ITERATION {
                let _ = black_box(capture.feed(black_box(chunks[i % chunks.len()])));
            }
        });
    assert_eq!(capture.bytes_retained(), BUDGET as u64);
}

/// A 16 KiB tail fed chunks of 4 KiB and 64 KiB.
#[divan::bench(args = [4096, 65_536])]
fn tail_16k(bencher: Bencher<'_, '_>, chunk: usize) {
    feed(bencher, Retain::Tail, chunk);
}

/// A 16 KiB head: once full, a feed only counts.
#[divan::bench(args = [65_536])]
fn head_16k(bencher: Bencher<'_, '_>, chunk: usize) {
    feed(bencher, Retain::Head, chunk);
}

/// A 4 KiB prefix and a 12 KiB tail.
#[divan::bench(args = [65_536])]
fn head_and_tail_16k(bencher: Bencher<'_, '_>, chunk: usize) {
    feed(bencher, Retain::HeadAndTail, chunk);
}
