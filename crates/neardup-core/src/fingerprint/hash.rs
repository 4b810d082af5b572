//! Feature hashes: XXH3, seed 000's polynomial over UTF-16 units, and MD5 (seed 002).

use md5::{Digest, Md5};
use xxhash_rust::xxh3::{xxh3_128, xxh3_64};

use super::config::FeatureHash;

/// Seed 000's hash of a string given as UTF-16 units, `bits` wide (64 or 128):
/// `x = c0 << 7; for c: x = (x * 1000003 ^ c) & mask; x ^= len`.
/// (Java also maps -1 to -2, which a masked, non-negative value never is.)
#[inline]
pub fn seed000_units(units: &[u16], bits: u32) -> u128 {
    let Some(&first) = units.first() else {
        return 0;
    };
    let mask: u128 = if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    let mut x: u128 = (first as u128) << 7;
    for &c in units {
        x = (x.wrapping_mul(1_000_003) ^ c as u128) & mask;
    }
    x ^ units.len() as u128
}

/// 64-bit only fast path of [`seed000_units`].
#[inline]
pub fn seed000_units64(units: &[u16]) -> u64 {
    let Some(&first) = units.first() else {
        return 0;
    };
    let mut x: u64 = (first as u64) << 7;
    for &c in units {
        x = x.wrapping_mul(1_000_003) ^ c as u64;
    }
    x ^ units.len() as u64
}

/// Seed 000's hash of a UTF-8 string (encoded to UTF-16 on the fly, no allocation).
#[inline]
pub fn seed000_str64(s: &str) -> u64 {
    let mut it = s.encode_utf16();
    let Some(first) = it.next() else { return 0 };
    let mut x: u64 = (first as u64) << 7;
    x = x.wrapping_mul(1_000_003) ^ first as u64;
    let mut len = 1u64;
    for c in it {
        x = x.wrapping_mul(1_000_003) ^ c as u64;
        len += 1;
    }
    x ^ len
}

/// MD5 of `bytes` taken as a big-endian integer (Java `new BigInteger(md5Hex, 16)`).
#[inline]
pub fn md5_u128(bytes: &[u8]) -> u128 {
    let digest = Md5::digest(bytes);
    let mut a = [0u8; 16];
    a.copy_from_slice(digest.as_slice());
    u128::from_be_bytes(a)
}

/// Hash of a UTF-8 feature, 64 bits.
#[inline]
pub fn hash64(kind: FeatureHash, s: &str) -> u64 {
    match kind {
        FeatureHash::Xxh3 => xxh3_64(s.as_bytes()),
        FeatureHash::Seed000 => seed000_str64(s),
        FeatureHash::Md5 => md5_u128(s.as_bytes()) as u64,
    }
}

/// Hash of a UTF-8 feature, 128 bits.
#[inline]
pub fn hash128(kind: FeatureHash, s: &str) -> u128 {
    match kind {
        FeatureHash::Xxh3 => xxh3_128(s.as_bytes()),
        FeatureHash::Seed000 => {
            let units: Vec<u16> = s.encode_utf16().collect();
            seed000_units(&units, 128)
        }
        FeatureHash::Md5 => md5_u128(s.as_bytes()),
    }
}

/// Hash of a feature given as UTF-16 units (seed 000 pieces, which may hold lone surrogates).
pub fn hash_units(kind: FeatureHash, units: &[u16], bits: u32) -> u128 {
    match kind {
        FeatureHash::Seed000 => seed000_units(units, bits),
        _ => {
            let s = String::from_utf16_lossy(units);
            if bits == 128 {
                hash128(kind, &s)
            } else {
                hash64(kind, &s) as u128
            }
        }
    }
}
