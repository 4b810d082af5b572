"""The one-server transport of the Redis backend: a socket per thread, the commands of a round
trip packed in one call of the core, replies parsed by a hiredis reader, scripts pipelined with
``WAIT`` for replicas.

On the hot path redis-py's ``execute_command``/pipeline bookkeeping (pool checkout, retries,
hooks, per-argument encoding, its parser's layers) costs several times the client CPU of the
round trip itself, so a single-server :class:`~neardup.backends.redis_index.RedisIndex` sends
its scripts and reads through a :class:`ServerLink`: redis-py opens the connection (TLS, AUTH,
SELECT, client name: every option of the URL), then the link writes packed commands to its
socket and feeds what it reads to its own ``hiredis.Reader``. Redis Cluster goes through
redis-py's ``RedisCluster``.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from neardup._core import _pack_commands
from neardup.backends.redis_connect import Client, redis_py

_Reader: Any
try:
    from hiredis import Reader as _Reader
except ImportError:  # pragma: no cover - hiredis is part of the [redis] extra
    _Reader = None

__all__ = ["DEFAULT_SPIN_US", "ServerLink"]

_READ_SIZE = 1 << 16
# How long a single-threaded client polls for a reply before it sleeps (see
# _Socket.first_chunk): 0.2 ms covers a loopback or same-rack round trip of a busy server.
DEFAULT_SPIN_US = 200
_now = time.perf_counter
_yield: Callable[[], None] = getattr(os, "sched_yield", lambda: None)
_CAN_SPIN = hasattr(select, "poll") and hasattr(os, "sched_yield")  # (not on Windows)

# Bumped in every forked child: a socket opened before the fork belongs to the parent. (A
# counter, not os.getpid() on every call: a system call costs microseconds in a sandbox.)
_forks = [0]
os.register_at_fork(after_in_child=lambda: _forks.__setitem__(0, _forks[0] + 1))


class _Socket:
    """One thread's connection: redis-py's (for opening and closing), its socket and a
    hiredis reader of our own (redis-py's parser is never used on it after the handshake)."""

    __slots__ = ("conn", "sock", "reader", "fork", "timeout", "spin", "wait", "poller")

    def __init__(self, conn: Any, spin: float = 0.0) -> None:
        self.conn = conn
        conn.connect()
        self.sock = sock = conn._sock
        if sock is None:  # pragma: no cover - connect() raises instead
            raise redis_py.exceptions.ConnectionError("the connection did not open")
        # redis-py's socket_timeout (5 s by default) makes Python poll() before every send and
        # recv: two more system calls per round trip. The kernel keeps the same limit instead
        # (SO_RCVTIMEO/SO_SNDTIMEO on a blocking socket; a call past it fails with EAGAIN).
        # Not under TLS: there the socket's own reads decrypt, and keep what they buffered.
        self.timeout = sock.gettimeout()
        if isinstance(sock, ssl.SSLSocket) or not _CAN_SPIN:
            spin = 0.0
        elif self.timeout:
            sec = int(self.timeout)
            limit = struct.pack("ll", sec, int((self.timeout - sec) * 1e6))
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
            except OSError:  # pragma: no cover - (Linux takes them; elsewhere Python polls)
                pass
            else:
                sock.settimeout(None)
        self.reader = _Reader(
            protocolError=redis_py.exceptions.InvalidResponse,
            replyError=redis_py.exceptions.ResponseError,
        )
        self.fork = _forks[0]
        self.spin = spin
        self.wait = 0.0  # (a moving average of the reply's wait, seconds)
        self.poller = select.poll() if spin else None
        if self.poller is not None:
            self.poller.register(sock, select.POLLIN)

    def first_chunk(self) -> bytes:
        """The first bytes of the reply to what was just sent. Blocking in ``recv`` lets an
        idle virtual CPU halt, and waking it costs more than a local round trip's work: with
        ``spin`` (seconds), a single-threaded process that usually hears back within twice
        that long first polls the socket, yielding its CPU to any other runnable task between
        looks, for up to ``spin`` seconds, then blocks."""
        sock = self.sock
        t0 = _now()
        if self.poller and self.wait <= 2 * self.spin and threading.active_count() == 1:
            end = t0 + self.spin
            look = self.poller.poll
            while not look(0) and _now() < end:
                _yield()
        chunk: bytes = sock.recv(_READ_SIZE)
        self.wait += (_now() - t0 - self.wait) * 0.125
        return chunk

    def roundtrip(self, packed: bytes, n: int) -> list[Any]:
        """Send ``packed`` (``n`` commands) and read ``n`` replies (error replies as
        ``ResponseError`` objects, in place)."""
        sock, reader = self.sock, self.reader
        sock.sendall(packed)
        replies: list[Any] = []
        first = True
        while len(replies) < n:
            reply = reader.gets()
            if reply is False:
                chunk = self.first_chunk() if first else sock.recv(_READ_SIZE)
                first = False
                if not chunk:
                    raise redis_py.exceptions.ConnectionError("the server closed the connection")
                reader.feed(chunk)
                continue
            replies.append(reply)
        return replies

    def exchange(self, packed: bytes, feed: Callable[[bytes], Any]) -> Any:
        """Send ``packed``, then hand what arrives to ``feed`` until it returns something
        other than None (the replies are parsed there: the core's one-text engine)."""
        sock = self.sock
        sock.sendall(packed)
        chunk = self.first_chunk()
        while True:
            if not chunk:
                raise redis_py.exceptions.ConnectionError("the server closed the connection")
            out = feed(chunk)
            if out is not None:
                return out
            chunk = sock.recv(_READ_SIZE)


def _no_script(reply: Any) -> bool:
    return isinstance(reply, redis_py.exceptions.ResponseError) and str(reply).startswith(
        "NOSCRIPT"
    )


class ServerLink:
    """Commands and scripts to one Redis server over the calling thread's own connection
    (taken once from ``client``'s pool: one per thread, so threads never share one; a forked
    child opens its own)."""

    def __init__(
        self,
        client: Client,
        wait_replicas: int = 0,
        wait_timeout: int = 1000,
        spin_us: int = DEFAULT_SPIN_US,
    ) -> None:
        self.client = client
        self.wait_replicas = wait_replicas
        self.wait_timeout = wait_timeout
        self.spin_us = spin_us
        self.local = threading.local()

    def _socket(self) -> _Socket:
        s: _Socket | None = getattr(self.local, "s", None)
        if s is None or s.fork != _forks[0]:
            pool = self.client.connection_pool  # type: ignore[union-attr]
            s = self.local.s = _Socket(pool.get_connection(), self.spin_us * 1e-6)
        return s

    def _drop(self) -> None:
        s: _Socket | None = getattr(self.local, "s", None)
        self.local.s = None
        if s is not None and s.fork == _forks[0]:
            s.conn.disconnect()
            self.client.connection_pool.release(s.conn)  # type: ignore[union-attr]

    def roundtrip(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """``commands`` in one round trip on this thread's connection (each a sequence of
        arguments, or ``bytes`` already packed in RESP); the replies in order,
        error replies as ``redis.ResponseError`` objects in place (every reply is read, so the
        connection stays in step). A connection that fails is closed, and reopened and sent to
        once more; one interrupted mid-way is closed (a reply may be left unread)."""
        return self.roundtrip_packed(_pack_commands(commands), len(commands))

    def roundtrip_packed(self, packed: bytes, n: int) -> list[Any]:
        """:meth:`roundtrip` of ``n`` commands already packed in RESP."""
        return self._on_socket(lambda s: s.roundtrip(packed, n))

    def exchange(
        self, packed: bytes, feed: Callable[[bytes], Any], rewind: Callable[[], None]
    ) -> Any:
        """:meth:`roundtrip_packed` whose replies ``feed`` parses (:meth:`_Socket.exchange`);
        ``rewind`` before the request is sent again on a new connection. A reply ``feed``
        cannot parse (``ValueError``) closes the connection: it is out of step."""
        return self._on_socket(lambda s: s.exchange(packed, feed), rewind)

    def _on_socket(
        self, use: Callable[[_Socket], Any], again: Callable[[], None] | None = None
    ) -> Any:
        """``use(socket)`` on this thread's connection; a connection that fails is closed,
        reopened and used once more (``again`` first); one interrupted mid-way is closed (a
        reply may be left unread)."""
        for attempt in (0, 1):
            s = self._socket()
            try:
                return use(s)
            except (OSError, redis_py.exceptions.ConnectionError) as e:
                self._drop()
                if attempt:
                    if isinstance(e, BlockingIOError):  # (past the kernel's limit, above)
                        raise redis_py.exceptions.TimeoutError(
                            f"no reply from the server within socket_timeout={s.timeout} s"
                        ) from e
                    if isinstance(e, TimeoutError):
                        raise redis_py.exceptions.TimeoutError(str(e)) from e
                    raise redis_py.exceptions.ConnectionError(str(e)) from e
                if again is not None:
                    again()
            except BaseException:
                self._drop()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def send_all(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """:meth:`roundtrip`, raising the first error reply (after every reply is read)."""
        replies = self.roundtrip(commands)
        for r in replies:
            if isinstance(r, Exception):
                raise r
        return replies

    def call(self, script: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """One server: run ``script`` (a redis-py ``Script``) on this thread's connection. A
        lost connection is reopened and the call sent again once (the scripts are safe to
        repeat: a write sent again finds its own first run's version under its ref and answers
        what that run did; the retraction of a version already gone changes nothing)."""
        if self.wait_replicas:
            return self.run_scripts(script, [(keys, args)])[0]
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        out = self.roundtrip([command])[0]
        if _no_script(out):
            self.client.script_load(script.script)
            out = self.roundtrip([command])[0]
        if isinstance(out, Exception):
            raise out
        return out

    def run_scripts(
        self,
        script: Any,
        calls: Sequence[tuple[Sequence[Any], Sequence[Any]]],
        wait: bool = True,
    ) -> list[Any]:
        """One server: ``script`` for each ``(keys, args)``, in order, in one round trip (then
        ``WAIT`` for ``wait_replicas``, unless ``wait`` is false: a script that only reads);
        the replies. See :meth:`run_scripts_reading`."""
        if len(calls) == 1 and not self.wait_replicas:
            return [self.call(script, *calls[0])]
        return [out for out, _ in self.run_scripts_reading(script, calls, None, wait)]

    def run_scripts_reading(
        self,
        script: Any,
        calls: Sequence[tuple[Sequence[Any], Sequence[Any]]],
        reads: Sequence[Sequence[Any] | None] | None,
        wait: bool = True,
    ) -> list[tuple[Any, Any]]:
        """One server: for each ``(keys, args)`` of ``calls``, ``script`` then the command
        ``reads[j]`` (if any) right after it, all in order in one round trip (then ``WAIT``
        for ``wait_replicas``); ``(script reply, read reply or None)`` for each. Calls that
        found the script missing (a restarted or flushed server) are sent again with their
        reads, in order, once it is loaded. An error reply is raised (after every reply is
        read)."""
        reads = reads if reads is not None else [None] * len(calls)
        sha = script.sha
        if len(calls) == 1 and not (self.wait_replicas and wait):
            # (the hot path, one call: its replies as they come, unless the script is missing)
            (k, a), r = calls[0], reads[0]
            command = ("EVALSHA", sha, len(k), *k, *a)
            replies = self.roundtrip([command] if r is None else [command, r])
            if not _no_script(replies[0]):
                for reply in replies:
                    if isinstance(reply, Exception):
                        raise reply
                return [(replies[0], None if r is None else replies[1])]
            self.client.script_load(script.script)  # (then sent again below)
        groups: list[list[Sequence[Any]]] = []
        for (k, a), r in zip(calls, reads):
            group: list[Sequence[Any]] = [("EVALSHA", sha, len(k), *k, *a)]
            if r is not None:
                group.append(r)
            groups.append(group)
        waits: list[Sequence[Any]] = []
        if self.wait_replicas and wait:
            waits.append(("WAIT", self.wait_replicas, self.wait_timeout))
        results: list[tuple[Any, Any]] = [(None, None)] * len(calls)
        todo = list(range(len(calls)))
        for attempt in (0, 1):
            flat = self.roundtrip([c for j in todo for c in groups[j]] + waits)
            if waits:
                acked = flat.pop()
                if isinstance(acked, Exception):
                    raise acked
                if int(acked) < self.wait_replicas:
                    raise TimeoutError(
                        f"only {acked} of wait_replicas={self.wait_replicas} replicas "
                        f"acknowledged the write within {self.wait_timeout} ms"
                    )
            missing = []
            pos = 0
            for j in todo:
                out = flat[pos]
                read = flat[pos + 1] if len(groups[j]) > 1 else None
                pos += len(groups[j])
                if _no_script(out) and not attempt:
                    missing.append(j)
                    continue
                for r in (out, read):
                    if isinstance(r, Exception):
                        raise r
                results[j] = (out, read)
            if not missing:
                break
            self.client.script_load(script.script)
            todo = missing
        return results
