//! Hamming distance between fingerprints.

/// Number of differing bits between `a` and `b`.
#[inline]
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// Number of differing bits between 128-bit fingerprints.
#[inline]
pub fn hamming128(a: u128, b: u128) -> u32 {
    (a ^ b).count_ones()
}

/// Distance of `fp` to every element of `fps`, written into `out` (same length).
pub fn hamming_to_many(fp: u64, fps: &[u64], out: &mut [u32]) {
    for (o, &x) in out.iter_mut().zip(fps) {
        *o = (fp ^ x).count_ones();
    }
}

/// Distance of `fp` to every element of `fps`.
pub fn hamming_many(fp: u64, fps: &[u64]) -> Vec<u32> {
    fps.iter().map(|&x| (fp ^ x).count_ones()).collect()
}
