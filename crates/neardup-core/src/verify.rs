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

/// Jaccard of the sketches of rows `a[p]` and `b[p]` for every pair `p`, where row `r` owns
/// `hashes[offsets[r]..offsets[r + 1]]`. Both cores for large batches (the fork-safe pool).
pub fn jaccard_pairs(hashes: &[u32], offsets: &[i64], a: &[i64], b: &[i64]) -> Result<Vec<f64>> {
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
    let sketch = |r: i64| &hashes[offsets[r as usize] as usize..offsets[r as usize + 1] as usize];
    let one = |(&x, &y): (&i64, &i64)| jaccard_sorted(sketch(x), sketch(y));
    if a.len() < PARALLEL_MIN_PAIRS {
        return Ok(a.iter().zip(b).map(one).collect());
    }
    Ok(pool::run(|p| match p {
        Some(p) => p.install(|| a.par_iter().zip(b).with_min_len(256).map(one).collect()),
        None => a.iter().zip(b).map(one).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
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
