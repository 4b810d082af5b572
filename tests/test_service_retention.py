"""Retention: the background sweep expires old documents, on a real server."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from _helpers import words
from test_service_harness import ServerProcess


def test_old_documents_expire_in_the_background(tmp_path: Path) -> None:
    with (
        ServerProcess(tmp_path / "store", "--retention", "3s", "--expire-interval", "0.5s") as srv,
        httpx.Client(base_url=srv.url, timeout=30) as http,
    ):
        stats = http.get("/v1/stats").json()
        assert stats["retention_seconds"] == 3.0
        now = time.time()
        # one document already 2.5 s old, one fresh, one explicitly in the future
        http.post("/v1/add", json={"id": "old", "text": words(1), "timestamp": now - 2.5})
        http.post("/v1/add", json={"id": "new", "text": words(2)})
        http.post("/v1/add", json={"id": "later", "text": words(3), "timestamp": now + 60})
        assert http.get("/v1/stats").json()["count"] == 3

        deadline = time.monotonic() + 20
        while http.get("/v1/documents/old").status_code == 200:
            assert time.monotonic() < deadline, "the old document never expired"
            time.sleep(0.2)
        # after it: the old one is gone everywhere, the others are still there
        assert http.post("/v1/check", json={"text": words(1)}).json() == {"duplicates": []}
        assert http.post("/v1/check-and-add", json={"id": "old2", "text": words(1)}).json()["added"]
        if time.time() - now < 2.5:  # "new" is younger than the retention
            assert http.get("/v1/documents/new").status_code == 200

        while http.get("/v1/documents/new").status_code == 200:
            assert time.monotonic() < deadline, "the second document never expired"
            time.sleep(0.2)
        assert time.time() - now >= 2.9, "expired before its retention was up"
        assert http.get("/v1/documents/later").status_code == 200
        stats = http.get("/v1/stats").json()
        assert stats["expired"] >= 2
        assert stats["last_retention_sweep"] is not None
        assert "neardup_expired_total" in http.get("/metrics").text


def test_retention_none_keeps_old_documents(tmp_path: Path) -> None:
    with (
        ServerProcess(
            tmp_path / "store", "--retention", "none", "--expire-interval", "0.2s"
        ) as srv,
        httpx.Client(base_url=srv.url, timeout=30) as http,
    ):
        http.post("/v1/add", json={"id": "ancient", "text": words(5), "timestamp": 1000.0})
        time.sleep(1.0)
        assert http.get("/v1/documents/ancient").status_code == 200
        assert http.get("/v1/stats").json()["retention_seconds"] is None


def test_every_expiry_is_counted(tmp_path: Path) -> None:
    # The store also expires old documents as writes arrive (at most once a second), between
    # the service's sweeps; those were not counted (expired stayed 0 with a long interval).
    with (
        ServerProcess(tmp_path / "store", "--retention", "3s", "--expire-interval", "1h") as srv,
        httpx.Client(base_url=srv.url, timeout=30) as http,
    ):
        now = time.time()
        old = {"id": "old", "text": words(1), "timestamp": now - 2.5}
        assert http.post("/v1/add", json=old).status_code == 200
        time.sleep(max(0.0, now + 1.2 - time.time()))  # "old" is past the window now
        http.post("/v1/add", json={"id": "new", "text": words(2)})
        assert http.get("/v1/documents/old").status_code == 404
        stats = http.get("/v1/stats").json()
        assert stats["expired"] == 1 and stats["last_retention_sweep"] is None
        assert "neardup_expired_total 1\n" in http.get("/metrics").text
