"""Pass 2: :class:`KeptWriter` copies the kept slots of each input into the output, and parses
again the few slots the caller still needs (cluster ids, report texts)."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from collections.abc import Sequence
from itertools import compress
from typing import IO, Any, Callable, NamedTuple

import numpy as np
import numpy.typing as npt

from neardup.io._lines import BLOCK_BYTES, line_blocks
from neardup.io._readers import csv_header, csv_reader, dir_files, parquet_records, read_dir_file
from neardup.io._records import Doc, doc_from_record, is_blank, line_parser
from neardup.io._sources import DEFAULT_SPEC, FieldSpec, InputError, Source, unknown_format
from neardup.io._streams import PROGRESS_EVERY, InputFile, ProgressFn, import_pyarrow, open_write

NeedFn = Callable[[Doc], None]
"""Called with each slot that ``need`` marks, parsed again."""


class _Job(NamedTuple):
    """One :meth:`KeptWriter.write` call: copy slot ``i`` of ``source`` where ``keep[i]``; parse
    it again for ``on_need`` where ``need[i]``."""

    source: Source
    keep: npt.NDArray[np.bool_]
    need: npt.NDArray[np.bool_]
    on_need: NeedFn | None
    spec: FieldSpec
    progress: ProgressFn | None


class KeptWriter:
    """Writes the kept slots of each input into one output of the same format.

    JSONL and text lines are copied byte for byte; CSV/TSV rows are rewritten with the same
    header and delimiter; Parquet batches are filtered and written with the first input's
    schema; directories are copied file by file (under ``OUTPUT/<input dir name>/`` when there
    are several inputs: the source's ``name``, :func:`~neardup.io.named`).

    Use as a context manager; call :meth:`write` once per input, in input order.
    """

    def __init__(self, output: Source) -> None:
        self.output = output
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
            # no input could be opened (or there was none): still a valid Parquet file, empty
            pa, pq = import_pyarrow()
            self._pq_schema = pa.schema([])
            pq.write_table(self._pq_schema.empty_table(), self.output.path)

    def write(
        self,
        source: Source,
        keep: npt.NDArray[np.bool_],
        need: npt.NDArray[np.bool_] | None = None,
        on_need: NeedFn | None = None,
        spec: FieldSpec = DEFAULT_SPEC,
        progress: ProgressFn | None = None,
    ) -> None:
        """Copy the slots of ``source`` where ``keep[slot]`` into the output.

        Slots past ``len(keep)`` are not read (pass 1 stopped there). Where ``need[slot]``, the
        slot is parsed again and handed to ``on_need`` (for cluster ids and report texts).
        """
        n = len(keep)
        if need is None or on_need is None:
            need = np.zeros(n, dtype=bool)
        job = _Job(source, keep, need, on_need, spec, progress)
        fmt = source.format
        if fmt in ("jsonl", "txt"):
            seen = self._write_lines(job)
        elif fmt in ("csv", "tsv"):
            seen = self._write_csv(job)
        elif fmt == "parquet":
            seen = self._write_parquet(job)
        elif fmt == "dir":
            seen = self._write_dir(job)
        else:
            raise unknown_format(fmt)
        if seen < n:
            raise InputError(
                source.path,
                None,
                f"has {seen} records now but had {n} when first read: "
                "it changed while neardup was reading it",
            )

    def _write_lines(self, job: _Job) -> int:
        source, keep, need, on_need, spec, progress = job
        assert self._stream is not None
        out = self._stream
        n = len(keep)
        if n == 0:
            return 0
        slot = 0
        line = 0  # lines before the current block
        parse = line_parser(source.format, spec, source.path)
        with InputFile(source, progress) as input_file:
            for lines in line_blocks(source, input_file.stream, BLOCK_BYTES):
                block_lines = len(lines)
                if all(map(bytes.strip, lines)):
                    # no blank line: the block's lines are slots slot, slot+1, ...
                    lines = lines[: n - slot]
                    numbers: Sequence[int] = range(line + 1, line + 1 + len(lines))
                    slots: Sequence[int] = range(slot, slot + len(lines))
                else:
                    pairs = [
                        (i, raw_line) for i, raw_line in enumerate(lines) if not is_blank(raw_line)
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
                        doc = parse(lines[i], slots[i], numbers[i])
                        if isinstance(doc, Doc):
                            on_need(doc)
                slot += len(lines)
                input_file.update()
                if slot >= n:
                    break
        return slot

    def _write_csv(self, job: _Job) -> int:
        source, keep, need, on_need, spec, progress = job
        input_file = InputFile(source, progress)
        text, reader = csv_reader(input_file.stream, source.format)
        n = len(keep)
        slot = 0
        try:
            header = csv_header(reader)
            if header is None:
                return 0
            if n == 0 and (self._header is not None or spec.text_field not in header):
                return 0  # (nothing of it is written: no rows, or skipped for its header)
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
            # (no row is read past the n that pass 1 read: the next may be the one it could not)
            while slot < n:
                row = next(reader, None)
                if row is None:
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
                if progress is not None and slot % PROGRESS_EVERY == 0:
                    input_file.update()
        finally:
            text.detach()
            input_file.close()
        return slot

    def _write_parquet(self, job: _Job) -> int:
        source, keep, need, on_need, spec, progress = job
        pa, pq = import_pyarrow()
        n = len(keep)
        try:
            pf = pq.ParquetFile(source.path)
        except Exception:
            if n == 0:  # pass 1 could not open it either: reported there, nothing to copy
                return 0
            raise
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
                    records = parquet_records(sub, sub.schema.names)
                    for record, i in zip(records, wanted.tolist()):
                        doc = doc_from_record(
                            record, spec, source.path, start + i, start + i + 1, "parquet"
                        )
                        if isinstance(doc, Doc):
                            on_need(doc)
            start += rows
            if progress is not None:
                progress(int(size * rows / total))
        return start

    def _write_dir(self, job: _Job) -> int:
        source, keep, need, on_need, _, _ = job
        root = source.path
        files = dir_files(root)[: len(keep)]
        base = os.path.join(self.output.path, source.name)
        for slot, path in enumerate(files):
            if keep[slot]:
                target = os.path.join(base, os.path.relpath(path, root))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(path, target)
                self.written += 1
            if need[slot] and on_need is not None:
                doc = read_dir_file(path, source, slot)
                if isinstance(doc, Doc):
                    on_need(doc)
        return len(files)


def json_line(record: Any) -> str:
    """``record`` as one line of JSON (no newline): characters as they are, but for a string
    holding a lone surrogate (a JSONL input may escape one: ``"\\ud800"``), which UTF-8 cannot
    hold: then the line escapes every non-ASCII character, as the input did."""
    line = json.dumps(record, ensure_ascii=False)
    if not line.isascii():
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(record)
    return line
