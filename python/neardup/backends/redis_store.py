"""The Redis store of the one decision: its key layout and the operations a deduplicator needs
(read band fields, read candidates' data and texts, a conditional add, add, remove, expire), on
one server or a Redis Cluster.

Keys (namespace ``ns``; ``h`` is an id's 8-byte hash, ``ref`` a version's 8-byte number from
``{ns}:seq``, both big-endian):

- ``ns:b:<band>``: one hash per band of the policy; field: a band key (4 bytes, big-endian);
  value: records ``h + ref`` of the stored versions with that band key, newest last, at most
  ``2 * bucket_limit`` (so a removal gives its place back to an older record); a check reads
  the newest ``bucket_limit``;
- ``ns:d:<h>``: the id's stored version: ``i`` id, ``r`` ref (its position: smaller is older),
  ``f`` fingerprint, ``m`` min-hash bytes, ``k`` band keys, ``x`` text, ``t`` timestamp. A record
  whose ref is not the data's is stale (never read as a candidate);
- ``{ns}:seq`` (refs), ``{ns}:t`` (id -> timestamp: counts and expiry), ``{ns}:config``.

On a cluster the band hashes spread over the masters by their names, the data by ids.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from neardup._core import IncompatibleIndexError
from neardup.backends.redis_functions import Functions

__all__ = ["FORMAT_VERSION", "Doc", "Found", "RedisStore", "dec_id", "enc_id"]

#: The data format of a namespace (2: the SimHash blocks of earlier versions, refused).
FORMAT_VERSION = 3

# A reservation of band fields outlives a stalled or killed writer by this long (ms).
RESERVE_TTL_MS = 5000
_NEVER = "1e300"  # a time after every timestamp
_EMPTY = bytes(16)  # the head of a field without records
_REC = 16

Band = tuple[int, int]  # (band, band key): one band list


class Doc(NamedTuple):
    """A text to store: encoded id, fingerprint, min-hash bytes, band keys (4 bytes each,
    big-endian), text, timestamp, and whether it goes into the band lists (a text with nothing
    to compare does not)."""

    id: bytes
    fp: int
    minhash: bytes
    keys: bytes
    text: bytes
    timestamp: float
    listed: bool


class Found(NamedTuple):
    """What a read of band lists found: each list's newest record (16 zero bytes: none), its
    stored candidates' id hashes newest first, and their data ``(ref, fingerprint, min-hash
    bytes, encoded id)``."""

    heads: dict[Band, bytes]
    lists: dict[Band, list[bytes]]
    data: dict[bytes, tuple[int, int, bytes, bytes]]


def enc_id(id: int | str) -> bytes:
    return f"i{id}".encode() if isinstance(id, int) else b"s" + id.encode()


def dec_id(raw: bytes) -> int | str:
    s = raw.decode()
    return int(s[1:]) if s[0] == "i" else s[1:]


def _hash(id: bytes) -> bytes:
    return hashlib.blake2b(id, digest_size=8).digest()


class RedisStore:
    """Band lists, versions and their texts in Redis (``cluster``: a Redis Cluster client).

    ``bands`` and ``limit`` come from the policy (``band_shape``, ``bucket_limit``);
    ``retention`` (seconds): versions older than that are not read as candidates nor counted
    (:meth:`expire` deletes them).
    """

    def __init__(
        self,
        client: Any,
        *,
        namespace: str,
        cluster: bool,
        bands: int,
        limit: int,
        retention: float | None,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.limit = limit
        self.retention = retention
        self.namespace = namespace
        self._bands = [f"{namespace}:b:{j}".encode() for j in range(bands)]
        self._data = f"{namespace}:d:".encode()
        self._seq = f"{{{namespace}}}:seq"
        self._times = f"{{{namespace}}}:t"
        self._config = f"{{{namespace}}}:config"
        self.fn = Functions(client)

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
        diffs = [f"{k}: stored {have.get(k)!r}, given {v!r}" for k, v in want.items()
                 if have.get(k) != v]  # fmt: skip
        if diffs:
            raise IncompatibleIndexError(
                f"namespace {self.namespace!r} was created with other settings ("
                + "; ".join(diffs)
                + "): open it with those, or use another namespace"
            )

    def _key(self, id: bytes) -> bytes:
        return self._data + _hash(id)

    def _horizon(self) -> float:
        return -np.inf if self.retention is None else time.time() - self.retention

    # -- reads ---------------------------------------------------------------------------------

    def query(self, keys: npt.NDArray[np.uint32]) -> Found:
        """The newest ``limit`` stored records of the band lists of ``keys`` (one row of band
        keys per text), with their ids' data."""
        fields = [np.unique(keys[:, j]) for j in range(keys.shape[1])] if len(keys) else []
        packed = [f.astype(">u4").tobytes() for f in fields]
        fn = self.fn
        if not self.cluster:
            values = (
                fn.call(self.client, "fields", self._bands[: len(fields)], packed) if fields else []
            )
        else:
            pipe = self.client.pipeline(transaction=False)
            for j, p in enumerate(packed):
                fn.call(pipe, "fields", [self._bands[j]], [p])
            values = [v[0] for v in pipe.execute()]
        heads: dict[Band, bytes] = {}
        records: dict[Band, npt.NDArray[np.void]] = {}
        for j, (fs, vs) in enumerate(zip(fields, values)):
            for f, v in zip(fs.tolist(), vs):
                heads[j, f] = v[-_REC:] if v else _EMPTY
                if v:
                    records[j, f] = np.frombuffer(v, "V16")[-self.limit :][::-1]
        hashes = list({bytes(r)[:8] for rs in records.values() for r in rs.tolist()})
        data = self._data_of(hashes)
        lists = {
            band: [h for h, ref in ((bytes(r)[:8], bytes(r)[8:]) for r in rs.tolist())
                   if h in data and data[h][0] == int.from_bytes(ref, "big")]
            for band, rs in records.items()
        }  # fmt: skip
        return Found(heads, lists, data)

    def _data_of(self, hashes: Sequence[bytes]) -> dict[bytes, tuple[int, int, bytes, bytes]]:
        if not hashes:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for h in hashes:
            pipe.hmget(self._data + h, "r", "f", "m", "i", "t")
        horizon = self._horizon()
        return {
            h: (int.from_bytes(r, "big"), int(f), m, i)
            for h, (r, f, m, i, t) in zip(hashes, pipe.execute())
            if r is not None and float(t) >= horizon
        }

    def texts(self, hashes: Iterable[bytes]) -> dict[bytes, str]:
        """The stored texts of the versions of id hashes (one whose data are gone: left out)."""
        hashes = list(hashes)
        if not hashes:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for h in hashes:
            pipe.hget(self._data + h, "x")
        return {h: x.decode() for h, x in zip(hashes, pipe.execute()) if x is not None}

    def get(self, id: bytes) -> str | None:
        i, x, t = self.client.hmget(self._key(id), "i", "x", "t")
        return x.decode() if i == id and float(t) >= self._horizon() else None

    def contains(self, id: bytes) -> bool:
        return self.get(id) is not None

    def count(self) -> int:
        """Stored versions (those past the retention window are not counted)."""
        low = "-inf" if self.retention is None else f"({self._horizon()!r}"
        return int(self.client.zcount(self._times, low, "+inf"))

    # -- writes --------------------------------------------------------------------------------

    def add(self, docs: Sequence[Doc], heads: dict[Band, bytes] | None) -> bool:
        """Store ``docs`` in order (a later one of the same id replaces an earlier one).
        With ``heads`` (the newest record read from each of their band lists) only when none of
        those lists has changed since: False (nothing stored) when one has."""
        if not docs:
            return True
        if self.cluster:
            return self._add_cluster(docs, heads)
        args: list[Any] = [len(docs), 2 * self.limit]
        for d in docs:
            fields = np.frombuffer(d.keys, ">u4").tolist()
            hs = b"" if heads is None or not d.listed else b"".join(
                heads[j, f] for j, f in enumerate(fields))  # fmt: skip
            args += [d.id, d.fp, d.minhash, d.keys, d.text, repr(d.timestamp), hs, int(d.listed)]
        keys = [self._seq, self._times, *self._bands, *(self._key(d.id) for d in docs)]
        return bool(self.fn.call(self.client, "add", keys, args)[0])

    def _add_cluster(self, docs: Sequence[Doc], heads: dict[Band, bytes] | None) -> bool:
        """Redis Cluster: reserve the band fields (each still ending with its head read, no one
        else's reservation on it), write the versions' data, then append the records and drop
        the reservations. Records follow their data, so a reader never meets a record without
        data. False (nothing written) when a field has changed or is reserved."""
        fn, pipe = self.fn, self.client.pipeline(transaction=False)
        token = os.urandom(8).hex() if heads is not None else ""
        touched: list[dict[int, bytes]] = [{} for _ in self._bands]  # band -> field -> head
        for d in docs:
            if d.listed:
                for j, f in enumerate(np.frombuffer(d.keys, ">u4").tolist()):
                    touched[j].setdefault(f, b"" if heads is None else heads[j, f])
        fields = [np.asarray(list(t), np.uint32).astype(">u4").tobytes() for t in touched]
        if heads is not None:
            for j, t in enumerate(touched):
                fn.call(pipe, "reserve", [self._bands[j]],
                        [token, RESERVE_TTL_MS, fields[j], b"".join(t.values())])  # fmt: skip
        pipe.incrby(self._seq, len(docs))
        got = pipe.execute()
        if heads is not None and not all(got[:-1]):
            self._commit(token, fields, [], [])  # (releases what was reserved)
            return False
        first = int(got[-1]) - len(docs) + 1
        appends: list[dict[int, bytes]] = [{} for _ in self._bands]
        for ref, d in enumerate(docs, first):
            r = ref.to_bytes(8, "big")
            fn.call(pipe, "put", [self._key(d.id)],
                    [d.id, r, d.fp, d.minhash, d.keys, d.text, repr(d.timestamp)])  # fmt: skip
            pipe.zadd(self._times, {d.id: d.timestamp})
            if d.listed:
                for j, f in enumerate(np.frombuffer(d.keys, ">u4").tolist()):
                    appends[j][f] = appends[j].get(f, b"") + _hash(d.id) + r
        olds = pipe.execute()[0::2]
        cuts = [{} for _ in self._bands]  # type: list[dict[int, bytes]]
        for d, (old_ref, old_keys) in zip(docs, olds):
            if old_ref is not None:
                for j, f in enumerate(np.frombuffer(old_keys, ">u4").tolist()):
                    cuts[j][f] = cuts[j].get(f, b"") + _hash(d.id) + old_ref
        self._commit(token, fields, appends, cuts)
        return True

    def _commit(
        self,
        token: str,
        reserved: list[bytes],
        appends: list[dict[int, bytes]],
        cuts: list[dict[int, bytes]],
    ) -> None:
        """Per band hash: drop ``token``'s reservations of the ``reserved`` fields, cut and
        append records."""
        pipe = self.client.pipeline(transaction=False)
        for j, key in enumerate(self._bands):
            a = appends[j] if j < len(appends) else {}
            c = cuts[j] if j < len(cuts) else {}
            fs = list(np.frombuffer(reserved[j], ">u4").tolist()) if j < len(reserved) else []
            fs += [f for f in {**a, **c}.keys() - set(fs)]
            if not fs:
                continue
            packed = np.asarray(fs, np.uint32).astype(">u4").tobytes()
            self.fn.call(pipe, "commit", [key], [token, 2 * self.limit, packed,
                         *(a.get(f, b"") for f in fs), *(c.get(f, b"") for f in fs)])  # fmt: skip
        pipe.execute()

    def _drop(self, ids: Sequence[bytes], before: str) -> list[bytes]:
        """Delete the data of the versions of ``ids`` older than ``before``, cut their
        records; the ids dropped."""
        pipe = self.client.pipeline(transaction=False)
        for id in ids:
            self.fn.call(pipe, "drop", [self._key(id)], [id, before])
        cuts: list[dict[int, bytes]] = [{} for _ in self._bands]
        dropped = []
        for id, old in zip(ids, pipe.execute()):
            if old is not None:
                dropped.append(id)
                for j, f in enumerate(np.frombuffer(old[1], ">u4").tolist()):
                    cuts[j][f] = cuts[j].get(f, b"") + _hash(id) + old[0]
        self._commit("", [], [], cuts)
        return dropped

    def remove(self, id: bytes) -> bool:
        """Drop the stored version of ``id``; False when there is none."""
        if not self._drop([id], _NEVER):
            return False
        self.fn.call(self.client, "unlist", [self._times], [_NEVER, id])
        return True

    def expire(self, before: float) -> int:
        """Drop every version whose timestamp is < ``before``; how many."""
        done = 0
        while True:
            ids = self.client.zrangebyscore(self._times, "-inf", f"({before!r}", 0, 1000)
            if not ids:
                return done
            self._drop(ids, repr(before))
            done += int(self.fn.call(self.client, "unlist", [self._times], [repr(before), *ids]))
