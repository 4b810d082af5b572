"""The service over a Redis store that fails: stopped, paused, loading its data (real servers).

Every route answers 503 ``unavailable`` with a JSON body and ``Retry-After`` within the store
timeout; ``/healthz`` (liveness) stays ok, ``/readyz`` follows the store.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _helpers import words
from redis_servers import RedisServer
from test_service_harness import ServerProcess

redis = pytest.importorskip("redis")
pytestmark = pytest.mark.redis

TIMEOUT = 0.5  # --store-timeout of the servers under test


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test alone (it is stopped, paused or restarted)."""
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()


@pytest.fixture
def service(own_redis: RedisServer, tmp_path: Path) -> Iterator[ServerProcess]:
    store = f"redis://127.0.0.1:{own_redis.port}/0"
    args = ("--store", store, "--store-timeout", f"{TIMEOUT}s", "--retention", "none")
    with ServerProcess(tmp_path / "unused", *args) as srv:
        add = httpx.post(srv.url + "/v1/add", json={"id": "kept", "text": words(1)}, timeout=30)
        assert add.status_code == 200
        assert httpx.get(srv.url + "/readyz", timeout=30).json() == {"status": "ready"}
        yield srv


REQUESTS = [
    ("POST", "/v1/add", {"id": "x", "text": words(2)}),
    ("POST", "/v1/check-and-add", {"id": "x", "text": words(2)}),
    ("POST", "/v1/add/batch", {"items": [{"id": "x", "text": words(2)}]}),
    ("POST", "/v1/check-and-add/batch", {"items": [{"id": "x", "text": words(2)}]}),
    ("POST", "/v1/check", {"text": words(1)}),
    ("POST", "/v1/check/batch", {"items": [{"text": words(1)}]}),
    ("GET", "/v1/stats", None),
    ("GET", "/v1/documents/kept", None),
    ("DELETE", "/v1/documents/kept", None),
    ("GET", "/readyz", None),
]


def assert_unavailable(url: str) -> None:
    """Every route but /healthz answers 503 with the JSON error and Retry-After, in time."""
    with httpx.Client(base_url=url, timeout=30) as http:
        for method, path, body in REQUESTS:
            start = time.monotonic()
            r = http.request(method, path, json=body)
            took = time.monotonic() - start
            where = f"{method} {path}: {r.status_code} {r.text[:200]}"
            assert r.status_code == 503, where
            assert r.headers["content-type"] == "application/json", where
            assert r.json()["error"]["code"] == "unavailable", where
            assert int(r.headers["retry-after"]) >= 1, where
            # a write may make a few round trips, each bounded by the timeout
            assert took < 8 * TIMEOUT + 1.0, f"{where} took {took:.1f} s"
        health = http.get("/healthz")
        assert health.status_code == 200 and health.json() == {"status": "ok"}


def assert_serving_again(url: str) -> None:
    deadline = time.monotonic() + 30
    while httpx.get(url + "/readyz", timeout=30).status_code != 200:
        assert time.monotonic() < deadline, "the service did not become ready again"
        time.sleep(0.1)
    r = httpx.get(url + "/v1/documents/kept", timeout=30)
    assert r.status_code == 200 and r.json()["text"] == words(1)


def test_store_stopped(own_redis: RedisServer, service: ServerProcess) -> None:
    own_redis.stop()
    assert_unavailable(service.url)
    assert service.alive


def test_store_paused(own_redis: RedisServer, service: ServerProcess) -> None:
    # (CLIENT UNPAUSE would wait for the pause too: it lasts long enough for the checks)
    redis.Redis(port=own_redis.port).client_pause(15_000)
    assert_unavailable(service.url)
    assert_serving_again(service.url)


def test_store_loading(own_redis: RedisServer, service: ServerProcess) -> None:
    admin = redis.Redis(port=own_redis.port)
    pipe = admin.pipeline(transaction=False)
    for i in range(0, 40_000, 1000):
        pipe.mset({f"filler:{j}": b"x" for j in range(i, i + 1000)})
    pipe.execute()
    admin.save()
    admin.close()
    own_redis.stop()
    # The same port and directory: the server loads dump.rdb, 100 µs a key (4 s), answering
    # -LOADING meanwhile (it serves clients between chunks of 1 kB of the file).
    binary = shutil.which("redis-server")
    assert binary is not None
    with open(own_redis.log, "ab") as log:
        own_redis.proc = subprocess.Popen(
            [binary, "--port", str(own_redis.port), "--bind", "127.0.0.1",
             "--dir", str(own_redis.workdir), "--save", "", "--appendonly", "no",
             "--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024"],
            stdout=log, stderr=subprocess.STDOUT, cwd=own_redis.workdir,
        )  # fmt: skip
    probe = redis.Redis(port=own_redis.port)
    deadline = time.monotonic() + 10
    while True:  # (INFO and PING are served while loading; data commands are not)
        try:
            loading = probe.info("persistence")["loading"]
            assert loading == 1, "the server finished loading before the test saw it loading"
            break
        except redis.exceptions.ConnectionError:
            assert time.monotonic() < deadline, "redis-server did not restart"
            time.sleep(0.01)
    assert_unavailable(service.url)
    assert probe.info("persistence")["loading"] == 1, "loading ended during the checks"
    assert_serving_again(service.url)


def test_a_paused_master_of_a_cluster_is_answered_within_the_deadline(tmp_path: Path) -> None:
    """(a check waited 92 s with --store-timeout 1s: the cluster client retried other nodes)
    Each request is answered within twice the store timeout and a second, 503 while a master
    is paused, and served again once it goes on."""
    import signal

    from redis_servers import redis_cluster

    with redis_cluster(tmp_path / "cluster") as (url, nodes):
        args = ("--store", url, "--store-timeout", f"{TIMEOUT}s", "--retention", "none")
        with ServerProcess(tmp_path / "unused", *args) as srv:
            add = httpx.post(srv.url + "/v1/add", json={"id": "kept", "text": words(1)}, timeout=30)
            assert add.status_code == 200
            nodes[1].proc.send_signal(signal.SIGSTOP)
            try:
                with httpx.Client(base_url=srv.url, timeout=60) as http:
                    codes = []
                    for i in range(3):  # (a text's band keys lie on every master)
                        start = time.monotonic()
                        r = http.post("/v1/check", json={"text": words(10 + i)})
                        took = time.monotonic() - start
                        assert took < 2 * TIMEOUT + 1 + 1.5, f"{r.status_code} in {took:.1f} s"
                        codes.append(r.status_code)
                    assert 503 in codes, codes
                    r = http.post("/v1/check", json={"text": words(20)})
                    assert r.status_code == 503 and r.json()["error"]["code"] == "unavailable"
                    assert int(r.headers["retry-after"]) >= 1
            finally:
                nodes[1].proc.send_signal(signal.SIGCONT)
            deadline = time.monotonic() + 60
            while True:
                r = httpx.post(srv.url + "/v1/check", json={"text": words(1)}, timeout=60)
                if r.status_code == 200:
                    assert [m["id"] for m in r.json()["duplicates"]] == ["kept"]
                    break
                assert time.monotonic() < deadline, r.text
                time.sleep(0.2)
