"""What the batch engine's limits cost in recall: ``bucket_limit``, ``verify_limit`` and
``full_bucket_quorum``.

Each document is compared with at most ``bucket_limit`` newest kept documents per MinHash band
(one found in full buckets only when ``full_bucket_quorum`` of them hold it) and at most
``verify_limit`` of those (the best by estimated similarity) are verified (docs/quality.md,
"Bounded work"). This runs ``CorpusDeduper`` on a workload of
``benches/workloads.py`` with the limits off (every kept document that shares a band is
compared: the exact greedy rule over the band candidates) and with each pair of limits given,
and prints, for each, the time of the decision, the documents dropped, and the near-copies lost
(dropped without limits, kept with them) and the extra drops (the other way round: a document
kept earlier because of a limit can make a later one its copy).

    python benches/limits.py --workload templated --docs 60000
    python benches/limits.py --workload families --docs 60000 --limits 64:32,16:8
    python benches/limits.py --workload templated --docs 60000 --limits 64:32:1,64:32:3
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
# benches/ holds modules with common names: keep it off sys.path, load the generators by path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
for _name in ("corpus", "workloads"):
    _spec = importlib.util.spec_from_file_location(_name, os.path.join(_HERE, f"{_name}.py"))
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_name] = _module
    _spec.loader.exec_module(_module)
import workloads  # noqa: E402
from neardup.corpus import CorpusDeduper  # noqa: E402
from neardup.dedup import Policy  # noqa: E402

UNLIMITED = 1 << 30


def run(
    texts: list[str], bucket_limit: int, verify_limit: int, quorum: int | None = None
) -> tuple[float, np.ndarray, dict]:
    """Seconds of the decision, the kept mask and the run's counters."""
    policy = Policy.default().replace(bucket_limit=bucket_limit, verify_limit=verify_limit)
    if quorum is not None:
        policy = policy.replace(full_bucket_quorum=quorum)
    d = CorpusDeduper(policy)
    for i in range(0, len(texts), 16384):
        d.feed(texts[i : i + 16384])
    t = time.perf_counter()
    r = d.result()
    return time.perf_counter() - t, r.kept, r.stats


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workload", choices=sorted(workloads.GENERATORS), default="templated")
    p.add_argument("--docs", type=int, default=60000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--limits",
        default="64:32,64:32:1,32:16,16:8",
        help="bucket_limit:verify_limit[:full_bucket_quorum] to compare with no limits "
        "(default: the policy's 64:32 with its quorum 2, the same with quorum 1, two tighter)",
    )
    args = p.parse_args()
    pairs = [[int(x) for x in item.split(":")] for item in args.limits.split(",")]
    if any(len(x) not in (2, 3) for x in pairs):
        p.error("--limits: bucket:verify or bucket:verify:quorum, comma-separated")
    default_quorum = Policy.default().full_bucket_quorum
    texts = workloads.GENERATORS[args.workload](args.docs, args.seed).texts
    secs, base, stats = run(texts, UNLIMITED, UNLIMITED)
    n = len(texts)
    print(f"{args.workload}, {n:,} documents, seed {args.seed}")
    print(f"{'bucket':>8} {'verify':>7} {'quorum':>7} {'s':>7} {'dropped':>9} {'lost':>6} "
          f"{'extra':>6} {'lost %':>7} {'cand/doc':>9} {'verified/doc':>13}")  # fmt: skip
    dropped = int(n - base.sum())

    def row(
        label_b: str, label_v: str, label_q: str, secs: float, kept: np.ndarray, stats: dict
    ) -> None:
        lost = int(np.count_nonzero(~base & kept))
        extra = int(np.count_nonzero(base & ~kept))
        share = 100 * lost / dropped if dropped else 0.0
        print(
            f"{label_b:>8} {label_v:>7} {label_q:>7} {secs:7.2f} {int(n - kept.sum()):9,} "
            f"{lost:6,} {extra:6,} {share:6.2f}% {stats['candidates'] / n:9.1f} "
            f"{stats['compared'] / n:13.1f}"
        )

    row("none", "none", "-", secs, base, stats)
    for b, v, *q in pairs:
        quorum = q[0] if q else default_quorum
        row(str(b), str(v), str(quorum), *run(texts, b, v, quorum))


if __name__ == "__main__":
    main()
