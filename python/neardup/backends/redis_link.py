"""The one-server transport of the Redis backend: a connection per thread, commands packed by
hiredis, scripts pipelined with ``WAIT`` for replicas.

On the hot path redis-py's ``execute_command``/pipeline bookkeeping (pool checkout, retries,
hooks, per-argument encoding) costs as much client CPU as the round trip itself, so a
single-server :class:`~neardup.backends.redis_index.RedisIndex` sends its scripts and reads
through a :class:`ServerLink`. Redis Cluster goes through redis-py's ``RedisCluster``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from neardup.backends.redis_connect import Client, redis_py

_pack: Any
try:
    from hiredis import pack_command as _pack
except ImportError:  # pragma: no cover - hiredis is part of the [redis] extra
    _pack = None

__all__ = ["ServerLink"]


class ServerLink:
    """Commands and scripts to one Redis server over the calling thread's own connection
    (taken once from ``client``'s pool: one per thread, so threads never share one; a forked
    child takes its own)."""

    def __init__(self, client: Client, wait_replicas: int = 0, wait_timeout: int = 1000) -> None:
        self.client = client
        self.wait_replicas = wait_replicas
        self.wait_timeout = wait_timeout
        self.local = threading.local()

    def connection(self) -> Any:
        """This thread's own connection, taken from the client's pool once (one server)."""
        local = self.local
        conn = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            conn = self.client.connection_pool.get_connection()  # type: ignore[union-attr]
            local.conn, local.pid = conn, os.getpid()
        return conn

    def call(self, script: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """One server: run ``script`` on this thread's connection. The hot path: redis-py's
        ``execute_command`` (pool checkout, retries, hooks) costs as much client time as the
        round trip itself. A lost connection is reopened and the call sent again once (the
        write scripts are safe to repeat: a repeat finds its ref in use and draws another,
        or replaces the first write of its id)."""
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        for attempt in (0, 1, 2):
            try:
                return self.send_all([command])[0]
            except redis_py.exceptions.NoScriptError:
                if attempt == 2:
                    raise
                self.client.script_load(script.script)
        raise AssertionError("unreachable")  # pragma: no cover

    def send_all(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """One server: ``commands`` in one round trip on this thread's connection (a pipeline
        without redis-py's per-command bookkeeping, packed by hiredis). Every reply is read
        before the first error reply is raised, so the connection stays in step; a connection
        that fails (or is interrupted) mid-way is closed, and reopened and sent to once more."""
        for attempt in (0, 1):
            conn = self.connection()
            try:
                if _pack is not None:  # hiredis packs the whole command in C
                    conn.send_packed_command([_pack(c) for c in commands], check_health=False)
                else:  # pragma: no cover - hiredis is part of the [redis] extra
                    conn.send_packed_command(conn.pack_commands(commands), check_health=False)
                replies: list[Any] = []
                error: Exception | None = None
                for _ in commands:
                    try:
                        replies.append(conn.read_response())
                    except redis_py.exceptions.ResponseError as e:
                        replies.append(e)
                        error = error or e
                if error is not None:
                    raise error
                return replies
            except (redis_py.exceptions.ConnectionError, redis_py.exceptions.TimeoutError):
                conn.disconnect()
                if attempt:
                    raise
            except redis_py.exceptions.ResponseError:
                raise
            except BaseException:
                conn.disconnect()  # a reply may be left unread: never reuse this connection
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def run_scripts(self, script: Any, calls: Sequence[tuple[list[Any], list[Any]]]) -> list[Any]:
        """One server: ``script`` for each ``(keys, args)``, in order, in one round trip (then
        ``WAIT`` for ``wait_replicas``). A single call goes straight to the connection: a
        redis-py pipeline costs more client time than the round trip it would save."""
        if len(calls) == 1 and not self.wait_replicas:
            return [self.call(script, *calls[0])]
        pipe = self.client.pipeline(transaction=False)
        for keys, args in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        if self.wait_replicas:
            pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout)
        outs = self.execute(pipe, [(j, script, k, a) for j, (k, a) in enumerate(calls)])
        if self.wait_replicas:
            acked = int(outs.pop())
            if acked < self.wait_replicas:
                raise TimeoutError(
                    f"only {acked} of wait_replicas={self.wait_replicas} replicas acknowledged "
                    f"the write within {self.wait_timeout} ms"
                )
        return outs

    def execute(
        self, pipe: Any, calls: Sequence[tuple[int, Any, list[Any], list[Any]]]
    ) -> list[Any]:
        """Run a pipeline whose commands at ``calls[i][0]`` are EVALSHA of ``calls[i][1]``;
        any that found its script missing (a restarted or flushed server) is run again by the
        ``Script`` object, which loads it. (Scripts are loaded when the index is opened: a
        redis-py pipeline with Script objects would ask SCRIPT EXISTS on every execute.)"""
        results = list(pipe.execute(raise_on_error=False))
        for pos, script, keys, args in calls:
            if isinstance(results[pos], redis_py.exceptions.NoScriptError):
                results[pos] = script(keys=keys, args=args)
        for r in results:
            if isinstance(r, Exception):
                raise r
        return results
