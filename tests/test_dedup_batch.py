"""Deduplicator's batch and read paths against brute force: in-batch near-copies, the radius per
text length, check_fingerprint, lock-free reads next to a writer, the sketch cache on replace."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import numpy as np
import pytest
from neardup import hamming
from neardup.dedup import Deduplicator, Match, Policy
from neardup.textstore import SqliteTextStore
from neardup.verify import normalise, shingles

WORDS = (
    "river stone cloud market winter signal garden copper lantern harbor meadow violet engine "
    "silver thunder orchard planet candle forest mirror ribbon saddle timber velvet"
).split()


def jaccard(a: str, b: str) -> float:
    sa, sb = shingles(normalise(a)), shingles(normalise(b))
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def corpus(rng: random.Random, n: int) -> list[str]:
    """Texts of 4-40 words, a third of them near-copies (one word changed) of an earlier one."""
    out: list[str] = []
    for _ in range(n):
        if out and rng.random() < 0.35:
            words = rng.choice(out).split()
            words[rng.randrange(len(words))] = rng.choice(WORDS)
            out.append(" ".join(words))
        else:
            out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 40))))
    return out


def brute_force(
    policy: Policy, fps: list[int], texts: list[str], stored: list[tuple[object, int, str]]
) -> list[tuple[bool, dict[object, int]]]:
    """check_and_add of each text in order, by scanning everything added so far: every added
    text whose Jaccard reaches the threshold (the decision's candidates find a pair at the
    threshold with probability >= 0.999, and none here has more than verify_limit of them)."""
    added = list(stored)
    out = []
    for j, (fp, text) in enumerate(zip(fps, texts)):
        found = {i: hamming(fp, f) for i, f, t in added if jaccard(text, t) >= policy.threshold}
        if not found:
            added.append((f"b{j}", fp, text))
        out.append((not found, found))
    return out


@pytest.mark.parametrize("size", [1, 2, 37, 300])
def test_check_and_add_many_equals_brute_force(size: int) -> None:
    rng = random.Random(size)
    # short_chars=120 so both radii (k_short for short texts, k_long for long ones) occur
    policy = Policy(k_short=12, k_long=6, short_chars=120, threshold=0.6)
    d = Deduplicator(policy=policy)
    stored_texts = corpus(rng, 200)
    d.add_many(list(range(200)), stored_texts)
    fps = [int(x) for x in policy.fingerprint_many(d.fingerprinter, stored_texts)]
    stored: list[tuple[object, int, str]] = [(i, fps[i], stored_texts[i]) for i in range(200)]
    batch = corpus(rng, size)
    # near-copies of stored texts too
    batch = [
        t if rng.random() < 0.7 else stored_texts[rng.randrange(200)] + " " + rng.choice(WORDS)
        for t in batch
    ]
    batch_fps = [int(x) for x in policy.fingerprint_many(d.fingerprinter, batch)]
    expected = brute_force(policy, batch_fps, batch, stored)
    got = d.check_and_add_many([f"b{j}" for j in range(size)], batch)
    for j, ((added, matches), (want_added, want)) in enumerate(zip(got, expected)):
        assert added == want_added, j
        assert {m.id: m.distance for m in matches} == want, j
        sims = [m.similarity or 0.0 for m in matches]
        assert sims == sorted(sims, reverse=True)  # best first
    assert len(d) == 200 + sum(1 for a, _ in expected if a)
    if size >= 37:  # the corpus makes in-batch near-copies: the path is exercised
        assert any(any(str(i).startswith("b") for i in want) for _, want in expected)


def test_check_and_add_many_none_verifier_and_same_text_twice() -> None:
    d = Deduplicator(policy=Policy(verifier="none", k_short=3, k_long=3))
    out = d.check_and_add_many(["a", "b", "c"], ["same text here", "same text here", "other"])
    assert out[0] == (True, [])
    assert out[1][0] is False and out[1][1] == [Match("a", 0, None)]
    assert "b" not in d and "a" in d


def test_check_fingerprint_against_brute_force() -> None:
    rng = random.Random(5)
    d = Deduplicator(policy=Policy(k_short=7, k_long=5))
    texts = corpus(rng, 300)
    fps = [int(f) for f in d.policy.fingerprint_many(d.fingerprinter, texts)]
    d.add_many(list(range(300)), texts)
    for probe in fps[:20] + [rng.getrandbits(64) for _ in range(5)]:
        for k in (None, 0, 4, 20):
            got = d.check_fingerprint(probe, k)
            radius = d.policy.k_max if k is None else k
            want = sorted(
                ((i, hamming(probe, f)) for i, f in enumerate(fps) if hamming(probe, f) <= radius),
                key=lambda x: (x[1], x[0]),
            )
            assert [(m.id, m.distance) for m in got] == want
            assert all(m.similarity is None for m in got)
    assert d.check_fingerprint(np.uint64(fps[0]), 0)[0].id == 0
    with pytest.raises(ValueError, match="fingerprint"):
        d.check_fingerprint(-1)
    with pytest.raises(ValueError, match="fingerprint"):
        d.check_fingerprint(2**64)
    with pytest.raises(TypeError, match="fingerprint"):
        d.check_fingerprint("12")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be"):
        d.check_fingerprint(1, 65)


def test_replaced_text_is_verified_against_the_new_text(tmp_path: Path) -> None:
    with Deduplicator.open(tmp_path / "d", policy=Policy(k_short=64, k_long=64)) as d:
        a = "the quick brown fox jumps over the lazy dog near the river bank"
        d.add(1, a)
        assert [m.id for m in d.check(a)] == [1]  # caches the sketch of id 1
        d.add(1, "completely different words about copper lanterns in winter")
        assert d.check(a) == []  # not the stale sketch
        d.remove(1)
        assert d.check(a) == []


def test_reads_run_beside_the_writer_and_exactly_one_copy_is_added(tmp_path: Path) -> None:
    rng = random.Random(9)
    base = " ".join(rng.choice(WORDS) for _ in range(30))
    with Deduplicator.open(tmp_path / "d", sync="normal") as d:
        d.add_many(list(range(100)), corpus(rng, 100))
        errors: list[BaseException] = []
        results: list[bool] = []
        stop = threading.Event()

        def reader() -> None:
            try:
                while not stop.is_set():
                    for m in d.check(base):
                        assert m.similarity is not None and m.similarity >= 0.8
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        def writer(w: int) -> None:
            try:
                for j in range(5):
                    added, _ = d.check_and_add(f"w{w}-{j}", base + " " + WORDS[(w + j) % 3])
                    results.append(added)
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        readers = [threading.Thread(target=reader) for _ in range(3)]
        writers = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
        for t in readers + writers:
            t.start()
        for t in writers:
            t.join()
        stop.set()
        for t in readers:
            t.join()
        assert not errors
        assert results.count(True) == 1
        assert len(d.check(base)) == 1


def test_sqlite_put_many_then_reads_from_other_threads(tmp_path: Path) -> None:
    store = SqliteTextStore(tmp_path / "t.sqlite")
    store.put_many([(i, f"text {i}", 1.0 + i) for i in range(50)])
    store.put_many([(3, "replaced", 100.0), ("s", "string id", None)])
    seen: dict[object, str] = {}

    def read() -> None:
        for i in (0, 3, 49, "s"):
            seen[i] = store.get(i)
        assert 3 in store and 50 not in store

    t = threading.Thread(target=read)
    t.start()
    t.join()
    assert seen == {0: "text 0", 3: "replaced", 49: "text 49", "s": "string id"}
    # insertion order: a replaced id moves to the end
    assert [i for i, _, _ in store.items()][-2:] == [3, "s"]
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.get(0)


@pytest.mark.parametrize("verifier", ["jaccard", "levenshtein", "none"])
@pytest.mark.parametrize("where", ["memory", "open"])
def test_a_batch_answers_as_its_texts_one_by_one_when_it_replaces_an_id(
    tmp_path: Path, verifier: str, where: str
) -> None:
    # A text kept under a stored id (or an id earlier in the batch) replaces that id's text: a
    # later text of the batch is not a copy of the text replaced (it was, while the batch was
    # decided in one engine call and the old text left only with the write).
    rng = random.Random(5)
    t1, t2 = (" ".join(rng.choice(WORDS) for _ in range(60)) for _ in range(2))
    t1b = t1 + " extra"
    policy = Policy(verifier=verifier)
    cases = [
        ([("a", t1)], ["a", "c"], [t2, t1b]),  # "a" stored, replaced by the batch
        ([], ["a", "a", "c"], [t1, t2, t1b]),  # "a" twice in the batch
        ([("x", t2)], ["a", "x", "a", "c"], [t2, t1, t1, t1b]),  # "a" in two runs
    ]
    for n, (stored, ids, texts) in enumerate(cases):
        made = []
        for _ in range(2):
            if where == "memory":
                made.append(Deduplicator(policy=policy))
            else:
                made.append(Deduplicator.open(tmp_path / f"{n}-{len(made)}", policy=policy))
        one, many = made
        for d in made:
            for i, text in stored:
                d.add(i, text)
        expect = [one.check_and_add(i, text) for i, text in zip(ids, texts)]
        got = many.check_and_add_many(ids, texts)
        assert [(added, [m.id for m in ms]) for added, ms in got] == [
            (added, [m.id for m in ms]) for added, ms in expect
        ], (n, got, expect)
        for i in set(ids):
            assert (i in many, many.get(i) if i in many else None) == (
                i in one,
                one.get(i) if i in one else None,
            )
        assert n == 2 or many.get("c") == t1b  # (in case 2, "c" is a copy of "x")
        for d in made:
            d.close()
