//! The exact stage of two-stage dedup: Jaccard similarity of sketches, i.e. sorted arrays of
//! distinct 32-bit shingle hashes (`neardup.verify.sketch_many` makes them).

use rayon::prelude::*;

use crate::parallel as pool;
use crate::{Error, Result};

/// Pairs per batch below which one thread is faster than handing work to the pool.
const PARALLEL_MIN_PAIRS: usize = 2048;

/// Jaccard similarity of two sorted arrays of distinct hashes (two empty sets: 1.0).
pub fn jaccard_sorted(a: &[u32], b: &[u32]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        inter += usize::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    inter as f64 / (a.len() + b.len() - inter) as f64
}

/// [`jaccard_sorted`] when it is at least `threshold`, else `None`: the merge stops as soon as
/// more hashes went unmatched than a pair at the threshold can have (J >= t needs
/// |A & B| >= t (|A| + |B|) / (1 + t), so at most |A| + |B| - 2 |A & B| unmatched).
pub fn jaccard_sorted_at_least(a: &[u32], b: &[u32], threshold: f64) -> Option<f64> {
    let total = a.len() + b.len();
    if total == 0 {
        return (threshold <= 1.0).then_some(1.0);
    }
    // (rounded down a little: a merge that goes on longer than needed is still exact)
    let need = (threshold * total as f64 / (1.0 + threshold) - 1e-9).ceil() as usize;
    let allowed = total.saturating_sub(2 * need);
    let (mut i, mut j, mut inter, mut unmatched) = (0, 0, 0usize, 0usize);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        let same = usize::from(x == y);
        inter += same;
        unmatched += 1 - same;
        if unmatched > allowed {
            return None;
        }
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    let s = inter as f64 / (total - inter) as f64;
    (s >= threshold).then_some(s)
}

/// Checks the arguments of [`jaccard_pairs`]; returns the number of rows.
fn check_pairs(hashes: &[u32], offsets: &[i64], a: &[i64], b: &[i64]) -> Result<usize> {
    if a.len() != b.len() {
        return Err(Error::InvalidArgument(format!(
            "a and b must have the same length, got {} and {}",
            a.len(),
            b.len()
        )));
    }
    let rows = offsets.len().saturating_sub(1);
    for w in offsets.windows(2) {
        if w[0] < 0 || w[0] > w[1] || w[1] as u64 > hashes.len() as u64 {
            return Err(Error::InvalidArgument(format!(
                "offsets must rise from 0 to at most len(hashes) = {}, got {}..{}",
                hashes.len(),
                w[0],
                w[1]
            )));
        }
    }
    if let Some(&r) = a
        .iter()
        .chain(b)
        .find(|&&r| r < 0 || r as u64 >= rows as u64)
    {
        return Err(Error::InvalidArgument(format!(
            "row {r} is outside 0..{rows}"
        )));
    }
    Ok(rows)
}

/// `f` of every pair `(a[p], b[p])`, on the pool for large batches.
fn each_pair(a: &[i64], b: &[i64], f: impl Fn((&i64, &i64)) -> f64 + Sync) -> Vec<f64> {
    if a.len() < PARALLEL_MIN_PAIRS {
        return a.iter().zip(b).map(f).collect();
    }
    pool::run(|p| match p {
        Some(p) => p.install(|| a.par_iter().zip(b).with_min_len(256).map(&f).collect()),
        None => a.iter().zip(b).map(f).collect(),
    })
}

/// Jaccard of the sketches of rows `a[p]` and `b[p]` for every pair `p`, where row `r` owns
/// `hashes[offsets[r]..offsets[r + 1]]`. Both cores for large batches (the fork-safe pool).
pub fn jaccard_pairs(hashes: &[u32], offsets: &[i64], a: &[i64], b: &[i64]) -> Result<Vec<f64>> {
    check_pairs(hashes, offsets, a, b)?;
    let sketch = |r: i64| &hashes[offsets[r as usize] as usize..offsets[r as usize + 1] as usize];
    Ok(each_pair(a, b, |(&x, &y)| {
        jaccard_sorted(sketch(x), sketch(y))
    }))
}

/// A 256-bit summary of a sketch ([`jaccard_bound`] reads it).
pub type Signature = [u64; 4];

/// The [`Signature`] of a sketch: bit `h >> 24` for each hash `h` (on short texts, tens of
/// hashes, 256 bits tell apart far more pairs than 64 would: on texts of about 90 shingles
/// that differ in 20 % to 45 % of them, the bound rules out 40 % of those pairs, 64 bits 6 %).
pub fn signature(sketch: &[u32]) -> Signature {
    let mut s = [0u64; 4];
    for &h in sketch {
        let bit = h >> 24;
        s[(bit >> 6) as usize] |= 1 << (bit & 63);
    }
    s
}

