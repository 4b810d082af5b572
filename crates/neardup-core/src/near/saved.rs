//! An engine's rows saved to one file and read back, so that a store reopened or a reference
//! set reused is not prepared and sketched again from its texts.
//!
//! Only the rows are saved (fingerprint, length, band keys, min-hash bytes, signature, sketch):
//! the decision's tables are rebuilt by keeping the loaded rows, which is fast. The caller adds
//! bytes of its own (`extra`: the ids of the rows, what the rows were made from).
//!
//! Layout, little-endian: a header of eight u64 (magic, format version, bands, rows, shingle,
//! verify, row count, xxh3 of the seven before), then sections, each its byte length (u64),
//! its bytes and their xxh3 (u64): fingerprints, lengths, band keys, min-hash bytes,
//! signatures, sketch sizes (u32 each), sketch hashes, extra. The file is written beside its
//! place and renamed over it once synced: a reader sees the old file or the new one.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use super::Engine;
use crate::{Error, Result};

const MAGIC: u64 = u64::from_le_bytes(*b"NDENGINE");
/// Bumped when the layout or what a row holds changes: an older file is then refused.
pub const FORMAT_VERSION: u64 = 2;
const IO_CHUNK: usize = 8 << 20;

fn corrupt(path: &Path, what: &str) -> Error {
    Error::Corrupt(format!(
        "saved engine {}: {what} (damaged or truncated; delete it to rebuild from the texts)",
        path.display()
    ))
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Io(std::io::Error::new(
        e.kind(),
        format!("saved engine {}: {e}", path.display()),
    ))
}

/// Writes sections, each with its length before and its checksum after.
struct Sections<W: Write> {
    out: W,
    hash: Xxh3,
}

impl<W: Write> Sections<W> {
    fn begin(&mut self, bytes: u64) -> std::io::Result<()> {
        self.hash = Xxh3::new();
        self.out.write_all(&bytes.to_le_bytes())
    }

    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.hash.update(bytes);
        self.out.write_all(bytes)
    }

    fn end(&mut self) -> std::io::Result<()> {
        self.out.write_all(&self.hash.digest().to_le_bytes())
    }

    fn whole(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.begin(bytes.len() as u64)?;
        self.put(bytes)?;
        self.end()
    }
}

fn le_bytes<T: Copy, const N: usize>(
    items: impl Iterator<Item = T>,
    f: fn(T) -> [u8; N],
) -> Vec<u8> {
    let mut out = Vec::new();
    for x in items {
        out.extend_from_slice(&f(x));
    }
    out
}

