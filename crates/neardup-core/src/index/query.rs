//! Queries: one at a time and in batches (groups that share each step of the search, or, for
//! big batches, a sweep through each table in its key order). Every path gives the same
//! results in the same order (`Index::hit_order`).

use rayon::prelude::*;

use super::segment::Part;
use super::{check_k, loc, Found, Id, Index, Loc, PAR_MIN};
use crate::parallel;
use crate::Result;

/// Bucket searches a group of batch queries aims at, and the most queries in a group.
const GROUP_PROBES: f64 = 256.0;
const MAX_GROUP: usize = 32;
/// Batches at least this large go through each table in its key order (see
/// [`Index::query_many_sorted`]).
pub const SORTED_MIN: usize = 4096;

/// Reusable buffers of a group of queries: hits in one segment as (query, distance, row), and
/// all hits as (query, distance, location).
#[derive(Default)]
struct GroupBufs {
    rows: Vec<(u32, u32, u32)>,
    locs: Vec<(u32, u32, Loc)>,
}

impl Index {
    /// Orders hits `(query, distance, location)` as `query` returns them: by query, nearest
    /// first, then older timestamp, then insertion order.
    fn hit_order(&self, a: &(u32, u32, Loc), b: &(u32, u32, Loc)) -> std::cmp::Ordering {
        a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then_with(|| {
            let (ta, sa) = self.time_key(a.2);
            let (tb, sb) = self.time_key(b.2);
            ta.total_cmp(&tb).then(sa.cmp(&sb))
        })
    }

    /// `(query, distance, location)` of every live item within `k` of each query `qs[query]`,
    /// sorted by query, then nearest first (ties: older timestamp, then insertion order).
    /// Left in `bufs.locs`.
    fn query_group_locs(&self, qs: &[u64], k: u32, radii: &[Option<u32>], bufs: &mut GroupBufs) {
        let GroupBufs {
            rows: buf,
            locs: out,
        } = bufs;
        out.clear();
        for &slot in self.by_key.values() {
            buf.clear();
            self.seg(slot)
                .query_group(&self.layout, radii, qs, k, Part::All, buf);
            out.extend(buf.iter().map(|&(qi, d, row)| (qi, d, loc(slot, row))));
        }
        if out.len() > 1 {
            out.sort_unstable_by(|a, b| self.hit_order(a, b));
        }
    }

    /// Queries answered together by [`Index::query_many`]: enough bucket searches in flight to
    /// overlap their memory accesses, few enough that they stay in cache.
    fn group_size(&self, k: u32) -> usize {
        let runs: usize = self
            .segs
            .iter()
            .flatten()
            .map(|s| s.runs.len().max(1))
            .sum();
        let per_query = self.layout.probes(k) * runs.max(1) as f64;
        ((GROUP_PROBES / per_query) as usize).clamp(1, MAX_GROUP)
    }

    fn resolve_k(&self, k: Option<u32>) -> Result<u32> {
        let k = k.unwrap_or(self.k);
        check_k(k)?;
        Ok(k)
    }

    /// Every stored item whose Hamming distance to `fp` is <= k (inclusive), never one farther,
    /// with its distance, nearest first. `k` None: the index's k.
    pub fn query(&self, fp: u64, k: Option<u32>) -> Result<Vec<(Id, u32)>> {
        let k = self.resolve_k(k)?;
        let radii = self.layout.radii(k);
        let mut bufs = GroupBufs::default();
        self.query_group_locs(&[fp], k, &radii, &mut bufs);
        Ok(bufs
            .locs
            .iter()
            .map(|&(_, d, l)| (self.id_at(l).to_owned(), d))
            .collect())
    }

