"""The Redis store of the one decision: its key layout and the operations a deduplicator needs
(read band fields, read candidates' data and texts, a conditional add, add, remove, expire), on
one server or a Redis Cluster.

Keys (namespace ``ns``; ``h`` is an id's 8-byte hash, ``ref`` a version's 8-byte number from
``{ns}:seq``, both big-endian):

- ``ns:b:<band>``: one hash per band of the policy; field: a band key (4 bytes, big-endian);
  value: records ``h + ref`` of the stored versions with that band key, newest last, at most
  ``2 * bucket_limit`` (so a removal gives its place back to an older record); a check reads
  the newest ``bucket_limit``; field ``#``: the number of changes of the hash's records (a
  write that finds it as read needs not read the fields it found empty again);
- ``ns:d:<h>``: the id's stored version, one string (:func:`unpack_data`): its ref (its
  position: smaller is older), fingerprint, timestamp, the length of its head (what comes
  before the text, which a check reads of every candidate), id, min-hash bytes, band keys and
  text. A record whose ref is not the data's is stale (never read as a candidate);
- ``{ns}:seq`` (refs), ``{ns}:t`` (id -> timestamp: counts and expiry), ``{ns}:config``.

On a cluster the band hashes spread over the masters by their names, the data by ids.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup._core import IncompatibleIndexError
from neardup.backends.redis_functions import Functions, missing_function
from neardup.policy import Policy
from neardup.stores import Doc, Found, Head, dec_id, enc_id

__all__ = [
    "FORMAT_VERSION", "Doc", "Found", "RedisStore", "dec_id", "enc_id", "id_hash", "unpack_data",
]  # fmt: skip

#: The data format of a namespace (2: the SimHash blocks of earlier versions; 3: band hashes
#: without their change count; 4: a version's data as a hash; all refused).
FORMAT_VERSION = 5

# A reservation of band fields outlives a stalled or killed writer by this long (ms).
RESERVE_TTL_MS = 5000
_NEVER = "1e300"  # a time after every timestamp
_REC = 16


class Recent:
    """A bounded map of recent entries in two generations: new entries go to the young one;
    when it holds half the bound (entries, or total length of the values) it becomes the old
    one and the former old one is dropped. Reads and writes cost O(1) (no scan for the
    oldest entry, which a dict makes longer with each entry deleted at its front)."""

    def __init__(self, size: int, chars: int | None = None) -> None:
        self.size, self.chars = size, chars
        self._young: dict[bytes, Any] = {}
        self._old: dict[bytes, Any] = {}
        self._young_chars = 0
        self._lock = threading.Lock()

    def get(self, key: bytes) -> Any:
        got = self._young.get(key)
        return self._old.get(key) if got is None else got

    def update(self, items: Iterable[tuple[bytes, Any]]) -> None:
        new = dict(items)
        grown = sum(map(len, new.values())) if self.chars is not None else 0
        with self._lock:
            self._young.update(new)
            self._young_chars += grown
            if 2 * len(self._young) >= self.size or (
                self.chars is not None and 2 * self._young_chars >= self.chars
            ):
                self._old, self._young, self._young_chars = self._young, {}, 0

    def __len__(self) -> int:
        return len(self._young) + len(self._old)


def unique(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """The sorted distinct values of ``a`` (numpy >= 2.3's ``np.unique`` hashes, which costs
    tens of times a sort here)."""
    s = np.sort(a, axis=None)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if len(s) else s


def band_codes(keys: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
    """Each band list of rows of band keys (one column per band) as one number:
    ``band << 32 | band key``."""
    return (np.arange(keys.shape[1], dtype=np.int64) << 32) | keys.astype(np.int64)


def unpack_data(v: bytes) -> tuple[bytes, int, float, bytes, bytes, bytes, bytes]:
    """A version's data string (the Lua library's ``DATA``): its ref (8 bytes), fingerprint,
    timestamp, encoded id, min-hash bytes, band keys and text (UTF-8; empty when only the
    head before the text was read)."""
    ref, fp, ts = v[:8], int.from_bytes(v[8:16], "big"), struct.unpack_from(">d", v, 16)[0]
    parts, at = [], 28  # (after the head's length)
    for _ in range(4):
        end = at + 4 + int.from_bytes(v[at : at + 4], "big")
        parts.append(v[at + 4 : end])
        at = end
    i, m, k, x = parts
    return ref, fp, ts, i, m, k, x


def id_hash(id: bytes) -> bytes:
    """The 8-byte hash of an encoded id that records and data keys name it by."""
    return hashlib.blake2b(id, digest_size=8).digest()


class RedisStore:
    """Band lists, versions and their texts in Redis (``cluster``: a Redis Cluster client):
    a :class:`neardup.stores.Store`.

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
        self.settings: dict[str, Any] = {"namespace": namespace, "cluster": cluster}
        self._settings: dict[str, Any] | None = None  # (as opened)

    def open(self, settings: dict[str, Any]) -> None:
        """Record ``settings`` for the namespace, or check them against those recorded:
        :class:`neardup.IncompatibleIndexError` names each difference."""
        want = {"format": FORMAT_VERSION, **settings}
        self._check_key_types()
        self.client.set(self._config, json.dumps(want, sort_keys=True), nx=True)
        try:
            have = json.loads(self.client.get(self._config))
        except ValueError:
            have = None
        if not isinstance(have, dict):
            raise IncompatibleIndexError(
                f"namespace {self.namespace!r}: its key {self._config} holds no neardup "
                "settings (another program's key?): use another namespace"
            )
        self._settings = settings
        if isinstance(have.get("policy"), dict):  # (settings added since take their defaults)
            have["policy"] = Policy.from_dict(have["policy"]).to_dict()
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

    def _check_key_types(self) -> None:
        """IncompatibleIndexError naming a key of the namespace that holds another type (the
        namespace is another program's)."""
        want: dict[str | bytes, bytes] = {
            self._config: b"string",
            self._seq: b"string",
            self._times: b"zset",
        }
        want.update({key: b"hash" for key in self._bands})
        pipe = self.client.pipeline(transaction=False)
        for key in want:
            pipe.type(key)
        for (key, kind), have in zip(want.items(), pipe.execute()):
            have = have.encode() if isinstance(have, str) else have
            if have not in (kind, b"none"):
                name = key if isinstance(key, str) else key.decode()
                raise IncompatibleIndexError(
                    f"namespace {self.namespace!r}: its key {name} is a {have.decode()}, not a "
                    f"{kind.decode()} (another program's key?): use another namespace"
                )

    def recover(self, exc: BaseException) -> bool:
        """Load the library again into a server that lost it (restarted without persistence)."""
        if not missing_function(exc):
            return False
        self.fn.reload()
        return True

    def close(self) -> None:
        self.client.close()

    def _key(self, id: bytes) -> bytes:
        return self._data + id_hash(id)

    def horizon(self) -> float:
        return -np.inf if self.retention is None else time.time() - self.retention

    # -- reads ---------------------------------------------------------------------------------

    def query(self, keys: npt.NDArray[np.uint32], refs: int = 0) -> Found:
        """The newest ``limit`` stored records of the band lists of ``keys`` (one row of band
        keys per text); ``refs`` refs are reserved in the same round trip (for the versions a
        check-and-add may store)."""
        nb = len(self._bands)
        fields = [unique(keys[:, j]) for j in range(nb)]
        packed = [f.astype(">u4").tobytes() for f in fields]
        fn, pipe, cap = self.fn, self.client.pipeline(transaction=False), self.limit * _REC
        if not self.cluster:
            fn.call(pipe, "fields", self._bands, [cap, *packed])
        else:
            for j, p in enumerate(packed):
                fn.call(pipe, "fields", [self._bands[j]], [cap, p])
        if refs:
            self._start_seq(pipe)
            pipe.incrby(self._seq, refs)
        got = self._execute(pipe, refs > 0)
        first = 0
        if refs:
            first = int(got.pop()) - refs + 1
            got.pop()
        values = got[0] if not self.cluster else [v[0] for v in got]
        heads, codes, blobs, stamps = [], [], [], []
        for j, (fs, (stamp, full, tails)) in enumerate(zip(fields, values)):
            h = np.zeros((len(fs), _REC), np.uint8)
            stamps.append(stamp)
            if full:  # (most fields are empty)
                h[full] = np.frombuffer(b"".join([t[-_REC:] for t in tails]), np.uint8).reshape(
                    -1, _REC
                )
                counts = [len(t) // _REC for t in tails]
                codes.append(np.repeat((j << 32) | fs[full].astype(np.int64), counts))
                blobs.append(b"".join(tails))
            heads.append(h)
        records = np.frombuffer(b"".join(blobs), np.uint8).reshape(-1, _REC)
        code = np.concatenate(codes) if codes else np.zeros(0, np.int64)
        return Found(fields, heads, code, records, first, stamps)

    def refs(self, n: int) -> int:
        """Reserve ``n`` refs; the first."""
        pipe = self.client.pipeline(transaction=False)
        self._start_seq(pipe)
        pipe.incrby(self._seq, n)
        _, last = self._execute(pipe, True)
        return int(last) - n + 1

    def _start_seq(self, pipe: Any) -> None:
        """Start the version counter where there is none (a new namespace, or a server that
        lost its data) at the time in microseconds times 1000, so that a version made after a
        restart without persistence never has the number of one made before it (processes keep
        what they read of versions by number). Plain commands, which run also when the server
        lost the functions; ``_started`` reads the answer."""
        pipe.set(self._seq, time.time_ns() // 1000 * 1000, nx=True)

    def _execute(self, pipe: Any, counted: bool) -> list[Any]:
        """The answers of ``pipe``, whose last two commands start the version counter and take
        refs when ``counted``. Where the counter was started, the namespace's settings are
        recorded again (a server restarted without persistence lost them too), also when an
        earlier command failed (the functions were lost as well): then its error is raised."""
        got = pipe.execute(raise_on_error=False)
        if counted and got[-2] is True and self._settings is not None:
            self.open(self._settings)
        for answer in got:
            if isinstance(answer, Exception):
                raise answer
        return list(got)

    def _values(self, hashes: Sequence[bytes], text: bool) -> list[bytes | None]:
        """The data string of each id hash (None: none), without its text unless ``text``:
        one call on a server, a pipeline of calls on a cluster."""
        keys = [self._data + h for h in hashes]
        arg = [1 if text else 0]
        if not self.cluster:
            return list(self.fn.call(self.client, "data", keys, arg))
        pipe = self.client.pipeline(transaction=False)
        for k in keys:
            self.fn.call(pipe, "data", [k], arg)
        return [v[0] for v in pipe.execute()]

    def heads(self, hashes: Sequence[bytes]) -> list[Head]:
        """What a check needs of the stored versions of id hashes (those gone left out)."""
        out = []
        for h, v in zip(hashes, self._values(hashes, False) if hashes else []):
            if v is not None:
                r, f, t, i, m, _, _ = unpack_data(v)
                out.append(Head(h + r, f, t, i, m))
        return out

    def texts(self, records: Iterable[bytes]) -> dict[bytes, str]:
        """The texts of the versions that records name, by record (one gone or replaced
        meanwhile: left out)."""
        records = list(records)
        if not records:
            return {}
        values = self._values([r[:8] for r in records], True)
        # (a text may hold a lone surrogate -- half of an escaped pair in JSON -- as the
        # embedded store keeps it)
        return {r: unpack_data(v)[6].decode("utf-8", "surrogatepass")
                for r, v in zip(records, values) if v is not None and v[:8] == r[8:]}  # fmt: skip

    def get(self, id: bytes) -> str | None:
        v = self.client.get(self._key(id))
        if v is None:
            return None
        _, _, t, i, _, _, x = unpack_data(v)
        return x.decode("utf-8", "surrogatepass") if i == id and t >= self.horizon() else None

    def probe(self) -> None:
        """Raise what the server raises when it cannot serve: the count, and a call of the
        library as every request makes one (a user refused FCALL can still count)."""
        self.count()
        self._values([bytes(8)], False)

    def count(self) -> int:
        """Stored versions (those past the retention window are not counted)."""
        low = "-inf" if self.retention is None else f"({self.horizon()!r}"
        return int(self.client.zcount(self._times, low, "+inf"))

    # -- writes --------------------------------------------------------------------------------

    def _grouped(
        self, docs: Sequence[Doc], recs: Sequence[bytes], found: Found | None, single: bool
    ) -> list[tuple[bytes, ...]]:
        """Per band hash, what the write of the listed ``docs`` (records ``recs``) sends.
        ``single`` (one server): the change count read (``b"-"`` without ``found``: no
        check), the pairs of the fields read empty that get one record (4-byte field and
        record each), then of the other fields: the fields (packed, sorted), the heads of
        those read non-empty (4-byte index among them and record each), the records in field
        order and how many go to each field (2 bytes each). On a cluster: the last four for
        every field."""
        listed = [r for r, d in zip(recs, docs) if d.listed]
        nb = len(self._bands)
        if not listed:
            return [(b"-", b"", b"", b"", b"", b"") if single else (b"", b"", b"", b"")] * nb
        keys = np.frombuffer(b"".join([d.keys for d in docs if d.listed]), ">u4").reshape(-1, nb)
        n = len(listed)
        # Every (band, band key, doc) as one number, band-major; sorted, each field's records
        # follow one another in doc order, band j's at [j * n, (j + 1) * n).
        shift = n.bit_length()
        code = band_codes(keys).T.ravel()
        ordered = np.sort((code << shift) | np.tile(np.arange(n, dtype=np.int64), nb))
        doc = ordered & ((1 << shift) - 1)
        ordered >>= shift
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        fcode = ordered[starts]  # (the fields, band by band)
        counts = np.diff(np.append(starts, len(ordered)))
        fkey = (fcode & 0xFFFFFFFF).astype(">u4")
        mine = np.frombuffer(b"".join(listed), np.uint8).reshape(-1, _REC)[doc]
        fb = np.searchsorted(fcode >> 32, np.arange(nb + 1))  # (band j's fields: fb[j]:fb[j+1])
        rb = np.arange(nb + 1) * n  # (band j's records)
        if found is None:
            return [
                ((b"-", b"") if single else ())
                + (
                    fkey[fb[j] : fb[j + 1]].tobytes(),
                    b"-",
                    mine[rb[j] : rb[j + 1]].tobytes(),
                    counts[fb[j] : fb[j + 1]].astype(">u2").tobytes(),
                )  # fmt: skip
                for j in range(nb)
            ]
        read_codes = np.concatenate(
            [(j << 32) | f.astype(np.int64) for j, f in enumerate(found.fields)]
        )
        read = np.concatenate(found.heads)[np.searchsorted(read_codes, fcode)]
        halves = read.view(np.uint64)
        full: npt.NDArray[np.bool_] = (halves[:, 0] | halves[:, 1]) != 0
        pairs = np.zeros((0, 4 + _REC), np.uint8)
        pb = np.zeros(nb + 1, np.int64)
        if single and found.stamps is not None:
            alone: npt.NDArray[np.bool_] = ~full & (counts == 1)  # (read empty, one record)
            pairs = np.concatenate(
                [fkey[alone].view(np.uint8).reshape(-1, 4), mine[starts[alone]]], axis=1
            )
            pb = np.concatenate(([0], np.cumsum(alone)))[fb]
            rest: npt.NDArray[np.bool_] = ~alone
            kept = np.concatenate(([0], np.cumsum(np.repeat(rest, counts))))
            rb = kept[rb]
            mine = mine[np.repeat(rest, counts)]
            fb = np.concatenate(([0], np.cumsum(rest)))[fb]
            fkey, counts, read, full = fkey[rest], counts[rest], read[rest], full[rest]
        out: list[tuple[bytes, ...]] = []
        for j in range(nb):
            a, b = fb[j], fb[j + 1]
            at = np.flatnonzero(full[a:b])  # (index, newest record) of each field read non-empty
            heads = np.concatenate(
                [at.astype(">u4").view(np.uint8).reshape(-1, 4), read[a:b][at]], axis=1
            ).tobytes()
            group = (fkey[a:b].tobytes(), heads, mine[rb[j] : rb[j + 1]].tobytes(),
                     counts[a:b].astype(">u2").tobytes())  # fmt: skip
            if not single:
                out.append(group)
                continue
            stamp = b"" if found.stamps is None else found.stamps[j]
            out.append((stamp, pairs[pb[j] : pb[j + 1]].tobytes(), *group))
        return out

    def add(self, docs: Sequence[Doc], found: Found | None) -> bool:
        """Store ``docs`` in order (a later one of the same id replaces an earlier one).
        With ``found`` (the read their decision was made on) only when none of their band
        lists has changed since: False (nothing stored) when one has."""
        if not docs:
            return True
        hashes = [id_hash(d.id) for d in docs]
        refs = [d.ref.to_bytes(8, "big") for d in docs]
        recs = [h + r for h, r in zip(hashes, refs)]
        groups = self._grouped(docs, recs, found, not self.cluster)
        if self.cluster:
            return self._add_cluster(docs, groups, found is not None)
        args: list[Any] = [len(docs), 2 * self.limit]
        for g in groups:
            args += g
        ids, texts = [d.id for d in docs], [d.text for d in docs]
        args += [
            b"".join(refs),
            np.array([d.fp for d in docs], ">u8").tobytes(),
            b"".join([d.minhash for d in docs]),
            b"".join([d.keys for d in docs]),
            b"".join(ids),
            np.array(list(map(len, ids)), ">u4").tobytes(),
            b"".join(texts),
            np.array(list(map(len, texts)), ">u4").tobytes(),
            ",".join([repr(d.timestamp) for d in docs]),
        ]
        data = self._data
        keys = [self._times, *self._bands, *[data + h for h in hashes]]
        return bool(self.fn.call(self.client, "add", keys, args)[0])

    def _add_cluster(
        self, docs: Sequence[Doc], groups: list[tuple[bytes, ...]], check: bool
    ) -> bool:
        """Redis Cluster: reserve the band fields (each still ending with its head read, no one
        else's reservation on it), write the versions' data, then append the records and drop
        the reservations. Records follow their data, so a reader never meets a record without
        data. False (nothing written) when a field has changed or is reserved."""
        fn, pipe = self.fn, self.client.pipeline(transaction=False)
        token = os.urandom(8).hex()
        if check:
            for key, (fields, heads, _, _) in zip(self._bands, groups):
                fn.call(pipe, "reserve", [key], [token, RESERVE_TTL_MS, fields, heads])
            if not all(pipe.execute()):
                for key, (fields, _, _, _) in zip(self._bands, groups):
                    fn.call(pipe, "commit", [key], [token, 0, fields, b"", b""])
                pipe.execute()
                return False
        for d in docs:
            fn.call(pipe, "put", [self._key(d.id)], [d.id, d.ref.to_bytes(8, "big"),
                    d.fp.to_bytes(8, "big"),
                    d.minhash, d.keys, d.text, repr(d.timestamp)])  # fmt: skip
            pipe.zadd(self._times, {d.id: d.timestamp})
        olds = pipe.execute()[0::2]
        for key, (fields, _, recs, counts) in zip(self._bands, groups):
            fn.call(pipe, "commit", [key], [token, 2 * self.limit, fields, recs, counts])
        pipe.execute()
        self._cut([(d.id, old[0], old[1]) for d, old in zip(docs, olds) if old[0] is not None])
        return True

    def _cut(self, versions: Sequence[tuple[bytes, bytes, bytes]]) -> None:
        """Take the records of versions ``(id, ref, band keys)`` out of their band lists."""
        if not versions:
            return
        nb = len(self._bands)
        keys = np.frombuffer(b"".join(k for _, _, k in versions), ">u4").reshape(-1, nb)
        recs = [id_hash(id) + ref for id, ref, _ in versions]
        pipe = self.client.pipeline(transaction=False)
        for j, key in enumerate(self._bands):
            fields = keys[:, j].astype(">u4").tobytes()
            self.fn.call(pipe, "cut", [key], [fields, b"".join(recs)])
        pipe.execute()

    def _drop(self, ids: Sequence[bytes], before: str) -> int:
        """Delete the versions of ``ids`` older than ``before`` with their records (on one
        server in one call, so that a record always names a stored version); how many."""
        if not self.cluster:
            keys = [self._times, *self._bands, *(self._key(id) for id in ids)]
            return int(self.fn.call(self.client, "remove", keys, [before, *ids]))
        # Cluster: the versions are read first, then each deleted if still the one read, and
        # its records cut (a deletion run twice by the client's retry finds it gone: cut too).
        versions = []
        for id, v in zip(ids, self._values([id_hash(id) for id in ids], False)):
            if v is not None:
                ref, _, t, i, _, band_keys, _ = unpack_data(v)
                if i == id and t < float(before):
                    versions.append((id, ref, band_keys))
        pipe = self.client.pipeline(transaction=False)
        for id, ref, _ in versions:
            self.fn.call(pipe, "drop", [self._key(id)], [id, before, ref])
        gone = [v for v, done in zip(versions, pipe.execute()) if done]
        self._cut(gone)
        return len(gone)

    def remove(self, id: bytes) -> bool:
        """Drop the stored version of ``id``; False when there is none."""
        if not self._drop([id], _NEVER):
            return False
        if not self.cluster:
            return True
        self.fn.call(self.client, "unlist", [self._times], [_NEVER, id])
        return True

    def expire(self, before: float) -> int:
        """Drop every version whose timestamp is < ``before``; how many."""
        done = 0
        while True:
            ids = self.client.zrangebyscore(self._times, "-inf", f"({before!r}", 0, 1000)
            if not ids:
                return done
            dropped = self._drop(ids, repr(before))  # (on one server, also unlisted)
            left = int(self.fn.call(self.client, "unlist", [self._times], [repr(before), *ids]))
            done += left if self.cluster else dropped + left
