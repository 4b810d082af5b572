"""neardup.htmltext on the Rust (html5ever) extractor, against the former regex extractor.

The former pure-Python extractor is kept in tests/test_htmltext_regexref.py. On the pages of the
benchmark's HTML set and on generated well-formed pages both must give the same text; on broken
or tricky markup the expected value is written out, and where the two differ the comment says why
(the HTML parser's reading wins).
"""

from __future__ import annotations

import multiprocessing
import random
import sys
from html import escape
from pathlib import Path

import pytest
from neardup import _core
from neardup.htmltext import looks_like_html, main_text, main_text_many, visible_text
from test_htmltext_regexref import regex_main_text, regex_visible_text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))
import corpus  # noqa: E402


@pytest.fixture(scope="module")
def bench_pages() -> list[str]:
    """The pages of benchmark's HTML set (benches/quality.py's default size and seed)."""
    return corpus.build_set("html", n=2000, seed=0).texts


@pytest.mark.slow
def test_benchmark_pages_match_regex_version(bench_pages: list[str]) -> None:
    assert len(bench_pages) == 2000
    many = main_text_many(bench_pages)
    for i, page in enumerate(bench_pages):
        old = regex_main_text(page)
        assert main_text(page) == old, f"page {i}"
        assert many[i] == old, f"page {i}"
        assert visible_text(page) == regex_visible_text(page), f"page {i}"
    assert _core.visible_text_many(bench_pages[:50]) == [visible_text(p) for p in bench_pages[:50]]


WORDS = "alpha beta gamma delta 中文 字符 über naïve straße fish chips".split()
CLASSES = ["", "content", "nav", "site-footer", "x comments_box", "navigate", "MENU", "w1", "toc"]
CLASSES += ["post tag-social-ads", "Category-menu w1"]
ROLES = ["", "main", "navigation", "note", "Banner"]
# Elements by content model, so that the pages are valid HTML (no end tag is implied: the
# regex reference has no tree builder's rules).
FLOW = ["div", "section", "nav", "footer", "aside", "main", "article", "blockquote", "header"]
FLOW += ["form", "unknown-el"]
PHRASING = ["span", "b", "em"]


def _text(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(0, 6))]
    s = " ".join(words)
    if rng.random() < 0.2:
        s += " &amp; &lt;x&gt; &#20013; &eacute;"
    if rng.random() < 0.1:
        s += " <!-- a <p>comment</p> -->"
    return s


def _attrs(rng: random.Random) -> str:
    attrs = ""
    cls = rng.choice(CLASSES)
    if cls:
        attrs += f' class="{cls}"'
    role = rng.choice(ROLES)
    if role:
        attrs += f" role='{role}'"
    if rng.random() < 0.05:
        attrs += ' aria-hidden="true"'
    return attrs


def _children(rng: random.Random, depth: int, phrasing: bool) -> str:
    return "".join(_element(rng, depth + 1, phrasing) for _ in range(rng.randint(0, 4)))


def _element(rng: random.Random, depth: int, phrasing: bool = False) -> str:
    """Flow content, or phrasing content (what a <p>, a heading or a <span> may hold)."""
    r = rng.random()
    if depth > 4 or r < 0.25:
        return _text(rng)
    if r < 0.35:
        n = rng.randint(1, 4)
        return "".join(f"<a href='/{i}'>{_text(rng)}</a> " for i in range(n))
    if r < 0.4:
        return "<script>var s = '<p>not text</p>'; if (a < b) {}</script><br>"
    if r < 0.43:
        hr = "" if phrasing else "<hr/>"
        return f"<img src=x alt='{_text(rng)}'>{hr}<style>p > a {{}}</style>"
    if phrasing or r < 0.55:
        tag = rng.choice(PHRASING)
        return f"<{tag}{_attrs(rng)}>{_children(rng, depth, True)}</{tag}>"
    if r < 0.65:
        tag = rng.choice(["p", "h2"])
        return f"<{tag}{_attrs(rng)}>{_children(rng, depth, True)}</{tag}>"
    if r < 0.72:
        items = "".join(
            f"<li{_attrs(rng)}>{_children(rng, depth + 1, False)}</li>"
            for _ in range(rng.randint(0, 3))
        )
        return f"<ul{_attrs(rng)}>{items}</ul>"
    if r < 0.78:
        cells = "".join(
            f"<td{_attrs(rng)}>{_children(rng, depth + 1, False)}</td>"
            for _ in range(rng.randint(0, 3))
        )
        return f"<table{_attrs(rng)}><tr{_attrs(rng)}>{cells}</tr></table>"
    tag = rng.choice(FLOW)
    return f"<{tag}{_attrs(rng)}>{_children(rng, depth, False)}</{tag}>"


