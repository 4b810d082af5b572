//! A decision run of [`Engine`]: the band tables of the kept rows, the candidate search and
//! the outcome so far.

use std::sync::{Mutex, PoisonError};

use rayon::prelude::*;

use super::minhash::MAX_BANDS;
use super::{rule, Engine, Found, Outcome, Probe, Stats, NONE};
use crate::index::{Id, IdRef, Index, Options};
use crate::parallel as pool;
use crate::{Error, Result};

/// Bucket values with this bit set index [`Decision::rings`].
const HOT: u32 = 1 << 31;
/// Bucket values (and older nodes) with this bit set and [`HOT`] clear are one row, held in
/// place (most buckets hold one row: no node to read); others index [`Decision::nodes`].
const ROW: u32 = 1 << 30;
/// A short list becomes a ring when it reaches this many rows (or `bucket_limit`).
const HOT_AFTER: usize = 8;

/// Reads `values` (each a load from memory that a later step needs) and nothing more: asked
/// for one after the other with no work between, their cache misses overlap.
fn overlap_misses(values: impl Iterator<Item = u32>) {
    std::hint::black_box(values.fold(0, |a, b| a ^ b));
}

/// The newest `capacity` rows of a busy bucket, contiguous (reading one costs a few cache
/// lines, where a list of that length costs a cache miss per row), and the older rows they
/// pushed out, which take their place again when rows are forgotten.
struct Ring {
    rows: Vec<u32>,
    /// Where the next row goes once the ring is full (the oldest row).
    next: usize,
    /// Rows ever added (more than the capacity: the bucket was cut).
    added: u64,
    /// Rows pushed out of `rows`, oldest first (4 bytes each; read only to refill `rows`).
    older: Vec<u32>,
}

impl Ring {
    fn new(rows: impl IntoIterator<Item = u32>, capacity: usize) -> Ring {
        let mut ring = Ring {
            rows: Vec::new(),
            next: 0,
            added: 0,
            older: Vec::new(),
        };
        for r in rows {
            ring.push(r, capacity);
        }
        ring
    }

    fn push(&mut self, row: u32, capacity: usize) {
        if self.rows.len() < capacity {
            self.rows.push(row);
        } else {
            let out = std::mem::replace(&mut self.rows[self.next], row);
            self.older.push(out);
            self.next = (self.next + 1) % capacity;
        }
        self.added += 1;
    }

    /// Drops forgotten rows and refills from the rows pushed out, newest first: the ring holds
    /// the newest `capacity` live rows again.
    fn drop_dead(&mut self, capacity: usize, dead: &[bool]) {
        let (newer, oldest) = self.rows.split_at(self.next);
        let live: Vec<u32> = oldest
            .iter()
            .chain(newer)
            .copied()
            .filter(|&r| !dead[r as usize])
            .collect();
        let mut rows = Vec::with_capacity(capacity);
        while live.len() + rows.len() < capacity {
            match self.older.pop() {
                Some(r) if !dead[r as usize] => rows.push(r),
                Some(_) => {}
                None => break,
            }
        }
        rows.reverse();
        rows.extend(live);
        self.rows = rows;
        self.next = 0;
    }
}

/// Checks of fewer texts (read-only searches, [`Decision::search_all`]) run on this thread.
const PARALLEL_MIN_CHECKS: usize = 8;

/// Working memory of candidate searches (one per thread).
#[derive(Default)]
struct Scratch {
    /// Per row: the stamp of the last search that met it, and its place in `found`.
    tally: Vec<(u32, u32)>,
    stamp: u32,
    found: Vec<u32>,
    /// Per row of `found`: the weight of the buckets that hold it (see `band_candidates`).
    weight: Vec<u32>,
    /// The rows of the buckets read, with the weight of their bucket (see `band_candidates`).
    rows: Vec<(u32, u32)>,
    buf_a: Vec<u32>,
    buf_b: Vec<u32>,
}

