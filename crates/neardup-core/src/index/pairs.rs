//! All pairs of live items within k, and their connected components.

use rayon::prelude::*;

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
