//! Binding of `neardup_core::redis_call`: one text's check-and-add on one Redis server.

use std::sync::{Mutex, MutexGuard, OnceLock};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

use crate::errors::to_py;
use crate::fingerprint::Fingerprinter;
use crate::plain::text_of;
use neardup_core::records::sketch_from_le;
use neardup_core::redis_call::{
    Call, Decision, Engine, Keys, Preparation, Request, Step, Text, Written,
};

/// Texts longer than this (bytes) are prepared with the GIL released.
const DETACH_BYTES: usize = 1 << 16;

/// A write as Python sees it: ticket, ref, period, the old ref it replaced.
type WrittenTuple = (i64, u64, i64, Option<u64>);

fn lock<T>(m: &Mutex<T>) -> PyResult<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| PyRuntimeError::new_err("a call panicked while holding the engine"))
}

/// One call's state between its round trips.
#[pyclass(module = "neardup._core", name = "_TextCall", frozen)]
pub struct TextCall {
    inner: Mutex<Option<Call>>,
}

#[pymethods]
impl TextCall {
    /// ``(ticket, ref, period, old ref or None)`` of the write this call sent (ticket 0
    /// until answered), or None if it wrote nothing.
    fn written(&self) -> PyResult<Option<WrittenTuple>> {
        Ok(lock(&self.inner)?
            .as_ref()
            .and_then(Call::written)
            .map(written))
    }

    /// Forget what was received of the replies to the last request (sent again).
    fn rewind(&self) -> PyResult<()> {
        if let Some(c) = lock(&self.inner)?.as_mut() {
            c.rewind();
        }
        Ok(())
    }
}

fn written(w: Written) -> WrittenTuple {
    (w.ticket, w.reference, w.period, w.old)
}

fn step_to_py<'py>(py: Python<'py>, step: Step) -> PyResult<Bound<'py, PyTuple>> {
    match step {
        Step::Send(Request { bytes, .. }) => ("send", PyBytes::new(py, &bytes)).into_pyobject(py),
        Step::Done(Decision {
            added,
            matches,
            candidates,
            written: w,
        }) => {
            let matches: Vec<(String, u32, f64)> = matches
                .into_iter()
                .map(|m| (m.id, m.distance, m.similarity))
                .collect();
            ("done", added, matches, candidates, w.map(written)).into_pyobject(py)
        }
        Step::Fallback => ("fallback",).into_pyobject(py),
        Step::Failed(message) => ("failed", message).into_pyobject(py),
        Step::Sketches(refs) => ("sketches", refs).into_pyobject(py),
    }
}

/// One process's state for the one-text check-and-adds of a namespace on one server.
#[pyclass(module = "neardup._core", name = "_TextEngine", frozen)]
pub struct TextEngine {
    inner: Mutex<Engine>,
    preparation: OnceLock<Preparation>,
}

#[pymethods]
impl TextEngine {
    /// ``keys``: the namespace's seq, count prefix, id prefix, horizon, data prefix, recent
    /// ring, bucket prefix, then the SHA1s of the write and recent-ring scripts.
    #[new]
    fn new(keys: [String; 9], blocks: u32, threshold: f64, cache_size: usize) -> PyResult<Self> {
        let [seq, count_prefix, id_prefix, horizon, data_prefix, recent, bucket_prefix, write_sha, recent_sha] =
            keys;
        let keys = Keys {
            seq,
            count_prefix,
            id_prefix,
            horizon,
            data_prefix,
            recent,
            bucket_prefix,
            write_sha,
            recent_sha,
        };
        Ok(TextEngine {
            inner: Mutex::new(Engine::new(keys, blocks, threshold, cache_size).map_err(to_py)?),
            preparation: OnceLock::new(),
        })
    }

    /// How :meth:`begin` prepares a text (the deduplicator's policy; set once).
    fn prepare_with(
        &self,
        fingerprinter: &Fingerprinter,
        shingle: usize,
        k_short: u32,
        k_long: u32,
        short_chars: usize,
    ) -> PyResult<()> {
        let p = Preparation::new(
            fingerprinter.inner.clone(),
            shingle,
            k_short,
            k_long,
            short_chars,
        )
        .map_err(to_py)?;
        self.preparation
            .set(p)
            .map_err(|_| PyValueError::new_err("the engine's preparation is already set"))
    }

