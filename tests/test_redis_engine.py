"""RedisDeduplicator on one server: one text's check-and-add decided by the core's engine
(crates/neardup-core/src/redis_call), against a real redis-server (fixtures from
redis_servers).

The engine replaces Python's path for that call and must be indistinguishable from it on the
wire and in its answers: the same requests, byte for byte, and the same decisions; what it
leaves to Python (versions stored without a sketch, a server that lost its scripts, a reply
lost after the write) must still end as Python's path ends.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

pytestmark = pytest.mark.redis

redis = pytest.importorskip("redis", reason="the [redis] extra is required")

from neardup.backends import redis_index, redis_link, redis_onetext  # noqa: E402
from neardup.backends.redis import RedisDeduplicator  # noqa: E402
from neardup.backends.redis_dedup import _utf8  # noqa: E402
from redis_servers import _words, fresh_ns  # noqa: E402


def _texts(rng: random.Random) -> list[str]:
    """Originals, exact copies, copies with a word changed and unrelated texts, mixed; and
    texts the core prepares as the policy does (an HTML page's main text, a short text at
    the short radius, Chinese, case and width folded, a lone surrogate), each with a copy."""
    bases = [_words(rng, 50) for _ in range(12)]
    out = []
    for j, b in enumerate(bases):
        w = b.split()
        w[3] = "zzz"
        out += [b, " ".join(w)] if j % 3 else [b, b, _words(rng, 50)]
    page = (
        "<html><head><title>t</title><script>var x = 1;</script></head><body><nav>home | news"
        f"</nav><article><p>{_words(rng, 60)}</p><p>{_words(rng, 40)}</p></article></body></html>"
    )
    short = _words(rng, 12)
    chinese = "今天北京的天气很好，我们一起去公园散步，然后在湖边喝茶聊天。" * 3
    odd = "ＦＵＬＬ width and MiXeD case " + _words(rng, 20) + " \ud83d"  # (half an emoji)
    for t in (page, short, chinese, odd):
        out += [t, t.replace("e", "E", 1)]
    rng.shuffle(out)
    return out


def _run(url: str, ns: str, core: bool, cache_size: int) -> tuple[list[Any], list[bytes]]:
    """Process A adds texts, then B check-and-adds a mix against them and its own: B's
    answers and the requests it sent (refs and timestamps fixed)."""
    rng = random.Random(21)
    # Refs by call (the engine draws one for each call, Python's path only for a write).
    at = [0, 0]

    def ref() -> int:
        at[1] += 1
        return at[0] << 16 | at[1]

    def call(n: int) -> None:
        at[0], at[1] = n, 0

    a = RedisDeduplicator.from_url(url, namespace=ns)
    b = RedisDeduplicator.from_url(url, namespace=ns, cache_size=cache_size)
    if not core:
        b.index._engine = None
    sent: list[bytes] = []
    real, real_exchange = redis_link.ServerLink.roundtrip_packed, redis_link.ServerLink.exchange

    def recording(link: Any, packed: bytes, n: int) -> list[Any]:
        if link is b.index._link:
            sent.append(packed)
        return real(link, packed, n)

    def exchanging(link: Any, packed: bytes, feed: Any, rewind: Any) -> Any:
        if link is b.index._link:
            sent.append(packed)
        return real_exchange(link, packed, feed, rewind)

    got = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(redis_onetext, "new_ref", ref)
        m.setattr(redis_index, "new_ref", ref)
        for j in range(8):
            call(1000 + j)
            a.check_and_add(f"a{j}", _words(rng, 50), timestamp=100.0 + j)
        texts = _texts(rng)
        m.setattr(redis_link.ServerLink, "roundtrip_packed", recording)
        m.setattr(redis_link.ServerLink, "exchange", exchanging)
        for j, t in enumerate(texts):
            call(j + 1)
            got.append(b.check_and_add(j, t, timestamp=200.0 + j))
            if j % 7 == 3:  # (A writes meanwhile: B hears of it through the ring)
                call(2000 + j)
                a.check_and_add(f"late{j}", t if j % 2 else _words(rng, 50), timestamp=300.0)
            if j % 7 == 5 and j + 1 < len(texts):  # (A adds B's next text first: B writes,
                call(3000 + j)  # reads A's data, and its write is rejected and retracted)
                a.check_and_add(f"next{j}", texts[j + 1], timestamp=300.0)
    b.index.clear()
    a.close()
    b.close()
    return got, sent


@pytest.mark.parametrize("cache_size", [65_536, 6])
def test_the_engine_sends_python_s_requests_and_gives_its_answers(
    redis_url: str, cache_size: int
) -> None:
    """(With a cache of 6 versions, most calls evict: candidates read again, in pieces.)"""
    ns = fresh_ns()
    got, sent = _run(redis_url, ns, True, cache_size)
    want, expected = _run(redis_url, ns, False, cache_size)
    assert got == want
    assert [ok for ok, _ in got].count(False) >= 10  # (the copies: some guessed, some not)
    # (every kind of request: writes, reads of a likely copy, reads of candidates' data)
    assert sent
    kinds = {packed.split(b"\r\n")[2] for packed in sent}
    assert kinds == {b"EVALSHA", b"MGET", b"HMGET"}
    assert len(sent) == len(expected)
    for j, (mine, python) in enumerate(zip(sent, expected)):
        assert mine == python, j


def test_versions_stored_without_a_sketch_are_verified_from_their_texts(
    redis_url: str,
) -> None:
    """Versions written before sketches were stored (only their text): the engine asks
    Python for their sketches, and the answers equal those of a process without the
    engine."""
    rng = random.Random(22)
    ns = fresh_ns()
    old = RedisDeduplicator.from_url(redis_url, namespace=ns)
    bases = [_words(rng, 40) for _ in range(5)]
    for j, t in enumerate(bases):
        norm, fp, _ = old._prepare_one(t)
        x = old.index._prepare(j, fp, None, {"x": _utf8(t)}, None)  # (no "h")
        old.index._write_many([x])
    assert old.index.client.hget(old.index._datakey(x.ref), "h") is None
    d = RedisDeduplicator.from_url(redis_url, namespace=ns)
    plain = RedisDeduplicator.from_url(redis_url, namespace=ns, cache_size=0)
    assert d.index._engine is not None and plain.index._engine is None
    # (two old versions near one text: both asked for, nearest first)
    twin = bases[0].replace(bases[0].split()[7], "www", 1)
    norm, fp, _ = old._prepare_one(twin)
    old.index._write_many([old.index._prepare(9, fp, None, {"x": _utf8(twin)}, None)])
    copies = [b.replace(b.split()[2], "qqq", 1) for b in bases]
    want = [plain.check(t) for t in copies]
    got = [d.check_and_add(100 + j, t) for j, t in enumerate(copies)]
    assert got == [(False, w) for w in want]
    assert [len(w) for w in want] == [2, 1, 1, 1, 1]
    assert [m[0].id for _, m in got][1:] == list(range(1, 5))
    assert {m.id for m in got[0][1]} == {0, 9}
    assert len(d) == 6  # (nothing of the copies stays)
    d.index.clear()


def test_a_server_that_lost_its_scripts_gets_them_again(redis_url: str) -> None:
    """After SCRIPT FLUSH the engine's write is answered NOSCRIPT (nothing written): Python's
    path loads the script and runs the call; the engine's next call that reads the recent
    ring meets the other lost script, and Python's path loads that one; then the calls are the
    engine's again."""
    rng = random.Random(23)
    ns = fresh_ns()
    d = RedisDeduplicator.from_url(redis_url, namespace=ns)
    admin = redis.Redis.from_url(redis_url)
    first, second, third = (_words(rng, 40) for _ in range(3))
    here: list[str] = []
    real = RedisDeduplicator._check_and_add_here

    def noted(self: RedisDeduplicator, id: Any, text: str, ts: Any) -> Any:
        here.append(id)
        return real(self, id, text, ts)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(RedisDeduplicator, "_check_and_add_here", noted)
        assert d.check_and_add(1, first) == (True, [])
        admin.script_flush()
        assert d.check_and_add(2, second) == (True, [])  # (the write: NOSCRIPT)
        assert here == [2]
        assert d.check_and_add(3, third) == (True, [])
        ok, matches = d.check_and_add(4, second)  # (its guess's check: the ring's NOSCRIPT)
        assert here == [2, 4]
        assert not ok and [m.id for m in matches] == [2]
        ok, matches = d.check_and_add(5, second)
        assert here == [2, 4] and not ok and [m.id for m in matches] == [2]
    assert len(d) == 3 and int(admin.get("{" + ns + "}:seq")) == 3
    d.index.clear()


def test_threads_sharing_one_engine_keep_exactly_one_of_a_copy(redis_url: str) -> None:
    """Eight threads of one process (one engine, a connection each) and another process
    send copies of one text at once: exactly one is added, the others name it."""
    rng = random.Random(24)
    ns = fresh_ns()
    d = RedisDeduplicator.from_url(redis_url, namespace=ns)
    other = RedisDeduplicator.from_url(redis_url, namespace=ns)
    for j in range(20):
        d.check_and_add(f"bg{j}", _words(rng, 40))
    text = _words(rng, 60)
    start = threading.Barrier(9)
    out: dict[str, tuple[bool, list[Any]]] = {}

    def send(dedup: RedisDeduplicator, name: str) -> None:
        start.wait()
        out[name] = dedup.check_and_add(name, text)

    threads = [threading.Thread(target=send, args=(d, f"t{j}")) for j in range(8)]
    threads.append(threading.Thread(target=send, args=(other, "p")))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    added = [name for name, (ok, _) in out.items() if ok]
    assert len(added) == 1
    assert all(m[0].id == added[0] for ok, m in out.values() if not ok)
    assert len(d) == 21
    d.index.clear()
