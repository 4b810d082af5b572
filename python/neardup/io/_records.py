"""Documents and how one record becomes one: :class:`Doc`, the columns of :class:`DocBatch`, the
time field (:func:`parse_time`), a record's id (:func:`record_id`, :func:`id_or_place`), a
parsed record (:func:`doc_from_record`) and one JSONL or text line (:func:`parse_json_line`,
:func:`parse_text_line`)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime, timezone
from typing import Any, Callable

from neardup.io._sources import FieldSpec, InputError
from neardup.textstore import MAX_TIMESTAMP

fast_loads: Callable[[bytes], Any]
try:  # 4x faster than json.loads on short records; the stdlib is the fallback
    from orjson import loads as fast_loads
except ImportError:  # pragma: no cover - orjson is a dependency
    fast_loads = json.loads


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


def describe(value: Any) -> str:
    """The JSON-ish name of a value's type, for messages: ``null``, ``str``, ``list``, ..."""
    return "null" if value is None else type(value).__name__


# Seconds as a string: an ASCII number (float() also takes "1_000" and other scripts' digits).
_SECONDS = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Digits that are an ISO 8601 basic year, date or archive timestamp, not seconds.
_BASIC = {4: "%Y", 8: "%Y%m%d", 14: "%Y%m%d%H%M%S"}


def _parse_time_str(value: str) -> float:
    """:func:`parse_time` of a string."""
    s = value.strip()
    basic = _BASIC.get(len(s)) if s.isascii() and s.isdigit() else None
    try:
        if basic is not None:
            d = datetime.strptime(s, basic)
        elif _SECONDS.fullmatch(s) or s.lower() in ("nan", "inf", "+inf", "-inf", "infinity"):
            return float(s)
        else:
            d = datetime.fromisoformat(s.replace("Z", "+00:00") if s.endswith("Z") else s)
    except ValueError:
        raise ValueError(
            f"time {value!r} is neither seconds since the epoch nor ISO 8601"
        ) from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=timezone.utc)
    return d.timestamp()


def parse_time(value: Any) -> float:
    """A time field as float seconds since the epoch: a number or an ISO 8601 string, within
    the range every store keeps (:data:`neardup.textstore.MAX_TIMESTAMP`).

    Naive ISO times are taken as UTC, a date as its midnight UTC. A string of digits is seconds,
    but for the ISO 8601 basic forms a number of seconds would not take: ``YYYY`` (a year) and
    ``YYYYMMDD`` (a date: 1970 as seconds), and ``YYYYMMDDhhmmss`` (web archives' timestamps).
    Raises ValueError naming the value.
    """
    if isinstance(value, bool):
        raise ValueError(f"time {value!r} is a bool, expected seconds or an ISO 8601 string")
    if isinstance(value, (int, float)):
        try:
            t = float(value)
        except OverflowError:  # (an int of hundreds of digits)
            raise ValueError("time is an integer too large for seconds since the epoch") from None
    elif isinstance(value, date):  # (a datetime is a date too)
        if not isinstance(value, datetime):
            value = datetime(value.year, value.month, value.day)
        d = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        t = d.timestamp()
    elif isinstance(value, str):
        t = _parse_time_str(value)
    else:
        raise ValueError(f"time is {describe(value)}, expected seconds or an ISO 8601 string")
    if not math.isfinite(t):
        raise ValueError(f"time {value!r} is not finite")
    if not -MAX_TIMESTAMP <= t <= MAX_TIMESTAMP:
        raise ValueError(
            f"time {value!r} is out of range: seconds since the epoch within "
            f"+-{MAX_TIMESTAMP:.0e} (milliseconds or microseconds?)"
        )
    return t


