"""The batch engine behind ``neardup dedup``: :class:`CorpusDeduper`.

It keeps only what the two stages need per document (the fingerprint and a compact sketch of the
5-grams), finds candidate pairs with one self-join of the fingerprints at the policy's radius,
verifies them in the core, and applies the keep rule (:func:`resolve_keep`, shared with the Spark
engine). The policy is :class:`neardup.dedup.Policy`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup._core import Fingerprinter, Index, sketch_jaccard_pairs_at_least
from neardup.dedup import Policy, check_text, check_texts
from neardup.htmltext import main_text
from neardup.verify import normalise_many, sketch_many

__all__ = ["CorpusDeduper", "CorpusResult", "SketchedChunk", "resolve_keep"]


def resolve_keep(
    rank: npt.NDArray[np.int64],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    distances: npt.NDArray[np.int64],
    similarities: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The keep rule over verified near pairs of ``rank.size`` rows.

    ``rank[i]`` is row ``i``'s place in the preference order (lower is kept first); pair ``j``
    joins rows ``a[j]`` and ``b[j]`` at Hamming distance ``distances[j]`` with similarity
    ``similarities[j]`` (NaN: not computed, counts as 1.0). Rows are visited in preference
    order; a row is dropped for its best kept earlier partner (highest similarity, then
    nearest, then earliest). Returns, per row, its representative (itself when kept) and the
    distance and similarity to it (0 and 1.0 when kept).
    """
    n = rank.size
    representative = np.arange(n, dtype=np.int64)
    distance = np.zeros(n, dtype=np.int64)
    similarity = np.ones(n, dtype=np.float64)
    # Orient each pair as (earlier, later) in preference order.
    swap = rank[a] > rank[b]
    early = np.where(swap, b, a)
    late = np.where(swap, a, b)
    score = np.nan_to_num(similarities, nan=1.0)
    # Visit the later rows in preference order; among their earlier partners, best first.
    visit = np.lexsort((rank[early], distances, -score, rank[late]))
    kept = np.ones(n, dtype=bool)
    late_l, early_l = late[visit].tolist(), early[visit].tolist()
    vd_l, vs_l = distances[visit].tolist(), similarities[visit].tolist()
    current, decided = -1, False
    for lt, er, dist, s in zip(late_l, early_l, vd_l, vs_l):
        if lt != current:
            current, decided = lt, False
        if decided or not kept[er]:
            continue
        kept[lt] = False
        decided = True
        representative[lt] = er
        distance[lt] = dist
        similarity[lt] = 1.0 if math.isnan(s) else s
    return representative, distance, similarity


@dataclass
class CorpusResult:
    """Outcome of :meth:`CorpusDeduper.result`; arrays indexed by row (feeding order).

    - ``representative[row]``: the row of the kept document this row duplicates (itself if kept).
    - ``distance[row]``: Hamming distance to the representative (0 if kept).
    - ``similarity[row]``: verifier score against the representative (1.0 if kept).
    - ``pairs_a, pairs_b, pairs_distance``: every candidate pair (row a < row b) within the
      policy's radius; ``pairs_similarity`` their verifier score (NaN without verifier, or when
      an upper bound rules the pair out before the exact merge: Jaccard <= smaller/larger, or
      the bound of 64-bit sketch signatures in ``_pair_jaccard``);
      ``pairs_verified`` whether the pair is a near-duplicate.
    """

    representative: npt.NDArray[np.int64]
    distance: npt.NDArray[np.int64]
    similarity: npt.NDArray[np.float64]
    pairs_a: npt.NDArray[np.int64]
    pairs_b: npt.NDArray[np.int64]
    pairs_distance: npt.NDArray[np.int64]
    pairs_similarity: npt.NDArray[np.float64]
    pairs_verified: npt.NDArray[np.bool_]

    @property
    def kept(self) -> npt.NDArray[np.bool_]:
        """True for rows that are kept (their own representative)."""
        return np.asarray(self.representative == np.arange(self.representative.size))

    @property
    def duplicates(self) -> int:
        """Number of rows dropped as near-duplicates."""
        return int(self.representative.size - np.count_nonzero(self.kept))


@dataclass
class SketchedChunk:
    """What :class:`CorpusDeduper` keeps of a chunk of texts (see :meth:`CorpusDeduper.sketch`):
    per text its fingerprint, prepared length and, for the Jaccard verifier, the number of its
    distinct shingle hashes (``counts``) and those hashes, concatenated (``hashes``)."""

    fingerprints: npt.NDArray[np.uint64]
    lengths: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64] | None
    hashes: npt.NDArray[np.uint32] | None


