//! Appending to the hash-chained audit file: events per second with and
//! without an fsync per event, in clear and sealed. (Frame building alone
//! and verification of 10^6 records are measured by the core's `audit`
//! bench.)
#![allow(clippy::unwrap_used)]

use std::num::NonZeroU64;
use std::path::PathBuf;

use divan::counter::ItemsCount;
use spillguard_core::audit::Key;
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
