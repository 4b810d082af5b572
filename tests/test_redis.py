"""RedisIndex / RedisDeduplicator against a real redis-server and a real 3-master Redis Cluster.

The servers are the fixtures of tests/redis_servers.py (free loopback ports, no persistence).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.redis

redis = pytest.importorskip("redis", reason="the [redis] extra is required")  # noqa: F841

from neardup import IncompatibleIndexError, Index  # noqa: E402
from neardup.backends.redis import (  # noqa: E402
    BlockLayout,
    RedisDeduplicator,
    RedisIndex,
    connect,
    default_blocks,
)
from neardup.backends.redis_format import pack_record  # noqa: E402
from neardup.dedup import Deduplicator, Policy  # noqa: E402
from redis_servers import (  # noqa: E402
    RedisServer,
    _words,
    fresh_ns,
)

# -- data ------------------------------------------------------------------------------------


def clustered_fps(rng: random.Random, groups: int, per_group: int, spread: int) -> list[int]:
    """``groups`` random centres with ``per_group`` copies each, 0..spread bits flipped."""
    out = []
    for _ in range(groups):
        c = rng.getrandbits(64)
        for _ in range(per_group):
            f = c
            for b in rng.sample(range(64), rng.randint(0, spread)):
                f ^= 1 << b
            out.append(f)
    return out


def brute(items: dict[Any, int], q: int, k: int) -> set[tuple[Any, int]]:
    return {(i, (q ^ f).bit_count()) for i, f in items.items() if (q ^ f).bit_count() <= k}


# -- layout ----------------------------------------------------------------------------------


@pytest.mark.parametrize("blocks", [1, 3, 4, 7, 13, 64])
def test_layout_blocks_cover_the_64_bits(blocks: int) -> None:
    layout = BlockLayout(blocks)
    assert sum(layout.widths) == 64 and len(layout.widths) == blocks
    assert max(layout.widths) - min(layout.widths) <= 1
    fp = random.Random(blocks).getrandbits(64)
    rebuilt = 0
    for v, s in zip(layout.values(fp), layout.shifts):
        rebuilt |= v << s
    assert rebuilt == fp


def test_layout_pigeonhole_probes_find_every_neighbour() -> None:
    """For random pairs within k, some probe of a equals the block value of b."""
    rng = random.Random(5)
    for k in range(0, 13):
        layout = BlockLayout(default_blocks(k))
        for _ in range(200):
            a = rng.getrandbits(64)
            b = a
            for bit in rng.sample(range(64), k):
                b ^= 1 << bit
            probes = set(layout.probes(a, k))
            assert any((i, v) in probes for i, v in enumerate(layout.values(b))), (k, a, b)


def test_layout_rejects_bad_blocks() -> None:
    with pytest.raises(ValueError, match="blocks"):
        BlockLayout(0)
    with pytest.raises(ValueError, match="blocks"):
        BlockLayout(65)


# -- contract against brute force -----------------------------------------------------------


def test_query_matches_brute_force(any_url: str) -> None:
    """Every stored item within k (inclusive), never one farther, nearest first: random and
    clustered data, k from 0 to beyond the index's k, after replaces and removes."""
    rng = random.Random(11)
    idx = RedisIndex.from_url(any_url, k=3, namespace=fresh_ns())
    fps = clustered_fps(rng, 40, 5, 6) + [rng.getrandbits(64) for _ in range(100)]
    items: dict[Any, int] = {}
    for j, f in enumerate(fps):
        key: Any = j if j % 3 else f"doc-{j}"
        idx.add(key, f)
        items[key] = f
    # replace some, remove some
    for key in list(items)[:10]:
        items[key] = rng.getrandbits(64)
        idx.add(key, items[key])
    for key in list(items)[10:20]:
        idx.remove(key)
        del items[key]
    assert len(idx) == len(items)
    queries = fps[:40] + [rng.getrandbits(64) for _ in range(10)]
    for q in queries:
        for k in (0, 1, 2, 3, 5, 7):
            got = idx.query(q, k)
            assert set(got) == brute(items, q, k), (q, k)
            assert [d for _, d in got] == sorted(d for _, d in got)
    assert idx.query(fps[0]) == idx.query(fps[0], 3)
    idx.clear()


def test_query_at_the_policy_radius(redis_url: str) -> None:
    """k = 12 (the default policy's radius) uses wider blocks probed within radius 1."""
    rng = random.Random(12)
    idx = RedisIndex.from_url(redis_url, k=12, namespace=fresh_ns())
    assert idx.layout.blocks == 7 and idx.layout.radius(12) == 1
    fps = clustered_fps(rng, 20, 4, 14)
    items = dict(enumerate(fps))
    for i, f in items.items():
        idx.add(i, f)
    for q in fps[:30]:
        for k in (4, 12, 13):
            assert set(idx.query(q, k)) == brute(items, q, k)
    idx.clear()


