"""Labelled near-duplicate sets built from real text shipped by Debian packages, plus noise.

Reused by the quality, fingerprint, dedup and service benchmarks. Nothing here is text written
for the project: documents come from files installed by ``scripts/setup-bench.sh``:

- long English: the reStructuredText sources of the Python documentation (python3-doc,
  ``/usr/share/doc/python3.11/html/_sources``), cut at paragraph boundaries into 600-4000 chars;
- long Chinese: the Debian Reference in Chinese (debian-reference-zh-cn) and the Chinese manual
  pages (manpages-zh), cut the same way into 200-1500 chars;
- short Chinese (<= 140 chars): Chinese fortunes, Tang and Song poems (fortunes-zh) and sentences
  of the Debian Reference;
- HTML: articles of the long sets wrapped in the page templates of three sites whose boilerplate
  (navigation menus, "related" link lists, footers) is made of real strings: section titles of
  the Debian Handbook / Python docs / Debian Reference and the packages' copyright files.

Copies get realistic noise (:func:`add_noise`): typos, punctuation and full/half-width changes,
reordered sentences, added/removed headers and footers, Traditional/Simplified swaps (opencc).

Ground truth (:func:`exact_pairs`): character 5-gram Jaccard >= 0.8 after NFKC, lower case and
whitespace collapse (of the article's visible text for HTML), computed exactly: shingles are
interned to integer ids (no hashing), and candidate pairs come from the prefix filter (ordering
shingles by rarity, two sets with Jaccard >= t share a shingle among the first
``|A| - ceil(t*|A|) + 1`` of each), which provably contains every pair above the threshold.

Usage::

    from corpus import build_set, SETS
    s = build_set("zh-short", n=2000, seed=1)
    s.texts        # what a deduplicator sees (HTML markup for the html set)
    s.truth_pairs  # {(i, j): jaccard} for every pair i < j with jaccard >= 0.8
"""

from __future__ import annotations

import glob
import gzip
import html
import math
import os
import random
import re
import unicodedata
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Callable

import numpy as np

SETS = ("en-long", "zh-long", "zh-short", "html")
THRESHOLD = 0.8
SHINGLE = 5

PY_SOURCES = "/usr/share/doc/python3.11/html/_sources"
DEBREF_DIR = "/usr/share/debian-reference"
MAN_ZH = "/usr/share/man/zh_CN"
FORTUNES = "/usr/share/games/fortunes"
HANDBOOK = "/usr/share/doc/debian-handbook/html/en-US"
HANDBOOK_ZH = "/usr/share/doc/debian-handbook/html/zh-CN"

_WS = re.compile(r"\s+")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class MissingCorpusError(FileNotFoundError):
    """A Debian package that ships the text is not installed (run scripts/setup-bench.sh)."""


def _need(path: str, package: str) -> None:
    if not os.path.exists(path):
        raise MissingCorpusError(
            f"{path} not found: install the Debian package {package} (scripts/setup-bench.sh)"
        )


