"""Atomic check-and-add under concurrency, and durability across kill -9, on a real server."""

from __future__ import annotations

import itertools
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from _helpers import near_copy, words
from neardup.dedup import Deduplicator
from test_service_harness import ServerProcess

CLIENTS = 50


def _all_pairs_are_duplicates(texts: list[str]) -> bool:
    d = Deduplicator()
    d.add("first", texts[0])
    for t in texts[1:]:
        if not d.check(t):
            return False
    return all(d.check(t) for t in texts)


def _race(url: str, texts: list[str], ids: list[str], batch_every: int = 0) -> list[dict]:
    """Send each text from its own thread and connection at the same moment."""
    barrier = threading.Barrier(len(texts))
    results: list[dict] = [{}] * len(texts)
    errors: list[BaseException] = []

    def send(i: int) -> None:
        try:
            with httpx.Client(base_url=url, timeout=60) as http:
                http.get("/healthz")  # connect before the barrier
                barrier.wait(30)
                if batch_every and i % batch_every == 0:
                    r = http.post(
                        "/v1/check-and-add/batch",
                        json={"items": [{"id": ids[i], "text": texts[i]}]},
                    )
                    r.raise_for_status()
                    results[i] = r.json()["results"][0]
                else:
                    r = http.post("/v1/check-and-add", json={"id": ids[i], "text": texts[i]})
                    r.raise_for_status()
                    results[i] = r.json()
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return results


@pytest.mark.slow
@pytest.mark.parametrize("writer", ["thread", "inline"])
def test_fifty_simultaneous_near_copies_add_exactly_one(tmp_path: Path, writer: str) -> None:
    env = {"NEARDUP_WRITER": writer}
    with ServerProcess(tmp_path / "store", "--retention", "none", env=env) as srv:
        for round_no in range(4):
            base = words(1000 + round_no, n=120)
            texts = [near_copy(base, 7000 + round_no * 100 + i) for i in range(CLIENTS)]
            assert _all_pairs_are_duplicates(texts), "precondition: the copies are near-dups"
            ids = [f"r{round_no}-c{i}" for i in range(CLIENTS)]
            # round 3 mixes single requests with one-item batch requests
            results = _race(srv.url, texts, ids, batch_every=3 if round_no == 3 else 0)

            added = [ids[i] for i, r in enumerate(results) if r["added"]]
            assert len(added) == 1, f"round {round_no}: added {added}"
            winner = added[0]
            for i, r in enumerate(results):
                if ids[i] != winner:
                    assert r["added"] is False
                    assert winner in [d["id"] for d in r["duplicates"]]
            stats = httpx.get(srv.url + "/v1/stats").json()
            assert stats["count"] == round_no + 1
            for doc_id in ids:
                status = httpx.get(f"{srv.url}/v1/documents/{doc_id}").status_code
                assert status == (200 if doc_id == winner else 404)


@pytest.mark.slow
def test_concurrent_distinct_documents_are_all_added(tmp_path: Path) -> None:
    """Unrelated texts sent at once are all added (grouped writes lose nothing)."""
    with ServerProcess(tmp_path / "store", "--retention", "none") as srv:
        texts = [words(50_000 + i) for i in range(CLIENTS)]
        ids = [f"d{i}" for i in range(CLIENTS)]
        results = _race(srv.url, texts, ids)
        assert all(r["added"] for r in results)
        assert httpx.get(srv.url + "/v1/stats").json()["count"] == CLIENTS


@pytest.mark.slow
@pytest.mark.parametrize(("writer", "sync"), [("thread", "full"), ("inline", "normal")])
def test_kill_9_while_clients_add_loses_no_acknowledged_document(
    tmp_path: Path, writer: str, sync: str
) -> None:
    data = tmp_path / "store"
    opts = ("--retention", "none", "--sync", sync)
    env = {"NEARDUP_WRITER": writer}
    acknowledged: list[tuple[str, str]] = []
    lock = threading.Lock()
    stop = threading.Event()
    counter = itertools.count()

    with ServerProcess(data, *opts, env=env) as srv:

        def send(worker: int) -> None:
            with httpx.Client(base_url=srv.url, timeout=30) as http:
                while not stop.is_set():
                    n = next(counter)
                    doc_id, text = f"w{worker}-{n}", f"{n} " + words(900_000 + n, n=40)
                    try:
                        if n % 5 == 0:  # some through the batch route
                            r = http.post(
                                "/v1/add/batch", json={"items": [{"id": doc_id, "text": text}]}
                            )
                        else:
                            r = http.post("/v1/check-and-add", json={"id": doc_id, "text": text})
                    except httpx.TransportError:
                        return  # the server died mid-request: not acknowledged
                    if r.status_code == 200:
                        body = r.json()
                        ok = body["results"][0]["id"] if "results" in body else body["added"]
                        assert ok
                        with lock:
                            acknowledged.append((doc_id, text))

        threads = [threading.Thread(target=send, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while len(acknowledged) < 300 and time.monotonic() < deadline:
            time.sleep(0.05)
        srv.kill()  # SIGKILL while the writers are still sending
        stop.set()
        for t in threads:
            t.join(60)

    assert len(acknowledged) >= 300
    with ServerProcess(data, *opts, env=env) as again:
        with httpx.Client(base_url=again.url, timeout=30) as http:
            missing = [
                doc_id
                for doc_id, text in acknowledged
                if http.get(f"/v1/documents/{doc_id}").status_code != 200
            ]
            assert missing == [], f"{len(missing)} acknowledged documents lost"
            for doc_id, text in acknowledged[:: max(1, len(acknowledged) // 40)]:
                assert http.get(f"/v1/documents/{doc_id}").json()["text"] == text
                r = http.post("/v1/check-and-add", json={"id": doc_id + "-again", "text": text})
                assert r.json()["added"] is False
                assert doc_id in [d["id"] for d in r.json()["duplicates"]]
            assert http.get("/v1/stats").json()["count"] >= len(acknowledged)


@pytest.mark.parametrize("writer", ["thread", "inline"])
def test_sigterm_applies_queued_writes_and_exits_cleanly(tmp_path: Path, writer: str) -> None:
    data = tmp_path / "store"
    env = {"NEARDUP_WRITER": writer}
    with ServerProcess(data, "--retention", "none", "--log-level", "info", env=env) as srv:
        r = httpx.post(srv.url + "/v1/add", json={"id": "kept", "text": words(1)})
        assert r.status_code == 200
        # uvicorn re-raises the signal after its graceful shutdown: exit status -SIGTERM
        assert srv.stop() in (0, -signal.SIGTERM)
        time.sleep(0.2)  # let the output pump read the last lines
        assert "Application shutdown complete" in "".join(srv.output)
    with ServerProcess(data, "--retention", "none") as again:
        assert httpx.get(again.url + "/v1/documents/kept").json()["text"] == words(1)
