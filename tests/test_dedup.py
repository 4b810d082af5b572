"""Deduplicator and CorpusDeduper against brute force on real text (examples/news-sample.jsonl)."""

from __future__ import annotations

import gc
import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import SAMPLE
from neardup import Fingerprinter, hamming
from neardup.corpus import CorpusDeduper
from neardup.dedup import DedupBackend, Deduplicator, Match, Policy
from neardup.textstore import MemoryTextStore, SqliteTextStore
from neardup.verify import normalise, shingles


def rows(limit: int) -> list[dict[str, str]]:
    with SAMPLE.open(encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(limit), f)]


def exact_jaccard(a: str, b: str) -> float:
    sa, sb = shingles(normalise(a)), shingles(normalise(b))
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def typo(text: str, rng: random.Random, count: int) -> str:
    chars = list(text)
    for _ in range(count):
        i = rng.randrange(len(chars))
        chars[i] = rng.choice("abcdefghijklmnopqrstuvwxyz")
    return "".join(chars)


LONG = (
    "Debian is a free operating system for your computer. An operating system is the set of "
    "basic programs and utilities that make your computer run. Debian provides more than a pure "
    "OS: it comes with thousands of packages, precompiled software bundled up in a nice format "
    "for easy installation on your machine."
)


# -- Policy ------------------------------------------------------------------------------------


def test_policy_round_trip_and_validation() -> None:
    p = Policy.default()
    d = p.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert Policy.from_dict(d) == p
    assert Policy.from_dict({"k_long": 5}).k_long == 5
    assert p.radius(p.short_chars) == p.k_short and p.radius(p.short_chars + 1) == p.k_long
    with pytest.raises(ValueError, match="k_short must be an int in 0..64"):
        Policy(k_short=65)
    with pytest.raises(ValueError, match="threshold must be a number in"):
        Policy(threshold=1.5)
    with pytest.raises(ValueError, match="verifier must be one of"):
        Policy(verifier="euclid")
    with pytest.raises(ValueError, match="unknown policy setting.*'bogus'"):
        Policy.from_dict({"bogus": 1})
    with pytest.raises(ValueError, match="html must be"):
        Policy(html="maybe")
    # the quorum of full buckets counts bands: 1 up to the band shape's bands
    assert Policy(bands=8, rows=2, full_bucket_quorum=8).full_bucket_quorum == 8
    for bad in (0, 9, True, 2.0):
        with pytest.raises(ValueError, match=r"full_bucket_quorum must be an int in 1\.\.8"):
            Policy(bands=8, rows=2, full_bucket_quorum=bad)  # type: ignore[arg-type]


# -- Deduplicator ------------------------------------------------------------------------------


def test_check_equals_brute_force_two_stage_on_real_text() -> None:
    """check() returns exactly the stored texts within the radius whose Jaccard >= threshold."""
    data = rows(500)
    policy = Policy.default()
    d = Deduplicator(policy=policy)
    f = policy.make_fingerprinter()
    stored: list[tuple[str, str, int]] = []
    for r in data[:350]:
        fp = d.add(r["id"], r["text"])
        stored.append((r["id"], r["text"], fp))
        assert fp == f.fingerprint(policy.prepare(r["text"]))
    found = 0
    for r in data[350:]:
        got = {m.id: m for m in d.check(r["text"])}
        fp = f.fingerprint(policy.prepare(r["text"]))
        k = policy.radius(len(policy.prepare(r["text"])))
        want = {}
        for sid, text, sfp in stored:
            dist = hamming(fp, sfp)
            if dist <= k:
                j = exact_jaccard(r["text"], text)
                if j >= policy.threshold:
                    want[sid] = (dist, j)
        assert set(got) == set(want)
        for sid, (dist, j) in want.items():
            assert got[sid].distance == dist
            assert got[sid].similarity == pytest.approx(j, abs=1e-9)
        found += len(want)
    assert found >= 10  # the sample holds copies: the test compares something


