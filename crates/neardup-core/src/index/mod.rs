//! Exact Hamming-distance index over 64-bit fingerprints, with ids, timestamps, retention by
//! time-partitioned segments, and crash-safe persistence (snapshot + write-ahead log).
//!
//! Contract: `query(fp, k)` returns every stored item whose Hamming distance to `fp` is <= k
//! (inclusive), never one farther, with its distance, nearest first (ties: older timestamp
//! first, then insertion order).
//!
//! Module map: `layout` (blocks and probe radii), `table` (sorted per-block tables), `segment`
//! (a time partition: runs of tables with their rows' ids and times, tail), `packed`
//! (bit-packed ranks, timestamps in time order), `ids` (id column and id map), `store`
//! (files: meta, snapshot, WAL), `pairs` (all pairs within k, clusters).

pub mod ids;
pub mod layout;
pub mod packed;
mod pairs;
mod query;
pub mod segment;
mod store;
pub mod table;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;

use rayon::prelude::*;

pub use ids::{Id, IdRef};
pub use layout::{Layout, MAX_K};
pub use query::SORTED_MIN;
pub use store::SyncPolicy;

use ids::IdMap;
use layout::check_k;
use segment::Segment;
use store::{Store, WalOp};

use crate::parallel;
use crate::{Error, Result};

/// Batches at least this large run on the crate's pool ([`crate::parallel`]) when it is free.
pub const PAR_MIN: usize = 256;
/// Allows or forbids the crate's pool in batch calls ([`crate::parallel::set_enabled`]); an
/// explicit off switch, not needed after `fork()` (the pool is rebuilt in a forked child).
pub fn set_parallel(enabled: bool) {
    parallel::set_enabled(enabled);
}

/// Whether batch calls may use the crate's pool ([`crate::parallel::enabled`]).
pub fn parallel_allowed() -> bool {
    parallel::enabled()
}

/// Default span of a segment when there is no retention window: one day.
pub const DEFAULT_SPAN: f64 = 86_400.0;
/// Segments per retention window when one is set.
pub const SEGMENTS_PER_WINDOW: f64 = 16.0;
/// Largest accepted |timestamp| (seconds): keeps segment numbers exact.
pub const MAX_ABS_TS: f64 = 1e15;

/// Construction options. `layout`: number of blocks (None: chosen from k and `capacity`).
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub k: u32,
    pub layout: Option<u32>,
    pub segment_span: Option<f64>,
    pub retention: Option<f64>,
    pub capacity: Option<usize>,
}

