"""neardup calibrate: the library functions and the CLI end to end on the real sample."""

from __future__ import annotations

import fcntl
import html
import json
import os
import pty
import random
import struct
import subprocess
import sys
import termios
from pathlib import Path

import numpy as np
import pytest
from _helpers import SAMPLE
from neardup.calibrate import (
    LabelledPair,
    calibrate,
    how_to_use,
    inject_edits,
    pairs_from_corpus,
    read_pairs,
)
from neardup.dedup import Policy
from neardup.verify import cosine, levenshtein, normalise, shingles


def sample_texts(limit: int = 400) -> list[str]:
    with SAMPLE.open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for _, line in zip(range(limit), f)]


def exact_jaccard(a: str, b: str) -> float:
    sa, sb = shingles(normalise(a)), shingles(normalise(b))
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def neardup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neardup", *args], capture_output=True, text=True, timeout=300
    )


def test_pairs_from_corpus_labels_are_exact_jaccard() -> None:
    texts = sample_texts()
    pairs = pairs_from_corpus(texts, copies=120, seed=3)
    assert len(pairs) == 240
    for p in pairs:
        assert p.label == (exact_jaccard(p.a, p.b) >= 0.8)
    assert 10 < sum(p.label for p in pairs) < 230  # both classes present


def test_inject_edits_changes_text_in_proportion() -> None:
    rng = random.Random(1)
    text = sample_texts(50)[-1] * 3
    light = [exact_jaccard(text, inject_edits(text, rng, 0.05)) for _ in range(30)]
    heavy = [exact_jaccard(text, inject_edits(text, rng, 1.0)) for _ in range(30)]
    assert np.mean(light) > np.mean(heavy)
    assert inject_edits("", rng, 1.0) == ""


def test_calibration_scores_match_brute_force() -> None:
    texts = sample_texts(300)
    pairs = pairs_from_corpus(texts, copies=150, seed=5)
    cal = calibrate(pairs, max_k=20)
    labels = np.array([p.label for p in pairs])
    # P/R/F1 of SimHash alone at k=6, recomputed by hand.
    pred = cal.distances <= 6
    tp = int(np.sum(pred & labels))
    p, r, _ = cal.prf(pred)
    assert p == pytest.approx(tp / pred.sum()) and r == pytest.approx(tp / labels.sum())
    for i, pair in enumerate(pairs[:50]):
        assert cal.scores["jaccard"][i] == pytest.approx(exact_jaccard(pair.a, pair.b))
    rec = cal.recommendation
    # Labels are 5-gram Jaccard >= 0.8, so the Jaccard verifier at 0.80 is the right answer.
    assert rec["policy"]["verifier"] == "jaccard"
    assert rec["policy"]["threshold"] == pytest.approx(0.80)
    assert rec["f1"] >= 0.95
    assert rec["f1"] > rec["simhash_alone"]["f1"]
    assert Policy.from_dict(rec["policy"]).threshold == pytest.approx(0.8)