def test_remove_get_contains_and_errors(any_url: str) -> None:
    idx = RedisIndex.from_url(any_url, k=3, namespace=fresh_ns())
    idx.add(7, 0xFFFF, timestamp=1000.0)
    idx.add("a|b{c}", 0xFFFF)  # separators and hash-tag braces inside an id are fine
    assert 7 in idx and "a|b{c}" in idx and 8 not in idx
    assert idx.get(7) == (0xFFFF, 1000.0)
    assert {i for i, _ in idx.query(0xFFFF, 0)} == {7, "a|b{c}"}
    idx.remove(7)
    assert 7 not in idx and len(idx) == 1
    with pytest.raises(KeyError, match="7"):
        idx.remove(7)
    with pytest.raises(KeyError):
        idx.get(7)
    with pytest.raises(ValueError, match="fingerprint"):
        idx.add(1, -1)
    with pytest.raises(ValueError, match="fingerprint"):
        idx.add(1, 1 << 64)
    with pytest.raises(TypeError, match="fingerprint"):
        idx.add(1, "12")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="id"):
        idx.add(1.5, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must"):
        idx.query(3, 65)
    with pytest.raises(ValueError, match="namespace"):
        RedisIndex(idx.client, namespace="a{b}")
    idx.clear()


def test_settings_are_stored_and_checked(redis_url: str) -> None:
    ns = fresh_ns()
    RedisIndex.from_url(redis_url, k=3, namespace=ns).add(1, 5)
    again = RedisIndex.from_url(redis_url + f"?namespace={ns}", k=3)
    assert again.namespace == ns and again.query(5, 0) == [(1, 0)]
    with pytest.raises(IncompatibleIndexError, match="k: stored 3, given 4"):
        RedisIndex.from_url(redis_url, k=4, namespace=ns)
    with pytest.raises(IncompatibleIndexError, match="retention"):
        RedisIndex.from_url(redis_url, k=3, namespace=ns, retention=60.0)
    again.clear()


def test_url_options_and_bad_urls(redis_url: str) -> None:
    client, options = connect(redis_url + "?namespace=abc&retention=60&socket_timeout=5")
    assert options == {"namespace": "abc", "retention": 60.0}
    assert client.ping()
    with pytest.raises(ValueError, match="scheme"):
        connect("http://localhost:6379")
    with pytest.raises(ValueError, match="retention"):
        connect(redis_url + "?retention=soon")


def test_password_is_passed_through(tmp_path: Path) -> None:
    """Auth from the URL reaches the server (and a wrong password is refused)."""
    server = RedisServer(tmp_path, "--requirepass", "s3cret")
    try:
        url = f"redis://:s3cret@127.0.0.1:{server.port}/0"
        d = RedisDeduplicator.from_url(url, namespace=fresh_ns())
        d.add(1, "hello world, this is a text")
        assert d.get(1) == "hello world, this is a text"
        assert "s3cret" not in repr(d) and "s3cret" not in str(d.stats())
        with pytest.raises(redis.AuthenticationError):
            RedisIndex.from_url(f"redis://:wrong@127.0.0.1:{server.port}/0")
    finally:
        server.stop()


def test_the_hot_path_uses_the_urls_connection_options(tmp_path: Path) -> None:
    """The one-server link writes to connections redis-py opened from the URL: the password,
    the db number and a unix socket apply to check-and-add as to everything else."""
    sock = tmp_path / "redis.sock"
    server = RedisServer(tmp_path, "--requirepass", "s3cret", "--unixsocket", str(sock))
    try:
        urls = [
            f"redis://:s3cret@127.0.0.1:{server.port}/3?",
            f"unix://{sock}?db=3&password=s3cret&",
        ]
        for url in urls:
            ns = fresh_ns()
            idx = RedisIndex.from_url(f"{url}namespace={ns}", k=3)
            assert idx.check_and_add(1, 0xF0) == (True, [])
            assert idx.check_and_add(2, 0xF1) == (False, [(1, 1)])
            text = "a text long enough to have a few shingles of its own"
            d = RedisDeduplicator.from_url(f"{url}namespace={ns}t")
            assert d.check_and_add("a", text) == (True, [])
            assert [m.id for m in d.check_and_add("b", text + "!")[1]] == ["a"]
            admin = redis.Redis(port=server.port, password="s3cret", db=3)
            assert admin.exists("{" + ns + "}:config") and admin.get("{" + ns + "}:seq") == b"1"
            assert not redis.Redis(port=server.port, password="s3cret").exists("{" + ns + "}:seq")
    finally:
        server.stop()


# -- retention -------------------------------------------------------------------------------


def test_retention_uses_redis_expiry_and_expire_hides_periods(redis_url: str) -> None:
    ns = fresh_ns()
    idx = RedisIndex.from_url(redis_url, k=3, namespace=ns, retention=2.0, period=1.0)
    now = time.time()
    idx.add("old", 0xABC, timestamp=now - 60)  # long expired: never visible
    idx.add("new", 0xABC, timestamp=now)
    idx.add("older", 0xABD, timestamp=now - 1.5)
    assert {i for i, _ in idx.query(0xABC, 1)} <= {"new", "older"}
    assert "new" in idx and "old" not in idx
    # Every key carries its period's expiry time: Redis deletes it, no scan needed.
    bucket = idx._bucket(idx._period_of(now), 0, idx.layout.values(0xABC)[0])
    ttl = idx.client.pttl(bucket)
    assert 0 < ttl <= 3000
    # expire() hides whole periods at once (before the server-side expiry).
    gone = idx.expire(now + 1.0)
    assert gone >= 1
    assert idx.query(0xABC, 1) == [] and len(idx) == 0
    # And Redis drops the keys by itself.
    deadline = time.time() + 6
    while time.time() < deadline and idx.client.exists(bucket):
        time.sleep(0.2)
    assert not idx.client.exists(bucket)
    assert not idx.client.exists(idx._idkey("snew"))


# -- check-and-add ---------------------------------------------------------------------------


def test_check_and_add_sequential(any_url: str) -> None:
    idx = RedisIndex.from_url(any_url, k=3, namespace=fresh_ns())
    assert idx.check_and_add(1, 0b1111) == (True, [])
    added, matches = idx.check_and_add(2, 0b0111)
    assert not added and matches == [(1, 1)]
    assert 2 not in idx and len(idx) == 1  # the loser left no trace
    assert idx.query(0b0111, 3) == [(1, 1)]
    assert idx.check_and_add(3, 0b1111 ^ (0b1111 << 20)) == (True, [])
    idx.clear()


def _race_worker(
    url: str, ns: str, k: int, jobs: list[tuple[Any, int]], start: Any, out: Any
) -> None:
    idx = RedisIndex.from_url(url, k=k, namespace=ns)
    start.wait()
    results = [(i, idx.check_and_add(i, f)[0]) for i, f in jobs]
    out.put(results)


def _race_text_worker(url: str, ns: str, jobs: list[tuple[Any, str]], start: Any, out: Any) -> None:
    d = RedisDeduplicator.from_url(url, namespace=ns)
    start.wait()
    out.put([(i, d.check_and_add(i, t)[0]) for i, t in jobs])


def _run_race(target: Any, args_per_proc: list[tuple[Any, ...]]) -> list[tuple[Any, bool]]:
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, start, out)) for a in args_per_proc]
    for p in procs:
        p.start()
    time.sleep(1.0)  # let every process import and connect, then release them at once
    start.set()
    results: list[tuple[Any, bool]] = []
    for _ in procs:
        results += out.get(timeout=120)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return results


