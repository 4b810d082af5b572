"""The ``t2s`` option: Traditional Chinese is read as Simplified before tokenising (OpenCC's t2s
tables), so the two forms of a text get one fingerprint; the option is part of the config, its
JSON form, from_config and pickling, and configs without it keep their exact form."""

from __future__ import annotations

import json
import pickle

import opencc
import pytest
from neardup import Fingerprinter, hamming

# Simplified sentences; their Traditional forms come from OpenCC's s2t (another implementation of
# the same project's tables, opencc-python-reimplemented).
SIMPLIFIED = [
    "后来们说这个体验",
    "后来他们说这个体验很难忘，网络上的软件也发展得很快。",
    "你妈妈喊你回家吃饭哦，回家罗回家罗",
    "海量数据相似度计算实例，simhash和海明距离是网页去重最常用的方法，速度很快。",
    "这台电脑的内存不够，运行大型程序时经常卡住。",
    "我们在图书馆里讨论了经济发展和环境保护的关系。",
    "学习语言需要长期坚持，听说读写缺一不可。",
    "请把这个文件发给负责项目的同事，谢谢！",
    "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。",
    "数据库连接池的大小应该根据并发请求的数量来设置。",
    "东风夜放花千树，更吹落、星如雨。宝马雕车香满路。",
    "这个问题的答案并不简单，需要从历史、文化和经济几个方面来分析。",
]


def _traditional(text: str) -> str:
    return str(opencc.OpenCC("s2t").convert(text))


def test_traditional_text_gets_the_simplified_fingerprint() -> None:
    plain = Fingerprinter()
    f = Fingerprinter(t2s=True)
    assert f.fingerprint("後來們說這個體驗") == plain.fingerprint("后来们说这个体验")
    changed = 0
    for s in SIMPLIFIED:
        t = _traditional(s)
        changed += t != s
        assert f.fingerprint(t) == f.fingerprint(s) == plain.fingerprint(s), (s, t)
    # The test is about something: most sentences do change, and without t2s they drift apart.
    assert changed >= len(SIMPLIFIED) - 1
    drift = [hamming(plain.fingerprint(_traditional(s)), plain.fingerprint(s)) for s in SIMPLIFIED]
    assert sum(drift) / len(drift) > 8


@pytest.mark.parametrize("preset", ["default", "words", "jieba", "keywords", "seed000", "seed002"])
def test_t2s_works_with_every_tokeniser(preset: str) -> None:
    plain = Fingerprinter(preset)
    f = Fingerprinter(preset, t2s=True)
    for s in SIMPLIFIED[:6]:
        assert f.fingerprint(_traditional(s)) == plain.fingerprint(s)
    fps = f.fingerprint_many([_traditional(s) for s in SIMPLIFIED] * 300)
    assert list(fps[: len(SIMPLIFIED)]) == [plain.fingerprint(s) for s in SIMPLIFIED]


def test_t2s_leaves_latin_text_and_the_default_alone() -> None:
    f = Fingerprinter(t2s=True)
    for text in ("The quick brown fox", "", "Ｆｕｌｌ width", "naïve café"):
        assert f.fingerprint(text) == Fingerprinter().fingerprint(text)
    assert Fingerprinter().fingerprint("後來") != Fingerprinter().fingerprint("后来")


def test_t2s_is_part_of_the_config_and_round_trips() -> None:
    f = Fingerprinter("words", t2s=True)
    assert f.config["t2s"] is True
    assert f != Fingerprinter("words")
    assert Fingerprinter.from_config(f.config) == f
    assert Fingerprinter.from_config(json.loads(json.dumps(f.config))) == f
    assert Fingerprinter(**f.config) == f
    g = pickle.loads(pickle.dumps(f))
    assert g == f and g.config["t2s"] is True
    assert g.fingerprint("電腦") == Fingerprinter("words").fingerprint("电脑")
    assert "t2s=True" in repr(f)


def test_config_without_t2s_keeps_its_exact_form() -> None:
    # Indexes store the config's JSON and compare it on open: a config made before the option
    # existed must still read back equal, so the key is only present when it is on.
    for preset in ("default", "seed000", "words"):
        cfg = Fingerprinter(preset).config
        assert "t2s" not in cfg
        assert Fingerprinter.from_config(cfg) == Fingerprinter(preset)
    assert Fingerprinter.from_config({"preset": "default", "t2s": False}) == Fingerprinter()


def test_bad_t2s_value_names_the_option() -> None:
    with pytest.raises(ValueError, match="t2s"):
        Fingerprinter(t2s="yes")
    with pytest.raises(ValueError, match="t2s"):
        Fingerprinter.from_config({"preset": "default", "t2s": 1})
