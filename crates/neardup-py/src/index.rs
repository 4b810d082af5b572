//! Binding of `neardup_core::index`: converts arguments, releases the GIL, maps errors.
//!
//! Locking: one `RwLock` per index (many readers, one writer). The lock is only ever waited on
//! with the GIL released and never held while taking the GIL, so threads cannot deadlock.

use std::ffi::CString;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use neardup_core::index::{self as core, Id, IdRef, Ids, Index as CoreIndex, Options, SyncPolicy};
use numpy::{
    IntoPyArray, PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{
    PyNotADirectoryError, PyRuntimeError, PyRuntimeWarning, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyIterator, PyList, PyString, PyTuple};

use crate::errors::to_py;

/// A bool where an int is wanted: refused (True would be the id, k or fingerprint 1).
fn refuse_bool(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<()> {
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an int, not bool"
        )));
    }
    Ok(())
}

fn to_id(obj: &Bound<'_, PyAny>) -> PyResult<Id> {
    refuse_bool(obj, "id")?;
    if let Ok(s) = obj.cast::<PyString>() {
        let text = s.to_cow().map_err(|_| {
            PyValueError::new_err(format!(
                "id must be valid Unicode (no lone surrogates), got {}",
                repr(obj)
            ))
        })?;
        Ok(Id::Str(text.into_owned()))
    } else if obj.is_instance_of::<PyInt>() || obj.hasattr("__index__")? {
        // (numpy's integer scalars too: what near_pairs and arrays of ids hand back)
        obj.extract::<i64>().map(Id::Int).map_err(|_| {
            PyValueError::new_err(format!(
                "id must be a signed 64-bit int or a str, got {}",
                repr(obj)
            ))
        })
    } else {
        Err(PyTypeError::new_err(format!(
            "id must be int or str, not {}",
            type_name(obj)
        )))
    }
}

fn id_to_py(py: Python<'_>, id: IdRef<'_>) -> PyResult<Py<PyAny>> {
    Ok(match id {
        IdRef::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        IdRef::Str(s) => PyString::new(py, s).into_any().unbind(),
    })
}

fn repr(obj: &Bound<'_, PyAny>) -> String {
    obj.repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<unprintable>".into())
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A fingerprint: an int in 0 .. 2**64 (numpy integer scalars too).
fn to_fp(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    refuse_bool(obj, "fingerprint")?;
    if let Ok(v) = obj.extract::<u64>() {
        return Ok(v);
    }
    if obj.is_instance_of::<PyInt>() || obj.hasattr("__index__").unwrap_or(false) {
        Err(PyValueError::new_err(format!(
            "fingerprint must be an unsigned 64-bit integer (0 <= fingerprint < 2**64), got {}",
            repr(obj)
        )))
    } else {
        Err(PyTypeError::new_err(format!(
            "fingerprint must be an int, not {}",
            type_name(obj)
        )))
    }
}

/// An int argument in `lo..=hi`: a ValueError naming `name` for one out of range (however
/// large), a TypeError for anything but an int.
pub(crate) fn int_arg(obj: &Bound<'_, PyAny>, name: &str, lo: i64, hi: i64) -> PyResult<i64> {
    refuse_bool(obj, name)?;
    if !(obj.is_instance_of::<PyInt>() || obj.hasattr("__index__")?) {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an int, not {}",
            type_name(obj)
        )));
    }
    match obj.extract::<i64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(PyValueError::new_err(format!(
            "{name} must be between {lo} and {hi}, got {}",
            repr(obj)
        ))),
    }
}

/// An optional number of seconds (None: not given), the error naming `name`.
fn seconds_arg(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<f64>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be a number of seconds, not bool"
        )));
    }
    match obj.extract::<f64>() {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(obj.py()) => {
            Err(PyValueError::new_err(format!(
                "{name} is too large for seconds, got {}",
                repr(obj)
            )))
        }
        Err(_) => Err(PyTypeError::new_err(format!(
            "{name} must be a number of seconds, not {}",
            type_name(obj)
        ))),
    }
}

