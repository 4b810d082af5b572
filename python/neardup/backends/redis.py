"""A near-duplicate index shared by many processes and machines, stored in Redis or Redis Cluster.

:class:`RedisIndex` has the contract of :class:`neardup.Index`: ``query(fp, k)`` returns every
stored item whose Hamming distance to ``fp`` is **<= k** (inclusive), never one farther, with
its distance, nearest first. :class:`RedisDeduplicator` adds the stored texts and the verifier of
a :class:`neardup.dedup.Policy` on top, with the semantics of :class:`neardup.Deduplicator`
(it satisfies :class:`neardup.dedup.DedupBackend`, so ``neardup serve --store redis://...``
uses it).

Layout (all keys start with the namespace ``ns``, default ``"neardup"``):

- The 64-bit fingerprint is cut into ``B`` blocks (:class:`neardup.backends.layout.BlockLayout`,
  the core index's cut; ``B = k + 1`` for ``k <= 5``: by the pigeonhole principle two
  fingerprints within ``k`` bits agree exactly on at least one block; for wider ``k`` fewer,
  larger blocks probed within a radius, :meth:`~neardup.backends.layout.BlockLayout.radii`).
- ``ns:b:<period>:<block>:<value hex>``: a list (the bucket) of entries: the fingerprint
  (8 bytes, big-endian), then ``<uid>|<id>``. A query reads the buckets of its probe values in
  every live period (one round trip per node), then checks the distances exactly.
- ``ns:r:<id>``: a hash per item: fingerprint, timestamp, period, uid (and the text, for
  :class:`RedisDeduplicator`).
- ``{ns}:config`` (the settings, checked on open), ``{ns}:seq`` (the sequence of tickets),
  ``{ns}:n:<period>`` (item counts), ``{ns}:horizon`` (the first period not expired by
  :meth:`RedisIndex.expire`) and, on a cluster, ``{ns}:tk:<period>`` (uid -> ticket). The
  ``{ns}`` hash tag keeps these in one slot; buckets and records spread over the cluster.

Time periods: an item with timestamp ``ts`` lives in period ``floor(ts / period)``; with a
retention, every key of a period gets ``EXPIREAT (period + 1) * period_seconds + retention``,
so Redis drops old items by itself (no scans) and queries read only the live periods.

Atomic check-and-add without a global lock (see docs/scale-out.md for the proof): every
check-and-add takes a *ticket* from ``{ns}:seq``; an item is a duplicate when a stored item
with a smaller ticket is near it (and passes the verifier). On one Redis server a single Lua
script takes the ticket, reads the probe buckets and appends the entry atomically. On a cluster
the entry is appended first, then the ticket is taken, then the buckets are read: whoever took
the later ticket is guaranteed to read the other's entry. Of near-copies racing from many
processes, exactly one is added; the others retract their entries.
"""

from __future__ import annotations

import json
import math
import operator
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Union
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
import numpy.typing as npt

try:
    import redis as redis_py
    from redis.cluster import RedisCluster
except ModuleNotFoundError as e:  # pragma: no cover - exercised only without the extra
    raise ModuleNotFoundError(
        "neardup.backends.redis needs the redis package: pip install 'neardup[redis]'",
        name=e.name,
    ) from e

from neardup._core import Fingerprinter, IncompatibleIndexError
from neardup.backends.layout import BlockLayout, default_blocks
from neardup.dedup import Match, Policy
from neardup.textstore import Id, check_id
from neardup.verify import cosine, jaccard_sketch, levenshtein, normalise, sketch

__all__ = ["BlockLayout", "RedisDeduplicator", "RedisIndex", "default_blocks"]

FORMAT_VERSION = 1
_U64 = (1 << 64) - 1
# Up to this many probe buckets are read inside the write script (see RedisIndex._write_many);
# more (very wide radii) are read afterwards with pipelined LRANGEs.
_INLINE_READ_KEYS = 1024
# Without retention every item lives in one period (period 0 for the next ~35 000 years).
_NO_RETENTION_PERIOD = float(1 << 40)

Client = Union["redis_py.Redis", "RedisCluster"]


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


# -- Lua --------------------------------------------------------------------------------------

# One Redis server: take a ticket, read the (few) probe buckets passed, append the entry to its
# own buckets and write the item record, all in one atomic step. KEYS: seq, count, record, horizon,
# probes..., own buckets... ARGV: nprobes, fingerprint (8 bytes), expireat (0: none), id,
# record fields...
_WRITE_LUA = """
local t = redis.call('INCR', KEYS[1])
local np = tonumber(ARGV[1])
local exp = tonumber(ARGV[3])
local uid = 't' .. t
local entry = ARGV[2] .. uid .. '|' .. ARGV[4]
local out = {t, redis.call('HGETALL', KEYS[3]), redis.call('GET', KEYS[4]) or false}
for i = 5, 4 + np do
  out[#out + 1] = redis.call('LRANGE', KEYS[i], 0, -1)
end
for i = 5 + np, #KEYS do
  redis.call('RPUSH', KEYS[i], entry)
  if exp > 0 then redis.call('EXPIREAT', KEYS[i], exp) end
end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'u', uid, unpack(ARGV, 5))
redis.call('INCR', KEYS[2])
if exp > 0 then
  redis.call('EXPIREAT', KEYS[3], exp)
  redis.call('EXPIREAT', KEYS[2], exp)
end
return out
"""

# Redis Cluster, after the entry is appended: take a ticket and publish uid -> ticket in the
# same slot, so a reader holding a later ticket finds it. KEYS: seq, tickets, count, horizon.
# ARGV: uid, expireat (0: none).
_TICKET_LUA = """
local t = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[1], t)
redis.call('INCR', KEYS[3])
local exp = tonumber(ARGV[2])
if exp > 0 then
  redis.call('EXPIREAT', KEYS[2], exp)
  redis.call('EXPIREAT', KEYS[3], exp)
end
return {t, redis.call('GET', KEYS[4]) or false}
"""

