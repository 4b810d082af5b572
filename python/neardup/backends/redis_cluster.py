"""The check-and-add protocol on Redis Cluster, where no script can touch all of an item's keys.

(0) Create the data of a fresh random ref (a script on that one key, refusing a ref in use);
(1) point the id at it and append the record to the item's buckets; (2) take the ticket and
publish ``ref -> ticket``, in one script on the ``{ns}`` slot; (3) read the probe buckets, and
the tickets of the near records found. If X and Y are near and ``ticket(Y) < ticket(X)``, X
sees Y: Y's appends precede Y's step (2), which precedes X's step (2), which precedes X's
reads (the proof in docs/scale-out.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from neardup.backends.redis_format import (
    _Entry,
    _Pending,
    _Written,
    near_records,
    pack_record,
    ref_hex,
)

if TYPE_CHECKING:
    from neardup.backends.redis_index import RedisIndex

__all__ = ["settle_cluster", "write_cluster"]


def write_cluster(index: RedisIndex, x: _Pending, payload: str | None = None) -> _Written:
    """Store ``x`` on a cluster (steps 0-3 above); with ``x.probe_k``, the stored items near
    it whose ticket is smaller than its own are its predecessors."""
    while not index._claim_script(keys=[x.datakey], args=[x.expire_at, *x.fields]):
        index._reref(x)  # the random ref was in use: draw another
    p, exp = x.period, x.expire_at
    record = pack_record(x.fp, x.ref)
    pipe = index.client.pipeline(transaction=False)
    pipe.set(x.idkey, x.ref.to_bytes(8, "big"), get=True)
    if exp:
        pipe.expireat(x.idkey, exp)
    for key in x.own:
        pipe.append(key, record)
        if exp:
            pipe.expireat(key, exp)
    raw = pipe.execute()[0]
    old = None if raw is None or int.from_bytes(raw, "big") == x.ref else int.from_bytes(raw, "big")
    if old is not None and x.probe_k is None:
        index._drop_version(old)  # (a check-and-add drops it once added: RedisIndex._settle)
        old = None
    tk = index._ticket_script(
        keys=[index._k_seq, index._k_tickets + str(p), index._k_count + str(p), index._k_horizon],
        args=[ref_hex(x.ref), exp],
    )
    ticket = int(tk[0])
    if x.probe_k is None or x.probes is None:
        return _Written(ticket, x.ref, p, old=old)
    # (3) the probe buckets (the horizon came with the ticket), then in one pipeline the data
    # of the near records and their tickets (looked up in every live period's hash: the
    # period of a record is in its data, which this saves a round trip to wait for).
    pipe = index.client.pipeline(transaction=False)
    for key in x.probes.keys:
        pipe.get(key)
    blob = x.probes.live_blob(pipe.execute(), tk[1])
    near = near_records(blob, x.fp, x.probe_k)
    if not near:
        return _Written(ticket, x.ref, p, old=old)
    refs = list(near)
    fields = ["i", "p", "q", payload] if payload else ["i", "p", "q"]
    periods = list(index._live_periods())
    pipe = index.client.pipeline(transaction=False)
    for ref in refs:
        pipe.hmget(index._datakey(ref), fields)
    for ref in refs:
        for q in periods:
            pipe.hget(index._k_tickets + str(q), ref_hex(ref))
    res = pipe.execute()
    found = index._entries(near, refs, res[: len(refs)], payload)
    tickets: dict[int, int] = {}
    per_ref = iter(res[len(refs) :])
    for ref in refs:
        known = [int(t) for t in itertools.islice(per_ref, len(periods)) if t is not None]
        if known:
            tickets[ref] = known[0]
    return _Written(ticket, x.ref, p, _earlier(found, tickets, ticket), old=old)


def _earlier(entries: Iterable[_Entry], tickets: dict[int, int], ticket: int) -> list[_Entry]:
    """The ``entries`` whose ticket (in ``tickets``, by ref) is smaller than ``ticket``."""
    out = []
    for e in entries:
        t = tickets.get(e.ref)
        # No ticket yet: it will get a larger one than ours, and will see us.
        if t is not None and t < ticket:
            e.ticket = t
            out.append(e)
    return out


def settle_cluster(index: RedisIndex, items: Sequence[tuple[str, int, _Written, bool]]) -> None:
    """:meth:`RedisIndex._settle` on a cluster, where no script sees an id's versions together:
    the client keeps the chain. Each id ends naming its last added version of the batch, or
    the one it had before (``written.old`` of its first write)."""
    by_id: dict[str, list[tuple[int, _Written, bool]]] = {}
    for idenc, fp, w, added in items:
        by_id.setdefault(idenc, []).append((fp, w, added))
    removals: list[tuple[int, int, int, str | None, int | None]] = []
    drops: list[int] = []
    for idenc, versions in by_id.items():
        before = versions[0][1].old
        winners = [w for _, w, added in versions if added]
        final = winners[-1].ref if winners else before
        last = versions[-1][1]
        for fp, w, added in versions:
            if not added:
                named = w is last  # (the id key names the batch's last version of it)
                removals.append(
                    (w.ref, fp, w.period, idenc if named else None, final if named else None)
                )
            elif w is not winners[-1]:
                drops.append(w.ref)
        if winners and before is not None:
            drops.append(before)
    index._remove_versions(removals)
    for ref in drops:
        index._drop_version(ref)
