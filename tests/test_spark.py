"""neardup.spark in Spark local mode: the same kept rows and clusters as the single-machine
engine (``CorpusDeduper`` and the ``neardup dedup`` command) on the same input.

Spark is slow to start on two cores: one session for the module, few and small jobs.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark", reason="the [spark] extra is required")

from _helpers import SAMPLE, neardup  # noqa: E402
from neardup import spark as nspark  # noqa: E402
from neardup.corpus import CorpusDeduper  # noqa: E402
from neardup.dedup import Policy  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    # pyspark 4 warns about pandas >= 3 on every pandas call; the calls used here work.
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    if shutil.which("java") is None:
        pytest.fail("java is not installed: run scripts/setup-test.sh (default-jre-headless)")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("neardup-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    """Real text: 150 rows of the sample corpus plus exact and edited copies of 20 of them."""
    with open(SAMPLE, encoding="utf-8") as f:
        base = [json.loads(line) for _, line in zip(range(150), f)]
    out = list(base)
    for i, r in enumerate(base[:20]):
        text = (
            r["text"]
            if i % 2
            else r["text"][: len(r["text"]) // 2] + "，" + r["text"][len(r["text"]) // 2 :]
        )
        out.insert(3 * i + 5, dict(r, id=f"copy{i:02d}", text=text))
    return out


def _local(rows: list[dict[str, Any]], keep_order: Any = None) -> Any:
    d = CorpusDeduper()
    d.feed([r["text"] for r in rows])
    return d.result(keep_order)


def _expected_clusters(res: Any, ids: list[Any]) -> list[tuple[Any, Any, bool, int]]:
    rep = res.representative
    n = rep.size
    member = rep != np.arange(n)
    in_cluster = member.copy()
    in_cluster[rep[member]] = True
    rows = np.flatnonzero(in_cluster)
    order = np.lexsort((rows, rows != rep[rows], rep[rows]))
    return [
        (ids[r], ids[int(rep[r])], bool(rep[r] == r), int(res.distance[r]))
        for r in rows[order].tolist()
    ]


def test_dedup_matches_the_single_machine_engine(
    spark: SparkSession, rows: list[dict[str, Any]]
) -> None:
    """Default policy, keep first, ids = row numbers: same kept rows, same clusters (ids,
    kept flags, distances, similarities), in the same order."""
    df = spark.createDataFrame([(r["text"], r["id"]) for r in rows], "text string, key string")
    kept_df, clusters_df = nspark.dedup(df, "text")
    res = _local(rows)
    assert res.duplicates >= 20
    kept = [r["key"] for r in kept_df.collect()]
    assert kept == [r["id"] for r, k in zip(rows, res.kept) if k]
    got = [tuple(r) for r in clusters_df.collect()]
    want = _expected_clusters(res, list(range(len(rows))))
    assert [g[:4] for g in got] == want
    for g in got:
        if not g[2]:
            assert g[4] == pytest.approx(res.similarity[g[0]])
    assert set(kept_df.columns) == {"text", "key"}


def test_cli_engine_matches_neardup_dedup(
    spark: SparkSession, rows: list[dict[str, Any]], tmp_path: Path
) -> None:
    """run_dedup_cli (what `neardup dedup --engine spark` calls) writes the same kept ids and the
    same clusters file as the local `neardup dedup` command on the same JSONL input."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    local_out, local_cl = tmp_path / "local.jsonl", tmp_path / "local-clusters.jsonl"
    r = neardup("dedup", str(src), "-o", str(local_out), "--clusters", str(local_cl))
    assert r.returncode == 0, r.stderr
    out, cl = tmp_path / "spark.jsonl", tmp_path / "spark-clusters.jsonl"
    summary = nspark.run_dedup_cli([str(src)], str(out), text_field="text", clusters=str(cl))

    def ids(p: Path) -> list[Any]:
        return [json.loads(line)["id"] for line in p.read_text("utf-8").splitlines()]

    assert ids(out) == ids(local_out)
    assert cl.read_text("utf-8").splitlines() == local_cl.read_text("utf-8").splitlines()
    first = json.loads(out.read_text("utf-8").splitlines()[0])
    assert first == {k: rows[0][k] for k in first} and set(first) == set(rows[0])
    assert summary["documents"] == len(rows)
    assert summary["kept"] == len(ids(local_out))
    assert summary["removed"] == len(rows) - summary["kept"]


