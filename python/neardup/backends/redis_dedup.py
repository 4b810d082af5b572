"""RedisDeduplicator: :class:`neardup.Deduplicator`'s decision over texts stored in Redis or
Redis Cluster, shared by every process that opens the same URL and namespace.

A text is checked as the embedded store checks it (``neardup.kept.rule_for``: the core's
probes, ranking and verifier): its candidates are the stored ids in the newest
``bucket_limit`` entries of its band lists; they are ranked by their min-hash bytes,
fingerprints and positions, the texts of the first ``verify_limit`` are read and verified
exactly. Check-and-add stores the new texts only if none of their band lists has changed
since it read them, else reads again and decides again: a text is only ever refused for a
version that is stored, and of near-copies racing from many processes exactly one is added.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from neardup._closing import Closing
from neardup._core import NearVersions
from neardup.backends.redis_connect import connect, redact
from neardup.backends.redis_store import Recent, RedisStore, band_codes, id_hash, unique
from neardup.dedup import Match, Policy, check_text, check_texts, check_writes
from neardup.kept import rule_for
from neardup.stores import Doc, Found, Head, dec_id, enc_id
from neardup.textstore import Id, Ids, Timestamps, check_id

__all__ = ["RedisDeduplicator"]

_log = logging.getLogger(__name__)

# How long a check-and-add keeps trying when its band lists keep changing (s).
_PATIENCE = 15.0


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
        pol = pol.replace(k_short=k, k_long=k)
    if preset is not None:
        pol = pol.replace(fingerprint={**pol.fingerprint, "preset": preset})
    if pol.verifier != "jaccard":
        raise ValueError(
            f"policy.verifier {pol.verifier!r}: the Redis store makes the one decision, which "
            "verifies by the Jaccard similarity of shingles (verifier 'jaccard'); use the "
            "embedded Deduplicator for other verifiers"
        )
    return pol


class _Turn:
    """A write's place among the writes of its process (see :class:`_Turns`)."""

    def __init__(self, turns: _Turns, codes: npt.NDArray[np.int64]) -> None:
        self._turns = turns
        self.codes = codes

    def hold(self, codes: npt.NDArray[np.int64]) -> None:
        """From now on the write may change the lists ``codes`` only (sorted)."""
        with self._turns.changed:
            self.codes = codes
            self._turns.changed.notify_all()


