"""Issue 23 on a real server: hypothesis sends random JSON bodies, built from the schemas' own
fields with values of every JSON type, to every route (never a 500; every error a JSON body whose
code is known and, for a 422, whose ``field`` is named in the message), and the minor faults of
the adversarial trial (HEAD on the probes, a repeated id in a batch, gzip, UTF-16 and latin-1
bodies). Bounded budget: derandomized, a fixed number of examples per route."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from _helpers import words
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_service_harness import ServerProcess, post

FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

CODES = {
    400: {"malformed_json"},
    404: {"not_found"},
    413: {"body_too_large", "text_too_large", "batch_too_large"},
    415: {"unsupported_media_type"},
    422: {
        "missing_field",
        "unknown_field",
        "invalid_type",
        "empty_text",
        "invalid_k",
        "invalid_id",
        "invalid_fingerprint",
        "invalid_timestamp",
        "invalid_value",
    },
}


@pytest.fixture(scope="module", params=["fast-path", "fastapi-only"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    extra = ["--no-fast-path"] if request.param == "fastapi-only" else []
    data = tmp_path_factory.mktemp("fuzz-http")
    args = ["--retention", "30d", "--max-text", "4k", "--max-batch", "20", *extra]
    with ServerProcess(data / "store", *args) as srv:
        yield srv
        assert srv.alive, "".join(srv.output)


# Values of every JSON type, the edges of each field's range among them.
scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 64, 65, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 1e15, 1e16, -1e-9]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(["", " ", "\n\t", "x" * 5000, words(1), "你好，世界"]),
)
value = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = ["id", "text", "timestamp", "k", "fingerprint", "items"]
document = st.dictionaries(st.sampled_from(FIELDS), value, max_size=5)
body = st.one_of(
    document,
    st.fixed_dictionaries(
        {"items": st.lists(st.one_of(document, value), max_size=6)},
        optional={"k": value},
    ),
    value,
)


def post_routes(server: ServerProcess) -> list[str]:
    """Every POST route the server documents (new ones are fuzzed without a change here)."""
    spec = httpx.get(server.url + "/openapi.json", timeout=30).json()
    routes = sorted(path for path, methods in spec["paths"].items() if "post" in methods)
    assert "/v1/check-and-add/batch" in routes
    return routes


def assert_clear(resp: httpx.Response) -> None:
    """Not a 500, a JSON body, and an error that says what is wrong and where."""
    assert resp.status_code < 500, resp.text
    answer = resp.json()
    if resp.status_code == 200:
        return
    error = answer["error"]
    assert error["code"] in CODES[resp.status_code], answer
    assert error["message"]
    if resp.status_code == 422:
        field = error["field"]
        assert field, answer
        assert field in error["message"] or field.rsplit(".", 1)[-1] in error["message"], answer


@FUZZ
@given(draw=st.data(), data=body)
def test_random_bodies_never_fail_the_server(
    server: ServerProcess, draw: st.DataObject, data: Any
) -> None:
    route = draw.draw(st.sampled_from(post_routes(server)))
    assert_clear(post(server.url + route, data))


@FUZZ
@given(
    raw=st.one_of(
        st.binary(max_size=200),
        st.text(max_size=80).map(lambda t: t.encode("utf-8", "surrogatepass")),
        body.map(lambda b: json.dumps(b).encode()[:-1]),  # cut short
    ),
    draw=st.data(),
)
def test_random_bytes_never_fail_the_server(
    server: ServerProcess, draw: st.DataObject, raw: bytes
) -> None:
    route = draw.draw(st.sampled_from(post_routes(server)))
    assert_clear(post(server.url + route, raw))


@FUZZ
@given(
    id=st.one_of(st.text(min_size=1, max_size=30), st.integers(-(2**70), 2**70).map(str)),
    id_type=st.sampled_from([None, "str", "int", "float", ""]),
    route=st.sampled_from(["/v1/documents/", "/v1/near/"]),
    method=st.sampled_from(["GET", "DELETE", "PUT", "HEAD"]),
)
def test_random_ids_in_the_path(
    server: ServerProcess, id: str, id_type: str | None, route: str, method: str
) -> None:
    query = "" if id_type is None else f"?id_type={id_type}"
    resp = httpx.request(method, f"{server.url}{route}{quote(id, safe='')}{query}", timeout=30)
    assert resp.status_code < 500, resp.text
    if method == "HEAD":
        return
    if resp.status_code == 405:
        assert resp.json()["error"]["code"] == "method_not_allowed"
    elif resp.status_code != 200:
        assert_clear(resp)


def test_probes_answer_head(server: ServerProcess) -> None:
    for path in ("/healthz", "/readyz"):
        resp = httpx.head(server.url + path, timeout=30)
        assert resp.status_code == 200 and resp.content == b""
        assert resp.headers["content-type"] == "application/json"


def test_a_batch_names_each_document_once(server: ServerProcess) -> None:
    for n, route in enumerate(("/v1/add/batch", "/v1/check-and-add/batch")):
        first, second = words(901 + 10 * n), words(902 + 10 * n)
        items = [
            {"id": f"rep-{n}", "text": first},
            {"id": 7000 + n, "text": second},
            {"id": f"{7000 + n}", "text": words(903 + 10 * n)},  # not the integer id
            {"id": f"rep-{n}", "text": second},
        ]
        resp = post(server.url + route, {"items": items})
        assert resp.status_code == 422
        assert resp.json()["error"] == {
            "code": "invalid_id",
            "message": f"field 'items[3].id' repeats items[0].id 'rep-{n}'; a batch names each "
            "document once",
            "field": "items[3].id",
        }
        for doc in (f"rep-{n}", f"{7000 + n}"):  # nothing was stored
            assert httpx.get(f"{server.url}/v1/documents/{doc}").status_code == 404
        assert post(server.url + route, {"items": items[:3]}).status_code == 200
        assert httpx.get(f"{server.url}/v1/documents/rep-{n}").json()["text"] == first


@pytest.mark.parametrize(
    ("content", "headers", "status", "says"),
    [
        (
            gzip.compress(b'{"text": "hello"}'),
            {"content-encoding": "gzip"},
            415,
            "Content-Encoding 'gzip' is not supported: send the body uncompressed",
        ),
        (
            gzip.compress(b'{"text": "hello"}'),
            {},
            400,
            "request body is gzip-compressed; send it uncompressed",
        ),
        ('{"text": "hello"}'.encode("utf-16"), {}, 400, "request body is UTF-16 or UTF-32"),
        ('{"text": "hello"}'.encode("utf-16-le"), {}, 400, "request body is UTF-16 or UTF-32"),
        (
            '{"text": "café"}'.encode("latin-1"),
            {"content-type": "application/json; charset=latin-1"},
            415,
            "charset 'latin-1' is not supported: send JSON in UTF-8",
        ),
        (
            '{"text": "café"}'.encode("latin-1"),
            {},
            400,
            "request body is not valid UTF-8: byte 0xe9 at offset 13",
        ),
    ],
)
def test_bodies_in_another_encoding_are_named(
    server: ServerProcess, content: bytes, headers: dict[str, str], status: int, says: str
) -> None:
    resp = post(server.url + "/v1/check", content, headers=headers)
    assert resp.status_code == status
    assert says in resp.json()["error"]["message"]
    utf8 = {"content-type": "application/json; charset=UTF-8"}
    assert (
        post(server.url + "/v1/check", b'{"text": "caf\xc3\xa9"}', headers=utf8).status_code == 200
    )
