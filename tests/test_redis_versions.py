"""RedisIndex / RedisDeduplicator: the versions of an id and the process cache, against a real
redis-server and a real 3-master Redis Cluster (fixtures from redis_servers).

A check-and-add of a stored id keeps the id's version until its decision (field ``o`` names the
version a write replaced); a write sent again after a lost reply answers as its first run; the
per-process cache of versions saves reads and never outlives a removal.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from typing import Any

import pytest

pytestmark = pytest.mark.redis

redis = pytest.importorskip("redis", reason="the [redis] extra is required")

from neardup.backends.redis import RedisDeduplicator, RedisIndex  # noqa: E402
from neardup.dedup import Deduplicator  # noqa: E402
from redis_servers import _words, fresh_ns  # noqa: E402


def test_the_data_cache_saves_reads_and_never_outlives_a_removal(
    redis_url: str,
    cluster_url: str,
) -> None:
    """A process keeps the data of the versions it wrote or read: a check whose near records
    are all known reads no data (no HMGET at all here), a likely copy of one is checked before
    anything is written, and the answers equal those of a process without the cache, also
    after another process removed a cached version (its records leave the buckets with its
    data, so the cache is never consulted for it)."""
    rng = random.Random(5)
    bases = [_words(rng, 60) for _ in range(12)]
    texts = []
    for b in bases:
        w = b.split()
        w[5] = "qqq"
        texts += [b, " ".join(w)]
    ns = fresh_ns()
    cached = RedisDeduplicator.from_url(redis_url, namespace=ns)
    admin = redis.Redis.from_url(redis_url)
    admin.config_resetstat()
    got = [cached.check_and_add(j, t) for j, t in enumerate(texts)]
    assert [ok for ok, _ in got] == [True, False] * len(bases)
    assert got[1][1][0].id == 0
    stats = admin.info("commandstats")
    assert stats.get("cmdstat_hmget") is None  # every near ref was known
    # A copy of a version this process just wrote is only checked (one read, confirmed):
    # one write per original, none for the copies (no ticket, no retraction); each check
    # reads the recent ring with its buckets (one more script).
    assert int(admin.get("{" + ns + "}:seq")) == len(bases)
    assert stats["cmdstat_evalsha"]["calls"] == 2 * len(bases)
    # (the one-text calls keep their versions in the core's engine: the Python cache is for
    # the other paths)
    engine = cached.index._engine
    assert engine is not None and len(engine) == len(bases)  # the rejected copies: not kept
    # Another process (its own cache) removes the originals; the cached process must not
    # match the copies against them.
    other = RedisDeduplicator.from_url(redis_url, namespace=ns, cache_size=0)
    for j in range(0, len(texts), 2):
        other.remove(j)
    again = [cached.check_and_add(100 + j, texts[j]) for j in range(1, len(texts), 2)]
    assert again == [(True, [])] * len(bases)
    fresh = [other.check(texts[j]) for j in range(0, len(texts), 2)]
    mine = [cached.check(texts[j]) for j in range(0, len(texts), 2)]
    assert mine == fresh and all(len(m) == 1 for m in mine)
    # The cache stays within its size.
    small = RedisIndex.from_url(redis_url, k=13, namespace=fresh_ns(), cache_size=10)
    small.check_and_add_many(list(range(50)), [rng.getrandbits(64) for _ in range(50)])
    assert len(small._cache) <= 10
    for url in (redis_url, cluster_url):  # (checked on a cluster too, where it is not used)
        for bad in (-1, 1.5, True, "10"):
            with pytest.raises(ValueError, match="cache_size"):
                RedisIndex.from_url(url, k=3, namespace=fresh_ns(), cache_size=bad)
    cached.index.clear()
    small.clear()


def test_a_rejected_replacement_keeps_the_ids_stored_version(any_url: str) -> None:
    """A check-and-add of an existing id that is rejected leaves the id's stored version as it
    was (it used to drop it before deciding, losing an acknowledged item); an added one
    replaces it, leaving no record of the old one. In a batch, each id ends naming its last
    added version, or the one it had before."""
    far, other, again = 0xFF00FF00FF00FF00, 0x0F0F0F0F0F0F0F0F, 0x3C3C3C3C3C3C3C3C
    idx = RedisIndex.from_url(any_url, k=13, namespace=fresh_ns())
    idx.add(1, 0b1111)
    idx.add(3, far)
    assert idx.check_and_add(3, 0b1100) == (False, [(1, 2)])
    assert idx.get(3)[0] == far and idx.query(far, 0) == [(3, 0)]
    assert idx.query(0b1100, 13) == [(1, 2)] and len(idx) == 2
    assert idx.check_and_add(3, other) == (True, [])
    assert idx.get(3)[0] == other and idx.query(far, 0) == [] and len(idx) == 2
    # A batch with the id twice: both rejected -> the version from before stays.
    res = idx.check_and_add_many([3, 3], [0b1101, 0b1110])
    assert [ok for ok, _ in res] == [False, False] and idx.get(3)[0] == other
    # Added, then rejected -> the added one stays, the one from before is gone.
    res = idx.check_and_add_many([3, 3], [again, 0b0111])
    assert [ok for ok, _ in res] == [True, False]
    assert idx.get(3)[0] == again and idx.query(other, 0) == [] and len(idx) == 2
    assert idx.query(0b0111, 13) == [(1, 1)]
    # A near-copy of the id's own version is a duplicate of it (as neardup.Index answers).
    assert idx.check_and_add(3, again ^ 1) == (False, [(3, 1)]) and idx.get(3)[0] == again
    idx.clear()
    # The same through the deduplicator's texts (the verifier path).
    rng = random.Random(9)
    a, b = _words(rng, 60), _words(rng, 60)
    d = RedisDeduplicator.from_url(any_url, namespace=fresh_ns())
    assert d.check_and_add("a", a)[0] and d.check_and_add("b", b)[0]
    added, matches = d.check_and_add("b", a.replace(a.split()[4], "zzz", 1))
    assert not added and [m.id for m in matches] == ["a"]
    assert d.get("b") == b and len(d) == 2 and [m.id for m in d.check(b)] == ["b"]
    local = Deduplicator()
    local.check_and_add("a", a)
    again = a + " again"
    want = local.check_and_add("a", again)
    assert d.check_and_add("a", again) == want and not want[0] and d.get("a") == a
    d.index.clear()


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("injected failure")


def test_an_error_between_the_write_and_the_decision_retracts_the_write(
    any_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A check-and-add that fails after its write and before its decision (here the index's
    decision, the read of the candidates' data, the deduplicator's verifier) retracts that
    write: the id names its stored version again, nothing new is counted or found, and the
    same call then succeeds. When the retraction fails too, the error says which versions
    stay stored."""
    far = 0xFF00FF00FF00FF00
    ns = fresh_ns()
    idx = RedisIndex.from_url(any_url, k=13, namespace=ns)
    idx.add("A", far)
    idx.add("B", 0b1111)
    failures: list[tuple[Any, str]] = [(idx, "_sorted")]  # (the decision of an item)
    if not idx.cluster:
        failures.append((idx, "_resolve"))  # (the read of the candidates' data)
    else:  # (the read of the probe buckets, inside the cluster's write of an item)
        from neardup.backends.redis_format import Probes

        failures.append((Probes, "near"))
    for obj, name in failures:
        with monkeypatch.context() as m:
            m.setattr(obj, name, _boom)
            with pytest.raises(RuntimeError, match="injected"):
                idx.check_and_add("A", 0b1110)
            with pytest.raises(RuntimeError, match="injected"):
                idx.check_and_add_many(["C", "A"], [0b0111, 0b1110])
        assert idx.get("A")[0] == far and len(idx) == 2, name
        assert idx.query(0b1110, 1) == [("B", 1)] and "C" not in idx, name
        if not idx.cluster:
            assert len(idx.client.keys(f"{ns}:d:*")) == 2, name
    assert idx.check_and_add("A", 0b1110) == (False, [("B", 1)])
    assert idx.check_and_add_many(["C", "A"], [0x0F0F0F0F0F0F0F0F, 0x3C3C3C3C3C3C3C3C]) == [
        (True, []),
        (True, []),
    ]
    assert len(idx) == 3 and idx.query(far, 0) == []
    # The retraction fails too: the error says so, and the write stays (the id names it).
    with monkeypatch.context() as m:
        m.setattr(idx, "_sorted", _boom)
        m.setattr(idx, "_settle", _boom)
        with pytest.raises(RuntimeError, match="injected") as err:
            idx.check_and_add("A", 0b1101)
    assert "could not be fully retracted" in " ".join(getattr(err.value, "__notes__", []))
    assert idx.get("A")[0] == 0b1101
    idx.clear()
    # The deduplicator: its verifier fails.
    rng = random.Random(11)
    a, b = _words(rng, 60), _words(rng, 60)
    d = RedisDeduplicator.from_url(any_url, namespace=fresh_ns())
    assert d.check_and_add("a", a) == (True, [])
    write_sha = d.index._write_script.sha.encode()
    real = d.index._link.exchange

    def lost(packed: bytes, feed: Any, rewind: Any) -> Any:
        out = real(packed, feed, rewind)  # (the server ran the write; its reply is lost)
        if write_sha in packed:
            raise RuntimeError("injected")
        return out

    with monkeypatch.context() as m:
        m.setattr(d, "_verify", _boom)  # (Python's path: a batch; on a cluster every call)
        with pytest.raises(RuntimeError, match="injected"):
            d.check_and_add_many(["x", "a"], [b, b])
        if not d.index.cluster:  # (the core's engine decides one text on one server)
            m.setattr(d.index._link, "exchange", lost)
        with pytest.raises(RuntimeError, match="injected"):
            d.check_and_add("a", b)
    assert d.get("a") == a and len(d) == 1 and d.check(b) == [] and "x" not in d
    assert d.stats()["adds"] == 1
    assert d.check_and_add("a", b) == (True, []) and d.get("a") == b and len(d) == 1
    assert d.check(a) == []
    d.index.clear()


