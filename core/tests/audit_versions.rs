//! Logs written across releases: records of several format versions in one
//! log, records of a newer version than the reader's (checked as links of
//! the chain, their entries not read, never tampering), a version no
//! release wrote, and the layout of today's version held against the one
//! recorded for it.
#![allow(clippy::unwrap_used)]

mod audit_support;

use audit_support::{Rng, call_entries, events, test_key};
use spillguard_core::audit::{
    Anchor, FORMAT_VERSION, Key, LogEntry, LogId, LogWriter, MalformedReason,
    OLDEST_FORMAT_VERSION, Record, TamperKind, Verdict, Verifier, VerifyOptions, activity,
    sessions, verify, verify_and_read,
};

/// What a newer release might put in a record: bytes this reader cannot
/// decode as any entry it knows.
const FUTURE_ENTRY: &[u8] = b"\xff\xfe a record of a later release, with fields unknown here";

/// A log of `entries` (today's version), with records of the given newer
/// versions put in after entry `at`, as a newer release appending to the
/// same log would write them; then the rest of the entries again in
/// today's version (an older release appending after a newer one).
struct Mixed {
    bytes: Vec<u8>,
    anchor: Anchor,
    /// The format version of each record, in order.
    versions: Vec<u8>,
    /// Where each record starts.
    starts: Vec<usize>,
}

fn mixed(entries: &[LogEntry], newer: &[u8], at: usize, key: Option<&Key>) -> Mixed {
    let mut rng = Rng::new(40);
    let mut writer = LogWriter::create(LogId(rng.bytes()), key);
    let mut bytes = Vec::new();
    let mut versions = Vec::new();
    let mut starts = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        starts.push(bytes.len());
        let nonce = key.map(|_| rng.bytes());
        writer.append_to(entry, nonce, &mut bytes).unwrap();
        versions.push(FORMAT_VERSION);
        if i == at {
            for &version in newer {
                starts.push(bytes.len());
                let nonce = key.map(|_| rng.bytes());
                let frame = writer
                    .append_encoded_as(version, FUTURE_ENTRY, nonce)
                    .unwrap();
                bytes.extend(frame);
                versions.push(version);
            }
        }
    }
    Mixed {
        bytes,
        anchor: writer.anchor(),
        versions,
        starts,
    }
}

fn entries() -> Vec<LogEntry> {
    call_entries(&events(60))
}

#[test]
fn records_of_a_newer_version_verify_as_links_and_are_handed_on_unread() {
    let entries = entries();
    for key in [None, Some(test_key())] {
        let log = mixed(&entries, &[FORMAT_VERSION + 1, 9], 20, key.as_ref());
        let options = VerifyOptions {
            anchor: Some(&log.anchor),
            key: key.as_ref(),
        };
        let (verdict, records) = verify_and_read(&log.bytes, options);
        let total = entries.len() as u64 + 2;
        assert_eq!(
            verdict,
            Verdict::Ok {
                records: total,
                head: log.anchor.head
            },
            "sealed: {}",
            key.is_some()
        );
        let versions: Vec<u8> = records.iter().map(|r| r.format_version).collect();
        assert_eq!(versions, log.versions);
        let newer: Vec<&Record> = records.iter().filter(|r| r.is_newer_format()).collect();
        assert_eq!(newer.len(), 2);
        assert_eq!(newer.iter().map(|r| r.index).collect::<Vec<_>>(), [21, 22]);
        assert!(newer.iter().all(|r| r.entry.is_none()));
        // Every record of today's version is read, with or without the
        // records between them (with the key: a sealed log's entries).
        let read: Vec<LogEntry> = records.iter().filter_map(|r| r.entry.clone()).collect();
        assert_eq!(read, entries);

        let mut verifier = Verifier::new(options);
        verifier.handle_bytes(&log.bytes);
        while verifier.poll_record().is_some() {}
        assert_eq!(verifier.newer_records().records, 2);
        assert_eq!(verifier.newer_records().newest, 9);
        assert_eq!(verifier.finish(), verdict);
    }
}

