//! The rule that turns candidates into a decision, apart from where the candidates are kept:
//! the embedded [`super::Engine`] applies it to its band tables, and stores that keep their
//! band lists elsewhere (Redis) or engines that meet candidates in another way (Spark) apply
//! the very same rule through [`Rule`].
//!
//! 1. **rank** ([`rank`]): by the similarity estimated from the min-hashes' low bytes (those
//!    estimated more than [`estimate_margin`] below the threshold go), then the smallest
//!    SimHash distance, then the earliest position; the first `verify_limit` go on.
//! 2. **verify** ([`verify`]): the exact size bound, then exact Jaccard of the shingle sketches.
//! 3. **order** ([`best_first`]): the passing candidates by highest similarity, then smallest
//!    distance, then earliest position; the first is the representative.
//!
//! [`Verifying`] does 2 and 3 over ranked candidates; where only the representative is
//! wanted (a batch decision), a candidate need only reach the similarity of the best match
//! found before it, which leaves the representative as it is and stops most merges early
//! (and skips by the size bound the candidates that cannot reach it).

use super::minhash::{self, Bands};
use super::{Found, Shape};
use crate::batch_dedup::sketch;
use crate::verify::{jaccard_bound, jaccard_sorted_at_least, signature, Signature};
use crate::{Error, Result};

/// How far below `threshold` a candidate's similarity estimated from `width` min-hashes may
/// be and still be verified: five standard deviations of the estimate of a pair at the
/// threshold or above (sd = sqrt(J (1 - J) / width), largest at J = max(t, 0.5)), so that a
/// near-copy is lost this way with probability below 1e-6: 0.2 at t = 0.8 with 100 min-hashes.
pub fn estimate_margin(threshold: f64, width: usize) -> f64 {
    let j = threshold.max(0.5);
    5.0 * (j * (1.0 - j) / width.max(1) as f64).sqrt()
}

/// What a band bucket adds to the weight of each row it holds: a bucket read full
/// (`bucket_limit` rows: text that a template family shares) 1, any other `quorum`; a row is a
/// candidate when its weight reaches `quorum` (`full_bucket_quorum`).
pub fn bucket_weight(full: bool, quorum: usize) -> u32 {
    if full {
        1
    } else {
        quorum as u32
    }
}

/// A candidate as the ranking sees it: `(id, fingerprint, min-hash bytes, position)`.
pub type Candidate<'a> = (u32, u64, &'a [u8], u64);

/// What [`rank`] found.
pub struct Ranked {
    /// The candidates to verify, in order: `(id, SimHash distance)`.
    pub top: Vec<(u32, u32)>,
    /// Candidates estimated out of reach (not verified).
    pub out_of_reach: u64,
    /// Candidates within reach, before the cut to `limit`.
    pub in_reach: usize,
}

/// The candidates worth verifying against a text of min-hash `bytes` and fingerprint `fp`,
/// best first, at most `limit`.
pub fn rank<'a>(
    bytes: &[u8],
    fp: u64,
    threshold: f64,
    limit: usize,
    candidates: impl Iterator<Item = Candidate<'a>>,
) -> Ranked {
    let floor = threshold - estimate_margin(threshold, bytes.len());
    let mut out_of_reach = 0u64;
    // (id, score, distance, position)
    let mut c: Vec<(u32, u32, u32, u64)> = candidates
        .filter_map(|(id, theirs_fp, theirs, position)| {
            let est = minhash::estimate(bytes, theirs);
            if est < floor {
                out_of_reach += 1;
                return None;
            }
            let score = (est * 1000.0) as u32;
            Some((id, score, (fp ^ theirs_fp).count_ones(), position))
        })
        .collect();
    let in_reach = c.len();
    let key =
        |&(_, score, d, position): &(u32, u32, u32, u64)| (std::cmp::Reverse(score), d, position);
    if c.len() > limit {
        c.select_nth_unstable_by_key(limit - 1, key);
        c.truncate(limit);
    }
    c.sort_unstable_by_key(key);
    Ranked {
        top: c.into_iter().map(|(id, _, d, _)| (id, d)).collect(),
        out_of_reach,
        in_reach,
    }
}

