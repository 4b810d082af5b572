"""neardup.corpus.CorpusDeduper: fed in overlapping steps (prepare in order, sketch in threads,
add in order) as `neardup dedup` feeds it, it gives what feed() gives; its decision is the greedy
rule against brute force (real text, HTML pages whose boilerplate is learnt chunk by chunk);
sketches spill to a file without changing an answer; work per document stays bounded on a hot
template family."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from _helpers import SAMPLE
from neardup.corpus import CorpusDeduper
from neardup.dedup import Policy
from neardup.verify import jaccard


def _texts() -> list[str]:
    with open(SAMPLE, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f][:900]
    menu = "<nav>home news sport</nav><div class='footer'>copyright the site 2025</div>"
    pages = [
        f"<html><body>{menu}<p>{t}</p><p>shared footer line of the site</p></body></html>"
        for t in texts[:200]
    ]
    return [x for pair in zip(texts[200:400], pages) for x in pair] + texts[400:]


@pytest.mark.parametrize("verifier", ["jaccard", "none"])
def test_steps_in_threads_equal_feed(verifier: str) -> None:
    texts = _texts()
    chunks = [texts[i : i + 97] for i in range(0, len(texts), 97)]
    policy = Policy.default().replace(verifier=verifier)
    whole = CorpusDeduper(policy)
    for c in chunks:
        whole.feed(c)
    stepped = CorpusDeduper(policy)
    stepped.boilerplate_min_pages = whole.boilerplate_min_pages
    with ThreadPoolExecutor(1) as prep, ThreadPoolExecutor(3) as pool:
        prepared = [prep.submit(stepped.prepare, c) for c in chunks]

        def sketch_of(prepared_chunk: Future[Any]) -> Any:
            return stepped.sketch(prepared_chunk.result())

        sketched = [pool.submit(sketch_of, p) for p in prepared]
        for f in sketched:
            stepped.add_sketched(f.result())
    assert len(stepped) == len(whole) == len(texts)
    assert stepped.memory_bytes() == whole.memory_bytes()
    a, b = whole.result(), stepped.result()
    assert np.array_equal(a.representative, b.representative)
    assert np.array_equal(a.pairs_a, b.pairs_a) and np.array_equal(a.pairs_b, b.pairs_b)
    assert a.duplicates > 0


@pytest.mark.parametrize("verifier", ["jaccard", "none"])
def test_deciding_as_fed_equals_deciding_at_the_end(verifier: str) -> None:
    texts = _texts() + _texts()[:300]  # (exact copies too)
    policy = Policy.default().replace(verifier=verifier)
    refs = texts[500:540]
    whole, streamed = CorpusDeduper(policy), CorpusDeduper(policy)
    for d in (whole, streamed):
        d.add_references(refs)
    visited = 0
    for i in range(0, len(texts), 97):
        whole.feed(texts[i : i + 97])
        streamed.feed(texts[i : i + 97])
        if i < 900:  # (the rest is visited by result())
            visited += streamed.decide_fed()
    assert visited == 970  # (ten chunks of 97)
    steps: list[int] = []
    a, b = whole.result(), streamed.result(progress=steps.append)
    assert sum(steps) == len(texts)
    for name in ("representative", "similarity", "reference", "empty"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.stats == b.stats
    assert a.duplicates > 0 and (a.reference >= 0).sum() > 0
    # a decision in another order starts over, and the streamed one is not reused after it
    c = streamed.result(np.arange(len(texts))[::-1].copy())
    assert np.array_equal(
        c.representative, whole.result(np.arange(len(texts))[::-1].copy()).representative
    )
    assert np.array_equal(streamed.result().representative, a.representative)


def test_add_sketched_checks_its_chunk() -> None:
    """A chunk's probes (sketches and band keys, made beside the decision) are fed once and
    only into an engine of their shape; nothing is added when refused."""
    d = CorpusDeduper()
    with pytest.raises(ValueError, match="norms has 1 items but fingerprints has 2"):
        d._engine.probes(["x"], np.zeros(2, np.uint64))
    d.add_sketched(d.sketch([]))
    assert len(d) == 0
    chunk = d.sketch(["a text of some words", "another one"])
    assert len(chunk.probes) == 2
    d.add_sketched(chunk)
    with pytest.raises(ValueError, match="fed already"):
        d.add_sketched(chunk)
    other = CorpusDeduper(Policy.default().replace(bands=10, rows=3))
    with pytest.raises(ValueError, match="another shape than this engine's"):
        d.add_sketched(other.sketch(["a text of some words"]))
    assert len(d) == 2


def _with_copies(n: int) -> list[str]:
    texts = _texts()[:n]
    rng = np.random.default_rng(5)
    copies = []
    for i in rng.choice(len(texts), n // 4, replace=False).tolist():
        t = texts[i]
        cut = int(rng.integers(0, max(1, len(t) // 8)))
        copies.append(t[cut:] + ("。" if i % 2 else " x"))
    return [*texts, *copies, "", "", "ab", "ab", "abc"]


def _greedy(norms: list[str], order: list[int], threshold: float) -> list[int]:
    """The keep rule written plainly: every kept text is compared, the most similar passing one
    (then the earliest kept) is the representative; empty texts are never copies."""
    rep = list(range(len(norms)))
    kept: list[int] = []
    for r in order:
        if not norms[r]:
            continue
        best = None
        for pos, k in enumerate(kept):
            s = jaccard(norms[r], norms[k])
            if s >= threshold and (best is None or (-s, pos) < best[:2]):
                best = (-s, pos, k)
        if best is None:
            kept.append(r)
        else:
            rep[r] = best[2]
    return rep


@pytest.mark.parametrize("order_seed", [None, 3])
def test_decision_equals_the_greedy_rule(order_seed: int | None) -> None:
    """With the default bands and no limit reached, the decision is the plain greedy rule over
    exact Jaccard (the band stage misses a pair at J >= 0.8 with probability < 4e-4: none here),
    for input order and a shuffled preference order."""
    texts = _with_copies(400)
    policy = Policy.default()
    d = CorpusDeduper(policy)
    d.feed(texts[:150])
    d.feed(texts[150:])
    order = np.arange(len(texts))
    if order_seed is not None:
        order = np.random.default_rng(order_seed).permutation(len(texts))
    r = d.result(order)
    twin = CorpusDeduper(policy)  # (what the engine saw: pages without learnt boilerplate)
    norms = twin.prepare(texts[:150]) + twin.prepare(texts[150:])
    want = _greedy(norms, order.tolist(), policy.threshold)
    assert r.representative.tolist() == want
    assert r.duplicates > 80
    assert r.stats["capped"] == 0 and r.stats["empty"] == 2
    dropped = r.pairs_b
    assert np.array_equal(r.pairs_a, r.representative[dropped])
    sims = [jaccard(norms[a], norms[b]) for a, b in zip(r.pairs_a.tolist(), dropped.tolist())]
    assert np.allclose(r.pairs_similarity, sims)


def test_near_pairs_are_the_verified_pairs() -> None:
    texts = _with_copies(300)
    policy = Policy.default().replace(threshold=0.7)
    d = CorpusDeduper(policy)
    d.feed(texts)
    r = d.near_pairs()
    norms = CorpusDeduper(policy).prepare(texts)
    want = {
        (i, j)
        for j in range(len(norms))
        for i in range(j)
        if norms[i] and norms[j] and jaccard(norms[i], norms[j]) >= 0.7
    }
    got = set(zip(r.pairs_a.tolist(), r.pairs_b.tolist()))
    # no pair below the threshold; at J = 0.7 the bands miss a pair with probability 0.025
    assert got <= want and len(want) > 50
    assert len(got) >= 0.95 * len(want)
    assert r.duplicates == 0


def test_spilled_sketches_give_the_same_answers(tmp_path: object) -> None:
    texts = _with_copies(300)
    in_memory = CorpusDeduper()
    spilled = CorpusDeduper(memory_budget=4096, spill_dir=str(tmp_path))
    for d in (in_memory, spilled):
        d.feed(texts[:100])
        d.feed(texts[100:])
    assert in_memory.spilled_bytes() == 0 and spilled.spilled_bytes() > 100_000
    assert spilled.memory_bytes() < in_memory.memory_bytes() / 3
    assert np.array_equal(spilled.result().representative, in_memory.result().representative)
    assert list(tmp_path.iterdir()) == []  # type: ignore[attr-defined]  # (an unnamed file)
    with pytest.raises(ValueError, match="spill_dir"):
        CorpusDeduper(spill_dir=str(tmp_path / "missing"))  # type: ignore[operator]


def test_a_hot_template_family_costs_a_bounded_number_of_comparisons() -> None:
    """Messages of one template with numbers filled in are similar (J ~ 0.5-0.8) but mostly not
    copies: all are kept, and each new one would meet every earlier one. The limits bound the
    work per message; every dropped one still has a kept representative that passes."""
    rng = np.random.default_rng(1)
    texts = [
        f"Your verification code is {rng.integers(10**5, 10**6)}. It expires in "
        f"{rng.integers(2, 30)} minutes. Order {rng.integers(10**7, 10**8)} ships today."
        for _ in range(3000)
    ]
    policy = Policy.default().replace(bucket_limit=16, verify_limit=8)
    d = CorpusDeduper(policy)
    d.feed(texts)
    r = d.result()
    s = r.stats
    assert s["compared"] <= 8 * len(texts) and s["capped"] > 100
    assert s["candidates"] <= 16 * policy.band_shape[0] * len(texts) and s["buckets_cut"] > 0
    norms = policy.prepare_many(texts)
    for row in np.flatnonzero(~r.kept).tolist():
        rep = int(r.representative[row])
        assert r.kept[rep] and jaccard(norms[row], norms[rep]) >= policy.threshold


def _site_pages() -> list[str]:
    """Pages of two sites whose menus and footers the markup does not mark (plain divs), some
    articles re-published on the other site."""
    texts = _texts()
    articles = [t for t in texts if not t.startswith("<html") and len(t) > 150][:60]

    def page(site: int, article: str, k: int) -> str:
        menu = "".join(f"<div>Section {j} of site {site} news and more</div>" for j in range(12))
        footer = f"<div>Copyright {site} the site company, all rights reserved, since 1999</div>"
        return (
            f"<html><body>{menu}<div><p>{article}</p></div>"
            f"<div>Related story {k} on site {site}</div>{footer}</body></html>"
        )

    pages = [page(0, a, i) for i, a in enumerate(articles)]
    pages += [page(1, a, i) for i, a in enumerate(articles) if i % 3 == 0]
    pages += [page(1, a[::-1], 100 + i) for i, a in enumerate(articles[:30])]
    return pages


def _pair_set(d: CorpusDeduper, pages: list[str], order: list[int], learn: bool) -> set:
    texts = [pages[i] for i in order]
    if learn:
        d.learn_boilerplate(texts)
    for start in range(0, len(texts), 16):  # small chunks: what a chunk teaches differs
        d.feed(texts[start : start + 16])
    r = d.near_pairs()
    return {frozenset((order[a], order[b])) for a, b in zip(r.pairs_a.tolist(), r.pairs_b.tolist())}


def test_boilerplate_learnt_first_makes_pages_independent_of_input_order() -> None:
    pages = _site_pages()
    forward = list(range(len(pages)))
    backward = forward[::-1]
    learnt = [_pair_set(CorpusDeduper(), pages, o, True) for o in (forward, backward)]
    assert learnt[0] == learnt[1] and len(learnt[0]) >= 20
    chunked = [_pair_set(CorpusDeduper(), pages, o, False) for o in (forward, backward)]
    assert chunked[0] != chunked[1]  # (what learning chunk by chunk did)
    d = CorpusDeduper()
    d.feed(pages[:1])
    with pytest.raises(ValueError, match="before the first feed"):
        d.learn_boilerplate(pages)


def test_a_late_page_has_the_corpus_read_again_for_its_boilerplate() -> None:
    """With corpus_texts (neardup dedup, the datasets integration), the first page prepared
    while no boilerplate was learnt over the whole corpus has the corpus read again (once) and
    its boilerplate learnt from all of it: a page further down is prepared as it is when the
    boilerplate was learnt first; without it the chunks teach it, and pages come out otherwise."""
    pages = _site_pages()
    plain = [f"a plain text, not a page, number {i} of the notes" for i in range(40)]
    corpus = plain + pages
    first = CorpusDeduper()
    first.learn_boilerplate(corpus)
    want = [first.prepare(corpus[a : a + 16]) for a in range(0, len(corpus), 16)]

    reads = []
    learnt_while_read = []

    def read_again() -> Iterator[str]:
        reads.append(1)
        for t in corpus:
            learnt_while_read.append(late._pages_learnt)
            yield t

    late = CorpusDeduper()
    late.corpus_texts = read_again
    got = [late.prepare(corpus[a : a + 16]) for a in range(0, len(corpus), 16)]
    assert got == want and len(reads) == 1
    # (learnt a page at a time as they are read: the corpus read again is never held whole)
    assert learnt_while_read[-1] == len(pages) - 1
    chunked = CorpusDeduper()
    assert [chunked.prepare(corpus[a : a + 16]) for a in range(0, len(corpus), 16)] != want
    # a corpus read again without pages (say references hold the only ones): chunk by chunk
    none = CorpusDeduper()
    none.corpus_texts = lambda: plain
    assert none.prepare(pages[:16]) == CorpusDeduper().prepare(pages[:16])
