"""The core's one thread pool (crates/neardup-core/src/parallel.rs) after fork() and with
NEARDUP_NUM_THREADS: fingerprint_many, Index.query_many and Index.near_pairs give the same
results in a forked child (whose parent had run them all on its pool) and on one thread."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from neardup import Fingerprinter, Index

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi".split()


def _docs(n: int) -> list[str]:
    rng = random.Random(7)
    base = [" ".join(rng.choice(WORDS) for _ in range(120)) for _ in range(n // 2)]
    # Each base text and an edited copy (one word replaced): near duplicates.
    out = []
    for d in base:
        words = d.split()
        words[rng.randrange(len(words))] = "omega"
        out += [d, " ".join(words)]
    return out


def _results() -> dict[str, Any]:
    """Everything the batch calls return, as plain JSON-able lists (big enough to go parallel)."""
    fps = Fingerprinter().fingerprint_many(_docs(3000))
    rng = np.random.default_rng(3)
    rand = rng.integers(0, 2**63, size=6000, dtype=np.uint64)
    # Copies of 2000 random fingerprints with 1 to 5 bits flipped: pairs at k=3 and at k=6.
    flips = np.zeros(2000, dtype=np.uint64)
    for step in range(5):
        bit = rng.integers(0, 64, size=2000).astype(np.uint64)
        on = rng.integers(0, 5, size=2000) >= step
        flips ^= np.where(on, np.uint64(1) << bit, np.uint64(0))
    all_fps = np.concatenate([fps, rand, rand[:2000] ^ flips])
    idx = Index(k=3)
    idx.add_many(np.arange(len(all_fps), dtype=np.int64), all_fps, 1.0)
    out: dict[str, Any] = {"fingerprints": fps.tolist()}
    # 1000 queries: the grouped search; 6000: the sorted sweep (at least 4096 queries).
    out["query_many_1000"] = idx.query_many(all_fps[:1000])
    out["query_many_6000"] = idx.query_many(all_fps[-6000:])
    out["query_many_k6"] = idx.query_many(all_fps[:1000], k=6)
    for k in (3, 6):  # k=3: the sorted blocks; k=6: the self-join
        a, b, d = idx.near_pairs(k)
        out[f"near_pairs_{k}"] = [[int(x) for x in col] for col in (a, b, d)]
    # Round trip so tuples and lists compare alike across processes.
    return json.loads(json.dumps(out))


def _check_not_trivial(res: dict[str, Any]) -> None:
    # The data must make every call return something to compare.
    assert len(res["fingerprints"]) == 3000
    assert all(r and r[0][1] == 0 for r in res["query_many_6000"])
    assert sum(len(r) > 1 for r in res["query_many_6000"]) >= 1000
    assert len(res["near_pairs_3"][0]) >= 1000
    assert len(res["near_pairs_6"][0]) > len(res["near_pairs_3"][0])


def _child(conn: Connection) -> None:
    conn.send(_results())
    conn.close()


@pytest.fixture(scope="module")
def parent_results() -> dict[str, Any]:
    res = _results()  # the parent's pool has run every batch call
    _check_not_trivial(res)
    return res


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX")
def test_forked_child_gets_the_parents_results(parent_results: dict[str, Any]) -> None:
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(send,))
    p.start()
    send.close()
    try:
        assert recv.poll(120), "batch calls hung in a forked child"
        got = recv.recv()
    finally:
        p.join(30)
        if p.is_alive():
            p.kill()
    assert p.exitcode == 0
    for key, want in parent_results.items():
        assert got[key] == want, key


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX")
def test_forked_child_of_a_forked_child(parent_results: dict[str, Any]) -> None:
    # Each child builds its own pool; a grandchild must not reuse its parent's either.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 3
        signal.alarm(120)  # a hung child dies; the parent then reads no byte
        try:
            _results()
            inner = os.fork()
            if inner == 0:
                signal.alarm(120)
                os._exit(0 if _results() == parent_results else 1)
            _, status = os.waitpid(inner, 0)
            code = os.waitstatus_to_exitcode(status)
        finally:
            os.write(w, bytes([code]))
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = f.read(1)
    os.waitpid(pid, 0)
    assert got == bytes([0])


@pytest.mark.parametrize("threads", ["1", "3"])
def test_num_threads_env_gives_identical_results(
    threads: str, parent_results: dict[str, Any]
) -> None:
    here = str(Path(__file__).resolve().parent)
    code = (
        f"import json, sys; sys.path.insert(0, {here!r}); "
        "from test_parallel_fork import _results; print(json.dumps(_results()))"
    )
    env = {**os.environ, "NEARDUP_NUM_THREADS": threads}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    for key, want in parent_results.items():
        assert got[key] == want, key
