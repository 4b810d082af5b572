"""Streaming corpus readers and writers for the batch commands (`neardup dedup`, `fingerprint`,
`index build`).

Formats, chosen from the file name (or given explicitly):

- ``jsonl`` (``.jsonl``, ``.ndjson``, ``.json``): a JSON object per line;
- ``csv`` (``.csv``) and ``tsv`` (``.tsv``, ``.tab``): a row, the first row is the header;
- ``txt`` (``.txt``, ``.text``): a non-blank line, the line is the text;
- ``parquet`` (``.parquet``, ``.pq``): a row (needs ``pip install 'neardup[parquet]'``);
- ``dir`` (a directory): a ``.txt``/``.text``/``.html``/``.htm`` file under it, recursively;
  HTML files are read as markup (a fragment is wrapped in ``<html><body>``), and the dedup
  policy keeps their main visible text (:mod:`neardup.htmltext`).

``jsonl``, ``csv``, ``tsv`` and ``txt`` may be compressed: ``.gz``, ``.xz``, ``.zst``.

Every input is read twice by the batch commands: pass 1 (:func:`read_docs`) yields each document's
text, id and time, which are fingerprinted and then dropped; pass 2 (:class:`KeptWriter`) copies
the kept records, byte for byte where the format allows (JSONL and text lines are written as they
were read), so memory grows with the number of documents, never with their text.

Each input is a sequence of *slots* (non-blank lines, rows, files). A slot that is not a valid
document (bad JSON, missing or non-string text field, invalid UTF-8, ...) becomes an
:class:`InputError` naming the file and line; the caller decides to stop or skip it.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import lzma
import math
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import compress
from typing import IO, Any, Callable

import numpy as np
import numpy.typing as npt

from neardup.htmltext import looks_like_html

_fast_loads: Callable[[bytes], Any]
try:  # 4x faster than json.loads on short records; the stdlib is the fallback
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a dependency
    _fast_loads = json.loads

__all__ = [
    "FORMATS",
    "Doc",
    "DocBatch",
    "FieldSpec",
    "InputError",
    "KeptWriter",
    "Source",
    "UnknownFormatError",
    "detect",
    "doc_from_record",
    "open_read",
    "open_write",
    "output_source",
    "parse_json_line",
    "parse_time",
    "read_batches",
    "read_docs",
]

FORMATS = ("jsonl", "csv", "tsv", "txt", "parquet", "dir")
_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".txt": "txt",
    ".text": "txt",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_COMPRESSIONS = {".gz": "gz", ".xz": "xz", ".zst": "zst", ".zstd": "zst"}
_DIR_TEXT = (".txt", ".text")
_DIR_HTML = (".html", ".htm")

# csv's default limit (128 KiB per field) rejects long documents.
csv.field_size_limit(2**31 - 1)


class UnknownFormatError(ValueError):
    """A file name whose format cannot be told, or a format name that does not exist."""


class InputError(ValueError):
    """One bad document (or a whole unreadable file): names the file and the line or row.

    ``slot`` is the bad document's position in its file; None when the file cannot be read on
    (no document follows from it).
    """

    def __init__(self, path: str, line: int | None, message: str, slot: int | None = None) -> None:
        self.path = path
        self.line = line
        self.message = message
        # the slot (document position in the file) of a bad document; None: the file stops here
        self.slot = slot
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Source:
    """One input or output: its path, format (one of :data:`FORMATS`) and compression."""

    path: str
    format: str
    compression: str | None = None


@dataclass(frozen=True)
class FieldSpec:
    """Which fields hold the text, the id and the time.

    ``id_field=None`` uses the field ``id`` when a record has one and the document's row number
    (0-based, counted over all inputs) otherwise; a named ``id_field`` must be present.
    ``time_field`` values are numbers (seconds since the epoch) or ISO 8601 strings.
    """

    text_field: str = "text"
    id_field: str | None = None
    time_field: str | None = None


class Doc:
    """A document read in pass 1. ``id`` is None when it is to be the row number."""

    __slots__ = ("id", "line", "slot", "text", "time")

    def __init__(self, slot: int, line: int, id: Any, text: str, time: float | None = None) -> None:
        self.slot = slot
        self.line = line
        self.id = id
        self.text = text
        self.time = time


class DocBatch:
    """Consecutive slots of one input read in pass 1, as columns (no object per document).

    ``texts[i]``, ``ids[i]`` (None: the row number), ``times[i]`` (None unless a time field was
    asked for) belong to the document in slot ``slots[i]``, on line ``lines[i]``; ``errors``
    are the bad slots of the same stretch (and, last, an error with ``slot=None`` when the
    file cannot be read on). ``end`` is one past the last slot the batch covers.
    """

    __slots__ = ("end", "errors", "ids", "lines", "slots", "texts", "times")

    def __init__(
        self,
        slots: Sequence[int],
        lines: Sequence[int],
        texts: list[str],
        ids: list[Any],
        times: list[float] | None,
        errors: list[InputError],
        end: int,
    ) -> None:
        self.slots = slots
        self.lines = lines
        self.texts = texts
        self.ids = ids
        self.times = times
        self.errors = errors
        self.end = end

    def __len__(self) -> int:
        return len(self.texts)

    def docs(self) -> Iterator[Doc | InputError]:
        """The batch as :class:`Doc` and :class:`InputError` items in slot order."""
        times = self.times if self.times is not None else [None] * len(self.texts)
        items: list[Doc | InputError] = [
            Doc(slot, line, doc_id, text, t)
            for slot, line, doc_id, text, t in zip(
                self.slots, self.lines, self.ids, self.texts, times
            )
        ]
        if self.errors:
            last = [e for e in self.errors if e.slot is None]
            bad = [e for e in self.errors if e.slot is not None]
            items = sorted([*items, *bad], key=lambda d: d.slot if d.slot is not None else -1)
            items += last
        yield from items

    @classmethod
    def of(cls, items: list[Doc | InputError], end: int) -> DocBatch:
        """A batch of documents and errors read one by one."""
        docs = [d for d in items if isinstance(d, Doc)]
        return cls(
            [d.slot for d in docs],
            [d.line for d in docs],
            [d.text for d in docs],
            [d.id for d in docs],
            [d.time for d in docs if d.time is not None]
            if docs and docs[0].time is not None
            else None,
            [e for e in items if isinstance(e, InputError)],
            end,
        )


ProgressFn = Callable[[int], None]
"""Called now and then with the number of input bytes (as stored on disk) read since last call."""


def detect(path: str, format: str | None = None) -> Source:
    """Tell the format and compression of ``path`` from its name (a directory is ``dir``).

    ``format`` overrides the guess (the compression suffix is still honoured).
    Raises :class:`UnknownFormatError` naming the file and the known extensions.
    """
    if format is not None and format not in FORMATS:
        raise UnknownFormatError(f"format {format!r} is not one of {', '.join(FORMATS)}")
    if os.path.isdir(path):
        if format not in (None, "dir"):
            raise UnknownFormatError(f"{path}: is a directory, but format {format!r} was given")
        return Source(path, "dir")
    base = path
    compression = None
    stem, ext = os.path.splitext(base)
    if ext.lower() in _COMPRESSIONS:
        compression = _COMPRESSIONS[ext.lower()]
        base = stem
    if format is None:
        format = _EXTENSIONS.get(os.path.splitext(base)[1].lower())
        if format is None:
            known = ", ".join(sorted(_EXTENSIONS)) + " (optionally " + ", ".join(_COMPRESSIONS)
            raise UnknownFormatError(
                f"{path}: cannot tell the format from the name; known extensions: {known}), "
                "or a directory; or give --format"
            )
    if format == "parquet" and compression is not None:
        raise UnknownFormatError(f"{path}: parquet files are compressed inside; drop the suffix")
    if format == "dir":
        raise UnknownFormatError(f"{path}: format 'dir' needs a directory")
    return Source(path, format, compression)


# --------------------------------------------------------------------------------------------
# compressed byte streams


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
            zstandard = _import_zstandard()
            reader = zstandard.ZstdDecompressor().stream_reader(raw, closefd=False)
            stream = io.BufferedReader(reader, buffer_size=1 << 20)  # type: ignore[arg-type]
        else:
            raise UnknownFormatError(f"unknown compression {compression!r}")
    except BaseException:
        raw.close()
        raise
    return stream, raw


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
            zstandard = _import_zstandard()
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


def _import_zstandard() -> Any:
    try:
        import zstandard
    except ImportError as e:  # pragma: no cover - zstandard is a dependency
        raise ImportError(".zst files need the 'zstandard' package: pip install zstandard") from e
    return zstandard


def _import_pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as e:
        raise ImportError(
            "Parquet files need pyarrow: pip install 'neardup[parquet]' (or pip install pyarrow)"
        ) from e
    return pyarrow, pyarrow.parquet


# --------------------------------------------------------------------------------------------
# field extraction


def _describe(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def parse_time(value: Any) -> float:
    """A time field as float seconds since the epoch: a number or an ISO 8601 string.

    Naive ISO times are taken as UTC. Raises ValueError naming the value.
    """
    if isinstance(value, bool):
        raise ValueError(f"time {value!r} is a bool, expected seconds or an ISO 8601 string")
    if isinstance(value, (int, float)):
        t = float(value)
    elif isinstance(value, datetime):
        d = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        t = d.timestamp()
    elif isinstance(value, str):
        s = value.strip()
        try:
            t = float(s)
        except ValueError:
            try:
                d = datetime.fromisoformat(s.replace("Z", "+00:00") if s.endswith("Z") else s)
            except ValueError:
                raise ValueError(
                    f"time {value!r} is neither seconds since the epoch nor ISO 8601"
                ) from None
            if d.tzinfo is None:
                d = d.replace(tzinfo=timezone.utc)
            t = d.timestamp()
    else:
        raise ValueError(f"time is {_describe(value)}, expected seconds or an ISO 8601 string")
    if not math.isfinite(t):
        raise ValueError(f"time {value!r} is not finite")
    return t


def _has_surrogates(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def doc_from_record(
    record: Any, spec: FieldSpec, path: str, slot: int, line: int, kind: str
) -> Doc | InputError:
    """The document in a parsed record (a dict), or the InputError saying what is wrong.

    ``kind`` is the format; for formats other than ``jsonl`` a text holding undecodable bytes
    (surrogate escapes) is an error.
    """
    if not isinstance(record, dict):
        return InputError(path, line, f"expected a JSON object, got {_describe(record)}", slot)
    try:
        text = record[spec.text_field]
    except KeyError:
        fields = ", ".join(map(repr, list(record)[:10])) or "none"
        return InputError(path, line, f"no field {spec.text_field!r} (fields: {fields})", slot)
    if not isinstance(text, str):
        return InputError(
            path, line, f"field {spec.text_field!r} is {_describe(text)}, expected a string", slot
        )
    if kind != "jsonl" and _has_surrogates(text):
        return InputError(path, line, f"field {spec.text_field!r} is not valid UTF-8", slot)
    if spec.id_field is None:
        doc_id = record.get("id")
    else:
        try:
            doc_id = record[spec.id_field]
        except KeyError:
            return InputError(path, line, f"no id field {spec.id_field!r}", slot)
    if doc_id is not None and not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
        return InputError(
            path, line, f"id is {_describe(doc_id)}, expected a string or integer", slot
        )
    t: float | None = None
    if spec.time_field is not None:
        try:
            t = parse_time(record[spec.time_field])
        except KeyError:
            return InputError(path, line, f"no time field {spec.time_field!r}", slot)
        except ValueError as e:
            return InputError(path, line, f"field {spec.time_field!r}: {e}", slot)
    return Doc(slot, line, doc_id, text, t)


def parse_json_line(
    raw: bytes, spec: FieldSpec, path: str, slot: int, line: int
) -> Doc | InputError:
    """The document on one JSONL line (bytes), or the InputError saying what is wrong."""
    try:
        record = _fast_loads(raw)
    except ValueError:
        # orjson is stricter (NaN, huge ints) and terser: the stdlib decides and explains
        try:
            s = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return InputError(path, line, f"not valid UTF-8 (byte {e.start} of the line)", slot)
        try:
            record = json.loads(s)
        except ValueError as e:
            return InputError(path, line, f"not valid JSON: {e}", slot)
    return doc_from_record(record, spec, path, slot, line, "jsonl")


def _parse_text_line(raw: bytes, path: str, slot: int, line: int) -> Doc | InputError:
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return InputError(path, line, f"not valid UTF-8 (byte {e.start} of the line)", slot)
    return Doc(slot, line, None, s.rstrip("\r\n"), None)


def _is_blank(raw: bytes) -> bool:
    return not raw.strip()


def _dir_files(root: str) -> list[str]:
    """The documents of a directory: .txt/.text/.html/.htm files, recursively, sorted by path."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            if name.lower().endswith(_DIR_TEXT + _DIR_HTML):
                found.append(os.path.join(dirpath, name))
    found.sort(key=lambda p: os.path.relpath(p, root).split(os.sep))
    return found


