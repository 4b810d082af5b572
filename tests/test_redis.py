"""RedisDeduplicator against a real redis-server and a real 3-master Redis Cluster (the fixtures
of tests/redis_servers.py): the embedded store's answers, the API's contract, atomic
check-and-add across processes and the race of issue 26 (no text refused for a text that was
never stored)."""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.redis

redis = pytest.importorskip("redis", reason="the [redis] extra is required")

from neardup import IncompatibleIndexError  # noqa: E402
from neardup.backends.redis import RedisDeduplicator  # noqa: E402
from neardup.dedup import Deduplicator, Policy  # noqa: E402
from neardup.stores import Store  # noqa: E402
from neardup.verify import jaccard  # noqa: E402
from redis_servers import RedisServer, ReplyDropper, _words, fresh_ns  # noqa: E402


def _url(base: str, ns: str, **options: Any) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"namespace": ns, **options}.items())
    return f"{base}{'&' if '?' in base else '?'}{query}"


def _open(base: str, **kw: Any) -> RedisDeduplicator:
    return RedisDeduplicator.from_url(_url(base, fresh_ns()), **kw)


def _vocab(rng: random.Random, n: int = 3000) -> list[str]:
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
            for _ in range(n)]  # fmt: skip


def _edit(rng: random.Random, words: list[str], vocab: list[str], n: int) -> list[str]:
    out = list(words)
    for _ in range(n):
        out[rng.randrange(len(out))] = rng.choice(vocab)
    return out


def _stream(seed: int, n: int) -> list[str]:
    """Texts of templates and families: originals, near-copies (1-3 words edited), texts of
    one template with a number filled in, and a few empty ones."""
    rng = random.Random(seed)
    vocab = _vocab(rng)
    originals: list[list[str]] = []
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.3 or not originals:
            originals.append([rng.choice(vocab) for _ in range(rng.randint(20, 120))])
            out.append(" ".join(originals[-1]))
        elif r < 0.7:
            out.append(" ".join(_edit(rng, rng.choice(originals), vocab, rng.randint(1, 3))))
        elif r < 0.97:
            out.append(f"your parcel {rng.randrange(10**6)} is waiting at the depot of {i % 7}")
        else:
            out.append("   ")
    return out


def _answers(found: list[tuple[bool, list[Any]]]) -> list[tuple[bool, list[tuple[Any, ...]]]]:
    return [(a, [(m.id, m.distance, round(m.similarity, 9)) for m in ms]) for a, ms in found]


# -- the one decision -----------------------------------------------------------------------------


def test_same_answers_as_the_embedded_store(any_url: str) -> None:
    """check_and_add_many in batches, check_many, add and remove give the answers of
    neardup.Deduplicator, match for match (ids, distances, similarities, order)."""
    texts = _stream(1, 600)
    local = Deduplicator()
    with _open(any_url) as shared:
        for start in range(0, 500, 50):
            ids = list(range(start, start + 50))
            chunk = texts[start : start + 50]
            want = _answers(local.check_and_add_many(ids, chunk))
            assert _answers(shared.check_and_add_many(ids, chunk)) == want, start
        for i in range(500, 520):  # one at a time, ids as str
            want = _answers([local.check_and_add(f"s{i}", texts[i])])
            assert _answers([shared.check_and_add(f"s{i}", texts[i])]) == want
        for i in (0, 3, 7):
            if i in local:
                local.remove(i)
                shared.remove(i)
        local.add(9, texts[520])  # replaces id 9
        shared.add(9, texts[520])
        # one id twice in a batch (the later text replaces the earlier one), and an id stored
        # before, sent again with another text
        again = [50, 50, 1, 700]
        batch = [texts[530], texts[531], texts[532], texts[530] + " again"]
        want = _answers(local.check_and_add_many(again, batch))
        assert _answers(shared.check_and_add_many(again, batch)) == want
        queries = texts[:40] + texts[520:600]
        want_checks = _answers([(True, m) for m in local.check_many(queries)])
        assert _answers([(True, m) for m in shared.check_many(queries)]) == want_checks
        assert len(shared) == len(local)
        assert shared.get(9) == texts[520]


def test_a_batch_that_replaces_an_id_answers_as_its_texts_one_by_one(any_url: str) -> None:
    """A text kept under a stored id (or one earlier in the batch) replaces that version: a
    later text of the batch is not refused as a copy of the version replaced."""
    rng = random.Random(5)
    vocab = _vocab(rng)
    t1, t2 = (" ".join(rng.choice(vocab) for _ in range(60)) for _ in range(2))
    t1b = t1 + " extra"
    cases = [
        ([("a", t1)], ["a", "c"], [t2, t1b]),
        ([], ["a", "a", "c"], [t1, t2, t1b]),
        ([("x", t2)], ["a", "x", "a", "c"], [t2, t1, t1, t1b]),
    ]
    for stored, ids, texts in cases:
        with _open(any_url) as one, _open(any_url) as many:
            for d in (one, many):
                for i, text in stored:
                    d.add(i, text)
            want = _answers([one.check_and_add(i, text) for i, text in zip(ids, texts)])
            assert _answers(many.check_and_add_many(ids, texts)) == want, (ids, want)
            assert want[-1][0] == (stored != [("x", t2)])  # ("c" is a copy of "x" in case 3)


