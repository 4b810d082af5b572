//! Main-text extraction of HTML pages: `main_text`, `visible_text` and their batch forms.

use neardup_core::html as core;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// Pages at least this long are read with the GIL released.
const DETACH_MIN_BYTES: usize = 16 * 1024;

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// The UTF-8 text of a str; lone surrogates (not encodable) become U+FFFD.
fn page_text(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    let s = obj
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be str, got {}", type_name(obj))))?;
    match s.to_cow() {
        Ok(c) => Ok(c.into_owned()),
        Err(_) => {
            // One U+FFFD per lone surrogate (UTF-8 lossy decoding would give three).
            let raw = s.call_method1("encode", ("utf-16-le", "surrogatepass"))?;
            let bytes = raw.cast::<PyBytes>()?.as_bytes();
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            Ok(String::from_utf16_lossy(&units))
        }
    }
}

fn pages_texts(pages: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<String>> {
    if pages.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an iterable of str, not a single str"
        )));
    }
    let iter = pages.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{name} must be an iterable of str, not {}",
            type_name(pages)
        ))
    })?;
    let mut out = Vec::new();
    for item in iter {
        out.push(page_text(&item?, &format!("{name}[{}]", out.len()))?);
    }
    Ok(out)
}

fn check_density(max_link_density: f64) -> PyResult<f64> {
    if max_link_density.is_nan() || max_link_density < 0.0 {
        return Err(PyValueError::new_err(format!(
            "max_link_density must be a number >= 0, got {max_link_density}"
        )));
    }
    Ok(max_link_density)
}

/// The main visible text of an HTML page, one line per block, without navigation, footers and
/// link lists.
#[pyfunction]
// 0.5 is core::DEFAULT_MAX_LINK_DENSITY, written out so the text signature shows it.
#[pyo3(signature = (markup, max_link_density = 0.5))]
fn main_text(py: Python<'_>, markup: &Bound<'_, PyAny>, max_link_density: f64) -> PyResult<String> {
    let d = check_density(max_link_density)?;
    let text = page_text(markup, "markup")?;
    Ok(if text.len() >= DETACH_MIN_BYTES {
        py.detach(|| core::main_text(&text, d))
    } else {
        core::main_text(&text, d)
    })
}

/// All visible text of an HTML page, one line per block (boilerplate included).
#[pyfunction]
fn visible_text(py: Python<'_>, markup: &Bound<'_, PyAny>) -> PyResult<String> {
    let text = page_text(markup, "markup")?;
    Ok(if text.len() >= DETACH_MIN_BYTES {
        py.detach(|| core::visible_text(&text))
    } else {
        core::visible_text(&text)
    })
}

/// `main_text` of every page of an iterable, in order (GIL released, parallel when large).
#[pyfunction]
#[pyo3(signature = (markups, max_link_density = 0.5))]
fn main_text_many(
    py: Python<'_>,
    markups: &Bound<'_, PyAny>,
    max_link_density: f64,
) -> PyResult<Vec<String>> {
    let d = check_density(max_link_density)?;
    let pages = pages_texts(markups, "markups")?;
    Ok(py.detach(|| core::main_text_many(&pages, d)))
}

/// Of every page of an iterable, in order, whether `main_text` fell back to the whole visible
/// text because the extraction left nothing (GIL released, parallel when large).
#[pyfunction]
#[pyo3(signature = (markups, max_link_density = 0.5))]
fn main_text_fell_back_many(
    py: Python<'_>,
    markups: &Bound<'_, PyAny>,
    max_link_density: f64,
) -> PyResult<Vec<bool>> {
    let d = check_density(max_link_density)?;
    let pages = pages_texts(markups, "markups")?;
    Ok(py.detach(|| core::fell_back_many(&pages, d)))
}

/// `visible_text` of every page of an iterable, in order (GIL released, parallel when large).
#[pyfunction]
fn visible_text_many(py: Python<'_>, markups: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let pages = pages_texts(markups, "markups")?;
    Ok(py.detach(|| core::visible_text_many(&pages)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(main_text, m)?)?;
    m.add_function(wrap_pyfunction!(visible_text, m)?)?;
    m.add_function(wrap_pyfunction!(main_text_many, m)?)?;
    m.add_function(wrap_pyfunction!(visible_text_many, m)?)?;
    m.add_function(wrap_pyfunction!(main_text_fell_back_many, m)?)?;
    Ok(())
}