impl Engine {
    /// Writes `rows` (in this order; each a stored row) to `path` with `extra`, atomically.
    pub fn save(&self, path: &Path, rows: &[i64], extra: &[u8]) -> Result<()> {
        self.check_rows(rows)?;
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        let result = self.write_to(&tmp, rows, extra);
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, path).map_err(|e| io_error(path, e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // (the rename itself made durable; a directory that cannot be opened is left as is)
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }

    fn write_to(&self, tmp: &Path, rows: &[i64], extra: &[u8]) -> Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(tmp)
            .map_err(|e| io_error(tmp, e))?;
        let (b, m) = (self.cfg.bands, self.cfg.bands * self.cfg.rows);
        let rows: Vec<usize> = rows.iter().map(|&r| r as usize).collect();
        let header = [
            MAGIC,
            FORMAT_VERSION,
            b as u64,
            self.cfg.rows as u64,
            self.cfg.shingle as u64,
            u64::from(self.cfg.verify),
            rows.len() as u64,
        ];
        let mut head = le_bytes(header.iter().copied(), u64::to_le_bytes);
        head.extend_from_slice(&xxh3_64(&head).to_le_bytes());
        let mut w = Sections {
            out: BufWriter::with_capacity(IO_CHUNK, file),
            hash: Xxh3::new(),
        };
        let io = |e| io_error(tmp, e);
        w.out.write_all(&head).map_err(io)?;
        w.whole(&le_bytes(
            rows.iter().map(|&r| self.fps[r]),
            u64::to_le_bytes,
        ))
        .map_err(io)?;
        w.whole(&le_bytes(
            rows.iter().map(|&r| self.lengths[r]),
            u32::to_le_bytes,
        ))
        .map_err(io)?;
        let keys = rows
            .iter()
            .flat_map(|&r| self.keys[r * b..(r + 1) * b].iter().copied());
        w.whole(&le_bytes(keys, u32::to_le_bytes)).map_err(io)?;
        let mut bytes = Vec::with_capacity(rows.len() * m);
        for &r in &rows {
            bytes.extend_from_slice(&self.minhash_bytes[r * m..(r + 1) * m]);
        }
        w.whole(&bytes).map_err(io)?;
        w.whole(&le_bytes(
            rows.iter().flat_map(|&r| self.signatures[r]),
            u64::to_le_bytes,
        ))
        .map_err(io)?;
        let counts: Vec<u32> = rows
            .iter()
            .map(|&r| self.sketches.count(r) as u32)
            .collect();
        w.whole(&le_bytes(counts.iter().copied(), u32::to_le_bytes))
            .map_err(io)?;
        let total: u64 = counts.iter().map(|&c| u64::from(c) * 4).sum();
        w.begin(total).map_err(io)?;
        let mut buf = Vec::new();
        let mut out = Vec::with_capacity(IO_CHUNK);
        for &r in &rows {
            let sketch = self.sketches.get(r, &mut buf)?;
            for h in sketch {
                out.extend_from_slice(&h.to_le_bytes());
            }
            if out.len() >= IO_CHUNK {
                w.put(&out).map_err(io)?;
                out.clear();
            }
        }
        w.put(&out).map_err(io)?;
        w.end().map_err(io)?;
        w.whole(extra).map_err(io)?;
        let file = w.out.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)
    }

    /// Reads the rows saved in `path` into this engine, which must be empty (the rows are
    /// stored, not kept: keep them to make them candidates), and returns the saved `extra`.
    /// A file of another shape (bands, rows, shingle, verifier) or format version is refused
    /// ([`Error::Incompatible`]); a damaged or truncated one is [`Error::Corrupt`]. On an error
    /// the engine stays empty.
    pub fn load(&mut self, path: &Path) -> Result<Vec<u8>> {
        if !self.is_empty() || self.run.is_some() {
            return Err(Error::InvalidArgument(
                "load is for an empty engine (rows were fed or a decision began)".into(),
            ));
        }
        let mut fresh = Engine::new(self.cfg.clone())?;
        let extra = fresh.read_from(path)?;
        *self = fresh;
        Ok(extra)
    }

    fn read_from(&mut self, path: &Path) -> Result<Vec<u8>> {
        let file = File::open(path).map_err(|e| io_error(path, e))?;
        let size = file.metadata().map_err(|e| io_error(path, e))?.len();
        let base = file.try_clone().map_err(|e| io_error(path, e))?;
        let mut r = Reader {
            input: BufReader::with_capacity(IO_CHUNK, file),
            path,
            left: size,
        };
        let head = r.bytes(64)?;
        let word =
            |i: usize| u64::from_le_bytes(head[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        if word(0) != MAGIC {
            return Err(corrupt(path, "not a saved neardup engine (wrong magic)"));
        }
        if word(7) != xxh3_64(&head[..56]) {
            return Err(corrupt(path, "header checksum mismatch"));
        }
        if word(1) != FORMAT_VERSION {
            return Err(Error::Incompatible(format!(
                "saved engine {}: format version {} (this version reads {FORMAT_VERSION}); \
                 delete it to rebuild from the texts",
                path.display(),
                word(1)
            )));
        }
        let cfg = &self.cfg;
        let want = [cfg.bands, cfg.rows, cfg.shingle, usize::from(cfg.verify)];
        let have = [word(2), word(3), word(4), word(5)];
        if have.iter().zip(want).any(|(&h, w)| h != w as u64) {
            return Err(Error::Incompatible(format!(
                "saved engine {}: made for bands {}, rows {}, shingle {}, verify {}; this engine \
                 has bands {}, rows {}, shingle {}, verify {}",
                path.display(),
                have[0],
                have[1],
                have[2],
                have[3] != 0,
                want[0],
                want[1],
                want[2],
                cfg.verify
            )));
        }
        let n = word(6);
        let (b, m) = (cfg.bands as u64, (cfg.bands * cfg.rows) as u64);
        // (before anything is allocated: a damaged count cannot ask for more than the file has)
        let per_row = 8 + 4 + 4 * b + m + 32 + 4;
        if n.checked_mul(per_row).is_none_or(|need| need > r.left) {
            return Err(corrupt(
                path,
                &format!("{n} rows cannot fit in {size} bytes"),
            ));
        }
        let n = n as usize;
        self.fps = r.section(n as u64 * 8, |c| {
            u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))
        })?;
        self.lengths = r.section(n as u64 * 4, |c| {
            u32::from_le_bytes(c.try_into().unwrap_or([0; 4]))
        })?;
        self.keys = r.section(n as u64 * 4 * b, |c| {
            u32::from_le_bytes(c.try_into().unwrap_or([0; 4]))
        })?;
        self.minhash_bytes = r.section(n as u64 * m, |c: &[u8]| c[0])?;
        self.signatures = r.section(n as u64 * 32, |c| {
            std::array::from_fn(|i| {
                u64::from_le_bytes(c[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
            })
        })?;
        let counts: Vec<u32> = r.section(n as u64 * 4, |c| {
            u32::from_le_bytes(c.try_into().unwrap_or([0; 4]))
        })?;
        let total: u64 = counts.iter().map(|&c| u64::from(c) * 4).sum();
        let got = r.u64()?;
        if got != total || total > r.left {
            return Err(corrupt(path, "sketch section of the wrong length"));
        }
        // Sketches within the memory budget are read into memory; more stay in the file, read
        // in place (pread, like a spilled row); both after the whole section passed its checksum.
        let offset = size - r.left;
        let in_memory = total <= self.cfg.memory_budget as u64;
        let mut hashes: Vec<u32> = Vec::new();
        let mut hash = Xxh3::new();
        let mut buf = vec![0u8; IO_CHUNK];
        let mut unread = total;
        while unread > 0 {
            let n = (IO_CHUNK as u64).min(unread) as usize; // (a multiple of 4)
            r.fill(&mut buf[..n])?;
            hash.update(&buf[..n]);
            if in_memory {
                hashes.extend(
                    buf[..n]
                        .chunks_exact(4)
                        .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]])),
                );
            }
            unread -= n as u64;
        }
        if r.u64()? != hash.digest() {
            return Err(corrupt(path, "sketch checksum mismatch"));
        }
        if in_memory {
            let mut at = 0usize;
            for &c in &counts {
                self.sketches.push(&hashes[at..at + c as usize])?;
                at += c as usize;
            }
        } else {
            self.sketches.set_base(base, offset, &counts)?;
        }
        let extra_len = r.u64()?;
        if extra_len > r.left {
            return Err(corrupt(path, "truncated"));
        }
        let extra = r.bytes(extra_len as usize)?;
        if r.u64()? != xxh3_64(&extra) {
            return Err(corrupt(path, "checksum mismatch in its extra section"));
        }
        if r.left != 0 {
            return Err(corrupt(path, "bytes after its last section"));
        }
        Ok(extra)
    }
}

