//! MinHash band keys of a Jaccard sketch: the candidate stage's signature.
//!
//! Two sets agree on one min-hash with probability equal to their Jaccard similarity J, so
//! with `bands` bands of `rows` min-hashes each they share at least one band key with
//! probability `1 - (1 - J^rows)^bands`. The sets are the verifier's own (the sorted distinct
//! shingle hashes of `batch_dedup::sketch`), so a candidate's chance depends on exactly the
//! similarity that then decides: unrelated texts of one domain (J of a few percent) almost
//! never meet, near-copies almost always do.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::index::ids::mix as mix64;

/// Largest number of bands and rows per band.
pub const MAX_BANDS: usize = 64;
pub const MAX_ROWS: usize = 16;

/// murmur3's 32-bit finaliser: spreads the polynomial shingle hashes over all bits.
fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x85eb_ca6b);
    x ^= x >> 13;
    x = x.wrapping_mul(0xc2b2_ae35);
    x ^ (x >> 16)
}

/// The constants of min-hash `i`: `h_i(x) = ((a_i * x + b_i) mod 2^64) >> 32` with 64-bit
/// `a_i` (odd) and `b_i` (multiply-add-shift, a 2-universal family of 32-bit hashes; a 32-bit
/// `a_i` would make every `h_i` a rotation of one order of `x`, and the bands alike), from a
/// fixed splitmix64 sequence so that every process and every version computes the same keys.
fn permutation(i: usize) -> (u64, u64) {
    const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
    let z = GOLDEN.wrapping_mul(i as u64 + 1);
    (
        mix64(z.wrapping_add(GOLDEN)) | 1,
        mix64(z.wrapping_add(GOLDEN.wrapping_mul(2))),
    )
}

/// Band shape and the min-hash constants it needs.
#[derive(Clone, Debug)]
pub struct Bands {
    pub bands: usize,
    pub rows: usize,
    perms: Vec<(u64, u64)>,
}

impl Bands {
    pub fn new(bands: usize, rows: usize) -> crate::Result<Bands> {
        if !(1..=MAX_BANDS).contains(&bands) || !(1..=MAX_ROWS).contains(&rows) {
            return Err(crate::Error::InvalidArgument(format!(
                "bands must be in 1..{MAX_BANDS} and rows in 1..{MAX_ROWS}, got {bands} and {rows}"
            )));
        }
        Ok(Bands {
            bands,
            rows,
            perms: (0..bands * rows).map(permutation).collect(),
        })
    }

    /// The probability that two sets of Jaccard `j` share a band key.
    pub fn collision_probability(&self, j: f64) -> f64 {
        1.0 - (1.0 - j.powi(self.rows as i32)).powi(self.bands as i32)
    }

    /// The band keys of a sketch into `out` (`bands` values; band `b`'s key depends on the
    /// band's number, so equal keys of different bands mean nothing). An empty sketch has no
    /// min-hashes: its keys are all 0 and callers must not use them.
    pub fn keys(&self, sketch: &[u32], scratch: &mut Vec<u32>, out: &mut [u32]) {
        self.keys_and_bytes(sketch, scratch, out, &mut vec![0; self.bands * self.rows]);
    }

    /// [`Bands::keys`], and the low byte of each of the `bands * rows` min-hashes into
    /// `bytes`: two sets of Jaccard J agree on a byte with probability J + (1 - J) / 256, so
    /// the share of equal bytes estimates J (b-bit min-wise hashing) far more finely than the
    /// number of shared bands ([`estimate`]).
    pub fn keys_and_bytes(
        &self,
        sketch: &[u32],
        scratch: &mut Vec<u32>,
        out: &mut [u32],
        bytes_out: &mut [u8],
    ) {
        debug_assert_eq!(out.len(), self.bands);
        debug_assert_eq!(bytes_out.len(), self.bands * self.rows);
        if sketch.is_empty() {
            out.fill(0);
            bytes_out.fill(0);
            return;
        }
        scratch.clear();
        scratch.extend(sketch.iter().map(|&h| mix32(h)));
        let mut mins = [0u32; MAX_ROWS];
        for (band, key) in out.iter_mut().enumerate() {
            for (row, m) in mins[..self.rows].iter_mut().enumerate() {
                let (a, b) = self.perms[band * self.rows + row];
                // (the loop is a branch-free min over one contiguous array: it vectorises)
                *m = scratch
                    .iter()
                    .map(|&x| ((a.wrapping_mul(u64::from(x))).wrapping_add(b) >> 32) as u32)
                    .min()
                    .unwrap_or(u32::MAX);
            }
            let mut bytes = [0u8; 4 * MAX_ROWS];
            for (chunk, m) in bytes.chunks_exact_mut(4).zip(&mins[..self.rows]) {
                chunk.copy_from_slice(&m.to_le_bytes());
            }
            for (b, m) in bytes_out[band * self.rows..(band + 1) * self.rows]
                .iter_mut()
                .zip(&mins[..self.rows])
            {
                *b = *m as u8;
            }
            *key = xxh3_64_with_seed(&bytes[..4 * self.rows], band as u64) as u32;
        }
    }
}

/// The Jaccard similarity estimated from the low bytes of two sets' min-hashes
/// ([`Bands::keys_and_bytes`]): equal bytes, less the chance agreements of unequal min-hashes.
/// Its standard deviation is about sqrt(J (1 - J) / len): 0.04 at J = 0.8 with 100 min-hashes.
pub fn estimate(a: &[u8], b: &[u8]) -> f64 {
    if a.is_empty() {
        return 1.0;
    }
    // (sums of 0/1 bytes over blocks of 32, small enough for byte lanes: it vectorises)
    let equal: u32 = a
        .chunks(32)
        .zip(b.chunks(32))
        .map(|(x, y)| u32::from(x.iter().zip(y).map(|(p, q)| u8::from(p == q)).sum::<u8>()))
        .sum();
    let share = equal as f64 / a.len() as f64;
    ((share - 1.0 / 256.0) / (1.0 - 1.0 / 256.0)).max(0.0)
}
