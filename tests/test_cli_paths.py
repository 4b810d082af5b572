"""``neardup dedup``'s outputs and awkward inputs: paths refused before any work, outputs
written through links and into FIFOs, lone surrogates in ids and texts, times out of range,
malformed CSV, and a kept set that does not depend on the input's format."""

from __future__ import annotations

import csv
import json
import os
import random
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from _helpers import neardup

TWO = [
    {"id": 1, "text": "alpha beta gamma delta epsilon zeta eta theta"},
    {"id": 2, "text": "alpha beta gamma delta epsilon zeta eta theta"},
]


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_bad_output_paths_are_refused_before_any_work(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", TWO)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("one text\n")
    for args, said in [
        (["-o", "out.jsonl", "--clusters", "nodir/cl.jsonl"], "--clusters nodir/cl.jsonl: no dir"),
        (["-o", "nodir/out.jsonl"], "-o nodir/out.jsonl: no directory"),
        (["-o", "out.jsonl", "--pairs", "nodir/p.jsonl"], "--pairs nodir/p.jsonl: no directory"),
        (["-o", "out.jsonl", "--clusters", "out.jsonl"], "-o and --clusters are both out.jsonl"),
        (["-o", "in.jsonl"], "in.jsonl is both an input and an output"),
    ]:
        r = neardup("dedup", src.name, *args, cwd=tmp_path)
        assert r.returncode == 2 and said in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
        assert not (tmp_path / "out.jsonl").exists(), args  # (nothing written)
    r = neardup("dedup", "d", "-o", "d/kept", cwd=tmp_path)
    assert r.returncode == 2 and "-o d/kept is inside the input d" in r.stderr
    assert not (tmp_path / "d" / "kept").exists()


def test_an_output_through_a_link_or_into_a_fifo_stays_what_it_is(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", TWO)
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "out.jsonl").write_text("OLD\n")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real" / "out.jsonl")
    r = neardup("dedup", src.name, "-o", "link.jsonl", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "link.jsonl").is_symlink()
    kept = [json.loads(x) for x in (tmp_path / "real" / "out.jsonl").read_text().splitlines()]
    assert kept == TWO[:1]
    assert [p.name for p in (tmp_path / "real").iterdir()] == ["out.jsonl"]  # (no partial left)

    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    r = neardup("dedup", src.name, "-o", fifo.name, "-q", cwd=tmp_path)
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    assert fifo.is_fifo() and [json.loads(x) for x in got[0].splitlines()] == TWO[:1]


def test_lone_surrogates_in_ids_and_texts_reach_every_output(tmp_path: Path) -> None:
    # (the JSONL reader takes an escaped lone surrogate as it is; UTF-8 cannot hold one)
    text = "alpha beta gamma delta epsilon zeta eta theta"
    (tmp_path / "in.jsonl").write_text(
        f'{{"id": "a\\ud800", "text": "{text} \\ud83d"}}\n{{"id": "b", "text": "{text} \\ud83d"}}\n'
    )
    r = neardup(
        "dedup", "in.jsonl", "-o", "out.jsonl", "--clusters", "cl.jsonl", "--pairs", "p.jsonl",
        "--report", "r.html", "-q", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    clusters = [json.loads(x) for x in (tmp_path / "cl.jsonl").read_text().splitlines()]
    assert "a\ud800" in json.dumps(clusters, ensure_ascii=False)  # (read back as it was)
    pairs = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [(p["a"], p["b"]) for p in pairs] == [("a\ud800", "b")]
    assert (tmp_path / "r.html").read_text(encoding="utf-8")


def test_times_out_of_range_and_times_where_there_are_no_fields(tmp_path: Path) -> None:
    (tmp_path / "big.jsonl").write_text(
        '{"id": 1, "text": "alpha beta gamma delta", "t": 1' + "0" * 400 + "}\n"
        '{"id": 2, "text": "other text", "t": 5}\n'
    )
    args = ("--time-field", "t", "--keep", "newest")
    r = neardup("dedup", "big.jsonl", "-o", "o.jsonl", *args, "--on-error", "skip", cwd=tmp_path)
    assert r.returncode == 0 and "too large" in r.stderr, r.stderr
    r = neardup("dedup", "big.jsonl", "-o", "o.jsonl", *args, cwd=tmp_path)
    assert r.returncode == 1 and "too large" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "t.txt").write_text("hello world one\nhello world one\n")
    r = neardup("dedup", "t.txt", "-o", "o.txt", *args, cwd=tmp_path)
    assert r.returncode == 2 and "--time-field needs records with fields" in r.stderr


def test_malformed_csv_is_an_error_and_a_skipped_input_is_not_written(tmp_path: Path) -> None:
    (tmp_path / "sq.csv").write_text(
        'id,text\n1,first record text\n2,"a stray quote\n3,third record text\n'
    )
    r = neardup("dedup", "sq.csv", "-o", "out.csv", cwd=tmp_path)
    assert r.returncode == 1 and "sq.csv" in r.stderr and "end of data" in r.stderr, r.stderr
    assert not (tmp_path / "out.csv").exists()
    (tmp_path / "good.csv").write_text("id,text\n1,hello world one\n2,hello world two\n")
    (tmp_path / "nobody.csv").write_text("id,body\n3,other\n")
    for inputs in (["good.csv", "nobody.csv"], ["nobody.csv", "good.csv"]):
        r = neardup("dedup", *inputs, "-o", "out.csv", "--on-error", "skip", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        with open(tmp_path / "out.csv", newline="") as f:
            assert list(csv.reader(f)) == [["id", "text"], ["1", "hello world one"],
                                           ["2", "hello world two"]]  # fmt: skip


def test_whether_pages_are_learnt_whole_does_not_depend_on_the_format(tmp_path: Path) -> None:
    # A page among the first documents of an input makes the boilerplate pass run over the
    # whole corpus. It was decided by each input's first block: 2 MiB of JSONL, 8,192 CSV or
    # Parquet rows; a page at row 3,000 was seen unless the records were long.
    # 8 pages in each of the first two chunks of 16,384 documents, with 3 lines alike: too few
    # in one chunk for those to be boilerplate, enough in all; a text after them is the story
    # of one page, so a copy of it only where the boilerplate was learnt over the whole corpus
    rng = random.Random(1)
    words = [f"w{i}" for i in range(5000)]
    shared = "".join(
        f"<p>Our site shares this paragraph number {j} on every page.</p>" for j in range(3)
    )
    rows: list[dict[str, object]] = [
        {"id": i, "text": " ".join(rng.choice(words) for _ in range(12))} for i in range(17000)
    ]
    stories = {}
    for i in [*range(3000, 3008), *range(16500, 16508)]:
        stories[i] = " ".join(rng.choice(words) for _ in range(30))
        rows[i] = {"id": i, "text": f"<html><body><p>{stories[i]}</p>{shared}</body></html>"}
    rows[16600] = {"id": 16600, "text": stories[16500]}
    _jsonl(tmp_path / "a.jsonl", rows)
    _jsonl(tmp_path / "b.jsonl", [{**r, "meta": "x" * 2000} for r in rows])
    with open(tmp_path / "c.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "text"])
        w.writerows([r["id"], r["text"]] for r in rows)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    kept = set()
    for name in ("a.jsonl", "b.jsonl", "c.csv", "d.parquet"):
        out = "out-" + name
        r = neardup("dedup", name, "-o", out, "--verbose", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        kept.add(r.stderr.split("kept ", 1)[1].split(",")[0])
    assert len(kept) == 1, kept


def test_outputs_written_in_place_and_directories_the_job_makes(tmp_path: Path) -> None:
    import shutil
    import subprocess

    _jsonl(tmp_path / "in.jsonl", TWO)
    # -o /dev/stdout names what the shell opened, here a file holding a line already: the
    # output follows that line (it replaced the file)
    with open(tmp_path / "log.txt", "w") as f:
        f.write("first\n")
        f.flush()
        exe = shutil.which("neardup")
        assert exe is not None
        r = subprocess.run(
            [exe, "dedup", "in.jsonl", "-o", "/dev/stdout", "-q"],
            cwd=tmp_path, stdout=f, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = (tmp_path / "log.txt").read_text().splitlines()
    assert lines[0] == "first" and [json.loads(x) for x in lines[1:]] == TWO[:1]
    # a report's directory, and a directory output's, are made (as before the checks)
    r = neardup("dedup", "in.jsonl", "-o", "k.jsonl", "--report", "reports/r.html", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "reports" / "r.html").exists(), r.stderr
    (tmp_path / "d1").mkdir()
    (tmp_path / "d1" / "a.txt").write_text("one text of the directory\n")
    r = neardup("dedup", "d1", "-o", "out/nested", "--report", "out/r.html", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "out" / "nested" / "a.txt").exists(), r.stderr


def test_an_output_file_that_is_a_directory_is_refused_before_any_work(tmp_path: Path) -> None:
    """(an output file that was a directory failed when it was opened, after the work: a
    traceback from index query -o, exit 1 from dedup); a directory output may be one"""
    _jsonl(tmp_path / "in.jsonl", TWO)
    (tmp_path / "there").mkdir()
    for args in (["-o", "there"], ["-o", "out.jsonl", "--clusters", "there"]):
        r = neardup("dedup", "in.jsonl", *args, cwd=tmp_path)
        assert r.returncode == 2 and "there is a directory, not a file" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and not (tmp_path / "out.jsonl").exists()
        assert not list((tmp_path / "there").iterdir())
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "a.txt").write_text("one text of the directory\n")
    r = neardup("dedup", "pages", "-o", "there", "-q", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "there" / "a.txt").exists(), r.stderr
