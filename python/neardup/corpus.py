"""The batch engine behind ``neardup dedup``: :class:`CorpusDeduper`.

Documents are fed in chunks: each is prepared (main text of pages, normalised), fingerprinted,
and handed to the core's :class:`neardup._core.NearEngine`, which keeps its shingle sketch (in
memory up to a budget, then in a temporary file) and its MinHash band keys. :meth:`result`
visits the documents in preference order and drops each one that passes the verifier against a
document kept before it, comparing it only with a bounded number of kept documents (the
policy's ``bucket_limit`` and ``verify_limit``): work per document does not grow with the
corpus, nor with the size of a template family (docs/quality.md, "Bounded work").
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup._core import Fingerprinter, IncompatibleIndexError, NearProbes
from neardup.htmltext import main_text
from neardup.kept import DEFAULT_MEMORY_BUDGET, engine_for, load_rows, spill_directory
from neardup.policy import Policy, check_fingerprinter, check_text, check_texts
from neardup.verify import normalise_many

__all__ = ["CorpusDeduper", "CorpusResult", "SketchedChunk", "check_order"]


#: Rows per step of :meth:`CorpusDeduper.result` (progress is reported between steps).
_STEP = 1 << 15


def check_order(order: npt.ArrayLike | None, n: int) -> npt.NDArray[np.int64]:
    """``order`` as an int64 permutation of ``0..n-1`` (``None``: input order)."""
    if order is None:
        return np.arange(n, dtype=np.int64)
    a = np.asarray(order)
    if a.ndim != 1 or a.size != n or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"keep_order must be a permutation of the {n} rows (1-D integer array)")
    a = a.astype(np.int64)
    if n and (a.min() < 0 or a.max() >= n or np.unique(a).size != n):
        raise ValueError(f"keep_order must be a permutation of 0..{n - 1}")
    return a


# The preparation of HTML pages, shared with neardup.spark (which learns the boilerplate lines
# of a corpus on the executors): a page's lines, the page count that makes a line boilerplate,
# and the page's text without them.


def page_lines(page: str) -> list[str]:
    """The normalised, non-empty lines (blocks) of a page's main text."""
    return [x for x in normalise_many(main_text(page).split("\n")) if x]


def boilerplate_limit(pages: int, min_pages: int) -> int:
    """In how many of ``pages`` pages a line must be to be boilerplate: ``min_pages`` and 1 %."""
    return max(min_pages, int(0.01 * pages))


def without_boilerplate(lines: Sequence[str], boilerplate: Callable[[str], bool]) -> str:
    """A page's prepared text: its ``lines`` (:func:`page_lines`) but the boilerplate ones,
    unless that strips it to under 30 % of its characters (then it stays whole)."""
    kept = [x for x in lines if not boilerplate(x)]
    if sum(map(len, kept)) < 0.3 * sum(map(len, lines)):
        kept = list(lines)
    return " ".join(kept)


