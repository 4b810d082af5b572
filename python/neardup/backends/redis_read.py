"""The data of the versions a read finds, and what one server's reads bring along with them.

- :func:`resolve`: the data of the near records an ``MGET`` of probe buckets returned, from
  this process's cache (:mod:`neardup.backends.redis_cache`, one server) or in one pipelined
  round trip (per node) for the others.
- :func:`read_with`: one server, one round trip: the ``MGET`` of the probe buckets, the data of
  versions a check guesses are near (prefetched: the newest versions of other processes), and
  the recent ring's new slots.
- The recent ring (one server): each write script stores its record (fingerprint, ref) in a
  slot of ``{ns}:recent``; a process that watches it (a deduplicator that guesses copies) reads
  the slots after the last ticket it saw with its calls (:func:`recent_read`, :func:`saw`) and
  keeps the records in its cache, to guess a copy of another process's recent text. The ring
  only steers that guess (docs/scale-out.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from neardup.backends.redis_cache import Cached
from neardup.backends.redis_format import Probes, _Entry, _s

if TYPE_CHECKING:
    from neardup.backends.redis_index import RedisIndex

__all__ = [
    "data_fields",
    "data_of",
    "entries",
    "keep_read",
    "read_many_with",
    "read_with",
    "recent_read",
    "resolve_many",
    "resolve",
    "saw",
    "take_recent",
]


def resolve(
    index: RedisIndex,
    near: Mapping[int, tuple[int, int]],
    payload: str | None = None,
) -> list[_Entry]:
    """The data of the near records ``{ref: (fp, distance)}``, with the data field
    ``payload`` (``x`` the text, ``h`` its Jaccard sketch) as :attr:`_Entry.text`: one
    pipelined round trip (per node) for the refs not in this process's cache, none when all
    are. Refs whose data are gone (removed, retracted, expired) are skipped."""
    if not near:
        return []
    if index.cluster:
        refs = list(near)
        pipe = index.client.pipeline(transaction=False)
        for ref in refs:
            pipe.hmget(index._datakey(ref), data_fields(payload))
        return entries(near, refs, pipe.execute(), payload)
    return resolve_many(index, [near], payload)[0]


def resolve_many(
    index: RedisIndex, nears: Sequence[Mapping[int, tuple[int, int]]], payload: str | None
) -> list[list[_Entry]]:
    """One server: :func:`resolve` of several queries' near records, the data missing from
    the cache read in one round trip for all."""
    cache = index._cache
    known: dict[int, Cached] = {}
    misses: dict[int, int] = {}  # (ref: fp)
    for near in nears:
        for ref, (fp, _) in near.items():
            if ref not in known and ref not in misses:
                c = cache.get(ref, payload)
                if c is None:
                    misses[ref] = fp
                else:
                    known[ref] = c
    if misses:
        fields = data_fields(payload)
        rows = index._link.send_all([("HMGET", index._datakey(r), *fields) for r in misses])
        known.update(keep_read(index, list(misses), list(misses.values()), rows, payload))
    out: list[list[_Entry]] = []
    for near in nears:
        found: list[_Entry] = []
        for ref, (fp, dist) in near.items():
            c = known.get(ref)
            if c is not None:
                found.append(_Entry(ref, fp, c[0], c[1], dist, c[2], c[4] if payload else None))
        out.append(found)
    return out


def data_fields(payload: str | None) -> list[str]:
    """The fields of a version's data read for its entry: id, period, ticket (and the
    payload)."""
    return ["i", "p", "q", payload] if payload else ["i", "p", "q"]


def keep_read(
    index: RedisIndex,
    refs: Sequence[int],
    fps: Sequence[int],
    rows: Sequence[Any],
    payload: str | None,
) -> dict[int, Cached]:
    """The data read (``rows``, of :func:`data_fields`) of the versions ``refs``
    (fingerprints ``fps``), kept in the cache when it keeps ``payload``; those whose data
    are gone (removed meanwhile) are left out."""
    keep = index._cache.keeps(payload)
    out: dict[int, Cached] = {}
    for ref, fp, row in zip(refs, fps, rows):
        c = data_of(row, payload)
        if c is not None:
            out[ref] = c
            if keep:
                index._cache.remember(ref, fp, c)
    return out


def data_of(row: Sequence[Any], payload: str | None) -> Cached | None:
    """A version's data from its fields ``row`` (``i``, ``p``, ``q`` and the payload read):
    ``(id, period, ticket, payload, payload value)``; None if its data are gone."""
    if row[0] is None:
        return None
    q = None if row[2] is None else int(row[2])
    return (_s(row[0]), int(row[1]), q, payload, row[3] if payload else None)


def entries(
    near: Mapping[int, tuple[int, int]],
    refs: Sequence[int],
    rows: Sequence[Any],
    payload: str | None,
) -> list[_Entry]:
    """:class:`_Entry` of each ``refs[j]`` from its data fields ``rows[j]`` (``i``, ``p``,
    ``q`` and the payload), skipping those whose data are gone."""
    out: list[_Entry] = []
    for ref, row in zip(refs, rows):
        c = data_of(row, payload)
        if c is not None:
            fp, dist = near[ref]
            out.append(_Entry(ref, fp, c[0], c[1], dist, c[2], c[4]))
    return out


def read_with(
    index: RedisIndex, probes: Probes, payload: str | None, prefetch: Mapping[int, int]
) -> Any:
    """One server, one round trip: the ``MGET`` of ``probes`` (its reply is returned), the
    data of the versions ``prefetch`` (kept in the cache) and, when watched, the recent
    ring's new slots."""
    return read_many_with(index, [(probes, prefetch)], payload)[0]


