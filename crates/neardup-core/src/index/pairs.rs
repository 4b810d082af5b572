//! All pairs of live items within k, and their connected components.

use rayon::prelude::*;

use super::layout::Block;
use super::{check_k, split, Index, Loc};
use crate::parallel;
use crate::Result;

/// A pair of locations and their distance.
pub type Pair = (u64, u64, u32);

impl Index {
    /// Every unordered pair of live items at distance <= k, exactly once, as locations (see
    /// [`Index::id_at`]): (older, newer, distance) in time order of the first item. When the
    /// index's own blocks are matched exactly (k < number of blocks) this sorts by each block;
    /// otherwise it runs the batch self-join (`self_join`) over blocks chosen for the join.
    pub fn near_pairs_locs(&self, k: Option<u32>) -> Result<Vec<Pair>> {
        let k = k.unwrap_or(self.k);
        check_k(k)?;
        let radii = self.layout.radii(k);
        if radii.iter().all(|r| r.is_none_or(|r| r == 0)) {
            return Ok(self.near_pairs_sorted(k, &radii));
        }
        let items: Vec<(Loc, u64)> = self.live_items().map(|(l, fp, _)| (l, fp)).collect();
        let fps: Vec<u64> = items.iter().map(|&(_, fp)| fp).collect();
        let found = parallel::install(items.len() >= super::PAR_MIN, |par| self_join(&fps, k, par));
        Ok(found
            .into_iter()
            .map(|(i, j, d)| (items[i as usize].0, items[j as usize].0, d))
            .collect())
    }

    /// All pairs when every probed block has radius 0 (k < number of blocks): for each probed
    /// block, sort all live items by the fingerprint rotated to put that block first, and check
    /// every pair inside each run of equal block values. Memory access is sequential; a pair is
    /// reported by the first block on which the two agree.
    fn near_pairs_sorted(&self, k: u32, radii: &[Option<u32>]) -> Vec<Pair> {
        let items: Vec<(Loc, u64)> = self.live_items().map(|(l, fp, _)| (l, fp)).collect();
        parallel::install(items.len() >= super::PAR_MIN, |par| {
            self.near_pairs_sorted_with(&items, k, radii, par)
        })
    }

    /// [`Index::near_pairs_sorted`] of `items`; `par`: running inside the crate's pool.
    fn near_pairs_sorted_with(
        &self,
        items: &[(Loc, u64)],
        k: u32,
        radii: &[Option<u32>],
        par: bool,
    ) -> Vec<Pair> {
        let probed: Vec<Block> = self
            .layout
            .blocks
            .iter()
            .zip(radii)
            .filter(|(_, r)| r.is_some())
            .map(|(b, _)| *b)
            .collect();
        let mut found: Vec<(u32, u32, u32)> = Vec::new();
        for (t, block) in probed.iter().enumerate() {
            let mut keyed: Vec<(u64, u32)> = if par {
                items
                    .par_iter()
                    .enumerate()
                    .map(|(i, &(_, fp))| (fp.rotate_left(block.offset), i as u32))
                    .collect()
            } else {
                items
                    .iter()
                    .enumerate()
                    .map(|(i, &(_, fp))| (fp.rotate_left(block.offset), i as u32))
                    .collect()
            };
            if par {
                keyed.par_sort_unstable_by_key(|e| e.0);
            } else {
                keyed.sort_unstable_by_key(|e| e.0);
            }
            let (rot, idx): (Vec<u64>, Vec<u32>) = keyed.into_iter().unzip();
            // Runs of equal block values.
            let shift = 64 - block.bits;
            let mut groups: Vec<(usize, usize)> = Vec::new();
            let mut start = 0;
            for i in 1..=rot.len() {
                if i == rot.len() || rot[i] >> shift != rot[start] >> shift {
                    if i - start > 1 {
                        groups.push((start, i));
                    }
                    start = i;
                }
            }
            let earlier = &probed[..t];
            let scan = |&(s, e): &(usize, usize)| -> Vec<(u32, u32, u32)> {
                let mut out = Vec::new();
                scan_group(&rot[s..e], k, &mut |a, b, d| {
                    // Unrotated difference: skip pairs an earlier block already reported.
                    let x = (rot[s + a] ^ rot[s + b]).rotate_right(block.offset);
                    if earlier.iter().all(|b2| b2.value(x) != 0) {
                        let (i, j) = (idx[s + a], idx[s + b]);
                        out.push((i.min(j), i.max(j), d));
                    }
                });
                out
            };
            let parts: Vec<Vec<(u32, u32, u32)>> = if par {
                groups.par_iter().map(scan).collect()
            } else {
                groups.iter().map(scan).collect()
            };
            found.extend(parts.into_iter().flatten());
        }
        if par {
            found.par_sort_unstable();
        } else {
            found.sort_unstable();
        }
        found
            .into_iter()
            .map(|(i, j, d)| (items[i as usize].0, items[j as usize].0, d))
            .collect()
    }

