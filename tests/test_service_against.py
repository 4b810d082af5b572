"""``neardup serve --against DIR``: near-copies of a reference are its duplicates and are not
stored; the references are read-only (never added to, never counted, never expired)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from _helpers import near_copy, neardup, words
from test_service_harness import ServerProcess


def _references(tmp_path: Path) -> tuple[Path, list[str]]:
    refs = [words(100 + i) for i in range(30)]
    src = tmp_path / "eval.jsonl"
    src.write_text(
        "".join(json.dumps({"id": f"eval:{i}", "text": t}) + "\n" for i, t in enumerate(refs))
    )
    idx = tmp_path / "evals"
    r = neardup("index", "build", str(idx), str(src))
    assert r.returncode == 0, r.stderr
    return idx, refs


def test_near_copies_of_references_are_their_duplicates(tmp_path: Path) -> None:
    idx, refs = _references(tmp_path)
    before = sorted(p.name for p in idx.iterdir())
    with ServerProcess(tmp_path / "store", "--against", str(idx)) as srv:
        post = lambda route, body: httpx.post(srv.url + route, json=body, timeout=30).json()  # noqa: E731
        copy = near_copy(refs[4], 1)
        r = post("/v1/check-and-add", {"id": "doc-1", "text": copy})
        assert r["added"] is False and [d["id"] for d in r["duplicates"]] == ["eval:4"]
        assert r["duplicates"][0]["similarity"] >= 0.8
        r = post("/v1/check-and-add", {"id": "doc-2", "text": words(7)})
        assert r["added"] is True and r["duplicates"] == []
        # a check lists the reference and the stored documents alike
        r = post("/v1/check", {"text": near_copy(words(7), 2)})
        assert [d["id"] for d in r["duplicates"]] == ["doc-2"]
        r = post("/v1/check", {"text": refs[9]})
        assert [d["id"] for d in r["duplicates"]] == ["eval:9"]
        # batches: the references' copies are answered, the rest go to the store in one call
        items = [
            {"id": "b-0", "text": near_copy(refs[0], 3)},
            {"id": "b-1", "text": words(8)},
            {"id": "b-2", "text": near_copy(words(8), 4)},
        ]
        r = post("/v1/check-and-add/batch", {"items": items})
        got = [(x["added"], [d["id"] for d in x["duplicates"]]) for x in r["results"]]
        assert got == [(False, ["eval:0"]), (True, []), (False, ["b-1"])]
        stats = httpx.get(srv.url + "/v1/stats").json()
        assert stats["count"] == 2  # doc-2 and b-1: no reference is a stored document
    assert sorted(p.name for p in idx.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        x for x in before if not x.endswith(("-wal", "-shm"))
    ]


def test_a_directory_without_texts_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "eval.jsonl"
    src.write_text(json.dumps({"id": 1, "text": words(1)}) + "\n")
    raw = tmp_path / "raw"
    assert neardup("index", "build", str(raw), str(src), "--raw").returncode == 0
    r = neardup("serve", "--data", str(tmp_path / "store"), "--port", "0", "--against", str(raw))
    assert r.returncode == 2 and "not a reference directory with stored texts" in r.stderr


def test_near_pairs_list_a_reference_that_shares_the_id(tmp_path: Path) -> None:
    # GET /v1/near/{id} leaves out the document itself, not a reference of the same id.
    idx, refs = _references(tmp_path)
    with ServerProcess(tmp_path / "store", "--against", str(idx)) as srv:
        for doc_id, text in (("eval:4", near_copy(refs[4], 1)), ("other", refs[4])):
            r = httpx.post(srv.url + "/v1/add", json={"id": doc_id, "text": text}, timeout=30)
            assert r.status_code == 200, r.text
        near = httpx.get(srv.url + "/v1/near/eval:4", timeout=30).json()["near"]
        assert sorted(d["id"] for d in near) == ["eval:4", "other"]
        assert all(d["similarity"] >= 0.8 for d in near)
        near = httpx.get(srv.url + "/v1/near/other", timeout=30).json()["near"]
        assert sorted(d["id"] for d in near) == ["eval:4", "eval:4"]  # the reference and the doc


def _files(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


def _read_only(directory: Path, read_only: bool) -> None:
    for p in [*directory.iterdir(), directory]:
        p.chmod((0o555 if p.is_dir() else 0o444) if read_only else (0o755 if p.is_dir() else 0o644))


def test_the_references_are_loaded_read_only_and_left_as_they_are(tmp_path: Path) -> None:
    from neardup.dedup import Policy
    from neardup.service.references import load_references
    from neardup.textstore import ReadOnlyTextStoreError, SqliteTextStore

    idx, refs = _references(tmp_path)
    before = _files(idx)
    loaded = load_references(str(idx), Policy.default())
    try:
        store = loaded.store
        assert isinstance(store, SqliteTextStore) and store.read_only
        assert [m.id for m in loaded.check(near_copy(refs[3], 1))] == ["eval:3"]
        assert [m.id for m in loaded.check(refs[5], k=6)][0] == "eval:5"
        with pytest.raises(ReadOnlyTextStoreError):
            loaded.add("x", words(1))
        assert len(loaded) == len(refs)
    finally:
        loaded.close()
    after = _files(idx)
    assert {n: after[n] for n in before} == before  # (SQLite may add its -shm/-wal side files)
    assert set(after) - set(before) <= {"texts.sqlite-shm", "texts.sqlite-wal"}


def test_serve_against_a_directory_that_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference directory read-only (a read-only disk, another user's): the server
    starts, answers from it, and leaves every file of it as it was."""
    import os
    import shutil
    import signal
    import sys

    idx, refs = _references(tmp_path)
    if os.geteuid() == 0:
        # as root: the server runs without the capability to override file permissions
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: a read-only directory is writable")
        wrapper = tmp_path / "python-cannot-write"
        wrapper.write_text(
            f"#!/bin/sh\nexec {setpriv} --bounding-set -dac_override,-dac_read_search -- "
            f'{sys.executable} "$@"\n'
        )
        wrapper.chmod(0o755)
        monkeypatch.setattr(sys, "executable", str(wrapper))
    before = _files(idx)
    _read_only(idx, True)
    try:
        with ServerProcess(tmp_path / "store", "--against", str(idx)) as srv:
            monkeypatch.undo()
            post = lambda route, body: httpx.post(srv.url + route, json=body, timeout=30).json()  # noqa: E731
            r = post("/v1/check-and-add", {"id": "doc-1", "text": near_copy(refs[2], 1)})
            assert r["added"] is False and [d["id"] for d in r["duplicates"]] == ["eval:2"]
            r = post("/v1/check-and-add", {"id": "doc-2", "text": refs[6] + " and more"})
            assert [d["id"] for d in r["duplicates"]] == ["eval:6"]
            r = post("/v1/check", {"text": refs[8], "k": 6})
            assert [d["id"] for d in r["duplicates"]] == ["eval:8"]
            r = post("/v1/add", {"id": "doc-3", "text": near_copy(refs[9], 5)})
            near = httpx.get(srv.url + "/v1/near/doc-3", timeout=30).json()["near"]
            assert [d["id"] for d in near] == ["eval:9"]
            assert srv.stop() in (0, -signal.SIGTERM)
    finally:
        _read_only(idx, False)
    assert _files(idx) == before
