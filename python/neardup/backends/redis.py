"""A near-duplicate index shared by many processes and machines, stored in Redis or Redis Cluster.

:class:`RedisIndex` has the contract of :class:`neardup.Index`: ``query(fp, k)`` returns every
stored item whose Hamming distance to ``fp`` is **<= k** (inclusive), never one farther, with
its distance, nearest first. :class:`RedisDeduplicator` adds the stored texts and the verifier of
a :class:`neardup.dedup.Policy` on top, with the semantics of :class:`neardup.Deduplicator`
(it satisfies :class:`neardup.dedup.DedupBackend`, so ``neardup serve --store redis://...``
uses it).

Layout (format 2; all keys start with the namespace ``ns``, default ``"neardup"``):

- The 64-bit fingerprint is cut into ``B`` blocks (:class:`neardup.backends.layout.BlockLayout`,
  the core index's cut; ``B = k + 1`` for ``k <= 5``: by the pigeonhole principle two
  fingerprints within ``k`` bits agree exactly on at least one block; for wider ``k`` fewer,
  larger blocks probed within a radius, :meth:`~neardup.backends.layout.BlockLayout.radii`).
- ``ns:b:<period>:<block>:<value hex>``: a bucket, one string of 16-byte records
  (fingerprint, ref), 8 bytes each, big-endian. A query ``GET``s the buckets of its probe
  values in every live period (one round trip per node), measures every record exactly, then
  fetches the data of the near ones.
- ``ns:d:<ref hex>``: the data of one stored version (id, fingerprint, timestamp, period,
  ticket, and the text for :class:`RedisDeduplicator`); ``ns:r:<id>``: the id's current ref
  (on a cluster, its chain of versions, the current one first).
- ``{ns}:config`` (the settings and format, checked on open), ``{ns}:seq`` (the sequence of
  tickets), ``{ns}:n:<period>`` (item counts), ``{ns}:horizon`` (the first period not expired
  by :meth:`RedisIndex.expire`) and, on a cluster, ``{ns}:tk:<period>`` (ref -> ticket). The
  ``{ns}`` hash tag keeps these in one slot; buckets and data spread over the cluster.

Time periods: an item with timestamp ``ts`` lives in period ``floor(ts / period)``; with a
retention, every key of a period gets ``EXPIREAT (period + 1) * period_seconds + retention``,
so Redis drops old items by itself (no scans) and queries read only the live periods.

Atomic check-and-add without a global lock (see docs/scale-out.md for the proofs): on one
server the bare index at probe radius 0 runs the whole check-and-add in one script (a duplicate
writes nothing); otherwise every write takes a *ticket* from ``{ns}:seq`` and an item is a
duplicate when a stored item with a smaller ticket is near it (and passes the verifier): on one
server one script takes the ticket and appends atomically, and an ``MGET`` of the probe buckets
follows it on the same connection; on a cluster the record is appended first,
then the ticket is taken, then the buckets are read, so whoever took the later ticket reads the
other's record. Of near-copies racing from many processes, exactly one is added.

Modules: :mod:`~neardup.backends.redis_index` (:class:`RedisIndex`),
:mod:`~neardup.backends.redis_dedup` (:class:`RedisDeduplicator`),
:mod:`~neardup.backends.redis_single` and :mod:`~neardup.backends.redis_cluster` (the write
protocols), :mod:`~neardup.backends.redis_link` (the one-server transport),
:mod:`~neardup.backends.redis_lua` (the scripts), :mod:`~neardup.backends.redis_format` (records
and encodings), :mod:`~neardup.backends.redis_connect` (URLs).
"""

from __future__ import annotations

from neardup.backends.layout import BlockLayout, default_blocks
from neardup.backends.redis_connect import connect
from neardup.backends.redis_dedup import RedisDeduplicator
from neardup.backends.redis_format import FORMAT_VERSION
from neardup.backends.redis_index import RedisIndex

__all__ = [
    "FORMAT_VERSION",
    "BlockLayout",
    "RedisDeduplicator",
    "RedisIndex",
    "connect",
    "default_blocks",
]