/// An optional count (None: not given), the error naming `name`.
fn count_arg(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<usize>> {
    obj.filter(|o| !o.is_none())
        .map(|o| int_arg(o, name, 0, i64::MAX).map(|v| v as usize))
        .transpose()
}

fn k_arg(k: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u32>> {
    k.filter(|k| !k.is_none())
        .map(|k| int_arg(k, "k", 0, i64::from(core::MAX_K)).map(|k| k as u32))
        .transpose()
}

fn layout_arg(layout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u32>> {
    layout
        .filter(|l| !l.is_none())
        .map(|l| int_arg(l, "layout", 0, i64::from(u32::MAX)).map(|l| l as u32))
        .transpose()
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn dtype_str(arr: &Bound<'_, PyUntypedArray>) -> String {
    arr.dtype()
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// The values of a 1-D array, contiguous or not (a column of a 2-D array is a strided view).
fn values<T: numpy::Element + Copy>(a: &Bound<'_, PyArray1<T>>) -> PyResult<Vec<T>> {
    Ok(crate::near::contiguous(&a.try_readonly()?.as_array()).into_owned())
}

/// Fingerprints from a numpy integer array or any iterable of ints.
pub(crate) fn to_fps(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    if let Ok(arr) = obj.cast::<PyUntypedArray>() {
        if arr.ndim() != 1 {
            return Err(PyValueError::new_err(format!(
                "fingerprints must be a 1-D array, got {} dimensions",
                arr.ndim()
            )));
        }
        if let Ok(a) = obj.cast::<PyArray1<u64>>() {
            return values(a);
        }
        if let Ok(a) = obj.cast::<PyArray1<i64>>() {
            let v = values(a)?;
            if let Some((i, x)) = v.iter().enumerate().find(|(_, &x)| x < 0) {
                return Err(PyValueError::new_err(format!(
                    "fingerprints must be unsigned 64-bit integers, got {x} at position {i}"
                )));
            }
            return Ok(v.into_iter().map(|x| x as u64).collect());
        }
        let kind = arr.dtype().kind();
        if kind == b'u' || kind == b'i' {
            // Narrower integer arrays: widen through numpy, which keeps the values.
            let wide =
                obj.call_method1("astype", (if kind == b'u' { "uint64" } else { "int64" },))?;
            return to_fps(&wide);
        }
        return Err(PyTypeError::new_err(format!(
            "fingerprints must be an integer array (uint64 or non-negative int64), got dtype {}",
            dtype_str(arr)
        )));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "fingerprints must be a sequence of ints, not str",
        ));
    }
    items(obj, "fingerprints")?.map(|x| to_fp(&x?)).collect()
}

/// Ids of a batch: int arrays stay int arrays, lists may mix int and str.
enum BatchIds {
    Int(Vec<i64>),
    Any(Vec<Id>),
}

impl BatchIds {
    fn as_ids(&self) -> Ids<'_> {
        match self {
            BatchIds::Int(v) => Ids::Int(v),
            BatchIds::Any(v) => Ids::Any(v),
        }
    }
}

fn to_ids(obj: &Bound<'_, PyAny>) -> PyResult<BatchIds> {
    if let Ok(arr) = obj.cast::<PyUntypedArray>() {
        if arr.ndim() != 1 {
            return Err(PyValueError::new_err(format!(
                "ids must be a 1-D array, got {} dimensions",
                arr.ndim()
            )));
        }
        if let Ok(a) = obj.cast::<PyArray1<i64>>() {
            return Ok(BatchIds::Int(values(a)?));
        }
        if let Ok(a) = obj.cast::<PyArray1<u64>>() {
            let v = values(a)?;
            if let Some((i, x)) = v.iter().enumerate().find(|(_, &x)| x > i64::MAX as u64) {
                return Err(PyValueError::new_err(format!(
                    "ids must fit a signed 64-bit int, got {x} at position {i}"
                )));
            }
            return Ok(BatchIds::Int(v.into_iter().map(|x| x as i64).collect()));
        }
        let kind = arr.dtype().kind();
        if kind == b'i' || kind == b'u' {
            return to_ids(&obj.call_method1("astype", ("int64",))?);
        }
        if kind == b'f' || kind == b'c' || kind == b'b' {
            return Err(PyTypeError::new_err(format!(
                "ids must be ints or strs (an int64 array or a list), got an array of dtype {}",
                dtype_str(arr)
            )));
        }
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "ids must be a sequence of ids, not a str",
        ));
    }
    let ids: Vec<Id> = items(obj, "ids")?
        .map(|x| to_id(&x?))
        .collect::<PyResult<_>>()?;
    if ids.iter().all(|i| matches!(i, Id::Int(_))) {
        let ints = ids
            .into_iter()
            .filter_map(|i| if let Id::Int(v) = i { Some(v) } else { None })
            .collect();
        return Ok(BatchIds::Int(ints));
    }
    Ok(BatchIds::Any(ids))
}

