"""The saved engine (``texts.engine``): a store reopened, or a reference directory reused, loads
its decision engine's rows instead of preparing and sketching every stored text, and answers
exactly as if it had; a saved engine that does not match its text store (written to through
another path, damaged, another policy) is never served.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from _helpers import near_copy, neardup, words
from neardup import Deduplicator, Policy
from neardup.kept import SAVED_ENGINE, KeptTexts
from neardup.textstore import MemoryTextStore, SqliteTextStore

Answers = list[list[tuple[object, int, float]]]

TEXTS = [words(i, 60 + i % 50) for i in range(240)]
IDS: list[int | str] = [i if i % 3 else f"doc-{i}" for i in range(len(TEXTS))]
PROBES = [near_copy(t, i) for i, t in enumerate(TEXTS[::4])] + [
    words(10_000 + i) for i in range(20)
]


def _answers(d: Deduplicator) -> Answers:
    return [
        [(m.id, m.distance, round(m.similarity or 0.0, 12)) for m in ms]
        for ms in d.check_many(PROBES)
    ]


def _store(path: Path) -> Path:
    d = Deduplicator.open(path)
    d.add_many(IDS[:200], TEXTS[:200])
    d.add_many(IDS[200:], TEXTS[200:])
    d.close()
    assert (path / SAVED_ENGINE).is_file()
    return path


def _reopen(path: Path) -> Answers:
    d = Deduplicator.open(path)
    try:
        return _answers(d)
    finally:
        d.close()


def _fresh(path: Path) -> Answers:
    """The answers of the store with its texts prepared and sketched again (no saved engine)."""
    os.replace(path / SAVED_ENGINE, path / "aside")
    try:
        return _reopen(path)
    finally:
        os.replace(path / "aside", path / SAVED_ENGINE)


def test_reopen_loads_the_saved_engine_and_answers_as_a_re_sketch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _store(tmp_path / "d")
    with caplog.at_level(logging.INFO, logger="neardup.dedup"):
        got = _reopen(path)
    assert f"loaded the engine of {len(TEXTS)} stored text(s)" in caplog.text
    assert sum(map(len, got)) >= len(TEXTS) // 4  # (the near-copies are found)
    assert got == _fresh(path)


def _delete(store: SqliteTextStore) -> None:
    store.delete(IDS[8])


def _replace(store: SqliteTextStore) -> None:
    store.put(IDS[12], words(99_999))


def _expire(store: SqliteTextStore) -> None:
    store.delete(IDS[16])
    store.delete(IDS[20])


@pytest.mark.parametrize("change", [_delete, _replace, _expire])
def test_a_store_changed_through_another_path_is_not_served_stale(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, change: object
) -> None:
    path = _store(tmp_path / "d")
    store = SqliteTextStore(str(path / "texts.sqlite"))
    change(store)  # type: ignore[operator]
    store.close()
    with caplog.at_level(logging.INFO, logger="neardup.dedup"):
        got = _reopen(path)
    assert "does not match text store" in caplog.text
    found = {m[0] for ms in got for m in ms}
    assert IDS[8] not in found or change is not _delete
    assert IDS[12] not in found or change is not _replace
    assert got == _fresh(path)
    # the close after the re-sketch saved the engine of the store as it is
    with caplog.at_level(logging.INFO, logger="neardup.dedup"):
        assert _reopen(path) == got
    assert "loaded the engine of" in caplog.text


def test_rows_written_after_the_save_are_prepared_on_top(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _store(tmp_path / "d")
    store = SqliteTextStore(str(path / "texts.sqlite"))
    store.put("late", PROBES[0])  # (as a crash after a commit leaves it: no engine saved)
    store.close()
    with caplog.at_level(logging.INFO, logger="neardup.dedup"):
        got = _reopen(path)
    assert "(1 prepared since)" in caplog.text
    assert "late" in [m[0] for m in got[0]]
    assert got == _fresh(path)


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_a_damaged_saved_engine_is_detected_and_the_texts_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    path = _store(tmp_path / "d")
    want = _fresh(path)
    engine = path / SAVED_ENGINE
    data = bytearray(engine.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x01
    elif damage == "truncate":
        data = data[: len(data) - 100]
    else:
        data = bytearray(b"not an engine" * 10)
    engine.write_bytes(bytes(data))
    with caplog.at_level(logging.INFO, logger="neardup.dedup"):
        assert _reopen(path) == want
    assert f"saved engine {engine}" in caplog.text
    assert "preparing the stored texts instead" in caplog.text
    assert "loaded the engine of" not in caplog.text


@pytest.mark.parametrize(
    ("other", "why"),
    [
        (Policy(shingle=4), "made for bands 20, rows 5, shingle 5"),
        (Policy(html=False), "another policy"),
    ],
)
def test_another_policy_prepares_the_texts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, other: Policy, why: str
) -> None:
    path = _store(tmp_path / "d")
    store = SqliteTextStore(str(path / "texts.sqlite"))
    with caplog.at_level(logging.INFO, logger="neardup.dedup"):
        got = _answers(Deduplicator(policy=other, store=store))
    store.close()
    assert why in caplog.text and "preparing the stored texts instead" in caplog.text
    memory = MemoryTextStore()
    for i, t in zip(IDS, TEXTS):
        memory.put(i, t)
    assert got == _answers(Deduplicator(policy=other, store=memory))


def test_kept_texts_save_and_load_int_and_str_ids(tmp_path: Path) -> None:
    policy = Policy.default()
    kept = KeptTexts(policy)
    norms = policy.prepare_many(TEXTS)
    fps = policy.make_fingerprinter().fingerprint_many(norms).tolist()
    kept.commit(IDS, kept.add(IDS, norms, fps))
    kept.forget([IDS[3]])
    order = [i for i in IDS if i != IDS[3]][::-1]
    kept.save(str(tmp_path / "e"), order, {"n": 1})
    loaded, meta = KeptTexts.load(str(tmp_path / "e"), policy)
    assert meta == {"n": 1} and loaded.ids() == order
    probe = policy.prepare_many(PROBES)
    probe_fps = policy.make_fingerprinter().fingerprint_many(probe).tolist()
    # (the same candidates; the earliest row breaks ties, so compare sets of ids)
    assert [sorted(map(str, (m.id for m in ms))) for ms in loaded.check(probe, probe_fps)] == [
        sorted(map(str, (m.id for m in ms))) for ms in kept.check(probe, probe_fps)
    ]
    with pytest.raises(KeyError):
        kept.save(str(tmp_path / "f"), [IDS[3]], {})


def _jsonl(path: Path, rows: list[tuple[object, str]]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for i, t in rows:
            f.write(json.dumps({"id": i, "text": t}) + "\n")
    return path


def test_index_build_saves_the_engine_and_against_uses_it(tmp_path: Path) -> None:
    refs = _jsonl(tmp_path / "refs.jsonl", list(zip(IDS, TEXTS)))
    queries = _jsonl(tmp_path / "q.jsonl", [(f"q{i}", t) for i, t in enumerate(PROBES)])
    ref = tmp_path / "ref"
    assert neardup("index", "build", str(ref), str(refs), "-q").returncode == 0
    assert (ref / SAVED_ENGINE).is_file()

    def outputs(tag: str) -> tuple[str, str, str]:
        clusters = tmp_path / f"clusters-{tag}.jsonl"
        run = neardup(
            "dedup", str(queries), "--against", str(ref), "-o", str(tmp_path / f"o-{tag}.jsonl"),
            "--clusters", str(clusters), "-q",
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        query = neardup("index", "query", str(ref), str(queries), "-q")
        assert query.returncode == 0, query.stderr
        return clusters.read_text(), query.stdout, run.stderr

    saved = outputs("saved")
    assert "reference" in saved[0] and saved[1]
    os.replace(ref / SAVED_ENGINE, tmp_path / "aside")
    assert outputs("texts")[:2] == saved[:2]
    os.replace(tmp_path / "aside", ref / SAVED_ENGINE)
    # a text stored after the build (another path): the saved engine is not used
    store = SqliteTextStore(str(ref / "texts.sqlite"))
    store.put(IDS[0], words(77_777))
    store.close()
    stale = outputs("stale")
    assert "not used" in stale[2]
    os.replace(ref / SAVED_ENGINE, tmp_path / "aside")
    assert outputs("texts-after")[:2] == stale[:2]


def test_serve_references_load_the_saved_engine_and_stored_fingerprints(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from neardup.service.references import load_references

    refs = _jsonl(tmp_path / "refs.jsonl", list(zip(IDS, TEXTS)))
    ref = tmp_path / "ref"
    assert neardup("index", "build", str(ref), str(refs), "-q").returncode == 0

    def answers() -> tuple[Answers, list[list[str]]]:
        d = load_references(str(ref), Policy.default())
        try:
            within = [sorted(map(str, (m.id for m in ms))) for ms in d.check_many(PROBES, k=12)]
            return _answers(d), within
        finally:
            d.close()

    with caplog.at_level(logging.INFO, logger="neardup.dedup"):
        saved = answers()
    assert "loaded the engine of" in caplog.text
    assert any(saved[1]) and any(saved[0])
    os.replace(ref / SAVED_ENGINE, tmp_path / "aside")
    assert answers() == saved


def test_save_engine_after_close_is_refused_and_keeps_the_saved_file(tmp_path: Path) -> None:
    """(it failed on the closed store and removed the texts.engine that close() had written)"""
    d = Deduplicator.open(tmp_path / "d")
    d.add_many(["a", "b"], [words(1), words(2)])
    d.close()
    saved = tmp_path / "d" / SAVED_ENGINE
    before = saved.read_bytes()
    with pytest.raises(ValueError, match="closed"):
        d.save_engine()
    assert saved.read_bytes() == before