@pytest.mark.slow
def test_racing_processes_add_exactly_one_near_copy(any_url: str) -> None:
    """6 processes send near-copies (pairwise <= 2 bits apart) of 30 fingerprints at once, in
    different orders: of each group exactly one is added, and nothing else is lost."""
    rng = random.Random(21)
    ns = fresh_ns()
    RedisIndex.from_url(any_url, k=3, namespace=ns)
    centres = [rng.getrandbits(64) for _ in range(30)]
    procs = 6
    per_proc: list[list[tuple[Any, int]]] = [[] for _ in range(procs)]
    for g, c in enumerate(centres):
        for p in range(procs):
            per_proc[p].append((f"g{g}-p{p}", c ^ (1 << rng.randrange(64))))
    for jobs in per_proc:
        rng.shuffle(jobs)
    results = _run_race(_race_worker, [(any_url, ns, 3, jobs) for jobs in per_proc])
    added = [i for i, ok in results if ok]
    per_group: dict[str, int] = {}
    for i in added:
        g = i.split("-")[0]
        per_group[g] = per_group.get(g, 0) + 1
    assert per_group == {f"g{g}": 1 for g in range(len(centres))}
    idx = RedisIndex.from_url(any_url, k=3, namespace=ns)
    assert len(idx) == len(centres)
    assert sorted(added) == sorted(str(i) for c in centres for i, _ in idx.query(c, 1))
    idx.clear()


@pytest.mark.slow
def test_racing_processes_texts_with_the_verifier(any_url: str) -> None:
    """RedisDeduplicator (default policy, Jaccard verifier): 4 processes race near-copies of
    12 texts (one word changed each): exactly one of each group is added."""
    rng = random.Random(22)
    ns = fresh_ns()
    RedisDeduplicator.from_url(any_url, namespace=ns)
    bases = [_words(rng, 120) for _ in range(12)]
    procs = 4
    per_proc: list[list[tuple[Any, str]]] = [[] for _ in range(procs)]
    for g, base in enumerate(bases):
        for p in range(procs):
            words = base.split()
            words[rng.randrange(len(words))] = "changed"
            per_proc[p].append((f"g{g}-p{p}", " ".join(words)))
    for jobs in per_proc:
        rng.shuffle(jobs)
    results = _run_race(_race_text_worker, [(any_url, ns, jobs) for jobs in per_proc])
    groups = sorted(i.split("-")[0] for i, ok in results if ok)
    assert groups == sorted(f"g{g}" for g in range(len(bases)))
    d = RedisDeduplicator.from_url(any_url, namespace=ns)
    assert len(d) == len(bases)
    d.index.clear()


# -- the deduplicator ------------------------------------------------------------------------


