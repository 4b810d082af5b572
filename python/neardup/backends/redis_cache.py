"""The data of stored versions a process wrote or read (one Redis server).

A version's data (id, period, ticket, the Jaccard sketch) never change, and on one server a
record is in a bucket exactly while its data exist (the write script adds both, the retraction
and removal scripts delete both; both expire together). So a version whose record an ``MGET``
just returned may be answered from here, without reading its data again, and nothing needs
invalidating: a removed version's records are gone, so it is never looked up. The cache is a
plain dict (the oldest half goes when full); the fingerprints of the most recent versions are
also kept in a ring, to guess cheaply that a text is a copy of one of them
(:meth:`VersionCache.recent_near`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import numpy as np

from neardup._core import _within

__all__ = ["DEFAULT_CACHE_SIZE", "Cached", "VersionCache"]

# Versions whose data a process keeps (~0.5 KB each with a Jaccard sketch of a short text).
DEFAULT_CACHE_SIZE = 65_536
# The most recent of them whose fingerprints a check scans to guess a duplicate (~5 us).
RING_SIZE = 16_384

# (id, period, ticket, payload field name, payload)
Cached = tuple[str, int, "int | None", "str | None", "bytes | None"]


class VersionCache:
    """Up to ``size`` versions' data by ref (0: off)."""

    __slots__ = ("size", "entries", "_ring_fps", "_ring_refs", "_ring_at")

    def __init__(self, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"cache_size must be an int >= 0, got {size!r}")
        self.size = size
        self.entries: dict[int, Cached] = {}
        ring = min(size, RING_SIZE)
        self._ring_fps = np.zeros(ring, dtype=np.uint64)
        self._ring_refs = [0] * ring
        self._ring_at = 0

    def keeps(self, payload: str | None) -> bool:
        """Whether versions read with ``payload`` are kept (texts, ``x``, may be large: not)."""
        return self.size > 0 and payload != "x"

    def get(self, ref: int, payload: str | None) -> Cached | None:
        """The data of ``ref`` if kept with ``payload`` (any, when ``payload`` is None)."""
        c = self.entries.get(ref)
        if c is None or (payload is not None and c[3] != payload):
            return None
        return c

    def remember(self, ref: int, fp: int, c: Cached) -> None:
        """Keep the data ``c`` of version ``ref`` (fingerprint ``fp``)."""
        entries = self.entries
        entries[ref] = c
        if len(entries) > self.size:
            self.entries = dict(itertools.islice(entries.items(), len(entries) // 2, None))
        if self._ring_refs:
            at = self._ring_at
            self._ring_fps[at] = fp
            self._ring_refs[at] = ref
            self._ring_at = (at + 1) % len(self._ring_refs)

    def recent_near(self, fp: int, k: int) -> list[int]:
        """Refs of recently kept versions within ``k`` of ``fp`` (a guess that a text is a
        duplicate: they may have been removed since)."""
        if not self._ring_refs:
            return []
        refs = self._ring_refs
        return [refs[i] for i in _within(self._ring_fps, fp, k) if refs[i] in self.entries]

    def forget(self, refs: Iterable[int]) -> None:
        """Drop versions this process removed or retracted."""
        for ref in refs:
            self.entries.pop(ref, None)

    def clear(self) -> None:
        self.entries.clear()

    def __len__(self) -> int:
        return len(self.entries)
