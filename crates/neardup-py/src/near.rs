//! Binding of `neardup_core::near`: the bounded-work decision of `neardup dedup` (rows fed in
//! chunks, decided in slices of a preference order).

use std::borrow::Cow;
use std::sync::{Mutex, MutexGuard};

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use neardup_core::near::held::{lookup, Batch, Record, Texts, Version, Versions};
use neardup_core::near::{Config, Engine, Probes, Rule, Shape};

use crate::errors::to_py;

use neardup_core::near::Found;

/// Per text, its matches `(row, distance, similarity)`, best first.
type Matches = Vec<Vec<Found>>;

/// Rows of a corpus (fingerprint, sketch, MinHash band keys) and the greedy decision over
/// them: each row, in preference order, is compared with the kept rows that share a band key
/// (at most ``bucket_limit`` newest per band; one found in full buckets only needs
/// ``full_bucket_quorum`` of them; the best ``verify_limit`` of them by shared
/// bands then SimHash distance) and dropped for the best one whose Jaccard passes
/// ``threshold``. ``verify=False``: the kept rows within the SimHash radius decide. Used by
/// ``neardup.corpus.CorpusDeduper``.
#[pyclass(module = "neardup._core", frozen)]
pub struct NearEngine {
    inner: Mutex<Engine>,
    /// Computes the probes of texts outside the lock: checks hash their texts while another
    /// thread holds the engine.
    shape: Shape,
}

impl NearEngine {
    fn lock(&self) -> PyResult<MutexGuard<'_, Engine>> {
        self.inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a NearEngine call failed inside; make a new one"))
    }

    /// `f` under the lock (taken here: call with the GIL released).
    fn with<R>(&self, f: impl FnOnce(&mut Engine) -> neardup_core::Result<R>) -> PyResult<R> {
        let mut engine = self.lock()?;
        f(&mut engine).map_err(to_py)
    }
}

