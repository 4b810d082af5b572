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

:class:`SqliteTextStore` can also be the one durable log of a deduplicator: each row may carry
the text's 64-bit fingerprint and gets an increasing sequence number, a small ``meta`` table
holds named integers written in the same transaction as a batch of texts, and
:meth:`SqliteTextStore.changes_since` lists the rows written after a given sequence number, so an
index that is synced lazily can be caught up on open (see ``Deduplicator.open`` in
``neardup.dedup``).

``SqliteTextStore(path, read_only=True)`` only reads a store (a reference directory of
``neardup index build`` read by ``dedup --against``, ``index query`` and ``serve --against``,
which may be on a read-only disk or another user's): SQLite's ``mode=ro``, which sees what a
writer in WAL mode has committed; where that cannot open the file (no ``-shm`` file beside it
and none can be made: the directory cannot be written), ``immutable=1`` (the file as it is,
without locks), unless a write-ahead log holds rows that reading would then miss. Every write
method raises :class:`ReadOnlyTextStoreError` (a ``PermissionError``) naming the file before it
touches anything.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import numbers
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, Union, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = [
    "LAST_SEQ",
    "Ids",
    "Timestamps",
    "MAX_TIMESTAMP",
    "CorruptTextStoreError",
    "Id",
    "MemoryTextStore",
    "ReadOnlyTextStoreError",
    "SqliteTextStore",
    "TextStore",
    "check_id",
    "check_timestamp",
    "read_last_seq",
]

Id = Union[int, str]
#: The ids of a batch call: a sequence of ids, or an integer numpy array (a pandas column of
#: int ids is read alike).
Ids = Union[Sequence[Id], npt.NDArray[np.integer[Any]]]
#: The timestamps of a batch call (seconds since the epoch; None: now), or a numpy array.
Timestamps = Union[
    Sequence[Union[float, None]], npt.NDArray[Union[np.floating[Any], np.integer[Any]]]
]

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

LAST_SEQ = "last_seq"  # meta: the sequence number of the last row written (in its transaction)


class CorruptTextStoreError(ValueError):
    """A text store that cannot be read whole (a damaged file) or that lacks rows it had."""


class ReadOnlyTextStoreError(PermissionError):
    """A write asked of a text store opened read-only (``SqliteTextStore(read_only=True)``)."""


def check_id(id: object, name: str = "id") -> Id:
    """Return ``id`` if it is a valid id (str encodable as UTF-8, or int in the signed 64-bit
    range), else raise ``TypeError`` / ``ValueError`` naming ``name``."""
    if isinstance(id, bool) or not isinstance(id, (int, str)):
        raise TypeError(f"{name} must be int or str, got {type(id).__name__}")
    if isinstance(id, int):
        if not _I64_MIN <= id <= _I64_MAX:
            raise ValueError(f"{name} must fit in a signed 64-bit integer, got {id}")
        return id
    size = len(id)
    if not id.isascii():
        # Every store keeps ids as UTF-8 (SQLite, the index, Redis): a lone surrogate has none.
        try:
            size = len(id.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError(
                f"{name} must be valid Unicode (no lone surrogates), got {id!r:.80}"
            ) from None
    if size > MAX_ID_BYTES:
        raise ValueError(f"{name} must be at most {MAX_ID_BYTES} bytes of UTF-8, got {size} bytes")
    return id


#: Longest str id, in bytes of UTF-8 (the index's limit; every store keeps what it holds).
MAX_ID_BYTES = 65536

#: Largest timestamp magnitude (seconds) that every store and the index hold exactly (the
#: index's limit, about the year 31.7 million).
MAX_TIMESTAMP = 1e15


def check_timestamp(
    timestamp: object, name: str = "timestamp", *, not_before: float | None = None
) -> float:
    """``timestamp`` as float seconds when every store can keep it: a finite number with
    ``|t| <= MAX_TIMESTAMP`` and, when ``not_before`` is given (now minus a retention window),
    not older than that (such a document would be expired at once). ``TypeError`` /
    ``ValueError`` naming ``name`` otherwise."""
    # (any real number but a bool: numpy's integers and floats too, as the index takes them)
    if isinstance(timestamp, (bool, np.bool_)) or not isinstance(timestamp, numbers.Real):
        raise TypeError(f"{name} must be float seconds or None, got {type(timestamp).__name__}")
    try:
        ts = float(timestamp)
    except OverflowError:  # an int beyond the float range
        ts = math.inf
    if not -MAX_TIMESTAMP <= ts <= MAX_TIMESTAMP:  # (NaN fails this too)
        raise ValueError(
            f"{name} must be finite seconds since the epoch within +-{MAX_TIMESTAMP:.0e}, "
            f"got {timestamp!r:.40}"
        )
    if not_before is not None and ts < not_before:
        raise ValueError(
            f"{name} is {timestamp!r}, older than the retention window (it would be expired "
            f"at once; the oldest accepted now is {not_before:.3f})"
        )
    return ts


def _now(timestamp: float | None) -> float:
    return time.time() if timestamp is None else check_timestamp(timestamp)


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


def read_last_seq(db: sqlite3.Connection) -> int:
    """The sequence number of the last row written to the text store open in ``db``: the
    largest stored, or the one recorded with the last write (the last rows may have been
    removed since: the recorded number still counts them)."""
    row = db.execute("SELECT COALESCE(MAX(seq), 0) FROM texts").fetchone()
    meta = db.execute("SELECT value FROM meta WHERE name = ?", (LAST_SEQ,)).fetchone()
    return max(int(row[0]), 0 if meta is None else int(meta[0]))


def _storable(text: str) -> str | bytes:
    """``text`` as SQLite can store it: itself, or, when it holds a lone surrogate (not
    Unicode, so not UTF-8: half of an emoji from a JSON ``\\ud83d`` escape), its UTF-8 bytes
    with the surrogate kept (a BLOB that :func:`_text` reads back as the same text)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def _text(stored: str | bytes) -> str:
    """A stored text as written (see :func:`_storable`)."""
    return stored.decode("utf-8", "surrogatepass") if isinstance(stored, bytes) else stored


def _key(id: Id) -> tuple[str, str]:
    check_id(id)
    return ("i", str(id)) if isinstance(id, int) else ("s", id)


def _unkey(kind: str, key: str) -> Id:
    return int(key) if kind == "i" else key


_U64_MASK = 2**64 - 1
_ROWS_PER_INSERT = 500  # 3,000 parameters per statement (SQLite allows 32,766 since 3.32)


@functools.lru_cache(maxsize=64)
def _insert_sql(rows: int) -> str:
    return "INSERT OR REPLACE INTO texts (kind, key, text, ts, fp, seq) VALUES " + ",".join(
        ["(?, ?, ?, ?, ?, ?)"] * rows
    )


def _signed(fp: int) -> int:
    # SQLite integers are signed 64-bit: an unsigned fingerprint is stored as its two's
    # complement (read back with ``& _U64_MASK``).
    fp = int(fp)
    if not 0 <= fp <= _U64_MASK:
        raise ValueError(f"fingerprint must be an unsigned 64-bit int, got {fp}")
    return fp - 2**64 if fp >= 2**63 else fp


#: The store's schema, written once: ``{schema}`` is "" for the file's own (a writable store
#: makes what it lacks, :meth:`SqliteTextStore._setup`) and "temp." where a read-only
#: connection completes an older store (:func:`_complete_old_tables`). A ``texts`` table made
#: before fingerprints were kept lacks ``fp`` (added by the writable store, as NULLs read-only).
_META_TABLE = (
    "CREATE TABLE IF NOT EXISTS {schema}meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"
)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {schema}texts (kind TEXT NOT NULL, key TEXT NOT NULL,"
    " text TEXT NOT NULL, ts REAL NOT NULL, seq INTEGER NOT NULL, fp INTEGER,"
    " PRIMARY KEY (kind, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS {schema}texts_ts ON texts (ts)",
    _META_TABLE,
)


def _complete_old_tables(conn: sqlite3.Connection) -> None:
    """In a read-only connection to a store written before fingerprints or the ``meta`` table
    were kept, what it lacks, in the connection's own temporary schema (names there come before
    the file's), so that the store's queries read it as they read a store of today: a view of
    ``texts`` with a ``fp`` column of NULLs, an empty ``meta``."""
    tables = {r[0] for r in conn.execute("SELECT name FROM main.sqlite_master WHERE type='table'")}
    if "texts" in tables:
        columns = {row[1] for row in conn.execute("PRAGMA main.table_info(texts)")}
        if "fp" not in columns:
            conn.execute("CREATE TEMP VIEW texts AS SELECT *, NULL AS fp FROM main.texts")
    if "meta" not in tables:
        conn.execute(_META_TABLE.format(schema="temp."))


# sync setting -> SQLite synchronous pragma. "full": every commit fsynced (survives power loss);
# "normal": survives kill -9 of the process but the last commits may be lost on power loss;
# "off": no fsync at all.
_SYNC = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}


class SqliteTextStore:
    """Texts in one SQLite file (WAL, synchronous=FULL: an acknowledged put is durable).

    ``sync``: ``"full"`` (default; each put fsynced), ``"normal"`` (survives a killed process,
    not a power cut) or ``"off"``. ``background_checkpoint``: copy the write-ahead log into the
    database file from a thread of the store's own every ``checkpoint_interval`` seconds instead
    of inside a commit every ~4 MB of writes (SQLite's default), so that no write waits for a
    checkpoint's copying and fsyncs.

    ``read_only``: open an existing store for reading only (see the module docstring): nothing
    is created, upgraded or written (``sync`` is not used), and the write methods (``put``,
    ``put_many``, ``delete``, ``expire``, ``set_meta``, ``set_fingerprints``) raise
    :class:`ReadOnlyTextStoreError`. A missing file raises ``FileNotFoundError``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        sync: str = "full",
        background_checkpoint: bool = False,
        checkpoint_interval: float = 0.5,
        read_only: bool = False,
    ) -> None:
        if sync not in _SYNC:
            raise ValueError(f"sync must be one of {', '.join(_SYNC)}; got {sync!r}")
        if isinstance(checkpoint_interval, bool) or not (
            isinstance(checkpoint_interval, (int, float)) and checkpoint_interval > 0
        ):
            raise ValueError(
                f"checkpoint_interval must be a positive number of seconds, "
                f"got {checkpoint_interval!r}"
            )
        if read_only and background_checkpoint:
            raise ValueError("background_checkpoint writes the file: not with read_only=True")
        self.path = os.fspath(path)
        self.read_only = bool(read_only)
        # How every connection of the store opens the file: the path, or (read-only) a URI.
        self._uri: str | None = None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        try:
            if self.read_only:
                self._db = self._open_read_only()
            else:
                self._db = self._connect()
            self._setup(sync)
        except sqlite3.DatabaseError as e:
            if self._db is not None:
                self._db.close()
                self._db = None
            raise CorruptTextStoreError(f"text store {self.path!r} cannot be read: {e}") from e
        db = self._db
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._checkpointer: threading.Thread | None = None
        self._stop_checkpoints = threading.Event()
        if background_checkpoint:
            db.execute("PRAGMA wal_autocheckpoint=0")
            # A restarted log is cut back to this size (it stays at its largest otherwise).
            db.execute("PRAGMA journal_size_limit=67108864")
            self._checkpointer = threading.Thread(
                target=self._checkpoint_forever,
                args=(float(checkpoint_interval),),
                name="neardup-textstore-checkpoint",
                daemon=True,
            )
            self._checkpointer.start()

    def _connect(self) -> sqlite3.Connection:
        """A new connection to the file, as this store opens it (read-only: by its URI, with
        the tables of an older store completed in the connection's own temporary schema)."""
        if self._uri is None:
            return sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn = sqlite3.connect(self._uri, uri=True, check_same_thread=False, isolation_level=None)
        try:
            _complete_old_tables(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_read_only(self) -> sqlite3.Connection:
        """The first connection of a read-only store: ``mode=ro`` (which sees the rows a writer
        in WAL mode has committed, through the ``-shm`` file beside the database, made when
        missing); where that cannot open it (no ``-shm`` and the directory cannot be written),
        ``immutable=1``, which reads the database file alone: refused while a write-ahead log
        holds rows (they would be missed)."""
        if not os.path.isfile(self.path):
            raise FileNotFoundError(errno.ENOENT, "no such text store", self.path)
        base = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
        self._uri = base
        try:
            conn = self._connect()
            try:
                conn.execute("SELECT 1 FROM texts LIMIT 1").fetchall()
                return conn
            except sqlite3.DatabaseError:
                conn.close()
                raise
        except sqlite3.OperationalError as e:
            first = e  # (cannot open the -shm file; or not a text store: said again below)
        wal = self.path + "-wal"
        if os.path.exists(wal) and os.path.getsize(wal) > 0:
            raise PermissionError(
                errno.EACCES,
                f"text store cannot be read read-only: its write-ahead log {wal!r} holds "
                f"rows that SQLite reads only through a -shm file, which cannot be made beside "
                f"it ({first}); open it once where it can be written, or copy the directory",
                self.path,
            )
        self._uri = base + "&immutable=1"
        return self._connect()

    def _setup(self, sync: str) -> None:
        """Pragmas, tables (created or upgraded) and the last sequence number; then a quick
        check of the file (SQLite's ``quick_check``: every page and B-tree readable)."""
        db = self._conn()
        if self.read_only:
            # (nothing made or upgraded: an older store's tables were completed by _connect)
            self._seq = read_last_seq(db)
            self._quick_check(db)
            return
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={_SYNC[sync]}")
        # The write path descends the primary-key and timestamp B-trees at random places: keep
        # their inner pages cached (64 MiB, against SQLite's default 2 MiB).
        db.execute("PRAGMA cache_size=-65536")
        for statement in _SCHEMA:
            db.execute(statement.format(schema=""))
        columns = {row[1] for row in db.execute("PRAGMA table_info(texts)")}
        if "fp" not in columns:  # a store written before fingerprints were kept
            db.execute("ALTER TABLE texts ADD COLUMN fp INTEGER")
        self._seq = read_last_seq(db)
        self._quick_check(db)

    @staticmethod
    def _quick_check(db: sqlite3.Connection) -> None:
        problems = [r[0] for r in db.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError("; ".join(problems))

    def _checkpoint_forever(self, interval: float) -> None:
        # A connection of its own: SQLite runs a checkpoint concurrently with the writer's
        # commits and the readers (PASSIVE never waits for them); the GIL is released meanwhile.
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            while not self._stop_checkpoints.wait(interval):
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:  # busy or closing: the next round retries
                    continue
        finally:
            conn.close()

    @property
    def last_seq(self) -> int:
        """Sequence number of the last row written (rows are numbered 1, 2, ... in write order;
        a replaced id gets a new number). Read-only: read from the file at each call (a writer
        elsewhere may have gone on), except where the store had to be opened ``immutable``
        (no -shm file could be made beside it): then SQLite assumes nobody writes it, and
        what a writer adds later is not seen (and must not be: copy such a directory)."""
        if self.read_only:
            with self._lock:
                return read_last_seq(self._conn())
        return self._seq

    def _reader(self) -> sqlite3.Connection:
        # This thread's read connection (opened on first use; closed by close()).
        if self._db is None:
            raise ValueError(f"text store {self.path!r} is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
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

    def _writable(self, what: str) -> None:
        """Refuse ``what`` (a write) on a store opened read-only, before anything is done."""
        if self.read_only:
            raise ReadOnlyTextStoreError(
                errno.EROFS, f"text store is open read-only: {what} refused", self.path
            )

    def put(
        self, id: Id, text: str, timestamp: float | None = None, fingerprint: int | None = None
    ) -> None:
        """Store (or replace) the text of ``id`` (and its fingerprint, when given); durable
        when this returns."""
        self._writable("put")
        self.put_many([(id, text, timestamp)], None if fingerprint is None else [fingerprint])

    def put_many(
        self,
        rows: Sequence[tuple[Id, str, float | None]],
        fingerprints: Sequence[int] | None = None,
        *,
        meta: Mapping[str, int] | None = None,
    ) -> None:
        """Store many ``(id, text, timestamp)`` in one transaction (one fsync), with their
        unsigned 64-bit ``fingerprints`` when given, and set the ``meta`` integers in the same
        transaction (all or nothing)."""
        self._writable("put_many")
        if fingerprints is not None and len(fingerprints) != len(rows):
            raise ValueError(f"fingerprints has {len(fingerprints)} items but rows has {len(rows)}")
        now = time.time()
        # The statement's parameters, six per row (kind, key, text, ts, fp, seq; seq filled in
        # under the lock), built in one pass: this runs for every document the service writes.
        params: list[Any] = []
        extend = params.extend
        for j, (id, text, timestamp) in enumerate(rows):
            if type(id) is str:
                kind, key = "s", id
            elif type(id) is int and _I64_MIN <= id <= _I64_MAX:
                kind, key = "i", str(id)
            else:
                kind, key = _key(id)
            if type(text) is not str:
                raise TypeError(f"text must be str, got {type(text).__name__}")
            if timestamp is None:
                ts = now
            elif type(timestamp) is float and -MAX_TIMESTAMP <= timestamp <= MAX_TIMESTAMP:
                ts = timestamp
            else:
                ts = _now(timestamp)
            fp = None if fingerprints is None else _signed(fingerprints[j])
            extend((kind, key, text, ts, fp, 0))
        count = len(rows)
        meta_rows = []
        for name, value in (meta or {}).items():
            if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"meta must map str to int, got {name!r}: {value!r}")
            meta_rows.append((name, value))
        with self._lock:
            db = self._conn()
            first = self._seq + 1
            params[5::6] = range(first, first + count)
            # The last sequence number, in the same transaction: a reopen then knows how far the
            # store went even after its last rows were removed (see neardup.durable).
            meta_rows.append((LAST_SEQ, first + count - 1))
            # Rows go in multi-row INSERTs (one statement per _ROWS_PER_INSERT rows): SQLite
            # runs a statement with the GIL released, and each release is a chance for the
            # event loop's thread to take the GIL and keep it for a switch interval; executemany
            # releases it once per row.
            db.execute("BEGIN IMMEDIATE")
            try:
                for start in range(0, count, _ROWS_PER_INSERT):
                    n = min(_ROWS_PER_INSERT, count - start)
                    rows_n = params[6 * start : 6 * (start + n)]
                    try:
                        db.execute(_insert_sql(n), rows_n)
                    except UnicodeEncodeError:  # (a text with a lone surrogate: nothing ran)
                        rows_n[2::6] = [_storable(t) for t in rows_n[2::6]]
                        db.execute(_insert_sql(n), rows_n)
                db.executemany("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", meta_rows)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            self._seq += count

    @staticmethod
    def salvage(
        path: str | os.PathLike[str],
    ) -> tuple[list[tuple[Id, str, float, int | None]], str | None]:
        """The rows of a (possibly damaged) store file that can still be read, as
        ``(id, text, timestamp, fingerprint)`` in write order, and the error that stopped the
        reading (None when every row was read)."""
        found: dict[tuple[str, str], tuple[int, Id, str, float, int | None]] = {}
        error: str | None = None

        def keep(row: tuple[Any, ...]) -> None:
            kind, key, text, ts, seq, fp = row
            found[(kind, key)] = (
                seq,
                _unkey(kind, key),
                _text(text),
                float(ts),
                fp and fp & _U64_MASK,
            )

        conn = sqlite3.connect(os.fspath(path), isolation_level=None)
        try:
            try:  # (a store written before fingerprints were kept has no fp column)
                names = {row[1] for row in conn.execute("PRAGMA table_info(texts)")}
            except sqlite3.DatabaseError:
                names = set()
            columns = "kind, key, text, ts, seq, " + (
                "fp" if "fp" in names or not names else "NULL"
            )
            try:  # (row by row: what was read before a damaged page is kept)
                for row in conn.execute(f"SELECT {columns} FROM texts"):
                    keep(row)
            except sqlite3.DatabaseError as e:
                error = str(e)
            if error is not None:
                # Past the damaged page: the keys from the index on ts (pages of its own), each
                # row then read alone; only the rows on damaged pages stay unread.
                keys = []
                try:
                    for kind, key in conn.execute(
                        "SELECT kind, key FROM texts INDEXED BY texts_ts"
                    ):
                        keys.append((kind, key))
                except sqlite3.DatabaseError:
                    pass
                one = f"SELECT {columns} FROM texts WHERE kind = ? AND key = ?"
                for k in keys:
                    if k not in found:
                        try:
                            row = conn.execute(one, k).fetchone()
                        except sqlite3.DatabaseError:
                            continue
                        if row is not None:
                            keep(row)
        except sqlite3.DatabaseError as e:  # (the file's header or schema itself)
            error = error or str(e)
        finally:
            conn.close()
        rows = sorted(found.values(), key=lambda r: r[0])
        return [r[1:] for r in rows], error

    def set_meta(self, name: str, value: int) -> None:
        """Set the integer ``name`` of the ``meta`` table (durable when this returns)."""
        self._writable("set_meta")
        if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"meta must map str to int, got {name!r}: {value!r}")
        with self._lock:
            self._conn().execute(
                "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, value)
            )

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Reads of stored rows: what SQLite reports of a damaged file (a malformed page, a
        text that is not UTF-8) is :class:`CorruptTextStoreError` naming the file; a busy or
        locked database stays what it is."""
        try:
            yield
        except sqlite3.DatabaseError as e:
            damaged = ("malformed", "decode", "not a database")
            if isinstance(e, sqlite3.OperationalError) and not any(w in str(e) for w in damaged):
                raise
            raise CorruptTextStoreError(f"text store {self.path!r} is damaged: {e}") from e

    def get_meta(self, name: str) -> int | None:
        """The integer ``name`` of the ``meta`` table, or None if it was never set."""
        with self._lock:
            row = self._conn().execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else int(row[0])

    def changes_since(
        self, seq: int, chunk: int = 65_536
    ) -> Iterator[list[tuple[Id, int | None, float, str | None]]]:
        """The rows written after sequence number ``seq`` (see :attr:`last_seq`), in write
        order, as lists of up to ``chunk`` ``(id, fingerprint, timestamp, text)``: the text only
        where the fingerprint is unknown (None; a row written without one), else None. Reads a
        snapshot: later writes are not included."""
        with self._lock, self._reading():
            rows = (
                self._conn()
                .execute(
                    "SELECT kind, key, fp, ts, CASE WHEN fp IS NULL THEN text END FROM texts"
                    " WHERE seq > ? ORDER BY seq",
                    (int(seq),),
                )
                .fetchall()
            )
        for start in range(0, len(rows), chunk):
            yield [
                (
                    _unkey(kind, key),
                    None if fp is None else fp & _U64_MASK,
                    float(ts),
                    text and _text(text),
                )
                for kind, key, fp, ts, text in rows[start : start + chunk]
            ]

    def set_fingerprints(self, pairs: Sequence[tuple[Id, int]]) -> None:
        """Record the fingerprints of stored ids (one transaction; unknown ids are skipped).
        For stores written before fingerprints were kept."""
        self._writable("set_fingerprints")
        prepared = [(_signed(fp), *_key(id)) for id, fp in pairs]
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany("UPDATE texts SET fp = ? WHERE kind = ? AND key = ?", prepared)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def get(self, id: Id) -> str:
        """The text of ``id``; ``KeyError`` if unknown."""
        try:
            kind, key = _key(id)
        except (TypeError, ValueError):
            raise KeyError(id) from None
        with self._reading():
            row = (
                self._reader()
                .execute("SELECT text FROM texts WHERE kind = ? AND key = ?", (kind, key))
                .fetchone()
            )
        if row is None:
            raise KeyError(id)
        return _text(row[0])

    def stored_row(self, id: Id) -> tuple[int | None, float] | None:
        """``(fingerprint, timestamp)`` of the committed row of ``id`` (fingerprint None for a
        row written without one), or None when there is none."""
        try:
            kind, key = _key(id)
        except (TypeError, ValueError):
            return None
        row = (
            self._reader()
            .execute("SELECT fp, ts FROM texts WHERE kind = ? AND key = ?", (kind, key))
            .fetchone()
        )
        if row is None:
            return None
        return (None if row[0] is None else row[0] & _U64_MASK), float(row[1])

    def delete(self, id: Id) -> None:
        """Forget ``id``; ``KeyError`` if unknown."""
        self._writable("delete")
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
        self._writable("expire")
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            rows = db.execute("SELECT kind, key FROM texts WHERE ts < ?", (before,)).fetchall()
            db.execute("DELETE FROM texts WHERE ts < ?", (before,))
            db.execute("COMMIT")
        return [_unkey(k, v) for k, v in rows]

    def items(self, after: int = 0) -> Iterator[tuple[Id, str, float]]:
        """Every ``(id, text, timestamp)``, in insertion order (a snapshot); ``after``: only the
        rows written after that sequence number (see :attr:`last_seq`)."""
        with self._lock, self._reading():
            rows = (
                self._conn()
                .execute(
                    "SELECT kind, key, text, ts FROM texts WHERE seq > ? ORDER BY seq",
                    (int(after),),
                )
                .fetchall()
            )
        for kind, key, text, ts in rows:
            yield _unkey(kind, key), _text(text), float(ts)

    def ids_by_seq(self) -> tuple[list[Id], list[int]]:
        """Every stored id and its sequence number, in insertion order (a snapshot; no text
        is read into Python)."""
        with self._lock, self._reading():
            rows = self._conn().execute("SELECT kind, key, seq FROM texts ORDER BY seq").fetchall()
        return [_unkey(kind, key) for kind, key, _ in rows], [seq for _, _, seq in rows]

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
        # On this thread's read connection: a count of 1 M rows takes ~20 ms (the timestamp
        # index), which writes need not wait for.
        return int(self._reader().execute("SELECT COUNT(*) FROM texts").fetchone()[0])

    def close(self) -> None:
        """Close the database (idempotent)."""
        self._stop_checkpoints.set()
        if self._checkpointer is not None:
            self._checkpointer.join()
        with self._lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            if self._db is not None:
                self._db.close()
                self._db = None
