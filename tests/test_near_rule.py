"""``NearRule`` (the decision rule for candidates held outside the engine: Redis, Spark) gives
the engine's answer: the same ranking limits, verifier and order of matches."""

from __future__ import annotations

import random

import numpy as np
import pytest
from neardup import Fingerprinter, Policy
from neardup.kept import KeptTexts, rule_for


def _texts(n: int, seed: int) -> list[str]:
    shared = random.Random(0)  # (one set of templates; edits differ by seed)
    words = "parcel order code bank notice account arrives today ships payment due".split()
    base = [
        " ".join(shared.choice(words) for _ in range(shared.randrange(8, 30))) for _ in range(40)
    ]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        t = list(rng.choice(base))
        for _ in range(rng.randrange(0, 4)):
            t[rng.randrange(len(t))] = rng.choice("abcxyz ")
        out.append("".join(t))
    return out


@pytest.mark.parametrize("verify_limit", [32, 2])
def test_rule_over_all_kept_texts_gives_the_engines_matches(verify_limit: int) -> None:
    policy = Policy(verify_limit=verify_limit)
    fpr = Fingerprinter()
    stored = [policy.prepare(t) for t in _texts(150, 1)]
    queries = [policy.prepare(t) for t in _texts(60, 2)]
    stored_fps = policy.fingerprint_many(fpr, stored)
    query_fps = policy.fingerprint_many(fpr, queries)
    kept = KeptTexts(policy)
    kept.commit(list(range(len(stored))), kept.add(list(range(len(stored))), stored, stored_fps))
    rule = rule_for(policy)
    keys, data, lengths = rule.probes(stored, stored_fps)
    qkeys, qdata, _ = rule.probes(queries, query_fps)
    positions = np.arange(len(stored), dtype=np.int64)
    agreed = 0
    for q, (norm, fp) in enumerate(zip(queries, query_fps)):
        # the engine's candidates: stored texts sharing a band key (few enough here that no
        # bucket is cut)
        shares = np.flatnonzero((keys == qkeys[q]).any(axis=1) & (lengths > 0))
        top = [
            int(shares[i])
            for i in rule.rank(
                qdata[q], int(fp), data[shares], stored_fps[shares], positions[shares]
            )
        ]
        assert len(top) <= verify_limit
        found = rule.verify(
            norm, int(fp), [stored[i] for i in top], stored_fps[top], positions[top]
        )
        ours = [(top[i], d, s) for i, d, s in found]
        engine = [(m.id, m.distance, m.similarity) for m in kept.check([norm], [int(fp)])[0]]
        assert ours == engine
        agreed += bool(ours)
    assert agreed > 20  # (the queries are near-copies of stored texts: most have matches)


def test_rule_refuses_bad_settings_and_shapes() -> None:
    rule = rule_for(Policy())
    with pytest.raises(ValueError, match="threshold"):
        type(rule)(1.5, 20, 5, 5, 32)
    with pytest.raises(ValueError, match="bands"):
        type(rule)(0.8, 0, 5, 5, 32)
    with pytest.raises(ValueError, match="bytes"):
        rule.rank(
            np.zeros(3, np.uint8),
            0,
            np.zeros((1, 3), np.uint8),
            np.zeros(1, np.uint64),
            np.zeros(1, np.int64),
        )
    keys, data, lengths = rule.probes(["", "x y z w"], np.zeros(2, np.uint64))
    assert keys.shape == (2, 20) and data.shape == (2, rule.width) and lengths[0] == 0
    assert rule.verify("", 0, ["a b c d e f"], np.zeros(1, np.uint64), np.zeros(1, np.int64)) == []
