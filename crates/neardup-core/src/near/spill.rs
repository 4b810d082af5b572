//! The sketches of a corpus, in memory up to a budget and in an unnamed temporary file past
//! it, so that the memory of `neardup dedup` does not grow with the corpus's text.
//!
//! Rows are appended whole; a row lies wholly in memory or wholly in the file. The file is
//! unlinked as soon as it is made: it disappears when the store is dropped or the process
//! dies. Reads of spilled rows go through the page cache (`pread`), not the process's memory.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Error, Result};

static FILES: AtomicU64 = AtomicU64::new(0);

pub struct SketchStore {
    /// `offsets[r]..offsets[r + 1]`: row `r`'s hashes, counted over the base, the file, then
    /// memory.
    offsets: Vec<u64>,
    /// Rows read in place from a saved engine's file (see [`SketchStore::set_base`]): the
    /// file, the byte offset of its first hash, and its hashes.
    base: Option<(File, u64)>,
    base_hashes: u64,
    /// Hashes from `spilled` on.
    memory: Vec<u32>,
    /// Hashes in the file.
    spilled: u64,
    file: Option<File>,
    /// Hashes kept in memory before they go to the file.
    budget: usize,
    dir: PathBuf,
}

impl SketchStore {
    /// A store keeping up to `budget_bytes` of hashes in memory, spilling the rest to an
    /// unnamed file in `dir`.
    pub fn new(budget_bytes: usize, dir: &Path) -> SketchStore {
        SketchStore {
            offsets: vec![0],
            base: None,
            base_hashes: 0,
            memory: Vec::new(),
            spilled: 0,
            file: None,
            budget: budget_bytes / 4,
            dir: dir.to_path_buf(),
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of hashes of row `r`.
    pub fn count(&self, r: usize) -> usize {
        (self.offsets[r + 1] - self.offsets[r]) as usize
    }

    /// Bytes of hashes written to the temporary file.
    pub fn spilled_bytes(&self) -> u64 {
        self.spilled * 4
    }

    /// Bytes of hashes read in place from a saved engine's file.
    pub fn in_place_bytes(&self) -> u64 {
        self.base_hashes * 4
    }

    /// Bytes held in memory (hashes and offsets).
    pub fn memory_bytes(&self) -> usize {
        self.memory.capacity() * 4 + self.offsets.capacity() * 8
    }

    /// Makes the rows of `counts` (hashes per row) those stored at byte `offset` of `file`, a
    /// saved engine's file that is read in place, never written (and never copied to memory
    /// or to the temporary file). Only for an empty store.
    pub fn set_base(&mut self, file: File, offset: u64, counts: &[u32]) -> Result<()> {
        if !self.is_empty() {
            return Err(Error::InvalidArgument(
                "a base is set on an empty sketch store".into(),
            ));
        }
        let mut end = 0u64;
        self.offsets.reserve(counts.len());
        for &c in counts {
            end += u64::from(c);
            self.offsets.push(end);
        }
        self.base = Some((file, offset));
        self.base_hashes = end;
        Ok(())
    }

    /// Appends a row; on an error (the temporary file) the row is not stored and the store is
    /// as before.
    pub fn push(&mut self, sketch: &[u32]) -> Result<()> {
        self.memory.extend_from_slice(sketch);
        let end = self.offsets[self.offsets.len() - 1] + sketch.len() as u64;
        debug_assert!(end - self.base_hashes - self.spilled == self.memory.len() as u64);
        self.offsets.push(end);
        if self.memory.len() > self.budget {
            if let Err(e) = self.spill() {
                self.offsets.pop();
                self.memory.truncate(self.memory.len() - sketch.len());
                return Err(e);
            }
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        if self.file.is_none() {
            let name = format!(
                "neardup-sketches-{}-{}.tmp",
                std::process::id(),
                FILES.fetch_add(1, Ordering::Relaxed)
            );
            let path = self.dir.join(name);
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|e| io_error(&self.dir, e))?;
            std::fs::remove_file(&path).map_err(|e| io_error(&self.dir, e))?;
            self.file = Some(file);
        }
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        let mut bytes = Vec::with_capacity(self.memory.len() * 4);
        for h in &self.memory {
            bytes.extend_from_slice(&h.to_le_bytes());
        }
        // (at its place: a write that failed half way shifts nothing)
        file.write_all_at(&bytes, self.spilled * 4)
            .map_err(|e| io_error(&self.dir, e))?;
        self.spilled += self.memory.len() as u64;
        self.memory.clear();
        self.memory.shrink_to(self.budget + 1);
        Ok(())
    }

    /// Reads the start of row `r`'s hashes when they are in memory (0 otherwise): a caller
    /// about to read several rows asks for all of them first, so their cache misses overlap.
    pub fn touch(&self, r: usize) -> u32 {
        let start = self.offsets[r];
        let in_memory = self.base_hashes + self.spilled;
        if start >= in_memory && self.offsets[r + 1] > start {
            return self.memory[(start - in_memory) as usize];
        }
        0
    }

    /// Row `r`'s hashes: borrowed from memory, or read from the file into `buf`.
    pub fn get<'a>(&'a self, r: usize, buf: &'a mut Vec<u32>) -> Result<&'a [u32]> {
        let (start, end) = (self.offsets[r], self.offsets[r + 1]);
        let in_memory = self.base_hashes + self.spilled;
        if start >= in_memory {
            let (s, e) = ((start - in_memory) as usize, (end - in_memory) as usize);
            return Ok(&self.memory[s..e]);
        }
        let (file, at, dir) = if start >= self.base_hashes {
            (
                self.file.as_ref(),
                (start - self.base_hashes) * 4,
                &self.dir,
            )
        } else {
            let base = self.base.as_ref();
            (
                base.map(|b| &b.0),
                base.map_or(0, |b| b.1) + start * 4,
                &self.dir,
            )
        };
        let Some(file) = file else {
            return Err(Error::InvalidArgument(format!("row {r} was never stored")));
        };
        let mut bytes = vec![0u8; ((end - start) * 4) as usize];
        file.read_exact_at(&mut bytes, at)
            .map_err(|e| io_error(dir, e))?;
        buf.clear();
        buf.extend(
            bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
        Ok(buf)
    }
}

fn io_error(dir: &Path, e: std::io::Error) -> Error {
    Error::Io(std::io::Error::new(
        e.kind(),
        format!("temporary sketch file in {}: {e}", dir.display()),
    ))
}