def normalise(text: str) -> str:
    """NFKC, lower case, whitespace runs collapsed (the ground-truth normalisation)."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


# ---------------------------------------------------------------------------------------------
# Loaders of real text


def _paragraph_chunks(text: str, lo: int, hi: int) -> list[str]:
    """Cut ``text`` at blank lines into chunks of lo..hi characters (longer paragraphs cut)."""
    paras = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    out: list[str] = []
    cur = ""
    for p in paras:
        while len(p) > hi:
            out.append(p[:hi])
            p = p[hi:]
        if cur and len(cur) + len(p) + 2 > hi:
            if len(cur) >= lo:
                out.append(cur)
            cur = ""
        cur = f"{cur}\n\n{p}" if cur else p
    if len(cur) >= lo:
        out.append(cur)
    return out


def _dedup_exact(docs: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for d in docs:
        key = normalise(d)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


@cache
def english_long() -> tuple[str, ...]:
    """Chunks (600-3000 chars) of the Python documentation sources."""
    _need(PY_SOURCES, "python3-doc")
    docs: list[str] = []
    for path in sorted(glob.glob(f"{PY_SOURCES}/**/*.txt", recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as f:
            docs.extend(_paragraph_chunks(f.read(), 600, 3000))
    return tuple(_dedup_exact(docs))


_TROFF_LINE = re.compile(r"^\.(?:\\\"|[A-Za-z]{1,3}\b)\s?(.*)$")
_TROFF_ESC = re.compile(r"\\f[BIRP]|\\\(..|\\[-e&|^]|\\s[+-]?\d")


_BLOCK_END = re.compile(r"</(?:p|div|h[1-6]|li|pre|tr|table|section|dd|dt)>", re.I)
_TAG = re.compile(r"<[^>]+>")
_SCRIPT = re.compile(r"<(script|style|head)\b.*?</\1>", re.I | re.S)


def _strip_tags(markup: str) -> str:
    # Good enough for the well-formed DocBook output of the handbook: block ends become blank
    # lines (paragraph boundaries), other tags vanish.
    text = _SCRIPT.sub("", markup)
    text = _BLOCK_END.sub("\n\n", text)
    text = html.unescape(_TAG.sub("", text))
    return re.sub(r"[ \t]+", " ", text)


def _man_text(troff: str) -> str:
    lines = []
    for line in troff.splitlines():
        if line.startswith('.\\"') or line.startswith(".de") or line == "..":
            continue
        m = _TROFF_LINE.match(line)
        if m:
            line = m.group(1).strip('"')
            if not line:
                lines.append("")
                continue
        lines.append(_TROFF_ESC.sub("", line))
    return "\n".join(lines)


@cache
def chinese_long() -> tuple[str, ...]:
    """Chunks (200-1500 chars) of the Chinese Debian Reference, Debian Handbook and man pages."""
    ref = f"{DEBREF_DIR}/debian-reference.zh-cn.txt.gz"
    _need(ref, "debian-reference-zh-cn")
    _need(MAN_ZH, "manpages-zh")
    docs: list[str] = []
    with gzip.open(ref, "rt", encoding="utf-8", errors="replace") as f:
        docs.extend(_paragraph_chunks(f.read(), 200, 1500))
    for path in sorted(glob.glob(f"{MAN_ZH}/man*/*.gz")):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            docs.extend(_paragraph_chunks(_man_text(f.read()), 200, 1500))
    _need(HANDBOOK_ZH, "debian-handbook")
    for path in sorted(glob.glob(f"{HANDBOOK_ZH}/*.html")):
        with open(path, encoding="utf-8", errors="replace") as f:
            docs.extend(_paragraph_chunks(_strip_tags(f.read()), 200, 1500))
    han = re.compile(r"[\u4e00-\u9fff]")
    # Keep chunks that are mostly Chinese (the man pages have untranslated option lists).
    docs = [d for d in docs if len(han.findall(d)) >= 0.25 * len(d)]
    return tuple(_dedup_exact(docs))


@cache
def chinese_short() -> tuple[str, ...]:
    """Texts of at most 140 characters: fortunes, Tang/Song poems, Debian Reference sentences."""
    _need(f"{FORTUNES}/chinese", "fortunes-zh")
    docs: list[str] = []
    for name in ("chinese", "tang300", "song100"):
        with open(f"{FORTUNES}/{name}", encoding="utf-8", errors="replace") as f:
            for entry in f.read().split("\n%\n"):
                entry = _ANSI.sub("", entry).strip()
                if 20 <= len(entry) <= 140:
                    docs.append(entry)
    # Sentences of the reference, grouped to 40..140 chars (microblog-like).
    for chunk in chinese_long():
        sent = [s for s in re.split(r"(?<=[。！？])", chunk.replace("\n", "")) if s.strip()]
        cur = ""
        for s in sent:
            s = _WS.sub(" ", s).strip()
            if len(cur) + len(s) > 140:
                if len(cur) >= 40:
                    docs.append(cur)
                cur = ""
            cur += s
        if 40 <= len(cur) <= 140:
            docs.append(cur)
    return tuple(_dedup_exact([d for d in docs if len(d) <= 140]))


# ---------------------------------------------------------------------------------------------
# Noise


_FULLWIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}
_HALFWIDTH = {v: k for k, v in _FULLWIDTH.items()}
_ZH_PUNCT = {"，": ",", "。": ".", "：": ":", "；": ";", "！": "!", "？": "?", "（": "(", "）": ")"}
_EN_PUNCT_SWAP = {",": ";", ".": "!", ";": ",", ":": " -", "!": ".", "?": "."}
_SENT = re.compile(r"(?<=[。！？.!?])\s*")


@lru_cache(maxsize=2)
def _opencc(direction: str) -> Callable[[str], str]:
    import opencc  # opencc-python-reimplemented

    return opencc.OpenCC(direction).convert  # type: ignore[no-any-return]


def _typos(text: str, rng: random.Random, rate: float) -> str:
    chars = list(text)
    out: list[str] = []
    i = 0
    while i < len(chars):
        c = chars[i]
        if not c.isspace() and rng.random() < rate:
            op = rng.randrange(4)
            if op == 0:
                out.append(rng.choice(chars))  # substitution by a character of the text
            elif op == 1:
                pass  # deletion
            elif op == 2:
                out.extend((c, rng.choice(chars)))  # insertion
            elif i + 1 < len(chars):
                out.extend((chars[i + 1], c))  # transposition
                i += 1
            else:
                out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _punct(text: str, rng: random.Random, rate: float) -> str:
    out = []
    for c in text:
        if rng.random() < rate:
            if c in _ZH_PUNCT:
                c = _ZH_PUNCT[c] if rng.random() < 0.5 else ""
            elif c in _EN_PUNCT_SWAP:
                c = _EN_PUNCT_SWAP[c] if rng.random() < 0.5 else ""
        out.append(c)
    return "".join(out)


def _width(text: str, rng: random.Random) -> str:
    # Full-width <-> half-width of ASCII (NFKC undoes it: the copy stays a near-duplicate).
    table = _FULLWIDTH if rng.random() < 0.5 else _HALFWIDTH
    return "".join(table.get(c, c) if rng.random() < 0.7 else c for c in text)


def _sentences(text: str) -> list[str]:
    return [s for s in _SENT.split(text) if s]


def _reorder(text: str, rng: random.Random, swaps: int) -> str:
    sent = _sentences(text)
    if len(sent) < 3:
        return text
    for _ in range(swaps):
        i = rng.randrange(len(sent) - 1)
        sent[i], sent[i + 1] = sent[i + 1], sent[i]
    sep = "" if _is_cjk(text) else " "
    return sep.join(sent)


def _is_cjk(text: str) -> bool:
    han = sum(1 for c in text[:400] if "\u4e00" <= c <= "\u9fff")
    return han > 0.2 * min(len(text), 400)


def _header_footer(text: str, rng: random.Random, donor: str, frac: float) -> str:
    # Add a header and/or footer taken from another real document, or cut the first/last
    # sentences: the typical edits of re-posting and scraping.
    size = max(1, int(len(text) * frac))
    mode = rng.randrange(3)
    if mode == 0:
        start = rng.randrange(max(1, len(donor) - size))
        extra = donor[start : start + size]
        return f"{extra}\n{text}" if rng.random() < 0.5 else f"{text}\n{extra}"
    if mode == 1:
        return text[size:] if rng.random() < 0.5 else text[:-size]
    return text[size // 2 :][: max(1, len(text) - size)]


def _ts_swap(text: str, rng: random.Random, portion: float) -> str:
    conv = _opencc("s2t" if rng.random() < 0.8 else "t2s")
    if portion >= 1.0:
        return conv(text)
    n = len(text)
    a = rng.randrange(max(1, int(n * (1 - portion))))
    b = a + int(n * portion)
    return text[:a] + conv(text[a:b]) + text[b:]


def add_noise(text: str, rng: random.Random, donor: str, strength: float) -> str:
    """A noisy copy of ``text``: 1-3 random edits whose size grows with ``strength`` (0..1)."""
    ops = ["typos", "punct", "width", "reorder", "header", "ts"]
    if not _is_cjk(text):
        ops.remove("ts")
    chosen = rng.sample(ops, rng.randint(1, 3))
    for op in chosen:
        if op == "typos":
            text = _typos(text, rng, 0.002 + 0.05 * strength * rng.random())
        elif op == "punct":
            text = _punct(text, rng, 0.2 + 0.8 * rng.random())
        elif op == "width":
            text = _width(text, rng)
        elif op == "reorder":
            text = _reorder(text, rng, 1 + int(4 * strength * rng.random()))
        elif op == "header":
            text = _header_footer(text, rng, donor, 0.02 + 0.3 * strength * rng.random())
        else:
            text = _ts_swap(text, rng, min(1.0, 0.05 + strength * rng.random()))
    return text


# ---------------------------------------------------------------------------------------------
# HTML pages


@cache
def _site_strings() -> dict[str, tuple[list[str], str]]:
    """Per site: (navigation labels, footer text), taken from real files."""
    sites: dict[str, tuple[list[str], str]] = {}
    _need(HANDBOOK, "debian-handbook")
    titles: list[str] = []
    for path in sorted(glob.glob(f"{HANDBOOK}/*.html"))[:200]:
        with open(path, encoding="utf-8", errors="replace") as f:
            m = re.search(r"<title>(.*?)</title>", f.read(), re.S)
        if m:
            titles.append(html.unescape(_WS.sub(" ", m.group(1))).strip())
    sites["handbook"] = (titles, _copyright("debian-handbook"))
    py_titles: list[str] = []
    for path in sorted(glob.glob(f"{PY_SOURCES}/library/*.txt"))[:300]:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith(("..", "=", "*")):
                    py_titles.append(line[:60])
                    break
    sites["pydocs"] = (py_titles, _copyright("python3-doc"))
    ref_titles: list[str] = []
    with gzip.open(
        f"{DEBREF_DIR}/debian-reference.zh-cn.txt.gz", "rt", encoding="utf-8", errors="replace"
    ) as f:
        for line in f:
            m = re.match(r"\s+(\d+\.\d+\.\s+\S.*)$", line)
            if m:
                ref_titles.append(m.group(1).strip()[:60])
            if len(ref_titles) >= 300:
                break
    sites["debref"] = (ref_titles, _copyright("debian-reference-zh-cn"))
    sites["plain"] = (titles[::-1] + ref_titles[::2], _copyright("fortunes-zh"))
    return sites


def _copyright(package: str) -> str:
    path = f"/usr/share/doc/{package}/copyright"
    _need(path, package)
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    # A footer-sized excerpt of the licence text.
    return _WS.sub(" ", text[:400])


def _links(rng: random.Random, labels: list[str], count: int) -> str:
    picks = rng.sample(labels, min(count, len(labels)))
    return "".join(
        f'<li><a href="/{zlib.crc32(p.encode()) % 99991}.html">{html.escape(p)}</a></li>'
        for p in picks
    )


def html_page(site: str, article: str, rng: random.Random) -> str:
    """An HTML page of ``site`` ("handbook", "pydocs", "debref", "plain") carrying ``article``.

    The templates differ per site (semantic <main>/<article>/<nav>/<footer> tags or div soup) and
    per page (random subsets and order of navigation and related links).
    """
    labels, footer = _site_strings()[site]
    title = html.escape(article.strip().split("\n", 1)[0][:60])
    body = "".join(f"<p>{html.escape(p.strip())}</p>" for p in article.split("\n\n") if p.strip())
    nav = _links(rng, labels, rng.randint(15, 40))
    related = _links(rng, labels, rng.randint(5, 15))
    head = f"<head><title>{title}</title><style>body{{margin:0}}</style></head>"
    script = "<script>var _track = {page: 1};</script>"
    if site == "handbook":
        return (
            f"<!DOCTYPE html><html>{head}<body><header><nav><ul>{nav}</ul></nav></header>"
            f"<main><article><h1>{title}</h1>{body}</article></main>"
            f"<aside><h2>Related</h2><ul>{related}</ul></aside>"
            f"<footer><p>{html.escape(footer)}</p></footer>{script}</body></html>"
        )
    if site == "pydocs":
        return (
            f"<html>{head}<body><div class='related'><ul>{nav}</ul></div>"
            f"<div class='document'><div class='body' role='main'><h1>{title}</h1>{body}</div>"
            f"</div><div class='sphinxsidebar'><h3>Navigation</h3><ul>{related}</ul></div>"
            f"<div class='footer'>{html.escape(footer)}</div>{script}</body></html>"
        )
    if site == "plain":
        # Div soup with meaningless class names: only the link density tells the menus apart,
        # and the footer is a plain paragraph.
        return (
            f"<html>{head}<body><div class='w1'><div class='c3'>{nav}</div>"
            f"<div class='c7'><h2>{title}</h2>{body}</div>"
            f"<div class='c9'><div>{related}</div><p>{html.escape(footer)}</p></div></div>"
            f"{script}</body></html>"
        )
    return (
        f"<html>{head}<body><table><tr><td class='navheader'><ul>{nav}</ul></td></tr></table>"
        f"<div class='content'><h2>{title}</h2>{body}</div>"
        f"<div class='navfooter'><ul>{related}</ul><p>{html.escape(footer)}</p></div>"
        f"{script}</body></html>"
    )


# ---------------------------------------------------------------------------------------------
# Exact ground truth


def exact_pairs(
    texts: Sequence[str], threshold: float = THRESHOLD, n: int = SHINGLE
) -> dict[tuple[int, int], float]:
    """Every pair ``(i, j)``, i < j, whose character-n-gram Jaccard is >= ``threshold``.

    ``texts`` are normalised here. Exact: shingles are interned (no hash collisions) and the
    prefix filter only skips pairs that cannot reach the threshold.
    """
    vocab: dict[str, int] = {}
    sets: list[np.ndarray] = []
    for t in texts:
        norm = normalise(t)
        if len(norm) <= n:
            grams = {norm} if norm else set()
        else:
            grams = {norm[i : i + n] for i in range(len(norm) - n + 1)}
        ids = np.fromiter((vocab.setdefault(g, len(vocab)) for g in grams), np.int64, len(grams))
        sets.append(np.sort(ids))
    df = np.zeros(len(vocab), dtype=np.int64)
    for s in sets:
        df[s] += 1
    # Global order: rarest shingles first (ties by id) -> small inverted lists for the prefixes.
    order_rank = np.empty(len(vocab), dtype=np.int64)
    order_rank[np.lexsort((np.arange(len(vocab)), df))] = np.arange(len(vocab))
    postings: dict[int, list[int]] = {}
    sizes = np.array([s.size for s in sets], dtype=np.int64)
    cands: set[tuple[int, int]] = set()
    for doc, s in enumerate(sets):
        if s.size == 0:
            continue
        ranked = np.sort(order_rank[s])
        prefix = s.size - math.ceil(threshold * s.size - 1e-9) + 1
        for tok in ranked[:prefix].tolist():
            lst = postings.setdefault(tok, [])
            for other in lst:
                cands.add((other, doc))
            lst.append(doc)
    out: dict[tuple[int, int], float] = {}
    for i, j in cands:
        a, b = sets[i], sets[j]
        lo, hi = min(a.size, b.size), max(a.size, b.size)
        if lo < threshold * hi - 1e-9:  # length filter: J <= |small| / |large|
            continue
        if a.size > b.size:
            a, b = b, a
        pos = np.minimum(np.searchsorted(b, a), b.size - 1)
        inter = int(np.count_nonzero(b[pos] == a))
        jac = inter / (a.size + b.size - inter)
        if jac >= threshold:
            out[(i, j)] = jac
    # Two empty texts are identical: Jaccard 1 by convention.
    empty = np.flatnonzero(sizes == 0).tolist()
    for x in range(len(empty)):
        for y in range(x + 1, len(empty)):
            out[(empty[x], empty[y])] = 1.0
    return out


def jaccard_exact(a: str, b: str, n: int = SHINGLE) -> float:
    """Exact n-gram Jaccard of two texts (ground-truth definition, slow: for checks)."""

    def grams(t: str) -> set[str]:
        t = normalise(t)
        return (
            {t[i : i + n] for i in range(len(t) - n + 1)} if len(t) > n else ({t} if t else set())
        )

    x, y = grams(a), grams(b)
    if not x and not y:
        return 1.0
    return len(x & y) / len(x | y)


# ---------------------------------------------------------------------------------------------
# Labelled sets


@dataclass
class LabelledSet:
    """Documents plus exact ground truth.

    ``texts``: what a deduplicator sees. ``truth_texts``: what the ground truth is computed on
    (the article text for HTML pages, else ``texts``). ``origin[i]``: the base document that
    text ``i`` is (a copy of). ``truth_pairs``: ``{(i, j): jaccard}`` for i < j at >= 0.8.
    """

    name: str
    texts: list[str]
    truth_texts: list[str]
    origin: list[int]
    truth_pairs: dict[tuple[int, int], float] = field(default_factory=dict)

    @property
    def chars(self) -> int:
        """Total characters of ``texts``."""
        return sum(len(t) for t in self.texts)


def _pool(name: str) -> tuple[str, ...]:
    if name == "en-long":
        return english_long()
    if name == "zh-long":
        return chinese_long()
    if name == "zh-short":
        return chinese_short()
    raise ValueError(f"unknown pool {name!r}")


def build_set(name: str, n: int = 2000, seed: int = 0, copy_fraction: float = 0.35) -> LabelledSet:
    """The labelled set ``name`` (one of SETS) with ``n`` documents, deterministic in ``seed``.

    About ``copy_fraction`` of the documents are noisy copies (of a base document or of another
    copy), with noise strengths spread so that their Jaccard to the source spans ~0.4..1.
    """
    if name not in SETS:
        raise ValueError(f"set must be one of {', '.join(SETS)}; got {name!r}")
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    rng = random.Random(f"{name}:{seed}")
    if name == "html":
        pool = list(english_long()) + list(chinese_long())
        # Short articles make the boilerplate weigh: trim to 300..1500 chars.
        pool = [p[: rng.randint(300, 1500)] for p in pool]
    else:
        pool = list(_pool(name))
    n_copies = int(n * copy_fraction)
    n_base = n - n_copies
    if n_base > len(pool):
        raise ValueError(f"set {name!r} has only {len(pool)} source documents, asked {n_base}")
    base = rng.sample(pool, n_base)
    articles = list(base)
    origin = list(range(n_base))
    for _ in range(n_copies):
        src = rng.randrange(len(articles)) if rng.random() < 0.2 else rng.randrange(n_base)
        donor = pool[rng.randrange(len(pool))]
        strength = rng.random()
        articles.append(add_noise(articles[src], rng, donor, strength))
        origin.append(origin[src])
    perm = list(range(n))
    rng.shuffle(perm)
    articles = [articles[i] for i in perm]
    origin = [origin[i] for i in perm]
    if name == "html":
        sites = ("handbook", "pydocs", "debref", "plain")
        site_of_origin = {o: rng.choice(sites) for o in set(origin)}
        texts = []
        for art, o in zip(articles, origin):
            # Copies are re-published on another site 40 % of the time.
            site = site_of_origin[o] if rng.random() < 0.6 else rng.choice(sites)
            texts.append(html_page(site, art, rng))
        truth = [_article_visible(a) for a in articles]
    else:
        texts = articles
        truth = articles
    s = LabelledSet(name=name, texts=texts, truth_texts=truth, origin=origin)
    s.truth_pairs = exact_pairs(truth)
    return s


def _article_visible(article: str) -> str:
    # The visible text of the article as html_page renders it: title heading + paragraphs.
    title = article.strip().split("\n", 1)[0][:60]
    paras = [p.strip() for p in article.split("\n\n") if p.strip()]
    return "\n".join([title, *paras])


def main() -> None:
    """Print the size and number of true pairs of each set (a quick check of the loaders)."""
    import argparse
    import time

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for name in SETS:
        t0 = time.perf_counter()
        s = build_set(name, args.n, args.seed)
        dt = time.perf_counter() - t0
        print(
            f"{name:9s} docs={len(s.texts)} chars={s.chars} true_pairs={len(s.truth_pairs)} "
            f"built_in={dt:.1f}s"
        )


if __name__ == "__main__":
    main()
