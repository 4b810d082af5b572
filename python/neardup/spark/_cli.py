"""``neardup dedup --engine spark``: the session, the inputs Spark reads and the part-file
outputs the executors write."""

from __future__ import annotations

import glob
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup.policy import Policy

#: Compressions the local engine reads and Spark's text sources do not, and the command that
#: undoes each.
_UNREADABLE = {".xz": "xz -dk", ".zst": "zstd -d"}
_KINDS = {"jsonl": "json", "csv": "csv", "tsv": "tsv", "parquet": "parquet"}
_OUTPUT_FORMATS = ("jsonl", "parquet")
#: Settings of a session run_dedup_cli starts (``--spark-conf`` overrides them).
_QUIET = {
    "spark.sql.ui.retainedExecutions": "20",
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
}


def session(master: str | None, conf: Mapping[str, str] | None = None) -> SparkSession:
    """The active SparkSession, or one started on ``master`` (default ``$SPARK_MASTER``, else
    ``local[*]``) with ``conf``. The executors run this interpreter (a virtualenv's, even one
    not activated) unless ``PYSPARK_PYTHON`` says otherwise."""
    spark = SparkSession.getActiveSession()
    if spark is not None:
        for key, value in (conf or {}).items():
            spark.conf.set(key, value)  # (runtime settings; static ones need a new session)
        return spark
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master or os.environ.get("SPARK_MASTER", "local[*]"))
    builder = builder.appName("neardup dedup")
    # the job runs many small stages (decision rounds): keep few of their plans and metrics
    for key, value in _QUIET.items():
        builder = builder.config(key, value)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def parse_conf(items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` items (``--spark-conf``) as a dict; a ValueError names a bad one."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--spark-conf {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def _remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _kind(path: str, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in _KINDS:
            raise ValueError(
                f"--format {fmt} is not read by the Spark engine (jsonl, csv, tsv, parquet)"
            )
        return _KINDS[fmt]
    name = path.lower()
    for ext in (".gz", ".bz2", ".xz", ".zst"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    for ext, kind in ((".jsonl", "json"), (".json", "json"), (".ndjson", "json"),
                      (".parquet", "parquet"), (".csv", "csv"), (".tsv", "tsv")):  # fmt: skip
        if name.endswith(ext):
            return kind
    raise ValueError(f"cannot tell the format of {path!r} (jsonl, csv, tsv, parquet): use --format")


def _local_files(path: str) -> list[str]:
    """The files a local input stands for (a file, a directory's files, a glob's matches), as
    Spark reads them (names starting with '_' or '.' are not data)."""
    path = path.removeprefix("file://")
    if glob.has_magic(path):
        matches = sorted(glob.glob(path))
        if not matches:
            raise ValueError(f"{path}: no file matches")
        return [f for m in matches for f in _local_files(m)]
    if os.path.isdir(path):
        return sorted(
            os.path.join(root, f)
            for root, _, files in os.walk(path)
            for f in files
            if not f.startswith(("_", "."))
        )
    if not os.path.exists(path):
        raise ValueError(f"{path}: no such file or directory")
    return [path]


def read(spark: SparkSession, inputs: Sequence[str], fmt: str | None = None) -> DataFrame:
    """The inputs as one DataFrame: JSONL (also .gz, .bz2), CSV/TSV with a header, Parquet;
    files, directories, globs, and any URI the cluster reads (``hdfs://``, ``s3a://``). An
    input Spark cannot decode (.xz, .zst) is refused here, before any job."""
    kinds = set()
    for p in inputs:
        names = [p] if _remote(p) else _local_files(p)
        for name in names:
            codec = next((c for c in _UNREADABLE if name.lower().endswith(c)), None)
            if codec is not None:
                raise ValueError(
                    f"{name}: Spark reads .gz and .bz2 (and Parquet's own compression) but has "
                    f"no {codec} codec here; decompress it first (e.g. `{_UNREADABLE[codec]} "
                    f"{name}`) or use the local engine, which reads it"
                )
            if fmt is None and _remote(p) and not os.path.splitext(name.rstrip("/"))[1]:
                raise ValueError(f"{p}: cannot tell the format of a remote directory: use --format")
            kinds.add(_kind(name, fmt))
    if len(kinds) != 1:
        raise ValueError(
            f"inputs must all be one format (jsonl, csv, tsv, parquet); got {sorted(kinds)}"
        )
    kind = kinds.pop()
    paths = list(inputs)
    if kind == "json":
        return spark.read.json(paths)
    if kind == "parquet":
        return spark.read.parquet(*paths)
    sep = "\t" if kind == "tsv" else ","
    return spark.read.csv(paths, header=True, sep=sep, multiLine=True, escape='"')


