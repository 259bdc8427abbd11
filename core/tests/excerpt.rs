//! Settings validation and the excerpt clamp: a validated excerpt never
//! cuts its marker, and a head+tail excerpt uses its whole cap.
#![allow(clippy::unwrap_used)]

use spillguard_core::{
    CallSettings, CaptureSettings, Config, Retain, RetentionPool, Rule, StreamCapture, StreamName,
    Window,
};

fn head_and_tail(budget: usize, head_bytes: usize) -> StreamCapture {
    let settings = CaptureSettings {
        retain: Retain::HeadAndTail,
        head_bytes,
        ..CaptureSettings::tail(StreamName::Stderr, budget)
    };
    StreamCapture::new(settings, &RetentionPool::unlimited())
}

/// Words of `len` bytes (the last one a space), `count` of them: text whose
/// cut edges hide at most one short word (`[cut]`), so an excerpt's length
/// shows how much of its cap it uses.
fn words(letter: u8, count: usize) -> Vec<u8> {
    let mut text = Vec::with_capacity(count * 4);
    for _ in 0..count {
        text.extend_from_slice(&[letter, letter, letter, b' ']);
    }
    text
}

/// The counts `(first, last)` a head+tail marker states.
fn kept(excerpt: &str) -> (u64, u64) {
    let marker = excerpt
        .lines()
        .find(|l| l.starts_with("[stderr truncated: kept first "))
        .unwrap();
    let counts: Vec<u64> = marker
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    (counts[0], counts[1])
}

/// The defect: a 4096-byte cap with a 16384-byte head (and so no tail)
/// gave an excerpt of a quarter of its room (1081 bytes). Now the head
/// takes the room the empty tail leaves: all of the 4000 bytes of room but
/// the width of a hidden cut word.
#[test]
fn a_head_and_tail_excerpt_with_a_large_head_fills_its_cap() {
    let mut c = head_and_tail(16_384, 16_384);
    let _ = c.feed(&words(b'x', 5_000));
    let excerpt = c.window().render_clamped(4096);
    assert!(excerpt.len() <= 4096, "{}", excerpt.len());
    assert!(excerpt.len() >= 4080, "{}", excerpt.len());
    let (first, last) = kept(&excerpt);
    assert_eq!(last, 0);
    assert!((3990..=4000).contains(&first), "{first}");
}

/// A short tail leaves its unused share to the head; a long tail keeps
/// three quarters of the room.
#[test]
fn the_head_takes_what_a_short_tail_leaves() {
    let mut c = head_and_tail(16_384, 16_000);
    let _ = c.feed(&words(b'h', 4_000));
    let _ = c.feed(&words(b't', 1_000));
    let excerpt = c.window().render_clamped(4096);
    let (first, last) = kept(&excerpt);
    assert_eq!(last, 384);
    assert!((3600..=3616).contains(&first), "{first}");
    assert!(excerpt.len() >= 4080, "{}", excerpt.len());

    let mut c = head_and_tail(16_384, 4_096);
    let _ = c.feed(&words(b'h', 1_024));
    let _ = c.feed(&words(b't', 5_000));
    let excerpt = c.window().render_clamped(4096);
    let (first, last) = kept(&excerpt);
    assert!((990..=1000).contains(&first), "{first}");
    assert!((2990..=3010).contains(&last), "{last}");
    assert!(excerpt.len() >= 4080, "{}", excerpt.len());
}

/// Tail and head excerpts lose at most the digits the reserve kept for the
/// widest counts, and a hidden cut word.
#[test]
fn tail_and_head_excerpts_fill_their_cap_but_for_the_counts_width() {
    for retain in [Retain::Tail, Retain::Head] {
        let settings = CaptureSettings {
            retain,
            ..CaptureSettings::tail(StreamName::Stderr, 16_384)
        };
        let mut c = StreamCapture::new(settings, &RetentionPool::unlimited());
        let _ = c.feed(&words(b'x', 46_080));
        let excerpt = c.window().render_clamped(4096);
        assert!(excerpt.len() <= 4096, "{retain}");
        assert!(excerpt.len() >= 4085, "{retain}: {}", excerpt.len());
    }
}