#[pymethods]
impl NearEngine {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, bands, rows, shingle, threshold, verify, k_short, k_long, short_chars,
                        bucket_limit, full_bucket_quorum, verify_limit, memory_budget,
                        spill_dir))]
    fn new(
        bands: usize,
        rows: usize,
        shingle: usize,
        threshold: f64,
        verify: bool,
        k_short: u32,
        k_long: u32,
        short_chars: usize,
        bucket_limit: usize,
        full_bucket_quorum: usize,
        verify_limit: usize,
        memory_budget: usize,
        spill_dir: std::path::PathBuf,
    ) -> PyResult<Self> {
        let engine = Engine::new(Config {
            bands,
            rows,
            shingle,
            threshold,
            verify,
            k_short,
            k_long,
            short_chars,
            bucket_limit,
            full_bucket_quorum,
            verify_limit,
            memory_budget,
            spill_dir,
        })
        .map_err(to_py)?;
        Ok(NearEngine {
            shape: engine.shape(),
            inner: Mutex::new(engine),
        })
    }

    /// Adds prepared texts and their fingerprints as the next rows (GIL released; their
    /// sketches and band keys made before the engine is taken, as :meth:`check` does).
    fn feed(
        &self,
        py: Python<'_>,
        norms: Vec<String>,
        fingerprints: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<()> {
        let fps = fingerprints.as_array().to_vec();
        py.detach(|| {
            let probes = self.shape.probes(&norms, &fps).map_err(to_py)?;
            self.with(|e| e.feed_probes(probes))
        })
    }

    /// What :meth:`feed` computes of prepared texts (sketches, band keys), computed here
    /// without the engine (GIL released): another thread may decide meanwhile; for
    /// :meth:`feed_probes`.
    fn probes(
        &self,
        py: Python<'_>,
        norms: Vec<String>,
        fingerprints: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<NearProbes> {
        let fps = fingerprints.as_array().to_vec();
        let probes = py.detach(|| self.shape.probes(&norms, &fps).map_err(to_py))?;
        Ok(NearProbes {
            len: probes.len(),
            inner: Mutex::new(Some(probes)),
        })
    }

    /// :meth:`feed` of texts whose probes :meth:`probes` computed (GIL released); a probes
    /// object is fed once.
    fn feed_probes(&self, py: Python<'_>, probes: &NearProbes) -> PyResult<()> {
        let taken = probes
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("the probes are unusable"))?
            .take()
            .ok_or_else(|| PyValueError::new_err("these probes were fed already"))?;
        py.detach(|| self.with(|e| e.feed_probes(taken)))
    }

    /// Visits ``rows`` next in the decision under way (GIL released); ``all_pairs``: compare
    /// with every earlier row and record each verified pair, dropping none.
    #[pyo3(signature = (rows, all_pairs = false))]
    fn decide(
        &self,
        py: Python<'_>,
        rows: PyReadonlyArray1<'_, i64>,
        all_pairs: bool,
    ) -> PyResult<()> {
        let rows = rows.as_array().to_vec();
        py.detach(|| self.with(|e| e.decide(&rows, all_pairs)))
    }

    /// The decision so far: a dict of numpy arrays per row (``representative``, ``distance``,
    /// ``similarity``, ``empty``), the recorded pairs (``pairs_a``, ``pairs_b``, ``pairs_distance``,
    /// ``pairs_similarity``) and counters (``stats``: a dict of ints and lists).
    fn outcome<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = self.lock()?.outcome();
        let d = PyDict::new(py);
        let distance: Vec<i64> = out.distance.iter().map(|&x| i64::from(x)).collect();
        d.set_item("representative", out.representative.into_pyarray(py))?;
        d.set_item("distance", distance.into_pyarray(py))?;
        d.set_item("similarity", out.similarity.into_pyarray(py))?;
        d.set_item("empty", out.empty.into_pyarray(py))?;
        let (mut pa, mut pb, mut pd) = (Vec::new(), Vec::new(), Vec::new());
        let mut sims = Vec::with_capacity(out.pairs.len());
        for &(a, b, dist, sim) in &out.pairs {
            pa.push(i64::from(a));
            pb.push(i64::from(b));
            pd.push(i64::from(dist));
            sims.push(sim);
        }
        d.set_item("pairs_a", pa.into_pyarray(py))?;
        d.set_item("pairs_b", pb.into_pyarray(py))?;
        d.set_item("pairs_distance", pd.into_pyarray(py))?;
        d.set_item("pairs_similarity", sims.into_pyarray(py))?;
        let s = &out.stats;
        let stats = PyDict::new(py);
        stats.set_item("documents", s.documents)?;
        stats.set_item("candidates", s.candidates)?;
        stats.set_item("compared", s.compared)?;
        stats.set_item("estimated_out", s.estimated_out)?;
        stats.set_item("capped", s.capped)?;
        stats.set_item("buckets_cut", s.buckets_cut)?;
        stats.set_item("unconfirmed", s.unconfirmed)?;
        stats.set_item("outranked", s.outranked)?;
        stats.set_item("empty", s.empty)?;
        stats.set_item("distance_passed", s.distance_passed.clone())?;
        stats.set_item("distance_failed", s.distance_failed.clone())?;
        stats.set_item("similarity", s.similarity.clone())?;
        d.set_item("stats", stats)?;
        Ok(d)
    }

    /// The kept rows that pass against each text (not stored), best first: a list per text of
    /// ``(row, distance, similarity)`` (GIL released).
    fn check(
        &self,
        py: Python<'_>,
        norms: Vec<String>,
        fingerprints: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<Matches> {
        let fps = fingerprints.as_array().to_vec();
        py.detach(|| {
            let probes = self.shape.probes(&norms, &fps).map_err(to_py)?;
            self.with(|e| e.check_probes(probes))
        })
    }

    /// Check-and-add of fed rows in order: each row's matches among the kept rows (best
    /// first); a row with none is kept (GIL released).
    fn check_and_add(&self, py: Python<'_>, rows: PyReadonlyArray1<'_, i64>) -> PyResult<Matches> {
        let rows = rows.as_array().to_vec();
        py.detach(|| self.with(|e| e.check_and_add(&rows)))
    }

    /// Check-and-add of texts in order: per text its matches among the kept rows (best first)
    /// and the row it was stored and kept as (-1: not kept, nothing stored) (GIL released).
    fn check_and_keep(
        &self,
        py: Python<'_>,
        norms: Vec<String>,
        fingerprints: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<Vec<(Vec<Found>, i64)>> {
        let fps = fingerprints.as_array().to_vec();
        py.detach(|| {
            let probes = self.shape.probes(&norms, &fps).map_err(to_py)?;
            self.with(|e| e.check_and_keep_probes(probes))
        })
    }

    /// Keeps fed rows without checking them (an add).
    fn keep(&self, py: Python<'_>, rows: PyReadonlyArray1<'_, i64>) -> PyResult<()> {
        let rows = rows.as_array().to_vec();
        py.detach(|| self.with(|e| e.keep(&rows)))
    }

    /// Forgets kept rows: never candidates again (removed, replaced or expired texts).
    fn forget(&self, py: Python<'_>, rows: PyReadonlyArray1<'_, i64>) -> PyResult<()> {
        let rows = rows.as_array().to_vec();
        py.detach(|| self.with(|e| e.forget(&rows)))
    }

    /// Drops forgotten rows and their memory: the rows left are renumbered in order and the
    /// tables rebuilt. Returns each old row's new row (-1: dropped) (GIL released).
    fn compact<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let new_row = py.detach(|| self.with(Engine::compact))?;
        Ok(new_row.into_pyarray(py))
    }

    /// Forgets the decision under way (the rows stay).
    fn reset(&self) -> PyResult<()> {
        self.lock()?.reset();
        Ok(())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.lock()?.len())
    }

    /// Bytes held in memory: the rows' data and the decision's tables.
    fn memory_bytes(&self) -> PyResult<usize> {
        let e = self.lock()?;
        Ok(e.memory_bytes() + e.decision_bytes())
    }

    /// Bytes of sketches written to the temporary file.
    fn spilled_bytes(&self) -> PyResult<u64> {
        Ok(self.lock()?.spilled_bytes())
    }

    /// Writes ``rows`` (in this order) to the file ``path`` with the caller's ``extra`` bytes:
    /// each row's fingerprint, length, band keys, min-hash bytes and sketch, a checksum per
    /// section; written beside and renamed over ``path`` once synced (GIL released).
    fn save(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        rows: PyReadonlyArray1<'_, i64>,
        extra: Vec<u8>,
    ) -> PyResult<()> {
        let rows = rows.as_array().to_vec();
        py.detach(|| self.with(|e| e.save(&path, &rows, &extra)))
    }

    /// Reads the rows saved by :meth:`save` in ``path`` into this engine, which must be empty,
    /// and returns the saved ``extra`` bytes. The rows are stored, not kept (:meth:`keep` them).
    /// ``CorruptIndexError`` for a damaged or truncated file, ``IncompatibleIndexError`` for one
    /// of another shape or format version; either way the engine stays empty (GIL released).
    fn load<'py>(
        &self,
        py: Python<'py>,
        path: std::path::PathBuf,
    ) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let extra = py.detach(|| self.with(|e| e.load(&path)))?;
        Ok(pyo3::types::PyBytes::new(py, &extra))
    }
}

