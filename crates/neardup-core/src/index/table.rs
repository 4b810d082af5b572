//! One sorted table per block (the Manku et al. permuted table): entries sorted by a 32-bit key
//! made of the block followed by the bits after it. Memory per entry: a 2-byte slice of the key
//! (the top bits of the key are implied by the bucket directory) and the row, relative to the
//! first row of the run, in 3 bytes (runs of up to 2^24 rows) or 4.

use crate::parallel;

use super::layout::{ball, for_each_within, Block};

/// Bucket directory width for a table of `n` entries: about 8 entries per bucket, at most 16 bits.
fn dir_bits_for(n: usize) -> u32 {
    (usize::BITS - n.leading_zeros()).saturating_sub(3).min(16)
}

/// Extends a directory being built in key order so that every bucket up to `bucket` has its
/// start: buckets not yet started begin at entry `i`.
#[inline]
fn dir_reach(dir: &mut Vec<u32>, bucket: usize, i: usize) {
    while dir.len() <= bucket {
        dir.push(i as u32);
    }
}

/// Ends a directory of `d` bits over `n` entries: the buckets left empty, and the end mark,
/// start past the last entry.
fn dir_close(dir: &mut Vec<u32>, d: u32, n: usize) {
    dir_reach(dir, 1usize << d, n);
}

/// One bucket search of a probe (see [`Table::plan`]).
#[derive(Clone, Copy, Debug)]
pub struct Search {
    pub bucket: u32,
    pub pre: u32,
    pub sub: u32,
}

