"""Benchmark of the HTTP service (``neardup serve``) with a store of N short texts.

Measures, against a real server subprocess on loopback:

1. single-document ``POST /v1/check-and-add``: requests/s and p50/p99 latency, closed loop with
   C connections from two load-generator threads/processes (wrk when installed, else a lean asyncio
   HTTP/1.1 client in two processes: 2-core load generation);
2. documents/s through ``POST /v1/check-and-add/batch`` (batches of B short texts);

and, in the same run, the peers that bound them:

- ``backend``: the time the store itself spends per document (the serialized writer's busy
  time, read from ``/v1/stats``): the ceiling without HTTP;
- ``bare-asgi``: a do-nothing ASGI app under the same uvicorn/uvloop/httptools stack and the same
  load: the ceiling of Python HTTP on this machine;
- ``fastapi-only`` (``--compare-fastapi``): the service with ``--no-fast-path``.

The request mix is 80 % new texts and 20 % near-copies of stored ones (one word changed), short
texts of 8-20 words (~90 characters), like crawler titles and snippets.

Run: ``python benches/service.py --quick`` (20 k stored, a few minutes) or
``python benches/service.py`` (1 M stored; the store is built once under .bench-data/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
LISTEN_RE = re.compile(r"neardup: listening on http://([0-9.]+):(\d+)")
VOCAB_SIZE = 50_000
NEW_FRACTION = 0.8

TARGET_SINGLE_RPS = 5_000
TARGET_P99_MS = 10.0
TARGET_BATCH_DPS = 50_000


# -- corpus ----------------------------------------------------------------------------------------


def vocabulary(seed: int = 7) -> list[str]:
    r = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(r.choice(letters) for _ in range(r.randint(2, 10))) for _ in range(VOCAB_SIZE)]


#: The templated stream: one notice with a number filled in, each text a new number (the
#: texts of a template family are alike, J ~ 0.6-0.8, and mostly not copies of each other).
TEMPLATE = "尊敬的用户，您的订单编号{n}已发货，测试消息，请勿回复。Order {n} has shipped."


def stored_text(i: int, vocab: list[str], stream: str = "distinct") -> str:
    """The i-th preloaded text (deterministic, so near-copies can be made later)."""
    r = random.Random(i * 2654435761 % 2**32)
    if stream == "templated":
        return TEMPLATE.format(n=r.randrange(10**9))
    return " ".join(r.choice(vocab) for _ in range(r.randint(8, 20)))


def request_bodies(
    n: int, stored: int, vocab: list[str], tag: str, seed: int, stream: str = "distinct"
) -> list[bytes]:
    """``n`` JSON bodies {"id", "text"}: 80 % new texts, 20 % near-copies of stored ones
    (templated stream: each text the template with a new number)."""
    r = random.Random(seed)
    out = []
    for j in range(n):
        if stream == "templated":
            text = TEMPLATE.format(n=r.randrange(10**9))
        elif r.random() < NEW_FRACTION or stored == 0:
            text = " ".join(r.choice(vocab) for _ in range(r.randint(8, 20)))
        else:
            words = stored_text(r.randrange(stored), vocab).split()
            words[r.randrange(len(words))] = r.choice(vocab)
            text = " ".join(words)
        out.append(json.dumps({"id": f"{tag}-{j}", "text": text}).encode())
    return out


def preload(path: Path, n: int, k: int | None, stream: str = "distinct") -> float:
    """Build a store of ``n`` texts under ``path`` in-process (once; reused when present)."""
    # v2: built by the service's own store (fingerprints kept with the texts)
    marker = path / f"preloaded-{n}-{stream}-v2"
    if marker.exists():
        return 0.0
    from neardup.dedup import Policy
    from neardup.service.store import open_store

    if path.exists():
        shutil.rmtree(path)
    vocab = vocabulary()
    t0 = time.perf_counter()
    # sync="off" only while building the fixture; the server reopens it with its own setting
    policy = None if k is None else Policy.default().replace(k_short=k, k_long=k)
    d = open_store(path, sync="off", policy=policy)
    chunk = 20_000
    for start in range(0, n, chunk):
        ids = list(range(start, min(n, start + chunk)))
        d.add_many(ids, [stored_text(i, vocab, stream) for i in ids], [time.time()] * len(ids))
        print(f"  preload {start + len(ids):>9,}/{n:,}", end="\r", file=sys.stderr, flush=True)
    d.close()
    print(file=sys.stderr)
    marker.write_text("ok")
    return time.perf_counter() - t0


# -- servers ---------------------------------------------------------------------------------------


class Server:
    def __init__(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        self.cmd = cmd
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.host, self.port = "", 0
        self.lines: list[str] = []

    def start(self, timeout: float = 1800) -> Server:
        self.proc = subprocess.Popen(
            self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line)
                m = LISTEN_RE.search(line)
                if m:
                    self.host, self.port = m.group(1), int(m.group(2))
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout) or not self.port:
            raise RuntimeError("server did not start:\n" + "".join(self.lines))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=5).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("server exited:\n" + "".join(self.lines))
            time.sleep(0.2)
        raise RuntimeError("server not healthy in time")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def bare_app_main(port: int) -> None:
    """A do-nothing ASGI app on the service's uvicorn stack: reads the body, answers JSON."""
    import uvicorn

    answer = b'{"id":"x","added":true,"duplicates":[]}'

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(answer)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer})

    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen(2048)
    print(f"neardup: listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        app, loop="uvloop", http="httptools", access_log=False, log_level="warning", lifespan="off"
    )
    uvicorn.Server(config).run(sockets=[sock])


