//! Binding of `neardup_core::batch_dedup`: the small-batch helpers of the online
//! deduplicator (sketches, Jaccard of two sketches, near pairs inside a batch).

use std::borrow::Cow;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::errors::to_py;

fn shingle_width(n: i64) -> PyResult<usize> {
    usize::try_from(n).map_err(|_| {
        to_py(neardup_core::Error::InvalidArgument(format!(
            "shingle must be an int in 1..{}, got {n}",
            neardup_core::batch_dedup::MAX_SHINGLE
        )))
    })
}

/// The Jaccard sketch of a normalised text: sorted distinct 32-bit hashes of its character
/// n-grams, equal to `neardup.verify.sketch(norm, shingle).hashes`.
#[pyfunction]
fn _sketch<'py>(py: Python<'py>, norm: &str, shingle: i64) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let n = shingle_width(shingle)?;
    let out = neardup_core::batch_dedup::sketch(norm, n).map_err(to_py)?;
    Ok(owned_array(py, &out))
}

/// `_sketch` of each text (GIL released while hashing).
#[pyfunction]
fn _sketch_many<'py>(
    py: Python<'py>,
    norms: Vec<String>,
    shingle: i64,
) -> PyResult<Bound<'py, PyList>> {
    let n = shingle_width(shingle)?;
    let sketches = py
        .detach(|| {
            norms
                .iter()
                .map(|t| neardup_core::batch_dedup::sketch(t, n))
                .collect::<neardup_core::Result<Vec<_>>>()
        })
        .map_err(to_py)?;
    PyList::new(py, sketches.iter().map(|s| owned_array(py, s)))
}

/// `(offsets, hashes)` of packed sketches.
type Packed<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u32>>);

/// The sketches of many normalised texts packed as `(offsets, hashes)` (int64, uint32): text
/// `i` owns `hashes[offsets[i]:offsets[i + 1]]`. GIL released; both cores for large batches.
#[pyfunction]
fn _sketch_packed<'py>(py: Python<'py>, norms: Vec<String>, shingle: i64) -> PyResult<Packed<'py>> {
    let n = shingle_width(shingle)?;
    let (offsets, hashes) = py
        .detach(|| neardup_core::batch_dedup::sketch_packed(&norms, n))
        .map_err(to_py)?;
    Ok((offsets.into_pyarray(py), hashes.into_pyarray(py)))
}

/// A numpy copy of `v` that numpy owns. `into_pyarray` would keep the Vec alive in a container
/// object that the garbage collector tracks: a service caching 200,000 sketches then walks
/// 200,000 more objects in every full collection (pauses of tens of ms); a copy of a sketch
/// (a few hundred bytes) costs far less.
fn owned_array<'py>(py: Python<'py>, v: &[u32]) -> Bound<'py, PyArray1<u32>> {
    PyArray1::from_slice(py, v)
}

fn sketch_arg<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<PyReadonlyArray1<'py, u32>> {
    obj.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "{name} must be a 1-D numpy uint32 array (a sketch)"
        ))
    })
}

/// The elements of a sketch array: borrowed when contiguous, else copied.
fn sketch_values<'a>(a: &'a PyReadonlyArray1<'_, u32>) -> Cow<'a, [u32]> {
    match a.as_slice() {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(a.as_array().iter().copied().collect()),
    }
}

/// Jaccard similarity of two sketches (sorted distinct uint32 arrays; two empty ones: 1.0).
#[pyfunction]
fn _sketch_jaccard(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<f64> {
    let (a, b) = (sketch_arg(a, "a")?, sketch_arg(b, "b")?);
    Ok(neardup_core::verify::jaccard_sorted(
        &sketch_values(&a),
        &sketch_values(&b),
    ))
}

/// For each row `i`, every earlier row `j < i` within `radii[i]` bits: a list of
/// `(i, j, distance)`, in order of `i` then `j`.
#[pyfunction]
fn _earlier_within(fingerprints: Vec<u64>, radii: Vec<u32>) -> PyResult<Vec<(usize, usize, u32)>> {
    neardup_core::batch_dedup::earlier_within(&fingerprints, &radii).map_err(to_py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_sketch, m)?)?;
    m.add_function(wrap_pyfunction!(_sketch_many, m)?)?;
    m.add_function(wrap_pyfunction!(_sketch_packed, m)?)?;
    m.add_function(wrap_pyfunction!(_sketch_jaccard, m)?)?;
    m.add_function(wrap_pyfunction!(_earlier_within, m)?)?;
    Ok(())
}
