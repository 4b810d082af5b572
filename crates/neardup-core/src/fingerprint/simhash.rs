//! Weighted bit voting (Charikar's SimHash) over feature hashes.
//!
//! Integer weights use byte lanes: the 8 bits of each byte of a hash are spread into the 8 bytes
//! of a `u64` through a table, so one feature costs 8 table loads and 8 adds for 64 bits with no
//! branch per bit; the lanes are flushed into wide counters before a byte could overflow.
//! Fractional weights (TF-IDF) use a plain per-bit float loop, which vectorises.

use super::config::BitRule;

const fn spread_table() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut v = 0u64;
        let mut k = 0;
        while k < 8 {
            v |= (((b >> k) & 1) as u64) << (8 * k);
            k += 1;
        }
        t[b] = v;
        b += 1;
    }
    t
}

static SPREAD: [u64; 256] = spread_table();

/// Integer-weight accumulator for 64 bits.
#[derive(Clone)]
pub struct Acc64 {
    lanes: [u64; 8],
    lane_weight: u32,
    set: [u64; 64],
    total: u64,
}

impl Default for Acc64 {
    fn default() -> Self {
        Acc64 {
            lanes: [0; 8],
            lane_weight: 0,
            set: [0; 64],
            total: 0,
        }
    }
}

impl Acc64 {
    /// Adds one feature of hash `h` and weight `w`.
    #[inline(always)]
    pub fn add(&mut self, h: u64, w: u32) {
        if w == 1 {
            if self.lane_weight == 255 {
                self.flush();
            }
            for k in 0..8 {
                self.lanes[k] += SPREAD[((h >> (8 * k)) & 0xff) as usize];
            }
            self.lane_weight += 1;
            self.total += 1;
        } else {
            self.add_weighted(h, w);
        }
    }

    #[inline]
    fn add_weighted(&mut self, h: u64, w: u32) {
        if w > 255 {
            for (j, s) in self.set.iter_mut().enumerate() {
                *s += ((h >> j) & 1) * w as u64;
            }
        } else {
            if self.lane_weight + w > 255 {
                self.flush();
            }
            for k in 0..8 {
                self.lanes[k] += SPREAD[((h >> (8 * k)) & 0xff) as usize] * w as u64;
            }
            self.lane_weight += w;
        }
        self.total += w as u64;
    }

    fn flush(&mut self) {
        for k in 0..8 {
            let lane = self.lanes[k];
            for b in 0..8 {
                self.set[8 * k + b] += (lane >> (8 * b)) & 0xff;
            }
            self.lanes[k] = 0;
        }
        self.lane_weight = 0;
    }

    /// The fingerprint: bit j is 1 when the weight of features with bit j set, minus the
    /// weight of those without, is > 0 (`Positive`) or >= 0 (`NonNegative`).
    pub fn finish(mut self, rule: BitRule) -> u64 {
        self.flush();
        let total = self.total;
        let mut fp = 0u64;
        for (j, &s) in self.set.iter().enumerate() {
            let twice = 2 * s;
            let on = match rule {
                BitRule::Positive => twice > total,
                BitRule::NonNegative => twice >= total,
            };
            fp |= (on as u64) << j;
        }
        fp
    }
}

/// Integer-weight accumulator for 128 bits: two 64-bit halves.
#[derive(Clone, Default)]
pub struct Acc128 {
    lo: Acc64,
    hi: Acc64,
}

impl Acc128 {
    #[inline]
    pub fn add(&mut self, h: u128, w: u32) {
        self.lo.add(h as u64, w);
        self.hi.add((h >> 64) as u64, w);
    }

    pub fn finish(self, rule: BitRule) -> u128 {
        (self.lo.finish(rule) as u128) | ((self.hi.finish(rule) as u128) << 64)
    }
}

/// Float-weight accumulator (any sign), up to 128 bits.
#[derive(Clone)]
pub struct AccF {
    v: [f64; 128],
    bits: usize,
}

impl AccF {
    pub fn new(bits: u32) -> Self {
        AccF {
            v: [0.0; 128],
            bits: bits as usize,
        }
    }

    #[inline]
    pub fn add(&mut self, h: u128, w: f64) {
        let lo = h as u64;
        for j in 0..64 {
            let sign = (((lo >> j) & 1) as f64) * 2.0 - 1.0;
            self.v[j] += sign * w;
        }
        if self.bits > 64 {
            let hi = (h >> 64) as u64;
            for j in 0..64 {
                let sign = (((hi >> j) & 1) as f64) * 2.0 - 1.0;
                self.v[64 + j] += sign * w;
            }
        }
    }

    pub fn finish(self, rule: BitRule) -> u128 {
        let mut fp = 0u128;
        for j in 0..self.bits {
            let on = match rule {
                BitRule::Positive => self.v[j] > 0.0,
                BitRule::NonNegative => self.v[j] >= 0.0,
            };
            fp |= (on as u128) << j;
        }
        fp
    }
}
