"""Batch near-duplicate removal on Apache Spark, for corpora larger than one machine.

``dedup(df, text_col, id_col)`` returns the rows to keep and the clusters with the decision of
the single-machine ``neardup dedup`` (:class:`neardup.corpus.CorpusDeduper`): documents are
visited in preference order (``keep="first"``: input order, ``"longest"``: the longest text
first, ``"newest"``: the latest time first; ties in input order) and a document is dropped
when a document *kept* before it passes the verifier against it; its cluster is the best such
kept document (highest similarity, then nearest, then earliest). The candidates, their ranking
and the verifier are the local engine's own (``neardup.kept.rule_for``: the core's
``NearRule``); only where the candidates are held differs.

The job, stage by stage -- all of it on the executors; the driver plans the stages and reads
counts (rows, rounds), never rows:

1. **Prepare** (``mapInPandas``): each text as ``CorpusDeduper.prepare`` makes it -- pages by
   their main text less the lines that are boilerplate *of the whole corpus*, learnt in a first
   distributed pass (:func:`neardup.spark._job.learn_boilerplate`) -- then its fingerprint,
   length, band keys and min-hash bytes (``NearRule.probes``) and a 128-bit hash of the
   prepared text. Empty prepared texts are never candidates: kept (or dropped with
   ``empty="drop"``), never clustered.
2. **Candidates**: the documents of each MinHash band bucket, in preference order; each one is
   paired with the bucket's first ``Bounds.heads`` documents and the ``Bounds.window`` documents
   before it (window functions), so a hot bucket costs ``heads + window`` pairs per document,
   not a square. The rule's ranking drops the pairs whose estimated similarity is out of reach
   (``NearRule.rank``), and the rest are verified exactly (``NearRule.verify``), grouped by
   their later document. Without a verifier the buckets are SimHash block keys, bounded alike,
   and a pair passes within the radius. (An exact copy is a document like any other.)
3. **Decision**: the lexicographically first maximal independent set of the verified pairs, in
   rounds (:func:`neardup.spark._job.decide`).
4. **Check**: every document is checked against exactly the candidates the local engine reads
   for it under that decision (the ``Policy.bucket_limit`` newest kept documents before it per
   bucket, the full-bucket quorum, ranked and cut to ``verify_limit``, verified), the decision
   is taken again over the pairs that pass, and the documents after a moved one in its
   buckets are checked again until nothing moves (:func:`neardup.spark._job.resolve`); each
   dropped document is named after the best kept document among its pairs (a grouped
   minimum). Without a verifier the kept documents are paired exactly with each other
   instead.
5. **Output**: ``kept`` (the input's rows and columns, input order), ``clusters`` and ``pairs``
   are DataFrames; :func:`run_dedup_cli` has the executors write them as part files.

With references (``against=``, ``neardup dedup --against``; :mod:`neardup.spark._against`),
they are prepared alike and are kept documents before the corpus in the check of step 4, as
the local engine keeps them; without a verifier a document within the radius of one is
dropped from the start (it keeps nothing out) and named after the best of the references
and kept documents within its radius.

So ``dedup`` gives the local engine's kept set and, with the verifier (the default), its
clusters too, its limits included, once the check has converged (``Frames.stats
["converged"]``, within ``Bounds.max_repairs`` checks). docs/batch.md ("Spark") has the
figures.

Install with ``pip install 'neardup[spark]'``; pyspark is imported only by this package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

try:
    import pandas as pd  # noqa: F401  (needed by the workers)
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
except ModuleNotFoundError as e:  # pragma: no cover - exercised only without the extra
    raise ModuleNotFoundError(
        "neardup.spark needs pyspark, pandas and pyarrow: pip install 'neardup[spark]'",
        name=e.name,
    ) from e

from neardup.policy import Policy, check_k
from neardup.spark import _job
from neardup.spark._job import DROPPED, KEPT, POS, ROW, Bounds, Frames

__all__ = [
    "KEEP",
    "Bounds",
    "Frames",
    "dedup",
    "dedup_frames",
    "read_references",
    "run_dedup_cli",
]

KEEP = ("first", "longest", "newest")


def _check_order(numbered: DataFrame, order_col: str) -> None:
    """A ValueError unless the rows' ``order_col`` (as ``ROW``) are distinct integers in
    ``0 .. REF_BASE - 1``: the job's positions, where references sit below 0."""
    got = numbered.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count(ROW).alias("set"),
        F.count_distinct(ROW).alias("distinct"),
        F.min(ROW).alias("lo"),
        F.max(ROW).alias("hi"),
    ).first()
    assert got is not None
    if not got["rows"]:
        return
    problem = None
    if got["set"] < got["rows"]:
        problem = f"{got['rows'] - got['set']} rows have no integer there"
    elif got["lo"] < 0 or got["hi"] >= _job.REF_BASE:
        problem = f"its values run from {got['lo']} to {got['hi']}"
    elif got["distinct"] < got["set"]:
        problem = f"{got['set'] - got['distinct']} rows repeat another row's value"
    if problem:
        raise ValueError(
            f"order_col {order_col!r} must hold distinct integers from 0 below 2**61, one a "
            f"row: {problem}"
        )