def test_a_cluster_id_key_of_the_bare_ref_reads_as_a_chain(cluster_url: str) -> None:
    """On a cluster the id key holds the id's chain of versions; one written before that (the
    bare 8-byte ref, with the key's expiry) reads as a chain of that one version, so replacing
    the id then works as for any other."""
    far, other = 0xFF00FF00FF00FF00, 0x0F0F0F0F0F0F0F0F
    idx = RedisIndex.from_url(
        cluster_url, k=13, namespace=fresh_ns(), retention=3600.0, period=1800.0
    )
    idx.add("keep", 0b1111)
    idx.add("A", far)
    key = idx._idkey("sA")
    ttl = idx.client.ttl(key)
    idx.client.set(key, idx._ref_of("A").to_bytes(8, "big"), ex=ttl)  # (the bare ref)
    assert idx.check_and_add("A", 0b1100) == (False, [("keep", 2)])
    assert idx.get("A")[0] == far and len(idx) == 2
    assert abs(idx.client.ttl(key) - ttl) <= 2
    assert idx.check_and_add("A", other) == (True, [])
    assert idx.get("A")[0] == other and idx.query(far, 0) == [] and len(idx) == 2
    idx.remove("A")
    assert "A" not in idx and len(idx) == 1 and idx.query(other, 0) == []
    idx.clear()


