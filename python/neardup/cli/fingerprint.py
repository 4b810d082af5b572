"""`neardup fingerprint`: add a SimHash fingerprint column to every record of a corpus.

The output has the inputs' format with one more field (``--field``, default ``fingerprint``):
JSONL objects get a key, CSV/TSV a last column, Parquet a column (uint64 for ``--encoding int``,
string for ``hex``). Text inputs (one document per line) become ``FINGERPRINT<TAB>TEXT`` lines;
a directory becomes JSONL ``{"id": relative path, "fingerprint": ...}``.

Fingerprints are unsigned 64-bit integers, written as 16 lowercase hex digits (``--encoding hex``,
the default) or decimal (``int``). The text is fingerprinted as the deduplicators do (the
policy's ``prepare``: HTML pages by their main text, then normalised) with the policy's
fingerprinter (``--preset`` changes the preset), so values match the Python ``Deduplicator``, the
service and ``neardup index``; ``--raw`` fingerprints the text as it is
(``Fingerprinter().fingerprint(text)``).

Exit codes as ``neardup dedup``: 0 done, 1 input error, 2 usage error.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from neardup import io as nio
from neardup._core import PRESETS
from neardup.cli._paths import paths_refused
from neardup.cli._pipes import PipeError, run_piped, uses_pipes
from neardup.cli.dedup import (
    EXIT_CODES,
    EXIT_INPUT,
    EXIT_OK,
    EXIT_USAGE,
    Progress,
    add_input_arguments,
    eprint,
    input_bytes,
    open_sources,
)
from neardup.dedup import Policy
from neardup.io import counted

_CHUNK = 8192

DESCRIPTION = """\
Add the SimHash fingerprint of each record's text as one more field (--field): a JSONL key, a
last CSV/TSV column, a Parquet column (uint64 with --encoding int, string with hex). Text inputs
(one document per line) become FINGERPRINT<TAB>TEXT lines; a directory becomes JSONL
{"id": relative path, "fingerprint": ...}. Fingerprints are unsigned 64-bit integers, of the
text as the deduplicators see it (HTML pages by their main text, normalised), so they match
Deduplicator, the service and neardup index; --raw takes the text as it is."""

EXAMPLES = """examples:
  neardup fingerprint docs.jsonl -o docs-fp.jsonl
  neardup fingerprint docs.parquet -o docs-fp.parquet --encoding int --field simhash
  neardup fingerprint notices.csv --text-field body -o notices-fp.csv --preset seed000

