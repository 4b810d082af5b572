//! Files of a durable index, all little-endian, each starting with a magic and a format version:
//!
//! - `index.meta`: the configuration (k, blocks, segment span, fingerprint config) as JSON,
//!   written once, after `wal-0` (a directory with `wal-0` alone, holding its header, is an
//!   index whose creation a crash cut short: it is created again); reopening with another
//!   configuration is refused.
//! - `snapshot-<gen>.bin`: every live item at a checkpoint, one batch, CRC-32 at the end.
//! - `wal-<gen>.log`: operations since snapshot `<gen>`: records `[len u32][crc32 u32][payload]`.
//!   A log is created whole (its header, through a temporary file and a rename); a record that
//!   ends the file and is incomplete (or, where it spans sectors that a crash may have left
//!   unwritten, fails its checksum) is a torn write (the process died inside `write`): it is
//!   dropped with a warning. Any other damage is an error. A write that fails is taken back out
//!   of the log (truncated); where even that fails, the store takes no more writes.
//!
//! A checkpoint writes `wal-<gen+1>` (its header), then `snapshot-<gen+1>`, each through a
//! temporary file and a rename, synced with the directory, then switches to them and deletes
//! generation `<gen>`: a crash at any point leaves the newest snapshot with its log (and maybe
//! the empty log of a checkpoint that did not finish, dropped at open). A checkpoint that fails
//! removes what it wrote, the snapshot first, so that the log still written to is the one an
//! open reads. So an index missing the log of its newest snapshot (or, never checkpointed, its
//! `wal-0`) lost a file: opening it is an error, not an index with less in it.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::ids::{Id, IdRef};
use super::layout::Layout;
use super::{Ids, Index, Options, DEFAULT_SPAN, SEGMENTS_PER_WINDOW};
use crate::{Error, Result};

pub const FORMAT_VERSION: u32 = 1;
const META_MAGIC: &[u8; 8] = b"NDUPMETA";
const SNAP_MAGIC: &[u8; 8] = b"NDUPSNAP";
const WAL_MAGIC: &[u8; 8] = b"NDUPWAL\0";
const WAL_HEADER: u64 = 24;
const META_FILE: &str = "index.meta";
const LOCK_FILE: &str = "LOCK";
/// Items per WAL record: bounds a record well below 4 GiB.
const RECORD_ITEMS: usize = 1 << 20;
/// A WAL larger than this (and than the last snapshot) triggers a checkpoint.
const CHECKPOINT_MIN: u64 = 64 << 20;
/// What a disk writes whole or not at all (its smallest sector): a crash may leave the sectors
/// of a write unwritten, not part of one.
const SECTOR: usize = 512;

/// When an acknowledged write reaches the disk.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SyncPolicy {
    /// fsync before every write call returns (the default): a returned add survives a crash.
    Always,
    /// Group commit: fsync at most once per interval; a write is durable at the next fsync (the
    /// first write after the interval, `flush()` or `close()`).
    Group(Duration),
    /// Never fsync (the OS writes back): survives a killed process, not a power cut.
    Never,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    pub format_version: u32,
    pub k: u32,
    pub blocks: u32,
    pub segment_span: f64,
    pub fingerprint_config: Option<String>,
}

/// An operation as logged.
pub enum WalOp<'a> {
    Add {
        ids: Ids<'a>,
        fps: &'a [u64],
        ts: &'a [f64],
    },
    Remove(IdRef<'a>),
    Expire(f64),
}

pub enum OwnedIds {
    Int(Vec<i64>),
    Any(Vec<Id>),
}

impl OwnedIds {
    pub fn as_ids(&self) -> Ids<'_> {
        match self {
            OwnedIds::Int(v) => Ids::Int(v),
            OwnedIds::Any(v) => Ids::Any(v),
        }
    }
}

pub enum OwnedOp {
    Add {
        ids: OwnedIds,
        fps: Vec<u64>,
        ts: Vec<f64>,
    },
    Remove(Id),
    Expire(f64),
}

pub struct Snapshot {
    pub newest: f64,
    pub ids: OwnedIds,
    pub fps: Vec<u64>,
    pub ts: Vec<f64>,
}

pub struct WalContents {
    pub ops: Vec<OwnedOp>,
    pub warnings: Vec<String>,
}

