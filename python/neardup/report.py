"""The ``neardup dedup --report`` pages: HTML with no scripts, fonts or images from elsewhere.

The main page (``FILE.html``) holds the run's summary; what was removed (exact and near copies
counted apart, characters and UTF-8 bytes, empty documents); the verifier's similarities with the
threshold marked and the SimHash distances (inline SVG); the pairs closest to the threshold and
the largest clusters, each removed document side by side with the one kept, differences marked.
Every cluster is listed, largest first, on pages of :data:`PAGE_CLUSTERS` in a folder beside it
(``FILE-clusters/``), one line for a cluster of exact copies; a page's size does not grow with the
corpus, and the listing stops at :data:`LISTED_CLUSTERS` clusters (``--clusters`` has them all).

Every text from the corpus is HTML-escaped before it is placed in a page.
"""

from __future__ import annotations

import difflib
import html
import math
import os
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from neardup.htmltext import main_text, main_text_fell_back_many
from neardup.policy import Policy

if TYPE_CHECKING:
    from neardup.corpus import CorpusResult

__all__ = [
    "LISTED_CLUSTERS",
    "PAGE_CLUSTERS",
    "Cluster",
    "Member",
    "ReportPlan",
    "diff_html",
    "histogram_svg",
    "measure",
    "pages_folder",
    "similarity_svg",
]

#: Clusters per page of the listing.
PAGE_CLUSTERS = 200
#: The listing shows at most this many clusters (the largest): 500 pages.
LISTED_CLUSTERS = 100_000

_DIFF_CHARS = 2500
# Latin words whole, whitespace runs, every other character (CJK) on its own: a diff at the
# granularity a reader sees in both scripts.
_TOKEN = re.compile(r"[0-9A-Za-z\u00c0-\u024f_]+|\s+|.", re.S)


_LARGEST = 12  # clusters shown with diffs on the main page
_LARGEST_MEMBERS = 6  # removed documents shown of each
_AUDIT_PAIRS = 20  # pairs closest to the threshold
_LINE_MEMBERS = 5  # removed documents named on a cluster's line
_SNIPPET = 120  # characters of the kept text on a cluster's line
_TEXT_CHARS = 4000  # characters kept of a text shown in a diff


@dataclass
class Member:
    """A removed document of a cluster: its id, text, distance and similarity to the kept one,
    and whether its text is the kept one's exactly."""

    id: Any
    text: str
    distance: int
    similarity: float = math.nan
    exact: bool = False


@dataclass
class Cluster:
    """A group of near-copies: the kept document and (some of) the removed ones; ``exact`` of
    the ``size - 1`` removed are exact copies."""

    kept_id: Any
    kept_text: str
    size: int
    members: list[Member] = field(default_factory=list)
    exact: int = 0


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _href(name: str) -> str:
    """A file name as a relative link: URL-quoted (a `#`, `?` or `%` in the report's name is part
    of the name), then escaped for the attribute."""
    return _esc(urllib.parse.quote(name))


def diff_html(kept: str, other: str) -> tuple[str, str]:
    """Two HTML fragments: ``kept`` with what ``other`` lacks in <del>, ``other`` with what it
    adds in <ins>. Texts longer than 2,500 characters are cut (marked with an ellipsis)."""
    cut_a = len(kept) > _DIFF_CHARS
    cut_b = len(other) > _DIFF_CHARS
    a = _TOKEN.findall(kept[:_DIFF_CHARS])
    b = _TOKEN.findall(other[:_DIFF_CHARS])
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    left: list[str] = []
    right: list[str] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        pa = _esc("".join(a[i1:i2]))
        pb = _esc("".join(b[j1:j2]))
        if op == "equal":
            left.append(pa)
            right.append(pb)
        else:
            if pa:
                left.append(f"<del>{pa}</del>")
            if pb:
                right.append(f"<ins>{pb}</ins>")
    if cut_a:
        left.append('<span class="cut">…</span>')
    if cut_b:
        right.append('<span class="cut">…</span>')
    return "".join(left), "".join(right)


# width, height, left, bottom and top padding of a chart (pixels)
_CHART = (640, 220, 56, 34, 28)


