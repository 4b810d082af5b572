"""The core's batch sketch Jaccard (used by CorpusDeduper) against exact string Jaccard."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from _helpers import SAMPLE
from neardup import verify
from neardup._core import sketch_jaccard_pairs


def test_batch_sketch_jaccard_equals_exact_jaccard_on_real_text() -> None:
    texts = [json.loads(line)["text"] for line in SAMPLE.open(encoding="utf-8")][:400]
    norms = [verify.normalise(t) for t in texts]
    offsets, hashes = verify.sketch_many(norms)
    rng = random.Random(3)
    # Real near-copies (the sample's rows with an origin) and random pairs; more than the
    # parallel threshold so both the one-thread and the pool path run.
    pairs = [(rng.randrange(len(texts)), rng.randrange(len(texts))) for _ in range(3000)]
    pairs += [(i, i) for i in range(len(texts))]
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    got = sketch_jaccard_pairs(hashes, offsets, a, b)
    assert got.dtype == np.float64 and got.shape == a.shape
    for (x, y), g in zip(pairs[:600] + pairs[-50:], got[:600].tolist() + got[-50:].tolist()):
        assert g == pytest.approx(verify.jaccard(texts[x], texts[y]), abs=1e-9)
    assert np.all(got[-len(texts) :] == 1.0)


def test_batch_sketch_jaccard_rejects_bad_input() -> None:
    hashes = np.array([1, 2, 3], dtype=np.uint32)
    offsets = np.array([0, 2, 3], dtype=np.int64)
    one = np.array([0], dtype=np.int64)
    with pytest.raises(ValueError, match="row 2 is outside 0..2"):
        sketch_jaccard_pairs(hashes, offsets, one, np.array([2], dtype=np.int64))
    with pytest.raises(ValueError, match="same length"):
        sketch_jaccard_pairs(hashes, offsets, one, np.array([0, 1], dtype=np.int64))
    with pytest.raises(ValueError, match="offsets must rise"):
        sketch_jaccard_pairs(hashes, np.array([0, 5], dtype=np.int64), one, one)
    with pytest.raises(TypeError, match="hashes must be a 1-D numpy uint32 array"):
        sketch_jaccard_pairs([1, 2], offsets, one, one)  # type: ignore[arg-type]
