"""The on-Redis format of :mod:`neardup.backends.redis`: id and fingerprint encodings, argument
checks, and the records the index passes between its steps.

Every key of a namespace ``ns`` and what it holds is listed in docs/scale-out.md (data layout);
:data:`FORMAT_VERSION` is stored with the settings and checked on open.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from neardup.textstore import Id, check_id

FORMAT_VERSION = 1
_U64 = (1 << 64) - 1
# Without retention every item lives in one period (period 0 for the next ~35 000 years).
_NO_RETENTION_PERIOD = float(1 << 40)


# -- encodings -------------------------------------------------------------------------------


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


def _popcount(a: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Set bits of each element."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2
        return np.asarray(np.bitwise_count(a), dtype=np.int64)
    bits = np.unpackbits(np.ascontiguousarray(a).view(np.uint8).reshape(-1, 8), axis=1)
    return np.asarray(bits.sum(axis=1), dtype=np.int64)


def _s(b: bytes | str) -> str:
    return b.decode() if isinstance(b, bytes) else b


@dataclass(frozen=True)
class _Entry:
    uid: str
    fp: int
    idenc: str
    period: int
    distance: int


def _order_key(uid: str) -> tuple[int, int, str]:
    # Tickets (single server) order numerically; cluster nonces start with a time in hex.
    if uid[0] == "t":
        return (0, int(uid[1:]), "")
    return (1, 0, uid)


@dataclass
class _Pending:
    """A write, ready to send."""

    idenc: str
    fp: int
    period: int
    expire_at: int
    own: list[str]
    record: str
    fields: list[bytes | str]
    probe_k: int | None
    probe_keys: list[tuple[int, str]]


@dataclass
class _Written:
    ticket: int
    uid: str
    period: int
    predecessors: list[_Entry]
