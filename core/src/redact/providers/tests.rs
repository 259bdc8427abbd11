//! Every provider format, generated from the table: redacted whole in the
//! contexts real output puts it in, refused when its checksum, its length
//! or its boundaries are wrong; and ordinary text that begins like a
//! prefix is left alone.

use super::table::FORMATS;
use super::*;
use crate::Redactor;

const SEEDS: u64 = 50;

/// The provider spans the scanner finds in `text`, as (text, rule).
fn found(text: &str) -> Vec<(String, &'static str)> {
    let mut spans = Vec::new();
    scan(text.as_bytes(), &mut spans);
    spans.sort_by_key(|s| (s.start, s.end));
    spans
        .iter()
        .map(|s| {
            let Label::Named(name) = s.label else {
                panic!("a provider span is named");
            };
            (text[s.start..s.end].to_owned(), name)
        })
        .collect()
}

/// Whether the scanner finds `name` anywhere in `text`.
fn finds(text: &str, name: &str) -> bool {
    found(text).iter().any(|(_, n)| *n == name)
}

fn placeholder(name: &str) -> String {
    format!("[redacted: {name}]")
}

#[test]
fn the_table_covers_over_a_hundred_providers() {
    let mut providers: Vec<&str> = FORMATS.iter().map(|f| f.provider).collect();
    providers.sort_unstable();
    providers.dedup();
    let names: Vec<&str> = rule_names().collect();
    assert!(FORMATS.len() >= 120, "{} formats", FORMATS.len());
    assert!(providers.len() >= 100, "{} providers", providers.len());
    assert!(names.len() >= 100, "{} names", names.len());
    assert_eq!(FORMATS.len(), 226);
    assert_eq!(providers.len(), 120);
    assert_eq!(names.len(), 140);
}

#[test]
fn rows_are_well_formed() {
    for format in FORMATS {
        let what = format.anchor;
        let name = format.name;
        assert!(!format.anchor.is_empty(), "{name}");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{name} is kebab-case"
        );
        assert!(
            matches!(format.lead, None | Some(Part::Run(..))),
            "{what}: a lead is a run"
        );
        for (k, part) in format.parts.iter().enumerate() {
            if let Part::Run(class, min, max) = *part {
                assert!(min <= max && max > 0, "{what}");
                // A variable run ends where its separator begins: the
                // separator's first byte cannot be one of the run's.
                match format.parts.get(k + 1) {
                    Some(Part::Lit(lit)) => assert!(
                        min == max || !class.has(lit.as_bytes()[0]),
                        "{what}: a run of varying length before {lit:?}"
                    ),
                    Some(Part::Run(..)) => panic!("{what}: two runs in a row"),
                    None => {}
                }
            }
        }
        if format.check != Check::None {
            assert!(matches!(format.parts, [Part::Run(..)]), "{what}");
        }
    }
}

#[test]
fn every_sample_is_redacted_whole_in_every_context() {
    let redactor = Redactor::builtin();
    for seed in 0..SEEDS {
        for (name, token) in provider_samples(seed) {
            let r = placeholder(name);
            for (input, expected) in [
                (token.clone(), r.clone()),
                (
                    format!("{{\"k\":\"{token}\"}}"),
                    format!("{{\"k\":\"{r}\"}}"),
                ),
                (
                    format!("{{\"log\":\"failed\\n{token}\\n\"}}"),
                    format!("{{\"log\":\"failed\\n{r}\\n\"}}"),
                ),
                (
                    format!("\u{1b}[31m{token}\u{1b}[0m"),
                    format!("\u{1b}[31m{r}\u{1b}[0m"),
                ),
                (
                    format!("\\u001b[31m{token}\\u001b[0m"),
                    format!("\\u001b[31m{r}\\u001b[0m"),
                ),
                (format!("key {token}\nnext"), format!("key {r}\nnext")),
                (format!("used {token}"), format!("used {r}")),
            ] {
                let out = redactor.redact(&input);
                assert_eq!(out.text, expected, "seed {seed}, {name}: {input:?}");
                let counts: Vec<(&str, u64)> = out.counts.iter().collect();
                assert_eq!(counts, [(name, 1)], "seed {seed}: {input:?}");
            }
        }
    }
}

#[test]
fn the_scanner_alone_finds_each_sample_exactly() {
    for seed in 0..SEEDS {
        for (format, (name, token)) in FORMATS.iter().zip(provider_samples(seed)) {
            let hay = format!("see {token} now");
            let mut spans = Vec::new();
            scan(hay.as_bytes(), &mut spans);
            let own: Vec<(usize, usize)> = spans
                .iter()
                .filter(|s| s.label == Label::Named(name))
                .map(|s| (s.start, s.end))
                .collect();
            assert_eq!(own, [(4, 4 + token.len())], "{}: {token}", format.anchor);
        }
    }
}

