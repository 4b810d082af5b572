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

The parts, each in its own module (import the names from here, ``neardup.io``):

- ``_sources``: formats, :class:`Source`, :func:`detect`, :func:`input_sources`,
  :func:`spark_parts`, :func:`output_source` (written aside and put in place by
  :func:`staged_output` and :func:`finish_output`), :class:`FieldSpec` and the two errors;
- ``_streams``: (de)compressing byte streams (:func:`open_read`, :func:`open_write`) and
  progress in bytes on disk;
- ``_records``: :class:`Doc`, :class:`DocBatch`, :func:`parse_time`, the id rule
  (:func:`record_id`, :func:`id_or_place`), :func:`doc_from_record`, :func:`parse_json_line`;
- ``_lines``: the block parser of JSONL and text lines (2 MiB blocks into columns);
- ``_readers``: pass 1, :func:`read_docs` and :func:`read_batches`, and the CSV/TSV, Parquet and
  directory readers;
- ``_writers``: pass 2, :class:`KeptWriter`.
"""

from __future__ import annotations

import sys

from neardup.io._readers import csv_header, csv_reader, dir_files, read_batches, read_docs
from neardup.io._records import (
    EXACT_FLOAT_ID,
    Doc,
    DocBatch,
    doc_from_record,
    id_or_place,
    parse_json_line,
    parse_time,
    record_id,
    too_large_id,
)
from neardup.io._sources import (
    FORMATS,
    FieldSpec,
    InputError,
    Source,
    UnknownFormatError,
    detect,
    finish_output,
    input_sources,
    named,
    output_source,
    spark_parts,
    staged_output,
    within,
    written_in_place,
)
from neardup.io._streams import READ_ERRORS, open_read, open_write
from neardup.io._streams import ProgressFn as ProgressFn
from neardup.io._writers import KeptWriter, json_line
from neardup.io._writers import NeedFn as NeedFn

__all__ = [
    "dir_files",
    "FORMATS",
    "Doc",
    "DocBatch",
    "FieldSpec",
    "InputError",
    "KeptWriter",
    "Source",
    "UnknownFormatError",
    "csv_header",
    "csv_reader",
    "detect",
    "input_sources",
    "named",
    "within",
    "spark_parts",
    "doc_from_record",
    "id_or_place",
    "READ_ERRORS",
    "open_read",
    "open_write",
    "output_source",
    "json_line",
    "finish_output",
    "staged_output",
    "written_in_place",
    "parse_json_line",
    "parse_time",
    "read_batches",
    "read_docs",
    "record_id",
    "EXACT_FLOAT_ID",
    "too_large_id",
]

# The classes are neardup.io's, wherever they are defined: that is the name their reprs,
# tracebacks and pickles carry.
for _cls in (Doc, DocBatch, FieldSpec, InputError, KeptWriter, Source, UnknownFormatError):
    _cls.__module__ = __name__
del _cls


def eprint(*parts: object) -> None:
    """Print to stderr (messages, warnings, summaries)."""
    print(*parts, file=sys.stderr, flush=True)


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless n is 1: "1 cluster", "2,000 documents"."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
