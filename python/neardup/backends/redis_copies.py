"""A batch's likely copies checked first (one server, the Jaccard verifier):
``RedisDeduplicator.check_and_add_many`` without a write and a retraction for each copy of a
stored text.

A batch writes every text, then decides, then retracts those rejected: for a batch that is
mostly copies of stored texts (a crawler's second pass) that is two scripts per copy. As one
text's call does, the texts of the batch that are likely copies (one of the newest versions
is near and passes the threshold, or its data are not kept: see
``RedisDeduplicator._likely_duplicate``) are first only read against the index, all in one
round trip (and one more for the candidates' data not kept), and those with a confirmed
stored near-duplicate are answered without a ticket. The others go the usual way.

The answers are those of the texts taken in order: a confirmed copy is not added, which it
would not be in order either (its match was stored before the batch, with a smaller ticket);
its matches are the stored ones plus the texts of the batch before it that were added and pass
the verifier against it. A copy whose match has the id of a text of the batch before it that
goes the usual way (which would replace that version first) goes the usual way too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from neardup._core import _sketch_jaccard
from neardup.backends.redis_format import _Entry
from neardup.backends.redis_read import read_many_with, resolve_many
from neardup.dedup import Match
from neardup.textstore import Id

if TYPE_CHECKING:
    from neardup.backends.redis_dedup import RedisDeduplicator

__all__ = ["copies_first", "with_batch_matches"]


def copies_first(
    d: RedisDeduplicator,
    ids: Sequence[Id],
    norms: Sequence[str],
    fps: Sequence[int],
    radii: Sequence[int],
    sketches: Sequence[Any],
) -> dict[int, tuple[list[_Entry], list[Match]]]:
    """``{position: (candidates, matches)}`` of the texts of a batch confirmed as copies of
    stored versions (see the module's notes); empty when none is likely."""
    index = d.index
    guessed: dict[int, dict[int, int]] = {}
    for j, (fp, r, h) in enumerate(zip(fps, radii, sketches)):
        likely, unknown = d._likely_duplicate(fp, r, h)
        if likely or unknown:
            guessed[j] = unknown
    if not guessed:
        return {}
    # One round trip: each guessed text's MGET and the data of the versions it likely copies
    # that this process does not keep, then the recent ring once.
    probes = {j: index._probe_keys(fps[j], radii[j]) for j in guessed}
    mgets = read_many_with(index, [(probes[j], guessed[j]) for j in guessed], "h")
    nears = [probes[j].near(m[1:], m[0]) for j, m in zip(guessed, mgets)]
    found: dict[int, tuple[list[_Entry], list[Match]]] = {}
    for j, got in zip(guessed, resolve_many(index, nears, "h")):
        entries = index._sorted(got)
        matches = d._verify(norms[j], d._payloads(entries), sketches[j])
        if matches:
            found[j] = (entries, matches)
    # A copy matched to an id that an earlier text of the batch (going the usual way) stores
    # again goes the usual way too; repeated, as each one sent back joins the others.
    while True:
        first_usual: dict[Id, int] = {}
        for j, i in enumerate(ids):
            if j not in found:
                first_usual.setdefault(i, j)
        back = [j for j, (_, ms) in found.items() if any(first_usual.get(m.id, j) < j for m in ms)]
        if not back:
            return found
        for j in back:
            del found[j]


def with_batch_matches(
    d: RedisDeduplicator,
    j: int,
    matches: list[Match],
    ids: Sequence[Id],
    fps: Sequence[int],
    radius: int,
    sketches: Sequence[Any],
    added_before: Sequence[int],
) -> list[Match]:
    """``matches`` of the confirmed copy at position ``j`` with the texts of the batch before
    it that were added (positions ``added_before``) and pass the verifier against it, in the
    verifier's order (stored versions first among equals: their tickets are smaller)."""
    extra = []
    for i in added_before:
        dist = (fps[i] ^ fps[j]).bit_count()
        if dist <= radius:
            sim = _sketch_jaccard(sketches[j], sketches[i])
            if sim >= d.policy.threshold:
                extra.append(Match(ids[i], dist, sim))
    if not extra:
        return matches
    out = matches + extra
    out.sort(key=lambda m: (-(m.similarity if m.similarity is not None else 1.0), m.distance))
    return out
