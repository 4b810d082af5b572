"""The service's embedded store: a ``Deduplicator`` whose text store is the one durable log.

``Deduplicator.open`` makes an acknowledged write durable twice: the SQLite text store commits
(an fsync with ``sync="full"``) and the index appends to its write-ahead log (a second fsync).
Here the text store keeps each document's fingerprint with its text, so it alone can rebuild
what the index holds; a write call costs one fsync:

- each write call stores its texts *and fingerprints* in one SQLite transaction (one fsync with
  ``sync="full"``), then adds them to the index, whose log is written to the OS but not synced;
- every :attr:`LogDeduplicator.index_flush_interval` seconds the writer syncs the index log
  (one fsync) and records, in the next text-store transaction, the last text-store sequence
  number the synced index covers (``meta.index_seq``);
- on open, the rows written after that number (the only ones the index may have lost in a power
  cut) are added to the index again with their stored fingerprints: missing ids come back,
  replaced ids get their newer fingerprint. An index that cannot be read at all is moved aside
  and rebuilt from the text store;
- removals sync the index at once (they are rare, and a removed id must not come back); an
  expired entry that a power cut brings back is dropped by the next retention sweep, and checks
  skip an index entry whose text is gone.

So "nothing acknowledged is ever lost" holds with one fsync per write call, and after kill -9
(the OS keeps what both files were given) nothing needs replaying beyond the last interval.
Data directories are interchangeable with ``Deduplicator.open``: rows it writes carry no
fingerprint and are fingerprinted again when caught up.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from neardup._core import CorruptIndexError, Index
from neardup.dedup import Deduplicator, Policy
from neardup.textstore import Id, SqliteTextStore

__all__ = ["LogDeduplicator", "open_store"]

log = logging.getLogger("neardup.service")

_SYNCS = ("full", "normal", "off")
INDEX_SEQ = "index_seq"


def _load_policy(root: str, policy: Policy | None) -> Policy:
    # The same policy.json contract as Deduplicator.open: saved on first open, reused after.
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


class LogDeduplicator(Deduplicator):
    """A durable :class:`neardup.dedup.Deduplicator` with one fsync per write call (see the
    module docstring). Open it with :func:`open_store`."""

    #: Seconds between syncs of the index log (bounds what a reopen after a power cut replays;
    #: each sync holds the index for one fsync, so not more often).
    index_flush_interval: float = 5.0

    _sync = "full"
    _flushed_seq: int | None = None  # index synced through this text-store row; not yet recorded
    _last_flush = 0.0

    @property
    def text_store(self) -> SqliteTextStore:
        """The SQLite text store (the durable log)."""
        store = self.store
        assert isinstance(store, SqliteTextStore)
        return store

    def _add_batch(
        self,
        ids: list[Id],
        texts: list[str],
        fps: list[int],
        tss: Sequence[float | None],
    ) -> None:
        # Deduplicator._add_batch, with the fingerprints stored next to the texts (the log the
        # index is caught up from) and the index's own log synced only now and then.
        if not ids:
            return
        now = time.time()
        stamps = [now if ts is None else float(ts) for ts in tss]
        meta = None
        if self._flushed_seq is not None:
            meta = {INDEX_SEQ: self._flushed_seq}
        self.text_store.put_many(list(zip(ids, texts, stamps)), fps, meta=meta)
        if meta is not None:
            self._flushed_seq = None
        self._forget_sketches(ids)
        self.index.add_many(ids, np.asarray(fps, np.uint64), np.asarray(stamps, np.float64))
        self._counters["added"] += len(ids)
        if time.monotonic() - self._last_flush >= self.index_flush_interval:
            self._flush_index()
        self._maybe_expire()

    def _flush_index(self) -> None:
        # Called with _lock held (or before the deduplicator is shared): every row written so
        # far is in the index; after the sync they survive a power cut there too.
        self.index.flush()
        self._flushed_seq = self.text_store.last_seq
        self._last_flush = time.monotonic()

    def remove(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown (durable in both stores when it returns)."""
        with self._lock:
            super().remove(id)
            if self._sync == "full":
                self.index.flush()

    def stats(self) -> dict[str, Any]:
        """Deduplicator.stats without taking the writers' lock: the count of stored texts
        (~20 ms at 1 M) is read from a snapshot, so the web page's polling of /v1/stats does
        not stall the writes."""
        self._ensure_open()
        return {
            "documents": len(self.text_store),
            "indexed": len(self.index),
            **dict(self._counters),
            "path": self.path,
            "retention": self._retention,
            "policy": self.policy.to_dict(),
        }

    def flush(self) -> None:
        """Sync the index log and record it, so a reopen replays nothing."""
        with self._lock:
            self._ensure_open()
            self._flush_index()
            self.text_store.set_meta(INDEX_SEQ, self.text_store.last_seq)
            self._flushed_seq = None

    def close(self) -> None:
        """Checkpoint and close the index, record that it covers every row, close the texts."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.index.close()  # a snapshot of everything, synced
            self.text_store.set_meta(INDEX_SEQ, self.text_store.last_seq)
            self.text_store.close()

    def _catch_up(self) -> int:
        """Add to the index every row written after the index's last recorded sync (with its
        stored fingerprint, or a new one for rows written without); returns how many."""
        store = self.text_store
        since = store.get_meta(INDEX_SEQ)
        legacy = since is None  # written by Deduplicator.open (or before fingerprints were kept)
        if legacy or len(self.index) == 0:
            since = 0
        assert since is not None
        done = 0
        for rows in store.changes_since(since):
            ids = [r[0] for r in rows]
            fps: list[int | None] = [r[1] for r in rows]
            missing = [j for j, fp in enumerate(fps) if fp is None]
            todo = missing
            if legacy:
                # A store of Deduplicator.open: its index is synced on every write; take its
                # fingerprints where it has the id.
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


def _open_index(root: str, policy: Policy) -> Index:
    path = os.path.join(root, "index")
    config = json.dumps(policy.fingerprint, sort_keys=True)
    try:
        return Index.open(path, k=policy.k_max, sync="never", fingerprint_config=config)
    except CorruptIndexError as e:
        # The text store holds every document and its fingerprint: rebuild rather than refuse.
        aside = f"{path}.corrupt-{int(time.time())}"
        log.warning(
            "index %s is damaged (%s); moved to %s, rebuilding from the texts", path, e, aside
        )
        os.replace(path, aside)
        return Index.open(path, k=policy.k_max, sync="never", fingerprint_config=config)


def open_store(
    path: str | os.PathLike[str],
    *,
    policy: Policy | None = None,
    retention: float | None = None,
    sync: str = "full",
) -> LogDeduplicator:
    """Open (or create) the durable store under directory ``path``: texts and fingerprints in
    ``path/texts.sqlite`` (the log; ``sync``: ``"full"`` fsyncs each write call, ``"normal"``
    survives a killed process, ``"off"``), the index under ``path/index`` (caught up from the
    texts on open), the policy in ``path/policy.json``. ``retention`` (seconds): texts older
    than that are expired as new ones arrive. Same arguments and directory layout as
    ``Deduplicator.open``."""
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
    d = LogDeduplicator(policy=policy, index=index, store=store)
    d.path = root
    d._sync = sync
    d._retention = float(retention) if retention is not None else None
    try:
        replayed = d._catch_up()
    except BaseException:
        d.close()
        raise
    if replayed:
        log.info("caught the index up with %d stored text(s)", replayed)
    return d