def test_redis_deduplicator_matches_the_in_process_one(any_url: str) -> None:
    """The same operations give the same answers as neardup.Deduplicator (default policy)."""
    rng = random.Random(31)
    bases = [_words(rng, 80) for _ in range(15)]
    texts = []
    for b in bases:
        texts.append(b)
        w = b.split()
        w[3] = "zzz"
        texts.append(" ".join(w))
        texts.append(_words(rng, 30))
    local = Deduplicator()
    shared = RedisDeduplicator.from_url(any_url, namespace=fresh_ns())
    for j, t in enumerate(texts):
        got = shared.check_and_add(j, t, timestamp=1000.0 + j)
        want = local.check_and_add(j, t, timestamp=1000.0 + j)
        assert got[0] == want[0], j
        assert [(m.id, m.distance) for m in got[1]] == [(m.id, m.distance) for m in want[1]]
        for ma, mb in zip(got[1], want[1]):
            assert ma.similarity == pytest.approx(mb.similarity)
    for t in texts[:10]:
        assert shared.check(t) == local.check(t)
    assert len(shared) == len(local)
    assert shared.get(0) == texts[0]
    shared.remove(0)
    local.remove(0)
    assert shared.check(texts[0]) == local.check(texts[0])
    assert 0 not in shared and 3 in shared
    with pytest.raises(KeyError):
        shared.get(0)
    with pytest.raises(TypeError, match="text"):
        shared.check(b"bytes")  # type: ignore[arg-type]
    stats = shared.stats()
    assert stats["documents"] == len(local) and stats["policy"] == Policy.default().to_dict()
    shared.index.clear()


@pytest.mark.parametrize(
    ("verifier", "k"), [("jaccard", None), ("levenshtein", None), ("none", None), ("none", 3)]
)
def test_redis_deduplicator_verifiers_one_by_one_and_in_batches(
    redis_url: str, verifier: str, k: int | None
) -> None:
    """Each verifier gives neardup.Deduplicator's answers, one call at a time and in one
    pipelined batch (the Jaccard one from the sketches stored with the texts). Without a
    verifier at a radius below the blocks, the index decides inside its script: no bucket is
    read by the client (no MGET)."""
    rng = random.Random(57)
    texts = []
    for _ in range(12):
        b = _words(rng, 60)
        w = b.split()
        w[5] = "qqq"
        texts += [b, " ".join(w), _words(rng, 25)]
    rng.shuffle(texts)
    policy = Policy(verifier=verifier)
    if k is not None:
        policy = policy.replace(k_short=k, k_long=k)
    local = Deduplicator(policy=policy)
    want = [local.check_and_add(j, t, timestamp=100.0 + j) for j, t in enumerate(texts)]
    assert 0 < sum(ok for ok, _ in want) < len(texts)
    admin = redis.Redis.from_url(redis_url)
    for batch in (False, True):
        mgets = admin.info("commandstats").get("cmdstat_mget", {}).get("calls", 0)
        shared = RedisDeduplicator.from_url(redis_url, namespace=fresh_ns(), policy=policy)
        stamps = [100.0 + j for j in range(len(texts))]
        if batch:
            got = shared.check_and_add_many(list(range(len(texts))), texts, stamps)
        else:
            got = [
                shared.check_and_add(j, t, timestamp=ts)
                for j, (t, ts) in enumerate(zip(texts, stamps))
            ]
        for j, ((ok, ms), (wok, wms)) in enumerate(zip(got, want)):
            assert ok == wok, (batch, j)
            assert [(m.id, m.distance) for m in ms] == [(m.id, m.distance) for m in wms]
            for ma, mb in zip(ms, wms):
                assert (ma.similarity is None) == (mb.similarity is None)
                if mb.similarity is not None:
                    assert ma.similarity == pytest.approx(mb.similarity)
        in_script = admin.info("commandstats").get("cmdstat_mget", {}).get("calls", 0) == mgets
        assert in_script == (k is not None)
        assert len(shared) == sum(ok for ok, _ in want)
        shared.index.clear()


def test_stored_sketches_and_versions_without_one(redis_url: str) -> None:
    """With the Jaccard verifier each stored version keeps its text's sketch (field h: the
    sorted distinct shingle hashes of the prepared text); a version stored without one (an
    earlier writer) is verified from its text, with the same scores."""
    from neardup.verify import normalise, sketch

    rng = random.Random(61)
    base = _words(rng, 50)
    near = base.replace(base.split()[2], "zzz", 1)
    d = RedisDeduplicator.from_url(redis_url, namespace=fresh_ns())
    assert d.check_and_add("a", base) == (True, [])
    ref = int.from_bytes(_raw(d.index, d.index._idkey("sa")), "big")
    stored = d.index.client.hget(d.index._datakey(ref), "h")
    assert stored == sketch(normalise(base), 5).hashes.astype("<u4").tobytes()
    want = d.check(near)
    assert [m.id for m in want] == ["a"] and want[0].similarity is not None
    d.index.client.hdel(d.index._datakey(ref), "h")
    assert d.check(near) == want
    added, matches = d.check_and_add("b", near)
    assert not added and matches == want
    d.index.clear()


