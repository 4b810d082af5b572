"""Request validation and the documented request/response schemas of the service.

Requests are parsed with orjson and checked by hand (fast, and every failure gets its own error
code naming the field); the pydantic models below describe the same shapes for the OpenAPI page
at ``/docs``.
"""

from __future__ import annotations

import math
import re
import time
import unicodedata
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from neardup.service.errors import ApiError
from neardup.textstore import Id, check_timestamp

__all__ = [
    "AddItem",
    "CheckItem",
    "Limits",
    "parse_add",
    "parse_add_batch",
    "parse_check",
    "parse_check_batch",
    "parse_id_path",
    "parse_json",
]

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
U64_MAX = 2**64 - 1
MAX_ID_CHARS = 1024


#: Seconds inside the retention window (at most a tenth of it) that a sent timestamp must be, so
#: that it is still inside when the store writes it.
WINDOW_MARGIN = 60.0


def window_start(retention: float | None, margin: float = 1.0) -> float | None:
    """The oldest timestamp taken now: the retention window (None: no window) less ``margin``
    times WINDOW_MARGIN (a tenth of the window at most). A request's timestamps are checked
    with the whole margin when it arrives, and again with half of it just before the writer
    writes them (:func:`check_window`), so that they are still inside when the store checks
    the window itself, chunk by chunk."""
    if retention is None:
        return None
    return time.time() - retention + margin * min(WINDOW_MARGIN, retention / 10)


def check_window(items: list[AddItem], retention: float | None, batch: bool) -> bool:
    """Before any write: refuse the writes whose timestamps left the retention window while
    they waited in the writer's queue (else the store refused a later chunk of a batch, a 500
    with the earlier chunks written). ``batch``: name the field ``items[i].timestamp``.
    Returns whether a timestamp is in the older half of the window: then the writes are made
    in one store call, which checks the window once, at once (in chunks, a later chunk could
    be checked after the window had moved past them: a short window, a long batch)."""
    start = window_start(retention, 0.5)
    if start is None:
        return False
    for i, item in enumerate(items):
        if item.timestamp is not None and item.timestamp < start:
            field = f"items[{i}].timestamp" if batch else "timestamp"
            raise ApiError(
                "invalid_timestamp",
                f"field {field!r} ({item.timestamp}) left the retention window while the write"
                " waited its turn; nothing was written",
                field=field,
            )
    assert retention is not None
    half = time.time() - retention / 2
    return any(item.timestamp is not None and item.timestamp < half for item in items)


@dataclass(frozen=True)
class Limits:
    """Size limits applied to every request, and the retention window (seconds; None: kept
    forever) that a write's timestamp must fall in."""

    max_text_bytes: int
    max_batch: int
    max_k: int = 64
    retention: float | None = None


@dataclass(frozen=True)
class CheckItem:
    """One validated check: a text or a fingerprint, and the k to use (None: the service's)."""

    text: str | None
    fingerprint: int | None
    k: int | None


class AddItem(NamedTuple):
    """One validated add / check-and-add (a tuple: batches make thousands of them)."""

    id: Id
    text: str
    timestamp: float | None


# -- parsing -------------------------------------------------------------------------------------


def parse_json(body: bytes) -> Any:
    """Decode a JSON request body; malformed JSON (or an empty body) is a 400."""
    if not body:
        raise ApiError("malformed_json", "request body is empty; send a JSON object")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise ApiError("malformed_json", _why_not_json(body, e)) from None