/// A timestamp argument (seconds, [`seconds_arg`]); None is now.
fn timestamp_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<f64> {
    Ok(seconds_arg(obj, "timestamp")?.unwrap_or_else(now))
}

/// The timestamps of `n` items: one number for all, a sequence or float array of `n`, or None
/// (now); each checked as [`seconds_arg`] does, naming its place.
fn to_timestamps(obj: Option<&Bound<'_, PyAny>>, n: usize) -> PyResult<Vec<f64>> {
    let Some(o) = obj.filter(|o| !o.is_none()) else {
        return Ok(vec![now(); n]);
    };
    if let Ok(a) = o.cast::<PyArray1<f64>>() {
        return values(a);
    }
    if o.is_instance_of::<PyString>() || o.try_iter().is_err() {
        return Ok(vec![
            seconds_arg(Some(o), "timestamps")?.unwrap_or_else(now);
            n
        ]);
    }
    o.try_iter()?
        .enumerate()
        .map(|(i, x)| {
            seconds_arg(Some(&x?), &format!("timestamps[{i}]"))?.ok_or_else(|| {
                PyTypeError::new_err(format!("timestamps[{i}] must be a number, not None"))
            })
        })
        .collect()
}

/// The items of `obj` (an iterable), a TypeError naming `name` otherwise.
fn items<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyIterator>> {
    obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!("{name} must be a sequence, not {}", type_name(obj)))
    })
}

fn fingerprint_config_str(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => {
            if let Ok(s) = o.cast::<PyString>() {
                let text = s.to_cow()?.into_owned();
                return match serde_json::from_str::<serde_json::Value>(&text) {
                    Ok(serde_json::Value::Object(_)) => Ok(Some(text)),
                    _ => Err(PyValueError::new_err(format!(
                        "fingerprint_config must be a JSON object (or a dict), got {}",
                        repr(o)
                    ))),
                };
            }
            if o.is_instance_of::<PyDict>() {
                let json = o.py().import("json")?;
                let kw = PyDict::new(o.py());
                kw.set_item("sort_keys", true)?;
                return Ok(Some(json.call_method("dumps", (o,), Some(&kw))?.extract()?));
            }
            Err(PyTypeError::new_err(format!(
                "fingerprint_config must be a JSON str or a dict, not {}",
                type_name(o)
            )))
        }
    }
}

fn sync_policy(sync: &str, interval: f64) -> PyResult<SyncPolicy> {
    if !(interval.is_finite() && interval >= 0.0) {
        return Err(PyValueError::new_err(format!(
            "sync_interval must be a non-negative number of seconds, got {interval}"
        )));
    }
    match sync {
        "always" => Ok(SyncPolicy::Always),
        "group" => Ok(SyncPolicy::Group(Duration::from_secs_f64(interval))),
        "never" => Ok(SyncPolicy::Never),
        other => Err(PyValueError::new_err(format!(
            "sync must be one of \"always\", \"group\", \"never\", got {other:?}"
        ))),
    }
}

