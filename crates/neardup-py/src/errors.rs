//! The one place where core errors become Python exceptions.

use neardup_core::Error;
use pyo3::exceptions::{PyKeyError, PyOSError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    neardup,
    CorruptIndexError,
    PyValueError,
    "An index file fails its checks."
);
pyo3::create_exception!(
    neardup,
    IncompatibleIndexError,
    PyValueError,
    "An index on disk was made with another configuration or format version."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CorruptIndexError", m.py().get_type::<CorruptIndexError>())?;
    m.add(
        "IncompatibleIndexError",
        m.py().get_type::<IncompatibleIndexError>(),
    )?;
    Ok(())
}

pub fn to_py(e: Error) -> PyErr {
    match e {
        Error::InvalidArgument(m) => PyValueError::new_err(m),
        Error::NotFound(m) => PyKeyError::new_err(m),
        Error::Corrupt(m) => CorruptIndexError::new_err(m),
        Error::Incompatible(m) => IncompatibleIndexError::new_err(m),
        Error::Io(e) => PyOSError::new_err(e.to_string()),
    }
}