    /// Position of each segment's row 0 in time order (segments in key order).
    fn ranks(&self) -> Vec<usize> {
        let mut rank = vec![0usize; self.segs.len()];
        let mut at = 0usize;
        for &slot in self.by_key.values() {
            rank[slot as usize] = at;
            at += self.seg(slot).rows() as usize;
        }
        rank
    }

    /// Connected components (union-find over `near_pairs`) with at least two members, members
    /// in time order, components ordered by their first member. Items with no neighbour within
    /// k are not listed.
    pub fn clusters_locs(&self, k: Option<u32>) -> Result<Vec<Vec<Loc>>> {
        let pairs = self.near_pairs_locs(k)?;
        let rank = self.ranks();
        let total: usize = self
            .by_key
            .values()
            .map(|&s| self.seg(s).rows() as usize)
            .sum();
        let pos = |l: Loc| -> usize {
            let (s, r) = split(l);
            rank[s as usize] + r as usize
        };
        let mut parent: Vec<u32> = (0..total as u32).collect();
        fn root(parent: &mut [u32], mut x: u32) -> u32 {
            while parent[x as usize] != x {
                let up = parent[parent[x as usize] as usize];
                parent[x as usize] = up;
                x = up;
            }
            x
        }
        for &(a, b, _) in &pairs {
            let (ra, rb) = (
                root(&mut parent, pos(a) as u32),
                root(&mut parent, pos(b) as u32),
            );
            if ra != rb {
                // The earlier item stays the root, so a component is named by its first member.
                let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
                parent[hi as usize] = lo;
            }
        }
        let mut members: Vec<Vec<Loc>> = Vec::new();
        let mut slot_of_root: std::collections::HashMap<u32, usize> =
            std::collections::HashMap::new();
        let mut in_pair = vec![false; total];
        for &(a, b, _) in &pairs {
            in_pair[pos(a)] = true;
            in_pair[pos(b)] = true;
        }
        for (l, _, _) in self.live_items() {
            let p = pos(l);
            if !in_pair[p] {
                continue;
            }
            let r = root(&mut parent, p as u32);
            let i = *slot_of_root.entry(r).or_insert_with(|| {
                members.push(Vec::new());
                members.len() - 1
            });
            members[i].push(l);
        }
        Ok(members)
    }
}

/// Calls `f(a, b, d)` for every pair `a < b` of `rot` within distance `k`.
fn scan_group(rot: &[u64], k: u32, f: &mut impl FnMut(usize, usize, u32)) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // SAFETY: the CPU has the features the function is compiled for (checked above).
            unsafe { scan_group_avx2(rot, k, f) };
            return;
        }
    }
    scan_group_plain(rot, k, f);
}

