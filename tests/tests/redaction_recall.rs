//! Redaction recall on the generated corpus (`spillguard_tests::recall`):
//! every class of secret, in every syntax and carrier, must be recalled
//! (no 8-byte piece of the secret left in the rendering, at least one
//! redaction counted) for at least 99% of its items. Prints the recall per
//! class and, per class, up to 5 items that were not recalled.
#![allow(clippy::unwrap_used)]

use spillguard_tests::recall::{self, Class, Feed, Item, leak, leak_len};

/// The least recall per class, in percent.
const GOAL: f64 = 99.0;

#[test]
fn the_corpus_holds_every_class_and_carrier_and_each_secret_shows_in_its_text() {
    let items = recall::corpus(recall::SEED);
    assert!(items.len() >= 2000, "{} items", items.len());
    for class in Class::ALL {
        let of_class: Vec<&Item> = items.iter().filter(|i| i.class == class).collect();
        assert!(
            of_class.len() >= 100,
            "{}: {}",
            class.name(),
            of_class.len()
        );
        for carrier in recall::CARRIERS {
            assert!(
                of_class.iter().any(|i| i.context == carrier),
                "{} has no {carrier} item",
                class.name()
            );
        }
    }
    // The same seed draws the same corpus; another seed another one.
    assert_eq!(items, recall::corpus(recall::SEED));
    assert_ne!(items, recall::corpus(recall::SEED + 1));
    for item in &items {
        // Unredacted, every item leaks: the measure can fail.
        assert_eq!(
            leak(item.window_bytes(), &item.secret).map(str::len),
            Some(leak_len(item.secret.len())),
            "{item:?}"
        );
        assert!(item.text.ends_with('\n'), "{item:?}");
        let at = item.text.find(&item.secret).unwrap();
        let end = at + item.secret.len();
        match item.feed {
            Feed::Whole => {}
            Feed::Split(split) => assert!(at < split && split < end, "{item:?}"),
            Feed::Tail(budget) => {
                let edge = item.text.len() - budget;
                assert!(at < edge, "{item:?}");
                assert!(end - edge > leak_len(item.secret.len()), "{item:?}");
            }
        }
    }
}

#[test]
fn the_leak_measure_takes_substrings_of_eight_bytes_or_half_the_secret() {
    assert_eq!(leak_len(40), 8);
    assert_eq!(leak_len(16), 8);
    assert_eq!(leak_len(15), 8);
    assert_eq!(leak_len(14), 7);
    assert_eq!(leak_len(3), 2);
    assert_eq!(leak("x Q7x9K2m4 y", "ABCDQ7x9K2m4EFGH"), Some("Q7x9K2m4"));
    assert_eq!(leak("x Q7x9K2m y", "ABCDQ7x9K2m4EFGH"), None);
    // A 12-byte secret leaks by 6 bytes.
    assert_eq!(leak("x 7x9K2m y", "ABCDQ7x9K2m4"), Some("7x9K2m"));
    assert_eq!(leak("x 7x9K2 y", "ABCDQ7x9K2m4"), None);
    assert_eq!(leak("abc", "xyz"), None);
}

#[test]
fn recall_is_at_least_99_percent_per_class() {
    let items = recall::corpus(recall::SEED);
    let recalled: Vec<bool> = items.iter().map(|i| i.recalled_by(&i.render())).collect();
    let tally = recall::tally(&items, &recalled);
    println!("class                 items  recalled  recall");
    for (class, t) in &tally {
        println!(
            "{:<20} {:>6} {:>9} {:>6.1}%",
            class.name(),
            t.items,
            t.recalled,
            t.percent()
        );
    }
    for class in Class::ALL {
        let missed: Vec<&Item> = items
            .iter()
            .zip(&recalled)
            .filter(|(i, hit)| i.class == class && !**hit)
            .map(|(i, _)| i)
            .collect();
        if missed.is_empty() {
            continue;
        }
        println!("\n{}: {} not recalled, e.g.:", class.name(), missed.len());
        // Spread the examples over forms and contexts (all of them with
        // RECALL_MISSES=all).
        let all = std::env::var("RECALL_MISSES").as_deref() == Ok("all");
        let (step, most) = match all {
            true => (1, usize::MAX),
            false => ((missed.len() / 5).max(1), 5),
        };
        for item in missed.iter().step_by(step).take(most) {
            let shown = item.render();
            println!(
                "  [{} / {}] {:?}\n    -> {:?} ({} redactions)",
                item.form,
                item.context,
                item.window_bytes(),
                shown.text,
                shown.redactions
            );
        }
    }
    let failing: Vec<String> = tally
        .iter()
        .filter(|(_, t)| t.percent() < GOAL)
        .map(|(c, t)| format!("{} {:.1}%", c.name(), t.percent()))
        .collect();
    assert!(failing.is_empty(), "recall below {GOAL}%: {failing:?}");
}

/// Redacting a rendering again changes nothing, for every item of the
/// corpus (every class, syntax and carrier): a placeholder the redactor
/// wrote is never taken for a secret, and nothing it left is found the
/// second time. Prints how many renderings held a placeholder.
#[test]
fn redacting_a_rendering_again_changes_nothing() {
    let redactor = spillguard_core::Redactor::builtin();
    let items = recall::corpus(recall::SEED);
    let mut changed = Vec::new();
    let mut with_placeholder = 0;
    for item in &items {
        let rendering = item.render();
        with_placeholder += usize::from(rendering.text.contains("[redacted: "));
        let again = redactor.redact(&rendering.text);
        if again.text != rendering.text || again.counts.total() != 0 {
            changed.push((item.form, item.context, rendering.text, again.text));
        }
    }
    println!(
        "{} renderings, {with_placeholder} with a placeholder, {} changed when redacted again",
        items.len(),
        changed.len()
    );
    assert!(
        with_placeholder * 10 > items.len() * 9,
        "{with_placeholder}"
    );
    assert!(
        changed.is_empty(),
        "{:#?}",
        &changed[..changed.len().min(5)]
    );
}
