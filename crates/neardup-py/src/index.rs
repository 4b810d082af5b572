//! Binding of `neardup_core::index`. PLACEHOLDER surface for issue #3.

use std::sync::RwLock;

use neardup_core::index::{Id, Index as CoreIndex};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString};

use crate::errors::to_py;

fn to_id(obj: &Bound<'_, PyAny>) -> PyResult<Id> {
    if obj.is_instance_of::<PyString>() {
        Ok(Id::Str(obj.extract()?))
    } else if obj.is_instance_of::<PyInt>() {
        Ok(Id::Int(obj.extract()?))
    } else {
        Err(PyTypeError::new_err(format!("id must be int or str, not {}", obj.get_type().name()?)))
    }
}

fn from_id(py: Python<'_>, id: Id) -> PyResult<Py<PyAny>> {
    Ok(match id {
        Id::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Id::Str(s) => s.into_pyobject(py)?.into_any().unbind(),
    })
}

#[pyclass(module = "neardup._core", frozen)]
pub struct Index {
    inner: RwLock<CoreIndex>,
}

impl Index {
    fn read(&self) -> PyResult<std::sync::RwLockReadGuard<'_, CoreIndex>> {
        self.inner.read().map_err(|_| PyRuntimeError::new_err("index lock poisoned"))
    }
    fn write(&self) -> PyResult<std::sync::RwLockWriteGuard<'_, CoreIndex>> {
        self.inner.write().map_err(|_| PyRuntimeError::new_err("index lock poisoned"))
    }
}

#[pymethods]
impl Index {
    #[new]
    #[pyo3(signature = (k = 3))]
    fn new(k: u32) -> PyResult<Self> {
        Ok(Index { inner: RwLock::new(CoreIndex::new(k).map_err(to_py)?) })
    }

    #[getter]
    fn k(&self) -> PyResult<u32> {
        Ok(self.read()?.k())
    }

    #[pyo3(signature = (id, fingerprint, timestamp = None))]
    fn add(&self, id: &Bound<'_, PyAny>, fingerprint: u64, timestamp: Option<f64>) -> PyResult<()> {
        let id = to_id(id)?;
        self.write()?.add(id, fingerprint, timestamp.unwrap_or(0.0));
        Ok(())
    }

    #[pyo3(signature = (fingerprint, k = None))]
    fn query(&self, py: Python<'_>, fingerprint: u64, k: Option<u32>) -> PyResult<Vec<(Py<PyAny>, u32)>> {
        let hits = self.read()?.query(fingerprint, k).map_err(to_py)?;
        hits.into_iter().map(|(id, d)| Ok((from_id(py, id)?, d))).collect()
    }

    fn remove(&self, id: &Bound<'_, PyAny>) -> PyResult<()> {
        let id = to_id(id)?;
        self.write()?.remove(&id).map_err(to_py)
    }

    fn __contains__(&self, id: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.read()?.contains(&to_id(id)?))
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.read()?.len())
    }

    fn expire(&self, before: f64) -> PyResult<usize> {
        Ok(self.write()?.expire(before))
    }

    #[pyo3(signature = (k = None))]
    fn near_pairs(&self, py: Python<'_>, k: Option<u32>) -> PyResult<Vec<(Py<PyAny>, Py<PyAny>, u32)>> {
        let pairs = self.read()?.near_pairs(k).map_err(to_py)?;
        pairs.into_iter().map(|(a, b, d)| Ok((from_id(py, a)?, from_id(py, b)?, d))).collect()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Index>()?;
    Ok(())
}
