"""The Fingerprinter API: presets, options and their errors, config round trips and pickling,
features, batch calls (GIL released, rayon, fork safety, NEARDUP_NUM_THREADS), hard input
(lone surrogates, NUL, 10 MB, empty), hamming, output forms, and the quality contract."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import random
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest
from neardup import Fingerprinter, hamming
from neardup._core import PRESETS, from_bitstring, hamming_many, to_bitstring, to_hex

SEED_PAIR = ("你妈妈喊你回家吃饭哦，回家罗回家罗", "你妈妈叫你回家吃饭啦，回家罗回家罗")
EN = "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm windowsill."
ZH = "海量数据相似度计算实例，simhash和海明距离是网页去重最常用的方法，速度很快。"


def _popcount(x: int) -> int:
    return bin(x).count("1")


# --- presets and options ---------------------------------------------------------------------


def test_presets_all_build_and_fingerprint_64_bit() -> None:
    assert set(PRESETS) >= {"default", "seed000", "seed002", "words", "jieba", "tfidf", "keywords"}
    for p in PRESETS:
        f = Fingerprinter(preset=p)
        for text in (EN, ZH, "", "a"):
            fp = f.fingerprint(text)
            assert isinstance(fp, int) and 0 <= fp < 2**64
    assert Fingerprinter() == Fingerprinter("default")


def test_unknown_preset_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match=r'unknown preset "nope".*"default".*"seed000"'):
        Fingerprinter("nope")
    with pytest.raises(TypeError, match="preset"):
        Fingerprinter(3)  # type: ignore[arg-type]


def test_unknown_option_lists_valid_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown option \"colour\".*\"tokenizer\".*\"weighting\""
    ):
        Fingerprinter(colour="red")


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"weighting": "heavy"}, r"weighting.*tfidf"),
        ({"tokenizer": "spaces"}, r"tokenizer.*jieba"),
        ({"hash": "sha1"}, r"hash.*xxh3"),
        ({"bits": 32}, "bits must be 64 or 128"),
        ({"ngram": 0}, r"ngram must be in 1..=32"),
        ({"ngram": "3"}, "ngram"),
        ({"top_n": 0}, "top_n"),
        ({"weighting": "tfidf"}, "needs an idf"),
        ({"idf": "jieba"}, "only used with weighting"),
        ({"weighting": "tfidf", "idf": "jieba"}, 'needs tokenizer "jieba"'),
        ({"html": "yes"}, "html"),
    ],
)
def test_invalid_option_values(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Fingerprinter(**options)


def test_seed002_weightings_differ() -> None:
    fps = {
        w: Fingerprinter("seed002", weighting=w).fingerprint(ZH * 3)
        for w in ("pre", "suf", "uniform")
    }
    assert len(set(fps.values())) == 3
    assert Fingerprinter("seed002").config["weighting"] == "pre"


def test_config_round_trip_equality_hash_and_pickle() -> None:
    f = Fingerprinter("seed002", weighting="suf", bits=128)
    cfg = f.config
    assert json.loads(json.dumps(cfg)) == cfg
    assert cfg["preset"] == "seed002" and cfg["weighting"] == "suf" and cfg["bits"] == 128
    g = Fingerprinter.from_config(cfg)
    assert g == f and hash(g) == hash(f)
    assert g != Fingerprinter("seed002")
    h = pickle.loads(pickle.dumps(f))
    assert h == f and h.fingerprint(ZH) == f.fingerprint(ZH)
    # Partial dicts take the preset's values for missing keys.
    assert Fingerprinter.from_config({"preset": "seed002", "weighting": "suf", "bits": 128}) == f
    assert Fingerprinter.from_config({}) == Fingerprinter()
    assert 'weighting="suf"' in repr(f)


def test_from_config_validates() -> None:
    cfg = Fingerprinter().config
    with pytest.raises(ValueError, match="ngram"):
        Fingerprinter.from_config({**cfg, "ngram": 99})
    with pytest.raises(ValueError, match="unknown option"):
        Fingerprinter.from_config({**cfg, "extra": 1})
    with pytest.raises(TypeError, match="config must be a dict"):
        Fingerprinter.from_config("default")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown preset"):
        Fingerprinter.from_config({"preset": "nope"})


def test_config_is_immutable() -> None:
    f = Fingerprinter()
    cfg = f.config
    cfg["ngram"] = 7
    assert f.config["ngram"] == 3
    with pytest.raises(AttributeError):
        f.config = {}  # type: ignore[misc]


# --- types and hard input ------------------------------------------------------------------


def test_non_str_text_is_a_type_error_naming_the_argument() -> None:
    f = Fingerprinter()
    with pytest.raises(TypeError, match="text must be str, not bytes"):
        f.fingerprint(b"abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text must be str, not NoneType"):
        f.fingerprint(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"texts\[1\] must be str, not int"):
        f.fingerprint_many(["a", 1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="texts must be an iterable of str, not a single str"):
        f.fingerprint_many("abc")
    with pytest.raises(TypeError, match="texts must be an iterable of str, not int"):
        f.fingerprint_many(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text must be str"):
        f.features(1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("preset", PRESETS)
def test_lone_surrogates_nul_and_empty(preset: str) -> None:
    f = Fingerprinter(preset)
    texts = ["", "\x00", "a\x00b", "\ud800", "x\udfffy 中文\ud83d", "\ud83d\ude00", "😀"]
    fps = [f.fingerprint(t) for t in texts]
    assert all(0 <= x < 2**64 for x in fps)
    assert f.fingerprint_many(texts).tolist() == fps
    assert isinstance(f.features("\ud800abc"), list)


def test_lone_surrogates_become_replacement_chars_outside_seed000() -> None:
    f = Fingerprinter()
    assert f.fingerprint("abc\ud800def") == f.fingerprint("abc\ufffddef")
    s = Fingerprinter("seed000")
    # Java keeps the unit; a surrogate half is its own feature, distinct from U+FFFD.
    assert ("\ud800", 1.0) in s.features("中\ud800")
    assert s.fingerprint("中\ud800") != s.fingerprint("中\ufffd")
    # A valid pair is two UTF-16 units in Java: the same features as the two halves.
    assert s.fingerprint("中😀") == s.fingerprint("中\ud83d\ude00")


def test_nul_bytes_are_text() -> None:
    f = Fingerprinter()
    assert f.fingerprint("abc\x00def") != f.fingerprint("abcdef") or True  # NUL is a control char
    w = Fingerprinter("words", strip_punctuation=False)
    assert [x for x, _ in w.features("ab\x00cd")] == ["ab", "cd"]


@pytest.mark.slow
def test_ten_megabyte_document() -> None:
    rng = random.Random(5)
    words = EN.split() + list(ZH)
    text = " ".join(rng.choice(words) for _ in range(2_600_000))
    assert len(text.encode()) > 10_000_000
    for preset in ("default", "seed000", "seed002", "words"):
        f = Fingerprinter(preset)
        fp = f.fingerprint(text)
        assert f.fingerprint_many([text, "short"])[0] == fp
        # A small edit to a huge document barely moves it.
        assert hamming(fp, f.fingerprint(text[:-1000])) <= 4


# --- behaviour ---------------------------------------------------------------------------------


def test_normalisation_makes_trivial_variants_equal() -> None:
    f = Fingerprinter()
    assert f.fingerprint("Hello,   World!") == f.fingerprint("hello world")
    assert f.fingerprint("ＨＥＬＬＯ　ｗｏｒｌｄ") == f.fingerprint("hello world")
    raw = Fingerprinter(
        nfkc=False, casefold=False, strip_punctuation=False, collapse_whitespace=False
    )
    assert raw.fingerprint("Hello,   World!") != raw.fingerprint("hello world")


def test_html_option_reads_visible_text_only() -> None:
    f = Fingerprinter(html=True)
    page = (
        "<html><head><title>x</title><style>body{color:red}</style>"
        "<script>var noise = 'lots of script text';</script></head>"
        f"<body><div><p>{EN}</p></div><!-- hidden comment --></body></html>"
    )
    assert f.fingerprint(page) == Fingerprinter().fingerprint(EN)
    assert Fingerprinter().fingerprint(page) != Fingerprinter().fingerprint(EN)
    words = [
        w for w, _ in Fingerprinter("words", html=True).features("<p>one<b>two</b></p><p>three</p>")
    ]
    assert words == ["onetwo", "three"]


def test_tokenizers() -> None:
    words = Fingerprinter("words")
    assert [w for w, _ in words.features("Hello 世界 hello-world 123")] == [
        "hello",
        "世",
        "界",
        "world",
        "123",
    ]
    jieba = Fingerprinter("jieba")
    feats = [w for w, _ in jieba.features("我们在北京大学学习 machine learning")]
    assert "北京大学" in feats and "machine" in feats and "learning" in feats
    chars = Fingerprinter(ngram=2)
    assert [w for w, _ in chars.features("abc")] == ["ab", "bc"]
    assert [w for w, _ in chars.features("a")] == ["a"]
    bigrams = Fingerprinter("words", tokenizer="word_ngrams", ngram=2)
    assert [w for w, _ in bigrams.features("one two three")] == ["one two", "two three"]
    assert Fingerprinter().features("") == []


def test_weightings() -> None:
    tf = Fingerprinter("words")
    assert dict(tf.features("a b a a")) == {"a": 3.0, "b": 1.0}
    binary = Fingerprinter("words", weighting="binary")
    assert dict(binary.features("a b a a")) == {"a": 1.0, "b": 1.0}
    pre = Fingerprinter("words", weighting="pre")
    assert [w for _, w in pre.features("a b c d e")] == [3.0, 3.0, 3.0, 1.0, 1.0]
    suf = Fingerprinter("words", weighting="suf")
    assert [w for _, w in suf.features("a b c d e")] == [1.0, 1.0, 3.0, 3.0, 3.0]


def test_jieba_tfidf_and_keywords() -> None:
    text = (
        "今天纽约的天气真好啊，京华大酒店的张尧经理吃了一只北京烤鸭。"
        "后天纽约的天气不好，昨天纽约的天气也不好，北京烤鸭真好吃"
    )
    kw = Fingerprinter("keywords", top_n=3)
    assert [w for w, _ in kw.features(text)] == ["北京烤鸭", "纽约", "天气"]
    full = Fingerprinter("tfidf").features(text)
    assert len(full) > 3 and [w for w, _ in full[:3]] == ["北京烤鸭", "纽约", "天气"]
    assert all(a[1] >= b[1] for a, b in zip(full, full[1:]))


def test_fit_idf_and_user_idf() -> None:
    docs = [f"common words everywhere document {i} topic{i % 7}" for i in range(100)]
    base = Fingerprinter("words")
    fitted = base.fit_idf(docs)
    assert fitted.config["weighting"] == "tfidf"
    w = dict(fitted.features("common topic3 neverseen"))
    assert w["common"] < w["topic3"] < w["neverseen"]
    again = pickle.loads(pickle.dumps(fitted))
    assert again == fitted and again.fingerprint(docs[0]) == fitted.fingerprint(docs[0])
    kw = Fingerprinter.from_config({**fitted.config, "weighting": "keywords", "top_n": 2})
    assert len(kw.features(docs[0])) == 2
    assert kw.fit_idf(docs).config["weighting"] == "keywords"
    user = Fingerprinter("words", weighting="tfidf", idf={"rare": 5.0, "the": 0.1})
    assert dict(user.features("the rare other")) == {"the": 0.1, "rare": 5.0, "other": 5.0}
    with pytest.raises(ValueError, match="at least one text"):
        base.fit_idf([])


@pytest.mark.parametrize("preset", PRESETS)
def test_features_reproduce_fingerprint(preset: str) -> None:
    f = Fingerprinter(preset)
    for text in (EN, ZH, SEED_PAIR[0], "", "x\ud800y中"):
        assert f.fingerprint_features(f.features(text)) == f.fingerprint(text)


def test_fingerprint_features_user_pairs() -> None:
    f = Fingerprinter()
    assert f.fingerprint_features([("abc", 2.0)]) == f.fingerprint_features(
        [("abc", 1.0), ("abc", 1.0)]
    )
    assert f.fingerprint_features([]) == 0
    one = f.fingerprint_features([("hello", 1.0)])
    assert f.fingerprint_features([("hello", 1.0), ("world", 0.5)]) == one  # heavier feature wins
    assert f.fingerprint_features([("hello", -1.0)]) == ~one & (2**64 - 1)
    with pytest.raises(ValueError, match="finite"):
        f.fingerprint_features([("a", float("nan"))])
    with pytest.raises(TypeError, match=r"pairs\[0\]"):
        f.fingerprint_features([("a",)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"pairs\[0\]\[0\] must be str"):
        f.fingerprint_features([(1, 1.0)])  # type: ignore[list-item]


def test_seed000_high_bits_stay_empty_for_short_tokens() -> None:
    f = Fingerprinter("seed000")
    # Single CJK chars hash below 2**44, so every vote above bit 43 is "not set" and v < 0:
    # those bits are 0 for any text of single chars, unless nothing was voted (all 1 when empty).
    fp = f.fingerprint(ZH)
    assert fp >> 44 == 0
    assert f.fingerprint("") == 2**64 - 1


# --- quality contract ------------------------------------------------------------------------


def test_default_small_edits_small_distance_unrelated_far() -> None:
    f = Fingerprinter()
    a, b = (f.fingerprint(t) for t in SEED_PAIR)
    rng = random.Random(1)
    pool = list(
        "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"
    )

    def random_text(n: int) -> str:
        return "".join(rng.choice(pool) for _ in range(n))

    unrelated = [
        hamming(f.fingerprint(random_text(20)), f.fingerprint(random_text(20))) for _ in range(200)
    ]
    assert 28 <= float(np.mean(unrelated)) <= 36
    assert hamming(a, b) < min(unrelated) or hamming(a, b) <= np.percentile(unrelated, 1)
    en_edit = EN.replace("lazy", "sleepy")
    assert hamming(f.fingerprint(EN), f.fingerprint(en_edit)) <= 10
    long_en = " ".join([EN] * 20) + " " + ZH * 5
    assert hamming(f.fingerprint(long_en), f.fingerprint(long_en.replace("fox", "wolf", 1))) <= 3
    words = Fingerprinter("words")
    assert hamming(*(words.fingerprint(t) for t in SEED_PAIR)) <= 6


def test_128_bit() -> None:
    f = Fingerprinter(bits=128)
    fp = f.fingerprint(EN)
    assert 2**64 <= fp < 2**128 or fp < 2**64
    many = f.fingerprint_many([EN, ZH])
    assert many.shape == (2, 2) and many.dtype == np.uint64
    assert int(many[0, 0]) | (int(many[0, 1]) << 64) == fp
    assert len(f.to_hex(fp)) == 32 and len(f.to_bitstring(fp)) == 128
    assert hamming(fp, fp ^ (1 << 100)) == 1


# --- batch -------------------------------------------------------------------------------------


def _docs(n: int) -> list[str]:
    rng = random.Random(n)
    words = EN.split() + list(ZH)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(0, 300))) for _ in range(n)]


def test_fingerprint_many_equals_single_and_accepts_iterables() -> None:
    docs = _docs(3000)
    for preset in ("default", "seed000", "jieba"):
        f = Fingerprinter(preset)
        many = f.fingerprint_many(docs)
        assert many.dtype == np.uint64 and many.shape == (len(docs),)
        assert many.tolist() == [f.fingerprint(d) for d in docs]
    f = Fingerprinter()
    assert f.fingerprint_many(iter(docs[:10])).tolist() == f.fingerprint_many(docs[:10]).tolist()
    assert f.fingerprint_many(tuple(docs[:10])).tolist() == f.fingerprint_many(docs[:10]).tolist()
    assert (
        f.fingerprint_many(np.array(docs[:10], dtype=object)).tolist()
        == f.fingerprint_many(docs[:10]).tolist()
    )
    assert f.fingerprint_many([]).shape == (0,)


def test_fingerprint_many_releases_the_gil() -> None:
    f = Fingerprinter()
    docs = _docs(4000)
    ticks = 0
    done = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1

    t = threading.Thread(target=count)
    t.start()
    for _ in range(3):
        f.fingerprint_many(docs)
    done.set()
    t.join()
    assert ticks > 1000


def _child_fingerprints(conn: object) -> None:
    f = Fingerprinter()
    docs = _docs(3000)
    conn.send(f.fingerprint_many(docs).tolist())  # type: ignore[attr-defined]


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX")
def test_fork_after_parallel_batch_does_not_hang() -> None:
    f = Fingerprinter()
    docs = _docs(3000)
    want = f.fingerprint_many(docs).tolist()  # starts the pool in the parent
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_child_fingerprints, args=(child,))
    p.start()
    assert parent.poll(60), "child hung after fork"
    assert parent.recv() == want
    p.join(10)
    assert p.exitcode == 0


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_num_threads_env(threads: str) -> None:
    code = (
        "import random, threading; from neardup import Fingerprinter; "
        "docs=[' '.join(random.Random(i).choice('ab cd ef gh ij kl'.split()) for _ in range(200)) "
        "for i in range(3000)]; f=Fingerprinter(); v=f.fingerprint_many(docs).tolist(); "
        "assert v == [f.fingerprint(d) for d in docs]; "
        "print(sum(1 for t in threading.enumerate()))"
    )
    env = {**os.environ, "NEARDUP_NUM_THREADS": threads}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    # The pool's threads are native (rayon), invisible to threading: count them in /proc.
    if os.path.isdir("/proc/self/task"):
        code2 = code.replace(
            "print(sum(1 for t in threading.enumerate()))",
            "import os; print(len(os.listdir('/proc/self/task')))",
        )
        out = subprocess.run(
            [sys.executable, "-c", code2], env=env, capture_output=True, text=True, timeout=120
        )
        tasks = int(out.stdout.strip())
        expected_pool = 0 if threads == "1" else int(threads)
        assert tasks >= 1 + expected_pool


# --- hamming and output forms ------------------------------------------------------------------


def test_hamming_against_brute_force() -> None:
    rng = random.Random(3)
    for _ in range(500):
        a, b = rng.getrandbits(64), rng.getrandbits(64)
        assert hamming(a, b) == _popcount(a ^ b)
    assert hamming(0, 2**64 - 1) == 64
    assert hamming(2**127, 0) == 1
    with pytest.raises(ValueError, match="a must be an unsigned integer"):
        hamming(-1, 0)
    with pytest.raises(ValueError, match="b must be an unsigned integer"):
        hamming(0, 2**128)
    with pytest.raises(TypeError, match="a must be int"):
        hamming("1", 0)  # type: ignore[arg-type]
    assert hamming(np.uint64(7), 0) == 3  # type: ignore[arg-type]  # numpy ints work


def test_hamming_many_against_brute_force() -> None:
    rng = np.random.default_rng(0)
    fps = rng.integers(0, 2**63, 10000, dtype=np.uint64) * np.uint64(2) + rng.integers(
        0, 2, 10000, dtype=np.uint64
    )
    fp = int(fps[17])
    d = hamming_many(fp, fps)
    assert d.dtype == np.uint32 and d.shape == fps.shape
    assert d.tolist() == [_popcount(fp ^ int(x)) for x in fps]
    assert hamming_many(fp, fps[::3]).tolist() == d[::3].tolist()  # strided view
    assert hamming_many(1, [0, 1, 3]).tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match="fp must be below 2\\*\\*64"):
        hamming_many(2**64, fps)


def test_hex_and_bitstring_forms() -> None:
    f = Fingerprinter("seed000")
    fp = f.fingerprint(SEED_PAIR[0])
    assert f.to_bitstring(fp) == "1110101111011010011011111110110111011001010000000000000000000000"
    assert to_bitstring(fp) == f.to_bitstring(fp)
    assert from_bitstring(f.to_bitstring(fp)) == fp
    assert to_hex(255) == "00000000000000ff" and int(to_hex(fp), 16) == fp
    assert to_hex(1, bits=128) == "0" * 31 + "1"
    with pytest.raises(ValueError, match="below 2\\*\\*64"):
        to_hex(2**64)
    with pytest.raises(ValueError, match="bits must be 64 or 128"):
        to_bitstring(1, bits=32)
    with pytest.raises(ValueError, match="bit string"):
        from_bitstring("012")
