"""In-process benchmark of the durable Deduplicator's write and read paths (no HTTP).

The service's serialized writer spends its time in ``Deduplicator.check_and_add_many`` (groups of
single requests and chunks of batch requests) and its read threads in ``check``; this measures
both on a store of N short texts (8-20 words, the texts of ``benches/service.py``), with the
same request mix (80 % new texts, 20 % near-copies of stored ones), wall and CPU time per
document. CPU time is the figure to compare on a busy machine.

Run: ``python benches/dedup_store.py --quick`` (20 k stored) or ``python benches/dedup_store.py``
(200 k stored). ``--k policy`` uses the default policy's radii instead of k=3.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import service as corpus  # noqa: E402  (benches/service.py: the same texts and request mix)
from neardup.dedup import Deduplicator, Policy  # noqa: E402


def measure(name: str, fn: Callable[[], object], n: int) -> dict[str, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(
        f"  {name:34s} wall {wall * 1e6 / n:8.1f} µs/doc  cpu {cpu * 1e6 / n:8.1f} µs/doc  "
        f"({n / wall:>9,.0f} docs/s)"
    )
    return {"wall_us": wall * 1e6 / n, "cpu_us": cpu * 1e6 / n, "docs_per_s": n / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 k stored texts")
    parser.add_argument("--items", type=int, help="stored texts (default 200,000; quick 20,000)")
    parser.add_argument("--k", default="3", help="radius in bits, or 'policy' (default 3)")
    parser.add_argument("--sync", choices=["full", "normal"], default="full")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    items = args.items or (20_000 if args.quick else 200_000)
    policy = Policy() if args.k == "policy" else Policy(k_short=int(args.k), k_long=int(args.k))
    vocab = corpus.vocabulary()
    root = Path(tempfile.mkdtemp(prefix="neardup-bench-store-"))
    results: dict[str, dict[str, float]] = {}
    try:
        d = Deduplicator.open(root / "store", policy=policy, sync=args.sync)
        t0 = time.perf_counter()
        for s in range(0, items, 10_000):
            ids = list(range(s, min(items, s + 10_000)))
            d.add_many(ids, [corpus.stored_text(i, vocab) for i in ids], [1e9] * len(ids))
        print(
            f"dedup store benchmark: {items:,} stored short texts, k={args.k}, sync={args.sync} "
            f"(preload {time.perf_counter() - t0:.1f} s)"
        )
        bodies = [json.loads(b) for b in corpus.request_bodies(9_000, items, vocab, "x", 3)]
        reqs = [(f"q{j}", b["text"]) for j, b in enumerate(bodies)]

        def chunks(part: list[tuple[str, str]], size: int) -> Callable[[], None]:
            def run() -> None:
                for s in range(0, len(part), size):
                    chunk = part[s : s + size]
                    d.check_and_add_many([i for i, _ in chunk], [t for _, t in chunk])

            return run

        results["check_and_add_many x16"] = measure(
            "check_and_add_many, calls of 16", chunks(reqs[:1_000], 16), 1_000
        )
        results["check_and_add_many x256"] = measure(
            "check_and_add_many, calls of 256", chunks(reqs[1_000:3_048], 256), 2_048
        )
        results["check_and_add_many x1000"] = measure(
            "check_and_add_many, calls of 1,000", chunks(reqs[3_048:6_048], 1_000), 3_000
        )
        single = reqs[6_048:6_348]
        results["check_and_add"] = measure(
            "check_and_add, one by one", lambda: [d.check_and_add(i, t) for i, t in single], 300
        )
        checks = [t for _, t in reqs[6_348:9_000]]
        results["check"] = measure("check, one by one", lambda: [d.check(t) for t in checks], 2_652)
        results["check_many x256"] = measure(
            "check_many, calls of 256",
            lambda: [d.check_many(checks[s : s + 256]) for s in range(0, len(checks), 256)],
            len(checks),
        )
        d.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