pub struct Store {
    dir: PathBuf,
    _lock: File,
    gen: u64,
    wal: File,
    wal_bytes: u64,
    snapshot_bytes: u64,
    sync: SyncPolicy,
    last_sync: Instant,
    unsynced: bool,
    /// Why appends are refused: a failure left the directory where a later append would be
    /// lost or unreadable (until a checkpoint succeeds, or the index is reopened).
    poisoned: Option<String>,
    /// Test hook: the next append writes this many bytes of its records, then fails (with
    /// ENOSPC); and with `true`, so does taking them back.
    #[cfg(test)]
    pub(super) fail_write: Option<(usize, bool)>,
    /// Test hook: runs once a checkpoint's snapshot is in place; an error fails the checkpoint
    /// there.
    #[cfg(test)]
    pub(super) after_snapshot: Option<fn(&Path) -> std::io::Result<()>>,
    /// Test hook: the next write checkpoints, whatever the size of the log.
    #[cfg(test)]
    pub(super) checkpoint_now: bool,
}

fn corrupt(path: &Path, what: &str) -> Error {
    Error::Corrupt(format!("{}: {what}", path.display()))
}

/// An operating-system error on `path`, naming it; a directory where a file of the index should
/// be is damage.
fn file_err(path: &Path, e: std::io::Error) -> Error {
    if e.kind() == ErrorKind::IsADirectory {
        return corrupt(path, "a directory where a file of the index should be");
    }
    Error::file(path, e)
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|e| file_err(path, e))
}

fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(|e| file_err(path, e))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| file_err(dir, e))
}

/// Writes `dir/name` through a temporary file (synced, then renamed) and syncs the directory:
/// the file is whole or absent, never part written.
fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let written = File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(file_err(&tmp, e));
    }
    let path = dir.join(name);
    if let Err(e) = fs::rename(&tmp, &path) {
        let _ = fs::remove_file(&tmp);
        return Err(file_err(&path, e));
    }
    sync_dir(dir)
}

fn snap_name(gen: u64) -> String {
    format!("snapshot-{gen:016x}.bin")
}

fn wal_name(gen: u64) -> String {
    format!("wal-{gen:016x}.log")
}

