"""The exact-similarity stage: decides whether a SimHash candidate is really a near-duplicate.

SimHash narrows millions of stored texts to a handful of candidates; this module scores each
candidate exactly. Three measures are offered:

``"jaccard"`` (default)
    Jaccard similarity of the sets of character n-grams (``shingle`` characters, default 5) of the
    normalised texts: ``|A & B| / |A | B|``. Computed on a :class:`Sketch`, the sorted distinct
    32-bit hashes of the n-grams. That is exact up to 32-bit hash collisions (two different
    n-grams of the two texts share a hash with probability about ``|A|*|B| / 2**32``, i.e. under
    0.6 % of pairs of 5 000-character texts gain one spurious shared n-gram).
``"levenshtein"``
    Normalised Levenshtein similarity ``1 - distance / max(len)`` of the normalised texts
    (rapidfuzz). Needs the texts themselves.
``"cosine"``
    Cosine of term-frequency vectors; terms are words for alphabetic scripts and character
    bigrams for Han/Kana/Hangul runs. Needs the texts themselves.

Normalisation (shared by the fingerprint input, the verifier and the ground truth of the quality
benchmark): Unicode NFKC, lower case, every run of whitespace collapsed to one space, stripped;
computed in the core (:func:`normalise`, :func:`normalise_many`), as are the batch sketches.

Memory/disk cost of what the verifier keeps per document: a Jaccard :class:`Sketch` is 4 bytes
per distinct n-gram, about ``4 * len(text)`` bytes (plus ~100 bytes of array header when held one
array per document; :func:`sketch_many` packs a whole batch into one array with 8-byte offsets).
The Levenshtein and cosine verifiers need the text (UTF-8 in :mod:`neardup.textstore`: 1 byte per
ASCII character, 3 per Chinese character).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import numpy.typing as npt
from rapidfuzz.distance import Levenshtein

from neardup._core import _normalise, _normalise_many, _sketch_packed

__all__ = [
    "VERIFIERS",
    "Sketch",
    "cosine",
    "cosine_of_terms",
    "jaccard",
    "jaccard_sketch",
    "levenshtein",
    "normalise",
    "normalise_many",
    "similarity",
    "sketch",
    "sketch_many",
    "shingles",
    "term_counts",
]

VERIFIERS = ("jaccard", "levenshtein", "cosine")

# Han, Hiragana, Katakana, Hangul: scripts written without spaces -> character bigrams as terms.
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W_]+")

# n-gram hash multiplier: the 32-bit golden ratio (odd).
_G = np.uint32(0x9E3779B1)


def normalise(text: str) -> str:
    """NFKC, lower case, whitespace runs collapsed to one space, stripped (in the core).

    Equal to ``" ".join(unicodedata.normalize("NFKC", text).lower().split())`` on every
    character Python 3.11's Unicode database knows, Greek final sigma included, but with the
    core's Unicode data, so the same on every Python version (tests/test_normalise.py). A lone
    surrogate (not Unicode: half of an emoji from a JSON ``\\ud83d`` escape) becomes U+FFFD.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    return _normalise(text)


def normalise_many(texts: Iterable[str]) -> list[str]:
    """:func:`normalise` of each text, with the GIL released (both cores for large batches)."""
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of str, not a single str")
    texts = list(texts)
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"texts[] must be str, got {type(t).__name__}")
    return _normalise_many(texts)


def shingles(norm: str, n: int = 5) -> set[str]:
    """The set of character n-grams of an already normalised text, as strings (exact).

    A non-empty text shorter than ``n`` has one shingle, itself; the empty text has none.
    """
    _check_n(n)
    if len(norm) <= n:
        return {norm} if norm else set()
    return {norm[i : i + n] for i in range(len(norm) - n + 1)}


@dataclass(frozen=True)
class Sketch:
    """Sorted distinct 32-bit hashes of the character n-grams of a normalised text."""

    hashes: npt.NDArray[np.uint32]
    length: int

    @property
    def nbytes(self) -> int:
        """Bytes held by the hash array."""
        return int(self.hashes.nbytes)