/// The decision rule of :class:`NearEngine` for candidates found and held elsewhere (a Redis
/// store's band lists, a Spark job's band groups): the same probes, ranking and verifier, so
/// every store and engine decides alike. Stateless and safe to share between threads.
#[pyclass(module = "neardup._core", frozen)]
pub struct NearRule {
    rule: Rule,
}

#[pymethods]
impl NearRule {
    #[new]
    #[pyo3(signature = (threshold, bands, rows, shingle, verify_limit))]
    fn new(
        threshold: f64,
        bands: usize,
        rows: usize,
        shingle: usize,
        verify_limit: usize,
    ) -> PyResult<Self> {
        Ok(NearRule {
            rule: Rule::new(threshold, bands, rows, shingle, verify_limit).map_err(to_py)?,
        })
    }

    /// Min-hash bytes per text (``bands * rows``).
    #[getter]
    fn width(&self) -> usize {
        self.rule.width()
    }

    /// ``(keys, bytes, lengths)`` of prepared texts: band keys ``(n, bands)`` uint32, min-hash
    /// bytes ``(n, bands * rows)`` uint8 and lengths in characters ``(n,)`` uint32. A length of
    /// 0 marks a text with nothing to compare: never store it as a candidate (GIL released).
    #[allow(clippy::type_complexity)]
    fn probes<'py>(
        &self,
        py: Python<'py>,
        norms: Vec<String>,
        fingerprints: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<(
        Bound<'py, PyArray2<u32>>,
        Bound<'py, PyArray2<u8>>,
        Bound<'py, PyArray1<u32>>,
    )> {
        let fps = fingerprints.as_array().to_vec();
        let (keys, bytes, lengths) = py
            .detach(|| self.rule.probes(&norms, &fps))
            .map_err(to_py)?;
        let n = lengths.len();
        let shape = |w: usize| [n, w];
        let keys = ndarray_2d(keys, shape(self.rule.bands()))?;
        let bytes = ndarray_2d(bytes, shape(self.rule.width()))?;
        Ok((
            keys.into_pyarray(py),
            bytes.into_pyarray(py),
            lengths.into_pyarray(py),
        ))
    }

