"""The README's Python example runs as written, and what its comments claim holds."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_api_example_runs_and_its_comments_hold() -> None:
    block = next(b for b in _python_blocks() if "Fingerprinter()" in b)
    scope: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), scope)
    hamming = scope["hamming"]
    assert hamming(scope["a"], scope["b"]) == 16  # type: ignore[operator]
    d = scope["d"]
    (match,) = d.check("the quick brown fox jumped over the lazy dog near the river bank")  # type: ignore[attr-defined]
    assert match.id == 1 and 0.8 <= match.similarity < 0.9
    assert scope["added"] is True and scope["matches"] == []
    assert len(scope["fps"]) == 2  # type: ignore[arg-type]