class CorpusDeduper:
    """Batch near-duplicate detection over a whole corpus, fed in chunks.

    ``feed(texts)`` fingerprints and sketches each chunk and keeps only those (8 bytes of
    fingerprint + 4 bytes per distinct shingle + 8 bytes of offset per document: memory grows
    with the number of documents and their length in shingles, never with the raw text kept).
    ``result(keep_order)`` finds candidate pairs with the index, verifies them, and picks one
    document to keep per group of near-duplicates: rows are visited in ``keep_order`` (input order
    when ``None``) and a row is dropped when it is a near-duplicate of an already kept row (its
    representative is the kept row it is most similar to). So every dropped row has a kept
    near-duplicate, and no kept row has a kept near-duplicate earlier in the order.
    """

    def __init__(
        self, policy: Policy | None = None, *, fingerprinter: Fingerprinter | None = None
    ) -> None:
        self.policy = policy if policy is not None else Policy.default()
        if not isinstance(self.policy, Policy):
            raise TypeError(f"policy must be a Policy, got {type(self.policy).__name__}")
        if self.policy.verifier not in ("jaccard", "none"):
            raise ValueError(
                f"CorpusDeduper supports verifier 'jaccard' or 'none' (it keeps sketches, not "
                f"texts); got {self.policy.verifier!r}"
            )
        self.fingerprinter = (
            fingerprinter if fingerprinter is not None else self.policy.make_fingerprinter()
        )
        self._fps: list[npt.NDArray[np.uint64]] = []
        self._lengths: list[npt.NDArray[np.int64]] = []
        self._counts: list[npt.NDArray[np.int64]] = []
        self._hashes: list[npt.NDArray[np.uint32]] = []
        self._n = 0
        self._boilerplate: set[str] = set()
        #: A line of main text found in at least this many HTML pages of a chunk (and 1 % of
        #: them) is site boilerplate and dropped.
        self.boilerplate_min_pages = 10

    def __len__(self) -> int:
        return self._n

    def feed(self, texts: Sequence[str]) -> None:
        """Add the next chunk of texts; they get rows ``len(self) .. len(self)+len(texts)-1``."""
        self.add_sketched(self.sketch(self.prepare(texts)))

    # feed() in three steps, for a caller that overlaps chunks (neardup dedup): prepare() in
    # chunk order (it learns the corpus's HTML boilerplate as it goes), sketch() of several
    # chunks at once in threads (the core and numpy release the GIL), add_sketched() in chunk
    # order.

    def prepare(self, texts: Sequence[str]) -> list[str]:
        """The texts as both stages see them (main text of pages, normalised); call in feeding
        order."""
        check_texts(texts)
        return self._prepare_chunk(texts)

    def sketch(self, norms: list[str]) -> SketchedChunk:
        """Fingerprints, lengths and shingle sketches of prepared texts (thread-safe)."""
        fps = np.asarray(self.fingerprinter.fingerprint_many(norms), dtype=np.uint64)
        lengths = np.fromiter(map(len, norms), np.int64, len(norms))
        counts = hashes = None
        if self.policy.verifier == "jaccard":
            offsets, hashes = sketch_many(norms, self.policy.shingle)
            counts = np.diff(offsets)
        return SketchedChunk(fps, lengths, counts, hashes)

    def add_sketched(self, chunk: SketchedChunk) -> None:
        """Add a chunk made by :meth:`sketch`; its rows follow those added so far."""
        if not chunk.fingerprints.size:
            return
        self._fps.append(chunk.fingerprints)
        self._lengths.append(chunk.lengths)
        if self.policy.verifier == "jaccard":
            if chunk.counts is None or chunk.hashes is None:
                raise ValueError("the chunk has no sketches but the policy's verifier needs them")
            self._counts.append(chunk.counts)
            self._hashes.append(chunk.hashes)
        self._n += int(chunk.fingerprints.size)

    def _prepare_chunk(self, texts: Sequence[str]) -> list[str]:
        for t in texts:
            check_text(t, "texts[]")
        pages = [i for i, t in enumerate(texts) if self.policy.is_html(t)]
        if not pages:
            return normalise_many(texts)
        # HTML: the main text of each page, then lines (blocks) that recur in many pages of the
        # chunk -- a site's footer or menu that the markup did not mark -- are dropped too.
        html = set(pages)
        norms = normalise_many(["" if i in html else t for i, t in enumerate(texts)])
        lines = {i: normalise_many(main_text(texts[i]).split("\n")) for i in pages}
        counts: Counter[str] = Counter()
        for i in pages:
            counts.update({x for x in lines[i] if x})
        limit = max(self.boilerplate_min_pages, int(0.01 * len(pages)))
        self._boilerplate.update(x for x, c in counts.items() if c >= limit)
        if len(self._boilerplate) > 100_000:  # bound the memory of what was learnt
            self._boilerplate = set(list(self._boilerplate)[-50_000:])
        for i in pages:
            full = [x for x in lines[i] if x]
            kept = [x for x in full if x not in self._boilerplate]
            # Never strip a page down to (almost) nothing: keep it whole instead.
            if sum(map(len, kept)) < 0.3 * sum(map(len, full)):
                kept = full
            norms[i] = " ".join(kept)
        return norms

    @property
    def fingerprints(self) -> npt.NDArray[np.uint64]:
        """The fingerprint of every row fed so far."""
        return np.concatenate(self._fps) if self._fps else np.empty(0, np.uint64)

    def memory_bytes(self) -> int:
        """Bytes held for the rows fed so far."""
        return int(
            sum(a.nbytes for a in self._fps)
            + sum(a.nbytes for a in self._lengths)
            + sum(a.nbytes for a in self._counts)
            + sum(a.nbytes for a in self._hashes)
        )

    def _candidate_pairs(
        self, fps: npt.NDArray[np.uint64], lengths: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        k = self.policy.k_max
        index = Index(k=k)
        index.add_many(np.arange(fps.size, dtype=np.int64), fps, 0.0)
        raw_a, raw_b, raw_d = index.near_pairs(k)
        a = np.asarray(raw_a, dtype=np.int64)
        b = np.asarray(raw_b, dtype=np.int64)
        d = np.asarray(raw_d, dtype=np.int64)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        if self.policy.k_short != self.policy.k_long:
            # A pair is a candidate when the check of either text would find the other.
            ra = np.where(
                lengths[lo] <= self.policy.short_chars, self.policy.k_short, self.policy.k_long
            )
            rb = np.where(
                lengths[hi] <= self.policy.short_chars, self.policy.k_short, self.policy.k_long
            )
            keep = d <= np.maximum(ra, rb)
            lo, hi, d = lo[keep], hi[keep], d[keep]
        return lo, hi, d

    def result(self, keep_order: npt.NDArray[np.integer[Any]] | None = None) -> CorpusResult:
        """Find the near-duplicate groups of every row fed so far (see the class docstring).

        ``keep_order``: a permutation of the rows, most preferred first (``None``: input order).
        """
        n = self._n
        if keep_order is None:
            order = np.arange(n, dtype=np.int64)
        else:
            order = np.asarray(keep_order)
            if order.ndim != 1 or order.size != n or not np.issubdtype(order.dtype, np.integer):
                raise ValueError(
                    f"keep_order must be a permutation of the {n} rows (1-D integer array)"
                )
            order = order.astype(np.int64)
            seen = np.zeros(n, dtype=bool)
            if n and (order.min() < 0 or order.max() >= n):
                raise ValueError(f"keep_order must be a permutation of 0..{n - 1}")
            seen[order] = True
            if not seen.all():
                raise ValueError(f"keep_order must be a permutation of 0..{n - 1}")
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n, dtype=np.int64)

        fps = self.fingerprints
        lengths = np.concatenate(self._lengths) if self._lengths else np.empty(0, np.int64)
        a, b, d = self._candidate_pairs(fps, lengths)
        if self.policy.verifier == "jaccard":
            sim = self._pair_jaccard(a, b)
            verified = sim >= self.policy.threshold
        else:
            sim = np.full(a.size, np.nan)
            verified = np.ones(a.size, dtype=bool)

        representative, distance, similarity = resolve_keep(
            rank, a[verified], b[verified], d[verified], sim[verified]
        )
        return CorpusResult(
            representative=representative,
            distance=distance,
            similarity=similarity,
            pairs_a=a,
            pairs_b=b,
            pairs_distance=d,
            pairs_similarity=sim,
            pairs_verified=verified,
        )

    def _pair_jaccard(
        self, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        counts = np.concatenate(self._counts) if self._counts else np.empty(0, np.int64)
        offsets = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        hashes = np.concatenate(self._hashes) if self._hashes else np.empty(0, np.uint32)
        # Pairs that cannot reach the threshold -- by their sizes, or by 64-bit signatures of
        # their sketches -- are not compared: their similarity is NaN (in the core, one pass).
        return sketch_jaccard_pairs_at_least(hashes, offsets, a, b, self.policy.threshold)
