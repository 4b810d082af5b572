//! Item ids (int or str), stored column-wise per run of a segment (and per tail), and the
//! id -> location map.
//!
//! The map is an open-addressing table of 4-byte locations only (6 once there are 255 segments
//! or a segment has 2^24 rows, 8 beyond 65535 segments), each with 4 bits of its id's hash: the
//! id itself stays in its run's column, so an int id costs 8 bytes there (4 while a run's int
//! ids stay within +-2^31 of its first) plus about 5.6 bytes of map (80% load after a bulk
//! load).

use xxhash_rust::xxh3::xxh3_64;

use crate::{Error, Result};

/// An item id: an integer or a string, as the user gave it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Id {
    Int(i64),
    Str(String),
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Int(i) => write!(f, "{i}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// Longest accepted str id, in UTF-8 bytes.
pub const MAX_STR_ID: usize = 1 << 16;

/// A borrowed id, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdRef<'a> {
    Int(i64),
    Str(&'a str),
}

impl IdRef<'_> {
    pub fn to_owned(self) -> Id {
        match self {
            IdRef::Int(i) => Id::Int(i),
            IdRef::Str(s) => Id::Str(s.to_owned()),
        }
    }

    pub fn hash(self) -> u64 {
        match self {
            IdRef::Int(i) => mix(i as u64),
            IdRef::Str(s) => xxh3_64(s.as_bytes()) ^ 0x9e37_79b9_7f4a_7c15,
        }
    }
}

impl Id {
    pub fn as_ref(&self) -> IdRef<'_> {
        match self {
            Id::Int(i) => IdRef::Int(*i),
            Id::Str(s) => IdRef::Str(s),
        }
    }
}

/// Str ids must be at most [`MAX_STR_ID`] bytes.
pub fn check_id(id: IdRef<'_>) -> Result<()> {
    if let IdRef::Str(s) = id {
        if s.len() > MAX_STR_ID {
            return Err(Error::InvalidArgument(format!(
                "id must be at most {MAX_STR_ID} bytes of UTF-8, got {} bytes",
                s.len()
            )));
        }
    }
    Ok(())
}

/// splitmix64 finaliser: spreads sequential int ids over the table.
#[inline]
pub(crate) fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A column of i64 values: 4-byte offsets from the first value while every value is within
/// +-2^31 of it (sequential or nearby int ids), then plain 8-byte values. Always exact.
pub enum Vals {
    Near { base: i64, offs: Vec<i32> },
    Full(Vec<i64>),
}

impl Default for Vals {
    fn default() -> Vals {
        Vals::Near {
            base: 0,
            offs: Vec::new(),
        }
    }
}

impl Vals {
    #[inline]
    pub fn get(&self, row: usize) -> i64 {
        match self {
            Vals::Near { base, offs } => base.wrapping_add(i64::from(offs[row])),
            Vals::Full(v) => v[row],
        }
    }

    pub fn push(&mut self, x: i64) {
        if let Vals::Near { base, offs } = self {
            if offs.is_empty() {
                *base = x;
            }
            if let Ok(off) = i32::try_from(x.wrapping_sub(*base)) {
                offs.push(off);
                return;
            }
            let mut v = Vec::with_capacity(offs.capacity().max(offs.len() + 1));
            v.extend(offs.iter().map(|&o| base.wrapping_add(i64::from(o))));
            *self = Vals::Full(v);
        }
        if let Vals::Full(v) = self {
            v.push(x);
        }
    }

    pub fn reserve(&mut self, n: usize) {
        match self {
            Vals::Near { offs, .. } => {
                offs.reserve_exact(n);
                super::table::advise_huge(offs);
            }
            Vals::Full(v) => {
                v.reserve_exact(n);
                super::table::advise_huge(v);
            }
        }
    }

    pub fn is_near(&self) -> bool {
        matches!(self, Vals::Near { .. })
    }

    pub fn memory_bytes(&self) -> usize {
        match self {
            Vals::Near { offs, .. } => offs.capacity() * 4,
            Vals::Full(v) => v.capacity() * 8,
        }
    }

