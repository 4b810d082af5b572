"""Golden fingerprints: each preset's output on fixed texts is pinned in tests/golden/.
A failure here means fingerprints changed, which breaks stored indexes: a breaking change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from neardup import Fingerprinter

GOLDEN = Path(__file__).parent / "golden" / "fingerprints.jsonl"


def _rows() -> list[dict[str, object]]:
    with GOLDEN.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_golden_file_covers_every_preset() -> None:
    from neardup._core import PRESETS

    presets = {r["config"]["preset"] for r in _rows()}  # type: ignore[index]
    assert presets == set(PRESETS)
    assert len(_rows()) >= 300


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"{r['config']}-{str(r['text'])[:12]!r}")
def test_golden_fingerprint(row: dict[str, object]) -> None:
    opts = dict(row["config"])  # type: ignore[call-overload]
    preset = opts.pop("preset")
    f = Fingerprinter(preset, **opts)
    text = row["text"]
    assert isinstance(text, str)
    assert f.to_hex(f.fingerprint(text)) == row["fingerprint"]
    many = f.fingerprint_many([text])
    value = int(many[0]) if many.ndim == 1 else int(many[0, 0]) | (int(many[0, 1]) << 64)
    assert f.to_hex(value) == row["fingerprint"]
