"""Helpers shared by the test modules (imported as ``_helpers``; pytest puts tests/ on sys.path)."""

from __future__ import annotations

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
