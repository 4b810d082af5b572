"""Calibration: precision, recall and F1 of the two stages against the Hamming radius k and the
verifier threshold, on labelled pairs, with a plot, an HTML page and recommended settings.

Input is either labelled pairs (:func:`read_pairs`: JSONL lines ``{"a": str, "b": str,
"label": bool}``) or a corpus from which :func:`pairs_from_corpus` makes pairs: edited copies
(typos, deleted and inserted spans, swapped sentences, cut heads and tails, at random strengths)
and hard negatives (each text with its nearest other text by fingerprint), labelled by the usual
definition -- character-5-gram Jaccard of the normalised texts >= 0.8, computed exactly.

:func:`calibrate` computes, for every pair, the Hamming distance of the fingerprints and the score
of each verifier, then P/R/F1 for every ``k`` in 0..``max_k`` and every threshold in 0.50..1.00,
for SimHash alone and for SimHash + each verifier. The recommendation is, for the verifier with
the best F1, the smallest radius whose F1 is within 0.005 of the best (a smaller radius is
cheaper to search), separately for short and long texts when each group has enough positives.

Like seed 003's distance figure, the plot shows how the duplicates and the other pairs spread over
the Hamming distance, and what precision and recall each radius gives.

Cost: texts are cut to ``max_chars`` (20,000) characters before pairs are made (the Levenshtein
verifier is quadratic in a text's length: one 2 MB licence file took minutes); a longer HTML page
is first read as the policy reads it, by its main text, which is cut (not the markup, whose
first characters may hold no visible text at all); each distinct
text is prepared, sketched and split into terms once; the fingerprints, sketches and Jaccard
scores are computed in the core and the Levenshtein scores by rapidfuzz on every core, with
scores under 0.5 (the lowest threshold evaluated) reported as 0. ``progress(n)`` callbacks are
told of the pairs made and scored.
"""

from __future__ import annotations

import base64
import html
import json
import os
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from neardup._core import _sketch, _sketch_jaccard
from neardup.dedup import Policy
from neardup.htmltext import main_text
from neardup.io import counted
from neardup.verify import VERIFIERS, cosine_of_terms, term_counts

__all__ = [
    "Calibration",
    "LabelledPair",
    "calibrate",
    "check_labels",
    "inject_edits",
    "pairs_from_corpus",
    "plot",
    "read_pairs",
    "write_html",
]

THRESHOLDS = np.round(np.arange(0.50, 1.0001, 0.01), 2)
#: Characters of a corpus text used to make pairs (its head).
MAX_CHARS = 20_000
#: Pairs scored per step (progress is reported between steps).
_STEP = 64

ProgressFn = Callable[[int], None]


@dataclass(frozen=True)
class LabelledPair:
    """Two texts and whether they are near-duplicates."""

    a: str
    b: str
    label: bool


def read_pairs(path: str | os.PathLike[str]) -> list[LabelledPair]:
    """Labelled pairs from JSONL lines ``{"a": str, "b": str, "label": bool or 0/1}``.

    Raises ``ValueError`` naming the file and line of a bad record.
    """
    out: list[LabelledPair] = []
    p = os.fspath(path)
    with open(p, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{p}:{no}: invalid JSON: {e.msg}") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{p}:{no}: expected an object with a, b, label")
            a, b, label = rec.get("a"), rec.get("b"), rec.get("label")
            if not isinstance(a, str) or not isinstance(b, str):
                raise ValueError(f"{p}:{no}: fields 'a' and 'b' must be strings")
            if isinstance(label, bool) or label in (0, 1):
                out.append(LabelledPair(a, b, bool(label)))
            else:
                raise ValueError(
                    f"{p}:{no}: field 'label' must be true/false or 0/1, got {label!r}"
                )
    if not out:
        raise ValueError(f"{p}: no labelled pairs")
    return out


