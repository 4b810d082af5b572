//! Exact Hamming-distance index. PLACEHOLDER: a brute-force scan with the final public contract,
//! so every layer can build against it; issue #3 replaces it with the block/multi-index design.
//!
//! Contract: `query(fp, k)` returns every stored item whose Hamming distance to `fp` is <= k
//! (inclusive), never one farther, with its distance, nearest first.

use std::collections::HashMap;

use crate::hamming::hamming;
use crate::{Error, Result};

/// An item id: an integer or a string, as the user gave it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Id {
    Int(i64),
    Str(String),
}

pub const MAX_K: u32 = 64;

pub struct Index {
    k: u32,
    fps: Vec<u64>,
    timestamps: Vec<f64>,
    ids: Vec<Option<Id>>,
    rows: HashMap<Id, usize>,
}

impl Index {
    pub fn new(k: u32) -> Result<Index> {
        check_k(k)?;
        Ok(Index { k, fps: Vec::new(), timestamps: Vec::new(), ids: Vec::new(), rows: HashMap::new() })
    }

    pub fn k(&self) -> u32 {
        self.k
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn contains(&self, id: &Id) -> bool {
        self.rows.contains_key(id)
    }

    /// Adds or replaces `id`.
    pub fn add(&mut self, id: Id, fp: u64, timestamp: f64) {
        if let Some(&row) = self.rows.get(&id) {
            self.fps[row] = fp;
            self.timestamps[row] = timestamp;
            return;
        }
        self.rows.insert(id.clone(), self.fps.len());
        self.fps.push(fp);
        self.timestamps.push(timestamp);
        self.ids.push(Some(id));
    }

    pub fn remove(&mut self, id: &Id) -> Result<()> {
        let row = self.rows.remove(id).ok_or_else(|| Error::NotFound(format!("id {id:?} is not in the index")))?;
        self.ids[row] = None;
        Ok(())
    }

    pub fn get(&self, id: &Id) -> Option<(u64, f64)> {
        self.rows.get(id).map(|&r| (self.fps[r], self.timestamps[r]))
    }

    pub fn query(&self, fp: u64, k: Option<u32>) -> Result<Vec<(Id, u32)>> {
        let k = k.unwrap_or(self.k);
        check_k(k)?;
        let mut out: Vec<(Id, u32)> = self
            .fps
            .iter()
            .zip(&self.ids)
            .filter_map(|(&x, id)| {
                let d = hamming(fp, x);
                match id {
                    Some(id) if d <= k => Some((id.clone(), d)),
                    _ => None,
                }
            })
            .collect();
        out.sort_by_key(|(_, d)| *d);
        Ok(out)
    }

    /// Removes every item with timestamp < `before`; returns how many.
    pub fn expire(&mut self, before: f64) -> usize {
        let mut n = 0;
        for row in 0..self.fps.len() {
            if self.timestamps[row] < before {
                if let Some(id) = self.ids[row].take() {
                    self.rows.remove(&id);
                    n += 1;
                }
            }
        }
        n
    }

    /// Every pair of live items within k, each once.
    pub fn near_pairs(&self, k: Option<u32>) -> Result<Vec<(Id, Id, u32)>> {
        let k = k.unwrap_or(self.k);
        check_k(k)?;
        let mut out = Vec::new();
        for i in 0..self.fps.len() {
            let Some(a) = &self.ids[i] else { continue };
            for j in i + 1..self.fps.len() {
                let Some(b) = &self.ids[j] else { continue };
                let d = hamming(self.fps[i], self.fps[j]);
                if d <= k {
                    out.push((a.clone(), b.clone(), d));
                }
            }
        }
        Ok(out)
    }
}

fn check_k(k: u32) -> Result<()> {
    if k > MAX_K {
        return Err(Error::InvalidArgument(format!("k must be between 0 and {MAX_K}, got {k}")));
    }
    Ok(())
}