fn parse_gen(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let hex = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// Whether `name` is the temporary file of one of the index's files (left by a crash).
fn is_temporary(name: &str) -> bool {
    name.strip_suffix(".tmp").is_some_and(|n| {
        n == META_FILE
            || parse_gen(n, "snapshot-", ".bin").is_some()
            || parse_gen(n, "wal-", ".log").is_some()
    })
}

/// Whether `wal-<gen>` in `dir` holds its header and nothing else (nothing was logged in it).
fn is_empty_wal(dir: &Path, gen: u64) -> Result<bool> {
    Ok(read_file(&dir.join(wal_name(gen)))? == wal_header(gen))
}

/// Two fingerprint configs are the same when they are equal JSON values (key order aside).
fn same_config(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

// ---- encoding -------------------------------------------------------------------------------

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn f64(&mut self) -> Option<f64> {
        Some(f64::from_bits(self.u64()?))
    }
    fn u64s(&mut self, n: usize) -> Option<Vec<u64>> {
        let b = self.take(n.checked_mul(8)?)?;
        Some(
            b.chunks_exact(8)
                .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        )
    }
    fn id(&mut self) -> Option<Id> {
        match self.u8()? {
            0 => Some(Id::Int(self.u64()? as i64)),
            1 => {
                let n = self.u32()? as usize;
                Some(Id::Str(String::from_utf8(self.take(n)?.to_vec()).ok()?))
            }
            _ => None,
        }
    }
    fn done(&self) -> bool {
        self.pos == self.buf.len()
    }
}

fn put_id(out: &mut Vec<u8>, id: IdRef<'_>) {
    match id {
        IdRef::Int(i) => {
            out.push(0);
            out.extend_from_slice(&i.to_le_bytes());
        }
        IdRef::Str(s) => {
            out.push(1);
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
}

/// A batch of items: `n u32, kind u8 (0: int ids, 1: tagged ids), ids, fps, timestamps`.
fn put_batch<'a>(
    out: &mut Vec<u8>,
    n: usize,
    id: impl Fn(usize) -> IdRef<'a>,
    all_int: bool,
    fp: impl Fn(usize) -> u64,
    ts: impl Fn(usize) -> f64,
) {
    out.extend_from_slice(&(n as u64).to_le_bytes());
    out.push(u8::from(!all_int));
    for i in 0..n {
        match (all_int, id(i)) {
            (true, IdRef::Int(v)) => out.extend_from_slice(&v.to_le_bytes()),
            (_, r) => put_id(out, r),
        }
    }
    for i in 0..n {
        out.extend_from_slice(&fp(i).to_le_bytes());
    }
    for i in 0..n {
        out.extend_from_slice(&ts(i).to_bits().to_le_bytes());
    }
}

fn read_batch(r: &mut Reader<'_>) -> Option<(OwnedIds, Vec<u64>, Vec<f64>)> {
    let n = usize::try_from(r.u64()?).ok()?;
    // Every item takes at least 17 bytes: reject counts the rest of the buffer cannot hold.
    if n > (r.buf.len() - r.pos) / 17 {
        return None;
    }
    let ids = match r.u8()? {
        0 => OwnedIds::Int(r.u64s(n)?.into_iter().map(|v| v as i64).collect()),
        1 => OwnedIds::Any((0..n).map(|_| r.id()).collect::<Option<Vec<Id>>>()?),
        _ => return None,
    };
    let fps = r.u64s(n)?;
    let ts: Vec<f64> = r.u64s(n)?.into_iter().map(f64::from_bits).collect();
    if ts.iter().any(|t| !t.is_finite()) {
        return None;
    }
    Some((ids, fps, ts))
}

/// Record codes: an add (the whole batch, or its last part), a remove, an expiry, and a part
/// of a batch that the next record continues (a batch over [`RECORD_ITEMS`] items is written
/// as several records and replayed only when its last one is read: all of it or none).
const OP_ADD: u8 = 1;
const OP_REMOVE: u8 = 2;
const OP_EXPIRE: u8 = 3;
const OP_ADD_PART: u8 = 4;

fn encode_op(op: &WalOp<'_>, out: &mut Vec<u8>, continued: bool) {
    match op {
        WalOp::Add { ids, fps, ts } => {
            out.push(if continued { OP_ADD_PART } else { OP_ADD });
            let all_int = matches!(ids, Ids::Int(_));
            put_batch(
                out,
                fps.len(),
                |i| ids.get(i),
                all_int,
                |i| fps[i],
                |i| ts[i],
            );
        }
        WalOp::Remove(id) => {
            out.push(OP_REMOVE);
            put_id(out, *id);
        }
        WalOp::Expire(before) => {
            out.push(OP_EXPIRE);
            out.extend_from_slice(&before.to_bits().to_le_bytes());
        }
    }
}

/// A record's operation, and whether the next record continues it (a part of a batch).
fn decode_op(payload: &[u8]) -> Option<(OwnedOp, bool)> {
    let mut r = Reader {
        buf: payload,
        pos: 0,
    };
    let code = r.u8()?;
    let op = match code {
        OP_ADD | OP_ADD_PART => {
            let (ids, fps, ts) = read_batch(&mut r)?;
            OwnedOp::Add { ids, fps, ts }
        }
        OP_REMOVE => OwnedOp::Remove(r.id()?),
        OP_EXPIRE => OwnedOp::Expire(r.f64()?),
        _ => return None,
    };
    r.done().then_some((op, code == OP_ADD_PART))
}

/// Whether a whole, valid record starts anywhere in `buf` after `from`: then bytes that look
/// like a torn write at the end are damage in the middle of the log (a torn write is always
/// the last thing in it).
fn record_after(buf: &[u8], from: usize) -> bool {
    (from..buf.len().saturating_sub(8)).any(|q| {
        let len = u32::from_le_bytes([buf[q], buf[q + 1], buf[q + 2], buf[q + 3]]) as usize;
        len > 0
            && len <= buf.len() - q - 8
            && matches!(buf[q + 8], OP_ADD..=OP_ADD_PART)
            && crc32fast::hash(&buf[q + 8..q + 8 + len]).to_le_bytes() == buf[q + 4..q + 8]
            && decode_op(&buf[q + 8..q + 8 + len]).is_some()
    })
}

pub(super) fn wal_header(gen: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(WAL_HEADER as usize);
    h.extend_from_slice(WAL_MAGIC);
    h.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    h.extend_from_slice(&gen.to_le_bytes());
    let crc = crc32fast::hash(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    h
}

fn check_version(path: &Path, v: u32) -> Result<()> {
    if v > FORMAT_VERSION {
        return Err(Error::Incompatible(format!(
            "{}: format version {v} is newer than this neardup reads (version {FORMAT_VERSION}); upgrade neardup",
            path.display()
        )));
    }
    if v == 0 {
        return Err(corrupt(path, "format version 0 is not valid"));
    }
    Ok(())
}

// ---- files ----------------------------------------------------------------------------------

fn read_meta(path: &Path) -> Result<Meta> {
    let buf = read_file(path)?;
    if buf.len() < 20 || &buf[..8] != META_MAGIC {
        return Err(corrupt(path, "not a neardup index meta file (bad magic)"));
    }
    let (body, crc) = buf.split_at(buf.len() - 4);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(corrupt(path, "checksum mismatch"));
    }
    let mut r = Reader { buf: body, pos: 8 };
    let version = r.u32().ok_or_else(|| corrupt(path, "truncated"))?;
    check_version(path, version)?;
    let n = r.u32().ok_or_else(|| corrupt(path, "truncated"))? as usize;
    let json = r.take(n).ok_or_else(|| corrupt(path, "truncated"))?;
    let meta: Meta = serde_json::from_slice(json)
        .map_err(|e| corrupt(path, &format!("bad config JSON: {e}")))?;
    if Layout::new(meta.blocks).is_err()
        || meta.k > super::MAX_K
        || meta.segment_span.is_nan()
        || meta.segment_span <= 0.0
    {
        return Err(corrupt(path, "configuration out of range"));
    }
    Ok(meta)
}

fn write_meta(dir: &Path, meta: &Meta) -> Result<()> {
    let json =
        serde_json::to_vec(meta).map_err(|e| Error::InvalidArgument(format!("config: {e}")))?;
    let mut b = Vec::new();
    b.extend_from_slice(META_MAGIC);
    b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    b.extend_from_slice(&(json.len() as u32).to_le_bytes());
    b.extend_from_slice(&json);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    write_atomic(dir, META_FILE, &b)
}

fn read_snapshot(path: &Path) -> Result<Snapshot> {
    let buf = read_file(path)?;
    if buf.len() < 36 || &buf[..8] != SNAP_MAGIC {
        return Err(corrupt(path, "not a neardup snapshot (bad magic)"));
    }
    let (body, crc) = buf.split_at(buf.len() - 4);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(corrupt(path, "checksum mismatch"));
    }
    let mut r = Reader { buf: body, pos: 8 };
    let bad = || corrupt(path, "malformed snapshot");
    check_version(path, r.u32().ok_or_else(bad)?)?;
    let _gen = r.u64().ok_or_else(bad)?;
    let newest = r.f64().ok_or_else(bad)?;
    let (ids, fps, ts) = read_batch(&mut r).ok_or_else(bad)?;
    if !r.done() {
        return Err(bad());
    }
    Ok(Snapshot {
        newest,
        ids,
        fps,
        ts,
    })
}

fn read_wal(path: &Path, gen: u64) -> Result<WalContents> {
    let mut warnings = Vec::new();
    let buf = read_file(path)?;
    if (buf.len() as u64) < WAL_HEADER && WAL_MAGIC.starts_with(&buf[..buf.len().min(8)]) {
        // A log is created whole (a temporary file, then a rename): no crash cuts its header.
        return Err(corrupt(
            path,
            &format!(
                "the write-ahead log is cut short ({} bytes, less than its header)",
                buf.len()
            ),
        ));
    }
    if (buf.len() as u64) < WAL_HEADER || &buf[..8] != WAL_MAGIC {
        return Err(corrupt(path, "not a neardup write-ahead log (bad magic)"));
    }
    if crc32fast::hash(&buf[..20]).to_le_bytes() != buf[20..24] {
        return Err(corrupt(path, "WAL header checksum mismatch"));
    }
    let mut r = Reader { buf: &buf, pos: 8 };
    check_version(path, r.u32().unwrap_or(0))?;
    if r.u64() != Some(gen) {
        return Err(corrupt(path, "WAL generation does not match its file name"));
    }
    let mut pos = WAL_HEADER as usize;
    let mut ops = Vec::new();
    // the parts of a batch read so far, and where its first record starts
    let mut parts: Vec<OwnedOp> = Vec::new();
    let mut batch_at = pos;
    while pos < buf.len() {
        let rest = buf.len() - pos;
        let torn = |why: &str, warnings: &mut Vec<String>| {
            warnings.push(format!(
                "{}: dropped a torn write at the end of the write-ahead log ({rest} bytes at offset {pos}: {why}); the operation in it had not been acknowledged",
                path.display()
            ));
        };
        if rest < 8 {
            torn("incomplete record header", &mut warnings);
            break;
        }
        let len = u32::from_le_bytes([buf[pos], buf[pos + 1], buf[pos + 2], buf[pos + 3]]) as usize;
        let crc = [buf[pos + 4], buf[pos + 5], buf[pos + 6], buf[pos + 7]];
        if len > rest - 8 {
            if record_after(&buf, pos + 8) {
                return Err(corrupt(
                    path,
                    &format!("WAL record at offset {pos} claims {len} bytes, more than the log holds, and whole records follow it"),
                ));
            }
            torn("incomplete record", &mut warnings);
            break;
        }
        if len == 0 {
            // No record is empty (each holds its operation's code): a zero header is where a
            // file system extended the log with zeros for a write a crash cut short.
            if record_after(&buf, pos + 8) {
                return Err(corrupt(
                    path,
                    &format!("empty WAL record at offset {pos}, and whole records follow it"),
                ));
            }
            torn(
                "zero bytes where its record header should be",
                &mut warnings,
            );
            break;
        }
        let payload = &buf[pos + 8..pos + 8 + len];
        if crc32fast::hash(payload).to_le_bytes() != crc {
            // A crash leaves the last record at its full length with other bytes only where the
            // file system kept the file's new length but not all of its data: sectors of the
            // record unwritten. A record within one sector was written whole or not at all.
            let end = pos + 8 + len;
            if end == buf.len() && pos / SECTOR != (end - 1) / SECTOR {
                torn("checksum mismatch in the last record", &mut warnings);
                break;
            }
            return Err(corrupt(
                path,
                &format!("WAL record at offset {pos} fails its checksum"),
            ));
        }
        let (op, continued) = decode_op(payload)
            .ok_or_else(|| corrupt(path, &format!("malformed WAL record at offset {pos}")))?;
        if !parts.is_empty() && !matches!(op, OwnedOp::Add { .. }) {
            return Err(corrupt(
                path,
                &format!("WAL record at offset {pos} interrupts a batch's records"),
            ));
        }
        if parts.is_empty() {
            batch_at = pos;
        }
        pos += 8 + len;
        if continued {
            parts.push(op);
        } else {
            ops.append(&mut parts);
            ops.push(op);
        }
    }
    if !parts.is_empty() {
        // a batch whose last record was never written (its call had not returned)
        warnings.push(format!(
            "{}: dropped the records of an unfinished batch at the end of the write-ahead log ({} bytes at offset {batch_at}); it had not been acknowledged",
            path.display(),
            buf.len() - batch_at
        ));
        pos = batch_at;
    }
    if pos < buf.len() {
        OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| {
                f.set_len(pos as u64)?;
                f.sync_all()
            })
            .map_err(|e| file_err(path, e))?;
    }
    Ok(WalContents { ops, warnings })
}