@pytest.mark.parametrize("verifier", ["jaccard", "levenshtein", "none"])
def test_a_text_with_a_lone_surrogate_is_stored_and_returned_as_it_was(
    any_url: str, verifier: str
) -> None:
    """Crawled text may hold a lone surrogate (half of an emoji from a JSON ``\\ud83d``
    escape): it is deduplicated like any text and comes back unchanged."""
    cut = "Hello world \ud83d cut emoji and more words here, enough of them to compare"
    d = RedisDeduplicator.from_url(any_url, namespace=fresh_ns(), policy=Policy(verifier=verifier))
    assert d.check_and_add(1, cut) == (True, [])
    added, matches = d.check_and_add(2, cut + "!")
    assert not added and [m.id for m in matches] == [1]
    assert d.get(1) == cut
    assert d.check_and_add_many([3, 4], ["other \udc00 text", cut]) == [
        (True, []),
        (False, d.check(cut)),
    ]
    d.index.clear()


def test_redis_deduplicator_policy_is_stored(redis_url: str) -> None:
    ns = fresh_ns()
    RedisDeduplicator.from_url(redis_url, namespace=ns)
    with pytest.raises(IncompatibleIndexError, match="policy"):
        RedisDeduplicator.from_url(redis_url, namespace=ns, policy=Policy(threshold=0.5))
    with pytest.raises(ValueError, match="policy"):
        RedisDeduplicator.from_url(redis_url, namespace=fresh_ns(), policy="strictest")
    with pytest.raises(IncompatibleIndexError, match="k_long"):
        RedisDeduplicator.from_url(redis_url, namespace=ns, k=Policy.default().k_max + 1)
    d = RedisDeduplicator.from_url(redis_url, namespace=ns, policy=Policy.default().to_dict())
    assert d.policy == Policy.default()
    d.index.clear()


@pytest.mark.parametrize("cache_size", [0, 65_536])
def test_counters_of_single_calls_and_batches(redis_url: str, cache_size: int) -> None:
    """stats() counts every check, candidate, match and add, one by one and in batches (with a
    cache a copy is checked before anything is written; without, it is written, then
    retracted)."""
    rng = random.Random(11)
    a, b = _words(rng, 60), _words(rng, 60)

    def copy(t: str) -> str:
        w = t.split()
        w[5] = "qqq"
        return " ".join(w)

    d = RedisDeduplicator.from_url(redis_url, namespace=fresh_ns(), cache_size=cache_size)
    assert d.check_and_add(1, a) == (True, [])
    added, matches = d.check_and_add(2, copy(a))
    assert not added and [m.id for m in matches] == [1]
    got = d.check_and_add_many([3, 4], [b, copy(b)])
    assert [ok for ok, _ in got] == [True, False] and [m.id for m in got[1][1]] == [3]
    s = d.stats()
    counts = {k: s[k] for k in ("checks", "candidates", "matches", "adds", "added")}
    assert counts == {"checks": 4, "candidates": 2, "matches": 2, "adds": 2, "added": 2}
    assert s["documents"] == 2
    d.index.clear()


def test_check_and_add_many_equals_one_by_one(any_url: str) -> None:
    """A pipelined batch gives what one call per item gives, including a chain a~b~c where
    b is rejected (c is then checked against a only, like a sequential run)."""
    rng = random.Random(41)
    fps = clustered_fps(rng, 30, 4, 3)
    fps += [0, 0b11, 0b1111]  # chain: 2 bits, then 2 more (4 from the first)
    ids = list(range(len(fps)))
    batch = RedisIndex.from_url(any_url, k=3, namespace=fresh_ns())
    single = RedisIndex.from_url(any_url, k=3, namespace=fresh_ns())
    got = batch.check_and_add_many(ids, fps)
    want = [single.check_and_add(i, f) for i, f in zip(ids, fps)]
    assert got == want
    assert [ok for ok, _ in got[-3:]] == [True, False, True]
    # and the reference: a sequential loop over brute force
    kept: dict[int, int] = {}
    for i, f in zip(ids, fps):
        if not brute(kept, f, 3):
            kept[i] = f
    assert {i for i, (ok, _) in zip(ids, got) if ok} == set(kept)
    assert len(batch) == len(kept)
    batch.clear()
    single.clear()


