"""The durable store of ``Deduplicator.open`` (the service's ``open_store``): one durable log,
the index caught up from it.

What a power cut can do to the lazily synced index is simulated exactly: the index directory is
put back to a copy taken at its last recorded sync (what was on disk then), and reopening must
bring back every document written since, with its current fingerprint.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from _helpers import near_copy, words
from neardup import Index
from neardup.dedup import Deduplicator, Policy
from neardup.service.store import LogDeduplicator, open_store
from neardup.textstore import SqliteTextStore

POLICY = Policy.default()


def _fingerprint(d: Deduplicator, text: str) -> int:
    return int(d.fingerprinter.fingerprint(d.policy.prepare(text)))


def _assert_index_matches_texts(d: Deduplicator, expected: Mapping[Any, str]) -> None:
    assert len(d) == len(expected)
    for doc_id, text in expected.items():
        assert d.get(doc_id) == text
        assert d.index.get(doc_id)[0] == _fingerprint(d, text), doc_id
    assert len(d.index) == len(expected)


def test_writes_checks_and_reopen(tmp_path: Path) -> None:
    d = open_store(tmp_path / "s", policy=POLICY)
    assert type(d) is Deduplicator and LogDeduplicator is Deduplicator
    base = words(1, n=30)
    assert d.check_and_add("a", base) == (True, [])
    added, matches = d.check_and_add("b", near_copy(base, 1))
    assert not added and [m.id for m in matches] == ["a"]
    d.add_many([1, 2], [words(2, n=30), words(3, n=30)])
    d.close()
    again = open_store(tmp_path / "s")
    assert again.policy == POLICY  # policy.json, as Deduplicator.open keeps it
    _assert_index_matches_texts(again, {"a": base, 1: words(2, n=30), 2: words(3, n=30)})
    assert [m.id for m in again.check(near_copy(base, 2))] == ["a"]
    # a clean close recorded that the index covers every row: nothing to replay
    assert again._catch_up() == 0
    again.close()
    with pytest.raises(ValueError, match="policy differs"):
        open_store(tmp_path / "s", policy=POLICY.replace(k_short=3, k_long=3))
    with pytest.raises(ValueError, match="sync must be one of full, normal, off"):
        open_store(tmp_path / "t", sync="sometimes")


def test_index_put_back_to_its_last_sync_is_caught_up_from_the_texts(tmp_path: Path) -> None:
    root = tmp_path / "s"
    d = open_store(root, policy=POLICY)
    first = {f"d{j}": words(100 + j, n=25) for j in range(40)}
    d.add_many(list(first), list(first.values()))
    d.close()  # the index is synced and the text store records it
    on_disk_then = tmp_path / "index-at-last-sync"
    shutil.copytree(root / "index", on_disk_then)
    seq_then = _meta(root, "index_seq")
    assert seq_then == 40

    d = open_store(root)
    d.index_flush_interval = 3600.0  # no sync of the index during this session
    later = {f"e{j}": words(500 + j, n=25) for j in range(30)}
    for doc_id, text in later.items():
        assert d.check_and_add(doc_id, text)[0]
    replaced = {"d3": words(900, n=25), "d7": words(901, n=25)}  # new texts, new fingerprints
    d.add_many(list(replaced), list(replaced.values()))
    # The power cut: the texts' transactions were synced, the index's log was not (both the
    # index files and the recorded sync point are what they were at the last sync).
    d.index.close()
    d.store.close()
    shutil.rmtree(root / "index")
    shutil.copytree(on_disk_then, root / "index")
    _set_meta(root, "index_seq", seq_then)

    again = open_store(root)
    expected = {**first, **later, **replaced}
    _assert_index_matches_texts(again, expected)
    # the old text of a replaced id is no longer found; its new one is
    assert "d3" not in [m.id for m in again.check(first["d3"])]
    assert [m.id for m in again.check(replaced["d3"])] == ["d3"]
    assert not again.check_and_add("x", near_copy(later["e5"], 3))[0]
    assert _meta(root, "index_seq") == 72  # caught up and recorded
    again.close()


def test_a_damaged_or_missing_index_is_rebuilt_from_the_texts(tmp_path: Path) -> None:
    root = tmp_path / "s"
    d = open_store(root, policy=POLICY)
    docs = {j: words(300 + j, n=25) for j in range(25)}
    d.add_many(list(docs), list(docs.values()))
    d.close()
    snapshots = list((root / "index").glob("snapshot-*.bin"))
    assert snapshots
    for snap in snapshots:
        snap.write_bytes(b"\x00" * 64)  # checksum fails: CorruptIndexError
    again = open_store(root)
    _assert_index_matches_texts(again, docs)
    assert list(root.glob("index.corrupt-*"))  # moved aside, not deleted
    again.close()

    shutil.rmtree(root / "index")
    rebuilt = open_store(root)
    _assert_index_matches_texts(rebuilt, docs)
    rebuilt.close()


def _open_as_before(root: Path) -> Deduplicator:
    """A directory opened the way Deduplicator.open did before the text store kept the
    fingerprints: an index synced on every write, texts stored without fingerprints, and the
    stored texts missing from the index fingerprinted again on open."""
    policy_file = root / "policy.json"
    if not policy_file.exists():
        root.mkdir(parents=True, exist_ok=True)
        policy_file.write_text(json.dumps(POLICY.to_dict()), encoding="utf-8")
    policy = Policy.from_dict(json.loads(policy_file.read_text(encoding="utf-8")))
    index = Index.open(
        str(root / "index"),
        k=policy.k_max,
        sync="always",
        fingerprint_config=json.dumps(policy.fingerprint, sort_keys=True),
    )
    d = Deduplicator(policy=policy, index=index, store=SqliteTextStore(root / "texts.sqlite"))
    for doc_id, text, ts in list(d.store.items()):
        if doc_id not in d.index:
            d.index.add(doc_id, _fingerprint(d, text), ts)
    return d


def test_directories_are_interchangeable_with_the_former_deduplicator_open(
    tmp_path: Path,
) -> None:
    root = tmp_path / "s"
    old = _open_as_before(root)
    docs = {f"o{j}": words(700 + j, n=25) for j in range(20)}
    old.add_many(list(docs), list(docs.values()))
    old.close()
    assert _meta(root, "index_seq") is None
    d = Deduplicator.open(root)  # rows without fingerprints: taken from the index, then kept
    _assert_index_matches_texts(d, docs)
    assert isinstance(d.store, SqliteTextStore)
    assert all(fp is not None for fp in (r[1] for c in d.store.changes_since(0) for r in c))
    d.add("n1", words(800, n=25))
    d.close()
    docs["n1"] = words(800, n=25)
    back = _open_as_before(root)
    assert len(back) == 21 and [m.id for m in back.check(near_copy(docs["n1"], 1))] == ["n1"]
    back.add("o1", words(801, n=25))  # a replacement written without its fingerprint
    back.close()
    docs["o1"] = words(801, n=25)
    d = open_store(root)
    _assert_index_matches_texts(d, docs)
    assert "o1" not in [m.id for m in d.check(words(701, n=25))]
    d.close()


def test_library_open_keeps_fingerprints_and_flush_records_the_index(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    d = Deduplicator.open(root, policy=POLICY)
    d.index_flush_interval = 3600.0
    docs = {j: words(1000 + j, n=25) for j in range(12)}
    d.add_many(list(docs)[:6], list(docs.values())[:6])
    for doc_id in list(docs)[6:]:
        assert d.check_and_add(doc_id, docs[doc_id])[0]
    assert isinstance(d.store, SqliteTextStore)
    stored = {r[0]: r[1] for c in d.store.changes_since(0) for r in c}
    assert stored == {j: _fingerprint(d, t) for j, t in docs.items()}
    assert _meta(root, "index_seq") == 0  # the empty index synced on open; nothing since
    d.flush()
    assert _meta(root, "index_seq") == 12
    assert d._catch_up() == 0
    d.close()
    with pytest.raises(ValueError, match="closed"):
        d.flush()


def test_remove_and_expire(tmp_path: Path) -> None:
    d = open_store(tmp_path / "s", policy=POLICY, sync="normal")
    d.add("old", words(1, n=25), timestamp=1000.0)
    d.add("new", words(2, n=25))
    d.remove("new")
    with pytest.raises(KeyError):
        d.remove("new")
    assert d.expire(2000.0) == 1
    assert len(d) == 0 and len(d.index) == 0
    d.close()
    again = open_store(tmp_path / "s")
    assert len(again) == 0 and len(again.index) == 0
    again.close()


def _meta(root: Path, name: str) -> int | None:
    db = sqlite3.connect(root / "texts.sqlite")
    try:
        row = db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else int(row[0])
    finally:
        db.close()


def _set_meta(root: Path, name: str, value: int) -> None:
    db = sqlite3.connect(root / "texts.sqlite")
    try:
        db.execute("UPDATE meta SET value = ? WHERE name = ?", (value, name))
        db.commit()
    finally:
        db.close()


def test_stats_count_while_a_write_holds_the_store(tmp_path: Path) -> None:
    # The count comes from a read snapshot: it neither waits for the writers' lock nor sees a
    # write that has not committed.
    d = open_store(tmp_path / "s", policy=POLICY)
    d.add_many(["a", "b"], [words(1, n=25), words(2, n=25)])
    counted: list[dict[str, Any]] = []
    with d._lock:  # what a long write call holds
        t = threading.Thread(target=lambda: counted.append(d.stats()))
        t.start()
        t.join(10)
    assert counted and counted[0]["documents"] == 2 and counted[0]["indexed"] == 2
    assert counted[0]["policy"] == POLICY.to_dict() and counted[0]["added"] == 2
    d.close()
