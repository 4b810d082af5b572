"""The service's embedded store: ``Deduplicator.open`` under the data directory.

``Deduplicator.open`` keeps the text store as the one durable log (each document's text and
fingerprint, one fsync per write call), syncs the index every few seconds and catches it up from
the texts on open, rebuilding it when it is damaged (see ``neardup.dedup``). This module keeps
the service's historical names for it.
"""

from __future__ import annotations

import os

from neardup.dedup import Deduplicator, Policy

__all__ = ["LogDeduplicator", "open_store"]

#: The former name of the durable deduplicator: ``Deduplicator.open`` now returns one.
LogDeduplicator = Deduplicator


def open_store(
    path: str | os.PathLike[str],
    *,
    policy: Policy | None = None,
    retention: float | None = None,
    sync: str = "full",
) -> Deduplicator:
    """``Deduplicator.open(path, policy=..., retention=..., sync=...)``: texts and fingerprints in
    ``path/texts.sqlite`` (the log; ``sync``: ``"full"`` fsyncs each write call, ``"normal"``
    survives a killed process, ``"off"``), the index under ``path/index`` (caught up from the
    texts on open), the policy in ``path/policy.json``."""
    return Deduplicator.open(path, policy=policy, retention=retention, sync=sync)
