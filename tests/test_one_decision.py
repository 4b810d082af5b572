"""One decision for every path: the same input and policy through ``Deduplicator`` (a text at a
time and in batches), ``CorpusDeduper`` and ``neardup dedup`` keep the same documents, on a
corpus with template families, repost clusters, HTML pages and empty texts, with the default
limits and with tight ones (where the limits are reached, all paths reach them alike)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from _helpers import SAMPLE, neardup
from neardup.corpus import CorpusDeduper
from neardup.dedup import Deduplicator, Policy


def _corpus() -> list[str]:
    rng = random.Random(3)
    with open(SAMPLE, encoding="utf-8") as f:
        news = [json.loads(line)["text"] for line in f][:400]
    texts: list[str] = []
    for i in range(1200):
        roll = rng.random()
        if roll < 0.3:
            texts.append(
                f"Your code is {rng.randrange(10**6):06d}; it expires in {rng.randrange(2, 30)} "
                f"minutes. Order {rng.randrange(10**8)} ships on day {rng.randrange(1, 29)}."
            )
        elif roll < 0.5 and texts and texts[-1]:
            base = list(rng.choice([t for t in texts[-50:] if t]))
            for _ in range(rng.randrange(0, 3)):
                base[rng.randrange(len(base))] = rng.choice("abcxyz ")
            texts.append("".join(base))
        elif roll < 0.55:
            body = rng.choice(news)
            texts.append(f"<html><body><nav>home news</nav><p>{body}</p></body></html>")
        elif roll < 0.57:
            texts.append(rng.choice(["", "   ", "<html><body><script>x()</script></body></html>"]))
        else:
            texts.append(news[i % len(news)] if rng.random() < 0.5 else rng.choice(news))
    return texts


@pytest.mark.parametrize("limits", [(64, 32), (3, 2)])
def test_every_path_keeps_the_same_documents(tmp_path: Path, limits: tuple[int, int]) -> None:
    texts = _corpus()
    policy = Policy.default().replace(bucket_limit=limits[0], verify_limit=limits[1], html=False)
    ids = list(range(len(texts)))

    batch = CorpusDeduper(policy)
    batch.feed(texts)
    result = batch.result()
    want = [i for i in ids if result.kept[i]]
    assert 100 < result.duplicates < len(texts) - 100

    one = Deduplicator(policy=policy)
    got_one = [i for i, t in zip(ids, texts) if one.check_and_add(i, t)[0]]
    assert got_one == want

    many = Deduplicator(policy=policy)
    got_many = []
    for start in range(0, len(texts), 97):
        part = list(range(start, min(start + 97, len(texts))))
        out = many.check_and_add_many(part, [texts[i] for i in part])
        got_many += [i for i, (added, _) in zip(part, out) if added]
    assert got_many == want

    src, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    with open(src, "w", encoding="utf-8") as f:
        for i, t in zip(ids, texts):
            f.write(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n")
    if limits == (64, 32):  # (the command takes the default limits)
        r = neardup("dedup", str(src), "-o", str(out_path), "--quiet", "--html", "no")
        assert r.returncode == 0, r.stderr
        with open(out_path, encoding="utf-8") as f:
            assert [json.loads(line)["id"] for line in f] == want
