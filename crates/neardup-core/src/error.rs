use std::fmt;

/// Every error the core reports. The binding maps each variant to one Python exception class.
#[derive(Debug)]
pub enum Error {
    /// A caller passed a value outside its domain (bad k, unknown preset, ...): Python `ValueError`.
    InvalidArgument(String),
    /// An id that is not stored: Python `KeyError`.
    NotFound(String),
    /// A file on disk fails its checksum or is not ours: Python `neardup.CorruptIndexError`.
    Corrupt(String),
    /// On-disk data made with another configuration or format version.
    Incompatible(String),
    /// An operating-system error: Python `OSError`.
    Io(std::io::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(m)
            | Error::NotFound(m)
            | Error::Corrupt(m)
            | Error::Incompatible(m) => f.write_str(m),
            Error::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}
