"""Helpers shared by the test modules (imported as ``_helpers``; pytest puts tests/ on sys.path)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "news-sample.jsonl"


def neardup(
    *args: str, cwd: Path | None = None, unprivileged: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``neardup`` command (no stdin), capturing its text output;
    ``unprivileged``: as :func:`run_unprivileged` runs a command."""
    exe = shutil.which("neardup")
    assert exe is not None, "the neardup command is not installed (pip install -e .)"
    command = [exe, *args]
    if unprivileged:
        command = _without_override(command)
    return subprocess.run(
        command, capture_output=True, text=True, timeout=300, cwd=cwd, stdin=subprocess.DEVNULL
    )


def run_unprivileged(*command: str) -> subprocess.CompletedProcess[str]:
    """``command`` run (no stdin, text output captured) by a process that cannot write what
    it lacks the permission to, such as a read-only directory: as root, one without the
    capability to override file permissions; the calling test is skipped where that needs a
    ``setpriv`` there is not."""
    return subprocess.run(
        _without_override(list(command)),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def _without_override(command: list[str]) -> list[str]:
    # (root reads and writes any file whatever its mode: drop the capabilities that allow it)
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: a read-only directory is writable")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--", *command]


def words(seed: int, n: int = 80) -> str:
    """A random text of ``n`` words (distinct seeds give unrelated texts)."""
    r = random.Random(seed)
    return " ".join(
        "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(3, 8)))
        for _ in range(n)
    )


def near_copy(text: str, seed: int) -> str:
    """``text`` with one word replaced."""
    r = random.Random(seed)
    w = text.split()
    w[r.randrange(len(w))] = "changed"
    return " ".join(w)
