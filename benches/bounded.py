"""Cost per document as the corpus grows, on workloads whose fingerprints are close together.

`neardup dedup` against datasketch MinHashLSH on the workloads of benches/workloads.py
(same-domain-long, templated, families, one-paragraph), one workload and one or more sizes per
command. Each tool runs as its own process with its address space capped (``--memory-limit-gb``,
RLIMIT_AS), so that a run that would exhaust the shared machine fails and is reported as such;
the figures are wall time and that process's peak resident memory (``wait4`` rusage).

The peer: datasketch MinHashLSH, threshold 0.8, 128 permutations, on the character 5-gram
shingles of the text after NFKC, lower case and whitespace collapse (benches/corpus.py's
normalise); each document queries the index and is inserted only when nothing is found (the
first of each group is kept). With ``--peer-max-docs`` it runs on the first documents of the
file only and its time is extrapolated linearly (the output says so).

Per size: documents/s, peak RSS, kept, neardup's candidates per document when its verbose output
reports them (else n/a), neardup/datasketch in documents/s; across sizes: time(size) over
time(smallest size) next to the ratio of sizes. ``--truth-sample`` measures on a random sample of
the file the exact near-copies (5-gram Jaccard >= 0.8, corpus.exact_pairs) and the Hamming
distances of the fingerprints of unrelated pairs (neardup's default policy), and with them the
share of unrelated stored documents that fall within the candidate radius.

    python benches/bounded.py --workload templated --docs 20000
    python benches/bounded.py --workload families --sizes 20000,80000,200000 --peer-max-docs 20000
    python benches/bounded.py --workload templated --docs 20000 --param skew=1.5
    PYTHONPATH=/tmp/old/python python benches/bounded.py --neardup "python3 -m neardup" ...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

WORKLOADS = ("same-domain-long", "templated", "families", "one-paragraph")
# Messages of a process that ran out of its address space (Python, the Rust allocator, libc).
_OOM = re.compile(
    r"MemoryError|memory allocation of \d+ bytes failed|Cannot allocate memory|out of memory|"
    r"std::bad_alloc|failed to allocate",
    re.I,
)


# ---------------------------------------------------------------------------------------------
# child modes: each runs in its own process, so that this one stays small (a child's peak RSS
# starts at its parent's at fork) and a failure in one leaves the others' figures


def run_peer(inp: str, out: str) -> None:
    """datasketch MinHashLSH (0.8, 128 permutations): query, then insert what stays."""
    from corpus import SHINGLE, THRESHOLD, normalise
    from datasketch import MinHash, MinHashLSH

    num_perm = 128
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=num_perm)
    # The permutations drawn once (what MinHash(num_perm) would redraw for every document).
    template = MinHash(num_perm=num_perm)
    kept = 0
    with open(inp, "rb") as f, open(out, "wb") as g:
        for i, line in enumerate(f):
            norm = normalise(json.loads(line)["text"])
            if len(norm) > SHINGLE:
                grams = {norm[j : j + SHINGLE] for j in range(len(norm) - SHINGLE + 1)}
            else:
                grams = {norm}
            m = MinHash(
                num_perm=num_perm, permutations=template.permutations, scheme=template.scheme
            )
            m.update_batch([x.encode("utf-8") for x in grams])
            if lsh.query(m):
                continue
            lsh.insert(i, m)
            g.write(line)
            kept += 1
    print(json.dumps({"kept": kept}))


def analyse(path: str, sample: int, seed: int) -> None:
    """Exact near-copies and fingerprint distances on a random sample of ``path`` (JSON out)."""
    import random

    import numpy as np
    from corpus import exact_pairs

    rng = random.Random(seed)
    with open(path, "rb") as f:
        lines = f.readlines()
    picked = sorted(rng.sample(range(len(lines)), min(sample, len(lines))))
    texts = [json.loads(lines[i])["text"] for i in picked]
    del lines
    with open(path + ".origin", encoding="utf-8") as lines_of:
        origins = [int(x) for x in lines_of]
    origin = [origins[i] for i in picked]
    t0 = time.perf_counter()
    pairs = exact_pairs(texts)
    # Documents of the sample with a near-copy before them in the file: what an exact
    # first-kept dedup of the sample would remove (within connected groups, at most this).
    parent = list(range(len(texts)))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in pairs:
        parent[root(j)] = root(i)
    groups = len({root(i) for i in range(len(texts))})
    report: dict[str, Any] = {
        "sample": len(texts),
        "pairs": len(pairs),
        "docs_with_copy": len({i for p in pairs for i in p}),
        "removable": len(texts) - groups,
        "truth_seconds": round(time.perf_counter() - t0, 1),
    }
    try:  # the engine is being rewritten: its policy API may have moved
        from neardup import Policy

        policy = Policy.default()
        fps = policy.fingerprint_many(policy.make_fingerprinter(), texts)
        lengths = [len(t) for t in policy.prepare_many(texts)]
        # Random pairs: how many fall within the candidate radius (what a query meets), and
        # the distances of unrelated ones (other origins, not near-copies).
        dist, within, within_any = [], 0, 0
        n_pairs = min(50_000, len(texts) * (len(texts) - 1) // 2)
        for _ in range(n_pairs):
            i, j = rng.sample(range(len(texts)), 2)
            d = bin(int(fps[i]) ^ int(fps[j])).count("1")
            near = d <= policy.radius(lengths[j])
            within_any += near
            if origin[i] != origin[j] and (min(i, j), max(i, j)) not in pairs:
                dist.append(d)
                within += near
        report["any_within_radius"] = within_any / n_pairs
        report["unrelated_pairs"] = len(dist)
        report["unrelated_hamming_median"] = float(np.median(dist)) if dist else None
        report["unrelated_hamming_p5"] = float(np.percentile(dist, 5)) if dist else None
        report["unrelated_within_radius"] = within / len(dist) if dist else None
    except Exception as e:  # a measurement of context: report it, do not fail the benchmark
        report["hamming_error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(report))


# ---------------------------------------------------------------------------------------------
# measurement


def _limit(memory_bytes: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    return apply


def measure(cmd: list[str], memory_gb: float, timeout_s: float) -> dict[str, Any]:
    """Run ``cmd`` under an address-space cap; wall seconds, peak RSS (MB), outcome, output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            preexec_fn=_limit(int(memory_gb * 2**30)),
            start_new_session=True,  # its own group: a timeout ends it and its workers together
        )
        timed_out = False
        while True:
            # wait4: the rusage of this child alone (its own peak RSS)
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > timeout_s and not timed_out:
                os.killpg(p.pid, signal.SIGKILL)
                timed_out = True
            time.sleep(0.02)
        seconds = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    if timed_out:
        outcome = f"timeout after {timeout_s:.0f} s"
    elif p.returncode == 0:
        outcome = "ok"
    elif _OOM.search(stderr) or p.returncode == -signal.SIGABRT:
        outcome = f"out of memory (address space capped at {memory_gb:g} GB)"
    else:
        outcome = f"failed (exit {p.returncode})"
    return {
        "seconds": seconds,
        "peak_mb": usage.ru_maxrss / 1024,
        "outcome": outcome,
        "stdout": stdout,
        "stderr": stderr,
    }


