"""Where the time of a text check-and-add on one Redis server goes: the client's own logic,
and the floor the protocol allows, each against datasketch (benches/redis_backend.py).

On a shared virtual machine the rates of benches/redis_backend.py move by half from one minute
to the next (a bare loopback round trip costs 50 to 350 us of CPU here); these two views take
the machine's noise out of one side of the question or the other:

``--logic``: the check-and-adds of one process (``RedisDeduplicator.check_and_add``, the
default policy) are run once against a real redis-server, with their refs drawn from a seeded
generator, and every round trip's replies are recorded (the bytes received, for the core's
one-text engine, which parses them itself). Then the same calls run again with the
same refs against the recorded replies (nothing is sent): the client CPU per call without the
kernel and the server, best of ``--repeat``. Each replay is checked to make the same round
trips and the same decisions.

``--floor``: the recorded requests (the exact bytes of every round trip) are sent again to a
fresh server by 1, 2 and 4 processes that do nothing else per document than the core's text
work (normalise, fingerprint, sketch): the rate a client with no logic of its own would reach
with this protocol, against datasketch's in the same processes.

    python benches/redis_client.py --logic
    python benches/redis_client.py --floor --procs 1,2,4
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import redis_backend as rb  # noqa: E402


def _replies_in(raw: bytes) -> int:
    """How many replies the bytes ``raw`` hold."""
    from hiredis import Reader

    reader = Reader()
    reader.feed(raw)
    n = 0
    while reader.gets() is not False:
        n += 1
    return n


def _record(
    url: str, docs: list[str]
) -> tuple[list[bool], list[Any], list[list[tuple[bytes, int]]]]:
    """One process's check-and-adds of ``docs`` (refs seeded): the decisions, the replies of
    each round trip (parsed, or the bytes received for the core's engine, which parses
    them) and, per document, each of its round trips' request (packed) and number of
    commands."""
    from neardup.backends import redis_format, redis_link
    from neardup.backends.redis import RedisDeduplicator

    replies: list[Any] = []
    requests: list[list[tuple[bytes, int]]] = []
    real = redis_link.ServerLink.roundtrip_packed
    real_exchange = redis_link.ServerLink.exchange

    def recording(self: Any, packed: bytes, n: int) -> list[Any]:
        out = real(self, packed, n)
        replies.append(out)
        if requests:
            requests[-1].append((packed, n))
        return out

    def exchanging(self: Any, packed: bytes, feed: Any, rewind: Any) -> Any:
        chunks: list[bytes] = []

        def kept(chunk: bytes) -> Any:
            chunks.append(chunk)
            return feed(chunk)

        out = real_exchange(self, packed, kept, rewind)
        raw = b"".join(chunks)
        replies.append(raw)
        if requests:
            requests[-1].append((packed, _replies_in(raw)))
        return out

    redis_format._refs.seed(1)
    redis_link.ServerLink.roundtrip_packed = recording  # type: ignore[method-assign]
    redis_link.ServerLink.exchange = exchanging  # type: ignore[method-assign]
    try:
        d = RedisDeduplicator.from_url(url, namespace="record")
        decisions = []
        for i, t in enumerate(docs):
            requests.append([])
            decisions.append(d.check_and_add(i, t)[0])
    finally:
        redis_link.ServerLink.roundtrip_packed = real  # type: ignore[method-assign]
        redis_link.ServerLink.exchange = real_exchange  # type: ignore[method-assign]
    return decisions, replies, requests


def logic(docs: list[str], repeat: int) -> None:
    from neardup.backends import redis_format, redis_link
    from neardup.backends.redis import RedisDeduplicator

    server = rb.Server()
    try:
        decisions, replies, _ = _record(server.url, docs)
        d = RedisDeduplicator.from_url(server.url, namespace="replay")
        d.check(docs[0])  # (scripts, tables, the connection: then nothing is sent)
    finally:
        server.stop()
    at = [0]

    def replay(self: Any, packed: bytes, n: int) -> list[Any]:
        out = replies[at[0]]
        at[0] += 1
        return out

    def replay_exchange(self: Any, packed: bytes, feed: Any, rewind: Any) -> Any:
        out = feed(replies[at[0]])
        at[0] += 1
        return out

    redis_link.ServerLink.roundtrip_packed = replay  # type: ignore[method-assign]
    redis_link.ServerLink.exchange = replay_exchange  # type: ignore[method-assign]
    best = float("inf")
    for _ in range(repeat):
        redis_format._refs.seed(1)
        at[0] = 0
        d.index._cache.__init__(d.index._cache.size)  # (as new: what the recording saw)
        d.index._seen = 0
        if d.index._engine is not None:
            d.index._engine.clear()
        c0 = time.process_time()
        got = [d.check_and_add(i, t)[0] for i, t in enumerate(docs)]
        best = min(best, time.process_time() - c0)
        if got != decisions or at[0] != len(replies):
            sys.exit("the replay took another way than the recording: not comparable")
    print(
        f"client logic per text check-and-add: {best / len(docs) * 1e6:.1f} us of CPU "
        f"(best of {repeat}; {len(replies) / len(docs):.2f} round trips per call, "
        f"{sum(decisions)} of {len(docs)} added)"
    )


def _floor_worker(url: str, ns: str, jobs: list[tuple[int, Any]], start: Any, out: Any) -> None:
    """Per document: the core's text work, then its recorded round trips sent as they were."""
    from hiredis import Reader
    from neardup.backends.redis import RedisDeduplicator

    d = RedisDeduplicator.from_url(url, namespace=ns)
    host, port = url.split("//")[1].split("/")[0].split(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = Reader()
    start.wait()
    t0, c0, k0 = time.perf_counter(), time.process_time(), os.times().system
    for _, (text, requests) in jobs:
        d._prepare_one(text)
        for packed, n in requests:
            sock.sendall(packed)
            got = 0
            while got < n:
                if reader.gets() is False:
                    reader.feed(sock.recv(1 << 16))
                    continue
                got += 1
    out.put((time.perf_counter() - t0, 0, time.process_time() - c0, os.times().system - k0))


def floor(docs: list[str], procs: list[int], repeat: int) -> None:
    import redis

    server = rb.Server()
    try:
        _, _, requests = _record(server.url, docs)
        client = redis.Redis.from_url(server.url)
        jobs = list(enumerate(zip(docs, requests)))
        for p in procs:
            best = None
            for _ in range(repeat):
                client.flushall()  # (scripts stay loaded)
                got = rb.run(_floor_worker, server.url, jobs, p, server.proc.pid)
                best = got if best is None or got[0] > best[0] else best
            assert best is not None
            peer = rb.run(rb._datasketch_worker, server.url, list(enumerate(docs)), p,
                          server.proc.pid)  # fmt: skip
            print(
                f"{p} process(es) | floor {best[0]:>7,.0f}/s (client CPU {best[2]:>4,.0f} us, "
                f"{best[5]:>3,.0f} of it in the kernel, "
                f"server CPU {best[3]:>4,.0f} us per call) | datasketch {peer[0]:>5,.0f}/s | "
                f"{best[0] / peer[0]:.1f}x",
                flush=True,
            )
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logic", action="store_true", help="client logic CPU per call")
    ap.add_argument("--floor", action="store_true", help="the protocol's floor vs datasketch")
    ap.add_argument("--docs", type=int, default=4000, help="documents (default 4 000)")
    ap.add_argument("--procs", default="1,2,4", help="client process counts for --floor")
    ap.add_argument("--repeat", type=int, default=10, help="runs; the best is kept")
    args = ap.parse_args()
    if not (args.logic or args.floor):
        ap.error("say --logic, --floor or both")
    docs = rb.documents(args.docs)
    if args.logic:
        logic(docs, args.repeat)
    if args.floor:
        floor(docs, [int(x) for x in args.procs.split(",")], max(1, args.repeat // 5))


if __name__ == "__main__":
    main()