#[inline(always)]
fn scan_group_plain(rot: &[u64], k: u32, f: &mut impl FnMut(usize, usize, u32)) {
    for (a, &x) in rot.iter().enumerate() {
        cross(x, &rot[a + 1..], k, &mut |off, d| f(a, a + 1 + off, d));
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn scan_group_avx2(rot: &[u64], k: u32, f: &mut impl FnMut(usize, usize, u32)) {
    scan_group_plain(rot, k, f)
}

// ---------------------------------------------------------------------------------------------
// Batch self-join for any k: multi-index hashing over blocks chosen for the join.
//
// With probed blocks of widths b_i and radii r_i with sum(r_i + 1) >= k + 1, two fingerprints
// within k bits differ in at most r_i bits on some block i (otherwise they would differ in at
// least k + 1 bits). For each block the items are counting-sorted by the block's value (a dense
// directory of 2^b + 1 offsets), and every pair of buckets whose values differ in at most r_i
// bits is joined once (the smaller value first): a contiguous xor + popcount scan. A pair is
// reported by the first block (in plan order) whose block distance is within its radius, so
// each pair comes out once without a hash set.
// ---------------------------------------------------------------------------------------------

/// Widest block the join indexes with a dense directory (2^22 + 1 offsets: 16 MiB).
const JOIN_MAX_BITS: u32 = 22;
/// Most Hamming-ball masks one block may enumerate.
const JOIN_MAX_MASKS: f64 = (1u64 << 20) as f64;
/// Estimated costs in nanoseconds (one core of the development machine, fitted to measured
/// joins of 1 M random fingerprints at k = 13 over several plans): counting sort per item and
/// block, directory per bucket, one neighbour bucket looked up from a non-empty bucket, one
/// scan of a non-empty neighbour bucket for one item, one candidate pair checked (vectorised),
/// one pair of the all-pairs scan.
const C_ITEM: f64 = 8.0;
const C_BUCKET: f64 = 1.0;
const C_PROBE: f64 = 2.0;
const C_CALL: f64 = 6.0;
const C_CAND: f64 = 0.15;
const C_BRUTE: f64 = 0.3;

/// A block of the join: `bits` consecutive bits starting `offset` below the most significant
/// bit, searched within `radius` bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JoinBlock {
    pub offset: u32,
    pub bits: u32,
    pub radius: u32,
}

impl JoinBlock {
    /// The block's value in `x` (unrotated fingerprint or difference).
    #[inline(always)]
    fn value(&self, x: u64) -> u32 {
        (x.rotate_left(self.offset) >> (64 - self.bits)) as u32
    }
}

/// Estimated cost (ns) of joining `n` items on one block of `bits` bits within `radius`: each
/// non-empty bucket looks up the half of its neighbours with larger values, each item scans
/// the non-empty ones, and each pair of items within the radius on the block is checked.
fn block_cost(n: f64, bits: u32, radius: u32) -> f64 {
    let buckets = 2f64.powi(bits as i32);
    let full = 1.0 - (-n / buckets).exp();
    let half_ball = (super::layout::ball(bits, radius) - 1.0) / 2.0;
    let pairs = n * (n - 1.0) / 2.0;
    C_ITEM * n
        + C_BUCKET * buckets
        + C_PROBE * buckets * full * half_ball
        + C_CALL * n * half_ball * full
        + C_CAND * pairs * (2.0 * half_ball + 1.0) / buckets
}

/// The blocks the join of `n` items at distance `k` uses (least estimated cost), or `None` when
/// checking all pairs is cheaper.
pub(crate) fn join_plan(n: usize, k: u32) -> Option<Vec<JoinBlock>> {
    let nf = n as f64;
    let brute = C_BRUTE * nf * (nf - 1.0) / 2.0;
    let need = (k + 1) as usize;
    // best[used bits][covered budget, capped at need] = (cost, previous state, block).
    type Cell = Option<(f64, usize, usize, u32, u32)>;
    let mut best: Vec<Vec<Cell>> = vec![vec![None; need + 1]; 65];
    best[0][0] = Some((0.0, 0, 0, 0, 0));
    // Cost of each usable (bits, radius).
    let choices: Vec<(u32, u32, f64)> = (1..=JOIN_MAX_BITS)
        .flat_map(|bits| (0..bits).map(move |radius| (bits, radius)))
        .filter(|&(bits, radius)| super::layout::ball(bits, radius) <= JOIN_MAX_MASKS)
        .map(|(bits, radius)| (bits, radius, block_cost(nf, bits, radius)))
        .collect();
    for used in 0..64usize {
        for got in 0..need {
            let Some((cost, ..)) = best[used][got] else {
                continue;
            };
            for &(bits, radius, c) in &choices {
                if used + bits as usize > 64 {
                    continue;
                }
                let c = cost + c;
                let (u2, g2) = (used + bits as usize, (got + radius as usize + 1).min(need));
                if best[u2][g2].is_none_or(|b| c < b.0) {
                    best[u2][g2] = Some((c, used, got, bits, radius));
                }
            }
        }
    }
    let (mut used, cost) = (0..=64usize)
        .filter_map(|u| best[u][need].map(|c| (u, c.0)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    if cost >= brute {
        return None;
    }
    let mut got = need;
    let mut widths: Vec<(u32, u32)> = Vec::new();
    while used > 0 {
        let (_, pu, pg, bits, radius) = best[used][got]?;
        widths.push((bits, radius));
        (used, got) = (pu, pg);
    }
    // Most selective blocks first: they report most pairs, so fewer hits are checked twice.
    widths.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut offset = 0;
    Some(
        widths
            .into_iter()
            .map(|(bits, radius)| {
                let b = JoinBlock {
                    offset,
                    bits,
                    radius,
                };
                offset += bits;
                b
            })
            .collect(),
    )
}

/// Every pair `(i, j, d)` with `i < j` of `fps` at Hamming distance `d <= k`, exactly once,
/// sorted by `(i, j)`. `par`: use rayon (inside [`crate::parallel::install`]).
pub(crate) fn self_join(fps: &[u64], k: u32, par: bool) -> Vec<(u32, u32, u32)> {
    match join_plan(fps.len(), k) {
        None => all_pairs(fps, k, par),
        Some(plan) => self_join_with(fps, k, &plan, par),
    }
}

/// [`self_join`] with the given blocks (their radii must cover k: sum(r + 1) >= k + 1).
pub(crate) fn self_join_with(
    fps: &[u64],
    k: u32,
    plan: &[JoinBlock],
    par: bool,
) -> Vec<(u32, u32, u32)> {
    let mut found: Vec<(u32, u32, u32)> = Vec::new();
    for (t, blk) in plan.iter().enumerate() {
        found.extend(join_block(fps, *blk, &plan[..t], k, par));
    }
    if par {
        found.par_sort_unstable();
    } else {
        found.sort_unstable();
    }
    found
}

/// Every pair of `fps` within k by checking all pairs, in index order.
fn all_pairs(fps: &[u64], k: u32, par: bool) -> Vec<(u32, u32, u32)> {
    const ROWS: usize = 64;
    let rows = |start: usize| -> Vec<(u32, u32, u32)> {
        let mut out = Vec::new();
        for a in start..(start + ROWS).min(fps.len()) {
            let x = fps[a];
            cross(x, &fps[a + 1..], k, &mut |off, d| {
                out.push((a as u32, (a + 1 + off) as u32, d));
            });
        }
        out
    };
    let starts: Vec<usize> = (0..fps.len()).step_by(ROWS).collect();
    let parts: Vec<Vec<(u32, u32, u32)>> = if par {
        starts.par_iter().map(|&s| rows(s)).collect()
    } else {
        starts.iter().map(|&s| rows(s)).collect()
    };
    parts.concat()
}

/// Calls `f(offset, d)` for every `y = ys[offset]` within `k` of `x`.
#[inline(always)]
fn cross(x: u64, ys: &[u64], k: u32, f: &mut impl FnMut(usize, u32)) {
    const CHUNK: usize = 16;
    let mut base = 0;
    for chunk in ys.chunks(CHUNK) {
        // Hits are rare: a branch-free minimum over a chunk says whether to look.
        let nearest = chunk
            .iter()
            .fold(64u32, |m, &y| m.min((x ^ y).count_ones()));
        if nearest <= k {
            for (off, &y) in chunk.iter().enumerate() {
                let d = (x ^ y).count_ones();
                if d <= k {
                    f(base + off, d);
                }
            }
        }
        base += chunk.len();
    }
}

/// The sorted view of the items by one block.
struct Sorted<'a> {
    /// Fingerprints rotated to put the block first, grouped by block value.
    keys: Vec<u64>,
    /// Item index of each key.
    pos: Vec<u32>,
    /// `dir[v]..dir[v + 1]`: the keys whose block value is `v`.
    dir: Vec<u32>,
    /// Masks of weight 1..=radius, grouped by their highest bit: `by_top[t]..by_top[t + 1]`.
    masks: Vec<u32>,
    by_top: Vec<usize>,
    blk: JoinBlock,
    earlier: &'a [JoinBlock],
    k: u32,
}

/// Pairs found on block `blk` and on no block of `earlier`.
fn join_block(
    fps: &[u64],
    blk: JoinBlock,
    earlier: &[JoinBlock],
    k: u32,
    par: bool,
) -> Vec<(u32, u32, u32)> {
    let shift = 64 - blk.bits;
    let nb = 1usize << blk.bits;
    let mut dir = vec![0u32; nb + 1];
    for &fp in fps {
        dir[(fp.rotate_left(blk.offset) >> shift) as usize + 1] += 1;
    }
    for v in 0..nb {
        dir[v + 1] += dir[v];
    }
    let mut fill: Vec<u32> = dir[..nb].to_vec();
    let mut keys = vec![0u64; fps.len()];
    let mut pos = vec![0u32; fps.len()];
    for (i, &fp) in fps.iter().enumerate() {
        let rot = fp.rotate_left(blk.offset);
        let slot = &mut fill[(rot >> shift) as usize];
        keys[*slot as usize] = rot;
        pos[*slot as usize] = i as u32;
        *slot += 1;
    }
    drop(fill);
    let mut masks: Vec<u32> = Vec::new();
    super::layout::for_each_within(0, blk.bits, blk.radius, |m| masks.push(m));
    masks.retain(|&m| m != 0);
    masks.sort_by_key(|&m| (31 - m.leading_zeros(), m));
    let mut by_top = vec![0usize; blk.bits as usize + 1];
    for &m in &masks {
        by_top[(31 - m.leading_zeros()) as usize + 1] += 1;
    }
    for t in 0..blk.bits as usize {
        by_top[t + 1] += by_top[t];
    }
    let s = Sorted {
        keys,
        pos,
        dir,
        masks,
        by_top,
        blk,
        earlier,
        k,
    };
    let chunk = (nb / 256).max(1);
    let starts: Vec<usize> = (0..nb).step_by(chunk).collect();
    let run = |&lo: &usize| -> Vec<(u32, u32, u32)> {
        let mut out = Vec::new();
        s.join_range(lo, (lo + chunk).min(nb), &mut out);
        out
    };
    let parts: Vec<Vec<(u32, u32, u32)>> = if par {
        starts.par_iter().map(run).collect()
    } else {
        starts.iter().map(run).collect()
    };
    parts.concat()
}

impl Sorted<'_> {
    fn join_range(&self, lo: usize, hi: usize, out: &mut Vec<(u32, u32, u32)>) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
                && std::arch::is_x86_feature_detected!("popcnt")
            {
                // SAFETY: the CPU has the features the function is compiled for (checked above).
                unsafe { self.join_range_avx512(lo, hi, out) };
                return;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("popcnt")
            {
                // SAFETY: as above.
                unsafe { self.join_range_avx2(lo, hi, out) };
                return;
            }
        }
        self.join_range_plain(lo, hi, out);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vpopcntdq,popcnt")]
    unsafe fn join_range_avx512(&self, lo: usize, hi: usize, out: &mut Vec<(u32, u32, u32)>) {
        self.join_range_plain(lo, hi, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn join_range_avx2(&self, lo: usize, hi: usize, out: &mut Vec<(u32, u32, u32)>) {
        self.join_range_plain(lo, hi, out)
    }

    #[inline(always)]
    fn join_range_plain(&self, lo: usize, hi: usize, out: &mut Vec<(u32, u32, u32)>) {
        let (dir, keys, k) = (&self.dir, &self.keys, self.k);
        for v in lo..hi {
            let (s, e) = (dir[v] as usize, dir[v + 1] as usize);
            if s == e {
                continue;
            }
            // Pairs inside the bucket.
            for a in s..e {
                cross(keys[a], &keys[a + 1..e], k, &mut |off, d| {
                    self.emit(a, a + 1 + off, d, out)
                });
            }
            // Pairs with each bucket within the radius whose value is larger: a mask whose
            // highest bit is 0 in v.
            for t in 0..self.blk.bits as usize {
                if (v >> t) & 1 == 1 {
                    continue;
                }
                for &m in &self.masks[self.by_top[t]..self.by_top[t + 1]] {
                    let w = v ^ m as usize;
                    let (s2, e2) = (dir[w] as usize, dir[w + 1] as usize);
                    if s2 == e2 {
                        continue;
                    }
                    let other = &keys[s2..e2];
                    for (a, &x) in keys[s..e].iter().enumerate() {
                        cross(x, other, k, &mut |off, d| {
                            self.emit(s + a, s2 + off, d, out)
                        });
                    }
                }
            }
        }
    }

    /// Records the pair of keys `a`, `b` (distance `d <= k`) unless an earlier block reports it.
    #[inline(always)]
    fn emit(&self, a: usize, b: usize, d: u32, out: &mut Vec<(u32, u32, u32)>) {
        let x = (self.keys[a] ^ self.keys[b]).rotate_right(self.blk.offset);
        if self
            .earlier
            .iter()
            .any(|e| e.value(x).count_ones() <= e.radius)
        {
            return;
        }
        let (i, j) = (self.pos[a], self.pos[b]);
        out.push((i.min(j), i.max(j), d));
    }
}

#[cfg(test)]
#[path = "pairs_tests.rs"]
mod join_tests;
