"""The ``neardup dedup --report`` page: one self-contained HTML file (no scripts, fonts or images
from elsewhere) with the run's summary, histograms of distances (inline SVG) and the largest
clusters, each member shown side by side with the document that was kept, differences marked.

Every text from the corpus is HTML-escaped before it is placed in the page.
"""

from __future__ import annotations

import difflib
import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Cluster", "Member", "diff_html", "histogram_svg", "render_report", "write_report"]

_DIFF_CHARS = 2500
# Latin words whole, whitespace runs, every other character (CJK) on its own: a diff at the
# granularity a reader sees in both scripts.
_TOKEN = re.compile(r"[0-9A-Za-z\u00c0-\u024f_]+|\s+|.", re.S)


@dataclass
class Member:
    """A removed document of a cluster: its id, text, distance and similarity to the kept one."""

    id: Any
    text: str
    distance: int
    similarity: float = math.nan


@dataclass
class Cluster:
    """A group of near-copies: the kept document and (some of) the removed ones."""

    kept_id: Any
    kept_text: str
    size: int
    members: list[Member] = field(default_factory=list)


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


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
    width, height, pad_l, pad_b, pad_t = 640, 220, 56, 34, 28
    bars = top + 1
    bw = (width - pad_l - 10) / bars
    peak = max(1, int(counts.max()))
    scale = (height - pad_b - pad_t) / peak
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(title)}">',
        f'<text x="{pad_l}" y="16" class="t">{_esc(title)}</text>',
        f'<line x1="{pad_l}" y1="{height - pad_b}" x2="{width - 10}" y2="{height - pad_b}" '
        'stroke="#666"/>',
        f'<text x="4" y="{pad_t + 4}" class="a">{peak:,}</text>',
        f'<text x="4" y="{height - pad_b}" class="a">0</text>',
    ]
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


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI","Noto Sans","PingFang SC",
"Microsoft YaHei",sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table.s td,table.s th{padding:2px 12px 2px 0;text-align:left}table.s td.n{text-align:right}
svg .t{font-size:13px;font-weight:600}svg .a{font-size:11px;fill:#555}
svg .b1{fill:#3b7dd8}svg .b2{fill:#d8a03b}
.cl{margin:1.2em 0;padding:.6em;border:1px solid #ddd;border-radius:4px}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:8px;margin:.4em 0}
.pair>div{white-space:pre-wrap;word-break:break-word;background:#fafafa;padding:6px;
border:1px solid #eee;font-size:13px;max-height:22em;overflow:auto}
.meta{color:#555;font-size:12px}del{background:#fdd;text-decoration:line-through}
ins{background:#dfd;text-decoration:none}.cut{color:#999}
"""


def render_report(
    summary: dict[str, Any],
    pair_distances: npt.ArrayLike = (),
    pair_verified: npt.ArrayLike | None = None,
    member_distances: npt.ArrayLike = (),
    clusters: Sequence[Cluster] = (),
) -> str:
    """The report page as a string (see :func:`write_report`)."""
    rows = []
    for key, value in summary.items():
        shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
        if isinstance(value, (list, tuple)):
            shown = ", ".join(map(str, value))
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        cls = ' class="n"' if numeric else ""
        rows.append(f"<tr><th>{_esc(key)}</th><td{cls}>{_esc(shown)}</td></tr>")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>neardup dedup report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>neardup dedup report</h1>",
        f'<p class="meta">made {_esc(datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))}'
        "</p>",
        "<h2>Summary</h2>",
        f'<table class="s">{"".join(rows)}</table>',
        "<h2>Distances</h2>",
        histogram_svg(
            pair_distances,
            "Candidate pairs by SimHash distance",
            pair_verified,
        ),
        histogram_svg(member_distances, "Removed documents: distance to the kept one"),
        "<h2>Largest clusters</h2>",
    ]
    if not clusters:
        out.append('<p class="empty">No near-duplicates were found.</p>')
    for n, cluster in enumerate(clusters, 1):
        out.append('<div class="cl">')
        out.append(
            f"<h3>#{n}: {cluster.size:,} documents, kept <code>{_esc(cluster.kept_id)}</code></h3>"
        )
        for m in cluster.members:
            left, right = diff_html(cluster.kept_text, m.text)
            sim = "" if math.isnan(m.similarity) else f", similarity {m.similarity:.3f}"
            out.append(
                f'<p class="meta">kept <code>{_esc(cluster.kept_id)}</code> (left) vs removed '
                f"<code>{_esc(m.id)}</code> (right): distance {m.distance}{_esc(sim)}</p>"
            )
            out.append(f'<div class="pair"><div>{left}</div><div>{right}</div></div>')
        if cluster.size - 1 > len(cluster.members):
            out.append(
                f'<p class="meta">… and {cluster.size - 1 - len(cluster.members):,} more</p>'
            )
        out.append("</div>")
    out.append("</body></html>\n")
    return "\n".join(out)


def write_report(
    path: str,
    summary: dict[str, Any],
    pair_distances: npt.ArrayLike = (),
    pair_verified: npt.ArrayLike | None = None,
    member_distances: npt.ArrayLike = (),
    clusters: Sequence[Cluster] = (),
) -> None:
    """Write the self-contained HTML report to ``path``.

    ``summary``: name -> value rows shown first; ``pair_distances``: the distance of each
    candidate pair (``pair_verified``: which the verifier confirmed); ``member_distances``: each
    removed document's distance to the one kept; ``clusters``: the largest clusters to show.
    """
    page = render_report(summary, pair_distances, pair_verified, member_distances, clusters)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