def _policy_for(policy: Policy | Mapping[str, Any] | None, k: int | None) -> Policy:
    if policy is None:
        pol = Policy.default()
    elif isinstance(policy, Policy):
        pol = policy
    elif isinstance(policy, Mapping):
        pol = Policy.from_dict(policy)
    else:
        raise TypeError(f"policy must be a Policy or dict, got {type(policy).__name__}")
    k = check_k(k)
    if k is not None:
        pol = pol.replace(k_short=k, k_long=k)
    if pol.verifier not in ("jaccard", "none"):
        raise ValueError(
            f"the Spark job supports verifier 'jaccard' or 'none' (like neardup dedup); "
            f"got {pol.verifier!r}"
        )
    return pol


def _references_frame(
    against: DataFrame | str | Sequence[str],
    spark: Any,
    given_text_col: str | None,
    corpus_text_col: str,
    id_col: str | None,
    held: list[DataFrame],
) -> DataFrame:
    """``against`` as ``(REF, id, text)``: a DataFrame's columns (its order, its row numbers
    for ids when ``id_col`` is None; a frame of :func:`read_references`: its ``text`` and
    ``id``), or the paths :func:`read_references` reads (the frames it holds appended to
    ``held``)."""
    if isinstance(against, DataFrame):
        ours = REF in against.columns and {"id", "text"} <= set(against.columns)
        text_col = given_text_col or ("text" if ours else corpus_text_col)
        if text_col not in against.columns:
            raise ValueError(
                f"against_text_col {text_col!r} is not a column of against: {against.columns}"
            )
        if id_col is not None and id_col not in against.columns:
            raise ValueError(
                f"against_id_col {id_col!r} is not a column of against: {against.columns}"
            )
        if id_col is None and ours:
            id_col = "id"
        if id_col is not None:
            against = _job.whole_ids(against, id_col, "against")
        order = F.col(REF) if REF in against.columns else F.monotonically_increasing_id()
        numbered = against.withColumn(ROW, order)
        ident = F.col(id_col) if id_col else _job.number_rows(numbered)
        return numbered.select(
            F.col(ROW).alias(REF), ident.alias("id"), F.col(text_col).alias("text")
        )
    if isinstance(against, str) or (
        isinstance(against, Sequence) and all(isinstance(p, str) for p in against)
    ):
        text_field = given_text_col or corpus_text_col
        return _against._read_all(spark, against, text_field, id_col, None, "fail", held)
    raise TypeError(
        f"against must be a DataFrame, a path or a list of paths, got {type(against).__name__}"
    )


def _best_named(of_refs: DataFrame, of_corpus: DataFrame) -> DataFrame:
    """Per ``x`` the best of its candidates ``(x, rep, d, sim, src)`` (``src`` 0: a
    reference, 1: a kept corpus document): highest similarity, then nearest, then earliest
    (references first)."""
    every = of_refs.unionByName(of_corpus)
    best = F.min(F.struct((-F.col("sim")).alias("ns"), "d", "src", "rep")).alias("m")
    return (
        every.groupBy("x")
        .agg(best)
        .select(
            "x",
            F.col("m.rep").alias("rep"),
            F.col("m.d").alias("d"),
            (-F.col("m.ns")).alias("sim"),
            F.col("m.src").alias("src"),
        )
    )


