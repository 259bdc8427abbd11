//! Mutations: records deleted, reordered, duplicated, replaced (re-hashed),
//! spliced from another log as they are, and spliced from another log as a
//! re-hashed valid chain. 10,000 seeded cases of each, plain and sealed,
//! verified against the anchor; every case is detected, with the exact
//! record and kind expected.
//!
//! Each case is judged by cloning the verifier as it stood before the
//! first changed record and feeding the mutated rest (the verdict does not
//! depend on chunking); every 100th case is also verified whole, from its
//! first byte, and must give the same verdict.
#![allow(clippy::unwrap_used)]

mod audit_support;

use std::collections::BTreeMap;

use audit_support::{Log, Rng, call_entries, concat, events, forge, test_key, write_log};
use spillguard_core::audit::{Key, TamperKind, Verdict, Verifier, VerifyOptions, verify};

const CASES: usize = 10_000;

struct Base {
    log: Log,
    frames: Vec<Vec<u8>>,
    other: Vec<Vec<u8>>,
    key: Option<Key>,
    /// The verifier (with the anchor) after the first `k` records.
    anchored: Vec<Verifier>,
    /// The same without the anchor.
    unanchored: Vec<Verifier>,
}

impl Base {
    fn new(sealed: bool) -> Base {
        let key = sealed.then(test_key);
        let mut rng = Rng::new(if sealed { 21 } else { 20 });
        let log = write_log(&call_entries(&events(30)), key.as_ref(), &mut rng);
        let other_events = audit_support::call_events(900, 90, 0);
        let other_events: Vec<_> = other_events
            .into_iter()
            .chain(audit_support::call_events(901, 90, 2))
            .collect();
        let other = write_log(&call_entries(&other_events), key.as_ref(), &mut rng);
        let states = |anchor| {
            let mut verifier = Verifier::new(VerifyOptions {
                anchor,
                key: key.as_ref(),
            });
            let mut states = Vec::new();
            for k in 0..=log.records() {
                states.push(verifier.clone());
                if k < log.records() {
                    verifier.handle_bytes(log.frame(k));
                    while verifier.poll_record().is_some() {}
                }
            }
            states
        };
        Base {
            anchored: states(Some(&log.anchor)),
            unanchored: states(None),
            frames: log.frames(),
            other: other.frames(),
            key,
            log,
        }
    }

    fn records(&self) -> usize {
        self.frames.len()
    }

    fn sealed(&self) -> bool {
        self.key.is_some()
    }

    /// The chain hash before record `k` (genesis for 0).
    fn prev(&self, k: usize) -> [u8; 32] {
        match k {
            0 => forge::genesis(self.log.log_id.0),
            k => forge::hash_of(&self.frames[k - 1]),
        }
    }
}

/// One mutated log: its frames, the first position that differs from the
/// original, and the verdict it must get.
struct Case {
    frames: Vec<Vec<u8>>,
    first_change: usize,
    expected: Verdict,
}

fn tampered(frames: &[Vec<u8>], index: usize, kind: TamperKind) -> Verdict {
    Verdict::Tampered {
        record_index: index as u64,
        offset: frames[..index].iter().map(Vec::len).sum::<usize>() as u64,
        kind,
    }
}

fn delete(base: &Base, rng: &mut Rng) -> Case {
    let n = base.records();
    let k = rng.below(n as u64) as usize;
    let d = (1 + rng.below(3) as usize).min(n - k);
    let mut frames = base.frames.clone();
    frames.drain(k..k + d);
    let kind = if k + d == n {
        TamperKind::Truncated { anchored: n as u64 }
    } else {
        TamperKind::Deleted { missing: d as u64 }
    };
    let expected = tampered(&frames, k, kind);
    Case {
        frames,
        first_change: k,
        expected,
    }
}

fn reorder(base: &Base, rng: &mut Rng) -> Case {
    let n = base.records() as u64;
    let (a, b) = loop {
        let (a, b) = (rng.below(n) as usize, rng.below(n) as usize);
        if a != b {
            break (a, b);
        }
    };
    let mut frames = base.frames.clone();
    if rng.below(2) == 0 {
        frames.swap(a, b);
    } else {
        let moved = frames.remove(a);
        frames.insert(b, moved);
    }
    let first = a.min(b);
    let expected = tampered(&frames, first, TamperKind::Reordered);
    Case {
        frames,
        first_change: first,
        expected,
    }
}

