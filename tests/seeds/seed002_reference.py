"""A plain, faithful Python reading of seed 002's Scala SimHash sketch (the reference the Rust
`seed002` preset is tested against).

The Scala in ../shared/seeds/002 is a sketch with typos (`weightCul(Type)` reads `weightType`,
`buildByArr` returns `SimHash` for `simHash`); what it computes is:

1. ``tokenlize``: ``str.toLowerCase()``, keep the matches of ``[\\w\\u4e00-\\u9fcc]+`` joined
   (Java's ``\\w`` is ASCII ``[a-zA-Z_0-9]``), then ``slide``: every window of 4 chars, or the
   whole string (even empty) when it is shorter than 4.
2. ``weightCul``: with ``n`` slices and ``heavy = n // 2 + 1``: ``pre`` gives the first ``heavy``
   slices 3 and the rest 1, ``suf`` the last ``heavy`` 3 and the rest 1, otherwise all 1.
3. ``hashFuc``: ``md5Hex`` of the UTF-8 bytes -> ``new BigInteger(hex, 16)`` -> ``toByteArray()``
   (big-endian two's complement: a leading 0x00 when the top bit is set, fewer bytes when the
   digest starts with zero bytes) -> each byte's bits most significant first.
4. ``buildByArr``: for bit ``a`` in 0..63 read ``hashArr(hLen - 1 - a)`` (bit ``a`` of the
   integer), add the weight when set, subtract otherwise; set bit ``k`` when ``v(k) > 0``.
"""

from __future__ import annotations

import hashlib

WIDTH = 4


def tokenize(text: str) -> list[str]:
    """Seed 002's ``tokenlize`` + ``slide``."""
    kept = "".join(
        c
        for c in text.lower()
        if (c.isascii() and (c.isalnum() or c == "_")) or "\u4e00" <= c <= "\u9fcc"
    )
    if len(kept) < WIDTH:
        return [kept]
    return [kept[i : i + WIDTH] for i in range(len(kept) - WIDTH + 1)]


def weights(weight_type: str, length: int) -> list[int]:
    """Seed 002's ``weightCul``."""
    heavy = length // 2 + 1
    if weight_type == "pre":
        return [3] * heavy + [1] * (length - heavy)
    if weight_type == "suf":
        return [1] * (length - heavy) + [3] * heavy
    return [1] * length


def java_to_byte_array(value: int) -> bytes:
    """``BigInteger.toByteArray()`` of a non-negative value: minimal big-endian two's complement."""
    return value.to_bytes(value.bit_length() // 8 + 1, "big")


def hash_bits(feature: str) -> list[bool]:
    """Seed 002's ``hashFuc``: the bits of the md5 integer's byte array, most significant first."""
    value = int(hashlib.md5(feature.encode("utf-8")).hexdigest(), 16)
    out: list[bool] = []
    for byte in java_to_byte_array(value):
        out.extend(bool((byte >> i) & 1) for i in reversed(range(8)))
    return out


def simhash(text: str, weight_type: str) -> int:
    """Seed 002's fingerprint of ``text`` (``pre``, ``suf``, anything else is uniform)."""
    slices = tokenize(text)
    ws = weights(weight_type, len(slices))
    v = [0] * 64
    for feature, w in zip(slices, ws):
        bits = hash_bits(feature)
        for a in range(64):
            if bits[len(bits) - 1 - a]:
                v[a] += w
            else:
                v[a] -= w
    return sum(1 << k for k in range(64) if v[k] > 0)
