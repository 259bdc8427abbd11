//! Resuming a log from its anchor (`LogWriter::resume_from_anchor`,
//! `Verifier::from_anchor`): only the anchored record and what follows it
//! are read; everything there is checked as in a full verification, and
//! what comes before is left to the anchor (and to `verify`).
#![allow(clippy::unwrap_used)]

mod audit_support;

use audit_support::{Log, Rng, call_entries, events, test_key, write_log};
use spillguard_core::audit::{
    Anchor, Key, LogEntry, LogWriter, ResumeError, TamperKind, Verdict, Verifier, VerifyOptions,
    verify,
};

/// 60 records; the anchor is the one taken after record 39.
const RECORDS: usize = 60;
const ANCHORED: usize = 40;

struct Fixture {
    log: Log,
    anchor: Anchor,
    key: Option<Key>,
}

impl Fixture {
    fn new(key: Option<Key>) -> Fixture {
        let entries = call_entries(&events(RECORDS)[..RECORDS]);
        let mut rng = Rng::new(7);
        let log = write_log(&entries, key.as_ref(), &mut rng);
        // The same writer's anchor after ANCHORED records: write that
        // prefix again with the same log id and nonces.
        let mut rng = Rng::new(7);
        let prefix = write_log(&entries[..ANCHORED], key.as_ref(), &mut rng);
        assert_eq!(prefix.bytes[..], log.bytes[..log.bounds[ANCHORED]]);
        Fixture {
            anchor: prefix.anchor,
            log,
            key,
        }
    }

    fn offset(&self) -> usize {
        self.anchor.offset.unwrap() as usize
    }

    fn resume(
        &self,
        bytes: &[u8],
    ) -> Result<(LogWriter, spillguard_core::audit::Resume), ResumeError> {
        LogWriter::resume_from_anchor(&self.anchor, &bytes[self.offset()..], self.key.as_ref())
    }

    fn verify(&self, bytes: &[u8]) -> Verdict {
        verify(
            bytes,
            VerifyOptions {
                anchor: Some(&self.anchor),
                key: self.key.as_ref(),
            },
        )
    }
}

#[test]
fn the_anchor_names_where_its_last_record_starts() {
    let f = Fixture::new(None);
    assert_eq!(f.anchor.records, ANCHORED as u64);
    assert_eq!(f.offset(), f.log.bounds[ANCHORED - 1]);
    assert_eq!(f.log.anchor.offset, Some(f.log.bounds[RECORDS - 1] as u64));
    let text = f.anchor.to_string();
    assert!(text.starts_with("sga2."), "{text}");
    assert!(text.ends_with(&format!(".{}", f.offset())), "{text}");
    assert_eq!(text.parse::<Anchor>().unwrap(), f.anchor);
}

#[test]
fn resuming_from_the_anchor_reads_only_what_follows_it_and_agrees_with_a_full_resume() {
    for key in [None, Some(test_key())] {
        let f = Fixture::new(key);
        let suffix = &f.log.bytes[f.offset()..];
        assert_eq!(suffix.len(), f.log.bytes.len() - f.log.bounds[ANCHORED - 1]);
        let (fast, resume) = f.resume(&f.log.bytes).unwrap();
        let (full, full_resume) = LogWriter::resume(&f.log.bytes, f.key.as_ref()).unwrap();
        assert_eq!(resume, full_resume);
        assert_eq!(resume.records, RECORDS as u64);
        assert_eq!(resume.valid_len, f.log.bytes.len() as u64);
        assert_eq!(resume.torn, None);
        assert_eq!(fast.anchor(), full.anchor());
        assert_eq!(fast.anchor(), f.log.anchor);
        assert_eq!(fast.len(), f.log.bytes.len() as u64);
    }
}

#[test]
fn a_byte_changed_before_the_anchor_is_not_read_but_full_verification_finds_it() {
    let f = Fixture::new(None);
    let mut bytes = f.log.bytes.clone();
    let at = f.log.bounds[10] + 20;
    bytes[at] ^= 0x01;
    let (_, resume) = f.resume(&bytes).unwrap();
    assert_eq!(resume.records, RECORDS as u64);
    assert_eq!(
        f.verify(&bytes),
        Verdict::Tampered {
            record_index: 10,
            offset: f.log.bounds[10] as u64,
            kind: TamperKind::Modified,
        }
    );
}