# Delete the record KEYS[1] if its uid is still ARGV[1].
_DEL_IF_LUA = """
if redis.call('HGET', KEYS[1], 'u') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""

# Move the horizon to ARGV[1] (periods before it are expired); return how many items the
# dropped periods held. KEYS: horizon. ARGV: new horizon, count key prefix, first live period.
_EXPIRE_LUA = """
local old = tonumber(redis.call('GET', KEYS[1]) or ARGV[3])
local new = tonumber(ARGV[1])
local n = 0
if new > old then
  for p = old, new - 1 do
    local key = ARGV[2] .. p
    n = n + tonumber(redis.call('GET', key) or '0')
    redis.call('DEL', key)
  end
  redis.call('SET', KEYS[1], new)
end
return n
"""


# -- the index -------------------------------------------------------------------------------


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


class RedisIndex:
    """Exact Hamming index over Redis: ``query(fp, k)`` returns every stored item whose Hamming
    distance to ``fp`` is <= k (inclusive), never one farther, nearest first.

    ``client`` is a ``redis.Redis`` or ``redis.cluster.RedisCluster`` (``decode_responses``
    must be off); :meth:`from_url` builds one. Several processes sharing a Redis and a
    ``namespace`` share the index; the settings (``k``, ``blocks``, ``retention``, ``period``
    and ``meta``) are stored under ``{namespace}:config`` on first use and a process opening it
    with different ones gets :class:`neardup.IncompatibleIndexError`.

    ``retention`` (seconds, ``None`` = keep forever): items live until the end of their time
    period plus ``retention``; Redis deletes them itself. ``period`` defaults to
    ``retention / 2`` (a query reads 3 periods; an item stays 1 to 1.5 retentions).
    ``blocks`` defaults to :func:`default_blocks` of ``k``.

    ``wait_replicas`` (one server with replicas): after each write, ``WAIT`` until that many
    replicas acknowledged it (``wait_timeout`` ms); fewer raises ``TimeoutError`` and the
    write must be treated as not acknowledged (see docs/scale-out.md, durability).
    """

    def __init__(
        self,
        client: Client,
        k: int = 3,
        *,
        namespace: str = "neardup",
        blocks: int | None = None,
        retention: float | None = None,
        period: float | None = None,
        meta: Mapping[str, Any] | None = None,
        wait_replicas: int = 0,
        wait_timeout: int = 1000,
    ) -> None:
        self.k = _check_k(k)
        for name, value in (("wait_replicas", wait_replicas), ("wait_timeout", wait_timeout)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        self.wait_replicas = wait_replicas
        self.wait_timeout = wait_timeout
        if not isinstance(namespace, str) or not namespace or any(c in namespace for c in "{}|"):
            raise ValueError(
                f"namespace must be a non-empty str without '{{', '}}' or '|', got {namespace!r}"
            )
        if retention is not None:
            if isinstance(retention, bool) or not isinstance(retention, (int, float)):
                raise TypeError(f"retention must be seconds (float) or None, got {retention!r}")
            if not (math.isfinite(retention) and retention > 0):
                raise ValueError(f"retention must be positive seconds or None, got {retention!r}")
        if period is None:
            period = retention / 2.0 if retention is not None else _NO_RETENTION_PERIOD
        if isinstance(period, bool) or not isinstance(period, (int, float)):
            raise TypeError(f"period must be seconds (float), got {period!r}")
        if not (math.isfinite(period) and period >= 1.0):
            raise ValueError(f"period must be at least 1 second, got {period!r}")
        if retention is None and period != _NO_RETENTION_PERIOD:
            raise ValueError("period is only used with a retention; pass retention= too")
        self.layout = BlockLayout(default_blocks(self.k) if blocks is None else blocks)
        self.retention = None if retention is None else float(retention)
        self.period = float(period)
        self.namespace = namespace
        self.client = client
        self.cluster = isinstance(client, RedisCluster)
        if self.cluster and wait_replicas:
            raise ValueError("wait_replicas is for one server with replicas, not Redis Cluster")
        tag = "{" + namespace + "}"
        self._k_config = f"{tag}:config"
        self._k_seq = f"{tag}:seq"
        self._k_horizon = f"{tag}:horizon"
        self._k_count = f"{tag}:n:"
        self._k_tickets = f"{tag}:tk:"
        self._write_script = client.register_script(_WRITE_LUA)
        self._ticket_script = client.register_script(_TICKET_LUA)
        self._expire_script = client.register_script(_EXPIRE_LUA)
        self._del_if_script = client.register_script(_DEL_IF_LUA)
        for script in (self._write_script, self._del_if_script):
            client.script_load(script.script)
        self._check_config(dict(meta or {}))

    @classmethod
    def from_url(cls, url: str, k: int = 3, **kwargs: Any) -> RedisIndex:
        """An index over the Redis at ``url`` (see :func:`connect` for the URL forms).

        ``namespace``, ``blocks``, ``retention`` and ``period`` may be given as keyword
        arguments or as query parameters of the URL; other query parameters go to redis-py.
        """
        client, options = connect(url)
        for name in _OUR_OPTIONS:
            if name in options and name not in kwargs:
                kwargs[name] = options[name]
        return cls(client, k, **kwargs)

    # -- settings ----------------------------------------------------------------------------

    def _settings(self, meta: dict[str, Any]) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "k": self.k,
            "blocks": self.layout.blocks,
            "retention": self.retention,
            "period": self.period,
            **meta,
        }

    def _check_config(self, meta: dict[str, Any]) -> None:
        want = self._settings(meta)
        raw = json.dumps(want, sort_keys=True)
        self.client.set(self._k_config, raw, nx=True)
        stored_raw = self.client.get(self._k_config)
        stored = json.loads(_s(stored_raw)) if stored_raw is not None else want
        if stored != want:
            diff = sorted(k for k in set(stored) | set(want) if stored.get(k) != want.get(k))
            detail = ", ".join(
                f"{k}: stored {stored.get(k)!r}, given {want.get(k)!r}" for k in diff
            )
            raise IncompatibleIndexError(
                f"Redis namespace {self.namespace!r} holds an index with other settings "
                f"({detail}); open it with the stored settings or use another namespace"
            )

    # -- keys and periods --------------------------------------------------------------------

    def _period_of(self, ts: float) -> int:
        return int(math.floor(ts / self.period))

    def _expire_at(self, p: int) -> int:
        if self.retention is None:
            return 0
        return int(math.ceil((p + 1) * self.period + self.retention))

    def _live_periods(self, now: float | None = None) -> range:
        now = time.time() if now is None else now
        hi = self._period_of(now)
        if self.retention is None:
            return range(0, 1)  # everything lives in period 0
        # A period is live until its keys expire: (p + 1) * period + retention > now.
        lo = int(math.floor((now - self.retention) / self.period))
        return range(lo, hi + 1)

    def _bucket(self, p: int, block: int, value: int) -> str:
        return f"{self.namespace}:b:{p}:{block}:{value:x}"

    def _record(self, idenc: str) -> str:
        return f"{self.namespace}:r:{idenc}"

    def _store_period(self, ts: float) -> int:
        p = self._period_of(ts)
        hi = self._period_of(time.time())
        if p > hi:  # a future timestamp is stored now and expires with its own time
            p = hi
        return 0 if self.retention is None else p

    # -- reading buckets ---------------------------------------------------------------------

    def _parse(
        self,
        fp: int,
        k: int,
        lists: Iterable[tuple[int, Sequence[bytes]]],
        horizon: int,
        exclude: str | None = None,
    ) -> dict[str, _Entry]:
        """Entries within ``k`` of ``fp`` from ``(period, members)`` lists, one per id."""
        raws: list[bytes] = []
        periods: list[int] = []
        for p, members in lists:
            if p >= horizon and members:
                raws += members
                periods += [p] * len(members)
        found: dict[str, _Entry] = {}
        if not raws:
            return found
        # Distances of all entries at once from their 8-byte fingerprint prefix; only the near
        # ones are decoded.
        others = np.frombuffer(b"".join(r[:8] for r in raws), dtype=">u8").astype(np.uint64)
        dist = _popcount(others ^ np.uint64(fp))
        for j in np.flatnonzero(dist <= k).tolist():
            uid, idenc = raws[j][8:].decode().split("|", 1)
            if idenc == exclude or idenc in found:
                continue
            found[idenc] = _Entry(uid, int(others[j]), idenc, periods[j], int(dist[j]))
        return found

    def _read(self, fp: int, k: int, exclude: str | None = None) -> dict[str, _Entry]:
        probes = self.layout.probes(fp, k)
        keys = [(p, self._bucket(p, b, v)) for p in self._live_periods() for b, v in probes]
        return self._read_keys(fp, k, keys, exclude)

    def _read_keys(
        self, fp: int, k: int, keys: Sequence[tuple[int, str]], exclude: str | None
    ) -> dict[str, _Entry]:
        """Entries within ``k`` of ``fp`` in buckets ``(period, key)``: one pipelined round
        trip per node (the horizon comes with it)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self._k_horizon)
        for _, key in keys:
            pipe.lrange(key, 0, -1)
        res = pipe.execute()
        horizon = int(res[0]) if res[0] is not None else -(1 << 62)
        return self._parse(fp, k, zip((p for p, _ in keys), res[1:]), horizon, exclude)

    @staticmethod
    def _sorted(entries: Iterable[_Entry]) -> list[_Entry]:
        return sorted(entries, key=lambda e: (e.distance, _order_key(e.uid)))

    # -- public API --------------------------------------------------------------------------

    def query(self, fingerprint: int, k: int | None = None) -> list[tuple[Id, int]]:
        """Every stored item within ``k`` bits of ``fingerprint`` (inclusive), never one
        farther, as ``(id, distance)``, nearest first. ``k`` defaults to the index's ``k``."""
        fp = _check_fp(fingerprint)
        k = self.k if k is None else _check_k(k)
        return [(_dec_id(e.idenc), e.distance) for e in self._sorted(self._read(fp, k).values())]

    def query_many(
        self, fingerprints: Iterable[int], k: int | None = None
    ) -> list[list[tuple[Id, int]]]:
        """:meth:`query` for each fingerprint."""
        return [self.query(fp, k) for fp in fingerprints]

    def _prepare(
        self,
        id: Id,
        fp: int,
        timestamp: float | None,
        fields: Mapping[str, bytes | str],
        probe_k: int | None,
    ) -> _Pending:
        idenc = _enc_id(id)
        ts = time.time() if timestamp is None else float(timestamp)
        p = self._store_period(ts)
        flat: list[bytes | str] = ["f", f"{fp:016x}", "t", repr(ts), "p", str(p)]
        for name, value in fields.items():
            flat += [name, value]
        probe_keys: list[tuple[int, str]] = []
        if probe_k is not None:
            probes = self.layout.probes(fp, probe_k)
            probe_keys = [
                (q, self._bucket(q, b, v)) for q in self._live_periods() for b, v in probes
            ]
        return _Pending(
            idenc=idenc,
            fp=fp,
            period=p,
            expire_at=self._expire_at(p),
            own=[self._bucket(p, b, v) for b, v in enumerate(self.layout.values(fp))],
            record=self._record(idenc),
            fields=flat,
            probe_k=probe_k,
            probe_keys=probe_keys,
        )

    def _write(
        self,
        id: Id,
        fp: int,
        timestamp: float | None,
        fields: Mapping[str, bytes | str],
        probe_k: int | None,
    ) -> _Written:
        """Store ``id``; with ``probe_k``, also return the stored items within ``probe_k``
        that precede it in ticket order (the ones a check-and-add must consider)."""
        pending = self._prepare(id, fp, timestamp, fields, probe_k)
        if self.cluster:
            return self._write_cluster(pending)
        return self._write_many([pending])[0]

    def _write_many(self, batch: Sequence[_Pending]) -> list[_Written]:
        """One server: :meth:`_write` for each item, pipelined (one round trip for the writes,
        one for the reads when they are not inline). Items are ticketed in order, so each
        sees the earlier ones of the batch among its predecessors."""
        if self.cluster:
            return [self._write_cluster(x) for x in batch]
        # A script per item takes the ticket and appends atomically. Few probe buckets are read
        # inside it (every entry it sees precedes ours); many are read afterwards with plain
        # LRANGEs (cheaper for Redis than a Lua reply of thousands of entries), keeping the
        # entries with a smaller ticket.
        inline = all(len(x.probe_keys) <= _INLINE_READ_KEYS for x in batch)
        pipe = self.client.pipeline(transaction=False)
        calls: list[tuple[int, list[Any], list[Any]]] = []
        for x in batch:
            inline_keys = x.probe_keys if inline else []
            keys = [self._k_seq, self._k_count + str(x.period), x.record, self._k_horizon]
            keys += [key for _, key in inline_keys] + x.own
            args = [len(inline_keys), x.fp.to_bytes(8, "big"), x.expire_at, x.idenc, *x.fields]
            calls.append((len(calls), keys, args))
            pipe.evalsha(self._write_script.sha, len(keys), *keys, *args)
        if self.wait_replicas:
            pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout)
        outs = self._execute(pipe, self._write_script, calls)
        if self.wait_replicas:
            acked = int(outs.pop())
            if acked < self.wait_replicas:
                raise TimeoutError(
                    f"only {acked} of wait_replicas={self.wait_replicas} replicas acknowledged "
                    f"the write within {self.wait_timeout} ms"
                )
        written: list[_Written] = []
        for x, out in zip(batch, outs):
            ticket = int(out[0])
            uid = f"t{ticket}"
            self._drop_old(x.idenc, out[1], uid)
            found: list[_Entry] = []
            if x.probe_k is not None and inline:
                horizon = int(out[2]) if out[2] else -(1 << 62)
                lists = zip((q for q, _ in x.probe_keys), out[3:])
                found = list(self._parse(x.fp, x.probe_k, lists, horizon, x.idenc).values())
            written.append(_Written(ticket, uid, x.period, found))
        if not inline:
            reads = [x for x in batch if x.probe_k is not None]
            if reads:
                pipe = self.client.pipeline(transaction=False)
                pipe.get(self._k_horizon)
                for x in reads:
                    for _, key in x.probe_keys:
                        pipe.lrange(key, 0, -1)
                res = pipe.execute()
                horizon = int(res[0]) if res[0] is not None else -(1 << 62)
                pos = 1
                by_item = iter(w for x, w in zip(batch, written) if x.probe_k is not None)
                for x in reads:
                    w = next(by_item)
                    n = len(x.probe_keys)
                    lists = zip((q for q, _ in x.probe_keys), res[pos : pos + n])
                    pos += n
                    assert x.probe_k is not None
                    found_map = self._parse(x.fp, x.probe_k, lists, horizon, x.idenc)
                    w.predecessors = self._earlier(found_map.values(), w.ticket)
        return written

    def _write_cluster(self, x: _Pending) -> _Written:
        idenc, p, exp, record, flat, own = x.idenc, x.period, x.expire_at, x.record, x.fields, x.own
        fpbytes = x.fp.to_bytes(8, "big")
        # Redis Cluster: append first, then take the ticket, then read (see module docstring).
        uid = f"n{time.time_ns():016x}{secrets.token_hex(4)}"
        entry = fpbytes + f"{uid}|{idenc}".encode()
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(record)
        pipe.delete(record)
        pipe.hset(record, mapping=dict(zip(flat[0::2], flat[1::2]), u=uid))  # type: ignore[arg-type]
        if exp:
            pipe.expireat(record, exp)
        for key in own:
            pipe.rpush(key, entry)
            if exp:
                pipe.expireat(key, exp)
        old = pipe.execute()[0]
        self._drop_old(idenc, _flatten(old), uid)
        tk = self._ticket_script(
            keys=[self._k_seq, self._k_tickets + str(p), self._k_count + str(p), self._k_horizon],
            args=[uid, exp],
        )
        ticket = int(tk[0])
        if x.probe_k is None:
            return _Written(ticket, uid, p, [])
        found = self._read_keys(x.fp, x.probe_k, x.probe_keys, idenc)
        return _Written(ticket, uid, p, self._earlier(found.values(), ticket))

    def _earlier(self, entries: Iterable[_Entry], ticket: int) -> list[_Entry]:
        """The entries whose ticket is smaller than ``ticket`` (cluster: via uid -> ticket)."""
        entries = list(entries)
        pending = [e for e in entries if e.uid[0] == "n"]
        tickets: dict[str, int] = {}
        if pending:
            pipe = self.client.pipeline(transaction=False)
            for e in pending:
                pipe.hget(self._k_tickets + str(e.period), e.uid)
            for e, t in zip(pending, pipe.execute()):
                if t is not None:
                    tickets[e.uid] = int(t)
        out = []
        for e in entries:
            t = int(e.uid[1:]) if e.uid[0] == "t" else tickets.get(e.uid)
            # No ticket yet: it will get a larger one than ours, and will see us.
            if t is not None and t < ticket:
                out.append(e)
        return out

    def _drop_old(self, idenc: str, old: Sequence[bytes], new_uid: str) -> None:
        """Remove the buckets' entries of a replaced record (``old``: flat HGETALL reply)."""
        if not old:
            return
        rec = {_s(a): _s(b) for a, b in zip(old[0::2], old[1::2])}
        if rec.get("u") == new_uid or "f" not in rec:
            return
        self._remove_entries(idenc, int(rec["f"], 16), int(rec["p"]), rec["u"])

    def _remove_entries(self, idenc: str, fp: int, p: int, uid: str) -> None:
        entry = fp.to_bytes(8, "big") + f"{uid}|{idenc}".encode()
        pipe = self.client.pipeline(transaction=False)
        for b, v in enumerate(self.layout.values(fp)):
            pipe.lrem(self._bucket(p, b, v), 0, entry)  # type: ignore[arg-type]
        pipe.decr(self._k_count + str(p))
        pipe.execute()

    def _retract(self, id: Id, fp: int, written: _Written) -> None:
        """Undo a write that lost its check-and-add."""
        self._retract_many([(id, fp, written)])

    def _retract_many(self, items: Sequence[tuple[Id, int, _Written]]) -> None:
        """Undo writes that lost their check-and-add: entries, count and record (the record
        only while it is still theirs: a later add of the same id must survive)."""
        if not items:
            return
        pipe = self.client.pipeline(transaction=False)
        calls: list[tuple[int, list[Any], list[Any]]] = []
        for id, fp, w in items:
            idenc = _enc_id(id)
            if self.cluster:  # scripts run outside cluster pipelines
                self._del_if_script(keys=[self._record(idenc)], args=[w.uid])
            else:
                calls.append((len(pipe), [self._record(idenc)], [w.uid]))
                pipe.evalsha(self._del_if_script.sha, 1, self._record(idenc), w.uid)
            entry = fp.to_bytes(8, "big") + f"{w.uid}|{idenc}".encode()
            for b, v in enumerate(self.layout.values(fp)):
                pipe.lrem(self._bucket(w.period, b, v), 0, entry)  # type: ignore[arg-type]
            pipe.decr(self._k_count + str(w.period))
        self._execute(pipe, self._del_if_script, calls)

    def _execute(
        self, pipe: Any, script: Any, calls: Sequence[tuple[int, list[Any], list[Any]]]
    ) -> list[Any]:
        """Run a pipeline whose commands at ``calls[i][0]`` are EVALSHA of ``script``; any that
        found the script missing (a restarted or flushed server) is run again by the
        ``Script`` object, which loads it. (Scripts are loaded when the index is opened: a
        redis-py pipeline with Script objects would ask SCRIPT EXISTS on every execute.)"""
        results = list(pipe.execute(raise_on_error=False))
        for pos, keys, args in calls:
            if isinstance(results[pos], redis_py.exceptions.NoScriptError):
                results[pos] = script(keys=keys, args=args)
        for r in results:
            if isinstance(r, Exception):
                raise r
        return results

    def add(self, id: Id, fingerprint: int, timestamp: float | None = None) -> None:
        """Store ``fingerprint`` under ``id``; an existing ``id`` is replaced."""
        self._write(id, _check_fp(fingerprint), timestamp, {}, None)

    def add_many(
        self,
        ids: Sequence[Id],
        fingerprints: Iterable[int],
        timestamps: Sequence[float | None] | None = None,
    ) -> None:
        """:meth:`add` for each item, in order (pipelined)."""
        fps, tss = self._batch_args(ids, fingerprints, timestamps)
        self._write_many([self._prepare(i, f, t, {}, None) for i, f, t in zip(ids, fps, tss)])

    @staticmethod
    def _batch_args(
        ids: Sequence[Id],
        fingerprints: Iterable[int],
        timestamps: Sequence[float | None] | None,
    ) -> tuple[list[int], Sequence[float | None]]:
        fps = [_check_fp(f, "fingerprints[]") for f in fingerprints]
        if len(fps) != len(ids):
            raise ValueError(f"ids has {len(ids)} items but fingerprints has {len(fps)}")
        if timestamps is not None and len(timestamps) != len(ids):
            raise ValueError(f"timestamps has {len(timestamps)} items but ids has {len(ids)}")
        for i in ids:
            check_id(i)
        return fps, [None] * len(ids) if timestamps is None else timestamps

    def check_and_add(
        self, id: Id, fingerprint: int, timestamp: float | None = None, k: int | None = None
    ) -> tuple[bool, list[tuple[Id, int]]]:
        """Add ``id`` unless a stored item is within ``k`` bits; ``(added, matches)``.

        Atomic across processes: of near-copies sent at once from any number of clients,
        exactly one is added (the one holding the smallest ticket).
        """
        return self.check_and_add_many([id], [fingerprint], [timestamp], k)[0]

    def check_and_add_many(
        self,
        ids: Sequence[Id],
        fingerprints: Iterable[int],
        timestamps: Sequence[float | None] | None = None,
        k: int | None = None,
    ) -> list[tuple[bool, list[tuple[Id, int]]]]:
        """:meth:`check_and_add` for each item, in order (later items see the earlier ones that
        were added); pipelined: a round trip or two for the whole batch on one server."""
        fps, tss = self._batch_args(ids, fingerprints, timestamps)
        k = self.k if k is None else _check_k(k)
        batch = [self._prepare(i, f, t, {}, k) for i, f, t in zip(ids, fps, tss)]
        written = self._write_many(batch)
        out: list[tuple[bool, list[tuple[Id, int]]]] = []
        losers: list[tuple[Id, int, _Written]] = []
        rejected: set[str] = set()
        for i, x, w in zip(ids, batch, written):
            preds = [e for e in w.predecessors if e.idenc not in rejected]
            if preds:
                rejected.add(x.idenc)
                losers.append((i, x.fp, w))
                out.append((False, [(_dec_id(e.idenc), e.distance) for e in self._sorted(preds)]))
            else:
                out.append((True, []))
        self._retract_many(losers)
        return out

    def get(self, id: Id) -> tuple[int, float]:
        """``(fingerprint, timestamp)`` of ``id``; ``KeyError`` if unknown."""
        rec = self._get_record(id, ("f", "t"))
        return int(rec[0], 16), float(rec[1])

    def _get_record(self, id: Id, names: Sequence[str]) -> list[str]:
        idenc = _enc_id(id)
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self._record(idenc), ["p", *names])
        pipe.get(self._k_horizon)
        rec, horizon = pipe.execute()
        if rec[0] is None or any(v is None for v in rec):
            raise KeyError(f"id {id!r} is not in the index")
        p = int(rec[0])
        if (horizon is not None and p < int(horizon)) or p < self._live_periods().start:
            raise KeyError(f"id {id!r} is not in the index (expired)")
        return [_s(v) for v in rec[1:]]

    def remove(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown."""
        idenc = _enc_id(id)
        record = self._record(idenc)
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(record, ["f", "p", "u"])
        pipe.delete(record)
        (f, p, u), deleted = pipe.execute()
        if not deleted or f is None:
            raise KeyError(f"id {id!r} is not in the index")
        self._remove_entries(idenc, int(f, 16), int(p), _s(u))

    def __contains__(self, id: object) -> bool:
        try:
            self._get_record(id, ())  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):
            return False
        return True

    def __len__(self) -> int:
        pipe = self.client.pipeline(transaction=False)
        periods = self._live_periods()
        pipe.get(self._k_horizon)
        for p in periods:
            pipe.get(self._k_count + str(p))
        res = pipe.execute()
        horizon = int(res[0]) if res[0] is not None else -(1 << 62)
        return sum(int(n or 0) for p, n in zip(periods, res[1:]) if p >= horizon)

    def expire(self, before: float) -> int:
        """Forget every item whose time period ends at or before ``before``; return how many.

        Expiry works on whole periods (``period`` seconds; with no retention, one period holds
        everything and nothing expires before it ends): items of a period that ends after
        ``before`` stay. Queries stop seeing expired periods at once; with a retention, Redis
        frees their keys at their ``EXPIREAT``.
        """
        if isinstance(before, bool) or not isinstance(before, (int, float)):
            raise TypeError(f"before must be float seconds, got {type(before).__name__}")
        horizon = self._period_of(float(before))
        if self.retention is None and self.period == _NO_RETENTION_PERIOD:
            horizon = min(horizon, 0)
        first = self._live_periods().start
        n = self._expire_script(keys=[self._k_horizon], args=[horizon, self._k_count, first])
        return int(n)

    def stats(self) -> dict[str, Any]:
        """Settings and the number of live items (JSON-serialisable)."""
        return {
            "items": len(self),
            "namespace": self.namespace,
            "cluster": self.cluster,
            "k": self.k,
            "blocks": self.layout.blocks,
            "retention": self.retention,
            "period": self.period,
        }

    def close(self) -> None:
        """Close the connections."""
        self.client.close()

    def clear(self) -> None:
        """Delete every key of this namespace (uses SCAN: for tests and admin, not hot paths)."""
        for pattern in (f"{self.namespace}:*", "{" + self.namespace + "}:*"):
            if self.cluster:
                keys = list(self.client.scan_iter(match=pattern, count=1000, target_nodes="all"))  # type: ignore[call-arg]
            else:
                keys = list(self.client.scan_iter(match=pattern, count=1000))
            for key in keys:
                self.client.delete(key)

    def __enter__(self) -> RedisIndex:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        kind = "RedisCluster" if self.cluster else "Redis"
        return f"RedisIndex({kind}, namespace={self.namespace!r}, k={self.k})"


def _flatten(d: Mapping[bytes, bytes] | Sequence[bytes]) -> list[bytes]:
    if isinstance(d, Mapping):
        return [x for kv in d.items() for x in kv]
    return list(d)


# -- connecting ------------------------------------------------------------------------------

_OUR_OPTIONS = {
    "namespace": str,
    "blocks": int,
    "retention": float,
    "period": float,
    "wait_replicas": int,
    "wait_timeout": int,
}


def connect(url: str, **client_kwargs: Any) -> tuple[Client, dict[str, Any]]:
    """A redis-py client for ``url`` and the neardup options found in its query string.

    - ``redis://[user:password@]host:port[/db]``: one Redis server;
    - ``rediss://...``: the same over TLS (``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``,
      ``ssl_cert_reqs`` query parameters pass through to redis-py);
    - ``redis+cluster://[user:password@]host:port`` (``rediss+cluster://`` for TLS): a Redis
      Cluster reached through any of its nodes;
    - ``unix:///path/to/socket?db=0``.

    Query parameters ``namespace``, ``blocks``, ``retention``, ``period``, ``wait_replicas``,
    ``wait_timeout`` are neardup's; the others are passed to redis-py (e.g. ``socket_timeout``,
    ``health_check_interval``).
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be str, got {type(url).__name__}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    known = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")
    if scheme not in known:
        raise ValueError(f"url scheme must be one of {', '.join(known)}; got {url!r}")
    options: dict[str, Any] = {}
    passthrough: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        conv = _OUR_OPTIONS.get(name)
        if conv is None:
            passthrough.append((name, value))
            continue
        try:
            options[name] = conv(value)
        except ValueError:
            raise ValueError(
                f"url option {name}={value!r} is not a valid {conv.__name__}"
            ) from None
    cluster = scheme.endswith("+cluster")
    base = scheme.split("+", 1)[0]
    clean = urlunsplit((base, parts.netloc, parts.path, urlencode(passthrough), parts.fragment))
    client_kwargs.setdefault("decode_responses", False)
    if cluster:
        return RedisCluster.from_url(clean, **client_kwargs), options
    return redis_py.Redis.from_url(clean, **client_kwargs), options


