"""Stored texts for the verifier: the candidates SimHash finds are checked against these.

Two stores share one interface (:class:`TextStore`):

- :class:`MemoryTextStore`: a dict, for in-process use and tests.
- :class:`SqliteTextStore`: one SQLite file in WAL mode with ``synchronous=FULL``, so a ``put``
  that has returned survives ``kill -9`` and power loss of the process (the commit is fsynced
  before ``put`` returns). Safe to share between threads: writes go through one connection
  behind a lock; reads (``get``, ``in``) use a connection per reading thread, so they neither wait
  for a write's commit nor block it (WAL readers see the last committed state).

Ids are ``int`` (signed 64-bit) or ``str``, like the index. Each text is stored with its
timestamp (float seconds since the epoch) so that :meth:`TextStore.expire` can drop old ones.
Disk cost: the UTF-8 text plus ~40 bytes per row (SQLite row + primary-key index entry).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Protocol, Union, runtime_checkable

__all__ = ["Id", "MemoryTextStore", "SqliteTextStore", "TextStore", "check_id"]

Id = Union[int, str]

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def check_id(id: object) -> Id:
    """Return ``id`` if it is a valid id (str, or int in the signed 64-bit range), else raise."""
    if isinstance(id, bool) or not isinstance(id, (int, str)):
        raise TypeError(f"id must be int or str, got {type(id).__name__}")
    if isinstance(id, int) and not _I64_MIN <= id <= _I64_MAX:
        raise ValueError(f"id must fit in a signed 64-bit integer, got {id}")
    return id


def _now(timestamp: float | None) -> float:
    if timestamp is None:
        return time.time()
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)):
        raise TypeError(f"timestamp must be float seconds or None, got {type(timestamp).__name__}")
    return float(timestamp)


@runtime_checkable
class TextStore(Protocol):
    """Where the verifier finds the text of a stored id."""

    def put(self, id: Id, text: str, timestamp: float | None = None) -> None:
        """Store (or replace) the text of ``id``."""
        ...

    def get(self, id: Id) -> str:
        """The text of ``id``; ``KeyError`` if unknown."""
        ...

    def delete(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown."""
        ...

    def expire(self, before: float) -> list[Id]:
        """Delete every text stored with a timestamp < ``before``; return their ids."""
        ...

    def items(self) -> Iterator[tuple[Id, str, float]]:
        """Every ``(id, text, timestamp)``, in insertion order."""
        ...

    def __contains__(self, id: object) -> bool: ...

    def __len__(self) -> int: ...

    def close(self) -> None:
        """Release files; further use raises."""
        ...