    pub fn shrink_to_fit(&mut self) {
        match self {
            Vals::Near { offs, .. } => offs.shrink_to_fit(),
            Vals::Full(v) => v.shrink_to_fit(),
        }
    }
}

/// Ids of the rows of one run (or tail): an i64 per row (4 bytes while they stay near the
/// first, see [`Vals`]); a str id keeps (offset << 20 | length) into an arena there, flagged
/// in a bitset.
#[derive(Default)]
pub struct IdColumn {
    pub vals: Vals,
    is_str: Vec<u64>,
    /// The str ids, one after another (a `String`: reading one back is a slice, not a UTF-8
    /// check of its bytes, which merges and the id map's rehashes do for every row).
    arena: String,
    len: usize,
}

impl IdColumn {
    pub fn push(&mut self, id: IdRef<'_>) {
        let row = self.len;
        if row / 64 >= self.is_str.len() {
            self.is_str.push(0);
        }
        match id {
            IdRef::Int(i) => self.vals.push(i),
            IdRef::Str(s) => {
                let packed = ((self.arena.len() as u64) << 20) | s.len() as u64;
                self.arena.push_str(s);
                self.vals.push(packed as i64);
                self.is_str[row / 64] |= 1 << (row % 64);
            }
        }
        self.len += 1;
    }

    #[inline]
    pub fn get(&self, row: u32) -> IdRef<'_> {
        let row = row as usize;
        let v = self.vals.get(row);
        if self.is_str[row / 64] >> (row % 64) & 1 == 0 {
            IdRef::Int(v)
        } else {
            let (off, len) = ((v as u64 >> 20) as usize, (v as u64 & 0xF_FFFF) as usize);
            // (pushed whole, so the range is on char boundaries; an empty id on a logic error)
            IdRef::Str(self.arena.get(off..off + len).unwrap_or(""))
        }
    }

    pub fn reserve(&mut self, n: usize) {
        self.vals.reserve(n);
        self.is_str.reserve_exact(n / 64 + 1);
    }

    pub fn has_str(&self) -> bool {
        !self.arena.is_empty() || self.is_str.iter().any(|&w| w != 0)
    }

    pub fn memory_bytes(&self) -> usize {
        self.vals.memory_bytes() + self.is_str.capacity() * 8 + self.arena.capacity()
    }

    pub fn shrink_to_fit(&mut self) {
        self.vals.shrink_to_fit();
        self.is_str.shrink_to_fit();
        self.arena.shrink_to_fit();
    }
}

const EMPTY: u64 = u64::MAX;
const GONE: u64 = u64::MAX - 1;
/// Locations whose segment slot is below this fit a 6-byte map slot.
const NARROW_SLOTS: u64 = 0xFFFF;
/// Locations whose segment slot is below this and row below [`SMALL_ROWS`] fit 4 bytes.
const SMALL_SLOTS: u64 = 0xFF;
const SMALL_ROWS: u64 = 1 << 24;

/// Open-addressing (linear probing) table of locations keyed by the id stored at them. A slot
/// takes 2 u16 words (segment slot < 255 in 8 bits, row < 2^24 in 24) until a location that
/// does not fit arrives, then 3 words (48 bits: segment slot < 0xFFFF, row), then 4; the map
/// widens in place (same positions, no rehash). Each slot also keeps 4 bits of its id's hash
/// ([`tag`], two slots a byte: 0.6 B an item at 80 % load): a lookup reads the id behind a slot
/// (a random access into a run's column) only when those bits match, at 1 in 16 of the other
/// slots it passes (~30 of them for an id not stored, at the 7/8 load the map may reach).
pub struct IdMap {
    words: Vec<u16>,
    /// The [`tag`] of each slot's id, slot `i` in the low (even `i`) or high (odd) half of
    /// byte `i / 2` (any value in an EMPTY or GONE slot).
    tags: Vec<u8>,
    /// u16 words per slot: 2, 3 or 4.
    width: usize,
    n_slots: usize,
    len: usize,
    gone: usize,
}

