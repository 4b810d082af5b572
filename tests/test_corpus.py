"""neardup.corpus.CorpusDeduper fed in overlapping steps (prepare in order, sketch in threads,
add in order), as `neardup dedup` feeds it, gives what feed() gives, on real text and on HTML
pages whose boilerplate is learnt chunk by chunk."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from _helpers import SAMPLE
from neardup._core import sketch_jaccard_pairs
from neardup.corpus import CorpusDeduper, SketchedChunk
from neardup.dedup import Policy


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
        sketched = [pool.submit(lambda p=p: stepped.sketch(p.result())) for p in prepared]
        for f in sketched:
            stepped.add_sketched(f.result())
    assert len(stepped) == len(whole) == len(texts)
    assert np.array_equal(stepped.fingerprints, whole.fingerprints)
    assert stepped.memory_bytes() == whole.memory_bytes()
    a, b = whole.result(), stepped.result()
    assert np.array_equal(a.representative, b.representative)
    assert np.array_equal(a.pairs_a, b.pairs_a) and np.array_equal(a.pairs_b, b.pairs_b)
    assert a.duplicates > 0


def test_add_sketched_needs_sketches_for_jaccard() -> None:
    d = CorpusDeduper()
    fps = np.zeros(2, np.uint64)
    chunk = SketchedChunk(fps, np.array([3, 4], np.int64), None, None)
    with pytest.raises(ValueError, match="no sketches"):
        d.add_sketched(chunk)
    d.add_sketched(SketchedChunk(np.empty(0, np.uint64), np.empty(0, np.int64), None, None))
    assert len(d) == 0


def test_bounds_never_drop_a_near_copy() -> None:
    """Candidates ruled out before the exact merge (size bound, sketch-signature bound) are
    exactly those whose Jaccard is below the threshold: verified pairs equal brute force."""
    texts = _texts()[:600]
    rng = np.random.default_rng(5)
    copies = []
    for i in rng.choice(len(texts), 150, replace=False).tolist():
        t = texts[i]
        cut = int(rng.integers(0, max(1, len(t) // 8)))
        copies.append(t[cut:] + ("。" if i % 2 else " x"))
    texts = [*texts, *copies, "", "", "ab", "ab", "abc"]
    for threshold in (0.5, 0.8, 0.95):
        d = CorpusDeduper(Policy.default().replace(threshold=threshold))
        d.feed(texts[:400])
        d.feed(texts[400:])
        r = d.result()
        counts = np.concatenate(d._counts)
        offsets = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        hashes = np.concatenate(d._hashes)
        exact = sketch_jaccard_pairs(hashes, offsets, r.pairs_a, r.pairs_b)
        assert np.array_equal(r.pairs_verified, exact >= threshold)
        computed = ~np.isnan(r.pairs_similarity)
        assert np.array_equal(r.pairs_similarity[computed], exact[computed])
        if threshold == 0.95:
            assert computed.sum() < r.pairs_a.size  # the bounds did rule pairs out
        assert r.pairs_verified.sum() > 50
