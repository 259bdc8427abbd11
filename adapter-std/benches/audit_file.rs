//! Appending to the hash-chained audit file: events per second with and
//! without an fsync per event, in clear and sealed. (Frame building alone
//! and verification of 10^6 records are measured by the core's `audit`
//! bench.)
//!
//! Reopening a 1 GiB log (`reopen_*`, `verify_1gib_in_full`): `open` with
//! its anchor file (only the anchored record and what follows are read)
//! beside `open` without one and `verify` of the whole file, which read
//! and check every byte (their throughput in bytes per second). The log is
//! written once into the target directory and reused; it is read from the
//! page cache, so the figures are verification, not disk, speed. Run them
//! alone with `cargo bench -p spillguard-std --bench audit_file -- 1gib`.
#![allow(clippy::unwrap_used)]

use std::num::NonZeroU64;
use std::path::PathBuf;

use divan::counter::{BytesCount, ItemsCount};
use spillguard_core::audit::{Anchor, Key, LogEntry, LogId, LogWriter, VerifyOptions, verify};
use spillguard_core::{AuditEvent, AuditKind, State};
use spillguard_std::{AuditSink, ChainedFileAudit, ChainedFileOptions, FsyncPolicy};

fn main() {
    divan::main();
}

const EVENTS: usize = 500;

fn event(i: usize) -> AuditEvent {
    AuditEvent {
        call_id: format!("c_{i:06}"),
        session_id: "s_bench".into(),
        offset_us: i as u64 * 17,
        kind: AuditKind::Transition {
            from: State::Authorized,
            to: State::Dispatched,
        },
    }
}