@dataclass
class CorpusResult:
    """Outcome of :meth:`CorpusDeduper.result`; arrays indexed by row (feeding order).

    - ``representative[row]``: the row of the kept document this row duplicates (itself if kept,
      -1 if it duplicates a reference document: see ``reference``).
    - ``distance[row]``: Hamming distance to the representative (0 if kept).
    - ``similarity[row]``: verifier score against the representative (1.0 if kept).
    - ``empty[row]``: the row's prepared text is empty (nothing to compare: it is kept, is
      nobody's copy and has none).
    - ``pairs_a, pairs_b, pairs_distance, pairs_similarity``: the pair (representative, row) of
      each dropped row, the representative first.
    - ``stats``: counters of the run -- ``documents``, ``candidates`` (found in the band buckets
      or within the radius), ``compared`` (verified), ``capped`` (rows with more candidates than
      ``verify_limit``), ``buckets_cut``, ``unconfirmed`` (rows found in full buckets only,
      fewer than ``full_bucket_quorum`` of them: not candidates), ``empty`` (rows with no text:
      never copies),
      ``outranked`` (compared after a better match of the same row was found, only against
      its similarity -- a row needs its best match only -- and below it), and histograms of
      the other compared candidates: ``distance_passed`` / ``distance_failed`` (by SimHash
      distance, 65 bins) and ``similarity`` (100 bins of 0.01).
    """

    representative: npt.NDArray[np.int64]
    distance: npt.NDArray[np.int64]
    similarity: npt.NDArray[np.float64]
    pairs_a: npt.NDArray[np.int64]
    pairs_b: npt.NDArray[np.int64]
    pairs_distance: npt.NDArray[np.int64]
    pairs_similarity: npt.NDArray[np.float64]
    empty: npt.NDArray[np.bool_]
    stats: dict[str, Any] = field(default_factory=dict)
    #: Per row, the reference document (:meth:`CorpusDeduper.add_references`, by its index)
    #: that the row is a near-copy of, else -1; such a row is dropped and its
    #: ``representative`` is -1 (no kept row stands for it).
    reference: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    #: The verified (reference, row) pairs: from :meth:`CorpusDeduper.result` the reference each
    #: dropped row matched, from :meth:`CorpusDeduper.near_pairs` every reference each row
    #: passes against.
    reference_pairs_ref: npt.NDArray[np.int64] = field(
        default_factory=lambda: np.zeros(0, np.int64)
    )
    reference_pairs_row: npt.NDArray[np.int64] = field(
        default_factory=lambda: np.zeros(0, np.int64)
    )
    reference_pairs_distance: npt.NDArray[np.int64] = field(
        default_factory=lambda: np.zeros(0, np.int64)
    )
    reference_pairs_similarity: npt.NDArray[np.float64] = field(
        default_factory=lambda: np.zeros(0, np.float64)
    )

    @property
    def kept(self) -> npt.NDArray[np.bool_]:
        """True for rows that are kept (their own representative)."""
        return np.asarray(self.representative == np.arange(self.representative.size))

    @property
    def duplicates(self) -> int:
        """Number of rows dropped as near-duplicates."""
        return int(self.representative.size - np.count_nonzero(self.kept))

    @property
    def compared_distances(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """The SimHash distance of each compared candidate and whether it passed (from the
        histograms); the ``outranked`` ones (compared after a better match of the same row,
        only against its similarity) are not among them: whether they pass is not known."""
        bins = np.arange(65, dtype=np.int64)
        passed = np.asarray(self.stats.get("distance_passed", [0] * 65), dtype=np.int64)
        failed = np.asarray(self.stats.get("distance_failed", [0] * 65), dtype=np.int64)
        d = np.concatenate([np.repeat(bins, passed), np.repeat(bins, failed)])
        ok = np.concatenate([np.ones(passed.sum(), bool), np.zeros(failed.sum(), bool)])
        return d, ok


@dataclass
class SketchedChunk:
    """A chunk ready for :meth:`CorpusDeduper.add_sketched`: the prepared texts and what the
    engine keeps of them, fingerprints included (see :meth:`CorpusDeduper.sketch`)."""

    norms: list[str]
    probes: NearProbes


class CorpusDeduper:
    """Batch near-duplicate detection over a whole corpus, fed in chunks.

    ``feed(texts)`` prepares, fingerprints and sketches each chunk; the core keeps per document
    its fingerprint, length and band keys (~100 bytes) and its sketch (4 bytes per distinct
    shingle, in memory up to ``memory_budget`` bytes, then in an unnamed temporary file in
    ``spill_dir``: see :func:`spill_directory`). ``result(keep_order)`` visits the rows in
    ``keep_order`` (input order when ``None``) and drops a row when it is a near-duplicate of an
    already kept row (its representative is the kept row it is most similar to). So every
    dropped row has a kept near-duplicate, and no kept row has a kept near-duplicate earlier in
    the order among the candidates the policy's limits let through.

    Reference documents (:meth:`add_references`, before the corpus) are kept ahead of every
    row: a row that is a near-copy of one is dropped and names it (``CorpusResult.reference``);
    references are never rows of the result (rows count the corpus only).
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        fingerprinter: Fingerprinter | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        spill_dir: str | None = None,
    ) -> None:
        self.policy = policy if policy is not None else Policy.default()
        if not isinstance(self.policy, Policy):
            raise TypeError(f"policy must be a Policy, got {type(self.policy).__name__}")
        if self.policy.verifier not in ("jaccard", "none"):
            raise ValueError(
                f"CorpusDeduper supports verifier 'jaccard' or 'none' (it keeps sketches, not "
                f"texts); got {self.policy.verifier!r}"
            )
        if isinstance(memory_budget, bool) or not isinstance(memory_budget, int):
            raise TypeError(f"memory_budget must be int, got {type(memory_budget).__name__}")
        if memory_budget < 0:
            raise ValueError(f"memory_budget must be >= 0, got {memory_budget}")
        directory = spill_directory(spill_dir)
        if not os.path.isdir(directory):
            raise ValueError(f"spill_dir {directory!r} is not a directory")
        self.fingerprinter = (
            check_fingerprinter(fingerprinter)
            if fingerprinter is not None
            else self.policy.make_fingerprinter()
        )
        self._engine = engine_for(self.policy, memory_budget, directory)
        self._memory_budget, self._spill_dir = memory_budget, directory
        self._boilerplate: set[str] = set()
        #: A line of main text found in at least this many HTML pages (and 1 % of them) is site
        #: boilerplate and dropped: of the whole corpus when :meth:`learn_boilerplate` saw it
        #: first, else of each chunk as it comes.
        self.boilerplate_min_pages = 10
        # learn_boilerplate: per page, the sorted distinct hashes of its main-text lines; then,
        # at the first prepare, the hashes of the corpus's boilerplate lines.
        self._line_hashes: list[npt.NDArray[np.int64]] = []
        self._pages_learnt = 0
        self._learnt: set[int] | None = None
        #: Every text of the corpus, read once more from its start (None: it cannot be): called
        #: when the first page is to be prepared while no boilerplate was learnt over the whole
        #: corpus (a page past what :meth:`Policy.has_pages` probed, or among references), to
        #: learn it from them then, as :meth:`learn_boilerplate` does first, so that every page
        #: is prepared alike wherever it sits (the texts prepared before it hold no page).
        #: Without it, the chunk that holds a page teaches the boilerplate.
        self.corpus_texts: Callable[[], Iterable[str]] | None = None
        self._references = 0  # the engine's first rows are the reference documents
        #: Corpus rows visited in input order by :meth:`decide_fed` (None: no such decision
        #: under way).
        self._decided: int | None = None

    def __len__(self) -> int:
        """Rows of the corpus fed so far (reference documents not counted)."""
        return len(self._engine) - self._references

    @property
    def references(self) -> int:
        """Reference documents added so far."""
        return self._references

    def add_references(self, texts: Sequence[str]) -> None:
        """Add reference documents (e.g. an evaluation set, last month's crawl): they are kept
        before any row of the corpus and never dropped, and a row that is a near-copy of one is
        dropped in its favour. Call before the first :meth:`feed` (after
        :meth:`learn_boilerplate`, so that pages are prepared alike); references get indices
        ``references .. references+len(texts)-1``."""
        if len(self):
            raise ValueError("add_references must come before the corpus is fed")
        chunk = self.sketch(self.prepare(texts))
        self.add_sketched(chunk)
        self._references += len(chunk.norms)

    def load_references(self, path: str, ids: Sequence[Any], last_seq: int) -> None:
        """Add the reference documents saved in ``path`` (``neardup index build``: the rows of
        its text store, :func:`neardup.kept.saved_engine_path`) without preparing and sketching them
        again, as :meth:`add_references` of the store's texts would, provided the saved rows
        are those of the store as it is: ``ids`` in order, saved at sequence number
        ``last_seq``, no HTML page among them (a page's preparation depends on the corpus's
        boilerplate). Else ``IncompatibleIndexError`` (a damaged file: ``CorruptIndexError``)
        naming the file, and nothing is added. Only before anything else is added."""
        if len(self._engine):
            raise ValueError("load_references must come before any reference or row is added")
        engine = engine_for(self.policy, self._memory_budget, self._spill_dir)
        saved_ids, meta = load_rows(engine, path, self.policy)
        if meta.get("html_pages") != 0:
            why = "its texts may hold HTML pages (prepared with the corpus's boilerplate)"
        elif meta.get("last_seq") != last_seq or saved_ids != list(ids):
            why = "its text store was written to since it was saved"
        else:
            self._engine = engine
            self._references = len(saved_ids)
            return
        raise IncompatibleIndexError(f"saved engine {path}: not used: {why}")

    def feed(self, texts: Sequence[str]) -> None:
        """Add the next chunk of texts; they get rows ``len(self) .. len(self)+len(texts)-1``."""
        self.add_sketched(self.sketch(self.prepare(texts)))

    # feed() in three steps, for a caller that overlaps chunks (neardup dedup): prepare() in
    # chunk order (it learns the corpus's HTML boilerplate as it goes), sketch() of several
    # chunks at once in threads (the core releases the GIL), add_sketched() in chunk order.

    def prepare(self, texts: Sequence[str]) -> list[str]:
        """The texts as both stages see them (main text of pages, normalised); call in feeding
        order."""
        check_texts(texts)
        return self._prepare_chunk(texts)

    def sketch(self, norms: list[str]) -> SketchedChunk:
        """Fingerprints, shingle sketches and band keys of prepared texts (thread-safe: a
        thread of its own makes the next chunk while the engine adds and decides)."""
        fps = np.asarray(self.fingerprinter.fingerprint_many(norms), dtype=np.uint64)
        return SketchedChunk(norms, self._engine.probes(norms, fps))

    def add_sketched(self, chunk: SketchedChunk) -> None:
        """Add a chunk made by :meth:`sketch`; its rows follow those added so far."""
        if chunk.norms:
            self._engine.feed_probes(chunk.probes)

    def decide_fed(self) -> int:
        """Visit the rows fed since the last call, in input order, as :meth:`result` without a
        ``keep_order`` would: a caller that feeds the corpus in chunks overlaps the decision
        with reading the next ones (``neardup dedup`` runs it in a thread of its own), and
        ``result()`` then visits only the rows fed after the last call. Any other decision
        (``result`` with an order, :meth:`near_pairs`) starts over. Returns the rows visited."""
        n = len(self)
        if n == 0:
            return 0
        if self._decided is None:
            self._start_run(False)
            self._decided = 0
        rows = np.arange(self._decided + self._references, n + self._references, dtype=np.int64)
        if rows.size:
            self._engine.decide(rows, False)
        self._decided = n
        return int(rows.size)

    def learn_boilerplate(self, texts: Iterable[str]) -> None:
        """A first pass over the corpus, before any :meth:`feed`: counts the main-text lines of
        its HTML pages, so that what is boilerplate (a line in >= ``boilerplate_min_pages``
        pages and 1 % of them) is decided for the whole corpus at once and every page is
        prepared alike, whatever its place in the input. Without it, boilerplate is learnt
        chunk by chunk as pages are fed (a page read early keeps lines that later pages drop).
        Memory: 8 bytes per distinct line of each page, until the first feed."""
        if self._learnt is not None:
            raise ValueError("learn_boilerplate must come before the first feed or prepare")
        texts = list(texts)
        for t in texts:  # (every text checked before anything is learnt)
            check_text(t, "texts[]")
        self._learn(texts)

    def _learn(self, texts: Iterable[str]) -> None:
        """Counts the lines of the pages among ``texts`` (checked ``str``), one text at a time
        (a corpus read again is never held whole)."""
        for t in texts:
            if self.policy.is_html(t):
                lines = {hash(x) for x in page_lines(t)}
                self._line_hashes.append(np.fromiter(lines, np.int64, len(lines)))
                self._pages_learnt += 1

    def _learnt_boilerplate(self) -> set[int] | None:
        """The hashes of the corpus's boilerplate lines once learnt (decided at the first call
        after :meth:`learn_boilerplate`); None when nothing was learnt."""
        if self._learnt is None and self._pages_learnt:
            every = np.concatenate(self._line_hashes) if self._line_hashes else np.empty(0)
            lines, counts = np.unique(every, return_counts=True)
            limit = boilerplate_limit(self._pages_learnt, self.boilerplate_min_pages)
            self._learnt = set(lines[counts >= limit].tolist())
            self._line_hashes = []
        return self._learnt

    def _prepare_chunk(self, texts: Sequence[str]) -> list[str]:
        for t in texts:
            check_text(t, "texts[]")
        pages = [i for i, t in enumerate(texts) if self.policy.is_html(t)]
        if pages and self.corpus_texts is not None:
            read_again, self.corpus_texts = self.corpus_texts, None  # (read once)
            if not self._pages_learnt and not self._boilerplate:
                # (no page was prepared yet: learnt now, the boilerplate is the whole corpus's)
                self._learnt = None
                self._learn(check_text(t, "corpus_texts()[]") for t in read_again())
        learnt = self._learnt_boilerplate()
        if learnt is None:
            learnt = self._learnt = set()  # (too late to learn now)
        corpus_wide = self._pages_learnt > 0
        if not pages:
            return normalise_many(texts)
        # HTML: the main text of each page, then lines (blocks) that recur in many pages -- a
        # site's footer or menu that the markup did not mark -- are dropped too.
        html = set(pages)
        norms = normalise_many(["" if i in html else t for i, t in enumerate(texts)])
        lines = {i: page_lines(texts[i]) for i in pages}
        if not corpus_wide:
            counts: Counter[str] = Counter()
            for i in pages:
                counts.update(set(lines[i]))
            limit = boilerplate_limit(len(pages), self.boilerplate_min_pages)
            self._boilerplate.update(x for x, c in counts.items() if c >= limit)
            if len(self._boilerplate) > 100_000:  # bound the memory of what was learnt
                self._boilerplate = set(list(self._boilerplate)[-50_000:])
        for i in pages:
            if corpus_wide:
                norms[i] = without_boilerplate(lines[i], lambda x: hash(x) in learnt)
            else:
                norms[i] = without_boilerplate(lines[i], self._boilerplate.__contains__)
        return norms

    def memory_bytes(self) -> int:
        """Bytes held in memory for the rows fed so far and the last decision's tables."""
        return int(self._engine.memory_bytes())

    def spilled_bytes(self) -> int:
        """Bytes of sketches written to the temporary file."""
        return int(self._engine.spilled_bytes())

    def result(
        self,
        keep_order: npt.ArrayLike | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> CorpusResult:
        """Find the near-duplicates of every row fed so far (see the class docstring).

        ``keep_order``: a permutation of the rows, most preferred first (``None``: input order).
        ``progress(rows)`` is called after each step with the number of rows just visited.
        """
        order = check_order(keep_order, len(self))
        out = self._run(order, False, progress, streamed=keep_order is None)
        rep, ref = out["representative"], out["reference"]
        rows = np.flatnonzero((rep != np.arange(rep.size)) & (ref < 0))
        by_ref = np.flatnonzero(ref >= 0)
        return CorpusResult(
            representative=rep,
            distance=out["distance"],
            similarity=out["similarity"],
            pairs_a=rep[rows],
            pairs_b=rows.astype(np.int64),
            pairs_distance=out["distance"][rows],
            pairs_similarity=out["similarity"][rows],
            empty=out["empty"],
            stats=out["stats"],
            reference=ref,
            reference_pairs_ref=ref[by_ref],
            reference_pairs_row=by_ref.astype(np.int64),
            reference_pairs_distance=out["distance"][by_ref],
            reference_pairs_similarity=out["similarity"][by_ref],
        )

    def near_pairs(
        self,
        keep_order: npt.ArrayLike | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> CorpusResult:
        """Every verified pair among the rows fed so far (each row compared with all earlier
        rows of ``keep_order``, not only the kept, within the same limits); no row is dropped.
        Pairs are ``(earlier, later)`` in that order; each row's pairs with the reference
        documents are in ``reference_pairs_*`` (the references are visited first, and compared
        with each other too: that work grows with their number, their pairs are not kept)."""
        order = check_order(keep_order, len(self))
        out = self._run(order, True, progress)
        return CorpusResult(
            representative=out["representative"],
            distance=out["distance"],
            similarity=out["similarity"],
            pairs_a=out["pairs_a"],
            pairs_b=out["pairs_b"],
            pairs_distance=out["pairs_distance"],
            pairs_similarity=out["pairs_similarity"],
            empty=out["empty"],
            stats=out["stats"],
            reference=out["reference"],
            reference_pairs_ref=out["reference_pairs_ref"],
            reference_pairs_row=out["reference_pairs_row"],
            reference_pairs_distance=out["reference_pairs_distance"],
            reference_pairs_similarity=out["reference_pairs_similarity"],
        )

    def _start_run(self, all_pairs: bool) -> None:
        """A new decision: references first, kept unchecked (all-pairs runs keep every row they
        visit, so there they are visited, and their pairs with each other dropped below)."""
        self._engine.reset()
        self._decided = None
        refs = self._references
        if refs:
            first = np.arange(refs, dtype=np.int64)
            if all_pairs:
                self._engine.decide(first, True)
            else:
                self._engine.keep(first)

    def _run(
        self,
        order: npt.NDArray[np.int64],
        all_pairs: bool,
        progress: Callable[[int], None] | None,
        streamed: bool = False,
    ) -> dict[str, Any]:
        refs = self._references
        start = 0
        if streamed and self._decided is not None:
            start = self._decided  # (visited by decide_fed, in this order)
            if progress is not None and start:
                progress(start)
        else:
            self._start_run(all_pairs)
        for at in range(start, order.size, _STEP):
            step = order[at : at + _STEP]
            self._engine.decide(step + refs if refs else step, all_pairs)
            if progress is not None:
                progress(int(step.size))
        out: dict[str, Any] = self._engine.outcome()
        self._engine.reset()  # (the tables go; the outcome is copied out)
        self._decided = None
        return _corpus_rows(out, refs)


def _corpus_rows(out: dict[str, Any], refs: int) -> dict[str, Any]:
    """The engine's outcome over references then corpus, as the corpus's rows (0 = its first
    document) with each row's reference match apart (``reference``, ``reference_pairs_*``)."""
    rep = out["representative"][refs:]
    ref = np.where(rep < refs, rep, -1).astype(np.int64)
    out["reference"] = ref
    out["representative"] = np.where(rep < refs, -1, rep - refs).astype(np.int64)
    for name in ("distance", "similarity", "empty"):
        out[name] = out[name][refs:]
    a, b = out["pairs_a"], out["pairs_b"]
    with_ref = (a < refs) & (b >= refs)
    inside = a >= refs
    for name in ("distance", "similarity"):
        out[f"reference_pairs_{name}"] = out[f"pairs_{name}"][with_ref]
        out[f"pairs_{name}"] = out[f"pairs_{name}"][inside]
    out["reference_pairs_ref"] = a[with_ref].astype(np.int64)
    out["reference_pairs_row"] = (b[with_ref] - refs).astype(np.int64)
    out["pairs_a"] = (a[inside] - refs).astype(np.int64)
    out["pairs_b"] = (b[inside] - refs).astype(np.int64)
    if refs:
        out["stats"]["documents"] = int(rep.size)
    return out
