"""The redis-server and Redis Cluster fixtures of the Redis tests (test_redis*.py;
tests/conftest.py makes them visible to every module) and their shared helpers. One server and
one cluster serve the whole session.

The fixtures start the servers on free loopback ports in a temporary directory (no RDB, no AOF)
and stop them afterwards; a missing redis-server is a failure (scripts/setup-test.sh installs it).
"""

from __future__ import annotations

import contextlib
import random
import select
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# -- servers ---------------------------------------------------------------------------------


def _free_port(cluster: bool = False) -> int:
    """A free loopback port (for a cluster node, its bus port +10000 must be free too)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not cluster:
            return port
        if port + 10000 > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair found")


def _redis_server_binary() -> str:
    path = shutil.which("redis-server")
    if path is None:
        pytest.fail("redis-server is not installed: run scripts/setup-test.sh (apt redis-server)")
    return path


class RedisServer:
    """One ``redis-server`` on 127.0.0.1 in ``workdir`` (no persistence unless asked)."""

    def __init__(self, workdir: Path, *extra: str, cluster: bool = False) -> None:
        self.port = _free_port(cluster)
        self.workdir = workdir / str(self.port)
        self.workdir.mkdir(parents=True)
        args = [_redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.workdir), "--save", "", "--appendonly", "no",
                "--protected-mode", "yes", *extra]  # fmt: skip
        if cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--cluster-node-timeout", "5000"]  # fmt: skip
        self.log = self.workdir / "server.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            # Any reply to PING (+PONG, or -NOAUTH with a password) means it is serving.
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64)[:1] in (b"+", b"-"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"redis-server on port {self.port} did not start:\n{self.log.read_text()}"
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the session."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: RedisServer) -> str:
    return f"redis://127.0.0.1:{redis_server.port}/0"


@contextlib.contextmanager
def redis_cluster(work: Path) -> Iterator[tuple[str, list[RedisServer]]]:
    """A real 3-master Redis Cluster on loopback under ``work``, joined with ``redis-cli
    --cluster create``: its URL and its nodes (stopped at the end)."""
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.fail("redis-cli is not installed: run scripts/setup-test.sh (apt redis-tools)")
    nodes = [RedisServer(work, cluster=True) for _ in range(3)]
    try:
        addrs = [f"127.0.0.1:{n.port}" for n in nodes]
        subprocess.run(
            [cli, "--cluster", "create", *addrs, "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        import redis  # (the test modules skip without the [redis] extra)

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = [
                redis.Redis(port=n.port, decode_responses=True).cluster("info")["cluster_state"]
                for n in nodes
            ]
            if all(s == "ok" for s in states):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"cluster did not become ok: {states}")
        yield f"redis+cluster://{addrs[0]}", nodes
    finally:
        for n in nodes:
            n.stop()


@pytest.fixture(scope="session")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real 3-master Redis Cluster for the session (:func:`redis_cluster`)."""
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as (url, _):
        yield url


class ReplyDropper:
    """A TCP proxy on a free loopback port to ``port``. Armed with ``drop(needle)``, the first
    connection that sends a request holding ``needle`` is closed when the server's reply comes,
    which is not passed on: the server ran the command, the client never heard (redis-py then
    sends it again when it retries)."""

    def __init__(self, port: int) -> None:
        self.target = port
        self._needle: bytes | None = None
        self.dropped = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def drop(self, needle: bytes | None) -> None:
        self._needle = needle

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self._open += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        armed = False
        try:
            while True:
                ready, _, _ = select.select([client, server], [], [])
                if client in ready:
                    data = client.recv(1 << 20)
                    if not data:
                        return
                    if self._needle is not None and self._needle in data:
                        armed, self._needle = True, None
                    server.sendall(data)
                if server in ready:
                    data = server.recv(1 << 20)
                    if not data:
                        return
                    if armed:
                        self.dropped += 1
                        return
                    client.sendall(data)
        except OSError:
            pass
        finally:
            client.close()
            server.close()

    def close(self) -> None:
        self._listener.close()
        for s in self._open:
            s.close()


@pytest.fixture(params=["single", "cluster"])
def any_url(request: pytest.FixtureRequest) -> str:
    """The single server and the cluster, in turn."""
    name = "redis_url" if request.param == "single" else "cluster_url"
    return str(request.getfixturevalue(name))


def fresh_ns() -> str:
    return "t" + uuid.uuid4().hex[:12]


def _words(rng: random.Random, n: int) -> str:
    vocab = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
        for _ in range(400)
    ]
    return " ".join(rng.choice(vocab) for _ in range(n))