    /// Indices of the candidates worth verifying against a text (its min-hash ``bytes`` and
    /// fingerprint ``fp``), best first: estimated similarity, then SimHash distance, then
    /// position (smaller is older); at most ``verify_limit``.
    fn rank(
        &self,
        bytes: PyReadonlyArray1<'_, u8>,
        fp: u64,
        cand_bytes: PyReadonlyArray2<'_, u8>,
        cand_fps: PyReadonlyArray1<'_, u64>,
        cand_positions: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<Vec<usize>> {
        // (numpy's arrays as they are when contiguous, as most are: no copy)
        let (bytes, cand_bytes) = (bytes.as_array(), cand_bytes.as_array());
        let (cand_fps, cand_positions) = (cand_fps.as_array(), cand_positions.as_array());
        self.rule
            .rank(
                &contiguous(&bytes),
                fp,
                &contiguous(&cand_bytes),
                &contiguous(&cand_fps),
                &contiguous(&cand_positions),
            )
            .map_err(to_py)
    }

    /// ``texts`` (band keys ``(n, bands)``, min-hash bytes ``(n, width)``, fingerprints,
    /// whether each is listed) against the records read from their band lists (``(k, 16)``
    /// bytes: id hash, ref) and the list of each (``band << 32 | band key``): their candidates
    /// among the versions held in ``versions`` (the first that holds one; see
    /// :class:`NearBatch`; GIL released).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (versions, records, codes, keys, bytes, fps, listed, *, horizon, absent, within, bucket_limit, full_bucket_quorum))]
    fn batch(
        &self,
        py: Python<'_>,
        versions: Vec<Py<NearVersions>>,
        records: PyReadonlyArray2<'_, u8>,
        codes: PyReadonlyArray1<'_, i64>,
        keys: PyReadonlyArray2<'_, u32>,
        bytes: PyReadonlyArray2<'_, u8>,
        fps: PyReadonlyArray1<'_, u64>,
        listed: Vec<bool>,
        horizon: f64,
        absent: Vec<Vec<u8>>,
        within: bool,
        bucket_limit: usize,
        full_bucket_quorum: usize,
    ) -> PyResult<NearBatch> {
        let (records, codes) = (records.as_array(), codes.as_array());
        let (keys, bytes, fps) = (keys.as_array(), bytes.as_array(), fps.as_array());
        let (n, b, w) = (listed.len(), self.rule.bands(), self.rule.width());
        if records.ncols() != 16 && records.nrows() > 0 {
            return Err(PyValueError::new_err(format!(
                "records must be (k, 16) bytes, got {} columns",
                records.ncols()
            )));
        }
        if keys.dim() != (n, b) || bytes.dim() != (n, w) || fps.len() != n {
            return Err(PyValueError::new_err(format!(
                "batch needs keys ({n}, {b}), bytes ({n}, {w}) and {n} fingerprints for {n} \
                 texts; got keys {:?}, bytes {:?}, {} fingerprints",
                keys.dim(),
                bytes.dim(),
                fps.len()
            )));
        }
        if let Some(v) = versions.iter().find(|v| v.get().width != w) {
            return Err(PyValueError::new_err(format!(
                "versions of {} min-hash bytes for a rule of {w}",
                v.get().width
            )));
        }
        let records: Vec<Record> = contiguous(&records)
            .chunks_exact(16)
            .map(|r| r.try_into().expect("16 bytes"))
            .collect();
        let absent = absent
            .iter()
            .map(|h| <[u8; 8]>::try_from(&h[..]))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| PyValueError::new_err("absent id hashes must be 8 bytes each"))?;
        let (codes, keys) = (contiguous(&codes), contiguous(&keys));
        let (bytes, fps) = (contiguous(&bytes), contiguous(&fps));
        let texts = Texts {
            keys: &keys,
            bytes: &bytes,
            fps: &fps,
            listed: &listed,
        };
        // (each lock is taken without the GIL, one at a time, and only to look records up)
        let batch = py
            .detach(|| {
                let maps = versions
                    .iter()
                    .map(|v| v.get().inner.lock().map_err(|_| poisoned_core()));
                let held = lookup(&records, maps)?;
                self.rule.batch(
                    &records,
                    &held,
                    &codes,
                    &texts,
                    horizon,
                    &absent,
                    within,
                    bucket_limit,
                    full_bucket_quorum,
                )
            })
            .map_err(to_py)?;
        Ok(NearBatch {
            batch,
            rule: self.rule.clone(),
        })
    }

