"""Bit-for-bit compatibility with the seeds: seed 000's Java (compiled and run with javac/java)
and seed 002 (our faithful Python reference, tests/seeds/seed002_reference.py), over a
generated corpus of a few thousand varied documents."""

from __future__ import annotations

import importlib.util
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from neardup import Fingerprinter

SEEDS = Path(__file__).parent / "seeds"

# Every separator of the Java regex, plus tags and look-alikes that exercise its alternation order.
SEPARATORS = (
    "= . 。 ， \" ' [ ] ！ ! ? / \n \r   <html /html <h1 </h1> <h2 /h2 <h3 /h3 <ul /ul <br /br "
    "<head /head <li /li <div /div <a /a <p /p <body /body -_- ) ( , { } ; : -- < > <script "
    "/scirpt <title /title <pre </pre> <meta </meta> <header </header> <span /span _ # & % -"
).split(" ") + [
    "\n",
    "\r",
    " ",
    "\t",
    "<html>",
    "</div>",
    "<script>",
    "</script>",
    "<header>",
    "<abbr>",
    "<pre>",
    "-_-_-",
    "---",
    "/h1",
    "<H1>",
    "\r\n",
    "\u3000",
    "\xa0",
]
WORDS = (
    "the quick brown fox jumps over lazy dog SimHash Charikar near duplicate detection text "
    "Hello WORLD iPhone 2024 3.14 e-mail foo_bar x y z a I data science café naïve Straße ΣΊΣΥΦΟΣ"
).split()
PHRASES = [
    "你妈妈喊你回家吃饭哦，回家罗回家罗",
    "你妈妈叫你回家吃饭啦，回家罗回家罗",
    "美国“51区”雇员称内部有9架飞碟",
    "曾看见灰色外星人",
    "网页查重",
    "海量数据相似度计算",
    "局部敏感哈希",
    "中文和英文混杂的分词",
]
SPECIAL = [
    "😀",
    "👍🏽",
    "𠀀",
    "𪚥",
    "\ud800",
    "\udfff",
    "\udc00x",
    "x\ud83d",
    "\x00",
    "\x00\x00",
    "\t",
    "ＡＢＣ",
    "\uff00",
    "\uffef",
    "\u9fa5",
    "\u9fa6",
    "\u9fcc",
    "\u9fcd",
    "\u4e00",
    "\u4dff",
    "\u2e80",
    "\u2eff",
    "\u3000",
    "\u303f",
    "\u31c0",
    "\u31ef",
    "\u3040",
    "e\u0301",
    "İ",
    "ß",
    "\u212a",
    "ǅ",
    "\u200b",
    "\ufeff",
    "ﬁ",
    "①",
    "㎏",
    "\U0001d400",
    "\x7f",
    "\u0085",
    "\u2028",
]


def _chinese(rng: random.Random) -> str:
    return "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(1, 6)))


