//! Bit-flip sweep: every bit of every record of a 1,002-event log is
//! flipped, one at a time, plain and sealed; the verifier (with the
//! anchor) rejects every one, as `Modified` at the flipped record — never
//! as a torn tail.
//!
//! A verifier's verdict does not depend on how its input is chunked, so
//! each case clones the verifier as it stood after the records before the
//! flipped one, then feeds the flipped record and everything after it: the
//! same verdict as verifying the whole mutated file, without re-reading
//! the intact prefix 1.5 million times.
#![allow(clippy::unwrap_used)]

mod audit_support;

use audit_support::{Log, Rng, call_entries, events, test_key, write_log};
use spillguard_core::audit::{Key, TamperKind, Verdict, Verifier, VerifyOptions};

/// The verifier after the first `k` records, for every `k`.
fn prefix_states(log: &Log, options: VerifyOptions<'_>) -> Vec<Verifier> {
    let mut verifier = Verifier::new(options);
    let mut states = Vec::with_capacity(log.records());
    for k in 0..log.records() {
        states.push(verifier.clone());
        verifier.handle_bytes(log.frame(k));
        while verifier.poll_record().is_some() {}
    }
    states
}

/// Flips every bit of records `range`; returns (flips, offsets of the
/// flipped bits whose verdict was not `Modified` at that record).
fn sweep_range(
    log: &Log,
    states: &[Verifier],
    range: std::ops::Range<usize>,
) -> (u64, Vec<String>) {
    let mut flips = 0;
    let mut undetected = Vec::new();
    for k in range {
        let mut frame = log.frame(k).to_vec();
        let rest = &log.bytes[log.bounds[k + 1]..];
        for bit in 0..frame.len() * 8 {
            frame[bit / 8] ^= 1 << (bit % 8);
            let mut verifier = states[k].clone();
            verifier.handle_bytes(&frame);
            verifier.handle_bytes(rest);
            let verdict = verifier.finish();
            frame[bit / 8] ^= 1 << (bit % 8);
            flips += 1;
            let expected = Verdict::Tampered {
                record_index: k as u64,
                offset: log.bounds[k] as u64,
                kind: TamperKind::Modified,
            };
            if verdict != expected {
                undetected.push(format!(
                    "byte {} bit {}: {verdict:?}",
                    log.bounds[k] + bit / 8,
                    bit % 8
                ));
            }
        }
    }
    (flips, undetected)
}

fn sweep(log: &Log, key: Option<&Key>) -> (u64, Vec<String>) {
    let options = VerifyOptions {
        anchor: Some(&log.anchor),
        key,
    };
    let states = prefix_states(log, options);
    let middle = log.records() / 2;
    std::thread::scope(|scope| {
        let first = scope.spawn(|| sweep_range(log, &states, 0..middle));
        let (flips, mut undetected) = sweep_range(log, &states, middle..log.records());
        let (more, missed) = first.join().unwrap();
        undetected.extend(missed);
        (flips + more, undetected)
    })
}

#[test]
fn every_flipped_bit_of_a_plain_log_is_detected_as_modified() {
    let entries = call_entries(&events(1_000));
    let log = write_log(&entries, None, &mut Rng::new(11));
    assert_eq!(log.records(), 1_002);
    let (flips, undetected) = sweep(&log, None);
    assert_eq!(flips, log.bytes.len() as u64 * 8);
    assert_eq!(flips, 1_185_048);
    assert_eq!(undetected, Vec::<String>::new());
}

#[test]
fn every_flipped_bit_of_a_sealed_log_is_detected_as_modified() {
    let entries = call_entries(&events(1_000));
    let key = test_key();
    let log = write_log(&entries, Some(&key), &mut Rng::new(12));
    let (flips, undetected) = sweep(&log, Some(&key));
    assert_eq!(flips, log.bytes.len() as u64 * 8);
    assert_eq!(flips, 1_569_816);
    assert_eq!(undetected, Vec::<String>::new());
}