def read_many_with(
    index: RedisIndex, reads: Sequence[tuple[Probes, Mapping[int, int]]], payload: str | None
) -> list[Any]:
    """:func:`read_with` of several queries ``(probes, prefetch)`` in one round trip (each
    query's ``MGET`` then its prefetched data, the recent ring once at the end); the ``MGET``
    replies."""
    fields = data_fields(payload)
    commands: list[Any] = []
    for probes, prefetch in reads:
        commands.append(probes.mget(index._k_horizon))
        commands += [("HMGET", index._datakey(ref), *fields) for ref in prefetch]
    if index._watching:
        commands.append(recent_read(index))
    replies = index._link.roundtrip(commands)
    for r in replies[: len(replies) - index._watching]:
        if isinstance(r, Exception):
            raise r
    if index._watching:
        take_recent(index, replies[-1])
    mgets = []
    pos = 0
    for _, prefetch in reads:
        mgets.append(replies[pos])
        rows = replies[pos + 1 : pos + 1 + len(prefetch)]
        keep_read(index, list(prefetch), list(prefetch.values()), rows, payload)
        pos += 1 + len(prefetch)
    return mgets


# -- the recent ring (one server) ------------------------------------------------------------


def recent_read(index: RedisIndex) -> tuple[Any, ...]:
    """The command that reads the recent ring's slots after the last ticket seen."""
    return ("EVALSHA", index._recent_script.sha, 2, index._k_seq, index._k_recent, index._seen)


def take_recent(index: RedisIndex, reply: Any) -> None:
    """Note the reply of :func:`recent_read` (a server that lost its scripts is given
    the script again for the next read: the ring only serves guesses)."""
    if isinstance(reply, Exception):
        if not str(reply).startswith("NOSCRIPT"):
            raise reply
        index.client.script_load(index._recent_script.script)
        return
    saw(index, int(reply[0]), reply[1])


def saw(index: RedisIndex, ticket: int, slots: bytes) -> None:
    """The recent ring's slots up to ``ticket`` were read: remember their records. (A
    ticket below the last one seen: the counter started over, the namespace was cleared
    or the server lost its data; reading goes on from there.)"""
    if ticket > index._seen:
        index._cache.saw(slots)
    index._seen = ticket
    if index._engine is not None:  # (the core's one-text calls guess from them too)
        index._engine.heard(ticket, slots)