def _has_surrogates(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


#: Largest magnitude up to which a whole float id is read as its integer: every whole float
#: up to it is the integer that was written (the local engine and Spark's ``whole_ids``).
EXACT_FLOAT_ID = 2.0**53


def too_large_id(value: float) -> str:
    """What is wrong with a whole float id beyond :data:`EXACT_FLOAT_ID`."""
    return (
        f"id {value:.17g} is a number too large to read exactly (an integer beyond 64 bits, "
        "or a float beyond 2**53); write it as a string"
    )


def record_id(record: Mapping[str, Any], id_field: str | None) -> Any:
    """The id of a record (a row of any input, a dataset's included): its ``id_field``, else its
    ``id`` where it has one, else None (the caller names it: :func:`id_or_place`); a string or
    an integer (a whole float up to 2**53 is its int, NaN none: pandas writes an int column with
    a missing value as floats). ``ValueError`` for a missing ``id_field`` or an id of another
    kind, a larger float included: it may be an integer beyond 64 bits that the JSON parser
    read as a float, and is not the id written."""
    if id_field is None:
        doc_id = record.get("id")
    else:
        try:
            doc_id = record[id_field]
        except KeyError:
            raise ValueError(f"no id field {id_field!r}") from None
    if isinstance(doc_id, float):
        # pandas writes an int column that has a missing value as floats (1.0, NaN)
        if math.isnan(doc_id):
            return None
        if doc_id.is_integer():
            if abs(doc_id) > EXACT_FLOAT_ID:
                raise ValueError(too_large_id(doc_id))
            return int(doc_id)
    if doc_id is not None and not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
        raise ValueError(f"id is {describe(doc_id)}, expected a string or integer")
    return doc_id


def id_or_place(doc_id: Any, path: str, line: int | None) -> Any:
    """The id of a document that must have one (``index build``, ``index query``,
    ``dedup --against``): its record's id (:func:`record_id`), else where it is,
    ``FILE:LINE`` (a Parquet file's row: its number from 1; a saved dataset's row: its index,
    from 0, ``DIR:ROW``)."""
    return doc_id if doc_id is not None else f"{path}:{line}"


def doc_from_record(
    record: Any, spec: FieldSpec, path: str, slot: int, line: int, kind: str
) -> Doc | InputError:
    """The document in a parsed record (a dict), or the InputError saying what is wrong.

    ``kind`` is the format; for formats other than ``jsonl`` a text holding undecodable bytes
    (surrogate escapes) is an error.
    """
    if not isinstance(record, dict):
        return InputError(path, line, f"expected a JSON object, got {describe(record)}", slot)
    try:
        text = record[spec.text_field]
    except KeyError:
        fields = ", ".join(map(repr, list(record)[:10])) or "none"
        return InputError(path, line, f"no field {spec.text_field!r} (fields: {fields})", slot)
    if not isinstance(text, str):
        return InputError(
            path, line, f"field {spec.text_field!r} is {describe(text)}, expected a string", slot
        )
    if kind != "jsonl" and _has_surrogates(text):
        return InputError(path, line, f"field {spec.text_field!r} is not valid UTF-8", slot)
    try:
        doc_id = record_id(record, spec.id_field)
    except ValueError as e:
        return InputError(path, line, str(e), slot)
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
        record = fast_loads(raw)
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


def parse_text_line(raw: bytes, path: str, slot: int, line: int) -> Doc | InputError:
    """The document on one line of a text input (bytes): the line is the text."""
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return InputError(path, line, f"not valid UTF-8 (byte {e.start} of the line)", slot)
    return Doc(slot, line, None, s.rstrip("\r\n"), None)


LineParser = Callable[[bytes, int, int], "Doc | InputError"]
"""Parses one line (bytes) given its slot and line number."""


def line_parser(format: str, spec: FieldSpec, path: str) -> LineParser:
    """The parser of one line of a ``jsonl`` or ``txt`` input."""
    if format == "jsonl":
        return lambda raw, slot, line: parse_json_line(raw, spec, path, slot, line)
    return lambda raw, slot, line: parse_text_line(raw, path, slot, line)


def is_blank(raw: bytes) -> bool:
    """A line of white space only (never a document)."""
    return not raw.strip()
