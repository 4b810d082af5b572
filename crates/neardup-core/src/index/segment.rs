//! A time partition of the index: the items whose timestamp falls in one span. Expiry drops
//! whole segments, so it costs what it frees.
//!
//! Rows are appended; rows `0..indexed` are covered by immutable runs of sorted tables, the
//! newest rows (the tail, at most [`TAIL_MAX`]) are scanned. Runs are merged when a newer one
//! grows to half the size of the one before it, so a segment of n rows has O(log n) runs.

use super::ids::{IdColumn, IdRef};
use super::layout::{for_each_within, Layout, PROBE_COST};
use super::table::{advise_huge, prefetch, Run, Search};

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

/// Timestamps of a segment's rows, exactly as given. While every row has the same timestamp
/// (a batch added with one time, e.g. `timestamps=None`) the column holds that one value and
/// nothing per row. Then, while every timestamp is a whole number of milliseconds away from
/// the segment's first one (within +-24 days: whole seconds, a few batch times), each takes 4
/// bytes (that offset); the first other value turns the column into plain 8-byte floats.
pub enum TsColumn {
    Same { value: f64, rows: usize },
    Ms { base: f64, offs: Vec<i32> },
    Float(Vec<f64>),
}

impl Default for TsColumn {
    fn default() -> TsColumn {
        TsColumn::Same {
            value: 0.0,
            rows: 0,
        }
    }
}

/// The value an offset of `off` milliseconds from `base` stands for.
#[inline]
fn from_ms(base: f64, off: i32) -> f64 {
    base + f64::from(off) / 1000.0
}

impl TsColumn {
    #[inline]
    pub fn get(&self, row: u32) -> f64 {
        match self {
            TsColumn::Same { value, .. } => *value,
            TsColumn::Ms { base, offs } => from_ms(*base, offs[row as usize]),
            TsColumn::Float(v) => v[row as usize],
        }
    }

    pub fn push(&mut self, ts: f64) {
        if let TsColumn::Same { value, rows } = self {
            if *rows == 0 {
                *value = ts;
            }
            if value.to_bits() == ts.to_bits() {
                *rows += 1;
                return;
            }
            // A second value: one offset (or float) per row from now on.
            let (value, rows) = (*value, *rows);
            *self = if from_ms(value, 0).to_bits() == value.to_bits() {
                TsColumn::Ms {
                    base: value,
                    offs: vec![0; rows],
                }
            } else {
                TsColumn::Float(vec![value; rows])
            };
        }
        if let TsColumn::Ms { base, offs } = self {
            let off = ((ts - *base) * 1000.0).round();
            if off.abs() <= f64::from(i32::MAX) {
                let off = off as i32;
                if from_ms(*base, off).to_bits() == ts.to_bits() {
                    offs.push(off);
                    return;
                }
            }
            // Not exact: widen (every stored value is reproduced exactly).
            let mut v = Vec::with_capacity(offs.capacity().max(offs.len() + 1));
            v.extend(offs.iter().map(|&o| from_ms(*base, o)));
            *self = TsColumn::Float(v);
        }
        if let TsColumn::Float(v) = self {
            v.push(ts);
        }
    }

    pub fn reserve(&mut self, n: usize) {
        match self {
            TsColumn::Same { .. } => {}
            TsColumn::Ms { offs, .. } => {
                offs.reserve_exact(n);
                advise_huge(offs);
            }
            TsColumn::Float(v) => {
                v.reserve_exact(n);
                advise_huge(v);
            }
        }
    }

    pub fn memory_bytes(&self) -> usize {
        match self {
            TsColumn::Same { .. } => 0,
            TsColumn::Ms { offs, .. } => offs.capacity() * 4,
            TsColumn::Float(v) => v.capacity() * 8,
        }
    }

    pub fn shrink_to_fit(&mut self) {
        match self {
            TsColumn::Same { .. } => {}
            TsColumn::Ms { offs, .. } => offs.shrink_to_fit(),
            TsColumn::Float(v) => v.shrink_to_fit(),
        }
    }
}

/// Rows kept unindexed before they are built into a run (scanned by every query meanwhile).
pub const TAIL_MAX: usize = 512;

pub struct Segment {
    /// floor(timestamp / span) of every item here.
    pub key: i64,
    pub fps: Vec<u64>,
    pub ts: TsColumn,
    pub ids: IdColumn,
    live: Vec<u64>,
    pub n_live: usize,
    pub runs: Vec<Run>,
    pub indexed: u32,
}

impl Segment {
    pub fn new(key: i64) -> Segment {
        Segment {
            key,
            fps: Vec::new(),
            ts: TsColumn::default(),
            ids: IdColumn::default(),
            live: Vec::new(),
            n_live: 0,
            runs: Vec::new(),
            indexed: 0,
        }
    }

