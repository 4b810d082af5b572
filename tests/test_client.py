"""``neardup.Client`` against a real server: every method, and the exceptions it raises."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import neardup
import pytest
from _helpers import near_copy, words
from neardup.client import (
    AuthenticationError,
    BadRequestError,
    Client,
    NotFoundError,
    ServiceError,
    ServiceUnavailableError,
)
from neardup.dedup import Deduplicator, Match
from test_service_harness import ServerProcess

TOKEN = "client-token-abcdef"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("client")
    with ServerProcess(
        data / "store", "--retention", "none", "--max-batch", "50", "--token", TOKEN
    ) as server:
        yield server


@pytest.fixture()
def client(srv: ServerProcess) -> Iterator[Client]:
    with neardup.Client(srv.url, token=TOKEN, batch_size=20) as c:
        yield c


def test_client_is_exported_lazily() -> None:
    assert neardup.Client is Client


def test_check_add_check_and_add_get_remove(client: Client) -> None:
    base = words(1)
    assert client.check(base) == []
    fp = client.add("doc-1", base)
    assert isinstance(fp, int) and 0 <= fp < 2**64
    assert client.get("doc-1") == base
    assert "doc-1" in client and "nope" not in client

    matches = client.check(near_copy(base, 2))
    assert [m.id for m in matches] == ["doc-1"]
    assert isinstance(matches[0], Match) and matches[0].similarity is not None
    assert client.check(fingerprint=fp, k=0) == [Match("doc-1", 0, None)]

    added, dups = client.check_and_add("doc-2", near_copy(base, 3))
    assert added is False and [m.id for m in dups] == ["doc-1"]
    added, dups = client.check_and_add("doc-3", words(2), timestamp=1_900_000_000.0)
    assert (added, dups) == (True, [])

    client.remove("doc-3")
    with pytest.raises(NotFoundError) as info:
        client.get("doc-3")
    assert isinstance(info.value, KeyError)
    assert info.value.code == "not_found" and info.value.status == 404
    assert "not_found (HTTP 404)" in str(info.value)
    with pytest.raises(KeyError):
        client.remove("doc-3")


def test_integer_ids_round_trip(client: Client) -> None:
    client.add(42, words(3))
    client.add("42", words(4))
    assert client.get(42) == words(3)
    assert client.get("42") == words(4)
    client.delete(42)
    assert 42 not in client and "42" in client


def test_batches_chunk_and_agree_with_a_local_deduplicator(client: Client) -> None:
    """45 items with batch_size=20: three requests, same answers as one local batch."""
    bases = [words(100 + i) for i in range(15)]
    texts = []
    for i, b in enumerate(bases):
        texts += [b, near_copy(b, i), words(200 + i)]
    ids = [f"batch-{i}" for i in range(len(texts))]
    got = client.check_and_add_many(ids, texts)
    expected = Deduplicator().check_and_add_many(ids, texts)
    assert [(a, [m.id for m in ms]) for a, ms in got] == [
        (a, [m.id for m in ms]) for a, ms in expected
    ]
    assert sum(a for a, _ in got) == 30

    checks = client.check_many([near_copy(bases[0], 50), words(999)])
    assert [[m.id for m in ms] for ms in checks] == [["batch-0"], []]
    fps = client.add_many(["x1", "x2"], [words(300), words(301)], timestamps=[None, 5.0])
    assert len(fps) == 2 and fps[0] == client.add("x3", words(300))
    assert client.check_many([]) == [] and client.add_many([], []) == []


def test_bad_input_raises_value_errors_with_the_server_code(client: Client) -> None:
    with pytest.raises(BadRequestError) as info:
        client.check("")
    assert isinstance(info.value, ValueError)
    assert (info.value.status, info.value.code, info.value.field) == (422, "empty_text", "text")
    with pytest.raises(ValueError, match="invalid_k"):
        client.check("hello", k=99)
    with pytest.raises(ValueError, match="id must fit in a signed 64-bit integer"):
        client.add(2**63, "hello")  # (refused here, as add_many refuses it)
    with pytest.raises(ValueError, match="batch_too_large"):
        Client(client.url, token=TOKEN, batch_size=100).check_many(["a"] * 51)
    with pytest.raises(ValueError, match="ids has 2 items but texts has 1"):
        client.add_many(["a", "b"], ["x"])
    with pytest.raises(TypeError, match="not a single str"):
        client.check_many("abc")
    with pytest.raises(TypeError):
        client.get(1.5)  # type: ignore[arg-type]


def test_stats_health_metrics_len(client: Client) -> None:
    stats = client.stats()
    assert stats["count"] == len(client) >= 1
    assert client.health() is True
    assert "neardup_http_requests_total" in client.metrics()


def test_wrong_token_raises_permission_error(srv: ServerProcess) -> None:
    with Client(srv.url, token="wrong-token-000") as c:
        with pytest.raises(AuthenticationError) as info:
            c.check("hello")
        assert isinstance(info.value, PermissionError) and info.value.code == "unauthorized"
        with pytest.raises(PermissionError):
            c.metrics()
        assert c.health() is True  # /healthz needs no token
    with Client(srv.url) as anonymous, pytest.raises(PermissionError):
        anonymous.stats()


def test_unreachable_server_raises_connection_error(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}", timeout=2) as c:
        with pytest.raises(ServiceUnavailableError) as info:
            c.check("hello")
        assert isinstance(info.value, ConnectionError) and isinstance(info.value, ServiceError)
        assert c.health() is False


def test_client_argument_errors() -> None:
    with pytest.raises(ValueError, match="url must start with http"):
        Client("localhost:8000")
    with pytest.raises(ValueError, match="batch_size"):
        Client("http://127.0.0.1:1", batch_size=0)
    with pytest.raises(ValueError, match="timeout"):
        Client("http://127.0.0.1:1", timeout=0)


def test_a_bad_item_sends_nothing_and_errors_name_the_callers_index(client: Client) -> None:
    # Every item is checked before the first request: a bad one in a later chunk (requests of
    # 20 here) left the earlier chunks written.
    ids: list[Any] = [f"bad-late-{i}" for i in range(50)]
    ids[45] = 2**63
    texts = [f"a text of the late-bad batch number {i} with words {i * 7919}" for i in range(50)]
    for call in (client.add_many, client.check_and_add_many):
        with pytest.raises(ValueError, match=r"ids\[45\]"):
            call(ids, texts)
        assert not any(i in client for i in ids[:45])
    # What only the server refuses (here a text over its size limit) is named by the caller's
    # index, not by the index within its request
    with neardup.Client(client.url, token=TOKEN, batch_size=20) as c:
        big = ["x " * (600 * 1024) if i == 45 else t for i, t in enumerate(texts)]
        with pytest.raises(BadRequestError) as info:
            c.add_many([f"big-{i}" for i in range(50)], big)
        assert info.value.field == "items[45].text", info.value.field


def test_single_writes_take_what_batches_and_the_deduplicator_take(client: Client) -> None:
    """(a numpy id or timestamp was a TypeError from the JSON encoder; a NaN timestamp was sent
    as the bare token NaN and answered malformed_json)"""
    import time

    import numpy as np

    now = time.time()
    assert client.add(_any(np.int64(7001)), words(7001), timestamp=_any(np.float32(now))) > 0
    added, matches = client.check_and_add(
        _any(np.int32(7002)), words(7001), timestamp=_any(np.int64(now))
    )
    assert added is False and [m.id for m in matches] == [7001]
    assert 7001 in client and 7002 not in client
    for call in (client.add, client.check_and_add):
        with pytest.raises(ValueError, match="timestamp must be finite seconds") as info:
            call(7003, words(7003), timestamp=float("nan"))
        assert not isinstance(info.value, ServiceError)  # (refused before any request)
        with pytest.raises(TypeError, match="id must be"):
            call(_any(1.5), words(7003))
    assert 7003 not in client


def _any(x: object) -> Any:
    return x


def test_ids_that_are_dot_segments(client: Client) -> None:
    for id in (".", "..", "a/../b", "%2E"):
        client.add(id, f"the text stored under the id {id!r} with some more words")
        assert id in client and client.get(id).startswith("the text stored under")
        client.remove(id)
        assert id not in client
