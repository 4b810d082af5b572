//! The per-call work of an online check-and-add batch that does not touch the index: Jaccard
//! sketches of normalised texts (bit for bit those of `neardup.verify.sketch`; their Jaccard is
//! [`crate::verify::jaccard_sorted`]) and the near pairs inside a small batch (each row against
//! the earlier rows).
//!
//! A service groups a handful of concurrent requests into one batch; for such batches building
//! a scratch index for the in-batch pairs, or hashing shingles with numpy, costs more than the
//! work itself. These functions do it in a few microseconds.

use crate::parallel as pool;
use crate::{Error, Result};

/// Largest shingle width (the Python policy's bound).
pub const MAX_SHINGLE: usize = 64;

/// The n-gram hash multiplier: the 32-bit golden ratio (odd), as in `neardup.verify`.
const G: u32 = 0x9E37_79B1;

pub(crate) fn check_shingle(n: usize) -> Result<()> {
    if (1..=MAX_SHINGLE).contains(&n) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "shingle must be an int in 1..{MAX_SHINGLE}, got {n}"
        )))
    }
}

/// Polynomial hash of a window of code points: `sum(c[i] * G**(w-1-i)) + w` modulo 2**32.
fn window_hash(window: &[u32]) -> u32 {
    let mut h = 0u32;
    for &c in window {
        h = h.wrapping_mul(G).wrapping_add(c);
    }
    h.wrapping_add(window.len() as u32)
}

/// The Jaccard sketch of a normalised text: the sorted distinct 32-bit hashes of its character
/// `n`-grams (a non-empty text shorter than `n` is one shingle, itself; the empty text has
/// none). Equal to `neardup.verify.sketch(norm, n).hashes`.
pub fn sketch(norm: &str, n: usize) -> Result<Vec<u32>> {
    check_shingle(n)?;
    let cp: Vec<u32> = norm.chars().map(u32::from).collect();
    if cp.is_empty() {
        return Ok(Vec::new());
    }
    if cp.len() < n {
        return Ok(vec![window_hash(&cp)]);
    }
    let mut out: Vec<u32> = cp.windows(n).map(window_hash).collect();
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Texts per batch below which [`sketch_packed`] stays on one thread.
const PARALLEL_MIN_TEXTS: usize = 256;

/// The sketches of many normalised texts packed as `(offsets, hashes)`: text `i` owns
/// `hashes[offsets[i]..offsets[i + 1]]` ([`sketch`] of it). Both cores for large batches.
pub fn sketch_packed<S: AsRef<str> + Sync>(norms: &[S], n: usize) -> Result<(Vec<i64>, Vec<u32>)> {
    check_shingle(n)?;
    let sketches = pool::map(norms, norms.len() >= PARALLEL_MIN_TEXTS, 64, |t| {
        sketch(t.as_ref(), n).unwrap_or_default() // (n is checked)
    });
    let mut offsets = Vec::with_capacity(norms.len() + 1);
    let mut hashes = Vec::with_capacity(sketches.iter().map(Vec::len).sum());
    offsets.push(0);
    for s in &sketches {
        hashes.extend_from_slice(s);
        offsets.push(hashes.len() as i64);
    }
    Ok((offsets, hashes))
}

/// Near pairs inside a batch: for every row `i`, each earlier row `j < i` whose fingerprint is
/// within `radii[i]` bits of row `i`'s, as `(i, j, distance)` in order of `i`, then `j`.
/// Quadratic: meant for the small batches of an online writer (a few thousand rows at most).
pub fn earlier_within(fps: &[u64], radii: &[u32]) -> Result<Vec<(usize, usize, u32)>> {
    if fps.len() != radii.len() {
        return Err(Error::InvalidArgument(format!(
            "fingerprints has {} items but radii has {}",
            fps.len(),
            radii.len()
        )));
    }
    let mut out = Vec::new();
    for (i, (&fp, &r)) in fps.iter().zip(radii).enumerate() {
        for (j, &other) in fps[..i].iter().enumerate() {
            let d = (fp ^ other).count_ones();
            if d <= r {
                out.push((i, j, d));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::jaccard_sorted;

    #[test]
    fn packed_sketches_are_each_texts_sketch_on_and_off_the_pool() {
        let texts: Vec<String> = (0..700)
            .map(|i| format!("text {i} 中文 {}", "ab".repeat(i % 9)))
            .chain(["".to_string(), "xy".to_string()])
            .collect();
        for count in [0, 3, texts.len()] {
            let (offsets, hashes) = sketch_packed(&texts[..count], 5).unwrap();
            assert_eq!(offsets.len(), count + 1);
            assert_eq!(offsets[0], 0);
            for (i, t) in texts[..count].iter().enumerate() {
                let own = &hashes[offsets[i] as usize..offsets[i + 1] as usize];
                assert_eq!(own, sketch(t, 5).unwrap().as_slice());
            }
        }
        assert!(sketch_packed(&texts, 0).is_err());
    }

    #[test]
    fn sketch_of_short_and_empty_texts() {
        assert_eq!(sketch("", 5).unwrap(), Vec::<u32>::new());
        // "ab" (< 5 code points): one shingle, the window of both characters.
        let expect = 97u32.wrapping_mul(G).wrapping_add(98).wrapping_add(2);
        assert_eq!(sketch("ab", 5).unwrap(), vec![expect]);
        assert!(sketch("abc", 0).is_err());
        assert!(sketch("abc", 65).is_err());
    }

    #[test]
    fn sketch_is_sorted_distinct_window_hashes() {
        let s = sketch("abababab", 2).unwrap();
        // windows "ab" and "ba" only
        assert_eq!(s.len(), 2);
        assert!(s[0] < s[1]);
        let ab = window_hash(&[97, 98]);
        let ba = window_hash(&[98, 97]);
        assert!(s.contains(&ab) && s.contains(&ba));
    }

    #[test]
    fn jaccard_of_sketches() {
        let a = sketch("the quick brown fox", 3).unwrap();
        let b = sketch("the quick brown fox", 3).unwrap();
        assert_eq!(jaccard_sorted(&a, &b), 1.0);
        let c = sketch("completely different", 3).unwrap();
        assert!(jaccard_sorted(&a, &c) < 0.2);
        assert_eq!(jaccard_sorted(&[], &[]), 1.0);
    }

    #[test]
    fn earlier_within_matches_brute_force() {
        let fps = [0u64, 1, 3, u64::MAX, 7, 0];
        let radii = [2u32, 2, 1, 0, 3, 64];
        let got = earlier_within(&fps, &radii).unwrap();
        let mut want = Vec::new();
        for i in 0..fps.len() {
            for j in 0..i {
                let d = (fps[i] ^ fps[j]).count_ones();
                if d <= radii[i] {
                    want.push((i, j, d));
                }
            }
        }
        assert_eq!(got, want);
        assert!(earlier_within(&fps, &radii[..2]).is_err());
    }
}
