//! Binding of `neardup_core::verify`: the batch Jaccard of sketches.

use std::borrow::Cow;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::errors::to_py;

pub(crate) fn slice<'a, T: numpy::Element + Copy>(
    arr: &'a PyReadonlyArray1<'_, T>,
) -> Cow<'a, [T]> {
    match arr.as_slice() {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(arr.as_array().iter().copied().collect()),
    }
}

pub(crate) fn array<'py, T: numpy::Element>(
    obj: &Bound<'py, PyAny>,
    name: &str,
    dtype: &str,
) -> PyResult<PyReadonlyArray1<'py, T>> {
    obj.extract()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a 1-D numpy {dtype} array")))
}

/// Extracts the arrays of a batch of sketch pairs, then runs `f` on them with the GIL released.
fn with_pairs<'py>(
    py: Python<'py>,
    (hashes, offsets, a, b): PairArgs<'_, 'py>,
    f: impl Fn(&[u32], &[i64], &[i64], &[i64]) -> neardup_core::Result<Vec<f64>> + Send + Sync,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let hashes = array::<u32>(hashes, "hashes", "uint32")?;
    let offsets = array::<i64>(offsets, "offsets", "int64")?;
    let a = array::<i64>(a, "a", "int64")?;
    let b = array::<i64>(b, "b", "int64")?;
    let (h, o, x, y) = (slice(&hashes), slice(&offsets), slice(&a), slice(&b));
    let out = py.detach(|| f(&h, &o, &x, &y)).map_err(to_py)?;
    Ok(out.into_pyarray(py))
}

/// `(hashes, offsets, a, b)` as passed from Python.
type PairArgs<'a, 'py> = (
    &'a Bound<'py, PyAny>,
    &'a Bound<'py, PyAny>,
    &'a Bound<'py, PyAny>,
    &'a Bound<'py, PyAny>,
);

/// Jaccard similarity of the sketches of rows `a[p]` and `b[p]` for every pair `p`; row `r`
/// owns `hashes[offsets[r]:offsets[r + 1]]` (sorted, distinct). GIL released; both cores for
/// large batches.
#[pyfunction]
fn sketch_jaccard_pairs<'py>(
    py: Python<'py>,
    hashes: &Bound<'py, PyAny>,
    offsets: &Bound<'py, PyAny>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    with_pairs(
        py,
        (hashes, offsets, a, b),
        neardup_core::verify::jaccard_pairs,
    )
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sketch_jaccard_pairs, m)?)?;
    Ok(())
}
