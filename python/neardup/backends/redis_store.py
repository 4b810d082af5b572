"""The Redis store of the one decision: its key layout and the operations a deduplicator needs
(read band lists with their candidates' data, read texts, a conditional add, add, remove,
expire), on one server or a Redis Cluster.

Keys (namespace ``ns``):

- ``ns:b:<band>:<key hex>``: a band list, entries ``<ref>,<id>`` newest first, at most
  ``2 * bucket_limit`` of them (a removal gives its place back to an older entry), read
  ``bucket_limit`` at a time;
- ``ns:d:<id>``: a hash, the id's stored version: ``r`` ref (its position: smaller is older),
  ``f`` fingerprint, ``m`` min-hash bytes, ``k`` band keys (uint32 LE), ``x`` text, ``t``
  timestamp. An entry whose id's data name another ref is stale and never read as a candidate;
- ``{ns}:seq`` (refs), ``{ns}:t`` (id -> timestamp: counts and expiry), ``{ns}:config``.

Without a hash tag, band lists and data spread over the masters of a cluster.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from neardup._core import IncompatibleIndexError
from neardup.backends.redis_functions import Functions

__all__ = ["FORMAT_VERSION", "Doc", "Found", "RedisStore"]

#: The data format of a namespace (2: the SimHash block layout of neardup <= 0.x, refused).
FORMAT_VERSION = 3

# A reservation of a band list outlives a stalled or killed writer by this long (ms).
RESERVE_TTL_MS = 5000
_NEVER = "1e300"  # a time after every timestamp


class Doc(NamedTuple):
    """A text to store: encoded id, fingerprint, min-hash bytes, band keys, text, timestamp and
    the names of the band lists it goes to (none for a text with nothing to compare)."""

    id: bytes
    fp: int
    minhash: bytes
    keys: bytes
    text: bytes
    timestamp: float
    bands: list[bytes]


class Found(NamedTuple):
    """What a read of band lists found: each list's first entry (``b""``: empty), its stored
    ids newest first, and the ``(ref, fingerprint, min-hash bytes)`` of those ids."""

    heads: dict[bytes, bytes]
    lists: dict[bytes, list[bytes]]
    data: dict[bytes, tuple[int, int, bytes]]


def enc_id(id: int | str) -> bytes:
    return f"i{id}".encode() if isinstance(id, int) else b"s" + id.encode()


def dec_id(raw: bytes) -> int | str:
    s = raw.decode()
    return int(s[1:]) if s[0] == "i" else s[1:]


class RedisStore:
    """Band lists, versions and their texts in Redis (``cluster``: a Redis Cluster client).

    ``limit`` is the policy's ``bucket_limit``; ``retention`` (seconds) makes Redis drop a
    version that long after its timestamp, and a band list that long after its newest entry.
    """

    def __init__(
        self,
        client: Any,
        *,
        namespace: str,
        cluster: bool,
        limit: int,
        retention: float | None,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.limit = limit
        self.retention = retention
        self.namespace = namespace
        self._band = f"{namespace}:b:"
        self._data = f"{namespace}:d:".encode()
        self._seq = f"{{{namespace}}}:seq"
        self._times = f"{{{namespace}}}:t"
        self._config = f"{{{namespace}}}:config"
        self.fn = Functions(client)

    # -- settings ------------------------------------------------------------------------------

    def open(self, settings: dict[str, Any]) -> None:
        """Record ``settings`` for the namespace, or check them against those recorded:
        :class:`neardup.IncompatibleIndexError` names each difference."""
        want = {"format": FORMAT_VERSION, **settings}
        self.client.set(self._config, json.dumps(want, sort_keys=True), nx=True)
        have = json.loads(self.client.get(self._config))
        if have.get("format") != FORMAT_VERSION:
            raise IncompatibleIndexError(
                f"namespace {self.namespace!r} holds neardup Redis format "
                f"{have.get('format')}; this version reads format {FORMAT_VERSION} only: "
                "use a new namespace (or delete the old keys) and add the texts again"
            )
        diffs = [
            f"{k}: stored {have.get(k)!r}, given {v!r}" for k, v in want.items() if have.get(k) != v
        ]
        if diffs:
            raise IncompatibleIndexError(
                f"namespace {self.namespace!r} was created with other settings ("
                + "; ".join(diffs)
                + "): open it with those, or use another namespace"
            )

    # -- names ---------------------------------------------------------------------------------

    def band_names(self, keys: npt.NDArray[np.uint32]) -> list[bytes]:
        """The band lists of one text's band keys."""
        p = self._band
        return [f"{p}{j}:{k:08x}".encode() for j, k in enumerate(keys.tolist())]

    def _bands_of(self, raw_keys: bytes) -> list[bytes]:
        return self.band_names(np.frombuffer(raw_keys, "<u4"))

    def _expire_at(self, timestamp: float) -> str:
        if self.retention is None:
            return "0"
        return str(int(timestamp + self.retention) + 1)

    # -- reads ---------------------------------------------------------------------------------

    def query(self, bands: Sequence[bytes]) -> Found:
        """The first ``limit`` stored entries of each band list, with their ids' data."""
        if not bands:
            return Found({}, {}, {})
        if not self.cluster:
            heads, lists, flat = self.fn.call(
                self.client, "query", list(bands), [self.limit, self._data]
            )
            data = {
                flat[i]: (int(flat[i + 1]), int(flat[i + 2]), flat[i + 3])
                for i in range(0, len(flat), 4)
            }
            return Found(dict(zip(bands, heads)), dict(zip(bands, lists)), data)
        pipe = self.client.pipeline(transaction=False)
        for b in bands:
            pipe.lrange(b, 0, self.limit - 1)
        raw = pipe.execute()
        entries: dict[bytes, list[tuple[int, bytes]]] = {}
        for b, got in zip(bands, raw):
            entries[b] = [
                (int(ref), id)
                for ref, _, id in (e.partition(b",") for e in got if not e.startswith(b"!"))
            ]
        ids = list({id: None for es in entries.values() for _, id in es})
        for id in ids:
            pipe.hmget(self._data + id, "r", "f", "m")
        data = {
            id: (int(r), int(f), m) for id, (r, f, m) in zip(ids, pipe.execute()) if r is not None
        }
        lists = {
            b: [id for ref, id in es if id in data and data[id][0] == ref]
            for b, es in entries.items()
        }
        heads = {b: (got[0] if got else b"") for b, got in zip(bands, raw)}
        return Found(heads, lists, data)

    def texts(self, ids: Iterable[bytes]) -> dict[bytes, str]:
        """The stored texts of ``ids`` (an id whose data are gone is left out)."""
        ids = list(ids)
        if not ids:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for id in ids:
            pipe.hget(self._data + id, "x")
        return {id: x.decode() for id, x in zip(ids, pipe.execute()) if x is not None}

    def get(self, id: bytes) -> str | None:
        x = self.client.hget(self._data + id, "x")
        return None if x is None else x.decode()

    def contains(self, id: bytes) -> bool:
        return bool(self.client.exists(self._data + id))

    def count(self) -> int:
        """Stored versions (those past the retention window are not counted)."""
        low = "-inf" if self.retention is None else f"({time.time() - self.retention!r}"
        return int(self.client.zcount(self._times, low, "+inf"))

    # -- writes --------------------------------------------------------------------------------

    def add(self, docs: Sequence[Doc], heads: dict[bytes, bytes] | None) -> bool:
        """Store ``docs`` in order (a later one of the same id replaces an earlier one).
        With ``heads`` (the first entry read from each of their band lists) only when none of
        those lists has changed since: False (nothing stored) when one has."""
        if not docs:
            return True
        bands = list({b: None for d in docs for b in d.bands})
        if self.cluster:
            olds = self._add_cluster(docs, bands, heads)
            if olds is None:
                return False
        else:
            where = {b: j for j, b in enumerate(bands, 1)}
            args: list[Any] = [len(docs), len(bands), 2 * self.limit]
            args += [b"*" if heads is None else heads[b] for b in bands]
            for d in docs:
                args += [d.id, d.fp, d.minhash, d.keys, d.text, repr(d.timestamp)]
                args += [self._expire_at(d.timestamp), " ".join(str(where[b]) for b in d.bands)]
            keys = [self._seq, self._times, *bands, *(self._data + d.id for d in docs)]
            out = self.fn.call(self.client, "add", keys, args)
            if out[0] == 0:
                return False
            olds = [(out[i], out[i + 1]) for i in range(2, len(out), 3)]
        self._unlink([(d.id, old, keys) for d, (old, keys) in zip(docs, olds) if old is not None])
        return True

    def _add_cluster(
        self, docs: Sequence[Doc], bands: list[bytes], heads: dict[bytes, bytes] | None
    ) -> list[tuple[bytes | None, bytes | None]] | None:
        """Redis Cluster: reserve the band lists (each still starting with its head read, no
        one else's reservation in it), write the versions' data, then push the entries and
        drop the reservations. Entries follow their data, so a reader never meets an entry
        whose data are missing. None (nothing written) when a list has changed or is reserved."""
        fn, pipe = self.fn, self.client.pipeline(transaction=False)
        token = os.urandom(8).hex() if heads is not None else ""
        if heads is not None:
            for b in bands:
                fn.call(pipe, "reserve", [b], [heads[b], token, RESERVE_TTL_MS])
        pipe.incrby(self._seq, len(docs))
        got = pipe.execute()
        if heads is not None and not all(got[:-1]):
            for b, ok in zip(bands, got):
                if ok:
                    fn.call(pipe, "commit", [b], [token, 2 * self.limit, "0"])
            pipe.execute()
            return None
        first = int(got[-1]) - len(docs) + 1
        entries: dict[bytes, list[bytes]] = {b: [] for b in bands}
        until: dict[bytes, int] = {b: 0 for b in bands}
        for ref, d in enumerate(docs, first):
            at = self._expire_at(d.timestamp)
            fn.call(pipe, "put", [self._data + d.id], [ref, d.fp, d.minhash, d.keys, d.text,
                                                        repr(d.timestamp), at])  # fmt: skip
            pipe.zadd(self._times, {d.id: d.timestamp})
            for b in d.bands:
                entries[b].append(b"%d,%s" % (ref, d.id))
                until[b] = max(until[b], int(at))
        olds = pipe.execute()[0::2]
        for b in bands:
            fn.call(pipe, "commit", [b], [token, 2 * self.limit, str(until[b]), *entries[b]])
        pipe.execute()
        return [(o[0], o[1]) for o in olds]

    def _unlink(self, versions: Sequence[tuple[bytes, bytes, bytes | None]]) -> None:
        """Take the entries of dropped or replaced versions ``(id, ref, band keys)`` out of
        their band lists (an entry left behind is stale: never read as a candidate, but it
        holds a place among a list's newest)."""
        if not versions:
            return
        pipe = self.client.pipeline(transaction=False)
        for id, ref, keys in versions:
            for b in self._bands_of(keys or b""):
                pipe.lrem(b, 0, ref + b"," + id)
        pipe.execute()

    def remove(self, id: bytes) -> bool:
        """Drop the stored version of ``id``; False when there is none."""
        old = self.fn.call(self.client, "drop", [self._data + id], [_NEVER])
        if old is None:
            return False
        self._unlink([(id, old[0], old[1])])
        self.fn.call(self.client, "unlist", [self._times], [_NEVER, id])
        return True

    def expire(self, before: float) -> int:
        """Drop every version whose timestamp is < ``before``; how many."""
        done = 0
        while True:
            ids = self.client.zrangebyscore(self._times, "-inf", f"({before!r}", 0, 1000)
            if not ids:
                return done
            pipe = self.client.pipeline(transaction=False)
            for id in ids:
                self.fn.call(pipe, "drop", [self._data + id], [repr(before)])
            dropped = pipe.execute()
            self._unlink([(id, d[0], d[1]) for id, d in zip(ids, dropped) if d is not None])
            done += int(self.fn.call(self.client, "unlist", [self._times], [repr(before), *ids]))
