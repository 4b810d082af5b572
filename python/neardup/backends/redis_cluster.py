"""The check-and-add protocol on Redis Cluster, where no script can touch all of an item's keys.

(0) Create the data of a fresh random ref (a script on that one key, refusing a ref in use);
(1) append the record to the item's buckets and put the ref first in the id's chain (its id
key, :data:`~neardup.backends.redis_lua._CHAIN_LUA`); (2) take the ticket and publish
``ref -> ticket``, in one script on the ``{ns}`` slot; (3) read the probe buckets, and the
tickets of the near records found. If X and Y are near and ``ticket(Y) < ticket(X)``, X sees
Y: Y's appends precede Y's step (2), which precedes X's step (2), which precedes X's reads
(the proof in docs/scale-out.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from neardup.backends.redis_format import (
    _Entry,
    _Pending,
    _Written,
    add_note,
    pack_record,
    ref_hex,
)
from neardup.backends.redis_read import entries

if TYPE_CHECKING:
    from neardup.backends.redis_index import RedisIndex

__all__ = ["chain", "head_ref", "settle_cluster", "stored_for_good", "write_cluster"]

# The top bit of a chain entry's expiry: a tombstone (a ref cut out of the chain).
_TOMB = 1 << 63


def write_cluster(index: RedisIndex, x: _Pending, payload: str | None = None) -> _Written:
    """Store ``x`` on a cluster (steps 0-3 above); with ``x.probe_k``, the stored items near
    it whose ticket is smaller than its own are its predecessors. A check-and-add that fails
    part-way is retracted before the error propagates (its caller gets no decision)."""
    while True:
        while not index._claim_script(keys=[x.datakey], args=[x.expire_at, *x.fields]):
            index._reref(x)  # the random ref was in use: draw another
        try:
            w = _write_claimed(index, x, payload)
        except BaseException as e:
            _undo_write(index, x, e)
            raise
        if w is not None:
            return w
        # Its version was dropped by another process before the chain named it (a push sent
        # again late, after a lost reply): that drop counted one item too many. Again, anew.
        _count(index, x, +1)
        index._reref(x)


def _count(index: RedisIndex, x: _Pending, delta: int) -> None:
    """Add ``delta`` to the count of ``x``'s period (the key keeps the period's expiry)."""
    key = index._k_count + str(x.period)
    pipe = index.client.pipeline(transaction=False)
    pipe.incrby(key, delta)
    if x.expire_at:
        pipe.expireat(key, x.expire_at)
    pipe.execute()


def _write_claimed(index: RedisIndex, x: _Pending, payload: str | None) -> _Written | None:
    """Steps 1-3 of ``x`` once its data exist; None if its version was dropped meanwhile by
    another process: its chain entry was refused, or accepted after the drop (a push sent
    again late)."""
    p, exp = x.period, x.expire_at
    record = pack_record(x.fp, x.ref)
    pipe = index.client.pipeline(transaction=False)
    for key in x.own:
        pipe.append(key, record)
        if exp:
            pipe.expireat(key, exp)
    pipe.execute()
    ref8 = x.ref.to_bytes(8, "big")
    entry = ref8 + int(exp).to_bytes(8, "big")
    replaced = index._chain_script(keys=[x.idkey], args=["push", entry])
    if replaced and replaced[0] == 0:
        return None
    if not index.client.exists(x.datakey):  # (dropped before a late push was accepted)
        chain(index, x.idenc, "cut", ref8)
        return None
    old = int.from_bytes(replaced[0], "big") if replaced else None
    tk = index._ticket_script(
        keys=[index._k_seq, index._k_tickets + str(p), index._k_count + str(p), index._k_horizon],
        args=[ref_hex(x.ref), exp],
    )
    ticket = int(tk[0])
    if x.probe_k is None:  # a plain add replaces the id's whole chain (a check-and-add, once
        stored_for_good(index, x.idenc, x.ref)  # it is added: settle_cluster)
        return _Written(ticket, x.ref, p)
    if x.probes is None:
        return _Written(ticket, x.ref, p, old=old)
    # (3) the probe buckets (the horizon came with the ticket), then in one pipeline the data
    # of the near records and their tickets (looked up in every live period's hash: the
    # period of a record is in its data, which this saves a round trip to wait for).
    pipe = index.client.pipeline(transaction=False)
    for key in x.probes.keys:
        pipe.get(key)
    near = x.probes.near(pipe.execute(), tk[1])
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
    found = entries(near, refs, res[: len(refs)], payload)
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


def _undo_write(index: RedisIndex, x: _Pending, err: BaseException) -> None:
    """Best effort after a write failed part-way. A check-and-add gives no decision, so it is
    undone; a plain add is undone until its ticket counts it (before that it has dropped
    nothing, and its records would answer queries with nothing to drop them). Undoing takes
    its ref out of the id's chain, then its data, records and count. If another process
    dropped it meanwhile (it found it in the chain), that drop took one off the count: put
    back if no ticket had counted it."""
    try:
        counted = index.client.hexists(index._k_tickets + str(x.period), ref_hex(x.ref))
        if x.probe_k is None and counted:
            return
        chain(index, x.idenc, "cut", x.ref.to_bytes(8, "big"))
        if index.client.delete(x.datakey):
            record = pack_record(x.fp, x.ref)
            for key in x.own:
                index._remove_record_script(keys=[key], args=[record])
            if counted:
                _count(index, x, -1)
        elif not counted:
            _count(index, x, +1)
    except Exception as again:
        add_note(
            err,
            f"neardup: the failed write {x.ref:016x} could not be fully "
            f"retracted ({again!r}): its data, records or count may stay until they expire",
        )


def head_ref(raw: bytes, now: float) -> int | None:
    """The ref an id key names: the whole key on one server (8 bytes); on a cluster, the
    first entry of its chain that is neither a tombstone nor past its expiry."""
    if len(raw) == 8:
        return int.from_bytes(raw, "big")
    for off in range(0, len(raw) - 15, 16):
        exp = int.from_bytes(raw[off + 8 : off + 16], "big")
        if not exp & _TOMB and (exp == 0 or exp > now):
            return int.from_bytes(raw[off : off + 8], "big")
    return None


def chain(index: RedisIndex, idenc: str, mode: str, *args: bytes) -> list[int]:
    """Read or change the chain of versions of ``idenc`` held in its id key
    (:data:`~neardup.backends.redis_lua._CHAIN_LUA`, whose modes say what the refs returned
    are)."""
    out = index._chain_script(keys=[index._idkey(idenc)], args=[mode, *args])
    return [int.from_bytes(r, "big") for r in out]


def stored_for_good(index: RedisIndex, idenc: str, ref: int) -> None:
    """Version ``ref`` of ``idenc`` is added: drop the versions older than it in the id's chain,
    then take them out of it (each step safe to send again)."""
    older = chain(index, idenc, "older", ref.to_bytes(8, "big"))
    for r in older:
        index._drop_version(r)
    if older:
        chain(index, idenc, "cut", *(r.to_bytes(8, "big") for r in older))


def settle_cluster(index: RedisIndex, items: Sequence[tuple[str, int, _Written, bool]]) -> None:
    """:func:`~neardup.backends.redis_versions.settle` on a cluster: each decision is one
    change of the id's chain (its key), then the versions it leaves unnamed are dropped. Each id
    ends naming its last added version, or the one it had before; writes of one id decided by
    several processes in any order give the same."""
    removals: list[tuple[int, int, int, str | None]] = []
    for idenc, fp, w, added in items:
        if added:
            stored_for_good(index, idenc, w.ref)
        else:
            removals.append((w.ref, fp, w.period, idenc))
    index._remove_versions(removals)
