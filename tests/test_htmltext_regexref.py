"""The former regular-expression main-text extractor of neardup.htmltext, kept as the reference
that the Rust (html5ever) extractor is compared with in tests/test_htmltext.py (no tests here).

This is the pure-Python code that neardup.htmltext held before the extraction moved into the core
(commit 2591e7c), with the names of its two entry points changed and the later rule changes made
in both (issue 24, item 1): an ``<a>`` without ``href`` is not link text, an ``<a>`` start tag
ends an ``<a>`` left open (not past a table cell), the class/id of an ``<a>`` and the id of a
``section`` or heading do not name boilerplate, "sidebar" is not a boilerplate word, and the
link density of a list or table row is that of all its items; and later: the class/id of
``html`` and ``body`` and a post's taxonomy classes (``tag-*``, ``category-*`` beside
``hentry``, ``type-*`` or ``post-<n>``) do not name boilerplate, a title is never shown, and a
table cell whose own text is not mostly links, and is as long as a link of its row on average,
stays when its row goes.
"""

from __future__ import annotations

import html
import re

_HIDDEN = frozenset(
    {"head", "title", "script", "style", "noscript", "template", "svg", "iframe", "object"}
)
_BOILER_TAGS = frozenset({"nav", "header", "footer", "aside", "form", "button", "select", "menu"})
_MAIN_TAGS = frozenset({"main", "article"})
_BLOCK = frozenset(
    {
        "address", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption", "h1", "h2", "h3",
        "h4", "h5", "h6", "hr", "li", "ol", "p", "pre", "section", "table", "td", "th", "tr",
        "ul", "main", "article", "body", "html", "caption", "summary", "details", "figure",
    }
)  # fmt: skip
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
     "track", "wbr", "param"}
)  # fmt: skip
_BOILER_NAME = re.compile(
    r"(?:^|[\s_-])(?:nav|navbar|navigation|navheader|navfooter|menu|footer|sphinxsidebar|"
    r"related|breadcrumbs?|banner|masthead|comments?|share|social|copyright|cookie|"
    r"advert|ads|promo|subscribe|toc|pagination|pager)(?:$|[\s_-])",
    re.I,
)
_BOILER_ROLE = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
# Elements whose id is a fragment target named after their topic, not a boilerplate name.
_ID_NAMES_TOPIC = frozenset({"a", "section", "h1", "h2", "h3", "h4", "h5", "h6"})
# The page's containers: never boilerplate by class or id.
_PAGE = frozenset({"html", "body"})
_POST = re.compile(r"^(?:hentry|type-.*|post-[0-9]+)$", re.I)
# An <a> start tag does not end an <a> opened outside these.
_LINK_SCOPE = frozenset({"td", "th", "caption", "object", "applet", "marquee", "template"})
# Lists and table rows: their items' link density is judged together.
_GROUPS = frozenset({"ul", "ol", "dl", "tr"})
_WS = re.compile(r"[ \t\r\f\v\n]+")