/// A text as the verifier sees it: its sketch, the sketch's size and signature.
pub struct Verifiable<'a> {
    pub sketch: &'a [u32],
    pub count: usize,
    pub signature: Signature,
}

/// The Jaccard similarity of two sketches when it reaches `threshold` (`None` otherwise);
/// `theirs` is read only when the size bound lets the pair pass.
pub fn verify<'b>(
    threshold: f64,
    ours: &Verifiable<'_>,
    their_count: usize,
    their_signature: &Signature,
    theirs: impl FnOnce() -> Result<&'b [u32]>,
) -> Result<Option<f64>> {
    if jaccard_bound(ours.count, &ours.signature, their_count, their_signature) < threshold {
        return Ok(None);
    }
    Ok(jaccard_sorted_at_least(ours.sketch, theirs()?, threshold))
}

/// A ranked candidate as [`Verifying`] sees it (its sketch and its position are read only
/// when needed).
pub struct Ranked1 {
    pub id: u32,
    pub distance: u32,
    pub count: usize,
    pub signature: Signature,
}

/// [`verify`] of ranked candidates one by one against a text, and the passing ones
/// [`best_first`] ([`Verifying::finish`]). `best_only`: the bar rises to the similarity of the
/// best match so far, so later candidates are verified against it only; the first match is
/// the one the full run gives (a tie in similarity still passes the bar and is ordered by
/// distance, then position).
pub struct Verifying {
    threshold: f64,
    best_only: bool,
    bar: f64,
    /// `(similarity, distance, position, id)` of the passing candidates.
    found: Vec<(f64, u32, u64, u32)>,
    /// `(distance, similarity)` of each candidate that passed.
    pub passed: Vec<(u32, f64)>,
    /// Distance of each candidate below the threshold.
    pub failed: Vec<u32>,
    /// Candidates below the similarity of a better match found before them (`best_only`):
    /// whether they reach the threshold is not measured.
    pub outranked: u64,
}

impl Verifying {
    pub fn new(threshold: f64, best_only: bool) -> Verifying {
        Verifying {
            threshold,
            best_only,
            bar: threshold,
            found: Vec::new(),
            passed: Vec::new(),
            failed: Vec::new(),
            outranked: 0,
        }
    }

    /// Verifies the next ranked candidate; `theirs` reads its sketch when the size bound lets
    /// it reach the bar, `position` its place in the order when it passes.
    pub fn check<'b>(
        &mut self,
        ours: &Verifiable<'_>,
        c: &Ranked1,
        theirs: impl FnOnce() -> Result<&'b [u32]>,
        position: impl FnOnce() -> u64,
    ) -> Result<()> {
        match verify(self.bar, ours, c.count, &c.signature, theirs)? {
            Some(s) => {
                self.passed.push((c.distance, s));
                self.found.push((s, c.distance, position(), c.id));
                if self.best_only {
                    self.bar = self.bar.max(s);
                }
            }
            None if self.bar > self.threshold => self.outranked += 1,
            None => self.failed.push(c.distance),
        }
        Ok(())
    }

    /// The passing candidates as matches, best first (with `best_only`, the first is right
    /// and others may be missing).
    pub fn finish(&mut self) -> Vec<Found> {
        best_first(std::mem::take(&mut self.found))
    }
}

/// Passing candidates `(similarity, distance, position, id)` as matches, best first.
pub fn best_first(mut passed: Vec<(f64, u32, u64, u32)>) -> Vec<Found> {
    passed.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    passed.into_iter().map(|(s, d, _, r)| (r, d, s)).collect()
}

/// A caller's signed position as the unsigned key the rule orders by, order kept (a negative
/// position -- say a reference placed before the documents -- comes first, not last).
pub fn order_key(position: i64) -> u64 {
    (position as u64) ^ (1 << 63)
}