def _page(rng: random.Random) -> str:
    body = "".join(_element(rng, 0) for _ in range(rng.randint(1, 6)))
    head = f"<head><title>{_text(rng)}</title><meta charset=utf-8></head>"
    return f"<!DOCTYPE html><html>{head}<body>{body}</body></html>"


def test_generated_well_formed_pages_match_regex_version() -> None:
    rng = random.Random(7)
    pages = [_page(rng) for _ in range(1500)]
    many = main_text_many(pages)
    differs = 0
    for i, page in enumerate(pages):
        assert main_text(page) == regex_main_text(page), page
        assert many[i] == main_text(page)
        assert visible_text(page) == regex_visible_text(page), page
        assert main_text(page, 0.0) == regex_main_text(page, 0.0), page
        differs += main_text(page) != visible_text(page)
    assert differs > 500  # the pages do carry boilerplate


# (markup, expected main_text, expected visible_text, same as the regex version)
CASES: list[tuple[str, str, str, bool]] = [
    # Unclosed <p>, <li>, <b>: blocks still break at block tags.
    (
        "<p>one<p>two<ul><li>a<li>b</ul><b>bold",
        "one\ntwo\na\nb\nbold",
        "one\ntwo\na\nb\nbold",
        True,
    ),
    # Nested boilerplate inside main, and main inside boilerplate-free wrappers. (<nav> ends the
    # <p> it is written in, as in the browser: the regex version read "dropx".)
    (
        "<body><div><main><p>keep</p><aside><p>drop<nav>x</nav></p></aside>"
        "<div class='share-box'>s</div></main></div><p>outside</p></body>",
        "keep",
        "keep\ndrop\nx\ns\noutside",
        False,
    ),
    # Entities, with and without semicolons, numeric and named.
    (
        "<p>Fish &amp; chips &lt;3 &#x4E2D;&#25991; &copy &eacute;t&eacute;</p>",
        "Fish & chips <3 中文 © été",
        "Fish & chips <3 中文 © été",
        True,
    ),
    # A script with '</' inside strings: the script-data state ends only at </script.
    (
        "<p>a</p><script>document.write('</p><p>x</p>'); var t = '</div>';</script><p>b</p>",
        "a\nb",
        "a\nb",
        True,
    ),
    # Comments (also with markup inside) and CDATA (a bogus comment in HTML content).
    ("<p>a<!-- <p>hidden</p> -->b<![CDATA[ gone ]]>c</p>", "abc", "abc", True),
    # Raw text: title/textarea decode entities, xmp does not; none of them hold tags.
    (
        "<body><textarea>&lt;t&gt; <b></textarea><xmp><i>&amp;</xmp></body>",
        "<t> <b><i>&amp;",
        "<t> <b><i>&amp;",
        True,
    ),
    # Attribute values with '>' and quotes; class names matched as words.
    (
        "<div data-x='a>b' class=\"x\">kept</div><div class='sidemenu Mega_Menu'>no</div>",
        "kept",
        "kept\nno",
        True,
    ),
    # A '<' that starts no tag is text.
    ("<p>1 < 2 and 3 <= 4</p>", "1 < 2 and 3 <= 4", "1 < 2 and 3 <= 4", True),
    # Differences: the parser's reading wins.
    # A head without </head> ends at the first body element (the regex reader hid everything).
    ("<html><head><title>T</title><body><p>text</p>", "text", "text", False),
    # <a href=/> is a link to "/" (not a self-closed <a>), so "Home" is link text.
    (
        "<body><p><a href=/>Home</a></p><p>article text here</p>",
        "article text here",
        "Home\narticle text here",
        False,
    ),
    # An unterminated quote swallows the rest of the tag (the regex reader printed the markup).
    ('<p>a</p><p class="x>never closed', "a", "a", False),
    # '</script>' in a script inside a nav no longer ends the nav early.
    ("<nav><script>s = '</nav>'</script>menu</nav><p>body</p>", "body", "menu\nbody", False),
    # A title is never shown: before the body (in the head, implied or not) or in it.
    ("<title>T</title><p>x</p>", "x", "x", True),
    ("<p>a</p><title>T</title><p>b</p>", "a\nb", "a\nb", True),
    # "<!-->" and "--!>" end a comment (the regex reader ran on to the next "-->").
    ("<p>a<!-->b</p><p>c<!-- x --!>d</p>", "ab\ncd", "ab\ncd", False),
    # NUL characters in text are dropped, as the tree builder does.
    ("<p>a\x00b</p>", "ab", "ab", False),
    # Self-closing syntax on a non-void HTML element is ignored: <div/> opens a div.
    ("<div class='nav'/>menu</div><p>t</p>", "t", "menu\nt", False),
]