def test_wait_replicas_with_a_real_replica(redis_server: RedisServer, tmp_path: Path) -> None:
    """wait_replicas=1 succeeds with a real replica attached, and a write that no replica
    acknowledges raises TimeoutError instead of returning as if it were safe."""
    replica = RedisServer(tmp_path, "--replicaof", "127.0.0.1", str(redis_server.port))
    try:
        ns = fresh_ns()
        base = f"redis://127.0.0.1:{redis_server.port}/0?namespace={ns}"
        copy = redis.Redis(port=replica.port)
        deadline = time.time() + 60
        while time.time() < deadline:  # attached and in sync
            try:
                if copy.info("replication").get("master_link_status") == "up":
                    break
            except redis.BusyLoadingError:
                pass
            time.sleep(0.1)
        d = RedisDeduplicator.from_url(base + "&wait_replicas=1&wait_timeout=5000")
        assert d.check_and_add(1, "a text that must reach the replica before the reply") == (
            True,
            [],
        )
        assert copy.exists(d.index._idkey("i1"))
        strict = RedisIndex.from_url(
            base.replace(ns, fresh_ns()) + "&wait_replicas=2&wait_timeout=100"
        )
        with pytest.raises(TimeoutError, match="wait_replicas=2"):
            strict.add(5, 123)
        # A plain add that others may have seen stays, and is finished: what it replaced goes.
        with pytest.raises(TimeoutError, match="wait_replicas=2"):
            strict.add(5, 456)
        assert strict.get(5)[0] == 456 and len(strict) == 1 and strict.query(123, 0) == []
        # A check-and-add whose write no replica confirmed gives no decision: it is retracted
        # (on the primary; the retraction is not confirmed either, which its note says).
        ticketed = RedisIndex.from_url(
            base.replace(ns, fresh_ns()) + "&wait_replicas=2&wait_timeout=100", k=13
        )
        with pytest.raises(TimeoutError, match="wait_replicas=2") as err:
            ticketed.check_and_add(6, 0xF0F0)
        assert "retraction" in " ".join(getattr(err.value, "__notes__", []))
        assert 6 not in ticketed and len(ticketed) == 0
        # The same on the one-script path (k = 3): the item it added is retracted.
        in_script = RedisIndex.from_url(
            base.replace(ns, fresh_ns()) + "&wait_replicas=2&wait_timeout=100", k=3
        )
        with pytest.raises(TimeoutError, match="wait_replicas=2"):
            in_script.check_and_add(7, 0xF0F0)
        assert 7 not in in_script and len(in_script) == 0
    finally:
        replica.stop()


def test_survives_a_script_flush(redis_url: str) -> None:
    """Scripts are loaded at open; after SCRIPT FLUSH (or a restart) they are loaded again."""
    idx = RedisIndex.from_url(redis_url, k=3, namespace=fresh_ns())
    idx.add(1, 0xF0)
    idx.client.script_flush()
    assert idx.check_and_add_many([2, 3], [0xF1, 1 << 40]) == [(False, [(1, 1)]), (True, [])]
    idx.client.script_flush()
    assert idx.check_and_add(4, 0xF3) == (False, [(1, 2)])
    assert len(idx) == 2
    idx.clear()
    # the ticketed write (probe radius 1), whose MGET follows the script: sent again in order
    wide = RedisIndex.from_url(redis_url, k=3, namespace=fresh_ns(), blocks=2)
    wide.add(1, 0xF0)
    wide.client.script_flush()
    assert wide.check_and_add_many([2, 3], [0xF1, 0xF3]) == [(False, [(1, 1)]), (False, [(1, 2)])]
    wide.client.script_flush()  # (one call, its own round trip: sent again the same way)
    assert wide.check_and_add(4, 0xF2) == (False, [(1, 1)])
    assert len(wide) == 1
    wide.clear()
    text = _words(random.Random(5), 60)
    d = RedisDeduplicator.from_url(redis_url, namespace=fresh_ns(), cache_size=0)
    d.index.client.script_flush()
    assert d.check_and_add("a", text) == (True, [])
    d.index.client.script_flush()
    added, matches = d.check_and_add("b", text)
    assert not added and [m.id for m in matches] == ["a"] and len(d) == 1
    d.index.clear()


def test_check_and_add_reads_every_live_period_and_not_the_dropped_ones(redis_url: str) -> None:
    """With a retention, a check-and-add reads the probe buckets of every live period (the
    one-script path: extra keys; the ticketed path: the MGET's spans), and none of a period
    that expire() dropped (the horizon, read in the script or with the buckets)."""
    for blocks in (None, 2):  # probe radius 0 (one script) and 1 (ticketed write)
        idx = RedisIndex.from_url(
            redis_url, k=3, namespace=fresh_ns(), retention=3600.0, period=600.0, blocks=blocks
        )
        assert idx._decides_in_script(3) == (blocks is None)
        now = time.time()
        idx.add("prev", 0xF0F0, timestamp=now - 700)  # a period before the current one
        assert len(idx._live_periods()) > 2
        assert idx.check_and_add("a", 0xF0F1) == (False, [("prev", 1)])
        assert idx.check_and_add_many(["b"], [0xF0F3]) == [(False, [("prev", 2)])]
        assert idx.expire((idx._period_of(now - 700) + 1) * idx.period) == 1
        assert idx.check_and_add("c", 0xF0F1) == (True, [])
        assert idx.check_and_add_many(["d", "e"], [0xF0F0, 1 << 60]) == [
            (False, [("c", 1)]),
            (True, []),
        ]
        assert sorted(i for i, _ in idx.query(0xF0F0, 3)) == ["c"] and len(idx) == 2
        idx.clear()


