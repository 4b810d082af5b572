//! What a one-text call is given, sends, reads and answers.

use crate::Error;
use crate::Result;

/// The names of a namespace's keys and the scripts' SHA1s (`RedisIndex`'s attributes).
#[derive(Clone, Debug)]
pub struct Keys {
    pub seq: String,
    pub count_prefix: String,
    pub id_prefix: String,
    pub horizon: String,
    pub data_prefix: String,
    pub recent: String,
    pub bucket_prefix: String,
    pub write_sha: String,
    pub recent_sha: String,
}

/// A reply as the server sent it (RESP2): what a call reads back.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply<'a> {
    Nil,
    Int(i64),
    Bulk(&'a [u8]),
    Array(Vec<Reply<'a>>),
    /// An error reply: its message.
    Error(&'a [u8]),
}

impl<'a> Reply<'a> {
    pub(super) fn items(&self, what: &str) -> Result<&[Reply<'a>]> {
        match self {
            Reply::Array(items) => Ok(items),
            _ => Err(unexpected(what)),
        }
    }

    pub(super) fn int(&self, what: &str) -> Result<i64> {
        match self {
            Reply::Int(n) => Ok(*n),
            Reply::Bulk(b) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| unexpected(what)),
            _ => Err(unexpected(what)),
        }
    }

    pub(super) fn bytes(&self, what: &str) -> Result<Option<&'a [u8]>> {
        match self {
            Reply::Nil => Ok(None),
            Reply::Bulk(b) => Ok(Some(b)),
            _ => Err(unexpected(what)),
        }
    }

    /// The first error reply in this one (in arrays too).
    pub(super) fn error(&self) -> Option<&'a [u8]> {
        match self {
            Reply::Error(m) => Some(m),
            Reply::Array(items) => items.iter().find_map(Reply::error),
            _ => None,
        }
    }
}

pub(super) fn unexpected(what: &str) -> Error {
    Error::InvalidArgument(format!(
        "unexpected reply from Redis for {what}: not neardup format 2 data"
    ))
}

/// A verified near-duplicate: its id (as stored), distance and Jaccard similarity.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub id: String,
    pub distance: u32,
    pub similarity: f64,
}

/// The write a call sent: its ticket (0 until its reply is read), ref, period, and the
/// version of the id it replaced (known once answered).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    pub ticket: i64,
    pub reference: u64,
    pub period: i64,
    pub old: Option<u64>,
}

/// A call's answer: added or not, the verified near-duplicates (best first), how many
/// candidates were verified, and the write (`None`: answered by a read alone, nothing written).
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub added: bool,
    pub matches: Vec<Found>,
    pub candidates: usize,
    pub written: Option<Written>,
}

/// Bytes to send and how many replies they bring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub bytes: Vec<u8>,
    pub replies: usize,
}

/// What a call does next.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Send this and hand the replies to [`Engine::take`].
    Send(Request),
    /// The answer.
    Done(Decision),
    /// Nothing written: let Python's path run the call (a ref in use, a script the server lost;
    /// before it wrote, an error reply Python's path will meet again).
    Fallback,
    /// An error reply (its message): Python retracts [`Call::written`] (if any) and raises it.
    Failed(String),
    /// Candidates stored without a sketch (`(ref, fingerprint)`): Python computes their
    /// sketches from their texts and hands them to [`Engine::sketches`].
    Sketches(Vec<(u64, u64)>),
}

/// One text to check and add.
#[derive(Clone, Debug)]
pub struct Text {
    pub fp: u64,
    /// Sorted distinct shingle hashes of the prepared text.
    pub sketch: Vec<u32>,
    /// The radius of the check.
    pub k: u32,
    /// The live periods, `first..end` (each one's buckets are probed).
    pub periods: (i64, i64),
    /// The period the text is stored in, and its expiry (unix seconds, 0: none).
    pub period: i64,
    pub expire_at: i64,
    /// The id as stored, the timestamp as stored (Python's repr), the text (UTF-8).
    pub id: String,
    pub timestamp: String,
    pub text: Vec<u8>,
    /// The ref of the version it would write (random, drawn by the caller).
    pub reference: u64,
}
