"""RedisDeduplicator on one server: the recent ring, through which each process learns the
newest versions other processes wrote, and guesses that a text is a copy of one of them
(against a real redis-server; fixtures from redis_servers).

The guess only picks the cheaper way (check first, write only if no stored near-duplicate is
confirmed): the answers must equal those of a process that never guesses.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

pytestmark = pytest.mark.redis

redis = pytest.importorskip("redis", reason="the [redis] extra is required")

from neardup.backends import redis_link  # noqa: E402
from neardup.backends.redis import RedisDeduplicator  # noqa: E402
from neardup.backends.redis_lua import RECENT_SIZE  # noqa: E402
from redis_servers import _words, fresh_ns  # noqa: E402


def _copies(rng: random.Random, n: int, words: int = 60) -> tuple[list[str], list[str]]:
    """``n`` texts and a copy of each with one word changed (Jaccard well above 0.8)."""
    bases = [_words(rng, words) for _ in range(n)]
    copies = []
    for b in bases:
        w = b.split()
        w[5] = "qqq"
        copies.append(" ".join(w))
    return bases, copies


class _RoundTrips:
    """Counts the round trips of this process's one-server links (the real ones run)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = redis_link._Socket.roundtrip
        real_exchange = redis_link._Socket.exchange

        def counted(sock: Any, packed: bytes, n: int) -> list[Any]:
            self.n += 1
            return real(sock, packed, n)

        def exchanged(sock: Any, packed: bytes, feed: Any) -> Any:  # (the core's engine)
            self.n += 1
            return real_exchange(sock, packed, feed)

        monkeypatch.setattr(redis_link._Socket, "roundtrip", counted)
        monkeypatch.setattr(redis_link._Socket, "exchange", exchanged)


def _two_processes(url: str) -> tuple[str, Any, RedisDeduplicator, RedisDeduplicator]:
    """A fresh namespace, an admin client and two deduplicators on it (each its own cache,
    as two processes have)."""
    ns = fresh_ns()
    a = RedisDeduplicator.from_url(url, namespace=ns)
    b = RedisDeduplicator.from_url(url, namespace=ns)
    return ns, redis.Redis.from_url(url), a, b


def _seq(admin: Any, ns: str) -> int:
    return int(admin.get("{" + ns + "}:seq") or 0)