def _check_n(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 64:
        raise ValueError(f"shingle must be an int in 1..64, got {n!r}")


def _codepoints(norm: str) -> npt.NDArray[np.uint32]:
    # frombuffer gives a read-only view; callers only read it.
    return np.frombuffer(norm.encode("utf-32-le"), dtype=np.uint32)


def _window_hash(cp: npt.NDArray[np.uint32], n: int) -> npt.NDArray[np.uint32]:
    """32-bit hash of every window of ``n`` consecutive code points (len(cp) - n + 1 values).

    The polynomial ``sum(c[i] * G**(n-1-i)) + n`` modulo 2**32 with G odd (the 32-bit golden
    ratio): windows that differ in one character never collide, and other collisions are as rare
    as for a random 32-bit hash. Computed in place on uint32 arrays, it costs a few nanoseconds
    per character in numpy. Only equality matters to the Jaccard count, so no final mixing.
    """
    m = cp.size - n + 1
    with np.errstate(over="ignore"):
        h = cp[:m].copy()
        for j in range(1, n):
            h *= _G
            h += cp[j : j + m]
        h += np.uint32(n)
    return h


def _hash_short(norm: str) -> np.uint32:
    # A text shorter than n is one shingle: the hash of all its code points (the polynomial
    # adds the window width, so it is salted apart from the n-gram hashes).
    cp = _codepoints(norm)
    return np.uint32(_window_hash(cp, cp.size)[0])


def _sorted_unique(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    # np.unique goes through a hash table in numpy 2 and is several times slower than sort + mask.
    a = np.sort(a)
    if a.size > 1:
        a = a[np.concatenate(([True], a[1:] != a[:-1]))]
    return a


def sketch(norm: str, n: int = 5) -> Sketch:
    """The Jaccard sketch of an already normalised text (see :func:`normalise`)."""
    _check_n(n)
    if not norm:
        return Sketch(np.empty(0, dtype=np.uint32), 0)
    if len(norm) < n:
        h = np.array([_hash_short(norm)], dtype=np.uint32)
    else:
        h = _window_hash(_codepoints(norm), n)
    return Sketch(_sorted_unique(h), len(norm))


def sketch_many(
    norms: Sequence[str], n: int = 5
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
    """Sketches of many normalised texts packed as ``(offsets, hashes)``.

    Document ``i`` owns ``hashes[offsets[i]:offsets[i+1]]`` (sorted, distinct): the
    :func:`sketch` of each text, computed in the core (GIL released, both cores for large
    batches).
    """
    _check_n(n)
    if isinstance(norms, str):
        raise TypeError("norms must be a sequence of str, not a single str")
    return _sketch_packed(norms, n)


def jaccard_sketch(a: npt.NDArray[np.uint32], b: npt.NDArray[np.uint32]) -> float:
    """Jaccard similarity of two sorted distinct hash arrays (two empty texts: 1.0)."""
    if a.size == 0 and b.size == 0:
        return 1.0
    if a.size > b.size:
        a, b = b, a
    if a.size == 0:
        return 0.0
    # Count the hashes of the smaller set found in the larger one (both sorted, distinct).
    pos = np.searchsorted(b, a)
    pos[pos == b.size] = 0
    inter = int(np.count_nonzero(b[pos] == a))
    return inter / (a.size + b.size - inter)


def jaccard(a: str, b: str, n: int = 5) -> float:
    """Exact Jaccard similarity of the character n-gram sets of two texts (normalised here)."""
    sa, sb = shingles(normalise(a), n), shingles(normalise(b), n)
    if not sa and not sb:
        return 1.0
    inter = len(sa & sb)
    return inter / (len(sa) + len(sb) - inter)


def levenshtein(a: str, b: str) -> float:
    """Normalised Levenshtein similarity of two texts (normalised here), in [0, 1]."""
    return float(Levenshtein.normalized_similarity(normalise(a), normalise(b)))


def term_counts(norm: str) -> Counter[str]:
    """The terms of a normalised text and their counts, as :func:`cosine` compares them: words,
    and the character bigrams of Chinese/Japanese/Korean runs (a lone character alone)."""
    terms: Counter[str] = Counter()
    pos = 0
    for m in _CJK_RUN.finditer(norm):
        terms.update(_WORD.findall(norm[pos : m.start()]))
        run = m.group()
        if len(run) == 1:
            terms[run] += 1
        else:
            terms.update(run[i : i + 2] for i in range(len(run) - 1))
        pos = m.end()
    terms.update(_WORD.findall(norm[pos:]))
    return terms


def cosine(a: str, b: str) -> float:
    """Cosine of the term-frequency vectors of two texts (normalised here), in [0, 1]."""
    return cosine_of_terms(term_counts(normalise(a)), term_counts(normalise(b)))


def cosine_of_terms(ta: Counter[str], tb: Counter[str]) -> float:
    """Cosine of two term-frequency vectors (:func:`term_counts`), in [0, 1]."""
    if not ta or not tb:
        return 1.0 if not ta and not tb else 0.0
    dot = sum(c * tb.get(t, 0) for t, c in ta.items())
    na = math.sqrt(sum(c * c for c in ta.values()))
    nb = math.sqrt(sum(c * c for c in tb.values()))
    return dot / (na * nb)


def similarity(kind: str, shingle: int = 5) -> Callable[[str, str], float]:
    """The verifier function ``f(text_a, text_b) -> float`` named ``kind`` (see VERIFIERS)."""
    if kind == "jaccard":
        return lambda a, b: jaccard(a, b, shingle)
    if kind == "levenshtein":
        return levenshtein
    if kind == "cosine":
        return cosine
    raise ValueError(f"verifier must be one of {', '.join(VERIFIERS)}; got {kind!r}")
