//! Feeding is allocation-free in steady state (the feed path allocates
//! nothing once warm): once a capture's buffers reached their budget, no
//! chunk size makes it allocate.
//!
//! A counting global allocator wraps the system allocator. It counts only on
//! threads that asked for it (a `const`-initialised thread-local flag), so
//! the test harness running other tests on other threads cannot disturb the
//! exact figures asserted here.

// Implementing `GlobalAlloc` requires `unsafe impl`; the workspace denies
// unsafe code, and this test file is the one place that needs it. The
// implementation only forwards to `System` and bumps counters.
#![allow(unsafe_code)]
#![allow(clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use spillguard_core::{
    CUT_MARGIN, CaptureSettings, Retain, RetentionPool, StreamCapture, StreamName,
};

struct CountingAllocator;

/// Allocations (including reallocations) made by counting threads, all
/// threads together.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread's allocations are being counted.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Allocations and bytes requested by this thread while counting.
    static THREAD_ALLOCATIONS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

fn note(bytes: usize) {
    // `try_with`: never panic inside the allocator, even while this
    // thread's locals are being torn down.
    let counting = COUNTING.try_with(Cell::get).unwrap_or(false);
    if counting {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        let _ = THREAD_ALLOCATIONS.try_with(|c| {
            let (n, b) = c.get();
            c.set((n + 1, b + bytes as u64));
        });
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments,
// unchanged; counting touches only atomics and `const` thread-locals, which
// never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Runs `f` and returns (allocations, bytes requested) it made on this
/// thread.
fn allocations_during(f: impl FnOnce()) -> (u64, u64) {
    THREAD_ALLOCATIONS.with(|c| c.set((0, 0)));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    THREAD_ALLOCATIONS.with(Cell::get)
}

fn settings(retain: Retain) -> CaptureSettings {
    CaptureSettings {
        retain,
        head_bytes: 4096,
        ..CaptureSettings::tail(StreamName::Stderr, 16_384)
    }
}

fn chunk(len: usize) -> Vec<u8> {
    b"helper-diagnostic: retrying connection\n"
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect()
}

/// Warms a capture up to its full buffers, then counts what 10,000 feeds of
/// `chunk` allocate.
fn steady_state_allocations(retain: Retain, chunk: &[u8]) -> u64 {
    let pool = RetentionPool::new(262_144);
    let mut capture = StreamCapture::new(settings(retain), &pool);
    for _ in 0..8 {
        let _ = capture.feed(&[b'w'; 16_384]);
    }
    assert_eq!(capture.bytes_retained(), 16_384);
    let (allocations, _) = allocations_during(|| {
        for _ in 0..10_000 {
            let _ = black_box(capture.feed(black_box(chunk)));
        }
    });
    assert_eq!(
        capture.bytes_seen(),
        8 * 16_384 + 10_000 * chunk.len() as u64
    );
    assert_eq!(capture.bytes_retained(), 16_384);
    allocations
}

#[test]
fn the_counter_sees_allocations_on_this_thread() {
    let (allocations, bytes) = allocations_during(|| {
        black_box(Vec::<u8>::with_capacity(1000));
    });
    assert_eq!((allocations, bytes), (1, 1000));
}

#[test]
fn feeding_a_full_tail_allocates_nothing() {
    assert_eq!(steady_state_allocations(Retain::Tail, &chunk(4096)), 0);
    assert_eq!(steady_state_allocations(Retain::Tail, &chunk(65_536)), 0);
}

#[test]
fn feeding_a_full_head_allocates_nothing() {
    assert_eq!(steady_state_allocations(Retain::Head, &chunk(4096)), 0);
    assert_eq!(steady_state_allocations(Retain::Head, &chunk(65_536)), 0);
}

#[test]
fn feeding_a_full_head_and_tail_allocates_nothing() {
    assert_eq!(
        steady_state_allocations(Retain::HeadAndTail, &chunk(4096)),
        0
    );
    assert_eq!(
        steady_state_allocations(Retain::HeadAndTail, &chunk(65_536)),
        0
    );
}

#[test]
fn feeding_a_one_mebibyte_chunk_allocates_only_the_budget_and_the_margin() {
    let big = chunk(1 << 20);
    let pool = RetentionPool::unlimited();
    let mut capture = StreamCapture::new(CaptureSettings::tail(StreamName::Stderr, 16_384), &pool);
    let (allocations, bytes) = allocations_during(|| {
        let _ = capture.feed(&big);
    });
    // One buffer of exactly the budget, however large the chunk, and one
    // of the margin kept before the window's first byte.
    assert_eq!((allocations, bytes), (2, 16_384 + CUT_MARGIN as u64));
    assert_eq!(capture.bytes_retained(), 16_384);
    assert_eq!(capture.bytes_reserved(), 16_384 + CUT_MARGIN as u64);
}

/// The MCP stdout line guard allocates nothing, per chunk or per line,
/// whatever the mix of protocol and other lines, once its buffer has
/// grown to the longest line.
#[test]
fn the_stdout_line_guard_allocates_nothing() {
    use spillguard_core::{Segment, StdoutLineGuard};

    let mut input = Vec::new();
    for i in 0..1_000 {
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        input.extend_from_slice(i.to_string().as_bytes());
        input.extend_from_slice(b",\"result\":{\"a\":[1,2,{}]}}\r\n  log line\n\n\t{\"id\":0}\n");
    }
    let mut guard = StdoutLineGuard::new();
    let _ = guard.spare();
    let (mut forwarded, mut diverted) = (0usize, 0usize);
    let (allocations, _) = allocations_during(|| {
        for chunk in input.chunks(7) {
            guard
                .feed(black_box(chunk), |segment| {
                    match segment {
                        Segment::Forward(line) => forwarded += line.bytes.len(),
                        Segment::Divert(d) => diverted += d.bytes.len(),
                        Segment::DivertHeld(held) => diverted += held.bytes.len(),
                    }
                    Ok::<(), ()>(())
                })
                .unwrap();
        }
    });
    assert_eq!(allocations, 0);
    assert_eq!(forwarded + diverted, input.len());
    assert_eq!(guard.lines_forwarded(), 1_000);
    assert_eq!(guard.lines_diverted(), 3_000);
}