def test_read_pairs_errors(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('{"a": "x", "b": "y", "label": true}\n{"a": "x", "b": 3, "label": 0}\n')
    with pytest.raises(ValueError, match=r"p.jsonl:2: fields 'a' and 'b' must be strings"):
        read_pairs(f)
    f.write_text('{"a": "x", "b": "y", "label": "yes"}\n')
    with pytest.raises(ValueError, match="field 'label' must be true/false or 0/1"):
        read_pairs(f)
    f.write_text('{"a": "x", "b": "y", "label": 1}\n\n')
    assert read_pairs(f) == [LabelledPair("x", "y", True)]
    with pytest.raises(ValueError, match="pairs is empty"):
        calibrate([])


def test_cli_corpus_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "cal"
    proc = neardup("calibrate", "--corpus", str(SAMPLE), "--copies", "200", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "recommended: verifier=" in proc.stdout
    png = (out / "calibrate.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    page = (out / "calibrate.html").read_text(encoding="utf-8")
    assert "<h2>Recommendation</h2>" in page and "data:image/png;base64," in page
    rec = json.loads((out / "recommendation.json").read_text())
    Policy.from_dict(rec["policy"])  # a valid policy
    assert rec["pairs"] == 400 and 0 < rec["positives"] < 400


def test_cli_pairs_end_to_end(tmp_path: Path) -> None:
    texts = sample_texts(200)
    pairs = pairs_from_corpus(texts, copies=100, seed=9)
    f = tmp_path / "pairs.jsonl"
    f.write_text(
        "".join(json.dumps({"a": p.a, "b": p.b, "label": p.label}) + "\n" for p in pairs),
        encoding="utf-8",
    )
    proc = neardup("calibrate", "--pairs", str(f), "--out", str(tmp_path / "o"), "--json")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["policy"]["verifier"] == "jaccard" and rec["f1"] >= 0.95


def test_cli_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    proc = neardup("calibrate", "--pairs", str(bad), "--out", str(tmp_path / "o"))
    assert proc.returncode == 1 and "bad.jsonl:1: invalid JSON" in proc.stderr
    proc = neardup("calibrate", "--pairs", str(bad), "--max-k", "99")
    assert proc.returncode == 2 and "--max-k 99 is out of range" in proc.stderr
    proc = neardup("calibrate")
    assert proc.returncode == 2 and "one of the arguments --pairs --corpus is required" in (
        proc.stderr
    )


def test_scores_and_progress_of_the_fast_path() -> None:
    texts = sample_texts(300)
    made: list[int] = []
    pairs = pairs_from_corpus(texts, copies=130, seed=2, progress=made.append)
    assert sum(made) == len(pairs) == 260
    scored: list[int] = []
    cal = calibrate(pairs, progress=scored.append)
    assert sum(scored) == len(pairs)
    policy = Policy.default()
    for i, p in enumerate(pairs[:80]):
        a, b = policy.prepare(p.a), policy.prepare(p.b)
        assert cal.scores["cosine"][i] == pytest.approx(cosine(a, b))
        lev = levenshtein(a, b)
        # (scores under the lowest threshold evaluated, 0.5, are 0)
        assert cal.scores["levenshtein"][i] == pytest.approx(lev if lev >= 0.5 else 0.0)


def test_long_texts_are_cut_to_max_chars() -> None:
    texts = sample_texts(100)
    texts[7] = texts[7] * 2000  # (hundreds of thousands of characters)
    pairs = pairs_from_corpus(texts, copies=60, seed=1, max_chars=5000)
    # (an edited copy may grow by the spans inserted into it)
    assert max(len(p.a) for p in pairs) <= 5000 and max(len(p.b) for p in pairs) <= 5000 * 1.5
    with pytest.raises(ValueError, match="max_chars must be >= 1"):
        pairs_from_corpus(texts, max_chars=0)


def test_a_long_page_is_cut_by_its_main_text_not_its_markup() -> None:
    # a page whose markup starts with more than max_chars of style: cut raw, nothing visible
    # would be left; its main text is what the policy compares, so that is what is cut
    from neardup.htmltext import main_text

    head = "<html><head><style>" + "p.note { color: #333; margin: 0 }\n" * 200 + "</style></head>"
    pages = [f"{head}<body><article><p>{t}</p></article></body></html>" for t in sample_texts(60)]
    assert all(len(p) > 6000 for p in pages)
    pairs = pairs_from_corpus(pages, copies=60, seed=3, max_chars=5000)
    mains = {main_text(p)[:5000] for p in pages}
    policy = Policy.default()
    assert {p.a for p in pairs} <= mains  # (each pair starts from a text of the corpus)
    assert all(policy.prepare(p.a) for p in pairs)
    assert any(p.label for p in pairs) and not all(p.label for p in pairs)


def test_cli_shows_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    # stderr on a pseudo-terminal: the bars of pairs made and scored are drawn there
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "neardup", "calibrate", "--corpus", str(SAMPLE), "--copies",
         "150", "--out", str(tmp_path / "o")],
        stdout=subprocess.PIPE, stderr=secondary, text=True,
    )  # fmt: skip
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # (the terminal closed: the process is done)
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    assert proc.wait(timeout=300) == 0
    assert b"making pairs" in shown and b"scoring pairs" in shown and b"pairs/s" in shown


def test_the_printed_way_to_use_the_recommendation_works(tmp_path: Path) -> None:
    """The command calibrate prints runs as printed: `neardup dedup ... --threshold T` for the
    jaccard verifier (it used to print --k, which dedup's MinHash candidates ignore, and
    `--verifier cosine`, which dedup refuses); for another verifier, policy.json for the
    service or the API."""
    import shlex

    rng = random.Random(2)
    words = ["".join(rng.choice("abcdefghij") for _ in range(2)) for _ in range(600)]
    rows = []
    for _ in range(150):  # (copies with their words shuffled: cosine wins, jaccard fails)
        a = [rng.choice(words) for _ in range(60)]
        b = a[:]
        rng.shuffle(b)
        c = a[:30] + [rng.choice(words) for _ in range(30)]
        rows += [{"a": " ".join(a), "b": " ".join(b), "label": True}]
        rows += [{"a": " ".join(a), "b": " ".join(c), "label": False}]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    proc = neardup("calibrate", "--pairs", str(pairs), "--out", str(tmp_path / "cal"), "-q")
    assert proc.returncode == 0, proc.stderr
    policy = json.loads((tmp_path / "cal" / "policy.json").read_text())
    assert Policy.from_dict(policy).verifier == policy["verifier"] != "jaccard"
    use = next(line for line in proc.stdout.splitlines() if line.startswith("to use it:"))
    assert "neardup serve --data DIR --policy policy.json" in use and "jaccard only" in use
    page = (tmp_path / "cal" / "calibrate.html").read_text("utf-8")
    assert html.escape(how_to_use(policy)) in page

    jaccard = how_to_use({**policy, "verifier": "jaccard", "threshold": 0.85})
    command = shlex.split(jaccard.split(" (", 1)[0])
    assert command[:2] == ["neardup", "dedup"] and "--k" not in command
    (tmp_path / "in.jsonl").write_text('{"text": "a text"}\n{"text": "a text"}\n', "utf-8")
    run = [str(tmp_path / "in.jsonl") if a == "INPUT" else a for a in command[2:]]
    run = [str(tmp_path / "out.jsonl") if a == "OUTPUT" else a for a in run]
    r = neardup("dedup", *run)
    assert r.returncode == 0, r.stderr
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 1


def test_an_out_that_is_a_file_is_refused_before_the_work(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("x")
    proc = neardup("calibrate", "--corpus", str(SAMPLE), "--out", str(tmp_path / "taken"))
    assert proc.returncode == 2 and "is a file, not a directory" in proc.stderr


def _write_pairs(path: Path, rows: list[tuple[str, str, bool]]) -> Path:
    path.write_text(
        "".join(json.dumps({"a": a, "b": b, "label": label}) + "\n" for a, b, label in rows),
        encoding="utf-8",
    )
    return path


def test_pairs_of_one_label_are_refused_before_any_output(tmp_path: Path) -> None:
    """(pairs with no near-duplicate, or no other pair, scored F1 = 1.000 at every setting and
    wrote a policy of threshold 0.50 and k 0)"""
    texts = sample_texts(40)
    others = [(texts[i], texts[i + 1], False) for i in range(0, 40, 2)]
    copies = [(t, t + " and one more", True) for t in texts[:20]]
    for rows, said in [
        (others, "none of the 20 labelled pairs of "),
        (copies, "every one of the 20 labelled pairs of "),
    ]:
        pairs = _write_pairs(tmp_path / "pairs.jsonl", rows)
        out = tmp_path / "cal"
        proc = neardup("calibrate", "--pairs", str(pairs), "--out", str(out), "-q")
        assert proc.returncode == 1, proc.stdout
        assert said in proc.stderr and "nothing can be calibrated" in proc.stderr, proc.stderr
        assert not out.exists() and "recommended" not in proc.stdout
        with pytest.raises(ValueError, match="nothing can be calibrated"):
            calibrate([LabelledPair(a, b, label) for a, b, label in rows])
    # a corpus whose texts are all alike makes no pair that is not a near-duplicate
    same = " ".join(f"the quick brown fox jumps over the lazy dog, number {i}" for i in range(30))
    corpus = tmp_path / "same.jsonl"
    corpus.write_text(json.dumps({"text": same}) + "\n" + json.dumps({"text": same}) + "\n")
    proc = neardup(
        "calibrate", "--corpus", str(corpus), "--copies", "20", "--label-threshold", "0.05",
        "--out", str(tmp_path / "cal"), "-q",
    )  # fmt: skip
    assert proc.returncode == 1 and "made from" in proc.stderr, proc.stderr
    assert "every one of the" in proc.stderr and "5-gram Jaccard >= 0.05" in proc.stderr
    assert not (tmp_path / "cal").exists()


def test_an_out_that_cannot_be_written_is_refused_before_the_work(tmp_path: Path) -> None:
    """(an --out under a file, or whose calibrate.png is a directory, gave a traceback after
    all the scoring)"""
    # (pairs that are not JSON: refused before they are read, the --out is what is named)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    (tmp_path / "file").write_text("x")
    (tmp_path / "taken" / "calibrate.png").mkdir(parents=True)
    for out, said in [
        ("file/sub", f"--out {tmp_path / 'file/sub'}: {tmp_path / 'file'} is not a directory"),
        ("taken", f"{tmp_path / 'taken' / 'calibrate.png'} is a directory, not a file"),
    ]:
        proc = neardup("calibrate", "--pairs", str(bad), "--out", str(tmp_path / out))
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and "invalid JSON" not in proc.stderr
    # an error while writing is said, not a traceback
    texts = sample_texts(20)
    pairs = _write_pairs(
        tmp_path / "pairs.jsonl",
        [(texts[i], texts[i + 1], False) for i in range(0, 10, 2)]
        + [(t, t + " and one more", True) for t in texts[10:15]],
    )
    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "recommendation.json").symlink_to(tmp_path / "nowhere" / "r.json")
    proc = neardup("calibrate", "--pairs", str(pairs), "--out", str(tmp_path / "cal"), "-q")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"neardup calibrate: --out {tmp_path / 'cal'}: " in proc.stderr
    assert "No such file or directory" in proc.stderr


def test_corpus_format_and_max_docs(tmp_path: Path) -> None:
    """(a corpus of an unknown extension was told to "give --format", which calibrate had not,
    with exit 1; --max-docs 0 or -3 was taken, and the corpus then said to hold 1 text)"""
    corpus = tmp_path / "news.data"
    corpus.write_text("".join(SAMPLE.read_text("utf-8").splitlines(True)[:200]), "utf-8")
    proc = neardup("calibrate", "--corpus", str(corpus), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "or give --format" in proc.stderr, proc.stderr
    assert not (tmp_path / "o").exists()
    proc = neardup(
        "calibrate", "--corpus", str(corpus), "--format", "jsonl", "--copies", "40",
        "--out", str(tmp_path / "o"), "--json", "-q",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["pairs"] == 80
    for value in ("0", "-3", "1"):
        proc = neardup("calibrate", "--corpus", str(SAMPLE), "--max-docs", value)
        assert proc.returncode == 2, (value, proc.stderr)
        assert f"--max-docs must be >= 2, got {value}" in proc.stderr
