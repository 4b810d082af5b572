"""Batch near-duplicate removal on Apache Spark, for corpora larger than one machine.

``dedup(df, text_col, id_col)`` returns the rows to keep and the clusters, with the semantics of
the single-machine ``neardup dedup`` (:class:`neardup.corpus.CorpusDeduper`): rows are visited
in input order (``keep="first"``), longest text first (``keep="longest"``) or newest first
(``keep="newest"``, by a time column), ties in input order, and a row is dropped when it is a
verified near-duplicate of a row already kept; its cluster is that kept row (the most similar
one, then the nearest, then the earliest).

The job, stage by stage:

1. Each executor rebuilds the Fingerprinter from the policy's configuration (nothing compiled is
   pickled; each Python worker builds it once) and computes, per row, the prepared text's
   64-bit SimHash, its length and, for the Jaccard verifier, its sorted 5-gram hashes
   (``mapInPandas``, Arrow batches).
2. Each fingerprint is exploded into its block keys: the ``B`` blocks of
   :class:`neardup.backends.layout.BlockLayout` (the layout of the core index and the Redis
   backend), plus, when the policy's radius needs it, every value within the block's probe
   radius (``BlockLayout.radii``: "probe" keys). Two fingerprints within ``k`` share a key
   (pigeonhole), so grouping by key and comparing within groups finds every candidate pair,
   exactly.
3. Rows sharing a key are compared exactly by a self-join on the key in Spark SQL
   (``bit_count(fa ^ fb)`` within the policy's length-aware radius: no Python per group),
   pairs are deduplicated across keys, then verified by the policy's verifier on the two
   rows' sketches.
4. The verified pairs (a few per duplicate: small next to the corpus) are collected on the
   driver, where the keep rule runs in one pass. It is not plain connected components: a row
   is dropped only for a *kept* earlier partner (a chain a~b~c with a, c far apart keeps c),
   which is order-dependent and sequential, so it runs where the pair list is; the rows stay
   on the executors and the decisions go back as a broadcast join.

Install with ``pip install 'neardup[spark]'``; pyspark is imported only by this module.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.backends.layout import BlockLayout, default_blocks
from neardup.dedup import Policy
from neardup.io import parse_time
from neardup.verify import jaccard_sketch, sketch_many

try:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F
except ModuleNotFoundError as e:  # pragma: no cover - exercised only without the extra
    raise ModuleNotFoundError(
        "neardup.spark needs pyspark, pandas and pyarrow: pip install 'neardup[spark]'",
        name=e.name,
    ) from e

__all__ = ["KEEP", "dedup", "run_dedup_cli"]

KEEP = ("first", "longest", "newest")

_ROW = "__neardup_row"
_SIGN = np.uint64(1 << 63)

# Per Python worker: the Fingerprinter of each policy seen (built once, never pickled).
_FINGERPRINTERS: dict[str, Any] = {}


def _fingerprinter(policy_json: str) -> Any:
    fp = _FINGERPRINTERS.get(policy_json)
    if fp is None:
        fp = Policy.from_dict(json.loads(policy_json)).make_fingerprinter()
        _FINGERPRINTERS[policy_json] = fp
    return fp


def _to_signed(a: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    return a.view(np.int64)


def _policy_for(policy: Policy | Mapping[str, Any] | None, k: int | None) -> Policy:
    if policy is None:
        pol = Policy.default()
    elif isinstance(policy, Policy):
        pol = policy
    elif isinstance(policy, Mapping):
        pol = Policy.from_dict(policy)
    else:
        raise TypeError(f"policy must be a Policy or dict, got {type(policy).__name__}")
    if k is not None:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 64:
            raise ValueError(f"k must be an int in 0..64 or None, got {k!r}")
        pol = pol.replace(k_short=k, k_long=k)
    if pol.verifier not in ("jaccard", "none"):
        raise ValueError(
            f"the Spark job supports verifier 'jaccard' or 'none' (like neardup dedup); "
            f"got {pol.verifier!r}"
        )
    return pol


def dedup(
    df: DataFrame,
    text_col: str,
    id_col: str | None = None,
    k: int | None = None,
    *,
    policy: Policy | Mapping[str, Any] | None = None,
    keep: str = "first",
    order_col: str | None = None,
    time_col: str | None = None,
) -> tuple[DataFrame, DataFrame]:
    """Drop near-duplicates from ``df``; returns ``(kept_df, clusters_df)``.

    - ``text_col``: the column with the text; ``id_col``: the id column (``None``: the row
      number in input order, from 0).
    - ``k``: overrides the policy's candidate radius (``None``: the policy's, length-aware).
    - ``policy``: :class:`neardup.dedup.Policy` (default: ``Policy.default()``, the single
      machine's default); verifier ``"jaccard"`` or ``"none"``.
    - ``keep``: which row of a group stays, as ``neardup dedup --keep`` chooses it:
      ``"first"`` (input order), ``"longest"`` (the longest text, in characters, as read: the
      length of ``text_col``) or ``"newest"`` (the latest ``time_col``: seconds since the epoch
      or ISO 8601, naive times in UTC, read by :func:`neardup.io.parse_time`); ties go to the
      first in input order. Input order is the order of ``order_col`` when given, else the
      DataFrame's own order (``monotonically_increasing_id``). A ``time_col`` value that is not
      a time (null, a word, a bool) is a ValueError naming the row.

    ``kept_df`` has the columns of ``df``, kept rows only. ``clusters_df`` has one row per
    member of every cluster of two or more: ``id``, ``cluster`` (the id of the kept row),
    ``kept`` (bool), ``distance`` (Hamming distance to the kept row) and ``similarity``.
    """
    if text_col not in df.columns:
        raise ValueError(f"text_col {text_col!r} is not a column of df: {df.columns}")
    if id_col is not None and id_col not in df.columns:
        raise ValueError(f"id_col {id_col!r} is not a column of df: {df.columns}")
    if order_col is not None and order_col not in df.columns:
        raise ValueError(f"order_col {order_col!r} is not a column of df: {df.columns}")
    if keep not in KEEP:
        raise ValueError(f"keep must be one of {', '.join(KEEP)}; got {keep!r}")
    if keep == "newest" and time_col is None:
        raise ValueError('keep="newest" needs time_col (the column with each row\'s time)')
    if time_col is not None and time_col not in df.columns:
        raise ValueError(f"time_col {time_col!r} is not a column of df: {df.columns}")
    pol = _policy_for(policy, k)
    spark = df.sparkSession

    # A key per row that grows with input order: monotonically_increasing_id is
    # (partition << 33) + position, computed where the rows are (no shuffle). The keep rule only
    # compares rows of candidate pairs, for which this order is all it needs.
    order = F.col(order_col).cast("long") if order_col else F.monotonically_increasing_id()
    numbered = df.withColumn(_ROW, order).cache()
    columns = [_ROW, text_col]
    if keep == "newest" and time_col is not None and time_col != text_col:
        columns.append(time_col)
    source = numbered.select(*columns)
    docs = _fingerprint(source, text_col, pol, time_col if keep == "newest" else None).cache()
    if keep == "newest":
        bad = docs.where(F.col("terr").isNotNull()).orderBy(_ROW).select(_ROW, "terr").first()
        if bad is not None:
            where = f"the row at position key {bad[0]}"
            if id_col is not None:
                row = numbered.where(F.col(_ROW) == bad[0]).select(id_col).first()
                where = f"the row of {id_col} {row[0]!r}" if row is not None else where
            raise ValueError(f"time_col {time_col!r}: {where}: {bad[1]}")
    pairs = _candidate_pairs(docs, pol)
    verified = _verify(pairs, docs, pol).cache()
    rows = verified.collect()
    values: dict[int, float] = {}
    if keep != "first" and rows:
        # the preference value (text length or time) of the rows of verified pairs only
        involved = (
            verified.select(F.col("a").alias(_ROW))
            .union(verified.select(F.col("b").alias(_ROW)))
            .distinct()
        )
        column = "rawlen" if keep == "longest" else "t"
        values = {int(r[0]): r[1] for r in docs.join(involved, _ROW).select(_ROW, column).collect()}
    verified.unpersist()
    decisions_pd = _resolve(rows, keep, values)
    decisions = spark.createDataFrame(
        decisions_pd, f"{_ROW} long, __rep long, distance long, similarity double"
    )
    kept_df = numbered.join(
        F.broadcast(decisions.where(F.col(_ROW) != F.col("__rep")).select(_ROW)), _ROW, "left_anti"
    )
    kept_df = kept_df.orderBy(_ROW).drop(_ROW)
    ids = numbered.select(_ROW, (F.col(id_col) if id_col else _row_number(numbered)).alias("id"))
    rep_ids = ids.select(F.col(_ROW).alias("__rep"), F.col("id").alias("cluster"))
    clusters_df = (
        F.broadcast(decisions)
        .join(ids, _ROW)
        .join(rep_ids, "__rep")
        .withColumn("kept", F.col(_ROW) == F.col("__rep"))
        .orderBy("__rep", F.col("kept").desc(), _ROW)
        .select("id", "cluster", "kept", "distance", "similarity")
    )
    return kept_df, clusters_df


def _row_number(numbered: DataFrame) -> Any:
    """Consecutive row numbers from 0 in input order, from the monotonically increasing ids:
    an offset per partition (one small count per partition) plus the position within it."""
    part = F.shiftright(F.col(_ROW), 33)
    counts = sorted(
        (int(r[0]), int(r[1])) for r in numbered.groupBy(part.alias("p")).count().collect()
    )
    offsets: dict[int, int] = {}
    total = 0
    for p, c in counts:
        offsets[p] = total
        total += c
    if not offsets:
        return F.lit(0).cast("long")
    mapping = F.create_map(*[F.lit(x) for kv in offsets.items() for x in kv])
    return (mapping[part] + F.col(_ROW).bitwiseAND(F.lit((1 << 33) - 1))).cast("long")


def _time_or_error(value: Any) -> tuple[float, str | None]:
    """A time value as seconds since the epoch, or NaN and what is wrong with it."""
    if value is None or (isinstance(value, float) and value != value):
        return float("nan"), "the time is null, expected seconds or an ISO 8601 string"
    if isinstance(value, np.generic):
        value = value.item()
    try:
        return parse_time(value), None
    except ValueError as e:
        return float("nan"), str(e)


def _fingerprint(df: DataFrame, text_col: str, pol: Policy, time_col: str | None) -> DataFrame:
    policy_json = json.dumps(pol.to_dict(), sort_keys=True)
    jaccard = pol.verifier == "jaccard"
    shingle = pol.shingle

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        policy = Policy.from_dict(json.loads(policy_json))
        fingerprinter = _fingerprinter(policy_json)
        for batch in batches:
            texts = batch[text_col].tolist()
            norms = policy.prepare_many(["" if t is None else str(t) for t in texts])
            fps = np.asarray(fingerprinter.fingerprint_many(norms), dtype=np.uint64)
            out = pd.DataFrame(
                {
                    _ROW: batch[_ROW].to_numpy(np.int64),
                    "fp": _to_signed(fps),
                    "len": np.fromiter((len(s) for s in norms), np.int64, len(norms)),
                    # --keep longest compares the texts as read, like the local command
                    "rawlen": np.fromiter(
                        (len(t) if isinstance(t, str) else 0 for t in texts), np.int64, len(texts)
                    ),
                }
            )
            if time_col is not None:
                parsed = [_time_or_error(v) for v in batch[time_col].tolist()]
                out["t"] = np.fromiter((p[0] for p in parsed), np.float64, len(parsed))
                out["terr"] = pd.Series([p[1] for p in parsed], dtype=object)
            else:
                out["t"] = np.zeros(len(texts), np.float64)
                out["terr"] = pd.Series([None] * len(texts), dtype=object)
            if jaccard:
                offsets, hashes = sketch_many(norms, shingle)
                h = hashes.astype(np.int64)
                out["sk"] = [h[offsets[i] : offsets[i + 1]] for i in range(len(norms))]
            else:
                out["sk"] = [np.empty(0, np.int64)] * len(norms)
            yield out

    schema = f"{_ROW} long, fp long, len long, rawlen long, t double, terr string, sk array<long>"
    return df.mapInPandas(run, schema)


def _candidate_pairs(docs: DataFrame, pol: Policy) -> DataFrame:
    k = pol.k_max
    layout = BlockLayout(default_blocks(k))
    radii = layout.radii(k)
    blocks = layout.blocks

    def explode(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        local = BlockLayout(blocks)
        for batch in batches:
            keys: list[int] = []
            rows: list[int] = []
            exact: list[bool] = []
            for row, fp in zip(batch[_ROW].tolist(), batch["fp"].tolist()):
                u = fp & ((1 << 64) - 1)
                values = local.values(u)
                for b, v in enumerate(values):
                    if radii[b] < 0:
                        continue
                    for bb, pv in local.probes_of_block(b, v, radii[b]):
                        keys.append((bb << 32) | pv)
                        rows.append(row)
                        exact.append(pv == v)
            yield pd.DataFrame(
                {
                    "key": np.asarray(keys, np.int64),
                    _ROW: np.asarray(rows, np.int64),
                    "exact": np.asarray(exact, bool),
                }  # fmt: skip
            )

    keyed = docs.select(_ROW, "fp").mapInPandas(explode, f"key long, {_ROW} long, exact boolean")
    keyed = keyed.join(docs.select(_ROW, "fp", "len"), _ROW)
    # Every exact member of a key against every member of it, in Spark SQL (no Python per
    # group): the distance is bit_count(fa ^ fb), the radius the policy's length-aware one.
    exact = keyed.where(F.col("exact")).select(
        "key",
        F.col(_ROW).alias("ra"),
        F.col("fp").alias("fa"),
        F.col("len").alias("la"),
    )
    every = keyed.select(
        "key", F.col(_ROW).alias("rb"), F.col("fp").alias("fb"), F.col("len").alias("lb")
    )

    def radius(length: Any) -> Any:
        return F.when(length <= pol.short_chars, pol.k_short).otherwise(pol.k_long)

    d = F.expr("bit_count(fa ^ fb)")
    pairs = (
        exact.join(every, "key")
        .where(F.col("ra") != F.col("rb"))
        .where(d <= F.greatest(radius(F.col("la")), radius(F.col("lb"))))
        .select(
            F.least("ra", "rb").alias("a"),
            F.greatest("ra", "rb").alias("b"),
            d.cast("long").alias("d"),
        )
    )
    return pairs.dropDuplicates(["a", "b"])


def _verify(pairs: DataFrame, docs: DataFrame, pol: Policy) -> DataFrame:
    if pol.verifier == "none":
        return pairs.withColumn("sim", F.lit(float("nan")))
    sk = docs.select(_ROW, "sk")
    joined = pairs.join(sk.withColumnRenamed(_ROW, "a").withColumnRenamed("sk", "ska"), "a").join(
        sk.withColumnRenamed(_ROW, "b").withColumnRenamed("sk", "skb"), "b"
    )
    threshold = pol.threshold

    def score(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            sims = np.fromiter(
                (
                    jaccard_sketch(
                        np.asarray(x, np.int64).astype(np.uint32),
                        np.asarray(y, np.int64).astype(np.uint32),
                    )
                    for x, y in zip(batch["ska"].tolist(), batch["skb"].tolist())
                ),
                np.float64,
                len(batch),
            )
            keep = sims >= threshold
            yield pd.DataFrame(
                {
                    "a": batch["a"].to_numpy(np.int64)[keep],
                    "b": batch["b"].to_numpy(np.int64)[keep],
                    "d": batch["d"].to_numpy(np.int64)[keep],
                    "sim": sims[keep],
                }
            )

    return joined.select("a", "b", "d", "ska", "skb").mapInPandas(
        score, "a long, b long, d long, sim double"
    )


def resolve_keep(
    rank: npt.NDArray[np.int64],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    distances: npt.NDArray[np.int64],
    similarities: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The keep rule over verified near pairs of ``rank.size`` rows.

    ``rank[i]`` is row ``i``'s place in the preference order (lower is kept first); pair ``j``
    joins rows ``a[j]`` and ``b[j]`` at Hamming distance ``distances[j]`` with similarity
    ``similarities[j]`` (NaN: not computed, counts as 1.0). Rows are visited in preference
    order; a row is dropped for its best kept earlier partner (highest similarity, then
    nearest, then earliest). Returns, per row, its representative (itself when kept) and the
    distance and similarity to it (0 and 1.0 when kept).
    """
    n = rank.size
    representative = np.arange(n, dtype=np.int64)
    distance = np.zeros(n, dtype=np.int64)
    similarity = np.ones(n, dtype=np.float64)
    # Orient each pair as (earlier, later) in preference order.
    swap = rank[a] > rank[b]
    early = np.where(swap, b, a)
    late = np.where(swap, a, b)
    score = np.nan_to_num(similarities, nan=1.0)
    # Visit the later rows in preference order; among their earlier partners, best first.
    visit = np.lexsort((rank[early], distances, -score, rank[late]))
    kept = np.ones(n, dtype=bool)
    late_l, early_l = late[visit].tolist(), early[visit].tolist()
    vd_l, vs_l = distances[visit].tolist(), similarities[visit].tolist()
    current, decided = -1, False
    for lt, er, dist, s in zip(late_l, early_l, vd_l, vs_l):
        if lt != current:
            current, decided = lt, False
        if decided or not kept[er]:
            continue
        kept[lt] = False
        decided = True
        representative[lt] = er
        distance[lt] = dist
        similarity[lt] = 1.0 if math.isnan(s) else s
    return representative, distance, similarity


def _resolve(rows: Sequence[Any], keep: str, values: Mapping[int, float]) -> pd.DataFrame:
    """The keep rule of ``CorpusDeduper.result`` over the verified pairs ``(a, b, d, sim)``
    (a, b: order keys), with the preference order of ``neardup dedup --keep``: input order,
    or the largest ``values[row]`` (text length for "longest", time for "newest") first, ties
    in input order. Returns the members of every cluster with their kept row."""
    cols = {_ROW: np.empty(0, np.int64), "__rep": np.empty(0, np.int64),
            "distance": np.empty(0, np.int64), "similarity": np.empty(0, np.float64)}  # fmt: skip
    if not rows:
        return pd.DataFrame(cols)
    pa = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    pb = np.fromiter((r[1] for r in rows), np.int64, len(rows))
    vd = np.fromiter((r[2] for r in rows), np.int64, len(rows))
    vs = np.fromiter((r[3] for r in rows), np.float64, len(rows))
    nodes = np.unique(np.concatenate([pa, pb]))
    va, vb = np.searchsorted(nodes, pa), np.searchsorted(nodes, pb)
    n = nodes.size
    rank = np.arange(n, dtype=np.int64)  # nodes are sorted by input order
    if keep in ("longest", "newest"):
        value = np.fromiter((values.get(int(x), 0) for x in nodes), np.float64, n)
        rank[np.lexsort((np.arange(n), -value))] = np.arange(n, dtype=np.int64)
    representative, distance, similarity = resolve_keep(rank, va, vb, vd, vs)
    dropped = np.flatnonzero(representative != np.arange(n))
    members = np.union1d(dropped, representative[dropped])
    return pd.DataFrame(
        {
            _ROW: nodes[members],
            "__rep": nodes[representative[members]],
            "distance": distance[members],
            "similarity": similarity[members],
        }
    )


# -- the CLI ----------------------------------------------------------------------------------


def _read(spark: SparkSession, inputs: Sequence[str]) -> DataFrame:
    paths = []
    for p in inputs:
        if os.path.isdir(p):
            paths += sorted(os.path.join(root, f) for root, _, files in os.walk(p) for f in files)
        else:
            paths.append(p)
    for p in paths:
        codec = next((c for c in _UNREADABLE if p.lower().endswith(c)), None)
        if codec is not None:
            raise ValueError(
                f"{p}: Spark reads .gz and .bz2 (and Parquet's own compression) but has no {codec} "
                f"codec here; decompress it first (e.g. `{_UNREADABLE[codec]} {p}`) or use the "
                "local engine, which reads it"
            )
    kinds = {_kind(p) for p in paths}
    if len(kinds) != 1:
        raise ValueError(f"inputs must all be one format (jsonl, csv, tsv, parquet); got {kinds}")
    kind = kinds.pop()
    if kind == "json":
        return spark.read.json(paths)
    if kind == "parquet":
        return spark.read.parquet(*paths)
    sep = "\t" if kind == "tsv" else ","
    return spark.read.csv(paths, header=True, sep=sep, multiLine=True, escape='"')


#: Compressions the local engine reads and Spark's text sources do not, and the command that
#: undoes each.
_UNREADABLE = {".xz": "xz -dk", ".zst": "zstd -d"}


def _kind(path: str) -> str:
    name = path.lower()
    for ext in (".gz", ".bz2", ".xz", ".zst"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    for ext, kind in ((".jsonl", "json"), (".json", "json"), (".ndjson", "json"),
                      (".parquet", "parquet"), (".csv", "csv"), (".tsv", "tsv")):  # fmt: skip
        if name.endswith(ext):
            return kind
    raise ValueError(f"cannot tell the format of {path!r} (jsonl, csv, tsv, parquet)")


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
    master: str | None = None,
    policy: Policy | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``neardup dedup --engine spark``: read ``inputs``, write the kept records as JSONL to
    ``output`` (input order) and, with ``clusters``, the clusters as JSONL
    ``{"id", "cluster", "kept", "distance"}`` like the local engine. Returns a summary.
    ``keep`` and ``time_field`` are those of ``neardup dedup --keep/--time-field`` (see
    :func:`dedup`): the same documents are kept.

    Uses the active SparkSession, or starts one on ``master`` (default: ``$SPARK_MASTER`` or
    ``local[*]``).
    """
    started = time.perf_counter()
    spark = SparkSession.getActiveSession()
    if spark is None:
        # The executors run this interpreter (a virtualenv's, even one not activated) unless
        # the user chose one: with another, `import neardup` fails on the workers.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (
            SparkSession.builder.master(master or os.environ.get("SPARK_MASTER", "local[*]"))
            .appName("neardup dedup")
            .getOrCreate()
        )
    df = _read(spark, inputs)
    if text_field not in df.columns:
        raise ValueError(f"--text-field {text_field!r} is not a field of the input: {df.columns}")
    if id_field is None and "id" in df.columns:
        id_field = "id"
    if time_field is not None and time_field not in df.columns:
        raise ValueError(f"--time-field {time_field!r} is not a field of the input: {df.columns}")
    try:
        kept_df, clusters_df = dedup(
            df, text_field, id_field, k, policy=policy, keep=keep, time_col=time_field
        )
    except ValueError as e:
        raise ValueError(str(e).replace("time_col", "--time-field", 1)) from None
    n = df.count()
    n_kept = 0
    with open(output, "w", encoding="utf-8") as f:
        for row in kept_df.toLocalIterator():
            f.write(json.dumps(row.asDict(recursive=True), ensure_ascii=False, default=str) + "\n")
            n_kept += 1
    cluster_rows = clusters_df.collect()
    if clusters:
        with open(clusters, "w", encoding="utf-8") as f:
            for r in cluster_rows:
                record = {"id": r["id"], "cluster": r["cluster"], "kept": bool(r["kept"]),
                          "distance": int(r["distance"])}  # fmt: skip
                f.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    elapsed = time.perf_counter() - started
    return {
        "documents": n,
        "kept": n_kept,
        "removed": n - n_kept,
        "clusters": sum(1 for r in cluster_rows if r["kept"]),
        "seconds": round(elapsed, 3),
        "docs_per_second": int(n / elapsed) if elapsed > 0 else None,
        "engine": "spark",
        "master": spark.sparkContext.master,
        "keep": keep,
    }
