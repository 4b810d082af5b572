"""Helpers shared by the test modules (imported as ``_helpers``; pytest puts tests/ on sys.path)."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "news-sample.jsonl"


def neardup(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed ``neardup`` command (no stdin), capturing its text output."""
    exe = shutil.which("neardup")
    assert exe is not None, "the neardup command is not installed (pip install -e .)"
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, timeout=300, cwd=cwd, stdin=subprocess.DEVNULL
    )


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