    /// `query` for each fingerprint (one list per query, in order). Queries are answered in
    /// groups that share each step of the search, the groups in parallel above [`PAR_MIN`]
    /// queries.
    pub fn query_many(&self, fps: &[u64], k: Option<u32>) -> Result<Vec<Found>> {
        let k = self.resolve_k(k)?;
        let radii = self.layout.radii(k);
        if fps.len() >= SORTED_MIN && !self.layout.full && radii.iter().all(|r| r.unwrap_or(0) == 0)
        {
            return Ok(self.query_many_sorted(fps, k, &radii));
        }
        let group = self.group_size(k);
        let mut res: Vec<Found> = Vec::with_capacity(fps.len());
        res.resize_with(fps.len(), Vec::new);
        let work = |bufs: &mut GroupBufs, (qs, rs): (&[u64], &mut [Found])| {
            self.query_group_locs(qs, k, &radii, bufs);
            for &(qi, d, l) in bufs.locs.iter() {
                rs[qi as usize].push((self.id_at(l).to_owned(), d));
            }
        };
        parallel::install(fps.len() >= PAR_MIN, |par| {
            if par {
                fps.par_chunks(group)
                    .zip(res.par_chunks_mut(group))
                    .for_each_init(GroupBufs::default, work);
            } else {
                let mut bufs = GroupBufs::default();
                for pair in fps.chunks(group).zip(res.chunks_mut(group)) {
                    work(&mut bufs, pair);
                }
            }
        });
        Ok(res)
    }

    /// `query_many` of a big batch when every probed table is probed with one value (k below
    /// the number of blocks): for each table, the queries go through it in the table's own
    /// order, so neighbouring queries read neighbouring buckets (a sweep, not a random read
    /// each); then the unindexed tails. The hits of all passes are sorted as `query` sorts.
    fn query_many_sorted(&self, fps: &[u64], k: u32, radii: &[Option<u32>]) -> Vec<Found> {
        parallel::install(true, |par| self.query_many_sorted_with(fps, k, radii, par))
    }

    /// [`Index::query_many_sorted`]; `par`: running inside the crate's pool.
    fn query_many_sorted_with(
        &self,
        fps: &[u64],
        k: u32,
        radii: &[Option<u32>],
        par: bool,
    ) -> Vec<Found> {
        let n = fps.len();
        let mut parts: Vec<Part> = (0..radii.len())
            .filter(|&t| radii[t].is_some())
            .map(Part::Table)
            .collect();
        parts.push(Part::Rest);
        let mut hits: Vec<(u32, u32, Loc)> = Vec::new();
        for part in parts {
            // Queries in the table's key order (`order[i]`: the batch position of the i-th).
            let order: Vec<u32> = match part {
                Part::Table(t) => {
                    let b = self.layout.blocks[t];
                    let mut keyed: Vec<u64> = fps
                        .iter()
                        .enumerate()
                        .map(|(i, &q)| (u64::from(b.key(q)) << 32) | i as u64)
                        .collect();
                    if par {
                        keyed.par_sort_unstable();
                    } else {
                        keyed.sort_unstable();
                    }
                    keyed.into_iter().map(|e| e as u32).collect()
                }
                _ => (0..n as u32).collect(),
            };
            let qs: Vec<u64> = order.iter().map(|&i| fps[i as usize]).collect();
            let chunk = |(ci, group): (usize, &[u64])| -> Vec<(u32, u32, Loc)> {
                let mut buf = Vec::new();
                let mut acc = Vec::new();
                for &slot in self.by_key.values() {
                    buf.clear();
                    self.seg(slot)
                        .query_group(&self.layout, radii, group, k, part, &mut buf);
                    acc.extend(buf.iter().map(|&(qi, d, row)| {
                        (order[ci * MAX_GROUP + qi as usize], d, loc(slot, row))
                    }));
                }
                acc
            };
            let found: Vec<Vec<(u32, u32, Loc)>> = if par {
                qs.par_chunks(MAX_GROUP).enumerate().map(chunk).collect()
            } else {
                qs.chunks(MAX_GROUP).enumerate().map(chunk).collect()
            };
            hits.extend(found.into_iter().flatten());
        }
        let cmp = |a: &(u32, u32, Loc), b: &(u32, u32, Loc)| self.hit_order(a, b);
        if par {
            hits.par_sort_unstable_by(cmp);
        } else {
            hits.sort_unstable_by(cmp);
        }
        let mut res: Vec<Found> = Vec::with_capacity(n);
        res.resize_with(n, Vec::new);
        for &(qi, d, l) in &hits {
            res[qi as usize].push((self.id_at(l).to_owned(), d));
        }
        res
    }
}
