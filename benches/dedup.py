"""End-to-end batch dedup benchmark: `neardup dedup` on a JSONL corpus against the PyPI `simhash`
package driven the same way (read JSONL, fingerprint, near-duplicate index, write the kept rows).

Corpora (real text from Debian packages via benches/corpus.py, cached under --cache):

- short: 1,000,000 documents of <= 140 characters: Chinese fortunes/poems/Debian Reference
  sentences and English sentences of the Python docs, alone or two joined; 20 % are copies
  (a quarter exact, the rest with benches/corpus.py noise);
- long: 200,000 documents of 1-4 KB: windows over the Python docs and the Chinese Debian
  Reference / man pages; 20 % copies likewise.

Each tool runs as its own process; the figures are wall time (documents/s, MB/s) and the peak
resident memory of that process (``wait4`` rusage). The peer is capped (``--peer-docs``) and its
rate extrapolated, since it runs at ~1 MB/s.

    python benches/dedup.py --quick          # 100 k short + 20 k long, peer on 5 k
    python benches/dedup.py                  # 1 M short + 200 k long, peer on 20 k
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


# ---------------------------------------------------------------------------------------------
# corpora


def _english_sentences() -> list[str]:
    import corpus

    out = []
    for chunk in corpus.english_long():
        for s in re.split(r"(?<=[.!?])\s+", " ".join(chunk.split())):
            if 30 <= len(s) <= 140:
                out.append(s)
    return out


def make_short(path: str, n: int, seed: int) -> None:
    """``n`` short documents (<= 140 chars), 20 % copies, as JSONL {"id", "text"}."""
    import corpus

    rng = random.Random(seed)
    zh = list(corpus.chinese_short())
    en = _english_sentences()
    n_base = n - n // 5
    docs: list[str] = []
    for _ in range(n_base):
        pool = zh if rng.random() < 0.5 else en
        a = rng.choice(pool)
        if rng.random() < 0.7:
            b = rng.choice(pool)
            a = (a + ("" if pool is zh else " ") + b)[:140]
        docs.append(a)
    _add_copies(docs, n - n_base, rng)
    _write(path, docs, rng)


def make_long(path: str, n: int, seed: int) -> None:
    """``n`` long documents (1-4 KB), 20 % copies, as JSONL {"id", "text"}."""
    import corpus

    rng = random.Random(seed)
    pools = [list(corpus.english_long()), list(corpus.chinese_long())]
    n_base = n - n // 5
    docs: list[str] = []
    for _ in range(n_base):
        pool = pools[rng.random() < 0.4]
        text = rng.choice(pool) + "\n\n" + rng.choice(pool)
        cjk = pool is pools[1]
        size = rng.randint(1000, 4000) // (3 if cjk else 1)  # bytes, roughly
        start = rng.randrange(max(1, len(text) - size))
        docs.append(text[start : start + size])
    _add_copies(docs, n - n_base, rng)
    _write(path, docs, rng)


def _add_copies(docs: list[str], n_copies: int, rng: random.Random) -> None:
    import corpus

    n_base = len(docs)
    for _ in range(n_copies):
        src = docs[rng.randrange(n_base)]
        if rng.random() < 0.25:
            docs.append(src)
        else:
            donor = docs[rng.randrange(n_base)]
            docs.append(corpus.add_noise(src, rng, donor, rng.uniform(0.0, 0.5)))


def _write(path: str, docs: list[str], rng: random.Random) -> None:
    rng.shuffle(docs)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for i, text in enumerate(docs):
            f.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def head(path: str, out: str, n: int) -> None:
    """The first ``n`` lines of a JSONL file (the peer's capped input)."""
    with open(path, "rb") as f, open(out, "wb") as g:
        for i, line in enumerate(f):
            if i >= n:
                break
            g.write(line)


# ---------------------------------------------------------------------------------------------
# the peer, driven like `neardup dedup`: read, fingerprint, index, keep the first of each group


def peer_simhash(inp: str, out: str, k: int) -> None:
    """PyPI `simhash`: Simhash(text) per document, SimhashIndex near-dups, first one kept."""
    from simhash import Simhash, SimhashIndex

    index = SimhashIndex([], k=k)
    kept = 0
    with open(inp, "rb") as f, open(out, "wb") as g:
        for line in f:
            record = json.loads(line)
            fp = Simhash(record["text"])
            if index.get_near_dups(fp):
                continue
            index.add(str(record["id"]), fp)
            g.write(line)
            kept += 1
    print(json.dumps({"kept": kept}))


# ---------------------------------------------------------------------------------------------
# measurement


def measure(cmd: list[str]) -> dict[str, Any]:
    """Run ``cmd``; wall seconds, peak RSS (MB) of that process, its stderr and stdout."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # wait4 returns the child's own rusage (peak RSS of that process alone)
    out_text = p.stdout.read() if p.stdout else ""
    err_text = p.stderr.read() if p.stderr else ""
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{err_text[-3000:]}")
    return {
        "seconds": seconds,
        "peak_mb": usage.ru_maxrss / 1024,
        "stderr": err_text,
        "stdout": out_text,
    }


def count_lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="100 k short + 20 k long, peer on 5 k")
    p.add_argument("--short", type=int, default=None, help="short documents (default 1 M)")
    p.add_argument("--long", type=int, default=None, help="long documents (default 200 k)")
    p.add_argument("--peer-docs", type=int, default=None, help="documents the peer gets")
    p.add_argument("--cache", default="/tmp/neardup-bench-dedup", help="where corpora are kept")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--run-peer", help=argparse.SUPPRESS)
    p.add_argument("--input", help=argparse.SUPPRESS)
    p.add_argument("--output", help=argparse.SUPPRESS)
    p.add_argument("--k", type=int, default=3, help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.run_peer:  # child process mode
        peer_simhash(args.input, args.output, args.k)
        return

    n_short = args.short or (100_000 if args.quick else 1_000_000)
    n_long = args.long if args.long is not None else (20_000 if args.quick else 200_000)
    peer_docs = args.peer_docs or (5_000 if args.quick else 20_000)
    os.makedirs(args.cache, exist_ok=True)
    exe = shutil.which("neardup")
    if exe is None:
        sys.exit("the neardup command is not installed (pip install .)")

    rows = []
    for name, n, maker in (("short", n_short, make_short), ("long", n_long, make_long)):
        if n <= 0:
            continue
        path = os.path.join(args.cache, f"{name}-{n}-{args.seed}.jsonl")
        if not os.path.exists(path):
            t = time.perf_counter()
            print(f"making {path} ...", file=sys.stderr, flush=True)
            maker(path, n, args.seed)
            print(f"  {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        size = os.path.getsize(path)
        out = os.path.join(args.cache, f"{name}-out.jsonl")

        runs: list[tuple[str, list[str], int, int]] = [
            ("neardup dedup (default policy)", [exe, "dedup", path, "-o", out], n, size),
            (
                "neardup dedup --k 3 --verifier none",
                [exe, "dedup", path, "-o", out, "--k", "3", "--verifier", "none"],
                n,
                size,
            ),
        ]
        peer_in = os.path.join(args.cache, f"{name}-peer-{min(peer_docs, n)}.jsonl")
        head(path, peer_in, peer_docs)
        peer_n = count_lines(peer_in)
        runs.append(
            (
                "PyPI simhash (SimhashIndex k=3)",
                [sys.executable, __file__, "--run-peer", "simhash", "--input", peer_in,
                 "--output", out, "--k", "3"],
                peer_n,
                os.path.getsize(peer_in),
            )
        )  # fmt: skip
        for tool, cmd, docs, nbytes in runs:
            print(f"{name}: {tool} on {docs:,} docs ...", file=sys.stderr, flush=True)
            m = measure(cmd)
            kept = count_lines(out)
            rows.append(
                {
                    "set": name,
                    "tool": tool,
                    "docs": docs,
                    "seconds": m["seconds"],
                    "docs_s": docs / m["seconds"],
                    "mb_s": nbytes / 1e6 / m["seconds"],
                    "peak_mb": m["peak_mb"],
                    "removed": docs - kept,
                }
            )
            print(f"  {m['stderr'].strip().splitlines()[-1] if m['stderr'].strip() else ''}",
                  file=sys.stderr, flush=True)  # fmt: skip

    print()
    print(
        f"{'set':6} {'tool':38} {'docs':>10} {'s':>8} {'docs/s':>10} {'MB/s':>7} "
        f"{'peak MB':>8} {'removed':>8} {'x peer':>7}"
    )
    for r in rows:
        peer = next(x for x in rows if x["set"] == r["set"] and x["tool"].startswith("PyPI"))
        ratio = r["docs_s"] / peer["docs_s"]
        print(
            f"{r['set']:6} {r['tool']:38} {r['docs']:>10,} {r['seconds']:>8.1f} "
            f"{r['docs_s']:>10,.0f} {r['mb_s']:>7.1f} {r['peak_mb']:>8.0f} {r['removed']:>8,} "
            f"{ratio:>6.1f}x"
        )
    short = [r for r in rows if r["set"] == "short" and r["tool"].startswith("neardup dedup (")]
    if short:
        r = short[0]
        per_million = r["seconds"] * 1_000_000 / r["docs"]
        print(
            f"\n1 M short documents: {per_million:.1f} s at this rate (target <= 60 s): "
            + ("met" if per_million <= 60 else "missed")
        )


if __name__ == "__main__":
    main()
