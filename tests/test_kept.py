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


def test_replacing_ids_over_and_over_keeps_the_engine_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An add under an id already held forgets the id's old row (at commit): those rows are
    # compacted away like removed ones, so a service that keeps replacing the same ids does not
    # grow without bound.
    monkeypatch.setattr("neardup.kept.COMPACT_MIN_ROWS", 50)
    policy = Policy()
    kept = KeptTexts(policy)
    ids = [f"doc{i}" for i in range(100)]
    for version in range(30):
        texts = [f"document {i} revision {version}: {i * 7919} items on shelf" for i in range(100)]
        norms, fps = _prepared(policy, texts)
        kept.commit(ids, kept.add(ids, norms, fps))
        assert len(kept) == 100
        # (compaction once forgotten rows reach max(50, live) = 100: at most 100 live + 100
        # forgotten before this batch + the batch's 100)
        assert len(kept._engine) <= 300, f"version {version}: {len(kept._engine)} rows"
    # the latest texts are found under their ids, the replaced ones nowhere
    assert [m.id for m in kept.check(norms[:1], fps[:1])[0]] == ["doc0"]
    assert sum(i is not None for i in kept.ids()) == 100


def test_a_failed_write_that_is_rolled_back_is_compacted_away(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("neardup.kept.COMPACT_MIN_ROWS", 50)
    policy = Policy()
    kept = KeptTexts(policy)
    norms, fps = _prepared(policy, [f"a write that fails number {i} of many" for i in range(60)])
    for _ in range(10):
        kept.rollback(kept.add(["x"] * 60, norms, fps))
    assert len(kept._engine) < 60 and len(kept) == 0


def test_a_check_beside_a_compaction_answers_as_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One thread checks over and over while this one forgets the texts stored before the
    # checked ones, so that each compaction renumbers the rows the checks find: every answer
    # is the one the check gives with no compaction at all.
    import sys
    import threading

    monkeypatch.setattr("neardup.kept.COMPACT_MIN_ROWS", 20)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # (threads take turns often: a check meets a compaction)
    policy = Policy()
    stable = [
        f"notice {i}: parcel {i} arrives between {i} and noon at gate {i} of the depot"
        for i in range(40)
    ]
    norms, fps = _prepared(policy, stable)
    ids = [f"s{i}" for i in range(len(stable))]
    queries, query_fps = _prepared(policy, [t + " today" for t in stable])
    churn = [f"unrelated churn text {j} about {j * 104729} other things" for j in range(200)]
    c_norms, c_fps = _prepared(policy, churn)
    c_ids = [f"c{j}" for j in range(len(churn))]
    expected = None
    compactions = checks = 0
    try:
        for _ in range(25):
            kept = KeptTexts(policy, memory_budget=4096)
            kept.commit(c_ids, kept.add(c_ids, c_norms, c_fps))  # (rows 0..199)
            kept.commit(ids, kept.add(ids, norms, fps))  # (rows 200..239, then lower)
            if expected is None:
                expected = kept.check(queries, query_fps)
                assert all(m and m[0].id == ids[i] for i, m in enumerate(expected))
            stop = threading.Event()
            answers: list[object] = []
            errors: list[BaseException] = []

            def checker(
                kept: KeptTexts = kept,
                stop: threading.Event = stop,
                answers: list[object] = answers,
                errors: list[BaseException] = errors,
            ) -> None:
                try:
                    while not stop.is_set():
                        answers.append(kept.check(queries, query_fps))
                except BaseException as e:  # pragma: no cover (reported below)
                    errors.append(e)

            thread = threading.Thread(target=checker)
            thread.start()
            try:
                for step in range(0, len(c_ids), 10):
                    generation = kept._generation
                    kept.forget(c_ids[step : step + 10])
                    compactions += kept._generation != generation
            finally:
                stop.set()
                thread.join()
            assert not errors, errors
            assert len(kept._engine) < 100
            checks += len(answers)
            for answer in answers:
                assert answer == expected
            assert kept.check(queries, query_fps) == expected
    finally:
        sys.setswitchinterval(switch)
    assert compactions >= 50 and checks > 0


def test_a_check_during_a_replace_lists_the_id_once() -> None:
    """A commit that replaces an id names the new row before the engine forgets the old one;
    a check in that moment (here: run from inside the commit, where another thread's check
    could run) lists the id once, with its new text."""
    policy = Policy()
    seen: list[list[str]] = []

    class Watched(KeptTexts):
        def _forget_rows(self, rows):  # type: ignore[no-untyped-def]
            if rows:
                seen.append([m.id for m in self.check(norms[:1], fps[:1])[0]])
            super()._forget_rows(rows)

    kept = Watched(policy)
    norms, fps = _prepared(policy, [TEXT, TEXT + "!"])
    kept.commit(["a"], kept.add(["a"], norms[:1], fps[:1]))
    kept.commit(["a"], kept.add(["a"], norms[1:], fps[1:]))
    assert seen == [["a"]]
    assert [m.id for m in kept.check(norms[:1], fps[:1])[0]] == ["a"]
