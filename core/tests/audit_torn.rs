//! Torn tail: a crash at every byte offset of the last 3 records of a log
//! (plain and sealed). Each cut is a torn tail (or, at a record boundary,
//! a clean unvouched end), never tampering; recovery keeps exactly the
//! committed records, records the loss, and 100 further appends verify
//! `Ok` against a fresh anchor.
#![allow(clippy::unwrap_used)]

mod audit_support;

use audit_support::{Log, Rng, call_entries, events, forge, test_key, write_log};
use spillguard_core::audit::{
    Anchor, ChainHash, Key, LogEntry, LogWriter, Resume, TornTail, Verdict, VerifyOptions, verify,
    verify_and_read,
};

#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    cuts: usize,
    torn: usize,
    clean: usize,
    recovered_ok: usize,
}

struct Setup<'a> {
    key: Option<&'a Key>,
    log: Log,
    entries: Vec<LogEntry>,
    committed: usize,
    committed_anchor: Anchor,
    more: Vec<LogEntry>,
}

/// A crash leaves `log.bytes[..cut]`: check the verdicts, resume, recover,
/// append 100 entries and verify against a fresh anchor.
fn crash_at(setup: &Setup<'_>, cut: usize, tally: &mut Tally) {
    let Setup {
        key, log, entries, ..
    } = setup;
    let key = *key;
    let mut rng = Rng::new(cut as u64);
    let bytes = &log.bytes[..cut];
    let k = log.bounds.partition_point(|b| *b <= cut) - 1;
    let start = log.bounds[k];
    let torn = (cut > start).then_some(TornTail {
        offset: start as u64,
        dropped_bytes: (cut - start) as u64,
    });
    let head = ChainHash(forge::hash_of(log.frame(k - 1)));
    let expected = |vouched: usize| match torn {
        Some(_) => Verdict::TornTail {
            offset: start as u64,
            torn_bytes: (cut - start) as u64,
            records_before: k as u64,
            head: Some(head),
            vouched: vouched as u64,
        },
        // A clean end exactly where the anchor was taken is the whole
        // log the anchor knows of.
        None if vouched == k => Verdict::Ok {
            records: k as u64,
            head,
        },
        None => Verdict::Unanchored {
            records: k as u64,
            head: Some(head),
            vouched: vouched as u64,
        },
    };
    let without = verify(bytes, VerifyOptions { anchor: None, key });
    assert_eq!(without, expected(0), "cut {cut}");
    let anchor = Some(&setup.committed_anchor);
    let with = verify(bytes, VerifyOptions { anchor, key });
    assert_eq!(with, expected(setup.committed), "cut {cut}");

    let (mut writer, resume) = LogWriter::resume(bytes, key).unwrap();
    assert_eq!(
        resume,
        Resume {
            valid_len: start as u64,
            records: k as u64,
            torn,
        }
    );
    let mut file = bytes[..start].to_vec();
    if torn.is_some() {
        file.extend(writer.append_recovery(key.map(|_| rng.bytes())).unwrap());
    }
    for entry in &setup.more {
        let nonce = key.map(|_| rng.bytes());
        writer.append_to(entry, nonce, &mut file).unwrap();
    }
    let anchor = writer.anchor();
    let (verdict, records) = verify_and_read(
        &file,
        VerifyOptions {
            anchor: Some(&anchor),
            key,
        },
    );
    let added = usize::from(torn.is_some());
    assert_eq!(
        verdict,
        Verdict::Ok {
            records: (k + added + 100) as u64,
            head: anchor.head
        },
        "cut {cut}"
    );
    let read: Vec<LogEntry> = records.into_iter().map(|r| r.entry.unwrap()).collect();
    assert_eq!(read[..k], entries[..k]);
    if let Some(torn) = torn {
        assert_eq!(
            read[k],
            LogEntry::Recovered {
                dropped_bytes: torn.dropped_bytes,
                at_offset: torn.offset
            }
        );
    }
    assert_eq!(read[k + added..], setup.more[..]);

    tally.cuts += 1;
    if torn.is_some() {
        tally.torn += 1;
    } else {
        tally.clean += 1;
    }
    tally.recovered_ok += 1;
}

/// Crashes at every byte offset of the last three records of a log of two
/// finished calls and the start of a third, cut while it awaits approval
/// (its transition to `validated`, its attempt, its transition to
/// `awaiting_approval`): 19 records. On two threads.
fn crash_everywhere_in_the_last_three(key: Option<&Key>, seed: u64) -> Tally {
    let mut started = events(10);
    started.extend(audit_support::call_events(2, 0, 0).into_iter().take(3));
    let entries = call_entries(&started);
    let log = write_log(&entries, key, &mut Rng::new(seed));
    let n = log.records();
    assert_eq!(n, 19);
    let committed = n - 3;
    // The anchor of the last state known durable: before the last three.
    let committed_anchor = Anchor::new(
        log.log_id,
        committed as u64,
        ChainHash(forge::hash_of(log.frame(committed - 1))),
    );
    let setup = Setup {
        key,
        entries,
        committed,
        committed_anchor,
        more: call_entries(&events(100)[..100]),
        log,
    };
    let cuts: Vec<usize> = (setup.log.bounds[committed]..setup.log.bounds[n]).collect();
    let (first, second) = cuts.split_at(cuts.len() / 2);
    let run = |cuts: &[usize]| {
        let mut tally = Tally::default();
        for &cut in cuts {
            crash_at(&setup, cut, &mut tally);
        }
        tally
    };
    std::thread::scope(|scope| {
        let other = scope.spawn(|| run(first));
        let mut tally = run(second);
        let more = other.join().unwrap();
        tally.cuts += more.cuts;
        tally.torn += more.torn;
        tally.clean += more.clean;
        tally.recovered_ok += more.recovered_ok;
        tally
    })
}

#[test]
fn a_crash_anywhere_in_the_last_three_plain_records_recovers_the_committed_prefix() {
    let tally = crash_everywhere_in_the_last_three(None, 41);
    assert_eq!(
        (tally.cuts, tally.torn, tally.clean, tally.recovered_ok),
        (357, 354, 3, 357)
    );
}

#[test]
fn a_crash_anywhere_in_the_last_three_sealed_records_recovers_the_committed_prefix() {
    let tally = crash_everywhere_in_the_last_three(Some(&test_key()), 42);
    assert_eq!(
        (tally.cuts, tally.torn, tally.clean, tally.recovered_ok),
        (501, 498, 3, 501)
    );
}
