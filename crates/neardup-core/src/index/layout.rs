//! How the 64 bits of a fingerprint are cut into blocks, and which blocks a query probes.
//!
//! The index keeps one sorted table per block. If two fingerprints are within `k` bits and the
//! 64 bits are cut into `m` blocks, then with `k = m*r + a` (`a < m`) one of the first `a + 1`
//! blocks differs in at most `r` bits, or one of the remaining blocks differs in at most `r - 1`
//! bits (otherwise the total would be at least `(a+1)(r+1) + (m-a-1)r = k + 1`). Probing block
//! `i` with every value within its radius therefore finds every neighbour: with `r = 0` this is
//! the pigeonhole rule of Manku et al. (k+1 blocks, exact block match), with `r > 0` it is the
//! multi-index hashing of Norouzi et al.

use crate::{Error, Result};

/// Largest supported k: every pair of 64-bit fingerprints is within 64 bits.
pub const MAX_K: u32 = 64;
/// Fewest and most blocks a layout may have (a block key must fit the 32-bit table key).
pub const MIN_BLOCKS: u32 = 2;
pub const MAX_BLOCKS: u32 = 16;
/// Cost of one probe in units of one candidate check (measured order of magnitude).
pub const PROBE_COST: f64 = 64.0;

/// One block: `bits` consecutive bits starting `offset` bits below the most significant bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub offset: u32,
    pub bits: u32,
}

impl Block {
    /// The 32-bit table key: this block in the top bits, followed by the bits after it
    /// (cyclically), so a table sorted by key is also sorted by the next bits within a bucket.
    #[inline]
    pub fn key(&self, fp: u64) -> u32 {
        (fp.rotate_left(self.offset) >> 32) as u32
    }

    /// The block value of `fp` (`bits` wide).
    #[inline]
    pub fn value(&self, fp: u64) -> u32 {
        self.key(fp) >> (32 - self.bits)
    }

    /// Bits in which `a` and `b` differ inside this block.
    #[inline]
    pub fn distance(&self, a: u64, b: u64) -> u32 {
        self.value(a ^ b).count_ones()
    }
}

/// The cut of 64 bits into blocks; one table per block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub blocks: Vec<Block>,
    /// Tables keep each entry's whole fingerprint (8 bytes) instead of a 2-byte key slice, so
    /// candidates are checked where they lie, not by a random read each. Chosen for large k
    /// (see [`Layout::wants_full`]), where a query has thousands of candidates.
    pub full: bool,
}

impl Layout {
    /// `m` blocks of (nearly) equal width, most significant first.
    pub fn new(m: u32) -> Result<Layout> {
        if !(MIN_BLOCKS..=MAX_BLOCKS).contains(&m) {
            return Err(Error::InvalidArgument(format!(
                "layout must be a number of blocks between {MIN_BLOCKS} and {MAX_BLOCKS}, got {m}"
            )));
        }
        let mut blocks = Vec::with_capacity(m as usize);
        let mut offset = 0;
        for i in 0..m {
            let bits = 64 / m + u32::from(i < 64 % m);
            blocks.push(Block { offset, bits });
            offset += bits;
        }
        Ok(Layout {
            blocks,
            full: false,
        })
    }

    pub fn num_blocks(&self) -> u32 {
        self.blocks.len() as u32
    }

    /// The layout used when the caller does not choose: the number of blocks that minimises the
    /// estimated work of a query at distance `k` over `expected` items (see [`estimate_cost`]).
    pub fn auto(k: u32, expected: usize) -> Layout {
        let mut best = (f64::INFINITY, 4);
        for m in MIN_BLOCKS..=8 {
            // Blocks wider than the 16 + 16 bit key spill into verification; keep them <= 32.
            let cost = estimate_cost(m, k, expected.max(1) as f64);
            if cost < best.0 {
                best = (cost, m);
            }
        }
        // `new` only fails outside MIN_BLOCKS..=MAX_BLOCKS, which the loop never leaves.
        Layout::new(best.1).unwrap_or_else(|_| Layout {
            blocks: Vec::new(),
            full: false,
        })
    }

    /// Whether an index for distance `k` should keep whole fingerprints in its tables: when
    /// queries probe blocks within a radius (k >= number of blocks), the key slice filters
    /// little and each candidate would cost a random read of its fingerprint.
    pub fn wants_full(&self, k: u32) -> bool {
        k >= self.num_blocks()
    }

    /// Probe radius of every block for a query at distance `k` (`None`: block not probed).
    pub fn radii(&self, k: u32) -> Vec<Option<u32>> {
        let m = self.num_blocks();
        let (r, a) = (k / m, k % m);
        (0..m)
            .map(|i| {
                if i <= a {
                    Some(r)
                } else if r > 0 {
                    Some(r - 1)
                } else {
                    None
                }
            })
            .collect()
    }

    /// How many block values a query at distance `k` looks up in all tables together.
    pub fn probes(&self, k: u32) -> f64 {
        self.blocks
            .iter()
            .zip(self.radii(k))
            .map(|(b, r)| r.map_or(0.0, |r| ball(b.bits, r)))
            .sum()
    }

    /// Expected candidates of a query at distance `k` among `n` uniformly spread items.
    pub fn candidates(&self, k: u32, n: f64) -> f64 {
        self.blocks
            .iter()
            .zip(self.radii(k))
            .map(|(b, r)| r.map_or(0.0, |r| ball(b.bits, r) * n / 2f64.powi(b.bits as i32)))
            .sum()
    }
}

/// Number of `bits`-bit values within Hamming distance `r` of a given one.
pub fn ball(bits: u32, r: u32) -> f64 {
    let mut total = 0.0;
    let mut c = 1.0;
    for j in 0..=r.min(bits) {
        if j > 0 {
            c = c * f64::from(bits - j + 1) / f64::from(j);
        }
        total += c;
    }
    total
}

/// Estimated cost (in units of one candidate check) of a query at distance `k` over `n` items
/// with `m` blocks: a probe costs a few cache misses (about 64 sequential filter checks), a
/// candidate one filter check of two bytes.
pub fn estimate_cost(m: u32, k: u32, n: f64) -> f64 {
    match Layout::new(m) {
        Ok(l) => PROBE_COST * l.probes(k) + l.candidates(k, n),
        Err(_) => f64::INFINITY,
    }
}

/// Calls `f` with every `bits`-bit value within distance `radius` of `v`, `v` itself first.
pub fn for_each_within(v: u32, bits: u32, radius: u32, mut f: impl FnMut(u32)) {
    f(v);
    for d in 1..=radius.min(bits) {
        // Gosper's hack: every `bits`-bit mask with exactly `d` bits set, in increasing order.
        let limit = 1u64 << bits;
        let mut mask: u64 = (1u64 << d) - 1;
        while mask < limit {
            f(v ^ mask as u32);
            let c = mask & mask.wrapping_neg();
            let r = mask + c;
            mask = (((r ^ mask) >> 2) / c) | r;
        }
    }
}

pub fn check_k(k: u32) -> Result<()> {
    if k > MAX_K {
        return Err(Error::InvalidArgument(format!(
            "k must be between 0 and {MAX_K}, got {k}"
        )));
    }
    Ok(())
}
