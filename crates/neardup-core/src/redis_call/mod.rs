//! One text's check-and-add on one Redis server with the Jaccard verifier, decided in the core
//! (the hot path of `RedisDeduplicator.check_and_add`; docs/scale-out.md, "the one-text call").
//!
//! Python prepares the text (fingerprint, sketch, radius, period), sends the bytes this module
//! packs and hands back the replies hiredis parsed; everything between (the guess that the
//! text is a copy of one of the newest versions, the requests, the bucket scan, the data of
//! the candidates, the verification and the decision) happens here. The protocol is the one
//! of `neardup.backends.redis_single` (the write script, then an `MGET` of the probe
//! buckets): the same requests, byte for byte, as the Python path.
//!
//! [`Engine`] is one process's state: a cache of the data of versions it wrote or read and the
//! newest records of every process (the server's recent ring, read along with each call). A
//! cached version is correct for ever without invalidation: a version's data never change, and
//! a lookup only follows a record just read from a bucket (a removed version's records are
//! gone with its data). [`Call`] is one call's own state between its round trips, so threads
//! sharing an engine never see each other's calls.
//!
//! Anything unusual is left to Python's path ([`Step::Fallback`]: before this call wrote,
//! Python runs the call its own way) or to its error handling ([`Step::Failed`]: an error
//! reply; Python retracts what [`Call::written`] says was sent and raises it).

use crate::hamming::within;
use crate::records::{self, near_records_in};
use crate::verify::jaccard_sorted;
use crate::{Error, Result};
use std::collections::VecDeque;

mod cache;
mod prepare;
mod requests;
pub mod resp;
mod types;

pub use prepare::{Preparation, Prepared};
use types::unexpected;
pub use types::{Decision, Found, Keys, Reply, Request, Step, Text, Written};

/// The most periods a call probes (a retention of more is refused by `RedisIndex` long before).
const MAX_PERIODS: i64 = 4096;

/// Records of the newest versions of any process kept for the guess (twice the server's ring).
pub const SEEN_SIZE: usize = 4096;

/// The data fields read with a candidate: id, period, ticket, sketch.
const FIELDS: [&[u8]; 4] = [b"i", b"p", b"q", b"h"];

/// The data of a stored version (its sketch `None`: stored before sketches were).
#[derive(Clone, Debug)]
struct Version {
    id: Box<str>,
    ticket: Option<i64>,
    sketch: Option<Box<[u32]>>,
}

/// What a check-and-add found near: a version, its distance and data.
#[derive(Clone, Debug)]
struct Candidate {
    reference: u64,
    fp: u64,
    distance: u32,
    version: Version,
}

#[derive(Debug)]
enum Stage {
    /// The read of a likely copy: buckets, the data of `prefetch` (`(ref, fp)`), the ring.
    Check {
        prefetch: Vec<(u64, u64)>,
    },
    /// The write and its buckets.
    Write,
    /// The data of the candidates `near` (`(ref, fp, distance)`): those of `misses` requested
    /// (in that order), the others' as the cache had them when the request was made.
    Resolve {
        near: Vec<(u64, u64, u32)>,
        known: Vec<(u64, Version)>,
        misses: Vec<u64>,
        then: Then,
    },
    /// Waiting for Python's sketches of the candidates stored without one.
    Sketch {
        found: Vec<Candidate>,
        then: Then,
    },
    Over,
}

/// Which step a list of candidates is for.
#[derive(Clone, Copy, Debug)]
enum Then {
    Check,
    Write,
}

/// One call's own state between its round trips.
#[derive(Debug)]
pub struct Call {
    text: Text,
    stage: Stage,
    written: Option<Written>,
    /// Replies expected to the last request, and the bytes of them received so far.
    expect: usize,
    received: Vec<u8>,
}

impl Call {
    /// The write this call sent, if any (what to retract when it fails before answering).
    pub fn written(&self) -> Option<Written> {
        self.written
    }

    /// Forget what was received of the replies to the last request (it is sent again on a new
    /// connection).
    pub fn rewind(&mut self) {
        self.received.clear();
    }
}

fn failed(message: &[u8]) -> Step {
    Step::Failed(String::from_utf8_lossy(message).into_owned())
}

/// One process's state for one namespace: its cache of versions and the newest records.
#[derive(Debug)]
pub struct Engine {
    keys: Keys,
    blocks: u32,
    threshold: f64,
    size: usize,
    cache: foldhash::HashMap<u64, Version>,
    order: VecDeque<u64>,
    seen_fps: Vec<u64>,
    seen_refs: Vec<u64>,
    seen_at: usize,
    seen_ticket: i64,
}