def _read_dir_file(path: str, root: str, slot: int) -> Doc | InputError:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return InputError(path, None, f"cannot read: {e.strerror or e}", slot)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        return InputError(path, line, f"not valid UTF-8 (byte {e.start} of the file)", slot)
    if path.lower().endswith(_DIR_HTML) and not looks_like_html(text):
        # a fragment (no doctype/html/body): the document a browser would build around it, so
        # the dedup policy reads it as a page
        text = f"<html><body>{text}</body></html>"
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    return Doc(slot, 1, rel, text, None)


# --------------------------------------------------------------------------------------------
# pass 1


_PROGRESS_EVERY = 4096


def read_docs(
    source: Source,
    spec: FieldSpec = FieldSpec(),
    progress: ProgressFn | None = None,
) -> Iterator[Doc | InputError]:
    """Yield one :class:`Doc` or :class:`InputError` per slot of ``source``, in order.

    A file that cannot be read on (a corrupt compressed stream, a missing Parquet column) ends
    with one final InputError; the slots read before it stand.
    """
    if source.format in ("jsonl", "txt"):
        for batch in _read_line_batches(source, spec, progress, _BLOCK_BYTES):
            yield from batch.docs()
    elif source.format in ("csv", "tsv"):
        yield from _read_csv(source, spec, progress)
    elif source.format == "parquet":
        yield from _read_parquet(source, spec, progress)
    elif source.format == "dir":
        for slot, path in enumerate(_dir_files(source.path)):
            if progress is not None:
                try:
                    progress(os.path.getsize(path))
                except OSError:
                    pass
            yield _read_dir_file(path, source.path, slot)
    else:
        raise UnknownFormatError(f"format {source.format!r} is not one of {', '.join(FORMATS)}")


