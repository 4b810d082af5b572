//! Binding of `neardup_core::near`: the bounded-work decision of `neardup dedup` (rows fed in
//! chunks, decided in slices of a preference order).

use std::sync::{Mutex, MutexGuard};

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use neardup_core::near::{Config, Engine, Shape};

use crate::errors::to_py;

use neardup_core::near::Found;

/// Per text, its matches `(row, distance, similarity)`, best first.
type Matches = Vec<Vec<Found>>;

/// Rows of a corpus (fingerprint, sketch, MinHash band keys) and the greedy decision over
/// them: each row, in preference order, is compared with the kept rows that share a band key
/// (at most ``bucket_limit`` newest per band, the best ``verify_limit`` of them by shared
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
                        bucket_limit, verify_limit, memory_budget, spill_dir))]
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

    /// Adds prepared texts and their fingerprints as the next rows (GIL released).
    fn feed(
        &self,
        py: Python<'_>,
        norms: Vec<String>,
        fingerprints: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<()> {
        let fps = fingerprints.as_array().to_vec();
        py.detach(|| self.with(|e| e.feed(&norms, &fps)))
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
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NearEngine>()
}
