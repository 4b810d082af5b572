"""How the one-server link waits for replies, against a real redis-server (fixtures from
redis_servers): redis-py's ``socket_timeout`` still ends a wait for a server that does not
answer (the kernel keeps it, so that Python need not poll before each send and receive), the
short poll before sleeping (``spin_us``) gives the same answers as sleeping at once, and the
option is checked wherever it is given.
"""

from __future__ import annotations

import random
import time

import pytest

pytestmark = pytest.mark.redis

redis = pytest.importorskip("redis", reason="the [redis] extra is required")

from neardup.backends.redis import RedisDeduplicator, RedisIndex  # noqa: E402
from redis_servers import _words, fresh_ns  # noqa: E402


def test_spin_us_is_checked_wherever_it_is_given(redis_url: str) -> None:
    for bad in (-1, True, 1.5, 2_000_000):
        with pytest.raises(ValueError, match="spin_us"):
            RedisIndex.from_url(redis_url, namespace=fresh_ns(), spin_us=bad)
        with pytest.raises(ValueError, match="spin_us"):
            RedisDeduplicator(redis.Redis.from_url(redis_url), namespace=fresh_ns(), spin_us=bad)
    with pytest.raises(ValueError, match="spin_us=.soon. is not a valid int"):
        RedisIndex.from_url(f"{redis_url}?spin_us=soon")
    index = RedisIndex.from_url(f"{redis_url}?spin_us=0&namespace={fresh_ns()}")
    assert index._link.spin_us == 0
    d = RedisDeduplicator.from_url(f"{redis_url}?spin_us=50&namespace={fresh_ns()}")
    assert d.index._link.spin_us == 50
    assert RedisDeduplicator.from_url(redis_url, namespace=fresh_ns()).index._link.spin_us == 200


def test_polling_first_or_sleeping_at_once_gives_the_same_answers(redis_url: str) -> None:
    rng = random.Random(11)
    bases = [_words(rng, 40) for _ in range(30)]
    texts = []
    for b in bases:
        w = b.split()
        w[rng.randrange(len(w))] = "zzz"
        texts += [b, " ".join(w), b]
    rng.shuffle(texts)
    answers = []
    for spin in (0, 200, 1_000_000):
        d = RedisDeduplicator.from_url(redis_url, namespace=fresh_ns(), spin_us=spin)
        got = [d.check_and_add(i, t) for i, t in enumerate(texts)]
        answers.append([(added, [(m.id, m.distance) for m in ms]) for added, ms in got])
    assert answers[0] == answers[1] == answers[2]
    assert sum(added for added, _ in answers[0]) == len(bases)


def test_socket_timeout_still_ends_the_wait_for_a_silent_server(redis_url: str) -> None:
    ns = fresh_ns()
    d = RedisDeduplicator.from_url(f"{redis_url}?socket_timeout=0.25", namespace=ns)
    index = RedisIndex.from_url(f"{redis_url}?socket_timeout=0.25", namespace=fresh_ns())
    text = _words(random.Random(3), 60)
    assert d.check_and_add(1, text)[0]
    index.add(7, 0x1234)
    admin = redis.Redis.from_url(redis_url)
    for call in (lambda: d.check(text), lambda: index.query(0x1234, 3)):
        admin.execute_command("CLIENT", "PAUSE", 2000, "ALL")  # (no command runs meanwhile)
        try:
            t0 = time.monotonic()
            with pytest.raises(redis.exceptions.TimeoutError):
                call()
            assert time.monotonic() - t0 < 1.5  # (two tries of 0.25 s, not the whole pause)
        finally:
            admin.execute_command("CLIENT", "UNPAUSE")
    # The server answers again: the link reconnects and both work as before.
    assert [m.id for m in d.check(text)] == [1]
    assert index.query(0x1234, 3) == [(7, 0)]
