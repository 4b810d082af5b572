//! What an engine keeps between calls: the data of versions it wrote or read, and the newest
//! records of every process (the server's recent ring).

use super::{be_u64, unexpected, Engine, Reply, Version, FIELDS};
use crate::records::{self, RECORD_BYTES};
use crate::Result;

impl Engine {
    /// Versions whose data are kept.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    /// Forget everything (the namespace was cleared).
    pub fn clear(&mut self) {
        self.cache.clear();
        self.order.clear();
        self.seen_refs.fill(0);
        self.seen_ticket = 0;
    }

    /// Drop versions this process retracted or removed (memory only: see the module's note).
    pub fn forget(&mut self, refs: &[u64]) {
        for r in refs {
            self.cache.remove(r);
        }
        self.compact();
    }

    pub(super) fn remember(&mut self, reference: u64, version: Version) {
        if self.cache.insert(reference, version).is_none() {
            self.order.push_back(reference);
        }
        if self.cache.len() > self.size {
            // (the oldest half goes, as the Python cache does)
            let keep = self.cache.len() - self.cache.len() / 2;
            while self.cache.len() > keep {
                match self.order.pop_front() {
                    Some(r) => {
                        self.cache.remove(&r);
                    }
                    None => break,
                }
            }
        }
        self.compact();
    }

    /// Keeps the cache's order list from growing with refs forgotten meanwhile.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.cache.len() + 64 {
            let cache = &self.cache;
            let mut seen = foldhash::HashSet::default();
            self.order
                .retain(|r| cache.contains_key(r) && seen.insert(*r));
        }
    }

    /// The recent ring's slots up to `ticket` were read: keep their records (16 bytes each,
    /// fingerprint then ref; ref 0: an empty slot). A ticket below the last one seen: the
    /// counter started over (the namespace was cleared); reading goes on from there.
    pub(super) fn saw(&mut self, ticket: i64, slots: &[u8]) {
        if ticket > self.seen_ticket && !self.seen_refs.is_empty() {
            for rec in slots.chunks_exact(RECORD_BYTES) {
                let r = be_u64(&rec[8..]);
                if r != 0 {
                    self.seen_fps[self.seen_at] = be_u64(&rec[..8]);
                    self.seen_refs[self.seen_at] = r;
                    self.seen_at = (self.seen_at + 1) % self.seen_refs.len();
                }
            }
        }
        self.seen_ticket = ticket;
    }

    /// The recent ring's slots up to `ticket`, read by another path of this process (Python's
    /// checks), taken as if read here: a read of the counter is the newest one whichever path
    /// made it (slots read twice are only kept twice: a guess, never an answer).
    pub fn heard(&mut self, ticket: i64, slots: &[u8]) {
        self.saw(ticket, slots);
    }

    /// A version's data from its `HMGET` row (`i p q h`), kept; `None` if its data are gone.
    pub(super) fn keep(&mut self, reference: u64, row: &Reply<'_>) -> Result<Option<Version>> {
        let row = row.items("a version's data")?;
        if row.len() != FIELDS.len() {
            return Err(unexpected("a version's data"));
        }
        let Some(id) = row[0].bytes("an id")? else {
            return Ok(None);
        };
        let id = std::str::from_utf8(id).map_err(|_| unexpected("an id"))?;
        let ticket = match row[2] {
            Reply::Nil => None,
            ref q => Some(q.int("a ticket")?),
        };
        let sketch = match row[3].bytes("a sketch")? {
            Some(raw) => Some(records::sketch_from_le(raw)?.into_boxed_slice()),
            None => None,
        };
        let version = Version {
            id: id.into(),
            ticket,
            sketch,
        };
        self.remember(reference, version.clone());
        Ok(Some(version))
    }
}
