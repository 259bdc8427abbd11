//! The audit frame decoder and `Verifier`, on any bytes in any chunking:
//! the verdict and the records do not depend on the chunking; a log that
//! `LogWriter::resume` accepts resumes the same from its own anchor
//! (`LogWriter::resume_from_anchor`, reading only the anchored record and
//! after), and can be continued into a log that verifies.
//!
//! Input: a flags byte (bit 0: verify with the seed corpus's key; bit 1:
//! also check against the anchor the resumed writer gives), a chunking
//! plan (see `common`), then the log's bytes.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use spillguard_core::audit::{
    LogEntry, LogWriter, Verdict, Verifier, VerifyOptions, verify, verify_and_read,
};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (plan, log) = common::split_plan(rest);
    let key = common::seed_key();
    let key = (flags & 1 == 1).then_some(&key);
    let options = VerifyOptions { anchor: None, key };

    // Whole, in chunks, and with the records kept: one verdict.
    let verdict = verify(log, options);
    let (read_verdict, records) = verify_and_read(log, options);
    assert_eq!(read_verdict, verdict);
    let mut verifier = Verifier::new(options);
    let mut streamed = Vec::new();
    for chunk in common::chunks(log, plan) {
        verifier.handle_bytes(chunk);
        while let Some(record) = verifier.poll_record() {
            streamed.push(record);
        }
    }
    assert_eq!(verifier.records(), records.len() as u64);
    assert_eq!(verifier.finish(), verdict);
    assert_eq!(streamed, records);
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record.index, i as u64);
        assert!(record.offset < log.len() as u64);
    }
    let _ = verdict.to_string();

    // A log the writer resumes is continued into one that verifies.
    let Ok((mut writer, resume)) = LogWriter::resume(log, key) else {
        return;
    };
    assert!(resume.valid_len <= log.len() as u64);
    assert_eq!(resume.records, records.len() as u64);
    if let Some(torn) = resume.torn {
        assert_eq!(torn.offset, resume.valid_len);
        assert_eq!(torn.offset + torn.dropped_bytes, log.len() as u64);
    } else {
        assert_eq!(resume.valid_len, log.len() as u64);
    }
    // Resuming from the writer's own anchor reads only its last record and
    // what follows, and finds the same.
    let own = writer.anchor();
    if let Some(offset) = own.offset {
        let suffix = &log[offset as usize..];
        let (fast, fast_resume) = LogWriter::resume_from_anchor(&own, suffix, key)
            .expect("a log that resumes resumes from its own anchor");
        assert_eq!(fast_resume, resume);
        assert_eq!(fast.anchor(), own);
        assert_eq!(fast.len(), writer.len());
    }
    if flags & 2 != 0 {
        let anchor = writer.anchor();
        let intact = &log[..resume.valid_len as usize];
        let anchored = VerifyOptions {
            anchor: Some(&anchor),
            key,
        };
        assert_eq!(
            verify(intact, anchored),
            Verdict::Ok {
                records: resume.records,
                head: anchor.head
            }
        );
    }
    let mut continued = log[..resume.valid_len as usize].to_vec();
    let mut nonces = (1u8..).map(|n| key.map(|_| [n; 24]));
    if resume.torn.is_some() {
        let frame = writer
            .append_recovery(nonces.next().flatten())
            .expect("the recovery frame builds");
        continued.extend(frame);
    }
    let entry = LogEntry::Opened {
        writer: "fuzz".into(),
    };
    let frame = writer
        .append(&entry, nonces.next().flatten())
        .expect("an entry appends");
    continued.extend(frame);
    let anchor = writer.anchor();
    assert_eq!(
        verify(
            &continued,
            VerifyOptions {
                anchor: Some(&anchor),
                key
            }
        ),
        Verdict::Ok {
            records: writer.records(),
            head: writer.head()
        }
    );
});
