"""Issue 23, service: a timestamp no store can keep, or one already outside the retention window,
is refused with 422 ``invalid_timestamp`` naming the field (never a 500), and nothing of the
request is stored, a batch included, also after a restart."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from _helpers import words
from test_service_harness import ServerProcess, post

# (timestamp, what the message says)
BAD = [
    (1e16, "1e+16"),
    (1e15 + 1e6, "within"),
    (1e308, "within"),
    (0, "older than the retention window"),
    (time.time() - 3 * 86400, "older than the retention window"),
    # inside the window by less than the margin: the store, checking again when it writes a
    # moment later, refused it there (a 500, and a batch's earlier chunks written)
    (time.time() - 86400 + 20, "older than the retention window"),
    (-1.0, "non-negative"),
]


def _refused(resp: httpx.Response, field: str, says: str) -> None:
    assert resp.status_code == 422, resp.text
    err = resp.json()["error"]
    assert err["code"] == "invalid_timestamp"
    assert err["field"] == field
    assert field in err["message"] and says in err["message"]


def _absent(url: str, id: str, text: str) -> None:
    assert httpx.get(f"{url}/v1/documents/{id}", timeout=30).status_code == 404
    found = post(url + "/v1/check", {"text": text}).json()["duplicates"]
    assert id not in [d["id"] for d in found]


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "fastapi-only"])
def test_a_bad_timestamp_is_refused_and_nothing_is_stored(tmp_path: Path, fast_path: bool) -> None:
    args = ["--retention", "1d", *([] if fast_path else ["--no-fast-path"])]
    sent: list[tuple[str, str]] = []
    with ServerProcess(tmp_path / "store", *args) as srv:
        url = srv.url
        for n, (ts, says) in enumerate(BAD):
            for route in ("add", "check-and-add"):
                id, text = f"{route}-{n}", words(100 * n + len(route))
                _refused(
                    post(f"{url}/v1/{route}", {"id": id, "text": text, "timestamp": ts}),
                    "timestamp",
                    says,
                )
                # a batch with one such item is refused whole
                items: list[dict[str, Any]] = [
                    {"id": f"{id}-ok", "text": words(100 * n + len(route) + 50)},
                    {"id": f"{id}-bad", "text": text, "timestamp": ts},
                ]
                _refused(
                    post(f"{url}/v1/{route}/batch", {"items": items}), "items[1].timestamp", says
                )
                sent += [(id, text), (f"{id}-bad", text), (f"{id}-ok", items[0]["text"])]
        for id, text in sent:
            _absent(url, id, text)
        assert httpx.get(url + "/v1/stats", timeout=30).json()["count"] == 0
        # the same text is then new, and a timestamp inside the window is kept
        resp = post(url + "/v1/check-and-add", {"id": "again", "text": sent[0][1]})
        assert resp.json()["added"] is True
        recent = time.time() - 3600
        resp = post(url + "/v1/add", {"id": "recent", "text": words(9999), "timestamp": recent})
        assert resp.status_code == 200 and resp.json()["timestamp"] == recent
        assert srv.stop() in (0, -signal.SIGTERM)

    with ServerProcess(tmp_path / "store", *args) as srv:
        for id, text in sent:
            _absent(srv.url, id, text)
        for id in ("again", "recent"):
            assert httpx.get(f"{srv.url}/v1/documents/{id}", timeout=30).status_code == 200
        assert httpx.get(srv.url + "/v1/stats", timeout=30).json()["count"] == 2


def test_a_text_damaged_behind_a_saved_engine_is_answered_as_damage(tmp_path: Path) -> None:
    """A byte of a stored text flipped after a clean stop: the saved engine lets the service
    start without reading the texts, and a read of that document answered 500
    internal_error with a traceback in the log; it names the damage and the repair, and the
    service stays up for the other documents."""
    root = tmp_path / "store"
    marker = "zqxj marker text of the damaged document, long enough to be a real text"
    items = [{"id": f"d{i}", "text": f"{words(i, n=30)}"} for i in range(20)]
    items.append({"id": "hit", "text": marker})
    srv = ServerProcess(root, "--retention", "none").start()
    try:
        assert post(srv.url + "/v1/add/batch", {"items": items}).status_code == 200
        srv.stop()  # (graceful: the engine is saved beside the texts)
    finally:
        srv.kill()
    assert (root / "texts.engine").exists()
    data = (root / "texts.sqlite").read_bytes()
    at = data.index(marker.encode())
    (root / "texts.sqlite").write_bytes(data[:at] + b"\xff\xfe" + data[at + 2 :])
    with ServerProcess(root, "--retention", "none") as srv:
        r = httpx.get(srv.url + "/v1/documents/hit", timeout=30)
        assert r.status_code == 500, r.text
        error = r.json()["error"]
        assert error["code"] == "store_damaged", error
        assert "texts.sqlite" in error["message"] and "neardup repair" in error["message"]
        assert httpx.get(srv.url + "/v1/documents/d3", timeout=30).status_code == 200
        assert srv.alive