#[test]
fn a_byte_changed_in_or_after_the_anchored_record_is_refused() {
    for key in [None, Some(test_key())] {
        let f = Fixture::new(key);
        for record in [ANCHORED - 1, ANCHORED, RECORDS - 1] {
            let mut bytes = f.log.bytes.clone();
            bytes[f.log.bounds[record] + 30] ^= 0x80;
            let tampered = Verdict::Tampered {
                record_index: record as u64,
                offset: f.log.bounds[record] as u64,
                kind: TamperKind::Modified,
            };
            assert_eq!(
                f.resume(&bytes).unwrap_err(),
                ResumeError::Rejected(tampered.clone()),
                "record {record}"
            );
            assert_eq!(f.verify(&bytes), tampered, "record {record}");
        }
    }
}

#[test]
fn a_log_shorter_than_its_anchor_is_refused() {
    let f = Fixture::new(None);
    let truncated = TamperKind::Truncated {
        anchored: ANCHORED as u64,
    };
    // Cut inside the anchored record, at its start, and before it.
    for end in [f.offset() + 50, f.offset(), f.log.bounds[20]] {
        let bytes = &f.log.bytes[..end];
        let suffix = bytes.get(f.offset()..).unwrap_or(&[]);
        let verdict = LogWriter::resume_from_anchor(&f.anchor, suffix, None).unwrap_err();
        let ResumeError::Rejected(Verdict::Tampered { kind, .. }) = verdict else {
            panic!("end {end}: {verdict:?}");
        };
        assert_eq!(kind, truncated, "end {end}");
    }
}

#[test]
fn an_anchor_pointing_at_another_record_is_refused() {
    let f = Fixture::new(None);
    // Its offset moved to record 5: the frame found there is not record 39.
    let moved = Anchor {
        offset: Some(f.log.bounds[5] as u64),
        ..f.anchor.clone()
    };
    let suffix = &f.log.bytes[f.log.bounds[5]..];
    assert_eq!(
        LogWriter::resume_from_anchor(&moved, suffix, None).unwrap_err(),
        ResumeError::Rejected(Verdict::Tampered {
            record_index: (ANCHORED - 1) as u64,
            offset: f.log.bounds[5] as u64,
            kind: TamperKind::Inserted,
        })
    );
    // Its head changed: the record at the offset is not the one anchored.
    let rewritten = Anchor {
        head: f.log.anchor.head,
        ..f.anchor.clone()
    };
    assert_eq!(
        f.resume_with(&rewritten),
        Err(ResumeError::Rejected(Verdict::Tampered {
            record_index: (ANCHORED - 1) as u64,
            offset: f.offset() as u64,
            kind: TamperKind::Rewritten,
        }))
    );
}

impl Fixture {
    fn resume_with(&self, anchor: &Anchor) -> Result<spillguard_core::audit::Resume, ResumeError> {
        LogWriter::resume_from_anchor(anchor, &self.log.bytes[self.offset()..], self.key.as_ref())
            .map(|(_, resume)| resume)
    }
}

#[test]
fn a_torn_tail_after_the_anchor_is_recovered() {
    for key in [None, Some(test_key())] {
        let f = Fixture::new(key);
        let last = f.log.bounds[RECORDS - 1];
        let bytes = &f.log.bytes[..last + 33];
        let (mut writer, resume) = f.resume(bytes).unwrap();
        assert_eq!(resume.records, (RECORDS - 1) as u64);
        assert_eq!(resume.valid_len, last as u64);
        let torn = resume.torn.unwrap();
        assert_eq!((torn.offset, torn.dropped_bytes), (last as u64, 33));

        let mut continued = bytes[..last].to_vec();
        let nonce = f.key.as_ref().map(|_| [0xee; 24]);
        continued.extend(writer.append_recovery(nonce).unwrap());
        let anchor = writer.anchor();
        assert_eq!(anchor.offset, Some(last as u64));
        assert_eq!(writer.len(), continued.len() as u64);
        let options = VerifyOptions {
            anchor: Some(&anchor),
            key: f.key.as_ref(),
        };
        assert_eq!(
            verify(&continued, options),
            Verdict::Ok {
                records: RECORDS as u64,
                head: anchor.head
            }
        );
    }
}

