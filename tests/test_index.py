"""neardup.Index: the contract against brute force, the API, and bad input.

Contract: ``query(fp, k)`` returns every stored item whose Hamming distance to ``fp`` is <= k
(inclusive), never one farther, with its distance, nearest first.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Union

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from neardup import Index

Id = Union[int, str]


def hamming(a: int, b: int) -> int:
    return bin(a ^ b).count("1")


class Model:
    """The reference: a dict searched by scanning."""

    def __init__(self) -> None:
        self.items: dict[Id, tuple[int, float]] = {}

    def query(self, fp: int, k: int) -> list[tuple[Id, int]]:
        out = [(i, hamming(fp, f)) for i, (f, _) in self.items.items() if hamming(fp, f) <= k]
        return sorted(out, key=lambda p: (p[1], str(p[0])))

    def pairs(self, k: int) -> set[tuple[frozenset[Id], int]]:
        ids = list(self.items)
        out = set()
        for x in range(len(ids)):
            for y in range(x + 1, len(ids)):
                d = hamming(self.items[ids[x]][0], self.items[ids[y]][0])
                if d <= k:
                    out.add((frozenset((ids[x], ids[y])), d))
        return out


def canon(found: list[tuple[Id, int]]) -> list[tuple[Id, int]]:
    return sorted(found, key=lambda p: (p[1], str(p[0])))


def flip(rng: random.Random, fp: int, d: int) -> int:
    for bit in rng.sample(range(64), d):
        fp ^= 1 << bit
    return fp


def make_data(rng: random.Random, n: int, clustered: bool) -> list[int]:
    centres = [rng.getrandbits(64) for _ in range(6)]
    if not clustered:
        return [rng.getrandbits(64) for _ in range(n)]
    return [flip(rng, rng.choice(centres), rng.randrange(0, 8)) for _ in range(n)]


def check(idx: Index, model: Model, rng: random.Random, fps: list[int], ks: list[int]) -> None:
    for k in ks:
        for j in range(15):
            q = (
                flip(rng, rng.choice(fps), rng.randrange(0, min(k + 2, 64) + 1))
                if j % 2
                else (rng.getrandbits(64))
            )
            got = idx.query(q, k)
            assert [d for _, d in got] == sorted(d for _, d in got), "nearest first"
            assert canon(got) == model.query(q, k), (k, hex(q))


@pytest.mark.parametrize("clustered", [False, True])
@pytest.mark.parametrize("layout", [None, 2, 3, 4, 6])
def test_query_matches_brute_force_for_every_k(clustered: bool, layout: int | None) -> None:
    rng = random.Random(f"{clustered}-{layout}")
    idx = Index(k=3, layout=layout)
    model = Model()
    fps = make_data(rng, 2500, clustered)
    for i, fp in enumerate(fps):
        idx.add(i, fp, 100.0)
        model.items[i] = (fp, 100.0)
    check(idx, model, rng, fps, [0, 1, 2, 3, 4, 5, 8, 10, 16, 32, 63, 64])


def test_after_deletes_replacements_and_expiry() -> None:
    rng = random.Random(42)
    idx = Index(k=3, segment_span=10.0)
    model = Model()
    fps = make_data(rng, 4000, True)
    ids: list[Id] = [f"doc{i}" if i % 2 else i for i in range(len(fps))]
    ts = [i * 0.05 for i in range(len(fps))]  # 0..200 s over 20 segments
    idx.add_many(ids, fps, ts)
    for i, fp, t in zip(ids, fps, ts):
        model.items[i] = (fp, t)
    for n, i in enumerate(ids):
        if n % 5 == 0:
            idx.remove(i)
            del model.items[i]
        elif n % 5 == 1:
            new = flip(rng, fps[n], 3)
            idx.add(i, new, ts[n])  # replace: same id, new fingerprint
            model.items[i] = (new, ts[n])
    assert len(idx) == len(model.items)
    check(idx, model, rng, fps, [0, 3, 7, 12])
    gone = idx.expire(before=77.7)
    expected = [i for i, (_, t) in model.items.items() if t < 77.7]
    assert gone == len(expected)
    for i in expected:
        del model.items[i]
    assert len(idx) == len(model.items)
    check(idx, model, rng, fps, [0, 3, 7, 12, 64])


@settings(max_examples=60, deadline=None)
@given(
    fps=st.lists(st.integers(0, 2**64 - 1), min_size=0, max_size=80),
    q=st.integers(0, 2**64 - 1),
    k=st.integers(0, 64),
    layout=st.sampled_from([None, 2, 4, 7]),
)
def test_property_query_is_exactly_the_ball(
    fps: list[int], q: int, k: int, layout: int | None
) -> None:
    idx = Index(k=3, layout=layout)
    model = Model()
    for i, fp in enumerate(fps):
        idx.add(i, fp, 0.0)
        model.items[i] = (fp, 0.0)
    # Neighbours of q at every distance, so small balls are not empty.
    for j in range(min(k, 64) + 1):
        fp = q ^ ((1 << j) - 1)
        idx.add(f"n{j}", fp, 0.0)
        model.items[f"n{j}"] = (fp, 0.0)
    assert canon(idx.query(q, k)) == model.query(q, k)


def test_near_pairs_and_clusters_match_brute_force() -> None:
    rng = random.Random(5)
    idx = Index(k=3)
    model = Model()
    fps = make_data(rng, 800, True)
    idx.add_many(np.arange(len(fps), dtype=np.int64), np.array(fps, dtype=np.uint64), 0.0)
    for i, fp in enumerate(fps):
        model.items[i] = (fp, 0.0)
    for k in [0, 3, 5]:
        a, b, d = idx.near_pairs(k)
        assert isinstance(a, np.ndarray) and a.dtype == np.int64 and d.dtype == np.int64
        got = [(frozenset((int(x), int(y))), int(z)) for x, y, z in zip(a, b, d)]
        assert len(got) == len(set(got)), "each pair once"
        assert set(got) == model.pairs(k)
    # Clusters: the connected components of the pairs, singletons omitted.
    clusters = idx.clusters(3)
    parent = {i: i for i in model.items}

    def root(x: Id) -> Id:
        while parent[x] != x:
            x = parent[x]
        return x

    for pair, _ in model.pairs(3):
        x, y = sorted(pair, key=str)
        parent[root(x)] = root(y)
    comps: dict[Id, set[Id]] = {}
    for item in model.items:
        comps.setdefault(root(item), set()).add(item)
    want = sorted(sorted(c, key=str) for c in comps.values() if len(c) > 1)
    assert sorted(sorted(c, key=str) for c in clusters) == want


def test_near_pairs_with_str_ids_returns_lists() -> None:
    idx = Index(k=2)
    idx.add("a", 0b1111)
    idx.add("b", 0b0111)
    idx.add(7, 0b0011)
    a, b, d = idx.near_pairs()
    assert isinstance(a, list) and isinstance(b, list)
    got = {(frozenset((x, y)), int(z)) for x, y, z in zip(a, b, d)}
    assert len(got) == len(a) == 3
    assert got == {(frozenset(("a", "b")), 1), (frozenset(("a", 7)), 2), (frozenset(("b", 7)), 1)}
    assert idx.clusters() == [["a", "b", 7]]


def test_api_basics() -> None:
    idx = Index(k=3)
    assert len(idx) == 0 and idx.k == 3
    idx.add(1, 2**64 - 1, timestamp=10.0)
    idx.add("x", 2**64 - 2, timestamp=11.5)
    assert 1 in idx and "x" in idx and 2 not in idx and "1" not in idx and 1.5 not in idx
    assert idx.get("x") == (2**64 - 2, 11.5)
    assert idx.query(2**64 - 1) == [(1, 0), ("x", 1)]
    # Replace: the same id again keeps one item with the new fingerprint and timestamp.
    idx.add(1, 0, timestamp=12.0)
    assert len(idx) == 2 and idx.get(1) == (0, 12.0)
    assert idx.query(2**64 - 1) == [("x", 1)]
    idx.remove("x")
    assert "x" not in idx and len(idx) == 1
    with pytest.raises(KeyError):
        idx.get("x")
    stats = idx.stats()
    assert stats["count"] == 1 and stats["memory_bytes"] > 0 and stats["blocks"] == idx.layout


def test_timestamp_none_means_now() -> None:
    idx = Index()
    before = time.time()
    idx.add(1, 5)
    assert before <= idx.get(1)[1] <= time.time()


def test_ties_are_in_time_order() -> None:
    idx = Index(k=1)
    idx.add("late", 0b10, 30.0)
    idx.add("early", 0b01, 10.0)
    idx.add("mid", 0b100, 20.0)
    assert idx.query(0) == [("early", 1), ("mid", 1), ("late", 1)]


def test_check_and_add() -> None:
    idx = Index(k=3)
    assert idx.check_and_add("a", 0xFF00) == []
    assert idx.check_and_add("b", 0xFF01) == [("a", 1)]
    assert "b" not in idx
    assert idx.check_and_add("c", 0xFF0F, k=3) == []
    assert "c" in idx


def test_query_many_and_numpy_inputs() -> None:
    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**64 - 1, size=3000, dtype=np.uint64)
    idx = Index(k=3)
    idx.add_many(np.arange(3000, dtype=np.uint64), fps, np.full(3000, 5.0))
    assert len(idx) == 3000
    res = idx.query_many(fps[:1000])
    assert [r[0] for r in res] == [(i, 0) for i in range(1000)]
    # int64 fingerprints (non-negative) and list input agree.
    assert idx.query_many(fps[:5].astype(np.int64) & 0x7FFF) == idx.query_many(
        [int(x) & 0x7FFF for x in fps[:5]]
    )
    assert idx.query(np.uint64(fps[7])) == [(7, 0)]


def test_retention_window() -> None:
    idx = Index(k=3, retention=100.0)
    for i in range(1000):
        idx.add(i, i * 7919, float(i))
    assert 0 not in idx
    assert idx.expire() >= 0
    # Kept: timestamp >= newest - retention.
    assert len(idx) == 101 and 899 in idx and 898 not in idx
    assert idx.query(999 * 7919, 0) == [(999, 0)]
    with pytest.raises(ValueError, match="retention"):
        Index().expire()


def test_concurrent_readers_with_a_writer() -> None:
    idx = Index(k=3)
    rng = np.random.default_rng(9)
    base = rng.integers(0, 2**64 - 1, size=20_000, dtype=np.uint64)
    idx.add_many(np.arange(20_000, dtype=np.int64), base, 1.0)
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(20):
                res = idx.query_many(base[:500])
                assert all((i, 0) in r for i, r in enumerate(res))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def writer() -> None:
        try:
            for j in range(20):
                more = rng.integers(0, 2**64 - 1, size=1000, dtype=np.uint64)
                idx.add_many(np.arange(10**6 + j * 1000, 10**6 + (j + 1) * 1000), more, 2.0)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(3)] + [
        threading.Thread(target=writer)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(idx) == 40_000


# ---- bad input ---------------------------------------------------------------------------


def test_bad_k() -> None:
    with pytest.raises(ValueError, match="k must be between 0 and 64, got 65"):
        Index(k=65)
    with pytest.raises(ValueError, match="got -1"):
        Index(k=-1)
    idx = Index()
    with pytest.raises(ValueError, match="got 99"):
        idx.query(1, 99)
    with pytest.raises(ValueError, match="got -2"):
        idx.near_pairs(-2)


def test_bad_fingerprints() -> None:
    idx = Index()
    with pytest.raises(ValueError, match=r"unsigned 64-bit.*-5"):
        idx.add(1, -5)
    with pytest.raises(ValueError, match=str(2**64)):
        idx.add(1, 2**64)
    with pytest.raises(TypeError, match="fingerprint must be an int, not str"):
        idx.add(1, "ff")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fingerprint must be an int, not float"):
        idx.query(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="-3 at position 1"):
        idx.add_many([1, 2], np.array([1, -3], dtype=np.int64))
    with pytest.raises(TypeError, match="dtype <f8|float64"):
        idx.add_many([1, 2], np.array([1.0, 2.0]))
    # (no timestamps given: the message named three lengths, one per fingerprint for them)
    with pytest.raises(
        ValueError, match=r"^ids and fingerprints must have the same length, got 3 and 2$"
    ):
        idx.add_many([1, 2, 3], [1, 2])
    with pytest.raises(
        ValueError, match="timestamps must have the length of ids and fingerprints, got 1 for 2"
    ):
        idx.add_many([1, 2], [1, 2], [1.0])
    assert len(idx) == 0


def test_bad_ids_and_timestamps() -> None:
    idx = Index()
    with pytest.raises(TypeError, match="id must be int or str, not float"):
        idx.add(1.5, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="signed 64-bit"):
        idx.add(2**63, 3)
    with pytest.raises(TypeError, match="dtype"):
        idx.add_many(np.array([1.0]), [3])
    with pytest.raises(ValueError, match=str(2**63) + " at position 0"):
        idx.add_many(np.array([2**63], dtype=np.uint64), [3])
    with pytest.raises(ValueError, match="timestamp must be a finite"):
        idx.add(1, 3, float("nan"))
    with pytest.raises(KeyError, match="nope"):
        idx.remove("nope")
    with pytest.raises(KeyError, match="17"):
        idx.remove(17)
    with pytest.raises(ValueError, match="layout"):
        Index(layout=1)
    with pytest.raises(ValueError, match="retention"):
        Index(retention=-1.0)
    assert len(idx) == 0


def test_batch_calls_work_in_a_forked_child() -> None:
    # rayon's threads do not survive fork(): the child must run batches on its own thread.
    import os

    idx = Index(k=3)
    fps = np.random.default_rng(1).integers(0, 2**63, size=5000, dtype=np.uint64)
    idx.add_many(np.arange(5000), fps, 1.0)
    idx.query_many(fps[:1000])  # the parent's pool is running
    pid = os.fork()
    if pid == 0:  # child: exit code 0 when every query found its item
        try:
            res = idx.query_many(fps[:1000])
            os._exit(0 if all(r and r[0][1] == 0 for r in res) else 1)
        except BaseException:
            os._exit(2)
    deadline = time.time() + 60
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("query_many in a forked child hung")


def test_arrays_of_other_shapes_and_strided_views() -> None:
    # An id array of 0 or 2 dimensions recursed in the binding until the stack overflowed (a
    # segfault); a column of a 2-D array (a strided view) was refused with a message that named
    # nothing.
    idx = Index(k=3)
    bads: list[Any] = [
        np.arange(4, dtype=np.int64).reshape(2, 2),
        np.array(5),
        np.arange(4, dtype=np.int32).reshape(2, 2),
    ]
    for bad in bads:
        with pytest.raises(ValueError, match="ids must be a 1-D array"):
            idx.add_many(bad, [1, 2])
    assert len(idx) == 0
    table = np.zeros((5, 3), dtype=np.uint64)
    table[:, 0], table[:, 1], table[:, 2] = np.arange(5), np.arange(100, 105), 7
    strided = Index(k=3)
    strided.add_many(table[:, 0].astype(np.int64)[::1], table[:, 1], table[:, 2].astype(np.float64))
    ids = np.arange(10, dtype=np.int64)[::2]
    strided.add_many(ids, np.arange(200, 205, dtype=np.uint64), np.arange(10.0)[::2])
    plain = Index(k=3)
    plain.add_many(np.arange(5), np.arange(100, 105, dtype=np.uint64), 7.0)
    plain.add_many(
        np.array([0, 2, 4, 6, 8]), np.arange(200, 205, dtype=np.uint64), [0.0, 2.0, 4.0, 6.0, 8.0]
    )
    queries = table[:, 1]
    assert strided.query_many(queries) == plain.query_many(np.ascontiguousarray(queries))
    assert [strided.get(i) for i in (0, 4, 6)] == [plain.get(i) for i in (0, 4, 6)]
