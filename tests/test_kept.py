"""``KeptTexts``: a text being written is nobody's match until its write is committed."""

from __future__ import annotations

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