def test_recall_against_exact_jaccard_on_real_text() -> None:
    """The candidate stage misses few true near-duplicates (Jaccard >= 0.8) of the sample."""
    data = rows(800)
    d = Deduplicator()
    truth = found = 0
    sets = [shingles(normalise(r["text"])) for r in data]
    for i, r in enumerate(data):
        matches = {m.id for m in d.check(r["text"])}
        a = sets[i]
        for j in range(i):
            b = sets[j]
            small, large = sorted((len(a), len(b)))
            if small < 0.8 * large:  # Jaccard <= small / large
                continue
            inter = len(a & b)
            if inter >= 0.8 * (len(a) + len(b) - inter):
                truth += 1
                found += j in matches
        d.add(i, r["text"])
    assert truth > 30
    assert found / truth >= 0.95


def test_matches_best_first_and_match_fields() -> None:
    d = Deduplicator()
    d.add("exact", LONG)
    d.add("edited", LONG.replace("thousands", "many"))
    ms = d.check(LONG)
    assert [m.id for m in ms] == ["exact", "edited"]
    assert ms[0] == Match("exact", 0, 1.0)
    assert ms[1].similarity is not None and 0.8 <= ms[1].similarity < 1.0
    assert ms[0].to_dict() == {"id": "exact", "distance": 0, "similarity": 1.0}


