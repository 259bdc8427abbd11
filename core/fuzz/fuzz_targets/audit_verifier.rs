//! The audit frame decoder and `Verifier`, on any bytes in any chunking:
//! the verdict and the records do not depend on the chunking; a log that
//! `LogWriter::resume` accepts resumes the same from its own anchor
//! (`LogWriter::resume_from_anchor`, reading only the anchored record and
//! after), and can be continued into a log that verifies.
//!
//! Input: a flags byte (bit 0: verify with the seed corpus's key; bit 1:
//! also check against the anchor the resumed writer gives; bit 2: the
//! data describes a log instead of being one, see `rearranged_log`), a
//! chunking plan (see `common`), then the data.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use spillguard_core::audit::{
    Key, LogEntry, LogId, LogWriter, Verdict, Verifier, VerifyOptions, verify, verify_and_read,
};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (plan, data) = common::split_plan(rest);
    let key = common::seed_key();
    let key = (flags & 1 == 1).then_some(&key);
    let built;
    let log = if flags & 4 != 0 {
        built = rearranged_log(data, key);
        &built[..]
    } else {
        data
    };
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

/// A log whose frames are all well-formed, rearranged as `data` says, so
/// that the verifier meets intact frames out of place (deleted, repeated,
/// moved, cut) and not only broken hashes. The first byte gives the
/// number of records (1 to 16, sealed with `key` if given); then each pair
/// of bytes is one edit: remove a frame, repeat one elsewhere, swap two,
/// or cut the last frame short.
fn rearranged_log(data: &[u8], key: Option<&Key>) -> Vec<u8> {
    let Some((&count, edits)) = data.split_first() else {
        return Vec::new();
    };
    let mut writer = LogWriter::create(LogId([0x42; 16]), key);
    let mut frames: Vec<Vec<u8>> = (0..=count % 16)
        .filter_map(|i| {
            let entry = LogEntry::Opened {
                writer: format!("w{i}"),
            };
            writer.append(&entry, key.map(|_| [i + 1; 24])).ok()
        })
        .collect();
    for edit in edits.chunks_exact(2) {
        let (op, arg) = (edit[0], usize::from(edit[1]));
        let len = frames.len();
        if len == 0 {
            break;
        }
        match op % 4 {
            0 => {
                frames.remove(arg % len);
            }
            1 => {
                let copy = frames[arg % len].clone();
                frames.insert((arg / 16) % (len + 1), copy);
            }
            2 => frames.swap(arg % len, (arg / 16) % len),
            _ => {
                if let Some(last) = frames.last_mut() {
                    last.truncate(arg % last.len().max(1));
                }
            }
        }
    }
    frames.concat()
}
