//! Binding of `neardup_core::fingerprint`. PLACEHOLDER surface for issue #2.

use neardup_core::fingerprint::{Config, Fingerprinter as CoreFingerprinter};
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

use crate::errors::to_py;

#[pyclass(module = "neardup._core", frozen)]
pub struct Fingerprinter {
    inner: CoreFingerprinter,
}

#[pymethods]
impl Fingerprinter {
    #[new]
    #[pyo3(signature = (preset = "default"))]
    fn new(preset: &str) -> PyResult<Self> {
        let config = Config::preset(preset).map_err(to_py)?;
        Ok(Fingerprinter { inner: CoreFingerprinter::new(config) })
    }

    fn fingerprint(&self, text: &str) -> u64 {
        self.inner.fingerprint(text)
    }

    fn fingerprint_many<'py>(&self, py: Python<'py>, texts: Vec<String>) -> Bound<'py, PyArray1<u64>> {
        let out: Vec<u64> = py.detach(|| texts.iter().map(|t| self.inner.fingerprint(t)).collect());
        out.into_pyarray(py)
    }
}

#[pyfunction]
fn hamming(a: u64, b: u64) -> u32 {
    neardup_core::hamming::hamming(a, b)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Fingerprinter>()?;
    m.add_function(wrap_pyfunction!(hamming, m)?)?;
    Ok(())
}
