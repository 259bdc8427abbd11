//! What the fuzz targets share: cutting an input into chunks as the input
//! itself says, and the key the seed corpus's sealed logs use.
#![allow(dead_code)]

use spillguard_core::audit::Key;

/// The key of the sealed logs in the seed corpus (`cargo xtask fuzz-seeds`).
pub const SEED_KEY: [u8; 32] = [0x5a; 32];

/// The seed corpus's key.
pub fn seed_key() -> Key {
    Key::from_bytes(SEED_KEY)
}

/// Splits an input into a chunking plan and the data: the first byte says
/// how many plan bytes follow (0..=15), the rest is the data.
pub fn split_plan(input: &[u8]) -> (&[u8], &[u8]) {
    let Some((&n, rest)) = input.split_first() else {
        return (&[], &[]);
    };
    rest.split_at(usize::from(n % 16).min(rest.len()))
}

/// `data` cut into chunks whose lengths the plan's bytes give in turn
/// (small lengths, 1..=64, for most bytes; up to 6 KiB for the others); an
/// empty plan gives one chunk. Every byte is in exactly one chunk, in order.
pub fn chunks<'a>(data: &'a [u8], plan: &[u8]) -> Vec<&'a [u8]> {
    if plan.is_empty() {
        return vec![data];
    }
    let mut out = Vec::new();
    let mut rest = data;
    let mut sizes = plan.iter().cycle();
    while !rest.is_empty() {
        let b = sizes.next().copied().unwrap_or(0);
        let len = if b < 192 {
            1 + usize::from(b % 64)
        } else {
            usize::from(b - 191) * 97
        };
        let (chunk, tail) = rest.split_at(len.min(rest.len()));
        out.push(chunk);
        rest = tail;
    }
    out
}
