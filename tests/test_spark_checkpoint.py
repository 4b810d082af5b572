"""The Spark job's reliable checkpoints (``checkpoint_dir=``, ``--checkpoint-dir``) in Spark
local mode: the same kept rows, clusters and pairs as with the default local checkpoints; the
checkpoints are files in a subdirectory of the directory of the job's own while it runs, and
gone once it ends, failed or not; the session's checkpoint directory is given back as it was;
a directory that cannot be made is refused before any output.

What these checkpoints are for -- an executor lost during the job -- cannot be staged in local
mode (the driver is the executor), so it is not tested here.

The Spark session of every Spark test module (tests/conftest.py), few jobs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the [spark] extra is required")

from _helpers import near_copy, neardup, words  # noqa: E402
from neardup import spark as nspark  # noqa: E402
from neardup.corpus import CorpusDeduper  # noqa: E402
from neardup.spark import _job  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """30 unrelated texts, near-copies of 8 of them (one a near-copy of a near-copy) and exact
    copies of two."""
    base = [words(4000 + i, 60) for i in range(30)]
    out = list(base)
    for i in range(8):
        out.insert(4 * i + 3, near_copy(base[i], i))
    out.insert(20, near_copy(out[3], 50))
    out += [base[10], base[11]]
    return out


@pytest.fixture(autouse=True)
def no_checkpoint_dir(spark: SparkSession) -> Iterator[None]:
    """Every test starts, and must end, with a session without a checkpoint directory."""
    assert spark.sparkContext.getCheckpointDir() is None
    yield
    assert spark.sparkContext.getCheckpointDir() is None


def _frame(spark: SparkSession, texts: list[str]) -> DataFrame:
    return spark.createDataFrame(
        [(f"d{i:02d}", t) for i, t in enumerate(texts)], "id string, text string"
    )


def _outcome(frames: nspark.Frames) -> tuple[list[Any], ...]:
    return (
        [r[0] for r in frames.kept.select("id").collect()],
        [tuple(r) for r in frames.clusters.collect()],
        [tuple(r) for r in frames.pairs.collect()],
    )


def _written(frames: nspark.Frames) -> list[str]:
    """The checkpoint files of the frames the job holds (none for a local checkpoint)."""
    out = []
    for frame in frames.cached:
        plan = frame._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            path = plan.rdd().getCheckpointFile()
            if path.isDefined():
                out.append(str(path.get()).removeprefix("file:"))
    return out


def _tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_a_checkpoint_dir_gives_the_same_frames_and_is_emptied_after(
    spark: SparkSession, texts: list[str], tmp_path: Path
) -> None:
    df = _frame(spark, texts)
    local = nspark.dedup_frames(df, "text", "id")
    assert _written(local) == []  # (the default: local checkpoints, no file)
    want = _outcome(local)
    local.unpersist()
    assert len(want[0]) == 30 and len(want[1]) == 10 + 11  # (9 near and 2 exact copies)

    top = tmp_path / "checkpoints"
    frames = nspark.dedup_frames(df, "text", "id", checkpoint_dir=str(top))
    assert spark.sparkContext.getCheckpointDir() is None  # given back once the job is planned
    [job_dir] = list(top.iterdir())
    written = _written(frames)
    assert len(written) >= 5
    for path in written:
        assert Path(path).parent == job_dir and Path(path).name.startswith("rdd-")
        assert Path(path).is_dir()  # (no part file for a frame of no partition)
    assert any(Path(p).glob("part-*") for p in written)
    assert _outcome(frames) == want
    frames.unpersist()
    assert _tree(top) == []
    frames.unpersist()  # (twice: nothing left to do)


def test_a_failing_job_removes_its_checkpoints(spark: SparkSession, tmp_path: Path) -> None:
    """keep="newest" with a bad time fails after its first checkpoint (the prepared rows)."""
    df = spark.createDataFrame(
        [("a b c d e f", "k1", "2025-01-01"), ("a b c d e f", "k2", "soon")],
        "text string, key string, t string",
    )
    top = tmp_path / "checkpoints"
    with pytest.raises(ValueError, match="time_col 't': the row of key 'k2'"):
        nspark.dedup_frames(df, "text", "key", keep="newest", time_col="t", checkpoint_dir=str(top))
    assert top.is_dir() and _tree(top) == []
    assert spark.sparkContext.getCheckpointDir() is None


def test_the_command_writes_its_checkpoints_there_and_removes_them(
    spark: SparkSession, texts: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_dedup_cli`` (``neardup dedup --engine spark``) with ``--against`` too: the
    references' checkpoints go there as well; the kept rows are the local engine's."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"d{i:02d}", "text": t}) + "\n" for i, t in enumerate(texts)),
        "utf-8",
    )
    refs = [near_copy(words(4025, 60), 77), words(9999, 60)]  # (of a text without copies)
    ref_file = tmp_path / "refs.jsonl"
    ref_file.write_text("".join(json.dumps({"text": t}) + "\n" for t in refs), "utf-8")
    top = tmp_path / "checkpoints"
    released: list[tuple[str, bool]] = []
    real = _job.release

    def spy(frame: DataFrame) -> None:
        plan = frame._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            path = plan.rdd().getCheckpointFile()
            if path.isDefined():
                local = str(path.get()).removeprefix("file:")
                released.append((local, os.path.isdir(local)))
        real(frame)

    monkeypatch.setattr(_job, "release", spy)
    summary = nspark.run_dedup_cli(
        [str(corpus)],
        str(tmp_path / "kept"),
        against=[str(ref_file)],
        checkpoint_dir=str(top),
    )
    d = CorpusDeduper()
    d.add_references(refs)
    d.feed(texts)
    want = [f"d{i:02d}" for i, k in enumerate(d.result().kept) if k]
    kept = tmp_path / "kept"
    parts = sorted(kept.glob("part-*"))
    got = [json.loads(x)["id"] for p in parts for x in p.read_text("utf-8").splitlines()]
    assert got == want and summary["kept"] == len(want)
    assert summary["removed_as_reference_copies"] == 1
    assert len(released) >= 5
    assert all(Path(p).is_relative_to(top) and held for p, held in released), released
    assert _tree(top) == []
    assert spark.sparkContext.getCheckpointDir() is None


def test_a_directory_that_cannot_be_made_is_refused_before_any_output(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("not a directory\n", "utf-8")
    bad = str(tmp_path / "a-file" / "checkpoints")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"text": "a b c"}) + "\n", "utf-8")
    with pytest.raises(ValueError, match=r"--checkpoint-dir .*a-file/checkpoints: cannot make"):
        nspark.run_dedup_cli([str(corpus)], str(tmp_path / "kept"), checkpoint_dir=bad)
    assert not (tmp_path / "kept").exists()
    df = _frame(spark, ["a b c"])
    with pytest.raises(ValueError, match="checkpoint_dir .*a-file/checkpoints: cannot make"):
        nspark.dedup_frames(df, "text", "id", checkpoint_dir=bad)
    with pytest.raises(ValueError, match="checkpoint_dir must be a directory path"):
        nspark.dedup_frames(df, "text", "id", checkpoint_dir="")
    assert spark.sparkContext.getCheckpointDir() is None


def test_the_sessions_own_checkpoint_dir_is_used_and_kept(
    spark: SparkSession, texts: list[str], tmp_path: Path
) -> None:
    """A session with a checkpoint directory (``setCheckpointDir``, ``spark.checkpoint.dir``)
    and no ``checkpoint_dir``: the job checkpoints there and removes only its own files."""
    sc = spark.sparkContext
    sc.setCheckpointDir(str(tmp_path / "session"))
    theirs = Path(str(sc.getCheckpointDir()).removeprefix("file:"))
    (theirs / "rdd-of-theirs").mkdir()
    try:
        frames = nspark.dedup_frames(_frame(spark, texts[:12]), "text", "id")
        written = _written(frames)
        assert written and all(Path(p).parent == theirs for p in written)
        frames.unpersist()
        assert _tree(theirs) == ["rdd-of-theirs"]
        assert sc.getCheckpointDir() == f"file:{theirs}"
    finally:
        # (the session is every Spark test's: unset it again, as the job does)
        assert sc._jvm is not None
        getattr(sc._jsc.sc(), "checkpointDir_$eq")(sc._jvm.scala.Option.apply(None))


def test_the_flag_reaches_the_job_and_a_bad_dir_is_refused(tmp_path: Path) -> None:
    """``neardup dedup --engine spark --checkpoint-dir DIR`` (its own session: a process)."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": words(i, 40)}) + "\n" for i in range(4)), "utf-8")
    r = neardup("dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--checkpoint-dir", "x")
    assert r.returncode == 2 and "--checkpoint-dir need --engine spark" in r.stderr
    (tmp_path / "a-file").write_text("", "utf-8")
    out = tmp_path / "kept"
    bad = ("--checkpoint-dir", str(tmp_path / "a-file" / "sub"))
    r = neardup("dedup", "--engine", "spark", str(src), "-o", str(out), *bad)
    assert r.returncode == 1 and "--checkpoint-dir " in r.stderr and "cannot make" in r.stderr
    assert not out.exists()
    top = tmp_path / "checkpoints"
    r = neardup(
        "dedup", "--engine", "spark", str(src), "-o", str(out), "--checkpoint-dir", str(top)
    )
    assert r.returncode == 0, r.stderr
    assert (out / "_SUCCESS").exists() and _tree(top) == []
