"""Issue 23, fuzzing the Python API with hypothesis (bounded: derandomized, a fixed number of
examples): numpy arrays of every dtype, shape and byte order to the Hamming functions and the
Index; ids, timestamps and k of every kind to Index and Deduplicator. Each call either answers
what a plain Python reference answers or raises TypeError / ValueError (never OverflowError,
UnicodeEncodeError's bare message or a crash), and a refused write leaves nothing behind: the
store answers as before, also after reopening."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from neardup import Deduplicator, Index, hamming_many

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

dtypes = st.one_of(
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(endianness="="),
    hnp.integer_dtypes(endianness=">"),
    hnp.unsigned_integer_dtypes(endianness="="),
    hnp.unsigned_integer_dtypes(endianness=">"),
    hnp.floating_dtypes(),
    hnp.complex_number_dtypes(),
    hnp.datetime64_dtypes(),
    hnp.timedelta64_dtypes(),
    hnp.unicode_string_dtypes(max_len=4),
    hnp.byte_string_dtypes(max_len=4),
    st.just(np.dtype(object)),
)
arrays = hnp.arrays(dtypes, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=5))
fingerprint = st.integers(0, 2**64 - 1)

# ids, timestamps and k of every kind: the valid ones and their edges
any_id = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, -(2**63), 2**63, -(2**63) - 1]),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
    st.sampled_from(["a\udc00", "\ud800", "x\udfff y"]),  # lone surrogates
    st.binary(max_size=4),
    st.floats(),
    st.none(),
)
any_timestamp = st.one_of(
    st.none(),
    st.floats(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([1e15, -1e15, 1e15 + 1, 10**400, "1", [1.0]]),
)
any_k = st.one_of(st.none(), st.integers(-(2**70), 2**70), st.sampled_from([0, 64, 65, 1.5, "3"]))


def valid_id(value: Any) -> bool:
    if isinstance(value, str):
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    return type(value) is int and -(2**63) <= value < 2**63


def valid_timestamp(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return abs(value) <= 1e15 and math.isfinite(float(value))


def refused(call: Any) -> BaseException:
    """The error ``call()`` raises: a TypeError or ValueError whose message says what (not the
    codec's bare words)."""
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert not isinstance(info.value, OverflowError)
    assert "surrogates not allowed" not in str(info.value)
    return info.value


def takes_fingerprints(a: np.ndarray) -> bool:
    """What the fingerprint-array arguments accept: a 1-D array of integers, none negative."""
    if a.ndim != 1 or a.dtype.kind not in "iu":
        return False
    return a.dtype.kind == "u" or bool((a >= 0).all())


@FUZZ
@given(fp=fingerprint, a=arrays)
def test_arrays_of_every_dtype(fp: int, a: np.ndarray) -> None:
    idx = Index(k=64)
    if not takes_fingerprints(a):
        refused(lambda: hamming_many(fp, a))
        refused(lambda: idx.query_many(a))
        refused(lambda: idx.add_many(list(range(a.size)), a))
        assert len(idx) == 0
        return
    values = [int(x) for x in a.tolist()]
    expected = [bin(fp ^ v).count("1") for v in values]
    assert hamming_many(fp, a).tolist() == expected
    assert idx.query_many(a) == [[] for _ in values]
    idx.add_many(list(range(len(values))), a)
    assert len(idx) == len(values)
    found = dict(idx.query(fp, 64))
    assert found == dict(enumerate(expected))


@FUZZ
@given(doc_id=any_id, timestamp=any_timestamp, k=any_k, fp=fingerprint)
def test_index_ids_timestamps_and_k(doc_id: Any, timestamp: Any, k: Any, fp: int) -> None:
    idx = Index(k=3)
    idx.add("anchor", fp, timestamp=1.0)
    if valid_id(doc_id) and valid_timestamp(timestamp) and doc_id != "anchor":
        idx.add(doc_id, fp, timestamp=timestamp)
        assert doc_id in idx and len(idx) == 2
        assert (doc_id, 0) in idx.query(fp, 0)
        idx.remove(doc_id)
    elif doc_id != "anchor":
        refused(lambda: idx.add(doc_id, fp, timestamp=timestamp))
    assert len(idx) == 1 and idx.query(fp, 0) == [("anchor", 0)]
    if k is None or (type(k) is int and 0 <= k <= 64):
        assert idx.query(fp, k) == [("anchor", 0)]
        assert len(idx.near_pairs(k)[0]) == 0 and idx.clusters(k) == []
    else:
        for call in (
            lambda: idx.query(fp, k),
            lambda: idx.query_many(np.array([fp], np.uint64), k),
            lambda: idx.near_pairs(k),
            lambda: idx.clusters(k),
        ):
            error = refused(call)
            assert "k" in str(error)


# one durable store for the whole run: a refused write must not wedge it (issue 23, item 1)
_DIR = tempfile.TemporaryDirectory(prefix="neardup-fuzz-")
_STORE: dict[str, Any] = {"dedup": None, "model": {}}


def _durable() -> Deduplicator:
    if _STORE["dedup"] is None:
        _STORE["dedup"] = Deduplicator.open(Path(_DIR.name) / "store")
    return _STORE["dedup"]  # type: ignore[no-any-return]


texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "   ", "a\udc00b", "新闻 标题", None, b"bytes", 3]),
)


@FUZZ
@given(doc_id=any_id, text=texts, timestamp=any_timestamp)
def test_deduplicator_writes(doc_id: Any, text: Any, timestamp: Any) -> None:
    d = _durable()
    model: dict[Any, str] = _STORE["model"]
    before = len(d)
    good_text = isinstance(text, str)
    stamp = timestamp if timestamp is None or not valid_timestamp(timestamp) else 1.8e9
    if valid_id(doc_id) and good_text and valid_timestamp(timestamp):
        d.add(doc_id, text, timestamp=stamp)
        model[doc_id] = text
        assert d.get(doc_id) == text
    else:
        refused(lambda: d.add(doc_id, text, timestamp=stamp))
        refused(lambda: d.check_and_add(doc_id, text, timestamp=stamp))
        refused(lambda: d.add_many(["fuzz-ok", doc_id], ["fine text", text], [None, stamp]))
        assert len(d) == before and "fuzz-ok" not in d
    assert len(d) == len(model)


def test_deduplicator_survives_the_fuzz_and_reopens() -> None:
    test_deduplicator_writes()
    d = _durable()
    model: dict[Any, str] = _STORE["model"]
    assert model, "the fuzz stored nothing"
    d.close()
    _STORE["dedup"] = None
    with Deduplicator.open(Path(_DIR.name) / "store") as again:
        assert len(again) == len(model)
        for doc_id, text in model.items():
            assert again.get(doc_id) == text
