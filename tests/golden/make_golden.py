"""Writes fingerprints.jsonl: the fingerprint of each preset on a fixed set of texts.

Changing an output pinned here is a breaking change (indexes store fingerprints). Regenerate only
on purpose: ``python tests/golden/make_golden.py`` and say so in the changelog.
"""

from __future__ import annotations

import json
from pathlib import Path

from neardup import Fingerprinter

TEXTS = [
    "",
    " ",
    "a",
    "中",
    "你妈妈喊你回家吃饭哦，回家罗回家罗",
    "你妈妈叫你回家吃饭啦，回家罗回家罗",
    "美国“51区”雇员称内部有9架飞碟，曾看见灰色外星人",
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!!!",
    "Ｆｕｌｌｗｉｄｔｈ ｔｅｘｔ，全角标点。",
    "simhash是由 Charikar 在2002年提出来的，参考《Similarity estimation techniques from "
    "rounding algorithms》。",
    "<html><head><style>p{}</style></head><body><p>Hello <b>world</b></p>"
    "<script>x()</script></body></html>",
    "<div>网页查重</div><br/><a href='x'>链接</a>",
    "emoji 😀👍🏽 and 𠀀 non-BMP",
    "lone \ud800 surrogate and \udfff another",
    "NUL\x00inside",
    "-_- -- ... ！！ ？？ ,,, ;;",
    "Straße İstanbul ΣΊΣΥΦΟΣ café naïve",
    "今天纽约的天气真好啊，京华大酒店的张尧经理吃了一只北京烤鸭。后天纽约的天气不好，昨天纽约的天气也不好，北京烤鸭真好吃",
    "Near-duplicate detection at scale: fingerprints, an exact Hamming index, a dedup CLI. " * 5,
    "海量数据相似度计算实例，simhash和海明距离是网页去重最常用的方法，速度很快。" * 4,
]

CONFIGS: list[dict[str, object]] = [
    {"preset": "default"},
    {"preset": "default", "bits": 128},
    {"preset": "default", "html": True},
    {"preset": "seed000"},
    {"preset": "seed000", "bits": 128},
    {"preset": "seed002", "weighting": "pre"},
    {"preset": "seed002", "weighting": "suf"},
    {"preset": "seed002", "weighting": "uniform"},
    {"preset": "words"},
    {"preset": "words", "tokenizer": "word_ngrams", "ngram": 2},
    {"preset": "jieba"},
    {"preset": "tfidf"},
    {"preset": "keywords"},
    {"preset": "default", "hash": "md5"},
    {"preset": "default", "hash": "seed000"},
    {"preset": "default", "weighting": "binary"},
]

PATH = Path(__file__).with_name("fingerprints.jsonl")


def rows() -> list[dict[str, object]]:
    """One row per (configuration, text) with the fingerprint as hex."""
    out: list[dict[str, object]] = []
    for cfg in CONFIGS:
        opts = dict(cfg)
        preset = str(opts.pop("preset"))
        f = Fingerprinter(preset, **opts)
        for text in TEXTS:
            out.append({"config": cfg, "text": text, "fingerprint": f.to_hex(f.fingerprint(text))})
    return out


def main() -> None:
    with PATH.open("w", encoding="utf-8") as fh:
        for row in rows():
            fh.write(json.dumps(row, ensure_ascii=True) + "\n")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
