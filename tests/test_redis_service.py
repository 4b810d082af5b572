"""``neardup serve --store redis://...``: two real service processes share one Redis.

Each server is a real ``neardup serve`` subprocess on a free loopback port (the harness of the
service tests) whose store is a real redis-server (or the 3-master cluster) started by the
fixtures of tests/redis_servers.py.
"""

from __future__ import annotations

import concurrent.futures
import random
from pathlib import Path

import httpx
import pytest

pytest.importorskip("redis", reason="the [redis] extra is required")
pytest.importorskip("fastapi", reason="the [service] extra is required")

from redis_servers import fresh_ns  # noqa: E402
from test_service_harness import ServerProcess, post  # noqa: E402

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def _text(rng: random.Random, n: int = 120) -> str:
    vocab = ["".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(300)]
    return " ".join(rng.choice(vocab) for _ in range(n))


def test_two_services_share_one_redis(any_url: str, tmp_path: Path) -> None:
    """An add through one service is seen by the other; near-copies sent to both at once are
    added exactly once; a removal through one is seen by the other."""
    store = f"{any_url}{'&' if '?' in any_url else '?'}namespace={fresh_ns()}"
    rng = random.Random(3)
    first = _text(rng)
    args = ("--store", store, "--retention", "none")
    with ServerProcess(tmp_path / "a", *args) as a, ServerProcess(tmp_path / "b", *args) as b:
        r = post(a.url + "/v1/add", {"id": "doc-1", "text": first})
        assert r.status_code == 200, r.text
        # b sees a's add, by text and by id
        r = post(b.url + "/v1/check", {"text": first.replace(first.split()[5], "other", 1)})
        assert r.status_code == 200, r.text
        assert [d["id"] for d in r.json()["duplicates"]] == ["doc-1"]
        assert httpx.get(b.url + "/v1/documents/doc-1", timeout=30).json()["text"] == first
        # near-copies raced through both services: exactly one added per group
        jobs = []
        for g in range(8):
            base = _text(rng)
            for j in range(4):
                words = base.split()
                words[rng.randrange(len(words))] = f"edit{j}"
                jobs.append(((a, b)[j % 2].url, f"g{g}-{j}", " ".join(words)))
        rng.shuffle(jobs)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            replies = list(
                pool.map(
                    lambda job: post(job[0] + "/v1/check-and-add", {"id": job[1], "text": job[2]}),
                    jobs,
                )
            )
        assert all(r.status_code == 200 for r in replies), [r.text for r in replies]
        added = sorted(r.json()["id"].split("-")[0] for r in replies if r.json()["added"])
        assert added == [f"g{g}" for g in range(8)]
        # near-copies spread over batch requests sent at once to both services: added exactly
        # once per group too
        batches: list[tuple[str, list[dict[str, str]]]] = [
            ((a, b)[k % 2].url, []) for k in range(6)
        ]
        for g in range(8):
            base = _text(rng)
            for j in range(6):
                words = base.split()
                words[rng.randrange(len(words))] = f"edit{j}"
                batches[(g + j) % 6][1].append({"id": f"h{g}-{j}", "text": " ".join(words)})
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            replies = list(
                pool.map(
                    lambda job: post(job[0] + "/v1/check-and-add/batch", {"items": job[1]}),
                    batches,
                )
            )
        assert all(r.status_code == 200 for r in replies), [r.text for r in replies]
        results = [x for r in replies for x in r.json()["results"]]
        added = sorted(x["id"].split("-")[0] for x in results if x["added"])
        assert added == [f"h{g}" for g in range(8)]
        for srv in (a, b):
            stats = httpx.get(srv.url + "/v1/stats", timeout=30).json()
            assert stats.get("count", stats.get("documents")) == 17, stats
        # a removal through b is seen by a
        assert httpx.delete(b.url + "/v1/documents/doc-1", timeout=30).status_code in (200, 204)
        assert httpx.get(a.url + "/v1/documents/doc-1", timeout=30).status_code == 404


def test_no_refusal_for_a_text_never_stored(any_url: str, tmp_path: Path) -> None:
    """Issue 26's race through two services: A stored; 20 near-copies B of A (each also near
    C) and C (near the Bs, not near A) sent at once through both. Every B names A; C, near only
    texts that are never stored, is added; every refusal names stored texts."""
    from test_redis import _issue_texts, _vocab

    store = f"{any_url}{'&' if '?' in any_url else '?'}namespace={fresh_ns()}"
    rng = random.Random(26)
    vocab = _vocab(rng)
    args = ("--store", store, "--retention", "none")
    with ServerProcess(tmp_path / "a", *args) as a, ServerProcess(tmp_path / "b", *args) as b:
        for trial in range(10):
            text_a, bs, c = _issue_texts(rng, vocab)
            r = post(a.url + "/v1/check-and-add", {"id": f"A{trial}", "text": text_a})
            assert r.json()["added"], r.text
            jobs = [(f"B{trial}-{i}", t) for i, t in enumerate(bs)] + [(f"C{trial}", c)]
            rng.shuffle(jobs)
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                replies = list(pool.map(
                    lambda j: post((a, b)[hash(j[0]) % 2].url + "/v1/check-and-add",
                                   {"id": j[0], "text": j[1]}),
                    jobs,
                ))  # fmt: skip
            for r in replies:
                assert r.status_code == 200, r.text
                got = r.json()
                names = [d["id"] for d in got["duplicates"]]
                if got["id"].startswith("B"):
                    assert not got["added"] and f"A{trial}" in names
                else:
                    assert got["added"], got
                for name in names:
                    assert httpx.get(f"{b.url}/v1/documents/{name}", timeout=30).status_code == 200


def test_batch_writes_run_beside_checks_and_end_with_the_service(redis_url: str) -> None:
    """On a Redis store the service runs batch writes on threads of their own, several at
    once: a check sent while a template's batches take turns is answered before the first of
    them is done (it does not queue behind them for a reader thread), every batch is answered,
    and a batch sent after the service stopped is a 503 ('unavailable'), not an error of a
    thread pool."""
    import asyncio

    import orjson
    from neardup.backends.redis import RedisDeduplicator
    from neardup.service.core import DedupService
    from neardup.service.errors import ApiError
    from neardup.service.settings import Settings

    url = f"{redis_url}{'&' if '?' in redis_url else '?'}namespace={fresh_ns()}"
    rng = random.Random(5)
    notice = "dear customer, your order {} has shipped; do not reply to this message"
    bodies = [
        orjson.dumps({"items": [{"id": f"{b}-{i}", "text": notice.format(rng.randrange(10**9))}
                                for i in range(1000)]})
        for b in range(6)
    ]  # fmt: skip
    service = DedupService(
        Settings(store=url, retention=None, read_threads=2), RedisDeduplicator.from_url(url)
    )

    async def run() -> int:
        await service.start()
        writes = [asyncio.create_task(service.check_and_add_batch(b)) for b in bodies]
        await asyncio.sleep(0.01)
        await service.check(orjson.dumps({"text": notice.format(7)}))
        pending = sum(not w.done() for w in writes)
        answers = [orjson.loads(r)["results"] for r in await asyncio.gather(*writes)]
        assert [len(a) for a in answers] == [1000] * 6
        await service.stop()
        with pytest.raises(ApiError) as refused:
            await service.check_and_add_batch(bodies[0])
        assert refused.value.code == "unavailable" and refused.value.status == 503
        return pending

    assert asyncio.run(run()) == len(bodies)
