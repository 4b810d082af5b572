"""Issue 23, item 3: damage to the text store is detected on open and reported (the file, what is
lost, the repair command), never served as a silently emptied or truncated store; after
``neardup repair`` every acknowledged document is either back or counted as lost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import words
from neardup.dedup import Deduplicator
from neardup.durable import repair
from neardup.textstore import CorruptTextStoreError

N = 300

WRITER = """
import os, sys
sys.path[:0] = [{tests!r}]
from _helpers import words
from neardup.dedup import Deduplicator
d = Deduplicator.open({root!r})
for i in range({n}):
    d.add(f"doc{{i}}", words(i, n=200))
if {kill}:
    os._exit(0)  # the write-ahead log is left as a crash leaves it
d.close()
"""


def _write(root: Path, kill: bool) -> None:
    code = WRITER.format(tests=str(Path(__file__).parent), root=str(root), n=N, kill=kill)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def _damage(path: Path, how: str) -> None:
    if how == "delete":
        path.unlink()
        return
    size = path.stat().st_size
    if how == "truncate":
        os.truncate(path, size // 2)
        return
    data = bytearray(path.read_bytes())
    if path.name == "texts.sqlite":
        # the page-type byte of a page in the middle (a flip inside a text's own bytes is not
        # detected: that needs a checksum per row)
        page = int.from_bytes(data[16:18], "big") or 65536
        at = (size // page // 2) * page
    else:
        at = size // 2
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))


CASES = [
    (kill, name, how)
    for kill in (False, True)
    for name in ("texts.sqlite", "texts.sqlite-wal", "texts.committed", "texts.sqlite*")
    for how in (("delete",) if name == "texts.sqlite*" else ("flip", "truncate", "delete"))
    # (a clean close checkpoints the WAL and removes it: test_a_clean_close_leaves_no_wal)
    if kill or name != "texts.sqlite-wal"
]


def test_a_clean_close_leaves_no_wal(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _write(root, False)
    assert (root / "texts.sqlite").exists()
    assert not (root / "texts.sqlite-wal").exists()


@pytest.mark.parametrize(("kill", "name", "how"), CASES)
def test_damage_to_the_text_store_is_detected_and_repaired(
    tmp_path: Path, kill: bool, name: str, how: str
) -> None:
    root = tmp_path / "s"
    _write(root, kill)
    targets = sorted(root.glob(name))
    assert targets, f"no {name} after a {'crash' if kill else 'clean close'}"
    for path in targets:
        _damage(path, how)
    docs = {f"doc{i}": words(i, n=200) for i in range(N)}

    try:
        d = Deduplicator.open(root)
    except CorruptTextStoreError as e:
        message = str(e)
        assert (
            "texts.sqlite" in message or name in message
        ) and f"neardup repair {root}" in message
        report = repair(str(root))
        d = Deduplicator.open(root)
        present = [i for i, text in docs.items() if i in d and d.get(i) == text]
        assert len(present) == report["recovered"]
        assert report["indexed_before"] in (0, N)  # 0: the index was damaged too
        if report["indexed_before"] == N:
            assert report["lost_at_least"] == N - len(present)
    else:
        # (a damaged or missing record of the last commit cannot be checked against: reported)
        assert name != "texts.committed", "opened with its record of commits damaged"
        # opened without a word: then nothing acknowledged may be missing
        for i, text in docs.items():
            assert d.get(i) == text
    assert len(d) == len(d.index)
    for i in [i for i in docs if i in d][:20]:
        assert i in [m.id for m in d.check(docs[i])]
    d.close()


def test_repair_does_not_serve_the_engine_saved_before_it(tmp_path: Path) -> None:
    # The engine saved beside the texts (texts.engine) is of the old store: repair renumbers
    # the rows, so a reopen could not tell that the file is out of date and served old texts.
    root = tmp_path / "s"
    with Deduplicator.open(root) as d:
        d.add_many(["a", "b", "c"], [words(1, n=60), words(2, n=60), words(3, n=60)])
    assert (root / "texts.engine").exists()
    script = (
        "import os, sys\n"
        "from neardup import Deduplicator\n"
        f"d = Deduplicator.open({str(root)!r})\n"
        f"d.add('c', {words(4, n=60)!r})\n"
        "os._exit(9)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=False)
    repair(str(root))
    with Deduplicator.open(root) as d:
        assert d.get("c") == words(4, n=60)
        assert [m.id for m in d.check(words(4, n=60))] == ["c"]
        assert d.check(words(3, n=60)) == []


def test_repair_keeps_every_row_off_a_damaged_page(tmp_path: Path) -> None:
    """One damaged leaf page of the texts table: repair keeps the rows of every other page
    (it used to drop a whole batch of 10,000 read rows, and all rows after the damage)."""
    import sqlite3

    root = tmp_path / "s"
    docs = {f"doc{i}": words(i, n=200) for i in range(1500)}
    with Deduplicator.open(root) as d:
        d.add_many(list(docs), list(docs.values()))
    path = root / "texts.sqlite"
    with sqlite3.connect(path) as c:
        page = c.execute("PRAGMA page_size").fetchone()[0]
        leaves = [p for (p,) in c.execute(
            "SELECT pageno FROM dbstat WHERE name = 'texts' AND pagetype = 'leaf' ORDER BY path"
        )]  # fmt: skip
        per_leaf = c.execute(
            "SELECT max(ncell) FROM dbstat WHERE name = 'texts' AND pagetype = 'leaf'"
        ).fetchone()[0]
    assert len(leaves) > 10
    with open(path, "r+b") as f:  # (a page in the middle of the table)
        f.seek((leaves[len(leaves) // 2] - 1) * page)
        f.write(b"\xff" * page)
    with pytest.raises(CorruptTextStoreError):
        Deduplicator.open(root)
    report = repair(str(root))
    assert len(docs) - per_leaf <= report["recovered"] < len(docs)
    with Deduplicator.open(root) as d:
        present = [i for i, text in docs.items() if i in d and d.get(i) == text]
        assert len(present) == report["recovered"] == len(d)


def test_repair_of_a_directory_in_use_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Deduplicator.open(root) as d:
        d.add("a", words(1, n=50))
        before = sorted(os.listdir(root))
        r = subprocess.run(
            [sys.executable, "-m", "neardup", "repair", str(root)], capture_output=True, text=True
        )
        assert r.returncode == 1 and "open in another process" in r.stderr
        assert "Traceback" not in r.stderr and sorted(os.listdir(root)) == before
        assert d.get("a") == words(1, n=50)


def test_salvage_reads_a_store_written_before_fingerprints_were_kept(tmp_path: Path) -> None:
    import sqlite3

    from neardup.textstore import SqliteTextStore

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as c:
        c.execute(
            "CREATE TABLE texts (kind TEXT NOT NULL, key TEXT NOT NULL, text TEXT NOT NULL,"
            " ts REAL NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (kind, key)) WITHOUT ROWID"
        )
        c.executemany(
            "INSERT INTO texts VALUES (?, ?, ?, ?, ?)",
            [("s", f"d{i}", f"text {i}", 1.0 + i, i + 1) for i in range(100)],
        )
    rows, error = SqliteTextStore.salvage(path)
    assert error is None and len(rows) == 100 and rows[0] == ("d0", "text 0", 1.0, None)


def _repair_cli(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neardup", "repair", str(root)], capture_output=True, text=True
    )


def _files(root: Path) -> dict[str, bytes]:
    """The files of a data directory and their bytes (but SQLite's -shm and -wal, which a
    reader may make), the index's too."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(("-shm", "-wal"))
    }


