"""The check-and-add protocol on one Redis server: a script per item, run atomically.

- :func:`check_add_in_script`: the bare index at probe radius 0 decides inside the script
  (:data:`~neardup.backends.redis_lua._CHECK_ADD_LUA`): a duplicate writes nothing, and the
  ids of its matches come back in the same reply (one round trip per item).
- :func:`write_many`: the ticketed write (:data:`~neardup.backends.redis_lua._WRITE_LUA`),
  followed on the same connection by an ``MGET`` of the probe buckets; the client measures the
  records, fetches the near ones' data and keeps those with a smaller ticket (used with a
  verifier and for wider radii).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from neardup.backends.redis_format import (
    _NO_TICKET,
    _Entry,
    _Pending,
    _Written,
    add_note,
    new_ref,
    pack_record,
)
from neardup.backends.redis_read import saw
from neardup.backends.redis_versions import abandon, drop_replaced

if TYPE_CHECKING:
    from neardup.backends.redis_index import RedisIndex

__all__ = ["check_add_in_script", "write_call", "write_many"]


def write_many(
    index: RedisIndex, batch: Sequence[_Pending], payload: str | None = None
) -> list[_Written]:
    """:meth:`RedisIndex._write` for each item, in order: for each item its write script and
    (with ``probe_k``) an ``MGET`` of its probe buckets, all in one round trip, then one round
    trip for the data of the near records found. The predecessors of an item are the near
    records whose ticket is smaller than its own: every such writer ran its whole script
    before this item's, so the ``MGET`` that follows this item's script returns its records
    (records of later tickets it may also return are left out). Items are ticketed in order,
    so each sees the earlier ones of the batch. (An item whose random ref was in use is sent
    again: probability ~2**-64 per item.)"""
    # (the last item's script also returns the recent ring's new slots, when watched: those
    # of every write of the batch too, which a later batch's likely copies are guessed from)
    last = len(batch) - 1
    calls = [
        write_call(index, x, index._seen if j == last and index._watching else -1)
        for j, x in enumerate(batch)
    ]
    reads: list[bytes | None] = [None if x.probes is None else x.probes.mget() for x in batch]
    try:
        outs = index._link.run_scripts_reading(index._write_script, calls, reads)
    except Exception as e:
        # The writes may have run (replicas that did not confirm them in time, an error
        # reply, a connection lost twice). The check-and-adds are retracted (each id names
        # what it named before; retracting one that did not run changes nothing); the plain
        # adds, which others may have seen already, are finished: what they replaced goes.
        abandon(
            index,
            [(x.idenc, x.fp, _Written(0, x.ref, x.period)) for x in batch if x.probe_k is not None],
            e,
        )
        adds = [x.ref for x in batch if x.probe_k is None]
        if adds:
            try:
                drop_replaced(index, adds)
            except Exception as again:
                add_note(e, f"neardup: the versions these adds replaced may stay ({again!r})")
        raise
    try:
        return _written(index, batch, calls, reads, outs, payload)
    except BaseException as e:
        # The check-and-adds written are retracted: the caller gets no decision for them.
        abandon(
            index,
            [
                (x.idenc, x.fp, _Written(int(out[0]), x.ref, x.period))
                for x, (out, _) in zip(batch, outs)
                if x.probe_k is not None and int(out[0]) >= 0
            ],
            e,
        )
        raise


def _written(
    index: RedisIndex,
    batch: Sequence[_Pending],
    calls: list[tuple[list[Any], list[Any]]],
    reads: list[bytes | None],
    outs: list[Any],
    payload: str | None,
) -> list[_Written]:
    """The rest of :func:`write_many` once the first round trip is answered: items whose ref
    was in use sent again, then the data of the near records and each item's predecessors."""
    while True:  # again for the (astronomically rare) items whose random ref was in use
        retry = [j for j, (out, _) in enumerate(outs) if int(out[0]) < 0]
        if not retry:
            break
        for j in retry:
            index._reref(batch[j])
            calls[j] = write_call(index, batch[j])
        again = index._link.run_scripts_reading(
            index._write_script, [calls[j] for j in retry], [reads[j] for j in retry]
        )
        for j, out in zip(retry, again):
            outs[j] = out
    final = outs[-1][0] if outs else None
    if final is not None and len(final) > 3:  # (the ring's slots up to its own ticket)
        saw(index, int(final[0]), final[3])
    written: list[_Written] = []
    near: dict[int, tuple[int, int]] = {}
    per_item: list[dict[int, tuple[int, int]]] = []
    caching = index._cache.keeps(payload)
    for x, (out, buckets) in zip(batch, outs):
        ticket = int(out[0])
        if caching:  # (what a later check of this process reads back from this version)
            data = x.data.get(payload) if payload else None
            if isinstance(data, str):
                data = data.encode()
            index._cache.remember(x.ref, x.fp, (x.idenc, x.period, ticket, payload, data))
        old = None if out[1] is None else int.from_bytes(out[1], "big")
        replaced = None
        if old is not None and old != x.ref:
            if x.probe_k is None:
                drop_replaced(index, [x.ref])
            else:  # (a check-and-add: dropped once added, the id's again if rejected)
                replaced = old
        found: dict[int, tuple[int, int]] = {}
        if x.probe_k is not None and x.probes is not None:
            found = x.probes.near(buckets, out[2])
            found.pop(x.ref, None)
        per_item.append(found)
        near.update(found)
        written.append(_Written(ticket, x.ref, x.period, old=replaced))
    entries = {e.ref: e for e in index._resolve(near, payload)}
    for w, found in zip(written, per_item):
        preds = []
        for r, (_, d) in found.items():
            e = entries.get(r)
            # (A record without data was removed or retracted meanwhile; one with a larger
            # ticket was written after this item's script: that writer sees this item.)
            if e is None:
                continue
            if (e.ticket if e.ticket is not None else _NO_TICKET) < w.ticket:
                # (with this item's own distance to it)
                preds.append(_Entry(e.ref, e.fp, e.idenc, e.period, d, e.ticket, e.text))
        w.predecessors = preds
    return written


