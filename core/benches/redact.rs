//! Rendering a full 16 KiB window with redaction (speed goals live in
//! benchmarks, not in timed tests). Goal: at most 100 µs per window, with
//! or without secrets.
//!
//! Each benchmark renders one retained 16 KiB tail: ordinary diagnostics
//! (no secret), the same with a secret on every fourth line (about 40), and
//! the 4 KiB agent excerpt of each. `unredacted` is the same rendering
//! without redaction, for the ratio. Divan prints the time per window.
//!
//! Run: `cargo bench -p spillguard-core --bench redact`.

use divan::{Bencher, black_box};
use spillguard_core::{CaptureSettings, RetentionPool, StreamCapture, StreamName};

fn main() {
    divan::main();
}

const BUDGET: usize = 16 * 1024;

fn ordinary_line(i: usize) -> String {
    format!(
        "2026-12-01T09:00:{:02}Z helper[4242]: retry {i} of GET https://api.example.com/v1/items/{i} \
         failed: connection reset by peer (os error 104)\n",
        i % 60
    )
}

fn secret_line(i: usize) -> String {
    match i % 4 {
        0 => format!(
            "> Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ{i:04}In0.c2lnbmF0dXJl\n"
        ),
        1 => format!("using GITHUB_TOKEN=ghp_{}\n", token(i, 36)),
        2 => format!("connect postgres://app:pw{i}@db:5432/main\n"),
        _ => format!("{{\"user\": \"deploy\", \"password\": \"hunter{i}\"}}\n"),
    }
}

/// `len` characters of a token that looks random, different for each `i`
/// (a run of zeros is no secret to the rules).
fn token(i: usize, len: usize) -> String {
    const ALPHABET: &[u8] = b"a1B2c3D4e5F6g7H8i9J0kLmNpQrStUvWxYz";
    (0..len)
        .map(|k| char::from(ALPHABET[(i * 7 + k * 13 + k * k) % ALPHABET.len()]))
        .collect()
}

/// A capture holding a full 16 KiB tail of a longer stream.
fn window(with_secrets: bool) -> StreamCapture {
    let mut capture = StreamCapture::new(
        CaptureSettings::tail(StreamName::Stderr, BUDGET),
        &RetentionPool::unlimited(),
    );
    let mut i = 0;
    while capture.bytes_seen() < 3 * BUDGET as u64 {
        // Every fourth line a secret, of each kind in turn.
        let line = if with_secrets && i % 4 == 1 {
            secret_line(i / 4)
        } else {
            ordinary_line(i)
        };
        let _ = capture.feed(line.as_bytes());
        i += 1;
    }
    assert_eq!(capture.bytes_retained(), BUDGET as u64);
    let found = capture.window().redactions().total();
    if with_secrets {
        assert!(found >= 30, "{found}");
    } else {
        assert_eq!(found, 0);
    }
    capture
}

/// `render()` of a full window: redacted.
#[divan::bench(args = [false, true])]
fn render_16k(bencher: Bencher<'_, '_>, with_secrets: bool) {
    let capture = window(with_secrets);
    bencher.bench_local(|| black_box(capture.window().render()));
}

/// The 4 KiB agent excerpt of a full window: redacted, then clamped.
#[divan::bench(args = [false, true])]
fn excerpt_4k_of_16k(bencher: Bencher<'_, '_>, with_secrets: bool) {
    let capture = window(with_secrets);
    bencher.bench_local(|| black_box(capture.window().render_clamped(4096)));
}

/// The same window rendered without redaction, for the ratio.
#[divan::bench(args = [false, true])]
fn unredacted_16k(bencher: Bencher<'_, '_>, with_secrets: bool) {
    let capture = window(with_secrets);
    bencher.bench_local(|| black_box(capture.window().render_unredacted()));
}
