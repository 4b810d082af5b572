"""Fingerprint throughput (docs/s, MB/s) on real short and long, Chinese and English text,
against PyPI ``simhash`` and ``gaoya``'s SimHash measured in the same run, with ratios; and
(``--quality``) the measurement behind the choice of the default preset.

Text comes from Debian packages through ``benches/corpus.py`` (python3-doc, fortunes-zh,
debian-reference-zh-cn, manpages-zh, debian-handbook; ``scripts/setup-bench.sh``):

- en-short: sentences of the Python docs grouped to 40..140 chars
- en-long: 1-5 KB chunks of the Python docs
- zh-short: Chinese fortunes, poems and Debian Reference sentences (<= 140 chars)
- zh-long: 1-5 KB of the Chinese Debian Reference / man pages / handbook

Usage::

    python benches/fingerprint.py            # full sizes
    python benches/fingerprint.py --quick    # a couple of minutes
    python benches/fingerprint.py --quality  # near-duplicate vs unrelated distances per config

Peers: ``simhash`` (``Simhash(text).value``; its own tokenising: lowercase, ``\\w+`` joined,
char 4-grams) and ``gaoya`` (``SimHashStringIndex(...).index.par_bulk_doc2signatures`` on all
cores; word unigrams for English, char 3-grams for Chinese). "equal tokenising" rows run neardup
with the same features as gaoya (lowercased word unigrams / char 3-grams, xxh3, tf).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import corpus  # noqa: E402
from neardup import Fingerprinter, hamming  # noqa: E402


def _sentences_grouped(chunks: Sequence[str], lo: int, hi: int) -> list[str]:
    out: list[str] = []
    for chunk in chunks:
        cur = ""
        for s in re.split(r"(?<=[.!?])\s+", " ".join(chunk.split())):
            if len(cur) + len(s) + 1 > hi:
                if len(cur) >= lo:
                    out.append(cur)
                cur = ""
            cur = f"{cur} {s}" if cur else s
        if lo <= len(cur) <= hi:
            out.append(cur)
    return out


def _joined(chunks: Sequence[str], lo: int, hi: int, rng: random.Random) -> list[str]:
    """Consecutive chunks joined until lo..hi UTF-8 bytes."""
    out: list[str] = []
    cur = ""
    for c in chunks:
        cur = f"{cur}\n\n{c}" if cur else c
        size = len(cur.encode())
        if size >= lo:
            if size <= hi:
                out.append(cur)
            cur = ""
    rng.shuffle(out)
    return out


def datasets(short_n: int, long_n: int) -> dict[str, list[str]]:
    rng = random.Random(7)
    en_long_src = list(corpus.english_long())
    zh_long_src = list(corpus.chinese_long())
    en_short = _sentences_grouped(en_long_src, 40, 140)
    zh_short = list(corpus.chinese_short())
    sets = {
        "en-short": en_short,
        "en-long": _joined(en_long_src, 1000, 5000, rng),
        "zh-short": zh_short,
        "zh-long": _joined(zh_long_src, 1000, 5000, rng),
    }
    out = {}
    for name, docs in sets.items():
        n = short_n if name.endswith("short") else long_n
        rng.shuffle(docs)
        out[name] = (docs * (n // max(1, len(docs)) + 1))[:n]
    return out


def timed(fn: Callable[[], object], min_time: float) -> float:
    """Best seconds per call over repeats lasting at least ``min_time``."""
    best = float("inf")
    spent = 0.0
    runs = 0
    while spent < min_time or runs < 2:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = min(best, dt)
        spent += dt
        runs += 1
    return best


def timed_together(fns: Sequence[Callable[[], object]], min_time: float) -> list[float]:
    """Best seconds per call of each function, calling them in turn (round after round) until
    every one has run ``min_time`` seconds and at least 3 times: on a shared, loaded machine the
    engines then see the same load, so their ratios hold even when the absolute rates move."""
    best = [float("inf")] * len(fns)
    spent = [0.0] * len(fns)
    rounds = 0
    while rounds < 3 or min(spent) < min_time:
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            best[i] = min(best[i], dt)
            spent[i] += dt
        rounds += 1
    return best


def throughput(args: argparse.Namespace) -> None:
    import gaoya.simhash
    import simhash

    short_n, long_n = (5000, 1000) if args.quick else (50000, 8000)
    data = datasets(short_n, long_n)
    threads = os.environ.get("NEARDUP_NUM_THREADS") or str(os.cpu_count())
    print(f"# fingerprint throughput; neardup threads={threads}, cpus={os.cpu_count()}")
    print(f"{'set':9} {'engine':44} {'docs/s':>11} {'MB/s':>8} {'x simhash':>10} {'x gaoya':>8}")
    default = Fingerprinter()
    for name, docs in data.items():
        mb = sum(len(d.encode()) for d in docs) / 1e6
        zh = name.startswith("zh")
        rows: list[tuple[str, float]] = []

        # PyPI simhash: pure Python, so a slice of the docs (its rate is per doc).
        part = docs[: max(50, len(docs) // (40 if zh else 20))]
        part_mb = sum(len(d.encode()) for d in part) / 1e6

        def run_simhash(part: list[str] = part) -> list[int]:
            return [simhash.Simhash(d).value for d in part]

        t = timed(run_simhash, 0.5)
        simhash_rate = part_mb / t
        rows.append(("simhash (PyPI), its own 4-grams", t * len(docs) / len(part)))

        if zh:
            g = gaoya.simhash.SimHashStringIndex(
                analyzer="char", ngram_range=(3, 3), lowercase=True
            )
            equal = Fingerprinter(
                tokenizer="chars",
                ngram=3,
                nfkc=False,
                strip_punctuation=False,
                collapse_whitespace=False,
            )
            gname = "gaoya par_bulk, char 3-grams"
        else:
            g = gaoya.simhash.SimHashStringIndex(analyzer="word", lowercase=True)
            equal = Fingerprinter(
                "words", nfkc=False, strip_punctuation=False, collapse_whitespace=False
            )
            gname = "gaoya par_bulk, word unigrams"
        tg, t_equal, t_default = timed_together(
            [
                partial(g.index.par_bulk_doc2signatures, docs),
                partial(equal.fingerprint_many, docs),
                partial(default.fingerprint_many, docs),
            ],
            1.0,
        )
        rows.append((gname, tg))
        rows.append(("neardup, equal tokenising (fingerprint_many)", t_equal))
        rows.append(("neardup default (fingerprint_many)", t_default))
        if not args.quick:
            for preset in ("seed000", "jieba" if zh else "words"):
                f = Fingerprinter(preset)
                rows.append(
                    (
                        f"neardup {preset} (fingerprint_many)",
                        timed(partial(f.fingerprint_many, docs), 1.0),
                    )
                )
        gaoya_rate = mb / tg
        for label, t in rows:
            rate = mb / t
            print(
                f"{name:9} {label:44} {len(docs) / t:11,.0f} {rate:8.1f} "
                f"{rate / simhash_rate:10.1f} {rate / gaoya_rate:8.2f}"
            )
        print()


QUALITY_CONFIGS: dict[str, dict[str, object]] = {
    "chars n=2": {"ngram": 2},
    "chars n=3 (default)": {},
    "chars n=4": {"ngram": 4},
    "chars n=5": {"ngram": 5},
    "words": {"preset": "words"},
    "word bigrams": {"preset": "words", "tokenizer": "word_ngrams", "ngram": 2},
    "jieba": {"preset": "jieba"},
    "keywords (jieba tf-idf top 20)": {"preset": "keywords"},
    "seed000": {"preset": "seed000"},
    "seed002 pre": {"preset": "seed002"},
}


def quality(args: argparse.Namespace) -> None:
    """For each labelled set: Hamming distances of true near-duplicate pairs (char 5-gram
    Jaccard >= 0.8) and of random pairs; recall of the true pairs within k and the share of
    random pairs within k."""
    n = 600 if args.quick else 2000
    rng = np.random.default_rng(0)
    print("# near-duplicate pairs vs random pairs (benches/corpus.py labelled sets)")
    print(
        f"{'set':9} {'config':32} {'dup mean':>8} {'rand mean':>9} {'rand sd':>7} "
        f"{'R@3':>5} {'R@6':>5} {'R@10':>5} {'FP@6':>7} {'FP@10':>7}"
    )
    for name in ("zh-short", "en-long", "zh-long"):
        s = corpus.build_set(name, n=n, seed=1)
        pairs = np.array(sorted(s.truth_pairs), dtype=np.int64)
        ra = rng.integers(0, len(s.texts), 20000)
        rb = rng.integers(0, len(s.texts), 20000)
        keep = ra != rb
        ra, rb = ra[keep], rb[keep]
        for label, opts in QUALITY_CONFIGS.items():
            opts = dict(opts)
            preset = str(opts.pop("preset", "default"))
            f = Fingerprinter(preset, **opts)
            fps = f.fingerprint_many(s.texts)
            dup = np.array([hamming(int(fps[a]), int(fps[b])) for a, b in pairs])
            rnd = np.array([hamming(int(fps[a]), int(fps[b])) for a, b in zip(ra, rb)])
            print(
                f"{name:9} {label:32} {dup.mean():8.2f} {rnd.mean():9.2f} {rnd.std():7.2f} "
                f"{(dup <= 3).mean():5.2f} {(dup <= 6).mean():5.2f} {(dup <= 10).mean():5.2f} "
                f"{(rnd <= 6).mean():7.4f} {(rnd <= 10).mean():7.4f}"
            )
        print()
    pair = ("你妈妈喊你回家吃饭哦，回家罗回家罗", "你妈妈叫你回家吃饭啦，回家罗回家罗")
    print("# seed 003 pair:", pair)
    for label, opts in QUALITY_CONFIGS.items():
        opts = dict(opts)
        preset = str(opts.pop("preset", "default"))
        f = Fingerprinter(preset, **opts)
        print(f"{label:32} distance {hamming(f.fingerprint(pair[0]), f.fingerprint(pair[1]))}")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="small sizes (a couple of minutes)")
    p.add_argument("--quality", action="store_true", help="distances of near-dups vs random pairs")
    args = p.parse_args()
    if args.quality:
        quality(args)
    else:
        throughput(args)


if __name__ == "__main__":
    main()
