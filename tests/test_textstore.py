"""SqliteTextStore as a durable log: fingerprints, sequence numbers, meta, old files,
checkpoints."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from _helpers import run_unprivileged
from neardup.textstore import CorruptTextStoreError, SqliteTextStore


def test_fingerprints_round_trip_over_the_whole_unsigned_range(tmp_path: Path) -> None:
    fps = [0, 1, 2**63 - 1, 2**63, 2**64 - 1, 0xDEADBEEFCAFEF00D]
    with_fp = [(f"d{j}", f"text {j}", 100.0 + j) for j in range(len(fps))]
    s = SqliteTextStore(tmp_path / "t.sqlite")
    s.put_many(with_fp, fps)
    s.put(7, "no fingerprint", 50.0)
    (rows,) = list(s.changes_since(0))
    assert rows == [
        *[(f"d{j}", fp, 100.0 + j, None) for j, fp in enumerate(fps)],
        (7, None, 50.0, "no fingerprint"),  # the text only where the fingerprint is unknown
    ]
    s.close()
    again = SqliteTextStore(tmp_path / "t.sqlite")
    assert [r[1] for r in next(again.changes_since(0))] == [*fps, None]
    assert again.get("d4") == "text 4"
    again.close()


def test_a_text_with_a_lone_surrogate_is_stored_and_read_back_as_it_was(tmp_path: Path) -> None:
    """Crawled text may hold a lone surrogate (half of an emoji from a JSON ``\\ud83d``
    escape), which is not UTF-8: it is kept as it was, through every read, in a batch with
    ordinary texts and across a reopen."""
    cut = "half an emoji \ud83d here, 中文"
    s = SqliteTextStore(tmp_path / "t.sqlite")
    s.put_many([("a", "plain", 1.0), ("b", cut, 2.0), ("c", "\udc00", 3.0)])
    s.put("d", cut + "!", 4.0, fingerprint=9)
    assert s.get("b") == cut and s.get("c") == "\udc00" and s.get("a") == "plain"
    assert [(i, t) for i, t, _ in s.items()] == [
        ("a", "plain"),
        ("b", cut),
        ("c", "\udc00"),
        ("d", cut + "!"),
    ]
    assert [r[3] for r in next(s.changes_since(0))] == ["plain", cut, "\udc00", None]
    s.close()
    again = SqliteTextStore(tmp_path / "t.sqlite")
    assert again.get("b") == cut and again.get("d") == cut + "!"
    again.close()


def test_sequence_numbers_follow_the_writes_and_a_replaced_id_moves_last(tmp_path: Path) -> None:
    s = SqliteTextStore(tmp_path / "t.sqlite")
    assert s.last_seq == 0
    s.put_many([("a", "1", None), ("b", "2", None), (3, "3", None)], [1, 2, 3])
    assert s.last_seq == 3
    s.put("a", "1 again", fingerprint=11)
    assert s.last_seq == 4
    assert [(r[0], r[1]) for r in next(s.changes_since(0))] == [("b", 2), (3, 3), ("a", 11)]
    assert [r[0] for r in next(s.changes_since(3))] == ["a"]
    assert list(s.changes_since(4)) == []
    chunks = list(s.changes_since(0, chunk=2))
    assert [len(c) for c in chunks] == [2, 1]
    s.close()
    assert SqliteTextStore(tmp_path / "t.sqlite").last_seq == 4  # read back on open


def test_meta_is_written_with_the_batch_and_kept(tmp_path: Path) -> None:
    s = SqliteTextStore(tmp_path / "t.sqlite")
    assert s.get_meta("index_seq") is None
    s.put_many([("a", "x", 1.0)], [5], meta={"index_seq": 0})
    assert s.get_meta("index_seq") == 0
    s.set_meta("index_seq", 1)
    # a refused batch changes nothing: neither its rows nor its meta
    with pytest.raises(TypeError, match="text must be str"):
        s.put_many([("b", "y", 1.0), ("c", None, 1.0)], [1, 2], meta={"index_seq": 9})  # type: ignore[list-item]
    assert s.get_meta("index_seq") == 1 and "b" not in s and s.last_seq == 1
    s.close()
    assert SqliteTextStore(tmp_path / "t.sqlite").get_meta("index_seq") == 1


def test_bad_fingerprints_and_shapes_are_refused_by_name(tmp_path: Path) -> None:
    s = SqliteTextStore(tmp_path / "t.sqlite")
    with pytest.raises(ValueError, match="fingerprint must be an unsigned 64-bit int, got -1"):
        s.put("a", "x", fingerprint=-1)
    with pytest.raises(ValueError, match="fingerprint must be an unsigned 64-bit int"):
        s.put_many([("a", "x", None)], [2**64])
    with pytest.raises(ValueError, match="fingerprints has 2 items but rows has 1"):
        s.put_many([("a", "x", None)], [1, 2])
    with pytest.raises(TypeError, match="id must be int or str, got bool"):
        s.put_many([(True, "x", None)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="signed 64-bit"):
        s.put_many([(2**63, "x", None)])
    with pytest.raises(TypeError, match="timestamp must be float seconds or None"):
        s.put_many([("a", "x", "now")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="checkpoint_interval must be a positive number"):
        SqliteTextStore(tmp_path / "u.sqlite", checkpoint_interval=0)
    assert len(s) == 0 and s.last_seq == 0
    s.close()


def _old_store(path: Path) -> Path:
    """A store file as written before fingerprints and the ``meta`` table were kept: rows
    ``"a"`` (text "old a", time 1.0) and ``42`` ("old 42", 2.0)."""
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE texts (kind TEXT NOT NULL, key TEXT NOT NULL, text TEXT NOT NULL,"
        " ts REAL NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (kind, key)) WITHOUT ROWID"
    )
    db.executemany(
        "INSERT INTO texts VALUES (?, ?, ?, ?, ?)",
        [("s", "a", "old a", 1.0, 1), ("i", "42", "old 42", 2.0, 2)],
    )
    db.commit()
    db.close()
    return path


def test_a_file_written_before_fingerprints_were_kept_is_upgraded(tmp_path: Path) -> None:
    path = _old_store(tmp_path / "old.sqlite")
    s = SqliteTextStore(path)
    assert s.last_seq == 2
    assert next(s.changes_since(0)) == [("a", None, 1.0, "old a"), (42, None, 2.0, "old 42")]
    s.set_fingerprints([("a", 2**64 - 2), (42, 9), ("unknown", 1)])
    assert [r[1] for r in next(s.changes_since(0))] == [2**64 - 2, 9]
    assert "unknown" not in s
    s.close()


def test_background_checkpoints_copy_the_log_into_the_database(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    s = SqliteTextStore(path, background_checkpoint=True, checkpoint_interval=0.05)
    for j in range(200):
        s.put_many([(f"{j}-{i}", f"text {j} {i}", None) for i in range(10)], list(range(10)))

    def rows_in_the_database_file_alone() -> int:
        # A copy of the main file without its -wal: what the checkpoints have copied there.
        copy = tmp_path / "copy.sqlite"
        copy.write_bytes(path.read_bytes())
        db = sqlite3.connect(copy)
        try:
            return int(db.execute("SELECT COUNT(*) FROM texts").fetchone()[0])
        except sqlite3.DatabaseError:
            return -1
        finally:
            db.close()

    # The writer never checkpoints (wal_autocheckpoint=0): only the store's thread does.
    deadline = time.monotonic() + 10
    while rows_in_the_database_file_alone() != 2000 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert rows_in_the_database_file_alone() == 2000
    s.close()
    again = SqliteTextStore(path)
    assert len(again) == 2000 and again.get("199-9") == "text 199 9"
    again.close()


def test_without_background_checkpoints_the_writer_checkpoints(tmp_path: Path) -> None:
    # The default (SQLite's automatic checkpoints every ~4 MB) is unchanged; no thread started.
    s = SqliteTextStore(tmp_path / "t.sqlite")
    assert s._checkpointer is None
    s.close()


def test_big_batches_and_repeated_ids_keep_the_order_of_the_rows(tmp_path: Path) -> None:
    # 1,201 rows: several INSERT statements in one transaction; an id written twice in a
    # batch keeps its later text, like consecutive puts.
    s = SqliteTextStore(tmp_path / "t.sqlite")
    rows = [(j, f"text {j}", float(j)) for j in range(1200)] + [(7, "seven again", 5000.0)]
    s.put_many(rows, list(range(1201)))
    assert len(s) == 1200 and s.last_seq == 1201
    assert s.get(7) == "seven again" and s.get(1199) == "text 1199"
    changes = [r for c in s.changes_since(0) for r in c]
    assert changes[-1] == (7, 1200, 5000.0, None) and changes[0][:2] == (0, 0)
    assert s.expire(1000.0) == list(range(7)) + list(range(8, 1000))
    s.close()


# -- read-only ------------------------------------------------------------------------------------


def _files(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


def test_a_read_only_store_reads_what_a_writer_commits_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    w = SqliteTextStore(path)
    w.put_many([("a", "text a", 1.0), (7, "seven \ud83d", 2.0)], [1, 2**64 - 1])
    w.put("b", "text b", 3.0)  # (no fingerprint)
    # the writer is open: its commits are in the write-ahead log, not the database file yet
    r = SqliteTextStore(path, read_only=True)
    assert r.read_only and not w.read_only
    assert len(r) == 3 and r.last_seq == 3 and "a" in r and 7 in r and "zz" not in r
    assert r.get(7) == "seven \ud83d" and r.stored_row(7) == (2**64 - 1, 2.0)
    assert [(i, t) for i, t, _ in r.items()] == [
        ("a", "text a"),
        (7, "seven \ud83d"),
        ("b", "text b"),
    ]
    assert r.ids_by_seq() == (["a", 7, "b"], [1, 2, 3])
    assert [row[:2] for row in next(r.changes_since(0))] == [("a", 1), (7, 2**64 - 1), ("b", None)]
    # later commits are seen, with the sequence number the file holds now
    w.put("c", "text c", 4.0, fingerprint=5)
    assert r.get("c") == "text c" and r.last_seq == 4 and len(r) == 4
    assert [i for i, _, _ in r.items(after=3)] == ["c"]
    w.set_meta("index_seq", 4)
    assert r.get_meta("index_seq") == 4
    r.close()
    w.close()


def test_every_write_of_a_read_only_store_is_refused_before_it_does_anything(
    tmp_path: Path,
) -> None:
    from neardup.textstore import ReadOnlyTextStoreError

    path = tmp_path / "t.sqlite"
    w = SqliteTextStore(path)
    w.put_many([("a", "text a", 1.0), ("b", "text b", 2.0)], [1, 2], meta={"index_seq": 2})
    w.close()
    before = _files(tmp_path)
    r = SqliteTextStore(path, read_only=True)
    writes = [
        ("put", lambda: r.put("c", "text c")),
        ("put_many", lambda: r.put_many([("c", "text c", None)], [3], meta={"index_seq": 3})),
        ("delete", lambda: r.delete("a")),
        ("expire", lambda: r.expire(10.0)),
        ("set_meta", lambda: r.set_meta("index_seq", 9)),
        ("set_fingerprints", lambda: r.set_fingerprints([("a", 11)])),
    ]
    for name, write in writes:
        with pytest.raises(ReadOnlyTextStoreError, match=f"read-only: {name} refused") as e:
            write()
        assert isinstance(e.value, PermissionError) and e.value.filename == str(path)
    # (bad arguments too: refused as a write before they are looked at)
    with pytest.raises(PermissionError):
        r.put_many([(True, None, "now")])  # type: ignore[list-item]
    assert len(r) == 2 and r.last_seq == 2 and r.get_meta("index_seq") == 2
    assert r.stored_row("a") == (1, 1.0)
    r.close()
    # the store's file is as it was (SQLite may have made its -wal/-shm side files)
    after = _files(tmp_path)
    assert after["t.sqlite"] == before["t.sqlite"]
    assert set(after) - set(before) <= {"t.sqlite-wal", "t.sqlite-shm"}
    with pytest.raises(ValueError, match="background_checkpoint"):
        SqliteTextStore(path, read_only=True, background_checkpoint=True)


def test_a_read_only_store_is_never_made_and_a_damaged_one_is_named(tmp_path: Path) -> None:
    from neardup.textstore import CorruptTextStoreError

    missing = tmp_path / "missing.sqlite"
    with pytest.raises(FileNotFoundError) as e:
        SqliteTextStore(missing, read_only=True)
    assert e.value.filename == str(missing) and not missing.exists()
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database, " * 512)
    with pytest.raises(CorruptTextStoreError, match="junk.sqlite"):
        SqliteTextStore(junk, read_only=True)
    other = tmp_path / "other.sqlite"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    with pytest.raises(CorruptTextStoreError, match="no such table: texts"):
        SqliteTextStore(other, read_only=True)


def test_a_read_only_store_reads_a_file_written_before_fingerprints_and_meta(
    tmp_path: Path,
) -> None:
    path = _old_store(tmp_path / "old.sqlite")
    before = path.read_bytes()
    r = SqliteTextStore(path, read_only=True)
    assert r.last_seq == 2 and r.get_meta("index_seq") is None
    assert next(r.changes_since(0)) == [("a", None, 1.0, "old a"), (42, None, 2.0, "old 42")]
    assert r.stored_row(42) == (None, 2.0) and r.get(42) == "old 42"
    r.close()
    assert path.read_bytes() == before  # (not upgraded)
    db = sqlite3.connect(path)
    assert "fp" not in {row[1] for row in db.execute("PRAGMA table_info(texts)")}
    db.close()


_READ = """
import json, sys
from neardup.textstore import SqliteTextStore
try:
    s = SqliteTextStore(sys.argv[1], read_only=True)
