//! The checksums some token formats carry: CRC32 in base62 (GitHub, npm)
//! and Bech32 (BIP 173: Age and Nostr secret keys).

use super::BECH32;

/// The CRC-32 (IEEE 802.3, as zlib's `crc32`) of `bytes`.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0_u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xedb8_8320 & mask);
        }
    }
    !crc
}

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The CRC32 of `data` in base62, left-padded with `0` to 6 characters.
pub(crate) fn crc32_base62(data: &[u8]) -> String {
    let mut n = crc32(data);
    let mut digits = [b'0'; 6];
    for digit in digits.iter_mut().rev() {
        *digit = BASE62[(n % 62) as usize];
        n /= 62;
    }
    digits.iter().map(|&b| char::from(b)).collect()
}

/// Whether `body`'s last 6 characters are the base62 CRC32 of the rest.
pub(crate) fn crc32_base62_holds(body: &[u8]) -> bool {
    let Some(split) = body.len().checked_sub(6) else {
        return false;
    };
    crc32_base62(&body[..split]).as_bytes() == &body[split..]
}

fn polymod(values: impl Iterator<Item = u8>) -> u32 {
    const GENERATOR: [u32; 5] = [
        0x3b6a_57b2,
        0x2650_8e6d,
        0x1ea1_19fa,
        0x3d42_33dd,
        0x2a14_62b3,
    ];
    let mut chk = 1_u32;
    for v in values {
        let top = chk >> 25;
        chk = ((chk & 0x01ff_ffff) << 5) ^ u32::from(v);
        for (i, g) in GENERATOR.iter().enumerate() {
            if (top >> i) & 1 == 1 {
                chk ^= g;
            }
        }
    }
    chk
}

/// The values Bech32's checksum is computed over: the human-readable
/// part expanded, a 0, then the data values. `None` if a data character
/// is not Bech32's.
fn expanded(hrp: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    let mut values: Vec<u8> = hrp.iter().map(|b| b.to_ascii_lowercase() >> 5).collect();
    values.push(0);
    values.extend(hrp.iter().map(|b| b.to_ascii_lowercase() & 31));
    for b in data {
        let lower = b.to_ascii_lowercase();
        let value = BECH32.iter().position(|&c| c == lower)?;
        values.push(value as u8);
    }
    Some(values)
}

/// Whether `token` (`HRP1DATA`, one case) is valid Bech32.
pub(crate) fn bech32_holds(token: &[u8]) -> bool {
    let Some(sep) = token.iter().rposition(|&b| b == b'1') else {
        return false;
    };
    let (hrp, data) = (&token[..sep], &token[sep + 1..]);
    if data.len() < 6 {
        return false;
    }
    expanded(hrp, data).is_some_and(|values| polymod(values.into_iter()) == 1)
}

/// The 6 checksum characters that make `HRP1DATA` valid Bech32, in the
/// token's case.
pub(crate) fn bech32_checksum(token: &[u8]) -> String {
    let sep = token.iter().rposition(|&b| b == b'1').unwrap_or(0);
    let (hrp, data) = (&token[..sep], &token[sep + 1..]);
    let Some(values) = expanded(hrp, data) else {
        return String::new();
    };
    let sum = polymod(values.into_iter().chain([0; 6])) ^ 1;
    let upper = token.iter().any(u8::is_ascii_uppercase);
    (0..6)
        .map(|i| {
            let c = BECH32[((sum >> (5 * (5 - i))) & 31) as usize];
            char::from(if upper { c.to_ascii_uppercase() } else { c })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_is_zlibs() {
        // zlib.crc32(b"123456789") == 0xcbf43926, the standard check value.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn bech32_accepts_the_bip173_test_vectors() {
        // Valid strings listed in BIP 173.
        for valid in [
            "A12UEL5L",
            "a12uel5l",
            "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw",
            "split1checkupstagehandshakeupstreamerranterredcaperred2y9e3w",
        ] {
            assert!(bech32_holds(valid.as_bytes()), "{valid}");
        }
        assert!(!bech32_holds(b"a12uel5m"));
        assert_eq!(bech32_checksum(b"a1"), "2uel5l");
        assert_eq!(bech32_checksum(b"A1"), "2UEL5L");
    }
}
