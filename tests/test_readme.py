"""Every code block of the README runs as written, and what its text and comments claim holds.

Shell blocks run line by line under bash in a temporary directory that holds the files they
name (made here from the sample corpus). Not run: ``pip install .`` (the package is installed
already) and ``make test`` (the whole suite, which this test is part of). ``neardup serve`` runs
until it answers ``/healthz`` (on a free port, given by ``NEARDUP_PORT``), then is stopped; the
Python client block talks to such a server (its URL put in place of the README's).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import zstandard
from _helpers import SAMPLE

README = Path(__file__).resolve().parent.parent / "README.md"
ROOT = README.parent
NOT_RUN = ("pip install .", "make test")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def _commands(block: str) -> list[str]:
    """The block's commands: a line each, comments and lines of NOT_RUN out."""
    out = []
    for line in block.splitlines():
        line = re.sub(r"\s+# .*$", "", line).strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("&&") if p.strip() not in NOT_RUN]
        if parts:
            out.append(" && ".join(parts))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-o", "pipefail", "-e", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def _serve(command: str, cwd: Path, env: dict[str, str]) -> Iterator[str]:
    """Run a ``neardup serve`` line until it answers; yields its URL."""
    port = _free_port()
    env = {**env, "NEARDUP_PORT": str(port)}
    proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"{command!r} exited with {proc.returncode}"
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{command!r} did not answer /healthz"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def sample() -> list[dict[str, Any]]:
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture()
def workdir(tmp_path: Path, sample: list[dict[str, Any]]) -> Path:
    """A directory with every file the shell blocks name."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")

    def jsonl(rows: list[dict[str, Any]]) -> bytes:
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()

    half = len(sample) // 2
    for name, rows in (("crawl-1", sample[:half]), ("crawl-2", sample[half:])):
        (tmp_path / f"{name}.jsonl.zst").write_bytes(zstandard.compress(jsonl(rows)))
    for name, rows in (
        ("train", sample[300:]),
        ("eval", sample[:300]),
        ("docs", sample[:500]),
        ("my", sample),
    ):
        (tmp_path / f"{name}.jsonl").write_bytes(jsonl(rows))
    (tmp_path / "crawl.jsonl.gz").write_bytes(gzip.compress(jsonl(sample[:200])))
    pages = tmp_path / "pages"
    pages.mkdir()
    for i, r in enumerate(sample[:40]):
        body = f"<html><body><nav>Home | News</nav><article><p>{r['text']}</p></article></body>"
        (pages / f"page-{i}.html").write_text(body + "</html>", encoding="utf-8")
    (pages / "page-copy.html").write_text((pages / "page-3.html").read_text("utf-8"), "utf-8")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(sample[:300]), tmp_path / "docs.parquet")
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(sample[300:]).save_to_disk(str(tmp_path / "hf-train"))
    return tmp_path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    env["HF_DATASETS_OFFLINE"] = "1"
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def test_the_quick_start_runs_and_prints_what_it_says(workdir: Path) -> None:
    (block,) = [b for b in _blocks("bash") if "make test" in b]
    commands = _commands(block)
    assert commands == [
        "neardup dedup examples/news-sample.jsonl -o kept.jsonl --report report.html"
    ]
    r = _run(commands[0], workdir, _env())
    assert r.returncode == 0, r.stderr
    text = README.read_text(encoding="utf-8")
    claim = re.search(r"and prints\n`(neardup dedup: read .*?), …`", text)
    assert claim is not None
    assert claim.group(1) in r.stderr
    assert (workdir / "report.html").stat().st_size > 10_000


def test_every_command_line_example_runs(workdir: Path) -> None:
    (block,) = [b for b in _blocks("bash") if "neardup serve" in b]
    env = _env()
    ran = []
    for command in _commands(block):
        if command.startswith("neardup serve"):
            for url in _serve(command, workdir, env):
                assert httpx.get(url + "/v1/stats").status_code == 200
            ran.append(command)
            continue
        r = _run(command, workdir, env)
        assert r.returncode == 0, f"{command}\n{r.stderr}"
        ran.append(command)
        if "index query" in command:
            (result,) = [json.loads(x) for x in r.stdout.splitlines()]
            assert set(result) == {"fingerprint", "matches"}
    assert len(ran) >= 10
    # what the comments and the text say
    assert len((workdir / "kept-1.jsonl").read_text("utf-8").splitlines()) > 0

    def rows(name: str) -> list[dict[str, Any]]:
        return [json.loads(x) for x in (workdir / name).read_text("utf-8").splitlines()]

    by_reference = {x["id"] for x in rows("dropped.jsonl") if x.get("reference")}
    assert by_reference and not by_reference & {x["id"] for x in rows("clean.jsonl")}
    # no reference, nor an exact copy of one, is written
    assert not {x["text"] for x in rows("clean.jsonl")} & {x["text"] for x in rows("eval.jsonl")}
    assert (workdir / "hf-clean" / "dataset_info.json").exists()
    assert (workdir / "calib" / "recommendation.json").exists()


def test_the_api_example_runs_and_its_comments_hold() -> None:
    block = next(b for b in _blocks("python") if "Fingerprinter()" in b)
    scope: dict[str, Any] = {}
    exec(compile(block, "README.md", "exec"), scope)
    hamming = scope["hamming"]
    assert hamming(scope["a"], scope["b"]) == 16
    d = scope["d"]
    (match,) = d.check("the quick brown fox jumped over the lazy dog near the river bank")
    assert match.id == 1 and 0.8 <= match.similarity < 0.9
    assert scope["added"] is True and scope["matches"] == []
    assert len(scope["fps"]) == 2


def test_the_datasets_example_runs_and_its_comments_hold(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("datasets")
    block = next(b for b in _blocks("python") if "neardup.integrations.datasets" in b)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    scope: dict[str, Any] = {}
    exec(compile(block, "README.md", "exec"), scope)
    assert scope["kept"].num_rows == 1814 and "1,814 kept rows" in block
    assert scope["clean"].num_rows == 1714 and "1,714 rows stay" in block


def test_the_client_example_runs(tmp_path: Path) -> None:
    (block,) = [b for b in _blocks("python") if "neardup.Client(" in b]
    readme_url = re.search(r'Client\("(http://[^"]+)"\)', block)
    assert readme_url is not None
    for url in _serve(f"neardup serve --data {tmp_path / 'data'}", tmp_path, _env()):
        scope: dict[str, Any] = {}
        exec(compile(block.replace(readme_url.group(1), url), "README.md", "exec"), scope)
        assert scope["added"] is True and scope["matches"] == []
