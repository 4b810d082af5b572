"""neardup.Index.open: durability (snapshot + WAL), config checks, damage, kill -9."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from neardup import CorruptIndexError, IncompatibleIndexError, Index

CONFIG = '{"preset": "default", "ngram": 4}'


def fp_of(i: int) -> int:
    return (i * 0x9E3779B97F4A7C15 + 12345) & (2**64 - 1)


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    with Index.open(path, k=3, fingerprint_config=CONFIG) as idx:
        idx.add_many(np.arange(1000, dtype=np.int64), [fp_of(i) for i in range(1000)], 5.0)
        idx.checkpoint()
        idx.add("s", 77, 6.0)
        idx.remove(3)
        idx.expire(before=0.0)
        assert idx.path == str(path)
    assert idx.closed
    with pytest.raises(ValueError, match="closed"):
        len(idx)
    idx2 = Index.open(path)
    assert idx2.k == 3 and idx2.fingerprint_config == CONFIG
    assert len(idx2) == 1000 and 3 not in idx2 and idx2.get("s") == (77, 6.0)
    assert idx2.query(fp_of(10), 0) == [(10, 0)]
    idx2.close()


def test_writes_survive_without_close(tmp_path: Path) -> None:
    # A process that ends without close(): the WAL has every acknowledged write.
    code = (
        "import neardup,sys; i=neardup.Index.open(sys.argv[1]);"
        "[i.add(n, n*3, 1.0) for n in range(200)]; i.remove(5); import os; os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    idx = Index.open(tmp_path)
    assert len(idx) == 199 and 5 not in idx and idx.get(199) == (597, 1.0)
    idx.close()


def test_incompatible_configuration_is_refused(tmp_path: Path) -> None:
    Index.open(tmp_path, k=4, layout=3, fingerprint_config=CONFIG).close()
    with pytest.raises(IncompatibleIndexError, match="k=4, not k=3"):
        Index.open(tmp_path, k=3)
    with pytest.raises(IncompatibleIndexError, match="layout"):
        Index.open(tmp_path, layout=5)
    with pytest.raises(IncompatibleIndexError, match="fingerprint config"):
        Index.open(tmp_path, fingerprint_config='{"preset": "seed000"}')
    # The same config as a dict or with its keys in another order is the same config.
    Index.open(tmp_path, k=4, fingerprint_config={"ngram": 4, "preset": "default"}).close()
    assert issubclass(IncompatibleIndexError, ValueError)


def test_one_writer_per_directory(tmp_path: Path) -> None:
    idx = Index.open(tmp_path)
    with pytest.raises(OSError, match="open in another"):
        Index.open(tmp_path)
    idx.close()
    Index.open(tmp_path).close()


def test_torn_tail_is_dropped_with_a_warning(tmp_path: Path) -> None:
    idx = Index.open(tmp_path)
    for i in range(10):
        idx.add(i, fp_of(i), 1.0)
    del idx
    wal = next(tmp_path.glob("wal-*.log"))
    data = wal.read_bytes()
    wal.write_bytes(data[:-7])
    with pytest.warns(RuntimeWarning, match="torn write"):
        idx = Index.open(tmp_path)
    assert len(idx) == 9 and 9 not in idx
    idx.add(9, fp_of(9), 1.0)
    idx.close()
    idx = Index.open(tmp_path)
    assert len(idx) == 10
    idx.close()


def test_corrupt_and_foreign_files_are_errors(tmp_path: Path) -> None:
    idx = Index.open(tmp_path)
    for i in range(10):
        idx.add(i, fp_of(i), 1.0)
    idx.checkpoint()
    idx.add(10, 1, 1.0)
    idx.add(11, 2, 1.0)
    del idx
    snap = next(tmp_path.glob("snapshot-*.bin"))
    good = snap.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x40
    snap.write_bytes(bytes(bad))
    with pytest.raises(CorruptIndexError, match="checksum"):
        Index.open(tmp_path)
    snap.write_bytes(good)
    wal = next(tmp_path.glob("wal-*.log"))
    wgood = wal.read_bytes()
    wbad = bytearray(wgood)
    wbad[30] ^= 0x01  # inside the first record, which is not the last
    wal.write_bytes(bytes(wbad))
    with pytest.raises(CorruptIndexError, match="checksum"):
        Index.open(tmp_path)
    wal.write_bytes(wgood)
    (tmp_path / "index.meta").write_bytes(b"PK\x03\x04 this is a zip file, not an index")
    with pytest.raises(CorruptIndexError, match="magic"):
        Index.open(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "wal-0000000000000000.log").write_bytes(b"garbage")
    with pytest.raises(CorruptIndexError, match="index.meta"):
        Index.open(other)


def test_sync_policies(tmp_path: Path) -> None:
    for sync in ["always", "group", "never"]:
        d = tmp_path / sync
        idx = Index.open(d, sync=sync, sync_interval=0.01)
        idx.add_many(list(range(100)), [fp_of(i) for i in range(100)], 1.0)
        idx.flush()
        idx.close()
        assert len(Index.open(d)) == 100
    with pytest.raises(ValueError, match="sync must be one of"):
        Index.open(tmp_path / "x", sync="sometimes")


WRITER = r"""
import sys
import neardup

