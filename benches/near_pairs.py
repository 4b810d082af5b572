"""near_pairs (all pairs within k, the batch self-join) on random, planted-cluster and real
short-text fingerprints.

    python benches/near_pairs.py                 # 100 k and 1 M, k = 3, 8, 11, 13
    python benches/near_pairs.py --quick         # 100 k only
    python benches/near_pairs.py --sizes 1000000 --ks 13 --data real

"real": SimHash (``Fingerprinter()``, the default preset) of windows of 20 to 200 characters
cut at random places from the texts of examples/news-sample.jsonl, one in four with a few
character edits: short texts whose near-copies overlap, like a crawl of reposts.
"clustered": random centres, 40 % of the items planted near a centre at 0..16 bits.
The result is checked against a numpy brute force (all pairs) on a 3 000-item sample.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from neardup import Fingerprinter, Index

ROOT = Path(__file__).resolve().parent.parent


def random_fps(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)


def clustered_fps(n: int, seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    planted = rng.random(n) < 0.4
    centres = rng.integers(0, n, n)
    for i in np.nonzero(planted)[0]:
        d = int(rng.integers(0, 17))
        bits = rng.choice(64, d, replace=False)
        mask = np.uint64(sum(1 << int(b) for b in bits))
        fps[i] = fps[centres[i]] ^ mask
    return fps


def real_fps(n: int, seed: int = 3) -> np.ndarray:
    cache = Path(f"/tmp/neardup-real-fps-{n}-{seed}.npy")
    if cache.exists():
        return np.load(cache)
    texts = [
        json.loads(line)["text"]
        for line in (ROOT / "examples" / "news-sample.jsonl").read_text("utf-8").splitlines()
    ]
    corpus = "\n".join(texts)
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(corpus) - 200, n)
    lengths = rng.integers(20, 201, n)
    edits = rng.random(n) < 0.25
    docs = []
    alphabet = "的一是了不在人有我他这个们中来上大为和国地到以说时要就出abcdefgxyz ,.!"
    for s, ln, e in zip(starts.tolist(), lengths.tolist(), edits.tolist()):
        t = corpus[s : s + ln]
        if e:
            chars = list(t)
            for _ in range(int(rng.integers(1, 4))):
                chars[int(rng.integers(0, len(chars)))] = alphabet[
                    int(rng.integers(0, len(alphabet)))
                ]
            t = "".join(chars)
        docs.append(t)
    fps = np.asarray(Fingerprinter().fingerprint_many(docs), dtype=np.uint64)
    np.save(cache, fps)
    return fps


def brute_count(fps: np.ndarray, k: int) -> int:
    total = 0
    for i in range(len(fps) - 1):
        d = np.bitwise_count(fps[i + 1 :] ^ fps[i])
        total += int((d <= k).sum())
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--ks", type=int, nargs="+", default=[3, 8, 11, 13])
    ap.add_argument("--data", nargs="+", default=["random", "clustered", "real"])
    ap.add_argument("--quick", action="store_true", help="100 k items only")
    args = ap.parse_args()
    sizes = [100_000] if args.quick else args.sizes
    print(f"threads={os.environ.get('RAYON_NUM_THREADS', 'all')} load={os.getloadavg()[0]:.1f}")
    for kind in args.data:
        for n in sizes:
            fps = {"random": random_fps, "clustered": clustered_fps, "real": real_fps}[kind](n)
            idx = Index(k=3, capacity=n)
            idx.add_many(np.arange(n, dtype=np.int64), fps, 0.0)
            for k in args.ks:
                t = time.perf_counter()
                raw = idx.near_pairs(k)
                dt = time.perf_counter() - t
                a, b = np.asarray(raw[0], dtype=np.int64), np.asarray(raw[1], dtype=np.int64)
                # Agreement on a sample: the pairs inside the first 3 000 items.
                m = 3000
                sel = (a < m) & (b < m)
                ok = int(sel.sum()) == brute_count(fps[:m], k)
                print(
                    f"{kind:9} n={n:>9,} k={k:2}  near_pairs {dt:7.3f} s  pairs {len(a):>11,}"
                    f"  sample agrees: {ok}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
