"""``GET /v1/near/{id}``: the near pairs of a stored document on a real server, against what the
in-process Deduplicator's check of its text answers (issue 24, item 4)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from _helpers import near_copy, words
from neardup import Client
from neardup.client import NotFoundError
from neardup.dedup import Deduplicator
from test_service_harness import ServerProcess, post


def test_near_pairs_of_an_id(tmp_path: Path) -> None:
    base = words(300, n=70)
    docs: list[tuple[int | str, str]] = [
        ("base", base),
        ("copy-1", near_copy(base, 1)),
        ("copy-2", near_copy(near_copy(base, 2), 3)),
        ("exact", base),
        ("other", words(301, n=70)),
        (77, near_copy(base, 4)),
    ]
    reference = Deduplicator()
    with ServerProcess(tmp_path / "store", "--retention", "none") as srv:
        for doc_id, text in docs:
            r = post(srv.url + "/v1/add", {"id": doc_id, "text": text})
            assert r.status_code == 200, r.text
            reference.add(doc_id, text)

        r = httpx.get(f"{srv.url}/v1/near/base")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["id"] == "base"
        expected = [m for m in reference.check(base) if m.id != "base"]
        assert {m.id for m in expected} == {"copy-1", "copy-2", "exact", 77}
        assert [d["id"] for d in body["near"]] == [m.id for m in expected]
        for got, want in zip(body["near"], expected):
            assert got["distance"] == want.distance
            assert got["similarity"] == pytest.approx(want.similarity)
            assert got["similarity"] >= 0.8
        assert body["near"][0] == {"id": "exact", "distance": 0, "similarity": 1.0}

        # an unrelated document has no near pair; an int id is found by id_type
        assert httpx.get(f"{srv.url}/v1/near/other").json() == {"id": "other", "near": []}
        r = httpx.get(f"{srv.url}/v1/near/77?id_type=int")
        assert r.json()["id"] == 77 and "base" in {d["id"] for d in r.json()["near"]}

        r = httpx.get(f"{srv.url}/v1/near/missing")
        assert r.status_code == 404
        assert r.json()["error"] == {
            "code": "not_found",
            "message": "no document with id 'missing'",
            "field": "id",
        }
        assert "/v1/near/{id}" in httpx.get(srv.url + "/openapi.json").json()["paths"]

        client = Client(srv.url)
        assert "base" in {m.id for m in client.near("copy-1")}
        assert {m.id for m in client.near(77)} >= {"base", "exact"}
        with pytest.raises(NotFoundError):
            client.near("missing")
        # a removed document has no near pairs and is no one's
        client.remove("exact")
        assert "exact" not in {m.id for m in client.near("base")}
        with pytest.raises(KeyError):
            client.near("exact")


def test_near_pairs_are_one_code_path_with_or_without_references() -> None:
    """``neardup.service.backend.near_of``, what GET /v1/near answers for every backend: the
    store's matches of the text but the document itself (the one filter), and, with a
    reference set (``serve --against``), every reference the text is a near-copy of, one that
    shares the document's id included (a reference is never the stored document)."""
    from neardup.service.backend import near_of
    from neardup.service.references import WithReferences

    base = words(400, n=70)
    store = Deduplicator()
    store.add_many(["base", "copy", "other"], [base, near_copy(base, 1), words(401, n=70)])
    plain = near_of(store, "base", base)
    assert [m.id for m in plain] == [m.id for m in store.check(base) if m.id != "base"]
    assert [m.id for m in plain] == ["copy"]
    # a document with no near-copy but itself has no near pair
    assert near_of(store, "other", words(401, n=70)) == []

    refs = Deduplicator()
    refs.add_many(["base", "ref-2"], [near_copy(base, 2), near_copy(base, 3)])
    both = WithReferences(store, refs)
    got = near_of(both, "base", base)
    assert sorted(map(str, (m.id for m in got))) == [
        "base",
        "copy",
        "ref-2",
    ]  # ("base": the reference)
    assert [m.similarity for m in got] == sorted((m.similarity for m in got), reverse=True)
    # (the references' matches are kept whole; the store's lose the document only)
    assert {m.id for m in got} - {m.id for m in refs.check(base)} == {"copy"}
