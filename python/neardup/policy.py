"""The settings of two-stage near-duplicate detection and the checks of its inputs.

- :class:`Policy`: the candidate stage (length-aware Hamming radius, fingerprint configuration)
  and the verification stage (verifier, threshold, shingle width). ``Policy.default()`` is the
  winner of ``benches/quality.py``; the Python API, the service and ``neardup dedup`` use it.
- :class:`Match`: a stored text found near a query.
- ``check_text``, ``check_texts``, ``check_batch``, ``check_k``: argument checks shared by every
  deduplicator (in-process, Redis) and the HTTP client.

``neardup.dedup`` re-exports all of these.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup._core import Fingerprinter
from neardup.htmltext import looks_like_html, main_text
from neardup.textstore import Id, Ids, Timestamps
from neardup.verify import VERIFIERS, normalise, normalise_many

__all__ = [
    "Match",
    "Policy",
    "check_batch",
    "check_k",
    "check_text",
    "check_texts",
    "fingerprinter_config",
    "match_order",
]


#: The texts at the head of each input that say whether a corpus holds HTML pages
#: (:meth:`Policy.has_pages`).
PAGE_PROBE_DOCS = 1024


@dataclass(frozen=True)
class Match:
    """A stored text found near the query.

    ``distance`` is the Hamming distance of the 64-bit fingerprints; ``similarity`` the verifier's
    score in [0, 1] (``None`` when the policy has no verifier).
    """

    id: Id
    distance: int
    similarity: float | None

    def to_dict(self) -> dict[str, Any]:
        """``{"id", "distance", "similarity"}`` (JSON-serialisable)."""
        return {"id": self.id, "distance": self.distance, "similarity": self.similarity}


_POLICY_VERIFIERS = (*VERIFIERS, "none")


@dataclass(frozen=True)
class Policy:
    """Settings of the candidate and verification stages.

    A text is *short* when its normalised length is <= ``short_chars``; its candidates are the
    stored texts whose fingerprint is within ``k_short`` bits (``k_long`` for long texts). Each
    candidate is then scored by ``verifier`` and kept when the score is >= ``threshold``.
    ``verifier="none"`` keeps every candidate (classic SimHash at radius k).

    ``fingerprint`` is the :class:`neardup.Fingerprinter` configuration; ``shingle`` the n-gram
    width of the Jaccard verifier. ``html``: read texts as HTML pages and keep their main visible
    text (``"auto"``: when a text starts like an HTML document). Both stages see
    :meth:`prepare` of each text. Serialise with :meth:`to_dict` / :meth:`from_dict`.
    """

    # Defaults measured by benches/quality.py (docs/quality.md): with the "default" fingerprint
    # preset, radius 11 finds >= 99.5 % of the 5-gram-Jaccard >= 0.8 pairs of long texts and
    # radius 13 >= 99.8 % of those of short (<= 140 chars) Chinese texts, whose few shingles
    # make the fingerprints noisier; the verifier removes what the wider radius lets in.
    k_short: int = 13
    k_long: int = 11
    short_chars: int = 200
    verifier: str = "jaccard"
    threshold: float = 0.8
    shingle: int = 5
    fingerprint: Mapping[str, Any] = field(default_factory=lambda: {"preset": "default"})
    html: bool | str = "auto"
    # The candidate stage of the decision (neardup.kept, neardup.corpus; docs/quality.md,
    # "Bounded work"): MinHash bands of the verifier's shingles, ``bands`` x ``rows``
    # min-hashes -- two texts of Jaccard J share a band with probability
    # 1 - (1 - J**rows)**bands. None: the shape of about 100 min-hashes with the most rows per
    # band that still finds a pair at the threshold with probability >= 0.999 (20 x 5 at 0.8:
    # 0.9996 at J = 0.8, 6e-6 at J = 0.05). Per text at most ``bucket_limit`` newest kept texts
    # are read per band and the ``verify_limit`` most promising verified. A band bucket read
    # full (``bucket_limit`` texts) holds text that a template family shares: a stored text
    # found in full buckets only is a candidate when ``full_bucket_quorum`` of them hold it
    # (near-copies share several bands; a family's other members mostly one), 1: any.
    bands: int | None = None
    rows: int | None = None
    bucket_limit: int = 64
    verify_limit: int = 32
    full_bucket_quorum: int = 2

    def __post_init__(self) -> None:
        for name in ("k_short", "k_long"):
            k = getattr(self, name)
            if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 64:
                raise ValueError(f"{name} must be an int in 0..64, got {k!r}")
        if isinstance(self.short_chars, bool) or not isinstance(self.short_chars, int):
            raise TypeError(f"short_chars must be int, got {type(self.short_chars).__name__}")
        if self.short_chars < 0:
            raise ValueError(f"short_chars must be >= 0, got {self.short_chars}")
        if self.verifier not in _POLICY_VERIFIERS:
            raise ValueError(
                f"verifier must be one of {', '.join(_POLICY_VERIFIERS)}; got {self.verifier!r}"
            )
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 <= t <= 1.0:
            raise ValueError(f"threshold must be a number in [0, 1], got {t!r}")
        s = self.shingle
        if isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= 64:
            raise ValueError(f"shingle must be an int in 1..64, got {s!r}")
        if not isinstance(self.fingerprint, Mapping):
            raise TypeError(
                f"fingerprint must be a dict of Fingerprinter settings, "
                f"got {type(self.fingerprint).__name__}"
            )
        limits = (("bands", 64), ("rows", 16), ("bucket_limit", 1 << 30), ("verify_limit", 1 << 30))
        for name, top in limits:
            v = getattr(self, name)
            if v is None and name in ("bands", "rows"):
                continue
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
                raise ValueError(f"{name} must be an int in 1..{top}, got {v!r}")
        q, bands = self.full_bucket_quorum, self.band_shape[0]
        if isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= bands:
            raise ValueError(
                f"full_bucket_quorum must be an int in 1..{bands} (the bands), got {q!r}"
            )
        if self.html not in (True, False, "auto"):
            raise ValueError(f"html must be True, False or 'auto', got {self.html!r}")
        object.__setattr__(self, "threshold", float(t))
        object.__setattr__(self, "fingerprint", dict(self.fingerprint))

    @classmethod
    def default(cls) -> Policy:
        """The winner of the quality benchmark (docs/quality.md)."""
        return cls()

    def is_html(self, text: str) -> bool:
        """Whether ``text`` is read as an HTML page under this policy."""
        return self.html is True or (self.html == "auto" and looks_like_html(text))

    def has_pages(self, inputs: Iterable[Iterable[str]]) -> bool:
        """Whether a corpus holds HTML pages, so that its boilerplate is learnt over all of it
        before anything is prepared: always with ``html=True``, never with ``False``; with
        ``"auto"``, when one of the first :data:`PAGE_PROBE_DOCS` texts of some input (each of
        ``inputs``: an input's texts, read that far only) is one, whatever the input's format
        (a page further down an input of text only is prepared with what its chunk teaches)."""
        if self.html is True:
            return True
        if self.html != "auto":
            return False
        return any(
            any(self.is_html(t) for t in itertools.islice(texts, PAGE_PROBE_DOCS))
            for texts in inputs
        )

    def prepare(self, text: str) -> str:
        """The text both stages see: the main visible text of an HTML page (see
        :func:`neardup.htmltext.main_text`), then :func:`neardup.verify.normalise`."""
        check_text(text)
        if self.is_html(text):
            text = main_text(text)
        return normalise(text)

    def prepare_many(self, texts: Iterable[str]) -> list[str]:
        """:meth:`prepare` of each text (normalised in one batch in the core)."""
        check_texts(texts)
        texts = list(texts)  # (read once: an iterator is taken whole)
        for t in texts:
            check_text(t, "texts[]")
        return normalise_many([main_text(t) if self.is_html(t) else t for t in texts])

    def fingerprint_many(
        self, fingerprinter: Fingerprinter, texts: Sequence[str]
    ) -> npt.NDArray[np.uint64]:
        """Fingerprints of ``texts`` exactly as the deduplicators compute them."""
        return np.asarray(fingerprinter.fingerprint_many(self.prepare_many(texts)), dtype=np.uint64)

    @property
    def band_shape(self) -> tuple[int, int]:
        """``(bands, rows)`` of the candidate stage: the fields when set, else the shape of at
        most 100 min-hashes (64 bands) with the most rows per band whose chance of finding a
        pair at the threshold, 1 - (1 - t**rows)**bands, is >= 0.999 (one row per band when
        none is)."""
        t = self.threshold
        shape = (64, 1)
        for rows in range(16, 0, -1):
            bands = min(64, 100 // rows)
            if 1.0 - (1.0 - t**rows) ** bands >= 0.999:
                shape = (bands, rows)
                break
        return (self.bands or shape[0], self.rows or shape[1])

    @property
    def k_max(self) -> int:
        """The widest candidate radius of the policy."""
        return max(self.k_short, self.k_long)

    def radius(self, length: int) -> int:
        """The candidate radius for a normalised text of ``length`` characters."""
        return self.k_short if length <= self.short_chars else self.k_long

    def replace(self, **changes: Any) -> Policy:
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict; :meth:`from_dict` rebuilds the policy."""
        d = dataclasses.asdict(self)
        d["fingerprint"] = dict(self.fingerprint)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Policy:
        """Rebuild a policy from :meth:`to_dict` output; missing keys take the defaults."""
        if not isinstance(d, Mapping):
            raise TypeError(f"policy must be a dict, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(
                f"unknown policy setting(s) {', '.join(map(repr, unknown))}; "
                f"valid: {', '.join(sorted(names))}"
            )
        return cls(**dict(d))

    def make_fingerprinter(self) -> Fingerprinter:
        """A :class:`neardup.Fingerprinter` built from ``self.fingerprint``."""
        # Fingerprinter(preset, **options) takes a partial setting (a preset plus overrides) as
        # well as a full ``Fingerprinter.config`` dict (every field is also an option).
        return check_fingerprinter(Fingerprinter(**dict(self.fingerprint)), "policy.fingerprint")


def check_fingerprinter(fp: Any, name: str = "fingerprinter") -> Any:
    """``fp``, when it makes the 64-bit fingerprints the index and the deduplicators hold
    (``ValueError`` naming ``name`` for another width)."""
    bits = getattr(fp, "bits", 64)
    if bits != 64:
        raise ValueError(
            f"{name} makes {bits}-bit fingerprints; the deduplicators index 64-bit ones (bits=64)"
        )
    return fp


def fingerprinter_config(fp: Fingerprinter) -> dict[str, Any] | None:
    """The ``config`` dict of a fingerprinter, or None when it has none."""
    cfg = getattr(fp, "config", None)
    return dict(cfg) if isinstance(cfg, Mapping) else None


def match_order(m: Match) -> tuple[float, int]:
    """Sort key of matches, best first: highest similarity, then smallest distance."""
    return (-(m.similarity if m.similarity is not None else 1.0), m.distance)


def check_text(text: object, name: str = "text") -> str:
    """``text`` when it is a ``str``; a :class:`TypeError` naming ``name`` otherwise."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be str, got {type(text).__name__}")
    return text


def check_k(k: int | None) -> int | None:
    """``k`` when it is None or an int in 0..64 (a numpy integer too, as the index takes it),
    as an int; a :class:`TypeError` for another type, a :class:`ValueError` for another int."""
    if k is None:
        return None
    if isinstance(k, np.integer):
        k = int(k)
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int in 0..64 or None, got {type(k).__name__} {k!r}")
    if not 0 <= k <= 64:
        raise ValueError(f"k must be an int in 0..64 or None, got {k!r}")
    return k


def check_texts(texts: object) -> None:
    """Refuse a single ``str`` where a sequence of texts is expected (it would be taken for one
    text per character)."""
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of str, not a single str")


def check_batch(ids: Ids, texts: Sequence[str], timestamps: Timestamps | None) -> Timestamps:
    """Check the shapes of a batch call (``add_many``, ``check_and_add_many``): ``texts`` a
    sequence, as many ids and timestamps as texts. Returns the timestamps (``None`` each when
    not given). Shared by :class:`Deduplicator`, the Redis backend and :class:`neardup.Client`."""
    check_texts(texts)
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"ids must be a sequence of ids, not a single {type(ids).__name__}")
    if len(ids) != len(texts):
        raise ValueError(f"ids has {len(ids)} items but texts has {len(texts)}")
    if timestamps is None:
        return [None] * len(texts)
    if len(timestamps) != len(texts):
        raise ValueError(f"timestamps has {len(timestamps)} items but texts has {len(texts)}")
    return timestamps
