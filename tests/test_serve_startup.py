"""``neardup serve`` refuses to start with one line naming the setting, never a traceback:
exit 2 for a bad setting, 1 for a store that cannot be opened."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from _helpers import neardup


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(*args: str) -> tuple[int, str]:
    """``neardup serve --port 0 ARGS`` that must fail at once: its exit code and output."""
    done = neardup("serve", "--port", "0", *args)
    return done.returncode, done.stdout + done.stderr


def assert_one_line(code: int, output: str, expected: int, *names: str) -> None:
    assert "Traceback" not in output, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neardup serve: "), output
    assert code == expected, output
    for name in names:
        assert name in lines[0], output


def test_garbage_policy_file_in_data_dir(tmp_path: Path) -> None:
    (tmp_path / "policy.json").write_text("garbage{")
    code, out = serve("--data", str(tmp_path))
    assert_one_line(code, out, 1, "--data", str(tmp_path / "policy.json"))


def test_k_changed_on_an_existing_data_dir(tmp_path: Path) -> None:
    from neardup.dedup import Policy

    policy = Policy.default().replace(k_short=3, k_long=3)
    (tmp_path / "policy.json").write_text(json.dumps(policy.to_dict()))
    code, out = serve("--data", str(tmp_path), "--k", "5")
    assert_one_line(code, out, 2, "--k", str(tmp_path))


@pytest.mark.parametrize("value", ['{"bogus": 1}', "[1, 2]", "{not json", "no-such-policy.json"])
def test_bad_policy(tmp_path: Path, value: str) -> None:
    code, out = serve("--data", str(tmp_path), "--policy", value)
    assert_one_line(code, out, 2, "--policy")


def test_bad_preset(tmp_path: Path) -> None:
    # (a choice the parser knows: argparse's usage, then one error line naming the choices)
    code, out = serve("--data", str(tmp_path), "--preset", "bogus")
    assert "Traceback" not in out and code == 2, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("neardup serve: error: argument --preset: invalid choice: 'bogus'")
    assert "seed000" in last


@pytest.mark.parametrize("option", ["blocks=abc", "socket_timeout=abc"])
def test_bad_redis_url_option(option: str) -> None:
    code, out = serve("--store", f"redis://127.0.0.1:{_closed_port()}/0?{option}")
    assert_one_line(code, out, 2, "--store", option.split("=")[0])


def test_redis_unreachable() -> None:
    port = _closed_port()
    code, out = serve("--store", f"redis://user:secret@127.0.0.1:{port}/0")
    assert_one_line(code, out, 1, "--store", str(port))
    assert "secret" not in out


def test_an_address_in_use_leaves_the_store_closed(tmp_path: Path) -> None:
    """The store is opened before the address is bound: when binding fails it is closed again
    (its SQLite write-ahead log was left behind, the store not closed)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        done = neardup("serve", "--data", str(tmp_path / "store"), "--port", port)
    assert_one_line(done.returncode, done.stdout + done.stderr, 1, "Address already in use")
    names = sorted(p.name for p in (tmp_path / "store").iterdir())
    assert "texts.sqlite" in names and not [n for n in names if n.endswith(("-wal", "-shm"))]
