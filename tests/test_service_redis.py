"""``neardup serve --store redis://...`` dispatches to the Redis backend (real redis-server)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from _helpers import near_copy, words
from test_service_harness import ServerProcess

pytestmark = pytest.mark.redis


def test_serve_on_a_redis_store(tmp_path: Path) -> None:
    redis_server = shutil.which("redis-server")
    assert redis_server, "redis-server missing: run scripts/setup-test.sh"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    redis = subprocess.Popen(
        [
            redis_server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        store = f"redis://127.0.0.1:{port}/0"
        with ServerProcess(tmp_path / "unused", "--store", store, "--retention", "1d") as srv:
            base = words(7)
            with httpx.Client(base_url=srv.url, timeout=30) as http:
                first = http.post("/v1/check-and-add", json={"id": "r1", "text": base}).json()
                assert first == {"id": "r1", "added": True, "duplicates": []}
                second = http.post(
                    "/v1/check-and-add", json={"id": "r2", "text": near_copy(base, 1)}
                ).json()
                assert second["added"] is False
                assert [d["id"] for d in second["duplicates"]] == ["r1"]
                stats = http.get("/v1/stats").json()
                assert stats["store"] == "redis" and stats["count"] == 1
                assert http.get("/v1/documents/r1").json()["text"] == base
                # a SimHash radius is not how this store finds candidates: 422 naming k
                r = http.post("/v1/check", json={"text": base, "k": 3})
                assert r.status_code == 422 and r.json()["error"]["field"] == "k", r.text
                r = http.post("/v1/check/batch", json={"items": [{"text": base, "k": 3}]})
                assert r.status_code == 422 and "k=3" in r.json()["error"]["message"], r.text
                # in a batch, the error names the item
                items = [{"text": base}, {"text": base, "k": 3}]
                r = http.post("/v1/check/batch", json={"items": items})
                assert r.json()["error"]["field"] == "items[1].k", r.text
                r = http.post(
                    "/v1/check/batch", json={"items": [{"text": base}, {"fingerprint": 5}]}
                )
                assert r.json()["error"]["field"] == "items[1].fingerprint", r.text
        # the data lives in Redis: a new server on the same URL sees it
        with ServerProcess(tmp_path / "unused", "--store", store, "--retention", "1d") as again:
            r = httpx.post(again.url + "/v1/check", json={"text": base}, timeout=30)
            assert [d["id"] for d in r.json()["duplicates"]] == ["r1"]
            # the server loses its data and a service of another policy takes the namespace:
            # this one's writes are refused, 503 naming the difference (an opaque 500 before)
            import redis as redis_py

            redis_py.Redis.from_url(store).flushall()
            other = ("--policy", '{"threshold": 0.3}')
            with ServerProcess(tmp_path / "unused", "--store", store, *other):
                r = httpx.post(again.url + "/v1/add", json={"id": "a1", "text": base}, timeout=30)
                assert r.status_code == 503, r.text
                assert "the store cannot serve this service" in r.json()["error"]["message"]
        assert not (tmp_path / "unused").exists(), "a Redis store writes no local files"
    finally:
        redis.terminate()
        redis.wait(20)