fn duplicate(base: &Base, rng: &mut Rng) -> Case {
    let n = base.records() as u64;
    let k = rng.below(n) as usize;
    let at = rng.below(n + 1) as usize;
    let mut frames = base.frames.clone();
    frames.insert(at, base.frames[k].clone());
    let index = if at == k { k + 1 } else { at };
    let expected = tampered(&frames, index, TamperKind::Duplicated { of: k as u64 });
    Case {
        frames,
        first_change: at,
        expected,
    }
}

/// Record `k` replaced by another record's payload under `k`'s sequence
/// number and link, re-hashed: what anyone can forge without the key.
fn replace(base: &Base, rng: &mut Rng) -> Case {
    let n = base.records();
    let (k, j) = loop {
        let (k, j) = (rng.below(n as u64) as usize, rng.below(n as u64) as usize);
        if k != j {
            break (k, j);
        }
    };
    let forged = forge::relink(&base.frames[j], base.log.log_id.0, k as u64, base.prev(k));
    assert_ne!(forged, base.frames[k]);
    let mut frames = base.frames.clone();
    frames[k] = forged;
    let expected = if base.sealed() {
        tampered(&frames, k, TamperKind::BadMac)
    } else if k + 1 == n {
        tampered(&frames, k, TamperKind::Rewritten)
    } else {
        tampered(&frames, k + 1, TamperKind::Replaced)
    };
    Case {
        frames,
        first_change: k,
        expected,
    }
}

/// Takes 1 to 4 consecutive records of the other log; inserts them at a
/// position before the end, or puts them in place of as many records.
fn splice_parts(base: &Base, rng: &mut Rng) -> (usize, usize, Vec<Vec<u8>>, bool) {
    let n = base.records();
    let len = 1 + rng.below(4) as usize;
    let from = rng.below((base.other.len() - len + 1) as u64) as usize;
    let piece = base.other[from..from + len].to_vec();
    let insert = rng.below(2) == 0;
    let at = if insert {
        rng.below(n as u64) as usize
    } else {
        rng.below((n - len + 1) as u64) as usize
    };
    (at, len, piece, insert)
}

fn splice(base: &Base, rng: &mut Rng) -> Case {
    let (at, len, piece, insert) = splice_parts(base, rng);
    let mut frames = base.frames.clone();
    let removed = if insert { 0 } else { len };
    frames.splice(at..at + removed, piece);
    let expected = tampered(&frames, at, TamperKind::WrongLog);
    Case {
        frames,
        first_change: at,
        expected,
    }
}

/// The other log's records relabelled as ours and the whole chain from
/// there re-hashed: a valid chain, which only the anchor (plain) or the
/// seal (sealed) can tell from the original.
fn splice_rehashed(base: &Base, rng: &mut Rng) -> Case {
    let (at, len, piece, insert) = splice_parts(base, rng);
    let removed = if insert { 0 } else { len };
    let rest: Vec<Vec<u8>> = piece
        .into_iter()
        .chain(base.frames[at + removed..].iter().cloned())
        .collect();
    let mut frames = base.frames[..at].to_vec();
    frames.extend(forge::rechain(
        &rest,
        base.log.log_id.0,
        at as u64,
        base.prev(at),
    ));
    let expected = if base.sealed() {
        tampered(&frames, at, TamperKind::BadMac)
    } else {
        tampered(&frames, base.records() - 1, TamperKind::Rewritten)
    };
    Case {
        frames,
        first_change: at,
        expected,
    }
}

fn judge(states: &[Verifier], case: &Case) -> Verdict {
    let mut verifier = states[case.first_change].clone();
    for frame in &case.frames[case.first_change..] {
        verifier.handle_bytes(frame);
        while verifier.poll_record().is_some() {}
    }
    verifier.finish()
}

/// What `CASES` cases got: verdict counts with the anchor and without it,
/// and the cases that did not get their expected verdict (with the anchor).
struct Outcome {
    anchored: BTreeMap<String, usize>,
    unanchored: BTreeMap<String, usize>,
    wrong: Vec<String>,
}