    pub fn rows(&self) -> u32 {
        self.fps.len() as u32
    }

    pub fn push(&mut self, id: IdRef<'_>, fp: u64, ts: f64) -> u32 {
        let row = self.fps.len();
        self.fps.push(fp);
        self.ts.push(ts);
        self.ids.push(id);
        if row / 64 >= self.live.len() {
            self.live.push(0);
        }
        self.live[row / 64] |= 1 << (row % 64);
        self.n_live += 1;
        row as u32
    }

    /// Room for `n` more rows (big batches: backed by huge pages, see `advise_huge`).
    pub fn reserve(&mut self, n: usize) {
        self.fps.reserve_exact(n);
        self.ts.reserve(n);
        self.ids.reserve(n);
        self.live.reserve_exact(n / 64 + 1);
        advise_huge(&self.fps);
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

    pub fn live_rows(&self, start: u32, end: u32) -> Vec<u32> {
        (start..end).filter(|&r| self.is_live(r)).collect()
    }

    /// Builds the tail into a run if it is full (or `force` and not empty), then merges runs.
    pub fn freeze(&mut self, layout: &Layout, force: bool) {
        let tail = self.fps.len() - self.indexed as usize;
        if tail == 0 || (!force && tail < TAIL_MAX) {
            return;
        }
        let (start, end) = (self.indexed, self.rows());
        let rows = self.live_rows(start, end);
        self.runs
            .push(Run::build(layout, &self.fps, &rows, start, end));
        self.indexed = end;
        while self.runs.len() >= 2 {
            let n = self.runs.len();
            if self.runs[n - 2].span() > 2 * self.runs[n - 1].span() {
                break;
            }
            let start = self.runs[n - 2].start;
            self.runs.truncate(n - 2);
            let rows = self.live_rows(start, end);
            self.runs
                .push(Run::build(layout, &self.fps, &rows, start, end));
        }
    }

    /// Rebuilds every run into one (after a bulk load, or to drop dead rows from the tables).
    pub fn rebuild(&mut self, layout: &Layout) {
        let end = self.rows();
        let rows = self.live_rows(0, end);
        self.runs.clear();
        if !rows.is_empty() {
            self.runs.push(Run::build(layout, &self.fps, &rows, 0, end));
        }
        self.indexed = end;
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
                    self.scan(0, self.rows(), qi as u32, q, k, out);
                }
            }
            return;
        }
        if part == Part::Rest {
            for (qi, &q) in qs.iter().enumerate() {
                self.scan(self.indexed, self.rows(), qi as u32, q, k, out);
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
            // whole-fingerprint tables: checked on the spot).
            for (pi, p) in probes.iter().enumerate() {
                let table = &self.runs[p.run as usize].tables[p.table as usize];
                let t = p.table as usize;
                let block = layout.blocks[t];
                let q = qs[p.query as usize];
                if table.is_full() {
                    table.run_search_full(
                        &p.search,
                        q.rotate_left(block.offset),
                        k,
                        &mut |row, rot| {
                            let fp = rot.rotate_right(block.offset);
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
            // 4. Rows of the candidates, with their fingerprints' loads started.
            for c in cands.iter_mut() {
                let p = &probes[c.0 as usize];
                let row = self.runs[p.run as usize].tables[p.table as usize].row(c.1 as usize);
                prefetch(self.fps.as_ptr().wrapping_add(row as usize));
                c.1 = row;
            }
            // 5. Exact check of each candidate.
            for &(pi, row) in cands.iter() {
                let p = &probes[pi as usize];
                let t = p.table as usize;
                let q = qs[p.query as usize];
                let fp = self.fps[row as usize];
                if layout.blocks[t].value(fp) != p.value {
                    continue;
                }
                let d = (fp ^ q).count_ones();
                if d <= k && self.is_live(row) && first_table(layout, radii, t, fp, q) {
                    out.push((p.query, d, row));
                }
            }
        });
        if part == Part::All {
            for (qi, &q) in qs.iter().enumerate() {
                self.scan(self.indexed, self.rows(), qi as u32, q, k, out);
            }
        }
    }

    fn scan(&self, start: u32, end: u32, qi: u32, q: u64, k: u32, out: &mut Vec<(u32, u32, u32)>) {
        for row in start..end {
            let d = (self.fps[row as usize] ^ q).count_ones();
            if d <= k && self.is_live(row) {
                out.push((qi, d, row));
            }
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.fps.capacity() * 8
            + self.ts.memory_bytes()
            + self.live.capacity() * 8
            + self.ids.memory_bytes()
            + self.runs.iter().map(Run::memory_bytes).sum::<usize>()
    }

    pub fn shrink_to_fit(&mut self) {
        self.fps.shrink_to_fit();
        self.ts.shrink_to_fit();
        self.live.shrink_to_fit();
        self.ids.shrink_to_fit();
    }
}
