//! Compact columns of a run (see `segment.rs`): bit-packed integers of one width, and the
//! timestamps of a run in time order, coded exactly in a few bits each.

use super::table::advise_huge;

/// Mask of the low `w` bits (`w` <= 64).
#[inline(always)]
fn mask(w: u32) -> u64 {
    if w >= 64 {
        u64::MAX
    } else {
        (1u64 << w) - 1
    }
}

/// Bits needed to write `x` (0 for 0).
#[inline]
pub fn bits_for(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// Reads `w` bits at bit position `at` of `words` (one padding word at the end).
#[inline(always)]
fn read_bits(words: &[u64], at: u64, w: u32) -> u64 {
    if w == 0 {
        return 0;
    }
    let (i, sh) = ((at / 64) as usize, (at % 64) as u32);
    let mut v = words[i] >> sh;
    if sh + w > 64 {
        v |= words[i + 1] << (64 - sh);
    }
    v & mask(w)
}

/// Writes the low `w` bits of `v` at bit position `at` (the bits there are zero).
#[inline(always)]
fn write_bits(words: &mut [u64], at: u64, w: u32, v: u64) {
    if w == 0 {
        return;
    }
    let v = v & mask(w);
    let (i, sh) = ((at / 64) as usize, (at % 64) as u32);
    words[i] |= v << sh;
    if sh + w > 64 {
        words[i + 1] |= v >> (64 - sh);
    }
}

fn zeroed_words(bits: u64) -> Vec<u64> {
    let n = (bits / 64) as usize + 2;
    let mut v: Vec<u64> = Vec::with_capacity(n);
    advise_huge(&v);
    v.resize(n, 0);
    v
}

/// Unsigned integers, each in `width` bits.
#[derive(Default)]
pub struct Packed {
    words: Vec<u64>,
    width: u32,
    len: usize,
}

impl Packed {
    /// `vals` in the fewest bits that hold the largest.
    pub fn new(vals: &[u32]) -> Packed {
        let width = bits_for(u64::from(vals.iter().copied().max().unwrap_or(0)));
        let mut words = zeroed_words(vals.len() as u64 * u64::from(width));
        for (i, &v) in vals.iter().enumerate() {
            write_bits(&mut words, i as u64 * u64::from(width), width, u64::from(v));
        }
        Packed {
            words,
            width,
            len: vals.len(),
        }
    }

    #[inline]
    pub fn get(&self, i: usize) -> u32 {
        read_bits(&self.words, i as u64 * u64::from(self.width), self.width) as u32
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn memory_bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

/// How a run's timestamps become integers, exactly: a count of whole seconds, milliseconds or
/// microseconds (the value is that count divided by the unit, as Python computes
/// `ms / 1000`), or else the float's own bits (in an order-keeping form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Units(u32),
    Bits,
}

/// Units tried, coarsest first.
const UNITS: [u32; 3] = [1, 1000, 1_000_000];

impl Codec {
    #[inline]
    fn encode(self, ts: f64) -> i64 {
        match self {
            Codec::Units(u) => (ts * f64::from(u)).round() as i64,
            Codec::Bits => {
                let b = ts.to_bits() as i64;
                if b < 0 {
                    b ^ i64::MAX
                } else {
                    b
                }
            }
        }
    }

    #[inline]
    fn decode(self, c: i64) -> f64 {
        match self {
            Codec::Units(1) => c as f64,
            Codec::Units(u) => c as f64 / f64::from(u),
            Codec::Bits => f64::from_bits((if c < 0 { c ^ i64::MAX } else { c }) as u64),
        }
    }

    /// The coarsest codec that gives back every value of `ts` bit for bit.
    fn choose(ts: &[f64]) -> Codec {
        for u in UNITS {
            let c = Codec::Units(u);
            let fits = ts.iter().all(|&t| {
                (t * f64::from(u)).abs() < 9e15 && c.decode(c.encode(t)).to_bits() == t.to_bits()
            });
            if fits {
                return c;
            }
        }
        Codec::Bits
    }
}

/// Values per block of [`RunTs::Coded`].
const BLOCK: usize = 128;

/// A run's timestamps sorted (in time order): one value when all are the same, else each an
/// integer ([`Codec`]) stored as its difference from the first of its block of 128, in the
/// block's fewest bits. Sorted neighbours are close, so this takes a byte or two per item for
/// millisecond timestamps spread over a day (8 for the float itself), and reads in O(1).
pub enum RunTs {
    Same(f64),
    Coded {
        codec: Codec,
        /// Per block: first code, bit position of its differences, their width.
        bases: Vec<i64>,
        starts: Vec<u64>,
        widths: Vec<u8>,
        words: Vec<u64>,
    },
}

impl RunTs {
    /// Codes `sorted` (in the total order of floats).
    pub fn new(sorted: &[f64]) -> RunTs {
        let Some(&first) = sorted.first() else {
            return RunTs::Same(0.0);
        };
        if sorted.iter().all(|t| t.to_bits() == first.to_bits()) {
            return RunTs::Same(first);
        }
        let codec = Codec::choose(sorted);
        let codes: Vec<i64> = sorted.iter().map(|&t| codec.encode(t)).collect();
        let nb = codes.len().div_ceil(BLOCK);
        let (mut bases, mut starts, mut widths) = (
            Vec::with_capacity(nb),
            Vec::with_capacity(nb),
            Vec::with_capacity(nb),
        );
        let mut bits = 0u64;
        for block in codes.chunks(BLOCK) {
            let base = block[0];
            let span = block[block.len() - 1].wrapping_sub(base) as u64;
            let w = bits_for(span);
            bases.push(base);
            starts.push(bits);
            widths.push(w as u8);
            bits += block.len() as u64 * u64::from(w);
        }
        let mut words = zeroed_words(bits);
        for (b, block) in codes.chunks(BLOCK).enumerate() {
            let w = u32::from(widths[b]);
            for (j, &c) in block.iter().enumerate() {
                let at = starts[b] + j as u64 * u64::from(w);
                write_bits(&mut words, at, w, c.wrapping_sub(bases[b]) as u64);
            }
        }
        RunTs::Coded {
            codec,
            bases,
            starts,
            widths,
            words,
        }
    }

    /// The `i`-th timestamp in time order.
    #[inline]
    pub fn get(&self, i: usize) -> f64 {
        match self {
            RunTs::Same(v) => *v,
            RunTs::Coded {
                codec,
                bases,
                starts,
                widths,
                words,
            } => {
                let (b, j) = (i / BLOCK, i % BLOCK);
                let w = u32::from(widths[b]);
                let d = read_bits(words, starts[b] + j as u64 * u64::from(w), w);
                codec.decode(bases[b].wrapping_add(d as i64))
            }
        }
    }

    pub fn codec(&self) -> Option<Codec> {
        match self {
            RunTs::Same(_) => None,
            RunTs::Coded { codec, .. } => Some(*codec),
        }
    }

    pub fn memory_bytes(&self) -> usize {
        match self {
            RunTs::Same(_) => 0,
            RunTs::Coded {
                bases,
                starts,
                widths,
                words,
                ..
            } => {
                bases.capacity() * 8
                    + starts.capacity() * 8
                    + widths.capacity()
                    + words.capacity() * 8
            }
        }
    }
}