impl Store {
    /// Opens or creates the index directory `dir` and reads what it holds.
    pub fn open(
        dir: &Path,
        k: Option<u32>,
        o: &Options,
        fingerprint_config: Option<&str>,
        sync: SyncPolicy,
    ) -> Result<(Store, Meta, Option<Snapshot>, WalContents)> {
        fs::create_dir_all(dir).map_err(|e| file_err(dir, e))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| file_err(&lock_path, e))?;
        if lock.try_lock().is_err() {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                format!(
                    "{}: the index is open in another process (or Index object)",
                    dir.display()
                ),
            )));
        }
        let meta_path = dir.join(META_FILE);
        let mut snaps = Vec::new();
        let mut wals = Vec::new();
        let mut temporary = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| file_err(dir, e))? {
            let name = entry
                .map_err(|e| file_err(dir, e))?
                .file_name()
                .to_string_lossy()
                .into_owned();
            if let Some(g) = parse_gen(&name, "snapshot-", ".bin") {
                snaps.push(g);
            } else if let Some(g) = parse_gen(&name, "wal-", ".log") {
                wals.push(g);
            } else if is_temporary(&name) {
                temporary.push(name);
            }
        }
        let has_meta = meta_path
            .try_exists()
            .map_err(|e| file_err(&meta_path, e))?;
        let meta = if has_meta {
            let meta = read_meta(&meta_path)?;
            check_compatible(dir, &meta, k, o, fingerprint_config)?;
            meta
        } else {
            // Creating an index writes wal-0 (its header), then index.meta: wal-0 alone is a
            // creation that a crash cut short. Other files (a caller's settings) may share the
            // directory; other index files may not.
            let unfinished =
                snaps.is_empty() && (wals.is_empty() || (wals == [0] && is_empty_wal(dir, 0)?));
            if !unfinished {
                return Err(Error::Corrupt(format!(
                    "{}: holds index files but no {META_FILE}: damaged or not a neardup index",
                    dir.display()
                )));
            }
            let k = k.unwrap_or(o.k);
            let blocks = match o.layout {
                Some(m) => m,
                None => Layout::auto(k, o.capacity.unwrap_or(1 << 20)).num_blocks(),
            };
            let segment_span = o.segment_span.unwrap_or_else(|| match o.retention {
                Some(r) => r / SEGMENTS_PER_WINDOW,
                None => DEFAULT_SPAN,
            });
            let meta = Meta {
                format_version: FORMAT_VERSION,
                k,
                blocks,
                segment_span,
                fingerprint_config: fingerprint_config.map(str::to_owned),
            };
            write_atomic(dir, &wal_name(0), &wal_header(0))?;
            write_meta(dir, &meta)?;
            wals = vec![0];
            meta
        };
        let gen = snaps.iter().copied().max().unwrap_or(0);
        // A checkpoint writes wal-(g+1) (its header), then snapshot g+1, then removes the older
        // files: a crash leaves the newest snapshot with its log, and maybe the empty log of a
        // checkpoint that did not finish (removed below). A log newer than that, or one with
        // records, or no log of the newest snapshot, is not a state a crash leaves: a file was
        // lost (opening would serve less than was acknowledged).
        for &g in wals.iter().filter(|&&g| g > gen) {
            if g != gen + 1 || !wals.contains(&gen) || !is_empty_wal(dir, g)? {
                return Err(Error::Corrupt(format!(
                    "{}: {} has no {}: the snapshot it continues is missing",
                    dir.display(),
                    wal_name(g),
                    snap_name(g)
                )));
            }
        }
        if !wals.contains(&gen) {
            let what = if snaps.contains(&gen) {
                "the writes after the last checkpoint"
            } else {
                "the index was never checkpointed: it held every write"
            };
            return Err(Error::Corrupt(format!(
                "{}: {} is missing ({what})",
                dir.display(),
                wal_name(gen)
            )));
        }
        let (snapshot, snapshot_bytes) = if snaps.contains(&gen) {
            let p = dir.join(snap_name(gen));
            let snapshot = read_snapshot(&p)?;
            let bytes = fs::metadata(&p).map_err(|e| file_err(&p, e))?.len();
            (Some(snapshot), bytes)
        } else {
            (None, 0)
        };
        let wal_path = dir.join(wal_name(gen));
        let contents = read_wal(&wal_path, gen)?;
        // Older generations are superseded by the complete snapshot `gen`.
        let old = snaps
            .iter()
            .filter(|&&g| g < gen)
            .map(|&g| snap_name(g))
            .chain(wals.iter().filter(|&&g| g != gen).map(|&g| wal_name(g)));
        for name in old {
            let p = dir.join(name);
            fs::remove_file(&p).map_err(|e| file_err(&p, e))?;
        }
        for name in temporary {
            let _ = fs::remove_file(dir.join(name));
        }
        let wal = open_append(&wal_path)?;
        let wal_bytes = wal.metadata().map_err(|e| file_err(&wal_path, e))?.len();
        let store = Store {
            dir: dir.to_path_buf(),
            _lock: lock,
            gen,
            wal,
            wal_bytes,
            snapshot_bytes,
            sync,
            last_sync: Instant::now(),
            unsynced: false,
            poisoned: None,
            #[cfg(test)]
            fail_write: None,
            #[cfg(test)]
            after_snapshot: None,
            #[cfg(test)]
            checkpoint_now: false,
        };
        Ok((store, meta, snapshot, contents))
    }

    pub fn wal_bytes(&self) -> u64 {
        self.wal_bytes
    }

    pub fn has_log(&self) -> bool {
        self.wal_bytes > WAL_HEADER
    }

    pub fn wants_checkpoint(&self) -> bool {
        #[cfg(test)]
        if self.checkpoint_now {
            return true;
        }
        self.wal_bytes > CHECKPOINT_MIN.max(self.snapshot_bytes)
    }

    fn wal_path(&self) -> PathBuf {
        self.dir.join(wal_name(self.gen))
    }

    /// Appends `op` (as one record, or one per [`RECORD_ITEMS`] items for a big batch) and
    /// syncs per the policy. Where that fails, the log is cut back to its length before: the
    /// operation is not in it, and the records of later ones follow whole records.
    pub fn append(&mut self, op: &WalOp<'_>) -> Result<()> {
        if let Some(why) = &self.poisoned {
            return Err(Error::Io(std::io::Error::other(format!(
                "{}: {why}; the index takes no more writes until a checkpoint() succeeds or it is reopened",
                self.dir.display()
            ))));
        }
        let mut buf = Vec::new();
        match op {
            WalOp::Add { ids, fps, ts } if fps.len() > RECORD_ITEMS => {
                let mut start = 0;
                while start < fps.len() {
                    let end = (start + RECORD_ITEMS).min(fps.len());
                    let part = match ids {
                        Ids::Int(v) => Ids::Int(&v[start..end]),
                        Ids::Any(v) => Ids::Any(&v[start..end]),
                    };
                    push_record(
                        &mut buf,
                        &WalOp::Add {
                            ids: part,
                            fps: &fps[start..end],
                            ts: &ts[start..end],
                        },
                        end < fps.len(),
                    );
                    start = end;
                }
            }
            _ => push_record(&mut buf, op, false),
        }
        let before = self.wal_bytes;
        if let Err(e) = self.write(&buf) {
            self.wal_bytes = before;
            // (The log is opened to append: the next write goes to its new end.)
            if let Err(t) = self.wal.set_len(before) {
                self.poisoned = Some(format!(
                    "a failed write left part of a record at the end of {} ({t})",
                    self.wal_path().display()
                ));
            }
            return Err(file_err(&self.wal_path(), e));
        }
        Ok(())
    }

    /// Writes `buf` at the end of the log and syncs per the policy.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
        #[cfg(test)]
        if let Some((n, truncate_fails)) = self.fail_write.take() {
            self.wal.write_all(&buf[..n])?;
            if truncate_fails {
                // a handle that cannot truncate
                self.wal = File::open(self.wal_path())?;
            }
            return Err(std::io::Error::from_raw_os_error(28));
        }
        self.wal.write_all(buf)?;
        self.wal_bytes += buf.len() as u64;
        self.unsynced = true;
        match self.sync {
            SyncPolicy::Always => self.sync_wal(),
            SyncPolicy::Group(every) if self.last_sync.elapsed() >= every => self.sync_wal(),
            _ => Ok(()),
        }
    }

    /// For a sync done outside the caller's lock: a second handle on the current WAL when
    /// writes are unsynced (marked synced now; the caller must `sync_data` the handle before it
    /// reports them durable), `None` when there is nothing to sync.
    pub fn sync_handle(&mut self) -> Result<Option<File>> {
        self.last_sync = Instant::now();
        if !self.unsynced {
            return Ok(None);
        }
        let f = self
            .wal
            .try_clone()
            .map_err(|e| file_err(&self.wal_path(), e))?;
        self.unsynced = false;
        Ok(Some(f))
    }

    pub fn sync(&mut self) -> Result<()> {
        self.sync_wal().map_err(|e| file_err(&self.wal_path(), e))
    }

    fn sync_wal(&mut self) -> std::io::Result<()> {
        if self.unsynced {
            self.wal.sync_data()?;
            self.unsynced = false;
        }
        self.last_sync = Instant::now();
        Ok(())
    }

    /// Writes generation `gen + 1` (its WAL, then a snapshot of `index`), switches to it and
    /// deletes generation `gen`. Where that fails, what it wrote is removed: generation `gen`
    /// stays the one written and the one an open reads.
    pub fn checkpoint(&mut self, index: &Index) -> Result<()> {
        let next = self.gen + 1;
        let items: Vec<(u64, u64, f64)> = index.live_items().collect();
        let all_int = index.all_int_ids();
        let mut b = Vec::with_capacity(64 + items.len() * 25);
        b.extend_from_slice(SNAP_MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        b.extend_from_slice(&next.to_le_bytes());
        b.extend_from_slice(&index.newest.to_bits().to_le_bytes());
        put_batch(
            &mut b,
            items.len(),
            |i| index.id_at(items[i].0),
            all_int,
            |i| items[i].1,
            |i| items[i].2,
        );
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        let wal = match self.write_generation(next, &b) {
            Ok(wal) => wal,
            Err(e) => {
                self.abandon(next);
                return Err(e);
            }
        };
        let old = self.gen;
        self.wal = wal;
        self.gen = next;
        self.wal_bytes = WAL_HEADER;
        self.snapshot_bytes = b.len() as u64;
        self.unsynced = false;
        self.poisoned = None;
        let _ = fs::remove_file(self.dir.join(wal_name(old)));
        let _ = fs::remove_file(self.dir.join(snap_name(old)));
        Ok(())
    }

    /// Writes `wal-<next>` (its header) and then `snapshot-<next>` (bytes `snapshot`), each
    /// whole and synced with the directory, so that no open finds the snapshot without its log;
    /// returns the log opened to append.
    fn write_generation(&mut self, next: u64, snapshot: &[u8]) -> Result<File> {
        write_atomic(&self.dir, &wal_name(next), &wal_header(next))?;
        let wal = open_append(&self.dir.join(wal_name(next)))?;
        write_atomic(&self.dir, &snap_name(next), snapshot)?;
        #[cfg(test)]
        if let Some(hook) = self.after_snapshot.take() {
            hook(&self.dir).map_err(|e| file_err(&self.dir, e))?;
        }
        Ok(wal)
    }

    /// After a failed checkpoint to `next`: removes its files, the snapshot first (without it,
    /// the empty `wal-<next>` is dropped at open). Where the snapshot stays, an open reads it
    /// and its empty log, not the log of `gen`: appends to that one are refused (the snapshot
    /// holds everything until then).
    fn abandon(&mut self, next: u64) {
        let snap = self.dir.join(snap_name(next));
        let removed = match fs::remove_file(&snap) {
            Ok(()) => sync_dir(&self.dir),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(file_err(&snap, e)),
        };
        match removed {
            Ok(()) => {
                let _ = fs::remove_file(self.dir.join(wal_name(next)));
            }
            Err(e) => {
                self.poisoned = Some(format!(
                    "a failed checkpoint could not remove {} ({e})",
                    snap.display()
                ));
            }
        }
    }
}