def _timed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with a ``published`` time that puts some copies after their original, some
    before, some at the same time (a tie: the first read stays); a few as epoch seconds, the
    rest ISO 8601 (with and without a zone), as a crawl mixes them."""
    out = []
    for i, r in enumerate(rows):
        t = 1_750_000_000 + 3600 * ((i * 7919) % 97)
        if i % 11 == 0:
            published: Any = t
        elif i % 3 == 0:
            published = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))  # naive: UTC
        else:
            published = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t))
        out.append(dict(r, published=published))
    return out


@pytest.mark.parametrize("keep", ["longest", "newest"])
def test_cli_engine_keep_policies_match_neardup_dedup(
    spark: SparkSession, rows: list[dict[str, Any]], tmp_path: Path, keep: str
) -> None:
    """--keep longest / newest: run_dedup_cli keeps the same documents and writes the same
    clusters as the local `neardup dedup` with the same policy, and the policy matters (the
    kept set differs from --keep first)."""
    data = _timed(rows)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data), "utf-8")
    flags = ["--keep", keep] + (["--time-field", "published"] if keep == "newest" else [])
    local_out, local_cl = tmp_path / "local.jsonl", tmp_path / "local-clusters.jsonl"
    r = neardup("dedup", str(src), "-o", str(local_out), "--clusters", str(local_cl), *flags)
    assert r.returncode == 0, r.stderr
    first_out = tmp_path / "first.jsonl"
    assert neardup("dedup", str(src), "-o", str(first_out)).returncode == 0
    out, cl = tmp_path / "spark.jsonl", tmp_path / "spark-clusters.jsonl"
    nspark.run_dedup_cli(
        [str(src)],
        str(out),
        keep=keep,
        time_field="published" if keep == "newest" else None,
        clusters=str(cl),
    )

    def ids(p: Path) -> list[Any]:
        return [json.loads(line)["id"] for line in p.read_text("utf-8").splitlines()]

    assert ids(local_out) != ids(first_out)
    assert ids(out) == ids(local_out)
    assert cl.read_text("utf-8").splitlines() == local_cl.read_text("utf-8").splitlines()


def test_keep_newest_needs_good_times(spark: SparkSession) -> None:
    df = spark.createDataFrame(
        [("a b c d e f", "k1", "2025-01-01"), ("a b c d e f", "k2", "soon")],
        "text string, key string, t string",
    )
    with pytest.raises(ValueError, match="keep=.newest. needs time_col"):
        nspark.dedup(df, "text", "key", keep="newest")
    with pytest.raises(ValueError, match="time_col 'when' is not a column"):
        nspark.dedup(df, "text", "key", keep="newest", time_col="when")
    with pytest.raises(ValueError, match="time_col 't': the row of key 'k2': time 'soon'"):
        nspark.dedup(df, "text", "key", keep="newest", time_col="t")
    kept, _ = nspark.dedup(df.where("key = 'k1'"), "text", "key", keep="newest", time_col="t")
    assert [r["key"] for r in kept.collect()] == ["k1"]


def test_resolve_keep_longest_matches_corpus_deduper(rows: list[dict[str, Any]]) -> None:
    """The driver-side keep rule equals CorpusDeduper.result for keep="longest" too (no Spark
    needed: fed with the engine's own verified pairs, CorpusDeduper.near_pairs)."""
    d = CorpusDeduper()
    texts = [r["text"] for r in rows]
    d.feed(texts)
    lengths = np.asarray([len(t) for t in texts], dtype=np.int64)
    n = len(rows)
    order = np.lexsort((np.arange(n), -lengths))
    res = d.result(order)
    every = d.near_pairs(order)
    pairs = list(
        zip(
            every.pairs_a.tolist(),
            every.pairs_b.tolist(),
            every.pairs_distance.tolist(),
            every.pairs_similarity.tolist(),
        )
    )
    assert res.duplicates > 10
    dec = nspark._resolve(pairs, "longest", {i: int(x) for i, x in enumerate(lengths)})
    got = dict(zip(dec[nspark._ROW].tolist(), dec["__rep"].tolist()))
    want = {i: int(r) for i, r in enumerate(res.representative) if i in got or r != i}
    assert got == want


def test_bad_arguments(spark: SparkSession) -> None:
    df = spark.createDataFrame([("a",)], "text string")
    with pytest.raises(ValueError, match="text_col 'body'"):
        nspark.dedup(df, "body")
    with pytest.raises(ValueError, match="id_col 'key'"):
        nspark.dedup(df, "text", "key")
    with pytest.raises(ValueError, match="keep must be one of"):
        nspark.dedup(df, "text", keep="oldest")
    with pytest.raises(ValueError, match="verifier"):
        nspark.dedup(df, "text", policy=Policy(verifier="levenshtein"))
    with pytest.raises(ValueError, match="k must"):
        nspark.dedup(df, "text", k=65)


def test_an_input_spark_cannot_decode_is_refused_before_the_job(tmp_path: Path) -> None:
    """An .xz or .zst file (which the local engine reads) is refused with the codec and the fix,
    instead of reaching Spark's JSON reader as bytes ('_corrupt_record')."""
    import lzma

    src = tmp_path / "docs.jsonl.xz"
    src.write_bytes(lzma.compress(b'{"id": 1, "text": "a text"}\n'))
    with pytest.raises(ValueError, match=r"no \.xz codec.*xz -dk .*docs\.jsonl\.xz"):
        nspark.run_dedup_cli([str(src)], str(tmp_path / "out.jsonl"))
