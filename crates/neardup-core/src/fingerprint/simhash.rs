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

    /// Adds features of weight 1 given by their hashes (the streaming path): the lanes stay in
    /// registers for the whole slice, with AVX-512 (one masked byte add per feature) or AVX2
    /// (bits spread into bytes by a shuffle and compare) when the CPU has them.
    pub fn add_ones(&mut self, hashes: &[u64]) {
        let mut rest = hashes;
        while !rest.is_empty() {
            if self.lane_weight == 255 {
                self.flush();
            }
            let room = (255 - self.lane_weight) as usize;
            let (now, later) = rest.split_at(room.min(rest.len()));
            add_ones_to_lanes(&mut self.lanes, now);
            self.lane_weight += now.len() as u32;
            self.total += now.len() as u64;
            rest = later;
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
        self.finish_in_place(rule)
    }

    /// [`Acc64::finish`] without moving the accumulator.
    fn finish_in_place(&mut self, rule: BitRule) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.total <= 255 {
            // Nothing was flushed yet: the counts are the lane bytes.
            return x86::finish_bytes(&self.lanes, self.total as u32, rule);
        }
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

/// Adds 1 to byte `j` of the lanes (read as 64 bytes, little-endian) for each bit `j` set in
/// each hash. The caller keeps every byte below 256.
fn add_ones_to_lanes(lanes: &mut [u64; 8], hashes: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            // SAFETY: the CPU has AVX-512BW (checked above).
            unsafe { x86::add_ones_avx512(lanes, hashes) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked above).
            unsafe { x86::add_ones_avx2(lanes, hashes) };
            return;
        }
    }
    add_ones_plain(lanes, hashes);
}

/// [`add_ones_to_lanes`] with the spread table, on any CPU.
pub(super) fn add_ones_plain(lanes: &mut [u64; 8], hashes: &[u64]) {
    let mut l = *lanes;
    for &h in hashes {
        for (k, lane) in l.iter_mut().enumerate() {
            *lane += SPREAD[((h >> (8 * k)) & 0xff) as usize];
        }
    }
    *lanes = l;
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use std::arch::x86_64::*;

    use super::BitRule;

    /// The fingerprint from byte counters (`total` <= 255 features of weight 1): bit `j` is 1
    /// when count `j` exceeds a threshold, found 16 bytes at a time with a saturating subtract.
    pub fn finish_bytes(lanes: &[u64; 8], total: u32, rule: BitRule) -> u64 {
        // Positive: 2c > t, i.e. c > t / 2. NonNegative: 2c >= t, i.e. c > ceil(t / 2) - 1.
        let threshold = match rule {
            BitRule::Positive => total / 2,
            BitRule::NonNegative if total == 0 => return u64::MAX,
            BitRule::NonNegative => total.div_ceil(2) - 1,
        };
        let mut bytes = [0u8; 64];
        for (k, lane) in lanes.iter().enumerate() {
            bytes[8 * k..8 * k + 8].copy_from_slice(&lane.to_le_bytes());
        }
        let mut fp = 0u64;
        for (k, chunk) in bytes.chunks_exact(16).enumerate() {
            // SAFETY: SSE2 is part of x86_64; `chunk` is 16 readable bytes (unaligned load).
            let at_most = unsafe {
                let c = _mm_loadu_si128(chunk.as_ptr() as *const __m128i);
                let over = _mm_subs_epu8(c, _mm_set1_epi8(threshold as u8 as i8));
                _mm_movemask_epi8(_mm_cmpeq_epi8(over, _mm_setzero_si128()))
            };
            fp |= (!(at_most as u16) as u64) << (16 * k);
        }
        fp
    }

    /// One masked byte add per hash: byte `j` of the 64 counters gets 1 where bit `j` is set.
    ///
    /// # Safety
    /// The CPU must have AVX-512BW.
    #[target_feature(enable = "avx512bw")]
    pub unsafe fn add_ones_avx512(lanes: &mut [u64; 8], hashes: &[u64]) {
        let p = lanes.as_mut_ptr() as *mut __m512i;
        // SAFETY: `lanes` is 64 bytes; unaligned load and store.
        let mut c = unsafe { _mm512_loadu_si512(p as *const __m512i) };
        let one = _mm512_set1_epi8(1);
        for &h in hashes {
            c = _mm512_mask_add_epi8(c, h, c, one);
        }
        // SAFETY: as above.
        unsafe { _mm512_storeu_si512(p, c) };
    }

    /// Each half of a hash is broadcast, its bytes shuffled so that counter byte `j` sees the
    /// byte holding bit `j`, and compared with that bit: -1 where set, subtracted from the
    /// counters.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn add_ones_avx2(lanes: &mut [u64; 8], hashes: &[u64]) {
        let p = lanes.as_mut_ptr() as *mut __m256i;
        // SAFETY: `lanes` is 64 bytes: two unaligned 32-byte loads.
        let (mut lo, mut hi) = unsafe { (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1))) };
        // vpshufb works within 128-bit lanes; the broadcast puts bytes 0-3 in each of them.
        let spread = _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
            3, 3, 3,
        );
        let bits = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        for &h in hashes {
            let a = _mm256_shuffle_epi8(_mm256_set1_epi32(h as u32 as i32), spread);
            let b = _mm256_shuffle_epi8(_mm256_set1_epi32((h >> 32) as u32 as i32), spread);
            lo = _mm256_sub_epi8(lo, _mm256_cmpeq_epi8(_mm256_and_si256(a, bits), bits));
            hi = _mm256_sub_epi8(hi, _mm256_cmpeq_epi8(_mm256_and_si256(b, bits), bits));
        }
        // SAFETY: as above.
        unsafe {
            _mm256_storeu_si256(p, lo);
            _mm256_storeu_si256(p.add(1), hi);
        }
    }
}

/// Feature hashes of weight 1 gathered in a small buffer and voted in batches.
pub struct Ones64 {
    acc: Acc64,
    buf: [u64; ONES_BATCH],
    n: usize,
}

const ONES_BATCH: usize = 128;

impl Default for Ones64 {
    fn default() -> Self {
        Ones64 {
            acc: Acc64::default(),
            buf: [0; ONES_BATCH],
            n: 0,
        }
    }
}

impl Ones64 {
    #[inline(always)]
    pub fn push(&mut self, h: u64) {
        self.buf[self.n % ONES_BATCH] = h;
        self.n += 1;
        if self.n == ONES_BATCH {
            self.acc.add_ones(&self.buf);
            self.n = 0;
        }
    }

    pub fn finish(&mut self, rule: BitRule) -> u64 {
        let n = self.n.min(ONES_BATCH);
        self.acc.add_ones(&self.buf[..n]);
        self.n = 0;
        self.acc.finish_in_place(rule)
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
