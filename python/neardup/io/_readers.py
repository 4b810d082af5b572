"""Pass 1: every slot of an input as a :class:`~neardup.io.Doc` or an
:class:`~neardup.io.InputError` (:func:`read_docs`), or in batches of columns
(:func:`read_batches`); the CSV/TSV, Parquet and directory readers, and the pieces of them that
pass 2 (:mod:`neardup.io._writers`) reads again."""

from __future__ import annotations

import codecs
import csv
import io
import os
import re
from collections.abc import Iterator
from typing import IO, Any

from neardup.htmltext import looks_like_html
from neardup.io._lines import BLOCK_BYTES, read_line_batches
from neardup.io._records import Doc, DocBatch, doc_from_record
from neardup.io._sources import (
    DEFAULT_SPEC,
    FieldSpec,
    InputError,
    Source,
    unknown_format,
    within,
)
from neardup.io._streams import (
    PROGRESS_EVERY,
    READ_ERRORS,
    ProgressFn,
    import_pyarrow,
    open_or_error,
)

_BATCH_DOCS = 8192
DIR_TEXT = (".txt", ".text")
DIR_HTML = (".html", ".htm")

# csv's default limit (128 KiB per field) rejects long documents.
csv.field_size_limit(2**31 - 1)


def read_docs(
    source: Source,
    spec: FieldSpec = DEFAULT_SPEC,
    progress: ProgressFn | None = None,
) -> Iterator[Doc | InputError]:
    """Yield one :class:`Doc` or :class:`InputError` per slot of ``source``, in order.

    A file that cannot be read on (a corrupt compressed stream, a missing Parquet column) ends
    with one final InputError; the slots read before it stand.
    """
    if source.format in ("jsonl", "txt"):
        for batch in read_line_batches(source, spec, progress, BLOCK_BYTES):
            yield from batch.docs()
    elif source.format in ("csv", "tsv"):
        yield from _read_csv(source, spec, progress)
    elif source.format == "parquet":
        yield from _read_parquet(source, spec, progress)
    elif source.format == "dir":
        for slot, path in enumerate(dir_files(source.path)):
            if progress is not None:
                try:
                    progress(os.path.getsize(path))
                except OSError:
                    pass
            yield read_dir_file(path, source, slot)
    else:
        raise unknown_format(source.format)


def read_batches(
    source: Source,
    spec: FieldSpec = DEFAULT_SPEC,
    progress: ProgressFn | None = None,
    block_bytes: int | None = None,
) -> Iterator[DocBatch]:
    """:func:`read_docs` in batches of consecutive slots, as columns.

    The same documents and errors, in the same order; JSONL and text lines are read in blocks of
    ``block_bytes`` (default 2 MiB) and parsed a block at a time, one record after the other
    only in a block that holds a bad or blank line.
    """
    if source.format in ("jsonl", "txt"):
        yield from read_line_batches(source, spec, progress, block_bytes or BLOCK_BYTES)
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


# --------------------------------------------------------------------------------------------
# CSV / TSV


def csv_reader(stream: IO[bytes], fmt: str) -> tuple[io.TextIOWrapper, Any]:
    """A text layer over ``stream`` and a ``csv.reader`` (``,`` or, for ``tsv``, tab) on it."""
    # surrogateescape: invalid UTF-8 survives to be reported per row (and is written back as is)
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="surrogateescape", newline="")
    # strict: a quoted field left open is an error, not the rest of the file in one field
    return text, csv.reader(text, delimiter="\t" if fmt == "tsv" else ",", strict=True)


def csv_header(reader: Any) -> list[str] | None:
    """The first row of ``reader`` without a UTF-8 byte order mark; None for an empty file."""
    header: list[str] | None = next(reader, None)
    if header and header[0].startswith("\ufeff"):
        header[0] = header[0][1:]
    return header


