//! Item ids (int or str), stored column-wise per segment, and the id -> location map.
//!
//! The map is an open-addressing table of 8-byte locations only: the id itself stays in its
//! segment's column, so an int id costs 8 bytes there plus about 10 bytes of map.

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
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Ids of the rows of one segment: an i64 per row; a str id keeps (offset << 20 | length) into
/// an arena there, flagged in a bitset.
#[derive(Default)]
pub struct IdColumn {
    vals: Vec<i64>,
    is_str: Vec<u64>,
    arena: Vec<u8>,
}

impl IdColumn {
    pub fn push(&mut self, id: IdRef<'_>) {
        let row = self.vals.len();
        if row / 64 >= self.is_str.len() {
            self.is_str.push(0);
        }
        match id {
            IdRef::Int(i) => self.vals.push(i),
            IdRef::Str(s) => {
                let packed = ((self.arena.len() as u64) << 20) | s.len() as u64;
                self.arena.extend_from_slice(s.as_bytes());
                self.vals.push(packed as i64);
                self.is_str[row / 64] |= 1 << (row % 64);
            }
        }
    }

    #[inline]
    pub fn get(&self, row: u32) -> IdRef<'_> {
        let row = row as usize;
        let v = self.vals[row];
        if self.is_str[row / 64] >> (row % 64) & 1 == 0 {
            IdRef::Int(v)
        } else {
            let (off, len) = ((v as u64 >> 20) as usize, (v as u64 & 0xF_FFFF) as usize);
            // Pushed from a &str, so the bytes are UTF-8; an empty id on a logic error.
            IdRef::Str(std::str::from_utf8(&self.arena[off..off + len]).unwrap_or(""))
        }
    }

    pub fn reserve(&mut self, n: usize) {
        self.vals.reserve_exact(n);
        self.is_str.reserve_exact(n / 64 + 1);
        super::table::advise_huge(&self.vals);
    }

    pub fn has_str(&self) -> bool {
        !self.arena.is_empty() || self.is_str.iter().any(|&w| w != 0)
    }

    pub fn memory_bytes(&self) -> usize {
        self.vals.capacity() * 8 + self.is_str.capacity() * 8 + self.arena.capacity()
    }

    pub fn shrink_to_fit(&mut self) {
        self.vals.shrink_to_fit();
        self.is_str.shrink_to_fit();
        self.arena.shrink_to_fit();
    }
}

const EMPTY: u64 = u64::MAX;
const GONE: u64 = u64::MAX - 1;

/// Open-addressing (linear probing) table of locations keyed by the id stored at them.
#[derive(Default)]
pub struct IdMap {
    slots: Vec<u64>,
    len: usize,
    gone: usize,
}

impl IdMap {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * 8
    }

    /// Position of the location whose id `is(loc)` says matches, for an id hashing to `h`.
    pub fn find(&self, h: u64, mut is: impl FnMut(u64) -> bool) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = (h as usize) & mask;
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return None;
            }
            if s != GONE && is(s) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    pub fn at(&self, pos: usize) -> u64 {
        self.slots[pos]
    }

    pub fn set(&mut self, pos: usize, loc: u64) {
        self.slots[pos] = loc;
    }

    pub fn remove_at(&mut self, pos: usize) {
        self.slots[pos] = GONE;
        self.len -= 1;
        self.gone += 1;
    }

    /// Makes room for `extra` more entries; `hash_of(loc)` gives the hash of a stored location.
    pub fn reserve(&mut self, extra: usize, hash_of: impl Fn(u64) -> u64) {
        let need = self.len + self.gone + extra;
        if !self.slots.is_empty() && need * 8 <= self.slots.len() * 7 {
            return;
        }
        let mut cap = 16usize;
        while (self.len + extra) * 8 > cap * 5 {
            cap *= 2;
        }
        let mut fresh: Vec<u64> = Vec::with_capacity(cap);
        super::table::advise_huge(&fresh);
        fresh.resize(cap, EMPTY);
        let old = std::mem::replace(&mut self.slots, fresh);
        self.gone = 0;
        let mask = cap - 1;
        for s in old {
            if s != EMPTY && s != GONE {
                let mut i = (hash_of(s) as usize) & mask;
                while self.slots[i] != EMPTY {
                    i = (i + 1) & mask;
                }
                self.slots[i] = s;
            }
        }
    }

    /// Inserts a location whose id is not in the map (callers `find` first, then `reserve`).
    pub fn insert_new(&mut self, h: u64, loc: u64) {
        let mask = self.slots.len() - 1;
        let mut i = (h as usize) & mask;
        while self.slots[i] != EMPTY && self.slots[i] != GONE {
            i = (i + 1) & mask;
        }
        if self.slots[i] == GONE {
            self.gone -= 1;
        }
        self.slots[i] = loc;
        self.len += 1;
    }

    pub fn clear(&mut self) {
        self.slots = Vec::new();
        self.len = 0;
        self.gone = 0;
    }
}