def _id_cast(corpus: Any, refs: Any) -> Any:
    """How the corpus's and the references' ids share a column: as they are when of one kind
    (both integers, or both strings), else as strings."""
    from pyspark.sql import types as T

    def kind(t: Any) -> str:
        integral = (T.LongType, T.IntegerType, T.ShortType, T.ByteType)
        return "long" if isinstance(t, integral) else t.simpleString()

    if refs is None or kind(corpus) == kind(refs):
        return lambda c: c.cast("long") if kind(corpus) == "long" and refs is not None else c
    return lambda c: c.cast("string")


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
    empty: str = "keep",
    bounds: Bounds | None = None,
    against: DataFrame | str | Sequence[str] | None = None,
    against_text_col: str | None = None,
    against_id_col: str | None = None,
    checkpoint_dir: str | None = None,
) -> tuple[DataFrame, DataFrame]:
    """Drop near-duplicates from ``df``; returns ``(kept_df, clusters_df)`` (see
    :func:`dedup_frames`, which also gives the verified pairs and the job's counts, and frees
    what the job holds once they are written: here, with ``checkpoint_dir``, its checkpoint
    files stay until Spark's cleaner removes them, where
    ``spark.cleaner.referenceTracking.cleanCheckpoints`` is true)."""
    frames = dedup_frames(
        df,
        text_col,
        id_col,
        k,
        policy=policy,
        keep=keep,
        order_col=order_col,
        time_col=time_col,
        empty=empty,
        bounds=bounds,
        against=against,
        against_text_col=against_text_col,
        against_id_col=against_id_col,
        checkpoint_dir=checkpoint_dir,
    )
    return frames.kept, frames.clusters


def dedup_frames(
    df: DataFrame,
    text_col: str,
    id_col: str | None = None,
    k: int | None = None,
    *,
    policy: Policy | Mapping[str, Any] | None = None,
    keep: str = "first",
    order_col: str | None = None,
    time_col: str | None = None,
    empty: str = "keep",
    bounds: Bounds | None = None,
    against: DataFrame | str | Sequence[str] | None = None,
    against_text_col: str | None = None,
    against_id_col: str | None = None,
    checkpoint_dir: str | None = None,
) -> Frames:
    """Drop near-duplicates from ``df``: the kept rows, the clusters and the verified pairs.

    - ``text_col``: the column with the text; ``id_col``: the id column (``None``: the row
      number in input order, from 0).
    - ``k``: with ``verifier="none"``, the SimHash radius (``None``: the policy's,
      length-aware); the Jaccard verifier's candidates come from MinHash bands.
    - ``policy``: :class:`neardup.dedup.Policy` (default ``Policy.default()``); verifier
      ``"jaccard"`` or ``"none"``.
    - ``keep``: ``"first"`` (input order), ``"longest"`` (the longest ``text_col`` as read) or
      ``"newest"`` (the latest ``time_col``: seconds since the epoch or ISO 8601, naive times in
      UTC, :func:`neardup.io.parse_time`); ties in input order. Input order is ``order_col``'s
      when given (distinct integers from 0 below 2**61, else a ValueError), else the
      DataFrame's own (``monotonically_increasing_id``: the input must read the same rows in
      the same partitions each time, as a file read does). A ``time_col`` value that is not a
      time is a ValueError naming the row.
    - ``empty``: what becomes of documents whose prepared text is empty (never anybody's copy):
      ``"keep"`` (default) or ``"drop"``.
    - ``bounds``: the Spark job's own limits (:class:`Bounds`).
    - ``against``: reference documents (``neardup dedup --against``): a DataFrame with the
      text in ``against_text_col`` (default ``text_col``) and the id in ``against_id_col``
      (default: the row number in the frame's order, from 0; a frame of
      :func:`read_references`: its ``text`` and ``id``), or paths (a str or a list: what
      :func:`read_references` reads; ids by the local engine's rule, ``FILE:LINE`` where a
      record has none, equal to the local engine's where records are one per line). They
      are kept ahead of the corpus and never in ``kept``: a document that passes the rule
      against one is dropped and named after the best of the references and the kept
      documents it passes against, as locally; when that is a reference, ``clusters`` gets a
      row for it (``cluster``: the reference's id, ``reference``: true) and ``pairs`` its
      verified pairs with references (``a``: the reference's id, ``reference``: true, listed
      first); the other documents are deduplicated among themselves. With references the
      frames have a ``reference`` column, and ids of two kinds (longs and strings) are
      written as strings.
    - ``checkpoint_dir``: where the job's checkpoints are written (below), a directory every
      executor and the driver reach -- ``hdfs://``, ``s3a://``, a shared mount; a local path in
      local mode -- or ``None``. A directory that cannot be made or written there is a
      ValueError naming it, before any stage runs.

    The stages the frames share are computed here and held until :meth:`Frames.unpersist`
    (checkpoints: later plans name them in one line); writing the frames runs the rest of the
    job. Without ``checkpoint_dir`` they are held on the executors (memory, then local disk),
    and an executor lost on the way fails the job; with it they are also written to a
    subdirectory of ``checkpoint_dir`` of the job's own, which survives a lost executor and
    which :meth:`Frames.unpersist` removes (as the job's failure here does). The SparkContext's
    checkpoint directory is set for the job and given back as it was; one the session already
    has (``SparkContext.setCheckpointDir``, ``spark.checkpoint.dir``) is used alike when
    ``checkpoint_dir`` is None, and only the files the job wrote there are removed.
    """
    if text_col not in df.columns:
        raise ValueError(f"text_col {text_col!r} is not a column of df: {df.columns}")
    if id_col is not None and id_col not in df.columns:
        raise ValueError(f"id_col {id_col!r} is not a column of df: {df.columns}")
    if id_col is not None:
        df = _job.whole_ids(df, id_col, "id_col")
    if order_col is not None and order_col not in df.columns:
        raise ValueError(f"order_col {order_col!r} is not a column of df: {df.columns}")
    if keep not in KEEP:
        raise ValueError(f"keep must be one of {', '.join(KEEP)}; got {keep!r}")
    if keep == "newest" and time_col is None:
        raise ValueError('keep="newest" needs time_col (the column with each row\'s time)')
    if time_col is not None and time_col not in df.columns:
        raise ValueError(f"time_col {time_col!r} is not a column of df: {df.columns}")
    if empty not in ("keep", "drop"):
        raise ValueError(f"empty must be 'keep' or 'drop', got {empty!r}")
    pol = _policy_for(policy, k)
    bnd = bounds if bounds is not None else Bounds()
    spark = df.sparkSession
    own = _job.CheckpointDir(spark, checkpoint_dir) if checkpoint_dir is not None else None
    cached: list[DataFrame] = []
    try:
        refs_in = None
        if against is not None:
            refs_in = _references_frame(
                against, spark, against_text_col, text_col, against_id_col, cached
            )
        frames = _job_frames(
            df, text_col, id_col, pol, bnd, keep, order_col, time_col, empty, refs_in, cached
        )
    except BaseException:
        for frame in cached:
            _job.release(frame)
        if own is not None:
            own.remove()
        raise
    finally:
        if own is not None:
            own.restore()  # (every checkpoint is taken: the writes read them by their paths)
    frames.checkpoints = own
    return frames


