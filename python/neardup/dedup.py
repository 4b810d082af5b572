"""Two-stage near-duplicate detection: SimHash finds candidates, an exact similarity decides.

Seed 003's point 4: at Hamming distance <= 3 a 64-bit SimHash finds only near-exact copies, yet
short near-copies sit ~10 bits apart and a radius of 10 brings junk on long text. So the
fingerprint index is only the candidate stage, with a radius wide enough for high recall, and a
verifier (default: Jaccard of character 5-grams of the normalised text, the usual definition of a
near-duplicate) keeps the candidates whose similarity is >= the threshold.

- :class:`Policy` (:mod:`neardup.policy`): the settings of both stages. ``Policy.default()`` is
  the winner of ``benches/quality.py``; the Python API, the service and ``neardup dedup`` use it.
- :class:`Deduplicator` (here): online use (check / add / check_and_add, thread-safe, optionally
  durable with :meth:`Deduplicator.open`, whose one-log store is :mod:`neardup.durable`).
- :class:`DedupBackend`: what the service needs from a deduplicator (this one or Redis's).
- :class:`neardup.corpus.CorpusDeduper`: the batch engine behind ``neardup dedup``.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from neardup._closing import Closing
from neardup._core import (
    CorruptIndexError,
    Fingerprinter,
    IncompatibleIndexError,
    Index,
    _earlier_within,
    _sketch,
    _sketch_jaccard,
)
from neardup.durable import (
    INDEX_SEQ,
    SYNCS,
    DurableLog,
    Row,
    Staged,
    load_policy,
    open_index,
    open_texts,
    verify_texts,
)
from neardup.kept import KeptTexts, saved_engine_path
from neardup.policy import (
    Match,
    Policy,
    check_batch,
    check_fingerprinter,
    check_k,
    check_text,
    check_texts,
    fingerprinter_config,
    match_order,
)
from neardup.textstore import (
    Id,
    Ids,
    MemoryTextStore,
    SqliteTextStore,
    TextStore,
    Timestamps,
    check_id,
    check_timestamp,
)
from neardup.verify import cosine, levenshtein

__all__ = [
    "INDEX_SEQ",
    "DedupBackend",
    "Deduplicator",
    "Match",
    "Policy",
    "check_batch",
    "check_text",
    "check_texts",
    "check_writes",
]

_logger = logging.getLogger("neardup.dedup")

# Batches up to this many texts find their in-batch near pairs by comparing every pair in the
# core (microseconds); larger ones through a scratch index.
_PAIRWISE_MAX = 512
#: Stored texts put into the decision engine per call when a deduplicator is opened.
_LOAD_CHUNK = 4096
#: Seconds between retention sweeps at most (a sweep costs a store query: not one per call).
_SWEEP_EVERY = 1.0


def check_writes(
    ids: Ids,
    texts: Sequence[str],
    timestamps: Timestamps | None,
    retention: float | None,
    *,
    one: bool = False,
) -> tuple[list[Id], list[float | None]]:
    """The one check of a write call's input, before any side effect: shapes, then each
    id, text and timestamp (finite, within what the stores hold, and not older than the
    ``retention`` window). Raises ``TypeError`` / ``ValueError`` naming the argument (``id``,
    or ``ids[3]`` in a batch) and the value. Returns the ids (a numpy integer as an int: an
    int64 array or a pandas column of ids, as the index takes them) and the timestamps as
    floats (None: now). Shared by :class:`Deduplicator`, the Redis store and the client."""
    tss = check_batch(ids, texts, timestamps)
    not_before = None if retention is None else time.time() - retention
    out_ids: list[Id] = []
    out: list[float | None] = []
    for j, (i, text, ts) in enumerate(zip(ids, texts, tss)):
        at = "" if one else f"s[{j}]"
        out_ids.append(check_id(int(i) if isinstance(i, np.integer) else i, f"id{at}"))
        check_text(text, f"text{at}")
        out.append(
            None if ts is None else check_timestamp(ts, f"timestamp{at}", not_before=not_before)
        )
    return out_ids, out


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
        ids: Ids,
        texts: Sequence[str],
        timestamps: Timestamps | None = None,
    ) -> list[int]:
        """:meth:`add` for each text, in order."""
        ...

    def check_and_add_many(
        self,
        ids: Ids,
        texts: Sequence[str],
        timestamps: Timestamps | None = None,
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


class Deduplicator(Closing):
    """Fingerprinter + Index + verifier over stored texts: online near-duplicate detection.

    Memory: the index (see :class:`neardup.Index`), the texts when the store is in memory, with
    the Jaccard verifier the core's decision engine (per stored text its sketch, 4 bytes per
    character, spilled to a temporary file past 256 MB, and ~300 bytes of band keys and
    min-hash bytes: :mod:`neardup.kept`), and up to :attr:`sketch_cache` sketches for checks
    with an explicit ``k``.

    ``check(text)`` returns the stored texts that are near-duplicates of ``text``, best first:
    with the Jaccard verifier, those that pass it among the candidates of the decision that
    ``neardup dedup`` makes (MinHash bands, bounded work per text); with ``k=`` or another
    verifier, among the texts within the policy's (or ``k``'s) Hamming radius.
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
            check_fingerprinter(fingerprinter)
            cfg = fingerprinter_config(fingerprinter)
            if cfg is not None:
                policy = policy.replace(fingerprint=cfg)
        self.policy = policy
        self.fingerprinter = fingerprinter
        self.index = index if index is not None else Index(k=policy.k_max)
        self.store: TextStore = store if store is not None else MemoryTextStore()
        # a store given with texts and no index: its texts are indexed (else a check by
        # fingerprint, a radius or another verifier never found them)
        index_stored = index is None and len(self.store) > 0
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
        self._counters = {
            "checks": 0, "adds": 0, "added": 0, "candidates": 0, "matches": 0, "expired": 0,
        }  # fmt: skip
        self._closed = False
        # Opened with Deduplicator.open: the text store is the durable log (neardup.durable).
        self._log: DurableLog | None = None
        # With the Jaccard verifier the stored texts are also in the core's decision engine:
        # candidates, limits and verification of the one decision that neardup dedup makes
        # (neardup.kept; docs/quality.md, "Bounded work"). Filled from a store that has texts.
        self._kept: KeptTexts | None = None
        # (last sequence number, size) of the store when its engine was last saved or loaded
        self._saved_state: tuple[int, int] | None = None
        if policy.verifier == "jaccard":
            self._kept = self._loaded_kept(index_stored)
        elif index_stored:
            self._load_kept(None, index=True)

    def _saved_engine_path(self) -> str | None:
        """Where the decision engine's rows are saved: beside a SQLite text store's file, named
        after it (:func:`~neardup.kept.saved_engine_path`), when the fingerprinter is the
        policy's (None: not saved)."""
        if not isinstance(self.store, SqliteTextStore) or not os.path.isfile(self.store.path):
            return None
        if fingerprinter_config(self.fingerprinter) is None:
            return None
        return saved_engine_path(self.store.path)

    def _loaded_kept(self, index: bool) -> KeptTexts:
        """The decision engine over the stored texts: the saved engine (:meth:`save_engine`)
        when its rows are exactly the store's rows up to the sequence number it was saved at,
        with the rows written since prepared and sketched; else every stored text prepared and
        sketched (a line in the log says why). ``index``: the texts also go into the index, in
        the same pass."""
        path = self._saved_engine_path()
        if path is not None and os.path.exists(path) and len(self.store):
            kept = self._load_saved(path)
            if kept is not None:
                if index:
                    self._load_kept(None, index=True)
                return kept
        kept = KeptTexts(self.policy)
        if len(self.store):
            self._load_kept(kept, index=index)
        return kept

    def _load_saved(self, path: str) -> KeptTexts | None:
        assert isinstance(self.store, SqliteTextStore)
        try:
            kept, meta = KeptTexts.load(path, self.policy)
        except (CorruptIndexError, IncompatibleIndexError, OSError) as e:
            _logger.warning("%s; preparing the stored texts instead", e)
            return None
        last = meta.get("last_seq")
        if not isinstance(last, int):
            last = -1  # (matches no store: a file without it is not used)
        ids, seqs = self.store.ids_by_seq()
        upto = bisect.bisect_right(seqs, last) if last >= 0 else -1
        if upto != len(kept) or ids[:upto] != kept.ids():
            _logger.info(
                "saved engine %s does not match text store %s (written to since it was saved); "
                "preparing the stored texts instead",
                path,
                self.store.path,
            )
            return None
        if upto < len(ids):
            self._load_kept(kept, after=last)
        else:
            self._saved_state = (self.store.last_seq, len(ids))
        _logger.info(
            "loaded the engine of %d stored text(s) from %s (%d prepared since)",
            upto,
            path,
            len(ids) - upto,
        )
        return kept

    def save_engine(self, meta: dict[str, Any] | None = None) -> str | None:
        """Write the decision engine's rows beside the SQLite text store (``texts.engine``),
        so that the next deduplicator on this store loads them instead of preparing and
        sketching every stored text; returns the file's path (None: nothing to save: no
        SQLite store, another verifier, a fingerprinter not built from the policy). Done by
        :meth:`close` for a directory opened with :meth:`open`. Commits first. ``meta``: more
        (JSON) fields saved with it. A failure is logged and the file removed, never raised:
        the next open prepares the texts. Raises ``ValueError`` once closed (:meth:`close`
        saved it)."""
        self._ensure_open()
        return self._save_engine(meta)

    def _save_engine(self, meta: dict[str, Any] | None = None) -> str | None:
        path = self._saved_engine_path()
        if path is None or self._kept is None:
            return None
        assert isinstance(self.store, SqliteTextStore)
        with self._lock:
            try:
                self.commit()
                ids, _ = self.store.ids_by_seq()
                # (a store whose last sequence number and size are those saved is unchanged:
                # every put takes a new number and a removal lowers the size)
                state = (self.store.last_seq, len(ids))
                if meta is None and state == self._saved_state and os.path.exists(path):
                    return path
                self._kept.save(path, ids, {**(meta or {}), "last_seq": self.store.last_seq})
                self._saved_state = state
                return path
            except Exception as e:  # (disk full, a stored id the engine lacks: never fatal)
                _logger.warning("could not save the engine to %s: %s", path, e)
                with contextlib.suppress(OSError):
                    os.remove(path)
                return None

    def _load_kept(self, kept: KeptTexts | None, after: int = 0, *, index: bool = False) -> None:
        """Put every stored text (written after sequence number ``after``) into the decision
        engine ``kept`` (in the store's order) and, with ``index``, into the index: each text
        prepared and fingerprinted once for both."""
        items = self.store.items(after) if isinstance(self.store, SqliteTextStore) else None
        rows = iter(items if items is not None else self.store.items())
        while chunk := list(itertools.islice(rows, _LOAD_CHUNK)):
            ids = [r[0] for r in chunk]
            norms, fps = self._prepare([r[1] for r in chunk])
            if kept is not None:
                kept.commit(ids, kept.add(ids, norms, fps))
            if index:
                self.index.add_many(ids, fps, np.asarray([r[2] for r in chunk], np.float64))

    #: Most sketches of stored texts kept in memory (least recently used ones are dropped).
    sketch_cache: int = 200_000

    #: Seconds between syncs of the index log of a directory opened with :meth:`open` (bounds
    #: what a reopen after a power cut replays; each sync holds the index for one fsync).
    index_flush_interval: float = 5.0

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
        automatically: on open, and before a write is decided or a check answered, at most
        once a second (a text is no candidate more than a second after it left the window).
        With the Jaccard verifier, :meth:`close` saves the decision engine's rows in
        ``path/texts.engine`` and the next open loads them instead of preparing and sketching
        every stored text, when they are the store's rows (see :meth:`save_engine`); otherwise
        (a damaged file, a store written to through another path) the texts are prepared as
        before.

        Write calls accept ``durable=False``: the result is decided and visible at once and the
        texts are written by the next :meth:`commit` (one transaction for everything written
        meanwhile), which the caller runs, possibly on another thread, before it acknowledges
        them (see :mod:`neardup.durable`).
        """
        if sync not in SYNCS:
            raise ValueError(f"sync must be one of {', '.join(SYNCS)}; got {sync!r}")
        if retention is not None and (
            isinstance(retention, bool)
            or not isinstance(retention, (int, float))
            or not 0 < retention < math.inf
        ):
            raise ValueError(f"retention must be a positive number of seconds, got {retention!r}")
        if policy is not None and not isinstance(policy, Policy):
            raise TypeError(f"policy must be a neardup.dedup.Policy, got {type(policy).__name__}")
        root = os.fspath(path)
        os.makedirs(root, exist_ok=True)
        store = open_texts(root, sync)
        try:
            policy = load_policy(root, policy, store)
            index = open_index(root, policy)
        except BaseException:
            store.close()
            raise
        try:
            verify_texts(root, store, index)
        except BaseException:
            index.close()
            store.close()
            raise
        d = cls(policy=policy, index=index, store=store)
        d.path = root
        d._log = DurableLog(store, sync)
        d._retention = float(retention) if retention is not None else None
        try:
            replayed = d._catch_up()
        except BaseException:
            d.close()
            raise
        if replayed:
            _logger.info("caught the index up with %d stored text(s)", replayed)
        with d._lock:  # (texts that left the window while the directory was closed)
            d._sweep_if_due()
        return d

    def _catch_up(self) -> int:
        """Add to the index every stored row it may lack (see :meth:`DurableLog.catch_up`)."""
        assert self._log is not None
        return self._log.catch_up(self.index, self.fingerprinter, self.policy.prepare)

    def commit(self) -> None:
        """Make every write so far durable (see :meth:`open`: writes made with
        ``durable=False`` wait for this; one transaction for all of them). Thread-safe; may run
        while other threads write. Nothing to do for a deduplicator not opened on a directory."""
        if self._log is not None:
            self._log.commit()

    def flush(self) -> None:
        """Sync the index (and, for a directory opened with :meth:`open`, commit and record that
        the index covers every stored text, so a reopen replays nothing)."""
        with self._lock:
            self._ensure_open()
            if self._log is not None:
                self._log.mark_index_current(self.index)
            else:
                self.index.flush()

    # -- core operations ----------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise ValueError("deduplicator is closed")

    def _text_of(self, id: Id) -> str:
        # A staged text (written, not yet committed) first: the store does not have it yet, and
        # a commit puts it in the store before taking it out of the staging area.
        if self._log is not None:
            text = self._log.pending_text(id)
            if text is not None:
                return text
        return self.store.get(id)

    def _sketch_of(self, id: Id) -> Any:
        with self._cache_lock:
            sk = self._sketches.get(id)
            if sk is not None:
                self._sketches.move_to_end(id)
                return sk
            epoch = self._epoch
        sk = _sketch(self.policy.prepare(self._text_of(id)), self.policy.shingle)
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
            return _sketch_jaccard(query_sketch, self._sketch_of(id))
        other = self.policy.prepare(self._text_of(id))
        return levenshtein(norm, other) if kind == "levenshtein" else cosine(norm, other)

    def _verify(
        self, norm: str, cands: Sequence[tuple[Id, int]], gone: list[Id] | None
    ) -> list[Match]:
        """The candidates whose verifier score reaches the threshold (unsorted). A candidate
        whose text is gone (a crash between the two deletes of a removal, or a write lost before
        its commit) is skipped and, when ``gone`` is a list, appended to it so that a writer can
        drop it from the index."""
        if not norm:
            return []  # an empty text (blank, a page with no visible text) is nobody's copy
        policy = self.policy
        qs = _sketch(norm, policy.shingle) if policy.verifier == "jaccard" else None
        out: list[Match] = []
        for cid, dist in cands:
            try:
                sim = self._score(norm, qs, cid)
            except KeyError:
                if gone is not None:
                    gone.append(cid)
                continue
            if sim is None or sim >= policy.threshold:
                out.append(Match(cid, int(dist), sim))
        return out

    def _drop_gone(self, gone: list[Id]) -> None:
        # Called with _lock held: index entries whose text is gone.
        for cid in gone:
            if cid not in self:
                try:
                    self.index.remove(cid)
                except KeyError:
                    pass

    def _query_many(self, fps: Sequence[int], radii: Sequence[int]) -> list[list[tuple[Id, int]]]:
        """``index.query(fps[i], radii[i])`` for every i, one core call per distinct radius."""
        if len(fps) == 1:
            return [self.index.query(fps[0], radii[0])]
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
        if k is None and self._kept is not None:
            out = self._kept.check([norm], [fp])[0]
            self._count(1, len(out), len(out))
            return out
        radius = self.policy.radius(len(norm)) if k is None else k
        cands = self.index.query(fp, radius)
        out = self._verify(norm, cands, None) if cands else []
        out.sort(key=match_order)
        self._count(1, len(cands), len(out))
        return out

    def check(self, text: str, k: int | None = None) -> list[Match]:
        """Stored near-duplicates of ``text``, best first (highest similarity, then distance).

        ``k`` overrides the policy's length-aware candidate radius. A check does not wait for
        writes: it sees the store as of some moment during the call.
        """
        norm = self.policy.prepare(check_text(text))
        k = check_k(k)
        fp = self.fingerprinter.fingerprint(norm)
        self._ensure_open()
        self._sweep_before_reading()
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
        k = check_k(k)
        self._ensure_open()
        self._sweep_before_reading()
        cands = self.index.query(fp, self.policy.k_max if k is None else k)
        self._count(1, len(cands), len(cands))
        return [Match(cid, int(dist), None) for cid, dist in cands]

    def _maybe_expire(self, written: Sequence[float | None] = ()) -> None:
        # Retention is applied at most once a second, so that it costs nothing per call; and at
        # once when a text just ``written`` has left the window during its own call.
        if self._retention is None:
            return
        now = time.time()
        before = now - self._retention
        due = now - self._last_expire >= _SWEEP_EVERY
        if due or any(t is not None and t < before for t in written):
            self._last_expire = now
            self.expire(before)

    def add(
        self, id: Id, text: str, timestamp: float | None = None, *, durable: bool = True
    ) -> int:
        """Store ``text`` under ``id`` (replacing any text of that id); return its fingerprint.
        ``durable=False``: see :meth:`open` and :meth:`commit`."""
        ids, tss = self._check_writes([id], [text], [timestamp], one=True)
        return self._add_many(ids, [text], tss, durable)[0]

    def check_and_add(
        self, id: Id, text: str, timestamp: float | None = None, *, durable: bool = True
    ) -> tuple[bool, list[Match]]:
        """Add ``text`` unless it has stored near-duplicates, atomically.

        Returns ``(added, matches)``: ``added`` is True when there were no matches. The check and
        the add happen under one lock, so of near-copies sent concurrently exactly one is added.
        ``durable=False``: see :meth:`open` and :meth:`commit`.
        """
        ids, tss = self._check_writes([id], [text], [timestamp], one=True)
        return self._check_and_add_many(ids, [text], tss, durable)[0]

    def _prepare(self, texts: Sequence[str]) -> tuple[list[str], list[int]]:
        norms = self.policy.prepare_many(texts)
        fps = self.fingerprinter.fingerprint_many(norms).tolist() if norms else []
        return norms, fps

    def check_many(self, texts: Sequence[str], k: int | None = None) -> list[list[Match]]:
        """:meth:`check` for each text (fingerprints and index queries in one batch each)."""
        k = check_k(k)
        norms, fps = self._prepare(texts)
        self._ensure_open()
        self._sweep_before_reading()
        if k is None and self._kept is not None:
            decided = self._kept.check(norms, fps)
            self._count(len(norms), sum(map(len, decided)), sum(map(len, decided)))
            return decided
        radii = [self.policy.radius(len(n)) if k is None else k for n in norms]
        found = self._query_many(fps, radii)
        out: list[list[Match]] = []
        for n, cands in zip(norms, found):
            ms = self._verify(n, cands, None) if cands else []
            ms.sort(key=match_order)
            out.append(ms)
        self._count(len(norms), sum(map(len, found)), sum(map(len, out)))
        return out

    def add_many(
        self,
        ids: Ids,
        texts: Sequence[str],
        timestamps: Timestamps | None = None,
        *,
        durable: bool = True,
    ) -> list[int]:
        """:meth:`add` for each text, in order; returns the fingerprints. Every item is checked
        before anything is written: one bad item refuses the whole batch."""
        ids, tss = self._check_writes(ids, texts, timestamps)
        return self._add_many(ids, texts, tss, durable)

    def _check_writes(
        self,
        ids: Ids,
        texts: Sequence[str],
        timestamps: Timestamps | None,
        *,
        one: bool = False,
    ) -> tuple[list[Id], list[float | None]]:
        return check_writes(ids, texts, timestamps, self._retention, one=one)

    def _add_many(
        self, ids: Sequence[Id], texts: Sequence[str], tss: list[float | None], durable: bool
    ) -> list[int]:
        norms, fps = self._prepare(texts)
        with self._lock:
            self._ensure_open()
            self._sweep_if_due()
            kept = self._kept
            rows = kept.add(ids, norms, fps) if kept is not None else []
            try:
                self._add_batch(list(ids), list(texts), fps, tss, durable)
            except BaseException:
                if kept is not None:
                    kept.rollback(rows)
                raise
            if kept is not None:
                kept.commit(ids, rows)
            self._counters["adds"] += len(fps)
            self._sweep_if_due(tss)
        return fps

    def _add_batch(
        self,
        ids: list[Id],
        texts: list[str],
        fps: list[int],
        tss: Sequence[float | None],
        durable: bool,
    ) -> None:
        """Store a batch (with _lock held). Opened on a directory: indexed (one index call),
        staged, then, when ``durable``, committed (one store transaction, one fsync); if a step
        fails, nothing of the batch stays (see :meth:`_add_logged`). Otherwise: texts first,
        then the index. Sketches are made when a later check needs them, not here."""
        if not ids:
            return
        now = time.time()
        stamps = [now if ts is None else float(ts) for ts in tss]
        rows = list(zip(ids, texts, stamps))
        log = self._log
        if log is not None:
            self._add_logged(log, ids, rows, fps, durable)
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
        try:
            if log is not None:
                log.maybe_flush_index(self.index, self.index_flush_interval)
        except Exception:
            # The batch is written: an index sync that failed is redone by the next one (and a
            # reopen replays what it missed from the texts).
            _logger.exception("index sync after a write failed")

    def _sweep_if_due(self, written: Sequence[float | None] = ()) -> None:
        """The retention sweep when one is due (with _lock held): before a decision, so that a
        text that left the window is no candidate more than a second after it left; after a
        write, for the texts ``written`` (their timestamps) that left it during the call. A
        sweep that fails is logged and the call goes on (the next one redoes it)."""
        try:
            self._maybe_expire(written)
        except Exception:
            _logger.exception("retention sweep failed")

    def _sweep_before_reading(self) -> None:
        """:meth:`_sweep_if_due` for a check, which takes the writers' lock only then (at
        most once a second)."""
        if self._retention is not None and time.time() - self._last_expire >= _SWEEP_EVERY:
            with self._lock:
                self._ensure_open()
                self._sweep_if_due()

    def _add_logged(
        self, log: DurableLog, ids: list[Id], rows: list[Row], fps: list[int], durable: bool
    ) -> None:
        """Index, stage and (``durable``) commit a batch; on any failure take back what was
        done (the rows leave the staging area, the index entries return to the staged or
        committed state) and re-raise: a failed write leaves nothing visible and nothing for a
        later commit to write."""
        staged: list[Staged] = []
        try:
            # The index first: a row is staged (visible to readers, taken by the next commit,
            # perhaps on another thread) only once nothing of its write can fail but the commit.
            self.index.add_many(
                ids, np.asarray(fps, np.uint64), np.asarray([r[2] for r in rows], np.float64)
            )
            staged = log.stage(rows, fps)
            self._forget_sketches(ids)
            if durable:
                log.commit(own=staged)
        except BaseException:
            log.unstage(staged)
            log.restore(self.index, ids)
            self._forget_sketches(ids)
            raise

    def _batch_pairs(self, fps: list[int], radii: list[int]) -> dict[int, list[tuple[int, int]]]:
        """For each row i of the batch, its earlier rows j < i within ``radii[i]`` bits."""
        out: dict[int, list[tuple[int, int]]] = {}
        if len(fps) < 2:
            return out
        if len(fps) <= _PAIRWISE_MAX:
            for i, j, d in _earlier_within(fps, radii):
                out.setdefault(i, []).append((j, d))
            return out
        k = max(radii)
        scratch = Index(k=k)
        scratch.add_many(np.arange(len(fps), dtype=np.int64), np.asarray(fps, np.uint64))
        a, b, dist = (np.asarray(x, np.int64) for x in scratch.near_pairs(k))
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        for j, i, d in sorted(zip(lo.tolist(), hi.tolist(), dist.tolist())):
            if d <= radii[i]:
                out.setdefault(i, []).append((j, d))
        return out

    def check_and_add_many(
        self,
        ids: Ids,
        texts: Sequence[str],
        timestamps: Timestamps | None = None,
        *,
        durable: bool = True,
    ) -> list[tuple[bool, list[Match]]]:
        """:meth:`check_and_add` for each text, in order: a text is checked against the stored
        ones and the earlier texts of the batch that were added. Every item is checked before
        anything is written: one bad item refuses the whole batch. A batch whose texts replace
        stored ids (or repeat an id) is written in runs that end at such a text, made durable
        together; a write that fails (a full disk) leaves the runs before it written."""
        ids, tss = self._check_writes(ids, texts, timestamps)
        return self._check_and_add_many(ids, texts, tss, durable)

    def _check_and_add_many(
        self, ids: Sequence[Id], texts: Sequence[str], tss: list[float | None], durable: bool
    ) -> list[tuple[bool, list[Match]]]:
        # A text kept under an id that is stored (or earlier in the batch) replaces that id's
        # text, which no later text may match: the batch is decided in runs, each ending at
        # such a text and written before the next (the old text leaves with the write); the
        # runs are made durable together, by the last one's write (one fsync). A write that
        # fails leaves the runs before it written, as separate calls would.
        held = self._kept.__contains__ if self._kept is not None else self.__contains__
        runs: list[tuple[int, int]] = []
        out: list[tuple[bool, list[Match]]] = []
        with self._lock:
            start, seen = 0, set()
            for r, i in enumerate(ids):
                if i in seen or held(i):
                    runs.append((start, r + 1))
                    start = r + 1
                seen.add(i)
            if start < len(ids) or not ids:
                runs.append((start, len(ids)))
            for n, (a, b) in enumerate(runs):
                last = n == len(runs) - 1
                out += self._check_and_add_run(ids[a:b], texts[a:b], tss[a:b], durable and last)
        return out

    def _check_and_add_run(
        self, ids: Sequence[Id], texts: Sequence[str], tss: list[float | None], durable: bool
    ) -> list[tuple[bool, list[Match]]]:
        """:meth:`_check_and_add_many` of texts whose ids are neither stored nor repeated, but
        for the last."""
        norms, fps = self._prepare(texts)
        if self._kept is not None:
            return self._check_and_add_kept(self._kept, ids, texts, norms, fps, tss, durable)
        policy = self.policy
        radii = [policy.radius(len(n)) for n in norms]
        # In-batch candidate pairs depend only on the batch: found before taking the lock.
        earlier = self._batch_pairs(fps, radii)
        jaccard = policy.verifier == "jaccard"
        threshold = policy.threshold
        sketches: dict[int, Any] = {}

        def sketch_of_row(r: int) -> Any:
            sk = sketches.get(r)
            if sk is None:
                sk = sketches[r] = _sketch(norms[r], policy.shingle)
            return sk

        out: list[tuple[bool, list[Match]]] = []
        added = [False] * len(norms)
        gone: list[Id] = []
        with self._lock:
            self._ensure_open()
            self._sweep_if_due()
            # One core query per radius for the whole batch (the GIL is released in the core);
            # the texts to add are written together at the end (one fsync for the batch).
            stored = self._query_many(fps, radii)
            n_cands = n_matches = 0
            for r, n in enumerate(norms):
                cands = stored[r]
                n_cands += len(cands)
                matches = self._verify(n, cands, gone) if cands else []
                for j, dist in earlier.get(r, ()) if n else ():
                    if not added[j] or not norms[j]:
                        continue
                    if jaccard:
                        sim: float | None = _sketch_jaccard(sketch_of_row(r), sketch_of_row(j))
                    else:
                        sim = self._score_pair(n, norms[j])
                    if sim is None or sim >= threshold:
                        matches.append(Match(ids[j], dist, sim))
                if matches:
                    matches.sort(key=match_order)
                    n_matches += len(matches)
                    out.append((False, matches))
                    continue
                added[r] = True
                out.append((True, []))
            if gone:
                self._drop_gone(gone)
            rows = [r for r in range(len(norms)) if added[r]]
            self._write_added(ids, texts, fps, tss, rows, durable)
            self._counters["adds"] += len(rows)
            self._sweep_if_due([tss[r] for r in rows])
            self._count(len(norms), n_cands, n_matches)
        return out

    def _write_added(
        self,
        ids: Sequence[Id],
        texts: Sequence[str],
        fps: list[int],
        tss: list[float | None],
        added: list[int],
        durable: bool,
    ) -> None:
        """Write the items ``added`` of a check-and-add batch (with _lock held)."""
        if len(added) == len(ids):
            self._add_batch(list(ids), list(texts), fps, tss, durable)
        else:
            self._add_batch(
                [ids[r] for r in added],
                [texts[r] for r in added],
                [fps[r] for r in added],
                [tss[r] for r in added],
                durable,
            )
        if durable and not added and self._log is not None:
            # Nothing added here, but the answers may name texts of earlier writes made with
            # durable=False: they must be durable before these answers are.
            self._log.commit()

    def _check_and_add_kept(
        self,
        kept: KeptTexts,
        ids: Sequence[Id],
        texts: Sequence[str],
        norms: list[str],
        fps: list[int],
        tss: list[float | None],
        durable: bool,
    ) -> list[tuple[bool, list[Match]]]:
        """:meth:`check_and_add_many` by the decision engine: it decides the batch in order
        (a text sees the stored texts and the texts of the batch kept before it), then the
        kept texts are written; a write that fails takes them back out of the engine."""
        with self._lock:
            self._ensure_open()
            self._sweep_if_due()
            found, rows = kept.check_and_add(ids, norms, fps)
            added = [r for r, m in enumerate(found) if not m]
            try:
                self._write_added(ids, texts, fps, tss, added, durable)
            except BaseException:
                kept.rollback(rows)
                raise
            kept.commit([ids[r] for r in added], rows)
            self._counters["adds"] += len(added)
            self._sweep_if_due([tss[r] for r in added])
            n_matches = sum(map(len, found))
            self._count(len(norms), n_matches, n_matches)
        return [(not m, m) for m in found]

    def _score_pair(self, norm: str, other_norm: str) -> float | None:
        kind = self.policy.verifier
        if kind == "none":
            return None
        return levenshtein(norm, other_norm) if kind == "levenshtein" else cosine(norm, other_norm)

    def remove(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown."""
        check_id(id)
        with self._lock:
            self._ensure_open()
            if self._log is not None:
                self._log.commit()  # the store must hold what is to be deleted
            # Text first: an index entry without text is ignored by check (dropped by the next
            # check_and_add that finds it).
            self.store.delete(id)
            self._forget_sketches([id])
            if self._kept is not None:
                self._kept.forget([id])
            try:
                self.index.remove(id)
            except KeyError:
                pass
            if self._log is not None and self._log.sync == "full":
                self.index.flush()  # a removed id must not come back after a power cut

    def get(self, id: Id) -> str:
        """The stored text of ``id``; ``KeyError`` if unknown."""
        self._ensure_open()
        return self._text_of(id)

    def expire(self, before: float) -> int:
        """Forget every text added with a timestamp < ``before``; return how many."""
        if isinstance(before, bool) or not isinstance(before, (int, float)):
            raise TypeError(f"before must be float seconds, got {type(before).__name__}")
        with self._lock:
            self._ensure_open()
            if self._log is not None:
                self._log.commit()
            gone = self.store.expire(float(before))
            self._forget_sketches(gone)
            if self._kept is not None:
                self._kept.forget(gone)
            self.index.expire(float(before))
            for i in gone:  # ids whose index timestamp differs from the store's (replaced ids)
                if i in self.index:
                    self.index.remove(i)
            self._counters["expired"] += len(gone)  # (by retention too: every expiry)
            return len(gone)

    def stats(self) -> dict[str, Any]:
        """Counters since construction, the number of stored texts and the policy. For a
        directory opened with :meth:`open` the count is read from a snapshot of the text store
        without taking the writers' lock (polling stats does not stall writes)."""
        with contextlib.nullcontext() if self._log is not None else self._lock:
            self._ensure_open()
            with self._cache_lock:
                counters = dict(self._counters)
            return {
                "documents": len(self),
                "indexed": len(self.index),
                **counters,
                "path": self.path,
                "retention": self._retention,
                "policy": self.policy.to_dict(),
            }

    def close(self) -> None:
        """Commit, flush and close the index and the text store (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._log is not None:
                # The engine's rows (a reopen loads them); everything staged, then a snapshot
                # of the index, synced; then record that it covers every row.
                self._save_engine()
                self._log.close(self.index)
                return
            for obj in (self.index, self.store):
                closer = getattr(obj, "close", None)
                if closer is not None:
                    closer()

    def __contains__(self, id: object) -> bool:
        if self._log is not None:
            try:
                if self._log.pending_text(id) is not None:  # type: ignore[arg-type]
                    return True
            except TypeError:  # unhashable
                return False
        return id in self.store

    def __len__(self) -> int:
        n = len(self.store)
        if self._log is not None and self._log.pending:
            # (texts written with durable=False and not committed yet count, as `in` sees them)
            n += sum(i not in self.store for i in self._log.pending_ids())
        return n

    def __repr__(self) -> str:
        where = f"path={self.path!r}" if self.path else "in memory"
        return f"Deduplicator({where}, documents={len(self)}, policy={self.policy!r})"
