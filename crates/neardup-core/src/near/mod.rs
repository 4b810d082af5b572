//! The one decision of near-duplicate detection, with bounded work per document.
//!
//! Documents are visited in preference order. Each is compared with the documents *kept* so
//! far, never with dropped ones, and is dropped when one of them passes the verifier:
//!
//! 1. **candidates**: kept documents that share a MinHash band key with it ([`minhash`]; the
//!    chance of sharing one is a function of the very Jaccard similarity that decides, so
//!    unrelated texts of one domain rarely meet). Each band bucket is read up to its
//!    `bucket_limit` newest entries. A bucket read full (`bucket_limit` entries) is text that
//!    a template family shares, so its entries are candidates only when `full_bucket_quorum`
//!    of the document's full buckets hold them (or any other bucket does): a family's
//!    background stays out, its near-copies share several bands and stay in.
//! 2. **ranking**: by the similarity estimated from the low bytes of the `bands * rows`
//!    min-hashes (b-bit min-wise hashing; those estimated more than 5 standard deviations
//!    below the threshold go: 0.2 at 0.8 with 100 min-hashes), then the smallest SimHash
//!    distance, then the earliest kept; the first `verify_limit` go on.
//! 3. **verify**: exact Jaccard of the shingle sketches (`batch_dedup::sketch`), after the
//!    exact size bound; the best passing candidate (highest similarity, then nearest, then
//!    earliest) is the document's representative.
//!
//! With the verifier off (`verify == false`) the candidates are the kept documents within the
//! SimHash radius of the document's length (an exact index of the kept fingerprints), nearest
//! first, and the nearest decides.
//!
//! Because only kept documents are compared with, a template family or a repost cluster costs
//! each new member a bounded number of comparisons, and nothing chains: a document is dropped
//! only for a kept one that it is itself near. The two limits make this an approximation of
//! "compared with every kept document": their measured effect on recall is in docs/quality.md.
//!
//! Sketches are kept in a [`spill::SketchStore`] (memory up to a budget, then a temporary
//! file); what stays in memory per document is its fingerprint, length and band keys, plus,
//! for a kept document, one entry per band.

mod decision;
pub mod held;
pub mod minhash;
pub mod rule;
mod saved;
pub mod spill;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use crate::batch_dedup::{check_shingle, sketch};
use crate::parallel as pool;
use crate::verify::{signature, Signature};
use crate::{Error, Result};

use decision::Decision;
pub use minhash::Bands;
pub use rule::Rule;
pub use saved::FORMAT_VERSION as SAVED_FORMAT_VERSION;
pub use spill::SketchStore;

/// No entry (end of a bucket's list; a row not yet visited).
const NONE: u32 = u32::MAX;
/// A match: `(kept row, SimHash distance, similarity)`.
pub type Found = (u32, u32, f64);

/// Texts per feed below which one thread does the hashing.
const PARALLEL_MIN_TEXTS: usize = 64;

/// The policy of the decision (`neardup.Policy` carries the same fields).
#[derive(Clone, Debug)]
pub struct Config {
    pub bands: usize,
    pub rows: usize,
    pub shingle: usize,
    pub threshold: f64,
    /// Verify candidates by Jaccard (else the SimHash radius decides).
    pub verify: bool,
    pub k_short: u32,
    pub k_long: u32,
    pub short_chars: usize,
    pub bucket_limit: usize,
    /// How many full buckets must hold a row found in full buckets only (1: any).
    pub full_bucket_quorum: usize,
    pub verify_limit: usize,
    /// Bytes of sketches held in memory before they spill to a file in `spill_dir`.
    pub memory_budget: usize,
    pub spill_dir: PathBuf,
}

impl Config {
    fn check(&self) -> Result<()> {
        check_shingle(self.shingle)?;
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if !(0.0..=1.0).contains(&self.threshold) {
            return bad(format!(
                "threshold must be in [0, 1], got {}",
                self.threshold
            ));
        }
        if self.k_short > 64 || self.k_long > 64 {
            return bad(format!(
                "k_short and k_long must be in 0..64, got {} and {}",
                self.k_short, self.k_long
            ));
        }
        if self.bucket_limit == 0 || self.verify_limit == 0 {
            return bad(format!(
                "bucket_limit and verify_limit must be >= 1, got {} and {}",
                self.bucket_limit, self.verify_limit
            ));
        }
        if !(1..=self.bands).contains(&self.full_bucket_quorum) {
            return bad(format!(
                "full_bucket_quorum must be in 1..={} (the bands), got {}",
                self.bands, self.full_bucket_quorum
            ));
        }
        Ok(())
    }