fn poisoned() -> PyErr {
    PyRuntimeError::new_err("index lock poisoned by an earlier panic")
}

fn closed() -> PyErr {
    PyValueError::new_err("operation on a closed Index")
}

/// Exact Hamming-distance index of 64-bit fingerprints with ids and timestamps.
///
/// ``query(fp, k)`` returns every stored item whose Hamming distance to ``fp`` is <= k
/// (inclusive), never one farther, with its distance, nearest first.
#[pyclass(module = "neardup._core", frozen)]
pub struct Index {
    inner: RwLock<Option<CoreIndex>>,
    path: Option<String>,
}

type Found = Vec<(Id, u32)>;

fn found_to_py(py: Python<'_>, found: Found) -> PyResult<Py<PyList>> {
    let items: Vec<Bound<'_, PyTuple>> = found
        .into_iter()
        .map(|(id, d)| -> PyResult<Bound<'_, PyTuple>> {
            let id = id_to_py(py, id.as_ref())?;
            PyTuple::new(py, [id, d.into_pyobject(py)?.into_any().unbind()])
        })
        .collect::<PyResult<_>>()?;
    Ok(PyList::new(py, items)?.unbind())
}

impl Index {
    /// Runs `f` under the read lock; waits for the lock only with the GIL released.
    fn read<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&CoreIndex) -> R + Send) -> PyResult<R> {
        match self.inner.try_read() {
            Ok(g) => {
                let g: RwLockReadGuard<'_, Option<CoreIndex>> = g;
                g.as_ref().map(f).ok_or_else(closed)
            }
            Err(std::sync::TryLockError::Poisoned(_)) => Err(poisoned()),
            Err(std::sync::TryLockError::WouldBlock) => py
                .detach(|| self.inner.read().map_err(|_| ()).map(|g| g.as_ref().map(f)))
                .map_err(|_| poisoned())?
                .ok_or_else(closed),
        }
    }

    /// Runs `f` under the write lock with the GIL released; what the index has to say
    /// afterwards (a checkpoint that failed after the write) is raised as RuntimeWarnings.
    fn write<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CoreIndex) -> R + Send,
    ) -> PyResult<R> {
        let (out, warnings) = py
            .detach(|| {
                let mut g: RwLockWriteGuard<'_, Option<CoreIndex>> =
                    self.inner.write().map_err(|_| ())?;
                Ok(g.as_mut().map(|idx| (f(idx), idx.take_warnings())))
            })
            .map_err(|_: ()| poisoned())?
            .ok_or_else(closed)?;
        warn_all(py, warnings)?;
        Ok(out)
    }

    /// Like `write`, but without releasing the GIL for a lock that is free (single adds in
    /// memory). A durable index always releases it: the write waits for an fsync.
    fn write_fast<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CoreIndex) -> R + Send,
    ) -> PyResult<R> {
        if self.path.is_some() {
            return self.write(py, f);
        }
        match self.inner.try_write() {
            Ok(mut g) => g.as_mut().map(f).ok_or_else(closed),
            Err(std::sync::TryLockError::Poisoned(_)) => Err(poisoned()),
            Err(std::sync::TryLockError::WouldBlock) => self.write(py, f),
        }
    }
}