# -- the deduplicator ------------------------------------------------------------------------


def _policy_from(
    policy: Policy | Mapping[str, Any] | str | None, k: int | None, preset: str | None
) -> Policy:
    if policy is None or policy == "default":
        pol = Policy.default()
    elif isinstance(policy, Policy):
        pol = policy
    elif isinstance(policy, Mapping):
        pol = Policy.from_dict(policy)
    elif isinstance(policy, str):
        raise ValueError(f"unknown policy name {policy!r}; valid: 'default' (or a Policy)")
    else:
        raise TypeError(f"policy must be a Policy, dict or name, got {type(policy).__name__}")
    if k is not None:
        pol = pol.replace(k_short=_check_k(k), k_long=k)
    if preset is not None:
        pol = pol.replace(fingerprint={**pol.fingerprint, "preset": preset})
    return pol


class RedisDeduplicator:
    """:class:`neardup.Deduplicator` semantics over Redis: the texts and the index live in Redis,
    shared by every process that opens the same URL and namespace.

    ``check(text)`` returns the stored near-duplicates of ``text`` (candidates within the
    policy's radius whose verifier score is >= the threshold), best first. ``check_and_add`` is
    atomic across processes and machines: of near-copies sent at once, exactly one is added.
    The policy is stored in Redis with the index settings; opening with another one raises
    :class:`neardup.IncompatibleIndexError`.
    """

    def __init__(
        self,
        client: Client,
        *,
        policy: Policy | Mapping[str, Any] | str | None = None,
        namespace: str = "neardup",
        retention: float | None = None,
        period: float | None = None,
        blocks: int | None = None,
        fingerprinter: Fingerprinter | None = None,
        url: str | None = None,
        wait_replicas: int = 0,
        wait_timeout: int = 1000,
    ) -> None:
        self.policy = _policy_from(policy, None, None)
        self.fingerprinter = (
            fingerprinter if fingerprinter is not None else self.policy.make_fingerprinter()
        )
        self.index = RedisIndex(
            client,
            self.policy.k_max,
            namespace=namespace,
            blocks=blocks,
            retention=retention,
            period=period,
            meta={"policy": self.policy.to_dict()},
            wait_replicas=wait_replicas,
            wait_timeout=wait_timeout,
        )
        self.url = _redact(url) if url else None
        self._counters = {"checks": 0, "adds": 0, "added": 0, "candidates": 0, "matches": 0}
        self._closed = False

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        policy: Policy | Mapping[str, Any] | str | None = None,
        k: int | None = None,
        preset: str | None = None,
        retention: float | None = None,
        namespace: str | None = None,
        period: float | None = None,
        blocks: int | None = None,
        **client_kwargs: Any,
    ) -> RedisDeduplicator:
        """Open the deduplicator at ``url`` (``redis://``, ``rediss://``, ``redis+cluster://``,
        ``unix://``; see :func:`connect`). ``k`` and ``preset`` override the policy's radius and
        fingerprint preset; URL query options ``namespace``, ``retention``, ``period``,
        ``blocks`` apply when the keyword is not given; ``wait_replicas``, ``wait_timeout``
        come from the URL only (see :class:`RedisIndex`)."""
        client, options = connect(url, **client_kwargs)
        return cls(
            client,
            policy=_policy_from(policy, k, preset),
            namespace=namespace if namespace is not None else options.get("namespace", "neardup"),
            retention=retention if retention is not None else options.get("retention"),
            period=period if period is not None else options.get("period"),
            blocks=blocks if blocks is not None else options.get("blocks"),
            url=url,
            wait_replicas=options.get("wait_replicas", 0),
            wait_timeout=options.get("wait_timeout", 1000),
        )

    # -- verification ------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise ValueError("deduplicator is closed")

    def _texts(self, entries: Iterable[_Entry]) -> dict[str, str | None]:
        """Stored texts of ``entries`` by encoded id, in one pipelined round trip."""
        idencs = list(dict.fromkeys(e.idenc for e in entries))
        if not idencs:
            return {}
        pipe = self.index.client.pipeline(transaction=False)
        for idenc in idencs:
            pipe.hget(self.index._record(idenc), "x")
        return {i: (None if raw is None else _s(raw)) for i, raw in zip(idencs, pipe.execute())}

    def _verify(
        self,
        norm: str,
        entries: Sequence[_Entry],
        texts: Mapping[str, str | None] | None = None,
    ) -> list[Match]:
        """Matches among ``entries`` whose stored text passes the policy's verifier."""
        if not entries:
            return []
        if texts is None:
            texts = self._texts(entries)
        kind, threshold = self.policy.verifier, self.policy.threshold
        qs = sketch(norm, self.policy.shingle).hashes if kind == "jaccard" else None
        out: list[Match] = []
        for e in entries:
            other = texts.get(e.idenc)
            if other is None:  # removed, expired or retracted meanwhile
                continue
            sim: float | None
            if kind == "none":
                sim = None
            elif kind == "jaccard":
                assert qs is not None
                sim = jaccard_sketch(qs, sketch(self._prepare(other), self.policy.shingle).hashes)
            elif kind == "levenshtein":
                sim = levenshtein(norm, self._prepare(other))
            else:
                sim = cosine(norm, self._prepare(other))
            if sim is None or sim >= threshold:
                out.append(Match(_dec_id(e.idenc), e.distance, sim))
        out.sort(key=lambda m: (-(m.similarity if m.similarity is not None else 1.0), m.distance))
        return out

    def _prepare(self, text: str) -> str:
        # What both stages see (HTML main text, normalised), exactly as Deduplicator does.
        prepare = getattr(self.policy, "prepare", None)
        return str(prepare(text)) if prepare is not None else normalise(text)

    def _radius(self, norm: str, k: int | None) -> int:
        return self.policy.radius(len(norm)) if k is None else _check_k(k)

    # -- DedupBackend ------------------------------------------------------------------------

    def check(self, text: str, k: int | None = None) -> list[Match]:
        """Stored near-duplicates of ``text``, best first (highest similarity, then distance)."""
        self._ensure_open()
        norm = self._prepare(_check_text(text))
        fp = int(self.fingerprinter.fingerprint(norm))
        radius = self._radius(norm, k)
        entries = self.index._sorted(self.index._read(fp, radius).values())
        matches = self._verify(norm, entries)
        self._counters["checks"] += 1
        self._counters["candidates"] += len(entries)
        self._counters["matches"] += len(matches)
        return matches

    def add(self, id: Id, text: str, timestamp: float | None = None) -> int:
        """Store ``text`` under ``id`` (replacing any text of that id); return its fingerprint."""
        return self.add_many([id], [text], [timestamp])[0]

    def check_and_add(
        self, id: Id, text: str, timestamp: float | None = None
    ) -> tuple[bool, list[Match]]:
        """Add ``text`` unless it has stored near-duplicates, atomically across processes.

        Returns ``(added, matches)``. Of near-copies sent concurrently from any number of
        processes and machines exactly one is added: each write takes a ticket, and a text is
        a duplicate when a near, verified text with a smaller ticket is stored.
        """
        return self.check_and_add_many([id], [text], [timestamp])[0]

    def check_many(self, texts: Sequence[str], k: int | None = None) -> list[list[Match]]:
        """:meth:`check` for each text."""
        _check_texts(texts)
        return [self.check(t, k) for t in texts]

    def _prepare_batch(
        self, ids: Sequence[Id], texts: Sequence[str], timestamps: Sequence[float | None] | None
    ) -> tuple[Sequence[float | None], list[str], list[int]]:
        self._ensure_open()
        tss = _batch(ids, texts, timestamps)
        for i in ids:
            check_id(i)
        norms = [self._prepare(_check_text(t, "texts[]")) for t in texts]
        fps = self.fingerprinter.fingerprint_many(norms).tolist() if norms else []
        return tss, norms, [int(f) for f in fps]

    def add_many(
        self,
        ids: Sequence[Id],
        texts: Sequence[str],
        timestamps: Sequence[float | None] | None = None,
    ) -> list[int]:
        """:meth:`add` for each text, in order (pipelined); returns the fingerprints."""
        tss, _, fps = self._prepare_batch(ids, texts, timestamps)
        self.index._write_many(
            [
                self.index._prepare(i, f, ts, {"x": t.encode()}, None)
                for i, t, f, ts in zip(ids, texts, fps, tss)
            ]
        )
        self._counters["adds"] += len(fps)
        self._counters["added"] += len(fps)
        return fps

    def check_and_add_many(
        self,
        ids: Sequence[Id],
        texts: Sequence[str],
        timestamps: Sequence[float | None] | None = None,
    ) -> list[tuple[bool, list[Match]]]:
        """:meth:`check_and_add` for each text, in order: a text is checked against the stored
        ones and the earlier texts of the batch that were added. Pipelined: on one server a
        batch costs two or three round trips, not two or three per text."""
        tss, norms, fps = self._prepare_batch(ids, texts, timestamps)
        batch = [
            self.index._prepare(i, f, ts, {"x": t.encode()}, self._radius(n, None))
            for i, t, n, f, ts in zip(ids, texts, norms, fps, tss)
        ]
        written = self.index._write_many(batch)
        stored = self._texts(e for w in written for e in w.predecessors)
        out: list[tuple[bool, list[Match]]] = []
        losers: list[tuple[Id, int, _Written]] = []
        rejected: set[str] = set()
        for i, n, x, w in zip(ids, norms, batch, written):
            preds = [e for e in self.index._sorted(w.predecessors) if e.idenc not in rejected]
            self._counters["checks"] += 1
            self._counters["candidates"] += len(preds)
            matches = self._verify(n, preds, stored)
            if matches:
                rejected.add(x.idenc)
                losers.append((i, x.fp, w))
                self._counters["matches"] += len(matches)
                out.append((False, matches))
            else:
                self._counters["adds"] += 1
                self._counters["added"] += 1
                out.append((True, []))
        self.index._retract_many(losers)
        return out

    def remove(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown."""
        self._ensure_open()
        self.index.remove(id)

    def get(self, id: Id) -> str:
        """The stored text of ``id``; ``KeyError`` if unknown."""
        self._ensure_open()
        return self.index._get_record(id, ("x",))[0]

    def expire(self, before: float) -> int:
        """Forget the texts of every time period that ends at or before ``before``; return how
        many (see :meth:`RedisIndex.expire`: expiry works on whole periods)."""
        self._ensure_open()
        return self.index.expire(before)

    def stats(self) -> dict[str, Any]:
        """Counters of this process, the number of stored texts, the settings and the policy."""
        self._ensure_open()
        s = self.index.stats()
        return {
            "documents": s.pop("items"),
            **self._counters,
            "store": self.url,
            **s,
            "policy": self.policy.to_dict(),
        }

    def close(self) -> None:
        """Close the connections (idempotent)."""
        if not self._closed:
            self._closed = True
            self.index.close()

    def __enter__(self) -> RedisDeduplicator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __contains__(self, id: object) -> bool:
        return id in self.index

    def __len__(self) -> int:
        return len(self.index)

    def __repr__(self) -> str:
        return f"RedisDeduplicator({self.url or self.index!r}, policy={self.policy!r})"


def _check_text(text: object, name: str = "text") -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be str, got {type(text).__name__}")
    return text


def _check_texts(texts: object) -> None:
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of str, not a single str")


def _batch(
    ids: Sequence[Id], texts: Sequence[str], timestamps: Sequence[float | None] | None
) -> Sequence[float | None]:
    _check_texts(texts)
    if len(ids) != len(texts):
        raise ValueError(f"ids has {len(ids)} items but texts has {len(texts)}")
    if timestamps is None:
        return [None] * len(texts)
    if len(timestamps) != len(texts):
        raise ValueError(f"timestamps has {len(timestamps)} items but texts has {len(texts)}")
    return timestamps


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    user = parts.username or ""
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, ""))
