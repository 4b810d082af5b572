"""The service on one local redis-server (``neardup serve --store redis://...``) against
datasketch's Redis-backed MinHashLSH, in the same run.

A throwaway redis-server (no persistence) on a free port; ``--items`` texts stored first (with
Redis's ``used_memory`` a stored text); then through one ``neardup serve`` process:

1. single ``POST /v1/check-and-add``: requests/s, p50/p99 (wrk 2 threads, ``--connections``);
2. ``POST /v1/check-and-add/batch`` (``--batch-size`` texts a request, 2 connections): docs/s;

and the peer: datasketch ``MinHashLSH(threshold=0.8, num_perm=128)`` with its Redis storage on
the same server, the same stored texts (inserted in one insertion session) and query-then-insert
of the same stream, one document at a time, in-process (no HTTP: its best case).

The streams are those of benches/service.py (``distinct``: 80 % new short texts, 20 %
near-copies; ``templated``: one notice with a new number each).

Run: ``python benches/redis_backend.py --quick`` (5,000 stored, 3 s a run) or
``python benches/redis_backend.py`` (20,000 stored, 10 s a run); ``--stream templated``.
``--cpu``: only the CPU that the batch path costs the client and redis-server per 1,000 texts
(in-process ``check_and_add_many``, 10 batches; figures that do not follow the machine's load).
(Named ``redis_backend`` so that it does not shadow the ``redis`` package in this folder.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service import (  # noqa: E402
    Server,
    python_load,
    request_bodies,
    single_load,
    stored_text,
    vocabulary,
)

TARGET_BATCH_DPS = 20_000
TARGET_SINGLE_RPS = 2_000
TARGET_P99_MS = 20.0


def start_redis(work: Path) -> tuple[subprocess.Popen[bytes], int]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (scripts/setup-test.sh)")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(work)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start") from None
            time.sleep(0.05)


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its waited-for children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def redis_cpu(client: Any) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"] + info["used_cpu_sys"])


def used_memory(client: Any) -> int:
    return int(client.info("memory")["used_memory"])


def peer(server: Any, port: int, stored: list[str], stream: list[str]) -> dict[str, float]:
    """datasketch MinHashLSH on Redis: insert ``stored`` (one session), then query-then-insert
    ``stream`` one text at a time; docs/s of the latter, on the same 5-gram shingles, and
    Redis's ``used_memory`` a stored text (``server``: a client of that Redis)."""
    from datasketch import MinHash, MinHashLSH
    from neardup.dedup import Policy
    from neardup.verify import shingles

    prepare = Policy.default().prepare

    def minhash(text: str) -> Any:
        m = MinHash(num_perm=128)
        m.update_batch([s.encode() for s in shingles(prepare(text))])
        return m

    lsh = MinHashLSH(
        threshold=0.8,
        num_perm=128,
        storage_config={
            "type": "redis",
            "basename": b"peer",
            "redis": {"host": "127.0.0.1", "port": port},
        },
    )
    m0 = used_memory(server)
    with lsh.insertion_session() as session:
        for i, text in enumerate(stored):
            session.insert(f"p{i}", minhash(text))
    per_text = (used_memory(server) - m0) / max(1, len(stored))
    t0 = time.perf_counter()
    added = 0
    for j, text in enumerate(stream):
        m = minhash(text)
        if not lsh.query(m):
            lsh.insert(f"q{j}", m)
            added += 1
    took = time.perf_counter() - t0
    return {"dps": len(stream) / took, "added": added, "bytes_per_text": per_text}


