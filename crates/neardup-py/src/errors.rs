//! The one place where core errors become Python exceptions.

use neardup_core::error::FileError;
use neardup_core::Error;
use pyo3::exceptions::{PyKeyError, PyOSError, PyPermissionError, PyValueError};
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
        Error::Io(e) => os_error(e),
    }
}

// errno values of the permission failures (the same on Linux, macOS and the BSDs).
const EACCES: i32 = 13;
const EROFS: i32 = 30;

/// An operating-system error as Python raises one: `OSError(errno, message)`, so that Python
/// picks the subclass of the code (`FileNotFoundError`, ...), with the message as Python's
/// own (`[Errno 2] No such file or directory`, not Rust's `... (os error 2)`), and with the
/// file as `filename` where the core names one ([`FileError`]). A permission failure (no
/// permission, a read-only file system) is `PermissionError` by its kind, also where the code
/// is not kept (an error the core gave a message of its own).
fn os_error(e: std::io::Error) -> PyErr {
    use std::io::ErrorKind;
    let file = e.get_ref().and_then(|r| r.downcast_ref::<FileError>());
    let (code, mut message) = match file {
        Some(f) => (f.source.raw_os_error(), f.source.to_string()),
        None => (e.raw_os_error(), e.to_string()),
    };
    if let Some(c) = code {
        let suffix = format!(" (os error {c})");
        if let Some(cut) = message.strip_suffix(&suffix) {
            message = cut.to_owned();
        }
    }
    let (permission, code) = match e.kind() {
        ErrorKind::PermissionDenied => (true, Some(code.unwrap_or(EACCES))),
        ErrorKind::ReadOnlyFilesystem => (true, Some(code.unwrap_or(EROFS))),
        _ => (false, code),
    };
    let filename = file.map(|f| f.path.to_string_lossy().into_owned());
    match (code, filename) {
        (Some(c), Some(name)) if permission => PyPermissionError::new_err((c, message, name)),
        (Some(c), Some(name)) => PyOSError::new_err((c, message, name)),
        (Some(c), None) if permission => PyPermissionError::new_err((c, message)),
        (Some(c), None) => PyOSError::new_err((c, message)),
        (None, Some(name)) => PyOSError::new_err(format!("{name}: {message}")),
        (None, None) => PyOSError::new_err(message),
    }
}