def _job_frames(
    df: DataFrame,
    text_col: str,
    id_col: str | None,
    pol: Policy,
    bnd: Bounds,
    keep: str,
    order_col: str | None,
    time_col: str | None,
    empty: str,
    refs_in: DataFrame | None,
    cached: list[DataFrame],
) -> Frames:
    """:func:`dedup_frames` of checked arguments; the frames it holds go to ``cached``."""
    spark = df.sparkSession
    stats: dict[str, Any] = {}

    def keep_cached(frame: DataFrame, compute: bool = True) -> DataFrame:
        # computed now (a checkpoint: later plans name it in one line), freed by unpersist
        if compute:
            frame = _job.checkpoint(frame)
        cached.append(frame)
        return frame

    def free(frame: DataFrame) -> None:
        # one of them freed before the outputs are written
        cached[:] = [f for f in cached if f is not frame]
        _job.release(frame)

    order = F.col(order_col).cast("long") if order_col else F.monotonically_increasing_id()
    numbered = df.withColumn(ROW, order)
    if order_col:
        _check_order(numbered, order_col)
    source = numbered.select(ROW, text_col, *([time_col] if time_col else []))

    # 1. prepare: the corpus's page boilerplate first, then every text
    boilerplate = None
    if pol.html is not False:
        pages, lines = _job.learn_boilerplate(source, text_col, pol)
        stats["pages"] = pages
        stats["boilerplate_lines"] = len(lines)
        if lines:
            boilerplate = spark.sparkContext.broadcast(frozenset(lines))
    prepared = _job.prepare(
        source, text_col, pol, time_col if keep == "newest" else None, boilerplate
    )
    if keep == "newest":
        prepared = keep_cached(prepared)
        bad = prepared.where(F.col("terr").isNotNull()).orderBy(ROW).select(ROW, "terr").first()
        if bad is not None:
            where = f"the row at position key {bad[0]}"
            if id_col is not None:
                row = numbered.where(F.col(ROW) == bad[0]).select(id_col).first()
                where = f"the row of {id_col} {row[0]!r}" if row is not None else where
            raise ValueError(f"time_col {time_col!r}: {where}: {bad[1]}")
    docs = keep_cached(prepared.join(_job.positions(prepared, keep), ROW))
    refs = None
    if refs_in is not None:
        # the references, prepared alike (the corpus's boilerplate): kept ahead of the corpus
        text = "__neardup_text"
        refs = keep_cached(
            _job.prepare(
                refs_in.select(F.col(REF).alias(ROW), F.col("text").alias(text)),
                text,
                pol,
                None,
                boilerplate,
            ).select(F.col(ROW).alias(REF), "fp", "len", "keys", "mh", "norm", "h1", "h2")
        )
        stats["references"] = refs.count()
    stats["empty"] = docs.where(F.col("len") == 0).count()

    # 2. the documents of the pair stage: every non-empty text (an exact copy is compared as
    # any other document is, as locally: its first copy may be out of its reach there)
    full = docs.where(F.col("len") > 0)

    # the references, kept ahead of the corpus: with the verifier they are documents before
    # every corpus document (in its buckets, read and verified as locally); without, a
    # document within the radius of one is dropped whatever the rest of the corpus is
    by_ref = ref_pairs = matched = ref_docs = None
    if refs is not None and pol.verifier == "jaccard":
        ref_docs = refs.where(F.col("len") > 0).select(
            (F.col(REF) - F.lit(_job.REF_BASE)).alias(POS), "keys", "fp", "mh", "norm"
        )
    elif refs is not None:
        ref_pairs = keep_cached(_against.reference_edges(full, refs, pol))
        matched = keep_cached(_job.best(ref_pairs, "b", "a").withColumnRenamed("b", "x"))

    # 3-4. candidates, ranked and verified, and the decision (the references' near-copies
    # without a verifier dropped from the start: they keep nothing out)
    forced = matched.select(F.col("x").alias(POS)) if matched is not None else None
    edges, state = _job.resolve(full, pol, bnd, stats, keep_cached, free, forced, ref_docs)
    kept_nodes = state.where(F.col("st") == KEPT).select(F.col("node"))
    dropped_nodes = state.where(F.col("st") == DROPPED).select(F.col("node"))
    named = _job.best(
        edges.join(dropped_nodes.withColumnRenamed("node", "b"), "b", "left_semi").join(
            kept_nodes.withColumnRenamed("node", "a"), "a", "left_semi"
        ),
        "b",
        "a",
    ).withColumnRenamed("b", "x")
    if ref_docs is not None:
        # named after a reference (a position before the corpus) or a corpus document
        named = keep_cached(named)
        dropped = named.where(F.col("rep") >= 0)
        by_ref = named.where(F.col("rep") < 0).withColumn("rep", F.col("rep") + _job.REF_BASE)
        ref_pairs = edges.where(F.col("a") < 0).withColumn("a", F.col("a") + _job.REF_BASE)
        edges = edges.where(F.col("a") >= 0)
    elif matched is None:
        dropped = keep_cached(named)
    else:
        # a reference's near-copy is named after the best of the references and the kept
        # corpus documents it is within the radius of, as the local engine does: references
        # are earlier than the corpus on ties
        both = keep_cached(
            _best_named(matched.withColumn("src", F.lit(0)), named.withColumn("src", F.lit(1)))
        )
        dropped = keep_cached(both.where(F.col("src") == 1).drop("src"))
        by_ref = both.where(F.col("src") == 0).drop("src")

    # 5. the frames
    rows = docs.select(ROW, POS, "len")
    # ids: id_col's, else (a row without one) the row's number in input order, as locally
    if id_col is not None and numbered.where(F.col(id_col).isNull()).first() is None:
        ids = numbered.select(ROW, F.col(id_col).alias("id"))
    else:
        numbers = _job.row_numbers(numbered, order_col is not None)
        if id_col is None:
            ids = numbers.select(ROW, F.col("n").alias("id"))
        else:
            kind = numbered.schema[id_col].dataType
            ids = numbered.select(ROW, id_col).join(numbers, ROW)
            ids = ids.select(ROW, F.coalesce(F.col(id_col), F.col("n").cast(kind)).alias("id"))
    ids = ids.join(rows.select(ROW, POS), ROW)
    gone_pos = dropped.select(F.col("x").alias(POS))
    if by_ref is not None:
        gone_pos = gone_pos.unionByName(by_ref.select(F.col("x").alias(POS)))
    gone = gone_pos.join(rows, POS).select(ROW)
    if empty == "drop":
        gone = gone.unionByName(rows.where(F.col("len") == 0).select(ROW))
    kept_df = numbered.join(gone, ROW, "left_anti").orderBy(ROW).drop(ROW)

    member = dropped.select(
        F.col("x").alias(POS), F.col("rep"), "d", "sim", F.lit(False).alias("kept")
    )
    heads = dropped.select(
        F.col("rep").alias(POS),
        F.col("rep"),
        F.lit(0).cast("long").alias("d"),
        F.lit(1.0).alias("sim"),
        F.lit(True).alias("kept"),
    ).distinct()
    by_pos = ids.select(POS, ROW, "id")
    # (ids of the corpus and of the references in one column: as strings when of two kinds)
    as_one = _id_cast(ids.schema["id"].dataType, refs_in.schema["id"].dataType if refs_in else None)
    listed = (
        member.unionByName(heads)
        .join(by_pos, POS)
        .join(
            by_pos.select(
                F.col(POS).alias("rep"), F.col(ROW).alias("rep_row"), F.col("id").alias("cluster")
            ),
            "rep",
        )
        .select(
            "id",
            as_one(F.col("cluster")).alias("cluster"),
            "kept",
            F.col("d").alias("distance"),
            F.col("sim").alias("similarity"),
            F.lit(0).alias("g"),
            F.col("rep_row").alias("k1"),
            F.col(ROW).alias("k2"),
        )
    )
    extra: list[str] = []
    if by_ref is not None and refs_in is not None:
        extra = ["reference"]
        ref_ids = refs_in.select(F.col(REF).alias("rep"), as_one(F.col("id")).alias("cluster"))
        of_refs = (
            by_ref.withColumnRenamed("x", POS)
            .join(by_pos, POS)
            .join(ref_ids, "rep")
            .select(
                "id",
                "cluster",
                F.lit(False).alias("kept"),
                F.col("d").alias("distance"),
                F.col("sim").alias("similarity"),
                F.lit(1).alias("g"),
                F.col("rep").alias("k1"),
                F.col(ROW).alias("k2"),
                F.lit(True).alias("reference"),
            )
        )
        listed = listed.withColumn("reference", F.lit(False)).unionByName(of_refs)
    clusters_df = listed.orderBy("g", "k1", F.col("kept").desc(), "k2").select(
        "id", "cluster", "kept", "distance", "similarity", *extra
    )
    every_pair = edges.select("a", "b", "d", "sim")
    id_b = by_pos.select(F.col(POS).alias("b"), F.col("id").alias("id_b"))
    found = (
        every_pair.join(by_pos.select(F.col(POS).alias("a"), F.col("id").alias("id_a")), "a")
        .join(id_b, "b")
        .select(
            as_one(F.col("id_a")).alias("id_a"), "id_b", "d", "sim", "a", "b", F.lit(1).alias("g")
        )
    )
    if ref_pairs is not None and refs_in is not None:
        ref_a = refs_in.select(F.col(REF).alias("a"), as_one(F.col("id")).alias("id_a"))
        found = found.withColumn("reference", F.lit(False)).unionByName(
            ref_pairs.join(ref_a, "a")
            .join(id_b, "b")
            .select("id_a", "id_b", "d", "sim", "a", "b", F.lit(0).alias("g"))
            .withColumn("reference", F.lit(True))
        )
    pairs_df = found.orderBy("g", "b", "a").select(
        F.col("id_a").alias("a"),
        F.col("id_b").alias("b"),
        F.col("d").alias("distance"),
        F.round("sim", 6).alias("similarity"),
        *extra,
    )
    return Frames(kept=kept_df, clusters=clusters_df, pairs=pairs_df, stats=stats, cached=cached)


from neardup.spark import _against  # noqa: E402
from neardup.spark._against import REF, read_references  # noqa: E402
from neardup.spark._cli import run_dedup_cli  # noqa: E402