#[test]
fn a_sealed_log_resumes_from_its_anchor_only_with_a_mac_made_by_the_key() {
    let f = Fixture::new(Some(test_key()));
    let key = test_key();
    assert_eq!(f.anchor.mac_matches(&key), Some(true));
    let unmaced = Anchor {
        mac: None,
        ..f.anchor.clone()
    };
    assert_eq!(f.resume_with(&unmaced), Err(ResumeError::UnusableAnchor));
    // Its offset changed after the MAC was made.
    let altered = Anchor {
        offset: Some(f.log.bounds[ANCHORED - 2] as u64),
        ..f.anchor.clone()
    };
    assert_eq!(
        f.resume_with(&altered),
        Err(ResumeError::Rejected(Verdict::BadAnchor))
    );
    let other = Key::from_bytes([9; 32]);
    assert_eq!(
        LogWriter::resume_from_anchor(&f.anchor, &f.log.bytes[f.offset()..], Some(&other))
            .map(|(_, r)| r),
        Err(ResumeError::Rejected(Verdict::WrongKey {
            log_key: key.id(),
            given_key: other.id(),
        }))
    );
    assert_eq!(
        LogWriter::resume_from_anchor(&f.anchor, &f.log.bytes[f.offset()..], None).map(|(_, r)| r),
        Err(ResumeError::KeyRequired)
    );
}

#[test]
fn an_anchor_without_offset_still_verifies_but_cannot_start_a_resume() {
    let key = test_key();
    let f = Fixture::new(Some(key.clone()));
    // The format-1 form: no offset, MAC over the 60-byte message.
    let v1 = Anchor::new(f.anchor.log_id, f.anchor.records, f.anchor.head).with_mac(&key);
    let text = v1.to_string();
    assert!(text.starts_with("sga1."), "{text}");
    assert_eq!(text.len(), 187);
    assert_eq!(text.parse::<Anchor>().unwrap(), v1);
    assert_eq!(v1.mac_matches(&key), Some(true));
    let prefix = &f.log.bytes[..f.log.bounds[ANCHORED]];
    let options = VerifyOptions {
        anchor: Some(&v1),
        key: Some(&key),
    };
    assert_eq!(
        verify(prefix, options),
        Verdict::Ok {
            records: ANCHORED as u64,
            head: v1.head
        }
    );
    assert_eq!(f.resume_with(&v1), Err(ResumeError::UnusableAnchor));
    assert!(Verifier::from_anchor(&v1, Some(&key)).is_none());
    // An anchor of an empty log names no record to start from.
    let empty = Anchor::new(f.anchor.log_id, 0, f.anchor.head).at_offset(0);
    assert!(Verifier::from_anchor(&empty, None).is_none());
}

#[test]
fn the_verdict_from_an_anchor_does_not_depend_on_the_chunking() {
    let f = Fixture::new(None);
    let mut bytes = f.log.bytes.clone();
    bytes.extend(
        LogWriter::resume(&f.log.bytes, None)
            .unwrap()
            .0
            .append(&LogEntry::Opened { writer: "x".into() }, None)
            .unwrap(),
    );
    let suffix = &bytes[f.offset()..];
    let mut expected = None;
    for size in [1, 7, 64, 1000, suffix.len()] {
        let mut verifier = Verifier::from_anchor(&f.anchor, None).unwrap();
        let mut indices = Vec::new();
        for chunk in suffix.chunks(size) {
            verifier.handle_bytes(chunk);
            while let Some(record) = verifier.poll_record() {
                indices.push((record.index, record.offset));
            }
        }
        assert_eq!(indices.len(), RECORDS + 1 - (ANCHORED - 1), "size {size}");
        assert_eq!(indices[0], ((ANCHORED - 1) as u64, f.offset() as u64));
        let verdict = verifier.finish();
        assert_eq!(
            verdict,
            Verdict::Unanchored {
                records: (RECORDS + 1) as u64,
                head: Some(verify_head(&bytes)),
                vouched: ANCHORED as u64,
            }
        );
        assert_eq!(expected.get_or_insert(verdict.clone()), &verdict);
    }
}

fn verify_head(bytes: &[u8]) -> spillguard_core::audit::ChainHash {
    match verify(bytes, VerifyOptions::default()) {
        Verdict::Unanchored {
            head: Some(head), ..
        } => head,
        other => panic!("{other:?}"),
    }
}