class _Turns:
    """The writes under way in this process, in the order they came, each with the band lists
    (``band << 32 | band key``, sorted) it may still change: before it has decided, those of
    all its texts; then those of the texts it keeps. A write starts once no earlier one may
    change a list it reads (else its conditional add would be refused for its own process's
    write and decided again), beside the others."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self._queue: list[_Turn] = []

    @staticmethod
    def _share(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> bool:
        if not len(a) or not len(b):
            return False
        at = np.searchsorted(b, a).clip(max=len(b) - 1)
        return bool((b[at] == a).any())

    def _waits(self, me: _Turn, codes: npt.NDArray[np.int64]) -> bool:
        for earlier in self._queue:
            if earlier is me:
                return False
            if self._share(codes, earlier.codes):
                return True
        return False

    @contextmanager
    def turn(self, codes: npt.NDArray[np.int64]) -> Iterator[_Turn]:
        """A write that reads and may change the lists ``codes``, once it may start."""
        me = _Turn(self, codes)
        try:
            with self.changed:
                self._queue.append(me)
                self.changed.wait_for(lambda: not self._waits(me, codes))
            yield me
        finally:  # (also when the wait is cut short: a place left behind would block others)
            with self.changed:
                self._queue = [t for t in self._queue if t is not me]
                self.changed.notify_all()


class _Probed(NamedTuple):
    """A batch's prepared texts, fingerprints, band keys, min-hash bytes, and whether each
    has anything to compare (an empty text has not: never a candidate)."""

    norms: list[str]
    fps: npt.NDArray[np.uint64]
    keys: npt.NDArray[np.uint32]
    minhash: npt.NDArray[np.uint8]
    listed: list[bool]


class RedisDeduplicator(Closing):
    """:class:`neardup.Deduplicator` semantics over Redis: the texts live in Redis, shared by
    every process that opens the same URL and namespace.

    ``check(text)`` returns the stored near-duplicates of ``text``, best first (the one
    decision of the policy: MinHash band candidates, exact Jaccard). ``check_and_add`` is
    atomic across processes and machines. The policy and retention are recorded in Redis;
    opening with others raises :class:`neardup.IncompatibleIndexError`.
    """

    def __init__(
        self,
        client: Any,
        *,
        policy: Policy | Mapping[str, Any] | str | None = None,
        namespace: str = "neardup",
        retention: float | None = None,
        cluster: bool | None = None,
        url: str | None = None,
    ) -> None:
        self.policy = _policy_from(policy, None, None)
        if retention is not None and (
            isinstance(retention, bool)
            or not isinstance(retention, (int, float))
            or not 0 < retention < math.inf
        ):
            raise ValueError(
                f"retention must be a positive finite number of seconds, got {retention!r}"
            )
        if not isinstance(namespace, str) or not namespace or "{" in namespace:
            raise ValueError(f"namespace must be a non-empty str without '{{', got {namespace!r}")
        if cluster is None:
            cluster = type(client).__name__ == "RedisCluster"
        self.fingerprinter = self.policy.make_fingerprinter()
        self.rule = rule_for(self.policy)
        self.retention = None if retention is None else float(retention)
        self.store = RedisStore(
            client,
            namespace=namespace,
            cluster=cluster,
            bands=self.policy.band_shape[0],
            limit=self.policy.bucket_limit,
            retention=self.retention,
        )
        self._last_expire = 0.0
        # Prepared texts of stored versions read as candidates, by (id hash, ref): a version
        # never changes, so they are reused while the version is read as stored.
        self._norms = Recent(self.norm_cache, self.norm_cache_chars)
        # What checks need of the stored versions read as candidates, by record (one server).
        self._versions = NearVersions(self.rule.width, self.version_cache)
        self.store.open({"policy": self.policy.to_dict(), "retention": self.retention})
        self.url = redact(url) if url else None
        self._lock = threading.Lock()
        self._turns = _Turns()
        self._counters = {
            "checks": 0, "adds": 0, "added": 0, "candidates": 0, "matches": 0, "conflicts": 0,
            "expired": 0,
        }  # fmt: skip
        self._closed = False

    #: Writes are atomic on the server (an add is made only if the band lists it was decided
    #: on are unchanged, else decided again), so threads may make them at once, as processes
    #: do (the service sends batch requests from several threads); in a process, a write
    #: waits for those under way that share a band list with it (:class:`_Turns`).
    concurrent_writes: bool = True

    #: Prepared texts of candidates kept per process (oldest dropped first), at most this
    #: many and this many characters in all.
    norm_cache: int = 65_536
    norm_cache_chars: int = 32 << 20
    #: Heads of stored versions kept per process (oldest dropped first).
    version_cache: int = 65_536

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
        **client_kwargs: Any,
    ) -> RedisDeduplicator:
        """Open the deduplicator at ``url`` (``redis://``, ``rediss://``, ``redis+cluster://``,
        ``unix://``; see :func:`~neardup.backends.redis_connect.connect`). ``k`` and
        ``preset`` override the policy's SimHash radius and fingerprint preset; the URL's
        ``namespace`` and ``retention`` apply when the keyword is not given; other keywords
        go to redis-py (``socket_timeout``, ...)."""
        pol = _policy_from(policy, k, preset)  # (a bad policy is refused before connecting)
        client, options = connect(url, **client_kwargs)
        try:
            return cls(
                client,
                policy=pol,
                namespace=options.get("namespace", "neardup") if namespace is None else namespace,
                retention=options.get("retention") if retention is None else retention,
                cluster=url.split("://", 1)[0].lower().endswith("+cluster"),
                url=url,
            )
        except BaseException:
            client.close()  # (settings refused, or the server unreachable)
            raise

    # -- the decision --------------------------------------------------------------------------

    def _probe(self, texts: Sequence[str]) -> _Probed:
        norms = self.policy.prepare_many(texts)
        fps = self.fingerprinter.fingerprint_many(norms)
        keys, minhash, lengths = self.rule.probes(norms, fps)
        return _Probed(norms, fps, keys, minhash, [n > 0 for n in lengths.tolist()])

    @staticmethod
    def _lists(p: _Probed, rows: Sequence[int] | None = None) -> npt.NDArray[np.int64]:
        """The band lists (``band << 32 | band key``, sorted) of the texts ``rows`` of ``p``
        (None: all)."""
        keys = p.keys[np.asarray(p.listed, bool)] if rows is None else p.keys[
            [r for r in rows if p.listed[r]]]  # fmt: skip
        return unique(band_codes(keys))

    def _decide(self, p: _Probed, ids: Sequence[Id] | None) -> tuple[list[list[Match]], Found]:
        """Each text's matches among the stored texts and, with ``ids`` (a check-and-add),
        the texts of the batch kept before it (those without matches); and what was read.

        The core's :class:`~neardup._core.NearBatch` finds each text's candidates in the band
        lists read (the rows of a batch: the stored versions met, then the batch's texts) and
        ranks them; the texts of the first are read and verified here, text by text."""
        store, rule, n = self.store, self.rule, len(p.norms)
        found = store.query(p.keys[np.asarray(p.listed, bool)], n if ids is not None else 0)
        # The versions this check reads are kept for it alone (none dropped before it is
        # decided) and, on one server, for later checks too (on a cluster a record may outlive
        # its version: the versions are read each time).
        now = NearVersions(rule.width, 1 << 62)
        maps = [now] if store.cluster else [now, self._versions]
        absent: list[bytes] = []
        while True:
            batch = rule.batch(
                maps, found.records, found.codes, p.keys, p.minhash, p.fps, p.listed,
                horizon=store.horizon(), absent=absent, within=ids is not None,
                bucket_limit=self.policy.bucket_limit,
                full_bucket_quorum=self.policy.full_bucket_quorum,
            )  # fmt: skip
            if not batch.missing:  # (at most twice, unless a version read before was dropped)
                break
            heads = store.heads(batch.missing)
            absent += batch.missing  # (a record of these not held now is gone, or stale)
            for versions in maps:
                self._hold(heads, versions)
        m, fps, positions = batch.stored, batch.fps, batch.positions
        norms: dict[int, str] = {}
        cache = self._norms

        def read(wanted: Iterable[int]) -> None:
            missing = []
            for r in wanted:
                if r < m and r not in norms:
                    known = cache.get(batch.record(r))
                    if known is None:
                        missing.append(r)
                    else:
                        norms[r] = known
            if missing:
                records = [batch.record(r) for r in missing]
                texts = store.texts(records)
                got = self.policy.prepare_many([texts.get(rec, "") for rec in records])
                # (a version removed or replaced meanwhile: "", no match)
                norms.update(zip(missing, got))
                self._keep_norms([(rec, norm) for rec, norm in zip(records, got) if rec in texts])

        # Rank every text first against its stored candidates and the earlier texts of the
        # batch that share a band list with it (all of them kept, as most are), to read the
        # texts of every first candidate in one call; a text whose earlier ones were not all
        # kept is ranked again.
        earlier = [batch.earlier(i) for i in range(n)]
        first = [batch.ranked(i, earlier[i]) for i in range(n)]
        enc = [enc_id(i) for i in ids] if ids is not None else []
        # the stored versions of the batch's ids (a kept text replaces them): rows by id
        old_rows: dict[bytes, list[int]] = {}
        for j, r in batch.stored_of(enc) if enc else ():
            old_rows.setdefault(enc[j], []).append(r)
        read(r for top in first for r in top)
        out: list[list[Match]] = []
        kept = np.zeros(n, bool)
        # A text kept under an id replaces that id's stored version and its earlier texts in
        # the batch: neither is a candidate of a later text (encoded id -> its newest row;
        # the stored rows so replaced).
        newest: dict[bytes, int] = {}
        replaced: set[int] = set()
        n_cands = 0
        for i in range(n):
            mine = [j for j in earlier[i] if kept[j] and newest[enc[j]] == j]
            top = first[i] if len(mine) == len(earlier[i]) else batch.ranked(i, mine)
            if replaced and top:
                # ranked again without them, so that the next candidates take their places
                skip = [r for r in top if r in replaced]
                while skip:
                    top = batch.ranked(i, mine, skip)
                    more = [r for r in top if r in replaced]
                    skip += more
                    if not more:
                        break
            matches: list[Match] = []
            if top:
                n_cands += len(top)
                read(top)
                texts = [norms[r] if r < m else p.norms[r - m] for r in top]
                for k, d, s in rule.verify(p.norms[i], int(p.fps[i]), texts, fps[top],
                                           positions[top]):  # fmt: skip
                    r = top[k]
                    who = dec_id(batch.id(r)) if r < m else ids[r - m]  # type: ignore[index]
                    matches.append(Match(who, int(d), float(s)))
            kept[i] = not matches and ids is not None
            if kept[i]:
                newest[enc[i]] = i
                replaced.update(old_rows.get(enc[i], ()))
            out.append(matches)
        self._count(n, n_cands, sum(map(len, out)))
        return out, found

    @staticmethod
    def _hold(heads: Sequence[Head], versions: NearVersions) -> None:
        """Keep what a check needs of stored versions."""
        versions.put_many(
            [h.record for h in heads], [h.fp for h in heads], [h.timestamp for h in heads],
            [h.id for h in heads], [h.minhash for h in heads],
        )  # fmt: skip

    def _keep_norms(self, items: Iterable[tuple[bytes, str]]) -> None:
        """Keep prepared texts of stored versions (by record: id hash and ref) for later
        checks."""
        self._norms.update(items)

    def _stored(self, p: _Probed, rows: Sequence[int], docs: Sequence[Doc]) -> None:
        """After ``docs`` (of texts ``rows``) were stored: keep their heads and prepared
        texts, which a later check of this process would otherwise read back as candidates
        (on one server: on a cluster the heads are read each time)."""
        recs = [(i, id_hash(d.id) + d.ref.to_bytes(8, "big"), d) for i, d in zip(rows, docs)
                if d.listed]  # fmt: skip
        self._keep_norms([(rec, p.norms[i]) for i, rec, _ in recs])
        if not self.store.cluster:
            self._hold([Head(rec, d.fp, d.timestamp, d.id, d.minhash) for _, rec, d in recs],
                       self._versions)  # fmt: skip

    def _count(self, checks: int, candidates: int, matches: int) -> None:
        with self._lock:
            c = self._counters
            c["checks"] += checks
            c["candidates"] += candidates
            c["matches"] += matches

    def _docs(
        self, p: _Probed, rows: Sequence[int], ids: Sequence[Id], texts: Sequence[str],
        tss: Sequence[float | None], first: int,
    ) -> list[Doc]:  # fmt: skip
        """The versions of texts ``rows`` to store; text i's ref is ``first + i``."""
        now, fps = time.time(), p.fps.tolist()
        keys, kw = p.keys.astype(">u4").tobytes(), 4 * p.keys.shape[1]
        minhash, mw = p.minhash.tobytes(), p.minhash.shape[1]
        return [
            Doc(enc_id(ids[i]), first + i, fps[i], minhash[i * mw : (i + 1) * mw],
                keys[i * kw : (i + 1) * kw], texts[i].encode("utf-8", "surrogatepass"),
                now if tss[i] is None else float(tss[i]), p.listed[i])  # type: ignore[arg-type]
            for i in rows
        ]  # fmt: skip

    def _retrying(self, op: Any) -> Any:
        """``op()``, once more when the store has recovered from what it raised."""
        self._ensure_open()
        try:
            return op()
        except Exception as e:
            if not self.store.recover(e):
                raise
            return op()

    def _after_write(self, n: int) -> None:
        """Count ``n`` stored texts; with a retention, drop the expired ones (at most once a
        second per process, so that it costs nothing per write)."""
        with self._lock:
            self._counters["adds"] += n
            self._counters["added"] += n
            now = time.time()
            due = self.retention is not None and now - self._last_expire >= 1.0
            if due:
                self._last_expire = now
        if due:
            assert self.retention is not None
            try:
                self._expire(now - self.retention)
            except Exception as e:  # (the texts are stored: the write is not failed for it)
                _log.warning("expiry after a write failed (retried a second later): %s", e)
                with self._lock:
                    self._last_expire = 0.0

    def _expire(self, before: float) -> int:
        """Delete the versions older than ``before`` (counted: every expiry); how many."""
        n = int(self._retrying(lambda: self.store.expire(before)))
        with self._lock:
            self._counters["expired"] += n
        return n

    # -- the API -------------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise ValueError("deduplicator is closed")

    @staticmethod
    def _no_radius(k: int | None) -> None:
        if k is not None:
            raise ValueError(
                f"k={k!r}: the Redis store finds candidates by the policy's MinHash bands (the "
                "one decision), not by a SimHash radius; leave k out"
            )

    def check(self, text: str, k: int | None = None) -> list[Match]:
        """Stored near-duplicates of ``text``, best first (highest similarity, then smallest
        SimHash distance, then oldest)."""
        return self.check_many([check_text(text)], k=k)[0]

    def check_many(self, texts: Sequence[str], k: int | None = None) -> list[list[Match]]:
        """:meth:`check` for each text (three round trips for the batch at most)."""
        check_texts(texts)
        self._no_radius(k)
        p = self._probe(texts)
        return self._retrying(lambda: self._decide(p, None)[0])  # type: ignore[no-any-return]

    def add(self, id: Id, text: str, timestamp: float | None = None) -> int:
        """Store ``text`` under ``id`` (replacing the id's text); return its fingerprint."""
        return self._add_many(*check_writes([id], [text], [timestamp], self.retention, one=True),
                              [text])[0]  # fmt: skip

    def add_many(
        self,
        ids: Ids,
        texts: Sequence[str],
        timestamps: Timestamps | None = None,
    ) -> list[int]:
        """:meth:`add` for each text, in order; one bad item refuses the whole batch."""
        ids, tss = check_writes(ids, texts, timestamps, self.retention)
        return self._add_many(ids, tss, texts)

    def _add_many(self, ids: list[Id], tss: list[float | None], texts: Sequence[str]) -> list[int]:
        p = self._probe(texts)
        first = self._retrying(lambda: self.store.refs(max(1, len(ids))))
        docs = self._docs(p, range(len(ids)), ids, texts, tss, first)
        with self._turns.turn(self._lists(p)):
            self._retrying(lambda: self.store.add(docs, None))
        self._stored(p, range(len(ids)), docs)
        self._after_write(len(docs))
        return [int(x) for x in p.fps.tolist()]

    def check_and_add(
        self, id: Id, text: str, timestamp: float | None = None
    ) -> tuple[bool, list[Match]]:
        """Add ``text`` unless it has stored near-duplicates, atomically across processes:
        ``(added, matches)``."""
        ids, tss = check_writes([id], [text], [timestamp], self.retention, one=True)
        return self._check_and_add_many(ids, [text], tss)[0]

    def check_and_add_many(
        self,
        ids: Ids,
        texts: Sequence[str],
        timestamps: Timestamps | None = None,
    ) -> list[tuple[bool, list[Match]]]:
        """:meth:`check_and_add` for each text, in order: a text is checked against the stored
        ones and the texts of the batch added before it. One bad item refuses the batch."""
        ids, tss = check_writes(ids, texts, timestamps, self.retention)
        return self._check_and_add_many(ids, texts, tss)

    def _check_and_add_many(
        self, ids: list[Id], texts: Sequence[str], tss: list[float | None]
    ) -> list[tuple[bool, list[Match]]]:
        p = self._probe(texts)
        lists = self._lists(p)
        with self._turns.turn(lists) as turn:
            return self._check_and_add_in_turn(p, ids, texts, tss, turn, lists)

    def _check_and_add_in_turn(
        self, p: _Probed, ids: Sequence[Id], texts: Sequence[str], tss: Sequence[float | None],
        turn: _Turn, lists: npt.NDArray[np.int64],
    ) -> list[tuple[bool, list[Match]]]:  # fmt: skip
        """:meth:`check_and_add_many` of probed texts in its turn (holding ``lists``, those of
        all its texts, whenever it decides)."""
        deadline = time.monotonic() + _PATIENCE
        for attempt in range(1 << 30):
            turn.hold(lists)
            found, read = self._retrying(lambda: self._decide(p, ids))
            rows = [i for i, m in enumerate(found) if not m]
            turn.hold(self._lists(p, rows))  # (later writes that read none of them may start)
            docs = self._docs(p, rows, ids, texts, tss, read.first)
            if self._retrying(lambda: self.store.add(docs, read)):  # noqa: B023
                self._stored(p, rows, docs)
                break
            # A band list changed (another writer stored a text in it) or, on a cluster, is
            # reserved: read again and decide again, after a short random wait once the
            # first retries have met the same contention.
            with self._lock:
                self._counters["conflicts"] += 1
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"check-and-add: the band lists of the texts kept changing for {_PATIENCE:g} "
                    "s (other writers, or a writer holding a reservation stalled); try again"
                )
            if attempt >= 2:
                time.sleep(random.uniform(0, min(0.05, 0.001 * (1 << min(attempt, 6)))))
        self._after_write(len(docs))
        return [(not m, m) for m in found]

    def remove(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if it is not stored (one past the retention window is
        not, as for ``get`` and ``in``: its data go all the same)."""
        key = enc_id(check_id(id))
        live = self._retrying(lambda: self.store.get(key)) is not None
        if not self._retrying(lambda: self.store.remove(key)) or not live:
            raise KeyError(id)

    def get(self, id: Id) -> str:
        """The stored text of ``id``; ``KeyError`` if it is not stored."""
        key = enc_id(check_id(id))
        text = self._retrying(lambda: self.store.get(key))
        if text is None:
            raise KeyError(id)
        return str(text)

    def expire(self, before: float) -> int:
        """Forget every text stored with a timestamp < ``before``; how many."""
        if isinstance(before, bool) or not isinstance(before, (int, float)):
            raise TypeError(f"before must be float seconds, got {type(before).__name__}")
        if math.isnan(before):
            raise ValueError("before must be a number of seconds, got nan")
        return self._expire(float(before))

    def stats(self) -> dict[str, Any]:
        """Counters of this process, the number of stored texts and the settings."""
        count = len(self)
        with self._lock:
            counters = dict(self._counters)
        return {
            "documents": count,
            **counters,
            "store": self.url,
            **self.store.settings,
            "retention": self.retention,
            "policy": self.policy.to_dict(),
        }

    def close(self) -> None:
        """Close the connections (idempotent)."""
        if not self._closed:
            self._closed = True
            self.store.close()

    def __contains__(self, id: object) -> bool:
        try:
            key = enc_id(check_id(id))
        except (TypeError, ValueError):
            return False
        return self._retrying(lambda: self.store.get(key)) is not None

    def __len__(self) -> int:
        return int(self._retrying(self.store.count))

    def probe(self) -> None:
        """Raise what Redis raises when it cannot serve a request now (``/readyz``)."""
        self._retrying(self.store.probe)

    def __repr__(self) -> str:
        return (
            f"RedisDeduplicator({self.url or 'redis'}, "
            f"namespace={self.store.settings['namespace']!r}, policy={self.policy!r})"
        )