"""


def add_parser(subparsers: Any) -> None:
    """Register ``neardup fingerprint``."""
    p = subparsers.add_parser(
        "fingerprint",
        help="add a SimHash fingerprint column to a corpus",
        description=DESCRIPTION,
        epilog=EXAMPLES + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_input_arguments(p, time_field=False)
    p.add_argument("-o", "--output", required=True, help="output file (the inputs' format)")
    p.add_argument(
        "--field", default="fingerprint", help="name of the new field (default: fingerprint)"
    )
    p.add_argument(
        "--encoding",
        choices=("hex", "int"),
        default="hex",
        help="16 hex digits (default) or the unsigned decimal integer",
    )
    p.add_argument(
        "--preset",
        default=None,
        choices=PRESETS,
        help="fingerprint preset (default: default, the policy's)",
    )
    p.add_argument(
        "--raw",
        action="store_true",
        help="fingerprint the text as it is (default: as the deduplicators do, normalised, "
        "HTML pages by their main text)",
    )
    p.set_defaults(run=run)


def make_policy(preset: str | None) -> Policy:
    """The dedup policy, with another fingerprint preset when given."""
    policy = Policy.default()
    if preset is not None:
        policy = policy.replace(fingerprint={**policy.fingerprint, "preset": preset})
    return policy


class TextFingerprinter:
    """Fingerprints texts as the deduplicators do (``Policy.prepare``: the main text of HTML
    pages, normalised), or the texts as they are (``raw``)."""

    def __init__(self, policy: Policy, raw: bool = False) -> None:
        self.policy = policy
        self.raw = raw
        self.fingerprinter = policy.make_fingerprinter()  # ValueError on an unknown preset

    def many(self, texts: list[str]) -> np.ndarray:
        """A uint64 array, one fingerprint per text."""
        if self.raw:
            return np.asarray(self.fingerprinter.fingerprint_many(texts), dtype=np.uint64)
        return self.policy.fingerprint_many(self.fingerprinter, texts)

    def one(self, text: str) -> int:
        """The fingerprint of one text."""
        return int(self.many([text])[0])


def encode(fp: int, encoding: str) -> str | int:
    """A fingerprint as written: 16 hex digits or the int."""
    return f"{fp:016x}" if encoding == "hex" else fp


class _Job:
    def __init__(self, args: argparse.Namespace, fingerprinter: TextFingerprinter) -> None:
        self.args = args
        self.f = fingerprinter
        self.spec = nio.FieldSpec(args.text_field, args.id_field, None)
        self.read = 0
        self.skipped = 0

    def bad(self, error: nio.InputError) -> bool:
        """Handle a bad record; True when the job must stop."""
        if self.args.on_error == "fail":
            eprint(f"neardup fingerprint: {error}")
            eprint("(--on-error skip leaves bad records out and goes on)")
            return True
        if self.skipped < 10 and not self.args.quiet:
            eprint(f"neardup fingerprint: skipped {error}")
        self.skipped += 1
        return False

    def fps(self, texts: list[str]) -> list[int]:
        self.read += len(texts)
        return [int(x) for x in self.f.many(texts).tolist()]


def run(args: argparse.Namespace) -> int:
    """Run ``neardup fingerprint``; returns the exit code."""
    if uses_pipes(args) and not getattr(args, "output_label", None):
        args.output_label = args.output
        try:
            return run_piped(args, run)
        except (PipeError, nio.UnknownFormatError) as e:
            eprint(f"neardup fingerprint: {e}")
            return EXIT_USAGE
        except BrokenPipeError:
            raise  # (standard output closed by its reader: neardup.cli.main ends quietly)
        except OSError as e:
            eprint(f"neardup fingerprint: -: {e}")
            return EXIT_INPUT
    opened = open_sources(args, "fingerprint")
    if isinstance(opened, int):
        return opened
    sources = opened
    formats = {s.format for s in sources}
    if len(formats) != 1:
        eprint(f"neardup fingerprint: inputs mix formats ({', '.join(sorted(formats))})")
        return EXIT_USAGE
    fmt = formats.pop()
    if paths_refused("fingerprint", [s.path for s in sources], {"-o": args.output}):
        return EXIT_USAGE
    kept_fields = {"text": args.text_field, "id": args.id_field or "id"}
    for kind, name in kept_fields.items():
        if args.field == name:
            eprint(
                f"neardup fingerprint: --field {name!r} would overwrite each record's {kind}; "
                "name the new field otherwise (default: fingerprint)"
            )
            return EXIT_USAGE
    try:
        if fmt == "dir":
            output = nio.detect(args.output, None)
            if output.format != "jsonl":
                raise nio.UnknownFormatError(
                    f"{args.output}: a directory's fingerprints are written as JSONL; "
                    "name the output .jsonl"
                )
        else:
            output = nio.output_source(args.output, sources)
        fingerprinter = TextFingerprinter(make_policy(args.preset), raw=args.raw)
    except (nio.UnknownFormatError, ValueError) as e:
        eprint(f"neardup fingerprint: {e}")
        return EXIT_USAGE
    job = _Job(args, fingerprinter)
    progress = Progress(input_bytes(sources), "fingerprinting", args.quiet)
    # the output appears whole or not at all (as with dedup): written aside, renamed at the end
    staged = nio.staged_output(output)
    ok = False
    try:
        if fmt == "parquet":
            ok = _parquet(job, sources, staged, progress)
        else:
            with nio.open_write(staged.path, staged.compression) as out:
                if fmt == "jsonl":
                    ok = _jsonl(job, sources, out, progress)
                elif fmt in ("csv", "tsv"):
                    ok = _csv(job, sources, out, fmt, progress)
                else:  # txt, dir: from the generic document reader
                    ok = _docs(job, sources, out, fmt, progress)
        if ok:
            nio.finish_output(staged, output)
    except (nio.InputError, OSError) as e:
        eprint(f"neardup fingerprint: {e}")
        return EXIT_INPUT
    finally:
        progress.close()
        if staged is not output and os.path.exists(staged.path):
            os.remove(staged.path)
    if not ok:
        return EXIT_INPUT
    if not args.quiet:
        eprint(
            f"neardup fingerprint: {counted(job.read, 'document')}"
            + (f" ({counted(job.skipped, 'bad record')} skipped)" if job.skipped else "")
            + f" -> {getattr(args, 'output_label', None) or args.output}"
        )
    return EXIT_OK


def _with_field(rawline: bytes, record: dict[str, Any], field: str, value: str | int) -> bytes:
    """The JSON line ``rawline`` (of ``record``) with ``field`` set to ``value``: the line as it
    was read, the field added at its end (numbers keep their digits, and one JSON cannot write
    back, such as 1e400, stays as it was); a record that has the field already (this command's
    output) is written anew."""
    if field in record:
        record[field] = value
        return nio.json_line(record).encode("utf-8")
    body = rawline.rstrip()
    head = body[:-1].rstrip()  # (the object's closing brace is the line's last character)
    comma = b", " if record else b""
    return head + comma + json.dumps({field: value})[1:].encode("ascii")


def _jsonl(job: _Job, sources: list[nio.Source], out: Any, progress: Progress) -> bool:
    args = job.args
    for source in sources:
        stream, raw = nio.open_read(source.path, source.compression)
        records: list[tuple[bytes, dict[str, Any]]] = []
        texts: list[str] = []

        def flush(records: list[tuple[bytes, dict[str, Any]]], texts: list[str]) -> None:
            for (rawline, record), fp in zip(records, job.fps(texts)):
                line = _with_field(rawline, record, args.field, encode(fp, args.encoding))
                out.write(line + b"\n")
            progress.count(len(texts))
            records.clear()
            texts.clear()

        try:
            line = slot = 0
            lines = iter(stream)
            while True:
                try:
                    rawline = next(lines, None)
                except nio.READ_ERRORS as e:
                    # A damaged compressed stream: the whole lines before it were read.
                    flush(records, texts)
                    if job.bad(nio.InputError(source.path, line + 1, f"cannot read on: {e}")):
                        return False
                    break
                if rawline is None:
                    break
                line += 1
                if not rawline.strip():
                    continue
                doc = nio.parse_json_line(rawline, job.spec, source.path, slot, line)
                slot += 1
                if isinstance(doc, nio.InputError):
                    if job.bad(doc):
                        return False
                    continue
                records.append((rawline, json.loads(rawline)))
                texts.append(doc.text)
                if len(texts) >= _CHUNK:
                    flush(records, texts)
            flush(records, texts)
        finally:
            progress.advance(os.path.getsize(source.path))
            stream.close()
            raw.close()
    return True


def _csv(job: _Job, sources: list[nio.Source], out: Any, fmt: str, progress: Progress) -> bool:
    args = job.args
    delimiter = "\t" if fmt == "tsv" else ","
    text_out = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", newline="")
    writer = csv.writer(text_out, delimiter=delimiter, lineterminator="\n")
    header0: list[str] | None = None
    try:
        for source in sources:
            stream, raw = nio.open_read(source.path, source.compression)
            text_in, reader = nio.csv_reader(stream, fmt)
            try:
                try:
                    header = nio.csv_header(reader)
                except nio.READ_ERRORS as e:
                    if job.bad(nio.InputError(source.path, 1, f"cannot read: {e}")):
                        return False
                    continue
                if header is None:
                    continue
                if args.text_field not in header:
                    columns = ", ".join(header[:20])
                    missing = f"no column {args.text_field!r} (columns: {columns})"
                    if job.bad(nio.InputError(source.path, 1, missing)):
                        return False
                    continue  # (--on-error skip: the next input)
                # (an input that has the column already, e.g. this command's output: replaced)
                at = header.index(args.field) if args.field in header else None
                if header0 is None:
                    header0 = header
                    writer.writerow(header if at is not None else [*header, args.field])
                elif header != header0:
                    raise nio.InputError(
                        source.path, 1, "header differs from the first input's; one at a time"
                    )
                rows: list[list[str]] = []
                texts: list[str] = []
                slot = 0
                lines = iter(reader)
                while True:
                    try:
                        row = next(lines, None)
                    except nio.READ_ERRORS as e:
                        # A damaged compressed stream: the whole rows before it were read.
                        where = reader.line_num + 1
                        if job.bad(nio.InputError(source.path, where, f"cannot read on: {e}")):
                            return False
                        break
                    if row is None:
                        break
                    if not row:
                        continue
                    if len(row) != len(header):
                        doc: nio.Doc | nio.InputError = nio.InputError(
                            source.path,
                            reader.line_num,
                            f"has {len(row)} fields, the header has {len(header)}",
                            slot,
                        )
                    else:
                        doc = nio.doc_from_record(
                            dict(zip(header, row)), job.spec, source.path, slot,
                            reader.line_num, fmt,
                        )  # fmt: skip
                    slot += 1
                    if isinstance(doc, nio.InputError):
                        if job.bad(doc):
                            return False
                        continue
                    rows.append(row)
                    texts.append(doc.text)
                    if len(texts) >= _CHUNK:
                        _write_rows(writer, rows, job.fps(texts), args.encoding, at)
                        progress.count(len(texts))
                        rows, texts = [], []
                _write_rows(writer, rows, job.fps(texts), args.encoding, at)
                progress.count(len(texts))
            finally:
                progress.advance(os.path.getsize(source.path))
                text_in.detach()
                stream.close()
                raw.close()
    finally:
        text_out.flush()
        text_out.detach()
    return True


def _write_rows(
    writer: Any, rows: list[list[str]], fps: list[int], encoding: str, at: int | None
) -> None:
    """The rows with their fingerprints: a last column, or the column ``at``."""
    for row, fp in zip(rows, fps):
        if at is None:
            writer.writerow([*row, encode(fp, encoding)])
        else:
            row[at] = str(encode(fp, encoding))
            writer.writerow(row)


def _docs(job: _Job, sources: list[nio.Source], out: Any, fmt: str, progress: Progress) -> bool:
    """txt -> FINGERPRINT<TAB>TEXT lines; dir -> JSONL {"id", field}."""
    args = job.args

    def chunks() -> Iterable[list[nio.Doc]]:
        batch: list[nio.Doc] = []
        for source in sources:
            for doc in nio.read_docs(source, job.spec, progress.advance):
                if isinstance(doc, nio.InputError):
                    if job.bad(doc):
                        raise _Stop
                    continue
                batch.append(doc)
                if len(batch) >= _CHUNK:
                    yield batch
                    batch = []
        yield batch

    try:
        for batch in chunks():
            fps = job.fps([d.text for d in batch])
            for doc, fp in zip(batch, fps):
                if fmt == "txt":
                    line = doc.text.replace("\n", " ")
                    out.write(f"{encode(fp, args.encoding)}\t{line}\n".encode())
                else:
                    record = {"id": doc.id, args.field: encode(fp, args.encoding)}
                    out.write(nio.json_line(record).encode("utf-8") + b"\n")
            progress.count(len(batch))
    except _Stop:
        return False
    return True


class _Stop(Exception):
    pass


def _parquet(job: _Job, sources: list[nio.Source], output: nio.Source, progress: Progress) -> bool:
    import pyarrow as pa
    import pyarrow.parquet as pq

    args = job.args
    writer: Any = None
    schema: Any = None
    column_type = pa.uint64() if args.encoding == "int" else pa.string()
    try:
        for source in sources:
            try:
                pf = pq.ParquetFile(source.path)
            except Exception as e:
                if job.bad(nio.InputError(source.path, None, f"not a Parquet file: {e}")):
                    return False
                continue  # (--on-error skip: the next input)
            names = pf.schema_arrow.names
            if args.text_field not in names:
                missing = f"no column {args.text_field!r} ({', '.join(names[:20])})"
                if job.bad(nio.InputError(source.path, None, missing)):
                    return False
                continue
            # (an input that has the column already, e.g. this command's output: replaced)
            kept = pf.schema_arrow
            if args.field in names:
                kept = kept.remove(names.index(args.field))
            out_schema = kept.append(pa.field(args.field, column_type))
            if schema is None:
                schema = out_schema
            elif not out_schema.equals(schema):
                raise nio.InputError(
                    source.path, None, "schema differs from the first input's; one at a time"
                )
            row = 0
            for batch in pf.iter_batches(batch_size=_CHUNK):
                texts = batch.column(args.text_field).to_pylist()
                good = np.ones(len(texts), dtype=bool)
                for i, t in enumerate(texts):
                    if not isinstance(t, str):
                        kind = "null" if t is None else type(t).__name__
                        error = nio.InputError(
                            source.path,
                            row + i + 1,
                            f"field {args.text_field!r} is {kind}, expected a string",
                            row + i,
                        )
                        if job.bad(error):
                            return False
                        good[i] = False
                row += len(texts)
                if not good.all():
                    batch = batch.filter(pa.array(good))
                    texts = [t for t, g in zip(texts, good.tolist()) if g]
                fps = job.f.many(texts) if texts else np.zeros(0, np.uint64)
                job.read += len(texts)
                column = (
                    pa.array(fps, type=pa.uint64())
                    if args.encoding == "int"
                    else pa.array([f"{int(x):016x}" for x in fps.tolist()], type=pa.string())
                )
                if args.field in batch.schema.names:
                    batch = batch.drop_columns([args.field])
                batch = batch.append_column(args.field, column)
                if writer is None:
                    writer = pq.ParquetWriter(output.path, schema)
                writer.write_batch(batch)
                progress.count(len(texts))
            progress.advance(os.path.getsize(source.path))
        if writer is None:  # (no rows: a file of the schema, without any)
            writer = pq.ParquetWriter(output.path, schema or pa.schema([(args.field, column_type)]))
    finally:
        if writer is not None:
            writer.close()
    return True
