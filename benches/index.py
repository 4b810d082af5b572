"""Benchmark: neardup.Index against its peers, in one process, on the same fingerprints.

Peers: faiss (IndexBinaryMultiHash(64, 4, 16), IndexBinaryHash(64, 16) with nflip = k,
IndexBinaryFlat; range search with radius k + 1 since faiss is strict <), gaoya's SimHash index
(it takes texts, not fingerprints: measured on its own text corpus with neardup on the same
signatures), the PyPI ``simhash`` SimhashIndex (pure Python: built for a limited time) and a
numpy brute-force scan. Data: random 64-bit fingerprints with planted neighbours (1% of items are
copies of another with 1..k bits flipped); half the queries are stored fingerprints with 0..k
bits flipped, half random.

Reports per engine: build time, memory per item (RSS growth; neardup also its own count, and
for four id/timestamp workloads, see ``workload``), single
query p50/p99 from Python, batch queries/s, near_pairs time, and agreement of the result sets
with brute force. Run: ``python benches/index.py --quick`` (1 M) or ``python benches/index.py``
(1 M and 10 M). Install the peers with ``pip install faiss-cpu gaoya simhash``.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from neardup import Index

U64 = npt.NDArray[np.uint64]


def rss_bytes() -> int:
    """Resident memory, after handing freed heap back to the OS (so one engine's freed memory
    is not counted as, or reused by, the next)."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass
