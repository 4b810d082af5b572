"""``neardup dedup --engine spark --against REF…`` and ``neardup.spark.dedup_frames(against=…)``
in Spark local mode: the same kept documents and the same matched references as the local
engine (``CorpusDeduper.add_references``, ``neardup dedup --against``) on the same corpus and
references -- a JSONL file with ids, one without (``FILE:LINE``), an ``index build`` directory
-- and a missing reference refused before any output.

The Spark session of every Spark test module (tests/conftest.py), few jobs.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark", reason="the [spark] extra is required")

from _helpers import SAMPLE, near_copy, neardup, words  # noqa: E402
from neardup import spark as nspark  # noqa: E402
from neardup.cli import main  # noqa: E402
from neardup.corpus import CorpusDeduper  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


@pytest.fixture(scope="module")
def texts() -> tuple[list[str], list[str]]:
    """References (150 distinct sample texts and one more) and a corpus (250 other sample
    texts) holding near-copies of 20 references, exact copies of two (one twice), copies
    within itself, and last a document K that is no reference's near-copy and a document D
    between it and the last reference, nearer K: D passes against both and is named after K
    (the more similar kept document), as the local engine does."""
    with open(SAMPLE, encoding="utf-8") as f:
        sample = [json.loads(line)["text"] for _, line in zip(range(450), f)]
    d = CorpusDeduper()
    d.feed(sample[:180])
    refs = [t for t, k in zip(sample[:180], d.result().kept) if k][:150]
    corpus = list(sample[200:450])
    corpus[5:5] = [near_copy(refs[i], i) for i in range(0, 60, 3)]
    corpus[100:100] = [refs[1], refs[7] + " (updated)", refs[1]]
    corpus[150:150] = [corpus[10], near_copy(corpus[20], 99)]
    base = words(777, 120).split()

    def changed(n: int) -> str:
        return " ".join(f"k{i}x" if i % 10 == 0 and i < 10 * n else w for i, w in enumerate(base))

    return [*refs, " ".join(base)], [*corpus, changed(12), changed(8)]


def _expected(refs: list[str], corpus: list[str]) -> Any:
    d = CorpusDeduper()
    d.add_references(refs)
    d.feed(corpus)
    return d.result()


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def _parts(path: Path) -> list[dict[str, Any]]:
    assert (path / "_SUCCESS").exists()
    return [x for part in sorted(path.glob("part-*")) for x in _lines(part)]


def test_a_dataframe_of_references_decides_as_the_local_engine(
    spark: SparkSession, texts: tuple[list[str], list[str]]
) -> None:
    """The library: kept rows and each dropped row's reference (row numbers of the frames)
    are CorpusDeduper's with add_references."""
    refs, corpus = texts
    expect = _expected(refs, corpus)
    df = spark.createDataFrame([(t,) for t in corpus], "text string")
    against = spark.createDataFrame([(t,) for t in refs], "body string")
    frames = nspark.dedup_frames(df, "text", against=against, against_text_col="body")
    try:
        kept = [r["text"] for r in frames.kept.collect()]
        clusters = [r.asDict() for r in frames.clusters.collect()]
        pairs = [r.asDict() for r in frames.pairs.collect()]
    finally:
        frames.unpersist()
    assert kept == [t for t, k in zip(corpus, expect.kept) if k]
    named = {x["id"]: x["cluster"] for x in clusters if x["reference"]}
    want = {int(r): int(expect.reference[r]) for r in np.flatnonzero(expect.reference >= 0)}
    assert named == want and len(want) >= 20
    assert named[100] == named[102] == 1 and named[101] == 7  # (refs[1] twice: copies)
    # the corpus's own clusters are those of the local engine
    member = (expect.representative != np.arange(len(corpus))) & (expect.reference < 0)
    got_members = {x["id"]: x["cluster"] for x in clusters if not x["reference"] and not x["kept"]}
    assert got_members == {int(r): int(expect.representative[r]) for r in np.flatnonzero(member)}
    # references are listed first in the pairs, and each match is among them
    flags = [x["reference"] for x in pairs]
    assert flags == sorted(flags, reverse=True)
    assert {(x["a"], x["b"]) for x in pairs if x["reference"]} >= {(v, k) for k, v in want.items()}
    assert frames.stats["references"] == len(refs)
    k, d = len(corpus) - 2, len(corpus) - 1
    assert expect.reference[d] < 0 and expect.representative[d] == k  # (the case above)
    assert got_members[d] == k and (len(refs) - 1, d) in {(x["a"], x["b"]) for x in pairs}


