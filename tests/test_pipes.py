"""``neardup dedup - -o -``: standard input and output, against the same job on files."""

from __future__ import annotations

import gzip
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from _helpers import SAMPLE, neardup


def _piped(*args: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    exe = shutil.which("neardup")
    assert exe is not None
    return subprocess.run([exe, *args], input=stdin, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def sample_lines() -> list[bytes]:
    return SAMPLE.read_bytes().splitlines(keepends=True)[:600]


def test_jsonl_through_a_pipe_is_the_file_job(tmp_path: Path, sample_lines: list[bytes]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(sample_lines))
    out = tmp_path / "out.jsonl"
    assert neardup("dedup", str(src), "-o", str(out), "-q").returncode == 0
    spool = tmp_path / "spool"
    spool.mkdir()
    r = _piped("dedup", "-", "-o", "-", "--temp-dir", str(spool), stdin=src.read_bytes())
    assert r.returncode == 0, r.stderr
    assert r.stdout == out.read_bytes()
    # the summary names standard output, not the temporary file, and the temporary files of
    # standard input and output are gone
    assert r.stderr.rstrip().endswith(b"-> -") and str(spool).encode() not in r.stderr
    assert list(spool.iterdir()) == []
    # a compressed stream is told by its first bytes (with --format)
    r = _piped("dedup", "-", "-o", "-", "--format", "jsonl", stdin=gzip.compress(src.read_bytes()))
    assert r.returncode == 0, r.stderr
    assert r.stdout == out.read_bytes()
    # a file in, standard output out; and clusters beside it
    clusters = tmp_path / "cl.jsonl"
    r = _piped("dedup", str(src), "-o", "-", "--clusters", str(clusters), stdin=b"")
    assert r.returncode == 0 and r.stdout == out.read_bytes()
    assert clusters.stat().st_size > 0


def test_csv_and_text_lines_through_a_pipe(tmp_path: Path) -> None:
    body = "the same notice about the water supply on main street; call 555"
    csv = "id,body\n" + "".join(
        f"{i},{body if i % 3 else 'distinct text number ' + str(i) * 12}\n" for i in range(30)
    )
    src = tmp_path / "in.csv"
    src.write_text(csv, "utf-8")
    out = tmp_path / "out.csv"
    assert neardup("dedup", str(src), "-o", str(out), "--text-field", "body").returncode == 0
    r = _piped("dedup", "-", "-o", "-", "--format", "csv", "--text-field", "body",
               stdin=csv.encode())  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout == out.read_bytes() and r.stdout.count(b"\n") == 12  # header, 10 + 1
    lines = "one line of text about apples\none line of text about apples\nanother\n"
    r = _piped("dedup", "-", "-o", "-", "--format", "txt", stdin=lines.encode())
    assert r.returncode == 0 and r.stdout == b"one line of text about apples\nanother\n"


def test_pipe_errors_name_the_problem_and_write_nothing(tmp_path: Path) -> None:
    r = _piped("dedup", "-", "-o", "-", stdin=b"id,text\n1,abc\n")
    assert r.returncode == 2 and b"cannot tell the format of standard input" in r.stderr
    assert r.stdout == b""
    r = _piped("dedup", "-", "-o", "-", stdin=gzip.compress(b'{"text": "a"}\n'))
    assert r.returncode == 2 and b"standard input is compressed; give --format" in r.stderr
    r = _piped("dedup", "-", "-o", "-", "--clusters", "-", stdin=b'{"text": "a"}\n')
    assert r.returncode == 2 and b"only the kept documents (-o) go to standard output" in r.stderr
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "a.txt").write_text("some text", "utf-8")
    r = _piped("dedup", str(pages), "-o", "-", stdin=b"")
    assert r.returncode == 2 and b"directories of files cannot be written" in r.stderr
    # a bad record fails the job: nothing reaches standard output
    r = _piped("dedup", "-", "-o", "-", stdin=b'{"text": "fine"}\n{"text": 3}\n')
    assert r.returncode == 1 and r.stdout == b"" and b"/stdin.jsonl:2: " in r.stderr


def test_ctrl_c_while_standard_input_is_read_leaves_no_temporary_file(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    exe = shutil.which("neardup")
    assert exe is not None
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc = subprocess.Popen(
            [exe, "dedup", "-", "-o", "-", "--temp-dir", str(spool)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None
        proc.stdin.write(b'{"id": 1, "text": "a first record of standard input"}\n' * 3000)
        proc.stdin.flush()  # (and left open: the command is copying standard input)
        deadline = time.monotonic() + 60
        while not any(p.name.startswith("stdin.") for p in spool.rglob("*")):
            assert time.monotonic() < deadline and proc.poll() is None, "no spool file"
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert b"Traceback" not in err and err.strip().endswith(b"interrupted")
        assert list(spool.iterdir()) == [], sig


@pytest.mark.parametrize("share", [1.0, 0.25])
def test_a_reader_that_stops_early_ends_the_job_quietly(tmp_path: Path, share: float) -> None:
    # neardup dedup in.jsonl -o - | head -1: the reader goes away, the command ends like a
    # Unix tool (141: 128 + SIGPIPE; no error line, no traceback) and leaves no temporary file.
    # (A kept output under 1 MiB, more than a pipe holds, ended with 0: the buffered copy to
    # standard output took the partial write of the reader's going for success.)
    src = tmp_path / "in.jsonl"
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    src.write_bytes(b"".join(lines[: int(len(lines) * share)]))
    assert (src.stat().st_size < 1 << 20) == (share < 1)
    spool = tmp_path / "spool"
    spool.mkdir()
    exe = shutil.which("neardup")
    assert exe is not None
    proc = subprocess.Popen(
        [exe, "dedup", str(src), "-o", "-", "-q", "--temp-dir", str(spool)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141, err
    assert first.startswith(b"{") and err == b""
    assert list(spool.iterdir()) == []
    # the same through a shell pipeline: head's line, and the shell's status of the command
    r = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {exe} dedup {src} -o - -q | head -1"],
        capture_output=True,
        timeout=300,
    )
    assert r.stdout == first and r.stderr == b"" and r.returncode == 141


def test_an_output_named_dash_other_than_o_is_refused_without_pipes(tmp_path: Path) -> None:
    """(--report - with -o a file wrote an HTML file named "-" and a folder named "--clusters":
    it was refused only when standard input or output was used)"""
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "one text here"}\n{"text": "another text"}\n', "utf-8")
    for flag in ("--report", "--clusters", "--pairs"):
        r = neardup("dedup", str(src), "-o", str(tmp_path / "k.jsonl"), flag, "-", cwd=tmp_path)
        assert r.returncode == 2 and f"{flag} -: only the kept documents" in r.stderr, r.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