def output_format(path: str, fmt: str | None) -> str:
    """``jsonl`` or ``parquet``: ``fmt`` when given, else Parquet for a path ending in
    ``.parquet``."""
    if fmt is not None:
        if fmt not in _OUTPUT_FORMATS:
            raise ValueError(f"--output-format must be jsonl or parquet, got {fmt!r}")
        return fmt
    return "parquet" if path.rstrip("/").lower().endswith(".parquet") else "jsonl"


def check_output(path: str) -> str:
    """The write mode for an output directory: a local path that exists must be a directory
    Spark wrote before (it has ``_SUCCESS``; it is replaced) or empty; anything else there is
    refused, so that ``-o`` never deletes a directory of the user's."""
    if _remote(path):
        return "errorifexists"
    local = path.removeprefix("file://")
    if not os.path.exists(local):
        return "errorifexists"
    if not os.path.isdir(local):
        raise ValueError(
            f"{path} is a file; with --engine spark the output is a directory of part files "
            "written by the executors"
        )
    entries = os.listdir(local)
    if not entries or "_SUCCESS" in entries:
        return "overwrite"
    raise ValueError(
        f"{path} is a directory that Spark did not write (no _SUCCESS); not replacing it"
    )


def write(df: DataFrame, path: str, fmt: str) -> None:
    """``df`` as part files under ``path``, written by the executors."""
    writer = df.write.mode(check_output(path))
    if fmt == "parquet":
        writer.parquet(path)
    else:
        writer.option("ignoreNullFields", "false").json(path)


