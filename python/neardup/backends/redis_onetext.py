"""One text's check-and-add on one Redis server, decided by the core's engine
(``crates/neardup-core/src/redis_call``; docs/scale-out.md, "One text's call in the core"):
what ``RedisDeduplicator.check_and_add`` runs when the index has an engine. Python prepares the
text and moves bytes; the engine packs the requests, parses the replies and decides."""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from neardup._core import _TextEngine
from neardup.backends.redis_connect import redis_py
from neardup.backends.redis_format import _dec_id, _enc_id, _utf8, _Written, new_ref
from neardup.dedup import Match, check_text
from neardup.htmltext import main_text
from neardup.textstore import Id

if TYPE_CHECKING:
    from neardup.backends.redis_dedup import RedisDeduplicator

__all__ = ["check_and_add_in_core", "sketches_of"]


def check_and_add_in_core(
    d: RedisDeduplicator, engine: _TextEngine, id: Id, text: str, timestamp: float | None
) -> tuple[bool, list[Match]]:
    """:meth:`RedisDeduplicator.check_and_add` on one server, decided by the core's engine
    (the same requests as ``RedisDeduplicator._check_and_add_here``; the guess, the cache and
    the decision in Rust). What it leaves to Python: a call that fails (what it wrote is
    retracted, as ``_decide_one`` does), anything unusual before it wrote (a lost script, a
    ref in use: ``_check_and_add_here`` runs the call), candidates stored without a sketch
    (computed here, :func:`sketches_of`) and the settling of a rejected or replacing write."""
    index = d.index
    visible = main_text(text) if d.policy.is_html(check_text(text)) else text
    idenc = _enc_id(id)
    ts = time.time() if timestamp is None else float(timestamp)
    p = index._store_period(ts)
    live = index._live_periods()
    # (normalised, fingerprinted, sketched and given its radius in the core)
    call, packed, fp = engine.begin(
        visible,
        (live.start, live.stop),
        p,
        index._expire_at(p),
        idenc,
        repr(ts),
        _utf8(text),
        new_ref(),
    )
    link = index._link
    feed = partial(engine.feed, call)
    try:
        while True:
            step = link.exchange(packed, feed, call.rewind)
            if step[0] == "sketches":
                step = engine.sketches(call, sketches_of(d, step[1]))
            if step[0] == "send":
                packed = step[1]
                continue
            if step[0] == "failed":
                raise redis_py.exceptions.ResponseError(step[1])
            if step[0] == "done":
                _, added, found, candidates, w = step
                matches = [Match(_dec_id(i), d, s) for i, d, s in found]
            break
    except BaseException as e:
        w = call.written()
        if w is not None:
            index._abandon([(idenc, fp, _Written(w[0], w[1], w[2]))], e)
        raise
    if step[0] == "fallback":  # (nothing written; a lost script: loaded again there)
        return d._check_and_add_here(id, text, timestamp)
    if w is None:  # (a copy found by a read: nothing written)
        d._counters["checks"] += 1
        d._counters["candidates"] += candidates
        d._counters["matches"] += len(matches)
        return False, matches
    if not added or w[3] is not None:
        index._settle_or_note([(idenc, fp, _Written(w[0], w[1], w[2], old=w[3]), added)])
    d._count_decided(candidates, len(matches), added)
    return added, matches


def sketches_of(d: RedisDeduplicator, refs: Sequence[tuple[int, int]]) -> list[bytes | None]:
    """The Jaccard sketches of the versions ``(ref, fp)`` stored without one (written
    before sketches were stored), from their texts; None for a version gone meanwhile."""
    sketches = d._sketches_from_texts({r: (f, 0) for r, f in refs})
    return [sketches.get(r) for r, _ in refs]