class Row:
    engine: str
    n: int
    build_s: float | None = None
    bytes_per_item: float | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    batch_qps: float | None = None
    pairs_s: float | None = None
    agreement: str = ""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def make_data(n: int, k: int, seed: int = 7) -> tuple[U64, U64]:
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    planted = n // 100
    src = rng.integers(0, n, size=planted)
    dst = rng.integers(0, n, size=planted)
    fps[dst] = flip(rng, fps[src], k)
    nq = 20_000
    near = flip(rng, fps[rng.integers(0, n, size=nq // 2)], k)
    far = rng.integers(0, 2**64 - 1, size=nq - nq // 2, dtype=np.uint64, endpoint=True)
    queries = np.concatenate([near, far])
    rng.shuffle(queries)
    return fps, queries


def flip(rng: np.random.Generator, fps: U64, k: int) -> U64:
    """Each fingerprint with 0..k distinct random bits flipped."""
    out = fps.copy()
    for i in range(len(out)):
        bits = rng.choice(64, size=int(rng.integers(0, k + 1)), replace=False)
        mask = 0
        for b in bits:
            mask |= 1 << int(b)
        out[i] ^= np.uint64(mask)
    return out


def brute(fps: U64, q: int, k: int) -> set[int]:
    return set(np.flatnonzero(np.bitwise_count(fps ^ np.uint64(q)) <= k).tolist())


def latencies(fn: Callable[[int], Any], queries: Sequence[int]) -> tuple[float, float]:
    lat = []
    for q in queries:
        t0 = time.perf_counter_ns()
        fn(q)
        lat.append(time.perf_counter_ns() - t0)
    lat.sort()
    return lat[len(lat) // 2] / 1e3, lat[int(len(lat) * 0.99)] / 1e3


def agreement(got: Callable[[int], set[int]], fps: U64, queries: Sequence[int], k: int) -> str:
    same = sum(got(q) == brute(fps, q, k) for q in queries)
    return f"{same}/{len(queries)}"


def build_measured(
    fps: U64, k: int, args: argparse.Namespace, row: Row, layout: int | None = None
) -> Index:
    """Build an Index for ``k`` over ``fps`` (ids 0..n, one timestamp), recording the build
    time, the RSS growth per item and the index's own count in ``row``. ``layout``: blocks
    (None: ``--layout``, else automatic)."""
    n = len(fps)
    gc.collect()
    before = rss_bytes()
    t = time.perf_counter()
    idx = Index(k=k, capacity=n, layout=layout or args.layout)
    idx.add_many(np.arange(n, dtype=np.int64), fps, 1.0)
    row.build_s = time.perf_counter() - t
    row.bytes_per_item = (rss_bytes() - before) / n
    stats = idx.stats()
    row.extra["own_bytes_per_item"] = stats["bytes_per_item"]
    row.note = f"layout={idx.layout} blocks; own count {stats['bytes_per_item']:.1f} B/item"
    return idx


DAY0 = 1_767_225_600  # 2026-01-01 00:00 UTC, a whole day: one day segment holds the data


def workload(n: int, kind: str, seed: int = 11) -> tuple[npt.NDArray[np.int64], Any]:
    """Ids and timestamps of a memory workload: ``seq-shared`` (ids 0..n, one timestamp for the
    batch), ``seq-ms`` (ids 0..n, per-item timestamps in whole milliseconds over one day, in
    arrival order), ``rand-ms`` (random 64-bit ids, the same timestamps), ``rand-float``
    (random ids, ``time.time()``-like float timestamps over one day: no common unit)."""
    rng = np.random.default_rng(seed)
    if kind.startswith("seq"):
        ids = np.arange(n, dtype=np.int64)
    else:
        ids = rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64, endpoint=True)
    if kind.endswith("shared"):
        return ids, float(DAY0)
    if kind.endswith("ms"):
        ms = np.sort(rng.integers(0, 86_400_000, size=n, dtype=np.int64))
        return ids, (DAY0 * 1000 + ms) / 1000.0
    return ids, DAY0 + np.sort(rng.random(n)) * 86_399.0


MEMORY_KINDS = ["seq-shared", "seq-ms", "rand-ms", "rand-float"]


def bench_memory(fps: U64, queries: U64, k: int, args: argparse.Namespace) -> list[Row]:
    """Memory per item (own count and RSS growth) of one ``add_many`` under each id/timestamp
    workload, with p50 and agreement with brute force (ids mapped back to positions)."""
    rows = []
    n = len(fps)
    for kind in args.memory:
        ids, ts = workload(n, kind)
        row = Row(f"neardup memory: {kind}", n)
        gc.collect()
        before = rss_bytes()
        t = time.perf_counter()
        idx = Index(k=k, capacity=n, layout=args.layout)
        idx.add_many(ids, fps, ts)
        row.build_s = time.perf_counter() - t
        row.bytes_per_item = (rss_bytes() - before) / n
        own = idx.stats()["bytes_per_item"]
        row.extra["own_bytes_per_item"] = own
        row.note = f"own count {own:.2f} B/item"
        ql = [int(q) for q in queries[:2000]]
        row.p50_us, row.p99_us = latencies(idx.query, ql)
        pos = {int(i): j for j, i in enumerate(ids.tolist())}

        def found(q: int, idx: Index = idx, pos: dict[int, int] = pos) -> set[int]:
            return {pos[int(i)] for i, _ in idx.query(q)}

        row.agreement = agreement(found, fps, ql[: min(args.check, 50)], k)
        del idx, pos
        rows.append(row)
    return rows


def bench_neardup(fps: U64, queries: U64, k: int, args: argparse.Namespace) -> Row:
    n = len(fps)
    row = Row("neardup", n)
    idx = build_measured(fps, k, args, row)
    ql = [int(q) for q in queries[: args.queries]]
    idx.query(ql[0])
    row.p50_us, row.p99_us = latencies(idx.query, ql)
    batch = np.concatenate([queries] * max(1, args.batch // len(queries)))
    best = best_cpu = 0.0
    for _ in range(3):
        t, c = time.perf_counter(), time.process_time()
        idx.query_many(batch)
        best = max(best, len(batch) / (time.perf_counter() - t))
        best_cpu = max(best_cpu, len(batch) / max(time.process_time() - c, 1e-9))
    row.batch_qps = best
    # Queries per CPU second of the process: what the batch costs when the cores are shared.
    row.extra["batch_per_cpu_s"] = best_cpu
    t = time.perf_counter()
    a, _b, _d = idx.near_pairs(k)
    row.pairs_s = time.perf_counter() - t
    row.extra["pairs"] = len(a)
    sample = ql[: args.check]
    row.agreement = agreement(lambda q: {int(i) for i, _ in idx.query(q)}, fps, sample, k)
    row.note += f"; batch {best_cpu:,.0f} q per CPU s"
    if args.persist:
        # Durable index: one add_many (one WAL record, one fsync), checkpoint, reopen.
        import shutil
        import tempfile

        tmp = tempfile.mkdtemp(prefix="neardup-bench-")
        try:
            t = time.perf_counter()
            with Index.open(tmp, k=k, capacity=n) as durable:
                durable.add_many(np.arange(n, dtype=np.int64), fps, 1.0)
                durable.checkpoint()
            row.extra["durable_build_s"] = time.perf_counter() - t
            t = time.perf_counter()
            reopened = Index.open(tmp)
            row.extra["open_s"] = time.perf_counter() - t
            assert len(reopened) == n
            reopened.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        row.note += (
            f"; durable add_many+checkpoint {row.extra['durable_build_s']:.1f} s,"
            f" reopen {row.extra['open_s']:.1f} s"
        )
    return row


def bench_large_k(fps: U64, queries: U64, spec: str, args: argparse.Namespace) -> Row:
    """An index built for a larger k (short texts use k = 13): its tables keep whole
    fingerprints, so the many candidates of a large-k query are checked where they lie.
    ``spec``: ``K`` or ``K:BLOCKS`` (a layout instead of the automatic one)."""
    n = len(fps)
    k_text, _, blocks = spec.partition(":")
    k = int(k_text)
    row = Row(f"neardup k={k}" + (f" layout={blocks}" if blocks else "") + " (own index)", n)
    idx = build_measured(fps, k, args, row, int(blocks) if blocks else None)
    ql = [int(q) for q in queries[: min(args.queries, 2000)]]
    idx.query(ql[0])
    row.p50_us, row.p99_us = latencies(idx.query, ql)
    batch = queries[:20_000]
    t = time.perf_counter()
    idx.query_many(batch)
    row.batch_qps = len(batch) / (time.perf_counter() - t)
    sample = ql[: min(args.check, 50)]
    row.agreement = agreement(lambda q: {int(i) for i, _ in idx.query(q)}, fps, sample, k)
    return row


def bench_numpy(fps: U64, queries: U64, k: int, args: argparse.Namespace) -> list[Row]:
    row = Row("numpy scan", len(fps))
    row.bytes_per_item = 8.0
    ql = [int(q) for q in queries[:20]]
    row.p50_us, row.p99_us = latencies(lambda q: brute(fps, q, k), ql)
    row.batch_qps = 1e6 / row.p50_us
    row.agreement = "reference"
    rows = [row]
    if len(fps) <= args.numpy_pairs_max:
        prow = Row("numpy sort pigeonhole (pairs)", len(fps))
        t = time.perf_counter()
        count = numpy_pairs(fps, k)
        prow.pairs_s = time.perf_counter() - t
        prow.extra["pairs"] = count
        prow.note = f"{count} pairs"
        rows.append(prow)
    return rows


def numpy_pairs(fps: U64, k: int) -> int:
    """All pairs within k by sorting on each of k + 1 blocks (pigeonhole), vectorised."""
    blocks = k + 1
    width = 64 // blocks
    seen: set[tuple[int, int]] = set()
    for b in range(blocks):
        shift = np.uint64(64 - width * (b + 1))
        key = (fps >> shift) & np.uint64((1 << width) - 1)
        order = np.argsort(key, kind="stable")
        sk, sf = key[order], fps[order]
        j = 1
        while j < len(sf):
            same = sk[j:] == sk[:-j]
            if not same.any():
                break
            close = same & (np.bitwise_count(sf[j:] ^ sf[:-j]) <= k)
            for x in np.flatnonzero(close):
                a, c = int(order[x]), int(order[x + j])
                seen.add((min(a, c), max(a, c)))
            j += 1
    return len(seen)


def as_bytes(x: U64) -> npt.NDArray[np.uint8]:
    return np.ascontiguousarray(x).view(np.uint8).reshape(-1, 8)


def bench_faiss(fps: U64, queries: U64, k: int, args: argparse.Namespace) -> list[Row]:
    import faiss

    faiss.omp_set_num_threads(os.cpu_count() or 1)
    xb, xq = as_bytes(fps), as_bytes(queries)
    rows = []
    makers: list[tuple[str, Callable[[], Any], int]] = [
        ("faiss IndexBinaryMultiHash(64,4,16)", lambda: faiss.IndexBinaryMultiHash(64, 4, 16), 0),
        ("faiss IndexBinaryHash(64,16) nflip=k", lambda: faiss.IndexBinaryHash(64, 16), k),
        ("faiss IndexBinaryFlat", lambda: faiss.IndexBinaryFlat(64), -1),
    ]
    for name, make, nflip in makers:
        row = Row(name, len(fps))
        gc.collect()
        before = rss_bytes()
        t = time.perf_counter()
        index = make()
        if nflip >= 0:
            index.nflip = nflip
        index.add(xb)
        row.build_s = time.perf_counter() - t
        row.bytes_per_item = (rss_bytes() - before) / len(fps)

        def search(i: int, index: Any = index) -> set[int]:
            lims, _d, ids = index.range_search(xq[i : i + 1], k + 1)
            return set(ids[lims[0] : lims[1]].tolist())

        nq = args.queries if nflip >= 0 else 20
        if nflip >= 0 and len(fps) >= 5_000_000:
            nq = min(nq, 2000)
        row.p50_us, row.p99_us = latencies(search, range(nq))
        nb = min(len(queries), 20_000 if nflip >= 0 else 200)
        t = time.perf_counter()
        index.range_search(xq[:nb], k + 1)
        row.batch_qps = nb / (time.perf_counter() - t)
        checks = range(min(args.check, nq))
        same = sum(search(i) == brute(fps, int(queries[i]), k) for i in checks)
        row.agreement = f"{same}/{len(checks)}"
        rows.append(row)
        del index
    return rows


def bench_gaoya(n: int, k: int, args: argparse.Namespace) -> list[Row]:
    from gaoya.simhash import SimHashStringIndex

    m = min(n, args.gaoya_max)
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(50_000)]
    picks = rng.integers(0, len(words), size=(m, 12))
    docs = [" ".join(words[j] for j in row) for row in picks]
    for i in rng.integers(0, m, size=m // 100):
        w = docs[int(i)].split()
        w[int(rng.integers(0, 12))] = words[int(rng.integers(0, len(words)))]
        docs[int(rng.integers(0, m))] = " ".join(w)
    # gaoya reports distance < its threshold: k + 1 gives <= k (checked by the agreement column).
    g = SimHashStringIndex(num_blocks=k + 2, hamming_distance=k + 1)
    sigs = np.array(g.index.par_bulk_doc2signatures(docs), dtype=np.uint64)
    gc.collect()
    before = rss_bytes()
    t = time.perf_counter()
    g.index.par_bulk_insert_docs(list(range(m)), docs)
    grow = Row("gaoya SimHash (texts)", m, build_s=time.perf_counter() - t)
    grow.bytes_per_item = (rss_bytes() - before) / m
    nq = min(args.queries, m)
    qdocs = docs[:nq]
    grow.p50_us, grow.p99_us = latencies(
        lambda i: g.index.query_return_distance(qdocs[i]), range(nq)
    )
    t = time.perf_counter()
    g.index.par_bulk_query_return_distance(qdocs)
    grow.batch_qps = nq / (time.perf_counter() - t)
    checks = range(min(args.check, nq))
    same = sum(
        {i for i, _ in g.index.query_return_distance(qdocs[j])} == brute(sigs, int(sigs[j]), k)
        for j in checks
    )
    grow.agreement = f"{same}/{len(checks)}"
    grow.note = f"{m} texts of 12 words; query time includes hashing the text"
    # neardup on the same signatures, same queries (the stored texts' signatures).
    nrow = Row("neardup (gaoya's signatures)", m)
    idx = Index(k=k, capacity=m)
    t = time.perf_counter()
    idx.add_many(np.arange(m, dtype=np.int64), sigs, 1.0)
    nrow.build_s = time.perf_counter() - t
    ql = [int(s) for s in sigs[:nq]]
    nrow.p50_us, nrow.p99_us = latencies(idx.query, ql)
    t = time.perf_counter()
    idx.query_many(sigs[:nq])
    nrow.batch_qps = nq / (time.perf_counter() - t)
    return [grow, nrow]


def bench_simhash(fps: U64, queries: U64, k: int, args: argparse.Namespace) -> Row:
    from simhash import Simhash, SimhashIndex

    gc.collect()
    before = rss_bytes()
    index = SimhashIndex([], k=k)
    t = time.perf_counter()
    m = 0
    for fp in fps.tolist():
        index.add(str(m), Simhash(fp))
        m += 1
        if m % 1000 == 0 and time.perf_counter() - t > args.simhash_seconds:
            break
    row = Row("simhash SimhashIndex (PyPI)", m, build_s=time.perf_counter() - t)
    row.bytes_per_item = (rss_bytes() - before) / m
    part = fps[:m]
    ql = [int(q) for q in queries[: min(args.queries, 2000)]]
    row.p50_us, row.p99_us = latencies(lambda q: index.get_near_dups(Simhash(q)), ql)
    row.batch_qps = 1e6 / row.p50_us
    checks = ql[: args.check]
    same = sum(
        {int(i) for i in index.get_near_dups(Simhash(q))} == brute(part, q, k) for q in checks
    )
    row.agreement = f"{same}/{len(checks)}"
    row.note = f"built {m} of {len(fps)} items in {args.simhash_seconds:.0f} s (time cap)"
    return row


def fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def report(rows: list[Row]) -> None:
    head = f"{'engine':40} {'items':>10} {'build s':>8} {'B/item':>8} {'p50 us':>9} "
    head += f"{'p99 us':>9} {'batch q/s':>11} {'pairs s':>8} {'agree':>9}"
    print(head)
    for r in rows:
        print(
            f"{r.engine:40} {r.n:>10} {fmt(r.build_s, '.2f'):>8} {fmt(r.bytes_per_item, '.1f'):>8} "
            f"{fmt(r.p50_us, '.2f'):>9} {fmt(r.p99_us, '.2f'):>9} {fmt(r.batch_qps, ',.0f'):>11} "
            f"{fmt(r.pairs_s, '.2f'):>8} {r.agreement:>9}  {r.note}"
        )
    ours = next((r for r in rows if r.engine == "neardup"), None)
    if ours is None:
        return
    print("ratios (peer / neardup; > 1 means neardup is better):")
    for r in rows:
        if r is ours or r.engine.startswith("neardup"):
            continue
        parts = []
        if r.p50_us and ours.p50_us:
            parts.append(f"p50 x{r.p50_us / ours.p50_us:.1f}")
        if r.batch_qps and ours.batch_qps:
            parts.append(f"batch x{ours.batch_qps / r.batch_qps:.1f}")
        if r.bytes_per_item and ours.bytes_per_item and r.bytes_per_item > 0:
            parts.append(f"memory x{r.bytes_per_item / ours.bytes_per_item:.2f}")
        if r.build_s and ours.build_s:
            parts.append(f"build x{(r.build_s / r.n) / (ours.build_s / ours.n):.1f} per item")
        if r.pairs_s and ours.pairs_s:
            parts.append(f"near_pairs x{(r.pairs_s / r.n) / (ours.pairs_s / ours.n):.1f} per item")
        print(f"  {r.engine:40} " + ", ".join(parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 M fingerprints only")
    ap.add_argument("--sizes", type=int, nargs="*", default=None, help="default: 1e6 1e7")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--layout", type=int, default=None, help="neardup blocks (default: auto)")
    ap.add_argument("--queries", type=int, default=10_000, help="single queries timed")
    ap.add_argument("--batch", type=int, default=200_000, help="queries per batch call")
    ap.add_argument("--check", type=int, default=200, help="queries checked vs brute force")
    ap.add_argument("--simhash-seconds", type=float, default=20.0)
    ap.add_argument("--gaoya-max", type=int, default=1_000_000)
    ap.add_argument("--numpy-pairs-max", type=int, default=2_000_000)
    ap.add_argument(
        "--extra-k",
        nargs="*",
        default=[],
        help="also time an Index built for these k (K, or K:BLOCKS for a given layout)",
    )
    ap.add_argument(
        "--memory",
        nargs="*",
        default=MEMORY_KINDS,
        choices=MEMORY_KINDS,
        help="id/timestamp workloads whose memory per item is measured (none: skip)",
    )
    ap.add_argument("--no-persist", dest="persist", action="store_false", help="skip reopen")
    ap.add_argument("--skip", nargs="*", default=[], choices=["faiss", "gaoya", "simhash", "numpy"])
    args = ap.parse_args()
    sizes = args.sizes or ([1_000_000] if args.quick else [1_000_000, 10_000_000])
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()}")
    for n in sizes:
        fps, queries = make_data(n, args.k)
        print(f"\n== {n:,} fingerprints, k={args.k} ==")
        rows = [bench_neardup(fps, queries, args.k, args)]
        for kx in args.extra_k:
            rows.append(bench_large_k(fps, queries, kx, args))
        rows += bench_memory(fps, queries, args.k, args)
        if "numpy" not in args.skip:
            rows += bench_numpy(fps, queries, args.k, args)
        if "faiss" not in args.skip:
            rows += bench_faiss(fps, queries, args.k, args)
        if "gaoya" not in args.skip:
            rows += bench_gaoya(n, args.k, args)
        if "simhash" not in args.skip:
            rows.append(bench_simhash(fps, queries, args.k, args))
        report(rows)
        print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