    /// The SimHash radius of a text of `length` characters (the verifier-off decision).
    pub fn radius(&self, length: usize) -> u32 {
        if length <= self.short_chars {
            self.k_short
        } else {
            self.k_long
        }
    }
}

/// What one [`Engine::decide`] run found, per row (indexed by feeding order), plus counters.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The kept row this row duplicates (itself when kept or not yet visited).
    pub representative: Vec<i64>,
    /// SimHash distance to the representative (0 when kept).
    pub distance: Vec<u32>,
    /// Verifier similarity to the representative (1.0 when kept or without a verifier).
    pub similarity: Vec<f64>,
    /// Rows with nothing to compare (an empty prepared text): never copies, never candidates.
    pub empty: Vec<bool>,
    /// Every verified pair `(earlier, later, distance, similarity)` when asked for.
    pub pairs: Vec<(u32, u32, u32, f64)>,
    pub stats: Stats,
}

/// Counters of a decision run.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Rows visited.
    pub documents: u64,
    /// Distinct candidates found in the band buckets (or within the radius), before the cap.
    pub candidates: u64,
    /// Candidates compared by the verifier (or taken, without one).
    pub compared: u64,
    /// Candidates whose estimated similarity is far below the threshold (not verified).
    pub estimated_out: u64,
    /// Rows with more candidates than `verify_limit`.
    pub capped: u64,
    /// Bucket reads stopped at `bucket_limit`.
    pub buckets_cut: u64,
    /// Rows found in full buckets only, fewer than `full_bucket_quorum` of them: left out.
    pub unconfirmed: u64,
    /// Rows with nothing to compare (empty text).
    pub empty: u64,
    /// Candidates verified against the similarity of a better match of the same text found
    /// before them (a decision needs each text's best match only) that did not reach it:
    /// whether they pass the threshold is not measured.
    pub outranked: u64,
    /// Compared candidates by SimHash distance (0..=64), passing and failing the verifier.
    pub distance_passed: Vec<u64>,
    pub distance_failed: Vec<u64>,
    /// Passing candidates by similarity, in 100 bins of width 0.01 (the last holds 1.0; a
    /// failing candidate's merge stops once it cannot pass, so its similarity is not known).
    pub similarity: Vec<u64>,
}

/// Per-row data of a corpus fed in chunks, and the decision over it.
pub struct Engine {
    cfg: Config,
    bands: Bands,
    fps: Vec<u64>,
    lengths: Vec<u32>,
    keys: Vec<u32>,
    /// Per row: the low bytes of its `bands * rows` min-hashes (similarity estimates).
    minhash_bytes: Vec<u8>,
    /// Per row: the [`signature`] of its sketch (see [`crate::verify::jaccard_bound`]).
    signatures: Vec<Signature>,
    sketches: SketchStore,
    run: Option<Decision>,
}

