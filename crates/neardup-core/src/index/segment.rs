//! A time partition of the index: the items whose timestamp falls in one span. Expiry drops
//! whole segments, so it costs what it frees.
//!
//! New rows are appended to a tail (at most [`TAIL_MAX`], scanned); then built into an
//! immutable run. Runs are merged when a newer one grows to half the size of the one before
//! it, so a segment of n rows has O(log n) runs. Rows `0..indexed` belong to the runs, in
//! order; the rows of a run are stored in its first table's order (its fingerprints sorted),
//! so that table needs no rows and keeps only the low bits of each fingerprint
//! ([`Table::implicit`]). Building a run moves rows (and drops dead ones): the index updates
//! its id map with what [`Segment::freeze`] returns.
//!
//! Time order: items are ordered by timestamp, then insertion order. A run keeps each row's
//! rank in that order among its rows (bit-packed) and its timestamps sorted in that order
//! ([`RunTs`], a byte or two each); older runs hold older insertions, so (timestamp, run start
//! + rank) orders a segment's items, the tail's by (timestamp, row).

use rayon::prelude::*;

use super::ids::{IdColumn, IdRef};
use super::layout::{for_each_within, Layout, PROBE_COST};
use super::packed::{Packed, RunTs};
use super::table::{advise_huge, Search, Table};
use crate::parallel;

/// One bucket search of a query: which query of the group, run and table, the probed block
/// value, the search.
struct Probe {
    query: u32,
    run: u32,
    table: u32,
    value: u32,
    search: Search,
}

/// Per-thread buffers of a query, reused so a query allocates nothing.
#[derive(Default)]
struct Scratch {
    probes: Vec<Probe>,
    /// (probe, table entry), then (probe, row).
    cands: Vec<(u32, u32)>,
    plan: Vec<Search>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Which share of the answer a [`Segment::query_group`] call finds. `All` = `Table(t)` for
/// every probed table + `Rest`, each item exactly once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Everything.
    All,
    /// What table `t` reports (nothing in a segment small enough to be scanned).
    Table(usize),
    /// The unindexed tail, or the whole segment when it is scanned.
    Rest,
}

/// Whether table `t` is the first table whose probe reaches `fp` for query `q` (each item is
/// reported by that table only, so exactly once).
#[inline]
fn first_table(layout: &Layout, radii: &[Option<u32>], t: usize, fp: u64, q: u64) -> bool {
    !layout.blocks[..t]
        .iter()
        .zip(radii)
        .any(|(b, r)| r.is_some_and(|r| b.distance(fp, q) <= r))
}

/// Rows kept unindexed before they are built into a run (scanned by every query meanwhile).
pub const TAIL_MAX: usize = 512;

/// Key of a timestamp that sorts as `f64::total_cmp` does.
#[inline]
fn ts_key(t: f64) -> u64 {
    let b = t.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | 1 << 63
    }
}

/// An item going into a run: fingerprint, timestamp, its place in time order so far (see
/// [`Segment::time_key`]) and its current row.
#[derive(Clone, Copy)]
struct Item {
    fp: u64,
    ts: f64,
    seq: u32,
    row: u32,
}

/// The tables of a contiguous range of rows of one segment, built at once (immutable), with the
/// ids, time ranks and timestamps of those rows. Row `start + i` is entry `i` of the implicit
/// first table.
pub struct Run {
    pub start: u32,
    pub tables: Vec<Table>,
    pub ids: IdColumn,
    ord: Packed,
    ts: RunTs,
}

