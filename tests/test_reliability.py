"""Issue 23, Python API: bad input is refused before anything is written, and a write that fails
at any step leaves the durable store usable, consistent and unlocked (nothing acknowledged lost,
nothing unacknowledged visible, also after a reopen)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _helpers import words
from neardup.dedup import Deduplicator, Policy

POLICY = Policy.default()


def _assert_present(d: Deduplicator, id: str, text: str) -> None:
    assert d.get(id) == text
    assert id in [m.id for m in d.check(text)]


def _assert_absent(d: Deduplicator, id: str, text: str) -> None:
    with pytest.raises(KeyError):
        d.get(id)
    assert id not in d
    assert id not in [m.id for m in d.check(text)]


def _assert_consistent(d: Deduplicator) -> None:
    """The index holds one entry per stored or staged id, no more."""
    staged = d._log._staged_row if d._log is not None else {}
    assert len(d.store) + sum(1 for i in staged if i not in d.store) == len(d.index)


# -- item 1: an id that cannot be encoded ------------------------------------------------------


def test_an_id_with_a_lone_surrogate_is_refused_and_the_store_stays_usable(tmp_path: Path) -> None:
    d = Deduplicator.open(tmp_path / "s", policy=POLICY)
    with pytest.raises(ValueError, match=r"^id must be valid Unicode.*'a\\udc00'"):
        d.add("a\udc00", "x")
    with pytest.raises(ValueError, match=r"ids\[1\]"):
        d.add_many(["ok", "b\ud800"], [words(1), words(2)])
    with pytest.raises(ValueError, match="^id "):
        d.check_and_add("c\udfff", words(3))
    d.add("b", words(4))
    assert d.check_and_add("c", words(5)) == (True, [])
    d.remove("c")
    d.close()  # releases the index's lock: the reopen below would fail otherwise

    d = Deduplicator.open(tmp_path / "s")
    _assert_present(d, "b", words(4))
    _assert_absent(d, "ok", words(1))
    _assert_absent(d, "c", words(5))
    _assert_consistent(d)
    d.close()


# -- item 2: timestamps --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timestamp", "error", "match"),
    [
        (1e16, ValueError, r"timestamp must be finite .*1e\+16"),
        (-1e16, ValueError, "timestamp must be finite"),
        (float("nan"), ValueError, "timestamp must be finite .*nan"),
        (float("inf"), ValueError, "timestamp must be finite .*inf"),
        pytest.param(10**400, ValueError, "timestamp must be finite", id="10**400"),
        ("2024-01-01", TypeError, "timestamp must be float seconds or None, got str"),
        (True, TypeError, "timestamp must be float seconds or None, got bool"),
        (0.0, ValueError, "timestamp is 0.0, older than the retention window"),
    ],
)
@pytest.mark.parametrize("call", ["add", "check_and_add", "add_many", "check_and_add_many"])
def test_a_bad_timestamp_is_refused_and_nothing_is_stored(
    tmp_path: Path, call: str, timestamp: Any, error: type[Exception], match: str
) -> None:
    d = Deduplicator.open(tmp_path / "s", policy=POLICY, retention=86400)
    good, bad = words(1), words(2)
    if call.endswith("_many"):
        # A batch is all or nothing: the good first item is not written either.
        with pytest.raises(error, match=match.replace("timestamp", r"timestamps\[1\]", 1)):
            getattr(d, call)(["good", "bad"], [good, bad], [None, timestamp])
    else:
        with pytest.raises(error, match=match):
            getattr(d, call)("bad", bad, timestamp)
    _assert_absent(d, "good", good)
    _assert_absent(d, "bad", bad)
    # the same text is then accepted as new, and all of it survives a reopen
    assert d.check_and_add("bad", bad) == (True, [])
    d.close()
    d = Deduplicator.open(tmp_path / "s")
    _assert_present(d, "bad", bad)
    _assert_absent(d, "good", good)
    _assert_consistent(d)
    d.close()


def test_timestamps_at_the_limits_are_kept(tmp_path: Path) -> None:
    d = Deduplicator.open(tmp_path / "s", policy=POLICY, retention=60)
    d.add("future", words(1), timestamp=1e15)
    d.add("edge", words(2), timestamp=time.time() - 30)
    d.close()
    d = Deduplicator.open(tmp_path / "s", retention=60)
    _assert_present(d, "future", words(1))
    _assert_present(d, "edge", words(2))
    d.close()
    # without retention any timestamp the index holds is kept, the distant past included
    m = Deduplicator(policy=POLICY)
    m.add("old", words(3), timestamp=-1e15)
    _assert_present(m, "old", words(3))


# -- a failure at each step of a write -----------------------------------------------------------


class Injected(RuntimeError):
    """The fault a test injects."""


class FaultyIndex:
    """The real index, with one method failing before or after it runs."""

    def __init__(self, index: Any, method: str, after: bool) -> None:
        self._index, self._method, self._after = index, method, after

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._index, name)
        if name != self._method:
            return real

        def failing(*args: Any, **kwargs: Any) -> Any:
            if self._after:
                real(*args, **kwargs)
            raise Injected(name)

        return failing

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, id: object) -> bool:
        return id in self._index


def _fail(obj: Any, name: str) -> Callable[[], None]:
    """Make ``obj.name`` (a Python method) raise; returns the undo."""

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise Injected(name)

    setattr(obj, name, failing)
    return lambda: delattr(obj, name)


STEPS = [
    "index.add_many",
    "index.add_many after",
    "stage",
    "forget_sketches",
    "store.put_many",
    "index.flush",
    "store.expire",
]


def _inject(d: Deduplicator, step: str) -> Callable[[], None]:
    assert d._log is not None
    if step.startswith("index."):
        real = d.index
        d.index = FaultyIndex(real, step.split()[0][6:], step.endswith("after"))  # type: ignore[assignment]

        def undo() -> None:
            d.index = real

        return undo
    if step == "stage":
        return _fail(d._log, "stage")
    if step == "forget_sketches":
        return _fail(d, "_forget_sketches")
    return _fail(d.store, step.split(".")[1])


@pytest.mark.parametrize("call", ["add_many", "check_and_add_many", "add", "durable=False"])
@pytest.mark.parametrize("step", STEPS)
def test_a_write_failing_at_any_step_leaves_nothing_half_done(
    tmp_path: Path, step: str, call: str
) -> None:
    root = tmp_path / "s"
    d = Deduplicator.open(root, policy=POLICY, retention=86400)
    d.index_flush_interval = 0.0  # every write syncs the index: that step is reached
    d.add("kept", words(1))
    d.add("replaced", words(2))
    d.add("pending", words(3), durable=False)  # staged by another writer, not yet committed
    d._last_expire = 0.0  # the write's expiry step runs too

    new = {"new": words(10), "replaced": words(11)}
    undo = _inject(d, step)
    try:
        if call == "add":
            d.add("new", new["new"])
            d.add("replaced", new["replaced"])
        elif call == "durable=False":
            d.add_many(list(new), list(new.values()), durable=False)
            d.commit()
        else:
            getattr(d, call)(list(new), list(new.values()))
        acknowledged = True
    except Injected:
        acknowledged = False
    finally:
        undo()

    # When d.commit() fails rather than the write, the written rows stay staged and the next
    # commit writes them (the documented group commit).
    retried = step == "store.put_many" and call == "durable=False"

    def check(d: Deduplicator) -> None:
        _assert_present(d, "kept", words(1))
        if acknowledged or retried:
            for i, text in new.items():
                _assert_present(d, i, text)
        else:
            _assert_absent(d, "new", new["new"])
            _assert_present(d, "replaced", words(2))
            assert "replaced" not in [m.id for m in d.check(new["replaced"])]
        _assert_consistent(d)

    check(d)
    # still usable: further writes, a removal, a clean close (the index's lock is released)
    d.add("after", words(20))
    assert d.check_and_add("after2", words(21)) == (True, [])
    d.remove("after2")
    d.close()
    d = Deduplicator.open(root)
    check(d)
    _assert_present(d, "after", words(20))
    _assert_present(d, "pending", words(3))
    d.close()