    /// The candidate texts that pass the verifier against ``norm``, best first:
    /// ``(index, distance, similarity)`` (GIL released).
    fn verify(
        &self,
        py: Python<'_>,
        norm: String,
        fp: u64,
        cand_norms: Vec<String>,
        cand_fps: PyReadonlyArray1<'_, u64>,
        cand_positions: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<Vec<Found>> {
        let fps = cand_fps.as_array().to_vec();
        let positions = cand_positions.as_array().to_vec();
        py.detach(|| self.rule.verify(&norm, fp, &cand_norms, &fps, &positions))
            .map_err(to_py)
    }
}

/// A row-major 2-D array of `shape` from a flat vector.
fn ndarray_2d<T>(flat: Vec<T>, shape: [usize; 2]) -> PyResult<numpy::ndarray::Array2<T>> {
    numpy::ndarray::Array2::from_shape_vec(shape, flat)
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Prepared texts made ready by :meth:`NearEngine.probes` for :meth:`NearEngine.feed_probes`
/// (their sketches and band keys; fed once).
#[pyclass(module = "neardup._core", frozen)]
pub struct NearProbes {
    inner: Mutex<Option<Probes>>,
    len: usize,
}

#[pymethods]
impl NearProbes {
    fn __len__(&self) -> usize {
        self.len
    }
}

const POISONED: &str = "a thread panicked while holding the versions";

fn poisoned() -> PyErr {
    PyRuntimeError::new_err(POISONED)
}

fn poisoned_core() -> neardup_core::Error {
    neardup_core::Error::InvalidArgument(POISONED.into())
}

/// The stored versions a caller has read (a Redis store's candidates), by record (id hash and
/// ref, 16 bytes): fingerprint, timestamp, encoded id and min-hash bytes; at most about
/// ``capacity`` (the oldest dropped first). Safe to share between threads.
#[pyclass(module = "neardup._core", frozen)]
pub struct NearVersions {
    inner: Mutex<Versions>,
    width: usize,
}

#[pymethods]
impl NearVersions {
    #[new]
    fn new(width: usize, capacity: usize) -> Self {
        NearVersions {
            inner: Mutex::new(Versions::new(width, capacity)),
            width,
        }
    }

    /// Keeps the versions of ``records`` (16 bytes each); ``bytes`` holds ``width`` min-hash
    /// bytes each.
    fn put_many(
        &self,
        py: Python<'_>,
        records: Vec<Vec<u8>>,
        fps: Vec<u64>,
        timestamps: Vec<f64>,
        ids: Vec<Vec<u8>>,
        bytes: Vec<Vec<u8>>,
    ) -> PyResult<()> {
        let n = records.len();
        if fps.len() != n || timestamps.len() != n || ids.len() != n || bytes.len() != n {
            return Err(PyValueError::new_err(format!(
                "put_many needs one fingerprint, timestamp, id and min-hash bytes per record; \
                 got {n} records, {} fingerprints, {} timestamps, {} ids, {} bytes",
                fps.len(),
                timestamps.len(),
                ids.len(),
                bytes.len()
            )));
        }
        if let Some(b) = bytes.iter().find(|b| b.len() != self.width) {
            return Err(PyValueError::new_err(format!(
                "a version needs {} min-hash bytes, got {}",
                self.width,
                b.len()
            )));
        }
        let mut versions = Vec::with_capacity(n);
        for ((((r, fp), ts), id), b) in records
            .into_iter()
            .zip(fps)
            .zip(timestamps)
            .zip(ids)
            .zip(bytes)
        {
            let record: Record = r[..]
                .try_into()
                .map_err(|_| PyValueError::new_err("records must be 16 bytes each"))?;
            let version = Version {
                fp,
                timestamp: ts,
                id: id.into(),
                bytes: b.into(),
            };
            versions.push((record, version));
        }
        py.detach(|| {
            let mut held = self.inner.lock().map_err(|_| poisoned_core())?;
            versions.into_iter().try_for_each(|(r, v)| held.put(r, v))
        })
        .map_err(to_py)
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        py.detach(|| self.inner.lock().map(|v| v.len()).map_err(|_| ()))
            .map_err(|_| poisoned())
    }
}

/// A batch against its band lists (:meth:`NearRule.batch`): rows ``0..stored`` are the
/// stored versions met (``records``, ``ids``), rows ``stored + i`` the batch's texts;
/// ``fps`` and ``positions`` of every row. ``missing``: id hashes of records whose versions
/// are not held (read them, :meth:`NearVersions.put_many`, and make the batch again).
#[pyclass(module = "neardup._core", frozen)]
pub struct NearBatch {
    batch: Batch,
    rule: Rule,
}

#[pymethods]
impl NearBatch {
    #[getter]
    fn missing(&self) -> Vec<Cow<'_, [u8]>> {
        self.batch
            .missing
            .iter()
            .map(|h| Cow::Borrowed(&h[..]))
            .collect()
    }

    #[getter]
    fn stored(&self) -> usize {
        self.batch.stored()
    }

    /// The 16-byte record of stored row ``r``.
    fn record(&self, r: usize) -> PyResult<Cow<'_, [u8]>> {
        self.batch
            .record(r)
            .map(|rec| Cow::Borrowed(&rec[..]))
            .ok_or_else(|| PyValueError::new_err(format!("no stored row {r}")))
    }