#[test]
fn the_views_of_a_mixed_log_are_those_of_its_readable_records() {
    let entries = entries();
    let log = mixed(&entries, &[FORMAT_VERSION + 1], 5, None);
    let (verdict, records) = verify_and_read(&log.bytes, VerifyOptions::default());
    assert!(
        matches!(verdict, Verdict::Unanchored { records: n, .. } if n == entries.len() as u64 + 1)
    );
    let plain = audit_support::write_log(&entries, None, &mut Rng::new(1));
    let (_, plain_records) = verify_and_read(&plain.bytes, VerifyOptions::default());
    // The same rows, but for where they are in the log: the record of the
    // newer version sits among them.
    let rows = |records: &[Record]| {
        let mut rows = activity(records);
        for row in &mut rows {
            (row.first_record, row.last_record) = (0, 0);
        }
        rows
    };
    let session_rows = |records: &[Record]| {
        let mut rows = sessions(records);
        for row in &mut rows {
            (row.first_record, row.last_record) = (0, 0);
        }
        rows
    };
    assert_eq!(rows(&records), rows(&plain_records));
    assert_eq!(session_rows(&records), session_rows(&plain_records));
    assert_eq!(rows(&records).len(), 11);
    assert!(activity(&records).iter().any(|row| row.last_record > 5));
}

#[test]
fn a_newer_record_is_still_a_link_a_flipped_byte_or_a_cut_is_caught() {
    let entries = entries();
    let log = mixed(&entries, &[FORMAT_VERSION + 1], 10, None);
    let options = VerifyOptions {
        anchor: Some(&log.anchor),
        key: None,
    };
    // Record 11 is the newer one.
    assert_eq!(log.versions[11], FORMAT_VERSION + 1);
    let (start, end) = (log.starts[11], log.starts[12]);
    for at in [start, start + 8, start + 20, end - 40, end - 1] {
        let mut damaged = log.bytes.clone();
        damaged[at] ^= 0x10;
        let verdict = verify(&damaged, options);
        assert!(
            matches!(
                verdict,
                Verdict::Tampered {
                    record_index: 11,
                    ..
                }
            ),
            "byte {at}: {verdict:?}"
        );
    }
    // Cut the log after the newer record: the anchor says more.
    let verdict = verify(&log.bytes[..end], options);
    assert!(matches!(
        verdict,
        Verdict::Tampered {
            kind: TamperKind::Truncated { .. },
            ..
        }
    ));
}

#[test]
fn a_newer_writers_torn_frame_is_a_torn_tail_and_the_log_resumes() {
    let entries = entries();
    let key = test_key();
    for key in [None, Some(&key)] {
        let mut rng = Rng::new(3);
        let mut writer = LogWriter::create(LogId(rng.bytes()), key);
        let mut bytes = Vec::new();
        for entry in &entries[..4] {
            writer
                .append_to(entry, key.map(|_| rng.bytes()), &mut bytes)
                .unwrap();
        }
        let intact = bytes.len();
        let frame = writer
            .append_encoded_as(FORMAT_VERSION + 1, FUTURE_ENTRY, key.map(|_| rng.bytes()))
            .unwrap();
        for cut in [1, 4, 8, 9, 10, 30, frame.len() - 1] {
            let mut torn = bytes.clone();
            torn.extend_from_slice(&frame[..cut]);
            let verdict = verify(&torn, VerifyOptions { anchor: None, key });
            assert!(
                matches!(verdict, Verdict::TornTail { offset, records_before: 4, .. } if offset == intact as u64),
                "cut {cut}: {verdict:?}"
            );
        }
        // A log ending in a newer record is resumed by this release: its
        // next record is of today's version.
        bytes.extend(&frame);
        let (mut resumed, resume) = LogWriter::resume(&bytes, key).unwrap();
        assert_eq!(resume.records, 5);
        let next = resumed
            .append(&entries[4], key.map(|_| rng.bytes()))
            .unwrap();
        bytes.extend(next);
        let (verdict, records) = verify_and_read(
            &bytes,
            VerifyOptions {
                anchor: Some(&resumed.anchor()),
                key,
            },
        );
        assert!(verdict.is_ok(), "{verdict:?}");
        assert_eq!(
            records.iter().map(|r| r.format_version).collect::<Vec<_>>(),
            [
                FORMAT_VERSION,
                FORMAT_VERSION,
                FORMAT_VERSION,
                FORMAT_VERSION,
                FORMAT_VERSION + 1,
                FORMAT_VERSION
            ]
        );
    }
}

#[test]
fn a_version_no_release_wrote_is_malformed() {
    let entries = entries();
    let log = mixed(&entries[..3], &[0], 1, None);
    assert_eq!(
        log.versions,
        [FORMAT_VERSION, FORMAT_VERSION, 0, FORMAT_VERSION]
    );
    assert_eq!(
        verify(&log.bytes, VerifyOptions::default()),
        Verdict::Malformed {
            record_index: 2,
            offset: log.starts[2] as u64,
            reason: MalformedReason::UnsupportedVersion { version: 0 },
        }
    );
    assert_eq!(OLDEST_FORMAT_VERSION, 1);
}