fn push_record(buf: &mut Vec<u8>, op: &WalOp<'_>, continued: bool) {
    let at = buf.len();
    buf.extend_from_slice(&[0u8; 8]);
    encode_op(op, buf, continued);
    let len = (buf.len() - at - 8) as u32;
    let crc = crc32fast::hash(&buf[at + 8..]);
    buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
    buf[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
}

impl Drop for Store {
    fn drop(&mut self) {
        // Group commit: make the last writes durable when the index goes away.
        let _ = self.sync();
    }
}

fn check_compatible(
    dir: &Path,
    meta: &Meta,
    k: Option<u32>,
    o: &Options,
    fpc: Option<&str>,
) -> Result<()> {
    let d = dir.display();
    if let Some(k) = k {
        if k != meta.k {
            return Err(Error::Incompatible(format!(
                "{d}: the index was built with k={}, not k={k}; open it with k=None (or k={}) and pass k to query() to search farther",
                meta.k, meta.k
            )));
        }
    }
    if let Some(m) = o.layout {
        if m != meta.blocks {
            return Err(Error::Incompatible(format!(
                "{d}: the index was built with layout={} blocks, not {m}; open it with layout=None",
                meta.blocks
            )));
        }
    }
    if let Some(s) = o.segment_span {
        if s != meta.segment_span {
            return Err(Error::Incompatible(format!(
                "{d}: the index was built with segment_span={}, not {s}",
                meta.segment_span
            )));
        }
    }
    if let Some(c) = fpc {
        match &meta.fingerprint_config {
            Some(stored) if same_config(stored, c) => {}
            Some(stored) => {
                return Err(Error::Incompatible(format!(
                    "{d}: the index was built with fingerprint config {stored}, not {c}; its fingerprints would not be comparable"
                )))
            }
            None => {
                return Err(Error::Incompatible(format!(
                    "{d}: the index was built without a fingerprint config, not with {c}"
                )))
            }
        }
    }
    Ok(())
}
