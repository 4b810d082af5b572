use std::fmt;
use std::path::{Path, PathBuf};

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
    /// An operating-system error: Python `OSError` (`PermissionError` for a permission
    /// failure). It keeps its `std::io::ErrorKind` (and OS error code), also where a message
    /// names what failed: wrap with [`Error::io`], never into a string.
    Io(std::io::Error),
}

impl Error {
    /// An operating-system error `e` with `context` before its message (the file it concerns),
    /// of the same kind as `e`.
    pub fn io(context: impl fmt::Display, e: std::io::Error) -> Error {
        Error::Io(std::io::Error::new(e.kind(), format!("{context}: {e}")))
    }

    /// An operating-system error `e` on the file `path`: of the same kind as `e`, its message
    /// naming the file, the path and `e` (its OS error code) kept in a [`FileError`].
    pub fn file(path: &Path, e: std::io::Error) -> Error {
        Error::Io(std::io::Error::new(
            e.kind(),
            FileError {
                path: path.to_path_buf(),
                source: e,
            },
        ))
    }

    /// The kind of an operating-system error; None for the other variants.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            Error::Io(e) => Some(e.kind()),
            _ => None,
        }
    }

    /// Whether this is an operating-system error of a permission failure: no permission, or a
    /// file system mounted read-only (Python `PermissionError`).
    pub fn is_permission_denied(&self) -> bool {
        matches!(
            self.io_kind(),
            Some(std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem)
        )
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// The payload of an [`Error::Io`] made by [`Error::file`]: the file and what failed on it
/// (the binding raises it as Python's `OSError(errno, strerror, filename)`).
#[derive(Debug)]
pub struct FileError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;

    #[test]
    fn an_os_error_keeps_its_kind_and_code() {
        let e: Error = std::io::Error::from_raw_os_error(13).into();
        assert_eq!(e.io_kind(), Some(ErrorKind::PermissionDenied));
        assert!(e.is_permission_denied());
        match &e {
            Error::Io(io) => assert_eq!(io.raw_os_error(), Some(13)),
            _ => unreachable!(),
        }
        let rofs: Error = std::io::Error::from(ErrorKind::ReadOnlyFilesystem).into();
        assert!(rofs.is_permission_denied());
        let missing: Error = std::io::Error::from(ErrorKind::NotFound).into();
        assert_eq!(missing.io_kind(), Some(ErrorKind::NotFound));
        assert!(!missing.is_permission_denied());
        assert_eq!(Error::InvalidArgument("k".into()).io_kind(), None);
        assert!(!Error::Corrupt("x".into()).is_permission_denied());
    }

    #[test]
    fn a_message_with_context_keeps_the_kind() {
        let e = Error::io("index /ro/x", std::io::Error::from_raw_os_error(13));
        assert!(e.is_permission_denied());
        let said = e.to_string();
        assert!(said.starts_with("index /ro/x: "), "{said}");
        assert!(said.contains("(os error 13)"), "{said}");
    }

    #[test]
    fn a_file_error_names_the_file_and_keeps_the_code() {
        let e = Error::file(
            Path::new("/ix/wal.log"),
            std::io::Error::from_raw_os_error(28),
        );
        assert_eq!(e.io_kind(), Some(ErrorKind::StorageFull));
        let said = e.to_string();
        assert!(said.starts_with("/ix/wal.log: "), "{said}");
        match &e {
            Error::Io(io) => {
                let f = io.get_ref().unwrap().downcast_ref::<FileError>().unwrap();
                assert_eq!(f.path, Path::new("/ix/wal.log"));
                assert_eq!(f.source.raw_os_error(), Some(28));
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn opening_a_file_for_writing_in_a_read_only_directory_is_a_permission_failure() {
        // (as root the directory stays writable: nothing to check there)
        let dir = std::env::temp_dir().join(format!("neardup-error-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut perms = std::fs::metadata(&dir).unwrap().permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(&dir, perms.clone()).unwrap();
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("LOCK"));
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        std::fs::set_permissions(&dir, perms).unwrap();
        if let Err(io) = opened {
            assert!(Error::from(io).is_permission_denied());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