def _read_csv(
    source: Source, spec: FieldSpec, progress: ProgressFn | None
) -> Iterator[Doc | InputError]:
    opened = open_or_error(source, progress)
    if isinstance(opened, InputError):
        yield opened
        return
    path = source.path
    text, reader = csv_reader(opened.stream, source.format)
    slot = 0
    start = 1  # (the line after the last whole row: where a row that cannot be read starts)
    try:
        header = csv_header(reader)
        if header is None:
            return
        fields = [f for f in (spec.text_field, spec.id_field, spec.time_field) if f is not None]
        missing = [f for f in fields if f not in header]
        if missing:
            yield InputError(
                path,
                1,
                f"no column {missing[0]!r} in the header (columns: {', '.join(header[:20])})",
            )
            return
        twice = [f for f in fields if header.count(f) > 1]
        if twice:
            yield InputError(path, 1, f"the header names column {twice[0]!r} more than once")
            return
        width = len(header)
        start = reader.line_num + 1
        for row in reader:
            start = reader.line_num + 1
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
            if progress is not None and slot % PROGRESS_EVERY == 0:
                opened.update()
    except READ_ERRORS as e:
        yield InputError(path, start, f"cannot read on: {e}")
    finally:
        text.detach()
        opened.close()


# --------------------------------------------------------------------------------------------
# Parquet


def parquet_records(batch: Any, names: list[str]) -> list[dict[str, Any]]:
    """The rows of a pyarrow record batch as dicts of the columns ``names``."""
    return [dict(zip(names, row)) for row in zip(*(batch.column(n).to_pylist() for n in names))]


def _parquet_file(source: Source) -> Any | InputError:
    _, pq = import_pyarrow()
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
            for record in parquet_records(batch, columns):
                yield doc_from_record(record, spec, path, slot, slot + 1, "parquet")
                slot += 1
            if progress is not None:
                progress(int(size * batch.num_rows / total))
    except Exception as e:  # ArrowInvalid / OSError on a damaged file
        yield InputError(path, slot + 1, f"cannot read on: {e}")


# --------------------------------------------------------------------------------------------
# directories


def dir_files(root: str) -> list[str]:
    """The documents of a directory: .txt/.text/.html/.htm files, recursively, sorted by path
    (regular files only, or links to them: a pipe or a device so named would never end).
    Links to directories outside the tree are followed, each once; a link within the tree, or to
    a directory that holds it, is not (its files are read by their own path, or it would loop)."""
    found = []
    top = os.path.realpath(root)
    followed: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        # (in place: the walk goes into the directories left in the list only)
        dirnames[:] = [
            d for d in sorted(dirnames) if _goes_in(os.path.join(dirpath, d), top, followed)
        ]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if name.lower().endswith(DIR_TEXT + DIR_HTML) and os.path.isfile(path):
                found.append(path)
    found.sort(key=lambda p: os.path.relpath(p, root).split(os.sep))
    return found


def _goes_in(path: str, top: str, followed: set[str]) -> bool:
    """Whether :func:`dir_files` reads the directory ``path`` of the tree whose real path is
    ``top``: a directory, or a link to one that shares no directory with the tree or with the
    links followed before (then it is marked followed)."""
    if not os.path.islink(path):
        return True
    real = os.path.realpath(path)
    if any(within(real, other) or within(other, real) for other in (top, *followed)):
        return False
    followed.add(real)
    return True


