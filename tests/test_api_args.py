"""Bad arguments of the Python API raise ValueError / TypeError naming the argument and value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import neardup
import numpy as np
import pytest
from neardup import Fingerprinter, Index, hamming_many


@pytest.mark.parametrize(
    ("fps", "error", "match"),
    [
        (np.array([1.5]), TypeError, "float64"),
        ([1.5], TypeError, "float"),
        (np.array([-1], dtype=np.int8), ValueError, "-1"),
    ],
)
def test_hamming_many_checks_like_query_many(fps: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        hamming_many(0, fps)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        Index(k=3).query_many(fps)  # type: ignore[arg-type]


def test_hamming_many_still_takes_ints() -> None:
    assert list(hamming_many(0, [3, 7])) == [2, 3]
    assert list(hamming_many(0, np.array([3, 7], dtype=np.int8))) == [2, 3]


def test_index_open_of_a_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "a-file"
    path.write_text("")
    with pytest.raises(NotADirectoryError, match=str(path)):
        Index.open(path)


@pytest.mark.parametrize(
    ("call", "name", "value"),
    [
        (lambda: Index(k=2**70), "k", str(2**70)),
        (lambda: Index(k=3, layout=-1), "layout", "-1"),
        (lambda: Fingerprinter().fit_idf(["a b"], min_df=-1), "min_df", "-1"),
        (lambda: neardup.to_hex(1, bits=-8), "bits", "-8"),
    ],
)
def test_out_of_range_ints_name_the_argument(call: object, name: str, value: str) -> None:
    with pytest.raises(ValueError, match=rf"{name} must .*{value}"):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"fingerprint_config": "garbage"}, "fingerprint_config"),
        ({"sync_interval": -1.0}, "sync_interval"),
        ({"sync_interval": float("nan")}, "sync_interval"),
    ],
)
def test_index_open_refuses_bad_options(tmp_path: Path, kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        Index.open(tmp_path / "idx", **kwargs)
    assert not (tmp_path / "idx").exists() or not any((tmp_path / "idx").iterdir())


def test_deduplicator_add_names_the_text() -> None:
    with pytest.raises(TypeError, match="text must be str, got NoneType"):
        neardup.Deduplicator().add(1, None)  # type: ignore[arg-type]


def _any(x: object) -> Any:
    """``x`` as any type: a value of a wrong type, on purpose."""
    return x


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: Index(retention=_any("2d")),
            TypeError,
            "retention must be a number of seconds, not str",
        ),
        (
            lambda: Index(segment_span=_any("x")),
            TypeError,
            "segment_span must be a number of seconds",
        ),
        (lambda: Index(capacity=-1), ValueError, "capacity must be between 0 and"),
        (lambda: Index(retention=10**400), ValueError, "retention is too large"),
        (
            lambda: Index(retention=True),
            TypeError,
            "retention must be a number of seconds, not bool",
        ),
        (
            lambda: Index().expire(_any("yesterday")),
            TypeError,
            "before must be a number of seconds",
        ),
        (
            lambda: Fingerprinter("words", weighting="tfidf", idf={"a": float("nan")}),
            ValueError,
            "options must hold finite numbers",
        ),
    ],
)
def test_bad_numbers_name_the_argument(call: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda i: i.add(1, 5, timestamp=True), TypeError, "timestamp must be .*not bool"),
        (lambda i: i.add_many([1], [5], True), TypeError, "timestamps must be .*not bool"),
        (lambda i: i.add_many([1], [5], [False]), TypeError, r"timestamps\[0\] .*not bool"),
        (lambda i: i.check_and_add(1, 5, _any(True)), TypeError, "timestamp .*not bool"),
        (lambda i: i.add_many([1], [5], 10**400), ValueError, "timestamps is too large"),
        (lambda i: i.add_many([1], [5], [10**400]), ValueError, r"timestamps\[0\] is too large"),
        (lambda i: i.query_many(_any(None)), TypeError, "fingerprints must be a sequence"),
        (lambda i: i.add_many(_any(None), [5]), TypeError, "ids must be a sequence"),
        (lambda i: i.add_many([1], _any(None)), TypeError, "fingerprints must be a sequence"),
    ],
)
def test_index_writes_name_bad_timestamps_and_arguments(call: Any, error: type, match: str) -> None:
    """(a bool was stored as the timestamp 1.0; a number too large was a TypeError; a None
    argument said only "'NoneType' object is not iterable")"""
    index = Index(k=3)
    with pytest.raises(error, match=match):
        call(index)
    assert len(index) == 0


def test_index_open_refuses_a_bool_sync_interval(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="sync_interval must be a number of seconds, not bool"):
        Index.open(tmp_path / "idx", sync="group", sync_interval=_any(True))
    with Index.open(tmp_path / "ok", sync="group") as index:  # (the default interval)
        index.add(1, 5)
        assert len(index) == 1


def test_ids_that_near_pairs_returns_can_be_passed_back() -> None:
    """(near_pairs gives numpy int64 ids: `id in index` was False and get/remove a TypeError)"""
    index = Index(k=3)
    index.add_many([10, 11, 12], [5, 7, 1 << 40])
    a, b, _ = index.near_pairs(3)
    assert isinstance(a[0], np.integer)
    assert a[0] in index and b[0] in index and np.int32(12) in index
    assert index.get(a[0])[0] in (5, 7)
    index.remove(b[0])
    assert b[0] not in index and len(index) == 2
    index.add(np.uint8(3), 9)
    assert 3 in index


def test_deduplicators_refuse_fingerprints_they_cannot_index() -> None:
    # A 128-bit fingerprinter was accepted, then the first add failed after storing the text.
    from neardup.corpus import CorpusDeduper
    from neardup.dedup import Deduplicator, Policy

    for make in (
        lambda: Deduplicator(Fingerprinter(bits=128)),
        lambda: Deduplicator(policy=Policy(fingerprint={"bits": 128})),
        lambda: CorpusDeduper(fingerprinter=Fingerprinter(bits=128)),
    ):
        with pytest.raises(ValueError, match="128-bit fingerprints"):
            make()
    d = Deduplicator()
    with pytest.raises(TypeError, match="not a single str"):
        d.add_many("ab", ["first text", "second text"])  # type: ignore[arg-type]
    assert len(d) == 0