def read_batches(
    source: Source,
    spec: FieldSpec = FieldSpec(),
    progress: ProgressFn | None = None,
    block_bytes: int | None = None,
) -> Iterator[DocBatch]:
    """:func:`read_docs` in batches of consecutive slots, as columns.

    The same documents and errors, in the same order; JSONL and text lines are read in blocks of
    ``block_bytes`` (default 2 MiB) and parsed a block at a time, one record after the other
    only in a block that holds a bad or blank line.
    """
    if source.format in ("jsonl", "txt"):
        yield from _read_line_batches(source, spec, progress, block_bytes or _BLOCK_BYTES)
        return
    items: list[Doc | InputError] = []
    end = 0
    for item in read_docs(source, spec, progress):
        items.append(item)
        if item.slot is not None:
            end = item.slot + 1
        if len(items) >= _BATCH_DOCS:
            yield DocBatch.of(items, end)
            items = []
    if items:
        yield DocBatch.of(items, end)


_BLOCK_BYTES = 1 << 21
_BATCH_DOCS = 8192


def _open_or_error(source: Source) -> tuple[IO[bytes], IO[bytes]] | InputError:
    try:
        return open_read(source.path, source.compression)
    except OSError as e:
        return InputError(source.path, None, f"cannot open: {e.strerror or e}")


