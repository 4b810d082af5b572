//! All pairs of live items within k, and their connected components.

use rayon::prelude::*;

use super::layout::Block;
use super::{check_k, parallel_allowed, split, Index, Loc};
use crate::Result;

/// A pair of locations and their distance.
pub type Pair = (u64, u64, u32);

impl Index {
    /// Every unordered pair of live items at distance <= k, exactly once, as locations (see
    /// [`Index::id_at`]): (older, newer, distance) in time order of the first item.
    pub fn near_pairs_locs(&self, k: Option<u32>) -> Result<Vec<Pair>> {
        let k = k.unwrap_or(self.k);
        check_k(k)?;
        let radii = self.layout.radii(k);
        if radii.iter().all(|r| r.is_none_or(|r| r == 0)) {
            return Ok(self.near_pairs_sorted(k, &radii));
        }
        let items: Vec<(Loc, u64)> = self.live_items().map(|(l, fp, _)| (l, fp)).collect();
        let rank = self.ranks();
        let pos = |l: Loc| -> usize {
            let (s, r) = split(l);
            rank[s as usize] + r as usize
        };
        let one = |&(l, fp): &(Loc, u64)| -> Vec<Pair> {
            let me = pos(l);
            let mut v: Vec<Pair> = self
                .query_locs(fp, k)
                .into_iter()
                .filter(|&(_, o)| pos(o) > me)
                .map(|(d, o)| (l, o, d))
                .collect();
            v.sort_by_key(|p| pos(p.1));
            v
        };
        let chunks: Vec<Vec<Pair>> = if items.len() >= super::PAR_MIN && parallel_allowed() {
            items
                .par_chunks(4096)
                .map(|c| c.iter().flat_map(one).collect())
                .collect()
        } else {
            vec![items.iter().flat_map(one).collect()]
        };
        Ok(chunks.concat())
    }

    /// All pairs when every probed block has radius 0 (k < number of blocks): for each probed
    /// block, sort all live items by the fingerprint rotated to put that block first, and check
    /// every pair inside each run of equal block values. Memory access is sequential; a pair is
    /// reported by the first block on which the two agree.
    fn near_pairs_sorted(&self, k: u32, radii: &[Option<u32>]) -> Vec<Pair> {
        let items: Vec<(Loc, u64)> = self.live_items().map(|(l, fp, _)| (l, fp)).collect();
        let par = items.len() >= super::PAR_MIN && parallel_allowed();
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
    const CHUNK: usize = 16;
    for a in 0..rot.len() {
        let x = rot[a];
        // Hits are rare: a branch-free minimum over a chunk (vectorised) says whether to look.
        let mut base = a + 1;
        for chunk in rot[a + 1..].chunks(CHUNK) {
            let nearest = chunk
                .iter()
                .fold(64u32, |m, &y| m.min((x ^ y).count_ones()));
            if nearest <= k {
                for (off, &y) in chunk.iter().enumerate() {
                    let d = (x ^ y).count_ones();
                    if d <= k {
                        f(a, base + off, d);
                    }
                }
            }
            base += chunk.len();
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn scan_group_avx2(rot: &[u64], k: u32, f: &mut impl FnMut(usize, usize, u32)) {
    scan_group_plain(rot, k, f)
}
