"""The stored texts of an online deduplicator as the core's decision engine sees them.

:class:`KeptTexts` holds, per stored text, what the one decision of ``neardup_core::near``
needs (sketch, MinHash band keys and bytes, fingerprint) and maps the engine's rows to ids. A
check finds its candidates, ranks them and verifies them exactly as ``neardup dedup`` does
(``CorpusDeduper``): kept texts sharing a band, at most ``bucket_limit`` per band and
``verify_limit`` verified (docs/quality.md, "Bounded work"). So the library, the service and
the batch command give one answer.

A removed, replaced or expired text's row (or a failed write's) is forgotten (never a candidate
again); once forgotten rows outnumber the live ones (and number at least
:data:`COMPACT_MIN_ROWS`), checked after every write that forgets rows, the engine drops them
and renumbers the rest, so that a long-running service's memory follows the texts it holds, not
all it ever held. Texts that a check-and-add does not keep leave nothing
behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from neardup._core import CorruptIndexError, IncompatibleIndexError, NearEngine, NearRule
from neardup.policy import Match, Policy
from neardup.textstore import Id

__all__ = [
    "COMPACT_MIN_ROWS",
    "DEFAULT_MEMORY_BUDGET",
    "SAVED_ENGINE",
    "KeptTexts",
    "engine_for",
    "load_rows",
    "rows_digest",
    "rule_for",
    "saved_engine_path",
    "spill_directory",
]

#: Bytes of sketches the engine holds in memory before they go to a temporary file.
DEFAULT_MEMORY_BUDGET = 256 << 20
#: Forgotten rows below which the engine is not compacted (whatever the live rows).
COMPACT_MIN_ROWS = 1 << 16


def saved_engine_path(texts_path: str) -> str:
    """Where the engine of the SQLite text store file ``texts_path`` is saved: beside it,
    named after it (``texts.sqlite``: ``texts.engine``). Its rows, so that a reopen (or a
    reference directory's reuse) does not prepare and sketch every stored text again."""
    return os.path.splitext(os.path.abspath(texts_path))[0] + ".engine"


#: The saved engine of a data or reference directory's ``texts.sqlite``.
SAVED_ENGINE = os.path.basename(saved_engine_path("texts.sqlite"))


def rows_digest(policy: Policy) -> str:
    """What an engine's rows are made from (preparation, fingerprint, shingle, bands): a saved
    engine of another digest is not used. The decision's limits and threshold are not in it
    (they act on the tables, rebuilt on load), unless they change the band shape."""
    bands, rows = policy.band_shape
    made_of = {
        "fingerprint": dict(policy.fingerprint),
        "html": policy.html,
        "shingle": policy.shingle,
        "bands": bands,
        "rows": rows,
        "verify": policy.verifier == "jaccard",
    }
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:32]


def load_rows(engine: NearEngine, path: str, policy: Policy) -> tuple[list[Id], dict[str, Any]]:
    """Load the rows saved in ``path`` (:meth:`KeptTexts.save`) into the empty ``engine``;
    returns their ids and the saved ``meta``. ``CorruptIndexError`` (a damaged file) and
    ``IncompatibleIndexError`` (another format or policy) name the file; after either, drop
    the engine (it may hold the rows of a file whose ids could not be used)."""
    extra = engine.load(path)
    try:
        saved = json.loads(extra)
        ids, meta, digest = saved["ids"], saved["meta"], saved["policy"]
        if not isinstance(ids, list) or not isinstance(meta, dict) or len(ids) != len(engine):
            raise ValueError("ids or meta of the wrong kind or length")
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptIndexError(f"saved engine {path}: unreadable ids: {e}") from None
    if digest != rows_digest(policy):
        raise IncompatibleIndexError(
            f"saved engine {path}: made with another policy (preparation, fingerprint, shingle "
            "or bands)"
        )
    return ids, meta


def spill_directory(path: str | None = None) -> str:
    """Where the engine's temporary file goes: ``path``, else ``$NEARDUP_TMPDIR``, else the
    system's temporary directory (``$TMPDIR``)."""
    return path or os.environ.get("NEARDUP_TMPDIR") or tempfile.gettempdir()


