//! Writing and reading back: entries round-trip exactly, plain and sealed;
//! verdicts with and without an anchor; a wrong key is a verdict; sealed
//! logs show no entry text.
#![allow(clippy::unwrap_used)]

mod audit_support;

use audit_support::{Rng, call_entries, events, test_key, write_log};
use spillguard_core::AuditKind;
use spillguard_core::audit::{
    AppendError, Key, LogEntry, LogId, LogWriter, ResumeError, TamperKind, Verdict, VerifyOptions,
    verify, verify_and_read,
};

#[test]
fn every_kind_of_audit_event_round_trips_through_postcard() {
    let events = events(1_000);
    assert_eq!(events.len(), 1_002);
    let finals = events
        .iter()
        .filter(|e| matches!(e.kind, AuditKind::Final(_)))
        .count();
    assert_eq!(finals, 182);
    let with_fingerprint = events
        .iter()
        .filter(|e| matches!(&e.kind, AuditKind::Final(r) if r.stderr_fingerprint.is_some()))
        .count();
    assert_eq!(with_fingerprint, 70);
    for event in &events {
        let entry = LogEntry::Call(event.clone());
        let bytes = postcard::to_allocvec(&entry).unwrap();
        let back: LogEntry = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, entry);
    }
}

/// The card's event round-trips too, and the views read it back: the
/// card of the call that showed one is its text, byte for byte.
#[test]
fn the_card_event_round_trips_and_the_activity_view_shows_it() {
    use spillguard_core::audit::activity;

    let events = audit_support::call_events_with_card(1, 0, 1);
    let cards: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            AuditKind::CardShown { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        cards,
        [
            "action: ssh.exec\ntarget: deploy@web-1\nsummary: systemctl restart web\n\
          approval expires: 120000 ms after it is shown"
        ]
    );
    for event in &events {
        let entry = LogEntry::Call(event.clone());
        let back: LogEntry = postcard::from_bytes(&postcard::to_allocvec(&entry).unwrap()).unwrap();
        assert_eq!(back, entry);
    }
    let log = write_log(&call_entries(&events), None, &mut Rng::new(3));
    let (verdict, records) = verify_and_read(&log.bytes, VerifyOptions::default());
    assert!(matches!(verdict, Verdict::Unanchored { .. }), "{verdict}");
    let rows = activity(&records);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].card.as_deref(), Some(cards[0]));
}

#[test]
fn a_log_reads_back_exactly_plain_and_sealed() {
    let entries = call_entries(&events(1_000));
    let key = test_key();
    for key in [None, Some(&key)] {
        let mut rng = Rng::new(1);
        let log = write_log(&entries, key, &mut rng);
        let (verdict, records) = verify_and_read(
            &log.bytes,
            VerifyOptions {
                anchor: Some(&log.anchor),
                key,
            },
        );
        assert_eq!(
            verdict,
            Verdict::Ok {
                records: 1_002,
                head: log.anchor.head
            }
        );
        let read: Vec<LogEntry> = records.into_iter().map(|r| r.entry.unwrap()).collect();
        assert_eq!(read, entries);

        // Without the anchor the end is not vouched for.
        let verdict = verify(&log.bytes, VerifyOptions { anchor: None, key });
        assert_eq!(
            verdict,
            Verdict::Unanchored {
                records: 1_002,
                head: Some(log.anchor.head),
                vouched: 0
            }
        );
    }
}

fn sealed_log() -> (audit_support::Log, Key) {
    let key = test_key();
    let log = write_log(&call_entries(&events(200)), Some(&key), &mut Rng::new(2));
    (log, key)
}

#[test]
fn a_wrong_key_is_a_verdict_and_a_resume_error_not_a_crash() {
    let (log, key) = sealed_log();
    assert_eq!(log.records(), 205);
    let wrong = Key::from_bytes([0x5a; 32]);
    let expected = Verdict::WrongKey {
        log_key: key.id(),
        given_key: wrong.id(),
    };
    let without_anchor = VerifyOptions {
        anchor: None,
        key: Some(&wrong),
    };
    assert_eq!(verify(&log.bytes, without_anchor), expected);
    // The anchor's MAC names the right key: refused before any record.
    let with_anchor = VerifyOptions {
        anchor: Some(&log.anchor),
        key: Some(&wrong),
    };
    assert_eq!(verify(&log.bytes, with_anchor), expected);
    assert_eq!(
        LogWriter::resume(&log.bytes, Some(&wrong)).unwrap_err(),
        ResumeError::Rejected(expected)
    );
    assert_eq!(
        LogWriter::resume(&log.bytes, None).unwrap_err(),
        ResumeError::KeyRequired
    );

    // Without a key the chain and the anchor are still checked; nothing is
    // decrypted.
    let (verdict, records) = verify_and_read(
        &log.bytes,
        VerifyOptions {
            anchor: Some(&log.anchor),
            key: None,
        },
    );
    assert_eq!(
        verdict,
        Verdict::Ok {
            records: 205,
            head: log.anchor.head
        }
    );
    assert_eq!(records.iter().filter(|r| r.entry.is_none()).count(), 205);
}

