//! Binding of `neardup_core::plain`: the text both stages of a dedup policy see.

use pyo3::prelude::*;

/// Texts longer than this (bytes) are normalised with the GIL released.
const DETACH_BYTES: usize = 1 << 16;

/// NFKC, lower case, whitespace runs collapsed to one space, stripped
/// (`neardup.verify.normalise`).
#[pyfunction]
fn _normalise(py: Python<'_>, text: &str) -> String {
    if text.len() > DETACH_BYTES {
        py.detach(|| neardup_core::plain::normalise(text))
    } else {
        neardup_core::plain::normalise(text)
    }
}

/// `_normalise` of each text (GIL released; both cores for large batches).
#[pyfunction]
fn _normalise_many(py: Python<'_>, texts: Vec<String>) -> Vec<String> {
    py.detach(|| neardup_core::plain::normalise_many(&texts))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_normalise, m)?)?;
    m.add_function(wrap_pyfunction!(_normalise_many, m)?)?;
    Ok(())
}
