"""The block parser of line formats (JSONL and text lines): the file is read in blocks of about
2 MiB, each block is split at ``\\n`` and parsed at once into the columns of a
:class:`~neardup.io.DocBatch`; only a block that holds a bad or blank line is parsed again one
line after the other, which says what is wrong. Damaged compressed data ends the file with one
``cannot read on`` error after the whole lines before it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from neardup.io._records import (
    Doc,
    DocBatch,
    LineParser,
    fast_loads,
    is_blank,
    line_parser,
    parse_time,
)
from neardup.io._sources import FieldSpec, InputError, Source
from neardup.io._streams import READ_ERRORS, ProgressFn, open_or_error, open_read
from neardup.textstore import MAX_TIMESTAMP

BLOCK_BYTES = 1 << 21
#: A UTF-8 byte-order mark (see :func:`line_blocks`).
_BOM = b"\xef\xbb\xbf"


def line_blocks(source: Source, stream: IO[bytes], block_bytes: int) -> Iterator[list[bytes]]:
    """The lines of ``stream`` (split at ``\\n``, without it) in blocks of about ``block_bytes``;
    a UTF-8 byte-order mark that starts the file is not part of its first line (a file saved
    by a Windows tool: the reader and the writer of kept lines both leave it out).

    Where the stream cannot be read on (truncated or corrupt compressed data), the file is read
    again line by line from the last whole block, the whole lines before the damage are yielded,
    and then the error is raised.
    """
    for i, lines in enumerate(_line_blocks(source, stream, block_bytes)):
        if i == 0 and lines[0].startswith(_BOM):
            lines[0] = lines[0][len(_BOM) :]
        yield lines


def _line_blocks(source: Source, stream: IO[bytes], block_bytes: int) -> Iterator[list[bytes]]:
    """:func:`line_blocks` with the byte-order mark left in."""
    done = 0  # lines yielded so far
    pending: list[bytes] = []  # the start of a line that goes on in the next read
    while True:
        try:
            data = stream.read(block_bytes)
        except READ_ERRORS:
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


def read_line_batches(
    source: Source, spec: FieldSpec, progress: ProgressFn | None, block_bytes: int
) -> Iterator[DocBatch]:
    """The documents of a ``jsonl`` or ``txt`` source, a batch per block of ``block_bytes``."""
    opened = open_or_error(source, progress)
    if isinstance(opened, InputError):
        yield DocBatch.of([opened], 0)
        return
    parse = _parse_json_block if source.format == "jsonl" else _parse_text_block
    slot = 0
    line = 0  # lines before the current block
    with opened:
        blocks = line_blocks(source, opened.stream, block_bytes)
        while True:
            try:
                lines = next(blocks, None)
            except READ_ERRORS as e:
                # truncated or corrupt compressed data: the file cannot be read past here
                yield DocBatch.of([InputError(source.path, line + 1, f"cannot read on: {e}")], slot)
                return
            if lines is None:
                return
            batch = parse(lines, spec, source.path, slot, line)
            slot = batch.end
            line += len(lines)
            opened.update()
            yield batch


def _parse_one_by_one(lines: list[bytes], parse: LineParser, slot: int, line: int) -> DocBatch:
    """The documents on consecutive lines parsed one at a time, blank lines skipped: the slow
    path, for a block that holds a bad or blank line."""
    items: list[Doc | InputError] = []
    for i, raw in enumerate(lines):
        if is_blank(raw):
            continue
        items.append(parse(raw, slot, line + i + 1))
        slot += 1
    return DocBatch.of(items, slot)


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
        records = list(map(fast_loads, lines))
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
            if not all(-MAX_TIMESTAMP <= t <= MAX_TIMESTAMP for t in times):  # (NaN: False)
                raise ValueError("a time out of range")
        if set(map(type, texts)) <= {str} and set(map(type, ids)) <= _ID_TYPES:
            slots, numbers = range(slot, slot + n), range(line + 1, line + 1 + n)
            return DocBatch(slots, numbers, texts, ids, times, [], slot + n)
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return _parse_one_by_one(lines, line_parser("jsonl", spec, path), slot, line)


_ASCII_SPACE = " \t\n\r\x0b\x0c"


def _parse_text_block(
    lines: list[bytes], spec: FieldSpec, path: str, slot: int, line: int
) -> DocBatch:
    """The documents on consecutive text lines: each non-blank line is one."""
    try:
        decoded = b"\n".join(lines).decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return _parse_one_by_one(lines, line_parser("txt", spec, path), slot, line)
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