def test_check_and_add_is_atomic_under_50_threads() -> None:
    d = Deduplicator()
    rng = random.Random(3)
    copies = [typo(LONG, rng, 2) for _ in range(50)]
    barrier = threading.Barrier(50)
    results: list[bool] = []
    lock = threading.Lock()

    def send(i: int) -> None:
        barrier.wait()
        added, matches = d.check_and_add(f"t{i}", copies[i])
        with lock:
            results.append(added)
        if not added:
            assert matches and matches[0].similarity is not None

    threads = [threading.Thread(target=send, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1
    assert len(d) == 1


def test_check_and_add_many_sees_earlier_items_of_the_batch() -> None:
    d = Deduplicator()
    other = "A completely different sentence about the weather in Paris during the spring."
    out = d.check_and_add_many([1, 2, 3], [LONG, LONG + " ", other])
    assert [a for a, _ in out] == [True, False, True]
    assert out[1][1][0].id == 1
    assert d.check_many([LONG, "nothing like it at all, really nothing"]) == [
        [Match(1, 0, 1.0)],
        [],
    ]
    fps = d.add_many([4, 5], [other, other + "!"], timestamps=[1.0, 2.0])
    assert len(fps) == 2 and len(d) == 4
    with pytest.raises(ValueError, match="ids has 1 items but texts has 2"):
        d.add_many([1], ["a", "b"])
    with pytest.raises(TypeError, match="texts must be a sequence of str"):
        d.check_many("a string")  # type: ignore[arg-type]


def test_remove_get_contains_expire_stats() -> None:
    d = Deduplicator()
    d.add(1, LONG, timestamp=100.0)
    d.add("b", "short text number two", timestamp=200.0)
    assert 1 in d and "b" in d and 2 not in d and len(d) == 2
    assert d.get(1) == LONG
    with pytest.raises(KeyError):
        d.get(99)
    assert d.expire(150.0) == 1
    assert 1 not in d and d.check(LONG) == []
    d.remove("b")
    with pytest.raises(KeyError):
        d.remove("b")
    s = d.stats()
    assert s["documents"] == 0 and s["adds"] == 2 and s["policy"] == Policy.default().to_dict()
    with pytest.raises(TypeError, match="id must be int or str"):
        d.add(1.5, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be an int in 0..64"):
        d.check("x", k=99)
    # (a wrong type is a TypeError, as the README says of every argument; it was a ValueError)
    for bad in (1.5, "3", True):
        with pytest.raises(TypeError, match="k must be an int in 0..64 or None, got"):
            d.check("x", k=bad)  # type: ignore[arg-type]
    d.close()
    with pytest.raises(ValueError, match="closed"):
        d.check("x")


def test_protocol_and_verifier_kinds() -> None:
    assert isinstance(Deduplicator(), DedupBackend)
    for kind in ("levenshtein", "cosine"):
        d = Deduplicator(policy=Policy(verifier=kind))
        d.add(1, LONG)
        ms = d.check(LONG.replace("computer", "machine"))
        assert ms and ms[0].id == 1 and ms[0].similarity is not None
    d = Deduplicator(policy=Policy(verifier="none", k_short=3, k_long=3))
    d.add(1, LONG)
    assert d.check(LONG) == [Match(1, 0, None)]


def test_custom_fingerprinter_index_and_store() -> None:
    from neardup import Index

    store = MemoryTextStore()
    d = Deduplicator(Fingerprinter(), index=Index(k=12), store=store)
    d.add(7, LONG)
    assert store.get(7) == LONG
    assert d.check(LONG)[0].id == 7


def test_open_is_durable_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "dd"
    with Deduplicator.open(path) as d:
        assert d.check_and_add(1, LONG) == (True, [])
        d.add("two", "another text, unrelated to the first one in any way")
    assert (path / "texts.sqlite").exists() and (path / "policy.json").exists()
    with Deduplicator.open(path) as d:
        assert len(d) == 2 and d.get(1) == LONG
        added, matches = d.check_and_add(3, LONG + " ")
        assert not added and matches[0].id == 1
        d.remove("two")
    with Deduplicator.open(path) as d:
        assert "two" not in d and len(d) == 1
    with pytest.raises(ValueError, match="policy differs"):
        Deduplicator.open(path, policy=Policy(k_long=5))


CHILD = """
import os, signal, sys
from neardup.dedup import Deduplicator
d = Deduplicator.open(sys.argv[1])
for i in range(20):
    d.add(i, f"document number {i}: " + "some words to make it longer " * (i + 1))
print("acked", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_acknowledged_adds_survive_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "dd"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdout.strip() == "acked"
    with Deduplicator.open(path) as d:
        assert len(d) == 20
        assert d.check(d.get(19))[0].id == 19


def test_retention_expires_old_texts(tmp_path: Path) -> None:
    with Deduplicator.open(tmp_path / "r", retention=10.0) as d:
        with pytest.raises(ValueError, match="older than the retention window"):
            d.add(1, LONG, timestamp=0.0)  # it would be expired at once
        d.add(1, LONG, timestamp=time.time() - 9.0)  # falls out of the window in a second
        time.sleep(1.1)  # (retention is applied at most once a second, as texts arrive)
        d.add(2, "a fresh text that is kept", timestamp=time.time())
        assert 1 not in d and 2 in d and d.check(LONG) == []
    with pytest.raises(ValueError, match="retention must be a positive number"):
        Deduplicator.open(tmp_path / "x", retention=-1)


@pytest.mark.parametrize("batch", [False, True])
def test_a_text_that_left_the_window_blocks_nothing(tmp_path: Path, batch: bool) -> None:
    """(a stored text past the window was still a candidate: it refused its near-copy, then the
    sweep after that write removed it, and neither text was stored) The sweep runs before a
    decision and before a check, at most a second late; and when a directory is opened."""
    d = Deduplicator.open(tmp_path / "w", retention=3.0)
    d.add(1, LONG, timestamp=time.time() - 2.5)  # out of the window in half a second
    time.sleep(1.2)
    assert d.check(LONG) == [] and 1 not in d
    d.add(1, LONG, timestamp=time.time() - 2.5)
    time.sleep(1.2)
    if batch:
        assert d.check_and_add_many([2], [LONG]) == [(True, [])]
    else:
        assert d.check_and_add(2, LONG) == (True, [])
    assert 1 not in d and 2 in d
    d.add(3, LONG_A, timestamp=time.time() - 2.7)
    d.close()
    time.sleep(0.5)  # (it leaves the window while the directory is closed)
    with Deduplicator.open(tmp_path / "w", retention=3.0) as d:
        assert 3 not in d and d.check(LONG_A) == [] and len(d) == 1


def test_sqlite_store_ids_and_order(tmp_path: Path) -> None:
    s = SqliteTextStore(tmp_path / "t.sqlite")
    s.put(1, "int one", 5.0)
    s.put("1", "str one", 6.0)
    s.put(2, "two", 7.0)
    s.put(1, "int one again", 8.0)  # replace: moves to the end
    assert s.get(1) == "int one again" and s.get("1") == "str one" and len(s) == 3
    assert [i for i, _, _ in s.items()] == ["1", 2, 1]
    assert s.expire(7.5) == ["1", 2]
    with pytest.raises(KeyError):
        s.delete(2)
    with pytest.raises(ValueError, match="sync must be one of"):
        SqliteTextStore(tmp_path / "u.sqlite", sync="sometimes")
    s.close()


# -- HTML --------------------------------------------------------------------------------------


def html_page(site: int, article: str, seed: int) -> str:
    rng = random.Random(seed)
    words = [f"Section {i} of site {site}" for i in range(60)]
    nav = "".join(f"<li><a href='/{w}'>{w}</a></li>" for w in rng.sample(words, 40))
    footer = f"Copyright site {site}. All rights reserved. " * 8
    body = "".join(f"<p>{p}</p>" for p in article.split(". "))
    if site == 0:
        return (
            f"<!DOCTYPE html><html><body><nav><ul>{nav}</ul></nav><article>{body}</article>"
            f"<footer>{footer}</footer></body></html>"
        )
    return (
        f"<html><body><div class='menu'>{nav}</div><div class='content'>{body}</div>"
        f"<div class='footer'>{footer}</div></body></html>"
    )


def test_html_copy_on_another_site_found_and_site_boilerplate_ignored() -> None:
    d = Deduplicator()
    other = rows(40)[-1]["text"] * 2
    d.add("a-site0", html_page(0, LONG, 1))
    d.add("b-site0", html_page(0, other, 2))
    ms = d.check(html_page(1, LONG, 3))
    assert [m.id for m in ms] == ["a-site0"] and ms[0].similarity == 1.0
    assert d.check(html_page(0, "Quite another article. It has nothing in common.", 4)) == []


# -- CorpusDeduper -----------------------------------------------------------------------------


def corpus_result(texts: list[str], chunks: int = 1, **kw: object) -> tuple[CorpusDeduper, object]:
    c = CorpusDeduper()
    for part in np.array_split(np.arange(len(texts)), chunks):
        c.feed([texts[i] for i in part])
    return c, c.result(**kw)  # type: ignore[arg-type]


def test_corpus_representatives_are_kept_near_duplicates() -> None:
    texts = [r["text"] for r in rows(600)]
    _, r = corpus_result(texts)
    rep = r.representative  # type: ignore[attr-defined]
    kept = rep == np.arange(len(texts))
    assert 0 < np.count_nonzero(~kept) < len(texts)
    for row in np.flatnonzero(~kept).tolist():
        assert kept[rep[row]]
        assert exact_jaccard(texts[row], texts[rep[row]]) >= 0.8
        assert r.similarity[row] == pytest.approx(exact_jaccard(texts[row], texts[rep[row]]))  # type: ignore[attr-defined]
    assert np.all(r.similarity[kept] == 1.0) and np.all(r.distance[kept] == 0)  # type: ignore[attr-defined]


def test_corpus_keep_order() -> None:
    texts = [LONG, "an unrelated line of text about nothing", LONG + " Indeed."]
    _, r = corpus_result(texts)
    assert r.representative.tolist() == [0, 1, 0]  # type: ignore[attr-defined]
    _, r = corpus_result(texts, keep_order=np.array([2, 1, 0]))
    assert r.representative.tolist() == [2, 1, 2]  # type: ignore[attr-defined]
    c = CorpusDeduper()
    c.feed(texts)
    with pytest.raises(ValueError, match="keep_order must be a permutation"):
        c.result(np.array([0, 0, 1]))


def test_corpus_memory_grows_with_shingles_not_text() -> None:
    c = CorpusDeduper()
    texts = [r["text"] for r in rows(500)]
    c.feed(texts)
    shingle_count = sum(len(shingles(normalise(t))) for t in texts)
    # sketches (4 bytes a shingle) plus fingerprint, length and 20 band keys per document
    # (vectors grow by doubling: up to twice that)
    assert 4 * shingle_count + 92 * len(texts) <= c.memory_bytes()
    assert c.memory_bytes() <= 2 * (4 * shingle_count + 100 * len(texts))
    assert len(c) == 500


def test_sketch_cache_is_bounded_and_misses_reread_the_store() -> None:
    d = Deduplicator()
    d.sketch_cache = 3
    data = rows(30)
    for r in data:
        d.add(r["id"], r["text"])
    assert len(d._sketches) == 0  # adds do not sketch: a check does, for its candidates
    for r in data:  # every stored text still found, through the store on a cache miss
        # (an explicit k takes the SimHash candidates, verified with the cached sketches)
        assert r["id"] in {m.id for m in d.check(r["text"], k=13)}
    assert len(d._sketches) == 3


def test_check_and_add_many_checks_against_pending_items_of_the_batch(tmp_path: Path) -> None:
    other = rows(40)[-1]["text"] * 2
    with Deduplicator.open(tmp_path / "b") as d:
        out = d.check_and_add_many(["x", "y", "z", "w"], [LONG, LONG + "!", other, other + "."])
        assert [a for a, _ in out] == [True, False, True, False]
        assert out[1][1][0].id == "x" and out[1][1][0].similarity is not None
        assert out[3][1][0].id == "z"
        assert len(d) == 2
    with Deduplicator.open(tmp_path / "b") as d:  # the batch was written durably
        assert sorted(map(str, ["x", "z"])) == sorted(i for i, _, _ in d.store.items())
        assert d.check(LONG)[0].id == "x"


def test_cached_sketches_add_no_objects_for_the_garbage_collector() -> None:
    # The deduplicator caches up to 200,000 sketches; if each were a GC-tracked object, every
    # full collection of a long-running service would walk them all (pauses of tens of ms).
    d = Deduplicator()
    texts = [f"stored text number {i} about the weather in a town by the sea" for i in range(2000)]
    d.add_many(list(range(2000)), texts)
    gc.collect()
    before = len(gc.get_objects())
    for i in range(2000):
        # verification with an explicit k sketches (and caches) the stored text; the default
        # check reads the sketches the core's engine holds
        assert d.check(texts[i], k=13) and d.check(texts[i])
    gc.collect()
    assert len(d._sketches) >= 1000
    assert len(gc.get_objects()) - before < 200


def test_empty_texts_are_never_copies() -> None:
    """Blank texts and pages with nothing visible prepare to "": never a match, in a check, a
    batch or against each other (they used to match each other at similarity 1.0)."""
    d = Deduplicator()
    blank = ["", "   ", "<html><body><script>x()</script></body></html>"]
    out = d.check_and_add_many(["a", "b", "c"], blank)
    assert [added for added, _ in out] == [True, True, True]
    assert d.check("") == [] and d.check(" \n ") == []
    assert d.check_and_add("d", "")[0] is True
    assert d.check("a text that is not empty at all") == []


LONG_A = "an old notice about the maintenance window of the cluster, scheduled for sunday night"


def test_a_text_expired_during_its_own_write_is_not_matched(tmp_path: Path) -> None:
    """The retention sweep of a write runs after the decision engine knows the write's texts: a
    text that expires at once is forgotten there too (it was matched though gone, and a later
    copy was refused for it)."""
    import time

    d = Deduplicator.open(tmp_path / "s", retention=10.0)
    prepare = d._prepare

    def slow(texts: Any) -> Any:  # a large batch takes time to prepare
        time.sleep(0.5)
        return prepare(texts)

    d._prepare = slow  # type: ignore[method-assign]
    d.check_and_add("old", LONG_A, timestamp=time.time() - 10 + 0.2)
    d._prepare = prepare  # type: ignore[method-assign]
    assert "old" not in d
    assert d.check(LONG_A) == []
    assert d.check_and_add("new", LONG_A) == (True, [])
    d.close()


def test_removed_copies_do_not_hide_a_stored_text() -> None:
    """70 identical texts added then removed pushed the first one out of the busy buckets."""
    d = Deduplicator()
    text = "the quick brown fox jumps over the lazy dog near the river bank on a sunny day " * 3
    d.add("a", text)
    for i in range(70):
        d.add(f"x{i}", text)
    for i in range(70):
        d.remove(f"x{i}")
    assert [m.id for m in d.check(text)] == ["a"]
    assert d.check_and_add("b", text)[0] is False


def test_a_failed_engine_call_leaves_the_deduplicator_usable(tmp_path: Path) -> None:
    from neardup.kept import KeptTexts

    d = Deduplicator()
    spill = tmp_path / "spill"  # (missing: the engine's first spill fails)
    d._kept = KeptTexts(d.policy, memory_budget=0, spill_dir=str(spill))
    with pytest.raises(OSError, match="temporary sketch file"):
        d.check_and_add_many(["a", "x"], [LONG_A, "a different text about other matters"])
    with pytest.raises(OSError):
        d.add("b", LONG_A)
    assert len(d) == 0 and d.check(LONG_A) == []
    spill.mkdir()
    assert d.check_and_add("c", LONG_A) == (True, [])
    assert [m.id for m in d.check(LONG_A)] == ["c"]
    assert d.check_and_add("d", LONG_A + "!")[1][0].id == "c"


@pytest.mark.parametrize("verifier", ["jaccard", "none", "levenshtein"])
def test_a_store_given_with_texts_is_indexed(tmp_path: Path, verifier: str) -> None:
    """Deduplicator(store=...) on a store that holds texts finds them by every path (the
    index was left empty: a radius, a fingerprint or another verifier found nothing, and
    check_and_add took an exact copy)."""
    texts = {f"t{i}": row["text"] for i, row in enumerate(rows(30))}
    store = SqliteTextStore(str(tmp_path / "t.sqlite"))
    Deduplicator(store=store).add_many(list(texts), list(texts.values()))
    store.close()
    store = SqliteTextStore(str(tmp_path / "t.sqlite"))
    d = Deduplicator(policy=Policy(verifier=verifier), store=store)  # type: ignore[arg-type]
    assert len(d.index) == len(texts)
    for i, text in list(texts.items())[:5]:
        assert i in [m.id for m in d.check(text)]
        assert i in [m.id for m in d.check(text, k=20)]
        fp = int(d.policy.fingerprint_many(d.fingerprinter, [text])[0])
        assert i in [m.id for m in d.check_fingerprint(fp)]
        added, _ = d.check_and_add("copy-" + i, text)
        assert not added
    store.close()


def test_numpy_k_and_wrong_id_types_get_the_errors_of_the_index() -> None:
    """(check(k=np.int64(3)) was refused though the index takes it; remove(1.5) was a KeyError)"""
    from neardup import Index

    d = Deduplicator()
    d.add("a", rows(1)[0]["text"])
    assert [m.id for m in d.check(rows(1)[0]["text"], k=np.int64(3))] == ["a"]  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="id must be int or str, got float"):
        d.remove(1.5)  # type: ignore[arg-type]
    index = Index(k=3)
    index.add(1, 5)
    for call in (lambda: index.add(True, 5), lambda: index.query(True), lambda: Index(k=True)):
        with pytest.raises(TypeError, match="not bool"):
            call()
    assert [i for i, _ in index.query(5, 0)] == [1]


def test_ids_from_numpy_and_pandas_are_taken_as_the_index_takes_them(tmp_path: Path) -> None:
    """(an int64 array or a pandas column of ids was refused: "ids[0] must be int or str, got
    int64"); the ids come back as ints."""
    import pandas as pd

    texts = [r["text"] for r in rows(4)]
    for d in (Deduplicator(), Deduplicator.open(tmp_path / "d")):
        d.add_many(np.array([1, 2], dtype=np.int64), texts[:2])
        out = d.check_and_add_many(pd.Series([3, 4], dtype="int64"), [texts[2], texts[0]])
        assert [a for a, _ in out] == [True, False] and [m.id for m in out[1][1]] == [1]
        d.add(np.uint32(5), texts[3])  # type: ignore[arg-type]
        assert sorted(m.id for t in texts for m in d.check(t)) == [1, 2, 3, 5]
        assert all(type(m.id) is int for m in d.check(texts[3]))
        with pytest.raises(TypeError, match="ids\\[0\\] must be int or str, got float64"):
            d.add_many(np.array([1.0]), texts[:1])  # type: ignore[arg-type]
        # timestamps from numpy, int or float seconds, as the index takes them ("timestamps[0]
        # must be float seconds or None, got int64")
        now = int(time.time())
        d.add_many(np.array([6, 7]), texts[:2], np.array([now, now - 5], dtype=np.int64))
        d.add_many([8], texts[2:3], np.array([now - 1.5]))
        with pytest.raises(TypeError, match="timestamps\\[0\\] must be float seconds or None"):
            d.add_many([9], texts[:1], np.array([True]))
        assert sorted(m.id for m in d.check(texts[0])) == [1, 6]
        d.close()
