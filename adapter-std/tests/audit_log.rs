//! The hash-chained file sink: crash recovery at every byte of the last
//! record, refusal of tampered logs and wrong keys, exact fsync counts per
//! policy, concurrent writers, the anchor file, and a host that fails
//! closed when the log cannot be written.
#![allow(clippy::unwrap_used)]

mod support;

use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use spillguard_std::proto::audit::note::{Checkpoint, SignerKey};
use spillguard_std::proto::audit::tlog::{self, TreeBuilder};
use spillguard_std::proto::audit::{
    Anchor, Key, LogEntry, Record, TamperKind, Verdict, VerifyOptions, verify, verify_and_read,
};
use spillguard_std::proto::{AuditEvent, AuditKind, Config, State};
use spillguard_std::{
    AuditSink, ChainedFileAudit, ChainedFileOptions, CheckpointOptions, FsyncPolicy, Host,
    HostOptions, KeySource, OpenFailure,
};
use support::{LocalTest, Recorder, temp_path};
support::local_test_for!(spillguard_std::CallBuilder<'_>);

/// The six events of one real call (`true`, no approval): the transition
/// to `validated`, the attempt, three transitions and the final record.
fn real_call_events() -> &'static [AuditEvent] {
    static EVENTS: OnceLock<Vec<AuditEvent>> = OnceLock::new();
    EVENTS.get_or_init(|| {
        let recorder = Arc::new(Recorder::default());
        let host = Host::new(
            Config::default(),
            HostOptions {
                audit: Some(recorder.clone()),
                ..HostOptions::default()
            },
        )
        .unwrap();
        let outcome = host.command("true").local_test("c_model").run();
        assert_eq!(outcome.record.state, State::Completed);
        let events = recorder.events.lock().unwrap().clone();
        assert_eq!(events.len(), 6);
        events
    })
}

/// The events of `calls` calls `c_0`, `c_1`, … one after the other.
fn events(calls: usize) -> Vec<AuditEvent> {
    (0..calls)
        .flat_map(|n| {
            real_call_events().iter().map(move |event| {
                let mut event = event.clone();
                event.call_id = format!("c_{n}");
                if let AuditKind::Final(record) = &mut event.kind {
                    record.call_id = event.call_id.clone();
                }
                event
            })
        })
        .collect()
}

/// A fresh path (nothing there) for this test process.
fn fresh(name: &str) -> PathBuf {
    let path = temp_path(name);
    let _ = std::fs::remove_file(&path);
    path
}

fn plain() -> ChainedFileOptions {
    ChainedFileOptions::default()
}

fn sealed(key: &Key) -> ChainedFileOptions {
    ChainedFileOptions {
        key: Some(key.clone()),
        ..ChainedFileOptions::default()
    }
}

fn read(path: &Path, key: Option<&Key>) -> (Verdict, Vec<Record>) {
    let bytes = std::fs::read(path).unwrap();
    verify_and_read(&bytes, VerifyOptions { anchor: None, key })
}

fn check(path: &Path, anchor: &Anchor, key: Option<&Key>) -> Verdict {
    let bytes = std::fs::read(path).unwrap();
    verify(
        &bytes,
        VerifyOptions {
            anchor: Some(anchor),
            key,
        },
    )
}

fn ok(anchor: &Anchor) -> Verdict {
    Verdict::Ok {
        records: anchor.records,
        head: anchor.head,
    }
}

/// Opens a log, writes `events`, and returns the file's bytes, the length
/// before the last event and the anchor at that point.
fn log_with(path: &Path, options: ChainedFileOptions, events: &[AuditEvent]) -> (Vec<u8>, u64) {
    let log = ChainedFileAudit::open(path, options).unwrap();
    let (last, before) = events.split_last().unwrap();
    for event in before {
        log.write(event).unwrap();
    }
    let committed = std::fs::metadata(path).unwrap().len();
    log.write(last).unwrap();
    drop(log);
    (std::fs::read(path).unwrap(), committed)
}