def _line_blocks(source: Source, stream: IO[bytes], block_bytes: int) -> Iterator[list[bytes]]:
    """The lines of ``stream`` (split at ``\\n``, without it) in blocks of about ``block_bytes``.

    Where the stream cannot be read on (truncated or corrupt compressed data), the file is read
    again line by line from the last whole block, the whole lines before the damage are yielded,
    and then the error is raised.
    """
    done = 0  # lines yielded so far
    pending: list[bytes] = []  # the start of a line that goes on in the next read
    while True:
        try:
            data = stream.read(block_bytes)
        except (OSError, EOFError, ValueError):
            yield from _lines_after(source, done)  # raises the error where it is
            raise
        if not data:
            if pending:
                yield [b"".join(pending)]
            return
        cut = data.rfind(b"\n")
        if cut < 0:
            pending.append(data)
            continue
        block = b"".join([*pending, data[:cut]]) if pending else data[:cut]
        pending = [data[cut + 1 :]] if cut + 1 < len(data) else []
        lines = block.split(b"\n")
        done += len(lines)
        yield lines


def _lines_after(source: Source, skip: int) -> Iterator[list[bytes]]:
    """The lines of ``source`` past the first ``skip``, read one by one: blocks of whole lines
    until the file cannot be read on, where the error is raised."""
    stream, raw = open_read(source.path, source.compression)
    lines: list[bytes] = []
    try:
        seen = 0
        for rawline in stream:
            seen += 1
            if seen <= skip:
                continue
            lines.append(rawline[:-1] if rawline.endswith(b"\n") else rawline)
            if len(lines) >= 4096:
                yield lines
                lines = []
    except BaseException:
        if lines:
            yield lines
        raise
    finally:
        stream.close()
        raw.close()
    if lines:
        yield lines