def cpu(port: int, stored: list[str], bodies: list[bytes], batch: int) -> dict[str, float]:
    """CPU per 1,000 texts of ``check_and_add_many`` in batches of ``batch``, in-process: the
    client's ``process_time`` and redis-server's ``used_cpu_user + used_cpu_sys`` (neither
    depends much on the machine's load, unlike rates)."""
    from neardup.backends.redis import RedisDeduplicator

    with RedisDeduplicator.from_url(f"redis://127.0.0.1:{port}/0?namespace=cpu") as d:
        for s in range(0, len(stored), 5000):
            d.add_many(list(range(s, s + len(stored[s : s + 5000]))), stored[s : s + 5000])
        items = [orjson.loads(b) for b in bodies]
        client = server = 0.0
        for s in range(0, len(items), batch):
            chunk = items[s : s + batch]
            r0, c0 = redis_cpu(d.store.client), time.process_time()
            d.check_and_add_many([x["id"] for x in chunk], [x["text"] for x in chunk])
            client += time.process_time() - c0
            server += redis_cpu(d.store.client) - r0
    per = 1e6 / len(items)  # (s per text -> ms per 1,000 texts)
    return {"client_ms": client * per, "redis_ms": server * per}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5,000 stored, 3 s a run")
    parser.add_argument("--items", type=int, help="texts stored first (20,000; quick 5,000)")
    parser.add_argument("--duration", type=float, help="seconds a load run (10; quick 3)")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--peer-docs", type=int, default=2000, help="datasketch's stream")
    parser.add_argument("--stream", choices=("distinct", "templated"), default="distinct")
    parser.add_argument("--load", choices=["auto", "wrk", "python"], default="auto")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument(
        "--cpu", action="store_true", help="only the CPU per 1,000 texts of the batch path"
    )
    args = parser.parse_args()
    items = args.items if args.items is not None else (5_000 if args.quick else 20_000)
    args.duration = args.duration or (3.0 if args.quick else 10.0)
    vocab = vocabulary()
    stored = [stored_text(i, vocab, args.stream) for i in range(items)]
    text_bytes = sum(len(t.encode()) for t in stored) / max(1, items)
    work = Path(tempfile.mkdtemp(prefix="neardup-bench-redis-"))
    print(
        f"neardup on Redis through the service vs datasketch MinHashLSH on Redis: {items:,} "
        f"stored ({args.stream}), {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.2f}"
    )
    results: dict[str, Any] = {"items": items, "stream": args.stream}
    proc, port = start_redis(work)
    if args.cpu:
        try:
            bodies = request_bodies(10 * args.batch_size, items, vocab, "c", 99, args.stream)
            got = cpu(port, stored, bodies, args.batch_size)
        finally:
            proc.terminate()
            proc.wait(30)
            shutil.rmtree(work, ignore_errors=True)
        print(
            f"  check_and_add_many in batches of {args.batch_size:,}, in-process: client "
            f"{got['client_ms']:.1f} ms CPU, redis-server {got['redis_ms']:.1f} ms CPU per "
            "1,000 texts"
        )
        return
    import redis

    server = redis.Redis(port=port)
    try:
        from neardup.backends.redis import RedisDeduplicator

        store = f"redis://127.0.0.1:{port}/0?namespace=bench"
        t0 = time.perf_counter()
        m0 = used_memory(server)
        with RedisDeduplicator.from_url(store) as d:
            for s in range(0, items, 5000):
                d.add_many(list(range(s, min(items, s + 5000))), stored[s : s + 5000])
        per_text = (used_memory(server) - m0) / items
        results["redis_bytes_per_text"] = per_text
        print(
            f"  stored {items:,} texts in {time.perf_counter() - t0:.1f} s (add_many); Redis "
            f"used_memory {per_text:,.0f} bytes a text (texts of {text_bytes:.0f} bytes on average)"
        )
        cmd = [sys.executable, "-m", "neardup", "serve", "--store", store, "--port", "0",
               "--retention", "none", "--max-batch", str(max(10_000, args.batch_size))]  # fmt: skip
        srv = Server(cmd).start()
        try:
            single_file = work / "single.jsonl"
            n_single = max(50_000, int(args.duration * 10_000))
            bodies = request_bodies(n_single, items, vocab, "s", 2, args.stream)
            single_file.write_bytes(b"\n".join(bodies))
            results["single"] = single_load(args, srv.host, srv.port, single_file)
            batch_file = work / "batch.jsonl"
            n_batch = max(100_000, int(args.duration * 40_000))
            batch_file.write_bytes(
                b"\n".join(request_bodies(n_batch, items, vocab, "b", 99, args.stream))
            )
            s0, r0 = process_cpu(srv.proc.pid), redis_cpu(server)  # type: ignore[union-attr]
            batch = python_load(srv.host, srv.port, batch_file, "/v1/check-and-add/batch",
                                connections=2, duration=args.duration,
                                batch_size=args.batch_size)  # fmt: skip
            s1, r1 = process_cpu(srv.proc.pid), redis_cpu(server)  # type: ignore[union-attr]
            batch["dps"] = batch["rps"] * args.batch_size
            docs = batch["requests"] * args.batch_size
            if docs > 0:  # (CPU per 1,000 texts: figures that follow the load much less)
                batch["service_ms"] = (s1 - s0) * 1e6 / docs
                batch["redis_ms"] = (r1 - r0) * 1e6 / docs
            results["batch"] = batch
        finally:
            srv.stop()
        stream = [orjson.loads(b)["text"] for b in bodies[: args.peer_docs]]
        results["peer"] = peer(server, port, stored, stream)
    finally:
        server.close()
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)

    s, b, p = results["single"], results["batch"], results["peer"]
    met_single = s["rps"] >= TARGET_SINGLE_RPS and s["p99_ms"] <= TARGET_P99_MS
    print(
        f"  single check-and-add ({s['tool']}, {args.connections} connections): "
        f"{s['rps']:,.0f} req/s, p50 {s['p50_ms']:.1f} ms, p99 {s['p99_ms']:.1f} ms; target >= "
        f"{TARGET_SINGLE_RPS:,} req/s, p99 <= {TARGET_P99_MS:g} ms: "
        f"{'MET' if met_single else 'MISSED'}; {s['rps'] / p['dps']:.1f}x the peer"
    )
    print(
        f"  batch route ({args.batch_size} a request, 2 connections): {b['dps']:,.0f} docs/s; "
        f"target >= {TARGET_BATCH_DPS:,}: {'MET' if b['dps'] >= TARGET_BATCH_DPS else 'MISSED'}; "
        f"{b['dps'] / p['dps']:.1f}x the peer"
    )
    if "service_ms" in b:
        print(
            f"    CPU per 1,000 texts: service process {b['service_ms']:.1f} ms, redis-server "
            f"{b['redis_ms']:.1f} ms"
        )
    print(
        f"  datasketch MinHashLSH on Redis, query-then-insert in-process: {p['dps']:,.0f} "
        f"docs/s ({args.peer_docs:,} texts); used_memory {p['bytes_per_text']:,.0f} bytes a "
        f"stored text (neardup {results['redis_bytes_per_text']:,.0f})"
    )
    if args.json:
        args.json.write_text(orjson.dumps(results, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