impl Run {
    /// A run of `items` (given in time order of insertion: see [`Item::seq`]) starting at row
    /// `start`; `id_of(row)` gives the id at an item's current row. Returns the run and the
    /// current row of each of its rows.
    fn build<'a>(
        layout: &Layout,
        items: &[Item],
        id_of: impl Fn(u32) -> IdRef<'a>,
        start: u32,
        par: bool,
    ) -> (Run, Vec<u32>) {
        let n = items.len();
        // Time order: (timestamp, seq). Items usually arrive in it already.
        let in_order = items
            .windows(2)
            .all(|w| (ts_key(w[0].ts), w[0].seq) <= (ts_key(w[1].ts), w[1].seq));
        let by_time: Vec<u32> = if in_order {
            (0..n as u32).collect()
        } else {
            let mut keyed: Vec<(u64, u32, u32)> = items
                .iter()
                .enumerate()
                .map(|(i, it)| (ts_key(it.ts), it.seq, i as u32))
                .collect();
            sort(&mut keyed, par);
            keyed.into_iter().map(|e| e.2).collect()
        };
        let mut rank = vec![0u32; n];
        for (r, &i) in by_time.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
        let sorted_ts: Vec<f64> = by_time.iter().map(|&i| items[i as usize].ts).collect();
        drop(by_time);
        // Physical order: by fingerprint (the first table's key order).
        let mut phys: Vec<(u64, u32)> = items
            .iter()
            .enumerate()
            .map(|(i, it)| (it.fp, rank[i]))
            .collect();
        sort(&mut phys, par);
        let mut fps: Vec<u64> = Vec::with_capacity(n);
        let mut ords: Vec<u32> = Vec::with_capacity(n);
        for &(fp, r) in &phys {
            fps.push(fp);
            ords.push(r);
        }
        drop(phys);
        // Rank -> item, to find each row's id and old row.
        let mut item_of_rank = vec![0u32; n];
        for (i, &r) in rank.iter().enumerate() {
            item_of_rank[r as usize] = i as u32;
        }
        drop(rank);
        let olds: Vec<u32> = ords
            .iter()
            .map(|&r| items[item_of_rank[r as usize] as usize].row)
            .collect();
        let mut ids = IdColumn::default();
        ids.reserve(n);
        for &old in &olds {
            ids.push(id_of(old));
        }
        ids.shrink_to_fit();
        let rel: Vec<u32> = (0..n as u32).collect();
        let build_table = |t: usize| {
            if t == 0 {
                Table::implicit(&fps)
            } else {
                Table::build(layout.blocks[t], &fps, &rel, 0, n as u32, layout.full)
            }
        };
        let m = layout.blocks.len();
        let tables: Vec<Table> = if par {
            (0..m).into_par_iter().map(build_table).collect()
        } else {
            (0..m).map(build_table).collect()
        };
        let run = Run {
            start,
            tables,
            ids,
            ord: Packed::new(&ords),
            ts: RunTs::new(&sorted_ts),
        };
        (run, olds)
    }

    pub fn len(&self) -> u32 {
        self.ord.len() as u32
    }

    pub fn is_empty(&self) -> bool {
        self.ord.is_empty()
    }

    pub fn end(&self) -> u32 {
        self.start + self.len()
    }

    /// (timestamp, place in the segment's time order) of entry `i`.
    #[inline]
    fn time_key(&self, i: usize) -> (f64, u32) {
        let r = self.ord.get(i) as usize;
        (self.ts.get(r), self.start + r as u32)
    }

    pub fn memory_bytes(&self) -> usize {
        self.tables.iter().map(Table::memory_bytes).sum::<usize>()
            + self.ids.memory_bytes()
            + self.ord.memory_bytes()
            + self.ts.memory_bytes()
    }
}

fn sort<T: Ord + Send>(v: &mut [T], par: bool) {
    if par {
        parallel::sort_unstable(v);
    } else {
        v.sort_unstable();
    }
}

/// Where a row lives: entry of a run, or place in the tail.
enum Place {
    Run(usize, usize),
    Tail(usize),
}

pub struct Segment {
    /// floor(timestamp / span) of every item here.
    pub key: i64,
    pub runs: Vec<Run>,
    /// Rows `0..indexed` are in the runs; the tail holds the rest.
    pub indexed: u32,
    tail_fps: Vec<u64>,
    tail_ts: Vec<f64>,
    tail_ids: IdColumn,
    live: Vec<u64>,
    pub n_live: usize,
}

impl Segment {
    pub fn new(key: i64) -> Segment {
        Segment {
            key,
            runs: Vec::new(),
            indexed: 0,
            tail_fps: Vec::new(),
            tail_ts: Vec::new(),
            tail_ids: IdColumn::default(),
            live: Vec::new(),
            n_live: 0,
        }
    }

    pub fn rows(&self) -> u32 {
        self.indexed + self.tail_fps.len() as u32
    }

    #[inline]
    fn place(&self, row: u32) -> Place {
        if row >= self.indexed {
            return Place::Tail((row - self.indexed) as usize);
        }
        // The last run starting at or before `row`.
        let r = self.runs.partition_point(|run| run.start <= row) - 1;
        Place::Run(r, (row - self.runs[r].start) as usize)
    }

    /// Fingerprint of `row`.
    pub fn fp(&self, row: u32) -> u64 {
        match self.place(row) {
            Place::Run(r, i) => self.runs[r].tables[0].fp(i),
            Place::Tail(i) => self.tail_fps[i],
        }
    }

