"""`neardup fingerprint` end to end: the new column holds Fingerprinter's values, every other
field is kept, the output has the input's format; bad input and exit codes."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _helpers import SAMPLE, neardup
from neardup import io as nio
from neardup.dedup import Policy


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for line in f][:200]


@pytest.fixture(scope="module")
def want(rows: list[dict[str, Any]]) -> list[int]:
    """As the deduplicators fingerprint (normalised; HTML by its main text)."""
    policy = Policy.default()
    return policy.fingerprint_many(policy.make_fingerprinter(), [r["text"] for r in rows]).tolist()


def test_raw_fingerprints_the_text_as_is(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    # HTML pages: by default their main text is fingerprinted, with --raw the markup as it is
    pages = [
        f"<html><body><nav>Home | News | About</nav><article><p>{r['text']}</p></article>"
        "<footer>Copyright</footer></body></html>"
        for r in rows[:50]
    ]
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"text": p}, ensure_ascii=False) + "\n" for p in pages), "utf-8"
    )
    policy = Policy.default()
    f = policy.make_fingerprinter()
    expected = {
        True: [f.fingerprint(p) for p in pages],
        False: policy.fingerprint_many(f, pages).tolist(),
    }
    assert expected[True] != expected[False]
    for raw in (True, False):
        out = tmp_path / f"out-{raw}.jsonl"
        r = neardup("fingerprint", str(src), "-o", str(out), *(["--raw"] if raw else []))
        assert r.returncode == 0, r.stderr
        got = [int(json.loads(x)["fingerprint"], 16) for x in out.read_text().splitlines()]
        assert got == expected[raw]


def test_jsonl_hex(tmp_path: Path, rows: list[dict[str, Any]], want: list[int]) -> None:
    src = tmp_path / "in.jsonl.gz"
    with nio.open_write(str(src), "gz") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False).encode() + b"\n")
    out = tmp_path / "out.jsonl"
    r = neardup("fingerprint", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    back = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [{k: v for k, v in b.items() if k != "fingerprint"} for b in back] == rows
    assert [list(b) for b in back] == [[*r, "fingerprint"] for r in rows]  # field order kept
    assert [b["fingerprint"] for b in back] == [f"{x:016x}" for x in want]
    assert "200 documents" in r.stderr


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_csv_int(tmp_path: Path, rows: list[dict[str, Any]], want: list[int], fmt: str) -> None:
    delim = "," if fmt == "csv" else "\t"
    src = tmp_path / f"in.{fmt}"
    with open(src, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter=delim)
        w.writerow(["id", "text"])
        w.writerows([r["id"], r["text"]] for r in rows)
    out = tmp_path / f"out.{fmt}"
    r = neardup("fingerprint", str(src), "-o", str(out), "--encoding", "int", "--field", "fp")
    assert r.returncode == 0, r.stderr
    with open(out, encoding="utf-8", newline="") as f:
        back = list(csv.reader(f, delimiter=delim))
    assert back[0] == ["id", "text", "fp"]
    assert back[1:] == [[r["id"], r["text"], str(x)] for r, x in zip(rows, want)]


@pytest.mark.parametrize("encoding", ["hex", "int"])
def test_parquet(
    tmp_path: Path, rows: list[dict[str, Any]], want: list[int], encoding: str
) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(
        pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]}), src
    )
    out = tmp_path / "out.parquet"
    r = neardup("fingerprint", str(src), "-o", str(out), "--encoding", encoding)
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out)
    assert table.column_names == ["id", "text", "fingerprint"]
    if encoding == "int":
        assert table.schema.field("fingerprint").type == pa.uint64()
        assert table.column("fingerprint").to_pylist() == want
    else:
        assert table.column("fingerprint").to_pylist() == [f"{x:016x}" for x in want]


def test_text_lines_and_directories(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    policy = Policy.default()
    f = policy.make_fingerprinter()
    src = tmp_path / "in.txt"
    lines = [r["text"].replace("\n", " ") for r in rows[:50]]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    r = neardup("fingerprint", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    got = [line.split("\t", 1) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [g[1] for g in got] == lines
    assert [int(g[0], 16) for g in got] == policy.fingerprint_many(f, lines).tolist()

    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.txt").write_text(rows[0]["text"], encoding="utf-8")
    (d / "b.html").write_text(f"<p>{rows[1]['text'][:80]}</p><script>x</script>", "utf-8")
    r = neardup("fingerprint", str(d), "-o", str(tmp_path / "dir.jsonl"))
    assert r.returncode == 0, r.stderr
    back = [json.loads(x) for x in (tmp_path / "dir.jsonl").read_text().splitlines()]
    page = f"<html><body><p>{rows[1]['text'][:80]}</p><script>x</script></body></html>"
    html_fp = int(policy.fingerprint_many(f, [page])[0])
    assert back == [
        {
            "id": "a.txt",
            "fingerprint": f"{int(policy.fingerprint_many(f, [rows[0]['text']])[0]):016x}",
        },
        {"id": "b.html", "fingerprint": f"{html_fp:016x}"},
    ]
    r = neardup("fingerprint", str(d), "-o", str(tmp_path / "dir.csv"))
    assert r.returncode == 2 and "name the output .jsonl" in r.stderr


def test_bad_input(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    src = tmp_path / "in.jsonl"
    good = [json.dumps(r, ensure_ascii=False) for r in rows[:5]]
    src.write_text("\n".join([*good[:2], '{"text": null}', *good[2:]]) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    r = neardup("fingerprint", str(src), "-o", str(out))
    assert r.returncode == 1 and f"{src}:3: field 'text' is null, expected a string" in r.stderr
    r = neardup("fingerprint", str(src), "-o", str(out), "--on-error", "skip")
    assert r.returncode == 0
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == [
        x["id"] for x in rows[:5]
    ]
    r = neardup("fingerprint", str(tmp_path / "none.jsonl"), "-o", str(out))
    assert r.returncode == 1 and "none.jsonl: no such file or directory" in r.stderr
    r = neardup("fingerprint", str(src), "-o", str(tmp_path / "x.parquet"))
    assert r.returncode == 2 and "the name says parquet but the inputs are jsonl" in r.stderr
    r = neardup("fingerprint", str(src), "-o", str(out), "--encoding", "b64")
    assert r.returncode == 2 and "invalid choice: 'b64'" in r.stderr


def test_truncated_gzip_is_an_input_error_and_no_output_is_left(
    tmp_path: Path, rows: list[dict[str, Any]], want: list[int]
) -> None:
    # a gzip cut short: the whole lines before the cut are read, then "cannot read on" names
    # the file and line; on failure the output file does not appear at all
    whole = tmp_path / "whole.jsonl.gz"
    with nio.open_write(str(whole), "gz") as f:
        for row in rows:
            f.write((json.dumps(row, ensure_ascii=False) + "\n").encode())
    data = whole.read_bytes()
    src = tmp_path / "cut.jsonl.gz"
    src.write_bytes(data[: len(data) // 2])
    out = tmp_path / "out.jsonl.gz"
    r = neardup("fingerprint", str(src), "-o", str(out))
    assert r.returncode == 1
    assert f"{src}:" in r.stderr and "cannot read on" in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]
    r = neardup("fingerprint", str(src), "-o", str(out), "--on-error", "skip")
    assert r.returncode == 0, r.stderr
    with nio.open_read(str(out), "gz")[0] as f:
        got = [int(json.loads(x)["fingerprint"], 16) for x in f.read().splitlines()]
    assert 0 < len(got) < len(rows)
    assert got == want[: len(got)]


def test_failed_run_leaves_no_output(tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text('{"text": "a b c"}\n{bad\n', "utf-8")
    out = tmp_path / "out.jsonl"
    r = neardup("fingerprint", str(src), "-o", str(out))
    assert r.returncode == 1
    assert f"{src}:2:" in r.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["--field", "text"], "text"),
        (["--field", "body", "--text-field", "body"], "text"),
        (["--field", "id"], "id"),
        (["--field", "doc", "--id-field", "doc"], "id"),
    ],
)
def test_the_new_field_never_overwrites_the_text_or_id(
    tmp_path: Path, argv: list[str], kind: str
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "doc": 1, "text": "hello", "body": "hello"}) + "\n")
    out = tmp_path / "o.jsonl"
    r = neardup("fingerprint", str(src), "-o", str(out), *argv)
    assert r.returncode == 2, r.stderr
    name = argv[1]
    assert f"--field {name!r} would overwrite each record's {kind}" in r.stderr
    assert not out.exists()
    r = neardup("fingerprint", str(src), "-o", str(out), "--field", "simhash")
    assert r.returncode == 0 and json.loads(out.read_text())["text"] == "hello"


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_skip_goes_on_with_the_next_input_and_a_rerun_replaces_the_field(
    tmp_path: Path, rows: list[dict[str, Any]], want: list[int], fmt: str
) -> None:
    """--on-error skip: an input without the text column is skipped, the others are written (the
    whole job used to end with an empty output and exit 0). Running the command on its own
    output replaces the field instead of adding a second one (a Parquet file with two
    "fingerprint" columns could not be read back)."""
    ids, texts = [r["id"] for r in rows], [r["text"] for r in rows]
    nocol, good = tmp_path / f"nocol.{fmt}", tmp_path / f"good.{fmt}"
    if fmt == "csv":
        nocol.write_text("id,body\n1,a body\n", "utf-8")
        with open(good, "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows([["id", "text"], *zip(ids, texts)])
    else:
        pq.write_table(pa.table({"id": [1], "body": ["a body"]}), nocol)
        pq.write_table(pa.table({"id": ids, "text": texts}), good)
    out, again = tmp_path / f"out.{fmt}", tmp_path / f"again.{fmt}"
    r = neardup("fingerprint", str(nocol), str(good), "-o", str(out), "--on-error", "skip")
    assert r.returncode == 0, r.stderr
    assert "skipped" in r.stderr and "no column 'text'" in r.stderr
    r = neardup("fingerprint", str(out), "-o", str(again))
    assert r.returncode == 0, r.stderr
    if fmt == "csv":
        with open(again, encoding="utf-8", newline="") as f:
            header, *body = list(csv.reader(f))
        assert header == ["id", "text", "fingerprint"]
        assert [row[2] for row in body] == [f"{x:016x}" for x in want]
    else:
        table = pq.read_table(again)
        assert table.column_names == ["id", "text", "fingerprint"]
        assert table.column("fingerprint").to_pylist() == [f"{x:016x}" for x in want]


def test_parquet_without_rows_and_with_another_schema(tmp_path: Path) -> None:
    empty, other = tmp_path / "empty.parquet", tmp_path / "other.parquet"
    pq.write_table(
        pa.table({"id": pa.array([], pa.int64()), "text": pa.array([], pa.string())}), empty
    )
    r = neardup("fingerprint", str(empty), "-o", str(tmp_path / "e.parquet"), "--encoding", "int")
    assert r.returncode == 0, r.stderr
    table = pq.read_table(tmp_path / "e.parquet")
    assert table.num_rows == 0 and table.schema.field("fingerprint").type == pa.uint64()
    pq.write_table(pa.table({"text": ["a text"], "lang": ["en"]}), other)
    r = neardup("fingerprint", str(empty), str(other), "-o", str(tmp_path / "o.parquet"))
    assert r.returncode == 1 and "schema differs from the first input's" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "o.parquet").exists()


def test_standard_input_and_output(tmp_path: Path) -> None:
    """-o - (and /dev/stdout) is standard output, as the exit codes of --help say; it used to
    write a file named '-'."""
    import subprocess
    import sys

    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1, "text": "hello world"}\n', "utf-8")
    policy = Policy.default()
    (fp,) = policy.fingerprint_many(policy.make_fingerprinter(), ["hello world"]).tolist()
    for output in ("-", "/dev/stdout"):
        r = subprocess.run(
            [sys.executable, "-m", "neardup", "fingerprint", "-", "-o", output, "-q"],
            input=src.read_text("utf-8"), capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["fingerprint"] == f"{fp:016x}"
        assert not (tmp_path / "-").exists()


def test_a_truncated_compressed_csv_is_an_input_error(tmp_path: Path) -> None:
    import gzip

    body = "".join(f"{i},text number {i} of the file\n" for i in range(20_000))
    packed = gzip.compress(("id,text\n" + body).encode())
    (tmp_path / "in.csv.gz").write_bytes(packed[: len(packed) // 2])
    r = neardup("fingerprint", str(tmp_path / "in.csv.gz"), "-o", str(tmp_path / "o.csv.gz"))
    assert r.returncode == 1 and "cannot read on" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o.csv.gz").exists()


def test_an_open_csv_quote_is_an_input_error_as_in_dedup(tmp_path: Path) -> None:
    """(the fingerprint command read CSV without strict quoting: a quote left open took the
    rest of the file into one text, exit 0, "1 document")"""
    src = tmp_path / "open.csv"
    src.write_text('id,text\n1,"hello world\n2,second doc\n3,third doc\n')
    for command in ("fingerprint", "dedup"):
        r = neardup(command, str(src), "-o", str(tmp_path / f"{command}.csv"))
        assert r.returncode == 1 and "cannot read on: unexpected end of data" in r.stderr
        assert not (tmp_path / f"{command}.csv").exists()


def test_jsonl_records_are_written_back_as_read_with_the_field_added(tmp_path: Path) -> None:
    """(each record was parsed and written anew: 1e400 became Infinity, which is not JSON, and
    1.0000000000000001 became 1.0)"""
    src = tmp_path / "in.jsonl"
    lines = [
        '{"text": "alpha beta gamma delta", "v": 1e400, "w": 1.0000000000000001}',
        '{ "text" : "epsilon zeta eta theta" }  ',
        '{"text": "iota kappa lambda mu", "fingerprint": "old"}',
    ]
    src.write_text("\n".join(lines) + "\n")
    r = neardup("fingerprint", str(src), "-o", str(tmp_path / "out.jsonl"))
    assert r.returncode == 0, r.stderr
    out = (tmp_path / "out.jsonl").read_text().splitlines()
    f = Policy.default()
    fps = f.fingerprint_many(f.make_fingerprinter(), [json.loads(x)["text"] for x in lines])
    assert out[0] == lines[0][:-1] + f', "fingerprint": "{fps[0]:016x}"}}'
    assert out[1] == f'{{ "text" : "epsilon zeta eta theta", "fingerprint": "{fps[1]:016x}"}}'
    assert json.loads(out[2]) == {"text": "iota kappa lambda mu", "fingerprint": f"{fps[2]:016x}"}


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("nodir/out.jsonl", "-o nodir/out.jsonl: no directory"),
        ("in.jsonl", "in.jsonl is both an input and an output"),
        ("adir", "-o adir is a directory, not a file"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_any_work(
    tmp_path: Path, rows: list[dict[str, Any]], output: str, message: str
) -> None:
    src = tmp_path / "in.jsonl"
    before = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[:3])
    src.write_text(before, encoding="utf-8")
    (tmp_path / "adir").mkdir()
    r = neardup("fingerprint", "in.jsonl", "-o", output, cwd=tmp_path)
    assert r.returncode == 2 and f"neardup fingerprint: {message}" in r.stderr, r.stderr
    assert "Errno" not in r.stderr and "partial" not in r.stderr
    assert src.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "in.jsonl"]
    assert not any((tmp_path / "adir").iterdir())