path, start = sys.argv[1], int(sys.argv[2])
idx = neardup.Index.open(path, k=3, fingerprint_config=sys.argv[3])
fp = lambda i: (i * 0x9E3779B97F4A7C15 + 12345) & (2**64 - 1)
i = start
while True:
    if i % 97 == 0:
        ids = list(range(i, i + 50))
        idx.add_many(ids, [fp(j) for j in ids], [float(j) for j in ids])
        print("a", i, i + 50, flush=True)
        i += 50
        continue
    idx.add(i, fp(i), float(i))
    print("a", i, i + 1, flush=True)
    if i % 13 == 0 and i - 5 >= start:
        print("x", i - 5, flush=True)  # about to remove: its outcome is unknown until "r"
        idx.remove(i - 5)
        print("r", i - 5, flush=True)
    if i % 400 == 0:
        idx.checkpoint()
    i += 1
"""


@pytest.mark.slow
def test_kill_9_at_random_instants_loses_no_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(2024)
    path = tmp_path / "idx"
    alive: set[int] = set()
    removed: set[int] = set()
    maybe: set[int] = set()  # written when the writer died: may or may not be stored
    start = 0
    for _round in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(start), CONFIG],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(rng.uniform(0.3, 1.2))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "a":
                lo, hi = int(parts[1]), int(parts[2])
                alive.update(range(lo, hi))
                start = max(start, hi)
            elif len(parts) == 2 and parts[0] == "x":
                alive.discard(int(parts[1]))
                maybe.add(int(parts[1]))
            elif len(parts) == 2 and parts[0] == "r":
                maybe.discard(int(parts[1]))
                removed.add(int(parts[1]))
        # The write in progress when killed may or may not be there; skip past it.
        maybe.update(range(start, start + 100))
        start += 100
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a torn tail is allowed
            idx = Index.open(path, k=3, fingerprint_config=CONFIG)
        try:
            for i in alive:
                assert idx.get(i) == (fp_of(i), float(i)), i
            for i in removed:
                assert i not in idx, i
            # Nothing corrupt: every stored item is one the writer made, intact.
            a, b, _d = idx.near_pairs(0)
            assert len(a) == 0
            for i in rng.sample(sorted(alive), min(200, len(alive))):
                assert idx.query(fp_of(i), 0) == [(i, 0)]
            extra = [i for i in maybe if i in idx]
            for i in extra:
                assert idx.get(i) == (fp_of(i), float(i)), i
            assert len(idx) == len(alive) + len(extra)
        finally:
            idx.close()
    assert len(alive) > 500


def _wal(d: Path) -> Path:
    (wal,) = d.glob("wal-*.log")
    return wal


def test_a_lost_snapshot_or_log_is_an_error_not_an_empty_index(tmp_path: Path) -> None:
    # A checkpoint writes snapshot g+1, then wal-(g+1), then removes the older files; no crash
    # leaves a log newer than every snapshot, nor the newest snapshot without its log (and
    # without the one before it). Such a directory opened as an empty index, and the log
    # holding acknowledged writes was deleted.
    for lost in ("snapshot", "wal"):
        d = tmp_path / lost
        with Index.open(d, k=3) as idx:
            idx.add_many(list(range(100)), list(range(100)), 5.0)
            idx.checkpoint()
            idx.add(100, 100, 6.0)  # acknowledged, in the log
        (victim,) = d.glob(f"{lost}-*")
        victim.unlink()
        kept = sorted(p.name for p in d.iterdir())
        with pytest.raises(CorruptIndexError, match="missing"):
            Index.open(d)
        assert sorted(p.name for p in d.iterdir()) == kept  # (nothing deleted)


def test_damage_in_the_middle_of_the_log_is_not_a_torn_tail(tmp_path: Path) -> None:
    d = tmp_path / "i"
    idx = Index.open(d, k=3)
    for i in range(10):
        idx.add(i, i, 1.0)  # 10 acknowledged records
    del idx
    wal = _wal(d)
    size = wal.stat().st_size
    b = bytearray(wal.read_bytes())
    b[24 + 3] ^= 0x01  # the first record's length now runs past the end of the file
    wal.write_bytes(bytes(b))
    with pytest.raises(CorruptIndexError, match="whole records follow"):
        Index.open(d)
    assert wal.stat().st_size == size  # (not cut)


def test_a_batch_of_several_records_is_replayed_whole_or_not_at_all(tmp_path: Path) -> None:
    # A batch over 2**20 items is written as several records; a crash before its last record
    # (the call never returned) left the first ones, which were replayed.
    n = (1 << 20) + 1000
    for cut, expect in ((100, 10), (0, 10 + n)):
        d = tmp_path / f"cut{cut}"
        idx = Index.open(d, k=3)
        idx.add_many(list(range(10)), list(range(10)), 1.0)  # acknowledged before it
        idx.add_many(np.arange(10, 10 + n, dtype=np.int64), np.arange(n, dtype=np.uint64), 2.0)
        del idx
        wal = _wal(d)
        with open(wal, "r+b") as f:
            f.truncate(wal.stat().st_size - cut)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            idx = Index.open(d)
        assert len(idx) == expect
        said = " ".join(str(x.message) for x in w)
        assert ("unfinished batch" in said) == (cut > 0), said
        idx.add(-1, 7, 3.0)  # a write after the dropped batch is read back alone
        idx.close()
        assert len(Index.open(d)) == expect + 1
