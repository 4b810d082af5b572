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

/// Positions of the elements of `fps` within distance `k` of `fp` (inclusive), in order.
///
/// Scans 16 at a time so that the distances vectorise; on x86_64 CPUs with AVX2 and POPCNT
/// (checked at run time) the same loop is compiled for them (16k fingerprints: ~4 us
/// instead of ~25 us).
pub fn within(fps: &[u64], fp: u64, k: u32) -> Vec<u32> {
    let mut out = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // SAFETY: the CPU has AVX2 and POPCNT (checked above).
            unsafe { within_avx2(fps, fp, k, &mut out) };
            return out;
        }
    }
    within_into(fps, fp, k, &mut out);
    out
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
/// # Safety
/// The CPU must have AVX2 and POPCNT.
unsafe fn within_avx2(fps: &[u64], fp: u64, k: u32, out: &mut Vec<u32>) {
    within_into(fps, fp, k, out);
}

#[inline(always)]
fn within_into(fps: &[u64], fp: u64, k: u32, out: &mut Vec<u32>) {
    const LANES: usize = 16;
    let mut chunks = fps.chunks_exact(LANES);
    let mut base = 0u32;
    for chunk in &mut chunks {
        let mut near = 0u32;
        for (j, &x) in chunk.iter().enumerate() {
            near |= u32::from((x ^ fp).count_ones() <= k) << j;
        }
        while near != 0 {
            out.push(base + near.trailing_zeros());
            near &= near - 1;
        }
        base += LANES as u32;
    }
    for (j, &x) in (base..).zip(chunks.remainder()) {
        if (x ^ fp).count_ones() <= k {
            out.push(j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_matches_a_plain_scan() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let fps: Vec<u64> = (0..1000)
            .map(|i| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                // some near 0 (few bits set), most random
                if i % 7 == 0 {
                    x & x >> 17 & x >> 34 & x >> 51
                } else {
                    x
                }
            })
            .collect();
        for k in [0, 3, 10, 13, 32, 64] {
            for n in [0, 1, 15, 16, 17, 999, 1000] {
                let want: Vec<u32> = (0u32..)
                    .zip(&fps[..n])
                    .filter(|&(_, &f)| f.count_ones() <= k)
                    .map(|(i, _)| i)
                    .collect();
                let mut plain = Vec::new();
                within_into(&fps[..n], 0, k, &mut plain);
                assert_eq!(within(&fps[..n], 0, k), want, "k={k} n={n}");
                assert_eq!(plain, want, "k={k} n={n}");
            }
        }
    }
}
