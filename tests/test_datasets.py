"""Hugging Face datasets: ``neardup.integrations.datasets`` and ``neardup dedup`` over a
directory saved with ``save_to_disk``, with the real ``datasets`` package on local data."""

from __future__ import annotations

import doctest
import json
import os
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


def test_an_empty_dataset_gives_an_empty_one() -> None:
    empty = datasets.Dataset.from_dict({"text": []})  # (its column's type is null)
    assert nd.deduplicate(empty).num_rows == 0
    assert nd.deduplicate(empty, against=["a reference text"]).num_rows == 0


def test_bad_arguments_name_the_problem(ds: Any) -> None:
    with pytest.raises(ValueError, match="'body' is not a column of the dataset; its columns: id"):
        nd.deduplicate(ds, "body")
    with pytest.raises(ValueError, match="column 'n' holds .*int64.*, not strings"):
        nd.deduplicate(ds, "n")
    nulls = datasets.Dataset.from_dict({"text": ["a", "b", None]})
    with pytest.raises(ValueError, match="column 'text' is null at row 2"):
        nd.deduplicate(nulls)
    with pytest.raises(ValueError, match="column 'text' is null at row 0"):
        nd.deduplicate(datasets.Dataset.from_dict({"text": [None, None]}))
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


def _site_page(article: str, k: int) -> str:
    # a site's menu and footer, not marked as such by the markup: boilerplate is what many of
    # the corpus's pages share
    menu = "".join(f"<div>Section {j} of the courier, news and more</div>" for j in range(12))
    footer = "<div>Copyright the courier company, all rights reserved, since 1999</div>"
    return (
        f"<html><body>{menu}<div><p>{article}</p></div>"
        f"<div>Related story {k} on the courier</div>{footer}</body></html>"
    )