def test_replaced_versions_give_their_places_among_the_candidates(any_url: str) -> None:
    """A version the batch replaces leaves the candidates before they are cut to
    verify_limit: 32 stored copies of a text, all replaced by the batch, took every place,
    and a real near-copy further down was never verified (the text was stored)."""
    rng = random.Random(1)
    vocab = [f"w{i}" for i in range(3000)]
    q = " ".join(rng.choice(vocab) for _ in range(120))
    near = q.split()
    near[60] = "zzz"
    others = [" ".join(rng.choice(vocab) for _ in range(120)) for _ in range(32)]
    ids = [f"r{k}" for k in range(32)] + ["q"]
    with _open(any_url) as one, _open(any_url) as many:
        for d in (one, many):
            d.add_many([f"r{k}" for k in range(32)], [q] * 32)
            d.add("z", " ".join(near))
        want = _answers([one.check_and_add(i, t) for i, t in zip(ids, [*others, q])])
        assert want[-1] == (False, [("z", want[-1][1][0][1], want[-1][1][0][2])])
        assert _answers(many.check_and_add_many(ids, [*others, q])) == want


def test_same_answers_on_a_templated_stream(any_url: str) -> None:
    """Batches of one notice with a new number each (every text shares band lists with many
    stored ones, most of them written by this process and kept from its own writes), with
    a second deduplicator writing between them: the embedded store's answers."""
    rng = random.Random(8)
    notice = "dear customer, your order {} has shipped; do not reply to this message {}"
    texts = [notice.format(rng.randrange(10**9), i % 3) for i in range(900)]
    texts[850:] = [t + " ok" for t in texts[:50]]  # near-copies of stored ones
    local = Deduplicator()
    with _open(any_url) as d:
        url = _url(any_url, d.store.settings["namespace"])
        with RedisDeduplicator.from_url(url) as other:
            for start in range(0, 900, 150):
                ids = list(range(start, start + 150))
                if start % 300 == 0:
                    want = _answers(local.check_and_add_many(ids[:30], texts[start : start + 30]))
                    assert (
                        _answers(other.check_and_add_many(ids[:30], texts[start : start + 30]))
                        == want
                    )
                    ids, chunk = ids[30:], texts[start + 30 : start + 150]
                else:
                    chunk = texts[start : start + 150]
                want = _answers(local.check_and_add_many(ids, chunk))
                assert _answers(d.check_and_add_many(ids, chunk)) == want, start
            assert len(d) == len(local)


def test_full_lists_need_the_quorum_as_in_the_embedded_store(any_url: str) -> None:
    """Band lists read full (bucket_limit 4 here) hold a template's shared text: a stored text
    found in full lists only is a candidate when full_bucket_quorum of them hold it, in Redis
    as in the embedded store; the quorum changes the answers on this stream. Within a batch
    the lists take the batch's texts as they are kept, as the embedded store's do: one batch
    answers as the texts one by one (it answered otherwise: the batch's earlier texts were
    all candidates, past bucket_limit and without the quorum)."""
    rng = random.Random(8)
    notice = "dear customer, your order {} has shipped; do not reply to this message {}"
    texts = [notice.format(rng.randrange(10**5), i % 3) for i in range(300)]
    got: dict[int, Any] = {}
    for quorum in (1, 2):
        policy = Policy(bucket_limit=4, full_bucket_quorum=quorum)
        local = Deduplicator(policy=policy)
        with _open(any_url, policy=policy) as shared, _open(any_url, policy=policy) as batched:
            for i, text in enumerate(texts):
                want = _answers([local.check_and_add(i, text)])
                assert _answers([shared.check_and_add(i, text)]) == want, i
                got.setdefault(quorum, []).extend(want)
            assert _answers(batched.check_and_add_many(list(range(300)), texts)) == got[quorum]
    assert got[1] != got[2]
    assert sum(added for added, _ in got[2]) > sum(added for added, _ in got[1])


