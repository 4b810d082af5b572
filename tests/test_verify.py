"""The exact-similarity stage (neardup.verify) against exact string computations."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from _helpers import SAMPLE
from hypothesis import given, settings
from hypothesis import strategies as st
from neardup import verify
from neardup.htmltext import looks_like_html, main_text, visible_text


def sample_texts(limit: int = 600) -> list[str]:
    with SAMPLE.open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for _, line in zip(range(limit), f)]


def exact_jaccard(a: str, b: str, n: int = 5) -> float:
    sa, sb = verify.shingles(verify.normalise(a), n), verify.shingles(verify.normalise(b), n)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def test_normalise_nfkc_case_whitespace() -> None:
    assert verify.normalise("  Ｈｅｌｌｏ\t\n WORLD　！ ") == "hello world !"
    assert verify.normalise("") == ""
    with pytest.raises(TypeError, match="text must be str"):
        verify.normalise(b"bytes")  # type: ignore[arg-type]


def test_shingles_short_and_empty() -> None:
    assert verify.shingles("abc", 5) == {"abc"}
    assert verify.shingles("", 5) == set()
    assert verify.shingles("abcdef", 5) == {"abcde", "bcdef"}
    with pytest.raises(ValueError, match="shingle"):
        verify.shingles("abc", 0)


def test_sketch_jaccard_equals_exact_jaccard_on_real_text() -> None:
    texts = sample_texts()
    rng = random.Random(7)
    # Pairs that matter: near-copies of the sample (same origin) and random pairs.
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:600]]
    by_origin: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_origin.setdefault(r["origin"], []).append(i)
    pairs = [(g[0], g[1]) for g in by_origin.values() if len(g) > 1][:150]
    pairs += [(rng.randrange(len(texts)), rng.randrange(len(texts))) for _ in range(150)]
    assert len(pairs) > 200
    sketches = [verify.sketch(verify.normalise(t)).hashes for t in texts]
    for a, b in pairs:
        got = verify.jaccard_sketch(sketches[a], sketches[b])
        assert got == pytest.approx(exact_jaccard(texts[a], texts[b]), abs=1e-12), (a, b)
        assert verify.jaccard(texts[a], texts[b]) == pytest.approx(got, abs=1e-12)


def test_sketch_many_matches_sketch_per_document() -> None:
    texts = [verify.normalise(t) for t in sample_texts(300)]
    texts += ["", "a", "abcd", "abcde", "abcdef", "x" * 40, "甲乙丙", "甲乙丙丁戊己"]
    offsets, hashes = verify.sketch_many(texts)
    assert offsets.shape == (len(texts) + 1,)
    for i, t in enumerate(texts):
        one = verify.sketch(t)
        assert np.array_equal(hashes[offsets[i] : offsets[i + 1]], one.hashes), i
        assert one.hashes.dtype == np.uint32
        assert np.all(np.diff(one.hashes.astype(np.int64)) > 0)  # sorted, distinct
        assert one.hashes.size == len(verify.shingles(t))  # no collision inside a document


def test_sketch_many_empty_batch() -> None:
    offsets, hashes = verify.sketch_many([])
    assert offsets.tolist() == [0] and hashes.size == 0


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet="abcde 甲乙丙,.", min_size=0, max_size=60),
    st.text(alphabet="abcde 甲乙丙,.", min_size=0, max_size=60),
)
def test_jaccard_sketch_property(a: str, b: str) -> None:
    na, nb = verify.normalise(a), verify.normalise(b)
    got = verify.jaccard_sketch(verify.sketch(na).hashes, verify.sketch(nb).hashes)
    assert got == pytest.approx(exact_jaccard(a, b), abs=1e-12)


def test_levenshtein_and_cosine_values() -> None:
    assert verify.levenshtein("abcd", "abce") == pytest.approx(0.75)
    assert verify.levenshtein("ABC", "abc") == 1.0  # normalised first
    assert verify.cosine("the cat sat", "the cat sat") == pytest.approx(1.0)
    assert verify.cosine("the cat", "dog runs") == 0.0
    # Chinese runs are compared as character bigrams: 你好 世界 share 1 of 3 bigrams each.
    assert verify.cosine("你好世界", "你好朋友") == pytest.approx(1 / 3)
    assert verify.cosine("", "") == 1.0 and verify.cosine("a", "") == 0.0


def test_similarity_by_name() -> None:
    assert verify.similarity("jaccard")("abcdefg", "abcdefg") == 1.0
    assert verify.similarity("levenshtein")("ab", "ab") == 1.0
    assert verify.similarity("cosine")("ab", "ab") == 1.0
    with pytest.raises(ValueError, match="verifier must be one of jaccard, levenshtein, cosine"):
        verify.similarity("euclid")


PAGE = """<!DOCTYPE html><html><head><title>t</title><style>p{{}}</style></head><body>
<header><nav><ul>{nav}</ul></nav></header>
<div class="wrap"><div class="c1">{links}</div>
<main><h1>{title}</h1><p>{body}</p></main>
<div class="site-footer">{footer}</div></div><script>var x = 1;</script></body></html>"""


def page(title: str, body: str, nav: str, footer: str) -> str:
    links = "".join(f"<li><a href='/{i}'>{w}</a></li>" for i, w in enumerate(nav.split()))
    return PAGE.format(nav=links, links=links, title=title, body=body, footer=footer)


def test_main_text_drops_boilerplate() -> None:
    html = page("Title", "The article body.", "Home News Sport Weather", "Copyright 2024 Site")
    assert looks_like_html(html)
    assert not looks_like_html("plain text with <b>tags</b>")
    assert main_text(html) == "Title\nThe article body."
    vis = visible_text(html)
    assert "Home" in vis and "Copyright" in vis and "var x" not in vis and "p{}" not in vis


def test_main_text_without_main_uses_link_density() -> None:
    html = (
        "<html><body><div><a href=1>one</a> <a href=2>two</a> <a href=3>three</a></div>"
        "<div><p>Real paragraph with a <a href=4>link</a> inside it.</p></div></body></html>"
    )
    assert main_text(html) == "Real paragraph with a link inside it."


def test_normalise_whitespace_is_regex_whitespace() -> None:
    """normalise() splits on str.isspace(); the ground truth's definition is re's \\s+."""
    import re
    import sys

    ws = re.compile(r"\s")
    odd = [i for i in range(sys.maxunicode + 1) if bool(ws.match(chr(i))) != chr(i).isspace()]
    assert odd == []
    text = "a\u3000b\u2028c\x1cd \u00a0 e\u200bf"
    assert verify.normalise(text) == re.sub(r"\s+", " ", text).strip()


def test_sketch_many_small_batch_and_wrong_type() -> None:
    texts = ["", "ab", "abcdefgh", "中文字符串"]  # (one thread; the pool takes 256 texts or more)
    offsets, hashes = verify.sketch_many(texts)
    assert offsets.dtype == np.int64 and hashes.dtype == np.uint32
    for i, t in enumerate(texts):
        assert np.array_equal(hashes[offsets[i] : offsets[i + 1]], verify.sketch(t).hashes)
    with pytest.raises(TypeError, match="single str"):
        verify.sketch_many("abc")
    with pytest.raises(ValueError, match="shingle"):
        verify.sketch_many(["abc"], 0)


def test_main_text_tolerates_messy_markup() -> None:
    html = (
        "<!-- c --><HTML><Body><div class=\"x\" data-x='a>b'>Fish &amp; chips<p>one<p>two"
        "<script>if (a < b) { document.write('</div>') }</script><br/>three &lt;ok&gt;"
        "<nav class=menu><a href=/>Home</a></nav><style>p { color: red }</style><unknown>tail"
    )
    # (<nav> ends the open <p>, as in a browser: "tail" is on a line of its own; <unknown> is
    # inline)
    assert main_text(html) == "Fish & chips\none\ntwo\nthree <ok>\ntail"
    assert visible_text("<html><head><title>T</title></head><body>b</body></html>") == "b"
    assert main_text("") == "" and main_text("<p>unterminated <b>bold") == "unterminated bold"