    /// Start the check-and-add of the text ``visible`` (as the policy reads it: an HTML
    /// page's main text), prepared in the core (:meth:`prepare_with`); ``text`` is what is
    /// stored (UTF-8). ``(call, request bytes, fingerprint)``.
    #[allow(clippy::too_many_arguments)]
    fn begin<'py>(
        &self,
        py: Python<'py>,
        visible: &Bound<'py, PyString>,
        periods: (i64, i64),
        period: i64,
        expire_at: i64,
        id: String,
        timestamp: String,
        text: &[u8],
        reference: u64,
    ) -> PyResult<(TextCall, Bound<'py, PyBytes>, u64)> {
        let prep = self.preparation.get().ok_or_else(|| {
            PyValueError::new_err("the engine has no preparation: prepare_with()")
        })?;
        let visible = text_of(visible)?;
        let p = if visible.len() > DETACH_BYTES {
            py.detach(|| prep.prepare(&visible))
        } else {
            prep.prepare(&visible)
        }
        .map_err(to_py)?;
        let fp = p.fp;
        let t = Text {
            fp,
            sketch: p.sketch,
            k: p.k,
            periods,
            period,
            expire_at,
            id,
            timestamp,
            text: text.to_vec(),
            reference,
        };
        let (call, req) = lock(&self.inner)?.begin(t).map_err(to_py)?;
        let call = TextCall {
            inner: Mutex::new(Some(call)),
        };
        Ok((call, PyBytes::new(py, &req.bytes), fp))
    }

    /// Bytes received after the call's last request: None until every reply to it is here,
    /// then the next step: ``("send", bytes)``, ``("done", added, [(id, distance,
    /// similarity)], candidates, written or None)``, ``("fallback",)``, ``("failed",
    /// message)`` or ``("sketches", [(ref, fp)])``. ``ValueError``: not a reply we expect
    /// (the connection is out of step).
    fn feed<'py>(
        &self,
        py: Python<'py>,
        call: &TextCall,
        chunk: &[u8],
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let mut c = lock(&call.inner)?;
        let c = c
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("this call is over"))?;
        let step = lock(&self.inner)?.feed(c, chunk).map_err(to_py)?;
        step.map(|s| step_to_py(py, s)).transpose()
    }

    /// The sketches (little-endian uint32 bytes, None: the text is gone) of the candidates
    /// of a ``("sketches", ...)`` step, in its order: the next step.
    fn sketches<'py>(
        &self,
        py: Python<'py>,
        call: &TextCall,
        sketches: Vec<Option<Vec<u8>>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let sketches: Vec<Option<Vec<u32>>> = sketches
            .iter()
            .map(|s| s.as_deref().map(sketch_from_le).transpose())
            .collect::<Result<_, _>>()
            .map_err(to_py)?;
        let mut c = lock(&call.inner)?;
        let c = c
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("this call is over"))?;
        let step = lock(&self.inner)?.sketches(c, &sketches).map_err(to_py)?;
        step_to_py(py, step)
    }

    /// The recent ring's slots up to ``ticket``, read by Python's path of this process.
    fn heard(&self, ticket: i64, slots: &[u8]) -> PyResult<()> {
        lock(&self.inner)?.heard(ticket, slots);
        Ok(())
    }

    /// Drop versions this process retracted or removed.
    fn forget(&self, refs: Vec<u64>) -> PyResult<()> {
        lock(&self.inner)?.forget(&refs);
        Ok(())
    }

    /// Forget everything (the namespace was cleared).
    fn clear(&self) -> PyResult<()> {
        lock(&self.inner)?.clear();
        Ok(())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(lock(&self.inner)?.len())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TextEngine>()?;
    m.add_class::<TextCall>()?;
    Ok(())
}
