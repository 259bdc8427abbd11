//! Capture and rendering: a stream fed in chunks the input chooses keeps
//! the same window, counts and text as the same bytes fed at once, and
//! every rendering stays within its cap.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use spillguard_core::{CaptureSettings, Retain, RetentionPool, StreamCapture, StreamName, Window};

fuzz_target!(|data: &[u8]| {
    let Some((settings, input)) = settings(data) else {
        return;
    };
    let (plan, stream) = common::split_plan(input);

    let mut whole = StreamCapture::new(settings.clone(), &RetentionPool::unlimited());
    let _ = whole.feed(stream);
    let mut chunked = StreamCapture::new(settings.clone(), &RetentionPool::unlimited());
    let mut crossed = 0;
    for chunk in common::chunks(stream, plan) {
        if chunked.feed(chunk) == spillguard_core::Fed::CeilingCrossed {
            crossed += 1;
        }
    }
    let seen = stream.len() as u64;
    assert_eq!(chunked.bytes_seen(), seen);
    assert_eq!(whole.bytes_retained(), chunked.bytes_retained());
    assert!(chunked.bytes_retained() <= settings.budget as u64);
    assert_eq!(whole.truncated(), chunked.truncated());
    let over_ceiling = settings.kill_after_bytes.is_some_and(|limit| seen > limit);
    assert_eq!(crossed, u32::from(over_ceiling));
    if !chunked.truncated() {
        assert_eq!(chunked.window().retained(), seen);
    }

    let views = rendered_views(&chunked.window());
    assert_eq!(views, rendered_views(&whole.window()));
    let retained = chunked.finish();
    assert_eq!(rendered_views(&retained.window()), views);

    // A pool smaller than the budget: the capture keeps less and says so,
    // and never holds more than the pool has.
    let capacity = (settings.budget / 2) as u64;
    let pool = RetentionPool::new(capacity);
    let mut limited = StreamCapture::new(settings, &pool);
    for chunk in common::chunks(stream, plan) {
        let _ = limited.feed(chunk);
        assert!(pool.in_use() <= capacity);
    }
    assert!(limited.bytes_retained() <= capacity);
    let _ = rendered_views(&limited.window());
});

/// Every text made from a window: the full rendering, the marker, and
/// clamps to a few caps (the agent excerpt and destinations). This is the
/// edge where text is made, so when redaction of rendered text exists it
/// belongs here too: each view below then goes through it.
fn rendered_views(window: &Window<'_>) -> Vec<String> {
    let mut views = vec![window.render()];
    if let Some(marker) = window.marker() {
        views.push(marker);
    }
    for cap in [0, 1, 7, 64, 128, 1000, 4096] {
        let clamped = window.render_clamped(cap);
        assert!(
            clamped.len() <= cap,
            "{} > {cap}: {clamped:?}",
            clamped.len()
        );
        views.push(clamped);
    }
    views.push(format!("{:?}", window.fingerprint()));
    // Redaction is part of every view above; its counts and the raw text
    // must not depend on the chunking either.
    views.push(format!("{:?}", window.redactions()));
    views.push(window.render_unredacted());
    views
}

/// Settings from the input's first four bytes: mode and stream, budget,
/// head size, kill ceiling.
fn settings(data: &[u8]) -> Option<(CaptureSettings, &[u8])> {
    let (&[mode, budget, head, ceiling], rest) = data.split_first_chunk::<4>()?;
    let retain = match mode % 3 {
        0 => Retain::Tail,
        1 => Retain::Head,
        _ => Retain::HeadAndTail,
    };
    let stream = if mode & 4 == 0 {
        StreamName::Stderr
    } else {
        StreamName::Stdout
    };
    let settings = CaptureSettings {
        stream,
        retain,
        budget: usize::from(budget) * 3,
        head_bytes: usize::from(head),
        kill_after_bytes: (ceiling != 0).then(|| u64::from(ceiling) * 5),
        debug: mode & 8 != 0,
        redactor: spillguard_core::Redactor::builtin(),
    };
    Some((settings, rest))
}
