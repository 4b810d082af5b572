//! Binding of `neardup_core::plain`: the text both stages of a dedup policy see.

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::fingerprint::utf16_units;

/// Texts longer than this (bytes) are normalised with the GIL released.
const DETACH_BYTES: usize = 1 << 16;

/// A Python `str` as Rust text. A lone surrogate (not Unicode: half of an emoji from a JSON
/// `\ud83d` escape, say) becomes U+FFFD, so such text is normalised rather than refused.
pub(crate) fn text_of<'a>(s: &'a Bound<'_, PyString>) -> PyResult<Cow<'a, str>> {
    match s.to_cow() {
        Ok(c) => Ok(c),
        Err(_) => Ok(Cow::Owned(String::from_utf16_lossy(&utf16_units(s)?))),
    }
}

/// NFKC, lower case, whitespace runs collapsed to one space, stripped
/// (`neardup.verify.normalise`).
#[pyfunction]
fn _normalise(py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<String> {
    let text = text_of(text)?;
    Ok(if text.len() > DETACH_BYTES {
        py.detach(|| neardup_core::plain::normalise(&text))
    } else {
        neardup_core::plain::normalise(&text)
    })
}

/// `_normalise` of each text (GIL released; both cores for large batches).
#[pyfunction]
fn _normalise_many(py: Python<'_>, texts: Vec<Bound<'_, PyString>>) -> PyResult<Vec<String>> {
    let texts = texts.iter().map(text_of).collect::<PyResult<Vec<_>>>()?;
    Ok(py.detach(|| neardup_core::plain::normalise_many(&texts)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_normalise, m)?)?;
    m.add_function(wrap_pyfunction!(_normalise_many, m)?)?;
    Ok(())
}
