"""RedisIndex: the exact Hamming index over Redis (one server) or Redis Cluster.

``query(fp, k)`` returns every stored item whose Hamming distance to ``fp`` is **<= k**
(inclusive), never one farther, nearest first. The one-server write path is one Lua script per
item (:mod:`neardup.backends.redis_lua`); the cluster protocol is in
:mod:`neardup.backends.redis_cluster`. The key layout and the proofs are in docs/scale-out.md.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import numpy as np

from neardup._core import IncompatibleIndexError
from neardup.backends.layout import BlockLayout, default_blocks
from neardup.backends.redis_cluster import earlier, write_cluster
from neardup.backends.redis_connect import _OUR_OPTIONS, Client, RedisCluster, connect, redis_py
from neardup.backends.redis_format import (
    _NO_RETENTION_PERIOD,
    FORMAT_VERSION,
    _check_fp,
    _check_k,
    _dec_id,
    _enc_id,
    _Entry,
    _order_key,
    _Pending,
    _popcount,
    _s,
    _Written,
)
from neardup.backends.redis_lua import (
    _CHECK_ADD_LUA,
    _DEL_IF_LUA,
    _EXPIRE_LUA,
    _TICKET_LUA,
    _WRITE_LUA,
)
from neardup.textstore import Id, check_id

__all__ = ["RedisIndex"]

# Up to this many probe buckets are read inside the write script (see RedisIndex._write_many);
# more (very wide radii) are read afterwards with pipelined LRANGEs.
_INLINE_READ_KEYS = 1024


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
        self._check_add_script = client.register_script(_CHECK_ADD_LUA)
        self._bucket_prefix = f"{namespace}:b:"
        self._blocks = [(s, (1 << w) - 1) for s, w in zip(self.layout.shifts, self.layout.widths)]
        self._local = threading.local()  # this thread's own connection (see _call)
        if not self.cluster:
            for script in (self._write_script, self._del_if_script, self._check_add_script):
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
            return write_cluster(self, pending)
        return self._write_many([pending])[0]

    def _write_many(self, batch: Sequence[_Pending]) -> list[_Written]:
        """One server: :meth:`_write` for each item, pipelined (one round trip for the writes,
        one for the reads when they are not inline). Items are ticketed in order, so each
        sees the earlier ones of the batch among its predecessors."""
        if self.cluster:
            return [write_cluster(self, x) for x in batch]
        # A script per item takes the ticket and appends atomically. Few probe buckets are read
        # inside it (every entry it sees precedes ours); many are read afterwards with plain
        # LRANGEs (cheaper for Redis than a Lua reply of thousands of entries), keeping the
        # entries with a smaller ticket.
        inline = all(len(x.probe_keys) <= _INLINE_READ_KEYS for x in batch)
        calls: list[tuple[list[Any], list[Any]]] = []
        for x in batch:
            inline_keys = x.probe_keys if inline else []
            keys = [self._k_seq, self._k_count + str(x.period), x.record, self._k_horizon]
            keys += [key for _, key in inline_keys] + x.own
            args = [len(inline_keys), x.fp.to_bytes(8, "big"), x.expire_at, x.idenc, *x.fields]
            calls.append((keys, args))
        outs = self._run_scripts(self._write_script, calls)
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
                    w.predecessors = earlier(self, found_map.values(), w.ticket)
        return written

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

    def _connection(self) -> Any:
        """This thread's own connection, taken from the client's pool once (one server)."""
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            conn = self.client.connection_pool.get_connection()  # type: ignore[union-attr]
            local.conn, local.pid = conn, os.getpid()
        return conn

    def _call(self, script: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """One server: run ``script`` on this thread's connection. The hot path: redis-py's
        ``execute_command`` (pool checkout, retries, hooks) costs as much client time as the
        round trip itself. A lost connection is reopened and the call sent again once (the
        scripts are safe to repeat: a repeated check-and-add replaces its own first write)."""
        for attempt in (0, 1):
            conn = self._connection()
            try:
                conn.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
                return conn.read_response()
            except redis_py.exceptions.NoScriptError:
                self.client.script_load(script.script)
            except (redis_py.exceptions.ConnectionError, redis_py.exceptions.TimeoutError):
                conn.disconnect()
                if attempt:
                    raise
        conn = self._connection()
        conn.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
        return conn.read_response()

    def _run_scripts(self, script: Any, calls: Sequence[tuple[list[Any], list[Any]]]) -> list[Any]:
        """One server: ``script`` for each ``(keys, args)``, in order, in one round trip (then
        ``WAIT`` for ``wait_replicas``). A single call goes straight to the client: a redis-py
        pipeline costs more client time than the round trip it would save."""
        if len(calls) == 1 and not self.wait_replicas:
            return [self._call(script, *calls[0])]
        pipe = self.client.pipeline(transaction=False)
        for keys, args in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        if self.wait_replicas:
            pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout)
        outs = self._execute(pipe, script, [(j, k, a) for j, (k, a) in enumerate(calls)])
        if self.wait_replicas:
            acked = int(outs.pop())
            if acked < self.wait_replicas:
                raise TimeoutError(
                    f"only {acked} of wait_replicas={self.wait_replicas} replicas acknowledged "
                    f"the write within {self.wait_timeout} ms"
                )
        return outs

    def _decides_in_script(self, k: int) -> bool:
        """Whether a check-and-add at ``k`` runs whole inside :data:`_CHECK_ADD_LUA`: one server
        and probe radius 0 (the buckets read are exact blocks of 13+ bits: few entries)."""
        return not self.cluster and max(self.layout.radii(k)) <= 0

    def _check_add_in_script(
        self, items: Sequence[tuple[str, int, float | None]], k: int
    ) -> list[list[_Entry] | None]:
        """One server, radius 0: the check-and-add of each ``(idenc, fp, timestamp)`` in one
        script (one round trip for the batch). ``None`` for an item added, else the stored
        entries within ``k``. Keys are built here directly (the hot path of the index)."""
        pre = self._bucket_prefix
        periods = self._live_periods()
        probed = [b for b, r in enumerate(self.layout.radii(k)) if r == 0]
        calls: list[tuple[list[Any], list[Any]]] = []
        for idenc, fp, timestamp in items:
            ts = time.time() if timestamp is None else float(timestamp)
            p = self._store_period(ts)
            values = [(fp >> sh) & m for sh, m in self._blocks]
            probes = [f"{pre}{q}:{b}:{values[b]:x}" for q in periods for b in probed]
            keys = [self._k_seq, self._k_count + str(p), self._record(idenc), self._k_horizon]
            keys += probes
            keys += [f"{pre}{p}:{b}:{v:x}" for b, v in enumerate(values)]
            args: list[Any] = [len(probes), k, fp.to_bytes(8, "big"), self._expire_at(p), idenc]
            args += [q for q in periods for _ in probed]
            args += ["f", f"{fp:016x}", "t", repr(ts), "p", str(p)]
            calls.append((keys, args))
        results: list[list[_Entry] | None] = []
        for (idenc, _, _), out in zip(items, self._run_scripts(self._check_add_script, calls)):
            ticket = int(out[0])
            if ticket:
                if out[1]:
                    self._drop_old(idenc, out[1], f"t{ticket}")
                results.append(None)
                continue
            found: dict[str, _Entry] = {}
            for raw, d in zip(out[1::2], out[2::2]):
                uid, other = raw[8:].decode().split("|", 1)
                if other not in found:
                    found[other] = _Entry(uid, int.from_bytes(raw[:8], "big"), other, 0, int(d))
            results.append(list(found.values()))
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
        exactly one is added (on one server at probe radius 0, the first whose script runs;
        else the one holding the smallest ticket).
        """
        k = self.k if k is None else _check_k(k)
        if self._decides_in_script(k):
            fp = _check_fp(fingerprint)
            found = self._check_add_in_script([(_enc_id(id), fp, timestamp)], k)[0]
            if found is None:
                return True, []
            return False, [(_dec_id(e.idenc), e.distance) for e in self._sorted(found)]
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
        out: list[tuple[bool, list[tuple[Id, int]]]] = []
        if self._decides_in_script(k):
            items = [(_enc_id(i), f, t) for i, f, t in zip(ids, fps, tss)]
            for found in self._check_add_in_script(items, k):
                if found is None:
                    out.append((True, []))
                else:
                    matches = [(_dec_id(e.idenc), e.distance) for e in self._sorted(found)]
                    out.append((False, matches))
            return out
        batch = [self._prepare(i, f, t, {}, k) for i, f, t in zip(ids, fps, tss)]
        written = self._write_many(batch)
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
