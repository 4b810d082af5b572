"""SqliteTextStore as a durable log: fingerprints, sequence numbers, meta, old files,
checkpoints."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from neardup.textstore import SqliteTextStore


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


def test_a_file_written_before_fingerprints_were_kept_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
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
