"""An id's versions: settling a batch of check-and-adds, retracting and removing versions.

A write stores a new version of its id (a fresh ref); a check-and-add not decided inside its
write script stores it before it is decided. Each id names its current version and the chain
of those it replaced (the ``o`` fields of the data on one server, the id key on a cluster:
:func:`~neardup.backends.redis_cluster.chain`).

- :func:`settle`: once a batch is decided, the rejected versions are retracted, the versions
  the added ones replaced are dropped, and each id names its last added version, or the one it
  had before the batch (:class:`_Gone` keeps the batch's decisions as it goes).
- :func:`abandon`: a call that fails before it could answer retracts its writes (best effort;
  a note on the error says what may be left).
- :func:`forget` (an id), :func:`remove_versions`, :func:`retract`, :func:`drop_version`,
  :func:`drop_replaced`: the removal of versions' records, data and counts, and of their place
  in their id's chain (on one server by :data:`~neardup.backends.redis_lua._RETRACT_LUA` and
  :data:`~neardup.backends.redis_lua._TAKE_REPLACED_LUA`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from neardup.backends.redis_cluster import chain, settle_cluster
from neardup.backends.redis_format import _Written, add_note, pack_record

if TYPE_CHECKING:
    from neardup.backends.redis_index import RedisIndex

__all__ = [
    "abandon",
    "drop_replaced",
    "drop_version",
    "forget",
    "remove_versions",
    "retract",
    "settle",
    "settle_or_note",
]


class _Gone:
    """The versions a batch of check-and-adds has done with, as it decides item by item: the
    rejected writes, and the versions an added write replaced (the id's version from before
    the batch, or its earlier added write in it). They are stored until the batch settles;
    later items of the batch must not count them (as in a one-by-one loop)."""

    __slots__ = ("refs", "current")

    def __init__(self) -> None:
        self.refs: set[int] = set()
        self.current: dict[str, int | None] = {}

    def decided(self, idenc: str, w: _Written, added: bool) -> None:
        if not added:
            self.refs.add(w.ref)
            return
        previous = self.current.get(idenc, w.old)
        if previous is not None:
            self.refs.add(previous)
        self.current[idenc] = w.ref


def settle(index: RedisIndex, items: Sequence[tuple[str, int, _Written, bool]]) -> None:
    """After the check-and-adds ``(idenc, fp, written, added)`` of a batch (in order):
    retract the rejected versions, drop the versions the added ones replaced, and leave
    each id naming its last added version, or the one it had before the batch (a rejected
    check-and-add never loses the id's stored text)."""
    if not index.cluster:
        # The scripts keep each id's chain of replaced versions (field o) on the server.
        remove_versions(index, [(w.ref, fp, w.period, i) for i, fp, w, ok in items if not ok])
        drop_replaced(index, [w.ref for _, _, w, ok in items if ok and w.old is not None])
        return
    settle_cluster(index, items)


def abandon(
    index: RedisIndex, items: Sequence[tuple[str, int, _Written]], err: BaseException
) -> None:
    """Retract the writes ``items`` ``(idenc, fp, written)`` of a call that fails before
    it could answer (``err``): none counts as added, and each id names again the version
    it had. Best effort: when the retraction fails too (the server is gone), or runs but
    no replica confirms it, a note on ``err`` says so."""
    if not items:
        return
    refs = ", ".join(f"{w.ref:016x}" for _, _, w in items)
    try:  # (through the index's method, which a test replaces to make this fail)
        index._settle([(idenc, fp, w, False) for idenc, fp, w in items])
    except TimeoutError as again:  # (WAIT: the retraction was sent to this server)
        add_note(
            err,
            f"neardup: the retraction of the writes of this call ({refs}) was sent, but "
            f"no replica confirmed it in time ({again})",
        )
    except Exception as again:
        add_note(
            err,
            f"neardup: the undecided writes of this call ({refs}) could not be fully "
            f"retracted ({again!r}): some may stay stored (named by their ids), or leave "
            "data, records or counts behind until they expire",
        )


def settle_or_note(index: RedisIndex, items: Sequence[tuple[str, int, _Written, bool]]) -> None:
    """:func:`settle`; if it fails, a note on the error says what may be left."""
    try:
        index._settle(items)
    except Exception as err:
        add_note(
            err,
            "neardup: the call's check-and-adds were decided but not all settled: rejected "
            "versions may stay stored (named by their ids) and replaced ones may stay "
            "until they expire",
        )
        raise


# -- removing ------------------------------------------------------------------------------


def forget(index: RedisIndex, idenc: str, ref: int, fp: int, p: int) -> None:
    """Remove the id ``idenc``, whose current version is ``ref`` (fingerprint ``fp``, period
    ``p``), with every version it names."""
    if index.cluster:  # (every version the id's chain names goes, then the chain)
        refs = chain(index, idenc, "older")
        for r in refs:
            drop_version(index, r)
        chain(index, idenc, "cut", *(r.to_bytes(8, "big") for r in refs))
        return
    # One server: the id key goes, and the versions the removed one had replaced with it
    # (still stored while the check-and-add that replaced them is undecided).
    retract(index, [(ref, fp, p, idenc)], "forget")


def drop_version(index: RedisIndex, ref: int) -> None:
    """Remove version ``ref`` of an id that is no longer its current one (its records, data
    and count; one server: with the versions below it in its id's chain)."""
    row = ("HMGET", index._datakey(ref), "f", "p")
    if index.cluster:
        f, p = index.client.execute_command(*row)
    else:
        f, p = index._link.send_all([row])[0]
    if f is None:  # (dropped already)
        return
    remove_versions(index, [(ref, int(f, 16), int(p), None)])


def remove_versions(index: RedisIndex, items: Sequence[tuple[int, int, int, str | None]]) -> None:
    """Remove stored versions ``(ref, fp, period, idenc)``: their records from their
    buckets, their data, one count each and (``idenc`` given) their place in the id's
    chain: an id that names one names again the version it replaced (a later add of the
    id survives). The chain is in the ``o`` fields of the data on one server, in the id
    key on a cluster (:data:`~neardup.backends.redis_lua._CHAIN_LUA`)."""
    if not items:
        return
    if not index.cluster:
        retract(index, items, "")
        return
    # Redis Cluster: the keys live on several masters; one command (or script) per key.
    # The id first names what it named before (its chain), then the data go.
    for ref, _, _, idenc in items:
        if idenc is not None:
            chain(index, idenc, "cut", ref.to_bytes(8, "big"))
    pipe = index.client.pipeline(transaction=False)
    for ref, _, _, _ in items:
        pipe.delete(index._datakey(ref))
    deleted = pipe.execute()
    pipe = index.client.pipeline(transaction=False)
    for (ref, fp, p, _), gone in zip(items, deleted):
        if not gone:  # (removed meanwhile by another process: nothing to undo)
            continue
        record = pack_record(fp, ref)
        for b, v in enumerate(index.layout.values(fp)):
            index._remove_record_script(keys=[index._bucket(p, b, v)], args=[record])
        pipe.decr(index._k_count + str(p))
    pipe.execute()


def retract(
    index: RedisIndex, items: Sequence[tuple[int, int, int, str | None]], mode: str
) -> None:
    """One server: :data:`~neardup.backends.redis_lua._RETRACT_LUA` for each item of
    :func:`remove_versions` (``mode`` ``"forget"``: the id key is deleted, not pointed back); a
    version each removed one had replaced that nothing links any more is dropped with the rest
    of its chain."""
    if not items:
        return
    index._cache.forget(ref for ref, _, _, _ in items)
    if index._engine is not None:
        index._engine.forget([ref for ref, _, _, _ in items])
    calls: list[tuple[list[Any], list[Any]]] = []
    for ref, fp, p, idenc in items:
        keys = [index._idkey(idenc or ""), index._datakey(ref), index._k_count + str(p)]
        keys += index._own_keys(p, fp)
        ref8 = ref.to_bytes(8, "big") if idenc is not None else b""
        calls.append((keys, [pack_record(fp, ref), ref8, index._data_prefix, mode]))
    for out in index._link.run_scripts(index._retract_script, calls):
        if out and out[0] and not out[1]:
            drop_version(index, int.from_bytes(out[0], "big"))


def drop_replaced(index: RedisIndex, refs: Sequence[int]) -> None:
    """One server, versions ``refs`` now stored for good (added): drop the versions of
    their ids they replaced (the chains of ``o`` fields, normally one version each), in
    two round trips for all."""
    if not refs:
        return
    calls = [([index._datakey(ref)], [index._data_prefix]) for ref in refs]
    outs = index._link.run_scripts(index._take_replaced_script, calls, wait=False)
    retract(
        index,
        [
            (int.from_bytes(raw, "big"), int(f, 16), int(p), None)
            for raw, f, p in (out for out in outs if out)
            if f is not None
        ],
        "",
    )
