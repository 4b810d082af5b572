"""Cost per document of the online path as its store fills, on texts whose fingerprints are close.

The service's write path, in-process: ``Deduplicator().check_and_add_many`` in batches of 1,000
(what ``POST /v1/check-and-add/batch`` calls), on a growing in-memory store. Per step of
``--step`` documents: microseconds a document, and per document the distinct candidates the
bands found, the candidates verified and the bucket reads cut at ``bucket_limit``; at the end the
last step's time over the first's. Workloads:

- ``one-template``: benches/service.py's templated stream (one notice, a new number in each);
- ``templated``: benches/workloads.py's notifications (many templates, Zipf weights).

    python benches/online_growth.py
    python benches/online_growth.py --workload templated --docs 1000000 --step 200000
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from neardup import Deduplicator  # noqa: E402

BATCH = 1000


def texts_of(workload: str, n: int, seed: int) -> list[str]:
    if workload == "templated":
        import workloads

        return workloads.templated(n, seed).texts
    import service

    rng = random.Random(seed)
    return [service.TEMPLATE.format(n=rng.randrange(10**9)) for _ in range(n)]


def stats_of(d: Deduplicator) -> dict[str, int]:
    kept = d._kept  # the decision engine of the default policy
    assert kept is not None
    stats = kept._engine.outcome()["stats"]
    return {k: int(stats[k]) for k in ("candidates", "compared", "buckets_cut")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=("one-template", "templated"), default="one-template")
    parser.add_argument("--docs", type=int, default=500_000)
    parser.add_argument("--step", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.step < BATCH or args.step % BATCH or args.docs < args.step:
        parser.error(f"--step must be a multiple of {BATCH} and at most --docs")
    texts = texts_of(args.workload, args.docs, args.seed)
    print(f"online check-and-add, {args.workload}, {args.docs:,} texts in batches of {BATCH:,}")
    d = Deduplicator()
    before = stats_of(d)
    per_step: list[float] = []
    last = time.perf_counter()
    for i in range(0, args.docs, BATCH):
        d.check_and_add_many([f"t{j}" for j in range(i, i + BATCH)], texts[i : i + BATCH])
        if (i + BATCH) % args.step:
            continue
        now = time.perf_counter()
        now_stats = stats_of(d)
        us = (now - last) / args.step * 1e6
        per_step.append(us)
        each = {k: (now_stats[k] - before[k]) / args.step for k in now_stats}
        print(
            f"  stored {i + BATCH:>10,}  {us:6.1f} us/doc  candidates {each['candidates']:6.1f}"
            f"  verified {each['compared']:5.1f}  buckets cut {each['buckets_cut']:4.1f}",
            flush=True,
        )
        before, last = now_stats, now
    print(
        f"kept {len(d):,}; last step / first step: {per_step[-1] / per_step[0]:.2f}x time "
        f"for {args.docs / args.step:.0f}x stored"
    )


if __name__ == "__main__":
    main()
