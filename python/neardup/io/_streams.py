"""Byte streams through the compressors (gzip, xz, zstd), the optional imports they and Parquet
need, and the progress callback that counts bytes as stored on disk."""

from __future__ import annotations

import csv
import gzip
import io
import lzma
import zlib
from typing import IO, Any, Callable

from neardup.io._sources import InputError, Source, UnknownFormatError

ProgressFn = Callable[[int], None]
"""Called now and then with the number of input bytes (as stored on disk) read since last call."""

PROGRESS_EVERY = 4096
"""Rows between two progress calls where a reader goes row by row (CSV)."""


def import_zstandard() -> Any:
    try:
        import zstandard
    except ImportError as e:  # pragma: no cover - zstandard is a dependency
        raise ImportError(".zst files need the 'zstandard' package: pip install zstandard") from e
    return zstandard


def import_pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as e:
        raise ImportError(
            "Parquet files need pyarrow: pip install 'neardup[parquet]' (or pip install pyarrow)"
        ) from e
    return pyarrow, pyarrow.parquet


#: What reading a (decompressed) stream may raise on a damaged or cut file: a bad record to
#: name, never a traceback (gzip's zlib.error and lzma's LZMAError are not OSErrors; the zstd
#: reader raises OSError and EOFError; a CSV reader csv.Error).
READ_ERRORS = (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError, csv.Error)


def open_read(path: str, compression: str | None) -> tuple[IO[bytes], IO[bytes]]:
    """Open ``path`` for reading bytes through its decompressor.

    Returns ``(stream, raw)``: read from ``stream``; ``raw.tell()`` is the position in the file on
    disk (for progress). Close ``stream`` then ``raw``.
    """
    raw = open(path, "rb")  # noqa: SIM115 - returned to the caller
    try:
        stream: IO[bytes]
        if compression is None:
            stream = raw
        elif compression == "gz":
            stream = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
        elif compression == "xz":
            stream = lzma.LZMAFile(raw, mode="rb")
        elif compression == "zst":
            stream = io.BufferedReader(_ZstdReader(raw), buffer_size=1 << 20)
        else:
            raise UnknownFormatError(f"unknown compression {compression!r}")
    except BaseException:
        raw.close()
        raise
    return stream, raw


class _ZstdReader(io.RawIOBase):
    """The decompressed bytes of the zstd frames of ``raw``, one after another. A file that ends
    inside a frame (a truncated copy) raises EOFError there, as gzip and xz do; zstandard's own
    stream reader ends quietly and a cut file read as a shorter one. Damaged data raises
    OSError. The compressed bytes are fed a little at a time, fewer as the data compresses
    more, so that one call's output stays a few MiB (a small file can hold gigabytes)."""

    _OUT = 4 << 20  # (bytes of output wanted from one call)

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self._raw = raw
        self._zstd = import_zstandard()
        self._dctx = self._zstd.ZstdDecompressor()
        self._frame: Any = None
        self._out = memoryview(b"")
        self._feed = 256  # (compressed bytes per call: grows while the ratio allows)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not len(self._out):
            data = self._raw.read(self._feed)
            if not data:
                if self._frame is not None and not self._frame.eof:
                    raise EOFError("compressed file ended before the end of its zstd frame")
                return 0
            parts = []
            try:
                while data:
                    if self._frame is None or self._frame.eof:
                        self._frame = self._dctx.decompressobj()
                    parts.append(self._frame.decompress(data))
                    data = self._frame.unused_data if self._frame.eof else b""
            except self._zstd.ZstdError as e:
                raise OSError(f"damaged zstd data: {e}") from None
            out = b"".join(parts)
            ratio = max(1, len(out) // max(1, self._feed))
            self._feed = max(256, min(1 << 16, self._OUT // ratio))
            self._out = memoryview(out)
        n = min(len(b), len(self._out))
        b[:n] = self._out[:n]
        self._out = self._out[n:]
        return n


class _CompressedWriter(io.RawIOBase):
    """A writable byte stream that compresses into a file and closes both on close()."""

    def __init__(self, path: str, compression: str | None) -> None:
        super().__init__()
        self._raw = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._inner: Any
        if compression is None:
            self._inner = self._raw
        elif compression == "gz":
            self._inner = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6)
        elif compression == "xz":
            self._inner = lzma.LZMAFile(self._raw, mode="wb")
        elif compression == "zst":
            zstandard = import_zstandard()
            self._inner = zstandard.ZstdCompressor(level=3).stream_writer(self._raw, closefd=False)
        else:
            self._raw.close()
            raise UnknownFormatError(f"unknown compression {compression!r}")

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self._inner.write(b)
        return len(b)

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._inner is not self._raw:
                self._inner.close()
        finally:
            self._raw.close()
            super().close()


def open_write(path: str, compression: str | None) -> IO[bytes]:
    """Open ``path`` for writing bytes through a compressor (buffered)."""
    return io.BufferedWriter(_CompressedWriter(path, compression), buffer_size=1 << 20)


class InputFile:
    """An input opened for reading through its decompressor (:func:`open_read`), which hands a
    :data:`ProgressFn` the bytes read from the file on disk.

    Read from ``stream``; call :meth:`update` now and then (with ``progress=None`` it does
    nothing). Use as a context manager: on leaving, the last bytes are reported and both streams
    are closed.
    """

    __slots__ = ("_last", "_progress", "raw", "stream")

    def __init__(self, source: Source, progress: ProgressFn | None) -> None:
        self.stream, self.raw = open_read(source.path, source.compression)
        self._progress = progress
        self._last = 0

    def update(self) -> None:
        """Report the bytes read on disk since the last call."""
        if self._progress is not None:
            pos = self.raw.tell()
            self._progress(pos - self._last)
            self._last = pos

    def close(self) -> None:
        """The last progress report (never raising for the file), then close both streams."""
        try:
            self.update()
        except (OSError, ValueError):
            pass
        finally:
            self.stream.close()
            self.raw.close()

    def __enter__(self) -> InputFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_or_error(source: Source, progress: ProgressFn | None = None) -> InputFile | InputError:
    """:class:`InputFile` for a reader: a file that cannot be opened is its one InputError."""
    try:
        return InputFile(source, progress)
    except OSError as e:
        return InputError(source.path, None, f"cannot open: {e.strerror or e}")