@pytest.mark.parametrize(("markup", "main", "visible", "same"), CASES)
def test_tricky_markup(markup: str, main: str, visible: str, same: bool) -> None:
    assert main_text(markup) == main
    assert visible_text(markup) == visible
    old = (regex_main_text(markup), regex_visible_text(markup))
    assert (old == (main, visible)) is same, old


def test_former_messy_markup_case() -> None:
    html = (
        "<!-- c --><HTML><Body><div class=\"x\" data-x='a>b'>Fish &amp; chips<p>one<p>two"
        "<script>if (a < b) { document.write('</div>') }</script><br/>three &lt;ok&gt;"
        "<nav class=menu><a href=/>Home</a></nav><style>p { color: red }</style><unknown>tail"
    )
    # (<nav> ends the open <p>, so "tail" is a block of its own, as in the browser; the regex
    # version went on with the paragraph)
    assert main_text(html) == "Fish & chips\none\ntwo\nthree <ok>\ntail"
    assert regex_main_text(html) == "Fish & chips\none\ntwo\nthree <ok>tail"


def test_non_utf8_looking_and_odd_text() -> None:
    # Mojibake, replacement characters, C1 controls and private-use characters are plain text.
    text = "Ã©tÃ© \ufffd \x85 \ue000 \x1c end"
    assert (
        main_text(f"<p>{text}</p>")
        == regex_main_text(f"<p>{text}</p>")
        == "Ã©tÃ© \ufffd \ue000 end"
    )
    # Lone surrogates cannot be UTF-8: they become U+FFFD instead of failing.
    assert main_text("<p>a\ud800b</p>") == "a\ufffdb"
    assert main_text_many(["<p>\udfff</p>", "<p>ok</p>"]) == ["\ufffd", "ok"]
    # A byte-order mark at the start is not text.
    assert main_text("\ufeff<p>x</p>") == "x"


def test_huge_page() -> None:
    para = "<p>" + escape("Some long paragraph text, 中文 & more. " * 20) + "</p>"
    nav = "<nav>" + "<a href=/x>link</a>" * 50 + "</nav>"
    page = "<html><body>" + (nav + para) * 12_000 + "</body></html>"
    assert len(page) > 10_000_000
    out = main_text(page)
    assert out.count("\n") == 12_000 - 1
    assert out == regex_main_text(page)
    assert main_text_many([page, page[:1000]])[0] == out


