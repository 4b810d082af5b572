"""Spark batch dedup (``neardup dedup --engine spark`` = ``neardup.spark.run_dedup_cli``) in
``local[2]`` against the single-machine ``neardup dedup`` command, on the same JSONL corpus.

Two corpora from benches/workloads.py: short texts in repost families (``families``: each base
sentence copied with 0-3 character edits) and same-domain English long documents
(``same_domain_long``). Both engines run the default policy and ``--keep first``; printed: wall
time and documents per second of each (Spark: the job alone, and the session start apart),
the ratio, and whether both kept the same documents.

    python benches/spark.py --quick            # 2 000 documents of each
    python benches/spark.py --docs 100000 --corpus short
    python benches/spark.py --docs 1000000 --corpus short   # 1 M: ~16 minutes in local[2] here

The families here are the generator's defaults (300 copies, 0-3 edits), where the local
engine's default limits bind; the Spark job reads the candidates the local engine reads, so
the kept sets are the same (a "False" is a defect, or the job's repair rounds ran out:
docs/batch.md, "Spark").
Figures: docs/batch.md, "Sizing a cluster".
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import workloads  # noqa: E402


def write_corpus(path: str, texts: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n")


def local_ids(path: str) -> list[int]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["id"] for line in f]


def part_ids(path: str) -> list[int]:
    out: list[int] = []
    for part in sorted(glob.glob(os.path.join(path, "part-*"))):
        out += local_ids(part)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 000 documents of each corpus")
    ap.add_argument("--docs", type=int, default=None, help="documents per corpus (default 20 000)")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--corpus", choices=("short", "long", "both"), default="both")
    args = ap.parse_args()
    n = args.docs or (2000 if args.quick else 20000)
    exe = shutil.which("neardup")
    if exe is None:
        sys.exit("the neardup command is not installed (pip install -e .)")
    from neardup import spark as nspark
    from pyspark.sql import SparkSession

    t0 = time.perf_counter()
    session = (
        SparkSession.builder.master(args.master)
        .appName("neardup-bench")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    start_s = time.perf_counter() - t0
    print(f"# {n} documents per corpus, {os.cpu_count()} CPUs, Spark master {args.master}, "
          f"session start {start_s:.1f} s")  # fmt: skip
    corpora = {
        "short families": lambda: workloads.families(n, 1).texts,
        "same-domain long": lambda: workloads.same_domain_long(n, 1).texts,
    }
    if args.corpus != "both":
        corpora = {k: v for k, v in corpora.items() if args.corpus in k.split()}
    work = tempfile.mkdtemp(prefix="neardup-bench-spark-")
    try:
        for name, make in corpora.items():
            src = os.path.join(work, "in.jsonl")
            write_corpus(src, make())
            local_out = os.path.join(work, "local.jsonl")
            t0 = time.perf_counter()
            subprocess.run([exe, "dedup", src, "-o", local_out, "--quiet"], check=True)
            local_s = time.perf_counter() - t0
            spark_out = os.path.join(work, "spark-out")
            t0 = time.perf_counter()
            summary = nspark.run_dedup_cli([src], spark_out, text_field="text")
            job_s = time.perf_counter() - t0
            same = local_ids(local_out) == part_ids(spark_out)
            print(f"{name:17s} local {local_s:7.1f} s {n / local_s:>9,.0f} docs/s | spark "
                  f"{job_s:7.1f} s {n / job_s:>7,.0f} docs/s | spark/local time "
                  f"{job_s / local_s:6.1f}x | same kept: {same} ({summary['kept']} of "
                  f"{summary['documents']}, {summary['rounds']} rounds)")  # fmt: skip
            shutil.rmtree(spark_out, ignore_errors=True)
    finally:
        session.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