_BOMS = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
# <meta charset="x"> and <meta http-equiv="Content-Type" content="text/html; charset=x">
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_:.-]+)""", re.I)
# Declared labels that browsers read as a superset of the Python codec of the same name (the
# WHATWG Encoding Standard): pages declared gb2312 hold GBK characters, euc-kr ones windows-949
# syllables; a UTF-16 label read from ASCII-compatible bytes cannot be right and means UTF-8.
_WHATWG = {
    **dict.fromkeys(
        ("ascii", "us-ascii", "ansi_x3.4-1968", "iso-8859-1", "iso8859-1", "iso_8859-1",
         "iso_8859-1:1987", "latin1",
         "latin-1", "l1", "cp819", "ibm819", "csisolatin1", "iso-ir-100", "x-cp1252"),
        "cp1252",
    ),
    **dict.fromkeys(
        ("gb2312", "gbk", "x-gbk", "chinese", "csgb2312", "csiso58gb231280", "iso-ir-58",
         "gb_2312", "gb_2312-80"),
        "gb18030",
    ),
    **dict.fromkeys(("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"), "big5hkscs"),
    **dict.fromkeys(
        ("euc-kr", "cseuckr", "csksc56011987", "iso-ir-149", "korean", "ks_c_5601-1987",
         "ks_c_5601-1989", "ksc5601", "ksc_5601", "windows-949"),
        "cp949",
    ),
    **dict.fromkeys(
        ("shift_jis", "shift-jis", "sjis", "csshiftjis", "ms932", "ms_kanji", "windows-31j",
         "x-sjis"),
        "cp932",
    ),
    **dict.fromkeys(("iso-8859-9", "iso8859-9", "latin5", "l5", "iso-ir-148"), "cp1254"),
    **dict.fromkeys(("iso-8859-11", "iso8859-11", "tis-620"), "cp874"),
    **dict.fromkeys(
        ("utf-16", "utf-16le", "utf-16be", "ucs-2", "unicode", "unicodefeff", "unicodefffe",
         "csunicode", "iso-10646-ucs-2"),
        "utf-8",
    ),
}  # fmt: skip


#: charset-normalizer's names of the encodings preferred among those it rates alike.
_TIE_BREAK = ("gb18030", "cp1252")


def _nearly(data: bytes, codec: str) -> str | None:
    """``data`` decoded by ``codec`` when all but a few of its bytes are (stray bytes, at most
    one in 1,000 characters and one more, as U+FFFD, as a browser shows them); else None."""
    text = data.decode(codec, "replace")
    return text if text.count("\ufffd") <= 1 + len(text) // 1000 else None


def decode_file(data: bytes, html: bool) -> str | None:
    """The text of a file's bytes, decoded by its byte-order mark, else (a page) the charset it
    declares in a ``<meta>`` of its first 4 kB, else UTF-8 -- either with a few stray bytes as
    U+FFFD -- else what charset-normalizer detects; None when nothing works."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(codec)
            except UnicodeDecodeError:
                return None
    if html:
        declared = _META_CHARSET.search(data[:4096])
        if declared is not None:
            label = declared.group(1).decode("ascii").lower()
            try:
                codec = _WHATWG.get(label) or codecs.lookup(label).name
                text = _nearly(data, codec)
                if text is not None:
                    return text
            except LookupError:
                pass  # an unknown declaration, or a wrong one: the next rules decide
    text = _nearly(data, "utf-8")
    if text is not None:
        return text
    from charset_normalizer import from_bytes

    found = from_bytes(data)
    best = found.best()
    if best is None:
        return None
    # Of decodings it rates alike (short texts often tie), the one a browser takes by default
    # where our users are: GBK for Chinese, windows-1252 for Western text (not, say, cp1006).
    tied = {m.encoding: m for m in found if (m.chaos, m.coherence) == (best.chaos, best.coherence)}
    return str(next((tied[c] for c in _TIE_BREAK if c in tied), best))


def read_dir_file(path: str, source: Source, slot: int) -> Doc | InputError:
    """The document in one file of the directory input ``source``; its id is the path relative
    to the directory, after the directory's name when it has one (:func:`named`)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return InputError(path, None, f"cannot read: {e.strerror or e}", slot)
    html = path.lower().endswith(DIR_HTML)
    text = decode_file(data, html)
    if text is None:
        return InputError(
            path,
            None,
            "cannot decode: no byte-order mark, "
            + ("no usable declared charset, " if html else "")
            + "not UTF-8, and charset-normalizer found no encoding",
            slot,
        )
    if html and not looks_like_html(text):
        # a fragment (no doctype/html/body): the document a browser would build around it, so
        # the dedup policy reads it as a page
        text = f"<html><body>{text}</body></html>"
    rel = os.path.relpath(path, source.path).replace(os.sep, "/")
    return Doc(slot, 1, f"{source.name}/{rel}" if source.name else rel, text, None)