fn fresh_log(tag: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "spillguard-bench-audit-{tag}-{}.log",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

fn append(bencher: divan::Bencher<'_, '_>, tag: &str, fsync: FsyncPolicy, key: Option<Key>) {
    let events: Vec<AuditEvent> = (0..EVENTS).map(event).collect();
    bencher
        .counter(ItemsCount::new(EVENTS))
        .with_inputs(|| {
            let path = fresh_log(tag);
            let options = ChainedFileOptions {
                key: key.clone(),
                fsync,
                writer_name: None,
                ..ChainedFileOptions::default()
            };
            (ChainedFileAudit::open(&path, options).unwrap(), path)
        })
        .bench_local_values(|(log, path)| {
            for e in &events {
                log.write(e).unwrap();
            }
            drop(log);
            let _ = std::fs::remove_file(path);
        });
}

fn never() -> FsyncPolicy {
    FsyncPolicy::EveryNEvents(NonZeroU64::MAX)
}

fn key() -> Key {
    Key::from_bytes([7; 32])
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn plain_without_fsync(bencher: divan::Bencher<'_, '_>) {
    append(bencher, "plain-nosync", never(), None);
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn plain_fsync_every_event(bencher: divan::Bencher<'_, '_>) {
    append(bencher, "plain-sync", FsyncPolicy::EveryEvent, None);
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn sealed_without_fsync(bencher: divan::Bencher<'_, '_>) {
    append(bencher, "sealed-nosync", never(), Some(key()));
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn sealed_fsync_every_event(bencher: divan::Bencher<'_, '_>) {
    append(bencher, "sealed-sync", FsyncPolicy::EveryEvent, Some(key()));
}

/// Size of the reopened log.
const BIG_LOG_BYTES: u64 = 1 << 30;

/// The 1 GiB log and its anchor file, written once (a few seconds) into
/// the target directory and reused by later runs while both are there.
fn big_log() -> &'static (PathBuf, PathBuf) {
    static LOG: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let path = dir.join("audit-1gib.log");
        let anchor_path = dir.join("audit-1gib.anchor");
        let reusable = std::fs::metadata(&path).is_ok_and(|m| m.len() >= BIG_LOG_BYTES)
            && std::fs::read_to_string(&anchor_path)
                .is_ok_and(|text| text.parse::<Anchor>().is_ok_and(|a| a.offset.is_some()));
        if !reusable {
            write_big_log(&path, &anchor_path);
        }
        (path, anchor_path)
    })
}

fn write_big_log(path: &std::path::Path, anchor_path: &std::path::Path) {
    use std::io::Write;
    let started = std::time::Instant::now();
    let mut file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let mut writer = LogWriter::create(LogId([0x1b; 16]), None);
    let mut frame = Vec::new();
    let mut i = 0;
    while writer.len() < BIG_LOG_BYTES {
        frame.clear();
        writer
            .append_to(&LogEntry::Call(event(i)), None, &mut frame)
            .unwrap();
        file.write_all(&frame).unwrap();
        i += 1;
    }
    // Durable before any open is timed: the first open's sync must not
    // pay for writing the whole file out.
    file.into_inner().unwrap().sync_all().unwrap();
    std::fs::write(anchor_path, format!("{}\n", writer.anchor())).unwrap();
    eprintln!(
        "wrote {} ({} records, {} bytes) in {:.1} s",
        path.display(),
        writer.records(),
        writer.len(),
        started.elapsed().as_secs_f64()
    );
}

fn reopen_options(anchor_file: Option<PathBuf>) -> ChainedFileOptions {
    ChainedFileOptions {
        anchor_file,
        // Reopening appends nothing, so the log stays as written.
        writer_name: None,
        ..ChainedFileOptions::default()
    }
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn reopen_1gib_with_anchor_file(bencher: divan::Bencher<'_, '_>) {
    let (path, anchor_path) = big_log();
    bencher.bench_local(|| {
        let log = ChainedFileAudit::open(path, reopen_options(Some(anchor_path.clone()))).unwrap();
        assert_ne!(log.opened().verified_from, 0);
        log
    });
}

/// The same with the default `Opened` entry: one frame appended and
/// synced, and the anchor file rewritten and synced, at each open.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn reopen_1gib_with_anchor_file_writing_opened(bencher: divan::Bencher<'_, '_>) {
    let (path, anchor_path) = big_log();
    bencher.bench_local(|| {
        let options = ChainedFileOptions {
            anchor_file: Some(anchor_path.clone()),
            ..ChainedFileOptions::default()
        };
        let log = ChainedFileAudit::open(path, options).unwrap();
        assert_ne!(log.opened().verified_from, 0);
        log
    });
}

/// What `open` does with the anchor file besides the lock and the syncs:
/// read the anchored record and what follows it, and verify them.
#[divan::bench(sample_count = 100, sample_size = 1)]
fn resume_1gib_from_anchor(bencher: divan::Bencher<'_, '_>) {
    use std::io::{Read, Seek};
    let (path, anchor_path) = big_log();
    let anchor: Anchor = std::fs::read_to_string(anchor_path)
        .unwrap()
        .parse()
        .unwrap();
    let offset = anchor.offset.unwrap();
    bencher.bench_local(|| {
        let mut file = std::fs::File::open(path).unwrap();
        file.seek(std::io::SeekFrom::Start(offset)).unwrap();
        let mut suffix = Vec::new();
        file.read_to_end(&mut suffix).unwrap();
        let (writer, _) = LogWriter::resume_from_anchor(&anchor, &suffix, None).unwrap();
        assert!(writer.len() >= BIG_LOG_BYTES);
        writer
    });
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn reopen_1gib_without_anchor_file(bencher: divan::Bencher<'_, '_>) {
    let (path, _) = big_log();
    let len = std::fs::metadata(path).unwrap().len();
    bencher
        .counter(BytesCount::new(len))
        .bench_local(|| ChainedFileAudit::open(path, reopen_options(None)).unwrap());
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn verify_1gib_in_full(bencher: divan::Bencher<'_, '_>) {
    let (path, anchor_path) = big_log();
    let len = std::fs::metadata(path).unwrap().len();
    let anchor: Anchor = std::fs::read_to_string(anchor_path)
        .unwrap()
        .parse()
        .unwrap();
    bencher.counter(BytesCount::new(len)).bench_local(|| {
        let bytes = std::fs::read(path).unwrap();
        let options = VerifyOptions {
            anchor: Some(&anchor),
            key: None,
        };
        assert!(!verify(&bytes, options).is_rejected());
    });
}
