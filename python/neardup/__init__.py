"""neardup: near-duplicate text detection at scale with SimHash.

Fingerprints are unsigned 64-bit integers. ``Index.query(fp, k)`` returns every stored item
whose Hamming distance to ``fp`` is <= k (inclusive), never one farther.
"""

from __future__ import annotations

import importlib
from typing import Any

from neardup._core import (
    PRESETS,
    CorruptIndexError,
    Fingerprinter,
    IncompatibleIndexError,
    Index,
    __version__,
    from_bitstring,
    hamming,
    hamming_many,
    to_bitstring,
    to_hex,
)

# Names from modules that pull in more (or optional) dependencies load on first use.
_LAZY = {
    "Deduplicator": "neardup.dedup",
    "Match": "neardup.dedup",
    "Policy": "neardup.dedup",
    "CorpusDeduper": "neardup.corpus",
    "Client": "neardup.client",
    "RedisDeduplicator": "neardup.backends.redis",
    "RedisIndex": "neardup.backends.redis",  # (removed: its module says what to use instead)
}

__all__ = [
    "Client",
    "CorpusDeduper",
    "CorruptIndexError",
    "Deduplicator",
    "Fingerprinter",
    "IncompatibleIndexError",
    "Index",
    "Match",
    "PRESETS",
    "Policy",
    "RedisDeduplicator",
    "__version__",
    "from_bitstring",
    "hamming",
    "hamming_many",
    "to_bitstring",
    "to_hex",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'neardup' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