    /// Timestamp of `row`.
    pub fn ts(&self, row: u32) -> f64 {
        self.time_key(row).0
    }

    /// Id of `row`.
    #[inline]
    pub fn id(&self, row: u32) -> IdRef<'_> {
        match self.place(row) {
            Place::Run(r, i) => self.runs[r].ids.get(i as u32),
            Place::Tail(i) => self.tail_ids.get(i as u32),
        }
    }

    /// (timestamp, place among this segment's items of equal timestamp): ordering rows by it
    /// is ordering by timestamp, then insertion order.
    #[inline]
    pub fn time_key(&self, row: u32) -> (f64, u32) {
        match self.place(row) {
            Place::Run(r, i) => self.runs[r].time_key(i),
            Place::Tail(i) => (self.tail_ts[i], row),
        }
    }

    /// True when any id here is a str.
    pub fn has_str(&self) -> bool {
        self.tail_ids.has_str() || self.runs.iter().any(|r| r.ids.has_str())
    }

    pub fn push(&mut self, id: IdRef<'_>, fp: u64, ts: f64) -> u32 {
        let row = self.rows() as usize;
        self.tail_fps.push(fp);
        self.tail_ts.push(ts);
        self.tail_ids.push(id);
        if row / 64 >= self.live.len() {
            self.live.push(0);
        }
        self.live[row / 64] |= 1 << (row % 64);
        self.n_live += 1;
        row as u32
    }

    /// Room for `n` more rows (big batches: backed by huge pages, see `advise_huge`).
    pub fn reserve(&mut self, n: usize) {
        self.tail_fps.reserve_exact(n);
        self.tail_ts.reserve_exact(n);
        self.tail_ids.reserve(n);
        self.live.reserve_exact(n / 64 + 1);
        advise_huge(&self.tail_fps);
        advise_huge(&self.tail_ts);
    }

    #[inline]
    pub fn is_live(&self, row: u32) -> bool {
        let row = row as usize;
        self.live[row / 64] >> (row % 64) & 1 == 1
    }

    pub fn kill(&mut self, row: u32) {
        if self.is_live(row) {
            let row = row as usize;
            self.live[row / 64] &= !(1 << (row % 64));
            self.n_live -= 1;
        }
    }

    /// Builds the tail into a run if it is full (or `force` and not empty), merged with the
    /// runs it should merge with. Returns the first rebuilt row and, for each rebuilt row from
    /// there, the row its item had before (the caller moves its id map entries).
    pub fn freeze(&mut self, layout: &Layout, force: bool) -> Option<(u32, Vec<u32>)> {
        let tail = self.tail_fps.len();
        if tail == 0 || (!force && tail < TAIL_MAX) {
            return None;
        }
        // As if the tail became a run and the newest two merged while the older one is not
        // more than twice as big as the newer.
        let mut spans: Vec<u64> = self.runs.iter().map(|r| u64::from(r.len())).collect();
        spans.push(tail as u64);
        while spans.len() >= 2 {
            let n = spans.len();
            if spans[n - 2] > 2 * spans[n - 1] {
                break;
            }
            spans[n - 2] += spans[n - 1];
            spans.pop();
        }
        Some(self.build_from(layout, spans.len() - 1))
    }

    /// Rebuilds every run and the tail into one run (after a bulk load).
    pub fn rebuild(&mut self, layout: &Layout) -> (u32, Vec<u32>) {
        self.build_from(layout, 0)
    }

    /// Builds runs `first..` and the tail into one run of their live rows.
    fn build_from(&mut self, layout: &Layout, first: usize) -> (u32, Vec<u32>) {
        let start = self.runs.get(first).map_or(self.indexed, |r| r.start);
        let mut items: Vec<Item> = Vec::with_capacity(self.n_live);
        for run in &self.runs[first..] {
            for (i, fp) in run.tables[0].fps().enumerate() {
                let row = run.start + i as u32;
                if self.is_live(row) {
                    let (ts, seq) = run.time_key(i);
                    items.push(Item { fp, ts, seq, row });
                }
            }
        }
        for (i, (&fp, &ts)) in self.tail_fps.iter().zip(&self.tail_ts).enumerate() {
            let row = self.indexed + i as u32;
            if self.is_live(row) {
                items.push(Item {
                    fp,
                    ts,
                    seq: row,
                    row,
                });
            }
        }
        let n = items.len() as u32;
        let built = if items.is_empty() {
            None
        } else {
            let par = items.len() >= 1 << 16;
            Some(parallel::install(par, |par| {
                Run::build(layout, &items, |row| self.id(row), start, par)
            }))
        };
        drop(items);
        self.runs.truncate(first);
        self.tail_fps = Vec::new();
        self.tail_ts = Vec::new();
        self.tail_ids = IdColumn::default();
        // Rows start..start + n are the new run's, all live; nothing after.
        let s = start as usize;
        self.live.truncate(s.div_ceil(64));
        if s & 63 != 0 {
            if let Some(w) = self.live.last_mut() {
                *w &= (1u64 << (s % 64)) - 1;
            }
        }
        let end = s + n as usize;
        self.live.resize(end.div_ceil(64), 0);
        for row in s..end {
            self.live[row / 64] |= 1 << (row % 64);
        }
        self.live.shrink_to_fit();
        self.indexed = start + n;
        match built {
            Some((run, olds)) => {
                self.runs.push(run);
                (start, olds)
            }
            None => (start, Vec::new()),
        }
    }

    /// Live rows with their fingerprints and timestamps, in time order (timestamp, then
    /// insertion order).
    pub fn live_in_time_order(&self) -> Vec<(u32, u64, f64)> {
        let mut parts: Vec<Vec<(u32, u64, f64)>> = Vec::new();
        for run in &self.runs {
            let n = run.len() as usize;
            let fps: Vec<u64> = run.tables[0].fps().collect();
            let mut inv = vec![0u32; n];
            for (i, slot) in (0..n).map(|i| (i, run.ord.get(i))) {
                inv[slot as usize] = i as u32;
            }
            let part: Vec<(u32, u64, f64)> = inv
                .iter()
                .enumerate()
                .map(|(r, &i)| (run.start + i, fps[i as usize], run.ts.get(r)))
                .filter(|&(row, _, _)| self.is_live(row))
                .collect();
            parts.push(part);
        }
        let mut tail: Vec<(u32, u64, f64)> = (0..self.tail_fps.len())
            .map(|i| (self.indexed + i as u32, self.tail_fps[i], self.tail_ts[i]))
            .filter(|&(row, _, _)| self.is_live(row))
            .collect();
        tail.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)));
        parts.push(tail);
        parts.retain(|p| !p.is_empty());
        if parts.len() <= 1 {
            return parts.pop().unwrap_or_default();
        }
        let mut all: Vec<(u64, u32, u32, u64, f64)> = parts
            .into_iter()
            .flatten()
            .map(|(row, fp, ts)| (ts_key(ts), self.time_key(row).1, row, fp, ts))
            .collect();
        all.sort_unstable_by_key(|e| (e.0, e.1));
        all.into_iter().map(|e| (e.2, e.3, e.4)).collect()
    }

    /// Appends `(query, distance, row)` for every query `qs[query]` and every live row within
    /// `k` of it. The queries of a group share each step, so their memory accesses overlap.
    /// `part`: which share of the answer (see [`Part`]).
    pub fn query_group(
        &self,
        layout: &Layout,
        radii: &[Option<u32>],
        qs: &[u64],
        k: u32,
        part: Part,
        out: &mut Vec<(u32, u32, u32)>,
    ) {
        let indexed = self.indexed as usize;
        let probe_cost = PROBE_COST * layout.probes(k) * self.runs.len() as f64;
        if probe_cost + layout.candidates(k, indexed as f64) >= indexed as f64 {
            if !matches!(part, Part::Table(_)) {
                for (qi, &q) in qs.iter().enumerate() {
                    self.scan_runs(qi as u32, q, k, out);
                    self.scan_tail(qi as u32, q, k, out);
                }
            }
            return;
        }
        if part == Part::Rest {
            for (qi, &q) in qs.iter().enumerate() {
                self.scan_tail(qi as u32, q, k, out);
            }
            return;
        }
        SCRATCH.with(|cell| {
            let mut scratch = cell.borrow_mut();
            let Scratch {
                probes,
                cands,
                plan,
            } = &mut *scratch;
            probes.clear();
            cands.clear();
            // 1. Every bucket search of every query, run and table, directory loads started.
            for (qi, &q) in qs.iter().enumerate() {
                for (ri, run) in self.runs.iter().enumerate() {
                    for (t, (block, radius)) in layout.blocks.iter().zip(radii).enumerate() {
                        let Some(r) = *radius else { continue };
                        if matches!(part, Part::Table(only) if only != t) {
                            continue;
                        }
                        let table = &run.tables[t];
                        if table.is_empty() {
                            continue;
                        }
                        for_each_within(block.value(q), block.bits, r, |v| {
                            plan.clear();
                            table.plan(*block, v, plan);
                            for s in plan.iter() {
                                table.prefetch_dir(s);
                                probes.push(Probe {
                                    query: qi as u32,
                                    run: ri as u32,
                                    table: t as u32,
                                    value: v,
                                    search: *s,
                                });
                            }
                        });
                    }
                }
            }
            // 2. The first entries of every bucket.
            for p in probes.iter() {
                self.runs[p.run as usize].tables[p.table as usize].prefetch_bucket(&p.search);
            }
            // 3. Entries that pass the key filter (key-slice tables: their rows' loads started;
            // whole-fingerprint and implicit tables: checked on the spot).
            for (pi, p) in probes.iter().enumerate() {
                let run = &self.runs[p.run as usize];
                let table = &run.tables[p.table as usize];
                let t = p.table as usize;
                let block = layout.blocks[t];
                let q = qs[p.query as usize];
                if table.is_implicit() {
                    table.run_search_implicit(&p.search, q, k, &mut |i, fp| {
                        let row = run.start + i as u32;
                        if block.value(fp) == p.value
                            && self.is_live(row)
                            && first_table(layout, radii, t, fp, q)
                        {
                            out.push((p.query, (fp ^ q).count_ones(), row));
                        }
                    });
                } else if table.is_full() {
                    table.run_search_full(
                        &p.search,
                        q.rotate_left(block.offset),
                        k,
                        &mut |i, rot| {
                            let fp = rot.rotate_right(block.offset);
                            let row = run.start + i;
                            if block.value(fp) == p.value
                                && self.is_live(row)
                                && first_table(layout, radii, t, fp, q)
                            {
                                out.push((p.query, (fp ^ q).count_ones(), row));
                            }
                        },
                    );
                } else {
                    table.run_search(&p.search, block.key(q), k, &mut |i| {
                        table.prefetch_row(i);
                        cands.push((pi as u32, i as u32));
                    });
                }
            }
            // 4. Entries of the candidates in the implicit table, their loads started.
            for c in cands.iter_mut() {
                let p = &probes[c.0 as usize];
                let run = &self.runs[p.run as usize];
                let i = run.tables[p.table as usize].row(c.1 as usize);
                run.tables[0].prefetch_low(i as usize);
                c.1 = i;
            }
            // 5. Exact check of each candidate (the kept low bits first).
            for &(pi, i) in cands.iter() {
                let p = &probes[pi as usize];
                let run = &self.runs[p.run as usize];
                let imp = &run.tables[0];
                let q = qs[p.query as usize];
                if !imp.low_within(i as usize, q, k) {
                    continue;
                }
                let t = p.table as usize;
                let fp = imp.fp(i as usize);
                if layout.blocks[t].value(fp) != p.value {
                    continue;
                }
                let d = (fp ^ q).count_ones();
                let row = run.start + i;
                if d <= k && self.is_live(row) && first_table(layout, radii, t, fp, q) {
                    out.push((p.query, d, row));
                }
            }
        });
        if part == Part::All {
            for (qi, &q) in qs.iter().enumerate() {
                self.scan_tail(qi as u32, q, k, out);
            }
        }
    }

    /// Every live row of the runs within `k` of `q`, by reading them all.
    fn scan_runs(&self, qi: u32, q: u64, k: u32, out: &mut Vec<(u32, u32, u32)>) {
        for run in &self.runs {
            for (i, fp) in run.tables[0].fps().enumerate() {
                let d = (fp ^ q).count_ones();
                let row = run.start + i as u32;
                if d <= k && self.is_live(row) {
                    out.push((qi, d, row));
                }
            }
        }
    }

    /// Every live row of the tail within `k` of `q`.
    fn scan_tail(&self, qi: u32, q: u64, k: u32, out: &mut Vec<(u32, u32, u32)>) {
        for (i, &fp) in self.tail_fps.iter().enumerate() {
            let d = (fp ^ q).count_ones();
            let row = self.indexed + i as u32;
            if d <= k && self.is_live(row) {
                out.push((qi, d, row));
            }
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.tail_fps.capacity() * 8
            + self.tail_ts.capacity() * 8
            + self.tail_ids.memory_bytes()
            + self.live.capacity() * 8
            + self.runs.iter().map(Run::memory_bytes).sum::<usize>()
    }

    pub fn shrink_to_fit(&mut self) {
        self.tail_fps.shrink_to_fit();
        self.tail_ts.shrink_to_fit();
        self.tail_ids.shrink_to_fit();
        self.live.shrink_to_fit();
    }
}
