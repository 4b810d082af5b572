"""The data of stored versions a process wrote or read (one Redis server).

A version's data (id, period, ticket, the Jaccard sketch) never change, and on one server a
record is in a bucket exactly while its data exist (the write script adds both, the retraction
and removal scripts delete both; both expire together). So a version whose record an ``MGET``
just returned may be answered from here, without reading its data again, and nothing needs
invalidating: a removed version's records are gone, so it is never looked up. The cache is a
plain dict (the oldest half goes when full); the fingerprints of the most recent versions are
also kept in a ring, to guess cheaply that a text is a copy of one of them
(:meth:`VersionCache.recent_near`). A second ring keeps the records (fingerprint, ref) of the
newest versions any process wrote, read from the server's recent ring along with this
process's calls (:meth:`VersionCache.saw`), to guess a copy of another process's text whose
data this process does not have yet (:meth:`VersionCache.seen_near`).
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
# Records of the newest versions of any process (twice the server's ring: redis_lua; a scan
# of 4,096 costs ~2 us, of 16,384 ~8 us and more once out of the CPU's caches).
SEEN_SIZE = 4096

# (id, period, ticket, payload field name, payload)
Cached = tuple[str, int, "int | None", "str | None", "bytes | None"]


class VersionCache:
    """Up to ``size`` versions' data by ref (0: off)."""

    __slots__ = (
        "size",
        "entries",
        "_ring_fps",
        "_ring_refs",
        "_ring_at",
        "_seen_fps",
        "_seen_refs",
        "_seen_at",
    )

    def __init__(self, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"cache_size must be an int >= 0, got {size!r}")
        self.size = size
        self.entries: dict[int, Cached] = {}
        ring = min(size, RING_SIZE)
        self._ring_fps = np.zeros(ring, dtype=np.uint64)
        self._ring_refs = [0] * ring
        self._ring_at = 0
        seen = min(size, SEEN_SIZE)
        self._seen_fps = np.zeros(seen, dtype=np.uint64)
        self._seen_refs = np.zeros(seen, dtype=np.uint64)
        self._seen_at = 0

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

    def saw(self, slots: bytes) -> None:
        """Remember the records ``slots`` (16 bytes each: fingerprint, ref; ref 0: an empty
        slot) of versions some process wrote, oldest first. Not locked: threads sharing an
        index may see a slot half updated (a ref with another's fingerprint) or read slots
        twice: a wrong guess at worst, never a wrong answer (data are found by ref)."""
        m = len(self._seen_refs)
        n = len(slots) // 16
        if not m or not n:
            return
        at = self._seen_at
        if n <= 8:  # (the usual case: a few since this process's last call)
            fps, refs = self._seen_fps, self._seen_refs
            for off in range(0, n * 16, 16):
                ref = int.from_bytes(slots[off + 8 : off + 16], "big")
                if ref:
                    fps[at] = int.from_bytes(slots[off : off + 8], "big")
                    refs[at] = ref
                    at = (at + 1) % m
            self._seen_at = at
            return
        rows = np.frombuffer(slots, dtype=">u8", count=2 * n).reshape(n, 2)
        rows = rows[rows[:, 1] != 0][-m:]
        where = (at + np.arange(len(rows))) % m
        self._seen_fps[where] = rows[:, 0]
        self._seen_refs[where] = rows[:, 1]
        self._seen_at = (at + len(rows)) % m

    def seen_near(self, fp: int, k: int) -> dict[int, int]:
        """``{ref: fingerprint}`` of the newest versions of any process within ``k`` of
        ``fp`` (:meth:`saw`; a guess: they may have been retracted or removed since)."""
        if not len(self._seen_refs):
            return {}
        at = _within(self._seen_fps, fp, k)
        if not at:
            return {}
        refs = self._seen_refs
        # (ref 0: a slot not yet filled)
        return {r: int(self._seen_fps[i]) for i in at if (r := int(refs[i]))}

    def forget(self, refs: Iterable[int]) -> None:
        """Drop versions this process removed or retracted."""
        for ref in refs:
            self.entries.pop(ref, None)

    def clear(self) -> None:
        self.entries.clear()
        self._seen_refs[:] = 0

    def __len__(self) -> int:
        return len(self.entries)