#[test]
fn a_key_given_for_a_plain_log_is_refused() {
    let log = write_log(&call_entries(&events(20)), None, &mut Rng::new(3));
    let key = test_key();
    assert_eq!(
        verify(
            &log.bytes,
            VerifyOptions {
                anchor: None,
                key: Some(&key)
            }
        ),
        Verdict::Tampered {
            record_index: 0,
            offset: 0,
            kind: TamperKind::MixedSealing
        }
    );
    assert_eq!(
        LogWriter::resume(&log.bytes, Some(&key)).unwrap_err(),
        ResumeError::NotSealed
    );
}

#[test]
fn an_altered_or_foreign_anchor_is_refused() {
    let (log, key) = sealed_log();
    let mut forged = log.anchor.clone();
    forged.records -= 1;
    assert_eq!(
        verify(
            &log.bytes,
            VerifyOptions {
                anchor: Some(&forged),
                key: Some(&key)
            }
        ),
        Verdict::BadAnchor
    );
    // Without the key the MAC cannot be checked; the count still is.
    assert_eq!(
        verify(
            &log.bytes,
            VerifyOptions {
                anchor: Some(&forged),
                key: None
            }
        ),
        Verdict::Tampered {
            record_index: 203,
            offset: log.bounds[203] as u64,
            kind: TamperKind::Rewritten
        }
    );
    let other = write_log(&call_entries(&events(20)), Some(&key), &mut Rng::new(4));
    assert_eq!(
        verify(
            &log.bytes,
            VerifyOptions {
                anchor: Some(&other.anchor),
                key: Some(&key)
            }
        ),
        Verdict::Tampered {
            record_index: 0,
            offset: 0,
            kind: TamperKind::WrongLog
        }
    );
}

#[test]
fn sealed_logs_never_show_entry_text() {
    let target = "deploy@vault-prod-7f3e9a";
    let mut events = events(300);
    for event in &mut events {
        if let AuditKind::Attempt { target: t, .. } = &mut event.kind {
            *t = target.into();
        }
        if let AuditKind::Final(record) = &mut event.kind {
            record.target = target.into();
        }
    }
    let entries = call_entries(&events);
    let count = |bytes: &[u8], needle: &str| {
        bytes
            .windows(needle.len())
            .filter(|w| *w == needle.as_bytes())
            .count()
    };
    let plain = write_log(&entries, None, &mut Rng::new(5));
    assert_eq!(count(&plain.bytes, target), 96);
    assert_eq!(count(&plain.bytes, "ssh.exec"), 89);

    let key = test_key();
    let sealed = write_log(&entries, Some(&key), &mut Rng::new(5));
    for needle in [
        target,
        "ssh.exec",
        "c_00001",
        "s_001",
        "completed",
        "deploy",
    ] {
        assert_eq!(count(&sealed.bytes, needle), 0, "{needle}");
    }
    let (verdict, records) = verify_and_read(
        &sealed.bytes,
        VerifyOptions {
            anchor: Some(&sealed.anchor),
            key: Some(&key),
        },
    );
    assert!(verdict.is_ok(), "{verdict:?}");
    let read: Vec<LogEntry> = records.into_iter().map(|r| r.entry.unwrap()).collect();
    assert_eq!(read, entries);
}

#[test]
fn the_verdict_and_records_do_not_depend_on_chunking() {
    let key = test_key();
    let log = write_log(&call_entries(&events(100)), Some(&key), &mut Rng::new(6));
    let mut tampered = log.bytes.clone();
    tampered[log.bounds[60] + 30] ^= 0x10;
    let torn = &log.bytes[..log.bounds[90] + 40];
    let mut rng = Rng::new(7);
    for bytes in [&log.bytes[..], &tampered[..], torn] {
        let options = VerifyOptions {
            anchor: Some(&log.anchor),
            key: Some(&key),
        };
        let (whole, records) = verify_and_read(bytes, options);
        for size in [1usize, 7, 64, 4096, 0] {
            let mut verifier = spillguard_core::audit::Verifier::new(options);
            let mut read = Vec::new();
            let mut rest = bytes;
            while !rest.is_empty() {
                let n = if size == 0 {
                    1 + rng.below(300) as usize
                } else {
                    size
                };
                let (chunk, tail) = rest.split_at(n.min(rest.len()));
                verifier.handle_bytes(chunk);
                verifier.handle_bytes(&[]);
                while let Some(record) = verifier.poll_record() {
                    read.push(record);
                }
                rest = tail;
            }
            assert_eq!(verifier.finish(), whole, "chunks of {size}");
            assert_eq!(read, records, "chunks of {size}");
        }
    }
}