def test_each_step_of_a_cluster_chain_sent_again_answers_the_same(
    cluster_url: str,
) -> None:
    """Each change of an id's chain on a cluster is safe to send again after a lost reply
    (redis-py's cluster client resends on a connection error): the second run answers as the
    first and leaves the chain as it was; a write of a ref cut meanwhile (sent again late) is
    refused, so it cannot bring back a dropped version."""
    from neardup.backends.redis_cluster import chain

    idx = RedisIndex.from_url(cluster_url, k=13, namespace=fresh_ns())
    key = idx._idkey("sA")

    def entry(ref: int) -> bytes:
        return ref.to_bytes(8, "big") + bytes(8)

    def run_twice(mode: str, *args: bytes) -> list[int]:
        first = chain(idx, "sA", mode, *args)
        after = idx.client.get(key)
        assert chain(idx, "sA", mode, *args) == first and idx.client.get(key) == after, mode
        return first

    assert run_twice("push", entry(1)) == []
    assert run_twice("push", entry(2)) == [1]
    assert run_twice("push", entry(3)) == [2]
    assert idx.client.get(key) == entry(3) + entry(2) + entry(1)
    assert run_twice("older", (2).to_bytes(8, "big")) == [1]
    assert run_twice("cut", (1).to_bytes(8, "big")) == []
    assert run_twice("cut", (3).to_bytes(8, "big")) == []
    assert idx._ref_of("A") == 2
    assert run_twice("push", entry(4)) == [2]
    assert run_twice("older") == [4, 2]
    assert run_twice("cut", (4).to_bytes(8, "big"), (2).to_bytes(8, "big")) == []
    with pytest.raises(KeyError):
        idx._ref_of("A")  # (only tombstones left, for a minute)
    assert 0 < idx.client.ttl(key) <= 60
    assert idx._chain_script(keys=[key], args=["push", entry(2)]) == [0]  # (refused)
    with pytest.raises(KeyError):
        idx._ref_of("A")
    assert run_twice("push", entry(5)) == [] and idx._ref_of("A") == 5
    assert idx.client.ttl(key) == -1  # (no retention: an entry without expiry)