def _read_line_batches(
    source: Source, spec: FieldSpec, progress: ProgressFn | None, block_bytes: int
) -> Iterator[DocBatch]:
    opened = _open_or_error(source)
    if isinstance(opened, InputError):
        yield DocBatch.of([opened], 0)
        return
    stream, raw = opened
    parse = _parse_json_block if source.format == "jsonl" else _parse_text_block
    slot = 0
    line = 0  # lines before the current block
    last = 0
    blocks = _line_blocks(source, stream, block_bytes)
    try:
        while True:
            try:
                lines = next(blocks, None)
            except (OSError, EOFError, ValueError) as e:
                # truncated or corrupt compressed data: the file cannot be read past here
                yield DocBatch.of([InputError(source.path, line + 1, f"cannot read on: {e}")], slot)
                return
            if lines is None:
                return
            batch = parse(lines, spec, source.path, slot, line)
            slot = batch.end
            line += len(lines)
            if progress is not None:
                pos = raw.tell()
                progress(pos - last)
                last = pos
            yield batch
    finally:
        if progress is not None:
            try:
                progress(raw.tell() - last)
            except (OSError, ValueError):
                pass
        stream.close()
        raw.close()


_ID_TYPES = frozenset((type(None), str, int))
_TIME_TYPES = frozenset((int, float))


def _parse_json_block(
    lines: list[bytes], spec: FieldSpec, path: str, slot: int, line: int
) -> DocBatch:
    """The documents on consecutive JSONL lines (without their newlines); ``slot`` and ``line``
    are those before the first line."""
    n = len(lines)
    try:
        # Any blank or bad line raises here or fails a type check below, and the block is then
        # parsed line by line, which says what is wrong (and skips blank lines).
        records = list(map(_fast_loads, lines))
        texts = [r[spec.text_field] for r in records]
        if spec.id_field is None:
            ids = [r.get("id") for r in records]
        else:
            ids = [r[spec.id_field] for r in records]
        times = None
        if spec.time_field is not None:
            values = [r[spec.time_field] for r in records]
            if set(map(type, values)) <= _TIME_TYPES:
                times = list(map(float, values))
            else:
                times = [parse_time(v) for v in values]
            if not all(map(math.isfinite, times)):
                raise ValueError("a time that is not finite")
        if set(map(type, texts)) <= {str} and set(map(type, ids)) <= _ID_TYPES:
            slots, numbers = range(slot, slot + n), range(line + 1, line + 1 + n)
            return DocBatch(slots, numbers, texts, ids, times, [], slot + n)
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    items: list[Doc | InputError] = []
    for i, raw in enumerate(lines):
        if _is_blank(raw):
            continue
        items.append(parse_json_line(raw, spec, path, slot, line + i + 1))
        slot += 1
    return DocBatch.of(items, slot)


_ASCII_SPACE = " \t\n\r\x0b\x0c"


def _parse_text_block(
    lines: list[bytes], spec: FieldSpec, path: str, slot: int, line: int
) -> DocBatch:
    """The documents on consecutive text lines: each non-blank line is one."""
    try:
        decoded = b"\n".join(lines).decode("utf-8").split("\n")
    except UnicodeDecodeError:
        items: list[Doc | InputError] = []
        for i, raw in enumerate(lines):
            if _is_blank(raw):
                continue
            items.append(_parse_text_line(raw, path, slot, line + i + 1))
            slot += 1
        return DocBatch.of(items, slot)
    # blank: only ASCII white space, as bytes.strip() sees it
    if all(map(str.strip, decoded, [_ASCII_SPACE] * len(decoded))):
        n = len(decoded)
        texts = [t.rstrip("\r") for t in decoded]
        return DocBatch(
            range(slot, slot + n), range(line + 1, line + 1 + n), texts, [None] * n, None, [],
            slot + n,
        )  # fmt: skip
    slots: list[int] = []
    numbers: list[int] = []
    texts = []
    for i, t in enumerate(decoded):
        if t.strip(_ASCII_SPACE):
            slots.append(slot)
            numbers.append(line + i + 1)
            texts.append(t.rstrip("\r"))
            slot += 1
    return DocBatch(slots, numbers, texts, [None] * len(texts), None, [], slot)


def _csv_reader(stream: IO[bytes], fmt: str) -> tuple[io.TextIOWrapper, Any]:
    # surrogateescape: invalid UTF-8 survives to be reported per row (and is written back as is)
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="surrogateescape", newline="")
    return text, csv.reader(text, delimiter="\t" if fmt == "tsv" else ",")