/// What one search adds to the outcome's counters (added when its result is used).
#[derive(Default)]
pub(super) struct Counts {
    candidates: u64,
    estimated_out: u64,
    capped: u64,
    compared: u64,
    buckets_cut: u64,
    unconfirmed: u64,
    empty: u64,
    outranked: u64,
    /// `(distance, similarity)` of each passing candidate.
    passed: Vec<(u32, f64)>,
    /// Distance of each failing candidate.
    failed: Vec<u32>,
}

/// A search's matches and counters.
type Searched = (Vec<Found>, Counts);

/// One decision run: the band tables of the kept rows and the outcome so far.
pub(super) struct Decision {
    pub(super) all_pairs: bool,
    /// Per band: key -> its bucket: a row (with [`ROW`] set), the newest node of a short list,
    /// or (with [`HOT`] set) a ring of the bucket's newest rows, for the few keys that many kept
    /// rows share.
    heads: Vec<foldhash::HashMap<u32, u32>>,
    /// Nodes of the short lists: (row, older node or, for the oldest, its row with [`ROW`]).
    nodes: Vec<(u32, u32)>,
    rings: Vec<Ring>,
    /// Kept fingerprints, for the verifier-off decision.
    simhash: Option<Index>,
    /// Per row: its place in the order (NONE: not visited).
    position: Vec<u32>,
    /// Per row: forgotten (never a candidate again).
    dead: Vec<bool>,
    visited: u32,
    pub(super) outcome: Outcome,
    /// Per thread of the pool (and one for this thread, the first).
    scratch: Vec<Mutex<Scratch>>,
}

impl Decision {
    pub(super) fn empty_outcome(n: usize) -> Outcome {
        Outcome {
            representative: (0..n as i64).collect(),
            distance: vec![0; n],
            similarity: vec![1.0; n],
            empty: vec![false; n],
            pairs: Vec::new(),
            stats: Stats {
                distance_passed: vec![0; 65],
                distance_failed: vec![0; 65],
                similarity: vec![0; 100],
                ..Stats::default()
            },
        }
    }

    pub(super) fn new(engine: &Engine, all_pairs: bool) -> Result<Decision> {
        let n = engine.len();
        let simhash = if engine.cfg.verify {
            None
        } else {
            Some(Index::new(Options {
                k: engine.cfg.k_short.max(engine.cfg.k_long),
                capacity: Some(n),
                ..Options::default()
            })?)
        };
        Ok(Decision {
            all_pairs,
            heads: (0..engine.cfg.bands)
                .map(|_| foldhash::HashMap::default())
                .collect(),
            nodes: Vec::new(),
            rings: Vec::new(),
            simhash,
            position: vec![NONE; n],
            dead: vec![false; n],
            visited: 0,
            outcome: Decision::empty_outcome(n),
            scratch: (0..=pool::num_threads())
                .map(|_| Mutex::new(Scratch::default()))
                .collect(),
        })
    }