class _Extractor:
    def __init__(self, drop_boilerplate: bool) -> None:
        self.drop = drop_boilerplate
        # (tag, hidden-or-boiler, main, link, group, cell)
        self.stack: list[tuple[str, bool, bool, bool, int, int]] = []
        self.hidden_depth = 0
        self.main_depth = 0
        self.link_depth = 0
        self.saw_main = False
        # Blocks: (text, link chars, in main, group: the innermost ul/ol/dl/tr, 0 for none,
        # cell: the innermost td/th, 0 for none)
        self.blocks: list[tuple[str, int, bool, int, int]] = []
        self.parts: list[str] = []
        self.link_chars = 0
        self.block_in_main = False
        self.groups = 0
        self.group = 0
        self.rows: set[int] = set()  # the groups that are table rows
        self.cells = 0
        self.cell = 0

    def _flush(self) -> None:
        if self.parts:
            text = " ".join("".join(self.parts).split())
            if text:
                self.blocks.append(
                    (text, self.link_chars, self.block_in_main, self.group, self.cell)
                )
            self.parts = []
        self.link_chars = 0
        self.block_in_main = self.main_depth > 0

    def _is_boiler(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        if tag in _HIDDEN:
            return True
        if not self.drop:
            return False
        if tag in _BOILER_TAGS:
            return True
        for name, value in attrs:
            if not value:
                continue
            if name in ("class", "id") and any(_POST.match(c) for c in value.split()):
                value = " ".join(
                    c for c in value.split() if not c.lower().startswith(("tag-", "category-"))
                )
            if name == "class" and tag not in _PAGE and tag != "a" and _BOILER_NAME.search(value):
                return True
            if name == "id" and tag not in _ID_NAMES_TOPIC | _PAGE and _BOILER_NAME.search(value):
                return True
            if name == "role" and value.strip().lower() in _BOILER_ROLE:
                return True
            if name in ("hidden", "aria-hidden") and value.lower() in ("", "true", "hidden"):
                return True
        return False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK:
            self._flush()
        if tag in _VOID:
            return
        if tag == "a":
            # Links do not nest: an <a> ends the <a> left open (not past a table cell).
            for i in range(len(self.stack) - 1, -1, -1):
                if self.stack[i][0] in _LINK_SCOPE:
                    break
                if self.stack[i][0] == "a":
                    self._pop_effects(self.stack.pop(i))
                    break
        boiler = self._is_boiler(tag, attrs)
        is_main = tag in _MAIN_TAGS or (
            bool(attrs) and any(n == "role" and (v or "").lower() == "main" for n, v in attrs)
        )
        link = tag == "a" and any(n == "href" for n, _ in attrs)
        group = 0
        if tag in _GROUPS:
            self.groups += 1
            group = self.group = self.groups
            if tag == "tr":
                self.rows.add(group)
        cell = 0
        if tag in ("td", "th"):
            self.cells += 1
            cell = self.cell = self.cells
        self.stack.append((tag, boiler, is_main, link, group, cell))
        if boiler:
            self.hidden_depth += 1
        if is_main:
            self.main_depth += 1
            self.saw_main = True
            self.block_in_main = True
        if link:
            self.link_depth += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK:
            self._flush()

    def _pop_effects(self, entry: tuple[str, bool, bool, bool, int, int]) -> None:
        _, boiler, is_main, link, group, cell = entry
        if boiler:
            self.hidden_depth -= 1
        if is_main:
            self.main_depth -= 1
        if link:
            self.link_depth -= 1
        if group:
            self.group = next((e[4] for e in reversed(self.stack) if e[4]), 0)
        if cell:
            self.cell = next((e[5] for e in reversed(self.stack) if e[5]), 0)

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            if tag in _BLOCK:
                self._flush()
            return
        # Close up to the matching open tag (tolerates unclosed <p>, <li>, ...).
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                break
        else:
            return
        if tag in _BLOCK or any(e[0] in _BLOCK for e in self.stack[i:]):
            self._flush()
        closed = self.stack[i:]
        del self.stack[i:]
        for entry in reversed(closed):
            self._pop_effects(entry)
        self.block_in_main = self.main_depth > 0

    def handle_data(self, data: str) -> None:
        if self.hidden_depth:
            return
        if self.main_depth:
            self.block_in_main = True
        self.parts.append(data)
        if self.link_depth:
            self.link_chars += len(data.strip())

    def result(self) -> list[tuple[str, int, bool, int, int]]:
        self._flush()
        return self.blocks


_TOKEN = re.compile(
    r"<!--.*?(?:-->|\Z)|<![^>]*>|<\?[^>]*>"
    r"|<(/?)([A-Za-z][A-Za-z0-9:_-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>",
    re.S,
)
_ATTR = re.compile(r"""([^\s=/>"']+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s>]+))?""")
_RAW_TEXT = frozenset({"script", "style", "textarea", "title", "xmp", "noscript", "template"})
_RAW_END: dict[str, re.Pattern[str]] = {
    t: re.compile(rf"</{t}\s*>", re.I) for t in _RAW_TEXT
}  # fmt: skip
_ATTR_HINT = re.compile(r"class|id|role|hidden|href", re.I)


def _attrs(raw: str) -> list[tuple[str, str | None]]:
    if not raw or not _ATTR_HINT.search(raw):
        return []
    out: list[tuple[str, str | None]] = []
    for m in _ATTR.finditer(raw):
        value = m.group(2)
        if value is not None:
            if value[:1] in "\"'" and value[-1:] == value[:1]:
                value = value[1:-1]
            value = html.unescape(value)
        out.append((m.group(1).lower(), value))
    return out


_SAME_TAG: dict[str, re.Pattern[str]] = {}


def _skip_element(markup: str, pos: int, tag: str) -> int:
    """The position after the end tag that closes the ``tag`` element opened before ``pos``."""
    if tag in _RAW_TEXT:
        close = _RAW_END[tag].search(markup, pos)
        return close.end() if close else len(markup)
    pat = _SAME_TAG.get(tag)
    if pat is None:
        pat = _SAME_TAG[tag] = re.compile(
            rf"<!--.*?(?:-->|\Z)|<(/?){re.escape(tag)}(?=[\s/>])(?:[^>\"']|\"[^\"]*\"|'[^']*')*>",
            re.I | re.S,
        )
    depth = 1
    while True:
        m = pat.search(markup, pos)
        if m is None:
            return len(markup)
        pos = m.end()
        if m.group(1) is None:  # a comment
            continue
        if m.group(1):
            depth -= 1
            if depth == 0:
                return pos
        elif not m.group(0).endswith("/>"):
            depth += 1


def _scan(markup: str, p: _Extractor) -> None:
    # A tokenizer for the tags the extractor needs: one regex finds the next tag, comment or
    # declaration; the text between is data. 1.6x faster than html.parser on the benchmark pages.
    pos, end = 0, len(markup)
    find = _TOKEN.search
    while pos < end:
        m = find(markup, pos)
        if m is None:
            p.handle_data(html.unescape(markup[pos:]))
            return
        if m.start() > pos:
            text = markup[pos : m.start()]
            p.handle_data(html.unescape(text) if "&" in text else text)
        pos = m.end()
        closing, tag, raw = m.groups()
        if tag is None:  # comment, doctype, processing instruction
            continue
        tag = tag.lower()
        if closing:
            p.handle_endtag(tag)
            continue
        attrs = _attrs(raw) if raw else []
        if raw.endswith("/"):
            p.handle_startendtag(tag, attrs)
            continue
        p.handle_starttag(tag, attrs)
        if p.stack and p.stack[-1][0] == tag and p.stack[-1][1]:
            # A hidden or boilerplate element: its content is dropped whole, so jump to its
            # end tag instead of reading every link of a menu.
            pos = _skip_element(markup, pos, tag)
            p.handle_endtag(tag)
            continue
        if tag in _RAW_TEXT:
            close = _RAW_END[tag].search(markup, pos)
            stop = close.start() if close else end
            text = markup[pos:stop]
            p.handle_data(html.unescape(text) if tag in ("title", "textarea") else text)
            pos = close.end() if close else end
            p.handle_endtag(tag)


def _extract(
    markup: str, drop_boilerplate: bool
) -> tuple[list[tuple[str, int, bool, int, int]], set[int]]:
    """The blocks, and the groups that are table rows."""
    if not isinstance(markup, str):
        raise TypeError(f"markup must be str, got {type(markup).__name__}")
    p = _Extractor(drop_boilerplate)
    _scan(markup, p)
    blocks = p.result()
    if drop_boilerplate and p.saw_main:
        main = [b for b in blocks if b[2]]
        if main:
            blocks = main
    return blocks, p.rows


def regex_visible_text(markup: str) -> str:
    """The former visible_text."""
    return "\n".join(b[0] for b in _extract(markup, False)[0])


def regex_main_text(markup: str, max_link_density: float = 0.5) -> str:
    """The former main_text, with today's fallback: a page whose main text is empty gets its
    visible text."""
    blocks, rows = _extract(markup, True)
    groups: dict[int, list[int]] = {}  # links, chars, blocks with a link
    cells: dict[int, list[int]] = {}  # links, chars
    for t, links, _, group, cell in blocks:
        if group:
            g = groups.setdefault(group, [0, 0, 0])
            g[0] += links
            g[1] += len(t)
            g[2] += links > 0
            c = cells.setdefault(cell, [0, 0])
            c[0] += links
            c[1] += len(t)

    def keep(links: int, chars: int, group: int, cell: int) -> bool:
        if not group:
            return links <= max_link_density * chars
        g_links, g_chars, linked = groups[group]
        c_links, c_chars = cells[cell]
        return g_links <= max_link_density * g_chars or (
            group in rows
            and cell != 0
            and c_links <= max_link_density * c_chars
            and (c_chars - c_links) * max(linked, 1) >= g_links
        )

    kept = [t for t, links, _, group, cell in blocks if keep(links, len(t), group, cell)]
    main = "\n".join(kept)
    visible = regex_visible_text(markup) if not main.strip() else ""
    return visible if visible.strip() else main
