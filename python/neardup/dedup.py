"""Two-stage near-duplicate detection: SimHash finds candidates, an exact similarity decides.

Seed 003's point 4: at Hamming distance <= 3 a 64-bit SimHash finds only near-exact copies, yet
short near-copies sit ~10 bits apart and a radius of 10 brings junk on long text. So the
fingerprint index is only the candidate stage, with a radius wide enough for high recall, and a
verifier (default: Jaccard of character 5-grams of the normalised text, the usual definition of a
near-duplicate) keeps the candidates whose similarity is >= the threshold.

- :class:`Policy`: the settings of both stages (length-aware radius, verifier, threshold,
  fingerprint configuration). ``Policy.default()`` is the winner of ``benches/quality.py``; the
  Python API, the service and ``neardup dedup`` all use it.
- :class:`Deduplicator`: online use (check / add / check_and_add, thread-safe, optionally durable
  with :meth:`Deduplicator.open`).
- :class:`neardup.corpus.CorpusDeduper`: the batch engine behind ``neardup dedup``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import (
    Any,
    Protocol,
    runtime_checkable,
)

import numpy as np
import numpy.typing as npt

from neardup._closing import Closing
from neardup._core import CorruptIndexError, Fingerprinter, Index
from neardup.htmltext import looks_like_html, main_text
from neardup.textstore import Id, MemoryTextStore, SqliteTextStore, TextStore, check_id
from neardup.verify import (
    VERIFIERS,
    cosine,
    jaccard_sketch,
    levenshtein,
    normalise,
    sketch,
)

__all__ = [
    "DedupBackend",
    "Deduplicator",
    "Match",
    "Policy",
]


@dataclass(frozen=True)
class Match:
    """A stored text found near the query.

    ``distance`` is the Hamming distance of the 64-bit fingerprints; ``similarity`` the verifier's
    score in [0, 1] (``None`` when the policy has no verifier).
    """

    id: Id
    distance: int
    similarity: float | None

    def to_dict(self) -> dict[str, Any]:
        """``{"id", "distance", "similarity"}`` (JSON-serialisable)."""
        return {"id": self.id, "distance": self.distance, "similarity": self.similarity}


_POLICY_VERIFIERS = (*VERIFIERS, "none")


@dataclass(frozen=True)
class Policy:
    """Settings of the candidate and verification stages.

    A text is *short* when its normalised length is <= ``short_chars``; its candidates are the
    stored texts whose fingerprint is within ``k_short`` bits (``k_long`` for long texts). Each
    candidate is then scored by ``verifier`` and kept when the score is >= ``threshold``.
    ``verifier="none"`` keeps every candidate (classic SimHash at radius k).

    ``fingerprint`` is the :class:`neardup.Fingerprinter` configuration; ``shingle`` the n-gram
    width of the Jaccard verifier. ``html``: read texts as HTML pages and keep their main visible
    text (``"auto"``: when a text starts like an HTML document). Both stages see
    :meth:`prepare` of each text. Serialise with :meth:`to_dict` / :meth:`from_dict`.
    """

    # Defaults measured by benches/quality.py (docs/quality.md): with the "default" fingerprint
    # preset, radius 11 finds >= 99.5 % of the 5-gram-Jaccard >= 0.8 pairs of long texts and
    # radius 13 >= 99.8 % of those of short (<= 140 chars) Chinese texts, whose few shingles
    # make the fingerprints noisier; the verifier removes what the wider radius lets in.
    k_short: int = 13
    k_long: int = 11
    short_chars: int = 200
    verifier: str = "jaccard"
    threshold: float = 0.8
    shingle: int = 5
    fingerprint: Mapping[str, Any] = field(default_factory=lambda: {"preset": "default"})
    html: bool | str = "auto"

    def __post_init__(self) -> None:
        for name in ("k_short", "k_long"):
            k = getattr(self, name)
            if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 64:
                raise ValueError(f"{name} must be an int in 0..64, got {k!r}")
        if isinstance(self.short_chars, bool) or not isinstance(self.short_chars, int):
            raise TypeError(f"short_chars must be int, got {type(self.short_chars).__name__}")
        if self.short_chars < 0:
            raise ValueError(f"short_chars must be >= 0, got {self.short_chars}")
        if self.verifier not in _POLICY_VERIFIERS:
            raise ValueError(
                f"verifier must be one of {', '.join(_POLICY_VERIFIERS)}; got {self.verifier!r}"
            )
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 <= t <= 1.0:
            raise ValueError(f"threshold must be a number in [0, 1], got {t!r}")
        s = self.shingle
        if isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= 64:
            raise ValueError(f"shingle must be an int in 1..64, got {s!r}")
        if not isinstance(self.fingerprint, Mapping):
            raise TypeError(
                f"fingerprint must be a dict of Fingerprinter settings, "
                f"got {type(self.fingerprint).__name__}"
            )
        if self.html not in (True, False, "auto"):
            raise ValueError(f"html must be True, False or 'auto', got {self.html!r}")
        object.__setattr__(self, "threshold", float(t))
        object.__setattr__(self, "fingerprint", dict(self.fingerprint))

    @classmethod
    def default(cls) -> Policy:
        """The winner of the quality benchmark (docs/quality.md)."""
        return cls()

    def is_html(self, text: str) -> bool:
        """Whether ``text`` is read as an HTML page under this policy."""
        return self.html is True or (self.html == "auto" and looks_like_html(text))

    def prepare(self, text: str) -> str:
        """The text both stages see: the main visible text of an HTML page (see
        :func:`neardup.htmltext.main_text`), then :func:`neardup.verify.normalise`."""
        check_text(text)
        if self.is_html(text):
            text = main_text(text)
        return normalise(text)

    def fingerprint_many(
        self, fingerprinter: Fingerprinter, texts: Sequence[str]
    ) -> npt.NDArray[np.uint64]:
        """Fingerprints of ``texts`` exactly as the deduplicators compute them."""
        return np.asarray(
            fingerprinter.fingerprint_many([self.prepare(t) for t in texts]), dtype=np.uint64
        )

    @property
    def k_max(self) -> int:
        """The widest candidate radius of the policy."""
        return max(self.k_short, self.k_long)

    def radius(self, length: int) -> int:
        """The candidate radius for a normalised text of ``length`` characters."""
        return self.k_short if length <= self.short_chars else self.k_long

    def replace(self, **changes: Any) -> Policy:
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict; :meth:`from_dict` rebuilds the policy."""
        d = dataclasses.asdict(self)
        d["fingerprint"] = dict(self.fingerprint)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Policy:
        """Rebuild a policy from :meth:`to_dict` output; missing keys take the defaults."""
        if not isinstance(d, Mapping):
            raise TypeError(f"policy must be a dict, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(
                f"unknown policy setting(s) {', '.join(map(repr, unknown))}; "
                f"valid: {', '.join(sorted(names))}"
            )
        return cls(**dict(d))

    def make_fingerprinter(self) -> Fingerprinter:
        """A :class:`neardup.Fingerprinter` built from ``self.fingerprint``."""
        # Fingerprinter(preset, **options) takes a partial setting (a preset plus overrides) as
        # well as a full ``Fingerprinter.config`` dict (every field is also an option).
        return Fingerprinter(**dict(self.fingerprint))