/// The byte of `token` at `i` replaced by another of the same class.
fn changed_at(token: &str, i: usize, class: Class) -> String {
    let mut bytes = token.as_bytes().to_vec();
    let old = bytes[i];
    bytes[i] = alphabet(class)
        .into_iter()
        .find(|&b| b != old)
        .unwrap_or(old);
    String::from_utf8(bytes).unwrap()
}

#[test]
fn a_wrong_checksum_is_not_that_providers_token() {
    let mut checked = 0;
    for seed in 0..SEEDS {
        for (format, (name, token)) in FORMATS.iter().zip(provider_samples(seed)) {
            let [Part::Run(class, ..)] = format.parts else {
                continue;
            };
            if format.check == Check::None {
                continue;
            }
            checked += 1;
            assert!(finds(&token, name), "{token}");
            let body = format.anchor.len();
            // One character changed, in the random part and in the checksum.
            for i in [body, body + 7, token.len() - 1] {
                let wrong = changed_at(&token, i, *class);
                assert!(!finds(&wrong, name), "{wrong} passed as {name}");
            }
        }
    }
    assert_eq!(checked, 8 * SEEDS);
}

#[test]
fn a_longer_glued_or_truncated_token_is_not_that_providers_token() {
    for seed in 0..SEEDS {
        let mut random = Random(seed);
        for (format, (name, token)) in FORMATS.iter().zip(provider_samples(seed)) {
            let what = format!("{}: {token}", format.anchor);
            // The greatest length is a token; one body character more (a
            // run of the body's alphabet longer than the format allows) is
            // not.
            let longest = format.sample(&mut random, Pick::Most);
            assert!(finds(&longest, name), "{what}: longest {longest}");
            if let Some(Part::Run(class, ..)) = format.parts.last() {
                for &extra in &alphabet(*class)[..3] {
                    let too_long = format!("{longest}{}", char::from(extra));
                    assert!(!finds(&too_long, name), "{what}: too long {too_long}");
                }
            }
            // The least length is a token; one byte less is not.
            let shortest = format.sample(&mut random, Pick::Least);
            assert!(finds(&shortest, name), "{what}: shortest {shortest}");
            let truncated = &shortest[..shortest.len() - 1];
            assert!(!finds(truncated, name), "{what}: truncated {truncated}");
            // Glued to a word before it (unless the glue can lengthen a
            // leading run of varying length, as a digit before a Telegram
            // bot's id does) or after it.
            for glue in ["x", "Z", "0", "_", "-"] {
                let lengthens = matches!(
                    format.lead,
                    Some(Part::Run(class, min, max)) if min < max && class.has(glue.as_bytes()[0])
                );
                let glued = format!("{glue}{token}");
                assert!(lengthens || !finds(&glued, name), "{what}: glued {glued}");
                // A byte of the last run's alphabet makes it longer (see
                // above); any other word byte glues it.
                let in_run = matches!(
                    format.parts.last(),
                    Some(Part::Run(class, ..)) if class.has(glue.as_bytes()[0])
                );
                let glued = format!("{token}{glue}");
                assert!(in_run || !finds(&glued, name), "{what}: glued {glued}");
            }
        }
    }
}

#[test]
fn ordinary_text_that_begins_like_a_prefix_stays() {
    let redactor = Redactor::builtin();
    for text in [
        "stripe: sk_live_mode is off, sk_test_ keys rotate daily",
        "from huggingface_hub import hf_hub_download",
        "SELECT pat_id, pat_name FROM patients WHERE pattern = 'x'",
        "config: key-value store, key-1 key-2, monkey-patched",
        "grafana: glc_ and glsa_ tokens are created in the UI",
        "AKIA in prose: an AKIA key id has 20 characters; ASIA too",
        "the AKIAIOSFODNN7EXAMPLEX id is 21 characters long",
        "ghp_ tokens and gho_ tokens and npm_ tokens are documented",
        "pod web-api-7f9c8d6b5-x2x9z restarted; sk-learn 1.5; re_compile",
        "dapi is a word here and so is cio, SCW and SK, AC power",
        "version v1.0-beta, 1000.00 dollars, 00D00000 is an id",
        "commit 9f86d081884c7d65ab12cd34ef56ab78cd90ef12 key-value",
        "token-abcde is not a token; EAAA is a prefix of EAAAA",
        "AGE-SECRET-KEY-1 is the prefix of an age key; nsec1 too",
        "xoxb- is a bot token prefix; xapp-1- an app token's",
        "see secret_key_base and secret_access for the rails app",
        "the hash 1//0 and 2/3 and sl.name are short",
        "docker ps: dckr_pat_ is the token prefix",
        "-us1 is a region; 5d41402abc4b2a76b9719d911017c592-us",
        "https://discord.com/api/webhooks/ is the base URL",
    ] {
        let out = redactor.redact(text);
        assert_eq!(out.text, text);
        assert_eq!(out.counts.total(), 0, "{text}");
        assert_eq!(found(text), [], "{text}");
    }
}

