"""The stages of the Spark job (see the package docstring): preparation, candidates, the
decision rounds and the result frames. Everything here is DataFrame work on the executors;
the driver only plans the stages and reads a few counts."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup.backends.layout import BlockLayout, default_blocks
from neardup.corpus import boilerplate_limit, page_lines, without_boilerplate
from neardup.io import EXACT_FLOAT_ID, parse_time, too_large_id
from neardup.kept import rule_for
from neardup.policy import Policy
from neardup.spark._groups import sorted_groups, stable_hash64, stable_hash128
from neardup.verify import normalise_many

log = logging.getLogger("neardup.spark")

ROW = "__neardup_row"  # input order (monotonically increasing; an order column's values)
POS = "__neardup_pos"  # preference order (monotonically increasing)

#: A reference's position is its ``REF`` less this: before every corpus document.
REF_BASE = 1 << 61

#: Decision states.
UNDECIDED, KEPT, DROPPED = 0, 1, 2


@dataclass(frozen=True)
class Bounds:
    """What bounds the Spark job's work per document (docs/batch.md, "Spark").

    - ``heads``, ``window``: after exact copies are collapsed, a document is a candidate pair
      with the first ``heads`` documents of each of its band buckets (in preference order) and
      the ``window`` documents just before it in the bucket; a bucket of s documents gives at
      most s * (heads + window) pairs, never s * s / 2.
    - ``max_rounds``, ``finish_below``: decision rounds on the executors, until at most
      ``finish_below`` documents are undecided or after ``max_rounds`` rounds; the documents
      still undecided (long chains a < b < c ... of near pairs) and their pairs then go to one
      task that decides them in order (its memory: ~50 bytes per such pair).
    - ``max_repairs``: how many times at most the documents are checked again against the
      candidates the local engine reads for them and the decision taken again (see
      :func:`resolve`); each check settles at least the earliest document still wrong, most
      settle whole families (6 checks for families of 2,000 near-copies with half of them
      kept, measured).
    """

    heads: int = 4
    window: int = 4
    max_rounds: int = 12
    finish_below: int = 100_000
    max_repairs: int = 30

    def __post_init__(self) -> None:
        lows = (("heads", 1), ("window", 0), ("max_rounds", 0), ("finish_below", 0))
        for name, low in (*lows, ("max_repairs", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name} must be an int >= {low}, got {v!r}")


@dataclass
class Frames:
    """The job's results (lazy DataFrames) and what it counted on the way.

    ``kept``: the input's rows that stay (its columns, input order). ``clusters``: ``id``,
    ``cluster`` (id of the kept row), ``kept``, ``distance``, ``similarity``, one row per member
    of every cluster of two or more. ``pairs``: every verified pair found, ``a`` (the earlier in
    the keep order), ``b``, ``distance``, ``similarity``. With references (``against=``) both
    have a ``reference`` column: true for a document dropped as a reference's near-copy
    (``cluster``: the reference's id) and for a pair with a reference (``a``: its id).
    """

    kept: DataFrame
    clusters: DataFrame
    pairs: DataFrame
    stats: dict[str, Any] = field(default_factory=dict)
    cached: list[DataFrame] = field(default_factory=list)
    checkpoints: CheckpointDir | None = None

    def unpersist(self) -> None:
        """Frees what the job holds on the executors and removes the checkpoint files it
        wrote (``checkpoint_dir=``), once the frames are written: the frames cannot be computed
        after it (their stages read the rows it frees)."""
        for df in self.cached:
            release(df)
        self.cached.clear()
        if self.checkpoints is not None:
            self.checkpoints.remove()


def whole_ids(df: DataFrame, col: str, where: str) -> DataFrame:
    """``df`` with its id column ``col`` read as the local engine reads ids
    (:func:`neardup.io.record_id`): a column of floats -- pandas writes an int column that has
    a missing value as floats -- as longs, NaN as none. ``ValueError`` naming ``where`` for a
    value that is not whole, or whole beyond :data:`neardup.io.EXACT_FLOAT_ID` (not the
    integer written; the job stopped with Spark's overflow error)."""
    if not isinstance(df.schema[col].dataType, (T.DoubleType, T.FloatType)):
        return df
    c = F.col(col)
    # (c % 1, not floor: floor gives a long, which overflows beyond 2**63 under ANSI SQL)
    odd = c.isNotNull() & ~F.isnan(c) & ((F.abs(c) > EXACT_FLOAT_ID) | (c % 1 != 0))
    bad = df.where(odd).select(c).first()
    if bad is not None:
        v = bad[0]
        if math.isfinite(v) and v.is_integer():
            raise ValueError(f"{where}: {too_large_id(v)}")
        raise ValueError(f"{where}: id {v!r} is not whole (ids are strings or integers)")
    return df.withColumn(col, F.when(F.isnan(c), F.lit(None)).otherwise(c.cast("long")))


def checkpoint(frame: DataFrame) -> DataFrame:
    """``frame`` computed now, as a frame whose plan is a scan of its rows: a later stage's
    plan names it in one line instead of repeating the plans it came from. (A ``persist``-ed
    frame's plan prints the whole plan it caches, and the job's frames share their stages many
    times over: the clusters' plan printed 33 MB for 170 rows, which the driver builds for
    every query it runs and keeps for the last ones; a 1 GB driver ran out of heap on the
    fourth job.)

    Where the rows are held is the SparkContext's checkpoint directory's choice -- the one rule
    for every checkpoint of the job: without one (the default), on the executors (memory, else
    local disk: ``localCheckpoint``, lost with its executor, which fails the job); with one
    (``checkpoint_dir=``, ``--checkpoint-dir``, or one the session already has), written there
    (``checkpoint``: a shared filesystem survives an executor) and also cached on the executors,
    so that only a lost executor's part is read back from the files."""
    if frame.sparkSession.sparkContext.getCheckpointDir() is None:
        return frame.localCheckpoint(eager=True)
    return frame.checkpoint(eager=True).persist(StorageLevel.MEMORY_AND_DISK)


def release(frame: DataFrame) -> None:
    """Frees the rows of a :func:`checkpoint`-ed frame: its blocks on the executors
    (``unpersist`` does not reach a local checkpoint's: they are an RDD's blocks, not a cached
    plan's) and the files of a reliable one; for another frame, ``unpersist``. Only once no
    frame still to be computed reads them."""
    try:
        plan = frame._jdf.queryExecution().analyzed()
        is_rdd = plan.getClass().getSimpleName() == "LogicalRDD"
        written = plan.rdd().getCheckpointFile() if is_rdd else None
    except Exception:  # noqa: BLE001 - not a JVM-backed frame (Spark Connect): Spark's cleaner
        is_rdd, written = False, None
    if not is_rdd:
        frame.unpersist()
        return
    plan.rdd().unpersist(False)
    if written is not None and written.isDefined():
        frame.unpersist()  # (the rows cached on top of the files)
        _delete(frame.sparkSession.sparkContext, written.get())


def _delete(sc: Any, path: str) -> None:
    """Removes ``path`` (a directory, with what it holds) through Hadoop's file system API,
    which reaches what the checkpoints reach (a local path, ``hdfs://``, ``s3a://``); a path
    that cannot be removed is logged, not raised (cleaning up never hides the job's error)."""
    try:
        target = sc._jvm.org.apache.hadoop.fs.Path(path)
        target.getFileSystem(sc._jsc.hadoopConfiguration()).delete(target, True)
    except Exception as e:  # noqa: BLE001 - a py4j error carries the Java exception's text
        log.warning("could not remove checkpoint files %s: %s", path, _java_message(e))


def _java_message(e: BaseException) -> str:
    """The Java exception's own line of a py4j error (else the error's text)."""
    java = getattr(e, "java_exception", None)
    return str(java.toString()) if java is not None else str(e)


class CheckpointDir:
    """A job's reliable checkpoints (``checkpoint_dir=``, ``--checkpoint-dir``): the
    SparkContext's checkpoint directory is set to ``directory`` for the job's checkpoints --
    Spark makes a subdirectory of its own there (``DIR/<uuid>``, :attr:`path`), where each
    checkpoint is an ``rdd-N`` directory -- and given back as it was by :meth:`restore`, so
    that a later job of the session without the option checkpoints locally as before.
    :meth:`remove` deletes the subdirectory, whatever is left in it.

    ``option`` names the setting in the ValueError raised when ``directory`` cannot be made or
    written (a file on the way, no permission, an unknown scheme)."""

    def __init__(self, spark: Any, directory: str, option: str = "checkpoint_dir") -> None:
        if not isinstance(directory, str) or not directory.strip():
            raise ValueError(f"{option} must be a directory path, got {directory!r}")
        self._sc = spark.sparkContext
        scala = self._sc._jsc.sc()
        self._previous = scala.checkpointDir()  # (a scala Option: None when unset)
        try:
            self._sc.setCheckpointDir(directory)
        except Exception as e:  # noqa: BLE001 - py4j: the Java exception says what is wrong
            raise ValueError(
                f"{option} {directory}: cannot make the checkpoint directory there: "
                f"{_java_message(e)}"
            ) from None
        self.path: str = str(self._sc.getCheckpointDir())
        self._restored = False
        self._removed = False

    def restore(self) -> None:
        """Gives the SparkContext its checkpoint directory back (unset, or the one it had);
        the checkpoints already taken stay readable (each names its own files)."""
        if self._restored:
            return
        self._restored = True
        try:
            # (SparkContext's setter is Spark-private: the public one cannot unset it)
            getattr(self._sc._jsc.sc(), "checkpointDir_$eq")(self._previous)
        except Exception as e:  # noqa: BLE001 - a Spark without it: the directory stays set
            log.warning("could not restore the session's checkpoint directory: %s", e)

    def remove(self) -> None:
        """:meth:`restore`, and deletes the job's subdirectory with its checkpoint files."""
        self.restore()
        if not self._removed:
            self._removed = True
            _delete(self._sc, self.path)


# -- preparation -------------------------------------------------------------------------------


def learn_boilerplate(source: DataFrame, text_col: str, policy: Policy) -> tuple[int, list[int]]:
    """The corpus-wide first pass of ``CorpusDeduper.learn_boilerplate``, on the executors:
    each page's distinct main-text lines are counted (by a stable 64-bit hash) over all pages,
    and a line in at least ``boilerplate_limit(pages)`` pages is boilerplate. Returns the page
    count and the hashes of the boilerplate lines: at most 100 lines per average page's lines
    once the corpus has 1,000 pages (a line must be in 1 % of them), so what the driver holds
    does not grow with the corpus."""
    policy_json = json.dumps(policy.to_dict(), sort_keys=True)

    def count(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        pol = Policy.from_dict(json.loads(policy_json))
        for batch in batches:
            counts: dict[int, int] = {}
            pages = 0
            for t in batch[text_col].tolist():
                if not isinstance(t, str) or not pol.is_html(t):
                    continue
                pages += 1
                for h in {stable_hash64(x) for x in page_lines(t)}:
                    counts[h] = counts.get(h, 0) + 1
            yield pd.DataFrame(
                {
                    "h": pd.array([*counts.keys(), None], dtype="Int64"),
                    "c": np.asarray([*counts.values(), pages], np.int64),
                }
            )

    lines = (
        source.select(text_col)
        .mapInPandas(count, "h long, c long")
        .groupBy("h")
        .agg(F.sum("c").alias("c"))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        total = lines.where(F.col("h").isNull()).select("c").first()
        pages = int(total[0]) if total is not None and total[0] is not None else 0
        if pages == 0:
            return 0, []
        limit = boilerplate_limit(pages, 10)
        common = lines.where(F.col("h").isNotNull() & (F.col("c") >= limit)).select("h")
        return pages, [int(r[0]) for r in common.collect()]
    finally:
        lines.unpersist()


def _null(value: Any) -> bool:
    """A null as pandas hands it over: None, NaN, NaT or pd.NA (by pandas version)."""
    return value is None or (
        not isinstance(value, str) and np.ndim(value) == 0 and bool(pd.isna(value))
    )


def _time_or_error(value: Any) -> tuple[float, str | None]:
    """A time value as seconds since the epoch, or NaN and what is wrong with it."""
    if _null(value):
        return float("nan"), "the time is null, expected seconds or an ISO 8601 string"
    if isinstance(value, np.generic):
        value = value.item()
    try:
        return parse_time(value), None
    except ValueError as e:
        return float("nan"), str(e)


PREPARED = (
    f"{ROW} long, fp long, len long, rawlen long, t double, terr string, "
    "keys array<long>, mh binary, h1 long, h2 long, norm string"
)


def prepare(
    source: DataFrame,
    text_col: str,
    policy: Policy,
    time_col: str | None,
    boilerplate: Any,
) -> DataFrame:
    """Per row (``ROW``, the text, the time): the prepared text exactly as
    ``CorpusDeduper.prepare`` makes it (pages by their main text less the corpus's boilerplate
    lines, ``boilerplate`` a broadcast set of line hashes or None), its fingerprint, length,
    the length of the text as read (``--keep longest``), the time (``--keep newest``), the
    rule's band keys and min-hash bytes (``NearRule.probes``) and a 128-bit hash of the
    prepared text (exact copies)."""
    policy_json = json.dumps(policy.to_dict(), sort_keys=True)

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        pol = Policy.from_dict(json.loads(policy_json))
        fingerprinter = pol.make_fingerprinter()
        rule = rule_for(pol)
        learnt = boilerplate.value if boilerplate is not None else frozenset()
        for batch in batches:
            # (a null arrives as None, NaN or pd.NA, depending on pandas: the empty text)
            texts = [t if isinstance(t, str) else "" if _null(t) else str(t)
                     for t in batch[text_col].tolist()]  # fmt: skip
            norms = _prepare_texts(texts, pol, learnt)
            fps = np.asarray(fingerprinter.fingerprint_many(norms), dtype=np.uint64)
            keys, mh, lengths = rule.probes(norms, fps)
            n = len(norms)
            hashes = [stable_hash128(s) for s in norms]
            out = pd.DataFrame(
                {
                    ROW: batch[ROW].to_numpy(np.int64),
                    "fp": fps.view(np.int64),
                    "len": lengths.astype(np.int64),
                    "rawlen": np.fromiter(
                        (len(t) if isinstance(t, str) else 0 for t in batch[text_col].tolist()),
                        np.int64,
                        n,
                    ),
                }
            )
            if time_col is not None:
                parsed = [_time_or_error(v) for v in batch[time_col].tolist()]
                out["t"] = np.fromiter((p[0] for p in parsed), np.float64, n)
                out["terr"] = pd.Series([p[1] for p in parsed], dtype=object)
            else:
                out["t"] = np.zeros(n, np.float64)
                out["terr"] = pd.Series([None] * n, dtype=object)
            k64 = keys.astype(np.int64)
            out["keys"] = list(k64)
            width = mh.shape[1] if mh.ndim == 2 else 0
            raw = np.ascontiguousarray(mh).tobytes()
            out["mh"] = [raw[i * width : (i + 1) * width] for i in range(n)]
            out["h1"] = np.fromiter((h[0] for h in hashes), np.int64, n)
            out["h2"] = np.fromiter((h[1] for h in hashes), np.int64, n)
            out["norm"] = norms
            yield out

    columns = [ROW, text_col] + ([time_col] if time_col and time_col != text_col else [])
    return source.select(*columns).mapInPandas(run, PREPARED)


def _prepare_texts(texts: list[str], policy: Policy, learnt: Any) -> list[str]:
    """``CorpusDeduper.prepare`` of a batch once the corpus's boilerplate is known."""
    pages = [i for i, t in enumerate(texts) if policy.is_html(t)]
    if not pages:
        return normalise_many(texts)
    html = set(pages)
    norms = normalise_many(["" if i in html else t for i, t in enumerate(texts)])
    for i in pages:
        norms[i] = without_boilerplate(page_lines(texts[i]), lambda x: stable_hash64(x) in learnt)
    return norms


# -- candidates and verification ---------------------------------------------------------------


def band_pairs(docs: DataFrame, heads: int, window: int) -> DataFrame:
    """Candidate pairs ``(a, b)`` (preference positions, a before b) of documents that share a
    band key: in each bucket, every document with the bucket's first ``heads`` documents and
    the ``window`` documents before it (``docs``: ``POS``, ``keys``; exact copies and empty
    texts already left out)."""
    exploded = docs.select(POS, F.posexplode("keys").alias("band", "key"))
    w = Window.partitionBy("band", "key").orderBy(POS)
    earlier: list[Column] = [F.nth_value(POS, k).over(w) for k in range(1, heads + 1)]
    earlier += [F.lag(POS, k).over(w) for k in range(1, window + 1)]
    near = exploded.select(F.col(POS).alias("b"), F.array(*earlier).alias("e"))
    cands = F.filter("e", lambda x: x.isNotNull() & (x < F.col("b")))
    return near.select("b", F.explode(cands).alias("a")).select("a", "b").distinct()


def local_candidates(
    docs: DataFrame, dropped: DataFrame, policy: Policy, targets: DataFrame | None = None
) -> DataFrame:
    """The candidate pairs ``(a, b)`` the local engine reads for each document ``b`` of
    ``docs`` (``POS``, ``keys``) when the documents of ``dropped`` (``POS``) are dropped and
    the others kept: in each of its band buckets the ``policy.bucket_limit`` newest kept
    documents before it; one read in full buckets only (``bucket_limit`` kept documents
    before it) is a candidate when ``policy.full_bucket_quorum`` of them hold it (a full
    bucket weighs 1, any other the quorum). A bucket's kept documents are numbered in order
    and a document reads the numbers below its own count, in blocks of ``bucket_limit``, so
    no bucket is squared. ``targets`` (``POS``): only their candidates."""
    limit, quorum = policy.bucket_limit, policy.full_bucket_quorum
    # (semi and anti joins: the optimiser's size estimate of an inner or outer join is the
    # product of its sides', and estimates survive checkpoints, so a join with the decision
    # here would square the estimates at every check, until planning alone takes minutes)
    by = docs.select(POS, "keys")
    flagged = (
        by.join(dropped, POS, "left_anti")
        .withColumn("k", F.lit(1))
        .unionByName(by.join(dropped, POS, "left_semi").withColumn("k", F.lit(0)))
    )
    exploded = flagged.select(POS, "k", F.posexplode("keys").alias("band", "key"))
    if targets is not None:
        buckets = exploded.join(targets, POS, "left_semi").select("band", "key").distinct()
        exploded = exploded.join(buckets, ["band", "key"], "left_semi")
    bucket = Window.partitionBy("band", "key")
    before = bucket.orderBy(POS).rowsBetween(Window.unboundedPreceding, -1)
    rows = (
        exploded.withColumn("n", F.sum("k").over(bucket))
        .where(F.col("n") > 0)
        .withColumn("c", F.coalesce(F.sum("k").over(before), F.lit(0)))
    )
    kept = rows.where(F.col("k") == 1).select(
        "band", "key", F.col("c").alias("i"), F.floor(F.col("c") / limit).alias("blk"),
        F.col(POS).alias("a"),
    )  # fmt: skip
    readers = rows.where(F.col("c") > 0)
    if targets is not None:
        readers = readers.join(targets, POS, "left_semi")
    q = F.floor(F.col("c") / limit)
    readers = readers.select(
        "band", "key", "c", F.col(POS).alias("b"), F.explode(F.array(q - 1, q)).alias("blk")
    )
    read = readers.join(kept, ["band", "key", "blk"]).where(
        (F.col("i") < F.col("c")) & (F.col("i") >= F.col("c") - limit)
    )
    weight = F.when(F.col("c") >= limit, F.lit(1)).otherwise(F.lit(quorum))
    return (
        read.groupBy("a", "b")
        .agg(F.sum(weight).alias("w"))
        .where(F.col("w") >= quorum)
        .select("a", "b")
    )


def dropped_by(state: DataFrame) -> DataFrame:
    """The documents (``POS``) a decision (:func:`decide`'s ``node``, ``st``) dropped."""
    return state.where(F.col("st") == DROPPED).select(F.col("node").alias(POS))


def to_check_again(docs: DataFrame, state: DataFrame, before: DataFrame) -> DataFrame:
    """The documents (``POS``) of ``docs`` (``POS``, ``keys``) whose local candidates may
    differ between two decisions (``state``, ``before``): those after a document dropped by
    one and not by the other in one of their band buckets (a document's candidates are the
    kept documents before it in its buckets)."""
    now, then = dropped_by(state), dropped_by(before)
    flipped = now.join(then, POS, "left_anti").unionByName(then.join(now, POS, "left_anti"))
    exploded = docs.select(POS, F.posexplode("keys").alias("band", "key"))
    first = (
        exploded.join(flipped, POS, "left_semi")
        .groupBy("band", "key")
        .agg(F.min(POS).alias("first"))
    )
    after = exploded.join(first, ["band", "key"]).where(F.col(POS) > F.col("first"))
    return after.select(POS).distinct()


def verified_pairs(pairs: DataFrame, docs: DataFrame, policy: Policy, limit: int) -> DataFrame:
    """The passing pairs ``(a, b, d, sim)`` of candidate pairs: ranked by the rule (its
    estimate floor; the first ``limit`` of each document), then verified."""
    return verify_pairs(rank_pairs(pairs, docs, policy, limit), docs, policy)


def forced_edges(dropped: DataFrame) -> DataFrame:
    """For each document of ``dropped`` (``POS``) a pair ``(a, b)`` with a node of its own
    before every document (``-1 - b``; its own negative id for a negative ``b``) and no other
    pair: the decision keeps that node and so drops the document, as a reference kept ahead of
    the corpus does (a node per document: no key shared by millions of pairs)."""
    b = F.col(POS)
    return dropped.select(
        F.when(b >= 0, -1 - b).otherwise(b - F.lit(1 << 62)).alias("a"),
        b.alias("b"),
        F.lit(0).cast("long").alias("d"),
        F.lit(0.0).alias("sim"),
    )


def resolve(
    docs: DataFrame,
    policy: Policy,
    bounds: Bounds,
    stats: dict[str, Any],
    cache: Callable[..., DataFrame],
    free: Callable[[DataFrame], None],
    forced: DataFrame | None = None,
    refs: DataFrame | None = None,
) -> tuple[DataFrame, DataFrame]:
    """The verified pairs and the decision over the documents ``docs``: returns ``(edges,
    state)``.

    With the Jaccard verifier a first decision comes from the bounded candidate pairs of
    :func:`band_pairs`. Then every document is checked against exactly the candidates the
    local engine reads for it under that decision (:func:`local_candidates`: the
    ``bucket_limit`` newest kept documents before it per bucket, the full-bucket quorum;
    ranked and cut to ``verify_limit`` by the rule, verified): its passing ones are its pairs,
    and the decision is taken again over them. Where the decision moved, the documents after
    a moved one in its buckets are checked again, until nothing moves (at most
    ``bounds.max_repairs`` times; ``stats["converged"]``). A document's local decision
    depends only on the decisions of those before it in its buckets, so each check settles
    at least the earliest document still wrong, and once nothing moves the decision is the
    local engine's -- its limits included -- and each dropped document's pairs are those the
    local engine verified for it, so its representative is the local one.

    ``cache`` holds a frame until the job's outputs are written (:func:`checkpoint`-ed unless
    told not to), ``free`` frees one of them earlier.

    ``refs`` (with the verifier; ``POS`` < 0, ``keys``, ``fp``, ``mh``, ``norm``): documents
    kept ahead of the corpus, as the local engine keeps references: in the buckets, read and
    verified with the rest (never checked themselves); the returned pairs and decision name
    them by their positions.

    ``forced`` (without a verifier): documents (``POS``) dropped whatever the others are --
    near-copies of references, kept ahead of the corpus -- through :func:`forced_edges` (in
    the state, not in the returned pairs): they keep nothing out, and their pairs with kept
    documents name their best kept corpus document."""
    if policy.verifier != "jaccard":
        return _resolve_radius(docs, policy, bounds, stats, cache, free, forced)
    bands = policy.band_shape[0]
    first = cache(band_pairs(docs, bounds.heads, bounds.window))
    # (ranked with a limit above the most candidates a document has here: nothing cut)
    edges = cache(verified_pairs(first, docs, policy, bands * (bounds.heads + bounds.window) + 1))
    started = time.perf_counter()
    stats["candidate_pairs"] = first.count()
    log.info("%d candidate pairs (%.1f s)", stats["candidate_pairs"], time.perf_counter() - started)
    state = cache(decide(edges, bounds, stats), False)
    free(first)
    # (the references are read and verified with the corpus, never checked themselves)
    every = docs if refs is None else docs.select(*refs.columns).unionByName(refs)
    repairs, targets = 0, None if refs is None else docs.select(POS)
    while True:
        # the local engine's own candidates under this decision (of the documents whose
        # candidates may have changed), ranked and cut as it does, verified
        cands = cache(local_candidates(every, dropped_by(state), policy, targets))
        n_cands = cands.count()
        stats["candidate_pairs"] += n_cands
        found = cache(verified_pairs(cands, every, policy, policy.verify_limit))
        free(cands)
        if repairs and targets is not None:
            b = targets.select(F.col(POS).alias("b"))
            both = cache(edges.join(b, "b", "left_anti").unionByName(found))
            for frame in (edges, found, targets):
                free(frame)
            edges = both
        else:
            free(edges)
            edges = found
        after = cache(decide(edges, bounds, stats), False)
        targets = cache(to_check_again(docs, after, state))
        n_moved = targets.count()
        log.info(
            "check %d: %d candidate pairs, %d documents to check again (%.1f s)",
            repairs + 1, n_cands, n_moved, time.perf_counter() - started,
        )  # fmt: skip
        free(state)
        state = after
        if not n_moved or repairs >= bounds.max_repairs:
            break
        repairs += 1
    stats["repairs"] = repairs
    stats["converged"] = not n_moved
    if n_moved:
        log.warning(
            "the decision still moved after %d checks: %d documents may differ from the "
            "local engine's (raise Bounds.max_repairs)", repairs + 1, n_moved,
        )  # fmt: skip
    stats["verified_pairs"] = edges.count()
    return edges, state


def _resolve_radius(
    docs: DataFrame,
    policy: Policy,
    bounds: Bounds,
    stats: dict[str, Any],
    cache: Callable[..., DataFrame],
    free: Callable[[DataFrame], None],
    forced: DataFrame | None = None,
) -> tuple[DataFrame, DataFrame]:
    """:func:`resolve` without a verifier. The candidates are bounded per block key
    (:func:`radius_candidates`) and kept when within the radius; then, until nothing changes
    (at most ``bounds.max_repairs`` times), the kept documents are paired exactly with each
    other (:func:`radius_pairs`): the local engine drops a document iff a kept earlier one is
    within its radius, so once no two kept documents are, the kept set is the local engine's.
    Kept documents are few per block key (no two within the radius), so that self-join is
    small where the first pass's would be a square (a hot block of near-identical
    fingerprints)."""
    virtual = cache(forced_edges(forced)) if forced is not None else None
    checked = cache(radius_candidates(docs, policy, bounds.heads, bounds.window))
    edges = cache(pairs_in_radius(checked, docs, policy))
    stats["candidate_pairs"] = checked.count()
    repairs = 0
    while True:
        every = edges if virtual is None else edges.unionByName(virtual)
        state = cache(decide(every, bounds, stats), False)
        kept = docs.join(dropped_by(state), POS, "left_anti").select(POS, "fp", "len")
        found = cache(radius_pairs(kept, policy))
        n_found = found.count()
        stats["candidate_pairs"] += n_found
        log.info("check %d: %d pairs of kept documents within the radius", repairs + 1, n_found)
        if repairs >= bounds.max_repairs or not n_found:
            break
        repairs += 1
        free(state)
        edges = edges.unionByName(found)  # (computed parts: nothing is copied)
    stats["repairs"] = repairs
    stats["verified_pairs"] = edges.count()
    return edges, state


def rank_pairs(pairs: DataFrame, docs: DataFrame, policy: Policy, limit: int) -> DataFrame:
    """The pairs worth verifying: ``NearRule.rank`` of each document's candidates (the rule's
    estimate floor; the first ``limit`` of each document, by the rule's order)."""
    side = docs.select(POS, "fp", "mh")
    joined = pairs.join(
        side.select(F.col(POS).alias("a"), F.col("fp").alias("fa"), F.col("mh").alias("ma")), "a"
    ).join(
        side.select(F.col(POS).alias("b"), F.col("fp").alias("fb"), F.col("mh").alias("mb")), "b"
    )
    policy_json = json.dumps(policy.replace(verify_limit=limit).to_dict(), sort_keys=True)

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        rule = rule_for(Policy.from_dict(json.loads(policy_json)))
        width = rule.width

        def group(frame: pd.DataFrame, starts: np.ndarray) -> pd.DataFrame:
            a = frame["a"].to_numpy(np.int64)
            b = frame["b"].to_numpy(np.int64)
            fa = frame["fa"].to_numpy(np.int64).view(np.uint64)
            fb = frame["fb"].to_numpy(np.int64).view(np.uint64)
            ma = np.frombuffer(b"".join(frame["ma"].tolist()), np.uint8).reshape(-1, width)
            mbs = frame["mb"].tolist()
            keep: list[np.ndarray] = []
            for s, e in zip(starts[:-1].tolist(), starts[1:].tolist()):
                mine = np.frombuffer(mbs[s], np.uint8)
                picked = rule.rank(mine, int(fb[s]), ma[s:e], fa[s:e], a[s:e])
                keep.append(np.asarray(picked, np.int64) + s)
            idx = np.concatenate(keep) if keep else np.empty(0, np.int64)
            return pd.DataFrame({"a": a[idx], "b": b[idx]})

        yield from sorted_groups(batches, "b", group)

    return joined.repartition("b").sortWithinPartitions("b", "a").mapInPandas(run, "a long, b long")


def verify_pairs(pairs: DataFrame, docs: DataFrame, policy: Policy) -> DataFrame:
    """``NearRule.verify`` of each document against its ranked candidates: the passing pairs
    ``(a, b, d, sim)``."""
    side = docs.select(POS, "fp", "norm")
    joined = pairs.join(
        side.select(F.col(POS).alias("a"), F.col("fp").alias("fa"), F.col("norm").alias("na")),
        "a",
    ).join(
        side.select(F.col(POS).alias("b"), F.col("fp").alias("fb"), F.col("norm").alias("nb")),
        "b",
    )
    policy_json = json.dumps(policy.to_dict(), sort_keys=True)

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        rule = rule_for(Policy.from_dict(json.loads(policy_json)))

        def group(frame: pd.DataFrame, starts: np.ndarray) -> pd.DataFrame:
            a = frame["a"].to_numpy(np.int64)
            b = frame["b"].to_numpy(np.int64)
            fa = frame["fa"].to_numpy(np.int64).view(np.uint64)
            fb = frame["fb"].to_numpy(np.int64).view(np.uint64)
            na = frame["na"].tolist()
            nb = frame["nb"].tolist()
            rows: list[int] = []
            dists: list[int] = []
            sims: list[float] = []
            for s, e in zip(starts[:-1].tolist(), starts[1:].tolist()):
                for i, d, sim in rule.verify(nb[s], int(fb[s]), na[s:e], fa[s:e], a[s:e]):
                    rows.append(s + i)
                    dists.append(d)
                    sims.append(sim)
            idx = np.asarray(rows, np.int64)
            return pd.DataFrame(
                {
                    "a": a[idx],
                    "b": b[idx],
                    "d": np.asarray(dists, np.int64),
                    "sim": np.asarray(sims, np.float64),
                }
            )

        yield from sorted_groups(batches, "b", group)

    return (
        joined.repartition("b")
        .sortWithinPartitions("b", "a")
        .mapInPandas(run, "a long, b long, d long, sim double")
    )


def _block_keys(docs: DataFrame, policy: Policy) -> DataFrame:
    """``(key, POS, exact)`` per document of ``docs`` (``POS``, ``fp``): the block keys of the
    index's layout for the policy's largest radius -- each block's own value (``exact``) and
    the values within the block's probe radius -- so that two fingerprints within the radius
    share a key where one of them is exact (pigeonhole)."""
    k = policy.k_max
    layout = BlockLayout(default_blocks(k))
    radii = layout.radii(k)
    blocks = layout.blocks

    def explode(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        local = BlockLayout(blocks)
        for batch in batches:
            keys: list[int] = []
            rows: list[int] = []
            exact: list[bool] = []
            for row, fp in zip(batch[POS].tolist(), batch["fp"].tolist()):
                values = local.values(fp & ((1 << 64) - 1))
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
                    POS: np.asarray(rows, np.int64),
                    "exact": np.asarray(exact, bool),
                }
            )

    return docs.select(POS, "fp").mapInPandas(explode, f"key long, {POS} long, exact boolean")


def _in_radius(
    pa: Column, pb: Column, fa: Column, fb: Column, la: Column, lb: Column, policy: Policy
) -> Column:
    """Whether two documents are within the SimHash radius of the later one's length."""
    later_len = F.when(pa < pb, lb).otherwise(la)
    radius = F.when(later_len <= policy.short_chars, policy.k_short).otherwise(policy.k_long)
    return F.bit_count(fa.bitwiseXOR(fb)) <= radius


def radius_candidates(docs: DataFrame, policy: Policy, heads: int, window: int) -> DataFrame:
    """Candidate pairs ``(a, b)`` without a verifier, bounded like :func:`band_pairs`: in each
    block key's bucket (:func:`_block_keys`), in preference order, every document with the
    bucket's first ``heads`` documents whose own block value the key is and those among the
    ``window`` documents just before it, so a hot block costs ``heads + window`` pairs per
    document, not a square."""
    keyed = _block_keys(docs, policy)
    w = Window.partitionBy("key").orderBy(POS)
    own = F.when(F.col("exact"), F.col(POS))
    earlier = F.array(*[F.nth_value(own, k, ignoreNulls=True).over(w) for k in range(1, heads + 1)])
    if window > 0:
        earlier = F.concat(earlier, F.collect_list(own).over(w.rowsBetween(-window, -1)))
    near = keyed.select(F.col(POS).alias("b"), earlier.alias("e"))
    cands = F.filter("e", lambda x: x.isNotNull() & (x < F.col("b")))
    return near.select("b", F.explode(cands).alias("a")).select("a", "b").distinct()


def pairs_in_radius(pairs: DataFrame, docs: DataFrame, policy: Policy) -> DataFrame:
    """The candidate pairs ``(a, b)`` within the radius, as verified pairs ``(a, b, d, sim)``
    (similarity 1.0, as the local engine gives without a verifier)."""
    side = docs.select(POS, "fp", "len")
    joined = pairs.join(
        side.select(F.col(POS).alias("a"), F.col("fp").alias("fa"), F.col("len").alias("la")), "a"
    ).join(
        side.select(F.col(POS).alias("b"), F.col("fp").alias("fb"), F.col("len").alias("lb")), "b"
    )
    a, b, fa, fb = F.col("a"), F.col("b"), F.col("fa"), F.col("fb")
    return joined.where(_in_radius(a, b, fa, fb, F.col("la"), F.col("lb"), policy)).select(
        "a", "b", F.bit_count(fa.bitwiseXOR(fb)).cast("long").alias("d"), F.lit(1.0).alias("sim")
    )


def radius_pairs(docs: DataFrame, policy: Policy) -> DataFrame:
    """Every pair of ``docs`` within the SimHash radius of the later one's length
    (``Policy.radius``), exactly, by the block keys of the index's layout; ``(a, b, d, sim)``.
    A self-join of each block key's bucket: run on the kept documents only (which are never
    within the radius of each other once the decision is right), see :func:`resolve`."""
    keyed = _block_keys(docs, policy).join(docs.select(POS, "fp", "len"), POS)
    one = keyed.where(F.col("exact")).select(
        "key", F.col(POS).alias("pa"), F.col("fp").alias("fa"), F.col("len").alias("la")
    )
    other = keyed.select(
        "key", F.col(POS).alias("pb"), F.col("fp").alias("fb"), F.col("len").alias("lb")
    )
    pa, pb, fa, fb = F.col("pa"), F.col("pb"), F.col("fa"), F.col("fb")
    return (
        one.join(other, "key")
        .where((pa != pb) & _in_radius(pa, pb, fa, fb, F.col("la"), F.col("lb"), policy))
        .select(
            F.least(pa, pb).alias("a"),
            F.greatest(pa, pb).alias("b"),
            F.bit_count(fa.bitwiseXOR(fb)).cast("long").alias("d"),
            F.lit(1.0).alias("sim"),
        )
        .dropDuplicates(["a", "b"])
    )


# -- the decision ------------------------------------------------------------------------------


def decide(edges: DataFrame, bounds: Bounds, stats: dict[str, Any]) -> DataFrame:
    """The greedy decision of the local engine over the verified pairs ``edges`` (``a`` before
    ``b`` in preference order): a document is dropped when an earlier *kept* document passes
    against it, else kept -- the lexicographically first maximal independent set in preference
    order. In rounds on the executors: an undecided document with a kept earlier neighbour is
    dropped; one whose earlier neighbours are all dropped (or that has none) is kept; the rest
    wait. Rounds = the longest chain of waits (2 or 3 for families of near-copies of one
    original); once at most ``bounds.finish_below`` documents are undecided (or after
    ``bounds.max_rounds`` rounds) the rest and their pairs go to one task that decides them in
    order. Returns ``(node, st)`` for every document of a pair
    (``KEPT`` or ``DROPPED``)."""
    nodes = (
        edges.select(F.col("a").alias("node"))
        .union(edges.select(F.col("b").alias("node")))
        .distinct()
        .withColumn("st", F.lit(UNDECIDED))
    )
    state = checkpoint(nodes)
    active = edges.select("a", "b")
    rounds = 0
    undecided = state.count()
    while undecided > bounds.finish_below and rounds < bounds.max_rounds:
        rounds += 1
        sa = state.select(F.col("node").alias("a"), F.col("st").alias("sa"))
        seen = (
            active.join(sa, "a")
            .groupBy("b")
            .agg(
                F.max((F.col("sa") == KEPT).cast("int")).alias("any_kept"),
                F.max((F.col("sa") == UNDECIDED).cast("int")).alias("any_open"),
            )
        )
        previous = state
        state = state.join(seen, state["node"] == seen["b"], "left").select(
            "node",
            F.when(F.col("st") != UNDECIDED, F.col("st"))
            .when(F.col("any_kept") == 1, F.lit(DROPPED))
            .when(F.col("any_open") == 1, F.lit(UNDECIDED))
            .otherwise(F.lit(KEPT))
            .alias("st"),
        )
        state = checkpoint(state)
        undecided = state.where(F.col("st") == UNDECIDED).count()
        release(previous)
        log.info("decision round %d: %d documents undecided", rounds, undecided)
    stats["rounds"] = rounds
    stats["decided_in_one_task"] = int(undecided)
    if undecided:
        rest = checkpoint(_decide_rest(state, active))
        release(state)
        state = rest
    return state


def _decide_rest(state: DataFrame, active: DataFrame) -> DataFrame:
    """The documents still undecided after the rounds, decided in preference order in one
    task (their pairs and the state of each pair's earlier document)."""
    sa = state.select(F.col("node").alias("a"), F.col("st").alias("sa"))
    open_b = state.where(F.col("st") == UNDECIDED).select(F.col("node").alias("b"))
    pairs = active.join(open_b, "b", "left_semi").join(sa, "a").select("a", "b", "sa")

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        frames = [b for b in batches if len(b)]
        if not frames:
            return
        every = pd.concat(frames, ignore_index=True)
        a = every["a"].to_numpy(np.int64)
        b = every["b"].to_numpy(np.int64)
        sa_ = every["sa"].to_numpy(np.int64)
        order = np.lexsort((a, b))
        status: dict[int, int] = {}
        for x, y, s in zip(a[order].tolist(), b[order].tolist(), sa_[order].tolist()):
            if status.get(y) == DROPPED:
                continue
            st = status.setdefault(x, KEPT if s == UNDECIDED else s)
            if st == KEPT:
                status[y] = DROPPED
            else:
                status.setdefault(y, KEPT)
        yield pd.DataFrame(
            {
                "node": np.fromiter(status.keys(), np.int64, len(status)),
                "st2": np.fromiter(status.values(), np.int64, len(status)),
            }
        )

    decided = pairs.repartition(1).mapInPandas(run, "node long, st2 long")
    return state.join(decided, "node", "left").select(
        "node",
        F.when(F.col("st") != UNDECIDED, F.col("st"))
        .when(F.col("st2").isNotNull(), F.col("st2").cast("int"))
        .otherwise(F.lit(KEPT))
        .alias("st"),
    )


def best(candidates: DataFrame, of: str, other: str) -> DataFrame:
    """Per ``of``: the best of its passing ``other`` documents by the rule's order (highest
    similarity, then smallest distance, then earliest): ``(of, rep, d, sim)``."""
    return (
        candidates.groupBy(of)
        .agg(F.min(F.struct((-F.col("sim")).alias("ns"), "d", F.col(other).alias("r"))).alias("m"))
        .select(
            F.col(of),
            F.col("m.r").alias("rep"),
            F.col("m.d").alias("d"),
            (-F.col("m.ns")).alias("sim"),
        )
    )


def positions(docs: DataFrame, keep: str) -> DataFrame:
    """``(ROW, POS)``: each row's place in the preference order of ``--keep`` (``first``: input
    order; ``longest``: the longest text as read first; ``newest``: the latest time first; ties
    in input order). ``first`` needs no sort (``POS`` is ``ROW``); the others sort the rows and
    number them (``zipWithIndex``: one count per partition reaches the driver)."""
    if keep == "first":
        return docs.select(ROW, F.col(ROW).alias(POS))
    value = "rawlen" if keep == "longest" else "t"
    ordered = docs.select(ROW, value).orderBy(F.col(value).desc(), F.col(ROW))
    numbered = ordered.rdd.map(lambda r: r[0]).zipWithIndex()
    return numbered.toDF(f"{ROW} long, {POS} long")


def row_numbers(numbered: DataFrame, ordered: bool) -> DataFrame:
    """``(ROW, "n")``: each row's number from 0 in input order. From the monotonically
    increasing ids (:func:`number_rows`), or, when ``ROW`` is the caller's ``order_col``
    (``ordered``), its rank there (its value where the values are 0 .. n - 1)."""
    if not ordered:
        return numbered.select(ROW, number_rows(numbered).alias("n"))
    got = numbered.agg(F.count(F.lit(1)).alias("rows"), F.max(ROW).alias("hi")).first()
    if got is None or not got["rows"] or got["hi"] == got["rows"] - 1:  # (distinct, >= 0)
        return numbered.select(ROW, F.col(ROW).alias("n"))
    ranks = numbered.select(ROW).rdd.map(lambda r: r[0]).sortBy(lambda x: x).zipWithIndex()
    return ranks.toDF([ROW, "n"])


def number_rows(numbered: DataFrame) -> Column:
    """Consecutive row numbers from 0 in input order, from the monotonically increasing ids:
    an offset per partition (one small count per partition) plus the position within it."""
    part = F.shiftright(F.col(ROW), 33)
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
    return (mapping[part] + F.col(ROW).bitwiseAND(F.lit((1 << 33) - 1))).cast("long")