except OSError as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
    raise SystemExit(0)
print(json.dumps({"items": [[i, t] for i, t, _ in s.items()], "last_seq": s.last_seq,
                  "get": s.get("b"), "uri": s._uri}))
s.close()
"""


def _read_as_one_who_cannot_write(path: Path) -> dict[str, object]:
    """The store at ``path`` read read-only by a process that cannot write what it lacks the
    permission to (:func:`_helpers.run_unprivileged`)."""
    import json
    import sys

    r = run_unprivileged(sys.executable, "-c", _READ, str(path))
    assert r.returncode == 0, r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


def _chmod_tree(directory: Path, writable: bool) -> None:
    for p in [*directory.iterdir(), directory]:
        if p.is_dir():
            p.chmod(0o755 if writable else 0o555)
        else:
            p.chmod(0o644 if writable else 0o444)


def test_a_store_in_a_directory_that_cannot_be_written_is_read_as_it_is(tmp_path: Path) -> None:
    # closed cleanly: every row in the database file, no -wal or -shm beside it, and none can
    # be made: read immutable
    clean = tmp_path / "clean"
    clean.mkdir()
    w = SqliteTextStore(clean / "t.sqlite")
    w.put_many([("a", "text a", 1.0), ("b", "text b", 2.0)], [1, 2])
    w.close()
    assert sorted(p.name for p in clean.iterdir()) == ["t.sqlite"]
    # a writer that closed while a reader was open: the rows are in the write-ahead log, read
    # through its -shm file (read-only)
    logged = tmp_path / "logged"
    logged.mkdir()
    w = SqliteTextStore(logged / "t.sqlite")
    w.put_many([("a", "text a", 1.0), ("b", "text b", 2.0)], [1, 2])
    r = SqliteTextStore(logged / "t.sqlite", read_only=True)
    assert len(r) == 2
    w.close()
    r.close()
    assert (logged / "t.sqlite-wal").stat().st_size > 0
    # a write-ahead log with rows but no -shm file (copied without it): reading it
    # immutable would miss the rows, so it is refused with what to do
    lost = tmp_path / "lost"
    lost.mkdir()
    for name in ("t.sqlite", "t.sqlite-wal"):
        (lost / name).write_bytes((logged / name).read_bytes())
    before = {d: _files(d) for d in (clean, logged, lost)}
    for d in (clean, logged, lost):
        _chmod_tree(d, writable=False)
    try:
        for d in (clean, logged):
            got = _read_as_one_who_cannot_write(d / "t.sqlite")
            assert got["items"] == [["a", "text a"], ["b", "text b"]], got
            assert got["last_seq"] == 2 and got["get"] == "text b"
            assert str(got["uri"]).endswith("immutable=1") == (d is clean)
        got = _read_as_one_who_cannot_write(lost / "t.sqlite")
        assert got["error"] == "PermissionError" and "write-ahead log" in str(got["message"])
    finally:
        for d in (clean, logged, lost):
            _chmod_tree(d, writable=True)
    assert {d: _files(d) for d in (clean, logged, lost)} == before


def test_a_damaged_row_is_reported_as_a_damaged_store(tmp_path: Path) -> None:
    """(a text that is not UTF-8 in the file -- a flipped byte -- came out as sqlite3's
    OperationalError from get() and items(): a traceback in index query and dedup --against)"""
    path = str(tmp_path / "t.sqlite")
    store = SqliteTextStore(path)
    store.put_many([(1, "first text", None), ("b", "second text", None)])
    store.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE texts SET text = CAST(x'ff41' AS TEXT) WHERE key = '1'")
    db.commit()
    db.close()
    for read_only in (False, True):
        store = SqliteTextStore(path, read_only=read_only)
        assert store.get("b") == "second text"
        with pytest.raises(CorruptTextStoreError, match="t.sqlite' is damaged: Could not dec"):
            store.get(1)
        with pytest.raises(CorruptTextStoreError, match="t.sqlite' is damaged: Could not dec"):
            list(store.items())
        store.close()