/// The defect: an `excerpt_bytes` of 1 cut the marker to "[". Settings
/// now refuse any excerpt below the longest marker of their mode, and at
/// that minimum the marker is whole even for a stream of `u64::MAX` bytes.
#[test]
fn a_validated_excerpt_never_cuts_its_marker() {
    let config = Config::default();
    for (retain, min) in [
        (Retain::Tail, 124),
        (Retain::Head, 125),
        (Retain::HeadAndTail, 199),
    ] {
        let mut settings = CallSettings::action(&config);
        settings.stderr.retain = retain;
        settings.excerpt_bytes = 1;
        let err = settings.validate().unwrap_err();
        assert_eq!(err.field, "excerpt_bytes");
        assert_eq!(err.rule, Rule::BelowMinimum { value: 1, min });
        settings.excerpt_bytes = min as usize - 1;
        assert_eq!(settings.validate().unwrap_err().field, "excerpt_bytes");
        settings.excerpt_bytes = min as usize;
        assert_eq!(settings.validate(), Ok(()));

        let (a, z) = ([b'a'; 200], [b'z'; 200]);
        let redactor = spillguard_core::Redactor::builtin();
        let window = Window {
            redactor: &redactor,
            stream: StreamName::Stderr,
            retain,
            seen: u64::MAX,
            head: if retain == Retain::Tail { b"" } else { &a },
            tail: [if retain == Retain::Head { b"" } else { &z }, b""],
            held_back: true,
            margins: spillguard_core::Margins::NONE,
        };
        let excerpt = window.render_clamped(settings.excerpt_bytes);
        assert!(excerpt.len() <= min as usize);
        let marker = excerpt
            .lines()
            .find(|l| l.starts_with("[stderr truncated"))
            .unwrap_or_default();
        // Whole: from its opening to its closing words, with the full count.
        assert!(marker.starts_with("[stderr truncated: kept "), "{marker}");
        assert!(
            marker.contains(" of 18446744073709551615 bytes"),
            "{marker}"
        );
        let end = if retain == Retain::HeadAndTail {
            " omitted between them; the pool shared by all calls held it back]"
        } else {
            " bytes; the pool shared by all calls held it back]"
        };
        assert!(marker.ends_with(end), "{retain}: {marker}");
    }
}

#[test]
fn settings_errors_name_their_field() {
    let config = Config::default();
    let base = CallSettings::action(&config);
    type Case = (fn(&mut CallSettings), &'static str, Rule);
    let cases: [Case; 5] = [
        (|s| s.stderr.budget = 0, "stderr.budget", Rule::Zero),
        (|s| s.stdout.budget = 0, "stdout.budget", Rule::Zero),
        (|s| s.excerpt_bytes = 0, "excerpt_bytes", Rule::Zero),
        (
            |s| s.stderr.kill_after_bytes = Some(0),
            "stderr.kill_after_bytes",
            Rule::Zero,
        ),
        (
            |s| s.excerpt_bytes = 20_000,
            "excerpt_bytes",
            Rule::Exceeds {
                value: 20_000,
                other: "stderr.budget",
                limit: 16_384,
            },
        ),
    ];
    for (change, field, rule) in cases {
        let mut s = base.clone();
        change(&mut s);
        let err = s.validate().unwrap_err();
        assert_eq!((err.field, err.rule), (field, rule));
    }
    assert_eq!(
        {
            let mut s = base.clone();
            s.excerpt_bytes = 20_000;
            s.validate().unwrap_err().to_string()
        },
        "call settings: excerpt_bytes: 20000 is larger than stderr.budget (16384)"
    );
    // Settings derived from a valid configuration are valid, for both kinds.
    assert_eq!(base.validate(), Ok(()));
    assert_eq!(CallSettings::discovery(&config).validate(), Ok(()));
}

/// The configuration refuses an excerpt below the longest marker of its
/// mode, too: 128 bytes suffice for `tail` but not for `head_and_tail`.
#[test]
fn the_config_minimum_excerpt_holds_the_longest_marker_of_its_mode() {
    let text = "[helper_output]\nstderr_agent_excerpt_bytes = 128\nretain = \"head_and_tail\"\n";
    let err = Config::from_toml_str(text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "helper_output.stderr_agent_excerpt_bytes: 128 is below the minimum of 199"
    );
    let tail = Config::from_toml_str("[helper_output]\nstderr_agent_excerpt_bytes = 128\n");
    assert_eq!(tail.unwrap().stderr_agent_excerpt_bytes, 128);
}
