//! Generated ids for calls and sessions that were not given one.

use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh id: `prefix`, `_`, then 16 lowercase hex digits drawn from the
/// operating system's random source. Where that source fails, the digits
/// come from the process id, the time and a counter instead: still unique
/// within this process, which is what a record needs.
///
/// ```
/// let id = spillguard_kit::fresh_id("c");
/// assert_eq!(id.len(), 18);
/// assert!(id.starts_with("c_"));
/// assert_ne!(id, spillguard_kit::fresh_id("c"));
/// ```
pub fn fresh_id(prefix: &str) -> String {
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
    format!("{prefix}_{value:016x}")
}