/// A crash at every byte of the last record: reopening keeps exactly the
/// records before it, truncates the torn bytes, records the recovery, and
/// the log continues: 100 more appends verify against the new anchor.
fn crash_sweep(name: &str, key: Option<&Key>, last_is_final: bool) {
    let options = || match key {
        Some(key) => sealed(key),
        None => plain(),
    };
    let path = fresh(name);
    let mut written = events(3);
    if !last_is_final {
        written.pop();
    }
    let (full, committed) = log_with(&path, options(), &written);
    let committed_records = written.len() as u64; // the `opened` entry, less the last event
    let more = events(17);
    let more = &more[..100];
    let mut cuts = 0;
    for cut in committed + 1..full.len() as u64 {
        std::fs::write(&path, &full[..cut as usize]).unwrap();
        let log = ChainedFileAudit::open(&path, options()).unwrap();
        let opened = log.opened();
        assert!(!opened.created);
        assert_eq!(opened.records_found, committed_records, "cut {cut}");
        let torn = opened.recovered.unwrap();
        assert_eq!(
            (torn.offset, torn.dropped_bytes),
            (committed, cut - committed)
        );
        for event in more {
            log.write(event).unwrap();
        }
        let anchor = log.anchor();
        drop(log);

        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..committed as usize], &full[..committed as usize]);
        // committed records, `recovered`, `opened`, 100 events.
        assert_eq!(anchor.records, committed_records + 2 + 100);
        assert_eq!(check(&path, &anchor, key), ok(&anchor), "cut {cut}");
        let (_, records) = read(&path, key);
        assert_eq!(
            records[committed_records as usize].entry,
            Some(LogEntry::Recovered {
                dropped_bytes: cut - committed,
                at_offset: committed,
            })
        );
        assert!(matches!(
            &records[committed_records as usize + 1].entry,
            Some(LogEntry::Opened { .. })
        ));
        cuts += 1;
    }
    assert_eq!(cuts, full.len() as u64 - committed - 1);
    println!("{name}: {cuts} cut points, each recovered and continued by 100 appends");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_crash_at_every_byte_of_a_final_record_recovers_the_committed_prefix() {
    crash_sweep("sweep-final.log", None, true);
}

#[test]
fn a_crash_at_every_byte_of_a_sealed_transition_recovers_the_committed_prefix() {
    crash_sweep(
        "sweep-sealed.log",
        Some(&Key::from_bytes([0x5a; 32])),
        false,
    );
}

#[test]
fn a_torn_first_record_starts_a_new_log_that_says_so() {
    let path = fresh("torn-first.log");
    let (full, _) = log_with(&path, plain(), &events(1)[..1]);
    let first_frame = read(&path, None).1[1].offset; // the `opened` entry is record 0
    std::fs::write(&path, &full[..first_frame as usize - 5]).unwrap();
    let log = ChainedFileAudit::open(&path, plain()).unwrap();
    assert!(log.opened().created);
    assert_eq!(log.opened().records_found, 0);
    let anchor = log.anchor();
    drop(log);
    assert_eq!(check(&path, &anchor, None), ok(&anchor));
    let (_, records) = read(&path, None);
    assert_eq!(
        records[0].entry,
        Some(LogEntry::Recovered {
            dropped_bytes: first_frame - 5,
            at_offset: 0,
        })
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_tampered_log_is_refused_and_left_as_it_is() {
    let path = fresh("tampered.log");
    let (full, _) = log_with(&path, plain(), &events(2));
    let (_, records) = read(&path, None);
    assert_eq!(records.len(), 13);
    for (index, record) in records.iter().enumerate() {
        let mut bytes = full.clone();
        bytes[record.offset as usize + 40] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let error = ChainedFileAudit::open(&path, plain()).unwrap_err();
        let expected = Verdict::Tampered {
            record_index: index as u64,
            offset: record.offset,
            kind: TamperKind::Modified,
        };
        assert!(
            matches!(&error.failure, OpenFailure::Rejected(v) if *v == expected),
            "{error}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "audit log {}: refused, it failed verification: tampered: record {index} \
                 (byte {}): modified (its bytes do not match its hash)",
                path.display(),
                record.offset
            )
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "left as it was");
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_log_cut_short_of_its_anchor_file_is_refused() {
    let path = fresh("anchored.log");
    let anchor_path = fresh("anchored.anchor");
    let options = || ChainedFileOptions {
        anchor_file: Some(anchor_path.clone()),
        ..ChainedFileOptions::default()
    };
    let log = ChainedFileAudit::open(&path, options()).unwrap();
    for event in events(2) {
        log.write(&event).unwrap();
    }
    let anchor = log.anchor();
    drop(log);
    // Written after each final record: it is the log's anchor.
    let text = std::fs::read_to_string(&anchor_path).unwrap();
    assert_eq!(text, format!("{anchor}\n"));
    assert_eq!(check(&path, &text.parse().unwrap(), None), ok(&anchor));

    // A clean cut before the last record: no torn frame, but the anchor
    // vouches for one more record.
    let (_, records) = read(&path, None);
    let full = std::fs::read(&path).unwrap();
    let last = records.last().unwrap().offset as usize;
    std::fs::write(&path, &full[..last]).unwrap();
    let error = ChainedFileAudit::open(&path, options()).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "audit log {}: refused, it failed verification: tampered: record 12 (byte \
             {last}): missing (the anchor vouches for 13 records)",
            path.display()
        )
    );
    // Without the anchor file, the cut is undetectable from the file.
    let log = ChainedFileAudit::open(&path, plain()).unwrap();
    assert_eq!(log.opened().records_found, 12);
    drop(log);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&anchor_path);
}