def test_a_copy_of_another_process_text_costs_one_read_and_no_write(
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Process A adds texts; process B (its own cache) sends copies of them: each copy is
    answered by one round trip (buckets, the original's data and the recent ring together),
    takes no ticket and writes nothing, and B's answers equal those of a process without
    the cache. Texts B sends that are not copies are added as usual."""
    rng = random.Random(11)
    bases, copies = _copies(rng, 10)
    ns, admin, a, b = _two_processes(redis_url)
    plain = RedisDeduplicator.from_url(redis_url, namespace=ns, cache_size=0)
    assert a.index._watching and b.index._watching and not plain.index._watching
    for j, t in enumerate(bases):
        assert a.check_and_add(j, t) == (True, [])
    b.check_and_add("first", _words(rng, 60))  # (B reads the ring with this call)
    tickets = _seq(admin, ns)
    expected = [plain.check(t) for t in copies]
    trips = _RoundTrips(monkeypatch)
    got = [b.check_and_add(100 + j, t) for j, t in enumerate(copies)]
    assert trips.n == len(copies)
    assert _seq(admin, ns) == tickets  # nothing written
    assert [ok for ok, _ in got] == [False] * len(copies)
    assert [m for _, m in got] == expected
    assert [m[0].id for _, m in got] == list(range(len(copies)))
    # New texts from B still go the usual way.
    for j in range(3):
        assert b.check_and_add(200 + j, _words(rng, 60)) == (True, [])
    assert _seq(admin, ns) == tickets + 3


def _wide(url: str) -> tuple[RedisDeduplicator, RedisDeduplicator, list[str]]:
    """At radius 40: process A adds six texts (so does a process without the cache, on a
    namespace of its own); B (the process under test) and that plain process, and B's texts:
    four new ones, then a copy of A's third."""
    rng = random.Random(12)
    ns, ns_plain = fresh_ns(), fresh_ns()
    a = RedisDeduplicator.from_url(url, namespace=ns, k=40)
    b = RedisDeduplicator.from_url(url, namespace=ns, k=40)
    plain = RedisDeduplicator.from_url(url, namespace=ns_plain, k=40, cache_size=0)
    bases, copies = _copies(rng, 6, 40)
    for j, t in enumerate(bases):
        assert a.check_and_add(j, t) == plain.check_and_add(j, t) == (True, [])
    return b, plain, [_words(rng, 40) for _ in range(4)] + [copies[2]]


def _same_answers(
    b: RedisDeduplicator, plain: RedisDeduplicator, texts: list[str], got: list[Any]
) -> None:
    """B's answers to ``texts`` equal the plain process's: four added, the copy caught."""
    want = [plain.check_and_add(10 + j, t) for j, t in enumerate(texts)]
    assert got == want
    assert [ok for ok, _ in got] == [True] * 4 + [False]
    assert got[4][1][0].id == 2
    assert b.stats()["documents"] == 10


@pytest.mark.parametrize("watching", [True, False])
def test_a_wrong_guess_still_adds_the_text(
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
    watching: bool,
) -> None:
    """At a wide radius every recent version of another process is near: B's first text
    guesses A's versions (data not yet read) as likely copies, but it fails the Jaccard
    check, so it is checked, then added. The answers equal those of a process that never
    guesses, and a copy is still caught. (Python's path: the guess of the core's engine is
    tested below.)"""
    b, plain, texts = _wide(redis_url)
    b.index._engine = None
    b.index._watching = watching
    b.check(texts[0], k=0)  # (B hears of A's versions, reads none of their data)
    guesses: list[bool] = []  # (per call: whether another process's version was guessed)
    real = RedisDeduplicator._likely_duplicate

    def noted(self: RedisDeduplicator, *args: Any) -> tuple[bool, dict[int, int]]:
        out = real(self, *args)
        guesses.append(bool(out[1]))
        return out

    monkeypatch.setattr(RedisDeduplicator, "_likely_duplicate", noted)
    got = [b.check_and_add(10 + j, t) for j, t in enumerate(texts)]
    # (the first guess reads the data of A's versions; later ones find them cached)
    assert guesses == [watching, False, False, False, False]
    monkeypatch.undo()
    _same_answers(b, plain, texts, got)


def test_a_wrong_guess_of_the_core_s_engine_still_adds_the_text(
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same as above through the core's engine (one text's check-and-add decided in
    Rust), seen from its round trips: B's first text guesses A's versions (heard of through
    B's check, data not yet read), reads them with its check (one round trip), fails the
    Jaccard check and is written (one more); then A's versions are cached and fail the guess
    without a read (one round trip each), and the copy is answered by a read alone."""
    b, plain, texts = _wide(redis_url)
    assert b.index._engine is not None and plain.index._engine is None
    b.check(texts[0], k=0)
    trips = _RoundTrips(monkeypatch)
    got = []
    per_call = []
    for j, t in enumerate(texts):
        before = trips.n
        got.append(b.check_and_add(10 + j, t))
        per_call.append(trips.n - before)
    assert per_call == [2, 1, 1, 1, 1]
    monkeypatch.undo()
    _same_answers(b, plain, texts, got)
    assert len(b.index._engine) == 6 + 4  # (A's six read, B's four added)


def test_the_ring_keeps_the_newest_writes_across_its_wrap(redis_url: str) -> None:
    """A reader learns exactly the records written since its last call, also when they
    cross the end of the server's ring, and the newest RECENT_SIZE of them after a long
    silence."""
    rng = random.Random(13)
    ns, _, a, b = _two_processes(redis_url)
    probe = _words(rng, 30)

    def added(n: int, start: int) -> list[int]:
        texts = [_words(rng, 20) for _ in range(n)]
        return a.add_many(list(range(start, start + n)), texts)

    def seen(fps: list[int]) -> bool:
        cache = b.index._cache
        return all(fp in cache.seen_near(fp, 0).values() for fp in fps)

    first = added(RECENT_SIZE - 5, 0)
    b.check(probe)
    assert b.index._seen == RECENT_SIZE - 5 and seen(first[-100:])
    wrap = added(10, 10_000)  # tickets RECENT_SIZE - 4 .. RECENT_SIZE + 5: across the end
    b.check(probe)
    assert b.index._seen == RECENT_SIZE + 5 and seen(wrap)
    many = added(RECENT_SIZE + 300, 20_000)  # more than the ring holds
    b.check(probe)
    assert b.index._seen == 2 * RECENT_SIZE + 305
    assert seen(many[-RECENT_SIZE:])
    assert not any(fp in b.index._cache.seen_near(fp, 0).values() for fp in many[:300])


def test_a_server_that_lost_its_scripts_only_skips_one_ring_read(
    redis_url: str,
) -> None:
    """After SCRIPT FLUSH the ring's read is answered NOSCRIPT: the check still answers,
    the script is loaded again, and the next call reads everything since."""
    rng = random.Random(14)
    bases, copies = _copies(rng, 4)
    ns, admin, a, b = _two_processes(redis_url)
    a.check_and_add(0, bases[0])
    b.check(bases[0])
    admin.script_flush()
    for j in (1, 2, 3):
        a.check_and_add(j, bases[j])
    assert [m.id for m in b.check(copies[1])] == [1]  # (its ring read failed: skipped)
    assert b.index._seen == 1
    assert [m.id for m in b.check(copies[2])] == [2]
    assert b.index._seen == 4
    assert b.check_and_add(9, copies[3])[0] is False


def test_a_namespace_cleared_by_another_process_is_heard_of_again(
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the ticket counter starts over (the namespace cleared by another process, a
    server that lost its data), a reader goes on from the new counter: copies of texts
    written afterwards are again answered by one round trip."""
    rng = random.Random(15)
    bases, copies = _copies(rng, 6)
    ns, _, a, b = _two_processes(redis_url)
    for j in range(20):
        a.add(1000 + j, _words(rng, 30))
    b.check(bases[0])
    assert b.index._seen == 20
    a.index.clear()
    for j in range(3):
        a.check_and_add(j, bases[j])
    b.check(_words(rng, 30))  # (reads the counter, now lower)
    assert b.index._seen == 3
    for j in range(3, 6):
        a.check_and_add(j, bases[j])
    b.check(_words(rng, 30))  # (a process hears of others' writes with its own calls)
    assert b.index._seen == 6
    trips = _RoundTrips(monkeypatch)
    got = [b.check_and_add(100 + j, copies[j]) for j in range(3, 6)]
    assert trips.n == 3
    assert [m[0].id for ok, m in got if not ok] == [3, 4, 5]
