"""``neardup serve --against DIR``: a reference set, loaded read-only, that stored documents are
checked against first.

``DIR`` is a reference directory made by ``neardup index build`` (its texts in
``DIR/texts.sqlite``), opened read-only (the directory may be on a read-only disk or another
user's, and serving leaves its files as they are). Its texts are loaded once, at start, into a
:class:`neardup.Deduplicator` of the service's policy (the one decision, and an index of their
fingerprints for checks with an explicit ``k``) that is never written. :class:`WithReferences`
wraps the service's backend: a check answers the references a text is a near-copy of before the
stored documents it is a near-copy of; a check-and-add of a near-copy of a reference answers it
as a duplicate of the reference and stores nothing. Adds without a check, removals, expiry and
stats go to the backend (the references never expire and are not counted). A duplicate's id is
the reference's id as stored in ``DIR``: build the directory with ids apart from the service's
(``eval:17``). ``GET /v1/near`` lists the references too (:func:`neardup.service.backend.near_of`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from neardup.dedup import Deduplicator, Match, Policy
from neardup.textstore import Id, Ids, Timestamps

__all__ = ["WithReferences", "best_first", "load_references"]

_CHUNK = 4096


def load_references(path: str, policy: Policy) -> Deduplicator:
    """The reference texts of index directory ``path`` in a deduplicator of ``policy``.

    Raises ValueError naming the directory when it holds no stored texts."""
    from neardup.cli._against import (
        REFERENCE_TEXTS,
        index_stored,
        is_index_dir,
        reference_store,
        texts_missing,
    )

    texts_path = os.path.join(path, REFERENCE_TEXTS)
    missing = texts_missing(path) if os.path.isdir(path) else None
    if missing is not None:
        raise ValueError(f"--against {path}: {missing}")
    if not (os.path.isdir(path) and is_index_dir(path) and os.path.isfile(texts_path)):
        raise ValueError(
            f"--against {path}: not a reference directory with stored texts; build one with "
            f"`neardup index build {path} INPUT…`"
        )
    store = reference_store(path)  # (read-only: the directory is never written)
    try:
        # (the decision engine loads the saved engine, else the texts)
        refs = Deduplicator(policy=policy, store=store)
    except BaseException:
        store.close()
        raise
    if _same_fingerprints(path, policy):
        # the fingerprints stored with the texts are this policy's: no text is read
        index_stored(
            refs.index, store, lambda texts: policy.fingerprint_many(refs.fingerprinter, texts)
        )
        return refs
    ids: list[Id] = []
    texts: list[str] = []
    for i, text, _ in store.items():
        ids.append(i)
        texts.append(text)
        if len(texts) == _CHUNK:
            refs.index.add_many(ids, policy.fingerprint_many(refs.fingerprinter, texts))
            ids, texts = [], []
    if texts:
        refs.index.add_many(ids, policy.fingerprint_many(refs.fingerprinter, texts))
    return refs


def _same_fingerprints(path: str, policy: Policy) -> bool:
    """Whether the fingerprints stored in reference directory ``path`` are those ``policy``
    computes (the same fingerprint settings and HTML reading)."""
    from neardup.cli.index import _load_settings, _policy_from

    try:
        settings = _load_settings(path)
    except ValueError:
        return False
    if settings is None or settings.get("raw"):
        return False
    made = _policy_from(settings)
    return dict(made.fingerprint) == dict(policy.fingerprint) and made.html == policy.html


def best_first(a: list[Match], b: list[Match]) -> list[Match]:
    """The matches of ``a`` and ``b`` (each best first) in one list, best first (a stable
    sort: of equal similarity, ``a``'s first)."""
    return a + b if not a or not b else sorted(a + b, key=lambda m: -(m.similarity or 0.0))


class WithReferences:
    """The service's backend with a reference set checked first (see the module docstring)."""

    def __init__(self, backend: Any, references: Deduplicator) -> None:
        self.backend = backend
        self.references = references

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def __len__(self) -> int:
        return len(self.backend)

    def __contains__(self, id: object) -> bool:
        return id in self.backend

    def check(self, text: str, k: int | None = None) -> list[Match]:
        """The references ``text`` is a near-copy of, with the stored documents, best first."""
        return best_first(self.references.check(text, k), list(self.backend.check(text, k)))

    def check_many(self, texts: Sequence[str], k: int | None = None) -> list[list[Match]]:
        """:meth:`check` for each text."""
        refs = self.references.check_many(texts, k)
        stored = self.backend.check_many(texts, k)
        return [best_first(r, list(s)) for r, s in zip(refs, stored)]

    def check_and_add(
        self, id: Id, text: str, timestamp: float | None = None, **kw: Any
    ) -> tuple[bool, list[Match]]:
        """A near-copy of a reference is its duplicate (nothing stored); else the backend's."""
        refs = self.references.check(text)
        if refs:
            return False, refs
        result: tuple[bool, list[Match]] = self.backend.check_and_add(
            id, text, timestamp=timestamp, **kw
        )
        return result

    def check_and_add_many(
        self,
        ids: Ids,
        texts: Sequence[str],
        timestamps: Timestamps | None = None,
        **kw: Any,
    ) -> list[tuple[bool, list[Match]]]:
        """:meth:`check_and_add` of each text in order; the texts that are no reference's copy
        go to the backend in one call."""
        refs = self.references.check_many(texts)
        rest = [i for i, r in enumerate(refs) if not r]
        out: list[tuple[bool, list[Match]]] = [(False, r) for r in refs]
        if rest:
            done = self.backend.check_and_add_many(
                [ids[i] for i in rest],
                [texts[i] for i in rest],
                timestamps=None if timestamps is None else [timestamps[i] for i in rest],
                **kw,
            )
            for i, result in zip(rest, done):
                out[i] = result
        return out

    def stats(self) -> dict[str, Any]:
        """The backend's stats, with the number of references."""
        stats = getattr(self.backend, "stats", None)
        out = dict(stats()) if stats is not None else {}
        out["references"] = len(self.references)
        return out

    def close(self) -> None:
        """Close the backend and the references."""
        try:
            close = getattr(self.backend, "close", None)
            if close is not None:
                close()
        finally:
            self.references.close()