#[test]
fn sealed_logs_hold_no_clear_text_and_need_their_key() {
    let key_path = fresh("sealed.key");
    std::fs::write(&key_path, format!("{}\n", "7e".repeat(32))).unwrap();
    let key = KeySource::File(key_path.clone()).load().unwrap();
    let path = fresh("sealed.log");
    let log = ChainedFileAudit::open(&path, sealed(&key)).unwrap();
    for event in events(2) {
        log.write(&event).unwrap();
    }
    let anchor = log.anchor();
    drop(log);
    assert!(anchor.mac.is_some());
    assert_eq!(check(&path, &anchor, Some(&key)), ok(&anchor));
    let bytes = std::fs::read(&path).unwrap();
    for clear in [
        &b"c_1"[..],
        b"localhost",
        b"local.test",
        b"s_test",
        b"spillguard-std",
    ] {
        assert!(
            !bytes.windows(clear.len()).any(|w| w == clear),
            "{:?} in clear",
            String::from_utf8_lossy(clear)
        );
    }

    let other = Key::from_bytes([0x7f; 32]);
    let error = ChainedFileAudit::open(&path, sealed(&other)).unwrap_err();
    assert!(matches!(
        error.failure,
        OpenFailure::WrongKey { log_key, given_key } if log_key == key.id() && given_key == other.id()
    ));
    assert_eq!(
        error.to_string(),
        format!(
            "audit log {}: wrong key: the log is sealed with key {}, the key given is {}",
            path.display(),
            key.id(),
            other.id()
        )
    );
    let error = ChainedFileAudit::open(&path, plain()).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "audit log {}: the log is sealed and no key was given",
            path.display()
        )
    );
    // A plain log refuses a key rather than mixing sealed records in.
    let plain_path = fresh("plain.log");
    drop(ChainedFileAudit::open(&plain_path, plain()).unwrap());
    let error = ChainedFileAudit::open(&plain_path, sealed(&key)).unwrap_err();
    assert!(matches!(error.failure, OpenFailure::NotSealed));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "refusals write nothing"
    );

    std::fs::write(&key_path, "not a key\n").unwrap();
    let error = KeySource::File(key_path.clone()).load().unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "key file {}: a key is 64 hex digits (32 bytes)",
            key_path.display()
        )
    );
    let error = KeySource::Env("SPILLGUARD_TEST_NO_SUCH_KEY".into())
        .load()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "environment variable SPILLGUARD_TEST_NO_SUCH_KEY is not set"
    );
    for p in [&path, &plain_path, &key_path] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn fsyncs_follow_the_policy_exactly() {
    // Four calls: 24 events, of which 4 attempts and 4 final records.
    let written = events(4);
    let every = |n| FsyncPolicy::EveryNEvents(NonZeroU64::new(n).unwrap());
    // (policy, anchor file, syncs after the 24 events, after `sync()`).
    let cases = [
        (FsyncPolicy::EveryEvent, false, 1 + 24, 25),
        (every(5), false, 1 + 4, 6),
        (every(1), false, 1 + 24, 25),
        (every(25), false, 1, 2),
        (FsyncPolicy::OnFinal, false, 1 + 4, 5),
        (FsyncPolicy::OnAttemptAndFinal, false, 1 + 8, 9),
        (FsyncPolicy::default(), false, 1 + 8, 9),
        // An anchor file adds a sync before each anchor when the policy
        // left the final record unsynced: events 5, 6, 10, 12, 15, 18, 20, 24.
        (every(5), true, 1 + 8, 9),
        (FsyncPolicy::OnFinal, true, 1 + 4, 5),
    ];
    for (policy, anchored, expected, after_sync) in cases {
        let path = fresh("fsync.log");
        let anchor_path = fresh("fsync.anchor");
        let log = ChainedFileAudit::open(
            &path,
            ChainedFileOptions {
                fsync: policy,
                anchor_file: anchored.then(|| anchor_path.clone()),
                ..ChainedFileOptions::default()
            },
        )
        .unwrap();
        assert_eq!(log.fsyncs(), 1, "opening syncs once");
        for event in &written {
            log.write(event).unwrap();
        }
        assert_eq!(log.fsyncs(), expected, "{policy:?}, anchor file {anchored}");
        log.sync().unwrap();
        assert_eq!(
            log.fsyncs(),
            after_sync,
            "{policy:?}: sync() syncs the rest"
        );
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&anchor_path);
    }
}

