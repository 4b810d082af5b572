"""The check-and-add protocol on Redis Cluster, where no script can touch all of an item's keys.

(0) Create the data of a fresh random ref (a script on that one key, refusing a ref in use);
(1) point the id at it and append the record to the item's buckets; (2) take the ticket and
publish ``ref -> ticket``, in one script on the ``{ns}`` slot; (3) read the probe buckets, and
the tickets of the near records found. If X and Y are near and ``ticket(Y) < ticket(X)``, X
sees Y: Y's appends precede Y's step (2), which precedes X's step (2), which precedes X's
reads (the proof in docs/scale-out.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from neardup.backends.redis_format import _Entry, _Pending, _Written, pack_record, ref_hex

if TYPE_CHECKING:
    from neardup.backends.redis_index import RedisIndex

__all__ = ["earlier", "write_cluster"]


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
    old = pipe.execute()[0]
    if old is not None and int.from_bytes(old, "big") != x.ref:
        index._drop_version(int.from_bytes(old, "big"))
    tk = index._ticket_script(
        keys=[index._k_seq, index._k_tickets + str(p), index._k_count + str(p), index._k_horizon],
        args=[ref_hex(x.ref), exp],
    )
    ticket = int(tk[0])
    if x.probe_k is None or x.probes is None:
        return _Written(ticket, x.ref, p)
    found = index._read_keys(x.fp, x.probe_k, x.probes, payload, x.idenc)
    return _Written(ticket, x.ref, p, earlier(index, found, ticket))


def earlier(index: RedisIndex, entries: Iterable[_Entry], ticket: int) -> list[_Entry]:
    """The entries whose ticket (looked up in ``{ns}:tk:<period>``) is smaller than ``ticket``."""
    entries = list(entries)
    tickets: dict[int, int] = {}
    if entries:
        pipe = index.client.pipeline(transaction=False)
        for e in entries:
            pipe.hget(index._k_tickets + str(e.period), ref_hex(e.ref))
        for e, t in zip(entries, pipe.execute()):
            if t is not None:
                tickets[e.ref] = int(t)
    out = []
    for e in entries:
        t = tickets.get(e.ref)
        # No ticket yet: it will get a larger one than ours, and will see us.
        if t is not None and t < ticket:
            e.ticket = t
            out.append(e)
    return out
