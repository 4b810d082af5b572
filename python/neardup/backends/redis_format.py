"""The on-Redis format of :mod:`neardup.backends.redis` (format 2): bucket records, id and
fingerprint encodings, argument checks, and the records the index passes between its steps.

Every key of a namespace ``ns`` and what it holds is listed in docs/scale-out.md (data layout);
:data:`FORMAT_VERSION` is stored with the settings and checked on open.

A bucket is one Redis string of fixed 16-byte records: the fingerprint (8 bytes, big-endian)
then the item's *ref* (8 bytes, big-endian), a random 64-bit name of one stored version of an
item. ``ns:d:<ref hex>`` holds that version's data (id, fingerprint, timestamp, period, ticket,
text) and ``ns:r:<id>`` the id's current ref (on a cluster, the id's chain of versions,
current first). A read is one ``GET`` per bucket; the distances are computed on the client
over the whole reply at once (in the Rust core), and only the near records' data are fetched.
"""

from __future__ import annotations

import logging
import operator
import os
import random
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from neardup._core import _near_buckets, _probe_keys, _probe_mget
from neardup.textstore import Id, check_id

# 1: buckets were lists of "<fp><uid>|<id>" entries, items hashes keyed by id.
# 2: buckets are strings of 16-byte (fingerprint, ref) records; data keyed by ref.
FORMAT_VERSION = 2
RECORD_BYTES = 16
_U64 = (1 << 64) - 1
# Without retention every item lives in one period (period 0 for the next ~35 000 years).
_NO_RETENTION_PERIOD = float(1 << 40)
# Sorts entries whose ticket is unknown (cluster, not yet ticketed) after every ticketed one.
_NO_TICKET = 1 << 64


def add_note(err: BaseException, note: str) -> None:
    """Add ``note`` to ``err`` (Python 3.11+); older Pythons log it as a warning instead."""
    adder = getattr(err, "add_note", None)
    if adder is not None:
        adder(note)
    else:
        logging.getLogger("neardup").warning("%s (%r)", note, err)


# -- encodings -------------------------------------------------------------------------------


def _utf8(text: str) -> bytes:
    """A text as stored: UTF-8, a lone surrogate (not Unicode: half of an emoji from a JSON
    ``\\ud83d`` escape) kept as its three bytes, so the text comes back as it was."""
    return text.encode("utf-8", "surrogatepass")


def _unicode(raw: bytes) -> str:
    """A stored text (see :func:`_utf8`)."""
    return raw.decode("utf-8", "surrogatepass")


def _enc_id(id: Id) -> str:
    check_id(id)
    return f"i{id}" if isinstance(id, int) else f"s{id}"


def _dec_id(s: str) -> Id:
    return int(s[1:]) if s[0] == "i" else s[1:]


def _check_fp(fp: object, name: str = "fingerprint") -> int:
    if isinstance(fp, bool):
        raise TypeError(f"{name} must be an unsigned 64-bit int, got bool")
    try:
        value = operator.index(fp)  # type: ignore[arg-type]  # int, numpy ints
    except TypeError:
        raise TypeError(f"{name} must be an unsigned 64-bit int, got {type(fp).__name__}") from None
    if not 0 <= value <= _U64:
        raise ValueError(f"{name} must be an int in 0..2**64-1, got {fp!r}")
    return value


def _check_k(k: object, name: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 64:
        raise ValueError(f"{name} must be an int in 0..64, got {k!r}")
    return k


def _s(b: bytes | str) -> str:
    return b.decode() if isinstance(b, bytes) else b


# Refs come from a per-process generator seeded from the OS (a system call per ref would cost
# as much as the rest of a check-and-add's client work), reseeded in every forked child so that
# forked workers never draw the same sequence.
_refs = random.Random(secrets.randbits(128))
os.register_at_fork(after_in_child=lambda: _refs.seed(secrets.randbits(128)))


def new_ref() -> int:
    """A fresh random ref (never 0). Writers refuse a ref whose data key exists and draw again,
    so two versions never share one."""
    return _refs.getrandbits(64) or 1


def ref_hex(ref: int) -> str:
    return f"{ref:016x}"


def pack_record(fp: int, ref: int) -> bytes:
    """The 16-byte bucket record of ``(fp, ref)``."""
    return fp.to_bytes(8, "big") + ref.to_bytes(8, "big")


# -- what the steps pass around --------------------------------------------------------------


@dataclass
class _Entry:
    """A stored item found near a fingerprint (its data resolved from its ref)."""

    ref: int
    fp: int
    idenc: str
    period: int
    distance: int
    ticket: int | None
    text: bytes | None = None  # the data field asked for (the text, or its sketch), if any


def _order_key(e: _Entry) -> tuple[int, int, int]:
    """Nearest first, then by ticket (insertion order), then by ref."""
    return (e.distance, _NO_TICKET if e.ticket is None else e.ticket, e.ref)


@dataclass
class _Pending:
    """A write, ready to send."""

    idenc: str
    fp: int
    ref: int
    period: int
    expire_at: int
    own: list[str]
    idkey: str
    datakey: str
    fields: list[bytes | str]
    probe_k: int | None
    probes: Probes | None
    data: Mapping[str, bytes | str] = field(default_factory=dict)  # the extra data fields


class Probes:
    """The buckets a query for ``fp`` at radius ``k`` reads in each live period: one key
    prefix per period (``ns:b:<period>:``) and ``spans``, ``(period, count)`` for consecutive
    runs of :attr:`keys`. The keys are built in the core, as strings on demand (:attr:`keys`)
    or packed straight into an ``MGET`` (:meth:`mget`)."""

    __slots__ = ("prefixes", "spans", "fp", "blocks", "k", "_keys")

    def __init__(
        self, prefixes: list[str], spans: list[tuple[int, int]], fp: int, blocks: int, k: int
    ) -> None:
        self.prefixes = prefixes
        self.spans = spans
        self.fp = fp
        self.blocks = blocks
        self.k = k
        self._keys: list[str] | None = None

    @property
    def keys(self) -> list[str]:
        """Every bucket key, period by period."""
        if self._keys is None:
            self._keys = _probe_keys(self.prefixes, self.fp, self.blocks, self.k)
        return self._keys

    def mget(self, *lead: str) -> bytes:
        """The packed command ``MGET <lead...> <keys...>`` (for a one-server round trip)."""
        return _probe_mget(list(lead), self.prefixes, self.fp, self.blocks, self.k)

    def near(
        self, buckets: list[bytes | None], horizon: bytes | str | None
    ) -> dict[int, tuple[int, int]]:
        """``{ref: (fingerprint, distance)}`` of the records within :attr:`k` of :attr:`fp` in
        the ``buckets`` read (one per key, ``None`` for a missing one) of the periods not
        dropped by ``horizon`` (the ``{ns}:horizon`` value read), measured in the core."""
        if horizon is not None:
            hz = int(horizon)
            if any(q < hz for q, _ in self.spans):
                live: list[bytes | None] = []
                pos = 0
                for q, n in self.spans:
                    if q >= hz:
                        live += buckets[pos : pos + n]
                    pos += n
                buckets = live
        return _near_buckets(buckets, self.fp, self.k)


@dataclass
class _Written:
    ticket: int
    ref: int
    period: int
    predecessors: list[_Entry] = field(default_factory=list)
    # The version of the id this write replaced (a check-and-add drops it only once added).
    old: int | None = None