def test_check_and_add_at_probe_radius_one(any_url: str) -> None:
    """The ticketed path (write, then the client measures the records read; used by the
    verifier and for wide radii) gives a sequential loop's answers over brute force."""
    rng = random.Random(43)
    fps = clustered_fps(rng, 25, 4, 3)
    # blocks=2: probe radius 1, so the write script (not the in-script decision) is used
    idx = RedisIndex.from_url(any_url, k=3, namespace=fresh_ns(), blocks=2)
    assert not idx._decides_in_script(3)
    got = idx.check_and_add_many(list(range(len(fps))), fps)
    kept: dict[int, int] = {}
    for i, f in enumerate(fps):
        if not brute(kept, f, 3):
            kept[i] = f
    assert {i for i, (ok, _) in enumerate(got) if ok} == set(kept)
    assert [idx.check_and_add(1000 + i, f)[0] for i, f in enumerate(fps[:5])] == [False] * 5
    assert len(idx) == len(kept)
    for q in fps[:20]:
        assert set(idx.query(q, 3)) == brute(kept, q, 3)
    idx.clear()


@pytest.mark.parametrize("k", [0, 1, 3, 5])
def test_in_script_decision_at_the_exact_boundary(redis_url: str, k: int) -> None:
    """One server at probe radius 0 decides inside the script (a popcount over two 32-bit
    halves): a copy exactly k bits away is rejected, k+1 bits away added, whatever bits are set
    (top bits included); an id's stored version counts like any other, as in neardup.Index;
    ids containing '|' are decoded whole."""
    rng = random.Random(100 + k)
    for j, base in enumerate(
        [0, (1 << 64) - 1, 1 << 63, rng.getrandbits(64), 0x8000_0001_8000_0001]
    ):
        bits = rng.sample(range(64), k + 1)
        at_k = base
        for b in bits[:k]:
            at_k ^= 1 << b
        beyond = at_k ^ (1 << bits[k])
        owner = f"x|{j}|y"
        idx = RedisIndex.from_url(redis_url, k=k, namespace=fresh_ns())  # one base each
        assert idx._decides_in_script(k)
        assert idx.check_and_add(owner, base) == (True, [])
        assert idx.check_and_add(f"near{j}", at_k) == (False, [(owner, k)])
        assert f"near{j}" not in idx
        assert idx.check_and_add(f"far{j}", beyond) == (True, [])
        idx.remove(f"far{j}")
        # the same id again at the same fingerprint is a duplicate of itself, kept as it was
        assert idx.check_and_add(owner, base) == (False, [(owner, 0)])
        assert idx.query(base, 0) == [(owner, 0)] and len(idx) == 1
        local = Index(k=k)
        local.add(owner, base)
        assert local.check_and_add(owner, base) == [(owner, 0)]
        idx.clear()


def test_old_format_is_refused(redis_url: str) -> None:
    """A namespace written by format 1 (list buckets) is refused with a clear error."""
    ns = fresh_ns()
    client = redis.Redis.from_url(redis_url)
    old = {"format": 1, "k": 3, "blocks": 4, "retention": None, "period": float(1 << 40)}
    client.set("{" + ns + "}:config", json.dumps(old, sort_keys=True))
    with pytest.raises(IncompatibleIndexError, match="format 1.*reads format 2"):
        RedisIndex.from_url(redis_url, k=3, namespace=ns)
    client.delete("{" + ns + "}:config")


def _raw(idx: RedisIndex, key: str) -> bytes:
    value = idx.client.get(key)
    assert isinstance(value, bytes), (key, value)
    return value


def test_buckets_hold_packed_records(any_url: str) -> None:
    """Format 2: a bucket is a string of 16-byte (fingerprint, ref) records; removing an item
    cuts its record out at a record boundary and an emptied bucket is deleted."""
    idx = RedisIndex.from_url(any_url, k=3, namespace=fresh_ns())
    fp = 0x0123_4567_89AB_CDEF
    idx.add("a", fp)
    idx.add("b", fp ^ 1)  # same first three blocks
    key = idx._bucket(0, 0, idx.layout.values(fp)[0])
    blob = _raw(idx, key)
    assert len(blob) == 32
    assert {blob[:8], blob[16:24]} == {fp.to_bytes(8, "big"), (fp ^ 1).to_bytes(8, "big")}
    # The id key names the ref (one server); on a cluster it holds the id's chain of
    # (ref, expiry) entries, the named version first.
    head = _raw(idx, idx._idkey("sa"))
    assert len(head) == (16 if idx.cluster else 8)
    ref_a = int.from_bytes(head[:8], "big")
    assert idx.client.hget(idx._datakey(ref_a), "i") == b"sa"
    assert ref_a.to_bytes(8, "big") in (blob[8:16], blob[24:32])
    idx.remove("a")
    assert idx.client.get(key) == (fp ^ 1).to_bytes(8, "big") + _raw(idx, idx._idkey("sb"))[:8]
    assert not idx.client.exists(idx._datakey(ref_a))
    idx.remove("b")
    assert not idx.client.exists(key) and len(idx) == 0
    idx.clear()


