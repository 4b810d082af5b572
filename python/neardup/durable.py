"""The one durable log of a deduplicator opened on a directory (``Deduplicator.open``).

A write is made durable with one fsync: the text store (``path/texts.sqlite``) keeps each
document's fingerprint with its text, so it alone can rebuild what the index holds.

- written documents are *staged* (in memory, visible to the deduplicator at once: the index has
  them and their texts are served from the staging area) and then *committed*: every row staged
  so far goes to the text store in one SQLite transaction (``sync="full"``: one fsync). A write
  call of the deduplicator commits before it returns, unless it is asked not to
  (``durable=False``); then :meth:`DurableLog.commit`, from any thread, makes it durable while
  the next writes are being decided (the service's group commit);
- the index log is written to the OS but synced only every few seconds (the deduplicator's
  ``index_flush_interval``); the next commit records, with its rows, the last text-store
  sequence number the synced index covers (meta ``index_seq``);
- on open, the rows written after that number (the only ones the index may have lost in a power
  cut) are added to the index again with their stored fingerprints;
- an index entry whose text never reached the store (a staged write lost in a crash) is skipped
  by checks and dropped by the next check-and-add that finds it.

Directories written before this scheme (rows without fingerprints, no ``index_seq``, an index
synced on every write) are read as they are: their rows are fingerprinted once on open.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from neardup._core import CorruptIndexError, Fingerprinter, Index
from neardup.kept import SAVED_ENGINE
from neardup.policy import Policy
from neardup.textstore import CorruptTextStoreError, Id, SqliteTextStore

__all__ = [
    "COMMITTED",
    "INDEX_SEQ",
    "SYNCS",
    "DurableLog",
    "index_rows",
    "load_policy",
    "open_index",
    "open_texts",
    "repair",
    "verify_texts",
]

SYNCS = ("full", "normal", "off")
INDEX_SEQ = "index_seq"  # meta: the last text-store row the synced index covers
# A file beside the text store, rewritten (not synced) after each commit: the store's last
# sequence number. A store that opens behind it lost committed rows (see verify_texts).
COMMITTED = "texts.committed"
TEXTS = "texts.sqlite"

_logger = logging.getLogger("neardup.dedup")

Row = tuple[Id, str, float]
Staged = tuple[Id, str, float, int]  # a staged row: id, text, timestamp, fingerprint


#: The text store's meta entry set once the directory keeps texts.committed (a directory made
#: before it did has none: its missing record is not a loss).
HAS_COMMITTED = "has_committed_record"

#: The text store's meta entry that records the CRC-32 of the directory's policy.json.
POLICY_CRC = "policy_crc32"


def _policy_bytes(policy: Policy) -> bytes:
    """policy.json as written (its checksum is taken over these bytes: a later version that
    adds a setting does not change the file of a directory, nor its checksum)."""
    return json.dumps(policy.to_dict(), indent=2, sort_keys=True).encode("utf-8")


def load_policy(root: str, policy: Policy | None, store: SqliteTextStore | None = None) -> Policy:
    """The policy of directory ``root``: saved in ``root/policy.json`` on first open, reused
    (and compared with ``policy``, which must then be None or equal) afterwards. With
    ``store`` (the directory's text store), the policy is checked against the checksum the
    store recorded when the directory was made: a policy.json edited, damaged or deleted
    since raises :class:`CorruptTextStoreError` (it was served as it read, or the default
    taken in its place), before anything is written."""
    policy_file = os.path.join(root, "policy.json")
    saved = None
    if os.path.exists(policy_file):
        with open(policy_file, "rb") as f:
            data = f.read()
        try:
            saved = Policy.from_dict(json.loads(data))
        except (ValueError, TypeError) as e:  # (json's and Policy's errors are ValueErrors)
            raise CorruptTextStoreError(f"{policy_file!r} cannot be read: {e}") from None
        if policy is not None and policy != saved:
            raise ValueError(
                f"policy differs from the one stored in {policy_file!r}; "
                "open without policy= or use a new path"
            )
    chosen = saved if saved is not None else policy if policy is not None else Policy.default()
    if saved is None:
        data = _policy_bytes(chosen)
    recorded = None if store is None else store.get_meta(POLICY_CRC)
    if recorded is not None and recorded != zlib.crc32(data):
        raise CorruptTextStoreError(
            f"{policy_file!r} is not the policy the directory was made with (edited or damaged: "
            "its checksum is not the one its text store recorded); restore it"
            if saved is not None
            else f"{policy_file!r} is missing and the policy given (or the default one) is not "
            "the one the directory was made with (its text store recorded another checksum); "
            "restore the file, or open with the policy the directory was made with"
        )
    if saved is None:
        tmp = policy_file + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, policy_file)
    if store is not None and recorded is None:
        store.set_meta(POLICY_CRC, zlib.crc32(data))
    return chosen


def _open_index_as_is(root: str, policy: Policy) -> Index:
    """The index under ``root/index`` (made if missing); a damaged one raises
    :class:`CorruptIndexError`."""
    config = json.dumps(policy.fingerprint, sort_keys=True)
    path = os.path.join(root, "index")
    return Index.open(path, k=policy.k_max, sync="never", fingerprint_config=config)


def open_index(root: str, policy: Policy) -> Index:
    """The index under ``root/index`` (log synced by the caller); a damaged one is moved aside
    and a new empty one opened (the caller rebuilds it from the texts)."""
    try:
        return _open_index_as_is(root, policy)
    except CorruptIndexError as e:
        # The text store holds every document and its fingerprint: rebuild rather than refuse.
        path = os.path.join(root, "index")
        aside = f"{path}.corrupt-{int(time.time())}"
        _logger.warning(
            "index %s is damaged (%s); moved to %s, rebuilding from the texts", path, e, aside
        )
        os.replace(path, aside)
        return _open_index_as_is(root, policy)


def _repair_hint(root: str) -> str:
    return (
        f"nothing was changed; `neardup repair {root}` keeps what can be read, rebuilds the "
        "index from it and reports what is lost"
    )


def open_texts(root: str, sync: str) -> SqliteTextStore:
    """The text store of directory ``root``; a file that cannot be read raises
    :class:`CorruptTextStoreError` naming it and the repair command."""
    try:
        return SqliteTextStore(os.path.join(root, TEXTS), sync=sync, background_checkpoint=True)
    except CorruptTextStoreError as e:
        raise CorruptTextStoreError(f"{e}; {_repair_hint(root)}") from e


#: The record of the last committed row: the number, right-aligned (rewritten in place), and
#: the CRC-32 of its digits; a record without the CRC was written before it was added.
_COMMITTED_RECORD = re.compile(rb" *([0-9]+)(?: ([0-9a-f]{8}))?\n")


def _committed_record(seq: int) -> bytes:
    return b"%20d %08x\n" % (seq, zlib.crc32(b"%d" % seq))


def read_committed(root: str) -> int | None:
    """The last sequence number the text store of ``root`` committed, as recorded beside it;
    None when there is no record. A record that cannot be read (damaged, cut short) raises
    :class:`CorruptTextStoreError`: whether the store lost committed rows cannot be told."""
    path = os.path.join(root, COMMITTED)
    try:
        with open(path, "rb") as f:
            data = f.read(64)
    except FileNotFoundError:
        return None
    m = _COMMITTED_RECORD.fullmatch(data)
    if m is not None and (m[2] is None or int(m[2], 16) == zlib.crc32(m[1])):
        return int(m[1])
    raise CorruptTextStoreError(
        f"{path!r} is damaged ({data[:48]!r}): whether the text store lost rows it had "
        f"committed cannot be told; {_repair_hint(root)}"
    )


def verify_texts(root: str, store: SqliteTextStore, index: Index) -> None:
    """Refuse a text store that lost rows it had committed (a damaged or deleted write-ahead log
    or database: SQLite drops the log's frames after a bad checksum without a word) or that is
    empty beside a non-empty index: :class:`CorruptTextStoreError` naming the file, what was
    lost and the repair command."""
    committed = read_committed(root)
    if committed is None and store.get_meta(HAS_COMMITTED):
        raise CorruptTextStoreError(
            f"{os.path.join(root, COMMITTED)!r}, the record of the text store's last committed "
            f"row, is missing: whether the store lost rows cannot be told; {_repair_hint(root)}"
        )
    if committed is not None and store.last_seq < committed:
        raise CorruptTextStoreError(
            f"text store {store.path!r} lacks its last {committed - store.last_seq} committed "
            f"row(s): it ends at row {store.last_seq}, row {committed} was committed (its "
            f"write-ahead log {store.path + '-wal'!r} or the database was damaged, deleted or "
            f"replaced); {_repair_hint(root)}"
        )
    if store.last_seq == 0 and len(index) > 0:
        raise CorruptTextStoreError(
            f"text store {store.path!r} is empty but the index holds {len(index)} document(s) "
            f"(deleted or replaced?); {_repair_hint(root)}"
        )


def repair(root: str) -> dict[str, Any]:
    """Rebuild directory ``root`` from what can be read: the text store's files and the index
    are moved to ``root/damaged-<time>/``, every readable row is written to a new text store,
    and the index is rebuilt from it on the next open. Returns a report: rows recovered, the
    index's item count before, the rows the store had committed, what is lost, where the old
    files are. Run it with the directory closed (no service on it). A policy it cannot trust
    (``policy.json`` edited, damaged, or missing with no readable record of the one the
    directory was made with) raises :class:`CorruptTextStoreError` before anything changes; so
    does an index of another fingerprint configuration (``IncompatibleIndexError``). A damaged
    index is moved aside with the text store's files, and ``indexed_before`` and
    ``lost_at_least`` are None: what it held, and so what is lost, cannot be told."""
    policy = _trusted_policy(root)
    try:  # (first: one in use elsewhere raises, nothing moved)
        index: Index | None = _open_index_as_is(root, policy)
    except CorruptIndexError:
        index = None
    indexed = None if index is None else len(index)
    if index is not None:
        index.close()
    aside = os.path.join(root, time.strftime("damaged-%Y%m%d-%H%M%S"))
    os.makedirs(aside)
    os.replace(os.path.join(root, "index"), os.path.join(aside, "index"))
    try:
        committed = read_committed(root)
    except CorruptTextStoreError:
        committed = None
    # (the saved engine too: its rows are of the old store, whose sequence numbers the new one
    # does not keep, so a reopen could not tell that it is out of date)
    for name in (TEXTS, TEXTS + "-wal", TEXTS + "-shm", SAVED_ENGINE):
        if os.path.exists(os.path.join(root, name)):
            os.replace(os.path.join(root, name), os.path.join(aside, name))
    rows, error = (
        SqliteTextStore.salvage(os.path.join(aside, TEXTS))
        if os.path.exists(os.path.join(aside, TEXTS))
        else ([], "no text store file")
    )
    store = SqliteTextStore(os.path.join(root, TEXTS))
    try:
        for start in range(0, len(rows), 10_000):
            chunk = rows[start : start + 10_000]
            with_fp = [r for r in chunk if r[3] is not None]
            store.put_many([r[:3] for r in with_fp], [int(r[3] or 0) for r in with_fp])
            store.put_many([r[:3] for r in chunk if r[3] is None])  # fingerprinted on open
        _record_committed(root, store.last_seq)
    finally:
        store.close()
    return {
        "recovered": len(rows),
        "indexed_before": indexed,
        "committed_rows": committed,
        "lost_at_least": None if indexed is None else max(0, indexed - len(rows)),
        "read_error": error,
        "moved_aside": aside,
    }


def _trusted_policy(root: str) -> Policy:
    """The policy of directory ``root`` for :func:`repair`: its ``policy.json`` checked against
    the checksum its text store recorded, when the store can still tell it (it may be what is
    damaged); a missing file is replaced only by the policy that checksum names."""
    recorded = None
    store = None
    try:
        store = SqliteTextStore(os.path.join(root, TEXTS), read_only=True)
        recorded = store.get_meta(POLICY_CRC)
    except (CorruptTextStoreError, OSError, sqlite3.Error):
        pass  # (the store is what is damaged: the file is taken as it reads)
    try:
        if recorded is None and not os.path.exists(os.path.join(root, "policy.json")):
            raise CorruptTextStoreError(
                f"{os.path.join(root, 'policy.json')!r} is missing and the text store cannot "
                "tell the policy the directory was made with; restore the file (nothing was "
                "changed)"
            )
        return load_policy(root, None, store if recorded is not None else None)
    finally:
        if store is not None:
            store.close()


def index_rows(
    index: Index,
    store: SqliteTextStore,
    fingerprint_many: Callable[[list[str]], Any],
    since: int = 0,
    *,
    from_index: bool = False,
    keep_fingerprints: bool = False,
) -> int:
    """Add to ``index`` every row of ``store`` written after sequence number ``since``, in the
    order written, with its stored fingerprint and timestamp; returns how many. A row stored
    without a fingerprint (written before the store kept them) gets the one ``index`` has for
    its id (``from_index``, when it has one), else ``fingerprint_many`` of its text, and with
    ``keep_fingerprints`` the store keeps it from then on (a write: not for a read-only store).
    What :meth:`DurableLog.catch_up` replays, and how a reference directory's stored texts are
    indexed (``neardup.cli._against.index_stored``)."""
    done = 0
    for rows in store.changes_since(since):
        ids = [r[0] for r in rows]
        fps: list[int | None] = [r[1] for r in rows]
        missing = [j for j, fp in enumerate(fps) if fp is None]
        todo = missing
        if from_index:
            todo = []
            for j in missing:
                try:
                    fps[j] = int(index.get(ids[j])[0])
                except KeyError:
                    todo.append(j)
        if todo:
            new = fingerprint_many([rows[j][3] or "" for j in todo])
            for j, fp in zip(todo, np.asarray(new, np.uint64).tolist()):
                fps[j] = int(fp)
        if missing and keep_fingerprints:
            store.set_fingerprints([(ids[j], int(fps[j] or 0)) for j in missing])
        index.add_many(
            ids,
            np.asarray(fps, np.uint64),
            np.asarray([r[2] for r in rows], np.float64),
        )
        done += len(rows)
    return done


def _record_committed(root: str, seq: int) -> None:
    with open(os.path.join(root, COMMITTED), "wb") as f:
        f.write(_committed_record(seq))


class DurableLog:
    """The text store as the durable log of an index: staging, group commits, index syncs and
    the catch-up on open (see the module docstring). Thread-safe: staging is done by the
    deduplicator's writers (under their lock), :meth:`commit` may run on another thread."""

    def __init__(self, store: SqliteTextStore, sync: str) -> None:
        self.store = store
        self.sync = sync
        # Staged rows in write order, and the newest staged row of each id (what readers see
        # until the row is committed).
        self._staged: list[Staged] = []
        self._staged_row: dict[Id, Staged] = {}
        self._staged_lock = threading.Lock()
        self._commit_lock = threading.Lock()  # one commit at a time, in staging order
        self._flushed_seq: int | None = None  # index synced through this row; not recorded yet
        self._last_flush = 0.0
        self._committed = os.open(
            os.path.join(os.path.dirname(store.path), COMMITTED), os.O_RDWR | os.O_CREAT, 0o644
        )
        self._record(store.last_seq)
        if not store.get_meta(HAS_COMMITTED):
            store.set_meta(HAS_COMMITTED, 1)

    def _record(self, seq: int) -> None:
        # Not synced: it must never be ahead of the store, and the store's commit is synced first.
        os.pwrite(self._committed, _committed_record(seq), 0)

    # -- staging and committing ---------------------------------------------------------------

    def stage(self, rows: Sequence[Row], fps: Sequence[int]) -> list[Staged]:
        """Stage written ``(id, text, timestamp)`` rows with their fingerprints; returns the
        staged entries (for :meth:`commit`'s ``own`` and :meth:`unstage`)."""
        entries = [(i, text, ts, fp) for (i, text, ts), fp in zip(rows, fps)]
        with self._staged_lock:
            self._staged.extend(entries)
            for e in entries:
                self._staged_row[e[0]] = e
        return entries

    def unstage(self, entries: Sequence[Staged]) -> None:
        """Take back staged entries that are not committed yet (a write call that failed):
        readers see the id's earlier staged row again, or the committed one. Entries already
        committed are left alone."""
        with self._commit_lock:  # not while a commit is writing them
            self._unstage(entries)

    def _unstage(self, entries: Sequence[Staged]) -> None:
        drop = {id(e) for e in entries}
        with self._staged_lock:
            ids = {e[0] for e in self._staged if id(e) in drop}
            if not ids:
                return
            self._staged = [e for e in self._staged if id(e) not in drop]
            for i in ids:
                del self._staged_row[i]
            for e in self._staged:
                if e[0] in ids:
                    self._staged_row[e[0]] = e  # the newest remaining one wins

    def pending_text(self, id: Id) -> str | None:
        """The staged (not yet committed) text of ``id``, or None."""
        e = self._staged_row.get(id)
        return None if e is None else e[1]

    def pending_ids(self) -> list[Id]:
        """The ids with a staged (not yet committed) row."""
        with self._staged_lock:
            return list(self._staged_row)

    @property
    def pending(self) -> int:
        """Rows staged and not yet committed."""
        return len(self._staged)

    def commit(self, own: Sequence[Staged] = ()) -> None:
        """Write every staged row to the text store in one transaction (one fsync with
        ``sync="full"``), with the index's last sync point when there is a new one to record.
        Rows staged while this runs wait for the next commit. On failure the error propagates;
        the caller's ``own`` entries are taken back (its write failed: nothing of it may be
        written later) and the other rows stay staged (the next commit writes them)."""
        with self._commit_lock:
            with self._staged_lock:
                if not self._staged:
                    return
                todo = list(self._staged)
                flushed = self._flushed_seq
            meta = None if flushed is None else {INDEX_SEQ: flushed}
            try:
                self.store.put_many(
                    [(i, t, ts) for i, t, ts, _ in todo], [r[3] for r in todo], meta=meta
                )
            except BaseException:
                self._unstage(own)
                raise
            self._record(self.store.last_seq)
            with self._staged_lock:
                del self._staged[: len(todo)]
                if flushed is not None and self._flushed_seq == flushed:
                    self._flushed_seq = None
                for e in todo:
                    # A newer staged row of the same id stays until its own commit.
                    if self._staged_row.get(e[0]) is e:
                        del self._staged_row[e[0]]

    def restore(self, index: Index, ids: Sequence[Id]) -> None:
        """Put the index entries of ``ids`` back to what is staged or committed (after a write
        call failed, possibly half-way through the index): the staged row's fingerprint, else
        the stored one, else no entry."""
        for i in dict.fromkeys(ids):
            e = self._staged_row.get(i)
            row = (e[3], e[2]) if e is not None else self.store.stored_row(i)
            if row is not None and row[0] is not None:
                index.add(i, row[0], row[1])
                continue
            try:
                index.remove(i)
            except KeyError:
                pass

    # -- the index's sync points ----------------------------------------------------------------

    def flush_index(self, index: Index) -> None:
        """Sync the index log; the next commit records that it covers every committed row.
        Called with the deduplicator's writers' lock held (every staged row is in the index)."""
        index.flush()
        with self._staged_lock:
            self._flushed_seq = self.store.last_seq
        self._last_flush = time.monotonic()

    def maybe_flush_index(self, index: Index, interval: float) -> None:
        """:meth:`flush_index` when ``interval`` seconds have passed since the last."""
        if time.monotonic() - self._last_flush >= interval:
            self.flush_index(index)

    def mark_index_current(self, index: Index) -> None:
        """Commit, sync the index and record at once that it covers every stored row (a reopen
        then replays nothing)."""
        self.commit()
        self.flush_index(index)
        self.store.set_meta(INDEX_SEQ, self.store.last_seq)
        with self._staged_lock:
            self._flushed_seq = None

    def catch_up(
        self, index: Index, fingerprinter: Fingerprinter, prepare: Callable[[str], str]
    ) -> int:
        """Add to ``index`` every row written after the index's last recorded sync (with its
        stored fingerprint, or a new one for rows written without); returns how many."""
        since = self.store.get_meta(INDEX_SEQ)
        legacy = since is None  # written before the text store kept the fingerprints
        if since is None or len(index) == 0:
            since = 0
        done = index_rows(
            index,
            self.store,
            lambda texts: fingerprinter.fingerprint_many([prepare(t) for t in texts]),
            since,
            # (such a store's index was synced on every write: its fingerprints are good)
            from_index=legacy,
            keep_fingerprints=True,
        )
        self.mark_index_current(index)
        return done

    def close(self, index: Index) -> None:
        """Commit, close the index (a synced snapshot), record that it covers every row, close
        the store. If the commit fails, the staged rows (never acknowledged) leave the index
        too, and both are closed all the same before the error propagates."""
        try:
            self.commit()
        except BaseException:
            with self._commit_lock, self._staged_lock:
                lost = [e[0] for e in self._staged]
                self._staged.clear()
                self._staged_row.clear()
            self.restore(index, lost)
            raise
        finally:
            try:
                index.close()
                self.store.set_meta(INDEX_SEQ, self.store.last_seq)
            finally:
                self.store.close()
                os.close(self._committed)