def _piece(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.3:
        return rng.choice(WORDS)
    if kind < 0.45:
        return _chinese(rng)
    if kind < 0.55:
        return rng.choice(PHRASES)
    if kind < 0.7:
        return rng.choice(SPECIAL)
    return rng.choice(SEPARATORS)


def corpus(n: int = 3000, seed: int = 20260101) -> list[str]:
    """Deterministic varied documents: Chinese, English, mixed, HTML, emoji and other non-BMP
    characters, lone surrogates, NUL, separator-only, empty, short and long."""
    rng = random.Random(seed)
    docs = ["", " ", "\n", "。", "-_-", "<html></html>", "/", "a", "中", "😀", "\ud800", "\x00"]
    docs += ["".join(SEPARATORS[i : i + 5]) for i in range(0, len(SEPARATORS), 5)]
    docs += SPECIAL + PHRASES
    while len(docs) < n:
        size = rng.choice([1, 2, 3, 5, 8, 13, 30, 80, 200]) if rng.random() < 0.99 else 1500
        glue = rng.choice(["", " ", "", "，"])
        docs.append(glue.join(_piece(rng) for _ in range(size)))
    return docs


def _utf16_hex(text: str) -> str:
    raw = text.encode("utf-16-le", "surrogatepass")
    return "".join(f"{int.from_bytes(raw[i : i + 2], 'little'):04x}" for i in range(0, len(raw), 2))


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seed 000's class and the harness compiled with javac (the setup script installs a JDK)."""
    javac = shutil.which("javac")
    assert javac is not None, "javac is required for the seed 000 tests (scripts/setup-test.sh)"
    out = tmp_path_factory.mktemp("seed000")
    subprocess.run(
        [
            javac,
            "-nowarn",
            "-encoding",
            "UTF-8",
            "-d",
            str(out),
            str(SEEDS / "seed000" / "test" / "mysimhash.java"),
            str(SEEDS / "seed000" / "Seed000Harness.java"),
        ],
        check=True,
        capture_output=True,
    )
    return out


def _java_bitstrings(classes: Path, docs: list[str], bits: int) -> list[str]:
    java = shutil.which("java")
    assert java is not None
    proc = subprocess.run(
        [java, "-Xss16m", "-cp", str(classes), "Seed000Harness", str(bits)],
        input="".join(_utf16_hex(d) + "\n" for d in docs).encode("ascii"),
        capture_output=True,
        check=True,
    )
    lines = proc.stdout.decode("ascii").splitlines()
    assert len(lines) == len(docs)
    return lines


@pytest.mark.java
def test_seed000_matches_java_64(java_classes: Path) -> None:
    docs = corpus()
    expected = _java_bitstrings(java_classes, docs, 64)
    f = Fingerprinter(preset="seed000")
    batch = f.fingerprint_many(docs)
    mismatches = []
    for i, (doc, want) in enumerate(zip(docs, expected)):
        got = f.fingerprint(doc)
        assert int(batch[i]) == got
        if f.to_bitstring(got) != want:
            mismatches.append((i, doc[:60]))
    assert mismatches == [], (
        f"{len(mismatches)} of {len(docs)} differ from Java, e.g. {mismatches[:3]}"
    )
    # The corpus reaches the interesting cases.
    assert any("\ud800" in d for d in docs) and any("😀" in d for d in docs) and "" in docs
    assert len(set(expected)) > len(docs) * 0.7


@pytest.mark.java
def test_seed000_matches_java_128(java_classes: Path) -> None:
    docs = corpus(600, seed=7)
    expected = _java_bitstrings(java_classes, docs, 128)
    f = Fingerprinter(preset="seed000", bits=128)
    got = [f.to_bitstring(f.fingerprint(d)) for d in docs]
    assert got == expected
    many = f.fingerprint_many(docs)
    assert many.shape == (len(docs), 2)
    assert [int(lo) | (int(hi) << 64) for lo, hi in many] == [f.fingerprint(d) for d in docs]


@pytest.mark.java
def test_seed000_bitstring_of_seed_pair(java_classes: Path) -> None:
    a, b = PHRASES[0], PHRASES[1]
    f = Fingerprinter(preset="seed000")
    assert [f.to_bitstring(f.fingerprint(t)) for t in (a, b)] == _java_bitstrings(
        java_classes, [a, b], 64
    )


def _reference():
    spec = importlib.util.spec_from_file_location(
        "seed002_reference", SEEDS / "seed002_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["seed002_reference"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("weighting", ["pre", "suf", "uniform"])
def test_seed002_matches_reference(weighting: str) -> None:
    ref = _reference()
    docs = corpus(1500, seed=2)
    f = Fingerprinter(preset="seed002", weighting=weighting)
    expected = [ref.simhash(d, weighting) for d in docs]
    assert [f.fingerprint(d) for d in docs] == expected
    assert f.fingerprint_many(docs).tolist() == expected
    assert len(set(expected)) > len(docs) * 0.7


def test_seed002_reference_reads_java_byte_arrays() -> None:
    ref = _reference()
    # toByteArray adds a sign byte when the top bit is set and drops leading zero bytes.
    assert ref.java_to_byte_array(0xFF) == b"\x00\xff"
    assert ref.java_to_byte_array(0x7F) == b"\x7f"
    assert ref.java_to_byte_array(0) == b"\x00"
    bits = ref.hash_bits("")  # md5("") = d41d8cd9..., top bit set: 17 bytes
    assert len(bits) == 136 and bits[:8] == [False] * 8


def test_seed_presets_batch_equals_single() -> None:
    docs = corpus(400, seed=3)
    for f in (Fingerprinter("seed000"), Fingerprinter("seed002", weighting="suf")):
        assert np.array_equal(
            f.fingerprint_many(docs), np.array([f.fingerprint(d) for d in docs], dtype=np.uint64)
        )