class NullBackend:
    """A backend that stores nothing and finds nothing: the service's own cost, alone."""

    def check(self, text: str, k: int | None = None) -> list[Any]:
        return []

    def check_many(self, texts: list[str], k: int | None = None) -> list[list[Any]]:
        return [[] for _ in texts]

    def add(self, id: Any, text: str, timestamp: float | None = None) -> int:
        return 0

    def add_many(self, ids: list[Any], texts: list[str], timestamps: Any = None) -> list[int]:
        return [0] * len(texts)

    def check_and_add(self, id: Any, text: str, timestamp: float | None = None) -> Any:
        return True, []

    def check_and_add_many(self, ids: list[Any], texts: list[str], timestamps: Any = None) -> Any:
        return [(True, [])] * len(texts)

    def expire(self, before: float) -> int:
        return 0

    def stats(self) -> dict[str, Any]:
        return {"documents": 0}

    def __len__(self) -> int:
        return 0

    def close(self) -> None:
        pass


def null_service_main(fast_path: bool) -> None:
    """The real service (routes, validation, serialized writer) over :class:`NullBackend`."""
    from neardup.service.app import create_app
    from neardup.service.runner import serve
    from neardup.service.settings import Settings

    settings = Settings(
        data_dir="unused", port=0, retention=None, max_batch=100_000, fast_path=fast_path
    )
    serve(settings, app=create_app(settings, backend=NullBackend()))


# -- load generation -------------------------------------------------------------------------------