def test_checks_that_need_more_versions_than_a_process_keeps(
    any_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process keeps the versions it has read up to ``version_cache`` (here 8, the oldest
    dropped first): a check naming more still finds every candidate (the versions it reads
    are its own until it has decided), and checks of four threads that drop each other's
    versions all end with the right answers."""
    rng = random.Random(12)
    vocab = _vocab(rng)
    texts = [" ".join(rng.choice(vocab) for _ in range(40)) for _ in range(60)]
    with _open(any_url) as d:
        url = _url(any_url, d.store.settings["namespace"])
        d.add_many(list(range(60)), texts)
    monkeypatch.setattr(RedisDeduplicator, "version_cache", 8)
    starts = list(range(0, 31, 3)) * 3
    with RedisDeduplicator.from_url(url) as d:
        assert [m[0].id for m in d.check_many(texts[:30])] == list(range(30))
        with ThreadPoolExecutor(4) as pool:
            found = list(pool.map(lambda s: d.check_many(texts[s : s + 30]), starts))
        for s, got in zip(starts, found):
            assert [(m[0].id, m[0].similarity) for m in got] == [(i, 1.0) for i in range(s, s + 30)]


def test_the_write_compares_what_it_read(any_url: str) -> None:
    """A conditional write after another writer changed a band hash: stored when the fields it
    goes to are as read (its change count alone differs), refused when one of them was
    filled meanwhile."""
    x = " ".join(_vocab(random.Random(9), 40))
    y = " ".join(_vocab(random.Random(10), 40))
    with _open(any_url) as d:
        url = _url(any_url, d.store.settings["namespace"])
        with RedisDeduplicator.from_url(url) as other:
            u = " ".join(_vocab(random.Random(11), 40))  # (its fields all read empty)
            cases = ((1, x, y, True), (2, x + " z", x + " w", False), (3, u, u + " w", False))
            for id, text, writes, stored in cases:
                p = d._probe([text])
                found = d.store.query(p.keys, 1)
                docs = d._docs(p, [0], [id], [text], [None], found.first)
                other.add(-id, writes)  # (same band hashes, other fields / same fields)
                assert d.store.add(docs, found) is stored
            assert [m.id for m in d.check(x)] == [1, -2] and len(d) == 4


def test_writes_of_one_process_that_share_band_lists_take_turns(any_url: str) -> None:
    """Threads of one process write at once, but a write waits for the earlier ones under way
    that share a band list with it: batches of one template from four threads are never
    refused for each other's writes (no conflict, nothing decided twice), and every text is
    answered as a check of the texts stored before it."""
    rng = random.Random(13)
    notice = "dear customer, your order {} has shipped; do not reply to this message {}"
    batches = [[notice.format(rng.randrange(10**9), i % 3) for i in range(60)] for _ in range(12)]
    with _open(any_url) as d:
        with ThreadPoolExecutor(4) as pool:
            done = list(pool.map(
                lambda b: d.check_and_add_many([f"{b}-{i}" for i in range(60)], batches[b]),
                range(12),
            ))  # fmt: skip
        assert d.stats()["conflicts"] == 0
        added = sum(a for batch in done for a, _ in batch)
        assert added == len(d) and 0 < added < 12 * 60
        for batch in done:
            for _, matches in batch:
                assert all(m.id in d for m in matches)


def test_a_write_waits_for_earlier_ones_that_may_change_a_list_it_reads() -> None:
    """Turns: a write that reads a band list that an earlier one under way may change starts
    once that one is done or has narrowed what it may change (having decided), in arrival
    order; a write sharing no list starts at once."""
    from neardup.backends.redis_dedup import _Turns

    turns, order = _Turns(), []
    holding, narrow, release = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with turns.turn(np.array([1, 5], np.int64)) as turn:
            order.append("a")
            holding.set()
            narrow.wait(10)
            turn.hold(np.array([1], np.int64))  # (decided: changes list 1 only)
            release.wait(10)
            order.append("a done")

    def write(name: str, codes: list[int]) -> None:
        with turns.turn(np.array(codes, np.int64)):
            order.append(name)

    a = threading.Thread(target=first)
    a.start()
    holding.wait(10)
    b = threading.Thread(target=write, args=("b", [5, 9]))  # (reads 5, which a may change)
    b.start()
    d = threading.Thread(target=write, args=("d", [1]))  # (reads 1: a keeps it)
    d.start()
    time.sleep(0.2)
    write("c", [2, 7])  # (shares nothing: held up by no one)
    assert order == ["a", "c"]
    narrow.set()
    b.join(10)
    assert order == ["a", "c", "b"]
    release.set()
    a.join(10)
    d.join(10)
    assert order == ["a", "c", "b", "a done", "d"]


def test_a_write_cut_short_while_it_waits_leaves_no_place_behind() -> None:
    """An exception reaching a write while it waits for its turn (a KeyboardInterrupt, say)
    takes it out of the queue: later writes on its lists are not held up for ever."""
    import ctypes

    from neardup.backends.redis_dedup import _Turns

    turns, got = _Turns(), []

    def waiter() -> None:
        try:
            with turns.turn(np.array([5], np.int64)):
                got.append("ran")
        except KeyboardInterrupt:
            got.append("interrupted")

    with turns.turn(np.array([5], np.int64)) as first:
        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.2)  # (it waits behind the first)
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(t.ident or 0), ctypes.py_object(KeyboardInterrupt)
        )
        first.hold(np.array([5], np.int64))  # (wakes it: it meets the exception)
        t.join(10)
    assert got == ["interrupted"]
    later = threading.Thread(target=lambda: turns.turn(np.array([5], np.int64)).__enter__())
    later.start()
    later.join(10)
    assert not later.is_alive()


def test_api(redis_url: str) -> None:
    with _open(redis_url) as d:
        base = " ".join(_vocab(random.Random(2), 60))
        assert d.check_and_add("a", base) == (True, [])
        added, matches = d.check_and_add("b", base + " tail")
        assert not added and [m.id for m in matches] == ["a"]
        assert "a" in d and "b" not in d and 3 not in d and [1] not in d
        assert d.get("a") == base and len(d) == 1
        with pytest.raises(KeyError):
            d.get("b")
        with pytest.raises(KeyError):
            d.remove("b")
        assert d.add(7, "") == Deduplicator().fingerprinter.fingerprint("")
        assert d.check("") == [] and d.check_and_add(8, "") == (True, [])  # empty: nobody's copy
        d.remove("a")
        assert d.check(base) == [] and len(d) == 2
        stats = d.stats()
        assert stats["documents"] == 2 and stats["policy"] == Policy.default().to_dict()
        assert stats["cluster"] is False and stats["namespace"] == d.store.settings["namespace"]
        assert isinstance(d.store, Store)  # (the store interface of neardup.stores)
        assert stats["checks"] >= 4 and stats["conflicts"] == 0
        with pytest.raises(ValueError, match="k=3"):
            d.check(base, k=3)


def test_bad_input_is_refused_before_any_write(redis_url: str) -> None:
    with _open(redis_url) as d:
        with pytest.raises(TypeError, match=r"ids\[2\]"):
            d.check_and_add_many(["x", "y", 1.5], ["one two", "three four", "five"])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="timestamps has 1"):
            d.add_many(["x", "y"], ["a", "b"], [None])
        with pytest.raises(TypeError, match="text"):
            d.add("x", None)  # type: ignore[arg-type]
        assert len(d) == 0 and "x" not in d


def test_settings_are_checked(redis_url: str) -> None:
    ns = fresh_ns()
    RedisDeduplicator.from_url(_url(redis_url, ns)).close()
    with pytest.raises(IncompatibleIndexError, match="threshold"):
        RedisDeduplicator.from_url(
            _url(redis_url, ns), policy=Policy.default().replace(threshold=0.7)
        )
    with pytest.raises(IncompatibleIndexError, match="retention"):
        RedisDeduplicator.from_url(_url(redis_url, ns, retention=60))
    old = fresh_ns()
    redis.Redis.from_url(redis_url).set(f"{{{old}}}:config", '{"format": 2, "k": 3}')
    with pytest.raises(IncompatibleIndexError, match="format 2"):
        RedisDeduplicator.from_url(_url(redis_url, old))
    # format 3: band hashes without their change count (before the write skipped fields read
    # empty): refused, not written with a count the older code would not keep
    redis.Redis.from_url(redis_url).set(f"{{{old}}}:config", '{"format": 3}')
    with pytest.raises(IncompatibleIndexError, match="format 3; this version reads format 5"):
        RedisDeduplicator.from_url(_url(redis_url, old))
    # format 4: a version's data as a hash, which this version's functions cannot read
    redis.Redis.from_url(redis_url).set(f"{{{old}}}:config", '{"format": 4}')
    with pytest.raises(IncompatibleIndexError, match="format 4; this version reads format 5"):
        RedisDeduplicator.from_url(_url(redis_url, old))
    # a namespace recorded before a policy setting existed: the setting takes its default
    r = redis.Redis.from_url(redis_url)
    recorded = json.loads(r.get(f"{{{ns}}}:config"))
    del recorded["policy"]["full_bucket_quorum"]
    r.set(f"{{{ns}}}:config", json.dumps(recorded))
    RedisDeduplicator.from_url(_url(redis_url, ns)).close()
    with pytest.raises(IncompatibleIndexError, match="full_bucket_quorum"):
        RedisDeduplicator.from_url(
            _url(redis_url, ns), policy=Policy.default().replace(full_bucket_quorum=1)
        )
    with pytest.raises(ValueError, match="blocks"):
        RedisDeduplicator.from_url(_url(redis_url, ns, blocks=4))
    with pytest.raises(ValueError, match="verifier"):
        RedisDeduplicator.from_url(redis_url, policy=Policy.default().replace(verifier="none"))


def test_a_namespace_of_another_program_is_refused_clearly(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    for value in (b"[1, 2]", b"not json"):
        ns = fresh_ns()
        r.set(f"{{{ns}}}:config", value)
        with pytest.raises(IncompatibleIndexError, match="holds no neardup settings"):
            RedisDeduplicator.from_url(_url(redis_url, ns))
    for key, make in (
        ("{ns}:config", lambda k: r.hset(k, "a", "b")),
        ("{ns}:seq", lambda k: r.rpush(k, "x")),
        ("{ns}:t", lambda k: r.set(k, "x")),
        ("ns:b:3", lambda k: r.set(k, "x")),
    ):
        ns = fresh_ns()
        name = key.replace("ns", ns)
        make(name)
        with pytest.raises(IncompatibleIndexError, match=f"its key {name} is a .*, not a"):
            RedisDeduplicator.from_url(_url(redis_url, ns))


def test_bad_retention_and_a_password_in_the_query(redis_url: str) -> None:
    for bad in ("nan", "inf", "0"):
        with pytest.raises(ValueError, match="retention must be a positive finite number"):
            RedisDeduplicator.from_url(_url(redis_url, fresh_ns(), retention=bad))
    with _open(redis_url) as d, pytest.raises(ValueError, match="got nan"):
        d.expire(float("nan"))
    from neardup.backends.redis_connect import redact

    assert redact("redis://h:1/0?password=s3cret&namespace=x") == (
        "redis://h:1/0?password=***&namespace=x"
    )
    assert redact("redis://u:s3cret@h:1/0") == "redis://u:***@h:1/0"
    assert redact("redis://h:1/0?namespace=x") == "redis://h:1/0?namespace=x"


def test_a_server_that_lost_its_data_is_read_afresh(redis_url: str) -> None:
    """A server restarted without persistence (here: FLUSHALL) starts the version numbers
    again: a process that had read versions numbered as the new ones took the new ones for the
    old (a near-copy of a new text was found new); the namespace's settings were gone too."""
    ns = fresh_ns()
    first = RedisDeduplicator.from_url(_url(redis_url, ns))
    rng = random.Random(9)
    old = [" ".join(_vocab(rng, 40)) for _ in range(5)]
    new = [" ".join(_vocab(rng, 40)) for _ in range(5)]
    ids = [f"doc{i}" for i in range(5)]
    assert first.check_and_add_many(ids, old) == [(True, [])] * 5
    assert [m.id for m in first.check(old[0])] == ["doc0"]  # (read: now held by the process)
    r = redis.Redis.from_url(redis_url)
    for lost in range(2):  # (twice: the counter must not start over the second time either)
        r.flushall()
        r.function_flush()
        # the process that read the old versions writes first (the functions are gone too)
        assert first.check_and_add_many(ids, new) == [(True, [])] * 5
        assert r.exists(f"{{{ns}}}:config")  # (the settings recorded again)
        assert int(r.get(f"{{{ns}}}:seq")) > 10**18
        assert [m.id for m in first.check(new[0])] == ["doc0"]
        added, matches = first.check_and_add(f"copy{lost}", new[1] + " x")
        assert not added and [m.id for m in matches] == ["doc1"]
        new = new[1:] + new[:1]  # (the same ids, other texts)
    first.close()


def test_a_server_refusing_writes_still_answers_checks(tmp_path: Any) -> None:
    """Out of memory (maxmemory with noeviction): checks are answered, writes raise what the
    service turns into a 503."""
    from neardup.service.backend import store_fault

    server = RedisServer(tmp_path, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
    url = f"redis://127.0.0.1:{server.port}/0"
    d = RedisDeduplicator.from_url(url)
    d.add("a", "a text stored before the server filled up")
    r = redis.Redis.from_url(url)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        for i in range(100_000):
            r.set(f"fill:{i}", "x" * 1000)
    assert [m.id for m in d.check("a text stored before the server filled up")] == ["a"]
    with pytest.raises(redis.exceptions.RedisError) as refused:
        d.check_and_add("b", "another text")
    assert store_fault(refused.value)
    d.close()
    server.stop()


def test_retention_and_expire(redis_url: str) -> None:
    """A version past the retention window is neither a candidate nor counted nor read, and
    is deleted by expire() or by a later write (at most once a second)."""
    with _open(redis_url, retention=2) as d:
        now = time.time()
        with pytest.raises(ValueError, match="retention window"):
            d.add("old", "too old a text", timestamp=now - 5)
        texts = [" ".join(_vocab(random.Random(i), 30)) for i in (1, 2, 3)]
        d.add_many(["a", "b", "c"], texts, [now - 1.5, now - 0.5, now])
        assert len(d) == 3 and [m.id for m in d.check(texts[0])] == ["a"]
        time.sleep(0.7)
        assert d.check(texts[0]) == [] and "a" not in d and len(d) == 2
        with pytest.raises(KeyError):
            d.get("a")
        with pytest.raises(KeyError):  # (it was removed as if stored)
            d.remove("a")
        assert not d.store.client.exists(d.store._key(b"sa"))  # (its data went all the same)
        assert d.expire(now - 1) == 0
        assert d.store.client.exists(d.store._key(b"sb"))
        time.sleep(1.0)
        d.add("d", "a later text that sweeps")  # (its write drops b, past the window)
        assert not d.store.client.exists(d.store._key(b"sb"))
        assert d.check_and_add("e", texts[0]) == (True, [])


def test_removals_and_expiry_free_a_server_out_of_memory(redis_url: str) -> None:
    """Out of memory (maxmemory, noeviction) writes are refused, and remove() and the
    retention window still free memory (the delete functions were refused with the writes: a
    full server stayed full past the window)."""
    import redis

    with _open(redis_url, retention=2) as d:
        now = time.time()
        texts = [" ".join(_vocab(random.Random(i), 30)) for i in range(20)]
        d.add_many([f"t{i}" for i in range(20)], texts, [now - 1.5] * 20)
        client = d.store.client
        client.config_set("maxmemory", 1)
        try:
            with pytest.raises(redis.exceptions.OutOfMemoryError):
                d.add("new", "a text that does not fit any more, long enough to compare")
            d.remove("t0")
            assert "t0" not in d and len(d) == 19
            time.sleep(0.6)
            assert d.expire(time.time() - 2) == 19 and len(d) == 0
        finally:
            client.config_set("maxmemory", 0)
        d.add("new", "a text that does not fit any more, long enough to compare")


def test_a_write_is_not_failed_by_the_expiry_after_it(redis_url: str) -> None:
    """The retention window's expiry runs after a write, at most once a second: when it fails
    (here a user that may not list the times), the write it follows is stored and answered,
    not failed (it raised, for 300 texts stored: re-sent, each was its own duplicate)."""
    import redis

    admin = redis.Redis.from_url(redis_url)
    admin.execute_command("ACL", "SETUSER", "noscan", "on", ">pw-noscan", "~*", "&*", "+@all",
                          "-zrangebyscore")  # fmt: skip
    try:
        base = redis_url.replace("redis://", "redis://noscan:pw-noscan@")
        with _open(base, retention=60) as d:
            texts = [" ".join(_vocab(random.Random(i), 30)) for i in range(5)]
            assert d.check_and_add_many([f"w{i}" for i in range(5)], texts) == [(True, [])] * 5
            assert [m.id for m in d.check(texts[2])] == ["w2"]
            with pytest.raises(redis.exceptions.NoPermissionError):
                d.expire(time.time())
    finally:
        admin.execute_command("ACL", "DELUSER", "noscan")


def test_a_user_that_may_not_load_functions_gets_the_scripts(redis_url: str) -> None:
    """An ACL user without FUNCTION runs the library by EVAL, as a server without functions
    does (it stopped `neardup serve` with a NoPermissionError traceback); a permission the
    store needs and lacks is a store fault (503), not an internal error."""
    import redis
    from neardup.service.backend import store_fault

    admin = redis.Redis.from_url(redis_url)
    admin.execute_command("ACL", "SETUSER", "nofn", "on", ">pw-nofn", "~*", "&*", "+@all",
                          "-function")  # fmt: skip
    try:
        with _open(redis_url.replace("redis://", "redis://nofn:pw-nofn@")) as d:
            assert d.store.fn.scripted
            text = " ".join(_vocab(random.Random(3), 30))
            assert d.check_and_add("a", text) == (True, [])
            assert [m.id for m in d.check(text)] == ["a"]
            with pytest.raises(redis.exceptions.NoPermissionError) as denied:
                d.store.client.function_list()
            assert store_fault(denied.value)
    finally:
        admin.execute_command("ACL", "DELUSER", "nofn")


def test_the_probe_of_readiness_fails_as_requests_fail(redis_url: str) -> None:
    """(/readyz counted with ZCOUNT: a user refused FCALL looked ready while every request was
    answered 503)"""
    import redis
    from neardup.service.backend import probe, store_fault

    admin = redis.Redis.from_url(redis_url)
    admin.execute_command("ACL", "SETUSER", "nocall", "on", ">pw-nocall", "~*", "&*", "+@all",
                          "-fcall", "-fcall_ro")  # fmt: skip
    try:
        with _open(redis_url) as d:
            probe(d)  # (a user with every permission: ready)
        with _open(redis_url.replace("redis://", "redis://nocall:pw-nocall@")) as d:
            len(d)  # (what the probe asked before)
            with pytest.raises(redis.exceptions.NoPermissionError) as denied:
                d.check("a text that any request would send to the library")
            assert store_fault(denied.value)
            with pytest.raises(redis.exceptions.NoPermissionError):
                probe(d)
    finally:
        admin.execute_command("ACL", "DELUSER", "nocall")


def test_large_batches(redis_url: str) -> None:
    """Batches past the library's chunks (2,000 fields split at once, 4,000 arguments a
    call): the answers of the embedded store."""
    rng = random.Random(6)
    vocab = _vocab(rng, 20_000)
    texts = [" ".join(rng.choice(vocab) for _ in range(12)) for _ in range(4600)]
    texts[4500:] = [t + " x" for t in texts[:100]]  # near-copies of the first ones
    local = Deduplicator()
    with _open(redis_url) as d:
        d.add_many(list(range(2500)), texts[:2500])
        local.add_many(list(range(2500)), texts[:2500])
        ids = list(range(2500, 4600))
        want = _answers(local.check_and_add_many(ids, texts[2500:]))
        assert _answers(d.check_and_add_many(ids, texts[2500:])) == want
        assert len(d) == len(local) == 4500


def test_a_server_that_lost_the_functions(redis_url: str) -> None:
    with _open(redis_url) as d:
        d.add("a", "some text to find again later")
        redis.Redis.from_url(redis_url).function_flush()
        assert [m.id for m in d.check("some text to find again later")] == ["a"]
        assert d.check_and_add("b", "another text entirely, not a copy") == (True, [])


def test_long_ids_and_texts(any_url: str) -> None:
    """A version's data is one string; a check reads of its candidates only the part before
    the text (also when a long id makes that part longer than the first read of it)."""
    from neardup.backends.redis_store import id_hash, unpack_data
    from neardup.stores import enc_id

    long_id = "id-" + "é" * 600  # (1,203 bytes: the head is read in two parts)
    text = " ".join(_vocab(random.Random(5), 20_000))  # (~120 KB)
    with _open(any_url) as d:
        for scripted in (False, True):
            d.store.fn.scripted = scripted
            d.add(long_id, text, 1765000000.123456)
            d.add("short", text[:5000] + " other", -0.5)
            assert d.get(long_id) == text and [m.id for m in d.check(text)] == [long_id]
            hashes = [id_hash(enc_id(long_id)), id_hash(enc_id("short"))]
            heads = d.store._values(hashes, False)
            for v, id, ts in zip(heads, (long_id, "short"), (1765000000.123456, -0.5)):
                assert v is not None
                _, _, t, i, m, k, x = unpack_data(v)
                assert (i, t, x, len(m), len(k)) == (enc_id(id), ts, b"", 100, 80)
            record = hashes[0] + (heads[0] or b"")[:8]  # (id hash, ref)
            assert len(heads[0] or b"") < 1500 and d.store.texts([record]) == {record: text}
            d.add(long_id, text + " again")  # (replaced: the old version's records are cut)
            assert d.store.texts([record]) == {}  # (the text of another version: not read)
            assert d.get(long_id) == text + " again"
            d.remove(long_id)
            d.remove("short")
            assert len(d) == 0 and d.check(text) == [] and long_id not in d


def test_ids_and_texts_the_embedded_store_takes_are_taken_alike(any_url: str) -> None:
    """A text with a lone surrogate (half of an escaped pair in JSON) is stored and read back
    as by the embedded store (it raised UnicodeEncodeError, one refusing a whole batch); an
    id longer than the index holds is refused by both, naming it (Redis stored it)."""
    text = "emoji half \ud83d of a pair, in a text long enough to be compared"
    other = "another text entirely, nothing like the first one at all here"
    embedded = Deduplicator()
    with _open(any_url) as d:
        for store in (embedded, d):
            assert store.add_many(["s", "o"], [text, other]) is not None
            assert store.get("s") == text and [m.id for m in store.check(text)] == ["s"]
            assert store.check_and_add("t", text)[0] is False
            for bad in ("x" * 65_537, "é" * 32_769):
                with pytest.raises(ValueError, match="^id must be at most 65536 bytes of UTF-8"):
                    store.add(bad, other + " more")
                with pytest.raises(ValueError, match=r"ids\[1\] must be at most 65536 bytes"):
                    store.add_many(["ok", bad], [other, other])
            store.add("y" * 65_536, "a third text, unlike the others, long enough as well")
            assert len(store) == 3


def test_scripts_where_functions_are_refused(any_url: str) -> None:
    """The same library sent with EVAL (servers or proxies without FUNCTION)."""
    with _open(any_url) as d:
        d.store.fn.scripted = True
        base = " ".join(_vocab(random.Random(4), 50))
        assert d.check_and_add_many(["a", "b"], [base, base + " x"])[1][0] is False
        assert [m.id for m in d.check(base)] == ["a"]
        d.remove("a")
        assert d.expire(time.time() + 1) == 0 and len(d) == 0


def test_a_stalled_reservation_expires(cluster_url: str) -> None:
    """A writer killed between reserving a band list and committing blocks that list only
    until its reservation expires; then the check-and-add goes through."""
    with _open(cluster_url) as d:
        text = " ".join(_vocab(random.Random(5), 40))
        norm = [d.policy.prepare(text)]
        keys = d.rule.probes(norm, d.fingerprinter.fingerprint_many(norm))[0]
        band, field = d.store._bands[3], b"!" + int(keys[0][3]).to_bytes(4, "big")
        deadline = int(time.time() * 1000) + 800
        d.store.client.hset(band, field, f"dead,{deadline}".encode())
        start = time.monotonic()
        assert d.check_and_add("a", text) == (True, [])
        assert 0.3 < time.monotonic() - start < 10
        assert d.stats()["conflicts"] >= 1
        assert not d.store.client.hexists(band, field)


# -- races across processes -------------------------------------------------------------------


def _race_worker(args: tuple[str, list[tuple[str, str]], Any]) -> list[tuple[str, bool, list[Any]]]:
    url, jobs, barrier = args
    with RedisDeduplicator.from_url(url) as d:
        barrier.wait()
        with ThreadPoolExecutor(4) as pool:
            found = list(pool.map(lambda j: d.check_and_add(*j), jobs))
    return [(i, a, [m.id for m in ms]) for (i, _), (a, ms) in zip(jobs, found)]


def _race(url: str, jobs: list[tuple[str, str]], procs: int) -> list[tuple[str, bool, list[Any]]]:
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(procs)
        shares = [(url, jobs[p::procs], barrier) for p in range(procs)]
        with ctx.Pool(procs) as pool:
            return [r for part in pool.map(_race_worker, shares) for r in part]


def test_exactly_one_of_racing_near_copies_is_added(any_url: str) -> None:
    rng = random.Random(6)
    vocab = _vocab(rng)
    jobs = []
    for g in range(12):
        base = [rng.choice(vocab) for _ in range(80)]
        jobs += [(f"g{g}-{j}", " ".join(_edit(rng, base, vocab, 1))) for j in range(6)]
    rng.shuffle(jobs)
    url = _url(any_url, fresh_ns())
    results = _race(url, jobs, 3)
    added = sorted(i.split("-")[0] for i, a, _ in results if a)
    assert added == sorted(f"g{g}" for g in range(12))
    with RedisDeduplicator.from_url(url) as d:
        for _, a, matches in results:  # every refusal names a stored text
            assert a or (matches and all(m in d for m in matches))


def _issue_texts(rng: random.Random, vocab: list[str]) -> tuple[str, list[str], str]:
    """A; 20 texts B, each near A and near C; C, near every B and not near A."""
    a = [rng.choice(vocab) for _ in range(150)]
    shared = list(a)
    shared[20:27] = [rng.choice(vocab) for _ in range(7)]  # what B and C share against A
    c = list(shared)
    c[100:113] = [rng.choice(vocab) for _ in range(13)]
    bs = [" ".join(shared) + f" n{i}" for i in range(20)]
    return " ".join(a), bs, " ".join(c)


def test_a_text_is_refused_only_for_stored_texts(any_url: str) -> None:
    """Issue 26's race, 50 trials: A stored; 20 near-copies B of A (each also near C) and C
    (near the Bs, not near A) sent at once from two processes. Every B is a copy of A, and C
    must be added: it is near only texts that are never stored."""
    rng = random.Random(7)
    vocab = _vocab(rng)
    url = _url(any_url, fresh_ns())
    prep = Policy.default().prepare
    wrong = 0
    with RedisDeduplicator.from_url(url) as d:
        for trial in range(50):
            a, bs, c = _issue_texts(rng, vocab)
            assert jaccard(prep(a), prep(bs[0])) >= 0.8 and jaccard(prep(bs[0]), prep(c)) >= 0.8
            assert jaccard(prep(a), prep(c)) < 0.8
            assert d.check_and_add(f"A{trial}", a)[0]
            jobs = [(f"B{trial}-{i}", b) for i, b in enumerate(bs)] + [(f"C{trial}", c)]
            rng.shuffle(jobs)
            for i, added, matches in _race(url, jobs, 2) if trial < 3 else _threads(d, jobs):
                if i.startswith("B"):
                    assert not added and f"A{trial}" in matches
                elif not added:
                    wrong += 1
                for m in matches:
                    assert m in d, f"{i} refused for {m}, which is not stored"
    assert wrong == 0


def _threads(
    d: RedisDeduplicator, jobs: list[tuple[str, str]]
) -> list[tuple[str, bool, list[Any]]]:
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda j: d.check_and_add(*j), jobs))
    return [(i, a, [m.id for m in ms]) for (i, _), (a, ms) in zip(jobs, found)]