@pytest.mark.parametrize("meanwhile", ["remove", "40 adds"])
def test_a_cluster_write_whose_chain_entry_was_cut_meanwhile_is_written_again(
    cluster_url: str,
    monkeypatch: pytest.MonkeyPatch,
    meanwhile: str,
) -> None:
    """A write's chain entry sent again late (its first reply lost) after another process
    removed the id, or replaced it more often than the chain keeps tombstones, meanwhile: the
    write starts over with a new ref (its entry refused, or accepted and found without
    data), so the id names it and nothing another process dropped comes back."""
    idx = RedisIndex.from_url(cluster_url, k=13, namespace=fresh_ns())
    other = RedisIndex.from_url(cluster_url, k=13, namespace=idx.namespace)
    idx.add("keep", 0b1111)
    idx.add("A", 0xFF00FF00FF00FF00)
    real = idx._chain_script
    pushes: list[bytes] = []

    def lost_then_late(keys: Any, args: Any, client: Any = None) -> Any:
        if args[0] == "push" and not pushes:
            pushes.append(args[1])
            real(keys=keys, args=args)  # it ran; the reply never came, and before the
            if meanwhile == "remove":  # resend another process removed or replaced the id
                other.remove("A")
            else:
                for j in range(40):
                    other.add("A", 0xABCD << 20 | j)
        return real(keys=keys, args=args)

    monkeypatch.setattr(idx, "_chain_script", lost_then_late)
    fp = 0x0F0F0F0F0F0F0F0F
    assert idx.check_and_add("A", fp) == (True, [])
    monkeypatch.undo()
    assert pushes and idx._ref_of("A") != int.from_bytes(pushes[0][:8], "big")
    assert idx.get("A")[0] == fp and len(idx) == 2
    assert idx.query(fp, 0) == [("A", 0)] and idx.query(0xFF00FF00FF00FF00, 0) == []
    assert idx.query(0xABCD << 20, 8) == []
    idx.clear()


def test_a_check_and_add_older_than_the_retention_keeps_the_ids_version(
    any_url: str,
) -> None:
    """A check-and-add whose timestamp is past the retention (its keys would expire at once)
    keeps its keys until it is decided: rejected, the id names its stored version as before;
    added, it is in no live period (expired) and replaces nothing it should not."""
    now = time.time()
    idx = RedisIndex.from_url(any_url, k=13, namespace=fresh_ns(), retention=3600.0, period=1800.0)
    idx.add("keep", 0b1111, timestamp=now)
    idx.add("A", 0xFF00FF00FF00FF00, timestamp=now)
    assert idx.check_and_add("A", 0b1110, timestamp=now - 20000.0) == (False, [("keep", 1)])
    assert idx.get("A")[0] == 0xFF00FF00FF00FF00 and len(idx) == 2
    assert idx.check_and_add("B", 0x0F0F0F0F0F0F0F0F, timestamp=now - 20000.0) == (True, [])
    assert "B" not in idx and len(idx) == 2 and idx.query(0x0F0F0F0F0F0F0F0F, 0) == []
    idx.clear()


def test_a_cluster_namespace_from_before_the_chains_is_upgraded(
    cluster_url: str,
) -> None:
    """A cluster namespace's settings name its id keys' layout (chains), so a version that
    keeps bare refs there refuses it; one written before that is upgraded on open."""
    idx = RedisIndex.from_url(cluster_url, k=3, namespace=fresh_ns())
    stored = json.loads(idx.client.get(idx._k_config))
    assert stored["id_keys"] == "chain"
    del stored["id_keys"]
    idx.client.set(idx._k_config, json.dumps(stored, sort_keys=True))
    again = RedisIndex.from_url(cluster_url, k=3, namespace=idx.namespace)
    assert json.loads(again.client.get(again._k_config))["id_keys"] == "chain"
    idx.clear()