/// The decision rule with its settings, for candidates that the caller finds and holds.
#[derive(Clone, Debug)]
pub struct Rule {
    shape: Shape,
    threshold: f64,
    verify_limit: usize,
}

impl Rule {
    pub fn new(
        threshold: f64,
        bands: usize,
        rows: usize,
        shingle: usize,
        verify_limit: usize,
    ) -> Result<Rule> {
        crate::batch_dedup::check_shingle(shingle)?;
        if !(0.0..=1.0).contains(&threshold) || verify_limit == 0 {
            return Err(Error::InvalidArgument(format!(
                "threshold must be in [0, 1] and verify_limit >= 1, got {threshold} and \
                 {verify_limit}"
            )));
        }
        Ok(Rule {
            shape: Shape::new(shingle, true, Bands::new(bands, rows)?),
            threshold,
            verify_limit,
        })
    }

    /// Min-hashes per text (`bands * rows`).
    pub fn width(&self) -> usize {
        self.shape.bands.bands * self.shape.bands.rows
    }

    pub fn bands(&self) -> usize {
        self.shape.bands.bands
    }

    /// [`rank`] with this rule's threshold and limit.
    pub fn rank_with<'a>(
        &self,
        bytes: &[u8],
        fp: u64,
        candidates: impl Iterator<Item = Candidate<'a>>,
    ) -> Ranked {
        rank(bytes, fp, self.threshold, self.verify_limit, candidates)
    }

    /// Band keys (`bands` per text), min-hash bytes (`bands * rows` per text) and lengths in
    /// characters of prepared texts; a text with nothing to compare (empty) has length 0 and
    /// must never be a candidate.
    pub fn probes<S: AsRef<str> + Sync>(
        &self,
        norms: &[S],
        fps: &[u64],
    ) -> Result<(Vec<u32>, Vec<u8>, Vec<u32>)> {
        let probes = self.shape.probes(norms, fps)?.0;
        let mut keys = Vec::with_capacity(probes.len() * self.bands());
        let mut bytes = Vec::with_capacity(probes.len() * self.width());
        let mut lengths = Vec::with_capacity(probes.len());
        for p in probes {
            keys.extend_from_slice(&p.keys);
            bytes.extend_from_slice(&p.bytes);
            lengths.push(if p.count == 0 { 0 } else { p.length });
        }
        Ok((keys, bytes, lengths))
    }

    /// [`rank`] of candidates given as arrays (`cand_bytes` holds `width()` bytes each):
    /// indices into them, best first.
    pub fn rank(
        &self,
        bytes: &[u8],
        fp: u64,
        cand_bytes: &[u8],
        cand_fps: &[u64],
        cand_positions: &[i64],
    ) -> Result<Vec<usize>> {
        let m = self.width();
        let n = cand_fps.len();
        if bytes.len() != m || cand_bytes.len() != n * m || cand_positions.len() != n {
            return Err(Error::InvalidArgument(format!(
                "rank needs {m} bytes per text and one fingerprint and position per \
                 candidate; got {} bytes, {} candidate bytes, {n} fingerprints, {} positions",
                bytes.len(),
                cand_bytes.len(),
                cand_positions.len()
            )));
        }
        let candidates = (0..n).map(|i| {
            (
                i as u32,
                cand_fps[i],
                &cand_bytes[i * m..(i + 1) * m],
                order_key(cand_positions[i]),
            )
        });
        let ranked = self.rank_with(bytes, fp, candidates);
        Ok(ranked.top.into_iter().map(|(i, _)| i as usize).collect())
    }

    /// The candidates (prepared texts) that pass the verifier against `norm`, best first:
    /// `(index, distance, similarity)`. An empty text passes against nothing.
    pub fn verify<S: AsRef<str>>(
        &self,
        norm: &str,
        fp: u64,
        cand_norms: &[S],
        cand_fps: &[u64],
        cand_positions: &[i64],
    ) -> Result<Vec<Found>> {
        let n = cand_norms.len();
        if cand_fps.len() != n || cand_positions.len() != n {
            return Err(Error::InvalidArgument(format!(
                "verify needs one fingerprint and position per candidate text; got {n} texts, \
                 {} fingerprints, {} positions",
                cand_fps.len(),
                cand_positions.len()
            )));
        }
        let ours = sketch(norm, self.shape.shingle)?;
        if ours.is_empty() {
            return Ok(Vec::new());
        }
        let ours = Verifiable {
            count: ours.len(),
            signature: signature(&ours),
            sketch: &ours,
        };
        let mut passed = Vec::new();
        for (i, t) in cand_norms.iter().enumerate() {
            let theirs = sketch(t.as_ref(), self.shape.shingle)?;
            if theirs.is_empty() {
                continue;
            }
            let found = verify(
                self.threshold,
                &ours,
                theirs.len(),
                &signature(&theirs),
                || Ok(&theirs[..]),
            )?;
            if let Some(s) = found {
                let d = (fp ^ cand_fps[i]).count_ones();
                passed.push((s, d, order_key(cand_positions[i]), i as u32));
            }
        }
        Ok(best_first(passed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With `best_only`, the first match is the one verifying every candidate gives, on
    /// candidates made to tie and to pass at many similarities.
    #[test]
    fn best_only_keeps_the_first_match() {
        let mut x: u64 = 11;
        let mut next = |n: u64| super::super::tests::lcg(&mut x) % n;
        let mut outranked = 0;
        for _ in 0..2000 {
            let ours: Vec<u32> = (0..20 + next(40) as u32).map(|i| i * 7).collect();
            let theirs: Vec<Vec<u32>> = (0..1 + next(12))
                .map(|_| {
                    let mut t: Vec<u32> = ours
                        .iter()
                        .copied()
                        .filter(|_| next(10) >= next(3))
                        .collect();
                    t.extend((0..next(4) as u32).map(|i| 1 + i * 7));
                    t.sort_unstable();
                    t
                })
                .collect();
            let me = Verifiable {
                sketch: &ours,
                count: ours.len(),
                signature: signature(&ours),
            };
            let run = |best_only: bool| {
                let mut v = Verifying::new(0.7, best_only);
                for (i, t) in theirs.iter().enumerate() {
                    let c = Ranked1 {
                        id: i as u32,
                        distance: (i % 3) as u32,
                        count: t.len(),
                        signature: signature(t),
                    };
                    v.check(&me, &c, || Ok(&t[..]), || (i % 2) as u64).unwrap();
                }
                (v.finish(), v.outranked)
            };
            let (all, _) = run(false);
            let (best, skipped) = run(true);
            outranked += skipped;
            assert_eq!(all.first(), best.first());
        }
        assert!(
            outranked > 0,
            "no candidate was ever outranked: the test tests nothing"
        );
    }

    /// Candidates alike in all but their positions: the earliest comes first, a negative
    /// position (a caller's reference placed before its documents) before every other.
    #[test]
    fn ties_go_to_the_earliest_position_negative_ones_included() {
        let rule = Rule::new(0.8, 20, 5, 5, 1).unwrap();
        let text = "one two three four five six seven eight nine ten eleven twelve";
        let (_, bytes, _) = rule.probes(&[text], &[7]).unwrap();
        let twice = [bytes.clone(), bytes.clone()].concat();
        for (positions, first) in [([3, -5], 1), ([-5, 3], 0), ([-9, -5], 0), ([4, 3], 1)] {
            let ranked = rule.rank(&bytes, 7, &twice, &[7, 7], &positions).unwrap();
            assert_eq!(ranked, vec![first], "{positions:?}");
            let found = rule
                .verify(text, 7, &[text, text], &[7, 7], &positions)
                .unwrap();
            assert_eq!(found[0].0, first as u32, "{positions:?}");
        }
    }
}