/// Ids of a batch: a plain int array (no allocation per id) or general ids.
pub enum Ids<'a> {
    Int(&'a [i64]),
    Any(&'a [Id]),
}

impl Ids<'_> {
    pub fn len(&self) -> usize {
        match self {
            Ids::Int(v) => v.len(),
            Ids::Any(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> IdRef<'_> {
        match self {
            Ids::Int(v) => IdRef::Int(v[i]),
            Ids::Any(v) => v[i].as_ref(),
        }
    }
}

/// What `stats()` reports.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub count: usize,
    pub memory_bytes: usize,
    pub segments: usize,
    pub runs: usize,
    pub rows: usize,
    pub blocks: u32,
    pub k: u32,
    pub wal_bytes: u64,
}

/// What a query returns: (id, distance), nearest first.
pub type Found = Vec<(Id, u32)>;

/// Location of a row: segment slot in the high 32 bits, row in the low 32.
type Loc = u64;

#[inline]
fn loc(slot: u32, row: u32) -> Loc {
    (u64::from(slot) << 32) | u64::from(row)
}

#[inline]
fn split(l: Loc) -> (u32, u32) {
    ((l >> 32) as u32, l as u32)
}

pub struct Index {
    k: u32,
    layout: Layout,
    span: f64,
    retention: Option<f64>,
    fingerprint_config: Option<String>,
    segs: Vec<Option<Segment>>,
    free_slots: Vec<u32>,
    by_key: BTreeMap<i64, u32>,
    map: IdMap,
    newest: f64,
    auto_expired: f64,
    store: Option<Store>,
    warnings: Vec<String>,
}

pub fn check_timestamp(ts: f64) -> Result<()> {
    if !ts.is_finite() || ts.abs() > MAX_ABS_TS {
        return Err(Error::InvalidArgument(format!(
            "timestamp must be a finite number of seconds since the epoch (|t| <= 1e15), got {ts}"
        )));
    }
    Ok(())
}

fn check_options(o: &Options) -> Result<()> {
    check_k(o.k)?;
    if let Some(m) = o.layout {
        Layout::new(m)?;
    }
    if let Some(s) = o.segment_span {
        if !(s.is_finite() && s > 0.0) {
            return Err(Error::InvalidArgument(format!(
                "segment_span must be a positive number of seconds, got {s}"
            )));
        }
    }
    if let Some(r) = o.retention {
        if !(r.is_finite() && r > 0.0) {
            return Err(Error::InvalidArgument(format!(
                "retention must be a positive number of seconds, got {r}"
            )));
        }
    }
    Ok(())
}

impl Index {
    /// An empty index in memory.
    pub fn new(o: Options) -> Result<Index> {
        check_options(&o)?;
        let mut layout = match o.layout {
            Some(m) => Layout::new(m)?,
            None => Layout::auto(o.k, o.capacity.unwrap_or(1 << 20)),
        };
        layout.full = layout.wants_full(o.k);
        let span = o.segment_span.unwrap_or_else(|| match o.retention {
            Some(r) => r / SEGMENTS_PER_WINDOW,
            None => DEFAULT_SPAN,
        });
        Ok(Index {
            k: o.k,
            layout,
            span,
            retention: o.retention,
            fingerprint_config: None,
            segs: Vec::new(),
            free_slots: Vec::new(),
            by_key: BTreeMap::new(),
            map: IdMap::default(),
            newest: f64::NEG_INFINITY,
            auto_expired: f64::NEG_INFINITY,
            store: None,
            warnings: Vec::new(),
        })
    }

    /// Opens (or creates) a durable index in directory `dir`. `k`, `layout`, `segment_span` and
    /// `fingerprint_config` given here must match what is stored (None: take what is stored).
    pub fn open(
        dir: &Path,
        k: Option<u32>,
        o: Options,
        fingerprint_config: Option<&str>,
        sync: SyncPolicy,
    ) -> Result<Index> {
        if let Some(k) = k {
            check_k(k)?;
        }
        check_options(&Options {
            k: k.unwrap_or(o.k),
            ..o.clone()
        })?;
        let (store, meta, snapshot, wal) = Store::open(dir, k, &o, fingerprint_config, sync)?;
        let mut idx = Index::new(Options {
            k: meta.k,
            layout: Some(meta.blocks),
            segment_span: Some(meta.segment_span),
            retention: o.retention,
            capacity: None,
        })?;
        idx.fingerprint_config = meta.fingerprint_config.clone();
        idx.warnings = wal.warnings;
        if let Some(snap) = snapshot {
            idx.newest = snap.newest;
            idx.bulk_load(snap.ids.as_ids(), &snap.fps, &snap.ts)?;
        }
        for op in wal.ops {
            idx.apply(op)?;
        }
        for slot in 0..idx.segs.len() as u32 {
            idx.freeze_slot(slot, true);
        }
        idx.store = Some(store);
        Ok(idx)
    }

    /// Messages about what opening found and repaired (a torn WAL tail), then cleared.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    pub fn k(&self) -> u32 {
        self.k
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn retention(&self) -> Option<f64> {
        self.retention
    }

    pub fn segment_span(&self) -> f64 {
        self.span
    }

    pub fn fingerprint_config(&self) -> Option<&str> {
        self.fingerprint_config.as_deref()
    }

    pub fn is_persistent(&self) -> bool {
        self.store.is_some()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    fn seg(&self, slot: u32) -> &Segment {
        // Every slot reachable from the map or by_key holds a segment.
        match &self.segs[slot as usize] {
            Some(s) => s,
            None => unreachable_segment(),
        }
    }

    /// The id stored at a location.
    pub fn id_at(&self, l: u64) -> IdRef<'_> {
        let (slot, row) = split(l);
        self.seg(slot).id(row)
    }

    /// (timestamp, place among the segment's items of that timestamp) of a location: items
    /// with equal timestamps share a segment, so this orders by time, then insertion order.
    fn time_key(&self, l: Loc) -> (f64, u32) {
        let (slot, row) = split(l);
        self.seg(slot).time_key(row)
    }

    fn find(&self, id: IdRef<'_>) -> Option<usize> {
        let segs = &self.segs;
        self.map.find(id.hash(), |l| {
            let (slot, row) = split(l);
            matches!(&segs[slot as usize], Some(s) if s.id(row) == id)
        })
    }

    pub fn contains(&self, id: IdRef<'_>) -> bool {
        self.find(id).is_some()
    }

    /// Fingerprint and timestamp of `id`.
    pub fn get(&self, id: IdRef<'_>) -> Option<(u64, f64)> {
        let l = self.map.at(self.find(id)?);
        let (slot, row) = split(l);
        let s = self.seg(slot);
        Some((s.fp(row), s.ts(row)))
    }

    /// True when every stored id is an int (batch results can then be int arrays).
    pub fn all_int_ids(&self) -> bool {
        self.segs.iter().flatten().all(|s| !s.has_str())
    }

    fn slot_for(&mut self, ts: f64) -> u32 {
        self.slot_for_key((ts / self.span).floor() as i64)
    }

    fn slot_for_key(&mut self, key: i64) -> u32 {
        if let Some(&slot) = self.by_key.get(&key) {
            return slot;
        }
        let seg = Segment::new(key);
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.segs[s as usize] = Some(seg);
                s
            }
            None => {
                self.segs.push(Some(seg));
                (self.segs.len() - 1) as u32
            }
        };
        self.by_key.insert(key, slot);
        slot
    }

    /// Adds or replaces one item in memory (validated and logged by the caller).
    fn put(&mut self, id: IdRef<'_>, fp: u64, ts: f64) {
        let slot = self.slot_for(ts);
        let pos = self.find(id);
        if let Some(pos) = pos {
            let (os, orow) = split(self.map.at(pos));
            if let Some(s) = self.segs[os as usize].as_mut() {
                s.kill(orow);
            }
        }
        let seg = match self.segs[slot as usize].as_mut() {
            Some(s) => s,
            None => unreachable_segment(),
        };
        let row = seg.push(id, fp, ts);
        match pos {
            Some(pos) => self.map.set(pos, loc(slot, row)),
            None => {
                let segs = &self.segs;
                self.map.reserve(1, |l| {
                    let (s, r) = split(l);
                    segs[s as usize].as_ref().map_or(0, |s| s.id(r).hash())
                });
                self.map.insert_new(id.hash(), loc(slot, row));
            }
        }
        if ts > self.newest {
            self.newest = ts;
        }
    }

    fn reserve_ids(&mut self, extra: usize) {
        let segs = &self.segs;
        self.map.reserve(extra, |l| {
            let (s, r) = split(l);
            segs[s as usize].as_ref().map_or(0, |s| s.id(r).hash())
        });
    }

    fn log(&mut self, op: &WalOp<'_>) -> Result<()> {
        if let Some(store) = self.store.as_mut() {
            store.append(op)?;
        }
        Ok(())
    }

    /// Adds `id` with fingerprint `fp` at time `ts`; an existing `id` is replaced.
    pub fn add(&mut self, id: IdRef<'_>, fp: u64, ts: f64) -> Result<()> {
        check_timestamp(ts)?;
        ids::check_id(id)?;
        let ids_one = [id.to_owned()];
        self.log(&WalOp::Add {
            ids: Ids::Any(&ids_one),
            fps: &[fp],
            ts: &[ts],
        })?;
        self.put(id, fp, ts);
        let slot = self.slot_for(ts);
        self.freeze_slot(slot, false);
        self.auto_expire(ts)?;
        self.maybe_checkpoint()
    }

    /// Adds a batch (one WAL record, one fsync). Later duplicates in the batch win.
    pub fn add_many(&mut self, ids: Ids<'_>, fps: &[u64], ts: &[f64]) -> Result<()> {
        // (ids and fingerprints first: a caller that gave no timestamps has one per fingerprint)
        if ids.len() != fps.len() {
            return Err(Error::InvalidArgument(format!(
                "ids and fingerprints must have the same length, got {} and {}",
                ids.len(),
                fps.len()
            )));
        }
        if ts.len() != fps.len() {
            return Err(Error::InvalidArgument(format!(
                "timestamps must have the length of ids and fingerprints, got {} for {}",
                ts.len(),
                fps.len()
            )));
        }
        for &t in ts {
            check_timestamp(t)?;
        }
        if let Ids::Any(v) = &ids {
            for id in v.iter() {
                ids::check_id(id.as_ref())?;
            }
        }
        self.log(&WalOp::Add {
            ids: ids_reborrow(&ids),
            fps,
            ts,
        })?;
        self.apply_add(ids, fps, ts);
        self.auto_expire(ts.iter().copied().fold(f64::INFINITY, f64::min))?;
        self.maybe_checkpoint()
    }

    fn apply_add(&mut self, ids: Ids<'_>, fps: &[u64], ts: &[f64]) {
        self.reserve_ids(ids.len());
        if fps.len() >= 1 << 16 {
            // Size each segment once: no regrowth, no slack, huge pages for the big arrays.
            let mut per_key: BTreeMap<i64, usize> = BTreeMap::new();
            for &t in ts {
                *per_key.entry((t / self.span).floor() as i64).or_default() += 1;
            }
            for (key, n) in per_key {
                let slot = self.slot_for_key(key);
                if let Some(seg) = self.segs[slot as usize].as_mut() {
                    seg.reserve(n);
                }
            }
        }
        let mut touched: Vec<u32> = Vec::new();
        for i in 0..fps.len() {
            self.put(ids.get(i), fps[i], ts[i]);
            let slot = self.slot_for(ts[i]);
            if touched.last() != Some(&slot) && !touched.contains(&slot) {
                touched.push(slot);
            }
        }
        for slot in touched {
            self.freeze_slot(slot, false);
        }
    }

    /// Builds the tail of segment `slot` into a run when due ([`Segment::freeze`]) and moves
    /// the id map entries of the rows that moved.
    fn freeze_slot(&mut self, slot: u32, force: bool) {
        let Some(seg) = self.segs[slot as usize].as_mut() else {
            return;
        };
        if let Some((start, olds)) = seg.freeze(&self.layout, force) {
            self.relocate(slot, start, &olds);
        }
    }

    /// Rows `start + i` of segment `slot` were rows `olds[i]`: points their map entries there.
    fn relocate(&mut self, slot: u32, start: u32, olds: &[u32]) {
        let seg = self.seg(slot);
        let map = &self.map;
        // Find every entry first (each old location is in the map once), then move them.
        let find = |(i, &old): (usize, &u32)| -> Option<(usize, Loc)> {
            let new = start + i as u32;
            if new == old {
                return None;
            }
            let at = map.find(seg.id(new).hash(), |l| l == loc(slot, old));
            at.map(|pos| (pos, loc(slot, new)))
        };
        let moves: Vec<(usize, Loc)> = parallel::install(olds.len() >= 1 << 16, |par| {
            if par {
                olds.par_iter().enumerate().filter_map(find).collect()
            } else {
                olds.iter().enumerate().filter_map(find).collect()
            }
        });
        for (pos, l) in moves {
            self.map.set(pos, l);
        }
    }

    /// Loads items into an empty index and builds one run per segment (used by open).
    fn bulk_load(&mut self, ids: Ids<'_>, fps: &[u64], ts: &[f64]) -> Result<()> {
        // A snapshot holds each live id once (it is written from the id map), so rows go in
        // without lookups, into segments sized once.
        self.reserve_ids(ids.len());
        let mut per_key: BTreeMap<i64, usize> = BTreeMap::new();
        for &t in ts {
            *per_key.entry((t / self.span).floor() as i64).or_default() += 1;
        }
        for (key, n) in per_key {
            let slot = self.slot_for_key(key);
            if let Some(seg) = self.segs[slot as usize].as_mut() {
                seg.reserve(n);
            }
        }
        let mut last: Option<(i64, u32)> = None;
        for i in 0..fps.len() {
            let key = (ts[i] / self.span).floor() as i64;
            let slot = match last {
                Some((k, s)) if k == key => s,
                _ => {
                    let s = self.slot_for_key(key);
                    last = Some((key, s));
                    s
                }
            };
            let seg = match self.segs[slot as usize].as_mut() {
                Some(s) => s,
                None => unreachable_segment(),
            };
            seg.push(ids.get(i), fps[i], ts[i]);
        }
        // Each segment becomes one run; then the map gets every row where it ended up.
        for slot in 0..self.segs.len() as u32 {
            let Some(seg) = self.segs[slot as usize].as_mut() else {
                continue;
            };
            let (start, olds) = seg.rebuild(&self.layout);
            seg.shrink_to_fit();
            let seg = self.seg(slot);
            let hashes: Vec<u64> = (0..olds.len() as u32)
                .map(|i| seg.id(start + i).hash())
                .collect();
            for (i, h) in hashes.into_iter().enumerate() {
                self.map.insert_new(h, loc(slot, start + i as u32));
            }
        }
        Ok(())
    }

    /// Removes `id`; `Error::NotFound` when it is not stored.
    pub fn remove(&mut self, id: IdRef<'_>) -> Result<()> {
        if self.find(id).is_none() {
            return Err(Error::NotFound(format!(
                "id {} is not in the index",
                id.to_owned()
            )));
        }
        self.log(&WalOp::Remove(id))?;
        self.unput(id);
        self.maybe_checkpoint()
    }

    fn unput(&mut self, id: IdRef<'_>) {
        if let Some(pos) = self.find(id) {
            let (slot, row) = split(self.map.at(pos));
            self.map.remove_at(pos);
            if let Some(s) = self.segs[slot as usize].as_mut() {
                s.kill(row);
                if s.n_live == 0 {
                    self.drop_segment(slot);
                }
            }
        }
    }

    fn drop_segment(&mut self, slot: u32) {
        if let Some(seg) = self.segs[slot as usize].take() {
            for row in 0..seg.rows() {
                if seg.is_live(row) {
                    let id = seg.id(row);
                    if let Some(pos) = self.map.find(id.hash(), |l| l == loc(slot, row)) {
                        self.map.remove_at(pos);
                    }
                }
            }
            self.by_key.remove(&seg.key);
            self.free_slots.push(slot);
        }
    }

    /// Removes every item with timestamp < `before`; returns how many. Whole segments older
    /// than `before` are dropped; only the one segment that straddles `before` is scanned.
    pub fn expire(&mut self, before: f64) -> Result<usize> {
        if before.is_nan() {
            return Err(Error::InvalidArgument(
                "before must be a number of seconds, got nan".into(),
            ));
        }
        self.log(&WalOp::Expire(before))?;
        let n = self.apply_expire(before);
        self.maybe_checkpoint()?;
        Ok(n)
    }

    fn apply_expire(&mut self, before: f64) -> usize {
        let mut n = 0;
        let edge = if before.is_finite() {
            (before.clamp(-MAX_ABS_TS * 2.0, MAX_ABS_TS * 2.0) / self.span).floor() as i64
        } else if before > 0.0 {
            i64::MAX
        } else {
            i64::MIN
        };
        let whole: Vec<u32> = self.by_key.range(..edge).map(|(_, &s)| s).collect();
        for slot in whole {
            n += self.seg(slot).n_live;
            self.drop_segment(slot);
        }
        if let Some(&slot) = self.by_key.get(&edge) {
            let old: Vec<(u32, Id)> = {
                let seg = self.seg(slot);
                (0..seg.rows())
                    .filter(|&r| seg.is_live(r) && seg.ts(r) < before)
                    .map(|r| (r, seg.id(r).to_owned()))
                    .collect()
            };
            n += old.len();
            for (_, id) in old {
                self.unput(id.as_ref());
            }
        }
        n
    }

    /// Applies the retention window: drops what is older than `newest - retention`. Run on every
    /// add, but only acts when the cutoff has moved by 1/64 of the window since the last time
    /// (so an add never rescans the edge segment), or when the add's `oldest` timestamp is
    /// behind the cutoff applied last (that item was kept until the cutoff moved on);
    /// `expire_retention` applies it exactly.
    fn auto_expire(&mut self, oldest: f64) -> Result<()> {
        let Some(r) = self.retention else {
            return Ok(());
        };
        let cutoff = self.newest - r;
        if cutoff <= self.auto_expired + r / 64.0 && oldest >= self.auto_expired {
            return Ok(());
        }
        self.auto_expired = cutoff;
        // Segment `key` holds [key * span, (key + 1) * span): nothing older than the cutoff?
        if self
            .by_key
            .keys()
            .next()
            .is_none_or(|&key| key as f64 * self.span >= cutoff)
        {
            return Ok(());
        }
        self.log(&WalOp::Expire(cutoff))?;
        self.apply_expire(cutoff);
        Ok(())
    }

    /// Applies the retention window exactly now; returns how many items expired.
    pub fn expire_retention(&mut self) -> Result<usize> {
        match self.retention {
            Some(r) if self.newest.is_finite() => {
                self.auto_expired = self.newest - r;
                self.expire(self.newest - r)
            }
            _ => Ok(0),
        }
    }

    fn apply(&mut self, op: store::OwnedOp) -> Result<()> {
        match op {
            store::OwnedOp::Add { ids, fps, ts } => self.apply_add(ids.as_ids(), &fps, &ts),
            store::OwnedOp::Remove(id) => self.unput(id.as_ref()),
            store::OwnedOp::Expire(before) => {
                self.apply_expire(before);
            }
        }
        Ok(())
    }

    /// Adds `id` only when no stored item is within `k` of `fp`; returns what was found
    /// (empty: it was added). Atomic: callers hold the write lock across both steps.
    pub fn check_and_add(
        &mut self,
        id: IdRef<'_>,
        fp: u64,
        ts: f64,
        k: Option<u32>,
    ) -> Result<Vec<(Id, u32)>> {
        check_timestamp(ts)?;
        let found = self.query(fp, k)?;
        if found.is_empty() {
            self.add(id, fp, ts)?;
        }
        Ok(found)
    }

    pub fn stats(&self) -> Stats {
        let segs: Vec<&Segment> = self.segs.iter().flatten().collect();
        Stats {
            count: self.len(),
            memory_bytes: self.memory_bytes(),
            segments: segs.len(),
            runs: segs.iter().map(|s| s.runs.len()).sum(),
            rows: segs.iter().map(|s| s.rows() as usize).sum(),
            blocks: self.layout.num_blocks(),
            k: self.k,
            wal_bytes: self.store.as_ref().map_or(0, Store::wal_bytes),
        }
    }

    /// Heap bytes held by the index (arrays, tables, id map).
    pub fn memory_bytes(&self) -> usize {
        self.segs
            .iter()
            .flatten()
            .map(Segment::memory_bytes)
            .sum::<usize>()
            + self.map.memory_bytes()
            + self.segs.capacity() * std::mem::size_of::<Option<Segment>>()
    }

    /// Makes every write so far durable (fsync of the WAL).
    pub fn flush(&mut self) -> Result<()> {
        match self.store.as_mut() {
            Some(s) => s.sync(),
            None => Ok(()),
        }
    }

    /// Like [`Index::flush`] in two steps, so that the fsync can run without the index's lock:
    /// returns a handle on the WAL to `sync_data` (every write so far is durable once that
    /// returns), or `None` when nothing is unsynced or the index is in memory. A checkpoint
    /// meanwhile is harmless: it syncs its own files before it retires the old WAL.
    pub fn flush_handle(&mut self) -> Result<Option<std::fs::File>> {
        match self.store.as_mut() {
            Some(s) => s.sync_handle(),
            None => Ok(None),
        }
    }

    /// Writes a snapshot of the live items and starts an empty WAL (faster reopen).
    pub fn checkpoint(&mut self) -> Result<()> {
        let Some(mut store) = self.store.take() else {
            return Ok(());
        };
        let r = store.checkpoint(self);
        self.store = Some(store);
        r
    }

    /// The checkpoint that a write makes when the log has grown. It runs after the write is in
    /// the log, so its failure (a full disk) fails nothing: it is said as a warning
    /// ([`Index::take_warnings`]) and the next write tries again.
    fn maybe_checkpoint(&mut self) -> Result<()> {
        if self.store.as_ref().is_some_and(Store::wants_checkpoint) {
            if let Err(e) = self.checkpoint() {
                self.warnings.push(format!(
                    "an automatic checkpoint failed ({e}); the write before it is in the \
                     write-ahead log, and the next write tries again"
                ));
            }
        }
        Ok(())
    }

    /// Checkpoints (when the WAL holds anything) and releases the directory. The index is then
    /// in memory only.
    pub fn close(&mut self) -> Result<()> {
        if self.store.as_ref().is_some_and(Store::has_log) {
            self.checkpoint()?;
        }
        if let Some(mut s) = self.store.take() {
            s.sync()?;
        }
        Ok(())
    }

    /// Live items in time order (segments in time order; in each, by timestamp, then
    /// insertion order): (location, fingerprint, timestamp).
    fn live_items(&self) -> impl Iterator<Item = (Loc, u64, f64)> + '_ {
        self.by_key.values().flat_map(move |&slot| {
            self.seg(slot)
                .live_in_time_order()
                .into_iter()
                .map(move |(r, fp, ts)| (loc(slot, r), fp, ts))
        })
    }
}

fn ids_reborrow<'a>(ids: &'a Ids<'_>) -> Ids<'a> {
    match ids {
        Ids::Int(v) => Ids::Int(v),
        Ids::Any(v) => Ids::Any(v),
    }
}

#[cold]
fn unreachable_segment() -> ! {
    // Slots in the map and in by_key always hold a segment: reaching this is a bug.
    unreachable!("index slot without a segment")
}