def _chart_frame(title: str, peak: int) -> list[str]:
    """The start of an inline SVG chart: its title, the x axis, the y axis's 0 and ``peak``."""
    width, height, pad_l, pad_b, pad_t = _CHART
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(title)}">',
        f'<text x="{pad_l}" y="16" class="t">{_esc(title)}</text>',
        f'<line x1="{pad_l}" y1="{height - pad_b}" x2="{width - 10}" y2="{height - pad_b}" '
        'stroke="#666"/>',
        f'<text x="4" y="{pad_t + 4}" class="a">{peak:,}</text>',
        f'<text x="4" y="{height - pad_b}" class="a">0</text>',
    ]


def histogram_svg(
    values: npt.ArrayLike,
    title: str,
    highlight: npt.ArrayLike | None = None,
    legend: tuple[str, str] = ("confirmed", "rejected"),
) -> str:
    """An inline SVG bar chart of integer ``values`` (one bar per value from 0 to the largest).

    With ``highlight`` (booleans, one per value), each bar is split into the highlighted part
    and the rest.
    """
    v = np.asarray(values, dtype=np.int64)
    if len(v) == 0:
        return f'<p class="empty">{_esc(title)}: no pairs.</p>'
    top = int(v.max())
    counts = np.bincount(v, minlength=top + 1)
    hi = None
    if highlight is not None:
        h = np.asarray(highlight, dtype=bool)
        hi = np.bincount(v[h], minlength=top + 1)
    width, height, pad_l, pad_b, pad_t = _CHART
    bars = top + 1
    bw = (width - pad_l - 10) / bars
    peak = max(1, int(counts.max()))
    scale = (height - pad_b - pad_t) / peak
    parts = _chart_frame(title, peak)
    step = max(1, bars // 16)
    for d in range(bars):
        x = pad_l + d * bw
        c = int(counts[d])
        h_all = c * scale
        y = height - pad_b - h_all
        if c:
            if hi is not None:
                h_hi = int(hi[d]) * scale
                parts.append(
                    f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(1.0, bw - 2):.1f}" '
                    f'height="{h_all - h_hi:.1f}" class="b2"><title>distance {d}: '
                    f"{c - int(hi[d]):,} {_esc(legend[1])}</title></rect>"
                )
                parts.append(
                    f'<rect x="{x + 1:.1f}" y="{y + h_all - h_hi:.1f}" '
                    f'width="{max(1.0, bw - 2):.1f}" height="{h_hi:.1f}" class="b1">'
                    f"<title>distance {d}: {int(hi[d]):,} {_esc(legend[0])}</title></rect>"
                )
            else:
                parts.append(
                    f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(1.0, bw - 2):.1f}" '
                    f'height="{h_all:.1f}" class="b1"><title>distance {d}: {c:,} pairs'
                    "</title></rect>"
                )
        if d % step == 0:
            parts.append(
                f'<text x="{x + bw / 2:.1f}" y="{height - pad_b + 14}" class="a" '
                f'text-anchor="middle">{d}</text>'
            )
    parts.append(
        f'<text x="{(width + pad_l) / 2:.0f}" y="{height - 4}" class="a" '
        'text-anchor="middle">Hamming distance (bits)</text>'
    )
    if hi is not None:
        parts.append(
            f'<rect x="{width - 190}" y="6" width="10" height="10" class="b1"/>'
            f'<text x="{width - 175}" y="15" class="a">{_esc(legend[0])}</text>'
            f'<rect x="{width - 100}" y="6" width="10" height="10" class="b2"/>'
            f'<text x="{width - 85}" y="15" class="a">{_esc(legend[1])}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def similarity_svg(counts: npt.ArrayLike, threshold: float, title: str) -> str:
    """An inline SVG bar chart of similarities in 100 bins of 0.01 (``counts[i]`` pairs in
    ``[i/100, (i+1)/100)``, the last bin holding 1.0), the threshold marked by a dashed line."""
    c = np.asarray(counts, dtype=np.int64)
    if c.size != 100:
        raise ValueError(f"counts must hold 100 bins, got {c.size}")
    width, height, pad_l, pad_b, pad_t = _CHART
    plot_w = width - pad_l - 10
    bw = plot_w / 100
    peak = max(1, int(c.max()))
    scale = (height - pad_b - pad_t) / peak
    parts = _chart_frame(title, peak)
    for i in range(100):
        n = int(c[i])
        if n:
            h = n * scale
            parts.append(
                f'<rect x="{pad_l + i * bw + 0.5:.1f}" y="{height - pad_b - h:.1f}" '
                f'width="{max(1.0, bw - 1):.1f}" height="{h:.1f}" class="b1"><title>'
                f"similarity {i / 100:.2f}-{(i + 1) / 100:.2f}: {n:,} pairs</title></rect>"
            )
    for tick in range(0, 11):
        parts.append(
            f'<text x="{pad_l + tick * 10 * bw:.1f}" y="{height - pad_b + 14}" class="a" '
            f'text-anchor="middle">{tick / 10:.1f}</text>'
        )
    x = pad_l + threshold * plot_w
    parts.append(
        f'<line class="threshold" x1="{x:.1f}" y1="{pad_t - 6}" x2="{x:.1f}" '
        f'y2="{height - pad_b}" stroke="#c0392b" stroke-width="2" stroke-dasharray="5,3"/>'
        f'<text x="{x - 4:.1f}" y="{pad_t + 6}" class="a thr" text-anchor="end">'
        f"threshold {threshold:.2f}</text>"
    )
    parts.append(
        f'<text x="{(width + pad_l) / 2:.0f}" y="{height - 4}" class="a" '
        'text-anchor="middle">verifier similarity (Jaccard of character shingles)</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI","Noto Sans","PingFang SC",
"Microsoft YaHei",sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table.s td,table.s th{padding:2px 12px 2px 0;text-align:left}table.s td.n{text-align:right}
svg .t{font-size:13px;font-weight:600}svg .a{font-size:11px;fill:#555}svg .thr{fill:#c0392b}
svg .b1{fill:#3b7dd8}svg .b2{fill:#d8a03b}
.cl{margin:1.2em 0;padding:.6em;border:1px solid #ddd;border-radius:4px}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:8px;margin:.4em 0}
.pair>div{white-space:pre-wrap;word-break:break-word;background:#fafafa;padding:6px;
border:1px solid #eee;font-size:13px;max-height:22em;overflow:auto}
.meta{color:#555;font-size:12px}del{background:#fdd;text-decoration:line-through}
ins{background:#dfd;text-decoration:none}.cut{color:#999}
ol.clusters{padding-left:3.5em}ol.clusters li{margin:.35em 0}
li.exact{color:#333}li.near table{font-size:12px;margin:.2em 0 .2em 1em}
li.near td{padding:0 10px 0 0}.snip{color:#666;font-style:italic}
nav.pages a,nav.pages b{margin-right:.5em}
"""


def _page(title: str, body: list[str]) -> str:
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_esc(title)}</title>",
            f"<style>{_CSS}</style></head><body>",
            *body,
            "</body></html>\n",
        ]
    )


def _table(rows: list[tuple[str, Any]]) -> str:
    out = []
    for key, value in rows:
        shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
        if isinstance(value, (list, tuple)):
            shown = ", ".join(map(str, value))
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        cls = ' class="n"' if numeric else ""
        out.append(f"<tr><th>{_esc(key)}</th><td{cls}>{_esc(shown)}</td></tr>")
    return f'<table class="s">{"".join(out)}</table>'


def _of(part: int, whole: int) -> str:
    pct = f" ({100 * part / whole:.1f} %)" if whole else ""
    return f"{part:,} of {whole:,}{pct}"


def _id(value: Any) -> str:
    """An id as shown: escaped, long ones cut (a page's size must not follow the ids')."""
    text = str(value)
    return _esc(text if len(text) <= 120 else text[:119] + "…")


def _similarity(value: float) -> str:
    return "" if math.isnan(value) else f", similarity {value:.3f}"


def _diff_block(kept_id: Any, kept_text: str, m: Member) -> list[str]:
    if m.exact:
        return [
            f'<p class="meta">removed <code>{_id(m.id)}</code>: exact copy of '
            f"<code>{_id(kept_id)}</code></p>"
        ]
    left, right = diff_html(kept_text, m.text)
    return [
        f'<p class="meta">kept <code>{_id(kept_id)}</code> (left) vs removed '
        f"<code>{_id(m.id)}</code> (right): distance {m.distance}{_similarity(m.similarity)}</p>",
        f'<div class="pair"><div>{left}</div><div>{right}</div></div>',
    ]


def _cluster_line(cluster: Cluster) -> str:
    """One cluster of the listing: one line when every removed document is an exact copy, else
    a line and a row per removed document named (at most a few)."""
    removed = cluster.size - 1
    more = removed - len(cluster.members)
    tail = f" and {more:,} more" if more > 0 else ""
    words = " ".join(cluster.kept_text[: 2 * _SNIPPET].split())
    snippet = words[:_SNIPPET]
    cut = "…" if len(cluster.kept_text) > len(snippet) else ""
    snip = f' <span class="snip">“{_esc(snippet)}{cut}”</span>'
    if cluster.exact == removed:
        names = ", ".join(f"<code>{_id(m.id)}</code>" for m in cluster.members)
        return (
            f'<li class="exact">kept <code>{_id(cluster.kept_id)}</code>: {removed:,} exact '
            f"{'copy' if removed == 1 else 'copies'} removed ({names}{tail}){snip}</li>"
        )
    rows = "".join(
        f"<tr><td><code>{_id(m.id)}</code></td><td>{'exact copy' if m.exact else 'near copy'}"
        f"</td><td>distance {m.distance}</td><td>{_similarity(m.similarity)[2:]}</td></tr>"
        for m in cluster.members
    )
    if more > 0:
        rows += f'<tr><td colspan="4" class="meta">… and {more:,} more</td></tr>'
    return (
        f'<li class="near">kept <code>{_id(cluster.kept_id)}</code>: {removed:,} removed, '
        f"{cluster.exact:,} exact and {removed - cluster.exact:,} near{snip}"
        f"<table>{rows}</table></li>"
    )


def _pages_nav(page: int, pages: int, main: str) -> str:
    """Links to the report and to the pages around this one (a bounded number of links)."""
    links = [f'<a href="../{_href(main)}">report</a>']
    shown = sorted({1, pages, *range(max(1, page - 5), min(pages, page + 5) + 1)})
    last = 0
    for p in shown:
        if p > last + 1:
            links.append("…")
        links.append(f"<b>{p}</b>" if p == page else f'<a href="{_page_name(p)}">{p}</a>')
        last = p
    if page < pages:
        links.append(f'<a href="{_page_name(page + 1)}" rel="next">next</a>')
    return f'<nav class="pages">{" ".join(links)}</nav>'


def _page_name(page: int) -> str:
    return f"page-{page:04d}.html"


def pages_folder(path: str) -> str:
    """The folder of the cluster pages of the report written at ``path``."""
    stem, ext = os.path.splitext(path)
    return (stem if ext.lower() in (".html", ".htm") else path) + "-clusters"


class ReportPlan:
    """What the report shows of a dedup run, decided from its result before the inputs are read
    again: the rows whose texts it needs (:attr:`needs`), given with :meth:`take` as the records
    are read, then :meth:`write`.

    ``kept``: the rows written out (``--empty drop`` leaves empty ones out); ``lengths``,
    ``nbytes``, ``digests``: per row, the text's characters, UTF-8 bytes and digest
    (:func:`measure`); ``fell_back``: pages whose main text is their whole visible text. A
    removed document is an *exact* copy when its text is the kept one's, character for
    character (same digest and length); a *near* copy otherwise.
    """

    def __init__(
        self,
        result: CorpusResult,
        kept: npt.NDArray[np.bool_],
        lengths: npt.NDArray[np.int64],
        nbytes: npt.NDArray[np.int64],
        digests: npt.NDArray[np.int64],
        policy: Policy,
        *,
        fell_back: int = 0,
        page_clusters: int = PAGE_CLUSTERS,
        listed_clusters: int = LISTED_CLUSTERS,
    ) -> None:
        self.page_clusters = page_clusters
        self.fell_back = fell_back
        self.result = result
        self.policy = policy
        self.kept = kept
        self.lengths = lengths
        self.nbytes = nbytes
        rep = result.representative
        n = rep.size
        rows = np.arange(n, dtype=np.int64)
        members = np.flatnonzero(rep != rows)
        # removed documents grouped by cluster (kept row), then by row
        by_cluster = np.lexsort((members, rep[members]))
        self._m_rows = members[by_cluster]
        m_rep = rep[self._m_rows]
        self._m_exact = (digests[self._m_rows] == digests[m_rep]) & (
            lengths[self._m_rows] == lengths[m_rep]
        )
        self.c_rep, self._c_start, self.c_removed = np.unique(
            m_rep, return_index=True, return_counts=True
        )
        if self.c_rep.size:
            self.c_exact = np.add.reduceat(self._m_exact.astype(np.int64), self._c_start)
        else:
            self.c_exact = np.zeros(0, np.int64)
        # clusters largest first (ties: the earlier kept row)
        self._c_order = np.lexsort((self.c_rep, -self.c_removed))
        self._listed = self._c_order[:listed_clusters]

        self._text_rows = np.zeros(n, dtype=bool)
        for c in self._c_order[:_LARGEST].tolist():
            self._text_rows[self.c_rep[c]] = True
            self._text_rows[self._members_of(c)[:_LARGEST_MEMBERS]] = True
        self._audit = self._closest_to_threshold()
        self._text_rows[self._audit] = True
        self._text_rows[rep[self._audit]] = True
        self._snippet_rows = np.zeros(n, dtype=bool)
        self._snippet_rows[self.c_rep[self._listed]] = True
        #: Rows whose record :meth:`take` wants.
        self.needs = self._text_rows | self._snippet_rows
        self._texts: dict[int, str] = {}

    def _members_of(self, c: int) -> npt.NDArray[np.int64]:
        start = int(self._c_start[c])
        return self._m_rows[start : start + int(self.c_removed[c])]

    def _closest_to_threshold(self) -> npt.NDArray[np.int64]:
        """The removed near copies the verifier was least sure of: lowest similarity first (with
        ``--verifier none``, the farthest in SimHash bits)."""
        near = self._m_rows[~self._m_exact]
        if self.policy.verifier == "none":
            key = -self.result.distance[near].astype(np.float64)
        else:
            key = self.result.similarity[near]
        return near[np.lexsort((near, key))][:_AUDIT_PAIRS]

    def take(self, row: int, text: str) -> None:
        """The text of a row of :attr:`needs` as read again (pages: their main text is shown,
        what was compared)."""
        if not self.needs[row]:
            return
        if self.policy.is_html(text):
            text = main_text(text)
        self._texts[row] = text[: _TEXT_CHARS if self._text_rows[row] else 2 * _SNIPPET]

    def _member(self, row: int, exact: bool, ids: dict[int, Any]) -> Member:
        return Member(
            id=ids.get(row, row),
            text=self._texts.get(row, ""),
            distance=int(self.result.distance[row]),
            similarity=float(self.result.similarity[row]),
            exact=exact,
        )

    def _cluster(self, c: int, shown: int, ids: dict[int, Any]) -> Cluster:
        start = int(self._c_start[c])
        members = self._members_of(c)[:shown].tolist()
        exact = self._m_exact[start : start + len(members)].tolist()
        r = int(self.c_rep[c])
        return Cluster(
            kept_id=ids.get(r, r),
            kept_text=self._texts.get(r, ""),
            size=int(self.c_removed[c]) + 1,
            members=[self._member(m, e, ids) for m, e in zip(members, exact)],
            exact=int(self.c_exact[c]),
        )

    def removed_counts(self) -> dict[str, int]:
        """Removed documents, characters and UTF-8 bytes: ``exact`` and ``near`` copies,
        ``empty`` (dropped with ``--empty drop``), ``reference`` (copies of reference documents,
        in no cluster), ``chars``, ``bytes`` and their totals."""
        removed = ~self.kept
        exact = int(self._m_exact.sum())
        empty = int((removed & self.result.empty).sum())
        return {
            "exact": exact,
            "near": int(self._m_rows.size) - exact,
            "empty": empty,
            "reference": int(removed.sum()) - int(self._m_rows.size) - empty,
            "chars": int(self.lengths[removed].sum()),
            "chars_total": int(self.lengths.sum()),
            "bytes": int(self.nbytes[removed].sum()),
            "bytes_total": int(self.nbytes.sum()),
        }

    def write(self, path: str, summary: dict[str, Any], ids: dict[int, Any]) -> None:
        """Write the main page at ``path`` and the cluster pages in :func:`pages_folder`
        (``ids``: row -> id of the rows of clusters)."""
        folder = pages_folder(path)
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):  # a former run's pages
            if re.fullmatch(r"page-\d{4,}\.html", name):
                os.remove(os.path.join(folder, name))
        listed = self._listed.tolist()
        per_page = self.page_clusters
        pages = max(1, math.ceil(len(listed) / per_page))
        main = os.path.basename(path)
        for p in range(pages):
            chunk = listed[p * per_page : (p + 1) * per_page]
            lines = [_cluster_line(self._cluster(c, _LINE_MEMBERS, ids)) for c in chunk]
            nav = _pages_nav(p + 1, pages, main)
            body = [
                f"<h1>Clusters, page {p + 1:,} of {pages:,}</h1>",
                nav,
                f'<ol class="clusters" start="{p * per_page + 1}">',
                *lines,
                "</ol>",
                nav,
            ]
            if not lines:
                body.insert(2, '<p class="empty">No near-duplicates were found.</p>')
            # (a lone surrogate, which a JSONL input may escape, is written as "?")
            page = os.path.join(folder, _page_name(p + 1))
            with open(page, "w", encoding="utf-8", errors="replace") as f:
                f.write(_page(f"neardup dedup report: clusters, page {p + 1}", body))
        with open(path, "w", encoding="utf-8", errors="replace") as f:
            f.write(self._main_page(summary, ids, os.path.basename(folder), pages))

    def _main_page(
        self, summary: dict[str, Any], ids: dict[int, Any], folder: str, pages: int
    ) -> str:
        result = self.result
        counts = self.removed_counts()
        made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        n = int(result.representative.size)
        n_empty = int(result.empty.sum())
        threshold = self.policy.threshold
        removed_rows = [
            ("documents read", n),
            ("removed", _of(n - int(self.kept.sum()), n)),
            ("exact copies removed (same text as the kept one)", counts["exact"]),
            ("near copies removed", counts["near"]),
            *(
                [("copies of reference documents removed (--against)", counts["reference"])]
                if counts["reference"]
                else []
            ),
            ("empty documents (no text to compare; never a copy)", n_empty),
            ("empty documents dropped (--empty drop)", counts["empty"]),
            ("pages whose main text fell back to all their visible text", self.fell_back),
            ("characters removed", _of(counts["chars"], counts["chars_total"])),
            ("bytes of text removed (UTF-8)", _of(counts["bytes"], counts["bytes_total"])),
            ("clusters", int(self.c_rep.size)),
            ("clusters of exact copies only", int((self.c_exact == self.c_removed).sum())),
        ]
        stats = result.stats
        failed = int(sum(stats.get("distance_failed", [])))
        passed = int(sum(stats.get("distance_passed", [])))
        out = [
            "<h1>neardup dedup report</h1>",
            f'<p class="meta">made {_esc(made)}</p>',
            '<section id="removed"><h2>What was removed</h2>',
            _table(removed_rows),
            "</section>",
            '<section id="similarity"><h2>Verifier similarity</h2>',
        ]
        if self.policy.verifier == "none":
            out.append(
                '<p class="empty">--verifier none: every candidate within the SimHash radius is '
                "a copy; no similarity is measured.</p>"
            )
        else:
            out.append(
                similarity_svg(
                    stats.get("similarity", [0] * 100),
                    threshold,
                    "Compared candidate pairs that passed, by similarity (not those compared "
                    "after a better match of the same document)",
                )
            )
            out.append(
                f'<p class="meta">{passed:,} compared pairs reached the threshold {threshold:.2f}; '
                f"{failed:,} fell below it (the verifier stops as soon as a pair cannot pass, so "
                f"their similarity is not measured); {int(stats.get('outranked', 0)):,} were "
                "compared only with the similarity of a better match of the same document, "
                f"which they did not reach; {int(stats.get('estimated_out', 0)):,} more "
                "candidates were estimated far below it and not compared.</p>"
            )
        compared = result.compared_distances
        out += [
            "</section>",
            '<section id="distances"><h2>Distances</h2>',
            histogram_svg(
                compared[0],
                "Compared candidate pairs by SimHash distance (not those outranked by a better "
                "match of the same document)",
                compared[1],
            ),
            histogram_svg(
                result.distance[self._m_rows], "Removed documents: distance to the kept one"
            ),
            "</section>",
            '<section id="audit"><h2>Closest to the threshold</h2>',
        ]
        if self.policy.verifier == "none":
            out.append('<p class="meta">The removed near copies farthest in SimHash bits.</p>')
        else:
            out.append(
                f'<p class="meta">The removed near copies least similar to the document kept '
                f"(threshold {threshold:.2f}): the pairs to read when choosing a threshold.</p>"
            )
        if not self._audit.size:
            out.append('<p class="empty">No near copies were removed.</p>')
        rep = result.representative
        for row in self._audit.tolist():
            r = int(rep[row])
            out += _diff_block(ids.get(r, r), self._texts.get(r, ""), self._member(row, False, ids))
        out += ["</section>", '<section id="largest"><h2>Largest clusters</h2>']
        if not self.c_rep.size:
            out.append('<p class="empty">No near-duplicates were found.</p>')
        for k, c in enumerate(self._c_order[:_LARGEST].tolist(), 1):
            cluster = self._cluster(c, _LARGEST_MEMBERS, ids)
            out.append('<div class="cl">')
            out.append(
                f"<h3>#{k}: {cluster.size:,} documents ({cluster.exact:,} exact copies), kept "
                f"<code>{_id(cluster.kept_id)}</code></h3>"
            )
            for m in cluster.members:
                out += _diff_block(cluster.kept_id, cluster.kept_text, m)
            if cluster.size - 1 > len(cluster.members):
                out.append(
                    f'<p class="meta">… and {cluster.size - 1 - len(cluster.members):,} more</p>'
                )
            out.append("</div>")
        listed = int(self._listed.size)
        out += [
            "</section>",
            '<section id="clusters"><h2>All clusters</h2>',
            f"<p>{listed:,} clusters, largest first, {self.page_clusters} a page: "
            f'<a href="{_href(folder)}/{_page_name(1)}">page 1</a>'
            + (
                f' … <a href="{_href(folder)}/{_page_name(pages)}">page {pages:,}</a>'
                if pages > 1
                else ""
            )
            + "</p>",
        ]
        if self.c_rep.size > listed:
            out.append(
                f'<p class="meta">{int(self.c_rep.size) - listed:,} smaller clusters are not '
                "listed (--clusters FILE writes every one).</p>"
            )
        out += ["</section>", '<section id="summary"><h2>Run</h2>', _table(list(summary.items()))]
        out.append("</section>")
        return _page("neardup dedup report", out)


def measure(texts: Sequence[str], policy: Policy) -> tuple[list[int], list[int], int]:
    """Per text, its UTF-8 bytes and a 64-bit digest that tells exact copies apart (Python's
    string hash: equal within a run, which is all the report compares); and how many of the
    texts are pages (by ``policy``) whose main text fell back to their whole visible text."""
    pages = [t for t in texts if policy.is_html(t)]
    fell_back = sum(main_text_fell_back_many(pages)) if pages else 0
    nbytes = [len(t.encode("utf-8", "surrogatepass")) for t in texts]
    return nbytes, [hash(t) for t in texts], fell_back
