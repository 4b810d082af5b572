"""RedisIndex: the exact Hamming index over Redis (one server) or Redis Cluster.

``query(fp, k)`` returns every stored item whose Hamming distance to ``fp`` is **<= k**
(inclusive), never one farther, nearest first. The one-server write path is one Lua script per
item (:mod:`neardup.backends.redis_lua`); the cluster protocol is in
:mod:`neardup.backends.redis_cluster`; the format in :mod:`neardup.backends.redis_format`;
settling and removing versions in :mod:`neardup.backends.redis_versions`; reading the data of
near records (and the recent ring) in :mod:`neardup.backends.redis_read`.
The key layout and the proofs are in docs/scale-out.md.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from neardup._closing import Closing
from neardup._core import IncompatibleIndexError, _bucket_keys, _probe_keys, _TextEngine
from neardup.backends.layout import BlockLayout, default_blocks
from neardup.backends.redis_cache import DEFAULT_CACHE_SIZE, VersionCache
from neardup.backends.redis_cluster import head_ref, write_cluster
from neardup.backends.redis_connect import _OUR_OPTIONS, Client, RedisCluster, connect
from neardup.backends.redis_format import (
    _NO_RETENTION_PERIOD,
    FORMAT_VERSION,
    Probes,
    _check_fp,
    _check_k,
    _dec_id,
    _enc_id,
    _Entry,
    _order_key,
    _Pending,
    _s,
    _Written,
    new_ref,
)
from neardup.backends.redis_link import DEFAULT_SPIN_US, ServerLink
from neardup.backends.redis_lua import (
    _CHAIN_LUA,
    _CHECK_ADD_LUA,
    _CLAIM_LUA,
    _EXPIRE_LUA,
    _RECENT_LUA,
    _REMOVE_RECORD_LUA,
    _RETRACT_LUA,
    _TAKE_REPLACED_LUA,
    _TICKET_LUA,
    _WRITE_LUA,
)
from neardup.backends.redis_read import read_with, resolve
from neardup.backends.redis_single import check_add_in_script, write_many
from neardup.backends.redis_versions import (
    _Gone,
    abandon,
    drop_version,
    forget,
    remove_versions,
    settle,
    settle_or_note,
)
from neardup.textstore import Id, check_id

__all__ = ["DEFAULT_CACHE_SIZE", "RedisIndex"]

# Seconds a written version's keys live at least (see RedisIndex._expire_at).
_MIN_TTL = 60


class RedisIndex(Closing):
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

    ``spin_us`` (one server): how long, in microseconds, a single-threaded process polls its
    connection for a reply, yielding its CPU to any other runnable task between looks, before
    it sleeps (0: sleep at once). Waking a halted virtual CPU costs more than a loopback round
    trip's work; it is skipped when replies usually take over twice as long (a remote server),
    under TLS, and while the process runs other threads.

    ``cache_size`` (one server): how many stored versions' data (id, ticket, and the Jaccard
    sketch a deduplicator verifies with) this process keeps after writing or reading them, so
    that a check whose near records are all known needs no round trip for their data (0: off).
    Safe because a version's data never change and, on one server, a record is in a bucket
    exactly while its data exist (docs/scale-out.md).
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
        cache_size: int = DEFAULT_CACHE_SIZE,
        spin_us: int = DEFAULT_SPIN_US,
    ) -> None:
        self.k = _check_k(k)
        for name, value in (
            ("wait_replicas", wait_replicas),
            ("wait_timeout", wait_timeout),
            ("spin_us", spin_us),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        if spin_us > 1_000_000:
            raise ValueError(f"spin_us must be at most 1000000 (1 s), got {spin_us!r}")
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
        self._k_recent = f"{tag}:recent"
        self._bucket_prefix = f"{namespace}:b:"
        self._data_prefix = f"{namespace}:d:"
        self._idkey_prefix = f"{namespace}:r:"
        self._blocks = [(s, (1 << w) - 1) for s, w in zip(self.layout.shifts, self.layout.widths)]
        self._period_prefixes: dict[range, list[str]] = {}
        self._probe_counts: dict[int, int] = {}
        # The data of versions this process wrote or read (one server; see redis_cache).
        # (Checked everywhere, kept on one server only: see VersionCache.)
        self._cache = VersionCache(cache_size)
        if self.cluster:
            self._cache = VersionCache(0)
        # One server: whether this process reads the recent ring with its calls (set by a
        # RedisDeduplicator that guesses copies), and the last ticket it read there.
        self._watching = False
        self._seen = 0
        # One server: the core's state for one-text check-and-adds (set by a
        # RedisDeduplicator; its own cache and ring, cleared with the namespace).
        self._engine: _TextEngine | None = None
        self._link = ServerLink(client, wait_replicas, wait_timeout, spin_us)  # one server's
        # One server decides a check-and-add inside one script at probe radius 0: k < blocks.
        self._in_script_below = 0 if self.cluster else self.layout.blocks
        reg = client.register_script
        self._write_script = reg(_WRITE_LUA)
        self._check_add_script = reg(_CHECK_ADD_LUA)
        self._claim_script = reg(_CLAIM_LUA)
        self._ticket_script = reg(_TICKET_LUA)
        self._remove_record_script = reg(_REMOVE_RECORD_LUA)
        self._retract_script = reg(_RETRACT_LUA)
        self._take_replaced_script = reg(_TAKE_REPLACED_LUA)
        self._chain_script = reg(_CHAIN_LUA)
        self._expire_script = reg(_EXPIRE_LUA)
        self._recent_script = reg(_RECENT_LUA)
        if not self.cluster:  # (a cluster client loads a script on the node that needs it)
            for script in (
                self._recent_script,
                self._write_script,
                self._check_add_script,
                self._retract_script,
                self._take_replaced_script,
            ):
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
            # (a cluster keeps each id's chain of versions in its id key: versions before that
            # kept the bare ref there and must not share the namespace)
            **({"id_keys": "chain"} if self.cluster else {}),
            **meta,
        }

    def _check_config(self, meta: dict[str, Any]) -> None:
        want = self._settings(meta)
        raw = json.dumps(want, sort_keys=True)
        self.client.set(self._k_config, raw, nx=True)
        stored_raw = self.client.get(self._k_config)
        stored = json.loads(_s(stored_raw)) if stored_raw is not None else want
        if stored.get("format") != FORMAT_VERSION:
            raise IncompatibleIndexError(
                f"Redis namespace {self.namespace!r} holds neardup Redis format "
                f"{stored.get('format')!r}; this version reads format {FORMAT_VERSION} only "
                "(buckets of 16-byte records since neardup 0.1): index into a new namespace, "
                "or delete the old one's keys"
            )
        if self.cluster and "id_keys" not in stored and {**stored, "id_keys": "chain"} == want:
            # Written before the chains: its bare-ref id keys read as chains of one version.
            self.client.set(self._k_config, raw)
            stored = want
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
        """When the keys of period ``p`` expire (0: never); at least ``_MIN_TTL`` seconds (or
        the retention, if shorter) from now, so that a check-and-add of an item older than the
        retention keeps its keys until it is decided (an expiry in the past would delete the
        id key at once, and with it the id's stored version). Such an item is in a period no
        query reads any more."""
        if self.retention is None:
            return 0
        at = int(math.ceil((p + 1) * self.period + self.retention))
        grace = math.ceil(min(_MIN_TTL, self.retention))
        return max(at, int(math.ceil(time.time())) + grace)

    def _live_periods(self, now: float | None = None) -> range:
        if self.retention is None:
            return range(1)  # everything lives in period 0
        now = time.time() if now is None else now
        hi = self._period_of(now)
        # A period is live until its keys expire: (p + 1) * period + retention > now.
        lo = int(math.floor((now - self.retention) / self.period))
        return range(lo, hi + 1)

    def _bucket(self, p: int, block: int, value: int) -> str:
        return f"{self._bucket_prefix}{p}:{block}:{value:x}"

    def _idkey(self, idenc: str) -> str:
        return self._idkey_prefix + idenc

    def _datakey(self, ref: int) -> str:
        return f"{self._data_prefix}{ref:016x}"

    def _store_period(self, ts: float) -> int:
        if self.retention is None:
            return 0
        p = self._period_of(ts)
        hi = self._period_of(time.time())
        return min(p, hi)  # a future timestamp is stored now and expires with its own time

    # -- reading buckets ---------------------------------------------------------------------

    def _own_keys(self, p: int, fp: int) -> list[str]:
        """The buckets of ``fp`` in period ``p``, one per block (named in the core)."""
        return _bucket_keys(f"{self._bucket_prefix}{p}:", fp, self.layout.blocks)

    def _probe_keys(self, fp: int, k: int) -> Probes:
        """Every bucket a query at ``k`` reads, in every live period (the layout's probes; the
        keys are built in the core when asked for)."""
        periods = self._live_periods()
        prefixes = self._period_prefixes.get(periods)
        if prefixes is None:
            if len(self._period_prefixes) > 64:
                self._period_prefixes.clear()
            prefixes = [f"{self._bucket_prefix}{q}:" for q in periods]
            self._period_prefixes[periods] = prefixes
        each = self._probe_counts.get(k)
        if each is None:
            each = self._probe_counts[k] = len(_probe_keys([""], 0, self.layout.blocks, k))
        return Probes(prefixes, [(q, each) for q in periods], fp, self.layout.blocks, k)

    def _read(
        self,
        fp: int,
        k: int,
        payload: str | None = None,
        prefetch: Mapping[int, int] | None = None,
    ) -> list[_Entry]:
        """Items within ``k`` of ``fp`` in its probe buckets: one round trip per node for the
        buckets (and the horizon), one for the data of the near records. One server: the data
        of the versions ``prefetch`` ``{ref: fp}`` (likely near) are read with the buckets, and
        so is the recent ring when watched (:func:`~neardup.backends.redis_read.read_with`)."""
        probes = self._probe_keys(fp, k)
        res: list[Any]
        if self.cluster:
            pipe = self.client.pipeline(transaction=False)
            pipe.get(self._k_horizon)
            for key in probes.keys:
                pipe.get(key)
            res = pipe.execute()
        elif prefetch or self._watching:
            res = read_with(self, probes, payload, prefetch or {})
        else:
            res = self._link.send_all([probes.mget(self._k_horizon)])[0]
        return self._resolve(probes.near(res[1:], res[0]), payload)

    def _resolve(
        self, near: Mapping[int, tuple[int, int]], payload: str | None = None
    ) -> list[_Entry]:
        """The data of the near records: :func:`~neardup.backends.redis_read.resolve`."""
        return resolve(self, near, payload)

    @staticmethod
    def _sorted(entries: Iterable[_Entry]) -> list[_Entry]:
        return sorted(entries, key=_order_key)

    @staticmethod
    def _matches(entries: Iterable[_Entry]) -> list[tuple[Id, int]]:
        """``(id, distance)`` of ``entries``, nearest first (then by ticket, then by ref)."""
        return [(_dec_id(e.idenc), e.distance) for e in sorted(entries, key=_order_key)]

    # -- public API --------------------------------------------------------------------------

    def query(self, fingerprint: int, k: int | None = None) -> list[tuple[Id, int]]:
        """Every stored item within ``k`` bits of ``fingerprint`` (inclusive), never one
        farther, as ``(id, distance)``, nearest first. ``k`` defaults to the index's ``k``."""
        fp = _check_fp(fingerprint)
        k = self.k if k is None else _check_k(k)
        return [(_dec_id(e.idenc), e.distance) for e in self._sorted(self._read(fp, k))]

    def query_many(
        self, fingerprints: Iterable[int], k: int | None = None
    ) -> list[list[tuple[Id, int]]]:
        """:meth:`query` for each fingerprint."""
        return [self.query(fp, k) for fp in fingerprints]

    # -- writing -----------------------------------------------------------------------------

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
        flat: list[bytes | str] = ["i", idenc, "f", f"{fp:016x}", "t", repr(ts), "p", str(p)]
        for name, value in fields.items():
            flat += [name, value]
        probes = None if probe_k is None else self._probe_keys(fp, probe_k)
        ref = new_ref()
        return _Pending(
            idenc=idenc,
            fp=fp,
            ref=ref,
            period=p,
            expire_at=self._expire_at(p),
            own=self._own_keys(p, fp),
            idkey=self._idkey(idenc),
            datakey=self._datakey(ref),
            fields=flat,
            probe_k=probe_k,
            probes=probes,
            data=fields,
        )

    def _reref(self, x: _Pending) -> None:
        """Give ``x`` a new ref (its first one was in use)."""
        x.ref = new_ref()
        x.datakey = self._datakey(x.ref)

    def _write(
        self,
        id: Id,
        fp: int,
        timestamp: float | None,
        fields: Mapping[str, bytes | str],
        probe_k: int | None,
        payload: str | None = None,
    ) -> _Written:
        """Store ``id``; with ``probe_k``, also return the stored items within ``probe_k``
        that precede it in ticket order (the ones a check-and-add must consider)."""
        return self._write_many([self._prepare(id, fp, timestamp, fields, probe_k)], payload)[0]

    def _write_many(self, batch: Sequence[_Pending], payload: str | None = None) -> list[_Written]:
        """:meth:`_write` for each item, in order (:func:`~neardup.backends.redis_single.write_many`
        on one server, :func:`~neardup.backends.redis_cluster.write_cluster` on a cluster)."""
        if not self.cluster:
            return write_many(self, batch, payload)
        done: list[_Written] = []
        try:
            for x in batch:
                done.append(write_cluster(self, x, payload))
        except BaseException as e:
            abandon(
                self, [(x.idenc, x.fp, w) for x, w in zip(batch, done) if x.probe_k is not None], e
            )
            raise
        return done

    def _decides_in_script(self, k: int) -> bool:
        """Whether a check-and-add at ``k`` runs whole inside :data:`_CHECK_ADD_LUA`: one server
        and probe radius 0 (the buckets read are exact blocks of 13+ bits: few records)."""
        return k < self._in_script_below

    # -- versions (neardup.backends.redis_versions; called by other modules and the tests) ---

    def _settle(self, items: Sequence[tuple[str, int, _Written, bool]]) -> None:
        """:func:`~neardup.backends.redis_versions.settle`."""
        settle(self, items)

    def _settle_or_note(self, items: Sequence[tuple[str, int, _Written, bool]]) -> None:
        """:func:`~neardup.backends.redis_versions.settle_or_note`."""
        settle_or_note(self, items)

    def _abandon(self, items: Sequence[tuple[str, int, _Written]], err: BaseException) -> None:
        """:func:`~neardup.backends.redis_versions.abandon`."""
        abandon(self, items, err)

    def _drop_version(self, ref: int) -> None:
        """:func:`~neardup.backends.redis_versions.drop_version`."""
        drop_version(self, ref)

    def _remove_versions(self, items: Sequence[tuple[int, int, int, str | None]]) -> None:
        """:func:`~neardup.backends.redis_versions.remove_versions`."""
        remove_versions(self, items)

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
        if k < self._in_script_below:
            fp = _check_fp(fingerprint)
            found = check_add_in_script(self, [(_enc_id(id), fp, timestamp)], k)[0]
            if found is None:
                return True, []
            return False, self._matches(found)
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
        if k < self._in_script_below:
            items = [(_enc_id(i), f, t) for i, f, t in zip(ids, fps, tss)]
            for found in check_add_in_script(self, items, k):
                out.append((True, []) if found is None else (False, self._matches(found)))
            return out
        batch = [self._prepare(i, f, t, {}, k) for i, f, t in zip(ids, fps, tss)]
        written = self._write_many(batch)
        settled: list[tuple[str, int, _Written, bool]] = []
        gone = _Gone()
        try:
            for x, w in zip(batch, written):
                preds = [e for e in w.predecessors if e.ref not in gone.refs]
                if preds:
                    matches = [(_dec_id(e.idenc), e.distance) for e in self._sorted(preds)]
                    out.append((False, matches))
                else:
                    out.append((True, []))
                gone.decided(x.idenc, w, not preds)
                settled.append((x.idenc, x.fp, w, not preds))
        except BaseException as e:
            abandon(self, [(x.idenc, x.fp, w) for x, w in zip(batch, written)], e)
            raise
        settle_or_note(self, settled)
        return out

    def get(self, id: Id) -> tuple[int, float]:
        """``(fingerprint, timestamp)`` of ``id``; ``KeyError`` if unknown."""
        rec = self._get_record(id, ("f", "t"))
        return int(rec[0], 16), float(rec[1])

    def _ref_of(self, id: Id) -> int:
        """The ref of the current version of ``id``; ``KeyError`` if none."""
        raw: Any = self.client.get(self._idkey(_enc_id(id)))
        if raw is None:
            raise KeyError(f"id {id!r} is not in the index")
        ref = head_ref(raw, time.time())
        if ref is None:
            raise KeyError(f"id {id!r} is not in the index")
        return ref

    def _get_record(self, id: Id, names: Sequence[str]) -> list[Any]:
        """The data fields ``names`` of ``id`` (str; the text ``x`` as bytes)."""
        ref = self._ref_of(id)
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self._datakey(ref), ["p", *names])
        pipe.get(self._k_horizon)
        rec, horizon = pipe.execute()
        if rec[0] is None or any(v is None for v in rec):
            raise KeyError(f"id {id!r} is not in the index")
        p = int(rec[0])
        if (horizon is not None and p < int(horizon)) or p < self._live_periods().start:
            raise KeyError(f"id {id!r} is not in the index (expired)")
        return [v if n == "x" else _s(v) for n, v in zip(names, rec[1:])]

    def remove(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown."""
        idenc = _enc_id(id)
        ref = self._ref_of(id)
        f, p = self.client.hmget(self._datakey(ref), ["f", "p"])  # type: ignore[misc]
        if f is None or p is None:
            raise KeyError(f"id {id!r} is not in the index")
        forget(self, idenc, ref, int(f, 16), int(p))

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
        top = self._period_of(time.time()) + 1  # (no item is counted in a later period)
        n = self._expire_script(keys=[self._k_horizon], args=[horizon, self._k_count, first, top])
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
        self._cache.clear()
        self._seen = 0
        if self._engine is not None:
            self._engine.clear()

    def __repr__(self) -> str:
        kind = "RedisCluster" if self.cluster else "Redis"
        return f"RedisIndex({kind}, namespace={self.namespace!r}, k={self.k})"
