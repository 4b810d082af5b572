"""Settings of the service (environment, flags, validation) and ``neardup serve`` usage errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from neardup.service.backend import make_policy
from neardup.service.settings import Settings, SettingsError, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("15m", 900.0),
        ("12h", 43200.0),
        ("2d", 172800.0),
        ("1w", 604800.0),
        ("1.5h", 5400.0),
        ("30", 30.0),
        ("none", None),
        ("0", None),
        ("off", None),
    ],
)
def test_parse_duration(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["2 days", "-1d", "d", "1y", "1e3s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(SettingsError, match="--retention must be a duration"):
        parse_duration(text, "--retention")


@pytest.mark.parametrize(
    ("text", "size"), [("65536", 65536), ("512k", 524288), ("16MiB", 16 * 2**20), ("1g", 2**30)]
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "12 parsecs", "-5", "0", "1.5m"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(SettingsError, match="--max-body"):
        parse_size(text, "--max-body")


def test_from_env_reads_neardup_variables_and_flags_win() -> None:
    env = {
        "NEARDUP_DATA": "/tmp/x",
        "NEARDUP_PORT": "9001",
        "NEARDUP_K": "5",
        "NEARDUP_RETENTION": "3h",
        "NEARDUP_TOKEN": "abcdefgh12",
        "NEARDUP_MAX_BATCH": "7",
        "NEARDUP_MAX_TEXT_BYTES": "1k",
        "NEARDUP_FAST_PATH": "0",
        "NEARDUP_SYNC": "normal",
        "OTHER": "ignored",
    }
    s = Settings.from_env(env)
    assert (s.data_dir, s.port, s.k, s.retention, s.token) == (
        "/tmp/x",
        9001,
        5,
        10800.0,
        "abcdefgh12",
    )
    assert (s.max_batch, s.max_text_bytes, s.fast_path, s.sync) == (7, 1024, False, "normal")
    assert s.host == "127.0.0.1", "binds loopback by default"
    assert "abcdefgh12" not in repr(s), "the token is kept out of reprs and logs"
    s = Settings.from_env(env, port=1234, k=None)
    assert s.port == 1234 and s.k == 5


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NEARDUP_PORT": "http"}, "NEARDUP_PORT must be an integer"),
        ({"NEARDUP_PORT": "70000"}, "port must be in 0..65535"),
        ({"NEARDUP_K": "65"}, "k must be an integer in 0..64"),
        ({"NEARDUP_TOKEN": "short"}, "token must be at least 8"),
        ({"NEARDUP_TOKEN": "has space in it"}, "token must be"),
        ({"NEARDUP_RETENTION": "forever"}, "NEARDUP_RETENTION must be a duration"),
        ({"NEARDUP_MAX_TEXT_BYTES": "32MiB"}, "max_text_bytes .* must not exceed max_body_bytes"),
        ({"NEARDUP_SYNC": "sometimes"}, "sync must be 'full' or 'normal'"),
        ({"NEARDUP_STORE": "mongodb://x"}, "store must be a directory"),
        ({"NEARDUP_WRITER": "fiber"}, "writer must be 'thread' or 'inline', got 'fiber'"),
    ],
)
def test_invalid_settings_name_the_setting(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env({"NEARDUP_DATA": "/tmp/x", **env})


def test_writer_setting() -> None:
    assert not Settings(data_dir="/tmp/x").writer_is_inline  # the default: its own thread
    inline = Settings.from_env({"NEARDUP_DATA": "/tmp/x", "NEARDUP_WRITER": "inline"})
    assert inline.writer_is_inline
    # (inline with Redis: /healthz waited 10 s while a paused server timed out the writes)
    for store in ("redis://localhost:6379", "redis+cluster://localhost:7000"):
        with pytest.raises(SettingsError, match="writer 'inline' waits for the store"):
            Settings.from_env({"NEARDUP_STORE": store, "NEARDUP_WRITER": "inline"})


def test_a_store_is_required() -> None:
    with pytest.raises(SettingsError, match="data_dir .* is required"):
        Settings()


@pytest.mark.parametrize(
    "url",
    ["redis://localhost:6379/0", "rediss://h:6380", "redis+cluster://h:7000", "rediss+cluster://h"],
)
def test_redis_urls_select_the_redis_store(url: str) -> None:
    s = Settings(store=url)
    assert s.uses_redis and s.local_path is None


def test_file_urls_and_paths_are_local() -> None:
    assert Settings(store="file:///var/lib/neardup").local_path == "/var/lib/neardup"
    assert Settings(store="/srv/nd").local_path == "/srv/nd"
    assert Settings(data_dir="/d").local_path == "/d"


def test_sweep_interval() -> None:
    assert Settings(data_dir="/d", retention=None).sweep_interval is None
    assert Settings(data_dir="/d", retention=172800.0).sweep_interval == 60.0
    assert Settings(data_dir="/d", retention=50.0).sweep_interval == 1.0
    assert Settings(data_dir="/d", retention=50.0, expire_interval=0.1).sweep_interval == 0.1


def test_policy_from_settings(tmp_path: Path) -> None:
    from neardup.dedup import Policy

    assert make_policy(Settings(data_dir="/d")) is None, "default: the saved or default policy"
    p = make_policy(Settings(data_dir="/d", k=3))
    assert p == Policy.default().replace(k_short=3, k_long=3)
    spec = tmp_path / "policy.json"
    spec.write_text('{"verifier": "none", "k_short": 4, "k_long": 6}')
    p = make_policy(Settings(data_dir="/d", policy=str(spec)))
    assert (p.verifier, p.k_short, p.k_long) == ("none", 4, 6)
    p = make_policy(Settings(data_dir="/d", policy='{"threshold": 0.5}', k=2))
    assert (p.threshold, p.k_short) == (0.5, 2)
    with pytest.raises(SettingsError, match="policy is not a JSON object"):
        make_policy(Settings(data_dir="/d", policy="{nope"))
    with pytest.raises(ValueError, match="unknown policy setting"):
        make_policy(Settings(data_dir="/d", policy='{"colour": 1}'))


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neardup", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_usage_errors_exit_2_with_a_message(tmp_path: Path) -> None:
    r = _serve("--port", "1")  # no --data
    assert r.returncode == 2 and "data_dir (--data / NEARDUP_DATA) is required" in r.stderr
    r = _serve("--data", str(tmp_path), "--retention", "soon")
    assert r.returncode == 2 and "--retention must be a duration" in r.stderr
    r = _serve("--data", str(tmp_path), "--max-body", "lots")
    assert r.returncode == 2 and "--max-body must be a byte size" in r.stderr
    r = _serve("--data", str(tmp_path), "--sync", "maybe")
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = _serve("--data", str(tmp_path), "--token-file", str(tmp_path / "missing"))
    assert r.returncode == 2 and "missing" in r.stderr


def test_cli_port_in_use_exits_1(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        r = _serve("--data", str(tmp_path / "d"), "--port", str(s.getsockname()[1]))
    assert r.returncode == 1 and "Address already in use" in r.stderr


def test_cli_help_lists_the_flags() -> None:
    r = _serve("--help")
    assert r.returncode == 0
    for flag in (
        "--data",
        "--store",
        "--host",
        "--port",
        "--k",
        "--retention",
        "--preset",
        "--token",
        "--max-body",
        "--max-text",
        "--sync",
        "--writer",
    ):
        assert flag in r.stdout


def test_a_retention_in_the_store_url_is_refused_before_connecting() -> None:
    """The service's --retention (default 2d) used to override the URL's retention= silently."""
    from neardup.service.backend import open_backend

    pytest.importorskip("redis")
    with pytest.raises(SettingsError, match="not from the URL: remove retention=") as refused:
        open_backend(Settings(store="redis://127.0.0.1:1/0?retention=3600&password=s3cret"))
    assert "s3cret" not in str(refused.value) and "password=***" in str(refused.value)
