"""Storage backends that share one near-duplicate index between processes and machines.

- :mod:`neardup.backends.redis`: :class:`~neardup.backends.redis.RedisIndex` and
  :class:`~neardup.backends.redis.RedisDeduplicator` over Redis or Redis Cluster
  (``pip install 'neardup[redis]'``; imported only when used).
"""

from __future__ import annotations

__all__: list[str] = []