def write_call(index: RedisIndex, x: _Pending, seen: int = -1) -> tuple[list[Any], list[Any]]:
    """``(KEYS, ARGV)`` of :data:`~neardup.backends.redis_lua._WRITE_LUA` for ``x`` (``seen``:
    the last ticket whose recent slot this process read, -1: read none)."""
    keys = [index._k_seq, index._k_count + str(x.period), x.idkey, index._k_horizon, x.datakey]
    keys.append(index._k_recent)
    keys += x.own
    args: list[Any] = [pack_record(x.fp, x.ref), x.ref.to_bytes(8, "big"), x.expire_at, seen]
    args += x.fields
    return keys, args


def check_add_in_script(
    index: RedisIndex,
    items: Sequence[tuple[str, int, float | None]],
    k: int | Sequence[int],
    more_fields: Sequence[Sequence[bytes | str]] | None = None,
) -> list[list[_Entry] | None]:
    """One server, radius 0 (each ``k`` < blocks): the check-and-add of each ``(idenc, fp,
    timestamp)`` in one script, all in one round trip, in order (an item sees the earlier ones
    that were added). ``k``: the radius, or one per item; ``more_fields``: data fields per item
    (flat name, value list: the text of a deduplicator). ``None`` for an item added, else the
    stored items within its ``k`` (with their ids and tickets, read by the script). Keys are
    built here directly: this is the hot path of the index."""
    pre = index._bucket_prefix
    periods = index._live_periods()
    blocks = index._blocks
    nb = len(blocks)
    radii = [k] * len(items) if isinstance(k, int) else list(k)
    fixed = index.retention is None  # one period (0), no expiry
    head = [index._k_seq, index._k_count + "0", "", index._k_horizon, ""]
    calls: list[tuple[list[Any], list[Any]]] = []
    for j, (idenc, fp, timestamp) in enumerate(items):
        kj = radii[j]
        nf = kj + 1  # at radius 0 the probes are the first k + 1 blocks (BlockLayout.radii)
        ts = time.time() if timestamp is None else float(timestamp)
        ref = new_ref()
        values = [(fp >> sh) & m for sh, m in blocks]
        if fixed:
            p, exp, extra, extra_periods, nfp = 0, 0, [], [], nf
            keys = head.copy()
        else:
            p = index._store_period(ts)
            exp = index._expire_at(p)
            others = [q for q in periods if q != p]
            extra = [f"{pre}{q}:{b}:{values[b]:x}" for q in others for b in range(nf)]
            extra_periods = [q for q in others for _ in range(nf)]
            nfp = nf if p in periods else 0
            keys = head.copy()
            keys[1] = index._k_count + str(p)
        keys[2] = index._idkey_prefix + idenc
        keys[4] = index._data_prefix + f"{ref:016x}"
        keys += [f"{pre}{p}:{b}:{v:x}" for b, v in enumerate(values)]
        keys += extra
        ref8 = ref.to_bytes(8, "big")
        args: list[Any] = [nb, kj, fp.to_bytes(8, "big") + ref8, ref8, exp, nfp, p]
        args.append(index._data_prefix)
        args += extra_periods
        args += ["i", idenc, "f", f"{fp:016x}", "t", repr(ts), "p", p]
        if more_fields is not None:
            args += more_fields[j]
        calls.append((keys, args))
    try:
        outs = index._link.run_scripts(index._check_add_script, calls)
    except Exception as e:
        # (as in write_many: the items the scripts added, if they ran, are retracted)
        abandon(
            index,
            [
                (idenc, fp, _Written(0, int.from_bytes(args[3], "big"), int(args[6])))
                for (idenc, fp, _), (_, args) in zip(items, calls)
            ],
            e,
        )
        raise
    results: list[list[_Entry] | None] = []
    for out, j in zip(outs, range(len(outs))):
        while out[0] < 0:  # the random ref was in use: draw another
            keys, args = calls[j]
            ref = new_ref()
            keys[4] = index._data_prefix + f"{ref:016x}"
            args[2] = args[2][:8] + ref.to_bytes(8, "big")
            args[3] = ref.to_bytes(8, "big")
            out = index._link.run_scripts(index._check_add_script, [(keys, args)])[0]
        if out[0]:
            if out[1]:
                drop_replaced(index, [int.from_bytes(calls[j][1][3], "big")])
            results.append(None)
            continue
        found = []
        for n in range(1, len(out), 4):
            raw, d, name, q = out[n : n + 4]
            ticket = int(q) if q else None
            found.append(_Entry(int.from_bytes(raw, "big"), 0, name.decode(), 0, d, ticket))
        results.append(found)
    return results
