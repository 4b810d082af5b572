"""A real ``neardup serve`` subprocess on a free loopback port, for the service and client tests.

(This module holds the harness and the fixtures built on it; the tests that use it import it.)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

STARTUP_TIMEOUT = 60.0
LISTEN_RE = re.compile(r"neardup: listening on (http://\S+)")


class ServerProcess:
    """``python -m neardup serve --data DIR --port 0 ARGS...``, its URL once it listens."""

    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.args = list(args)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
        self.env.update(env or {})
        self.env["PYTHONUNBUFFERED"] = "1"
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.output: list[str] = []

    def start(self) -> ServerProcess:
        cmd = [
            sys.executable,
            "-m",
            "neardup",
            "serve",
            "--data",
            str(self.data_dir),
            "--port",
            "0",
            "--log-level",
            "warning",
            *self.args,
        ]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env
        )
        found: list[str] = []
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                m = LISTEN_RE.search(line)
                if m and not found:
                    found.append(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(STARTUP_TIMEOUT) or not found:
            self.kill()
            raise RuntimeError("server did not start:\n" + "".join(self.output))
        self.url = found[0]
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:  # the socket is bound before the app finished startup
            try:
                if httpx.get(self.url + "/healthz", timeout=5).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise RuntimeError("server did not become healthy:\n" + "".join(self.output))

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (graceful: queued writes applied, store closed) and wait; the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL: no chance to flush anything."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.kill()


def post(url: str, body: Any, **kwargs: Any) -> httpx.Response:
    """POST a JSON body (or raw bytes) with the JSON content type."""
    headers = {"content-type": "application/json", **kwargs.pop("headers", {})}
    if isinstance(body, (bytes, str)):
        return httpx.post(url, content=body, headers=headers, timeout=30, **kwargs)
    return httpx.post(url, json=body, headers=headers, timeout=30, **kwargs)


def test_harness_reports_a_server_that_cannot_start(tmp_path: Path) -> None:
    """The harness fails loudly (with the server's output) instead of hanging."""
    (tmp_path / "file").write_text("not a directory")
    srv = ServerProcess(tmp_path / "file" / "sub")
    with pytest.raises(RuntimeError, match="did not start"):
        srv.start()