    /// The stored rows whose id is one of ``ids`` (encoded): ``(index in ids, row)`` each.
    fn stored_of(&self, ids: Vec<Vec<u8>>) -> Vec<(usize, u32)> {
        let ids: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
        self.batch.stored_of(&ids)
    }

    /// The encoded id of stored row ``r``.
    fn id(&self, r: usize) -> PyResult<Cow<'_, [u8]>> {
        self.batch
            .id(r)
            .map(Cow::Borrowed)
            .ok_or_else(|| PyValueError::new_err(format!("no stored row {r}")))
    }

    #[getter]
    fn fps<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.batch.fps().into_pyarray(py)
    }

    #[getter]
    fn positions<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        self.batch.positions().into_pyarray(py)
    }

    /// The earlier texts of the batch that share a band list with text ``i``.
    fn earlier(&self, i: usize) -> PyResult<Vec<u32>> {
        self.check(i)?;
        Ok(self.batch.earlier(i).to_vec())
    }

    /// The rows worth verifying against text ``i`` (its stored candidates but the rows
    /// ``skip``, and the texts ``kept`` of the batch), best first.
    #[pyo3(signature = (i, kept, skip = Vec::new()))]
    fn ranked(&self, i: usize, kept: Vec<u32>, skip: Vec<u32>) -> PyResult<Vec<u32>> {
        self.batch
            .ranked(&self.rule, i, &kept, &skip)
            .map_err(to_py)
    }
}

impl NearBatch {
    fn check(&self, i: usize) -> PyResult<()> {
        let n = self.batch.texts();
        if i >= n {
            return Err(PyValueError::new_err(format!(
                "no text {i} in a batch of {n}"
            )));
        }
        Ok(())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NearEngine>()?;
    m.add_class::<NearProbes>()?;
    m.add_class::<NearRule>()?;
    m.add_class::<NearVersions>()?;
    m.add_class::<NearBatch>()
}

/// An array's elements in row-major order: borrowed when they are contiguous, else copied.
pub(crate) fn contiguous<'a, T: Clone, D: numpy::ndarray::Dimension>(
    a: &'a numpy::ndarray::ArrayView<'_, T, D>,
) -> Cow<'a, [T]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().cloned().collect()),
    }
}
