//! Binding of `neardup_core::redis_call`: one text's check-and-add on one Redis server.

use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyBaseException, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt, PyList, PyTuple};

use crate::errors::to_py;
use crate::verify::{array, slice};
use neardup_core::records::sketch_from_le;
use neardup_core::redis_call::{Call, Decision, Engine, Keys, Reply, Request, Step, Text, Written};

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
}

fn written(w: Written) -> WrittenTuple {
    (w.ticket, w.reference, w.period, w.old)
}

/// A reply as hiredis parsed it, with the bytes objects it holds kept in `keep` (read as
/// slices afterwards: nothing copied).
enum Parsed {
    Nil,
    Int(i64),
    Bytes(usize),
    Array(Vec<Parsed>),
    Error,
}

fn parse<'py>(obj: &Bound<'py, PyAny>, keep: &mut Vec<Bound<'py, PyBytes>>) -> PyResult<Parsed> {
    if obj.is_none() {
        return Ok(Parsed::Nil);
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        keep.push(b.clone());
        return Ok(Parsed::Bytes(keep.len() - 1));
    }
    if let Ok(items) = obj.cast::<PyList>() {
        return items
            .iter()
            .map(|x| parse(&x, keep))
            .collect::<PyResult<_>>()
            .map(Parsed::Array);
    }
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        return Ok(Parsed::Int(obj.extract()?));
    }
    if obj.is_instance_of::<PyBaseException>() {
        return Ok(Parsed::Error);
    }
    Err(PyTypeError::new_err(format!(
        "a Redis reply must be bytes, int, None, a list or an error, got {}",
        obj.get_type().name()?
    )))
}

fn view<'a>(p: &Parsed, keep: &'a [Bound<'_, PyBytes>]) -> Reply<'a> {
    match p {
        Parsed::Nil => Reply::Nil,
        Parsed::Int(n) => Reply::Int(*n),
        Parsed::Bytes(i) => Reply::Bulk(keep[*i].as_bytes()),
        Parsed::Array(items) => Reply::Array(items.iter().map(|x| view(x, keep)).collect()),
        Parsed::Error => Reply::Error,
    }
}

fn step_to_py<'py>(py: Python<'py>, step: Step) -> PyResult<Bound<'py, PyTuple>> {
    match step {
        Step::Send(Request { bytes, replies }) => {
            ("send", PyBytes::new(py, &bytes), replies).into_pyobject(py)
        }
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
        Step::Failed => ("failed",).into_pyobject(py),
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

    /// Start a check-and-add: ``(call, request bytes, replies expected)``.
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
    ) -> PyResult<(TextCall, Bound<'py, PyBytes>, usize)> {
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
        Ok((call, PyBytes::new(py, &req.bytes), req.replies))
    }

    /// The next step of ``call`` from the replies (as hiredis parsed them, error replies as
    /// exception objects): ``("send", bytes, n)``, ``("done", added, [(id, distance,
    /// similarity)], candidates, written or None)``, ``("fallback",)``, ``("failed",)`` or
    /// ``("sketches", [(ref, fp)])``.
    fn take<'py>(
        &self,
        py: Python<'py>,
        call: &TextCall,
        replies: &Bound<'py, PyList>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let mut keep = Vec::new();
        let parsed: Vec<Parsed> = replies
            .iter()
            .map(|r| parse(&r, &mut keep))
            .collect::<PyResult<_>>()?;
        let views: Vec<Reply<'_>> = parsed.iter().map(|p| view(p, &keep)).collect();
        let mut c = lock(&call.inner)?;
        let c = c
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("this call is over"))?;
        let step = lock(&self.inner)?.take(c, &views).map_err(to_py)?;
        step_to_py(py, step)
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