#[test]
fn writer_misuse_is_a_typed_error_and_changes_nothing() {
    let key = test_key();
    let entry = LogEntry::Opened {
        writer: "test".into(),
    };
    let mut sealed = LogWriter::create(LogId([1; 16]), Some(&key));
    assert_eq!(
        sealed.append(&entry, None).unwrap_err(),
        AppendError::NonceRequired
    );
    sealed.append(&entry, Some([1; 24])).unwrap();
    assert_eq!(
        sealed.append(&entry, Some([1; 24])).unwrap_err(),
        AppendError::NonceReused
    );
    assert_eq!(
        sealed.append_recovery(Some([2; 24])).unwrap_err(),
        AppendError::NoRecoveryPending
    );
    assert_eq!(sealed.records(), 1);

    let mut plain = LogWriter::create(LogId([2; 16]), None);
    assert_eq!(
        plain.append(&entry, Some([1; 24])).unwrap_err(),
        AppendError::NonceForPlainLog
    );
    let huge = LogEntry::Opened {
        writer: "x".repeat(16 << 20),
    };
    let mut out = b"kept".to_vec();
    assert_eq!(
        plain.append_to(&huge, None, &mut out).unwrap_err(),
        AppendError::TooLarge {
            body_bytes: 16_777_308
        }
    );
    assert_eq!(out, b"kept");
    assert_eq!(plain.records(), 0);
    assert_eq!(
        plain.head(),
        spillguard_core::audit::ChainHash::genesis(LogId([2; 16]))
    );
}

#[test]
fn frames_follow_the_documented_layout() {
    use audit_support::forge;
    let key = test_key();
    for key in [None, Some(&key)] {
        let log = write_log(&call_entries(&events(30)), key, &mut Rng::new(8));
        let mut prev = forge::genesis(log.log_id.0);
        for (i, frame) in log.frames().iter().enumerate() {
            let body = forge::decode(frame);
            assert_eq!(body.version, spillguard_core::audit::FORMAT_VERSION);
            assert_eq!(body.seq, i as u64);
            assert_eq!(body.log_id, log.log_id.0);
            assert_eq!(body.prev, prev);
            assert_eq!(
                matches!(body.payload, forge::Payload::Sealed { .. }),
                key.is_some()
            );
            if let forge::Payload::Sealed { key_id, .. } = body.payload {
                assert_eq!(key_id, key.unwrap().id().0);
            }
            assert_eq!(&forge::encode(&forge::decode(frame)), frame);
            prev = forge::hash_of(frame);
        }
        assert_eq!(prev, log.anchor.head.0);
    }
}

#[test]
fn verdicts_have_a_json_form_and_a_line_of_text() {
    let deleted = Verdict::Tampered {
        record_index: 17,
        offset: 2_345,
        kind: TamperKind::Deleted { missing: 2 },
    };
    let json = serde_json::to_string(&deleted).unwrap();
    assert_eq!(
        json,
        r#"{"verdict":"tampered","record_index":17,"offset":2345,"kind":{"type":"deleted","missing":2}}"#
    );
    assert_eq!(serde_json::from_str::<Verdict>(&json).unwrap(), deleted);
    assert_eq!(
        deleted.to_string(),
        "tampered: record 17 (byte 2345): deleted (2 records missing before it)"
    );

    let log = write_log(&call_entries(&events(10)), None, &mut Rng::new(9));
    let verdict = verify(&log.bytes, VerifyOptions::default());
    assert_eq!(
        serde_json::to_string(&verdict).unwrap(),
        format!(
            r#"{{"verdict":"unanchored","records":16,"head":"{}","vouched":0}}"#,
            log.anchor.head
        )
    );
    assert_eq!(
        verdict.to_string(),
        "unanchored: 16 records intact, 16 of them not vouched for by an anchor"
    );
    let torn = verify(&log.bytes[..log.bytes.len() - 1], VerifyOptions::default());
    assert_eq!(
        torn.to_string(),
        format!(
            "torn tail: 15 records intact, then an incomplete final frame of {} bytes at byte {}",
            log.frame(15).len() - 1,
            log.bounds[15]
        )
    );
}

#[test]
fn zero_bytes_after_the_last_frame_are_not_a_torn_tail() {
    let log = write_log(&call_entries(&events(10)), None, &mut Rng::new(10));
    let end = log.bytes.len() as u64;
    for zeros in 1..=12 {
        let mut bytes = log.bytes.clone();
        bytes.resize(bytes.len() + zeros, 0);
        let verdict = verify(&bytes, VerifyOptions::default());
        let expected = if zeros < 4 {
            Verdict::TornTail {
                offset: end,
                torn_bytes: zeros as u64,
                records_before: 16,
                head: Some(log.anchor.head),
                vouched: 0,
            }
        } else {
            Verdict::Tampered {
                record_index: 16,
                offset: end,
                kind: TamperKind::Modified,
            }
        };
        assert_eq!(verdict, expected, "{zeros} zero bytes");
    }
}
