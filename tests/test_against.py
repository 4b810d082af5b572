"""Deduplicating a corpus against reference documents: ``CorpusDeduper.add_references`` and
``neardup dedup --against`` (files and ``neardup index build`` directories), ``index query``.

The rule checked: references are kept ahead of the corpus and never dropped, so a run with
references decides exactly as one run over the references followed by the corpus (when the
references hold no near-copies of each other), with the references' rows taken out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import SAMPLE, near_copy, neardup, words
from neardup.corpus import CorpusDeduper
from neardup.dedup import Deduplicator


@pytest.fixture(scope="module")
def sample() -> list[dict[str, Any]]:
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for line in f][:900]


def _distinct(texts: list[str]) -> list[str]:
    """The texts a deduplication keeps: no two of them near-copies."""
    d = CorpusDeduper()
    d.feed(texts)
    kept = d.result().kept
    return [t for t, k in zip(texts, kept) if k]


def _corpus(sample: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    refs = _distinct([r["text"] for r in sample[:300]])
    corpus = [r["text"] for r in sample[300:]]
    # near-copies of references among the corpus, spread over it
    corpus[5:5] = [near_copy(refs[i], i) for i in range(0, 60, 3)]
    corpus[200:200] = [refs[1], refs[7] + " (updated)"]
    return refs, corpus


def test_references_decide_as_one_run_over_references_then_corpus(
    sample: list[dict[str, Any]],
) -> None:
    refs, corpus = _corpus(sample)
    joint = CorpusDeduper()
    joint.feed(refs + corpus)
    whole = joint.result()
    assert whole.kept[: len(refs)].all()  # (the references are distinct)

    d = CorpusDeduper()
    d.add_references(refs[:100])
    d.add_references(refs[100:])  # (several calls, before the corpus)
    d.feed(corpus)
    assert len(d) == len(corpus) and d.references == len(refs)
    r = d.result()
    expect = whole.representative[len(refs) :]
    by_ref = expect < len(refs)
    assert by_ref.sum() >= 22  # the copies put in
    assert np.array_equal(r.reference, np.where(by_ref, expect, -1))
    assert np.array_equal(r.representative, np.where(by_ref, -1, expect - len(refs)))
    assert np.array_equal(r.similarity, whole.similarity[len(refs) :])
    assert np.array_equal(r.kept, whole.kept[len(refs) :])
    assert r.duplicates == whole.duplicates
    assert r.stats["documents"] == len(corpus)
    # the pairs: the corpus's own, and each dropped row with the reference it matched
    assert set(zip(r.pairs_a.tolist(), r.pairs_b.tolist())) == {
        (int(expect[b]) - len(refs), b) for b in np.flatnonzero(~by_ref & ~r.kept)
    }
    assert r.reference_pairs_row.tolist() == np.flatnonzero(by_ref).tolist()
    assert r.reference_pairs_ref.tolist() == expect[by_ref].tolist()
    assert (r.reference_pairs_similarity >= 0.8).all()


def test_near_pairs_name_every_reference_a_row_passes_against(
    sample: list[dict[str, Any]],
) -> None:
    refs, corpus = _corpus(sample)
    joint = CorpusDeduper()
    joint.feed(refs + corpus)
    whole = joint.near_pairs()
    n = len(refs)
    d = CorpusDeduper()
    d.add_references(refs)
    d.feed(corpus)
    p = d.near_pairs()
    a, b = whole.pairs_a, whole.pairs_b
    with_ref = (a < n) & (b >= n)
    assert set(zip(p.reference_pairs_ref.tolist(), p.reference_pairs_row.tolist())) == set(
        zip(a[with_ref].tolist(), (b[with_ref] - n).tolist())
    )
    inside = a >= n
    assert set(zip(p.pairs_a.tolist(), p.pairs_b.tolist())) == set(
        zip((a[inside] - n).tolist(), (b[inside] - n).tolist())
    )
    assert (p.representative == np.arange(len(corpus))).all() and (p.reference == -1).all()


def test_references_come_before_the_corpus() -> None:
    d = CorpusDeduper()
    d.feed([words(1)])
    with pytest.raises(ValueError, match="add_references must come before the corpus"):
        d.add_references([words(2)])


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _build(idx: Path, ref_path: Path) -> None:
    """``neardup index build`` of the evaluation records (question, qid) into ``idx``."""
    r = neardup("index", "build", str(idx), str(ref_path), "--text-field", "question",
                "--id-field", "qid")  # fmt: skip
    assert r.returncode == 0, r.stderr


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.fixture()
def files(tmp_path: Path, sample: list[dict[str, Any]]) -> tuple[Path, Path, list[str], list[str]]:
    refs, corpus = _corpus(sample)
    ref_path = _jsonl(
        tmp_path / "eval.jsonl", [{"qid": f"q{i}", "question": t} for i, t in enumerate(refs)]
    )
    train = _jsonl(tmp_path / "train.jsonl", [{"id": i, "text": t} for i, t in enumerate(corpus)])
    return ref_path, train, refs, corpus


def test_cli_against_files_and_an_index_directory(
    tmp_path: Path, files: tuple[Path, Path, list[str], list[str]]
) -> None:
    ref_path, train, refs, corpus = files
    d = CorpusDeduper()
    d.add_references(refs)
    d.feed(corpus)
    expect = d.result()

    out, clusters, pairs = tmp_path / "out.jsonl", tmp_path / "cl.jsonl", tmp_path / "p.jsonl"
    common = ["--against-text-field", "question", "--against-id-field", "qid"]
    r = neardup(
        "dedup", str(train), "-o", str(out), "--clusters", str(clusters), "--pairs", str(pairs),
        "--against", str(ref_path), *common,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    n_ref = int((expect.reference >= 0).sum())
    assert f"{n_ref} as near-copies of" in r.stderr and f"of the {len(refs)} references" in r.stderr
    # the output: the corpus's kept documents only, never a reference
    assert [x["id"] for x in _read(out)] == np.flatnonzero(expect.kept).tolist()
    # the clusters name the reference each dropped document matched
    named = {x["id"]: x["cluster"] for x in _read(clusters) if x.get("reference")}
    assert named == {
        int(row): f"q{expect.reference[row]}" for row in np.flatnonzero(expect.reference >= 0)
    }
    assert named[200] == "q1"  # (the exact copy of refs[1])
    with_ref = [x for x in _read(pairs) if x["reference"]]
    assert {(x["a"], x["b"]) for x in with_ref} >= set((v, k) for k, v in named.items())

    # the same references built once into a directory, then reused
    idx = tmp_path / "evals"
    _build(idx, ref_path)
    out2, clusters2 = tmp_path / "out2.jsonl", tmp_path / "cl2.jsonl"
    r = neardup("dedup", str(train), "-o", str(out2), "--clusters", str(clusters2),
                "--against", str(idx))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert out2.read_bytes() == out.read_bytes()
    assert _read(clusters2) == _read(clusters)


def test_cli_against_errors_come_before_any_output(
    tmp_path: Path, files: tuple[Path, Path, list[str], list[str]]
) -> None:
    ref_path, train, _, _ = files
    out = tmp_path / "out.jsonl"
    r = neardup("dedup", str(train), "-o", str(out), "--against", str(tmp_path / "nope.jsonl"))
    assert r.returncode == 1 and "--against" in r.stderr and "nope.jsonl: no such file" in r.stderr
    r = neardup("dedup", str(train), "-o", str(out), "--against", str(tmp_path / "x.bin"))
    assert r.returncode == 1
    raw = tmp_path / "raw-idx"
    assert neardup("index", "build", str(raw), str(train), "--raw").returncode == 0
    r = neardup("dedup", str(train), "-o", str(out), "--against", str(raw))
    assert r.returncode == 1 and "holds fingerprints only" in r.stderr
    assert "build a new directory" in r.stderr
    r = neardup("dedup", str(train), "-o", str(ref_path), "--against", str(ref_path))
    assert r.returncode == 2 and "both an input and an output" in r.stderr
    r = neardup("dedup", str(train), "-o", str(out), "--against", str(ref_path))
    assert r.returncode == 1 and "--against" in r.stderr and "eval.jsonl:1" in r.stderr
    assert not out.exists()
    # --on-error skip: a skipped reference is said; a reference file of which no record can be
    # read (a misspelt --against-text-field) is an error, not a silent run against nothing
    (tmp_path / "refs.jsonl").write_text('{"q": "a reference"}\n{"text": "good ref"}\n')
    r = neardup("dedup", str(train), "-o", str(out), "--against", str(tmp_path / "refs.jsonl"),
                "--on-error", "skip")  # fmt: skip
    assert r.returncode == 0 and "skipped --against" in r.stderr and "refs.jsonl:1" in r.stderr
    r = neardup("dedup", str(train), "-o", str(out), "--against", str(tmp_path / "refs.jsonl"),
                "--on-error", "skip", "--against-text-field", "questoin", "-q")  # fmt: skip
    assert r.returncode == 1 and "none of its 2 records could be read" in r.stderr


def test_index_query_verifies_and_names_ids_without_echoing_the_text(
    tmp_path: Path, files: tuple[Path, Path, list[str], list[str]]
) -> None:
    ref_path, train, refs, corpus = files
    idx = tmp_path / "evals"
    _build(idx, ref_path)
    d = Deduplicator()
    d.add_many([f"q{i}" for i in range(len(refs))], refs)

    long = next(i for i, t in enumerate(refs) if len(t) >= 400)
    text = near_copy(refs[long], 99)
    r = neardup("index", "query", str(idx), "--text", text)
    assert r.returncode == 0, r.stderr
    (result,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert text not in r.stdout and "query" not in result
    assert [(m["id"], m["distance"]) for m in result["matches"]] == [
        (m.id, m.distance) for m in d.check(text)
    ]
    assert result["matches"][0]["id"] == f"q{long}" and result["matches"][0]["similarity"] >= 0.8

    hits = tmp_path / "hits.jsonl"
    r = neardup("index", "query", str(idx), str(train), "-o", str(hits))
    assert r.returncode == 0, r.stderr
    got = _read(hits)
    assert [x["query"] for x in got] == list(range(len(corpus)))
    for x, want in zip(got, d.check_many(corpus)):
        assert [(m["id"], m["similarity"]) for m in x["matches"]] == [
            (m.id, round(m.similarity or 0, 6)) for m in want
        ]
    # with --k: the stored documents within k bits, verified (never one that fails)
    r = neardup("index", "query", str(idx), "--text", text, "--k", "20")
    (result,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert [m["id"] for m in result["matches"]] == [m.id for m in d.check(text, k=20)]
    assert all(m["similarity"] >= 0.8 and m["distance"] <= 20 for m in result["matches"])


def test_stored_texts_without_fingerprints_are_fingerprinted_on_reading_not_written(
    tmp_path: Path, files: tuple[Path, Path, list[str], list[str]]
) -> None:
    """A reference directory whose store holds rows without fingerprints (written before the
    store kept them) answers as it did with them: their texts are fingerprinted as they are
    read, and the read-only store is not written."""
    import sqlite3

    ref_path, train, refs, _ = files
    idx = tmp_path / "evals"
    _build(idx, ref_path)
    stored = neardup("index", "query", str(idx), "--text", refs[3], "-q")
    assert stored.returncode == 0, stored.stderr
    fp = json.loads(stored.stdout)["fingerprint"]
    queries = [("--fingerprint", fp, "--k", "10"), (str(train),)]
    want = [neardup("index", "query", str(idx), *q, "-q").stdout for q in queries]
    assert any(m["id"] == "q3" for m in json.loads(want[0])["matches"])
    db = sqlite3.connect(idx / "texts.sqlite")
    db.execute("UPDATE texts SET fp = NULL")
    db.commit()
    db.close()
    before = (idx / "texts.sqlite").read_bytes()
    for q, expect in zip(queries, want):
        r = neardup("index", "query", str(idx), *q, "-q")
        assert r.returncode == 0, r.stderr
        assert r.stdout == expect
    assert (idx / "texts.sqlite").read_bytes() == before
    db = sqlite3.connect(idx / "texts.sqlite")
    assert db.execute("SELECT COUNT(*) FROM texts WHERE fp IS NOT NULL").fetchone() == (0,)
    db.close()


def test_a_directory_of_an_earlier_version_still_answers_unverified(
    tmp_path: Path, files: tuple[Path, Path, list[str], list[str]]
) -> None:
    ref_path, train, refs, _ = files
    idx = tmp_path / "old"
    _build(idx, ref_path)
    # what `index build` wrote before texts were stored: the fingerprints and the settings
    (idx / "texts.sqlite").unlink()
    settings = json.loads((idx / "neardup-cli.json").read_text("utf-8"))
    del settings["texts"]
    (idx / "neardup-cli.json").write_text(json.dumps(settings), "utf-8")
    r = neardup("index", "query", str(idx), "--text", refs[0])
    assert r.returncode == 0 and "holds fingerprints only" in r.stderr
    (result,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert {"id": "q0", "distance": 0, "similarity": None} in result["matches"]
    r = neardup("index", "build", str(idx), str(ref_path), "--text-field", "question")
    assert r.returncode == 0 and "was built without its texts" in r.stderr
    r = neardup("dedup", str(train), "-o", str(tmp_path / "o.jsonl"), "--against", str(idx))
    assert r.returncode == 1 and "holds fingerprints only" in r.stderr
    assert "build a new directory" in r.stderr


def test_a_read_only_reference_directory_is_read_as_it_is(
    tmp_path: Path, sample: list[dict[str, Any]]
) -> None:
    refs, corpus = _corpus(sample)
    ref_file, corpus_file = tmp_path / "refs.jsonl", tmp_path / "corpus.jsonl"
    ref_file.write_text("".join(json.dumps({"text": t}) + "\n" for t in refs), "utf-8")
    corpus_file.write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus), "utf-8")
    ref_dir = tmp_path / "ref-dir"
    assert neardup("index", "build", str(ref_dir), str(ref_file), "-q").returncode == 0
    # what the commands answer with the directory writable
    expect = tmp_path / "expect.jsonl"
    r = neardup("dedup", str(corpus_file), "-o", str(expect), "--against", str(ref_dir))
    assert r.returncode == 0, r.stderr
    queries = neardup("index", "query", str(ref_dir), str(corpus_file), "-q")
    near = neardup("index", "query", str(ref_dir), str(corpus_file), "--k", "4", "-q")
    assert queries.returncode == 0 and near.returncode == 0
    before = {p.name: p.read_bytes() for p in ref_dir.iterdir()}
    out = tmp_path / "out"
    out.mkdir()
    for p in [*ref_dir.iterdir(), ref_dir]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        kept = out / "kept.jsonl"
        r = neardup(
            "dedup", str(corpus_file), "-o", str(kept), "--against", str(ref_dir), unprivileged=True
        )
        assert r.returncode == 0, r.stderr
        assert kept.read_bytes() == expect.read_bytes()
        r = neardup("index", "query", str(ref_dir), str(corpus_file), "-q", unprivileged=True)
        assert r.returncode == 0, r.stderr
        assert r.stdout == queries.stdout
        r = neardup(
            "index", "query", str(ref_dir), str(corpus_file), "--k", "4", "-q", unprivileged=True
        )
        assert r.returncode == 0 and r.stdout == near.stdout
    finally:
        ref_dir.chmod(0o755)
        for p in ref_dir.iterdir():
            p.chmod(0o644)
    assert {p.name: p.read_bytes() for p in ref_dir.iterdir()} == before


def test_an_index_directory_is_read_through_the_read_only_text_store(tmp_path: Path) -> None:
    """``_read`` of an index directory (what ``--against`` and the Spark job read) opens its
    store read-only: it sees the rows a writer still holding the store has committed (in the
    write-ahead log, not yet in the database file), writes nothing, and a missing or damaged
    store is a ReferenceInputError naming the directory."""
    import argparse

    from neardup import io as nio
    from neardup.cli._against import (
        ReferenceInputError,
        _read,
        add_references,
        open_references,
        reference_store,
    )
    from neardup.textstore import ReadOnlyTextStoreError, SqliteTextStore

    idx = tmp_path / "idx"
    _build(idx, _jsonl(tmp_path / "r.jsonl", [{"qid": "r0", "question": words(1)}]))
    writer = SqliteTextStore(idx / "texts.sqlite")
    writer.put_many([("r1", words(2), None), (7, words(3), None)])  # (held open: in the log)
    (ref,) = open_references([str(idx)], None)
    spec = nio.FieldSpec("text", None, None)
    assert list(_read(ref, spec, "fail", True)) == [
        ("r0", words(1)),
        ("r1", words(2)),
        (7, words(3)),
    ]
    store = reference_store(str(idx))
    try:
        assert store.read_only and store.last_seq == 3
        with pytest.raises(ReadOnlyTextStoreError, match="texts.sqlite"):
            store.put("x", "y")
    finally:
        store.close()
    writer.close()
    # (the saved engine of the build no longer matches the store: the texts are read instead)
    d = CorpusDeduper()
    args = argparse.Namespace(
        against_text_field=None, text_field="text", against_id_field=None, on_error="fail"
    )
    assert add_references(d, [ref], args) == ["r0", "r1", 7] and d.references == 3
    before = {
        p.name: p.read_bytes() for p in idx.iterdir() if not p.name.endswith(("-shm", "-wal"))
    }
    assert list(_read(ref, spec, "fail", True))[0] == ("r0", words(1))
    after = {p.name: p.read_bytes() for p in idx.iterdir() if not p.name.endswith(("-shm", "-wal"))}
    assert after == before
    (idx / "texts.sqlite").write_bytes(b"damaged " * 1024)
    with pytest.raises(ReferenceInputError, match=f"--against {idx}: text store .* cannot be read"):
        list(_read(ref, spec, "fail", True))