def engine_for(policy: Policy, memory_budget: int, spill_dir: str | None) -> NearEngine:
    """The core engine of ``policy`` (its bands, limits, verifier and radius)."""
    bands, rows = policy.band_shape
    return NearEngine(
        bands=bands,
        rows=rows,
        shingle=policy.shingle,
        threshold=policy.threshold,
        verify=policy.verifier == "jaccard",
        k_short=policy.k_short,
        k_long=policy.k_long,
        short_chars=policy.short_chars,
        bucket_limit=policy.bucket_limit,
        full_bucket_quorum=policy.full_bucket_quorum,
        verify_limit=policy.verify_limit,
        memory_budget=memory_budget,
        spill_dir=spill_directory(spill_dir),
    )


def rule_for(policy: Policy) -> NearRule:
    """The decision rule of ``policy`` for candidates held outside the engine (a Redis
    store's band lists, a Spark job's band groups): the engine's probes, ranking and verifier."""
    bands, rows = policy.band_shape
    return NearRule(policy.threshold, bands, rows, policy.shingle, policy.verify_limit)


class KeptTexts:
    """The kept (stored) texts of a deduplicator in the core's engine, by id.

    Not locked here: the caller serialises writes (``check_and_add``, ``add``, ``forget``);
    ``check`` may run beside them (the engine has a lock of its own, and a row becomes
    visible only once its id is known).
    """

    def __init__(
        self,
        policy: Policy,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        spill_dir: str | None = None,
    ) -> None:
        self._engine = engine_for(policy, memory_budget, spill_dir)
        self._digest = rows_digest(policy)
        self._row_of: dict[Id, int] = {}
        self._id_of: list[Id | None] = []
        # Odd while a compaction renumbers rows: a check that saw another generation (its
        # rows may be numbered the other way) runs again.
        self._generation = 0

    def __len__(self) -> int:
        return len(self._row_of)

    def __contains__(self, id: Id) -> bool:
        return id in self._row_of

    def _matches(
        self, found: Iterable[tuple[int, int, float]], pending: dict[int, Id] | None = None
    ) -> list[Match]:
        id_of, row_of = self._id_of, self._row_of
        n = len(id_of)
        out = []
        for r, d, s in found:
            i = id_of[r] if r < n else None
            if i is not None and row_of.get(i) != r:
                # the id's text before a replace (or a forget) that is under way: its current
                # row, if any, answers for it
                continue
            if i is None and pending:
                i = pending.get(r)  # (a row of the same call)
            if i is not None:  # (else a row still being written, or of a call that failed)
                out.append(Match(i, d, s))
        return out

    def _resync(self) -> None:
        """After an engine call that failed: rows it stored without an id stay nameless (the
        engine has forgotten them), so that later rows keep their places."""
        missing = len(self._engine) - len(self._id_of)
        if missing > 0:
            self._id_of.extend([None] * missing)

    def check(self, norms: Sequence[str], fps: Sequence[int]) -> list[list[Match]]:
        """The stored texts that each prepared text duplicates, best first."""
        fps_array = np.asarray(fps, np.uint64)
        while True:
            generation = self._generation
            found = self._engine.check(list(norms), fps_array)
            out = [self._matches(m) for m in found]
            if generation % 2 == 0 and generation == self._generation:
                return out

    def check_and_add(
        self, ids: Sequence[Id], norms: Sequence[str], fps: Sequence[int]
    ) -> tuple[list[list[Match]], list[int]]:
        """Check-and-add in order: each text's matches (among the stored texts and the texts of
        this call kept before it), and the rows of the texts kept (empty matches), in order.
        Until :meth:`commit` names them, the kept rows are nobody's match in other calls
        (``check`` beside this write does not see a text that may yet be rolled back)."""
        try:
            found = self._engine.check_and_keep(list(norms), np.asarray(fps, np.uint64))
        except BaseException:
            self._resync()  # (a failed call keeps nothing)
            raise
        rows = []
        pending: dict[int, Id] = {}
        for i, (_, row) in zip(ids, found):
            if row >= 0:
                assert row == len(self._id_of)
                self._id_of.append(None)
                pending[row] = i
                rows.append(row)
        return [self._matches(m, pending) for m, _ in found], rows

    def add(self, ids: Sequence[Id], norms: Sequence[str], fps: Sequence[int]) -> list[int]:
        """Store texts without checking them; returns their rows, nobody's match until
        :meth:`commit` names them."""
        first = len(self._id_of)
        try:
            self._engine.feed(list(norms), np.asarray(fps, np.uint64))
            rows = list(range(first, first + len(norms)))
            self._engine.keep(np.asarray(rows, np.int64))
        except BaseException:
            self._forget_rows(list(range(first, len(self._engine))))
            self._resync()
            raise
        self._id_of.extend([None] * len(rows))  # (named by commit)
        return rows

    def commit(self, ids: Sequence[Id], rows: Sequence[int]) -> None:
        """Make ``rows`` (of a write that succeeded) the stored texts of ``ids``: a text an id
        had before is forgotten (a later row of the same id wins)."""
        old = []
        for i, r in zip(ids, rows):
            before = self._row_of.get(i)
            if before is not None and before != r:
                old.append(before)
            self._row_of[i] = r
            self._id_of[r] = i
        self._forget_rows(old)
        self._compact_when_due()

    def rollback(self, rows: Sequence[int]) -> None:
        """Take back the rows of a write that failed."""
        self._forget_rows(rows)
        self._compact_when_due()

    def forget(self, ids: Iterable[Id]) -> None:
        """Forget the stored texts of ``ids`` (unknown ids are ignored)."""
        rows = [r for r in (self._row_of.pop(i, None) for i in ids) if r is not None]
        self._forget_rows(rows)
        self._compact_when_due()

    def _compact_when_due(self) -> None:
        """The one rule of when rows are dropped, after every write that forgets some (a
        forget, a replaced id's old row at commit, a rollback): :meth:`compact` with
        :data:`COMPACT_MIN_ROWS`."""
        self.compact(COMPACT_MIN_ROWS)

    def compact(self, min_rows: int = 0) -> None:
        """Drop the forgotten rows from the engine (with their memory and temporary file
        space) when they number at least ``min_rows`` and outnumber the live ones. Called
        between writes (the caller's write lock held); checks may run beside it."""
        forgotten = len(self._id_of) - len(self._row_of)
        if forgotten < max(min_rows, 1) or forgotten < len(self._row_of):
            return
        self._generation += 1
        try:
            new_row = self._engine.compact()
            id_of: list[Id | None] = [None] * int(new_row.max(initial=-1) + 1)
            for old, new in enumerate(new_row.tolist()):
                if new >= 0 and old < len(self._id_of):
                    id_of[new] = self._id_of[old]
            self._row_of = {i: int(new_row[r]) for i, r in self._row_of.items()}
            self._id_of = id_of
        finally:
            self._generation += 1

    def save(self, path: str, ids: Sequence[Id], meta: dict[str, Any]) -> None:
        """Write the rows of ``ids`` (held texts, in this order) to ``path`` with ``meta``
        (JSON-serialisable), atomically: :meth:`load` reads them back. ``KeyError`` for an id
        not held. Call between writes (the caller's write lock held)."""
        rows = np.asarray([self._row_of[i] for i in ids], np.int64)
        extra = json.dumps({"policy": self._digest, "ids": list(ids), "meta": meta})
        self._engine.save(path, rows, extra.encode())

    @classmethod
    def load(
        cls,
        path: str,
        policy: Policy,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        spill_dir: str | None = None,
    ) -> tuple[KeptTexts, dict[str, Any]]:
        """The texts saved by :meth:`save` in ``path``, held in the order saved, and the saved
        ``meta``; raises as :func:`load_rows`."""
        kept = cls(policy, memory_budget, spill_dir)
        ids, meta = load_rows(kept._engine, path, policy)
        rows = list(range(len(ids)))
        kept._engine.keep(np.asarray(rows, np.int64))
        kept._id_of = [None] * len(ids)
        kept.commit(ids, rows)
        return kept, meta

    def _forget_rows(self, rows: Sequence[int]) -> None:
        if rows:
            self._engine.forget(np.asarray(rows, np.int64))

    def ids(self) -> list[Id | None]:
        """The id of each row, in row order (None: a forgotten or unnamed row)."""
        return list(self._id_of)

    def memory_bytes(self) -> int:
        """Bytes the engine holds in memory."""
        return int(self._engine.memory_bytes())
