"""Spark batch dedup (``neardup dedup --engine spark`` = ``neardup.spark.run_dedup_cli``) in
``local[2]`` against the single-machine ``neardup dedup`` command, on the same JSONL corpus.

The corpus: the rows of examples/news-sample.jsonl (real Chinese and English text), cycled with
a numeric suffix up to the size asked, plus 20 % near-copies (a few characters changed),
shuffled. Both engines run the default policy and ``--keep first``; the figures are documents
per second of wall time (Spark: the job alone, and with the session start), and whether the two
kept the same documents.

    python benches/spark.py --quick      # 5 000 documents
    python benches/spark.py              # 50 000 documents
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "..", "examples", "news-sample.jsonl")


def write_corpus(path: str, n: int, seed: int = 5) -> None:
    with open(SAMPLE, encoding="utf-8") as f:
        base = [json.loads(line) for line in f]
    rng = random.Random(seed)
    rows = []
    for i in range(int(n * 0.8)):
        r = dict(base[i % len(base)])
        r["id"] = f"d{i}"
        if i >= len(base):
            r["text"] = r["text"] + f" #{i}"
        rows.append(r)
    originals = list(rows)
    while len(rows) < n:
        r = dict(rng.choice(originals))
        t = list(r["text"])
        for _ in range(rng.randint(1, 3)):
            t[rng.randrange(len(t))] = rng.choice("的了是在和有我这 abcxyz")
        r["text"] = "".join(t)
        r["id"] = f"c{len(rows)}"
        rows.append(r)
    rng.shuffle(rows)
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 000 documents")
    ap.add_argument("--docs", type=int, default=None, help="documents (default 50 000)")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    args = ap.parse_args()
    n = args.docs or (5000 if args.quick else 50000)
    work = tempfile.mkdtemp(prefix="neardup-bench-spark-")
    try:
        src = os.path.join(work, "in.jsonl")
        write_corpus(src, n)
        exe = shutil.which("neardup")
        if exe is None:
            sys.exit("the neardup command is not installed (pip install -e .)")
        local_out = os.path.join(work, "local.jsonl")
        t0 = time.perf_counter()
        subprocess.run([exe, "dedup", src, "-o", local_out, "--quiet"], check=True)
        local_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        from neardup import spark as nspark
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master(args.master)
            .appName("neardup-bench")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        start_s = time.perf_counter() - t0
        spark_out = os.path.join(work, "spark.jsonl")
        t0 = time.perf_counter()
        summary = nspark.run_dedup_cli([src], spark_out, text_field="text")
        job_s = time.perf_counter() - t0
        session.stop()

        def ids(p: str) -> list[str]:
            with open(p, encoding="utf-8") as f:
                return [json.loads(line)["id"] for line in f]

        same = ids(local_out) == ids(spark_out)
        print(f"# {n} documents, {os.cpu_count()} CPUs, Spark master {args.master}")
        print(f"neardup dedup (local)      : {local_s:7.1f} s  {n / local_s:>9,.0f} docs/s")
        print(f"neardup dedup --engine spark: {job_s:7.1f} s  {n / job_s:>9,.0f} docs/s "
              f"(+{start_s:.1f} s session start: {n / (job_s + start_s):,.0f} docs/s)")  # fmt: skip
        print(f"spark / local: {local_s / job_s:.2f}x; same kept documents: {same}; "
              f"kept {summary['kept']} of {summary['documents']}")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
