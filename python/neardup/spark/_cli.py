"""``neardup dedup --engine spark``: the session, the inputs Spark reads and the part-file
outputs the executors write."""

from __future__ import annotations

import glob
import os
import sys
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup.policy import Policy

#: Compressions the local engine reads and Spark's text sources do not, and the command that
#: undoes each.
_UNREADABLE = {".xz": "xz -dk", ".zst": "zstd -d"}
_KINDS = {"jsonl": "json", "csv": "csv", "tsv": "tsv", "parquet": "parquet"}
_OUTPUT_FORMATS = ("jsonl", "parquet")
#: Settings of a session run_dedup_cli starts (``--spark-conf`` overrides them): few plans
#: kept, and field names told apart by case as the local engine does (a record with "text"
#: and "Text").
_QUIET = {
    "spark.sql.ui.retainedExecutions": "20",
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.sql.caseSensitive": "true",
}
#: The input order and the ``FILE:LINE`` of each row of the corpus (:func:`in_input_order`).
ORDER = "__neardup_order"
PLACE = "__neardup_place"


def session(master: str | None, conf: Mapping[str, str] | None = None) -> SparkSession:
    """The active SparkSession, or one started on ``master`` (default ``$SPARK_MASTER``, else
    the master spark-submit set, else ``local[*]``) with ``conf``. The executors run this
    interpreter (a virtualenv's, even one not activated) unless ``PYSPARK_PYTHON`` says
    otherwise."""
    spark = SparkSession.getActiveSession()
    if spark is not None:
        for key, value in (conf or {}).items():
            spark.conf.set(key, value)  # (runtime settings; static ones need a new session)
        return spark
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    master = master or os.environ.get("SPARK_MASTER")
    # (under spark-submit, which starts the JVM and names its port to this process, the
    # master is spark-submit's)
    if master or "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(master or "local[*]")
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


class UsageError(ValueError):
    """Flags or paths the job cannot run with (the command exits 2, as for the local engine)."""


