//! `bench-redact`: what redaction costs a view, for `cargo xtask bench`.
//!
//! A capture whose window holds 16 KiB of ordinary log lines (with 0, 1 or
//! 50 secrets of several shapes in them, JSON-escaped and coloured ones
//! among them) is rendered again and again, whole (the window) and
//! clamped to the 4 KiB agent excerpt; the median of 15 runs of 200
//! renders each is printed per view as one line of JSON, in µs per render
//! to a tenth, beside the secrets found in the window (keys in sorted order):
//! `{"excerpt_0":…,"excerpt_1":…,…,"found_50":…,"window_0":…,…}`.

use std::time::Instant;

use spillguard_std::proto::{CaptureSettings, RetentionPool, StreamCapture, StreamName};

/// The window's size.
const WINDOW: usize = 16 * 1024;

/// Renders per run, and runs.
const RENDERS: u32 = 200;
const RUNS: usize = 15;

/// 16 KiB of log lines with `secrets` secrets spread among them.
fn window_text(secrets: usize) -> Vec<u8> {
    let ordinary = [
        "2026-12-01T10:00:00.123Z INFO  request id=4f1c2a9e path=/api/v1/items status=200 took=12ms\n",
        "{\"level\":\"warn\",\"msg\":\"retrying\\tattempt 3 of 5\",\"host\":\"web-3\",\"backoff_ms\":400}\n",
        "\u{1b}[1;33mwarning\u{1b}[0m: unused variable: `token_count` at src/main.rs:42:9\n",
        "   Compiling serde v1.0.228\n",
    ];
    let shapes = [
        "Authorization: Bearer Q7x9K2m4P8z3W6v1Q7x9K2m4",
        "{\"msg\":\"push failed\\nghp_Q7x9K2m4P8z3W6v1Q7x9K2m4P8z3W6v1Q7x9\"}",
        "password=Q7x9hunter2P8z3",
        "\u{1b}[31mAKIAIOSFODNN7EXAMPLE\u{1b}[0m",
        "curl -u admin:Q7x9hunter2 https://api.example",
    ];
    let mut text = Vec::with_capacity(WINDOW + 256);
    let mut line = 0;
    let every = if secrets == 0 {
        usize::MAX
    } else {
        180 / secrets.max(1)
    };
    let mut placed = 0;
    while text.len() < WINDOW {
        if placed < secrets && line % every.max(1) == 0 {
            text.extend_from_slice(shapes[placed % shapes.len()].as_bytes());
            text.push(b'\n');
            placed += 1;
        } else {
            text.extend_from_slice(ordinary[line % ordinary.len()].as_bytes());
        }
        line += 1;
    }
    text.truncate(WINDOW);
    text
}

/// Median µs per call of `render`.
fn median_us(mut render: impl FnMut() -> usize) -> f64 {
    let mut runs = Vec::with_capacity(RUNS);
    let mut sink = 0;
    for _ in 0..RUNS {
        let started = Instant::now();
        for _ in 0..RENDERS {
            sink += render();
        }
        runs.push(started.elapsed().as_secs_f64() * 1e6 / f64::from(RENDERS));
    }
    std::hint::black_box(sink);
    runs.sort_by(f64::total_cmp);
    runs[RUNS / 2]
}

fn main() {
    let pool = RetentionPool::unlimited();
    let mut fields = serde_json::Map::new();
    for secrets in [0, 1, 50] {
        let text = window_text(secrets);
        // Fed with more before it, so that the window is cut like a real
        // flood's tail.
        let mut capture =
            StreamCapture::new(CaptureSettings::tail(StreamName::Stderr, WINDOW), &pool);
        let _ = capture.feed(&window_text(0));
        let _ = capture.feed(&text);
        let (_, counts) = capture.window().render_with_redactions();
        let found = counts.total();
        let window = median_us(|| capture.window().render().len());
        let excerpt = median_us(|| capture.window().render_clamped(4096).len());
        let tenths = |us: f64| (us * 10.0).round() / 10.0;
        fields.insert(format!("window_{secrets}"), tenths(window).into());
        fields.insert(format!("excerpt_{secrets}"), tenths(excerpt).into());
        fields.insert(format!("found_{secrets}"), found.into());
    }
    println!("{}", serde_json::Value::Object(fields));
}
