//! Binding of `neardup_core::records`: the client-side hot loop of the Redis backend.

use numpy::PyReadonlyArray1;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::to_py;
use neardup_core::records;

/// `[(ref, fingerprint, distance)]` of the 16-byte records of `blob` within `k` of `fp`, each
/// ref once, in the order they lie.
#[pyfunction]
fn _near_records(blob: &[u8], fp: u64, k: u32) -> PyResult<Vec<(u64, u64, u32)>> {
    records::near_records(blob, fp, k).map_err(to_py)
}

/// Positions of the fingerprints of `fps` (a uint64 array) within `k` bits of `fp`.
#[pyfunction]
fn _within(fps: &Bound<'_, PyAny>, fp: u64, k: u32) -> PyResult<Vec<u32>> {
    let fps: PyReadonlyArray1<'_, u64> = fps
        .extract()
        .map_err(|_| PyTypeError::new_err("fps must be a 1-D numpy uint64 array"))?;
    Ok(match fps.as_slice() {
        Ok(s) => records::within(s, fp, k),
        Err(_) => records::within(&fps.as_array().iter().copied().collect::<Vec<u64>>(), fp, k),
    })
}

/// Keys of the buckets a query for `fp` at `k` reads: for each prefix, every block's values
/// within its probe radius, as `<prefix><block>:<hex>`.
#[pyfunction]
fn _probe_keys(prefixes: Vec<String>, fp: u64, blocks: u32, k: u32) -> PyResult<Vec<String>> {
    let prefixes: Vec<&str> = prefixes.iter().map(String::as_str).collect();
    records::probe_keys(&prefixes, fp, blocks, k).map_err(to_py)
}

/// The RESP bytes of `MGET <lead...> <probe keys...>` (see `_probe_keys`).
#[pyfunction]
fn _probe_mget<'py>(
    py: Python<'py>,
    lead: Vec<String>,
    prefixes: Vec<String>,
    fp: u64,
    blocks: u32,
    k: u32,
) -> PyResult<Bound<'py, PyBytes>> {
    let lead: Vec<&str> = lead.iter().map(String::as_str).collect();
    let prefixes: Vec<&str> = prefixes.iter().map(String::as_str).collect();
    let packed = records::probe_mget(&lead, &prefixes, fp, blocks, k).map_err(to_py)?;
    Ok(PyBytes::new(py, &packed))
}

/// Jaccard similarity of the sketch `query` (sorted distinct uint32) to each stored sketch of
/// `rows` (bytes: little-endian uint32).
#[pyfunction]
fn _sketch_jaccard_le(
    query: &Bound<'_, PyAny>,
    rows: Vec<Bound<'_, PyBytes>>,
) -> PyResult<Vec<f64>> {
    let q: PyReadonlyArray1<'_, u32> = query
        .extract()
        .map_err(|_| PyTypeError::new_err("query must be a 1-D numpy uint32 array"))?;
    let owned;
    let q = match q.as_slice() {
        Ok(s) => s,
        Err(_) => {
            owned = q.as_array().iter().copied().collect::<Vec<u32>>();
            &owned
        }
    };
    rows.iter()
        .map(|row| {
            let h = records::sketch_from_le(row.as_bytes()).map_err(to_py)?;
            Ok(neardup_core::verify::jaccard_sorted(q, &h))
        })
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_near_records, m)?)?;
    m.add_function(wrap_pyfunction!(_probe_keys, m)?)?;
    m.add_function(wrap_pyfunction!(_sketch_jaccard_le, m)?)?;
    m.add_function(wrap_pyfunction!(_probe_mget, m)?)?;
    m.add_function(wrap_pyfunction!(_within, m)?)?;
    Ok(())
}
