"""The whole HTTP API of ``neardup serve``, on a real server subprocess through a real HTTP client.

Every test runs twice: through the lean ASGI fast path (the default) and with ``--no-fast-path``
(every route through FastAPI); both must answer the same.
"""

from __future__ import annotations

import random
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from _helpers import near_copy, words
from neardup.dedup import Deduplicator
from test_service_harness import ServerProcess, post


@pytest.fixture(scope="module", params=["fast-path", "fastapi-only"])
def srv(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    extra = ["--no-fast-path"] if request.param == "fastapi-only" else []
    data = tmp_path_factory.mktemp("api")
    with ServerProcess(
        data / "store",
        "--retention",
        "none",
        "--max-text",
        "64k",
        "--max-body",
        "1MiB",
        "--max-batch",
        "500",
        *extra,
    ) as server:
        yield server


@pytest.fixture()
def url(srv: ServerProcess) -> Iterator[str]:
    yield srv.url
    # Whatever the test sent, the server is still up and healthy.
    assert srv.alive, "".join(srv.output)
    assert httpx.get(srv.url + "/healthz", timeout=10).json() == {"status": "ok"}


def uniq(prefix: str) -> str:
    return f"{prefix}-{random.getrandbits(40):x}"


def count(url: str) -> int:
    return int(httpx.get(url + "/v1/stats", timeout=30).json()["count"])


# -- the routes ------------------------------------------------------------------------------------


def test_healthz_docs_and_openapi(url: str) -> None:
    assert httpx.get(url + "/healthz").json() == {"status": "ok"}
    spec = httpx.get(url + "/openapi.json").json()
    for path in (
        "/v1/check",
        "/v1/add",
        "/v1/check-and-add",
        "/v1/check/batch",
        "/v1/add/batch",
        "/v1/check-and-add/batch",
        "/v1/documents/{id}",
        "/v1/stats",
        "/healthz",
        "/metrics",
    ):
        assert path in spec["paths"], path
    body_schema = spec["paths"]["/v1/check-and-add"]["post"]["requestBody"]["content"]
    ref = body_schema["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(spec["components"]["schemas"][ref]["properties"]) == {"id", "text", "timestamp"}
    docs = httpx.get(url + "/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    # offline: the page's scripts and styles come from this server, not a CDN
    assert "cdn." not in docs.text and "https://" not in docs.text
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        assert f"/docs/assets/{asset}" in docs.text
        r = httpx.get(f"{url}/docs/assets/{asset}")
        assert r.status_code == 200 and len(r.content) > 10_000, asset


def test_check_and_add_adds_once_and_reports_the_original(url: str) -> None:
    base, first = words(1), uniq("orig")
    r = post(url + "/v1/check-and-add", {"id": first, "text": base})
    assert r.status_code == 200
    assert r.json() == {"id": first, "added": True, "duplicates": []}

    copy = near_copy(base, 2)
    r = post(url + "/v1/check-and-add", {"id": uniq("copy"), "text": copy})
    body = r.json()
    assert body["added"] is False
    assert [d["id"] for d in body["duplicates"]] == [first]
    dup = body["duplicates"][0]
    assert 0 <= dup["distance"] <= 64 and 0.8 <= dup["similarity"] <= 1.0

    # the exact same text again: distance 0, similarity 1
    again = post(url + "/v1/check-and-add", {"id": uniq("again"), "text": base}).json()
    assert again["added"] is False
    assert again["duplicates"][0] == {"id": first, "distance": 0, "similarity": 1.0}

    # an unrelated text is added
    other = post(url + "/v1/check-and-add", {"id": uniq("other"), "text": words(3)}).json()
    assert other["added"] is True


def test_check_finds_without_adding(url: str) -> None:
    base, doc_id = words(10), uniq("c")
    before = count(url)
    assert post(url + "/v1/check", {"text": base}).json() == {"duplicates": []}
    assert count(url) == before, "check must not store anything"
    post(url + "/v1/add", {"id": doc_id, "text": base})
    found = post(url + "/v1/check", {"text": near_copy(base, 11)}).json()["duplicates"]
    assert [d["id"] for d in found] == [doc_id]
    # k bounds the Hamming radius: at k=0 only an identical fingerprint is a candidate
    assert post(url + "/v1/check", {"text": base, "k": 0}).json()["duplicates"][0]["id"] == doc_id
    if found[0]["distance"] > 0:
        assert post(url + "/v1/check", {"text": near_copy(base, 11), "k": 0}).json() == {
            "duplicates": []
        }


def test_add_returns_the_stored_item_and_replaces(url: str) -> None:
    doc_id = uniq("add")
    r = post(url + "/v1/add", {"id": doc_id, "text": words(20), "timestamp": 1_900_000_000.5})
    assert r.status_code == 200
    item = r.json()
    assert item["id"] == doc_id and item["timestamp"] == 1_900_000_000.5
    assert 0 <= item["fingerprint"] < 2**64
    assert item["fingerprint_hex"] == f"{item['fingerprint']:016x}"
    # a fingerprint query finds it at distance 0 (number, decimal string and hex string forms)
    for fp in (item["fingerprint"], str(item["fingerprint"]), "0x" + item["fingerprint_hex"]):
        hits = post(url + "/v1/check", {"fingerprint": fp, "k": 0}).json()["duplicates"]
        assert {"id": doc_id, "distance": 0, "similarity": None} in hits
    # fingerprint_hex sent back as fingerprint_hex (a hex of digits only was read as decimal)
    for hx in (item["fingerprint_hex"], "0123456789012345"):
        body = {"fingerprint_hex": hx, "k": 0}
        hits = post(url + "/v1/check", body).json()["duplicates"]
        assert ({"id": doc_id, "distance": 0, "similarity": None} in hits) == (
            hx == item["fingerprint_hex"]
        )
        fp = int(hx, 16)
        assert hits == post(url + "/v1/check", {"fingerprint": fp, "k": 0}).json()["duplicates"]
    # same id again: replaced, not duplicated
    n = count(url)
    post(url + "/v1/add", {"id": doc_id, "text": words(21)})
    assert count(url) == n
    assert httpx.get(f"{url}/v1/documents/{doc_id}").json()["text"] == words(21)


def test_documents_get_and_delete(url: str) -> None:
    text = "近似重复 " + words(30)
    for doc_id in (uniq("doc"), 987_654_321_012, "with/slash and spaces?&", "文档-" + uniq("")):
        post(url + "/v1/add", {"id": doc_id, "text": text})
        path = f"{url}/v1/documents/{quote(str(doc_id), safe='')}"
        got = httpx.get(path)
        assert got.status_code == 200, got.text
        assert got.json() == {"id": doc_id, "text": text}
        deleted = httpx.delete(path)
        assert deleted.json() == {"id": doc_id, "deleted": True}
        missing = httpx.get(path)
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "not_found"
        assert httpx.delete(path).status_code == 404


def test_ids_with_newlines_are_addressed_whole(url: str) -> None:
    """An id ending in or holding a newline is its own document: GET and DELETE of "x\\n" acted
    on "x" (the route's pattern stopped at the newline), and "x\\ny" could never be read."""
    base = uniq("nl")
    ids = [base, base + "\n", base + "\ny"]
    for i, doc_id in enumerate(ids):
        post(url + "/v1/add", {"id": doc_id, "text": words(50 + 5 * i, n=30)})
    for doc_id in ids:
        got = httpx.get(f"{url}/v1/documents/{quote(doc_id, safe='')}?id_type=str")
        assert got.status_code == 200 and got.json()["id"] == doc_id, got.text
        assert httpx.get(f"{url}/v1/near/{quote(doc_id, safe='')}").status_code == 200
    for doc_id in reversed(ids[1:]):
        deleted = httpx.delete(f"{url}/v1/documents/{quote(doc_id, safe='')}?id_type=str")
        assert deleted.json() == {"id": doc_id, "deleted": True}
    assert httpx.get(f"{url}/v1/documents/{base}").json()["id"] == base


def test_string_and_integer_ids_are_distinct(url: str) -> None:
    n = random.randrange(10**12, 10**13)
    post(url + "/v1/add", {"id": n, "text": words(40)})
    post(url + "/v1/add", {"id": str(n), "text": words(41)})
    assert httpx.get(f"{url}/v1/documents/{n}?id_type=int").json() == {"id": n, "text": words(40)}
    assert httpx.get(f"{url}/v1/documents/{n}?id_type=str").json()["text"] == words(41)
    # without id_type the string id wins, then the integer
    assert httpx.get(f"{url}/v1/documents/{n}").json()["id"] == str(n)
    httpx.delete(f"{url}/v1/documents/{n}?id_type=str")
    assert httpx.get(f"{url}/v1/documents/{n}").json()["id"] == n
    bad = httpx.get(f"{url}/v1/documents/abc?id_type=int")
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_id"


def test_batches_match_a_local_deduplicator_item_for_item(url: str) -> None:
    """The batch routes have the single routes' semantics, in order: the same answers as a
    local in-memory Deduplicator fed the same items (later items see earlier adds)."""
    tag = uniq("b")
    bases = [words(100 + i) + " " + tag for i in range(6)]
    texts = [
        bases[0],
        near_copy(bases[0], 1),
        bases[1],
        bases[2],
        near_copy(bases[2], 5),
        bases[0],
        bases[3],
        near_copy(bases[3], 9),
        bases[4],
        bases[5],
    ]
    ids = [f"{tag}-{i}" for i in range(len(texts))]
    r = post(
        url + "/v1/check-and-add/batch",
        {"items": [{"id": i, "text": t} for i, t in zip(ids, texts)]},
    )
    assert r.status_code == 200, r.text
    got = r.json()["results"]

    local = Deduplicator()
    expected = local.check_and_add_many(ids, texts)
    assert [x["id"] for x in got] == ids
    assert [x["added"] for x in got] == [added for added, _ in expected]
    assert [[d["id"] for d in x["duplicates"]] for x in got] == [
        [m.id for m in matches] for _, matches in expected
    ]
    assert [x["added"] for x in got] == [
        True,
        False,
        True,
        True,
        False,
        False,
        True,
        False,
        True,
        True,
    ]

    # check/batch: in order, one result per item, mixed with a fingerprint item
    fp = post(url + "/v1/add", {"id": f"{tag}-fp", "text": words(300)}).json()["fingerprint"]
    checks = post(
        url + "/v1/check/batch",
        {
            "items": [
                {"text": near_copy(bases[1], 3)},
                {"text": words(999)},
                {"fingerprint": fp, "k": 0},
                {"text": bases[4]},
            ]
        },
    ).json()["results"]
    assert [[d["id"] for d in c["duplicates"]] for c in checks] == [
        [ids[2]],
        [],
        [f"{tag}-fp"],
        [ids[8]],
    ]

    # add/batch: stored in order, fingerprints equal those of single adds
    add_ids = [f"{tag}-a{i}" for i in range(3)]
    added = post(
        url + "/v1/add/batch",
        {"items": [{"id": i, "text": words(400 + n)} for n, i in enumerate(add_ids)]},
    ).json()["results"]
    assert [a["id"] for a in added] == add_ids
    single = post(url + "/v1/add", {"id": f"{tag}-single", "text": words(401)}).json()
    assert added[1]["fingerprint"] == single["fingerprint"]

    # empty batches are fine
    for route in ("/v1/check/batch", "/v1/add/batch", "/v1/check-and-add/batch"):
        assert post(url + route, {"items": []}).json() == {"results": []}


def test_stats_and_metrics(url: str) -> None:
    post(url + "/v1/check-and-add", {"id": uniq("s"), "text": words(500)})
    post(url + "/v1/check", {"text": words(500)})
    stats = httpx.get(url + "/v1/stats").json()
    assert stats["count"] == stats["backend"]["documents"] >= 1
    assert stats["retention_seconds"] is None
    assert stats["memory"]["process_rss_bytes"] > 10_000_000
    assert stats["documents"]["added"] >= 1 and stats["documents"]["duplicate"] >= 1
    assert set(stats["rates"]) == {"requests_per_second", "documents_per_second", "window_seconds"}
    assert stats["policy"]["verifier"] == "jaccard"
    assert stats["writer"]["groups"] >= 1

    text = httpx.get(url + "/metrics").text
    assert httpx.get(url + "/metrics").headers["content-type"].startswith("text/plain")
    # every sample line is NAME{labels} VALUE or NAME VALUE, every metric has HELP and TYPE
    sample = re.compile(r'^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [0-9.e+-]+$')
    for line in text.splitlines():
        assert line.startswith("# ") or sample.match(line), line
    assert re.search(
        r'neardup_http_requests_total\{route="/v1/check-and-add",status="200"\} \d+', text
    )
    assert f"neardup_documents_stored {float(count(url))}" in text
    assert 'neardup_http_request_duration_seconds_bucket{route="/v1/check",le="+Inf"}' in text


def test_page_is_served(url: str) -> None:
    page = httpx.get(url + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="text"' in page.text and "/v1/check" in page.text
    assert "http://" not in page.text and "https://" not in page.text, "no external assets"


# -- bad input -------------------------------------------------------------------------------------

BAD: list[tuple[str, str, Any, int, str]] = [
    # (name, route, body, status, code)
    ("malformed json", "/v1/check", b'{"text": ', 400, "malformed_json"),
    ("not json at all", "/v1/check-and-add", b"hello", 400, "malformed_json"),
    ("empty body", "/v1/add", b"", 400, "malformed_json"),
    ("lone surrogate", "/v1/check", b'{"text": "\\ud800"}', 400, "malformed_json"),
    ("invalid utf-8", "/v1/check", b'{"text": "\xff\xfe"}', 400, "malformed_json"),
    ("array body", "/v1/check", [1, 2], 422, "invalid_type"),
    ("string body", "/v1/add", '"text"', 422, "invalid_type"),
    ("missing text", "/v1/check", {"k": 3}, 422, "missing_field"),
    ("missing text add", "/v1/add", {"id": "x"}, 422, "missing_field"),
    ("missing id", "/v1/check-and-add", {"text": "hello there"}, 422, "missing_field"),
    ("text is a number", "/v1/check", {"text": 42}, 422, "invalid_type"),
    ("text is a list", "/v1/add", {"id": "x", "text": ["a"]}, 422, "invalid_type"),
    ("text is null", "/v1/check-and-add", {"id": "x", "text": None}, 422, "invalid_type"),
    ("empty text", "/v1/check", {"text": ""}, 422, "empty_text"),
    ("blank text", "/v1/check-and-add", {"id": "x", "text": " \n\t "}, 422, "empty_text"),
    ("invisible text", "/v1/check", {"text": "\u200b\ufeff \u2060"}, 422, "empty_text"),
    (
        "control characters",
        "/v1/add/batch",
        {"items": [{"id": 1, "text": "\x00\x01"}]},
        422,
        "empty_text",
    ),
    ("oversized text", "/v1/add", {"id": "x", "text": "a" * 70_000}, 413, "text_too_large"),
    ("oversized cjk text", "/v1/check", {"text": "字" * 22_000}, 413, "text_too_large"),
    ("body over limit", "/v1/check", {"text": "a b " * 300_000}, 413, "body_too_large"),
    ("k negative", "/v1/check", {"text": "hello", "k": -1}, 422, "invalid_k"),
    ("k too big", "/v1/check", {"text": "hello", "k": 65}, 422, "invalid_k"),
    ("k string", "/v1/check", {"text": "hello", "k": "3"}, 422, "invalid_k"),
    ("k bool", "/v1/check", {"text": "hello", "k": True}, 422, "invalid_k"),
    ("k float", "/v1/check", {"text": "hello", "k": 2.5}, 422, "invalid_k"),
    ("id bool", "/v1/add", {"id": True, "text": "hello"}, 422, "invalid_id"),
    ("id float", "/v1/add", {"id": 1.5, "text": "hello"}, 422, "invalid_id"),
    ("id null", "/v1/check-and-add", {"id": None, "text": "hello"}, 422, "invalid_id"),
    ("id list", "/v1/add", {"id": [1], "text": "hello"}, 422, "invalid_id"),
    ("id empty", "/v1/add", {"id": "", "text": "hello"}, 422, "invalid_id"),
    ("id too long", "/v1/add", {"id": "x" * 1025, "text": "hello"}, 422, "invalid_id"),
    ("id over i64", "/v1/add", {"id": 2**63, "text": "hello"}, 422, "invalid_id"),
    ("fingerprint negative", "/v1/check", {"fingerprint": -1}, 422, "invalid_fingerprint"),
    ("fingerprint over u64", "/v1/check", {"fingerprint": 2**64}, 422, "invalid_fingerprint"),
    ("fingerprint junk", "/v1/check", {"fingerprint": "0xZZ"}, 422, "invalid_fingerprint"),
    ("text and fingerprint", "/v1/check", {"text": "a", "fingerprint": 1}, 422, "invalid_value"),
    (
        "timestamp string",
        "/v1/add",
        {"id": "x", "text": "hi", "timestamp": "now"},
        422,
        "invalid_timestamp",
    ),
    (
        "timestamp negative",
        "/v1/add",
        {"id": "x", "text": "hi", "timestamp": -5},
        422,
        "invalid_timestamp",
    ),
    ("items missing", "/v1/check/batch", {"k": 3}, 422, "missing_field"),
    ("items misspelt", "/v1/check/batch", {"texts": ["a"]}, 422, "unknown_field"),
    (
        "misspelt timestamp",
        "/v1/add",
        {"id": "x", "text": "ab", "timestmap": 1},
        422,
        "unknown_field",
    ),
    ("threshold on check", "/v1/check", {"text": "ab", "threshold": 0.5}, 422, "unknown_field"),
    ("k on an add", "/v1/check-and-add", {"id": "x", "text": "ab", "k": 3}, 422, "unknown_field"),
    ("k on an add batch", "/v1/add/batch", {"items": [], "k": 3}, 422, "unknown_field"),
    (
        "item field",
        "/v1/add/batch",
        {"items": [{"id": 1, "text": "a", "b": 1}]},
        422,
        "unknown_field",
    ),
    ("digit separators", "/v1/check", {"fingerprint": "1_2"}, 422, "invalid_fingerprint"),
    ("hex of 15 digits", "/v1/check", {"fingerprint_hex": "0" * 15}, 422, "invalid_fingerprint"),
    ("hex as a number", "/v1/check", {"fingerprint_hex": 12}, 422, "invalid_fingerprint"),
    ("items not a list", "/v1/add/batch", {"items": {"id": 1}}, 422, "invalid_type"),
    ("item not an object", "/v1/check-and-add/batch", {"items": ["text"]}, 422, "invalid_type"),
    (
        "batch too large",
        "/v1/check/batch",
        {"items": [{"text": "a"}] * 501},
        413,
        "batch_too_large",
    ),
    ("batch k invalid", "/v1/check/batch", {"items": [{"text": "a"}], "k": 99}, 422, "invalid_k"),
]


@pytest.mark.parametrize(
    ("route", "body", "status", "code"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_input_gets_its_4xx_and_a_json_error(
    url: str, route: str, body: Any, status: int, code: str
) -> None:
    r = post(url + route, body)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert err["code"] == code
    assert isinstance(err["message"], str) and len(err["message"]) > 5


def test_error_names_the_item_of_a_batch_and_nothing_is_stored(url: str) -> None:
    before = count(url)
    tag = uniq("bad")
    items = [
        {"id": f"{tag}-0", "text": words(600)},
        {"id": f"{tag}-1", "text": ""},
        {"id": f"{tag}-2", "text": words(601)},
    ]
    for route in ("/v1/add/batch", "/v1/check-and-add/batch"):
        r = post(url + route, {"items": items})
        assert r.status_code == 422
        assert r.json()["error"]["code"] == "empty_text"
        assert r.json()["error"]["field"] == "items[1].text"
    assert count(url) == before
    assert httpx.get(f"{url}/v1/documents/{tag}-0").status_code == 404


def test_protocol_errors(url: str) -> None:
    r = httpx.post(
        url + "/v1/check", content=b'{"text": "x"}', headers={"content-type": "text/plain"}
    )
    assert (r.status_code, r.json()["error"]["code"]) == (415, "unsupported_media_type")
    r = httpx.post(url + "/v1/check", content=b'{"text": "x"}')
    assert r.status_code == 415
    r = httpx.get(url + "/v1/nope")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    r = httpx.get(url + "/v1/check")
    assert (r.status_code, r.json()["error"]["code"]) == (405, "method_not_allowed")
    r = httpx.put(url + "/v1/documents/x", json={})
    assert r.status_code == 405
    r = httpx.get(url + "/v1/documents/x?id_type=float")
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_value"


def test_declared_content_length_over_the_limit_is_refused_before_the_body(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2097152\r\n\r\n{"
        )
        raw = b""
        while b'"}}' not in raw:
            chunk = sock.recv(65536)
            if not chunk:
                break
            raw += chunk
    head = raw.decode("latin-1")
    assert head.startswith("HTTP/1.1 413"), head
    assert '"body_too_large"' in head


def test_chunked_body_over_the_limit_is_refused(url: str) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"text": "'
        for _ in range(40):
            yield b"x" * 32_768
        yield b'"}'

    r = httpx.post(
        url + "/v1/check",
        content=chunks(),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "body_too_large"


def test_many_bad_requests_leave_the_server_serving(url: str, srv: ServerProcess) -> None:
    """A burst of garbage of every kind, then a normal request works and nothing was stored."""
    before = count(url)
    r = random.Random(7)
    with httpx.Client(base_url=url, timeout=30) as http:
        for _i in range(300):
            junk = bytes(r.getrandbits(8) for _ in range(r.randint(0, 200)))
            route = r.choice(["/v1/check", "/v1/add", "/v1/check-and-add", "/v1/add/batch"])
            resp = http.post(route, content=junk, headers={"content-type": "application/json"})
            assert 400 <= resp.status_code < 500, (junk, resp.text)
            assert "error" in resp.json()
    assert count(url) == before
    assert post(url + "/v1/check", {"text": "still fine"}).status_code == 200


def test_no_fast_path_flag_is_the_only_difference(tmp_path: Path) -> None:
    """Both paths give byte-identical bodies for the same request sequence."""
    answers: list[list[tuple[int, bytes]]] = []
    for extra in ([], ["--no-fast-path"]):
        with ServerProcess(tmp_path / f"s{len(answers)}", "--retention", "none", *extra) as s:
            seq = []
            for route, body in [
                ("/v1/check-and-add", {"id": "a", "text": words(1)}),
                ("/v1/check-and-add", {"id": "b", "text": near_copy(words(1), 3)}),
                ("/v1/check", {"text": words(1), "k": 5}),
                ("/v1/check", {"text": ""}),
                ("/v1/add/batch", {"items": [{"id": 7, "text": words(2), "timestamp": 5.0}]}),
                ("/v1/check/batch", {"items": [{"text": words(2)}, {"text": 1}]}),
            ]:
                resp = post(s.url + route, body)
                seq.append((resp.status_code, resp.content))
            answers.append(seq)
    assert answers[0] == answers[1]


def test_batches_applied_in_chunks_give_the_same_answers(tmp_path: Path) -> None:
    """With NEARDUP_WRITER_MAX_BATCH=3 a batch of 11 is applied in 4 store calls; near-copies
    that straddle the chunk boundaries are still found, as in one local call."""
    bases = [words(700 + i) for i in range(4)]
    texts = [
        bases[0],
        bases[1],
        bases[2],
        near_copy(bases[0], 1),
        near_copy(bases[2], 2),
        bases[3],
        near_copy(bases[1], 3),
        near_copy(bases[3], 4),
        words(800),
        bases[0],
        words(801),
    ]
    ids = [f"c{i}" for i in range(len(texts))]
    expected = Deduplicator().check_and_add_many(ids, texts)
    env = {"NEARDUP_WRITER_MAX_BATCH": "3"}
    with ServerProcess(tmp_path / "s", "--retention", "none", env=env) as s:
        items = [{"id": i, "text": t} for i, t in zip(ids, texts)]
        got = post(s.url + "/v1/check-and-add/batch", {"items": items}).json()["results"]
        assert [(r["added"], [d["id"] for d in r["duplicates"]]) for r in got] == [
            (a, [m.id for m in ms]) for a, ms in expected
        ]
        assert [r["added"] for r in got] == [
            True,
            True,
            True,
            False,
            False,
            True,
            False,
            False,
            True,
            False,
            True,
        ]
        added = post(
            s.url + "/v1/add/batch",
            {"items": [{"id": f"a{i}", "text": words(900 + i)} for i in range(7)]},
        ).json()["results"]
        assert [a["id"] for a in added] == [f"a{i}" for i in range(7)]
        stats = httpx.get(s.url + "/v1/stats").json()
        assert stats["count"] == 7 + sum(r["added"] for r in got)
        assert stats["writer"]["calls"] >= 2


def test_rates_in_the_first_minute_are_over_the_seconds_there_were() -> None:
    """(they were divided by the whole 59-second window: 13x too low 5 s after a start)"""
    from neardup.service.metrics import _Rate

    rate = _Rate()
    rate.first = rate.second = start = 1_000_000
    for s in range(5):
        rate.add(100, start + s)
    assert rate.per_second(start + 5) == 100.0
    assert _Rate().per_second(_Rate().second) == 0.0
    for s in range(5, 200):
        rate.add(100, start + s)
    assert rate.per_second(start + 200) == 100.0
