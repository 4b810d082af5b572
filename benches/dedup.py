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
rate extrapolated, since it runs at ~1 MB/s. The last column is the 1-minute load average when
each run started (the machine is shared: compare ratios within one run).

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
from bounded import head  # noqa: E402  (the peer's capped input: the first lines of a file)

# ---------------------------------------------------------------------------------------------
# corpora


def _clauses() -> tuple[list[str], list[str]]:
    """Chinese clauses (fortunes, poems, Debian Reference) and English sentences (Python docs)."""
    import corpus

    zh = [
        c.strip()
        for doc in corpus.chinese_short()
        for c in re.split(r"(?<=[，。！？；：])", " ".join(doc.split()))
        if 4 <= len(c.strip()) <= 70
    ]
    en = [
        s
        for chunk in corpus.english_long()
        for s in re.split(r"(?<=[.!?;,])\s+", " ".join(chunk.split()))
        if 15 <= len(s) <= 100
    ]
    return zh, en


def make_short(path: str, n: int, seed: int) -> None:
    """``n`` short documents (<= 140 chars) of 2-4 real clauses each (so that originals are
    distinct), 20 % of them copies, as JSONL {"id", "text"}."""
    rng = random.Random(seed)
    zh, en = _clauses()
    n_base = n - n // 5
    docs: list[str] = []
    for _ in range(n_base):
        pool, sep = (zh, "") if rng.random() < 0.5 else (en, " ")
        text = rng.choice(pool)
        for _ in range(rng.randint(1, 3)):
            more = rng.choice(pool)
            if len(text) + len(more) + 1 > 140:
                break
            text = text + sep + more
        docs.append(text)
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
    import tempfile

    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")  # text-dedup: local only
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        # wait4: the child's own rusage (peak RSS of that process alone)
        _, status, usage = os.wait4(p.pid, 0)
        seconds = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        out_text = out.read().decode("utf-8", "replace")
        err_text = err.read().decode("utf-8", "replace")
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{err_text[-3000:]}")
    return {
        "seconds": seconds,
        # CPU seconds of the process and the children it waited for (text-dedup's workers):
        # less sensitive than wall time to what else runs on a shared machine
        "cpu": usage.ru_utime + usage.ru_stime,
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
    p.add_argument("--peer-docs", type=int, default=None, help="documents PyPI simhash gets")
    p.add_argument(
        "--policies",
        default="default,plain",
        type=lambda v: v.split(","),
        help="neardup runs: default (the dedup policy), plain (--k 3 --verifier none)",
    )
    p.add_argument(
        "--text-dedup",
        metavar="PYTHON",
        default=os.environ.get("TEXT_DEDUP_PYTHON"),
        help="a Python with text-dedup installed (its own venv: it pins datasets, onnxruntime, "
        "urllib3<2); adds text-dedup's simhash script as a peer",
    )
    p.add_argument("--text-dedup-docs", type=int, default=None, help="documents it gets")
    p.add_argument("--cache", default="/tmp/neardup-bench-dedup", help="where corpora are kept")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--run-peer", help=argparse.SUPPRESS)
    p.add_argument("--make", choices=("short", "long"), help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--input", help=argparse.SUPPRESS)
    p.add_argument("--output", help=argparse.SUPPRESS)
    p.add_argument("--k", type=int, default=3, help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.run_peer:  # child process modes
        peer_simhash(args.input, args.output, args.k)
        return
    if args.make:
        (make_short if args.make == "short" else make_long)(args.output, args.n, args.seed)
        return

    n_short = args.short if args.short is not None else (100_000 if args.quick else 1_000_000)
    n_long = args.long if args.long is not None else (20_000 if args.quick else 200_000)
    peer_docs = args.peer_docs or (5_000 if args.quick else 20_000)
    td_docs = args.text_dedup_docs or (20_000 if args.quick else 100_000)
    text_dedup = args.text_dedup
    os.makedirs(args.cache, exist_ok=True)
    exe = shutil.which("neardup")
    if exe is None:
        sys.exit("the neardup command is not installed (pip install .)")

    rows = []
    for name, n in (("short", n_short), ("long", n_long)):
        if n <= 0:
            continue
        path = os.path.join(args.cache, f"{name}-{n}-{args.seed}-v2.jsonl")
        if not os.path.exists(path):
            t = time.perf_counter()
            print(f"making {path} ...", file=sys.stderr, flush=True)
            # in a child: a child's peak RSS starts at its parent's at fork, so this process
            # must stay small for the figures of the processes it measures
            subprocess.run(
                [sys.executable, __file__, "--make", name, "--n", str(n), "--seed",
                 str(args.seed), "--output", path],
                check=True,
            )  # fmt: skip
            print(f"  {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        size = os.path.getsize(path)
        out = os.path.join(args.cache, f"{name}-out.jsonl")

        runs: list[dict[str, Any]] = [
            {
                "name": "default",
                "tool": "neardup dedup (default policy)",
                "cmd": [exe, "dedup", path, "-o", out],
            },
            {
                "name": "plain",
                "tool": "neardup dedup --k 3 --verifier none",
                "cmd": [exe, "dedup", path, "-o", out, "--k", "3", "--verifier", "none"],
            },
        ]
        runs = [r for r in runs if r["name"] in args.policies]
        for run in runs:
            run.update(docs=n, bytes=size, peer=False)
        peer_in = os.path.join(args.cache, f"{name}-peer-{min(peer_docs, n)}.jsonl")
        head(path, peer_in, peer_docs)
        runs.append(
            {
                "tool": "PyPI simhash (SimhashIndex k=3)",
                "cmd": [sys.executable, __file__, "--run-peer", "simhash", "--input", peer_in,
                        "--output", out, "--k", "3"],
                "docs": count_lines(peer_in),
                "bytes": os.path.getsize(peer_in),
                "peer": True,
            }
        )  # fmt: skip
        if text_dedup:
            td_in = os.path.join(args.cache, f"{name}-td-{min(td_docs, n)}.jsonl")
            head(path, td_in, td_docs)
            td_out = os.path.join(args.cache, f"{name}-td-out")
            shutil.rmtree(td_out, ignore_errors=True)
            runs.append(
                {
                    "tool": "text-dedup simhash (bit_diff 3)",
                    "cmd": [text_dedup, "-m", "text_dedup.simhash", "--path", "json",
                            "--data_files", td_in, "--split", "train", "--output", td_out,
                            "--column", "text", "--bit_diff", "3", "--num_bucket", "4",
                            "--num_proc", "2", "--cache_dir", os.path.join(args.cache, "hf")],
                    "docs": count_lines(td_in),
                    "bytes": os.path.getsize(td_in),
                    "peer": True,
                    "text_dedup": True,
                }
            )  # fmt: skip
        for run in runs:
            print(f"{name}: {run['tool']} on {run['docs']:,} docs ...", file=sys.stderr, flush=True)
            load = os.getloadavg()[0]  # a shared machine: say how busy it was
            m = measure(run["cmd"])
            if run.get("text_dedup"):
                after = re.search(r"After\s*:\s*(?:\S*\s*)?(\d+)", m["stdout"] + m["stderr"])
                kept = int(after.group(1)) if after else run["docs"]
            else:
                kept = count_lines(out)
            rows.append(
                {
                    "set": name,
                    "tool": run["tool"],
                    "peer": run["peer"],
                    "docs": run["docs"],
                    "seconds": m["seconds"],
                    "cpu": m["cpu"],
                    "docs_s": run["docs"] / m["seconds"],
                    "mb_s": run["bytes"] / 1e6 / m["seconds"],
                    "peak_mb": m["peak_mb"],
                    "removed": run["docs"] - kept,
                    "load": load,
                }
            )
            last = m["stderr"].strip().splitlines()
            if last and not run["peer"]:
                print(f"  {last[-1]}", file=sys.stderr, flush=True)

    print()
    print(
        f"{'set':6} {'tool':38} {'docs':>10} {'s':>8} {'docs/s':>10} {'MB/s':>7} "
        f"{'peak MB':>8} {'removed':>8} {'x fastest peer':>14} {'load':>5} "
        f"{'cpu s':>7} {'x by cpu':>8}"
    )
    for r in rows:
        # the ratio is to the fastest peer of the same set
        fastest = max(x["docs_s"] for x in rows if x["set"] == r["set"] and x["peer"])
        ratio = r["docs_s"] / fastest
        # the same ratio with CPU time in place of wall time (documents per CPU second)
        cheapest = max(x["docs"] / x["cpu"] for x in rows if x["set"] == r["set"] and x["peer"])
        cpu_ratio = r["docs"] / r["cpu"] / cheapest
        print(
            f"{r['set']:6} {r['tool']:38} {r['docs']:>10,} {r['seconds']:>8.1f} "
            f"{r['docs_s']:>10,.0f} {r['mb_s']:>7.1f} {r['peak_mb']:>8.0f} {r['removed']:>8,} "
            f"{ratio:>13.1f}x {r['load']:>5.1f} {r['cpu']:>7.1f} {cpu_ratio:>7.1f}x"
        )
    print()
    for r in rows:
        if r["set"] == "short" and not r["peer"]:
            per_million = r["seconds"] * 1_000_000 / r["docs"]
            print(
                f"{r['tool']}: 1 M short documents in {per_million:.1f} s at this rate "
                f"(target <= 60 s): " + ("met" if per_million <= 60 else "missed")
            )


if __name__ == "__main__":
    main()