def _read_csv(
    source: Source, spec: FieldSpec, progress: ProgressFn | None
) -> Iterator[Doc | InputError]:
    opened = _open_or_error(source)
    if isinstance(opened, InputError):
        yield opened
        return
    stream, raw = opened
    path = source.path
    text, reader = _csv_reader(stream, source.format)
    last = 0
    slot = 0
    try:
        header = next(reader, None)
        if header is None:
            return
        if header and header[0].startswith("\ufeff"):
            header[0] = header[0][1:]
        missing = [
            f
            for f in (spec.text_field, spec.id_field, spec.time_field)
            if f is not None and f not in header
        ]
        if missing:
            yield InputError(
                path,
                1,
                f"no column {missing[0]!r} in the header (columns: {', '.join(header[:20])})",
            )
            return
        width = len(header)
        for row in reader:
            if not row:
                continue
            if len(row) != width:
                yield InputError(
                    path, reader.line_num, f"has {len(row)} fields, the header has {width}", slot
                )
            else:
                yield doc_from_record(
                    dict(zip(header, row)), spec, path, slot, reader.line_num, "csv"
                )
            slot += 1
            if progress is not None and slot % _PROGRESS_EVERY == 0:
                pos = raw.tell()
                progress(pos - last)
                last = pos
    except (OSError, EOFError, ValueError, csv.Error) as e:
        yield InputError(path, reader.line_num + 1, f"cannot read on: {e}")
    finally:
        if progress is not None:
            try:
                progress(raw.tell() - last)
            except (OSError, ValueError):
                pass
        text.close()
        raw.close()


def _parquet_file(source: Source) -> Any | InputError:
    _, pq = _import_pyarrow()
    try:
        return pq.ParquetFile(source.path)
    except OSError as e:
        return InputError(source.path, None, f"cannot open as Parquet: {e}")
    except Exception as e:  # pyarrow raises ArrowInvalid (a ValueError) on foreign files
        return InputError(source.path, None, f"not a Parquet file: {e}")


def _read_parquet(
    source: Source, spec: FieldSpec, progress: ProgressFn | None
) -> Iterator[Doc | InputError]:
    pf = _parquet_file(source)
    if isinstance(pf, InputError):
        yield pf
        return
    path = source.path
    names = pf.schema_arrow.names
    wanted = [f for f in (spec.text_field, spec.id_field, spec.time_field) if f is not None]
    missing = [f for f in wanted if f not in names]
    if missing:
        yield InputError(path, None, f"no column {missing[0]!r} (columns: {', '.join(names[:20])})")
        return
    columns = list(
        dict.fromkeys(wanted + (["id"] if spec.id_field is None and "id" in names else []))
    )
    total = max(1, pf.metadata.num_rows)
    size = os.path.getsize(path)
    slot = 0
    try:
        for batch in pf.iter_batches(batch_size=8192, columns=columns):
            cols = {name: batch.column(name).to_pylist() for name in columns}
            for i in range(batch.num_rows):
                record = {name: values[i] for name, values in cols.items()}
                yield doc_from_record(record, spec, path, slot, slot + 1, "parquet")
                slot += 1
            if progress is not None:
                progress(int(size * batch.num_rows / total))
    except Exception as e:  # ArrowInvalid / OSError on a damaged file
        yield InputError(path, slot + 1, f"cannot read on: {e}")


# --------------------------------------------------------------------------------------------
# pass 2


NeedFn = Callable[[Doc], None]


