//! Binding of `neardup_core::records`: the client-side hot loop of the Redis backend.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTuple,
};

use crate::errors::to_py;
use crate::verify::{array, slice};
use neardup_core::records;

/// `{ref: (fingerprint, distance)}` of the records within `k` of `fp` in `buckets` (a list of
/// bytes, or None for a bucket that does not exist), read as one blob without joining them.
#[pyfunction]
fn _near_buckets<'py>(
    py: Python<'py>,
    buckets: &Bound<'py, PyList>,
    fp: u64,
    k: u32,
) -> PyResult<Bound<'py, PyDict>> {
    let mut parts: Vec<Bound<'py, PyBytes>> = Vec::with_capacity(buckets.len());
    for item in buckets.iter() {
        if item.is_none() {
            continue;
        }
        match item.cast_into::<PyBytes>() {
            Ok(b) => parts.push(b),
            Err(e) => {
                let kind = e.into_inner().get_type().name()?;
                return Err(PyTypeError::new_err(format!(
                    "buckets must hold bytes or None, got {kind}"
                )));
            }
        }
    }
    let near =
        records::near_records_in(parts.iter().map(|b| b.as_bytes()), fp, k).map_err(to_py)?;
    let out = PyDict::new(py);
    for (r, f, d) in near {
        out.set_item(r, (f, d))?;
    }
    Ok(out)
}

/// The key of the bucket of `fp` in each of `blocks` blocks: `<prefix><block>:<hex>`.
#[pyfunction]
fn _bucket_keys(prefix: &str, fp: u64, blocks: u32) -> PyResult<Vec<String>> {
    records::bucket_keys(prefix, fp, blocks).map_err(to_py)
}

/// Appends one argument of a Redis command as a RESP bulk string: bytes (bytearray,
/// memoryview) as they are, str in UTF-8, int in decimal, float as Python's repr (what redis-py
/// and hiredis send).
fn push_arg(out: &mut Vec<u8>, arg: &Bound<'_, PyAny>) -> PyResult<()> {
    if let Ok(b) = arg.cast::<PyBytes>() {
        records::push_bulk(out, b.as_bytes());
    } else if let Ok(s) = arg.cast::<PyString>() {
        records::push_bulk(out, s.to_cow()?.as_bytes());
    } else if arg.is_instance_of::<PyInt>() && !arg.is_instance_of::<PyBool>() {
        match arg.extract::<i64>() {
            Ok(n) => records::push_bulk(out, n.to_string().as_bytes()),
            Err(_) => {
                let digits = arg
                    .py()
                    .get_type::<PyInt>()
                    .call_method1("__repr__", (arg,))?;
                records::push_bulk(out, digits.cast::<PyString>()?.to_cow()?.as_bytes())
            }
        }
    } else if arg.is_instance_of::<PyFloat>() {
        // (float's own repr: a subclass such as numpy.float64 reprs itself otherwise)
        let py = arg.py();
        let repr = py.get_type::<PyFloat>().call_method1("__repr__", (arg,))?;
        records::push_bulk(out, repr.cast::<PyString>()?.to_cow()?.as_bytes());
    } else if let Ok(b) = arg.cast::<PyByteArray>() {
        records::push_bulk(out, &b.to_vec());
    } else if arg.is_instance_of::<PyMemoryView>() {
        let b = arg.call_method0("tobytes")?;
        records::push_bulk(out, b.cast::<PyBytes>()?.as_bytes());
    } else {
        return Err(PyTypeError::new_err(format!(
            "a Redis command argument must be bytes, str, int or float, got {}",
            arg.get_type().name()?
        )));
    }
    Ok(())
}

/// The RESP bytes of `commands`, one after the other: each a tuple or list of arguments (bytes,
/// bytearray, memoryview, str, int or float; at least the command's name), or bytes already in
/// RESP (sent as they are).
#[pyfunction]
fn _pack_commands<'py>(
    py: Python<'py>,
    commands: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut out: Vec<u8> = Vec::with_capacity(1024);
    for command in commands.try_iter()? {
        let command = command?;
        if let Ok(packed) = command.cast::<PyBytes>() {
            out.extend_from_slice(packed.as_bytes());
            continue;
        }
        let args: Vec<Bound<'py, PyAny>> = if let Ok(t) = command.cast::<PyTuple>() {
            t.iter().collect()
        } else if let Ok(l) = command.cast::<PyList>() {
            l.iter().collect()
        } else {
            return Err(PyTypeError::new_err(format!(
                "a Redis command must be a tuple or list of arguments (or bytes in RESP), got {}",
                command.get_type().name()?
            )));
        };
        if args.is_empty() {
            // (Redis answers nothing to an empty array: the caller would wait for ever)
            return Err(PyValueError::new_err(
                "a Redis command needs at least its name",
            ));
        }
        records::push_array_header(&mut out, args.len());
        for arg in &args {
            push_arg(&mut out, arg)?;
        }
    }
    Ok(PyBytes::new(py, &out))
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
    m.add_function(wrap_pyfunction!(_near_buckets, m)?)?;
    m.add_function(wrap_pyfunction!(_bucket_keys, m)?)?;
    m.add_function(wrap_pyfunction!(_pack_commands, m)?)?;
    m.add_function(wrap_pyfunction!(_probe_keys, m)?)?;
    m.add_function(wrap_pyfunction!(_sketch_jaccard_le, m)?)?;
    m.add_function(wrap_pyfunction!(_probe_mget, m)?)?;
    m.add_function(wrap_pyfunction!(_within, m)?)?;
    Ok(())
}
