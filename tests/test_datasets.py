"""Hugging Face datasets: ``neardup.integrations.datasets`` and ``neardup dedup`` over a
directory saved with ``save_to_disk``, with the real ``datasets`` package on local data."""

from __future__ import annotations

import doctest
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import SAMPLE, near_copy, neardup
from neardup.corpus import CorpusDeduper

datasets = pytest.importorskip("datasets")
from neardup.integrations import datasets as nd  # noqa: E402


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for line in f][:800]


@pytest.fixture(scope="module")
def ds(rows: list[dict[str, Any]]) -> Any:
    return datasets.Dataset.from_list(
        [{"id": r["id"], "text": r["text"], "n": i} for i, r in enumerate(rows)]
    )


def _decision(texts: list[str], refs: list[str] | None = None, order: Any = None) -> Any:
    d = CorpusDeduper()
    if refs:
        d.add_references(refs)
    d.feed(texts)
    return d.result(order)


def test_the_docstring_runs() -> None:
    assert doctest.testmod(nd).failed == 0


def test_a_dataset_keeps_the_rows_of_the_decision_without_copying(ds: Any) -> None:
    texts = ds["text"]
    expect = _decision(texts).kept
    assert 0 < expect.sum() < len(texts)
    out = nd.deduplicate(ds)
    assert isinstance(out, datasets.Dataset)
    assert out["n"] == np.flatnonzero(expect).tolist() and out.column_names == ds.column_names

    # zero-copy: the result is an indices mapping over the very same Arrow buffers
    def address(d: Any) -> int:
        return int(d.data.table.column("text").chunk(0).buffers()[2].address)

    assert address(out) == address(ds)
    # keep="longest": the longest of each group stays
    lengths = np.array([len(t) for t in texts])
    order = np.lexsort((np.arange(len(texts)), -lengths))
    longest = nd.deduplicate(ds, keep="longest")
    assert longest["n"] == np.flatnonzero(_decision(texts, order=order).kept).tolist()


def test_an_iterable_dataset_gives_the_same_rows(ds: Any) -> None:
    it = ds.to_iterable_dataset(num_shards=4)
    out = nd.deduplicate(it, batch_size=100)
    assert isinstance(out, datasets.IterableDataset)
    assert [r["n"] for r in out] == nd.deduplicate(ds)["n"]

    def generate() -> Any:
        for r in ds:
            yield {"body": r["text"], "n": r["n"]}

    gen = datasets.IterableDataset.from_generator(generate)
    assert [r["n"] for r in nd.deduplicate(gen, "body")] == nd.deduplicate(ds)["n"]


def test_against_a_reference_dataset(ds: Any) -> None:
    texts = ds["text"]
    refs = [near_copy(texts[i], i) for i in range(0, 400, 7)] + ["an unrelated reference"]
    ref_ds = datasets.Dataset.from_dict({"question": refs})
    expect = _decision(texts, refs)
    assert (expect.reference >= 0).sum() > 20
    out = nd.deduplicate(ds, against=ref_ds, against_column="question")
    assert out["n"] == np.flatnonzero(expect.kept).tolist()
    assert nd.deduplicate(ds, against=refs)["n"] == out["n"]  # (texts do as well)
    d = CorpusDeduper()
    assert nd.feed_references(d, ref_ds, "question") == len(refs)
    _, result = nd.deduplicate_with(d, ds)
    assert np.array_equal(result.reference, expect.reference)


def test_bad_arguments_name_the_problem(ds: Any) -> None:
    with pytest.raises(ValueError, match="'body' is not a column of the dataset; its columns: id"):
        nd.deduplicate(ds, "body")
    with pytest.raises(ValueError, match="column 'n' holds .*int64.*, not strings"):
        nd.deduplicate(ds, "n")
    nulls = datasets.Dataset.from_dict({"text": ["a", "b", None]})
    with pytest.raises(ValueError, match="column 'text' is null at row 2"):
        nd.deduplicate(nulls)
    with pytest.raises(ValueError, match="keep must be one of first, longest"):
        nd.deduplicate(ds, keep="newest")
    with pytest.raises(TypeError, match="a DatasetDict: pick a split"):
        nd.deduplicate(datasets.DatasetDict({"train": ds}))
    with pytest.raises(TypeError, match="against must be a datasets.Dataset"):
        nd.deduplicate(ds, against="one text")


def test_cli_reads_and_writes_saved_datasets(tmp_path: Path, ds: Any) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    ds.save_to_disk(str(src))
    refs = datasets.Dataset.from_dict(
        {"qid": ["q0", "q1"], "question": [ds[3]["text"], "an unrelated reference text"]}
    )
    refs.save_to_disk(str(tmp_path / "refs"))
    clusters = tmp_path / "cl.jsonl"
    r = neardup("dedup", str(src), "-o", str(out), "--clusters", str(clusters), "--id-field",
                "id", "--against", str(tmp_path / "refs"), "--against-text-field", "question",
                "--against-id-field", "qid")  # fmt: skip
    assert r.returncode == 0, r.stderr
    kept = datasets.load_from_disk(str(out))
    expect = nd.deduplicate(ds, against=refs, against_column="question")
    assert kept["n"] == expect["n"] and kept.column_names == ds.column_names
    lines = clusters.read_text("utf-8").splitlines()
    named = [x for x in map(json.loads, lines) if x.get("reference")]
    copy = {"id": ds[3]["id"], "cluster": "q0", "kept": False, "distance": 0, "reference": True}
    assert copy in named
    assert f"-> {out}" in r.stderr
    # errors before anything is written
    r = neardup("dedup", str(src), "-o", str(out))
    assert r.returncode == 2 and "exists; a saved dataset is written to a new" in r.stderr
    r = neardup("dedup", str(src), "-o", str(tmp_path / "o2"), "--report", "r.html")
    assert r.returncode == 2 and "--report does not apply to a saved dataset" in r.stderr
    r = neardup("dedup", str(src), "-o", str(tmp_path / "o2"), "--text-field", "body")
    assert r.returncode == 1 and "--text-field 'body' is not a column" in r.stderr
    assert not (tmp_path / "o2").exists()
