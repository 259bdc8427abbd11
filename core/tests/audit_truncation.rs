//! Truncation: a 1,002-record log cut at every record boundary and at
//! 1,000 seeded points inside records, plain and sealed. With the anchor
//! every cut is `Truncated` at the first missing record; without it, a cut
//! at a boundary is `Unanchored` (the end is not vouched for) and a cut
//! inside a record is a torn tail — never `Ok`.
//!
//! The verifier is fed the log once; at each boundary a clone of it is
//! finished (and for a cut inside record `k`, a clone at `k` is fed the
//! first bytes of the record): the verdict on `bytes[..cut]`, as the
//! verdict does not depend on chunking. Every 100th cut is also verified
//! whole and must agree.
#![allow(clippy::unwrap_used)]

mod audit_support;

use audit_support::{Rng, call_entries, events, test_key, write_log};
use spillguard_core::audit::{
    ChainHash, Key, TamperKind, Verdict, Verifier, VerifyOptions, verify,
};

const RANDOM_CUTS: usize = 1_000;

struct Tally {
    cuts: usize,
    anchored_detected: usize,
    unanchored: usize,
    torn: usize,
    ok_without_anchor: usize,
    wrong: Vec<String>,
}

fn sweep(key: Option<&Key>, seed: u64) -> Tally {
    let log = write_log(&call_entries(&events(1_000)), key, &mut Rng::new(seed));
    let n = log.records();
    let mut anchored = Verifier::new(VerifyOptions {
        anchor: Some(&log.anchor),
        key,
    });
    let mut plain = Verifier::new(VerifyOptions { anchor: None, key });

    // Cuts strictly inside records, grouped by record.
    let mut rng = Rng::new(seed + 100);
    let mut inside: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut drawn = 0;
    while drawn < RANDOM_CUTS {
        let cut = 1 + rng.below(log.bytes.len() as u64 - 1) as usize;
        let k = log.bounds.partition_point(|b| *b <= cut) - 1;
        if log.bounds[k] != cut && !inside[k].contains(&cut) {
            inside[k].push(cut);
            drawn += 1;
        }
    }

    let mut tally = Tally {
        cuts: 0,
        anchored_detected: 0,
        unanchored: 0,
        torn: 0,
        ok_without_anchor: 0,
        wrong: Vec::new(),
    };
    let mut head: Option<ChainHash> = None;
    for (k, inside_k) in inside.iter().enumerate() {
        let start = log.bounds[k];
        let truncated = Verdict::Tampered {
            record_index: k as u64,
            offset: start as u64,
            kind: TamperKind::Truncated { anchored: n as u64 },
        };
        let mut cuts = vec![(
            start,
            Verdict::Unanchored {
                records: k as u64,
                head,
                vouched: 0,
            },
        )];
        for &cut in inside_k {
            cuts.push((
                cut,
                Verdict::TornTail {
                    offset: start as u64,
                    torn_bytes: (cut - start) as u64,
                    records_before: k as u64,
                    head,
                    vouched: 0,
                },
            ));
        }
        for (cut, expected) in cuts {
            let judge = |verifier: &Verifier| {
                let mut verifier = verifier.clone();
                verifier.handle_bytes(&log.bytes[start..cut]);
                verifier.finish()
            };
            let (with, without) = (judge(&anchored), judge(&plain));
            if tally.cuts.is_multiple_of(100) {
                let bytes = &log.bytes[..cut];
                let anchor = Some(&log.anchor);
                assert_eq!(verify(bytes, VerifyOptions { anchor, key }), with);
                assert_eq!(verify(bytes, VerifyOptions { anchor: None, key }), without);
            }
            tally.cuts += 1;
            tally.anchored_detected += usize::from(with == truncated);
            match &without {
                Verdict::Unanchored { .. } => tally.unanchored += 1,
                Verdict::TornTail { .. } => tally.torn += 1,
                Verdict::Ok { .. } => tally.ok_without_anchor += 1,
                _ => {}
            }
            if with != truncated || without != expected {
                tally
                    .wrong
                    .push(format!("cut {cut}: {with:?} / {without:?}"));
            }
        }
        for verifier in [&mut anchored, &mut plain] {
            verifier.handle_bytes(log.frame(k));
        }
        while anchored.poll_record().is_some() {}
        head = plain.poll_record().map(|r| r.hash);
    }
    // Uncut, the log verifies.
    assert_eq!(
        anchored.finish(),
        Verdict::Ok {
            records: n as u64,
            head: log.anchor.head
        }
    );
    tally
}

fn check(key: Option<&Key>, seed: u64) {
    let tally = sweep(key, seed);
    assert_eq!(tally.wrong, Vec::<String>::new());
    assert_eq!(tally.cuts, 1_002 + RANDOM_CUTS);
    assert_eq!(tally.anchored_detected, 2_002);
    assert_eq!(tally.unanchored, 1_002);
    assert_eq!(tally.torn, RANDOM_CUTS);
    assert_eq!(tally.ok_without_anchor, 0);
}

#[test]
fn every_cut_of_a_plain_log_is_caught_by_the_anchor_and_never_ok_without_it() {
    check(None, 31);
}

#[test]
fn every_cut_of_a_sealed_log_is_caught_by_the_anchor_and_never_ok_without_it() {
    check(Some(&test_key()), 32);
}