impl Engine {
    /// An engine for `blocks` blocks and the Jaccard `threshold`, keeping up to `cache_size`
    /// versions' data (>= 1).
    pub fn new(keys: Keys, blocks: u32, threshold: f64, cache_size: usize) -> Result<Engine> {
        records::block_cut(blocks)?;
        if cache_size == 0 {
            return Err(Error::InvalidArgument(
                "the one-text engine needs a cache (cache_size >= 1)".into(),
            ));
        }
        let seen = SEEN_SIZE.min(cache_size);
        Ok(Engine {
            keys,
            blocks,
            threshold,
            size: cache_size,
            cache: foldhash::HashMap::default(),
            order: VecDeque::new(),
            seen_fps: vec![0; seen],
            seen_refs: vec![0; seen],
            seen_at: 0,
            seen_ticket: 0,
        })
    }

    /// Start the check-and-add of `text`: the first request.
    pub fn begin(&mut self, text: Text) -> Result<(Call, Request)> {
        match text.periods.1.checked_sub(text.periods.0) {
            Some(n) if (1..=MAX_PERIODS).contains(&n) => {}
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "the live periods {}..{} are not 1 to {MAX_PERIODS} periods",
                    text.periods.0, text.periods.1
                )))
            }
        }
        // The guess: a version among the newest of any process is near and, if its data are
        // kept, passes the threshold; those not kept are read with the check.
        let mut likely = false;
        let mut prefetch: Vec<(u64, u64)> = Vec::new();
        for at in within(&self.seen_fps, text.fp, text.k) {
            let (r, f) = (self.seen_refs[at as usize], self.seen_fps[at as usize]);
            if r == 0 || prefetch.iter().any(|&(p, _)| p == r) {
                continue;
            }
            match self.cache.get(&r) {
                None => prefetch.push((r, f)),
                Some(v) => {
                    if let Some(s) = &v.sketch {
                        likely |= jaccard_sorted(&text.sketch, s) >= self.threshold;
                    }
                }
            }
        }
        let mut call = Call {
            text,
            stage: Stage::Over,
            written: None,
            expect: 0,
            received: Vec::new(),
        };
        let request = if likely || !prefetch.is_empty() {
            if likely {
                prefetch.clear();
            }
            let request = self.check_request(&call.text, &prefetch)?;
            call.stage = Stage::Check { prefetch };
            request
        } else {
            self.write_request(&mut call)?
        };
        call.expect = request.replies;
        Ok((call, request))
    }

    /// Bytes received on the connection after the call's last request: the next step once
    /// every reply to it is here (`None`: not yet).
    pub fn feed(&mut self, call: &mut Call, chunk: &[u8]) -> Result<Option<Step>> {
        let step = if call.received.is_empty() {
            // (the usual case: every reply in one read, parsed where it lies)
            match resp::replies(chunk, call.expect)? {
                Some(replies) => self.take(call, &replies)?,
                None => {
                    call.received.extend_from_slice(chunk);
                    return Ok(None);
                }
            }
        } else {
            call.received.extend_from_slice(chunk);
            let received = std::mem::take(&mut call.received);
            let step = match resp::replies(&received, call.expect) {
                Ok(None) => {
                    call.received = received;
                    return Ok(None);
                }
                Ok(Some(replies)) => self.take(call, &replies),
                Err(e) => Err(e),
            };
            call.received = received;
            call.received.clear();
            step?
        };
        if let Step::Send(r) = &step {
            call.expect = r.replies;
        }
        Ok(Some(step))
    }

    /// The next step of `call` from the replies to its last request.
    pub fn take(&mut self, call: &mut Call, replies: &[Reply<'_>]) -> Result<Step> {
        match std::mem::replace(&mut call.stage, Stage::Over) {
            Stage::Check { prefetch } => self.take_check(call, replies, prefetch),
            Stage::Write => self.take_write(call, replies),
            Stage::Resolve {
                near,
                mut known,
                misses,
                then,
            } => {
                if let Some(m) = replies.iter().find_map(Reply::error) {
                    return Ok(failed(m));
                }
                if replies.len() != misses.len() {
                    return Err(unexpected("the candidates' data"));
                }
                for (&r, row) in misses.iter().zip(replies) {
                    if let Some(v) = self.keep(r, row)? {
                        known.push((r, v));
                    }
                }
                self.verify(call, paired(near, known), then)
            }
            Stage::Sketch { .. } | Stage::Over => Err(Error::InvalidArgument(
                "this call is not waiting for replies".into(),
            )),
        }
    }

    /// Python's sketches (little-endian u32, `None`: the text is gone) of the candidates of
    /// [`Step::Sketches`], in its order: the next step.
    pub fn sketches(&mut self, call: &mut Call, sketches: &[Option<Vec<u32>>]) -> Result<Step> {
        let Stage::Sketch { mut found, then } = std::mem::replace(&mut call.stage, Stage::Over)
        else {
            return Err(Error::InvalidArgument(
                "this call is not waiting for sketches".into(),
            ));
        };
        let mut given = sketches.iter();
        let mut gone = Vec::new();
        for c in found.iter_mut().filter(|c| c.version.sketch.is_none()) {
            match given.next() {
                Some(Some(s)) => {
                    c.version.sketch = Some(s.clone().into_boxed_slice());
                    if let Some(v) = self.cache.get_mut(&c.reference) {
                        v.sketch = c.version.sketch.clone();
                    }
                }
                Some(None) => gone.push(c.reference),
                None => return Err(Error::InvalidArgument("a sketch is missing".into())),
            }
        }
        let candidates = found.len();
        found.retain(|c| !gone.contains(&c.reference));
        self.finish(call, found, candidates, then)
    }

    fn take_check(
        &mut self,
        call: &mut Call,
        replies: &[Reply<'_>],
        prefetch: Vec<(u64, u64)>,
    ) -> Result<Step> {
        if replies.len() != prefetch.len() + 2 {
            return Err(unexpected("a check"));
        }
        if replies.iter().any(|r| r.error().is_some()) {
            // (a server that lost its scripts, or worse: Python's path deals with it)
            return Ok(Step::Fallback);
        }
        let ring = replies[replies.len() - 1].items("the recent ring")?;
        if ring.len() != 2 {
            return Err(unexpected("the recent ring"));
        }
        let slots = ring[1].bytes("the recent ring")?.unwrap_or_default();
        self.saw(ring[0].int("the recent ring")?, slots);
        for (&(r, _), row) in prefetch.iter().zip(&replies[1..]) {
            self.keep(r, row)?;
        }
        let read = replies[0].items("the buckets")?;
        let (horizon, buckets) = read
            .split_first()
            .ok_or_else(|| unexpected("the buckets"))?;
        let near = self.near(&call.text, horizon, buckets)?;
        self.resolve(call, near, Then::Check)
    }

    fn take_write(&mut self, call: &mut Call, replies: &[Reply<'_>]) -> Result<Step> {
        if replies.len() != 2 {
            return Err(unexpected("a write"));
        }
        let out = match &replies[0] {
            Reply::Error(m) if m.starts_with(b"NOSCRIPT") => {
                // (the script did not run, nothing is written: Python loads it and runs the
                // call its own way)
                call.written = None;
                return Ok(Step::Fallback);
            }
            Reply::Error(m) => return Ok(failed(m)), // (the script may have run in part)
            reply => reply.items("the write")?,
        };
        let ticket = out
            .first()
            .ok_or_else(|| unexpected("the write"))?
            .int("the write")?;
        if ticket < 0 {
            // (its random ref is another version's, p ~ 2**-64: nothing was written)
            call.written = None;
            return Ok(Step::Fallback);
        }
        if out.len() < 3 {
            return Err(unexpected("the write"));
        }
        let own = call.text.reference;
        let old = out[1].bytes("the write")?.map(be_u64).filter(|&o| o != own);
        call.written = Some(Written {
            ticket,
            reference: own,
            period: call.text.period,
            old,
        });
        if let Some(m) = replies[1].error() {
            return Ok(failed(m));
        }
        if let Some(slots) = out.get(3) {
            self.saw(ticket, slots.bytes("the recent ring")?.unwrap_or_default());
        }
        // Its own version's data, kept from now on as Python's path keeps them (before the
        // candidates' data, and forgotten again if the write is retracted), so that both
        // caches evict alike.
        let version = Version {
            id: call.text.id.as_str().into(),
            ticket: Some(ticket),
            sketch: Some(call.text.sketch.clone().into_boxed_slice()),
        };
        self.remember(own, version);
        let buckets = replies[1].items("the buckets")?;
        let mut near = self.near(&call.text, &out[2], buckets)?;
        near.retain(|&(r, _, _)| r != own);
        self.resolve(call, near, Then::Write)
    }

    /// The records within the call's radius in `buckets` (the probe keys' replies, period by
    /// period) of the periods not dropped by `horizon`.
    fn near(
        &self,
        text: &Text,
        horizon: &Reply<'_>,
        buckets: &[Reply<'_>],
    ) -> Result<Vec<(u64, u64, u32)>> {
        let (first, end) = text.periods;
        let periods = (end - first) as usize;
        if periods == 0 || !buckets.len().is_multiple_of(periods) {
            return Err(unexpected("the buckets"));
        }
        if buckets.is_empty() {
            return Ok(Vec::new());
        }
        let each = buckets.len() / periods;
        let hz = match horizon {
            Reply::Nil => i64::MIN,
            h => h.int("the horizon")?,
        };
        let mut parts: Vec<&[u8]> = Vec::with_capacity(buckets.len());
        for (q, group) in (first..end).zip(buckets.chunks(each)) {
            if q < hz {
                continue;
            }
            for b in group {
                if let Some(blob) = b.bytes("a bucket")? {
                    parts.push(blob);
                }
            }
        }
        near_records_in(parts, text.fp, text.k)
    }

    /// The candidates' data from the cache, or a request for those not kept.
    fn resolve(&mut self, call: &mut Call, near: Vec<(u64, u64, u32)>, then: Then) -> Result<Step> {
        // (the data kept as they are now: the cache may change before the replies to a read
        // come, by another thread's call or by this one's eviction)
        let known: Vec<(u64, Version)> = near
            .iter()
            .filter_map(|(r, _, _)| self.cache.get(r).map(|v| (*r, v.clone())))
            .collect();
        if known.len() == near.len() {
            return self.verify(call, paired(near, known), then);
        }
        let misses: Vec<u64> = near
            .iter()
            .map(|&(r, _, _)| r)
            .filter(|r| !known.iter().any(|(k, _)| k == r))
            .collect();
        let mut bytes = Vec::with_capacity(misses.len() * 80);
        self.push_data_reads(&mut bytes, misses.iter().copied());
        let n = misses.len();
        call.stage = Stage::Resolve {
            near,
            known,
            misses,
            then,
        };
        Ok(Step::Send(Request { bytes, replies: n }))
    }

    /// After a write, the candidates written before it (smaller ticket); then, unless some
    /// need Python's sketches, the decision.
    fn verify(&mut self, call: &mut Call, mut found: Vec<Candidate>, then: Then) -> Result<Step> {
        if let (Then::Write, Some(w)) = (then, call.written) {
            // (a version with a larger ticket was written after this one: its writer sees
            // this one; one without a ticket sorts after every ticketed one)
            found.retain(|c| c.version.ticket.is_some_and(|q| q < w.ticket));
        }
        // (nearest first, then by ticket and ref: the order Python's path reads them in)
        sort_candidates(&mut found);
        let lacking: Vec<(u64, u64)> = found
            .iter()
            .filter(|c| c.version.sketch.is_none())
            .map(|c| (c.reference, c.fp))
            .collect();
        if !lacking.is_empty() {
            call.stage = Stage::Sketch { found, then };
            return Ok(Step::Sketches(lacking));
        }
        let candidates = found.len();
        self.finish(call, found, candidates, then)
    }

    /// The decision, or after a check that found no copy after all, the write.
    fn finish(
        &mut self,
        call: &mut Call,
        found: Vec<Candidate>,
        candidates: usize,
        then: Then,
    ) -> Result<Step> {
        Ok(match self.decide(call, found, candidates, then) {
            d if matches!(then, Then::Check) && d.matches.is_empty() => {
                Step::Send(self.write_request(call)?)
            }
            d => Step::Done(d),
        })
    }

    /// The verified matches among `found` (nearest first, then by ticket and ref; best
    /// first once verified) and the answer they give.
    fn decide(
        &mut self,
        call: &mut Call,
        mut found: Vec<Candidate>,
        candidates: usize,
        then: Then,
    ) -> Decision {
        sort_candidates(&mut found);
        let mut matches: Vec<Found> = found
            .iter()
            .filter_map(|c| {
                let s = jaccard_sorted(&call.text.sketch, c.version.sketch.as_deref()?);
                (s >= self.threshold).then(|| Found {
                    id: c.version.id.to_string(),
                    distance: c.distance,
                    similarity: s,
                })
            })
            .collect();
        matches.sort_by(|a, b| {
            b.similarity
                .total_cmp(&a.similarity)
                .then(a.distance.cmp(&b.distance))
        });
        let added = matches.is_empty() && matches!(then, Then::Write);
        Decision {
            added,
            matches,
            candidates,
            written: if matches!(then, Then::Write) {
                call.written
            } else {
                None
            },
        }
    }
}

/// The candidates of `near` (`(ref, fp, distance)`) whose data are in `known`, in `near`'s
/// order (those without: gone).
fn paired(near: Vec<(u64, u64, u32)>, mut known: Vec<(u64, Version)>) -> Vec<Candidate> {
    near.into_iter()
        .filter_map(|(r, f, d)| {
            let at = known.iter().position(|(k, _)| *k == r)?;
            Some(Candidate {
                reference: r,
                fp: f,
                distance: d,
                version: known.swap_remove(at).1,
            })
        })
        .collect()
}

/// Nearest first, then by ticket (none: after every ticketed one), then by ref.
fn sort_candidates(found: &mut [Candidate]) {
    found.sort_by_key(|c| {
        (
            c.distance,
            c.version
                .ticket
                .map_or(i128::from(u64::MAX) + 1, i128::from),
            c.reference,
        )
    });
}

fn be_u64(b: &[u8]) -> u64 {
    b.iter().take(8).fold(0u64, |v, &x| v << 8 | u64::from(x))
}

#[cfg(test)]
mod tests;
