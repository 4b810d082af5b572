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


def test_writes_that_aged_out_of_the_window_in_the_queue_are_refused_whole(
    tmp_path: Path,
) -> None:
    """Timestamps accepted on arrival that left the window while their write waited behind
    others: 422 naming the item, nothing of the batch stored, the other writes of the group
    applied (the store refused a later chunk: a 500 with the earlier chunks written)."""
    import asyncio

    import orjson
    import pytest
    from neardup.dedup import Deduplicator
    from neardup.service.core import DedupService
    from neardup.service.errors import ApiError
    from neardup.service.settings import Settings

    store = Deduplicator.open(tmp_path / "store", retention=20.0)
    service = DedupService(
        Settings(store=str(tmp_path / "store"), retention=20.0, writer_max_batch=8), store
    )

    async def run() -> None:
        await service.start()
        busy = asyncio.create_task(service.writer.call(lambda: time.sleep(1.6)))
        await asyncio.sleep(0.05)
        edge = time.time() - 17.9  # inside the window less its 2 s margin, for 1.1 s more
        items = [{"id": f"b{i}", "text": words(100 + i), "timestamp": edge + 5} for i in range(40)]
        items[30]["timestamp"] = edge
        batch = asyncio.create_task(service.add_batch(orjson.dumps({"items": items})))
        old = asyncio.create_task(
            service.add(orjson.dumps({"id": "one", "text": words(1), "timestamp": edge}))
        )
        fresh = asyncio.create_task(service.add(orjson.dumps({"id": "two", "text": words(2)})))
        await busy
        with pytest.raises(ApiError) as refused:
            await batch
        assert refused.value.code == "invalid_timestamp" and refused.value.status == 422
        assert refused.value.field == "items[30].timestamp"
        with pytest.raises(ApiError) as single:
            await old
        assert single.value.field == "timestamp"
        assert orjson.loads(await fresh)["id"] == "two"
        assert len(store) == 1 and store.get("two") == words(2)
        await service.stop()

    asyncio.run(run())