    pub(super) fn memory_bytes(&self) -> usize {
        let maps: usize = self.heads.iter().map(|h| h.capacity() * 9).sum();
        let rings: usize = self
            .rings
            .iter()
            .map(|r| (r.rows.capacity() + r.older.capacity()) * 4 + 64)
            .sum();
        let scratch: usize = self
            .scratch
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.tally.capacity() * 8))
            .sum();
        maps + self.nodes.capacity() * 8
            + rings
            + scratch
            + self.position.capacity() * 4
            + self.outcome.representative.capacity() * 20
            + self.outcome.pairs.capacity() * 24
            + self.simhash.as_ref().map_or(0, Index::memory_bytes)
    }

    /// Grows the per-row arrays to `n` rows (rows fed after the decision began).
    pub(super) fn grow(&mut self, n: usize) {
        let have = self.position.len();
        if n <= have {
            return;
        }
        self.position.resize(n, NONE);
        self.dead.resize(n, false);
        let o = &mut self.outcome;
        o.representative.extend(have as i64..n as i64);
        o.distance.resize(n, 0);
        o.similarity.resize(n, 1.0);
        o.empty.resize(n, false);
    }

    /// Distinct live rows in the buckets of `keys`, unordered. A row that only full buckets
    /// (holding `bucket_limit` live rows: text a template family shares) hold is left out
    /// unless `quorum` of them do: each full bucket weighs 1, any other `quorum`.
    fn band_candidates(
        &self,
        keys: &[u32],
        limit: usize,
        quorum: usize,
        sc: &mut Scratch,
        counts: &mut Counts,
    ) -> Vec<u32> {
        if sc.tally.len() < self.position.len() {
            sc.tally.resize(self.position.len(), (NONE, 0));
        }
        // a fresh stamp per call marks the rows this call has met
        sc.stamp = sc.stamp.wrapping_add(1);
        if sc.stamp == NONE {
            sc.tally.fill((NONE, 0));
            sc.stamp = 0;
        }
        let stamp = sc.stamp;
        let quorum = quorum as u32;
        // (every band's lookup first, then the first node or ring of each: their cache misses
        // overlap)
        let mut heads = [NONE; MAX_BANDS];
        for ((head, key), table) in heads.iter_mut().zip(keys).zip(&self.heads) {
            *head = table.get(key).copied().unwrap_or(NONE);
        }
        let heads = &heads[..keys.len()];
        overlap_misses(
            heads
                .iter()
                .filter(|&&h| h != NONE && h & ROW == 0)
                .map(|&h| match h & HOT {
                    0 => self.nodes[h as usize].0,
                    _ => self.rings[(h & !HOT) as usize].rows.len() as u32,
                }),
        );
        // the buckets' rows with the weight of their bucket, ...
        let rows = &mut sc.rows;
        rows.clear();
        let mut full = false;
        for &head in heads {
            if head != NONE && head & HOT != 0 {
                let ring = &self.rings[(head & !HOT) as usize];
                let w = rule::bucket_weight(ring.rows.len() >= limit, quorum as usize);
                full |= w < quorum;
                rows.extend(ring.rows.iter().map(|&r| (r, w)));
                if ring.added > ring.rows.len() as u64 {
                    counts.buckets_cut += 1;
                }
                continue;
            }
            // (a list holds at most `min(HOT_AFTER, limit)` rows: full only for a small limit)
            let w = rule::bucket_weight(
                limit <= HOT_AFTER && self.live_rows(head) >= limit,
                quorum as usize,
            );
            full |= w < quorum;
            rows.extend(self.list(head).map(|r| (r, w)));
        }
        // ... their tallies asked for at once (the misses overlap; whether a row is forgotten
        // is read once per distinct row, below), then counted
        let (dead, tally, weight) = (&self.dead, &mut sc.tally, &mut sc.weight);
        overlap_misses(rows.iter().map(|&(r, _)| tally[r as usize].0));
        let mut found = std::mem::take(&mut sc.found);
        found.clear();
        weight.clear();
        for &(r, w) in rows.iter() {
            let t = &mut tally[r as usize];
            if t.0 == stamp {
                weight[t.1 as usize] += w;
            } else if !dead[r as usize] {
                *t = (stamp, found.len() as u32);
                found.push(r);
                weight.push(w);
            }
        }
        if full {
            let before = found.len();
            let mut w = weight.iter();
            found.retain(|_| w.next().is_some_and(|&w| w >= quorum));
            counts.unconfirmed += (before - found.len()) as u64;
        }
        found
    }
    /// The rows of the short bucket `head` (a row or a list), newest first.
    fn list(&self, head: u32) -> impl Iterator<Item = u32> + '_ {
        let mut next = head;
        std::iter::from_fn(move || match next {
            NONE => None,
            n if n & ROW != 0 => {
                next = NONE;
                Some(n & !ROW)
            }
            n => {
                let (r, older) = self.nodes[n as usize];
                next = older;
                Some(r)
            }
        })
    }

    /// The live rows in the short bucket `head`.
    fn live_rows(&self, head: u32) -> usize {
        self.list(head).filter(|&r| !self.dead[r as usize]).count()
    }

    /// Puts `row` in the tables.
    pub(super) fn insert(&mut self, engine: &Engine, row: usize) -> Result<()> {
        if let Some(index) = self.simhash.as_mut() {
            return index.add(IdRef::Int(row as i64), engine.fps[row], 0.0);
        }
        let b = engine.cfg.bands;
        let limit = engine.cfg.bucket_limit;
        let hot_after = HOT_AFTER.min(limit);
        if row >= ROW as usize || self.nodes.len() + b >= ROW as usize {
            return Err(Error::InvalidArgument(format!(
                "a decision holds fewer than {ROW} rows and list nodes (row {row}, {} nodes)",
                self.nodes.len()
            )));
        }
        for (band, &key) in engine.keys[row * b..(row + 1) * b].iter().enumerate() {
            let head = self.heads[band].get(&key).copied().unwrap_or(NONE);
            if head == NONE {
                self.heads[band].insert(key, ROW | row as u32);
            } else if head & HOT != 0 {
                self.rings[(head & !HOT) as usize].push(row as u32, limit);
            } else if self.list(head).take(hot_after).count() >= hot_after {
                // the list becomes a ring, oldest first (its nodes stay, unused)
                let mut rows = Vec::with_capacity(limit.min(64));
                rows.extend(self.list(head));
                rows.reverse();
                rows.retain(|&r| !self.dead[r as usize]);
                rows.push(row as u32);
                let ring = Ring::new(rows, limit);
                self.heads[band].insert(key, HOT | self.rings.len() as u32);
                self.rings.push(ring);
            } else {
                let node = self.nodes.len() as u32;
                self.heads[band].insert(key, node);
                self.nodes.push((row as u32, head));
            }
        }
        Ok(())
    }

    /// Forgets `row`: never a candidate again; in a busy bucket its place goes to the newest
    /// row that was pushed out.
    pub(super) fn forget(&mut self, engine: &Engine, row: usize) -> Result<()> {
        if self.dead[row] {
            return Ok(());
        }
        self.dead[row] = true;
        let inserted = self.position[row] != NONE
            && self.outcome.representative[row] == row as i64
            && !self.outcome.empty[row];
        if !inserted {
            return Ok(());
        }
        if let Some(index) = self.simhash.as_mut() {
            return match index.remove(IdRef::Int(row as i64)) {
                Err(Error::NotFound(_)) => Ok(()),
                other => other,
            };
        }
        let b = engine.cfg.bands;
        for (band, key) in engine.keys[row * b..(row + 1) * b].iter().enumerate() {
            let head = self.heads[band].get(key).copied().unwrap_or(NONE);
            if head != NONE && head & HOT != 0 {
                let ring = &mut self.rings[(head & !HOT) as usize];
                ring.drop_dead(engine.cfg.bucket_limit, &self.dead);
            }
        }
        Ok(())
    }

    /// Takes `row`'s place in the order (refused for a row already placed).
    pub(super) fn place(&mut self, row: usize) -> Result<()> {
        if self.position[row] != NONE {
            return Err(Error::InvalidArgument(format!(
                "row {row} is visited twice (the order must be a permutation)"
            )));
        }
        self.position[row] = self.visited;
        self.visited += 1;
        Ok(())
    }

    /// Keeps `row` unchecked (an add): it becomes a candidate of later texts.
    pub(super) fn keep(&mut self, engine: &Engine, row: usize) -> Result<()> {
        self.place(row)?;
        if engine.lengths[row] == 0 || (engine.cfg.verify && engine.sketches.count(row) == 0) {
            self.outcome.empty[row] = true;
            return Ok(());
        }
        self.insert(engine, row)
    }

    /// Whether `row` has nothing to compare (an empty text): never a copy, never a candidate.
    fn is_empty_row(engine: &Engine, row: usize) -> bool {
        engine.lengths[row] == 0 || (engine.cfg.verify && engine.sketches.count(row) == 0)
    }

    /// Records the outcome of visiting `row` (placed) whose search found `found`.
    fn settle(&mut self, engine: &Engine, row: usize, found: Searched) -> Result<Vec<Found>> {
        let (matches, counts) = found;
        self.outcome.stats.documents += 1;
        self.count(counts);
        if Decision::is_empty_row(engine, row) {
            self.outcome.empty[row] = true;
            return Ok(matches);
        }
        if self.all_pairs {
            for &(cand, d, similarity) in &matches {
                self.outcome.pairs.push((cand, row as u32, d, similarity));
            }
            self.insert(engine, row)?;
            return Ok(matches);
        }
        match matches.first() {
            Some(&(cand, d, similarity)) => {
                self.outcome.representative[row] = i64::from(cand);
                self.outcome.distance[row] = d;
                self.outcome.similarity[row] = similarity;
            }
            None => self.insert(engine, row)?,
        }
        Ok(matches)
    }

    /// Visits `rows` in order: each row's matches among the kept rows (best first), recorded
    /// as its outcome; a row without any is kept (in all-pairs mode every row is, and each
    /// match is recorded as a pair). `best_only`: the caller needs each row's best match only
    /// (the outcome), so the other matches may be left out.
    pub(super) fn visit_many(
        &mut self,
        engine: &Engine,
        rows: &[i64],
        best_only: bool,
    ) -> Result<Vec<Vec<Found>>> {
        let best_only = best_only && !self.all_pairs;
        let mut out = Vec::with_capacity(rows.len());
        for &r in rows {
            let row = r as usize;
            self.place(row)?;
            let mut probe = engine.probe_of(row);
            let found = self.search_here(engine, &mut probe, best_only)?;
            out.push(self.settle(engine, row, found)?);
        }
        Ok(out)
    }

    /// Check-and-keep of texts in order: each text's matches among the kept rows (best first);
    /// a text with none is stored as the next row of `engine` and kept (pushed to `kept`), and
    /// its row is returned with the matches (-1: not kept).
    pub(super) fn keep_new(
        &mut self,
        engine: &mut Engine,
        probes: Vec<Probe>,
        kept: &mut Vec<usize>,
    ) -> Result<Vec<(Vec<Found>, i64)>> {
        let mut out = Vec::with_capacity(probes.len());
        for mut probe in probes {
            let (matches, counts) = self.search_here(engine, &mut probe, false)?;
            self.count(counts);
            if !matches.is_empty() {
                out.push((matches, -1));
                continue;
            }
            let empty = probe.length == 0 || (engine.cfg.verify && probe.count == 0);
            let row = engine.push(probe)?;
            self.grow(engine.len());
            self.place(row)?;
            kept.push(row);
            if empty {
                self.outcome.empty[row] = true;
            } else {
                self.insert(engine, row)?;
            }
            out.push((matches, row as i64));
        }
        Ok(out)
    }

    /// Whether `row` was forgotten.
    pub(super) fn is_forgotten(&self, row: usize) -> bool {
        self.dead[row]
    }

    /// This decision over the rows of `fresh`, the rows of `old` renumbered by `new_row`
    /// (-1: forgotten): visited rows take their places in the same order and the kept ones
    /// go back in the tables; the counters carry over.
    pub(super) fn compacted(
        &self,
        old: &Engine,
        fresh: &Engine,
        new_row: &[i64],
    ) -> Result<Decision> {
        let mut d = Decision::new(fresh, false)?;
        d.grow(fresh.len());
        let mut placed: Vec<(u32, usize)> = (0..old.len())
            .filter(|&r| new_row[r] >= 0 && self.position[r] != NONE)
            .map(|r| (self.position[r], r))
            .collect();
        placed.sort_unstable();
        for (_, r) in placed {
            let new = new_row[r] as usize;
            d.place(new)?;
            if self.outcome.empty[r] {
                d.outcome.empty[new] = true;
            } else if self.is_in_tables(r) {
                d.insert(fresh, new)?;
            } else {
                // a row visited and found a copy: its representative, if it is still there
                let rep = new_row[self.outcome.representative[r] as usize];
                if rep >= 0 {
                    d.outcome.representative[new] = rep;
                    d.outcome.distance[new] = self.outcome.distance[r];
                    d.outcome.similarity[new] = self.outcome.similarity[r];
                }
            }
        }
        d.outcome.stats = self.outcome.stats.clone();
        Ok(d)
    }

    /// Whether `row` (visited) was put in the tables.
    fn is_in_tables(&self, row: usize) -> bool {
        !self.outcome.empty[row]
            && (self.all_pairs || self.outcome.representative[row] == row as i64)
    }

    /// The searches of `probes` against the tables as they are (on the pool for many): the
    /// read-only checks, which change no table between them.
    pub(super) fn search_all(
        &self,
        engine: &Engine,
        probes: &mut [Probe],
    ) -> Vec<Result<Searched>> {
        let one = |i: usize, p: &mut Probe| {
            let slot = &self.scratch[i % self.scratch.len()];
            let mut sc = slot.lock().unwrap_or_else(PoisonError::into_inner);
            self.search(engine, p, &mut sc, false)
        };
        pool::install(probes.len() >= PARALLEL_MIN_CHECKS, |par| {
            if par {
                probes
                    .par_iter_mut()
                    .with_min_len(8)
                    .map(|p| one(rayon::current_thread_index().map_or(0, |i| i + 1), p))
                    .collect()
            } else {
                probes.iter_mut().map(|p| one(0, p)).collect()
            }
        })
    }

    /// [`Decision::search`] with this thread's scratch.
    fn search_here(
        &mut self,
        engine: &Engine,
        probe: &mut Probe,
        best_only: bool,
    ) -> Result<Searched> {
        let slot = self.scratch[0]
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        let mut sc = std::mem::take(slot);
        let found = self.search(engine, probe, &mut sc, best_only);
        *self.scratch[0]
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner) = sc;
        found
    }

    /// Adds a search's counters to the outcome's.
    pub(super) fn count(&mut self, c: Counts) {
        let s = &mut self.outcome.stats;
        s.candidates += c.candidates;
        s.estimated_out += c.estimated_out;
        s.capped += c.capped;
        s.compared += c.compared;
        s.buckets_cut += c.buckets_cut;
        s.unconfirmed += c.unconfirmed;
        s.empty += c.empty;
        s.outranked += c.outranked;
        for (d, similarity) in c.passed {
            s.similarity[((similarity * 100.0) as usize).min(99)] += 1;
            s.distance_passed[d as usize] += 1;
        }
        for d in c.failed {
            s.distance_failed[d as usize] += 1;
        }
    }

    /// The kept rows that pass against `probe`, best first (highest similarity, then
    /// smallest distance, then earliest kept): `(row, distance, similarity)`, and the counters
    /// of the search. Reads the tables only. `best_only`: only the first match is wanted, so
    /// a candidate is verified against the similarity of the best match found so far
    /// ([`rule::Verifying`]); the first match is the same.
    fn search(
        &self,
        engine: &Engine,
        probe: &mut Probe,
        sc: &mut Scratch,
        best_only: bool,
    ) -> Result<Searched> {
        let cfg = &engine.cfg;
        let mut counts = Counts::default();
        if probe.length == 0 || (cfg.verify && probe.count == 0) {
            // An empty text is nobody's copy and has no copies.
            counts.empty = 1;
            return Ok((Vec::new(), counts));
        }
        let fp = probe.fp;
        let position = &self.position;
        // (candidate row, distance), best first
        let ranked: Vec<(u32, u32)> = if let Some(index) = &self.simhash {
            let radius = cfg.radius(probe.length as usize);
            let dead = &self.dead;
            let mut c: Vec<(u32, u32)> = index
                .query(fp, Some(radius))?
                .into_iter()
                .filter_map(|(id, d)| match id {
                    Id::Int(r) if !dead[r as usize] => Some((r as u32, d)),
                    _ => None,
                })
                .collect();
            c.sort_unstable_by_key(|&(r, d)| (d, position[r as usize]));
            counts.candidates += c.len() as u64;
            if c.len() > cfg.verify_limit {
                counts.capped += 1;
                c.truncate(cfg.verify_limit);
            }
            c
        } else {
            let m = cfg.bands * cfg.rows;
            let found = self.band_candidates(
                &probe.keys,
                cfg.bucket_limit,
                cfg.full_bucket_quorum,
                sc,
                &mut counts,
            );
            // (ask for every candidate's bytes first: their cache misses overlap)
            overlap_misses(found.iter().map(|&r| {
                let at = r as usize * m;
                u32::from(engine.minhash_bytes[at])
                    ^ u32::from(engine.minhash_bytes[at + m - 1])
                    ^ engine.fps[r as usize] as u32
                    ^ position[r as usize]
            }));
            let ranked = rule::rank(
                &probe.bytes,
                fp,
                cfg.threshold,
                cfg.verify_limit,
                found.iter().map(|&r| {
                    let at = r as usize * m;
                    (
                        r,
                        engine.fps[r as usize],
                        &engine.minhash_bytes[at..at + m],
                        u64::from(position[r as usize]),
                    )
                }),
            );
            sc.found = found;
            counts.candidates += ranked.out_of_reach + ranked.in_reach as u64;
            counts.estimated_out += ranked.out_of_reach;
            if ranked.in_reach > cfg.verify_limit {
                counts.capped += 1;
            }
            ranked.top
        };
        counts.compared += ranked.len() as u64;
        if !cfg.verify {
            for &(_, d) in &ranked {
                counts.passed.push((d, 1.0));
            }
            let passed = ranked
                .iter()
                .map(|&(cand, d)| (1.0, d, u64::from(position[cand as usize]), cand));
            return Ok((rule::best_first(passed.collect()), counts));
        }
        if ranked.is_empty() {
            return Ok((Vec::new(), counts));
        }
        if let Some(row) = probe.stored.take() {
            probe.sketch = engine.sketches.get(row, &mut sc.buf_a)?.to_vec();
        }
        let ours = rule::Verifiable {
            sketch: &probe.sketch,
            count: probe.count,
            signature: probe.signature,
        };
        // (ask for every candidate's sketch first: their cache misses overlap)
        overlap_misses(ranked.iter().map(|&(c, _)| {
            engine.sketches.touch(c as usize) ^ engine.signatures[c as usize][0] as u32
        }));
        let mut verifying = rule::Verifying::new(cfg.threshold, best_only);
        for &(cand, d) in &ranked {
            let c = cand as usize;
            let one = rule::Ranked1 {
                id: cand,
                distance: d,
                count: engine.sketches.count(c),
                signature: engine.signatures[c],
            };
            let buf = &mut sc.buf_b;
            verifying.check(
                &ours,
                &one,
                || engine.sketches.get(c, buf),
                || u64::from(position[c]),
            )?;
        }
        let matches = verifying.finish();
        counts.passed = verifying.passed;
        counts.failed = verifying.failed;
        counts.outranked = verifying.outranked;
        Ok((matches, counts))
    }
}
