//! Audit log throughput (speed goals live in benchmarks, not in
//! timed tests).
//!
//! * `append`: frames built per second for realistic lifecycle events
//!   (attempts, transitions, final records from real `Call`s), plain and
//!   sealed. The core does no IO: this is the cost of building frames, to
//!   which a file sink adds its write and fsync policy.
//! * `verify`: a log of 10^6 records verified in memory, plain and sealed
//!   (with the key: every record decrypted), against its anchor.
//!
//! Run: `cargo bench -p spillguard-core --bench audit`.

use divan::counter::{BytesCount, ItemsCount};
use divan::{Bencher, black_box};
use spillguard_core::audit::{Key, LogEntry, LogId, LogWriter, Nonce, VerifyOptions, verify};

#[path = "../tests/audit_support/mod.rs"]
mod audit_support;

use audit_support::{Log, Rng, call_entries, events, test_key, write_log};

fn main() {
    divan::main();
}

/// Events appended per iteration of `append`.
const APPEND_BATCH: usize = 10_000;
/// Records in the log of `verify`.
const VERIFY_RECORDS: usize = 1_000_000;

/// `n` realistic entries, cycling through the calls of a 1,002-event run.
fn entries(n: usize) -> Vec<LogEntry> {
    call_entries(&events(1_000))
        .into_iter()
        .cycle()
        .take(n)
        .collect()
}

fn key_if(sealed: bool) -> Option<Key> {
    sealed.then(test_key)
}

/// Builds `APPEND_BATCH` frames into one buffer.
#[divan::bench(args = [false, true])]
fn append(bencher: Bencher<'_, '_>, sealed: bool) {
    let entries = entries(APPEND_BATCH);
    let key = key_if(sealed);
    let mut rng = Rng::new(1);
    let nonces: Vec<Option<Nonce>> = (0..APPEND_BATCH)
        .map(|_| key.as_ref().map(|_| rng.bytes()))
        .collect();
    bencher
        .counter(ItemsCount::new(APPEND_BATCH))
        .with_inputs(|| {
            (
                LogWriter::create(LogId([9; 16]), key.as_ref()),
                Vec::with_capacity(APPEND_BATCH * 300),
            )
        })
        .bench_local_values(|(mut writer, mut out)| {
            for (entry, nonce) in entries.iter().zip(&nonces) {
                if writer
                    .append_to(black_box(entry), *nonce, &mut out)
                    .is_err()
                {
                    unreachable!("appends in the benchmark are valid");
                }
            }
            out
        });
}

fn big_log(sealed: bool) -> (Log, Option<Key>) {
    let key = key_if(sealed);
    let log = write_log(&entries(VERIFY_RECORDS), key.as_ref(), &mut Rng::new(2));
    (log, key)
}

/// Verifies a 10^6-record log against its anchor.
#[divan::bench(args = [false, true], sample_count = 3, sample_size = 1)]
fn verify_1m(bencher: Bencher<'_, '_>, sealed: bool) {
    let (log, key) = big_log(sealed);
    let options = VerifyOptions {
        anchor: Some(&log.anchor),
        key: key.as_ref(),
    };
    bencher
        .counter(ItemsCount::new(VERIFY_RECORDS))
        .counter(BytesCount::new(log.bytes.len()))
        .bench_local(|| {
            let verdict = verify(black_box(&log.bytes), options);
            assert!(verdict.is_ok(), "{verdict:?}");
        });
}