def _fingerprinter_config(fp: Fingerprinter) -> dict[str, Any] | None:
    cfg = getattr(fp, "config", None)
    return dict(cfg) if isinstance(cfg, Mapping) else None


_SYNCS = ("full", "normal", "off")
INDEX_SEQ = "index_seq"  # meta: the last text-store row the synced index covers

_logger = logging.getLogger("neardup.dedup")


def _load_policy(root: str, policy: Policy | None) -> Policy:
    # Saved in root/policy.json on first open, reused (and compared with ``policy``) after.
    policy_file = os.path.join(root, "policy.json")
    if os.path.exists(policy_file):
        with open(policy_file, encoding="utf-8") as f:
            saved = Policy.from_dict(json.load(f))
        if policy is not None and policy != saved:
            raise ValueError(
                f"policy differs from the one stored in {policy_file!r}; "
                "open without policy= or use a new path"
            )
        return saved
    policy = policy if policy is not None else Policy.default()
    tmp = policy_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(policy.to_dict(), f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, policy_file)
    return policy


def _open_index(root: str, policy: Policy) -> Index:
    path = os.path.join(root, "index")
    config = json.dumps(policy.fingerprint, sort_keys=True)
    try:
        return Index.open(path, k=policy.k_max, sync="never", fingerprint_config=config)
    except CorruptIndexError as e:
        # The text store holds every document and its fingerprint: rebuild rather than refuse.
        aside = f"{path}.corrupt-{int(time.time())}"
        _logger.warning(
            "index %s is damaged (%s); moved to %s, rebuilding from the texts", path, e, aside
        )
        os.replace(path, aside)
        return Index.open(path, k=policy.k_max, sync="never", fingerprint_config=config)