def test_removing_an_item_cuts_every_copy_of_its_record(any_url: str) -> None:
    """A record stored twice in a bucket (on a cluster, an APPEND sent again after its reply
    was lost) is counted once by queries, and removing its item leaves no copy behind."""
    idx = RedisIndex.from_url(any_url, k=3, namespace=fresh_ns())
    fp = 0x0123_4567_89AB_CDEF
    idx.add("a", fp)
    idx.add("b", fp ^ 1)
    key = idx._bucket(0, 0, idx.layout.values(fp)[0])
    ref_a = int.from_bytes(_raw(idx, idx._idkey("sa"))[:8], "big")
    record = pack_record(fp, ref_a)
    idx.client.append(key, record)  # (the APPEND sent again)
    assert _raw(idx, key).count(record) == 2
    assert idx.query(fp, 0) == [("a", 0)]
    idx.remove("a")
    ref_b = int.from_bytes(_raw(idx, idx._idkey("sb"))[:8], "big")
    assert _raw(idx, key) == pack_record(fp ^ 1, ref_b)
    idx.remove("b")
    assert not idx.client.exists(key) and len(idx) == 0
    idx.clear()


def test_a_ref_in_use_is_never_shared(any_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refs are random; a writer whose ref is already in use draws another (forced here by
    handing out the same ref twice), so two items never share their data."""
    import neardup.backends.redis_index as index_module
    import neardup.backends.redis_single as single_module

    refs = iter([77, 77, 78, 77, 90, 90, 91, 92, 93])
    for module in (index_module, single_module):
        monkeypatch.setattr(module, "new_ref", lambda: next(refs))
    idx = RedisIndex.from_url(any_url, k=3, namespace=fresh_ns())
    idx.add(1, 0xF0F0)
    assert idx.check_and_add(2, 1 << 50) == (True, [])  # 77 in use -> 78
    assert idx.check_and_add(3, 0xF0F1) == (False, [(1, 1)])  # rejected: writes nothing
    assert idx.query(1 << 50, 0) == [(2, 0)] and idx.query(0xF0F0, 0) == [(1, 0)]
    assert len(idx) == 2
    idx.clear()
    wide = RedisIndex.from_url(any_url, k=3, namespace=fresh_ns(), blocks=2)  # ticketed write
    wide.add(5, 0xF0F0)
    assert wide.check_and_add(6, 1 << 50) == (True, [])  # 90 in use -> 91
    assert wide.query(1 << 50, 0) == [(6, 0)] and wide.query(0xF0F0, 0) == [(5, 0)]
    wide.clear()


def test_probe_keys_are_the_layouts_probes(redis_url: str) -> None:
    """The fast key builder reads exactly the buckets of BlockLayout.probes, in every period."""
    rng = random.Random(7)
    idx = RedisIndex.from_url(
        redis_url, k=13, namespace=fresh_ns(), retention=3600.0, period=1200.0
    )
    for k in (0, 3, 6, 13, 20):
        fp = rng.getrandbits(64)
        want = [
            (q, idx._bucket(q, b, v))
            for q in idx._live_periods()
            for b, v in idx.layout.probes(fp, k)
        ]
        probes = idx._probe_keys(fp, k)
        got: list[tuple[int, str]] = []
        for q, n in probes.spans:
            got += [(q, key) for key in probes.keys[len(got) : len(got) + n]]
        assert got == want and len(set(probes.keys)) == len(probes.keys) == len(got)
    idx.clear()


def test_the_threads_connection_survives_kills_and_error_replies(redis_url: str) -> None:
    """The one-server hot path keeps a connection per thread: a connection killed by the server
    is reopened and the call sent again; an error reply in a batch is raised only after every
    reply is read, so the next call gets its own replies."""
    ns = fresh_ns()
    idx = RedisIndex.from_url(redis_url, k=3, namespace=ns)
    assert idx.check_and_add(1, 0xAB) == (True, [])
    admin = redis.Redis.from_url(redis_url)
    assert admin.client_kill_filter(_type="normal", skipme=True) >= 1
    assert idx.check_and_add(2, 0xAB) == (False, [(1, 0)])
    admin.set(f"{ns}:text", "abc")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        idx._link.send_all([("GET", f"{ns}:text"), ("INCR", f"{ns}:text"), ("PING",)])
    assert idx._link.send_all([("ECHO", "mine")]) == [b"mine"]
    assert idx.query(0xAB, 0) == [(1, 0)]
    admin.delete(f"{ns}:text")
    idx.clear()


def test_with_block_returns_the_index_and_keeps_its_writes(redis_url: str) -> None:
    """`with` gives the object itself, closes it on the way out without swallowing the error,
    and what was written inside is there for the next client."""
    ns = fresh_ns()
    idx = RedisIndex.from_url(redis_url, k=3, namespace=ns)
    with pytest.raises(RuntimeError, match="inside"):
        with idx as entered:
            assert entered is idx
            entered.add(1, 5)
            raise RuntimeError("raised inside the block")
    with RedisIndex.from_url(redis_url, k=3, namespace=ns) as again:
        assert again.query(4) == [(1, 1)]
        again.clear()