def _remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _kind(path: str, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in _KINDS:
            raise UsageError(
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


def read(
    spark: SparkSession,
    inputs: Sequence[str],
    fmt: str | None = None,
    text_field: str | None = None,
) -> DataFrame:
    """The inputs as one DataFrame: JSONL (also .gz, .bz2), CSV/TSV with a header, Parquet;
    files, directories, globs, and any URI the cluster reads (``hdfs://``, ``s3a://``). An
    input Spark cannot decode (.xz, .zst) is refused here, before any job. An empty CSV cell
    of ``text_field`` is the empty text, as the local engine reads it (Spark reads null). A
    directory's files are read in its subdirectories too (as :func:`input_kind` tells them)."""
    kind = input_kind(inputs, fmt)
    paths = list(inputs)
    reader = spark.read.option("recursiveFileLookup", "true")
    if kind == "json":
        return reader.json(paths)
    if kind == "parquet":
        return reader.parquet(*paths)
    sep = "\t" if kind == "tsv" else ","
    df = reader.csv(paths, header=True, sep=sep, multiLine=True, escape='"')
    if text_field is not None and text_field in df.columns:
        df = df.fillna("", subset=[text_field])
    return df


def input_kind(inputs: Sequence[str], fmt: str | None) -> str:
    """The one Spark source of ``inputs`` (json, csv, tsv, parquet); ValueError names an input
    Spark cannot read, or a mix."""
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
    return kinds.pop()


def _file_order(inputs: Sequence[str]) -> Callable[[str], tuple[int, str]]:
    """The place of a file Spark names by URI in the input order: the index of its argument
    (a remote one's files after the local ones), then its name (a directory's or a glob's
    files in name order, as the local engine reads them); and its name as the local engine
    writes it in ``FILE:LINE``."""
    known: dict[str, tuple[int, str]] = {}
    for i, arg in enumerate(inputs):
        if _remote(arg):
            continue
        for f in _local_files(arg):
            path = os.path.abspath(f)
            known[Path(path).as_uri()] = known["file:" + path] = (i, f)

    def order(uri: str) -> tuple[int, str]:
        if uri in known:
            return known[uri]
        plain = uri
        if uri.startswith("file:"):
            plain = urllib.parse.unquote(uri.removeprefix("file://").removeprefix("file:"))
            if Path(plain).as_uri() in known:
                return known[Path(plain).as_uri()]
        return (len(inputs), plain)

    return order


def in_input_order(df: DataFrame, inputs: Sequence[str], header: bool) -> DataFrame:
    """``df`` (read from ``inputs`` by :func:`read`) with :data:`ORDER`, the row's place in the
    input order from 0 (the inputs as given, a directory's files in name order, each file's rows
    in order; Spark packs the files into partitions largest first), and :data:`PLACE`, its
    ``FILE:LINE`` (the line of a one-line record; ``header``: a CSV/TSV header line first).
    The order comes from one small table per file part (a count and the first row's id)."""
    row, file = "__neardup_row", "__neardup_file"
    base = df.withColumn(row, F.monotonically_increasing_id()).withColumn(file, F.input_file_name())
    part = F.shiftright(F.col(row), 33)
    table = [
        (str(r[0]), int(r[1]), int(r[2]), int(r[3]))
        for r in base.groupBy(file, part.alias("p"))
        .agg(F.count(F.lit(1)).alias("n"), F.min(row).alias("first"))
        .collect()
    ]
    order = _file_order(inputs)
    rows = []
    file_start: dict[str, int] = {}
    in_file: dict[str, int] = {}
    total = 0
    for uri, p, n, first in sorted(table, key=lambda t: (order(t[0]), t[1])):
        if uri not in file_start:
            file_start[uri], in_file[uri] = total, 0
        before = in_file[uri]
        start, line0 = file_start[uri] + before - first, before + 1 + int(header) - first
        rows.append((uri, p, order(uri)[1], line0, start))
        in_file[uri] = before + n
        total += n
    spark = df.sparkSession
    parts = spark.createDataFrame(rows, "f string, pp long, name string, line0 long, start long")
    joined = base.join(F.broadcast(parts), (base[file] == parts["f"]) & (part == parts["pp"]))
    return joined.select(
        *[F.col(c) for c in df.columns],
        (F.col("start") + F.col(row)).alias(ORDER),
        F.concat(F.col("name"), F.lit(":"), (F.col("line0") + F.col(row)).cast("string")).alias(
            PLACE
        ),
    )


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
        raise UsageError(
            f"{path} is a file; with --engine spark the output is a directory of part files "
            "written by the executors"
        )
    entries = os.listdir(local)
    if not entries or "_SUCCESS" in entries:
        return "overwrite"
    raise UsageError(
        f"{path} is a directory that Spark did not write (no _SUCCESS); not replacing it"
    )


def write(df: DataFrame, path: str, fmt: str) -> None:
    """``df`` as part files under ``path``, written by the executors."""
    writer = df.write.mode(check_output(path))
    if fmt == "parquet":
        writer.parquet(path)
    else:
        writer.option("ignoreNullFields", "false").json(path)


def _bad_time(value: Any) -> bool:
    """Whether a time is missing or not one (the rule of :func:`neardup.io.parse_time`)."""
    from neardup.spark._job import _time_or_error

    return _time_or_error(value)[1] is not None


def _checked(
    df: DataFrame, text_field: str, on_error: str, time_field: str | None = None
) -> tuple[DataFrame, int]:
    """The rows of ``df`` (in input order) that are records with a text: a line that is not
    JSON, or a record without the text field (or null), stops the job naming its ``FILE:LINE``
    (``on_error="fail"``), or is left out and counted (``"skip"``); with ``time_field`` (keep
    newest), so is a record whose time is missing or bad, when skipped (the job names the
    first one that stops it)."""
    corrupt = "_corrupt_record" in df.columns
    bad = F.col(text_field).isNull()
    if corrupt:
        bad = bad | F.col("_corrupt_record").isNotNull()
    if time_field is not None and on_error == "skip":
        # (a lambda: Spark reads a function's type hints as a request for an Arrow UDF)
        bad = bad | F.udf(lambda v: _bad_time(v), "boolean")(F.col(time_field))
    if on_error == "fail":
        shown = [PLACE, "_corrupt_record"] if corrupt else [PLACE]
        first = df.where(bad).orderBy(ORDER).select(*shown).first()
        if first is None:
            return df, 0
        why = "not valid JSON" if corrupt and first[1] is not None else f"no field {text_field!r}"
        raise ValueError(f"{first[0]}: {why} (--on-error skip leaves bad records out)")
    return df.where(~bad), df.where(bad).count()


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
        df = read(spark, inputs, input_format, text_field)
        if not [c for c in df.columns if c != "_corrupt_record"] and df.isEmpty():
            # (an empty input: no field to infer; an empty output, as locally)
            df = spark.createDataFrame(
                [], T.StructType([T.StructField(text_field, T.StringType())])
            )
        if text_field not in df.columns:
            raise ValueError(
                f"--text-field {text_field!r} is not a field of the input: {df.columns}"
            )
        if not isinstance(df.schema[text_field].dataType, T.StringType):
            raise ValueError(
                f"--text-field {text_field!r} holds {df.schema[text_field].dataType.simpleString()}"
                ", expected strings"
            )
        if id_field is None and "id" in df.columns:
            id_field = "id"
        elif id_field is not None and id_field not in df.columns:
            raise ValueError(f"--id-field {id_field!r} is not a field of the input: {df.columns}")
        if time_field is not None and time_field not in df.columns:
            raise ValueError(
                f"--time-field {time_field!r} is not a field of the input: {df.columns}"
            )
        df, skipped = _checked(
            in_input_order(df, inputs, input_kind(inputs, input_format) in ("csv", "tsv")),
            text_field,
            on_error,
            time_field if keep == "newest" else None,
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
                order_col=ORDER,
                time_col=time_field,
                empty=empty,
                against=refs,
                against_text_col="text" if refs is not None else None,
                against_id_col="id" if refs is not None else None,
            )
        except ValueError as e:
            raise ValueError(str(e).replace("time_col", "--time-field", 1)) from None
        try:
            own_columns = [c for c in (ORDER, PLACE, "_corrupt_record") if c in df.columns]
            write(frames.kept.drop(*own_columns), output, formats[output])
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
        "skipped": skipped,
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
