"""neardup.io: format detection, the streaming readers (pass 1) and KeptWriter (pass 2), on real
text from the shipped sample corpus (examples/news-sample.jsonl)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import lzma
import os
import pickle
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _helpers import SAMPLE
from neardup import io as nio


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for line in f][:300]


def _docs(source: nio.Source, spec: nio.FieldSpec | None = None) -> list[Any]:
    return list(nio.read_docs(source, spec or nio.FieldSpec()))


def _write_jsonl(path: Path, rows: list[dict[str, Any]], compression: str | None) -> bytes:
    data = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows)
    with nio.open_write(str(path), compression) as f:
        f.write(data)
    return data


# ---------------------------------------------------------------------------------------------
# detection


@pytest.mark.parametrize(
    ("name", "fmt", "comp"),
    [
        ("a.jsonl", "jsonl", None),
        ("a.ndjson.gz", "jsonl", "gz"),
        ("a.json.xz", "jsonl", "xz"),
        ("a.jsonl.zst", "jsonl", "zst"),
        ("a.CSV", "csv", None),
        ("a.tsv.gz", "tsv", "gz"),
        ("a.txt.zst", "txt", "zst"),
        ("a.parquet", "parquet", None),
    ],
)
def test_detect_by_name(tmp_path: Path, name: str, fmt: str, comp: str | None) -> None:
    s = nio.detect(str(tmp_path / name))
    assert (s.format, s.compression) == (fmt, comp)


def test_detect_directory_and_errors(tmp_path: Path) -> None:
    assert nio.detect(str(tmp_path)).format == "dir"
    with pytest.raises(nio.UnknownFormatError, match=r"data\.bin: cannot tell the format"):
        nio.detect(str(tmp_path / "data.bin"))
    with pytest.raises(nio.UnknownFormatError, match="format 'xml' is not one of"):
        nio.detect(str(tmp_path / "a.jsonl"), "xml")
    with pytest.raises(nio.UnknownFormatError, match="compressed inside"):
        nio.detect(str(tmp_path / "a.parquet.gz"))
    # an explicit format wins over the name
    assert nio.detect(str(tmp_path / "data.bin"), "txt").format == "txt"


def test_output_source_checks_the_format(tmp_path: Path) -> None:
    inputs = [nio.Source("x.jsonl", "jsonl")]
    assert nio.output_source("out.jsonl.gz", inputs) == nio.Source("out.jsonl.gz", "jsonl", "gz")
    assert nio.output_source("out", inputs).format == "jsonl"
    with pytest.raises(nio.UnknownFormatError, match="the name says csv but the inputs are jsonl"):
        nio.output_source("out.csv", inputs)
    with pytest.raises(nio.UnknownFormatError, match="inputs mix formats"):
        nio.output_source("out.jsonl", [*inputs, nio.Source("y.csv", "csv")])


# ---------------------------------------------------------------------------------------------
# JSONL, every compression


@pytest.mark.parametrize("comp", [None, "gz", "xz", "zst"])
def test_jsonl_roundtrip(tmp_path: Path, rows: list[dict[str, Any]], comp: str | None) -> None:
    suffix = {None: "", "gz": ".gz", "xz": ".xz", "zst": ".zst"}[comp]
    path = tmp_path / f"in.jsonl{suffix}"
    data = _write_jsonl(path, rows, comp)
    source = nio.detect(str(path))
    docs = _docs(source, nio.FieldSpec(time_field="published"))
    assert [d.text for d in docs] == [r["text"] for r in rows]
    assert [d.id for d in docs] == [r["id"] for r in rows]
    assert [d.slot for d in docs] == list(range(len(rows)))
    assert docs[0].time == pytest.approx(nio.parse_time(rows[0]["published"]))
    # pass 2 copies the kept lines byte for byte, in order
    keep = np.zeros(len(rows), dtype=bool)
    keep[::3] = True
    out = tmp_path / f"out.jsonl{suffix}"
    with nio.KeptWriter(nio.output_source(str(out), [source])) as w:
        w.write(source, keep)
    stream, raw = nio.open_read(str(out), comp)
    got = stream.read()
    stream.close()
    raw.close()
    lines = data.splitlines(keepends=True)
    assert got == b"".join(line for line, k in zip(lines, keep) if k)


@pytest.mark.parametrize("comp", ["gz", "xz", "zst"])
def test_a_truncated_compressed_input_is_an_error_not_a_shorter_file(
    tmp_path: Path, comp: str
) -> None:
    """A compressed file cut short (a copy stopped half-way) is refused where it ends; zstd's
    stream reader used to end quietly, and the documents after the cut went unnoticed. A file
    of several zstd frames (pzstd, concatenated files) is read whole."""
    import zstandard

    lines = b"".join(b'{"text": "document %d of the file"}\n' % i for i in range(20_000))
    compress: dict[str, Callable[[bytes], bytes]] = {
        "gz": gzip.compress,
        "xz": lzma.compress,
        "zst": zstandard.compress,
    }
    packed = compress[comp](lines)
    path = tmp_path / f"in.jsonl.{comp}"
    path.write_bytes(packed[: len(packed) // 2])
    *docs, last = _docs(nio.detect(str(path)))
    assert isinstance(last, nio.InputError) and "cannot read on" in str(last), last
    assert 0 < len(docs) < 20_000 and all(isinstance(d, nio.Doc) for d in docs)
    if comp == "zst":
        path.write_bytes(zstandard.compress(lines[:1000]) + zstandard.compress(lines[1000:]))
        assert len(_docs(nio.detect(str(path)))) == 20_000
        # damaged data after a frame: named where it is, not a traceback
        path.write_bytes(zstandard.compress(lines) + b"\0" * 64)
        *docs, last = _docs(nio.detect(str(path)))
        assert isinstance(last, nio.InputError) and "damaged zstd data" in str(last), last


def test_a_small_zstd_file_of_much_data_is_read_in_bounded_pieces(tmp_path: Path) -> None:
    """256 MB of one repeated line compress to a few kB: the reader decompresses a few MiB at a
    time (it held all of one 64 KiB input's output: 400 MB of RSS for a 36 kB file)."""
    import zstandard

    line = b'{"text": "the same line again and again"}\n'
    path = tmp_path / "many.jsonl.zst"
    path.write_bytes(zstandard.compress(line * (256 * 2**20 // len(line))))
    assert path.stat().st_size < 100_000
    stream, raw = nio.open_read(str(path), "zst")
    reader, most, n = stream.raw, 0, 0  # type: ignore[attr-defined]
    while chunk := stream.read(1 << 20):
        n += len(chunk)
        most = max(most, len(reader._out))
    stream.close()
    raw.close()
    assert n == len(line) * (256 * 2**20 // len(line)) and most <= 16 << 20


def test_jsonl_bad_records_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(
        b'{"text": "fine", "id": 1}\n'
        b"\n"  # blank: not a record, keeps line numbers honest
        b"{not json\n"
        b'{"body": "no text field"}\n'
        b'{"text": 42}\n'
        b'["a list"]\n'
        b'{"text": "bad id", "id": true}\n'
        b'{"text": "\xff\xfe invalid utf-8"}\n'
        b'{"text": "t", "when": "yesterday"}\n'
        b'{"text": "last", "id": "x"}\n'
    )
    out = _docs(nio.detect(str(path)), nio.FieldSpec(time_field=None))
    messages = [str(d) if isinstance(d, nio.InputError) else d.text for d in out]
    assert messages[0] == "fine"
    assert messages[1].startswith(f"{path}:3: not valid JSON")
    assert messages[2] == f"{path}:4: no field 'text' (fields: 'body')"
    assert messages[3] == f"{path}:5: field 'text' is int, expected a string"
    assert messages[4] == f"{path}:6: expected a JSON object, got list"
    assert messages[5] == f"{path}:7: id is bool, expected a string or integer"
    assert messages[6].startswith(f"{path}:8: not valid UTF-8")
    assert messages[8] == "last"
    assert [d.slot for d in out] == list(range(9))
    timed = _docs(nio.detect(str(path)), nio.FieldSpec(time_field="when"))
    assert str(timed[7]).startswith(f"{path}:9: field 'when': time 'yesterday' is neither")
    assert str(timed[8]) == f"{path}:10: no time field 'when'"


def test_truncated_gzip_ends_with_an_error(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    path = tmp_path / "cut.jsonl.gz"
    data = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows)
    path.write_bytes(gzip.compress(data)[:-200])
    out = _docs(nio.detect(str(path)))
    assert isinstance(out[-1], nio.InputError)
    assert out[-1].slot is None and "cannot read on" in str(out[-1])
    assert all(isinstance(d, nio.Doc) for d in out[:-1])


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    out = _docs(nio.Source(str(tmp_path / "gone.jsonl"), "jsonl"))
    assert len(out) == 1 and "cannot open" in str(out[0])


# ---------------------------------------------------------------------------------------------
# CSV / TSV


@pytest.mark.parametrize(("fmt", "delimiter"), [("csv", ","), ("tsv", "\t")])
def test_csv_roundtrip(
    tmp_path: Path, rows: list[dict[str, Any]], fmt: str, delimiter: str
) -> None:
    path = tmp_path / f"in.{fmt}"
    fields = ["id", "lang", "published", "text"]
    with open(path, "w", encoding="utf-8-sig", newline="") as f:  # BOM, as Excel writes
        cw = csv.writer(f, delimiter=delimiter)
        cw.writerow(fields)
        for r in rows:
            cw.writerow([r[k] for k in fields])  # texts hold newlines, quotes, commas
    source = nio.detect(str(path))
    docs = _docs(source)
    assert [d.text for d in docs] == [r["text"] for r in rows]
    assert [d.id for d in docs] == [r["id"] for r in rows]
    keep = np.arange(len(rows)) % 2 == 1
    out = tmp_path / f"out.{fmt}.gz"
    with nio.KeptWriter(nio.output_source(str(out), [source])) as w:
        w.write(source, keep)
    with gzip.open(out, "rt", encoding="utf-8", newline="") as f:
        back = list(csv.reader(f, delimiter=delimiter))
    assert back[0] == fields
    assert back[1:] == [[r[k] for k in fields] for r, k in zip(rows, keep) if k]


def test_csv_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(b'id,text\n1,"ok"\n2,too,many\n3,"\xff bad"\n4,fine\n')
    out = _docs(nio.detect(str(path)))
    assert out[0].text == "ok"
    assert str(out[1]) == f"{path}:3: has 3 fields, the header has 2"
    assert str(out[2]) == f"{path}:4: field 'text' is not valid UTF-8"
    assert out[3].text == "fine"
    headless = tmp_path / "nohead.csv"
    headless.write_text("id,body\n1,x\n")
    (err,) = _docs(nio.detect(str(headless)))
    assert str(err) == f"{headless}:1: no column 'text' in the header (columns: id, body)"


def test_a_csv_header_that_names_a_used_column_twice_is_refused(tmp_path: Path) -> None:
    """Which of two 'text' columns holds the text cannot be told (the last was read)."""
    path = tmp_path / "twice.csv"
    path.write_text("id,text,text\n1,a,b\n")
    (err,) = _docs(nio.detect(str(path)))
    assert str(err) == f"{path}:1: the header names column 'text' more than once"
    other = tmp_path / "other.csv"
    other.write_text("id,text,note,note\n1,a,b,c\n")
    assert [d.text for d in _docs(nio.detect(str(other)))] == ["a"]


@pytest.mark.parametrize("name", ["bom.jsonl", "bom.jsonl.gz", "bom.txt"])
def test_a_byte_order_mark_before_the_first_line_is_not_part_of_it(
    tmp_path: Path, name: str
) -> None:
    """A file saved with a UTF-8 byte-order mark: its first record was refused ("Unexpected
    UTF-8 BOM"); it is read, and the kept lines are written without the mark."""
    path = tmp_path / name
    lines = ([json.dumps({"id": i, "text": f"text {i}"}) for i in range(3)]
             if ".jsonl" in name else [f"text {i}" for i in range(3)])  # fmt: skip
    data = b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n"
    gz = name.endswith(".gz")
    path.write_bytes(gzip.compress(data) if gz else data)
    docs = _docs(nio.detect(str(path)))
    assert [d.text for d in docs] == ["text 0", "text 1", "text 2"], [str(d) for d in docs]
    out = tmp_path / ("out" + "".join(Path(name).suffixes))
    with nio.KeptWriter(nio.output_source(str(out), [nio.detect(str(path))])) as w:
        w.write(nio.detect(str(path)), np.array([True, False, True]))
    written = gzip.decompress(out.read_bytes()) if gz else out.read_bytes()
    assert written == ("\n".join([lines[0], lines[2]]) + "\n").encode()


# ---------------------------------------------------------------------------------------------
# text lines, Parquet, directories


def test_text_lines(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes("第一行\r\n\n  \nsecond line\nthird\n".encode())
    docs = _docs(nio.detect(str(path)))
    assert [(d.text, d.line, d.slot) for d in docs] == [
        ("第一行", 1, 0),
        ("second line", 4, 1),
        ("third", 5, 2),
    ]
    keep = np.array([True, False, True])
    out = tmp_path / "out.txt.xz"
    with nio.KeptWriter(nio.output_source(str(out), [nio.detect(str(path))])) as w:
        w.write(nio.detect(str(path)), keep)
    assert [d.text for d in _docs(nio.detect(str(out)))] == ["第一行", "third"]


def test_parquet_roundtrip(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    table = pa.table(
        {
            "id": [r["id"] for r in rows],
            "n": list(range(len(rows))),
            "text": [r["text"] for r in rows],
        }
    )
    path = tmp_path / "in.parquet"
    pq.write_table(table, path, row_group_size=64)
    source = nio.detect(str(path))
    assert [d.text for d in _docs(source)] == table.column("text").to_pylist()
    keep = np.arange(len(rows)) % 5 == 0
    out = tmp_path / "out.parquet"
    with nio.KeptWriter(nio.output_source(str(out), [source])) as w:
        w.write(source, keep)
    back = pq.read_table(out)
    assert back.schema == table.schema
    assert back.column("n").to_pylist() == [i for i in range(len(rows)) if keep[i]]
    # a null text is a bad row, a missing column a bad file
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"text": ["a", None, "c"]}), nulls)
    out_nulls = _docs(nio.detect(str(nulls)))
    assert str(out_nulls[1]) == f"{nulls}:2: field 'text' is null, expected a string"
    (err,) = _docs(nio.detect(str(nulls)), nio.FieldSpec(text_field="body"))
    assert str(err) == f"{nulls}: no column 'body' (columns: text)"


def test_directory_of_text_and_html(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    root = tmp_path / "site"
    (root / "b").mkdir(parents=True)
    (root / "a.txt").write_text(rows[0]["text"], encoding="utf-8")
    page = (
        "<!DOCTYPE html><html><head><title>T</title></head><body>"
        f"<p>{rows[1]['text'][:60]}</p></body></html>"
    )
    (root / "b" / "page.html").write_text(page, encoding="utf-8")
    (root / "b" / "part.htm").write_text("<p>just a fragment</p>", encoding="utf-8")
    (root / "b" / "ignored.png").write_bytes(b"\x89PNG")
    noise = random.Random(3)
    (root / "c.bin.txt").write_bytes(bytes(noise.randrange(256) for _ in range(400)))
    docs = _docs(nio.detect(str(root)))
    assert [getattr(d, "id", None) for d in docs] == ["a.txt", "b/page.html", "b/part.htm", None]
    assert docs[0].text == rows[0]["text"]
    # markup is kept for the dedup policy (main text); a fragment becomes a page
    assert docs[1].text == page
    assert docs[2].text == "<html><body><p>just a fragment</p></body></html>"
    assert str(docs[3]).startswith(f"{root / 'c.bin.txt'}: cannot decode: no byte-order mark")
    out = tmp_path / "out"
    with nio.KeptWriter(nio.output_source(str(out), [nio.detect(str(root))])) as w:
        w.write(nio.detect(str(root)), np.array([False, True, False, False]))
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "b/page.html"
    ]
    assert (out / "b" / "page.html").read_text(encoding="utf-8") == page


def test_parse_time() -> None:
    assert nio.parse_time(1700000000) == 1700000000.0
    assert nio.parse_time("1700000000.5") == 1700000000.5
    assert nio.parse_time("2025-01-01T00:00:00Z") == 1735689600.0
    assert nio.parse_time("2025-01-01T08:00:00+08:00") == 1735689600.0
    assert nio.parse_time("2025-01-01") == 1735689600.0  # naive: UTC
    for bad in ("soon", None, True, float("nan")):
        with pytest.raises(ValueError, match="time"):
            nio.parse_time(bad)
    # (epoch microseconds: beyond what a store keeps; index build used to crash on them)
    for bad in (1_700_000_000_000_000, "-2e15"):
        with pytest.raises(ValueError, match="out of range.*microseconds"):
            nio.parse_time(bad)


def test_parse_time_reads_iso_basic_forms_and_dates_not_as_seconds(tmp_path: Path) -> None:
    """("20240601" was 20,240,601 s, in 1970, and "2024" 2024 s, so --keep newest kept the
    January row over the June one; a Parquet date32 column was refused)"""
    import datetime as dt

    june = 1717200000.0  # 2024-06-01T00:00:00Z
    assert nio.parse_time("20240601") == june == nio.parse_time(dt.date(2024, 6, 1))
    assert nio.parse_time("2024") == 1704067200.0
    assert nio.parse_time("20240601120000") == nio.parse_time("20240601T120000") == june + 43200
    assert nio.parse_time("1717200000") == june and nio.parse_time(" 1e9 ") == 1e9
    for bad in ("1_000", "\u0663", "99999999"):  # (what float() takes, or not a date)
        with pytest.raises(ValueError, match="neither seconds since the epoch nor ISO 8601"):
            nio.parse_time(bad)
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    path = tmp_path / "dated.parquet"
    days = [dt.date(2024, 1, 1), dt.date(2024, 6, 1)]
    pq.write_table(pa.table({"text": ["a", "b"], "t": pa.array(days, pa.date32())}), path)
    got = _docs(nio.detect(str(path)), nio.FieldSpec(time_field="t"))
    assert [d.time for d in got if isinstance(d, nio.Doc)] == [1704067200.0, june]


def test_times_out_of_range_are_bad_records_in_every_reader(tmp_path: Path) -> None:
    path = tmp_path / "us.jsonl"
    path.write_text(
        '{"text": "first", "t": 1700000000000000}\n{"text": "second", "t": 1700000000}\n', "utf-8"
    )
    first, second = _docs(nio.detect(str(path)), nio.FieldSpec(time_field="t"))
    assert isinstance(first, nio.InputError) and "out of range" in str(first)
    assert isinstance(second, nio.Doc) and second.time == 1700000000.0


def test_readers_report_progress_in_bytes(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    path = tmp_path / "in.jsonl.gz"
    _write_jsonl(path, rows * 20, "gz")
    seen: list[int] = []
    n = sum(1 for _ in nio.read_docs(nio.detect(str(path)), progress=seen.append))
    assert n == len(rows) * 20
    assert sum(seen) == os.path.getsize(path)


def test_kept_writer_detects_an_input_that_changed(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("one\ntwo\n", encoding="utf-8")
    source = nio.detect(str(path))
    with nio.KeptWriter(nio.Source(str(tmp_path / "out.txt"), "txt")) as w:
        # pass 1 saw three documents; the file now has two
        with pytest.raises(nio.InputError, match="has 2 records now but had 3 when first read"):
            w.write(source, np.array([True, True, True]))


# ---------------------------------------------------------------------------------------------
# block reading: the same documents and errors as parsing each line alone


def _one_by_one(data: bytes, path: str, fmt: str, spec: nio.FieldSpec) -> list[Any]:
    """What a reader must return: every non-blank line parsed on its own."""
    out: list[Any] = []
    slot = 0
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        if fmt == "jsonl":
            out.append(nio.parse_json_line(raw, spec, path, slot, number))
        else:
            try:
                out.append(nio.Doc(slot, number, None, raw.decode().rstrip("\r"), None))
            except UnicodeDecodeError as e:
                out.append(
                    nio.InputError(
                        path, number, f"not valid UTF-8 (byte {e.start} of the line)", slot
                    )
                )
        slot += 1
    return out


def _key(d: Any) -> tuple[Any, ...]:
    if isinstance(d, nio.InputError):
        return ("error", str(d), d.slot)
    return ("doc", d.slot, d.line, d.id, d.text, d.time)


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 1000, 1 << 21])
def test_blocks_read_like_lines(
    tmp_path: Path, rows: list[dict[str, Any]], block_bytes: int
) -> None:
    good = [
        json.dumps(dict(r, t=1700000000 + i), ensure_ascii=False).encode()
        for i, r in enumerate(rows[:60])
    ]
    bad = [
        b"",
        b"  \r",
        b"{not json",
        b'{"body": "x"}',
        b'{"text": null}',
        b'{"text": "id", "id": 1.5}',
        b'{"text": "t", "t": "2025-01-01T00:00:00Z"}',
        b'{"text": "nan", "t": NaN}',
        b'{"text": "\xff"}',
        b'{"text": "long' + "长".encode() * 3000 + b'"}',
    ]
    lines = list(good)
    for i, b in enumerate(bad):
        lines.insert(5 * i + 3, b)
    data = b"\n".join(lines)  # no newline at the end
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(data)
    for spec in (nio.FieldSpec(), nio.FieldSpec(id_field="id", time_field="t")):
        want = [_key(d) for d in _one_by_one(data, str(path), "jsonl", spec)]
        batches = list(nio.read_batches(nio.detect(str(path)), spec, block_bytes=block_bytes))
        got = [_key(d) for b in batches for d in b.docs()]
        assert got == want
        assert batches[-1].end == len(want)
        assert [_key(d) for d in nio.read_docs(nio.detect(str(path)), spec)] == want
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(b"\n".join(good) + b"\n")
    (batch,) = nio.read_batches(nio.detect(str(clean)), nio.FieldSpec(time_field="t"))
    assert batch.texts == [r["text"] for r in rows[:60]] and not batch.errors
    assert batch.times == [1700000000.0 + i for i in range(60)]
    assert list(batch.lines) == list(range(1, 61)) and batch.ids == [r["id"] for r in rows[:60]]
    # text lines
    text = "第一行\r\n\n  \n\x0c\nsecond line\n\u3000\nthird".encode() + b"\n\xffbad\nlast\n"
    tpath = tmp_path / "lines.txt"
    tpath.write_bytes(text)
    want = [_key(d) for d in _one_by_one(text, str(tpath), "txt", nio.FieldSpec())]
    got = [
        _key(d)
        for b in nio.read_batches(nio.detect(str(tpath)), block_bytes=block_bytes)
        for d in b.docs()
    ]
    assert got == want


def test_truncated_gzip_keeps_every_whole_record(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    path = tmp_path / "cut.jsonl.gz"
    data = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows * 4)
    path.write_bytes(gzip.compress(data)[:-500])
    readable = b""
    with gzip.open(path, "rb") as f:
        try:
            for line in f:
                readable += line
        except EOFError:
            pass
    n_whole = readable.count(b"\n")
    assert 0 < n_whole < len(rows) * 4
    out = _docs(nio.detect(str(path)))
    assert len(out) == n_whole + 1 and all(isinstance(d, nio.Doc) for d in out[:-1])
    assert str(out[-1]).startswith(f"{path}:{n_whole + 1}: cannot read on")
    # pass 2 copies the same whole records
    keep = np.ones(n_whole, dtype=bool)
    target = tmp_path / "out.jsonl"
    with nio.KeptWriter(nio.output_source(str(target), [nio.detect(str(path))])) as w:
        w.write(nio.detect(str(path)), keep)
    assert target.read_bytes() == b"".join(readable.splitlines(keepends=True)[:n_whole])


def test_kept_writer_lines_with_blank_lines_and_needed_slots(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    lines = [json.dumps(r, ensure_ascii=False).encode() for r in rows[:40]]
    for i in (0, 7, 8, 30):
        lines.insert(i, b" \t")
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\r\n".join(lines))  # CRLF, no newline at the end
    source = nio.detect(str(path))
    keep = np.arange(40) % 3 != 1
    need = np.arange(40) % 4 == 0
    seen: list[tuple[int, int, Any]] = []
    out = tmp_path / "out.jsonl"
    with nio.KeptWriter(nio.output_source(str(out), [source])) as w:
        w.write(source, keep, need, lambda d: seen.append((d.slot, d.line, d.id)), nio.FieldSpec())
        assert w.written == int(keep.sum())
    records = [raw for raw in b"\r\n".join(lines).split(b"\n") if raw.strip()]
    assert out.read_bytes() == b"".join(r + b"\n" for r, k in zip(records, keep) if k)
    numbered = [
        (n, raw) for n, raw in enumerate(b"\r\n".join(lines).split(b"\n"), 1) if raw.strip()
    ]
    assert seen == [(s, numbered[s][0], rows[s]["id"]) for s in range(40) if need[s]]
    # a shorter keep mask stops the copy there
    with nio.KeptWriter(nio.output_source(str(tmp_path / "head.jsonl"), [source])) as w:
        w.write(source, np.ones(9, dtype=bool))
    assert (tmp_path / "head.jsonl").read_bytes() == b"".join(r + b"\n" for r in records[:9])


@pytest.mark.parametrize("name", ["in.jsonl", "in.jsonl.gz", "in.txt.zst", "in.csv", "in.tsv.xz"])
def test_kept_writer_reports_progress_in_bytes(
    tmp_path: Path, rows: list[dict[str, Any]], name: str
) -> None:
    # pass 1 and pass 2 each count the whole file on disk, so the bars of both passes end full
    path = tmp_path / name
    records = rows * 30  # > 4096 rows: the CSV reader and writer report on the way too
    source = nio.detect(str(path))
    if source.format == "jsonl":
        _write_jsonl(path, records, source.compression)
    else:
        with nio.open_write(str(path), source.compression) as f:
            if source.format == "txt":
                f.write(b"".join(r["text"].replace("\n", " ").encode() + b"\n" for r in records))
            else:
                text = io.TextIOWrapper(f, encoding="utf-8", newline="")
                w = csv.writer(text, delimiter="\t" if source.format == "tsv" else ",")
                w.writerow(["id", "text"])
                w.writerows([r["id"], r["text"]] for r in records)
                text.detach()
    size = os.path.getsize(path)
    read: list[int] = []
    n = sum(1 for d in nio.read_docs(source, progress=read.append) if isinstance(d, nio.Doc))
    assert n == len(records)
    written: list[int] = []
    keep = np.arange(n) % 2 == 0
    out = nio.output_source(str(tmp_path / ("out" + name[2:])), [source])
    with nio.KeptWriter(out) as kw:
        kw.write(source, keep, progress=written.append)
        assert kw.written == int(keep.sum())
    assert sum(read) == size
    assert sum(written) == size
    assert len(written) > 1 or size < 1 << 21


def test_kept_writer_passes_over_an_unreadable_parquet_input(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    # `neardup dedup --on-error skip` reports a file that is not Parquet in pass 1 (no slot of
    # it is kept) and goes on: pass 2 must not stop on it either
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 but not Parquet")
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"text": [r["text"] for r in rows[:10]]}), good)
    sources = [nio.detect(str(bad)), nio.detect(str(good))]
    (err,) = _docs(sources[0])
    assert isinstance(err, nio.InputError) and err.slot is None
    assert str(err).startswith(f"{bad}: not a Parquet file: ")
    out = tmp_path / "out.parquet"
    with nio.KeptWriter(nio.output_source(str(out), sources)) as w:
        w.write(sources[0], np.zeros(0, dtype=bool))
        w.write(sources[1], np.ones(10, dtype=bool))
    assert pq.read_table(out).column("text").to_pylist() == [r["text"] for r in rows[:10]]
    # no input to copy from at all: still a valid Parquet file, with no row
    only_bad = tmp_path / "only-bad.parquet"
    with nio.KeptWriter(nio.output_source(str(only_bad), sources[:1])) as w:
        w.write(sources[0], np.zeros(0, dtype=bool))
        w.close()  # closing twice does nothing more
    assert pq.read_table(only_bad).num_rows == 0
    # a file pass 1 read documents from and that is no longer Parquet is an error
    with nio.KeptWriter(nio.output_source(str(tmp_path / "o2.parquet"), sources)) as w:
        with pytest.raises(pa.lib.ArrowInvalid, match="Parquet"):
            w.write(sources[0], np.ones(1, dtype=bool))


def test_input_error_survives_pickling() -> None:
    # errors raised in worker processes (multiprocessing, Spark) come back pickled
    for err in (
        nio.InputError("a.jsonl", 3, "not valid JSON", 2),
        nio.InputError("b.csv", None, "x"),
    ):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is nio.InputError
        assert (back.path, back.line, back.message, back.slot, str(back)) == (
            err.path,
            err.line,
            err.message,
            err.slot,
            str(err),
        )


def test_files_are_decoded_by_bom_declared_charset_utf8_then_detection(tmp_path: Path) -> None:
    """Issue 24, item 3: a page declaring ISO-8859-1 (read as windows-1252, as browsers do), a
    UTF-16 file with its byte-order mark, a UTF-8 page declaring a wrong charset, and a
    windows-1252 text without any declaration are all read; nothing is skipped."""
    root = tmp_path / "pages"
    root.mkdir()
    french = "Le café est très bon. Les élèves étudient près de la forêt où ils mangent. " * 4
    (root / "a-latin.html").write_bytes(
        b'<html><head><meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">'
        b"</head><body><p>" + french.encode("cp1252") + b"\x93fin\x94</p></body></html>"
    )
    (root / "b-utf16.txt").write_bytes(
        "\ufeff".encode("utf-16-le").join([b"", french.encode("utf-16-le")])
    )
    (root / "c-wrong.html").write_bytes(
        ("<html><head><meta charset='iso-8859-2'></head><body>" + french).encode("utf-8")
    )
    (root / "d-1252.txt").write_bytes(french.encode("cp1252"))
    docs = _docs(nio.detect(str(root)))
    assert all(isinstance(d, nio.Doc) for d in docs), [str(d) for d in docs]
    by_id = {d.id: d.text for d in docs}  # type: ignore[union-attr]
    assert french + "\u201cfin\u201d" in by_id["a-latin.html"]
    assert by_id["b-utf16.txt"] == french
    # (no declaration: charset-normalizer's guess; an 8-bit text can fit several code pages)
    assert by_id["d-1252.txt"].startswith("Le caf")
    # a declaration the bytes do not fit (iso-8859-2 decodes anything: it wins, as in browsers)
    assert "Le caf" in by_id["c-wrong.html"]


@pytest.mark.parametrize(
    ("text", "codec"),
    [
        ("Café crème", "cp1252"),
        ("naïve résumé", "cp1252"),
        ("Señor, ¿dónde está la estación?", "cp1252"),
        ("新闻", "gbk"),
        ("Zażółć gęślą jaźń", "cp1250"),  # (not windows-1252: that one decodes it worse)
        ("Привет, как дела? Это тест.", "cp1251"),
    ],
)
def test_short_texts_without_a_declaration_take_the_browsers_default_of_a_tie(
    text: str, codec: str
) -> None:
    """("Café crème" in Latin-1 was read as cp1006, "Cafﻠ crﻟme": charset-normalizer rates
    several code pages alike on a short text, and took the first) Of those it rates alike,
    GBK and windows-1252, what browsers take by default, come first."""
    from neardup.io._readers import decode_file

    assert decode_file(text.encode(codec), html=False) == text


@pytest.mark.parametrize(
    ("label", "codec", "text"),
    [
        ("gb2312", "gbk", "冯喆和王玥在昇平街"),  # GBK characters outside GB2312
        ("euc-kr", "cp949", "똠방각하"),  # windows-949 syllables outside EUC-KR
        ("big5", "big5hkscs", "香港增補字符集：𥚃"),
        ("shift_jis", "cp932", "①髙橋"),  # NEC and IBM extensions of windows-31j
        ("utf-16", "utf-8", "déjà vu, 中文"),  # (a UTF-16 label on ASCII-compatible bytes)
    ],
)
def test_declared_charsets_are_read_as_browsers_read_them(
    tmp_path: Path, label: str, codec: str, text: str
) -> None:
    """A short page declaring a charset whose bytes use the superset browsers decode it with
    (the WHATWG Encoding Standard) is read as that superset, not guessed into mojibake."""
    (tmp_path / "p.html").write_bytes(
        f"<html><head><meta charset={label}></head><body><p>{text}</p></body></html>".encode(codec)
    )
    (doc,) = _docs(nio.detect(str(tmp_path)))
    assert isinstance(doc, nio.Doc) and text in doc.text, doc


def test_a_page_with_a_stray_byte_is_read_by_its_charset(tmp_path: Path) -> None:
    """A page that declares its charset, or a UTF-8 text, with one stray byte is decoded as a
    browser decodes it: by that charset, the byte as U+FFFD (the French page was read as a
    Baltic code page by charset-normalizer, "siÃĻcles"; the Chinese one refused); a file that
    is not in the charset at all still goes to the next rules."""
    from neardup.io._readers import decode_file

    fr = "Depuis des siècles, les habitants du village gardent la même fête. " * 20
    zh = "这是一个关于城市发展的长篇报道，记者走访了许多居民。" * 20
    for text, charset in ((fr, "utf-8"), (zh, "utf-8"), (zh, "gbk")):
        page = f'<html><head><meta charset="{charset}"></head><body><p>{text}</p></body></html>'
        data = page.encode(charset)
        at = data.index(b"<p>") + 3
        got = decode_file(data[:at] + b"\xff" + data[at:], html=True)
        assert got == page[: page.index("<p>") + 3] + "\ufffd" + page[page.index("<p>") + 3 :]
    plain = fr.encode("utf-8")
    assert (
        decode_file(plain[:10] + b"\xff" + plain[10:], html=False) == fr[:10] + "\ufffd" + fr[10:]
    )
    # declared utf-8 but written in GBK throughout: not the declared charset
    wrong = f'<html><head><meta charset="utf-8"></head><body><p>{zh}</p></body></html>'
    assert decode_file(wrong.encode("gbk"), html=True) == wrong


def test_a_pipe_or_device_in_an_input_directory_is_not_a_document(tmp_path: Path) -> None:
    """(a FIFO named b.html made dedup wait forever; a link to /dev/zero named z.txt would
    read without end)"""
    (tmp_path / "a.html").write_text("<html><body><p>hello world</p></body></html>")
    os.mkfifo(tmp_path / "b.html")
    (tmp_path / "z.txt").symlink_to("/dev/zero")
    (tmp_path / "c.txt").symlink_to(tmp_path / "a.html")
    assert [os.path.basename(p) for p in nio.dir_files(str(tmp_path))] == ["a.html", "c.txt"]


def test_links_to_directories_are_followed_and_each_directory_is_read_once(
    tmp_path: Path,
) -> None:
    """(a linked subdirectory's pages were left out; a link back to an ancestor must not loop)"""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "deep").mkdir(parents=True)
    (elsewhere / "deep" / "b.txt").write_text("bee")
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.txt").write_text("ay")
    (root / "linked").symlink_to(elsewhere)
    (root / "twice").symlink_to(elsewhere / "deep")  # under a directory that is followed
    (root / "sub" / "up").symlink_to(root)  # a loop
    (root / "sub" / "top").symlink_to(tmp_path)  # a directory that holds the tree: a loop too
    (root / "again").symlink_to(root / "sub")  # within the tree: read by its own path
    (elsewhere / "back").symlink_to(root / "sub")
    got = [os.path.relpath(p, root) for p in nio.dir_files(str(root))]
    assert got == ["linked/deep/b.txt", "sub/a.txt"]