def test_cli_prepares_saved_datasets_as_files_and_names_rows_by_their_id_column(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    # A saved dataset of pages goes through the preparation of file inputs (the corpus's
    # boilerplate learnt first, the references prepared with it), and its `id` column names its
    # rows (as a file's `id` field does) without --id-field / --against-id-field.
    articles = [r["text"] for r in rows if len(r["text"]) > 150 and "<" not in r["text"]][:40]
    corpus = [{"id": f"page-{i}", "text": _site_page(a, i)} for i, a in enumerate(articles)]
    refs = [{"id": f"ref-{i}", "text": _site_page(articles[i], 100 + i)} for i in (5, 12)] + [
        {"id": "ref-x", "text": _site_page("an unrelated reference about tides", 99)}
    ]
    datasets.Dataset.from_list(corpus).save_to_disk(str(tmp_path / "corpus"))
    datasets.Dataset.from_list(refs).save_to_disk(str(tmp_path / "refs"))
    for name, records in (("corpus", corpus), ("refs", refs)):
        with open(tmp_path / f"{name}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)

    files = tmp_path / "files-clusters.jsonl"
    r = neardup("dedup", str(tmp_path / "corpus.jsonl"), "-o", str(tmp_path / "kept.jsonl"),
                "--against", str(tmp_path / "refs.jsonl"), "--clusters", str(files))  # fmt: skip
    assert r.returncode == 0, r.stderr
    kept_ids = [json.loads(x)["id"] for x in open(tmp_path / "kept.jsonl", encoding="utf-8")]
    by_file = [json.loads(x) for x in files.read_text("utf-8").splitlines()]
    assert {"id": "page-5", "cluster": "ref-5"}.items() <= by_file[0].items()
    assert len(kept_ids) == len(corpus) - 2

    clusters = tmp_path / "ds-clusters.jsonl"
    for against in (tmp_path / "refs", tmp_path / "refs.jsonl"):
        out = tmp_path / f"out-{against.name}"
        r = neardup("dedup", str(tmp_path / "corpus"), "-o", str(out), "--against",
                    str(against), "--clusters", str(clusters))  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert datasets.load_from_disk(str(out))["id"] == kept_ids
        assert [json.loads(x) for x in clusters.read_text("utf-8").splitlines()] == by_file
    # the library call prepares a dataset of pages the same way (boilerplate learnt first)
    kept_ds = nd.deduplicate(datasets.load_from_disk(str(tmp_path / "corpus")),
                             against=datasets.load_from_disk(str(tmp_path / "refs")))  # fmt: skip
    assert kept_ds["id"] == kept_ids
    # and a dataset reference beside a file corpus
    r = neardup("dedup", str(tmp_path / "corpus.jsonl"), "-o", str(tmp_path / "k2.jsonl"),
                "--against", str(tmp_path / "refs"), "--clusters", str(clusters))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in clusters.read_text("utf-8").splitlines()] == by_file


def test_cli_starts_again_on_pages_past_the_rows_probed_as_for_files(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    """(a saved dataset probed its first 1,024 rows for pages and prepared later pages with what
    their chunk of 16,384 rows taught: with a site's pages split over two chunks, a copy on two
    sites, found in a file, was kept twice)"""
    from _helpers import words as some_words

    def other_site(article: str, k: int) -> str:  # (another menu and footer)
        menu = "".join(f"<div>Menu item {j} of the gazette online</div>" for j in range(12))
        footer = "<div>The gazette, a newspaper of the valley, founded 1887</div>"
        body = f"{menu}<div><p>{article}</p></div><div>More {k}</div>{footer}"
        return f"<html><body>{body}</body></html>"

    articles = [r["text"] for r in rows if len(r["text"]) > 400 and "<" not in r["text"]][:30]
    order = [9, 0, 1, 2, 4] + [i for i in range(30) if i not in (9, 0, 1, 2, 4)]
    pages = [{"id": f"page-{i}", "text": _site_page(articles[i], i)} for i in order]
    pages += [{"id": f"own-{i}", "text": other_site(a[::-1], i)} for i, a in enumerate(articles)]
    pages.append({"id": "again-9", "text": other_site(articles[9], 509)})
    # (five of the courier's pages end the first chunk: too few to tell its menu there)
    plain = [{"id": f"p{i}", "text": f"note {i} " + some_words(i, n=6)} for i in range(16384 - 5)]
    records = plain + pages
    datasets.Dataset.from_list(records).save_to_disk(str(tmp_path / "corpus"))
    with open(tmp_path / "corpus.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    r = neardup("dedup", str(tmp_path / "corpus.jsonl"), "-o", str(tmp_path / "kept.jsonl"))
    assert r.returncode == 0 and "the corpus is read again" in r.stderr, r.stderr
    by_file = [json.loads(x)["id"] for x in open(tmp_path / "kept.jsonl", encoding="utf-8")]
    assert "again-9" not in by_file  # (found a copy of page-9 once the menus are left out)
    r = neardup("dedup", str(tmp_path / "corpus"), "-o", str(tmp_path / "out"))
    assert r.returncode == 0 and "the corpus is read again" in r.stderr, r.stderr
    assert datasets.load_from_disk(str(tmp_path / "out"))["id"] == by_file
    assert nd.deduplicate(datasets.load_from_disk(str(tmp_path / "corpus")))["id"] == by_file


def test_cli_quiet_silences_the_progress_bars_of_datasets(tmp_path: Path, ds: Any) -> None:
    ds.save_to_disk(str(tmp_path / "src"))
    ds.select(range(10)).save_to_disk(str(tmp_path / "refs"))
    r = neardup("dedup", str(tmp_path / "src"), "-o", str(tmp_path / "out"), "-q",
                "--against", str(tmp_path / "refs"))  # fmt: skip
    assert r.returncode == 0 and r.stderr == ""
    r = neardup("dedup", str(tmp_path / "src"), "-o", str(tmp_path / "out2"))
    assert r.returncode == 0 and "neardup dedup: read 800 rows" in r.stderr


_FOX = "the quick brown fox jumps over the lazy dog near the river bank every single morning"


def test_cli_checks_the_output_paths_of_a_saved_dataset_before_any_work(tmp_path: Path) -> None:
    # as a file input's: an output inside the input (its state.json overwritten), in a missing
    # directory, on a directory, or on -o are refused (exit 2) before -o is written; a write
    # that fails all the same is an input error (exit 1) naming the output, not a traceback
    src, out = tmp_path / "src", tmp_path / "out"
    datasets.Dataset.from_dict({"text": [_FOX] * 3}).save_to_disk(str(src))
    state = (src / "state.json").read_bytes()
    (tmp_path / "adir").mkdir()
    for clusters, says in (
        (src / "state.json", f"--clusters {src / 'state.json'} is inside the input {src}"),
        (tmp_path / "nodir" / "c.jsonl", f"no directory {tmp_path / 'nodir'}"),
        (tmp_path / "adir", f"--clusters {tmp_path / 'adir'} is a directory, not a file"),
        (out, f"-o and --clusters are both {out}"),
    ):
        r = neardup("dedup", str(src), "-o", str(out), "--clusters", str(clusters))
        assert r.returncode == 2 and says in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and not out.exists()
    r = neardup("dedup", str(src), "-o", str(src / "kept"))
    assert r.returncode == 2 and f"-o {src / 'kept'} is inside the input {src}" in r.stderr
    (tmp_path / "afile").write_text("x")
    r = neardup("dedup", str(src), "-o", str(tmp_path / "afile" / "kept"))
    assert r.returncode == 2 and f"{tmp_path / 'afile'} is not a directory" in r.stderr
    assert (src / "state.json").read_bytes() == state
    assert datasets.load_from_disk(str(src)).num_rows == 3
    if os.path.exists("/dev/full"):  # (written in place: ENOSPC once written)
        r = neardup("dedup", str(src), "-o", str(out), "--clusters", "/dev/full")
        assert r.returncode == 1 and "neardup dedup: --clusters /dev/full: " in r.stderr
        assert "Traceback" not in r.stderr


def test_cli_writes_a_saved_dataset_of_no_row_that_loads(tmp_path: Path) -> None:
    # every row a near-copy of a reference: the output is a dataset of no row, with the input's
    # columns, that load_from_disk opens (save_to_disk writes no data file for one by itself)
    src, kept = tmp_path / "src", tmp_path / "kept"
    features = datasets.Features({"text": datasets.Value("string"), "n": datasets.Value("int64")})
    two = datasets.Dataset.from_dict({"text": [_FOX, _FOX + "!"], "n": [1, 2]}, features=features)
    two.save_to_disk(str(src))
    (tmp_path / "ref.jsonl").write_text(json.dumps({"id": "r1", "text": _FOX}) + "\n")
    r = neardup("dedup", str(src), "-o", str(kept), "--against", str(tmp_path / "ref.jsonl"))
    assert r.returncode == 0 and "kept 0," in r.stderr, r.stderr
    empty = datasets.load_from_disk(str(kept))
    assert empty.num_rows == 0 and empty.features == features
    r = neardup("dedup", str(kept), "-o", str(tmp_path / "kept2"))
    assert r.returncode == 0 and "read 0 rows" in r.stderr, r.stderr
    assert datasets.load_from_disk(str(tmp_path / "kept2")).num_rows == 0
    r = neardup("dedup", str(tmp_path / "ref.jsonl"), "-o", os.devnull, "--against", str(kept))
    assert r.returncode == 0, r.stderr


def test_cli_names_a_saved_dataset_that_load_from_disk_cannot_open(tmp_path: Path) -> None:
    # a dataset of no row saved without a data file (as datasets does by itself), or one whose
    # data file is gone: an input error (exit 1) naming the directory, as input and as --against
    zero, gone = tmp_path / "zero", tmp_path / "gone"
    ds = datasets.Dataset.from_dict({"text": [_FOX]})
    ds.select([]).save_to_disk(str(zero))
    assert not list(zero.glob("*.arrow"))
    ds.save_to_disk(str(gone))
    for f in gone.glob("*.arrow"):
        f.unlink()
    (tmp_path / "ref.jsonl").write_text(json.dumps({"text": _FOX}) + "\n")
    for path, says in ((zero, "its state.json lists no data file"), (gone, "FileNotFoundError")):
        r = neardup("dedup", str(path), "-o", str(tmp_path / "out"))
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"neardup dedup: {path}: datasets.load_from_disk cannot open it" in r.stderr
        assert says in r.stderr and not (tmp_path / "out").exists()
        r = neardup("dedup", str(tmp_path / "ref.jsonl"), "-o", os.devnull, "--against", str(path))
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"neardup dedup: --against {path}: datasets.load_from_disk cannot" in r.stderr


def test_cli_refuses_a_saved_dataset_dict_naming_a_split(tmp_path: Path) -> None:
    dd = tmp_path / "dd"
    one = datasets.Dataset.from_dict({"text": [_FOX]})
    datasets.DatasetDict({"train": one, "test": one}).save_to_disk(str(dd))
    r = neardup("dedup", str(dd), "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"{dd} is a DatasetDict saved with save_to_disk (splits: train, test)" in r.stderr
    assert f"give one split's directory, e.g. {dd / 'train'}" in r.stderr
    assert not (tmp_path / "out").exists()
    r = neardup("dedup", str(dd / "train"), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": _FOX}) + "\n")
    r = neardup("dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--against", str(dd))
    assert r.returncode == 1 and f"--against {dd} is a DatasetDict saved" in r.stderr, r.stderr


def test_cli_on_error_skip_leaves_out_the_null_rows_of_a_saved_dataset(tmp_path: Path) -> None:
    # a null text is a bad record, as in a file: exit 1 naming DIR:ROW, or with --on-error skip
    # left out and counted; --clusters names rows by their number in the dataset
    src = tmp_path / "src"
    texts = [_FOX, None, _FOX + "!", None, "another text"]
    datasets.Dataset.from_dict({"text": texts}).save_to_disk(str(src))
    r = neardup("dedup", str(src), "-o", str(tmp_path / "out"))
    assert r.returncode == 1 and f"{src}:1: field 'text' is null, expected a string" in r.stderr
    assert "(--on-error skip leaves bad records out" in r.stderr
    assert not (tmp_path / "out").exists()
    clusters = tmp_path / "c.jsonl"
    r = neardup("dedup", str(src), "-o", str(tmp_path / "out"), "--on-error", "skip",
                "--clusters", str(clusters))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"neardup dedup: skipped {src}:3: field 'text' is null" in r.stderr
    assert "read 3 rows (2 bad records skipped), kept 2," in r.stderr
    assert datasets.load_from_disk(str(tmp_path / "out"))["text"] == [_FOX, "another text"]
    got = [json.loads(x) for x in clusters.read_text("utf-8").splitlines()]
    assert [(x["id"], x["cluster"], x["kept"]) for x in got] == [(0, 0, True), (2, 0, False)]


def test_saved_references_skip_null_rows_under_on_error_skip(tmp_path: Path) -> None:
    # (what --against DIR reads: `_read` passes --on-error on to it)
    from neardup import io as nio
    from neardup.cli._against import ReferenceInputError, _saved

    refs = tmp_path / "refs"
    datasets.Dataset.from_dict({"text": [None, "first", None, "second"]}).save_to_disk(str(refs))
    spec = nio.FieldSpec("text", None, None)
    got = list(_saved(str(refs), spec, True, "skip"))
    assert got == [(f"{refs}:1", "first"), (f"{refs}:3", "second")]
    with pytest.raises(ReferenceInputError, match="'text' is null at row 0"):
        list(_saved(str(refs), spec, True))
    nulls = tmp_path / "nulls"
    datasets.Dataset.from_dict({"text": [None, None]}).save_to_disk(str(nulls))
    with pytest.raises(ReferenceInputError, match="none of its 2 rows could be read"):
        list(_saved(str(nulls), spec, True, "skip"))