impl Engine {
    pub fn new(cfg: Config) -> Result<Engine> {
        cfg.check()?;
        let bands = Bands::new(cfg.bands, cfg.rows)?;
        let sketches = SketchStore::new(cfg.memory_budget, &cfg.spill_dir);
        Ok(Engine {
            cfg,
            bands,
            fps: Vec::new(),
            lengths: Vec::new(),
            keys: Vec::new(),
            minhash_bytes: Vec::new(),
            signatures: Vec::new(),
            sketches,
            run: None,
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn len(&self) -> usize {
        self.fps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fps.is_empty()
    }

    /// Bytes held in memory for the rows fed so far (not the decision's tables).
    pub fn memory_bytes(&self) -> usize {
        self.fps.capacity() * 8
            + self.lengths.capacity() * 4
            + self.keys.capacity() * 4
            + self.minhash_bytes.capacity()
            + self.signatures.capacity() * 32
            + self.sketches.memory_bytes()
    }

    pub fn spilled_bytes(&self) -> u64 {
        self.sketches.spilled_bytes()
    }

    /// Adds prepared (normalised) texts and their fingerprints as the next rows: their
    /// sketches and band keys are computed here (both cores for large chunks). Rows may be
    /// added while a decision is under way (the online deduplicator does).
    pub fn feed<S: AsRef<str> + Sync>(&mut self, norms: &[S], fps: &[u64]) -> Result<()> {
        self.feed_probes(self.shape().probes(norms, fps)?)
    }

    /// [`Engine::feed`] of texts whose probes were computed beforehand ([`Shape::probes`] of
    /// this engine's [`Engine::shape`], on another thread while this one decided): refused,
    /// with nothing added, when they are of another shape.
    pub fn feed_probes(&mut self, probes: Probes) -> Result<()> {
        let (b, m) = (self.cfg.bands, self.cfg.bands * self.cfg.rows);
        if probes
            .0
            .iter()
            .any(|p| p.keys.len() != b || p.bytes.len() != m)
        {
            return Err(Error::InvalidArgument(format!(
                "probes of another shape than this engine's ({b} bands of {} rows)",
                self.cfg.rows
            )));
        }
        probes
            .0
            .into_iter()
            .try_for_each(|p| self.push(p).map(|_| ()))
    }

    /// Stores a probe of a text as the next row.
    fn push(&mut self, p: Probe) -> Result<usize> {
        self.sketches.push(&p.sketch)?;
        self.minhash_bytes.extend_from_slice(&p.bytes);
        self.signatures.push(p.signature);
        self.keys.extend_from_slice(&p.keys);
        self.lengths.push(p.length);
        self.fps.push(p.fp);
        Ok(self.fps.len() - 1)
    }

    /// What computes probes of texts without the engine (another thread may use it meanwhile).
    pub fn shape(&self) -> Shape {
        Shape::new(self.cfg.shingle, self.cfg.verify, self.bands.clone())
    }

    /// The stored row `row` as a probe (its sketch read back from the store).
    fn probe_of(&self, row: usize) -> Probe {
        let (b, m) = (self.cfg.bands, self.cfg.bands * self.cfg.rows);
        Probe {
            fp: self.fps[row],
            length: self.lengths[row],
            count: self.sketches.count(row),
            sketch: Vec::new(),
            stored: Some(row),
            keys: self.keys[row * b..(row + 1) * b].to_vec(),
            bytes: self.minhash_bytes[row * m..(row + 1) * m].to_vec(),
            signature: self.signatures[row],
        }
    }

    fn check_rows(&self, rows: &[i64]) -> Result<()> {
        let n = self.len();
        match rows.iter().find(|&&r| r < 0 || r as u64 >= n as u64) {
            Some(&r) => Err(Error::InvalidArgument(format!("row {r} is outside 0..{n}"))),
            None => Ok(()),
        }
    }

    /// The online decision (started when needed; never all-pairs).
    fn online(&mut self) -> Result<Decision> {
        match self.run.take() {
            Some(run) if !run.all_pairs => Ok(run),
            Some(run) => {
                self.run = Some(run);
                Err(Error::InvalidArgument(
                    "an all-pairs run is under way (reset it first)".into(),
                ))
            }
            None => Decision::new(self, false),
        }
    }

    /// `f` with the online decision (started when needed), its arrays grown to every row.
    fn with_online<T>(
        &mut self,
        f: impl FnOnce(&mut Decision, &mut Engine) -> Result<T>,
    ) -> Result<T> {
        let mut run = self.online()?;
        run.grow(self.len());
        let result = f(&mut run, self);
        self.run = Some(run);
        result
    }

    /// The kept rows that pass the verifier against each text (not stored), best first:
    /// `(row, distance, similarity)`; the same candidates, limits and rule as [`Engine::decide`].
    pub fn check<S: AsRef<str> + Sync>(
        &mut self,
        norms: &[S],
        fps: &[u64],
    ) -> Result<Vec<Vec<Found>>> {
        let probes = self.shape().probes(norms, fps)?;
        self.check_probes(probes)
    }

    /// [`Engine::check`] of probes made by [`Engine::shape`].
    pub fn check_probes(&mut self, probes: Probes) -> Result<Vec<Vec<Found>>> {
        let mut probes = probes.0;
        self.with_online(|run, engine| {
            let found = run.search_all(engine, &mut probes);
            found
                .into_iter()
                .map(|f| {
                    let (matches, counts) = f?;
                    run.count(counts);
                    Ok(matches)
                })
                .collect()
        })
    }

    /// Check-and-add of stored rows, in order: each row's matches among the kept rows (best
    /// first); a row with none is kept (so later rows of the call see it).
    pub fn check_and_add(&mut self, rows: &[i64]) -> Result<Vec<Vec<Found>>> {
        self.check_rows(rows)?;
        self.with_online(|run, engine| run.visit_many(engine, rows, false))
    }

    /// Check-and-add of texts, in order: each text's matches among the kept rows (best first);
    /// a text with none is stored as the next row and kept (so later texts see it), and its
    /// row is returned with the matches (-1 for a text not kept). Texts that are not kept
    /// leave nothing behind.
    pub fn check_and_keep<S: AsRef<str> + Sync>(
        &mut self,
        norms: &[S],
        fps: &[u64],
    ) -> Result<Vec<(Vec<Found>, i64)>> {
        let probes = self.shape().probes(norms, fps)?;
        self.check_and_keep_probes(probes)
    }

    /// [`Engine::check_and_keep`] of probes made by [`Engine::shape`].
    pub fn check_and_keep_probes(&mut self, probes: Probes) -> Result<Vec<(Vec<Found>, i64)>> {
        self.with_online(|run, engine| {
            let mut kept: Vec<usize> = Vec::new();
            let result = run.keep_new(engine, probes.0, &mut kept);
            if result.is_err() {
                // a call that fails keeps nothing: its rows are forgotten
                for r in kept {
                    run.forget(engine, r)?;
                }
            }
            result
        })
    }

    /// Keeps stored rows without checking them (an add).
    pub fn keep(&mut self, rows: &[i64]) -> Result<()> {
        self.check_rows(rows)?;
        self.with_online(|run, engine| rows.iter().try_for_each(|&r| run.keep(engine, r as usize)))
    }

    /// Forgets kept rows: they are no longer candidates (removed, replaced or expired texts).
    pub fn forget(&mut self, rows: &[i64]) -> Result<()> {
        self.check_rows(rows)?;
        self.with_online(|run, engine| {
            rows.iter()
                .try_for_each(|&r| run.forget(engine, r as usize))
        })
    }

    /// Visits `rows` next in the decision under way (started by the first call after
    /// [`Engine::reset`]); call repeatedly with consecutive slices of one preference order.
    /// With `all_pairs`, every row is compared with every earlier one (not only the kept) and
    /// each verified pair is recorded; no row is dropped.
    pub fn decide(&mut self, rows: &[i64], all_pairs: bool) -> Result<()> {
        self.check_rows(rows)?;
        if self.run.is_none() {
            self.run = Some(Decision::new(self, all_pairs)?);
        }
        let Some(mut run) = self.run.take() else {
            return Ok(());
        };
        if run.all_pairs != all_pairs {
            self.run = Some(run);
            return Err(Error::InvalidArgument(
                "all_pairs changed in the middle of a decision".into(),
            ));
        }
        run.grow(self.len());
        let result = run.visit_many(self, rows, true).map(|_| ());
        self.run = Some(run);
        result
    }

    /// The outcome of the decision so far (rows not visited are their own representative).
    pub fn outcome(&self) -> Outcome {
        match &self.run {
            Some(run) => run.outcome.clone(),
            None => Decision::empty_outcome(self.len()),
        }
    }

    /// Drops the rows that the online decision has forgotten, with their memory and their
    /// share of the temporary file: the rows left are renumbered in their order and the
    /// decision's tables rebuilt as they were. Returns each old row's new row (-1: dropped).
    /// A long-running deduplicator whose texts expire calls it once forgotten rows outnumber
    /// the live ones, so that its memory follows the texts it holds, not all it ever held.
    pub fn compact(&mut self) -> Result<Vec<i64>> {
        let n = self.len();
        let Some(mut run) = self.run.take() else {
            return Ok((0..n as i64).collect());
        };
        if run.all_pairs {
            self.run = Some(run);
            return Err(Error::InvalidArgument(
                "compact is for the online decision, not an all-pairs run".into(),
            ));
        }
        run.grow(n);
        let result = self.compacted(&run);
        match result {
            Ok((fresh, new_row)) => {
                *self = fresh;
                Ok(new_row)
            }
            Err(e) => {
                self.run = Some(run);
                Err(e)
            }
        }
    }

    /// A new engine of the rows of `run` not forgotten, and the new row of each old one.
    fn compacted(&self, run: &Decision) -> Result<(Engine, Vec<i64>)> {
        let mut fresh = Engine::new(self.cfg.clone())?;
        let mut new_row = vec![-1i64; self.len()];
        let mut buf = Vec::new();
        for (r, new) in new_row.iter_mut().enumerate() {
            if run.is_forgotten(r) {
                continue;
            }
            let mut p = self.probe_of(r);
            p.sketch = self.sketches.get(r, &mut buf)?.to_vec();
            *new = fresh.push(p)? as i64;
        }
        let rebuilt = run.compacted(self, &fresh, &new_row)?;
        fresh.run = Some(rebuilt);
        Ok((fresh, new_row))
    }

    /// Forgets the decision under way (the rows stay).
    pub fn reset(&mut self) {
        self.run = None;
    }

    /// Bytes held by the decision's tables.
    pub fn decision_bytes(&self) -> usize {
        self.run.as_ref().map_or(0, Decision::memory_bytes)
    }
}

/// The part of an engine's settings that turns texts into probes: held apart so that a caller
/// can compute probes (the costly hashing) without locking the engine.
#[derive(Clone, Debug)]
pub struct Shape {
    shingle: usize,
    verify: bool,
    bands: Bands,
}

/// Texts made ready for [`Engine::check_probes`] / [`Engine::check_and_keep_probes`] /
/// [`Engine::feed_probes`].
pub struct Probes(Vec<Probe>);

impl Probes {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Shape {
    pub fn new(shingle: usize, verify: bool, bands: Bands) -> Shape {
        Shape {
            shingle,
            verify,
            bands,
        }
    }

    /// The probes of prepared texts and their fingerprints (both cores for large batches).
    pub fn probes<S: AsRef<str> + Sync>(&self, norms: &[S], fps: &[u64]) -> Result<Probes> {
        if norms.len() != fps.len() {
            return Err(Error::InvalidArgument(format!(
                "norms has {} items but fingerprints has {}",
                norms.len(),
                fps.len()
            )));
        }
        let (shingle, bands, verify) = (self.shingle, &self.bands, self.verify);
        let items: Vec<(&S, u64)> = norms.iter().zip(fps.iter().copied()).collect();
        Ok(Probes(pool::map(
            &items,
            items.len() >= PARALLEL_MIN_TEXTS,
            8,
            |&(t, fp)| {
                let t = t.as_ref();
                let mut sk = sketch(t, shingle).unwrap_or_default(); // (the shingle width is checked)
                let mut keys = vec![0u32; bands.bands];
                let mut bytes = vec![0u8; bands.bands * bands.rows];
                if verify {
                    bands.keys_and_bytes(&sk, &mut Vec::new(), &mut keys, &mut bytes);
                }
                let signature = signature(&sk);
                if !verify {
                    sk.clear(); // (nothing reads it)
                }
                Probe {
                    fp,
                    length: t.chars().count() as u32,
                    count: sk.len(),
                    sketch: sk,
                    stored: None,
                    keys,
                    bytes,
                    signature,
                }
            },
        )))
    }
}

/// What the decision reads of one text: a stored row's data, or a text only checked.
#[derive(Default)]
struct Probe {
    fp: u64,
    length: u32,
    /// Hashes in the sketch.
    count: usize,
    /// The sketch (of a stored row: read from the store when first needed).
    sketch: Vec<u32>,
    stored: Option<usize>,
    keys: Vec<u32>,
    bytes: Vec<u8>,
    signature: Signature,
}
