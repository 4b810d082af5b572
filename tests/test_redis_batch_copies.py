"""RedisDeduplicator.check_and_add_many on one server checks a batch's likely copies of stored
texts first (python/neardup/backends/redis_copies.py), against a real redis-server (fixtures
from redis_servers): the answers stay those of the texts taken one by one (neardup's own
in-process Deduplicator is the reference), including a copy that also matches a text added
earlier in the same batch and a copy whose match is replaced by an earlier text of the batch;
and the confirmed copies take no ticket (nothing written for them)."""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.redis

redis = pytest.importorskip("redis", reason="the [redis] extra is required")

from neardup import Deduplicator  # noqa: E402
from neardup.backends.redis import RedisDeduplicator  # noqa: E402
from redis_servers import _words, fresh_ns  # noqa: E402


def _changed(text: str, positions: range, word: str) -> str:
    w = text.split()
    for p in positions:
        w[p] = word + str(p)
    return " ".join(w)


def _batches(rng: random.Random) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(id, text) of a first batch of originals and a second one of copies, near-copies,
    new originals and their copies, a text between a stored one and a new one, and an id
    of the first batch given to an unrelated text before a copy of its old text."""
    first = [(f"a{j}", _words(rng, 60)) for j in range(12)]
    second: list[tuple[str, str]] = []
    for j, (_, t) in enumerate(first[:8]):
        second.append((f"c{j}", t))  # exact copy
        second.append((f"n{j}", _changed(t, range(3, 4), "zz")))  # near-copy
    for j in range(6):
        t = _words(rng, 60)
        second += [(f"o{j}", t), (f"p{j}", _changed(t, range(8, 9), "qq"))]
    # A stored text S, a new one far enough from S to be added, then one between the two.
    s = first[8][1]
    second.append(("far", _changed(s, range(10, 18), "yy")))
    second.append(("mid", _changed(s, range(10, 14), "yy")))
    # The id of a stored text taken by an unrelated one, then a copy of its old text.
    second.append(("a9", _words(rng, 60)))
    second.append(("old9", first[9][1]))
    rng.shuffle(second)
    # (the new text before the one between, the replacement before the copy it spoils)
    for before, after in (("far", "mid"), ("a9", "old9")):
        order = [i for i, _ in second]
        a, b = order.index(before), order.index(after)
        if a > b:
            second[a], second[b] = second[b], second[a]
    return first, second


def _answers(got: list[tuple[bool, list]]) -> list[tuple[bool, list[tuple[str, int]]]]:
    return [(ok, [(m.id, m.distance) for m in ms]) for ok, ms in got]


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_batches_answer_as_the_texts_one_by_one(redis_url: str, seed: int) -> None:
    first, second = _batches(random.Random(seed))
    local = Deduplicator()
    want = [local.check_and_add(i, t, timestamp=100.0) for i, t in first + second]
    d = RedisDeduplicator.from_url(redis_url, namespace=fresh_ns())
    admin = redis.Redis.from_url(redis_url)
    seq = f"{{{d.index.namespace}}}:seq"
    got = d.check_and_add_many([i for i, _ in first], [t for _, t in first], [100.0] * 12)
    tickets = int(admin.get(seq) or 0)
    n = len(second)
    got += d.check_and_add_many([i for i, _ in second], [t for _, t in second], [100.0] * n)
    assert _answers(got) == _answers(want)
    for (_, ms), (_, wms) in zip(got, want):
        assert [m.similarity for m in ms] == pytest.approx([m.similarity for m in wms])
    assert len(d) == len(local)
    by_id = dict(zip([i for i, _ in first + second], want))
    # The cases the batch must get right arose: a copy matching a text of its own batch too,
    # and the copy of a replaced text (added: its original is gone).
    assert {m.id for m in by_id["mid"][1]} >= {"a8", "far"}
    assert by_id["old9"] == (True, [])
    # The copies of stored texts took no ticket (every other text of the batch took one).
    stored = {i for i, _ in first}
    copies = [i for i, _ in second if not by_id[i][0] and {m.id for m in by_id[i][1]} & stored]
    assert len(copies) >= 16
    assert int(admin.get(seq) or 0) - tickets == n - len(copies)
    d.index.clear()


def test_a_batch_of_copies_only_writes_nothing(redis_url: str) -> None:
    rng = random.Random(9)
    texts = [_words(rng, 50) for _ in range(10)]
    d = RedisDeduplicator.from_url(redis_url, namespace=fresh_ns())
    assert all(ok for ok, _ in d.check_and_add_many(list(range(10)), texts))
    admin = redis.Redis.from_url(redis_url)
    seq = f"{{{d.index.namespace}}}:seq"
    before = int(admin.get(seq))
    got = d.check_and_add_many([f"x{j}" for j in range(10)], texts)
    assert [(ok, [m.id for m in ms]) for ok, ms in got] == [(False, [j]) for j in range(10)]
    assert int(admin.get(seq)) == before
    assert d.stats()["checks"] >= 20
    d.index.clear()
