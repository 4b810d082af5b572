"""Writes decided before they are durable (``durable=False`` + ``Deduplicator.commit``), the
service's group commit, and the core helpers of small batches (sketches, in-batch pairs)."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from _helpers import near_copy, words
from neardup import _core
from neardup.dedup import Deduplicator, Policy
from neardup.service.writer import CHECK_AND_ADD, SerializedWriter
from neardup.verify import jaccard_sketch, sketch

POLICY = Policy.default()


def _stored_ids(root: Path) -> set[str]:
    """The ids in the text store's file, read by a connection of this test's own."""
    db = sqlite3.connect(root / "texts.sqlite")
    try:
        return {key for (key,) in db.execute("SELECT key FROM texts")}
    finally:
        db.close()


def test_staged_writes_are_visible_at_once_and_on_disk_after_commit(tmp_path: Path) -> None:
    root = tmp_path / "s"
    d = Deduplicator.open(root, policy=POLICY)
    base = words(1, n=30)
    assert d.check_and_add("a", base, durable=False) == (True, [])
    d.add("b", words(2, n=30), durable=False)
    # decided and visible: the next check-and-add sees "a", reads see both
    added, matches = d.check_and_add("c", near_copy(base, 1), durable=False)
    assert not added and [m.id for m in matches] == ["a"]
    assert "a" in d and "b" in d and "c" not in d
    d.add("b", words(3, n=30), durable=False)  # (a second staged row of one id)
    assert len(d) == d.stats()["documents"] == 2  # (counted as `in` sees them)
    assert d.get("a") == base
    assert [m.id for m in d.check(near_copy(base, 2))] == ["a"]
    # ... but not written yet
    assert _stored_ids(root) == set()
    d.commit()
    assert _stored_ids(root) == {"a", "b"} and len(d) == 2
    d.commit()  # nothing staged: nothing to do
    d.close()


def test_a_durable_call_commits_what_was_staged_before_it(tmp_path: Path) -> None:
    root = tmp_path / "s"
    d = Deduplicator.open(root, policy=POLICY)
    base = words(3, n=30)
    d.check_and_add("a", base, durable=False)
    # adds nothing, but its answer names "a": "a" must be durable before the answer is
    added, matches = d.check_and_add("b", near_copy(base, 1))
    assert not added and [m.id for m in matches] == ["a"]
    assert _stored_ids(root) == {"a"}
    d.add("c", words(4, n=30), durable=False)
    d.remove("c")  # the store must hold what is removed: committed first
    assert "c" not in d and _stored_ids(root) == {"a"}
    d.add("e", words(5, n=30), durable=False)
    d.close()  # commits
    again = Deduplicator.open(root)
    assert sorted(map(str, _stored_ids(root))) == ["a", "e"]
    assert again.get("e") == words(5, n=30)
    again.close()


def test_commits_from_another_thread_while_writes_go_on(tmp_path: Path) -> None:
    root = tmp_path / "s"
    d = Deduplicator.open(root, policy=POLICY)
    d.index_flush_interval = 0.0  # an index sync point recorded with (nearly) every commit
    stop = threading.Event()
    commits = [0]

    def committer() -> None:
        while not stop.is_set():
            d.commit()
            commits[0] += 1

    t = threading.Thread(target=committer)
    t.start()
    rng = random.Random(5)
    expected: dict[str, str] = {}
    try:
        for b in range(40):
            ids = [f"x{b}-{j}" for j in range(8)]
            texts = [words(rng.randrange(10**9), n=20) for _ in ids]
            for (added, _), i, text in zip(
                d.check_and_add_many(ids, texts, durable=False), ids, texts
            ):
                if added:
                    expected[i] = text
    finally:
        stop.set()
        t.join()
    assert commits[0] > 0
    d.commit()
    assert _stored_ids(root) == set(expected)
    d.close()
    again = Deduplicator.open(root)
    assert len(again) == len(expected) == len(again.index)
    for i, text in expected.items():
        assert again.get(i) == text
    again.close()


_CRASH = r"""
import os, sys
from neardup.dedup import Deduplicator
d = Deduplicator.open(sys.argv[1])
d.add("kept", sys.argv[2])
d.check_and_add("lost", sys.argv[3], durable=False)
d.index.flush()  # the index log has "lost" on disk; its text never reached the store
os._exit(0)
"""


def test_a_write_lost_before_its_commit_leaves_no_trace_a_check_sees(tmp_path: Path) -> None:
    root = tmp_path / "s"
    Deduplicator.open(root, policy=POLICY).close()
    kept, lost = words(10, n=30), words(11, n=30)
    subprocess.run([sys.executable, "-c", _CRASH, str(root), kept, lost], check=True)
    d = Deduplicator.open(root)
    assert "kept" in d and "lost" not in d
    # the index entry of the lost write is never a match: the decision reads the stored texts
    assert d.check(near_copy(lost, 1)) == []
    assert d.check(near_copy(lost, 1), k=13) == []  # (nor with SimHash candidates)
    assert d.check_and_add("again", lost) == (True, [])
    assert d.check(near_copy(lost, 1))[0].id == "again"
    d.close()


async def _submit_all(writer: SerializedWriter, n: int) -> list[object]:
    import asyncio

    results = await asyncio.gather(
        *(writer.submit(CHECK_AND_ADD, j) for j in range(n)), return_exceptions=True
    )
    return list(results)


def test_writer_answers_after_the_commit_and_fails_groups_whose_commit_failed() -> None:
    import asyncio

    applied: list[int] = []
    committed: list[int] = []
    fail = [False]

    def apply(payloads: list[int]) -> list[int]:
        applied.extend(payloads)
        return [p * 10 for p in payloads]

    def commit() -> None:
        if fail[0]:
            raise OSError("disk full")
        committed.extend(applied[len(committed) :])

    writer = SerializedWriter({CHECK_AND_ADD: apply}, commit=commit)
    writer.start()
    try:
        results = asyncio.run(_submit_all(writer, 50))
        assert results == [j * 10 for j in range(50)]
        assert sorted(committed) == list(range(50))  # every answer came after its commit
        assert 1 <= writer.commits <= 50
        fail[0] = True
        results = asyncio.run(_submit_all(writer, 5))
        assert all(isinstance(r, OSError) for r in results)
        assert writer.is_alive
    finally:
        writer.stop()
    assert not writer.is_alive


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_core_sketch_equals_the_python_sketch(n: int) -> None:
    rng = random.Random(n)
    alphabet = "ab cdé中文字\U0001f600x"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        core = _core._sketch(text, n)
        assert core.dtype == np.uint32
        assert np.array_equal(core, sketch(text, n).hashes), (text, n)
    many = _core._sketch_many(["abcdef", "", "中文"], n)
    assert [list(s) for s in many] == [list(sketch(t, n).hashes) for t in ["abcdef", "", "中文"]]
    with pytest.raises(ValueError, match="shingle"):
        _core._sketch("abc", 0)


def test_core_jaccard_and_in_batch_pairs_against_brute_force() -> None:
    rng = random.Random(9)
    texts = [words(rng.randrange(50), n=rng.randrange(1, 12)) for _ in range(60)] + ["", ""]
    sketches = [sketch(t, 5).hashes for t in texts]
    for _ in range(300):
        a, b = rng.choice(sketches), rng.choice(sketches)
        assert _core._sketch_jaccard(a, b) == jaccard_sketch(a, b)
    with pytest.raises(TypeError, match="uint32"):
        _core._sketch_jaccard(np.zeros(3, np.int64), sketches[0])
    fps = [rng.getrandbits(64) for _ in range(40)] + [0, 1, 3, 2**64 - 1]
    fps += [fp ^ (1 << rng.randrange(64)) for fp in fps[:10]]
    radii = [rng.randrange(0, 40) for _ in fps]
    want = [
        (i, j, bin(fps[i] ^ fps[j]).count("1"))
        for i in range(len(fps))
        for j in range(i)
        if bin(fps[i] ^ fps[j]).count("1") <= radii[i]
    ]
    assert _core._earlier_within(fps, radii) == want
    with pytest.raises(ValueError, match="radii"):
        _core._earlier_within(fps, radii[:3])


def test_large_batches_take_the_scratch_index_path_with_the_same_answers() -> None:
    from neardup import dedup

    rng = random.Random(3)
    base = [words(rng.randrange(10**9), n=25) for _ in range(300)]
    texts = base + [near_copy(t, 1) for t in base[:300]]
    ids = list(range(len(texts)))
    small = Deduplicator(policy=POLICY).check_and_add_many(ids, texts)
    old = dedup._PAIRWISE_MAX
    dedup._PAIRWISE_MAX = 10  # force the scratch index
    try:
        large = Deduplicator(policy=POLICY).check_and_add_many(ids, texts)
    finally:
        dedup._PAIRWISE_MAX = old
    assert large == small
    assert sum(1 for added, _ in small if not added) >= 250


def test_a_policy_json_edited_damaged_or_deleted_is_refused(tmp_path: Path) -> None:
    """The directory's policy is checked against the checksum its text store recorded: an
    edited threshold was served as read, a deleted file replaced by the default policy."""
    import dataclasses

    from neardup.textstore import CorruptTextStoreError

    root = tmp_path / "d"
    made = dataclasses.replace(Policy.default(), threshold=0.5)
    with Deduplicator.open(root, policy=made) as d:
        d.add("a", words(1))
    policy_file = root / "policy.json"
    original = policy_file.read_bytes()
    policy_file.write_bytes(original.replace(b'"threshold": 0.5', b'"threshold": 0.9'))
    with pytest.raises(CorruptTextStoreError, match="not the policy the directory was made"):
        Deduplicator.open(root)
    policy_file.write_bytes(original[:-9])
    with pytest.raises(CorruptTextStoreError, match="policy.json' cannot be read"):
        Deduplicator.open(root)
    policy_file.unlink()
    with pytest.raises(CorruptTextStoreError, match="policy.json' is missing"):
        Deduplicator.open(root)
    assert not policy_file.exists()  # (nothing written by the refused open)
    with Deduplicator.open(root, policy=made) as d:  # the right policy given: taken again
        assert d.policy.threshold == 0.5 and d.get("a") == words(1)
    assert policy_file.read_bytes() == original


def test_open_refuses_a_wrong_policy_or_retention_before_making_anything(tmp_path: Path) -> None:
    root = tmp_path / "d"
    with pytest.raises(TypeError, match="policy must be a neardup.dedup.Policy, got dict"):
        Deduplicator.open(root, policy={"threshold": 0.9})  # type: ignore[arg-type]
    for bad in (float("nan"), float("inf"), 0, -1.0):
        with pytest.raises(ValueError, match="retention must be a positive number"):
            Deduplicator.open(root, retention=bad)
    assert not root.exists()
