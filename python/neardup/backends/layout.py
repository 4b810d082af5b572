"""How a 64-bit fingerprint is cut into blocks, and which block values a query probes.

Shared by the Redis backend (bucket keys) and the Spark job (group keys); the same cut as the
core index (``crates/neardup-core/src/index/layout.rs``): ``B`` blocks, most significant bits
first, the first ``64 % B`` blocks one bit wider.
"""

from __future__ import annotations

import itertools

__all__ = ["BlockLayout", "default_blocks"]


def default_blocks(k: int) -> int:
    """The number of blocks :class:`RedisIndex` uses for radius ``k`` when not told.

    ``k + 1`` exact blocks up to ``k = 5`` (one bucket per block per query); beyond that
    ``ceil((k + 1) / 2)`` blocks probed within radius 1, which keeps the blocks wide enough
    (9+ bits at the default policy's ``k = 13``) that buckets stay small.
    """
    if k <= 5:
        return k + 1
    return (k + 2) // 2


class BlockLayout:
    """``blocks`` runs of bits of a 64-bit fingerprint, most significant first.

    Widths are ``64 // blocks``, the first ``64 % blocks`` blocks one bit wider (the core
    index's layout). Pigeonhole: if ``hamming(a, b) <= k`` then in some block ``a`` and ``b``
    differ in at most ``radii(k)[block]`` bits, so probing every value within that radius of
    each block of ``a`` finds every such ``b``.
    """

    def __init__(self, blocks: int) -> None:
        if isinstance(blocks, bool) or not isinstance(blocks, int) or not 1 <= blocks <= 64:
            raise ValueError(f"blocks must be an int in 1..64, got {blocks!r}")
        self.blocks = blocks
        base, extra = divmod(64, blocks)
        self.widths = [base + 1 if i < extra else base for i in range(blocks)]
        self.shifts: list[int] = []
        top = 64
        for w in self.widths:
            top -= w
            self.shifts.append(top)
        self._flips: dict[tuple[int, int], list[int]] = {}

    def values(self, fp: int) -> list[int]:
        """The value of each block of ``fp``."""
        return [(fp >> s) & ((1 << w) - 1) for s, w in zip(self.shifts, self.widths)]

    def radius(self, k: int) -> int:
        """The largest per-block probe radius of a query at ``k`` (see :meth:`radii`)."""
        return k // self.blocks

    def radii(self, k: int) -> list[int]:
        """Per-block probe radius that makes a query at ``k`` exact (-1: block not probed).

        With ``k = blocks * r + a`` (``a < blocks``), one of the first ``a + 1`` blocks differs
        in at most ``r`` bits or one of the others in at most ``r - 1`` (else the distance would
        be at least ``k + 1``): the core index's rule, so both probe the same buckets.
        """
        r, a = divmod(k, self.blocks)
        return [r if i <= a else r - 1 for i in range(self.blocks)]

    def _flip_masks(self, width: int, r: int) -> list[int]:
        key = (width, r)
        masks = self._flips.get(key)
        if masks is None:
            masks = [0]
            for n in range(1, min(r, width) + 1):
                for bits in itertools.combinations(range(width), n):
                    masks.append(sum(1 << b for b in bits))
            self._flips[key] = masks
        return masks

    def flip_masks(self, block: int, r: int) -> list[int]:
        """Every mask of at most ``r`` bits within block ``block``'s width (0 first)."""
        return self._flip_masks(self.widths[block], r)

    def probes_of_block(self, block: int, value: int, r: int) -> list[tuple[int, int]]:
        """``(block, v)`` for every ``v`` within ``r`` bits of ``value`` (itself first)."""
        return [(block, value ^ m) for m in self._flip_masks(self.widths[block], r)]

    def probes(self, fp: int, k: int) -> list[tuple[int, int]]:
        """``(block, value)`` of every bucket a query at radius ``k`` reads."""
        out: list[tuple[int, int]] = []
        for i, (v, r) in enumerate(zip(self.values(fp), self.radii(k))):
            if r >= 0:
                out.extend(self.probes_of_block(i, v, r))
        return out
