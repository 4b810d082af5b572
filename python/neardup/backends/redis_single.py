"""The check-and-add protocol on one Redis server: a script per item, run atomically.

- :func:`check_add_in_script`: the bare index at probe radius 0 decides inside the script
  (:data:`~neardup.backends.redis_lua._CHECK_ADD_LUA`): a duplicate writes nothing.
- :func:`write_many`: the ticketed write (:data:`~neardup.backends.redis_lua._WRITE_LUA`) that
  returns the records of the probe buckets, all written by earlier tickets; the client measures
  them and fetches the near ones' data (used with a verifier and for wider radii).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from neardup.backends.redis_format import (
    _Entry,
    _Pending,
    _Written,
    near_records,
    new_ref,
    pack_record,
)

if TYPE_CHECKING:
    from neardup.backends.redis_index import RedisIndex

__all__ = ["check_add_in_script", "write_call", "write_many"]


def write_many(index: RedisIndex, batch: Sequence[_Pending], texts: bool = False) -> list[_Written]:
    """:meth:`RedisIndex._write` for each item, in order: one script per item, all in one
    round trip, then one round trip for the data of the near records found. Items are
    ticketed in order, so each sees the earlier ones of the batch among its predecessors.
    (An item whose random ref was in use is sent again after the batch: probability ~2**-64
    per item.)"""
    todo = list(range(len(batch)))
    outs: list[Any] = [None] * len(batch)
    while todo:  # again for the (astronomically rare) items whose random ref was in use
        calls = [write_call(index, batch[j]) for j in todo]
        retry = []
        for j, out in zip(todo, index._link.run_scripts(index._write_script, calls)):
            if int(out[0]) < 0:
                index._reref(batch[j])
                retry.append(j)
            else:
                outs[j] = out
        todo = retry
    written: list[_Written] = []
    near: dict[int, tuple[int, int]] = {}
    per_item: list[dict[int, tuple[int, int]]] = []
    for x, out in zip(batch, outs):
        ticket = int(out[0])
        old = None if out[1] is None else int.from_bytes(out[1], "big")
        if old is not None and old != x.ref:
            index._drop_version(old)
        found: dict[int, tuple[int, int]] = {}
        if x.probe_k is not None:
            found = near_records(out[2], x.fp, x.probe_k)
            found.pop(x.ref, None)
            if old is not None:
                found.pop(old, None)
        per_item.append(found)
        near.update(found)
        written.append(_Written(ticket, x.ref, x.period))
    entries = {e.ref: e for e in index._resolve(near, texts)}
    for x, w, found in zip(batch, written, per_item):
        w.predecessors = [
            replace(entries[r], distance=d)  # this item's own distance to it
            for r, (_, d) in found.items()
            if r in entries and entries[r].idenc != x.idenc
        ]
    return written


def write_call(index: RedisIndex, x: _Pending) -> tuple[list[Any], list[Any]]:
    """``(KEYS, ARGV)`` of :data:`~neardup.backends.redis_lua._WRITE_LUA` for ``x``."""
    keys = [index._k_seq, index._k_count + str(x.period), x.idkey, index._k_horizon, x.datakey]
    keys += [key for _, key in x.probe_keys]
    keys += x.own
    ref8 = x.ref.to_bytes(8, "big")
    args: list[Any] = [len(x.probe_keys), pack_record(x.fp, x.ref), ref8, x.expire_at]
    args += [q for q, _ in x.probe_keys]
    args += x.fields
    return keys, args


def check_add_in_script(
    index: RedisIndex, items: Sequence[tuple[str, int, float | None]], k: int
) -> list[list[_Entry] | None]:
    """One server, radius 0: the check-and-add of each ``(idenc, fp, timestamp)`` in one
    script (one round trip for the batch; one more for the ids of the matches when some
    item is rejected). ``None`` for an item added, else the stored items within ``k``.
    Keys are built here directly: this is the hot path of the index."""
    pre = index._bucket_prefix
    periods = index._live_periods()
    probed = [b for b, r in enumerate(index.layout.radii(k)) if r == 0]
    calls: list[tuple[list[Any], list[Any]]] = []
    for idenc, fp, timestamp in items:
        ts = time.time() if timestamp is None else float(timestamp)
        p = index._store_period(ts)
        ref = new_ref()
        values = [(fp >> sh) & m for sh, m in index._blocks]
        probes = [f"{pre}{q}:{b}:{values[b]:x}" for q in periods for b in probed]
        keys = [index._k_seq, index._k_count + str(p), index._idkey(idenc), index._k_horizon]
        keys.append(index._datakey(ref))
        keys += probes
        keys += [f"{pre}{p}:{b}:{v:x}" for b, v in enumerate(values)]
        args: list[Any] = [len(probes), k, pack_record(fp, ref), ref.to_bytes(8, "big")]
        args.append(index._expire_at(p))
        args += [q for q in periods for _ in probed]
        args += ["i", idenc, "f", f"{fp:016x}", "t", repr(ts), "p", str(p)]
        calls.append((keys, args))
    outs = index._link.run_scripts(index._check_add_script, calls)
    for j, out in enumerate(outs):
        while int(out[0]) < 0:  # the random ref was in use: draw another
            keys, args = calls[j]
            ref = new_ref()
            keys[4] = index._datakey(ref)
            args[2] = args[2][:8] + ref.to_bytes(8, "big")
            args[3] = ref.to_bytes(8, "big")
            out = outs[j] = index._link.run_scripts(index._check_add_script, [(keys, args)])[0]
    near: dict[int, tuple[int, int]] = {}
    for out in outs:
        ticket = int(out[0])
        if ticket and out[1] is not None:
            index._drop_version(int.from_bytes(out[1], "big"))
        elif not ticket:
            for raw, d in zip(out[1::2], out[2::2]):
                near[int.from_bytes(raw, "big")] = (0, int(d))
    entries = {e.ref: e for e in index._resolve(near)}
    results: list[list[_Entry] | None] = []
    for (idenc, _, _), out in zip(items, outs):
        if int(out[0]):
            results.append(None)
            continue
        found = {}
        for raw, d in zip(out[1::2], out[2::2]):
            e = entries.get(int.from_bytes(raw, "big"))
            if e is not None and e.idenc != idenc:
                found[e.ref] = replace(e, distance=int(d))  # this item's distance
        # (A match removed between the script and the lookup is not listed.)
        results.append(list(found.values()))
    return results