def run_dedup_cli(
    inputs: Sequence[str],
    output: str,
    *,
    text_field: str = "text",
    id_field: str | None = None,
    k: int | None = None,
    keep: str = "first",
    time_field: str | None = None,
    clusters: str | None = None,
    pairs: str | None = None,
    master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    output_format_name: str | None = None,
    input_format: str | None = None,
    policy: Policy | Mapping[str, Any] | None = None,
    empty: str = "keep",
    against: Sequence[str] = (),
    against_text_field: str | None = None,
    against_id_field: str | None = None,
    on_error: str = "fail",
    checkpoint_dir: str | None = None,
) -> dict[str, Any]:
    """``neardup dedup --engine spark``: read ``inputs``, have the executors write the kept
    records to the directory ``output`` (part files, input order) and, when asked, the
    clusters ``{"id", "cluster", "kept", "distance", "similarity"}`` and the verified pairs
    ``{"a", "b", "distance", "similarity"}`` likewise: JSONL, or Parquet for a path ending in
    ``.parquet`` or with ``output_format_name="parquet"``. Returns a summary (counts only).
    ``against``: the paths of ``--against`` (:func:`neardup.spark.read_references`, read with
    ``against_text_field`` (default ``text_field``), ``against_id_field`` and ``on_error``),
    all checked before the session starts; a missing one is a ``ReferenceInputError`` (a
    ``ValueError``) naming it.
    ``checkpoint_dir``: ``--checkpoint-dir``, where the job's checkpoints are written (see
    :func:`neardup.spark.dedup_frames`), the references' included; it is set up after the
    outputs are checked and before any input is read, and a directory that cannot be made or
    written there is a ValueError naming ``--checkpoint-dir``; the job's subdirectory is removed
    when the job ends, failed or not.
    The other arguments are those of ``neardup dedup`` (see :func:`neardup.spark.dedup_frames`).
    """
    from neardup.spark import dedup_frames
    from neardup.spark._against import _read_all, check_references
    from neardup.spark._job import CheckpointDir, release

    started = time.perf_counter()
    targets = [p for p in (output, clusters, pairs) if p]
    formats = {p: output_format(p, output_format_name) for p in targets}
    if against:
        check_references(list(against), input_format)
    for p in targets:
        check_output(p)
    spark = session(master, spark_conf)
    own = None
    if checkpoint_dir is not None:
        own = CheckpointDir(spark, checkpoint_dir, "--checkpoint-dir")
    held: list[DataFrame] = []
    try:
        df = read(spark, inputs, input_format)
        if text_field not in df.columns:
            raise ValueError(
                f"--text-field {text_field!r} is not a field of the input: {df.columns}"
            )
        if id_field is None and "id" in df.columns:
            id_field = "id"
        elif id_field is not None and id_field not in df.columns:
            raise ValueError(f"--id-field {id_field!r} is not a field of the input: {df.columns}")
        if time_field is not None and time_field not in df.columns:
            raise ValueError(
                f"--time-field {time_field!r} is not a field of the input: {df.columns}"
            )
        refs = None
        if against:
            refs = _read_all(
                spark,
                list(against),
                against_text_field or text_field,
                against_id_field,
                input_format,
                on_error,
                held,
            )
        try:
            frames = dedup_frames(
                df,
                text_field,
                id_field,
                k,
                policy=policy,
                keep=keep,
                time_col=time_field,
                empty=empty,
                against=refs,
                against_text_col="text" if refs is not None else None,
                against_id_col="id" if refs is not None else None,
            )
        except ValueError as e:
            raise ValueError(str(e).replace("time_col", "--time-field", 1)) from None
        try:
            write(frames.kept, output, formats[output])
            if clusters:
                write(frames.clusters, clusters, formats[clusters])
            if pairs:
                write(frames.pairs, pairs, formats[pairs])
            n = df.count()
            by_ref = F.col("reference") if refs is not None else F.lit(False)
            counts = (
                frames.clusters.groupBy()
                .agg(
                    F.count(F.when(~F.col("kept"), 1)).alias("removed"),
                    F.count(F.when(F.col("kept"), 1)).alias("clusters"),
                    F.count(F.when(by_ref, 1)).alias("by_reference"),
                    F.count_distinct(F.when(by_ref, F.col("cluster"))).alias("matched"),
                )
                .first()
            )
            n_empty = frames.stats.get("empty")
        finally:
            frames.unpersist()
    finally:
        for frame in held:
            release(frame)
        if own is not None:
            own.remove()
    removed = int(counts["removed"]) if counts is not None else 0
    if empty == "drop" and n_empty:
        removed += int(n_empty)
    elapsed = time.perf_counter() - started
    with_refs: dict[str, Any] = {}
    if refs is not None:
        with_refs = {
            "references": frames.stats.get("references"),
            "removed_as_reference_copies": int(counts["by_reference"]) if counts else 0,
            "matched_references": int(counts["matched"]) if counts else 0,
        }
    return {
        "documents": n,
        "kept": n - removed,
        "removed": removed,
        "clusters": int(counts["clusters"]) if counts is not None else 0,
        "empty": n_empty,
        "rounds": frames.stats.get("rounds"),
        "decided_in_one_task": frames.stats.get("decided_in_one_task"),
        "seconds": round(elapsed, 3),
        "docs_per_second": int(n / elapsed) if elapsed > 0 else None,
        "engine": "spark",
        "master": spark.sparkContext.master,
        "keep": keep,
        "outputs": {p: formats[p] for p in targets},
        **with_refs,
    }