def _why_not_json(body: bytes, error: Exception) -> str:
    """What is wrong with a body that is not JSON, in the words of its likely cause: compressed,
    UTF-16/32, or bytes that are not UTF-8 (where the decoder's own message would say
    "surrogates not allowed")."""
    if body[:2] == b"\x1f\x8b":
        return "request body is gzip-compressed; send it uncompressed (no Content-Encoding)"
    if body[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in body[:4]:
        return "request body is UTF-16 or UTF-32; send JSON in UTF-8"
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as e:
        return (
            f"request body is not valid UTF-8: byte 0x{body[e.start]:02x} at offset {e.start}; "
            "send JSON in UTF-8"
        )
    return f"request body is not valid JSON: {error}"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


CHECK_FIELDS = frozenset({"text", "fingerprint", "fingerprint_hex", "k"})
ADD_FIELDS = frozenset({"id", "text", "timestamp"})


def _object(value: Any, where: str, fields: frozenset[str]) -> dict[str, Any]:
    """``value`` when it is a JSON object of no other keys than ``fields`` (a misspelt one,
    ``timestmap`` or ``treshold``, was ignored: the document stamped now, the default used)."""
    if not isinstance(value, dict):
        raise ApiError(
            "invalid_type", f"{where} must be a JSON object, got {_type_name(value)}", field=where
        )
    unknown = [key for key in value if key not in fields]
    if unknown:
        name = unknown[0]
        # (a name that cannot be shown as it is, "" or "\x1f": the object is named instead)
        field = where if not name.isprintable() or not name else name
        field = field if where == "body" or field == where else f"{where}.{field}"
        raise ApiError(
            "unknown_field",
            f"{where} has unknown field(s) {', '.join(map(repr, unknown))}; "
            f"the fields are {', '.join(map(repr, sorted(fields)))}",
            field=field,
        )
    return value


def _blank(text: str) -> bool:
    """Only whitespace, control and format characters (zero-width spaces, byte order marks,
    word joiners, NUL): nothing a reader sees, and no feature to fingerprint (fingerprint 0)."""
    if text.isspace():
        return True
    if text.isprintable():  # (no control, format or non-ASCII space character at all)
        return False
    return all(c.isspace() or unicodedata.category(c) in ("Cc", "Cf") for c in text)


def _text(obj: dict[str, Any], where: str, limits: Limits) -> str:
    field = f"{where}.text" if where != "body" else "text"
    if "text" not in obj:
        raise ApiError("missing_field", f"field {field!r} is required", field=field)
    text = obj["text"]
    if not isinstance(text, str):
        raise ApiError(
            "invalid_type", f"field {field!r} must be a string, got {_type_name(text)}", field=field
        )
    if not text or _blank(text):
        raise ApiError(
            "empty_text",
            f"field {field!r} is empty or only whitespace and invisible characters",
            field=field,
        )
    limit = limits.max_text_bytes
    # Four UTF-8 bytes per character at most: encode only texts that could be too large.
    if len(text) * 4 > limit:
        size = len(text.encode("utf-8"))
        if size > limit:
            raise ApiError(
                "text_too_large",
                f"field {field!r} is {size} bytes of UTF-8, more than the limit of {limit}",
                field=field,
            )
    return text


def _k(obj: dict[str, Any], where: str, limits: Limits) -> int | None:
    k = obj.get("k")
    if k is None:
        return None
    field = f"{where}.k" if where != "body" else "k"
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= limits.max_k:
        raise ApiError(
            "invalid_k",
            f"field {field!r} must be an integer in 0..{limits.max_k}, got {k!r}",
            field=field,
        )
    return k


_HEX = re.compile(r"[0-9a-f]{1,16}")


def _fingerprint(value: Any, field: str, hex_only: bool = False) -> int:
    """A fingerprint sent as a JSON number, a decimal string or a 0x-hex string; with
    ``hex_only`` (``fingerprint_hex``), the 16 hex digits the answers give."""
    fp: int | None = None
    if isinstance(value, str):
        s = value.strip().lower()
        # (digits only: int() also takes "1_2", "+5" and digits of other scripts)
        if hex_only:
            fp = int(s, 16) if len(s) == 16 and _HEX.fullmatch(s) else None
        elif s.startswith("0x") and _HEX.fullmatch(s[2:]):
            fp = int(s[2:], 16)
        elif s.isascii() and s.isdigit():
            fp = int(s, 10)
    elif isinstance(value, int) and not isinstance(value, bool) and not hex_only:
        fp = value
    if fp is None or not 0 <= fp <= U64_MAX:
        what = (
            "16 hex digits (as answers give it)"
            if hex_only
            else "an unsigned 64-bit integer (a number, a decimal string or a 0x-hex string)"
        )
        raise ApiError(
            "invalid_fingerprint",
            f"field {field!r} must be {what}, got {value!r}"[:300],
            field=field,
        )
    return fp


def _id(obj: dict[str, Any], where: str) -> Id:
    field = f"{where}.id" if where != "body" else "id"
    if "id" not in obj:
        raise ApiError("missing_field", f"field {field!r} is required", field=field)
    value = obj["id"]
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ApiError(
            "invalid_id",
            f"field {field!r} must be a string or an integer, got {_type_name(value)}",
            field=field,
        )
    if isinstance(value, int):
        if not I64_MIN <= value <= I64_MAX:
            raise ApiError(
                "invalid_id", f"field {field!r} must fit a signed 64-bit integer", field=field
            )
    elif not value or len(value) > MAX_ID_CHARS:
        raise ApiError(
            "invalid_id",
            f"field {field!r} must be a non-empty string of at most {MAX_ID_CHARS} characters",
            field=field,
        )
    return value


def _timestamp(obj: dict[str, Any], where: str, limits: Limits) -> float | None:
    value = obj.get("timestamp")
    if value is None:
        return None
    field = f"{where}.timestamp" if where != "body" else "timestamp"
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ApiError(
            "invalid_timestamp",
            f"field {field!r} must be non-negative seconds since the epoch, got {value!r}",
            field=field,
        )
    # The range every store holds, and the retention window (neardup.textstore's one rule)
    # less its margin: see window_start.
    try:
        return check_timestamp(value, f"field {field!r}", not_before=window_start(limits.retention))
    except ValueError as e:
        raise ApiError("invalid_timestamp", str(e), field=field) from None


def _check_item(obj: dict[str, Any], where: str, limits: Limits) -> CheckItem:
    given = [
        name for name in ("text", "fingerprint", "fingerprint_hex") if obj.get(name) is not None
    ]
    if len(given) > 1:
        raise ApiError(
            "invalid_value",
            f"{where} must have one of 'text', 'fingerprint' or 'fingerprint_hex', not "
            + " and ".join(map(repr, given)),
            field=where,
        )
    k = _k(obj, where, limits)
    if given and given[0] != "text":
        name = given[0]
        field = f"{where}.{name}" if where != "body" else name
        return CheckItem(None, _fingerprint(obj[name], field, name == "fingerprint_hex"), k)
    if "text" not in obj:
        raise ApiError(
            "missing_field", f"{where} needs a 'text' (or a 'fingerprint') field", field=where
        )
    return CheckItem(_text(obj, where, limits), None, k)


def parse_check(data: Any, limits: Limits) -> CheckItem:
    """Validate a POST /v1/check body."""
    return _check_item(_object(data, "body", CHECK_FIELDS), "body", limits)


def parse_add(data: Any, limits: Limits) -> AddItem:
    """Validate a POST /v1/add or /v1/check-and-add body."""
    obj = _object(data, "body", ADD_FIELDS)
    return AddItem(_id(obj, "body"), _text(obj, "body", limits), _timestamp(obj, "body", limits))


def _items(
    data: Any, limits: Limits, fields: frozenset[str] = frozenset({"items"})
) -> tuple[dict[str, Any], list[Any]]:
    obj = _object(data, "body", fields)
    if "items" not in obj:
        raise ApiError("missing_field", "field 'items' (a JSON array) is required", field="items")
    items = obj["items"]
    if not isinstance(items, list):
        raise ApiError(
            "invalid_type",
            f"field 'items' must be an array, got {_type_name(items)}",
            field="items",
        )
    if len(items) > limits.max_batch:
        raise ApiError(
            "batch_too_large",
            f"field 'items' has {len(items)} entries, more than the limit of {limits.max_batch}",
            field="items",
        )
    return obj, items


def parse_check_batch(data: Any, limits: Limits) -> list[CheckItem]:
    """Validate a POST /v1/check/batch body; a top-level ``k`` applies to items without one."""
    obj, items = _items(data, limits, frozenset({"items", "k"}))
    default_k = _k(obj, "body", limits)
    out = []
    for i, raw in enumerate(items):
        where = f"items[{i}]"
        item = _check_item(_object(raw, where, CHECK_FIELDS), where, limits)
        if item.k is None and default_k is not None:
            item = CheckItem(item.text, item.fingerprint, default_k)
        out.append(item)
    return out


def parse_add_batch(data: Any, limits: Limits) -> list[AddItem]:
    """Validate a POST /v1/add/batch or /v1/check-and-add/batch body."""
    _, items = _items(data, limits)
    out: list[AddItem] = []
    append = out.append
    max_chars = limits.max_text_bytes // 4  # longer texts are measured in UTF-8 by _text
    for i, raw in enumerate(items):
        # The common item ({"id": str or int, "text": str[, "timestamp": null]}) checked inline;
        # anything else goes through the checks that name the field and the problem.
        if type(raw) is dict and len(raw) <= 3:
            id_ = raw.get("id")
            text = raw.get("text")
            if (
                (
                    (type(id_) is str and 0 < len(id_) <= MAX_ID_CHARS)
                    or (type(id_) is int and I64_MIN <= id_ <= I64_MAX)
                )
                and type(text) is str
                and 0 < len(text) <= max_chars
                and raw.get("timestamp") is None
                and (len(raw) == 2 or "timestamp" in raw)
                and not _blank(text)
            ):
                append(AddItem(id_, text, None))
                continue
        where = f"items[{i}]"
        obj = _object(raw, where, ADD_FIELDS)
        append(AddItem(_id(obj, where), _text(obj, where, limits), _timestamp(obj, where, limits)))
    _unique_ids(out)
    return out


def _unique_ids(items: list[AddItem]) -> None:
    """A batch names each document once: with an id twice, the later item would replace the
    earlier one that the answer calls added."""
    first: dict[tuple[type, Id], int] = {}
    for i, item in enumerate(items):
        j = first.setdefault((type(item.id), item.id), i)
        if j != i:
            raise ApiError(
                "invalid_id",
                f"field 'items[{i}].id' repeats items[{j}].id {item.id!r}; a batch names each "
                "document once",
                field=f"items[{i}].id",
            )


def parse_id_path(raw: str, id_type: str | None = None) -> list[Id]:
    """The ids a path segment may name, most specific first.

    With ``id_type="str"`` or ``"int"`` only that one. Without it: the string, then the integer
    it spells (``/v1/documents/42`` finds the string id ``"42"`` or else the integer id ``42``).
    """
    if not raw or len(raw) > MAX_ID_CHARS:
        raise ApiError(
            "invalid_id", f"document id must be 1..{MAX_ID_CHARS} characters", field="id"
        )
    if id_type not in (None, "str", "int"):
        raise ApiError(
            "invalid_value", f"id_type must be 'str' or 'int', got {id_type!r}", field="id_type"
        )
    as_int: int | None = None
    try:
        value = int(raw, 10)
        if I64_MIN <= value <= I64_MAX and str(value) == raw:
            as_int = value
    except ValueError:
        pass
    if id_type == "str":
        return [raw]
    if id_type == "int":
        if as_int is None:
            raise ApiError("invalid_id", f"id {raw!r} is not a signed 64-bit integer", field="id")
        return [as_int]
    return [raw] if as_int is None else [raw, as_int]