@runtime_checkable
class DedupBackend(Protocol):
    """What the service needs from a deduplicator (in-process, durable, or over Redis)."""

    def check(self, text: str, k: int | None = None) -> list[Match]:
        """Stored near-duplicates of ``text``, best first."""
        ...

    def add(self, id: Id, text: str, timestamp: float | None = None) -> int:
        """Store ``text`` under ``id`` (replacing it); return its fingerprint."""
        ...

    def check_and_add(
        self, id: Id, text: str, timestamp: float | None = None
    ) -> tuple[bool, list[Match]]:
        """Atomically: add ``text`` unless it has near-duplicates; ``(added, matches)``."""
        ...

    def check_many(self, texts: Sequence[str], k: int | None = None) -> list[list[Match]]:
        """:meth:`check` for each text."""
        ...

    def add_many(
        self,
        ids: Sequence[Id],
        texts: Sequence[str],
        timestamps: Sequence[float | None] | None = None,
    ) -> list[int]:
        """:meth:`add` for each text, in order."""
        ...

    def check_and_add_many(
        self,
        ids: Sequence[Id],
        texts: Sequence[str],
        timestamps: Sequence[float | None] | None = None,
    ) -> list[tuple[bool, list[Match]]]:
        """:meth:`check_and_add` for each text, in order (later ones see earlier adds)."""
        ...

    def remove(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown."""
        ...

    def get(self, id: Id) -> str:
        """The stored text of ``id``; ``KeyError`` if unknown."""
        ...

    def expire(self, before: float) -> int:
        """Forget every text added with a timestamp < ``before``; return how many."""
        ...

    def stats(self) -> dict[str, Any]:
        """Counters and settings (JSON-serialisable)."""
        ...

    def close(self) -> None:
        """Flush and release resources."""
        ...

    def __contains__(self, id: object) -> bool: ...

    def __len__(self) -> int: ...


def _match_order(m: Match) -> tuple[float, int]:
    # Best first: highest similarity, then smallest distance.
    return (-(m.similarity if m.similarity is not None else 1.0), m.distance)


def check_text(text: object, name: str = "text") -> str:
    """``text`` when it is a ``str``; a :class:`TypeError` naming ``name`` otherwise."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be str, got {type(text).__name__}")
    return text


def _check_k(k: int | None) -> int | None:
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 64:
        raise ValueError(f"k must be an int in 0..64 or None, got {k!r}")
    return k


def check_texts(texts: object) -> None:
    """Refuse a single ``str`` where a sequence of texts is expected (it would be taken for one
    text per character)."""
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of str, not a single str")


def check_batch(
    ids: Sequence[Id], texts: Sequence[str], timestamps: Sequence[float | None] | None
) -> Sequence[float | None]:
    """Check the shapes of a batch call (``add_many``, ``check_and_add_many``): ``texts`` a
    sequence, as many ids and timestamps as texts. Returns the timestamps (``None`` each when
    not given). Shared by :class:`Deduplicator`, the Redis backend and :class:`neardup.Client`."""
    check_texts(texts)
    if len(ids) != len(texts):
        raise ValueError(f"ids has {len(ids)} items but texts has {len(texts)}")
    if timestamps is None:
        return [None] * len(texts)
    if len(timestamps) != len(texts):
        raise ValueError(f"timestamps has {len(timestamps)} items but texts has {len(texts)}")
    return timestamps


