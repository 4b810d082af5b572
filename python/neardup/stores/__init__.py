"""The store interface of the one decision: what a deduplicator needs from where its texts live.

The decision (``neardup.kept.rule_for``: a text's candidates are the stored versions in the
newest ``bucket_limit`` entries of its MinHash band lists; ranked by their min-hash bytes,
fingerprints and positions; the first ``verify_limit`` verified by exact Jaccard; a batch
decided in order) asks a store for the operations of :class:`Store`: query many (band lists;
then the heads of the versions they name that the deduplicator does not hold), add many, a
conditional add for an atomic check-and-add, remove, expire, read texts, count.

Behind it:

- **Redis and Redis Cluster**: :class:`neardup.backends.redis_store.RedisStore`, one module
  (a Cluster differs only in how the conditional add is made atomic over band hashes that
  live on several masters). :class:`neardup.backends.redis_dedup.RedisDeduplicator` makes the
  decision over any :class:`Store` (one read, ranking and verification in the core's
  ``NearRule``, one conditional add; decided again when the add is refused).
- **The embedded store** (``Deduplicator.open``): its band lists, min-hash bytes and sketches
  are the core's decision engine (:class:`neardup.kept.KeptTexts`), so there *query many*,
  ranking, verification and the decision are one Rust call (``check_and_keep``), and the
  conditional add is the engine keeping the rows under the deduplicator's writer lock (no
  other writer can come between); its texts are the SQLite log
  (:class:`neardup.textstore.SqliteTextStore`: add many, remove, expire, read texts, count).
  It does not go through :meth:`Store.query`, which would move the decision back into a
  Python loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Doc", "Found", "Head", "Store", "dec_id", "enc_id"]


class Doc(NamedTuple):
    """A version to store: encoded id (:func:`enc_id`), ref (its position, from
    :meth:`Store.refs` or a query: smaller is older), fingerprint, min-hash bytes, band keys
    (4 bytes each, big-endian), text, timestamp, and whether it goes into the band lists (a
    text with nothing to compare does not)."""

    id: bytes
    ref: int
    fp: int
    minhash: bytes
    keys: bytes
    text: bytes
    timestamp: float
    listed: bool


class Found(NamedTuple):
    """What a query found: per band the band keys read (sorted) and the newest record of
    each (16 zero bytes: none); the newest ``bucket_limit`` records of each non-empty list
    (``(n, 16)`` bytes: the id's 8-byte hash, the version's 8-byte ref; a record whose ref is
    not its id's stored version is stale) with the list of each (``band << 32 | band key``);
    the first of the refs reserved with the query; and per band what the store needs to know
    that no band list changed since (Redis: each band hash's change count)."""

    fields: list[npt.NDArray[np.uint32]]
    heads: list[npt.NDArray[np.uint8]]
    codes: npt.NDArray[np.int64]
    records: npt.NDArray[np.uint8]
    first: int
    stamps: list[bytes] | None = None


class Head(NamedTuple):
    """What a check reads of a stored version: its record (id hash and ref), fingerprint,
    timestamp, encoded id and min-hash bytes."""

    record: bytes
    fp: int
    timestamp: float
    id: bytes
    minhash: bytes


def enc_id(id: int | str) -> bytes:
    """An id as the stores keep it (``i42``, ``sdoc-1``)."""
    return f"i{id}".encode() if isinstance(id, int) else b"s" + id.encode()


def dec_id(raw: bytes) -> int | str:
    """The id of :func:`enc_id`'s bytes."""
    s = raw.decode()
    return int(s[1:]) if s[0] == "i" else s[1:]


@runtime_checkable
class Store(Protocol):
    """The operations of a store of the one decision. Thread-safe: checks run on several
    threads beside one writer."""

    #: The store's name and settings, for ``stats()`` (JSON-serialisable).
    settings: dict[str, Any]

    def open(self, settings: dict[str, Any]) -> None:
        """Record the decision's ``settings`` (policy, retention) with the texts, or check
        them against those recorded: ``neardup.IncompatibleIndexError`` names each
        difference."""
        ...

    #: Whether a record may outlive its version (a Redis Cluster, where a version and its
    #: records live on different masters): the versions a query names are then read afresh
    #: each time, else those read once are kept (a version never changes).
    cluster: bool

    def query(self, keys: npt.NDArray[np.uint32], refs: int = 0) -> Found:
        """Query many: the band lists of ``keys`` (one row of band keys per text), as of one
        moment; ``refs`` refs reserved with it (for the versions a check-and-add may add)."""
        ...

    def heads(self, hashes: Sequence[bytes]) -> list[Head]:
        """What a check needs of the stored versions of id hashes (8 bytes, as in records);
        one gone is left out."""
        ...

    def horizon(self) -> float:
        """The oldest timestamp within the retention window (-inf: none)."""
        ...

    def refs(self, n: int) -> int:
        """Reserve ``n`` refs (positions after every stored version); the first."""
        ...

    def add(self, docs: Sequence[Doc], found: Found | None) -> bool:
        """Add many: store ``docs`` in order (a later version of an id replaces an earlier
        one, and the replaced one leaves its band lists). With ``found`` (the query their
        decision was made on), the conditional add of a check-and-add: only when none of
        their band lists has changed since, else False and nothing is stored; of racing
        near-copies exactly one is then added."""
        ...

    def remove(self, id: bytes) -> bool:
        """Drop the stored version of ``id`` from the texts and the band lists; False when
        there is none."""
        ...

    def expire(self, before: float) -> int:
        """Drop every version with a timestamp < ``before``; how many."""
        ...

    def texts(self, records: Iterable[bytes]) -> dict[bytes, str]:
        """Read texts: those of the versions that records (16 bytes: id hash, ref) name, by
        record; one gone or replaced meanwhile is left out."""
        ...

    def get(self, id: bytes) -> str | None:
        """The stored text of ``id`` (None: none, or past the retention window)."""
        ...

    def count(self) -> int:
        """Stored versions (within the retention window)."""
        ...

    def recover(self, exc: BaseException) -> bool:
        """After ``exc`` from an operation: whether the store has made itself ready again
        (a Redis server that lost its functions gets them back) so that the operation can
        be tried once more."""
        ...

    def close(self) -> None:
        """Release the connections."""
        ...