#[test]
fn a_known_github_checksum_holds() {
    // A body of 30 zeros: its CRC32 (0x27be0f5b... computed by zlib) is
    // written in base62; any other last character fails.
    let body = "0".repeat(30);
    let sum = checksum::crc32_base62(body.as_bytes());
    assert_eq!(sum.len(), 6);
    let token = format!("ghp_{body}{sum}");
    assert_eq!(found(&token), [(token.clone(), "github-token")]);
    assert!(checksum::crc32_base62_holds(
        format!("{body}{sum}").as_bytes()
    ));
}

#[test]
fn the_automaton_stays_small() {
    // The contiguous NFA over the distinct anchors, with its prefilter.
    let bytes = automaton_bytes();
    assert!(bytes > 0);
    assert!(
        bytes < 128 * 1024,
        "the provider automaton holds {bytes} bytes"
    );
}

#[test]
fn rule_names_extend_the_builtin_list_without_duplicates() {
    let names: Vec<&str> = Redactor::builtin_rule_names().collect();
    let regex = crate::redact::rules::BUILTIN_RULES.len();
    assert_eq!(names[..regex].len(), regex);
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len());
    for format in FORMATS {
        assert!(names.contains(&format.name), "{}", format.name);
    }
    // After the regex rules, the cookie, encoded and layout scanners' seven.
    assert_eq!(
        names[regex..regex + 7],
        [
            "cookie-value",
            "encoded-private-key",
            "encoded-user-password",
            "encoded-credentials-json",
            "yaml-block-secret",
            "toml-multiline-secret",
            "pgpass-line",
        ]
    );
    assert_eq!(names[regex + 7], "aws-session-token");
    // 140 provider names, 17 of them a regex rule's too.
    assert_eq!(names.len(), regex + 7 + 140 - 17);
}

/// The run search that skips `shortest` bytes at a time finds exactly the
/// runs a byte-by-byte walk finds, in the same order, on text built from
/// token bytes, separators and real tokens of every length around the
/// shortest.
#[test]
fn the_skipping_run_search_finds_every_run_a_byte_walk_finds() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let Some(searcher) = SEARCHER.as_ref() else {
        panic!("the provider automaton builds");
    };
    let walk = |hay: &[u8]| {
        let mut spans = Vec::new();
        let mut i = 0;
        while i < hay.len() {
            if !searcher.token_bytes[usize::from(hay[i])] {
                i += 1;
                continue;
            }
            let start = i;
            while i < hay.len() && searcher.token_bytes[usize::from(hay[i])] {
                i += 1;
            }
            if i - start >= searcher.shortest {
                scan_run(searcher, hay, start, i, &mut spans);
            }
        }
        spans
    };
    let mut random = Random(7);
    let separators = [
        "ghp_",
        "sk-",
        "xoxb-",
        "AKIA",
        "=",
        " ",
        "\n",
        "/",
        "\"",
        "aaaaaaaaaaaaaaa",
    ];
    let pieces: Vec<Vec<u8>> = FORMATS
        .iter()
        .step_by(7)
        .flat_map(|f| {
            [
                f.sample(&mut random, Pick::Least),
                f.sample(&mut random, Pick::Most),
            ]
        })
        .map(String::into_bytes)
        .chain(separators.map(|p| p.as_bytes().to_vec()))
        .collect();
    let piece = (0..pieces.len()).prop_map(move |i| i);
    let mut runner = TestRunner::new(Config::with_cases(2_000));
    runner
        .run(&proptest::collection::vec(piece, 0..40), |picks| {
            let hay: Vec<u8> = picks.iter().flat_map(|&i| pieces[i].clone()).collect();
            let mut skipped = Vec::new();
            scan(&hay, &mut skipped);
            prop_assert_eq!(skipped, walk(&hay));
            Ok(())
        })
        .unwrap();
}