def test_connection_loss_is_an_error_not_an_answer(tmp_path: Any) -> None:
    server = RedisServer(tmp_path)
    d = RedisDeduplicator.from_url(
        f"redis://127.0.0.1:{server.port}/0", socket_timeout=2, socket_connect_timeout=2
    )
    d.add("kept", "a text that was acknowledged")
    server.stop()
    with pytest.raises(redis.exceptions.ConnectionError):
        d.check_and_add("x", "another text")
    d.close()


def _band_records(client: Any, ns: str, id: str, bands: int = Policy().band_shape[0]) -> int:
    """How many records of ``id`` the ``bands`` band lists of namespace ``ns`` hold."""
    from neardup.backends.redis_store import id_hash
    from neardup.stores import enc_id

    h, n = id_hash(enc_id(id)), 0
    for key in (f"{ns}:b:{j}" for j in range(bands)):
        for field, value in client.hgetall(key).items():
            if len(field) == 4:  # (a band key; not the change count "#", nor a reservation)
                n += sum(value[i : i + 8] == h for i in range(0, len(value), 16))
    return n


def test_a_write_sent_again_after_a_lost_reply_answers_right(redis_url: str) -> None:
    """One server, a client that retries: the connection drops after Redis ran the conditional
    add, before its reply; redis-py sends it again. It used to be refused the second time and
    every text answered as a copy of itself."""
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    proxy = ReplyDropper(port)
    retry = redis.retry.Retry(redis.backoff.NoBackoff(), 3)
    client = redis.Redis(port=proxy.port, retry=retry, retry_on_error=[redis.ConnectionError])
    ns = fresh_ns()
    d = RedisDeduplicator(client, namespace=ns)
    rng = random.Random(5)
    texts = [_words(rng, 60) for _ in range(3)]
    proxy.drop(b"neardup7_add")
    assert d.check_and_add_many(["a", "b", "c"], texts) == [(True, [])] * 3
    assert proxy.dropped == 1 and len(d) == 3
    assert [m.id for m in d.check(texts[1])] == ["b"]
    assert _band_records(redis.Redis(port=port), ns, "b") == d.policy.band_shape[0]
    d.close()
    proxy.close()


