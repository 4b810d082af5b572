"""RedisDeduplicator: :class:`neardup.Deduplicator` semantics (stored texts, the policy's
verifier) over :class:`~neardup.backends.redis_index.RedisIndex`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup._closing import Closing
from neardup._core import (
    Fingerprinter,
    _sketch,
    _sketch_jaccard_le,
    _sketch_many,
    _TextEngine,
)
from neardup.backends.redis_connect import Client, connect, redact
from neardup.backends.redis_copies import copies_first, with_batch_matches
from neardup.backends.redis_format import (
    _check_k,
    _dec_id,
    _enc_id,
    _Entry,
    _Pending,
    _unicode,
    _utf8,
    _Written,
)
from neardup.backends.redis_index import DEFAULT_CACHE_SIZE, RedisIndex, _Gone
from neardup.backends.redis_link import DEFAULT_SPIN_US
from neardup.backends.redis_onetext import check_and_add_in_core
from neardup.backends.redis_single import check_add_in_script
from neardup.dedup import Match, Policy, check_batch, check_text, check_texts
from neardup.textstore import Id, check_id
from neardup.verify import cosine, levenshtein

__all__ = ["RedisDeduplicator"]


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


class RedisDeduplicator(Closing):
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
        cache_size: int = DEFAULT_CACHE_SIZE,
        spin_us: int = DEFAULT_SPIN_US,
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
            cache_size=cache_size,
            spin_us=spin_us,
        )
        self.url = redact(url) if url else None
        # The data field read with each candidate: its sketch for the Jaccard verifier, its
        # text for the others, nothing without a verifier.
        verifier = self.policy.verifier
        self._payload = {"jaccard": "h", "none": None}.get(verifier, "x")
        # One server, Jaccard verifier: read the recent ring with each call, so that a copy of
        # another process's recent text is also guessed (check_and_add).
        index = self.index
        index._watching = self._payload == "h" and not index.cluster and index._cache.size > 0
        # There, without replicas to wait for, one text's check-and-add is decided in the core
        # (redis_onetext); Python only sends and receives its bytes.
        if index._watching and not index._link.wait_replicas:
            index._engine = _TextEngine(
                [
                    index._k_seq,
                    index._k_count,
                    index._idkey_prefix,
                    index._k_horizon,
                    index._data_prefix,
                    index._k_recent,
                    index._bucket_prefix,
                    index._write_script.sha,
                    index._recent_script.sha,
                ],
                index.layout.blocks,
                self.policy.threshold,
                index._cache.size,
            )
            p = self.policy
            index._engine.prepare_with(
                self.fingerprinter, p.shingle, p.k_short, p.k_long, p.short_chars
            )
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
        cache_size: int = DEFAULT_CACHE_SIZE,
        spin_us: int | None = None,
        **client_kwargs: Any,
    ) -> RedisDeduplicator:
        """Open the deduplicator at ``url`` (``redis://``, ``rediss://``, ``redis+cluster://``,
        ``unix://``; see :func:`connect`). ``k`` and ``preset`` override the policy's radius and
        fingerprint preset; URL query options ``namespace``, ``retention``, ``period``,
        ``blocks``, ``spin_us`` apply when the keyword is not given; ``wait_replicas``,
        ``wait_timeout`` come from the URL only; ``cache_size`` and ``spin_us``: see
        :class:`RedisIndex`."""
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
            cache_size=cache_size,
            spin_us=spin_us if spin_us is not None else options.get("spin_us", DEFAULT_SPIN_US),
        )

    # -- verification ------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise ValueError("deduplicator is closed")

    def _sketch(self, norm: str) -> npt.NDArray[np.uint32]:
        return _sketch(norm, self.policy.shingle)

    def _fields(self, text: str, hashes: npt.NDArray[np.uint32] | None) -> dict[str, bytes]:
        """The data fields stored with a text: ``x`` the text, and with the Jaccard verifier
        ``h`` its sketch (sorted distinct 32-bit hashes of the prepared text's shingles,
        little-endian), so that a candidate is verified without normalising and hashing its
        text again."""
        if hashes is None:
            return {"x": _utf8(text)}
        return {"x": _utf8(text), "h": hashes.astype("<u4", copy=False).tobytes()}

    def _verify(
        self, norm: str, entries: Sequence[_Entry], hashes: npt.NDArray[np.uint32] | None = None
    ) -> list[Match]:
        """Matches among ``entries`` (read with their payload: the sketch ``h`` for the
        Jaccard verifier, else the text) that pass the policy's verifier. ``hashes``: the
        sketch of ``norm`` when already computed."""
        if not entries:
            return []
        kind, threshold = self.policy.verifier, self.policy.threshold
        sims: list[float | None]
        if kind == "none":
            live = list(entries)
            sims = [None] * len(live)
        elif kind == "jaccard":
            live = [e for e in entries if e.text is not None]  # (None: removed meanwhile)
            if not live:
                return []
            q = self._sketch(norm) if hashes is None else hashes
            sims = list(_sketch_jaccard_le(q, [e.text or b"" for e in live]))
        else:
            live = [e for e in entries if e.text is not None]
            measure = levenshtein if kind == "levenshtein" else cosine
            sims = [measure(norm, self._prepare(_unicode(e.text or b""))) for e in live]
        out = [
            Match(_dec_id(e.idenc), e.distance, sim)
            for e, sim in zip(live, sims)
            if sim is None or sim >= threshold
        ]
        out.sort(key=lambda m: (-(m.similarity if m.similarity is not None else 1.0), m.distance))
        return out

    def _payloads(self, entries: list[_Entry]) -> list[_Entry]:
        """``entries`` with their Jaccard sketch: a stored version without one (written before
        sketches were stored) has it computed from its text (one more round trip)."""
        if self._payload != "h":
            return entries
        missing = {e.ref: (e.fp, e.distance) for e in entries if e.text is None}
        if not missing:
            return entries
        sketches = self._sketches_from_texts(missing)
        for e in entries:
            if e.text is None and e.ref in sketches:
                e.text = sketches[e.ref]
        return entries

    def _sketches_from_texts(self, versions: Mapping[int, tuple[int, int]]) -> dict[int, bytes]:
        """The Jaccard sketches (little-endian uint32 bytes) of the stored ``versions``
        ``{ref: (fp, distance)}``, computed from their texts (one round trip); those whose
        text is gone are left out."""
        texts = {e.ref: e.text for e in self.index._resolve(versions, "x")}
        return {
            ref: self._sketch(self._prepare(_unicode(raw))).astype("<u4").tobytes()
            for ref, raw in texts.items()
            if raw is not None
        }

    def _prepare(self, text: str) -> str:
        # What both stages see (HTML main text, normalised), exactly as Deduplicator does.
        return self.policy.prepare(text)

    def _radius(self, norm: str, k: int | None) -> int:
        return self.policy.radius(len(norm)) if k is None else _check_k(k)

    # -- DedupBackend ------------------------------------------------------------------------

    def _prepare_one(self, text: str) -> tuple[str, int, npt.NDArray[np.uint32] | None]:
        """The prepared text, fingerprint and (Jaccard verifier) sketch of ``text``: one
        text's :meth:`_prepare_batch`, without the batch's lists."""
        norm = self._prepare(check_text(text))
        fp = int(self.fingerprinter.fingerprint(norm))
        return norm, fp, (_sketch(norm, self.policy.shingle) if self._payload == "h" else None)

    def check(self, text: str, k: int | None = None) -> list[Match]:
        """Stored near-duplicates of ``text``, best first (highest similarity, then distance)."""
        self._ensure_open()
        norm = self._prepare(check_text(text))
        fp = int(self.fingerprinter.fingerprint(norm))
        entries, matches = self._lookup(norm, fp, self._radius(norm, k))
        self._count(entries, matches)
        return matches

    def _lookup(
        self,
        norm: str,
        fp: int,
        radius: int,
        hashes: npt.NDArray[np.uint32] | None = None,
        prefetch: Mapping[int, int] | None = None,
    ) -> tuple[list[_Entry], list[Match]]:
        """The stored items within ``radius`` of ``fp`` and those that pass the verifier
        (``hashes``: the sketch of ``norm`` when already computed; ``prefetch``: versions
        likely near whose data are read with the buckets)."""
        entries = self.index._sorted(self.index._read(fp, radius, self._payload, prefetch))
        return entries, self._verify(norm, self._payloads(entries), hashes)

    def _count(self, entries: Sequence[_Entry], matches: Sequence[Match]) -> None:
        self._counters["checks"] += 1
        self._counters["candidates"] += len(entries)
        self._counters["matches"] += len(matches)

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

        With the Jaccard verifier, when a text is likely a copy, it is first only checked
        (one read): if a stored near-duplicate is confirmed, nothing is written (no ticket, no
        retraction); otherwise it goes the usual way. Likely: one of the newest versions (on
        one server, written by any process, heard of through the recent ring; on a cluster,
        written or read by this process) is near, and either passes the Jaccard threshold with
        data this process keeps, or its data are not kept yet (they are read with the check).
        """
        self._ensure_open()
        check_id(id)
        engine = self.index._engine
        if engine is not None and self.index._watching:
            return check_and_add_in_core(self, engine, id, text, timestamp)
        return self._check_and_add_here(id, text, timestamp)

    def _check_and_add_here(
        self, id: Id, text: str, timestamp: float | None
    ) -> tuple[bool, list[Match]]:
        """:meth:`check_and_add` decided in Python (the path of everything the core's
        engine leaves out: a cluster, replicas to wait for, no cache, another verifier)."""
        norm, fp, h = self._prepare_one(text)
        radius = self._radius(norm, None)
        if self._payload == "h":
            likely, unknown = self._likely_duplicate(fp, radius, h)
            if likely or unknown:
                entries, matches = self._lookup(norm, fp, radius, h, unknown)
                if matches:
                    self._count(entries, matches)
                    return False, matches
        return self._check_and_add_prepared([id], [text], [timestamp], [norm], [fp], [h])[0]

    def _likely_duplicate(self, fp: int, radius: int, hashes: Any) -> tuple[bool, dict[int, int]]:
        """Whether a version whose data this process keeps is within ``radius`` and passes
        the Jaccard threshold, and ``{ref: fp}`` of the newest versions of other processes
        within ``radius`` whose data it does not keep: guesses only (they may be gone)."""
        cache = self.index._cache
        rows = []
        unknown: dict[int, int] = {}
        if self.index._watching:  # (the newest versions of every process, this one's too)
            for ref, near in cache.seen_near(fp, radius).items():
                c = cache.get(ref, "h")
                if c is None:
                    unknown[ref] = near
                elif c[4] is not None:
                    rows.append(c[4])
        else:
            for ref in cache.recent_near(fp, radius):
                c = cache.get(ref, "h")
                if c is not None and c[4] is not None:
                    rows.append(c[4])
        if rows and any(s >= self.policy.threshold for s in _sketch_jaccard_le(hashes, rows)):
            return True, {}
        return False, unknown

    def check_many(self, texts: Sequence[str], k: int | None = None) -> list[list[Match]]:
        """:meth:`check` for each text."""
        check_texts(texts)
        return [self.check(t, k) for t in texts]

    def _prepare_batch(
        self, ids: Sequence[Id], texts: Sequence[str], timestamps: Sequence[float | None] | None
    ) -> tuple[Sequence[float | None], list[str], list[int], list[Any]]:
        """Timestamps, prepared texts, fingerprints and (Jaccard verifier) sketches."""
        self._ensure_open()
        tss = check_batch(ids, texts, timestamps)
        for i in ids:
            check_id(i)
        norms = self.policy.prepare_many(texts)
        fps = self.fingerprinter.fingerprint_many(norms).tolist() if norms else []
        sketches: list[Any] = [None] * len(norms)
        if self._payload == "h" and norms:
            sketches = (
                [self._sketch(norms[0])]
                if len(norms) == 1
                else _sketch_many(norms, self.policy.shingle)
            )
        return tss, norms, fps, sketches

    def add_many(
        self,
        ids: Sequence[Id],
        texts: Sequence[str],
        timestamps: Sequence[float | None] | None = None,
    ) -> list[int]:
        """:meth:`add` for each text, in order (pipelined); returns the fingerprints."""
        tss, _, fps, sketches = self._prepare_batch(ids, texts, timestamps)
        self.index._write_many(
            [
                self.index._prepare(i, f, ts, self._fields(t, h), None)
                for i, t, f, ts, h in zip(ids, texts, fps, tss, sketches)
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
        batch costs two or three round trips, not two or three per text, and with the Jaccard
        verifier its likely copies of stored texts are first only read, in one or two more,
        and answered without a write when confirmed (:mod:`~neardup.backends.redis_copies`)."""
        tss, norms, fps, sketches = self._prepare_batch(ids, texts, timestamps)
        if len(norms) < 2 or not self.index._watching:
            return self._check_and_add_prepared(ids, texts, tss, norms, fps, sketches)
        # (one server, Jaccard: the likely copies of stored texts checked first, redis_copies)
        radii = [self._radius(n, None) for n in norms]
        ids = list(ids)
        found = copies_first(self, ids, norms, fps, radii, sketches)
        if not found:
            return self._check_and_add_prepared(ids, texts, tss, norms, fps, sketches)
        rest = [j for j in range(len(norms)) if j not in found]
        out: list[tuple[bool, list[Match]]] = [(False, [])] * len(norms)
        if rest:

            def pick(xs: Sequence[Any]) -> list[Any]:
                return [xs[j] for j in rest]

            decided = self._check_and_add_prepared(
                pick(ids), pick(texts), pick(tss), pick(norms), pick(fps), pick(sketches)
            )
            for j, r in zip(rest, decided):
                out[j] = r
        for j, (entries, matches) in found.items():
            added_before = [i for i in rest if i < j and out[i][0]]
            out[j] = (
                False,
                with_batch_matches(self, j, matches, ids, fps, radii[j], sketches, added_before),
            )
            self._count(entries, out[j][1])
        return out

    def _check_and_add_prepared(
        self,
        ids: Sequence[Id],
        texts: Sequence[str],
        tss: Sequence[float | None],
        norms: Sequence[str],
        fps: Sequence[int],
        sketches: Sequence[Any],
    ) -> list[tuple[bool, list[Match]]]:
        """:meth:`check_and_add_many` of texts already prepared (:meth:`_prepare_batch`)."""
        radii = [self._radius(n, None) for n in norms]
        if self._payload is None and all(r < self.index._in_script_below for r in radii):
            return self._check_and_add_in_script(ids, texts, tss, fps, radii)
        batch = [
            self.index._prepare(i, f, ts, self._fields(t, h), r)
            for i, t, r, f, ts, h in zip(ids, texts, radii, fps, tss, sketches)
        ]
        if len(batch) == 1:
            return [self._decide_one(batch[0], norms[0], sketches[0])]
        written = self.index._write_many(batch, self._payload)
        out: list[tuple[bool, list[Match]]] = []
        settled: list[tuple[str, int, _Written, bool]] = []
        gone = _Gone()
        candidates: list[int] = []
        try:
            for n, x, w, h in zip(norms, batch, written, sketches):
                preds = [e for e in self.index._sorted(w.predecessors) if e.ref not in gone.refs]
                candidates.append(len(preds))
                matches = self._verify(n, self._payloads(preds), h)
                out.append((not matches, matches))
                gone.decided(x.idenc, w, not matches)
                settled.append((x.idenc, x.fp, w, not matches))
        except BaseException as e:
            # (verifying may read, and fail; the writes of the call are retracted)
            self.index._abandon([(x.idenc, x.fp, w) for x, w in zip(batch, written)], e)
            raise
        self.index._settle_or_note(settled)
        for n_candidates, (added, matches) in zip(candidates, out):
            self._count_decided(n_candidates, len(matches), added)
        return out

    def _decide_one(self, x: _Pending, norm: str, h: Any) -> tuple[bool, list[Match]]:
        """:meth:`_check_and_add_prepared` of one text (the same steps, without a batch's
        bookkeeping: the hot path of :meth:`check_and_add`)."""
        w = self.index._write_many([x], self._payload)[0]
        try:
            preds = self.index._sorted(w.predecessors)
            matches = self._verify(norm, self._payloads(preds), h)
        except BaseException as e:
            self.index._abandon([(x.idenc, x.fp, w)], e)
            raise
        added = not matches
        self.index._settle_or_note([(x.idenc, x.fp, w, added)])
        self._count_decided(len(preds), len(matches), added)
        return added, matches

    def _count_decided(self, candidates: int, matches: int, added: bool) -> None:
        c = self._counters
        c["checks"] += 1
        c["candidates"] += candidates
        c["matches"] += matches
        c["adds"] += added
        c["added"] += added

    def _check_and_add_in_script(
        self,
        ids: Sequence[Id],
        texts: Sequence[str],
        tss: Sequence[float | None],
        fps: Sequence[int],
        radii: Sequence[int],
    ) -> list[tuple[bool, list[Match]]]:
        """Without a verifier and at probe radius 0 on one server, the index decides each
        check-and-add inside its script (one round trip for the batch, nothing written for a
        duplicate: :func:`~neardup.backends.redis_single.check_add_in_script`)."""
        items = [(_enc_id(i), f, ts) for i, f, ts in zip(ids, fps, tss)]
        found = check_add_in_script(self.index, items, radii, [["x", _utf8(t)] for t in texts])
        out: list[tuple[bool, list[Match]]] = []
        for entries in found:
            self._counters["checks"] += 1
            if entries is None:
                self._counters["adds"] += 1
                self._counters["added"] += 1
                out.append((True, []))
                continue
            matches = [Match(i, d, None) for i, d in self.index._matches(entries)]
            self._counters["candidates"] += len(matches)
            self._counters["matches"] += len(matches)
            out.append((False, matches))
        return out

    def remove(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown."""
        self._ensure_open()
        self.index.remove(id)

    def get(self, id: Id) -> str:
        """The stored text of ``id``; ``KeyError`` if unknown."""
        self._ensure_open()
        return _unicode(self.index._get_record(id, ("x",))[0])

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

    def __contains__(self, id: object) -> bool:
        return id in self.index

    def __len__(self) -> int:
        return len(self.index)

    def __repr__(self) -> str:
        return f"RedisDeduplicator({self.url or self.index!r}, policy={self.policy!r})"
