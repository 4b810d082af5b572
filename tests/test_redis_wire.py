"""The core's side of the Redis backend's wire: commands packed in RESP (checked against
hiredis's packer, which the one-server link used before), bucket records measured straight from
the buckets an ``MGET`` returned (against brute force), and the keys of a version's own buckets
(against the layout). The protocol itself is tested against real servers in test_redis*.py."""

from __future__ import annotations

import enum
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

hiredis = pytest.importorskip("hiredis", reason="the [redis] extra is required")

from neardup._core import _bucket_keys, _near_buckets, _pack_commands  # noqa: E402
from neardup.backends.layout import BlockLayout  # noqa: E402

_ARG = st.one_of(
    st.binary(max_size=40),
    st.text(max_size=20),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.lists(_ARG, min_size=1, max_size=8), st.binary()), max_size=5))
def test_commands_are_packed_as_hiredis_packs_them(commands: list[list[object] | bytes]) -> None:
    # (bytes items are already packed: sent as they are)
    want = b"".join(c if isinstance(c, bytes) else hiredis.pack_command(tuple(c)) for c in commands)
    assert _pack_commands(commands) == want


class _Big(enum.IntEnum):
    A = 5
    B = 2**70


def test_packing_refuses_what_redis_cannot_take() -> None:
    assert _pack_commands([("SET", bytearray(b"k"), memoryview(b"v"))]) == (
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
    )
    assert _pack_commands([]) == b""
    # A float or int subclass goes as its value (hiredis sends numpy's repr, np.float64(1.5)).
    one_and_half = _pack_commands([("SET", "k", np.float64(1.5))])
    assert one_and_half == _pack_commands([("SET", "k", 1.5)])
    assert _pack_commands([("X", _Big.A, _Big.B)]) == _pack_commands([("X", 5, 2**70)])
    for bad, kind in ((None, "NoneType"), (True, "bool"), ([1], "list")):
        with pytest.raises(TypeError, match=f"bytes, str, int or float, got {kind}"):
            _pack_commands([("SET", "k", bad)])
    with pytest.raises(UnicodeEncodeError):
        _pack_commands([("GET", "\ud800")])  # (strict UTF-8; texts are sent as bytes)
    # A command is a tuple or list with at least its name (Redis answers nothing to an empty
    # array: the link would wait for a reply for ever); pre-packed RESP is bytes.
    for bad in (5, "GET", bytearray(b"*1\r\n$4\r\nPING\r\n")):
        with pytest.raises(TypeError, match="must be a tuple or list of arguments"):
            _pack_commands([bad])
    for empty in ((), []):
        with pytest.raises(ValueError, match="at least its name"):
            _pack_commands([("PING",), empty])


def _record(fp: int, ref: int) -> bytes:
    return fp.to_bytes(8, "big") + ref.to_bytes(8, "big")


def test_near_buckets_equals_brute_force() -> None:
    rng = random.Random(3)
    for _ in range(200):
        fp, k = rng.getrandbits(64), rng.randrange(0, 20)
        buckets: list[bytes | None] = []
        records: list[tuple[int, int]] = []
        for _ in range(rng.randrange(0, 12)):
            if rng.random() < 0.2:
                buckets.append(None)
                continue
            recs = []
            for _ in range(rng.randrange(0, 6)):
                # near or far, and some refs met again (one version in several buckets)
                f = fp
                for _ in range(rng.randrange(0, 24)):
                    f ^= 1 << rng.randrange(64)
                r = rng.choice([rng.getrandbits(64) or 1, 7, 8])
                f = {7: fp ^ 1, 8: fp ^ 3}.get(r, f)
                recs.append((f, r))
            records += recs
            buckets.append(b"".join(_record(f, r) for f, r in recs))
        want: dict[int, tuple[int, int]] = {}
        for f, r in records:
            d = (f ^ fp).bit_count()
            if d <= k and r not in want:
                want[r] = (f, d)
        got = _near_buckets(buckets, fp, k)
        assert got == want and list(got) == list(want)


def test_near_buckets_refuses_torn_buckets_and_other_items() -> None:
    with pytest.raises(ValueError, match="not a multiple of 16"):
        _near_buckets([_record(1, 2)[:8], _record(1, 2)[8:]], 0, 64)
    with pytest.raises(TypeError, match="bytes or None, got str"):
        _near_buckets([_record(1, 2), "x"], 0, 64)
    assert _near_buckets([], 0, 64) == {} and _near_buckets([None, b""], 0, 3) == {}


@pytest.mark.parametrize("blocks", [1, 2, 4, 7, 9, 64])
def test_bucket_keys_are_the_blocks_of_the_layout(blocks: int) -> None:
    layout = BlockLayout(blocks)
    rng = random.Random(blocks)
    for fp in [0, 2**64 - 1] + [rng.getrandbits(64) for _ in range(50)]:
        want = [
            f"ns:b:3:{b}:{(fp >> s) & ((1 << w) - 1):x}"
            for b, (s, w) in enumerate(zip(layout.shifts, layout.widths))
        ]
        assert _bucket_keys("ns:b:3:", fp, blocks) == want
    with pytest.raises(ValueError, match="blocks"):
        _bucket_keys("ns:b:0:", 0, 0)