def test_cluster_writes_that_fail_part_way_leave_nothing_behind(
    cluster_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a cluster: a plain add that fails before the id names it is undone (its records
    would answer queries, and nothing would drop them); a check-and-add whose version another
    process dropped before its ticket, and whose ticket step then fails, leaves the count
    right; an id replaced many times keeps at most 32 tombstones; the claim and the ticket
    answer as their first run when sent again (a lost reply)."""
    idx = RedisIndex.from_url(cluster_url, k=13, namespace=fresh_ns())
    other = RedisIndex.from_url(cluster_url, k=13, namespace=idx.namespace)
    idx.add("keep", 0b1111)
    real_chain = idx._chain_script

    def push_fails(keys: Any, args: Any, client: Any = None) -> Any:
        return _boom() if args[0] == "push" else real_chain(keys=keys, args=args)

    with monkeypatch.context() as m:
        m.setattr(idx, "_chain_script", push_fails)
        with pytest.raises(RuntimeError, match="injected"):
            idx.add("A", 0xFF00FF00FF00FF00)
    assert "A" not in idx and idx.query(0xFF00FF00FF00FF00, 0) == [] and len(idx) == 1
    real_ticket = idx._ticket_script

    def dropped_then_failing(*args: Any, **kwargs: Any) -> Any:
        other.add("A", 0x0F0F0F0F0F0F0F0F)  # drops the version being written
        raise RuntimeError("injected failure")

    with monkeypatch.context() as m:
        m.setattr(idx, "_ticket_script", dropped_then_failing)
        with pytest.raises(RuntimeError, match="injected"):
            idx.check_and_add("A", 0x3C3C3C3C3C3C3C3C)
    assert idx._ticket_script is real_ticket
    assert idx.get("A")[0] == 0x0F0F0F0F0F0F0F0F and len(idx) == 2
    assert idx.query(0x3C3C3C3C3C3C3C3C, 0) == []
    for j in range(80):
        idx.add("B", j << 20)
    assert len(idx.client.get(idx._idkey("sB"))) <= 16 * (1 + 32) and len(idx) == 3
    # The claim and the ticket, each sent twice.
    x = idx._prepare("C", 0xAAAA, None, {}, 13)
    assert idx._claim_script(keys=[x.datakey], args=[x.expire_at, *x.fields]) == 1
    assert idx._claim_script(keys=[x.datakey], args=[x.expire_at, *x.fields]) == 1
    tk_keys = [idx._k_seq, idx._k_tickets + "0", idx._k_count + "0", idx._k_horizon]
    first = idx._ticket_script(keys=tk_keys, args=[f"{x.ref:016x}", 0])
    assert idx._ticket_script(keys=tk_keys, args=[f"{x.ref:016x}", 0]) == first
    assert len(idx) == 4
    idx.clear()


def test_expire_counts_only_live_periods(any_url: str) -> None:
    """An item written with a timestamp past the retention counts in a period that is no
    longer live (for the short while its keys stay): expire() does not count it, even when the
    stored horizon has fallen behind the live periods."""
    idx = RedisIndex.from_url(any_url, k=3, namespace=fresh_ns(), retention=2.0, period=1.0)
    t0 = time.time()
    assert idx.expire(t0) == 0  # (the horizon: t0's period)
    time.sleep(3.2)  # (now the first live period is after it)
    p0 = idx._period_of(t0)
    assert idx.check_and_add("B", 0x0F0F0F0F0F0F0F0F, timestamp=p0 + 0.5) == (True, [])
    assert "B" not in idx and len(idx) == 0
    assert idx.expire(time.time()) == 0
    idx.add("C", 0xF0F0F0F0F0F0F0F0)
    assert idx.expire(time.time() + 1e6) == 1 and len(idx) == 0
    idx.clear()


def test_a_batch_with_replacements_equals_the_one_by_one_loop(any_url: str) -> None:
    """A version an earlier item of the batch replaced (or rejected) is not counted by the
    later items, as in a loop of single calls; a restored id key keeps its version's expiry."""
    far = 0xFF00FF00FF00FF00
    ops = [("A", far), ("B", 0b1), ("A", 0b1000), ("C", far ^ 0b11), ("A", far ^ 1)]
    answers = []
    for batch in (False, True):
        idx = RedisIndex.from_url(any_url, k=13, namespace=fresh_ns())
        idx.add("A", 0)
        if batch:
            answers.append(idx.check_and_add_many([i for i, _ in ops], [f for _, f in ops]))
        else:
            answers.append([idx.check_and_add(i, f) for i, f in ops])
        assert idx.get("A")[0] == far and idx.query(0, 0) == [] and len(idx) == 2
        idx.clear()
    assert answers[0] == answers[1]
    assert [ok for ok, _ in answers[0]] == [True, True, False, False, False]


def test_a_restored_id_keeps_its_versions_expiry(any_url: str) -> None:
    """A rejected check-and-add with an older timestamp than the id's stored version points the
    id back at it with that version's time to live, not the rejected write's."""
    now = time.time()
    idx = RedisIndex.from_url(any_url, k=13, namespace=fresh_ns(), retention=3600.0, period=1800.0)
    idx.add("keep", 0b1111, timestamp=now)
    idx.add("A", 0xFF00FF00FF00FF00, timestamp=now)
    added, matches = idx.check_and_add("A", 0b1110, timestamp=now - 2000.0)
    assert not added and matches == [("keep", 1)]
    ref = idx._ref_of("A")
    key_ttl, data_ttl = idx.client.pttl(idx._idkey("sA")), idx.client.pttl(idx._datakey(ref))
    assert data_ttl > 0 and abs(key_ttl - data_ttl) < 2000
    assert idx.get("A")[0] == 0xFF00FF00FF00FF00 and len(idx) == 2
    idx.clear()


@pytest.mark.parametrize("k", [3, 13])
def test_a_write_sent_again_after_a_lost_reply_is_answered_as_its_first_run(
    redis_url: str,
    k: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The link sends a call again when its connection fails; when the server had run the
    script and only the reply was lost, the second run finds its own version (same ref, same
    id) and answers what the first did: added, not a duplicate of itself (both the in-script
    path, k = 3, and the ticketed one)."""
    from neardup.backends import redis_link

    real = redis_link._Socket.roundtrip
    lost = []

    def reply_lost_once(self: Any, packed: bytes, n: int) -> list[Any]:
        if not lost and b"EVALSHA" in packed:
            lost.append(real(self, packed, n))  # the server ran it; the reply never arrives
            raise ConnectionResetError("connection reset after the write")
        return real(self, packed, n)

    idx = RedisIndex.from_url(redis_url, k=k, namespace=fresh_ns())
    idx.add("other", 0xFF00FF00FF00FF00)
    idx.add("old", 0xF0F0F0F0F0F0F0F0)
    monkeypatch.setattr(redis_link._Socket, "roundtrip", reply_lost_once)
    assert idx.check_and_add("new", 0b1011) == (True, [])
    assert lost and idx.query(0b1011, 0) == [("new", 0)] and len(idx) == 3
    assert idx.check_and_add("copy", 0b1010) == (False, [("new", 1)])
    # Replacing an id: the first run's replaced version is still dropped.
    lost.clear()
    assert idx.check_and_add("old", 0x0F0F0F0F0F0F0F0F) == (True, [])
    assert lost and idx.query(0xF0F0F0F0F0F0F0F0, 0) == [] and len(idx) == 3
    lost.clear()
    idx.add("old", 0x3C3C3C3C3C3C3C3C)  # a plain add
    assert lost and idx.query(0x0F0F0F0F0F0F0F0F, 0) == [] and len(idx) == 3
    idx.clear()


def test_a_lost_reply_of_the_drop_of_a_replaced_version_is_harmless(
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The script that names the version an added one replaced only reads: sent again after a
    lost reply it answers the same, and the replaced version is dropped."""
    from neardup.backends import redis_link

    real = redis_link._Socket.roundtrip
    calls: list[int] = []

    def second_script_reply_lost(self: Any, packed: bytes, n: int) -> list[Any]:
        if b"EVALSHA" in packed:
            calls.append(1)
            if len(calls) == 2:
                real(self, packed, n)
                raise ConnectionResetError("connection reset")
        return real(self, packed, n)

    idx = RedisIndex.from_url(redis_url, k=3, namespace=fresh_ns())
    idx.add("A", 0xF0F0F0F0F0F0F0F0)
    monkeypatch.setattr(redis_link._Socket, "roundtrip", second_script_reply_lost)
    idx.add("A", 0x0F0F0F0F0F0F0F0F)
    assert len(calls) >= 2 and len(idx) == 1
    assert idx.query(0xF0F0F0F0F0F0F0F0, 0) == [] and idx.get("A")[0] == 0x0F0F0F0F0F0F0F0F
    idx.clear()


def _written(idx: RedisIndex, id: str, fp: int) -> tuple[str, int, Any]:
    """The write of a check-and-add of ``(id, fp)`` at the index's k, not yet decided."""
    x = idx._prepare(id, fp, None, {}, idx.k)
    return (x.idenc, x.fp, idx._write_many([x])[0])


@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize(
    ("outcome", "final"), [((False, False), "far"), ((False, True), 2), ((True, True), 2)]
)
def test_two_processes_replacing_one_id_at_once_leave_one_version(
    any_url: str,
    first: int,
    outcome: tuple[bool, bool],
    final: Any,
) -> None:
    """Two processes write a new version of the same id at once (each replacing what it saw),
    then decide in either order: the id ends naming the last added version or, if neither was
    added, the one from before; no other version of it stays stored (no version that answers
    queries but that the id no longer names), and the count is right."""
    far = 0xFF00FF00FF00FF00
    fps = [0b1100 if not ok else far ^ (0xF << (8 * j + 8)) for j, ok in enumerate(outcome)]
    p1 = RedisIndex.from_url(any_url, k=13, namespace=fresh_ns())
    p2 = RedisIndex.from_url(any_url, k=13, namespace=p1.namespace)
    p1.add("keep", 0b1111)
    p1.add("A", far)
    writes = [_written(p1, "A", fps[0]), _written(p2, "A", fps[1])]
    for j in (first, 1 - first):
        idenc, fp, w = writes[j]
        (p1, p2)[j]._settle([(idenc, fp, w, outcome[j])])
    want = far if final == "far" else fps[1]
    assert p1.get("A")[0] == want and len(p1) == 2
    for fp in {far, *fps} - {want}:
        assert ("A", 0) not in p1.query(fp, 0), hex(fp)
    p1.remove("A")
    assert "A" not in p1 and len(p1) == 1 and p1.query(want, 0) == []
    p1.clear()


@pytest.mark.parametrize("added", [False, True])
def test_remove_while_a_replacement_is_undecided_removes_every_version(
    any_url: str,
    added: bool,
) -> None:
    """remove(id) from another process while a check-and-add of the id is written but not yet
    decided: the id is gone afterwards, with every version of it."""
    far = 0xFF00FF00FF00FF00
    p1 = RedisIndex.from_url(any_url, k=13, namespace=fresh_ns())
    p2 = RedisIndex.from_url(any_url, k=13, namespace=p1.namespace)
    p1.add("keep", 0b1111)
    p1.add("A", far)
    idenc, fp, w = _written(p1, "A", 0b1100 if not added else far ^ 0xFF00)
    p2.remove("A")
    p1._settle([(idenc, fp, w, added)])
    assert "A" not in p1 and len(p1) == 1
    assert p1.query(far, 0) == [] and p1.query(fp, 0) == []
    p1.clear()


def test_three_processes_replacing_one_id_in_every_order_leave_one_version(
    any_url: str,
) -> None:
    """Three writes of one id in flight at once, every outcome and every order of decisions:
    the id ends naming the last written version that was added (the one from before if none
    was), nothing else of it stays stored, and remove(id) then leaves nothing."""
    far = 0xFF00FF00FF00FF00
    ns = fresh_ns()
    procs = [RedisIndex.from_url(any_url, k=13, namespace=ns) for _ in range(3)]
    for outcome in itertools.product((False, True), repeat=3):
        fps = [0b1100 ^ j if not ok else far ^ (0xF << (8 * j + 8)) for j, ok in enumerate(outcome)]
        for order in itertools.permutations(range(3)):
            idx = procs[0]
            idx.add("keep", 0b1111)
            idx.add("A", far)
            writes = [_written(procs[j], "A", fps[j]) for j in range(3)]
            for j in order:
                idenc, fp, w = writes[j]
                procs[j]._settle([(idenc, fp, w, outcome[j])])
            added = [fps[j] for j in range(3) if outcome[j]]
            want = added[-1] if added else far
            assert idx.get("A")[0] == want and len(idx) == 2, (outcome, order)
            for fp in {far, *fps} - {want}:
                assert ("A", 0) not in idx.query(fp, 0), (outcome, order, hex(fp))
            idx.remove("A")
            assert "A" not in idx and len(idx) == 1 and idx.query(want, 0) == []
            idx.clear()