/// Starts loading the cache line at `p` (no effect on other targets; never faults).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint: it never faults and does not dereference in the language sense.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks Linux to back the buffer of `v` (from its start to its capacity) with huge pages: a
/// query touches a few random entries of arrays of hundreds of megabytes, and with 4 KiB pages
/// each touch also misses the TLB. Only worth it for big buffers; a hint, errors ignored.
pub fn advise_huge<T>(v: &Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes < 8 << 20 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = v.as_ptr() as usize;
        let aligned = (start + PAGE - 1) & !(PAGE - 1);
        let end = (start + bytes) & !(PAGE - 1);
        if end > aligned {
            // SAFETY: the range lies inside the allocation owned by `v`; MADV_HUGEPAGE only
            // changes how the kernel backs it, never its contents.
            unsafe {
                libc::madvise(
                    aligned as *mut libc::c_void,
                    end - aligned,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
}

/// A bucket with more entries than this is searched by enumerating the nearby key slices
/// (when that is cheaper) instead of scanned: a hot bucket costs a logarithm, not its size.
const HOT_MIN: usize = 256;

/// What a table keeps of each entry besides its row.
enum Keys {
    /// Key bits `dir_bits .. dir_bits + 16` (from the top), sorted within a bucket: a filter.
    Slice(Vec<u16>),
    /// The whole fingerprint rotated so the key is its top 32 bits (sorted): candidates are
    /// checked exactly where they lie.
    Full(Vec<u64>),
    /// The run's own fingerprints, sorted (the first block starts at bit 0, so the key order is
    /// the fingerprint order): entry `i` is the run's row `i`, so there are no rows to keep,
    /// and the top `dir_bits` bits of each are its bucket: only the low `8 * bytes` bits are
    /// kept (6 bytes once the directory has 16 bits).
    Implicit { low: Vec<u8>, bytes: usize },
}

pub struct Table {
    /// Top `dir_bits` bits of the key index `dir`; entries of bucket `j` are `dir[j]..dir[j+1]`.
    dir_bits: u32,
    dir: Vec<u32>,
    keys: Keys,
    /// Row of each entry minus `base`, `width` bytes little-endian, plus 4 bytes of padding so
    /// every entry can be read with one 4-byte load.
    rows: Vec<u8>,
    width: usize,
    base: u32,
    len: usize,
}

/// Longest span of rows whose table entries take 3-byte rows.
pub const ROW3_SPAN: u32 = 1 << 24;

impl Table {
    /// Table of `rows` (rows of `fps`, all in `base..base + span`) for `block`; `full`: keep
    /// whole fingerprints (see [`Keys::Full`]).
    pub fn build(
        block: Block,
        fps: &[u64],
        rows: &[u32],
        base: u32,
        span: u32,
        full: bool,
    ) -> Table {
        let width = if span <= ROW3_SPAN { 3 } else { 4 };
        let n = rows.len();
        let d = dir_bits_for(n);
        let mut dir = Vec::with_capacity((1usize << d) + 1);
        let mut out_rows: Vec<u8> = Vec::with_capacity(n * width + 4);
        advise_huge(&out_rows);
        // Appends entry `i` (key `key`, row `r`) to the directory and the rows.
        let mut put = |i: usize, key: u64, r: u32, dir: &mut Vec<u32>| {
            dir_reach(dir, (key >> (32 - d)) as usize, i);
            out_rows.extend_from_slice(&r.wrapping_sub(base).to_le_bytes()[..width]);
        };
        let keys = if full {
            let mut keyed: Vec<(u64, u32)> = rows
                .iter()
                .map(|&r| (fps[r as usize].rotate_left(block.offset), r))
                .collect();
            parallel::sort_unstable(&mut keyed);
            let mut out: Vec<u64> = Vec::with_capacity(n);
            advise_huge(&out);
            for (i, &(rot, r)) in keyed.iter().enumerate() {
                put(i, rot >> 32, r, &mut dir);
                out.push(rot);
            }
            Keys::Full(out)
        } else {
            let mut keyed: Vec<u64> = rows
                .iter()
                .map(|&r| (u64::from(block.key(fps[r as usize])) << 32) | u64::from(r))
                .collect();
            parallel::sort_unstable(&mut keyed);
            let mut mid = Vec::with_capacity(n);
            advise_huge(&mid);
            for (i, &e) in keyed.iter().enumerate() {
                let key = e >> 32;
                put(i, key, e as u32, &mut dir);
                mid.push(((key << d) >> 16) as u16);
            }
            Keys::Slice(mid)
        };
        out_rows.extend_from_slice(&[0; 4]);
        dir_close(&mut dir, d, n);
        Table {
            dir_bits: d,
            dir,
            keys,
            rows: out_rows,
            width,
            base,
            len: n,
        }
    }

    /// The implicit table of a run (see [`Keys::Implicit`]) over its fingerprints `sorted`
    /// (ascending); entry `i` stands for the run's row `i`.
    pub fn implicit(sorted: &[u64]) -> Table {
        let n = sorted.len();
        let d = dir_bits_for(n);
        let bytes = (64 - d as usize).div_ceil(8);
        let mut dir = Vec::with_capacity((1usize << d) + 1);
        let mut low: Vec<u8> = Vec::with_capacity(n * bytes + 8);
        advise_huge(&low);
        for (i, &fp) in sorted.iter().enumerate() {
            let bucket = if d == 0 { 0 } else { (fp >> (64 - d)) as usize };
            dir_reach(&mut dir, bucket, i);
            low.extend_from_slice(&fp.to_le_bytes()[..bytes]);
        }
        low.extend_from_slice(&[0; 8]);
        dir_close(&mut dir, d, n);
        Table {
            dir_bits: d,
            dir,
            keys: Keys::Implicit { low, bytes },
            rows: Vec::new(),
            width: 0,
            base: 0,
            len: n,
        }
    }

    /// Whether this is a run's implicit table ([`Table::implicit`]).
    pub fn is_implicit(&self) -> bool {
        matches!(self.keys, Keys::Implicit { .. })
    }

    /// The kept low bits of entry `i` of an implicit table (higher bits: any).
    #[inline(always)]
    fn low(&self, i: usize) -> u64 {
        match &self.keys {
            Keys::Implicit { low, bytes } => {
                let p = i * bytes;
                let mut b = [0u8; 8];
                b.copy_from_slice(&low[p..p + 8]);
                u64::from_le_bytes(b)
            }
            _ => 0,
        }
    }

    /// Fingerprint of entry `i` of an implicit table whose bucket is `bucket`.
    #[inline(always)]
    fn fp_in(&self, bucket: usize, i: usize) -> u64 {
        let d = self.dir_bits;
        if d == 0 {
            self.low(i)
        } else {
            ((bucket as u64) << (64 - d)) | (self.low(i) & (u64::MAX >> d))
        }
    }

    /// Fingerprint of entry `i` of an implicit table (its bucket found in the directory).
    #[inline]
    pub fn fp(&self, i: usize) -> u64 {
        // The bucket: the last j with dir[j] <= i.
        let j = partition(1, self.dir.len(), |j| self.dir[j] as usize <= i);
        self.fp_in(j, i)
    }

    /// Whether entry `i` of an implicit table may be within `k` of `q`: its kept bits are
    /// (the bucket's bits are not looked at; [`Table::fp`] gives the whole fingerprint).
    #[inline(always)]
    pub fn low_within(&self, i: usize, q: u64, k: u32) -> bool {
        ((self.low(i) ^ q) & (u64::MAX >> self.dir_bits)).count_ones() <= k
    }

    /// Fingerprints of an implicit table in entry order.
    pub fn fps(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.dir.len() - 1)
            .flat_map(move |j| {
                (self.dir[j] as usize..self.dir[j + 1] as usize).map(move |i| (j, i))
            })
            .map(move |(j, i)| self.fp_in(j, i))
    }

    /// Asks the CPU to start loading entry `i` of an implicit table.
    #[inline(always)]
    pub fn prefetch_low(&self, i: usize) {
        if let Keys::Implicit { low, bytes } = &self.keys {
            prefetch(low.as_ptr().wrapping_add(i * bytes));
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether entries carry whole fingerprints ([`Table::run_search_full`]).
    pub fn is_full(&self) -> bool {
        matches!(self.keys, Keys::Full(_))
    }

    /// Segment row of entry `i`.
    #[inline(always)]
    pub fn row(&self, i: usize) -> u32 {
        if self.width == 0 {
            // An implicit table: entry i is the run's row i.
            return i as u32;
        }
        let p = i * self.width;
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.rows[p..p + 4]);
        let mask = if self.width == 3 {
            0x00FF_FFFF
        } else {
            u32::MAX
        };
        (u32::from_le_bytes(b) & mask).wrapping_add(self.base)
    }

    /// Asks the CPU to start loading the row of entry `i`.
    #[inline(always)]
    pub fn prefetch_row(&self, i: usize) {
        prefetch(self.rows.as_ptr().wrapping_add(i * self.width));
    }

    pub fn memory_bytes(&self) -> usize {
        let keys = match &self.keys {
            Keys::Slice(m) => m.capacity() * 2,
            Keys::Full(f) => f.capacity() * 8,
            Keys::Implicit { low, .. } => low.capacity(),
        };
        self.dir.capacity() * 4 + keys + self.rows.capacity()
    }

    /// Key bits `dir_bits .. dir_bits + 16` of entry `i`.
    #[inline(always)]
    fn mid(&self, i: usize) -> u16 {
        match &self.keys {
            Keys::Slice(m) => m[i],
            Keys::Full(f) => ((f[i] << self.dir_bits) >> 48) as u16,
            Keys::Implicit { .. } => ((self.low(i) << self.dir_bits) >> 48) as u16,
        }
    }

    /// The bucket searches that find every entry whose block value is `v` (a `block.bits`-bit
    /// value): pushed to `out` as `(bucket, prefix bits, prefix)`. Reads nothing, so a query can
    /// collect the searches of every table first and overlap their memory accesses.
    pub fn plan(&self, block: Block, v: u32, out: &mut Vec<Search>) {
        let d = self.dir_bits;
        let b = block.bits;
        if b <= d {
            let first = v << (d - b);
            let last = (v + 1) << (d - b);
            for j in first..last {
                out.push(Search {
                    bucket: j,
                    pre: 0,
                    sub: 0,
                });
            }
        } else {
            let extra = b - d;
            let pre = extra.min(16);
            let sub = (v & ((1u32 << extra) - 1)) >> (extra - pre);
            out.push(Search {
                bucket: v >> extra,
                pre,
                sub,
            });
        }
    }

    /// Asks the CPU to start loading the directory entry of a search.
    #[inline]
    pub fn prefetch_dir(&self, s: &Search) {
        prefetch(self.dir.as_ptr().wrapping_add(s.bucket as usize));
    }

    /// Asks the CPU to start loading the first entries of a search's bucket.
    #[inline]
    pub fn prefetch_bucket(&self, s: &Search) {
        let lo = self.dir[s.bucket as usize] as usize;
        match &self.keys {
            Keys::Slice(m) => prefetch(m.as_ptr().wrapping_add(lo)),
            Keys::Full(f) => prefetch(f.as_ptr().wrapping_add(lo)),
            Keys::Implicit { low, bytes } => prefetch(low.as_ptr().wrapping_add(lo * bytes)),
        }
    }

    /// Calls `f(entry)` for every entry found by search `s` whose known key bits are within `k`
    /// of the query key `qkey` (a key-slice table; the row is [`Table::row`]). May pass entries
    /// whose block only starts with the probed value when the block is wider than the known
    /// bits: callers check.
    #[inline]
    pub fn run_search(&self, s: &Search, qkey: u32, k: u32, f: &mut impl FnMut(usize)) {
        let Keys::Slice(mid) = &self.keys else {
            return;
        };
        let d = self.dir_bits;
        // Known key bits: the bucket's `d` top bits, then the 16 bits of the slice. Those of the
        // bucket use up part of the allowance; the slices are checked against the rest.
        let top_diff = if d == 0 {
            0
        } else {
            (s.bucket ^ (qkey >> (32 - d))).count_ones()
        };
        let Some(allow) = k.checked_sub(top_diff) else {
            return;
        };
        let qmid = ((u64::from(qkey) << d) >> 16) as u16;
        self.ranges(s, qkey, k, |lo, hi| {
            scan_slices(mid, lo, hi, qmid, allow, f)
        });
    }

    /// Calls `f(row, rotated fingerprint)` for every entry found by search `s` within `k` of
    /// the query (`qrot`: the query rotated like the entries) in a whole-fingerprint table.
    /// May pass entries whose block only starts with the probed value: callers check.
    #[inline]
    pub fn run_search_full(&self, s: &Search, qrot: u64, k: u32, f: &mut impl FnMut(u32, u64)) {
        let Keys::Full(keys) = &self.keys else {
            return;
        };
        self.ranges(s, (qrot >> 32) as u32, k, |lo, hi| {
            scan_full(&keys[lo..hi], qrot, k, &mut |i, e| f(self.row(lo + i), e));
        });
    }

    /// Calls `f(entry, fingerprint)` for every entry found by search `s` within `k` of `q` in
    /// an implicit table (the entry is the run's row). May pass entries whose block only
    /// starts with the probed value: callers check.
    #[inline]
    pub fn run_search_implicit(&self, s: &Search, q: u64, k: u32, f: &mut impl FnMut(usize, u64)) {
        if !self.is_implicit() {
            return;
        }
        let j = s.bucket as usize;
        self.ranges(s, (q >> 32) as u32, k, |lo, hi| {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("popcnt") {
                // SAFETY: the CPU has popcnt (checked just above).
                unsafe { self.scan_implicit_popcnt(j, lo, hi, q, k, f) };
                return;
            }
            self.scan_implicit(j, lo, hi, q, k, f);
        });
    }

    #[inline(always)]
    fn scan_implicit(
        &self,
        j: usize,
        lo: usize,
        hi: usize,
        q: u64,
        k: u32,
        f: &mut impl FnMut(usize, u64),
    ) {
        for i in lo..hi {
            let fp = self.fp_in(j, i);
            if (fp ^ q).count_ones() <= k {
                f(i, fp);
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn scan_implicit_popcnt(
        &self,
        j: usize,
        lo: usize,
        hi: usize,
        q: u64,
        k: u32,
        f: &mut impl FnMut(usize, u64),
    ) {
        self.scan_implicit(j, lo, hi, q, k, f);
    }

    /// The entry ranges of search `s` to check: the bucket (narrowed to the searched prefix),
    /// or, in a hot bucket, the runs of key slices within `k` of the query's.
    fn ranges(&self, s: &Search, qkey: u32, k: u32, mut visit: impl FnMut(usize, usize)) {
        let (j, pre, sub) = (s.bucket as usize, s.pre, s.sub);
        let d = self.dir_bits;
        let (mut lo, mut hi) = (self.dir[j] as usize, self.dir[j + 1] as usize);
        if lo == hi {
            return;
        }
        let free = 16 - pre;
        if pre > 0 {
            let first = (sub << free) as u16;
            let last = u32::from(first) + ((1u32 << free) - 1);
            let a = lo + partition(lo, hi, |i| self.mid(i) < first);
            let z = lo + partition(lo, hi, |i| u32::from(self.mid(i)) <= last);
            hi = z;
            lo = a;
        }
        let top = if d == 0 { 0 } else { (j as u32) << (32 - d) };
        let qmid = ((u64::from(qkey) << d) >> 16) as u16;
        let n = hi - lo;
        if n > HOT_MIN {
            // Bits already fixed (bucket and prefix) use up part of the allowance.
            let fixed_top = if d == 0 { 0 } else { (top ^ qkey) >> (32 - d) };
            let fixed_pre = if pre == 0 {
                0
            } else {
                (u32::from(qmid) >> free) ^ sub
            };
            let used = fixed_top.count_ones() + fixed_pre.count_ones();
            if used > k {
                return;
            }
            let left = k - used;
            let enumerated = ball(free, left);
            if enumerated * 12.0 < n as f64 {
                let qfree = u32::from(qmid) & ((1u32 << free) - 1);
                for_each_within(qfree, free, left, |u| {
                    let m = ((sub << free) | u) as u16;
                    let a = lo + partition(lo, hi, |i| self.mid(i) < m);
                    let mut z = a;
                    while z < hi && self.mid(z) == m {
                        z += 1;
                    }
                    if z > a {
                        visit(a, z);
                    }
                });
                return;
            }
        }
        visit(lo, hi);
    }
}

/// Calls `f(i)` for every `i` in `lo..hi` whose slice differs from `qmid` in at most `allow`
/// bits. Eight slices at a time with SSE2 (part of every x86_64 CPU).
#[inline(always)]
fn scan_slices(
    mid: &[u16],
    lo: usize,
    hi: usize,
    qmid: u16,
    allow: u32,
    f: &mut impl FnMut(usize),
) {
    let hi = hi.min(mid.len());
    let mut i = lo;
    if allow >= 16 {
        (lo..hi).for_each(f);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is in the x86_64 baseline; each load reads mid[i..i + 8] with
        // i + 8 <= hi <= mid.len() (unaligned loads).
        unsafe {
            let q = _mm_set1_epi16(qmid as i16);
            let lim = _mm_set1_epi16(allow as i16);
            let m1 = _mm_set1_epi16(0x5555);
            let m2 = _mm_set1_epi16(0x3333);
            let m4 = _mm_set1_epi16(0x0f0f);
            let m5 = _mm_set1_epi16(0x001f);
            while i + 8 <= hi {
                let v = _mm_loadu_si128(mid.as_ptr().add(i) as *const __m128i);
                // Bit count of each 16-bit lane of v ^ q.
                let mut x = _mm_xor_si128(v, q);
                x = _mm_sub_epi16(x, _mm_and_si128(_mm_srli_epi16(x, 1), m1));
                x = _mm_add_epi16(
                    _mm_and_si128(x, m2),
                    _mm_and_si128(_mm_srli_epi16(x, 2), m2),
                );
                x = _mm_and_si128(_mm_add_epi16(x, _mm_srli_epi16(x, 4)), m4);
                x = _mm_and_si128(_mm_add_epi16(x, _mm_srli_epi16(x, 8)), m5);
                // Two mask bits per lane; a set pair: the lane is within the allowance.
                let mut pass = !(_mm_movemask_epi8(_mm_cmpgt_epi16(x, lim)) as u32) & 0xFFFF;
                while pass != 0 {
                    let b = pass.trailing_zeros();
                    f(i + (b / 2) as usize);
                    pass &= !(3u32 << b);
                }
                i += 8;
            }
        }
    }
    for (j, &m) in mid.iter().enumerate().take(hi).skip(i) {
        if (m ^ qmid).count_ones() <= allow {
            f(j);
        }
    }
}

/// Calls `f(i, keys[i])` for every whole fingerprint within `k` of `qrot`, with the CPU's
/// popcount instruction when it has one (not part of the x86_64 baseline).
#[inline(always)]
fn scan_full(keys: &[u64], qrot: u64, k: u32, f: &mut impl FnMut(usize, u64)) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has popcnt (checked just above).
        unsafe { scan_full_popcnt(keys, qrot, k, f) };
        return;
    }
    scan_full_plain(keys, qrot, k, f);
}

#[inline(always)]
fn scan_full_plain(keys: &[u64], qrot: u64, k: u32, f: &mut impl FnMut(usize, u64)) {
    for (i, &e) in keys.iter().enumerate() {
        if (e ^ qrot).count_ones() <= k {
            f(i, e);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn scan_full_popcnt(keys: &[u64], qrot: u64, k: u32, f: &mut impl FnMut(usize, u64)) {
    scan_full_plain(keys, qrot, k, f);
}

/// Number of indices `i` in `lo..hi` for which `pred(i)` holds, where `pred` is true on a
/// prefix of the range (binary search).
#[inline]
fn partition(lo: usize, hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut a, mut b) = (lo, hi);
    while a < b {
        let m = a + (b - a) / 2;
        if pred(m) {
            a = m + 1;
        } else {
            b = m;
        }
    }
    a - lo
}
