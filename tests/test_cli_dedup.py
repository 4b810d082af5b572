"""`neardup dedup` end to end through the installed command, on real text (the shipped sample
corpus) in every input format: kept rows, clusters, the report, bad input and exit codes."""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _helpers import SAMPLE, neardup, words
from neardup import io as nio
from neardup.corpus import CorpusDeduper

N_ROWS = 600


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    with open(SAMPLE, encoding="utf-8") as f:
        all_rows = [json.loads(line) for line in f]
    # the first N rows plus exact and edited copies of some of them, so clusters are certain
    out = all_rows[:N_ROWS]
    for i, r in enumerate(out[:40]):
        copy = dict(r, id=f"copy{i:02d}")
        if i % 2:
            copy["text"] = r["text"] + " 。"
        out.append(copy)
    return out


@pytest.fixture(scope="module")
def expected(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the engine decides on these texts (input order keep): the CLI must agree."""
    d = CorpusDeduper()
    d.feed([r["text"] for r in rows])
    res = d.result()
    rep = res.representative
    return {
        "kept": [r["id"] for r, k in zip(rows, res.kept) if k],
        "rep": {rows[i]["id"]: rows[int(rep[i])]["id"] for i in range(len(rows))},
        "distance": {rows[i]["id"]: int(res.distance[i]) for i in range(len(rows))},
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]], compression: str | None = None) -> None:
    with nio.open_write(str(path), compression) as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False).encode() + b"\n")


def read_docs(path: Path, fmt: str | None = None) -> list[nio.Doc]:
    """Every document of ``path``; fails on a bad one."""
    docs = []
    for source in nio.input_sources(str(path), fmt):
        for d in nio.read_docs(source):
            assert isinstance(d, nio.Doc), str(d)
            docs.append(d)
    return docs


def read_ids(path: Path, fmt: str | None = None) -> list[Any]:
    return [d.id for d in read_docs(path, fmt)]


# ---------------------------------------------------------------------------------------------
# JSONL: kept rows, byte-exact output, clusters


def test_jsonl_kept_rows_and_clusters(
    tmp_path: Path, rows: list[dict[str, Any]], expected: dict[str, Any]
) -> None:
    src = tmp_path / "in.jsonl"
    write_jsonl(src, rows)
    out, clusters = tmp_path / "kept.jsonl", tmp_path / "clusters.jsonl"
    r = neardup("dedup", str(src), "-o", str(out), "--clusters", str(clusters))
    assert r.returncode == 0, r.stderr
    kept_lines = out.read_bytes().splitlines(keepends=True)
    by_id = {json.loads(line)["id"]: line for line in src.read_bytes().splitlines(keepends=True)}
    assert [json.loads(line)["id"] for line in kept_lines] == expected["kept"]
    # records are copied byte for byte, every field kept, in input order
    assert kept_lines == [by_id[i] for i in expected["kept"]]
    removed = len(rows) - len(expected["kept"])
    assert removed >= 40  # the planted copies at least
    for i in range(40):
        assert f"copy{i:02d}" not in expected["kept"]

    cl = [json.loads(line) for line in clusters.read_text(encoding="utf-8").splitlines()]
    assert all(set(c) == {"id", "cluster", "kept", "distance"} for c in cl)
    members = {c["id"]: c for c in cl}
    assert len(members) == len(cl)
    kept_set = set(expected["kept"])
    for c in cl:
        assert c["cluster"] == expected["rep"][c["id"]]
        assert c["kept"] == (c["id"] == c["cluster"]) == (c["id"] in kept_set)
        assert c["distance"] == expected["distance"][c["id"]]
        assert members[c["cluster"]]["kept"] is True
    # every removed row is in the clusters file; clusters are grouped, the kept row first
    assert {c["id"] for c in cl if not c["kept"]} == {x["id"] for x in rows} - kept_set
    seen: list[Any] = []
    for c in cl:
        if c["kept"]:
            assert c["cluster"] not in seen
            seen.append(c["cluster"])
        else:
            assert seen[-1] == c["cluster"]
    assert "kept" in r.stderr and f"removed {removed:,}" in r.stderr
    # the output was staged aside and renamed whole
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "clusters.jsonl",
        "in.jsonl",
        "kept.jsonl",
    ]


def test_summary_and_quiet(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    src = tmp_path / "in.jsonl"
    write_jsonl(src, rows[:100])
    r = neardup("dedup", str(src), "-o", str(tmp_path / "o.jsonl"))
    assert r.returncode == 0
    assert re.search(r"read 100 documents, kept \d+, removed \d+ in \d+ clusters", r.stderr)
    assert "\r" not in r.stderr  # no progress bar when stderr is not a terminal
    q = neardup("dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--quiet")
    assert q.returncode == 0 and q.stderr == "" and q.stdout == ""


# ---------------------------------------------------------------------------------------------
# every format gives the same decision and re-reads in its own format


def _make_input(tmp_path: Path, rows: list[dict[str, Any]], fmt: str) -> tuple[Path, Path]:
    """The rows as ``fmt``; returns (input, output path)."""
    if fmt in ("jsonl.gz", "jsonl.xz", "jsonl.zst"):
        src = tmp_path / f"in.{fmt}"
        write_jsonl(src, rows, fmt.split(".")[1])
        return src, tmp_path / f"out.{fmt}"
    if fmt in ("csv", "tsv"):
        src = tmp_path / f"in.{fmt}"
        with open(src, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, delimiter="," if fmt == "csv" else "\t")
            w.writerow(["id", "published", "text"])
            for r in rows:
                w.writerow([r["id"], r["published"], r["text"]])
        return src, tmp_path / f"out.{fmt}"
    if fmt == "parquet":
        src = tmp_path / "in.parquet"
        pq.write_table(
            pa.table({k: [r[k] for r in rows] for k in ("id", "lang", "text")}),
            src,
            row_group_size=100,
        )
        return src, tmp_path / "out.parquet"
    if fmt == "txt":
        src = tmp_path / "in.txt.gz"
        with gzip.open(src, "wt", encoding="utf-8") as f:
            for r in rows:
                f.write(r["text"].replace("\n", " ") + "\n")
        return src, tmp_path / "out.txt.gz"
    assert fmt == "dir"
    src = tmp_path / "docs"
    for i, r in enumerate(rows):
        sub = src / f"g{i // 100}"
        sub.mkdir(parents=True, exist_ok=True)
        if i % 3 == 0:
            body = r["text"].replace("&", "&amp;").replace("<", "&lt;")
            (sub / f"{i:04d}.html").write_text(
                f"<html><head><style>b{{}}</style></head><body><pre>{body}</pre></body></html>",
                encoding="utf-8",
            )
        else:
            (sub / f"{i:04d}.txt").write_text(r["text"], encoding="utf-8")
    return src, tmp_path / "out"


@pytest.mark.parametrize(
    "fmt", ["jsonl.gz", "jsonl.xz", "jsonl.zst", "csv", "tsv", "parquet", "txt", "dir"]
)
def test_every_format(tmp_path: Path, rows: list[dict[str, Any]], fmt: str) -> None:
    sub = rows[:300] + rows[N_ROWS : N_ROWS + 20]
    src, out = _make_input(tmp_path, sub, fmt)
    texts = [d.text for d in read_docs(src)]
    assert len(texts) == len(sub)
    engine = CorpusDeduper()
    engine.feed(texts)
    kept_rows = np.flatnonzero(engine.result().kept).tolist()
    assert len(kept_rows) <= len(sub) - 20

    r = neardup("dedup", str(src), "-o", str(out), "--clusters", str(tmp_path / "c.jsonl"))
    assert r.returncode == 0, r.stderr
    # the output re-reads in the same format and holds exactly the kept documents, in order
    back = read_docs(out)
    assert [d.text for d in back] == [texts[i] for i in kept_rows]
    if fmt == "parquet":
        table = pq.read_table(out)
        assert table.column_names == ["id", "lang", "text"]
        assert table.column("lang").to_pylist() == [sub[i]["lang"] for i in kept_rows]
    elif fmt in ("csv", "tsv"):
        with open(out, encoding="utf-8", newline="") as f:
            got = list(csv.reader(f, delimiter="," if fmt == "csv" else "\t"))
        assert got[0] == ["id", "published", "text"]
        assert [g[1] for g in got[1:]] == [sub[i]["published"] for i in kept_rows]
    cl = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    removed = {c["id"] for c in cl if not c["kept"]}
    assert len(removed) == len(sub) - len(kept_rows)
    if fmt == "txt":  # no id field: ids are row numbers
        assert removed == set(range(len(sub))) - set(kept_rows)
    elif fmt == "dir":
        assert all(re.fullmatch(r"g\d/\d{4}\.(txt|html)", c["id"]) for c in cl)


# ---------------------------------------------------------------------------------------------
# keep policies


def test_keep_longest_and_newest(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    src = tmp_path / "in.jsonl"
    write_jsonl(src, rows)
    by_id = {r["id"]: r for r in rows}
    for policy, extra in (("longest", []), ("newest", ["--time-field", "published"])):
        clusters = tmp_path / f"c-{policy}.jsonl"
        r = neardup(
            "dedup", str(src), "-o", str(tmp_path / f"o-{policy}.jsonl"), "--keep", policy,
            "--clusters", str(clusters), *extra,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        cl = [json.loads(line) for line in clusters.read_text().splitlines()]
        assert any(not c["kept"] for c in cl)
        for c in cl:
            kept, this = by_id[c["cluster"]], by_id[c["id"]]
            if policy == "longest":
                assert len(kept["text"]) >= len(this["text"])
            else:
                assert nio.parse_time(kept["published"]) >= nio.parse_time(this["published"])
    # the planted copy that is longer than its original wins under "longest"
    cl = [json.loads(line) for line in (tmp_path / "c-longest.jsonl").read_text().splitlines()]
    kept_ids = {c["id"] for c in cl if c["kept"]}
    assert "copy01" in kept_ids and rows[1]["id"] not in kept_ids


# ---------------------------------------------------------------------------------------------
# the report


def test_report_is_self_contained_and_escaped(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    evil = "<script>alert('x')</script> & <b>bold</b> " + rows[0]["text"]
    data = rows[:200] + [dict(rows[0], id="evil1", text=evil), dict(rows[0], id="evil2", text=evil)]
    src = tmp_path / "in.jsonl"
    write_jsonl(src, data)
    report = tmp_path / "report.html"
    r = neardup("dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--report", str(report))
    assert r.returncode == 0, r.stderr
    page = report.read_text(encoding="utf-8")
    listing = (tmp_path / "report-clusters" / "page-0001.html").read_text(encoding="utf-8")
    for html in (page, listing):
        assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
        assert "<script" not in html  # no scripts of ours, and the corpus's are escaped
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # no external assets
    # (evil1 is kept, evil2 its exact copy: the text shows on its cluster's line)
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in listing
    assert page.count("<svg") == 3 and "Hamming distance" in page  # similarity, 2 distances
    assert "Largest clusters" in page and ("<del>" in page or "<ins>" in page)
    assert re.search(r"<th>read</th><td[^>]*>202</td>", page)


# ---------------------------------------------------------------------------------------------
# bad input and exit codes


def test_bad_records_fail_or_skip(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    src = tmp_path / "in.jsonl"
    good = [json.dumps(r, ensure_ascii=False) for r in rows[:50]]
    lines = [*good[:10], "{broken", *good[10:20], '{"title": "no text"}', *good[20:]]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "o.jsonl"
    r = neardup("dedup", str(src), "-o", str(out))
    assert r.returncode == 1
    assert f"{src}:11: not valid JSON" in r.stderr and "--on-error skip" in r.stderr
    r = neardup("dedup", str(src), "-o", str(out), "--on-error", "skip")
    assert r.returncode == 0, r.stderr
    assert f"skipped {src}:11: not valid JSON" in r.stderr
    assert f"skipped {src}:22: no field 'text' (fields: 'title')" in r.stderr
    assert "read 50 documents (2 bad records skipped)" in r.stderr
    ids = read_ids(out)
    assert set(ids) <= {x["id"] for x in rows[:50]} and len(ids) >= 40


def test_non_string_text_in_csv_and_parquet(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "text": ["alpha beta", None, "gamma"]}), src)
    r = neardup("dedup", str(src), "-o", str(tmp_path / "o.parquet"))
    assert r.returncode == 1 and f"{src}:2: field 'text' is null, expected a string" in r.stderr
    r = neardup("dedup", str(src), "-o", str(tmp_path / "o.parquet"), "--on-error", "skip")
    assert r.returncode == 0
    assert pq.read_table(tmp_path / "o.parquet").column("id").to_pylist() == [1, 3]
    csv_src = tmp_path / "in.csv"
    csv_src.write_text("id,body\n1,x\n")
    r = neardup("dedup", str(csv_src), "-o", str(tmp_path / "o.csv"))
    assert r.returncode == 1
    assert f"{csv_src}:1: no column 'text' in the header (columns: id, body)" in r.stderr
    r = neardup("dedup", str(csv_src), "-o", str(tmp_path / "o.csv"), "--text-field", "body")
    assert r.returncode == 0 and (tmp_path / "o.csv").read_text() == "id,body\n1,x\n"


def test_a_csv_row_that_cannot_be_read_ends_the_input_at_its_line(tmp_path: Path) -> None:
    """A quote in the middle of a CSV field, a quote left open to the end, and a TSV text that
    starts with a quote: named at the line where the row starts, and with --on-error skip the
    rows before it are written (the writer read the row again and stopped with a traceback)."""
    cases = {
        "mid.csv": ('id,text\n1,alpha beta gamma\n2,"bad "quote here\n3,def\n', 3),
        "open.csv": ('id,text\n1,alpha beta gamma\n2,"open quote\n3,x\n4,y\n', 3),
        "said.tsv": ('id\ttext\n1\talpha beta gamma\n2\t"Hello" she said\n', 3),
    }
    for name, (data, line) in cases.items():
        src = tmp_path / name
        src.write_text(data)
        out = tmp_path / ("o" + src.suffix)
        r = neardup("dedup", str(src), "-o", str(out))
        assert r.returncode == 1 and f"{src}:{line}: cannot read on" in r.stderr, r.stderr
        r = neardup("dedup", str(src), "-o", str(out), "--on-error", "skip")
        assert r.returncode == 0, r.stderr
        assert f"skipped {src}:{line}: cannot read on" in r.stderr
        sep = "\t" if name.endswith(".tsv") else ","
        assert out.read_text().splitlines() == [f"id{sep}text", f"1{sep}alpha beta gamma"]


def test_integer_ids_beyond_64_bits_are_refused_not_rounded(tmp_path: Path) -> None:
    """The JSON parser reads an integer beyond 64 bits as a float: such an id was rounded
    (2**64 + 1 became 18446744073709551616, -2**63 - 1 the valid -2**63) and written in
    --clusters; it is a bad record, and ids up to 2**63 - 1 and pandas' whole floats are read."""
    text = "The quick brown fox jumps over the lazy dog near the river bank."
    ids = [1, -(2**63) - 1, 2**64 + 1, 12345678901234567891234, 2**63 - 1]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": text}) + "\n" for i in ids))
    src_float = tmp_path / "float.jsonl"
    src_float.write_text(json.dumps({"id": 7.0, "text": text}) + "\n")
    out, clusters = tmp_path / "o.jsonl", tmp_path / "c.jsonl"
    r = neardup("dedup", str(src), "-o", str(out))
    assert r.returncode == 1 and f"{src}:2: id " in r.stderr, r.stderr
    assert "too large to read exactly" in r.stderr
    r = neardup("dedup", str(src), str(src_float), "-o", str(out), "--clusters", str(clusters),
                "--on-error", "skip")  # fmt: skip
    assert r.returncode == 0 and "3 bad records skipped" in r.stderr, r.stderr
    assert [c["id"] for c in map(json.loads, clusters.read_text().splitlines())] == [
        1,
        2**63 - 1,
        7,
    ]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["missing.jsonl", "-o", "o.jsonl"], 1, "missing.jsonl: no such file or directory"),
        (["in.dat", "-o", "o.jsonl"], 2, "in.dat: cannot tell the format from the name"),
        (["in.jsonl", "-o", "o.csv"], 2, "the name says csv but the inputs are jsonl"),
        (["in.jsonl", "in.txt", "-o", "o.jsonl"], 2, "inputs mix formats"),
        (["in.jsonl", "-o", "o.jsonl", "--keep", "newest"], 2, "--keep newest needs --time-field"),
        (["in.jsonl", "-o", "o.jsonl", "--k", "65"], 2, "--k 65 is out of range: 0..64"),
        (["in.jsonl", "-o", "o.jsonl", "--threshold", "2"], 2, "--threshold 2.0 is out of range"),
        (["in.jsonl", "-o", "o.jsonl", "--preset", "nope"], 2, "--preset: invalid choice: 'nope'"),
        (["in.jsonl", "-o", "in.jsonl"], 2, "in.jsonl is both an input and an output"),
        (["in.jsonl", "-o", "o.jsonl", "--keep", "oldest"], 2, "invalid choice: 'oldest'"),
        (["in.jsonl"], 2, "-o/--output"),
        (["/dev/stdin", "--format", "jsonl", "-o", "o.jsonl"], 2, "is not a regular file"),
        (
            ["in.jsonl", "-o", "o.jsonl", "--keep", "newest", "--time-field", "when"],
            1,
            "in.jsonl:1: no time field 'when'",
        ),
    ],
)
def test_usage_and_input_errors(
    tmp_path: Path, rows: list[dict[str, Any]], argv: list[str], code: int, message: str
) -> None:
    write_jsonl(tmp_path / "in.jsonl", rows[:20])
    (tmp_path / "in.dat").write_text("x\n")
    (tmp_path / "in.txt").write_text("x\n")
    r = neardup("dedup", *argv, cwd=tmp_path)
    assert r.returncode == code, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_several_inputs_one_output(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    write_jsonl(a, rows[:300])
    write_jsonl(b, rows[300:], "gz")
    out = tmp_path / "o.jsonl.zst"
    r = neardup("dedup", str(a), str(b), "-o", str(out))
    assert r.returncode == 0, r.stderr
    engine = CorpusDeduper()
    engine.feed([x["text"] for x in rows])
    want = [x["id"] for x, k in zip(rows, engine.result().kept) if k]
    assert read_ids(out) == want


def test_progress_bar_on_a_terminal(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    import fcntl
    import os
    import pty
    import struct
    import termios

    src = tmp_path / "in.jsonl"
    write_jsonl(src, rows * 30)  # enough to be read in several chunks
    exe = shutil.which("neardup")
    assert exe is not None
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    p = subprocess.Popen(
        [exe, "dedup", str(src), "-o", str(tmp_path / "o.jsonl")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert p.wait(timeout=300) == 0
    shown = b"".join(chunks).decode("utf-8", "replace")
    assert "pass 1/3: reading" in shown and "pass 3/3: writing" in shown
    assert "pass 2/3: grouping" in shown and "docs/s" in shown
    assert re.search(r"[\d.]+ ?[kMG]?B/s", shown) and re.search(r"[\d,]+ docs/s", shown)
    assert re.search(r"\d\d:\d\d<(\d\d:\d\d|\?)", shown)  # elapsed<remaining (ETA)
    assert f"read {len(rows) * 30:,} documents" in shown


@pytest.mark.spark
def test_engine_spark_agrees_with_local(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    """`--engine spark` keeps what the local command keeps; with --keep newest here (one Spark
    start is slow: keep first is compared in tests/test_spark.py, in process), so the flags
    reach the Spark job."""
    keep = ["--keep", "newest", "--time-field", "published"]
    src = tmp_path / "in.jsonl"
    write_jsonl(src, rows[:150] + rows[N_ROWS : N_ROWS + 10])
    local, remote = tmp_path / "local.jsonl", tmp_path / "spark.jsonl"
    r = neardup(
        "dedup", str(src), "-o", str(local), "--clusters", str(tmp_path / "cl.jsonl"), *keep
    )
    assert r.returncode == 0, r.stderr
    r = neardup(
        "dedup", str(src), "-o", str(remote), "--engine", "spark",
        "--clusters", str(tmp_path / "cs.jsonl"), *keep,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "neardup dedup (spark)" in r.stderr
    assert nio.spark_parts(str(remote)), "a part-file directory, as Spark writes"
    assert read_ids(remote) == read_ids(local)
    # the part-file directory is an input like a file (here: nothing in it is a copy)
    again = tmp_path / "again.jsonl"
    assert neardup("dedup", str(remote), "-o", str(again)).returncode == 0
    assert read_ids(again) == read_ids(local)
    parts = nio.spark_parts(str(tmp_path / "cs.jsonl")) or []
    clustered = {json.loads(x)["id"] for p in parts for x in Path(p).read_text().splitlines()}
    assert {f"copy{i:02d}" for i in range(10)} <= clustered


def test_empty_documents_are_kept_or_dropped_never_clustered(tmp_path: Path) -> None:
    """Blank texts and pages with nothing visible are nobody's copy (they used to form one
    cluster at similarity 1.0); --empty says whether they stay; a page made of link lists is
    compared by its visible text, not taken for empty."""

    def link_page(words: list[str]) -> str:
        links = "".join(f"<li><a href='/{w}'>qemu-img {w} command</a></li>" for w in words)
        return f"<html><body><nav><ul>{links}</ul></nav></body></html>"

    page_a = link_page(["convert", "create", "info", "resize", "check", "commit", "rebase"])
    page_b = link_page(["bitmap", "dd", "measure", "snapshot", "amend", "compare", "map"])
    script_only = "<html><body><script>render()</script></body></html>"
    text = "A sentence long enough to be compared with others, and a copy of it follows."
    rows = [
        {"id": "blank", "text": ""},
        {"id": "spaces", "text": "   "},
        {"id": "script", "text": script_only},
        {"id": "page-a", "text": page_a},
        {"id": "page-b", "text": page_b},
        {"id": "t1", "text": text},
        {"id": "t2", "text": text + "!"},
    ]
    src = tmp_path / "in.jsonl"
    write_jsonl(src, rows)
    out, clusters = tmp_path / "out.jsonl", tmp_path / "clusters.jsonl"
    r = neardup("dedup", str(src), "-o", str(out), "--clusters", str(clusters))
    assert r.returncode == 0, r.stderr
    assert read_ids(out) == ["blank", "spaces", "script", "page-a", "page-b", "t1"]
    assert "3 documents with no text to compare" in r.stderr and "kept" in r.stderr
    cl = [json.loads(line) for line in clusters.read_text(encoding="utf-8").splitlines()]
    assert {c["id"] for c in cl} == {"t1", "t2"}
    r = neardup("dedup", str(src), "-o", str(out), "--empty", "drop")
    assert r.returncode == 0, r.stderr
    assert read_ids(out) == ["page-a", "page-b", "t1"]
    assert "dropped" in r.stderr
    # (the summary does not count the dropped empty documents as clustered)
    assert "kept 3, removed 4 (1 in 1 cluster, 3 empty)" in r.stderr


def test_pairs_are_every_verified_pair_with_ids(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    """--pairs writes what CorpusDeduper.near_pairs finds, named by the documents' ids, as JSONL
    or Parquet; each pair passes the verifier."""
    src = tmp_path / "in.jsonl"
    write_jsonl(src, rows)
    engine = CorpusDeduper()
    engine.feed([r["text"] for r in rows])
    want_pairs = engine.near_pairs()
    want = {
        (rows[a]["id"], rows[b]["id"])
        for a, b in zip(want_pairs.pairs_a.tolist(), want_pairs.pairs_b.tolist())
    }
    assert len(want) > 40
    for name in ("pairs.jsonl", "pairs.parquet"):
        out, pairs = tmp_path / "out.jsonl", tmp_path / name
        r = neardup("dedup", str(src), "-o", str(out), "--pairs", str(pairs))
        assert r.returncode == 0, r.stderr
        if name.endswith(".parquet"):
            got_rows = pq.read_table(pairs).to_pylist()
        else:
            got_rows = [json.loads(x) for x in pairs.read_text(encoding="utf-8").splitlines()]
        assert {(g["a"], g["b"]) for g in got_rows} == want
        assert all(g["similarity"] >= 0.8 and 0 <= g["distance"] <= 64 for g in got_rows)


def _site_page(site: int, article: str, rng: Any) -> str:
    """A page whose menu and footer the markup does not mark (plain divs): lines that recur in
    every page of the site."""
    menu = "".join(f"<div>Section {k} of site {site} news and more</div>" for k in range(12))
    footer = f"<div>Copyright {site} the site company, all rights reserved, since 1999</div>"
    body = "".join(f"<p>{p}</p>" for p in article.split(". ") if p)
    extra = f"<div>Related story number {rng.randrange(1000)} on site {site}</div>"
    return f"<html><body>{menu}<div>{body}</div>{extra}{footer}</body></html>"


def test_pages_are_prepared_alike_in_any_input_order(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    """Boilerplate is decided over the whole corpus before any page is fingerprinted: the input
    reversed gives the same clusters (up to which member is kept)."""
    import random

    rng = random.Random(4)
    articles = [r["text"] for r in rows if len(r["text"]) > 200][:40]
    pages = []
    for i, a in enumerate(articles):
        pages.append({"id": f"s0-{i}", "text": _site_page(0, a, rng)})
        if i % 3 == 0:  # re-published on the other site
            pages.append({"id": f"s1-{i}", "text": _site_page(1, a, rng)})
    for i in range(40):  # the other site's own articles, so that its boilerplate is learnt
        pages.append({"id": f"s1-own-{i}", "text": _site_page(1, articles[-1 - i % 7][::-1], rng)})

    def clusters(order: list[dict[str, Any]], name: str) -> set[frozenset[str]]:
        src, out, cl = tmp_path / f"{name}.jsonl", tmp_path / f"{name}-out.jsonl", tmp_path / name
        write_jsonl(src, order)
        r = neardup("dedup", str(src), "-o", str(out), "--clusters", str(cl))
        assert r.returncode == 0, r.stderr
        assert ("the corpus is read again" in r.stderr) == (name == "late"), r.stderr
        groups: dict[str, set[str]] = {}
        for line in cl.read_text(encoding="utf-8").splitlines():
            c = json.loads(line)
            groups.setdefault(c["cluster"], set()).add(c["id"])
        return {frozenset(g) for g in groups.values()}

    forward = clusters(pages, "forward")
    backward = clusters(pages[::-1], "backward")
    assert forward == backward
    copies = {frozenset({f"s0-{i}", f"s1-{i}"}) for i in range(0, len(articles), 3)}
    assert copies <= forward
    # pages past the documents probed (1,024 plain texts first): the run starts again with
    # the boilerplate pass (they were prepared by what their chunk taught: with the pages of a
    # site split over chunks, a copy was missed)
    plain = [{"id": f"p{i}", "text": f"plain note {i} " + words(i, n=12)} for i in range(1100)]
    assert clusters(plain + pages, "late") == forward


def test_summary_counts_in_the_right_number(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    text = "One sentence that is copied once, word for word, into the next record."
    write_jsonl(src, [{"id": 1, "text": text}, {"id": 2, "text": text}])
    r = neardup("dedup", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "read 2 documents, kept 1, removed 1 in 1 cluster," in r.stderr
    r = neardup("dedup", "--help")
    assert "{default,seed000" in r.stdout and "(default: 0.8)" in r.stdout


def test_a_directory_without_documents_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "a.png").write_bytes(b"\x89PNG")
    r = neardup("dedup", str(tmp_path / "pics"), "-o", str(tmp_path / "out"))
    assert r.returncode == 1
    assert "holds no .txt, .text, .html or .htm file" in r.stderr


def test_the_parts_sketched_at_once_do_not_change_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts are prepared in chunks, then sketched and decided in smaller parts, whose sizes
    must not change the output: here a line in 12 pages is boilerplate (>= 10 pages), so later
    copies of those pages without it are duplicates. No page is among the first documents: the
    run meets them in pass 1 and starts again with the boilerplate learnt over the whole
    corpus, so even chunks of 32 that split the pages give the same output (learnt chunk by
    chunk, they kept the copies)."""
    from neardup.cli import dedup as cli_dedup
    from neardup.cli import main

    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(4000)]

    def words(n: int) -> str:
        return " ".join(rng.choice(vocab, n))

    texts = [words(20) for _ in range(1100)]  # (no page among the first 1,024)
    line = words(40)
    bodies = [words(30) for _ in range(60)]
    for j, body in enumerate(bodies):
        shared = f"<p>{line}</p>" if j % 5 == 0 else ""
        texts.append(f"<html><body>{shared}<p>{body}</p></body></html>")
    texts += [f"<html><body><p>{bodies[j]}</p></body></html>" for j in range(0, 60, 5)]
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [{"id": i, "text": t} for i, t in enumerate(texts)])

    def kept(chunk: int, part: int) -> list[Any]:
        monkeypatch.setattr(cli_dedup, "_CHUNK_DOCS", chunk)
        monkeypatch.setattr(cli_dedup, "_PART_DOCS", part)
        out = tmp_path / f"out-{chunk}-{part}.jsonl"
        assert main(["dedup", str(src), "-o", str(out), "--quiet"]) == 0
        return read_ids(out)

    whole = kept(400, 400)
    assert len(whole) == len(texts) - 12
    assert kept(400, 32) == whole
    assert kept(32, 32) == whole


def test_a_directory_output_that_would_lose_or_mix_files_is_refused(tmp_path: Path) -> None:
    """Refused before any work (exit 2): two input directories of one name (x/site and
    y/site both went to OUT/site: one page overwrote the other, "kept 2"), an input inside the
    output directory (its page was overwritten before the run failed), an output directory
    that holds files (a page that a second run did not keep stayed in it), and a --report
    that is a directory (refused after the work)."""
    for d, text in (("x", "first page about rivers"), ("y", "second page about mountains")):
        (tmp_path / d / "site").mkdir(parents=True)
        (tmp_path / d / "site" / "index.html").write_text(
            f"<html><body><p>{text}</p></body></html>"
        )
    x, y = tmp_path / "x" / "site", tmp_path / "y" / "site"
    before = {p: p.read_bytes() for p in (x / "index.html", y / "index.html")}
    out = tmp_path / "out"
    for args, said in (
        ((str(x), str(y), "-o", str(out)), "would both be written to"),
        ((str(y), str(x), "-o", str(tmp_path / "x")), f"the input {x} is inside the output"),
    ):
        r = neardup("dedup", *args)
        assert r.returncode == 2 and said in r.stderr, r.stderr
    assert not out.exists() and {p: p.read_bytes() for p in before} == before
    assert neardup("dedup", str(x), "-o", str(out)).returncode == 0
    r = neardup("dedup", str(x), "-o", str(out))
    assert r.returncode == 2 and "holds files already" in r.stderr
    (tmp_path / "rep").mkdir()
    r = neardup("dedup", str(x), "-o", str(tmp_path / "o2"), "--report", str(tmp_path / "rep"))
    assert r.returncode == 2 and "is a directory, not a file" in r.stderr
    assert not (tmp_path / "o2").exists()


def test_files_of_several_input_directories_have_distinct_ids(tmp_path: Path) -> None:
    """(x/index.html and y/index.html were both named index.html in --clusters: a reader could
    not tell which page was kept) With several inputs a directory's files are named after it,
    as the directory output names their copies; one directory alone keeps its relative paths;
    so do references given with --against."""
    page = "<html><body><p>{}</p></body></html>"
    story = "a long story about rivers and the mountains they come from, told twice over"
    for d, text in (("x", story), ("y", story + "!"), ("r1", "other"), ("r2", story + ".")):
        (tmp_path / d / "sub").mkdir(parents=True)
        (tmp_path / d / "sub" / "index.html").write_text(page.format(text))
    clusters = tmp_path / "clusters.jsonl"
    r = neardup("dedup", "x", "y", "-o", "out", "--clusters", str(clusters), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = [json.loads(line) for line in clusters.read_text().splitlines()]
    assert [(c["id"], c["cluster"]) for c in got] == [
        ("x/sub/index.html", "x/sub/index.html"),
        ("y/sub/index.html", "x/sub/index.html"),
    ]
    copies = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.*"))
    assert copies == ["x/sub/index.html"]
    r = neardup(
        "dedup", "y", "-o", "out2", "--clusters", str(clusters), "--against", "r1",
        "--against", "r2", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    got = [json.loads(line) for line in clusters.read_text().splitlines()]
    assert ("sub/index.html", "r2/sub/index.html") in [(c["id"], c["cluster"]) for c in got], got
