"""``KeptTexts``: a text being written is nobody's match until its write is committed."""

from __future__ import annotations

import pytest
from neardup import Fingerprinter, Policy
from neardup.kept import KeptTexts

TEXT = "your parcel 1234 arrives today between nine and noon, track it online"


def _prepared(policy: Policy, texts: list[str]) -> tuple[list[str], list[int]]:
    norms = [policy.prepare(t) for t in texts]
    return norms, [int(f) for f in policy.fingerprint_many(Fingerprinter(), norms)]


def test_a_write_is_matched_by_others_only_once_committed() -> None:
    policy = Policy()
    kept = KeptTexts(policy)
    norms, fps = _prepared(policy, [TEXT, TEXT + "!"])
    found, rows = kept.check_and_add(["a", "b"], norms, fps)
    # within the call, the second text is matched to the first under its id
    assert found[0] == [] and [m.id for m in found[1]] == ["a"] and len(rows) == 1
    # a check beside the write (before commit) does not see it: it may yet be rolled back
    assert kept.check(norms[:1], fps[:1]) == [[]]
    kept.rollback(rows)
    assert kept.check(norms[:1], fps[:1]) == [[]]
    # written again and committed, it is matched
    found, rows = kept.check_and_add(["c"], norms[:1], fps[:1])
    assert found == [[]]
    kept.commit(["c"], rows)
    assert [m.id for m in kept.check(norms[1:], fps[1:])[0]] == ["c"]
    # an add is likewise nobody's match until committed
    more, more_fps = _prepared(policy, ["an unrelated notice about the meeting on friday at ten"])
    rows = kept.add(["d"], more, more_fps)
    assert kept.check(more, more_fps) == [[]]
    kept.commit(["d"], rows)
    assert [m.id for m in kept.check(more, more_fps)[0]] == ["d"]


def test_forgotten_rows_are_compacted_away_and_checks_answer_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = Policy()
    kept = KeptTexts(policy, memory_budget=4096)  # (some sketches in the temporary file)
    texts = [
        f"notice {i % 50}: parcel {i % 50} arrives between {i % 50} and noon at gate {i % 50}"
        for i in range(600)
    ] + [f"unrelated text number {i} about {i * 7919} things" for i in range(600)]
    norms, fps = _prepared(policy, texts)
    ids = [f"t{i}" for i in range(len(texts))]
    found, rows = kept.check_and_add(ids, norms, fps)
    kept.commit([ids[i] for i, m in enumerate(found) if not m], rows)
    stored = len(kept)
    before = kept.check(norms, fps)
    # expire two thirds of the stored texts, in steps, as a retention sweep would
    monkeypatch.setattr("neardup.kept.COMPACT_MIN_ROWS", 100)
    gone = [i for i, m in zip(ids, found) if not m][: 2 * stored // 3]
    memory = kept.memory_bytes()
    for step in range(0, len(gone), 50):
        kept.forget(gone[step : step + 50])
    assert len(kept) == stored - len(gone)
    assert len(kept._engine) < stored  # compacted: the engine no longer holds them
    assert kept.memory_bytes() < memory
    after = kept.check(norms, fps)
    gone_set = set(gone)
    for b, a in zip(before, after):
        assert [m for m in b if m.id not in gone_set] == a
    # later writes see the compacted rows under their ids
    found, rows = kept.check_and_add(["x"], norms[-1:], fps[-1:])
    assert [m.id for m in found[0]] == [ids[-1]] and rows == []