class Deduplicator(Closing):
    """Fingerprinter + Index + verifier over stored texts: online near-duplicate detection.

    Memory: the index (see :class:`neardup.Index`), the texts when the store is in memory, and
    up to :attr:`sketch_cache` Jaccard sketches of stored texts (4 bytes per character each).

    ``check(text)`` returns the stored texts that are near-duplicates of ``text`` (candidates
    within the policy's Hamming radius whose verifier score is >= the threshold), best first.
    ``check_and_add`` is atomic: of many near-copies sent at once from many threads exactly one
    is added. All methods are thread-safe.

    ``fingerprinter``, ``index`` and ``store`` default to ones built from ``policy``
    (:meth:`Policy.default` when ``None``), an in-memory :class:`neardup.Index` and a
    :class:`neardup.textstore.MemoryTextStore`.
    """

    def __init__(
        self,
        fingerprinter: Fingerprinter | None = None,
        *,
        policy: Policy | None = None,
        index: Index | None = None,
        store: TextStore | None = None,
    ) -> None:
        if policy is None:
            policy = Policy.default()
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a neardup.dedup.Policy, got {type(policy).__name__}")
        if fingerprinter is None:
            fingerprinter = policy.make_fingerprinter()
        else:
            cfg = _fingerprinter_config(fingerprinter)
            if cfg is not None:
                policy = policy.replace(fingerprint=cfg)
        self.policy = policy
        self.fingerprinter = fingerprinter
        self.index = index if index is not None else Index(k=policy.k_max)
        self.store: TextStore = store if store is not None else MemoryTextStore()
        self.path: str | None = None
        # Writes (and whatever must see a stable store) hold _lock; reads only take the small
        # _cache_lock around the sketch cache and the counters (the index is thread-safe and the
        # text store reads on a connection of their own).
        self._lock = threading.RLock()
        self._cache_lock = threading.Lock()
        # Jaccard sketches of stored texts, most recently used last; at most SKETCH_CACHE of
        # them (4 bytes per shingle each): a miss re-reads the text from the store.
        self._sketches: OrderedDict[Id, Any] = OrderedDict()
        self._epoch = 0  # bumped when texts are replaced or removed (see _sketch_of)
        self._retention: float | None = None
        self._last_expire = 0.0
        self._counters = {"checks": 0, "adds": 0, "added": 0, "candidates": 0, "matches": 0}
        self._closed = False

    #: Most sketches of stored texts kept in memory (least recently used ones are dropped).
    sketch_cache: int = 200_000

    #: Seconds between syncs of the index log of a directory opened with :meth:`open` (bounds
    #: what a reopen after a power cut replays; each sync holds the index for one fsync).
    index_flush_interval: float = 5.0

    _log = False  # opened with Deduplicator.open: the text store is the durable log
    _sync = "full"
    _flushed_seq: int | None = None  # index synced through this text-store row; not recorded
    _last_flush = 0.0

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        policy: Policy | None = None,
        retention: float | None = None,
        sync: str = "full",
    ) -> Deduplicator:
        """A durable deduplicator under directory ``path`` (created if missing).

        Texts and their fingerprints go to ``path/texts.sqlite``, the one durable log: each write
        call is one SQLite transaction (``sync="full"``: fsynced, so an add that has returned
        survives ``kill -9`` and power loss; ``"normal"``: survives a killed process, a power cut
        may lose the last adds; ``"off"``: no fsync). The index under ``path/index`` is synced
        every :attr:`index_flush_interval` seconds (and by :meth:`flush` and :meth:`close`) and
        caught up from the texts on open: whatever a power cut kept out of it is added again
        with its stored fingerprint. An index that cannot be read is moved aside and rebuilt
        from the texts. Directories written by earlier versions open as they are. The policy
        is saved in ``path/policy.json`` on first open and reused afterwards; passing a different
        one raises ``ValueError``. ``retention`` (seconds): texts older than that are expired
        automatically as new ones arrive.
        """
        if sync not in _SYNCS:
            raise ValueError(f"sync must be one of {', '.join(_SYNCS)}; got {sync!r}")
        if retention is not None and (
            isinstance(retention, bool) or not isinstance(retention, (int, float)) or retention <= 0
        ):
            raise ValueError(f"retention must be a positive number of seconds, got {retention!r}")
        root = os.fspath(path)
        os.makedirs(root, exist_ok=True)
        policy = _load_policy(root, policy)
        store = SqliteTextStore(
            os.path.join(root, "texts.sqlite"), sync=sync, background_checkpoint=True
        )
        try:
            index = _open_index(root, policy)
        except BaseException:
            store.close()
            raise
        d = cls(policy=policy, index=index, store=store)
        d.path = root
        d._log = True
        d._sync = sync
        d._retention = float(retention) if retention is not None else None
        try:
            replayed = d._catch_up()
        except BaseException:
            d.close()
            raise
        if replayed:
            _logger.info("caught the index up with %d stored text(s)", replayed)
        return d

    # -- the durable log (Deduplicator.open) --------------------------------------------------
    #
    # A directory opened with Deduplicator.open makes a write call durable with one fsync: the
    # text store keeps each document's fingerprint with its text, so it alone can rebuild what
    # the index holds.
    #
    # - each write call stores its texts *and fingerprints* in one SQLite transaction, then adds
    #   them to the index, whose log is written to the OS but not synced;
    # - every index_flush_interval seconds the writer syncs the index log (one fsync) and
    #   records, in the next text-store transaction, the last text-store sequence number the
    #   synced index covers (meta "index_seq");
    # - on open, the rows written after that number (the only ones the index may have lost in a
    #   power cut) are added to the index again with their stored fingerprints: missing ids come
    #   back, replaced ids get their newer fingerprint;
    # - removals sync the index at once with sync="full" (a removed id must not come back); an
    #   expired entry that a power cut brings back is dropped by the next retention sweep, and
    #   checks skip an index entry whose text is gone.
    #
    # Directories written before this scheme (rows without fingerprints, no index_seq, an index
    # synced on every write) are read as they are: their rows are fingerprinted once on open.

    def _log_store(self) -> SqliteTextStore:
        store = self.store
        assert isinstance(store, SqliteTextStore)
        return store

    def _flush_index(self) -> None:
        # Called with _lock held (or before the deduplicator is shared): every row written so
        # far is in the index; after the sync they survive a power cut there too.
        self.index.flush()
        self._flushed_seq = self._log_store().last_seq
        self._last_flush = time.monotonic()

    def _catch_up(self) -> int:
        """Add to the index every row written after the index's last recorded sync (with its
        stored fingerprint, or a new one for rows written without); returns how many."""
        store = self._log_store()
        since = store.get_meta(INDEX_SEQ)
        legacy = since is None  # written before the text store kept the fingerprints
        if since is None or len(self.index) == 0:
            since = 0
        done = 0
        for rows in store.changes_since(since):
            ids = [r[0] for r in rows]
            fps: list[int | None] = [r[1] for r in rows]
            missing = [j for j, fp in enumerate(fps) if fp is None]
            todo = missing
            if legacy:
                # Such a store's index was synced on every write: take its fingerprints where
                # it has the id.
                todo = []
                for j in missing:
                    try:
                        fps[j] = int(self.index.get(ids[j])[0])
                    except KeyError:
                        todo.append(j)
            if todo:
                new = self.fingerprinter.fingerprint_many(
                    [self.policy.prepare(rows[j][3] or "") for j in todo]
                ).tolist()
                for j, fp in zip(todo, new):
                    fps[j] = int(fp)
            if missing:  # kept in the text store from now on
                store.set_fingerprints([(ids[j], int(fps[j] or 0)) for j in missing])
            self.index.add_many(
                ids,
                np.asarray(fps, np.uint64),
                np.asarray([r[2] for r in rows], np.float64),
            )
            done += len(rows)
        self._flush_index()
        store.set_meta(INDEX_SEQ, store.last_seq)
        self._flushed_seq = None
        return done

    def flush(self) -> None:
        """Sync the index (and, for a directory opened with :meth:`open`, record that it covers
        every stored text, so a reopen replays nothing)."""
        with self._lock:
            self._ensure_open()
            if self._log:
                self._flush_index()
                store = self._log_store()
                store.set_meta(INDEX_SEQ, store.last_seq)
                self._flushed_seq = None
            else:
                self.index.flush()

    # -- core operations ----------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise ValueError("deduplicator is closed")

    def _sketch_of(self, id: Id) -> Any:
        with self._cache_lock:
            sk = self._sketches.get(id)
            if sk is not None:
                self._sketches.move_to_end(id)
                return sk
            epoch = self._epoch
        sk = sketch(self.policy.prepare(self.store.get(id)), self.policy.shingle).hashes
        with self._cache_lock:
            # Not cached when a write replaced or removed texts meanwhile (it may be this one's
            # old text: a reader does not hold the writers' lock).
            if epoch == self._epoch:
                self._sketches[id] = sk
                while len(self._sketches) > self.sketch_cache:
                    self._sketches.popitem(last=False)
        return sk

    def _forget_sketches(self, ids: Sequence[Id]) -> None:
        with self._cache_lock:
            self._epoch += 1
            for i in ids:
                self._sketches.pop(i, None)

    def _count(self, checks: int, candidates: int, matches: int) -> None:
        with self._cache_lock:
            c = self._counters
            c["checks"] += checks
            c["candidates"] += candidates
            c["matches"] += matches

    def _score(self, norm: str, query_sketch: Any, id: Id) -> float | None:
        kind = self.policy.verifier
        if kind == "none":
            return None
        if kind == "jaccard":
            return jaccard_sketch(query_sketch, self._sketch_of(id))
        other = self.policy.prepare(self.store.get(id))
        return levenshtein(norm, other) if kind == "levenshtein" else cosine(norm, other)

    def _verify(
        self, norm: str, cands: Sequence[tuple[Id, int]], gone: list[Id] | None
    ) -> list[Match]:
        """The candidates whose verifier score reaches the threshold (unsorted). A candidate
        whose text is gone (a crash between the two deletes of a removal) is skipped and, when
        ``gone`` is a list, appended to it so that a writer can drop it from the index."""
        qs = sketch(norm, self.policy.shingle).hashes if self.policy.verifier == "jaccard" else None
        out: list[Match] = []
        for cid, dist in cands:
            try:
                sim = self._score(norm, qs, cid)
            except KeyError:
                if gone is not None:
                    gone.append(cid)
                continue
            if sim is None or sim >= self.policy.threshold:
                out.append(Match(cid, int(dist), sim))
        return out

    def _drop_gone(self, gone: list[Id]) -> None:
        # Called with _lock held: index entries whose text is gone.
        for cid in gone:
            if cid not in self.store:
                try:
                    self.index.remove(cid)
                except KeyError:
                    pass

    def _query_many(self, fps: Sequence[int], radii: Sequence[int]) -> list[list[tuple[Id, int]]]:
        """``index.query(fps[i], radii[i])`` for every i, one core call per distinct radius."""
        out: list[list[tuple[Id, int]]] = [[] for _ in fps]
        by_radius: dict[int, list[int]] = {}
        for i, r in enumerate(radii):
            by_radius.setdefault(r, []).append(i)
        for r, rows in by_radius.items():
            found = self.index.query_many(np.asarray([fps[i] for i in rows], np.uint64), r)
            for i, cands in zip(rows, found):
                out[i] = cands
        return out

    def _check_norm(self, norm: str, fp: int, k: int | None) -> list[Match]:
        radius = self.policy.radius(len(norm)) if k is None else k
        cands = self.index.query(fp, radius)
        out = self._verify(norm, cands, None) if cands else []
        out.sort(key=_match_order)
        self._count(1, len(cands), len(out))
        return out

    def check(self, text: str, k: int | None = None) -> list[Match]:
        """Stored near-duplicates of ``text``, best first (highest similarity, then distance).

        ``k`` overrides the policy's length-aware candidate radius. A check does not wait for
        writes: it sees the store as of some moment during the call.
        """
        norm = self.policy.prepare(check_text(text))
        k = _check_k(k)
        fp = self.fingerprinter.fingerprint(norm)
        self._ensure_open()
        return self._check_norm(norm, fp, k)

    def check_fingerprint(
        self, fingerprint: int | np.integer[Any], k: int | None = None
    ) -> list[Match]:
        """Stored items whose fingerprint is within ``k`` bits of ``fingerprint`` (default: the
        policy's widest radius), nearest first. There is no text, so nothing is verified:
        ``similarity`` is None."""
        if isinstance(fingerprint, bool) or not isinstance(fingerprint, (int, np.integer)):
            raise TypeError(f"fingerprint must be int, got {type(fingerprint).__name__}")
        fp = int(fingerprint)
        if not 0 <= fp < 2**64:
            raise ValueError(f"fingerprint must be an unsigned 64-bit int, got {fp}")
        k = _check_k(k)
        self._ensure_open()
        cands = self.index.query(fp, self.policy.k_max if k is None else k)
        self._count(1, len(cands), len(cands))
        return [Match(cid, int(dist), None) for cid, dist in cands]

    def _maybe_expire(self) -> None:
        # Retention is applied at most once a second, so that it costs nothing per add.
        if self._retention is None:
            return
        now = time.time()
        if now - self._last_expire >= 1.0:
            self._last_expire = now
            self.expire(now - self._retention)

    def add(self, id: Id, text: str, timestamp: float | None = None) -> int:
        """Store ``text`` under ``id`` (replacing any text of that id); return its fingerprint."""
        return self.add_many([id], [text], None if timestamp is None else [timestamp])[0]

    def check_and_add(
        self, id: Id, text: str, timestamp: float | None = None
    ) -> tuple[bool, list[Match]]:
        """Add ``text`` unless it has stored near-duplicates, atomically.

        Returns ``(added, matches)``: ``added`` is True when there were no matches. The check and
        the add happen under one lock, so of near-copies sent concurrently exactly one is added.
        """
        return self.check_and_add_many([id], [text], None if timestamp is None else [timestamp])[0]

    def _prepare(self, texts: Sequence[str]) -> tuple[list[str], list[int]]:
        check_texts(texts)
        norms = [self.policy.prepare(check_text(t, "texts[]")) for t in texts]
        fps = self.fingerprinter.fingerprint_many(norms).tolist() if norms else []
        return norms, fps

    def check_many(self, texts: Sequence[str], k: int | None = None) -> list[list[Match]]:
        """:meth:`check` for each text (fingerprints and index queries in one batch each)."""
        k = _check_k(k)
        norms, fps = self._prepare(texts)
        self._ensure_open()
        radii = [self.policy.radius(len(n)) if k is None else k for n in norms]
        found = self._query_many(fps, radii)
        out: list[list[Match]] = []
        for n, cands in zip(norms, found):
            ms = self._verify(n, cands, None) if cands else []
            ms.sort(key=_match_order)
            out.append(ms)
        self._count(len(norms), sum(map(len, found)), sum(map(len, out)))
        return out

    def add_many(
        self,
        ids: Sequence[Id],
        texts: Sequence[str],
        timestamps: Sequence[float | None] | None = None,
    ) -> list[int]:
        """:meth:`add` for each text, in order; returns the fingerprints."""
        tss = check_batch(ids, texts, timestamps)
        for i in ids:
            check_id(i)
        norms, fps = self._prepare(texts)
        with self._lock:
            self._ensure_open()
            self._add_batch(list(ids), list(texts), fps, tss)
            self._counters["adds"] += len(fps)
        return fps

    def _add_batch(
        self,
        ids: list[Id],
        texts: list[str],
        fps: list[int],
        tss: Sequence[float | None],
    ) -> None:
        """Store a batch (with _lock held): texts first in one store transaction (one fsync),
        then one index call (one write-ahead-log record). Sketches are made when a later check
        needs them, not here."""
        if not ids:
            return
        now = time.time()
        stamps = [now if ts is None else float(ts) for ts in tss]
        rows = list(zip(ids, texts, stamps))
        if self._log:
            # The fingerprints go with the texts (the log the index is caught up from), with the
            # index's last sync point when there is a new one to record.
            meta = None if self._flushed_seq is None else {INDEX_SEQ: self._flushed_seq}
            self._log_store().put_many(rows, fps, meta=meta)
            if meta is not None:
                self._flushed_seq = None
        else:
            put_many = getattr(self.store, "put_many", None)
            if put_many is not None:
                put_many(rows)
            else:
                for i, t, ts in rows:
                    self.store.put(i, t, ts)
        self._forget_sketches(ids)
        self.index.add_many(ids, np.asarray(fps, np.uint64), np.asarray(stamps, np.float64))
        self._counters["added"] += len(ids)
        if self._log and time.monotonic() - self._last_flush >= self.index_flush_interval:
            self._flush_index()
        self._maybe_expire()

    def _batch_pairs(self, fps: list[int], radii: list[int]) -> dict[int, list[tuple[int, int]]]:
        """For each row i of the batch, its earlier rows j < i within ``radii[i]`` bits."""
        out: dict[int, list[tuple[int, int]]] = {}
        if len(fps) < 2:
            return out
        k = max(radii)
        scratch = Index(k=k)
        scratch.add_many(np.arange(len(fps), dtype=np.int64), np.asarray(fps, np.uint64))
        a, b, dist = (np.asarray(x, np.int64) for x in scratch.near_pairs(k))
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        for j, i, d in zip(lo.tolist(), hi.tolist(), dist.tolist()):
            if d <= radii[i]:
                out.setdefault(i, []).append((j, d))
        return out

    def check_and_add_many(
        self,
        ids: Sequence[Id],
        texts: Sequence[str],
        timestamps: Sequence[float | None] | None = None,
    ) -> list[tuple[bool, list[Match]]]:
        """:meth:`check_and_add` for each text, in order: a text is checked against the stored
        ones and the earlier texts of the batch that were added."""
        tss = check_batch(ids, texts, timestamps)
        for i in ids:
            check_id(i)
        norms, fps = self._prepare(texts)
        radii = [self.policy.radius(len(n)) for n in norms]
        # In-batch candidate pairs depend only on the batch: found before taking the lock.
        earlier = self._batch_pairs(fps, radii)
        jaccard = self.policy.verifier == "jaccard"
        sketches: dict[int, Any] = {}

        def sketch_of_row(r: int) -> Any:
            sk = sketches.get(r)
            if sk is None:
                sk = sketches[r] = sketch(norms[r], self.policy.shingle).hashes
            return sk

        out: list[tuple[bool, list[Match]]] = []
        added = [False] * len(norms)
        gone: list[Id] = []
        with self._lock:
            self._ensure_open()
            # One core query per radius for the whole batch (the GIL is released in the core);
            # the texts to add are written together at the end (one fsync for the batch).
            stored = self._query_many(fps, radii)
            n_cands = n_matches = 0
            for r, n in enumerate(norms):
                cands = stored[r]
                n_cands += len(cands)
                matches = self._verify(n, cands, gone) if cands else []
                for j, dist in earlier.get(r, ()):
                    if not added[j]:
                        continue
                    if jaccard:
                        sim: float | None = jaccard_sketch(sketch_of_row(r), sketch_of_row(j))
                    else:
                        sim = self._score_pair(n, None, norms[j], None)
                    if sim is None or sim >= self.policy.threshold:
                        matches.append(Match(ids[j], dist, sim))
                if matches:
                    matches.sort(key=_match_order)
                    n_matches += len(matches)
                    out.append((False, matches))
                    continue
                added[r] = True
                out.append((True, []))
            if gone:
                self._drop_gone(gone)
            rows = [r for r in range(len(norms)) if added[r]]
            self._add_batch(
                [ids[r] for r in rows],
                [texts[r] for r in rows],
                [fps[r] for r in rows],
                [tss[r] for r in rows],
            )
            self._counters["adds"] += len(rows)
            self._count(len(norms), n_cands, n_matches)
        return out

    def _score_pair(self, norm: str, qs: Any, other_norm: str, other_sketch: Any) -> float | None:
        kind = self.policy.verifier
        if kind == "none":
            return None
        if kind == "jaccard":
            return jaccard_sketch(qs, other_sketch)
        return levenshtein(norm, other_norm) if kind == "levenshtein" else cosine(norm, other_norm)

    def remove(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown."""
        with self._lock:
            self._ensure_open()
            # Text first: an index entry without text is ignored by check (dropped by the next
            # check_and_add that finds it).
            self.store.delete(id)
            self._forget_sketches([id])
            try:
                self.index.remove(id)
            except KeyError:
                pass
            if self._log and self._sync == "full":
                self.index.flush()  # a removed id must not come back after a power cut

    def get(self, id: Id) -> str:
        """The stored text of ``id``; ``KeyError`` if unknown."""
        self._ensure_open()
        return self.store.get(id)

    def expire(self, before: float) -> int:
        """Forget every text added with a timestamp < ``before``; return how many."""
        if isinstance(before, bool) or not isinstance(before, (int, float)):
            raise TypeError(f"before must be float seconds, got {type(before).__name__}")
        with self._lock:
            self._ensure_open()
            gone = self.store.expire(float(before))
            self._forget_sketches(gone)
            self.index.expire(float(before))
            for i in gone:  # ids whose index timestamp differs from the store's (replaced ids)
                if i in self.index:
                    self.index.remove(i)
            return len(gone)

    def stats(self) -> dict[str, Any]:
        """Counters since construction, the number of stored texts and the policy. For a
        directory opened with :meth:`open` the count is read from a snapshot of the text store
        without taking the writers' lock (polling stats does not stall writes)."""
        with contextlib.nullcontext() if self._log else self._lock:
            self._ensure_open()
            with self._cache_lock:
                counters = dict(self._counters)
            return {
                "documents": len(self.store),
                "indexed": len(self.index),
                **counters,
                "path": self.path,
                "retention": self._retention,
                "policy": self.policy.to_dict(),
            }

    def close(self) -> None:
        """Flush and close the index and the text store (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._log:
                # A snapshot of everything, synced; then record that it covers every row.
                self.index.close()
                store = self._log_store()
                store.set_meta(INDEX_SEQ, store.last_seq)
                store.close()
                return
            for obj in (self.index, self.store):
                closer = getattr(obj, "close", None)
                if closer is not None:
                    closer()

    def __contains__(self, id: object) -> bool:
        return id in self.store

    def __len__(self) -> int:
        return len(self.store)

    def __repr__(self) -> str:
        where = f"path={self.path!r}" if self.path else "in memory"
        return f"Deduplicator({where}, documents={len(self)}, policy={self.policy!r})"
