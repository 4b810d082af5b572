"""The main visible text of an HTML page, without its site boilerplate.

Two pages of one site share navigation menus, "related" link lists, sidebars and footers; two
copies of one article on two sites share only the article. Fingerprinting the whole visible text
would make different articles of a site look alike and hide a copy re-published elsewhere, so
:func:`main_text` keeps the article:

1. markup that is never visible is dropped (``head``, ``script``, ``style``, ``noscript``,
   ``template``, ``svg``, ``iframe``, ``object``, comments);
2. when the page marks its content (``<main>``, ``<article>``, ``role="main"``) only that part is
   kept;
3. boilerplate containers are dropped: ``nav``, ``header``, ``footer``, ``aside``, ``form`` and
   elements whose ``class``/``id``/``role`` names navigation, menus, footers, related links,
   breadcrumbs, banners, comments, sharing or cookie notices (not the class/id of an ``<a>``,
   nor the id of a section or heading: a fragment target named after its title);
4. link lists are dropped: a block whose text is mostly link text (link density > 0.5; link
   text is that of an ``<a href>``), the items of a list or table row judged together.

The markup is read in the Rust core by html5ever's tokenizer (the WHATWG HTML tokenizer:
character references, comments, CDATA, raw-text and script-data states, quoted attributes) with a
tolerant open-element stack; see docs/htmltext.md for where it differs from the former
regular-expression reader. ~0.06 ms per 3 kB page; measured on the HTML set of
``benches/quality.py`` (docs/htmltext.md, docs/quality.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from neardup import _core

__all__ = [
    "looks_like_html",
    "main_text",
    "main_text_fell_back_many",
    "main_text_many",
    "visible_text",
]

# What may come before the first tag of a page: a byte-order mark, whitespace, comments (of any
# length: a licence header), and an XML declaration or other processing instructions (XHTML
# pages start with ``<?xml ...?>``).
_SPACE = re.compile(r"\s*")
_FIRST_TAG = re.compile(r"<(?:!doctype\s+html|html|head|body)\b", re.I)


def looks_like_html(text: str) -> bool:
    """True when ``text`` starts like an HTML document (doctype, <html>, <head> or <body>), after
    a byte-order mark, whitespace, comments and an XML declaration (XHTML: ``<?xml ...?>``)."""
    at = 1 if text.startswith("\ufeff") else 0
    while True:
        at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
        if text.startswith("<!--", at):
            end, skip = text.find("-->", at + 4), 3
        elif text.startswith("<?", at):
            end, skip = text.find(">", at + 2), 1
        else:
            return _FIRST_TAG.match(text, at) is not None
        if end < 0:
            return False
        at = end + skip


def visible_text(markup: str) -> str:
    """All visible text of an HTML page, one line per block (boilerplate included)."""
    return _core.visible_text(markup)


def main_text(markup: str, max_link_density: float = 0.5) -> str:
    """The main visible text of an HTML page, without navigation, footers and link lists."""
    return _core.main_text(markup, max_link_density)


def main_text_fell_back_many(markups: Iterable[str], max_link_density: float = 0.5) -> list[bool]:
    """Of every page, whether :func:`main_text` is its whole visible text because the extraction
    left nothing (a reference page of link lists, a body the markup calls navigation)."""
    return _core.main_text_fell_back_many(markups, max_link_density)


def main_text_many(markups: Iterable[str], max_link_density: float = 0.5) -> list[str]:
    """:func:`main_text` of every page, in order; the GIL is released and large batches use all
    cores (``NEARDUP_NUM_THREADS`` sets the number; safe after ``fork()``)."""
    return _core.main_text_many(markups, max_link_density)