def check_labels(
    pairs: Sequence[LabelledPair], what: str | None = None, rule: str = "label true"
) -> None:
    """Raise ``ValueError`` unless ``pairs`` hold both near-duplicates and other pairs: without
    near-duplicates recall has nothing to count, without the others precision has nothing to
    count, and every radius and threshold would score F1 = 1 (a recommendation of nothing).
    The message names the pairs by ``what`` (default: "the N pairs") and says what makes a
    near-duplicate by ``rule``."""
    what = what or f"the {counted(len(pairs), 'pair')}"
    positives = sum(1 for p in pairs if p.label)
    if positives == 0:
        lack = f"none of {what} is a near-duplicate ({rule})"
    elif positives == len(pairs):
        lack = f"every one of {what} is a near-duplicate ({rule})"
    else:
        return
    raise ValueError(
        f"{lack}, so nothing can be calibrated: precision and recall need near-duplicates "
        "and other pairs"
    )


_SENT = re.compile(r"(?<=[。！？.!?;；])\s*")


def inject_edits(text: str, rng: random.Random, strength: float, donor: str = "") -> str:
    """An edited copy of ``text``: 1-3 random edits whose size grows with ``strength`` (0..1).

    Edits: character typos (substitutions, deletions, insertions), a deleted span, a span of
    ``donor`` inserted, two sentences swapped, the head or tail cut.
    """
    if not text:
        return text
    ops = ["typos", "delete", "insert", "swap", "cut"]
    for op in rng.sample(ops, rng.randint(1, 3)):
        n = len(text)
        size = max(1, int(n * strength * rng.uniform(0.02, 0.3)))
        if op == "typos":
            chars = list(text)
            for _ in range(max(1, int(n * strength * rng.uniform(0.005, 0.06)))):
                i = rng.randrange(len(chars)) if chars else 0
                kind = rng.randrange(3)
                if kind == 0 and chars:
                    chars[i] = rng.choice(chars)
                elif kind == 1 and chars:
                    del chars[i]
                else:
                    chars.insert(i, rng.choice(chars) if chars else "x")
            text = "".join(chars)
        elif op == "delete" and n > size:
            i = rng.randrange(n - size)
            text = text[:i] + text[i + size :]
        elif op == "insert":
            src = donor or text
            i = rng.randrange(max(1, len(src) - size))
            j = rng.randrange(n + 1)
            text = text[:j] + src[i : i + size] + text[j:]
        elif op == "swap":
            sent = [s for s in _SENT.split(text) if s]
            if len(sent) >= 2:
                i = rng.randrange(len(sent) - 1)
                sent[i], sent[i + 1] = sent[i + 1], sent[i]
                text = " ".join(sent) if " " in text else "".join(sent)
        elif op == "cut" and n > size:
            text = text[size:] if rng.random() < 0.5 else text[:-size]
    return text