struct Reader<'a> {
    input: BufReader<File>,
    path: &'a Path,
    left: u64,
}

impl Reader<'_> {
    fn bytes(&mut self, n: usize) -> Result<Vec<u8>> {
        if n as u64 > self.left {
            return Err(corrupt(self.path, "truncated"));
        }
        let mut out = vec![0u8; n];
        self.fill(&mut out)?;
        Ok(out)
    }

    fn fill(&mut self, out: &mut [u8]) -> Result<()> {
        if out.len() as u64 > self.left {
            return Err(corrupt(self.path, "truncated"));
        }
        self.input
            .read_exact(out)
            .map_err(|e| io_error(self.path, e))?;
        self.left -= out.len() as u64;
        Ok(())
    }

    fn u64(&mut self) -> Result<u64> {
        let b = self.bytes(8)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }

    /// A whole section of `len` bytes (checked against its length and checksum) as items of
    /// `size_of::<T>()` bytes.
    fn section<T>(&mut self, len: u64, item: impl Fn(&[u8]) -> T) -> Result<Vec<T>> {
        if self.u64()? != len {
            return Err(corrupt(self.path, "a section of the wrong length"));
        }
        let bytes = self.bytes(len as usize)?;
        if self.u64()? != xxh3_64(&bytes) {
            return Err(corrupt(self.path, "checksum mismatch"));
        }
        let width = std::mem::size_of::<T>();
        Ok(bytes.chunks_exact(width).map(item).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn config(memory_budget: usize) -> Config {
        Config {
            bands: 20,
            rows: 5,
            shingle: 5,
            threshold: 0.8,
            verify: true,
            k_short: 6,
            k_long: 4,
            short_chars: 100,
            bucket_limit: 64,
            full_bucket_quorum: 2,
            verify_limit: 32,
            memory_budget,
            spill_dir: std::env::temp_dir(),
        }
    }

    /// Texts in families of near-copies (one word changed), with an empty one.
    fn texts(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| match i % 13 {
                7 => String::new(),
                j => format!(
                    "family {} says the quick brown fox jumps over the lazy dog number {} again {}",
                    i / 13,
                    j % 3,
                    "and again ".repeat(i % 5)
                ),
            })
            .collect()
    }

    fn fps(texts: &[String]) -> Vec<u64> {
        texts.iter().map(|t| xxh3_64(t.as_bytes())).collect()
    }

    fn kept_engine(texts: &[String], cfg: Config) -> Engine {
        let mut e = Engine::new(cfg).unwrap();
        e.feed(texts, &fps(texts)).unwrap();
        e.keep(&(0..texts.len() as i64).collect::<Vec<_>>())
            .unwrap();
        e
    }

    fn temp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("neardup-saved-{}-{name}", std::process::id()))
    }

    #[test]
    fn loaded_rows_decide_as_the_rows_they_were() {
        let all = texts(400);
        let original = kept_engine(&all, config(1 << 30));
        let path = temp("roundtrip");
        original
            .save(&path, &(0..all.len() as i64).collect::<Vec<_>>(), b"ids")
            .unwrap();
        // within the budget: in memory; past it: read in place from the saved file
        let mut in_memory = Engine::new(config(1 << 30)).unwrap();
        in_memory.load(&path).unwrap();
        assert_eq!(in_memory.sketches.in_place_bytes(), 0);
        let mut loaded = Engine::new(config(4096)).unwrap();
        assert_eq!(loaded.load(&path).unwrap(), b"ids");
        assert!(loaded.sketches.in_place_bytes() > 0);
        assert_eq!(loaded.spilled_bytes(), 0);
        assert_eq!(loaded.fps, original.fps);
        assert_eq!(loaded.lengths, original.lengths);
        assert_eq!(loaded.keys, original.keys);
        assert_eq!(loaded.minhash_bytes, original.minhash_bytes);
        assert_eq!(loaded.signatures, original.signatures);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for r in 0..all.len() {
            assert_eq!(
                loaded.sketches.get(r, &mut a).unwrap(),
                original.sketches.get(r, &mut b).unwrap()
            );
        }
        loaded
            .keep(&(0..all.len() as i64).collect::<Vec<_>>())
            .unwrap();
        let mut original = original;
        let probes: Vec<String> = all.iter().map(|t| format!("{t} x")).collect();
        let want = original.check(&probes, &fps(&probes)).unwrap();
        assert!(want.iter().any(|m| !m.is_empty()));
        assert_eq!(loaded.check(&probes, &fps(&probes)).unwrap(), want);
        in_memory
            .keep(&(0..all.len() as i64).collect::<Vec<_>>())
            .unwrap();
        assert_eq!(in_memory.check(&probes, &fps(&probes)).unwrap(), want);
        // rows added after the load: past the budget they spill to the temporary file, and
        // rows of all three places (saved file, temporary file, memory) read back as fed
        let more: Vec<String> = (0..50u64)
            .map(|i| {
                let words: Vec<String> = (0..40u64)
                    .map(|w| format!("{:x}", xxh3_64(&(i * 1000 + w).to_le_bytes()) % 99_991))
                    .collect();
                words.join(" ")
            })
            .collect();
        let want = original.check_and_keep(&more, &fps(&more)).unwrap();
        assert_eq!(loaded.check_and_keep(&more, &fps(&more)).unwrap(), want);
        assert!(loaded.spilled_bytes() > 0);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for r in 0..loaded.len() {
            assert_eq!(
                loaded.sketches.get(r, &mut a).unwrap(),
                original.sketches.get(r, &mut b).unwrap()
            );
        }
        assert_eq!(
            loaded.check(&probes, &fps(&probes)).unwrap(),
            original.check(&probes, &fps(&probes)).unwrap()
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_rows_given_are_saved_in_their_order() {
        let all = texts(60);
        let original = kept_engine(&all, config(1 << 30));
        let path = temp("subset");
        let rows = [5i64, 2, 40];
        original.save(&path, &rows, b"").unwrap();
        let mut loaded = Engine::new(config(1 << 30)).unwrap();
        loaded.load(&path).unwrap();
        let want: Vec<u64> = rows.iter().map(|&r| original.fps[r as usize]).collect();
        assert_eq!(loaded.fps, want);
        let mut buf = Vec::new();
        let mut obuf = Vec::new();
        assert_eq!(
            loaded.sketches.get(2, &mut buf).unwrap(),
            original.sketches.get(40, &mut obuf).unwrap()
        );
        assert!(original.save(&path, &[60], b"").is_err()); // (not a row)
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn another_shape_is_refused_naming_the_file() {
        let all = texts(30);
        let path = temp("shape");
        kept_engine(&all, config(1 << 30))
            .save(&path, &[0, 1], b"")
            .unwrap();
        let mut cfg = config(1 << 30);
        cfg.shingle = 4;
        let mut other = Engine::new(cfg).unwrap();
        match other.load(&path) {
            Err(Error::Incompatible(m)) => {
                assert!(m.contains(&path.display().to_string()), "{m}");
                assert!(m.contains("shingle 5"), "{m}");
            }
            other => panic!("expected Incompatible, got {:?}", other.map(|_| ())),
        }
        assert!(other.is_empty());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_damaged_or_truncated_file_is_corrupt_and_loads_nothing() {
        let all = texts(200);
        let path = temp("damaged");
        kept_engine(&all, config(1 << 30))
            .save(&path, &(0..200).collect::<Vec<_>>(), b"extra")
            .unwrap();
        let good = std::fs::read(&path).unwrap();
        // one byte flipped in every region of the file (header, each section), then cuts
        let mut damaged: Vec<Vec<u8>> = [3usize, 40, 100, good.len() / 2, good.len() - 12]
            .iter()
            .map(|&at| {
                let mut d = good.clone();
                d[at] ^= 0x10;
                d
            })
            .collect();
        damaged.extend([10usize, 64, good.len() / 3, good.len() - 1].map(|n| good[..n].to_vec()));
        let mut longer = good.clone();
        longer.push(0);
        damaged.push(longer);
        for (i, bytes) in damaged.iter().enumerate() {
            std::fs::write(&path, bytes).unwrap();
            let mut e = Engine::new(config(1 << 30)).unwrap();
            match e.load(&path) {
                Err(Error::Corrupt(m)) => {
                    assert!(m.contains(&path.display().to_string()), "{m}")
                }
                other => panic!("case {i}: expected Corrupt, got {:?}", other.map(|_| ())),
            }
            assert!(e.is_empty(), "case {i}");
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn only_an_empty_engine_loads() {
        let all = texts(20);
        let path = temp("nonempty");
        let mut e = kept_engine(&all, config(1 << 30));
        e.save(&path, &[0], b"").unwrap();
        assert!(matches!(e.load(&path), Err(Error::InvalidArgument(_))));
        assert_eq!(e.len(), 20);
        std::fs::remove_file(&path).unwrap();
    }
}