impl Default for IdMap {
    fn default() -> IdMap {
        IdMap {
            words: Vec::new(),
            tags: Vec::new(),
            width: 2,
            n_slots: 0,
            len: 0,
            gone: 0,
        }
    }
}

/// The 4 bits of an id's hash `h` kept beside its slot: its lowest (the slot itself comes
/// from the high bits, [`IdMap::home`]).
#[inline]
fn tag(h: u64) -> u8 {
    (h & 0xF) as u8
}

/// Words a location needs (EMPTY and GONE fit any width).
#[inline]
fn width_for(v: u64) -> usize {
    if v == EMPTY || v == GONE || (v >> 32 < SMALL_SLOTS && v & 0xFFFF_FFFF < SMALL_ROWS) {
        2
    } else if v >> 32 < NARROW_SLOTS {
        3
    } else {
        4
    }
}

/// A location (or EMPTY / GONE) from its `width`-word form `v`.
#[inline]
fn decode(v: u64, width: usize) -> u64 {
    match width {
        2 => {
            if v >> 24 == SMALL_SLOTS {
                // Only EMPTY and GONE have the all-ones segment field.
                v | 0xFFFF_FFFF_0000_0000
            } else {
                ((v >> 24) << 32) | (v & 0xFF_FFFF)
            }
        }
        3 => {
            if v >> 32 == NARROW_SLOTS {
                v | 0xFFFF << 48
            } else {
                v
            }
        }
        _ => v,
    }
}

/// The `width`-word form of a location that fits it.
#[inline]
fn encode(v: u64, width: usize) -> u64 {
    match width {
        2 => {
            if v == EMPTY || v == GONE {
                v & 0xFFFF_FFFF
            } else {
                ((v >> 32) << 24) | (v & 0xFF_FFFF)
            }
        }
        3 => v & 0xFFFF_FFFF_FFFF,
        _ => v,
    }
}

impl IdMap {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn memory_bytes(&self) -> usize {
        self.words.capacity() * 2 + self.tags.capacity()
    }

    /// True once a location needed the 8-byte slots.
    pub fn is_wide(&self) -> bool {
        self.width == 4
    }

    /// Bytes per slot (4, 6 or 8), without its tag's half byte.
    pub fn slot_bytes(&self) -> usize {
        self.width * 2
    }

    #[inline]
    fn width(&self) -> usize {
        self.width
    }

    /// The raw `width`-word value of slot `i`.
    #[inline]
    fn raw(&self, i: usize) -> u64 {
        let w = self.width;
        self.words[i * w..i * w + w]
            .iter()
            .enumerate()
            .fold(0u64, |v, (j, &x)| v | u64::from(x) << (16 * j))
    }

    /// The location (or EMPTY / GONE) in slot `i`.
    #[inline]
    fn slot(&self, i: usize) -> u64 {
        decode(self.raw(i), self.width)
    }

    #[inline]
    fn put_slot(&mut self, i: usize, v: u64) {
        let need = width_for(v);
        if need > self.width {
            self.widen(need);
        }
        let w = self.width;
        let e = encode(v, w);
        for (j, word) in self.words[i * w..i * w + w].iter_mut().enumerate() {
            *word = (e >> (16 * j)) as u16;
        }
    }

    /// Converts every slot to `to` words (in place, back to front).
    fn widen(&mut self, to: usize) {
        let (n, from) = (self.n_slots, self.width);
        // Exactly the new size (a plain resize would double the capacity).
        self.words
            .reserve_exact((n * to).saturating_sub(self.words.len()));
        self.words.resize(n * to, 0);
        for i in (0..n).rev() {
            self.width = from;
            let v = self.slot(i);
            let e = encode(v, to);
            for j in 0..to {
                self.words[i * to + j] = (e >> (16 * j)) as u16;
            }
        }
        self.width = to;
    }