class MemoryTextStore:
    """Texts in a dict (lost when the process ends)."""

    def __init__(self) -> None:
        self._texts: dict[Id, tuple[str, float]] = {}

    def put(self, id: Id, text: str, timestamp: float | None = None) -> None:
        """Store (or replace) the text of ``id``."""
        check_id(id)
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        ts = _now(timestamp)
        self._texts.pop(id, None)  # a replaced id moves to the end, like a fresh insert
        self._texts[id] = (text, ts)

    def get(self, id: Id) -> str:
        """The text of ``id``; ``KeyError`` if unknown."""
        try:
            return self._texts[id][0]
        except (KeyError, TypeError):
            raise KeyError(id) from None

    def timestamp(self, id: Id) -> float:
        """The timestamp of ``id``; ``KeyError`` if unknown."""
        try:
            return self._texts[id][1]
        except (KeyError, TypeError):
            raise KeyError(id) from None

    def delete(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown."""
        try:
            del self._texts[id]
        except (KeyError, TypeError):
            raise KeyError(id) from None

    def expire(self, before: float) -> list[Id]:
        """Delete every text stored with a timestamp < ``before``; return their ids."""
        old = [i for i, (_, ts) in self._texts.items() if ts < before]
        for i in old:
            del self._texts[i]
        return old

    def items(self) -> Iterator[tuple[Id, str, float]]:
        """Every ``(id, text, timestamp)``, in insertion order."""
        for i, (text, ts) in list(self._texts.items()):
            yield i, text, ts

    def __contains__(self, id: object) -> bool:
        try:
            return id in self._texts
        except TypeError:
            return False

    def __len__(self) -> int:
        return len(self._texts)

    def close(self) -> None:
        """Nothing to release."""


def _key(id: Id) -> tuple[str, str]:
    check_id(id)
    return ("i", str(id)) if isinstance(id, int) else ("s", id)


def _unkey(kind: str, key: str) -> Id:
    return int(key) if kind == "i" else key


# sync setting -> SQLite synchronous pragma. "full": every commit fsynced (survives power loss);
# "normal": survives kill -9 of the process but the last commits may be lost on power loss;
# "off": no fsync at all.
_SYNC = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}


class SqliteTextStore:
    """Texts in one SQLite file (WAL, synchronous=FULL: an acknowledged put is durable).

    ``sync``: ``"full"`` (default; each put fsynced), ``"normal"`` (survives a killed process,
    not a power cut) or ``"off"``.
    """

    def __init__(self, path: str | os.PathLike[str], *, sync: str = "full") -> None:
        if sync not in _SYNC:
            raise ValueError(f"sync must be one of {', '.join(_SYNC)}; got {sync!r}")
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None
        )
        db = self._db
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={_SYNC[sync]}")
        db.execute(
            "CREATE TABLE IF NOT EXISTS texts ("
            " kind TEXT NOT NULL, key TEXT NOT NULL, text TEXT NOT NULL, ts REAL NOT NULL,"
            " seq INTEGER NOT NULL, PRIMARY KEY (kind, key)) WITHOUT ROWID"
        )
        db.execute("CREATE INDEX IF NOT EXISTS texts_ts ON texts (ts)")
        row = db.execute("SELECT COALESCE(MAX(seq), 0) FROM texts").fetchone()
        self._seq = int(row[0])
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []

    def _reader(self) -> sqlite3.Connection:
        # This thread's read connection (opened on first use; closed by close()).
        if self._db is None:
            raise ValueError(f"text store {self.path!r} is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA query_only=1")
            with self._lock:
                if self._db is None:
                    conn.close()
                    raise ValueError(f"text store {self.path!r} is closed")
                self._readers.append(conn)
            self._local.conn = conn
        return conn

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise ValueError(f"text store {self.path!r} is closed")
        return self._db

    def put(self, id: Id, text: str, timestamp: float | None = None) -> None:
        """Store (or replace) the text of ``id``; durable when this returns."""
        kind, key = _key(id)
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        ts = _now(timestamp)
        with self._lock:
            self._seq += 1
            self._conn().execute(
                "INSERT OR REPLACE INTO texts (kind, key, text, ts, seq) VALUES (?, ?, ?, ?, ?)",
                (kind, key, text, ts, self._seq),
            )

    def put_many(self, rows: list[tuple[Id, str, float | None]]) -> None:
        """Store many ``(id, text, timestamp)`` in one transaction (one fsync)."""
        prepared = []
        for id, text, timestamp in rows:
            kind, key = _key(id)
            if not isinstance(text, str):
                raise TypeError(f"text must be str, got {type(text).__name__}")
            prepared.append((kind, key, text, _now(timestamp)))
        with self._lock:
            db = self._conn()
            first = self._seq + 1
            self._seq += len(prepared)
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT OR REPLACE INTO texts (kind, key, text, ts, seq)"
                    " VALUES (?, ?, ?, ?, ?)",
                    [(k, key, t, ts, first + j) for j, (k, key, t, ts) in enumerate(prepared)],
                )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def get(self, id: Id) -> str:
        """The text of ``id``; ``KeyError`` if unknown."""
        try:
            kind, key = _key(id)
        except (TypeError, ValueError):
            raise KeyError(id) from None
        row = (
            self._reader()
            .execute("SELECT text FROM texts WHERE kind = ? AND key = ?", (kind, key))
            .fetchone()
        )
        if row is None:
            raise KeyError(id)
        return str(row[0])

    def delete(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown."""
        try:
            kind, key = _key(id)
        except (TypeError, ValueError):
            raise KeyError(id) from None
        with self._lock:
            cur = self._conn().execute("DELETE FROM texts WHERE kind = ? AND key = ?", (kind, key))
        if cur.rowcount == 0:
            raise KeyError(id)

    def expire(self, before: float) -> list[Id]:
        """Delete every text stored with a timestamp < ``before``; return their ids."""
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            rows = db.execute("SELECT kind, key FROM texts WHERE ts < ?", (before,)).fetchall()
            db.execute("DELETE FROM texts WHERE ts < ?", (before,))
            db.execute("COMMIT")
        return [_unkey(k, v) for k, v in rows]

    def items(self) -> Iterator[tuple[Id, str, float]]:
        """Every ``(id, text, timestamp)``, in insertion order (a snapshot)."""
        with self._lock:
            rows = (
                self._conn()
                .execute("SELECT kind, key, text, ts FROM texts ORDER BY seq")
                .fetchall()
            )
        for kind, key, text, ts in rows:
            yield _unkey(kind, key), text, float(ts)

    def __contains__(self, id: object) -> bool:
        try:
            kind, key = _key(id)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        row = (
            self._reader()
            .execute("SELECT 1 FROM texts WHERE kind = ? AND key = ?", (kind, key))
            .fetchone()
        )
        return row is not None

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn().execute("SELECT COUNT(*) FROM texts").fetchone()[0])

    def close(self) -> None:
        """Close the database (idempotent)."""
        with self._lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            if self._db is not None:
                self._db.close()
                self._db = None
