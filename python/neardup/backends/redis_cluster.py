"""The check-and-add protocol on Redis Cluster, where no script can touch all of an item's keys.

(1) Append the entry (tagged with a random uid) to the item's buckets; (2) take the ticket and
publish ``uid -> ticket``, in one script on the ``{ns}`` slot; (3) read the probe buckets and
look up the tickets of the near entries found. If X and Y are near and ``ticket(Y) <
ticket(X)``, X sees Y: Y's appends precede Y's step (2), which precedes X's step (2), which
precedes X's reads (the proof in docs/scale-out.md).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from neardup.backends.redis_format import _Entry, _Pending, _Written

if TYPE_CHECKING:
    from neardup.backends.redis_index import RedisIndex

__all__ = ["earlier", "flatten", "write_cluster"]


def write_cluster(index: RedisIndex, x: _Pending) -> _Written:
    """Store ``x`` on a cluster: append, take the ticket, then read (the module docstring)."""
    idenc, p, exp, record, flat, own = x.idenc, x.period, x.expire_at, x.record, x.fields, x.own
    fpbytes = x.fp.to_bytes(8, "big")
    uid = f"n{time.time_ns():016x}{secrets.token_hex(4)}"
    entry = fpbytes + f"{uid}|{idenc}".encode()
    pipe = index.client.pipeline(transaction=False)
    pipe.hgetall(record)
    pipe.delete(record)
    pipe.hset(record, mapping=dict(zip(flat[0::2], flat[1::2]), u=uid))  # type: ignore[arg-type]
    if exp:
        pipe.expireat(record, exp)
    for key in own:
        pipe.rpush(key, entry)
        if exp:
            pipe.expireat(key, exp)
    old = pipe.execute()[0]
    index._drop_old(idenc, flatten(old), uid)
    tk = index._ticket_script(
        keys=[index._k_seq, index._k_tickets + str(p), index._k_count + str(p), index._k_horizon],
        args=[uid, exp],
    )
    ticket = int(tk[0])
    if x.probe_k is None:
        return _Written(ticket, uid, p, [])
    found = index._read_keys(x.fp, x.probe_k, x.probe_keys, idenc)
    return _Written(ticket, uid, p, earlier(index, found.values(), ticket))


def earlier(index: RedisIndex, entries: Iterable[_Entry], ticket: int) -> list[_Entry]:
    """The entries whose ticket is smaller than ``ticket`` (cluster: via uid -> ticket)."""
    entries = list(entries)
    pending = [e for e in entries if e.uid[0] == "n"]
    tickets: dict[str, int] = {}
    if pending:
        pipe = index.client.pipeline(transaction=False)
        for e in pending:
            pipe.hget(index._k_tickets + str(e.period), e.uid)
        for e, t in zip(pending, pipe.execute()):
            if t is not None:
                tickets[e.uid] = int(t)
    out = []
    for e in entries:
        t = int(e.uid[1:]) if e.uid[0] == "t" else tickets.get(e.uid)
        # No ticket yet: it will get a larger one than ours, and will see us.
        if t is not None and t < ticket:
            out.append(e)
    return out


def flatten(d: Mapping[bytes, bytes] | Sequence[bytes]) -> list[bytes]:
    if isinstance(d, Mapping):
        return [x for kv in d.items() for x in kv]
    return list(d)