/// An upper bound of the Jaccard similarity of two sketches of `na` and `nb` hashes, from
/// their sizes and [`signature`]s: a bit set for A and not for B comes from a hash of A missing
/// from B, so |A & B| <= I = min(na - |bits of A not of B|, nb - |bits of B not of A|) and
/// J <= I / (na + nb - I) (which is also <= min / max). On short texts it rules out many of
/// the pairs that the exact merge would reject, without reading their sketches.
pub fn jaccard_bound(na: usize, sa: &Signature, nb: usize, sb: &Signature) -> f64 {
    let only = |x: &Signature, y: &Signature| -> i64 {
        x.iter()
            .zip(y)
            .map(|(x, y)| i64::from((x & !y).count_ones()))
            .sum()
    };
    let (na, nb) = (na as i64, nb as i64);
    let inter = (na - only(sa, sb)).min(nb - only(sb, sa));
    let union = na + nb - inter;
    if union <= 0 {
        return 1.0;
    }
    inter.max(0) as f64 / union as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaccard_at_least_is_exact_above_the_threshold_and_none_below() {
        let mut x: u64 = 3;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 40) as u32 % 400
        };
        for _ in 0..3000 {
            let mut a: Vec<u32> = (0..next() % 60).map(|_| next()).collect();
            let mut b: Vec<u32> = a.iter().copied().filter(|_| next() % 7 != 0).collect();
            b.extend((0..next() % 8).map(|_| next()));
            for v in [&mut a, &mut b] {
                v.sort_unstable();
                v.dedup();
            }
            let exact = jaccard_sorted(&a, &b);
            for t in [0.0, 0.5, 0.8, 0.9, 1.0] {
                let got = jaccard_sorted_at_least(&a, &b, t);
                if exact >= t {
                    assert_eq!(got, Some(exact), "{a:?} {b:?} {t}");
                } else {
                    assert_eq!(got, None);
                }
            }
        }
    }

    #[test]
    fn the_bound_is_never_below_the_exact_jaccard() {
        // Rows of random small sets, many pairs: the bound is never below the exact Jaccard,
        // and at each threshold it rules some pairs out (none at 0).
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut hashes, mut offsets) = (Vec::new(), vec![0i64]);
        for r in 0..300 {
            let mut set: Vec<u32> = (0..(r % 40))
                .map(|_| (next() % 5000) as u32 * 858_993)
                .collect();
            if r % 3 == 0 && !hashes.is_empty() {
                set.extend_from_slice(&hashes[..(hashes.len()).min(30)]); // (overlaps)
            }
            set.sort_unstable();
            set.dedup();
            hashes.extend_from_slice(&set);
            offsets.push(hashes.len() as i64);
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for x in 0..300i64 {
            for y in (x..300).step_by(7) {
                a.push(x);
                b.push(y);
            }
        }
        let exact = jaccard_pairs(&hashes, &offsets, &a, &b).unwrap();
        let sketch =
            |r: i64| &hashes[offsets[r as usize] as usize..offsets[r as usize + 1] as usize];
        let bounds: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| {
                let (sa, sb) = (sketch(x), sketch(y));
                jaccard_bound(sa.len(), &signature(sa), sb.len(), &signature(sb))
            })
            .collect();
        for (e, g) in exact.iter().zip(&bounds) {
            assert!(g >= e, "bound {g} below the exact {e}");
        }
        for t in [0.0, 0.3, 0.8, 1.0] {
            let ruled_out = bounds.iter().filter(|&&g| g < t).count();
            assert_eq!(ruled_out == 0, t == 0.0, "t = {t}: {ruled_out} ruled out");
        }
    }
    use std::collections::HashSet;

    fn brute(a: &[u32], b: &[u32]) -> f64 {
        let (sa, sb): (HashSet<_>, HashSet<_>) = (a.iter().collect(), b.iter().collect());
        if sa.is_empty() && sb.is_empty() {
            return 1.0;
        }
        sa.intersection(&sb).count() as f64 / sa.union(&sb).count() as f64
    }

    #[test]
    fn matches_set_jaccard() {
        let mut seed = 7u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut hashes = Vec::new();
        let mut offsets = vec![0i64];
        for _ in 0..300 {
            let n = (next() % 60) as usize;
            let mut v: Vec<u32> = (0..n).map(|_| (next() % 90) as u32).collect();
            v.sort_unstable();
            v.dedup();
            hashes.extend(&v);
            offsets.push(hashes.len() as i64);
        }
        let a: Vec<i64> = (0..5000).map(|_| (next() % 300) as i64).collect();
        let b: Vec<i64> = (0..5000).map(|_| (next() % 300) as i64).collect();
        let got = jaccard_pairs(&hashes, &offsets, &a, &b).unwrap();
        for ((&x, &y), g) in a.iter().zip(&b).zip(got) {
            let s =
                |r: i64| &hashes[offsets[r as usize] as usize..offsets[r as usize + 1] as usize];
            assert!((g - brute(s(x), s(y))).abs() < 1e-12);
        }
    }

    #[test]
    fn rejects_bad_rows_and_offsets() {
        assert!(jaccard_pairs(&[1, 2], &[0, 2], &[0], &[1]).is_err());
        assert!(jaccard_pairs(&[1, 2], &[0, 3], &[0], &[0]).is_err());
        assert!(jaccard_pairs(&[1, 2], &[0, 2], &[0, 0], &[0]).is_err());
        assert_eq!(
            jaccard_pairs(&[1, 2], &[0, 2, 2], &[0, 1], &[1, 1]).unwrap(),
            vec![0.0, 1.0]
        );
    }
}