@pytest.mark.parametrize("needle", [b"neardup7_put", b"neardup7_commit", b"neardup7_drop"])
def test_cluster_writes_sent_again_after_a_lost_reply(cluster_url: str, needle: bytes) -> None:
    """Redis Cluster (redis-py retries every command on a lost connection): a version written
    twice kept no records (its copies were added), records were appended twice, and a removal
    answered KeyError and left the id counted."""
    host, first = cluster_url.split("//")[1].split(":")
    nodes = redis.RedisCluster(host=host, port=int(first))
    proxies = {n.port: ReplyDropper(n.port) for n in nodes.get_nodes()}
    client = redis.RedisCluster(
        host=host, port=int(first), address_remap=lambda a: (a[0], proxies[a[1]].port)
    )
    ns = fresh_ns()
    d = RedisDeduplicator(client, namespace=ns)
    rng = random.Random(6)
    base, other = _words(rng, 80), _words(rng, 80)
    d.add("x", other)
    for p in proxies.values():
        p.drop(needle)
    assert d.check_and_add("a", base) == (True, [])
    if needle == b"neardup7_drop":
        d.remove("a")
    for p in proxies.values():
        p.drop(None)
    assert sum(p.dropped for p in proxies.values()) >= 1
    bands = d.policy.band_shape[0]
    if needle == b"neardup7_drop":
        assert "a" not in d and len(d) == 1 and _band_records(nodes, ns, "a") == 0
    else:
        assert _band_records(nodes, ns, "a") == bands
        assert [m.id for m in d.check(base)] == ["a"]
        assert d.check_and_add("copy", base)[0] is False
    d.close()
    for p in proxies.values():
        p.close()