    /// Position of the location whose id `is(loc)` says matches, for an id hashing to `h`
    /// (`is` is asked only about slots whose tag matches `h`'s).
    pub fn find(&self, h: u64, mut is: impl FnMut(u64) -> bool) -> Option<usize> {
        if self.n_slots == 0 {
            return None;
        }
        let t = tag(h);
        let mut i = self.home(h);
        loop {
            let s = self.slot(i);
            if s == EMPTY {
                return None;
            }
            if s != GONE && self.tag_at(i) == t && is(s) {
                return Some(i);
            }
            i = self.next(i);
        }
    }

    #[inline]
    fn tag_at(&self, i: usize) -> u8 {
        (self.tags[i / 2] >> (4 * (i % 2))) & 0xF
    }

    #[inline]
    fn set_tag(&mut self, i: usize, t: u8) {
        let shift = 4 * (i % 2);
        let b = &mut self.tags[i / 2];
        *b = (*b & !(0xF << shift)) | (t << shift);
    }

    /// First slot to look at for hash `h`: its high bits scaled to the table (multiply-shift).
    #[inline]
    fn home(&self, h: u64) -> usize {
        ((u128::from(h) * self.n_slots as u128) >> 64) as usize
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.n_slots {
            0
        } else {
            i + 1
        }
    }

    pub fn at(&self, pos: usize) -> u64 {
        self.slot(pos)
    }

    /// Moves the entry at `pos` to location `loc` (the same id: its tag stays).
    pub fn set(&mut self, pos: usize, loc: u64) {
        self.put_slot(pos, loc);
    }

    pub fn remove_at(&mut self, pos: usize) {
        self.put_slot(pos, GONE);
        self.len -= 1;
        self.gone += 1;
    }

    /// Makes room for `extra` more entries; `hash_of(loc)` gives the hash of a stored location.
    pub fn reserve(&mut self, extra: usize, hash_of: impl Fn(u64) -> u64) {
        let need = self.len + self.gone + extra;
        if self.n_slots > 0 && need * 8 <= self.n_slots * 7 {
            return;
        }
        // Any size (slots are found by multiply-shift, not a mask): a bulk load is sized to 80%
        // load, since it will not grow soon; growth by smaller batches leaves room for as much
        // again.
        let live = self.len + extra;
        let cap = if extra >= self.len {
            live + live / 4
        } else {
            live * 2
        }
        .max(16);
        let w = self.width();
        let mut fresh: Vec<u16> = Vec::with_capacity(cap * w);
        super::table::advise_huge(&fresh);
        fresh.resize(cap * w, u16::MAX);
        let old_n = self.n_slots;
        let old = std::mem::replace(&mut self.words, fresh);
        self.tags = vec![0; cap.div_ceil(2)];
        self.n_slots = cap;
        self.gone = 0;
        let old_map = IdMap {
            words: old,
            tags: Vec::new(),
            width: self.width,
            n_slots: old_n,
            len: 0,
            gone: 0,
        };
        for j in 0..old_n {
            let s = old_map.slot(j);
            if s != EMPTY && s != GONE {
                let h = hash_of(s);
                let mut i = self.home(h);
                while self.slot(i) != EMPTY {
                    i = self.next(i);
                }
                self.put_slot(i, s);
                self.set_tag(i, tag(h));
            }
        }
    }

    /// Inserts a location whose id is not in the map (callers `find` first, then `reserve`).
    pub fn insert_new(&mut self, h: u64, loc: u64) {
        let mut i = self.home(h);
        let mut s = self.slot(i);
        while s != EMPTY && s != GONE {
            i = self.next(i);
            s = self.slot(i);
        }
        if s == GONE {
            self.gone -= 1;
        }
        self.put_slot(i, loc);
        self.set_tag(i, tag(h));
        self.len += 1;
    }

    pub fn clear(&mut self) {
        self.words = Vec::new();
        self.tags = Vec::new();
        self.width = 2;
        self.n_slots = 0;
        self.len = 0;
        self.gone = 0;
    }
}