fn run(sealed: bool, seed: u64, mutate: fn(&Base, &mut Rng) -> Case) -> Outcome {
    let base = Base::new(sealed);
    let mut rng = Rng::new(seed);
    let mut outcome = Outcome {
        anchored: BTreeMap::new(),
        unanchored: BTreeMap::new(),
        wrong: Vec::new(),
    };
    for n in 0..CASES {
        let case = mutate(&base, &mut rng);
        assert_eq!(
            case.frames[..case.first_change],
            base.frames[..case.first_change]
        );
        let with_anchor = judge(&base.anchored, &case);
        let without = judge(&base.unanchored, &case);
        if n % 100 == 0 {
            let bytes = concat(&case.frames);
            let key = base.key.as_ref();
            let anchor = Some(&base.log.anchor);
            assert_eq!(verify(&bytes, VerifyOptions { anchor, key }), with_anchor);
            let anchor = None;
            assert_eq!(verify(&bytes, VerifyOptions { anchor, key }), without);
        }
        *outcome
            .anchored
            .entry(verdict_name(&with_anchor))
            .or_insert(0) += 1;
        *outcome
            .unanchored
            .entry(verdict_name(&without))
            .or_insert(0) += 1;
        if with_anchor != case.expected {
            outcome.wrong.push(format!(
                "case {n}: expected {:?}, got {with_anchor:?}",
                case.expected
            ));
        }
    }
    outcome
}

/// The verdict's variant, or for `Tampered` its kind: `"Deleted"`, …
fn verdict_name(verdict: &Verdict) -> String {
    let text = match verdict {
        Verdict::Tampered { kind, .. } => format!("{kind:?}"),
        other => format!("{other:?}"),
    };
    text.split([' ', '{']).next().unwrap_or_default().to_owned()
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

type Counts<'a> = &'a [(&'a str, usize)];

/// Runs the cases plain and sealed: with the anchor every case gets its
/// expected verdict, and the counts per kind are as given (`plain`,
/// `sealed`); without the anchor the counts are `plain_unanchored` and
/// `sealed_unanchored`.
fn check(mutate: fn(&Base, &mut Rng) -> Case, seed: u64, want: [Counts<'_>; 4]) {
    let [plain, sealed, plain_unanchored, sealed_unanchored] = want;
    for (is_sealed, anchored, unanchored) in [
        (false, plain, plain_unanchored),
        (true, sealed, sealed_unanchored),
    ] {
        let outcome = run(is_sealed, seed, mutate);
        assert_eq!(outcome.wrong, Vec::<String>::new(), "sealed: {is_sealed}");
        assert_eq!(outcome.anchored, counts(anchored), "sealed: {is_sealed}");
        assert_eq!(
            outcome.unanchored,
            counts(unanchored),
            "sealed: {is_sealed}"
        );
    }
}

#[test]
fn every_deletion_is_detected() {
    // Without the anchor, a deletion at the end is a clean cut: unvouched.
    let with = &[("Deleted", 9_367), ("Truncated", 633)];
    let without = &[("Deleted", 9_367), ("Unanchored", 633)];
    check(delete, 1, [with, with, without, without]);
}

#[test]
fn every_reordering_is_detected() {
    let all = &[("Reordered", CASES)];
    check(reorder, 2, [all, all, all, all]);
}

#[test]
fn every_duplicate_is_detected() {
    let all = &[("Duplicated", CASES)];
    check(duplicate, 3, [all, all, all, all]);
}

#[test]
fn every_rehashed_replacement_is_detected() {
    // Replacing the last record of a plain log leaves a valid chain: only
    // the anchor tells it (`Rewritten`).
    check(
        replace,
        4,
        [
            &[("Replaced", 9_685), ("Rewritten", 315)],
            &[("BadMac", CASES)],
            &[("Replaced", 9_685), ("Unanchored", 315)],
            &[("BadMac", CASES)],
        ],
    );
}

#[test]
fn every_splice_from_another_log_is_detected() {
    let all = &[("WrongLog", CASES)];
    // Without the anchor the first record names the log: foreign records
    // put first, from past the other log's start, read as a log whose
    // first records are missing.
    let without = &[("Deleted", 306), ("WrongLog", 9_694)];
    check(splice, 5, [all, all, without, without]);
}

/// A plain log's limit: a re-hashed chain is a valid chain, so without the
/// anchor the verdict can only say that the end is unvouched. The anchor
/// catches every one; a sealed log refuses every one, anchor or not.
#[test]
fn every_rehashed_chain_spliced_from_another_log_is_detected() {
    check(
        splice_rehashed,
        6,
        [
            &[("Rewritten", CASES)],
            &[("BadMac", CASES)],
            &[("Unanchored", CASES)],
            &[("BadMac", CASES)],
        ],
    );
}
