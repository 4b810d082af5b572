//! The decision's candidate stage for band lists held outside the engine (a store that keeps
//! them elsewhere, as Redis does, and reads the lists of a batch in one go): the versions a
//! caller has read ([`Versions`]) and a batch's candidates among them ([`Rule::batch`]), by
//! the engine's own rules -- the lists hold the newest `bucket_limit` records, a version that
//! only full lists hold is a candidate when `full_bucket_quorum` of them do
//! ([`rule::bucket_weight`]), candidates are ranked by [`rule::rank`].

use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, PoisonError};

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use super::rule::{self, Rule};
use crate::{Error, Result};

/// A record of a band list: a version's 8-byte id hash and its 8-byte ref (its position;
/// smaller is older), as the store keeps them.
pub type Record = [u8; 16];

/// Positions of a batch's own texts: after every stored version.
pub const BATCH_POSITION: i64 = 1 << 62;

/// What the caller read of a stored version (never changes: a new version has a new ref).
#[derive(Clone, Debug)]
pub struct Version {
    pub fp: u64,
    pub timestamp: f64,
    pub id: Box<[u8]>,
    pub bytes: Box<[u8]>,
}

/// The versions a caller has read, by record, at most about `capacity` (in two generations:
/// when the young one holds half, it becomes the old one and the old one is dropped).
pub struct Versions {
    width: usize,
    capacity: usize,
    young: HashMap<Record, Arc<Version>>,
    old: HashMap<Record, Arc<Version>>,
}

impl Versions {
    pub fn new(width: usize, capacity: usize) -> Versions {
        Versions {
            width,
            capacity: capacity.max(2),
            young: HashMap::new(),
            old: HashMap::new(),
        }
    }

    pub fn get(&self, record: &Record) -> Option<&Arc<Version>> {
        self.young.get(record).or_else(|| self.old.get(record))
    }

