"""References of the Spark job (``neardup dedup --engine spark --against REF…``,
``dedup_frames(..., against=...)``): reading them, and without a verifier the pairs of the
corpus's documents within the radius of one -- a block-key join on the executors, bounded
per key.

References are kept ahead of the corpus and never written out (the local engine's
:meth:`neardup.corpus.CorpusDeduper.add_references`): a corpus document that passes the rule
against one is dropped and named, as by the local engine, after the best of the references and
the kept corpus documents it passes against (highest similarity, then nearest, then earliest);
the rest of the corpus is deduplicated among itself as without references. ``FILE:LINE`` ids
equal the local engine's where records are one per line (no blank JSONL lines, no quoted line
breaks in CSV).
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import io as nio
from neardup.cli._against import Reference, ReferenceInputError, _read, open_references
from neardup.policy import Policy
from neardup.spark import _cli
from neardup.spark._job import POS, _block_keys, checkpoint, release, whole_ids

#: The reference order column of the frame :func:`read_references` returns (a long, ascending
#: in the order the references were given, then in each file's order).
REF = "__neardup_ref"

#: Formats Spark reads itself (the others are read on the driver, a chunk at a time).
_SPARK_FORMATS = ("jsonl", "csv", "tsv", "parquet")
#: A chunk of references read on the driver: so many documents, or so many characters.
_CHUNK_DOCS = 16384
_CHUNK_CHARS = 32 << 20
#: Chunks held as separate frames before they are joined into one (short plans).
_CHUNKS_PER_UNION = 32
#: The low bits of ``monotonically_increasing_id``: the record's index in its partition.
_IN_PARTITION = (1 << 33) - 1


@dataclass
class _Arg:
    """One ``--against`` argument and how it is read."""

    path: str
    by_spark: bool  # read by the executors (_cli.read); else on the driver through _read
    refs: list[Reference] = field(default_factory=list)


def _remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def check_references(paths: Sequence[str], input_format: str | None = None) -> list[_Arg]:
    """Every reference checked before anything is read or written (what the local engine's
    ``open_references`` checks: a missing path, an index directory without texts, an unknown
    format), and how each is read. ``ReferenceInputError`` (a ``ValueError``) names the path."""
    if isinstance(paths, str):
        paths = [paths]
    out = []
    for path in paths:
        if not isinstance(path, str):
            raise TypeError(f"against paths must be str, got {type(path).__name__}")
        if _remote(path):
            out.append(_Arg(path, True))
            continue
        local = path.removeprefix("file://")
        if any(c in local for c in "*?["):
            try:
                _cli._local_files(local)
            except ValueError as e:
                raise ReferenceInputError(f"--against {e}") from None
            out.append(_Arg(path, True))
            continue
        try:
            refs = open_references([local], input_format)
        except ReferenceInputError:
            if not (os.path.isdir(local) and _spark_dir(local, input_format)):
                raise
            out.append(_Arg(path, True))  # (a directory of JSONL/CSV/Parquet files)
            continue
        spark_reads = all(
            r.source is not None
            and r.source.format in _SPARK_FORMATS
            and r.source.compression in (None, "gz", "bz2")
            for r in refs
        )
        out.append(_Arg(path, spark_reads, refs))
    return out


def _spark_dir(path: str, input_format: str | None) -> bool:
    """Whether ``path`` is a directory of files Spark reads, all of one format."""
    try:
        files = _cli._local_files(path)
        return bool(files) and len({_cli._kind(f, input_format) for f in files}) == 1
    except ValueError:
        return False


def read_references(
    spark: SparkSession,
    paths: str | Sequence[str],
    *,
    text_field: str = "text",
    id_field: str | None = None,
    input_format: str | None = None,
    on_error: str = "fail",
) -> DataFrame:
    """The references of ``neardup dedup --against`` as a DataFrame: ``REF`` (their order),
    ``id`` and ``text``; give it to :func:`neardup.spark.dedup_frames` as ``against``.

    Each reference's id is the local engine's: its record's ``id_field``, else its ``id``
    field where it has one, else ``FILE:LINE`` (a Parquet file's row from 1); ids are all
    longs, or all strings when any is not an integer. Files, globs and directories Spark reads
    (JSONL, CSV/TSV, Parquet, Spark output directories, ``hdfs://`` ...) are read by the
    executors; what Spark does not read -- an index directory of ``neardup index build`` (its
    ``texts.sqlite``), a saved dataset, a directory of .txt/.html files, .xz/.zst files -- is
    read on the driver a chunk at a time (16,384 documents) and handed to the executors chunk
    by chunk: the driver's memory holds one chunk, but its time grows with those references.
    A record without the text (or not JSON) stops with ``ReferenceInputError`` under
    ``on_error="fail"`` and is left out under ``"skip"``."""
    return _read_all(spark, paths, text_field, id_field, input_format, on_error, [])


def _read_all(
    spark: SparkSession,
    paths: str | Sequence[str],
    text_field: str,
    id_field: str | None,
    input_format: str | None,
    on_error: str,
    held: list[DataFrame],
) -> DataFrame:
    """:func:`read_references`; the frames it holds on the executors are appended to ``held``
    (for :func:`neardup.spark._job.release` once the job's frames are written; else Spark's
    cleaner frees them when the frame is gone)."""
    if on_error not in ("fail", "skip"):
        raise ValueError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
    args = check_references([paths] if isinstance(paths, str) else list(paths), input_format)
    parts: list[DataFrame] = []
    kinds: list[str] = []
    offset = 0
    for arg in args:
        if arg.by_spark:
            frame, kind, n = _spark_read(
                spark, arg, text_field, id_field, input_format, on_error, held
            )
        else:
            frame, kind, n = _driver_read(spark, arg, text_field, id_field, on_error, held)
        parts.append(frame.withColumn(REF, F.col(REF) + F.lit(offset)))
        kinds.append(kind)
        offset += n
    id_type = "long" if all(k == "long" for k in kinds) else "string"
    out: DataFrame | None = None
    for frame in parts:
        frame = frame.select(REF, F.col("id").cast(id_type).alias("id"), "text")
        out = frame if out is None else out.unionByName(frame)
    if out is None:
        return spark.createDataFrame([], f"{REF} long, id {id_type}, text string")
    return out


def _id_kind(dtype: T.DataType, where: str) -> str:
    if isinstance(dtype, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        return "long"
    if isinstance(dtype, T.StringType):
        return "string"
    raise ReferenceInputError(f"--against {where}: its ids are {dtype.simpleString()}, expected "
                              "strings or integers")  # fmt: skip


def _spark_read(
    spark: SparkSession,
    arg: _Arg,
    text_field: str,
    id_field: str | None,
    input_format: str | None,
    on_error: str,
    held: list[DataFrame],
) -> tuple[DataFrame, str, int]:
    """An argument Spark reads: ``(REF, id, text)`` with ``REF`` from 0, the id's kind and
    the number of rows. Line numbers (``FILE:LINE``) and the order come from one small table
    per file part (a count and the first row's id), never from the rows."""
    try:
        df = _cli.read(spark, [arg.path], input_format, text_field)
    except ValueError as e:
        raise ReferenceInputError(f"--against {e}") from None
    if text_field not in df.columns:
        fields = ", ".join(map(repr, [c for c in df.columns if c != "_corrupt_record"][:10]))
        raise ReferenceInputError(
            f"--against {arg.path}: no field {text_field!r} (fields: {fields or 'none'}); "
            "--against-text-field names it"
        )
    if not isinstance(df.schema[text_field].dataType, T.StringType):
        raise ReferenceInputError(
            f"--against {arg.path}: field {text_field!r} is "
            f"{df.schema[text_field].dataType.simpleString()}, expected a string"
        )
    if id_field is not None and id_field not in df.columns:
        raise ReferenceInputError(f"--against {arg.path}: no id field {id_field!r}")
    id_col = id_field if id_field is not None else ("id" if "id" in df.columns else None)
    if id_col is not None:
        try:
            df = whole_ids(df, id_col, f"--against {arg.path}")
        except ValueError as e:
            raise ReferenceInputError(str(e)) from None
    kind = _id_kind(df.schema[id_col].dataType, arg.path) if id_col else "string"
    corrupt = "_corrupt_record" in df.columns
    base = df.select(
        F.monotonically_increasing_id().alias("row"),
        F.input_file_name().alias("file"),
        F.col(text_field).alias("text"),
        (F.col(id_col) if id_col else F.lit(None).cast("string")).alias("rid"),
        (F.col("_corrupt_record") if corrupt else F.lit(None).cast("string")).alias("bad"),
    )
    base = checkpoint(base)  # (read once: the table of parts, the checks and the rows)
    held.append(base)
    part = F.shiftright(F.col("row"), 33)
    table = sorted(
        (str(r[0]), int(r[1]), int(r[2]), int(r[3]))
        for r in base.groupBy("file", part.alias("p"))
        .agg(F.count(F.lit(1)).alias("n"), F.min("row").alias("first"))
        .collect()
    )
    names = _file_names(arg)
    local = [] if _remote(arg.path) else _cli._local_files(arg.path)
    named = local[0] if local else arg.path
    header = 1 if _cli._kind(named, input_format) in ("csv", "tsv") else 0
    # per (file, part): the line of its first row and its place in the argument's order --
    # the files in name order (as the local engine reads a directory), each in its own order
    # (a file's parts hold its rows in order, each part's contiguous)
    rows = []
    file_start: dict[str, int] = {}
    in_file: dict[str, int] = {}
    total = 0
    for name, file, p, n, first in sorted((names(t[0]), *t) for t in table):
        if file not in file_start:
            file_start[file], in_file[file] = total, 0
        before = in_file[file]
        rows.append((file, p, name, before + 1 + header - first, file_start[file] + before - first))
        in_file[file] = before + n
        total += n
    parts = spark.createDataFrame(rows, "file string, p long, name string, line0 long, start long")
    numbered = base.join(F.broadcast(parts), (base["file"] == parts["file"]) & (part == parts["p"]))
    numbered = numbered.select(
        (F.col("start") + F.col("row")).alias(REF),
        F.col("text"),
        F.col("rid"),
        F.col("bad"),
        F.concat(F.col("name"), F.lit(":"), (F.col("line0") + F.col("row")).cast("string")).alias(
            "place"
        ),
    )
    wrong = F.col("bad").isNotNull() | F.col("text").isNull()
    if id_field is not None:  # (a named id field must be in every record)
        wrong = wrong | F.col("rid").isNull()
    if on_error == "fail":
        first_bad = numbered.where(wrong).orderBy(REF).select("place", "bad", "text").first()
        if first_bad is not None:
            why = (
                "not valid JSON"
                if first_bad[1] is not None
                else f"no field {text_field!r}"
                if first_bad[2] is None
                else f"no id field {id_field!r}"
            )
            raise ReferenceInputError(f"--against {first_bad[0]}: {why}")
    else:
        numbered = numbered.where(~wrong)
    missing = numbered.where(F.col("rid").isNull()).select(REF)
    if kind == "long" and id_field is None and missing.first() is not None:
        kind = "string"  # (records without an id are named FILE:LINE)
    ident = (
        F.col("rid") if kind == "long" else F.coalesce(F.col("rid").cast("string"), F.col("place"))
    )
    return numbered.select(REF, ident.alias("id"), "text"), kind, total


def _file_names(arg: _Arg) -> Any:
    """The name of a file in ``FILE:LINE`` from the URI Spark gives: the path as the local
    engine names it (the argument's files as given) where it is one of them."""
    known: dict[str, str] = {}
    if not _remote(arg.path):
        try:
            files = _cli._local_files(arg.path)
        except ValueError:
            files = []
        for f in files:
            known[Path(os.path.abspath(f)).as_uri()] = f
            known["file:" + os.path.abspath(f)] = f

    def name(uri: str) -> str:
        if uri in known:
            return known[uri]
        if uri.startswith("file:"):
            plain = urllib.parse.unquote(uri.removeprefix("file://").removeprefix("file:"))
            return known.get(Path(plain).as_uri(), plain)
        return uri

    return name


def _driver_read(
    spark: SparkSession,
    arg: _Arg,
    text_field: str,
    id_field: str | None,
    on_error: str,
    held: list[DataFrame],
) -> tuple[DataFrame, str, int]:
    """An argument the local engine's reader reads (index directories, saved datasets, text
    directories, .xz/.zst files), a chunk at a time on the driver, each chunk a frame held on
    the executors."""
    spec = nio.FieldSpec(text_field, id_field, None)
    schema = f"{REF} long, id_n long, id_s string, text string"
    done: list[DataFrame] = []
    pending: list[DataFrame] = []
    n = 0
    strings = False

    def chunks() -> Iterator[list[tuple[Any, str]]]:
        chunk: list[tuple[Any, str]] = []
        chars = 0
        for ref in arg.refs:
            try:
                for item in _read(ref, spec, on_error, True):
                    chunk.append(item)
                    chars += len(item[1])
                    if len(chunk) >= _CHUNK_DOCS or chars >= _CHUNK_CHARS:
                        yield chunk
                        chunk, chars = [], 0
            except nio.InputError as e:
                raise ReferenceInputError(f"--against {e}") from None
        if chunk:
            yield chunk

    for chunk in chunks():
        ids = [i for i, _ in chunk]
        ints = [i if isinstance(i, int) and not isinstance(i, bool) else None for i in ids]
        strs = [None if x is not None else str(i) for i, x in zip(ids, ints)]
        strings = strings or any(s is not None for s in strs)
        frame = pd.DataFrame(
            {
                REF: pd.array(range(n, n + len(chunk)), dtype="int64"),
                "id_n": pd.array(ints, dtype="Int64"),
                "id_s": pd.Series(strs, dtype=object),
                "text": pd.Series([t for _, t in chunk], dtype=object),
            }
        )
        n += len(chunk)
        pending.append(checkpoint(spark.createDataFrame(frame, schema)))
        if len(pending) >= _CHUNKS_PER_UNION:
            done.append(_union_all(pending))
            pending = []
    if pending:
        done.append(_union_all(pending))
    frame_all = _union_all(done) if done else spark.createDataFrame([], schema)
    held.append(frame_all)
    kind = "string" if strings else "long"
    ident = F.coalesce(F.col("id_s"), F.col("id_n").cast("string")) if strings else F.col("id_n")
    return frame_all.select(REF, ident.alias("id"), "text"), kind, n


def _union_all(frames: list[DataFrame]) -> DataFrame:
    """One checkpointed frame of the checkpointed ``frames`` (which are then freed)."""
    if len(frames) == 1:
        return frames[0]
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    out = checkpoint(out)
    for f in frames:
        release(f)
    return out


# -- the pairs of the corpus with the references -----------------------------------------------


def reference_edges(docs: DataFrame, refs: DataFrame, policy: Policy) -> DataFrame:
    """Without a verifier: the pairs ``(a, b, d, sim)`` of a reference ``a`` (its ``REF``
    order) and a corpus document ``b`` (its ``POS``) of ``docs`` within the SimHash radius of
    the corpus document's length, found by block keys (one side's own block value is among the
    other's probes: the reference's own values, at most ``policy.bucket_limit`` per key -- the
    references being kept first). ``refs`` are the prepared references (``REF``, ``fp``,
    ``len``, ``h1``, ``h2``, ...); empty ones are never candidates and exact copies among them
    count once (the earliest). (With the verifier the references are documents of the check:
    :func:`neardup.spark._job.resolve`.)"""
    full = refs.where(F.col("len") > 0)
    firsts = full.groupBy("h1", "h2").agg(F.min(REF).alias(REF))
    one = full.join(firsts, ["h1", "h2", REF], "left_semi")
    keyed = _block_keys(one.select(F.col(REF).alias(POS), "fp"), policy).where(F.col("exact"))
    newest = Window.partitionBy("key").orderBy(F.col(POS).desc())
    keyed = keyed.withColumn("i", F.row_number().over(newest)).where(
        F.col("i") <= policy.bucket_limit
    )
    theirs = _block_keys(docs.select(POS, "fp"), policy)
    pairs = (
        keyed.select("key", F.col(POS).alias("a"))
        .join(theirs.select("key", F.col(POS).alias("b")), "key")
        .select("a", "b")
        .distinct()
    )
    joined = pairs.join(one.select(F.col(REF).alias("a"), F.col("fp").alias("fa")), "a").join(
        docs.select(F.col(POS).alias("b"), F.col("fp").alias("fb"), F.col("len").alias("lb")), "b"
    )
    radius = F.when(F.col("lb") <= policy.short_chars, policy.k_short).otherwise(policy.k_long)
    d = F.bit_count(F.col("fa").bitwiseXOR(F.col("fb")))
    return joined.where(d <= radius).select(
        "a", "b", d.cast("long").alias("d"), F.lit(1.0).alias("sim")
    )