def count_lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def head(path: str, out: str, n: int) -> None:
    """The first ``n`` lines of a JSONL file (the peer's capped input)."""
    with open(path, "rb") as f, open(out, "wb") as g:
        for i, line in enumerate(f):
            if i >= n:
                break
            g.write(line)


def candidates_per_doc(stderr: str) -> float | None:
    """neardup's candidates per document, from the line of ``neardup dedup --verbose`` that
    says "candidates per document X"; None when no line says it."""
    found = re.search(r"candidates per document ([\d.]+)", stderr)
    return float(found.group(1)) if found else None


# ---------------------------------------------------------------------------------------------
# one workload, one size


def workload_file(args: argparse.Namespace, docs: int) -> tuple[str, dict[str, Any]]:
    """The cached JSONL of the workload at ``docs`` documents and its description."""
    # Keyed by the parameters and by the generators' source (not imported here: this process
    # stays small), so that a changed generator makes new files.
    key = hashlib.sha1(json.dumps([args.workload, docs, args.seed, sorted(args.param)]).encode())
    for name in ("workloads.py", "corpus.py"):
        with open(os.path.join(HERE, name), "rb") as f:
            key.update(f.read())
    digest = key.hexdigest()[:10]
    path = os.path.join(args.cache, f"{args.workload}-{docs}-{args.seed}-{digest}.jsonl")
    if not os.path.exists(path) or not os.path.exists(path + ".meta.json"):
        print(f"making {path} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        params = [x for p in args.param for x in ("--param", p)]
        subprocess.run(
            [sys.executable, os.path.join(HERE, "workloads.py"), args.workload, "--n", str(docs),
             "--seed", str(args.seed), "--out", path, *params],
            check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        print(f"  {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    with open(path + ".meta.json", encoding="utf-8") as f:
        return path, json.load(f)


def run_size(args: argparse.Namespace, docs: int, exe: list[str]) -> dict[str, Any]:
    path, meta = workload_file(args, docs)
    out = os.path.join(args.cache, "out-neardup.jsonl")
    row: dict[str, Any] = {"docs": docs, "meta": meta, "mb": os.path.getsize(path) / 1e6}
    print(f"{args.workload} {docs:,}: neardup dedup ...", file=sys.stderr, flush=True)
    # Not --quiet: the summary line and --verbose's phase times (and candidates, when the
    # engine reports them) are on stderr; without a terminal there is no progress bar.
    m = measure([*exe, "dedup", path, "-o", out, "--verbose"], args.memory_limit_gb, args.timeout)
    row["neardup"] = m
    if m["outcome"] == "ok":
        m["kept"] = count_lines(out)
        m["candidates"] = candidates_per_doc(m["stderr"])
        for line in m["stderr"].strip().splitlines():
            print(f"  {line}", file=sys.stderr, flush=True)
    else:
        print(f"  {m['outcome']}: {m['stderr'].strip()[-500:]}", file=sys.stderr, flush=True)
    if os.path.exists(out):
        os.remove(out)

    if not args.no_peer:
        peer_docs = min(docs, args.peer_max_docs) if args.peer_max_docs else docs
        peer_in = path
        if peer_docs < docs:
            peer_in = os.path.join(args.cache, "peer-in.jsonl")
            head(path, peer_in, peer_docs)
        peer_out = os.path.join(args.cache, "out-peer.jsonl")
        print(f"{args.workload} {docs:,}: datasketch on {peer_docs:,} ...", file=sys.stderr)
        p = measure(
            [sys.executable, __file__, "--run-peer", peer_in, "--output", peer_out],
            args.memory_limit_gb,
            args.timeout,
        )
        p["docs"] = peer_docs
        if p["outcome"] == "ok":
            p["kept"] = json.loads(p["stdout"].strip().splitlines()[-1])["kept"]
        else:
            print(f"  {p['outcome']}: {p['stderr'].strip()[-500:]}", file=sys.stderr, flush=True)
        row["peer"] = p
        for name in (peer_out, os.path.join(args.cache, "peer-in.jsonl")):
            if os.path.exists(name):
                os.remove(name)

    if args.truth_sample:
        print(f"{args.workload} {docs:,}: truth on a sample ...", file=sys.stderr, flush=True)
        a = measure(
            [sys.executable, __file__, "--analyse", path, "--sample", str(args.truth_sample),
             "--seed", str(args.seed)],
            args.memory_limit_gb,
            args.timeout,
        )  # fmt: skip
        if a["outcome"] == "ok":
            row["truth"] = json.loads(a["stdout"].strip().splitlines()[-1])
        else:
            row["truth"] = {"error": a["outcome"] + ": " + a["stderr"].strip()[-300:]}
    return row


# ---------------------------------------------------------------------------------------------
# report


def _docs_s(m: dict[str, Any], docs: int) -> float | None:
    return docs / m["seconds"] if m.get("outcome") == "ok" else None


def report(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    print()
    params = rows[0]["meta"]["params"]
    print(
        f"workload {args.workload}, seed {args.seed}, "
        + ", ".join(f"{k}={v}" for k, v in params.items())
        + f"; memory cap {args.memory_limit_gb:g} GB per process; "
        f"load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        f"{'docs':>9} {'MB':>7} {'tool':28} {'s':>8} {'docs/s':>9} {'peak MB':>8} {'kept':>9} "
        f"{'cand/doc':>9} {'x peer':>7} {'t/t0':>6} {'n/n0':>5}"
    )
    first: dict[str, float] = {}
    notes: list[str] = []
    for r in rows:
        docs = r["docs"]
        n = r["neardup"]
        peer = r.get("peer")
        nd_rate = _docs_s(n, docs)
        peer_rate = _docs_s(peer, peer["docs"]) if peer else None
        lines = [("neardup dedup", n, docs, nd_rate)]
        if peer:
            label = "datasketch MinHashLSH"
            if peer["docs"] < docs:
                label += f" ({peer['docs'] // 1000}k)*"
            lines.append((label, peer, peer["docs"], peer_rate))
        for tool, m, tool_docs, rate in lines:
            is_peer = tool != "neardup dedup"
            key = "peer" if is_peer else "neardup"
            if rate is None:
                print(
                    f"{docs:>9,} {r['mb']:>7.1f} {tool:28} {m['outcome']}, "
                    f"after {m['seconds']:.1f} s at peak {m['peak_mb']:,.0f} MB"
                )
                continue
            # a capped peer run stands for the whole file at its measured rate (extrapolated)
            seconds = docs / rate
            first.setdefault(key, seconds)
            first.setdefault("docs", docs)
            cand = m.get("candidates")
            cand_s = "" if is_peer else ("n/a" if cand is None else f"{cand:.2f}")
            ratio = ""
            if not is_peer and peer_rate:
                ratio = f"{rate / peer_rate:.2f}x"
            shown_s = f"{seconds:.1f}" + ("*" if tool_docs < docs else "")
            print(
                f"{docs:>9,} {r['mb']:>7.1f} {tool:28} {shown_s:>8} {rate:>9,.0f} "
                f"{m['peak_mb']:>8,.0f} {m['kept']:>9,} {cand_s:>9} {ratio:>7} "
                f"{seconds / first[key]:>6.2f} {docs / first['docs']:>5.1f}"
            )
            if tool_docs < docs:
                notes.append(
                    f"* datasketch ran on the first {tool_docs:,} of {docs:,} documents "
                    f"({m['seconds']:.1f} s, kept {m['kept']:,}); its time for all of them is "
                    "extrapolated linearly at that rate (optimistic: its buckets grow with the "
                    "index), its peak RSS and kept are of the subset."
                )
    for note in notes:
        print(note)
    print()
    for r in rows:
        meta, t = r["meta"], r.get("truth")
        line = (
            f"{r['docs']:,} docs: planted copies {meta['planted_copies']:,} "
            f"({meta['origins']:,} origins)"
        )
        if t and "error" not in t:
            line += (
                f"; exact sample of {t['sample']:,}: {t['pairs']:,} pairs at Jaccard >= 0.8, "
                f"{t['docs_with_copy']:,} docs with a near-copy, {t['removable']:,} removable"
            )
            if t["sample"] < r["docs"]:
                # each pair of the file is in the sample with probability s(s-1) / n(n-1)
                scale = r["docs"] * (r["docs"] - 1) / (t["sample"] * (t["sample"] - 1))
                line += f" (~{t['pairs'] * scale:,.0f} pairs in the file, scaled)"
            if "any_within_radius" in t:
                line += (
                    f"; random pairs within the candidate radius: "
                    f"{100 * t['any_within_radius']:.2f} %"
                )
            if t.get("unrelated_pairs"):
                line += (
                    f"; unrelated pairs (other origin, Jaccard < 0.8): median Hamming "
                    f"{t['unrelated_hamming_median']:g} (5th pct {t['unrelated_hamming_p5']:g}), "
                    f"{100 * t['unrelated_within_radius']:.2f} % within the radius"
                )
            if "hamming_error" in t:
                line += f"; Hamming n/a ({t.get('hamming_error')})"
        elif t:
            line += f"; truth failed: {t['error']}"
        print(line)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            for r in rows:
                for m in (r["neardup"], r.get("peer") or {}):
                    m.pop("stdout", None)
                    m["stderr"] = m.get("stderr", "")[-2000:]
            json.dump({"workload": args.workload, "seed": args.seed, "rows": rows}, f, indent=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workload", choices=WORKLOADS)
    p.add_argument("--docs", type=int, help="documents (one size)")
    p.add_argument("--sizes", help="comma-separated sizes, e.g. 20000,80000,200000 (growth ratios)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a generator parameter (benches/workloads.py), e.g. copies=300, skew=1.5",
    )
    p.add_argument(
        "--peer-max-docs",
        type=int,
        default=0,
        help="run datasketch on at most this many documents, extrapolating (0: all)",
    )
    p.add_argument("--no-peer", action="store_true", help="neardup only")
    p.add_argument(
        "--memory-limit-gb",
        type=float,
        default=20.0,
        help="address-space cap of each measured process (RLIMIT_AS; default 20)",
    )
    p.add_argument("--timeout", type=float, default=1800, help="seconds per process")
    p.add_argument(
        "--truth-sample",
        type=int,
        default=1000,
        help="documents sampled for exact near-copies and Hamming distances (0: skip)",
    )
    p.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "neardup-bench-bounded"),
        help="where generated files are kept (keyed by their parameters)",
    )
    p.add_argument(
        "--neardup",
        default="neardup",
        help="the command that runs neardup (default: neardup); e.g. 'python3 -m neardup' with "
        "PYTHONPATH naming another checkout's python/ folder",
    )
    p.add_argument("--json", help="also write the figures as JSON")
    p.add_argument("--run-peer", help=argparse.SUPPRESS)
    p.add_argument("--analyse", help=argparse.SUPPRESS)
    p.add_argument("--output", help=argparse.SUPPRESS)
    p.add_argument("--sample", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.run_peer:  # child process modes
        run_peer(args.run_peer, args.output)
        return
    if args.analyse:
        analyse(args.analyse, args.sample, args.seed)
        return

    if not args.workload:
        p.error("--workload is required")
    if (args.docs is None) == (args.sizes is None):
        p.error("give one of --docs N or --sizes N1,N2,...")
    sizes = [args.docs] if args.docs else sorted(int(s) for s in args.sizes.split(","))
    if any(s < 1 for s in sizes):
        p.error("sizes must be >= 1")
    if args.memory_limit_gb <= 0:
        p.error("--memory-limit-gb must be > 0")
    exe = shlex.split(args.neardup)
    if shutil.which(exe[0]) is None:
        sys.exit(f"{exe[0]}: not found (pip install . for the neardup command)")
    os.makedirs(args.cache, exist_ok=True)
    rows = [run_size(args, docs, exe) for docs in sizes]
    report(args, rows)


if __name__ == "__main__":
    main()