/// Each of `warnings` as a RuntimeWarning.
fn warn_all(py: Python<'_>, warnings: Vec<String>) -> PyResult<()> {
    for w in warnings {
        let msg = CString::new(w.replace('\0', " ")).unwrap_or_default();
        PyErr::warn(py, &py.get_type::<PyRuntimeWarning>(), &msg, 1)?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn options(
    k: u32,
    layout: Option<u32>,
    retention: Option<f64>,
    segment_span: Option<f64>,
    capacity: Option<usize>,
) -> Options {
    Options {
        k,
        layout,
        segment_span,
        retention,
        capacity,
    }
}

#[pymethods]
impl Index {
    #[new]
    #[pyo3(signature = (k = None, *, layout = None, retention = None, segment_span = None, capacity = None),
           text_signature = "(k=3, *, layout=None, retention=None, segment_span=None, capacity=None)")]
    fn new(
        k: Option<&Bound<'_, PyAny>>,
        layout: Option<&Bound<'_, PyAny>>,
        retention: Option<&Bound<'_, PyAny>>,
        segment_span: Option<&Bound<'_, PyAny>>,
        capacity: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let k = k_arg(k)?.unwrap_or(3);
        let layout = layout_arg(layout)?;
        let retention = seconds_arg(retention, "retention")?;
        let segment_span = seconds_arg(segment_span, "segment_span")?;
        let capacity = count_arg(capacity, "capacity")?;
        let idx =
            CoreIndex::new(options(k, layout, retention, segment_span, capacity)).map_err(to_py)?;
        Ok(Index {
            inner: RwLock::new(Some(idx)),
            path: None,
        })
    }

    /// Opens (creating if needed) a durable index in directory ``path``.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (path, k = None, *, layout = None, retention = None, segment_span = None,
                        fingerprint_config = None, sync = "always", sync_interval = None, capacity = None))]
    fn open(
        py: Python<'_>,
        path: std::path::PathBuf,
        k: Option<&Bound<'_, PyAny>>,
        layout: Option<&Bound<'_, PyAny>>,
        retention: Option<&Bound<'_, PyAny>>,
        segment_span: Option<&Bound<'_, PyAny>>,
        fingerprint_config: Option<&Bound<'_, PyAny>>,
        sync: &str,
        sync_interval: Option<&Bound<'_, PyAny>>,
        capacity: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let k = k_arg(k)?;
        let layout = layout_arg(layout)?;
        let retention = seconds_arg(retention, "retention")?;
        let segment_span = seconds_arg(segment_span, "segment_span")?;
        let capacity = count_arg(capacity, "capacity")?;
        let interval = seconds_arg(sync_interval, "sync_interval")?;
        let policy = sync_policy(sync, interval.unwrap_or(0.05))?;
        if path.exists() && !path.is_dir() {
            return Err(PyNotADirectoryError::new_err(format!(
                "index path {} is a file; Index.open takes a directory",
                path.display()
            )));
        }
        let fpc = fingerprint_config_str(fingerprint_config)?;
        let o = options(k.unwrap_or(3), layout, retention, segment_span, capacity);
        let dir = path.clone();
        let mut idx = py
            .detach(|| CoreIndex::open(&dir, k, o, fpc.as_deref(), policy))
            .map_err(to_py)?;
        warn_all(py, idx.take_warnings())?;
        Ok(Index {
            inner: RwLock::new(Some(idx)),
            path: Some(path.to_string_lossy().into_owned()),
        })
    }

    /// The default k of queries.
    #[getter]
    fn k(&self, py: Python<'_>) -> PyResult<u32> {
        self.read(py, |i| i.k())
    }

    /// Number of blocks the fingerprints are cut into (one table each).
    #[getter]
    fn layout(&self, py: Python<'_>) -> PyResult<u32> {
        self.read(py, |i| i.layout().num_blocks())
    }

    #[getter]
    fn retention(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.read(py, |i| i.retention())
    }

    #[getter]
    fn segment_span(&self, py: Python<'_>) -> PyResult<f64> {
        self.read(py, |i| i.segment_span())
    }

    #[getter]
    fn fingerprint_config(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.read(py, |i| i.fingerprint_config().map(str::to_owned))
    }

    #[getter]
    fn path(&self) -> Option<String> {
        self.path.clone()
    }

    /// Stores ``fingerprint`` (an unsigned 64-bit int) under ``id`` (an int in the signed
    /// 64-bit range, or a str) with ``timestamp`` (float seconds since the epoch; None: now).
    /// An ``id`` already stored is replaced: its old fingerprint is never found again. Raises
    /// TypeError / ValueError naming a bad argument, ValueError once the index is closed.
    #[pyo3(signature = (id, fingerprint, timestamp = None))]
    fn add(
        &self,
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        fingerprint: &Bound<'_, PyAny>,
        timestamp: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let id = to_id(id)?;
        let fp = to_fp(fingerprint)?;
        let ts = timestamp_arg(timestamp)?;
        self.write_fast(py, |i| i.add(id.as_ref(), fp, ts))?
            .map_err(to_py)
    }

    /// :meth:`add` of many items in one call: ``ids`` (a sequence, or a numpy int64/uint64
    /// array), ``fingerprints`` (the same length, numpy uint64 is read without a copy) and
    /// ``timestamps`` (None: now; one float for all; or one per item). Checked whole before any
    /// item is stored; a later duplicate id in the call wins.
    #[pyo3(signature = (ids, fingerprints, timestamps = None))]
    fn add_many(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
        fingerprints: &Bound<'_, PyAny>,
        timestamps: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let ids = to_ids(ids)?;
        let fps = to_fps(fingerprints)?;
        let ts = to_timestamps(timestamps, fps.len())?;
        self.write(py, |i| i.add_many(ids.as_ids(), &fps, &ts))?
            .map_err(to_py)
    }

    /// Every stored item whose Hamming distance to ``fingerprint`` is <= ``k`` (inclusive),
    /// never one farther, as ``[(id, distance), ...]``, nearest first (ties: the older timestamp,
    /// then insertion order). ``k`` is 0..64; None: the index's own k. Exact: no false negatives,
    /// no false positives, whatever k (pigeonhole blocks and multi-index hashing).
    #[pyo3(signature = (fingerprint, k = None))]
    fn query(
        &self,
        py: Python<'_>,
        fingerprint: &Bound<'_, PyAny>,
        k: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyList>> {
        let fp = to_fp(fingerprint)?;
        let k = k_arg(k)?;
        let found = self.read(py, |i| i.query(fp, k))?.map_err(to_py)?;
        found_to_py(py, found)
    }

    /// :meth:`query` of each fingerprint (a sequence or numpy uint64 array), one list per
    /// fingerprint in order; the lookups run on every core with the GIL released.
    #[pyo3(signature = (fingerprints, k = None))]
    fn query_many(
        &self,
        py: Python<'_>,
        fingerprints: &Bound<'_, PyAny>,
        k: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyList>> {
        let fps = to_fps(fingerprints)?;
        let k = k_arg(k)?;
        let all = py
            .detach(|| {
                let g = self.inner.read().map_err(|_| poisoned_msg())?;
                g.as_ref()
                    .map(|i| i.query_many(&fps, k))
                    .ok_or_else(closed_msg)
            })
            .map_err(PyValueError::new_err)?
            .map_err(to_py)?;
        // Hundreds of thousands of new lists and tuples would start the cyclic garbage
        // collector again and again (they hold no cycles): pause it while they are built.
        let gc = py.import("gc")?;
        let was_enabled = gc.call_method0("isenabled")?.is_truthy()?;
        if was_enabled && all.len() >= 1024 {
            gc.call_method0("disable")?;
        }
        let lists: PyResult<Vec<Py<PyList>>> =
            all.into_iter().map(|f| found_to_py(py, f)).collect();
        if was_enabled {
            gc.call_method0("enable")?;
        }
        Ok(PyList::new(py, lists?)?.unbind())
    }

    /// Atomically: the stored items within ``k`` of ``fingerprint`` (as :meth:`query`), and
    /// when there are none, :meth:`add` of ``id``. Returns what was found: an empty list means
    /// the item was added. Of near fingerprints sent at once from many threads, exactly one is
    /// added.
    #[pyo3(signature = (id, fingerprint, timestamp = None, k = None))]
    fn check_and_add(
        &self,
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        fingerprint: &Bound<'_, PyAny>,
        timestamp: Option<&Bound<'_, PyAny>>,
        k: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyList>> {
        let id = to_id(id)?;
        let fp = to_fp(fingerprint)?;
        let k = k_arg(k)?;
        let ts = timestamp_arg(timestamp)?;
        let found = self
            .write_fast(py, |i| i.check_and_add(id.as_ref(), fp, ts, k))?
            .map_err(to_py)?;
        found_to_py(py, found)
    }

    /// Removes ``id``; KeyError when it is not stored.
    fn remove(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<()> {
        let id = to_id(id)?;
        self.write_fast(py, |i| i.remove(id.as_ref()))?
            .map_err(to_py)
    }

    /// ``(fingerprint, timestamp)`` of ``id``; KeyError when it is not stored.
    fn get(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<(u64, f64)> {
        let key = to_id(id)?;
        self.read(py, |i| i.get(key.as_ref()))?
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(id.clone().unbind()))
    }

    /// Whether ``id`` is stored (False for a value that cannot be an id).
    fn __contains__(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(id) = to_id(id) else { return Ok(false) };
        self.read(py, |i| i.contains(id.as_ref()))
    }

    /// Number of items stored.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.read(py, |i| i.len())
    }

    /// Removes every item with timestamp < ``before`` (None: apply the retention window now).
    #[pyo3(signature = (before = None))]
    fn expire(&self, py: Python<'_>, before: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
        match seconds_arg(before, "before")? {
            Some(b) => self.write(py, |i| i.expire(b))?.map_err(to_py),
            None => {
                let has = self.read(py, |i| i.retention().is_some())?;
                if !has {
                    return Err(PyValueError::new_err(
                        "expire() needs before=<timestamp> when the index has no retention window",
                    ));
                }
                self.write(py, |i| i.expire_retention())?.map_err(to_py)
            }
        }
    }

    /// Every unordered pair of live items within k, once: ``(ids_a, ids_b, distances)``.
    #[pyo3(signature = (k = None))]
    fn near_pairs<'py>(
        &self,
        py: Python<'py>,
        k: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let k = k_arg(k)?;
        enum Out {
            Int(Vec<i64>, Vec<i64>, Vec<i64>),
            Any(Vec<Id>, Vec<Id>, Vec<i64>),
        }
        let out = py
            .detach(|| -> Result<neardup_core::Result<Out>, String> {
                let g = self.inner.read().map_err(|_| poisoned_msg())?;
                let i = g.as_ref().ok_or_else(closed_msg)?;
                Ok(i.near_pairs_locs(k).map(|pairs| {
                    let d: Vec<i64> = pairs.iter().map(|p| i64::from(p.2)).collect();
                    if i.all_int_ids() {
                        let int = |l| if let IdRef::Int(v) = i.id_at(l) { v } else { 0 };
                        Out::Int(
                            pairs.iter().map(|p| int(p.0)).collect(),
                            pairs.iter().map(|p| int(p.1)).collect(),
                            d,
                        )
                    } else {
                        Out::Any(
                            pairs.iter().map(|p| i.id_at(p.0).to_owned()).collect(),
                            pairs.iter().map(|p| i.id_at(p.1).to_owned()).collect(),
                            d,
                        )
                    }
                }))
            })
            .map_err(PyValueError::new_err)?
            .map_err(to_py)?;
        match out {
            Out::Int(a, b, d) => PyTuple::new(
                py,
                [
                    a.into_pyarray(py).into_any(),
                    b.into_pyarray(py).into_any(),
                    d.into_pyarray(py).into_any(),
                ],
            ),
            Out::Any(a, b, d) => {
                let la = PyList::new(
                    py,
                    a.iter()
                        .map(|x| id_to_py(py, x.as_ref()))
                        .collect::<PyResult<Vec<_>>>()?,
                )?;
                let lb = PyList::new(
                    py,
                    b.iter()
                        .map(|x| id_to_py(py, x.as_ref()))
                        .collect::<PyResult<Vec<_>>>()?,
                )?;
                PyTuple::new(
                    py,
                    [la.into_any(), lb.into_any(), d.into_pyarray(py).into_any()],
                )
            }
        }
    }

    /// Connected components of near pairs (union-find), at least two members each.
    #[pyo3(signature = (k = None))]
    fn clusters(&self, py: Python<'_>, k: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyList>> {
        let k = k_arg(k)?;
        let groups = py
            .detach(|| -> Result<neardup_core::Result<Vec<Vec<Id>>>, String> {
                let g = self.inner.read().map_err(|_| poisoned_msg())?;
                let i = g.as_ref().ok_or_else(closed_msg)?;
                Ok(i.clusters_locs(k).map(|cs| {
                    cs.into_iter()
                        .map(|c| c.into_iter().map(|l| i.id_at(l).to_owned()).collect())
                        .collect()
                }))
            })
            .map_err(PyValueError::new_err)?
            .map_err(to_py)?;
        let lists: Vec<Bound<'_, PyList>> = groups
            .into_iter()
            .map(|c| {
                PyList::new(
                    py,
                    c.iter()
                        .map(|x| id_to_py(py, x.as_ref()))
                        .collect::<PyResult<Vec<_>>>()?,
                )
            })
            .collect::<PyResult<_>>()?;
        Ok(PyList::new(py, lists)?.unbind())
    }

    /// Counts and sizes: count, memory_bytes, bytes_per_item, segments, runs, rows, blocks, k,
    /// wal_bytes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.read(py, |i| i.stats())?;
        let d = PyDict::new(py);
        d.set_item("count", s.count)?;
        d.set_item("memory_bytes", s.memory_bytes)?;
        d.set_item(
            "bytes_per_item",
            if s.count > 0 {
                s.memory_bytes as f64 / s.count as f64
            } else {
                0.0
            },
        )?;
        d.set_item("segments", s.segments)?;
        d.set_item("runs", s.runs)?;
        d.set_item("rows", s.rows)?;
        d.set_item("blocks", s.blocks)?;
        d.set_item("k", s.k)?;
        d.set_item("wal_bytes", s.wal_bytes)?;
        Ok(d)
    }

    /// Makes every write so far durable (fsync), whatever the sync policy.
    /// The fsync runs after the lock is released, so queries and writes do not wait for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let handle = self.write(py, |i| i.flush_handle())?.map_err(to_py)?;
        match handle {
            Some(f) => py
                .detach(|| f.sync_data().map_err(neardup_core::Error::from))
                .map_err(to_py),
            None => Ok(()),
        }
    }

    /// Writes a snapshot and starts an empty write-ahead log (faster reopen).
    fn checkpoint(&self, py: Python<'_>) -> PyResult<()> {
        self.write(py, |i| i.checkpoint())?.map_err(to_py)
    }

    /// Checkpoints, releases the directory; later calls raise ValueError. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| -> Result<neardup_core::Result<()>, ()> {
            let mut g = self.inner.write().map_err(|_| ())?;
            let r = match g.as_mut() {
                Some(i) => i.close(),
                None => Ok(()),
            };
            if r.is_ok() {
                *g = None;
            }
            Ok(r)
        })
        .map_err(|_| poisoned())?
        .map_err(to_py)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.read().map(|g| g.is_none()).unwrap_or(true)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match self.read(py, |i| (i.len(), i.k(), i.layout().num_blocks())) {
            Ok((n, k, m)) => match &self.path {
                Some(p) => format!("Index.open({p:?}, k={k}) with {n} items, {m} blocks"),
                None => format!("Index(k={k}) with {n} items, {m} blocks"),
            },
            Err(_) => "Index (closed)".into(),
        }
    }
}

fn poisoned_msg() -> String {
    "index lock poisoned by an earlier panic".into()
}

fn closed_msg() -> String {
    "operation on a closed Index".into()
}

/// Turns the core's thread pool off for this process (every later batch call runs on the
/// calling thread). Not registered as a fork hook: the core's pool is rebuilt in a forked child.
#[pyfunction]
fn _disable_parallelism_after_fork() {
    core::set_parallel(false);
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Index>()?;
    m.add_function(wrap_pyfunction!(_disable_parallelism_after_fork, m)?)?;
    Ok(())
}
