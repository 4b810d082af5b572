//! Binding of `neardup_core::records`: the client-side hot loop of the Redis backend.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::to_py;
use crate::verify::{array, slice};
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
    let fps = array::<u64>(fps, "fps", "uint64")?;
    Ok(neardup_core::hamming::within(&slice(&fps), fp, k))
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
    let q = array::<u32>(query, "query", "uint32")?;
    let q = slice(&q);
    rows.iter()
        .map(|row| {
            let h = records::sketch_from_le(row.as_bytes()).map_err(to_py)?;
            Ok(neardup_core::verify::jaccard_sorted(&q, &h))
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