class KeptWriter:
    """Writes the kept slots of each input into one output of the same format.

    JSONL and text lines are copied byte for byte; CSV/TSV rows are rewritten with the same
    header and delimiter; Parquet batches are filtered and written with the first input's
    schema; directories are copied file by file (under ``OUTPUT/<input dir name>/`` when there
    are several input directories).

    Use as a context manager; call :meth:`write` once per input, in input order.
    """

    def __init__(self, output: Source, n_inputs: int = 1) -> None:
        self.output = output
        self._n_inputs = n_inputs
        self._stream: IO[bytes] | None = None
        self._csv_text: io.TextIOWrapper | None = None
        self._csv_writer: Any = None
        self._header: list[str] | None = None
        self._pq_writer: Any = None
        self._pq_schema: Any = None
        self.written = 0
        if output.format == "dir":
            os.makedirs(output.path, exist_ok=True)
        elif output.format != "parquet":
            self._stream = open_write(output.path, output.compression)
            if output.format in ("csv", "tsv"):
                self._csv_text = io.TextIOWrapper(
                    self._stream, encoding="utf-8", errors="surrogateescape", newline=""
                )
                self._csv_writer = csv.writer(
                    self._csv_text,
                    delimiter="\t" if output.format == "tsv" else ",",
                    lineterminator="\n",
                )

    def __enter__(self) -> KeptWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Flush and close the output."""
        if self._csv_text is not None:
            self._csv_text.close()
            self._csv_text = None
            self._stream = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._pq_writer is not None:
            self._pq_writer.close()
            self._pq_writer = None
        elif self.output.format == "parquet" and self._pq_schema is None:
            # nothing was kept (or no input): still write a valid, empty file
            pass

    def write(
        self,
        source: Source,
        keep: npt.NDArray[np.bool_],
        need: npt.NDArray[np.bool_] | None = None,
        on_need: NeedFn | None = None,
        spec: FieldSpec = FieldSpec(),
        progress: ProgressFn | None = None,
    ) -> None:
        """Copy the slots of ``source`` where ``keep[slot]`` into the output.

        Slots past ``len(keep)`` are not read (pass 1 stopped there). Where ``need[slot]``, the
        slot is parsed again and handed to ``on_need`` (for cluster ids and report texts).
        """
        n = len(keep)
        if need is None or on_need is None:
            need = np.zeros(n, dtype=bool)
        fmt = source.format
        if fmt in ("jsonl", "txt"):
            seen = self._write_lines(source, keep, need, on_need, spec, progress)
        elif fmt in ("csv", "tsv"):
            seen = self._write_csv(source, keep, need, on_need, spec, progress)
        elif fmt == "parquet":
            seen = self._write_parquet(source, keep, need, on_need, spec, progress)
        elif fmt == "dir":
            seen = self._write_dir(source, keep, need, on_need)
        else:
            raise UnknownFormatError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
        if seen < n:
            raise InputError(
                source.path,
                None,
                f"has {seen} records now but had {n} when first read: "
                "it changed while neardup was reading it",
            )

    def _write_lines(
        self,
        source: Source,
        keep: npt.NDArray[np.bool_],
        need: npt.NDArray[np.bool_],
        on_need: NeedFn | None,
        spec: FieldSpec,
        progress: ProgressFn | None,
    ) -> int:
        assert self._stream is not None
        out = self._stream
        n = len(keep)
        if n == 0:
            return 0
        stream, raw = open_read(source.path, source.compression)
        slot = 0
        line = 0  # lines before the current block
        last = 0
        is_json = source.format == "jsonl"
        try:
            for lines in _line_blocks(source, stream, _BLOCK_BYTES):
                block_lines = len(lines)
                if all(map(bytes.strip, lines)):
                    # no blank line: the block's lines are slots slot, slot+1, ...
                    lines = lines[: n - slot]
                    numbers: Sequence[int] = range(line + 1, line + 1 + len(lines))
                    slots: Sequence[int] = range(slot, slot + len(lines))
                else:
                    pairs = [
                        (i, raw_line) for i, raw_line in enumerate(lines) if not _is_blank(raw_line)
                    ][: n - slot]
                    numbers = [line + 1 + i for i, _ in pairs]
                    slots = range(slot, slot + len(pairs))
                    lines = [raw_line for _, raw_line in pairs]
                line += block_lines
                if not lines:
                    continue
                kept = list(compress(lines, keep[slot : slot + len(lines)].tolist()))
                if kept:
                    kept.append(b"")
                    out.write(b"\n".join(kept))
                    self.written += len(kept) - 1
                if on_need is not None:
                    for i in np.flatnonzero(need[slot : slot + len(lines)]).tolist():
                        doc = (
                            parse_json_line(lines[i], spec, source.path, slots[i], numbers[i])
                            if is_json
                            else _parse_text_line(lines[i], source.path, slots[i], numbers[i])
                        )
                        if isinstance(doc, Doc):
                            on_need(doc)
                slot += len(lines)
                if progress is not None:
                    pos = raw.tell()
                    progress(pos - last)
                    last = pos
                if slot >= n:
                    break
        finally:
            if progress is not None:
                progress(raw.tell() - last)
            stream.close()
            raw.close()
        return slot

    def _write_csv(
        self,
        source: Source,
        keep: npt.NDArray[np.bool_],
        need: npt.NDArray[np.bool_],
        on_need: NeedFn | None,
        spec: FieldSpec,
        progress: ProgressFn | None,
    ) -> int:
        stream, raw = open_read(source.path, source.compression)
        text, reader = _csv_reader(stream, source.format)
        n = len(keep)
        slot = 0
        last = 0
        try:
            header = next(reader, None)
            if header is None:
                return 0
            if header and header[0].startswith("\ufeff"):
                header[0] = header[0][1:]
            if self._header is None:
                self._header = header
                self._csv_writer.writerow(header)
            elif header != self._header:
                raise InputError(
                    source.path,
                    1,
                    f"header {header[:10]} differs from the first input's {self._header[:10]}; "
                    "CSV inputs written to one output must share a header",
                )
            keep_l = keep.tolist()
            need_l = need.tolist()
            for row in reader:
                if slot >= n:
                    break
                if not row:
                    continue
                if keep_l[slot]:
                    self._csv_writer.writerow(row)
                    self.written += 1
                if need_l[slot] and on_need is not None and len(row) == len(header):
                    doc = doc_from_record(
                        dict(zip(header, row)), spec, source.path, slot, reader.line_num, "csv"
                    )
                    if isinstance(doc, Doc):
                        on_need(doc)
                slot += 1
                if progress is not None and slot % _PROGRESS_EVERY == 0:
                    pos = raw.tell()
                    progress(pos - last)
                    last = pos
        finally:
            if progress is not None:
                progress(raw.tell() - last)
            text.detach()
            stream.close()
            raw.close()
        return slot

    def _write_parquet(
        self,
        source: Source,
        keep: npt.NDArray[np.bool_],
        need: npt.NDArray[np.bool_],
        on_need: NeedFn | None,
        spec: FieldSpec,
        progress: ProgressFn | None,
    ) -> int:
        pa, pq = _import_pyarrow()
        pf = pq.ParquetFile(source.path)
        if self._pq_schema is None:
            self._pq_schema = pf.schema_arrow
            self._pq_writer = pq.ParquetWriter(self.output.path, self._pq_schema)
        elif not pf.schema_arrow.equals(self._pq_schema):
            raise InputError(
                source.path,
                None,
                "schema differs from the first input's; Parquet inputs written to one output "
                "must share a schema",
            )
        n = len(keep)
        total = max(1, pf.metadata.num_rows)
        size = os.path.getsize(source.path)
        start = 0
        for batch in pf.iter_batches(batch_size=8192):
            if start >= n:
                break
            rows = min(batch.num_rows, n - start)
            if rows < batch.num_rows:
                batch = batch.slice(0, rows)
            mask = keep[start : start + rows]
            if mask.any():
                kept = batch.filter(pa.array(mask))
                self._pq_writer.write_batch(kept)
                self.written += kept.num_rows
            if on_need is not None:
                wanted = np.flatnonzero(need[start : start + rows])
                if len(wanted):
                    sub = batch.take(pa.array(wanted))
                    cols = {name: sub.column(name).to_pylist() for name in sub.schema.names}
                    for j, i in enumerate(wanted.tolist()):
                        record = {name: values[j] for name, values in cols.items()}
                        doc = doc_from_record(
                            record, spec, source.path, start + i, start + i + 1, "parquet"
                        )
                        if isinstance(doc, Doc):
                            on_need(doc)
            start += rows
            if progress is not None:
                progress(int(size * rows / total))
        return start

    def _write_dir(
        self,
        source: Source,
        keep: npt.NDArray[np.bool_],
        need: npt.NDArray[np.bool_],
        on_need: NeedFn | None,
    ) -> int:
        root = source.path
        files = _dir_files(root)[: len(keep)]
        base = self.output.path
        if self._n_inputs > 1:
            base = os.path.join(base, os.path.basename(os.path.normpath(root)))
        for slot, path in enumerate(files):
            if keep[slot]:
                target = os.path.join(base, os.path.relpath(path, root))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(path, target)
                self.written += 1
            if need[slot] and on_need is not None:
                doc = _read_dir_file(path, root, slot)
                if isinstance(doc, Doc):
                    on_need(doc)
        return len(files)


def output_source(path: str, inputs: list[Source], format: str | None = None) -> Source:
    """The output of a job over ``inputs``: the inputs' format, compression from its name.

    Raises :class:`UnknownFormatError` when the inputs mix formats or the output's name says
    another format.
    """
    formats = sorted({s.format for s in inputs})
    if len(formats) != 1:
        raise UnknownFormatError(
            f"inputs mix formats ({', '.join(formats)}); run one format at a time"
        )
    fmt = formats[0]
    if fmt == "dir":
        if os.path.exists(path) and not os.path.isdir(path):
            raise UnknownFormatError(f"{path}: the inputs are directories, so must be the output")
        return Source(path, "dir")
    stem, ext = os.path.splitext(path)
    compression = _COMPRESSIONS.get(ext.lower())
    name_fmt = _EXTENSIONS.get(os.path.splitext(stem if compression else path)[1].lower())
    if name_fmt is not None and name_fmt != fmt and format is None:
        raise UnknownFormatError(
            f"{path}: the name says {name_fmt} but the inputs are {fmt}; "
            "the output is written in the inputs' format"
        )
    if fmt == "parquet" and compression is not None:
        raise UnknownFormatError(f"{path}: parquet files are compressed inside; drop the suffix")
    return Source(path, format or fmt, compression)


def eprint(*parts: object) -> None:
    """Print to stderr (messages, warnings, summaries)."""
    print(*parts, file=sys.stderr, flush=True)