    /// Keeps `version` of `record` (its min-hash bytes must be the rule's width).
    pub fn put(&mut self, record: Record, version: Version) -> Result<()> {
        if version.bytes.len() != self.width {
            return Err(Error::InvalidArgument(format!(
                "a version needs {} min-hash bytes, got {}",
                self.width,
                version.bytes.len()
            )));
        }
        if 2 * self.young.len() >= self.capacity {
            self.old = std::mem::take(&mut self.young);
        }
        self.young.insert(record, Arc::new(version));
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.young.len() + self.old.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A batch of texts against the band lists read for it: its stored candidates (rows `0..m`:
/// the distinct versions met, with their records, ids, fingerprints, positions and min-hash
/// bytes) and its own texts (rows `m..m + n`), each text's stored candidates, and the earlier
/// texts of the batch that share a band list with it.
#[derive(Debug, Default)]
pub struct Batch {
    /// Id hashes of records whose versions the caller has not read (none: the batch is
    /// complete; otherwise read them, [`Versions::put`], and make the batch again).
    pub missing: Vec<[u8; 8]>,
    stored: Vec<(Record, Arc<Version>)>,
    fps: Vec<u64>,
    bytes: Vec<u8>,
    width: usize,
    /// Each band list read: its rows, oldest first (`u32::MAX`: a record left out).
    lists: HashMap<i64, Vec<u32>>,
    /// The texts' band keys (`bands` each) and whether each is in the lists; the texts of
    /// each band list, in order.
    keys: Vec<u32>,
    texts_of: HashMap<i64, Vec<u32>>,
    listed: Vec<bool>,
    bands: usize,
    limit: usize,
    quorum: usize,
    earlier: Vec<Vec<u32>>,
    /// Working memory of [`Batch::candidates`].
    scratch: Mutex<Scratch>,
}

/// A stamp per call of [`Batch::candidates`]; per row (stored rows, then the texts) the stamp
/// of the last call that met it and its weight there; per text the stamp of the last call
/// that had it kept.
#[derive(Debug, Default)]
struct Scratch {
    stamp: u32,
    tally: Vec<(u32, u32)>,
    kept: Vec<u32>,
}

/// A batch's texts: band keys (`bands` per text), min-hash bytes (`width` per text),
/// fingerprints and whether each is in the band lists (a text with nothing to compare is not).
pub struct Texts<'a> {
    pub keys: &'a [u32],
    pub bytes: &'a [u8],
    pub fps: &'a [u64],
    pub listed: &'a [bool],
}

/// A band list as one number: `band << 32 | band key`.
fn code(band: usize, key: u32) -> i64 {
    ((band as i64) << 32) | i64::from(key)
}

/// The versions of `records` held in any of `maps` (the first that holds one); each map is
/// given when it is reached (a caller that keeps them behind locks takes one at a time).
pub fn lookup<G: std::ops::Deref<Target = Versions>>(
    records: &[Record],
    maps: impl IntoIterator<Item = Result<G>>,
) -> Result<Vec<Option<Arc<Version>>>> {
    let mut held: Vec<Option<Arc<Version>>> = vec![None; records.len()];
    for map in maps {
        let map = map?;
        for (h, r) in held.iter_mut().zip(records) {
            if h.is_none() {
                *h = map.get(r).cloned();
            }
        }
    }
    Ok(held)
}

impl Rule {
    /// The batch of `texts` against the records read from their band lists (`records`, the
    /// list of each in `codes`; each list's newest `limit`), with the versions the caller
    /// holds of them (`held`, see [`lookup`]): a record counts when its version is held and
    /// its timestamp is not before `horizon`; one whose id hash is in `absent` (read, and
    /// gone or replaced) is left out; any other makes the batch incomplete
    /// ([`Batch::missing`]). `within`: each text's earlier texts of the batch are candidates
    /// too (a check-and-add). `quorum`: `full_bucket_quorum`, 1 to `bands`.
    #[allow(clippy::too_many_arguments)]
    pub fn batch(
        &self,
        records: &[Record],
        held: &[Option<Arc<Version>>],
        codes: &[i64],
        texts: &Texts<'_>,
        horizon: f64,
        absent: &[[u8; 8]],
        within: bool,
        limit: usize,
        quorum: usize,
    ) -> Result<Batch> {
        let (b, w) = (self.bands(), self.width());
        let n = texts.listed.len();
        if records.len() != codes.len()
            || held.len() != records.len()
            || texts.keys.len() != n * b
            || texts.bytes.len() != n * w
            || texts.fps.len() != n
        {
            return Err(Error::InvalidArgument(format!(
                "batch needs a list and a held version (or none) per record and, per text, {b} \
                 band keys, {w} min-hash bytes and a fingerprint; got {} records, {} lists, {} \
                 held, {n} texts, {} keys, {} bytes, {} fingerprints",
                records.len(),
                codes.len(),
                held.len(),
                texts.keys.len(),
                texts.bytes.len(),
                texts.fps.len(),
            )));
        }
        if !(1..=b).contains(&quorum) || limit == 0 {
            return Err(Error::InvalidArgument(format!(
                "full_bucket_quorum must be 1 to {b} and bucket_limit at least 1, got {quorum} \
                 and {limit}"
            )));
        }
        if let Some(v) = held.iter().flatten().find(|v| v.bytes.len() != w) {
            return Err(Error::InvalidArgument(format!(
                "a held version has {} min-hash bytes, the rule {w}",
                v.bytes.len()
            )));
        }
        let absent: HashSet<[u8; 8]> = absent.iter().copied().collect();
        let mut out = Batch {
            width: w,
            ..Batch::default()
        };
        let mut missing: HashSet<[u8; 8]> = HashSet::new();
        for (record, v) in records.iter().zip(held) {
            let hash: [u8; 8] = record[..8].try_into().expect("16-byte record");
            if v.is_none() && !absent.contains(&hash) && missing.insert(hash) {
                out.missing.push(hash);
            }
        }
        if !out.missing.is_empty() {
            return Ok(out);
        }
        // Each list's rows; one read full (`limit` records, whichever are left out) is text
        // that a template family shares.
        // (a record left out keeps its place: a list's length is what it was read with)
        let mut lists: HashMap<i64, Vec<u32>> = HashMap::new();
        let mut row_of: HashMap<Record, u32> = HashMap::new();
        for ((record, v), &c) in records.iter().zip(held).zip(codes) {
            let list = lists.entry(c).or_default();
            let row = match v {
                Some(v) if v.timestamp >= horizon => match row_of.entry(*record) {
                    Entry::Occupied(e) => *e.get(),
                    Entry::Vacant(e) => {
                        out.stored.push((*record, Arc::clone(v)));
                        *e.insert(out.stored.len() as u32 - 1)
                    }
                },
                _ => u32::MAX,
            };
            list.push(row);
        }
        out.fps = texts.fps.to_vec();
        out.bytes = texts.bytes.to_vec();
        out.keys = texts.keys.to_vec();
        out.listed = texts.listed.to_vec();
        (out.lists, out.bands, out.limit, out.quorum) = (lists, b, limit, quorum);
        // Each text's earlier texts that share a band list with it.
        for i in 0..n {
            let mut earlier = Vec::new();
            if within && texts.listed[i] {
                for (band, &key) in texts.keys[i * b..(i + 1) * b].iter().enumerate() {
                    let texts_c = out.texts_of.entry(code(band, key)).or_default();
                    earlier.extend_from_slice(texts_c);
                    texts_c.push(i as u32);
                }
            }
            earlier.sort_unstable();
            earlier.dedup();
            out.earlier.push(earlier);
        }
        Ok(out)
    }
}

impl Batch {
    /// Stored candidates (rows `0..stored()`).
    pub fn stored(&self) -> usize {
        self.stored.len()
    }

    /// The record of stored row `r`.
    pub fn record(&self, r: usize) -> Option<&Record> {
        self.stored.get(r).map(|(rec, _)| rec)
    }

    /// The encoded id of stored row `r`.
    pub fn id(&self, r: usize) -> Option<&[u8]> {
        self.stored.get(r).map(|(_, v)| &v.id[..])
    }

    /// The stored rows whose id is one of `ids`: `(index in ids, row)` each.
    pub fn stored_of(&self, ids: &[&[u8]]) -> Vec<(usize, u32)> {
        let at: std::collections::HashMap<&[u8], usize> =
            ids.iter().enumerate().map(|(j, &id)| (id, j)).collect();
        (0..self.stored.len())
            .filter_map(|r| at.get(&self.stored[r].1.id[..]).map(|&j| (j, r as u32)))
            .collect()
    }

    /// Fingerprints of the rows (stored, then the batch's texts).
    pub fn fps(&self) -> Vec<u64> {
        let stored = self.stored.iter().map(|(_, v)| v.fp);
        stored.chain(self.fps.iter().copied()).collect()
    }

    /// Positions of the rows: a stored version's ref, then [`BATCH_POSITION`] + i.
    pub fn positions(&self) -> Vec<i64> {
        let n = self.fps.len() as i64;
        let stored = self.stored.iter().map(|(rec, _)| position(rec));
        stored.chain((0..n).map(|i| BATCH_POSITION + i)).collect()
    }

    /// Texts of the batch.
    pub fn texts(&self) -> usize {
        self.fps.len()
    }

    /// Text `i`'s candidates when the texts `kept` of the batch (earlier ones, by index) were
    /// kept before it: as the embedded engine reads its lists, each list of text `i` holds its
    /// stored rows, then the kept texts that share it, and only its newest `bucket_limit`
    /// count; a row only full lists hold is a candidate when `full_bucket_quorum` of them do.
    /// Rows as in [`Batch::ranked`]: stored ones, then `stored() + j` for text `j`; sorted.
    pub fn candidates(&self, i: usize, kept: &[u32]) -> Vec<u32> {
        let (b, m, limit) = (self.bands, self.stored.len(), self.limit);
        if !self.listed[i] {
            return Vec::new();
        }
        let mut guard = self.scratch.lock().unwrap_or_else(PoisonError::into_inner);
        let sc = &mut *guard;
        sc.stamp = sc.stamp.wrapping_add(1);
        if sc.stamp == 0 {
            sc.tally.clear();
            sc.kept.clear();
            sc.stamp = 1;
        }
        let stamp = sc.stamp;
        sc.tally.resize(m + self.texts(), (0, 0));
        sc.kept.resize(self.texts(), 0);
        for &j in kept.iter().filter(|&&j| (j as usize) < i) {
            sc.kept[j as usize] = stamp;
        }
        let mut found = Vec::new();
        let mut rows = Vec::new();
        for (band, &key) in self.keys[i * b..(i + 1) * b].iter().enumerate() {
            let c = code(band, key);
            // the newest: the kept texts of the list (at most `limit`), then its stored rows
            rows.clear();
            let texts_c = self.texts_of.get(&c).map_or(&[][..], |t| &t[..]);
            let newer = texts_c
                .iter()
                .rev()
                .filter(|&&j| (j as usize) < i && sc.kept[j as usize] == stamp);
            rows.extend(newer.take(limit).map(|&j| (m + j as usize) as u32));
            let stored = self.lists.get(&c).map_or(&[][..], |s| &s[..]);
            let add = rule::bucket_weight(stored.len() + rows.len() >= limit, self.quorum);
            let room = limit - rows.len();
            rows.extend(&stored[stored.len().saturating_sub(room)..]);
            for &r in rows.iter().filter(|&&r| r != u32::MAX) {
                let t = &mut sc.tally[r as usize];
                if t.0 != stamp {
                    *t = (stamp, 0);
                    found.push(r);
                }
                t.1 += add;
            }
        }
        found.retain(|&r| sc.tally[r as usize].1 >= self.quorum as u32);
        found.sort_unstable();
        found
    }

    /// The earlier texts of the batch that share a band list with text `i`.
    pub fn earlier(&self, i: usize) -> &[u32] {
        &self.earlier[i]
    }

    /// The rows worth verifying against text `i`, best first ([`rule::rank`]): its
    /// [`Batch::candidates`] when the texts `kept` of the batch (earlier ones, by index, in
    /// order) were kept before it, but the rows `skip` (versions the batch itself replaces).
    pub fn ranked(&self, rule: &Rule, i: usize, kept: &[u32], skip: &[u32]) -> Result<Vec<u32>> {
        let (m, w, n) = (self.stored(), self.width, self.texts());
        if i >= n || kept.iter().any(|&j| j as usize >= i) {
            return Err(Error::InvalidArgument(format!(
                "text {i} of the batch of {n} or a kept text {kept:?} not before it"
            )));
        }
        let text = |j: usize| &self.bytes[j * w..(j + 1) * w];
        let found = self.candidates(i, kept);
        let rows = found.iter().filter(|r| !skip.contains(r)).map(|&r| {
            if (r as usize) < m {
                let (rec, v) = &self.stored[r as usize];
                (r, v.fp, &v.bytes[..], rule::order_key(position(rec)))
            } else {
                let j = r as usize - m;
                (
                    r,
                    self.fps[j],
                    text(j),
                    rule::order_key(BATCH_POSITION + j as i64),
                )
            }
        });
        let ranked = rule.rank_with(text(i), self.fps[i], rows);
        Ok(ranked.top.into_iter().map(|(r, _)| r).collect())
    }
}

/// A record's ref (its position).
fn position(record: &Record) -> i64 {
    i64::from_be_bytes(record[8..].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap as StdMap};

    /// A batch's candidates against a brute-force reading of its lists, over random lists
    /// with stale, expired and unread records, full and short lists.
    #[test]
    fn candidates_match_brute_force() {
        let mut x: u64 = 5;
        let mut next = |n: u64| super::super::tests::lcg(&mut x) % n;
        let rule = Rule::new(0.8, 4, 2, 3, 5).unwrap();
        let (b, w, limit, quorum) = (4, 8, 6, 2);
        let mut checked = 0;
        for _ in 0..300 {
            let mut versions = Versions::new(w, 1 << 20);
            let n = 1 + next(5) as usize;
            let keys: Vec<u32> = (0..n * b).map(|_| next(3) as u32).collect();
            let listed: Vec<bool> = (0..n).map(|_| next(6) != 0).collect();
            let (mut records, mut codes) = (Vec::new(), Vec::new());
            let mut gone = Vec::new();
            for band in 0..b {
                for key in 0..3u32 {
                    for _ in 0..next(limit as u64 + 1) {
                        let mut rec = [0u8; 16];
                        rec[7] = next(12) as u8; // (ids shared between lists)
                        rec[15] = rec[7] + 1;
                        if next(10) == 0 {
                            // a stale record (its version replaced), never held
                            rec[15] = 200;
                            gone.push(<[u8; 8]>::try_from(&rec[..8]).unwrap());
                        } else if versions.get(&rec).is_none() {
                            let v = Version {
                                fp: u64::from(rec[7]),
                                timestamp: if next(10) == 0 { 1.0 } else { 5.0 },
                                id: vec![rec[7]].into(),
                                bytes: vec![rec[7]; w].into(),
                            };
                            versions.put(rec, v).unwrap();
                        }
                        records.push(rec);
                        codes.push(code(band, key));
                    }
                }
            }
            let bytes = vec![0u8; n * w];
            let fps = vec![0u64; n];
            let texts = Texts {
                keys: &keys,
                bytes: &bytes,
                fps: &fps,
                listed: &listed,
            };
            let held = lookup(&records, [Ok(&versions)]).unwrap();
            let run = |absent: &[[u8; 8]]| {
                rule.batch(
                    &records, &held, &codes, &texts, 2.0, absent, true, limit, quorum,
                )
                .unwrap()
            };
            let first = run(&[]);
            let unread: BTreeSet<[u8; 8]> = gone.iter().copied().collect();
            assert_eq!(
                first.missing.iter().copied().collect::<BTreeSet<_>>(),
                unread
            );
            let batch = run(&gone);
            assert!(batch.missing.is_empty());
            let mut lists: StdMap<i64, Vec<Record>> = StdMap::new();
            for (r, &c) in records.iter().zip(&codes) {
                lists.entry(c).or_default().push(*r);
            }
            for i in 0..n {
                let mut weight: StdMap<Record, usize> = StdMap::new();
                let mut earlier = BTreeSet::new();
                if listed[i] {
                    for band in 0..b {
                        let c = code(band, keys[i * b + band]);
                        let list = lists.get(&c).cloned().unwrap_or_default();
                        for r in &list {
                            let live = versions.get(r).is_some_and(|v| v.timestamp >= 2.0);
                            if live {
                                *weight.entry(*r).or_default() +=
                                    if list.len() >= limit { 1 } else { quorum };
                            }
                        }
                        for j in 0..i {
                            if listed[j] && keys[j * b + band] == keys[i * b + band] {
                                earlier.insert(j as u32);
                            }
                        }
                    }
                }
                let want: BTreeSet<Record> = weight
                    .into_iter()
                    .filter(|&(_, wt)| wt >= quorum)
                    .map(|(r, _)| r)
                    .collect();
                let got: BTreeSet<Record> = batch
                    .candidates(i, &[])
                    .iter()
                    .map(|&r| *batch.record(r as usize).unwrap())
                    .collect();
                assert_eq!(got, want);
                checked += want.len();
                assert_eq!(batch.earlier(i), earlier.into_iter().collect::<Vec<_>>());
                let ranked = batch.ranked(&rule, i, batch.earlier(i), &[]).unwrap();
                let m = batch.stored() as u32;
                assert!(ranked.len() <= 5);
                let every = batch.candidates(i, batch.earlier(i));
                assert!(
                    ranked
                        .iter()
                        .all(|&r| every.contains(&r)
                            && (r < m || batch.earlier(i).contains(&(r - m))))
                );
            }
        }
        assert!(
            checked > 300,
            "too few candidates to test anything: {checked}"
        );
    }

    /// A quorum outside 1..=bands, lists or held versions that do not match the records, and
    /// held versions of another width are refused.
    #[test]
    fn bad_arguments_are_refused() {
        let rule = Rule::new(0.8, 4, 2, 3, 5).unwrap();
        let texts = Texts {
            keys: &[0; 4],
            bytes: &[0; 8],
            fps: &[0],
            listed: &[true],
        };
        let rec = [[1u8; 16]];
        let v = |w: usize| {
            Some(Arc::new(Version {
                fp: 0,
                timestamp: 0.0,
                id: Box::new([]),
                bytes: vec![0; w].into(),
            }))
        };
        let run = |held: &[Option<Arc<Version>>], codes: &[i64], quorum| {
            rule.batch(&rec, held, codes, &texts, 0.0, &[], false, 4, quorum)
        };
        assert!(run(&[v(8)], &[0], 2).is_ok());
        for quorum in [0, 5, 1 << 40] {
            assert!(run(&[v(8)], &[0], quorum).is_err(), "{quorum}");
        }
        assert!(run(&[v(7)], &[0], 2).is_err());
        assert!(run(&[v(8), v(8)], &[0], 2).is_err());
        assert!(run(&[v(8)], &[0, 1], 2).is_err());
    }
}