def test_empty_and_text_only() -> None:
    assert main_text("") == "" == visible_text("")
    assert main_text("just text, no markup") == "just text, no markup"
    assert main_text("<p>unterminated <b>bold") == "unterminated bold"


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="markup must be str, got bytes"):
        main_text(b"<p>x</p>")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="markup must be str"):
        visible_text(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="markups must be an iterable of str, not a single str"):
        main_text_many("<p>x</p>")
    with pytest.raises(TypeError, match=r"markups\[1\] must be str, got int"):
        main_text_many(["<p>x</p>", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_link_density must be a number >= 0"):
        main_text("<p>x</p>", -1)
    with pytest.raises(ValueError, match="max_link_density"):
        main_text_many([], float("nan"))
    assert main_text_many([]) == []
    assert main_text_many(iter(["<p>a</p>", "<p>b</p>"])) == ["a", "b"]


def test_looks_like_html() -> None:
    assert looks_like_html("  <!-- x --><!DOCTYPE html><p>")
    assert looks_like_html("<HTML>") and looks_like_html("\n<body class=x>")
    assert not looks_like_html("plain text with <b>tags</b>")
    assert not looks_like_html("<htmlx>")
    licence = "<!--" + " This page is free software; see COPYING." * 100 + " -->"
    assert looks_like_html(licence + "\n<!DOCTYPE html><html>")  # (a comment of 4 kB first)
    assert not looks_like_html("<!-- an unclosed comment <html>")
    assert not looks_like_html("<?xml version='1.0'")


def _many_in_child(pages: list[str]) -> list[str]:
    return main_text_many(pages)


def test_batch_after_fork_does_not_hang() -> None:
    rng = random.Random(3)
    pages = [_page(rng) for _ in range(400)]
    expected = main_text_many(pages)  # the parent's pool is running now
    assert sum(map(len, pages)) > 64 * 1024  # large enough for the parallel path
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_many_in_child, (pages,)).get(timeout=60)
    assert got == expected


# Issue 24, item 1: real documentation pages (DocBook XHTML, Sphinx) lost their text.

XHTML_PAGE = (
    '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" '
    '"http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">\n'
    '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Chapter 1</title>'
    '<script type="text/javascript" src="x.js"/><link rel="stylesheet" href="a.css"/></head>'
    '<body><div class="navheader"><a href="ch00.html">Prev</a></div>'
    '<div class="chapter"><h1 class="title"><a id="_the_menu_system"/>The menu system</h1>'
    '<div class="nav"/><p>Menus are described here at some length.</p>'
    '<div class="sidebar"><p class="title"><strong>Note</strong></p>'
    "<p>A box in the text, not the page's side column.</p></div></div></body></html>"
)


def test_xhtml_page_is_read_as_a_page() -> None:
    # An XML declaration (and a byte-order mark, comments, other processing instructions)
    # before the doctype: the page was taken for plain text and its markup fingerprinted.
    assert looks_like_html(XHTML_PAGE)
    assert looks_like_html("\ufeff<?xml version='1.0'?><!-- c --><html><body>x")
    assert looks_like_html('<?xml version="1.0"?>\n<?xml-stylesheet href="s.css"?>\n<html>')
    assert not looks_like_html('<?xml version="1.0"?>\n<rss version="2.0"><channel>')
    assert not looks_like_html("<?php echo 1; ?> plain")
    from neardup.dedup import Policy

    assert Policy.default().is_html(XHTML_PAGE)


def test_xhtml_self_closing_tags_close() -> None:
    # In an XHTML document "/>" closes any element: <a id=x/> marks a place, <div class=nav/>
    # is empty, <script src=x/> holds no script (read as HTML each swallowed what follows).
    assert main_text(XHTML_PAGE) == (
        "The menu system\nMenus are described here at some length.\n"
        "Note\nA box in the text, not the page's side column."
    )
    assert visible_text(XHTML_PAGE).startswith("Prev\nThe menu system\n")
    # The XHTML namespace on <html> says so too; in an HTML document "/>" is ignored, as
    # browsers ignore it: the nav div holds what follows up to its end tag.
    body = '<body><div class="nav"/><p>text</p></div><p>after</p></body></html>'
    assert main_text('<html xmlns="http://www.w3.org/1999/xhtml">' + body) == "text\nafter"
    assert main_text("<!DOCTYPE html><html>" + body) == "after"


def test_anchor_without_href_is_not_a_link() -> None:
    # <a name=x/> read as HTML stays open: its text was link text, so the heading and
    # paragraphs after it were dropped as a link list.
    page = "<body><p>Intro.</p><div><a name='s1'/><h2>Heading</h2><p>Text of the chapter.</p></div>"
    assert main_text(page) == "Intro.\nHeading\nText of the chapter."
    assert main_text("<p><a id=x>Placeholder words</a> and more</p>") == (
        "Placeholder words and more"
    )
    # A link is an <a> with href, whatever its value.
    assert main_text("<p><a href=''>all link text</a></p><p>kept</p>") == "kept"


def test_anchor_start_tag_closes_an_open_anchor() -> None:
    # Links do not nest: a forgotten </a> ends at the next <a>, as the tree builder does.
    page = "<div><a href=/1>one<p><a href=/2>two</a> and then a long sentence of text.</p></div>"
    assert main_text(page) == "two and then a long sentence of text."
    # ... but not across a table cell.
    cell = "<a href=/1><table><tr><td><a href=/2>x</a> y</td></tr></table></a><p>plain</p>"
    assert main_text(cell) == "plain"


def test_ids_of_sections_headings_and_anchors_name_their_topic() -> None:
    # Sphinx and Markdown derive a section's or heading's id from its title.
    page = (
        "<body><section id='file-menu-shell-and-editor'><h3 id='the-menu'>File menu</h3>"
        "<p>Open a new file.</p></section><a class='share' id='comments'>text</a>"
        "<div id='main-menu'>dropped</div><section class='comments'>dropped</section></body>"
    )
    assert main_text(page) == "File menu\nOpen a new file.\ntext"


def test_sidebar_is_not_a_boilerplate_word() -> None:
    # "sidebar" names DocBook's in-text boxes as well as side columns: its prose stays, its link
    # lists go by link density, its repeated lines by the corpus-wide pass.
    page = (
        "<body><div class='sidebar'><ul><li><a href=/a>A</a></li><li><a href=/b>B</a></li></ul>"
        "<p>Tip: a paragraph in a box.</p></div><div class='sphinxsidebar'>gone</div></body>"
    )
    assert main_text(page) == "Tip: a paragraph in a box."


def test_link_density_of_lists_and_rows() -> None:
    # A table cell or list item that is one link (a package name) stays with its row.
    table = (
        "<table><tr><th>package</th><th>description</th></tr>"
        "<tr><td><a href=/p/libc6>libc6</a></td><td><a href=/pop>V:930</a></td>"
        "<td>GNU C Library: shared libraries</td></tr>"
        "<tr><td><a href=/p/x>x</a></td><td><a href=/y>a long link text here</a></td></tr>"
        "</table>"
    )
    assert main_text(table) == "package\ndescription\nlibc6\nV:930\nGNU C Library: shared libraries"
    # A list of links still goes whole, and a prose list keeps its linked items.
    links = "<ul><li><a href=/1>Home</a></li><li><a href=/2>About us</a></li><li>Blog</li></ul>"
    prose = (
        "<ol><li><a href=/t>tar</a></li><li>archives files into one with their metadata</li></ol>"
    )
    assert main_text(links + prose) == "tar\narchives files into one with their metadata"
    # Nested lists are judged apart: the inner list of links goes, the item's prose stays.
    nested = (
        "<ul><li>An item with enough text to keep<ul><li><a href=/1>sub</a></li></ul></li></ul>"
    )
    assert main_text(nested) == "An item with enough text to keep"