class _Prepared:
    """Each distinct text prepared (and sketched, split into terms) once, by the policy."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._norms: dict[str, str] = {}
        self._sketches: dict[str, npt.NDArray[np.uint32]] = {}
        self._terms: dict[str, Any] = {}

    def norm(self, text: str) -> str:
        norm = self._norms.get(text)
        if norm is None:
            norm = self._norms[text] = self.policy.prepare(text)
        return norm

    def sketch(self, text: str) -> npt.NDArray[np.uint32]:
        sk = self._sketches.get(text)
        if sk is None:
            sk = self._sketches[text] = _sketch(self.norm(text), self.policy.shingle)
        return sk

    def terms(self, text: str) -> Any:
        terms = self._terms.get(text)
        if terms is None:
            terms = self._terms[text] = term_counts(self.norm(text))
        return terms

    def jaccard(self, a: str, b: str) -> float:
        return float(_sketch_jaccard(self.sketch(a), self.sketch(b)))


def cut_text(text: str, policy: Policy, max_chars: int) -> str:
    """``text`` cut to its first ``max_chars`` characters; a longer HTML page (as
    ``policy`` tells them) becomes its main text first (what the policy compares), and that is
    cut: cutting the markup could leave a head of scripts and styles and no text."""
    if len(text) > max_chars and policy.is_html(text):
        text = main_text(text)
    return text[:max_chars]


def pairs_from_corpus(
    texts: Sequence[str],
    *,
    copies: int = 1000,
    seed: int = 0,
    threshold: float = 0.8,
    policy: Policy | None = None,
    max_chars: int = MAX_CHARS,
    progress: ProgressFn | None = None,
) -> list[LabelledPair]:
    """Labelled pairs made from a corpus: ``copies`` edited copies plus hard negatives.

    Each pair is labelled by 5-gram Jaccard (after the policy's preparation) >= ``threshold``.
    Texts are cut to their first ``max_chars`` characters (a longer HTML page: of its main
    text, see :func:`cut_text`); ``progress(n)`` is told of the pairs
    made (``copies`` copies, then as many negatives, at most one per text).
    """
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies}")
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    policy = policy or Policy.default()
    texts = [c for c in (cut_text(t, policy, max_chars) for t in texts if t) if c.strip()]
    if len(texts) < 2:
        raise ValueError(f"the corpus needs at least 2 non-empty texts, got {len(texts)}")
    prepared = _Prepared(policy)
    rng = random.Random(seed)
    out: list[LabelledPair] = []
    for i in range(copies):
        a = rng.choice(texts)
        b = inject_edits(a, rng, rng.random(), donor=rng.choice(texts))
        out.append(LabelledPair(a, b, prepared.jaccard(a, b) >= threshold))
        if progress is not None and (i + 1) % _STEP == 0:
            progress(_STEP)
    if progress is not None and copies % _STEP:
        progress(copies % _STEP)
    # Hard negatives: each sampled text with its nearest other text by fingerprint.
    sample = rng.sample(range(len(texts)), min(len(texts), max(2, copies)))
    fps = policy.make_fingerprinter().fingerprint_many([prepared.norm(texts[i]) for i in sample])
    fps = np.asarray(fps, dtype=np.uint64)
    for x in range(len(sample)):
        d = _popcount(fps ^ fps[x])
        d[x] = 65
        y = int(np.argmin(d))
        a, b = texts[sample[x]], texts[sample[y]]
        out.append(LabelledPair(a, b, prepared.jaccard(a, b) >= threshold))
    if progress is not None:
        progress(len(sample))
    return out


def _popcount(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    bits = np.unpackbits(x.astype(np.uint64).view(np.uint8).reshape(-1, 8), axis=1)
    return np.asarray(bits.sum(axis=1), dtype=np.int64)


@dataclass
class Calibration:
    """Per-pair distances, verifier scores and labels, and the P/R/F1 grids built from them."""

    policy: Policy
    labels: npt.NDArray[np.bool_]
    distances: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int64]
    scores: dict[str, npt.NDArray[np.float64]]
    max_k: int = 32
    recommendation: dict[str, Any] = field(default_factory=dict)

    @property
    def ks(self) -> npt.NDArray[np.int64]:
        """The radii evaluated: 0..max_k."""
        return np.arange(self.max_k + 1)

    def prf(
        self, predicted: npt.NDArray[np.bool_], mask: npt.NDArray[np.bool_] | None = None
    ) -> tuple[float, float, float]:
        """Precision, recall, F1 of ``predicted`` (restricted to ``mask``)."""
        y = self.labels if mask is None else self.labels[mask]
        p = predicted if mask is None else predicted[mask]
        tp = int(np.count_nonzero(p & y))
        npred, npos = int(np.count_nonzero(p)), int(np.count_nonzero(y))
        prec = tp / npred if npred else 1.0
        rec = tp / npos if npos else 1.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        return prec, rec, f1

    def simhash_curve(self, mask: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.float64]:
        """Rows ``(k, P, R, F1)`` of SimHash alone (pairs within k are duplicates)."""
        return np.array([(k, *self.prf(self.distances <= k, mask)) for k in self.ks])

    def grid(
        self, verifier: str, mask: npt.NDArray[np.bool_] | None = None
    ) -> npt.NDArray[np.float64]:
        """F1 of SimHash + ``verifier`` as an array [k, threshold index]."""
        s = self.scores[verifier]
        out = np.zeros((self.ks.size, THRESHOLDS.size))
        for i, k in enumerate(self.ks):
            near = self.distances <= k
            for j, t in enumerate(THRESHOLDS):
                out[i, j] = self.prf(near & (s >= t), mask)[2]
        return out

    def best(
        self, verifier: str, mask: npt.NDArray[np.bool_] | None = None
    ) -> tuple[int, float, float, float, float]:
        """``(k, threshold, P, R, F1)``: the smallest k within 0.005 of the best F1."""
        g = self.grid(verifier, mask)
        top = float(g.max())
        k_idx = int(np.flatnonzero(g.max(axis=1) >= top - 0.005)[0])
        t_idx = int(np.argmax(g[k_idx]))
        k, t = int(self.ks[k_idx]), float(THRESHOLDS[t_idx])
        s = self.scores[verifier]
        p, r, f = self.prf((self.distances <= k) & (s >= t), mask)
        return k, t, p, r, f


def _score_pairs(
    pairs: Sequence[LabelledPair], policy: Policy, progress: ProgressFn | None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], dict[str, npt.NDArray[np.float64]]]:
    prepared = _Prepared(policy)
    prep_a = [prepared.norm(p.a) for p in pairs]
    prep_b = [prepared.norm(p.b) for p in pairs]
    fp = policy.make_fingerprinter()
    fa = np.asarray(fp.fingerprint_many(prep_a), dtype=np.uint64)
    fb = np.asarray(fp.fingerprint_many(prep_b), dtype=np.uint64)
    dist = _popcount(fa ^ fb)
    lengths = np.array([min(len(a), len(b)) for a, b in zip(prep_a, prep_b)], dtype=np.int64)
    n = len(pairs)
    scores = {name: np.zeros(n, dtype=np.float64) for name in ("jaccard", "levenshtein", "cosine")}
    for start in range(0, n, _STEP):
        step = range(start, min(n, start + _STEP))
        for i in step:
            a, b = pairs[i].a, pairs[i].b
            scores["jaccard"][i] = prepared.jaccard(a, b)
            scores["cosine"][i] = cosine_of_terms(prepared.terms(a), prepared.terms(b))
        # the texts are prepared (normalised) already: verify.levenshtein's own normalising
        # would change nothing
        scores["levenshtein"][step.start : step.stop] = process.cpdist(
            prep_a[step.start : step.stop],
            prep_b[step.start : step.stop],
            scorer=Levenshtein.normalized_similarity,
            score_cutoff=float(THRESHOLDS[0]),
            workers=-1,
        )
        if progress is not None:
            progress(len(step))
    return dist, lengths, scores


def calibrate(
    pairs: Iterable[LabelledPair],
    policy: Policy | None = None,
    max_k: int = 32,
    progress: ProgressFn | None = None,
) -> Calibration:
    """Score every pair and recommend settings (see the module docstring); ``progress(n)`` is
    told of the pairs scored. ``ValueError`` before any scoring where the pairs are not of both
    labels (:func:`check_labels`)."""
    pairs = list(pairs)
    if not pairs:
        raise ValueError("pairs is empty")
    if not 0 <= max_k <= 64:
        raise ValueError(f"max_k must be in 0..64, got {max_k}")
    check_labels(pairs)
    policy = policy or Policy.default()
    labels = np.array([p.label for p in pairs], dtype=bool)
    dist, lengths, scores = _score_pairs(pairs, policy, progress)
    cal = Calibration(policy, labels, dist, lengths, scores, max_k)
    cal.recommendation = _recommend(cal)
    return cal


def _recommend(cal: Calibration) -> dict[str, Any]:
    per = {v: cal.best(v) for v in VERIFIERS}
    # Best F1; ties go to the order of VERIFIERS (jaccard first: cheapest, no text needed).
    verifier = max(VERIFIERS, key=lambda v: (round(per[v][4], 4), -VERIFIERS.index(v)))
    k, t, p, r, f = per[verifier]
    short = cal.lengths <= cal.policy.short_chars
    k_short = k_long = k
    enough = 20
    if np.count_nonzero(cal.labels & short) >= enough:
        k_short = cal.best(verifier, short)[0]
    if np.count_nonzero(cal.labels & ~short) >= enough:
        k_long = cal.best(verifier, ~short)[0]
    k_short, k_long = max(k_short, 0), max(k_long, 0)
    policy = cal.policy.replace(verifier=verifier, threshold=t, k_short=k_short, k_long=k_long)
    final = cal.prf(
        (cal.distances <= np.where(short, k_short, k_long)) & (cal.scores[verifier] >= t)
    )
    plain = cal.simhash_curve()
    best_plain = plain[int(np.argmax(plain[:, 3]))]
    return {
        "policy": policy.to_dict(),
        "precision": final[0],
        "recall": final[1],
        "f1": final[2],
        "per_verifier": {
            v: {"k": b[0], "threshold": b[1], "precision": b[2], "recall": b[3], "f1": b[4]}
            for v, b in per.items()
        },
        "simhash_alone": {
            "k": int(best_plain[0]),
            "precision": float(best_plain[1]),
            "recall": float(best_plain[2]),
            "f1": float(best_plain[3]),
        },
        "pairs": int(cal.labels.size),
        "positives": int(np.count_nonzero(cal.labels)),
        "short_pairs": int(np.count_nonzero(short)),
    }


def plot(cal: Calibration, path: str | os.PathLike[str]) -> None:
    """Write the calibration figure (PNG): distance histogram, P/R vs k, F1 vs threshold."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "neardup calibrate needs matplotlib for its plot: pip install 'neardup[report]'"
        ) from e
    rec = cal.recommendation
    pol = rec["policy"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    bins = np.arange(0, cal.max_k + 2) - 0.5
    ax = axes[0]
    ax.hist(cal.distances[cal.labels], bins=bins, alpha=0.7, label="near-duplicates")
    ax.hist(cal.distances[~cal.labels], bins=bins, alpha=0.6, label="other pairs")
    ax.set_xlabel("Hamming distance of the 64-bit fingerprints")
    ax.set_ylabel("pairs")
    ax.set_title("Distance of labelled pairs")
    ax.legend()
    ax = axes[1]
    curve = cal.simhash_curve()
    ax.plot(curve[:, 0], curve[:, 1], "-o", ms=3, label="precision, SimHash alone")
    ax.plot(curve[:, 0], curve[:, 2], "-o", ms=3, label="recall, SimHash alone")
    v, t = pol["verifier"], pol["threshold"]
    two = np.array(
        [
            cal.prf((cal.distances <= k) & (cal.scores[v] >= t))
            for k in cal.ks  # type: ignore[misc]
        ]
    )
    ax.plot(cal.ks, two[:, 0], "--", label=f"precision, + {v} >= {t:.2f}")
    ax.plot(cal.ks, two[:, 1], "--", label=f"recall, + {v} >= {t:.2f}")
    ax.axvline(pol["k_long"], color="grey", lw=0.8)
    ax.set_xlabel("radius k")
    ax.set_ylim(0, 1.02)
    ax.set_title("Precision and recall against k")
    ax.legend(fontsize=8)
    ax = axes[2]
    k = max(pol["k_short"], pol["k_long"])
    for name in VERIFIERS:
        f1 = [cal.prf((cal.distances <= k) & (cal.scores[name] >= th))[2] for th in THRESHOLDS]
        ax.plot(THRESHOLDS, f1, label=name)
    ax.axvline(t, color="grey", lw=0.8)
    ax.set_xlabel("verifier threshold")
    ax.set_ylabel("F1")
    ax.set_title(f"F1 against the threshold (k = {k})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=110)
    plt.close(fig)


def how_to_use(policy: dict[str, Any]) -> str:
    """How to run with a recommended policy (``Policy.to_dict()``): ``neardup dedup`` flags
    where the command has the verifier, else the service or the API with ``policy.json``."""
    v, t = policy["verifier"], policy["threshold"]
    if v == "jaccard":
        return (
            f"neardup dedup INPUT -o OUTPUT --threshold {t:.2f} (its candidates are MinHash "
            "bands, which find a pair at the threshold with probability 0.999: the radius is "
            "that of neardup serve --policy policy.json and Deduplicator.check(text, k=...))"
        )
    return (
        f"neardup serve --data DIR --policy policy.json, or Deduplicator(policy="
        f"Policy.from_dict(json.load(open('policy.json')))): neardup dedup verifies by "
        f"jaccard only, not {v}"
    )


def write_html(
    cal: Calibration, path: str | os.PathLike[str], png: str | os.PathLike[str] | None = None
) -> None:
    """Write a self-contained HTML page: the figure (embedded), the tables, the recommendation."""
    rec = cal.recommendation
    img = ""
    if png is not None:
        with open(png, "rb") as fb:
            data = base64.b64encode(fb.read()).decode("ascii")
        img = f'<img alt="calibration figure" src="data:image/png;base64,{data}" width="100%">'
    rows = []
    curve = cal.simhash_curve()
    pol = rec["policy"]
    v, t = pol["verifier"], pol["threshold"]
    for k, p, r, f in curve:
        two = cal.prf((cal.distances <= k) & (cal.scores[v] >= t))
        rows.append(
            f"<tr><td>{int(k)}</td><td>{p:.3f}</td><td>{r:.3f}</td><td>{f:.3f}</td>"
            f"<td>{two[0]:.3f}</td><td>{two[1]:.3f}</td><td>{two[2]:.3f}</td></tr>"
        )
    per = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{b['k']}</td><td>{b['threshold']:.2f}</td>"
        f"<td>{b['precision']:.3f}</td><td>{b['recall']:.3f}</td><td>{b['f1']:.3f}</td></tr>"
        for name, b in rec["per_verifier"].items()
    )
    cmd = how_to_use(pol)
    alone = rec["simhash_alone"]
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>neardup calibration</title>
<style>body{{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}
pre{{background:#f4f4f4;padding:1em;overflow:auto}}</style></head><body>
<h1>neardup calibration</h1>
<p>{rec["pairs"]} labelled pairs, {rec["positives"]} near-duplicates,
{rec["short_pairs"]} with a text of at most {cal.policy.short_chars} characters.</p>
<h2>Recommendation</h2>
<p>Verifier <b>{html.escape(v)}</b> at threshold <b>{t:.2f}</b>, radius
<b>k_short = {pol["k_short"]}</b>, <b>k_long = {pol["k_long"]}</b>: precision
{rec["precision"]:.3f}, recall {rec["recall"]:.3f}, F1 {rec["f1"]:.3f}
(SimHash alone at its best k = {alone["k"]}: F1 {alone["f1"]:.3f}).</p>
<pre>{html.escape(json.dumps(pol, indent=2, sort_keys=True))}</pre>
<p>To use it: <code>{html.escape(cmd)}</code></p>
{img}
<h2>Best settings per verifier</h2>
<table><tr><th>verifier</th><th>k</th><th>threshold</th><th>P</th><th>R</th><th>F1</th></tr>
{per}</table>
<h2>Against the radius k</h2>
<table><tr><th>k</th><th>P SimHash</th><th>R SimHash</th><th>F1 SimHash</th>
<th>P + {html.escape(v)}</th><th>R + {html.escape(v)}</th><th>F1 + {html.escape(v)}</th></tr>
{"".join(rows)}</table>
</body></html>
"""
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        f.write(page)
