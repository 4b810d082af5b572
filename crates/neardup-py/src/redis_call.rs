//! Binding of `neardup_core::redis_call`: one text's check-and-add on one Redis server.

use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::errors::to_py;
use crate::verify::{array, slice};
use neardup_core::records::sketch_from_le;
use neardup_core::redis_call::{Call, Decision, Engine, Keys, Request, Step, Text, Written};

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
        })
    }

    /// Start a check-and-add: ``(call, request bytes)``.
    #[allow(clippy::too_many_arguments)]
    fn begin<'py>(
        &self,
        py: Python<'py>,
        fp: u64,
        sketch: &Bound<'py, PyAny>,
        k: u32,
        periods: (i64, i64),
        period: i64,
        expire_at: i64,
        id: String,
        timestamp: String,
        text: &[u8],
        reference: u64,
    ) -> PyResult<(TextCall, Bound<'py, PyBytes>)> {
        let sketch = array::<u32>(sketch, "sketch", "uint32")?;
        let t = Text {
            fp,
            sketch: slice(&sketch).into_owned(),
            k,
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
        Ok((call, PyBytes::new(py, &req.bytes)))
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
