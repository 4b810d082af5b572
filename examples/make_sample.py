"""Make examples/news-sample.jsonl: the sample corpus the README's Quick start deduplicates.

The documents are real text shipped by Debian packages (read through benches/corpus.py; install
them with scripts/setup-bench.sh): short Chinese (fortunes, Tang/Song poems, sentences of the
Debian Reference), longer Chinese (the Chinese Debian Reference and man pages) and English
(the Python documentation sources). About 30 % of the rows are copies of other rows: exact ones,
lightly edited ones, and heavily edited ones (typos, punctuation and width changes, reordered
sentences, added headers/footers, Traditional/Simplified swaps), re-published later.

Each row: ``{"id", "lang", "source", "published", "origin", "text"}``; ``origin`` is the id of the
document a row was copied from (itself for originals), so results can be checked.

    python examples/make_sample.py            # rewrites examples/news-sample.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from datetime import datetime, timedelta, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "benches"))

import corpus  # noqa: E402  (benches/corpus.py: the real-text loaders)

OUT = os.path.join(HERE, "news-sample.jsonl")


def _trim(text: str, limit: int) -> str:
    """Cut at the last sentence end before ``limit`` characters (or at the limit)."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    ends = [cut.rfind(p) for p in ("。", "！", "？", ". ", "\n\n")]
    best = max(ends)
    return cut[: best + 1].rstrip() if best > limit // 2 else cut.rstrip()


def make(n_zh_short: int, n_zh_long: int, n_en: int, copy_fraction: float, seed: int) -> list[dict]:
    """The rows of the sample, shuffled; deterministic in ``seed``."""
    rng = random.Random(seed)
    pools = [
        ("zh", "fortunes-zh/debian-reference", list(corpus.chinese_short()), n_zh_short, 140),
        ("zh", "debian-reference-zh-cn/manpages-zh", list(corpus.chinese_long()), n_zh_long, 480),
        ("en", "python3-doc", list(corpus.english_long()), n_en, 800),
    ]  # fmt: skip
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    rows: list[dict] = []
    for lang, source, pool, n, limit in pools:
        for text in rng.sample(pool, n):
            rows.append(
                {
                    "lang": lang,
                    "source": source,
                    "published": start + timedelta(seconds=rng.randrange(300 * 86400)),
                    "text": _trim(text, limit),
                    "copy": False,
                }
            )
    for i, row in enumerate(rows):
        row["origin"] = i
    n_copies = int(len(rows) * copy_fraction / (1 - copy_fraction))
    n_base = len(rows)
    donors = [r["text"] for r in rows]
    for _ in range(n_copies):
        # a copy of an original, sometimes of an earlier copy (chains of re-publishing)
        src = rows[rng.randrange(len(rows)) if rng.random() < 0.15 else rng.randrange(n_base)]
        kind = rng.random()
        if kind < 0.15:
            text = src["text"]
        else:
            strength = rng.uniform(0.0, 0.3) if kind < 0.75 else rng.uniform(0.3, 1.0)
            text = corpus.add_noise(src["text"], rng, rng.choice(donors), strength)
        rows.append(
            {
                "lang": src["lang"],
                "source": src["source"],
                "published": src["published"] + timedelta(hours=rng.uniform(1, 24 * 20)),
                "text": text,
                "origin": src["origin"],
                "copy": True,
            }
        )
    rng.shuffle(rows)
    for i, row in enumerate(rows, 1):
        row["id"] = f"n{i:05d}"
    # every row points at the id of the original it descends from (originals at themselves)
    original_id = {row["origin"]: row["id"] for row in rows if not row["copy"]}
    for row in rows:
        row["origin_id"] = original_id[row["origin"]]
    return rows


def main() -> None:
    """Write the sample and print its size."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("-o", "--output", default=OUT)
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args()
    rows = make(900, 240, 460, 0.30, args.seed)
    with open(args.output, "w", encoding="utf-8") as f:
        for row in rows:
            record = {
                "id": row["id"],
                "lang": row["lang"],
                "source": row["source"],
                "published": row["published"].strftime("%Y-%m-%dT%H:%M:%SZ"),
                "origin": row["origin_id"],
                "text": row["text"],
            }
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    size = os.path.getsize(args.output)
    print(f"{args.output}: {len(rows)} documents, {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
