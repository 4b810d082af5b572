//! Hamming distance between 64-bit fingerprints.

/// Number of differing bits between `a` and `b`.
#[inline]
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// Distance of `fp` to every element of `fps`, written into `out` (same length).
pub fn hamming_to_many(fp: u64, fps: &[u64], out: &mut [u32]) {
    for (o, &x) in out.iter_mut().zip(fps) {
        *o = hamming(fp, x);
    }
}
