"""``neardup serve --against DIR``: near-copies of a reference are its duplicates and are not
stored; the references are read-only (never added to, never counted, never expired)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
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
