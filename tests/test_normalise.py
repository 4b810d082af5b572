"""neardup.verify.normalise (the core's neardup_core::plain) against the Python expression it
replaced: ``" ".join(unicodedata.normalize("NFKC", t).lower().split())``."""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from neardup import Deduplicator, Policy, verify
from neardup._core import _normalise, _normalise_many
from test_verify import sample_texts

# Characters whose case properties differ between Unicode 14.0 (Python 3.11's database) and the
# core's newer data, which next to a capital sigma decide its form (final ς or not): U+0295 (ʕ)
# is a lowercase letter (Ll, cased) in 14.0 and an other letter (Lo) later, U+02E4 is ʕ under
# NFKC; U+1171E (Ahom medial ra) is a nonspacing mark (Mn, skipped as case-ignorable) in 14.0
# and a spacing mark (Mc) later. The only known differences.
CASED_ELSEWHERE = {"\u0295", "\u02e4", "\U0001171e"}


def reference(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def known_chars() -> list[str]:
    """Every character Python's Unicode database assigns (no surrogates)."""
    return [
        chr(i)
        for i in range(sys.maxunicode + 1)
        if not 0xD800 <= i < 0xE000 and unicodedata.category(chr(i)) != "Cn"
    ]


def test_every_known_character_alone_and_between_letters() -> None:
    chars = known_chars()
    assert len(chars) > 250_000
    for form in ("{}", "a{}b", "中{}文", "{}\u0301", "x {} y"):
        bad = [c for c in chars if _normalise(form.format(c)) != reference(form.format(c))]
        assert bad == [], (form, [hex(ord(c)) for c in bad[:10]])


def test_capital_sigma_next_to_every_known_character() -> None:
    chars = known_chars()
    for form in ("Σ{}", "ΑΣ{}", "{}Σ", "Α{}Σ"):
        bad = {c for c in chars if _normalise(form.format(c)) != reference(form.format(c))}
        assert bad <= CASED_ELSEWHERE, (form, sorted(hex(ord(c)) for c in bad))
    assert _normalise("ΟΔΟΣ ΣΑΣ Σ") == "οδος σας σ" == reference("ΟΔΟΣ ΣΑΣ Σ")


def test_whitespace_is_what_str_split_splits_at() -> None:
    spaces = [chr(i) for i in range(sys.maxunicode + 1) if chr(i).isspace()]
    assert len(spaces) == 29
    for c in spaces:
        assert _normalise(f"a{c}{c}b{c}") == "a b"
    assert _normalise("a\u200bb\u180ec") == "a\u200bb\u180ec"  # (not whitespace)


@settings(max_examples=400, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(
            list(
                "ab AZ é한국어中文字，。！？（）ＡＢＣ１２３ ｶﾞ①㍿ﬁİΣσςΑ\t\n\x0b\x1c\x85\u3000"
                "\u2028\u0301\u0308\u1100\u1161\u11a8"
            )
        ),
        max_size=60,
    )
)
def test_mixed_text_equals_the_python_expression(text: str) -> None:
    assert verify.normalise(text) == reference(text)
    assert _normalise_many([text, text.upper()]) == [reference(text), reference(text.upper())]


def test_real_text_one_by_one_and_in_batches() -> None:
    texts = sample_texts(2000)
    texts += [t.replace(",", "，").replace("a", "Ａ").upper() for t in texts[:300]]
    want = [reference(t) for t in texts]
    assert [verify.normalise(t) for t in texts] == want
    assert _normalise_many(texts) == want  # (on the pool: more than 256 texts)


def test_huge_text_and_wrong_type() -> None:
    text = ("Ｗord  ΟΔΟΣ\u3000中文，" * 20_000)[:200_000]  # (normalised without the GIL)
    assert verify.normalise(text) == reference(text)
    with pytest.raises(TypeError, match="text must be str"):
        verify.normalise(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _normalise_many(["a", 1])  # type: ignore[list-item]


def test_normalise_many_and_prepare_many_equal_one_by_one() -> None:
    texts = sample_texts(300)
    page = (
        "<html><body><nav>Home | News</nav><article><p>ΟΔΟΣ  Ｗord 中文</p></article></body></html>"
    )
    texts = [page, *texts, page.replace("中文", "英文")]
    assert verify.normalise_many(texts[1:-1]) == [verify.normalise(t) for t in texts[1:-1]]
    policy = Policy.default()
    prepared = policy.prepare_many(texts)
    assert prepared == [policy.prepare(t) for t in texts]
    assert prepared[0] != verify.normalise(page)  # (the page's main text, not its markup)
    with pytest.raises(TypeError, match="not a single str"):
        verify.normalise_many("abc")
    with pytest.raises(TypeError, match=r"texts\[\] must be str, got int"):
        verify.normalise_many(["a", 1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"texts\[\] must be str, got bytes"):
        policy.prepare_many(["a", b"b"])  # type: ignore[list-item]


def test_lone_surrogates_become_the_replacement_character(tmp_path: Path) -> None:
    """Text with a lone surrogate (half of an emoji from a JSON ``\\ud83d`` escape, common in
    crawled data) is normalised, with U+FFFD in its place, and deduplicated like any text."""
    cut = "Hello world \ud83d cut emoji, ΟΔΟΣ and more words here"
    assert verify.normalise(cut) == "hello world \ufffd cut emoji, οδος and more words here"
    assert verify.normalise_many([cut, "\udc00"]) == [verify.normalise(cut), "\ufffd"]
    d = Deduplicator()
    assert d.check_and_add(1, cut) == (True, [])
    added, matches = d.check_and_add(2, cut + "!")
    assert not added and [m.id for m in matches] == [1]
    src = tmp_path / "in.jsonl"
    rows = [{"id": 1, "text": cut}, {"id": 2, "text": cut + "!"}, {"id": 3, "text": "other"}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "neardup", "dedup", str(src), "-o", str(out), "-q"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(x)["id"] for x in out.read_text(encoding="utf-8").splitlines()] == [1, 3]


def test_an_iterator_of_texts_is_read_once() -> None:
    texts = ["Hello  World", "ＡＢＣ"]
    assert verify.normalise_many(iter(texts)) == ["hello world", "abc"]
    assert Policy.default().prepare_many(t for t in texts) == ["hello world", "abc"]
    d = Deduplicator()
    d.add_many([1], ["a text long enough to be checked against itself"])
    found = d.check_many(t for t in ["a text long enough to be checked against itself"])
    assert [[m.id for m in ms] for ms in found] == [[1]]