#[test]
fn concurrent_writers_never_interleave_frames() {
    let path = fresh("concurrent.log");
    let log = Arc::new(
        ChainedFileAudit::open(
            &path,
            ChainedFileOptions {
                fsync: FsyncPolicy::OnFinal,
                ..ChainedFileOptions::default()
            },
        )
        .unwrap(),
    );
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                for (n, mut event) in events(40).into_iter().enumerate() {
                    event.call_id = format!("t{t}_{}", n / 6);
                    event.offset_us = n as u64;
                    log.write(&event).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let anchor = log.anchor();
    assert_eq!(anchor.records, 1 + 8 * 240);
    assert_eq!(check(&path, &anchor, None), ok(&anchor));
    let (_, records) = read(&path, None);
    for t in 0..8 {
        let offsets: Vec<u64> = records
            .iter()
            .filter_map(|r| match &r.entry {
                Some(LogEntry::Call(e)) if e.call_id.starts_with(&format!("t{t}_")) => {
                    Some(e.offset_us)
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            offsets,
            (0..240).collect::<Vec<u64>>(),
            "thread {t} in order"
        );
    }
    let _ = std::fs::remove_file(&path);
}

/// The call events of `path`'s log, as `(call id, offset)` in file order;
/// `Recovered` entries as `("recovered", dropped bytes)`.
fn entries(path: &Path, key: Option<&Key>) -> Vec<(String, u64)> {
    read(path, key)
        .1
        .iter()
        .filter_map(|r| match &r.entry {
            Some(LogEntry::Call(e)) => Some((e.call_id.clone(), e.offset_us)),
            Some(LogEntry::Recovered { dropped_bytes, .. }) => {
                Some(("recovered".to_owned(), *dropped_bytes))
            }
            _ => None,
        })
        .collect()
}

/// An event of call `id` at `offset`.
fn event_of(id: &str, offset: u64) -> AuditEvent {
    let mut event = real_call_events()[0].clone();
    event.call_id = id.to_owned();
    event.offset_us = offset;
    event
}

#[test]
fn writers_on_one_file_take_turns_and_keep_one_chain() {
    for key in [None, Some(Key::from_bytes([7; 32]))] {
        let path = fresh("turns.log");
        let options = || ChainedFileOptions {
            key: key.clone(),
            ..ChainedFileOptions::default()
        };
        // Two writers, as two processes would be: each its own open file.
        let a = ChainedFileAudit::open(&path, options()).unwrap();
        let b = ChainedFileAudit::open(&path, options()).unwrap();
        assert_eq!(b.opened().records_found, 1);
        for n in 0..5 {
            a.write(&event_of("a", n)).unwrap();
            b.write(&event_of("b", n)).unwrap();
            b.write(&event_of("b", n + 100)).unwrap();
        }
        // Each writer's view of the chain is the file's: 2 `Opened`
        // entries and 15 events, whichever wrote last.
        assert_eq!((a.records(), b.records()), (15, 17));
        a.write(&event_of("a", 5)).unwrap();
        assert_eq!(a.records(), 18);
        let anchor = a.anchor();
        assert_eq!(check(&path, &anchor, key.as_ref()), ok(&anchor));
        let expected: Vec<(String, u64)> = (0..5)
            .flat_map(|n| [("a", n), ("b", n), ("b", n + 100)])
            .chain([("a", 5)])
            .map(|(id, n)| (id.to_owned(), n))
            .collect();
        assert_eq!(entries(&path, key.as_ref()), expected);
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn a_frame_torn_by_a_writer_that_died_is_recovered_by_the_next() {
    let path = fresh("turns-torn.log");
    let a = ChainedFileAudit::open(&path, plain()).unwrap();
    a.write(&event_of("a", 1)).unwrap();
    a.write(&event_of("a", 2)).unwrap();
    // Another writer died halfway through an append: the first 20 bytes
    // of its frame are in the file (made here by cutting its whole frame).
    let b = ChainedFileAudit::open(&path, plain()).unwrap();
    let before = std::fs::metadata(&path).unwrap().len();
    b.write(&event_of("b", 1)).unwrap();
    drop(b);
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(after - before > 20);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(before + 20)
        .unwrap();
    a.write(&event_of("a", 3)).unwrap();
    let anchor = a.anchor();
    assert_eq!(check(&path, &anchor, None), ok(&anchor));
    assert_eq!(
        entries(&path, None),
        [
            ("a".to_owned(), 1),
            ("a".to_owned(), 2),
            ("recovered".to_owned(), 20),
            ("a".to_owned(), 3)
        ]
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_writer_that_cannot_get_its_turn_gives_up_and_says_so() {
    use rustix::fs::{FlockOperation, flock};
    use std::time::{Duration, Instant};
    let path = fresh("turns-held.log");
    let wait = Duration::from_millis(200);
    let options = || ChainedFileOptions {
        lock_wait: wait,
        ..ChainedFileOptions::default()
    };
    let log = ChainedFileAudit::open(&path, options()).unwrap();
    // Someone holds the lock and does not let go.
    let holder = std::fs::File::open(&path).unwrap();
    flock(&holder, FlockOperation::LockExclusive).unwrap();
    let started = Instant::now();
    let error = ChainedFileAudit::open(&path, options()).unwrap_err();
    assert!(started.elapsed() >= wait, "{:?}", started.elapsed());
    assert!(matches!(error.failure, OpenFailure::InUse { waited } if waited == wait));
    assert_eq!(
        error.to_string(),
        format!(
            "audit log {}: in use by another writer: gave up after waiting 200 ms for its lock",
            path.display()
        )
    );
    let error = log.write(&event_of("a", 1)).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::WouldBlock);
    assert_eq!(
        error.to_string(),
        format!(
            "audit log {}: gave up after waiting 200 ms for its lock (another writer holds it)",
            path.display()
        )
    );
    // Once it is let go, the writer goes on: nothing was written meanwhile.
    flock(&holder, FlockOperation::Unlock).unwrap();
    log.write(&event_of("a", 2)).unwrap();
    let anchor = log.anchor();
    assert_eq!(check(&path, &anchor, None), ok(&anchor));
    assert_eq!(entries(&path, None), [("a".to_owned(), 2)]);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_path_that_is_not_a_regular_file_is_refused_at_open() {
    let fifo = fresh("not-a-log.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let dir = temp_path("not-a-log.d");
    std::fs::create_dir_all(&dir).unwrap();
    for (path, kind) in [
        (Path::new("/dev/zero"), "a character device"),
        (Path::new("/dev/null"), "a character device"),
        (fifo.as_path(), "a FIFO"),
        (dir.as_path(), "a directory"),
    ] {
        let error = ChainedFileAudit::open(path, plain()).unwrap_err();
        assert!(
            matches!(error.failure, OpenFailure::NotAFile(k) if k == kind),
            "{error}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "audit log {}: not a regular file ({kind}): an audit log is a regular file",
                path.display()
            )
        );
    }
    // The anchor file too.
    let log = fresh("anchor-fifo.log");
    let error = ChainedFileAudit::open(
        &log,
        ChainedFileOptions {
            anchor_file: Some(fifo.clone()),
            ..ChainedFileOptions::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "audit log {}: bad anchor file: {} is a FIFO, not a regular file",
            log.display(),
            fifo.display()
        )
    );
    let _ = std::fs::remove_file(&fifo);
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_dir(&dir);
}

// Reopening from the anchor file: only the anchored record and what
// follows it are read, whatever the log's length. `OpenedLog::verified_from`
// says where reading started; full verification still sees everything.

/// A log of 20 calls kept with an anchor file (121 records: the `Opened`
/// entry and 6 per call; the anchor file vouches for all of them), then
/// one transition after the anchor. Returns the log, the anchor file, the
/// anchor and the offset of each record.
fn anchored_log(name: &str, key: Option<&Key>) -> (PathBuf, PathBuf, Anchor, Vec<u64>) {
    let path = fresh(&format!("{name}.log"));
    let anchor_path = fresh(&format!("{name}.anchor"));
    let options = ChainedFileOptions {
        key: key.cloned(),
        anchor_file: Some(anchor_path.clone()),
        ..ChainedFileOptions::default()
    };
    let log = ChainedFileAudit::open(&path, options).unwrap();
    for event in events(20) {
        log.write(&event).unwrap();
    }
    let anchor = log.anchor();
    log.write(&events(21)[120]).unwrap();
    drop(log);
    assert_eq!(
        std::fs::read_to_string(&anchor_path).unwrap(),
        format!("{anchor}\n")
    );
    let (_, records) = read(&path, key);
    assert_eq!(records.len(), 122);
    let offsets = records.iter().map(|r| r.offset).collect();
    (path, anchor_path, anchor, offsets)
}

fn with_anchor_file(anchor_path: &Path, key: Option<&Key>) -> ChainedFileOptions {
    ChainedFileOptions {
        key: key.cloned(),
        anchor_file: Some(anchor_path.to_path_buf()),
        ..ChainedFileOptions::default()
    }
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn reopening_with_an_anchor_file_reads_only_from_the_anchored_record() {
    let key = Key::from_bytes([0x3c; 32]);
    for key in [None, Some(&key)] {
        let (path, anchor_path, anchor, offsets) = anchored_log("reopen-anchored", key);
        assert_eq!(anchor.records, 121);
        assert_eq!(anchor.offset, Some(offsets[120]));
        let log = ChainedFileAudit::open(&path, with_anchor_file(&anchor_path, key)).unwrap();
        let opened = log.opened();
        assert_eq!(opened.verified_from, offsets[120]);
        assert_eq!(opened.records_found, 122);
        assert_eq!((opened.created, opened.recovered), (false, None));
        // Its own `Opened` entry follows; the whole file verifies.
        let now = log.anchor();
        assert_eq!(now.records, 123);
        drop(log);
        assert_eq!(check(&path, &now, key), ok(&now));
        // Without the anchor file the whole file is read.
        let log = ChainedFileAudit::open(
            &path,
            ChainedFileOptions {
                key: key.cloned(),
                ..ChainedFileOptions::default()
            },
        )
        .unwrap();
        assert_eq!(log.opened().verified_from, 0);
        assert_eq!(log.opened().records_found, 123);
        drop(log);
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&anchor_path);
    }
}

#[test]
fn a_change_before_the_anchored_record_is_left_to_full_verification() {
    let (path, anchor_path, anchor, offsets) = anchored_log("reopen-before", None);
    flip(&path, offsets[5] + 40);
    let log = ChainedFileAudit::open(&path, with_anchor_file(&anchor_path, None)).unwrap();
    assert_eq!(log.opened().verified_from, offsets[120]);
    assert_eq!(log.opened().records_found, 122);
    drop(log);
    // `audit verify` (full verification) finds it, with either anchor.
    let tampered = Verdict::Tampered {
        record_index: 5,
        offset: offsets[5],
        kind: TamperKind::Modified,
    };
    assert_eq!(check(&path, &anchor, None), tampered);
    let latest: Anchor = std::fs::read_to_string(&anchor_path)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(latest.records, 123);
    assert_eq!(check(&path, &latest, None), tampered);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&anchor_path);
}

#[test]
fn a_change_in_or_after_the_anchored_record_is_refused_at_open() {
    for (record, name) in [(120, "reopen-in"), (121, "reopen-after")] {
        let (path, anchor_path, _, offsets) = anchored_log(name, None);
        flip(&path, offsets[record] + 40);
        let before = std::fs::read(&path).unwrap();
        let error =
            ChainedFileAudit::open(&path, with_anchor_file(&anchor_path, None)).unwrap_err();
        let OpenFailure::Rejected(verdict) = &error.failure else {
            panic!("{error}");
        };
        assert_eq!(
            verdict,
            &Verdict::Tampered {
                record_index: record as u64,
                offset: offsets[record],
                kind: TamperKind::Modified,
            },
            "record {record}"
        );
        // Left as it was.
        assert_eq!(std::fs::read(&path).unwrap(), before);
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&anchor_path);
    }
}

#[test]
fn a_torn_tail_after_the_anchored_record_is_recovered_at_open() {
    let key = Key::from_bytes([0x3d; 32]);
    let (path, anchor_path, _, offsets) = anchored_log("reopen-torn", Some(&key));
    let len = std::fs::metadata(&path).unwrap().len();
    // A crash cut the last frame (the transition after the anchor) to 30 bytes.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..offsets[121] as usize + 30]).unwrap();
    let log = ChainedFileAudit::open(&path, with_anchor_file(&anchor_path, Some(&key))).unwrap();
    let opened = log.opened();
    assert_eq!(opened.verified_from, offsets[120]);
    assert_eq!(opened.records_found, 121);
    let torn = opened.recovered.unwrap();
    assert_eq!((torn.offset, torn.dropped_bytes), (offsets[121], 30));
    assert!(offsets[121] + 30 < len);
    let now = log.anchor();
    drop(log);
    // The `Recovered` entry, then the `Opened` one.
    assert_eq!(now.records, 123);
    assert_eq!(check(&path, &now, Some(&key)), ok(&now));
    let (_, records) = read(&path, Some(&key));
    assert_eq!(
        records[121].entry,
        Some(LogEntry::Recovered {
            dropped_bytes: 30,
            at_offset: offsets[121],
        })
    );
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&anchor_path);
}

#[test]
fn an_anchor_file_in_the_old_form_makes_open_verify_the_whole_file() {
    let (path, anchor_path, anchor, offsets) = anchored_log("reopen-sga1", None);
    let old = Anchor::new(anchor.log_id, anchor.records, anchor.head);
    assert!(old.to_string().starts_with("sga1."));
    std::fs::write(&anchor_path, format!("{old}\n")).unwrap();
    let log = ChainedFileAudit::open(&path, with_anchor_file(&anchor_path, None)).unwrap();
    assert_eq!(log.opened().verified_from, 0);
    assert_eq!(log.opened().records_found, 122);
    drop(log);
    // It is replaced by the new form.
    let text = std::fs::read_to_string(&anchor_path).unwrap();
    assert!(text.starts_with("sga2."), "{text}");

    // An anchor whose offset is wrong but whose log is sound: the whole
    // file is verified, and accepted.
    let log = ChainedFileAudit::open(&path, plain()).unwrap();
    let current = log.anchor();
    drop(log);
    let wrong = Anchor {
        offset: Some(offsets[3]),
        ..current
    };
    std::fs::write(&anchor_path, format!("{wrong}\n")).unwrap();
    let log = ChainedFileAudit::open(&path, with_anchor_file(&anchor_path, None)).unwrap();
    assert_eq!(log.opened().verified_from, 0);
    assert_eq!(log.opened().records_found, 124);
    drop(log);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&anchor_path);
}

/// The checkpoint of the whole file at `path` now, signed by `key`, as a
/// reader that hashes every record computes it.
fn checkpoint_of(path: &Path, key: &SignerKey) -> String {
    let bytes = std::fs::read(path).unwrap();
    let mut tree = TreeBuilder::default();
    tlog::record_leaves(&bytes).for_each(|leaf| tree.push(leaf));
    let (_, records) = read(path, None);
    assert_eq!(tree.size(), records.len() as u64);
    Checkpoint {
        origin: key.name().to_owned(),
        size: tree.size(),
        root: tree.root(),
    }
    .sign(key)
    .unwrap()
}

/// With a checkpoint kept, each final record leaves the checkpoint file
/// equal to the one computed from the whole file: with two writers taking
/// turns in one process, after a reopen that reads only what follows the
/// anchor (the tree file), after the tree file is lost, and after a crash
/// tore the last record (the recovery record is a leaf too).
#[test]
fn a_checkpoint_kept_as_the_log_grows_is_the_whole_files() {
    let path = fresh("checkpoint.log");
    let anchor = fresh("checkpoint.anchor");
    let file = fresh("checkpoint.note");
    let mut tree_file = file.clone().into_os_string();
    tree_file.push(".tree");
    let tree_file = PathBuf::from(tree_file);
    let _ = std::fs::remove_file(&tree_file);
    let key = SignerKey::from_seed("audit.example/lib", [3; 32]).unwrap();
    let options = || ChainedFileOptions {
        anchor_file: Some(anchor.clone()),
        checkpoint: Some(CheckpointOptions::new(key.clone(), &file)),
        ..ChainedFileOptions::default()
    };
    let kept = || std::fs::read_to_string(&file).unwrap();

    // Two writers, their calls interleaved event by event.
    let first = ChainedFileAudit::open(&path, options()).unwrap();
    let second = ChainedFileAudit::open(&path, options()).unwrap();
    // Nothing is signed before a final record; the tree file is kept.
    assert!(!file.exists());
    assert!(tree_file.exists());
    let (a, b) = (events(3), events(3));
    for (x, y) in a.iter().zip(&b) {
        first.write(x).unwrap();
        second.write(y).unwrap();
    }
    assert_eq!(kept(), checkpoint_of(&path, &key));
    let records = first.records().max(second.records());
    assert_eq!(kept().lines().nth(1), Some(records.to_string().as_str()));
    drop((first, second));

    // Reopened from the anchor and the tree file.
    let log = ChainedFileAudit::open(&path, options()).unwrap();
    assert!(log.opened().verified_from > 0);
    for event in events(2) {
        log.write(&event).unwrap();
    }
    assert_eq!(kept(), checkpoint_of(&path, &key));
    drop(log);

    // The tree file lost: the log's start is read again.
    std::fs::remove_file(&tree_file).unwrap();
    let log = ChainedFileAudit::open(&path, options()).unwrap();
    for event in events(1) {
        log.write(&event).unwrap();
    }
    assert_eq!(kept(), checkpoint_of(&path, &key));
    drop(log);

    // A tree file with the right anchor but roots and a note of its own
    // (another key's): not used; the log is read again.
    let text = std::fs::read_to_string(&tree_file).unwrap();
    let (head, _) = text.split_once("\n--\n").unwrap();
    let mut lines: Vec<&str> = head.lines().take(2).collect();
    let forged_root = "00".repeat(32);
    let roots = text.lines().skip(2).take_while(|l| *l != "--").count();
    lines.extend(std::iter::repeat_n(forged_root.as_str(), roots));
    let other = SignerKey::from_seed("audit.example/lib", [4; 32]).unwrap();
    let forged_note = Checkpoint {
        origin: other.name().to_owned(),
        size: 1,
        root: [0; 32],
    }
    .sign(&other)
    .unwrap();
    std::fs::write(
        &tree_file,
        format!("{}\n--\n{forged_note}", lines.join("\n")),
    )
    .unwrap();
    let log = ChainedFileAudit::open(&path, options()).unwrap();
    for event in events(1) {
        log.write(&event).unwrap();
    }
    assert_eq!(kept(), checkpoint_of(&path, &key));
    drop(log);

    // A record before the anchor changed, the tree file gone: the log is
    // refused as it is rebuilt, and nothing is written.
    std::fs::remove_file(&tree_file).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let clean = bytes.clone();
    bytes[60] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let refused = ChainedFileAudit::open(&path, options()).unwrap_err();
    assert!(
        matches!(refused.failure, OpenFailure::Rejected(_)),
        "{refused}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    std::fs::write(&path, &clean).unwrap();

    // A torn last record: cut, recorded, and hashed as the log now holds.
    let len = std::fs::metadata(&path).unwrap().len();
    let torn = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    torn.set_len(len - 5).unwrap();
    drop(torn);
    std::fs::remove_file(&anchor).unwrap();
    let log = ChainedFileAudit::open(&path, options()).unwrap();
    assert!(log.opened().recovered.is_some());
    for event in events(1) {
        log.write(&event).unwrap();
    }
    assert_eq!(kept(), checkpoint_of(&path, &key));
    let opened = Checkpoint::open(&kept(), &key.verifier()).unwrap();
    assert_eq!(opened.size, log.records());
}

/// The files a kept checkpoint writes are checked before the log is
/// created: one that is not a regular file, or holds something else (a
/// key, another key's checkpoint), refuses the opening, and nothing is
/// created, written or replaced; the same key's checkpoint and an empty
/// or torn file are its own.
#[test]
fn a_checkpoint_refuses_to_overwrite_what_is_not_its_own() {
    let key = SignerKey::from_seed("audit.example/lib", [4; 32]).unwrap();
    let other = SignerKey::from_seed("audit.example/other", [5; 32]).unwrap();
    let path = fresh("not-its-own.log");
    let open = |file: &Path| {
        ChainedFileAudit::open(
            &path,
            ChainedFileOptions {
                checkpoint: Some(CheckpointOptions::new(key.clone(), file)),
                ..ChainedFileOptions::default()
            },
        )
    };
    let with = |file: &Path, suffix: &str| {
        let mut name = file.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    let sign = |key: &SignerKey| {
        let checkpoint = Checkpoint {
            origin: key.name().to_owned(),
            size: 0,
            root: TreeBuilder::default().root(),
        };
        checkpoint.sign(key).unwrap()
    };
    let mkfifo = |path: &Path| {
        let _ = std::fs::remove_file(path);
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(made.success());
    };
    /// Puts what is not the checkpoint's own at or beside `file`.
    type Make<'a> = Box<dyn Fn(&Path) + 'a>;
    let cases: [(&str, Make<'_>, &str); 5] = [
        (
            "a verifier key",
            Box::new(|file| std::fs::write(file, key.verifier().to_text() + "\n").unwrap()),
            "a checkpoint signed by audit.example/lib",
        ),
        (
            "another key's checkpoint",
            Box::new(|file| std::fs::write(file, sign(&other)).unwrap()),
            "a checkpoint signed by audit.example/lib",
        ),
        (
            "a FIFO as the tree file",
            Box::new(|file| mkfifo(&with(file, ".tree"))),
            "a FIFO, not a regular file",
        ),
        (
            "a FIFO as the temporary file",
            Box::new(|file| mkfifo(&with(file, ".tmp"))),
            "a FIFO, not a regular file",
        ),
        (
            "a link as the checkpoint",
            Box::new(|file| std::os::unix::fs::symlink("/etc/hostname", file).unwrap()),
            "a symbolic link, not a regular file",
        ),
    ];
    for (what, make, why) in cases {
        let _ = std::fs::remove_file(&path);
        let file = fresh("refused.note");
        for stale in [with(&file, ".tree"), with(&file, ".tmp")] {
            let _ = std::fs::remove_file(stale);
        }
        make(&file);
        let refused = open(&file).expect_err(what);
        let OpenFailure::CheckpointFiles(error) = &refused.failure else {
            panic!("{what}: {refused}");
        };
        assert!(error.to_string().contains(why), "{what}: {error}");
        assert!(!path.exists(), "{what}: the log was created");
        for leftover in [file.clone(), with(&file, ".tree"), with(&file, ".tmp")] {
            let _ = std::fs::remove_file(leftover);
        }
    }
    // Its own: the same key's checkpoint, an empty file, a torn tree file.
    let file = fresh("own.note");
    std::fs::write(&file, sign(&key)).unwrap();
    std::fs::write(with(&file, ".tree"), "spillguard-tr").unwrap();
    let log = open(&file).unwrap();
    log.write(&events(1)[0]).unwrap();
    drop(log);
    std::fs::write(&file, "").unwrap();
    assert!(open(&file).is_ok());
}
