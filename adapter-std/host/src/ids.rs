//! Generated ids for calls and sessions that were not given one.

use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh id: `prefix`, `_`, then 16 lowercase hex digits drawn from the
/// operating system's random source. Where that source fails, the digits
/// come from the process id, the time and a counter instead: still unique
/// within this process, which is what a record needs.
///
/// ```
/// let id = spillguard_host::fresh_id("c");
/// assert_eq!(id.len(), 18);
/// assert!(id.starts_with("c_"));
/// assert_ne!(id, spillguard_host::fresh_id("c"));
/// ```
pub fn fresh_id(prefix: &str) -> String {
    format!("{prefix}_{:016x}", fresh_u64())
}

/// 64 random bits, never zero (see [`fresh_id`] for where they come from
/// when the random source fails).
fn fresh_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut bytes = [0_u8; 8];
    let value = match getrandom::fill(&mut bytes) {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let count = COUNTER.fetch_add(1, Ordering::Relaxed);
            (u64::from(std::process::id()) << 40) ^ nanos.rotate_left(17) ^ count
        }
    };
    value.max(1)
}

/// A fresh span id: 8 random bytes, never all zero.
pub fn fresh_span_id() -> [u8; 8] {
    fresh_u64().to_be_bytes()
}

/// A fresh trace id: 16 random bytes, never all zero.
pub fn fresh_trace_id() -> [u8; 16] {
    let mut id = [0; 16];
    id[..8].copy_from_slice(&fresh_u64().to_be_bytes());
    id[8..].copy_from_slice(&fresh_u64().to_be_bytes());
    id
}
