//! The Python binding `neardup._core`: converts arguments, releases the GIL, maps errors.
//! Nothing else lives here; the logic is in `neardup-core`.

use pyo3::prelude::*;

mod batch_dedup;
mod errors;
mod fingerprint;
mod html;
mod index;
mod near;
mod plain;
mod verify;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    batch_dedup::register(m)?;
    errors::register(m)?;
    fingerprint::register(m)?;
    html::register(m)?;
    index::register(m)?;
    near::register(m)?;
    plain::register(m)?;
    verify::register(m)?;
    Ok(())
}
