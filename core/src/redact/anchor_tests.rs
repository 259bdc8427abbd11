//! The anchor gate never hides a match: every text a rule matches holds
//! one of its anchors.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use regex_automata::Input;
use regex_syntax::hir::{Hir, HirKind};

use super::rules::{BUILTIN_RULES, KEY_END, may_match};
use super::{Redactor, build};

/// `hir` without its look-around assertions (`\b`, `^`, `\z`): it matches
/// every text the rule matches, and more.
fn without_looks(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Look(_) => Hir::empty(),
        HirKind::Repetition(r) => Hir::repetition(regex_syntax::hir::Repetition {
            sub: Box::new(without_looks(&r.sub)),
            ..r.clone()
        }),
        HirKind::Capture(c) => Hir::capture(regex_syntax::hir::Capture {
            sub: Box::new(without_looks(&c.sub)),
            ..c.clone()
        }),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(without_looks).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(without_looks).collect()),
        _ => hir.clone(),
    }
}

/// Texts drawn from each rule's pattern (assertions left out), each cut
/// down to the rule's own match where it has one: the gate passes every
/// one that the rule matches.
#[test]
fn every_text_a_rule_matches_holds_one_of_its_anchors() {
    let patterns = BUILTIN_RULES
        .iter()
        .map(|r| (r.name, r.pattern))
        .chain([("key-end", KEY_END)]);
    for (name, pattern) in patterns {
        let single = build(&[pattern]).expect("a built-in rule compiles");
        let hir = regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .build()
            .parse(pattern)
            .expect("a built-in rule parses");
        let loose = without_looks(&hir).to_string();
        let strategy = proptest::string::bytes_regex(&loose)
            .unwrap_or_else(|e| panic!("{name}: no generator for {loose}: {e}"));
        let mut runner = TestRunner::new(Config {
            cases: 400,
            failure_persistence: None,
            ..Config::default()
        });
        let matched = std::cell::Cell::new(0u32);
        runner
            .run(&strategy, |text| {
                if let Some(m) = single.find(Input::new(&text)) {
                    matched.set(matched.get() + 1);
                    prop_assert!(
                        may_match(&text[m.range()]),
                        "{name}: the gate stops {:?}",
                        String::from_utf8_lossy(&text[m.range()])
                    );
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
        let matched = matched.get();
        assert!(
            matched >= 100,
            "{name}: only {matched} of 400 drawn texts matched"
        );
    }
}

/// A flood of ordinary lines passes no anchor, so the set is not compiled
/// for it; a line with a key word passes.
#[test]
fn ordinary_lines_do_not_pass_the_gate_and_key_words_do() {
    let flood = "helper-diagnostic\n".repeat(1000);
    assert!(!may_match(flood.as_bytes()));
    assert!(!may_match(
        b"compiling serde v1.0.200\n   Finished release in 3.2s\n"
    ));
    for passes in [
        "TOKEN=abc",
        "Authorization: x",
        "-----END RSA PRIVATE KEY-----",
        "postgres://u:p@h/db",
        "AKIAIOSFODNN7EXAMPLE",
        "akia",
        "123456789:AAxyz",
    ] {
        assert!(may_match(passes.as_bytes()), "{passes}");
    }
    // Twilio's `AC` and `SK` are matched as written: folded, they are in
    // most words.
    assert!(may_match(b"SK0123456789abcdef0123456789abcdef"));
    assert!(!may_match(b"sk0123456789abcdef0123456789abcdef"));
    let redactor = Redactor::builtin();
    let out = redactor.redact(&flood);
    assert_eq!(out.text, flood);
    assert_eq!(out.counts.total(), 0);
}