def _request_bytes(path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _load(
    host: str,
    port: int,
    requests: list[bytes],
    connections: int,
    duration: float,
    rate: float = 0.0,
) -> dict[str, Any]:
    """Closed loop (each connection sends its next request when the answer came), or, with
    ``rate`` (requests/s over all of this process's connections), open loop: each connection
    sends on a fixed schedule, and a request's latency counts from its scheduled time (a late
    send is not forgiven: no coordinated omission)."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    position = [0]
    start = time.perf_counter()
    deadline = start + duration
    interval = connections / rate if rate else 0.0

    async def worker(w: int) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        due = start + interval * w / connections
        try:
            while time.perf_counter() < deadline:
                req = requests[position[0] % len(requests)]
                position[0] += 1
                if interval:
                    delay = due - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    t0 = due
                    due += interval
                else:
                    t0 = time.perf_counter()
                writer.write(req)
                head = await reader.readuntil(b"\r\n\r\n")
                lower = head.lower()
                i = lower.index(b"content-length:") + 15
                n = int(lower[i : lower.index(b"\r\n", i)])
                await reader.readexactly(n)
                latencies.append(time.perf_counter() - t0)
                status = int(head[9:12])
                statuses[status] = statuses.get(status, 0) + 1
        finally:
            writer.close()

    await asyncio.gather(*(worker(w) for w in range(connections)))
    return {"latencies": latencies, "statuses": statuses, "elapsed": time.perf_counter() - start}


def load_main(args: argparse.Namespace) -> None:
    """Child process: send the requests in ``args.requests`` (JSON lines of bodies)."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    bodies = Path(args.requests).read_bytes().splitlines()
    bodies = bodies[args.offset :: args.stride]
    if args.batch_size:
        reqs = []
        for i in range(0, len(bodies) - args.batch_size + 1, args.batch_size):
            reqs.append(
                _request_bytes(
                    args.path, b'{"items":[' + b",".join(bodies[i : i + args.batch_size]) + b"]}"
                )
            )
    else:
        reqs = [_request_bytes(args.path, b) for b in bodies]
    result = asyncio.run(
        _load(args.host, args.port, reqs, args.connections, args.duration, args.rate or 0.0)
    )
    lat = result["latencies"]
    # to a file, not stdout: the event loop may leave stdout non-blocking (a pipe fills at 64 KiB)
    Path(args.out).write_text(
        json.dumps(
            {
                "latencies_us": [int(x * 1e6) for x in lat],
                "statuses": result["statuses"],
                "elapsed": result["elapsed"],
            }
        )
    )


def python_load(
    host: str,
    port: int,
    requests_file: Path,
    path: str,
    connections: int,
    duration: float,
    batch_size: int = 0,
    procs: int = 2,
    rate: float = 0.0,
) -> dict[str, Any]:
    """Run ``procs`` load processes (2-core load), merge their latencies. ``rate``: open loop
    at this many requests/s in all (see :func:`_load`); 0: closed loop."""
    per = max(1, connections // procs)
    outs = [requests_file.with_suffix(f".out{i}.json") for i in range(procs)]
    children = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "_load",
                "--host",
                host,
                "--port",
                str(port),
                "--requests",
                str(requests_file),
                "--path",
                path,
                "--offset",
                str(i),
                "--stride",
                str(procs),
                "--connections",
                str(per),
                "--duration",
                str(duration),
                "--batch-size",
                str(batch_size),
                "--rate",
                str(rate / procs),
                "--out",
                str(outs[i]),
            ]
        )
        for i in range(procs)
    ]
    lat: list[int] = []
    statuses: dict[str, int] = {}
    elapsed = 0.0
    for child, out in zip(children, outs):
        if child.wait() != 0:
            raise RuntimeError(f"load generator exited with {child.returncode}")
        data = json.loads(out.read_text())
        out.unlink()
        lat.extend(data["latencies_us"])
        for k, v in data["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
        elapsed = max(elapsed, data["elapsed"])
    tool = f"python-asyncio x{procs}" + (f", open loop {rate:,.0f}/s" if rate else "")
    return summarize(lat, statuses, elapsed, tool)


def summarize(
    lat_us: list[int], statuses: dict[str, int], elapsed: float, tool: str
) -> dict[str, Any]:
    lat_us = sorted(lat_us)
    n = len(lat_us)

    def pct(p: float) -> float:
        return lat_us[min(n - 1, int(p * n))] / 1000 if n else float("nan")

    return {
        "tool": tool,
        "requests": n,
        "rps": n / elapsed if elapsed else 0.0,
        "p50_ms": pct(0.50),
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "mean_ms": statistics.fmean(lat_us) / 1000 if n else float("nan"),
        "statuses": statuses,
    }


WRK_SCRIPT = r"""
local bodies = {}
local n = 0
local threads = {}
local counter = 0
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  local f = assert(io.open(args[1], "r"))
  local stride, i = tonumber(args[2]), 0
  local mine = tonumber(tid) or 0  -- set by setup() in this thread's state
  for line in f:lines() do
    if i % stride == mine then n = n + 1; bodies[n] = line end
    i = i + 1
  end
  f:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end
function request()
  counter = counter + 1
  local body = bodies[(counter - 1) % n + 1]
  return wrk.format(nil, args_path, nil, body)
end
"""


WRK_DONE = r"""
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'JSON {"requests": %d, "duration_us": %d, "p50": %d, "p90": %d, "p99": %d, ' ..
    '"mean": %f, "non2xx": %d, "errors": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.mean, e.status, e.connect + e.read + e.write + e.timeout))
end
"""


def wrk_load(
    url: str, requests_file: Path, path: str, connections: int, duration: float
) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(f'args_path = "{path}"\n' + WRK_SCRIPT)
        f.write(WRK_DONE)

        script = f.name
    try:
        out = subprocess.run(
            [
                "wrk",
                "-t2",
                f"-c{connections}",
                f"-d{duration:.0f}s",
                "--timeout",
                "10s",
                "-s",
                script,
                url,
                "--",
                str(requests_file),
                "2",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        os.unlink(script)
    line = next(x for x in out.splitlines() if x.startswith("JSON "))
    data = json.loads(line[5:])
    secs = data["duration_us"] / 1e6
    return {
        "tool": "wrk -t2",
        "requests": data["requests"],
        "rps": data["requests"] / secs,
        "p50_ms": data["p50"] / 1000,
        "p90_ms": data["p90"] / 1000,
        "p99_ms": data["p99"] / 1000,
        "mean_ms": data["mean"] / 1000,
        "statuses": {"non2xx": data["non2xx"], "socket_errors": data["errors"]},
    }


def single_load(
    args: argparse.Namespace,
    host: str,
    port: int,
    requests_file: Path,
    path: str = "/v1/check-and-add",
) -> dict[str, Any]:
    if args.load == "wrk" or (args.load == "auto" and shutil.which("wrk")):
        return wrk_load(
            f"http://{host}:{port}", requests_file, path, args.connections, args.duration
        )
    return python_load(host, port, requests_file, path, args.connections, args.duration)


def rate_load(
    args: argparse.Namespace, host: str, port: int, requests_file: Path
) -> dict[str, Any]:
    """Single requests open loop at ``args.rate`` requests/s (python load, 2 processes)."""
    return python_load(
        host,
        port,
        requests_file,
        "/v1/check-and-add",
        connections=args.rate_connections,
        duration=args.duration,
        rate=args.rate,
    )


# -- main ------------------------------------------------------------------------------------------


def writer_stats(url: str) -> tuple[float, int, int]:
    """(seconds the writer and its committer spent in the backend, documents it wrote, backend
    calls it made)."""
    w = httpx.get(url + "/v1/stats", timeout=600).json()["writer"]
    return (
        float(w["busy_seconds"]) + float(w.get("commit_seconds", 0.0)),
        int(w["grouped_items"]) + int(w["call_items"]),
        int(w["groups"]) + int(w["calls"]),
    )


def fmt_row(name: str, r: dict[str, Any]) -> str:
    return (
        f"  {name:<34} {r['rps']:>10,.0f} req/s   p50 {r['p50_ms']:6.2f} ms   "
        f"p99 {r['p99_ms']:7.2f} ms   ({r['requests']:,} requests, {r['tool']}, "
        f"{r['statuses']})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k stored, shorter runs")
    parser.add_argument("--items", type=int, help="stored texts (default 1,000,000; quick 20,000)")
    parser.add_argument("--duration", type=float, help="seconds per load run (10; quick 5)")
    parser.add_argument("--connections", type=int, default=16, help="concurrent connections")
    parser.add_argument("--batch-size", type=int, default=1000, help="texts per batch request")
    parser.add_argument("--load", choices=["auto", "wrk", "python"], default="auto")
    parser.add_argument(
        "--sync",
        choices=["full", "normal", "both"],
        default="both",
        help="durability of the server's writes to measure",
    )
    parser.add_argument(
        "--compare-fastapi",
        action="store_true",
        help="also measure the service with --no-fast-path",
    )
    parser.add_argument(
        "--k",
        default="3",
        help="candidate radius of the store: bits, or 'policy' for the default "
        "policy's (default 3, the seed's and the issue's)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=TARGET_SINGLE_RPS,
        help="also measure single requests open loop at this rate (requests/s; latency from "
        "each request's scheduled time), the target's p99 condition; 0: skip",
    )
    parser.add_argument(
        "--rate-connections", type=int, default=32, help="connections of the open-loop run"
    )
    parser.add_argument(
        "--stream",
        choices=("distinct", "templated"),
        default="distinct",
        help="distinct: 80 %% new random texts, 20 %% near-copies; templated: one notice with a "
        "new number in every text (stored and sent)",
    )
    parser.add_argument("--data", type=Path, help="store directory (default .bench-data/)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    items = args.items if args.items is not None else (20_000 if args.quick else 1_000_000)
    args.duration = args.duration or (5.0 if args.quick else 10.0)
    k = None if args.k == "policy" else int(args.k)
    data = args.data or ROOT / ".bench-data" / f"service-{items}-k{args.k}-{args.stream}"
    work = Path(tempfile.mkdtemp(prefix="neardup-bench-service-"))
    print(
        f"neardup service benchmark: {items:,} stored short texts ({args.stream}), "
        f"{args.connections} connections, {args.duration:.0f} s per run, {os.cpu_count()} CPUs, "
        f"load avg {os.getloadavg()[0]:.2f}"
    )

    try:
        built = preload(data / "store", items, k, args.stream)
        if built:
            print(f"  built the store in {built:.0f} s ({items / built:,.0f} texts/s in-process)")
        vocab = vocabulary()
        n_single = max(50_000, int(args.duration * 20_000))
        results: dict[str, Any] = {"items": items, "k": args.k, "connections": args.connections}
        bare_file = work / "bare.jsonl"
        bare_file.write_bytes(b"\n".join(request_bodies(20_000, 0, vocab, "bare", 1)))

        # peers: a do-nothing app on the same HTTP stack; the service over a do-nothing backend
        bare = Server([sys.executable, __file__, "_bare"]).start()
        try:
            results["bare-asgi"] = single_load(args, bare.host, bare.port, bare_file)
        finally:
            bare.stop()
        null = Server([sys.executable, __file__, "_null"]).start()
        try:
            results["null-backend"] = single_load(args, null.host, null.port, bare_file)
            if args.rate:
                results["null-backend rate"] = rate_load(args, null.host, null.port, bare_file)
            results["null-backend batch"] = python_load(
                null.host,
                null.port,
                bare_file,
                "/v1/check-and-add/batch",
                connections=2,
                duration=args.duration,
                batch_size=args.batch_size,
            )
        finally:
            null.stop()
        if args.compare_fastapi:
            null = Server([sys.executable, __file__, "_null", "--no-fast-path"]).start()
            try:
                results["null-backend fastapi-only"] = single_load(
                    args, null.host, null.port, bare_file
                )
            finally:
                null.stop()

        syncs = ["full", "normal"] if args.sync == "both" else [args.sync]
        modes = [(s, False) for s in syncs] + ([(syncs[-1], True)] if args.compare_fastapi else [])
        for run_no, (sync, fastapi_only) in enumerate(modes):
            # each run works on its own copy of the store, so every run starts from N items
            store = work / f"store-{run_no}"
            shutil.copytree(data / "store", store)
            name = f"service sync={sync}" + (" fastapi-only" if fastapi_only else "")
            cmd = [
                sys.executable,
                "-m",
                "neardup",
                "serve",
                "--data",
                str(store),
                "--port",
                "0",
                "--retention",
                "none",
                "--sync",
                sync,
                "--max-batch",
                str(max(10_000, args.batch_size)),
            ]
            if fastapi_only:
                cmd.append("--no-fast-path")
            t0 = time.perf_counter()
            srv = Server(cmd).start()
            startup = time.perf_counter() - t0
            try:
                count = httpx.get(srv.url + "/v1/stats", timeout=600).json()["count"]
                assert count == items, (count, items)
                single_file = work / f"single-{run_no}.jsonl"
                single_file.write_bytes(
                    b"\n".join(
                        request_bodies(
                            n_single, items, vocab, f"s{run_no}", 2 + run_no, args.stream
                        )
                    )
                )
                busy0, done0, calls0 = writer_stats(srv.url)
                single = single_load(args, srv.host, srv.port, single_file)
                busy1, done1, calls1 = writer_stats(srv.url)
                single["backend_us_per_doc"] = (busy1 - busy0) / max(1, done1 - done0) * 1e6
                single["writes_per_group"] = (done1 - done0) / max(1, calls1 - calls0)
                results[name + " single"] = single
                if args.rate:
                    results[name + " rate"] = rate_load(args, srv.host, srv.port, single_file)

                if not fastapi_only:
                    batch_file = work / f"batch-{run_no}.jsonl"
                    n_batch = max(200_000, int(args.duration * 60_000))
                    batch_file.write_bytes(
                        b"\n".join(
                            request_bodies(
                                n_batch, items, vocab, f"b{run_no}", 99 + run_no, args.stream
                            )
                        )
                    )
                    busy0, done0, _ = writer_stats(srv.url)
                    batch = python_load(
                        srv.host,
                        srv.port,
                        batch_file,
                        "/v1/check-and-add/batch",
                        connections=2,
                        duration=args.duration,
                        batch_size=args.batch_size,
                    )
                    busy1, done1, _ = writer_stats(srv.url)
                    batch["docs"] = batch["requests"] * args.batch_size
                    batch["dps"] = (
                        batch["docs"] / (batch["requests"] / batch["rps"]) if batch["rps"] else 0.0
                    )
                    batch["backend_us_per_doc"] = (busy1 - busy0) / max(1, done1 - done0) * 1e6
                    results[name + " batch"] = batch
                results[name + " startup_s"] = startup
            finally:
                srv.stop()
                shutil.rmtree(store, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print("\nsingle-document POST /v1/check-and-add (closed loop):")
    bare_r = results["bare-asgi"]
    print(fmt_row("bare ASGI app (HTTP ceiling)", bare_r))
    print(fmt_row("service, null backend", results["null-backend"]))
    if "null-backend fastapi-only" in results:
        print(fmt_row("service, null backend, FastAPI only", results["null-backend fastapi-only"]))
    for key, r in results.items():
        if key.endswith(" single"):
            print(fmt_row(key[:-7], r))
            ceiling = 1e6 / r["backend_us_per_doc"] if r["backend_us_per_doc"] else float("inf")
            met = r["rps"] >= TARGET_SINGLE_RPS and r["p99_ms"] <= TARGET_P99_MS
            print(
                f"    backend {r['backend_us_per_doc']:.0f} us/doc in the writer "
                f"(ceiling {ceiling:,.0f} docs/s), {r['writes_per_group']:.2f} writes per "
                f"backend call; ratio to bare ASGI {r['rps'] / bare_r['rps']:.2f}; target "
                f">= {TARGET_SINGLE_RPS:,} req/s with p99 <= {TARGET_P99_MS} ms: "
                f"{'MET' if met else 'MISSED'}"
            )
    if args.rate:
        print(
            f"\nsingle-document POST /v1/check-and-add, open loop at {args.rate:,.0f} req/s "
            f"offered ({args.rate_connections} connections; latency from the scheduled send):"
        )
        for key, r in results.items():
            if key.endswith(" rate"):
                met = r["rps"] >= 0.98 * args.rate and r["p99_ms"] <= TARGET_P99_MS
                verdict = (
                    f"p99 <= {TARGET_P99_MS} ms at {args.rate:,.0f} req/s: "
                    f"{'MET' if met else 'MISSED'}"
                    if args.rate >= TARGET_SINGLE_RPS
                    else ""
                )
                print(f"{fmt_row(key[:-5], r)}  {verdict}")
    print(f"\nPOST /v1/check-and-add/batch ({args.batch_size} texts per request, 2 processes):")
    for key, r in results.items():
        if key.endswith(" batch") and "docs" not in r:  # the null backend's
            r["docs"] = r["requests"] * args.batch_size
            r["dps"] = r["rps"] * args.batch_size
            r["backend_us_per_doc"] = 0.0
        if key.endswith(" batch"):
            print(
                f"  {key[:-6]:<34} {r['dps']:>10,.0f} docs/s   p50 {r['p50_ms']:7.1f} ms per "
                f"batch   backend {r['backend_us_per_doc']:.1f} us/doc   target >= "
                f"{TARGET_BATCH_DPS:,}: {'MET' if r['dps'] >= TARGET_BATCH_DPS else 'MISSED'}"
            )
    for key, r in results.items():
        if key.endswith("startup_s"):
            print(f"  {key}: {r:.1f} s to open {items:,} stored texts")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def _sub_main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_bare":
        bare_app_main(0)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_null":
        null_service_main(fast_path="--no-fast-path" not in sys.argv)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_load":
        p = argparse.ArgumentParser()
        for name in ("--host", "--requests", "--path", "--out"):
            p.add_argument(name)
        for name in ("--port", "--offset", "--stride", "--connections", "--batch-size"):
            p.add_argument(name, type=int)
        p.add_argument("--duration", type=float)
        p.add_argument("--rate", type=float)
        load_main(p.parse_args(sys.argv[2:]))
        return
    main()


if __name__ == "__main__":
    _sub_main()