def test_cli_against_a_jsonl_file_matches_the_local_engine(
    spark: SparkSession, texts: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    """`--against eval.jsonl --against-text-field question --against-id-field qid`: the
    kept records and the clusters (reference rows naming the qid) equal the local command's."""
    refs, corpus = texts
    ref_path = _jsonl(
        tmp_path / "eval.jsonl", [{"qid": f"q{i}", "question": t} for i, t in enumerate(refs)]
    )
    train = _jsonl(tmp_path / "train.jsonl", [{"id": i, "text": t} for i, t in enumerate(corpus)])
    common = ["--against", str(ref_path), "--against-text-field", "question",
              "--against-id-field", "qid"]  # fmt: skip
    local_out, local_cl = tmp_path / "local.jsonl", tmp_path / "local-cl.jsonl"
    local_pairs = tmp_path / "local-pairs.jsonl"
    r = neardup("dedup", str(train), "-o", str(local_out), "--clusters", str(local_cl),
                "--pairs", str(local_pairs), *common)  # fmt: skip
    assert r.returncode == 0, r.stderr
    out, cl, pairs = tmp_path / "kept", tmp_path / "clusters", tmp_path / "pairs"
    summary = nspark.run_dedup_cli(
        [str(train)], str(out), clusters=str(cl), pairs=str(pairs), against=[str(ref_path)],
        against_text_field="question", against_id_field="qid",
    )  # fmt: skip
    assert [x["id"] for x in _parts(out)] == [x["id"] for x in _lines(local_out)]
    want = _lines(local_cl)
    got = _parts(cl)
    # (corpus ids are integers and references' strings: one Spark column holds them as strings)
    fields = ("id", "cluster", "kept", "distance")
    assert [[str(x[k]) for k in fields] for x in got] == [[str(x[k]) for k in fields] for x in want]
    assert [bool(x.get("reference")) for x in want] == [x["reference"] for x in got]
    named = {x["id"]: x["cluster"] for x in got if x["reference"]}
    assert named[100] == named[102] == "q1"
    # the pairs with references: each match among them, and every one the local command lists
    with_ref = {(x["a"], x["b"]) for x in _parts(pairs) if x["reference"]}
    assert with_ref >= {(v, k) for k, v in named.items()}
    assert with_ref == {(x["a"], x["b"]) for x in _lines(local_pairs) if x["reference"]}
    assert summary["references"] == len(refs)
    assert summary["removed_as_reference_copies"] == len(named)
    assert summary["kept"] == len(_lines(local_out))


def test_cli_against_an_index_dir_and_a_file_without_ids(
    spark: SparkSession, texts: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    """References in a `neardup index build` directory (its ids) and in a JSONL file whose
    records have no id (FILE:LINE), through the `neardup dedup --engine spark` command: the same
    kept records and the same reference ids as the local command."""
    refs, corpus = texts
    half = len(refs) // 2
    ref_path = _jsonl(
        tmp_path / "eval.jsonl", [{"qid": f"q{i}", "question": t} for i, t in enumerate(refs)]
    )
    first = _jsonl(tmp_path / "first.jsonl", [{"qid": f"q{i}", "question": t}
                                              for i, t in enumerate(refs[:half])])  # fmt: skip
    plain = _jsonl(tmp_path / "plain.jsonl", [{"question": t} for t in refs[half:]])
    idx = tmp_path / "evals"
    r = neardup("index", "build", str(idx), str(first), "--text-field", "question",
                "--id-field", "qid")  # fmt: skip
    assert r.returncode == 0, r.stderr
    train = _jsonl(tmp_path / "train.jsonl", [{"id": i, "text": t} for i, t in enumerate(corpus)])
    common = ["--against", str(idx), str(plain), "--against-text-field", "question"]
    local_out, local_cl = tmp_path / "local.jsonl", tmp_path / "local-cl.jsonl"
    r = neardup("dedup", str(train), "-o", str(local_out), "--clusters", str(local_cl), *common)
    assert r.returncode == 0, r.stderr
    out, cl = tmp_path / "kept", tmp_path / "clusters"
    # (in this process: the command takes the module's session)
    code = main(["dedup", "--engine", "spark", str(train), "-o", str(out), "--clusters", str(cl),
                 "--quiet", *common])  # fmt: skip
    assert code == 0
    assert [x["id"] for x in _parts(out)] == [x["id"] for x in _lines(local_out)]
    want = {x["id"]: x["cluster"] for x in _lines(local_cl) if x.get("reference")}
    got = {x["id"]: x["cluster"] for x in _parts(cl) if x["reference"]}
    assert got == want
    assert any(str(v).startswith(f"{plain}:") for v in want.values())
    assert any(str(v).startswith("q") for v in want.values())
    assert ref_path.exists()


def test_a_missing_reference_fails_before_any_output(tmp_path: Path) -> None:
    train = _jsonl(tmp_path / "train.jsonl", [{"id": 0, "text": "a text"}])
    out = tmp_path / "kept"
    r = neardup("dedup", "--engine", "spark", str(train), "-o", str(out),
                "--against", str(tmp_path / "nope.jsonl"))  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert "--against" in r.stderr and "nope.jsonl: no such file" in r.stderr
    assert not out.exists()
    r = neardup("dedup", "--engine", "spark", str(train), "-o", str(out),
                "--against", str(tmp_path / "refs-*.jsonl"))  # fmt: skip
    assert r.returncode == 1 and "no file matches" in r.stderr, r.stderr
    r = neardup("dedup", "--engine", "spark", str(train), "-o", str(out), "--against", str(out))
    assert r.returncode == 2 and "both an input and an output" in r.stderr
    assert not out.exists()
    with pytest.raises(ValueError, match="no such file"):
        nspark.run_dedup_cli([str(train)], str(out), against=[str(tmp_path / "nope.jsonl")])
    assert not out.exists()


def _edited(text: str, rng: random.Random, edits: int) -> str:
    chars = list(text)
    for _ in range(edits):
        chars[rng.randrange(len(chars))] = rng.choice("abcdefghijklmnopqrstuvwxyz ")
    return "".join(chars)


def test_where_the_local_limits_bind_each_document_is_named_as_locally(
    spark: SparkSession,
) -> None:
    """The default policy on 1,000 references in 10 families of 100 near-copies and 1,500
    corpus documents (600 more near-copies of the families, 900 in 3 families of their own):
    the local engine cuts bucket reads, leaves rows of full buckets out and caps what it
    verifies, and the references are kept documents before the corpus in the buckets it reads
    -- so the Spark job keeps the same documents, names each dropped one after the same
    reference or kept document, and lists each such match among its pairs with references."""
    rng = random.Random(5)
    bases = [words(500 + i, 40) for i in range(13)]
    refs = [_edited(bases[i % 10], rng, rng.randint(0, 6)) for i in range(1000)]
    corpus = [_edited(bases[rng.randrange(10)], rng, rng.randint(0, 6)) for _ in range(600)]
    corpus += [_edited(bases[10 + i % 3], rng, rng.randint(0, 6)) for i in range(900)]
    rng.shuffle(corpus)
    expect = _expected(refs, corpus)
    assert min(expect.stats[k] for k in ("capped", "buckets_cut", "unconfirmed")) > 0
    df = spark.createDataFrame([(i, t) for i, t in enumerate(corpus)], "id long, text string")
    against = spark.createDataFrame([(t,) for t in refs], "text string")
    frames = nspark.dedup_frames(df, "text", "id", against=against)
    try:
        kept = [r["id"] for r in frames.kept.collect()]
        clusters = [r.asDict() for r in frames.clusters.collect()]
        pairs = {(x["a"], x["b"]) for x in frames.pairs.where("reference").collect()}
        stats = frames.stats
    finally:
        frames.unpersist()
    assert kept == np.flatnonzero(expect.kept).tolist()
    named = {x["id"]: x["cluster"] for x in clusters if x["reference"]}
    want = {int(r): int(expect.reference[r]) for r in np.flatnonzero(expect.reference >= 0)}
    assert named == want and len(want) >= 500
    member = (expect.representative != np.arange(len(corpus))) & (expect.reference < 0)
    got_members = {x["id"]: x["cluster"] for x in clusters if not x["reference"] and not x["kept"]}
    assert got_members == {int(r): int(expect.representative[r]) for r in np.flatnonzero(member)}
    assert pairs >= {(v, k) for k, v in want.items()}
    assert stats["converged"]


def _tied_triple() -> tuple[str, str, str]:
    """A reference R, a corpus document C (no near-copy of R) and a document X after it that
    passes against both with the same estimate and distance (a tie in the rule's rank, which
    the candidates' positions break: the reference, kept first, wins it locally)."""
    from neardup.kept import rule_for
    from neardup.policy import Policy
    from neardup.verify import normalise_many

    policy = Policy.default()
    rule, fingerprinter = rule_for(policy), policy.make_fingerprinter()
    rng = random.Random(1)
    vocabulary = [f"w{i}" for i in range(3000)]

    def edit(base: list[str], lo: int) -> str:
        out = list(base)
        for _ in range(8):
            out[rng.randrange(lo, lo + 60)] = rng.choice(vocabulary)
        return " ".join(out)

    for _ in range(3000):
        base = [rng.choice(vocabulary) for _ in range(120)]
        r, c, x = edit(base, 0), edit(base, 60), " ".join(base)
        norms = normalise_many([r, c, x])
        fps = np.asarray(fingerprinter.fingerprint_many(norms), np.uint64)
        _, sketches, _ = rule.probes(norms, fps)
        mh = np.asarray(sketches).reshape(3, -1)
        tie = (mh[0] == mh[2]).sum() == (mh[1] == mh[2]).sum() and bin(
            int(fps[0]) ^ int(fps[2])
        ).count("1") == bin(int(fps[1]) ^ int(fps[2])).count("1")
        at = np.arange(2, dtype=np.int64)
        if tie and len(rule.verify(norms[2], int(fps[2]), norms[:2], fps[:2], at)) == 2:
            if not rule.verify(norms[1], int(fps[1]), norms[:1], fps[:1], at[:1]):
                return r, c, x
    raise AssertionError("no tie in 3,000 triples")


def test_a_reference_wins_a_tie_at_the_verify_limit_as_locally(spark: SparkSession) -> None:
    """verify_limit=1 and X tied between reference R and the kept corpus document C: the
    local engine verifies R (kept first) and names X after it; so does the Spark job (it
    ranked references, which sit below the corpus's positions, last)."""
    from neardup.policy import Policy

    r, c, x = _tied_triple()
    policy = Policy.default().replace(verify_limit=1)
    d = CorpusDeduper(policy)
    d.add_references([r])
    d.feed([c, x])
    expect = d.result()
    assert expect.kept.tolist() == [True, False] and expect.reference.tolist() == [-1, 0]
    df = spark.createDataFrame([(0, c), (1, x)], "id long, text string")
    against = spark.createDataFrame([(r,)], "text string")
    frames = nspark.dedup_frames(df, "text", "id", policy=policy, against=against)
    try:
        kept = [row["id"] for row in frames.kept.collect()]
        clusters = [row.asDict() for row in frames.clusters.collect()]
    finally:
        frames.unpersist()
    assert kept == [0]
    assert [(x["id"], x["cluster"], x["reference"]) for x in clusters if not x["kept"]] == [
        (1, 0, True)
    ]


@pytest.mark.parametrize(
    ("orders", "problem"),
    [([-5, -3], "from -5 to -3"), ([2, 2], "repeat"), ([1, None], "no integer")],
)
def test_an_order_col_that_is_no_position_is_refused(
    spark: SparkSession, orders: list[int | None], problem: str
) -> None:
    """order_col values are the job's positions (references sit below 0): negative, repeated
    or missing ones are a ValueError naming the column, before the job."""
    df = spark.createDataFrame(
        [(0, "a text here", orders[0]), (1, "another one", orders[1])],
        "id long, text string, o long",
    )
    with pytest.raises(ValueError, match=f"order_col 'o' .*{problem}"):
        nspark.dedup_frames(df, "text", "id", order_col="o")