@pytest.mark.parametrize("how", ["missing", "edited", "garbage"])
def test_repair_refuses_a_policy_it_cannot_trust_and_changes_nothing(
    tmp_path: Path, how: str
) -> None:
    """(repair wrote the default policy in place of a missing policy.json, or took an edited
    one, and the directory then opened with a policy it was not made with; a damaged file was
    a traceback)"""
    from neardup.policy import Policy

    root = tmp_path / "s"
    made = Policy.default().replace(threshold=0.5, shingle=3)
    with Deduplicator.open(root, policy=made) as d:
        d.add_many(["a", "b"], [words(1, n=40), words(2, n=40)])
    policy = root / "policy.json"
    kept = policy.read_bytes()
    if how == "missing":
        policy.unlink()
    elif how == "edited":
        policy.write_text(kept.decode().replace("0.5", "0.3"))
    else:
        policy.write_bytes(b"{not json")
    before = _files(root)
    r = _repair_cli(root)
    assert r.returncode == 1 and "policy.json" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and _files(root) == before
    policy.write_bytes(kept)  # restored: repair goes ahead with the policy it was made with
    assert _repair_cli(root).returncode == 0
    with Deduplicator.open(root) as d:
        assert d.policy == made and len(d) == 2


def test_repair_of_a_directory_whose_index_is_damaged_too(tmp_path: Path) -> None:
    """(the damaged index was moved aside and a new empty one counted: "the index held 0 items,
    at least 0 lost", and the folder the report named held the empty index)"""
    root = tmp_path / "s"
    _write(root, False)
    for f in (root / "index").iterdir():
        if f.name.startswith(("snapshot", "wal")) and f.stat().st_size > 64:
            _damage(f, "flip")
    _damage(root / "texts.sqlite", "flip")
    r = _repair_cli(root)
    assert r.returncode == 0, r.stderr
    assert "the index was damaged too" in r.stderr
    report = __import__("json").loads(r.stdout)
    assert report["indexed_before"] is None and report["lost_at_least"] is None
    damaged = Path(report["moved_aside"]) / "index"
    assert sum(f.stat().st_size for f in damaged.iterdir()) > 1000  # (the old index, not new)
    with Deduplicator.open(root) as d:
        assert len(d) == report["recovered"] == len(d.index)


def test_repair_refuses_an_index_of_another_fingerprint_configuration(tmp_path: Path) -> None:
    from neardup import Index

    root = tmp_path / "s"
    with Deduplicator.open(root) as d:
        d.add("a", words(1, n=50))
    for f in (root / "index").iterdir():
        f.unlink()
    Index.open(root / "index", k=13, fingerprint_config={"preset": "seed000"}).close()
    before = _files(root)
    r = _repair_cli(root)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert _files(root) == before
