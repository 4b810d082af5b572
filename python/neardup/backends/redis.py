"""Near-duplicate detection shared by many processes and machines through Redis or Redis Cluster.

:class:`RedisDeduplicator` makes the decision of :class:`neardup.Deduplicator` (the one
decision of the policy: MinHash band candidates, exact Jaccard) over texts stored in Redis; it
satisfies :class:`neardup.dedup.DedupBackend`, so ``neardup serve --store redis://...`` uses it.
The layout and protocol: :mod:`neardup.backends.redis_store` and docs/scale-out.md.

``RedisIndex`` (a SimHash index over Redis, format 2) is gone: use :class:`RedisDeduplicator`
for texts, or :class:`neardup.Index` for fingerprints.
"""

from __future__ import annotations

from typing import Any

from neardup.backends.redis_connect import connect
from neardup.backends.redis_dedup import RedisDeduplicator
from neardup.backends.redis_store import FORMAT_VERSION

__all__ = ["FORMAT_VERSION", "RedisDeduplicator", "connect"]


def __getattr__(name: str) -> Any:
    if name == "RedisIndex":
        raise AttributeError(
            "neardup.backends.redis.RedisIndex (a SimHash index over Redis) was removed: the "
            "Redis store now makes the one decision over texts; use RedisDeduplicator, or "
            "neardup.Index for bare fingerprints"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
